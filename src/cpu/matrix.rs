//! A Q4 matrix in host memory, laid out for the CPU GEMV kernels: each row's packed
//! nibbles (q4vk's Q4 order, element `2j` in the low nibble of byte `j`) padded with zero
//! codes to a whole number of 32-element blocks, one f32 scale per group and, with zero
//! points, one byte per group. No dequantized copy is kept.

use crate::alloc;
use crate::error::{Error, Result};
use crate::import::canonical::DeviceParts;
use crate::quant::q4::{Q4Data, Q4Shape};

/// Elements of one block: the unit the kernels decode (16 bytes of codes).
pub(crate) const BLOCK: usize = 32;

/// An immutable Q4 matrix in host memory; shareable between threads.
pub struct CpuMatrix {
    /// Shape and scheme.
    pub shape: Q4Shape,
    /// `[n][row_stride]` packed codes; bytes past `ceil(k/2)` in a row are 0.
    pub codes: Vec<u8>,
    /// `[n][groups]` scales, widened to f32.
    pub scales: Vec<f32>,
    /// `[n][groups]` zero points 0..15 (empty when symmetric: every zero point is 8).
    pub zeros: Vec<u8>,
}

impl CpuMatrix {
    /// The matrix of an imported checkpoint's parts (`ImportedMatrix::device_parts`), or
    /// `Unsupported` when it needs what the CPU kernels lack: a column order (GPTQ
    /// act-order) or per-group offsets (GGUF Q4_1, Q4_K).
    pub fn imported((data, offsets, k_order): DeviceParts) -> Result<CpuMatrix> {
        if k_order.is_some() {
            return Err(Error::Unsupported(
                "desc->g_idx puts inputs of a group apart (GPTQ act-order); the CPU kernels \
                 do not gather x yet (Vulkan contexts do)"
                    .into(),
            ));
        }
        if offsets.is_some() {
            return Err(Error::Unsupported(
                "this source stores a float minimum per group (GGUF Q4_1, Q4_K); the CPU kernels \
                     do not take per-group offsets yet (Vulkan contexts do)"
                    .into(),
            ));
        }
        CpuMatrix::new(data)
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

    /// Zero point of group `i` (row-major `[n][groups]`) as f32.
    #[inline]
    pub fn zero(&self, i: usize) -> f32 {
        if self.shape.zero_points {
            self.zeros[i] as f32
        } else {
            8.0
        }
    }

    /// Bytes a GEMV streams from the matrix: codes, scales and zero points.
    pub fn bytes(&self) -> usize {
        self.codes.len() + 4 * self.scales.len() + self.zeros.len()
    }
}

fn row_stride(shape: &Q4Shape) -> usize {
    shape.k.div_ceil(BLOCK) * (BLOCK / 2)
}
