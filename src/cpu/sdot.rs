//! The m = 1 GEMV as integer dot products on aarch64 (ARMv8.2 dot product, `SDOT`): the
//! scheme of the AVX-512 VNNI kernel (`vnni`) in 128-bit vectors. The codes stay
//! nibbles (0..15, so signed bytes too), x is in three signed 8-bit digits ([`Digits`]),
//! and `SDOT` sums 4 products of code and digit into each 32-bit lane, 16 per instruction.
//!
//! A block of 32 columns is one 16-byte vector of codes and, per digit, one vector of its
//! even columns and one of its odd ones; the 4 lanes of a dot product are lanes `4b..4b + 4`
//! of the digits' piece (block `b` of the piece), so a block has one x scale, one weight
//! scale and one zero point. Per row and block: a load of codes, a mask for the low
//! nibbles (even columns) and a shift for the high ones (odd columns), and per digit two
//! `SDOT` into one accumulator shifted left by 8 before the next digit, so it ends as
//! `Σ u·q` per lane (the bound of the VNNI kernel: `< 2^30`). The zero point comes off
//! exactly in the lanes (`Σ (u − z)·q = Σ u·q − z·Σ q`, one multiply-subtract with x's
//! lane sums; `z = 8` for symmetric codes); the lanes become f32 and are multiplied into
//! an f32 accumulator by the block's x scale times the group's weight scale. A matrix
//! with offsets adds `Σ_groups o·Σx` at the row's end. The 6 digit vectors of a block are
//! loaded once per tile of 4 rows.
//!
//! Instructions per 128 codes (4 blocks) and row: 4 × (load, mask, shift, 6 `SDOT`,
//! 2 shifts, multiply-subtract, convert, FMA) = 56 vector instructions, and per block a
//! scalar multiply of the two scales and loads of the weight scale (and zero point); the
//! 7 loads of x per block are shared by the tile's 4 rows. The f32 NEON kernel spends
//! 8 × 21 = 168 (per 16 codes: load, mask, shift, 6 widenings, 4 conversions, 4 FMAs to
//! decode and 4 to multiply), plus 4 loads of x per 16 codes shared by 4 rows. Its speed is not measured: the tests run under
//! qemu, which emulates `SDOT` in software. There is no prefetch (aarch64's prefetch
//! intrinsic is not stable Rust), and `SDOT` rather than `USDOT` (i8mm): the codes fit
//! signed bytes, so the mixed-sign product gains nothing. `SDOT` is written as inline
//! assembly: its intrinsic (`vdotq_s32`) is not stable Rust yet.

use super::digits::{Digits, LANES, PIECE, PIECE_BYTES};
use super::kernels::{integer_rows, OFFSETS, SYMMETRIC, TILE_ROWS, ZERO_POINTS};
use super::matrix::{CpuMatrix, BLOCK};
use std::arch::aarch64::*;
use std::arch::asm;
use std::ops::Range;

/// Code bytes of a block: one 16-byte vector (and the bytes of one digit's even or odd
/// columns).
const BLOCK_BYTES: usize = BLOCK / 2;
/// Bytes between consecutive ones of a piece's 6 digit vectors (D0 of the even columns,
/// D0 of the odd ones, D1 alike, D2 alike).
const DIGIT_STRIDE: usize = PIECE / 2;

/// Whether this CPU runs the kernel (Advanced SIMD and the dot product).
pub fn supported() -> bool {
    std::arch::is_aarch64_feature_detected!("neon")
        && std::arch::is_aarch64_feature_detected!("dotprod")
}

/// Rows `rows` of W times x (in digits); `out` gets one value per row. The CPU must run
/// the kernel ([`supported`], asserted); `xd` must be the digits of a row of `k` inputs
/// with the matrix's group size.
pub fn rows(mat: &CpuMatrix, xd: &Digits, rows: Range<usize>, out: &mut [f32]) {
    assert!(supported() && mat.row_stride() == mat.blocks() * BLOCK_BYTES);
    let tiles = [tile::<SYMMETRIC>, tile::<ZERO_POINTS>, tile::<OFFSETS>];
    // SAFETY: the CPU runs the kernel; the tiles need only the checked sizes.
    unsafe { integer_rows(mat, xd, rows, out, tiles) }
}

/// `acc + Σ a·b` over each 32-bit lane's 4 bytes (`SDOT`).
#[target_feature(enable = "neon,dotprod")]
#[inline]
pub(super) fn sdot(mut acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    // SAFETY: `SDOT` reads and writes registers only; the CPU has the dot product (this
    // function's target feature).
    unsafe {
        asm!(
            "sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
            acc = inout(vreg) acc,
            a = in(vreg) a,
            b = in(vreg) b,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    acc
}

/// The results of 4 rows of W (`rows`, each < n).
///
/// # Safety
/// Advanced SIMD and the dot product; the sizes [`rows`] checks.
#[target_feature(enable = "neon,dotprod")]
unsafe fn tile<const KIND: u8>(
    mat: &CpuMatrix,
    xd: &Digits,
    rows: [usize; TILE_ROWS],
) -> [f32; TILE_ROWS] {
    let (stride, groups) = (mat.row_stride(), mat.shape.groups());
    let group_blocks = mat.group_blocks();
    let low = vdupq_n_u8(15);
    let mut acc = [vdupq_n_f32(0.0); TILE_ROWS];
    for block in 0..mat.blocks() {
        let (piece, b) = (block / 4, block % 4);
        let lane = piece * LANES + b * 4;
        // SAFETY: block < blocks ≤ 4·pieces: the digits hold PIECE_BYTES per piece (each
        // digit's even and odd columns 64 bytes apart, the block's 16 at b·16), and
        // LANES lane sums per piece.
        let (x, lane_sums) = unsafe {
            let d = xd.bytes.as_ptr().add(piece * PIECE_BYTES + b * BLOCK_BYTES);
            let x: [int8x16_t; 6] = std::array::from_fn(|i| vld1q_s8(d.add(i * DIGIT_STRIDE)));
            (x, vld1q_s32(xd.lane_sums.as_ptr().add(lane)))
        };
        let t = xd.scales[lane];
        let g = block / group_blocks;
        for (r, acc) in rows.iter().zip(acc.iter_mut()) {
            // SAFETY: row r < n, and block < blocks: its 16 bytes lie in the row.
            let codes = unsafe { vld1q_u8(mat.codes.as_ptr().add(r * stride + block * 16)) };
            let lo = vreinterpretq_s8_u8(vandq_u8(codes, low));
            let hi = vreinterpretq_s8_u8(vshrq_n_u8::<4>(codes));
            let mut sum = sdot(vdupq_n_s32(0), lo, x[0]);
            sum = sdot(sum, hi, x[1]);
            sum = vshlq_n_s32::<8>(sum);
            sum = sdot(sum, lo, x[2]);
            sum = sdot(sum, hi, x[3]);
            sum = vshlq_n_s32::<8>(sum);
            sum = sdot(sum, lo, x[4]);
            sum = sdot(sum, hi, x[5]);
            let at = r * groups + g;
            let z = match KIND {
                SYMMETRIC => 8,
                _ => i32::from(mat.zeros[at]),
            };
            // Σ (u − z)·q per lane, exact: |Σ u·q| and |z·Σ q| are below 8·15·2^23 < 2^30.
            let sum = vmlsq_n_s32(sum, lane_sums, z);
            *acc = vfmaq_n_f32(*acc, vcvtq_f32_s32(sum), t * mat.scales[at]);
        }
    }
    let mut y = [0f32; TILE_ROWS];
    for ((&r, acc), y) in rows.iter().zip(acc).zip(y.iter_mut()) {
        let mut sum = f64::from(vaddvq_f32(acc));
        if KIND == OFFSETS {
            let offsets = &mat.offsets[r * groups..(r + 1) * groups];
            let terms = offsets.iter().zip(&xd.sums);
            sum += terms
                .map(|(&o, &s)| f64::from(o) * f64::from(s))
                .sum::<f64>();
        }
        *y = xd.result(sum);
    }
    y
}

#[cfg(test)]
mod tests {
    use super::super::kernels::Isa;
    use super::*;

    /// The family the CPU gets follows its dot product extension; under qemu (see
    /// `scripts/test-aarch64.sh`, which names the emulated CPU in `Q4VK_TEST_AARCH64_CPU`)
    /// `max` has it and a Cortex-A53 (ARMv8.0) does not, so both NEON paths really run.
    #[test]
    fn the_dot_product_picks_the_family() {
        let want = if supported() { Isa::NeonDot } else { Isa::Neon };
        assert_eq!(Isa::detect(), want);
        assert!(Isa::available().contains(&Isa::Neon));
        match std::env::var("Q4VK_TEST_AARCH64_CPU").as_deref() {
            Ok("max") => assert_eq!(want, Isa::NeonDot),
            Ok("cortex-a53") => assert_eq!(want, Isa::Neon),
            Ok(other) => panic!("Q4VK_TEST_AARCH64_CPU={other}: expected max or cortex-a53"),
            Err(_) => {}
        }
    }
}
