//! The streams of a GGUF block matrix for the exported kernels on blocks
//! (`Q4VK_KERNEL_EXPORT_BLOCKS`): `q4vk_matrix_pack_blocks_size` and
//! `q4vk_matrix_pack_blocks`, the file's bytes regrouped (`layout::blocks`) into caller
//! memory for a host that uploads them with its own allocator.

use super::import::{block_tensor, native_block_type};
use super::kernel::check_outputs;
use super::matrix::q4vk_matrix_desc;
use super::panic::guard;
use super::ptr::{out_bytes, read_struct, require, write_out};
use super::status::q4vk_status;
use crate::error::{Error, Result};
use crate::import::gguf_blocks::BlockType;
use crate::layout::blocks::{BlocksLayout, Stream};
use std::ffi::c_void;

/// The block type of `d`'s source and the bytes of its three streams (codes, scales, fifth
/// bits), each padded to a multiple of 4; `Unsupported` for a source that does not keep
/// its native blocks.
fn stream_sizes(d: &q4vk_matrix_desc) -> Result<(BlockType, [usize; 3])> {
    let ty = native_block_type(d)?.ok_or_else(|| {
        Error::Unsupported(
            "the matrix's source is not a GGUF block type kept in its native bytes (Q4_1, Q4_K, Q5_0 .. NVFP4): pack it for the Q4 layout's kernel with q4vk_matrix_pack(_extended)".into(),
        )
    })?;
    let layout = BlocksLayout::new(ty, d.k as usize);
    let n = d.n as usize;
    Ok((ty, Stream::ALL.map(|s| layout.stream_bytes(s, n))))
}

/// Sizes of the streams `q4vk_matrix_pack_blocks` writes for `desc`, a GGUF block source
/// (`Q4VK_SOURCE_GGUF_Q4_1`, `_Q4_K`, `_Q5_0` .. `_NVFP4`; data pointers not read):
/// `codes_bytes = n·(k/block)·c`, `scales_bytes = n·(k/block)·s` and `high_bits_bytes =
/// n·(k/block)·4` for Q5_0 and Q5_1 (else 0), each rounded up to a multiple of 4, with c and
/// s the code and scale bytes of one block (the block's size in all: the file's bytes).
/// Equal to the `bytes` of the bindings with roles `Q4VK_BINDING_WEIGHTS`,
/// `Q4VK_BINDING_SCALES` and `Q4VK_BINDING_HIGH_BITS` of `q4vk_kernel_export` with
/// `Q4VK_KERNEL_EXPORT_BLOCKS`. Pure; thread-safe. Statuses: `NULL_POINTER`,
/// `INVALID_ARGUMENT` (bad desc: k not a multiple of the block, …), `UNSUPPORTED` (another
/// source). Outputs written only on success.
///
/// # Safety
/// Pointers must be NULL or valid for their type.
#[no_mangle]
pub unsafe extern "C" fn q4vk_matrix_pack_blocks_size(
    desc: *const q4vk_matrix_desc,
    codes_bytes: *mut usize,
    scales_bytes: *mut usize,
    high_bits_bytes: *mut usize,
) -> q4vk_status {
    guard("q4vk_matrix_pack_blocks_size", || {
        // SAFETY: NULL or readable for its `struct_size` (contract).
        let d = unsafe { read_struct(desc, "desc") }?;
        let (_, sizes) = stream_sizes(&d)?;
        let outs = [
            (codes_bytes, "codes_bytes"),
            (scales_bytes, "scales_bytes"),
            (high_bits_bytes, "high_bits_bytes"),
        ];
        for &(ptr, arg) in &outs {
            require(ptr, arg)?;
        }
        for (&(ptr, arg), &value) in outs.iter().zip(&sizes) {
            // SAFETY: writable (contract; checked non-NULL).
            unsafe { write_out(ptr, value, arg) }?;
        }
        Ok(())
    })
}

/// Writes the streams of the GGUF block matrix `desc` describes — exactly the bytes
/// `q4vk_matrix_create` uploads for a matrix that fits one buffer per stream — into caller
/// memory, for the kernels of `q4vk_kernel_export` with `Q4VK_KERNEL_EXPORT_BLOCKS`:
/// `codes` → the binding of role `Q4VK_BINDING_WEIGHTS`, `scales` → `Q4VK_BINDING_SCALES`,
/// `high_bits` → `Q4VK_BINDING_HIGH_BITS` (Q5_0 and Q5_1 only). Each stream is
/// `[n][k/block]` of one field group of every block of `desc->weight` (the file's bytes,
/// regrouped; nothing converted), zero-padded to a multiple of 4:
///
/// * codes: the block's code bytes (Q5_K: `qh` then `qs`; Q6_K: `ql`, `qh` and its sixteen
///   8-bit scales), a multiple of 16 per block;
/// * scales: the block's scale fields as stored (f16 `d`, `m`, `dmin`, packed six-bit
///   scales, E8M0 or UE4M3 bytes);
/// * high bits: Q5_0's and Q5_1's 32-bit `qh`.
///
/// Sizes from `q4vk_matrix_pack_blocks_size`; an output whose size is 0 may be NULL with 0
/// bytes; larger buffers are accepted (only the prefix is written), smaller refused
/// (`BUFFER_TOO_SMALL`). Statuses: `NULL_POINTER`, `INVALID_ARGUMENT` (bad desc,
/// overlapping buffers), `BUFFER_TOO_SMALL` (the tensor or an output), `NON_FINITE` (an
/// infinite or NaN scale: f16 `d`, an E8M0 of 0xFF, a UE4M3 NaN; or an infinite weight:
/// an E8M0 of 253 or 254 times a large E2M1 value), `UNSUPPORTED` (another source).
/// Nothing is written on error. Thread-safe.
///
/// # Safety
/// `desc` NULL or valid with its data pointers valid for their sizes; each output NULL or
/// writable for its stated bytes.
#[no_mangle]
pub unsafe extern "C" fn q4vk_matrix_pack_blocks(
    desc: *const q4vk_matrix_desc,
    codes: *mut c_void,
    codes_bytes: usize,
    scales: *mut c_void,
    scales_bytes: usize,
    high_bits: *mut c_void,
    high_bits_bytes: usize,
) -> q4vk_status {
    guard("q4vk_matrix_pack_blocks", || {
        // SAFETY: NULL or readable for its `struct_size` (contract).
        let d = unsafe { read_struct(desc, "desc") }?;
        let (ty, sizes) = stream_sizes(&d)?;
        let outs = [
            (codes, codes_bytes, "codes"),
            (scales, scales_bytes, "scales"),
            (high_bits, high_bits_bytes, "high_bits"),
        ];
        check_outputs(
            &outs,
            &sizes,
            &[("desc->weight", d.weight as usize, d.weight_bytes)],
        )?;
        // SAFETY: the desc's data pointers are readable for their sizes (contract).
        let tensor = unsafe { block_tensor(&d) }?.expect("a native block source");
        let layout = BlocksLayout::new(ty, tensor.k);
        for (stream, (&(ptr, _, arg), &need)) in
            Stream::ALL.into_iter().zip(outs.iter().zip(&sizes))
        {
            if need == 0 {
                continue;
            }
            // SAFETY: writable for at least `need` bytes (checked; contract), disjoint from
            // the others and from the tensor (checked above).
            let dst = unsafe { out_bytes(ptr.cast(), need, arg) }?;
            layout.pack(tensor.bytes, stream, 0..tensor.n, dst);
        }
        Ok(())
    })
}
