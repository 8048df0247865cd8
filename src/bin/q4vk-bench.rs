//! q4vk-bench: GPU timing of the fused int4 GEMV (m = 1, 2, 4, 8; g = 128, f32 activations)
//! against this device's compute-shader copy bandwidth and a naive one-invocation-per-row
//! kernel (m = 1), all measured in the same run with timestamp queries, with the kernel
//! path the context chose (tensor cores "coopmat", "subgroup" or "portable"). Prints a
//! markdown table; `--m 1,8` picks the activation counts, `--no-coop` forces the SIMT
//! kernels, `--coop T,S` fixes the tensor-core kernel's tiles and subgroups, and
//! `--coop-sweep` times it over a grid of those (bench/RESULTS.md); `Q4VK_BENCH_LOG=1`
//! prints the context's log.
//!
//! `q4vk-bench` runs the target shapes of `bench/RESULTS.md` (a GPU with ≥ 2 GB free); `q4vk-bench --quick`
//! runs them at a quarter of N and K with fewer iterations (lavapipe, CI).
//! `--workgroup W --rows R` overrides the kernel's workgroup size and rows per workgroup,
//! `--unroll U` its chunks per row per step, `--split S` its invocations per chunk; `--shapes 3,4` runs only those rows of the
//! table; `--sweep` times the four target cases (28672 × 8192 and 8192 × 28672 cold,
//! 11008 × 4096 and 4096 × 11008 hot) over a grid of (W, R, U), each in a fresh context,
//! to pick the per-device defaults. Every timed series runs after ~1000 untimed 256 MB
//! copies in the same command buffer (the GPU lowers its SM clock when idle); each row of
//! the full table also times the copy kernel as the GPU is found, before that warm-up
//! ("copy now"), to show the state a row started from.
//!
//! Cold: enough copies of the weights rotate that every timed run reads data no run of
//! the last ≥ 256 MB (quick: 32 MB) touched. Hot: the same copy every run.

use ash::vk;
use q4vk::cpu::reference;
use q4vk::error::{Error, Result};
use q4vk::quant::q4::{Q4Data, Q4Shape, ScaleType};
use q4vk::vk::context::{Context, ContextConfig};
use q4vk::vk::gemv::{self, BufferRange, GemvParams};
use q4vk::vk::kernel::Kernel;
use q4vk::vk::log::Logger;
use q4vk::vk::matrix::{upload, DeviceMatrix};
use q4vk::vk::memory::{Buffer, MemoryKind};
use q4vk::vk::shaders;
use std::borrow::Cow;

const SHAPES: [(usize, usize); 5] = [
    (4096, 4096),
    (11008, 4096),
    (4096, 11008),
    (28672, 8192),
    (8192, 28672),
];

#[derive(Clone)]
struct Options {
    quick: bool,
    sweep: bool,
    /// Time the tensor-core kernel over (tiles, subgroups) instead of the table.
    coop_sweep: bool,
    /// Activation counts of the table.
    ms: Vec<u32>,
    /// Fixed (tiles, subgroups) of the tensor-core kernel.
    coop: Option<(u32, u32)>,
    /// SIMT kernels only.
    no_coop: bool,
    /// Matrices in the imported GGUF Q4_K / Q4_1 form: groups of 32, f32 scales and
    /// per-group f32 offsets (w = s·u + o).
    offsets: bool,
    tuning: Option<(u32, u32)>,
    unroll: Option<u32>,
    split: Option<u32>,
    shapes: Option<Vec<usize>>,
    iters: usize,
    /// Untimed 256 MB (quick: 16 MB) copies before each timed series.
    warm: usize,
    cold_bytes: u64,
}

/// Times `iters` runs of `record(cmd, i)`, each between two timestamps and separated by
/// full compute barriers; returns the median in microseconds. With `warm`, the same
/// command buffer first runs `warm.0`'s copy `warm.1` times, untimed: the GPU drops its
/// SM clock when idle or lightly loaded (450 MHz seen on the H200 between runs, and copy
/// bandwidth measured at 40% right after the naive kernel), and a timed run must not pay
/// for the ramp.
fn time_runs(
    ctx: &Context,
    iters: usize,
    warm: Option<(&Copy, usize)>,
    record: impl FnMut(vk::CommandBuffer, usize) -> Result<()>,
) -> Result<f64> {
    Ok(median(time_each(ctx, iters, warm, record)?))
}

fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(|a, b| a.total_cmp(b));
    times[times.len() / 2]
}

/// [`time_runs`]' times (µs) in run order.
fn time_each(
    ctx: &Context,
    iters: usize,
    warm: Option<(&Copy, usize)>,
    mut record: impl FnMut(vk::CommandBuffer, usize) -> Result<()>,
) -> Result<Vec<f64>> {
    let d = &ctx.device.device;
    let count = 2 * iters as u32;
    let pool = unsafe {
        d.create_query_pool(
            &vk::QueryPoolCreateInfo::default()
                .query_type(vk::QueryType::TIMESTAMP)
                .query_count(count),
            None,
        )
    }
    .map_err(|e| Error::vk("vkCreateQueryPool", e))?;
    let result = ctx.submit(|cmd| {
        unsafe { d.cmd_reset_query_pool(cmd, pool, 0, count) };
        if let Some((copy, n)) = warm {
            for _ in 0..n {
                copy.record(cmd);
            }
        }
        let barrier = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::SHADER_READ)
            .dst_access_mask(vk::AccessFlags::SHADER_WRITE | vk::AccessFlags::SHADER_READ)];
        for i in 0..iters {
            unsafe {
                d.cmd_pipeline_barrier(
                    cmd,
                    vk::PipelineStageFlags::COMPUTE_SHADER,
                    vk::PipelineStageFlags::COMPUTE_SHADER,
                    vk::DependencyFlags::empty(),
                    &barrier,
                    &[],
                    &[],
                );
                d.cmd_write_timestamp(cmd, vk::PipelineStageFlags::TOP_OF_PIPE, pool, 2 * i as u32);
            }
            record(cmd, i)?;
            unsafe {
                d.cmd_write_timestamp(
                    cmd,
                    vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                    pool,
                    2 * i as u32 + 1,
                )
            };
        }
        Ok(())
    });
    let mut stamps = vec![0u64; count as usize];
    let read = result.and_then(|_| {
        unsafe {
            d.get_query_pool_results(
                pool,
                0,
                &mut stamps,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
            )
        }
        .map_err(|e| Error::vk("vkGetQueryPoolResults", e))
    });
    unsafe { d.destroy_query_pool(pool, None) };
    read?;
    let period = ctx.device.info.timestamp_period as f64;
    let times: Vec<f64> = stamps
        .chunks_exact(2)
        .map(|p| p[1].wrapping_sub(p[0]) as f64 * period / 1000.0)
        .collect();
    Ok(times)
}

fn fill_random(bytes: &mut [u8], seed: &mut u64) {
    for chunk in bytes.chunks_mut(8) {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        let v = seed.to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}

fn random_matrix(n: usize, k: usize, seed: &mut u64) -> Q4Data<'static> {
    random_matrix_grouped(n, k, 128, seed)
}

fn random_matrix_grouped(n: usize, k: usize, group: i32, seed: &mut u64) -> Q4Data<'static> {
    let shape = Q4Shape::new(n as u64, k as u64, group, 0).expect("valid shape");
    let mut weight = vec![0u8; shape.weight_bytes()];
    fill_random(&mut weight, seed);
    let scales: Vec<u8> = (0..shape.scale_count())
        .flat_map(|i| half::f16::from_f32(0.01 + (i % 13) as f32 * 0.001).to_le_bytes())
        .collect();
    Q4Data {
        shape,
        weight: Cow::Owned(weight),
        scale_type: ScaleType::F16,
        scales: Cow::Owned(scales),
        zeros: Cow::Owned(Vec::new()),
    }
}

/// The imported Q4_K / Q4_1 form of a random matrix: groups of 32, f32 scales (the f16
/// values widened) and per-group offsets.
fn random_offset_matrix(n: usize, k: usize, seed: &mut u64) -> (Q4Data<'static>, Vec<f32>) {
    let mut data = random_matrix_grouped(n, k, 32, seed);
    let scales: Vec<u8> = (0..data.shape.scale_count())
        .flat_map(|i| data.scale(i).to_le_bytes())
        .collect();
    data.scales = Cow::Owned(scales);
    data.scale_type = ScaleType::F32;
    let offsets = (0..data.shape.scale_count())
        .map(|i| -0.08 + (i % 17) as f32 * 0.001)
        .collect();
    (data, offsets)
}

/// f64 GEMV of w = s·u + o (the offset form; u unsigned, no zero point).
fn offset_reference(data: &Q4Data, offsets: &[f32], x: &[f32], m: usize) -> Vec<f64> {
    let (n, k) = (data.shape.n, data.shape.k);
    let (groups, group) = (data.shape.groups(), data.shape.group_size);
    let mut y = vec![0.0f64; m * n];
    let mut w = vec![0.0f64; k];
    for row in 0..n {
        for (kk, wk) in w.iter_mut().enumerate() {
            let u = (data.weight[row * data.shape.row_bytes() + kk / 2] >> (4 * (kk % 2))) & 15;
            let g = row * groups + kk / group;
            *wk = data.scale(g) as f64 * u as f64 + offsets[g] as f64;
        }
        for mi in 0..m {
            y[mi * n + row] = w.iter().zip(&x[mi * k..]).map(|(a, &b)| a * b as f64).sum();
        }
    }
    y
}

/// The copy kernel on two device buffers.
struct Copy {
    kernel: Kernel,
    set: vk::DescriptorSet,
    size: u64,
    _buffers: [Buffer; 2],
}

impl Copy {
    fn new(ctx: &Context, size: u64) -> Result<Copy> {
        let size = size.min(ctx.device.info.max_storage_range / 16 * 16);
        let src = Buffer::new(&ctx.device, size, MemoryKind::Device)?;
        let dst = Buffer::new(&ctx.device, size, MemoryKind::Device)?;
        let kernel = Kernel::new(&ctx.device, shaders::COPY, 2, 4, 1)?;
        let set = kernel.set(&[&src, &dst])?;
        Ok(Copy {
            kernel,
            set,
            size,
            _buffers: [src, dst],
        })
    }

    /// Records one copy of the whole buffer.
    fn record(&self, cmd: vk::CommandBuffer) {
        let count = (self.size / 16) as u32;
        let groups = count.div_ceil(256).min(65535);
        // SAFETY: `cmd` is recording (the bench's own submissions); the buffers live as
        // long as `self`.
        unsafe {
            self.kernel
                .record(cmd, self.set, &count.to_ne_bytes(), groups)
        };
    }

    /// Bytes read + written per second (GB/s), median of `iters` copies (after `warm`
    /// untimed ones in the same command buffer).
    fn bandwidth(&self, ctx: &Context, iters: usize, warm: usize) -> Result<f64> {
        let us = time_runs(ctx, iters, Some((self, warm)), |cmd, _| {
            self.record(cmd);
            Ok(())
        })?;
        Ok(2.0 * self.size as f64 / us / 1e3)
    }
}

fn copy_bandwidth(ctx: &Context, opt: &Options) -> Result<f64> {
    let size = if opt.quick { 64u64 << 20 } else { 1u64 << 30 };
    Copy::new(ctx, size)?.bandwidth(ctx, opt.iters, opt.warm / 4)
}

struct Row {
    n: usize,
    k: usize,
    m: u32,
    cold_us: f64,
    hot_us: f64,
    bytes: f64,
    naive_us: f64,
    rel_err: f64,
    copy_now: f64,
    per_copy: Vec<f64>,
}

/// Cold and hot GEMV times of `data` (with per-group `offsets`, if any) at `m` activation
/// rows `x` (µs), the bytes one GEMV must move, and the relative error of its result.
fn time_gemv(
    ctx: &Context,
    opt: &Options,
    (data, offsets): (&Q4Data, Option<&[f32]>),
    x: &[f32],
    m: u32,
    reference: Option<&[f64]>,
    probe: &Copy,
) -> Result<(f64, f64, f64, f64, Vec<f64>)> {
    let (n, k) = (data.shape.n, data.shape.k);
    let first = DeviceMatrix::new(ctx, data, offsets)?;
    let bytes_per = first.device_bytes();
    let copies = (opt.cold_bytes.div_ceil(bytes_per) + 1) as usize;
    let mut mats = vec![first];
    for _ in 1..copies {
        mats.push(DeviceMatrix::new(ctx, data, offsets)?);
    }
    let xv: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let xb = upload(ctx, &xv)?;
    let mb = m as u64;
    let yb = Buffer::new(&ctx.device, 4 * mb * n as u64, MemoryKind::Device)?;
    let xr = BufferRange {
        buffer: xb.buffer,
        offset: 0,
        range: 4 * mb * k as u64,
    };
    let yr = BufferRange {
        buffer: yb.buffer,
        offset: 0,
        range: 4 * mb * n as u64,
    };
    let p = GemvParams {
        m,
        x_f16: false,
        x_stride: k as u64,
        y_stride: n as u64,
    };
    // Correctness of what is timed.
    let mut y = vec![f32::NAN; m as usize * n];
    gemv::gemv_host(ctx, &mats[0], x, &mut y, m)?;
    let rel_err = match (reference, offsets) {
        (Some(r), _) => reference::relative_error(&y, r),
        (None, None) => reference::relative_error(&y, &reference::gemv(data, x, m as usize)),
        (None, Some(o)) => reference::relative_error(&y, &offset_reference(data, o, x, m as usize)),
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
    let bytes = (bytes_per + 4 * mb * (k + n) as u64) as f64;
    Ok((cold_us, hot_us, bytes, rel_err, per_copy))
}

/// Cold time of the naive kernel (u32 words of 8 nibbles, per-row scale and zero), with
/// its own rotated copies.
fn time_naive(
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
fn bench_shape(
    ctx: &Context,
    opt: &Options,
    data: &Q4Data,
    offsets: Option<&[f32]>,
    m: u32,
    seed: &mut u64,
    probe: &Copy,
) -> Result<Row> {
    let (n, k) = (data.shape.n, data.shape.k);
    let x = activations(m as usize * k);
    let copy_now = probe.bandwidth(ctx, opt.iters.min(20), 0)?;
    let (cold_us, hot_us, bytes, rel_err, per_copy) =
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
    })
}

fn activations(k: usize) -> Vec<f32> {
    (0..k)
        .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
        .collect()
}

fn main() {
    let usage = || -> ! {
        eprintln!("usage: q4vk-bench [--quick] [--sweep | --coop-sweep] [--workgroup W --rows R] [--unroll U] [--split S] [--coop T,S | --no-coop] [--offsets] [--m M,..] [--shapes I,J,..]");
        std::process::exit(2)
    };
    let (mut quick, mut sweep, mut wg, mut rows) = (false, false, None, None);
    let (mut unroll, mut split, mut shapes) = (None, None, None);
    let (mut coop_sweep, mut coop, mut no_coop, mut ms) = (false, None, false, None);
    let mut offsets = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut number = || {
            args.next()
                .and_then(|v| v.parse::<u32>().ok())
                .unwrap_or_else(|| usage())
        };
        match a.as_str() {
            "--quick" => quick = true,
            "--sweep" => sweep = true,
            "--coop-sweep" => coop_sweep = true,
            "--no-coop" => no_coop = true,
            "--offsets" => offsets = true,
            "--coop" => {
                let v: Option<Vec<u32>> = args
                    .next()
                    .and_then(|v| v.split(',').map(|i| i.parse().ok()).collect());
                coop = match v.as_deref() {
                    Some(&[t, s]) => Some((t, s)),
                    _ => usage(),
                };
            }
            "--m" => {
                let v: Option<Vec<u32>> = args.next().and_then(|v| {
                    v.split(',')
                        .map(|i| i.parse().ok().filter(|m| (1..=8).contains(m)))
                        .collect()
                });
                ms = Some(v.unwrap_or_else(|| usage()));
            }
            "--workgroup" => wg = Some(number()),
            "--rows" => rows = Some(number()),
            "--unroll" => unroll = Some(number()),
            "--split" => split = Some(number()),
            "--shapes" => {
                let list: Option<Vec<usize>> = args.next().and_then(|v| {
                    v.split(',')
                        .map(|i| i.parse().ok().filter(|&i: &usize| i < SHAPES.len()))
                        .collect()
                });
                shapes = Some(list.unwrap_or_else(|| usage()));
            }
            _ => usage(),
        }
    }
    let tuning = match (wg, rows) {
        (None, None) => None,
        (Some(w), Some(r)) => Some((w, r)),
        _ => usage(),
    };
    let opt = Options {
        quick,
        sweep,
        coop_sweep,
        ms: ms.unwrap_or_else(|| if quick { vec![1, 8] } else { vec![1, 2, 4, 8] }),
        coop,
        no_coop,
        offsets,
        tuning,
        unroll,
        split,
        shapes,
        iters: if quick { 5 } else { 100 },
        warm: if quick { 1 } else { 1000 },
        cold_bytes: if quick { 32 << 20 } else { 256 << 20 },
    };
    if let Err(e) = run(&opt) {
        eprintln!("q4vk-bench: {e}");
        std::process::exit(1);
    }
}

/// GB/s with three significant digits for small values.
fn rate(gbs: f64) -> String {
    if gbs < 10.0 {
        format!("{gbs:.2}")
    } else {
        format!("{gbs:.0}")
    }
}

fn context(
    opt: &Options,
    tuning: Option<(u32, u32)>,
    unroll: Option<u32>,
    split: Option<u32>,
) -> Result<Context> {
    let env = q4vk::ffi::context::kill_switches();
    Context::new(
        ContextConfig {
            device_index: -1,
            portable: env.portable,
            no_push_descriptors: env.no_push_descriptors,
            tuning,
            unroll,
            split,
            no_coop: opt.no_coop || env.no_coopmat,
            coop_tuning: opt.coop,
            ..Default::default()
        },
        if std::env::var("Q4VK_BENCH_LOG").is_ok_and(|v| v == "1") {
            Logger::new(Some(log_to_stderr), std::ptr::null_mut(), 2)
        } else {
            Logger::silent()
        },
    )
}

/// Log callback of `Q4VK_BENCH_LOG=1`: every message up to INFO on stderr.
unsafe extern "C" fn log_to_stderr(
    _: *mut std::ffi::c_void,
    _: u32,
    text: *const std::ffi::c_char,
) {
    // SAFETY: q4vk passes a NUL-terminated message.
    eprintln!(
        "q4vk: {}",
        unsafe { std::ffi::CStr::from_ptr(text) }.to_string_lossy()
    );
}

/// (workgroup, rows, unroll, split) grid of `--sweep`.
const GRID: [(u32, u32, u32, u32); 24] = [
    (128, 8, 1, 1),
    (128, 16, 1, 1),
    (64, 8, 1, 1),
    (128, 8, 1, 2),
    (128, 8, 1, 4),
    (128, 8, 1, 8),
    (128, 16, 1, 2),
    (128, 16, 1, 4),
    (128, 16, 1, 8),
    (128, 16, 1, 16),
    (128, 32, 1, 4),
    (128, 32, 1, 8),
    (64, 16, 1, 4),
    (64, 16, 1, 8),
    (64, 32, 1, 8),
    (256, 16, 1, 4),
    (256, 16, 1, 8),
    (256, 32, 1, 8),
    (128, 16, 2, 4),
    (128, 16, 2, 8),
    (64, 16, 2, 4),
    (32, 16, 1, 4),
    (32, 16, 2, 8),
    (256, 8, 1, 2),
];

/// Times the four target cases over a grid of workgroup shapes, each in a fresh context.
fn sweep(opt: &Options) -> Result<()> {
    let div = if opt.quick { 4 } else { 1 };
    let mut seed = 0x51u64;
    let cases: Vec<(Q4Data, Vec<f32>, Vec<f64>, bool)> = [
        (28672, 8192, true),
        (8192, 28672, true),
        (11008, 4096, false),
        (4096, 11008, false),
    ]
    .into_iter()
    .map(|(n, k, cold)| {
        let data = random_matrix(n / div, k / div, &mut seed);
        let x = activations(data.shape.k);
        let r = reference::gemv(&data, &x, 1);
        (data, x, r, cold)
    })
    .collect();
    print!("| workgroup | rows | unroll | split |");
    for (d, _, _, cold) in &cases {
        let mode = if *cold { "cold" } else { "hot" };
        print!(" {} × {} {mode} µs |", d.shape.n, d.shape.k);
    }
    println!();
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for (wg, rows, unroll, split) in GRID {
        // A workgroup smaller than this device's subgroup is refused: skip it.
        let Ok(ctx) = context(opt, Some((wg, rows)), Some(unroll), Some(split)) else {
            continue;
        };
        let probe = Copy::new(&ctx, if opt.quick { 16 << 20 } else { 256 << 20 })?;
        print!("| {wg} | {rows} | {unroll} | {split} |");
        for (d, x, r, cold) in &cases {
            let (c, h, _, e, _) = time_gemv(&ctx, opt, (d, None), x, 1, Some(r), &probe)?;
            if e > 1e-5 {
                print!(" wrong ({e:.1e}) |");
                continue;
            }
            print!(" {:.1} |", if *cold { c } else { h });
        }
        println!();
    }
    Ok(())
}

/// (row tiles, subgroups) grid of `--coop-sweep`.
const COOP_GRID: [(u32, u32); 10] = [
    (1, 4),
    (1, 8),
    (1, 16),
    (2, 2),
    (2, 4),
    (2, 8),
    (2, 16),
    (4, 2),
    (4, 4),
    (4, 8),
];

/// One case of `--coop-sweep`: matrix, m, x, the f64 reference, cold (else hot).
type SweepCase = (Q4Data<'static>, u32, Vec<f32>, Vec<f64>, bool);

/// Times the tensor-core kernel over [`COOP_GRID`] on the target cases (m = 1, and m = 8
/// on 28672 × 8192 cold), each in a fresh context; the per-matrix default first.
fn coop_sweep(opt: &Options) -> Result<()> {
    let div = if opt.quick { 4 } else { 1 };
    let mut seed = 0x51u64;
    let cases: Vec<SweepCase> = [
        (28672, 8192, 1, true),
        (8192, 28672, 1, true),
        (11008, 4096, 1, false),
        (4096, 11008, 1, false),
        (28672, 8192, 8, true),
    ]
    .into_iter()
    .map(|(n, k, m, cold)| {
        let data = random_matrix(n / div, k / div, &mut seed);
        let x = activations(m as usize * data.shape.k);
        let r = reference::gemv(&data, &x, m as usize);
        (data, m, x, r, cold)
    })
    .collect();
    print!("| tiles | subgroups |");
    for (d, m, _, _, cold) in &cases {
        let mode = if *cold { "cold" } else { "hot" };
        print!(" {} × {} m={m} {mode} µs |", d.shape.n, d.shape.k);
    }
    println!();
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let grid = std::iter::once(None).chain(COOP_GRID.iter().map(|&g| Some(g)));
    for g in grid {
        let o = Options {
            coop: g,
            ..opt.clone()
        };
        let ctx = context(&o, None, None, None)?;
        if !ctx.coop {
            return Err(Error::Unsupported(
                "this device has no tensor-core path".into(),
            ));
        }
        let probe = Copy::new(&ctx, if opt.quick { 16 << 20 } else { 256 << 20 })?;
        match g {
            Some((t, s)) => print!("| {t} | {s} |"),
            None => print!("| default | default |"),
        }
        for (d, m, x, r, cold) in &cases {
            match time_gemv(&ctx, opt, (d, None), x, *m, Some(r), &probe) {
                Ok((_, _, _, e, _)) if e > 1e-5 => print!(" wrong ({e:.1e}) |"),
                Ok((c, h, _, _, _)) => print!(" {:.1} |", if *cold { c } else { h }),
                Err(e) => print!(" {e} |"),
            }
        }
        println!();
    }
    Ok(())
}

fn run(opt: &Options) -> Result<()> {
    if opt.sweep {
        return sweep(opt);
    }
    if opt.coop_sweep {
        return coop_sweep(opt);
    }
    let ctx = context(opt, opt.tuning, opt.unroll, opt.split)?;
    if !ctx.device.timestamps {
        return Err(Error::Unsupported(
            "the compute queue has no timestamps".into(),
        ));
    }
    let copy = copy_bandwidth(&ctx, opt)?;
    let t = ctx.pipelines.tuning;
    println!(
        "device: {} (path: {}; SIMT kernels: workgroup {}, {} rows/workgroup, unroll {}, split {})",
        ctx.device_name(),
        ctx.kernel_path(),
        t.workgroup,
        t.rows,
        t.unroll,
        t.split
    );
    println!(
        "compute-shader copy (uvec4, read + write): {} GB/s",
        rate(copy)
    );
    println!(
        "mode: {}; group 128, symmetric, f16 scales, f32 activations; medians of timestamp pairs",
        if opt.quick {
            "quick (N/4, K/4)"
        } else {
            "full"
        }
    );
    println!();
    println!("| N × K | m | path | cold µs | cold GB/s | % of copy | hot µs | hot GB/s | naive cold µs | speed-up vs naive | rel. err | copy now GB/s | cold µs per copy: min – max (copies) |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut seed = 0x9E3779B97F4A7C15u64;
    let probe = Copy::new(&ctx, if opt.quick { 16 << 20 } else { 256 << 20 })?;
    let all: Vec<usize> = (0..SHAPES.len()).collect();
    for &i in opt.shapes.as_ref().unwrap_or(&all) {
        let (n, k) = SHAPES[i];
        let (n, k) = if opt.quick { (n / 4, k / 4) } else { (n, k) };
        let (data, offsets) = if opt.offsets {
            let (d, o) = random_offset_matrix(n, k, &mut seed);
            (d, Some(o))
        } else {
            (random_matrix(n, k, &mut seed), None)
        };
        for &m in &opt.ms {
            let r = bench_shape(&ctx, opt, &data, offsets.as_deref(), m, &mut seed, &probe)?;
            let gbs = |us: f64| r.bytes / us / 1e3;
            // The naive baseline runs at m = 1 only.
            let (naive, speedup) = if r.naive_us.is_nan() {
                ("—".to_string(), "—".to_string())
            } else {
                (
                    format!("{:.1}", r.naive_us),
                    format!("{:.1}×", r.naive_us / r.cold_us),
                )
            };
            println!(
            "| {} × {} | {} | {} | {:.1} | {} | {:.0}% | {:.1} | {} | {} | {} | {:.1e} | {} | {:.1} – {:.1} ({}) |",
            r.n,
            r.k,
            r.m,
            ctx.kernel_path(),
            r.cold_us,
            rate(gbs(r.cold_us)),
            100.0 * gbs(r.cold_us) / copy,
            r.hot_us,
            rate(gbs(r.hot_us)),
            naive,
            speedup,
            r.rel_err,
            rate(r.copy_now),
            r.per_copy.iter().copied().fold(f64::INFINITY, f64::min),
            r.per_copy.iter().copied().fold(0.0, f64::max),
            r.per_copy.len()
        );
        }
    }
    Ok(())
}
