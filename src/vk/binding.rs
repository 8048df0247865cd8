//! Bindings (`q4vk_gemv_binding_create`, `q4vk_gemv_binding_create_multi`): one GEMV
//! call's (or several on one x) matrix, x, y and workspace resolved once — kernels chosen,
//! pipelines created, and on devices without `VK_KHR_push_descriptor` descriptor sets of
//! its own, written once and never rewritten —
//! so that a command buffer recorded with it can be submitted any number of times, however
//! many other GEMVs run on the context in between (the ring of `vk::xy_sets` serves one-shot
//! recording only).

use super::context::Context;
use super::device::Device;
use super::liveness::Token;
use super::matrix::DeviceMatrix;
use super::multi::{record_call, resolve, MultiCall, Resolved};
use super::params::{BufferRange, EpilogueOperands, GemvParams};
use super::record::{serial_writes, xy_pairs, CallPlan, XyBinding, XyPairs};
use super::xy_sets::{buffer_infos, writes, Set1, SET1_BINDINGS};
use crate::error::{invalid, Error, Result};
use ash::vk;
use std::sync::Arc;

/// One GEMV call (or several on one x), resolved and bound for recording any number of
/// times.
pub struct Binding {
    calls: Vec<BoundCall>,
    /// The pool of its sets (null with push descriptors).
    pool: vk::DescriptorPool,
    device: Arc<Device>,
    /// The context it was made on, whose pipelines and set layout it names.
    context: Token,
}

/// One call of a binding: resolved (its kernels, parameters, barrier and role), its
/// bindings of set 1, and its matrix (alive while this upgrades).
struct BoundCall {
    resolved: Resolved,
    bound: Vec<XyBinding>,
    matrix: Token,
}

impl Binding {
    /// Resolves the call with `p` on `mat` for x, y and the epilogue's operands `ops` (all
    /// checked by the caller with `vk::gemv::validate` and `validate_operands`) and the
    /// optional workspace (checked here, as `q4vk_cmd_gemv` checks it), creates its
    /// pipelines and, without push descriptors, allocates and writes its sets.
    pub fn new(
        ctx: &Context,
        mat: &DeviceMatrix,
        (x, y): (BufferRange, BufferRange),
        ops: &EpilogueOperands,
        p: &GemvParams,
        workspace: Option<BufferRange>,
    ) -> Result<Binding> {
        let p = &p.with_operands(&y, ops);
        let call = CallPlan::for_workspace(ctx, mat, p, workspace)?;
        let main = Set1::call(x, y, *ops);
        let sets = xy_pairs(ctx, &call, &main, p, workspace)?;
        let one = Resolved::alone(call, *p, sets, serial_writes(&main));
        Binding::bind(ctx, vec![(one, mat.liveness())])
    }

    /// A binding of several calls on one x (`vk::gemv::record_multi`'s rules: checked,
    /// resolved, a shared pre-pass, barriers where calls depend on earlier ones).
    pub fn new_multi(ctx: &Context, calls: &[MultiCall]) -> Result<Binding> {
        let resolved = resolve(ctx, calls)?;
        let with_matrices = resolved
            .into_iter()
            .zip(calls)
            .map(|(r, c)| (r, c.mat.liveness()))
            .collect();
        Binding::bind(ctx, with_matrices)
    }

    /// Binds resolved calls: pushed at each record with push descriptors, else sets of a
    /// pool of the binding's own, written once here.
    fn bind(ctx: &Context, resolved: Vec<(Resolved, Token)>) -> Result<Binding> {
        let mut this = Binding {
            calls: Vec::with_capacity(resolved.len()),
            pool: vk::DescriptorPool::null(),
            device: ctx.device.clone(),
            context: ctx.liveness(),
        };
        let count: usize = resolved.iter().map(|(r, _)| r.sets.as_slice().len()).sum();
        if ctx.device.push_descriptor.is_none() {
            this.pool = own_pool(ctx, count as u32)?;
        }
        for (r, matrix) in resolved {
            let bound = match this.pool == vk::DescriptorPool::null() {
                true => r
                    .sets
                    .as_slice()
                    .iter()
                    .map(|&s| XyBinding::Push(s))
                    .collect(),
                false => own_sets(ctx, this.pool, &r.sets)?,
            };
            this.calls.push(BoundCall {
                resolved: r,
                bound,
                matrix,
            });
        }
        Ok(this)
    }

    /// Records the calls into `cmd` (no barrier before or after but the calls' own), on
    /// `mats`, which must be the matrices it was made for, in order; `ctx` must be the
    /// context that made it.
    ///
    /// # Safety
    /// `cmd` is a command buffer of `ctx`'s device in the recording state; `ctx` is the
    /// context the binding was made on.
    pub unsafe fn record(
        &self,
        ctx: &Context,
        cmd: vk::CommandBuffer,
        mats: &[&DeviceMatrix],
    ) -> Result<()> {
        let same = mats.len() == self.calls.len()
            && self.calls.iter().zip(mats).all(|(c, m)| m.is(&c.matrix));
        if !self.matrices_alive() || !same {
            return Err(invalid!("the binding was made for other matrices"));
        }
        for (i, (c, mat)) in self.calls.iter().zip(mats).enumerate() {
            let previous = i.checked_sub(1).map(|j| mats[j]);
            record_call(ctx, cmd, &c.resolved, (mat, previous), &c.bound);
        }
        Ok(())
    }

    /// Whether every matrix the binding was made for still exists.
    pub fn matrices_alive(&self) -> bool {
        self.calls.iter().all(|c| c.matrix.strong_count() > 0)
    }

    /// Whether the binding was made on `ctx` (not merely on a context of its device, nor on
    /// a destroyed one whose memory `ctx` took over).
    pub fn made_on(&self, ctx: &Context) -> bool {
        ctx.is(&self.context)
    }
}

/// A descriptor pool for `count` sets of set 1, named and owned by a binding.
fn own_pool(ctx: &Context, count: u32) -> Result<vk::DescriptorPool> {
    let sizes = [vk::DescriptorPoolSize {
        ty: vk::DescriptorType::STORAGE_BUFFER,
        descriptor_count: SET1_BINDINGS * count,
    }];
    // SAFETY: valid create info; the pool is destroyed with the binding (Drop), also when
    // a later step fails.
    let pool = unsafe {
        ctx.device.device.create_descriptor_pool(
            &vk::DescriptorPoolCreateInfo::default()
                .max_sets(count)
                .pool_sizes(&sizes),
            None,
        )
    }
    .map_err(|e| Error::vk("vkCreateDescriptorPool", e))?;
    ctx.device.namer.name(pool, "q4vk binding descriptor pool");
    Ok(pool)
}

/// Sets of `pool` written with `sets`, once.
fn own_sets(ctx: &Context, pool: vk::DescriptorPool, sets: &XyPairs) -> Result<Vec<XyBinding>> {
    let d = &ctx.device.device;
    let sets = sets.as_slice();
    let layouts = vec![ctx.pipelines.xy_set; sets.len()];
    // SAFETY: sets of our pool, sized for them.
    let handles = unsafe {
        d.allocate_descriptor_sets(
            &vk::DescriptorSetAllocateInfo::default()
                .descriptor_pool(pool)
                .set_layouts(&layouts),
        )
    }
    .map_err(|e| Error::vk("vkAllocateDescriptorSets", e))?;
    Ok(handles
        .iter()
        .zip(sets)
        .map(|(&set, set1)| {
            let infos = buffer_infos(set1);
            // SAFETY: a fresh set of this device, not yet in any command buffer.
            unsafe { d.update_descriptor_sets(&writes(&infos, set), &[]) };
            XyBinding::Set(set)
        })
        .collect())
}

impl Drop for Binding {
    fn drop(&mut self) {
        // SAFETY: our pool (null is ignored); command buffers recorded with the binding
        // must have finished executing (the caller's contract of q4vk_gemv_binding_destroy).
        unsafe { self.device.device.destroy_descriptor_pool(self.pool, None) };
    }
}
