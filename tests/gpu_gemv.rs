//! GEMV on the system's Vulkan device (lavapipe in CI) with the validation layer on: any
//! validation message fails the test, and so does a missing device.

mod gpu_support;
use gpu_support::*;
use q4vk::ffi::matrix::q4vk_matrix_destroy;

const TOL: f64 = 1e-5;

fn sweep(portable: bool) {
    let gpu = Gpu::new(portable);
    let mut rng = Rng(if portable { 11 } else { 7 });
    let mut cases = 0;
    for &(n, k) in &[
        (1usize, 32usize),
        (7, 33),
        (33, 96),
        (64, 257),
        (129, 1000),
        (255, 2048),
        (17, 4096),
        (3, 8191),
        (5, 16384),
    ] {
        for &group in &[-1i32, 32, 64, 128, 256] {
            for zeros in [false, true] {
                let f32_scales = (n + k) % 2 == 0 && group == 64;
                let data = random_q4(&mut rng, n, k, group, zeros, f32_scales);
                let mat = upload_q4(&gpu, &data);
                for m in 1..=8usize {
                    let x = rng.vec(m * k);
                    let err = check_gemv(&gpu, mat, &data, &x, m);
                    assert!(
                        err < TOL,
                        "n {n} k {k} g {group} zeros {zeros} m {m}: rel err {err:e}"
                    );
                    cases += 1;
                }
                unsafe { q4vk_matrix_destroy(mat) };
            }
        }
    }
    assert_eq!(cases, 9 * 5 * 2 * 8);
    gpu.assert_quiet();
}

#[test]
fn gemv_subgroup_kernels_match_reference() {
    sweep(false);
}

#[test]
fn gemv_portable_kernels_match_reference() {
    sweep(true);
}
