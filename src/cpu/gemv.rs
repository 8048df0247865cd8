//! GEMV on a [`CpuMatrix`]: `y[m][n] = sum_k x[m][k] · w[n][k]` for any m ≥ 1, fp32
//! accumulation. x is copied once per call into the order the kernels decode codes in
//! (gathered through the matrix's column order, if it has one), or, at m = 1 on
//! [`Isa::Avx512Vnni`], [`Isa::Avx2`] and [`Isa::NeonDot`], into 8-bit digits for the integer kernel
//! ([`kernels::integer_kernel`]; on x86-64 the f32 kernels measured faster from m = 2:
//! they decode each piece of W once for up to 4 x rows; aarch64 follows, unmeasured).
//! GGUF blocks decode in the kernel (`super::blocks`), but for a few rows of x on the
//! x86-64 families and [`Isa::NeonDot`] (`super::blocks_dot::max_rows_of_x`), which go
//! into digits (or bytes) for `super::blocks_dot`, a row of x at a time over each chunk of
//! W's rows.
//! Scoped threads take chunks of W's rows from a shared counter.

use super::digits::Digits;
use super::kernels::{self, Isa, TILE_ROWS};
use super::matrix::{CpuMatrix, BLOCK};
use crate::alloc;
use crate::error::Result;
use crate::parallel::spawn_or_run;
use crate::size;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Multiply-adds below which one more thread is not worth its start-up.
const MIN_WORK_PER_THREAD: usize = 1 << 18;
/// Rows of W per unit of work that threads take from the shared counter.
const CHUNK_ROWS: usize = 8 * TILE_ROWS;

/// Copies `m` rows of x (`k` each) into `m` rows of `blocks·32` elements, zero-padded, each
/// chunk of [`Isa::chunk`] elements reordered as the kernels of `isa` decode the codes
/// ([`Isa::chunk_element`]). Column `j` takes input `order[j]` when `order` is not empty
/// (GPTQ act-order), else `j`.
pub fn pack_x(
    x: &[f32],
    m: usize,
    k: usize,
    blocks: usize,
    isa: Isa,
    order: &[u32],
) -> Result<Vec<f32>> {
    let padded = blocks * BLOCK;
    let chunk = isa.chunk();
    let lanes: Vec<usize> = (0..chunk).map(|i| isa.chunk_element(i)).collect();
    let len = size::product("m * (k padded to blocks of 32)", &[m, padded])?;
    let mut xp = alloc::filled::<f32>(len, "the reordered activations")?;
    for (src, dst) in x.chunks_exact(k).take(m).zip(xp.chunks_exact_mut(padded)) {
        let at = |j: usize| match (j < k, order.is_empty()) {
            (false, _) => 0.0,
            (true, true) => src[j],
            (true, false) => src[order[j] as usize],
        };
        for (c, part) in dst.chunks_exact_mut(chunk).enumerate() {
            for (value, &e) in part.iter_mut().zip(&lanes) {
                *value = at(c * chunk + e);
            }
        }
    }
    Ok(xp)
}

/// `y` (`m·n`, row-major) for `x` (`m·k`, row-major), any `m ≥ 1`, with up to `threads`
/// threads and the kernels of `isa`. Writes all of `y[..m·n]` on success, nothing on error
/// (the errors are `InvalidArgument` where m·k or m·n overflows `size_t`, and
/// `OutOfHostMemory` for the reordered x or its digits and, when
/// m > 1, a row-major scratch of `m·n` floats).
pub fn gemv(
    mat: &CpuMatrix,
    x: &[f32],
    y: &mut [f32],
    m: usize,
    threads: usize,
    isa: Isa,
) -> Result<()> {
    gemv_rounding(mat, x, y, m, (threads, isa), false)
}

/// [`gemv`], with x rounded to one byte per element (`x_to_bytes`,
/// `Q4VK_GEMV_ROUND_X_TO_INT8`) where the integer kernel on GGUF blocks runs
/// ([`super::blocks_dot::ColumnDigits::bytes`]); elsewhere exact as [`gemv`].
pub fn gemv_rounding(
    mat: &CpuMatrix,
    x: &[f32],
    y: &mut [f32],
    m: usize,
    (threads, isa): (usize, Isa),
    x_to_bytes: bool,
) -> Result<()> {
    let (n, k) = (mat.shape.n, mat.shape.k);
    let (xn, yn) = (
        size::product("m * k", &[m, k])?,
        size::product("m * n", &[m, n])?,
    );
    assert!(m >= 1 && x.len() >= xn && y.len() >= yn);
    let work = n.saturating_mul(mat.blocks() * BLOCK).saturating_mul(m);
    let threads = threads.min(work / MIN_WORK_PER_THREAD).max(1);
    if let Some(blocks) = &mat.gguf_blocks {
        // The integer kernels on blocks run within these families (the CPU checked too).
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        if matches!(
            isa,
            Isa::Avx2 | Isa::Avx512 | Isa::Avx512Vnni | Isa::NeonDot
        ) && super::blocks_dot::runs(blocks, m, x_to_bytes)
        {
            if let Some(xds) = column_digits(x, m, k, x_to_bytes)? {
                // Each chunk of W's rows meets every row of x while it is in the cache.
                let kernel = |rows: Range<usize>, out: &mut [f32]| {
                    let mut one = [0f32; CHUNK_ROWS];
                    let one = &mut one[..rows.len()];
                    for (i, xd) in xds.iter().enumerate() {
                        super::blocks_dot::rows(blocks, xd, rows.clone(), one);
                        for (r, &v) in one.iter().enumerate() {
                            out[r * m + i] = v;
                        }
                    }
                };
                return in_rows_of_w(threads, m, n, y, kernel);
            }
        }
        let kernel = |rows, out: &mut [f32]| blocks.rows(k, x, m, rows, out);
        return in_rows_of_w(threads, m, n, y, kernel);
    }
    if let Some(integer) = kernels::integer_kernel(isa).filter(|_| m == 1) {
        let order = &mat.k_order;
        if let Some(xd) = Digits::new(x, k, mat.shape.group_size, order)? {
            spread(threads, 1, &mut y[..n], |rows, out| {
                integer(mat, &xd, rows, out)
            });
            return Ok(());
        }
    }
    let xp = pack_x(x, m, k, mat.blocks(), isa, &mat.k_order)?;
    let kernel = |rows, out: &mut [f32]| kernels::rows(isa, mat, &xp, m, rows, out);
    in_rows_of_w(threads, m, n, y, kernel)
}

/// The digits (or, with `x_to_bytes`, the bytes) of each of the `m` rows of x (`k`
/// each) for the integer kernels on GGUF blocks; `None` where a row has an infinite or NaN
/// element (the f32 decode keeps its policy for those).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn column_digits(
    x: &[f32],
    m: usize,
    k: usize,
    x_to_bytes: bool,
) -> Result<Option<Vec<super::blocks_dot::ColumnDigits>>> {
    use super::blocks_dot::ColumnDigits;
    let rows = x.chunks_exact(k).take(m).map(|row| match x_to_bytes {
        true => ColumnDigits::bytes(row, k),
        false => ColumnDigits::new(row, k),
    });
    Ok(rows.collect::<Result<Vec<_>>>()?.into_iter().collect())
}

/// Runs `kernel(rows, out)`, which writes each row of W's `m` results together, over all
/// `n` rows on up to `threads` threads, into `y` (`[m][n]`): directly at m = 1, else
/// through a row-major scratch of `[n][m]` transposed after (`OutOfHostMemory` where it
/// cannot be allocated).
fn in_rows_of_w(
    threads: usize,
    m: usize,
    n: usize,
    y: &mut [f32],
    kernel: impl Fn(Range<usize>, &mut [f32]) + Sync,
) -> Result<()> {
    if m == 1 {
        spread(threads, 1, &mut y[..n], kernel);
        return Ok(());
    }
    let mut scratch = alloc::filled::<f32>(m * n, "the GEMV's row-major results")?;
    spread(threads, m, &mut scratch, kernel);
    for (row, values) in scratch.chunks_exact(m).enumerate() {
        for (i, &v) in values.iter().enumerate() {
            y[i * n + row] = v;
        }
    }
    Ok(())
}

/// Runs `kernel(rows, out)` over all rows of `out` (`m` results per row) on up to
/// `threads` threads (the calling one included), which take chunks of
/// [`CHUNK_ROWS`] rows until none is left, so a thread that starts late (spawning takes
/// time) or is slowed by other work on the machine does less.
fn spread(
    threads: usize,
    m: usize,
    out: &mut [f32],
    kernel: impl Fn(Range<usize>, &mut [f32]) + Sync,
) {
    let chunks: Vec<_> = out
        .chunks_mut(CHUNK_ROWS * m)
        .map(std::sync::Mutex::new)
        .collect();
    let next = AtomicUsize::new(0);
    let work = || loop {
        let chunk = next.fetch_add(1, Ordering::Relaxed);
        let Some(slot) = chunks.get(chunk) else { break };
        let mut slice = slot.lock().unwrap_or_else(|e| e.into_inner());
        let first = chunk * CHUNK_ROWS;
        kernel(first..first + slice.len() / m, &mut slice);
    };
    std::thread::scope(|scope| {
        let workers: Vec<_> = (1..threads).map(|_| spawn_or_run(scope, work)).collect();
        work();
        // Join explicitly: the scope alone waits only for the closures to return.
        for worker in workers {
            worker.join();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::reference;
    use crate::quant::q4::{Q4Data, Q4Shape, ScaleType};
    use std::borrow::Cow;

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }

    fn data(n: usize, k: usize, group: i32, zeros: bool, seed: &mut u64) -> Q4Data<'static> {
        let shape = Q4Shape::new(n as u64, k as u64, group, zeros as u32).unwrap();
        let mut weight: Vec<u8> = (0..shape.weight_bytes()).map(|_| lcg(seed) as u8).collect();
        if k % 2 == 1 {
            for row in 0..n {
                weight[row * shape.row_bytes() + k / 2] &= 0x0f;
            }
        }
        let scales = (0..shape.scale_count())
            .flat_map(|_| ((lcg(seed) % 2000) as f32 * 1e-4 - 0.1).to_le_bytes())
            .collect();
        let zeros = (0..shape.zeros_bytes())
            .map(|_| (lcg(seed) % 16) as u8)
            .collect();
        Q4Data {
            shape,
            weight: Cow::Owned(weight),
            scale_type: ScaleType::F32,
            scales: Cow::Owned(scales),
            zeros: Cow::Owned(zeros),
        }
    }

    /// A random permutation of `0..k`.
    fn permutation(k: usize, seed: &mut u64) -> Vec<u32> {
        let mut order: Vec<u32> = (0..k as u32).collect();
        for i in (1..k).rev() {
            order.swap(i, lcg(seed) as usize % (i + 1));
        }
        order
    }

    /// A matrix of one kind (0 symmetric, 1 zero points, 2 offsets), with its columns in
    /// order or gathered through a random column order, and what its f64 reference needs.
    struct Case {
        data: Q4Data<'static>,
        offsets: Option<Vec<f32>>,
        order: Option<Vec<u32>>,
        mat: CpuMatrix,
    }

    impl Case {
        fn new(
            (n, k, group): (usize, usize, i32),
            kind: u8,
            ordered: bool,
            seed: &mut u64,
        ) -> Case {
            let data = data(n, k, group, kind == 1, seed);
            let offsets = (kind == 2).then(|| {
                (0..data.shape.scale_count())
                    .map(|_| (lcg(seed) % 2001) as f32 * 1e-4 - 0.1)
                    .collect::<Vec<f32>>()
            });
            let order = (!ordered).then(|| permutation(k, seed));
            let parts = (&data, offsets.as_deref(), order.as_deref());
            let mat = CpuMatrix::imported(parts).unwrap();
            Case {
                data,
                offsets,
                order,
                mat,
            }
        }

        /// The f64 reference for `m` rows of x (column j multiplies input order[j]).
        fn reference(&self, x: &[f32], m: usize) -> Vec<f64> {
            let k = self.data.shape.k;
            let gathered: Vec<f32> = match &self.order {
                None => x.to_vec(),
                Some(o) => (0..m * k)
                    .map(|i| x[i / k * k + o[i % k] as usize])
                    .collect(),
            };
            match &self.offsets {
                None => reference::gemv(&self.data, &gathered, m),
                Some(o) => reference::gemv_with_offsets(&self.data, o, &gathered, m),
            }
        }
    }

    /// Every kernel this CPU can run (the scalar one always) matches the f64 reference
    /// with one thread and with several, for symmetric codes, zero points and per-group
    /// offsets, inputs in order or gathered through a column order, m = 1..9 and larger m.
    #[test]
    fn every_isa_matches_reference() {
        let mut seed = 5;
        let shapes = [
            (3, 1, -1),
            (9, 33, 32),
            (40, 300, 128),
            (17, 1000, -1),
            (300, 1000, 64),
        ];
        for isa in Isa::available() {
            for &(n, k, group) in &shapes {
                for (kind, ordered) in [(0, true), (1, true), (2, true), (1, false), (2, false)] {
                    let case = Case::new((n, k, group), kind, ordered, &mut seed);
                    for m in [1, 2, 3, 4, 5, 6, 7, 8, 9, 17, 33, 64] {
                        if n * k * m > 1 << 21 {
                            continue;
                        }
                        let x: Vec<f32> = (0..m * k)
                            .map(|_| (lcg(&mut seed) % 2001) as f32 * 1e-3 - 1.0)
                            .collect();
                        let want = case.reference(&x, m);
                        for threads in [1, 3] {
                            let mut y = vec![f32::NAN; m * n];
                            gemv(&case.mat, &x, &mut y, m, threads, isa).unwrap();
                            let err = reference::relative_error(&y, &want);
                            let what = format!("{isa:?} n {n} k {k} g {group} kind {kind}");
                            assert!(err < 1e-5, "{what} ordered {ordered} m {m}: {err:e}");
                        }
                    }
                }
            }
        }
    }

    /// x built to break a split into 8-bit digits per block: one huge element per block,
    /// subnormal elements and whole subnormal blocks beside normal ones, zero blocks and an
    /// all-zero x, elements of random exponents, x entirely tiny or entirely huge. The
    /// integer path (and every other family at m = 1 and 2) stays within 1e-5 of the f64
    /// reference, with every group size, each kind of matrix, columns in order or not.
    #[test]
    fn adversarial_x_matches_reference() {
        let mut seed = 11;
        let patterns = 10;
        for isa in Isa::available() {
            for group in [32, 64, 128, 256, -1] {
                for (kind, ordered) in [(0, true), (1, true), (2, true), (1, false)] {
                    let case = Case::new((37, 700, group), kind, ordered, &mut seed);
                    for pattern in 0..patterns {
                        for m in [1, 2] {
                            let x = adversarial(pattern, m * 700, &mut seed);
                            let want = case.reference(&x, m);
                            let mut y = vec![f32::NAN; m * 37];
                            gemv(&case.mat, &x, &mut y, m, 2, isa).unwrap();
                            let err = reference::relative_error(&y, &want);
                            let what = format!("{isa:?} g {group} kind {kind} ordered {ordered}");
                            assert!(err < 1e-5, "{what} pattern {pattern} m {m}: {err:e}");
                        }
                    }
                }
            }
        }
    }

    /// Adversarial x number `pattern` (see [`adversarial_x_matches_reference`]).
    fn adversarial(pattern: u32, len: usize, seed: &mut u64) -> Vec<f32> {
        (0..len)
            .map(|j| {
                let v = (lcg(seed) % 2001) as f32 * 1e-3 - 1.0;
                let sign = if lcg(seed).is_multiple_of(2) {
                    1.0
                } else {
                    -1.0
                };
                match pattern {
                    0 if j % 32 == 7 => 1e30 * sign,
                    1 if j % 32 == (j / 32) % 32 => 3e4 * sign,
                    2 if j % 3 == 0 => f32::from_bits((lcg(seed) as u32) & 0x807f_ffff),
                    3 if (j / 32) % 2 == 1 => v * 1e-39,
                    4 if (j / 32) % 3 != 0 => 0.0,
                    5 => 0.0,
                    6 => f32::from_bits(0x0080_0000 + (lcg(seed) as u32) % 0x7e00_0000) * sign,
                    7 => v * 1e-30,
                    8 => v * 1e34,
                    9 => v * 2f32.powi((lcg(seed) % 60) as i32 - 30),
                    _ => v,
                }
            })
            .collect()
    }

    /// x with an infinite or NaN element gives what the f32 kernels of the family give
    /// (the integer path leaves such x to them).
    #[test]
    fn non_finite_x_follows_the_f32_kernels() {
        let mut seed = 3;
        let case = Case::new((20, 300, 128), 0, true, &mut seed);
        for bad in [f32::INFINITY, f32::NEG_INFINITY, f32::NAN] {
            let mut x = adversarial(9, 300, &mut seed);
            x[101] = bad;
            let mut f32_path = vec![0f32; 20];
            gemv(&case.mat, &x, &mut f32_path, 1, 1, Isa::Scalar).unwrap();
            for isa in Isa::available() {
                let mut y = vec![0f32; 20];
                gemv(&case.mat, &x, &mut y, 1, 1, isa).unwrap();
                for (a, b) in y.iter().zip(&f32_path) {
                    assert!(
                        a == b || a.is_nan() && b.is_nan(),
                        "{isa:?} {bad}: {a} vs {b}"
                    );
                }
                assert!(y.iter().all(|v| !v.is_finite()), "{isa:?} {bad}: {y:?}");
            }
        }
    }

    #[test]
    fn scratch_allocation_failure_writes_nothing() {
        let mut seed = 1;
        let d = data(4, 64, 32, false, &mut seed);
        let mat = CpuMatrix::new(&d).unwrap();
        let x = vec![0.5f32; 2 * 64];
        for countdown in [0, 1] {
            let mut y = vec![7.0f32; 8];
            alloc::fail_after(Some(countdown));
            let r = gemv(&mat, &x, &mut y, 2, 1, Isa::Scalar);
            alloc::fail_after(None);
            assert!(matches!(r, Err(crate::error::Error::OutOfHostMemory(_))));
            assert!(y.iter().all(|&v| v == 7.0));
        }
    }
}
