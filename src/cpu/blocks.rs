//! GGUF blocks in host memory (CPU contexts): the file's bytes as they are, decoded one
//! block at a time inside the GEMV (into a block of f32 on the stack, the exact values of
//! gguf-py's `dequantize`), never into a dequantized copy of the matrix.

use crate::alloc;
use crate::error::Result;
use crate::import::gguf_blocks::BlockType;
use std::ops::Range;

/// Largest block of any type (elements).
const MAX_BLOCK: usize = 256;

/// A matrix of GGUF blocks: `n` rows of `k / block` blocks of `ty`, as the file stores them.
pub struct CpuBlocks {
    /// The block type.
    pub ty: BlockType,
    /// The tensor's bytes.
    pub bytes: Vec<u8>,
}

impl CpuBlocks {
    /// A copy of `tensor` (checked by the caller: whole rows of blocks, finite scales).
    pub fn new(ty: BlockType, tensor: &[u8]) -> Result<CpuBlocks> {
        let bytes = alloc::collect(tensor.iter().copied(), "the matrix's blocks")?;
        Ok(CpuBlocks { ty, bytes })
    }

    /// Results of rows `rows` for the `m` rows of `x` (`k` each) into `out` (`m` per row,
    /// row-major by W's row): each block decoded once for all of x's rows, its products
    /// summed in f32 per block and the blocks' sums in f64.
    pub fn rows(&self, k: usize, x: &[f32], m: usize, rows: Range<usize>, out: &mut [f32]) {
        let (elems, size) = (self.ty.block_elements(), self.ty.block_bytes());
        let row_bytes = k / elems * size;
        let mut w = [0f32; MAX_BLOCK];
        let mut sums = vec![0f64; m];
        for (row, dst) in rows.zip(out.chunks_exact_mut(m)) {
            sums.iter_mut().for_each(|s| *s = 0.0);
            let bytes = &self.bytes[row * row_bytes..][..row_bytes];
            for (b, block) in bytes.chunks_exact(size).enumerate() {
                self.ty.decode(block, &mut w[..elems]);
                for (i, sum) in sums.iter_mut().enumerate() {
                    let xs = &x[i * k + b * elems..][..elems];
                    let dot: f32 = w[..elems].iter().zip(xs).map(|(w, x)| w * x).sum();
                    *sum += f64::from(dot);
                }
            }
            for (d, s) in dst.iter_mut().zip(&sums) {
                *d = *s as f32;
            }
        }
    }
}
