//! q4vk-bench: GPU timing of the fused int4 GEMV (m = 1, 2, 4, 8; g = 128, f32 activations)
//! against this device's compute-shader copy bandwidth and a naive one-invocation-per-row
//! kernel (m = 1), all measured in the same run with timestamp queries, with the kernel
//! path the context chose (tensor cores "coopmat", with the GEMV's row tiles × subgroups,
//! "subgroup" or "portable"; "decoded-once" where the f32 SIMT GEMV decodes each word once
//! for all activation rows, "word-lanes" where its invocations step over words of codes) and, on the device line, the device's tuning row. Prints a
//! markdown table; `--m 1,8` picks the activation counts, `--no-coop` forces the SIMT
//! kernels (path "int8-dot" where they run on x in 8-bit digits: by default where the
//! device reports packed 8-bit dot products accelerated, with `--int-dot` or
//! `Q4VK_INTDOT=1` wherever it has them, never with `--no-int-dot`; the digits pre-pass is
//! timed with the kernel), `--coop T,S` fixes the tensor-core kernel's tiles and subgroups, and
//! `--coop-sweep` times it over a grid of those (bench/RESULTS.md); `Q4VK_BENCH_LOG=1`
//! prints the context's log (`debug`: also each timing of `--tune`); `--stats` ends the table with the compiler statistics
//! (registers, spills, as the driver reports them through
//! `VK_KHR_pipeline_executable_properties`) of every pipeline the run created. Calls get
//! the workspace their pre-pass needs (path "x-fragments": the tensor-core GEMM on x written
//! as its fragments by `x_fragments.comp`, timed with it) unless `--no-workspace`; `--round-x-f16` sets
//! `Q4VK_GEMV_ROUND_X_TO_F16` (rel. err. still against the exact x), `--round-x-int8`
//! `Q4VK_GEMV_ROUND_X_TO_INT8` (likewise; path "int8 bytes"); `--reuse-workspace`
//! times the kernel alone on a workspace an untimed call filled
//! (`Q4VK_GEMV_REUSE_WORKSPACE`: a matrix that shares x with an earlier call; path
//! "reused").
//!
//! `q4vk-bench` runs the target shapes of `bench/RESULTS.md` (a GPU with ≥ 2 GB free); `q4vk-bench --quick`
//! runs them at a quarter of N and K with fewer iterations (lavapipe, CI).
//! `--workgroup W --rows R` overrides the kernel's workgroup size and rows per workgroup,
//! `--unroll U` its chunks per row per step, `--split S` its invocations per chunk;
//! `--decode-once 0|1` fixes whether the f32 SIMT GEMV at m ≥ 2 decodes each word of codes
//! once for all activation rows, `--word-lanes 0|1` whether the SIMT GEMV's invocations
//! step over words of codes instead of chunks, `--blocks-word-lanes 0|1` whether the GEMV
//! on GGUF blocks' step over quarters of pieces; `--row NAME` takes that tuning row instead of the device's
//! (`default`: a device q4vk has no row for); `--tune MS` first tunes the SIMT GEMV's
//! shape on the table's shapes and m (up to 8) within MS milliseconds (`q4vk_context_tune`)
//! and runs the table on a context given its blob; `--tune-each MS` tunes each shape and m
//! alone and prints the shapes chosen instead; `--load` prints load times instead
//! (matrices from packed blobs against a plain copy of their bytes, `load.rs`); `--coop-tiles` keeps matrices in the SIMT layout and runs
//! the tensor-core GEMM on it (and on GGUF blocks, with `--type`) wherever a GEMM runs (with `--gemm-from 1`, at every m); `--gemm-tile TX,TY,RN,RM` fixes the SIMT GEMM's tile, `--gemm-ksplit K` its K groups (and the GEMM on GGUF blocks'), `--blocks-rows R` the GEMV on GGUF blocks' rows per workgroup, `--blocks-pass-rows P` its activation rows per pass (past 4 it loads x again per row), `--blocks-unroll U` its pieces per step (x held: up to 4 ÷ the pass's rows), `--coop-gemm-slices Z` the tensor-core GEMM's K slices; `--shapes 3,4` runs only those rows of the
//! table (entries may be matrices too: `--shapes 4096x14336,3` runs 4096 × 14336 and row 3;
//! `--quick` quarters them as well); `--sweep` times the four target cases (28672 × 8192 and 8192 × 28672 cold,
//! 11008 × 4096 and 4096 × 11008 hot) over a grid of (W, R, U), each in a fresh context,
//! to pick the per-device defaults. Every timed series runs after ~1000 untimed 256 MB
//! copies in the same command buffer (the GPU lowers its SM clock when idle); each row of
//! the full table also times the copy kernel as the GPU is found, before that warm-up
//! ("copy now"), to show the state a row started from.
//!
//! Cold: enough copies of the weights rotate that every timed run reads data no run of
//! the last ≥ 256 MB (quick: 32 MB) touched; of two such series the one with the lower
//! median counts. Hot: the same copy every run.
//!
//! `--chain N` also times each row as a decoder step runs it and llama.cpp's
//! `test-backend-ops` measures: N dependent calls (a barrier between each) recorded in one
//! command buffer between two timestamps, time / N, on rotated copies (cold) and on one
//! (hot); two more columns.
//!
//! `--jsonl FILE` also appends the table's timed rows to FILE as JSON lines, one object per
//! row (`jsonl.rs`; bench/RESULTS.md, "Machine-readable results"), which
//! `scripts/bench-compare.py A.jsonl B.jsonl` compares.

mod data;
mod jsonl;
mod load;
mod model;
mod sweep;
mod table;
mod timing;

use data::*;
use q4vk::error::{Error, Result};
use q4vk::import::gguf_blocks::BlockType;
use q4vk::plan::GemmTile;
use q4vk::plan::{CoopGemmTuning, Overrides};
use q4vk::vk::context::{Context, ContextConfig, IntDot};
use q4vk::vk::log::{Logger, LEVEL_DEBUG, LEVEL_INFO};
use sweep::*;
use table::*;
use timing::*;

const SHAPES: [(usize, usize); 5] = [
    (4096, 4096),
    (11008, 4096),
    (4096, 11008),
    (28672, 8192),
    (8192, 28672),
];

#[derive(Clone)]
struct Options {
    quick: bool,
    sweep: bool,
    /// Time the tensor-core kernel over (tiles, subgroups) instead of the table.
    coop_sweep: bool,
    /// Activation counts of the table.
    ms: Vec<u32>,
    /// Fixed (tiles, subgroups) of the tensor-core kernel.
    coop: Option<(u32, u32)>,
    /// SIMT kernels only.
    no_coop: bool,
    /// The integer dot-product GEMV for the SIMT kernels: forced (`--int-dot`), off
    /// (`--no-int-dot`), else the environment's choice.
    int_dot: Option<bool>,
    /// Shapes (tiles, subgroups, tokens, K groups, k-steps of B ahead or 0, token groups)
    /// of the tensor-core GEMM to time on the same matrices, one row each (`None`: the default);
    /// one `None` unless given.
    coop_gemm: Vec<Option<CoopGemmTuning>>,
    /// f16 activations (x rounded to f16 for the reference too).
    x_f16: bool,
    /// The GEMM kernels from this m on.
    gemm_from: Option<u32>,
    /// The SIMT GEMM's tile (`--gemm-tile`), else chosen per m.
    gemm_tile: Option<GemmTile>,
    /// `--gemm-ksplit K`: the SIMT GEMM's K groups per workgroup (calls whose tile does not
    /// allow them are refused: more than 2 with the 128 × 64 tile past m = 32).
    gemm_ksplit: Option<u32>,
    /// `--blocks-rows R`: rows per workgroup of the GEMV on GGUF blocks.
    blocks_rows: Option<u32>,
    /// `--blocks-pass-rows P`: activation rows per pass of the GEMV on GGUF blocks.
    blocks_pass_rows: Option<u32>,
    /// `--blocks-unroll U`: pieces per step of the GEMV on GGUF blocks.
    blocks_unroll: Option<u32>,
    /// `--coop-gemm-slices Z`: the tensor-core GEMM's K slices (on x in fragments).
    coop_gemm_slices: Option<u32>,
    /// Matrices in the imported GGUF Q4_K / Q4_1 form: groups of 32, f32 scales and
    /// per-group f32 offsets (w = s·u + o).
    offsets: bool,
    /// Matrices with a column order (GPTQ act-order: x gathered through a permutation).
    act_order: bool,
    /// Matrices with a zero point per group (the asymmetric form; else symmetric).
    zeros: bool,
    /// `--group G`: elements per group (default 128; 32 with `--offsets`, as imported GGUF).
    group: Option<i32>,
    /// `--type T`: matrices of GGUF blocks of this type (random blocks, sane scales), kept in
    /// their native bytes.
    block_type: Option<BlockType>,
    /// `--type Q4_K_M` (with `--model`): Q4_K blocks, and Q6_K for V and down in the layers
    /// llama.cpp's Q4_K_M files give more bits.
    q4_k_m: bool,
    /// Print the pipelines' compiler statistics after the table.
    stats: bool,
    /// `--gate-up-apart` (with `--model`): the plain and unfused steps run up after gate, as
    /// the fused step must, instead of beside it.
    gate_up_apart: bool,
    /// No workspace: the kernels that read x themselves, without a pre-pass.
    no_workspace: bool,
    /// `Q4VK_GEMV_ROUND_X_TO_F16`: f32 x may be rounded to f16 (rel. err. against exact x).
    round_x_f16: bool,
    /// `Q4VK_GEMV_ROUND_X_TO_INT8`: x may be rounded to bytes (rel. err. against exact x).
    round_x_int8: bool,
    /// `Q4VK_GEMV_REUSE_WORKSPACE`: time the kernel alone on a workspace an untimed call
    /// filled (what a matrix sharing x with an earlier call costs).
    reuse_workspace: bool,
    tuning: Option<(u32, u32)>,
    unroll: Option<u32>,
    split: Option<u32>,
    /// Matrices (N, K) of the table: `--shapes` entries, each an index into `SHAPES` or `NxK`.
    shapes: Option<Vec<(usize, usize)>>,
    iters: usize,
    /// Untimed 256 MB (quick: 16 MB) copies before each timed series.
    warm: usize,
    cold_bytes: u64,
    /// `--jsonl FILE`: the table's rows are appended to FILE as JSON lines.
    jsonl: Option<std::path::PathBuf>,
    /// `--chain N`: each row also times N dependent calls recorded in one command buffer,
    /// time / N.
    chain: Option<usize>,
    /// `--decode-once 0|1`: whether the f32 SIMT GEMV at m ≥ 2 decodes each word once for
    /// all activation rows (else the device row decides by the matrix's rows).
    decode_once: Option<bool>,
    /// `--word-lanes 0|1`: whether the f32 SIMT GEMV's invocations step over words of codes
    /// instead of 16-byte chunks (else the device row's choice).
    word_lanes: Option<bool>,
    /// `--blocks-word-lanes 0|1`: whether the GEMV on GGUF blocks strides over quarters of
    /// pieces (else the device row's choice).
    blocks_word_lanes: Option<bool>,
    /// `--coop-tiles`: the tensor-core GEMM on the SIMT layout (and on GGUF blocks) wherever
    /// a GEMM runs, the tensor-core layout's kernels not used.
    coop_tiles: bool,
    /// `--row NAME`: the tuning row instead of the device's.
    row: Option<&'static q4vk::plan::DeviceTuning>,
    /// `--tune MS`: the SIMT GEMV's shape tuned within MS milliseconds first.
    tune: Option<u32>,
    /// `--tune-each MS`: each shape and m tuned alone within MS milliseconds, printed as a
    /// table of the shapes chosen (no timing table).
    tune_each: Option<u32>,
    /// `--load`: the load-time table (matrices from packed blobs) instead of the GEMV table.
    load: bool,
    /// `--model NAME`: the model-step table (`model.rs`) instead of the GEMV table.
    model: Option<model::ModelShape>,
}

impl Options {
    /// Elements per group of the benchmarked matrices.
    fn group_size(&self) -> i32 {
        self.group.unwrap_or(if self.offsets { 32 } else { 128 })
    }
}

/// One `--shapes` entry: an index into `SHAPES`, or a matrix as `NxK` (both at least 1).
fn shape_arg(v: &str) -> Option<(usize, usize)> {
    match v.split_once('x') {
        Some((n, k)) => Some((n.parse().ok()?, k.parse().ok()?)).filter(|&(n, k)| n > 0 && k > 0),
        None => v.parse().ok().and_then(|i: usize| SHAPES.get(i).copied()),
    }
}

/// A comma-separated list of numbers.
fn numbers(arg: Option<String>) -> Option<Vec<u32>> {
    arg.and_then(|v| v.split(',').map(|i| i.parse().ok()).collect())
}

fn main() {
    let usage = || -> ! {
        eprintln!("usage: q4vk-bench [--quick] [--sweep | --coop-sweep] [--workgroup W --rows R] [--unroll U] [--split S] [--coop T,S | --no-coop] [--int-dot | --no-int-dot] [--coop-gemm T,S,M[,K[,A[,G]]][/..|/default..]] [--gemm-from M] [--gemm-tile TX,TY,RN,RM] [--gemm-ksplit K] [--coop-gemm-slices Z] [--blocks-rows R] [--blocks-pass-rows P] [--blocks-unroll U] [--offsets | --zeros | --type Q4_1|Q5_0|Q5_1|Q8_0|Q4_K|Q5_K|Q6_K|IQ4_NL|IQ4_XS|MXFP4|NVFP4|Q4_K_M (with --model)] [--group G] [--act-order] [--f16] [--stats] [--no-workspace] [--round-x-f16] [--round-x-int8] [--reuse-workspace] [--m M,..] [--shapes I|NxK,..] [--jsonl FILE] [--chain N] [--decode-once 0|1] [--word-lanes 0|1] [--blocks-word-lanes 0|1] [--coop-tiles] [--row NAME] [--tune MS | --tune-each MS] [--load] [--model NAME [--gate-up-apart]]");
        std::process::exit(2)
    };
    let (mut quick, mut sweep, mut wg, mut rows) = (false, false, None, None);
    let (mut unroll, mut split, mut shapes) = (None, None, None);
    let (mut coop_sweep, mut coop, mut no_coop, mut ms) = (false, None, false, None);
    let (mut offsets, mut x_f16, mut coop_gemm, mut gemm_from) = (false, false, vec![None], None);
    let mut block_type = None;
    let mut q4_k_m = false;
    let mut gemm_tile = None;
    let (mut gemm_ksplit, mut coop_gemm_slices) = (None, None);
    let (mut blocks_rows, mut blocks_pass_rows, mut blocks_unroll) = (None, None, None);
    let (mut act_order, mut stats, mut int_dot) = (false, false, None);
    let mut gate_up_apart = false;
    let (mut zeros, mut group) = (false, None);
    let (mut no_workspace, mut round_x_f16, mut reuse_workspace) = (false, false, false);
    let mut round_x_int8 = false;
    let (mut jsonl, mut chain, mut decode_once) = (None, None, None);
    let (mut word_lanes, mut blocks_word_lanes) = (None, None);
    let mut coop_tiles = false;
    let (mut row, mut tune, mut load, mut model) = (None, None, false, None);
    let mut tune_each = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut number = || {
            args.next()
                .and_then(|v| v.parse::<u32>().ok())
                .unwrap_or_else(|| usage())
        };
        match a.as_str() {
            "--quick" => quick = true,
            "--sweep" => sweep = true,
            "--coop-sweep" => coop_sweep = true,
            "--no-coop" => no_coop = true,
            "--int-dot" => int_dot = Some(true),
            "--no-int-dot" => int_dot = Some(false),
            "--offsets" => offsets = true,
            "--act-order" => act_order = true,
            "--zeros" => zeros = true,
            "--group" => group = Some(number() as i32),
            "--stats" => stats = true,
            "--gate-up-apart" => gate_up_apart = true,
            "--no-workspace" => no_workspace = true,
            "--round-x-f16" => round_x_f16 = true,
            "--round-x-int8" => round_x_int8 = true,
            "--reuse-workspace" => reuse_workspace = true,
            "--f16" => x_f16 = true,
            "--coop" => {
                coop = match numbers(args.next()).as_deref() {
                    Some(&[t, s]) => Some((t, s)),
                    _ => usage(),
                };
            }
            "--coop-gemm" => {
                // Shapes separated by '/', each T,S,M[,K[,A[,G]]] or "default".
                let list = args.next().unwrap_or_else(|| usage());
                coop_gemm = list
                    .split('/')
                    .map(|v| match numbers(Some(v.to_string())).as_deref() {
                        _ if v == "default" => None,
                        Some(&[t, s, m]) => Some(CoopGemmTuning::new(t, s, m, 1, 0, 1)),
                        Some(&[t, s, m, k]) => Some(CoopGemmTuning::new(t, s, m, k, 0, 1)),
                        Some(&[t, s, m, k, a]) => Some(CoopGemmTuning::new(t, s, m, k, a, 1)),
                        Some(&[t, s, m, k, a, g]) => Some(CoopGemmTuning::new(t, s, m, k, a, g)),
                        _ => usage(),
                    })
                    .collect();
            }
            "--m" => {
                let v = numbers(args.next()).filter(|v| v.iter().all(|&m| m >= 1));
                ms = Some(v.unwrap_or_else(|| usage()));
            }
            "--gemm-from" => gemm_from = Some(number()),
            "--gemm-tile" => {
                gemm_tile = match numbers(args.next()).as_deref() {
                    Some(&[tx, ty, rn, rm]) => Some(GemmTile { tx, ty, rn, rm }),
                    _ => usage(),
                };
            }
            "--gemm-ksplit" => gemm_ksplit = Some(number()),
            "--blocks-rows" => blocks_rows = Some(number()),
            "--blocks-pass-rows" => blocks_pass_rows = Some(number()),
            "--blocks-unroll" => blocks_unroll = Some(number()),
            "--coop-gemm-slices" => coop_gemm_slices = Some(number()),
            "--workgroup" => wg = Some(number()),
            "--rows" => rows = Some(number()),
            "--unroll" => unroll = Some(number()),
            "--split" => split = Some(number()),
            "--shapes" => {
                let list: Option<Vec<(usize, usize)>> = args
                    .next()
                    .and_then(|v| v.split(',').map(shape_arg).collect());
                shapes = Some(list.unwrap_or_else(|| usage()));
            }
            "--jsonl" => jsonl = Some(args.next().unwrap_or_else(|| usage()).into()),
            "--chain" => {
                chain = Some(number() as usize)
                    .filter(|&n| n > 0)
                    .or_else(|| usage())
            }
            "--decode-once" => decode_once = Some(number() != 0),
            "--word-lanes" => word_lanes = Some(number() != 0),
            "--blocks-word-lanes" => blocks_word_lanes = Some(number() != 0),
            "--coop-tiles" => coop_tiles = true,
            "--load" => load = true,
            "--row" => {
                row = Some(
                    args.next()
                        .and_then(|name| q4vk::plan::DeviceTuning::named(&name))
                        .unwrap_or_else(|| usage()),
                )
            }
            "--tune" => tune = Some(number()).filter(|&ms| ms > 0).or_else(|| usage()),
            "--tune-each" => tune_each = Some(number()).filter(|&ms| ms > 0).or_else(|| usage()),
            "--type" => {
                let name = args.next().unwrap_or_else(|| usage());
                q4_k_m = name.eq_ignore_ascii_case("Q4_K_M");
                let ty = match q4_k_m {
                    true => Some(BlockType::Q4K),
                    false => BlockType::ALL
                        .into_iter()
                        .find(|t| t.name().eq_ignore_ascii_case(&name)),
                };
                block_type = Some(ty.unwrap_or_else(|| usage()));
            }
            "--model" => {
                let name = args.next().unwrap_or_else(|| usage());
                model = Some(model::model_named(&name).unwrap_or_else(|why| {
                    eprintln!("q4vk-bench: {why}");
                    std::process::exit(2)
                }));
            }
            _ => usage(),
        }
    }
    // The sweeps print no table rows.
    if jsonl.is_some() && (sweep || coop_sweep) {
        usage()
    }
    // The Q4_K_M mix is a model's, not one matrix type.
    if q4_k_m && model.is_none() {
        usage()
    }
    let tuning = match (wg, rows) {
        (None, None) => None,
        (Some(w), Some(r)) => Some((w, r)),
        _ => usage(),
    };
    let opt = Options {
        quick,
        sweep,
        coop_sweep,
        ms: ms.unwrap_or_else(|| if quick { vec![1, 8] } else { vec![1, 2, 4, 8] }),
        coop,
        no_coop,
        int_dot,
        coop_gemm,
        x_f16,
        gemm_from,
        gemm_tile,
        gemm_ksplit,
        blocks_rows,
        blocks_pass_rows,
        blocks_unroll,
        coop_gemm_slices,
        offsets,
        act_order,
        zeros,
        group,
        block_type,
        q4_k_m,
        stats,
        gate_up_apart,
        no_workspace,
        round_x_f16,
        round_x_int8,
        reuse_workspace,
        tuning,
        unroll,
        split,
        shapes,
        iters: if quick { 5 } else { 100 },
        warm: if quick { 1 } else { 1000 },
        cold_bytes: if quick { 32 << 20 } else { 256 << 20 },
        jsonl,
        chain,
        decode_once,
        word_lanes,
        blocks_word_lanes,
        coop_tiles,
        row,
        tune,
        tune_each,
        load,
        model,
    };
    if let Err(e) = run(&opt) {
        eprintln!("q4vk-bench: {e}");
        std::process::exit(1);
    }
}

/// The kernel path a row ran (a GEMM kernel, "tiles GEMM" for the tensor-core GEMM on the
/// SIMT layout, "fragments GEMM" and its shape for the tensor-core GEMM on GGUF blocks with
/// fragments in registers; the tensor-core GEMM's shape, as the run fixed
/// it or, in brackets, as the rules chose it: tiles, subgroups, tokens, K groups, k-steps of
/// B ahead, token groups, and its K slices where it ran in several; the integer dot-product
/// GEMV; or the tensor-core GEMV's tiles × subgroups; the SIMT GEMV's passes of 8 rows past
/// m = 8).
fn path(ctx: &Context, r: &Row) -> String {
    let slices = match r.gemm_shape {
        Some((_, z)) if z > 1 => format!(" ×{z} K slices"),
        _ => String::new(),
    };
    let kind = match (r.gemm, r.coop_gemm, r.gemm_shape) {
        _ if r.tiles => " tiles GEMM".to_string(),
        (_, _, Some((t, _))) if r.blocks_frag => format!(" fragments GEMM [{t}]"),
        (true, Some(t), _) if ctx.coop && t.b_ahead == 0 && t.token_groups == 1 => {
            format!(
                " GEMM {},{},{},{}{slices}",
                t.tiles, t.subgroups, t.tokens, t.k_groups
            )
        }
        (true, Some(t), _) if ctx.coop => format!(" GEMM {t}{slices}"),
        (true, None, Some((t, _))) => format!(" GEMM [{t}]{slices}"),
        (true, _, _) => " GEMM".to_string(),
        (false, _, _) if r.prepass => {
            let bytes = if r.x_bytes { " bytes" } else { "" };
            let lanes = if r.word_lanes { " word-lanes" } else { "" };
            format!(" int8-dot{bytes}{lanes}")
        }
        (false, _, _) if r.word_lanes || r.decoded_once => [
            (r.word_lanes, " word-lanes"),
            (r.decoded_once, " decoded-once"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, label)| *label)
        .collect(),
        (false, _, _) => match r.gemv_shape {
            Some((t, s)) => format!(" {t}×{s}"),
            None => String::new(),
        },
    };
    let split = match (r.gemm && r.prepass, r.rounded) {
        (true, true) => " x-fragments rounded",
        (true, false) => " x-fragments",
        _ => "",
    };
    let reused = if r.reused { " reused" } else { "" };
    // The SIMT GEMV past m = 8 runs in passes of MAX_M rows.
    let passes = match (r.gemm, r.m.div_ceil(q4vk::vk::gemv::MAX_M)) {
        (false, p) if p > 1 => format!(" ×{p} passes"),
        _ => String::new(),
    };
    format!("{}{kind}{passes}{split}{reused}", ctx.kernel_path())
}

/// GB/s with three significant digits for small values.
fn rate(gbs: f64) -> String {
    if gbs < 10.0 {
        format!("{gbs:.2}")
    } else {
        format!("{gbs:.0}")
    }
}

fn context(
    opt: &Options,
    tuning: Option<(u32, u32)>,
    unroll: Option<u32>,
    split: Option<u32>,
    tuned_blob: &[u8],
) -> Result<Context> {
    let env = q4vk::ffi::context::env_switches();
    Context::new(
        ContextConfig {
            device_index: -1,
            portable: env.portable,
            no_push_descriptors: env.no_push_descriptors,
            tuning,
            unroll,
            split,
            no_coop: opt.no_coop || env.no_coopmat,
            coop_tiles_only: opt.coop_tiles,
            row: opt.row,
            tuned_blob: tuned_blob.to_vec(),
            int_dot: match opt.int_dot {
                Some(true) => IntDot::Forced,
                Some(false) => IntDot::Off,
                None => env.int_dot,
            },
            overrides: Overrides {
                coop_gemv: opt.coop,
                coop_gemm: opt.coop_gemm[0],
                gemm_from_m: opt.gemm_from,
                gemm_tile: opt.gemm_tile,
                gemm_ksplit: opt.gemm_ksplit,
                coop_gemm_slices: opt.coop_gemm_slices,
                simt_gemv_decode_once: opt.decode_once,
                simt_gemv_word_lanes: opt.word_lanes,
                blocks_gemv_word_lanes: opt.blocks_word_lanes,
                coop_tiles: opt.coop_tiles.then_some(true),
                blocks_gemv_rows: opt.blocks_rows,
                blocks_gemv_pass_rows: opt.blocks_pass_rows,
                blocks_gemv_unroll: opt.blocks_unroll,
            },
            pipeline_statistics: opt.stats,
            ..Default::default()
        },
        match std::env::var("Q4VK_BENCH_LOG").as_deref() {
            Ok("1") => Logger::new(Some(log_to_stderr), std::ptr::null_mut(), LEVEL_INFO),
            Ok("debug") => Logger::new(Some(log_to_stderr), std::ptr::null_mut(), LEVEL_DEBUG),
            _ => Logger::silent(),
        },
    )
}

/// Runs `q4vk_context_tune`'s tuning on `ctx` within `ms` milliseconds, on the table's
/// shapes (quartered with `--quick`), its m up to 8 and its prefill m (up to four past 8),
/// with the table's cold bytes; prints what it found and returns the blob.
fn tuned(ctx: &Context, opt: &Options, ms: u32) -> Result<Vec<u8>> {
    use q4vk::vk::tune::{tune, TuneOptions};
    let options = TuneOptions {
        budget: std::time::Duration::from_millis(u64::from(ms)),
        shapes: tuning_shapes(opt),
        ms: tuning_ms(opt),
        prefill_ms: tuning_prefill_ms(opt),
        cold_bytes: opt.cold_bytes,
    }
    .checked()?;
    let started = std::time::Instant::now();
    let found = tune(ctx, &options)?;
    let timed: usize = found.simt.iter().map(|g| g.timed).sum();
    let candidates: usize = found.simt.iter().map(|g| g.candidates).sum();
    println!(
        "tuned in {:.1} s ({timed} of {candidates} candidates; long rows: k ≥ {}; many rows: n ≥ {}); SIMT GEMV against row {}'s shapes:",
        started.elapsed().as_secs_f64(),
        q4vk::plan::tuned::LONG_ROWS_FROM_K,
        q4vk::plan::tuned::MANY_ROWS_FROM,
        ctx.rules.row.name,
    );
    for group in q4vk::plan::tuned::SimtGroup::ALL {
        let g = &found.simt[group.index()];
        println!(
            "tuned: SIMT GEMV on {group} {} at {:.3} of the time of the row's ({}; {} shapes timed)",
            g.chosen, g.time_vs_table, g.table, g.timed
        );
    }
    println!(
        "tuned: GEMV on GGUF blocks {} at {:.3} of the time of the row's ({}; {} shapes timed)",
        found.blocks_chosen, found.blocks_time_vs_table, found.blocks_table, found.blocks_timed
    );
    println!(
        "tuned: integer dot-product GEMV {} at {:.3} of the time of the row's ({}; {} shapes timed)",
        found
            .int_dot_chosen
            .map_or("the row's shape".to_string(), |s| s.to_string()),
        found.int_dot_time_vs_table,
        found.int_dot_table,
        found.int_dot_timed
    );
    let gemms = found.gemm.iter().map(|g| ("SIMT GEMM", g));
    let blocks = found.blocks_gemm.iter().map(|g| ("GEMM on GGUF blocks", g));
    for (what, g) in gemms.chain(blocks) {
        let tile = |t: q4vk::plan::GemmTile| format!("({}, {}, {}, {})", t.tx, t.ty, t.rn, t.rm);
        println!(
            "tuned: {what} from m = {} {} at {:.3} of the time of the row's (tile {}; {} tiles timed)",
            g.m,
            g.chosen
                .map_or("the row's tile".to_string(), |t| format!("tile {}", tile(t))),
            g.time_vs_table,
            tile(g.table),
            g.timed
        );
    }
    Ok(found.blob)
}

/// The shapes a tuning run times: the table's (quartered with `--quick`, k then rounded
/// down to a multiple of 128, as tuning takes).
fn tuning_shapes(opt: &Options) -> Vec<(u64, u64)> {
    opt.shapes
        .as_deref()
        .unwrap_or(&SHAPES)
        .iter()
        .map(|&(n, k)| match opt.quick {
            true => ((n as u64 / 4).max(1), (k as u64 / 4 / 128).max(1) * 128),
            false => (n as u64, k as u64),
        })
        .collect()
}

/// The m a tuning run times: the table's up to 8, or 1 and 8 where it has none.
fn tuning_ms(opt: &Options) -> Vec<u32> {
    let ms: Vec<u32> = opt.ms.iter().copied().filter(|&m| m <= 8).collect();
    match ms.is_empty() {
        true => vec![1, 8],
        false => ms,
    }
}

/// The prefill m a tuning run times the SIMT GEMM's tile at: the table's past 8 (the first
/// four).
fn tuning_prefill_ms(opt: &Options) -> Vec<u32> {
    let mut ms: Vec<u32> = opt.ms.iter().copied().filter(|&m| m > 8).collect();
    ms.sort_unstable();
    ms.dedup();
    ms.truncate(4);
    ms
}

/// `--tune-each MS`: tunes the SIMT GEMV's shape on each shape of the table (quartered with
/// `--quick`) and each m up to 8 alone, within MS milliseconds each, and prints the shape
/// chosen for that case's class beside the row's: where the best shape depends on the
/// matrix, one process and context for the whole study.
fn tuned_each(ctx: &Context, opt: &Options, ms: u32) -> Result<()> {
    use q4vk::plan::tuned::SimtGroup;
    use q4vk::vk::tune::{tune, TuneOptions};
    let shape = |s: &q4vk::plan::tuning::SimtGemv| {
        format!(
            "{} / {} / {} / {} / {}",
            s.workgroup, s.rows, s.unroll, s.split, s.word_lanes as u8
        )
    };
    println!(
        "device: {} (tuning row {}: workgroup / rows / unroll / split / word lanes {})",
        ctx.device_name(),
        ctx.rules.row.name,
        shape(&ctx.rules.row.simt_gemv)
    );
    println!("| N × K | m | group | chosen: workgroup / rows / unroll / split / word lanes | time ÷ row's | candidates timed |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for (n, k) in tuning_shapes(opt) {
        for m in tuning_ms(opt) {
            let options = TuneOptions {
                budget: std::time::Duration::from_millis(u64::from(ms)),
                shapes: vec![(n, k)],
                ms: vec![m],
                prefill_ms: Vec::new(),
                cold_bytes: opt.cold_bytes,
            }
            .checked()?;
            let found = tune(ctx, &options)?;
            let group = SimtGroup::of(n as usize, k, m);
            let g = &found.simt[group.index()];
            println!(
                "| {n} × {k} | {m} | {group} | {} | {:.3} | {} of {} |",
                shape(&g.chosen),
                g.time_vs_table,
                g.timed,
                g.candidates
            );
        }
    }
    Ok(())
}

/// Log callback of `Q4VK_BENCH_LOG`: every message up to its level on stderr.
unsafe extern "C" fn log_to_stderr(
    _: *mut std::ffi::c_void,
    _: u32,
    text: *const std::ffi::c_char,
) {
    // SAFETY: q4vk passes a NUL-terminated message.
    eprintln!(
        "q4vk: {}",
        unsafe { std::ffi::CStr::from_ptr(text) }.to_string_lossy()
    );
}

/// A SIMT GEMV shape as the bench's header lines show it.
fn shape_text(t: &q4vk::vk::pipeline::Tuning) -> String {
    format!(
        "workgroup {}, {} rows/workgroup, unroll {}, split {}, word lanes {}",
        t.workgroup, t.rows, t.unroll, t.split, t.word_lanes
    )
}

fn run(opt: &Options) -> Result<()> {
    if opt.sweep {
        return sweep(opt);
    }
    if opt.coop_sweep {
        return coop_sweep(opt);
    }
    let mut ctx = context(opt, opt.tuning, opt.unroll, opt.split, &[])?;
    if opt.load {
        let shapes: Vec<(usize, usize)> = opt
            .shapes
            .as_deref()
            .unwrap_or(&SHAPES)
            .iter()
            .map(|&(n, k)| if opt.quick { (n / 4, k / 4) } else { (n, k) })
            .collect();
        println!("device: {}", ctx.device_name());
        return load::load_table(&ctx, opt, &shapes);
    }
    if let Some(ms) = opt.tune_each {
        return tuned_each(&ctx, opt, ms);
    }
    if let Some(ms) = opt.tune {
        let blob = tuned(&ctx, opt, ms)?;
        ctx = context(opt, opt.tuning, opt.unroll, opt.split, &blob)?;
    }
    if !ctx.device.timestamps {
        return Err(Error::Unsupported(
            "the compute queue has no timestamps".into(),
        ));
    }
    if let Some(shape) = opt.model {
        println!(
            "device: {} (path: {}; tuning row {})",
            ctx.device_name(),
            ctx.kernel_path(),
            ctx.rules.row.name
        );
        model::model_table(&ctx, opt, shape)?;
        if opt.stats {
            print_statistics(&ctx)?;
        }
        return Ok(());
    }
    let mut lines = opt
        .jsonl
        .as_deref()
        .map(|file| jsonl::JsonLines::open(file, &ctx, opt))
        .transpose()?;
    let ceil = ceilings(&ctx, opt)?;
    let copy = ceil.copy;
    let t = ctx.pipelines.tuning;
    println!(
        "device: {} (path: {}; tuning row {}; SIMT kernels{}: {}{})",
        ctx.device_name(),
        ctx.kernel_path(),
        ctx.rules.row.name,
        if ctx.rules.simt_tuned { " (tuned)" } else { "" },
        shape_text(&t),
        match ctx.rules.row.simt_gemv_word_lanes_on_short_rows && !t.word_lanes {
            true => " (on rows shorter than the workgroup's lanes)",
            false => "",
        }
    );
    if let Some(d) = ctx.rules.int_dot_simt {
        println!(
            "integer dot-product GEMV{}: {}",
            if ctx.rules.int_dot_tuned {
                " (tuned)"
            } else {
                ""
            },
            shape_text(&d)
        );
    }
    if let (Some(b), Some(row)) = (ctx.rules.bytes_simt, ctx.rules.row.bytes_gemv) {
        println!(
            "integer dot-product GEMV on x in bytes: long rows {}; short rows, {} or more {} ({} in passes of 8 below k = {}); fewer {}",
            shape_text(&b.long_rows),
            row.many_rows_from,
            shape_text(&b.many_rows),
            shape_text(&b.many_rows_at_8),
            row.many_rows_at_8_below_k,
            shape_text(&b.few_rows)
        );
    }
    if let Some(ty) = opt.block_type {
        let class = q4vk::plan::blocks_gemv::BlocksClass::of(ty);
        let table = &ctx.rules.blocks_gemv;
        let shapes = table.of(class);
        let tuned = ctx.rules.blocks_tuned && class == q4vk::plan::tuned::TUNED_BLOCKS_CLASS;
        println!(
            "GEMV on GGUF {} blocks ({class:?}){}: one pass, fewer than {} rows {}, at least that {}; past one pass {}",
            ty.name(),
            if tuned { " (tuned)" } else { "" },
            table.many_rows_from,
            shapes.few_rows,
            shapes.many_rows,
            shapes.past_one_pass
        );
    }
    for group in q4vk::plan::tuned::SimtGroup::ALL.iter().skip(1) {
        let shape = &ctx.rules.simt_groups[group.index()];
        if shape != ctx.rules.simt() {
            println!("SIMT kernels on {group}: {}", shape_text(shape));
        }
    }
    println!(
        "compute-shader copy (uvec4, read + write): {} GB/s",
        rate(copy)
    );
    let reads: Vec<String> = ceil
        .reads
        .iter()
        .map(|(groups, gbs)| {
            format!(
                "{} GB/s ({:.0}% of copy) at {groups} workgroups",
                rate(*gbs),
                100.0 * gbs / copy
            )
        })
        .collect();
    println!(
        "read-only kernel (uvec4, 4 loads in flight per invocation): {}",
        reads.join(", ")
    );
    let hot: Vec<String> = ceil
        .hot_reads
        .iter()
        .map(|(bytes, us)| {
            format!(
                "{} MiB in {us:.1} µs ({} GB/s)",
                bytes >> 20,
                rate(*bytes as f64 / us / 1e3)
            )
        })
        .collect();
    println!(
        "empty dispatch between timestamps: {:.1} µs; read-only kernel on the same bytes every run (hot): {}",
        ceil.empty_dispatch,
        hot.join(", ")
    );
    if let Some(tflops) = mma_rate(&ctx, opt)? {
        println!(
            "tensor-core MMA rate (16 × 8 × 16 f16 → f32, operands in registers): {tflops:.1} TFLOP/s"
        );
    }
    if let Some([tiles_4x4, tiles_2x8]) = mma_loop_rates(&ctx, opt)? {
        println!(
            "tensor-core GEMM's inner loop without memory traffic (A decoded, B rebuilt from registers, block epilogue): {tiles_4x4:.1} TFLOP/s on 4 × 4 fragments per subgroup, {tiles_2x8:.1} on 2 × 8"
        );
    }
    println!(
        "mode: {}; {}, {} activations; medians of timestamp pairs; m > 8: rel. err of 3 tokens",
        if opt.quick {
            "quick (N/4, K/4)"
        } else {
            "full"
        },
        match (opt.block_type, opt.offsets, opt.zeros) {
            (Some(ty), _, _) => format!("GGUF {} blocks in their native bytes", ty.name()),
            (None, offsets, zeros) => format!(
                "group {}, {}",
                opt.group_size(),
                match (offsets, zeros) {
                    (true, _) => "f32 scales and offsets",
                    (_, true) => "a zero point per group, f16 scales",
                    _ => "symmetric, f16 scales",
                }
            ),
        },
        if opt.x_f16 { "f16" } else { "f32" }
    );
    println!();
    let chain_columns = match opt.chain {
        Some(n) => (
            format!(" chain of {n}: cold µs per call | chain hot µs per call |"),
            " --- | --- |",
        ),
        None => (String::new(), ""),
    };
    println!("| N × K | m | path | cold µs | cold GB/s | % of copy | cold TFLOP/s | hot µs | hot GB/s | naive cold µs | speed-up vs naive | rel. err | copy now GB/s | cold µs per copy: min – max (copies) |{}", chain_columns.0);
    println!(
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |{}",
        chain_columns.1
    );
    let mut seed = 0x9E3779B97F4A7C15u64;
    let probe = Copy::new(&ctx, if opt.quick { 16 << 20 } else { 256 << 20 })?;
    for &(n, k) in opt.shapes.as_deref().unwrap_or(&SHAPES) {
        let (n, k) = if opt.quick { (n / 4, k / 4) } else { (n, k) };
        let (data, offsets) = if opt.offsets {
            let (d, o) = random_offset_matrix(n, k, opt.group_size(), &mut seed);
            (d, Some(o))
        } else if opt.zeros {
            let d = random_matrix_with_zeros(n, k, opt.group_size(), &mut seed);
            (d, None)
        } else {
            (
                random_matrix_grouped(n, k, opt.group_size(), &mut seed),
                None,
            )
        };
        let blocks = opt
            .block_type
            .map(|ty| (ty, random_blocks(ty, n, k, &mut seed)));
        for &m in &opt.ms {
            let weights = match &blocks {
                Some((ty, bytes)) => Weights::Blocks(*ty, n, k, bytes),
                None => Weights::Q4(&data, offsets.as_deref()),
            };
            let rows = bench_shape(&mut ctx, opt, weights, m, &mut seed, &probe)?;
            for r in rows {
                let gbs = |us: f64| r.bytes / us / 1e3;
                // The naive baseline runs at m = 1 only.
                let (naive, speedup) = if r.naive_us.is_nan() {
                    ("—".to_string(), "—".to_string())
                } else {
                    (
                        format!("{:.1}", r.naive_us),
                        format!("{:.1}×", r.naive_us / r.cold_us),
                    )
                };
                println!(
            "| {} × {} | {} | {} | {:.1} | {} | {:.0}% | {:.1} | {:.1} | {} | {} | {} | {:.1e} | {} | {:.1} – {:.1} ({}) |{}",
            r.n,
            r.k,
            r.m,
            path(&ctx, &r),
            r.cold_us,
            rate(gbs(r.cold_us)),
            100.0 * gbs(r.cold_us) / copy,
            2.0 * r.m as f64 * r.n as f64 * r.k as f64 / r.cold_us / 1e6,
            r.hot_us,
            rate(gbs(r.hot_us)),
            naive,
            speedup,
            r.rel_err,
            rate(r.copy_now),
            r.per_copy.iter().copied().fold(f64::INFINITY, f64::min),
            r.per_copy.iter().copied().fold(0.0, f64::max),
            r.per_copy.len(),
            r.chain_us.map_or(String::new(), |(cold, hot)| format!(" {cold:.2} | {hot:.2} |"))
        );
                if let Some(lines) = &mut lines {
                    lines.write(&r, &path(&ctx, &r))?;
                }
            }
        }
    }
    if opt.stats {
        print_statistics(&ctx)?;
    }
    Ok(())
}

/// The compiler statistics of every pipeline the run created, one line per executable.
fn print_statistics(ctx: &Context) -> Result<()> {
    println!();
    println!("pipeline statistics (VK_KHR_pipeline_executable_properties):");
    if ctx.device.statistics.is_none() {
        println!("- not offered by this device");
        return Ok(());
    }
    for (key, executables) in ctx.pipelines.statistics()? {
        for e in executables {
            println!("- {key} [{}]: {}", e.name, e.statistics.join(", "));
        }
    }
    Ok(())
}
