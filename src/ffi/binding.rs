//! Bindings: a GEMV call resolved once and recorded any number of times, into command
//! buffers that stay valid until the binding is destroyed (`vk::binding`).

use super::backend::Matrix;
use super::context::q4vk_context;
use super::gemv::{checked_call, checked_multi, multi_calls, q4vk_gemv_args};
use super::matrix::q4vk_matrix;
use super::panic::guard;
use super::ptr::{handle, into_handle, release, require, write_out};
use super::status::q4vk_status;
use crate::error::{invalid, Error};
use crate::vk::binding::Binding;
use ash::vk::{self, Handle};
use std::ffi::c_void;

/// A GEMV call (or several on one x) bound once (opaque; `q4vk_gemv_binding_create`,
/// `q4vk_gemv_binding_create_multi`): its matrices, x, y and workspace, its kernels and, on
/// devices without `VK_KHR_push_descriptor`, descriptor sets of its own.
pub struct q4vk_gemv_binding {
    binding: Binding,
    /// The matrices it was made for, in order (dereferenced only while the binding's
    /// tokens of them are alive).
    mats: Vec<*const q4vk_matrix>,
}

/// Binds the call `args` describes on `mat` — checked exactly as `q4vk_cmd_gemv` checks
/// it, kernels chosen and pipelines created — into `*out`, for `q4vk_cmd_gemv_bound` to
/// record any number of times. A command buffer recorded with a binding stays valid, and
/// may be submitted again and again, for as long as the binding, its matrix, its buffers
/// and the context live: on devices without `VK_KHR_push_descriptor` the binding owns its
/// descriptor sets (one, two with a pre-pass), written here once and never again, so the
/// ring's limit (`Q4VK_CMD_GEMV_SET_RING`) does not apply. With push descriptors the
/// buffers are pushed at each record, as `q4vk_cmd_gemv` does. The buffers are named by
/// handle: the host keeps them (not only their memory) alive while the binding is used.
///
/// Statuses: those of `q4vk_cmd_gemv`'s checks; `VULKAN`, `OUT_OF_DEVICE_MEMORY` (pipeline
/// or descriptor pool creation). Nothing is written on failure. Thread-safe.
///
/// # Safety
/// Handles NULL or live; `args` NULL or readable for its `struct_size`; `out` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn q4vk_gemv_binding_create(
    ctx: *mut q4vk_context,
    mat: *const q4vk_matrix,
    args: *const q4vk_gemv_args,
    out: *mut *mut q4vk_gemv_binding,
) -> q4vk_status {
    guard("q4vk_gemv_binding_create", || {
        require(out, "out")?;
        // SAFETY: the caller's contract.
        let c = unsafe { checked_call(ctx, mat, args, "q4vk_gemv_binding_create") }?;
        let binding = Binding::new(c.ctx, c.mat, c.xy, &c.ops, &c.params, c.workspace)?;
        c.rule.warn_other_readings(&c.counts);
        let handle = into_handle(q4vk_gemv_binding {
            binding,
            mats: vec![mat],
        });
        // SAFETY: `out` is writable (contract; checked non-NULL).
        unsafe { write_out(out, handle, "out") }
    })
}

/// Binds the multi call `q4vk_cmd_gemv_multi` would record for `count` matrices `mats`
/// with `args` (checked and resolved as it does them: a shared pre-pass, barriers where a
/// call depends on an earlier one) into `*out`, for `q4vk_cmd_gemv_bound` to record any
/// number of times, as `q4vk_gemv_binding_create` binds one call. Destroying any of the
/// matrices ends the binding's use.
///
/// Statuses: those of `q4vk_cmd_gemv_multi`'s checks; `VULKAN`, `OUT_OF_DEVICE_MEMORY`
/// (pipeline or descriptor pool creation). Nothing is written on failure. Thread-safe.
///
/// # Safety
/// Handles NULL or live; `mats` NULL or readable for `count` handles; `args` NULL or
/// readable for `count` structs of its `struct_size`; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn q4vk_gemv_binding_create_multi(
    ctx: *mut q4vk_context,
    count: u32,
    mats: *const *const q4vk_matrix,
    args: *const q4vk_gemv_args,
    out: *mut *mut q4vk_gemv_binding,
) -> q4vk_status {
    guard("q4vk_gemv_binding_create_multi", || {
        require(out, "out")?;
        // SAFETY: the caller's contract.
        let checked =
            unsafe { checked_multi(ctx, count, mats, args, "q4vk_gemv_binding_create_multi") }?;
        let calls = multi_calls(&checked);
        let binding = Binding::new_multi(checked[0].ctx, &calls)?;
        for c in &checked {
            c.rule.warn_other_readings(&c.counts);
        }
        // SAFETY: `mats` readable for `count` handles (checked by `checked_multi`).
        let mats = (0..count as usize)
            .map(|i| unsafe { mats.add(i).read() })
            .collect();
        let handle = into_handle(q4vk_gemv_binding { binding, mats });
        // SAFETY: `out` is writable (contract; checked non-NULL).
        unsafe { write_out(out, handle, "out") }
    })
}

/// Records `binding`'s GEMV into `command_buffer`, as `q4vk_cmd_gemv` with its arguments
/// would (the same kernels, pre-pass and barriers; no barrier before or after), on the
/// context that made it. Records nothing else, allocates nothing, writes no descriptor:
/// safe to call while earlier command buffers recorded with the binding are pending.
///
/// Statuses: `NULL_POINTER` (ctx, binding, command_buffer), `INVALID_ARGUMENT` (a binding
/// made on another context, or whose matrix was destroyed), `UNSUPPORTED` (a CPU context).
/// Thread-safe for distinct command buffers.
///
/// # Safety
/// `ctx` and `binding` NULL or live; `command_buffer` a valid `VkCommandBuffer` of the
/// context's device in the recording state.
#[no_mangle]
pub unsafe extern "C" fn q4vk_cmd_gemv_bound(
    ctx: *mut q4vk_context,
    binding: *const q4vk_gemv_binding,
    command_buffer: *mut c_void,
) -> q4vk_status {
    guard("q4vk_cmd_gemv_bound", || {
        // SAFETY: NULL or live (contract).
        let c = unsafe { handle(ctx.cast_const(), "ctx") }?;
        // SAFETY: NULL or live (contract).
        let b = unsafe { handle(binding, "binding") }?;
        require(command_buffer, "command_buffer")?;
        let vk_ctx = c.backend.vulkan("q4vk_cmd_gemv_bound")?;
        if !b.binding.made_on(vk_ctx) {
            return Err(invalid!(
                "the binding was made on another context; record it on the one that made it"
            ));
        }
        if !b.binding.matrices_alive() {
            return Err(invalid!(
                "a matrix of the binding was destroyed; destroy the binding and bind the new matrix"
            ));
        }
        let mut mats = Vec::with_capacity(b.mats.len());
        for &mat in &b.mats {
            // SAFETY: the matrix lives (its token does); it is never freed while in use by
            // a call (contract of q4vk_matrix_destroy).
            let Matrix::Device(mat) = &unsafe { &*mat }.0 else {
                return Err(Error::Internal("a binding of a CPU matrix".into()));
            };
            mats.push(mat);
        }
        let cmd = vk::CommandBuffer::from_raw(command_buffer as u64);
        // SAFETY: `cmd` is recording (contract); `vk_ctx` made the binding (checked).
        unsafe { b.binding.record(vk_ctx, cmd, &mats) }
    })
}

/// Destroys a binding (NULL is ignored). Command buffers recorded with it must have
/// finished executing (or been reset or freed); they cannot be submitted again.
///
/// # Safety
/// `binding` NULL or live, not used by another call at the same time.
#[no_mangle]
pub unsafe extern "C" fn q4vk_gemv_binding_destroy(binding: *mut q4vk_gemv_binding) {
    let _ = guard("q4vk_gemv_binding_destroy", || {
        // SAFETY: NULL or a live binding handed out by q4vk_gemv_binding_create (contract).
        unsafe { release(binding) };
        Ok(())
    });
}
