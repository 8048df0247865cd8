//! q4vk's Q4 format on the CPU (`q4vk_q4_quantize`) and matrices on the device.

use super::backend::{Backend, Matrix};
use super::context::q4vk_context;
use super::import::{block_tensor, input_byte_counts, matrix_data};
use super::panic::{guard, guard_value};
use super::ptr::{
    check_disjoint, check_size, handle, in_bytes, into_handle, out_bytes, read_struct, release,
    require, write_out, VersionedStruct,
};
use super::status::q4vk_status;
use super::weight::{q4vk_dtype, Q4VK_DTYPE_F16, Q4VK_DTYPE_F32};
use crate::alloc;
use crate::cpu::matrix::CpuMatrix;
use crate::error::{invalid, Error, Result};
use crate::layout::convert::paddle_to_q4;
use crate::parallel::resolve_threads;
use crate::quant::dtype::Dtype;
use crate::quant::paddle::{PaddleParams, PaddleScheme};
use crate::quant::q4::{self, FloatWeights, Q4Data, Q4Out, Q4Shape, ScaleType};
use crate::vk::matrix::{DeviceMatrix, UploadRoute};
use std::borrow::Cow;
use std::ffi::c_void;

/// Where a matrix's data comes from (`Q4VK_SOURCE_*`).
pub type q4vk_matrix_source = u32;
/// Float weights; q4vk quantizes them exactly as `q4vk_q4_quantize` does.
pub const Q4VK_SOURCE_FLOAT: q4vk_matrix_source = 0;
/// q4vk Q4 layout: packed nibbles + scales (+ zero points).
pub const Q4VK_SOURCE_Q4: q4vk_matrix_source = 1;
/// int4 `qweight` + `scale` as produced by `q4vk_weight_quantize` / Paddle.
pub const Q4VK_SOURCE_PADDLE: q4vk_matrix_source = 2;
/// A GGUF `GGML_TYPE_Q4_0` tensor as stored in the file.
pub const Q4VK_SOURCE_GGUF_Q4_0: q4vk_matrix_source = 3;
/// A GGUF `GGML_TYPE_Q4_1` tensor as stored in the file.
pub const Q4VK_SOURCE_GGUF_Q4_1: q4vk_matrix_source = 4;
/// A GGUF `GGML_TYPE_Q4_K` tensor as stored in the file.
pub const Q4VK_SOURCE_GGUF_Q4_K: q4vk_matrix_source = 5;
/// A GPTQ checkpoint's `qweight`, `qzeros`, `scales` (and `g_idx`).
pub const Q4VK_SOURCE_GPTQ: q4vk_matrix_source = 6;
/// An AutoAWQ (GEMM version) checkpoint's `qweight`, `qzeros`, `scales`.
pub const Q4VK_SOURCE_AWQ: q4vk_matrix_source = 7;
/// A GGUF `GGML_TYPE_Q5_0` tensor as stored in the file (blocks of 32).
pub const Q4VK_SOURCE_GGUF_Q5_0: q4vk_matrix_source = 8;
/// A GGUF `GGML_TYPE_Q5_1` tensor as stored in the file (blocks of 32).
pub const Q4VK_SOURCE_GGUF_Q5_1: q4vk_matrix_source = 9;
/// A GGUF `GGML_TYPE_Q8_0` tensor as stored in the file (blocks of 32).
pub const Q4VK_SOURCE_GGUF_Q8_0: q4vk_matrix_source = 10;
/// A GGUF `GGML_TYPE_Q5_K` tensor as stored in the file (blocks of 256).
pub const Q4VK_SOURCE_GGUF_Q5_K: q4vk_matrix_source = 11;
/// A GGUF `GGML_TYPE_Q6_K` tensor as stored in the file (blocks of 256).
pub const Q4VK_SOURCE_GGUF_Q6_K: q4vk_matrix_source = 12;
/// A GGUF `GGML_TYPE_IQ4_NL` tensor as stored in the file (blocks of 32).
pub const Q4VK_SOURCE_GGUF_IQ4_NL: q4vk_matrix_source = 13;
/// A GGUF `GGML_TYPE_IQ4_XS` tensor as stored in the file (blocks of 256).
pub const Q4VK_SOURCE_GGUF_IQ4_XS: q4vk_matrix_source = 14;
/// A GGUF `GGML_TYPE_MXFP4` tensor as stored in the file (blocks of 32).
pub const Q4VK_SOURCE_GGUF_MXFP4: q4vk_matrix_source = 15;
/// A GGUF `GGML_TYPE_NVFP4` tensor as stored in the file (blocks of 64).
pub const Q4VK_SOURCE_GGUF_NVFP4: q4vk_matrix_source = 16;

/// A matrix (opaque): immutable after creation, usable from several threads. A GPU
/// matrix works with every context of the `VkDevice` it was created on (several contexts
/// may adopt one device); it must outlive every command buffer that uses it, and on an
/// adopted device be destroyed before the host destroys the `VkDevice`. A matrix of a CPU
/// context lives in host memory and works with every CPU context.
pub struct q4vk_matrix(pub(crate) Matrix);

/// Describes a weight matrix W (`n` output features × `k` input features) and its data.
/// Initialize with `q4vk_matrix_desc_default`.
///
/// Data by `source` (all sizes in bytes; larger buffers are accepted, only the prefix is
/// read):
/// * `Q4VK_SOURCE_FLOAT`: `weight` = `n·k` elements of `dtype` (F32, F16, BF16), `[n][k]`
///   row-major (`transposed` = 0, nn.Linear) or `[k][n]` (`transposed` = 1, Paddle);
///   `scales`, `zeros` unused. Quantized with f16 scales as `q4vk_q4_quantize` specifies.
/// * `Q4VK_SOURCE_Q4`: `weight` = `n·ceil(k/2)` bytes of packed nibbles (row n, k even in
///   the low nibble); `scales` = `n·groups` scales of `dtype` (F16 or F32), `[n][groups]`
///   with `groups = ceil(k/group_size)` (1 per channel); `zeros` = `n·groups` bytes 0..15
///   when `zero_points` = 1 (else unused). Symmetric: `w = (u - 8)·s`; else `(u - z)·s`.
/// * `Q4VK_SOURCE_PADDLE`: `weight` = Paddle's int4 `qweight` for `arch`, `[k][n]`
///   (`k·n/2` bytes); `scales` = Paddle's `scale` of `dtype`; `group_size` -1, 64 or 128;
///   `zero_points` must be 0. Converted losslessly (bf16 scales are widened to f32).
///
/// Imported without requantizing (appended sources; `zero_points`, `transposed` and `arch`
/// are ignored):
/// * `Q4VK_SOURCE_GGUF_Q4_0`, `_Q4_1`, `_Q4_K`: `weight` = the tensor's blocks as stored
///   in the `.gguf` file, `n` rows (ggml `ne1`) of `k/block` blocks (`ne0 = k`; block 32
///   for Q4_0/Q4_1, 256 for Q4_K, and k must be a multiple of it); `scales`, `zeros` and
///   `g_idx` NULL; `group_size` and `dtype` ignored (the format's own).
/// * `Q4VK_SOURCE_GGUF_Q5_0` … `_NVFP4`: likewise, k a multiple of the type's block (32 for
///   Q5_0, Q5_1, Q8_0, IQ4_NL and MXFP4; 64 for NVFP4; 256 for Q5_K, Q6_K and IQ4_XS).
/// * `Q4VK_SOURCE_GPTQ`: `weight` = `qweight` int32 `[k/8][n]` (k a multiple of 8);
///   `scales` = `[groups][n]` of `dtype` (F16 as checkpoints store them; BF16, F32);
///   `zeros` = `qzeros` int32 `[groups][n/8]` (n a multiple of 8); `groups =
///   ceil(k/group_size)`, `group_size` -1 (one group) or the checkpoint's; `g_idx`
///   optional (int32 `[k]`); `gptq_format` 1 or 2. Symmetric checkpoints too (their
///   stored zeros are imported as stored).
/// * `Q4VK_SOURCE_AWQ`: `weight` = `qweight` int32 `[k][n/8]`; `zeros` = `qzeros` int32
///   `[k/group_size][n/8]`; `scales` = `[k/group_size][n]` of `dtype`; the group size
///   divides k (-1: one group); `g_idx` NULL.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct q4vk_matrix_desc {
    /// `sizeof(q4vk_matrix_desc)`; smaller than v0 is refused, larger accepted.
    pub struct_size: u32,
    /// `Q4VK_SOURCE_*`; default FLOAT.
    pub source: q4vk_matrix_source,
    /// Output features (rows of W), ≥ 1.
    pub n: u64,
    /// Input features, ≥ 1 (any value: rows are padded on the device).
    pub k: u64,
    /// -1 per channel, or 32, 64, 128, 256 (PADDLE: -1, 64, 128); default 128.
    pub group_size: i32,
    /// 0: symmetric (default); 1: per-group zero point (FLOAT and Q4).
    pub zero_points: u32,
    /// FLOAT: weight dtype; Q4: scale dtype (F16 or F32); PADDLE: scale dtype. Default F16.
    pub dtype: q4vk_dtype,
    /// FLOAT only: 0 = weight is `[n][k]` (default), 1 = `[k][n]`.
    pub transposed: u32,
    /// PADDLE only: Paddle's `arch` (70, 75, 80, 86, 89, 90, 100); default 80.
    pub arch: i32,
    /// Must be 0.
    pub reserved0: u32,
    /// The weight data (see above); required.
    pub weight: *const c_void,
    /// Bytes at `weight`.
    pub weight_bytes: usize,
    /// Scales (Q4, PADDLE); NULL for FLOAT.
    pub scales: *const c_void,
    /// Bytes at `scales`.
    pub scales_bytes: usize,
    /// Zero points (Q4 with `zero_points` = 1); otherwise NULL.
    pub zeros: *const c_void,
    /// Bytes at `zeros`.
    pub zeros_bytes: usize,
    /// Appended after v0 (callers with the v0 `struct_size` read NULL/0). GPTQ only: the
    /// checkpoint's `g_idx`, int32 `[k]`, input `i` in group `g_idx[i]`; NULL when absent
    /// (then `i / group_size`). Act-order `g_idx` (groups not consecutive) must give each
    /// group as many inputs as consecutive groups would; K is reordered by group. Other
    /// sources: NULL.
    pub g_idx: *const c_void,
    /// Bytes at `g_idx` (`4·k` needed).
    pub g_idx_bytes: usize,
    /// GPTQ only: how `qzeros` stores zero points. 1 (default): zero − 1, as AutoGPTQ,
    /// Transformers and GPTQModel's default format write them (decoded by adding
    /// `0x11111111` to each 32-bit word, which also recovers zero point 0); 2: as is
    /// (GPTQModel's `gptq_v2`). Ignored by other sources.
    pub gptq_format: u32,
}

// SAFETY: repr(C), starts with u32 struct_size; integers and raw pointers only.
unsafe impl VersionedStruct for q4vk_matrix_desc {
    // The v0 desc ended at `zeros_bytes`; `g_idx` and the fields after it were appended.
    const V0_SIZE: usize = std::mem::offset_of!(q4vk_matrix_desc, g_idx);
    const NAME: &'static str = "q4vk_matrix_desc";
}

/// Fills `desc` with the defaults: FLOAT source, group size 128, symmetric, F16, not
/// transposed, arch 80, n = k = 0, no data, no `g_idx`, `gptq_format` 1. NULL is ignored.
///
/// # Safety
/// `desc` must be NULL or point to a writable `q4vk_matrix_desc`.
#[no_mangle]
pub unsafe extern "C" fn q4vk_matrix_desc_default(desc: *mut q4vk_matrix_desc) {
    let value = q4vk_matrix_desc {
        struct_size: std::mem::size_of::<q4vk_matrix_desc>() as u32,
        source: Q4VK_SOURCE_FLOAT,
        n: 0,
        k: 0,
        group_size: 128,
        zero_points: 0,
        dtype: Q4VK_DTYPE_F16,
        transposed: 0,
        arch: 80,
        reserved0: 0,
        weight: std::ptr::null(),
        weight_bytes: 0,
        scales: std::ptr::null(),
        scales_bytes: 0,
        zeros: std::ptr::null(),
        zeros_bytes: 0,
        g_idx: std::ptr::null(),
        g_idx_bytes: 0,
        gptq_format: 1,
    };
    let _ = guard("q4vk_matrix_desc_default", || {
        // SAFETY: `desc` is NULL (skipped) or writable (caller's contract).
        unsafe { write_out(desc, value, "desc") }.or(Ok(()))
    });
}

/// Checks of a desc that hold for every source: reserved fields, a known source,
/// `transposed`, and `g_idx` only with GPTQ.
pub(crate) fn check_fields(d: &q4vk_matrix_desc) -> Result<()> {
    if d.reserved0 != 0 {
        return Err(invalid!("desc->reserved0 is {}; it must be 0", d.reserved0));
    }
    if d.source > Q4VK_SOURCE_GGUF_NVFP4 {
        return Err(invalid!(
            "desc->source is {}; expected Q4VK_SOURCE_FLOAT (0), Q4VK_SOURCE_Q4 (1), Q4VK_SOURCE_PADDLE (2), \
             Q4VK_SOURCE_GGUF_Q4_0 (3), Q4VK_SOURCE_GGUF_Q4_1 (4), Q4VK_SOURCE_GGUF_Q4_K (5), \
             Q4VK_SOURCE_GPTQ (6), Q4VK_SOURCE_AWQ (7) or a GGUF block type (8..16, \
             q4vk_source_from_ggml_type)",
            d.source
        ));
    }
    if d.source != Q4VK_SOURCE_GPTQ && (!d.g_idx.is_null() || d.g_idx_bytes != 0) {
        return Err(invalid!(
            "desc->g_idx must be NULL (and g_idx_bytes 0) unless the source is Q4VK_SOURCE_GPTQ"
        ));
    }
    if d.source == Q4VK_SOURCE_FLOAT && d.transposed > 1 {
        return Err(invalid!(
            "desc->transposed is {}; expected 0 or 1",
            d.transposed
        ));
    }
    Ok(())
}

/// [`check_fields`], and a source of contract v0 (FLOAT, Q4, PADDLE): what the functions
/// that do not take imported checkpoints yet accept.
pub(crate) fn check_common(d: &q4vk_matrix_desc) -> Result<()> {
    check_fields(d)?;
    if d.source > Q4VK_SOURCE_PADDLE {
        return Err(Error::Unsupported(format!(
            "desc->source is {}, an imported checkpoint; this function takes Q4VK_SOURCE_FLOAT, \
             Q4VK_SOURCE_Q4 or Q4VK_SOURCE_PADDLE (imported sources work with q4vk_matrix_create \
             and q4vk_matrix_dequantize)",
            d.source
        )));
    }
    Ok(())
}

fn q4_scale_type(dtype: q4vk_dtype) -> Result<ScaleType> {
    match dtype {
        Q4VK_DTYPE_F16 => Ok(ScaleType::F16),
        Q4VK_DTYPE_F32 => Ok(ScaleType::F32),
        other => Err(invalid!(
            "desc->dtype is {other}; Q4 scales are Q4VK_DTYPE_F16 (1) or Q4VK_DTYPE_F32 (0)"
        )),
    }
}

/// Sizes of the outputs of `q4vk_q4_quantize` for a FLOAT desc (f16 scales), or of the
/// buffers a Q4 desc needs (scales of `desc->dtype`): `weight_bytes = n·ceil(k/2)`,
/// `scales_bytes = n·groups·(2 or 4)`, `zeros_bytes = n·groups` (0 when symmetric). Pure.
/// Statuses: `Q4VK_ERROR_NULL_POINTER`, `Q4VK_ERROR_INVALID_ARGUMENT` (bad desc, or a
/// PADDLE source). Outputs written only on success.
///
/// # Safety
/// Pointers must be NULL or valid for their type.
#[no_mangle]
pub unsafe extern "C" fn q4vk_q4_quantize_size(
    desc: *const q4vk_matrix_desc,
    weight_bytes: *mut usize,
    scales_bytes: *mut usize,
    zeros_bytes: *mut usize,
) -> q4vk_status {
    guard("q4vk_q4_quantize_size", || {
        // SAFETY: NULL or readable for its `struct_size` (contract).
        let d = unsafe { read_struct(desc, "desc") }?;
        let (shape, scale) = match SourceShape::of(&d)? {
            SourceShape::Paddle { .. } => {
                return Err(invalid!(
                "desc->source is Q4VK_SOURCE_PADDLE; sizes are those of q4vk_weight_quantize_size"
            ))
            }
            parsed => parsed.shape_and_scale(),
        };
        let scale_size = scale.size();
        require(weight_bytes, "weight_bytes")?;
        require(scales_bytes, "scales_bytes")?;
        require(zeros_bytes, "zeros_bytes")?;
        // SAFETY: each writable (contract; checked non-NULL).
        unsafe {
            write_out(weight_bytes, shape.weight_bytes(), "weight_bytes")?;
            write_out(
                scales_bytes,
                shape.scale_count() * scale_size,
                "scales_bytes",
            )?;
            write_out(zeros_bytes, shape.zeros_bytes(), "zeros_bytes")
        }
    })
}

/// What the fields of a desc of contract v0 (FLOAT, Q4, PADDLE) say before any of its data
/// is read: the shape and stored scale type of the Q4 matrix it becomes, and how to get
/// there. The one parser of those fields, for every function that takes such a desc.
pub(crate) enum SourceShape {
    /// FLOAT: weights of `dtype`, quantized by q4vk (f16 scales).
    Float {
        /// The Q4 matrix.
        shape: Q4Shape,
        /// Element type of the weights.
        dtype: Dtype,
    },
    /// Q4: the caller's codes, scales of `scale` type and zero points.
    Q4 {
        /// The Q4 matrix.
        shape: Q4Shape,
        /// Stored scale type.
        scale: ScaleType,
    },
    /// PADDLE: Paddle int4 bytes and scales, converted without requantizing.
    Paddle {
        /// Paddle's parameters (its layout, scale type and sizes).
        scheme: PaddleScheme,
    },
}

impl SourceShape {
    /// Parses `d` ([`check_common`] first).
    pub(crate) fn of(d: &q4vk_matrix_desc) -> Result<SourceShape> {
        check_common(d)?;
        match d.source {
            Q4VK_SOURCE_FLOAT => Ok(SourceShape::Float {
                shape: Q4Shape::new(d.n, d.k, d.group_size, d.zero_points)?,
                dtype: Dtype::from_c(d.dtype, "desc->dtype")?,
            }),
            Q4VK_SOURCE_Q4 => Ok(SourceShape::Q4 {
                shape: Q4Shape::new(d.n, d.k, d.group_size, d.zero_points)?,
                scale: q4_scale_type(d.dtype)?,
            }),
            _ => {
                if d.zero_points != 0 {
                    return Err(invalid!(
                        "desc->zero_points must be 0 for Q4VK_SOURCE_PADDLE (Paddle int4 is symmetric)"
                    ));
                }
                Ok(SourceShape::Paddle {
                    scheme: PaddleScheme::new(PaddleParams {
                        algo: 1,
                        dtype: d.dtype,
                        arch: d.arch,
                        group_size: d.group_size,
                        k: d.k,
                        n: d.n,
                    })?,
                })
            }
        }
    }

    /// The Q4 matrix's shape and stored scale type.
    pub(crate) fn shape_and_scale(&self) -> (Q4Shape, ScaleType) {
        match self {
            SourceShape::Float { shape, .. } => (*shape, ScaleType::F16),
            SourceShape::Q4 { shape, scale } => (*shape, *scale),
            SourceShape::Paddle { scheme } => (
                Q4Shape {
                    n: scheme.geometry.n,
                    k: scheme.geometry.k,
                    group_size: scheme.group_rows,
                    per_channel: scheme.per_channel,
                    zero_points: false,
                },
                if scheme.dtype == Dtype::F16 {
                    ScaleType::F16
                } else {
                    ScaleType::F32
                },
            ),
        }
    }
}

/// Validated float weights of a FLOAT desc.
///
/// # Safety
/// `d.weight` must be NULL or readable for `d.weight_bytes` bytes for `'a`.
unsafe fn float_source<'a>(d: &q4vk_matrix_desc) -> Result<(Q4Shape, FloatWeights<'a>)> {
    let SourceShape::Float { shape, dtype } = SourceShape::of(d)? else {
        return Err(invalid!(
            "desc->source must be Q4VK_SOURCE_FLOAT for q4vk_q4_quantize"
        ));
    };
    let needed = shape.n * shape.k * dtype.size();
    require(d.weight, "desc->weight")?;
    check_size("desc->weight_bytes", d.weight_bytes, needed)?;
    // SAFETY: readable for weight_bytes ≥ needed bytes (caller's contract; checked).
    let bytes = unsafe { in_bytes(d.weight.cast(), needed, "desc->weight") }?;
    Ok((
        shape,
        FloatWeights {
            dtype,
            transposed: d.transposed == 1,
            bytes,
        },
    ))
}

/// Quantizes `desc->weight` (source FLOAT) to the Q4 format, exactly what a FLOAT matrix
/// uploads: f16 scales; symmetric `s = f16(absmax/7)`, `u = clamp(round(x/s), -8, 7) + 8`;
/// with zero points `s = f16((max - min)/15)`, `z = clamp(round(-min/s), 0, 15)`,
/// `u = clamp(round(x/s) + z, 0, 15)`, where `max`/`min` of a group include 0; round half
/// away from zero, in f32 with the f16-rounded scale; a scale that is 0 in f16 (an all-zero
/// group) decodes the whole group to 0 (`u = 8`, or `u = z = 0`). K not a multiple of the
/// group: the last group is shorter. Odd K: the high nibble of a row's last byte is 0.
///
/// Outputs: `weight` (`n·ceil(k/2)` bytes), `scales` (`n·groups` f16), `zeros` (`n·groups`
/// bytes; may be NULL with `zeros_bytes` 0 when symmetric). Statuses: `NULL_POINTER`,
/// `INVALID_ARGUMENT` (bad desc, overlapping buffers, a group beyond f16's scale range),
/// `BUFFER_TOO_SMALL`, `NON_FINITE` (NaN/Inf in the weight). Nothing is written on error.
/// Uses all cores; thread-safe.
///
/// # Safety
/// Each pointer must be NULL or valid for its stated number of bytes.
#[no_mangle]
pub unsafe extern "C" fn q4vk_q4_quantize(
    desc: *const q4vk_matrix_desc,
    weight: *mut u8,
    weight_bytes: usize,
    scales: *mut c_void,
    scales_bytes: usize,
    zeros: *mut u8,
    zeros_bytes: usize,
) -> q4vk_status {
    guard("q4vk_q4_quantize", || {
        // SAFETY: NULL or readable for its `struct_size` (contract).
        let d = unsafe { read_struct(desc, "desc") }?;
        check_common(&d)?;
        if d.source != Q4VK_SOURCE_FLOAT {
            return Err(invalid!(
                "desc->source must be Q4VK_SOURCE_FLOAT for q4vk_q4_quantize"
            ));
        }
        // SAFETY: the weight is readable for its stated bytes (contract).
        let (shape, w) = unsafe { float_source(&d) }?;
        let (wb, sb, zb) = (
            shape.weight_bytes(),
            2 * shape.scale_count(),
            shape.zeros_bytes(),
        );
        require(weight, "weight")?;
        require(scales, "scales")?;
        if zb > 0 {
            require(zeros, "zeros")?;
        }
        check_size("weight_bytes", weight_bytes, wb)?;
        check_size("scales_bytes", scales_bytes, sb)?;
        check_size("zeros_bytes", zeros_bytes, zb)?;
        check_disjoint(
            &[
                ("weight", weight as usize, wb),
                ("scales", scales as usize, sb),
                ("zeros", zeros as usize, zb),
            ],
            &[("desc->weight", d.weight as usize, w.bytes.len())],
        )?;
        // SAFETY: each writable for its checked size (contract), disjoint (checked above).
        let out = unsafe {
            Q4Out {
                weight: out_bytes(weight, wb, "weight")?,
                scales: out_bytes(scales.cast(), sb, "scales")?,
                zeros: if zb > 0 {
                    out_bytes(zeros, zb, "zeros")?
                } else {
                    &mut []
                },
            }
        };
        q4::quantize(&shape, &w, out, resolve_threads(0))
    })
}

/// The Q4 data of a desc, converted or quantized as its source says.
///
/// # Safety
/// The desc's data pointers must be NULL or readable for their stated bytes for `'a`.
pub(crate) unsafe fn q4_data<'a>(d: &q4vk_matrix_desc) -> Result<Q4Data<'a>> {
    match d.source {
        Q4VK_SOURCE_FLOAT => {
            // SAFETY: forwarded from the caller's contract.
            let (shape, w) = unsafe { float_source(d) }?;
            let mut weight = alloc::filled::<u8>(shape.weight_bytes(), "quantized weights")?;
            let mut scales = alloc::filled::<u8>(2 * shape.scale_count(), "scales")?;
            let mut zeros = alloc::filled::<u8>(shape.zeros_bytes(), "zero points")?;
            let out = Q4Out {
                weight: &mut weight,
                scales: &mut scales,
                zeros: &mut zeros,
            };
            q4::quantize(&shape, &w, out, resolve_threads(0))?;
            Ok(Q4Data {
                shape,
                weight: Cow::Owned(weight),
                scale_type: ScaleType::F16,
                scales: Cow::Owned(scales),
                zeros: Cow::Owned(zeros),
            })
        }
        Q4VK_SOURCE_Q4 => {
            let (shape, scale_type) = SourceShape::of(d)?.shape_and_scale();
            let (wb, sb, zb) = (
                shape.weight_bytes(),
                shape.scale_count() * scale_type.size(),
                shape.zeros_bytes(),
            );
            require(d.weight, "desc->weight")?;
            require(d.scales, "desc->scales")?;
            if zb > 0 {
                require(d.zeros, "desc->zeros")?;
            }
            check_size("desc->weight_bytes", d.weight_bytes, wb)?;
            check_size("desc->scales_bytes", d.scales_bytes, sb)?;
            check_size("desc->zeros_bytes", d.zeros_bytes, zb)?;
            // SAFETY: each readable for its stated bytes ≥ the checked size (contract).
            let (weight, scales) = unsafe {
                (
                    in_bytes(d.weight.cast(), wb, "desc->weight")?,
                    in_bytes(d.scales.cast(), sb, "desc->scales")?,
                )
            };
            let zeros = if zb > 0 {
                // SAFETY: as above.
                Cow::Borrowed(unsafe { in_bytes(d.zeros.cast(), zb, "desc->zeros") }?)
            } else {
                Cow::Owned(Vec::new())
            };
            let data = Q4Data {
                shape,
                weight: Cow::Borrowed(weight),
                scale_type,
                scales: Cow::Borrowed(scales),
                zeros,
            };
            data.validate()?;
            Ok(data)
        }
        Q4VK_SOURCE_PADDLE => {
            let SourceShape::Paddle { scheme } = SourceShape::of(d)? else {
                return Err(Error::Internal(
                    "a PADDLE desc parsed as another source".into(),
                ));
            };
            require(d.weight, "desc->weight")?;
            require(d.scales, "desc->scales")?;
            check_size("desc->weight_bytes", d.weight_bytes, scheme.qweight_bytes())?;
            check_size("desc->scales_bytes", d.scales_bytes, scheme.scale_bytes())?;
            // SAFETY: each readable for its stated bytes ≥ the checked size (contract).
            let (qweight, scale) = unsafe {
                (
                    in_bytes(d.weight.cast(), scheme.qweight_bytes(), "desc->weight")?,
                    in_bytes(d.scales.cast(), scheme.scale_bytes(), "desc->scales")?,
                )
            };
            let data = paddle_to_q4(&scheme, qweight, scale, resolve_threads(0))?;
            data.validate()?;
            Ok(data)
        }
        other => Err(Error::Internal(format!(
            "q4_data called for the imported source {other}"
        ))),
    }
}

/// Creates a matrix from `desc` (see `q4vk_matrix_desc`) on `ctx`'s device and stores
/// it in `*out`. Device memory holds only the packed weights, scales and zero points in
/// q4vk's GPU layout, split into several buffers when larger than the device's
/// `maxStorageBufferRange`. On a CPU context, host memory holds the packed codes (rows
/// padded to 32 elements), f32 scales and zero points; allocation failure is
/// `OUT_OF_HOST_MEMORY`. The caller's buffers are not referenced after the call.
///
/// Imported sources keep the checkpoint's codes, scales and zero points: GGUF Q4_0 (f16 `d`,
/// zero point 8), GPTQ and AWQ with groups
/// of 32, 64, 128 or 256 inputs or one per row. Act-order GPTQ (`g_idx` putting a group's
/// inputs apart) is stored with its groups made contiguous and the input of each column
/// (4·k more bytes), in the SIMT layout also on tensor-core contexts: `q4vk_gemv` gathers x
/// through that order once per call on the host and runs the plain SIMT kernels,
/// `q4vk_cmd_gemv`'s kernels gather x from the host's buffer; CPU contexts gather x once
/// per call. `UNSUPPORTED` for other group sizes; `q4vk_matrix_dequantize` takes all of
/// them. Every GGUF type but Q4_0 (`Q4VK_SOURCE_GGUF_Q4_1`, `_Q4_K` and `_Q5_0` …
/// `_NVFP4`) keeps the file's bytes as they are (regrouped into codes and scales, device
/// bytes within a few bytes of the file's; on a CPU context the blocks themselves) and runs
/// kernels that decode them (`Q4VK_GEMV_KERNEL_BLOCKS_GEMV`, and
/// `Q4VK_GEMV_KERNEL_BLOCKS_GEMM` for prefill); the exported kernels do not read them (Q4_1
/// and Q4_K export through `q4vk_matrix_pack_extended`'s Q4 layout instead). Q4_0's blocks
/// are the Q4 layout's codes and f16 scales, the same bytes.
///
/// Statuses: `NULL_POINTER`, `INVALID_ARGUMENT` (bad desc; zero point > 15; bad `g_idx`;
/// on a `Q4VK_CONTEXT_STRICT_SIZES` context, a `*_bytes` larger than the source reads),
/// `BUFFER_TOO_SMALL`, `NON_FINITE` (NaN/Inf weights or scales), `UNSUPPORTED` (see above;
/// a single row larger than a storage buffer; no queue to upload through),
/// `OUT_OF_DEVICE_MEMORY`, `VULKAN`. `*out` is written only on success; release with `q4vk_matrix_destroy`.
/// Thread-safe (uploads through non-host-visible memory are serialized on the context).
///
/// # Safety
/// `ctx` NULL or live; `desc` NULL or valid with its data pointers valid for their sizes;
/// `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn q4vk_matrix_create(
    ctx: *mut q4vk_context,
    desc: *const q4vk_matrix_desc,
    out: *mut *mut q4vk_matrix,
) -> q4vk_status {
    guard("q4vk_matrix_create", || {
        // SAFETY: NULL or a live context (contract).
        let context = unsafe { handle(ctx, "ctx") }?;
        // SAFETY: NULL or readable for its `struct_size` (contract).
        let d = unsafe { read_struct(desc, "desc") }?;
        require(out, "out")?;
        let counts = input_byte_counts(&d)?;
        context.byte_counts.refuse_inexact(&counts)?;
        // SAFETY: the desc's data pointers are readable for their sizes (contract).
        let matrix = match unsafe { block_tensor(&d) }? {
            Some(t) => match &context.backend {
                Backend::Vulkan(ctx) => Matrix::Device(DeviceMatrix::from_blocks(
                    ctx,
                    t.ty,
                    t.n,
                    t.k,
                    t.bytes,
                    &mut UploadRoute::Queue,
                )?),
                Backend::Cpu(_) => Matrix::Cpu(CpuMatrix::of_blocks(t.ty, t.n, t.k, t.bytes)?),
            },
            None => {
                // SAFETY: as above.
                let imported = unsafe { matrix_data(&d) }?;
                let parts = imported.device_parts()?;
                match &context.backend {
                    Backend::Vulkan(ctx) => {
                        let (q4, offsets, k_order) = parts;
                        Matrix::Device(DeviceMatrix::new(ctx, q4, offsets, k_order)?)
                    }
                    Backend::Cpu(_) => Matrix::Cpu(CpuMatrix::imported(parts)?),
                }
            }
        };
        context.byte_counts.warn_other_readings(&counts);
        let matrix = into_handle(q4vk_matrix(matrix));
        // SAFETY: `out` is writable (contract; checked non-NULL).
        unsafe { write_out(out, matrix, "out") }
    })
}

/// Releases a matrix's device memory. NULL is ignored. No GEMV using it may be running or
/// pending (also in host command buffers). May be called before or after
/// `q4vk_context_destroy`; on an adopted device, before the host's `vkDestroyDevice`.
///
/// # Safety
/// `mat` must be NULL or a live matrix, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn q4vk_matrix_destroy(mat: *mut q4vk_matrix) {
    // SAFETY: NULL or a live matrix from q4vk_matrix_create, given up (contract).
    guard_value("q4vk_matrix_destroy", (), || unsafe { release(mat) })
}
