//! GEMV: synchronous from host memory, or recorded into the host's command buffer.

use super::backend::{Backend, Matrix};
use super::byte_counts::{ByteCount, ByteCountRule};
use super::context::q4vk_context;
use super::matrix::q4vk_matrix;
use super::panic::guard;
use super::ptr::{
    check_disjoint, copy_c_string, handle, in_bytes, in_slice, out_slice, read_struct, require,
    write_prefix, VersionedStruct,
};
use super::status::q4vk_status;
use crate::error::{invalid, Error, Result};
use crate::quant::dtype::Dtype;
use crate::quant::q4::Q4Shape;
use crate::size;
use crate::vk::context::Context;
use crate::vk::gemv::{
    self, check_m, BufferRange, Epilogue, EpilogueOperands, GateActivation, GemvParams, HostX,
};
use crate::vk::matrix::DeviceMatrix;
use ash::vk::{self, Handle};
use std::ffi::c_void;

/// A range of a `VkBuffer` (handle as `uint64_t`). The buffer needs
/// `VK_BUFFER_USAGE_STORAGE_BUFFER_BIT`; `offset` must be a multiple of the device's
/// `minStorageBufferOffsetAlignment`; `range` is the bytes available from `offset` (not
/// `VK_WHOLE_SIZE`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct q4vk_buffer_ref {
    /// `VkBuffer`.
    pub buffer: u64,
    /// Byte offset.
    pub offset: u64,
    /// Bytes from `offset`.
    pub range: u64,
}

/// Descriptor sets in the ring `q4vk_cmd_gemv` and `q4vk_gemv` (and `q4vk_context_tune`'s
/// GEMVs) write x and y into on a device without `VK_KHR_push_descriptor` (see
/// `q4vk_cmd_gemv`).
pub const Q4VK_CMD_GEMV_SET_RING: u32 = 4096;

/// x holds f16 values (else f32). Needs nothing from the device (the kernels unpack f16
/// pairs from 32-bit words). Error bound: as f32 relative to the f16 inputs.
pub const Q4VK_GEMV_F16_ACTIVATIONS: u32 = 0x1;

/// Opt-in, less exact: f32 activations may be rounded to f16 where that makes the call
/// faster. Today that is the tensor-core GEMM at m > 8 (tensor-core matrices) given a
/// workspace (`q4vk_gemv_workspace_size` with this flag; at m ≤ 8 the flag changes
/// nothing): its pre-pass rounds `2^-e x` per block of up to 128 k to f16 (the block's largest |x| scaled into [2^14, 2^15], so no
/// value overflows or flushes for being far from 1), and the GEMM runs as with f16
/// activations, on one f16 column per token instead of exact f32 x's two (faster:
/// bench/RESULTS.md). The result is then that of x rounded
/// (relative error up to 2^-11 per element; measured ‖y − ref‖/‖ref‖: bench/RESULTS.md)
/// instead of fp32-accurate. Everywhere else (other kernels, no workspace, f16 x) the flag
/// changes nothing.
pub const Q4VK_GEMV_ROUND_X_TO_F16: u32 = 0x2;

/// For `q4vk_cmd_gemv` with a workspace: the workspace already holds what this call's
/// pre-pass would write, so the call records the kernel on it without the pre-pass and its
/// barriers (the tensor-core GEMM in K slices still records a barrier before it and its
/// adding kernel after, see `q4vk_cmd_gemv`). For matrices that share x (Q, K and V; gate and up): the first
/// call runs the pre-pass, the others pass this flag and skip its cost. The caller
/// guarantees that an earlier `q4vk_cmd_gemv` without this flag wrote the workspace from
/// the same x (unchanged since, same m, row stride and other flags but the epilogue's and
/// `Q4VK_GEMV_F16_OUTPUT`, which the pre-pass does not read) for a matrix whose
/// `q4vk_gemv_workspace_key` equals this matrix's, and that its recording is ordered before
/// this call's kernel (earlier in the same command buffer needs nothing more: that call's
/// barrier after its pre-pass covers every later compute read), and that nothing wrote the
/// workspace since but q4vk's calls (K slices write their sums past the pre-pass's bytes).
/// Each call needs its own `q4vk_gemv_workspace_size`, which may differ between matrices
/// with equal keys (K slices add sums sized by n); a call given a workspace that holds the
/// pre-pass's bytes but not its K slices' sums runs without slices. Where the call has no pre-pass (a key of 0) or no workspace is given,
/// the flag changes nothing. Not checkable by q4vk: a workspace that does not hold that
/// output gives wrong results (never a fault: every read stays within the workspace).
pub const Q4VK_GEMV_REUSE_WORKSPACE: u32 = 0x4;

/// y is f16 (IEEE binary16, rounded from the f32 result) instead of f32, and so are the
/// epilogue's gate and residual: y needs `((m-1)·y_row_stride + n)` f16 values, rounded up
/// to 4 bytes. Elements between rows of y keep their bits, also where one shares a 32-bit
/// word with an element of y (each element is written by clearing and setting its half of
/// the word atomically). Needs nothing from the device. `q4vk_cmd_gemv` and bindings only.
pub const Q4VK_GEMV_F16_OUTPUT: u32 = 0x8;

/// Epilogue: `args->bias`, n values (f32, or f16 with `Q4VK_GEMV_BIAS_F16`), is added to
/// every row: `y[t][i] = (W x)[t][i] + bias[i]`. The epilogue runs in the kernel that
/// writes y, in this order: bias, gate, residual, then y's rounding to f16 where
/// `Q4VK_GEMV_F16_OUTPUT` asks for it. `q4vk_gemv_host` applies the same epilogue on the
/// host after the product (on CPU contexts too).
pub const Q4VK_GEMV_BIAS: u32 = 0x10;

/// With `Q4VK_GEMV_BIAS`: the bias is f16 (n values, rounded up to 4 bytes).
pub const Q4VK_GEMV_BIAS_F16: u32 = 0x20;

/// Epilogue: `args->residual` (y's shape, row stride and type) is added last:
/// `y[t][i] = … + residual[t][i]`. The residual may be y itself (the same buffer and
/// offset: `y += W x`), else it must not overlap y. Not with a gate (`UNSUPPORTED`: they
/// share a binding).
pub const Q4VK_GEMV_RESIDUAL: u32 = 0x40;

/// Epilogue: the sum (with its bias) is multiplied by `silu(g) = g / (1 + e^-g)` of
/// `args->gate` (y's shape, row stride and type): with the gate projection's output as
/// `gate`, the up projection's call writes SwiGLU's `silu(x·Wg) ⊙ (x·Wu)`. Not with
/// `Q4VK_GEMV_GELU_GATE`, nor `Q4VK_GEMV_RESIDUAL`.
pub const Q4VK_GEMV_SILU_GATE: u32 = 0x80;

/// Epilogue: as `Q4VK_GEMV_SILU_GATE` with GELU in its tanh form (GeGLU):
/// `gelu(g) = 0.5·g·(1 + tanh(sqrt(2/π)·(g + 0.044715·g³)))`.
pub const Q4VK_GEMV_GELU_GATE: u32 = 0x100;

/// Opt-in, less exact: f32 or f16 activations may be rounded to one signed byte per
/// element where that makes the call faster — the form llama.cpp's integer-dot kernels use
/// (its `q8_1`). Today that is the integer dot-product GEMV given a workspace, on contexts
/// that run it (`Q4VK_CONTEXT_NO_INTDOT` not set, a device reporting packed signed 8-bit
/// dot products accelerated): on SIMT matrices (not the tensor-core layout) where the
/// device's tuning row says it pays with its rounding pass (on larger matrices), and on
/// GGUF blocks (`Q4VK_GEMV_KERNEL_BLOCKS_GEMV`) where their GEMV runs and the row says it
/// pays (at m = 1 on larger matrices, at m ≥ 2 on every one), their codes as
/// the f32 decode's integers (Q5_0's and Q6_K's less their offset; IQ4's table values, E2M1
/// values doubled) times q, 8 packed dot products per 32 weights and 8 more per 32 columns
/// of each row of x for the types with minima or offsets; `q4vk_gemv_plan` then names
/// `Q4VK_GEMV_PREPASS_BYTES`. Its
/// pre-pass writes, per 32 columns of each row of x, the scale `d = a / 127` (`a` their
/// largest |x|) and `q = round(127·x / a)`, and the kernel sums `s·d·Σ(u − z)·q` in exact
/// integers, 8 packed dot products per 32 weights where the exact digits take 24. The
/// result is then that of x rounded (each element within about `d / 2` of x: `|y − ref|`
/// up to `Σ |w|·d / 2` per output; measured ‖y − ref‖/‖ref‖: bench/RESULTS.md) instead of
/// fp32-accurate; a block with an infinite or NaN element gives a non-finite result in its
/// row of y (NaN where the driver keeps infinities and NaNs), as the exact digits do. On
/// a CPU context (`q4vk_gemv_host`) it rounds x the same way, per 32 columns (`q =
/// round(127·x / a)` in f64, ties to even), for the GEMV on GGUF blocks that runs as
/// integer dot products (x86-64 with AVX2, aarch64 with the dot product; up to 4 rows of
/// x, 8 on the K-quants, IQ4_XS and MXFP4): one product per weight where the exact digits
/// take three; x with an infinite or NaN element keeps the f32 decode. Everywhere else (other kernels, no workspace, other CPU calls)
/// the flag changes nothing. With `Q4VK_GEMV_ROUND_X_TO_F16` each applies where its kernel runs.
pub const Q4VK_GEMV_ROUND_X_TO_INT8: u32 = 0x200;

/// Arguments of `q4vk_cmd_gemv`. Initialize with `q4vk_gemv_args_default`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct q4vk_gemv_args {
    /// `sizeof(q4vk_gemv_args)`; smaller than v0 is refused, larger accepted.
    pub struct_size: u32,
    /// `Q4VK_GEMV_*` bits; others are refused.
    pub flags: u32,
    /// Activation rows, ≥ 1; default 1. m = 1..8 run the GEMV kernels, larger m the GEMM
    /// (same matrix, no extra memory), except:
    /// - SIMT matrices (no tensor-core path) run the GEMV past m = 8 in passes of up to 8
    ///   rows, each reading the weights again, where that measured faster than the GEMM
    ///   (bench/RESULTS.md): the integer dot-product GEMV (a call with a workspace on a
    ///   device that reports 8-bit dot products accelerated, on matrices where it pays, see
    ///   `Q4VK_CONTEXT_NO_INTDOT`) up to m = 40 (64 on matrices with n ≤ 8192 and K ≥ 16384), the f32 GEMV up to
    ///   m = 9 on GPUs and m = 11 on CPU implementations (lavapipe);
    /// - tensor-core matrices run the GEMM at m = 8 on tall ones and, when the call has a
    ///   workspace, at m = 8 on any; for f16 activations m = 3..7 on matrices of at least
    ///   2^26 weights, m = 4..7 on at least 2^25, m = 5..7 on smaller ones; for f32
    ///   activations m = 5..7 on at least 2^26 weights, m = 7 on at least 2^25.
    ///
    /// Limits: x and y each within 2^32 elements and the device's `maxStorageBufferRange`
    /// (else `Q4VK_ERROR_UNSUPPORTED`).
    pub m: u32,
    /// Must be 0.
    pub reserved0: u32,
    /// Buffer holding `x[m][k]` (f32, or f16 with `Q4VK_GEMV_F16_ACTIVATIONS`); needs at
    /// least `((m-1)·x_row_stride + k)` elements (f16: rounded up to 4 bytes). Subnormal
    /// f32 activations (|x| < 2^-126) may count as 0 where the device flushes subnormals in
    /// float arithmetic, which Vulkan leaves to it (the H200's driver does in the
    /// tensor-core kernels); the integer dot-product GEMV keeps them (on x rounded to
    /// bytes, `Q4VK_GEMV_ROUND_X_TO_INT8`, a block whose scale is subnormal may count as
    /// 0 there too).
    pub x: q4vk_buffer_ref,
    /// Buffer receiving `y[m][n]` (f32, or f16 with `Q4VK_GEMV_F16_OUTPUT`); needs
    /// `((m-1)·y_row_stride + n)·4` bytes (f16: half, rounded up to 4 bytes); must not
    /// overlap x. Elements between rows are not written.
    pub y: q4vk_buffer_ref,
    /// Elements between rows of x; 0 = k.
    pub x_row_stride: u64,
    /// Elements between rows of y; 0 = n.
    pub y_row_stride: u64,
    /// Optional (appended after `y_row_stride`; older callers read as null): device memory
    /// the call may use for a pre-pass over x, at least `q4vk_gemv_workspace_size` bytes,
    /// apart from x and y. With it, where that size is not 0, `q4vk_cmd_gemv` records the
    /// pre-pass (x in 8-bit digits for the integer dot-product GEMV, or rounded to bytes
    /// with `Q4VK_GEMV_ROUND_X_TO_INT8`, or x as the
    /// tensor-core GEMM's f16 fragments where that GEMM runs: f16 activations as they are,
    /// f32 ones as two exact f16 parts, or rounded to f16 with `Q4VK_GEMV_ROUND_X_TO_F16`),
    /// a barrier, then the kernel on the workspace; without it, the kernels that read x
    /// themselves (slower; as accurate, and exact f32 even with
    /// `Q4VK_GEMV_ROUND_X_TO_F16`). Its contents before and after the call mean nothing;
    /// command buffers executing at the same time need distinct workspaces.
    pub workspace: q4vk_buffer_ref,
    /// Optional (appended after `workspace`; older callers read as null): with
    /// `Q4VK_GEMV_BIAS`, n values added to every row of y (f32, f16 with
    /// `Q4VK_GEMV_BIAS_F16`); else `buffer` must be 0. Must not overlap y.
    pub bias: q4vk_buffer_ref,
    /// Optional (appended): with `Q4VK_GEMV_RESIDUAL`, values added to y last, laid out as
    /// y (`y_row_stride` apart, y's type and extent); y itself for `y += W x`, else apart
    /// from y. Without the flag `buffer` must be 0.
    pub residual: q4vk_buffer_ref,
    /// Optional (appended): with `Q4VK_GEMV_SILU_GATE` or `Q4VK_GEMV_GELU_GATE`, the values
    /// whose activation multiplies the sums, laid out as y; must not overlap y. Without
    /// them `buffer` must be 0.
    pub gate: q4vk_buffer_ref,
}

// SAFETY: repr(C), starts with u32 struct_size; integers only.
unsafe impl VersionedStruct for q4vk_gemv_args {
    // The v0 args ended at `y_row_stride`; `workspace` was appended.
    const V0_SIZE: usize = std::mem::offset_of!(q4vk_gemv_args, workspace);
    const NAME: &'static str = "q4vk_gemv_args";
}

/// Fills `args` with the defaults: no flags, m = 1, null buffers (no workspace), strides 0
/// (packed). NULL is ignored.
///
/// # Safety
/// `args` must be NULL or point to a writable `q4vk_gemv_args`.
#[no_mangle]
pub unsafe extern "C" fn q4vk_gemv_args_default(args: *mut q4vk_gemv_args) {
    let empty = q4vk_buffer_ref {
        buffer: 0,
        offset: 0,
        range: 0,
    };
    let value = q4vk_gemv_args {
        struct_size: std::mem::size_of::<q4vk_gemv_args>() as u32,
        flags: 0,
        m: 1,
        reserved0: 0,
        x: empty,
        y: empty,
        x_row_stride: 0,
        y_row_stride: 0,
        workspace: empty,
        bias: empty,
        residual: empty,
        gate: empty,
    };
    let _ = guard("q4vk_gemv_args_default", || {
        // SAFETY: `args` is NULL (skipped) or writable (caller's contract).
        unsafe { super::ptr::write_out(args, value, "args") }.or(Ok(()))
    });
}

/// A context and a matrix that work together.
enum Pair<'a> {
    /// A Vulkan context and a matrix of its `VkDevice`.
    Vulkan(&'a Context, &'a DeviceMatrix),
    /// A CPU context and a host matrix.
    Cpu(
        &'a crate::cpu::context::CpuContext,
        &'a crate::cpu::matrix::CpuMatrix,
    ),
}

impl Pair<'_> {
    /// The matrix's shape.
    fn shape(&self) -> crate::quant::q4::Q4Shape {
        match self {
            Pair::Vulkan(_, mat) => mat.form.shape,
            Pair::Cpu(_, mat) => mat.shape,
        }
    }
}

/// The context and matrix behind two handles, checked to be of one kind and, on Vulkan,
/// to share a `VkDevice`, and the context's rule for byte counts.
///
/// # Safety
/// Each handle must be NULL or live for `'a`.
unsafe fn handles<'a>(
    ctx: *mut q4vk_context,
    mat: *const q4vk_matrix,
) -> Result<(Pair<'a>, ByteCountRule)> {
    // SAFETY: NULL or live (caller's contract).
    let context = unsafe { handle(ctx, "ctx") }?;
    let rule = context.byte_counts;
    // SAFETY: as above.
    let mat = &unsafe { handle(mat, "mat") }?.0;
    let (ctx, mat) = match (&context.backend, mat) {
        (Backend::Vulkan(c), Matrix::Device(m)) => (c, m),
        (Backend::Cpu(c), Matrix::Cpu(m)) => return Ok((Pair::Cpu(c, m), rule)),
        (Backend::Cpu(_), Matrix::Device(_)) => {
            return Err(invalid!(
                "mat was created on a Vulkan context and ctx is a CPU context; create the matrix on a CPU context"
            ))
        }
        (Backend::Vulkan(_), Matrix::Cpu(_)) => {
            return Err(invalid!(
                "mat was created on a CPU context and ctx is a Vulkan context; create the matrix on ctx"
            ))
        }
    };
    if !mat.same_device(ctx) {
        return Err(invalid!(
            "mat was created on another VkDevice than ctx's; a matrix works with every context of the VkDevice it was created on"
        ));
    }
    Ok((Pair::Vulkan(ctx, mat), rule))
}

/// The Vulkan context and matrix behind two handles, for `call` (`q4vk_cmd_gemv` or its
/// workspace query): a CPU context is `Unsupported`.
///
/// # Safety
/// As [`handles`].
unsafe fn vulkan_pair<'a>(
    ctx: *mut q4vk_context,
    mat: *const q4vk_matrix,
    call: &str,
) -> Result<(&'a Context, &'a DeviceMatrix, ByteCountRule)> {
    // SAFETY: the caller's contract.
    match unsafe { handles(ctx, mat) }? {
        (Pair::Vulkan(ctx, mat), rule) => Ok((ctx, mat, rule)),
        (Pair::Cpu(ctx, _), _) => Err(Error::Unsupported(format!(
            "{call} needs a Vulkan context (q4vk_cmd_gemv records into a Vulkan command buffer); ctx runs on the CPU ({}): use q4vk_gemv",
            ctx.device_name()
        ))),
    }
}

/// The epilogue `flags` (`Q4VK_GEMV_*`, checked by [`check_gemv_flags`]) ask for (whether
/// a residual is y itself is the operands' to say: `GemvParams::with_operands`).
fn epilogue_of(flags: u32) -> Epilogue {
    let has = |bit: u32| flags & bit != 0;
    Epilogue {
        bias_f16: has(Q4VK_GEMV_BIAS).then_some(has(Q4VK_GEMV_BIAS_F16)),
        gate: match (has(Q4VK_GEMV_SILU_GATE), has(Q4VK_GEMV_GELU_GATE)) {
            (true, _) => Some(GateActivation::Silu),
            (false, true) => Some(GateActivation::GeluTanh),
            (false, false) => None,
        },
        residual: has(Q4VK_GEMV_RESIDUAL),
        residual_is_y: false,
        y_f16: has(Q4VK_GEMV_F16_OUTPUT),
    }
}

/// The `Q4VK_GEMV_*` bits of the epilogue and y's type.
const EPILOGUE_FLAGS: u32 = Q4VK_GEMV_F16_OUTPUT
    | Q4VK_GEMV_BIAS
    | Q4VK_GEMV_BIAS_F16
    | Q4VK_GEMV_RESIDUAL
    | Q4VK_GEMV_SILU_GATE
    | Q4VK_GEMV_GELU_GATE;

/// The parameters of a `q4vk_cmd_gemv` with `m` rows and `flags` (`Q4VK_GEMV_*`, checked) on
/// `mat`, x and y rows `strides` elements apart (0: dense). x is in input order: the
/// kernels gather it through a column order from the host's buffer.
fn gemv_params(
    mat: &DeviceMatrix,
    m: u32,
    flags: u32,
    (x_stride, y_stride): (u64, u64),
) -> GemvParams {
    let dense = |stride: u64, len: usize| if stride == 0 { len as u64 } else { stride };
    GemvParams {
        m,
        x_f16: flags & Q4VK_GEMV_F16_ACTIVATIONS != 0,
        x_stride: dense(x_stride, mat.form.shape.k),
        y_stride: dense(y_stride, mat.form.shape.n),
        x_gathered: false,
        x_round_f16: flags & Q4VK_GEMV_ROUND_X_TO_F16 != 0,
        x_round_int8: flags & Q4VK_GEMV_ROUND_X_TO_INT8 != 0,
        workspace_filled: flags & Q4VK_GEMV_REUSE_WORKSPACE != 0,
        epilogue: epilogue_of(flags),
    }
}

/// Refuses `Q4VK_GEMV_*` bits this library does not know and combinations that mean
/// nothing (`what`: the argument's name).
fn check_gemv_flags(flags: u32, what: &str) -> Result<()> {
    let known = Q4VK_GEMV_F16_ACTIVATIONS
        | Q4VK_GEMV_ROUND_X_TO_F16
        | Q4VK_GEMV_ROUND_X_TO_INT8
        | Q4VK_GEMV_REUSE_WORKSPACE
        | EPILOGUE_FLAGS;
    let unknown = flags & !known;
    if unknown != 0 {
        return Err(invalid!("{what} has unknown bits {unknown:#x}"));
    }
    if flags & Q4VK_GEMV_BIAS_F16 != 0 && flags & Q4VK_GEMV_BIAS == 0 {
        return Err(invalid!(
            "{what} has Q4VK_GEMV_BIAS_F16 without Q4VK_GEMV_BIAS"
        ));
    }
    if flags & Q4VK_GEMV_SILU_GATE != 0 && flags & Q4VK_GEMV_GELU_GATE != 0 {
        return Err(invalid!(
            "{what} has both Q4VK_GEMV_SILU_GATE and Q4VK_GEMV_GELU_GATE; a call has one gate"
        ));
    }
    let gated = flags & (Q4VK_GEMV_SILU_GATE | Q4VK_GEMV_GELU_GATE) != 0;
    if gated && flags & Q4VK_GEMV_RESIDUAL != 0 {
        return Err(Error::Unsupported(format!(
            "{what} has a gate and Q4VK_GEMV_RESIDUAL: a call takes one or the other (they share a binding, which keeps the kernels within 8 storage buffers per stage); add the residual in the next call"
        )));
    }
    Ok(())
}

/// Refuses `Q4VK_GEMV_F16_OUTPUT` on a call whose y is f32 (`call`: who writes it).
fn refuse_f16_output(flags: u32, what: &str, call: &str) -> Result<()> {
    if flags & Q4VK_GEMV_F16_OUTPUT != 0 {
        return Err(Error::Unsupported(format!(
            "{what} has Q4VK_GEMV_F16_OUTPUT: {call} writes f32 y (f16 y is written by q4vk_cmd_gemv and bindings, on a Vulkan context)"
        )));
    }
    Ok(())
}

/// `y[m][n] = sum_k x[m][k] · W[n][k]` with host memory, synchronous: copies x to a
/// staging buffer reused across calls (grown, never shrunk; no allocation once it is large
/// enough), runs on q4vk's queue, waits, copies y back. `x_len`/`y_len` are element counts
/// (≥ m·k, ≥ m·n); only the first m·n elements of y are written, and only on success. The
/// call is checked before the staging buffers grow: a refused call leaves them as they
/// were. Uses one set of the `Q4VK_CMD_GEMV_SET_RING` ring, two when the call has a
/// pre-pass (see `q4vk_cmd_gemv`); holds a device-local workspace for the pre-passes too
/// (grown and reused like the staging).
///
/// Any m ≥ 1 (see `q4vk_gemv_args.m`): m = 1..8 run the GEMV kernels (on SIMT matrices
/// also up to m = 9, 11 or 40 in passes of 8 rows, as `q4vk_gemv_args.m` says), larger m
/// (prefill) a tiled GEMM (also, on tensor-core matrices for finite x, on this call's own
/// workspace: m = 8, and m = 3..7 by size and activation type as `q4vk_gemv_args.m` says)
/// that reads the same matrix (no dequantized copy); the result is the same fp32-accurate
/// sum either way.
///
/// On a CPU context: runs on up to `cpu_threads` threads started and joined by the call
/// (fewer for small matrices), with the SIMD kernel the CPU supports; the only extra
/// status is `OUT_OF_HOST_MEMORY` (a copy of x reordered for the kernel; for m > 1, a
/// scratch of m·n floats).
///
/// Statuses: `NULL_POINTER`, `INVALID_ARGUMENT` (m = 0, m·k or m·n values whose count or
/// bytes overflow `size_t`, overlapping x and y, a matrix of another `VkDevice`, on a
/// `Q4VK_CONTEXT_STRICT_SIZES` context an `x_len` or `y_len` other than m·k or m·n),
/// `UNSUPPORTED` (a context without a queue; m·k or m·n floats
/// beyond the device's `maxStorageBufferRange`; a matrix made by a tensor-core context used
/// with a context that does not run that kernel), `BUFFER_TOO_SMALL`, `VULKAN`,
/// `DEVICE_LOST` (also every call after a failed wait for q4vk's fence),
/// `OUT_OF_*_MEMORY`. Thread-safe: calls on one context are
/// serialized.
///
/// # Safety
/// `ctx`, `mat` NULL or live; `x` NULL or readable for `x_len` floats; `y` NULL or
/// writable for `y_len` floats.
#[no_mangle]
pub unsafe extern "C" fn q4vk_gemv(
    ctx: *mut q4vk_context,
    mat: *const q4vk_matrix,
    x: *const f32,
    x_len: usize,
    y: *mut f32,
    y_len: usize,
    m: u32,
) -> q4vk_status {
    guard("q4vk_gemv", || {
        // SAFETY: NULL or live handles (contract).
        let (pair, rule) = unsafe { handles(ctx, mat) }?;
        check_m(m)?;
        require(x, "x")?;
        require(y, "y")?;
        let (xn, yn) = dense_extent(m, &pair.shape(), 4)?;
        // Element counts (check_size's message says bytes).
        for (arg, given, needed) in [("x_len", x_len, xn), ("y_len", y_len, yn)] {
            if given < needed {
                return Err(Error::BufferTooSmall(format!(
                    "{arg} is {given} floats, {needed} needed (m = {m})"
                )));
            }
        }
        check_disjoint(&[("y", y as usize, 4 * yn)], &[("x", x as usize, 4 * xn)])?;
        rule.refuse_inexact(&[
            ByteCount::floats("x_len", x_len, xn),
            ByteCount::floats("y_len", y_len, yn),
        ])?;
        // SAFETY: x readable for x_len ≥ xn floats, y writable for y_len ≥ yn, disjoint
        // (checked above; contract).
        let (xs, ys) = unsafe { (in_slice(x, xn, "x")?, out_slice(y, yn, "y")?) };
        match pair {
            Pair::Vulkan(ctx, mat) => gemv::gemv_host(ctx, mat, xs, ys, m),
            Pair::Cpu(ctx, mat) => {
                crate::cpu::gemv::gemv(mat, xs, ys, m as usize, ctx.threads, ctx.isa)
            }
        }
    })
}

/// Elements of x and y (`m·k`, `m·n`) of a call on dense rows of `shape`, with x's
/// `x_element_bytes` per value: every product, bytes included, checked so that no wrapped
/// count passes a length check (`InvalidArgument` naming the product).
fn dense_extent(m: u32, shape: &Q4Shape, x_element_bytes: usize) -> Result<(usize, usize)> {
    let m = m as usize;
    let xn = size::product("m * k", &[m, shape.k])?;
    let yn = size::product("m * n", &[m, shape.n])?;
    size::product("m * k * (bytes per x value)", &[xn, x_element_bytes])?;
    size::product("m * n * 4 (bytes of y)", &[yn, 4])?;
    Ok((xn, yn))
}

/// Arguments of `q4vk_gemv_host`. Initialize with `q4vk_gemv_host_args_default`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct q4vk_gemv_host_args {
    /// `sizeof(q4vk_gemv_host_args)`; smaller is refused, larger accepted.
    pub struct_size: u32,
    /// `Q4VK_GEMV_F16_ACTIVATIONS`, `Q4VK_GEMV_ROUND_X_TO_F16` and
    /// `Q4VK_GEMV_ROUND_X_TO_INT8`; other bits are refused,
    /// `Q4VK_GEMV_REUSE_WORKSPACE` too (the call fills its own workspace).
    pub flags: u32,
    /// Activation rows, ≥ 1; default 1 (which kernel runs: see `q4vk_gemv`).
    pub m: u32,
    /// Must be 0.
    pub reserved0: u32,
    /// x: m dense rows of k values, f32, or with `Q4VK_GEMV_F16_ACTIVATIONS` f16 (IEEE
    /// binary16 bit patterns), in the host's byte order; any alignment.
    pub x: *const c_void,
    /// Bytes readable at `x`: at least 4·m·k (f32) or 2·m·k (f16).
    pub x_bytes: usize,
    /// y: m dense rows of n floats; only the first m·n are written, and only on success.
    pub y: *mut f32,
    /// Floats writable at `y`: at least m·n.
    pub y_len: usize,
    /// Optional (appended after `y_len`; older callers read as NULL): with
    /// `Q4VK_GEMV_BIAS`, n values added to every row of y (f32, or f16 with
    /// `Q4VK_GEMV_BIAS_F16`), in the host's byte order, any alignment; else NULL.
    pub bias: *const c_void,
    /// Bytes readable at `bias`: at least 4·n (f16: 2·n).
    pub bias_bytes: usize,
    /// Optional (appended): with `Q4VK_GEMV_RESIDUAL`, m·n f32 values added to y last, any
    /// alignment; `y` itself for `y += W x`, else apart from y; else NULL.
    pub residual: *const c_void,
    /// Bytes readable at `residual`: at least 4·m·n.
    pub residual_bytes: usize,
    /// Optional (appended): with `Q4VK_GEMV_SILU_GATE` or `Q4VK_GEMV_GELU_GATE`, m·n f32
    /// values whose activation multiplies the sums, any alignment, apart from y; else NULL.
    pub gate: *const c_void,
    /// Bytes readable at `gate`: at least 4·m·n.
    pub gate_bytes: usize,
}

// SAFETY: repr(C), starts with u32 struct_size; integers and raw pointers only.
unsafe impl VersionedStruct for q4vk_gemv_host_args {
    // The v0 args ended at `y_len`; the epilogue's operands were appended.
    const V0_SIZE: usize = std::mem::offset_of!(q4vk_gemv_host_args, bias);
    const NAME: &'static str = "q4vk_gemv_host_args";
}

/// Fills `args` with the defaults: no flags, m = 1, NULL x and y, lengths 0. NULL is
/// ignored.
///
/// # Safety
/// `args` must be NULL or point to a writable `q4vk_gemv_host_args`.
#[no_mangle]
pub unsafe extern "C" fn q4vk_gemv_host_args_default(args: *mut q4vk_gemv_host_args) {
    let value = q4vk_gemv_host_args {
        struct_size: std::mem::size_of::<q4vk_gemv_host_args>() as u32,
        flags: 0,
        m: 1,
        reserved0: 0,
        x: std::ptr::null(),
        x_bytes: 0,
        y: std::ptr::null_mut(),
        y_len: 0,
        bias: std::ptr::null(),
        bias_bytes: 0,
        residual: std::ptr::null(),
        residual_bytes: 0,
        gate: std::ptr::null(),
        gate_bytes: 0,
    };
    let _ = guard("q4vk_gemv_host_args_default", || {
        // SAFETY: NULL or writable (contract).
        if let Some(a) = unsafe { args.as_mut() } {
            *a = value;
        }
        Ok(())
    });
}

/// `q4vk_gemv` with flags: `y[m][n] = sum_k x[m][k] · W[n][k]` with host memory,
/// synchronous, on f32 or f16 activations (`Q4VK_GEMV_F16_ACTIVATIONS`), f32 ones rounded
/// to f16 where that is faster if `Q4VK_GEMV_ROUND_X_TO_F16` allows it (the tensor-core
/// GEMM on this call's own workspace), f32 or f16 ones to bytes if
/// `Q4VK_GEMV_ROUND_X_TO_INT8` does (the integer dot-product GEMV on it; finite x only, as
/// the exact digits). Buffers, kernels, threading and statuses as
/// `q4vk_gemv` (finite f16 x also runs the tensor-core GEMM at m = 5..7 on every
/// tensor-core matrix, and at m = 4 or 3 on larger ones, see `q4vk_gemv_args.m`); f16 x is copied as it is (half the staging bytes of f32).
///
/// The epilogue (`Q4VK_GEMV_BIAS`, `Q4VK_GEMV_BIAS_F16`, `Q4VK_GEMV_RESIDUAL`,
/// `Q4VK_GEMV_SILU_GATE`, `Q4VK_GEMV_GELU_GATE` with `args->bias`, `->residual`, `->gate`)
/// runs on the host after the product, on both kinds of context, in the kernels' order and
/// f32 arithmetic; its operands are copied first (so a residual may be y itself). y is f32:
/// `Q4VK_GEMV_F16_OUTPUT` is `UNSUPPORTED` here.
///
/// On a CPU context: f16 x, or f32 x not 4-byte aligned, is copied as f32 values (f16
/// widened, exact) into a scratch of m·k floats (`OUT_OF_HOST_MEMORY` if it cannot be
/// allocated); `Q4VK_GEMV_ROUND_X_TO_F16` changes nothing, and `Q4VK_GEMV_ROUND_X_TO_INT8`
/// rounds x to bytes for the GEMV of a few rows on GGUF blocks where the CPU runs it as
/// integer dot products (see the flag).
///
/// Statuses: as `q4vk_gemv`, and `INVALID_ARGUMENT` for a `struct_size` smaller than the
/// first version's (which ended at `y_len`), unknown or refused flags, `reserved0` not 0,
/// an epilogue operand without its flag or overlapping y (a residual may be y exactly), or
/// on a `Q4VK_CONTEXT_STRICT_SIZES` context an `x_bytes` or `y_len` other than exact;
/// `NULL_POINTER` for an epilogue flag without its operand; `BUFFER_TOO_SMALL` for
/// `x_bytes`, `y_len` or an operand's bytes short of what the call reads;
/// `UNSUPPORTED` for `Q4VK_GEMV_F16_OUTPUT`.
///
/// # Safety
/// `ctx`, `mat` NULL or live; `args` NULL or readable for its `struct_size` bytes; `x`
/// NULL or readable for `x_bytes` bytes; `y` NULL or writable for `y_len` floats; `bias`,
/// `residual`, `gate` NULL or readable for their bytes.
#[no_mangle]
pub unsafe extern "C" fn q4vk_gemv_host(
    ctx: *mut q4vk_context,
    mat: *const q4vk_matrix,
    args: *const q4vk_gemv_host_args,
) -> q4vk_status {
    guard("q4vk_gemv_host", || {
        // SAFETY: NULL or live handles (contract).
        let (pair, rule) = unsafe { handles(ctx, mat) }?;
        // SAFETY: NULL or readable for struct_size (contract).
        let a = unsafe { read_struct(args, "args") }?;
        check_gemv_flags(a.flags, "args->flags")?;
        refuse_f16_output(a.flags, "args->flags", "q4vk_gemv_host")?;
        if a.flags & Q4VK_GEMV_REUSE_WORKSPACE != 0 {
            return Err(invalid!(
                "args->flags has Q4VK_GEMV_REUSE_WORKSPACE: q4vk_gemv_host fills its own workspace (the flag is for q4vk_cmd_gemv)"
            ));
        }
        if a.reserved0 != 0 {
            return Err(invalid!("args->reserved0 is {}, must be 0", a.reserved0));
        }
        let m = a.m;
        check_m(m)?;
        require(a.x, "args->x")?;
        require(a.y, "args->y")?;
        let f16 = a.flags & Q4VK_GEMV_F16_ACTIVATIONS != 0;
        let es = HostX::bytes_per_value(f16);
        let (xn, yn) = dense_extent(m, &pair.shape(), es)?;
        if a.x_bytes < es * xn {
            return Err(Error::BufferTooSmall(format!(
                "args->x_bytes is {}, {} needed ({xn} {} values, m = {m})",
                a.x_bytes,
                es * xn,
                if f16 { "f16" } else { "f32" }
            )));
        }
        if a.y_len < yn {
            return Err(Error::BufferTooSmall(format!(
                "args->y_len is {} floats, {yn} needed (m = {m})",
                a.y_len
            )));
        }
        check_disjoint(
            &[("args->y", a.y as usize, 4 * yn)],
            &[
                ("args->x", a.x as usize, es * xn),
                ("args->bias", a.bias as usize, a.bias_bytes),
                ("args->gate", a.gate as usize, a.gate_bytes),
            ],
        )?;
        let epi = epilogue_of(a.flags);
        // SAFETY: each operand NULL or readable for its bytes (contract).
        let ops = unsafe { host_operands(&a, &epi, pair.shape().n, yn) }?;
        let x_type = if f16 { Dtype::F16 } else { Dtype::F32 };
        let counts = [
            ByteCount::typed(
                "args->x_bytes",
                a.x_bytes as u64,
                (es * xn) as u64,
                (xn as u64, x_type),
            ),
            ByteCount::floats("args->y_len", a.y_len, yn),
        ];
        rule.refuse_inexact(&counts)?;
        // SAFETY: x readable for x_bytes ≥ es·xn bytes, y writable for y_len ≥ yn floats,
        // disjoint (checked above; contract).
        let (xb, ys) = unsafe {
            (
                in_bytes(a.x.cast::<u8>(), es * xn, "args->x")?,
                out_slice(a.y, yn, "args->y")?,
            )
        };
        let x = HostX { bytes: xb, f16 };
        let result = match pair {
            Pair::Vulkan(ctx, mat) => {
                let rounding = gemv::XRounding {
                    f16: a.flags & Q4VK_GEMV_ROUND_X_TO_F16 != 0,
                    int8: a.flags & Q4VK_GEMV_ROUND_X_TO_INT8 != 0,
                };
                gemv::gemv_host_with(ctx, mat, x, ys, m, rounding)
            }
            Pair::Cpu(ctx, mat) => {
                // The CPU kernels take aligned f32: x as it is where it is that, else a copy
                // (f16 widened, exact).
                let copy;
                let xs = match x.as_f32() {
                    Some(xs) => xs,
                    None => {
                        copy = crate::alloc::collect((0..xn).map(|i| x.value(i)), "x as f32")?;
                        &copy
                    }
                };
                let x_to_bytes = a.flags & Q4VK_GEMV_ROUND_X_TO_INT8 != 0;
                let run = (ctx.threads, ctx.isa);
                crate::cpu::gemv::gemv_rounding(mat, xs, ys, m as usize, run, x_to_bytes)
            }
        };
        if result.is_ok() {
            crate::epilogue::apply_on_host(ys, pair.shape().n, &epi, &ops);
            rule.warn_other_readings(&counts);
        }
        result
    })
}

/// The epilogue operands of a `q4vk_gemv_host` call as f32 values, checked against what
/// `epi` reads: each given exactly where its flag is set, of enough bytes (the bias `n`
/// values, the residual and the gate `yn`), a residual apart from y unless it is y.
///
/// # Safety
/// Each operand NULL or readable for its bytes.
unsafe fn host_operands(
    a: &q4vk_gemv_host_args,
    epi: &Epilogue,
    n: usize,
    yn: usize,
) -> Result<crate::epilogue::HostOperands> {
    let read = |name: &str,
                flag: &str,
                ptr: *const c_void,
                bytes: usize,
                want: Option<(usize, bool)>| {
        match (ptr.is_null(), want) {
            (true, None) => Ok(None),
            (false, None) => Err(invalid!(
                "args->{name} is set and args->flags lacks {flag}; set the flag or pass NULL"
            )),
            (true, Some(_)) => Err(Error::NullPointer(format!(
                "args->flags has {flag} and args->{name} is NULL"
            ))),
            (false, Some((values, f16))) => {
                let es = if f16 { 2 } else { 4 };
                let need = size::product(&format!("bytes of args->{name}"), &[values, es])?;
                if bytes < need {
                    return Err(Error::BufferTooSmall(format!(
                        "args->{name}_bytes is {bytes}, {need} needed"
                    )));
                }
                // SAFETY: non-NULL and readable for `bytes` ≥ `need` (the caller's contract).
                let raw = unsafe { in_bytes(ptr.cast::<u8>(), need, &format!("args->{name}")) }?;
                let value = |i: usize| match f16 {
                    true => half::f16::from_ne_bytes([raw[2 * i], raw[2 * i + 1]]).to_f32(),
                    false => f32::from_ne_bytes(raw[4 * i..4 * i + 4].try_into().expect("4 bytes")),
                };
                crate::alloc::collect((0..values).map(value), name).map(Some)
            }
        }
    };
    let residual_apart = a.residual.is_null() || a.residual == a.y as *const c_void;
    if !residual_apart {
        check_disjoint(
            &[("args->y", a.y as usize, 4 * yn)],
            &[("args->residual", a.residual as usize, a.residual_bytes)],
        )
        .map_err(|_| {
            invalid!(
                "args->residual overlaps args->y (a residual may be y itself, or apart from it)"
            )
        })?;
    }
    let gate_flag = "Q4VK_GEMV_SILU_GATE or Q4VK_GEMV_GELU_GATE";
    Ok(crate::epilogue::HostOperands {
        bias: read(
            "bias",
            "Q4VK_GEMV_BIAS",
            a.bias,
            a.bias_bytes,
            epi.bias_f16.map(|h| (n, h)),
        )?,
        residual: read(
            "residual",
            "Q4VK_GEMV_RESIDUAL",
            a.residual,
            a.residual_bytes,
            epi.residual.then_some((yn, false)),
        )?,
        gate: read(
            "gate",
            gate_flag,
            a.gate,
            a.gate_bytes,
            epi.gate.map(|_| (yn, false)),
        )?,
    })
}

/// Records `y = W·x` (as `q4vk_gemv`, any m ≥ 1), with the epilogue `args->flags` asks for
/// (`Q4VK_GEMV_BIAS`, `Q4VK_GEMV_SILU_GATE`, `Q4VK_GEMV_RESIDUAL`, `Q4VK_GEMV_F16_OUTPUT`
/// …), into the host's `command_buffer`
/// (`VkCommandBuffer`, in the recording state, of any queue family with compute, on the
/// context's device: matrix buffers are `VK_SHARING_MODE_CONCURRENT` over all of the
/// device's queue families when it has more than one, so no ownership transfer is needed).
/// `mat` may come from any context of the same `VkDevice` that runs the same kernel path
/// (a matrix made by a tensor-core context needs a tensor-core context: else
/// `UNSUPPORTED`). Nothing is recorded on error.
///
/// State it binds (and leaves bound; rebind your own afterwards): the compute pipeline
/// (`VK_PIPELINE_BIND_POINT_COMPUTE`); descriptor set 1 of q4vk's pipeline layout (x at
/// binding 0, y at binding 1, the epilogue's bias at 2 and its gate or residual at 3, x
/// standing in for those the call has none of: pushed with `vkCmdPushDescriptorSetKHR` when
/// `VK_KHR_push_descriptor` is enabled, otherwise the next set of a ring of
/// `Q4VK_CMD_GEMV_SET_RING` sets owned by the context, written by this call); per matrix
/// part, descriptor set 0 (owned by the matrix, immutable) and 48
/// bytes of compute push constants at offset 0; then `vkCmdDispatch` (one per matrix part,
/// more if a part exceeds the workgroup-count limits). Where the GEMV takes m > 8 (SIMT
/// matrices, see `q4vk_gemv_args.m`) it does so in passes of 8 rows, each binding its
/// pipeline and recording its own push constants and dispatches (set 1 is bound once).
///
/// With a workspace (`args->workspace`) where `q4vk_gemv_workspace_size` is not 0 (the
/// integer dot-product GEMV: SIMT matrices at the GEMV's m on a device that reports 8-bit
/// dot products accelerated, where it pays, see `Q4VK_CONTEXT_NO_INTDOT`; the tensor-core GEMM on x in fragments: tensor-core matrices at
/// m > 8, and at m ≤ 8 where the GEMM runs there, see `q4vk_gemv_args.m`): first a
/// `vkCmdPipelineBarrier` (global memory barrier) from
/// `VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT` / `VK_ACCESS_SHADER_READ_BIT |
/// VK_ACCESS_SHADER_WRITE_BIT` to the same stage / `VK_ACCESS_SHADER_WRITE_BIT`, so an
/// earlier call's GEMV in this command buffer has finished reading a workspace it shares;
/// the pre-pass (its own pipeline; set 1 = x and the workspace's first
/// `q4vk_gemv_workspace_size` bytes, or the fragments' bytes alone where it has no room for
/// K slices' sums; for the digits set 0 of the matrix's first part; the push
/// constants; one `vkCmdDispatch`); a `vkCmdPipelineBarrier` from the compute stage /
/// `VK_ACCESS_SHADER_WRITE_BIT` to the compute stage / `VK_ACCESS_SHADER_READ_BIT`; then
/// the kernel as above, on the workspace (set 1 = the workspace and y). Where the
/// tensor-core GEMM runs in K slices (see `q4vk_gemv_workspace_size`) its dispatches have
/// one workgroup along z per slice (4), each writing its slice's sums into the workspace after the
/// fragments; then a `vkCmdPipelineBarrier` from the compute stage /
/// `VK_ACCESS_SHADER_WRITE_BIT` to the compute stage / `VK_ACCESS_SHADER_READ_BIT` and a
/// kernel adding the slices into y (its own pipeline, set 1 as bound, the push constants and
/// `vkCmdDispatch` per matrix part); with `Q4VK_GEMV_REUSE_WORKSPACE` (no pre-pass) a
/// barrier from the compute stage / read and write access to the same before the GEMM, so
/// an earlier call's kernels are done with the workspace. Results: within
/// 1e-5 of the exact sum as every kernel's (with `Q4VK_GEMV_ROUND_X_TO_F16`, of the sum on
/// x rounded to f16; with `Q4VK_GEMV_ROUND_X_TO_INT8`, within its bound; see there); with the digits, a row of x with an infinite
/// or NaN element gives a non-finite result in all of its y (NaN where the driver keeps
/// infinities and NaNs, which Vulkan leaves to it; the f32 kernel's results are the IEEE
/// ones there).
///
/// Barriers: none other are recorded. The caller makes x's writes available and visible to
/// `VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT` / `VK_ACCESS_SHADER_READ_BIT` before, orders any
/// earlier access to y before this write, and synchronizes later reads of y against
/// `VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT` / `VK_ACCESS_SHADER_WRITE_BIT`. A workspace is
/// the caller's memory too: accesses to it other than q4vk's GEMVs (a transfer, memory
/// aliased or pooled for other work) are ordered before the call against the compute
/// stage's writes and after it against the compute stage's reads and writes.
///
/// Statuses: `NULL_POINTER` (ctx, mat, command_buffer, args, a null buffer, an epilogue
/// flag without its buffer), `INVALID_ARGUMENT` (struct_size, unknown flags or
/// combinations, reserved0, strides, offsets, overlap, a range of `VK_WHOLE_SIZE`, an
/// epilogue buffer without its flag; on a `Q4VK_CONTEXT_STRICT_SIZES` context an x or y
/// range larger than the call uses),
/// `BUFFER_TOO_SMALL` (a range, the workspace's and the epilogue's included),
/// `UNSUPPORTED` (x or y beyond the limits above; a CPU context; f16 y on a device whose
/// `vulkanMemoryModel` is enabled without `vulkanMemoryModelDeviceScope`), `VULKAN`
/// (pipeline creation).
/// Thread-safe for distinct command buffers (a command buffer itself is externally
/// synchronized, as in Vulkan). The matrix, the buffers and the context must outlive the
/// command buffer's execution.
///
/// Without `VK_KHR_push_descriptor` (the ring): each GEMV (`q4vk_cmd_gemv` or
/// `q4vk_gemv`) takes the ring's next set, a GEMV that records a pre-pass two (one with
/// `Q4VK_GEMV_REUSE_WORKSPACE`, which records none); a set is
/// rewritten `Q4VK_CMD_GEMV_SET_RING` sets later. So a command buffer holds calls taking at
/// most `Q4VK_CMD_GEMV_SET_RING` sets, and must have finished executing (or been reset or
/// freed) before further GEMVs on the context take `Q4VK_CMD_GEMV_SET_RING` sets; a command
/// buffer resubmitted later must be re-recorded, or record it with a binding
/// (`q4vk_gemv_binding_create`, `q4vk_cmd_gemv_bound`), whose sets are its own. Nothing else is required of the host's buffers: no set outlives that
/// window, so destroying a buffer and reusing its handle is safe.
///
/// # Safety
/// Handles NULL or live; `command_buffer` a valid `VkCommandBuffer` in the recording state.
#[no_mangle]
pub unsafe extern "C" fn q4vk_cmd_gemv(
    ctx: *mut q4vk_context,
    mat: *const q4vk_matrix,
    command_buffer: *mut c_void,
    args: *const q4vk_gemv_args,
) -> q4vk_status {
    guard("q4vk_cmd_gemv", || {
        require(command_buffer, "command_buffer")?;
        // SAFETY: the caller's contract.
        let call = unsafe { checked_call(ctx, mat, args, "q4vk_cmd_gemv") }?;
        let cmd = vk::CommandBuffer::from_raw(command_buffer as u64);
        let c = &call;
        gemv::record_validated(c.ctx, cmd, c.mat, c.xy, &c.ops, &c.params, c.workspace)?;
        c.rule.warn_other_readings(&c.counts);
        Ok(())
    })
}

/// The most matrices one `q4vk_cmd_gemv_multi` or `q4vk_gemv_binding_create_multi` takes.
pub const Q4VK_GEMV_MULTI_MAX_CALLS: u32 = 64;
const _: () = assert!(Q4VK_GEMV_MULTI_MAX_CALLS as usize == gemv::MAX_CALLS);

/// Records `count` GEMVs that read one x — Q, K and V on a layer's input; gate, then up
/// with `Q4VK_GEMV_SILU_GATE` on the gate's output — as one call into `command_buffer`:
/// `mats[i]` with `args[i]`, each checked as `q4vk_cmd_gemv` checks it, all before anything
/// is recorded (nothing is recorded on error; messages name `args[i]`). Every call has the
/// same x (buffer, offset and range), m, `x_row_stride`, x flags
/// (`Q4VK_GEMV_F16_ACTIVATIONS`, `Q4VK_GEMV_ROUND_X_TO_F16`, `Q4VK_GEMV_ROUND_X_TO_INT8`) and k; each its own y,
/// epilogue and workspace. `args` is an array of `count` structs of one `struct_size`.
///
/// x is read once where it can be: calls whose pre-pass is the same (equal
/// `q4vk_gemv_workspace_key`) and that are given the same workspace (buffer and offset,
/// each at least its own `q4vk_gemv_workspace_size`) run it once, the first of them, and
/// the others their kernels on it (`Q4VK_GEMV_REUSE_WORKSPACE` is q4vk's to set here: in
/// `args` it is refused). The calls are recorded in order; a compute → compute barrier
/// (shader writes to shader reads and writes) goes before a call that reads or writes what
/// a call since the last barrier wrote (its y: a gate, a residual or a bias that is an
/// earlier call's y), or writes what one read; independent calls are recorded back to back,
/// so the device may run them together. A call with `Q4VK_GEMV_SILU_GATE` or
/// `Q4VK_GEMV_GELU_GATE` whose gate is exactly the previous call's y (same stride and
/// type; that call without bias, gate or residual), on a matrix of the same form, runs with
/// it as a gate+up pair where the kernel allows (the subgroup kernels of the SIMT GEMV and
/// of the GEMV on GGUF blocks, matrices without a column order, the same pre-pass output
/// or none): one dispatch computes both
/// matrices' rows and writes both outputs, the same bits as the two calls, with no barrier
/// between them. Other barriers and state: as `q4vk_cmd_gemv`, per call; without
/// `VK_KHR_push_descriptor` each call takes its sets of the ring.
///
/// Statuses: `NULL_POINTER` (ctx, mats or one of them, command_buffer, args),
/// `INVALID_ARGUMENT` (count 0 or above `Q4VK_GEMV_MULTI_MAX_CALLS`, calls that differ in x, m, stride, x flags or
/// k, `Q4VK_GEMV_REUSE_WORKSPACE`, `struct_size`s that differ), and every status of
/// `q4vk_cmd_gemv`.
///
/// # Safety
/// Handles NULL or live; `mats` NULL or readable for `count` handles; `args` NULL or
/// readable for `count` structs of its `struct_size`; `command_buffer` a valid
/// `VkCommandBuffer` in the recording state.
#[no_mangle]
pub unsafe extern "C" fn q4vk_cmd_gemv_multi(
    ctx: *mut q4vk_context,
    count: u32,
    mats: *const *const q4vk_matrix,
    command_buffer: *mut c_void,
    args: *const q4vk_gemv_args,
) -> q4vk_status {
    guard("q4vk_cmd_gemv_multi", || {
        require(command_buffer, "command_buffer")?;
        // SAFETY: the caller's contract.
        let checked = unsafe { checked_multi(ctx, count, mats, args, "q4vk_cmd_gemv_multi") }?;
        let cmd = vk::CommandBuffer::from_raw(command_buffer as u64);
        gemv::record_multi(checked[0].ctx, cmd, &multi_calls(&checked))?;
        for c in &checked {
            c.rule.warn_other_readings(&c.counts);
        }
        Ok(())
    })
}

/// The calls of a multi call (`call` names the function), each checked as `q4vk_cmd_gemv`
/// checks one (messages name `args[i]`): 1 to `gemv::MAX_CALLS` of them, `args` an array
/// of one `struct_size`.
///
/// # Safety
/// Handles NULL or live; `mats` NULL or readable for `count` handles; `args` NULL or
/// readable for `count` structs of its `struct_size`.
pub(super) unsafe fn checked_multi<'a>(
    ctx: *mut q4vk_context,
    count: u32,
    mats: *const *const q4vk_matrix,
    args: *const q4vk_gemv_args,
    call: &str,
) -> Result<Vec<CheckedCall<'a>>> {
    require(mats, "mats")?;
    require(args, "args")?;
    let count = count as usize;
    if count == 0 || count > gemv::MAX_CALLS {
        return Err(invalid!(
            "count is {count}; a multi call takes 1 to {} matrices",
            gemv::MAX_CALLS
        ));
    }
    // SAFETY: non-NULL and readable for at least one struct's first field (contract).
    let stride = unsafe { args.cast::<u32>().read_unaligned() } as usize;
    let mut checked = Vec::with_capacity(count);
    for i in 0..count {
        // SAFETY: `mats` readable for `count` handles (contract).
        let mat = unsafe { mats.add(i).read() };
        // SAFETY: `args` readable for `count` structs of `stride` bytes (contract).
        let at = unsafe { args.cast::<u8>().add(i * stride) }.cast::<q4vk_gemv_args>();
        // SAFETY: as above.
        let size = unsafe { at.cast::<u32>().read_unaligned() } as usize;
        if size != stride {
            return Err(invalid!(
                "args[{i}].struct_size is {size}, args[0]'s {stride}: one array of one struct size"
            ));
        }
        // SAFETY: handles NULL or live; `at` readable for its struct_size (contract).
        let c = unsafe { checked_call(ctx, mat, at, call) }
            .map_err(|e| e.prefixed(&format!("args[{i}]: ")))?;
        checked.push(c);
    }
    Ok(checked)
}

/// The calls of a checked multi call as `vk::gemv::record_multi` takes them.
pub(super) fn multi_calls<'a>(checked: &[CheckedCall<'a>]) -> Vec<gemv::MultiCall<'a>> {
    checked
        .iter()
        .map(|c| gemv::MultiCall {
            mat: c.mat,
            x: c.xy.0,
            y: c.xy.1,
            ops: c.ops,
            p: c.params,
            workspace: c.workspace,
        })
        .collect()
}

/// A `q4vk_gemv_args` call on a Vulkan matrix, checked as `q4vk_cmd_gemv` checks it.
pub(super) struct CheckedCall<'a> {
    pub(super) ctx: &'a Context,
    pub(super) mat: &'a DeviceMatrix,
    pub(super) rule: ByteCountRule,
    pub(super) params: GemvParams,
    pub(super) xy: (BufferRange, BufferRange),
    /// The epilogue's buffers.
    pub(super) ops: EpilogueOperands,
    pub(super) workspace: Option<BufferRange>,
    /// x's and y's byte counts, for the context's rule's warnings once the call is taken.
    pub(super) counts: [ByteCount; 2],
}

/// Checks `args` for a call on `mat` (`call` names the function in messages): the handles,
/// flags, m, x and y against the matrix and the device, then the context's byte-count rule.
///
/// # Safety
/// Handles NULL or live; `args` NULL or readable for its `struct_size`.
pub(super) unsafe fn checked_call<'a>(
    ctx: *mut q4vk_context,
    mat: *const q4vk_matrix,
    args: *const q4vk_gemv_args,
    call: &str,
) -> Result<CheckedCall<'a>> {
    // SAFETY: NULL or live handles (contract).
    let (ctx, mat, rule) = unsafe { vulkan_pair(ctx, mat, call) }?;
    // SAFETY: NULL or readable for its `struct_size` (contract).
    let a = unsafe { read_struct(args, "args") }?;
    check_gemv_flags(a.flags, "args->flags")?;
    if a.reserved0 != 0 {
        return Err(invalid!("args->reserved0 is {}; it must be 0", a.reserved0));
    }
    check_m(a.m)?;
    let range = |r: q4vk_buffer_ref| BufferRange {
        buffer: vk::Buffer::from_raw(r.buffer),
        offset: r.offset,
        range: r.range,
    };
    let params = gemv_params(mat, a.m, a.flags, (a.x_row_stride, a.y_row_stride));
    let given = |r: q4vk_buffer_ref| (r.buffer != 0).then(|| range(r));
    let workspace = given(a.workspace);
    let ops = EpilogueOperands {
        bias: given(a.bias),
        residual: given(a.residual),
        gate: given(a.gate),
    };
    let (x, y) = (range(a.x), range(a.y));
    // The call's own checks first (too small, VK_WHOLE_SIZE), then the context's rule.
    let extent = gemv::validate(ctx, mat, &x, &y, &params)?;
    gemv::validate_operands(ctx, mat, &y, &ops, &params, &extent)?;
    let counts = xy_range_counts(&extent, params.x_f16, &a);
    rule.refuse_inexact(&counts)?;
    Ok(CheckedCall {
        ctx,
        mat,
        rule,
        params,
        xy: (x, y),
        ops,
        workspace,
        counts,
    })
}

/// The byte counts of `q4vk_cmd_gemv`'s x and y ranges against the extent `e` the call
/// reads of x (f16 with `x_f16`, else f32) and writes of y.
fn xy_range_counts(e: &gemv::XyExtent, x_f16: bool, a: &q4vk_gemv_args) -> [ByteCount; 2] {
    let x_type = if x_f16 { Dtype::F16 } else { Dtype::F32 };
    [
        ByteCount::typed("args->x.range", a.x.range, e.x_bytes, (e.x_elems, x_type)),
        ByteCount::bytes("args->y.range", a.y.range, e.y_bytes),
    ]
}

/// Stores in `*bytes` the workspace `q4vk_cmd_gemv` can use for `m` activation rows with
/// `flags` (`Q4VK_GEMV_*`) on `mat`: where the call would run the integer dot-product GEMV,
/// the bytes of x in 8-bit digits (112 · m · ceil(k / 32); 48 · m · ceil(k / 32) with
/// `Q4VK_GEMV_ROUND_X_TO_INT8`); where it would run the
/// tensor-core GEMM on x in fragments (tensor-core matrices at m > 8, and at m ≤ 8 where
/// the GEMM runs there, see `q4vk_gemv_args.m`), the bytes of x as that kernel's f16 fragments with per-block
/// factors and sums (about 2 · m · k for f16 activations and, at m > 8, for f32 ones with
/// `Q4VK_GEMV_ROUND_X_TO_F16`, 4 · m · k for exact f32 ones in two parts; m and k rounded
/// up to the kernel's tiles), plus 4 · Z · m · n where that GEMM runs in Z K slices (2 to 8,
/// so at most 32 · m · n; each slice's sums are added into y by a second kernel). It does
/// where the call has too few tiles to fill the GPU and K is long enough: past m = 16 on a
/// GPU that reports its SM count (`VK_NV_shader_sm_builtins`), the most slices of 2048 k or
/// more on average that keep the workgroups within two per SM (f16 x and f32 x rounded to f16:
/// 256 rows × 32 tokens each) or eight (exact f32 x: 128 rows × 16 tokens), where they
/// number at least 1.4 (2.8) per SM; elsewhere 4 slices where the call has fewer than 1024 tiles of 32 rows × 32 tokens,
/// K ≥ 16384 and m is past one tile of tokens (32 for f16 x and f32 x rounded to f16, 16
/// for exact f32 x). Slices
/// run only where the total is within `maxStorageBufferRange`; a call given a workspace
/// too small for the sums but not for the fragments runs without slices. Else 0 (no workspace is used). The answer depends on the context (its
/// device, `Q4VK_CONTEXT_NO_INTDOT`, `Q4VK_CONTEXT_NO_COOPMAT`), the matrix, m and the
/// flags only; it does not change over the context's life (the Rust-only tuning setters,
/// such as `Context::set_overrides`, aside).
///
/// Statuses: `NULL_POINTER` (ctx, mat, bytes), `INVALID_ARGUMENT` (m = 0, unknown flags, a
/// matrix of another device or kind), `UNSUPPORTED` (a CPU context; an m whose x or y
/// spans more than the kernels index or than `maxStorageBufferRange`, or whose kernel does
/// not fit the device, as `q4vk_cmd_gemv` would refuse). Thread-safe.
///
/// # Safety
/// Handles NULL or live; `bytes` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn q4vk_gemv_workspace_size(
    ctx: *mut q4vk_context,
    mat: *const q4vk_matrix,
    m: u32,
    flags: u32,
    bytes: *mut u64,
) -> q4vk_status {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        workspace_query(
            "q4vk_gemv_workspace_size",
            (ctx, mat, m, flags),
            (bytes, "bytes"),
            |rules, mat, p| gemv::workspace_bytes(rules, &mat.form, p),
        )
    }
}

/// Creates now every pipeline that GEMV calls on `mat` with `m_first` to `m_last` activation
/// rows (both included) and `flags` (`Q4VK_GEMV_*`) will record, so that no later
/// `q4vk_cmd_gemv` or `q4vk_gemv` on it compiles a shader: with and without a workspace, and
/// with one too small for K slices; an engine calls it at load time for the m it will run
/// (1 for decode, its prefill chunk sizes), with the pipeline cache
/// (`q4vk_context_desc.pipeline_cache`) making the compiles themselves fast on later runs.
/// With a gate flag it also creates the gate+up pair's pipelines that a
/// `q4vk_cmd_gemv_multi` of gate and this up call records.
/// Matrices of the same shape and form share pipelines: one call per such set is enough.
/// Pipelines that exist are not created again; the call's time grows with the range (the
/// rules are asked for each m). On a CPU context it does nothing and returns `OK`.
///
/// Statuses: `NULL_POINTER` (ctx, mat), `INVALID_ARGUMENT` (m_first = 0, m_first > m_last,
/// unknown flags, a matrix of another device or kind), `UNSUPPORTED` (an `m_last` whose x
/// or y `q4vk_cmd_gemv` would refuse on this device, before anything is created; a kernel
/// that does not fit the device at some m, the smaller m prepared), or the status of a
/// failed pipeline creation (`OUT_OF_HOST_MEMORY`, `OUT_OF_DEVICE_MEMORY`, `VULKAN`).
/// Thread-safe: calls on several threads create their pipelines at once (drivers compile
/// a pipeline on the thread that creates it), so an engine may prepare its matrices'
/// shapes on a thread each.
///
/// # Safety
/// Handles NULL or live.
#[no_mangle]
pub unsafe extern "C" fn q4vk_gemv_prepare(
    ctx: *mut q4vk_context,
    mat: *const q4vk_matrix,
    m_first: u32,
    m_last: u32,
    flags: u32,
) -> q4vk_status {
    guard("q4vk_gemv_prepare", || {
        // SAFETY: NULL or live handles (contract).
        let pair = unsafe { handles(ctx, mat) }?.0;
        check_gemv_flags(flags, "flags")?;
        check_m(m_first)?;
        if m_first > m_last {
            return Err(invalid!(
                "m_first ({m_first}) is past m_last ({m_last}); pass the range of m the calls will use"
            ));
        }
        let (ctx, mat) = match pair {
            Pair::Vulkan(ctx, mat) => (ctx, mat),
            Pair::Cpu(..) => {
                return refuse_f16_output(flags, "flags", "a CPU context");
            }
        };
        // x and y grow with m: the largest is checked before anything is created.
        gemv::check_params(ctx, mat, &gemv_params(mat, m_last, flags, (0, 0)))?;
        for m in m_first..=m_last {
            gemv::prepare(ctx, mat, &gemv_params(mat, m, flags, (0, 0)))?;
        }
        Ok(())
    })
}

/// Which kernel a call runs (`q4vk_gemv_plan_info.kernel`).
pub type q4vk_gemv_kernel = u32;
/// The SIMT GEMV on x itself (m ≤ 8, and past 8 in passes of 8 rows).
pub const Q4VK_GEMV_KERNEL_SIMT_GEMV: q4vk_gemv_kernel = 1;
/// The integer dot-product GEMV on x in 8-bit digits, behind the digits pre-pass, or on x
/// rounded to bytes (`Q4VK_GEMV_PREPASS_BYTES`).
pub const Q4VK_GEMV_KERNEL_INT_DOT_GEMV: q4vk_gemv_kernel = 2;
/// The tiled SIMT GEMM.
pub const Q4VK_GEMV_KERNEL_SIMT_GEMM: q4vk_gemv_kernel = 3;
/// The tensor-core GEMV.
pub const Q4VK_GEMV_KERNEL_COOP_GEMV: q4vk_gemv_kernel = 4;
/// The tensor-core GEMM, on x itself or, behind the fragments pre-pass, on x in fragments.
pub const Q4VK_GEMV_KERNEL_COOP_GEMM: q4vk_gemv_kernel = 5;
/// q4vk's CPU kernels (a CPU context).
pub const Q4VK_GEMV_KERNEL_CPU: q4vk_gemv_kernel = 6;
/// The tensor-core GEMM on the SIMT layout, fragments through shared memory: devices whose
/// cooperative matrices have another fragment layout or subgroup size than the tensor-core
/// layout's kernels need (any m).
pub const Q4VK_GEMV_KERNEL_COOP_TILES_GEMM: q4vk_gemv_kernel = 7;
/// The GEMV on GGUF blocks kept in their native bytes (every `Q4VK_SOURCE_GGUF_*` matrix
/// but Q4_0's), on x itself, in passes of at most 4 activation rows (8 where it strides
/// over quarters of pieces); or, with `Q4VK_GEMV_ROUND_X_TO_INT8` where it applies, on x
/// rounded to bytes in passes of 8.
pub const Q4VK_GEMV_KERNEL_BLOCKS_GEMV: q4vk_gemv_kernel = 8;
/// The GEMM on GGUF blocks kept in their native bytes: the m where the SIMT matrices run
/// their GEMM (`Q4VK_GEMV_KERNEL_SIMT_GEMM`), on x itself, no subgroup operations.
pub const Q4VK_GEMV_KERNEL_BLOCKS_GEMM: q4vk_gemv_kernel = 9;
/// The tensor-core GEMM on GGUF blocks kept in their native bytes, fragments through shared
/// memory (any fragment layout and subgroup size; f16 fragments of depth 8 or 16): the m
/// where `Q4VK_GEMV_KERNEL_BLOCKS_GEMM` would run, on devices whose cooperative matrices
/// offer such a shape and whose tuning row takes it.
pub const Q4VK_GEMV_KERNEL_BLOCKS_COOP_GEMM: q4vk_gemv_kernel = 10;
/// The tensor-core GEMM on GGUF blocks kept in their native bytes with fragments built in
/// registers: the m where `Q4VK_GEMV_KERNEL_BLOCKS_GEMM` would run, on contexts that use the
/// tensor-core layout (`Q4VK_GEMV_KERNEL_COOP_GEMM`'s devices), where k is a multiple of
/// 128.
pub const Q4VK_GEMV_KERNEL_BLOCKS_FRAGMENT_GEMM: q4vk_gemv_kernel = 11;

/// The pre-pass a call records before its kernel (`q4vk_gemv_plan_info.prepass`).
pub type q4vk_gemv_prepass = u32;
/// None: the kernel reads x.
pub const Q4VK_GEMV_PREPASS_NONE: q4vk_gemv_prepass = 0;
/// x into 8-bit digits in the workspace (the integer dot-product GEMV).
pub const Q4VK_GEMV_PREPASS_DIGITS: q4vk_gemv_prepass = 1;
/// x into the tensor-core GEMM's f16 fragments in the workspace.
pub const Q4VK_GEMV_PREPASS_FRAGMENTS: q4vk_gemv_prepass = 2;
/// x rounded to one byte per element with a scale per 32 columns in the workspace (the
/// integer dot-product GEMV under `Q4VK_GEMV_ROUND_X_TO_INT8`).
pub const Q4VK_GEMV_PREPASS_BYTES: q4vk_gemv_prepass = 3;

/// What `q4vk_gemv_plan` answers. The caller sets `struct_size =
/// sizeof(q4vk_gemv_plan_info)` (smaller than v0 is refused); q4vk writes the other fields.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct q4vk_gemv_plan_info {
    /// Set by the caller: `sizeof(q4vk_gemv_plan_info)`.
    pub struct_size: u32,
    /// The kernel (`Q4VK_GEMV_KERNEL_*`).
    pub kernel: q4vk_gemv_kernel,
    /// The pre-pass before it (`Q4VK_GEMV_PREPASS_*`).
    pub prepass: q4vk_gemv_prepass,
    /// Passes of the kernel over the matrix: m / 8 rounded up for the SIMT GEMVs past m = 8,
    /// else 1.
    pub passes: u32,
    /// Workspace bytes the call uses (0: none).
    pub workspace_bytes: u64,
    /// Device bytes of the matrix each pass reads: weights, scales, zero points or offsets
    /// and column order (a CPU context: the matrix's bytes in host memory).
    pub matrix_bytes: u64,
    /// The kernel and its shape as NUL-terminated text for logs and reports, such as
    /// "SIMT GEMV, workgroup 128, 8 rows, decoded once"; not a stable format.
    pub name: [libc::c_char; 96],
    /// Where the kernel's shape came from (`Q4VK_GEMV_SHAPE_*`; appended after `name`,
    /// callers with the shorter struct do not get it).
    pub shape_source: q4vk_gemv_shape_source,
}

/// Where a call's kernel shape came from (`q4vk_gemv_plan_info.shape_source`).
pub type q4vk_gemv_shape_source = u32;
/// The device's row of q4vk's tuning table (or q4vk's fixed rules).
pub const Q4VK_GEMV_SHAPE_TABLE: q4vk_gemv_shape_source = 0;
/// A tuning blob the context was created with (`q4vk_context_tune`): the SIMT GEMVs' shape,
/// or the one-pass shape of the GEMV on GGUF Q4_K and Q5_K blocks on x.
pub const Q4VK_GEMV_SHAPE_TUNED: q4vk_gemv_shape_source = 1;

// SAFETY: repr(C), starts with u32 struct_size; integers and chars only.
unsafe impl VersionedStruct for q4vk_gemv_plan_info {
    // The first version ended at `name`; `shape_source` was appended.
    const V0_SIZE: usize = std::mem::offset_of!(q4vk_gemv_plan_info, shape_source);
    const NAME: &'static str = "q4vk_gemv_plan_info";
}

/// Stores in `*info` what a GEMV call on `mat` with `m` activation rows and `flags`
/// (`Q4VK_GEMV_*`) runs, given a workspace of `workspace_bytes` (0: none; `UINT64_MAX`: as
/// much as it asks, `q4vk_gemv_workspace_size`): its kernel, pre-pass, passes over the
/// matrix, the workspace it uses and the matrix bytes each pass reads. It is the decision
/// `q4vk_cmd_gemv` records (and `q4vk_gemv` runs, which gives itself the workspace it asks
/// for) with the same arguments: the kernel rules run once, on the context's device class
/// and tuning row; nothing is created or recorded. On a CPU context: `Q4VK_GEMV_KERNEL_CPU`.
///
/// Statuses: `NULL_POINTER` (ctx, mat, info), `INVALID_ARGUMENT` (info->struct_size, m = 0,
/// unknown flags, a matrix of another device or kind), `BUFFER_TOO_SMALL` (a workspace
/// smaller than the call's pre-pass needs, as `q4vk_cmd_gemv` refuses it), `UNSUPPORTED` (an
/// m that `q4vk_cmd_gemv` would refuse on this device). Thread-safe.
///
/// # Safety
/// Handles NULL or live; `info` NULL or writable for its `struct_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn q4vk_gemv_plan(
    ctx: *mut q4vk_context,
    mat: *const q4vk_matrix,
    m: u32,
    flags: u32,
    workspace_bytes: u64,
    info: *mut q4vk_gemv_plan_info,
) -> q4vk_status {
    guard("q4vk_gemv_plan", || {
        // SAFETY: NULL or live handles (contract).
        let pair = unsafe { handles(ctx, mat) }?.0;
        // SAFETY: NULL or readable for its `struct_size` (contract).
        let declared = unsafe { read_struct(info as *const q4vk_gemv_plan_info, "info") }?;
        check_gemv_flags(flags, "flags")?;
        check_m(m)?;
        if let Pair::Cpu(..) = pair {
            refuse_f16_output(flags, "flags", "a CPU context")?;
        }
        let (plan, name, source) = match pair {
            Pair::Cpu(_, mat) => (
                (
                    Q4VK_GEMV_KERNEL_CPU,
                    Q4VK_GEMV_PREPASS_NONE,
                    1,
                    0,
                    mat.bytes() as u64,
                ),
                "CPU kernels".to_string(),
                Q4VK_GEMV_SHAPE_TABLE,
            ),
            Pair::Vulkan(ctx, mat) => {
                let params = gemv_params(mat, m, flags, (0, 0));
                gemv::check_params(ctx, mat, &params)?;
                let room = match workspace_bytes {
                    0 => gemv::Room::None,
                    u64::MAX => gemv::Room::AsNeeded,
                    bytes => gemv::Room::Bytes(bytes),
                };
                let choice = gemv::decide(&ctx.rules, &mat.form, &params, room)?;
                if choice.workspace_bytes > workspace_bytes {
                    return Err(Error::BufferTooSmall(format!(
                        "workspace_bytes is {workspace_bytes}; the call's pre-pass needs {} (q4vk_gemv_workspace_size)",
                        choice.workspace_bytes
                    )));
                }
                let source = match choice.shape_tuned(&ctx.rules, m) {
                    true => Q4VK_GEMV_SHAPE_TUNED,
                    false => Q4VK_GEMV_SHAPE_TABLE,
                };
                (plan_fields(&choice, m, mat), choice.to_string(), source)
            }
        };
        let (kernel, prepass, passes, workspace, matrix_bytes) = plan;
        let mut out = q4vk_gemv_plan_info {
            struct_size: declared.struct_size,
            kernel,
            prepass,
            passes,
            workspace_bytes: workspace,
            matrix_bytes,
            name: [0; 96],
            shape_source: source,
        };
        // SAFETY: our own buffer of `out.name.len()` bytes.
        unsafe { copy_c_string(&name, out.name.as_mut_ptr(), out.name.len()) };
        // SAFETY: non-NULL (read above) and writable for its `struct_size` (contract).
        unsafe { write_prefix(info, &out, declared.struct_size as usize, "info") }
    })
}

/// The numeric fields of `q4vk_gemv_plan_info` for `choice` at `m` on `mat`: (kernel,
/// pre-pass, passes, workspace bytes, matrix bytes).
fn plan_fields(
    choice: &gemv::Choice,
    m: u32,
    mat: &DeviceMatrix,
) -> (q4vk_gemv_kernel, q4vk_gemv_prepass, u32, u64, u64) {
    let kernel = match choice.kernel {
        gemv::KernelChoice::SimtGemv { key, .. } if key.dot => Q4VK_GEMV_KERNEL_INT_DOT_GEMV,
        gemv::KernelChoice::SimtGemv { .. } => Q4VK_GEMV_KERNEL_SIMT_GEMV,
        gemv::KernelChoice::BlocksGemv { .. } => Q4VK_GEMV_KERNEL_BLOCKS_GEMV,
        gemv::KernelChoice::BlocksGemm(_) => Q4VK_GEMV_KERNEL_BLOCKS_GEMM,
        gemv::KernelChoice::BlocksTiles(_) => Q4VK_GEMV_KERNEL_BLOCKS_COOP_GEMM,
        gemv::KernelChoice::BlocksFrag(_) => Q4VK_GEMV_KERNEL_BLOCKS_FRAGMENT_GEMM,
        gemv::KernelChoice::SimtGemm(_) => Q4VK_GEMV_KERNEL_SIMT_GEMM,
        gemv::KernelChoice::CoopTiles(_) => Q4VK_GEMV_KERNEL_COOP_TILES_GEMM,
        gemv::KernelChoice::CoopGemv(_) => Q4VK_GEMV_KERNEL_COOP_GEMV,
        gemv::KernelChoice::CoopGemm { .. } => Q4VK_GEMV_KERNEL_COOP_GEMM,
    };
    let prepass = match choice.prepass {
        None => Q4VK_GEMV_PREPASS_NONE,
        Some(gemv::PrepassChoice::Digits(key)) if key.bytes => Q4VK_GEMV_PREPASS_BYTES,
        Some(gemv::PrepassChoice::Digits(_)) => Q4VK_GEMV_PREPASS_DIGITS,
        Some(gemv::PrepassChoice::Fragments(_)) => Q4VK_GEMV_PREPASS_FRAGMENTS,
    };
    let passes = match choice.kernel {
        gemv::KernelChoice::SimtGemv { key, .. } => m.div_ceil(key.m),
        gemv::KernelChoice::BlocksGemv { key, .. } => m.div_ceil(key.m),
        _ => 1,
    };
    (
        kernel,
        prepass,
        passes,
        choice.workspace_bytes,
        mat.form.device_bytes(),
    )
}

/// A workspace query (`q4vk_gemv_workspace_size`, `q4vk_gemv_workspace_key`) named `name`:
/// checks the call and stores `answer` for `m` dense rows with `flags` in `*out`.
///
/// # Safety
/// Handles NULL or live; `out` NULL or writable.
unsafe fn workspace_query(
    name: &'static str,
    (ctx, mat, m, flags): (*mut q4vk_context, *const q4vk_matrix, u32, u32),
    (out, out_name): (*mut u64, &'static str),
    answer: fn(
        &crate::vk::rules::Rules,
        &crate::vk::matrix::DeviceMatrix,
        &GemvParams,
    ) -> Result<u64>,
) -> q4vk_status {
    guard(name, || {
        // SAFETY: NULL or live handles (contract).
        let (ctx, mat, _) = unsafe { vulkan_pair(ctx, mat, name) }?;
        require(out, out_name)?;
        check_gemv_flags(flags, "flags")?;
        check_m(m)?;
        let params = gemv_params(mat, m, flags, (0, 0));
        // The plan's sizes grow with m: answer only for calls that could run.
        gemv::check_params(ctx, mat, &params)?;
        let value = answer(&ctx.rules, mat, &params)?;
        // SAFETY: non-NULL (checked) and writable (contract).
        unsafe { super::ptr::write_out(out, value, out_name) }
    })
}

/// Stores in `*key` what the workspace of a `q4vk_cmd_gemv` with `m` activation rows and
/// `flags` on `mat` holds after its pre-pass, as a number: two matrices with equal, non-zero
/// keys have their pre-pass write the same bytes from the same x (the same K, activation
/// type, column order and kernel tiles), so calls on them can share one pre-pass through
/// `Q4VK_GEMV_REUSE_WORKSPACE`. 0 where the call has no pre-pass
/// (`q4vk_gemv_workspace_size` 0). Stable over the context's life; not meaningful across
/// contexts.
///
/// Statuses: `NULL_POINTER` (ctx, mat, key), `INVALID_ARGUMENT` (m = 0, unknown flags, a
/// matrix of another device or kind), `UNSUPPORTED` (a CPU context; an m whose x or y
/// spans more than the kernels index or than `maxStorageBufferRange`, or whose kernel does
/// not fit the device, as `q4vk_cmd_gemv` would refuse). Thread-safe.
///
/// # Safety
/// Handles NULL or live; `key` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn q4vk_gemv_workspace_key(
    ctx: *mut q4vk_context,
    mat: *const q4vk_matrix,
    m: u32,
    flags: u32,
    key: *mut u64,
) -> q4vk_status {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        workspace_query(
            "q4vk_gemv_workspace_key",
            (ctx, mat, m, flags),
            (key, "key"),
            gemv::workspace_key,
        )
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ring_constant_matches_the_ring() {
        assert_eq!(
            super::Q4VK_CMD_GEMV_SET_RING as usize,
            crate::vk::xy_sets::RING
        );
    }
}
