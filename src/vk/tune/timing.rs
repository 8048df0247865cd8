//! How tuning times a kernel on a case: chains of calls between GPU timestamps (or the
//! host clock where the queue has none), the GPU kept busy first, each candidate timed
//! against the row's baseline in the same submission, and their scores (geometric means,
//! the noise margin).

use super::cases::Case;
use crate::error::{Error, Result};
use crate::vk::context::Context;
use crate::vk::gemv_plan::Choice;
use crate::vk::log::LEVEL_DEBUG;
use crate::vk::memory::Buffer;
use crate::vk::params::{BufferRange, GemvParams};
use crate::vk::record::{record_resolved, CallPlan};
use crate::vk::submit::record_barrier;
use crate::vk::xy_sets::Set1;
use ash::vk;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A candidate must beat the row's shape by this factor to replace it (timing noise).
pub(super) const NOISE_MARGIN: f64 = 0.98;

/// Timed chains per (candidate, case); the fastest counts.
pub(super) const REPEATS: usize = 3;

/// Untimed chains of each kernel before the timed ones in each submission.
pub(super) const WARM_CHAINS: usize = 1;

/// Timestamps per paired timing: a pair around each kernel's chain in each repeat.
pub(super) const TIMESTAMPS: u32 = 4 * REPEATS as u32;

/// How long the baseline runs, untimed, before each batch of timings: a GPU that was idle
/// raises its clocks over milliseconds, not within one chain.
pub(super) const WARM_UP: Duration = Duration::from_millis(50);

/// How long the pipelines of one batch of candidates are created for before the batch is
/// timed (the GPU idles meanwhile, and its clocks fall).
pub(super) const BATCH: Duration = Duration::from_millis(400);

/// A timed call: its case, its m and the keys of the kernels a candidate runs there.
pub(super) type CallKey<K> = (usize, u32, K);

/// The calls one kernel's candidates are timed on, and how.
pub(super) struct Timing<'a> {
    /// The context timed on.
    pub(super) ctx: &'a Context,
    /// Its timestamp pool (`None`: the host clock).
    pub(super) timer: Option<&'a GpuTimer<'a>>,
    /// The cases the calls index.
    pub(super) cases: &'a [Case],
    /// (case index, m).
    pub(super) calls: &'a [(usize, u32)],
    /// Where the calls' pre-passes write (`None`: calls without one).
    pub(super) workspace: Option<&'a Buffer>,
    /// When the timing started, and how long after it candidates may start.
    pub(super) deadline: (Instant, Duration),
    /// Candidates whose pipelines are created at once, a thread each ([`threads`]).
    pub(super) threads: usize,
}

/// Threads that create candidates' pipelines at once: the CPU's cores up to 8 (drivers
/// compile a pipeline on the thread that creates it).
pub(super) fn threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8)
}

impl Timing<'_> {
    /// Times `shapes` after the first (the baseline: the row's) on every call, in order,
    /// while the deadline allows, each against the baseline in the same submission
    /// ([`time_pair`]). The candidates go in batches: a batch's pipelines are created
    /// first (for up to [`BATCH`], none past the deadline), then the GPU is kept busy for
    /// [`WARM_UP`] and the batch is timed back to back, so that no timing follows the idle
    /// GPU of a pipeline's creation. `choice` gives a shape's kernel on a case at m and the
    /// keys that name it (a shape resolving to the baseline's keys on a call is level with
    /// it there without a timing; shapes resolving to the same keys share one). Returns the
    /// baseline (at 1) and each timed shape with its time against the baseline, the
    /// geometric mean over the calls; none where there are no calls.
    pub(super) fn candidates<S: Copy, K: std::hash::Hash + Eq + Copy>(
        &self,
        shapes: impl IntoIterator<Item = S>,
        choice: impl Fn(&S, &Case, u32) -> Result<(Choice, K)>,
    ) -> Result<Vec<(S, f64)>> {
        let mut shapes = shapes.into_iter();
        let (Some(first), false) = (shapes.next(), self.calls.is_empty()) else {
            return Ok(Vec::new());
        };
        let baseline = self
            .calls
            .iter()
            .map(|&(c, m)| choice(&first, &self.cases[c], m))
            .collect::<Result<Vec<_>>>()?;
        let (started, deadline) = self.deadline;
        let mut seen: HashMap<CallKey<K>, f64> = HashMap::new();
        let mut timed = vec![(first, 1.0)];
        loop {
            // A batch: each shape's kernels per call, their pipelines created.
            let batch_started = Instant::now();
            let mut batch = Vec::new();
            while started.elapsed() < deadline && batch_started.elapsed() < BATCH {
                // Up to one shape per thread at a time, their pipelines created at once.
                let mut group = Vec::with_capacity(self.threads);
                for shape in shapes.by_ref().take(self.threads) {
                    let kernels = self
                        .calls
                        .iter()
                        .map(|&(c, m)| choice(&shape, &self.cases[c], m))
                        .collect::<Result<Vec<_>>>()?;
                    group.push((shape, kernels));
                }
                if group.is_empty() {
                    break;
                }
                let new: Vec<Vec<(usize, u32, Choice)>> = group
                    .iter()
                    .map(|(_, kernels)| {
                        let calls = self.calls.iter().zip(kernels).zip(&baseline);
                        calls
                            .filter(|&((&(c, m), &(_, key)), &(_, base))| {
                                key != base && !seen.contains_key(&(c, m, key))
                            })
                            .map(|((&(c, m), &(kernel, _)), _)| (c, m, kernel))
                            .collect()
                    })
                    .collect();
                self.create_all(&new)?;
                batch.extend(group);
            }
            if batch.is_empty() {
                break;
            }
            if timed.len() == 1 {
                for (&(c, m), &(kernel, _)) in self.calls.iter().zip(&baseline) {
                    create_pipelines(self.ctx, &self.cases[c], m, kernel)?;
                }
            }
            let (c, m) = self.calls[0];
            keep_busy(
                self.ctx,
                self.timer,
                &self.cases[c],
                m,
                baseline[0].0,
                self.workspace,
            )?;
            for (shape, kernels) in batch {
                let mut log_ratio = 0.0;
                for ((&(c, m), (kernel, key)), &(base_kernel, base_key)) in
                    self.calls.iter().zip(kernels).zip(&baseline)
                {
                    if key == base_key {
                        continue;
                    }
                    let case = &self.cases[c];
                    let ratio = time_new(&mut seen, (c, m, key), || {
                        let (base, us) = time_pair(
                            self.ctx,
                            self.timer,
                            case,
                            m,
                            (base_kernel, kernel),
                            self.workspace,
                        )?;
                        log_timing(self.ctx, case, m, &base_kernel, base);
                        log_timing(self.ctx, case, m, &kernel, us);
                        Ok(us / base)
                    })?;
                    log_ratio += ratio.ln();
                }
                timed.push((shape, (log_ratio / self.calls.len() as f64).exp()));
            }
        }
        Ok(timed)
    }
}

impl Timing<'_> {
    /// Times shapes from `start` (the row's) by climbing ([`climb`]), each round of
    /// candidates against the fastest so far with [`Timing::candidates`]; none where there
    /// are no calls.
    pub(super) fn climb<S: Copy + PartialEq, K: std::hash::Hash + Eq + Copy>(
        &self,
        start: S,
        neighbours: impl Fn(&S) -> Vec<S>,
        around: impl Fn(&S) -> Vec<S>,
        choice: impl Fn(&S, &Case, u32) -> Result<(Choice, K)>,
    ) -> Result<Vec<(S, f64)>> {
        if self.calls.is_empty() {
            return Ok(Vec::new());
        }
        let (started, deadline) = self.deadline;
        climb(
            start,
            (neighbours, around),
            |best, next| self.candidates(std::iter::once(best).chain(next), &choice),
            || started.elapsed() < deadline,
        )
    }
}

/// Times shapes from `start` by climbing: each round times the shapes one step from the
/// fastest so far (`neighbours`, those not yet timed) against it (`time`: the baseline
/// at 1 and each candidate timed with its ratio, as [`Timing::candidates`]) and moves to
/// the fastest of them where it beats it by more than the noise margin ([`fastest`]);
/// where none does, the time left goes to the other shapes `around` the fastest, nearest
/// it first. A climb reaches a shape several fields away from the row's within a budget
/// that the nearest-first order spends on the row's neighbours. Stops when `time_left`
/// says so or nothing is left to time. Returns `start` (at 1) and each timed shape with
/// its time against `start` (the product of the rounds' ratios).
pub(super) fn climb<S: Copy + PartialEq>(
    start: S,
    (neighbours, around): (impl Fn(&S) -> Vec<S>, impl Fn(&S) -> Vec<S>),
    mut time: impl FnMut(S, Vec<S>) -> Result<Vec<(S, f64)>>,
    mut time_left: impl FnMut() -> bool,
) -> Result<Vec<(S, f64)>> {
    let mut timed = vec![(start, 1.0)];
    let mut best = (start, 1.0);
    let mut climbing = true;
    while time_left() {
        let next: Vec<S> = match climbing {
            true => neighbours(&best.0),
            false => around(&best.0),
        }
        .into_iter()
        .filter(|s| !timed.iter().any(|(t, _)| t == s))
        .collect();
        let round = match next.is_empty() {
            true => vec![(best.0, 1.0)],
            false => time(best.0, next)?,
        };
        timed.extend(round.iter().skip(1).map(|&(s, ratio)| (s, ratio * best.1)));
        match (fastest(&round), climbing) {
            (Some((s, ratio)), true) => best = (s, ratio * best.1),
            (None, true) => climbing = false,
            (_, false) => break,
        }
    }
    Ok(timed)
}

impl Timing<'_> {
    /// Creates the pipelines of each list of calls in `lists` (case index, m, kernel), a
    /// thread per list where the system gives one (else on this thread).
    fn create_all(&self, lists: &[Vec<(usize, u32, Choice)>]) -> Result<()> {
        let create = |list: &Vec<(usize, u32, Choice)>| -> Result<()> {
            for &(c, m, kernel) in list {
                create_pipelines(self.ctx, &self.cases[c], m, kernel)?;
            }
            Ok(())
        };
        std::thread::scope(|scope| {
            let spawned: Vec<_> = lists
                .iter()
                .map(|list| {
                    let thread = std::thread::Builder::new().name("q4vk-tune".into());
                    thread
                        .spawn_scoped(scope, move || create(list))
                        .map_err(|_| list)
                })
                .collect();
            for handle in spawned {
                match handle {
                    Ok(thread) => thread.join().map_err(|_| {
                        Error::Internal("a pipeline-creating thread panicked".into())
                    })??,
                    Err(list) => create(list)?,
                }
            }
            Ok(())
        })
    }
}

/// Creates the pipelines of `choice` for a call of `m` rows on `case` (host work, while
/// the GPU idles: done before a batch's timings, not between them).
fn create_pipelines(ctx: &Context, case: &Case, m: u32, choice: Choice) -> Result<()> {
    let p = GemvParams::dense(m, case.k, case.n);
    CallPlan::of(ctx, &case.mats[0], &p, choice).map(drop)
}

/// Logs one timing of a tuning run at DEBUG level: the kernel and its shape, the case and
/// the microseconds per call.
pub(super) fn log_timing(ctx: &Context, case: &Case, m: u32, kernel: &Choice, us: f64) {
    ctx.logger.log(
        LEVEL_DEBUG,
        &format!(
            "tuning: {kernel} on {} x {}, m = {m}: {us:.2} µs per call",
            case.n, case.k
        ),
    );
}

/// The fastest of `timed` (as [`Timing::candidates`] returns them) after the first, where
/// it beats the first by more than the noise margin.
pub(super) fn fastest<S: Copy>(timed: &[(S, f64)]) -> Option<(S, f64)> {
    timed
        .iter()
        .skip(1)
        .copied()
        .filter(|&(_, ratio)| ratio < NOISE_MARGIN)
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

/// The value of `key` in `seen`, from `time` unless a candidate resolving to the same
/// kernels already has one.
fn time_new<K: std::hash::Hash + Eq>(
    seen: &mut HashMap<K, f64>,
    key: K,
    time: impl FnOnce() -> Result<f64>,
) -> Result<f64> {
    match seen.entry(key) {
        std::collections::hash_map::Entry::Occupied(slot) => Ok(*slot.get()),
        std::collections::hash_map::Entry::Vacant(slot) => Ok(*slot.insert(time()?)),
    }
}

/// Keeps the GPU busy with chains of `m` rows on `case` for [`WARM_UP`].
fn keep_busy(
    ctx: &Context,
    timer: Option<&GpuTimer>,
    case: &Case,
    m: u32,
    choice: Choice,
    workspace: Option<&Buffer>,
) -> Result<()> {
    let started = Instant::now();
    while started.elapsed() < WARM_UP {
        time_pair(ctx, timer, case, m, (choice, choice), workspace)?;
    }
    Ok(())
}

/// Microseconds per call of `m` rows on `case` with the baseline's kernel and with the
/// candidate's (and their pre-passes into `workspace`, which holds the bytes each choice
/// asks), timed in one submission: the fastest of [`REPEATS`] chains of `case.calls`
/// calls each (rotating through the copies, a barrier between calls, as a decoder step
/// runs them), the two kernels' chains alternating and taking turns to go first, so that
/// clocks changing between or within submissions weigh on both alike. One untimed
/// submission first creates the pipelines; each timed submission starts with
/// [`WARM_CHAINS`] untimed chains of each. Timed between GPU timestamps where the queue has
/// them, so that recording and submitting do not count; else by the wall clock around
/// each submission.
pub(super) fn time_pair(
    ctx: &Context,
    timer: Option<&GpuTimer>,
    case: &Case,
    m: u32,
    (baseline, candidate): (Choice, Choice),
    workspace: Option<&Buffer>,
) -> Result<(f64, f64)> {
    let p = GemvParams::dense(m, case.k, case.n);
    let range_for = |choice: &Choice| match (choice.workspace_bytes, workspace) {
        (0, _) => Ok(None),
        (bytes, Some(w)) if bytes <= w.size => Ok(Some(BufferRange {
            buffer: w.buffer,
            offset: 0,
            range: bytes,
        })),
        (bytes, _) => Err(Error::Internal(format!(
            "a tuning call asks {bytes} bytes of workspace; it was given less"
        ))),
    };
    let prepared = |choice: &Choice| -> Result<(Vec<CallPlan>, Option<BufferRange>)> {
        let plans = case
            .mats
            .iter()
            .map(|mat| CallPlan::of(ctx, mat, &p, *choice))
            .collect::<Result<Vec<_>>>()?;
        Ok((plans, range_for(choice)?))
    };
    let kernels = [prepared(&baseline)?, prepared(&candidate)?];
    let x = BufferRange {
        buffer: case.x.buffer,
        offset: 0,
        range: 4 * u64::from(m) * case.k,
    };
    let y = BufferRange {
        buffer: case.y.buffer,
        offset: 0,
        range: 4 * u64::from(m) * case.n,
    };
    let d = &ctx.device.device;
    let chain = |cmd: vk::CommandBuffer, kernel: usize, calls: usize| -> Result<()> {
        let (plans, workspace) = &kernels[kernel];
        for i in 0..calls {
            // SAFETY: q4vk's own command buffer, recording.
            unsafe { record_barrier(d, cmd, COMPUTE_WRITE, COMPUTE_READ_WRITE) };
            let at = i % case.mats.len();
            record_resolved(
                ctx,
                cmd,
                &case.mats[at],
                &Set1::pair(x, y),
                &p,
                *workspace,
                &plans[at],
            )?;
        }
        Ok(())
    };
    // Repeat r times kernel 0 then 1 where r is even, 1 then 0 where odd.
    let order = |r: usize| match r % 2 {
        0 => [0, 1],
        _ => [1, 0],
    };
    ctx.submit(|cmd| {
        chain(cmd, 0, case.mats.len())?;
        chain(cmd, 1, case.mats.len())
    })?;
    let mut fastest = [Duration::MAX; 2];
    match timer {
        None => {
            for r in 0..REPEATS {
                for kernel in order(r) {
                    ctx.submit(|cmd| chain(cmd, kernel, WARM_CHAINS * case.calls))?;
                    let started = Instant::now();
                    ctx.submit(|cmd| chain(cmd, kernel, case.calls))?;
                    fastest[kernel] = fastest[kernel].min(started.elapsed());
                }
            }
        }
        Some(timer) => {
            let times = timer.chains(|timer, cmd| {
                chain(cmd, 0, WARM_CHAINS * case.calls)?;
                chain(cmd, 1, WARM_CHAINS * case.calls)?;
                for r in 0..REPEATS {
                    for kernel in order(r) {
                        let stamp = (4 * r + 2 * kernel) as u32;
                        timer.stamp(cmd, stamp);
                        chain(cmd, kernel, case.calls)?;
                        timer.stamp(cmd, stamp + 1);
                    }
                }
                Ok(())
            })?;
            for (i, t) in times.into_iter().enumerate() {
                fastest[i % 2] = fastest[i % 2].min(t);
            }
        }
    }
    let per_call = |t: Duration| t.as_secs_f64() * 1e6 / case.calls as f64;
    Ok((per_call(fastest[0]), per_call(fastest[1])))
}

/// Compute writes, then compute reads and writes: the barrier between chained calls.
pub(super) const COMPUTE_WRITE: (vk::PipelineStageFlags, vk::AccessFlags) = (
    vk::PipelineStageFlags::COMPUTE_SHADER,
    vk::AccessFlags::SHADER_WRITE,
);
/// See [`COMPUTE_WRITE`].
pub(super) const COMPUTE_READ_WRITE: (vk::PipelineStageFlags, vk::AccessFlags) = (
    vk::PipelineStageFlags::COMPUTE_SHADER,
    vk::AccessFlags::from_raw(
        vk::AccessFlags::SHADER_READ.as_raw() | vk::AccessFlags::SHADER_WRITE.as_raw(),
    ),
);

/// A timestamp query pool of q4vk's queue, destroyed on drop.
pub(super) struct GpuTimer<'a> {
    ctx: &'a Context,
    pool: vk::QueryPool,
    count: u32,
    /// `timestampValidBits` of the queue.
    bits: u32,
}

impl<'a> GpuTimer<'a> {
    /// A pool of `count` timestamps on `ctx`'s queue, or `None` where it has none.
    pub(super) fn for_queue(ctx: &'a Context, count: u32) -> Result<Option<GpuTimer<'a>>> {
        let bits = ctx.device.timestamp_bits;
        if bits == 0 {
            return Ok(None);
        }
        let info = vk::QueryPoolCreateInfo::default()
            .query_type(vk::QueryType::TIMESTAMP)
            .query_count(count);
        // SAFETY: q4vk's live device; the pool is destroyed on drop.
        let pool = unsafe { ctx.device.device.create_query_pool(&info, None) }
            .map_err(|e| Error::vk("vkCreateQueryPool", e))?;
        ctx.device.namer.name(pool, "q4vk tuning timestamps");
        Ok(Some(GpuTimer {
            ctx,
            pool,
            count,
            bits,
        }))
    }

    /// Records timestamp `index` after all earlier commands.
    pub(super) fn stamp(&self, cmd: vk::CommandBuffer, index: u32) {
        // SAFETY: q4vk's own command buffer, recording; index < count (callers).
        unsafe {
            self.ctx.device.device.cmd_write_timestamp(
                cmd,
                vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                self.pool,
                index,
            )
        }
    }

    /// Submits what `record` records after the pool's reset, waits, and returns the time
    /// between each pair of timestamps (0 and 1, 2 and 3, …).
    pub(super) fn chains(
        &self,
        record: impl FnOnce(&Self, vk::CommandBuffer) -> Result<()>,
    ) -> Result<Vec<Duration>> {
        let d = &self.ctx.device.device;
        self.ctx.submit(|cmd| {
            // SAFETY: q4vk's own command buffer, recording; the pool is live.
            unsafe { d.cmd_reset_query_pool(cmd, self.pool, 0, self.count) };
            record(self, cmd)
        })?;
        let mut stamps = vec![0u64; self.count as usize];
        // SAFETY: every query was written by the completed submission.
        unsafe {
            d.get_query_pool_results(
                self.pool,
                0,
                &mut stamps,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
            )
        }
        .map_err(|e| Error::vk("vkGetQueryPoolResults", e))?;
        let mask = u64::MAX >> (64 - self.bits.min(64));
        let period = f64::from(self.ctx.device.info.timestamp_period);
        Ok(stamps
            .chunks_exact(2)
            .map(|pair| {
                let ticks = pair[1].wrapping_sub(pair[0]) & mask;
                Duration::from_secs_f64(ticks as f64 * period * 1e-9)
            })
            .collect())
    }
}

impl Drop for GpuTimer<'_> {
    fn drop(&mut self) {
        // SAFETY: the pool is not in use once `chains` has waited (or never submitted).
        unsafe { self.ctx.device.device.destroy_query_pool(self.pool, None) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shapes are points of a grid; a shape's time is its squared distance from (3, 3) plus
    /// one; its neighbours are one step along an axis within 0..8.
    fn time_of(p: (i32, i32)) -> f64 {
        f64::from((p.0 - 3).pow(2) + (p.1 - 3).pow(2) + 1)
    }

    fn neighbours(p: &(i32, i32)) -> Vec<(i32, i32)> {
        [(1, 0), (-1, 0), (0, 1), (0, -1)]
            .map(|(a, b)| (p.0 + a, p.1 + b))
            .into_iter()
            .filter(|q| (0..8).contains(&q.0) && (0..8).contains(&q.1))
            .collect()
    }

    fn around(p: &(i32, i32)) -> Vec<(i32, i32)> {
        let mut all: Vec<(i32, i32)> = (0..8).flat_map(|a| (0..8).map(move |b| (a, b))).collect();
        all.retain(|q| q != p);
        all.sort_by_key(|q| (q.0 - p.0).abs() + (q.1 - p.1).abs());
        all
    }

    /// A round's timings as `Timing::candidates` gives them: `best` at 1, then each of
    /// `next` with its time against `best`.
    fn round(best: (i32, i32), next: Vec<(i32, i32)>) -> Vec<((i32, i32), f64)> {
        let mut out = vec![(best, 1.0)];
        out.extend(next.into_iter().map(|s| (s, time_of(s) / time_of(best))));
        out
    }

    #[test]
    fn a_climb_reaches_the_fastest_shape_several_steps_away() {
        let mut rounds = 0;
        let timed = climb(
            (0, 0),
            (neighbours, around),
            |best, next| {
                rounds += 1;
                Ok(round(best, next))
            },
            || true,
        )
        .unwrap();
        let (shape, ratio) = fastest(&timed).unwrap();
        assert_eq!(shape, (3, 3));
        assert!((ratio - time_of((3, 3)) / time_of((0, 0))).abs() < 1e-12);
        // Every shape once, each with its own time against the start.
        assert_eq!(timed.len(), 64);
        for &(s, r) in &timed {
            assert!((r - time_of(s) / time_of((0, 0))).abs() < 1e-12, "{s:?}");
        }
        // Six climbing rounds, one that finds nothing faster, then the rest in one.
        assert_eq!(rounds, 8);
    }

    #[test]
    fn a_climb_stops_when_the_budget_does() {
        let mut rounds = 0;
        let timed = climb(
            (0, 0),
            (neighbours, around),
            |best, next| Ok(round(best, next)),
            || {
                rounds += 1;
                rounds <= 2
            },
        )
        .unwrap();
        // Two rounds: the start's two neighbours, then the next point's new ones.
        assert_eq!(timed.len(), 1 + 2 + 2);
        assert_eq!(fastest(&timed).unwrap().0, (1, 1));
    }
}
