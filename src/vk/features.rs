//! What a device offers and a host enabled of the optional kernels' needs, asked before
//! the device exists or by it: the tensor-core kernels' extensions, features and shape
//! (`vk::coop`), and the pipeline-statistics extension (`vk::stats`). No q4vk object here.

use crate::plan::FragmentShape;
use ash::vk;
use std::ffi::CStr;

/// Device extensions the kernel needs (the memory model and f16 arithmetic are core in
/// Vulkan 1.2; q4vk's instance asks for 1.1, so it enables them as extensions).
pub const EXTENSIONS: [&CStr; 3] = [
    ash::khr::cooperative_matrix::NAME,
    ash::khr::vulkan_memory_model::NAME,
    ash::khr::shader_float16_int8::NAME,
];

/// What a device's cooperative matrices offer q4vk's tensor-core kernels.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CoopOffer {
    /// The tensor-core layout's kernels (`shaders/gemv_q4_coop.comp`,
    /// `shaders/gemm_q4_coop.comp`) can run, their fragment layout still to be probed
    /// (`vk::coop::probe`): an f16 × f16 → f32 16 × 8 × 16 shape, subgroups of exactly 32
    /// invocations with shuffles.
    pub fragments: bool,
    /// The fragment shape of the tensor-core GEMM on the SIMT layout (`vk::coop_tiles`),
    /// where one of the device's is usable.
    pub tiles: Option<FragmentShape>,
}

/// What `physical` offers the tensor-core kernels: `None` where it lacks the extensions or
/// their features (cooperativeMatrix in compute shaders, vulkanMemoryModel, shaderFloat16)
/// or subgroup basics in compute, or neither kind of kernel can use its shapes.
pub fn coop_offer(
    entry: &ash::Entry,
    instance: &ash::Instance,
    physical: vk::PhysicalDevice,
    available: &[vk::ExtensionProperties],
) -> Option<CoopOffer> {
    let has = |name: &CStr| {
        available
            .iter()
            .any(|e| e.extension_name_as_c_str() == Ok(name))
    };
    if !EXTENSIONS.iter().all(|n| has(n)) {
        return None;
    }
    let mut coop = vk::PhysicalDeviceCooperativeMatrixFeaturesKHR::default();
    let mut model = vk::PhysicalDeviceVulkanMemoryModelFeatures::default();
    let mut f16 = vk::PhysicalDeviceShaderFloat16Int8Features::default();
    let mut features = vk::PhysicalDeviceFeatures2::default()
        .push_next(&mut coop)
        .push_next(&mut model)
        .push_next(&mut f16);
    // SAFETY: a valid physical device; the chained structs belong to listed extensions.
    unsafe { instance.get_physical_device_features2(physical, &mut features) };
    if coop.cooperative_matrix == 0 || model.vulkan_memory_model == 0 || f16.shader_float16 == 0 {
        return None;
    }
    let mut subgroup = vk::PhysicalDeviceSubgroupProperties::default();
    let mut size = vk::PhysicalDeviceSubgroupSizeControlProperties::default();
    let mut stages = vk::PhysicalDeviceCooperativeMatrixPropertiesKHR::default();
    let mut props = vk::PhysicalDeviceProperties2::default()
        .push_next(&mut subgroup)
        .push_next(&mut stages);
    let size_control = has(ash::ext::subgroup_size_control::NAME);
    if size_control {
        props = props.push_next(&mut size);
    }
    // SAFETY: as above.
    unsafe { instance.get_physical_device_properties2(physical, &mut props) };
    let compute = vk::ShaderStageFlags::COMPUTE;
    if !stages.cooperative_matrix_supported_stages.contains(compute)
        || !subgroup.supported_stages.contains(compute)
        || !subgroup
            .supported_operations
            .contains(vk::SubgroupFeatureFlags::BASIC)
    {
        return None;
    }
    let loader = ash::khr::cooperative_matrix::Instance::new(entry, instance);
    // SAFETY: the extension is present; a plain query.
    let listed = unsafe { loader.get_physical_device_cooperative_matrix_properties(physical) }
        .unwrap_or_default();
    type T = vk::ComponentTypeKHR;
    let shapes: Vec<FragmentShape> = listed
        .iter()
        .filter(|s| {
            (s.a_type, s.b_type, s.c_type, s.result_type)
                == (T::FLOAT16, T::FLOAT16, T::FLOAT32, T::FLOAT32)
                && s.scope == vk::ScopeKHR::SUBGROUP
                && s.saturating_accumulation == 0
        })
        .map(|s| FragmentShape {
            m: s.m_size,
            n: s.n_size,
            k: s.k_size,
        })
        .collect();
    let fixed_32 = subgroup.subgroup_size == 32
        && (!size_control || (size.min_subgroup_size == 32 && size.max_subgroup_size == 32));
    let fragments = fixed_32
        && subgroup
            .supported_operations
            .contains(vk::SubgroupFeatureFlags::SHUFFLE)
        && shapes.contains(&FragmentShape { m: 16, n: 8, k: 16 });
    let offer = CoopOffer {
        fragments,
        tiles: FragmentShape::best(&shapes),
    };
    (offer.fragments || offer.tiles.is_some()).then_some(offer)
}

/// Whether `physical` offers vulkanMemoryModelDeviceScope (the memory model's extension
/// among its extensions, checked by the caller).
pub fn memory_model_device_scope(instance: &ash::Instance, physical: vk::PhysicalDevice) -> bool {
    let mut model = vk::PhysicalDeviceVulkanMemoryModelFeatures::default();
    let mut features = vk::PhysicalDeviceFeatures2::default().push_next(&mut model);
    // SAFETY: a valid physical device; the chained struct belongs to an offered extension.
    unsafe { instance.get_physical_device_features2(physical, &mut features) };
    model.vulkan_memory_model_device_scope != 0
}

/// The feature structs to chain into `VkDeviceCreateInfo` for the kernel.
pub struct EnabledFeatures {
    /// cooperativeMatrix.
    pub coop: vk::PhysicalDeviceCooperativeMatrixFeaturesKHR<'static>,
    /// vulkanMemoryModel.
    pub model: vk::PhysicalDeviceVulkanMemoryModelFeatures<'static>,
    /// shaderFloat16.
    pub f16: vk::PhysicalDeviceShaderFloat16Int8Features<'static>,
}

impl EnabledFeatures {
    /// The three features on, and with `device_scope` vulkanMemoryModelDeviceScope too.
    pub fn all_on(device_scope: bool) -> EnabledFeatures {
        EnabledFeatures {
            coop: vk::PhysicalDeviceCooperativeMatrixFeaturesKHR::default()
                .cooperative_matrix(true),
            model: vk::PhysicalDeviceVulkanMemoryModelFeatures::default()
                .vulkan_memory_model(true)
                .vulkan_memory_model_device_scope(device_scope),
            f16: vk::PhysicalDeviceShaderFloat16Int8Features::default().shader_float16(true),
        }
    }
}

/// The optional kernels' features (tensor cores; packed integer dot products,
/// `vk::int_dot`) as a host enabled them on a device q4vk adopts, read from the host's
/// `VkPhysicalDeviceFeatures2` chain (`q4vk_context_desc.enabled_features`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostFeatures {
    /// `VkPhysicalDeviceCooperativeMatrixFeaturesKHR::cooperativeMatrix`.
    pub cooperative_matrix: bool,
    /// vulkanMemoryModel (its own struct or `VkPhysicalDeviceVulkan12Features`).
    pub vulkan_memory_model: bool,
    /// vulkanMemoryModelDeviceScope, likewise.
    pub vulkan_memory_model_device_scope: bool,
    /// shaderFloat16 (`VkPhysicalDeviceShaderFloat16Int8Features` or
    /// `VkPhysicalDeviceVulkan12Features`).
    pub shader_float16: bool,
    /// shaderIntegerDotProduct (`VkPhysicalDeviceShaderIntegerDotProductFeatures` or
    /// `VkPhysicalDeviceVulkan13Features`).
    pub shader_integer_dot_product: bool,
}

/// Structures read from a host's chain at most (a longer chain is cut there: a guard
/// against a malformed, cyclic chain).
const MAX_CHAIN: usize = 256;

impl HostFeatures {
    /// Reads the chain at `chain` (NULL: nothing enabled beyond core): every structure the
    /// kernel's features can be enabled in; others are skipped.
    ///
    /// # Safety
    /// `chain` is NULL or a valid Vulkan structure chain (`sType`, `pNext` first) whose
    /// structures of the types read are complete.
    pub unsafe fn from_chain(chain: *const std::ffi::c_void) -> HostFeatures {
        let mut found = HostFeatures::default();
        let mut at = chain.cast::<vk::BaseInStructure>();
        for _ in 0..MAX_CHAIN {
            // SAFETY: NULL or a structure of the chain (caller's contract).
            let Some(base) = (unsafe { at.as_ref() }) else {
                break;
            };
            // The structure as the type its `sType` names (caller's contract).
            let cast = at.cast::<u8>();
            match base.s_type {
                vk::StructureType::PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR => {
                    // SAFETY: see `cast`.
                    let s =
                        unsafe { &*cast.cast::<vk::PhysicalDeviceCooperativeMatrixFeaturesKHR>() };
                    found.cooperative_matrix |= s.cooperative_matrix != 0;
                }
                vk::StructureType::PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES => {
                    // SAFETY: see `cast`.
                    let s = unsafe { &*cast.cast::<vk::PhysicalDeviceVulkanMemoryModelFeatures>() };
                    found.vulkan_memory_model |= s.vulkan_memory_model != 0;
                    found.vulkan_memory_model_device_scope |=
                        s.vulkan_memory_model_device_scope != 0;
                }
                vk::StructureType::PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES => {
                    // SAFETY: see `cast`.
                    let s = unsafe { &*cast.cast::<vk::PhysicalDeviceShaderFloat16Int8Features>() };
                    found.shader_float16 |= s.shader_float16 != 0;
                }
                vk::StructureType::PHYSICAL_DEVICE_VULKAN_1_2_FEATURES => {
                    // SAFETY: see `cast`.
                    let s = unsafe { &*cast.cast::<vk::PhysicalDeviceVulkan12Features>() };
                    found.vulkan_memory_model |= s.vulkan_memory_model != 0;
                    found.vulkan_memory_model_device_scope |=
                        s.vulkan_memory_model_device_scope != 0;
                    found.shader_float16 |= s.shader_float16 != 0;
                }
                vk::StructureType::PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES => {
                    // SAFETY: see `cast`.
                    let s = unsafe {
                        &*cast.cast::<vk::PhysicalDeviceShaderIntegerDotProductFeatures>()
                    };
                    found.shader_integer_dot_product |= s.shader_integer_dot_product != 0;
                }
                vk::StructureType::PHYSICAL_DEVICE_VULKAN_1_3_FEATURES => {
                    // SAFETY: see `cast`.
                    let s = unsafe { &*cast.cast::<vk::PhysicalDeviceVulkan13Features>() };
                    found.shader_integer_dot_product |= s.shader_integer_dot_product != 0;
                }
                _ => {}
            }
            at = base.p_next;
        }
        found
    }

    /// Whether the host enabled what the integer dot-product kernel needs:
    /// shaderIntegerDotProduct, and `VK_KHR_shader_integer_dot_product` among `extensions`
    /// or Vulkan 1.3 as the version in use (`api_version`: the lower of the host's
    /// `apiVersion` and the device's).
    pub fn run_int_dot(&self, extensions: &[&CStr], api_version: u32) -> bool {
        self.shader_integer_dot_product
            && (extensions.contains(&super::int_dot::EXTENSION)
                || api_version >= vk::API_VERSION_1_3)
    }

    /// Whether shaders may use Device-scope atomics on the host's device: the memory model
    /// is off, or its device scope is on.
    pub fn device_scope_atomics(&self) -> bool {
        !self.vulkan_memory_model || self.vulkan_memory_model_device_scope
    }

    /// Whether the host enabled everything the tensor-core kernels need: the three
    /// features and, among `extensions`, `VK_KHR_cooperative_matrix`.
    pub fn run_coop(&self, extensions: &[&CStr]) -> bool {
        self.cooperative_matrix
            && self.vulkan_memory_model
            && self.shader_float16
            && extensions.contains(&ash::khr::cooperative_matrix::NAME)
    }
}

/// `VK_KHR_pipeline_executable_properties`, for device creation (`vk::stats`).
pub const STATISTICS_EXTENSION: &std::ffi::CStr = ash::khr::pipeline_executable_properties::NAME;

/// Whether the physical device offers the statistics extension (among `available`).
pub fn statistics_offered(available: &[vk::ExtensionProperties]) -> bool {
    available
        .iter()
        .any(|e| e.extension_name_as_c_str() == Ok(STATISTICS_EXTENSION))
}

/// The feature struct to chain into `VkDeviceCreateInfo` when the statistics extension is
/// enabled.
pub fn statistics_feature() -> vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR<'static> {
    vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default()
        .pipeline_executable_info(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn features(chain: *const std::ffi::c_void) -> HostFeatures {
        // SAFETY: chains of live, complete structs built by the tests.
        unsafe { HostFeatures::from_chain(chain) }
    }

    #[test]
    fn host_features_are_read_from_every_struct_that_can_enable_them() {
        assert_eq!(features(std::ptr::null()), HostFeatures::default());
        // Separate structs behind VkPhysicalDeviceFeatures2, with an unrelated one between.
        let mut coop =
            vk::PhysicalDeviceCooperativeMatrixFeaturesKHR::default().cooperative_matrix(true);
        let mut other =
            vk::PhysicalDevice16BitStorageFeatures::default().storage_buffer16_bit_access(true);
        let mut model =
            vk::PhysicalDeviceVulkanMemoryModelFeatures::default().vulkan_memory_model(true);
        let mut f16 = vk::PhysicalDeviceShaderFloat16Int8Features::default().shader_float16(true);
        let all = vk::PhysicalDeviceFeatures2::default()
            .push_next(&mut coop)
            .push_next(&mut other)
            .push_next(&mut model)
            .push_next(&mut f16);
        let found = features((&all as *const vk::PhysicalDeviceFeatures2).cast());
        assert_eq!(
            found,
            HostFeatures {
                cooperative_matrix: true,
                vulkan_memory_model: true,
                vulkan_memory_model_device_scope: false,
                shader_float16: true,
                shader_integer_dot_product: false,
            }
        );
        // The memory model without its device scope: no Device-scope atomics.
        assert!(!found.device_scope_atomics());
        assert!(HostFeatures::default().device_scope_atomics());
        let ext = [ash::khr::cooperative_matrix::NAME];
        assert!(found.run_coop(&ext));
        assert!(!found.run_coop(&[ash::khr::push_descriptor::NAME]));
        // The Vulkan 1.2 struct enables the memory model and f16; a feature off stays off.
        let mut coop_off = vk::PhysicalDeviceCooperativeMatrixFeaturesKHR::default();
        let mut v12 = vk::PhysicalDeviceVulkan12Features::default()
            .vulkan_memory_model(true)
            .shader_float16(true);
        let chain = vk::PhysicalDeviceFeatures2::default()
            .push_next(&mut coop_off)
            .push_next(&mut v12);
        let found = features((&chain as *const vk::PhysicalDeviceFeatures2).cast());
        assert!(!found.cooperative_matrix && found.vulkan_memory_model && found.shader_float16);
        assert!(!found.run_coop(&ext));
        // Integer dot products: their own struct or the Vulkan 1.3 one, and the extension
        // or Vulkan 1.3 in use.
        let mut dot = vk::PhysicalDeviceShaderIntegerDotProductFeatures::default()
            .shader_integer_dot_product(true);
        let chain = vk::PhysicalDeviceFeatures2::default().push_next(&mut dot);
        let found = features((&chain as *const vk::PhysicalDeviceFeatures2).cast());
        let dot_ext = [super::super::int_dot::EXTENSION];
        assert!(found.run_int_dot(&dot_ext, vk::API_VERSION_1_1));
        assert!(found.run_int_dot(&[], vk::API_VERSION_1_3));
        assert!(!found.run_int_dot(&[], vk::API_VERSION_1_2));
        let mut v13 =
            vk::PhysicalDeviceVulkan13Features::default().shader_integer_dot_product(true);
        let chain = vk::PhysicalDeviceFeatures2::default().push_next(&mut v13);
        let found = features((&chain as *const vk::PhysicalDeviceFeatures2).cast());
        assert!(found.shader_integer_dot_product && !found.shader_float16);
        assert!(!HostFeatures::default().run_int_dot(&dot_ext, vk::API_VERSION_1_3));
    }

    #[test]
    fn a_cyclic_host_chain_is_cut() {
        let mut coop =
            vk::PhysicalDeviceCooperativeMatrixFeaturesKHR::default().cooperative_matrix(true);
        let at: *mut vk::PhysicalDeviceCooperativeMatrixFeaturesKHR = &mut coop;
        coop.p_next = at.cast();
        let found =
            features((&coop as *const vk::PhysicalDeviceCooperativeMatrixFeaturesKHR).cast());
        assert!(found.cooperative_matrix && !found.vulkan_memory_model);
    }
}
