//! One row of the table: cold and hot GEMV times of a matrix at m activation rows, its
//! relative error, and the naive kernel's time at m = 1.

use super::*;
use ash::vk;
use q4vk::cpu::reference;
use q4vk::error::Result;
use q4vk::import::gguf_blocks::BlockType;
use q4vk::quant::q4::Q4Data;
use q4vk::vk::context::Context;
use q4vk::vk::gemv::{self, BufferRange, Epilogue, GemvParams, Room};
use q4vk::vk::kernel::Kernel;
use q4vk::vk::matrix::{upload, DeviceMatrix, UploadRoute};
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
    /// A pre-pass ran before the kernel (x's digits for the integer dot-product GEMV, x's
    /// f16 parts for the tensor-core GEMM), timed with it.
    pub(crate) prepass: bool,
    /// x was rounded to f16 (`--round-x-f16`, where the GEMM on x in fragments ran).
    pub(crate) rounded: bool,
    /// The integer dot-product GEMV ran on x rounded to bytes (`--round-x-int8`).
    pub(crate) x_bytes: bool,
    /// The kernel alone was timed, on a workspace an untimed call filled
    /// (`--reuse-workspace`, where a pre-pass runs).
    pub(crate) reused: bool,
    /// The tensor-core GEMM's shape the row fixed (`None`: the default).
    pub(crate) coop_gemm: Option<CoopGemmTuning>,
    /// The tensor-core GEMM's shape that ran (fixed or the rules') and its K slices, where it
    /// ran.
    pub(crate) gemm_shape: Option<(CoopGemmTuning, u32)>,
    /// The tensor-core GEMV's (row tiles, subgroups), where it ran.
    pub(crate) gemv_shape: Option<(u32, u32)>,
    /// The f32 SIMT GEMV ran decoding each word once for all activation rows.
    pub(crate) decoded_once: bool,
    /// The f32 SIMT GEMV ran with its invocations stepping over words of codes.
    pub(crate) word_lanes: bool,
    /// The tensor-core GEMM on the SIMT layout ran.
    pub(crate) tiles: bool,
    /// It ran the tensor-core GEMM on GGUF blocks with fragments in registers.
    pub(crate) blocks_frag: bool,
    /// `--chain N`: µs per call of N dependent calls in one command buffer, cold and hot.
    pub(crate) chain_us: Option<(f64, f64)>,
}

/// What one row times: rotated copies of a matrix, x and y on the device, the parameters,
/// and the f64 reference of the tokens whose result is checked.
pub(crate) struct Prepared {
    mats: Vec<DeviceMatrix>,
    x: BufferRange,
    y: BufferRange,
    p: GemvParams,
    /// The workspace of the call's pre-pass, where it has one (`set_workspace`).
    workspace: Option<BufferRange>,
    workspace_buffer: Option<Buffer>,
    /// Bytes one GEMV must move: the matrix, x and y.
    bytes: u64,
    /// Checked tokens (all for m ≤ 8; the first, middle and last beyond).
    tokens: Vec<usize>,
    /// Their reference results (`tokens.len()` rows of n), or the caller's full reference.
    want: Vec<f64>,
    _buffers: (Buffer, Buffer),
}

/// The weights a row times: a Q4 matrix (with per-group offsets, if any), or a tensor of
/// GGUF blocks kept in their native bytes (`--type`).
#[derive(Clone, Copy)]
pub(crate) enum Weights<'a> {
    /// Q4 data and its offsets.
    Q4(&'a Q4Data<'a>, Option<&'a [f32]>),
    /// `n` × `k` blocks of a type, as a file stores them.
    Blocks(BlockType, usize, usize, &'a [u8]),
}

impl<'a> From<(&'a Q4Data<'a>, Option<&'a [f32]>)> for Weights<'a> {
    fn from((data, offsets): (&'a Q4Data<'a>, Option<&'a [f32]>)) -> Weights<'a> {
        Weights::Q4(data, offsets)
    }
}

impl Weights<'_> {
    /// (n, k).
    pub(crate) fn dims(&self) -> (usize, usize) {
        match *self {
            Weights::Q4(data, _) => (data.shape.n, data.shape.k),
            Weights::Blocks(_, n, k, _) => (n, k),
        }
    }

    /// A device matrix of these weights (columns in `k_order`, Q4 only).
    fn upload(&self, ctx: &Context, k_order: Option<&[u32]>) -> Result<DeviceMatrix> {
        match *self {
            Weights::Q4(data, offsets) => DeviceMatrix::new(ctx, data, offsets, k_order),
            Weights::Blocks(ty, n, k, bytes) => {
                DeviceMatrix::from_blocks(ctx, ty, n, k, bytes, &mut UploadRoute::Queue)
            }
        }
    }

    /// The f64 results of the `m` rows of `xs` (in the matrix's column order).
    fn reference(&self, xs: &[f32], m: usize) -> Vec<f64> {
        match *self {
            Weights::Q4(data, None) => reference::gemv(data, xs, m),
            Weights::Q4(data, Some(o)) => reference::gemv_with_offsets(data, o, xs, m),
            Weights::Blocks(ty, n, k, bytes) => {
                let row_bytes = k / ty.block_elements() * ty.block_bytes();
                let mut w = vec![0f32; k];
                let mut y = vec![0f64; m * n];
                for (row, blocks) in bytes.chunks_exact(row_bytes).enumerate() {
                    q4vk::import::gguf_blocks::dequantize(ty, blocks, &mut w);
                    let values = reference::gemv_dense(&w, xs, 1, k, m);
                    for (i, v) in values.into_iter().enumerate() {
                        y[i * n + row] = v;
                    }
                }
                y
            }
        }
    }
}

/// Uploads the rotated copies of `data` (with per-group `offsets`, if any) and `m`
/// activation rows `x`, computes the reference result (unless the caller's `reference` of
/// all rows is given) and gives the call its workspace (`Prepared::set_workspace`).
pub(crate) fn prepare(
    ctx: &Context,
    opt: &Options,
    weights: Weights,
    x: &[f32],
    m: u32,
    reference: Option<&[f64]>,
) -> Result<Prepared> {
    let (n, k) = weights.dims();
    let blocks = matches!(weights, Weights::Blocks(..));
    let k_order = (opt.act_order && !blocks).then(|| column_order(k));
    let first = weights.upload(ctx, k_order.as_deref())?;
    let bytes_per = first.form.device_bytes();
    let copies = (opt.cold_bytes.div_ceil(bytes_per) + 1) as usize;
    let mut mats = vec![first];
    for _ in 1..copies {
        mats.push(weights.upload(ctx, k_order.as_deref())?);
    }
    // f16 activations: x holds f16 values (rounded by the caller), uploaded as f16.
    let xv: Vec<u8> = if opt.x_f16 {
        x.iter()
            .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
            .collect()
    } else {
        x.iter().flat_map(|v| v.to_le_bytes()).collect()
    };
    let xb = upload(ctx, &xv, "q4vk-bench x")?;
    let mb = m as u64;
    let yb = Buffer::new(
        &ctx.device,
        4 * mb * n as u64,
        MemoryKind::Device,
        "q4vk-bench y",
    )?;
    let range = |b: &Buffer, bytes: u64| BufferRange {
        buffer: b.buffer,
        offset: 0,
        range: bytes,
    };
    let p = GemvParams {
        m,
        x_f16: opt.x_f16,
        x_stride: k as u64,
        y_stride: n as u64,
        // --act-order times the kernels that gather x (q4vk_cmd_gemv's; q4vk_gemv gathers
        // on the host and runs the plain kernel).
        x_gathered: false,
        x_round_f16: opt.round_x_f16,
        x_round_int8: opt.round_x_int8,
        workspace_filled: false,
        epilogue: Epilogue::NONE,
    };
    let tokens: Vec<usize> = if m > 8 {
        vec![0, m as usize / 2, m as usize - 1]
    } else {
        (0..m as usize).collect()
    };
    let want = match reference {
        Some(r) => r.to_vec(),
        None => {
            let mut xs: Vec<f32> = tokens
                .iter()
                .flat_map(|&t| x[t * k..(t + 1) * k].iter().copied())
                .collect();
            if let Some(order) = &k_order {
                // Column j of the matrix meets input order[j].
                xs = xs
                    .chunks_exact(k)
                    .flat_map(|row| order.iter().map(|&i| row[i as usize]))
                    .collect();
            }
            weights.reference(&xs, tokens.len())
        }
    };
    let mut prepared = Prepared {
        mats,
        x: range(&xb, xv.len() as u64),
        y: range(&yb, 4 * mb * n as u64),
        p,
        workspace: None,
        workspace_buffer: None,
        bytes: bytes_per + xv.len() as u64 + 4 * mb * n as u64,
        tokens,
        want,
        _buffers: (xb, yb),
    };
    prepared.set_workspace(ctx, opt)?;
    Ok(prepared)
}

impl Prepared {
    /// The workspace this call is timed with, as the rules take it.
    fn room(&self) -> Room {
        self.workspace.map_or(Room::None, |w| Room::Bytes(w.range))
    }

    /// Gives the call the workspace its pre-pass needs on the context's current kernel
    /// shapes (timed with it, as `q4vk_cmd_gemv` records both), or none with `--no-workspace`
    /// (the kernels that read x themselves run). `prepare` calls it; a caller that changes
    /// the context's shapes afterwards calls it again.
    fn set_workspace(&mut self, ctx: &Context, opt: &Options) -> Result<()> {
        let bytes = gemv::workspace_bytes(&ctx.rules, &self.mats[0].form, &self.p)?;
        self.workspace = None;
        self.workspace_buffer = None;
        if bytes > 0 && !opt.no_workspace {
            let b = Buffer::new(
                &ctx.device,
                bytes,
                MemoryKind::Device,
                "q4vk-bench workspace",
            )?;
            self.workspace = Some(BufferRange {
                buffer: b.buffer,
                offset: 0,
                range: bytes,
            });
            self.workspace_buffer = Some(b);
        }
        Ok(())
    }

    /// Cold and hot times (µs) with the context's current kernel choice, the bytes one GEMV
    /// must move, the relative error of its result (read back from a recorded run), the cold
    /// time per copy, and whether a GEMM kernel ran.
    pub(crate) fn time(
        &self,
        ctx: &Context,
        opt: &Options,
        probe: &Copy,
    ) -> Result<(f64, f64, f64, f64, Vec<f64>, bool)> {
        let (mats, p) = (&self.mats, &self.p);
        let n = mats[0].form.shape.n;
        let copies = mats.len();
        let ws = self.workspace;
        let y = run_once(ctx, &mats[0], self.x, p, ws, n)?;
        let got: Vec<f32> = if self.want.len() == y.len() {
            y
        } else {
            self.tokens
                .iter()
                .flat_map(|&t| y[t * n..(t + 1) * n].iter().copied())
                .collect()
        };
        let rel_err = reference::relative_error(&got, &self.want);
        let warm = Some((probe, opt.warm));
        let (xr, yr) = (self.x, self.y);
        // With --reuse-workspace the runs record no pre-pass: `run_once` above filled the
        // workspace from the same x.
        let timed = GemvParams {
            workspace_filled: opt.reuse_workspace && ws.is_some(),
            ..*p
        };
        let p = &timed;
        // Two cold series, the one with the lower median kept: on the H200 a whole series
        // sometimes runs ~3 × slower, every copy alike, while the hot series of the same row
        // is the kernel's (bench/RESULTS.md, "cold outliers").
        let mut cold = (f64::INFINITY, Vec::new());
        for _ in 0..2 {
            let series = time_each(ctx, opt.iters.max(copies), warm, |cmd, i| {
                gemv::record(ctx, cmd, &mats[i % copies], xr, yr, p, ws)
            })?;
            let at = median(series.clone());
            if at < cold.0 {
                cold = (at, series);
            }
        }
        let (cold_us, cold) = cold;
        let per_copy: Vec<f64> = (0..copies)
            .map(|c| median(cold.iter().skip(c).step_by(copies).copied().collect()))
            .collect();
        let hot_us = time_runs(ctx, opt.iters, warm, |cmd, _| {
            gemv::record(ctx, cmd, &mats[0], xr, yr, p, ws)
        })?;
        let room = ws.map_or(Room::None, |w| Room::Bytes(w.range));
        let gemm = gemv::decide(&ctx.rules, &mats[0].form, p, room)?.runs_gemm();
        Ok((cold_us, hot_us, self.bytes as f64, rel_err, per_copy, gemm))
    }
}

impl Prepared {
    /// µs per call of `calls` dependent calls recorded in one command buffer (a barrier
    /// between each: every call waits for the one before, as in a decoder step), timed
    /// between two timestamps: (cold: each call on the next rotated copy, hot: all on one).
    fn time_chain(
        &self,
        ctx: &Context,
        opt: &Options,
        probe: &Copy,
        calls: usize,
    ) -> Result<(f64, f64)> {
        let (mats, ws) = (&self.mats, self.workspace);
        let copies = mats.len();
        let p = &GemvParams {
            workspace_filled: opt.reuse_workspace && ws.is_some(),
            ..self.p
        };
        let warm = Some((probe, opt.warm));
        let iters = (opt.iters / 10).max(3);
        let series = |rotate: bool| {
            time_runs(ctx, iters, warm, |cmd, i| {
                for c in 0..calls {
                    if c > 0 {
                        // SAFETY: `cmd` is recording.
                        unsafe { record_compute_barrier(ctx, cmd) };
                    }
                    let mat = match rotate {
                        true => &mats[(i * calls + c) % copies],
                        false => &mats[0],
                    };
                    gemv::record(ctx, cmd, mat, self.x, self.y, p, ws)?;
                }
                Ok(())
            })
            .map(|us| us / calls as f64)
        };
        Ok((series(true)?, series(false)?))
    }
}

/// Records [`COMPUTE_TO_COMPUTE`] into `cmd`.
///
/// # Safety
/// `cmd` is a command buffer of `ctx`'s device in the recording state.
pub(crate) unsafe fn record_compute_barrier(ctx: &Context, cmd: vk::CommandBuffer) {
    let [src, dst] = COMPUTE_TO_COMPUTE;
    // SAFETY: the caller's contract.
    unsafe { q4vk::vk::submit::record_barrier(&ctx.device.device, cmd, src, dst) };
}

/// A compute write before a compute read or write: what orders one call after the last.
pub(crate) const COMPUTE_TO_COMPUTE: [(vk::PipelineStageFlags, vk::AccessFlags); 2] = [
    (
        vk::PipelineStageFlags::COMPUTE_SHADER,
        vk::AccessFlags::SHADER_WRITE,
    ),
    (
        vk::PipelineStageFlags::COMPUTE_SHADER,
        vk::AccessFlags::from_raw(
            vk::AccessFlags::SHADER_READ.as_raw() | vk::AccessFlags::SHADER_WRITE.as_raw(),
        ),
    ),
];

/// [`prepare`], then [`Prepared::time`].
pub(crate) fn time_gemv(
    ctx: &Context,
    opt: &Options,
    matrix: (&Q4Data, Option<&[f32]>),
    x: &[f32],
    m: u32,
    reference: Option<&[f64]>,
    probe: &Copy,
) -> Result<(f64, f64, f64, f64, Vec<f64>, bool)> {
    prepare(ctx, opt, matrix.into(), x, m, reference)?.time(ctx, opt, probe)
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
    workspace: Option<BufferRange>,
    n: usize,
) -> Result<Vec<f32>> {
    let len = p.m as usize * n;
    let yb = Buffer::new(
        &ctx.device,
        4 * len as u64,
        MemoryKind::Readback,
        "q4vk-bench readback y",
    )?;
    yb.write(0, &vec![0xFF; 4 * len]);
    let y = BufferRange {
        buffer: yb.buffer,
        offset: 0,
        range: 4 * len as u64,
    };
    time_runs(ctx, 1, None, |cmd, _| {
        gemv::record(ctx, cmd, mat, x, y, p, workspace)?;
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
    let kernel = Kernel::new(&ctx.device, shaders::NAIVE, "naive_q4", 4, 8, copies as u32)?;
    let sz: Vec<u8> = (0..n)
        .flat_map(|_| [0.01f32.to_le_bytes(), 8.0f32.to_le_bytes()].concat())
        .collect();
    let szb = upload(ctx, &sz, "q4vk-bench naive scales and zeros")?;
    let xv: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let xb = upload(ctx, &xv, "q4vk-bench naive x")?;
    let yb = Buffer::new(
        &ctx.device,
        4 * n as u64,
        MemoryKind::Device,
        "q4vk-bench naive y",
    )?;
    let mut words = vec![0u8; n * k / 2];
    fill_random(&mut words, seed);
    let mut naive = Vec::new();
    for _ in 0..copies {
        let w = upload(ctx, &words, "q4vk-bench naive weights")?;
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

/// The rows of one shape at `m` activation rows: one per tensor-core GEMM shape of
/// `opt.coop_gemm` where a GEMM runs (else one), timed on the same uploaded matrices (the
/// naive kernel's time at m = 1).
pub(crate) fn bench_shape(
    ctx: &mut Context,
    opt: &Options,
    weights: Weights,
    m: u32,
    seed: &mut u64,
    probe: &Copy,
) -> Result<Vec<Row>> {
    let (n, k) = weights.dims();
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
    let mut prepared = prepare(ctx, opt, weights, &x, m, None)?;
    let naive_us = if m == 1 {
        time_naive(ctx, opt, n, k, &x, seed, probe)?
    } else {
        f64::NAN
    };
    let mut rows = Vec::new();
    for (i, &coop_gemm) in opt.coop_gemm.iter().enumerate() {
        // The GEMM's shapes change nothing where a GEMV kernel runs.
        let room = if opt.no_workspace {
            Room::None
        } else {
            Room::AsNeeded
        };
        if i > 0
            && !gemv::decide(&ctx.rules, &prepared.mats[0].form, &prepared.p, room)?.runs_gemm()
        {
            break;
        }
        ctx.set_overrides(|o| o.coop_gemm = coop_gemm)?;
        prepared.set_workspace(ctx, opt)?;
        let copy_now = probe.bandwidth(ctx, opt.iters.min(20), 0)?;
        let (cold_us, hot_us, bytes, rel_err, per_copy, gemm) = prepared.time(ctx, opt, probe)?;
        let chain_us = opt
            .chain
            .map(|calls| prepared.time_chain(ctx, opt, probe, calls))
            .transpose()?;
        let choice = gemv::decide(
            &ctx.rules,
            &prepared.mats[0].form,
            &prepared.p,
            prepared.room(),
        )?;
        rows.push(Row {
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
            chain_us,
            gemm,
            prepass: prepared.workspace.is_some(),
            rounded: gemv::rounds_x(&prepared.p) && prepared.workspace.is_some() && gemm,
            x_bytes: matches!(
                choice.prepass,
                Some(gemv::PrepassChoice::Digits(key)) if key.bytes
            ) && prepared.workspace.is_some(),
            reused: opt.reuse_workspace && prepared.workspace.is_some(),
            coop_gemm,
            gemm_shape: choice.coop_gemm_shape().filter(|_| gemm),
            decoded_once: matches!(
                choice.kernel,
                gemv::KernelChoice::SimtGemv { key, .. } if key.decode_once
            ),
            word_lanes: matches!(
                choice.kernel,
                gemv::KernelChoice::SimtGemv { key, .. } if key.word_lanes
            ),
            tiles: matches!(
                choice.kernel,
                gemv::KernelChoice::CoopTiles(_) | gemv::KernelChoice::BlocksTiles(_)
            ),
            blocks_frag: matches!(choice.kernel, gemv::KernelChoice::BlocksFrag(_)),
            gemv_shape: if gemm {
                None
            } else {
                gemv::coop_gemv_shape(&ctx.rules, &prepared.mats[0].form, &prepared.p)
            },
        });
    }
    Ok(rows)
}
