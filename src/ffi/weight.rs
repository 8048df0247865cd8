//! Paddle-compatible weight-only quantization on the CPU: quantize, dequantize, permute,
//! unpermute and their size queries.

use super::panic::guard;
use super::ptr::{
    check_disjoint, check_size, in_bytes, out_bytes, read_struct, require, write_out,
    VersionedStruct,
};
use super::status::q4vk_status;
use crate::error::Result;
use crate::parallel::resolve_threads;
use crate::quant::paddle::{self, PaddleParams, PaddleScheme};
use std::ffi::c_void;

/// Element type of float weights and scales (`Q4VK_DTYPE_*`).
pub type q4vk_dtype = u32;
/// IEEE binary32 (a q4vk extension for the Paddle functions: f32 scale, same math).
pub const Q4VK_DTYPE_F32: q4vk_dtype = 0;
/// IEEE binary16.
pub const Q4VK_DTYPE_F16: q4vk_dtype = 1;
/// bfloat16.
pub const Q4VK_DTYPE_BF16: q4vk_dtype = 2;

/// Paddle's quantization algorithm (`Q4VK_ALGO_*`).
pub type q4vk_algo = u32;
/// `weight_only_int8`: codes -127..127, stored +128.
pub const Q4VK_ALGO_WEIGHT_ONLY_INT8: q4vk_algo = 0;
/// `weight_only_int4`: codes -7..7, stored +8, two per byte.
pub const Q4VK_ALGO_WEIGHT_ONLY_INT4: q4vk_algo = 1;

/// Describes a Paddle `weight_quantize` problem: a `[k, n]` row-major weight (k input
/// features, n output features). Initialize with `q4vk_weight_quantize_desc_default`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct q4vk_weight_quantize_desc {
    /// `sizeof(q4vk_weight_quantize_desc)`; smaller than v0 is refused, larger accepted.
    pub struct_size: u32,
    /// `Q4VK_ALGO_WEIGHT_ONLY_INT4` (default) or `Q4VK_ALGO_WEIGHT_ONLY_INT8`.
    pub algo: q4vk_algo,
    /// Type of the weight; the scale and dequantized output use the same type. Default F16.
    pub dtype: q4vk_dtype,
    /// Paddle's `arch`: 70, 75, 80, 86, 89, 90 or 100 (75..100 share one layout). Default 80.
    pub arch: i32,
    /// -1 (per output channel, default), 64 or 128.
    pub group_size: i32,
    /// Worker threads: 0 = one per available core (default); more than the cores is clamped.
    pub threads: u32,
    /// Rows of the `[k, n]` row-major weight = input features. ≥ 1; a multiple of 64 for arch ≥ 75.
    pub k: u64,
    /// Columns = output features. A multiple of 16.
    pub n: u64,
}

// SAFETY: repr(C), starts with u32 struct_size, plain integers only.
unsafe impl VersionedStruct for q4vk_weight_quantize_desc {
    const V0_SIZE: usize = std::mem::size_of::<q4vk_weight_quantize_desc>();
    const NAME: &'static str = "q4vk_weight_quantize_desc";
}

/// Fills `desc` with the defaults: int4, f16, arch 80, per channel, all cores, k = n = 0.
/// NULL is ignored.
///
/// # Safety
/// `desc` must be NULL or point to a writable `q4vk_weight_quantize_desc`.
#[no_mangle]
pub unsafe extern "C" fn q4vk_weight_quantize_desc_default(desc: *mut q4vk_weight_quantize_desc) {
    let value = q4vk_weight_quantize_desc {
        struct_size: std::mem::size_of::<q4vk_weight_quantize_desc>() as u32,
        algo: Q4VK_ALGO_WEIGHT_ONLY_INT4,
        dtype: Q4VK_DTYPE_F16,
        arch: 80,
        group_size: -1,
        threads: 0,
        k: 0,
        n: 0,
    };
    let _ = guard("q4vk_weight_quantize_desc_default", || {
        // SAFETY: `desc` is NULL (skipped) or writable (caller's contract).
        unsafe { write_out(desc, value, "desc") }.or(Ok(()))
    });
}

/// Reads and validates a desc into the core scheme and the thread count.
///
/// # Safety
/// `desc` must be NULL or readable for its `struct_size` bytes.
unsafe fn scheme_of(desc: *const q4vk_weight_quantize_desc) -> Result<(PaddleScheme, usize)> {
    // SAFETY: forwarded from the caller's contract.
    let d = unsafe { read_struct(desc, "desc") }?;
    let scheme = PaddleScheme::new(PaddleParams {
        algo: d.algo,
        dtype: d.dtype,
        arch: d.arch,
        group_size: d.group_size,
        k: d.k,
        n: d.n,
    })?;
    Ok((scheme, resolve_threads(d.threads)))
}

fn region<T>(name: &'static str, ptr: *const T, len: usize) -> (&'static str, usize, usize) {
    (name, ptr as usize, len)
}

/// Sizes of the outputs of `q4vk_weight_quantize` for `desc`: `qweight_bytes` (int4:
/// k·n/2, int8: k·n) and `scale_bytes` (n or ceil(k/group_size)·n elements of the weight
/// type). Pure. Returns `Q4VK_ERROR_NULL_POINTER` for a NULL argument and
/// `Q4VK_ERROR_INVALID_ARGUMENT` for a desc Paddle does not accept (the message names the
/// field and the constraint). Outputs are written only on success.
///
/// # Safety
/// Pointers must be NULL or valid for their type.
#[no_mangle]
pub unsafe extern "C" fn q4vk_weight_quantize_size(
    desc: *const q4vk_weight_quantize_desc,
    qweight_bytes: *mut usize,
    scale_bytes: *mut usize,
) -> q4vk_status {
    guard("q4vk_weight_quantize_size", || {
        // SAFETY: NULL or a readable desc (contract).
        let (scheme, _) = unsafe { scheme_of(desc) }?;
        require(qweight_bytes, "qweight_bytes")?;
        require(scale_bytes, "scale_bytes")?;
        // SAFETY: each writable (contract; checked non-NULL).
        unsafe {
            write_out(qweight_bytes, scheme.qweight_bytes(), "qweight_bytes")?;
            write_out(scale_bytes, scheme.scale_bytes(), "scale_bytes")
        }
    })
}

/// Size of the plain code buffer of `q4vk_weight_permute` / `q4vk_weight_unpermute`:
/// int4 k·n/2 bytes (two signed codes per byte along n, even n in the low nibble), int8
/// k·n. Pure; statuses as `q4vk_weight_quantize_size`.
///
/// # Safety
/// Pointers must be NULL or valid for their type.
#[no_mangle]
pub unsafe extern "C" fn q4vk_weight_plain_size(
    desc: *const q4vk_weight_quantize_desc,
    plain_bytes: *mut usize,
) -> q4vk_status {
    guard("q4vk_weight_plain_size", || {
        // SAFETY: NULL or a readable desc (contract).
        let (scheme, _) = unsafe { scheme_of(desc) }?;
        // SAFETY: NULL or writable (contract).
        unsafe { write_out(plain_bytes, scheme.qweight_bytes(), "plain_bytes") }
    })
}

/// Quantizes a `[k, n]` row-major weight of `desc->dtype` exactly as Paddle 3.3.1's CPU
/// `weight_quantize(x, algo, arch, group_size)` does: `qweight` receives Paddle's permuted
/// bytes, `scale` the scales in the weight type (`[n]`, or `[groups][n]`).
///
/// Buffers may be larger than needed (only the needed prefix is used) but not smaller
/// (`Q4VK_ERROR_BUFFER_TOO_SMALL`), and outputs must not overlap any other buffer
/// (`Q4VK_ERROR_INVALID_ARGUMENT`). NaN or Inf in the weight: `Q4VK_ERROR_NON_FINITE`,
/// naming the first such element. Nothing is written unless the result is `Q4VK_OK`.
///
/// # Safety
/// Each pointer must be NULL or valid for its stated number of bytes.
#[no_mangle]
pub unsafe extern "C" fn q4vk_weight_quantize(
    desc: *const q4vk_weight_quantize_desc,
    weight: *const c_void,
    weight_bytes: usize,
    qweight: *mut i8,
    qweight_bytes: usize,
    scale: *mut c_void,
    scale_bytes: usize,
) -> q4vk_status {
    guard("q4vk_weight_quantize", || {
        // SAFETY: NULL or a readable desc (contract).
        let (scheme, threads) = unsafe { scheme_of(desc) }?;
        require(weight, "weight")?;
        require(qweight, "qweight")?;
        require(scale, "scale")?;
        check_size("weight_bytes", weight_bytes, scheme.weight_bytes())?;
        check_size("qweight_bytes", qweight_bytes, scheme.qweight_bytes())?;
        check_size("scale_bytes", scale_bytes, scheme.scale_bytes())?;
        let (w, q, s) = (
            scheme.weight_bytes(),
            scheme.qweight_bytes(),
            scheme.scale_bytes(),
        );
        check_disjoint(
            &[region("qweight", qweight, q), region("scale", scale, s)],
            &[region("weight", weight, w)],
        )?;
        // SAFETY: each valid for its checked size (contract); outputs disjoint (checked).
        let (weight, qweight, scale) = unsafe {
            (
                in_bytes(weight.cast(), w, "weight")?,
                out_bytes(qweight.cast(), q, "qweight")?,
                out_bytes(scale.cast(), s, "scale")?,
            )
        };
        paddle::quantize(&scheme, weight, qweight, scale, threads)
    })
}

/// Dequantizes Paddle's permuted `qweight` with its `scale` into a `[k, n]` row-major
/// weight of `desc->dtype`: `T(float(q) * float(scale))`, rounded to nearest even — the
/// formula of Paddle's CUDA `weight_dequantize`. Size, overlap and NULL rules as
/// `q4vk_weight_quantize`.
///
/// # Safety
/// Each pointer must be NULL or valid for its stated number of bytes.
#[no_mangle]
pub unsafe extern "C" fn q4vk_weight_dequantize(
    desc: *const q4vk_weight_quantize_desc,
    qweight: *const i8,
    qweight_bytes: usize,
    scale: *const c_void,
    scale_bytes: usize,
    weight: *mut c_void,
    weight_bytes: usize,
) -> q4vk_status {
    guard("q4vk_weight_dequantize", || {
        // SAFETY: NULL or a readable desc (contract).
        let (scheme, threads) = unsafe { scheme_of(desc) }?;
        require(qweight, "qweight")?;
        require(scale, "scale")?;
        require(weight, "weight")?;
        check_size("qweight_bytes", qweight_bytes, scheme.qweight_bytes())?;
        check_size("scale_bytes", scale_bytes, scheme.scale_bytes())?;
        check_size("weight_bytes", weight_bytes, scheme.weight_bytes())?;
        let (w, q, s) = (
            scheme.weight_bytes(),
            scheme.qweight_bytes(),
            scheme.scale_bytes(),
        );
        check_disjoint(
            &[region("weight", weight, w)],
            &[region("qweight", qweight, q), region("scale", scale, s)],
        )?;
        // SAFETY: each valid for its checked size (contract); the output is disjoint.
        let (qweight, scale, weight) = unsafe {
            (
                in_bytes(qweight.cast(), q, "qweight")?,
                in_bytes(scale.cast(), s, "scale")?,
                out_bytes(weight.cast(), w, "weight")?,
            )
        };
        paddle::dequantize(&scheme, qweight, scale, weight, threads)
    })
}

/// Shared body of permute and unpermute: both map one packed buffer to another of the
/// same size.
///
/// # Safety
/// `desc` NULL or readable; `src` and `dst` NULL or valid for their stated bytes.
unsafe fn convert(
    desc: *const q4vk_weight_quantize_desc,
    (src_name, src, src_bytes): (&'static str, *const i8, usize),
    (dst_name, dst, dst_bytes): (&'static str, *mut i8, usize),
    permute: bool,
) -> Result<()> {
    // SAFETY: forwarded from the caller's contract.
    let (scheme, threads) = unsafe { scheme_of(desc) }?;
    require(src, src_name)?;
    require(dst, dst_name)?;
    let bytes = scheme.qweight_bytes();
    check_size(
        if permute {
            "plain_bytes"
        } else {
            "qweight_bytes"
        },
        src_bytes,
        bytes,
    )?;
    check_size(
        if permute {
            "qweight_bytes"
        } else {
            "plain_bytes"
        },
        dst_bytes,
        bytes,
    )?;
    check_disjoint(
        &[region(dst_name, dst, bytes)],
        &[region(src_name, src, bytes)],
    )?;
    // SAFETY: both valid for their checked sizes (contract), disjoint (checked).
    let (src, dst) = unsafe {
        (
            in_bytes(src.cast(), bytes, src_name)?,
            out_bytes(dst.cast(), bytes, dst_name)?,
        )
    };
    if permute {
        scheme.geometry.permute(src, dst, threads);
    } else {
        scheme.geometry.unpermute(src, dst, threads);
    }
    Ok(())
}

/// Permutes plain codes (see `q4vk_weight_plain_size`) into Paddle's layout for
/// `desc->arch`. `q4vk_weight_quantize` equals quantizing to plain codes, then this.
/// `desc->dtype` and `desc->group_size` are validated but do not affect the bytes. Size,
/// overlap and NULL rules as `q4vk_weight_quantize`.
///
/// # Safety
/// Each pointer must be NULL or valid for its stated number of bytes.
#[no_mangle]
pub unsafe extern "C" fn q4vk_weight_permute(
    desc: *const q4vk_weight_quantize_desc,
    plain: *const i8,
    plain_bytes: usize,
    qweight: *mut i8,
    qweight_bytes: usize,
) -> q4vk_status {
    // SAFETY: forwarded from the caller's contract.
    guard("q4vk_weight_permute", || unsafe {
        convert(
            desc,
            ("plain", plain, plain_bytes),
            ("qweight", qweight, qweight_bytes),
            true,
        )
    })
}

/// The exact inverse of `q4vk_weight_permute` for every arch: recovers plain codes from
/// Paddle's layout. Size, overlap and NULL rules as `q4vk_weight_quantize`.
///
/// # Safety
/// Each pointer must be NULL or valid for its stated number of bytes.
#[no_mangle]
pub unsafe extern "C" fn q4vk_weight_unpermute(
    desc: *const q4vk_weight_quantize_desc,
    qweight: *const i8,
    qweight_bytes: usize,
    plain: *mut i8,
    plain_bytes: usize,
) -> q4vk_status {
    // SAFETY: forwarded from the caller's contract.
    guard("q4vk_weight_unpermute", || unsafe {
        convert(
            desc,
            ("qweight", qweight, qweight_bytes),
            ("plain", plain, plain_bytes),
            false,
        )
    })
}
