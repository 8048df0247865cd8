//! The aarch64 kernels of `super::blocks_dot` (ARMv8.2 dot product, `SDOT`): a run of 32
//! columns is two 16-byte vectors of codes (unsigned, up to 63, so signed bytes too) and of
//! each digit, and `SDOT` sums 4 products of code and digit into each 32-bit lane; a half's
//! 16 columns are one vector of 4 lanes, which is also Q6_K's run of one scale. Their speed
//! is not measured: the tests run under qemu, which emulates `SDOT` in software.

use super::blocks_dot::{ColumnDigits, K_BLOCK, Q6K_RUN, SUB_BLOCK};
use super::digits::pow2;
use super::sdot::sdot;
use crate::import::gguf::q4k_scales_mins;
use crate::import::gguf_blocks::BlockType;
use std::arch::aarch64::*;

/// Whether this CPU runs the kernels (Advanced SIMD and the dot product).
pub fn supported() -> bool {
    super::sdot::supported()
}

/// Σ codes·q over the 16 columns from `column` (codes in column order), in 4 lanes of 4
/// columns: `q = D0·2^16 + D1·2^8 + D2` of x's digits.
///
/// # Safety
/// Advanced SIMD and the dot product; `column + 16 ≤ xd.k`.
#[target_feature(enable = "neon,dotprod")]
unsafe fn lanes_of(codes: uint8x16_t, xd: &ColumnDigits, column: usize) -> int32x4_t {
    let codes = vreinterpretq_s8_u8(codes);
    let digits = |plane: usize| {
        // SAFETY: 16 of the plane's k digits (the caller's contract).
        unsafe { vld1q_s8(xd.planes.as_ptr().add(plane * xd.k + column)) }
    };
    let mut sum = sdot(vdupq_n_s32(0), codes, digits(0));
    sum = vshlq_n_s32::<8>(sum);
    sum = sdot(sum, codes, digits(1));
    sum = vshlq_n_s32::<8>(sum);
    sdot(sum, codes, digits(2))
}

/// Two 16-byte vectors from `at`.
///
/// # Safety
/// Advanced SIMD; 32 readable bytes at `at`.
#[target_feature(enable = "neon")]
unsafe fn load32(at: *const u8) -> [uint8x16_t; 2] {
    // SAFETY: 32 bytes (the caller's contract).
    unsafe { [vld1q_u8(at), vld1q_u8(at.add(16))] }
}

/// `v` shifted right by `bits` (0..8) in every byte.
#[target_feature(enable = "neon")]
fn shift_right(v: uint8x16_t, bits: usize) -> uint8x16_t {
    vshlq_u8(v, vdupq_n_s8(-(bits as i8)))
}

/// The f32 lanes of `acc` summed, in units of `2^E`, made a result with the offsets' sum
/// `offsets` (plain units) subtracted.
#[target_feature(enable = "neon")]
fn result(acc: float32x4_t, xd: &ColumnDigits, offsets: f64) -> f32 {
    (f64::from(vaddvq_f32(acc)) * pow2(xd.exponent) - offsets) as f32
}

/// One row of Q4_K blocks (`FIFTH` false) or Q5_K blocks (`bytes`, `xd.k / 256` blocks)
/// times x. Sub-block `s` of a block: the low nibbles (`s` even) or high nibbles of code
/// bytes `32(s / 2)..`; in Q5_K, with bit `s` of the 32 fifth-bit bytes as the code's
/// fifth bit.
///
/// # Safety
/// Advanced SIMD and the dot product; `bytes` holds `xd.k / 256` blocks.
#[target_feature(enable = "neon,dotprod")]
pub(super) unsafe fn k_row<const FIFTH: bool>(bytes: &[u8], xd: &ColumnDigits) -> f32 {
    let (low, one) = (vdupq_n_u8(15), vdupq_n_u8(1));
    let (block_bytes, codes_at) = match FIFTH {
        true => (BlockType::Q5K.block_bytes(), 48),
        false => (BlockType::Q4K.block_bytes(), 16),
    };
    let mut acc = vdupq_n_f32(0.0);
    let mut minima = 0f64;
    for (b, block) in bytes.chunks_exact(block_bytes).enumerate() {
        let f16_at = |i: usize| half::f16::from_le_bytes([block[i], block[i + 1]]).to_f32();
        let (d, dmin) = (f16_at(0), f16_at(2));
        let (scales, mins) = q4k_scales_mins(&block[4..16]);
        // SAFETY: the block's 32 fifth-bit bytes (read only for Q5_K).
        let fifth = FIFTH.then(|| unsafe { load32(block.as_ptr().add(16)) });
        for chunk in 0..4 {
            // SAFETY: 32 of the block's 128 code bytes.
            let codes = unsafe { load32(block.as_ptr().add(codes_at + 32 * chunk)) };
            for half in 0..2 {
                let s = 2 * chunk + half;
                let sub = b * (K_BLOCK / SUB_BLOCK) + s;
                let scale = d * f32::from(scales[s]) * xd.scales[sub];
                for part in 0..2 {
                    let nibbles = match half {
                        0 => vandq_u8(codes[part], low),
                        _ => vshrq_n_u8::<4>(codes[part]),
                    };
                    let codes = match fifth {
                        Some(bits) => {
                            let bit = vandq_u8(shift_right(bits[part], s), one);
                            vorrq_u8(nibbles, vshlq_n_u8::<4>(bit))
                        }
                        None => nibbles,
                    };
                    // SAFETY: the sub-block's 32 columns lie within k.
                    let sum = unsafe { lanes_of(codes, xd, sub * SUB_BLOCK + 16 * part) };
                    acc = vfmaq_n_f32(acc, vcvtq_f32_s32(sum), scale);
                }
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
/// Advanced SIMD and the dot product; `bytes` holds `xd.k / 256` blocks.
#[target_feature(enable = "neon,dotprod")]
pub(super) unsafe fn q6k_row(bytes: &[u8], xd: &ColumnDigits) -> f32 {
    let (low, two) = (vdupq_n_u8(15), vdupq_n_u8(3));
    let mut acc = vdupq_n_f32(0.0);
    let mut offsets = 0f64;
    for (b, block) in bytes.chunks_exact(BlockType::Q6K.block_bytes()).enumerate() {
        let d = half::f16::from_le_bytes([block[208], block[209]]).to_f32();
        let scales = &block[192..208];
        for h in 0..2 {
            // SAFETY: 32 of the block's 64 high bytes.
            let highs = unsafe { load32(block.as_ptr().add(128 + 32 * h)) };
            for p in 0..4 {
                // SAFETY: 32 of the block's 128 low bytes.
                let lows = unsafe { load32(block.as_ptr().add(64 * h + 32 * (p % 2))) };
                let column = b * K_BLOCK + 128 * h + 32 * p;
                let t = xd.scales[column / SUB_BLOCK];
                for part in 0..2 {
                    let nibbles = match p / 2 {
                        0 => vandq_u8(lows[part], low),
                        _ => vshrq_n_u8::<4>(lows[part]),
                    };
                    let bits = vandq_u8(shift_right(highs[part], 2 * p), two);
                    let codes = vorrq_u8(nibbles, vshlq_n_u8::<4>(bits));
                    let run = 8 * h + 2 * p + part;
                    let scale = d * f32::from(scales[run] as i8);
                    // SAFETY: the 16 columns lie within k.
                    let sum = unsafe { lanes_of(codes, xd, column + 16 * part) };
                    acc = vfmaq_n_f32(acc, vcvtq_f32_s32(sum), scale * t);
                    let half = column / Q6K_RUN + part;
                    offsets += 32.0 * f64::from(scale) * xd.half_sums[half];
                }
            }
        }
    }
    result(acc, xd, offsets)
}
