//! The CPU GEMV kernels over rows of a [`CpuMatrix`]: AVX-512 and AVX2 + FMA (x86-64,
//! chosen at run time), NEON (aarch64) and portable scalar code; [`integer_kernel`] names
//! the m = 1 integer dot-product kernels of the families that have one. All take x as
//! [`super::gemv::pack_x`] reorders it for their [`Isa::chunk`] and write, for each row of
//! W in the span, its `m` results together.
//!
//! One driver (`tiles!`) serves every family: it walks up to `TILE_ROWS` rows of W at a
//! time and, for each tile of up to `MAX_TILE_X` x rows, decodes a piece of every row's
//! codes once (to f32 weights with the group's scale and zero point or offset folded in)
//! and multiplies it into every x row of the tile, so each decoded vector meets several x
//! vectors and each x vector several rows. The families differ only in the vector type and
//! in how a piece of codes becomes vectors of weights.

use super::digits::Digits;
use super::matrix::{CpuMatrix, BLOCK};
use std::ops::Range;

/// A kernel family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// Portable Rust, no vector intrinsics.
    Scalar,
    /// x86-64 AVX2 + FMA: at m = 1 integer dot products of the codes and x in 8-bit
    /// digits (`avx2dot`), else (and for x with an infinite or NaN element) f32 kernels.
    Avx2,
    /// x86-64 AVX-512 (foundation instructions only).
    Avx512,
    /// x86-64 AVX-512 with VNNI (and BW, VL): at m = 1 integer dot products of the codes
    /// and x in 8-bit digits (`vnni`), else (and for x with an infinite or NaN
    /// element) the [`Isa::Avx512`] kernels.
    Avx512Vnni,
    /// aarch64 Advanced SIMD.
    Neon,
    /// aarch64 Advanced SIMD with the dot product (ARMv8.2 `SDOT`): at m = 1 integer dot
    /// products of the codes and x in 8-bit digits (`sdot`), else (and for x with an
    /// infinite or NaN element) the [`Isa::Neon`] kernels.
    NeonDot,
}

impl Isa {
    /// The fastest family this CPU runs.
    pub fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        if super::vnni::supported() {
            return Isa::Avx512Vnni;
        }
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx512f") {
            return Isa::Avx512;
        }
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return Isa::Avx2;
        }
        #[cfg(target_arch = "aarch64")]
        if super::sdot::supported() {
            return Isa::NeonDot;
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
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512Vnni => super::vnni::supported(),
            #[cfg(target_arch = "aarch64")]
            Isa::Neon => std::arch::is_aarch64_feature_detected!("neon"),
            #[cfg(target_arch = "aarch64")]
            Isa::NeonDot => super::sdot::supported(),
            _ => false,
        }
    }

    /// Every family this CPU runs, scalar first.
    pub fn available() -> Vec<Isa> {
        [
            Isa::Scalar,
            Isa::Avx2,
            Isa::Avx512,
            Isa::Avx512Vnni,
            Isa::Neon,
            Isa::NeonDot,
        ]
        .into_iter()
        .filter(|isa| isa.supported())
        .collect()
    }

    /// Elements of x per reordered chunk (see [`super::gemv::pack_x`]): the weights one
    /// decode of the family yields (from 8 or 16 code bytes).
    pub fn chunk(self) -> usize {
        match self {
            Isa::Avx512 | Isa::Avx512Vnni => 32,
            _ => 16,
        }
    }

    /// The element of a chunk (of [`Isa::chunk`] elements) at lane `i` of the family's
    /// decoded vectors: byte `j` of the codes holds elements `2j` (low nibble) and `2j + 1`;
    /// the low nibbles of the chunk's bytes come first, then the high ones.
    pub fn chunk_element(self, i: usize) -> usize {
        let half = self.chunk() / 2;
        2 * (i % half) + i / half
    }

    /// Name for `q4vk_context_device_name`.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "AVX2+FMA",
            Isa::Avx512 => "AVX-512",
            Isa::Avx512Vnni => "AVX-512 VNNI",
            Isa::Neon => "NEON",
            Isa::NeonDot => "NEON dotprod",
        }
    }
}

/// Rows `rows` of W times the `m` packed x rows `xp`; `out` gets `m` values per row.
/// `isa` must be one of [`Isa::available`].
pub fn rows(isa: Isa, mat: &CpuMatrix, xp: &[f32], m: usize, rows: Range<usize>, out: &mut [f32]) {
    assert!(rows.end <= mat.shape.n && out.len() == rows.len() * m && m >= 1);
    assert!(xp.len() == m * mat.blocks() * BLOCK && isa.supported());
    assert!(mat.codes.len() == mat.shape.n * mat.row_stride());
    let run = match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 | Isa::Avx512Vnni => avx512::rows,
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => avx2::rows,
        #[cfg(target_arch = "aarch64")]
        Isa::Neon | Isa::NeonDot => neon::rows,
        _ => scalar::rows,
    };
    // SAFETY: the CPU runs the family (`isa.supported()`, asserted), and the sizes the
    // drivers rely on are asserted above.
    unsafe { run(mat, xp, m, rows, out) }
}

/// An m = 1 kernel over x in digits: rows `rows` of W, one result per row in `out`.
pub type IntegerKernel = fn(&CpuMatrix, &Digits, Range<usize>, &mut [f32]);

/// The integer dot-product kernel of `isa` (which must be one of [`Isa::available`]) for
/// m = 1, if the family has one.
pub fn integer_kernel(isa: Isa) -> Option<IntegerKernel> {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512Vnni => Some(super::vnni::rows),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => Some(super::avx2dot::rows),
        #[cfg(target_arch = "aarch64")]
        Isa::NeonDot => Some(super::sdot::rows),
        _ => None,
    }
}

/// Checks the arguments of an [`IntegerKernel`] (panics on a mismatch): the rows lie in
/// W and `out` has one value per row, `xd` is a row of x for W's columns and groups, and
/// W has its scales, zero points and offsets.
pub(crate) fn check_integer_args(mat: &CpuMatrix, xd: &Digits, rows: &Range<usize>, out: &[f32]) {
    assert!(rows.end <= mat.shape.n && out.len() == rows.len());
    assert!(mat.codes.len() == mat.shape.n * mat.row_stride());
    assert!(xd.pieces() == mat.shape.k.div_ceil(super::digits::PIECE));
    assert!(xd.bytes.len() == xd.pieces() * super::digits::PIECE_BYTES);
    let lanes = xd.pieces() * super::digits::LANES;
    assert!(xd.sums.len() == mat.shape.groups() && xd.lane_sums.len() == lanes);
    let groups = mat.shape.n * mat.shape.groups();
    assert!(mat.scales.len() == groups);
    assert!(kind(mat) == SYMMETRIC || mat.zeros.len() == groups);
    assert!(kind(mat) != OFFSETS || mat.offsets.len() == groups);
}

/// A tile of an integer kernel: the results of [`TILE_ROWS`] rows of W (each < n).
pub(crate) type IntegerTile =
    unsafe fn(&CpuMatrix, &Digits, [usize; TILE_ROWS]) -> [f32; TILE_ROWS];

/// Runs the tile for W's kind (`tiles`: symmetric, zero points, offsets) over rows `rows`,
/// one result per row in `out`, after [`check_integer_args`].
///
/// # Safety
/// The CPU has the features the tiles are compiled for, and they rely on no more than the
/// sizes [`check_integer_args`] asserts.
pub(crate) unsafe fn integer_rows(
    mat: &CpuMatrix,
    xd: &Digits,
    rows: Range<usize>,
    out: &mut [f32],
    tiles: [IntegerTile; 3],
) {
    check_integer_args(mat, xd, &rows, out);
    let tile = tiles[kind(mat) as usize];
    // SAFETY: the caller's contract (`by_tiles` picks rows < n).
    by_tiles(rows, out, |picked| unsafe { tile(mat, xd, picked) });
}

/// Runs `tile` over rows `rows` of W, [`TILE_ROWS`] at a time, and writes its results to
/// `out` (one per row). A short tile repeats its last row and drops the copies' results.
pub(crate) fn by_tiles(
    rows: Range<usize>,
    out: &mut [f32],
    mut tile: impl FnMut([usize; TILE_ROWS]) -> [f32; TILE_ROWS],
) {
    for first in rows.clone().step_by(TILE_ROWS) {
        let last = (first + TILE_ROWS).min(rows.end);
        let y = tile(std::array::from_fn(|i| (first + i).min(last - 1)));
        let at = first - rows.start;
        out[at..at + (last - first)].copy_from_slice(&y[..last - first]);
    }
}

/// How a matrix's groups turn codes into weights: `s·(u − 8)`, `s·(u − z)` or
/// `s·(u − z) + o`;
/// a const parameter of the drivers, so that the per-group work has no branch.
pub(crate) const SYMMETRIC: u8 = 0;
/// See [`SYMMETRIC`].
pub(crate) const ZERO_POINTS: u8 = 1;
/// See [`SYMMETRIC`].
pub(crate) const OFFSETS: u8 = 2;

/// The kind ([`SYMMETRIC`], [`ZERO_POINTS`] or [`OFFSETS`]) of `mat`.
pub(crate) fn kind(mat: &CpuMatrix) -> u8 {
    if !mat.offsets.is_empty() {
        OFFSETS
    } else if mat.shape.zero_points {
        ZERO_POINTS
    } else {
        SYMMETRIC
    }
}

/// Most rows of W that one pass decodes together (4, or 2 where registers are few).
pub(crate) const TILE_ROWS: usize = 4;
/// Most x rows one pass over a tile of rows multiplies (more x rows: more passes, each
/// decoding the tile's codes again from L1).
pub(crate) const MAX_TILE_X: usize = 4;

/// The driver of a kernel family, expanded inside its module, which defines `PIECE` (code
/// bytes one decode reads: `2·PIECE` weights in `P = 2·PIECE / LANES` vectors, in the
/// order of [`Isa::chunk_element`]), `Decoder` with `decoder(s, z, o)` (per row and
/// group: weights `s·(u − z) + o`), `decode(codes, &Decoder)` and `reduce` (the sum of a vector's lanes). The
/// macro's arguments: the family's `target_feature` attributes, its vector type and lane
/// count, the expressions of a zero vector, an unaligned load, `a·b + c` and `a + b`, and a
/// cache-line prefetch hint (`fn(*const u8)`, never faulting). x tiles of 1 or 2 rows keep
/// 2 accumulators per (row, x row): more independent FMA chains. While its first x pass
/// decodes a tile's rows, the driver prefetches the same bytes of the next tile's rows:
/// rows of a few KiB are too short for the hardware prefetcher (the integer kernels
/// measured 2 × from this on DRAM-resident matrices).
macro_rules! tiles {
    (
        $(#[$attr:meta])*;
        $v:ty, $lanes:expr, rows $rows:expr;
        zero $zero:expr, load $load:expr, fma $fma:expr, add $add:expr, prefetch $prefetch:expr
    ) => {
        type V = $v;
        const LANES: usize = $lanes;
        /// Rows of W one pass decodes together (a divisor of [`super::TILE_ROWS`]).
        const R: usize = $rows;

        $(#[$attr])*
        #[inline]
        fn zero() -> V {
            $zero
        }

        /// # Safety
        /// The family's CPU features; `x` readable for `LANES` floats.
        $(#[$attr])*
        #[inline]
        unsafe fn load(x: *const f32) -> V {
            // SAFETY: contract.
            unsafe { $load(x) }
        }

        $(#[$attr])*
        #[inline]
        fn fma(a: V, b: V, c: V) -> V {
            $fma(a, b, c)
        }

        $(#[$attr])*
        #[inline]
        fn add(a: V, b: V) -> V {
            $add(a, b)
        }

        const P: usize = 2 * PIECE / LANES;

        /// Rows `first..last` (at most `R`; a shorter tile repeats its last row and
        /// drops the copies' results) times x rows `t0..t0 + T`; `out` holds `m` results
        /// per row from `first`.
        ///
        /// # Safety
        /// The family's CPU features; `last ≤ n`; `xp` holds `m·padded` floats, `t0 + T ≤
        /// m`; `mat.codes` holds `n` rows of `row_stride` bytes.
        $(#[$attr])*
        #[inline]
        #[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
        unsafe fn tile<const T: usize, const A: usize, const KIND: u8>(
            mat: &CpuMatrix,
            xp: &[f32],
            padded: usize,
            (first, last): (usize, usize),
            t0: usize,
            m: usize,
            out: &mut [f32],
        ) {
            let (stride, groups) = (mat.row_stride(), mat.shape.groups());
            let pieces = stride / PIECE;
            let group_pieces = mat.group_blocks() * BLOCK / 2 / PIECE;
            let mut rows = [0usize; R];
            let mut codes = [mat.codes.as_ptr(); R];
            for i in 0..R {
                rows[i] = (first + i).min(last - 1);
                // SAFETY: rows[i] < n, so its row of codes is in `mat.codes`.
                codes[i] = unsafe { codes[i].add(rows[i] * stride) };
            }
            let x = xp.as_ptr();
            let mut acc = [[[zero(); A]; T]; R];
            for g in 0..groups {
                let mut dec = [decoder(0.0, 0.0, 0.0); R];
                for i in 0..R {
                    let gi = rows[i] * groups + g;
                    let s = mat.scales[gi];
                    dec[i] = match KIND {
                        super::SYMMETRIC => decoder(s, 8.0, 0.0),
                        super::ZERO_POINTS => decoder(s, mat.zeros[gi] as f32, 0.0),
                        _ => decoder(s, mat.zeros[gi] as f32, mat.offsets[gi]),
                    };
                }
                for piece in g * group_pieces..((g + 1) * group_pieces).min(pieces) {
                    if t0 == 0 && (piece * PIECE) % 64 == 0 {
                        for i in 0..R {
                            // The next tile's rows (a hint: past the matrix's end it does
                            // nothing).
                            $prefetch(codes[i].wrapping_add(R * stride + piece * PIECE));
                        }
                    }
                    let mut w = [[zero(); P]; R];
                    for i in 0..R {
                        // SAFETY: piece < pieces, so the PIECE bytes lie in row rows[i].
                        w[i] = unsafe { decode(codes[i].add(piece * PIECE), &dec[i]) };
                    }
                    for t in 0..T {
                        let at = (t0 + t) * padded + piece * 2 * PIECE;
                        for p in 0..P {
                            // SAFETY: t0 + t < m and piece·2·PIECE + P·LANES ≤ padded,
                            // so the LANES floats lie in xp (m·padded long).
                            let xv = unsafe { load(x.add(at + p * LANES)) };
                            for i in 0..R {
                                acc[i][t][p % A] = fma(w[i][p], xv, acc[i][t][p % A]);
                            }
                        }
                    }
                }
            }
            for i in 0..R.min(last - first) {
                for t in 0..T {
                    let sum = acc[i][t][1..].iter().fold(acc[i][t][0], |s, &v| add(s, v));
                    out[i * m + t0 + t] = reduce(sum);
                }
            }
        }

        /// The family's kernel over rows `rows` (see [`super::rows`]).
        ///
        /// # Safety
        /// The family's CPU features, and the sizes [`super::rows`] asserts.
        $(#[$attr])*
        pub unsafe fn rows(
            mat: &CpuMatrix,
            xp: &[f32],
            m: usize,
            rows: Range<usize>,
            out: &mut [f32],
        ) {
            type Pass = unsafe fn(&CpuMatrix, &[f32], usize, (usize, usize), usize, usize, &mut [f32]);
            /// The pass for x tiles of `t` rows.
            fn pick<const KIND: u8>(t: usize) -> Pass {
                match t {
                    1 => tile::<1, 2, KIND>,
                    2 => tile::<2, 2, KIND>,
                    3 => tile::<3, 1, KIND>,
                    4 => tile::<4, 1, KIND>,
                    _ => unreachable!("x tiles have 1..=MAX_TILE_X rows"),
                }
            }
            let pick = match super::kind(mat) {
                super::SYMMETRIC => pick::<{ super::SYMMETRIC }>,
                super::ZERO_POINTS => pick::<{ super::ZERO_POINTS }>,
                _ => pick::<{ super::OFFSETS }>,
            };
            let padded = mat.blocks() * BLOCK;
            for first in rows.clone().step_by(R) {
                let last = (first + R).min(rows.end);
                let out = &mut out[(first - rows.start) * m..];
                let mut t0 = 0;
                while t0 < m {
                    let t = (m - t0).min(super::MAX_TILE_X);
                    // SAFETY: as this function's (t0 + t ≤ m).
                    unsafe { pick(t)(mat, xp, padded, (first, last), t0, m, out) }
                    t0 += t;
                }
            }
        }
    };
}

/// Hint to load the cache line at `p` into L1 (x86-64 `PREFETCHT0`, baseline SSE).
#[cfg(target_arch = "x86_64")]
#[inline]
fn prefetch_x86(p: *const u8) {
    // SAFETY: SSE is in every x86-64 CPU; a prefetch is a hint that never faults.
    unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast()) }
}

mod scalar {
    //! Portable code: a "vector" is 8 f32 in an array (the compiler vectorizes the lane
    //! loops for the target's baseline SIMD, e.g. SSE2); 8 code bytes give 8 low nibbles,
    //! which meet x's 8 even elements of a 16-element chunk, and 8 high ones, its odd ones.
    use super::{CpuMatrix, Range, BLOCK};

    const PIECE: usize = 8;
    /// `(s, b)`: weights `s·u + b`.
    type Decoder = (f32, f32);

    fn decoder(s: f32, z: f32, o: f32) -> Decoder {
        (s, o - z * s)
    }

    /// # Safety
    /// `codes` readable for `PIECE` bytes.
    #[inline]
    unsafe fn decode(codes: *const u8, &(s, b): &Decoder) -> [V; P] {
        // SAFETY: PIECE readable bytes (contract).
        let bytes = unsafe { std::ptr::read(codes.cast::<[u8; PIECE]>()) };
        [
            bytes.map(|u| (u & 15) as f32 * s + b),
            bytes.map(|u| (u >> 4) as f32 * s + b),
        ]
    }

    fn reduce(v: V) -> f32 {
        v.iter().sum()
    }

    /// `a·b + c` lane by lane, rounded twice (a fused multiply-add without the instruction
    /// is a slow library call).
    #[inline]
    fn mul_add(a: V, b: V, c: V) -> V {
        std::array::from_fn(|i| a[i] * b[i] + c[i])
    }

    /// `a + b` lane by lane.
    #[inline]
    fn sum(a: V, b: V) -> V {
        std::array::from_fn(|i| a[i] + b[i])
    }

    /// # Safety
    /// `x` readable for 8 floats.
    #[inline]
    unsafe fn read(x: *const f32) -> V {
        // SAFETY: contract ([f32; 8] has the alignment of f32).
        unsafe { std::ptr::read(x.cast()) }
    }

    /// No prefetch in portable code.
    #[inline]
    fn no_prefetch(_: *const u8) {}

    tiles!(; [f32; 8], 8, rows 4; zero [0.0; 8], load read, fma mul_add, add sum, prefetch no_prefetch);
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    //! AVX2 + FMA: 8 code bytes widen to 8 lanes; the low nibbles meet x's 8 even elements
    //! of a 16-element chunk, the high nibbles its 8 odd ones.
    use super::{CpuMatrix, Range, BLOCK};
    use std::arch::x86_64::*;

    const PIECE: usize = 8;
    /// `(s, b)` in every lane: weights `s·u + b`.
    type Decoder = (__m256, __m256);

    #[target_feature(enable = "avx2,fma")]
    #[inline]
    fn decoder(s: f32, z: f32, o: f32) -> Decoder {
        (_mm256_set1_ps(s), _mm256_set1_ps(o - z * s))
    }

    /// # Safety
    /// AVX2 and FMA; `codes` readable for `PIECE` bytes.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn decode(codes: *const u8, &(s, b): &Decoder) -> [V; P] {
        // SAFETY: 8 readable bytes (contract).
        let v = _mm256_cvtepu8_epi32(unsafe { _mm_loadl_epi64(codes.cast()) });
        let lo = _mm256_cvtepi32_ps(_mm256_and_si256(v, _mm256_set1_epi32(15)));
        let hi = _mm256_cvtepi32_ps(_mm256_srli_epi32::<4>(v));
        [_mm256_fmadd_ps(lo, s, b), _mm256_fmadd_ps(hi, s, b)]
    }

    #[target_feature(enable = "avx2,fma")]
    #[inline]
    fn reduce(v: V) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_movehdup_ps(s));
        _mm_cvtss_f32(s)
    }

    tiles!(
        #[target_feature(enable = "avx2,fma")];
        __m256, 8, rows 2;
        zero _mm256_setzero_ps(), load _mm256_loadu_ps, fma _mm256_fmadd_ps, add _mm256_add_ps,
        prefetch super::prefetch_x86
    );
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    //! AVX-512F: a block's 16 code bytes widen to 16 lanes; the weights are looked up in a
    //! 16-entry table per row and group (see `Decoder`) by the low nibble (the
    //! lookup reads an index's 4 low bits), which meets x's 16 even elements of the block,
    //! and by the high nibble, its 16 odd ones.
    use super::{CpuMatrix, Range, BLOCK};
    use std::arch::x86_64::*;

    const PIECE: usize = 16;
    /// The 16 weights `s·(u − z) + o` (u = 0..15), rounded once: the lookup table.
    type Decoder = __m512;

    #[target_feature(enable = "avx512f")]
    #[inline]
    fn decoder(s: f32, z: f32, o: f32) -> Decoder {
        let iota = _mm512_setr_ps(
            0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0,
        );
        let u_minus_z = _mm512_sub_ps(iota, _mm512_set1_ps(z));
        _mm512_fmadd_ps(u_minus_z, _mm512_set1_ps(s), _mm512_set1_ps(o))
    }

    /// # Safety
    /// AVX-512F; `codes` readable for `PIECE` bytes.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn decode(codes: *const u8, table: &Decoder) -> [V; P] {
        // SAFETY: 16 readable bytes (contract).
        let v = _mm512_cvtepu8_epi32(unsafe { _mm_loadu_si128(codes.cast()) });
        [
            _mm512_permutexvar_ps(v, *table),
            _mm512_permutexvar_ps(_mm512_srli_epi32::<4>(v), *table),
        ]
    }

    #[target_feature(enable = "avx512f")]
    #[inline]
    fn reduce(v: V) -> f32 {
        _mm512_reduce_add_ps(v)
    }

    tiles!(
        #[target_feature(enable = "avx512f")];
        __m512, 16, rows 4;
        zero _mm512_setzero_ps(), load _mm512_loadu_ps, fma _mm512_fmadd_ps, add _mm512_add_ps,
        prefetch super::prefetch_x86
    );
}

#[cfg(target_arch = "aarch64")]
mod neon {
    //! Advanced SIMD: 8 code bytes give 8 low and 8 high nibbles, widened to four vectors
    //! of 4 f32 that meet x's 8 even and 8 odd elements of a 16-element chunk.
    use super::{CpuMatrix, Range, BLOCK};
    use std::arch::aarch64::*;

    const PIECE: usize = 8;
    /// `(s, b)` in every lane: weights `s·u + b`.
    type Decoder = (float32x4_t, float32x4_t);

    #[target_feature(enable = "neon")]
    #[inline]
    fn decoder(s: f32, z: f32, o: f32) -> Decoder {
        (vdupq_n_f32(s), vdupq_n_f32(o - z * s))
    }

    /// # Safety
    /// NEON; `codes` readable for `PIECE` bytes.
    #[target_feature(enable = "neon")]
    #[inline]
    unsafe fn decode(codes: *const u8, &(s, b): &Decoder) -> [V; P] {
        // SAFETY: 8 readable bytes (contract).
        let bytes = unsafe { vld1_u8(codes) };
        let lo = vmovl_u8(vand_u8(bytes, vdup_n_u8(15)));
        let hi = vmovl_u8(vshr_n_u8::<4>(bytes));
        let w = |u: uint32x4_t| vfmaq_f32(b, vcvtq_f32_u32(u), s);
        [
            w(vmovl_u16(vget_low_u16(lo))),
            w(vmovl_high_u16(lo)),
            w(vmovl_u16(vget_low_u16(hi))),
            w(vmovl_high_u16(hi)),
        ]
    }

    #[target_feature(enable = "neon")]
    #[inline]
    fn reduce(v: V) -> f32 {
        vaddvq_f32(v)
    }

    /// Hint to load the cache line at `p` into L1 (`PRFM PLDL1KEEP`).
    #[inline]
    fn prefetch(p: *const u8) {
        // SAFETY: a prefetch is a hint: it accesses no memory architecturally and never
        // faults, whatever the address.
        unsafe {
            std::arch::asm!("prfm pldl1keep, [{0}]", in(reg) p, options(nostack, preserves_flags, readonly));
        }
    }

    /// `a·b + c`, in the argument order of the x86 FMA intrinsics.
    #[target_feature(enable = "neon")]
    #[inline]
    fn fused(a: float32x4_t, b: float32x4_t, c: float32x4_t) -> float32x4_t {
        vfmaq_f32(c, a, b)
    }

    tiles!(
        #[target_feature(enable = "neon")];
        float32x4_t, 4, rows 4;
        zero vdupq_n_f32(0.0), load vld1q_f32, fma fused, add vaddq_f32, prefetch prefetch
    );
}
