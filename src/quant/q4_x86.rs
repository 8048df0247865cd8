//! AVX2 kernel for the Q4 quantizer: a group's range in eight lanes of `vminps`/`vmaxps`
//! (exact operations, so lane order changes at most the sign of a zero result, which
//! the quantizer never observes).

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
