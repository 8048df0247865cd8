//! The cases tuning times on: rotated copies of a pseudo-random matrix of each shape (SIMT
//! layout or Q4_K blocks), x and y, and the calls per chain.

use crate::error::{Error, Result};
use crate::import::gguf_blocks::BlockType;
use crate::quant::q4::{Q4Data, Q4Shape, ScaleType};
use crate::vk::context::Context;
use crate::vk::gemv_plan::{decide, Choice, Room};
use crate::vk::matrix::{upload, DeviceMatrix, UploadRoute};
use crate::vk::memory::{Buffer, MemoryKind};
use crate::vk::params::{GemvParams, MAX_M};
use crate::vk::rules::Rules;
use std::borrow::Cow;

/// How a case is built: rows of x and y, most copies of the matrix, fewest calls per
/// chain.
#[derive(Debug, Clone, Copy)]
pub(super) struct CaseSize {
    /// Rows of x and y.
    pub(super) rows: u32,
    /// Most copies of the matrix.
    pub(super) copies: usize,
    /// Fewest calls per chain.
    pub(super) calls: usize,
}

/// The GEMVs' cases: up to 8 rows, as many copies as the cold bytes hold (up to 64), chains
/// of at least 16 calls (a decoder step's matrices in a row).
pub(super) const GEMV_CASE: CaseSize = CaseSize {
    rows: MAX_M,
    copies: 64,
    calls: 16,
};
use super::TuneOptions;

/// The SIMT GEMM's cases for up to `rows` tokens: a call reads each weight once for many
/// tokens, so a few copies and short chains suffice (a prefill call is long).
pub(super) fn gemm_case(rows: u32) -> CaseSize {
    CaseSize {
        rows,
        copies: 4,
        calls: 4,
    }
}

/// A timed case: rotated copies of one matrix, x and y, and the calls per submission.
pub(super) struct Case {
    /// Copies of one matrix, each call on the next.
    pub(super) mats: Vec<DeviceMatrix>,
    /// x, for the case's most rows.
    pub(super) x: Buffer,
    /// y, for the case's most rows.
    pub(super) y: Buffer,
    /// Rows of the matrix.
    pub(super) n: u64,
    /// Columns of the matrix.
    pub(super) k: u64,
    /// Calls per timed chain.
    pub(super) calls: usize,
}

/// A xorshift generator from `seed`: the cases' pseudo-random bytes, the same on every run.
fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// Weights per Q4_K block: a tuning shape's k must be whole blocks for its case on blocks.
pub(super) const Q4K_BLOCK: u64 = 256;

/// The case `index` of shape `n` × `k`: a pseudo-random group-128 matrix uploaded in the
/// SIMT layout as many times as `opts.cold_bytes` holds (1 to `size.copies`), and x and y
/// for `size.rows` rows.
pub(super) fn make_case(
    ctx: &Context,
    (n, k): (u64, u64),
    opts: &TuneOptions,
    index: u64,
    size: CaseSize,
) -> Result<Case> {
    let shape = Q4Shape::new(n, k, 128, 0)?;
    let mut next = xorshift(0x9E37_79B9_7F4A_7C15u64 ^ (index << 32) ^ n ^ (k << 16));
    let weight: Vec<u8> = crate::alloc::collect(
        (0..shape.weight_bytes()).map(|_| next() as u8),
        "the tuning matrix",
    )?;
    let scales: Vec<u8> = crate::alloc::collect(
        (0..2 * shape.scale_count())
            .map(|b| half::f16::from_f32(0.01 + (b / 2 % 7) as f32 * 1e-3).to_le_bytes()[b % 2]),
        "the tuning scales",
    )?;
    let data = Q4Data {
        shape,
        weight: Cow::Owned(weight),
        scale_type: ScaleType::F16,
        scales: Cow::Owned(scales),
        zeros: Cow::Owned(Vec::new()),
    };
    rotated(ctx, (n, k), opts, size, || {
        DeviceMatrix::in_layout(ctx, &data, None, None, false, &mut UploadRoute::Queue)
    })
}

/// The case `index` of shape `n` × `k` (k whole blocks of 256) on GGUF Q4_K blocks: pseudo-random
/// codes and six-bit scales under small finite block scales, as many copies as
/// `opts.cold_bytes` holds (1 to `size.copies`), and x and y for `size.rows` rows.
pub(super) fn make_blocks_case(
    ctx: &Context,
    (n, k): (u64, u64),
    opts: &TuneOptions,
    index: u64,
    size: CaseSize,
) -> Result<Case> {
    let ty = BlockType::Q4K;
    let block_bytes = ty.block_bytes();
    let total = usize::try_from(n * (k / Q4K_BLOCK))
        .ok()
        .and_then(|blocks| blocks.checked_mul(block_bytes))
        .ok_or_else(|| {
            Error::OutOfHostMemory(format!("a tuning matrix of {n} x {k} Q4_K blocks"))
        })?;
    let mut next = xorshift(0xD1B5_4A32_D192_ED03u64 ^ (index << 32) ^ n ^ (k << 16));
    let (d, dmin) = (half::f16::from_f32(0.01), half::f16::from_f32(0.005));
    let tensor: Vec<u8> = crate::alloc::collect(
        (0..total).map(|i| match i % block_bytes {
            0 | 1 => d.to_le_bytes()[i % 2],
            2 | 3 => dmin.to_le_bytes()[i % 2],
            _ => next() as u8,
        }),
        "the tuning blocks",
    )?;
    rotated(ctx, (n, k), opts, size, || {
        let (n, k) = (n as usize, k as usize);
        DeviceMatrix::from_blocks(ctx, ty, n, k, &tensor, &mut UploadRoute::Queue)
    })
}

/// The case of an `n` × `k` matrix that `make` uploads: as many copies as
/// `opts.cold_bytes` holds (1 to `size.copies`), x and y for `size.rows` rows, and chains
/// of at least `size.calls` calls.
fn rotated(
    ctx: &Context,
    (n, k): (u64, u64),
    opts: &TuneOptions,
    size: CaseSize,
    make: impl Fn() -> Result<DeviceMatrix>,
) -> Result<Case> {
    let first = make()?;
    let bytes = first.form.device_bytes().max(1);
    let copies = opts.cold_bytes.div_ceil(bytes).clamp(1, size.copies as u64) as usize;
    let mut mats = vec![first];
    for _ in 1..copies {
        mats.push(make()?);
    }
    let (x, y) = case_xy(ctx, n, k, size.rows)?;
    Ok(Case {
        calls: copies.max(size.calls),
        mats,
        x,
        y,
        n,
        k,
    })
}

/// x (`rows` rows of `k` values) and y (`rows` rows of `n`) of a tuning case.
pub(super) fn case_xy(ctx: &Context, n: u64, k: u64, rows: u32) -> Result<(Buffer, Buffer)> {
    let bytes = usize::try_from(4 * u64::from(rows) * k)
        .map_err(|_| Error::OutOfHostMemory(format!("tuning activations of {rows} x {k}")))?;
    let x_values: Vec<u8> = crate::alloc::collect(
        (0..bytes).map(|b| (((b / 4 % 97) as f32 - 48.0) / 64.0).to_le_bytes()[b % 4]),
        "the tuning activations",
    )?;
    let x = upload(ctx, &x_values, "q4vk tuning x")?;
    let y = Buffer::new(
        &ctx.device,
        4 * u64::from(rows) * n,
        MemoryKind::Device,
        "q4vk tuning y",
    )?;
    Ok((x, y))
}

/// The choice under `rules` for `m` dense rows on `case` with a workspace of `room`.
pub(super) fn case_choice(rules: &Rules, case: &Case, m: u32, room: Room) -> Result<Choice> {
    decide(
        rules,
        &case.mats[0].form,
        &GemvParams::dense(m, case.k, case.n),
        room,
    )
}
