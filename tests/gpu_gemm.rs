//! GEMM (m > 8, the prefill path of `q4vk_gemv`) on the system's Vulkan device (lavapipe in
//! CI) with the validation layer on, against the f64 reference: m = 9 .. 300 on odd n and k
//! (partial chunks, groups and tiles of rows and tokens), every group size, zero points on
//! and off, f16 and f32 scales, on both context kinds (the GEMM kernel is the same SPIR-V;
//! a portable context must take it too). f16 activations, strides and buffer offsets of
//! the GEMM are covered by `gpu_api`'s recorded GEMV, imported sources by `gpu_import`.

mod gpu_support;
use gpu_support::*;

fn sweep(portable: bool) {
    let gpu = Gpu::new(portable);
    let mut rng = Rng(if portable { 23 } else { 19 });
    run_cases(&gpu, &mut rng, &GEMM_CASES);
}

#[test]
fn gemm_matches_reference_on_a_subgroup_context() {
    sweep(false);
}

#[test]
fn gemm_matches_reference_on_a_portable_context() {
    sweep(true);
}
