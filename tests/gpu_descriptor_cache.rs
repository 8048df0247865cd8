//! Devices without VK_KHR_push_descriptor: x/y descriptor sets come from the context's
//! cache (forced here with the kill switch; this binary holds only this test because the
//! switch is process-wide). Validation on.

mod gpu_support;
use gpu_support::*;
use q4vk::ffi::matrix::q4vk_matrix_destroy;

#[test]
fn gemv_without_push_descriptors() {
    std::env::set_var("Q4VK_NO_PUSH_DESCRIPTORS", "1");
    let gpu = Gpu::new(false);
    assert!(gpu.context().device.push_descriptor.is_none());
    assert!(gpu.context().xy_sets.is_some());
    let mut rng = Rng(77);
    // Growing m and n reallocates the staging buffers, which drops their cached sets.
    for &(n, k, m) in &[
        (10usize, 64usize, 1usize),
        (10, 64, 1),
        (50, 130, 2),
        (300, 512, 8),
        (20, 64, 1),
    ] {
        let data = random_q4(&mut rng, n, k, 64, m % 2 == 0, false);
        let mat = upload_q4(&gpu, &data);
        let x = rng.vec(m * k);
        let err = check_gemv(&gpu, mat, &data, &x, m);
        assert!(err < 1e-5, "{err:e}");
        unsafe { q4vk_matrix_destroy(mat) };
    }
}
