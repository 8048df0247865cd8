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
