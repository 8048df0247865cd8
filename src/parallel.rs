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

/// Splits `units` consecutive units of `out` (unit `i` owns the next `unit_len(i)`
/// elements) into up to `threads` consecutive spans, and calls `work(span, slice)` for each
/// span on its own scoped thread (the calling thread takes the last one). `slice` covers
/// exactly the span's units.
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
                workers.push(scope.spawn(move || work(first..last, mine)));
            }
            first = last;
        }
        // Join explicitly: the scope alone waits only for the closures to return, and a
        // worker could still be tearing down its thread-locals after this call returns.
        for worker in workers {
            if let Err(panic) = worker.join() {
                std::panic::resume_unwind(panic);
            }
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
