//! The m = 1 GEMV on GGUF Q4_K blocks (CPU contexts) as integer dot products on x86-64 CPUs
//! with AVX2: x in three signed 8-bit digits per column, in column order, with one scale
//! per 32 columns ([`ColumnDigits`]: the scheme of [`super::digits`], whose blocks of 32
//! are here the Q4_K sub-blocks). A Q4_K block keeps 64 weights per 32 code bytes: the low
//! nibbles are one sub-block's 32 weights in order, the high nibbles the next one's, so a
//! 32-byte load of codes meets 32 digits of each sub-block as they lie in memory.
//! `vpmaddubsw` multiplies codes (unsigned, up to 15) and digits into pairs of 16-bit sums
//! (at most `2·15·128 = 3840`: no saturation) and `vpmaddwd` by ones adds the pairs into
//! 32-bit lanes of 4 columns; the three digits are combined in the lanes (`|Σ| ≤
//! 4·15·128·(2^16 + 2^8 + 1) < 2^29`: exact). Per sub-block `s` of scale `d·sc_s`, minimum
//! `dmin·m_s` and x scale `t_s`, the lanes' sum times `d·sc_s·t_s` is added in f32 lanes
//! and `dmin·m_s·Σx` (Σx over the sub-block, in f64) subtracted in f64 — the values of
//! gguf-py's `dequantize` (`d·sc·q − dmin·m`), x to within its digits' rounding
//! (`2^-24` of a sub-block's largest element).

use super::blocks::CpuBlocks;
use super::digits::{block_scale, measure_portable, pow2, row_exponent, split_one};
use crate::alloc;
use crate::error::Result;
use crate::import::gguf::q4k_scales_mins;
use crate::import::gguf_blocks::BlockType;
use std::arch::x86_64::*;
use std::ops::Range;

/// Columns per x scale: a Q4_K sub-block.
const SUB_BLOCK: usize = 32;
/// Weights per Q4_K block.
const Q4K_ELEMENTS: usize = 256;
/// Bytes per Q4_K block: `d`, `dmin` (f16 each), 12 scale bytes, 128 code bytes.
const Q4K_BYTES: usize = 144;

/// Whether this CPU runs the kernel (AVX2 and FMA).
pub fn supported() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
}

/// Whether the kernel runs a GEMV of `m` rows on `blocks`: Q4_K, one row of x.
pub fn runs(blocks: &CpuBlocks, m: usize) -> bool {
    m == 1 && blocks.ty == BlockType::Q4K && supported()
}

/// One row of x in digits, column by column.
pub struct ColumnDigits {
    /// `[3][k]`: digit `D0` of every column, then `D1`, then `D2`.
    planes: Vec<i8>,
    /// `[k / 32]` the scale `t` of each 32 columns (0 where they are all zero).
    scales: Vec<f32>,
    /// `[k / 32]` the sum of each 32 columns of x, in f64.
    sums: Vec<f64>,
    /// `E`: the digits stand for `x·2^-E`.
    exponent: i32,
    /// Columns.
    k: usize,
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
            exponent,
            k,
        }))
    }
}

/// Rows `rows` of the Q4_K `blocks` (rows of `xd.k` columns) times x in digits; `out`
/// gets one value per row. The CPU must run the kernel ([`supported`], asserted).
pub fn rows(blocks: &CpuBlocks, xd: &ColumnDigits, rows: Range<usize>, out: &mut [f32]) {
    assert!(supported() && blocks.ty == BlockType::Q4K);
    let row_bytes = xd.k / Q4K_ELEMENTS * Q4K_BYTES;
    assert!(rows.end * row_bytes <= blocks.bytes.len() && out.len() >= rows.len());
    for (row, y) in rows.zip(out.iter_mut()) {
        let bytes = &blocks.bytes[row * row_bytes..][..row_bytes];
        // SAFETY: the CPU runs AVX2 and FMA (asserted); the row holds k / 256 blocks and
        // the digits k columns.
        *y = unsafe { row_dot(bytes, xd) };
    }
}

/// Four products of `codes` (unsigned bytes) and `digits` (signed) summed per 32-bit lane.
#[target_feature(enable = "avx2")]
fn dot4(codes: __m256i, digits: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(codes, digits), _mm256_set1_epi16(1))
}

/// One row of Q4_K blocks (`bytes`, `xd.k / 256` blocks) times x.
///
/// # Safety
/// AVX2 and FMA; `bytes` holds `xd.k / 256` blocks.
#[target_feature(enable = "avx2,fma")]
unsafe fn row_dot(bytes: &[u8], xd: &ColumnDigits) -> f32 {
    let low = _mm256_set1_epi8(15);
    let mut acc = _mm256_setzero_ps();
    let mut minima = 0f64;
    let digits = |plane: usize, column: usize| {
        // SAFETY: column + 32 ≤ k (a sub-block of the row), within the plane.
        unsafe { _mm256_loadu_si256(xd.planes.as_ptr().add(plane * xd.k + column).cast()) }
    };
    for (b, block) in bytes.chunks_exact(Q4K_BYTES).enumerate() {
        let f16_at = |i: usize| half::f16::from_le_bytes([block[i], block[i + 1]]).to_f32();
        let (d, dmin) = (f16_at(0), f16_at(2));
        let (scales, mins) = q4k_scales_mins(&block[4..16]);
        for chunk in 0..4 {
            // SAFETY: 32 of the block's 128 code bytes.
            let codes = unsafe { _mm256_loadu_si256(block.as_ptr().add(16 + 32 * chunk).cast()) };
            let nibbles = [
                _mm256_and_si256(codes, low),
                _mm256_and_si256(_mm256_srli_epi16::<4>(codes), low),
            ];
            for (half, nibbles) in nibbles.into_iter().enumerate() {
                let s = 2 * chunk + half;
                let sub = b * (Q4K_ELEMENTS / SUB_BLOCK) + s;
                let column = sub * SUB_BLOCK;
                let mut sum = dot4(nibbles, digits(0, column));
                sum = _mm256_slli_epi32::<8>(sum);
                sum = _mm256_add_epi32(sum, dot4(nibbles, digits(1, column)));
                sum = _mm256_slli_epi32::<8>(sum);
                sum = _mm256_add_epi32(sum, dot4(nibbles, digits(2, column)));
                let scale = d * f32::from(scales[s]) * xd.scales[sub];
                acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(scale), acc);
                minima += f64::from(dmin * f32::from(mins[s])) * xd.sums[sub];
            }
        }
    }
    let mut lanes = [0f32; 8];
    // SAFETY: an 8-lane array.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc) };
    let products: f64 = lanes.iter().map(|&v| f64::from(v)).sum();
    (products * pow2(xd.exponent) - minima) as f32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::reference::gemv_dense;

    /// A pseudo-random Q4_K row block: finite f16 scales, six-bit scales and minima, codes.
    fn q4k_tensor(n: usize, k: usize, seed: u64) -> Vec<u8> {
        let mut state = seed;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut bytes = Vec::with_capacity(n * k / Q4K_ELEMENTS * Q4K_BYTES);
        for _ in 0..n * k / Q4K_ELEMENTS {
            let d = half::f16::from_f32(0.001 + (next() % 1000) as f32 * 1e-5);
            let dmin = half::f16::from_f32((next() % 1000) as f32 * 1e-5);
            bytes.extend(d.to_le_bytes());
            bytes.extend(dmin.to_le_bytes());
            bytes.extend((0..Q4K_BYTES - 4).map(|_| next() as u8));
        }
        bytes
    }

    #[test]
    fn the_integer_gemv_on_q4_k_matches_the_f64_reference() {
        if !supported() {
            eprintln!("no AVX2: the kernel does not run here");
            return;
        }
        let (n, k) = (37, 1024);
        let tensor = q4k_tensor(n, k, 0x5EED);
        let blocks = CpuBlocks::new(BlockType::Q4K, &tensor).unwrap();
        let mut w = vec![0f32; n * k];
        for (block, w) in tensor
            .chunks_exact(Q4K_BYTES)
            .zip(w.chunks_exact_mut(Q4K_ELEMENTS))
        {
            BlockType::Q4K.decode(block, w);
        }
        let mut state = 0x1234_5678u64;
        // x over six orders of magnitude, a sub-block of zeros and one subnormal element.
        let mut x: Vec<f32> = (0..k)
            .map(|i| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                let u = (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
                u * 10f32.powi((i / 160) as i32 - 3)
            })
            .collect();
        x[64..96].fill(0.0);
        x[7] = 1e-40;
        let want = gemv_dense(&w, &x, n, k, 1);
        let xd = ColumnDigits::new(&x, k).unwrap().unwrap();
        let mut y = vec![f32::NAN; n];
        rows(&blocks, &xd, 0..n, &mut y);
        let norm = want.iter().map(|v| v * v).sum::<f64>().sqrt();
        let err = y
            .iter()
            .zip(&want)
            .map(|(&a, &b)| (f64::from(a) - b).powi(2))
            .sum::<f64>()
            .sqrt();
        assert!(y.iter().all(|v| v.is_finite()), "every row written");
        assert!(err / norm < 1e-6, "relative error {}", err / norm);
        // An infinite element leaves x to the f32 kernel.
        x[3] = f32::INFINITY;
        assert!(ColumnDigits::new(&x, k).unwrap().is_none());
    }
}
