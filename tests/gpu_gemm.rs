//! GEMM (m > 8, the prefill path of `q4vk_gemv`) on the system's Vulkan device (lavapipe in
//! CI) with the validation layer on, against the f64 reference: m = 9 .. 300 on odd n and k
//! (partial chunks, groups and tiles of rows and tokens), every group size, zero points on
//! and off, f16 and f32 scales, on both context kinds (the GEMM kernel is the same SPIR-V;
//! a portable context must take it too). f16 activations, strides and buffer offsets of
//! the GEMM are covered by `gpu_api`'s recorded GEMV, imported sources by `gpu_import`.

mod gpu_support;
use gpu_support::*;
use q4vk::ffi::matrix::q4vk_matrix_destroy;

const TOL: f64 = 1e-5;

/// One GEMM: `n` x `k` weights, `group` (-1 per channel), zero points, f32 scales, `m`.
struct Case {
    n: usize,
    k: usize,
    group: i32,
    zeros: bool,
    f32_scales: bool,
    m: usize,
}

const fn case(n: usize, k: usize, group: i32, zeros: bool, f32_scales: bool, m: usize) -> Case {
    Case {
        n,
        k,
        group,
        zeros,
        f32_scales,
        m,
    }
}

const CASES: [Case; 6] = [
    // The smallest GEMM: one partial tile of tokens, one partial chunk, per-channel.
    case(7, 33, -1, false, false, 9),
    // Exactly one tile of rows' worth of tokens missing: 16 tokens, group 32, zeros.
    case(33, 97, 32, true, false, 16),
    // A token count past one tile (33 = 32 + 1), f32 scales, group 64 with a partial group.
    case(65, 160, 64, false, true, 33),
    // Two whole tiles of tokens, group 128 with a partial group, zeros and f32 scales.
    case(31, 300, 128, true, true, 64),
    // Many rows (partial last tile), group 256 with a partial group.
    case(129, 513, 256, false, false, 128),
    // Many tokens (partial last tile), odd k, per-channel zeros.
    case(45, 255, -1, true, false, 300),
];

fn sweep(portable: bool) {
    let gpu = Gpu::new(portable);
    let mut rng = Rng(if portable { 23 } else { 19 });
    for c in &CASES {
        let data = random_q4(&mut rng, c.n, c.k, c.group, c.zeros, c.f32_scales);
        let mat = upload_q4(&gpu, &data);
        let x = rng.vec(c.m * c.k);
        let err = check_gemv(&gpu, mat, &data, &x, c.m);
        assert!(
            err < TOL,
            "n {} k {} g {} zeros {} f32 scales {} m {}: rel err {err:e}",
            c.n,
            c.k,
            c.group,
            c.zeros,
            c.f32_scales,
            c.m
        );
        unsafe { q4vk_matrix_destroy(mat) };
    }
    gpu.assert_quiet();
}

#[test]
fn gemm_matches_reference_on_a_subgroup_context() {
    sweep(false);
}

#[test]
fn gemm_matches_reference_on_a_portable_context() {
    sweep(true);
}
