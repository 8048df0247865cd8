//! Paddle's rounding of weights to codes: `q = clamp(round_half_away(x / s))` with an f32
//! division by the (type-rounded) scale, and Paddle's handling of zero scales.
//!
//! Two paths compute the same bytes. The exact path divides, as Paddle does. The fast path
//! multiplies by the reciprocal of the scale and rounds in fixed point; it is used for a
//! chunk of 16 codes only when no ratio in the chunk lies within the product's error bound
//! of a rounding boundary (j + 0.5) and every scale has a usable reciprocal. Otherwise the
//! chunk is recomputed exactly, so the result never depends on the path. On x86-64 the
//! AVX2 and AVX-512 kernels (`codes_x86`) divide exactly in every lane instead.

use super::dtype::Element;
use crate::simd::{multiversion, Isa};

/// Rounds a finite `v` with |v| ≤ 2^22 half away from zero (C `round`), exactly, in a
/// form that vectorizes: truncate, then step by one where the fraction reaches ±0.5.
#[inline(always)]
pub(crate) fn round_half_away(v: f32) -> i32 {
    // SAFETY: callers pass finite values well inside i32's range.
    let whole = unsafe { v.to_int_unchecked::<i32>() };
    let frac = v - whole as f32;
    whole + (frac >= 0.5) as i32 - (frac <= -0.5) as i32
}

/// Paddle's int4 code of the ratio `r = x / s`: C `round`, conversion to int as x86-64
/// does it (NaN and |r| ≥ 2^31 become INT_MIN), clamp to [-7, 7]. Branch-free.
#[inline(always)]
fn code_int4(r: f32) -> i8 {
    let bounded = if r.abs() < 7.5 { r } else { 7.5f32.copysign(r) }; // finite, also for NaN
    let code = round_half_away(bounded).clamp(-7, 7);
    (if r.abs() < 2_147_483_648.0 { code } else { -7 }) as i8
}

/// Paddle's int8 code of `r = x / s`: C `round`, then `max(-127, min(127, ·))` in float,
/// where a NaN ratio becomes +127. Branch-free.
#[inline(always)]
fn code_int8(r: f32) -> i8 {
    let bounded = if r.abs() < 127.5 {
        r
    } else {
        127.5f32.copysign(r)
    };
    let code = round_half_away(bounded).clamp(-127, 127);
    (if r.is_nan() { 127 } else { code }) as i8
}

/// The scales of a row segment, with the reciprocal of each (0.0 where the reciprocal is
/// not usable: a zero scale, or one whose reciprocal overflows).
#[derive(Clone, Copy)]
pub(crate) struct Divisors<'a> {
    /// Scales as f32 (the values Paddle divides by).
    pub scales: &'a [f32],
    /// `reciprocal(scale)` for each scale.
    pub reciprocals: &'a [f32],
}

/// The reciprocal used by the fast path, or 0.0 when the scale must be divided by: zero
/// scales (Paddle's ±Inf/NaN ratios) and scales whose reciprocal is not a normal f32.
pub(crate) fn reciprocal(scale: f32) -> f32 {
    let inverse = 1.0 / scale;
    if inverse.is_normal() {
        inverse
    } else {
        0.0
    }
}

/// Codes per fast-path chunk.
const LANES: usize = 16;

/// Fast codes for one chunk of [`LANES`] weights; returns false when some code is not
/// certain (the caller then recomputes the chunk exactly).
///
/// `x · (1/s)` differs from the correctly rounded `x / s` by less than 1.5 · 2^-23 · |x/s|
/// (two roundings of 2^-24 each). Only ratios below the clamp bound matter (7.5 or 127.5:
/// beyond, both paths clamp), so the error is below 1.4 · 2^-20 (int4) or 24 · 2^-20
/// (int8). Ratios are rounded in 20-bit fixed point; a chunk is doubtful if any fraction
/// lies within `window` (4 or 64) fixed-point units of one half, which covers the error
/// with the truncation unit to spare.
#[inline(always)]
fn fast_chunk<E: Element, const INT4: bool>(
    row: &[u8],
    reciprocals: &[f32],
    codes: &mut [i8],
) -> bool {
    let (limit, max_code, window) = if INT4 {
        (7.5f32, 7i32, 4i32)
    } else {
        (127.5f32, 127i32, 64i32)
    };
    const ONE: f32 = (1 << 20) as f32;
    const HALF: i32 = 1 << 19;
    let mut doubtful = false;
    for ((code, x), &inverse) in codes[..LANES]
        .iter_mut()
        .zip(row.chunks_exact(E::SIZE))
        .zip(&reciprocals[..LANES])
    {
        let ratio = E::widen(E::load(x)) * inverse;
        let magnitude = ratio.abs().min(limit); // f32::min ignores NaN: always finite
                                                // SAFETY: 0 <= magnitude * 2^20 <= 127.5 * 2^20 < 2^31.
        let fixed = unsafe { (magnitude * ONE).to_int_unchecked::<i32>() };
        let fraction = fixed & (ONE as i32 - 1);
        doubtful |= ((fraction - HALF).abs() < window) | (inverse == 0.0);
        let rounded = ((fixed + HALF) >> 20).min(max_code);
        let sign = (ratio.to_bits() as i32) >> 31; // -1 for negative ratios
        *code = ((rounded ^ sign) - sign) as i8;
    }
    !doubtful
}

/// Exact codes: divides like Paddle.
#[inline(always)]
fn exact_codes<E: Element>(row: &[u8], scales: &[f32], codes: &mut [i8], int4: bool) {
    let ratios = row
        .chunks_exact(E::SIZE)
        .zip(scales)
        .map(|(x, &s)| E::widen(E::load(x)) / s);
    if int4 {
        codes
            .iter_mut()
            .zip(ratios)
            .for_each(|(q, r)| *q = code_int4(r));
    } else {
        codes
            .iter_mut()
            .zip(ratios)
            .for_each(|(q, r)| *q = code_int8(r));
    }
}

#[inline(always)]
fn quantize_chunks<E: Element, const INT4: bool>(row: &[u8], divisors: Divisors, codes: &mut [i8]) {
    let whole = codes.len() / LANES * LANES;
    for start in (0..whole).step_by(LANES) {
        let range = start..start + LANES;
        let bytes = &row[start * E::SIZE..(start + LANES) * E::SIZE];
        if !fast_chunk::<E, INT4>(
            bytes,
            &divisors.reciprocals[range.clone()],
            &mut codes[range.clone()],
        ) {
            exact_codes::<E>(
                bytes,
                &divisors.scales[range.clone()],
                &mut codes[range],
                INT4,
            );
        }
    }
    exact_codes::<E>(
        &row[whole * E::SIZE..],
        &divisors.scales[whole..],
        &mut codes[whole..],
        INT4,
    );
}

multiversion! {
    /// The portable path of [`quantize_row`].
    fn quantize_row_portable<E: Element>(row: &[u8], divisors: Divisors, codes: &mut [i8], int4: bool) {
        if int4 {
            quantize_chunks::<E, true>(row, divisors, codes);
        } else {
            quantize_chunks::<E, false>(row, divisors, codes);
        }
    }
}

/// Codes of one row segment: `codes[i]` from the weight `row[i]` (raw bytes of type E,
/// finite) and its divisor, with the widest kernel this CPU has. `ahead` (0: none) is a
/// hint: the input needed next lies `ahead` bytes past `row`, and may be prefetched.
#[inline]
pub(crate) fn quantize_row<E: Element>(
    row: &[u8],
    divisors: Divisors,
    codes: &mut [i8],
    int4: bool,
    ahead: usize,
) {
    quantize_row_with::<E>(Isa::best(), row, divisors, codes, int4, ahead);
}

/// [`quantize_row`] with the kernel for `isa`, which this CPU must support; every `isa`
/// gives the same bytes.
pub(crate) fn quantize_row_with<E: Element>(
    isa: Isa,
    row: &[u8],
    divisors: Divisors,
    codes: &mut [i8],
    int4: bool,
    ahead: usize,
) {
    assert!(isa <= Isa::best(), "{isa:?} is not supported by this CPU");
    #[cfg(target_arch = "x86_64")]
    {
        use super::codes_x86::codes_avx2;
        use super::codes_x86::codes_avx512;
        let scales = divisors.scales;
        // SAFETY: the assertion above checked the CPU; the kernels check the slice lengths.
        let done = unsafe {
            match (isa, int4) {
                (Isa::Scalar, _) => 0,
                (Isa::Avx512, true) => codes_avx512::<E, true>(row, scales, codes, ahead),
                (Isa::Avx512, false) => codes_avx512::<E, false>(row, scales, codes, ahead),
                (_, true) => codes_avx2::<E, true>(row, scales, codes, ahead),
                (_, false) => codes_avx2::<E, false>(row, scales, codes, ahead),
            }
        };
        if done > 0 {
            exact_codes::<E>(
                &row[done * E::SIZE..],
                &scales[done..],
                &mut codes[done..],
                int4,
            );
            return;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ahead; // a hint only the x86-64 kernels use
    quantize_row_portable::<E>(row, divisors, codes, int4);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::dtype::{Bf16, Dtype, F16, F32};

    #[test]
    fn rounding_is_half_away_from_zero() {
        let cases = [
            (0.5, 1),
            (-0.5, -1),
            (2.5, 3),
            (-5.5, -6),
            (0.49999997, 0),
            (1.4999999, 1),
            (-0.0, 0),
        ];
        for (v, want) in cases {
            assert_eq!(round_half_away(v), want, "{v}");
        }
        // Around every half-integer up to ±130 (±8 ulps), and a sparse sweep of [-130, 130],
        // round_half_away agrees with C's round() (f32::round).
        let mut values = Vec::new();
        for half_step in -260..=260 {
            let center = half_step as f32 * 0.5;
            let mut v = center;
            for _ in 0..8 {
                v = v.next_up();
                values.push(v);
            }
            v = center;
            for _ in 0..8 {
                v = v.next_down();
                values.push(v);
            }
            values.push(center);
        }
        values.extend(
            (0..(130.0f32.to_bits()))
                .step_by(9973)
                .flat_map(|b| [f32::from_bits(b), -f32::from_bits(b)]),
        );
        for v in values {
            assert_eq!(round_half_away(v) as f32, v.round(), "{v}");
        }
    }

    #[test]
    fn codes_follow_paddle_for_special_ratios() {
        assert_eq!(code_int4(f32::NAN), -7);
        assert_eq!(code_int4(f32::INFINITY), -7);
        assert_eq!(code_int4(f32::NEG_INFINITY), -7);
        assert_eq!(code_int4(3e9), -7);
        assert_eq!(code_int4(7.003), 7);
        assert_eq!(code_int4(-7.4), -7);
        assert_eq!(code_int4(3.5), 4);
        assert_eq!(code_int8(f32::NAN), 127);
        assert_eq!(code_int8(f32::INFINITY), 127);
        assert_eq!(code_int8(f32::NEG_INFINITY), -127);
        assert_eq!(code_int8(-126.5), -127);
        assert_eq!(code_int8(126.49), 126);
        assert_eq!(code_int8(-f32::NAN), 127);
        assert_eq!(code_int8(127.5), 127);
        assert_eq!(code_int4(-f32::NAN), -7);
        assert_eq!(code_int4(7.5), 7);
        assert_eq!(code_int4(-2_147_483_648.0), -7);
    }

    /// The fast path must give the exact path's bytes, including for ratios placed on and
    /// next to every rounding boundary and for zero and subnormal scales.
    #[test]
    fn fast_path_equals_exact_division() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for int4 in [true, false] {
            let bound = if int4 { 7.0f32 } else { 127.0 };
            for trial in 0..400 {
                let n = 16 * 40 + (trial % 16);
                // Scales: mostly random f16 values, some zero, some subnormal.
                let scales: Vec<f32> = (0..n)
                    .map(|i| match (trial + i) % 53 {
                        0 => 0.0,
                        1 => -0.0,
                        2 => half::f16::from_bits(1 + (next() % 1000) as u16).to_f32(),
                        _ => half::f16::from_bits(0x0400 + (next() % 0x7000) as u16).to_f32(),
                    })
                    .collect();
                // Weights: ratios near j + 0.5 (exactly, and nudged by a few ulps), or random.
                let weights: Vec<f32> = scales
                    .iter()
                    .map(|&s| {
                        let j = (next() % (2 * bound as u64 + 2)) as f32 - bound - 0.5;
                        let mut w = half::f16::from_f32(j * s).to_f32();
                        if next() % 3 == 0 {
                            w = half::f16::from_f32(
                                ((next() % 20001) as f32 / 10000.0 - 1.0) * bound * s,
                            )
                            .to_f32();
                        }
                        for _ in 0..(next() % 4) {
                            w = if next() % 2 == 0 {
                                w.next_up()
                            } else {
                                w.next_down()
                            };
                        }
                        // Finite weights only (the quantizer refuses NaN/Inf before codes).
                        let w = half::f16::from_f32(w).to_f32();
                        w.clamp(-65504.0, 65504.0)
                    })
                    .collect();
                let bytes: Vec<u8> = weights
                    .iter()
                    .flat_map(|&w| half::f16::from_f32(w).to_le_bytes())
                    .collect();
                let reciprocals: Vec<f32> = scales.iter().map(|&s| reciprocal(s)).collect();
                let mut fast = vec![0i8; n];
                let mut exact = vec![0i8; n];
                quantize_row::<F16>(
                    &bytes,
                    Divisors {
                        scales: &scales,
                        reciprocals: &reciprocals,
                    },
                    &mut fast,
                    int4,
                    0,
                );
                exact_codes::<F16>(&bytes, &scales, &mut exact, int4);
                assert_eq!(fast, exact, "int4={int4} trial={trial}");
                let bf: Vec<u8> = weights
                    .iter()
                    .flat_map(|&w| half::bf16::from_f32(w).to_le_bytes())
                    .collect();
                quantize_row::<Bf16>(
                    &bf,
                    Divisors {
                        scales: &scales,
                        reciprocals: &reciprocals,
                    },
                    &mut fast,
                    int4,
                    0,
                );
                exact_codes::<Bf16>(&bf, &scales, &mut exact, int4);
                assert_eq!(fast, exact, "bf16 int4={int4} trial={trial}");
            }
        }
    }

    /// Random weights of type E for `scales`: exact and nudged ties `(j + 0.5) · s`,
    /// random ratios, out-of-range and huge values, subnormals and signed zeros; finite.
    fn tricky_row<E: Element>(scales: &[f32], next: &mut impl FnMut() -> u64) -> Vec<u8> {
        let dtype = E::KIND;
        let largest = match dtype {
            Dtype::F16 => 65504.0,
            Dtype::Bf16 | Dtype::F32 => 3.0e38,
        };
        let mut bytes = vec![0u8; scales.len() * E::SIZE];
        for (i, &s) in scales.iter().enumerate() {
            let bound = if next().is_multiple_of(2) { 7.0 } else { 127.0 };
            let v = match next() % 8 {
                0..=2 => ((next() % 300) as f32 - 150.0 + 0.5) * s, // a tie, before rounding to E
                3 => ((next() % 20001) as f32 / 10000.0 - 1.0) * (bound + 1.0) * s,
                4 => largest * if next().is_multiple_of(2) { 1.0 } else { -1.0 },
                5 => f32::from_bits((next() % 0x0080_0000) as u32) * 1e-30f32.min(s), // tiny
                6 => [0.0, -0.0][(next() % 2) as usize],
                _ => {
                    (next() % 1000) as f32
                        * 1e-3
                        * largest
                        * if next().is_multiple_of(2) { 1.0 } else { -1.0 }
                }
            };
            let mut bits = dtype.from_f32(v.clamp(-largest, largest));
            if next().is_multiple_of(2) {
                // Nudge by up to ±2 units in the last place of E, staying finite.
                let nudged = (bits as i64 + (next() % 5) as i64 - 2).max(0) as u32;
                if nudged & E::MAGNITUDE < E::INFINITY && (nudged ^ bits) & !E::MAGNITUDE == 0 {
                    bits = nudged;
                }
            }
            if next().is_multiple_of(11) {
                // A subnormal of E.
                bits = (next() % 0x3ff) as u32
                    | if next().is_multiple_of(2) {
                        !E::MAGNITUDE & (E::MAGNITUDE * 2 + 1)
                    } else {
                        0
                    };
            }
            dtype.put_bits(&mut bytes, i, bits);
        }
        bytes
    }

    /// Random scales of type E (as f32): zero, -0, subnormal, tiny, huge, ordinary.
    fn tricky_scales<E: Element>(len: usize, next: &mut impl FnMut() -> u64) -> Vec<f32> {
        (0..len)
            .map(|_| {
                let v = match next() % 16 {
                    0 => 0.0,
                    1 => -0.0,
                    2 => half::f16::from_bits(1 + (next() % 0x3ff) as u16).to_f32(),
                    3 => f32::from_bits(1 + (next() % 0x007f_ffff) as u32),
                    4 => 1e-30 * (1 + next() % 1000) as f32,
                    5 => 65504.0 / (1 + next() % 4) as f32,
                    6 => 1e30 * (1 + next() % 1000) as f32,
                    _ => half::f16::from_bits(0x0400 + (next() % 0x7000) as u16).to_f32(),
                };
                E::widen(E::KIND.from_f32(v))
            })
            .collect()
    }

    fn every_kernel_matches_exact_for<E: Element>() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        // Every tail length of 16-code vectors, several whole vectors, one long row.
        let lengths: Vec<usize> = (0..=80).chain([255, 256, 257, 1031]).collect();
        let mut checked = 0usize;
        for &len in &lengths {
            for trial in 0..40 {
                let scales = tricky_scales::<E>(len, &mut next);
                let row = tricky_row::<E>(&scales, &mut next);
                let reciprocals: Vec<f32> = scales.iter().map(|&s| reciprocal(s)).collect();
                let divisors = Divisors {
                    scales: &scales,
                    reciprocals: &reciprocals,
                };
                for int4 in [true, false] {
                    let mut want = vec![0i8; len];
                    exact_codes::<E>(&row, &scales, &mut want, int4);
                    for isa in Isa::supported() {
                        let mut got = vec![0x55i8; len];
                        quantize_row_with::<E>(isa, &row, divisors, &mut got, int4, 0);
                        assert_eq!(
                            got,
                            want,
                            "{:?} {isa:?} int4={int4} len={len} trial={trial}",
                            E::KIND
                        );
                        checked += len;
                    }
                }
            }
        }
        assert!(checked > 100_000);
    }

    /// Each kernel (portable, AVX2, AVX-512 — those this CPU has) gives the exact path's
    /// codes for every tail length, ties, subnormals, zero and huge scales, in each type.
    #[test]
    fn every_kernel_matches_exact_division() {
        eprintln!("kernels checked: {:?}", Isa::supported());
        every_kernel_matches_exact_for::<F16>();
        every_kernel_matches_exact_for::<Bf16>();
        every_kernel_matches_exact_for::<F32>();
    }

    /// Ordinary weights take the fast path almost always (else the test above proves little).
    #[test]
    fn fast_path_is_taken_for_ordinary_weights() {
        let scale = half::f16::from_f32(0.0123).to_f32();
        let reciprocals = [reciprocal(scale); LANES];
        let mut certain = 0;
        for chunk in 0..1000u32 {
            let bytes: Vec<u8> = (0..LANES as u32)
                .flat_map(|i| {
                    let t = ((chunk * 16 + i).wrapping_mul(2_654_435_761) >> 8) as f32
                        / (1u32 << 24) as f32;
                    half::f16::from_f32((t * 2.0 - 1.0) * 7.0 * scale).to_le_bytes()
                })
                .collect();
            let mut codes = [0i8; LANES];
            certain += fast_chunk::<F16, true>(&bytes, &reciprocals, &mut codes) as u32;
        }
        assert!(certain > 900, "only {certain} of 1000 chunks were certain");
    }
}
