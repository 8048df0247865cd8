//! The GEMV on GGUF blocks of every type (CPU contexts) as integer dot products, a row of
//! x at a time (a few rows: [`max_rows_of_x`]): x
//! in three signed 8-bit digits per column, in column order, with one scale per 32
//! columns ([`ColumnDigits`]: the scheme of [`super::digits`]), or rounded to one byte per
//! column (`Q4VK_GEMV_ROUND_X_TO_INT8`). The kernels (`super::blocks_avx2` on x86-64 with
//! AVX2, `super::blocks_sdot` on aarch64 with the dot product) take a tile of 4 rows, a
//! step of 256 columns at a time: its weight scales and constants per run of 32 columns
//! (per 16 for Q6_K and NVFP4; `super::block_steps`), its codes decoded in registers a
//! run at a time. They sum codes times digits in 32-bit lanes exactly (the bounds are in
//! their docs) and add each lane times its weights' scale and x's scale `t` in f32 lanes.
//! The constants (offsets, minima, code biases) times the sum of x over their columns
//! (f64) are added in f64 — the values of gguf-py's `dequantize`, x to within its digits'
//! rounding (`2^-24` of its 32 columns' largest element) or its bytes'.

use super::block_steps::{has_constants, per_half, step_bytes, Step, HALF};
use super::blocks::CpuBlocks;
use super::digits::{block_scale, measure_portable, pow2, row_exponent, split_one};
use super::kernels::{by_tiles, TILE_ROWS};
use crate::alloc;
use crate::error::Result;
use crate::import::gguf_blocks::BlockType;
use std::ops::Range;

#[cfg(target_arch = "x86_64")]
use super::blocks_avx2 as kernel;
#[cfg(target_arch = "aarch64")]
use super::blocks_sdot as kernel;

/// Columns per x scale.
pub(super) const SUB_BLOCK: usize = 32;

/// The results of a tile of rows (each `xd.k / block` blocks of its type) times x: a
/// kernel's build for one block type and form of x.
pub(super) type Tile = unsafe fn([&[u8]; TILE_ROWS], &ColumnDigits) -> [f32; TILE_ROWS];

/// The builds of a kernel's `tile_of::<T, ONE>` for every block type (`T`, the index in
/// `BlockType::ALL`) and form of x (`ONE`: one byte per column), as [`pick`] takes them.
macro_rules! tile_builds {
    ($tile_of:ident) => {
        [
            [$tile_of::<0, false>, $tile_of::<0, true>],
            [$tile_of::<1, false>, $tile_of::<1, true>],
            [$tile_of::<2, false>, $tile_of::<2, true>],
            [$tile_of::<3, false>, $tile_of::<3, true>],
            [$tile_of::<4, false>, $tile_of::<4, true>],
            [$tile_of::<5, false>, $tile_of::<5, true>],
            [$tile_of::<6, false>, $tile_of::<6, true>],
            [$tile_of::<7, false>, $tile_of::<7, true>],
            [$tile_of::<8, false>, $tile_of::<8, true>],
            [$tile_of::<9, false>, $tile_of::<9, true>],
            [$tile_of::<10, false>, $tile_of::<10, true>],
        ]
    };
}
pub(super) use tile_builds;

/// The build of `builds` (from `tile_builds!`) for `ty` on x in three digits, or in one
/// byte (`one_digit`).
pub(super) fn pick(
    builds: [[Tile; 2]; BlockType::ALL.len()],
    ty: BlockType,
    one_digit: bool,
) -> Tile {
    let index = BlockType::ALL.iter().position(|&t| t == ty);
    builds[index.expect("a block type of the list")][usize::from(one_digit)]
}

/// Loads step `s` (`columns` columns from column `first`) of each row of a tile of `ty`
/// into `steps`, and adds each row's constants times x's sums into `constants`.
#[inline(always)]
pub(super) fn load_steps(
    (steps, constants): (&mut [Step; TILE_ROWS], &mut [f64; TILE_ROWS]),
    (ty, rows): (BlockType, &[&[u8]; TILE_ROWS]),
    xd: &ColumnDigits,
    (s, first, columns): (usize, usize, usize),
) {
    let bytes = step_bytes(ty);
    for r in 0..TILE_ROWS {
        steps[r].fill(ty, &rows[r][s * bytes..], columns);
        if has_constants(ty) {
            constants[r] += constants_of(ty, &steps[r], xd, first, columns);
        }
    }
}

/// Whether this CPU runs the kernels (x86-64: AVX2 and FMA; aarch64: the dot product).
pub fn supported() -> bool {
    kernel::supported()
}

/// Rows of x up to which a GEMV on blocks of `ty` runs as integer dot products, on x in
/// digits or (`x_to_bytes`) in bytes: a row of x at a time over each chunk of W's rows
/// while it is in the cache, where the f32 decode decodes each block once for every row
/// of x. Bytes cost a third of the digits' products, and the K-quants' decode (IQ4_XS's
/// and MXFP4's on bytes) more than the other types' in the f32 decode: they keep the
/// integer path to twice the rows (the crossings measured on x86-64: bench/RESULTS.md
/// section 6).
pub fn max_rows_of_x(ty: BlockType, x_to_bytes: bool) -> usize {
    let decode_heavy = match x_to_bytes {
        true => matches!(
            ty,
            BlockType::Q4K | BlockType::Q5K | BlockType::Q6K | BlockType::Iq4Xs | BlockType::Mxfp4
        ),
        false => matches!(ty, BlockType::Q4K | BlockType::Q5K | BlockType::Q6K),
    };
    let rows = if x_to_bytes { 4 } else { 2 };
    if decode_heavy {
        2 * rows
    } else {
        rows
    }
}

/// Whether the kernels run a GEMV of `m` rows on `blocks` (x in bytes: `x_to_bytes`): up
/// to [`max_rows_of_x`] rows of x, on blocks whose scales keep the kernels' f32 lanes in
/// range ([`CpuBlocks::integer_scales`]).
pub fn runs(blocks: &CpuBlocks, m: usize, x_to_bytes: bool) -> bool {
    let most = max_rows_of_x(blocks.ty, x_to_bytes);
    (1..=most).contains(&m) && blocks.integer_scales && supported()
}

/// One row of x in digits, column by column: three per column (exact to `2^-24` of each
/// 32 columns' largest element), or one (x rounded to bytes,
/// `Q4VK_GEMV_ROUND_X_TO_INT8`).
pub struct ColumnDigits {
    /// `[planes][k]`: digit `D0` of every column, then `D1`, then `D2`; or the one byte
    /// `q` of every column.
    pub(super) planes: Vec<i8>,
    /// Digits per column: 3, or 1 for x rounded to bytes.
    pub(super) digits: usize,
    /// `[k / 32]` the scale `t` of each 32 columns (0 where they are all zero).
    pub(super) scales: Vec<f32>,
    /// `[k / 16]` the sum of each 16 columns of x, in f64.
    pub(super) half_sums: Vec<f64>,
    /// `[k / 32]` the sum of each 32 columns of x, in f64.
    pub(super) run_sums: Vec<f64>,
    /// `E`: the digits stand for `x·2^-E` (0 for bytes).
    pub(super) exponent: i32,
    /// Columns.
    pub(super) k: usize,
}

impl ColumnDigits {
    /// The digits of `x` (`k` columns, a multiple of 32): `None` where x has an infinite or
    /// NaN element (the f32 kernel keeps its policy for those). Allocation failures are
    /// `OutOfHostMemory`.
    pub fn new(x: &[f32], k: usize) -> Result<Option<ColumnDigits>> {
        let Some((x, maxima, half_sums)) = measured(x, k)? else {
            return Ok(None);
        };
        let count = k / SUB_BLOCK;
        let exponent = row_exponent(maxima.iter().fold(0f32, |m, &v| m.max(v)));
        let mut planes = alloc::filled::<i8>(3 * k, "the activations' digits")?;
        let mut scales = alloc::filled::<f32>(count, "the activations' scales")?;
        let unit = pow2(-exponent);
        for (b, (block, &max)) in x.chunks_exact(SUB_BLOCK).zip(&maxima).enumerate() {
            if max == 0.0 {
                continue;
            }
            let t = block_scale(max, unit);
            let scale = unit / f64::from(t);
            for (c, &v) in block.iter().enumerate() {
                // Rounded to nearest, ties to even, in f64 (as `super::digits`).
                let q = (f64::from(v) * scale).round_ties_even() as i32;
                for (d, digit) in split_one(q).into_iter().enumerate() {
                    planes[d * k + b * SUB_BLOCK + c] = digit as i8;
                }
            }
            scales[b] = t;
        }
        Ok(Some(ColumnDigits {
            planes,
            digits: 3,
            scales,
            run_sums: run_sums(&half_sums)?,
            half_sums,
            exponent,
            k,
        }))
    }

    /// `x` rounded to one signed byte per column (`Q4VK_GEMV_ROUND_X_TO_INT8`): per 32
    /// columns the scale `d = a / 127` (`a` their largest magnitude, f32) and `q =
    /// round(127·x / a)` (in f64, to nearest, ties to even; `|q| ≤ 127`), so each element
    /// is within `d / 2` of x (and of the f32 `d` times q up to its rounding). The sums per
    /// 16 columns are those of the rounded x (`d·Σq`), so that the whole result is the
    /// product of x rounded, constants (offsets, minima) included. `None` and errors as
    /// [`ColumnDigits::new`].
    pub fn bytes(x: &[f32], k: usize) -> Result<Option<ColumnDigits>> {
        let Some((x, maxima, mut half_sums)) = measured(x, k)? else {
            return Ok(None);
        };
        let mut planes = alloc::filled::<i8>(k, "the activations' bytes")?;
        let mut scales = alloc::filled::<f32>(k / SUB_BLOCK, "the activations' scales")?;
        let runs = x
            .chunks_exact(SUB_BLOCK)
            .zip(planes.chunks_exact_mut(SUB_BLOCK));
        for ((run, bytes), (&a, d)) in runs.zip(maxima.iter().zip(&mut scales)) {
            if a == 0.0 {
                continue;
            }
            let factor = 127.0 / f64::from(a);
            for (q, &v) in bytes.iter_mut().zip(run) {
                *q = (f64::from(v) * factor).round_ties_even() as i8;
            }
            *d = a / 127.0;
        }
        for ((sum, bytes), &d) in half_sums
            .iter_mut()
            .zip(planes.chunks_exact(HALF))
            .zip(scales.iter().flat_map(|d| [d, d]))
        {
            *sum = f64::from(d) * f64::from(bytes.iter().map(|&q| i32::from(q)).sum::<i32>());
        }
        Ok(Some(ColumnDigits {
            planes,
            digits: 1,
            scales,
            run_sums: run_sums(&half_sums)?,
            half_sums,
            exponent: 0,
            k,
        }))
    }
}

/// The columns of x (`k`, a multiple of 32, asserted), the largest magnitude of each 32
/// and the f64 sum of each 16; `None` where an element is infinite or NaN.
type Measured<'a> = Option<(&'a [f32], Vec<f32>, Vec<f64>)>;

/// The sums of each 32 columns from those of each 16.
fn run_sums(half_sums: &[f64]) -> Result<Vec<f64>> {
    let pairs = half_sums.chunks_exact(2).map(|pair| pair[0] + pair[1]);
    alloc::collect(pairs, "the activations' sums per 32")
}

/// See [`Measured`].
fn measured(x: &[f32], k: usize) -> Result<Measured<'_>> {
    assert!(k.is_multiple_of(SUB_BLOCK) && x.len() >= k);
    let x = &x[..k];
    let count = k / SUB_BLOCK;
    let mut sums = alloc::filled::<f64>(count, "the activations' block sums")?;
    let mut maxima = alloc::filled::<f32>(count, "the activations' block maxima")?;
    if !measure_portable(x, &mut sums, &mut maxima) {
        return Ok(None);
    }
    let half_sums = alloc::collect(
        x.chunks_exact(HALF)
            .map(|run| run.iter().map(|&v| f64::from(v)).sum()),
        "the activations' sums per 16",
    )?;
    Ok(Some((x, maxima, half_sums)))
}

/// Rows `rows` of `blocks` (rows of `xd.k` columns) times x in digits; `out` gets one
/// value per row. The CPU must run the kernels on them ([`runs`], asserted).
pub fn rows(blocks: &CpuBlocks, xd: &ColumnDigits, rows: Range<usize>, out: &mut [f32]) {
    assert!(runs(blocks, 1, xd.digits == 1));
    let ty = blocks.ty;
    let row_bytes = xd.k / ty.block_elements() * ty.block_bytes();
    assert!(xd.k.is_multiple_of(ty.block_elements()));
    assert!(rows.end * row_bytes <= blocks.bytes.len() && out.len() >= rows.len());
    let tile = kernel::tile(ty, xd.digits == 1);
    by_tiles(rows, out, |picked| {
        let rows = picked.map(|row| &blocks.bytes[row * row_bytes..][..row_bytes]);
        // SAFETY: the CPU runs the kernels (asserted); each row holds k / block blocks of
        // the type the kernel was built for, and the digits k columns.
        unsafe { tile(rows, xd) }
    });
}

/// The constants of `step` (of `ty`; its first `columns` columns, from column `first` of
/// the row) times the sums of x over their 16 or 32 columns.
#[inline]
pub(super) fn constants_of(
    ty: BlockType,
    step: &Step,
    xd: &ColumnDigits,
    first: usize,
    columns: usize,
) -> f64 {
    let (sums, count) = match per_half(ty) {
        true => (&xd.half_sums[first / HALF..], columns / HALF),
        false => (&xd.run_sums[first / SUB_BLOCK..], columns / SUB_BLOCK),
    };
    let (constants, sums) = (&step.constants[..count], &sums[..count]);
    let mut lanes = [0f64; 2];
    for (c, s) in constants.chunks_exact(2).zip(sums.chunks_exact(2)) {
        lanes[0] += f64::from(c[0]) * s[0];
        lanes[1] += f64::from(c[1]) * s[1];
    }
    if count % 2 == 1 {
        lanes[0] += f64::from(constants[count - 1]) * sums[count - 1];
    }
    lanes[0] + lanes[1]
}

/// A row's result: its products `products` (units of `2^E`) and its constants' sum
/// `constants` (plain units).
pub(super) fn finish(products: f64, xd: &ColumnDigits, constants: f64) -> f32 {
    (products * pow2(xd.exponent) + constants) as f32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::reference::gemv_dense;

    /// Pseudo-random blocks of `ty` for an `n` × `k` matrix: random codes and scale bytes,
    /// small f16 scales of either sign, MXFP4 exponents around 2^0, NVFP4 scales without
    /// the NaN.
    fn tensor(ty: BlockType, n: usize, k: usize, seed: u64) -> Vec<u8> {
        let mut state = seed;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let size = ty.block_bytes();
        let mut bytes: Vec<u8> = (0..n * k / ty.block_elements() * size)
            .map(|_| next() as u8)
            .collect();
        for block in bytes.chunks_exact_mut(size) {
            for &(at, _) in ty.f16_scale_fields() {
                let sign = if next() % 4 == 0 { -1.0 } else { 1.0 };
                let v = half::f16::from_f32(sign * (0.001 + (next() % 1000) as f32 * 1e-5));
                block[at..at + 2].copy_from_slice(&v.to_le_bytes());
            }
            match ty {
                BlockType::Mxfp4 => block[0] = 112 + (next() % 32) as u8,
                BlockType::Nvfp4 => block[..4].iter_mut().for_each(|s| *s &= 0x7E),
                _ => {}
            }
        }
        bytes
    }

    /// The weights of `bytes` (`n` × `k` of `ty`), as the decode gives them.
    fn decoded(ty: BlockType, bytes: &[u8], n: usize, k: usize) -> Vec<f32> {
        let mut w = vec![0f32; n * k];
        let (size, elems) = (ty.block_bytes(), ty.block_elements());
        for (block, w) in bytes.chunks_exact(size).zip(w.chunks_exact_mut(elems)) {
            ty.decode(block, w);
        }
        w
    }

    /// Columns of the tests' matrices of `ty`: 1024, or 1088 (a last step of 64 columns)
    /// where its block is smaller than 256.
    fn columns(ty: BlockType) -> usize {
        if ty.block_elements() == 256 {
            1024
        } else {
            1088
        }
    }

    /// x over six orders of magnitude, 32 columns of zeros and one subnormal element.
    fn activations(k: usize) -> Vec<f32> {
        let mut state = 0x1234_5678u64;
        let mut x: Vec<f32> = (0..k)
            .map(|i| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                let u = (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
                u * 10f32.powi((i * 6 / k) as i32 - 3)
            })
            .collect();
        x[64..96].fill(0.0);
        x[7] = 1e-40;
        x
    }

    /// Every type, on 37 rows (a tile's tail) of 1024 columns, or 1088 (a last step of 64
    /// columns) where its block is smaller than 256: within 1e-6 of the f64 reference of
    /// the decoded weights, every row written.
    #[test]
    fn the_integer_gemv_on_every_block_type_matches_the_f64_reference() {
        let n = 37;
        if !supported() {
            // A CPU without the kernels keeps the f32 decode on every type.
            let q4k = CpuBlocks::new(BlockType::Q4K, &tensor(BlockType::Q4K, 1, 256, 1)).unwrap();
            assert!(!runs(&q4k, 1, false));
            return;
        }
        for ty in BlockType::ALL {
            let k = columns(ty);
            let x = activations(k);
            let xd = ColumnDigits::new(&x, k).unwrap().unwrap();
            let bytes = tensor(ty, n, k, 0x5EED);
            let blocks = CpuBlocks::new(ty, &bytes).unwrap();
            assert!(runs(&blocks, 1, false) && !runs(&blocks, max_rows_of_x(ty, false) + 1, false));
            let w = decoded(ty, &bytes, n, k);
            let want = gemv_dense(&w, &x, n, k, 1);
            let mut y = vec![f32::NAN; n];
            rows(&blocks, &xd, 0..n, &mut y);
            let norm = want.iter().map(|v| v * v).sum::<f64>().sqrt();
            let err = y
                .iter()
                .zip(&want)
                .map(|(&a, &b)| (f64::from(a) - b).powi(2))
                .sum::<f64>()
                .sqrt();
            assert!(
                y.iter().all(|v| v.is_finite()),
                "{}: every row written",
                ty.name()
            );
            assert!(
                err / norm < 1e-6,
                "{}: relative error {}",
                ty.name(),
                err / norm
            );
            // A span of rows from the middle writes exactly its rows.
            let mut part = vec![f32::NAN; 6];
            rows(&blocks, &xd, 9..14, &mut part);
            assert_eq!(part[..5], y[9..14], "{}", ty.name());
            assert!(part[5].is_nan());
        }
    }

    /// x rounded to bytes: every type within 1e-6 of the f64 product of the decoded weights
    /// and x as its bytes stand for it (`d·q`, d the f32 scale), and within the rounding's
    /// bound of the exact product.
    #[test]
    fn the_integer_gemv_on_x_in_bytes_is_the_product_of_x_rounded() {
        if !supported() {
            return;
        }
        let n = 37;
        for ty in BlockType::ALL {
            let k = columns(ty);
            let x = activations(k);
            let xb = ColumnDigits::bytes(&x, k).unwrap().unwrap();
            assert_eq!((xb.digits, xb.exponent, xb.planes.len()), (1, 0, k));
            // The rounded x, and the rounding's bound per element (d / 2).
            let rounded: Vec<f32> = (0..k)
                .map(|j| (f64::from(xb.scales[j / SUB_BLOCK]) * f64::from(xb.planes[j])) as f32)
                .collect();
            for (j, (&r, &v)) in rounded.iter().zip(&x).enumerate() {
                let d = f64::from(xb.scales[j / SUB_BLOCK]);
                assert!(
                    (f64::from(r) - f64::from(v)).abs() <= 0.5 * d * (1.0 + 1e-6),
                    "column {j}"
                );
            }
            let bytes = tensor(ty, n, k, 0xB17E);
            let blocks = CpuBlocks::new(ty, &bytes).unwrap();
            let w = decoded(ty, &bytes, n, k);
            let want = gemv_dense(&w, &rounded, n, k, 1);
            let exact = gemv_dense(&w, &x, n, k, 1);
            let mut y = vec![f32::NAN; n];
            rows(&blocks, &xb, 0..n, &mut y);
            let relative = |want: &[f64]| {
                let norm = want.iter().map(|v| v * v).sum::<f64>().sqrt();
                let err = y
                    .iter()
                    .zip(want)
                    .map(|(&a, &b)| (f64::from(a) - b).powi(2));
                err.sum::<f64>().sqrt() / norm
            };
            assert!(relative(&want) < 1e-6, "{}: {}", ty.name(), relative(&want));
            // Against exact x: each output within Σ|w|·d/2.
            for (row, (&got, &ex)) in y.iter().zip(&exact).enumerate() {
                let bound: f64 = (0..k)
                    .map(|j| {
                        f64::from(w[row * k + j]).abs() * 0.5 * f64::from(xb.scales[j / SUB_BLOCK])
                    })
                    .sum();
                assert!(
                    (f64::from(got) - ex).abs() <= bound * 1.001 + 1e-30,
                    "{} row {row}",
                    ty.name()
                );
            }
        }
    }

    #[test]
    fn mxfp4_exponents_far_from_one_keep_the_f32_decode() {
        let mut bytes = tensor(BlockType::Mxfp4, 2, 64, 3);
        assert!(
            CpuBlocks::new(BlockType::Mxfp4, &bytes)
                .unwrap()
                .integer_scales
        );
        for e in [0u8, 63, 193, 0xFE] {
            bytes[17] = e;
            assert!(
                !CpuBlocks::new(BlockType::Mxfp4, &bytes)
                    .unwrap()
                    .integer_scales
            );
        }
    }

    #[test]
    fn an_infinite_element_leaves_x_to_the_f32_kernel() {
        let mut x = activations(256);
        x[3] = f32::INFINITY;
        assert!(ColumnDigits::new(&x, 256).unwrap().is_none());
    }
}
