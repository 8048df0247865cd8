//! Recording the fused GEMV (or GEMM) into a command buffer, the host's or q4vk's own: the
//! call's checks against the device, then the pre-pass where the call has one and the
//! kernel (`vk::gemv_plan` chooses them).

use super::context::Context;
use super::gemv_plan::{
    decide, fragments_prepass, plan_of, Choice, KSlices, Plan, Prepass, PrepassPlanned, Room,
};
use super::matrix::{DeviceMatrix, Part as MatrixPart};
use super::params::{
    dispatch_grid, value_bytes, xy_extent, BufferRange, EpilogueOperands, GemvParams, XyExtent,
};
use super::pipeline::{Push, SLICES_WORKGROUP};
use super::x_fragments::FragmentGeometry;
use super::xy_sets::{buffer_infos, writes, Set1};
use crate::error::{invalid, Error, Result};
use ash::vk;

/// Checks a GEMV's shape against the matrix and the device limits, before any buffer is
/// looked at; returns the elements and bytes of x and y. Too large for the device (a span
/// beyond 32-bit indexing or `maxStorageBufferRange`): `Unsupported`.
pub fn check_params(ctx: &Context, mat: &DeviceMatrix, p: &GemvParams) -> Result<XyExtent> {
    let e = xy_extent(mat.form.shape.n as u64, mat.form.shape.k as u64, p, "")?;
    if p.epilogue.y_f16 && !ctx.device.device_scope_atomics {
        return Err(Error::Unsupported(
            "f16 y is written with Device-scope atomics, which this device does not allow (vulkanMemoryModel is enabled without vulkanMemoryModelDeviceScope)".into(),
        ));
    }
    let (m, x_bytes, y_bytes) = (p.m, e.x_bytes, e.y_bytes);
    let max = ctx.device.info.max_storage_range;
    for (name, need) in [("x", x_bytes), ("y", y_bytes)] {
        if need > max {
            return Err(Error::Unsupported(format!(
                "{name} spans {need} bytes (m = {m}), more than this device's maxStorageBufferRange ({max})"
            )));
        }
    }
    Ok(e)
}

/// Checks a GEMV call against the matrix and the device limits; returns the extent of x and
/// y it checked them against.
pub fn validate(
    ctx: &Context,
    mat: &DeviceMatrix,
    x: &BufferRange,
    y: &BufferRange,
    p: &GemvParams,
) -> Result<XyExtent> {
    let e = check_params(ctx, mat, p)?;
    check_buffer(ctx, "x", x, e.x_bytes)?;
    check_buffer(ctx, "y", y, e.y_bytes)?;
    if x.buffer == y.buffer && overlap((x.offset, x.range), (y.offset, y.range)) {
        return Err(invalid!("args->x and args->y overlap"));
    }
    Ok(e)
}

/// Checks the buffers of a call's epilogue (`ops`) against what `p.epilogue` uses: each
/// operand given exactly where the epilogue reads it, of the bytes it reads (the bias n
/// values, the gate and the residual y's extent `e` in y's type), aligned, and apart from
/// y, except a residual that is y's own range (an in-place add).
pub fn validate_operands(
    ctx: &Context,
    mat: &DeviceMatrix,
    y: &BufferRange,
    ops: &EpilogueOperands,
    p: &GemvParams,
    e: &XyExtent,
) -> Result<()> {
    let epi = &p.epilogue;
    let n = mat.form.shape.n as u64;
    let wanted = [
        (
            "bias",
            "Q4VK_GEMV_BIAS",
            ops.bias,
            epi.bias_f16.map(|h| value_bytes(n, h)),
        ),
        (
            "residual",
            "Q4VK_GEMV_RESIDUAL",
            ops.residual,
            epi.residual.then_some(e.y_bytes),
        ),
        (
            "gate",
            "Q4VK_GEMV_SILU_GATE or Q4VK_GEMV_GELU_GATE",
            ops.gate,
            epi.gate.map(|_| e.y_bytes),
        ),
    ];
    for (name, flag, given, need) in wanted {
        match (given, need) {
            (None, None) => {}
            (Some(_), None) => {
                return Err(invalid!(
                    "args->{name}.buffer is set and args->flags lacks {flag}; set the flag or pass VK_NULL_HANDLE"
                ))
            }
            (None, Some(_)) => {
                return Err(Error::NullPointer(format!(
                    "args->flags has {flag} and args->{name}.buffer is VK_NULL_HANDLE"
                )))
            }
            (Some(b), Some(need)) => {
                check_buffer(ctx, name, &b, need)?;
                let in_place = name == "residual" && b.buffer == y.buffer && b.offset == y.offset;
                if !in_place && b.buffer == y.buffer && overlap((b.offset, need), (y.offset, e.y_bytes)) {
                    return Err(invalid!(
                        "args->{name} overlaps args->y{}",
                        if name == "residual" {
                            " (a residual may be y itself, at y's offset, or apart from it)"
                        } else {
                            ""
                        }
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Checks one buffer of a call (`args->{name}`) as [`check_binding`] does, and its range
/// within `maxStorageBufferRange` (x and y are bound whole).
fn check_buffer(ctx: &Context, name: &str, b: &BufferRange, need: u64) -> Result<()> {
    check_binding(ctx, name, b, need)?;
    let info = &ctx.device.info;
    if b.range > info.max_storage_range {
        return Err(invalid!(
            "args->{name}.range {} exceeds maxStorageBufferRange ({})",
            b.range,
            info.max_storage_range
        ));
    }
    Ok(())
}

/// Checks one buffer of a call (`args->{name}`): not null, at least `need` bytes, its offset
/// aligned for storage buffers.
fn check_binding(ctx: &Context, name: &str, b: &BufferRange, need: u64) -> Result<()> {
    let info = &ctx.device.info;
    if b.buffer == vk::Buffer::null() {
        return Err(Error::NullPointer(format!(
            "args->{name}.buffer is VK_NULL_HANDLE"
        )));
    }
    if b.range == vk::WHOLE_SIZE {
        return Err(invalid!(
            "args->{name}.range is VK_WHOLE_SIZE; pass the bytes available from the offset instead (the buffer's size minus args->{name}.offset; this call uses {need})"
        ));
    }
    if b.range < need {
        return Err(Error::BufferTooSmall(format!(
            "args->{name}.range is {} bytes, {need} needed",
            b.range
        )));
    }
    if !b.offset.is_multiple_of(info.storage_alignment) {
        return Err(invalid!(
            "args->{name}.offset {} is not a multiple of minStorageBufferOffsetAlignment ({})",
            b.offset,
            info.storage_alignment
        ));
    }
    Ok(())
}

/// Whether two byte ranges (offset, length) of one buffer overlap (ends past 2^64 saturate:
/// a hostile offset cannot wrap around).
pub(super) fn overlap((a, a_len): (u64, u64), (b, b_len): (u64, u64)) -> bool {
    a < b.saturating_add(b_len) && b < a.saturating_add(a_len)
}

/// Records the tensor-core GEMM's fragments pre-pass alone (no barrier): `p.m` rows of x
/// (`k` columns, `p.x_stride` apart; f16 as `g.x_f16`, else f32, rounded to f16 with
/// `p.x_round_f16` (`g.parts` 1), else in two parts (`g.parts` 2)) into
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
    let (parts, kind) = match (p.x_f16, p.x_round_f16) {
        (true, _) => (1, "f16"),
        (false, true) => (1, "f32 rounded to f16"),
        (false, false) => (2, "f32 in two parts"),
    };
    let kind_matches = p.x_f16 == g.x_f16 && g.parts == parts;
    let k_fits = u64::from(k) <= g.kpad();
    if !kind_matches || !k_fits || p.m > g.tokens || !g.is_valid() || !g.fits(&ctx.rules.class) {
        return Err(invalid!(
            "the fragments pre-pass of {} rows of k = {k} ({kind} x) does not fit {g:?}",
            p.m,
        ));
    }
    check_buffer(ctx, "x", &x, xy_extent(1, u64::from(k), p, "")?.x_bytes)?;
    validate_workspace(ctx, &workspace, g.bytes(), &Set1::pair(x, x))?;
    let prepass = fragments_prepass(&ctx.pipelines, g, k, p)?;
    let xy = XyBinding::of(ctx, &Set1::pair(x, workspace))?;
    record_prepass(ctx, cmd, &prepass, &xy, p.m);
    Ok(())
}

/// Records `y = W x` into `cmd` (validated first; nothing is recorded on error). Where the
/// call has a pre-pass (`vk::gemv::workspace_bytes` > 0: x's digits for the integer dot-product
/// GEMV, x as the tensor-core GEMM's f16 fragments) and `workspace` is given, first a
/// compute-to-compute barrier (earlier readers of the workspace finish), the pre-pass (x
/// into the workspace) and another barrier, then the kernel on the workspace (with
/// `p.workspace_filled`, no pre-pass and its barriers); the tensor-core GEMM in K slices
/// then a barrier and the kernel adding them into y (with `p.workspace_filled`, a barrier
/// before the GEMM too); otherwise the workspace is not used. Each kernel binds its
/// pipeline, set 1 (x, y: pushed or from the ring), per part set 0 and the push constants,
/// and dispatches. No barrier after.
pub fn record(
    ctx: &Context,
    cmd: vk::CommandBuffer,
    mat: &DeviceMatrix,
    x: BufferRange,
    y: BufferRange,
    p: &GemvParams,
    workspace: Option<BufferRange>,
) -> Result<()> {
    record_epilogue(ctx, cmd, mat, (x, y), &EpilogueOperands::NONE, p, workspace)
}

/// [`record`] with the buffers of the call's epilogue (`p.epilogue`): `ops`, checked with
/// [`validate_operands`].
pub fn record_epilogue(
    ctx: &Context,
    cmd: vk::CommandBuffer,
    mat: &DeviceMatrix,
    (x, y): (BufferRange, BufferRange),
    ops: &EpilogueOperands,
    p: &GemvParams,
    workspace: Option<BufferRange>,
) -> Result<()> {
    let e = validate(ctx, mat, &x, &y, p)?;
    validate_operands(ctx, mat, &y, ops, p, &e)?;
    record_validated(ctx, cmd, mat, (x, y), ops, p, workspace)
}

/// [`record`] for a call whose x and y [`validate`] and epilogue operands
/// [`validate_operands`] accepted: its kernels resolved (with a workspace, the pre-pass
/// path where the call has one, else the kernel on x), then recorded.
pub fn record_validated(
    ctx: &Context,
    cmd: vk::CommandBuffer,
    mat: &DeviceMatrix,
    (x, y): (BufferRange, BufferRange),
    ops: &EpilogueOperands,
    p: &GemvParams,
    workspace: Option<BufferRange>,
) -> Result<()> {
    let p = &p.with_operands(&y, ops);
    let call = CallPlan::for_workspace(ctx, mat, p, workspace)?;
    let main = Set1::call(x, y, *ops);
    record_resolved(ctx, cmd, mat, &main, p, workspace, &call)
}

/// A call's kernels, resolved (pipelines created) before anything is recorded from its
/// [`Choice`]: the kernel and, where the call has one, the pre-pass into the workspace
/// whose output the kernel reads.
pub(super) struct CallPlan {
    /// What the call runs.
    pub(super) choice: Choice,
    /// The kernel.
    pub(super) main: Plan,
    /// The pre-pass.
    pub(super) prepass: Option<PrepassPlanned>,
}

impl CallPlan {
    /// The plan of the call with `p` on `mat` given `workspace` (or none): the rules'
    /// choice for it, its pipelines created.
    pub(super) fn for_workspace(
        ctx: &Context,
        mat: &DeviceMatrix,
        p: &GemvParams,
        workspace: Option<BufferRange>,
    ) -> Result<CallPlan> {
        let choice = decide(&ctx.rules, &mat.form, p, Room::of(workspace))?;
        CallPlan::of(ctx, mat, p, choice)
    }

    /// The plan of `choice` for a call with `p` on `mat` (its pipelines created).
    pub(super) fn of(
        ctx: &Context,
        mat: &DeviceMatrix,
        p: &GemvParams,
        choice: Choice,
    ) -> Result<CallPlan> {
        let (main, prepass) = plan_of(ctx, mat, p, &choice)?;
        Ok(CallPlan {
            choice,
            main,
            prepass,
        })
    }
}

/// Records the call `call` resolved for `p` (`main`: x, y and the epilogue's operands,
/// checked by the caller; the workspace, where the pre-pass path runs, is checked here),
/// set 1 bound through the context's ring or pushed.
pub(super) fn record_resolved(
    ctx: &Context,
    cmd: vk::CommandBuffer,
    mat: &DeviceMatrix,
    main: &Set1,
    p: &GemvParams,
    workspace: Option<BufferRange>,
    call: &CallPlan,
) -> Result<()> {
    // At most two bindings: no allocation per call.
    let pairs = xy_pairs(ctx, call, main, p, workspace)?;
    let mut bound = [XyBinding::Set(vk::DescriptorSet::null()); 2];
    for (slot, set1) in bound.iter_mut().zip(pairs.as_slice()) {
        *slot = XyBinding::of(ctx, set1)?;
    }
    let bound = &bound[..pairs.as_slice().len()];
    record_bound(ctx, cmd, (mat, None), p, call, (bound, serial_writes(main)));
    Ok(())
}

/// The bindings of set 1 that `call` binds, in recording order: `main` (x, y and the
/// epilogue's operands) without a pre-pass; with one, (x, workspace) for the pre-pass
/// (unless `p` says an earlier call filled the workspace) and `main` with the workspace
/// in place of x for the kernel, the workspace checked and bound for the bytes the call
/// uses.
pub(super) fn xy_pairs(
    ctx: &Context,
    call: &CallPlan,
    main: &Set1,
    p: &GemvParams,
    workspace: Option<BufferRange>,
) -> Result<XyPairs> {
    let ws = match (&call.prepass, workspace) {
        (None, _) => return Ok(XyPairs::One([*main])),
        (Some(_), Some(ws)) => ws,
        (Some(_), None) => {
            return Err(Error::Internal(
                "a pre-pass path resolved for a call without a workspace".into(),
            ))
        }
    };
    let need = call.choice.workspace_bytes;
    validate_workspace(ctx, &ws, need, main)?;
    // Only the bytes the kernels use are bound.
    let ws = BufferRange { range: need, ..ws };
    let kernel = Set1 { read: ws, ..*main };
    Ok(match p.workspace_filled {
        true => XyPairs::One([kernel]),
        false => XyPairs::Two([Set1::pair(main.read, ws), kernel]),
    })
}

/// The one or two bindings of set 1 a call binds ([`xy_pairs`]).
pub(super) enum XyPairs {
    /// The kernel's alone.
    One([Set1; 1]),
    /// The pre-pass's, then the kernel's.
    Two([Set1; 2]),
}

impl XyPairs {
    /// The bindings in recording order.
    pub(super) fn as_slice(&self) -> &[Set1] {
        match self {
            XyPairs::One(p) => p,
            XyPairs::Two(p) => p,
        }
    }
}

/// Whether the dispatches writing y of a call bound as `main` are ordered by barriers among
/// themselves: where they also read y through the residual's binding (a residual that is
/// y), a dispatch reads the buffer others write. They touch different rows, which the
/// validation layer's hazard tracking cannot tell, so q4vk orders them.
pub(super) fn serial_writes(main: &Set1) -> bool {
    main.operands.residual == Some(main.written)
}

/// The order of the dispatches of one kernel of a call: with `serial`, a barrier before
/// each but the first.
struct DispatchOrder {
    serial: bool,
    started: bool,
}

impl DispatchOrder {
    fn new(serial: bool) -> DispatchOrder {
        DispatchOrder {
            serial,
            started: false,
        }
    }

    /// Records the barrier a dispatch about to be recorded needs.
    ///
    /// # Safety
    /// `cmd` is recording.
    unsafe fn before_dispatch(&mut self, ctx: &Context, cmd: vk::CommandBuffer) {
        if self.serial && self.started {
            let (write, read) = (vk::AccessFlags::SHADER_WRITE, vk::AccessFlags::SHADER_READ);
            // SAFETY: the caller's contract.
            unsafe { compute_barrier(ctx, cmd, write | read, write | read) };
        }
        self.started = true;
    }
}

/// Records `call` for `p` with set 1 bound as `bound` says, one binding per pair of
/// [`xy_pairs`] in its order; with `serial` ([`serial_writes`]) the dispatches writing y
/// ordered among themselves. `second`: up's matrix of a gate+up pair kernel (set 2), `mat`
/// then gate's.
pub(super) fn record_bound(
    ctx: &Context,
    cmd: vk::CommandBuffer,
    (mat, second): (&DeviceMatrix, Option<&DeviceMatrix>),
    p: &GemvParams,
    call: &CallPlan,
    (bound, serial): (&[XyBinding], bool),
) {
    let Some(pre) = &call.prepass else {
        let mut order = DispatchOrder::new(serial);
        record_gemv(
            ctx,
            cmd,
            (mat, second),
            &call.main,
            &bound[0],
            p,
            (p.x_stride, &mut order),
        );
        return;
    };
    // With `workspace_filled` an earlier call's pre-pass wrote the workspace and its barrier
    // made it visible (caller's contract): no pre-pass (K slices still record their barriers).
    let (into_ws, from_ws) = match bound {
        [from_ws] => (None, from_ws),
        [into_ws, from_ws, ..] => (Some(into_ws), from_ws),
        [] => unreachable!("xy_pairs gives every call a binding"),
    };
    let read_write = vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE;
    match into_ws {
        Some(into_ws) => record_prepass_between_barriers(ctx, cmd, &pre.prepass, into_ws, p.m),
        // K slices write the workspace: an earlier call's kernels reading or writing it
        // (with a pre-pass, its barriers order them) finish first.
        // SAFETY: cmd is recording (caller's contract).
        None if call.main.k_slices.is_some() => unsafe {
            compute_barrier(ctx, cmd, read_write, read_write)
        },
        None => {}
    }
    // In K slices the GEMM writes its sums into the workspace, and the kernel adding them
    // writes y.
    let mut order = DispatchOrder::new(serial && call.main.k_slices.is_none());
    record_gemv(
        ctx,
        cmd,
        (mat, second),
        &call.main,
        from_ws,
        p,
        (pre.main_x_stride, &mut order),
    );
    if let Some(slices) = call.main.k_slices {
        // SAFETY: as above.
        unsafe {
            compute_barrier(
                ctx,
                cmd,
                vk::AccessFlags::SHADER_WRITE,
                vk::AccessFlags::SHADER_READ,
            )
        };
        record_slices_sum(
            ctx,
            cmd,
            mat,
            &call.main,
            slices,
            (p, &mut DispatchOrder::new(serial)),
        );
    }
}

/// Records the sum of the K slices of `plan`'s GEMM into y (`shaders/gemm_slices.comp`,
/// set 1 bound: the workspace and y), a dispatch (or more, past the device's grid) per
/// matrix part, with the GEMM's push constants for that part.
fn record_slices_sum(
    ctx: &Context,
    cmd: vk::CommandBuffer,
    mat: &DeviceMatrix,
    plan: &Plan,
    slices: KSlices,
    (p, order): (&GemvParams, &mut DispatchOrder),
) {
    let d = &ctx.device.device;
    // SAFETY: cmd is recording (caller's contract); every handle is valid.
    unsafe { d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, slices.sum_pipeline) };
    for part in &mat.parts {
        let total = (part.rows as u64 * u64::from(p.m)).div_ceil(u64::from(SLICES_WORKGROUP));
        let push = part_push(mat, plan, part, p, 0);
        // SAFETY: as above.
        unsafe {
            record_dispatches(
                ctx,
                cmd,
                (total, push),
                [p.m, slices.partials_word],
                (1, order),
            )
        };
    }
}

/// Records `total` workgroups of the bound pipeline as dispatches of up to the device's
/// grid (a 2-D one where the workgroups exceed its x count; `depth` along z), each after
/// the push constants `push` with its workgroup count and offset, then `m` and `word11`
/// (`Push::bytes_with`), and the barrier `order` asks for.
///
/// # Safety
/// `cmd` is recording, with a pipeline of q4vk's layout and its descriptor sets bound.
unsafe fn record_dispatches(
    ctx: &Context,
    cmd: vk::CommandBuffer,
    (total, push): (u64, Push),
    [m, word11]: [u32; 2],
    (depth, order): (u32, &mut DispatchOrder),
) {
    let d = &ctx.device.device;
    let [max_x, max_y] = ctx.rules.class.max_groups.map(u64::from);
    let mut done = 0u64;
    while done < total {
        let (count, gx, gy) = dispatch_grid(total - done, [max_x, max_y]);
        let push = Push {
            wg_count: count as u32,
            wg_offset: done as u32,
            ..push
        };
        let bytes = push.bytes_with(m, word11);
        // SAFETY: the caller's contract.
        unsafe {
            order.before_dispatch(ctx, cmd);
            d.cmd_push_constants(
                cmd,
                ctx.pipelines.layout,
                vk::ShaderStageFlags::COMPUTE,
                0,
                &bytes,
            );
            d.cmd_dispatch(cmd, gx as u32, gy as u32, depth);
        }
        done += count;
    }
}

/// The push block of `plan`'s kernel for matrix part `part` of a call with `p` (x
/// `x_stride` apart), before its dispatch's workgroup count and offset.
fn part_push(
    mat: &DeviceMatrix,
    plan: &Plan,
    part: &MatrixPart,
    p: &GemvParams,
    x_stride: u64,
) -> Push {
    Push {
        rows: part.rows as u32,
        row_base: part.first_row as u32,
        chunks: plan.chunks as u32,
        k: mat.form.shape.k as u32,
        groups: plan.groups as u32,
        group_shift: plan.group_shift,
        x_stride: x_stride as u32,
        y_stride: p.y_stride as u32,
        wg_count: 0,
        wg_offset: 0,
    }
}

/// Records the pre-pass of `call` alone, where it has one and `bound` (its bindings, as
/// [`record_bound`] takes them) has its binding: the gate of a gate+up pair, whose rows
/// the pair's kernel computes.
pub(super) fn record_prepass_of(
    ctx: &Context,
    cmd: vk::CommandBuffer,
    call: &CallPlan,
    bound: &[XyBinding],
    m: u32,
) {
    if let (Some(pre), [into_ws, _from_ws]) = (&call.prepass, bound) {
        record_prepass_between_barriers(ctx, cmd, &pre.prepass, into_ws, m);
    }
}

/// Records `pre` (`xy`: x and the workspace) between a barrier that lets earlier readers
/// of the workspace finish and one that makes its writes visible to later compute reads.
fn record_prepass_between_barriers(
    ctx: &Context,
    cmd: vk::CommandBuffer,
    pre: &Prepass,
    xy: &XyBinding,
    m: u32,
) {
    let (read, write) = (vk::AccessFlags::SHADER_READ, vk::AccessFlags::SHADER_WRITE);
    // An earlier call's GEMV may still read this workspace: it finishes first.
    // SAFETY: cmd is recording (caller's contract).
    unsafe { compute_barrier(ctx, cmd, read | write, write) };
    record_prepass(ctx, cmd, pre, xy, m);
    // SAFETY: as above.
    unsafe { compute_barrier(ctx, cmd, write, read) };
}

/// Records a global memory barrier from the compute stage's `src` accesses to its `dst`
/// accesses.
///
/// # Safety
/// `cmd` is recording.
pub(super) unsafe fn compute_barrier(
    ctx: &Context,
    cmd: vk::CommandBuffer,
    src: vk::AccessFlags,
    dst: vk::AccessFlags,
) {
    let stage = vk::PipelineStageFlags::COMPUTE_SHADER;
    // SAFETY: the caller's contract.
    unsafe { super::submit::record_barrier(&ctx.device.device, cmd, (stage, src), (stage, dst)) };
}

/// Checks the workspace of a pre-pass: `need` bytes, aligned, apart from x, y and the
/// epilogue's operands in `call` (only its first `need` bytes are bound, so a longer range
/// is fine).
fn validate_workspace(ctx: &Context, ws: &BufferRange, need: u64, call: &Set1) -> Result<()> {
    check_binding(ctx, "workspace", ws, need)?;
    let o = &call.operands;
    let named = [
        ("x", Some(call.read)),
        ("y", Some(call.written)),
        ("bias", o.bias),
        ("residual", o.residual),
        ("gate", o.gate),
    ];
    for (name, b) in named {
        let Some(b) = b else { continue };
        if ws.buffer == b.buffer && overlap((ws.offset, need), (b.offset, b.range)) {
            return Err(invalid!("args->workspace overlaps args->{name}"));
        }
    }
    Ok(())
}

/// How set 1 of the GEMV layout ([`Set1`]) gets bound: a set (of the ring, or a
/// binding's own), or pushed.
#[derive(Clone, Copy)]
pub(super) enum XyBinding {
    Set(vk::DescriptorSet),
    Push(Set1),
}

impl XyBinding {
    /// The binding of `set1` (a set taken from the ring now, so that recording cannot fail
    /// later).
    pub(super) fn of(ctx: &Context, set1: &Set1) -> Result<XyBinding> {
        match (&ctx.xy_sets, &ctx.device.push_descriptor) {
            (Some(sets), _) => Ok(XyBinding::Set(
                sets.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .next(ctx.pipelines.xy_set, set1)?,
            )),
            (None, Some(_)) => Ok(XyBinding::Push(*set1)),
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
            (XyBinding::Push(set1), Some(push)) => {
                let infos = buffer_infos(set1);
                let w = writes(&infos, vk::DescriptorSet::null());
                // SAFETY: the caller's contract; set 1 is a push-descriptor set.
                unsafe { push.cmd_push_descriptor_set(cmd, bind, layout, 1, &w) };
            }
            (XyBinding::Push(_), None) => {
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
        let bytes = pre.push.bytes_with(m, 0);
        d.cmd_push_constants(cmd, layout, vk::ShaderStageFlags::COMPUTE, 0, &bytes);
        d.cmd_dispatch(cmd, pre.grid[0], pre.grid[1], 1);
    }
}

/// Records the GEMV (or GEMM) of `plan` on `xy` (x `x_stride` apart: elements, uvec4 for
/// digits; unused for a pre-split x): a dispatch per matrix part for all activation rows,
/// or for a SIMT GEMV's full passes of activation rows and another for its last pass where
/// that has its own pipeline.
fn record_gemv(
    ctx: &Context,
    cmd: vk::CommandBuffer,
    mats: (&DeviceMatrix, Option<&DeviceMatrix>),
    plan: &Plan,
    xy: &XyBinding,
    p: &GemvParams,
    (x_stride, order): (u64, &mut DispatchOrder),
) {
    let d = &ctx.device.device;
    // SAFETY: cmd is in the recording state (caller's contract); every handle is valid.
    unsafe { xy.record(ctx, cmd) };
    let Some(last) = plan.last_pass_pipeline else {
        // SAFETY: as above.
        unsafe { d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, plan.pipeline) };
        let passes = Passes {
            first: 0,
            count: 1,
            token_tiles: u64::from(p.m).div_ceil(plan.tokens_per_wg),
        };
        record_pass(ctx, cmd, mats, plan, p, (x_stride, order), passes);
        return;
    };
    // Passes of `pass_rows` activation rows, the last of the rows left with its own
    // pipeline: the full passes share one dispatch (workgroup z takes a pass), so that
    // nothing orders them (a call adding a residual in place serializes its dispatches).
    let pass_rows = plan.tokens_per_wg as u32;
    let last_rows = p.m - (p.m - 1) / pass_rows * pass_rows;
    let (full, last) = match last == plan.pipeline {
        true => (p.m / pass_rows, None),
        false => ((p.m - last_rows) / pass_rows, Some(last)),
    };
    let mut first = 0;
    for (pipeline, mut left) in [(Some(plan.pipeline), full), (last, 1)] {
        let Some(pipeline) = pipeline.filter(|_| left > 0) else {
            continue;
        };
        // SAFETY: as above; set 1 stays bound (every kernel has the same layout).
        unsafe { d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, pipeline) };
        while left > 0 {
            let count = left.min(MAX_PASSES_PER_DISPATCH);
            let passes = Passes {
                first,
                count,
                token_tiles: 1,
            };
            record_pass(ctx, cmd, mats, plan, p, (x_stride, &mut *order), passes);
            first += count * pass_rows;
            left -= count;
        }
    }
}

/// Passes one dispatch takes at most: Vulkan's least `maxComputeWorkGroupCount[2]`.
const MAX_PASSES_PER_DISPATCH: u32 = 65535;

/// Activation rows recorded as one dispatch per matrix part: a SIMT GEMV's passes (the
/// first one's first activation row and how many, along workgroup z), or a kernel's tiles
/// of activation rows (one "pass" of `token_tiles` workgroups per row tile).
#[derive(Clone, Copy)]
struct Passes {
    first: u32,
    count: u32,
    token_tiles: u64,
}

/// Records `passes` of `plan` (one dispatch, or more past the device's grid, per matrix
/// part, its workgroups along z taking the passes), with their pipeline and set 1 bound.
fn record_pass(
    ctx: &Context,
    cmd: vk::CommandBuffer,
    (mat, second): (&DeviceMatrix, Option<&DeviceMatrix>),
    plan: &Plan,
    p: &GemvParams,
    (x_stride, order): (u64, &mut DispatchOrder),
    passes: Passes,
) {
    let d = &ctx.device.device;
    let layout = ctx.pipelines.layout;
    let bind = |index: u32, set: vk::DescriptorSet| {
        let bind_point = vk::PipelineBindPoint::COMPUTE;
        // SAFETY: as above.
        unsafe { d.cmd_bind_descriptor_sets(cmd, bind_point, layout, index, &[set], &[]) };
    };
    for (index, part) in mat.parts.iter().enumerate() {
        let total = (part.rows as u64).div_ceil(plan.rows_per_wg) * passes.token_tiles;
        bind(0, part.set);
        // A pair's second matrix has the same parts (`vk::multi` pairs only such).
        if let Some(up) = second.and_then(|m| m.parts.get(index)) {
            bind(2, up.set);
        }
        // The 12th word: the SIMT GEMV's first activation row, or where the tensor-core
        // GEMM's K slices write their sums; workgroup z: the pass, or the K slice.
        let (word11, depth) = match plan.k_slices {
            Some(s) => (s.partials_word, s.count),
            None => (passes.first, passes.count),
        };
        let push = part_push(mat, plan, part, p, x_stride);
        // SAFETY: as above.
        unsafe { record_dispatches(ctx, cmd, (total, push), [p.m, word11], (depth, &mut *order)) };
    }
}
