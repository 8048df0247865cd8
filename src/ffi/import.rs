//! Checkpoints imported without requantizing (GGUF, GPTQ, AWQ sources of
//! `q4vk_matrix_desc`) and `q4vk_matrix_dequantize`, the f32 weights of any desc.

use super::byte_counts::ByteCount;
use super::matrix::{
    check_fields, q4_data, q4vk_matrix_desc, q4vk_matrix_source, SourceShape, Q4VK_SOURCE_AWQ,
    Q4VK_SOURCE_GGUF_IQ4_NL, Q4VK_SOURCE_GGUF_IQ4_XS, Q4VK_SOURCE_GGUF_MXFP4,
    Q4VK_SOURCE_GGUF_NVFP4, Q4VK_SOURCE_GGUF_Q4_0, Q4VK_SOURCE_GGUF_Q4_1, Q4VK_SOURCE_GGUF_Q4_K,
    Q4VK_SOURCE_GGUF_Q5_0, Q4VK_SOURCE_GGUF_Q5_1, Q4VK_SOURCE_GGUF_Q5_K, Q4VK_SOURCE_GGUF_Q6_K,
    Q4VK_SOURCE_GGUF_Q8_0, Q4VK_SOURCE_GPTQ,
};
use super::panic::guard;
use super::ptr::{check_disjoint, check_size, in_bytes, out_slice, read_struct, require};
use super::status::q4vk_status;
use crate::error::{invalid, Error, Result};
use crate::import::canonical::{check_device_groups, ImportedMatrix};
use crate::import::gguf_blocks::{self, BlockType};
use crate::import::gptq::{GptqFormat, GptqTensors, PackedShape};
use crate::import::{awq, dequant, gguf, gptq};
use crate::quant::dtype::Dtype;
use crate::quant::q4::{Q4Shape, ScaleType};
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

/// A desc's source with its fields checked, before any of its data is read.
enum Parsed {
    /// GGUF blocks: the type, the imported shape and the tensor's bytes.
    Gguf(gguf::GgufType, Q4Shape, usize),
    /// GPTQ tensors and how their zero points are stored.
    Gptq(PackedShape, GptqFormat),
    /// AWQ tensors.
    Awq(PackedShape),
    /// GGUF blocks kept in their native bytes: the type and the tensor's bytes.
    Blocks(BlockType, usize),
    /// FLOAT, Q4 or PADDLE (contract v0).
    V0,
}

/// Checks every field of `d` (not its data) and parses its source.
fn parse(d: &q4vk_matrix_desc) -> Result<Parsed> {
    check_fields(d)?;
    match d.source {
        Q4VK_SOURCE_GGUF_Q4_0 | Q4VK_SOURCE_GGUF_Q4_1 | Q4VK_SOURCE_GGUF_Q4_K => {
            let ty = match d.source {
                Q4VK_SOURCE_GGUF_Q4_0 => gguf::GgufType::Q4_0,
                Q4VK_SOURCE_GGUF_Q4_1 => gguf::GgufType::Q4_1,
                _ => gguf::GgufType::Q4K,
            };
            let (shape, bytes) = ty.shape(d.n, d.k)?;
            unused(d.scales, d.scales_bytes, "desc->scales", ty.name())?;
            unused(d.zeros, d.zeros_bytes, "desc->zeros", ty.name())?;
            Ok(Parsed::Gguf(ty, shape, bytes))
        }
        Q4VK_SOURCE_GPTQ => {
            let shape = PackedShape::new(d.n, d.k, d.group_size, d.dtype, "GPTQ")?;
            let format = GptqFormat::from_c(d.gptq_format)?;
            gptq::qweight_bytes(&shape)?;
            Ok(Parsed::Gptq(shape, format))
        }
        Q4VK_SOURCE_AWQ => {
            let shape = PackedShape::new(d.n, d.k, d.group_size, d.dtype, "AWQ")?;
            awq::qweight_bytes(&shape)?;
            Ok(Parsed::Awq(shape))
        }
        source if block_type(source).is_some() => {
            let ty = block_type(source).expect("matched");
            let name = format!("GGUF {}", ty.name());
            unused(d.scales, d.scales_bytes, "desc->scales", &name)?;
            unused(d.zeros, d.zeros_bytes, "desc->zeros", &name)?;
            Ok(Parsed::Blocks(ty, ty.tensor_bytes(d.n, d.k)?))
        }
        _ => Ok(Parsed::V0),
    }
}

/// The GGUF block type of a `Q4VK_SOURCE_GGUF_*` source beyond Q4_0, Q4_1 and Q4_K.
fn block_type(source: q4vk_matrix_source) -> Option<BlockType> {
    let ty = match source {
        Q4VK_SOURCE_GGUF_Q5_0 => BlockType::Q5_0,
        Q4VK_SOURCE_GGUF_Q5_1 => BlockType::Q5_1,
        Q4VK_SOURCE_GGUF_Q8_0 => BlockType::Q8_0,
        Q4VK_SOURCE_GGUF_Q5_K => BlockType::Q5K,
        Q4VK_SOURCE_GGUF_Q6_K => BlockType::Q6K,
        Q4VK_SOURCE_GGUF_IQ4_NL => BlockType::Iq4Nl,
        Q4VK_SOURCE_GGUF_IQ4_XS => BlockType::Iq4Xs,
        Q4VK_SOURCE_GGUF_MXFP4 => BlockType::Mxfp4,
        Q4VK_SOURCE_GGUF_NVFP4 => BlockType::Nvfp4,
        _ => return None,
    };
    Some(ty)
}

/// `Unsupported` for a matrix of GGUF blocks where a Q4 layout is asked of it (the exported
/// kernels and their packing).
fn blocks_not_in_q4_layout(ty: BlockType) -> Error {
    Error::Unsupported(format!(
        "GGUF {} tensors stay in their native blocks, which the Q4 layout's exported kernel and packs do not read: export with Q4VK_KERNEL_EXPORT_BLOCKS and pack with q4vk_matrix_pack_blocks, or run them through q4vk_matrix_create",
        ty.name()
    ))
}

/// A desc's tensor of GGUF blocks that q4vk keeps in their native bytes.
pub(crate) struct BlockTensor<'a> {
    /// The block type.
    pub ty: BlockType,
    /// Rows.
    pub n: usize,
    /// Inputs (a multiple of the block).
    pub k: usize,
    /// The file's bytes, exactly the tensor's.
    pub bytes: &'a [u8],
}

/// The block type and tensor bytes of a parsed source that a matrix keeps in its native
/// blocks: every GGUF type but Q4_0 (whose blocks are already the Q4 layout's codes and f16
/// scales). Q4_1 and Q4_K are still imported into the Q4 layout (with offsets) by the
/// exported kernels' packing, which reads no blocks.
fn native_blocks(parsed: &Parsed) -> Option<(BlockType, usize)> {
    match *parsed {
        Parsed::Blocks(ty, bytes) => Some((ty, bytes)),
        Parsed::Gguf(gguf::GgufType::Q4_1, _, bytes) => Some((BlockType::Q4_1, bytes)),
        Parsed::Gguf(gguf::GgufType::Q4K, _, bytes) => Some((BlockType::Q4K, bytes)),
        _ => None,
    }
}

/// The block type of `d`'s source where a matrix keeps it in its native blocks (None for
/// the others), from its fields alone.
pub(crate) fn native_block_type(d: &q4vk_matrix_desc) -> Result<Option<BlockType>> {
    Ok(native_blocks(&parse(d)?).map(|(ty, _)| ty))
}

/// `d`'s tensor where its source stays in its native blocks (None for the others), its
/// scales checked finite.
///
/// # Safety
/// The desc's data pointers are NULL or readable for their `_bytes` (the desc's contract).
pub(crate) unsafe fn block_tensor<'a>(d: &q4vk_matrix_desc) -> Result<Option<BlockTensor<'a>>> {
    let Some((ty, bytes)) = native_blocks(&parse(d)?) else {
        return Ok(None);
    };
    // SAFETY: readable for its `_bytes` (the desc's contract).
    let tensor = unsafe { input(d.weight, d.weight_bytes, bytes, "desc->weight") }?;
    let (n, k) = (d.n as usize, d.k as usize);
    gguf_blocks::check_finite(ty, tensor, k / ty.block_elements())?;
    Ok(Some(BlockTensor {
        ty,
        n,
        k,
        bytes: tensor,
    }))
}

/// A GPTQ desc's `g_idx` (`4·k` bytes), or None when absent.
///
/// # Safety
/// `d.g_idx` is NULL or readable for `d.g_idx_bytes` (the desc's contract).
unsafe fn g_idx<'a>(d: &q4vk_matrix_desc, shape: &PackedShape) -> Result<Option<&'a [u8]>> {
    if d.g_idx.is_null() && d.g_idx_bytes == 0 {
        return Ok(None);
    }
    // SAFETY: readable for its `_bytes` (the desc's contract).
    Ok(Some(unsafe {
        input(d.g_idx, d.g_idx_bytes, 4 * shape.q4.k, "desc->g_idx")
    }?))
}

/// The matrix a desc describes, for every source: quantized (FLOAT), converted (Q4,
/// PADDLE) or imported as stored (GGUF, GPTQ, AWQ). Checks every field and buffer size.
///
/// # Safety
/// The desc's data pointers are NULL or readable for their `_bytes` (the desc's contract).
pub(crate) unsafe fn matrix_data<'a>(d: &q4vk_matrix_desc) -> Result<ImportedMatrix<'a>> {
    match parse(d)? {
        Parsed::Gguf(ty, _, bytes) => {
            // SAFETY: readable for its `_bytes` (the desc's contract).
            let tensor = unsafe { input(d.weight, d.weight_bytes, bytes, "desc->weight") }?;
            gguf::decode(ty, d.n, d.k, tensor)
        }
        Parsed::Gptq(shape, format) => {
            let qweight_bytes = gptq::qweight_bytes(&shape)?;
            let scales_bytes = shape.scales_bytes()?;
            // SAFETY: the inputs are readable for their `_bytes` (the desc's contract).
            let t = unsafe {
                GptqTensors {
                    g_idx: g_idx(d, &shape)?,
                    qweight: input(d.weight, d.weight_bytes, qweight_bytes, "desc->weight")?,
                    scales: input(d.scales, d.scales_bytes, scales_bytes, "desc->scales")?,
                    qzeros: input(d.zeros, d.zeros_bytes, shape.qzeros_bytes(), "desc->zeros")?,
                }
            };
            gptq::decode(&shape, format, t)
        }
        Parsed::Awq(shape) => {
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
        Parsed::Blocks(ty, _) => Err(blocks_not_in_q4_layout(ty)),
        // SAFETY: the desc's pointers are readable for their sizes (contract).
        Parsed::V0 => Ok(ImportedMatrix::plain(unsafe { q4_data(d) }?)),
    }
}

/// The byte count of each buffer a desc gives, beside what its source reads of it (for
/// `Q4VK_CONTEXT_STRICT_SIZES` and the dtype warnings of `q4vk_matrix_create`): weights,
/// scales (with their element type, where the desc's `dtype` sets it), zero points and
/// `g_idx`; a buffer the source has no use for is not listed. From the fields alone, as
/// the data path computes them; the sizes' own checks are the data path's.
pub(crate) fn input_byte_counts(d: &q4vk_matrix_desc) -> Result<Vec<ByteCount>> {
    let count = |arg: &str, given: usize, exact: usize| {
        ByteCount::bytes(format!("desc->{arg}_bytes"), given as u64, exact as u64)
    };
    let typed = |arg: &str, given: usize, exact: usize, dtype: Dtype| {
        let elements = (exact / dtype.size()) as u64;
        ByteCount::typed(
            format!("desc->{arg}_bytes"),
            given as u64,
            exact as u64,
            (elements, dtype),
        )
    };
    // GPTQ's and AWQ's scales, of the desc's dtype.
    let packed_scales = |shape: &PackedShape| -> Result<ByteCount> {
        Ok(typed(
            "scales",
            d.scales_bytes,
            shape.scales_bytes()?,
            shape.scale_dtype,
        ))
    };
    let counts = match parse(d)? {
        Parsed::Gguf(_, _, bytes) | Parsed::Blocks(_, bytes) => {
            vec![count("weight", d.weight_bytes, bytes)]
        }
        Parsed::Gptq(shape, _) => {
            let mut counts = vec![
                count("weight", d.weight_bytes, gptq::qweight_bytes(&shape)?),
                packed_scales(&shape)?,
                count("zeros", d.zeros_bytes, shape.qzeros_bytes()),
            ];
            if !d.g_idx.is_null() || d.g_idx_bytes != 0 {
                counts.push(count("g_idx", d.g_idx_bytes, 4 * shape.q4.k));
            }
            counts
        }
        Parsed::Awq(shape) => vec![
            count("weight", d.weight_bytes, awq::qweight_bytes(&shape)?),
            packed_scales(&shape)?,
            count("zeros", d.zeros_bytes, shape.qzeros_bytes()),
        ],
        Parsed::V0 => match SourceShape::of(d)? {
            SourceShape::Float { shape, dtype } => {
                let exact = shape.n * shape.k * dtype.size();
                vec![typed("weight", d.weight_bytes, exact, dtype)]
            }
            SourceShape::Q4 { shape, scale } => {
                let scale_dtype = match scale {
                    ScaleType::F16 => Dtype::F16,
                    ScaleType::F32 => Dtype::F32,
                };
                let mut counts = vec![
                    count("weight", d.weight_bytes, shape.weight_bytes()),
                    typed(
                        "scales",
                        d.scales_bytes,
                        shape.scale_count() * scale.size(),
                        scale_dtype,
                    ),
                ];
                if shape.zero_points {
                    counts.push(count("zeros", d.zeros_bytes, shape.zeros_bytes()));
                }
                counts
            }
            SourceShape::Paddle { scheme } => vec![
                count("weight", d.weight_bytes, scheme.qweight_bytes()),
                typed("scales", d.scales_bytes, scheme.scale_bytes(), scheme.dtype),
            ],
        },
    };
    Ok(counts)
}

/// What the device layout of a desc's matrix holds, known before its data is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeviceShape {
    /// Shape of the Q4 matrix (zero points or not).
    pub shape: Q4Shape,
    /// Stored scale type.
    pub scale: ScaleType,
    /// Per-group f32 offsets (GGUF Q4_1, Q4_K).
    pub offsets: bool,
    /// A column order (GPTQ act-order).
    pub k_order: bool,
}

/// The [`DeviceShape`] of the matrix `q4vk_matrix_create` makes of `d`, from its fields
/// alone, except GPTQ's `g_idx`, which is read (and checked) to tell act-order apart; the
/// other data pointers are not read. `Unsupported` for groups the device layout does not
/// index.
///
/// # Safety
/// `d.g_idx` is NULL or readable for `d.g_idx_bytes` (the desc's contract).
pub(crate) unsafe fn device_shape(d: &q4vk_matrix_desc) -> Result<DeviceShape> {
    let (shape, scale, offsets, k_order) = match parse(d)? {
        Parsed::Gguf(ty, shape, _) => (shape, ty.scale_type(), ty.has_offsets(), false),
        Parsed::Gptq(shape, _) => {
            // SAFETY: forwarded from the caller's contract.
            let order = match unsafe { g_idx(d, &shape) }? {
                Some(g) => gptq::k_order(&shape.q4, g)?.is_some(),
                None => false,
            };
            (shape.q4, shape.scale_type(), false, order)
        }
        Parsed::Awq(shape) => (shape.q4, shape.scale_type(), false, false),
        Parsed::Blocks(ty, _) => return Err(blocks_not_in_q4_layout(ty)),
        Parsed::V0 => {
            let (shape, scale) = SourceShape::of(d)?.shape_and_scale();
            (shape, scale, false, false)
        }
    };
    check_device_groups(&shape)?;
    Ok(DeviceShape {
        shape,
        scale,
        offsets,
        k_order,
    })
}

/// Writes the f32 weights `[n][k]` (row-major, nn.Linear order, inputs in their original
/// order) that a matrix created from `desc` computes with: on the CPU, without a context,
/// for every source. FLOAT: the weights after q4vk's quantization (`q4vk_q4_quantize`);
/// Q4 and PADDLE: `scale·(u − zero)`; GGUF: bit for bit gguf-py's `dequantize` (Q4_0
/// `d·(q − 8)`, Q4_1 `d·q + m`, Q4_K `(d·sc)·q − dmin·m`, and every block type of
/// `Q4VK_SOURCE_GGUF_Q5_0` .. `Q4VK_SOURCE_GGUF_NVFP4`); GPTQ and AWQ: bit for bit the
/// packages' `scale·(q − zero)` in f32 (v1 zeros decoded per word, `g_idx` honoured).
///
/// `out` holds `out_bytes` bytes, at least `n·k·4`, aligned for float. Statuses:
/// `NULL_POINTER`, `INVALID_ARGUMENT` (bad desc; k not a multiple of the GGUF block; n or k
/// not a multiple of 8 where GPTQ/AWQ pack 8 per word; `g_idx` out of range or with
/// unequal groups; `g_idx` or `zeros`/`scales` given to a source without them; `out`
/// overlapping an input or misaligned), `BUFFER_TOO_SMALL` (an input or `out`),
/// `NON_FINITE` (NaN/Inf weights, scales or minima; an E8M0 scale of 0xFF, a UE4M3 NaN, an
/// E8M0 of 253 or 254 times a large E2M1 value),
/// `OUT_OF_HOST_MEMORY`. Nothing is
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
        if let Some(t) = unsafe { block_tensor(&d) }? {
            // SAFETY: as below.
            let floats = unsafe { out_slice(out, n * k, "out") }?;
            gguf_blocks::dequantize(t.ty, t.bytes, floats);
            return Ok(());
        }
        // SAFETY: the desc's data pointers are readable for their sizes (contract).
        let m = unsafe { matrix_data(&d) }?;
        // SAFETY: `out` is non-NULL, aligned (checked above) and writable for `out_bytes`
        // ≥ `n·k·4` bytes (contract), and overlaps no input (checked above).
        let floats = unsafe { out_slice(out, n * k, "out") }?;
        dequant::dequantize(&m, floats)
    })
}

/// Stores in `*out` the `Q4VK_SOURCE_GGUF_*` source of a tensor of `ggml_type` (the
/// `ggml_type` id a GGUF reader reads from the file's tensor info): Q4_0 (2), Q4_1 (3), Q5_0
/// (6), Q5_1 (7), Q8_0 (8), Q4_K (12), Q5_K (13), Q6_K (14), IQ4_NL (20), IQ4_XS (23), MXFP4
/// (39), NVFP4 (40). `q4vk_matrix_create` takes every one of them and
/// `q4vk_matrix_dequantize` decodes every one.
///
/// Statuses: `NULL_POINTER` (out), `UNSUPPORTED` (any other type, named where ggml has it:
/// F16, Q3_K, IQ2_XXS, TQ1_0 …, so the host routes that tensor elsewhere). Nothing is
/// written on failure. Thread-safe.
///
/// # Safety
/// `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn q4vk_source_from_ggml_type(
    ggml_type: u32,
    out: *mut q4vk_matrix_source,
) -> q4vk_status {
    guard("q4vk_source_from_ggml_type", || {
        require(out, "out")?;
        let source = match ggml_type {
            2 => Q4VK_SOURCE_GGUF_Q4_0,
            3 => Q4VK_SOURCE_GGUF_Q4_1,
            12 => Q4VK_SOURCE_GGUF_Q4_K,
            id => match gguf_blocks::of_ggml_id(id) {
                Some(ty) => (Q4VK_SOURCE_GGUF_Q5_0..=Q4VK_SOURCE_GGUF_NVFP4)
                    .find(|&s| block_type(s) == Some(ty))
                    .expect("every block type has a source"),
                None => {
                    let name = gguf_blocks::ggml_type_name(id).map_or_else(
                        || format!("ggml type {id}"),
                        |n| format!("GGML_TYPE_{n} ({id})"),
                    );
                    return Err(Error::Unsupported(format!(
                        "{name} is not a weight type q4vk takes"
                    )));
                }
            },
        };
        // SAFETY: `out` is writable (contract; checked non-NULL).
        unsafe { super::ptr::write_out(out, source, "out") }
    })
}
