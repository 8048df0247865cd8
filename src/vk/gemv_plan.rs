//! Which kernel a GEMV call runs, and with which pipeline and shape: the GEMV kernels or a
//! GEMM (`runs_gemm`), the tensor-core or SIMT layout's, the integer dot-product GEMV on x in
//! digits or the tensor-core GEMM on x in fragments (each behind a pre-pass into a
//! workspace, `prepass_plan`), and the workspace a call can use (`workspace_bytes`).

use super::context::Context;
use super::coop_tiles::{blocks_tiles_key, runs_blocks_tiles, runs_tiles, tiles_key};
use super::matrix::DeviceMatrix;
use super::matrix_form::MatrixForm;
use super::params::{BufferRange, GemvParams, MAX_M};
use super::pipeline::{
    BlocksFragKey, BlocksGemmKey, BlocksKey, BlocksTilesKey, CoopGemmKey, CoopKey, DigitsKey,
    FragmentsKey, GemmKey, PipelineKey, Pipelines, Push, SlicesKey, TilesKey, Tuning, BLOCKS_MAX_M,
    DIGITS_WORKGROUP,
};
use super::rules::Rules;
use super::x_fragments::FragmentGeometry;
use crate::error::{Error, Result};
use crate::layout::blocks::BlocksLayout;
use crate::plan::blocks_gemv::BlocksClass;
use crate::plan::tuned::TUNED_BLOCKS_CLASS;
use crate::plan::{CoopGemmTuning, DeviceClass, GemmTile, GEMM_TILE};
use ash::vk;
use std::fmt;

/// How a GEMV of `mat` runs on `ctx`: the pipeline (created on first use), rows and
/// activation rows per workgroup and the push block's per-matrix fields.
pub(super) struct Plan {
    pub(super) pipeline: vk::Pipeline,
    pub(super) rows_per_wg: u64,
    /// Activation rows per workgroup (the GEMV kernels take all of a pass at once).
    pub(super) tokens_per_wg: u64,
    /// The SIMT GEMVs only: they run in passes of `tokens_per_wg` activation rows (the full
    /// passes one dispatch per matrix part, workgroup z taking a pass; all read the same
    /// weights), the last, of the rows left, with this pipeline. `None`: one pass of all m.
    pub(super) last_pass_pipeline: Option<vk::Pipeline>,
    /// The tensor-core GEMM on x in fragments only: it runs in K slices, added into y
    /// after it. `None`: it writes y itself.
    pub(super) k_slices: Option<KSlices>,
    pub(super) chunks: usize,
    pub(super) groups: usize,
    pub(super) group_shift: u32,
}

/// The tensor-core GEMM in K slices (`shaders/gemm_q4_coop.comp`): `count` workgroups
/// along z per tile, each summing a contiguous range of K into the workspace from
/// `partials_word` on, and the pipeline of `shaders/gemm_slices.comp` that adds them into y.
#[derive(Debug, Clone, Copy)]
pub(super) struct KSlices {
    pub(super) count: u32,
    pub(super) partials_word: u32,
    pub(super) sum_pipeline: vk::Pipeline,
}

/// Whether a call with `m` activation rows on `form` runs a GEMM kernel on x itself (no
/// workspace; [`decide`] answers for any call), from `Overrides::gemm_from_m` when
/// set, else:
/// - on the tensor-core layout for m > [`MAX_M`] (its GEMV takes at most [`MAX_M`] rows,
///   whatever the setting), and at m = 8 for tall matrices where the device's row says
///   (`DeviceTuning::coop_gemm_at_8`);
/// - on the SIMT layout for m > [`simt_gemv_up_to`] (up to it the GEMV runs in passes of
///   [`MAX_M`] rows).
pub fn runs_gemm(r: &Rules, form: &MatrixForm, m: u32) -> bool {
    if form.coop.is_some() && m > MAX_M {
        return true;
    }
    if let Some(from) = r.overrides().gemm_from_m {
        return m >= from;
    }
    match form.coop {
        Some(_) => r
            .row
            .coop_gemm_at_8
            .is_some_and(|(rows, k)| m == MAX_M && form.shape.n >= rows && form.shape.k <= k),
        None => m > simt_gemv_up_to(r),
    }
}

/// The largest m at which SIMT matrices run the f32 GEMV on x itself by default, in passes
/// of [`MAX_M`] activation rows (each reads the weights again and costs about what the GEMV
/// costs at its m): the device's row (`DeviceTuning::simt_gemv_up_to`); the SIMT GEMM
/// beyond.
pub fn simt_gemv_up_to(r: &Rules) -> u32 {
    r.row.simt_gemv_up_to
}

/// The largest m at which the integer dot-product GEMV (on x in digits, with a workspace)
/// runs by default on an `n` × `k` matrix, in passes of [`MAX_M`] rows, the SIMT GEMM
/// beyond: the device's row (`DeviceTuning::int_dot`), further on matrices with few rows
/// and a long K, where the GEMM's tiles leave few workgroups.
pub fn int_dot_gemv_up_to(r: &Rules, n: usize, k: usize) -> u32 {
    let reach = &r.row.int_dot;
    match n <= reach.few_rows && k >= reach.long_k {
        true => reach.up_to_long_k,
        false => reach.up_to,
    }
}

/// Whether a call with `p` on `form` that has a workspace runs the tensor-core GEMM on x in
/// fragments: wherever [`runs_gemm`] says so, and on every tensor-core matrix from the m the
/// device's row gives (`DeviceTuning::fragments_from_m`) up to m = 8. Without the pre-pass the GEMM is slower there, so
/// calls without a workspace keep [`runs_gemm`]'s rule.
fn runs_gemm_on_fragments(r: &Rules, form: &MatrixForm, p: &GemvParams) -> bool {
    let from_m = |n, k, f16| r.row.fragments_from_m.for_matrix(n, k, f16);
    runs_gemm(r, form, p.m)
        || (r.overrides().gemm_from_m.is_none()
            && form.coop.is_some()
            && (from_m(form.shape.n, form.shape.k, p.x_f16)..=MAX_M).contains(&p.m))
}

/// (row tiles per subgroup, subgroups per workgroup) of the tensor-core GEMV that a call
/// with `p` on `form` runs where it runs no GEMM: the caller's fixed one (`Overrides`), else
/// [`super::coop_shapes::choose_shape`]'s; `None` for SIMT matrices.
pub fn coop_gemv_shape(r: &Rules, form: &MatrixForm, p: &GemvParams) -> Option<(u32, u32)> {
    let c = form.coop.as_ref()?;
    let info = &r.class;
    Some(r.overrides().coop_gemv.unwrap_or_else(|| {
        super::coop_shapes::choose_shape(
            form.shape.n,
            c.stages,
            p.m,
            c.block,
            info.max_shared,
            info.sm_count,
        )
    }))
}

/// Whether a call with `m` activation rows on `form` runs the integer dot-product GEMV
/// (`vk::int_dot`) when given a workspace: SIMT matrices on contexts that use it, up to
/// m = [`int_dot_gemv_up_to`] (below `Overrides::gemm_from_m` when set), past m = 8 in
/// passes of 8 rows, where x in digits pays on the matrix (the device row's
/// `IntDotReach::pays`; everywhere on contexts that force it).
pub fn runs_int_dot(r: &Rules, form: &MatrixForm, m: u32) -> bool {
    runs_int_dot_on(r, form, m, false)
}

/// [`runs_int_dot`] on x in exact digits, or with `bytes` on x rounded to bytes
/// (`Q4VK_GEMV_ROUND_X_TO_INT8`), which pays where the device row's
/// `IntDotReach::bytes_pay` says.
fn runs_int_dot_on(r: &Rules, form: &MatrixForm, m: u32, bytes: bool) -> bool {
    let fits = || digits_fit(r, form, m, bytes);
    let up_to = match r.overrides().gemm_from_m {
        Some(from) => from.saturating_sub(1),
        None => int_dot_gemv_up_to(r, form.shape.n, form.shape.k),
    };
    // Against the f32 GEMV (up to its reach) the row's rule; against the SIMT GEMM beyond,
    // the reach alone.
    let (n, k) = (form.shape.n, form.shape.k);
    let pays = r.int_dot_everywhere
        || m > r.row.simt_gemv_up_to
        || match bytes {
            true => r.row.int_dot.bytes_pay(n, k, m),
            false => r.row.int_dot.pays(n, k, m),
        };
    r.int_dot && form.coop.is_none() && m <= up_to && pays && fits()
}

/// Whether the digits pre-pass of `m` rows of x for `form` (`bytes`: rounded to bytes)
/// fits the device: its grid (a workgroup per 32 chunks, one row of workgroups per x row)
/// and the digits within `maxStorageBufferRange`.
fn digits_fit(r: &Rules, form: &MatrixForm, m: u32, bytes: bool) -> bool {
    let [max_x, max_y] = r.class.max_groups.map(u64::from);
    (form.shape.k.div_ceil(32) as u64).div_ceil(DIGITS_CHUNKS_PER_WG) <= max_x
        && u64::from(m) <= max_y
        && digits_bytes(form, m, bytes) <= r.class.max_storage_range
}

/// Whether a call with `p` on `form` given a workspace runs the integer dot-product GEMV:
/// `Some(true)` on x rounded to bytes (where `p` allows it and that pays), `Some(false)` on
/// x in exact digits, `None` for neither.
fn int_dot_x(r: &Rules, form: &MatrixForm, p: &GemvParams) -> Option<bool> {
    if p.x_round_int8 && runs_int_dot_on(r, form, p.m, true) {
        return Some(true);
    }
    runs_int_dot(r, form, p.m).then_some(false)
}

/// Chunks of 32 columns per workgroup of the digits pre-pass (four invocations each).
const DIGITS_CHUNKS_PER_WG: u64 = DIGITS_WORKGROUP as u64 / 4;

/// Bytes of `m` rows of x in digits (`bytes`: rounded to bytes) for `form`.
fn digits_bytes(form: &MatrixForm, m: u32, bytes: bool) -> u64 {
    16 * u64::from(m) * super::int_dot::row_vectors_of(form.shape.k, bytes) as u64
}

/// The tensor-core GEMM's shape for a call with `p` on `form` (`x_fragments`: on x in fragments,
/// `slices`: in K slices where the rules run them), `None` where the call runs another
/// kernel: the shape the caller fixes (`Overrides`), else the rules' (`vk::coop_shapes`) with as many K groups
/// as the shared memory holds.
fn coop_gemm_key(
    r: &Rules,
    form: &MatrixForm,
    p: &GemvParams,
    x_fragments: bool,
    slices: bool,
) -> Option<CoopGemmKey> {
    let c = form.coop.as_ref().filter(|_| match x_fragments {
        true => runs_gemm_on_fragments(r, form, p),
        false => runs_gemm(r, form, p.m),
    })?;
    // Rounded f32 x runs as f16 x (one column per token) whose blocks carry factors.
    let rounded = x_fragments && rounds_x(p);
    let shape = r.overrides().coop_gemm.unwrap_or_else(|| {
        let (n, k) = (form.shape.n, form.shape.k);
        let (t, s, m, kg, g) = match x_fragments {
            true => super::coop_shapes::choose_fragments_gemm_shape(
                n,
                k,
                p.m,
                fragment_parts(p),
                super::coop_shapes::small_groups(c.block, form.offsets, p.x_f16),
                slices,
                r.class.sm_count,
            ),
            false => {
                let (t, s, m, kg) = super::coop_shapes::choose_gemm_shape(n, p.m, p.x_f16);
                (t, s, m, kg, 1)
            }
        };
        CoopGemmTuning::new(t, s, m, kg, 0, g)
    });
    let key = CoopGemmKey {
        tiles: shape.tiles,
        subgroups: shape.subgroups,
        tokens: shape.tokens,
        zeros: form.shape.zero_points,
        x_f16: p.x_f16 || rounded,
        block: c.block,
        offsets: form.offsets,
        ksplit: shape.k_groups,
        x_fragments,
        x_rounded: rounded,
        b_ahead: 2,
        tsplit: shape.token_groups,
        k_slices: false,
    };
    let mut key = match r.overrides().coop_gemm {
        Some(_) => key,
        None => key.fitted(r.class.max_shared),
    };
    // The look-ahead of the K groups the shape ends up with.
    key.b_ahead = match (x_fragments, shape.b_ahead) {
        (false, _) => 2,
        (true, 0) => super::coop_shapes::choose_fragments_lookahead(&key, p.m, fragment_parts(p)),
        (true, a) => a,
    };
    Some(key)
}

/// Whether a call's f32 x is rounded to f16 where it runs on x in fragments: from m = 9,
/// as the flag's contract says (at m = 8 exact x keeps the accuracy of the GEMV it
/// replaces there).
pub fn rounds_x(p: &GemvParams) -> bool {
    p.x_round_f16 && !p.x_f16 && p.m > MAX_M
}

/// B columns per token of a call's x in fragments: 2 for f32 x as its two exact parts.
fn fragment_parts(p: &GemvParams) -> u32 {
    match p.x_f16 || rounds_x(p) {
        true => 1,
        false => 2,
    }
}

/// The tensor-core GEMM on x in fragments (`vk::x_fragments`) for a call, resolved: the
/// fragments' geometry, the GEMM's shape on them, its K slices (1: none) and the workspace
/// bytes the call needs.
struct FragmentsPlan {
    g: FragmentGeometry,
    key: CoopGemmKey,
    slices: u32,
    need: u64,
}

/// The GEMM on x in fragments for a call with `p` on `form` given a workspace of `room`
/// bytes (`None`: as large as the call asks, as `q4vk_gemv_workspace_size` answers and
/// `gemv_host` allocates), or `None` where the call runs another kernel or the pre-pass's
/// grid or the fragments exceed the device's limits. Where K slices would not fit in `room`
/// (or `maxStorageBufferRange`) the call runs without them, on the shape it would have
/// without them: a workspace that holds the fragments always serves.
fn fragments_plan(
    r: &Rules,
    form: &MatrixForm,
    p: &GemvParams,
    room: Option<u64>,
) -> Option<FragmentsPlan> {
    // Wherever the tensor-core GEMM runs on a workspace (`runs_gemm_on_fragments`).
    let c = form.coop.as_ref()?;
    let geometry = |key: &CoopGemmKey| {
        let g = FragmentGeometry {
            stages: c.stages as u32,
            block: c.block,
            tokens: p.m.checked_next_multiple_of(key.tokens)?,
            x_f16: p.x_f16,
            parts: fragment_parts(p),
        };
        g.fits(&r.class).then_some(g)
    };
    let key = coop_gemm_key(r, form, p, true, true)?;
    let g = geometry(&key)?;
    let (slices, need) = coop_gemm_slices(r, form, p, &g, room);
    if slices > 1 {
        return Some(FragmentsPlan {
            g,
            key: CoopGemmKey {
                k_slices: true,
                ..key
            },
            slices,
            need,
        });
    }
    // No slices: the shape the rules give without them.
    let key = coop_gemm_key(r, form, p, true, false)?;
    let g = geometry(&key)?;
    Some(FragmentsPlan {
        need: g.bytes(),
        g,
        key,
        slices: 1,
    })
}

/// K slices of the tensor-core GEMM on x in fragments `g` for a call with `p` on `form` (the
/// fixed count of `Overrides::coop_gemm_slices`, else 1 with a fixed GEMM shape, else
/// [`super::coop_shapes::choose_fragments_slices`]'s; at most one per stage), and the workspace
/// bytes the call then needs: the fragments, then (16-byte aligned) the slices' sums,
/// `slices · m · n` floats. 1 (none) where those would exceed `room` (where given) or the
/// device's `maxStorageBufferRange`.
fn coop_gemm_slices(
    r: &Rules,
    form: &MatrixForm,
    p: &GemvParams,
    g: &FragmentGeometry,
    room: Option<u64>,
) -> (u32, u64) {
    let slices = r
        .overrides()
        .coop_gemm_slices
        .unwrap_or_else(|| match r.overrides().coop_gemm {
            Some(_) => 1,
            None => super::coop_shapes::choose_fragments_slices(
                form.shape.n,
                form.shape.k,
                p.m,
                g.parts,
                r.class.sm_count,
            ),
        });
    let slices = slices.min(g.stages.max(1));
    let partials = g.bytes().next_multiple_of(16);
    let need = partials + 4 * u64::from(slices) * u64::from(p.m) * form.shape.n as u64;
    let fits = need <= r.class.max_storage_range && room.is_none_or(|r| need <= r);
    match slices > 1 && fits {
        true => (slices, need),
        false => (1, g.bytes()),
    }
}

/// Bytes of the workspace a call with `p` on `form` uses ([`decide`] given as much as it
/// asks): x in 8-bit digits (or rounded to bytes) for the integer dot-product GEMV, or x as
/// the tensor-core GEMM's
/// f16 fragments (and the sums of its K slices); 0 where the call runs a kernel that reads x
/// itself.
pub fn workspace_bytes(r: &Rules, form: &MatrixForm, p: &GemvParams) -> Result<u64> {
    Ok(decide(r, form, p, Room::AsNeeded)?.workspace_bytes)
}

/// What a call's pre-pass writes into its workspace, as a key (`q4vk_gemv_workspace_key`):
/// calls whose keys are equal and non-zero write the same bytes from the same x (the same
/// pre-pass, K, activation type, column order and tiles); 0 where the call has no pre-pass.
pub fn workspace_key(r: &Rules, mat: &DeviceMatrix, p: &GemvParams) -> Result<u64> {
    // FNV-1a over the fields that decide the bytes.
    let mut key = 0xcbf2_9ce4_8422_2325u64;
    let mut add = |v: u64| {
        for b in v.to_le_bytes() {
            key = (key ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    };
    add(mat.form.shape.k as u64);
    add(u64::from(p.x_f16));
    match decide(r, &mat.form, p, Room::AsNeeded)?.prepass {
        Some(PrepassChoice::Digits(key)) => {
            // One tag per form of x in the workspace.
            add(match (key.bytes, key.natural) {
                (false, false) => 1,
                (true, false) => 3,
                (true, true) => 4,
                (false, true) => 5,
            });
            // The digits are written in the matrix's column order.
            if let Some(order) = mat.k_order.as_ref().filter(|_| !p.x_gathered) {
                order.inputs.iter().for_each(|&i| add(u64::from(i)));
            }
        }
        Some(PrepassChoice::Fragments(g)) => {
            add(2);
            for v in [g.stages, g.block, g.tokens, g.parts] {
                add(u64::from(v));
            }
        }
        None => return Ok(0),
    }
    Ok(key.max(1))
}

/// A call's pre-pass (into the workspace), resolved before anything is recorded, and the
/// stride its kernel reads x (the workspace) with.
pub(super) struct PrepassPlanned {
    /// The pre-pass.
    pub(super) prepass: Prepass,
    /// The stride of x in the workspace for the kernel.
    pub(super) main_x_stride: u64,
}

/// One dispatch of a pre-pass: pipeline, grid, push block, and the matrix set it reads (the
/// digits pre-pass gathers x through the column order, binding 3 of set 0).
pub(super) struct Prepass {
    pub(super) pipeline: vk::Pipeline,
    pub(super) grid: [u32; 2],
    pub(super) push: Push,
    pub(super) matrix_set: Option<vk::DescriptorSet>,
}

/// The fragments pre-pass's dispatch for `g`, on x of `k` columns as `p` describes it.
pub(super) fn fragments_prepass(
    pipelines: &Pipelines,
    g: &FragmentGeometry,
    k: u32,
    p: &GemvParams,
) -> Result<Prepass> {
    let pipeline = pipelines.get_fragments(FragmentsKey {
        x_f16: g.x_f16,
        block: g.block,
        parts: g.parts,
    })?;
    Ok(Prepass {
        pipeline,
        grid: g.grid(),
        push: g.push(k, p.x_stride as u32),
        matrix_set: None,
    })
}

/// Workgroups of a SIMT GEMM call with `tile` on `form` at `m` tokens (row tiles of every
/// part × token tiles).
fn gemm_workgroups(form: &MatrixForm, tile: GemmTile, m: u32) -> u64 {
    let row_tiles: u64 = form
        .parts()
        .map(|rows| (rows.len() as u64).div_ceil(u64::from(tile.rows())))
        .sum();
    row_tiles * u64::from(m.div_ceil(tile.tokens()))
}

/// Why `k` K groups of the SIMT GEMM's `tile` on `form` cannot run on the device of `info`,
/// if they cannot: its workgroup or shared-memory limit (`GemmTile::blocks_shared_bytes` on
/// GGUF blocks), or (k > 1) the kernel's rule that the
/// groups' sums fit its weight tiles (tokens × (k − 1) ≤ 32 k). Tiles are checked when fixed
/// (at most 1024 invocations, 16 rows and tokens each) and K groups (at most 8): these
/// products fit 32 bits.
fn gemm_misfit(info: &DeviceClass, form: &MatrixForm, tile: GemmTile, k: u32) -> Option<String> {
    let per_group = match form.blocks {
        Some(_) => tile.blocks_shared_bytes(),
        None => tile.shared_bytes(),
    };
    let (invocations, shared) = (tile.invocations() * k, per_group * k);
    if invocations > info.max_workgroup {
        Some(format!(
            "workgroups of {invocations} invocations; the device allows {}",
            info.max_workgroup
        ))
    } else if shared > info.max_shared {
        Some(format!(
            "{shared} bytes of shared memory; the device has {}",
            info.max_shared
        ))
    } else if tile.tokens() * (k - 1) > 32 * k {
        Some(format!(
            "its weight tiles to hold the sums of its {} tokens, which they do for at most {} K groups",
            tile.tokens(),
            32 / (tile.tokens() - 32).max(1) + 1
        ))
    } else {
        None
    }
}

/// The SIMT GEMM's tile (a, b, c, d), as messages name it.
fn tile_name(t: GemmTile) -> String {
    format!(
        "the SIMT GEMM's tile ({}, {}, {}, {})",
        t.tx, t.ty, t.rn, t.rm
    )
}

/// The SIMT GEMM's tile for a call at `m` on `form`: the caller's fixed one, else a tuning
/// blob's for that m (`Rules::simt_gemm_tuned`; `blocks_gemm_tuned` on GGUF blocks) or the device row's
/// (`DeviceTuning::simt_gemm_tiles`; `blocks_gemm_tiles` on GGUF blocks), or [`GEMM_TILE`] where that exceeds the device's
/// workgroup or shared memory, or where a GPU's larger tile (past m = 32) would give the
/// call fewer than half of [`gemm_groups_wanted`] workgroups (a larger tile is faster per
/// workgroup, but not where it leaves SMs idle); `Unsupported` where the tile does not fit
/// the device.
fn simt_gemm_tile(r: &Rules, form: &MatrixForm, m: u32) -> Result<GemmTile> {
    let info = &r.class;
    let t = r.overrides().gemm_tile.unwrap_or_else(|| {
        let chosen = match form.blocks {
            Some(_) => r
                .blocks_gemm_tuned
                .tile_for(m)
                .unwrap_or_else(|| r.row.blocks_gemm_tiles.for_m(m)),
            None => r
                .simt_gemm_tuned
                .tile_for(m)
                .unwrap_or_else(|| r.row.simt_gemm_tiles.for_m(m)),
        };
        let too_few = !info.cpu
            && chosen.tokens() > GEMM_TILE.tokens()
            && 2 * gemm_workgroups(form, chosen, m) < gemm_groups_wanted(r);
        if gemm_misfit(info, form, chosen, 1).is_none() && !too_few {
            chosen
        } else {
            GEMM_TILE
        }
    });
    match gemm_misfit(info, form, t, 1) {
        Some(why) => Err(Error::Unsupported(format!("{} needs {why}", tile_name(t)))),
        None => Ok(t),
    }
}

/// The SIMT GEMM's tile and K groups for a call at `m` on `form` (`Unsupported` where the
/// device cannot run them), as its plan takes them.
pub fn simt_gemm_shape(r: &Rules, form: &MatrixForm, m: u32) -> Result<(GemmTile, u32)> {
    let tile = simt_gemm_tile(r, form, m)?;
    Ok((tile, simt_gemm_ksplit(r, form, tile, m)?))
}

/// Workgroups (or workgroups' worth of K groups) a SIMT GEMM call should have in flight on
/// a GPU, from the device's row (`DeviceTuning::simt_gemm_workgroups`): so many per SM
/// where the driver reports their count (`VK_NV_shader_sm_builtins`), else a fixed count
/// (which only the tile choice uses: K groups need the SM count).
fn gemm_groups_wanted(r: &Rules) -> u64 {
    let (per_sm, without_sms) = r.row.simt_gemm_workgroups;
    r.class
        .sm_count
        .map_or(without_sms, |n| per_sm * u64::from(n))
}

/// The SIMT GEMM's K groups per workgroup for a call of `m` tokens with `tile` on `form`:
/// the caller's fixed count, else 1 on CPU implementations (one thread runs a workgroup)
/// and on GPUs whose driver does not report its SM count (only NVIDIA's was measured), and
/// on the others the fewest of 1, 2, 4 that give the call [`gemm_groups_wanted`] workgroups'
/// worth (K groups × workgroups), no more than a quarter of the chunks, and that
/// [`gemm_misfit`] lets run. A fixed count that does not fit: `Unsupported` (the tile is
/// chosen first: a fixed count above 2 refuses calls that get the 128 × 64 tile). K groups
/// let a call with few tiles (few rows, a long K) keep every SM busy.
fn simt_gemm_ksplit(r: &Rules, form: &MatrixForm, tile: GemmTile, m: u32) -> Result<u32> {
    let info = &r.class;
    if let Some(k) = r.overrides().gemm_ksplit {
        return match gemm_misfit(info, form, tile, k) {
            Some(why) => Err(Error::Unsupported(format!(
                "{k} K groups of {} need {why}",
                tile_name(tile)
            ))),
            None => Ok(k),
        };
    }
    if info.cpu || info.sm_count.is_none() {
        return Ok(1);
    }
    Ok(fewest_k_groups(
        gemm_workgroups(form, tile, m),
        form.layout.chunks as u64,
        gemm_groups_wanted(r),
        |k| gemm_misfit(info, form, tile, k).is_none(),
    ))
}

/// The fewest K groups of 1, 2, 4 that give `workgroups` at least `wanted` workgroups'
/// worth, with at least 4 of the `chunks` per group and only counts that `fits`.
fn fewest_k_groups(workgroups: u64, chunks: u64, wanted: u64, fits: impl Fn(u32) -> bool) -> u32 {
    let mut k = 1;
    while k < 4
        && workgroups * u64::from(k) < wanted
        && u64::from(2 * k) * 4 <= chunks
        && fits(2 * k)
    {
        k *= 2;
    }
    k
}

/// Whether a call has a workspace and how large: none (the kernels read x), as large as
/// the call asks (`q4vk_gemv_workspace_size`'s answer, what `q4vk_gemv` allocates), or so
/// many bytes (the K slices of the tensor-core GEMM run only where their sums fit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Room {
    /// No workspace.
    None,
    /// As large as the call asks.
    AsNeeded,
    /// This many bytes.
    Bytes(u64),
}

impl Room {
    /// The room of a call given `workspace` (or none).
    pub fn of(workspace: Option<BufferRange>) -> Room {
        workspace.map_or(Room::None, |w| Room::Bytes(w.range))
    }
}

/// The kernel a call runs, as its pipeline key and what the key leaves out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelChoice {
    /// The SIMT GEMV in passes of `key.m` rows, the last with `last` (its rows: `last.m`).
    SimtGemv {
        /// The key of a full pass.
        key: PipelineKey,
        /// The key of the last pass (`key` where m is a multiple of `key.m`).
        last: PipelineKey,
    },
    /// The GEMV on GGUF blocks in their native bytes, in passes of `key.m` rows, the last
    /// with `last`.
    BlocksGemv {
        /// The key of a full pass.
        key: BlocksKey,
        /// The key of the last pass.
        last: BlocksKey,
    },
    /// The GEMM on GGUF blocks in their native bytes.
    BlocksGemm(BlocksGemmKey),
    /// The tensor-core GEMM on GGUF blocks in their native bytes (`vk::coop_tiles`).
    BlocksTiles(BlocksTilesKey),
    /// The tensor-core GEMM on GGUF blocks in their native bytes with A's fragments built
    /// in registers (the tensor-core layout's devices).
    BlocksFrag(BlocksFragKey),
    /// The SIMT GEMM.
    SimtGemm(GemmKey),
    /// The tensor-core GEMM on the SIMT layout (`vk::coop_tiles`).
    CoopTiles(TilesKey),
    /// The tensor-core GEMV.
    CoopGemv(CoopKey),
    /// The tensor-core GEMM, in `slices` K slices (1: none) whose sums start at word
    /// `partials_word` of the workspace.
    CoopGemm {
        /// Its key.
        key: CoopGemmKey,
        /// K slices.
        slices: u32,
        /// Where the slices' sums start (words into the workspace).
        partials_word: u32,
    },
}

/// A call's pre-pass into its workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrepassChoice {
    /// x in 8-bit digits for the integer dot-product GEMV.
    Digits(DigitsKey),
    /// x as the tensor-core GEMM's fragments.
    Fragments(FragmentGeometry),
}

/// What a call runs, decided once from the rules' device class, tuning row and
/// overrides and from the matrix: pipeline keys and geometry, no Vulkan object. The call's
/// plan (`plan_of`) creates the pipelines from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    /// The kernel.
    pub kernel: KernelChoice,
    /// The pre-pass, where the call has one.
    pub prepass: Option<PrepassChoice>,
    /// Workspace bytes the call uses (0 without a pre-pass).
    pub workspace_bytes: u64,
}

impl Choice {
    /// Whether the call runs a GEMM kernel.
    pub fn runs_gemm(&self) -> bool {
        matches!(
            self.kernel,
            KernelChoice::SimtGemm(_)
                | KernelChoice::BlocksGemm(_)
                | KernelChoice::BlocksTiles(_)
                | KernelChoice::BlocksFrag(_)
                | KernelChoice::CoopTiles(_)
                | KernelChoice::CoopGemm { .. }
        )
    }

    /// The tensor-core GEMM's shape and K slices (1: none), where the call runs it (or,
    /// with no look-ahead and no slices, its counterpart on GGUF blocks with fragments in
    /// registers).
    pub fn coop_gemm_shape(&self) -> Option<(CoopGemmTuning, u32)> {
        if let KernelChoice::BlocksFrag(key) = self.kernel {
            return Some((key.shape, 1));
        }
        let KernelChoice::CoopGemm { key, slices, .. } = self.kernel else {
            return None;
        };
        let shape = CoopGemmTuning::new(
            key.tiles,
            key.subgroups,
            key.tokens,
            key.ksplit,
            key.b_ahead,
            key.tsplit,
        );
        Some((shape, slices))
    }

    /// Whether the kernel's shape for a call of `m` rows came from a tuning blob under `r`:
    /// the f32 SIMT GEMV where the rules' SIMT shapes are tuned, the integer dot-product
    /// GEMV where its shape is (on x rounded to bytes, where the row gives that no shapes of
    /// its own), the GEMV on GGUF blocks of the tuned class (`plan::tuned::TUNED_BLOCKS_CLASS`)
    /// on x in one pass of up to 4 rows where its shape is and the caller fixed none of it,
    /// the SIMT GEMM and the GEMM on GGUF blocks where they run the tile a blob chose for
    /// that m.
    pub fn shape_tuned(&self, r: &Rules, m: u32) -> bool {
        match self.kernel {
            KernelChoice::SimtGemv { key, .. } => match (key.dot, key.x_bytes) {
                (false, _) => r.simt_tuned,
                (true, false) => r.int_dot_shape_tuned(),
                (true, true) => r.bytes_simt.is_none() && r.int_dot_shape_tuned(),
            },
            KernelChoice::BlocksGemv { key, .. } => {
                let o = r.overrides();
                let fixed = o.blocks_gemv_rows.is_some()
                    || o.blocks_gemv_word_lanes.is_some()
                    || o.blocks_gemv_unroll.is_some();
                r.blocks_tuned
                    && !fixed
                    && BlocksClass::of(key.ty) == TUNED_BLOCKS_CLASS
                    && !key.dot
                    && key.m == m
                    && m <= BLOCKS_MAX_M
            }
            KernelChoice::SimtGemm(key) => {
                r.overrides().gemm_tile.is_none() && r.simt_gemm_tuned.tile_for(m) == Some(key.tile)
            }
            KernelChoice::BlocksGemm(key) => {
                r.overrides().gemm_tile.is_none()
                    && r.blocks_gemm_tuned.tile_for(m) == Some(key.tile)
            }
            _ => false,
        }
    }
}

/// The kernel and its shape in words, as `q4vk_gemv_plan_info.name` gives them (for logs
/// and reports; not a stable format).
impl fmt::Display for Choice {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kernel {
            KernelChoice::SimtGemv { key, .. } => {
                let kind = match key.dot {
                    true => "integer dot-product GEMV",
                    false => "SIMT GEMV",
                };
                write!(
                    out,
                    "{kind}, workgroup {}, {} rows per pass",
                    key.workgroup, key.m
                )?;
                if key.decode_once {
                    write!(out, ", decoded once")?;
                }
                if key.word_lanes {
                    write!(out, ", word lanes")?;
                }
                if key.portable {
                    write!(out, ", portable")?;
                }
            }
            KernelChoice::BlocksGemv { key, .. } => {
                write!(
                    out,
                    "GEMV on GGUF {} blocks, workgroup {}, {} rows per workgroup, {} per pass",
                    key.ty.name(),
                    key.workgroup,
                    key.rows,
                    key.m
                )?;
                if !key.x_held() {
                    write!(out, ", x per row")?;
                }
                if key.word_lanes {
                    write!(out, ", word lanes")?;
                }
                if key.unroll > 1 {
                    write!(out, ", {} pieces per step", key.unroll)?;
                }
            }
            KernelChoice::BlocksGemm(key) => {
                let t = key.tile;
                write!(
                    out,
                    "GEMM on GGUF {} blocks, tile {}x{}x{}x{}",
                    key.ty.name(),
                    t.tx,
                    t.ty,
                    t.rn,
                    t.rm
                )?;
                if key.ksplit > 1 {
                    write!(out, ", {} K groups", key.ksplit)?;
                }
            }
            KernelChoice::BlocksTiles(key) => write!(
                out,
                "tensor-core GEMM on GGUF {} blocks, {}",
                key.ty.name(),
                key.tiles
            )?,
            KernelChoice::BlocksFrag(key) => {
                let s = key.shape;
                write!(
                    out,
                    "tensor-core GEMM on GGUF {} blocks, fragments in registers {},{},{},{},{}",
                    key.ty.name(),
                    s.tiles,
                    s.subgroups,
                    s.tokens,
                    s.k_groups,
                    s.token_groups
                )?;
            }
            KernelChoice::SimtGemm(key) => {
                let t = key.tile;
                write!(out, "SIMT GEMM, tile {}x{}x{}x{}", t.tx, t.ty, t.rn, t.rm)?;
                if key.ksplit > 1 {
                    write!(out, ", {} K groups", key.ksplit)?;
                }
            }
            KernelChoice::CoopTiles(key) => {
                write!(out, "tensor-core GEMM on the SIMT layout, {}", key.tiles)?
            }
            KernelChoice::CoopGemv(key) => write!(
                out,
                "tensor-core GEMV, {} tiles x {} subgroups",
                key.tiles, key.subgroups
            )?,
            KernelChoice::CoopGemm { key, slices, .. } => {
                write!(
                    out,
                    "tensor-core GEMM {},{},{},{},{},{}",
                    key.tiles, key.subgroups, key.tokens, key.ksplit, key.b_ahead, key.tsplit
                )?;
                if slices > 1 {
                    write!(out, ", {slices} K slices")?;
                }
                if key.x_rounded {
                    write!(out, ", x rounded to f16")?;
                }
            }
        }
        match self.prepass {
            None => Ok(()),
            Some(PrepassChoice::Digits(key)) if key.bytes => write!(out, ", on x rounded to bytes"),
            Some(PrepassChoice::Digits(_)) => write!(out, ", on x in 8-bit digits"),
            Some(PrepassChoice::Fragments(_)) => write!(out, ", on x in fragments"),
        }
    }
}

/// What a call with `p` on `form` runs given `room` of workspace: the integer dot-product
/// GEMV or the tensor-core GEMM on x in fragments behind their pre-pass where a workspace
/// lets them run ([`runs_int_dot`]; on x rounded to bytes where `p` allows it and
/// `IntDotReach::bytes_pay` says; the fragments rules), else the kernel that reads x
/// ([`runs_gemm`]: the GEMM of the matrix's layout, or its GEMV). `Unsupported` where the
/// chosen kernel does not fit the device; `Internal` where the rules contradict each other.
pub fn decide(r: &Rules, form: &MatrixForm, p: &GemvParams, room: Room) -> Result<Choice> {
    if let Some(b) = &form.blocks {
        if room == Room::None || !runs_blocks_dot(r, form, p) {
            return on_x(r, form, p);
        }
        return Ok(Choice {
            kernel: blocks_choice(r, form, b, p, true)?,
            prepass: Some(PrepassChoice::Digits(DigitsKey {
                x_f16: p.x_f16,
                k_order: false,
                bytes: true,
                natural: true,
            })),
            workspace_bytes: digits_bytes(form, p.m, true),
        });
    }
    let room = match room {
        Room::None => return on_x(r, form, p),
        Room::AsNeeded => None,
        Room::Bytes(b) => Some(b),
    };
    if let Some(bytes) = int_dot_x(r, form, p) {
        return Ok(Choice {
            kernel: kernel_choice(r, form, p, Some(bytes))?,
            prepass: Some(PrepassChoice::Digits(DigitsKey {
                x_f16: p.x_f16,
                k_order: form.column_order && !p.x_gathered,
                bytes,
                natural: false,
            })),
            workspace_bytes: digits_bytes(form, p.m, bytes),
        });
    }
    let Some(f) = fragments_plan(r, form, p, room) else {
        return on_x(r, form, p);
    };
    check_coop_gemm_fits(r, &f.key)?;
    Ok(Choice {
        kernel: KernelChoice::CoopGemm {
            key: f.key,
            slices: f.slices,
            partials_word: (f.g.bytes().next_multiple_of(16) / 4) as u32,
        },
        prepass: Some(PrepassChoice::Fragments(f.g)),
        workspace_bytes: f.need,
    })
}

/// The choice of a call whose kernel reads x itself.
fn on_x(r: &Rules, form: &MatrixForm, p: &GemvParams) -> Result<Choice> {
    Ok(Choice {
        kernel: kernel_choice(r, form, p, None)?,
        prepass: None,
        workspace_bytes: 0,
    })
}

/// The kernel of a call: the tensor-core kernel for matrices in its layout, else the
/// context's SIMT variant (with `digits` `Some(bytes)`, the integer dot-product one on x in
/// digits or, with `bytes`, rounded to bytes, packed rows of `int_dot::row_vectors_of`); the GEMM of the matrix's layout where [`runs_gemm`]
/// says so, on the SIMT layout the tensor-core one where it runs there and fits the device
/// (`vk::coop_tiles`).
fn kernel_choice(
    r: &Rules,
    form: &MatrixForm,
    p: &GemvParams,
    digits: Option<bool>,
) -> Result<KernelChoice> {
    // The integer dot-product GEMV runs past runs_gemm's m (up to int_dot_gemv_up_to).
    let gemm = digits.is_none() && runs_gemm(r, form, p.m);
    if digits.is_some() && int_dot_x(r, form, p) != digits {
        return Err(Error::Internal(
            "the integer dot-product GEMV runs SIMT matrices at the GEMV's m on contexts with int_dot only".into(),
        ));
    }
    if let Some(b) = &form.blocks {
        return blocks_choice(r, form, b, p, false);
    }
    let Some(c) = &form.coop else {
        let tiles = || runs_tiles(r, form).then(|| tiles_key(r, form, p)).flatten();
        return match gemm {
            true => match tiles() {
                Some(key) => Ok(KernelChoice::CoopTiles(key)),
                None => simt_gemm_choice(r, form, p),
            },
            false => Ok(simt_gemv_choice(r, form, p, digits)),
        };
    };
    if gemm {
        let key = coop_gemm_key(r, form, p, false, false)
            .ok_or_else(|| Error::Internal("no tensor-core GEMM shape".into()))?;
        check_coop_gemm_fits(r, &key)?;
        return Ok(KernelChoice::CoopGemm {
            key,
            slices: 1,
            partials_word: 0,
        });
    }
    let (t, s) = coop_gemv_shape(r, form, p)
        .ok_or_else(|| Error::Internal("no tensor-core GEMV shape".into()))?;
    let key = CoopKey {
        tiles: t,
        subgroups: s,
        m: p.m,
        zeros: form.shape.zero_points,
        x_f16: p.x_f16,
        block: c.block,
        offsets: form.offsets,
    };
    let max_shared = r.class.max_shared;
    if key.shared_bytes() > max_shared {
        return Err(Error::Unsupported(format!(
            "the tensor-core kernel with {t} tiles x {s} subgroups needs {} bytes of shared memory at m = {}; the device has {max_shared}",
            key.shared_bytes(),
            p.m,
        )));
    }
    Ok(KernelChoice::CoopGemv(key))
}

/// Whether a call with `p` on GGUF blocks `form` given a workspace runs the GEMV on blocks
/// on x rounded to bytes: where `p` allows it (`Q4VK_GEMV_ROUND_X_TO_INT8`), the context
/// uses the integer dot-product GEMV, the GEMV on blocks runs (not [`runs_gemm`]), the
/// pre-pass's grid and x in bytes fit the device, and the device row says it pays with its
/// rounding pass (`IntDotReach::blocks_bytes_pay`; everywhere on contexts that force the
/// integer dot-product GEMV).
fn runs_blocks_dot(r: &Rules, form: &MatrixForm, p: &GemvParams) -> bool {
    let (n, k) = (form.shape.n, form.shape.k);
    let pays = r.int_dot_everywhere || r.row.int_dot.blocks_bytes_pay(n, k, p.m);
    p.x_round_int8
        && r.int_dot
        && !r.portable
        && !runs_gemm(r, form, p.m)
        && pays
        && digits_fit(r, form, p.m, true)
}

/// The kernel on GGUF blocks (`blocks`, of `form`) for a call with `p` on `form`: where
/// [`runs_gemm`] says so the tensor-core GEMM on blocks where it runs and fits
/// (`vk::coop_tiles`), else the GEMM on blocks with the SIMT GEMM's tile and K groups; else the
/// GEMV (with `dot` on x rounded to bytes: [`runs_blocks_dot`]) in passes of up to
/// [`BLOCKS_MAX_M`] activation rows ([`MAX_M`] with word lanes or `dot`; or
/// the caller's fixed count; the last pass of the rows left), with the SIMT GEMV's workgroup
/// and the shape of the type's class (`Rules::blocks_gemv`: by the matrix's rows for calls
/// of one pass of pieces, else past one pass; `DeviceTuning::blocks_dot_gemv_rows` rows on x
/// in bytes; or the caller's fixed choices). `Unsupported` where the kernel does not fit the
/// device.
fn blocks_choice(
    r: &Rules,
    form: &MatrixForm,
    blocks: &BlocksLayout,
    p: &GemvParams,
    dot: bool,
) -> Result<KernelChoice> {
    let ty = blocks.ty;
    if !dot && runs_gemm(r, form, p.m) {
        if let Some(key) = blocks_frag_key(r, form, blocks, p) {
            return Ok(KernelChoice::BlocksFrag(key));
        }
        let tiles = runs_blocks_tiles(r, form)
            .then(|| blocks_tiles_key(r, ty, p))
            .flatten();
        if let Some(key) = tiles {
            return Ok(KernelChoice::BlocksTiles(key));
        }
        let (tile, ksplit) = simt_gemm_shape(r, form, p.m)?;
        return Ok(KernelChoice::BlocksGemm(BlocksGemmKey {
            tile,
            ksplit,
            x_f16: p.x_f16,
            ty,
        }));
    }
    let pieces_pass = r.overrides().blocks_gemv_pass_rows.unwrap_or(BLOCKS_MAX_M);
    let shape = r
        .blocks_gemv
        .shape(ty, form.shape.n as u64, p.m, pieces_pass);
    let word_lanes = !r.portable
        && !dot
        && r.overrides()
            .blocks_gemv_word_lanes
            .unwrap_or(shape.word_lanes);
    // Word lanes and x in bytes hold x for a whole pass.
    let default_pass = match word_lanes || dot {
        true => MAX_M,
        false => BLOCKS_MAX_M,
    };
    let pass_rows =
        p.m.min(r.overrides().blocks_gemv_pass_rows.unwrap_or(default_pass));
    let steps = match word_lanes {
        true => form.layout.chunks.saturating_mul(4),
        false => form.layout.chunks,
    };
    let rows = r.overrides().blocks_gemv_rows.unwrap_or(match dot {
        true => r.row.blocks_dot_gemv_rows,
        false => shape.rows,
    });
    let key = |m: u32| BlocksKey {
        portable: r.portable,
        workgroup: r.simt().workgroup_for(steps),
        rows,
        m,
        // x in bytes is f32-free.
        x_f16: p.x_f16 && !dot,
        ty,
        word_lanes,
        dot,
        pair: false,
        unroll: match word_lanes || dot {
            true => 1,
            false => blocks_unroll(r, shape.unroll, m),
        },
    };
    let full = key(pass_rows);
    let shared = full.shared_bytes(r.simt().subgroup);
    if shared > r.class.max_shared {
        return Err(Error::Unsupported(format!(
            "the GEMV on GGUF {} blocks needs {shared} bytes of shared memory at {pass_rows} activation rows per pass; the device has {}",
            ty.name(),
            r.class.max_shared
        )));
    }
    Ok(KernelChoice::BlocksGemv {
        key: full,
        last: key(p.m - (p.m - 1) / pass_rows * pass_rows),
    })
}

/// Pieces per step of the GEMV on GGUF blocks striding over whole pieces at `m` activation
/// rows per pass: the shape's count `unroll` (`Rules::blocks_gemv`: the row's or tuned; or
/// the caller's), capped so that the held x of a step (32 values per piece and activation
/// row) stays within one piece's at [`BLOCKS_MAX_M`] rows; 1 where x is not held.
fn blocks_unroll(r: &Rules, unroll: u32, m: u32) -> u32 {
    let wanted = r.overrides().blocks_gemv_unroll.unwrap_or(unroll);
    match m <= BLOCKS_MAX_M {
        true => wanted.min(BLOCKS_MAX_M / m).max(1),
        false => 1,
    }
}

/// The key of the tensor-core GEMM on GGUF blocks with fragments in registers for a call
/// with `p` on `form` (of `blocks`): on contexts that use the tensor-core layout
/// (`Rules::coop_fragments`) where k is a multiple of its stage of 128 inputs, its shape rule's
/// shape ([`super::coop_shapes::choose_blocks_frag_shape`], or the caller's fixed one) with
/// its K groups halved until it fits the shared memory; `None` elsewhere or where it still
/// does not fit.
fn blocks_frag_key(
    r: &Rules,
    form: &MatrixForm,
    blocks: &BlocksLayout,
    p: &GemvParams,
) -> Option<BlocksFragKey> {
    if !r.coop_fragments || !form.shape.k.is_multiple_of(128) {
        return None;
    }
    let shape = r.overrides().coop_gemm.unwrap_or_else(|| {
        let (t, s, m, kg) =
            super::coop_shapes::choose_blocks_frag_shape(blocks.ty, form.shape.n, p.m, p.x_f16);
        CoopGemmTuning::new(t, s, m, kg, 0, 1)
    });
    let key = BlocksFragKey {
        // x is staged: no look-ahead of B.
        shape: CoopGemmTuning {
            b_ahead: 0,
            ..shape
        },
        x_f16: p.x_f16,
        ty: blocks.ty,
    }
    .fitted(r.class.max_shared);
    (key.shared_bytes() <= r.class.max_shared).then_some(key)
}

/// The SIMT GEMM's key for a call with `p` on `form`.
fn simt_gemm_choice(r: &Rules, form: &MatrixForm, p: &GemvParams) -> Result<KernelChoice> {
    let (tile, ksplit) = simt_gemm_shape(r, form, p.m)?;
    Ok(KernelChoice::SimtGemm(GemmKey {
        tile,
        zeros: form.shape.zero_points,
        scale_f32: form.scale_f32,
        x_f16: p.x_f16,
        offsets: form.offsets,
        k_order: form.column_order && !p.x_gathered,
        ksplit,
    }))
}

/// `choice` run as a gate+up pair (`vk::multi`): the subgroup kernels of the SIMT GEMV and
/// of the GEMV on GGUF blocks (where the device's shared memory holds gate's parked sums),
/// built for two matrices; `None` for every other kernel.
pub(super) fn paired(r: &Rules, choice: &Choice) -> Option<Choice> {
    match choice.kernel {
        KernelChoice::SimtGemv { key, last } if !key.portable => Some(Choice {
            kernel: KernelChoice::SimtGemv {
                key: PipelineKey { pair: true, ..key },
                last: PipelineKey { pair: true, ..last },
            },
            ..*choice
        }),
        KernelChoice::BlocksGemv { key, last }
            if !key.portable
                && BlocksKey { pair: true, ..key }.shared_bytes(r.simt().subgroup)
                    <= r.class.max_shared =>
        {
            Some(Choice {
                kernel: KernelChoice::BlocksGemv {
                    key: BlocksKey { pair: true, ..key },
                    last: BlocksKey { pair: true, ..last },
                },
                ..*choice
            })
        }
        _ => None,
    }
}

/// The SIMT GEMV's key for a call with `p` on `form` (`digits` `Some(bytes)`: the integer
/// dot-product GEMV on x in digits, or with `bytes` rounded to bytes): passes of up to
/// [`MAX_M`] activation rows, the last of the rows left.
fn simt_gemv_choice(
    r: &Rules,
    form: &MatrixForm,
    p: &GemvParams,
    digits: Option<bool>,
) -> KernelChoice {
    let pass_rows = p.m.min(MAX_M);
    let dot = digits.is_some();
    let x_bytes = digits == Some(true);
    let k = form.shape.k as u64;
    // One shape for every pass (the plan's grid is the first pass's), chosen by its rows.
    let t = match (dot, x_bytes) {
        (true, true) => r.bytes_simt_for(form.shape.n, k, p.m, pass_rows),
        (true, false) => r.int_dot_simt_for(form.shape.n, k, p.m),
        (false, _) => r.simt_for(form.shape.n, k, p.m),
    };
    // The portable kernels have one shape.
    let word_lanes = !r.portable
        && r.overrides()
            .simt_gemv_word_lanes
            .unwrap_or_else(|| t.word_lanes || short_rows(r, t, form));
    let steps = match word_lanes {
        true => form.layout.chunks.saturating_mul(4),
        false => form.layout.chunks,
    };
    let key = |rows: u32| PipelineKey {
        portable: r.portable,
        workgroup: t.workgroup_for(steps),
        rows: t.rows,
        unroll: t.unroll,
        split: t.split,
        m: rows,
        zeros: form.shape.zero_points,
        scale_f32: form.scale_f32,
        // The digits are f32-free and in column order (the pre-pass gathers).
        x_f16: p.x_f16 && !dot,
        offsets: form.offsets,
        k_order: form.column_order && !p.x_gathered && !dot,
        dot,
        x_bytes,
        // One activation row has one way to decode.
        decode_once: !dot && rows >= 2 && decodes_once(r, form),
        word_lanes,
        pair: false,
    };
    KernelChoice::SimtGemv {
        key: key(pass_rows),
        last: key(p.m - (p.m - 1) / pass_rows * pass_rows),
    }
}

/// Whether the device row steps over words on `form` because its rows are short: fewer
/// chunks than the SIMT GEMV's workgroup of shape `t` has lanes along a row
/// (`DeviceTuning::simt_gemv_word_lanes_on_short_rows`).
fn short_rows(r: &Rules, t: &Tuning, form: &MatrixForm) -> bool {
    let lanes = (t.workgroup / t.split.max(1)) as usize;
    r.row.simt_gemv_word_lanes_on_short_rows && form.layout.chunks < lanes
}

/// Whether the f32 SIMT GEMV at m ≥ 2 decodes each word once for all activation rows on
/// `form`: the caller's fixed choice, else the device row's from its rows on
/// (`DeviceTuning::simt_gemv_decode_once_from_rows`; on fewer rows, whose few workgroups
/// each run longer, a chunk's x loaded at once keeps more loads in flight).
fn decodes_once(r: &Rules, form: &MatrixForm) -> bool {
    r.overrides().simt_gemv_decode_once.unwrap_or_else(|| {
        r.row
            .simt_gemv_decode_once_from_rows
            .is_some_and(|rows| form.shape.n >= rows)
    })
}

/// `Unsupported` where the tensor-core GEMM of `key` needs more shared memory than the
/// device has.
fn check_coop_gemm_fits(r: &Rules, key: &CoopGemmKey) -> Result<()> {
    let max_shared = r.class.max_shared;
    if key.shared_bytes() > max_shared {
        return Err(Error::Unsupported(format!(
            "the tensor-core GEMM with {} tokens per workgroup needs {} bytes of shared memory; the device has {max_shared}",
            key.tokens,
            key.shared_bytes()
        )));
    }
    Ok(())
}

/// Creates the pipelines that every call with `p` on `mat` records, whatever its workspace:
/// none (the kernels that read x), as much as it asks, and one too small for K slices
/// (their sums); gathered and ungathered x where the matrix has a column order
/// (`q4vk_cmd_gemv` gathers in the kernels, `q4vk_gemv` on the host); for a call with a
/// gate, also the gate+up pair's (`vk::multi`); for a call with a residual, the builds
/// for a residual apart from y and one that is y. Pipelines that exist are not created
/// again. An error where a call could not run.
pub fn prepare(ctx: &Context, mat: &DeviceMatrix, p: &GemvParams) -> Result<()> {
    let gathers = match mat.k_order {
        Some(_) => &[false, true][..],
        None => &[false][..],
    };
    let residual_places = match p.epilogue.residual {
        true => &[false, true][..],
        false => &[false][..],
    };
    for (&x_gathered, &residual_is_y) in gathers
        .iter()
        .flat_map(|g| residual_places.iter().map(move |r| (g, r)))
    {
        let mut p = GemvParams { x_gathered, ..*p };
        p.epilogue.residual_is_y = residual_is_y;
        let p = &p;
        for room in [Room::None, Room::AsNeeded, Room::Bytes(0)] {
            let choice = decide(&ctx.rules, &mat.form, p, room)?;
            plan_of(ctx, mat, p, &choice)?;
            // An up call (a gate in its epilogue) may run as a gate+up pair in a multi call.
            let pairs = p.epilogue.gate.is_some() && !mat.form.column_order;
            if let Some(both) = paired(&ctx.rules, &choice).filter(|_| pairs) {
                plan_of(ctx, mat, p, &both)?;
            }
        }
    }
    Ok(())
}

/// The pipelines and dispatch geometry of `choice` for a call with `p` on `mat`, created
/// here (an error: they cannot be): the kernel's plan and, where the call has one, its
/// pre-pass's.
pub(super) fn plan_of(
    ctx: &Context,
    mat: &DeviceMatrix,
    p: &GemvParams,
    choice: &Choice,
) -> Result<(Plan, Option<PrepassPlanned>)> {
    let pipelines = &ctx.pipelines;
    let epi = p.epilogue;
    let simt = |pipeline, rows, tokens, last| Plan {
        pipeline,
        rows_per_wg: rows,
        tokens_per_wg: tokens,
        last_pass_pipeline: last,
        k_slices: None,
        chunks: mat.form.layout.chunks,
        groups: mat.form.layout.groups,
        group_shift: mat.form.layout.group_shift,
    };
    let main = match choice.kernel {
        KernelChoice::SimtGemv { key, last } => simt(
            pipelines.get(key, epi)?,
            key.rows as u64,
            key.m as u64,
            Some(pipelines.get(last, epi)?),
        ),
        KernelChoice::BlocksGemv { key, last } => simt(
            pipelines.get_blocks(key, epi)?,
            key.rows as u64,
            key.m as u64,
            Some(pipelines.get_blocks(last, epi)?),
        ),
        KernelChoice::BlocksGemm(key) => simt(
            pipelines.get_blocks_gemm(key, epi)?,
            key.tile.rows() as u64,
            key.tile.tokens() as u64,
            None,
        ),
        KernelChoice::BlocksTiles(key) => simt(
            pipelines.get_blocks_tiles(key, epi)?,
            key.tiles.rows() as u64,
            key.tiles.tokens() as u64,
            None,
        ),
        KernelChoice::BlocksFrag(key) => simt(
            pipelines.get_blocks_frag(key, epi)?,
            key.rows() as u64,
            key.shape.tokens as u64,
            None,
        ),
        KernelChoice::SimtGemm(key) => simt(
            pipelines.get_gemm(key, epi)?,
            key.tile.rows() as u64,
            key.tile.tokens() as u64,
            None,
        ),
        KernelChoice::CoopTiles(key) => simt(
            pipelines.get_tiles(key, epi)?,
            key.tiles.rows() as u64,
            key.tiles.tokens() as u64,
            None,
        ),
        KernelChoice::CoopGemv(key) => {
            coop_plan(mat, pipelines.get_coop(key, epi)?, 16 * key.tiles, p.m)?
        }
        KernelChoice::CoopGemm {
            key,
            slices,
            partials_word,
        } => {
            let mut plan = coop_plan(
                mat,
                pipelines.get_coop_gemm(key, epi)?,
                key.rows(),
                key.tokens,
            )?;
            if slices > 1 {
                plan.k_slices = Some(KSlices {
                    count: slices,
                    partials_word,
                    sum_pipeline: pipelines.get_slices(SlicesKey { slices }, epi)?,
                });
            }
            plan
        }
    };
    let k = mat.form.shape.k as u32;
    let prepass = match choice.prepass {
        None => None,
        Some(PrepassChoice::Digits(key)) => {
            let chunks = k.div_ceil(32);
            let row_vectors = super::int_dot::row_vectors_of(mat.form.shape.k, key.bytes) as u64;
            Some(PrepassPlanned {
                prepass: Prepass {
                    pipeline: pipelines.get_digits(key)?,
                    grid: [chunks.div_ceil(DIGITS_WORKGROUP / 4), p.m],
                    push: Push {
                        chunks,
                        k,
                        x_stride: p.x_stride as u32,
                        y_stride: row_vectors as u32,
                        ..Default::default()
                    },
                    matrix_set: Some(mat.parts[0].set),
                },
                main_x_stride: row_vectors,
            })
        }
        Some(PrepassChoice::Fragments(g)) => Some(PrepassPlanned {
            prepass: fragments_prepass(pipelines, &g, k, p)?,
            main_x_stride: 0,
        }),
    };
    Ok((main, prepass))
}

/// The plan of a tensor-core kernel's `pipeline` with `rows` and `tokens` per workgroup on
/// `mat` (`Internal` where the matrix is not in the tensor-core layout).
fn coop_plan(mat: &DeviceMatrix, pipeline: vk::Pipeline, rows: u32, tokens: u32) -> Result<Plan> {
    let c = mat
        .form
        .coop
        .as_ref()
        .ok_or_else(|| Error::Internal("a tensor-core kernel on a SIMT matrix".into()))?;
    Ok(Plan {
        pipeline,
        rows_per_wg: rows as u64,
        tokens_per_wg: tokens as u64,
        last_pass_pipeline: None,
        k_slices: None,
        chunks: c.stages,
        groups: c.groups,
        group_shift: c.group_shift,
    })
}

#[cfg(test)]
mod tests {
    use super::{blocks_unroll, fewest_k_groups, Choice, KernelChoice, Rules};
    use crate::vk::pipeline::PipelineKey;
    use crate::vk::rules::tests::rules;

    /// A choice of the SIMT GEMV at m = 1: on x itself, in digits (`dot`), or rounded to
    /// bytes (`dot` and `x_bytes`).
    fn simt_choice(dot: bool, x_bytes: bool) -> Choice {
        let key = PipelineKey {
            portable: false,
            workgroup: 128,
            rows: 4,
            unroll: 1,
            split: 1,
            m: 1,
            zeros: false,
            scale_f32: false,
            x_f16: false,
            offsets: false,
            k_order: false,
            dot,
            x_bytes,
            decode_once: false,
            word_lanes: false,
            pair: false,
        };
        Choice {
            kernel: KernelChoice::SimtGemv { key, last: key },
            prepass: None,
            workspace_bytes: 0,
        }
    }

    #[test]
    fn each_simt_gemv_says_tuned_only_where_its_own_shape_came_from_a_blob() {
        let tuned = |r: &Rules| {
            [(false, false), (true, false), (true, true)]
                .map(|(dot, bytes)| simt_choice(dot, bytes).shape_tuned(r, 1))
        };
        // A row with shapes of its own for the integer dot-product GEMV (on digits and on
        // bytes): a blob's f32 shapes leave them the table's.
        let mut r = rules(&crate::plan::tuning::NVIDIA);
        assert_eq!(tuned(&r), [false; 3]);
        r.simt_tuned = true;
        assert_eq!(tuned(&r), [true, false, false]);
        r.int_dot_tuned = true;
        assert_eq!(tuned(&r), [true, true, false]);
        // A row without them: the integer dot-product GEMV takes the f32 shapes, or its
        // own where a blob gave one.
        let mut d = rules(&crate::plan::tuning::DEFAULT);
        d.simt_tuned = true;
        assert_eq!(tuned(&d), [true; 3]);
        d.simt_tuned = false;
        assert_eq!(tuned(&d), [false; 3]);
        d.int_dot_simt = Some(*d.simt());
        d.int_dot_tuned = true;
        assert_eq!(tuned(&d), [false, true, true]);
    }

    #[test]
    fn the_simt_gemm_says_tuned_where_it_runs_the_tile_a_blob_chose_for_its_m() {
        use crate::plan::tuned_gemm::TunedGemmTiles;
        use crate::plan::{GemmTile, GEMM_TILE};
        use crate::vk::pipeline::GemmKey;
        let tile = GemmTile {
            tx: 8,
            ty: 8,
            rn: 4,
            rm: 4,
        };
        let choice = |tile| Choice {
            kernel: KernelChoice::SimtGemm(GemmKey {
                tile,
                zeros: false,
                scale_f32: false,
                x_f16: false,
                offsets: false,
                k_order: false,
                ksplit: 1,
            }),
            prepass: None,
            workspace_bytes: 0,
        };
        let mut r = rules(&crate::plan::tuning::NVIDIA);
        assert!(!choice(tile).shape_tuned(&r, 64));
        r.simt_gemm_tuned = TunedGemmTiles::new(&[(32, Some(tile)), (128, None)]).unwrap();
        assert!(choice(tile).shape_tuned(&r, 64));
        // Below the first m timed, and from the m where the row's tile was kept.
        assert!(!choice(tile).shape_tuned(&r, 16));
        assert!(!choice(tile).shape_tuned(&r, 128));
        // The fallback tile ran (the blob's would leave the GPU too few workgroups).
        assert!(!choice(GEMM_TILE).shape_tuned(&r, 64));
        // The caller's fixed tile, even where it is the blob's.
        r.set_overrides(|o| o.gemm_tile = Some(tile)).unwrap();
        assert!(!choice(tile).shape_tuned(&r, 64));
    }

    /// The GEMV on blocks says tuned where a blob chose its class's shape, for that class
    /// only, on one pass of x, and not where the caller fixed part of its shape.
    #[test]
    fn the_blocks_gemv_says_tuned_for_the_tuned_class_and_no_fixed_shape() {
        use crate::import::gguf_blocks::BlockType;
        use crate::vk::pipeline::BlocksKey;
        let choice = |ty, m| {
            let key = BlocksKey {
                portable: false,
                workgroup: 128,
                rows: 4,
                m,
                x_f16: false,
                ty,
                word_lanes: false,
                dot: false,
                pair: false,
                unroll: 1,
            };
            Choice {
                kernel: KernelChoice::BlocksGemv { key, last: key },
                prepass: None,
                workspace_bytes: 0,
            }
        };
        let mut r = rules(&crate::plan::tuning::NVIDIA);
        assert!(!choice(BlockType::Q4K, 1).shape_tuned(&r, 1));
        r.blocks_tuned = true;
        assert!(choice(BlockType::Q4K, 1).shape_tuned(&r, 1));
        assert!(choice(BlockType::Q5K, 2).shape_tuned(&r, 2));
        assert!(!choice(BlockType::Q8_0, 1).shape_tuned(&r, 1));
        assert!(!choice(BlockType::Q6K, 1).shape_tuned(&r, 1));
        // Two passes of 4.
        assert!(!choice(BlockType::Q4K, 4).shape_tuned(&r, 8));
        for fix in [
            |o: &mut crate::plan::Overrides| o.blocks_gemv_rows = Some(4),
            |o: &mut crate::plan::Overrides| o.blocks_gemv_word_lanes = Some(false),
            |o: &mut crate::plan::Overrides| o.blocks_gemv_unroll = Some(1),
        ] {
            let mut fixed = r;
            fixed.set_overrides(fix).unwrap();
            assert!(!choice(BlockType::Q4K, 1).shape_tuned(&fixed, 1));
        }
    }

    #[test]
    fn pieces_per_step_keep_the_held_x_within_four_rows_of_a_piece() {
        let mut r = rules(&crate::plan::tuning::NVIDIA);
        let at = |r: &Rules| [1, 2, 3, 4, 5, 8].map(|m| blocks_unroll(r, 4, m));
        assert_eq!(at(&r), [4, 2, 1, 1, 1, 1]);
        // The caller's count, capped the same way.
        r.set_overrides(|o| o.blocks_gemv_unroll = Some(2)).unwrap();
        assert_eq!(at(&r), [2, 2, 1, 1, 1, 1]);
    }

    #[test]
    fn k_groups_are_the_fewest_that_give_the_workgroups_wanted() {
        let any = |_| true;
        // 396 wanted (132 SMs): 448 tiles need none, 128 need 4, 224 need 2.
        assert_eq!(fewest_k_groups(448, 896, 396, any), 1);
        assert_eq!(fewest_k_groups(128, 896, 396, any), 4);
        assert_eq!(fewest_k_groups(224, 256, 396, any), 2);
        // Never more than 4, however few the workgroups.
        assert_eq!(fewest_k_groups(1, 896, 396, any), 4);
        // At least 4 chunks per group: 8 chunks allow 2, 7 none.
        assert_eq!(fewest_k_groups(1, 8, 396, any), 2);
        assert_eq!(fewest_k_groups(1, 7, 396, any), 1);
        // Counts that do not fit stop the doubling.
        assert_eq!(fewest_k_groups(128, 896, 396, |k| k <= 2), 2);
        assert_eq!(fewest_k_groups(128, 896, 396, |k| k < 2), 1);
    }
}
