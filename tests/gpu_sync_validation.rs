//! q4vk's barriers under the validation layer's synchronization validation (any hazard is
//! a message, and any message fails): GEMVs of m = 1..3 (the integer dot-product GEMV
//! with its digits pre-pass where the device runs it), the GEMM, host GEMVs on f16 x, and
//! matrices created and destroyed between calls, on one context and one thread. Its own
//! binary: the layer reads `VK_LAYER_ENABLES` when an instance is created, so it is set
//! before any context of this process exists. (The threads of
//! `gpu_reliability::eight_threads_share_a_context` run without it: see there why.)

mod gpu_support;
use gpu_support::*;
use q4vk::ffi::matrix::q4vk_matrix_destroy;

#[test]
fn calls_and_matrix_lifetimes_are_free_of_hazards() {
    std::env::set_var(
        "VK_LAYER_ENABLES",
        "VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT",
    );
    for portable in [false, true] {
        let gpu = Gpu::new(portable);
        let mut rng = Rng(17);
        let shared = shared_test_matrices(&mut rng);
        let mats: Vec<_> = shared.iter().map(|d| upload_q4(&gpu, d)).collect();
        for i in 0..60usize {
            let which = i % shared.len();
            let m = match i % 4 {
                3 => 40,
                r => 1 + r,
            };
            let x = rng.vec(m * shared[which].shape.k);
            let err = check_gemv(&gpu, mats[which], &shared[which], &x, m);
            assert!(
                err < 1e-5,
                "portable {portable} gemv {i} (m = {m}): error {err}"
            );
            if i % 10 == 0 {
                let own = random_q4(&mut rng, 33, 64, 32, i % 20 == 0, false);
                let mat = upload_q4(&gpu, &own);
                let x = rng.vec(64);
                assert!(check_gemv(&gpu, mat, &own, &x, 1) < 1e-5);
                unsafe { q4vk_matrix_destroy(mat) };
            }
        }
        for mat in mats {
            unsafe { q4vk_matrix_destroy(mat) };
        }
    }
}
