//! Several GEMVs on one x recorded as one call (`q4vk_cmd_gemv_multi`): Q, K and V on a
//! layer's input; gate, then up with the gate's SiLU. Every call is checked and resolved
//! before anything is recorded. x's pre-pass runs once where the calls' pre-passes are the
//! same and they share the workspace (the later calls record their kernels on it); a
//! barrier goes before a call only where it touches what an earlier call of the set wrote,
//! or writes what one read since the last barrier, so independent matrices run
//! back to back. A call whose gate operand is the previous call's y, on a matrix of the
//! same form and the same GEMV (SIMT or on GGUF blocks), runs with it as a gate+up pair:
//! one dispatch computes both matrices' rows, writes gate's y and y = act(gate) · up, with
//! no barrier between.

use super::context::Context;
use super::gemv_plan::{decide, paired, workspace_key, Room};
use super::matrix::DeviceMatrix;
use super::params::{BufferRange, EpilogueOperands, GemvParams};
use super::record::{
    compute_barrier, overlap, record_bound, record_prepass_of, serial_writes, validate,
    validate_operands, xy_pairs, CallPlan, XyBinding, XyPairs,
};
use super::xy_sets::Set1;
use crate::error::{invalid, Result};
use ash::vk;

/// Calls one multi call takes at most.
pub const MAX_CALLS: usize = 64;

/// One GEMV of a multi call, as the host gives it.
#[derive(Clone, Copy)]
pub struct MultiCall<'a> {
    /// Its matrix.
    pub mat: &'a DeviceMatrix,
    /// x (the same for every call) and its own y.
    pub x: BufferRange,
    /// Its output.
    pub y: BufferRange,
    /// Its epilogue's buffers.
    pub ops: EpilogueOperands,
    /// Its parameters (m, x's type and stride the same for every call).
    pub p: GemvParams,
    /// Its workspace, where it has one.
    pub workspace: Option<BufferRange>,
}

/// One call of a multi call, resolved: its kernels, its parameters (the workspace marked
/// filled where an earlier call's pre-pass serves it), its sets, whether a barrier
/// goes before it and how it records its kernel.
pub(super) struct Resolved {
    pub(super) call: CallPlan,
    pub(super) params: GemvParams,
    pub(super) sets: XyPairs,
    pub(super) barrier_before: bool,
    /// Its dispatches writing y are ordered among themselves (`record::serial_writes`).
    pub(super) serial: bool,
    pub(super) role: Role,
}

/// How a resolved call records its kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Its own kernel.
    Alone,
    /// The gate of a gate+up pair: its pre-pass only; the next call's kernel computes its
    /// rows.
    PairGate,
    /// The up of a gate+up pair: the pair kernel, the previous call's matrix in set 0 and
    /// its own in set 2.
    PairUp,
}

impl Resolved {
    /// A call resolved alone (`q4vk_cmd_gemv`'s).
    pub(super) fn alone(
        call: CallPlan,
        params: GemvParams,
        sets: XyPairs,
        serial: bool,
    ) -> Resolved {
        Resolved {
            call,
            params,
            sets,
            barrier_before: false,
            serial,
            role: Role::Alone,
        }
    }
}

/// Checks every call (as `q4vk_cmd_gemv` checks one; the same x, m, x stride and x type
/// for all; `args[i]` in messages) and resolves them in order.
pub(super) fn resolve(ctx: &Context, calls: &[MultiCall]) -> Result<Vec<Resolved>> {
    if calls.is_empty() || calls.len() > MAX_CALLS {
        return Err(invalid!(
            "count is {}; a multi call takes 1 to {MAX_CALLS} matrices",
            calls.len()
        ));
    }
    let first = &calls[0];
    let mut resolved: Vec<Resolved> = Vec::with_capacity(calls.len());
    // The pre-pass the workspace holds: its range's start and the writer's key.
    let mut filled: Option<(vk::Buffer, u64, u64)> = None;
    for (i, c) in calls.iter().enumerate() {
        let same = c.x == first.x
            && c.p.m == first.p.m
            && c.p.x_stride == first.p.x_stride
            && c.p.x_f16 == first.p.x_f16
            && c.p.x_round_f16 == first.p.x_round_f16
            && c.p.x_round_int8 == first.p.x_round_int8
            && c.mat.form.shape.k == first.mat.form.shape.k;
        if !same {
            return Err(invalid!(
                "args[{i}] differs from args[0] in x, m, x_row_stride, the x flags or k: a multi call runs matrices of one k on one x"
            ));
        }
        if c.p.workspace_filled {
            return Err(invalid!(
                "args[{i}].flags has Q4VK_GEMV_REUSE_WORKSPACE: a multi call decides which calls share a pre-pass"
            ));
        }
        let e = validate(ctx, c.mat, &c.x, &c.y, &c.p)
            .map_err(|e| e.prefixed(&format!("args[{i}]: ")))?;
        validate_operands(ctx, c.mat, &c.y, &c.ops, &c.p, &e)
            .map_err(|e| e.prefixed(&format!("args[{i}]: ")))?;
        let mut params = c.p.with_operands(&c.y, &c.ops);
        let choice = decide(&ctx.rules, &c.mat.form, &params, Room::of(c.workspace))?;
        if let (Some(_), Some(ws)) = (choice.prepass, c.workspace) {
            let key = workspace_key(&ctx.rules, c.mat, &c.p)?;
            let here = (ws.buffer, ws.offset, key);
            params.workspace_filled = filled == Some(here);
            filled = Some(here);
        }
        let pair = match resolved.last() {
            Some(gate) if pairs_with(ctx, &calls[i - 1], c, gate, &choice, &params) => {
                paired(&ctx.rules, &choice)
                    .filter(|_| !depends_on_earlier(calls, &resolved, i, Some(i - 1)))
            }
            _ => None,
        };
        let (call, role) = match pair {
            // The pair's kernel: gate's matrix (set 0) reading like up's call.
            Some(both) => (
                CallPlan::of(ctx, calls[i - 1].mat, &params, both)?,
                Role::PairUp,
            ),
            None => (CallPlan::of(ctx, c.mat, &params, choice)?, Role::Alone),
        };
        let main = Set1::call(c.x, c.y, c.ops);
        let sets = xy_pairs(ctx, &call, &main, &params, c.workspace)
            .map_err(|e| e.prefixed(&format!("args[{i}]: ")))?;
        let barrier_before = match role {
            Role::PairUp => false,
            _ => depends_on_earlier(calls, &resolved, i, None),
        };
        if role == Role::PairUp {
            if let Some(gate) = resolved.last_mut() {
                gate.role = Role::PairGate;
            }
        }
        resolved.push(Resolved {
            call,
            params,
            sets,
            barrier_before,
            serial: serial_writes(&main),
            role,
        });
    }
    Ok(resolved)
}

/// Whether `up` (with `choice` and `params`, resolved after `gate`) can run with `gate`
/// as one gate+up pair: up's gate operand is exactly gate's y (same stride and type),
/// gate stores plainly, both run the same GEMV (SIMT or on GGUF blocks, subgroup builds)
/// on matrices of the same form and parts without a column order, and up reads x as gate
/// does (the same pre-pass output, or x itself).
fn pairs_with(
    ctx: &Context,
    gate: &MultiCall,
    up: &MultiCall,
    gate_resolved: &Resolved,
    choice: &super::gemv_plan::Choice,
    params: &GemvParams,
) -> bool {
    let (ge, ue) = (gate.p.epilogue, up.p.epilogue);
    let plain_gate = ge.bias_f16.is_none() && ge.gate.is_none() && !ge.residual;
    let same_parts = gate.mat.parts.len() == up.mat.parts.len()
        && gate
            .mat
            .parts
            .iter()
            .zip(&up.mat.parts)
            .all(|(a, b)| (a.first_row, a.rows) == (b.first_row, b.rows));
    let shares_x = match (&gate_resolved.call.prepass, &choice.prepass) {
        (None, None) => true,
        (Some(_), Some(_)) => params.workspace_filled,
        _ => false,
    };
    !ctx.rules.portable
        && gate_resolved.role == Role::Alone
        && plain_gate
        && ue.gate.is_some()
        && up.ops.gate == Some(gate.y)
        && ge.y_f16 == ue.y_f16
        && gate.p.y_stride == up.p.y_stride
        && gate.mat.form == up.mat.form
        && !gate.mat.form.column_order
        && same_parts
        && shares_x
        && gate_resolved.call.choice.kernel == choice.kernel
}

/// Whether call `i` must wait for the calls recorded since the last barrier (but `skip`):
/// it reads or writes what one of them wrote (its y), or writes what one of them read (an
/// epilogue operand, or its workspace, which its kernel reads; a call's own pre-pass has
/// a barrier before it, so its workspace writes wait already).
fn depends_on_earlier(
    calls: &[MultiCall],
    resolved: &[Resolved],
    i: usize,
    skip: Option<usize>,
) -> bool {
    let since = resolved.iter().rposition(|r| r.barrier_before).unwrap_or(0);
    let touches = |a: &BufferRange, b: &BufferRange| {
        a.buffer == b.buffer && overlap((a.offset, a.range), (b.offset, b.range))
    };
    let reads = |c: &MultiCall| -> Vec<BufferRange> {
        [c.ops.bias, c.ops.residual, c.ops.gate]
            .into_iter()
            .flatten()
            .collect()
    };
    let now = &calls[i];
    let earlier = (since..i).filter(|&j| Some(j) != skip).map(|j| &calls[j]);
    earlier.into_iter().any(|before| {
        touches(&now.y, &before.y)
            || reads(now).iter().any(|r| touches(r, &before.y))
            || reads(before).iter().any(|r| touches(&now.y, r))
            || before.workspace.is_some_and(|w| touches(&now.y, &w))
    })
}

/// Records the calls (checked and resolved first: nothing is recorded on error), each
/// with its sets bound through the ring or pushed.
pub fn record_multi(ctx: &Context, cmd: vk::CommandBuffer, calls: &[MultiCall]) -> Result<()> {
    let resolved = resolve(ctx, calls)?;
    let mut bound = Vec::with_capacity(resolved.len());
    for r in &resolved {
        let sets: Vec<XyBinding> = r
            .sets
            .as_slice()
            .iter()
            .map(|s| XyBinding::of(ctx, s))
            .collect::<Result<_>>()?;
        bound.push(sets);
    }
    for (i, (r, sets)) in resolved.iter().zip(&bound).enumerate() {
        let previous = i.checked_sub(1).map(|j| calls[j].mat);
        record_call(ctx, cmd, r, (calls[i].mat, previous), sets);
    }
    Ok(())
}

/// Records resolved call `r` (on `mat`; `previous`: the matrix of the call before it) with
/// its bindings `bound`: the barrier it needs, then its kernel as its role says.
pub(super) fn record_call(
    ctx: &Context,
    cmd: vk::CommandBuffer,
    r: &Resolved,
    (mat, previous): (&DeviceMatrix, Option<&DeviceMatrix>),
    bound: &[XyBinding],
) {
    if r.barrier_before {
        let (write, read) = (vk::AccessFlags::SHADER_WRITE, vk::AccessFlags::SHADER_READ);
        // SAFETY: `cmd` is recording (the caller's contract).
        unsafe { compute_barrier(ctx, cmd, write, read | write) };
    }
    match (r.role, previous) {
        (Role::PairGate, _) => record_prepass_of(ctx, cmd, &r.call, bound, r.params.m),
        (Role::PairUp, Some(gate)) => record_bound(
            ctx,
            cmd,
            (gate, Some(mat)),
            &r.params,
            &r.call,
            (bound, r.serial),
        ),
        _ => record_bound(ctx, cmd, (mat, None), &r.params, &r.call, (bound, r.serial)),
    }
}
