//! `q4vk_gemv` and `q4vk_gemv_host`: the synchronous GEMV on host memory, with staging
//! buffers (and the pre-passes' workspace) reused across calls.

use super::context::Context;
use super::gemv_plan::{decide, Room};
use super::matrix::DeviceMatrix;
use super::memory::{Buffer, MemoryKind};
use super::params::{BufferRange, Epilogue, GemvParams, XRounding};
use super::record::{check_params, record_resolved, CallPlan};
use super::xy_sets::Set1;
use crate::error::{Error, Result};

/// Makes `slot` hold a buffer of at least `bytes` of `kind`, named `name`.
fn ensure(
    ctx: &Context,
    slot: &mut Option<Buffer>,
    bytes: u64,
    kind: MemoryKind,
    name: &str,
) -> Result<()> {
    if slot.as_ref().is_some_and(|b| b.size >= bytes) {
        return Ok(());
    }
    // Release the old buffer first: a lower peak than holding both.
    *slot = None;
    *slot = Some(Buffer::new(
        &ctx.device,
        bytes.next_multiple_of(256),
        kind,
        name,
    )?);
    Ok(())
}

/// Activations in host memory: f32, or f16 (`f16`), as bytes in the host's byte order,
/// dense rows of k.
#[derive(Debug, Clone, Copy)]
pub struct HostX<'a> {
    /// The values' bytes.
    pub bytes: &'a [u8],
    /// f16 values (else f32).
    pub f16: bool,
}

impl<'a> HostX<'a> {
    /// f32 activations.
    pub fn f32(x: &'a [f32]) -> HostX<'a> {
        // SAFETY: an f32 slice viewed as its bytes (u8 has no alignment or validity needs).
        let bytes = unsafe { std::slice::from_raw_parts(x.as_ptr().cast::<u8>(), 4 * x.len()) };
        HostX { bytes, f16: false }
    }

    /// Bytes per value of f16 (`f16`) or f32 activations.
    pub fn bytes_per_value(f16: bool) -> usize {
        match f16 {
            true => 2,
            false => 4,
        }
    }

    /// Bytes per value.
    fn element_bytes(&self) -> usize {
        Self::bytes_per_value(self.f16)
    }

    /// Values held.
    fn len(&self) -> usize {
        self.bytes.len() / self.element_bytes()
    }

    /// Value `i`, exactly as f32.
    pub fn value(&self, i: usize) -> f32 {
        let at = i * self.element_bytes();
        match self.f16 {
            true => half::f16::from_ne_bytes([self.bytes[at], self.bytes[at + 1]]).to_f32(),
            false => f32::from_ne_bytes(self.bytes[at..at + 4].try_into().expect("4 bytes")),
        }
    }

    /// f32 values held at a 4-byte aligned address, as such (`None` for f16 or unaligned).
    pub fn as_f32(&self) -> Option<&'a [f32]> {
        if self.f16 {
            return None;
        }
        // SAFETY: every bit pattern is a valid f32; align_to returns only aligned middles.
        let (head, values, tail) = unsafe { self.bytes.align_to::<f32>() };
        (head.is_empty() && tail.is_empty()).then_some(values)
    }

    /// Whether every value is finite (f32 held aligned checked as floats in one pass).
    fn all_finite(&self) -> bool {
        match self.as_f32() {
            Some(values) => values.iter().all(|v| v.is_finite()),
            None => (0..self.len()).all(|i| self.value(i).is_finite()),
        }
    }

    /// The first `len` values.
    fn head(&self, len: usize) -> HostX<'a> {
        HostX {
            bytes: &self.bytes[..len * self.element_bytes()],
            f16: self.f16,
        }
    }
}

/// The range of the first `bytes` of `buffer`.
fn head(buffer: &Buffer, bytes: u64) -> BufferRange {
    BufferRange {
        buffer: buffer.buffer,
        offset: 0,
        range: bytes,
    }
}

/// `y[m][n] = sum_k x[m][k] W[n][k]` with host memory and f32 x, synchronous: [`gemv_host_with`]
/// on f32 activations, exact.
pub fn gemv_host(
    ctx: &Context,
    mat: &DeviceMatrix,
    x: &[f32],
    y: &mut [f32],
    m: u32,
) -> Result<()> {
    gemv_host_with(ctx, mat, HostX::f32(x), y, m, XRounding::default())
}

/// `y[m][n] = sum_k x[m][k] W[n][k]` with host memory, synchronous. `x` holds at least
/// `m·k` values, `y` at least `m·n` (only `m·n` are written, and only on success); x may be
/// rounded where `rounding` allows it and that is faster (`Q4VK_GEMV_ROUND_X_TO_F16`,
/// `Q4VK_GEMV_ROUND_X_TO_INT8`). Where the call runs the integer dot-product GEMV
/// ([`super::gemv_plan::workspace_bytes`]), x is finite and its pipelines exist, the
/// digits pre-pass writes x's digits (or x rounded to bytes) into q4vk's workspace first; otherwise (x with an
/// infinite or NaN element included) the kernels run on x, gathered into the matrix's
/// column order on the host. Likewise the tensor-core GEMM's pre-pass (where that GEMM
/// runs) writes x as its fragments into that workspace (`vk::x_fragments`). Every check
/// runs before the buffers grow.
pub fn gemv_host_with(
    ctx: &Context,
    mat: &DeviceMatrix,
    x: HostX,
    y: &mut [f32],
    m: u32,
    rounding: XRounding,
) -> Result<()> {
    let (n, k) = (mat.form.shape.n, mat.form.shape.k);
    let xn = crate::size::product("m * k", &[m as usize, k])?;
    let yn = crate::size::product("m * n", &[m as usize, n])?;
    if x.len() < xn || y.len() < yn {
        return Err(Error::BufferTooSmall(format!(
            "x holds {} values and y {}; m = {m} needs {xn} and {yn}",
            x.len(),
            y.len()
        )));
    }
    let x = x.head(xn);
    let es = x.element_bytes();
    let gathered = GemvParams {
        m,
        x_f16: x.f16,
        x_stride: k as u64,
        y_stride: n as u64,
        x_gathered: mat.k_order.is_some(),
        x_round_f16: rounding.f16,
        x_round_int8: rounding.int8,
        workspace_filled: false,
        epilogue: Epilogue::NONE,
    };
    // Everything that can refuse the call runs before the buffers grow. x's binding spans
    // whole 32-bit words (the kernels read f16 x in pairs): `x_bytes` ≥ es·xn.
    let x_bytes = check_params(ctx, mat, &gathered)?.x_bytes;
    // The digits pre-pass reads x in input order and gathers it (matrices with a column
    // order are never in the tensor-core layout, whose pre-pass does not gather). x with an
    // infinite or NaN element keeps the kernels on x rather than a pre-pass, so that its
    // results are those of the f32 kernels; a refused pre-pass (its pipelines) keeps the
    // kernel on x too.
    let ungathered = GemvParams {
        x_gathered: false,
        ..gathered
    };
    let pre = x
        .all_finite()
        .then(|| decide(&ctx.rules, &mat.form, &ungathered, Room::AsNeeded).ok())
        .flatten()
        .filter(|c| c.prepass.is_some())
        .and_then(|c| CallPlan::of(ctx, mat, &ungathered, c).ok());
    // Resolved once: the recording below uses this plan.
    let (p, call) = match pre {
        Some(call) => (ungathered, call),
        None => (
            gathered,
            CallPlan::of(
                ctx,
                mat,
                &gathered,
                decide(&ctx.rules, &mat.form, &gathered, Room::None)?,
            )?,
        ),
    };
    let workspace = call.choice.workspace_bytes;
    let mut exec = ctx.exec.lock().unwrap_or_else(|e| e.into_inner());
    let exec = &mut *exec;
    // After a failed wait the device may still read the buffers: touch nothing.
    exec.submitter.check_usable()?;
    let buffers = &mut exec.buffers;
    ensure(
        ctx,
        &mut buffers.x,
        x_bytes,
        MemoryKind::Upload,
        "q4vk staging x",
    )?;
    let y_bytes = 4 * yn as u64;
    ensure(
        ctx,
        &mut buffers.y,
        y_bytes,
        MemoryKind::Readback,
        "q4vk readback y",
    )?;
    if workspace > 0 {
        ensure(
            ctx,
            &mut buffers.workspace,
            workspace,
            MemoryKind::Device,
            "q4vk workspace",
        )?;
    }
    let xb = buffers.x.as_mut().expect("x");
    xb.fill(x_bytes as usize, |staged| {
        let (values, pad) = staged.split_at_mut(es * xn);
        match (&mat.k_order, p.x_gathered) {
            // A matrix with a column order gets x in that order for the kernels on x,
            // gathered straight into the staging buffer once per call.
            (Some(order), true) => {
                for (i, v) in values.chunks_exact_mut(es).enumerate() {
                    let input = i - i % k + order.inputs[i % k] as usize;
                    v.copy_from_slice(&x.bytes[es * input..es * (input + 1)]);
                }
            }
            _ => values.copy_from_slice(x.bytes),
        }
        // The half word past an odd count of f16 values, read with its pair and unused.
        pad.fill(0);
    });
    let xr = head(buffers.x.as_ref().expect("x"), x_bytes);
    let yb = buffers.y.as_ref().expect("y");
    let yr = head(yb, y_bytes);
    let ws = buffers
        .workspace
        .as_ref()
        .filter(|_| workspace > 0)
        .map(|b| head(b, workspace));
    let lock = ctx.queue_lock;
    exec.submitter.run(lock.as_ref(), |cmd| {
        record_resolved(ctx, cmd, mat, &Set1::pair(xr, yr), &p, ws, &call)?;
        let [src, dst] = super::submit::SHADER_TO_HOST;
        // SAFETY: recording into q4vk's own command buffer.
        unsafe { super::submit::record_barrier(&ctx.device.device, cmd, src, dst) };
        Ok(())
    })?;
    // SAFETY: f32 slice viewed as bytes; the device finished (fence waited).
    let ys = unsafe { std::slice::from_raw_parts_mut(y.as_mut_ptr().cast::<u8>(), 4 * yn) };
    yb.read(0, ys);
    Ok(())
}
