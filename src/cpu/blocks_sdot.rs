//! The aarch64 kernels of `super::blocks_dot` (ARMv8.2 dot product, `SDOT`), a tile of 4
//! rows at a time (each 16 columns' x digits loaded once for the tile's rows), one build
//! per block type and form of x (three digits, or one byte: one `SDOT` per 16 columns).
//! 16 columns are one 16-byte vector of code values, decoded in a
//! register from the step's bytes (`half_codes`), and one of each digit; `SDOT` sums 4
//! products of value and digit into each 32-bit lane, and the 16 columns share one
//! weight scale (their run's, or Q6_K's and NVFP4's own). Values are signed bytes: unsigned codes (at most 63) as they are, Q8_0's
//! bytes, IQ4's and E2M1's values looked up with `TBL`.
//!
//! * Values of at most 63 (E2M1's: 12): the three digits are combined in the lanes
//!   (`|Σ| ≤ 4·63·(127.49·2^16 + 1/2) < 2^31`).
//! * Values up to 128 (Q8_0, IQ4): the lanes hold `Σ v·(D0·2^8 + D1)` (below `2^25`) and
//!   `Σ v·D2` apart, each made f32 and multiplied in with the scale (times 256 for the
//!   first).
//!
//! Their speed is not measured: the tests run under qemu, which emulates `SDOT` in
//! software.

use super::block_steps::{per_half, step_bytes, CodeClass, Step, HALF, STEP};
use super::blocks_dot::{finish, load_steps, pick, tile_builds, ColumnDigits, Tile, SUB_BLOCK};
use super::kernels::TILE_ROWS;
use super::sdot::sdot;
use crate::import::gguf_blocks::BlockType;
use std::arch::aarch64::*;

/// Whether this CPU runs the kernels (Advanced SIMD and the dot product).
pub fn supported() -> bool {
    super::sdot::supported()
}

/// The tile kernel for `ty` on x in three digits, or in one byte (`one_digit`).
pub(super) fn tile(ty: BlockType, one_digit: bool) -> Tile {
    pick(tile_builds!(tile_of), ty, one_digit)
}

/// `(bytes >> shift) & mask` per byte, `shift` below 8.
#[target_feature(enable = "neon")]
fn bits_at(bytes: uint8x16_t, shift: usize, mask: u8) -> uint8x16_t {
    vandq_u8(
        vshlq_u8(bytes, vdupq_n_s8(-(shift as i8))),
        vdupq_n_u8(mask),
    )
}

/// 16 in byte `j` where bit `j` of `bits` (16 bits) is set, else 0 (Q5_0's and Q5_1's
/// fifth bits).
#[target_feature(enable = "neon")]
fn fifth_bits(bits: u32) -> uint8x16_t {
    let spread = vcombine_u8(vdup_n_u8(bits as u8), vdup_n_u8((bits >> 8) as u8));
    let bit = vreinterpretq_u8_u64(vdupq_n_u64(0x8040_2010_0804_0201));
    vandq_u8(vtstq_u8(spread, bit), vdupq_n_u8(16))
}

/// The 16 codes of half `half` (columns `16·half..`) of a step of `ty` whose bytes start
/// at `step`: unsigned codes, Q8_0's bytes, or table indices.
///
/// # Safety
/// Advanced SIMD; the step's blocks up to the half's are readable at `step`.
#[target_feature(enable = "neon")]
#[inline]
unsafe fn half_codes(ty: BlockType, step: *const u8, half: usize) -> uint8x16_t {
    let (run, part) = (half / 2, half % 2);
    let load = |offset: usize| {
        // SAFETY: 16 bytes within the step's blocks (the caller's contract; offsets by
        // the layouts of `import::gguf_blocks`).
        unsafe { vld1q_u8(step.add(offset)) }
    };
    let qh = |offset: usize| {
        // SAFETY: as `load`.
        u32::from_le_bytes(unsafe { step.add(offset).cast::<[u8; 4]>().read_unaligned() })
    };
    // Of 16 bytes of nibbles: the low ones for the first half of a run, else the high ones.
    let nibble = |bytes: uint8x16_t| match part {
        0 => vandq_u8(bytes, vdupq_n_u8(0x0F)),
        _ => vshrq_n_u8::<4>(bytes),
    };
    match ty {
        BlockType::Q4K => bits_at(load(16 + 32 * (run / 2) + 16 * part), 4 * (run % 2), 0x0F),
        BlockType::Q5K => {
            let low = bits_at(load(48 + 32 * (run / 2) + 16 * part), 4 * (run % 2), 0x0F);
            let fifth = bits_at(load(16 + 16 * part), run, 1);
            vorrq_u8(low, vshlq_n_u8::<4>(fifth))
        }
        BlockType::Q6K => {
            let (h, p) = (run / 4, run % 4);
            let low = bits_at(load(64 * h + 32 * (p % 2) + 16 * part), 4 * (p / 2), 0x0F);
            let high = bits_at(load(128 + 32 * h + 16 * part), 2 * p, 3);
            vorrq_u8(low, vshlq_n_u8::<4>(high))
        }
        BlockType::Q4_1 => nibble(load(20 * run + 4)),
        BlockType::Q5_0 => vorrq_u8(
            nibble(load(22 * run + 6)),
            fifth_bits(qh(22 * run + 2) >> (16 * part)),
        ),
        BlockType::Q5_1 => vorrq_u8(
            nibble(load(24 * run + 8)),
            fifth_bits(qh(24 * run + 4) >> (16 * part)),
        ),
        BlockType::Q8_0 => load(34 * run + 2 + 16 * part),
        BlockType::Iq4Nl => nibble(load(18 * run + 2)),
        BlockType::Iq4Xs => nibble(load(8 + 16 * run)),
        BlockType::Mxfp4 => nibble(load(17 * run + 1)),
        BlockType::Nvfp4 => {
            // A sub-block of 8 bytes: its low nibbles, then its high ones.
            // SAFETY: 8 bytes within the block, as `load`.
            let bytes = unsafe { vld1_u8(step.add(36 * (half / 4) + 4 + 8 * (half % 4))) };
            vcombine_u8(vand_u8(bytes, vdup_n_u8(0x0F)), vshr_n_u8::<4>(bytes))
        }
    }
}

/// Rows of `BlockType::ALL[T]`, on x in three digits or (`ONE`) in one byte.
///
/// # Safety
/// Advanced SIMD and the dot product; each row holds `xd.k / block` blocks of the type.
#[target_feature(enable = "neon,dotprod")]
unsafe fn tile_of<const T: usize, const ONE: bool>(
    rows: [&[u8]; TILE_ROWS],
    xd: &ColumnDigits,
) -> [f32; TILE_ROWS] {
    let ty = BlockType::ALL[T];
    let class = CodeClass::of(ty);
    // SAFETY: 16 bytes.
    let table = class
        .table()
        .map(|values| unsafe { vld1q_s8(values.as_ptr()) });
    let wide = class.largest() > 63;
    let mut steps: [Step; TILE_ROWS] = std::array::from_fn(|_| Step::new());
    let mut acc = [vdupq_n_f32(0.0); TILE_ROWS];
    let mut constants = [0f64; TILE_ROWS];
    let bytes = step_bytes(ty);
    let planes = if ONE { 1 } else { 3 };
    debug_assert_eq!(xd.digits, planes);
    for (s, first) in (0..xd.k).step_by(STEP).enumerate() {
        let columns = STEP.min(xd.k - first);
        let tile = (&mut steps, &mut constants);
        load_steps(tile, (ty, &rows), xd, (s, first, columns));
        for half in 0..columns / HALF {
            let column = first + HALF * half;
            let t = xd.scales[column / SUB_BLOCK];
            let digits = [0, 1, 2].map(|p| match p < planes {
                // SAFETY: 16 of the plane's k digits.
                true => unsafe { vld1q_s8(xd.planes.as_ptr().add(p * xd.k + column)) },
                false => vdupq_n_s8(0),
            });
            for r in 0..TILE_ROWS {
                // SAFETY: the half lies within the row's step.
                let codes = unsafe { half_codes(ty, rows[r].as_ptr().add(s * bytes), half) };
                let values = match table {
                    Some(table) => vqtbl1q_s8(table, codes),
                    None => vreinterpretq_s8_u8(codes),
                };
                let at = if per_half(ty) { half } else { half / 2 };
                let scale = steps[r].scales[at] * t;
                let high = sdot(vdupq_n_s32(0), values, digits[0]);
                if ONE {
                    // |v·q| ≤ 128·127 per product: no overflow.
                    acc[r] = vfmaq_n_f32(acc[r], vcvtq_f32_s32(high), scale);
                    continue;
                }
                let high = sdot(vshlq_n_s32::<8>(high), values, digits[1]);
                if wide {
                    let low = sdot(vdupq_n_s32(0), values, digits[2]);
                    acc[r] = vfmaq_n_f32(acc[r], vcvtq_f32_s32(high), 256.0 * scale);
                    acc[r] = vfmaq_n_f32(acc[r], vcvtq_f32_s32(low), scale);
                } else {
                    let sum = sdot(vshlq_n_s32::<8>(high), values, digits[2]);
                    acc[r] = vfmaq_n_f32(acc[r], vcvtq_f32_s32(sum), scale);
                }
            }
        }
    }
    std::array::from_fn(|r| finish(f64::from(vaddvq_f32(acc[r])), xd, constants[r]))
}
