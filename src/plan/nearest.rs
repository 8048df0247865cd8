//! The order in which tuning times its candidates: the device row's value first, then the
//! others nearest it (`plan::tuned`, `plan::tuned_gemm`).

/// Power-of-two steps between `a` and `b` (0 where equal), as candidates count their
/// distance from the table's value.
pub(crate) fn steps(a: u32, b: u32) -> u32 {
    (a.max(1).ilog2() as i32 - b.max(1).ilog2() as i32).unsigned_abs()
}

/// `table`, then `others` nearest it first: fewest fields changed, then the smallest change
/// (`distance` gives each field's steps from the table), so that a short budget still
/// tries the table's neighbours.
pub(crate) fn nearest_first<T: Copy, const N: usize>(
    table: &T,
    mut others: Vec<T>,
    distance: impl Fn(&T) -> [u32; N],
) -> Vec<T> {
    others.sort_by_key(|t| {
        let d = distance(t);
        (d.iter().filter(|&&v| v > 0).count(), d.iter().sum::<u32>())
    });
    let mut out = vec![*table];
    out.extend(others);
    out
}
