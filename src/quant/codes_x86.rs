//! AVX2 and AVX-512 kernels for Paddle's codes (`q = clamp(round_half_away(x / s))`),
//! computing exactly what the portable path in [`super::codes`] computes: the same IEEE
//! division (correctly rounded in every lane), the same half-away rounding done as
//! truncate-then-step, the same clamps and the same answers for ±Inf/NaN ratios (zero
//! scales). Widening is exact: F16C for f16, a 16-bit shift for bf16.
//!
//! Whole vectors are done here; the caller finishes the last `len % LANES` codes with the
//! portable exact path. While a row is coded the kernels prefetch, line by line, the bytes
//! `ahead` bytes further on (the same columns of the next row, for the Paddle tiles):
//! that input comes from memory a row apart, where the hardware prefetchers do not look.

use super::dtype::{Dtype, Element};
use std::arch::x86_64::*;

/// Codes per iteration of the AVX2 kernel (two vectors of 8).
pub(crate) const AVX2_LANES: usize = 16;
/// Codes per iteration of the AVX-512 kernel.
pub(crate) const AVX512_LANES: usize = 16;

/// Prefetches the line `ahead` bytes past element `i` of `row` when element `i` starts a
/// line's worth of input. A prefetch never faults, so the address may lie anywhere.
#[inline(always)]
fn prefetch_line<E: Element>(row: &[u8], i: usize, ahead: usize) {
    if ahead != 0 && (i * E::SIZE).is_multiple_of(64) {
        let at = row.as_ptr().wrapping_add(i * E::SIZE).wrapping_add(ahead);
        // SAFETY: a prefetch is a hint that reads nothing architecturally.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(at.cast()) };
    }
}

/// Eight weights of type E at `p`, widened to f32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn load8<E: Element>(p: *const u8) -> __m256 {
    // SAFETY: the caller guarantees what this function's doc requires: the CPU features it enables (detected at run time) and the bounds of every pointer it reads or writes.
    unsafe {
        match E::KIND {
            Dtype::F16 => _mm256_cvtph_ps(_mm_loadu_si128(p.cast())),
            Dtype::Bf16 => _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(
                _mm_loadu_si128(p.cast()),
            ))),
            Dtype::F32 => _mm256_loadu_ps(p.cast()),
        }
    }
}

/// Codes of eight ratios `x / s` as i32 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn code8<const INT4: bool>(x: __m256, s: __m256) -> __m256i {
    let (limit, max_code) = if INT4 { (7.5, 7) } else { (127.5, 127) };
    let ratio = _mm256_div_ps(x, s);
    let sign_bit = _mm256_set1_ps(-0.0);
    let magnitude = _mm256_andnot_ps(sign_bit, ratio);
    // |r| < limit keeps r; beyond (and NaN) becomes ±limit with r's sign.
    let inside = _mm256_cmp_ps::<_CMP_LT_OQ>(magnitude, _mm256_set1_ps(limit));
    let edge = _mm256_or_ps(_mm256_set1_ps(limit), _mm256_and_ps(ratio, sign_bit));
    let bounded = _mm256_blendv_ps(edge, ratio, inside);
    let whole = _mm256_cvttps_epi32(bounded);
    let fraction = _mm256_sub_ps(bounded, _mm256_cvtepi32_ps(whole));
    // Compare masks are -1 where true: whole + [f >= 0.5] - [f <= -0.5].
    let up = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_GE_OQ>(fraction, _mm256_set1_ps(0.5)));
    let down = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_LE_OQ>(fraction, _mm256_set1_ps(-0.5)));
    let code = _mm256_add_epi32(_mm256_sub_epi32(whole, up), down);
    let code = _mm256_max_epi32(
        _mm256_min_epi32(code, _mm256_set1_epi32(max_code)),
        _mm256_set1_epi32(-max_code),
    );
    if INT4 {
        // Conversion to int of NaN or |r| >= 2^31 gives INT_MIN, which clamps to -7.
        let wild = _mm256_cmp_ps::<_CMP_NLT_UQ>(magnitude, _mm256_set1_ps(2_147_483_648.0));
        _mm256_blendv_epi8(code, _mm256_set1_epi32(-7), _mm256_castps_si256(wild))
    } else {
        // A NaN ratio survives C's float min/max as +127.
        let nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(ratio, ratio);
        _mm256_blendv_epi8(code, _mm256_set1_epi32(127), _mm256_castps_si256(nan))
    }
}

/// AVX2 codes for the first `codes.len() / AVX2_LANES * AVX2_LANES` weights of `row`
/// (raw bytes of type E) divided by `scales`; returns how many were written. The cache
/// lines `ahead` bytes past those read are prefetched (0: none).
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C; `row` must hold `codes.len()` elements and
/// `scales` at least `codes.len()` values.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn codes_avx2<E: Element, const INT4: bool>(
    row: &[u8],
    scales: &[f32],
    codes: &mut [i8],
    ahead: usize,
) -> usize {
    // SAFETY: the caller guarantees what this function's doc requires: the CPU features it enables (detected at run time) and the bounds of every pointer it reads or writes.
    unsafe {
        let whole = codes.len() / AVX2_LANES * AVX2_LANES;
        assert!(row.len() >= whole * E::SIZE && scales.len() >= whole);
        let order = _mm256_setr_epi32(0, 4, 1, 5, 0, 0, 0, 0);
        for i in (0..whole).step_by(AVX2_LANES) {
            prefetch_line::<E>(row, i, ahead);
            let x = row.as_ptr().add(i * E::SIZE);
            let s = scales.as_ptr().add(i);
            let a = code8::<INT4>(load8::<E>(x), _mm256_loadu_ps(s));
            let b = code8::<INT4>(load8::<E>(x.add(8 * E::SIZE)), _mm256_loadu_ps(s.add(8)));
            // Saturating packs keep the (already clamped) values; per 128-bit lane they give
            // [a0..3 b0..3 a0..3 b0..3 | a4..7 b4..7 ...], so gather dwords 0, 4, 1, 5.
            let words = _mm256_packs_epi32(a, b);
            let bytes = _mm256_packs_epi16(words, words);
            let ordered = _mm256_permutevar8x32_epi32(bytes, order);
            _mm_storeu_si128(
                codes.as_mut_ptr().add(i).cast(),
                _mm256_castsi256_si128(ordered),
            );
        }
        whole
    }
}

/// Sixteen weights of type E at `p`, widened to f32.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn load16<E: Element>(p: *const u8) -> __m512 {
    // SAFETY: the caller guarantees what this function's doc requires: the CPU features it enables (detected at run time) and the bounds of every pointer it reads or writes.
    unsafe {
        match E::KIND {
            Dtype::F16 => _mm512_cvtph_ps(_mm256_loadu_si256(p.cast())),
            Dtype::Bf16 => _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(
                _mm256_loadu_si256(p.cast()),
            ))),
            Dtype::F32 => _mm512_loadu_ps(p.cast()),
        }
    }
}

/// AVX-512 codes for the first `codes.len() / AVX512_LANES * AVX512_LANES` weights; the
/// same contract as [`codes_avx2`].
///
/// # Safety
/// The CPU must support AVX-512 F/BW/VL, AVX2, FMA and F16C; slices as [`codes_avx2`].
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(crate) unsafe fn codes_avx512<E: Element, const INT4: bool>(
    row: &[u8],
    scales: &[f32],
    codes: &mut [i8],
    ahead: usize,
) -> usize {
    // SAFETY: the caller guarantees what this function's doc requires: the CPU features it enables (detected at run time) and the bounds of every pointer it reads or writes.
    unsafe {
        let whole = codes.len() / AVX512_LANES * AVX512_LANES;
        assert!(row.len() >= whole * E::SIZE && scales.len() >= whole);
        let (limit, max_code) = if INT4 { (7.5, 7) } else { (127.5, 127) };
        let limit = _mm512_set1_ps(limit);
        let sign_bit = _mm512_set1_epi32(i32::MIN);
        let one = _mm512_set1_epi32(1);
        for i in (0..whole).step_by(AVX512_LANES) {
            prefetch_line::<E>(row, i, ahead);
            let x = load16::<E>(row.as_ptr().add(i * E::SIZE));
            let ratio = _mm512_div_ps(x, _mm512_loadu_ps(scales.as_ptr().add(i)));
            let bits = _mm512_castps_si512(ratio);
            let magnitude = _mm512_castsi512_ps(_mm512_andnot_si512(sign_bit, bits));
            let inside = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(magnitude, limit);
            let edge = _mm512_castsi512_ps(_mm512_or_si512(
                _mm512_castps_si512(limit),
                _mm512_and_si512(bits, sign_bit),
            ));
            let bounded = _mm512_mask_blend_ps(inside, edge, ratio);
            let whole = _mm512_cvttps_epi32(bounded);
            let fraction = _mm512_sub_ps(bounded, _mm512_cvtepi32_ps(whole));
            let up = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(fraction, _mm512_set1_ps(0.5));
            let down = _mm512_cmp_ps_mask::<_CMP_LE_OQ>(fraction, _mm512_set1_ps(-0.5));
            let code = _mm512_mask_add_epi32(whole, up, whole, one);
            let code = _mm512_mask_sub_epi32(code, down, code, one);
            let code = _mm512_max_epi32(
                _mm512_min_epi32(code, _mm512_set1_epi32(max_code)),
                _mm512_set1_epi32(-max_code),
            );
            let code = if INT4 {
                let wild =
                    _mm512_cmp_ps_mask::<_CMP_NLT_UQ>(magnitude, _mm512_set1_ps(2_147_483_648.0));
                _mm512_mask_mov_epi32(code, wild, _mm512_set1_epi32(-7))
            } else {
                let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(ratio, ratio);
                _mm512_mask_mov_epi32(code, nan, _mm512_set1_epi32(127))
            };
            _mm_storeu_si128(codes.as_mut_ptr().add(i).cast(), _mm512_cvtepi32_epi8(code));
        }
        whole
    }
}
