//! One-shot synchronous submission on q4vk's queue: a reusable command buffer and fence,
//! and the host's queue lock around each submit to an adopted queue.

use super::device::Device;
use crate::error::{Error, Result};
use ash::vk;
use std::ffi::c_void;
use std::sync::Arc;

/// The host's queue lock callbacks (`q4vk_queue_lock_fn`) and their user pointer.
#[derive(Debug, Clone, Copy)]
pub struct QueueLock {
    /// Called before each of q4vk's submits.
    pub lock: unsafe extern "C" fn(*mut c_void),
    /// Called after it.
    pub unlock: unsafe extern "C" fn(*mut c_void),
    /// Passed to both.
    pub user: *mut c_void,
}

// SAFETY: the host promises thread-safe callbacks (documented on q4vk_context_desc).
unsafe impl Send for QueueLock {}
// SAFETY: as above.
unsafe impl Sync for QueueLock {}

/// A command pool, one primary command buffer and a fence.
pub struct Submitter {
    device: Arc<Device>,
    pool: vk::CommandPool,
    /// The command buffer `run` records into.
    pub cmd: vk::CommandBuffer,
    fence: vk::Fence,
    /// A wait for the fence failed: the device may still be executing the last submission
    /// (reading the command buffer and the caller's staging), so nothing is reused again.
    lost: bool,
}

#[cfg(test)]
thread_local! {
    /// Test hook: the next fence wait on this thread reports this error (after really
    /// waiting, so the device is idle).
    static FAIL_NEXT_WAIT: std::cell::Cell<Option<vk::Result>> =
        const { std::cell::Cell::new(None) };
}

/// Test hook: makes the next fence wait of a [`Submitter`] on this thread fail with `result`.
#[cfg(test)]
pub fn fail_next_wait(result: vk::Result) {
    FAIL_NEXT_WAIT.with(|c| c.set(Some(result)));
}

// SAFETY: used only behind the context's mutex.
unsafe impl Send for Submitter {}

/// Records a global memory barrier: writes of `src` (stage, access) before accesses of
/// `dst`.
///
/// # Safety
/// `cmd` is a command buffer of `device` in the recording state, outside a render pass.
pub unsafe fn record_barrier(
    device: &ash::Device,
    cmd: vk::CommandBuffer,
    src: (vk::PipelineStageFlags, vk::AccessFlags),
    dst: (vk::PipelineStageFlags, vk::AccessFlags),
) {
    let barrier = [vk::MemoryBarrier::default()
        .src_access_mask(src.1)
        .dst_access_mask(dst.1)];
    // SAFETY: the caller's contract.
    unsafe {
        device.cmd_pipeline_barrier(
            cmd,
            src.0,
            dst.0,
            vk::DependencyFlags::empty(),
            &barrier,
            &[],
            &[],
        )
    }
}

/// Transfer writes before shader reads (uploaded matrices before the kernels).
pub const TRANSFER_TO_SHADER: [(vk::PipelineStageFlags, vk::AccessFlags); 2] = [
    (
        vk::PipelineStageFlags::TRANSFER,
        vk::AccessFlags::TRANSFER_WRITE,
    ),
    (
        vk::PipelineStageFlags::COMPUTE_SHADER,
        vk::AccessFlags::SHADER_READ,
    ),
];

/// Shader writes before host reads (results read back after the fence).
pub const SHADER_TO_HOST: [(vk::PipelineStageFlags, vk::AccessFlags); 2] = [
    (
        vk::PipelineStageFlags::COMPUTE_SHADER,
        vk::AccessFlags::SHADER_WRITE,
    ),
    (vk::PipelineStageFlags::HOST, vk::AccessFlags::HOST_READ),
];

impl Submitter {
    /// Creates the pool, command buffer and fence on q4vk's queue family.
    pub fn new(device: &Arc<Device>) -> Result<Submitter> {
        let d = &device.device;
        // SAFETY: valid device and create infos; partial results are destroyed by Drop.
        unsafe {
            let pool = d
                .create_command_pool(
                    &vk::CommandPoolCreateInfo::default()
                        .queue_family_index(device.queue_family)
                        .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
                    None,
                )
                .map_err(|e| Error::vk("vkCreateCommandPool", e))?;
            device.namer.name(pool, "q4vk command pool");
            let mut this = Submitter {
                device: device.clone(),
                pool,
                cmd: vk::CommandBuffer::null(),
                fence: vk::Fence::null(),
                lost: false,
            };
            this.cmd = d
                .allocate_command_buffers(
                    &vk::CommandBufferAllocateInfo::default()
                        .command_pool(pool)
                        .level(vk::CommandBufferLevel::PRIMARY)
                        .command_buffer_count(1),
                )
                .map_err(|e| Error::vk("vkAllocateCommandBuffers", e))?[0];
            device.namer.name(this.cmd, "q4vk command buffer");
            this.fence = d
                .create_fence(&vk::FenceCreateInfo::default(), None)
                .map_err(|e| Error::vk("vkCreateFence", e))?;
            device.namer.name(this.fence, "q4vk fence");
            Ok(this)
        }
    }

    /// Fails with `DeviceLost` once a wait for the fence has failed: from then on the
    /// command buffer, the fence and whatever the last submission read stay untouched.
    pub fn check_usable(&self) -> Result<()> {
        if self.lost {
            return Err(Error::DeviceLost(
                "an earlier vkWaitForFences of this context failed, so its last submission may still be running; the context no longer submits (destroy it)".into(),
            ));
        }
        Ok(())
    }

    /// Waits for the fence (all of q4vk's submissions are waited for before the next).
    fn wait(&self) -> std::result::Result<(), vk::Result> {
        // SAFETY: our fence.
        let waited = unsafe {
            self.device
                .device
                .wait_for_fences(&[self.fence], true, u64::MAX)
        };
        #[cfg(test)]
        if let Some(injected) = FAIL_NEXT_WAIT.with(|c| c.take()) {
            return waited.and(Err(injected));
        }
        waited
    }

    /// Records with `record`, submits to the queue (inside the host's lock, if any) and
    /// waits for completion. A failed wait marks the submitter lost ([`Self::check_usable`]).
    pub fn run(
        &mut self,
        lock: Option<&QueueLock>,
        record: impl FnOnce(vk::CommandBuffer) -> Result<()>,
    ) -> Result<()> {
        self.check_usable()?;
        let d = &self.device.device;
        if self.device.queue == vk::Queue::null() {
            return Err(Error::Unsupported(
                "the context was created without a queue (desc->queue is NULL), so q4vk cannot submit; use q4vk_cmd_gemv".into(),
            ));
        }
        // SAFETY: the command buffer and fence are ours and idle (every run waits).
        unsafe {
            d.reset_command_buffer(self.cmd, vk::CommandBufferResetFlags::empty())
                .map_err(|e| Error::vk("vkResetCommandBuffer", e))?;
            d.begin_command_buffer(
                self.cmd,
                &vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
            )
            .map_err(|e| Error::vk("vkBeginCommandBuffer", e))?;
            let recorded = record(self.cmd);
            let ended = d
                .end_command_buffer(self.cmd)
                .map_err(|e| Error::vk("vkEndCommandBuffer", e));
            recorded?;
            ended?;
            let cmds = [self.cmd];
            let submit = [vk::SubmitInfo::default().command_buffers(&cmds)];
            if let Some(l) = lock {
                (l.lock)(l.user);
            }
            let submitted = d.queue_submit(self.device.queue, &submit, self.fence);
            if let Some(l) = lock {
                (l.unlock)(l.user);
            }
            submitted.map_err(|e| Error::vk("vkQueueSubmit", e))?;
            if let Err(e) = self.wait() {
                // Resetting the fence now would let the next call reuse the command buffer
                // and staging while the device may still read them.
                self.lost = true;
                return Err(Error::vk("vkWaitForFences", e));
            }
            d.reset_fences(&[self.fence])
                .map_err(|e| Error::vk("vkResetFences", e))
        }
    }
}

impl Drop for Submitter {
    fn drop(&mut self) {
        // SAFETY: ours, idle: every run waited, and after a failed wait this waits again.
        unsafe {
            if self.lost {
                let _ = self.wait();
            }
            if self.fence != vk::Fence::null() {
                self.device.device.destroy_fence(self.fence, None);
            }
            self.device.device.destroy_command_pool(self.pool, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vk::context::{Context, ContextConfig};
    use crate::vk::log::Logger;

    /// After a failed fence wait (other than DEVICE_LOST) the context refuses to submit
    /// again instead of reusing a command buffer the device may still be reading.
    #[test]
    fn failed_wait_makes_the_context_lost() {
        let logger = Logger::new(None, std::ptr::null_mut(), 0);
        let ctx = Context::new(ContextConfig::default(), logger).expect("a Vulkan device");
        ctx.submit(|_| Ok(())).expect("a first submission");
        fail_next_wait(vk::Result::ERROR_OUT_OF_HOST_MEMORY);
        let first = ctx.submit(|_| Ok(())).unwrap_err();
        assert!(matches!(first, Error::OutOfHostMemory(_)), "{first}");
        let next = ctx.submit(|_| Ok(())).unwrap_err();
        assert!(matches!(next, Error::DeviceLost(_)), "{next}");
    }
}
