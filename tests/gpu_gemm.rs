//! GEMM (m > 8, the prefill path of `q4vk_gemv`) on the system's Vulkan device (lavapipe in
//! CI) with the validation layer on, against the f64 reference: m = 9 .. 300 on odd n and k
//! (partial chunks, groups and tiles of rows and tokens), every group size, zero points on
//! and off, f16 and f32 scales, on both context kinds (the GEMM kernel is the same SPIR-V;
//! a portable context must take it too). f16 activations, strides and buffer offsets of
//! the GEMM are covered by `gpu_api`'s recorded GEMV, imported sources by `gpu_import`.

mod gpu_support;
use gpu_support::*;

const CASES: [Case; 6] = [
    // The smallest GEMM: one partial tile of tokens, one partial chunk, per-channel.
    case(7, 33, -1, false, false, 9),
    // Half a tile of tokens (tiles: 64 rows x 32 tokens), group 32, zeros.
    case(33, 97, 32, true, false, 16),
    // One row and one token past a tile (65 = 64 + 1, 33 = 32 + 1), f32 scales, group 64
    // with a partial group.
    case(65, 160, 64, false, true, 33),
    // Two whole tiles of tokens, group 128 with a partial group, zeros and f32 scales.
    case(31, 300, 128, true, true, 64),
    // Three tiles of rows, the last with one row, group 256 with a partial group.
    case(129, 513, 256, false, false, 128),
    // Many tokens (partial last tile), odd k, per-channel zeros.
    case(45, 255, -1, true, false, 300),
];

fn sweep(portable: bool) {
    let gpu = Gpu::new(portable);
    let mut rng = Rng(if portable { 23 } else { 19 });
    run_cases(&gpu, &mut rng, &CASES);
}

#[test]
fn gemm_matches_reference_on_a_subgroup_context() {
    sweep(false);
}

#[test]
fn gemm_matches_reference_on_a_portable_context() {
    sweep(true);
}
