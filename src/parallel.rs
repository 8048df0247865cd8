//! Splitting streaming work over threads: the output is cut into consecutive units, each
//! thread gets a consecutive run of units and the matching disjoint slice of the output.

use std::ops::Range;

/// Threads to use for a `threads` argument of the C API: 0 means one per available core;
/// larger values are clamped to the core count.
pub fn resolve_threads(requested: u32) -> usize {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    match requested as usize {
        0 => cores,
        n => n.min(cores),
    }
}

/// Name of q4vk's worker threads (the C API's panic boundary keeps their panics quiet too).
pub const WORKER_NAME: &str = "q4vk-worker";

/// A job started by [`spawn_or_run`]: running on a worker thread, or already finished on the
/// calling thread.
pub enum Worker<'scope, T> {
    /// Running on a scoped worker thread.
    Spawned(std::thread::ScopedJoinHandle<'scope, T>),
    /// Run on the calling thread because no thread could be spawned.
    Done(T),
}

impl<T> Worker<'_, T> {
    /// Waits for the job and returns its value; a panic on the worker continues on the
    /// calling thread with the worker's payload (so the caller's panic boundary reports its
    /// message).
    pub fn join(self) -> T {
        match self {
            Worker::Spawned(handle) => handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Worker::Done(value) => value,
        }
    }
}

/// Runs `job` on a new worker thread of `scope`, or, when the system cannot spawn one
/// (thread or memory limits), right here on the calling thread: the work is always done, so
/// a failed spawn never leaves an output partly written.
pub fn spawn_or_run<'scope, T: Send + 'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    job: impl FnOnce() -> T + Send + 'scope,
) -> Worker<'scope, T> {
    // The job is handed back when the spawn fails, so it can run here instead.
    let slot = std::sync::Arc::new(std::sync::Mutex::new(Some(job)));
    let theirs = slot.clone();
    let spawned = std::thread::Builder::new()
        .name(WORKER_NAME.into())
        .spawn_scoped(scope, move || {
            let job = theirs.lock().unwrap_or_else(|e| e.into_inner()).take();
            job.expect("a spawned job runs once")()
        });
    match spawned {
        Ok(handle) => Worker::Spawned(handle),
        Err(_) => {
            let job = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
            Worker::Done(job.expect("a job that was not spawned is still here")())
        }
    }
}

/// Splits `units` consecutive units of `out` (unit `i` owns the next `unit_len(i)`
/// elements) into up to `threads` consecutive spans, and calls `work(span, slice)` for each
/// span on its own scoped thread (the calling thread takes the last one, and any span whose
/// thread could not be spawned). `slice` covers exactly the span's units.
pub fn for_each_span<T: Send>(
    out: &mut [T],
    units: usize,
    unit_len: impl Fn(usize) -> usize + Sync,
    threads: usize,
    work: impl Fn(Range<usize>, &mut [T]) + Sync,
) {
    let threads = threads.clamp(1, units.max(1));
    let per_thread = units.div_ceil(threads);
    std::thread::scope(|scope| {
        let mut workers = Vec::with_capacity(threads - 1);
        let mut rest = out;
        let mut first = 0;
        while first < units {
            let last = (first + per_thread).min(units);
            let len: usize = (first..last).map(&unit_len).sum();
            let (mine, tail) = rest.split_at_mut(len);
            rest = tail;
            if last == units {
                work(first..last, mine);
            } else {
                let work = &work;
                workers.push(spawn_or_run(scope, move || work(first..last, mine)));
            }
            first = last;
        }
        // Join explicitly: the scope alone waits only for the closures to return, and a
        // worker could still be tearing down its thread-locals after this call returns.
        for worker in workers {
            worker.join();
        }
    });
}

/// Like [`for_each_span`], but calls `work(unit, slice)` once per unit with the unit's own
/// slice.
pub fn for_each_unit<T: Send>(
    out: &mut [T],
    units: usize,
    unit_len: impl Fn(usize) -> usize + Sync,
    threads: usize,
    work: impl Fn(usize, &mut [T]) + Sync,
) {
    for_each_span(out, units, &unit_len, threads, |span, mut slice| {
        for unit in span {
            let (head, tail) = slice.split_at_mut(unit_len(unit));
            work(unit, head);
            slice = tail;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_visited_once_with_its_slice() {
        for threads in 1..6 {
            let lens = [3usize, 1, 4, 1, 5, 9, 2];
            let total: usize = lens.iter().sum();
            let mut out = vec![usize::MAX; total];
            for_each_unit(
                &mut out,
                lens.len(),
                |i| lens[i],
                threads,
                |unit, slice| {
                    assert_eq!(slice.len(), lens[unit]);
                    slice.fill(unit);
                },
            );
            let want: Vec<usize> = lens
                .iter()
                .enumerate()
                .flat_map(|(i, &l)| std::iter::repeat_n(i, l))
                .collect();
            assert_eq!(out, want);
        }
    }

    #[test]
    fn threads_resolved() {
        assert!(resolve_threads(0) >= 1);
        assert_eq!(resolve_threads(1), 1);
        assert!(resolve_threads(10_000) <= resolve_threads(0));
    }
}
