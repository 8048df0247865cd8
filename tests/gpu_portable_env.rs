//! The kill switch `Q4VK_PORTABLE=1` selects the portable kernels without the context
//! flag (process-wide, hence its own binary). Validation on.

mod gpu_support;
use gpu_support::*;
use q4vk::ffi::matrix::q4vk_matrix_destroy;

#[test]
fn environment_forces_portable_kernels() {
    std::env::set_var("Q4VK_PORTABLE", "1");
    let gpu = Gpu::new(false);
    assert!(gpu.context().portable);
    let mut rng = Rng(8);
    let data = random_q4(&mut rng, 77, 555, 64, true, true);
    let mat = upload_q4(&gpu, &data);
    let x = rng.vec(3 * 555);
    let err = check_gemv(&gpu, mat, &data, &x, 3);
    assert!(err < 1e-5, "{err:e}");
    unsafe { q4vk_matrix_destroy(mat) };
}
