//! Imported checkpoints on the system's Vulkan device (lavapipe in CI) with the validation
//! layer on: every GGUF (Q4_0, Q4_1 and Q4_K: per-group offsets), GPTQ and AWQ golden case
//! (act-order ones too: the kernels gather x through the column order) becomes a matrix
//! through `q4vk_matrix_create`, and its GEMV (m = 1 and 8, both kernel families) and GEMM (m = 33, subgroup context) match
//! the f64 GEMV of the reference weights within 1e-5 (relative).

mod gpu_support;
mod import_support;

use gpu_support::{Gpu, Rng};
use import_support::*;

fn sweep(portable: bool) {
    let gpu = Gpu::new(portable);
    let mut rng = Rng(if portable { 5 } else { 3 });
    // m = 33: the GEMM (a whole and a partial tile of tokens; one SPIR-V for both
    // context kinds, so once).
    let ms: &[usize] = if portable { &[1, 8] } else { &[1, 8, 33] };
    imported_gemv_sweep(gpu.ctx, ms, |len| rng.vec(len));
    gpu.assert_quiet();
}

#[test]
fn imported_gemv_subgroup_kernels_match_reference() {
    sweep(false);
}

#[test]
fn imported_gemv_portable_kernels_match_reference() {
    sweep(true);
}
