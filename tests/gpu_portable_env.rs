//! The kill switch `Q4VK_PORTABLE=1` selects the portable kernels without the context
//! flag (process-wide, hence its own binary). Validation on.

mod gpu_support;
use gpu_support::*;
use q4vk::ffi::matrix::q4vk_matrix_destroy;
use std::sync::Mutex;

/// Held by each test from before it sets the environment until its Vulkan objects are
/// gone: `setenv` while another thread (a driver's) reads the environment can crash.
static ENVIRONMENT: Mutex<()> = Mutex::new(());

#[test]
fn environment_forces_portable_kernels() {
    let _environment = ENVIRONMENT.lock().unwrap_or_else(|e| e.into_inner());
    std::env::set_var("Q4VK_PORTABLE", "1");
    let gpu = Gpu::new(false);
    assert!(gpu.context().rules.portable);
    let mut rng = Rng(8);
    let data = random_q4(&mut rng, 77, 555, 64, true, true);
    let mat = upload_q4(&gpu, &data);
    let x = rng.vec(3 * 555);
    let err = check_gemv(&gpu, mat, &data, &x, 3);
    assert!(err < 1e-5, "{err:e}");
    unsafe { q4vk_matrix_destroy(mat) };
}

/// The environment is read by `q4vk_context_create` only: a context the core creates from
/// a config (as tools do) follows the config, whatever the kill switches say.
#[test]
fn the_core_does_not_read_the_environment() {
    use q4vk::vk::context::{Context, ContextConfig};
    use q4vk::vk::log::Logger;
    let _environment = ENVIRONMENT.lock().unwrap_or_else(|e| e.into_inner());
    std::env::set_var("Q4VK_PORTABLE", "1");
    std::env::set_var("Q4VK_NO_PUSH_DESCRIPTORS", "1");
    let ctx = Context::new(ContextConfig::default(), Logger::silent()).expect("a context");
    assert_eq!(ctx.rules.portable, !ctx.device.info.subgroup_kernels_ok());
    let offered = unsafe {
        ctx.device
            .instance
            .instance
            .enumerate_device_extension_properties(ctx.device.physical)
    }
    .unwrap()
    .iter()
    .any(|e| e.extension_name_as_c_str() == Ok(ash::khr::push_descriptor::NAME));
    assert_eq!(ctx.device.push_descriptor.is_some(), offered);
}
