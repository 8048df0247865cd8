//! Tuning the SIMT GEMV's workgroup shape on the device in hand (`q4vk_context_tune`): the
//! device row's shape and its neighbours (`plan::tuned::candidates`) timed on a set of
//! matrix shapes and m, weights rotated through copies so that each call reads them from
//! memory, not from the last call's cache; the fastest for each tuning class (matrices of
//! short rows, of long rows: `plan::tuned::has_long_rows`; geometric mean of its time
//! against the row's over the class's cases) goes into a blob (`plan::tuned::TunedBlob`)
//! that a later context takes. Then the same for the integer dot-product GEMV's shape on x
//! in digits (one for every row length; its digits pre-pass timed with it), where the
//! context runs that GEMV; for the SIMT GEMM's tile at each prefill m timed
//! (`plan::tuned_gemm::gemm_candidates`), where the context runs that GEMM there; and for
//! the GEMV on GGUF blocks' one-pass shape (`plan::tuned::blocks_candidates`), on Q4_K
//! matrices of the shapes.

use super::context::Context;
use super::gemv_plan::{decide, Choice, KernelChoice, Room};
use super::log::LEVEL_DEBUG;
use super::matrix::{upload, DeviceMatrix, UploadRoute};
use super::matrix_form::MatrixForm;
use super::memory::{Buffer, MemoryKind};
use super::params::{BufferRange, GemvParams, MAX_M};
use super::pipeline::{BlocksKey, PipelineKey, Tuning, BLOCKS_MAX_M};
use super::record::{record_resolved, CallPlan};
use super::rules::Rules;
use super::submit::record_barrier;
use super::xy_sets::Set1;
use crate::error::{invalid, Error, Result};
use crate::import::gguf_blocks::BlockType;
use crate::plan::tuned::{
    blocks_candidates, candidates, has_long_rows, BlocksGemvShape, TunedBlob,
};
use crate::plan::tuned_gemm::{
    gemm_candidates, GemmTilesAt, TunedGemmTiles, TunedGemms, GEMM_MS, MAX_GEMM_MS,
};
use crate::plan::tuning::{GemmTile, SimtGemv};
use crate::quant::q4::{Q4Data, Q4Shape, ScaleType};
use ash::vk;
use std::borrow::Cow;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// What a tuning run times, and for how long at most.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TuneOptions {
    /// Wall-clock budget: no candidate starts past it (the row's shapes are always timed).
    /// The kernels tuned (the f32 SIMT GEMV; the integer dot-product GEMV where some case
    /// runs it; the SIMT GEMM where some case runs it at a prefill m; the GEMV on GGUF
    /// blocks where some case is on blocks) take equal shares of it in that order.
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
    /// The device row's shape for matrices of short rows (the baseline of `chosen`).
    pub table: SimtGemv,
    /// The device row's shape for matrices of long rows (the baseline of `long_rows`).
    pub long_rows_table: SimtGemv,
    /// The chosen shape for matrices of short rows (`plan::tuned::has_long_rows` false;
    /// the row's where no candidate was faster by more than the noise margin, or no case
    /// had short rows).
    pub chosen: SimtGemv,
    /// The chosen shape's time against the row's (geometric mean over the cases of short
    /// rows; 1 where none was timed).
    pub time_vs_table: f64,
    /// The chosen shape for matrices of long rows, as `chosen`.
    pub long_rows: SimtGemv,
    /// Its time against the row's over the cases of long rows, as `time_vs_table`.
    pub long_rows_time_vs_table: f64,
    /// Candidates timed on every case, the row's included.
    pub timed: usize,
    /// Candidates the device can run.
    pub candidates: usize,
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

/// A candidate must beat the row's shape by this factor to replace it (timing noise).
const NOISE_MARGIN: f64 = 0.98;

/// Timed chains per (candidate, case); the fastest counts.
const REPEATS: usize = 3;

/// Untimed chains before the timed ones in each submission.
const WARM_CHAINS: usize = 2;

/// How long the row's shape runs, untimed, before anything is timed: a GPU that was idle
/// raises its clocks over milliseconds, not within one chain.
const WARM_UP: Duration = Duration::from_millis(50);

/// How a case is built: rows of x and y, most copies of the matrix, fewest calls per
/// chain.
#[derive(Debug, Clone, Copy)]
struct CaseSize {
    rows: u32,
    copies: usize,
    calls: usize,
}

/// The GEMVs' cases: up to 8 rows, as many copies as the cold bytes hold (up to 64), chains
/// of at least 16 calls (a decoder step's matrices in a row).
const GEMV_CASE: CaseSize = CaseSize {
    rows: MAX_M,
    copies: 64,
    calls: 16,
};

/// The SIMT GEMM's cases for up to `rows` tokens: a call reads each weight once for many
/// tokens, so a few copies and short chains suffice (a prefill call is long).
fn gemm_case(rows: u32) -> CaseSize {
    CaseSize {
        rows,
        copies: 4,
        calls: 4,
    }
}

/// A timed case: rotated copies of one matrix, x and y, and the calls per submission.
struct Case {
    mats: Vec<DeviceMatrix>,
    x: Buffer,
    y: Buffer,
    n: u64,
    k: u64,
    calls: usize,
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
    // The row's shape per class [short rows, long rows], timed first.
    let row = ctx.rules.row;
    let tables = [*row.short_rows_simt_gemv(), row.simt_gemv];
    let mut all = vec![tables[0]];
    if tables[1] != tables[0] {
        all.push(tables[1]);
    }
    let rows_timed_first = all.len();
    // A fixed word-lanes choice (`Overrides::simt_gemv_word_lanes`) makes the candidates
    // that differ from another only there the same kernel: they are timed once.
    let fixed_lanes = ctx.rules.overrides().simt_gemv_word_lanes;
    for table in tables {
        for s in candidates(&table, &ctx.rules.class) {
            if !all.contains(&s) && fixed_lanes.is_none_or(|lanes| s.word_lanes == lanes) {
                all.push(s);
            }
        }
    }
    let cases = opts
        .shapes
        .iter()
        .enumerate()
        .map(|(i, &(n, k))| make_case(ctx, (n, k), opts, i as u64, GEMV_CASE))
        .collect::<Result<Vec<_>>>()?;
    // The shapes and m the GEMV on blocks is timed on (after the SIMT GEMV's cases are
    // freed); the SIMT GEMV's candidates stop at half the budget where there are any.
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
    let timer = GpuTimer::for_queue(ctx, 2 * REPEATS as u32)?;
    // Candidates that resolve to the same kernels on a case (a workgroup shrunk to a short
    // row's chunks; word steps the row takes on short rows anyway) share one timing: µs by
    // (case, m, kernel keys).
    type CaseKey = (usize, u32, PipelineKey, PipelineKey);
    let mut seen: HashMap<CaseKey, f64> = HashMap::new();
    // Each timed candidate (the row's first) with its keys per case and m, in order.
    let mut timed: Vec<(SimtGemv, Vec<(usize, CaseKey)>)> = Vec::new();
    for (i, shape) in all.iter().enumerate() {
        if i >= rows_timed_first && started.elapsed() >= simt_budget {
            break;
        }
        let rules = rules_with(ctx, shape);
        let mut keys = Vec::new();
        for (c, case) in cases.iter().enumerate() {
            let class = usize::from(has_long_rows(case.k));
            for &m in &opts.ms {
                let (choice, key, last) = simt_choice(&rules, case, m)?;
                if i == 0 && c == 0 && m == opts.ms[0] {
                    keep_busy(ctx, timer.as_ref(), case, m, choice, None)?;
                }
                let case_key = (c, m, key, last);
                time_new(&mut seen, case_key, || {
                    let us = time_case(ctx, timer.as_ref(), case, m, choice, None)?;
                    log_timing(ctx, case, m, &choice, us);
                    Ok(us)
                })?;
                keys.push((class, case_key));
            }
        }
        timed.push((*shape, keys));
    }
    // The row's shapes again, last: the fastest of their two timings counts, so that a GPU
    // still leaving its idle clocks at the first one does not flatter the candidates.
    let table_keys = tables.map(|t| {
        let at = timed
            .iter()
            .position(|(s, _)| *s == t)
            .expect("timed first");
        timed[at].1.clone()
    });
    for (class, keys) in table_keys.iter().enumerate() {
        let rules = rules_with(ctx, &tables[class]);
        for &(case_class, case_key) in keys {
            if case_class != class {
                continue;
            }
            let (c, m, _, _) = case_key;
            let (choice, _, _) = simt_choice(&rules, &cases[c], m)?;
            let again = time_case(ctx, timer.as_ref(), &cases[c], m, choice, None)?;
            log_timing(ctx, &cases[c], m, &choice, again);
            let us = seen.get_mut(&case_key).expect("timed with the row's shape");
            *us = us.min(again);
        }
    }
    // Per tuning class [short rows, long rows]: the geometric mean of each candidate's time
    // against the class's row shape over the class's cases; the lowest.
    let mut best = tables.map(|t| (t, 1.0f64));
    for (shape, keys) in &timed {
        let mut log_ratio = [0.0f64; 2];
        let mut count = [0usize; 2];
        for (at, &(class, case_key)) in keys.iter().enumerate() {
            let table_key = table_keys[class][at].1;
            log_ratio[class] += (seen[&case_key] / seen[&table_key]).ln();
            count[class] += 1;
        }
        for class in 0..2 {
            let ratio = (log_ratio[class] / count[class].max(1) as f64).exp();
            if ratio < best[class].1 {
                best[class] = (*shape, ratio);
            }
        }
    }
    let timed = timed.len();
    let [short, long] = [0, 1].map(|class| match best[class].1 < NOISE_MARGIN {
        true => best[class],
        false => (tables[class], 1.0),
    });
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
        simt_gemv: short.0,
        time_vs_table: short.1 as f32,
        long_rows: long.0,
        long_rows_time_vs_table: long.1 as f32,
        blocks_gemv: blocks.chosen,
        blocks_time_vs_table: blocks.ratio as f32,
        int_dot_gemv: int_dot.chosen,
        int_dot_time_vs_table: int_dot.ratio as f32,
        gemm: TunedGemms::new(&tiles_at)
            .ok_or_else(|| Error::Internal(format!("tuned GEMM tiles at {prefill_ms:?}")))?,
    }
    .encode();
    Ok(TuneOutcome {
        table: tables[0],
        long_rows_table: tables[1],
        chosen: short.0,
        time_vs_table: short.1,
        long_rows: long.0,
        long_rows_time_vs_table: long.1,
        timed,
        candidates: all.len(),
        blocks_table: BlocksGemvShape::of_row(ctx.rules.row),
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

/// `ctx`'s rules with the device row's shapes for the SIMT GEMV, the integer dot-product
/// GEMV and the SIMT GEMM (not a blob's): the baseline every candidate is timed against.
fn row_rules(ctx: &Context) -> Rules {
    let row = ctx.rules.row;
    let mut rules = ctx.rules;
    rules.simt = tuning_of(ctx, row.short_rows_simt_gemv());
    rules.simt_long_rows = tuning_of(ctx, &row.simt_gemv);
    rules.int_dot_simt = row.int_dot_gemv.as_ref().map(|s| tuning_of(ctx, s));
    rules.simt_gemm_tuned = TunedGemmTiles::default();
    rules
}

/// The calls (case index, m) of `cases` at each of `ms` that `rules` run on the integer
/// dot-product GEMV on x in digits given the workspace they ask, with its bytes.
fn int_dot_calls(rules: &Rules, cases: &[Case], ms: &[u32]) -> Result<Vec<(usize, u32, u64)>> {
    let mut calls = Vec::new();
    for (c, case) in cases.iter().enumerate() {
        for &m in ms {
            let choice = case_choice(rules, case, m, Room::AsNeeded)?;
            if let KernelChoice::SimtGemv { key, .. } = choice.kernel {
                if key.dot && !key.x_bytes {
                    calls.push((c, m, choice.workspace_bytes));
                }
            }
        }
    }
    Ok(calls)
}

/// What tuning the integer dot-product GEMV found.
struct IntDotTuned {
    /// The shape the candidates start from (`TuneOutcome::int_dot_table`).
    table: SimtGemv,
    /// The chosen shape; `None` where the row's was kept.
    chosen: Option<SimtGemv>,
    /// Its time against the row's rules (1 where kept).
    ratio: f64,
    /// Shapes timed on every call.
    timed: usize,
}

/// Times the integer dot-product GEMV's shapes on `calls` of `cases` (its digits pre-pass
/// included, as a call runs it): the row's rules (`rules`) and the candidates around the
/// row's shape as the GEMV's one shape ([`Timing::candidates`], within `deadline` from
/// `started`); the fastest by the geometric mean of its time against the row's rules.
fn tune_int_dot(
    ctx: &Context,
    timer: Option<&GpuTimer>,
    (cases, calls): (&[Case], &[(usize, u32, u64)]),
    rules: &Rules,
    (started, deadline): (Instant, Duration),
) -> Result<IntDotTuned> {
    let row = rules.row;
    let table = *row
        .int_dot_gemv
        .as_ref()
        .unwrap_or(row.short_rows_simt_gemv());
    let Some(bytes) = calls.iter().map(|&(_, _, b)| b).max() else {
        return Ok(IntDotTuned {
            table,
            chosen: None,
            ratio: 1.0,
            timed: 0,
        });
    };
    let workspace = Buffer::new(
        &ctx.device,
        bytes.max(4),
        MemoryKind::Device,
        "q4vk tuning workspace",
    )?;
    // The row's rules, then each candidate as the GEMV's one shape.
    let shapes =
        std::iter::once(None).chain(candidates(&table, &ctx.rules.class).into_iter().map(Some));
    let calls: Vec<(usize, u32)> = calls.iter().map(|&(c, m, _)| (c, m)).collect();
    let timing = Timing {
        ctx,
        timer,
        cases,
        calls: &calls,
        workspace: Some(&workspace),
        deadline: (started, deadline),
    };
    let timed = timing.candidates(shapes, |shape, case, m| {
        let mut shape_rules = *rules;
        if let Some(s) = shape {
            shape_rules.int_dot_simt = Some(tuning_of(ctx, s));
        }
        int_dot_choice(&shape_rules, case, m)
    })?;
    let (chosen, ratio) = fastest(&timed).unwrap_or((None, 1.0));
    Ok(IntDotTuned {
        table,
        chosen,
        ratio,
        timed: timed.len(),
    })
}

/// A timed call: its case, its m and the keys of the kernels a candidate runs there.
type CallKey<K> = (usize, u32, K);

/// The calls one kernel's candidates are timed on, and how.
struct Timing<'a> {
    ctx: &'a Context,
    timer: Option<&'a GpuTimer<'a>>,
    cases: &'a [Case],
    /// (case index, m).
    calls: &'a [(usize, u32)],
    /// Where the calls' pre-passes write (`None`: calls without one).
    workspace: Option<&'a Buffer>,
    /// When the timing started, and how long after it candidates may start.
    deadline: (Instant, Duration),
}

impl Timing<'_> {
    /// Times `shapes` on every call, in order: the first (the baseline: the row's) always,
    /// the others while the deadline allows; then the first again (the faster of its two
    /// timings counts: a GPU leaving its idle clocks at the first does not flatter the
    /// others). `choice` gives a shape's kernel on a case at m and the keys that name it
    /// (shapes resolving to the same keys on a call share one timing). Returns each timed
    /// shape with its time against the first, the geometric mean over the calls; none
    /// where there are no calls.
    fn candidates<S: Copy, K: std::hash::Hash + Eq + Copy>(
        &self,
        shapes: impl IntoIterator<Item = S>,
        choice: impl Fn(&S, &Case, u32) -> Result<(Choice, K)>,
    ) -> Result<Vec<(S, f64)>> {
        if self.calls.is_empty() {
            return Ok(Vec::new());
        }
        let (started, deadline) = self.deadline;
        let mut seen: HashMap<CallKey<K>, f64> = HashMap::new();
        let mut timed: Vec<(S, Vec<CallKey<K>>)> = Vec::new();
        for (i, shape) in shapes.into_iter().enumerate() {
            if i > 0 && started.elapsed() >= deadline {
                break;
            }
            let mut keys = Vec::with_capacity(self.calls.len());
            for (at, &(c, m)) in self.calls.iter().enumerate() {
                let case = &self.cases[c];
                let (kernel, key) = choice(&shape, case, m)?;
                if i == 0 && at == 0 {
                    keep_busy(self.ctx, self.timer, case, m, kernel, self.workspace)?;
                }
                time_new(&mut seen, (c, m, key), || {
                    let us = time_case(self.ctx, self.timer, case, m, kernel, self.workspace)?;
                    log_timing(self.ctx, case, m, &kernel, us);
                    Ok(us)
                })?;
                keys.push((c, m, key));
            }
            timed.push((shape, keys));
        }
        let Some((first, first_keys)) = timed.first() else {
            return Ok(Vec::new());
        };
        for &(c, m, key) in first_keys {
            let (kernel, _) = choice(first, &self.cases[c], m)?;
            let again = time_case(
                self.ctx,
                self.timer,
                &self.cases[c],
                m,
                kernel,
                self.workspace,
            )?;
            log_timing(self.ctx, &self.cases[c], m, &kernel, again);
            let us = seen
                .get_mut(&(c, m, key))
                .expect("timed with the first shape");
            *us = us.min(again);
        }
        Ok(timed
            .iter()
            .map(|(shape, keys)| (*shape, geometric_mean_ratio(&seen, keys, first_keys)))
            .collect())
    }
}

/// Logs one timing of a tuning run at DEBUG level: the kernel and its shape, the case and
/// the microseconds per call.
fn log_timing(ctx: &Context, case: &Case, m: u32, kernel: &Choice, us: f64) {
    ctx.logger.log(
        LEVEL_DEBUG,
        &format!(
            "tuning: {kernel} on {} x {}, m = {m}: {us:.2} µs per call",
            case.n, case.k
        ),
    );
}

/// The fastest of `timed` (as [`Timing::candidates`] returns them) after the first, where
/// it beats the first by more than the noise margin.
fn fastest<S: Copy>(timed: &[(S, f64)]) -> Option<(S, f64)> {
    timed
        .iter()
        .skip(1)
        .copied()
        .filter(|&(_, ratio)| ratio < NOISE_MARGIN)
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

/// The geometric mean over `keys` of each one's time in `seen` against its counterpart in
/// `table_keys` (1 where there are none).
fn geometric_mean_ratio<K: std::hash::Hash + Eq>(
    seen: &HashMap<K, f64>,
    keys: &[K],
    table_keys: &[K],
) -> f64 {
    let log_ratio: f64 = keys
        .iter()
        .zip(table_keys)
        .map(|(key, table_key)| (seen[key] / seen[table_key]).ln())
        .sum();
    (log_ratio / keys.len().max(1) as f64).exp()
}

/// The choice for `m` rows on `case` under `rules` given a workspace and its integer
/// dot-product GEMV keys (a full pass, the last pass); an internal error for any other
/// kernel.
fn int_dot_choice(
    rules: &Rules,
    case: &Case,
    m: u32,
) -> Result<(Choice, (PipelineKey, PipelineKey))> {
    let choice = case_choice(rules, case, m, Room::AsNeeded)?;
    match choice.kernel {
        KernelChoice::SimtGemv { key, last } if key.dot && !key.x_bytes => {
            Ok((choice, (key, last)))
        }
        _ => Err(Error::Internal(format!(
            "tuning the integer dot-product GEMV at m = {m} resolved to {choice}"
        ))),
    }
}

/// The calls (index into the shapes, m) at each of `ms` on `forms` (shape index, its
/// matrix form) that `rules` run on the SIMT GEMM (`blocks` false) or the GEMM on GGUF
/// blocks without a workspace: every call whose tile matters (given one, a call may run
/// the integer dot-product GEMV instead, up to its reach in m).
fn gemm_calls(
    rules: &Rules,
    forms: &[(usize, &MatrixForm)],
    ms: &[u32],
    blocks: bool,
) -> Result<Vec<(usize, u32)>> {
    let mut calls = Vec::new();
    for &(i, form) in forms {
        for &m in ms {
            let p = GemvParams::dense(m, form.shape.k as u64, form.shape.n as u64);
            let choice = decide(rules, form, &p, Room::None)?;
            if gemm_key(&choice, blocks).is_some() {
                calls.push((i, m));
            }
        }
    }
    Ok(calls)
}

/// The tile and K groups of `choice` where it runs the SIMT GEMM (`blocks` false) or the
/// GEMM on GGUF blocks.
fn gemm_key(choice: &Choice, blocks: bool) -> Option<(GemmTile, u32)> {
    match (choice.kernel, blocks) {
        (KernelChoice::SimtGemm(key), false) => Some((key.tile, key.ksplit)),
        (KernelChoice::BlocksGemm(key), true) => Some((key.tile, key.ksplit)),
        _ => None,
    }
}

/// Times the tiles of the SIMT GEMM (`blocks` false) or of the GEMM on GGUF blocks on
/// `calls` (index into `opts.shapes`, m; without a workspace), on new cases of those shapes (in
/// the SIMT layout, or Q4_K blocks) with x and y for the largest m: per m, the row's rules
/// (`rules`), then `plan::tuned_gemm::gemm_candidates` around the row's tile at that m as
/// the tile from that m ([`Timing::candidates`], each m within an equal part of the
/// `window` (start, length) after `started`); the fastest by the geometric mean of its
/// time against the row's rules over the cases.
fn tune_gemm(
    ctx: &Context,
    timer: Option<&GpuTimer>,
    (calls, blocks): (&[(usize, u32)], bool),
    (rules, opts): (&Rules, &TuneOptions),
    (started, (from, length)): (Instant, (Duration, Duration)),
) -> Result<Vec<GemmTunedAt>> {
    let mut ms: Vec<u32> = calls.iter().map(|&(_, m)| m).collect();
    ms.sort_unstable();
    ms.dedup();
    let Some(&most) = ms.last() else {
        return Ok(Vec::new());
    };
    let mut shapes: Vec<usize> = calls.iter().map(|&(c, _)| c).collect();
    shapes.sort_unstable();
    shapes.dedup();
    let cases = shapes
        .iter()
        .map(|&i| match blocks {
            true => make_blocks_case(ctx, opts.shapes[i], opts, i as u64, gemm_case(most)),
            false => make_case(ctx, opts.shapes[i], opts, i as u64, gemm_case(most)),
        })
        .collect::<Result<Vec<_>>>()?;

    let mut found = Vec::with_capacity(ms.len());
    for (i, &m) in ms.iter().enumerate() {
        let at: Vec<(usize, u32)> = calls
            .iter()
            .filter(|&&(_, cm)| cm == m)
            .map(|&(c, _)| (shapes.binary_search(&c).expect("a case per shape"), m))
            .collect();
        let table = match blocks {
            true => rules.row.blocks_gemm_tiles.for_m(m),
            false => rules.row.simt_gemm_tiles.for_m(m),
        };
        let timing = Timing {
            ctx,
            timer,
            cases: &cases,
            calls: &at,
            workspace: None,
            deadline: (started, from + length * (i as u32 + 1) / ms.len() as u32),
        };
        // The row's rules, then each candidate but the row's tile as the tile from m.
        let tiles = std::iter::once(None).chain(
            gemm_candidates(&table, m, &rules.class, blocks)
                .into_iter()
                .skip(1)
                .map(Some),
        );
        let timed = timing.candidates(tiles, |tile, case, m| {
            let mut tile_rules = *rules;
            if let Some(t) = tile {
                let tuned = TunedGemmTiles::new(&[(m, Some(*t))]).expect("one m");
                match blocks {
                    true => tile_rules.blocks_gemm_tuned = tuned,
                    false => tile_rules.simt_gemm_tuned = tuned,
                }
            }
            let choice = case_choice(&tile_rules, case, m, Room::None)?;
            let key = gemm_key(&choice, blocks).ok_or_else(|| {
                Error::Internal(format!(
                    "tuning a GEMM's tile at m = {m} resolved to {choice}"
                ))
            })?;
            Ok((choice, key))
        })?;
        let (chosen, ratio) = fastest(&timed).unwrap_or((None, 1.0));
        found.push(GemmTunedAt {
            m,
            table,
            chosen,
            time_vs_table: ratio,
            timed: timed.len(),
        });
    }
    Ok(found)
}

/// Weights per Q4_K block: a tuning shape's k must be whole blocks for its case on blocks.
const Q4K_BLOCK: u64 = 256;

/// The m of `opts` that the GEMV on GGUF blocks runs in one pass striding over pieces
/// (the calls a tuned shape of it decides).
fn blocks_ms(opts: &TuneOptions) -> Vec<u32> {
    opts.ms
        .iter()
        .copied()
        .filter(|&m| m <= BLOCKS_MAX_M)
        .collect()
}

/// What tuning the GEMV on GGUF blocks found.
struct BlocksTuned {
    /// The chosen shape (the row's where none beat it by the noise margin).
    chosen: BlocksGemvShape,
    /// Its time against the row's shape (1 where kept or nothing was timed).
    ratio: f64,
    /// Shapes timed on every case.
    timed: usize,
}

/// Times the GEMV on GGUF blocks' one-pass shapes on `cases` (Q4_K) at each of `ms` — the
/// row's shape and `plan::tuned::blocks_candidates` nearest first ([`Timing::candidates`],
/// within `opts.budget` from `started`) — and returns the fastest by the geometric mean of
/// its time against the row's over the cases.
fn tune_blocks(
    ctx: &Context,
    timer: Option<&GpuTimer>,
    (cases, ms): (&[Case], &[u32]),
    deadline: (Instant, Duration),
) -> Result<BlocksTuned> {
    let table = BlocksGemvShape::of_row(ctx.rules.row);
    let calls: Vec<(usize, u32)> = (0..cases.len())
        .flat_map(|c| ms.iter().map(move |&m| (c, m)))
        .collect();
    let timing = Timing {
        ctx,
        timer,
        cases,
        calls: &calls,
        workspace: None,
        deadline,
    };
    let timed = timing.candidates(blocks_candidates(&table), |shape, case, m| {
        let mut rules = ctx.rules;
        rules.blocks_gemv = *shape;
        blocks_choice_of(&rules, case, m)
    })?;
    let (chosen, ratio) = fastest(&timed).unwrap_or((table, 1.0));
    Ok(BlocksTuned {
        chosen,
        ratio,
        timed: timed.len(),
    })
}

/// The case `index` of shape `n` × `k`: a pseudo-random group-128 matrix uploaded in the
/// SIMT layout as many times as `opts.cold_bytes` holds (1 to `size.copies`), and x and y
/// for `size.rows` rows.
fn make_case(
    ctx: &Context,
    (n, k): (u64, u64),
    opts: &TuneOptions,
    index: u64,
    size: CaseSize,
) -> Result<Case> {
    let shape = Q4Shape::new(n, k, 128, 0)?;
    let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ (index << 32) ^ n ^ (k << 16);
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
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
    let first = DeviceMatrix::in_layout(ctx, &data, None, None, false, &mut UploadRoute::Queue)?;
    let bytes = first.form.device_bytes().max(1);
    let copies = opts.cold_bytes.div_ceil(bytes).clamp(1, size.copies as u64) as usize;
    let mut mats = vec![first];
    for _ in 1..copies {
        mats.push(DeviceMatrix::in_layout(
            ctx,
            &data,
            None,
            None,
            false,
            &mut UploadRoute::Queue,
        )?);
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

/// The case `index` of shape `n` × `k` (k whole blocks of 256) on GGUF Q4_K blocks: pseudo-random
/// codes and six-bit scales under small finite block scales, as many copies as
/// `opts.cold_bytes` holds (1 to `size.copies`), and x and y for `size.rows` rows.
fn make_blocks_case(
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
    let mut state = 0xD1B5_4A32_D192_ED03u64 ^ (index << 32) ^ n ^ (k << 16);
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (d, dmin) = (half::f16::from_f32(0.01), half::f16::from_f32(0.005));
    let tensor: Vec<u8> = crate::alloc::collect(
        (0..total).map(|i| match i % block_bytes {
            0 | 1 => d.to_le_bytes()[i % 2],
            2 | 3 => dmin.to_le_bytes()[i % 2],
            _ => next() as u8,
        }),
        "the tuning blocks",
    )?;
    let (n, k) = (n as usize, k as usize);
    let make = || DeviceMatrix::from_blocks(ctx, ty, n, k, &tensor, &mut UploadRoute::Queue);
    let first = make()?;
    let bytes = first.form.device_bytes().max(1);
    let copies = opts.cold_bytes.div_ceil(bytes).clamp(1, size.copies as u64) as usize;
    let mut mats = vec![first];
    for _ in 1..copies {
        mats.push(make()?);
    }
    let (x, y) = case_xy(ctx, n as u64, k as u64, size.rows)?;
    Ok(Case {
        calls: copies.max(size.calls),
        mats,
        x,
        y,
        n: n as u64,
        k: k as u64,
    })
}

/// x (`rows` rows of `k` values) and y (`rows` rows of `n`) of a tuning case.
fn case_xy(ctx: &Context, n: u64, k: u64, rows: u32) -> Result<(Buffer, Buffer)> {
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
fn case_choice(rules: &Rules, case: &Case, m: u32, room: Room) -> Result<Choice> {
    decide(
        rules,
        &case.mats[0].form,
        &GemvParams::dense(m, case.k, case.n),
        room,
    )
}

/// Times `key`'s case with `time` unless a candidate resolving to the same kernels already
/// did (`seen`: µs by key).
fn time_new<K: std::hash::Hash + Eq>(
    seen: &mut HashMap<K, f64>,
    key: K,
    time: impl FnOnce() -> Result<f64>,
) -> Result<()> {
    if let std::collections::hash_map::Entry::Vacant(slot) = seen.entry(key) {
        slot.insert(time()?);
    }
    Ok(())
}

/// The choice for `m` rows on the blocks `case` under `rules` and its GEMV keys (a full
/// pass, the last pass); an internal error for any other kernel.
fn blocks_choice_of(
    rules: &Rules,
    case: &Case,
    m: u32,
) -> Result<(Choice, (BlocksKey, BlocksKey))> {
    let choice = case_choice(rules, case, m, Room::None)?;
    match choice.kernel {
        KernelChoice::BlocksGemv { key, last } => Ok((choice, (key, last))),
        _ => Err(Error::Internal(format!(
            "tuning the GEMV on GGUF blocks at m = {m} resolved to {choice}"
        ))),
    }
}

/// The choice for `m` rows on `case` under `rules` and its SIMT GEMV keys (a full pass,
/// the last pass); an internal error for any other kernel (tuning times only that one).
fn simt_choice(rules: &Rules, case: &Case, m: u32) -> Result<(Choice, PipelineKey, PipelineKey)> {
    let choice = case_choice(rules, case, m, Room::None)?;
    match choice.kernel {
        KernelChoice::SimtGemv { key, last } => Ok((choice, key, last)),
        _ => Err(Error::Internal(format!(
            "tuning the SIMT GEMV at m = {m} resolved to {choice}"
        ))),
    }
}

/// `ctx`'s rules with `shape` for matrices of every row length.
fn rules_with(ctx: &Context, shape: &SimtGemv) -> Rules {
    let mut rules = ctx.rules;
    rules.simt = tuning_of(ctx, shape);
    rules.simt_long_rows = rules.simt;
    rules
}

/// Keeps the GPU busy with chains of `m` rows on `case` for [`WARM_UP`].
fn keep_busy(
    ctx: &Context,
    timer: Option<&GpuTimer>,
    case: &Case,
    m: u32,
    choice: Choice,
    workspace: Option<&Buffer>,
) -> Result<()> {
    let started = Instant::now();
    while started.elapsed() < WARM_UP {
        time_case(ctx, timer, case, m, choice, workspace)?;
    }
    Ok(())
}

/// Microseconds per call of `m` rows on `case` with the kernel of `choice` (and its
/// pre-pass into `workspace`, which holds the bytes the choice asks): the fastest
/// of [`REPEATS`] chains of `case.calls` calls (rotating through the copies, a barrier
/// between calls, as a decoder step runs them). One untimed submission first creates the
/// pipelines; each timed submission starts with [`WARM_CHAINS`] untimed chains, so that the
/// GPU's clocks have left their idle state. Timed between GPU timestamps where the queue
/// has them, so that recording and submitting do not count; else by the wall clock around
/// each submission.
fn time_case(
    ctx: &Context,
    timer: Option<&GpuTimer>,
    case: &Case,
    m: u32,
    choice: Choice,
    workspace: Option<&Buffer>,
) -> Result<f64> {
    let p = GemvParams::dense(m, case.k, case.n);
    let workspace = match (choice.workspace_bytes, workspace) {
        (0, _) => None,
        (bytes, Some(w)) if bytes <= w.size => Some(BufferRange {
            buffer: w.buffer,
            offset: 0,
            range: bytes,
        }),
        (bytes, _) => {
            return Err(Error::Internal(format!(
                "a tuning call asks {bytes} bytes of workspace; it was given less"
            )))
        }
    };
    let plans = case
        .mats
        .iter()
        .map(|mat| CallPlan::of(ctx, mat, &p, choice))
        .collect::<Result<Vec<_>>>()?;
    let x = BufferRange {
        buffer: case.x.buffer,
        offset: 0,
        range: 4 * u64::from(m) * case.k,
    };
    let y = BufferRange {
        buffer: case.y.buffer,
        offset: 0,
        range: 4 * u64::from(m) * case.n,
    };
    let d = &ctx.device.device;
    let chain = |cmd: vk::CommandBuffer, calls: usize| -> Result<()> {
        for i in 0..calls {
            // SAFETY: q4vk's own command buffer, recording.
            unsafe { record_barrier(d, cmd, COMPUTE_WRITE, COMPUTE_READ_WRITE) };
            let at = i % case.mats.len();
            record_resolved(
                ctx,
                cmd,
                &case.mats[at],
                &Set1::pair(x, y),
                &p,
                workspace,
                &plans[at],
            )?;
        }
        Ok(())
    };
    ctx.submit(|cmd| chain(cmd, case.mats.len()))?;
    let fastest = match timer {
        None => (0..REPEATS)
            .map(|_| {
                ctx.submit(|cmd| chain(cmd, WARM_CHAINS * case.calls))?;
                let started = Instant::now();
                ctx.submit(|cmd| chain(cmd, case.calls))?;
                Ok(started.elapsed())
            })
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .min(),
        Some(timer) => timer
            .chains(|timer, cmd| {
                chain(cmd, WARM_CHAINS * case.calls)?;
                for r in 0..REPEATS as u32 {
                    timer.stamp(cmd, 2 * r);
                    chain(cmd, case.calls)?;
                    timer.stamp(cmd, 2 * r + 1);
                }
                Ok(())
            })?
            .into_iter()
            .min(),
    }
    .expect("REPEATS > 0");
    Ok(fastest.as_secs_f64() * 1e6 / case.calls as f64)
}

/// Compute writes, then compute reads and writes: the barrier between chained calls.
const COMPUTE_WRITE: (vk::PipelineStageFlags, vk::AccessFlags) = (
    vk::PipelineStageFlags::COMPUTE_SHADER,
    vk::AccessFlags::SHADER_WRITE,
);
/// See [`COMPUTE_WRITE`].
const COMPUTE_READ_WRITE: (vk::PipelineStageFlags, vk::AccessFlags) = (
    vk::PipelineStageFlags::COMPUTE_SHADER,
    vk::AccessFlags::from_raw(
        vk::AccessFlags::SHADER_READ.as_raw() | vk::AccessFlags::SHADER_WRITE.as_raw(),
    ),
);

/// A timestamp query pool of q4vk's queue, destroyed on drop.
struct GpuTimer<'a> {
    ctx: &'a Context,
    pool: vk::QueryPool,
    count: u32,
    /// `timestampValidBits` of the queue.
    bits: u32,
}

impl<'a> GpuTimer<'a> {
    /// A pool of `count` timestamps on `ctx`'s queue, or `None` where it has none.
    fn for_queue(ctx: &'a Context, count: u32) -> Result<Option<GpuTimer<'a>>> {
        let bits = ctx.device.timestamp_bits;
        if bits == 0 {
            return Ok(None);
        }
        let info = vk::QueryPoolCreateInfo::default()
            .query_type(vk::QueryType::TIMESTAMP)
            .query_count(count);
        // SAFETY: q4vk's live device; the pool is destroyed on drop.
        let pool = unsafe { ctx.device.device.create_query_pool(&info, None) }
            .map_err(|e| Error::vk("vkCreateQueryPool", e))?;
        ctx.device.namer.name(pool, "q4vk tuning timestamps");
        Ok(Some(GpuTimer {
            ctx,
            pool,
            count,
            bits,
        }))
    }

    /// Records timestamp `index` after all earlier commands.
    fn stamp(&self, cmd: vk::CommandBuffer, index: u32) {
        // SAFETY: q4vk's own command buffer, recording; index < count (callers).
        unsafe {
            self.ctx.device.device.cmd_write_timestamp(
                cmd,
                vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                self.pool,
                index,
            )
        }
    }

    /// Submits what `record` records after the pool's reset, waits, and returns the time
    /// between each pair of timestamps (0 and 1, 2 and 3, …).
    fn chains(
        &self,
        record: impl FnOnce(&Self, vk::CommandBuffer) -> Result<()>,
    ) -> Result<Vec<Duration>> {
        let d = &self.ctx.device.device;
        self.ctx.submit(|cmd| {
            // SAFETY: q4vk's own command buffer, recording; the pool is live.
            unsafe { d.cmd_reset_query_pool(cmd, self.pool, 0, self.count) };
            record(self, cmd)
        })?;
        let mut stamps = vec![0u64; self.count as usize];
        // SAFETY: every query was written by the completed submission.
        unsafe {
            d.get_query_pool_results(
                self.pool,
                0,
                &mut stamps,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
            )
        }
        .map_err(|e| Error::vk("vkGetQueryPoolResults", e))?;
        let mask = u64::MAX >> (64 - self.bits.min(64));
        let period = f64::from(self.ctx.device.info.timestamp_period);
        Ok(stamps
            .chunks_exact(2)
            .map(|pair| {
                let ticks = pair[1].wrapping_sub(pair[0]) & mask;
                Duration::from_secs_f64(ticks as f64 * period * 1e-9)
            })
            .collect())
    }
}

impl Drop for GpuTimer<'_> {
    fn drop(&mut self) {
        // SAFETY: the pool is not in use once `chains` has waited (or never submitted).
        unsafe { self.ctx.device.device.destroy_query_pool(self.pool, None) };
    }
}
