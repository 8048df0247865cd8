//! x split into three signed 8-bit digits per element, for the integer dot-product GEMVs
//! (`vnni`, x86-64 AVX-512 VNNI, and `sdot`, aarch64 SDOT): per block of 32 columns, `x ≈ 2^E·t·q` with the integer
//! `q = D0·2^16 + D1·2^8 + D2`, `D0, D1, D2 ∈ [−128, 127]`.
//!
//! `2^E` is the power of two at or below the largest magnitude `|x|max` in x (the results
//! are multiplied by it at the end, so no scale over- or underflows but those of blocks
//! below about 2^-100 of the largest), and `t` the block's f32 scale, the nearest f32 to
//! `M·2^-E / (127.49·2^16)` (`M` the block's largest magnitude) but at least f32's
//! smallest normal. `q = round(x·2^-E / t)` is computed in f64 (no other rounding), so
//! `|q| ≤ 127.49·2^16·(1 + 2^-23) + 1/2 < 127·2^16 + 127·2^8 + 127`, the largest integer
//! the digits hold (the balanced base-256 expansion: `D2` and `D1` the remainders in
//! −128..127, `D0` what is left), and each element is within `2^E·t/2 ≤ 2^-23.99·M` of
//! the value its digits encode. A block of zeros has zero digits and scale.
//!
//! Order: pieces of 128 columns (4 blocks, the 64 code bytes of one 512-bit load); per
//! piece, 6 vectors of 64 digits: D0 of the even columns (byte `j`: column `2j`, which
//! meets the low nibble of code byte `j`), D0 of the odd columns, then D1 and D2 alike.
//! Each piece also gets 16 lane scales and lane sums: lane `i` of a 32-bit dot product
//! sums columns `8i..8i + 8` of the piece, all in block `i / 4`; its scale is that
//! block's `t`, its sum the sum of its 8 `q` (a 128-bit SDOT covers one block's 16 bytes
//! of a digit: its lanes are lanes `4b..4b + 4` of the piece's block `b`). Built with
//! AVX-512 (F, BW, VL) where the CPU has it, else by portable code that writes the same
//! digits, lane scales and lane sums (the group sums may differ in the last bits: f64
//! sums in another order).

use crate::alloc;
use crate::error::Result;
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Columns per piece (the codes of one 64-byte load).
pub(crate) const PIECE: usize = 128;
/// Digit bytes per piece: 3 digits × (even, odd) × 64.
pub(crate) const PIECE_BYTES: usize = 6 * 64;
/// Lane scales (and lane sums) per piece.
pub(crate) const LANES: usize = 16;
/// Columns per block (one x scale).
const BLOCK: usize = 32;
/// What a block's largest magnitude becomes, in units of `t·2^16`: below 127.5 with
/// room for the rounding of `t`.
const TOP: f64 = 127.49;

/// One row of x in digits, with its per-group sums.
pub struct Digits {
    /// `[pieces][PIECE_BYTES]` signed digits (see the module docs for the order).
    pub bytes: Vec<i8>,
    /// `[pieces][LANES]` lane scales `t`.
    pub scales: Vec<f32>,
    /// `[pieces][LANES]` the sum of each lane's 8 integers `q` (for the zero points:
    /// `Σ (u − z)·q = Σ u·q − z·Σ q`); below 2^26 in magnitude.
    pub lane_sums: Vec<i32>,
    /// `[groups]` the group's `Σ x · 2^-E` (exact x, summed in f64).
    pub sums: Vec<f32>,
    /// `E`: results are multiplied by `2^E`.
    pub exponent: i32,
}

/// `2^e` in f64 (e within ±1022).
pub(super) fn pow2(e: i32) -> f64 {
    f64::from_bits(((1023 + e) as u64) << 52)
}

/// The three digits `(D0, D1, D2)` of an integer `q`: `q = D0·2^16 + D1·2^8 + D2` with
/// `D1, D2 ∈ [−128, 127]`; `D0 ∈ [−128, 127]` when `q` lies in
/// `−128·(2^16 + 2^8 + 1) ..= 127·(2^16 + 2^8 + 1)` (the vector `split`, one lane).
pub(super) fn split_one(q: i32) -> [i32; 3] {
    let digit = |v: i32| ((v + 128) & 255) - 128;
    let d2 = digit(q);
    let q1 = (q - d2) >> 8;
    let d1 = digit(q1);
    [(q1 - d1) >> 8, d1, d2]
}

/// `E` for a row of x whose largest magnitude is `largest` (finite): the exponent of the
/// power of two at or below it (0 for a row of zeros).
pub(super) fn row_exponent(largest: f32) -> i32 {
    match largest {
        0.0 => 0,
        v => ((f64::from(v).to_bits() >> 52) & 0x7ff) as i32 - 1023,
    }
}

/// The block scale `t` for a block whose largest magnitude is `max` (not 0), with
/// `unit = 2^-E`.
pub(super) fn block_scale(max: f32, unit: f64) -> f32 {
    ((f64::from(max) * unit / (TOP * 65536.0)) as f32).max(f32::MIN_POSITIVE)
}

/// The three digits `(D0, D1, D2)` of integers `q` (16 lanes): `q = D0·2^16 + D1·2^8 +
/// D2` with `D1, D2 ∈ [−128, 127]`; `D0 ∈ [−128, 127]` when `q` lies in
/// `−128·(2^16 + 2^8 + 1) ..= 127·(2^16 + 2^8 + 1)`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn split(q: __m512i) -> [__m512i; 3] {
    let (bias, low) = (_mm512_set1_epi32(128), _mm512_set1_epi32(255));
    let digit =
        |v: __m512i| _mm512_sub_epi32(_mm512_and_si512(_mm512_add_epi32(v, bias), low), bias);
    let d2 = digit(q);
    let q1 = _mm512_srai_epi32::<8>(_mm512_sub_epi32(q, d2));
    let d1 = digit(q1);
    [_mm512_srai_epi32::<8>(_mm512_sub_epi32(q1, d1)), d1, d2]
}

impl Digits {
    /// The digits of `x` (`k` columns; column `j` takes input `order[j]` when `order` is
    /// not empty), padded with zeros to `pieces·128` columns, and the sums of its groups of
    /// `group_size` (a multiple of 32, or `k`) columns, the last maybe shorter. `None` when
    /// x has an infinite or NaN element (the f32 kernels keep their policy for those).
    /// Allocation failures are `OutOfHostMemory`. Uses AVX-512 where the CPU has it.
    pub fn new(x: &[f32], k: usize, group_size: usize, order: &[u32]) -> Result<Option<Digits>> {
        Digits::packed(x, k, group_size, order, avx512())
    }

    /// [`Digits::new`], with AVX-512 (`wide`; the CPU must have F, BW and VL, asserted) or
    /// with portable code.
    fn packed(
        x: &[f32],
        k: usize,
        group_size: usize,
        order: &[u32],
        wide: bool,
    ) -> Result<Option<Digits>> {
        assert!(!wide || avx512());
        assert!(group_size.is_multiple_of(BLOCK) || group_size == k);
        let x = &x[..k];
        let pieces = k.div_ceil(PIECE);
        let mut cols = alloc::filled::<f32>(pieces * PIECE, "the activations in column order")?;
        match order.is_empty() {
            true => cols[..k].copy_from_slice(x),
            false => cols
                .iter_mut()
                .zip(order)
                .for_each(|(c, &i)| *c = x[i as usize]),
        }
        let blocks = cols.len() / BLOCK;
        let mut sums = alloc::filled::<f64>(blocks, "the activations' block sums")?;
        let mut maxima = alloc::filled::<f32>(blocks, "the activations' block maxima")?;
        let finite = match wide {
            // SAFETY: the CPU features are asserted above; the outputs have a slot per block.
            #[cfg(target_arch = "x86_64")]
            true => unsafe { measure(&cols, &mut sums, &mut maxima) },
            _ => measure_portable(&cols, &mut sums, &mut maxima),
        };
        if !finite {
            return Ok(None);
        }
        let exponent = row_exponent(maxima.iter().fold(0f32, |m, &v| m.max(v)));
        let mut d = Digits {
            bytes: alloc::filled(pieces * PIECE_BYTES, "the activations' digits")?,
            scales: alloc::filled(pieces * LANES, "the activations' scales")?,
            lane_sums: alloc::filled(pieces * LANES, "the activations' lane sums")?,
            sums: Vec::new(),
            exponent,
        };
        match wide {
            // SAFETY: as for `measure`; the digits' vectors are sized for `pieces`.
            #[cfg(target_arch = "x86_64")]
            true => unsafe { d.split_blocks(&cols, &maxima) },
            _ => d.split_blocks_portable(&cols, &maxima),
        }
        let inverse = pow2(-exponent);
        let group_blocks = group_size.div_ceil(BLOCK);
        d.sums = alloc::collect(
            sums.chunks(group_blocks)
                .take(k.div_ceil(group_size))
                .map(|g| (g.iter().sum::<f64>() * inverse) as f32),
            "the activations' group sums",
        )?;
        Ok(Some(d))
    }

    /// Pieces of 128 columns.
    pub fn pieces(&self) -> usize {
        self.scales.len() / LANES
    }

    /// A result in f32 from its value in units of `2^E` (a sum over these digits).
    pub fn result(&self, sum: f64) -> f32 {
        (sum * pow2(self.exponent)) as f32
    }

    /// The digits, lane scales and lane sums of every block of `cols` whose largest
    /// magnitude (`maxima`) is not 0, element by element (what the AVX-512 `split_blocks`
    /// writes).
    fn split_blocks_portable(&mut self, cols: &[f32], maxima: &[f32]) {
        let unit = pow2(-self.exponent);
        for (b, (block, &max)) in cols.chunks_exact(BLOCK).zip(maxima).enumerate() {
            if max == 0.0 {
                continue;
            }
            let t = block_scale(max, unit);
            let scale = unit / f64::from(t);
            let (piece, at) = (b / 4, b % 4 * (BLOCK / 2));
            let lanes = piece * LANES + b % 4 * 4;
            for (c, &v) in block.iter().enumerate() {
                // Rounded to nearest, ties to even (as the vector conversion), in f64.
                let q = (f64::from(v) * scale).round_ties_even() as i32;
                self.lane_sums[lanes + c / 8] += q;
                for (d, digit) in split_one(q).into_iter().enumerate() {
                    let to = piece * PIECE_BYTES + d * 128 + c % 2 * 64 + at + c / 2;
                    self.bytes[to] = digit as i8;
                }
            }
            self.scales[lanes..lanes + 4].fill(t);
        }
    }

    /// Writes the digits, lane scales and lane sums of every block of `cols` whose largest
    /// magnitude (`maxima`) is not 0.
    ///
    /// # Safety
    /// AVX-512 F, BW and VL; `maxima` holds one value per block of `cols`, and the vectors
    /// of `self` are sized for its pieces.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn split_blocks(&mut self, cols: &[f32], maxima: &[f32]) {
        // Even columns of a block (from its two halves of 16), then odd ones.
        let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
        let unit = pow2(-self.exponent);
        for (b, (block, &max)) in cols.chunks_exact(BLOCK).zip(maxima).enumerate() {
            if max == 0.0 {
                continue;
            }
            let t = block_scale(max, unit);
            let scale = _mm512_set1_pd(unit / f64::from(t));
            // SAFETY: 32 floats in the block.
            let [v0, v1] = [0, 16].map(|at| unsafe { _mm512_loadu_ps(block.as_ptr().add(at)) });
            let (piece, at) = (b / 4, b % 4 * (BLOCK / 2));
            // Per pair of columns (2j, 2j + 1), the sum of their integers.
            let mut pairs = _mm512_setzero_si512();
            for (parity, idx) in [even, odd].into_iter().enumerate() {
                let v = _mm512_permutex2var_ps(v0, idx, v1);
                let high = _mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v));
                let halves = [_mm512_castps512_ps256(v), _mm256_castpd_ps(high)];
                // Rounded to nearest (the default rounding mode), in f64.
                let [lo, hi] =
                    halves.map(|h| _mm512_cvtpd_epi32(_mm512_mul_pd(_mm512_cvtps_pd(h), scale)));
                let q = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi);
                pairs = _mm512_add_epi32(pairs, q);
                for (d, digits) in split(q).into_iter().enumerate() {
                    let to = piece * PIECE_BYTES + d * 128 + parity * 64 + at;
                    let narrow = _mm512_cvtepi32_epi8(digits);
                    // SAFETY: the 16 bytes at `to` lie in the piece's digits.
                    unsafe { _mm_storeu_si128(self.bytes.as_mut_ptr().add(to).cast(), narrow) };
                }
            }
            // Lane i of the block sums columns 8i..8i + 8: pairs 4i..4i + 4.
            // SAFETY: __m512i and [i32; 16] have one size, every bit pattern valid in both.
            let pairs: [i32; 16] = unsafe { std::mem::transmute(pairs) };
            let lanes = piece * LANES + b % 4 * 4..piece * LANES + b % 4 * 4 + 4;
            for (lane, four) in self.lane_sums[lanes.clone()]
                .iter_mut()
                .zip(pairs.chunks_exact(4))
            {
                *lane = four.iter().sum();
            }
            self.scales[lanes].fill(t);
        }
    }

    /// The value column `j` stands for: `2^E ·` lane scale `·(D0·2^16 + D1·2^8 + D2)`.
    #[cfg(test)]
    fn value(&self, j: usize) -> f64 {
        let (piece, c) = (j / PIECE, j % PIECE);
        let d = &self.bytes[piece * PIECE_BYTES..];
        let at = |digit: usize| f64::from(d[digit * 128 + (c % 2) * 64 + c / 2]);
        let q = at(0) * 65536.0 + at(1) * 256.0 + at(2);
        let lane = f64::from(self.scales[piece * LANES + c / 8]);
        q * lane * pow2(self.exponent)
    }
}

/// Whether the CPU runs the AVX-512 packer (F, BW and VL).
fn avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    return is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vl");
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The f64 sum and largest magnitude of every block of 32 columns of `cols`; false,
/// leaving the rest unwritten, at the first block with an infinite or NaN element (what
/// the AVX-512 `measure` does).
pub(super) fn measure_portable(cols: &[f32], sums: &mut [f64], maxima: &mut [f32]) -> bool {
    let out = sums.iter_mut().zip(maxima.iter_mut());
    for (block, (sum, max)) in cols.chunks_exact(BLOCK).zip(out) {
        if !block.iter().all(|v| v.is_finite()) {
            return false;
        }
        *sum = block.iter().map(|&v| f64::from(v)).sum();
        *max = block.iter().fold(0f32, |m, v| m.max(v.abs()));
    }
    true
}

/// The f64 sum and largest magnitude of every block of 32 columns of `cols`; false,
/// leaving the rest unwritten, at the first block with an infinite or NaN element.
///
/// # Safety
/// AVX-512 F; `sums` and `maxima` hold one value per block of `cols`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn measure(cols: &[f32], sums: &mut [f64], maxima: &mut [f32]) -> bool {
    let infinity = _mm512_set1_ps(f32::INFINITY);
    let out = sums.iter_mut().zip(maxima.iter_mut());
    for (block, (sum, max)) in cols.chunks_exact(BLOCK).zip(out) {
        // SAFETY: 32 floats in the block.
        let [v0, v1] = [0, 16].map(|at| unsafe { _mm512_loadu_ps(block.as_ptr().add(at)) });
        let magnitude = [_mm512_abs_ps(v0), _mm512_abs_ps(v1)];
        // Not below infinity: infinite, or NaN (unordered).
        let bad = magnitude.map(|m| _mm512_cmp_ps_mask::<_CMP_NLT_UQ>(m, infinity));
        if bad[0] | bad[1] != 0 {
            return false;
        }
        let wide = [v0, v1].map(|v| {
            let high = _mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v));
            let lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
            _mm512_add_pd(lo, _mm512_cvtps_pd(_mm256_castpd_ps(high)))
        });
        *sum = _mm512_reduce_add_pd(_mm512_add_pd(wide[0], wide[1]));
        *max = _mm512_reduce_max_ps(_mm512_max_ps(magnitude[0], magnitude[1]));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Integers across the digits' whole range, step 97, and its edges.
    fn integers() -> Vec<i32> {
        let (low, high) = (-128 * 65793, 127 * 65793);
        (low..=high)
            .step_by(97)
            .chain([low, high, 0, -1, 1])
            .collect()
    }

    #[test]
    fn split_one_is_exact_and_in_range() {
        for q in integers() {
            let d = split_one(q);
            assert!(d.iter().all(|d| (-128..=127).contains(d)), "{q}: {d:?}");
            assert_eq!(d[0] * 65536 + d[1] * 256 + d[2], q);
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn split_is_exact_and_in_range() {
        assert!(
            is_x86_feature_detected!("avx512f"),
            "the digits need AVX-512"
        );
        for q in integers().chunks(16) {
            let mut lanes = [0i32; 16];
            lanes[..q.len()].copy_from_slice(q);
            // SAFETY: AVX-512 F (asserted); 16 lanes read; __m512i and [i32; 16] have one size.
            let digits: [[i32; 16]; 3] = unsafe {
                split(_mm512_loadu_si512(lanes.as_ptr().cast())).map(|d| std::mem::transmute(d))
            };
            for (i, &q) in q.iter().enumerate() {
                let d = digits.map(|d| d[i]);
                assert!(d.iter().all(|d| (-128..=127).contains(d)), "{q}: {d:?}");
                assert_eq!(d[0] * 65536 + d[1] * 256 + d[2], q);
            }
        }
    }

    /// Every element is within 2^-23.99 of its block's largest magnitude of the value its
    /// digits encode (blocks over 2^100 below the largest: 2^-120 of x's largest), for
    /// blocks spanning f32's whole range (subnormals, one huge element, zeros, random
    /// exponents), in order and gathered through a column order; the lane sums and the
    /// group sums are those of the encoded integers and of x. Both packers where the CPU
    /// has AVX-512, the portable one elsewhere.
    #[test]
    fn digits_encode_x_within_the_bound() {
        for wide in [false, avx512()] {
            encode_within_the_bound(wide);
        }
    }

    /// Adversarial x number `case` of [`digits_encode_x_within_the_bound`] (k = 300).
    fn adversarial(case: u32, seed: &mut u64) -> Vec<f32> {
        let mut next = || {
            *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            (*seed >> 33) as u32
        };
        (0..300)
            .map(|j| {
                let v = (next() % 2001) as f32 * 1e-3 - 1.0;
                match case {
                    1 if j % 32 == 5 => 3e37,
                    2 => v * 1e-40,
                    3 if j % 7 == 0 => 0.0,
                    4 => f32::from_bits(next() & 0x807f_ffff),
                    5 => f32::from_bits(next() % 0x7f80_0000) * [1.0, -1.0][j % 2],
                    6 if j / 32 == 2 => v * 1e-38,
                    7 => [127.99, -128.0, 1.9999999, -1.9999999][j % 4] * v.signum(),
                    _ => v,
                }
            })
            .collect()
    }

    /// The AVX-512 packer and the portable one write the same digits, lane scales, lane
    /// sums and exponent for every adversarial x, in order and through a column order;
    /// their group sums agree to 1e-7.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn packers_agree() {
        assert!(avx512(), "the AVX-512 packer needs AVX-512 F, BW and VL");
        let mut seed = 4u64;
        let order: Vec<u32> = (0..300).rev().collect();
        for case in 0..8 {
            let x = adversarial(case, &mut seed);
            for order in [&[][..], &order] {
                let [a, b] = [false, true].map(|w| Digits::packed(&x, 300, 64, order, w));
                let (a, b) = (a.unwrap().unwrap(), b.unwrap().unwrap());
                assert_eq!(a.bytes, b.bytes, "case {case}");
                assert_eq!(a.scales, b.scales, "case {case}");
                assert_eq!(a.lane_sums, b.lane_sums, "case {case}");
                assert_eq!(a.exponent, b.exponent, "case {case}");
                for (p, w) in a.sums.iter().zip(&b.sums) {
                    assert!((p - w).abs() <= w.abs() * 1e-7, "case {case}: {p} {w}");
                }
            }
        }
    }

    /// [`digits_encode_x_within_the_bound`] with one packer.
    fn encode_within_the_bound(wide: bool) {
        let mut seed = 9u64;
        let k = 300;
        for case in 0..8 {
            let x = adversarial(case, &mut seed);
            let order: Vec<u32> = (0..k as u32).rev().collect();
            for order in [&[][..], &order] {
                let d = Digits::packed(&x, k, 64, order, wide).unwrap().unwrap();
                assert_eq!(d.pieces(), 3);
                let input = |j: usize| match (j < k, order.is_empty()) {
                    (false, _) => 0.0,
                    (true, true) => f64::from(x[j]),
                    (true, false) => f64::from(x[order[j] as usize]),
                };
                let largest = (0..k).map(|j| input(j).abs()).fold(0.0, f64::max);
                for j in 0..d.pieces() * PIECE {
                    let block = j / BLOCK * BLOCK..(j / BLOCK + 1) * BLOCK;
                    let max = block.map(|c| input(c).abs()).fold(0.0, f64::max);
                    let err = (d.value(j) - input(j)).abs();
                    let bound = (max * 2f64.powf(-23.99)).max(largest * pow2(-120));
                    assert!(err <= bound, "case {case} column {j}: {err:e}");
                }
                for (lane, &sum) in d.lane_sums.iter().enumerate() {
                    if d.scales[lane] == 0.0 {
                        assert_eq!(sum, 0, "case {case} lane {lane} (zeros)");
                        continue;
                    }
                    let (piece, c) = (lane / LANES, lane % LANES * 8);
                    let q: f64 = (c..c + 8)
                        .map(|c| d.value(piece * PIECE + c) / pow2(d.exponent))
                        .map(|v| v / f64::from(d.scales[lane]))
                        .sum();
                    assert_eq!(f64::from(sum), q, "case {case} lane {lane}");
                }
                for (g, &got) in d.sums.iter().enumerate() {
                    let sum: f64 = (g * 64..(g * 64 + 64).min(k)).map(input).sum();
                    let got = f64::from(got) * pow2(d.exponent);
                    assert!(
                        (got - sum).abs() <= sum.abs() * 1e-7,
                        "case {case} group {g}"
                    );
                }
            }
        }
        let mut x = vec![1.0f32; k];
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            x[17] = bad;
            assert!(Digits::packed(&x, k, 32, &[], wide).unwrap().is_none());
        }
    }
}
