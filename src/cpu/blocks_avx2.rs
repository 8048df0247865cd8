//! The AVX2 kernels of `super::blocks_dot` (x86-64), a tile of 4 rows at a time (each
//! run's x digits loaded once for the tile's rows), one build per block type and form of
//! x (three digits, or one byte: then each lane is one product sum, far inside the
//! bounds below). A run of 32 codes is decoded in a register from the step's bytes
//! (`run_codes`).
//!
//! * Unsigned codes (at most 63): `vpmaddubsw` multiplies codes and digits into pairs of
//!   16-bit sums (at most `2·63·128 = 16128`: no saturation) and `vpmaddwd` by ones adds
//!   the pairs into 32-bit lanes of 4 columns; the three digits are combined in the lanes
//!   (`|Σ| ≤ 4·63·(127.49·2^16 + 1/2) < 2^31`). The run's lanes take its scale (Q6_K's:
//!   lanes 0..4 the first 16 columns', 4..8 the next's).
//! * Signed values (Q8_0's bytes, IQ4's and E2M1's looked up with `vpshufb`): values and
//!   digits widened to 16 bits, and `vpmaddwd` sums pairs of products into 32-bit lanes
//!   of 2 columns, the digits combined there too (`|Σ| ≤ 2·128·(127.49·2^16 + 1/2) <
//!   2^31`); `vpmaddubsw`'s unsigned × signed bytes would saturate or lose a sign. Each
//!   16 columns are one vector with one scale (its run's, or NVFP4's own).
//!
//! Each lane's sum times its weight scale and its 32 columns' x scale is added into an
//! f32 accumulator per row.

use super::block_steps::{per_half, step_bytes, CodeClass, Step, HALF, STEP};
use super::blocks_dot::{finish, load_steps, pick, tile_builds, ColumnDigits, Tile, SUB_BLOCK};
use super::kernels::TILE_ROWS;
use crate::import::gguf_blocks::BlockType;
use std::arch::x86_64::*;

/// Whether this CPU runs the kernels (AVX2 and FMA).
pub fn supported() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
}

/// The tile kernel for `ty` on x in three digits, or in one byte (`one_digit`).
pub(super) fn tile(ty: BlockType, one_digit: bool) -> Tile {
    pick(tile_builds!(tile_of), ty, one_digit)
}

/// 32 bytes from `at`.
///
/// # Safety
/// AVX2; 32 readable bytes at `at`.
#[target_feature(enable = "avx2")]
unsafe fn load32(at: *const u8) -> __m256i {
    // SAFETY: the caller's contract.
    unsafe { _mm256_loadu_si256(at.cast()) }
}

/// 16 bytes from `at`.
///
/// # Safety
/// AVX2; 16 readable bytes at `at`.
#[target_feature(enable = "avx2")]
unsafe fn load16(at: *const u8) -> __m128i {
    // SAFETY: the caller's contract.
    unsafe { _mm_loadu_si128(at.cast()) }
}

/// The nibbles of 16 bytes at `at`: the low ones (columns 0..16), then the high ones.
///
/// # Safety
/// AVX2; 16 readable bytes at `at`.
#[target_feature(enable = "avx2")]
unsafe fn split16(at: *const u8) -> __m256i {
    // SAFETY: the caller's contract.
    let bytes = unsafe { load16(at) };
    let low = _mm_set1_epi8(0x0F);
    let high = _mm_and_si128(_mm_srli_epi16::<4>(bytes), low);
    _mm256_set_m128i(high, _mm_and_si128(bytes, low))
}

/// 16 in byte `j` where bit `j` of `bits` is set, else 0 (Q5_0's and Q5_1's fifth bits).
#[target_feature(enable = "avx2")]
fn fifth_bits(bits: u32) -> __m256i {
    // Byte j takes byte j / 8 of the word, then its bit j % 8.
    let spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(bits as i32),
        _mm256_setr_epi64x(
            0,
            0x0101_0101_0101_0101,
            0x0202_0202_0202_0202,
            0x0303_0303_0303_0303,
        ),
    );
    let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    _mm256_and_si256(set, _mm256_set1_epi8(16))
}

/// The nibbles `(byte >> shift) & 15` of 32 bytes (`shift` 0 or 4).
#[target_feature(enable = "avx2")]
fn nibbles(bytes: __m256i, shift: usize) -> __m256i {
    let shifted = match shift {
        0 => bytes,
        _ => _mm256_srli_epi16::<4>(bytes),
    };
    _mm256_and_si256(shifted, _mm256_set1_epi8(0x0F))
}

/// `(bytes >> shift) & mask` per byte, `shift` below 8.
#[target_feature(enable = "avx2")]
fn bits_at(bytes: __m256i, shift: usize, mask: i8) -> __m256i {
    let shifted = _mm256_srl_epi16(bytes, _mm_cvtsi32_si128(shift as i32));
    _mm256_and_si256(shifted, _mm256_set1_epi8(mask))
}

/// The 32 codes of run `run` of a step of `ty` whose bytes start at `step` (see
/// `super::block_steps` for runs): unsigned codes, Q8_0's bytes, or table indices.
///
/// # Safety
/// AVX2; the step's blocks up to the run's are readable at `step`.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn run_codes(ty: BlockType, step: *const u8, run: usize) -> __m256i {
    let at = |offset: usize| {
        // SAFETY: within the step's blocks (the caller's contract; offsets by the layouts
        // of `import::gguf_blocks`).
        unsafe { step.add(offset) }
    };
    let qh = |offset: usize| {
        // SAFETY: as `at`.
        u32::from_le_bytes(unsafe { at(offset).cast::<[u8; 4]>().read_unaligned() })
    };
    // SAFETY: every load lies within the run's block, as `at`.
    unsafe {
        match ty {
            BlockType::Q4K => nibbles(load32(at(16 + 32 * (run / 2))), 4 * (run % 2)),
            BlockType::Q5K => {
                let low = nibbles(load32(at(48 + 32 * (run / 2))), 4 * (run % 2));
                let fifth = bits_at(load32(at(16)), run, 1);
                _mm256_or_si256(low, _mm256_slli_epi16::<4>(fifth))
            }
            BlockType::Q6K => {
                let (h, p) = (run / 4, run % 4);
                let low = nibbles(load32(at(64 * h + 32 * (p % 2))), 4 * (p / 2));
                let high = bits_at(load32(at(128 + 32 * h)), 2 * p, 3);
                _mm256_or_si256(low, _mm256_slli_epi16::<4>(high))
            }
            BlockType::Q4_1 => split16(at(20 * run + 4)),
            BlockType::Q5_0 => {
                _mm256_or_si256(split16(at(22 * run + 6)), fifth_bits(qh(22 * run + 2)))
            }
            BlockType::Q5_1 => {
                _mm256_or_si256(split16(at(24 * run + 8)), fifth_bits(qh(24 * run + 4)))
            }
            BlockType::Q8_0 => load32(at(34 * run + 2)),
            BlockType::Iq4Nl => split16(at(18 * run + 2)),
            BlockType::Iq4Xs => split16(at(8 + 16 * run)),
            BlockType::Mxfp4 => split16(at(17 * run + 1)),
            BlockType::Nvfp4 => {
                // Two sub-blocks of 8 bytes: each its low nibbles, then its high ones.
                let bytes = load16(at(36 * (run / 2) + 4 + 16 * (run % 2)));
                let low = _mm_set1_epi8(0x0F);
                let (lo, hi) = (
                    _mm_and_si128(bytes, low),
                    _mm_and_si128(_mm_srli_epi16::<4>(bytes), low),
                );
                _mm256_set_m128i(_mm_unpackhi_epi64(lo, hi), _mm_unpacklo_epi64(lo, hi))
            }
        }
    }
}

/// Four products of `codes` (unsigned bytes) and `digits` (signed) summed per 32-bit lane.
#[target_feature(enable = "avx2")]
fn dot4(codes: __m256i, digits: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(codes, digits), _mm256_set1_epi16(1))
}

/// The f32 lanes of `acc` summed in f64: the row's products in units of `2^E`.
#[target_feature(enable = "avx2")]
fn lanes_sum(acc: __m256) -> f64 {
    let mut lanes = [0f32; 8];
    // SAFETY: an 8-lane array.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc) };
    lanes.iter().map(|&v| f64::from(v)).sum()
}

/// Rows of `BlockType::ALL[T]`, on x in three digits or (`ONE`) in one byte.
///
/// # Safety
/// AVX2 and FMA; each row holds `xd.k / block` blocks of the type.
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_of<const T: usize, const ONE: bool>(
    rows: [&[u8]; TILE_ROWS],
    xd: &ColumnDigits,
) -> [f32; TILE_ROWS] {
    let ty = BlockType::ALL[T];
    let class = CodeClass::of(ty);
    // SAFETY: 16 bytes, in both halves.
    let table = class
        .table()
        .map(|values| unsafe { _mm256_broadcastsi128_si256(load16(values.as_ptr().cast())) });
    let mut steps: [Step; TILE_ROWS] = std::array::from_fn(|_| Step::new());
    let mut acc = [_mm256_setzero_ps(); TILE_ROWS];
    let mut constants = [0f64; TILE_ROWS];
    let bytes = step_bytes(ty);
    let planes = if ONE { 1 } else { 3 };
    debug_assert_eq!(xd.digits, planes);
    for (s, first) in (0..xd.k).step_by(STEP).enumerate() {
        let columns = STEP.min(xd.k - first);
        let tile = (&mut steps, &mut constants);
        load_steps(tile, (ty, &rows), xd, (s, first, columns));
        for run in 0..columns / SUB_BLOCK {
            let column = first + SUB_BLOCK * run;
            let t = xd.scales[column / SUB_BLOCK];
            let plane = |p: usize| {
                // SAFETY: digits `column..column + 32` of plane p (k columns each).
                unsafe { xd.planes.as_ptr().add(p * xd.k + column).cast::<u8>() }
            };
            if class == CodeClass::Unsigned {
                let digits = [0, 1, 2].map(|p| match p < planes {
                    // SAFETY: 32 digits of the plane.
                    true => unsafe { load32(plane(p)) },
                    false => _mm256_setzero_si256(),
                });
                for r in 0..TILE_ROWS {
                    // SAFETY: the run lies within the row's step.
                    let codes = unsafe { run_codes(ty, rows[r].as_ptr().add(s * bytes), run) };
                    let mut sum = dot4(codes, digits[0]);
                    if !ONE {
                        sum = _mm256_add_epi32(_mm256_slli_epi32::<8>(sum), dot4(codes, digits[1]));
                        sum = _mm256_add_epi32(_mm256_slli_epi32::<8>(sum), dot4(codes, digits[2]));
                    }
                    let scale = match per_half(ty) {
                        true => {
                            let halves = &steps[r].scales[2 * run..];
                            let (low, high) = (halves[0] * t, halves[1] * t);
                            _mm256_set_m128(_mm_set1_ps(high), _mm_set1_ps(low))
                        }
                        false => _mm256_set1_ps(steps[r].scales[run] * t),
                    };
                    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), scale, acc[r]);
                }
            } else {
                let digits = [0, 1].map(|half| {
                    [0, 1, 2].map(|p| match p < planes {
                        // SAFETY: 16 digits of the plane's 32 at the run.
                        true => _mm256_cvtepi8_epi16(unsafe { load16(plane(p).add(HALF * half)) }),
                        false => _mm256_setzero_si256(),
                    })
                });
                for r in 0..TILE_ROWS {
                    // SAFETY: the run lies within the row's step.
                    let codes = unsafe { run_codes(ty, rows[r].as_ptr().add(s * bytes), run) };
                    let values = match table {
                        Some(table) => _mm256_shuffle_epi8(table, codes),
                        None => codes,
                    };
                    let halves = [
                        _mm256_castsi256_si128(values),
                        _mm256_extracti128_si256::<1>(values),
                    ];
                    for (half, (values, digits)) in halves.into_iter().zip(&digits).enumerate() {
                        let values = _mm256_cvtepi8_epi16(values);
                        let mut sum = _mm256_madd_epi16(values, digits[0]);
                        if !ONE {
                            let next = _mm256_madd_epi16(values, digits[1]);
                            sum = _mm256_add_epi32(_mm256_slli_epi32::<8>(sum), next);
                            let next = _mm256_madd_epi16(values, digits[2]);
                            sum = _mm256_add_epi32(_mm256_slli_epi32::<8>(sum), next);
                        }
                        let at = if per_half(ty) { 2 * run + half } else { run };
                        let scale = _mm256_set1_ps(steps[r].scales[at] * t);
                        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), scale, acc[r]);
                    }
                }
            }
        }
    }
    std::array::from_fn(|r| finish(lanes_sum(acc[r]), xd, constants[r]))
}
