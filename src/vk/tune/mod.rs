//! Tuning the SIMT GEMV's workgroup shape on the device in hand (`q4vk_context_tune`): the
//! device row's shape and its neighbours (`plan::tuned::candidates`) timed on a set of
//! matrix shapes and m, weights rotated through copies so that each call reads them from
//! memory, not from the last call's cache; the fastest for each group of calls (short or
//! long rows, few or many rows, m = 1 or more: `plan::tuned::SimtGroup`; geometric mean of
//! its time against the row's, timed in the same submission, over the group's calls) goes
//! into a blob (`plan::tuned::TunedBlob`) that a later context takes. Then the same for the integer dot-product GEMV's shape on x
//! in digits (one for every row length; its digits pre-pass timed with it), where the
//! context runs that GEMV; for the SIMT GEMM's tile at each prefill m timed
//! (`plan::tuned_gemm::gemm_candidates`), where the context runs that GEMM there; for the
//! GEMV on GGUF blocks' one-pass shape (`plan::tuned::blocks_candidates`), on Q4_K
//! matrices of the shapes; and for the GEMM on GGUF blocks' tile like the SIMT GEMM's
//! (`phases`). How a kernel is timed: `timing`; on what: `cases`.

mod cases;
mod phases;
mod timing;

use super::context::Context;
use super::matrix_form::MatrixForm;
use super::params::MAX_M;
use super::pipeline::Tuning;
use super::rules::Rules;
use crate::error::{invalid, Error, Result};
use crate::import::gguf_blocks::BlockType;
use crate::plan::blocks_gemv::BlocksGemvShape;
use crate::plan::tuned::{blocks_shape_of_row, TunedBlob};
use crate::plan::tuned_gemm::{GemmTilesAt, TunedGemmTiles, TunedGemms, GEMM_MS, MAX_GEMM_MS};
use crate::plan::tuning::{GemmTile, SimtGemv};
use ash::vk;
use cases::{make_blocks_case, make_case, GEMV_CASE, Q4K_BLOCK};
use phases::{
    blocks_ms, gemm_calls, int_dot_calls, tune_blocks, tune_gemm, tune_int_dot, tune_simt,
};
use std::time::{Duration, Instant};
use timing::{GpuTimer, TIMESTAMPS};

/// What a tuning run times, and for how long at most.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TuneOptions {
    /// Wall-clock budget: no candidate starts past it (a batch of candidates begun is
    /// timed to its end).
    /// The kernels tuned (the f32 SIMT GEMV; the integer dot-product GEMV where some case
    /// runs it; the SIMT GEMM where some case runs it at a prefill m; the GEMV on GGUF
    /// blocks where some case is on blocks; the GEMM on GGUF blocks like the SIMT GEMM)
    /// take equal shares of it in that order.
    pub budget: Duration,
    /// Matrix shapes (n, k) timed, each a multiple of 128 in k.
    pub shapes: Vec<(u64, u64)>,
    /// Activation rows timed on each (1..=8).
    pub ms: Vec<u32>,
    /// Activation rows (prefill m, in `plan::tuned_gemm::GEMM_MS`) the SIMT GEMM's tile is
    /// timed at on each shape, 0..=4 values.
    pub prefill_ms: Vec<u32>,
    /// Bytes of weight copies each case rotates through (the cache the calls must miss).
    pub cold_bytes: u64,
}

impl TuneOptions {
    /// Shapes of the decoder matrices of 1.5B–3B models (Qwen2.5-1.5B, Llama-3.2-1B/3B):
    /// attention, KV heads, MLP up and down.
    pub(crate) const DEFAULT_SHAPES: [(u64, u64); 4] =
        [(1536, 1536), (256, 1536), (8960, 1536), (1536, 8960)];
    /// A decode step and a few sequences at once.
    pub(crate) const DEFAULT_MS: [u32; 2] = [1, 8];
    /// A prompt's chunk.
    pub(crate) const DEFAULT_PREFILL_MS: [u32; 1] = [64];
    /// Larger than the last-level caches of phone and desktop GPUs.
    pub(crate) const DEFAULT_COLD_BYTES: u64 = 64 << 20;

    /// Checks the options: a budget, 1..=64 shapes of 1..=65536 rows and k a multiple of 128
    /// up to 65536, 1..=8 values of m each 1..=8, up to 4 distinct prefill m in
    /// `GEMM_MS`, cold bytes up to 1 GiB.
    pub fn checked(self) -> Result<TuneOptions> {
        if self.budget.is_zero() {
            return Err(invalid!("a tuning budget of 0 ms"));
        }
        if self.shapes.is_empty() || self.shapes.len() > 64 {
            return Err(invalid!(
                "{} tuning shapes; expected 1..64",
                self.shapes.len()
            ));
        }
        for &(n, k) in &self.shapes {
            if !(1..=65536).contains(&n) || !(128..=65536).contains(&k) || k % 128 != 0 {
                return Err(invalid!(
                    "tuning shape {n} x {k}: expected 1..65536 rows and k a multiple of 128 up to 65536"
                ));
            }
        }
        if self.ms.is_empty()
            || self.ms.len() > 8
            || self.ms.iter().any(|m| !(1..=MAX_M).contains(m))
        {
            return Err(invalid!(
                "tuning m values {:?}: expected 1..8 values of 1..{MAX_M}",
                self.ms
            ));
        }
        let mut prefill = self.prefill_ms.clone();
        prefill.sort_unstable();
        prefill.dedup();
        if self.prefill_ms.len() > MAX_GEMM_MS
            || prefill.len() != self.prefill_ms.len()
            || self.prefill_ms.iter().any(|m| !GEMM_MS.contains(m))
        {
            return Err(invalid!(
                "tuning prefill m values {:?}: expected up to {MAX_GEMM_MS} distinct values of {}..{}",
                self.prefill_ms,
                GEMM_MS.start(),
                GEMM_MS.end()
            ));
        }
        if self.cold_bytes > 1 << 30 {
            return Err(invalid!("{} cold bytes; at most 1 GiB", self.cold_bytes));
        }
        Ok(self)
    }
}

/// What a tuning run found.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneOutcome {
    /// The SIMT GEMV's shape per group of calls (`plan::tuned::SimtGroup::index`).
    pub simt: [SimtTuned; 8],
    /// The device row's shape of the GEMV on GGUF blocks for calls of up to 4 rows (the
    /// baseline of `blocks_chosen`).
    pub blocks_table: BlocksGemvShape,
    /// The chosen shape of the GEMV on GGUF blocks, as `chosen` (the table's where none was
    /// faster, or no case was timed on blocks).
    pub blocks_chosen: BlocksGemvShape,
    /// Its time against the table's (geometric mean over the cases on blocks; 1 where none
    /// was timed).
    pub blocks_time_vs_table: f64,
    /// Shapes of the GEMV on GGUF blocks timed on every case on blocks (the table's
    /// included; 0 where no case was: no shape's k is whole Q4_K blocks of 256, or no m
    /// runs in one pass).
    pub blocks_timed: usize,
    /// The shape the integer dot-product GEMV's candidates start from: the device row's
    /// (`DeviceTuning::int_dot_gemv`), or where it has none the row's f32 shape for short
    /// rows (the GEMV then takes the f32 shape of each matrix's class, the baseline).
    pub int_dot_table: SimtGemv,
    /// The integer dot-product GEMV's chosen shape; `None` where the row's was kept (no
    /// candidate faster by more than the noise margin, or no case ran that GEMV).
    pub int_dot_chosen: Option<SimtGemv>,
    /// Its time against the row's (geometric mean over the cases that ran it; 1 where
    /// kept).
    pub int_dot_time_vs_table: f64,
    /// Shapes of the integer dot-product GEMV timed on every case that runs it (the row's
    /// included; 0 where none did: the context does not run it, or no case's m and size
    /// does).
    pub int_dot_timed: usize,
    /// The SIMT GEMM's tile per prefill m at which some case runs it, ascending m.
    pub gemm: Vec<GemmTunedAt>,
    /// The GEMM on GGUF blocks' tile per prefill m at which some case on Q4_K blocks runs
    /// it, ascending m.
    pub blocks_gemm: Vec<GemmTunedAt>,
    /// The blob a later context takes (`ContextConfig::tuned_blob`).
    pub blob: Vec<u8>,
}

/// What tuning the SIMT GEMV found for one group of calls (`plan::tuned::SimtGroup`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimtTuned {
    /// The device row's shape for the group's class of rows (the baseline).
    pub table: SimtGemv,
    /// The chosen shape (the row's where no candidate was faster by more than the noise
    /// margin, or no case was of the group).
    pub chosen: SimtGemv,
    /// Its time against the row's (geometric mean over the group's calls; 1 where none
    /// was timed).
    pub time_vs_table: f64,
    /// Shapes timed on every call of the group, the row's included (0 where the group has
    /// no calls).
    pub timed: usize,
    /// Shapes the device can run that the group's candidates hold, the row's included.
    pub candidates: usize,
}

/// What tuning the tile of the SIMT GEMM or of the GEMM on GGUF blocks found at one
/// prefill m.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GemmTunedAt {
    /// The m timed.
    pub m: u32,
    /// The device row's tile at `m` (`DeviceTuning::simt_gemm_tiles`, `blocks_gemm_tiles`),
    /// where the candidates start; the baseline is the row's rules, which run `GEMM_TILE` instead on
    /// matrices where this tile leaves the GPU too few workgroups.
    pub table: GemmTile,
    /// The chosen tile; `None` where the row's was kept (no candidate faster by more than
    /// the noise margin).
    pub chosen: Option<GemmTile>,
    /// Its time against the row's rules (geometric mean over the cases; 1 where kept).
    pub time_vs_table: f64,
    /// Tiles timed on every case (the row's included).
    pub timed: usize,
}

/// The subgroup SIMT GEMV's workgroup shape for `shape` on `ctx`'s device.
pub fn tuning_of(ctx: &Context, shape: &SimtGemv) -> Tuning {
    let class = &ctx.rules.class;
    Tuning::for_device(false, shape, class.subgroup_size, class.min_subgroup_size)
}

/// Times the candidate SIMT GEMV shapes on `ctx`'s device as `opts` says and returns the
/// fastest and its blob. `Unsupported` on contexts that run the portable kernels (one
/// shape) or have no queue.
pub fn tune(ctx: &Context, opts: &TuneOptions) -> Result<TuneOutcome> {
    let started = Instant::now();
    if ctx.rules.portable {
        return Err(Error::Unsupported(
            "the portable kernels have one workgroup shape: nothing to tune".into(),
        ));
    }
    if ctx.device.queue == vk::Queue::null() {
        return Err(Error::Unsupported(
            "tuning submits its timed calls, and this adopted device was given no queue".into(),
        ));
    }
    let cases = opts
        .shapes
        .iter()
        .enumerate()
        .map(|(i, &(n, k))| make_case(ctx, (n, k), opts, i as u64, GEMV_CASE))
        .collect::<Result<Vec<_>>>()?;
    // The shapes and m the GEMV on blocks is timed on (after the SIMT GEMV's cases are
    // freed).
    let blocks_ms = blocks_ms(opts);
    let blocks_shapes: Vec<(usize, (u64, u64))> = match blocks_ms.is_empty() {
        true => Vec::new(),
        false => opts
            .shapes
            .iter()
            .copied()
            .enumerate()
            .filter(|(_, (_, k))| k % Q4K_BLOCK == 0)
            .collect(),
    };
    // The calls the integer dot-product GEMV runs under the row's rules.
    let int_dot_rules = row_rules(ctx);
    let int_dot_calls = match ctx.rules.int_dot {
        true => int_dot_calls(&int_dot_rules, &cases, &opts.ms)?,
        false => Vec::new(),
    };
    // The calls the SIMT GEMM and the GEMM on GGUF blocks (Q4_K, shapes of whole blocks)
    // run at the prefill m under the row's rules.
    let simt_forms: Vec<(usize, &MatrixForm)> =
        cases.iter().map(|c| &c.mats[0].form).enumerate().collect();
    let simt_gemm_calls = gemm_calls(&int_dot_rules, &simt_forms, &opts.prefill_ms, false)?;
    let blocks_forms = opts
        .shapes
        .iter()
        .enumerate()
        .filter(|(_, (_, k))| k % Q4K_BLOCK == 0)
        .map(|(i, &(n, k))| {
            let form = MatrixForm::of_blocks(
                BlockType::Q4K,
                n as usize,
                k as usize,
                ctx.limits.max_part_bytes,
            )?;
            Ok((i, form))
        })
        .collect::<Result<Vec<_>>>()?;
    let blocks_forms: Vec<(usize, &MatrixForm)> =
        blocks_forms.iter().map(|(i, f)| (*i, f)).collect();
    let blocks_gemm_calls = gemm_calls(&int_dot_rules, &blocks_forms, &opts.prefill_ms, true)?;
    // Equal shares of the budget, in order: each kernel's candidates stop at the end of its
    // own.
    let phases = [
        true,
        !int_dot_calls.is_empty(),
        !simt_gemm_calls.is_empty(),
        !blocks_shapes.is_empty(),
        !blocks_gemm_calls.is_empty(),
    ];
    let share = opts.budget / phases.iter().filter(|&&p| p).count() as u32;
    let end_of = |phase: usize| share * phases[..=phase].iter().filter(|&&p| p).count() as u32;
    let window_of = |phase: usize| (end_of(phase) - share * u32::from(phases[phase]), share);
    let simt_budget = end_of(0);
    let int_dot_budget = end_of(1);
    // One timestamp pool for every timing (reset at each).
    let timer = GpuTimer::for_queue(ctx, TIMESTAMPS)?;
    let simt = tune_simt(
        ctx,
        timer.as_ref(),
        (&cases, &opts.ms),
        (started, simt_budget),
    )?;
    let int_dot = tune_int_dot(
        ctx,
        timer.as_ref(),
        (&cases, &int_dot_calls),
        &int_dot_rules,
        (started, int_dot_budget),
    )?;
    drop(cases);
    let gemm = tune_gemm(
        ctx,
        timer.as_ref(),
        (&simt_gemm_calls, false),
        (&int_dot_rules, opts),
        (started, window_of(2)),
    )?;
    let blocks_cases = blocks_shapes
        .iter()
        .map(|&(i, (n, k))| make_blocks_case(ctx, (n, k), opts, i as u64, GEMV_CASE))
        .collect::<Result<Vec<_>>>()?;
    let blocks = tune_blocks(
        ctx,
        timer.as_ref(),
        (&blocks_cases, &blocks_ms),
        (started, end_of(3)),
    )?;
    drop(blocks_cases);
    let blocks_gemm = tune_gemm(
        ctx,
        timer.as_ref(),
        (&blocks_gemm_calls, true),
        (&int_dot_rules, opts),
        (started, window_of(4)),
    )?;
    // Per prefill m, each GEMM's tile (the row's where it was kept or did not run there).
    let mut prefill_ms = opts.prefill_ms.clone();
    prefill_ms.sort_unstable();
    let tiles_at: Vec<GemmTilesAt> = prefill_ms
        .iter()
        .map(|&m| {
            let of = |found: &[GemmTunedAt]| {
                found
                    .iter()
                    .find(|g| g.m == m)
                    .map_or((None, 1.0), |g| (g.chosen, g.time_vs_table as f32))
            };
            let ((simt, simt_time_vs_table), (blocks, blocks_time_vs_table)) =
                (of(&gemm), of(&blocks_gemm));
            GemmTilesAt {
                m,
                simt,
                simt_time_vs_table,
                blocks,
                blocks_time_vs_table,
            }
        })
        .collect();
    let blob = TunedBlob {
        identity: ctx.device.identity(),
        simt_gemv: simt.map(|g| g.chosen),
        simt_time_vs_table: simt.map(|g| g.time_vs_table as f32),
        blocks_gemv: blocks.chosen,
        blocks_time_vs_table: blocks.ratio as f32,
        int_dot_gemv: int_dot.chosen,
        int_dot_time_vs_table: int_dot.ratio as f32,
        gemm: TunedGemms::new(&tiles_at)
            .ok_or_else(|| Error::Internal(format!("tuned GEMM tiles at {prefill_ms:?}")))?,
    }
    .encode();
    Ok(TuneOutcome {
        simt,
        blocks_table: blocks_shape_of_row(ctx.rules.row),
        blocks_chosen: blocks.chosen,
        blocks_time_vs_table: blocks.ratio,
        blocks_timed: blocks.timed,
        int_dot_table: int_dot.table,
        int_dot_chosen: int_dot.chosen,
        int_dot_time_vs_table: int_dot.ratio,
        int_dot_timed: int_dot.timed,
        gemm,
        blocks_gemm,
        blob,
    })
}

/// `ctx`'s rules with the device row's shapes for the SIMT GEMV and the integer dot-product
/// GEMV and its tiles for the GEMMs (not a blob's): the baseline every candidate is timed
/// against.
fn row_rules(ctx: &Context) -> Rules {
    let row = ctx.rules.row;
    let mut rules = ctx.rules;
    rules.set_simt_class(false, tuning_of(ctx, row.short_rows_simt_gemv()));
    rules.set_simt_class(true, tuning_of(ctx, &row.simt_gemv));
    rules.int_dot_simt = row.int_dot_gemv.as_ref().map(|s| tuning_of(ctx, s));
    rules.simt_gemm_tuned = TunedGemmTiles::default();
    rules.blocks_gemm_tuned = TunedGemmTiles::default();
    rules
}
