//! Set 1 of the GEMV layout ([`Set1`]: x, y and the epilogue's operands) and its
//! descriptor sets on devices without `VK_KHR_push_descriptor`: a ring of at
//! most `RING` sets per context. Each GEMV writes the next set of the ring (one that records
//! a pre-pass writes two), so memory is bounded and no set ever names a buffer handle
//! the host may since have destroyed and reused. A set is rewritten only after `RING`
//! further sets were taken on the context; the host's side of that rule is stated on
//! `q4vk_cmd_gemv`.

use super::device::Device;
use super::params::{BufferRange, EpilogueOperands};
use crate::error::{Error, Result};
use ash::vk;
use std::sync::Arc;

/// Sets in the ring (`Q4VK_CMD_GEMV_SET_RING` of the C API).
pub(crate) const RING: usize = 4096;

/// Sets per descriptor pool; pools are created as the ring fills.
const SETS_PER_POOL: u32 = 64;

/// Bindings of set 1: what a dispatch reads (0), what it writes (1), then the epilogue's
/// bias (2) and its gate or residual (3) (`shaders/epilogue.glsl`). With the matrix's four
/// in set 0, every kernel stays within 8 storage buffers per stage, the limit of some
/// devices (`maxPerStageDescriptorStorageBuffers`).
pub const SET1_BINDINGS: u32 = 4;

/// What one dispatch binds in set 1. Where the call has no such operand, bindings 2 and 3
/// name the buffer read: a valid, readable descriptor that the kernel's epilogue never
/// touches (the pre-passes declare only bindings 0 and 1). A call has a gate or a
/// residual, not both (`ffi::gemv` refuses the pair).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Set1 {
    /// Binding 0: x, or the workspace the kernel reads.
    pub read: BufferRange,
    /// Binding 1: y, or the workspace a pre-pass writes.
    pub written: BufferRange,
    /// Bindings 2 and 3.
    pub operands: EpilogueOperands,
}

impl Set1 {
    /// A dispatch reading `read` and writing `written`, with no epilogue operand.
    pub fn pair(read: BufferRange, written: BufferRange) -> Set1 {
        Set1 {
            read,
            written,
            operands: EpilogueOperands::NONE,
        }
    }

    /// A GEMV's kernel reading x and writing y, with the epilogue's operands `operands`.
    pub fn call(x: BufferRange, y: BufferRange, operands: EpilogueOperands) -> Set1 {
        Set1 {
            read: x,
            written: y,
            operands,
        }
    }

    /// The ranges of bindings 0 to 3.
    fn ranges(&self) -> [BufferRange; SET1_BINDINGS as usize] {
        let o = &self.operands;
        let or_read = |b: Option<BufferRange>| b.unwrap_or(self.read);
        [
            self.read,
            self.written,
            or_read(o.bias),
            or_read(o.gate.or(o.residual)),
        ]
    }
}

/// The ring: sets allocated on first use, then reused in turn.
pub struct XySets {
    pools: Vec<vk::DescriptorPool>,
    sets: Vec<vk::DescriptorSet>,
    next: usize,
    device: Arc<Device>,
}

impl XySets {
    /// An empty ring.
    pub fn new(device: &Arc<Device>) -> XySets {
        XySets {
            pools: Vec::new(),
            sets: Vec::new(),
            next: 0,
            device: device.clone(),
        }
    }

    /// Sets allocated so far (at most `RING`).
    pub fn allocated(&self) -> usize {
        self.sets.len()
    }

    /// Descriptor pools created so far.
    pub fn pools(&self) -> usize {
        self.pools.len()
    }

    /// The next set of the ring, written with `bound`.
    pub fn next(
        &mut self,
        layout: vk::DescriptorSetLayout,
        bound: &Set1,
    ) -> Result<vk::DescriptorSet> {
        if self.next == self.sets.len() && self.sets.len() < RING {
            self.allocate(layout)?;
        }
        let set = self.sets[self.next];
        // SAFETY: a set of this device; the last GEMV that bound it took it RING sets ago, so
        // no pending command buffer uses it (the contract of q4vk_cmd_gemv).
        unsafe {
            let infos = buffer_infos(bound);
            self.device
                .device
                .update_descriptor_sets(&writes(&infos, set), &[]);
        }
        self.next = (self.next + 1) % RING;
        Ok(set)
    }

    /// Allocates one more set (and a pool when the last one is full).
    fn allocate(&mut self, layout: vk::DescriptorSetLayout) -> Result<()> {
        let d = &self.device.device;
        // SAFETY: valid create and allocate infos; the pool is ours.
        unsafe {
            if self.sets.len().is_multiple_of(SETS_PER_POOL as usize) {
                let sizes = [vk::DescriptorPoolSize {
                    ty: vk::DescriptorType::STORAGE_BUFFER,
                    descriptor_count: SET1_BINDINGS * SETS_PER_POOL,
                }];
                let pool = d
                    .create_descriptor_pool(
                        &vk::DescriptorPoolCreateInfo::default()
                            .max_sets(SETS_PER_POOL)
                            .pool_sizes(&sizes),
                        None,
                    )
                    .map_err(|e| Error::vk("vkCreateDescriptorPool", e))?;
                let name = format!("q4vk x/y descriptor pool {}", self.pools.len());
                self.device.namer.name(pool, &name);
                self.pools.push(pool);
            }
            let layouts = [layout];
            let set = d
                .allocate_descriptor_sets(
                    &vk::DescriptorSetAllocateInfo::default()
                        .descriptor_pool(*self.pools.last().expect("a pool"))
                        .set_layouts(&layouts),
                )
                .map_err(|e| Error::vk("vkAllocateDescriptorSets", e))?[0];
            self.sets.push(set);
        }
        Ok(())
    }
}

impl Drop for XySets {
    fn drop(&mut self) {
        for &pool in &self.pools {
            // SAFETY: ours; the context is being destroyed.
            unsafe { self.device.device.destroy_descriptor_pool(pool, None) };
        }
    }
}

/// Descriptor infos of set 1's bindings, in binding order.
pub fn buffer_infos(bound: &Set1) -> [[vk::DescriptorBufferInfo; 1]; SET1_BINDINGS as usize] {
    bound.ranges().map(|b| {
        [vk::DescriptorBufferInfo {
            buffer: b.buffer,
            offset: b.offset,
            range: b.range,
        }]
    })
}

/// Writes of set 1's bindings into `set` (null for push descriptors).
pub fn writes(
    infos: &[[vk::DescriptorBufferInfo; 1]; SET1_BINDINGS as usize],
    set: vk::DescriptorSet,
) -> [vk::WriteDescriptorSet<'_>; SET1_BINDINGS as usize] {
    std::array::from_fn(|i| {
        vk::WriteDescriptorSet::default()
            .dst_set(set)
            .dst_binding(i as u32)
            .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
            .buffer_info(&infos[i])
    })
}
