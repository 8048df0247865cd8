//! Buffers with their own memory: device-local storage for matrices, host-visible
//! coherent memory for staging and readback.

use super::device::Device;
use crate::error::{Error, Result};
use ash::vk;
use std::sync::Arc;

/// Where a buffer's memory should live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryKind {
    /// Device-local (host-visible too if that is all there is, as on lavapipe).
    Device,
    /// Host-visible and coherent, written by the host, read by the device in every call
    /// (device-local where the device offers such memory).
    Upload,
    /// Host-visible and coherent, written once by the host and copied to the device (plain
    /// host memory: large staging stays out of a small host-visible device heap).
    Staging,
    /// Host-visible and coherent, read by the host (cached where possible).
    Readback,
}

/// Device memory a host's allocator gave for one buffer (`DeviceAllocator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostAllocation {
    /// The memory, of a type among the requirements' bits.
    pub memory: vk::DeviceMemory,
    /// Where in it the buffer binds (a multiple of the requirements' alignment).
    pub offset: u64,
    /// The host's mapping of `offset` (host-coherent memory), or null: q4vk then writes
    /// the buffer through a staging copy.
    pub mapped: *mut u8,
}

/// A host's allocator of device memory for the matrices of a context
/// (`q4vk_context_desc.allocate`): q4vk creates each buffer, asks for memory of its
/// requirements, binds it, and hands it back when the buffer goes.
pub trait DeviceAllocator: Send + Sync + std::fmt::Debug {
    /// Memory of `size` bytes at an offset aligned to `alignment`, of one of the types in
    /// `memory_type_bits`; `None` where the host has none.
    fn allocate(&self, size: u64, alignment: u64, memory_type_bits: u32) -> Option<HostAllocation>;
    /// Takes back an allocation of `allocate` (its buffer is destroyed).
    fn free(&self, allocation: &HostAllocation);
}

/// Whose memory a buffer is bound to.
enum Backing {
    /// q4vk's own dedicated allocation.
    Own(vk::DeviceMemory),
    /// The host's, given back to its allocator on drop.
    Host(Arc<dyn DeviceAllocator>, HostAllocation),
}

/// A buffer bound to a dedicated allocation (or to the host's memory); destroyed and freed
/// on drop.
pub struct Buffer {
    device: Arc<Device>,
    /// The buffer.
    pub buffer: vk::Buffer,
    backing: Backing,
    /// Size in bytes.
    pub size: u64,
    /// Bytes of its memory allocation (`VkMemoryRequirements::size`).
    pub allocated: u64,
    mapped: *mut u8,
}

// SAFETY: the mapping is plain memory owned by this buffer; access is synchronized by the
// owners (matrices are immutable after upload, staging sits behind a mutex).
unsafe impl Send for Buffer {}
// SAFETY: as above.
unsafe impl Sync for Buffer {}

fn pick_type(
    props: &vk::PhysicalDeviceMemoryProperties,
    bits: u32,
    wanted: &[vk::MemoryPropertyFlags],
) -> Option<u32> {
    wanted.iter().find_map(|&flags| {
        (0..props.memory_type_count).find(|&i| {
            bits & (1 << i) != 0
                && props.memory_types[i as usize]
                    .property_flags
                    .contains(flags)
        })
    })
}

/// The queue families a buffer of `kind` is shared by (`VK_SHARING_MODE_CONCURRENT`), or
/// none (`EXCLUSIVE`). Matrix buffers (`Device`) are read by the host's command buffers of
/// any family (`q4vk_cmd_gemv`), so on a device of several families they are shared by all
/// of them and need no ownership transfer; staging is used on q4vk's queue only.
pub fn shared_families(kind: MemoryKind, family_count: u32) -> Vec<u32> {
    if kind == MemoryKind::Device && family_count > 1 {
        (0..family_count).collect()
    } else {
        Vec::new()
    }
}

/// What a buffer of some size and kind takes on a device (`Buffer::placement`): its
/// memory requirements and the memory type q4vk binds it to.
#[derive(Debug, Clone, Copy)]
pub struct Placement {
    /// `vkGetBufferMemoryRequirements`: bytes, alignment and the types that can hold it.
    pub requirements: vk::MemoryRequirements,
    /// The memory type q4vk takes of those.
    pub type_index: u32,
    /// Host-visible and coherent: q4vk maps it (and writes matrices in place).
    pub mapped: bool,
}

/// A storage buffer (also a transfer source and destination) of `size` bytes, `kind`'s
/// sharing, created without memory.
///
/// # Safety
/// Plain creation on a live device; the caller destroys the buffer.
unsafe fn create_unbound(device: &Device, size: u64, kind: MemoryKind) -> Result<vk::Buffer> {
    let usage = vk::BufferUsageFlags::STORAGE_BUFFER
        | vk::BufferUsageFlags::TRANSFER_SRC
        | vk::BufferUsageFlags::TRANSFER_DST;
    let families = shared_families(kind, device.queue_families);
    let info = vk::BufferCreateInfo::default()
        .size(size.max(4))
        .usage(usage)
        .sharing_mode(if families.is_empty() {
            vk::SharingMode::EXCLUSIVE
        } else {
            vk::SharingMode::CONCURRENT
        })
        .queue_family_indices(&families);
    // SAFETY: valid device and create info (caller's contract).
    unsafe { device.device.create_buffer(&info, None) }.map_err(|e| Error::vk("vkCreateBuffer", e))
}

/// The placement of `buffer` (of `kind`) on `device`: `Unsupported` where no memory type
/// suits it.
///
/// # Safety
/// `buffer` is a live buffer of `device`.
unsafe fn placement_of(device: &Device, buffer: vk::Buffer, kind: MemoryKind) -> Result<Placement> {
    type F = vk::MemoryPropertyFlags;
    // SAFETY: a live buffer of this device (caller's contract).
    let requirements = unsafe { device.device.get_buffer_memory_requirements(buffer) };
    let host = F::HOST_VISIBLE | F::HOST_COHERENT;
    let wanted: &[F] = match kind {
        MemoryKind::Device => &[F::DEVICE_LOCAL, F::empty()],
        MemoryKind::Upload => &[host | F::DEVICE_LOCAL, host],
        MemoryKind::Staging => &[host],
        MemoryKind::Readback => &[host | F::HOST_CACHED, host],
    };
    let Some(type_index) = pick_type(&device.info.memory, requirements.memory_type_bits, wanted)
    else {
        return Err(Error::Unsupported(format!(
            "no memory type suits a {kind:?} buffer (type bits {:#x})",
            requirements.memory_type_bits
        )));
    };
    let flags = device.info.memory.memory_types[type_index as usize].property_flags;
    Ok(Placement {
        requirements,
        type_index,
        mapped: flags.contains(host),
    })
}

impl Buffer {
    /// What a buffer of `size` bytes and `kind` takes on `device`, found with a buffer
    /// created and destroyed here (no memory is allocated).
    pub fn placement(device: &Device, size: u64, kind: MemoryKind) -> Result<Placement> {
        // SAFETY: a buffer of this device, destroyed before returning.
        unsafe {
            let buffer = create_unbound(device, size, kind)?;
            let placement = placement_of(device, buffer, kind);
            device.device.destroy_buffer(buffer, None);
            placement
        }
    }

    /// Creates a storage buffer of `size` bytes (also a transfer source and destination);
    /// the buffer and its memory carry the debug name `name`.
    pub fn new(device: &Arc<Device>, size: u64, kind: MemoryKind, name: &str) -> Result<Buffer> {
        let d = &device.device;
        // SAFETY: valid device and create info; every created object is released on the
        // error paths.
        unsafe {
            let buffer = create_unbound(device, size, kind)?;
            let place = match placement_of(device, buffer, kind) {
                Ok(p) => p,
                Err(e) => {
                    d.destroy_buffer(buffer, None);
                    return Err(e);
                }
            };
            let alloc = vk::MemoryAllocateInfo::default()
                .allocation_size(place.requirements.size)
                .memory_type_index(place.type_index);
            let memory = match d.allocate_memory(&alloc, None) {
                Ok(m) => m,
                Err(e) => {
                    d.destroy_buffer(buffer, None);
                    return Err(Error::vk("vkAllocateMemory", e));
                }
            };
            device.namer.name(buffer, name);
            device.namer.name(memory, name);
            let mut this = Buffer {
                device: device.clone(),
                buffer,
                backing: Backing::Own(memory),
                size,
                allocated: place.requirements.size,
                mapped: std::ptr::null_mut(),
            };
            d.bind_buffer_memory(buffer, memory, 0)
                .map_err(|e| Error::vk("vkBindBufferMemory", e))?;
            if place.mapped {
                this.mapped = d
                    .map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
                    .map_err(|e| Error::vk("vkMapMemory", e))?
                    .cast();
            }
            Ok(this)
        }
    }

    /// A device-local buffer of `size` bytes bound to memory from the host's `allocator`
    /// (named `name`): `OutOfDeviceMemory` where it has none, `InvalidArgument` where what it
    /// gives breaks the requirements it was asked for (nothing of it is kept).
    pub fn in_host_memory(
        device: &Arc<Device>,
        size: u64,
        allocator: &Arc<dyn DeviceAllocator>,
        name: &str,
    ) -> Result<Buffer> {
        let d = &device.device;
        // SAFETY: valid device and create info; the buffer is destroyed on every error path
        // and the allocation given back.
        unsafe {
            let buffer = create_unbound(device, size, MemoryKind::Device)?;
            let r = d.get_buffer_memory_requirements(buffer);
            let Some(a) = allocator.allocate(r.size, r.alignment, r.memory_type_bits) else {
                d.destroy_buffer(buffer, None);
                return Err(Error::OutOfDeviceMemory(format!(
                    "the host's allocator has no {} bytes (alignment {}, memory types {:#x}) for {name}",
                    r.size, r.alignment, r.memory_type_bits
                )));
            };
            let refuse = |why: String| {
                allocator.free(&a);
                d.destroy_buffer(buffer, None);
                Err(Error::InvalidArgument(why))
            };
            if a.memory == vk::DeviceMemory::null() || !a.offset.is_multiple_of(r.alignment.max(1))
            {
                return refuse(format!(
                    "the host's allocator gave memory {:#x} at offset {} for {name}; a buffer needs memory at a multiple of {}",
                    ash::vk::Handle::as_raw(a.memory),
                    a.offset,
                    r.alignment
                ));
            }
            if let Err(e) = d.bind_buffer_memory(buffer, a.memory, a.offset) {
                return refuse(format!(
                    "vkBindBufferMemory on the host's allocation for {name} failed: {e}"
                ));
            }
            device.namer.name(buffer, name);
            Ok(Buffer {
                device: device.clone(),
                buffer,
                backing: Backing::Host(allocator.clone(), a),
                size,
                allocated: r.size,
                mapped: a.mapped,
            })
        }
    }

    /// The host mapping (host-visible, coherent memory), if any.
    pub fn mapped(&self) -> Option<*mut u8> {
        (!self.mapped.is_null()).then_some(self.mapped)
    }

    /// Copies `bytes` to the start of a mapped buffer.
    pub fn write(&self, offset: usize, bytes: &[u8]) {
        assert!(!self.mapped.is_null() && offset + bytes.len() <= self.size as usize);
        // SAFETY: in bounds of the mapping; the device is not using it (caller's contract).
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.mapped.add(offset), bytes.len())
        };
    }

    /// Lets `fill` write the first `len` bytes of a mapped buffer in place (no host copy).
    pub fn fill(&mut self, len: usize, fill: impl FnOnce(&mut [u8])) {
        assert!(!self.mapped.is_null() && len <= self.size as usize);
        // SAFETY: in bounds of the mapping; `&mut self` makes this the only access from the
        // host, and the device is not using the buffer (caller's contract).
        fill(unsafe { std::slice::from_raw_parts_mut(self.mapped, len) });
    }

    /// Copies from a mapped buffer into `out`.
    pub fn read(&self, offset: usize, out: &mut [u8]) {
        assert!(!self.mapped.is_null() && offset + out.len() <= self.size as usize);
        // SAFETY: in bounds of the mapping; the device finished writing it.
        unsafe {
            std::ptr::copy_nonoverlapping(self.mapped.add(offset), out.as_mut_ptr(), out.len())
        };
    }
}

/// Allocates one descriptor set of `layout` from `pool` and binds `buffers`, whole, to
/// storage-buffer bindings 0, 1, 2, … in order. The set stays unnamed (see
/// `vk::debug_name`): its pool's name says whose it is.
///
/// # Safety
/// `pool` and `layout` must belong to `device`, and the pool must have room for the set.
pub unsafe fn storage_set(
    device: &Device,
    pool: vk::DescriptorPool,
    layout: vk::DescriptorSetLayout,
    buffers: &[&Buffer],
) -> Result<vk::DescriptorSet> {
    let layouts = [layout];
    // SAFETY: pool and layout of this device with room for the set (caller's contract).
    let set = unsafe {
        device.device.allocate_descriptor_sets(
            &vk::DescriptorSetAllocateInfo::default()
                .descriptor_pool(pool)
                .set_layouts(&layouts),
        )
    }
    .map_err(|e| Error::vk("vkAllocateDescriptorSets", e))?[0];
    let infos: Vec<[vk::DescriptorBufferInfo; 1]> = buffers
        .iter()
        .map(|b| {
            [vk::DescriptorBufferInfo {
                buffer: b.buffer,
                offset: 0,
                range: vk::WHOLE_SIZE,
            }]
        })
        .collect();
    let writes: Vec<vk::WriteDescriptorSet> = infos
        .iter()
        .enumerate()
        .map(|(i, info)| {
            vk::WriteDescriptorSet::default()
                .dst_set(set)
                .dst_binding(i as u32)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .buffer_info(info)
        })
        .collect();
    // SAFETY: a fresh set (no command buffer uses it yet) and live buffers of this device.
    unsafe { device.device.update_descriptor_sets(&writes, &[]) };
    Ok(set)
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: q4vk created both; no submission using them is pending (synchronous
        // submits; a host's command buffers must not outlive the matrix, per the contract).
        unsafe {
            self.device.device.destroy_buffer(self.buffer, None);
            match &self.backing {
                Backing::Own(memory) => self.device.device.free_memory(*memory, None),
                Backing::Host(allocator, a) => allocator.free(a),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matrix_buffers_are_shared_by_every_queue_family() {
        assert_eq!(shared_families(MemoryKind::Device, 3), vec![0, 1, 2]);
        // One family: EXCLUSIVE (CONCURRENT needs at least two).
        assert!(shared_families(MemoryKind::Device, 1).is_empty());
        for kind in [
            MemoryKind::Upload,
            MemoryKind::Staging,
            MemoryKind::Readback,
        ] {
            assert!(shared_families(kind, 3).is_empty());
        }
    }
}
