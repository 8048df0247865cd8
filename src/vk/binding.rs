//! Bindings (`q4vk_gemv_binding_create`): one GEMV call's matrix, x, y and workspace resolved
//! once — kernels chosen, pipelines created, and on devices without
//! `VK_KHR_push_descriptor` descriptor sets of its own, written once and never rewritten —
//! so that a command buffer recorded with it can be submitted any number of times, however
//! many other GEMVs run on the context in between (the ring of `vk::xy_sets` serves one-shot
//! recording only).

use super::context::Context;
use super::device::Device;
use super::gemv_plan::{decide, Room};
use super::matrix::DeviceMatrix;
use super::params::{BufferRange, EpilogueOperands, GemvParams};
use super::record::{record_bound, xy_pairs, CallPlan, XyBinding};
use super::xy_sets::{buffer_infos, writes, Set1, SET1_BINDINGS};
use crate::error::{invalid, Error, Result};
use ash::vk;
use std::sync::{Arc, Weak};

/// One GEMV call, resolved and bound for recording any number of times.
pub struct Binding {
    call: CallPlan,
    params: GemvParams,
    bound: Vec<XyBinding>,
    /// The pool of its sets (null with push descriptors).
    pool: vk::DescriptorPool,
    /// The matrix it was made for (alive while this upgrades).
    matrix: Weak<()>,
    device: Arc<Device>,
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
        let room = workspace.map_or(Room::None, |w| Room::Bytes(w.range));
        let call = CallPlan::of(ctx, mat, p, decide(&ctx.rules, &mat.form, p, room)?)?;
        let main = Set1 {
            read: x,
            written: y,
            operands: *ops,
        };
        let pairs = xy_pairs(ctx, &call, &main, p, workspace)?;
        let mut this = Binding {
            call,
            params: *p,
            bound: Vec::with_capacity(pairs.as_slice().len()),
            pool: vk::DescriptorPool::null(),
            matrix: mat.liveness(),
            device: ctx.device.clone(),
        };
        if ctx.device.push_descriptor.is_some() {
            this.bound = pairs
                .as_slice()
                .iter()
                .map(|&set1| XyBinding::Push(set1))
                .collect();
            return Ok(this);
        }
        let d = &ctx.device.device;
        let pairs = pairs.as_slice();
        let count = pairs.len() as u32;
        let sizes = [vk::DescriptorPoolSize {
            ty: vk::DescriptorType::STORAGE_BUFFER,
            descriptor_count: SET1_BINDINGS * count,
        }];
        // SAFETY: valid create info; the pool is destroyed with the binding (Drop), also
        // when a later step fails.
        this.pool = unsafe {
            d.create_descriptor_pool(
                &vk::DescriptorPoolCreateInfo::default()
                    .max_sets(count)
                    .pool_sizes(&sizes),
                None,
            )
        }
        .map_err(|e| Error::vk("vkCreateDescriptorPool", e))?;
        ctx.device
            .namer
            .name(this.pool, "q4vk binding descriptor pool");
        let layouts = vec![ctx.pipelines.xy_set; pairs.len()];
        // SAFETY: sets of our pool, sized for them.
        let sets = unsafe {
            d.allocate_descriptor_sets(
                &vk::DescriptorSetAllocateInfo::default()
                    .descriptor_pool(this.pool)
                    .set_layouts(&layouts),
            )
        }
        .map_err(|e| Error::vk("vkAllocateDescriptorSets", e))?;
        for (&set, set1) in sets.iter().zip(pairs) {
            let infos = buffer_infos(set1);
            // SAFETY: a fresh set of this device, not yet in any command buffer.
            unsafe { d.update_descriptor_sets(&writes(&infos, set), &[]) };
            this.bound.push(XyBinding::Set(set));
        }
        Ok(this)
    }

    /// Records the call into `cmd` (no barrier before or after but the call's own), on
    /// `mat`, which must be the matrix it was made for; `ctx` must be the context that made
    /// it.
    ///
    /// # Safety
    /// `cmd` is a command buffer of `ctx`'s device in the recording state; `ctx` is the
    /// context the binding was made on.
    pub unsafe fn record(
        &self,
        ctx: &Context,
        cmd: vk::CommandBuffer,
        mat: &DeviceMatrix,
    ) -> Result<()> {
        if !self.matrix_alive() || !mat.is(&self.matrix) {
            return Err(invalid!("the binding was made for another matrix"));
        }
        record_bound(ctx, cmd, mat, &self.params, &self.call, &self.bound);
        Ok(())
    }

    /// Whether the matrix the binding was made for still exists.
    pub fn matrix_alive(&self) -> bool {
        self.matrix.strong_count() > 0
    }

    /// Whether the binding records on `device`.
    pub fn same_device(&self, device: &Device) -> bool {
        self.device.device.handle() == device.device.handle()
    }
}

impl Drop for Binding {
    fn drop(&mut self) {
        // SAFETY: our pool (null is ignored); command buffers recorded with the binding
        // must have finished executing (the caller's contract of q4vk_gemv_binding_destroy).
        unsafe { self.device.device.destroy_descriptor_pool(self.pool, None) };
    }
}
