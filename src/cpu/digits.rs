//! x split into three signed 8-bit digits per element, for the integer dot-product GEMV
//! ([`super::vnni`]): per block of 32 columns, `x ≈ 2^(e−21)·(D0·2^16 + D1·2^8 + D2)`
//! with `e = ⌊log2 max|x|⌋` of the block, `D0 ∈ [−64, 64]`, `D1, D2 ∈ [−128, 127]`.
//!
//! The split rounds `x·2^(21−e)` (at most 2^22 in magnitude; two exact f32 products) to
//! the nearest integer once, so each element is within `2^(e−22)`, i.e. 2^-22 of its
//! block's largest magnitude, of the value the digits encode; the digits themselves are
//! an exact base-256 expansion of that integer. A block of zeros has zero digits and
//! scale.
//!
//! Order: pieces of 128 columns (4 blocks, the 64 code bytes of one 512-bit load); per
//! piece, 6 vectors of 64 digits: D0 of the even columns (byte `j`: column `2j`, which
//! meets the low nibble of code byte `j`), D0 of the odd columns, then D1 and D2 alike.
//! Each piece also gets 16 f32 lane scales: lane `i` of a 32-bit dot product sums
//! columns `8i..8i + 8` of the piece, all in block `i / 4`, and takes that block's
//! `2^(e−21−E)`, where `2^E` is the largest block's `2^e` (results are multiplied by
//! `2^E` at the end, so no scale overflows and only blocks below 2^-128 of the largest
//! underflow). Built with AVX-512 (F, BW, VL), the CPUs the VNNI kernel runs on.

use crate::alloc;
use crate::error::Result;
use std::arch::x86_64::*;

/// Columns per piece (the codes of one 64-byte load).
pub const PIECE: usize = 128;
/// Digit bytes per piece: 3 digits × (even, odd) × 64.
pub const PIECE_BYTES: usize = 6 * 64;
/// Lane scales per piece.
pub const LANES: usize = 16;
/// Columns per block (one x scale).
const BLOCK: usize = 32;

/// One row of x in digits, with its per-group sums.
pub struct Digits {
    /// `[pieces][PIECE_BYTES]` signed digits (see the module docs for the order).
    pub bytes: Vec<i8>,
    /// `[pieces][LANES]` lane scales `2^(e−21−E)`.
    pub scales: Vec<f32>,
    /// `[groups]` the group's `Σ x · 2^-E` (exact x, summed in f64).
    pub sums: Vec<f32>,
    /// `E`: results are multiplied by `2^E`.
    pub exponent: i32,
}

/// `2^e` in f64 (e within ±1022).
fn pow2(e: i32) -> f64 {
    f64::from_bits(((1023 + e) as u64) << 52)
}

/// `⌊log2 v⌋` of a finite positive f32 (subnormals included).
fn exponent(v: f32) -> i32 {
    ((f64::from(v).to_bits() >> 52) & 0x7ff) as i32 - 1023
}

/// The three digits `(D0, D1, D2)` of integers `q` with `|q| ≤ 2^22` (16 lanes):
/// `q = D0·2^16 + D1·2^8 + D2`, `D1, D2 ∈ [−128, 127]`, so `|D0| ≤ 64`.
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
    /// Allocation failures are `OutOfHostMemory`. The CPU must have AVX-512 F, BW and VL
    /// (asserted).
    pub fn new(x: &[f32], k: usize, group_size: usize, order: &[u32]) -> Result<Option<Digits>> {
        assert!(
            is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512vl")
        );
        assert!(group_size.is_multiple_of(BLOCK) || group_size == k);
        let x = &x[..k];
        let pieces = k.div_ceil(PIECE);
        let mut cols = alloc::filled::<f32>(pieces * PIECE, "the activations in column order")?;
        match order.is_empty() {
            true => cols[..k].copy_from_slice(x),
            false => cols.iter_mut().zip(order).for_each(|(c, &i)| *c = x[i as usize]),
        }
        let blocks = cols.len() / BLOCK;
        let mut sums = alloc::filled::<f64>(blocks, "the activations' block sums")?;
        let mut exps = alloc::filled::<i32>(blocks, "the activations' block exponents")?;
        let mut bytes = alloc::filled::<i8>(pieces * PIECE_BYTES, "the activations' digits")?;
        let mut scales = alloc::filled::<f32>(pieces * LANES, "the activations' scales")?;
        // SAFETY: the CPU features are asserted above; the slices are sized for the blocks.
        if !unsafe { blocks_of(&cols, &mut bytes, &mut sums, &mut exps) } {
            return Ok(None);
        }
        let top = exps.iter().copied().max().filter(|&e| e > i32::MIN);
        let top = top.unwrap_or(0);
        for (b, &e) in exps.iter().enumerate() {
            if e > i32::MIN {
                let lane = pow2(e - 21 - top) as f32;
                scales[b / 4 * LANES + b % 4 * 4..][..4].fill(lane);
            }
        }
        let inverse = pow2(-top);
        let group_blocks = group_size.div_ceil(BLOCK);
        let sums = alloc::collect(
            sums.chunks(group_blocks)
                .take(k.div_ceil(group_size))
                .map(|g| (g.iter().sum::<f64>() * inverse) as f32),
            "the activations' group sums",
        )?;
        Ok(Some(Digits {
            bytes,
            scales,
            sums,
            exponent: top,
        }))
    }

    /// Pieces of 128 columns.
    pub fn pieces(&self) -> usize {
        self.scales.len() / LANES
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

/// The digits (into `bytes`), f64 sums and exponents `e` of every block of 32 columns
/// of `cols` (`i32::MIN` for a block of zeros, whose digits stay 0); false, leaving the
/// rest unwritten, at the first block with an infinite or NaN element.
///
/// # Safety
/// AVX-512 F, BW and VL; `bytes`, `sums` and `exps` sized for the blocks of `cols`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn blocks_of(cols: &[f32], bytes: &mut [i8], sums: &mut [f64], exps: &mut [i32]) -> bool {
    // Even columns of the block (from its two halves of 16), then odd ones.
    let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    let blocks = cols.chunks_exact(BLOCK).zip(sums.iter_mut().zip(exps.iter_mut()));
    for (b, (block, (sum, exp))) in blocks.enumerate() {
        // SAFETY: 32 floats in the block.
        let [v0, v1] = [0, 16].map(|at| unsafe { _mm512_loadu_ps(block.as_ptr().add(at)) });
        let magnitude = [_mm512_abs_ps(v0), _mm512_abs_ps(v1)];
        let infinity = _mm512_set1_ps(f32::INFINITY);
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
        let max = _mm512_reduce_max_ps(_mm512_max_ps(magnitude[0], magnitude[1]));
        if max == 0.0 {
            *exp = i32::MIN;
            continue;
        }
        let e = exponent(max);
        *exp = e;
        // x·2^(21−e) in two exact products (2^(21−e) alone may exceed f32's range).
        let first = (21 - e).min(120);
        let a = _mm512_set1_ps(pow2(first) as f32);
        let c = _mm512_set1_ps(pow2(21 - e - first) as f32);
        let (piece, at) = (b / 4, b % 4 * (BLOCK / 2));
        for (parity, idx) in [even, odd].into_iter().enumerate() {
            let v = _mm512_permutex2var_ps(v0, idx, v1);
            // Rounded to nearest (the default rounding mode); exact, being below 2^23.
            let q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_mul_ps(v, a), c));
            for (d, digits) in split(q).into_iter().enumerate() {
                let to = piece * PIECE_BYTES + d * 128 + parity * 64 + at;
                // SAFETY: the 16 bytes at `to` lie in the piece's digits.
                let dst = unsafe { bytes.as_mut_ptr().add(to) };
                unsafe { _mm_storeu_si128(dst.cast(), _mm512_cvtepi32_epi8(digits)) };
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_exact_and_in_range() {
        assert!(is_x86_feature_detected!("avx512f"), "the digits need AVX-512");
        let edges = [-(1 << 22), 1 << 22, 0, -1];
        let values: Vec<i32> = (-(1 << 22)..=(1 << 22)).step_by(97).chain(edges).collect();
        for q in values.chunks(16) {
            let mut lanes = [0i32; 16];
            lanes[..q.len()].copy_from_slice(q);
            // SAFETY: AVX-512 F (asserted); 16 lanes read; __m512i and [i32; 16] have one size.
            let digits: [[i32; 16]; 3] = unsafe {
                split(_mm512_loadu_si512(lanes.as_ptr().cast())).map(|d| std::mem::transmute(d))
            };
            for (i, &q) in q.iter().enumerate() {
                let [d0, d1, d2] = digits.map(|d| d[i]);
                assert!((-64..=64).contains(&d0) && (-128..=127).contains(&d1), "{q}");
                assert!((-128..=127).contains(&d2), "{q}");
                assert_eq!(d0 * 65536 + d1 * 256 + d2, q);
            }
        }
    }


    /// Every element is within 2^-22 of its block's largest magnitude of the value its
    /// digits encode, for blocks spanning f32's whole range (subnormals, one huge element,
    /// zeros), in order and gathered through a column order.
    #[test]
    fn digits_encode_x_within_the_bound() {
        let mut seed = 9u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            (seed >> 33) as u32
        };
        let k = 300;
        for case in 0..6 {
            let x: Vec<f32> = (0..k)
                .map(|j| {
                    let v = (next() % 2001) as f32 * 1e-3 - 1.0;
                    match case {
                        0 => v,
                        1 if j % 32 == 5 => 3e37,
                        2 => v * 1e-40,
                        3 if j % 7 == 0 => 0.0,
                        4 => f32::from_bits(next() & 0x807f_ffff),
                        5 => f32::from_bits(next() % 0x7f80_0000) * [1.0, -1.0][j % 2],
                        _ => v,
                    }
                })
                .collect();
            let order: Vec<u32> = (0..k as u32).rev().collect();
            for order in [&[][..], &order] {
                let d = Digits::new(&x, k, 64, order).unwrap().unwrap();
                assert_eq!(d.pieces(), 3);
                for j in 0..d.pieces() * PIECE {
                    let input = |j: usize| match (j < k, order.is_empty()) {
                        (false, _) => 0.0,
                        (true, true) => x[j],
                        (true, false) => x[order[j] as usize],
                    };
                    let block = j / BLOCK * BLOCK..(j / BLOCK + 1) * BLOCK;
                    let max = block.map(|c| f64::from(input(c)).abs()).fold(0.0, f64::max);
                    let err = (d.value(j) - f64::from(input(j))).abs();
                    assert!(err <= max * pow2(-22), "case {case} column {j}: {err:e}");
                }
                let sum: f64 = (0..64).map(|j| f64::from(x[order.get(j).map_or(j, |&o| o as usize)])).sum();
                let got = f64::from(d.sums[0]) * pow2(d.exponent);
                assert!((got - sum).abs() <= sum.abs() * 1e-7 + 1e-45, "case {case}");
            }
        }
        let mut x = vec![1.0f32; k];
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            x[17] = bad;
            assert!(Digits::new(&x, k, 32, &[]).unwrap().is_none());
        }
    }
}
