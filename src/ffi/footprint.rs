//! `q4vk_matrix_footprint`: what a matrix would take on the device, asked before it is
//! created (`vk::matrix::footprint`).

use super::backend::Backend;
use super::context::q4vk_context;
use super::import::{input_byte_counts, matrix_data};
use super::matrix::q4vk_matrix_desc;
use super::panic::guard;
use super::ptr::{handle, read_struct, write_prefix, VersionedStruct};
use super::status::q4vk_status;
use crate::error::Error;
use crate::vk::matrix::footprint;

/// What `q4vk_matrix_footprint` answers. The caller sets `struct_size =
/// sizeof(q4vk_matrix_footprint_info)`; q4vk writes the other fields.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct q4vk_matrix_footprint_info {
    /// Set by the caller: `sizeof(q4vk_matrix_footprint_info)`.
    pub struct_size: u32,
    /// Buffers the matrix takes, each with its own allocation.
    pub buffers: u32,
    /// Bytes of device memory: the sum of every buffer's `VkMemoryRequirements::size`.
    pub device_bytes: u64,
    /// The largest `VkMemoryRequirements::alignment` of its buffers.
    pub alignment: u64,
    /// Host-visible staging memory `q4vk_matrix_create` holds at most at once while it
    /// uploads (one buffer's bytes at a time; 0 where the device memory is host-visible and
    /// written in place).
    pub staging_bytes: u64,
    /// Memory types (bits of `VkPhysicalDeviceMemoryProperties`) that every buffer can
    /// live in.
    pub memory_type_bits: u32,
}

// SAFETY: repr(C), starts with u32 struct_size; integers only.
unsafe impl VersionedStruct for q4vk_matrix_footprint_info {
    const V0_SIZE: usize = std::mem::size_of::<q4vk_matrix_footprint_info>();
    const NAME: &'static str = "q4vk_matrix_footprint_info";
}

/// Stores in `*out` what `q4vk_matrix_create(ctx, desc, …)` would take on the device —
/// device bytes (as the driver sizes each buffer), buffers, alignment, memory types and the
/// staging its upload holds — without creating anything on the device: the desc is read
/// and checked as `q4vk_matrix_create` reads it (its data too, which q4vk converts as it
/// would to upload it), and buffers are created without memory to ask the driver their
/// requirements. A matrix larger than the device's largest heap is reported here and
/// refused by `q4vk_matrix_create`.
///
/// Statuses: those of `q4vk_matrix_create`'s checks (`NULL_POINTER`, `INVALID_ARGUMENT`,
/// `BUFFER_TOO_SMALL`, `UNSUPPORTED`); `UNSUPPORTED` on a CPU context (its matrices live in
/// host memory: `q4vk_gemv_plan_info.matrix_bytes` gives their bytes); `VULKAN`. Nothing is
/// written on failure. Thread-safe.
///
/// # Safety
/// `ctx` NULL or live; `desc` NULL or readable for its `struct_size`, its data pointers for
/// their sizes; `out` NULL or writable for its `struct_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn q4vk_matrix_footprint(
    ctx: *const q4vk_context,
    desc: *const q4vk_matrix_desc,
    out: *mut q4vk_matrix_footprint_info,
) -> q4vk_status {
    guard("q4vk_matrix_footprint", || {
        // SAFETY: NULL or a live context (contract).
        let context = unsafe { handle(ctx, "ctx") }?;
        // SAFETY: NULL or readable for its `struct_size` (contract).
        let d = unsafe { read_struct(desc, "desc") }?;
        // SAFETY: NULL or readable for its `struct_size` (contract).
        let declared = unsafe { read_struct(out.cast_const(), "out") }?;
        let counts = input_byte_counts(&d)?;
        context.byte_counts.refuse_inexact(&counts)?;
        let Backend::Vulkan(vk_ctx) = &context.backend else {
            return Err(Error::Unsupported(
                "a CPU context keeps matrices in host memory; q4vk_gemv_plan_info.matrix_bytes of a created matrix gives their bytes".into(),
            ));
        };
        // SAFETY: the desc's data pointers are readable for their sizes (contract).
        let imported = unsafe { matrix_data(&d) }?;
        let (q4, offsets, k_order) = imported.device_parts()?;
        let f = footprint(vk_ctx, q4, offsets.is_some(), k_order.is_some())?;
        let value = q4vk_matrix_footprint_info {
            struct_size: declared.struct_size,
            buffers: f.buffers,
            device_bytes: f.device_bytes,
            alignment: f.alignment,
            staging_bytes: f.staging_bytes,
            memory_type_bits: f.memory_type_bits,
        };
        // SAFETY: writable for its `struct_size` (contract).
        unsafe { write_prefix(out, &value, declared.struct_size as usize, "out") }
    })
}
