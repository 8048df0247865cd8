//! What q4vk takes on the device: `q4vk_matrix_footprint`, a matrix asked before it is
//! created (`vk::matrix::footprint`), and `q4vk_context_memory`, what a context holds now.

use super::backend::Backend;
use super::context::q4vk_context;
use super::import::{device_shape, input_byte_counts, native_block_type};
use super::matrix::q4vk_matrix_desc;
use super::panic::guard;
use super::ptr::{handle, read_struct, write_prefix, VersionedStruct};
use super::status::q4vk_status;
use crate::error::Error;
use crate::vk::matrix::{footprint, form_footprint};
use crate::vk::matrix_form::MatrixForm;

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
    /// Staging bytes `q4vk_matrix_create_recorded` needs for all of the matrix's buffers
    /// at once (each at a multiple of 16 bytes; 0 where q4vk's own device memory is
    /// host-visible and written in place). On a context with the host's allocator both
    /// staging figures count every buffer: whether it maps its memory is its own to say, and
    /// buffers in memory it maps take none.
    pub upload_bytes: u64,
}

// SAFETY: repr(C), starts with u32 struct_size; integers only.
unsafe impl VersionedStruct for q4vk_matrix_footprint_info {
    const V0_SIZE: usize = std::mem::size_of::<q4vk_matrix_footprint_info>();
    const NAME: &'static str = "q4vk_matrix_footprint_info";
}

/// Stores in `*out` what `q4vk_matrix_create(ctx, desc, …)` would take on the device —
/// device bytes (as the driver sizes each buffer), buffers, alignment, memory types and the
/// staging its upload holds — without creating anything on the device: the desc's fields
/// and buffer sizes are checked as `q4vk_matrix_create` checks them (of its data only
/// GPTQ's `g_idx` is read, to tell act-order apart), and buffers are created without memory
/// to ask the driver their requirements. A matrix larger than the device's largest heap is reported here and
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
        // The buffers' sizes as q4vk_matrix_create checks them; the weights are not read.
        if let Some(c) = counts.iter().find(|c| c.given < c.exact) {
            return Err(Error::BufferTooSmall(format!(
                "{} is {}, {} needed",
                c.arg, c.given, c.exact
            )));
        }
        let f = match native_block_type(&d)? {
            Some(ty) => {
                let max_part = vk_ctx.limits.max_part_bytes;
                let form = MatrixForm::of_blocks(ty, d.n as usize, d.k as usize, max_part)?;
                form_footprint(vk_ctx, &form, 2)?
            }
            None => {
                // SAFETY: `g_idx` is readable for its size (contract); nothing else is read.
                let s = unsafe { device_shape(&d) }?;
                footprint(vk_ctx, s.shape, s.scale, s.offsets, s.k_order)?
            }
        };
        let value = q4vk_matrix_footprint_info {
            struct_size: declared.struct_size,
            buffers: f.buffers,
            device_bytes: f.device_bytes,
            alignment: f.alignment,
            staging_bytes: f.staging_bytes,
            memory_type_bits: f.memory_type_bits,
            upload_bytes: f.upload_bytes,
        };
        // SAFETY: writable for its `struct_size` (contract).
        unsafe { write_prefix(out, &value, declared.struct_size as usize, "out") }
    })
}

/// What `q4vk_context_memory` answers. The caller sets `struct_size =
/// sizeof(q4vk_context_memory_info)`; q4vk writes the other fields.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct q4vk_context_memory_info {
    /// Set by the caller: `sizeof(q4vk_context_memory_info)`.
    pub struct_size: u32,
    /// Pipelines the context has created so far (each kernel variant a call used or
    /// `q4vk_gemv_prepare` created).
    pub pipelines: u32,
    /// Bytes of the context's pipeline cache (`q4vk_context_pipeline_cache_size`).
    pub pipeline_cache_bytes: u64,
    /// Device memory of `q4vk_gemv`'s buffers, kept between calls and grown on demand: x
    /// and y (host-visible) and the workspace of its pre-passes (their allocations).
    pub gemv_buffer_bytes: u64,
    /// Descriptor sets of the ring of one-shot GEMV recordings (devices without
    /// `VK_KHR_push_descriptor`; at most `Q4VK_CMD_GEMV_SET_RING`), and their pools.
    pub descriptor_sets: u32,
    /// See `descriptor_sets`.
    pub descriptor_pools: u32,
}

// SAFETY: repr(C), starts with u32 struct_size; integers only.
unsafe impl VersionedStruct for q4vk_context_memory_info {
    const V0_SIZE: usize = std::mem::size_of::<q4vk_context_memory_info>();
    const NAME: &'static str = "q4vk_context_memory_info";
}

/// Stores in `*out` what `ctx` holds now besides its matrices (which are the host's to
/// count: `q4vk_matrix_footprint`) and bindings: its pipelines and their cache, the device
/// memory of `q4vk_gemv`'s staging and workspace, and the descriptor sets of its ring. A
/// CPU context holds none of these: all fields 0.
///
/// Statuses: `NULL_POINTER` (ctx, out), `INVALID_ARGUMENT` (struct_size), `VULKAN`
/// (`vkGetPipelineCacheData`). Nothing is written on failure. Thread-safe.
///
/// # Safety
/// `ctx` NULL or live; `out` NULL or writable for its `struct_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn q4vk_context_memory(
    ctx: *const q4vk_context,
    out: *mut q4vk_context_memory_info,
) -> q4vk_status {
    guard("q4vk_context_memory", || {
        // SAFETY: NULL or a live context (contract).
        let context = unsafe { handle(ctx, "ctx") }?;
        // SAFETY: NULL or readable for its `struct_size` (contract).
        let declared = unsafe { read_struct(out.cast_const(), "out") }?;
        let mut value = q4vk_context_memory_info {
            struct_size: declared.struct_size,
            pipelines: 0,
            pipeline_cache_bytes: 0,
            gemv_buffer_bytes: 0,
            descriptor_sets: 0,
            descriptor_pools: 0,
        };
        if let Backend::Vulkan(c) = &context.backend {
            value.pipelines = c.pipelines.created() as u32;
            value.pipeline_cache_bytes = c.pipelines.cache_data()?.len() as u64;
            value.gemv_buffer_bytes = {
                let exec = c.exec.lock().unwrap_or_else(|e| e.into_inner());
                exec.buffers.allocated_bytes()
            };
            if let Some(sets) = &c.xy_sets {
                let sets = sets.lock().unwrap_or_else(|e| e.into_inner());
                value.descriptor_sets = sets.allocated() as u32;
                value.descriptor_pools = sets.pools() as u32;
            }
        }
        // SAFETY: writable for its `struct_size` (contract).
        unsafe { write_prefix(out, &value, declared.struct_size as usize, "out") }
    })
}
