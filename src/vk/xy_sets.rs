//! Descriptor sets for x and y on devices without `VK_KHR_push_descriptor`: a ring of at
//! most `RING` sets per context. Each GEMV writes the next set of the ring (one that records
//! a pre-pass writes two), so memory is bounded and no set ever names a buffer handle
//! the host may since have destroyed and reused. A set is rewritten only after `RING`
//! further sets were taken on the context; the host's side of that rule is stated on
//! `q4vk_cmd_gemv`.

use super::device::Device;
use super::params::BufferRange;
use crate::error::{Error, Result};
use ash::vk;
use std::sync::Arc;

/// Sets in the ring (`Q4VK_CMD_GEMV_SET_RING` of the C API).
pub(crate) const RING: usize = 4096;

/// Sets per descriptor pool; pools are created as the ring fills.
const SETS_PER_POOL: u32 = 64;

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

    /// The next set of the ring, written with x (binding 0) and y (binding 1).
    pub fn next(
        &mut self,
        layout: vk::DescriptorSetLayout,
        x: BufferRange,
        y: BufferRange,
    ) -> Result<vk::DescriptorSet> {
        if self.next == self.sets.len() && self.sets.len() < RING {
            self.allocate(layout)?;
        }
        let set = self.sets[self.next];
        // SAFETY: a set of this device; the last GEMV that bound it took it RING sets ago, so
        // no pending command buffer uses it (the contract of q4vk_cmd_gemv).
        unsafe {
            let infos = buffer_infos(x, y);
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
                    descriptor_count: 2 * SETS_PER_POOL,
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

/// Descriptor infos of x and y.
pub fn buffer_infos(x: BufferRange, y: BufferRange) -> [[vk::DescriptorBufferInfo; 1]; 2] {
    [x, y].map(|b| {
        [vk::DescriptorBufferInfo {
            buffer: b.buffer,
            offset: b.offset,
            range: b.range,
        }]
    })
}

/// Writes of x (binding 0) and y (binding 1) into `set` (null for push descriptors).
pub fn writes(
    infos: &[[vk::DescriptorBufferInfo; 1]; 2],
    set: vk::DescriptorSet,
) -> [vk::WriteDescriptorSet<'_>; 2] {
    [0, 1].map(|i| {
        vk::WriteDescriptorSet::default()
            .dst_set(set)
            .dst_binding(i as u32)
            .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
            .buffer_info(&infos[i])
    })
}
