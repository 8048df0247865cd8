//! GEMV on a CPU context (`Q4VK_CONTEXT_CPU`), m = 1..8, beside the memcpy bandwidth
//! measured in the same run with the same thread count (for the cold regime memcpy and
//! GEMV calls alternate, so both see the same load from other work on the machine; for
//! the hot one they run back to back, GEMVs first, so the matrix stays cached). The traffic of a GEMV is the
//! matrix (codes, f32 scales, zero points) read once; GB/s = those bytes / time. memcpy
//! GB/s = bytes copied / time (each byte read once and written once).
//!
//! Two regimes: "hot" runs one matrix again and again (its bytes stay in the last-level
//! cache when they fit, as in ggml's `test-backend-ops perf`); "cold" cycles through
//! copies of it totalling at least 4 × 32 MiB, so every call streams from DRAM.
//!
//! A second table runs every kernel family the CPU has (through the Rust API, which the
//! context does not expose: it picks the best) on the m = 1 shapes; a third, the best
//! family at m = 1 to 64 (Rust API), hot, with the cost of each token beyond the first.
//!
//! Run: `cargo bench --bench cpu_gemv [-- SHAPE_FILTER]`. Prints markdown tables. The
//! peer in the same run: `BACKEND=CPU run-llamacpp.sh bench/llamacpp-cpu-shapes.txt`
//! (llama.cpp's CPU backend on Q4_0, m = 1 and 8 for these shapes, 64 for 4096 × 4096).

use q4vk::ffi::context::*;
use q4vk::ffi::gemv::q4vk_gemv;
use q4vk::ffi::matrix::*;
use q4vk::ffi::status::Q4VK_OK;
use std::time::{Duration, Instant};

/// Bytes the cold runs stream per round, at least.
const COLD_BYTES: usize = 128 << 20;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time_it(runs: usize, mut f: impl FnMut(usize)) -> Duration {
    f(0);
    median(
        (1..=runs)
            .map(|i| {
                let start = Instant::now();
                f(i);
                start.elapsed()
            })
            .collect(),
    )
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// memcpy of `bytes` split over `threads` scoped threads, cycling through `copies`
/// source/destination pairs (all pages touched beforehand).
struct Copier {
    src: Vec<Vec<u8>>,
    dst: Vec<Vec<u8>>,
    threads: usize,
}

impl Copier {
    fn new(bytes: usize, copies: usize, threads: usize) -> Copier {
        Copier {
            src: (0..copies).map(|i| vec![i as u8 + 1; bytes]).collect(),
            dst: (0..copies).map(|_| vec![0xA5u8; bytes]).collect(),
            threads,
        }
    }

    fn run(&mut self, i: usize) {
        let copies = self.src.len();
        let (s, d) = (&self.src[i % copies], &mut self.dst[i % copies]);
        let chunk = s.len().div_ceil(self.threads);
        std::thread::scope(|scope| {
            for (s, d) in s.chunks(chunk).zip(d.chunks_mut(chunk)) {
                scope.spawn(move || d.copy_from_slice(std::hint::black_box(s)));
            }
        });
    }
}

/// Medians of `a` and `b` (`runs` each, after one warm-up of each). `alternate`: one call
/// of each in turn, so both see the same interference from other work on the machine;
/// else all of `b`'s runs, then all of `a`'s (a memcpy between two GEMVs would evict a
/// matrix meant to stay cached; and after 31 memcpys of a 24 MB matrix's size, the next
/// 62 GEMVs on that matrix ran at half the speed of GEMVs with no memcpy before them:
/// the copy's buffers fill the last-level cache; ggml's perf mode runs nothing between
/// its calls).
fn time_pair(
    runs: usize,
    alternate: bool,
    mut a: impl FnMut(usize),
    mut b: impl FnMut(usize),
) -> (Duration, Duration) {
    if !alternate {
        let tb = time_it(runs, b);
        return (time_it(runs, a), tb);
    }
    a(0);
    b(0);
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    for i in 1..=runs {
        let start = Instant::now();
        a(i);
        ta.push(start.elapsed());
        let start = Instant::now();
        b(i);
        tb.push(start.elapsed());
    }
    (median(ta), median(tb))
}

fn context(threads: u32) -> *mut q4vk_context {
    let mut desc = unsafe { std::mem::zeroed::<q4vk_context_desc>() };
    unsafe { q4vk_context_desc_default(&mut desc) };
    desc.flags = Q4VK_CONTEXT_CPU;
    desc.cpu_threads = threads;
    let mut ctx = std::ptr::null_mut();
    assert_eq!(unsafe { q4vk_context_create(&desc, &mut ctx) }, Q4VK_OK);
    ctx
}

/// A random symmetric Q4 matrix with f16 scales.
fn matrix(
    ctx: *mut q4vk_context,
    n: usize,
    k: usize,
    group: i32,
    rng: &mut Rng,
) -> *mut q4vk_matrix {
    let groups = if group < 0 {
        1
    } else {
        k.div_ceil(group as usize)
    };
    let weight: Vec<u8> = (0..n * k.div_ceil(2)).map(|_| rng.next() as u8).collect();
    let scales: Vec<u8> = (0..n * groups)
        .flat_map(|_| half::f16::from_f32((rng.next() % 1000) as f32 * 1e-5).to_le_bytes())
        .collect();
    let mut d = unsafe { std::mem::zeroed::<q4vk_matrix_desc>() };
    unsafe { q4vk_matrix_desc_default(&mut d) };
    (d.source, d.n, d.k, d.group_size) = (Q4VK_SOURCE_Q4, n as u64, k as u64, group);
    (d.weight, d.weight_bytes) = (weight.as_ptr().cast(), weight.len());
    (d.scales, d.scales_bytes) = (scales.as_ptr().cast(), scales.len());
    let mut mat = std::ptr::null_mut();
    assert_eq!(unsafe { q4vk_matrix_create(ctx, &d, &mut mat) }, Q4VK_OK);
    mat
}

fn main() {
    let filter = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let runs = 30;
    let mut name = vec![0 as std::ffi::c_char; 128];
    let probe = context(0);
    unsafe { q4vk_context_device_name(probe, name.as_mut_ptr(), name.len()) };
    unsafe { q4vk_context_destroy(probe) };
    let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }.to_string_lossy();
    println!("q4vk_gemv on a CPU context: {name}; {cores} cores; median of {runs} runs\n");
    println!("| W [n × k] | group | m | threads | regime | time (µs) | matrix MB | GEMV GB/s | memcpy GB/s | % of memcpy |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut rng = Rng(0x9E3779B97F4A7C15);
    for (n, k) in [(4096usize, 4096usize), (11008, 4096), (4096, 11008)] {
        if skipped(&filter, n, k) {
            continue;
        }
        for group in [128i32, 32] {
            for threads in [cores, 1] {
                let ctx = context(threads as u32);
                let first = matrix(ctx, n, k, group, &mut rng);
                // Bytes the kernel streams: padded codes, f32 scales.
                let groups = k.div_ceil(group as usize);
                let bytes = n * k.div_ceil(32) * 16 + n * groups * 4;
                let copies = COLD_BYTES.div_ceil(bytes).max(2);
                let mut mats = vec![first];
                for _ in 1..copies {
                    mats.push(matrix(ctx, n, k, group, &mut rng));
                }
                let mut hot_copy = Copier::new(bytes, 1, threads);
                let mut cold_copy = Copier::new(bytes, copies, threads);
                for m in [1usize, 2, 4, 8] {
                    if m > 1 && (group != 128 || threads != cores) {
                        continue;
                    }
                    let x: Vec<f32> = (0..m * k)
                        .map(|i| ((i * 7) % 13) as f32 * 0.1 - 0.6)
                        .collect();
                    let mut y = vec![0f32; m * n];
                    for (regime, pool, copier) in
                        [("hot", 1, &mut hot_copy), ("cold", copies, &mut cold_copy)]
                    {
                        let (tc, t) = time_pair(
                            runs,
                            pool > 1,
                            |i| copier.run(i),
                            |i| {
                                let status = unsafe {
                                    q4vk_gemv(
                                        ctx,
                                        mats[i % pool],
                                        x.as_ptr(),
                                        x.len(),
                                        y.as_mut_ptr(),
                                        y.len(),
                                        m as u32,
                                    )
                                };
                                assert_eq!(status, Q4VK_OK);
                            },
                        );
                        let gbs = bytes as f64 / t.as_secs_f64() / 1e9;
                        let memcpy = bytes as f64 / tc.as_secs_f64() / 1e9;
                        println!(
                            "| {n} × {k} | {group} | {m} | {threads} | {regime} | {:.0} | {:.1} | {gbs:.1} | {memcpy:.1} | {:.0}% |",
                            t.as_secs_f64() * 1e6,
                            bytes as f64 / 1e6,
                            100.0 * gbs / memcpy
                        );
                    }
                }
                for mat in mats {
                    unsafe { q4vk_matrix_destroy(mat) };
                }
                unsafe { q4vk_context_destroy(ctx) };
            }
        }
    }
    kernel_families(&filter, cores, runs);
}

/// Whether the shape filter of the command line leaves out `n × k`.
fn skipped(filter: &Option<String>, n: usize, k: usize) -> bool {
    filter
        .as_ref()
        .is_some_and(|f| !format!("{n}x{k}").contains(f.as_str()))
}

/// A random symmetric CPU matrix with f32 scales (group 128), for the Rust API tables.
fn cpu_matrix(n: usize, k: usize, rng: &mut Rng) -> q4vk::cpu::matrix::CpuMatrix {
    use q4vk::quant::q4::{Q4Data, Q4Shape, ScaleType};
    use std::borrow::Cow;
    let shape = Q4Shape::new(n as u64, k as u64, 128, 0).unwrap();
    let data = Q4Data {
        shape,
        weight: Cow::Owned(
            (0..shape.weight_bytes())
                .map(|_| rng.next() as u8)
                .collect(),
        ),
        scale_type: ScaleType::F32,
        scales: Cow::Owned(
            (0..shape.scale_count())
                .flat_map(|_| ((rng.next() % 1000) as f32 * 1e-5).to_le_bytes())
                .collect(),
        ),
        zeros: Cow::Owned(Vec::new()),
    };
    q4vk::cpu::matrix::CpuMatrix::new(&data).unwrap()
}

/// The best kernel family at m = 1 to 64 on one hot matrix, all cores: time, time per
/// token, and the cost of each token beyond the first, `(t(m) − t(1)) / (m − 1)`.
fn many_tokens(filter: &Option<String>, cores: usize, runs: usize) {
    use q4vk::cpu::gemv::gemv;
    use q4vk::cpu::kernels::Isa;
    let isa = Isa::detect();
    println!(
        "\nm = 1 to 64, {}, group 128, {cores} threads, hot\n",
        isa.name()
    );
    println!(
        "| W [n × k] | m | µs | µs per token | µs per token beyond the first | × the m = 1 time |"
    );
    println!("|---|---|---|---|---|---|");
    let mut rng = Rng(0xBADC0DE);
    for (n, k) in [(4096usize, 4096usize), (11008, 4096), (4096, 11008)] {
        if skipped(filter, n, k) {
            continue;
        }
        let mat = cpu_matrix(n, k, &mut rng);
        let mut first = 0.0;
        for m in [1usize, 2, 4, 8, 16, 64] {
            let x: Vec<f32> = (0..m * k)
                .map(|i| ((i * 7) % 13) as f32 * 0.1 - 0.6)
                .collect();
            let mut y = vec![0f32; m * n];
            let t = time_it(runs, |_| gemv(&mat, &x, &mut y, m, cores, isa).unwrap());
            let us = t.as_secs_f64() * 1e6;
            if m == 1 {
                first = us;
            }
            let extra = if m == 1 {
                "—".to_string()
            } else {
                format!("{:.0}", (us - first) / (m - 1) as f64)
            };
            println!(
                "| {n} × {k} | {m} | {us:.0} | {:.0} | {extra} | {:.2} |",
                us / m as f64,
                us / first
            );
        }
    }
}

/// Every kernel family on the m = 1 shapes, hot and cold, all cores.
fn kernel_families(filter: &Option<String>, cores: usize, runs: usize) {
    use q4vk::cpu::gemv::gemv;
    use q4vk::cpu::kernels::Isa;
    println!("\nKernel families, m = 1, group 128, {cores} threads\n");
    println!("| W [n × k] | kernel | hot µs | hot GB/s | cold µs | cold GB/s |");
    println!("|---|---|---|---|---|---|");
    let mut rng = Rng(0xC0FFEE);
    for (n, k) in [(4096usize, 4096usize), (11008, 4096)] {
        if skipped(filter, n, k) {
            continue;
        }
        let make = |rng: &mut Rng| cpu_matrix(n, k, rng);
        let first = make(&mut rng);
        let bytes = first.bytes();
        let copies = COLD_BYTES.div_ceil(bytes).max(2);
        let mut mats = vec![first];
        for _ in 1..copies {
            mats.push(make(&mut rng));
        }
        let x: Vec<f32> = (0..k).map(|i| ((i * 7) % 13) as f32 * 0.1 - 0.6).collect();
        let mut y = vec![0f32; n];
        for isa in Isa::available() {
            let mut row = format!("| {n} × {k} | {} |", isa.name());
            for pool in [1, copies] {
                let t = time_it(runs, |i| {
                    gemv(&mats[i % pool], &x, &mut y, 1, cores, isa).unwrap()
                });
                row += &format!(
                    " {:.0} | {:.1} |",
                    t.as_secs_f64() * 1e6,
                    bytes as f64 / t.as_secs_f64() / 1e9
                );
            }
            println!("{row}");
        }
    }
    many_tokens(filter, cores, runs);
}
