//! Kernel export: q4vk's GEMV and SIMT GEMM for hosts that record their own command buffers with their
//! own pipelines and buffers (ncnn's `VkCompute`), and the device-layout bytes of a matrix
//! for the host to upload with its own allocator.

use super::context::q4vk_context;
use super::gemv::{Q4VK_GEMV_F16_ACTIVATIONS, Q4VK_GEMV_F16_OUTPUT};
use super::import::{device_shape, matrix_data, native_block_type, DeviceShape};
use super::matrix::q4vk_matrix_desc;
use super::panic::guard;
use super::ptr::{
    check_disjoint, check_size, handle, out_bytes, out_slice, read_struct, require, write_out,
    write_prefix, VersionedStruct,
};
use super::status::q4vk_status;
use crate::error::{invalid, Error, Result};
use crate::layout::vk::VkLayout;
use crate::quant::q4::{Q4Shape, ScaleType};
use crate::vk::export::{self, ExportDevice, ExportRequest, Extras};
use crate::vk::export_blocks;
use std::ffi::c_void;

/// Which exported kernel (`Q4VK_KERNEL_*`).
pub type q4vk_kernel_variant = u32;
/// No subgroup operations, SPIR-V 1.0 (Vulkan 1.0): runs on every device. The default.
pub const Q4VK_KERNEL_PORTABLE: q4vk_kernel_variant = 0;
/// Subgroup reduction, SPIR-V 1.3 (Vulkan 1.1; subgroup basic + arithmetic in compute).
/// With a context: refused with `Q4VK_ERROR_UNSUPPORTED` when the device lacks them.
/// Without: `desc->subgroup_size` must say the device's subgroup size. At m > 8 the
/// exported kernel is the GEMM, which has no subgroup operations: every variant (checked as
/// above) exports the same SPIR-V 1.0 GEMM, reported as `Q4VK_KERNEL_PORTABLE`; the subgroup
/// size only makes its local size a multiple of it.
pub const Q4VK_KERNEL_SUBGROUP: q4vk_kernel_variant = 1;
/// The context's choice (subgroup unless the device lacks it or the context is portable);
/// without a context, `Q4VK_KERNEL_PORTABLE`.
pub const Q4VK_KERNEL_AUTO: q4vk_kernel_variant = 2;

/// Role of a binding of the exported kernel (`Q4VK_BINDING_*`).
pub type q4vk_binding_role = u32;
/// Packed weights (`q4vk_matrix_pack`'s `weights`). Binding 0.
pub const Q4VK_BINDING_WEIGHTS: q4vk_binding_role = 0;
/// Scales (`q4vk_matrix_pack`'s `scales`). Binding 1.
pub const Q4VK_BINDING_SCALES: q4vk_binding_role = 1;
/// Zero points (`q4vk_matrix_pack`'s `zeros`). Binding 2. Symmetric matrices: `bytes` is 0
/// and the kernel never reads it, but Vulkan needs a valid buffer bound (any, e.g. the
/// scales; ncnn binds a dummy buffer for an empty `VkMat`).
pub const Q4VK_BINDING_ZEROS: q4vk_binding_role = 2;
/// Activations `x[m][k]` (f32, or f16 with `Q4VK_GEMV_F16_ACTIVATIONS`). Binding 3.
pub const Q4VK_BINDING_X: q4vk_binding_role = 3;
/// Output `y[m][n]` (f32), written only at the m·n result elements. Binding 4.
pub const Q4VK_BINDING_Y: q4vk_binding_role = 4;
/// Per-group f32 offsets (`q4vk_matrix_pack_extended`'s `offsets`): `w = scale·u + offset`
/// for GGUF Q4_1 and Q4_K. Binding 5 of the extended kernel (`Q4VK_KERNEL_EXPORT_EXTENDED`).
/// Other matrices: `bytes` 0, not read (bind any valid buffer).
pub const Q4VK_BINDING_OFFSETS: q4vk_binding_role = 5;
/// Column order (`q4vk_matrix_pack_extended`'s `k_order`): the input feature of each column,
/// for GPTQ act-order. Binding 6 of the extended kernel. Other matrices: `bytes` 0, not read
/// (bind any valid buffer).
pub const Q4VK_BINDING_K_ORDER: q4vk_binding_role = 6;
/// Bias (`Q4VK_KERNEL_EXPORT_BIAS`): n f32 values added to every row of y. Binding 7 of the
/// extended kernel with a bias.
pub const Q4VK_BINDING_BIAS: q4vk_binding_role = 7;
/// Q5_0's and Q5_1's fifth bits (`Q4VK_KERNEL_EXPORT_BLOCKS`): binding 2 of their kernels
/// on blocks, 4 bytes per block.
pub const Q4VK_BINDING_HIGH_BITS: q4vk_binding_role = 8;

/// `q4vk_kernel_export_desc.export_flags`: export the extended kernel, whose bindings 5
/// (`Q4VK_BINDING_OFFSETS`) and 6 (`Q4VK_BINDING_K_ORDER`) follow the v0 five, for every
/// source `q4vk_matrix_create` takes (with the device layout of `q4vk_matrix_pack_extended`).
pub const Q4VK_KERNEL_EXPORT_EXTENDED: u32 = 0x1;

/// `q4vk_kernel_export_desc.export_flags`, with `Q4VK_KERNEL_EXPORT_EXTENDED`: the kernel
/// adds a bias to every row of y, `y = W x + bias` (binding 7, `Q4VK_BINDING_BIAS`: n f32
/// values, in the order of y's rows); ncnn's InnerProduct with `bias_term`.
pub const Q4VK_KERNEL_EXPORT_BIAS: u32 = 0x2;

// The roles the export writes are these constants.
const _: () = assert!(
    Q4VK_BINDING_WEIGHTS == export::ROLE_WEIGHTS
        && Q4VK_BINDING_SCALES == export::ROLE_SCALES
        && Q4VK_BINDING_ZEROS == export::ROLE_ZEROS
        && Q4VK_BINDING_X == export::ROLE_X
        && Q4VK_BINDING_Y == export::ROLE_Y
        && Q4VK_BINDING_OFFSETS == export::ROLE_OFFSETS
        && Q4VK_BINDING_K_ORDER == export::ROLE_K_ORDER
        && Q4VK_BINDING_BIAS == export::ROLE_BIAS
        && Q4VK_BINDING_HIGH_BITS == export::ROLE_HIGH_BITS
);

/// `q4vk_kernel_export_desc.export_flags`: export the kernels on GGUF blocks in their native
/// bytes (a matrix of source `Q4VK_SOURCE_GGUF_Q4_1`, `_Q4_K`, `_Q5_0` .. `_NVFP4`, packed by
/// `q4vk_matrix_pack_blocks`) instead of the Q4 layout's: bindings in order the codes
/// (`Q4VK_BINDING_WEIGHTS`), the scales (`Q4VK_BINDING_SCALES`), for Q5_0 and Q5_1 their
/// fifth bits (`Q4VK_BINDING_HIGH_BITS`), x, y and a bias (`Q4VK_BINDING_BIAS`: 0 bytes,
/// unread, unless `Q4VK_KERNEL_EXPORT_BIAS` is set too). f16 y needs no other flag;
/// `Q4VK_KERNEL_EXPORT_EXTENDED` is refused with it.
pub const Q4VK_KERNEL_EXPORT_BLOCKS: u32 = 0x4;

/// Capacity of `q4vk_kernel_info.bindings`.
pub const Q4VK_KERNEL_MAX_BINDINGS: u32 = 8;
/// Capacity of `q4vk_kernel_info.push_constants`.
pub const Q4VK_KERNEL_MAX_PUSH_CONSTANTS: u32 = 16;
/// Capacity of `q4vk_kernel_info.specializations`.
pub const Q4VK_KERNEL_MAX_SPECIALIZATIONS: u32 = 16;

/// How to export the kernel. Initialize with `q4vk_kernel_export_desc_default`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct q4vk_kernel_export_desc {
    /// `sizeof(q4vk_kernel_export_desc)`; smaller than v0 is refused, larger accepted.
    pub struct_size: u32,
    /// `Q4VK_KERNEL_*`; default `Q4VK_KERNEL_PORTABLE`.
    pub variant: q4vk_kernel_variant,
    /// `Q4VK_GEMV_*` bits: `Q4VK_GEMV_F16_ACTIVATIONS`, and with the extended kernel
    /// `Q4VK_GEMV_F16_OUTPUT` (y in f16: the last specialization id, 11 of the subgroup GEMV,
    /// 10 of the portable GEMV, 9 of the GEMM); others are refused. Default 0.
    pub flags: u32,
    /// Activation rows, ≥ 1; default 1. 1..8: the GEMV, specialized for this m (one
    /// pipeline per m; ncnn: the input blob's height). Above 8: the GEMM, which reads m from
    /// push constant 10, so one pipeline serves every m > 8 (see `q4vk_kernel_info`).
    pub m: u32,
    /// Without a context: the device's subgroup size (ncnn: `GpuInfo::subgroup_size()`).
    /// Required for `Q4VK_KERNEL_SUBGROUP`: the smallest subgroup size the device may run
    /// the shader with (`minSubgroupSize` of `VK_EXT_subgroup_size_control` where the device
    /// varies it, else `subgroupSize`), a power of two 4..128. Optional (0) for the portable
    /// kernel, where it makes the local size a multiple of it (ncnn rounds local sizes up to
    /// a multiple of the subgroup size, which the kernel's workgroup constant must match).
    /// With a context: must be 0 (the device says). Default 0.
    pub subgroup_size: u32,
    /// Must be 0.
    pub reserved0: u32,
    /// Elements between rows of x; 0 (default) = k.
    pub x_row_stride: u64,
    /// Elements between rows of y; 0 (default) = n.
    pub y_row_stride: u64,
    /// Appended after v0 (callers with the v0 `struct_size` read 0). `Q4VK_KERNEL_EXPORT_*`
    /// bits: `Q4VK_KERNEL_EXPORT_EXTENDED` for the extended kernel (7 bindings), with
    /// `Q4VK_KERNEL_EXPORT_BIAS` too its build with a bias (8 bindings); 0 (default): the v0
    /// kernel (5 bindings), which refuses matrices with per-group offsets or a column order.
    /// Others are refused.
    pub export_flags: u32,
    /// Must be 0.
    pub reserved1: u32,
}

// SAFETY: repr(C), starts with u32 struct_size; integers only.
unsafe impl VersionedStruct for q4vk_kernel_export_desc {
    // The v0 desc ended at `y_row_stride`; `export_flags` and the fields after it were appended.
    const V0_SIZE: usize = std::mem::offset_of!(q4vk_kernel_export_desc, export_flags);
    const NAME: &'static str = "q4vk_kernel_export_desc";
}

/// One buffer binding of the exported kernel: descriptor set 0, `VK_DESCRIPTOR_TYPE_STORAGE_BUFFER`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct q4vk_kernel_binding {
    /// Binding number (equal to its index in `q4vk_kernel_info.bindings`).
    pub binding: u32,
    /// `Q4VK_BINDING_*`.
    pub role: q4vk_binding_role,
    /// Bytes the kernel may access from the bound offset, for the exported shape (bind at
    /// least this many; 0: not read, bind any valid buffer).
    pub bytes: u64,
}

/// One specialization constant: `VkSpecializationMapEntry{constantID = id, size = 4}` with
/// a 32-bit value (booleans as 0/1).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct q4vk_kernel_specialization {
    /// `constantID`.
    pub id: u32,
    /// Value.
    pub value: u32,
}

/// What `q4vk_kernel_export` returns. The caller sets `struct_size =
/// sizeof(q4vk_kernel_info)` (smaller than v0 is refused); q4vk writes the other fields.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct q4vk_kernel_info {
    /// Set by the caller: `sizeof(q4vk_kernel_info)`.
    pub struct_size: u32,
    /// The variant exported (`Q4VK_KERNEL_PORTABLE` or `Q4VK_KERNEL_SUBGROUP`; always
    /// `Q4VK_KERNEL_PORTABLE` at m > 8, the GEMM).
    pub variant: q4vk_kernel_variant,
    /// Entry point name, NUL-terminated ("main").
    pub entry_point: [libc::c_char; 16],
    /// Length of the SPIR-V in 32-bit words (bytes = 4 × this).
    pub spirv_words: usize,
    /// Entries of `bindings` used (5: weights, scales, zeros, x, y at bindings 0..4; the
    /// extended kernel 7: offsets and column order at 5 and 6; with a bias 8: the bias at
    /// 7; the kernels on GGUF blocks 5, or 6 for Q5_0 and Q5_1: see `q4vk_kernel_export`).
    pub binding_count: u32,
    /// Entries of `push_constants` used: 10 (40 bytes) for the GEMV (m ≤ 8), 11 (44 bytes)
    /// for the GEMM (m > 8).
    pub push_constant_count: u32,
    /// Entries of `specializations` used.
    pub specialization_count: u32,
    /// Always 0.
    pub reserved0: u32,
    /// Local size (x, y, z); also the values of specialization ids 233, 234, 235.
    pub local_size: [u32; 3],
    /// Workgroup counts of the single `vkCmdDispatch(x, y, z)` that computes all of y.
    pub group_count: [u32; 3],
    /// The bindings, in binding order.
    pub bindings: [q4vk_kernel_binding; 8],
    /// The push constants: `push_constant_count` 32-bit words for `vkCmdPushConstants`
    /// (stage COMPUTE, offset 0, `4·push_constant_count` bytes); the block is named
    /// `parameter` (ncnn: one `vk_constant_type` each, in this order). In order: rows (n),
    /// row_base (0), chunks (ceil(k/32)), k, groups (scale groups per row), group_shift,
    /// x_row_stride, y_row_stride, wg_count (total workgroups), wg_offset (0); the GEMM
    /// (m > 8) then m (word 10).
    ///
    /// The GEMM's SPIR-V, specializations and local size do not depend on m: one pipeline
    /// serves every m > 8. Per m only word 8 (wg_count), word 10 (m), `group_count` and the
    /// bytes of x and y change: export again with that m (pure and cheap; `spirv` NULL), or
    /// compute them: a workgroup computes `TX·RN` rows × `(local_size[0] / TX)·RM` tokens
    /// (TX, RN, RM: the values of specialization ids 1, 2, 3), `wg_count = ceil(n / rows) ·
    /// ceil(m / tokens)`, `group_count = {gx, ceil(wg_count / gx), 1}` with `gx =
    /// min(wg_count, maxComputeWorkGroupCount[0])` (the kernel skips the surplus of the
    /// last row; `group_count[1]` must stay within `maxComputeWorkGroupCount[1]`).
    pub push_constants: [u32; 16],
    /// Specialization constants by ascending id: the kernel's own on ids 0..N-1 (ncnn:
    /// vector entry i = constant id i), then the local size on 233, 234, 235. The GEMM's
    /// own: 0 workgroup size (= `local_size[0]`), 1 TX, 2 RN, 3 RM, 4 zero points, 5 f32
    /// scales, 6 f16 activations, and in the extended kernel 7 offsets, 8 column order.
    pub specializations: [q4vk_kernel_specialization; 16],
}

// SAFETY: repr(C), starts with u32 struct_size; integers only.
unsafe impl VersionedStruct for q4vk_kernel_info {
    const V0_SIZE: usize = std::mem::size_of::<q4vk_kernel_info>();
    const NAME: &'static str = "q4vk_kernel_info";
}

/// Fills `desc` with the defaults: portable variant, m = 1, f32 activations, dense rows,
/// the v0 kernel (`export_flags` 0). NULL is ignored.
///
/// # Safety
/// `desc` must be NULL or point to a writable `q4vk_kernel_export_desc`.
#[no_mangle]
pub unsafe extern "C" fn q4vk_kernel_export_desc_default(desc: *mut q4vk_kernel_export_desc) {
    let value = q4vk_kernel_export_desc {
        struct_size: std::mem::size_of::<q4vk_kernel_export_desc>() as u32,
        variant: Q4VK_KERNEL_PORTABLE,
        flags: 0,
        m: 1,
        subgroup_size: 0,
        reserved0: 0,
        x_row_stride: 0,
        y_row_stride: 0,
        export_flags: 0,
        reserved1: 0,
    };
    let _ = guard("q4vk_kernel_export_desc_default", || {
        // SAFETY: `desc` is NULL (skipped) or writable (caller's contract).
        unsafe { write_out(desc, value, "desc") }.or(Ok(()))
    });
}

/// Reads the desc of a pack function and its device shape; for the v0 functions
/// (`extended` false: `q4vk_matrix_pack_size`, `q4vk_matrix_pack`) `Unsupported` when the
/// matrix needs the extended layout.
///
/// # Safety
/// `desc` NULL or readable for its `struct_size`, its `g_idx` as [`device_shape`] needs.
unsafe fn pack_desc(
    desc: *const q4vk_matrix_desc,
    extended: bool,
) -> Result<(q4vk_matrix_desc, DeviceShape)> {
    // SAFETY: forwarded from the caller's contract.
    let d = unsafe { read_struct(desc, "desc") }?;
    // SAFETY: forwarded from the caller's contract.
    let s = unsafe { device_shape(&d) }?;
    if !extended && (s.offsets || s.k_order) {
        return Err(Error::Unsupported(format!(
            "the matrix has {}, which the v0 device layout cannot hold: use q4vk_matrix_pack_extended_size / q4vk_matrix_pack_extended (and Q4VK_KERNEL_EXPORT_EXTENDED)",
            if s.offsets {
                "per-group offsets (GGUF Q4_1/Q4_K)"
            } else {
                "a column order (GPTQ act-order)"
            }
        )));
    }
    Ok((d, s))
}

/// `InvalidArgument` when the flags field `what` has bits outside `known`.
fn known_bits(value: u32, known: u32, what: &str) -> Result<()> {
    match value & !known {
        0 => Ok(()),
        unknown => Err(invalid!("{what} has unknown bits {unknown:#x}")),
    }
}

/// `InvalidArgument` unless the reserved field `what` is 0.
fn reserved(value: u32, what: &str) -> Result<()> {
    match value {
        0 => Ok(()),
        _ => Err(invalid!("{what} is {value}; it must be 0")),
    }
}

fn to_usize(v: u64, what: &str) -> Result<usize> {
    usize::try_from(v).map_err(|_| invalid!("{what} ({v} bytes) exceeds this platform's size_t"))
}

/// Describes the exported GEMV (m ≤ 8) or GEMM (m > 8) for the matrix `matrix` (shape,
/// scheme and source as `q4vk_matrix_create` takes them; its data pointers are not read and
/// may be NULL, except a GPTQ `g_idx`, read to tell act-order apart) and `desc` (m,
/// activation type, variant, v0 or extended kernel), and copies its SPIR-V into `spirv`.
///
/// The kernel computes all of `y[m][n] = sum_k x[m][k]·W[n][k]` in one dispatch, with the
/// matrix in the device layout `q4vk_matrix_pack` (v0 kernel) or
/// `q4vk_matrix_pack_extended` (extended kernel) writes. Everything is in `info`: bindings
/// (descriptor set 0, storage buffers, with the bytes each needs), push constants (32-bit
/// words), specialization constants (the kernel's own on ids 0..N-1, the local size on
/// 233..235: ncnn's convention), local size and workgroup counts. Build a compute pipeline
/// from exactly that (one set layout of `binding_count` storage buffers, a push-constant
/// range of `4·push_constant_count` bytes, the SPIR-V, entry point `info.entry_point`, the
/// specialization constants), bind the buffers, push the constants,
/// `vkCmdDispatch(group_count)`.
///
/// Bindings (binding i has role i):
///
/// | binding | role | v0 kernel | extended kernel (`Q4VK_KERNEL_EXPORT_EXTENDED`) |
/// |---|---|---|---|
/// | 0 | `Q4VK_BINDING_WEIGHTS` | pack's `weights` | pack_extended's `weights` |
/// | 1 | `Q4VK_BINDING_SCALES` | pack's `scales` | pack_extended's `scales` |
/// | 2 | `Q4VK_BINDING_ZEROS` | pack's `zeros` (bytes 0 when symmetric) | pack_extended's `zeros` (bytes 0 when symmetric or with offsets) |
/// | 3 | `Q4VK_BINDING_X` | x | x |
/// | 4 | `Q4VK_BINDING_Y` | y | y |
/// | 5 | `Q4VK_BINDING_OFFSETS` | — | pack_extended's `offsets` (bytes 0 without) |
/// | 6 | `Q4VK_BINDING_K_ORDER` | — | pack_extended's `k_order` (bytes 0 without) |
///
/// A binding whose `bytes` is 0 is not read, but Vulkan needs a valid buffer there (any).
/// The v0 kernel (`desc->export_flags` 0, and v0 callers) takes every source whose matrix
/// has neither per-group offsets nor a column order (FLOAT, Q4, PADDLE, GGUF Q4_0, GPTQ
/// without act-order, AWQ) and is the same kernel as before the extended one existed; GGUF
/// Q4_1/Q4_K and act-order GPTQ need the extended kernel (`UNSUPPORTED` otherwise). The
/// extended kernel takes every source, also those the v0 kernel takes (its bindings 5 and 6
/// then unread), and specializes on ids 8 (offsets) and 9 (column order); the subgroup
/// size moves to id 10 there, and the last id stores y in f16 (`Q4VK_GEMV_F16_OUTPUT` in
/// `desc->flags`: two bytes per element, binding 4's `bytes` rounded up to 4, each element
/// written without touching its neighbour in the same 32-bit word; no 16-bit storage
/// feature needed): id 11 of the subgroup kernel, id 10 of the portable one (which has no
/// subgroup-size constant); every build's own ids are contiguous from 0.
///
/// Size query: with `spirv` NULL and `spirv_words` 0, only `info` is written (its
/// `spirv_words` says how many words to allocate); a second call copies the SPIR-V. A
/// non-NULL `spirv` smaller than needed: `Q4VK_ERROR_BUFFER_TOO_SMALL`.
///
/// `ctx` may be NULL: then no device is known; `Q4VK_KERNEL_AUTO` means portable, and the
/// limits checked are Vulkan's guaranteed minimums (workgroup counts 65535, shared memory
/// 16 KiB, 128 invocations) except the buffer sizes: check `bindings[i].bytes` against
/// your device's `maxStorageBufferRange` yourself. With a context, its device's limits,
/// subgroup sizes and workgroup choice are used. The workgroup dimension grid is 2-D when
/// the workgroups exceed `maxComputeWorkGroupCount[0]` (the kernel skips the surplus
/// workgroups of the last row); the export never needs several dispatches.
///
/// Refused with `Q4VK_ERROR_UNSUPPORTED` (the message says why) when the export cannot
/// express the case: a weights/scales/zeros/x/y buffer beyond `maxStorageBufferRange` or
/// 2^32 elements (`q4vk_matrix_create` splits such a matrix into several buffers; the
/// exported kernel takes one per role), the subgroup variant on a device without
/// subgroup arithmetic, a grid beyond the device's workgroup counts, a workgroup or shared
/// memory beyond the device's limits.
///
/// m > 8 (prefill) exports the GEMM, a register-tiled kernel without subgroup operations
/// (`shaders/gemm_q4.comp`, the one `q4vk_gemv` runs on devices without cooperative
/// matrices; not the tensor-core GEMM): SPIR-V 1.0 for every variant, the same bindings
/// and the same v0/extended choice, 11 push constants (m last), 7 own specialization
/// constants (10 extended, f16 y on id 9), local size 64 (or the subgroup size where larger: 64 rows ×
/// 32 tokens per workgroup, more tokens with a wider one; 12..16 KiB of shared memory).
/// Its pipeline serves every m > 8 (`q4vk_kernel_info.push_constants` says what changes
/// per m).
///
/// **GGUF blocks** (`Q4VK_KERNEL_EXPORT_BLOCKS`; sources `Q4VK_SOURCE_GGUF_Q4_1`, `_Q4_K`,
/// `_Q5_0` .. `_NVFP4`): the kernels `q4vk_gemv` runs on blocks in their native bytes
/// (`shaders/gemv_blocks.comp`, `gemm_blocks.comp`), on the streams `q4vk_matrix_pack_blocks`
/// writes. Their bindings, in order: codes (`Q4VK_BINDING_WEIGHTS`), scales
/// (`Q4VK_BINDING_SCALES`), for Q5_0 and Q5_1 their fifth bits (`Q4VK_BINDING_HIGH_BITS`),
/// x, y, and a bias (`Q4VK_BINDING_BIAS`: n f32 values with `Q4VK_KERNEL_EXPORT_BIAS`, else
/// 0 bytes, unread): find each by its role. f16 y (`Q4VK_GEMV_F16_OUTPUT`) needs no other
/// flag. The GEMV's own ids: rows per workgroup 0 (by the type's class and the matrix's rows,
/// fewer where the device's shared memory needs), m 1, f16 x 2, workgroup 3, x held 4, word
/// lanes 5 (invocations stride over quarters of pieces: at m 5..8, and at smaller m where the
/// type's class takes them), f16 y 6, bias 7, and the subgroup
/// variant's subgroup size 8; the GEMM's (m > 8): workgroup 0, TX 1, RN 2, RM 3, f16 x 4,
/// f16 y 5, bias 6; 10 and 11 push constants as above (chunks: pieces of 32 per row;
/// groups: blocks per row).
///
/// Barriers are the host's: x written before the dispatch, y read after, as for
/// `q4vk_cmd_gemv`. The SPIR-V keeps its debug names (ncnn's reflection needs the
/// `parameter` block name).
///
/// Use from ncnn (1.0.20261020), in a custom layer: the tested, complete version is
/// `examples_c/ncnn/q4linear.cpp` (`docs/integrations.md` walks through it). In outline:
///
/// ```c
/// // create_pipeline: one pipeline per m = 1..8 (the GEMV is specialized on m), and one
/// // for every m > 8 (the GEMM: export it once at e.g. m = 9)
/// e.m = m; e.variant = Q4VK_KERNEL_PORTABLE;      // or SUBGROUP + e.subgroup_size =
///                                                 //   vkdev->info.subgroup_size()
/// q4vk_kernel_export(NULL, &W, &e, &info, NULL, 0);                // size query
/// q4vk_kernel_export(NULL, &W, &e, &info, spv.data(), spv.size());
/// // ncnn::vk_specialization_type entry i = info.specializations[i].value
/// pipe->set_local_size_xyz(info.local_size[0], info.local_size[1], info.local_size[2]);
/// pipe->create(spv.data(), spv.size() * 4, specs);
/// // upload_model: the q4vk_matrix_pack bytes as 1-D Mats of elemsize 1 (record_upload
/// // then neither casts nor repacks them), uploaded with packing and fp16/bf16 off
/// // forward: fp32 elempack-1 blobs; bindings in info.bindings[i].role order; push
/// // constants info.push_constants; dispatcher.w/h/c = group_count[i] * local_size[i]
/// cmd.record_pipeline(pipe, bindings, std::vector<ncnn::VkImageMat>(), constants, dispatcher);
/// ```
///
/// Statuses: `NULL_POINTER` (matrix, desc, info), `INVALID_ARGUMENT` (a struct_size, bad
/// matrix desc or `g_idx`, unknown variant/flags/export_flags, reserved0/1, strides,
/// subgroup_size), `BUFFER_TOO_SMALL` (spirv, `g_idx_bytes`), `UNSUPPORTED` (above; a CPU
/// context; groups the device layout does not index). Outputs written only on success.
/// Pure (no Vulkan call); thread-safe.
///
/// # Safety
/// `ctx` NULL or live; `matrix`, `desc` NULL or valid (the matrix's `g_idx` NULL or readable
/// for `g_idx_bytes`); `info` NULL or writable for its `struct_size` bytes; `spirv` NULL or
/// writable for `spirv_words` words.
#[no_mangle]
pub unsafe extern "C" fn q4vk_kernel_export(
    ctx: *const q4vk_context,
    matrix: *const q4vk_matrix_desc,
    desc: *const q4vk_kernel_export_desc,
    info: *mut q4vk_kernel_info,
    spirv: *mut u32,
    spirv_words: usize,
) -> q4vk_status {
    guard("q4vk_kernel_export", || {
        // SAFETY: each NULL or readable for its `struct_size` (contract).
        let (d, e) = unsafe { (read_struct(matrix, "matrix")?, read_struct(desc, "desc")?) };
        // Checks info's struct_size (and NULL) before any work.
        // SAFETY: as above.
        let declared = unsafe { read_struct(info as *const q4vk_kernel_info, "info") }?.struct_size;
        known_bits(
            e.flags,
            Q4VK_GEMV_F16_ACTIVATIONS | Q4VK_GEMV_F16_OUTPUT,
            "desc->flags",
        )?;
        reserved(e.reserved0, "desc->reserved0")?;
        known_bits(
            e.export_flags,
            Q4VK_KERNEL_EXPORT_EXTENDED | Q4VK_KERNEL_EXPORT_BIAS | Q4VK_KERNEL_EXPORT_BLOCKS,
            "desc->export_flags",
        )?;
        let extended = e.export_flags & Q4VK_KERNEL_EXPORT_EXTENDED != 0;
        let on_blocks = e.export_flags & Q4VK_KERNEL_EXPORT_BLOCKS != 0;
        let bias = e.export_flags & Q4VK_KERNEL_EXPORT_BIAS != 0;
        if on_blocks && extended {
            return Err(invalid!(
                "desc->export_flags has Q4VK_KERNEL_EXPORT_BLOCKS and Q4VK_KERNEL_EXPORT_EXTENDED: the kernels on blocks have no extended build (they take a bias and f16 y themselves)"
            ));
        }
        if bias && !extended && !on_blocks {
            return Err(invalid!(
                "desc->export_flags has Q4VK_KERNEL_EXPORT_BIAS without Q4VK_KERNEL_EXPORT_EXTENDED: the bias is binding 7 of the extended kernel"
            ));
        }
        // The matrix as the chosen kernel reads it: its blocks, or the Q4 layout.
        let (blocks, dev_shape) = match on_blocks {
            true => {
                let ty = native_block_type(&d)?.ok_or_else(|| {
                    Error::Unsupported(
                        "Q4VK_KERNEL_EXPORT_BLOCKS exports the kernels on GGUF blocks (Q4_1, Q4_K, Q5_0 .. NVFP4); this source runs the Q4 layout's kernel: leave the flag out".into(),
                    )
                })?;
                let shape = Q4Shape::new(d.n, d.k, ty.block_elements() as i32, 0)?;
                let plain = DeviceShape {
                    shape,
                    scale: ScaleType::F16,
                    offsets: false,
                    k_order: false,
                };
                (Some(ty), plain)
            }
            // SAFETY: g_idx NULL or readable for its size (the matrix desc's contract).
            false => (None, unsafe { device_shape(&d) }?),
        };
        let (shape, scale) = (dev_shape.shape, dev_shape.scale);
        reserved(e.reserved1, "desc->reserved1")?;
        if e.variant > Q4VK_KERNEL_AUTO {
            return Err(invalid!(
                "desc->variant is {}; expected Q4VK_KERNEL_PORTABLE (0), Q4VK_KERNEL_SUBGROUP (1) or Q4VK_KERNEL_AUTO (2)",
                e.variant
            ));
        }
        // SAFETY: NULL (no context) or live (contract).
        let ctx = match unsafe { handle(ctx, "ctx") } {
            Ok(c) => Some(c.backend.vulkan("q4vk_kernel_export")?),
            Err(_) => None,
        };
        let (subgroup, dev) = match ctx {
            Some(c) => {
                if e.subgroup_size != 0 {
                    return Err(invalid!(
                        "desc->subgroup_size is {}; with a context it must be 0 (the device says)",
                        e.subgroup_size
                    ));
                }
                let info = &c.device.info;
                let subgroup = match e.variant {
                    Q4VK_KERNEL_PORTABLE => false,
                    Q4VK_KERNEL_SUBGROUP => {
                        if !info.subgroup_kernels_ok() {
                            return Err(Error::Unsupported(format!(
                                "the subgroup kernel needs subgroup basic + arithmetic operations in compute shaders and subgroup sizes 4..128; {} lacks them (use Q4VK_KERNEL_PORTABLE)",
                                info.name
                            )));
                        }
                        true
                    }
                    _ => !c.rules.portable,
                };
                let tuning = if subgroup != c.rules.portable {
                    // The context's shape for this matrix's class of rows and this m (the
                    // kernels on blocks take the short rows' workgroup, as the context's own
                    // do).
                    match blocks {
                        Some(_) => *c.rules.simt(),
                        None => *c.rules.simt_for(shape.n, shape.k as u64, e.m),
                    }
                } else {
                    export::default_tuning(subgroup, info.subgroup_size, info.min_subgroup_size)
                };
                let tuning = export::round_to_subgroup(tuning, info.subgroup_size);
                (subgroup, ExportDevice::of(info, tuning))
            }
            None => {
                let subgroup = e.variant == Q4VK_KERNEL_SUBGROUP;
                let sg = e.subgroup_size;
                if subgroup && !(sg.is_power_of_two() && (4..=128).contains(&sg)) {
                    return Err(invalid!(
                        "desc->subgroup_size is {sg}; Q4VK_KERNEL_SUBGROUP without a context needs the device's subgroup size, a power of two 4..128"
                    ));
                }
                if sg != 0 && !(sg.is_power_of_two() && sg <= 128) {
                    return Err(invalid!(
                        "desc->subgroup_size is {sg}; expected 0 or a power of two up to 128"
                    ));
                }
                let tuning = export::default_tuning(subgroup, sg, sg);
                let tuning = export::round_to_subgroup(tuning, sg);
                let dev = ExportDevice {
                    subgroup_size: sg,
                    ..ExportDevice::unknown(tuning)
                };
                (subgroup, dev)
            }
        };
        let req = ExportRequest {
            shape,
            scale,
            m: e.m,
            x_f16: e.flags & Q4VK_GEMV_F16_ACTIVATIONS != 0,
            y_f16: e.flags & Q4VK_GEMV_F16_OUTPUT != 0,
            x_stride: if e.x_row_stride == 0 {
                shape.k as u64
            } else {
                e.x_row_stride
            },
            y_stride: if e.y_row_stride == 0 {
                shape.n as u64
            } else {
                e.y_row_stride
            },
            subgroup,
            extras: Extras {
                extended,
                offsets: dev_shape.offsets,
                k_order: dev_shape.k_order,
            },
            bias,
        };
        let x = match blocks {
            Some(ty) => export_blocks::export(&req, &dev, ty)?,
            None => export::export(&req, &dev)?,
        };
        if !spirv.is_null() || spirv_words != 0 {
            require(spirv, "spirv")?;
            if spirv_words < x.spirv.len() {
                return Err(Error::BufferTooSmall(format!(
                    "spirv_words is {spirv_words}, {} needed",
                    x.spirv.len()
                )));
            }
        }
        let too_many = x.bindings.len() > Q4VK_KERNEL_MAX_BINDINGS as usize
            || x.push.len() > Q4VK_KERNEL_MAX_PUSH_CONSTANTS as usize
            || x.specs.len() > Q4VK_KERNEL_MAX_SPECIALIZATIONS as usize;
        if too_many {
            return Err(Error::Internal(
                "exported kernel exceeds q4vk_kernel_info".into(),
            ));
        }
        let mut out = q4vk_kernel_info {
            struct_size: declared,
            variant: if x.subgroup {
                Q4VK_KERNEL_SUBGROUP
            } else {
                Q4VK_KERNEL_PORTABLE
            },
            entry_point: [0; 16],
            spirv_words: x.spirv.len(),
            binding_count: x.bindings.len() as u32,
            push_constant_count: x.push.len() as u32,
            specialization_count: x.specs.len() as u32,
            reserved0: 0,
            local_size: x.local_size,
            group_count: x.groups,
            bindings: [q4vk_kernel_binding::default(); 8],
            push_constants: [0; 16],
            specializations: [q4vk_kernel_specialization::default(); 16],
        };
        for (dst, src) in out.entry_point.iter_mut().zip(b"main") {
            *dst = *src as libc::c_char;
        }
        for (dst, b) in out.bindings.iter_mut().zip(&x.bindings) {
            *dst = q4vk_kernel_binding {
                binding: b.binding,
                role: b.role,
                bytes: b.bytes,
            };
        }
        out.push_constants[..x.push.len()].copy_from_slice(&x.push);
        for (dst, &(id, value)) in out.specializations.iter_mut().zip(&x.specs) {
            *dst = q4vk_kernel_specialization { id, value };
        }
        if !spirv.is_null() {
            // SAFETY: writable for spirv_words ≥ the SPIR-V's words (checked; contract).
            unsafe { out_slice(spirv, x.spirv.len(), "spirv") }?.copy_from_slice(&x.spirv);
        }
        // Only the fields the caller's struct has room for.
        // SAFETY: `info` is writable for its declared `struct_size` bytes (contract).
        unsafe { write_prefix(info, &out, declared as usize, "info") }
    })
}

/// Sizes of the device-layout buffers `q4vk_matrix_pack` writes for `desc` (data pointers
/// not read, except a GPTQ `g_idx`): `weights_bytes = n·ceil(k/32)·16`, `scales_bytes =
/// n·groups·(2 or 4)` rounded up to 4, `zeros_bytes = n·groups` rounded up to 4 (0 when
/// symmetric). Equal to the `bytes` of bindings 0..2 of `q4vk_kernel_export`. Every source
/// whose matrix the v0 kernel computes: FLOAT, Q4, PADDLE, GGUF Q4_0, GPTQ without act-order,
/// AWQ. Pure. Statuses: `NULL_POINTER`, `INVALID_ARGUMENT` (bad desc, or sizes beyond
/// size_t), `UNSUPPORTED` (a matrix with per-group offsets or a column order: GGUF Q4_1/Q4_K,
/// GPTQ act-order; see `q4vk_matrix_pack_extended_size`).
///
/// # Safety
/// Pointers must be NULL or valid for their type; the desc's `g_idx` NULL or readable for
/// `g_idx_bytes`.
#[no_mangle]
pub unsafe extern "C" fn q4vk_matrix_pack_size(
    desc: *const q4vk_matrix_desc,
    weights_bytes: *mut usize,
    scales_bytes: *mut usize,
    zeros_bytes: *mut usize,
) -> q4vk_status {
    guard("q4vk_matrix_pack_size", || {
        let outs = [
            (weights_bytes, "weights_bytes"),
            (scales_bytes, "scales_bytes"),
            (zeros_bytes, "zeros_bytes"),
        ];
        // SAFETY: the desc and its g_idx readable, each output NULL or writable (contract).
        unsafe { query_sizes(desc, false, &outs) }
    })
}

/// Sizes of the buffers `q4vk_matrix_pack_extended` writes for `desc`, any source
/// `q4vk_matrix_create` takes (data pointers not read, except a GPTQ `g_idx`, read to tell
/// act-order apart): weights, scales and zeros as `q4vk_matrix_pack_size`; `offsets_bytes =
/// n·groups·4` for GGUF Q4_1 and Q4_K (else 0); `k_order_bytes = k·4` for GPTQ act-order
/// (else 0). Equal to the `bytes` of bindings 0, 1, 2, 5 and 6 of the extended kernel
/// (`Q4VK_KERNEL_EXPORT_EXTENDED`). Pure; thread-safe. Statuses: `NULL_POINTER`,
/// `INVALID_ARGUMENT` (bad desc or `g_idx`, sizes beyond size_t), `BUFFER_TOO_SMALL`
/// (`g_idx_bytes`), `UNSUPPORTED` (groups the device layout does not index, as
/// `q4vk_matrix_create`). Outputs written only on success.
///
/// # Safety
/// Pointers must be NULL or valid for their type; the desc's `g_idx` NULL or readable for
/// `g_idx_bytes`.
#[no_mangle]
pub unsafe extern "C" fn q4vk_matrix_pack_extended_size(
    desc: *const q4vk_matrix_desc,
    weights_bytes: *mut usize,
    scales_bytes: *mut usize,
    zeros_bytes: *mut usize,
    offsets_bytes: *mut usize,
    k_order_bytes: *mut usize,
) -> q4vk_status {
    guard("q4vk_matrix_pack_extended_size", || {
        let outs = [
            (weights_bytes, "weights_bytes"),
            (scales_bytes, "scales_bytes"),
            (zeros_bytes, "zeros_bytes"),
            (offsets_bytes, "offsets_bytes"),
            (k_order_bytes, "k_order_bytes"),
        ];
        // SAFETY: the desc and its g_idx readable, each output NULL or writable (contract).
        unsafe { query_sizes(desc, true, &outs) }
    })
}

/// Bytes of weights, scales, zeros, offsets and column order in the device layout.
fn pack_sizes(s: &DeviceShape) -> Result<[usize; 5]> {
    let [w, sc, z] = export::layout_bytes(&s.shape, s.scale)?;
    let extras = Extras {
        extended: true,
        offsets: s.offsets,
        k_order: s.k_order,
    };
    let [o, k] = export::extra_bytes(&s.shape, extras);
    Ok([
        to_usize(w, "weights")?,
        to_usize(sc, "scales")?,
        to_usize(z, "zeros")?,
        to_usize(o, "offsets")?,
        to_usize(k, "column order")?,
    ])
}

/// The size queries: writes the first `outs.len()` of weights, scales, zeros, offsets and
/// column order bytes of `desc` ([`pack_desc`]); every output is checked non-NULL first, so
/// nothing is written when one is NULL or the desc is bad.
///
/// # Safety
/// As [`pack_desc`]; each output NULL or writable.
unsafe fn query_sizes(
    desc: *const q4vk_matrix_desc,
    extended: bool,
    outs: &[(*mut usize, &str)],
) -> Result<()> {
    // SAFETY: forwarded from the caller's contract.
    let (_, shape) = unsafe { pack_desc(desc, extended) }?;
    let sizes = pack_sizes(&shape)?;
    for &(ptr, arg) in outs {
        require(ptr, arg)?;
    }
    for (&(ptr, arg), &value) in outs.iter().zip(&sizes) {
        // SAFETY: writable (contract; checked non-NULL).
        unsafe { write_out(ptr, value, arg) }?;
    }
    Ok(())
}

/// One output buffer of a pack: where, how many bytes the caller has, its name.
pub(super) type PackOut = (*mut c_void, usize, &'static str);

/// Checks a pack's outputs against the bytes each needs (`sizes`, in order; one of 0 may
/// be NULL), and that they overlap neither each other nor the `inputs` (name, address,
/// bytes).
pub(super) fn check_outputs(
    outs: &[PackOut],
    sizes: &[usize],
    inputs: &[(&str, usize, usize)],
) -> Result<()> {
    for (&(ptr, given, arg), &need) in outs.iter().zip(sizes) {
        if need > 0 {
            require(ptr, arg)?;
        }
        check_size(&format!("{arg}_bytes"), given, need)?;
    }
    let regions: Vec<_> = outs
        .iter()
        .zip(sizes)
        .map(|(&(ptr, _, arg), &need)| (arg, ptr as usize, need))
        .collect();
    check_disjoint(&regions, inputs)
}

/// Packs the matrix of `d` (of device shape `shape`) into `outs` — weights, scales, zeros,
/// offsets, column order — each either NULL with 0 bytes when the layout's size is 0, or
/// at least that size. Checks everything, decodes, then writes (nothing on error).
///
/// # Safety
/// The desc's data pointers readable for their sizes; each output NULL or writable for its
/// stated bytes.
unsafe fn pack(d: &q4vk_matrix_desc, shape: &DeviceShape, outs: [PackOut; 5]) -> Result<()> {
    let sizes = pack_sizes(shape)?;
    check_outputs(
        &outs,
        &sizes,
        &[
            ("desc->weight", d.weight as usize, d.weight_bytes),
            ("desc->scales", d.scales as usize, d.scales_bytes),
            ("desc->zeros", d.zeros as usize, d.zeros_bytes),
            ("desc->g_idx", d.g_idx as usize, d.g_idx_bytes),
        ],
    )?;
    // SAFETY: the desc's data pointers are readable for their sizes (contract).
    let m = unsafe { matrix_data(d) }?;
    let (data, offsets, k_order) = m.device_parts()?;
    let layout = VkLayout::of(&data.shape);
    let n = data.shape.n;
    let built = [
        layout.weights_bytes(n),
        layout.scales_bytes(data.scale_type.size(), n),
        layout.zeros_bytes(data.shape.zero_points, n),
        offsets.map_or(0, |_| layout.scales_bytes(4, n)),
        k_order.map_or(0, |o| 4 * o.len()),
    ];
    if built != sizes {
        return Err(Error::Internal(format!(
            "device layout is {built:?} bytes, {sizes:?} expected"
        )));
    }
    // Straight into the caller's buffers: no host copy.
    let [w, s, z, o, k] = [0, 1, 2, 3, 4].map(|i| {
        // SAFETY: writable for at least its size (checked; contract), disjoint from the
        // others and from the inputs (checked above).
        unsafe { out_or_empty(outs[i].0, sizes[i], outs[i].2) }
    });
    let (w, s, z, o, k) = (w?, s?, z?, o?, k?);
    layout.pack_weights(data, 0..n, w);
    layout.pack_scales(data, 0..n, s);
    layout.pack_zeros(data, 0..n, z);
    if let Some(values) = offsets {
        layout.pack_offsets(values, 0..n, o);
    }
    if let Some(order) = k_order {
        for (dst, i) in k.chunks_exact_mut(4).zip(order) {
            dst.copy_from_slice(&i.to_le_bytes());
        }
    }
    Ok(())
}

/// `len` bytes at `ptr` as output, or an empty slice when `len` is 0 (`ptr` unused).
///
/// # Safety
/// As [`out_bytes`] when `len` > 0.
unsafe fn out_or_empty<'a>(ptr: *mut c_void, len: usize, arg: &str) -> Result<&'a mut [u8]> {
    if len == 0 {
        return Ok(&mut []);
    }
    // SAFETY: forwarded from the caller's contract.
    unsafe { out_bytes(ptr.cast(), len, arg) }
}

/// Writes the device layout of the matrix `desc` describes — exactly the bytes
/// `q4vk_matrix_create` uploads for a matrix that fits one buffer per role — into caller
/// memory, for a host that uploads them with its own allocator and binds them to the
/// kernel of `q4vk_kernel_export` (weights → binding 0, scales → 1, zeros → 2). Sources as
/// `q4vk_matrix_pack_size` takes them (FLOAT is quantized as `q4vk_q4_quantize` does, Q4
/// copied, PADDLE converted losslessly, GGUF Q4_0 / GPTQ / AWQ imported as stored). Layout:
/// weights `[n][ceil(k/32)]` 16-byte chunks, 32 codes per chunk, k even in the low nibble,
/// zero-padded past k; scales `[n][groups]` f16 (or f32 for f32/bf16 sources); zeros
/// `[n][groups]` bytes; scales and zeros padded with zero bytes to a multiple of 4.
///
/// Sizes from `q4vk_matrix_pack_size`; larger buffers are accepted (only the prefix is
/// written), smaller refused (`BUFFER_TOO_SMALL`). `zeros` may be NULL with `zeros_bytes`
/// 0 when symmetric. Statuses as `q4vk_matrix_create`'s CPU part: `NULL_POINTER`,
/// `INVALID_ARGUMENT` (bad desc, overlapping buffers, zero point > 15), `BUFFER_TOO_SMALL`,
/// `NON_FINITE`, `UNSUPPORTED` (as `q4vk_matrix_pack_size`). Nothing is written on error.
/// Uses all cores (FLOAT, PADDLE); thread-safe.
///
/// # Safety
/// `desc` NULL or valid with its data pointers valid for their sizes; each output NULL or
/// writable for its stated bytes.
#[no_mangle]
pub unsafe extern "C" fn q4vk_matrix_pack(
    desc: *const q4vk_matrix_desc,
    weights: *mut c_void,
    weights_bytes: usize,
    scales: *mut c_void,
    scales_bytes: usize,
    zeros: *mut c_void,
    zeros_bytes: usize,
) -> q4vk_status {
    guard("q4vk_matrix_pack", || {
        // SAFETY: NULL or readable for its `struct_size`, g_idx for its size (contract).
        let (d, shape) = unsafe { pack_desc(desc, false) }?;
        let none = std::ptr::null_mut();
        let outs = [
            (weights, weights_bytes, "weights"),
            (scales, scales_bytes, "scales"),
            (zeros, zeros_bytes, "zeros"),
            (none, 0, "offsets"),
            (none, 0, "k_order"),
        ];
        // SAFETY: the desc's data readable, the outputs writable for their sizes (contract).
        unsafe { pack(&d, &shape, outs) }
    })
}

/// Writes the extended device layout of the matrix `desc` describes, any source
/// `q4vk_matrix_create` takes, for the extended kernel (`Q4VK_KERNEL_EXPORT_EXTENDED`):
/// `weights` → binding 0, `scales` → 1, `zeros` → 2 (as `q4vk_matrix_pack` writes them),
/// `offsets` → 5, `k_order` → 6:
///
/// * `offsets` (GGUF Q4_1 and Q4_K): f32 `[n][groups]`, `w = scale·u + offset` (Q4_1: its
///   f16 minimum `m`; Q4_K: `−dmin·m`, exact in f32); such matrices have no zero points
///   (`zeros_bytes` 0) and their codes are unsigned (u, not u − 8);
/// * `k_order` (GPTQ act-order): u32 `[k]`, the input feature of each column: the weights,
///   scales and zeros are stored with each group's inputs contiguous (column j of the
///   weights multiplies `x[k_order[j]]`).
///
/// Sizes from `q4vk_matrix_pack_extended_size`; an output whose size is 0 may be NULL with 0
/// bytes; larger buffers are accepted (only the prefix is written), smaller refused
/// (`BUFFER_TOO_SMALL`). Statuses: `NULL_POINTER`, `INVALID_ARGUMENT` (bad desc or `g_idx`,
/// overlapping buffers, zero point > 15), `BUFFER_TOO_SMALL` (an input or output),
/// `NON_FINITE` (NaN/Inf weights, scales or minima), `UNSUPPORTED` (groups the device layout
/// does not index), `OUT_OF_HOST_MEMORY`. Nothing is written on error. Thread-safe.
///
/// # Safety
/// `desc` NULL or valid with its data pointers valid for their sizes; each output NULL or
/// writable for its stated bytes.
#[no_mangle]
// Five (pointer, bytes) outputs: the C ABI's convention of a length after every buffer.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn q4vk_matrix_pack_extended(
    desc: *const q4vk_matrix_desc,
    weights: *mut c_void,
    weights_bytes: usize,
    scales: *mut c_void,
    scales_bytes: usize,
    zeros: *mut c_void,
    zeros_bytes: usize,
    offsets: *mut c_void,
    offsets_bytes: usize,
    k_order: *mut c_void,
    k_order_bytes: usize,
) -> q4vk_status {
    guard("q4vk_matrix_pack_extended", || {
        // SAFETY: NULL or readable for its `struct_size`, g_idx for its size (contract).
        let (d, shape) = unsafe { pack_desc(desc, true) }?;
        let outs = [
            (weights, weights_bytes, "weights"),
            (scales, scales_bytes, "scales"),
            (zeros, zeros_bytes, "zeros"),
            (offsets, offsets_bytes, "offsets"),
            (k_order, k_order_bytes, "k_order"),
        ];
        // SAFETY: the desc's data readable, the outputs writable for their sizes (contract).
        unsafe { pack(&d, &shape, outs) }
    })
}
