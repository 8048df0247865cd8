//! The m = 1 GEMV on GGUF Q4_K, Q5_K and Q6_K blocks (CPU contexts) as integer dot
//! products: x in three signed 8-bit digits per column, in column order, with one scale per
//! 32 columns ([`ColumnDigits`]: the scheme of [`super::digits`]). Each type keeps a run of
//! 32 weights as 32 codes that one 32-byte load gives in column order: Q4_K's low nibbles
//! are one 32-weight sub-block and its high nibbles the next (Q5_K's likewise, with a fifth
//! bit from its high bytes); Q6_K's 6-bit codes are a nibble of its low bytes and two bits
//! of its high bytes. The kernels (`super::blocks_avx2` on x86-64 with AVX2,
//! `super::blocks_sdot` on aarch64 with the dot product) sum codes (unsigned, up to 63)
//! times digits in 32-bit lanes of 4 columns, the three digits combined in the lanes
//! (`|Σ| ≤ 4·63·(127.49·2^16 + 1/2) < 2^31`: exact). Each lane's sum times its weights'
//! scale and x's scale `t` is added in f32 lanes, and the code offsets (Q4_K's and Q5_K's
//! `dmin·m` per 32, Q6_K's `32·d·sc` per 16) times the sum of x over their columns (f64)
//! are subtracted in f64 — the values of gguf-py's `dequantize`, x to within its digits'
//! rounding (`2^-24` of its 32 columns' largest element).

use super::blocks::CpuBlocks;
use super::digits::{block_scale, measure_portable, pow2, row_exponent, split_one};
use crate::alloc;
use crate::error::Result;
use crate::import::gguf_blocks::BlockType;
use std::ops::Range;

#[cfg(target_arch = "x86_64")]
use super::blocks_avx2 as kernel;
#[cfg(target_arch = "aarch64")]
use super::blocks_sdot as kernel;

/// Columns per x scale: a Q4_K sub-block.
pub(super) const SUB_BLOCK: usize = 32;
/// Weights per block of every type the kernels take.
pub(super) const K_BLOCK: usize = 256;
/// Weights per Q6_K scale.
pub(super) const Q6K_RUN: usize = 16;

/// Whether this CPU runs the kernel (x86-64: AVX2 and FMA; aarch64: the dot product).
pub fn supported() -> bool {
    kernel::supported()
}

/// Whether the kernel runs a GEMV of `m` rows on `blocks`: Q4_K, Q5_K or Q6_K, one row of
/// x.
pub fn runs(blocks: &CpuBlocks, m: usize) -> bool {
    m == 1 && matches!(blocks.ty, BlockType::Q4K | BlockType::Q5K | BlockType::Q6K) && supported()
}

/// One row of x in digits, column by column.
pub struct ColumnDigits {
    /// `[3][k]`: digit `D0` of every column, then `D1`, then `D2`.
    pub(super) planes: Vec<i8>,
    /// `[k / 32]` the scale `t` of each 32 columns (0 where they are all zero).
    pub(super) scales: Vec<f32>,
    /// `[k / 32]` the sum of each 32 columns of x, in f64.
    pub(super) sums: Vec<f64>,
    /// `[k / 16]` the sum of each 16 columns of x, in f64.
    pub(super) half_sums: Vec<f64>,
    /// `E`: the digits stand for `x·2^-E`.
    pub(super) exponent: i32,
    /// Columns.
    pub(super) k: usize,
}

impl ColumnDigits {
    /// The digits of `x` (`k` columns, a multiple of 32): `None` where x has an infinite or
    /// NaN element (the f32 kernel keeps its policy for those). Allocation failures are
    /// `OutOfHostMemory`.
    pub fn new(x: &[f32], k: usize) -> Result<Option<ColumnDigits>> {
        assert!(k.is_multiple_of(SUB_BLOCK) && x.len() >= k);
        let x = &x[..k];
        let count = k / SUB_BLOCK;
        let mut sums = alloc::filled::<f64>(count, "the activations' block sums")?;
        let mut maxima = alloc::filled::<f32>(count, "the activations' block maxima")?;
        if !measure_portable(x, &mut sums, &mut maxima) {
            return Ok(None);
        }
        let exponent = row_exponent(maxima.iter().fold(0f32, |m, &v| m.max(v)));
        let half_sums = alloc::collect(
            x.chunks_exact(Q6K_RUN)
                .map(|run| run.iter().map(|&v| f64::from(v)).sum()),
            "the activations' sums per 16",
        )?;
        let mut planes = alloc::filled::<i8>(3 * k, "the activations' digits")?;
        let mut scales = alloc::filled::<f32>(count, "the activations' scales")?;
        let unit = pow2(-exponent);
        for (b, (block, &max)) in x.chunks_exact(SUB_BLOCK).zip(&maxima).enumerate() {
            if max == 0.0 {
                continue;
            }
            let t = block_scale(max, unit);
            let scale = unit / f64::from(t);
            for (c, &v) in block.iter().enumerate() {
                // Rounded to nearest, ties to even, in f64 (as `super::digits`).
                let q = (f64::from(v) * scale).round_ties_even() as i32;
                for (d, digit) in split_one(q).into_iter().enumerate() {
                    planes[d * k + b * SUB_BLOCK + c] = digit as i8;
                }
            }
            scales[b] = t;
        }
        Ok(Some(ColumnDigits {
            planes,
            scales,
            sums,
            half_sums,
            exponent,
            k,
        }))
    }
}

/// Rows `rows` of the Q4_K, Q5_K or Q6_K `blocks` (rows of `xd.k` columns) times x in
/// digits; `out` gets one value per row. The CPU must run the kernel on them ([`runs`],
/// asserted).
pub fn rows(blocks: &CpuBlocks, xd: &ColumnDigits, rows: Range<usize>, out: &mut [f32]) {
    assert!(runs(blocks, 1));
    // One row of blocks times x; the CPU must run it and the row hold k / 256 blocks.
    let row_dot: unsafe fn(&[u8], &ColumnDigits) -> f32 = match blocks.ty {
        BlockType::Q4K => kernel::k_row::<false>,
        BlockType::Q5K => kernel::k_row::<true>,
        _ => kernel::q6k_row,
    };
    let row_bytes = xd.k / K_BLOCK * blocks.ty.block_bytes();
    assert!(rows.end * row_bytes <= blocks.bytes.len() && out.len() >= rows.len());
    for (row, y) in rows.zip(out.iter_mut()) {
        let bytes = &blocks.bytes[row * row_bytes..][..row_bytes];
        // SAFETY: the CPU runs the kernel (asserted); the row holds k / 256 blocks and the
        // digits k columns.
        *y = unsafe { row_dot(bytes, xd) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::reference::gemv_dense;

    /// Pseudo-random blocks of `ty` for an `n` × `k` matrix: random codes and scale bytes,
    /// small finite f16 scales.
    fn tensor(ty: BlockType, n: usize, k: usize, seed: u64) -> Vec<u8> {
        let mut state = seed;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let size = ty.block_bytes();
        let mut bytes: Vec<u8> = (0..n * k / ty.block_elements() * size)
            .map(|_| next() as u8)
            .collect();
        for block in bytes.chunks_exact_mut(size) {
            for &(at, _) in ty.f16_scale_fields() {
                let v = half::f16::from_f32(0.001 + (next() % 1000) as f32 * 1e-5);
                block[at..at + 2].copy_from_slice(&v.to_le_bytes());
            }
        }
        bytes
    }

    #[test]
    fn the_integer_gemv_on_k_quants_matches_the_f64_reference() {
        let (n, k) = (37, 1024);
        if !supported() {
            // A CPU without AVX2 keeps the f32 decode on every type.
            let q4k = CpuBlocks::new(BlockType::Q4K, &tensor(BlockType::Q4K, 1, 256, 1)).unwrap();
            assert!(!runs(&q4k, 1));
            return;
        }
        let mut state = 0x1234_5678u64;
        // x over six orders of magnitude, 32 columns of zeros and one subnormal element.
        let mut x: Vec<f32> = (0..k)
            .map(|i| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                let u = (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
                u * 10f32.powi((i / 160) as i32 - 3)
            })
            .collect();
        x[64..96].fill(0.0);
        x[7] = 1e-40;
        let xd = ColumnDigits::new(&x, k).unwrap().unwrap();
        for ty in [BlockType::Q4K, BlockType::Q5K, BlockType::Q6K] {
            let bytes = tensor(ty, n, k, 0x5EED);
            let blocks = CpuBlocks::new(ty, &bytes).unwrap();
            assert!(runs(&blocks, 1) && !runs(&blocks, 2));
            let mut w = vec![0f32; n * k];
            let size = ty.block_bytes();
            for (block, w) in bytes.chunks_exact(size).zip(w.chunks_exact_mut(K_BLOCK)) {
                ty.decode(block, w);
            }
            let want = gemv_dense(&w, &x, n, k, 1);
            let mut y = vec![f32::NAN; n];
            rows(&blocks, &xd, 0..n, &mut y);
            let norm = want.iter().map(|v| v * v).sum::<f64>().sqrt();
            let err = y
                .iter()
                .zip(&want)
                .map(|(&a, &b)| (f64::from(a) - b).powi(2))
                .sum::<f64>()
                .sqrt();
            assert!(
                y.iter().all(|v| v.is_finite()),
                "{}: every row written",
                ty.name()
            );
            assert!(
                err / norm < 1e-6,
                "{}: relative error {}",
                ty.name(),
                err / norm
            );
        }
        // Another type keeps the f32 decode.
        let q8 = CpuBlocks::new(BlockType::Q8_0, &tensor(BlockType::Q8_0, 1, 256, 1)).unwrap();
        assert!(!runs(&q8, 1));
        // An infinite element leaves x to the f32 kernel.
        x[3] = f32::INFINITY;
        assert!(ColumnDigits::new(&x, k).unwrap().is_none());
    }
}
