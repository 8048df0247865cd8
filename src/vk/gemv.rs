//! Recording the fused GEMV into a command buffer (the host's or q4vk's own) and the
//! synchronous host-memory GEMV with reused staging buffers.

use super::context::Context;
use super::matrix::DeviceMatrix;
use super::memory::{Buffer, MemoryKind};
use super::pipeline::{CoopGemmKey, CoopKey, GemmKey, PipelineKey, Push, GEMM_TILE};
use super::xy_sets::{buffer_infos, writes};
use crate::error::{invalid, Error, Result};
use ash::vk;

/// Largest activation count (rows of x) the GEMV kernels take; larger m runs the GEMM
/// kernels (same matrices, same bindings).
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
    /// Activation rows, ≥ 1 (up to [`MAX_M`] the GEMV kernels, beyond the GEMM).
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
    /// x holds 8-bit digits (`vk::int_dot`, built by `q4vk_gemv` in column order; SIMT
    /// matrices, m ≤ [`MAX_M`], contexts with `int_dot`); `x_stride` counts uvec4 then.
    pub x_digits: bool,
}

/// Checks the activation count: 0 is invalid. (The upper limits are those of x and y:
/// [`xy_extent`], [`check_params`].)
pub fn check_m(m: u32) -> Result<()> {
    if m == 0 {
        return Err(invalid!("m is 0; it must be at least 1"));
    }
    Ok(())
}

/// Checks a GEMV's shape against the matrix and the device limits, before any buffer is
/// looked at; returns the bytes x and y need. Too large for the device (a span beyond 32-bit
/// indexing or `maxStorageBufferRange`): `Unsupported`.
pub fn check_params(ctx: &Context, mat: &DeviceMatrix, p: &GemvParams) -> Result<(u64, u64)> {
    let e = xy_extent(mat.shape.n as u64, mat.shape.k as u64, p, "")?;
    let (m, x_bytes, y_bytes) = (p.m, e.x_bytes, e.y_bytes);
    let max = ctx.device.info.max_storage_range;
    for (name, need) in [("x", x_bytes), ("y", y_bytes)] {
        if need > max {
            return Err(Error::Unsupported(format!(
                "{name} spans {need} bytes (m = {m}), more than this device's maxStorageBufferRange ({max})"
            )));
        }
    }
    Ok((x_bytes, y_bytes))
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
    /// Bytes of y.
    pub y_bytes: u64,
}

/// Checks m, the strides against n and k, and the 32-bit indexing of the kernels, and
/// returns the extent of x and y; messages name the strides with `prefix` (`"desc->"` for
/// the kernel export).
pub fn xy_extent(n: u64, k: u64, p: &GemvParams, prefix: &str) -> Result<XyExtent> {
    check_m(p.m)?;
    let x_row = if p.x_digits {
        super::int_dot::row_vectors(k as usize) as u64
    } else {
        k
    };
    if p.x_stride < x_row {
        return Err(invalid!(
            "{prefix}x_row_stride is {}, smaller than {} = {x_row}",
            p.x_stride,
            if p.x_digits {
                "a row of x in digits"
            } else {
                "k"
            }
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
        .and_then(|v| v.checked_add(x_row))
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
    let x_bytes = if p.x_digits {
        16 * x_elems
    } else if p.x_f16 {
        4 * x_elems.div_ceil(2)
    } else {
        4 * x_elems
    };
    Ok(XyExtent {
        x_elems,
        y_elems,
        x_bytes,
        y_bytes: 4 * y_elems,
    })
}

/// Checks a GEMV call against the matrix and the device limits.
pub fn validate(
    ctx: &Context,
    mat: &DeviceMatrix,
    x: &BufferRange,
    y: &BufferRange,
    p: &GemvParams,
) -> Result<()> {
    let (x_bytes, y_bytes) = check_params(ctx, mat, p)?;
    for (name, b, need) in [("x", x, x_bytes), ("y", y, y_bytes)] {
        if b.buffer == vk::Buffer::null() {
            return Err(Error::NullPointer(format!(
                "args->{name}.buffer is VK_NULL_HANDLE"
            )));
        }
        if b.range < need {
            return Err(Error::BufferTooSmall(format!(
                "args->{name}.range is {} bytes, {need} needed",
                b.range
            )));
        }
        if b.offset % ctx.device.info.storage_alignment != 0 {
            return Err(invalid!(
                "args->{name}.offset {} is not a multiple of minStorageBufferOffsetAlignment ({})",
                b.offset,
                ctx.device.info.storage_alignment
            ));
        }
        if b.range > ctx.device.info.max_storage_range {
            return Err(invalid!(
                "args->{name}.range {} exceeds maxStorageBufferRange ({})",
                b.range,
                ctx.device.info.max_storage_range
            ));
        }
    }
    if x.buffer == y.buffer && x.offset < y.offset + y.range && y.offset < x.offset + x.range {
        return Err(invalid!("args->x and args->y overlap"));
    }
    Ok(())
}

/// How a GEMV of `mat` runs on `ctx`: the pipeline (created on first use), rows and
/// activation rows per workgroup and the push block's per-matrix fields.
struct Plan {
    pipeline: vk::Pipeline,
    rows_per_wg: u64,
    /// Activation rows per workgroup (the GEMV kernels take all m at once).
    tokens_per_wg: u64,
    chunks: usize,
    groups: usize,
    group_shift: u32,
}

/// Whether a call with `m` activation rows on `mat` runs a GEMM kernel: for m > [`MAX_M`];
/// on the tensor-core layout also at m = 8 for tall matrices (n ≥ 10240, k ≤ 8192), where
/// the tensor-core GEMM (8 tokens per workgroup) measured faster than the GEMV on an H200
/// (28672 × 8192: 79.7 vs 139.5 µs; 11008 × 4096: 36.9 vs 39.9 µs) and slower on the other
/// shapes and at m = 4 (bench/RESULTS.md); from `ContextConfig::gemm_from_m` when set.
pub fn runs_gemm(ctx: &Context, mat: &DeviceMatrix, m: u32) -> bool {
    if let Some(from) = ctx.gemm_from_m {
        return m >= from;
    }
    m > MAX_M || (m == MAX_M && mat.coop.is_some() && mat.shape.n >= 10240 && mat.shape.k <= 8192)
}

/// The plan of a GEMV: the tensor-core kernel for matrices in its layout, else the
/// context's SIMT variant; the GEMM of the matrix's layout where [`runs_gemm`] says so.
fn plan(ctx: &Context, mat: &DeviceMatrix, p: &GemvParams) -> Result<Plan> {
    let gemm = runs_gemm(ctx, mat, p.m);
    let gathered = mat.k_order.is_none() || p.x_gathered;
    if p.x_digits && (gemm || mat.coop.is_some() || p.x_f16 || !gathered || !ctx.int_dot) {
        return Err(Error::Internal(
            "x in digits is for the integer dot-product GEMV only: a SIMT matrix at m <= 8, f32 x in column order, a context with int_dot".into(),
        ));
    }
    let Some(c) = &mat.coop else {
        let (pipeline, rows, tokens) = if gemm {
            let key = GemmKey {
                zeros: mat.shape.zero_points,
                scale_f32: mat.scale_f32,
                x_f16: p.x_f16,
                offsets: mat.offsets,
                k_order: mat.k_order.is_some() && !p.x_gathered,
            };
            let t = GEMM_TILE;
            (ctx.pipelines.get_gemm(key)?, t.rows(), t.tokens())
        } else {
            let key = PipelineKey {
                portable: ctx.portable,
                workgroup: ctx.pipelines.tuning.workgroup_for(mat.layout.chunks),
                m: p.m,
                zeros: mat.shape.zero_points,
                scale_f32: mat.scale_f32,
                x_f16: p.x_f16,
                offsets: mat.offsets,
                k_order: mat.k_order.is_some() && !p.x_gathered,
                dot: p.x_digits,
            };
            (ctx.pipelines.get(key)?, ctx.pipelines.tuning.rows, p.m)
        };
        return Ok(Plan {
            pipeline,
            rows_per_wg: rows as u64,
            tokens_per_wg: tokens as u64,
            chunks: mat.layout.chunks,
            groups: mat.layout.groups,
            group_shift: mat.layout.group_shift,
        });
    };
    let info = &ctx.device.info;
    if gemm {
        return coop_gemm_plan(ctx, mat, c, p);
    }
    let (t, s) = ctx
        .coop_tuning
        .unwrap_or_else(|| super::coop::choose_shape(c.stages, p.m, c.block, info.max_shared));
    let key = CoopKey {
        tiles: t,
        subgroups: s,
        m: p.m,
        zeros: mat.shape.zero_points,
        x_f16: p.x_f16,
        block: c.block,
        offsets: mat.offsets,
    };
    if key.shared_bytes() > info.max_shared {
        return Err(Error::Unsupported(format!(
            "the tensor-core kernel with {t} tiles x {s} subgroups needs {} bytes of shared memory at m = {}; the device has {}",
            key.shared_bytes(),
            p.m,
            info.max_shared
        )));
    }
    Ok(Plan {
        pipeline: ctx.pipelines.get_coop(key)?,
        rows_per_wg: 16 * t as u64,
        tokens_per_wg: p.m as u64,
        chunks: c.stages,
        groups: c.groups,
        group_shift: c.group_shift,
    })
}

/// The tensor-core GEMM's plan: the shape the context fixes, else
/// [`super::coop::choose_gemm_shape`]'s with as many K groups as the device's shared memory
/// holds.
fn coop_gemm_plan(
    ctx: &Context,
    mat: &DeviceMatrix,
    c: &crate::layout::coop::CoopLayout,
    p: &GemvParams,
) -> Result<Plan> {
    let (tiles, subgroups, tokens, ksplit) = ctx
        .coop_gemm_tuning
        .unwrap_or_else(|| super::coop::choose_gemm_shape(mat.shape.n, p.m, p.x_f16));
    let key = CoopGemmKey {
        tiles,
        subgroups,
        tokens,
        zeros: mat.shape.zero_points,
        x_f16: p.x_f16,
        block: c.block,
        offsets: mat.offsets,
        ksplit,
    };
    let max_shared = ctx.device.info.max_shared;
    let key = match ctx.coop_gemm_tuning {
        Some(_) => key,
        None => key.fitted(max_shared),
    };
    if key.shared_bytes() > max_shared {
        return Err(Error::Unsupported(format!(
            "the tensor-core GEMM with {tokens} tokens per workgroup needs {} bytes of shared memory; the device has {max_shared}",
            key.shared_bytes()
        )));
    }
    Ok(Plan {
        pipeline: ctx.pipelines.get_coop_gemm(key)?,
        rows_per_wg: key.rows() as u64,
        tokens_per_wg: tokens as u64,
        chunks: c.stages,
        groups: c.groups,
        group_shift: c.group_shift,
    })
}

/// Records `y = W x` into `cmd` (validated first; nothing is recorded on error). Binds
/// the GEMV pipeline, set 1 (x, y: pushed or cached), then per part set 0 and the push
/// constants, and dispatches. No barriers.
pub fn record(
    ctx: &Context,
    cmd: vk::CommandBuffer,
    mat: &DeviceMatrix,
    x: BufferRange,
    y: BufferRange,
    p: &GemvParams,
) -> Result<()> {
    validate(ctx, mat, &x, &y, p)?;
    let Plan {
        pipeline,
        rows_per_wg,
        tokens_per_wg,
        chunks,
        groups,
        group_shift,
    } = plan(ctx, mat, p)?;
    let cached_set = match &ctx.xy_sets {
        Some(sets) => Some(sets.lock().unwrap_or_else(|e| e.into_inner()).next(
            ctx.pipelines.xy_set,
            x,
            y,
        )?),
        None => None,
    };
    let d = &ctx.device.device;
    let layout = ctx.pipelines.layout;
    let [max_x, max_y] = ctx.limits.max_groups.map(u64::from);
    // SAFETY: cmd is in the recording state (caller's contract); every handle is valid.
    unsafe {
        d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, pipeline);
        match (cached_set, &ctx.device.push_descriptor) {
            (Some(set), _) => d.cmd_bind_descriptor_sets(
                cmd,
                vk::PipelineBindPoint::COMPUTE,
                layout,
                1,
                &[set],
                &[],
            ),
            (None, Some(push)) => {
                let infos = buffer_infos(x, y);
                let w = writes(&infos, vk::DescriptorSet::null());
                push.cmd_push_descriptor_set(cmd, vk::PipelineBindPoint::COMPUTE, layout, 1, &w);
            }
            (None, None) => return Err(Error::Internal("no way to bind x and y".into())),
        }
        for part in &mat.parts {
            d.cmd_bind_descriptor_sets(
                cmd,
                vk::PipelineBindPoint::COMPUTE,
                layout,
                0,
                &[part.set],
                &[],
            );
            let total =
                (part.rows as u64).div_ceil(rows_per_wg) * (p.m as u64).div_ceil(tokens_per_wg);
            let mut done = 0u64;
            while done < total {
                let (count, gx, gy) = dispatch_grid(total - done, [max_x, max_y]);
                let push = Push {
                    rows: part.rows as u32,
                    row_base: part.first_row as u32,
                    chunks: chunks as u32,
                    k: mat.shape.k as u32,
                    groups: groups as u32,
                    group_shift,
                    x_stride: p.x_stride as u32,
                    y_stride: p.y_stride as u32,
                    wg_count: count as u32,
                    wg_offset: done as u32,
                };
                let bytes = push.bytes_with_m(p.m);
                d.cmd_push_constants(cmd, layout, vk::ShaderStageFlags::COMPUTE, 0, &bytes);
                d.cmd_dispatch(cmd, gx as u32, gy as u32, 1);
                done += count;
            }
        }
    }
    Ok(())
}

/// Host-visible buffers for `q4vk_gemv`, grown on demand and reused.
#[derive(Default)]
pub struct Staging {
    x: Option<Buffer>,
    y: Option<Buffer>,
}

impl Staging {
    /// Bytes of staging memory held (x and y).
    pub fn bytes(&self) -> u64 {
        [&self.x, &self.y]
            .iter()
            .flat_map(|b| b.as_ref())
            .map(|b| b.size)
            .sum()
    }
}

fn ensure(ctx: &Context, slot: &mut Option<Buffer>, bytes: u64, kind: MemoryKind) -> Result<()> {
    if slot.as_ref().is_some_and(|b| b.size >= bytes) {
        return Ok(());
    }
    // Release the old buffer first: a lower peak than holding both.
    *slot = None;
    *slot = Some(Buffer::new(&ctx.device, bytes.next_multiple_of(256), kind)?);
    Ok(())
}

/// `y[m][n] = sum_k x[m][k] W[n][k]` with host memory, synchronous. `x` holds at least
/// `m·k` floats, `y` at least `m·n` (only `m·n` are written, and only on success). On a
/// context with `int_dot`, a SIMT matrix at m ≤ [`MAX_M`] gets x split into 8-bit digits
/// (in its column order) while it is staged (`vk::int_dot`), unless x has an infinite or
/// NaN element.
pub fn gemv_host(
    ctx: &Context,
    mat: &DeviceMatrix,
    x: &[f32],
    y: &mut [f32],
    m: u32,
) -> Result<()> {
    let (n, k) = (mat.shape.n, mat.shape.k);
    let (xn, yn) = (m as usize * k, m as usize * n);
    if x.len() < xn || y.len() < yn {
        return Err(Error::BufferTooSmall(format!(
            "x holds {} floats and y {}; m = {m} needs {xn} and {yn}",
            x.len(),
            y.len()
        )));
    }
    let mut p = GemvParams {
        m,
        x_f16: false,
        x_stride: k as u64,
        y_stride: n as u64,
        x_gathered: mat.k_order.is_some(),
        x_digits: false,
    };
    // Everything that can refuse the call runs before the staging buffers grow.
    check_params(ctx, mat, &p)?;
    plan(ctx, mat, &p)?;
    let row_vectors = super::int_dot::row_vectors(k);
    let digits = GemvParams {
        x_stride: row_vectors as u64,
        x_digits: true,
        ..p
    };
    // The digits' kernel where it can run; a refusal (its pipeline included) keeps the f32
    // one.
    let try_digits = ctx.int_dot
        && mat.coop.is_none()
        && !runs_gemm(ctx, mat, m)
        && check_params(ctx, mat, &digits).is_ok()
        && plan(ctx, mat, &digits).is_ok();
    let digit_bytes = if try_digits {
        16 * m as usize * row_vectors
    } else {
        0
    };
    let mut exec = ctx.exec.lock().unwrap_or_else(|e| e.into_inner());
    let exec = &mut *exec;
    // After a failed wait the device may still read the staging buffers: touch nothing.
    exec.submitter.check_usable()?;
    let x_bytes = (4 * xn).max(digit_bytes);
    ensure(ctx, &mut exec.staging.x, x_bytes as u64, MemoryKind::Upload)?;
    ensure(
        ctx,
        &mut exec.staging.y,
        4 * yn as u64,
        MemoryKind::Readback,
    )?;
    let xb = exec.staging.x.as_mut().expect("x");
    if try_digits {
        xb.fill(digit_bytes, |staged| {
            // All rows or none: a row with an infinite or NaN element keeps the f32 kernel.
            let order = mat.k_order.as_ref().map(|o| o.inputs.as_slice());
            if super::int_dot::encode(x, k, m as usize, order, staged) {
                p = digits;
            }
        });
    }
    if !p.x_digits {
        // SAFETY: f32 slice viewed as bytes.
        let xs = unsafe { std::slice::from_raw_parts(x.as_ptr().cast::<u8>(), 4 * xn) };
        xb.fill(4 * xn, |staged| match &mat.k_order {
            // A matrix with a column order gets x in that order, gathered straight into the
            // staging buffer once per call.
            Some(order) => {
                for (i, v) in staged.chunks_exact_mut(4).enumerate() {
                    let input = i - i % k + order.inputs[i % k] as usize;
                    v.copy_from_slice(&x[input].to_ne_bytes());
                }
            }
            None => staged.copy_from_slice(xs),
        });
    }
    let (xb, yb) = (
        exec.staging.x.as_ref().expect("x"),
        exec.staging.y.as_ref().expect("y"),
    );
    let xr = BufferRange {
        buffer: xb.buffer,
        offset: 0,
        range: if p.x_digits { digit_bytes } else { 4 * xn } as u64,
    };
    let yr = BufferRange {
        buffer: yb.buffer,
        offset: 0,
        range: 4 * yn as u64,
    };
    let lock = ctx.queue_lock;
    exec.submitter.run(lock.as_ref(), |cmd| {
        record(ctx, cmd, mat, xr, yr, &p)?;
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
