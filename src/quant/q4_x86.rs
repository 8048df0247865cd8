//! AVX2 kernels for the Q4 quantizer: a group's range in eight lanes of `vminps`/`vmaxps`
//! (exact operations, so lane order changes at most the sign of a zero result, which
//! the quantizer never observes), and the widening of a transposed weight in 8 × 8
//! blocks (exact F16C / shift widening, then an in-register transpose).

use super::codes_x86::load8;
use super::dtype::Element;
use std::arch::x86_64::*;

/// `(min(0, values), max(0, values))` of finite values.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn range_avx2(values: &[f32]) -> (f32, f32) {
    // SAFETY: the caller guarantees what this function's doc requires: the CPU features it enables (detected at run time) and the bounds of every pointer it reads or writes.
    unsafe {
        let (mut lo, mut hi) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let chunks = values.chunks_exact(8);
        let tail = chunks.remainder();
        for chunk in chunks {
            let v = _mm256_loadu_ps(chunk.as_ptr());
            lo = _mm256_min_ps(v, lo);
            hi = _mm256_max_ps(v, hi);
        }
        let (mut lanes_lo, mut lanes_hi) = ([0.0f32; 8], [0.0f32; 8]);
        _mm256_storeu_ps(lanes_lo.as_mut_ptr(), lo);
        _mm256_storeu_ps(lanes_hi.as_mut_ptr(), hi);
        let (mut lo, mut hi) = (0.0f32, 0.0f32);
        for &v in lanes_lo.iter().chain(tail) {
            lo = lo.min(v);
        }
        for &v in lanes_hi.iter().chain(tail) {
            hi = hi.max(v);
        }
        (lo, hi)
    }
}

/// Transposes eight rows of eight f32 lanes.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn transpose_8x8(v: [__m256; 8]) -> [__m256; 8] {
    // Pairs, then quads within 128-bit lanes, then swap the lane halves.
    let a0 = _mm256_unpacklo_ps(v[0], v[1]);
    let a1 = _mm256_unpackhi_ps(v[0], v[1]);
    let a2 = _mm256_unpacklo_ps(v[2], v[3]);
    let a3 = _mm256_unpackhi_ps(v[2], v[3]);
    let a4 = _mm256_unpacklo_ps(v[4], v[5]);
    let a5 = _mm256_unpackhi_ps(v[4], v[5]);
    let a6 = _mm256_unpacklo_ps(v[6], v[7]);
    let a7 = _mm256_unpackhi_ps(v[6], v[7]);
    let b0 = _mm256_shuffle_ps::<0x44>(a0, a2);
    let b1 = _mm256_shuffle_ps::<0xee>(a0, a2);
    let b2 = _mm256_shuffle_ps::<0x44>(a1, a3);
    let b3 = _mm256_shuffle_ps::<0xee>(a1, a3);
    let b4 = _mm256_shuffle_ps::<0x44>(a4, a6);
    let b5 = _mm256_shuffle_ps::<0xee>(a4, a6);
    let b6 = _mm256_shuffle_ps::<0x44>(a5, a7);
    let b7 = _mm256_shuffle_ps::<0xee>(a5, a7);
    [
        _mm256_permute2f128_ps::<0x20>(b0, b4),
        _mm256_permute2f128_ps::<0x20>(b1, b5),
        _mm256_permute2f128_ps::<0x20>(b2, b6),
        _mm256_permute2f128_ps::<0x20>(b3, b7),
        _mm256_permute2f128_ps::<0x31>(b0, b4),
        _mm256_permute2f128_ps::<0x31>(b1, b5),
        _mm256_permute2f128_ps::<0x31>(b2, b6),
        _mm256_permute2f128_ps::<0x31>(b3, b7),
    ]
}

/// The AVX2 part of widening a transposed block: for `count` rows starting at `row0` of
/// a `[k][n]` weight of type E, `out[r * stride + kk] = W[row0 + r][kk]` over whole 8 × 8
/// blocks; returns `(rows, ks)` done (the caller widens the rest: rows `rows..count` for
/// every k, and k `ks..k` for rows `0..rows`).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn widen_transposed_avx2<E: Element>(
    bytes: &[u8],
    (n, k): (usize, usize),
    row0: usize,
    count: usize,
    stride: usize,
    out: &mut [f32],
) -> (usize, usize) {
    // SAFETY: the caller guarantees what this function's doc requires: the CPU features it enables (detected at run time) and the bounds of every pointer it reads or writes.
    unsafe {
        let (rows, ks) = (count / 8 * 8, k / 8 * 8);
        if rows == 0 || ks == 0 {
            return (0, 0);
        }
        // Bounds of every access below, checked once.
        assert!((ks - 1) * n + row0 + rows <= bytes.len() / E::SIZE);
        assert!((rows - 1) * stride + ks <= out.len());
        for kk in (0..ks).step_by(8) {
            for r in (0..rows).step_by(8) {
                let mut v = [_mm256_setzero_ps(); 8];
                for (j, v) in v.iter_mut().enumerate() {
                    *v = load8::<E>(bytes.as_ptr().add(((kk + j) * n + row0 + r) * E::SIZE));
                }
                let t = transpose_8x8(v);
                for (i, t) in t.iter().enumerate() {
                    _mm256_storeu_ps(out.as_mut_ptr().add((r + i) * stride + kk), *t);
                }
            }
        }
        (rows, ks)
    }
}

/// AVX-512 codes of a group, 16 at a time: `codes[i] = clamp(round(values[i] / s) +
/// offset, 0, 15)` with the same division, bounding, rounding and clamps as the portable
/// loop; returns how many were written (the caller does the rest).
///
/// # Safety
/// The CPU must support AVX-512 F/BW/VL.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2")]
pub(crate) unsafe fn group_codes_avx512(
    values: &[f32],
    s: f32,
    offset: i32,
    codes: &mut [u8],
) -> usize {
    // SAFETY: the caller guarantees what this function's doc requires: the CPU features it enables (detected at run time) and the bounds of every pointer it reads or writes.
    unsafe {
        let whole = codes.len().min(values.len()) / 16 * 16;
        let divisor = _mm512_set1_ps(s);
        let one = _mm512_set1_epi32(1);
        for i in (0..whole).step_by(16) {
            let ratio = _mm512_div_ps(_mm512_loadu_ps(values.as_ptr().add(i)), divisor);
            let ratio = _mm512_min_ps(
                _mm512_max_ps(ratio, _mm512_set1_ps(-32.5)),
                _mm512_set1_ps(32.5),
            );
            let whole = _mm512_cvttps_epi32(ratio);
            let fraction = _mm512_sub_ps(ratio, _mm512_cvtepi32_ps(whole));
            let up = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(fraction, _mm512_set1_ps(0.5));
            let down = _mm512_cmp_ps_mask::<_CMP_LE_OQ>(fraction, _mm512_set1_ps(-0.5));
            let code = _mm512_mask_add_epi32(whole, up, whole, one);
            let code = _mm512_mask_sub_epi32(code, down, code, one);
            let code = _mm512_add_epi32(code, _mm512_set1_epi32(offset));
            let code = _mm512_min_epi32(
                _mm512_max_epi32(code, _mm512_setzero_si512()),
                _mm512_set1_epi32(15),
            );
            _mm_storeu_si128(codes.as_mut_ptr().add(i).cast(), _mm512_cvtepi32_epi8(code));
        }
        whole
    }
}
