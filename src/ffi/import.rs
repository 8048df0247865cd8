//! Checkpoints imported without requantizing (GGUF, GPTQ, AWQ sources of
//! `q4vk_matrix_desc`) and `q4vk_matrix_dequantize`, the f32 weights of any desc.

use super::matrix::{
    check_fields, q4_data, q4vk_matrix_desc, Q4VK_SOURCE_AWQ, Q4VK_SOURCE_GGUF_Q4_0,
    Q4VK_SOURCE_GGUF_Q4_1, Q4VK_SOURCE_GGUF_Q4_K, Q4VK_SOURCE_GPTQ,
};
use super::panic::guard;
use super::ptr::{check_disjoint, check_size, in_bytes, out_slice, read_struct, require};
use super::status::q4vk_status;
use crate::error::{invalid, Result};
use crate::import::canonical::ImportedMatrix;
use crate::import::gptq::{GptqFormat, GptqTensors, PackedShape};
use crate::import::{awq, dequant, gguf, gptq};
use std::ffi::c_void;

/// Borrows a required input buffer of at least `needed` bytes (its first `needed`).
///
/// # Safety
/// `ptr` is NULL or readable for `given` bytes.
unsafe fn input<'a>(
    ptr: *const c_void,
    given: usize,
    needed: usize,
    arg: &str,
) -> Result<&'a [u8]> {
    require(ptr, arg)?;
    check_size(&format!("{arg}_bytes"), given, needed)?;
    // SAFETY: non-NULL and readable for `given` ≥ `needed` bytes (caller's contract).
    unsafe { in_bytes(ptr.cast(), needed, arg) }
}

/// Refuses a buffer the source has no use for.
fn unused(ptr: *const c_void, bytes: usize, arg: &str, source: &str) -> Result<()> {
    if ptr.is_null() && bytes == 0 {
        Ok(())
    } else {
        Err(invalid!(
            "{arg} must be NULL (and {arg}_bytes 0): {source} has none"
        ))
    }
}

/// The matrix a desc describes, for every source: quantized (FLOAT), converted (Q4,
/// PADDLE) or imported as stored (GGUF, GPTQ, AWQ). Checks every field and buffer size.
///
/// # Safety
/// The desc's data pointers are NULL or readable for their `_bytes` (the desc's contract).
pub(crate) unsafe fn matrix_data<'a>(d: &q4vk_matrix_desc) -> Result<ImportedMatrix<'a>> {
    check_fields(d)?;
    match d.source {
        Q4VK_SOURCE_GGUF_Q4_0 | Q4VK_SOURCE_GGUF_Q4_1 | Q4VK_SOURCE_GGUF_Q4_K => {
            let ty = match d.source {
                Q4VK_SOURCE_GGUF_Q4_0 => gguf::GgufType::Q4_0,
                Q4VK_SOURCE_GGUF_Q4_1 => gguf::GgufType::Q4_1,
                _ => gguf::GgufType::Q4K,
            };
            let (_, bytes) = ty.shape(d.n, d.k)?;
            unused(d.scales, d.scales_bytes, "desc->scales", ty.name())?;
            unused(d.zeros, d.zeros_bytes, "desc->zeros", ty.name())?;
            // SAFETY: readable for its `_bytes` (the desc's contract).
            let tensor = unsafe { input(d.weight, d.weight_bytes, bytes, "desc->weight") }?;
            gguf::decode(ty, d.n, d.k, tensor)
        }
        Q4VK_SOURCE_GPTQ => {
            let shape = PackedShape::new(d.n, d.k, d.group_size, d.dtype, "GPTQ")?;
            let format = GptqFormat::from_c(d.gptq_format)?;
            let k4 = 4 * shape.q4.k;
            let qweight_bytes = gptq::qweight_bytes(&shape)?;
            let scales_bytes = shape.scales_bytes()?;
            let g_idx = if d.g_idx.is_null() && d.g_idx_bytes == 0 {
                None
            } else {
                // SAFETY: readable for its `_bytes` (the desc's contract).
                Some(unsafe { input(d.g_idx, d.g_idx_bytes, k4, "desc->g_idx") }?)
            };
            // SAFETY: the three inputs are readable for their `_bytes` (the desc's contract).
            let t = unsafe {
                GptqTensors {
                    qweight: input(d.weight, d.weight_bytes, qweight_bytes, "desc->weight")?,
                    scales: input(d.scales, d.scales_bytes, scales_bytes, "desc->scales")?,
                    qzeros: input(d.zeros, d.zeros_bytes, shape.qzeros_bytes(), "desc->zeros")?,
                    g_idx,
                }
            };
            gptq::decode(&shape, format, t)
        }
        Q4VK_SOURCE_AWQ => {
            let shape = PackedShape::new(d.n, d.k, d.group_size, d.dtype, "AWQ")?;
            let qweight_bytes = awq::qweight_bytes(&shape)?;
            let scales_bytes = shape.scales_bytes()?;
            // SAFETY: the three inputs are readable for their `_bytes` (the desc's contract).
            let t = unsafe {
                awq::AwqTensors {
                    qweight: input(d.weight, d.weight_bytes, qweight_bytes, "desc->weight")?,
                    scales: input(d.scales, d.scales_bytes, scales_bytes, "desc->scales")?,
                    qzeros: input(d.zeros, d.zeros_bytes, shape.qzeros_bytes(), "desc->zeros")?,
                }
            };
            awq::decode(&shape, t)
        }
        // SAFETY: the desc's pointers are readable for their sizes (contract).
        _ => Ok(ImportedMatrix::plain(unsafe { q4_data(d) }?)),
    }
}

/// Writes the f32 weights `[n][k]` (row-major, nn.Linear order, inputs in their original
/// order) that a matrix created from `desc` computes with: on the CPU, without a context,
/// for every source. FLOAT: the weights after q4vk's quantization (`q4vk_q4_quantize`);
/// Q4 and PADDLE: `scale·(u − zero)`; GGUF: bit for bit gguf-py's `dequantize` (Q4_0
/// `d·(q − 8)`, Q4_1 `d·q + m`, Q4_K `(d·sc)·q − dmin·m`); GPTQ and AWQ: bit for bit the
/// packages' `scale·(q − zero)` in f32 (v1 zeros decoded per word, `g_idx` honoured).
///
/// `out` holds `out_bytes` bytes, at least `n·k·4`, aligned for float. Statuses:
/// `NULL_POINTER`, `INVALID_ARGUMENT` (bad desc; k not a multiple of the GGUF block; n or k
/// not a multiple of 8 where GPTQ/AWQ pack 8 per word; `g_idx` out of range or with
/// unequal groups; `g_idx` or `zeros`/`scales` given to a source without them; `out`
/// overlapping an input or misaligned), `BUFFER_TOO_SMALL` (an input or `out`),
/// `NON_FINITE` (NaN/Inf weights, scales or minima), `OUT_OF_HOST_MEMORY`. Nothing is
/// written on error. Thread-safe.
///
/// # Safety
/// `desc` NULL or valid with its data pointers valid for their sizes; `out` NULL or
/// writable for `out_bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn q4vk_matrix_dequantize(
    desc: *const q4vk_matrix_desc,
    out: *mut f32,
    out_bytes: usize,
) -> q4vk_status {
    guard("q4vk_matrix_dequantize", || {
        // SAFETY: NULL or readable for its `struct_size` (contract).
        let d = unsafe { read_struct(desc, "desc") }?;
        require(out, "out")?;
        check_fields(&d)?;
        let (n, k) = crate::import::canonical::dims(d.n, d.k)?;
        let needed = n * k * 4;
        check_size("out_bytes", out_bytes, needed)?;
        if !(out as usize).is_multiple_of(std::mem::align_of::<f32>()) {
            return Err(invalid!("out is not aligned for float"));
        }
        check_disjoint(
            &[("out", out as usize, needed)],
            &[
                ("desc->weight", d.weight as usize, d.weight_bytes),
                ("desc->scales", d.scales as usize, d.scales_bytes),
                ("desc->zeros", d.zeros as usize, d.zeros_bytes),
                ("desc->g_idx", d.g_idx as usize, d.g_idx_bytes),
            ],
        )?;
        // SAFETY: the desc's data pointers are readable for their sizes (contract).
        let m = unsafe { matrix_data(&d) }?;
        // SAFETY: `out` is non-NULL, aligned (checked above) and writable for `out_bytes`
        // ≥ `n·k·4` bytes (contract), and overlaps no input (checked above).
        let floats = unsafe { out_slice(out, n * k, "out") }?;
        dequant::dequantize(&m, floats)
    })
}
