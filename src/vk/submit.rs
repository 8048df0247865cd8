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
}

// SAFETY: used only behind the context's mutex.
unsafe impl Send for Submitter {}

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
            let mut this = Submitter {
                device: device.clone(),
                pool,
                cmd: vk::CommandBuffer::null(),
                fence: vk::Fence::null(),
            };
            this.cmd = d
                .allocate_command_buffers(
                    &vk::CommandBufferAllocateInfo::default()
                        .command_pool(pool)
                        .level(vk::CommandBufferLevel::PRIMARY)
                        .command_buffer_count(1),
                )
                .map_err(|e| Error::vk("vkAllocateCommandBuffers", e))?[0];
            this.fence = d
                .create_fence(&vk::FenceCreateInfo::default(), None)
                .map_err(|e| Error::vk("vkCreateFence", e))?;
            Ok(this)
        }
    }

    /// Records with `record`, submits to the queue (inside the host's lock, if any) and
    /// waits for completion.
    pub fn run(
        &mut self,
        lock: Option<&QueueLock>,
        record: impl FnOnce(vk::CommandBuffer) -> Result<()>,
    ) -> Result<()> {
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
            let waited = d
                .wait_for_fences(&[self.fence], true, u64::MAX)
                .map_err(|e| Error::vk("vkWaitForFences", e));
            d.reset_fences(&[self.fence])
                .map_err(|e| Error::vk("vkResetFences", e))?;
            waited
        }
    }
}

impl Drop for Submitter {
    fn drop(&mut self) {
        // SAFETY: ours, idle (every run waited).
        unsafe {
            if self.fence != vk::Fence::null() {
                self.device.device.destroy_fence(self.fence, None);
            }
            self.device.device.destroy_command_pool(self.pool, None);
        }
    }
}
