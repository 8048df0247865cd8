//! GGUF blocks in host memory (CPU contexts): the file's bytes as they are, decoded one
//! block at a time inside the GEMV (into a block of f32 on the stack, the exact values of
//! gguf-py's `dequantize`), never into a dequantized copy of the matrix. A GEMV of one row
//! runs as integer dot products on x86-64 CPUs with AVX2 and aarch64 CPUs with the dot
//! product instead (`super::blocks_dot`).

use crate::alloc;
use crate::error::Result;
use crate::import::gguf_blocks::BlockType;
use crate::simd::multiversion;
use std::ops::Range;

/// Largest block of any type (elements).
const MAX_BLOCK: usize = 256;

/// A matrix of GGUF blocks: `n` rows of `k / block` blocks of `ty`, as the file stores them.
pub struct CpuBlocks {
    /// The block type.
    pub ty: BlockType,
    /// The tensor's bytes.
    pub bytes: Vec<u8>,
    /// Whether every scale keeps the integer kernels' f32 lanes in range: MXFP4's
    /// exponents within `2^±64` (`E8M0_INTEGER_RANGE`); every other type's scales do.
    pub integer_scales: bool,
}

/// The E8M0 exponent bytes (`2^(e − 128)` with MXFP4's doubled values) whose blocks the
/// integer kernels take: products of codes, digits and both scales do not overflow f32.
/// (At the small end, as with every type, a weight scale times x's scale of its 32
/// columns below f32's normal range, weights and x both tiny against the row's largest,
/// loses that product's low bits or all of it.)
const E8M0_INTEGER_RANGE: std::ops::RangeInclusive<u8> = 64..=192;

impl CpuBlocks {
    /// A copy of `tensor` (checked by the caller: whole rows of blocks, finite scales).
    pub fn new(ty: BlockType, tensor: &[u8]) -> Result<CpuBlocks> {
        let bytes = alloc::collect(tensor.iter().copied(), "the matrix's blocks")?;
        let integer_scales = ty != BlockType::Mxfp4
            || bytes
                .chunks_exact(ty.block_bytes())
                .all(|block| E8M0_INTEGER_RANGE.contains(&block[0]));
        Ok(CpuBlocks {
            ty,
            bytes,
            integer_scales,
        })
    }

    /// Results of rows `rows` for the `m` rows of `x` (`k` each) into `out` (`m` per row,
    /// row-major by W's row): each block decoded once for all of x's rows, in steps of
    /// 256 inputs (one block, or several of the smaller types), each step's
    /// products summed in f32 in sixteen lanes and the steps' sums in f64.
    pub fn rows(&self, k: usize, x: &[f32], m: usize, rows: Range<usize>, out: &mut [f32]) {
        let (elems, size) = (self.ty.block_elements(), self.ty.block_bytes());
        let row_bytes = k / elems * size;
        let per_step = (MAX_BLOCK / elems).max(1);
        let mut w = [0f32; MAX_BLOCK];
        let mut sums = vec![0f64; m];
        for (row, dst) in rows.zip(out.chunks_exact_mut(m)) {
            sums.iter_mut().for_each(|s| *s = 0.0);
            let bytes = &self.bytes[row * row_bytes..][..row_bytes];
            for (step, blocks) in bytes.chunks(per_step * size).enumerate() {
                let inputs = blocks.len() / size * elems;
                for (block, w) in blocks.chunks_exact(size).zip(w.chunks_exact_mut(elems)) {
                    self.ty.decode(block, w);
                }
                for (i, sum) in sums.iter_mut().enumerate() {
                    let xs = &x[i * k + step * per_step * elems..][..inputs];
                    *sum += f64::from(dot(&w[..inputs], xs));
                }
            }
            for (d, s) in dst.iter_mut().zip(&sums) {
                *d = *s as f32;
            }
        }
    }
}

/// Lanes of [`dot`]'s partial sums: independent chains the compiler keeps in vector
/// registers (every block holds a multiple of this many inputs).
const LANES: usize = 16;

multiversion! {
    /// Σ w·x over a step (lengths equal, a multiple of [`LANES`]), in [`LANES`] partial sums
    /// added at the end (compiled for AVX2 too: the same products and sums in the same
    /// order, wider registers).
    fn dot<>(w: &[f32], x: &[f32]) -> f32 {
        let mut lanes = [0f32; LANES];
        for (w, x) in w.chunks_exact(LANES).zip(x.chunks_exact(LANES)) {
            for l in 0..LANES {
                lanes[l] += w[l] * x[l];
            }
        }
        lanes.iter().sum()
    }
}
