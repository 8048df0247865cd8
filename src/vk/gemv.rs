//! Recording the fused GEMV into a command buffer (the host's or q4vk's own) and the
//! synchronous host-memory GEMV with reused staging buffers.

use super::context::Context;
use super::matrix::DeviceMatrix;
use super::memory::{Buffer, MemoryKind};
use super::pipeline::{
    CoopGemmKey, CoopKey, DigitsKey, FragmentsKey, GemmKey, PipelineKey, Push, DIGITS_WORKGROUP,
    GEMM_TILE,
};
use super::x_fragments::FragmentGeometry;
use super::xy_sets::{buffer_infos, writes};
use crate::error::{invalid, Error, Result};
use ash::vk;

/// Largest activation count (rows of x) the GEMV kernels take; larger m runs the GEMM
/// kernels (same matrices, same bindings).
pub const MAX_M: u32 = 8;

/// A range of a `VkBuffer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BufferRange {
    /// The buffer.
    pub buffer: vk::Buffer,
    /// Byte offset (a multiple of `minStorageBufferOffsetAlignment`).
    pub offset: u64,
    /// Bytes available from `offset`.
    pub range: u64,
}

/// Shape of one GEMV call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GemvParams {
    /// Activation rows, ≥ 1 (up to [`MAX_M`] the GEMV kernels, beyond the GEMM).
    pub m: u32,
    /// Activations are f16 (else f32).
    pub x_f16: bool,
    /// Elements between rows of x (≥ k).
    pub x_stride: u64,
    /// Elements between rows of y (≥ n).
    pub y_stride: u64,
    /// x is already in the matrix's column order (`q4vk_gemv` gathered it on the host): the
    /// kernels read it as a plain matrix's, without gathering.
    pub x_gathered: bool,
    /// f32 x may be rounded to f16 where that makes the call faster
    /// (`Q4VK_GEMV_ROUND_X_TO_F16`): the tensor-core GEMM on x in fragments, with a
    /// workspace.
    pub x_round_f16: bool,
}

/// Checks the activation count: 0 is invalid. (The upper limits are those of x and y:
/// [`xy_extent`], [`check_params`].)
pub fn check_m(m: u32) -> Result<()> {
    if m == 0 {
        return Err(invalid!("m is 0; it must be at least 1"));
    }
    Ok(())
}

/// Checks a GEMV's shape against the matrix and the device limits, before any buffer is
/// looked at; returns the bytes x and y need. Too large for the device (a span beyond 32-bit
/// indexing or `maxStorageBufferRange`): `Unsupported`.
pub fn check_params(ctx: &Context, mat: &DeviceMatrix, p: &GemvParams) -> Result<(u64, u64)> {
    let e = xy_extent(mat.shape.n as u64, mat.shape.k as u64, p, "")?;
    let (m, x_bytes, y_bytes) = (p.m, e.x_bytes, e.y_bytes);
    let max = ctx.device.info.max_storage_range;
    for (name, need) in [("x", x_bytes), ("y", y_bytes)] {
        if need > max {
            return Err(Error::Unsupported(format!(
                "{name} spans {need} bytes (m = {m}), more than this device's maxStorageBufferRange ({max})"
            )));
        }
    }
    Ok((x_bytes, y_bytes))
}

/// The 2-D grid of one dispatch of up to `max_x · max_y` of `remaining` workgroups (the
/// kernels number them `y · x_count + x`): (workgroups in it, x count, y count).
pub fn dispatch_grid(remaining: u64, [max_x, max_y]: [u64; 2]) -> (u64, u64, u64) {
    let count = remaining.min(max_x * max_y);
    let gx = count.min(max_x);
    (count, gx, count.div_ceil(gx))
}

/// Elements and bytes of x and y that a GEMV of an n × k matrix reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XyExtent {
    /// Elements of x from its first to its last activation.
    pub x_elems: u64,
    /// Elements of y likewise.
    pub y_elems: u64,
    /// Bytes of x (f16 activations counted in whole 32-bit words).
    pub x_bytes: u64,
    /// Bytes of y.
    pub y_bytes: u64,
}

/// Checks m, the strides against n and k, and the 32-bit indexing of the kernels, and
/// returns the extent of x and y; messages name the strides with `prefix` (`"desc->"` for
/// the kernel export).
pub fn xy_extent(n: u64, k: u64, p: &GemvParams, prefix: &str) -> Result<XyExtent> {
    check_m(p.m)?;
    if p.x_stride < k {
        return Err(invalid!(
            "{prefix}x_row_stride is {}, smaller than k = {k}",
            p.x_stride
        ));
    }
    if p.y_stride < n {
        return Err(invalid!(
            "{prefix}y_row_stride is {}, smaller than n = {n}",
            p.y_stride
        ));
    }
    let m = p.m as u64;
    let x_elems = (m - 1)
        .checked_mul(p.x_stride)
        .and_then(|v| v.checked_add(k))
        .ok_or_else(|| invalid!("{prefix}x_row_stride * m overflows"))?;
    let y_elems = (m - 1)
        .checked_mul(p.y_stride)
        .and_then(|v| v.checked_add(n))
        .ok_or_else(|| invalid!("{prefix}y_row_stride * m overflows"))?;
    if x_elems > u32::MAX as u64 || y_elems > u32::MAX as u64 {
        return Err(Error::Unsupported(
            "x or y spans more than 2^32 elements; the kernels index them with 32 bits".into(),
        ));
    }
    let x_bytes = if p.x_f16 {
        4 * x_elems.div_ceil(2)
    } else {
        4 * x_elems
    };
    Ok(XyExtent {
        x_elems,
        y_elems,
        x_bytes,
        y_bytes: 4 * y_elems,
    })
}

/// Checks a GEMV call against the matrix and the device limits.
pub fn validate(
    ctx: &Context,
    mat: &DeviceMatrix,
    x: &BufferRange,
    y: &BufferRange,
    p: &GemvParams,
) -> Result<()> {
    let (x_bytes, y_bytes) = check_params(ctx, mat, p)?;
    for (name, b, need) in [("x", x, x_bytes), ("y", y, y_bytes)] {
        if b.buffer == vk::Buffer::null() {
            return Err(Error::NullPointer(format!(
                "args->{name}.buffer is VK_NULL_HANDLE"
            )));
        }
        if b.range < need {
            return Err(Error::BufferTooSmall(format!(
                "args->{name}.range is {} bytes, {need} needed",
                b.range
            )));
        }
        if b.offset % ctx.device.info.storage_alignment != 0 {
            return Err(invalid!(
                "args->{name}.offset {} is not a multiple of minStorageBufferOffsetAlignment ({})",
                b.offset,
                ctx.device.info.storage_alignment
            ));
        }
        if b.range > ctx.device.info.max_storage_range {
            return Err(invalid!(
                "args->{name}.range {} exceeds maxStorageBufferRange ({})",
                b.range,
                ctx.device.info.max_storage_range
            ));
        }
    }
    if x.buffer == y.buffer && overlap((x.offset, x.range), (y.offset, y.range)) {
        return Err(invalid!("args->x and args->y overlap"));
    }
    Ok(())
}

/// Whether two byte ranges (offset, length) of one buffer overlap (ends past 2^64 saturate:
/// a hostile offset cannot wrap around).
fn overlap((a, a_len): (u64, u64), (b, b_len): (u64, u64)) -> bool {
    a < b.saturating_add(b_len) && b < a.saturating_add(a_len)
}

/// How a GEMV of `mat` runs on `ctx`: the pipeline (created on first use), rows and
/// activation rows per workgroup and the push block's per-matrix fields.
struct Plan {
    pipeline: vk::Pipeline,
    rows_per_wg: u64,
    /// Activation rows per workgroup (the GEMV kernels take all m at once).
    tokens_per_wg: u64,
    chunks: usize,
    groups: usize,
    group_shift: u32,
}

/// Whether a call with `m` activation rows on `mat` runs a GEMM kernel: for m > [`MAX_M`];
/// on the tensor-core layout also at m = 8 for tall matrices (n ≥ 10240, k ≤ 8192), where
/// the tensor-core GEMM (8 tokens per workgroup) measured faster than the GEMV on an H200
/// (28672 × 8192: 79.7 vs 139.5 µs; 11008 × 4096: 36.9 vs 39.9 µs) and slower on the other
/// shapes and at m = 4 (bench/RESULTS.md); from `ContextConfig::gemm_from_m` when set.
pub fn runs_gemm(ctx: &Context, mat: &DeviceMatrix, m: u32) -> bool {
    if let Some(from) = ctx.gemm_from_m {
        return m >= from;
    }
    m > MAX_M || (m == MAX_M && mat.coop.is_some() && mat.shape.n >= 10240 && mat.shape.k <= 8192)
}

/// Whether a call with `m` activation rows on `mat` runs the integer dot-product GEMV
/// (`vk::int_dot`) when given a workspace: SIMT matrices at the GEMV's m on contexts that
/// use it.
pub fn runs_int_dot(ctx: &Context, mat: &DeviceMatrix, m: u32) -> bool {
    // The pre-pass's grid: a workgroup per 32 chunks, one row of workgroups per x row.
    let [max_x, max_y] = ctx.limits.max_groups.map(u64::from);
    let fits = || {
        (mat.shape.k.div_ceil(32) as u64).div_ceil(DIGITS_CHUNKS_PER_WG) <= max_x
            && u64::from(m) <= max_y
            && digits_bytes(mat, m) <= ctx.device.info.max_storage_range
    };
    ctx.int_dot && mat.coop.is_none() && !runs_gemm(ctx, mat, m) && fits()
}

/// Chunks of 32 columns per workgroup of the digits pre-pass (four invocations each).
const DIGITS_CHUNKS_PER_WG: u64 = DIGITS_WORKGROUP as u64 / 4;

/// Bytes of `m` rows of x in digits for `mat`.
fn digits_bytes(mat: &DeviceMatrix, m: u32) -> u64 {
    16 * u64::from(m) * super::int_dot::row_vectors(mat.shape.k) as u64
}

/// The tensor-core GEMM's shape for a call with `p` on `mat` (`x_fragments`: on x in fragments),
/// `None` where the call runs another kernel: the shape the context fixes, else
/// [`super::coop::choose_gemm_shape`]'s with as many K groups as the shared memory holds.
fn coop_gemm_key(
    ctx: &Context,
    mat: &DeviceMatrix,
    p: &GemvParams,
    x_fragments: bool,
) -> Option<CoopGemmKey> {
    let c = mat.coop.as_ref().filter(|_| runs_gemm(ctx, mat, p.m))?;
    // Rounded f32 x runs as f16 x (one column per token) whose blocks carry factors.
    let rounded = x_fragments && rounds_x(p);
    let (tiles, subgroups, tokens, ksplit) =
        ctx.coop_gemm_tuning.unwrap_or_else(|| match x_fragments {
            true => super::coop::choose_fragments_gemm_shape(mat.shape.n, p.m),
            false => super::coop::choose_gemm_shape(mat.shape.n, p.m, p.x_f16),
        });
    let key = CoopGemmKey {
        tiles,
        subgroups,
        tokens,
        zeros: mat.shape.zero_points,
        x_f16: p.x_f16 || rounded,
        block: c.block,
        offsets: mat.offsets,
        ksplit,
        x_fragments,
        x_rounded: rounded,
    };
    Some(match ctx.coop_gemm_tuning {
        Some(_) => key,
        None => key.fitted(ctx.device.info.max_shared),
    })
}

/// Whether a call's f32 x is rounded to f16 where it runs on x in fragments.
fn rounds_x(p: &GemvParams) -> bool {
    p.x_round_f16 && !p.x_f16
}

/// x in fragments for the tensor-core GEMM (`vk::x_fragments`) for a call with `p` on `mat`, or
/// `None` where the call runs another kernel or the pre-pass's grid or the workspace exceed
/// the device's limits.
fn fragment_geometry(
    ctx: &Context,
    mat: &DeviceMatrix,
    p: &GemvParams,
) -> Option<FragmentGeometry> {
    // f16 activations (or f32 ones the caller lets round to f16) beyond the GEMV's m only:
    // exact f32 ones measured no faster on an H200 (x's two parts double the fragments each
    // invocation loads), and at m ≤ 8 the pre-pass would cost more than it saves
    // (bench/RESULTS.md).
    if !(p.x_f16 || rounds_x(p)) || p.m <= MAX_M {
        return None;
    }
    let key = coop_gemm_key(ctx, mat, p, true)?;
    let c = mat.coop.as_ref()?;
    let g = FragmentGeometry {
        stages: c.stages as u32,
        block: c.block,
        tokens: p.m.checked_next_multiple_of(key.tokens)?,
        x_f16: p.x_f16,
    };
    g.fits(ctx).then_some(g)
}

/// Bytes of the workspace a call with `p` on `mat` uses: x in 8-bit digits for the integer
/// dot-product GEMV, or x as the tensor-core GEMM's f16 fragments; 0 where the call
/// runs a kernel that reads x itself.
pub fn workspace_bytes(ctx: &Context, mat: &DeviceMatrix, p: &GemvParams) -> u64 {
    if runs_int_dot(ctx, mat, p.m) {
        return digits_bytes(mat, p.m);
    }
    fragment_geometry(ctx, mat, p).map_or(0, |g| g.bytes())
}

/// A call's pre-pass (into the workspace) and the kernel that reads its output, resolved
/// before anything is recorded.
struct PrepassPlan {
    /// The pre-pass.
    prepass: Prepass,
    /// The kernel's plan, and the stride it reads its x (the workspace) with.
    main: Plan,
    main_x_stride: u64,
    /// Workspace bytes.
    need: u64,
}

/// One dispatch of a pre-pass: pipeline, grid, push block, and the matrix set it reads (the
/// digits pre-pass gathers x through the column order, binding 3 of set 0).
struct Prepass {
    pipeline: vk::Pipeline,
    grid: [u32; 2],
    push: Push,
    matrix_set: Option<vk::DescriptorSet>,
}

/// The pre-pass path of a call with `p` on `mat` (the digits of the integer dot-product
/// GEMV, or x in fragments for the tensor-core GEMM), or `None` where the call runs a kernel that
/// reads x itself; its pipelines are created here (an error: they cannot be).
fn prepass_plan(ctx: &Context, mat: &DeviceMatrix, p: &GemvParams) -> Result<Option<PrepassPlan>> {
    let k = mat.shape.k as u32;
    if runs_int_dot(ctx, mat, p.m) {
        let chunks = k.div_ceil(32);
        let row_vectors = super::int_dot::row_vectors(mat.shape.k) as u64;
        let pipeline = ctx.pipelines.get_digits(DigitsKey {
            x_f16: p.x_f16,
            k_order: mat.k_order.is_some() && !p.x_gathered,
        })?;
        return Ok(Some(PrepassPlan {
            prepass: Prepass {
                pipeline,
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
            main: plan(ctx, mat, p, true)?,
            main_x_stride: row_vectors,
            need: digits_bytes(mat, p.m),
        }));
    }
    let (Some(g), Some(key), Some(c)) = (
        fragment_geometry(ctx, mat, p),
        coop_gemm_key(ctx, mat, p, true),
        mat.coop.as_ref(),
    ) else {
        return Ok(None);
    };
    Ok(Some(PrepassPlan {
        prepass: fragments_prepass(ctx, &g, k, p)?,
        main: coop_gemm_plan(ctx, c, key)?,
        main_x_stride: 0,
        need: g.bytes(),
    }))
}

/// The fragments pre-pass's dispatch for `g`, on x of `k` columns as `p` describes it.
fn fragments_prepass(
    ctx: &Context,
    g: &FragmentGeometry,
    k: u32,
    p: &GemvParams,
) -> Result<Prepass> {
    let pipeline = ctx.pipelines.get_fragments(FragmentsKey {
        x_f16: g.x_f16,
        block: g.block,
    })?;
    Ok(Prepass {
        pipeline,
        grid: g.grid(),
        push: g.push(k, p.x_stride as u32),
        matrix_set: None,
    })
}

/// Records the tensor-core GEMM's fragments pre-pass alone (no barrier): `p.m` rows of x
/// (`k` columns, `p.x_stride` apart; f16 as `g.x_f16`, else f32 with `p.x_round_f16`) into
/// `workspace` in the layout of `g` (`vk::x_fragments`), checked first as `record` checks
/// its buffers. It needs no optional device feature; `record` runs it before the GEMM,
/// tests run it on its own.
pub fn record_x_fragments(
    ctx: &Context,
    cmd: vk::CommandBuffer,
    x: BufferRange,
    workspace: BufferRange,
    p: &GemvParams,
    k: u32,
    g: &FragmentGeometry,
) -> Result<()> {
    let kind_matches = p.x_f16 == g.x_f16 && (p.x_f16 || p.x_round_f16);
    let k_fits = u64::from(k) <= g.kpad();
    if !kind_matches || !k_fits || p.m > g.tokens || !g.is_valid() || !g.fits(ctx) {
        return Err(invalid!(
            "the fragments pre-pass of {} rows of k = {k} ({} x) does not fit {g:?}",
            p.m,
            if p.x_f16 {
                "f16"
            } else {
                "f32 x not to be rounded, or f32"
            },
        ));
    }
    let x_bytes = xy_extent(1, u64::from(k), p, "")?.x_bytes;
    if x.buffer == vk::Buffer::null() {
        return Err(Error::NullPointer("x.buffer is VK_NULL_HANDLE".into()));
    }
    if x.range < x_bytes {
        return Err(Error::BufferTooSmall(format!(
            "x.range is {} bytes, {x_bytes} needed",
            x.range
        )));
    }
    validate_workspace(ctx, &workspace, g.bytes(), &x, &x)?;
    let prepass = fragments_prepass(ctx, g, k, p)?;
    let xy = XyBinding::of(ctx, x, workspace)?;
    record_prepass(ctx, cmd, &prepass, &xy, p.m);
    Ok(())
}

/// The plan of a GEMV: the tensor-core kernel for matrices in its layout, else the
/// context's SIMT variant (with `dot`, the integer dot-product one on x in digits, packed
/// rows of `int_dot::row_vectors`); the GEMM of the matrix's layout where [`runs_gemm`]
/// says so.
fn plan(ctx: &Context, mat: &DeviceMatrix, p: &GemvParams, dot: bool) -> Result<Plan> {
    let gemm = runs_gemm(ctx, mat, p.m);
    if dot && !runs_int_dot(ctx, mat, p.m) {
        return Err(Error::Internal(
            "the integer dot-product GEMV runs SIMT matrices at m <= 8 on contexts with int_dot only".into(),
        ));
    }
    let Some(c) = &mat.coop else {
        let (pipeline, rows, tokens) = if gemm {
            let key = GemmKey {
                zeros: mat.shape.zero_points,
                scale_f32: mat.scale_f32,
                x_f16: p.x_f16,
                offsets: mat.offsets,
                k_order: mat.k_order.is_some() && !p.x_gathered,
            };
            let t = GEMM_TILE;
            (ctx.pipelines.get_gemm(key)?, t.rows(), t.tokens())
        } else {
            let key = PipelineKey {
                portable: ctx.portable,
                workgroup: ctx.pipelines.tuning.workgroup_for(mat.layout.chunks),
                m: p.m,
                zeros: mat.shape.zero_points,
                scale_f32: mat.scale_f32,
                // The digits are f32-free and in column order (the pre-pass gathers).
                x_f16: p.x_f16 && !dot,
                offsets: mat.offsets,
                k_order: mat.k_order.is_some() && !p.x_gathered && !dot,
                dot,
            };
            (ctx.pipelines.get(key)?, ctx.pipelines.tuning.rows, p.m)
        };
        return Ok(Plan {
            pipeline,
            rows_per_wg: rows as u64,
            tokens_per_wg: tokens as u64,
            chunks: mat.layout.chunks,
            groups: mat.layout.groups,
            group_shift: mat.layout.group_shift,
        });
    };
    let info = &ctx.device.info;
    if gemm {
        let key = coop_gemm_key(ctx, mat, p, false)
            .ok_or_else(|| Error::Internal("no tensor-core GEMM shape".into()))?;
        return coop_gemm_plan(ctx, c, key);
    }
    let (t, s) = ctx
        .coop_tuning
        .unwrap_or_else(|| super::coop::choose_shape(c.stages, p.m, c.block, info.max_shared));
    let key = CoopKey {
        tiles: t,
        subgroups: s,
        m: p.m,
        zeros: mat.shape.zero_points,
        x_f16: p.x_f16,
        block: c.block,
        offsets: mat.offsets,
    };
    if key.shared_bytes() > info.max_shared {
        return Err(Error::Unsupported(format!(
            "the tensor-core kernel with {t} tiles x {s} subgroups needs {} bytes of shared memory at m = {}; the device has {}",
            key.shared_bytes(),
            p.m,
            info.max_shared
        )));
    }
    Ok(Plan {
        pipeline: ctx.pipelines.get_coop(key)?,
        rows_per_wg: 16 * t as u64,
        tokens_per_wg: p.m as u64,
        chunks: c.stages,
        groups: c.groups,
        group_shift: c.group_shift,
    })
}

/// The tensor-core GEMM's plan for `key` ([`coop_gemm_key`]): `Unsupported` where its shared
/// memory exceeds the device's.
fn coop_gemm_plan(
    ctx: &Context,
    c: &crate::layout::coop::CoopLayout,
    key: CoopGemmKey,
) -> Result<Plan> {
    let max_shared = ctx.device.info.max_shared;
    if key.shared_bytes() > max_shared {
        return Err(Error::Unsupported(format!(
            "the tensor-core GEMM with {} tokens per workgroup needs {} bytes of shared memory; the device has {max_shared}",
            key.tokens,
            key.shared_bytes()
        )));
    }
    Ok(Plan {
        pipeline: ctx.pipelines.get_coop_gemm(key)?,
        rows_per_wg: key.rows() as u64,
        tokens_per_wg: key.tokens as u64,
        chunks: c.stages,
        groups: c.groups,
        group_shift: c.group_shift,
    })
}

/// Records `y = W x` into `cmd` (validated first; nothing is recorded on error). Where the
/// call has a pre-pass ([`workspace_bytes`] > 0: x's digits for the integer dot-product
/// GEMV, x's f16 parts for the tensor-core GEMM) and `workspace` is given, first a
/// compute-to-compute barrier (earlier readers of the workspace finish), the pre-pass (x
/// into the workspace's first [`workspace_bytes`]) and another barrier, then the kernel on
/// the workspace; otherwise the workspace is not used. Then binds the GEMV pipeline, set 1 (x, y: pushed
/// or from the ring), per part set 0 and the push constants, and dispatches. No barrier after.
pub fn record(
    ctx: &Context,
    cmd: vk::CommandBuffer,
    mat: &DeviceMatrix,
    x: BufferRange,
    y: BufferRange,
    p: &GemvParams,
    workspace: Option<BufferRange>,
) -> Result<()> {
    validate(ctx, mat, &x, &y, p)?;
    let pre = match workspace {
        Some(_) => prepass_plan(ctx, mat, p)?,
        None => None,
    };
    let (Some(pre), Some(ws)) = (pre, workspace) else {
        let plan = plan(ctx, mat, p, false)?;
        let xy = XyBinding::of(ctx, x, y)?;
        record_gemv(ctx, cmd, mat, &plan, &xy, p, p.x_stride);
        return Ok(());
    };
    validate_workspace(ctx, &ws, pre.need, &x, &y)?;
    // Only the bytes the kernels use are bound.
    let ws = BufferRange {
        range: pre.need,
        ..ws
    };
    let (into_ws, from_ws) = (XyBinding::of(ctx, x, ws)?, XyBinding::of(ctx, ws, y)?);
    let d = &ctx.device.device;
    let stage = vk::PipelineStageFlags::COMPUTE_SHADER;
    // SAFETY: cmd is recording (caller's contract).
    unsafe {
        // An earlier call's GEMV may still read this workspace: it finishes first.
        super::submit::record_barrier(
            d,
            cmd,
            (
                stage,
                vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE,
            ),
            (stage, vk::AccessFlags::SHADER_WRITE),
        )
    };
    record_prepass(ctx, cmd, &pre.prepass, &into_ws, p.m);
    // SAFETY: as above.
    unsafe {
        super::submit::record_barrier(
            d,
            cmd,
            (stage, vk::AccessFlags::SHADER_WRITE),
            (stage, vk::AccessFlags::SHADER_READ),
        )
    };
    record_gemv(ctx, cmd, mat, &pre.main, &from_ws, p, pre.main_x_stride);
    Ok(())
}

/// Checks the workspace of a pre-pass: `need` bytes, aligned, apart from x and y.
fn validate_workspace(
    ctx: &Context,
    ws: &BufferRange,
    need: u64,
    x: &BufferRange,
    y: &BufferRange,
) -> Result<()> {
    let info = &ctx.device.info;
    if ws.buffer == vk::Buffer::null() {
        return Err(Error::NullPointer(
            "args->workspace.buffer is VK_NULL_HANDLE".into(),
        ));
    }
    if ws.range < need {
        return Err(Error::BufferTooSmall(format!(
            "args->workspace.range is {} bytes, {need} needed",
            ws.range
        )));
    }
    if !ws.offset.is_multiple_of(info.storage_alignment) {
        return Err(invalid!(
            "args->workspace.offset {} is not a multiple of minStorageBufferOffsetAlignment ({})",
            ws.offset,
            info.storage_alignment
        ));
    }
    for (name, b) in [("x", x), ("y", y)] {
        if ws.buffer == b.buffer && overlap((ws.offset, need), (b.offset, b.range)) {
            return Err(invalid!("args->workspace overlaps args->{name}"));
        }
    }
    Ok(())
}

/// How set 1 of the GEMV layout (x, y) gets bound: a set of the ring, or pushed.
enum XyBinding {
    Set(vk::DescriptorSet),
    Push(BufferRange, BufferRange),
}

impl XyBinding {
    /// The binding of `x` and `y` (a set taken from the ring now, so that recording cannot
    /// fail later).
    fn of(ctx: &Context, x: BufferRange, y: BufferRange) -> Result<XyBinding> {
        match (&ctx.xy_sets, &ctx.device.push_descriptor) {
            (Some(sets), _) => Ok(XyBinding::Set(
                sets.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .next(ctx.pipelines.xy_set, x, y)?,
            )),
            (None, Some(_)) => Ok(XyBinding::Push(x, y)),
            (None, None) => Err(Error::Internal("no way to bind x and y".into())),
        }
    }

    /// Records the binding into `cmd`.
    ///
    /// # Safety
    /// `cmd` is recording.
    unsafe fn record(&self, ctx: &Context, cmd: vk::CommandBuffer) {
        let d = &ctx.device.device;
        let layout = ctx.pipelines.layout;
        let bind = vk::PipelineBindPoint::COMPUTE;
        match (self, &ctx.device.push_descriptor) {
            // SAFETY: the caller's contract; the set lives until the ring comes round.
            (XyBinding::Set(set), _) => unsafe {
                d.cmd_bind_descriptor_sets(cmd, bind, layout, 1, &[*set], &[])
            },
            (XyBinding::Push(x, y), Some(push)) => {
                let infos = buffer_infos(*x, *y);
                let w = writes(&infos, vk::DescriptorSet::null());
                // SAFETY: the caller's contract; set 1 is a push-descriptor set.
                unsafe { push.cmd_push_descriptor_set(cmd, bind, layout, 1, &w) };
            }
            (XyBinding::Push(..), None) => {
                unreachable!("XyBinding::of pushes only with push descriptors")
            }
        }
    }
}

/// Records the pre-pass `pre` (`xy`: x and the workspace).
fn record_prepass(ctx: &Context, cmd: vk::CommandBuffer, pre: &Prepass, xy: &XyBinding, m: u32) {
    let d = &ctx.device.device;
    let layout = ctx.pipelines.layout;
    let bind = vk::PipelineBindPoint::COMPUTE;
    // SAFETY: cmd is recording (caller's contract); every handle is valid.
    unsafe {
        d.cmd_bind_pipeline(cmd, bind, pre.pipeline);
        xy.record(ctx, cmd);
        if let Some(set) = pre.matrix_set {
            d.cmd_bind_descriptor_sets(cmd, bind, layout, 0, &[set], &[]);
        }
        let bytes = pre.push.bytes_with_m(m);
        d.cmd_push_constants(cmd, layout, vk::ShaderStageFlags::COMPUTE, 0, &bytes);
        d.cmd_dispatch(cmd, pre.grid[0], pre.grid[1], 1);
    }
}

/// Records the GEMV (or GEMM) of `plan` on `xy` (x `x_stride` apart: elements, uvec4 for
/// digits; unused for a pre-split x).
fn record_gemv(
    ctx: &Context,
    cmd: vk::CommandBuffer,
    mat: &DeviceMatrix,
    plan: &Plan,
    xy: &XyBinding,
    p: &GemvParams,
    x_stride: u64,
) {
    let d = &ctx.device.device;
    let layout = ctx.pipelines.layout;
    let [max_x, max_y] = ctx.limits.max_groups.map(u64::from);
    // SAFETY: cmd is in the recording state (caller's contract); every handle is valid.
    unsafe {
        d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, plan.pipeline);
        xy.record(ctx, cmd);
    }
    for part in &mat.parts {
        let total = (part.rows as u64).div_ceil(plan.rows_per_wg)
            * (p.m as u64).div_ceil(plan.tokens_per_wg);
        // SAFETY: as above.
        unsafe {
            d.cmd_bind_descriptor_sets(
                cmd,
                vk::PipelineBindPoint::COMPUTE,
                layout,
                0,
                &[part.set],
                &[],
            )
        };
        let mut done = 0u64;
        while done < total {
            let (count, gx, gy) = dispatch_grid(total - done, [max_x, max_y]);
            let push = Push {
                rows: part.rows as u32,
                row_base: part.first_row as u32,
                chunks: plan.chunks as u32,
                k: mat.shape.k as u32,
                groups: plan.groups as u32,
                group_shift: plan.group_shift,
                x_stride: x_stride as u32,
                y_stride: p.y_stride as u32,
                wg_count: count as u32,
                wg_offset: done as u32,
            };
            let bytes = push.bytes_with_m(p.m);
            // SAFETY: as above.
            unsafe {
                d.cmd_push_constants(cmd, layout, vk::ShaderStageFlags::COMPUTE, 0, &bytes);
                d.cmd_dispatch(cmd, gx as u32, gy as u32, 1);
            }
            done += count;
        }
    }
}

/// Buffers of `q4vk_gemv`, grown on demand and reused: host-visible x and y, and the
/// device-local workspace of the pre-passes.
#[derive(Default)]
pub struct GemvBuffers {
    x: Option<Buffer>,
    y: Option<Buffer>,
    workspace: Option<Buffer>,
}

impl GemvBuffers {
    /// Bytes held (x, y and the workspace).
    pub fn bytes(&self) -> u64 {
        [&self.x, &self.y, &self.workspace]
            .iter()
            .flat_map(|b| b.as_ref())
            .map(|b| b.size)
            .sum()
    }
}

fn ensure(ctx: &Context, slot: &mut Option<Buffer>, bytes: u64, kind: MemoryKind) -> Result<()> {
    if slot.as_ref().is_some_and(|b| b.size >= bytes) {
        return Ok(());
    }
    // Release the old buffer first: a lower peak than holding both.
    *slot = None;
    *slot = Some(Buffer::new(&ctx.device, bytes.next_multiple_of(256), kind)?);
    Ok(())
}

/// The range of the first `bytes` of `buffer`.
fn head(buffer: &Buffer, bytes: u64) -> BufferRange {
    BufferRange {
        buffer: buffer.buffer,
        offset: 0,
        range: bytes,
    }
}

/// `y[m][n] = sum_k x[m][k] W[n][k]` with host memory, synchronous. `x` holds at least
/// `m·k` floats, `y` at least `m·n` (only `m·n` are written, and only on success). Where the
/// call runs the integer dot-product GEMV ([`workspace_bytes`]), x is finite and its
/// pipelines exist, the digits pre-pass writes x's digits into q4vk's workspace first;
/// otherwise (x with an infinite or NaN element included) the kernels run on x, gathered
/// into the matrix's column order on the host. (x is exact f32: the tensor-core GEMM on x in
/// fragments, for f16 or rounded x, does not run here.) Every check runs before the
/// buffers grow.
pub fn gemv_host(
    ctx: &Context,
    mat: &DeviceMatrix,
    x: &[f32],
    y: &mut [f32],
    m: u32,
) -> Result<()> {
    let (n, k) = (mat.shape.n, mat.shape.k);
    let (xn, yn) = (m as usize * k, m as usize * n);
    if x.len() < xn || y.len() < yn {
        return Err(Error::BufferTooSmall(format!(
            "x holds {} floats and y {}; m = {m} needs {xn} and {yn}",
            x.len(),
            y.len()
        )));
    }
    let x = &x[..xn];
    let gathered = GemvParams {
        m,
        x_f16: false,
        x_stride: k as u64,
        y_stride: n as u64,
        x_gathered: mat.k_order.is_some(),
        x_round_f16: false,
    };
    // Everything that can refuse the call runs before the buffers grow.
    check_params(ctx, mat, &gathered)?;
    // The digits pre-pass (the only one f32 x without rounding has) reads x in input order
    // and gathers it. x with an infinite or NaN element keeps the f32 kernel rather than the
    // digits, so that its results are the IEEE ones; a refused pre-pass (its pipelines)
    // keeps the kernel on x too.
    let ungathered = GemvParams {
        x_gathered: false,
        ..gathered
    };
    let pre = match x.iter().all(|v| v.is_finite()) {
        true => prepass_plan(ctx, mat, &ungathered).ok().flatten(),
        false => None,
    };
    let workspace = pre.as_ref().map_or(0, |pre| pre.need);
    let p = if workspace > 0 { ungathered } else { gathered };
    if workspace == 0 {
        plan(ctx, mat, &p, false)?;
    }
    let mut exec = ctx.exec.lock().unwrap_or_else(|e| e.into_inner());
    let exec = &mut *exec;
    // After a failed wait the device may still read the buffers: touch nothing.
    exec.submitter.check_usable()?;
    let buffers = &mut exec.buffers;
    ensure(ctx, &mut buffers.x, 4 * xn as u64, MemoryKind::Upload)?;
    ensure(ctx, &mut buffers.y, 4 * yn as u64, MemoryKind::Readback)?;
    if workspace > 0 {
        ensure(ctx, &mut buffers.workspace, workspace, MemoryKind::Device)?;
    }
    let xb = buffers.x.as_mut().expect("x");
    xb.fill(4 * xn, |staged| match (&mat.k_order, p.x_gathered) {
        // A matrix with a column order gets x in that order for the f32 kernel, gathered
        // straight into the staging buffer once per call.
        (Some(order), true) => {
            for (i, v) in staged.chunks_exact_mut(4).enumerate() {
                let input = i - i % k + order.inputs[i % k] as usize;
                v.copy_from_slice(&x[input].to_ne_bytes());
            }
        }
        // SAFETY: f32 slice viewed as bytes; one copy.
        _ => staged.copy_from_slice(unsafe {
            std::slice::from_raw_parts(x.as_ptr().cast::<u8>(), 4 * xn)
        }),
    });
    let xr = head(buffers.x.as_ref().expect("x"), 4 * xn as u64);
    let yb = buffers.y.as_ref().expect("y");
    let yr = head(yb, 4 * yn as u64);
    let ws = buffers
        .workspace
        .as_ref()
        .filter(|_| workspace > 0)
        .map(|b| head(b, workspace));
    let lock = ctx.queue_lock;
    exec.submitter.run(lock.as_ref(), |cmd| {
        record(ctx, cmd, mat, xr, yr, &p, ws)?;
        let [src, dst] = super::submit::SHADER_TO_HOST;
        // SAFETY: recording into q4vk's own command buffer.
        unsafe { super::submit::record_barrier(&ctx.device.device, cmd, src, dst) };
        Ok(())
    })?;
    // SAFETY: f32 slice viewed as bytes; the device finished (fence waited).
    let ys = unsafe { std::slice::from_raw_parts_mut(y.as_mut_ptr().cast::<u8>(), 4 * yn) };
    yb.read(0, ys);
    Ok(())
}
