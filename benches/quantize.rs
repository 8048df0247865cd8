//! Throughput of Paddle-compatible int4 quantization (quantize + permute in one call) on
//! LLM-sized f16 weights, printed beside the memcpy bandwidth of the same bytes measured in
//! the same run and beside Paddle 3.3.1's own CPU kernel (serial, 0.044–0.075 GB/s).
//!
//! Run: `cargo bench --bench quantize`. Prints a markdown table.

use q4vk::ffi::status::Q4VK_OK;
use q4vk::ffi::weight::*;
use std::time::{Duration, Instant};

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

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time_it(runs: usize, mut f: impl FnMut()) -> Duration {
    f(); // warm-up: first touch of the output pages
    median(
        (0..runs)
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed()
            })
            .collect(),
    )
}

fn main() {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let runs = 5;
    println!(
        "q4vk_weight_quantize, int4, arch 80, f16 input; median of {runs} runs; {cores} cores\n"
    );
    println!("| weight [K, N] | group | threads | time (ms) | input GB/s | memcpy GB/s (same bytes) | % of memcpy | × Paddle 3.3.1 CPU |");
    println!("|---|---|---|---|---|---|---|---|");
    for (k, n) in [(4096usize, 11008usize), (11008, 4096)] {
        let weight = random_f16(k * n, (k * 31 + n) as u64);
        let mut copy = vec![0u8; weight.len()];
        let memcpy = time_it(runs, || copy.copy_from_slice(std::hint::black_box(&weight)));
        let memcpy_gbs = weight.len() as f64 / memcpy.as_secs_f64() / 1e9;
        // Paddle's serial CPU kernel on these shapes (f16): 1.79 s and 2.05 s.
        let paddle_s = if k == 4096 { 1.79 } else { 2.05 };
        for group_size in [-1, 128] {
            for threads in [1u32, cores as u32] {
                let mut d = std::mem::MaybeUninit::uninit();
                unsafe { q4vk_weight_quantize_desc_default(d.as_mut_ptr()) };
                let mut d = unsafe { d.assume_init() };
                (d.k, d.n, d.group_size, d.threads) = (k as u64, n as u64, group_size, threads);
                let (mut qb, mut sb) = (0, 0);
                assert_eq!(
                    unsafe { q4vk_weight_quantize_size(&d, &mut qb, &mut sb) },
                    Q4VK_OK
                );
                let (mut q, mut s) = (vec![0u8; qb], vec![0u8; sb]);
                let t = time_it(runs, || {
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
                });
                let gbs = weight.len() as f64 / t.as_secs_f64() / 1e9;
                let group = if group_size < 0 {
                    "per-channel".to_string()
                } else {
                    group_size.to_string()
                };
                println!(
                    "| {k} × {n} | {group} | {threads} | {:.1} | {gbs:.2} | {memcpy_gbs:.2} | {:.0}% | {:.0}× |",
                    t.as_secs_f64() * 1e3,
                    100.0 * gbs / memcpy_gbs,
                    paddle_s / t.as_secs_f64()
                );
            }
        }
    }
}
