//! The CPU GEMV kernels over rows of a [`CpuMatrix`]: AVX2 + FMA (x86-64, chosen at run
//! time), NEON (aarch64) and portable scalar code. All take x as [`super::gemv::pack_x`]
//! reorders it and write, for each row of W in the span, its `M` results together.
//!
//! Per group and x row, `sum x·(u − z)` is accumulated in f32 (u − z exact in f32), then
//! multiplied by the group's scale and added to the row's total.

use super::matrix::{CpuMatrix, BLOCK};
use std::ops::Range;

/// A kernel family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// Portable Rust, no vector intrinsics.
    Scalar,
    /// x86-64 AVX2 + FMA.
    Avx2,
    /// aarch64 Advanced SIMD.
    Neon,
}

impl Isa {
    /// The fastest family this CPU runs.
    pub fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return Isa::Avx2;
        }
        #[cfg(target_arch = "aarch64")]
        if std::arch::is_aarch64_feature_detected!("neon") {
            return Isa::Neon;
        }
        Isa::Scalar
    }

    /// Every family this CPU runs, scalar first.
    pub fn available() -> Vec<Isa> {
        let best = Isa::detect();
        if best == Isa::Scalar {
            vec![Isa::Scalar]
        } else {
            vec![Isa::Scalar, best]
        }
    }

    /// Name for `q4vk_context_device_name`.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "AVX2+FMA",
            Isa::Neon => "NEON",
        }
    }
}

/// Rows `rows` of W times the `m` packed x rows `xp`; `out` gets `m` values per row.
/// `isa` must be one of [`Isa::available`].
pub fn rows(isa: Isa, mat: &CpuMatrix, xp: &[f32], m: usize, rows: Range<usize>, out: &mut [f32]) {
    assert!(rows.end <= mat.shape.n && out.len() == rows.len() * m);
    assert!(xp.len() == m * mat.blocks() * BLOCK);
    macro_rules! by_m {
        ($f:ident) => {
            match m {
                1 => $f::<1, 4>(mat, xp, rows, out),
                2 => $f::<2, 2>(mat, xp, rows, out),
                3 => $f::<3, 1>(mat, xp, rows, out),
                4 => $f::<4, 1>(mat, xp, rows, out),
                5 => $f::<5, 1>(mat, xp, rows, out),
                6 => $f::<6, 1>(mat, xp, rows, out),
                7 => $f::<7, 1>(mat, xp, rows, out),
                8 => $f::<8, 1>(mat, xp, rows, out),
                _ => unreachable!("m is checked to be 1..=8"),
            }
        };
    }
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => {
            assert!(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"));
            fn run<const M: usize, const A: usize>(
                mat: &CpuMatrix,
                xp: &[f32],
                rows: Range<usize>,
                out: &mut [f32],
            ) {
                // SAFETY: the CPU has AVX2 and FMA (asserted above).
                unsafe { avx2::rows::<M, A>(mat, xp, rows, out) }
            }
            by_m!(run)
        }
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => {
            assert!(std::arch::is_aarch64_feature_detected!("neon"));
            fn run<const M: usize, const A: usize>(
                mat: &CpuMatrix,
                xp: &[f32],
                rows: Range<usize>,
                out: &mut [f32],
            ) {
                // SAFETY: the CPU has NEON (asserted above).
                unsafe { neon::rows::<M, A>(mat, xp, rows, out) }
            }
            by_m!(run)
        }
        _ => by_m!(scalar),
    }
}

/// Geometry shared by the kernels: (row stride in bytes, groups per row, blocks per row,
/// blocks per group, padded x row length).
fn geometry(mat: &CpuMatrix) -> (usize, usize, usize, usize, usize) {
    let blocks = mat.blocks();
    (
        mat.row_stride(),
        mat.shape.groups(),
        blocks,
        mat.group_blocks(),
        blocks * BLOCK,
    )
}

fn scalar<const M: usize, const A: usize>(
    mat: &CpuMatrix,
    xp: &[f32],
    rows: Range<usize>,
    out: &mut [f32],
) {
    let (stride, groups, blocks, group_blocks, padded) = geometry(mat);
    for (row, results) in rows.zip(out.chunks_exact_mut(M)) {
        let codes = &mat.codes[row * stride..][..stride];
        let mut total = [0f32; M];
        for g in 0..groups {
            let gi = row * groups + g;
            let z = mat.zero(gi);
            let mut acc = [0f32; M];
            for b in g * group_blocks..((g + 1) * group_blocks).min(blocks) {
                for (c, bytes) in codes[b * 16..][..16].chunks_exact(8).enumerate() {
                    let base = b * BLOCK + c * 16;
                    for (j, &byte) in bytes.iter().enumerate() {
                        let lo = (byte & 15) as f32 - z;
                        let hi = (byte >> 4) as f32 - z;
                        for (r, a) in acc.iter_mut().enumerate() {
                            let x = &xp[r * padded + base..][..16];
                            *a += x[j] * lo + x[8 + j] * hi;
                        }
                    }
                }
            }
            for (t, a) in total.iter_mut().zip(acc) {
                *t += a * mat.scales[gi];
            }
        }
        results.copy_from_slice(&total);
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{geometry, CpuMatrix, Range, BLOCK};
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2,fma")]
    fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_movehdup_ps(s));
        _mm_cvtss_f32(s)
    }

    /// AVX2 kernel: `M` x rows, `A` accumulators per x row (to hide FMA latency when M is
    /// small). Each 8 code bytes are widened to 8 lanes; the low nibbles meet x's 8 even
    /// elements, the high nibbles its 8 odd ones.
    #[target_feature(enable = "avx2,fma")]
    pub fn rows<const M: usize, const A: usize>(
        mat: &CpuMatrix,
        xp: &[f32],
        rows: Range<usize>,
        out: &mut [f32],
    ) {
        let (stride, groups, blocks, group_blocks, padded) = geometry(mat);
        assert!(xp.len() >= M * padded);
        let mask = _mm256_set1_epi32(15);
        for (row, results) in rows.zip(out.chunks_exact_mut(M)) {
            let codes = &mat.codes[row * stride..][..stride];
            let mut total = [_mm256_setzero_ps(); M];
            for g in 0..groups {
                let gi = row * groups + g;
                let z = _mm256_set1_ps(mat.zero(gi));
                let mut acc = [[_mm256_setzero_ps(); A]; M];
                for b in g * group_blocks..((g + 1) * group_blocks).min(blocks) {
                    for h in 0..2 {
                        // SAFETY: b < blocks, so bytes b·16 + h·8 .. + 8 lie within the
                        // row's `stride` = blocks·16 bytes.
                        let v = unsafe {
                            _mm256_cvtepu8_epi32(_mm_loadl_epi64(
                                codes.as_ptr().add(b * 16 + h * 8).cast(),
                            ))
                        };
                        let lo = _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_and_si256(v, mask)), z);
                        let hi = _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32::<4>(v)), z);
                        for (r, acc) in acc.iter_mut().enumerate() {
                            let at = r * padded + b * BLOCK + h * 16;
                            // SAFETY: r < M and b·32 + h·16 + 16 ≤ padded, so the 16 floats
                            // at `at` lie within xp (M·padded long, asserted above).
                            let (x0, x1) = unsafe {
                                let p = xp.as_ptr().add(at);
                                (_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)))
                            };
                            acc[(2 * h) % A] = _mm256_fmadd_ps(lo, x0, acc[(2 * h) % A]);
                            acc[(2 * h + 1) % A] = _mm256_fmadd_ps(hi, x1, acc[(2 * h + 1) % A]);
                        }
                    }
                }
                let s = _mm256_set1_ps(mat.scales[gi]);
                for (t, acc) in total.iter_mut().zip(acc) {
                    let sum = acc[1..].iter().fold(acc[0], |a, &b| _mm256_add_ps(a, b));
                    *t = _mm256_fmadd_ps(sum, s, *t);
                }
            }
            for (r, t) in results.iter_mut().zip(total) {
                *r = hsum(t);
            }
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod neon {
    use super::{geometry, CpuMatrix, Range, BLOCK};
    use std::arch::aarch64::*;

    /// NEON kernel, as the AVX2 one with 4-lane vectors: 8 code bytes give 8 low and 8 high
    /// nibbles, widened to four vectors of 4 f32.
    #[target_feature(enable = "neon")]
    pub fn rows<const M: usize, const A: usize>(
        mat: &CpuMatrix,
        xp: &[f32],
        rows: Range<usize>,
        out: &mut [f32],
    ) {
        let (stride, groups, blocks, group_blocks, padded) = geometry(mat);
        assert!(xp.len() >= M * padded);
        let mask = vdup_n_u8(15);
        for (row, results) in rows.zip(out.chunks_exact_mut(M)) {
            let codes = &mat.codes[row * stride..][..stride];
            let mut total = [vdupq_n_f32(0.0); M];
            for g in 0..groups {
                let gi = row * groups + g;
                let z = vdupq_n_f32(mat.zero(gi));
                let mut acc = [[vdupq_n_f32(0.0); A]; M];
                for b in g * group_blocks..((g + 1) * group_blocks).min(blocks) {
                    for h in 0..2 {
                        // SAFETY: b < blocks, so bytes b·16 + h·8 .. + 8 lie within the
                        // row's `stride` = blocks·16 bytes.
                        let bytes = unsafe { vld1_u8(codes.as_ptr().add(b * 16 + h * 8)) };
                        let lo = vmovl_u8(vand_u8(bytes, mask));
                        let hi = vmovl_u8(vshr_n_u8::<4>(bytes));
                        let w = [
                            vsubq_f32(vcvtq_f32_u32(vmovl_u16(vget_low_u16(lo))), z),
                            vsubq_f32(vcvtq_f32_u32(vmovl_high_u16(lo)), z),
                            vsubq_f32(vcvtq_f32_u32(vmovl_u16(vget_low_u16(hi))), z),
                            vsubq_f32(vcvtq_f32_u32(vmovl_high_u16(hi)), z),
                        ];
                        for (r, acc) in acc.iter_mut().enumerate() {
                            let at = r * padded + b * BLOCK + h * 16;
                            for (q, &wq) in w.iter().enumerate() {
                                // SAFETY: r < M and b·32 + h·16 + 16 ≤ padded, so the 4
                                // floats at `at + 4q` lie within xp (M·padded long).
                                let x = unsafe { vld1q_f32(xp.as_ptr().add(at + 4 * q)) };
                                let a = (4 * h + q) % A;
                                acc[a] = vfmaq_f32(acc[a], wq, x);
                            }
                        }
                    }
                }
                let s = vdupq_n_f32(mat.scales[gi]);
                for (t, acc) in total.iter_mut().zip(acc) {
                    let sum = acc[1..].iter().fold(acc[0], |a, &b| vaddq_f32(a, b));
                    *t = vfmaq_f32(*t, sum, s);
                }
            }
            for (r, t) in results.iter_mut().zip(total) {
                *r = vaddvq_f32(t);
            }
        }
    }
}
