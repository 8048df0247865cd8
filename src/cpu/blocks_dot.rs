//! The m = 1 GEMV on GGUF Q4_K, Q5_K and Q6_K blocks (CPU contexts) as integer dot
//! products on x86-64 CPUs with AVX2: x in three signed 8-bit digits per column, in column
//! order, with one scale per 32 columns ([`ColumnDigits`]: the scheme of
//! [`super::digits`]). Each type keeps a run of 32 weights as 32 codes that one 32-byte
//! load gives in column order: Q4_K's low nibbles are one 32-weight sub-block and its high
//! nibbles the next (Q5_K's likewise, with a fifth bit from its high bytes); Q6_K's 6-bit
//! codes are a nibble of its low bytes and two bits of its high bytes. `vpmaddubsw`
//! multiplies codes (unsigned, up to 63) and digits into pairs of 16-bit sums (at most
//! `2·63·128 = 16128`: no saturation) and `vpmaddwd` by ones adds the pairs into 32-bit
//! lanes of 4 columns; the three digits are combined in the lanes
//! (`|Σ| ≤ 4·63·(127.49·2^16 + 1/2) < 2^31`: exact). Each lane's sum times its weights'
//! scale and x's scale `t` is added in f32 lanes, and the code offsets (Q4_K's and Q5_K's
//! `dmin·m` per 32, Q6_K's `32·d·sc` per 16) times the sum of x over their columns (f64)
//! are subtracted in f64 — the values of gguf-py's `dequantize`, x to within its digits'
//! rounding (`2^-24` of its 32 columns' largest element).

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
/// Bytes per Q5_K block: `d`, `dmin` (f16 each), 12 scale bytes, 32 bytes of fifth bits,
/// 128 code bytes.
const Q5K_BYTES: usize = 176;
/// Bytes per Q6_K block: 128 bytes of low nibbles, 64 of high bits, 16 scales (i8), `d`.
const Q6K_BYTES: usize = 210;
/// Weights per Q6_K scale.
const Q6K_RUN: usize = 16;

/// Whether this CPU runs the kernel (AVX2 and FMA).
pub fn supported() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
}

/// Whether the kernel runs a GEMV of `m` rows on `blocks`: Q4_K, Q5_K or Q6_K, one row of
/// x.
pub fn runs(blocks: &CpuBlocks, m: usize) -> bool {
    m == 1 && matches!(blocks.ty, BlockType::Q4K | BlockType::Q5K | BlockType::Q6K) && supported()
}

/// One row of x in digits, column by column.
pub struct ColumnDigits {
    /// `[3][k]`: digit `D0` of every column, then `D1`, then `D2`.
    planes: Vec<i8>,
    /// `[k / 32]` the scale `t` of each 32 columns (0 where they are all zero).
    scales: Vec<f32>,
    /// `[k / 32]` the sum of each 32 columns of x, in f64.
    sums: Vec<f64>,
    /// `[k / 16]` the sum of each 16 columns of x, in f64.
    half_sums: Vec<f64>,
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

/// One row of a type's blocks times x in digits (`k_row`, `q6k_row`).
type RowDot = unsafe fn(&[u8], &ColumnDigits) -> f32;

/// Rows `rows` of the Q4_K, Q5_K or Q6_K `blocks` (rows of `xd.k` columns) times x in
/// digits; `out` gets one value per row. The CPU must run the kernel on them ([`runs`], asserted).
pub fn rows(blocks: &CpuBlocks, xd: &ColumnDigits, rows: Range<usize>, out: &mut [f32]) {
    assert!(runs(blocks, 1));
    let (block_bytes, row_dot): (usize, RowDot) = match blocks.ty {
        BlockType::Q4K => (Q4K_BYTES, k_row::<false>),
        BlockType::Q5K => (Q5K_BYTES, k_row::<true>),
        _ => (Q6K_BYTES, q6k_row),
    };
    let row_bytes = xd.k / Q4K_ELEMENTS * block_bytes;
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

/// Σ codes·q over 32 columns from `column` (codes in column order, unsigned, up to 63),
/// in 8 lanes of 4 columns: `q = D0·2^16 + D1·2^8 + D2` of x's digits.
///
/// # Safety
/// AVX2; `column + 32 ≤ xd.k`.
#[target_feature(enable = "avx2")]
unsafe fn lanes_of(codes: __m256i, xd: &ColumnDigits, column: usize) -> __m256i {
    let digits = |plane: usize| {
        // SAFETY: 32 of the plane's k digits (the caller's contract).
        unsafe { _mm256_loadu_si256(xd.planes.as_ptr().add(plane * xd.k + column).cast()) }
    };
    let mut sum = dot4(codes, digits(0));
    sum = _mm256_slli_epi32::<8>(sum);
    sum = _mm256_add_epi32(sum, dot4(codes, digits(1)));
    sum = _mm256_slli_epi32::<8>(sum);
    _mm256_add_epi32(sum, dot4(codes, digits(2)))
}

/// The f32 lanes of `acc` summed in f64, in units of `2^E`, and made a result with the
/// offsets' sum `offsets` (plain units) subtracted.
#[target_feature(enable = "avx2")]
fn result(acc: __m256, xd: &ColumnDigits, offsets: f64) -> f32 {
    let mut lanes = [0f32; 8];
    // SAFETY: an 8-lane array.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc) };
    let products: f64 = lanes.iter().map(|&v| f64::from(v)).sum();
    (products * pow2(xd.exponent) - offsets) as f32
}

/// One row of Q4_K blocks (`FIFTH` false) or Q5_K blocks (`bytes`, `xd.k / 256` blocks)
/// times x. Sub-block `s` of a block: the low nibbles (`s` even) or high nibbles of code
/// bytes `32(s / 2)..`; in Q5_K, with bit `s` of the 32 fifth-bit bytes as the code's
/// fifth bit.
///
/// # Safety
/// AVX2 and FMA; `bytes` holds `xd.k / 256` blocks.
#[target_feature(enable = "avx2,fma")]
unsafe fn k_row<const FIFTH: bool>(bytes: &[u8], xd: &ColumnDigits) -> f32 {
    let (low, one) = (_mm256_set1_epi8(15), _mm256_set1_epi8(1));
    let (block_bytes, codes_at) = match FIFTH {
        true => (Q5K_BYTES, 48),
        false => (Q4K_BYTES, 16),
    };
    let mut acc = _mm256_setzero_ps();
    let mut minima = 0f64;
    for (b, block) in bytes.chunks_exact(block_bytes).enumerate() {
        let f16_at = |i: usize| half::f16::from_le_bytes([block[i], block[i + 1]]).to_f32();
        let (d, dmin) = (f16_at(0), f16_at(2));
        let (scales, mins) = q4k_scales_mins(&block[4..16]);
        // Q5_K's fifth bits: bit s of byte l for column l of sub-block s.
        // SAFETY: the block's 32 fifth-bit bytes (read only for Q5_K).
        let fifth = FIFTH.then(|| unsafe { _mm256_loadu_si256(block.as_ptr().add(16).cast()) });
        for chunk in 0..4 {
            // SAFETY: 32 of the block's 128 code bytes.
            let codes =
                unsafe { _mm256_loadu_si256(block.as_ptr().add(codes_at + 32 * chunk).cast()) };
            let nibbles = [
                _mm256_and_si256(codes, low),
                _mm256_and_si256(_mm256_srli_epi16::<4>(codes), low),
            ];
            for (half, nibbles) in nibbles.into_iter().enumerate() {
                let s = 2 * chunk + half;
                let codes = match fifth {
                    Some(bits) => {
                        let shift = _mm_cvtsi32_si128(s as i32);
                        let bit = _mm256_and_si256(_mm256_srl_epi16(bits, shift), one);
                        _mm256_or_si256(nibbles, _mm256_slli_epi16::<4>(bit))
                    }
                    None => nibbles,
                };
                let sub = b * (Q4K_ELEMENTS / SUB_BLOCK) + s;
                // SAFETY: the sub-block's 32 columns lie within k.
                let sum = unsafe { lanes_of(codes, xd, sub * SUB_BLOCK) };
                let scale = d * f32::from(scales[s]) * xd.scales[sub];
                acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(scale), acc);
                minima += f64::from(dmin * f32::from(mins[s])) * xd.sums[sub];
            }
        }
    }
    result(acc, xd, minima)
}

/// One row of Q6_K blocks (`bytes`, `xd.k / 256` blocks) times x. Element `128h + 32p +
/// l` of a block: the low nibble of low byte `64h + 32(p % 2) + l` (the high one for
/// p ≥ 2) and bits `2p, 2p + 1` of high byte `32h + l`, minus 32; scale `(128h + 32p +
/// l) / 16`.
///
/// # Safety
/// AVX2 and FMA; `bytes` holds `xd.k / 256` blocks.
#[target_feature(enable = "avx2,fma")]
unsafe fn q6k_row(bytes: &[u8], xd: &ColumnDigits) -> f32 {
    let (low, two) = (_mm256_set1_epi8(15), _mm256_set1_epi8(3));
    let mut acc = _mm256_setzero_ps();
    let mut offsets = 0f64;
    for (b, block) in bytes.chunks_exact(Q6K_BYTES).enumerate() {
        let d = half::f16::from_le_bytes([block[208], block[209]]).to_f32();
        let scales = &block[192..208];
        for h in 0..2 {
            // SAFETY: 32 of the block's 64 high bytes.
            let highs = unsafe { _mm256_loadu_si256(block.as_ptr().add(128 + 32 * h).cast()) };
            for p in 0..4 {
                let at = 64 * h + 32 * (p % 2);
                // SAFETY: 32 of the block's 128 low bytes.
                let lows = unsafe { _mm256_loadu_si256(block.as_ptr().add(at).cast()) };
                let lows = match p / 2 {
                    0 => _mm256_and_si256(lows, low),
                    _ => _mm256_and_si256(_mm256_srli_epi16::<4>(lows), low),
                };
                let bits = match p {
                    0 => highs,
                    1 => _mm256_srli_epi16::<2>(highs),
                    2 => _mm256_srli_epi16::<4>(highs),
                    _ => _mm256_srli_epi16::<6>(highs),
                };
                let codes =
                    _mm256_or_si256(lows, _mm256_slli_epi16::<4>(_mm256_and_si256(bits, two)));
                let run = 8 * h + 2 * p;
                let column = b * Q4K_ELEMENTS + 128 * h + 32 * p;
                // SAFETY: the 32 columns lie within k.
                let sum = unsafe { lanes_of(codes, xd, column) };
                let (s0, s1) = (
                    d * f32::from(scales[run] as i8),
                    d * f32::from(scales[run + 1] as i8),
                );
                let t = xd.scales[column / SUB_BLOCK];
                let scale = _mm256_set_m128(_mm_set1_ps(s1 * t), _mm_set1_ps(s0 * t));
                acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), scale, acc);
                let half = column / Q6K_RUN;
                offsets += 32.0
                    * (f64::from(s0) * xd.half_sums[half] + f64::from(s1) * xd.half_sums[half + 1]);
            }
        }
    }
    result(acc, xd, offsets)
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
            for (block, w) in bytes
                .chunks_exact(size)
                .zip(w.chunks_exact_mut(Q4K_ELEMENTS))
            {
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
