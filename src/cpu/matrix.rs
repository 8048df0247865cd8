//! A Q4 matrix in host memory, laid out for the CPU GEMV kernels: each row's packed
//! nibbles (q4vk's Q4 order, element `2j` in the low nibble of byte `j`) padded with zero
//! codes to a whole number of 32-element blocks, one f32 scale per group and, with zero
//! points, one byte per group, or, for formats that store a float minimum, one f32 offset
//! per group; for GPTQ act-order, the input each column holds. GGUF block types beyond
//! those codes keep the file's blocks (`cpu::blocks`). No dequantized copy is kept.

use super::blocks::CpuBlocks;
use crate::alloc;
use crate::error::{invalid, Error, Result};
use crate::import::canonical::DeviceParts;
use crate::import::gguf_blocks::BlockType;
use crate::quant::q4::{Q4Data, Q4Shape};

/// Elements of one block: the unit a row is padded to (16 bytes of codes).
pub(crate) const BLOCK: usize = 32;

/// An immutable Q4 matrix in host memory; shareable between threads. Weight `(row, j)` is
/// `s·(u − z)` (`s·(u − z) + o` with offsets) for its group's scale `s`, zero point `z` (8
/// when symmetric) and offset `o`; column `j` holds input `k_order[j]` (`j` without an order).
pub struct CpuMatrix {
    /// Shape and scheme.
    pub shape: Q4Shape,
    /// `[n][row_stride]` packed codes; bytes past `ceil(k/2)` in a row are 0.
    pub codes: Vec<u8>,
    /// `[n][groups]` scales, widened to f32.
    pub scales: Vec<f32>,
    /// `[n][groups]` zero points 0..15 (empty when symmetric: every zero point is 8; with
    /// offsets, see `offsets`).
    pub zeros: Vec<u8>,
    /// `[n][groups]` offsets (empty unless the source stores a float minimum `m` per group,
    /// GGUF Q4_1 and Q4_K: then `m + s·z`, `z` being the zero point 0..15 nearest `−m/s`).
    pub offsets: Vec<f32>,
    /// The input feature of each column (`k` entries, a permutation of `0..k`; empty when
    /// columns are inputs in order).
    pub k_order: Vec<u32>,
    /// The file's blocks, for a matrix of a GGUF block type kept as stored (then the codes,
    /// scales, zero points and offsets are empty, and `shape` has the block as its group).
    pub gguf_blocks: Option<CpuBlocks>,
}

impl CpuMatrix {
    /// The matrix of an imported checkpoint's parts (`ImportedMatrix::device_parts`): its
    /// Q4 data, per-group offsets (GGUF Q4_1, Q4_K) and column order (GPTQ act-order).
    pub fn imported((data, offsets, k_order): DeviceParts) -> Result<CpuMatrix> {
        let (n, k) = (data.shape.n, data.shape.k);
        if offsets.is_some_and(|o| o.len() != n * data.shape.groups()) {
            return Err(invalid!(
                "the per-group offsets do not match the matrix's groups"
            ));
        }
        if k_order.is_some_and(|o| o.len() != k || o.iter().any(|&i| i as usize >= k)) {
            return Err(invalid!("the column order is not {k} inputs below {k}"));
        }
        let mut mat = CpuMatrix::new(data)?;
        if let Some(offsets) = offsets {
            // w = s·u + o as s·(u − z) + (o + s·z), z the code nearest −o/s: an integer
            // zero point the integer kernel subtracts exactly, leaving a small offset.
            let z = |(&s, &o): (&f32, &f32)| (-o / s).round().clamp(0.0, 15.0) as u8;
            let pairs = || mat.scales.iter().zip(offsets);
            mat.zeros = alloc::collect(pairs().map(z), "the matrix's zero points")?;
            let rest =
                pairs().map(|p| (f64::from(*p.1) + f64::from(*p.0) * f64::from(z(p))) as f32);
            mat.offsets = alloc::collect(rest, "the matrix's offsets")?;
        }
        if let Some(order) = k_order {
            mat.k_order = alloc::collect(order.iter().copied(), "the matrix's column order")?;
        }
        Ok(mat)
    }

    /// Copies validated Q4 data into the kernel layout. Allocation failures are
    /// `OutOfHostMemory`.
    pub fn new(data: &Q4Data) -> Result<CpuMatrix> {
        let shape = data.shape;
        let stride = row_stride(&shape);
        let row_bytes = shape.row_bytes();
        let size = shape.n.checked_mul(stride).ok_or_else(|| {
            Error::OutOfHostMemory(format!(
                "{} rows of {stride} bytes overflow this platform's size_t",
                shape.n
            ))
        })?;
        let mut codes = alloc::filled::<u8>(size, "the matrix's codes")?;
        for (row, dst) in codes.chunks_exact_mut(stride).enumerate() {
            dst[..row_bytes].copy_from_slice(&data.weight[row * row_bytes..][..row_bytes]);
        }
        let scales = alloc::collect(
            (0..shape.scale_count()).map(|i| data.scale(i)),
            "the matrix's scales",
        )?;
        let zeros = alloc::collect(data.zeros.iter().copied(), "the matrix's zero points")?;
        Ok(CpuMatrix {
            shape,
            codes,
            scales,
            zeros,
            offsets: Vec::new(),
            k_order: Vec::new(),
            gguf_blocks: None,
        })
    }

    /// An `n` × `k` matrix of GGUF blocks of `ty` from `tensor` (the file's bytes, checked:
    /// whole rows of blocks, finite scales), kept as stored.
    pub fn of_blocks(ty: BlockType, n: usize, k: usize, tensor: &[u8]) -> Result<CpuMatrix> {
        Ok(CpuMatrix {
            shape: Q4Shape::new(n as u64, k as u64, ty.block_elements() as i32, 0)?,
            codes: Vec::new(),
            scales: Vec::new(),
            zeros: Vec::new(),
            offsets: Vec::new(),
            k_order: Vec::new(),
            gguf_blocks: Some(CpuBlocks::new(ty, tensor)?),
        })
    }

    /// Bytes of codes per row: `ceil(k/32)·16`.
    pub fn row_stride(&self) -> usize {
        row_stride(&self.shape)
    }

    /// Blocks per row: `ceil(k/32)`.
    pub fn blocks(&self) -> usize {
        self.shape.k.div_ceil(BLOCK)
    }

    /// Blocks per scale group (the last group of a row may have fewer).
    pub fn group_blocks(&self) -> usize {
        self.shape.group_size.div_ceil(BLOCK)
    }

    /// Bytes a GEMV streams from the matrix: codes, scales, zero points and offsets.
    pub fn bytes(&self) -> usize {
        self.gguf_blocks.as_ref().map_or(0, |b| b.bytes.len())
            + self.codes.len()
            + 4 * self.scales.len()
            + self.zeros.len()
            + 4 * self.offsets.len()
    }
}

fn row_stride(shape: &Q4Shape) -> usize {
    shape.k.div_ceil(BLOCK) * (BLOCK / 2)
}
