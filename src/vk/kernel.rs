//! A plain compute kernel: one descriptor set of storage buffers, a push-constant block and
//! a pipeline without specialization, with a pool for its sets. What the fragment-layout
//! probe (`vk::coop`) and the benchmark's reference kernels (copy, naive GEMV) need; the
//! GEMV pipelines proper live in `vk::pipeline`.

use super::device::Device;
use super::memory::{storage_set, Buffer};
use super::pipeline::shader_module;
use crate::error::{Error, Result};
use ash::vk;
use std::sync::Arc;

/// A compute pipeline over `bindings` storage buffers (set 0) and `push` bytes of push
/// constants; destroys what it created on drop.
pub struct Kernel {
    device: Arc<Device>,
    module: vk::ShaderModule,
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    pipeline: vk::Pipeline,
    pool: vk::DescriptorPool,
}

impl Kernel {
    /// Creates the kernel of `spv` with room for `max_sets` descriptor sets; `name` (the
    /// shader's file name without its extension) goes into its objects' debug names.
    pub fn new(
        device: &Arc<Device>,
        spv: &[u8],
        name: &str,
        bindings: u32,
        push: u32,
        max_sets: u32,
    ) -> Result<Kernel> {
        let d = &device.device;
        let mut this = Kernel {
            device: device.clone(),
            module: vk::ShaderModule::null(),
            set_layout: vk::DescriptorSetLayout::null(),
            layout: vk::PipelineLayout::null(),
            pipeline: vk::Pipeline::null(),
            pool: vk::DescriptorPool::null(),
        };
        let b: Vec<_> = (0..bindings)
            .map(|i| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(i)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let ranges = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
            .size(push)];
        let sizes = [vk::DescriptorPoolSize {
            ty: vk::DescriptorType::STORAGE_BUFFER,
            descriptor_count: bindings * max_sets,
        }];
        let names = &device.namer;
        // SAFETY: valid create infos; Drop destroys whatever was created.
        unsafe {
            this.module = shader_module(device, spv, name)?;
            this.set_layout = d
                .create_descriptor_set_layout(
                    &vk::DescriptorSetLayoutCreateInfo::default().bindings(&b),
                    None,
                )
                .map_err(|e| Error::vk("vkCreateDescriptorSetLayout", e))?;
            names.name(
                this.set_layout,
                &format!("q4vk {name} descriptor set layout"),
            );
            let sets = [this.set_layout];
            let info = vk::PipelineLayoutCreateInfo::default().set_layouts(&sets);
            let info = if push > 0 {
                info.push_constant_ranges(&ranges)
            } else {
                info
            };
            this.layout = d
                .create_pipeline_layout(&info, None)
                .map_err(|e| Error::vk("vkCreatePipelineLayout", e))?;
            names.name(this.layout, &format!("q4vk {name} pipeline layout"));
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(this.module)
                .name(c"main");
            let info = [vk::ComputePipelineCreateInfo::default()
                .stage(stage)
                .layout(this.layout)];
            this.pipeline = d
                .create_compute_pipelines(vk::PipelineCache::null(), &info, None)
                .map_err(|(_, e)| Error::vk("vkCreateComputePipelines", e))?[0];
            names.name(this.pipeline, &format!("q4vk {name} pipeline"));
            this.pool = d
                .create_descriptor_pool(
                    &vk::DescriptorPoolCreateInfo::default()
                        .max_sets(max_sets)
                        .pool_sizes(&sizes),
                    None,
                )
                .map_err(|e| Error::vk("vkCreateDescriptorPool", e))?;
            names.name(this.pool, &format!("q4vk {name} descriptor pool"));
        }
        Ok(this)
    }

    /// A set binding `buffers` to bindings 0.. (at most `max_sets` per kernel).
    pub fn set(&self, buffers: &[&Buffer]) -> Result<vk::DescriptorSet> {
        // SAFETY: the pool and layout are this kernel's; the pool refuses sets past its size.
        unsafe { storage_set(&self.device, self.pool, self.set_layout, buffers) }
    }

    /// Records a dispatch of `groups` workgroups with `set` and the push constants `push`.
    ///
    /// # Safety
    /// `cmd` is a command buffer of this kernel's device in the recording state, and `set`
    /// one of this kernel's sets whose buffers outlive the command buffer's execution.
    pub unsafe fn record(
        &self,
        cmd: vk::CommandBuffer,
        set: vk::DescriptorSet,
        push: &[u8],
        groups: u32,
    ) {
        let d = &self.device.device;
        // SAFETY: the caller's contract; every other handle is this kernel's.
        unsafe {
            d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, self.pipeline);
            d.cmd_bind_descriptor_sets(
                cmd,
                vk::PipelineBindPoint::COMPUTE,
                self.layout,
                0,
                &[set],
                &[],
            );
            if !push.is_empty() {
                d.cmd_push_constants(cmd, self.layout, vk::ShaderStageFlags::COMPUTE, 0, push);
            }
            d.cmd_dispatch(cmd, groups, 1, 1);
        }
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        let d = &self.device.device;
        // SAFETY: ours; no submission using them is pending (the users wait for theirs).
        unsafe {
            d.destroy_descriptor_pool(self.pool, None);
            d.destroy_pipeline(self.pipeline, None);
            d.destroy_pipeline_layout(self.layout, None);
            d.destroy_descriptor_set_layout(self.set_layout, None);
            d.destroy_shader_module(self.module, None);
        }
    }
}
