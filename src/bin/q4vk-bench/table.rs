//! One row of the table: cold and hot GEMV times of a matrix at m activation rows, its
//! relative error, and the naive kernel's time at m = 1.

use super::*;
use q4vk::cpu::reference;
use q4vk::error::Result;
use q4vk::quant::q4::Q4Data;
use q4vk::vk::context::Context;
use q4vk::vk::gemv::{self, BufferRange, GemvParams};
use q4vk::vk::kernel::Kernel;
use q4vk::vk::matrix::{upload, DeviceMatrix};
use q4vk::vk::memory::{Buffer, MemoryKind};
use q4vk::vk::shaders;

pub(crate) struct Row {
    pub(crate) n: usize,
    pub(crate) k: usize,
    pub(crate) m: u32,
    pub(crate) cold_us: f64,
    pub(crate) hot_us: f64,
    pub(crate) bytes: f64,
    pub(crate) naive_us: f64,
    pub(crate) rel_err: f64,
    pub(crate) copy_now: f64,
    pub(crate) per_copy: Vec<f64>,
    /// A GEMM kernel ran.
    pub(crate) gemm: bool,
}

/// Cold and hot GEMV times of `data` (with per-group `offsets`, if any) at `m` activation
/// rows `x` (µs), the bytes one GEMV must move, the relative error of its result, the
/// cold time per copy, and whether a GEMM kernel ran.
pub(crate) fn time_gemv(
    ctx: &Context,
    opt: &Options,
    (data, offsets): (&Q4Data, Option<&[f32]>),
    x: &[f32],
    m: u32,
    reference: Option<&[f64]>,
    probe: &Copy,
) -> Result<(f64, f64, f64, f64, Vec<f64>, bool)> {
    let (n, k) = (data.shape.n, data.shape.k);
    let k_order = opt.act_order.then(|| column_order(k));
    let first = DeviceMatrix::new(ctx, data, offsets, k_order.as_deref())?;
    let bytes_per = first.device_bytes();
    let copies = (opt.cold_bytes.div_ceil(bytes_per) + 1) as usize;
    let mut mats = vec![first];
    for _ in 1..copies {
        mats.push(DeviceMatrix::new(ctx, data, offsets, k_order.as_deref())?);
    }
    // f16 activations: x holds f16 values (rounded by the caller), uploaded as f16.
    let xv: Vec<u8> = if opt.x_f16 {
        x.iter()
            .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
            .collect()
    } else {
        x.iter().flat_map(|v| v.to_le_bytes()).collect()
    };
    let xb = upload(ctx, &xv)?;
    let mb = m as u64;
    let yb = Buffer::new(&ctx.device, 4 * mb * n as u64, MemoryKind::Device)?;
    let xr = BufferRange {
        buffer: xb.buffer,
        offset: 0,
        range: xv.len() as u64,
    };
    let yr = BufferRange {
        buffer: yb.buffer,
        offset: 0,
        range: 4 * mb * n as u64,
    };
    let p = GemvParams {
        m,
        x_f16: opt.x_f16,
        x_stride: k as u64,
        y_stride: n as u64,
        // --act-order times the kernels that gather x (q4vk_cmd_gemv's; q4vk_gemv gathers
        // on the host and runs the plain kernel).
        x_gathered: false,
    };
    // Correctness of what is timed: y of the recorded kernel, read back, against the f64
    // reference (for m > 8, of three tokens: the first, the middle and the last).
    let y = run_once(ctx, &mats[0], xr, &p, n)?;
    let tokens: Vec<usize> = if m > 8 {
        vec![0, m as usize / 2, m as usize - 1]
    } else {
        (0..m as usize).collect()
    };
    let pick = |v: &[f32], len: usize| -> Vec<f32> {
        tokens
            .iter()
            .flat_map(|&t| v[t * len..(t + 1) * len].iter().copied())
            .collect()
    };
    let (mut xs, ys) = (pick(x, k), pick(&y, n));
    if let Some(order) = &k_order {
        // Column j of the matrix meets input order[j].
        xs = xs
            .chunks_exact(k)
            .flat_map(|row| order.iter().map(|&i| row[i as usize]))
            .collect();
    }
    let rel_err = match (reference, offsets) {
        (Some(r), _) => reference::relative_error(&y, r),
        (None, None) => reference::relative_error(&ys, &reference::gemv(data, &xs, tokens.len())),
        (None, Some(o)) => reference::relative_error(
            &ys,
            &reference::gemv_with_offsets(data, o, &xs, tokens.len()),
        ),
    };
    let warm = Some((probe, opt.warm));
    let cold = time_each(ctx, opt.iters.max(copies), warm, |cmd, i| {
        gemv::record(ctx, cmd, &mats[i % copies], xr, yr, &p)
    })?;
    let per_copy: Vec<f64> = (0..copies)
        .map(|c| median(cold.iter().skip(c).step_by(copies).copied().collect()))
        .collect();
    let cold_us = median(cold);
    let hot_us = time_runs(ctx, opt.iters, warm, |cmd, _| {
        gemv::record(ctx, cmd, &mats[0], xr, yr, &p)
    })?;
    let bytes = (bytes_per + xv.len() as u64 + 4 * mb * n as u64) as f64;
    let gemm = gemv::runs_gemm(ctx, &mats[0], m);
    Ok((cold_us, hot_us, bytes, rel_err, per_copy, gemm))
}

/// A fixed pseudo-random permutation of `0..k` (an act-order matrix's column order).
fn column_order(k: usize) -> Vec<u32> {
    let mut order: Vec<u32> = (0..k as u32).collect();
    let mut state = 0x2545F4914F6CDD1Du64;
    for i in (1..k).rev() {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        order.swap(i, (state >> 33) as usize % (i + 1));
    }
    order
}

/// y (`m` rows of `n`) of one recorded GEMV of `mat`, read back.
fn run_once(
    ctx: &Context,
    mat: &DeviceMatrix,
    x: BufferRange,
    p: &GemvParams,
    n: usize,
) -> Result<Vec<f32>> {
    let len = p.m as usize * n;
    let yb = Buffer::new(&ctx.device, 4 * len as u64, MemoryKind::Readback)?;
    yb.write(0, &vec![0xFF; 4 * len]);
    let y = BufferRange {
        buffer: yb.buffer,
        offset: 0,
        range: 4 * len as u64,
    };
    time_runs(ctx, 1, None, |cmd, _| {
        gemv::record(ctx, cmd, mat, x, y, p)?;
        let [src, dst] = q4vk::vk::submit::SHADER_TO_HOST;
        // SAFETY: `cmd` is recording.
        unsafe { q4vk::vk::submit::record_barrier(&ctx.device.device, cmd, src, dst) };
        Ok(())
    })?;
    let mut bytes = vec![0u8; 4 * len];
    yb.read(0, &mut bytes);
    Ok(bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect())
}

/// Cold time of the naive kernel (u32 words of 8 nibbles, per-row scale and zero), with
/// its own rotated copies.
pub(crate) fn time_naive(
    ctx: &Context,
    opt: &Options,
    n: usize,
    k: usize,
    x: &[f32],
    seed: &mut u64,
    probe: &Copy,
) -> Result<f64> {
    let naive_bytes = (n * k / 2 + 8 * n) as u64;
    let copies = (opt.cold_bytes.div_ceil(naive_bytes) + 1) as usize;
    let kernel = Kernel::new(&ctx.device, shaders::NAIVE, 4, 8, copies as u32)?;
    let sz: Vec<u8> = (0..n)
        .flat_map(|_| [0.01f32.to_le_bytes(), 8.0f32.to_le_bytes()].concat())
        .collect();
    let szb = upload(ctx, &sz)?;
    let xv: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let xb = upload(ctx, &xv)?;
    let yb = Buffer::new(&ctx.device, 4 * n as u64, MemoryKind::Device)?;
    let mut words = vec![0u8; n * k / 2];
    fill_random(&mut words, seed);
    let mut naive = Vec::new();
    for _ in 0..copies {
        let w = upload(ctx, &words)?;
        let set = kernel.set(&[&w, &szb, &xb, &yb])?;
        naive.push((w, set));
    }
    let push: Vec<u8> = [n as u32, k as u32]
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    let iters = if opt.quick { 3 } else { opt.iters.min(20) }.max(copies);
    time_runs(ctx, iters, Some((probe, opt.warm)), |cmd, i| {
        // SAFETY: `cmd` is recording; the buffers outlive the submission.
        unsafe { kernel.record(cmd, naive[i % copies].1, &push, (n as u32).div_ceil(64)) };
        Ok(())
    })
}

/// One table row: `data` at `m` activation rows (the naive kernel at m = 1 only).
pub(crate) fn bench_shape(
    ctx: &Context,
    opt: &Options,
    data: &Q4Data,
    offsets: Option<&[f32]>,
    m: u32,
    seed: &mut u64,
    probe: &Copy,
) -> Result<Row> {
    let (n, k) = (data.shape.n, data.shape.k);
    let x: Vec<f32> = activations(m as usize * k)
        .into_iter()
        .map(|v| {
            if opt.x_f16 {
                half::f16::from_f32(v).to_f32()
            } else {
                v
            }
        })
        .collect();
    let copy_now = probe.bandwidth(ctx, opt.iters.min(20), 0)?;
    let (cold_us, hot_us, bytes, rel_err, per_copy, gemm) =
        time_gemv(ctx, opt, (data, offsets), &x, m, None, probe)?;
    let naive_us = if m == 1 {
        time_naive(ctx, opt, n, k, &x, seed, probe)?
    } else {
        f64::NAN
    };
    Ok(Row {
        n,
        k,
        m,
        cold_us,
        hot_us,
        bytes,
        naive_us,
        rel_err,
        copy_now,
        per_copy,
        gemm,
    })
}
