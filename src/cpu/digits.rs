//! x split into three signed 8-bit digits per element, for the integer dot-product GEMV
//! ([`super::vnni`]): per block of 32 columns, `x ≈ 2^(e−21)·(D0·2^16 + D1·2^8 + D2)`
//! with `e = ⌊log2 max|x|⌋` of the block, `D0 ∈ [−64, 64]`, `D1, D2 ∈ [−128, 127]`.
//!
//! The split rounds `x·2^(21−e)` (below 2^22 in magnitude, computed exactly in f64) to
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
//! underflow).

use crate::alloc;
use crate::error::Result;

/// Columns per piece (the codes of one 64-byte load).
pub const PIECE: usize = 128;
/// Digit bytes per piece: 3 digits × (even, odd) × 64.
pub const PIECE_BYTES: usize = 6 * 64;
/// Lane scales per piece.
pub const LANES: usize = 16;
/// Columns per block (one x scale).
const BLOCK: usize = 32;

/// One row of x in digits, with its per-group sums, for a matrix of `groups` groups of
/// `group_size` columns.
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

/// `⌊log2 |v|⌋` of a finite non-zero f32 (subnormals included).
fn exponent(v: f32) -> i32 {
    ((f64::from(v).to_bits() >> 52) & 0x7ff) as i32 - 1023
}

/// The three digits `(D0, D1, D2)` of an integer `q` with `|q| ≤ 2^22`: `q = D0·2^16 +
/// D1·2^8 + D2`, `D1, D2 ∈ [−128, 127]`, so `|D0| ≤ 64`.
fn split(q: i32) -> [i8; 3] {
    let d2 = ((q + 128) & 255) - 128;
    let q1 = (q - d2) >> 8;
    let d1 = ((q1 + 128) & 255) - 128;
    let d0 = (q1 - d1) >> 8;
    [d0 as i8, d1 as i8, d2 as i8]
}

impl Digits {
    /// The digits of `x` (`k` columns; column `j` takes input `order[j]` when `order` is
    /// not empty), padded with zeros to `pieces·128` columns, and the sums of its groups of
    /// `group_size` columns (the last may be shorter). `None` when x has an infinite or
    /// NaN element (the f32 kernels keep their policy for those). Allocation failures
    /// are `OutOfHostMemory`.
    pub fn new(x: &[f32], k: usize, group_size: usize, order: &[u32]) -> Result<Option<Digits>> {
        let x = &x[..k];
        if !x.iter().all(|v| v.is_finite()) {
            return Ok(None);
        }
        let at = |j: usize| match (j < k, order.is_empty()) {
            (false, _) => 0.0,
            (true, true) => x[j],
            (true, false) => x[order[j] as usize],
        };
        let pieces = k.div_ceil(PIECE);
        let blocks = pieces * (PIECE / BLOCK);
        let mut block_exp = alloc::filled::<i32>(blocks, "the activations' block exponents")?;
        let mut top = i32::MIN;
        for (b, e) in block_exp.iter_mut().enumerate() {
            let max = (b * BLOCK..(b + 1) * BLOCK).fold(0f32, |m, j| m.max(at(j).abs()));
            *e = if max == 0.0 { i32::MIN } else { exponent(max) };
            top = top.max(*e);
        }
        let top = if top == i32::MIN { 0 } else { top };
        let mut bytes = alloc::filled::<i8>(pieces * PIECE_BYTES, "the activations' digits")?;
        let mut scales = alloc::filled::<f32>(pieces * LANES, "the activations' scales")?;
        for (b, &e) in block_exp.iter().enumerate() {
            if e == i32::MIN {
                continue;
            }
            let (piece, first) = (b / 4, b % 4 * BLOCK);
            let dst = &mut bytes[piece * PIECE_BYTES..][..PIECE_BYTES];
            let unit = pow2(21 - e);
            for c in first..first + BLOCK {
                let q = (f64::from(at(piece * PIECE + c)) * unit).round() as i32;
                for (d, digit) in split(q).into_iter().enumerate() {
                    dst[d * 128 + (c % 2) * 64 + c / 2] = digit;
                }
            }
            let lane = (pow2(e - 21 - top)) as f32;
            scales[piece * LANES + b % 4 * 4..][..4].fill(lane);
        }
        let groups = k.div_ceil(group_size);
        let inverse = pow2(-top);
        let sums = alloc::collect(
            (0..groups).map(|g| {
                let cols = g * group_size..((g + 1) * group_size).min(k);
                (cols.map(|j| f64::from(at(j))).sum::<f64>() * inverse) as f32
            }),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_exact_and_in_range() {
        for q in (-(1 << 22)..=(1 << 22)).step_by(97).chain([-(1 << 22), 1 << 22, 0, -1]) {
            let [d0, d1, d2] = split(q);
            assert!((-64..=64).contains(&d0), "{q}: {d0}");
            let back = i32::from(d0) * 65536 + i32::from(d1) * 256 + i32::from(d2);
            assert_eq!(back, q);
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
