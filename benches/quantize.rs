//! Throughput of the CPU quantizers on LLM-sized f16 weights, beside the memcpy bandwidth
//! of the same bytes with the same number of threads, measured in the same run:
//!
//! * `q4vk_weight_quantize` (Paddle int4, arch 80: quantize + CUTLASS permute in one call;
//!   for scale, Paddle 3.3.1's own serial CPU kernel takes 1.79 s and 2.05 s on these shapes);
//! * `paddle_to_q4` (Paddle int4 g128 output to q4vk's Q4 format, as a Paddle matrix source
//!   is converted before packing), counted in the bytes of the f16 weight it came from;
//! * `q4::quantize` (what `q4vk_q4_quantize` runs), on the same bytes read as `[n][k]` and
//!   as transposed `[k][n]`.
//!
//! Each figure is over `RUNS` timed calls after a warm-up: best and median wall time, and
//! the best process CPU time (all threads), which a busy machine disturbs much less than
//! wall time. Run: `cargo bench --bench quantize`. Prints a markdown table.

use q4vk::ffi::status::Q4VK_OK;
use q4vk::ffi::weight::*;
use q4vk::layout::convert::paddle_to_q4;
use q4vk::quant::dtype::Dtype;
use q4vk::quant::paddle::{self, PaddleParams, PaddleScheme};
use q4vk::quant::q4::{self, FloatWeights, Q4Out, Q4Shape};
use std::time::Instant;

const RUNS: usize = 9;

/// Seeded random f16 weights, normal-ish (sum of uniforms), never all zeros.
fn random_f16(elements: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    let mut out = Vec::with_capacity(elements * 2);
    for _ in 0..elements {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let u = (state >> 40) as f32 / (1u64 << 24) as f32;
        let v = (state & 0xffffff) as f32 / (1u64 << 24) as f32;
        out.extend_from_slice(&half::f16::from_f32((u + v - 1.0) * 0.05).to_le_bytes());
    }
    out
}

/// CPU time of the whole process (every thread), in seconds.
fn process_cpu_s() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// Best and median wall seconds, and best process CPU seconds, of `RUNS` calls.
struct Timing {
    best: f64,
    median: f64,
    cpu: f64,
}

fn time_it(mut f: impl FnMut()) -> Timing {
    f(); // warm-up: first touch of the output pages
    let mut wall = Vec::with_capacity(RUNS);
    let mut cpu = f64::MAX;
    for _ in 0..RUNS {
        let (start, cpu0) = (Instant::now(), process_cpu_s());
        f();
        wall.push(start.elapsed().as_secs_f64());
        cpu = cpu.min(process_cpu_s() - cpu0);
    }
    wall.sort_by(f64::total_cmp);
    Timing {
        best: wall[0],
        median: wall[RUNS / 2],
        cpu,
    }
}

/// memcpy of `src` with `threads` threads, each copying a contiguous part.
fn memcpy_gbs(src: &[u8], threads: usize) -> f64 {
    let mut dst = vec![0u8; src.len()];
    let part = src.len().div_ceil(threads);
    let t = time_it(|| {
        std::thread::scope(|scope| {
            for (d, s) in dst.chunks_mut(part).zip(src.chunks(part)) {
                scope.spawn(move || d.copy_from_slice(std::hint::black_box(s)));
            }
        })
    });
    src.len() as f64 / t.best / 1e9
}

/// One table row: `bytes` of input processed per call.
fn row(what: &str, shape: &str, group: i32, threads: usize, bytes: usize, t: &Timing, memcpy: f64) {
    let gbs = bytes as f64 / t.best / 1e9;
    let group = if group < 0 {
        "per-channel".to_string()
    } else {
        group.to_string()
    };
    println!(
        "| {what} | {shape} | {group} | {threads} | {:.1} | {:.1} | {gbs:.2} | {:.2} | {:.2} | {memcpy:.2} | {:.0}% |",
        t.best * 1e3,
        t.median * 1e3,
        gbs / threads as f64,
        bytes as f64 / t.cpu / 1e9,
        100.0 * gbs / memcpy,
    );
}

fn paddle(weight: &[u8], k: usize, n: usize, group_size: i32, threads: usize) -> Timing {
    let mut d = std::mem::MaybeUninit::uninit();
    unsafe { q4vk_weight_quantize_desc_default(d.as_mut_ptr()) };
    let mut d = unsafe { d.assume_init() };
    (d.k, d.n, d.group_size, d.threads) = (k as u64, n as u64, group_size, threads as u32);
    let (mut qb, mut sb) = (0, 0);
    assert_eq!(
        unsafe { q4vk_weight_quantize_size(&d, &mut qb, &mut sb) },
        Q4VK_OK
    );
    let (mut q, mut s) = (vec![0u8; qb], vec![0u8; sb]);
    time_it(|| {
        let status = unsafe {
            q4vk_weight_quantize(
                &d,
                weight.as_ptr().cast(),
                weight.len(),
                q.as_mut_ptr().cast(),
                qb,
                s.as_mut_ptr().cast(),
                sb,
            )
        };
        assert_eq!(status, Q4VK_OK);
    })
}

/// Paddle's int4 g128 output of `weight` converted to Q4 (`paddle_to_q4`, what
/// `q4vk_matrix_create` does with a Paddle source before packing).
fn convert(weight: &[u8], k: usize, n: usize, threads: usize) -> Timing {
    let scheme = PaddleScheme::new(PaddleParams {
        algo: 1,
        dtype: 1,
        arch: 80,
        group_size: 128,
        k: k as u64,
        n: n as u64,
    })
    .unwrap();
    let (mut q, mut s) = (
        vec![0u8; scheme.qweight_bytes()],
        vec![0u8; scheme.scale_bytes()],
    );
    paddle::quantize(&scheme, weight, &mut q, &mut s, threads).unwrap();
    time_it(|| {
        std::hint::black_box(paddle_to_q4(&scheme, &q, &s, threads).unwrap());
    })
}

fn q4_quantize(
    bytes: &[u8],
    (n, k): (usize, usize),
    transposed: bool,
    group_size: i32,
    threads: usize,
) -> Timing {
    let shape = Q4Shape::new(n as u64, k as u64, group_size, 0).unwrap();
    let w = FloatWeights {
        dtype: Dtype::F16,
        transposed,
        bytes,
    };
    let (mut qw, mut qs) = (
        vec![0u8; shape.weight_bytes()],
        vec![0u8; 2 * shape.scale_count()],
    );
    time_it(|| {
        let out = Q4Out {
            weight: &mut qw,
            scales: &mut qs,
            zeros: &mut [],
        };
        q4::quantize(&shape, &w, out, threads).unwrap();
    })
}

fn main() {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let thread_counts: Vec<usize> = if cores > 1 { vec![1, cores] } else { vec![1] };
    println!(
        "f16 input, int4; best and median of {RUNS} runs; {cores} cores; GB/s are input bytes \
         per second (best wall time), per thread (÷ threads) and per CPU-second (best process CPU time)\n"
    );
    println!(
        "| quantizer | stored weight | group | threads | best ms | median ms | GB/s | GB/s per thread | GB/s per CPU-s | memcpy GB/s (same bytes, same threads) | % of memcpy |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (rows, cols) in [(4096usize, 11008usize), (11008, 4096)] {
        let weight = random_f16(rows * cols, (rows * 31 + cols) as u64);
        let memcpy: Vec<f64> = thread_counts
            .iter()
            .map(|&t| memcpy_gbs(&weight, t))
            .collect();
        let stored = format!("[{rows}, {cols}]");
        for group in [-1, 128] {
            for (&threads, &mc) in thread_counts.iter().zip(&memcpy) {
                let t = paddle(&weight, rows, cols, group, threads);
                row(
                    "Paddle arch 80 (K × N)",
                    &stored,
                    group,
                    threads,
                    weight.len(),
                    &t,
                    mc,
                );
            }
        }
        for (&threads, &mc) in thread_counts.iter().zip(&memcpy) {
            // Throughput in f16 input bytes too (the qweight is a quarter of them).
            let t = convert(&weight, rows, cols, threads);
            row(
                "Paddle → Q4 convert",
                &stored,
                128,
                threads,
                weight.len(),
                &t,
                mc,
            );
        }
        for (layout, transposed, shape) in [
            ("q4 [n][k]", false, (rows, cols)),
            ("q4 [k][n]", true, (cols, rows)),
        ] {
            for group in [-1, 128] {
                for (&threads, &mc) in thread_counts.iter().zip(&memcpy) {
                    let t = q4_quantize(&weight, shape, transposed, group, threads);
                    row(layout, &stored, group, threads, weight.len(), &t, mc);
                }
            }
        }
    }
}
