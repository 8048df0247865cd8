//! A raw Vulkan host for the kernel-export tests: what an engine such as ncnn owns — its
//! own instance with the validation layer (messages collected, [`assert_quiet`]), device,
//! queue, host-visible buffers and a pipeline built from `q4vk_kernel_info` alone.
#![allow(dead_code)]

use crate::gpu_support::{last_error, submit_and_wait};
use ash::vk;
use q4vk::ffi::context::q4vk_context;
use q4vk::ffi::kernel::*;
use q4vk::ffi::matrix::q4vk_matrix_desc;
use q4vk::ffi::status::*;
use std::ffi::{c_void, CStr};
use std::sync::Mutex;

static MESSAGES: Mutex<Vec<String>> = Mutex::new(Vec::new());

unsafe extern "system" fn on_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    _user: *mut c_void,
) -> vk::Bool32 {
    if severity.intersects(
        vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
            | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
    ) {
        let text = CStr::from_ptr((*data).p_message)
            .to_string_lossy()
            .into_owned();
        MESSAGES.lock().unwrap().push(text);
    }
    vk::FALSE
}

/// The host: what an engine such as ncnn owns.
pub struct Host {
    _entry: ash::Entry,
    instance: ash::Instance,
    debug: ash::ext::debug_utils::Instance,
    messenger: vk::DebugUtilsMessengerEXT,
    physical: vk::PhysicalDevice,
    pub device: ash::Device,
    queue: vk::Queue,
    pool: vk::CommandPool,
    memory: vk::PhysicalDeviceMemoryProperties,
    pub subgroup_size: u32,
}

impl Host {
    pub fn new() -> Host {
        unsafe {
            let entry = ash::Entry::load().expect("Vulkan loader");
            let layer = c"VK_LAYER_KHRONOS_validation";
            let has_layer = entry
                .enumerate_instance_layer_properties()
                .unwrap()
                .iter()
                .any(|l| l.layer_name_as_c_str() == Ok(layer));
            assert!(has_layer, "VK_LAYER_KHRONOS_validation is not installed");
            let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_1);
            let layers = [layer.as_ptr()];
            let exts = [ash::ext::debug_utils::NAME.as_ptr()];
            let instance = entry
                .create_instance(
                    &vk::InstanceCreateInfo::default()
                        .application_info(&app)
                        .enabled_layer_names(&layers)
                        .enabled_extension_names(&exts),
                    None,
                )
                .unwrap();
            let debug = ash::ext::debug_utils::Instance::new(&entry, &instance);
            let messenger = debug
                .create_debug_utils_messenger(
                    &vk::DebugUtilsMessengerCreateInfoEXT::default()
                        .message_severity(
                            vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
                                | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
                        )
                        .message_type(
                            vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                                | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                                | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
                        )
                        .pfn_user_callback(Some(on_message)),
                    None,
                )
                .unwrap();
            let physical = instance.enumerate_physical_devices().unwrap()[0];
            let family = instance
                .get_physical_device_queue_family_properties(physical)
                .iter()
                .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
                .unwrap() as u32;
            let prio = [1.0];
            let qinfo = [vk::DeviceQueueCreateInfo::default()
                .queue_family_index(family)
                .queue_priorities(&prio)];
            let device = instance
                .create_device(
                    physical,
                    &vk::DeviceCreateInfo::default().queue_create_infos(&qinfo),
                    None,
                )
                .unwrap();
            let queue = device.get_device_queue(family, 0);
            let pool = device
                .create_command_pool(
                    &vk::CommandPoolCreateInfo::default().queue_family_index(family),
                    None,
                )
                .unwrap();
            let memory = instance.get_physical_device_memory_properties(physical);
            let mut sg = vk::PhysicalDeviceSubgroupProperties::default();
            let mut props = vk::PhysicalDeviceProperties2::default().push_next(&mut sg);
            instance.get_physical_device_properties2(physical, &mut props);
            let subgroup_size = sg.subgroup_size;
            Host {
                _entry: entry,
                instance,
                debug,
                messenger,
                physical,
                device,
                queue,
                pool,
                memory,
                subgroup_size,
            }
        }
    }

    /// A host-visible, coherent storage buffer holding `data` (at least 4 bytes).
    pub fn buffer(&self, data: &[u8]) -> (vk::Buffer, vk::DeviceMemory, u64) {
        let size = (data.len() as u64).max(4);
        unsafe {
            let d = &self.device;
            let buffer = d
                .create_buffer(
                    &vk::BufferCreateInfo::default()
                        .size(size)
                        .usage(vk::BufferUsageFlags::STORAGE_BUFFER),
                    None,
                )
                .unwrap();
            let req = d.get_buffer_memory_requirements(buffer);
            let want =
                vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
            let index = (0..self.memory.memory_type_count)
                .find(|&i| {
                    req.memory_type_bits & (1 << i) != 0
                        && self.memory.memory_types[i as usize]
                            .property_flags
                            .contains(want)
                })
                .unwrap();
            let memory = d
                .allocate_memory(
                    &vk::MemoryAllocateInfo::default()
                        .allocation_size(req.size)
                        .memory_type_index(index),
                    None,
                )
                .unwrap();
            d.bind_buffer_memory(buffer, memory, 0).unwrap();
            let p = d
                .map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
                .unwrap()
                .cast::<u8>();
            std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len());
            d.unmap_memory(memory);
            (buffer, memory, size)
        }
    }

    pub fn read(&self, memory: vk::DeviceMemory, len: usize) -> Vec<u8> {
        unsafe {
            let p = self
                .device
                .map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
                .unwrap()
                .cast::<u8>();
            let out = std::slice::from_raw_parts(p, len).to_vec();
            self.device.unmap_memory(memory);
            out
        }
    }

    /// Builds a pipeline from `info` + `spirv` alone, binds `buffers` (one per binding, in
    /// binding order), pushes the constants, dispatches `info.group_count`, waits.
    pub fn run(&self, info: &q4vk_kernel_info, spirv: &[u32], buffers: &[(vk::Buffer, u64)]) {
        unsafe {
            let d = &self.device;
            let bindings: Vec<vk::DescriptorSetLayoutBinding> = info.bindings
                [..info.binding_count as usize]
                .iter()
                .map(|b| {
                    vk::DescriptorSetLayoutBinding::default()
                        .binding(b.binding)
                        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                        .descriptor_count(1)
                        .stage_flags(vk::ShaderStageFlags::COMPUTE)
                })
                .collect();
            let set_layout = d
                .create_descriptor_set_layout(
                    &vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings),
                    None,
                )
                .unwrap();
            let push_bytes = 4 * info.push_constant_count;
            let ranges = [vk::PushConstantRange::default()
                .stage_flags(vk::ShaderStageFlags::COMPUTE)
                .size(push_bytes)];
            let set_layouts = [set_layout];
            let layout = d
                .create_pipeline_layout(
                    &vk::PipelineLayoutCreateInfo::default()
                        .set_layouts(&set_layouts)
                        .push_constant_ranges(&ranges),
                    None,
                )
                .unwrap();
            let module = d
                .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(spirv), None)
                .unwrap();
            let specs = &info.specializations[..info.specialization_count as usize];
            let entries: Vec<vk::SpecializationMapEntry> = specs
                .iter()
                .enumerate()
                .map(|(i, s)| vk::SpecializationMapEntry {
                    constant_id: s.id,
                    offset: 4 * i as u32,
                    size: 4,
                })
                .collect();
            let data: Vec<u8> = specs.iter().flat_map(|s| s.value.to_ne_bytes()).collect();
            let spec = vk::SpecializationInfo::default()
                .map_entries(&entries)
                .data(&data);
            let name = CStr::from_ptr(info.entry_point.as_ptr());
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(module)
                .name(name)
                .specialization_info(&spec);
            let pipeline = d
                .create_compute_pipelines(
                    vk::PipelineCache::null(),
                    &[vk::ComputePipelineCreateInfo::default()
                        .stage(stage)
                        .layout(layout)],
                    None,
                )
                .unwrap()[0];
            let sizes = [vk::DescriptorPoolSize {
                ty: vk::DescriptorType::STORAGE_BUFFER,
                descriptor_count: info.binding_count,
            }];
            let dpool = d
                .create_descriptor_pool(
                    &vk::DescriptorPoolCreateInfo::default()
                        .max_sets(1)
                        .pool_sizes(&sizes),
                    None,
                )
                .unwrap();
            let set = d
                .allocate_descriptor_sets(
                    &vk::DescriptorSetAllocateInfo::default()
                        .descriptor_pool(dpool)
                        .set_layouts(&set_layouts),
                )
                .unwrap()[0];
            let infos: Vec<[vk::DescriptorBufferInfo; 1]> = buffers
                .iter()
                .map(|&(buffer, range)| {
                    [vk::DescriptorBufferInfo {
                        buffer,
                        offset: 0,
                        range,
                    }]
                })
                .collect();
            let writes: Vec<vk::WriteDescriptorSet> = infos
                .iter()
                .enumerate()
                .map(|(i, bi)| {
                    vk::WriteDescriptorSet::default()
                        .dst_set(set)
                        .dst_binding(info.bindings[i].binding)
                        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                        .buffer_info(bi)
                })
                .collect();
            d.update_descriptor_sets(&writes, &[]);
            let push: Vec<u8> = info.push_constants[..info.push_constant_count as usize]
                .iter()
                .flat_map(|w| w.to_ne_bytes())
                .collect();
            submit_and_wait(d, self.queue, self.pool, |cmd| {
                d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, pipeline);
                d.cmd_bind_descriptor_sets(
                    cmd,
                    vk::PipelineBindPoint::COMPUTE,
                    layout,
                    0,
                    &[set],
                    &[],
                );
                d.cmd_push_constants(cmd, layout, vk::ShaderStageFlags::COMPUTE, 0, &push);
                let g = info.group_count;
                d.cmd_dispatch(cmd, g[0], g[1], g[2]);
            });
            d.destroy_descriptor_pool(dpool, None);
            d.destroy_pipeline(pipeline, None);
            d.destroy_shader_module(module, None);
            d.destroy_pipeline_layout(layout, None);
            d.destroy_descriptor_set_layout(set_layout, None);
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        unsafe {
            self.device.device_wait_idle().unwrap();
            self.device.destroy_command_pool(self.pool, None);
            self.device.destroy_device(None);
            self.debug
                .destroy_debug_utils_messenger(self.messenger, None);
            self.instance.destroy_instance(None);
        }
        let _ = self.physical;
    }
}

pub fn assert_quiet() {
    let m = MESSAGES.lock().unwrap().clone();
    assert!(
        m.is_empty(),
        "{} validation message(s), first: {}",
        m.len(),
        m[0]
    );
}

/// Exports (size query, a too-small copy, then the copy) and checks the info's invariants:
/// SPIR-V magic, binding i has role i (5 bindings, 7 for the extended kernel), 10 push
/// constants (the GEMM at m > 8: 11, m last, and the portable variant), ncnn's
/// specialization ids with the local size on 233..235.
pub fn export(
    ctx: *const q4vk_context,
    mat: &q4vk_matrix_desc,
    e: &q4vk_kernel_export_desc,
) -> (q4vk_kernel_info, Vec<u32>) {
    let mut info = unsafe { std::mem::zeroed::<q4vk_kernel_info>() };
    info.struct_size = std::mem::size_of::<q4vk_kernel_info>() as u32;
    let s = unsafe { q4vk_kernel_export(ctx, mat, e, &mut info, std::ptr::null_mut(), 0) };
    assert_eq!(s, Q4VK_OK, "size query: {}", last_error());
    let mut spirv = vec![0u32; info.spirv_words];
    let mut too_small = info;
    let s = unsafe {
        q4vk_kernel_export(
            ctx,
            mat,
            e,
            &mut too_small,
            spirv.as_mut_ptr(),
            spirv.len() - 1,
        )
    };
    assert_eq!(s, Q4VK_ERROR_BUFFER_TOO_SMALL);
    let s = unsafe { q4vk_kernel_export(ctx, mat, e, &mut info, spirv.as_mut_ptr(), spirv.len()) };
    assert_eq!(s, Q4VK_OK, "export: {}", last_error());
    assert_eq!(spirv[0], 0x0723_0203);
    // A v0 caller's desc ends before export_flags: the v0 kernel.
    let v0_size = std::mem::offset_of!(q4vk_kernel_export_desc, export_flags);
    let extended =
        e.struct_size as usize > v0_size && e.export_flags & Q4VK_KERNEL_EXPORT_EXTENDED != 0;
    let bias = extended && e.export_flags & Q4VK_KERNEL_EXPORT_BIAS != 0;
    let count = match (extended, bias) {
        (true, true) => 8,
        (true, false) => 7,
        (false, _) => 5,
    };
    assert_eq!(info.binding_count, count);
    if e.m > 8 {
        assert_eq!(info.push_constant_count, 11);
        assert_eq!(info.push_constants[10], e.m);
        assert_eq!(info.variant, Q4VK_KERNEL_PORTABLE);
        assert_eq!(spirv[1], 0x0001_0000, "the GEMM is SPIR-V 1.0");
    } else {
        assert_eq!(info.push_constant_count, 10);
    }
    for (i, b) in info.bindings[..count as usize].iter().enumerate() {
        assert_eq!((b.binding, b.role), (i as u32, i as u32));
    }
    // ncnn's convention: own ids 0..N-1 in order, then the local size on 233..235.
    let specs = &info.specializations[..info.specialization_count as usize];
    let own = specs.len() - 3;
    for (i, s) in specs.iter().enumerate() {
        let want = if i < own {
            i as u32
        } else {
            233 + (i - own) as u32
        };
        assert_eq!(s.id, want);
    }
    assert_eq!(
        specs[own..].iter().map(|s| s.value).collect::<Vec<_>>(),
        info.local_size.to_vec()
    );
    (info, spirv)
}

/// The first `y_elems` elements of y read back as `bytes`: f16 (`y_f16`) or f32, as f32.
pub fn y_values(bytes: &[u8], y_elems: usize, y_f16: bool) -> Vec<f32> {
    match y_f16 {
        true => bytes
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .take(y_elems)
            .collect(),
        false => bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .take(y_elems)
            .collect(),
    }
}
