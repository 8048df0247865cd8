//! The AVX2 kernels of `super::blocks_dot` (x86-64): `vpmaddubsw` multiplies codes
//! (unsigned, up to 63) and digits into pairs of 16-bit sums (at most `2·63·128 = 16128`:
//! no saturation) and `vpmaddwd` by ones adds the pairs into 32-bit lanes of 4 columns.

use super::blocks_dot::{ColumnDigits, K_BLOCK, Q6K_RUN, SUB_BLOCK};
use super::digits::pow2;
use crate::import::gguf::q4k_scales_mins;
use crate::import::gguf_blocks::BlockType;
use std::arch::x86_64::*;

/// Whether this CPU runs the kernels (AVX2 and FMA).
pub fn supported() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
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
pub(super) unsafe fn k_row<const FIFTH: bool>(bytes: &[u8], xd: &ColumnDigits) -> f32 {
    let (low, one) = (_mm256_set1_epi8(15), _mm256_set1_epi8(1));
    let (block_bytes, codes_at) = match FIFTH {
        true => (BlockType::Q5K.block_bytes(), 48),
        false => (BlockType::Q4K.block_bytes(), 16),
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
                let sub = b * (K_BLOCK / SUB_BLOCK) + s;
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
pub(super) unsafe fn q6k_row(bytes: &[u8], xd: &ColumnDigits) -> f32 {
    let (low, two) = (_mm256_set1_epi8(15), _mm256_set1_epi8(3));
    let mut acc = _mm256_setzero_ps();
    let mut offsets = 0f64;
    for (b, block) in bytes.chunks_exact(BlockType::Q6K.block_bytes()).enumerate() {
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
                let column = b * K_BLOCK + 128 * h + 32 * p;
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
