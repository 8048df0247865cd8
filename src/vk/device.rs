//! The logical device: q4vk's own (best physical device, or the one the host picked by
//! index) or the host's, borrowed; and what q4vk needs to know about it.

use super::debug_name::Namer;
use super::features::CoopOffer;
use super::instance::Instance;
use crate::error::{Error, Result};
use crate::plan::tuned::DeviceIdentity;
use crate::plan::{DeviceClass, Family};
use ash::vk;
use std::ffi::CStr;
use std::sync::Arc;

/// What q4vk's own device enables beyond the basics.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeviceOptions {
    /// Do not enable `VK_KHR_push_descriptor`.
    pub no_push: bool,
    /// Enable what the tensor-core kernel needs, where the device offers all of it.
    pub want_coop: bool,
    /// Enable `VK_KHR_pipeline_executable_properties` where offered (`vk::stats`).
    pub want_statistics: bool,
    /// When choosing the best device (no index given), treat CPU implementations of
    /// Vulkan (`VK_PHYSICAL_DEVICE_TYPE_CPU`: lavapipe, SwiftShader) as absent.
    pub skip_cpu_type: bool,
}

/// What the kernels and the dispatcher need to know about a physical device.
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    /// `deviceName`.
    pub name: String,
    /// `vendorID` (0x10DE NVIDIA).
    pub vendor: u32,
    /// A CPU implementation (`VK_PHYSICAL_DEVICE_TYPE_CPU`: lavapipe).
    pub cpu: bool,
    /// Reported subgroup size.
    pub subgroup_size: u32,
    /// Smallest subgroup a shader may run with (`minSubgroupSize` where the device reports
    /// it, else the subgroup size).
    pub min_subgroup_size: u32,
    /// Subgroup basic + arithmetic operations in compute shaders.
    pub subgroup_arithmetic: bool,
    /// `maxStorageBufferRange`.
    pub max_storage_range: u64,
    /// `maxMemoryAllocationSize` (Vulkan 1.1).
    pub max_allocation: u64,
    /// `maxComputeWorkGroupCount[0..2]`.
    pub max_groups: [u32; 2],
    /// `minStorageBufferOffsetAlignment`.
    pub storage_alignment: u64,
    /// `maxComputeSharedMemorySize`.
    pub max_shared: u32,
    /// `maxPerStageDescriptorStorageBuffers`.
    pub max_storage_buffers: u32,
    /// Largest 1-D workgroup: min of `maxComputeWorkGroupInvocations` and
    /// `maxComputeWorkGroupSize[0]`.
    pub max_workgroup: u32,
    /// `timestampPeriod` (ns per tick) and whether compute queues support timestamps.
    pub timestamp_period: f32,
    /// Streaming multiprocessors (`shaderSMCount` of `VK_NV_shader_sm_builtins`, queried
    /// where the device lists that extension; it need not be enabled).
    pub sm_count: Option<u32>,
    /// Memory types and heaps.
    pub memory: vk::PhysicalDeviceMemoryProperties,
}

impl DeviceInfo {
    /// What the kernel rules know of this device (`plan::DeviceClass`).
    pub fn class(&self) -> DeviceClass {
        DeviceClass {
            family: Family::of(self.vendor, self.cpu),
            vendor: self.vendor,
            cpu: self.cpu,
            subgroup_size: self.subgroup_size,
            min_subgroup_size: self.min_subgroup_size,
            max_shared: self.max_shared,
            max_workgroup: self.max_workgroup,
            max_storage_range: self.max_storage_range,
            max_groups: self.max_groups,
            sm_count: self.sm_count,
        }
    }

    /// Whether the subgroup kernels can run: subgroup arithmetic in compute and sizes the
    /// kernels' reduction slots take.
    pub fn subgroup_kernels_ok(&self) -> bool {
        let sg = self.min_subgroup_size;
        self.subgroup_arithmetic
            && sg.is_power_of_two()
            && self.subgroup_size.is_power_of_two()
            && (4..=128).contains(&sg)
            && self.subgroup_size <= 1024
    }
}

/// The environment variable (read by `ffi::context::env_switches`) with which
/// `Q4VK_CONTEXT_CPU_FALLBACK` keeps a CPU implementation of Vulkan as the best device.
pub const KEEP_CPU_VULKAN_ENV: &str = "Q4VK_KEEP_CPU_VULKAN";

/// What a host enabled, on a device q4vk adopts, of what q4vk's optional kernels need.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostEnabled {
    /// The tensor-core kernels' extension and features (`coop::HostFeatures::run_coop`).
    pub coop: bool,
    /// The integer dot-product kernel's (`coop::HostFeatures::run_int_dot`).
    pub int_dot: bool,
    /// Shaders may use Device-scope atomics (`coop::HostFeatures::device_scope_atomics`).
    pub device_scope_atomics: bool,
}

/// A loaded device and the queue q4vk uses. Destroys the device on drop only if q4vk
/// created it.
pub struct Device {
    /// The instance it belongs to (kept alive by this).
    pub instance: Arc<Instance>,
    /// The physical device.
    pub physical: vk::PhysicalDevice,
    /// Device functions.
    pub device: ash::Device,
    /// The queue q4vk submits to (null for an adopted device given no queue).
    pub queue: vk::Queue,
    /// Its family.
    pub queue_family: u32,
    /// Queue families of the physical device (matrix buffers are shared by all of them).
    pub queue_families: u32,
    /// `VK_KHR_push_descriptor` functions when the extension is enabled on this device.
    pub push_descriptor: Option<ash::khr::push_descriptor::Device>,
    /// Device facts.
    pub info: DeviceInfo,
    /// The device's timestamp-capable queue family flag.
    pub timestamps: bool,
    /// `timestampValidBits` of q4vk's queue family (0: no timestamps).
    pub timestamp_bits: u32,
    /// The tensor-core kernels' extensions and features are enabled (`vk::coop`,
    /// `vk::coop_tiles`).
    pub coop_enabled: bool,
    /// What the device's cooperative matrices offer those kernels (nothing where not
    /// enabled).
    pub coop_offer: CoopOffer,
    /// Shaders may use Device-scope atomics (an f16 y's epilogue, `shaders/epilogue.glsl`):
    /// vulkanMemoryModel is not enabled, or vulkanMemoryModelDeviceScope is too.
    pub device_scope_atomics: bool,
    /// `shaderIntegerDotProduct` is enabled (`vk::int_dot`): whether the driver reports
    /// packed signed 8-bit dot products accelerated.
    pub int_dot: Option<bool>,
    /// `VK_KHR_pipeline_executable_properties` functions when enabled (`vk::stats`).
    pub statistics: Option<ash::khr::pipeline_executable_properties::Device>,
    /// Gives every object q4vk creates on the device its debug name (`vk::debug_name`).
    pub namer: Namer,
    owned: bool,
}

fn query_info(instance: &ash::Instance, physical: vk::PhysicalDevice) -> DeviceInfo {
    // SAFETY: a valid physical device of this instance (Vulkan 1.1 checked by the caller).
    let api = unsafe { instance.get_physical_device_properties(physical) }.api_version;
    // SAFETY: as above.
    let extensions =
        unsafe { instance.enumerate_device_extension_properties(physical) }.unwrap_or_default();
    let lists = |name: &std::ffi::CStr| {
        extensions
            .iter()
            .any(|e| e.extension_name_as_c_str() == Ok(name))
    };
    let size_control = api >= vk::API_VERSION_1_3 || lists(ash::ext::subgroup_size_control::NAME);
    let sm_builtins = lists(ash::nv::shader_sm_builtins::NAME);
    let mut subgroup = vk::PhysicalDeviceSubgroupProperties::default();
    let mut maint3 = vk::PhysicalDeviceMaintenance3Properties::default();
    let mut size = vk::PhysicalDeviceSubgroupSizeControlProperties::default();
    let mut sms = vk::PhysicalDeviceShaderSMBuiltinsPropertiesNV::default();
    let mut props2 = vk::PhysicalDeviceProperties2::default()
        .push_next(&mut subgroup)
        .push_next(&mut maint3);
    if size_control {
        props2 = props2.push_next(&mut size);
    }
    if sm_builtins {
        props2 = props2.push_next(&mut sms);
    }
    // SAFETY: as above; the size-control and SM structs are chained only where the device
    // has their extensions.
    unsafe { instance.get_physical_device_properties2(physical, &mut props2) };
    let p = props2.properties;
    // Without full-subgroup guarantees a shader may run in smaller subgroups than the
    // reported size (Intel, AMD): size per-subgroup storage for the smallest.
    let min_subgroup = if size_control && size.min_subgroup_size > 0 {
        size.min_subgroup_size.min(subgroup.subgroup_size)
    } else {
        subgroup.subgroup_size
    };
    let needed = vk::SubgroupFeatureFlags::BASIC | vk::SubgroupFeatureFlags::ARITHMETIC;
    DeviceInfo {
        name: p
            .device_name_as_c_str()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        vendor: p.vendor_id,
        cpu: p.device_type == vk::PhysicalDeviceType::CPU,
        subgroup_size: subgroup.subgroup_size,
        min_subgroup_size: min_subgroup,
        subgroup_arithmetic: subgroup
            .supported_stages
            .contains(vk::ShaderStageFlags::COMPUTE)
            && subgroup.supported_operations.contains(needed),
        max_storage_range: p.limits.max_storage_buffer_range as u64,
        max_allocation: maint3.max_memory_allocation_size,
        max_groups: [
            p.limits.max_compute_work_group_count[0],
            p.limits.max_compute_work_group_count[1],
        ],
        storage_alignment: p.limits.min_storage_buffer_offset_alignment,
        max_shared: p.limits.max_compute_shared_memory_size,
        max_storage_buffers: p.limits.max_per_stage_descriptor_storage_buffers,
        max_workgroup: p
            .limits
            .max_compute_work_group_invocations
            .min(p.limits.max_compute_work_group_size[0]),
        timestamp_period: p.limits.timestamp_period,
        sm_count: (sm_builtins && sms.shader_sm_count > 0).then_some(sms.shader_sm_count),
        // SAFETY: as above.
        memory: unsafe { instance.get_physical_device_memory_properties(physical) },
    }
}

fn type_rank(t: vk::PhysicalDeviceType) -> u32 {
    match t {
        vk::PhysicalDeviceType::DISCRETE_GPU => 0,
        vk::PhysicalDeviceType::INTEGRATED_GPU => 1,
        vk::PhysicalDeviceType::VIRTUAL_GPU => 2,
        vk::PhysicalDeviceType::CPU => 3,
        _ => 4,
    }
}

/// The compute queue family q4vk takes on `physical` and its `timestampValidBits`.
fn compute_family(instance: &ash::Instance, physical: vk::PhysicalDevice) -> Option<(u32, u32)> {
    // SAFETY: valid physical device.
    let families = unsafe { instance.get_physical_device_queue_family_properties(physical) };
    families
        .iter()
        .enumerate()
        .filter(|(_, f)| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
        // Prefer a compute family without graphics (async compute) only if none is combined.
        .min_by_key(|(_, f)| !f.queue_flags.contains(vk::QueueFlags::GRAPHICS))
        .map(|(i, f)| (i as u32, f.timestamp_valid_bits))
}

impl Device {
    /// Size of the largest device-local memory heap (of any heap if none is device-local):
    /// an upper bound on what one matrix can occupy.
    pub fn largest_device_heap(&self) -> u64 {
        let memory = &self.info.memory;
        let heaps = &memory.memory_heaps[..memory.memory_heap_count as usize];
        let local = heaps
            .iter()
            .filter(|h| h.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
            .map(|h| h.size)
            .max();
        local.unwrap_or_else(|| heaps.iter().map(|h| h.size).max().unwrap_or(0))
    }

    /// What a tuning blob must have been made on (`plan::tuned`): vendor and device ids,
    /// driver version and pipeline-cache UUID.
    pub fn identity(&self) -> DeviceIdentity {
        // SAFETY: a plain query on a live physical device.
        let props = unsafe {
            self.instance
                .instance
                .get_physical_device_properties(self.physical)
        };
        DeviceIdentity {
            vendor: props.vendor_id,
            device: props.device_id,
            driver: props.driver_version,
            cache_uuid: props.pipeline_cache_uuid,
        }
    }

    /// One line of what the device offers q4vk, the same for q4vk's own device and an
    /// adopted one: name, type, vendor, subgroup sizes, and which optional features are
    /// enabled (push descriptors, cooperative matrices, pipeline statistics, integer dot
    /// products and whether the driver reports them accelerated).
    pub fn capabilities(&self) -> String {
        let i = &self.info;
        format!(
            "device {} ({}, vendor {:#06x}, {}): subgroup size {} (smallest {}), subgroup arithmetic {}, shared memory {} bytes, push descriptors {}, cooperative matrices {}, pipeline statistics {}, integer dot products {}",
            i.name,
            if self.owned { "q4vk's own" } else { "adopted" },
            i.vendor,
            if i.cpu { "CPU implementation" } else { "GPU" },
            i.subgroup_size,
            i.min_subgroup_size,
            i.subgroup_arithmetic,
            i.max_shared,
            self.push_descriptor.is_some(),
            self.coop_enabled,
            self.statistics.is_some(),
            match self.int_dot {
                Some(true) => "accelerated",
                Some(false) => "not accelerated",
                None => "no",
            }
        )
    }

    /// Creates q4vk's own device: the best Vulkan 1.1 device with a compute queue
    /// (discrete > integrated > virtual > cpu), or device `index` of the instance's list;
    /// `VK_KHR_push_descriptor` is enabled where offered unless `options.no_push`; the
    /// tensor-core kernel's needs (`vk::features::coop_offer`) and pipeline statistics where
    /// the options ask and the device offers them.
    pub fn create(instance: Arc<Instance>, index: i32, options: DeviceOptions) -> Result<Device> {
        let DeviceOptions {
            no_push,
            want_coop,
            want_statistics,
            skip_cpu_type,
        } = options;
        let vki = &instance.instance;
        // SAFETY: queries and creation with valid create infos.
        unsafe {
            let physicals = vki
                .enumerate_physical_devices()
                .map_err(|e| Error::vk("vkEnumeratePhysicalDevices", e))?;
            let usable = |pd: vk::PhysicalDevice| {
                vki.get_physical_device_properties(pd).api_version >= vk::API_VERSION_1_1
                    && compute_family(vki, pd).is_some()
            };
            let physical = if index >= 0 {
                let pd = *physicals.get(index as usize).ok_or_else(|| {
                    Error::NoDevice(format!(
                        "device_index is {index} but the system has {} Vulkan device(s)",
                        physicals.len()
                    ))
                })?;
                if !usable(pd) {
                    return Err(Error::NoDevice(format!(
                        "Vulkan device {index} lacks Vulkan 1.1 or a compute queue"
                    )));
                }
                pd
            } else {
                let device_type = |pd| vki.get_physical_device_properties(pd).device_type;
                let candidates: Vec<_> =
                    physicals.iter().copied().filter(|&pd| usable(pd)).collect();
                let best = candidates
                    .iter()
                    .copied()
                    .filter(|&pd| {
                        !(skip_cpu_type && device_type(pd) == vk::PhysicalDeviceType::CPU)
                    })
                    .min_by_key(|&pd| type_rank(device_type(pd)));
                match best {
                    Some(pd) => pd,
                    None if candidates.is_empty() => {
                        return Err(Error::NoDevice(format!(
                            "none of the {} Vulkan device(s) has Vulkan 1.1 and a compute queue",
                            physicals.len()
                        )))
                    }
                    None => {
                        let names: Vec<String> = candidates
                            .iter()
                            .map(|&pd| query_info(vki, pd).name)
                            .collect();
                        return Err(Error::NoDevice(format!(
                            "the only Vulkan device(s) ({}) are CPU implementations, slower than q4vk's CPU kernels; name one with device_index or set {KEEP_CPU_VULKAN_ENV}=1 to use it",
                            names.join(", ")
                        )));
                    }
                }
            };
            let (family, timestamp_bits) = compute_family(vki, physical).expect("checked usable");
            let available = vki
                .enumerate_device_extension_properties(physical)
                .map_err(|e| Error::vk("vkEnumerateDeviceExtensionProperties", e))?;
            let push = !no_push
                && available
                    .iter()
                    .any(|e| e.extension_name_as_c_str() == Ok(ash::khr::push_descriptor::NAME));
            let mut extensions = Vec::new();
            if push {
                extensions.push(ash::khr::push_descriptor::NAME.as_ptr());
            }
            let coop_offer = match want_coop {
                true => super::features::coop_offer(&instance.entry, vki, physical, &available),
                false => None,
            };
            let coop = coop_offer.is_some();
            if coop {
                extensions.extend(super::features::EXTENSIONS.iter().map(|n| n.as_ptr()));
            }
            let statistics = want_statistics && super::features::statistics_offered(&available);
            if statistics {
                extensions.push(super::features::STATISTICS_EXTENSION.as_ptr());
            }
            let int_dot = super::int_dot::offered(vki, physical, &available);
            if int_dot.is_some() {
                extensions.push(super::int_dot::EXTENSION.as_ptr());
            }
            let mut int_dot_feature = super::int_dot::feature();
            // With the memory model on, Device-scope atomics need its device scope too.
            let device_scope = coop && super::features::memory_model_device_scope(vki, physical);
            let mut features = super::features::EnabledFeatures::all_on(device_scope);
            let mut statistics_feature = super::features::statistics_feature();
            let priority = [1.0f32];
            let queues = [vk::DeviceQueueCreateInfo::default()
                .queue_family_index(family)
                .queue_priorities(&priority)];
            let mut info = vk::DeviceCreateInfo::default()
                .queue_create_infos(&queues)
                .enabled_extension_names(&extensions);
            if coop {
                info = info
                    .push_next(&mut features.coop)
                    .push_next(&mut features.model)
                    .push_next(&mut features.f16);
            }
            if statistics {
                info = info.push_next(&mut statistics_feature);
            }
            if int_dot.is_some() {
                info = info.push_next(&mut int_dot_feature);
            }
            let device = vki
                .create_device(physical, &info, None)
                .map_err(|e| Error::vk("vkCreateDevice", e))?;
            let queue = device.get_device_queue(family, 0);
            let push_descriptor =
                push.then(|| ash::khr::push_descriptor::Device::new(vki, &device));
            let statistics = statistics
                .then(|| ash::khr::pipeline_executable_properties::Device::new(vki, &device));
            let info = query_info(vki, physical);
            let queue_families = vki
                .get_physical_device_queue_family_properties(physical)
                .len() as u32;
            let namer = Namer::new(&instance, &device);
            namer.name(device.handle(), "q4vk device");
            namer.name(queue, "q4vk queue");
            Ok(Device {
                instance,
                physical,
                device,
                queue,
                queue_family: family,
                queue_families,
                push_descriptor,
                info,
                timestamps: timestamp_bits > 0,
                timestamp_bits,
                coop_enabled: coop,
                coop_offer: coop_offer.unwrap_or_default(),
                device_scope_atomics: !coop || device_scope,
                int_dot,
                statistics,
                namer,
                owned: true,
            })
        }
    }

    /// Borrows the host's device. `extensions` are the device extensions the host
    /// enabled (push descriptors are used only if listed); `enabled`: what the host enabled
    /// of the optional kernels' needs (the tensor-core kernels are then used where the
    /// device offers their shape).
    ///
    /// # Safety
    /// The handles must be valid, belong to `instance`, and outlive the returned value.
    pub unsafe fn adopt(
        instance: Arc<Instance>,
        physical: vk::PhysicalDevice,
        device: vk::Device,
        queue: vk::Queue,
        queue_family: u32,
        extensions: &[&CStr],
        enabled: HostEnabled,
    ) -> Result<Device> {
        let vki = &instance.instance;
        // SAFETY: a valid physical device of this instance (caller's contract).
        let props = unsafe { vki.get_physical_device_properties(physical) };
        if props.api_version < vk::API_VERSION_1_1 {
            return Err(Error::Unsupported(
                "the adopted physical device supports only Vulkan 1.0; q4vk needs 1.1".into(),
            ));
        }
        // SAFETY: as above.
        let families = unsafe { vki.get_physical_device_queue_family_properties(physical) };
        let family = families.get(queue_family as usize).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "desc->queue_family_index is {queue_family} but the device has {} families",
                families.len()
            ))
        })?;
        if !family.queue_flags.contains(vk::QueueFlags::COMPUTE) {
            return Err(Error::InvalidArgument(format!(
                "queue family {queue_family} has no compute capability"
            )));
        }
        // SAFETY: the host's live device of this physical device (caller's contract).
        let device = unsafe { ash::Device::load(vki.fp_v1_0(), device) };
        let push = extensions.contains(&ash::khr::push_descriptor::NAME);
        let push_descriptor = push.then(|| ash::khr::push_descriptor::Device::new(vki, &device));
        // The tensor-core kernels run where the host enabled their features and the device
        // has what they need (a shape; for the tensor-core layout's, 32-wide subgroups).
        let coop_offer = match enabled.coop {
            true => {
                // SAFETY: as above.
                let available = unsafe { vki.enumerate_device_extension_properties(physical) }
                    .map_err(|e| Error::vk("vkEnumerateDeviceExtensionProperties", e))?;
                super::features::coop_offer(&instance.entry, vki, physical, &available)
            }
            false => None,
        };
        Ok(Device {
            info: query_info(vki, physical),
            timestamps: family.timestamp_valid_bits > 0,
            timestamp_bits: family.timestamp_valid_bits,
            instance: instance.clone(),
            physical,
            device,
            queue,
            queue_family,
            queue_families: families.len() as u32,
            push_descriptor,
            coop_enabled: coop_offer.is_some(),
            coop_offer: coop_offer.unwrap_or_default(),
            device_scope_atomics: enabled.device_scope_atomics,
            // SAFETY: the host enabled the extension or uses Vulkan 1.3 (its contract).
            int_dot: enabled
                .int_dot
                .then(|| unsafe { super::int_dot::accelerated(vki, physical) }),
            statistics: None,
            // The host's instance extensions are unknown (`vk::debug_name`).
            namer: Namer::off(),
            owned: false,
        })
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: everything created from the device holds an Arc of it, so it is
            // dropped last; all of q4vk's submissions were waited for.
            unsafe {
                let _ = self.device.device_wait_idle();
                self.device.destroy_device(None);
            }
        }
    }
}
