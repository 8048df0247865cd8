//! `q4vk_context_tune`: the SIMT GEMV's workgroup shape, the integer dot-product GEMV's, the
//! SIMT GEMM's tile and the GEMV on GGUF blocks' shape timed on the device in hand
//! (`vk::tune`), into a blob the next context takes (`q4vk_context_desc.tuning_data`).

use super::context::q4vk_context;
use super::panic::guard;
use super::ptr::{
    check_size, handle, in_slice, out_bytes, read_struct, require, write_out, write_prefix,
    VersionedStruct,
};
use super::status::q4vk_status;
use crate::error::{invalid, Result};
use crate::plan::tuned::{SimtGroup, LONG_ROWS_FROM_K, MANY_ROWS_FROM};
use crate::plan::tuned_gemm::MAX_GEMM_MS;
use crate::plan::tuning::SimtGemv;
use crate::plan::GemmTile;
use crate::vk::log::LEVEL_INFO;
use crate::vk::tune::{tune, GemmTunedAt, TuneOptions};
use std::ffi::c_void;
use std::time::Duration;

/// Bytes a tuning blob of this or any later q4vk takes at most: a buffer of this size
/// always holds one.
pub const Q4VK_TUNING_BLOB_MAX_BYTES: usize = 256;

/// What `q4vk_context_tune` times. Initialize with `q4vk_tune_desc_default`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct q4vk_tune_desc {
    /// `sizeof(q4vk_tune_desc)`; smaller than the first version is refused.
    pub struct_size: u32,
    /// Wall-clock budget in milliseconds: no candidate starts past it (a batch of
    /// candidates begun is timed to its end, and the cases are made and freed around the
    /// timings, so a call may take longer). Default 2000; 0 is refused.
    pub budget_ms: u32,
    /// Matrix shapes timed: `shape_count` (n, k) pairs at `shapes`, k a multiple of 128;
    /// 0 (default) = the decoder matrices of 1.5B–3B models (1536 × 1536, 256 × 1536,
    /// 8960 × 1536, 1536 × 8960). At most 64.
    pub shape_count: u32,
    /// Activation rows timed on each shape: `m_count` values (1..8) at `ms`; 0 (default) =
    /// 1 and 8. At most 8.
    pub m_count: u32,
    /// `2 · shape_count` values: n0, k0, n1, k1, …
    pub shapes: *const u64,
    /// `m_count` values.
    pub ms: *const u32,
    /// Bytes of weight copies each shape's calls rotate through, so that each call reads
    /// its weights from memory as in a decode step, not from the last call's cache; 0
    /// (default) = 64 MiB. At most 1 GiB; that much device memory is held during the call.
    pub cold_bytes: u64,
    /// Prefill m (9..2048, distinct) at which the tiles of the SIMT GEMM and of the GEMM on
    /// GGUF blocks are timed on each shape, where the context runs that GEMM there without
    /// a workspace: `prefill_m_count` values (at most 4) at
    /// `prefill_ms`; 0 = none. `q4vk_tune_desc_default` sets one: 64. A call of m tokens
    /// takes the tile chosen at the largest of these at or below its m. x and y of the
    /// largest m on the largest shape are held during the call (set 0 to tune the GEMVs
    /// alone). Like every kernel tuned, a GEMM's tiles are timed only while the budget
    /// allows: nothing runs past it but the batch of candidates already begun.
    pub prefill_m_count: u32,
    /// Always 0.
    pub reserved0: u32,
    /// `prefill_m_count` values.
    pub prefill_ms: *const u32,
}

/// The prefill m `q4vk_tune_desc_default` points `prefill_ms` at.
static DEFAULT_PREFILL_MS: [u32; 1] = TuneOptions::DEFAULT_PREFILL_MS;

// SAFETY: repr(C), starts with u32 struct_size; integers and raw pointers.
unsafe impl VersionedStruct for q4vk_tune_desc {
    const V0_SIZE: usize = std::mem::offset_of!(q4vk_tune_desc, prefill_m_count);
    const NAME: &'static str = "q4vk_tune_desc";
}

/// A tile of the SIMT GEMM (or of the GEMM on GGUF blocks): invocations along rows and along tokens, rows and tokens per
/// invocation (a workgroup computes `row_invocations · rows_per_invocation` rows by
/// `token_invocations · tokens_per_invocation` tokens).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct q4vk_gemm_tile {
    /// Invocations along rows.
    pub row_invocations: u32,
    /// Invocations along tokens.
    pub token_invocations: u32,
    /// Rows per invocation.
    pub rows_per_invocation: u32,
    /// Tokens per invocation.
    pub tokens_per_invocation: u32,
}

impl From<GemmTile> for q4vk_gemm_tile {
    fn from(t: GemmTile) -> q4vk_gemm_tile {
        q4vk_gemm_tile {
            row_invocations: t.tx,
            token_invocations: t.ty,
            rows_per_invocation: t.rn,
            tokens_per_invocation: t.rm,
        }
    }
}

/// What `q4vk_context_tune` found for the tile of the SIMT GEMM or of the GEMM on GGUF
/// blocks at one prefill m.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct q4vk_tuned_gemm {
    /// The prefill m timed.
    pub m: u32,
    /// Tiles timed on every shape that runs that GEMM at `m` (the baseline included).
    pub candidates_timed: u32,
    /// The tile calls from `m` take: the chosen one, or `table_tile` where it was kept.
    pub tile: q4vk_gemm_tile,
    /// The device row's tile at `m`, where the candidates start (the baseline is the row's
    /// rules, which take a smaller tile on matrices this one would leave the GPU idle on).
    pub table_tile: q4vk_gemm_tile,
    /// As `time_vs_table`, of `tile` over the shapes timed at `m`.
    pub time_vs_table: f64,
}

impl From<&GemmTunedAt> for q4vk_tuned_gemm {
    fn from(g: &GemmTunedAt) -> q4vk_tuned_gemm {
        q4vk_tuned_gemm {
            m: g.m,
            candidates_timed: g.timed as u32,
            tile: g.chosen.unwrap_or(g.table).into(),
            table_tile: g.table.into(),
            time_vs_table: g.time_vs_table,
        }
    }
}

/// A SIMT GEMV workgroup shape, as `q4vk_tune_info.workgroup` … `word_lanes` describe one.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct q4vk_simt_gemv_shape {
    /// Invocations per workgroup.
    pub workgroup: u32,
    /// Rows per workgroup.
    pub rows: u32,
    /// Chunks per row each invocation loads per step.
    pub unroll: u32,
    /// Invocations sharing a chunk.
    pub split: u32,
    /// 1 where the GEMV steps over words of codes instead of 16-byte chunks on every
    /// matrix of its class, else 0 (as `q4vk_tune_info.word_lanes`).
    pub word_lanes: u32,
    /// Always 0.
    pub reserved: u32,
}

impl From<SimtGemv> for q4vk_simt_gemv_shape {
    fn from(s: SimtGemv) -> q4vk_simt_gemv_shape {
        q4vk_simt_gemv_shape {
            workgroup: s.workgroup,
            rows: s.rows,
            unroll: s.unroll,
            split: s.split,
            word_lanes: s.word_lanes.into(),
            reserved: 0,
        }
    }
}

/// What `q4vk_context_tune` found for the SIMT GEMV's shape on one group of calls.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct q4vk_tuned_simt_gemv {
    /// 1: the group's matrices have long rows (k of at least
    /// `q4vk_tune_info.long_rows_from_k`); 0: short rows.
    pub long_rows: u32,
    /// 1: the group's matrices have many rows (at least `q4vk_tune_info.many_rows_from`);
    /// 0: few.
    pub many_rows: u32,
    /// 1: the group's calls have one activation row (decode); 0: more.
    pub decode: u32,
    /// Shapes timed on every call of the group, the table's included (0 where the desc's
    /// shapes and m gave the group no call).
    pub candidates_timed: u32,
    /// The shape calls of the group take: the chosen one, or `table_shape` where it was
    /// kept.
    pub shape: q4vk_simt_gemv_shape,
    /// The device row's shape for the group's row length (the baseline).
    pub table_shape: q4vk_simt_gemv_shape,
    /// As `q4vk_tune_info.time_vs_table`, of `shape` over the group's calls.
    pub time_vs_table: f64,
}

/// What `q4vk_context_tune` found. The caller sets `struct_size = sizeof(q4vk_tune_info)`;
/// q4vk writes the other fields.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct q4vk_tune_info {
    /// Set by the caller: `sizeof(q4vk_tune_info)`.
    pub struct_size: u32,
    /// SIMT GEMV shapes timed on every call of their group, summed over the groups
    /// (`simt_groups`), the table's counted in each group that has calls.
    pub candidates_timed: u32,
    /// Candidate SIMT GEMV shapes the device can run, summed over the groups that have
    /// calls as `candidates_timed`.
    pub candidates: u32,
    /// The chosen SIMT GEMV shape for calls of 2 or more activation rows on matrices of
    /// short rows (k below `long_rows_from_k`) and few rows (below `many_rows_from`):
    /// invocations per workgroup, rows per workgroup, chunks per row each invocation loads
    /// per step, invocations sharing a chunk. The other groups of calls, tuned apart, are
    /// in `simt_groups`.
    pub workgroup: u32,
    /// See `workgroup`.
    pub rows: u32,
    /// See `workgroup`.
    pub unroll: u32,
    /// See `workgroup`.
    pub split: u32,
    /// The device row's shape for matrices of short rows (the baseline of the chosen
    /// shape), in the same order.
    pub table_workgroup: u32,
    /// See `table_workgroup`.
    pub table_rows: u32,
    /// See `table_workgroup`.
    pub table_unroll: u32,
    /// See `table_workgroup`.
    pub table_split: u32,
    /// The chosen shape's time against the table's, geometric mean over the timed calls of
    /// its group (1 where the table's shape was kept or no such call was timed).
    pub time_vs_table: f64,
    /// 1 where the chosen shape's SIMT GEMV (f32 and integer dot products) steps over words
    /// of codes (8 weights) instead of 16-byte chunks on every matrix of its class, else 0
    /// (the device row may still step over words on rows shorter than the workgroup's
    /// lanes: `q4vk_gemv_plan` tells per matrix).
    pub word_lanes: u32,
    /// The same of the device row's shape.
    pub table_word_lanes: u32,
    /// Matrices of at least this many columns (k) are of long rows: they take the
    /// `long_rows_*` shape, tuned on the cases of such k (the table's where none was).
    pub long_rows_from_k: u32,
    /// The chosen shape for calls of 2 or more rows on matrices of long rows and few rows,
    /// as `workgroup`.
    pub long_rows_workgroup: u32,
    /// See `long_rows_workgroup`.
    pub long_rows_rows: u32,
    /// See `long_rows_workgroup`.
    pub long_rows_unroll: u32,
    /// See `long_rows_workgroup`.
    pub long_rows_split: u32,
    /// As `word_lanes`, of the shape for long rows.
    pub long_rows_word_lanes: u32,
    /// As `time_vs_table`, of the long rows' shape.
    pub long_rows_time_vs_table: f64,
    /// The device row's shape for matrices of long rows (the baseline of `long_rows_*`; the
    /// `table_*` fields hold its shape for short rows), as `workgroup`.
    pub long_rows_table_workgroup: u32,
    /// See `long_rows_table_workgroup`.
    pub long_rows_table_rows: u32,
    /// See `long_rows_table_workgroup`.
    pub long_rows_table_unroll: u32,
    /// See `long_rows_table_workgroup`.
    pub long_rows_table_split: u32,
    /// As `word_lanes`, of the device row's shape for long rows.
    pub long_rows_table_word_lanes: u32,
    /// Always 0.
    pub reserved0: u32,
    /// Optional (appended after `reserved0`; callers with the shorter struct do not get
    /// them): the chosen shape of the GEMV on GGUF blocks for calls on x of up to 4 rows on
    /// the types with packed scales (Q4_K, Q5_K; the other types keep the device row's):
    /// rows per workgroup, then pieces of 32 weights each invocation loads per step (1 with
    /// `blocks_word_lanes`). Timed on Q4_K matrices of the shapes whose k is a multiple of
    /// 256, at the m of up to 4; the device row's where none was faster or no such case was
    /// timed.
    pub blocks_rows: u32,
    /// See `blocks_rows`.
    pub blocks_unroll: u32,
    /// The device row's shape of the GEMV on GGUF blocks on those types (the baseline; it
    /// strides over pieces), as `blocks_rows`.
    pub blocks_table_rows: u32,
    /// See `blocks_table_rows`.
    pub blocks_table_unroll: u32,
    /// Shapes of the GEMV on GGUF blocks timed on every case on blocks (0 where none was).
    pub blocks_candidates_timed: u32,
    /// 1 where the chosen shape of the GEMV on GGUF blocks strides over quarters of pieces
    /// (8 weights per invocation and step, neighbouring invocations reading neighbouring x)
    /// instead of pieces, else 0.
    pub blocks_word_lanes: u32,
    /// As `time_vs_table`, of the GEMV on GGUF blocks over its cases.
    pub blocks_time_vs_table: f64,
    /// Optional (appended after `blocks_time_vs_table`): the chosen shape of the integer
    /// dot-product GEMV on x in digits, for matrices of every row length, as `workgroup`
    /// (with `int_dot_word_lanes`); the `int_dot_table_*` shape where none was faster or
    /// none of the cases ran that GEMV. Timed, its digits pre-pass included, on the calls
    /// of the shapes and m where the context runs it (none where it does not:
    /// `Q4VK_CONTEXT_NO_INTDOT`, or a device without packed 8-bit dot products).
    pub int_dot_workgroup: u32,
    /// See `int_dot_workgroup`.
    pub int_dot_rows: u32,
    /// See `int_dot_workgroup`.
    pub int_dot_unroll: u32,
    /// See `int_dot_workgroup`.
    pub int_dot_split: u32,
    /// As `word_lanes`, of the integer dot-product GEMV's chosen shape.
    pub int_dot_word_lanes: u32,
    /// The device row's shape of the integer dot-product GEMV (the baseline), as
    /// `workgroup`; where the row gives it none, its f32 shape for short rows (the GEMV then
    /// takes the f32 shape of each matrix's class, and that is the baseline).
    pub int_dot_table_workgroup: u32,
    /// See `int_dot_table_workgroup`.
    pub int_dot_table_rows: u32,
    /// See `int_dot_table_workgroup`.
    pub int_dot_table_unroll: u32,
    /// See `int_dot_table_workgroup`.
    pub int_dot_table_split: u32,
    /// As `word_lanes`, of `int_dot_table_*`.
    pub int_dot_table_word_lanes: u32,
    /// Shapes of the integer dot-product GEMV timed on every call that runs it (the
    /// baseline included; 0 where none was).
    pub int_dot_candidates_timed: u32,
    /// Always 0.
    pub reserved1: u32,
    /// As `time_vs_table`, of the integer dot-product GEMV over its calls.
    pub int_dot_time_vs_table: f64,
    /// Entries of `gemm` written: the prefill m at which some shape ran the SIMT GEMM (0
    /// where none did: no prefill m asked, or the context runs another GEMM there, such
    /// as the tensor-core one).
    pub gemm_count: u32,
    /// Always 0.
    pub reserved2: u32,
    /// The SIMT GEMM's tile per prefill m timed, ascending m; entries past `gemm_count`
    /// are zero.
    pub gemm: [q4vk_tuned_gemm; 4],
    /// Entries of `blocks_gemm` written: the prefill m at which some shape whose k is a
    /// multiple of 256 ran the GEMM on GGUF blocks (timed on Q4_K blocks; 0 where none did,
    /// as `gemm_count`).
    pub blocks_gemm_count: u32,
    /// Always 0.
    pub reserved3: u32,
    /// The GEMM on GGUF blocks' tile per prefill m timed, as `gemm`.
    pub blocks_gemm: [q4vk_tuned_gemm; 4],
    /// Optional (appended after `blocks_gemm`): matrices of at least this many rows are of
    /// many rows (a tuning group's class, as `long_rows_from_k`).
    pub many_rows_from: u32,
    /// Entries of `simt_groups`: 8.
    pub simt_group_count: u32,
    /// The SIMT GEMV's shape per group of calls, each tuned apart on its calls: matrices
    /// of short or long rows, of few or many rows, calls of one activation row or of more.
    /// The fields from `workgroup` on report the two groups of few rows at m > 1 again.
    pub simt_groups: [q4vk_tuned_simt_gemv; 8],
}

const _: () = assert!(MAX_GEMM_MS == 4);

// SAFETY: repr(C), starts with u32 struct_size; integers and a double.
unsafe impl VersionedStruct for q4vk_tune_info {
    const V0_SIZE: usize = std::mem::offset_of!(q4vk_tune_info, word_lanes);
    const NAME: &'static str = "q4vk_tune_info";
}

/// Fills `desc` with the defaults: 2000 ms, the default shapes and m, 64 MiB of copies, the
/// SIMT GEMM's tile timed at m = 64. NULL is ignored.
///
/// # Safety
/// `desc` must be NULL or point to a writable `q4vk_tune_desc`.
#[no_mangle]
pub unsafe extern "C" fn q4vk_tune_desc_default(desc: *mut q4vk_tune_desc) {
    let value = q4vk_tune_desc {
        struct_size: std::mem::size_of::<q4vk_tune_desc>() as u32,
        budget_ms: 2000,
        shape_count: 0,
        m_count: 0,
        shapes: std::ptr::null(),
        ms: std::ptr::null(),
        cold_bytes: 0,
        prefill_m_count: DEFAULT_PREFILL_MS.len() as u32,
        reserved0: 0,
        prefill_ms: DEFAULT_PREFILL_MS.as_ptr(),
    };
    let _ = guard("q4vk_tune_desc_default", || {
        // SAFETY: `desc` is NULL (skipped) or writable (caller's contract).
        unsafe { write_out(desc, value, "desc") }.or(Ok(()))
    });
}

/// The options `d` asks for.
///
/// # Safety
/// `d.shapes`, `d.ms` and `d.prefill_ms` readable for their counts where the counts are
/// not 0.
unsafe fn options(d: &q4vk_tune_desc) -> Result<TuneOptions> {
    let shapes = match d.shape_count {
        0 => TuneOptions::DEFAULT_SHAPES.to_vec(),
        count => {
            let values = (count as usize).checked_mul(2).ok_or_else(|| {
                invalid!("desc->shape_count is {count}: past this platform's size_t")
            })?;
            // SAFETY: `2 · shape_count` readable values (contract).
            unsafe { in_slice(d.shapes, values, "desc->shapes") }?
                .chunks_exact(2)
                .map(|p| (p[0], p[1]))
                .collect()
        }
    };
    let ms = match d.m_count {
        0 => TuneOptions::DEFAULT_MS.to_vec(),
        // SAFETY: `m_count` readable values (contract).
        count => unsafe { in_slice(d.ms, count as usize, "desc->ms") }?.to_vec(),
    };
    let prefill_ms = match d.prefill_m_count {
        0 => Vec::new(),
        count if count as usize > MAX_GEMM_MS => {
            return Err(crate::error::invalid!(
                "desc->prefill_m_count is {count}; at most {MAX_GEMM_MS}"
            ))
        }
        // SAFETY: `prefill_m_count` readable values (contract).
        count => unsafe { in_slice(d.prefill_ms, count as usize, "desc->prefill_ms") }?.to_vec(),
    };
    TuneOptions {
        budget: Duration::from_millis(u64::from(d.budget_ms)),
        shapes,
        ms,
        prefill_ms,
        cold_bytes: match d.cold_bytes {
            0 => TuneOptions::DEFAULT_COLD_BYTES,
            b => b,
        },
    }
    .checked()
}

/// Times the SIMT GEMV's workgroup shapes on `ctx`'s device — the device row's neighbours,
/// nearest first, as long as `desc->budget_ms` allows, each against the row's shape in the
/// same submission — on the shapes and m of `desc`, each call reading its weights cold, and
/// writes the fastest for each group of calls (matrices of short rows or of long rows, k of
/// at least `q4vk_tune_info.long_rows_from_k`; of few rows or of many, at least
/// `q4vk_tune_info.many_rows_from`; calls of m = 1 or of more rows), scored on that
/// group's calls (the row's unless another was faster by more than timing noise, or
/// no call is of that group); then, where the context runs the integer
/// dot-product GEMV (x in 8-bit digits) on some of those calls given a workspace, its one
/// shape for every row length the same way on them, its digits pre-pass timed with it;
/// then, at each prefill m of `desc` where the context runs the SIMT GEMM on some shape
/// (prefill without tensor cores), that GEMM's tile the same way (the device row's tile
/// at that m the baseline, its neighbours the candidates); then, where a shape's k is a multiple of 256 and
/// an m is at most 4, the one-pass shape of the GEMV on GGUF blocks with packed scales
/// (Q4_K, Q5_K; rows per workgroup, pieces per step) the same way on Q4_K matrices of those
/// shapes; then, at the prefill m
/// where the context runs the SIMT GEMM on GGUF blocks on such shapes, its tile the same
/// way on Q4_K matrices. The kernels tuned share the budget equally, in that order; all go as a blob into `blob`. Store the blob beside
/// the pipeline cache and give it back in `q4vk_context_desc.tuning_data`: the next context
/// on the same device, driver and q4vk version uses those shapes and tiles for its SIMT
/// kernels; this context keeps its own. `*blob_written` gets the blob's length, `*info` (optional,
/// NULL to skip) what was found. The SIMT GEMVs are the kernels of GPUs without tensor cores
/// (and of act-order matrices on those with them); the call holds `desc->cold_bytes` of
/// device memory while it runs and submits to the context's queue. On a device without
/// `VK_KHR_push_descriptor` its GEMVs take sets from the ring of `q4vk_cmd_gemv`
/// (`Q4VK_CMD_GEMV_SET_RING`, thousands of them): no command buffer recorded with
/// `q4vk_cmd_gemv` or `q4vk_cmd_gemv_multi` on this context may be pending or be submitted
/// afterwards (bindings have their own sets).
///
/// Statuses: `NULL_POINTER` (ctx, desc, blob, blob_written, the desc's arrays),
/// `INVALID_ARGUMENT` (struct sizes, a budget of 0, shapes, m or prefill m out of range),
/// `BUFFER_TOO_SMALL` (`blob_capacity`
/// below `Q4VK_TUNING_BLOB_MAX_BYTES`; checked before anything runs), `UNSUPPORTED` (a CPU
/// context, the portable kernels, an adopted device without a queue),
/// `OUT_OF_DEVICE_MEMORY`, `VULKAN`, `DEVICE_LOST`. Nothing is written on failure.
///
/// # Safety
/// `ctx` NULL or live; `desc` NULL or readable for its `struct_size` with its arrays;
/// `blob` NULL or writable for `blob_capacity` bytes; `blob_written` NULL or writable;
/// `info` NULL or writable for its `struct_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn q4vk_context_tune(
    ctx: *mut q4vk_context,
    desc: *const q4vk_tune_desc,
    blob: *mut c_void,
    blob_capacity: usize,
    blob_written: *mut usize,
    info: *mut q4vk_tune_info,
) -> q4vk_status {
    guard("q4vk_context_tune", || {
        // SAFETY: NULL or a live context (contract).
        let c = unsafe { handle(ctx.cast_const(), "ctx") }?;
        // SAFETY: NULL or readable for its `struct_size` (contract).
        let d = unsafe { read_struct(desc, "desc") }?;
        require(blob, "blob")?;
        require(blob_written, "blob_written")?;
        let declared_info = match info.is_null() {
            true => None,
            // SAFETY: readable for its `struct_size` (contract).
            false => Some(unsafe { read_struct(info.cast_const(), "info") }?),
        };
        check_size("blob_capacity", blob_capacity, Q4VK_TUNING_BLOB_MAX_BYTES)?;
        // SAFETY: the arrays of `d` (contract).
        let opts = unsafe { options(&d) }?;
        let vk_ctx = c.backend.vulkan("q4vk_context_tune")?;
        let found = tune(vk_ctx, &opts)?;
        let group = |long_rows| {
            let group = SimtGroup {
                long_rows,
                many_rows: false,
                decode: false,
            };
            found.simt[group.index()]
        };
        let (short, long) = (group(false), group(true));
        let (s, t, l, lt) = (short.chosen, short.table, long.chosen, long.table);
        let simt = SimtGroup::ALL
            .iter()
            .map(|g| {
                let f = &found.simt[g.index()];
                format!(
                    "on {g} {} ({:.3} of the table's time)",
                    f.chosen, f.time_vs_table
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        let timed: usize = found.simt.iter().map(|g| g.timed).sum();
        let candidates: usize = found.simt.iter().map(|g| g.candidates).sum();
        vk_ctx.logger.log(
            LEVEL_INFO,
            &format!(
                "tuned: SIMT GEMV {simt}; {timed} of {candidates} candidates timed; GEMV on GGUF blocks {} ({:.3}; {} shapes timed); integer dot-product GEMV {} ({:.3}; {} shapes timed)",
                found.blocks_chosen,
                found.blocks_time_vs_table,
                found.blocks_timed,
                found.int_dot_chosen.map_or("the table's".to_string(), |s| s.to_string()),
                found.int_dot_time_vs_table,
                found.int_dot_timed
            ),
        );
        let gemms = found.gemm.iter().map(|g| ("SIMT GEMM", g));
        let blocks = found.blocks_gemm.iter().map(|g| ("GEMM on GGUF blocks", g));
        for (what, g) in gemms.chain(blocks) {
            let tile = |t: GemmTile| format!("({}, {}, {}, {})", t.tx, t.ty, t.rn, t.rm);
            vk_ctx.logger.log(
                LEVEL_INFO,
                &format!(
                    "tuned: {what} from m = {} {} ({:.3} of the table's time; {} tiles timed; the table's {})",
                    g.m,
                    g.chosen.map_or("the table's tile".to_string(), |t| format!("tile {}", tile(t))),
                    g.time_vs_table,
                    g.timed,
                    tile(g.table)
                ),
            );
        }
        if let Some(declared) = declared_info {
            let it = found.int_dot_table;
            let i = found.int_dot_chosen.unwrap_or(it);
            let out = q4vk_tune_info {
                struct_size: declared.struct_size,
                candidates_timed: timed as u32,
                candidates: candidates as u32,
                workgroup: s.workgroup,
                rows: s.rows,
                unroll: s.unroll,
                split: s.split,
                table_workgroup: t.workgroup,
                table_rows: t.rows,
                table_unroll: t.unroll,
                table_split: t.split,
                time_vs_table: short.time_vs_table,
                word_lanes: s.word_lanes.into(),
                table_word_lanes: t.word_lanes.into(),
                long_rows_from_k: LONG_ROWS_FROM_K as u32,
                long_rows_workgroup: l.workgroup,
                long_rows_rows: l.rows,
                long_rows_unroll: l.unroll,
                long_rows_split: l.split,
                long_rows_word_lanes: l.word_lanes.into(),
                long_rows_time_vs_table: long.time_vs_table,
                long_rows_table_workgroup: lt.workgroup,
                long_rows_table_rows: lt.rows,
                long_rows_table_unroll: lt.unroll,
                long_rows_table_split: lt.split,
                long_rows_table_word_lanes: lt.word_lanes.into(),
                reserved0: 0,
                blocks_rows: found.blocks_chosen.rows,
                blocks_unroll: found.blocks_chosen.unroll,
                blocks_table_rows: found.blocks_table.rows,
                blocks_table_unroll: found.blocks_table.unroll,
                blocks_candidates_timed: found.blocks_timed as u32,
                blocks_word_lanes: found.blocks_chosen.word_lanes.into(),
                blocks_time_vs_table: found.blocks_time_vs_table,
                int_dot_workgroup: i.workgroup,
                int_dot_rows: i.rows,
                int_dot_unroll: i.unroll,
                int_dot_split: i.split,
                int_dot_word_lanes: i.word_lanes.into(),
                int_dot_table_workgroup: it.workgroup,
                int_dot_table_rows: it.rows,
                int_dot_table_unroll: it.unroll,
                int_dot_table_split: it.split,
                int_dot_table_word_lanes: it.word_lanes.into(),
                int_dot_candidates_timed: found.int_dot_timed as u32,
                reserved1: 0,
                int_dot_time_vs_table: found.int_dot_time_vs_table,
                gemm_count: found.gemm.len() as u32,
                reserved2: 0,
                gemm: std::array::from_fn(|i| {
                    found.gemm.get(i).map(Into::into).unwrap_or_default()
                }),
                blocks_gemm_count: found.blocks_gemm.len() as u32,
                reserved3: 0,
                blocks_gemm: std::array::from_fn(|i| {
                    found.blocks_gemm.get(i).map(Into::into).unwrap_or_default()
                }),
                many_rows_from: MANY_ROWS_FROM as u32,
                simt_group_count: SimtGroup::ALL.len() as u32,
                simt_groups: SimtGroup::ALL.map(|g| {
                    let f = &found.simt[g.index()];
                    q4vk_tuned_simt_gemv {
                        long_rows: g.long_rows.into(),
                        many_rows: g.many_rows.into(),
                        decode: g.decode.into(),
                        candidates_timed: f.timed as u32,
                        shape: f.chosen.into(),
                        table_shape: f.table.into(),
                        time_vs_table: f.time_vs_table,
                    }
                }),
            };
            // SAFETY: writable for its `struct_size` (contract).
            unsafe { write_prefix(info, &out, declared.struct_size as usize, "info") }?;
        }
        // SAFETY: writable for `blob_capacity` ≥ the blob's length (contract).
        unsafe { out_bytes(blob.cast(), found.blob.len(), "blob") }?.copy_from_slice(&found.blob);
        // SAFETY: writable (contract; checked non-NULL).
        unsafe { write_out(blob_written, found.blob.len(), "blob_written") }
    })
}
