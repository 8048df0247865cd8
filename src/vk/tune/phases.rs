//! The kernels tuning times, each one phase: the SIMT GEMV's shape per group of calls, the
//! integer dot-product GEMV's shape on x in digits, the SIMT GEMM's and the GEMM on GGUF
//! blocks' tiles per prefill m, and the GEMV on GGUF blocks' one-pass shape.

use super::cases::{case_choice, gemm_case, make_blocks_case, make_case, Case};
use super::timing::{fastest, threads, GpuTimer, Timing};
use super::{tuning_of, GemmTunedAt, SimtTuned, TuneOptions};
use crate::error::{Error, Result};
use crate::plan::blocks_gemv::BlocksGemvShape;
use crate::plan::tuned::{
    blocks_candidates, blocks_shape_of_row, candidates, neighbours, SimtGroup,
};
use crate::plan::tuned_gemm::{gemm_candidates, TunedGemmTiles};
use crate::plan::tuning::{GemmTile, SimtGemv};
use crate::vk::context::Context;
use crate::vk::gemv_plan::{decide, Choice, KernelChoice, Room};
use crate::vk::matrix_form::MatrixForm;
use crate::vk::memory::{Buffer, MemoryKind};
use crate::vk::params::GemvParams;
use crate::vk::pipeline::{BlocksKey, PipelineKey, BLOCKS_MAX_M};
use crate::vk::rules::Rules;
use std::time::{Duration, Instant};

/// Times the SIMT GEMV's shapes on `cases` at each of `ms`, each group of calls
/// (`SimtGroup`) apart: from the row's shape of the group's class of rows, climbing
/// through `plan::tuned::neighbours`, then `plan::tuned::candidates` around the fastest
/// ([`Timing::climb`]; each group with calls takes an equal part of the time left up to
/// `deadline` after `started`); the fastest per group by the geometric mean of its time
/// against the row's shape.
pub(super) fn tune_simt(
    ctx: &Context,
    timer: Option<&GpuTimer>,
    (cases, ms): (&[Case], &[u32]),
    (started, deadline): (Instant, Duration),
) -> Result<[SimtTuned; 8]> {
    let row = ctx.rules.row;
    let groups: [Vec<(usize, u32)>; 8] = SimtGroup::ALL.map(|group| {
        cases
            .iter()
            .enumerate()
            .flat_map(|(c, case)| ms.iter().map(move |&m| (c, case, m)))
            .filter(|&(_, case, m)| SimtGroup::of(case.n as usize, case.k, m) == group)
            .map(|(c, _, m)| (c, m))
            .collect()
    });
    let mut groups_left = groups.iter().filter(|calls| !calls.is_empty()).count();
    // A fixed word-lanes choice (`Overrides::simt_gemv_word_lanes`) makes the candidates
    // that differ from another only there the same kernel: they are left out.
    let fixed_lanes = ctx.rules.overrides().simt_gemv_word_lanes;
    let mut found = Vec::with_capacity(groups.len());
    for (group, calls) in SimtGroup::ALL.into_iter().zip(&groups) {
        // An equal part of the time left to each group left with calls (time a group
        // leaves unused goes to the next).
        let own = match calls.is_empty() {
            true => Duration::ZERO,
            false => deadline.saturating_sub(started.elapsed()) / groups_left.max(1) as u32,
        };
        groups_left = groups_left.saturating_sub(usize::from(!calls.is_empty()));
        let table = match group.long_rows {
            true => row.simt_gemv,
            false => *row.short_rows_simt_gemv(),
        };
        let class = &ctx.rules.class;
        let lanes_allowed = |s: &SimtGemv| fixed_lanes.is_none_or(|lanes| s.word_lanes == lanes);
        let shapes = 1 + candidates(&table, class)
            .into_iter()
            .filter(lanes_allowed)
            .count();
        let timing = Timing {
            ctx,
            timer,
            cases,
            calls,
            workspace: None,
            deadline: (started, started.elapsed() + own),
            threads: threads(),
        };
        let timed = timing.climb(
            table,
            |s| {
                neighbours(s, class)
                    .into_iter()
                    .filter(lanes_allowed)
                    .collect()
            },
            |s| {
                candidates(s, class)
                    .into_iter()
                    .filter(lanes_allowed)
                    .collect()
            },
            |shape, case, m| {
                let mut rules = ctx.rules;
                let tuning = tuning_of(ctx, shape);
                rules.simt_groups = [tuning; 8];
                simt_choice(&rules, case, m)
            },
        )?;
        let (chosen, time_vs_table) = fastest(&timed).unwrap_or((table, 1.0));
        found.push(SimtTuned {
            table,
            chosen,
            time_vs_table,
            timed: timed.len(),
            candidates: match calls.is_empty() {
                true => 0,
                false => shapes,
            },
        });
    }
    Ok(found.try_into().expect("one outcome per group"))
}

/// The choice for `m` rows on `case` under `rules` and its SIMT GEMV keys (a full pass,
/// the last pass); an internal error for any other kernel (tuning times only that one).
fn simt_choice(rules: &Rules, case: &Case, m: u32) -> Result<(Choice, (PipelineKey, PipelineKey))> {
    let choice = case_choice(rules, case, m, Room::None)?;
    match choice.kernel {
        KernelChoice::SimtGemv { key, last } => Ok((choice, (key, last))),
        _ => Err(Error::Internal(format!(
            "tuning the SIMT GEMV at m = {m} resolved to {choice}"
        ))),
    }
}

/// The calls (case index, m) of `cases` at each of `ms` that `rules` run on the integer
/// dot-product GEMV on x in digits given the workspace they ask, with its bytes.
pub(super) fn int_dot_calls(
    rules: &Rules,
    cases: &[Case],
    ms: &[u32],
) -> Result<Vec<(usize, u32, u64)>> {
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
pub(super) struct IntDotTuned {
    /// The shape the candidates start from (`TuneOutcome::int_dot_table`).
    pub(super) table: SimtGemv,
    /// The chosen shape; `None` where the row's was kept.
    pub(super) chosen: Option<SimtGemv>,
    /// Its time against the row's rules (1 where kept).
    pub(super) ratio: f64,
    /// Shapes timed on every call.
    pub(super) timed: usize,
}

/// Times the integer dot-product GEMV's shapes on `calls` of `cases` (its digits pre-pass
/// included, as a call runs it): from the row's rules (`rules`), climbing through the
/// shapes around the row's shape as the GEMV's one shape ([`Timing::climb`], within
/// `deadline` from `started`); the fastest by the geometric mean of its time against the
/// row's rules.
pub(super) fn tune_int_dot(
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
    // From the row's rules (`None`), each candidate as the GEMV's one shape.
    let class = &ctx.rules.class;
    let from = |shape: &Option<SimtGemv>| shape.unwrap_or(table);
    let calls: Vec<(usize, u32)> = calls.iter().map(|&(c, m, _)| (c, m)).collect();
    let timing = Timing {
        ctx,
        timer,
        cases,
        calls: &calls,
        workspace: Some(&workspace),
        deadline: (started, deadline),
        threads: threads(),
    };
    let timed = timing.climb(
        None,
        |s| neighbours(&from(s), class).into_iter().map(Some).collect(),
        |s| candidates(&from(s), class).into_iter().map(Some).collect(),
        |shape, case, m| {
            let mut shape_rules = *rules;
            if let Some(s) = shape {
                shape_rules.int_dot_simt = Some(tuning_of(ctx, s));
            }
            int_dot_choice(&shape_rules, case, m)
        },
    )?;
    let (chosen, ratio) = fastest(&timed).unwrap_or((None, 1.0));
    Ok(IntDotTuned {
        table,
        chosen,
        ratio,
        timed: timed.len(),
    })
}

/// The choice for `m` rows on `case` under `rules` given a workspace and its integer
/// dot-product GEMV keys (a full pass, the last pass); an internal error for any other
/// kernel.
pub(super) fn int_dot_choice(
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
pub(super) fn gemm_calls(
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
pub(super) fn gemm_key(choice: &Choice, blocks: bool) -> Option<(GemmTile, u32)> {
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
pub(super) fn tune_gemm(
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
            threads: threads(),
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

/// The m of `opts` that the GEMV on GGUF blocks runs in one pass striding over pieces
/// (the calls a tuned shape of it decides).
pub(super) fn blocks_ms(opts: &TuneOptions) -> Vec<u32> {
    opts.ms
        .iter()
        .copied()
        .filter(|&m| m <= BLOCKS_MAX_M)
        .collect()
}

/// What tuning the GEMV on GGUF blocks found.
pub(super) struct BlocksTuned {
    /// The chosen shape (the row's where none beat it by the noise margin).
    pub(super) chosen: BlocksGemvShape,
    /// Its time against the row's shape (1 where kept or nothing was timed).
    pub(super) ratio: f64,
    /// Shapes timed on every case.
    pub(super) timed: usize,
}

/// Times the GEMV on GGUF blocks' one-pass shapes on `cases` (Q4_K) at each of `ms` — the
/// row's shape and `plan::tuned::blocks_candidates` nearest first ([`Timing::candidates`],
/// within `opts.budget` from `started`) — and returns the fastest by the geometric mean of
/// its time against the row's over the cases.
pub(super) fn tune_blocks(
    ctx: &Context,
    timer: Option<&GpuTimer>,
    (cases, ms): (&[Case], &[u32]),
    deadline: (Instant, Duration),
) -> Result<BlocksTuned> {
    let table = blocks_shape_of_row(ctx.rules.row);
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
        threads: threads(),
    };
    let timed = timing.candidates(blocks_candidates(&table), |shape, case, m| {
        // The baseline is the row's table as it stands; a candidate replaces the tuned
        // class's shape at every height.
        let mut rules = ctx.rules;
        rules.blocks_gemv = ctx.rules.row.blocks_gemv;
        if *shape != table {
            rules.set_tuned_blocks_shape(*shape);
        }
        blocks_choice_of(&rules, case, m)
    })?;
    let (chosen, ratio) = fastest(&timed).unwrap_or((table, 1.0));
    Ok(BlocksTuned {
        chosen,
        ratio,
        timed: timed.len(),
    })
}

/// The choice for `m` rows on the blocks `case` under `rules` and its GEMV keys (a full
/// pass, the last pass); an internal error for any other kernel.
pub(super) fn blocks_choice_of(
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
