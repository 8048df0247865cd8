//! The m = 1 GEMV as integer dot products (x86-64 AVX-512 VNNI): the codes stay unsigned
//! nibbles, x is in three signed 8-bit digits ([`Digits`]), and `vpdpbusd` sums 4
//! products of code and digit into each 32-bit lane, 64 per instruction.
//!
//! Per row and piece of 128 columns: one 64-byte load of codes, a mask for the low
//! nibbles (the even columns) and a shift and mask for the high ones (the odd columns),
//! and per digit two dot products into one accumulator that is shifted left by 8 before
//! the next digit, so it ends as `Σ u·q` per lane, `q = D0·2^16 + D1·2^8 + D2` (each lane
//! sums 8 columns of one block; at most `8·15·128 = 15360` after D0, `< 2^22` after the
//! first shift and the D1 products, `< 2^30` at the end, so no overflow). The zero point
//! comes off exactly in the same lanes: `Σ (u − z)·q = Σ u·q − z·Σ q` with x's lane sums
//! `Σ q` (both terms below `8·15·2^23 < 2^30`). The lane results become f32 and are
//! multiplied into an f32 accumulator by the block's x scale times the group's weight
//! scale; a matrix with offsets (`s·(u − z) + o`) adds `Σ_groups o·Σx` at the row's end
//! (the groups' `Σx` computed once per call). The same bytes of the next tile's rows are
//! prefetched: without, tiles of 4 rows of 4096 columns stream at half the speed from
//! DRAM (each row is too short for the hardware prefetcher).

use super::digits::{Digits, LANES, PIECE, PIECE_BYTES};
use super::kernels::{
    by_tiles, check_integer_args, kind, OFFSETS, SYMMETRIC, TILE_ROWS, ZERO_POINTS,
};
use super::matrix::{CpuMatrix, BLOCK};
use std::arch::x86_64::*;
use std::ops::Range;

/// Whether this CPU runs the kernel (AVX-512 F, BW, VL and VNNI).
pub fn supported() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vl")
        && is_x86_feature_detected!("avx512vnni")
}

/// How the weight scales of a piece's 4 blocks are laid out in its 16 lanes: one group
/// per piece ([`ONE_GROUP`]), or a group per block (32 columns) or per two blocks.
const ONE_GROUP: usize = 0;

/// Rows `rows` of W times x (in digits); `out` gets one value per row. The CPU must run
/// the kernel ([`supported`], asserted); `xd` must be the digits of a row of `k` inputs
/// with the matrix's group size.
pub fn rows(mat: &CpuMatrix, xd: &Digits, rows: Range<usize>, out: &mut [f32]) {
    check_integer_args(mat, xd, &rows, out);
    assert!(supported());
    let blocks = mat.group_blocks();
    let layout = if mat.shape.groups() == 1 || blocks.is_multiple_of(4) {
        ONE_GROUP
    } else {
        blocks
    };
    type Tile = unsafe fn(&CpuMatrix, &Digits, [usize; TILE_ROWS]) -> [f32; TILE_ROWS];
    fn pick<const KIND: u8>(layout: usize) -> Tile {
        match layout {
            ONE_GROUP => tile::<KIND, ONE_GROUP>,
            1 => tile::<KIND, 1>,
            _ => tile::<KIND, 2>,
        }
    }
    let tile = match kind(mat) {
        SYMMETRIC => pick::<SYMMETRIC>(layout),
        ZERO_POINTS => pick::<ZERO_POINTS>(layout),
        _ => pick::<OFFSETS>(layout),
    };
    // SAFETY: the CPU runs the kernel and the sizes `tile` relies on are checked above
    // (`by_tiles` picks rows < n).
    by_tiles(rows, out, |picked| unsafe { tile(mat, xd, picked) });
}

/// The results of 4 rows of W (`rows`, each < n). `SPREAD`: [`ONE_GROUP`], or blocks per
/// group (1 or 2).
///
/// # Safety
/// AVX-512 F, BW, VL and VNNI; the sizes [`rows`] asserts.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn tile<const KIND: u8, const SPREAD: usize>(
    mat: &CpuMatrix,
    xd: &Digits,
    rows: [usize; TILE_ROWS],
) -> [f32; TILE_ROWS] {
    let (stride, groups) = (mat.row_stride(), mat.shape.groups());
    let group_blocks = mat.group_blocks();
    let low = _mm512_set1_epi8(15);
    let mut acc = [_mm512_setzero_ps(); TILE_ROWS];
    for piece in 0..xd.pieces() {
        // The piece's code bytes: 64, fewer in a row's last piece (its blocks).
        let bytes = (stride - piece * 64).min(64);
        let mask = u64::MAX >> (64 - bytes);
        // SAFETY: the digits hold PIECE_BYTES per piece, LANES scales and lane sums per
        // piece.
        let (x, lane_scales, lane_sums) = unsafe {
            let d = xd.bytes.as_ptr().add(piece * PIECE_BYTES).cast::<__m512i>();
            let x: [__m512i; 6] = std::array::from_fn(|i| _mm512_loadu_si512(d.add(i)));
            let sums = _mm512_loadu_si512(xd.lane_sums.as_ptr().add(piece * LANES).cast());
            (
                x,
                _mm512_loadu_ps(xd.scales.as_ptr().add(piece * LANES)),
                sums,
            )
        };
        let eight_sums = _mm512_slli_epi32::<3>(lane_sums);
        let first_group = piece * (PIECE / BLOCK) / group_blocks;
        for (r, acc) in rows.iter().zip(acc.iter_mut()) {
            let at = mat.codes.as_ptr().wrapping_add(r * stride + piece * 64);
            // The same bytes of the row TILE_ROWS further on, which the next tile reads
            // (a hint: past the matrix's end it does nothing).
            _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(TILE_ROWS * stride).cast());
            // SAFETY: row r < n, and the masked load reads only the row's bytes.
            let codes = unsafe { _mm512_maskz_loadu_epi8(mask, at.cast()) };
            let lo = _mm512_and_si512(codes, low);
            let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(codes), low);
            let mut sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, x[0]);
            sum = _mm512_dpbusd_epi32(sum, hi, x[1]);
            sum = _mm512_slli_epi32::<8>(sum);
            sum = _mm512_dpbusd_epi32(sum, lo, x[2]);
            sum = _mm512_dpbusd_epi32(sum, hi, x[3]);
            sum = _mm512_slli_epi32::<8>(sum);
            sum = _mm512_dpbusd_epi32(sum, lo, x[4]);
            sum = _mm512_dpbusd_epi32(sum, hi, x[5]);
            // Groups first_group.. of the piece: 4 / SPREAD of them, fewer at the end.
            let (at, count) = (
                r * groups + first_group,
                (groups - first_group).min(4 / SPREAD.max(1)),
            );
            let mask = (1u16 << count) - 1;
            // Σ (u − z)·q per lane, exact: |Σ u·q| and |z·Σ q| are below 8·15·2^23 < 2^30.
            let sum = if KIND == SYMMETRIC {
                _mm512_sub_epi32(sum, eight_sums)
            } else {
                let z = if SPREAD == ONE_GROUP {
                    _mm512_set1_epi32(i32::from(mat.zeros[at]))
                } else {
                    // SAFETY: `count` zero points from `at` lie in row r's.
                    let z =
                        unsafe { _mm_maskz_loadu_epi8(mask, mat.zeros.as_ptr().add(at).cast()) };
                    spread::<SPREAD>(_mm512_cvtepu8_epi32(z))
                };
                _mm512_sub_epi32(sum, _mm512_mullo_epi32(z, lane_sums))
            };
            let s = if SPREAD == ONE_GROUP {
                _mm512_set1_ps(mat.scales[at])
            } else {
                let ahead = mat.scales.as_ptr().wrapping_add(at + TILE_ROWS * groups);
                _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
                // SAFETY: `count` scales from `at` lie in row r's.
                let v = unsafe { _mm_maskz_loadu_ps(mask as u8, mat.scales.as_ptr().add(at)) };
                _mm512_castsi512_ps(spread::<SPREAD>(_mm512_castsi128_si512(_mm_castps_si128(
                    v,
                ))))
            };
            *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(lane_scales, s), *acc);
        }
    }
    let mut y = [0f32; TILE_ROWS];
    for ((r, acc), y) in rows.iter().zip(acc).zip(y.iter_mut()) {
        let mut sum = f64::from(_mm512_reduce_add_ps(acc));
        if KIND == OFFSETS {
            // SAFETY: the CPU features (this function's); r < n.
            sum += f64::from(unsafe { offset_terms(mat, xd, *r) });
        }
        *y = xd.result(sum);
    }
    y
}

/// `Σ_groups o·Σx` of row `r` (in units of `2^E`): the offsets' part of its result.
///
/// # Safety
/// AVX-512 F; `r` < n; the matrix has offsets.
#[target_feature(enable = "avx512f")]
unsafe fn offset_terms(mat: &CpuMatrix, xd: &Digits, r: usize) -> f32 {
    let groups = mat.shape.groups();
    let mut acc = _mm512_setzero_ps();
    for g in (0..groups).step_by(16) {
        let mask = (u32::MAX >> (32 - (groups - g).min(16))) as u16;
        // SAFETY: the masked lanes lie in row r's offsets and in the sums (`groups`).
        unsafe {
            let sums = _mm512_maskz_loadu_ps(mask, xd.sums.as_ptr().add(g));
            let o = _mm512_maskz_loadu_ps(mask, mat.offsets.as_ptr().add(r * groups + g));
            acc = _mm512_fmadd_ps(o, sums, acc);
        }
    }
    _mm512_reduce_add_ps(acc)
}

/// The values of a piece's groups (lanes 0.. of `v`: 4 groups of one block each when
/// `SPREAD` is 1, 2 of two blocks when 2) in the lanes of their blocks: lane i sums
/// columns of the piece's block i / 4.
#[target_feature(enable = "avx512f")]
fn spread<const SPREAD: usize>(v: __m512i) -> __m512i {
    let lane_group = if SPREAD == 1 {
        _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3)
    } else {
        _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1)
    };
    _mm512_permutexvar_epi32(lane_group, v)
}
