//! The parameters of a GEMV call and their checks that need no device: the activation
//! rows, x's and y's types, strides and extents, and a buffer range.

pub use crate::epilogue::{value_bytes, Epilogue, GateActivation};
use crate::error::{invalid, Error, Result};
use ash::vk;

/// Largest activation count (rows of x) a GEMV dispatch takes; larger m runs the GEMM
/// kernels (same matrices, same bindings) or, on SIMT matrices up to `runs_gemm`'s and
/// `runs_int_dot`'s limits, the GEMV in passes of this many rows.
pub const MAX_M: u32 = 8;

/// A range of a `VkBuffer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BufferRange {
    /// The buffer.
    pub buffer: vk::Buffer,
    /// Byte offset (a multiple of `minStorageBufferOffsetAlignment`).
    pub offset: u64,
    /// Bytes available from `offset`.
    pub range: u64,
}

/// Shape of one GEMV call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GemvParams {
    /// Activation rows, ≥ 1 (up to [`MAX_M`] the GEMV kernels, beyond the GEMM or the SIMT
    /// GEMV in passes: `vk::gemv::decide`).
    pub m: u32,
    /// Activations are f16 (else f32).
    pub x_f16: bool,
    /// Elements between rows of x (≥ k).
    pub x_stride: u64,
    /// Elements between rows of y (≥ n).
    pub y_stride: u64,
    /// x is already in the matrix's column order (`q4vk_gemv` gathered it on the host): the
    /// kernels read it as a plain matrix's, without gathering.
    pub x_gathered: bool,
    /// f32 x may be rounded to f16 where that makes the call faster
    /// (`Q4VK_GEMV_ROUND_X_TO_F16`): the tensor-core GEMM on x in fragments, with a
    /// workspace.
    pub x_round_f16: bool,
    /// x may be rounded to one signed byte per element with a scale per 32 columns where
    /// that makes the call faster (`Q4VK_GEMV_ROUND_X_TO_INT8`): the integer dot-product
    /// GEMV on x in bytes, with a workspace.
    pub x_round_int8: bool,
    /// The workspace already holds what this call's pre-pass would write
    /// (`Q4VK_GEMV_REUSE_WORKSPACE`): `record` records the kernel on it without the pre-pass
    /// (in K slices: a barrier, the GEMM, a barrier and the kernel adding the slices).
    pub workspace_filled: bool,
    /// What the kernel does with each sum before it stores it, and y's type.
    pub epilogue: Epilogue,
}

/// What a call lets q4vk round f32 or f16 x to where that makes it faster (the
/// `Q4VK_GEMV_ROUND_X_*` flags); the default rounds nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct XRounding {
    /// f32 x to f16 ([`GemvParams::x_round_f16`]).
    pub f16: bool,
    /// x to one signed byte per element with a scale per 32 columns
    /// ([`GemvParams::x_round_int8`]).
    pub int8: bool,
}

/// The buffers of an epilogue's operands (each present where the [`Epilogue`] uses it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EpilogueOperands {
    /// n values added to every row of sums.
    pub bias: Option<BufferRange>,
    /// y-shaped values added last (may be y's own range: an in-place add).
    pub residual: Option<BufferRange>,
    /// y-shaped values whose activation multiplies the sums.
    pub gate: Option<BufferRange>,
}

impl GemvParams {
    /// `m` rows of f32 x, k to a row, into f32 y, n to a row: no gathering, rounding,
    /// reused workspace or epilogue.
    pub fn dense(m: u32, k: u64, n: u64) -> GemvParams {
        GemvParams {
            m,
            x_f16: false,
            x_stride: k,
            y_stride: n,
            x_gathered: false,
            x_round_f16: false,
            x_round_int8: false,
            workspace_filled: false,
            epilogue: Epilogue::NONE,
        }
    }

    /// These parameters for a call writing `y` whose epilogue reads `ops` (both checked
    /// with `vk::gemv::validate_operands`): a residual at y's own place is y itself
    /// ([`Epilogue::residual_is_y`]).
    pub fn with_operands(&self, y: &BufferRange, ops: &EpilogueOperands) -> GemvParams {
        let mut p = *self;
        p.epilogue.residual_is_y = p.epilogue.residual
            && ops
                .residual
                .is_some_and(|r| r.buffer == y.buffer && r.offset == y.offset);
        p
    }
}

impl EpilogueOperands {
    /// No operands (the plain store, or an f16 y alone).
    pub const NONE: EpilogueOperands = EpilogueOperands {
        bias: None,
        residual: None,
        gate: None,
    };
}

/// Checks the activation count: 0 is invalid. (The upper limits are those of x and y:
/// [`xy_extent`], `vk::gemv::check_params`.)
pub fn check_m(m: u32) -> Result<()> {
    if m == 0 {
        return Err(invalid!("m is 0; it must be at least 1"));
    }
    Ok(())
}

/// The 2-D grid of one dispatch of up to `max_x · max_y` of `remaining` workgroups (the
/// kernels number them `y · x_count + x`): (workgroups in it, x count, y count).
pub fn dispatch_grid(remaining: u64, [max_x, max_y]: [u64; 2]) -> (u64, u64, u64) {
    let count = remaining.min(max_x * max_y);
    let gx = count.min(max_x);
    (count, gx, count.div_ceil(gx))
}

/// Elements and bytes of x and y that a GEMV of an n × k matrix reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XyExtent {
    /// Elements of x from its first to its last activation.
    pub x_elems: u64,
    /// Elements of y likewise.
    pub y_elems: u64,
    /// Bytes of x (f16 activations counted in whole 32-bit words).
    pub x_bytes: u64,
    /// Bytes of y (f16 y counted in whole 32-bit words).
    pub y_bytes: u64,
}

/// Checks m, the strides against n and k, and the 32-bit indexing of the kernels, and
/// returns the extent of x and y; messages name the strides with `prefix` (`"desc->"` for
/// the kernel export).
pub fn xy_extent(n: u64, k: u64, p: &GemvParams, prefix: &str) -> Result<XyExtent> {
    check_m(p.m)?;
    if p.x_stride < k {
        return Err(invalid!(
            "{prefix}x_row_stride is {}, smaller than k = {k}",
            p.x_stride
        ));
    }
    if p.y_stride < n {
        return Err(invalid!(
            "{prefix}y_row_stride is {}, smaller than n = {n}",
            p.y_stride
        ));
    }
    let m = p.m as u64;
    let x_elems = (m - 1)
        .checked_mul(p.x_stride)
        .and_then(|v| v.checked_add(k))
        .ok_or_else(|| invalid!("{prefix}x_row_stride * m overflows"))?;
    let y_elems = (m - 1)
        .checked_mul(p.y_stride)
        .and_then(|v| v.checked_add(n))
        .ok_or_else(|| invalid!("{prefix}y_row_stride * m overflows"))?;
    if x_elems > u32::MAX as u64 || y_elems > u32::MAX as u64 {
        return Err(Error::Unsupported(
            "x or y spans more than 2^32 elements; the kernels index them with 32 bits".into(),
        ));
    }
    Ok(XyExtent {
        x_elems,
        y_elems,
        x_bytes: value_bytes(x_elems, p.x_f16),
        y_bytes: p.epilogue.y_bytes(y_elems),
    })
}
