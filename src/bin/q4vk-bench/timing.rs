//! Timestamp timing of recorded work (medians, warm-up copies) and the compute-shader copy
//! that is both the bandwidth ceiling and the warm-up load.

use super::*;
use ash::vk;
use q4vk::error::{Error, Result};
use q4vk::vk::context::Context;
use q4vk::vk::kernel::Kernel;
use q4vk::vk::memory::{Buffer, MemoryKind};
use q4vk::vk::shaders;

/// Times `iters` runs of `record(cmd, i)`, each between two timestamps and separated by
/// full compute barriers; returns the median in microseconds. With `warm`, the same
/// command buffer first runs `warm.0`'s copy `warm.1` times, untimed: the GPU drops its
/// SM clock when idle or lightly loaded (450 MHz seen on the H200 between runs, and copy
/// bandwidth measured at 40% right after the naive kernel), and a timed run must not pay
/// for the ramp.
pub(crate) fn time_runs(
    ctx: &Context,
    iters: usize,
    warm: Option<(&Copy, usize)>,
    record: impl FnMut(vk::CommandBuffer, usize) -> Result<()>,
) -> Result<f64> {
    Ok(median(time_each(ctx, iters, warm, record)?))
}

pub(crate) fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(|a, b| a.total_cmp(b));
    times[times.len() / 2]
}

/// [`time_runs`]' times (µs) in run order.
pub(crate) fn time_each(
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
    ctx.device.namer.name(pool, "q4vk-bench timestamps");
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

/// The copy kernel on two device buffers.
pub(crate) struct Copy {
    pub(crate) kernel: Kernel,
    pub(crate) set: vk::DescriptorSet,
    pub(crate) size: u64,
    pub(crate) _buffers: [Buffer; 2],
}

impl Copy {
    pub(crate) fn new(ctx: &Context, size: u64) -> Result<Copy> {
        let size = size.min(ctx.device.info.max_storage_range / 16 * 16);
        let src = Buffer::new(
            &ctx.device,
            size,
            MemoryKind::Device,
            "q4vk-bench copy source",
        )?;
        let dst = Buffer::new(
            &ctx.device,
            size,
            MemoryKind::Device,
            "q4vk-bench copy target",
        )?;
        let kernel = Kernel::new(&ctx.device, shaders::COPY, "copy", 2, 4, 1)?;
        let set = kernel.set(&[&src, &dst])?;
        Ok(Copy {
            kernel,
            set,
            size,
            _buffers: [src, dst],
        })
    }

    /// Records one copy of the whole buffer.
    pub(crate) fn record(&self, cmd: vk::CommandBuffer) {
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
    pub(crate) fn bandwidth(&self, ctx: &Context, iters: usize, warm: usize) -> Result<f64> {
        let us = time_runs(ctx, iters, Some((self, warm)), |cmd, _| {
            self.record(cmd);
            Ok(())
        })?;
        Ok(2.0 * self.size as f64 / us / 1e3)
    }
}

/// What the device's memory and dispatches allow, measured beside the kernels.
pub(crate) struct Ceilings {
    /// The copy's bandwidth, bytes read + written (GB/s).
    pub(crate) copy: f64,
    /// What a kernel that only reads pulls from the same source buffer: `(workgroups,
    /// GB/s)` per grid of [`READ_GRIDS`] (`shaders/read.comp`, four uvec4 loads in flight
    /// per invocation).
    pub(crate) reads: Vec<(u32, f64)>,
    /// µs between the timestamps around a dispatch that does nothing (one workgroup of the
    /// copy kernel with nothing to copy): the floor of every timed row.
    pub(crate) empty_dispatch: f64,
    /// `(bytes, µs)`: the read-only kernel over the first [`HOT_READS`] bytes of the
    /// buffer, the same bytes every run (L2-resident where they fit), one round of four
    /// loads per invocation: the ceiling of the hot column on matrices of that size.
    pub(crate) hot_reads: Vec<(u64, f64)>,
}

/// [`Ceilings`] on a buffer of 1 GB (64 MB in quick mode).
pub(crate) fn ceilings(ctx: &Context, opt: &Options) -> Result<Ceilings> {
    let size = if opt.quick { 64u64 << 20 } else { 1u64 << 30 };
    let copy = Copy::new(ctx, size)?;
    let copy_rate = copy.bandwidth(ctx, opt.iters, opt.warm / 4)?;
    let kernel = Kernel::new(&ctx.device, shaders::READ, "read", 2, 4, 1)?;
    let set = kernel.set(&[&copy._buffers[0], &copy._buffers[1]])?;
    let read = |count: u32, groups: u32| {
        time_runs(ctx, opt.iters, Some((&copy, opt.warm / 4)), |cmd, _| {
            // SAFETY: `cmd` is recording (the bench's own submission); kernel and buffers
            // outlive it.
            unsafe { kernel.record(cmd, set, &count.to_ne_bytes(), groups) };
            Ok(())
        })
    };
    let count = (copy.size / 16) as u32;
    let mut reads = Vec::new();
    for groups in READ_GRIDS {
        // Whole rounds of four loads per invocation only (the shader runs count / round of
        // them): the bytes it reads.
        let round = 4 * 256 * u64::from(groups);
        let bytes = u64::from(count) / round * round * 16;
        if bytes == 0 {
            continue;
        }
        reads.push((groups, bytes as f64 / read(count, groups)? / 1e3));
    }
    let mut hot_reads = Vec::new();
    for bytes in HOT_READS {
        // One round per invocation: a workgroup per 16 KB.
        let groups = (bytes / (16 * 1024)) as u32;
        if bytes > copy.size || groups > ctx.rules.class.max_groups[0] {
            continue;
        }
        hot_reads.push((bytes, read((bytes / 16) as u32, groups)?));
    }
    let empty_dispatch = time_runs(ctx, opt.iters, Some((&copy, opt.warm / 4)), |cmd, _| {
        // SAFETY: as above; a count of 0 copies nothing.
        unsafe { copy.kernel.record(cmd, copy.set, &0u32.to_ne_bytes(), 1) };
        Ok(())
    })?;
    Ok(Ceilings {
        copy: copy_rate,
        reads,
        empty_dispatch,
        hot_reads,
    })
}

/// Bytes of the hot read-only ceilings: about the weights of the bench's 4096 × 4096 and
/// 11008 × 4096 / 4096 × 11008 matrices, which fit the L2 of large GPUs.
const HOT_READS: [u64; 2] = [8 << 20, 22 << 20];

/// Workgroups (of 256) of the read-only ceiling: many short ones, as the copy, down to a
/// few per SM of a large GPU looping over the buffer.
const READ_GRIDS: [u32; 4] = [32768, 8192, 2048, 1024];

/// Workgroups (of 128 invocations) of the tensor-core ceilings.
const MMA_INVOCATIONS: u64 = 128;

/// TFLOP/s of a tensor-core ceiling kernel (`spv`, from the shader `name`: one storage
/// buffer of a float per invocation, or more, and a u32 push constant of `rounds`): the
/// median of `iters` dispatches of `groups` workgroups, each subgroup issuing
/// `mmas_per_round` 16 × 8 × 16 MMAs per round.
fn mma_kernel_rate(
    ctx: &Context,
    opt: &Options,
    (spv, name): (&[u8], &str),
    groups: u32,
    rounds: u32,
    mmas_per_round: u64,
    out: &Buffer,
) -> Result<f64> {
    let kernel = Kernel::new(&ctx.device, spv, name, 1, 4, 1)?;
    let set = kernel.set(&[out])?;
    let us = time_runs(ctx, opt.iters, None, |cmd, _| {
        // SAFETY: `cmd` is recording (the bench's own submission); kernel and buffer
        // outlive it.
        unsafe { kernel.record(cmd, set, &rounds.to_ne_bytes(), groups) };
        Ok(())
    })?;
    let subgroups = u64::from(groups) * MMA_INVOCATIONS / 32;
    let mmas = subgroups * u64::from(rounds) * mmas_per_round;
    Ok(mmas as f64 * (2 * 16 * 8 * 16) as f64 / us / 1e6)
}

/// The tensor cores' rate (TFLOP/s) through the cooperative-matrix MMA the GEMM issues
/// (`shaders/mma_peak.comp`: 16 × 8 × 16 f16 → f32, operands in registers, no memory
/// traffic), median of `iters` dispatches; `None` where the device runs no tensor-core kernel.
pub(crate) fn mma_rate(ctx: &Context, opt: &Options) -> Result<Option<f64>> {
    if !ctx.device.coop_offer.fragments {
        return Ok(None);
    }
    const GROUPS: u32 = 8192;
    const CHAINS: u64 = 8;
    let out = Buffer::new(
        &ctx.device,
        u64::from(GROUPS) * MMA_INVOCATIONS * CHAINS * 4,
        MemoryKind::Device,
        "q4vk-bench mma_peak output",
    )?;
    let peak = (shaders::MMA_PEAK, "mma_peak");
    let rate = mma_kernel_rate(ctx, opt, peak, GROUPS, 256, CHAINS, &out)?;
    Ok(Some(rate))
}

/// The rate (TFLOP/s) of the tensor-core GEMM's inner loop without memory traffic
/// (`shaders/mma_loop.comp`: A decoded and B rebuilt from words in registers every k-step,
/// the block epilogue every 8) on its (tiles, B fragments) subgroup tiles 4 × 4 and 2 × 8,
/// median of `iters` dispatches; `None` where the device runs no tensor-core kernel.
pub(crate) fn mma_loop_rates(ctx: &Context, opt: &Options) -> Result<Option<[f64; 2]>> {
    if !ctx.device.coop_offer.fragments {
        return Ok(None);
    }
    const GROUPS: u32 = 2048;
    let out = Buffer::new(
        &ctx.device,
        u64::from(GROUPS) * MMA_INVOCATIONS * 4,
        MemoryKind::Device,
        "q4vk-bench mma_loop output",
    )?;
    // Rounds are blocks of 8 k-steps of tiles × fragments MMAs.
    let rate = |spv, mmas_per_step: u64| {
        mma_kernel_rate(ctx, opt, spv, GROUPS, 64, 8 * mmas_per_step, &out)
    };
    Ok(Some([
        rate((shaders::MMA_LOOP_4X4, "mma_loop_4x4"), 4 * 4)?,
        rate((shaders::MMA_LOOP_2X8, "mma_loop_2x8"), 2 * 8)?,
    ]))
}
