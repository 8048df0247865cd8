//! The m = 1 GEMV as integer dot products on x86-64 CPUs with AVX2 but without AVX-512
//! (most laptop and desktop CPUs; AVX-512 CPUs without VNNI keep the AVX-512 f32 kernels):
//! the scheme of [`super::vnni`] (codes as unsigned
//! nibbles, x in three signed 8-bit digits, [`Digits`]) on 256-bit vectors, each 64-byte
//! piece of a row as two halves of 32 code bytes (lanes 0–7 and 8–15 of the piece's 16
//! lanes). `vpmaddubsw` multiplies codes and digits into pairs of 16-bit sums (at most
//! `2·15·128 = 3840`: no saturation) and `vpmaddwd` by ones adds the pairs into the
//! 32-bit lanes `vpdpbusd` would fill, so the lane sums, their bounds and the exact zero
//! point are those of [`super::vnni`].

use super::digits::{Digits, LANES, PIECE, PIECE_BYTES};
use super::kernels::{integer_rows, OFFSETS, SYMMETRIC, TILE_ROWS, ZERO_POINTS};
use super::matrix::{CpuMatrix, BLOCK};
use std::arch::x86_64::*;
use std::ops::Range;

/// Whether this CPU runs the kernel (AVX2 and FMA).
pub fn supported() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
}

/// Rows `rows` of W times x (in digits); `out` gets one value per row. The CPU must run
/// the kernel ([`supported`], asserted); `xd` must be the digits of a row of `k` inputs
/// with the matrix's group size.
pub fn rows(mat: &CpuMatrix, xd: &Digits, rows: Range<usize>, out: &mut [f32]) {
    assert!(supported());
    let tiles = [tile::<SYMMETRIC>, tile::<ZERO_POINTS>, tile::<OFFSETS>];
    // SAFETY: the CPU runs the kernel; the tiles need only the checked sizes.
    unsafe { integer_rows(mat, xd, rows, out, tiles) }
}

/// Four signed byte products of `codes` (unsigned) and `digits` summed per 32-bit lane.
#[target_feature(enable = "avx2")]
fn dot4(codes: __m256i, digits: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(codes, digits), _mm256_set1_epi16(1))
}

/// The results of 4 rows of W (`rows`, each < n).
///
/// # Safety
/// AVX2 and FMA; the sizes [`rows`] asserts.
#[target_feature(enable = "avx2,fma")]
unsafe fn tile<const KIND: u8>(
    mat: &CpuMatrix,
    xd: &Digits,
    rows: [usize; TILE_ROWS],
) -> [f32; TILE_ROWS] {
    let (stride, groups) = (mat.row_stride(), mat.shape.groups());
    let group_blocks = mat.group_blocks();
    let low = _mm256_set1_epi8(15);
    let mut acc = [_mm256_setzero_ps(); TILE_ROWS];
    for piece in 0..xd.pieces() {
        // The piece's code bytes: 64, fewer in a row's last piece (its blocks).
        let bytes = (stride - piece * 64).min(64);
        for half in 0..2 {
            if 32 * half >= bytes {
                break;
            }
            // SAFETY: the digits hold PIECE_BYTES per piece (6 vectors of 64), LANES
            // scales and lane sums per piece.
            let (x, lane_scales, lane_sums) = unsafe {
                let d = xd.bytes.as_ptr().add(piece * PIECE_BYTES + 32 * half);
                let x: [__m256i; 6] =
                    std::array::from_fn(|i| _mm256_loadu_si256(d.add(64 * i).cast()));
                let lanes = piece * LANES + 8 * half;
                (
                    x,
                    _mm256_loadu_ps(xd.scales.as_ptr().add(lanes)),
                    _mm256_loadu_si256(xd.lane_sums.as_ptr().add(lanes).cast()),
                )
            };
            // Blocks of this half: 2 of the piece's 4 (lanes 4b .. 4b + 4 of block b).
            let first_block = piece * (PIECE / BLOCK) + 2 * half;
            for (r, acc) in rows.iter().zip(acc.iter_mut()) {
                let at = mat
                    .codes
                    .as_ptr()
                    .wrapping_add(r * stride + piece * 64 + 32 * half);
                if half == 0 {
                    // The piece of the row TILE_ROWS further on, which the next tile reads
                    // (a hint: past the matrix's end it does nothing).
                    _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(TILE_ROWS * stride).cast());
                }
                let codes = if bytes >= 32 * (half + 1) {
                    // SAFETY: 32 bytes of row r's codes.
                    unsafe { _mm256_loadu_si256(at.cast()) }
                } else {
                    // The row's last bytes, zero-padded (zero codes meet zero digits).
                    let mut last = [0u8; 32];
                    let count = bytes - 32 * half;
                    // SAFETY: `count` bytes of row r's codes.
                    unsafe { std::ptr::copy_nonoverlapping(at, last.as_mut_ptr(), count) };
                    // SAFETY: a 32-byte array.
                    unsafe { _mm256_loadu_si256(last.as_ptr().cast()) }
                };
                let lo = _mm256_and_si256(codes, low);
                let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(codes), low);
                let mut sum = _mm256_add_epi32(dot4(lo, x[0]), dot4(hi, x[1]));
                sum = _mm256_slli_epi32::<8>(sum);
                sum = _mm256_add_epi32(sum, _mm256_add_epi32(dot4(lo, x[2]), dot4(hi, x[3])));
                sum = _mm256_slli_epi32::<8>(sum);
                sum = _mm256_add_epi32(sum, _mm256_add_epi32(dot4(lo, x[4]), dot4(hi, x[5])));
                // The groups of the half's two blocks (lanes 0–3 and 4–7): one or two.
                let group = |b: usize| r * groups + (b / group_blocks).min(groups - 1);
                let (g0, g1) = (group(first_block), group(first_block + 1));
                // Σ (u − z)·q per lane, exact: |Σ u·q| and |z·Σ q| are below 8·15·2^23 < 2^30.
                let sum = if KIND == SYMMETRIC {
                    _mm256_sub_epi32(sum, _mm256_slli_epi32::<3>(lane_sums))
                } else {
                    let z = |g: usize| _mm_set1_epi32(i32::from(mat.zeros[g]));
                    let z = _mm256_set_m128i(z(g1), z(g0));
                    _mm256_sub_epi32(sum, _mm256_mullo_epi32(z, lane_sums))
                };
                let s = _mm256_set_m128(_mm_set1_ps(mat.scales[g1]), _mm_set1_ps(mat.scales[g0]));
                *acc =
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(lane_scales, s), *acc);
            }
        }
    }
    let mut y = [0f32; TILE_ROWS];
    for ((r, acc), y) in rows.iter().zip(acc).zip(y.iter_mut()) {
        let mut lanes = [0f32; 8];
        // SAFETY: an 8-lane array.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc) };
        let mut sum: f64 = lanes.iter().map(|&v| f64::from(v)).sum();
        if KIND == OFFSETS {
            let offsets = &mat.offsets[r * groups..(r + 1) * groups];
            sum += offsets
                .iter()
                .zip(&xd.sums)
                .map(|(&o, &s)| f64::from(o) * f64::from(s))
                .sum::<f64>();
        }
        *y = xd.result(sum);
    }
    y
}
