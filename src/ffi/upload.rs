//! `q4vk_matrix_create_recorded`: a matrix whose upload is recorded into the host's command
//! buffer from the host's staging memory (`vk::matrix::RecordedUpload`), for the host to
//! submit, wait for or overlap with other work.

use super::backend::{Backend, Matrix};
use super::context::q4vk_context;
use super::gemv::q4vk_buffer_ref;
use super::import::{block_tensor, input_byte_counts, matrix_data};
use super::matrix::{q4vk_matrix, q4vk_matrix_desc};
use super::panic::guard;
use super::ptr::{handle, into_handle, read_struct, require, write_out};
use super::status::q4vk_status;
use crate::error::{invalid, Error};
use crate::vk::gemv::BufferRange;
use crate::vk::matrix::{DeviceMatrix, RecordedUpload, UploadRoute};
use ash::vk::{self, Handle};
use std::ffi::c_void;

/// The host's staging memory for `q4vk_matrix_create_recorded`: a range of a buffer
/// created with `VK_BUFFER_USAGE_TRANSFER_SRC_BIT`, and the host's mapping of its first
/// byte in host-coherent memory.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct q4vk_staging {
    /// The buffer and the range q4vk may write (`q4vk_matrix_footprint_info.upload_bytes`
    /// at least; not `VK_WHOLE_SIZE`).
    pub buffer: q4vk_buffer_ref,
    /// The host's mapping of `buffer.offset`, writable for `buffer.range` bytes.
    pub mapped: *mut c_void,
}

/// Creates a matrix as `q4vk_matrix_create` does, except that its bytes go through the
/// host's staging memory: q4vk writes them there and records into `command_buffer` one
/// `vkCmdCopyBuffer` per buffer and then a barrier from the transfers' writes to compute
/// shaders' reads (`VK_PIPELINE_STAGE_TRANSFER_BIT` / `VK_ACCESS_TRANSFER_WRITE_BIT` to
/// `VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT` / `VK_ACCESS_SHADER_READ_BIT`). Nothing is
/// submitted: the matrix may be used in commands recorded after these in the same command
/// buffer or submitted after it, and by `q4vk_gemv` once it has executed. Buffers in memory
/// q4vk maps (host-visible device memory, or the host allocator's mapped allocations) are
/// written in place and get no copy. The staging memory must stay untouched until the
/// command buffer has executed.
///
/// Statuses: those of `q4vk_matrix_create`; `NULL_POINTER` (command_buffer, staging, its
/// buffer or mapping), `INVALID_ARGUMENT` (a staging range of 0 or `VK_WHOLE_SIZE`),
/// `BUFFER_TOO_SMALL` (a staging range below what the matrix needs; nothing is recorded),
/// `UNSUPPORTED` (a CPU context). On failure nothing is recorded and `*out` is untouched;
/// the staging memory may have been written. Thread-safe for distinct command buffers.
///
/// # Safety
/// `ctx` NULL or live; `desc` as for `q4vk_matrix_create`; `command_buffer` a
/// `VkCommandBuffer` of the context's device in the recording state, outside a render pass;
/// `staging` NULL or readable, its mapping writable for its range; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn q4vk_matrix_create_recorded(
    ctx: *mut q4vk_context,
    desc: *const q4vk_matrix_desc,
    command_buffer: *mut c_void,
    staging: *const q4vk_staging,
    out: *mut *mut q4vk_matrix,
) -> q4vk_status {
    guard("q4vk_matrix_create_recorded", || {
        // SAFETY: NULL or a live context (contract).
        let context = unsafe { handle(ctx.cast_const(), "ctx") }?;
        // SAFETY: NULL or readable for its `struct_size` (contract).
        let d = unsafe { read_struct(desc, "desc") }?;
        require(out, "out")?;
        require(command_buffer, "command_buffer")?;
        // SAFETY: NULL or readable (contract).
        let s = *unsafe { handle(staging, "staging") }?;
        if s.buffer.buffer == 0 {
            return Err(Error::NullPointer(
                "staging->buffer.buffer is VK_NULL_HANDLE".into(),
            ));
        }
        require(s.mapped, "staging->mapped")?;
        if s.buffer.range == 0 || s.buffer.range == vk::WHOLE_SIZE {
            return Err(invalid!(
                "staging->buffer.range is {}; give the bytes q4vk may write (q4vk_matrix_footprint_info.upload_bytes)",
                s.buffer.range
            ));
        }
        let counts = input_byte_counts(&d)?;
        context.byte_counts.refuse_inexact(&counts)?;
        let Backend::Vulkan(vk_ctx) = &context.backend else {
            return Err(Error::Unsupported(
                "q4vk_matrix_create_recorded needs a Vulkan context; a CPU context's matrices live in host memory (q4vk_matrix_create)".into(),
            ));
        };
        let range = BufferRange {
            buffer: vk::Buffer::from_raw(s.buffer.buffer),
            offset: s.buffer.offset,
            range: s.buffer.range,
        };
        // SAFETY: the host's mapping, writable for the range until the copies executed
        // (contract).
        let mut recorded = unsafe { RecordedUpload::new(range, s.mapped.cast()) };
        let route = &mut UploadRoute::Recorded(&mut recorded);
        // SAFETY: the desc's data pointers are readable for their sizes (contract).
        let matrix = match unsafe { block_tensor(&d) }? {
            Some(t) => DeviceMatrix::from_blocks(vk_ctx, t.ty, t.n, t.k, t.bytes, route)?,
            None => {
                // SAFETY: as above.
                let imported = unsafe { matrix_data(&d) }?;
                let (q4, offsets, k_order) = imported.device_parts()?;
                DeviceMatrix::in_layout(vk_ctx, q4, offsets, k_order, vk_ctx.coop, route)?
            }
        };
        let cmd = vk::CommandBuffer::from_raw(command_buffer as u64);
        // SAFETY: `cmd` is recording (contract); the matrix's buffers live until it is
        // destroyed, which the host does after the command buffer executed (contract).
        unsafe { recorded.record(&vk_ctx.device, cmd) };
        context.byte_counts.warn_other_readings(&counts);
        let matrix = into_handle(q4vk_matrix(Matrix::Device(matrix)));
        // SAFETY: `out` is writable (contract; checked non-NULL).
        unsafe { write_out(out, matrix, "out") }
    })
}
