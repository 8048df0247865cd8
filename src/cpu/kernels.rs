//! The CPU GEMV kernels over rows of a [`CpuMatrix`]: AVX-512 and AVX2 + FMA (x86-64,
//! chosen at run time), NEON (aarch64) and portable scalar code. All take x as
//! [`super::gemv::pack_x`] reorders it for their [`Isa::chunk`] and write, for each row of
//! W in the span, its `M` results together.
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
    /// x86-64 AVX-512 (foundation instructions only).
    Avx512,
    /// aarch64 Advanced SIMD.
    Neon,
}

impl Isa {
    /// The fastest family this CPU runs.
    pub fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx512f") {
            return Isa::Avx512;
        }
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

    /// Whether this CPU runs the family.
    pub fn supported(self) -> bool {
        match self {
            Isa::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => is_x86_feature_detected!("avx512f"),
            #[cfg(target_arch = "aarch64")]
            Isa::Neon => std::arch::is_aarch64_feature_detected!("neon"),
            _ => false,
        }
    }

    /// Every family this CPU runs, scalar first.
    pub fn available() -> Vec<Isa> {
        [Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon]
            .into_iter()
            .filter(|isa| isa.supported())
            .collect()
    }

    /// Elements of x per reordered chunk (see [`super::gemv::pack_x`]): the nibbles one
    /// vector of widened code bytes holds.
    pub fn chunk(self) -> usize {
        match self {
            Isa::Avx512 => 32,
            _ => 16,
        }
    }

    /// Name for `q4vk_context_device_name`.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "AVX2+FMA",
            Isa::Avx512 => "AVX-512",
            Isa::Neon => "NEON",
        }
    }
}

/// Rows `rows` of W times the `m` packed x rows `xp`; `out` gets `m` values per row.
/// `isa` must be one of [`Isa::available`].
pub fn rows(isa: Isa, mat: &CpuMatrix, xp: &[f32], m: usize, rows: Range<usize>, out: &mut [f32]) {
    assert!(rows.end <= mat.shape.n && out.len() == rows.len() * m);
    assert!(xp.len() == m * mat.blocks() * BLOCK && isa.supported());
    macro_rules! by_m {
        ($f:ident) => {
            match m {
                1 => $f::<1, 2>(mat, xp, rows, out),
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
        Isa::Avx512 => {
            fn run<const M: usize, const A: usize>(
                mat: &CpuMatrix,
                xp: &[f32],
                rows: Range<usize>,
                out: &mut [f32],
            ) {
                // SAFETY: the CPU has AVX-512F (`isa.supported()`, asserted above).
                unsafe { avx512::rows::<M, A>(mat, xp, rows, out) }
            }
            by_m!(run)
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => {
            fn run<const M: usize, const A: usize>(
                mat: &CpuMatrix,
                xp: &[f32],
                rows: Range<usize>,
                out: &mut [f32],
            ) {
                // SAFETY: the CPU has AVX2 and FMA (`isa.supported()`, asserted above).
                unsafe { avx2::rows::<M, A>(mat, xp, rows, out) }
            }
            by_m!(run)
        }
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => {
            fn run<const M: usize, const A: usize>(
                mat: &CpuMatrix,
                xp: &[f32],
                rows: Range<usize>,
                out: &mut [f32],
            ) {
                // SAFETY: the CPU has NEON (`isa.supported()`, asserted above).
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

/// Bytes of packed x one pass over a k-tile keeps hot (in L1 with room for the codes).
const X_TILE_BYTES: usize = 16 << 10;
/// Rows of W that one pass over a k-tile covers.
const TILE_ROWS: usize = 16;

/// Blocks per k-tile for `m` x rows: all of a row when m ≤ 2 (tiles measured slower there:
/// the rows' code streams interleave) or when its x fits [`X_TILE_BYTES`], else a multiple
/// of the group's blocks that fits (or a fit that splits a long group: each piece's sum is
/// then scaled separately).
fn tile_blocks(m: usize, group_blocks: usize, blocks: usize) -> usize {
    let fit = (X_TILE_BYTES / (m * BLOCK * 4)).max(1);
    if m <= 2 || fit >= blocks {
        blocks
    } else if group_blocks <= fit {
        fit / group_blocks * group_blocks
    } else {
        fit
    }
}

/// Drives a kernel family's per-group dot product over rows: each row's groups alternate
/// between two vector totals (so consecutive groups do not wait on one FMA chain), which are
/// reduced to the row's `M` results at its end. When x is too large to stay in L1 (large
/// m·k), K is cut into tiles and [`TILE_ROWS`] rows at a time go through each tile.
macro_rules! rows_by_group {
    (
        $feature:literal,
        $vec:ty,
        $zero:expr,
        $splat:path,
        $decoder:path,
        $fma:path,
        $add:path,
        $reduce:path
    ) => {
        /// Adds the piece `span` of group `g` of row `row` (codes `codes`) to `totals`.
        #[target_feature(enable = $feature)]
        #[inline]
        fn add_group<const M: usize, const A: usize>(
            mat: &CpuMatrix,
            xp: &[f32],
            codes: &[u8],
            gi: usize,
            span: Range<usize>,
            totals: &mut [$vec; M],
        ) {
            let padded = mat.blocks() * BLOCK;
            let sums = group::<M, A>(codes, xp, padded, span, $decoder(mat.zero(gi)));
            let s = $splat(mat.scales[gi]);
            for (t, sum) in totals.iter_mut().zip(sums) {
                *t = $fma(sum, s, *t);
            }
        }

        /// Adds row `row`'s groups (pieces cut by `tile`) to its two totals, alternating.
        #[target_feature(enable = $feature)]
        #[inline]
        fn row_tile<const M: usize, const A: usize>(
            mat: &CpuMatrix,
            xp: &[f32],
            row: usize,
            tile: Range<usize>,
            totals: &mut [[$vec; M]; 2],
        ) {
            let (stride, groups, _, group_blocks, _) = geometry(mat);
            let codes = &mat.codes[row * stride..][..stride];
            let [even, odd] = totals;
            if group_blocks == 1 {
                // One block per group: one accumulator, no sum of partial ones.
                let first = row * groups;
                let mut b = tile.start;
                while b + 1 < tile.end {
                    add_group::<M, 1>(mat, xp, codes, first + b, b..b + 1, even);
                    add_group::<M, 1>(mat, xp, codes, first + b + 1, b + 1..b + 2, odd);
                    b += 2;
                }
                if b < tile.end {
                    add_group::<M, 1>(mat, xp, codes, first + b, b..b + 1, even);
                }
                return;
            }
            let (g0, g1) = (tile.start / group_blocks, tile.end.div_ceil(group_blocks));
            for g in g0..g1 {
                let span =
                    (g * group_blocks).max(tile.start)..((g + 1) * group_blocks).min(tile.end);
                let totals = if (g - g0) % 2 == 0 {
                    &mut *even
                } else {
                    &mut *odd
                };
                add_group::<M, A>(mat, xp, codes, row * groups + g, span, totals);
            }
        }

        /// The kernel over rows `rows`: `M` x rows, `A` accumulators per x row inside a group.
        #[target_feature(enable = $feature)]
        pub fn rows<const M: usize, const A: usize>(
            mat: &CpuMatrix,
            xp: &[f32],
            rows: Range<usize>,
            out: &mut [f32],
        ) {
            let (_, _, blocks, group_blocks, padded) = geometry(mat);
            assert!(xp.len() >= M * padded);
            let tile = super::tile_blocks(M, group_blocks, blocks);
            let reduce = |totals: &[[$vec; M]; 2], results: &mut [f32]| {
                for (r, result) in results.iter_mut().enumerate() {
                    *result = $reduce($add(totals[0][r], totals[1][r]));
                }
            };
            if tile == blocks {
                for (row, results) in rows.zip(out.chunks_exact_mut(M)) {
                    let mut totals = [[$zero; M]; 2];
                    row_tile::<M, A>(mat, xp, row, 0..blocks, &mut totals);
                    reduce(&totals, results);
                }
                return;
            }
            for (first, outs) in rows
                .clone()
                .step_by(super::TILE_ROWS)
                .zip(out.chunks_mut(super::TILE_ROWS * M))
            {
                let last = rows.end.min(first + super::TILE_ROWS);
                let mut totals = [[[$zero; M]; 2]; super::TILE_ROWS];
                for t0 in (0..blocks).step_by(tile) {
                    for (row, totals) in (first..last).zip(totals.iter_mut()) {
                        row_tile::<M, A>(mat, xp, row, t0..blocks.min(t0 + tile), totals);
                    }
                }
                for (totals, results) in totals.iter().zip(outs.chunks_exact_mut(M)) {
                    reduce(totals, results);
                }
            }
        }
    };
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

    /// `sum x·(u − z)` over `blocks` of one row's `codes`, per x row (8 lanes to add up).
    /// Each 8 code bytes are widened to 8 lanes; the low nibbles meet x's 8 even elements
    /// of the 16, the high nibbles its 8 odd ones.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    fn group<const M: usize, const A: usize>(
        codes: &[u8],
        xp: &[f32],
        padded: usize,
        blocks: Range<usize>,
        z: __m256,
    ) -> [__m256; M] {
        assert!(blocks.end * 16 <= codes.len() && blocks.end * BLOCK <= padded);
        assert!(xp.len() >= M * padded);
        let mask = _mm256_set1_epi32(15);
        let mut acc = [[_mm256_setzero_ps(); A]; M];
        for b in blocks {
            for h in 0..2 {
                // SAFETY: b·16 + 16 ≤ codes.len() (asserted), so the 8 bytes at
                // b·16 + h·8 are in `codes`.
                let v = unsafe {
                    _mm256_cvtepu8_epi32(_mm_loadl_epi64(codes.as_ptr().add(b * 16 + h * 8).cast()))
                };
                let lo = _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_and_si256(v, mask)), z);
                let hi = _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32::<4>(v)), z);
                for (r, acc) in acc.iter_mut().enumerate() {
                    let at = r * padded + b * BLOCK + h * 16;
                    // SAFETY: r < M and b·32 + 32 ≤ padded (asserted), so the 16 floats at
                    // `at` lie within xp (at least M·padded long, asserted).
                    let (x0, x1) = unsafe {
                        let p = xp.as_ptr().add(at);
                        (_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)))
                    };
                    acc[0] = _mm256_fmadd_ps(lo, x0, acc[0]);
                    acc[1 % A] = _mm256_fmadd_ps(hi, x1, acc[1 % A]);
                }
            }
        }
        acc.map(|a| a[1..].iter().fold(a[0], |s, &v| _mm256_add_ps(s, v)))
    }

    rows_by_group!(
        "avx2,fma",
        __m256,
        _mm256_setzero_ps(),
        _mm256_set1_ps,
        _mm256_set1_ps,
        _mm256_fmadd_ps,
        _mm256_add_ps,
        hsum
    );
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{geometry, CpuMatrix, Range, BLOCK};
    use std::arch::x86_64::*;

    /// The 16 values `u − z` (u = 0..15) of a group, exact in f32: the kernel's lookup
    /// table.
    #[target_feature(enable = "avx512f")]
    fn decoder(z: f32) -> __m512 {
        let iota = _mm512_setr_ps(
            0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0,
        );
        _mm512_sub_ps(iota, _mm512_set1_ps(z))
    }

    /// `sum x·(u − z)` over `blocks` of one row's `codes`, per x row (16 lanes to add up).
    /// A block's 16 code bytes are widened to 16 lanes; `u − z` is looked up in `table`
    /// ([`decoder`]) by the low nibble (the lookup reads only an index's 4 low bits), which
    /// meets x's 16 even elements of the block, and by the high nibble, its 16 odd ones.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn group<const M: usize, const A: usize>(
        codes: &[u8],
        xp: &[f32],
        padded: usize,
        blocks: Range<usize>,
        table: __m512,
    ) -> [__m512; M] {
        assert!(blocks.end * 16 <= codes.len() && blocks.end * BLOCK <= padded);
        assert!(xp.len() >= M * padded);
        let mut acc = [[_mm512_setzero_ps(); A]; M];
        for b in blocks {
            // SAFETY: b·16 + 16 ≤ codes.len() (asserted), so the 16 bytes at b·16 are in
            // `codes`.
            let v =
                unsafe { _mm512_cvtepu8_epi32(_mm_loadu_si128(codes.as_ptr().add(b * 16).cast())) };
            let lo = _mm512_permutexvar_ps(v, table);
            let hi = _mm512_permutexvar_ps(_mm512_srli_epi32::<4>(v), table);
            for (r, acc) in acc.iter_mut().enumerate() {
                let at = r * padded + b * BLOCK;
                // SAFETY: r < M and b·32 + 32 ≤ padded (asserted), so the 32 floats at `at`
                // lie within xp (at least M·padded long, asserted).
                let (x0, x1) = unsafe {
                    let p = xp.as_ptr().add(at);
                    (_mm512_loadu_ps(p), _mm512_loadu_ps(p.add(16)))
                };
                acc[0] = _mm512_fmadd_ps(lo, x0, acc[0]);
                acc[1 % A] = _mm512_fmadd_ps(hi, x1, acc[1 % A]);
            }
        }
        acc.map(|a| a[1..].iter().fold(a[0], |s, &v| _mm512_add_ps(s, v)))
    }

    rows_by_group!(
        "avx512f",
        __m512,
        _mm512_setzero_ps(),
        _mm512_set1_ps,
        decoder,
        _mm512_fmadd_ps,
        _mm512_add_ps,
        _mm512_reduce_add_ps
    );
}

#[cfg(target_arch = "aarch64")]
mod neon {
    use super::{geometry, CpuMatrix, Range, BLOCK};
    use std::arch::aarch64::*;

    /// `a·b + c`, in the argument order of the x86 FMA intrinsics.
    #[target_feature(enable = "neon")]
    fn fma(a: float32x4_t, b: float32x4_t, c: float32x4_t) -> float32x4_t {
        vfmaq_f32(c, a, b)
    }

    /// `sum x·(u − z)` over `blocks` of one row's `codes`, per x row (4 lanes to add up).
    /// Each 8 code bytes give 8 low and 8 high nibbles, widened to four vectors of 4 f32
    /// that meet x's 8 even and 8 odd elements of the 16.
    #[target_feature(enable = "neon")]
    #[inline]
    fn group<const M: usize, const A: usize>(
        codes: &[u8],
        xp: &[f32],
        padded: usize,
        blocks: Range<usize>,
        z: float32x4_t,
    ) -> [float32x4_t; M] {
        assert!(blocks.end * 16 <= codes.len() && blocks.end * BLOCK <= padded);
        assert!(xp.len() >= M * padded);
        let mask = vdup_n_u8(15);
        let mut acc = [[vdupq_n_f32(0.0); A]; M];
        for b in blocks {
            for h in 0..2 {
                // SAFETY: b·16 + 16 ≤ codes.len() (asserted), so the 8 bytes at
                // b·16 + h·8 are in `codes`.
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
                        // SAFETY: r < M and b·32 + 32 ≤ padded (asserted), so the 4 floats
                        // at `at + 4q` lie within xp (at least M·padded long, asserted).
                        let x = unsafe { vld1q_f32(xp.as_ptr().add(at + 4 * q)) };
                        acc[q % A] = vfmaq_f32(acc[q % A], wq, x);
                    }
                }
            }
        }
        acc.map(|a| a[1..].iter().fold(a[0], |s, &v| vaddq_f32(s, v)))
    }

    rows_by_group!(
        "neon",
        float32x4_t,
        vdupq_n_f32(0.0),
        vdupq_n_f32,
        vdupq_n_f32,
        fma,
        vaddq_f32,
        vaddvq_f32
    );
}
