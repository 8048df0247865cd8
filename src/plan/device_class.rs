//! What a device is, as the kernel rules need it: its family (from one vendor-id table) and
//! the sizes and limits it reports.

/// The family of a device, from its PCI vendor id ([`Family::of`]); CPU implementations of
/// Vulkan (lavapipe, SwiftShader) are [`Family::Software`] whatever their vendor id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// NVIDIA GPUs.
    Nvidia,
    /// AMD GPUs (and Samsung Xclipse, which is AMD's RDNA).
    Amd,
    /// Intel GPUs.
    Intel,
    /// Qualcomm Adreno.
    Adreno,
    /// ARM Mali.
    Mali,
    /// Apple GPUs through MoltenVK.
    Apple,
    /// Imagination PowerVR.
    PowerVr,
    /// A CPU implementation of Vulkan.
    Software,
    /// Anything else.
    Other,
}

/// PCI vendor ids by family (Khronos' `VkVendorId` for the non-PCI ones).
const VENDORS: [(u32, Family); 9] = [
    (0x10DE, Family::Nvidia),
    (0x1002, Family::Amd),
    (0x1022, Family::Amd),
    (0x144D, Family::Amd),
    (0x8086, Family::Intel),
    (0x5143, Family::Adreno),
    (0x13B5, Family::Mali),
    (0x106B, Family::Apple),
    (0x1010, Family::PowerVr),
];

impl Family {
    /// The family of a device of `vendor` id; `cpu`: a CPU implementation.
    pub fn of(vendor: u32, cpu: bool) -> Family {
        if cpu {
            return Family::Software;
        }
        VENDORS
            .iter()
            .find(|(id, _)| *id == vendor)
            .map_or(Family::Other, |(_, f)| *f)
    }
}

/// What the kernel rules know of a device: built once per context from what the device
/// reports (`vk::device::DeviceInfo::class`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceClass {
    /// Family, from the vendor id.
    pub family: Family,
    /// `vendorID`.
    pub vendor: u32,
    /// A CPU implementation (`VK_PHYSICAL_DEVICE_TYPE_CPU`).
    pub cpu: bool,
    /// The subgroup size the device reports.
    pub subgroup_size: u32,
    /// The smallest subgroup a shader may run in.
    pub min_subgroup_size: u32,
    /// `maxComputeSharedMemorySize`.
    pub max_shared: u32,
    /// Largest workgroup (invocations, and along x).
    pub max_workgroup: u32,
    /// `maxStorageBufferRange`.
    pub max_storage_range: u64,
    /// `maxComputeWorkGroupCount` in x and y: the most workgroups of one dispatch.
    pub max_groups: [u32; 2],
    /// Streaming multiprocessors, where the driver reports them (`VK_NV_shader_sm_builtins`).
    pub sm_count: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_come_from_the_vendor_id_and_cpu_implementations_are_software() {
        assert_eq!(Family::of(0x10DE, false), Family::Nvidia);
        assert_eq!(Family::of(0x5143, false), Family::Adreno);
        assert_eq!(Family::of(0x13B5, false), Family::Mali);
        assert_eq!(Family::of(0x144D, false), Family::Amd);
        assert_eq!(Family::of(0x10005, true), Family::Software);
        assert_eq!(Family::of(0x10DE, true), Family::Software);
        assert_eq!(Family::of(0xBEEF, false), Family::Other);
    }
}
