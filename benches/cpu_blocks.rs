//! The CPU context's GEMV on GGUF blocks (`cpu::blocks::CpuBlocks::rows`: each block decoded
//! to f32 as gguf-py's `dequantize` gives it, then its products summed), one thread, on a
//! 4096 × 4096 matrix of every block type at m = 1 and 8, and at m = 1 the integer
//! dot-product kernel a CPU context runs there on x86-64 with AVX2 (`cpu::blocks_dot`), on
//! x in digits and on x rounded to bytes (`Q4VK_GEMV_ROUND_X_TO_INT8`), on one thread and
//! as a CPU context runs it on every core (`cpu::gemv`, the fastest of 15 calls):
//! the fastest of 7 calls, hot (the matrix's bytes stay in the last-level cache where
//! they fit).
//!
//! Run: `cargo bench --bench cpu_blocks [-- TYPE ...]` (type names as `Q4_K`: only those).
//! Prints one line per type and m.

use q4vk::cpu::blocks::CpuBlocks;
use q4vk::import::gguf_blocks::BlockType;
use std::time::Instant;

/// Pseudo-random blocks of `ty` for an `n` × `k` matrix with sane scales: f16 fields 0.01,
/// MXFP4's E8M0 exponent 2^-4, NVFP4's UE4M3 scales 1.0 (no subnormal or infinite weights,
/// whose arithmetic would time something else).
fn blocks(ty: BlockType, n: usize, k: usize) -> Vec<u8> {
    let size = ty.block_bytes();
    let mut state = 0x1234_5678u64;
    let mut bytes: Vec<u8> = (0..n * k / ty.block_elements() * size)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    for block in bytes.chunks_exact_mut(size) {
        for &(at, _) in ty.f16_scale_fields() {
            block[at..at + 2].copy_from_slice(&half::f16::from_f32(0.01).to_le_bytes());
        }
        match ty {
            BlockType::Mxfp4 => block[0] = 124,
            BlockType::Nvfp4 => block[..4].fill(0x38),
            _ => {}
        }
    }
    bytes
}

fn main() {
    let (n, k) = (4096usize, 4096usize);
    println!("CPU GEMV on GGUF blocks, {n} x {k}, one thread, fastest of 7 calls (hot)");
    let named: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let chosen = |ty: &BlockType| named.is_empty() || named.iter().any(|a| a == ty.name());
    for ty in BlockType::ALL.into_iter().filter(chosen) {
        let tensor = blocks(ty, n, k);
        let matrix = CpuBlocks::new(ty, &tensor).expect("the matrix");
        for m in [1usize, 8] {
            let x: Vec<f32> = (0..m * k)
                .map(|i| (i * 7 % 13) as f32 * 0.1 - 0.6)
                .collect();
            let mut y = vec![0f32; n * m];
            let fastest = (0..7)
                .map(|_| {
                    let started = Instant::now();
                    matrix.rows(k, &x, m, 0..n, &mut y);
                    started.elapsed().as_secs_f64() * 1e6
                })
                .fold(f64::INFINITY, f64::min);
            let checksum: f64 = y.iter().map(|&v| f64::from(v)).sum();
            println!(
                "{} m = {m}: {fastest:.0} µs (checksum {checksum:.6e})",
                ty.name()
            );
        }
        #[cfg(target_arch = "x86_64")]
        if q4vk::cpu::blocks_dot::runs(&matrix, 1, false) {
            integer_dot(&matrix, n, k);
            every_core(ty, &tensor, n, k);
        }
    }
}

/// The m = 1 GEMV on `matrix` as integer dot products (`cpu::blocks_dot`), x in three
/// digits, then rounded to bytes (`Q4VK_GEMV_ROUND_X_TO_INT8`), made in each call as a CPU
/// context's GEMV makes them.
#[cfg(target_arch = "x86_64")]
fn integer_dot(matrix: &CpuBlocks, n: usize, k: usize) {
    use q4vk::cpu::blocks_dot::{rows, ColumnDigits};
    let x: Vec<f32> = (0..k).map(|i| (i * 7 % 13) as f32 * 0.1 - 0.6).collect();
    let mut y = vec![0f32; n];
    type Make = fn(&[f32], usize) -> q4vk::error::Result<Option<ColumnDigits>>;
    let forms: [(&str, Make); 2] = [
        ("x in digits", ColumnDigits::new),
        ("x rounded to bytes", ColumnDigits::bytes),
    ];
    for (form, make) in forms {
        let fastest = (0..7)
            .map(|_| {
                let started = Instant::now();
                let xd = make(&x, k).expect("the digits").expect("finite x");
                rows(matrix, &xd, 0..n, &mut y);
                started.elapsed().as_secs_f64() * 1e6
            })
            .fold(f64::INFINITY, f64::min);
        let checksum: f64 = y.iter().map(|&v| f64::from(v)).sum();
        println!(
            "{} m = 1, integer dot products ({form}, made in the call): {fastest:.0} µs (checksum {checksum:.6e})",
            matrix.ty.name()
        );
    }
}

/// A CPU context's GEMV on `tensor` (`cpu::gemv`, every core) at m = 1, 2, 4 and 8: on x in
/// digits, rounded to bytes, and through the f32 decode (the portable family's path).
#[cfg(target_arch = "x86_64")]
fn every_core(ty: BlockType, tensor: &[u8], n: usize, k: usize) {
    use q4vk::cpu::gemv::gemv_rounding;
    use q4vk::cpu::kernels::Isa;
    use q4vk::cpu::matrix::CpuMatrix;
    let mat = CpuMatrix::of_blocks(ty, n, k, tensor).expect("the matrix");
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    for m in [1usize, 2, 4, 8] {
        let x: Vec<f32> = (0..m * k)
            .map(|i| (i * 7 % 13) as f32 * 0.1 - 0.6)
            .collect();
        let mut y = vec![0f32; m * n];
        let forms = [
            ("x in digits", Isa::detect(), false),
            ("x rounded to bytes", Isa::detect(), true),
            ("f32 decode", Isa::Scalar, false),
        ];
        for (form, isa, bytes) in forms {
            let fastest = (0..15)
                .map(|_| {
                    let started = Instant::now();
                    gemv_rounding(&mat, &x, &mut y, m, (cores, isa), bytes).expect("the GEMV");
                    started.elapsed().as_secs_f64() * 1e6
                })
                .fold(f64::INFINITY, f64::min);
            println!(
                "{} m = {m}, CPU context on {cores} threads ({form}): {fastest:.0} µs",
                ty.name()
            );
        }
    }
}
