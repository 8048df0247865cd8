//! Packed matrix blobs: a matrix's device bytes saved once (`q4vk_matrix_blob`) and given
//! back to create it again by copying them (`q4vk_matrix_create_from_blob`; `vk::matrix_blob`).

use super::backend::{Backend, Matrix};
use super::context::q4vk_context;
use super::matrix::q4vk_matrix;
use super::panic::guard;
use super::ptr::{check_size, handle, in_bytes, into_handle, out_bytes, require, write_out};
use super::status::q4vk_status;
use crate::error::{invalid, Error, Result};
use crate::vk::context::Context;
use crate::vk::matrix::DeviceMatrix;
use crate::vk::matrix_blob::{blob_bytes, blob_of, matrix_from_blob};
use std::ffi::c_void;

/// The Vulkan context and device matrix behind `ctx` and `mat` (same device), for `call`.
///
/// # Safety
/// Handles NULL or live.
unsafe fn vulkan<'a>(
    ctx: *const q4vk_context,
    mat: *const q4vk_matrix,
    call: &str,
) -> Result<(&'a Context, &'a DeviceMatrix)> {
    // SAFETY: NULL or live (contract).
    let c = unsafe { handle(ctx, "ctx") }?;
    // SAFETY: NULL or live (contract).
    let m = unsafe { handle(mat, "mat") }?;
    let vk_ctx = c.backend.vulkan(call)?;
    match &m.0 {
        Matrix::Device(d) if d.same_device(vk_ctx) => Ok((vk_ctx, d)),
        Matrix::Device(_) => Err(invalid!("mat was created on another device than ctx's")),
        Matrix::Cpu(_) => Err(invalid!("mat is a CPU context's matrix")),
    }
}

/// Stores in `*bytes` the size of `mat`'s blob (`q4vk_matrix_blob`).
///
/// Statuses: `NULL_POINTER`, `INVALID_ARGUMENT` (a matrix of another device or a CPU
/// context's), `UNSUPPORTED` (a CPU context). Thread-safe.
///
/// # Safety
/// Handles NULL or live; `bytes` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn q4vk_matrix_blob_size(
    ctx: *const q4vk_context,
    mat: *const q4vk_matrix,
    bytes: *mut usize,
) -> q4vk_status {
    guard("q4vk_matrix_blob_size", || {
        // SAFETY: the caller's contract.
        let (_, m) = unsafe { vulkan(ctx, mat, "q4vk_matrix_blob_size") }?;
        // SAFETY: NULL or writable (contract).
        unsafe { write_out(bytes, blob_bytes(m), "bytes") }
    })
}

/// Writes `mat`'s blob into `data` and its length into `*written`: the matrix's buffers
/// exactly as the device holds them (read back through q4vk's queue where q4vk does not map
/// them), after a header naming the format, q4vk version, shape, scheme, layout and parts,
/// and a checksum. Save it (an engine's cache file; it may be mmapped later) and create the
/// matrix from it with `q4vk_matrix_create_from_blob` on a context of the same device and
/// kind: no conversion or packing runs then. Size it with `q4vk_matrix_blob_size`.
///
/// Statuses: `NULL_POINTER`, `INVALID_ARGUMENT` (a matrix of another device or a CPU
/// context's), `BUFFER_TOO_SMALL` (`capacity`; nothing written), `UNSUPPORTED` (a CPU
/// context), `VULKAN`, `DEVICE_LOST`. Thread-safe.
///
/// # Safety
/// Handles NULL or live; `data` NULL or writable for `capacity` bytes; `written` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn q4vk_matrix_blob(
    ctx: *const q4vk_context,
    mat: *const q4vk_matrix,
    data: *mut c_void,
    capacity: usize,
    written: *mut usize,
) -> q4vk_status {
    guard("q4vk_matrix_blob", || {
        // SAFETY: the caller's contract.
        let (c, m) = unsafe { vulkan(ctx, mat, "q4vk_matrix_blob") }?;
        require(data, "data")?;
        require(written, "written")?;
        check_size("capacity", capacity, blob_bytes(m))?;
        let blob = blob_of(c, m)?;
        // SAFETY: writable for `capacity` ≥ the blob's length (contract).
        unsafe { out_bytes(data.cast(), blob.len(), "data") }?.copy_from_slice(&blob);
        // SAFETY: writable (contract; checked non-NULL).
        unsafe { write_out(written, blob.len(), "written") }
    })
}

/// Creates a matrix from a blob of `q4vk_matrix_blob` by copying its buffers to the device
/// as they are. The blob is read during the call only.
///
/// Statuses: `NULL_POINTER`; `INVALID_ARGUMENT` (not a whole blob of this q4vk version:
/// truncated, corrupted, another format or version; the message says which);
/// `UNSUPPORTED` (a blob of another device layout: the tensor-core layout on a context
/// that does not run it, or parts of another size; a CPU context); `OUT_OF_DEVICE_MEMORY`,
/// `VULKAN`. Nothing is written on failure. Thread-safe.
///
/// # Safety
/// `ctx` NULL or live; `blob` NULL or readable for `bytes` bytes; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn q4vk_matrix_create_from_blob(
    ctx: *mut q4vk_context,
    blob: *const c_void,
    bytes: usize,
    out: *mut *mut q4vk_matrix,
) -> q4vk_status {
    guard("q4vk_matrix_create_from_blob", || {
        // SAFETY: NULL or live (contract).
        let c = unsafe { handle(ctx.cast_const(), "ctx") }?;
        require(out, "out")?;
        // SAFETY: readable for `bytes` (contract).
        let blob = unsafe { in_bytes(blob.cast(), bytes, "blob") }?;
        let Backend::Vulkan(vk_ctx) = &c.backend else {
            return Err(Error::Unsupported(
                "matrix blobs hold device layouts; a CPU context's matrices come from q4vk_matrix_create".into(),
            ));
        };
        let matrix = matrix_from_blob(vk_ctx, blob)?;
        let handle = into_handle(q4vk_matrix(Matrix::Device(matrix)));
        // SAFETY: writable (contract; checked non-NULL).
        unsafe { write_out(out, handle, "out") }
    })
}
