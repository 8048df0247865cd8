//! A machine whose Vulkan loader finds no driver: context creation fails cleanly with
//! Q4VK_ERROR_NO_DEVICE and a message, while the CPU functions keep working. (Without a
//! loader at all, `ash::Entry::load` fails and maps to the same status; the library does
//! not link libvulkan, so it still loads: see `ldd libq4vk.so`.) The driver list is
//! emptied with the loader's environment variables, process-wide, hence its own binary.

use q4vk::ffi::context::*;
use q4vk::ffi::matrix::*;
use q4vk::ffi::status::*;
use std::ffi::CStr;

#[test]
fn no_driver_means_no_device() {
    std::env::set_var("VK_ICD_FILENAMES", "/nonexistent/q4vk-no-driver.json");
    std::env::set_var("VK_DRIVER_FILES", "/nonexistent/q4vk-no-driver.json");
    let mut desc = unsafe { std::mem::zeroed::<q4vk_context_desc>() };
    unsafe { q4vk_context_desc_default(&mut desc) };
    let mut ctx = std::ptr::null_mut();
    let status = unsafe { q4vk_context_create(&desc, &mut ctx) };
    let mut buf = [0 as std::ffi::c_char; 512];
    unsafe { q4vk_last_error_message(buf.as_mut_ptr(), buf.len()) };
    let message = unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    eprintln!("{message}");
    assert_eq!(status, Q4VK_ERROR_NO_DEVICE, "{message}");
    assert!(ctx.is_null());
    assert!(message.starts_with("q4vk_context_create: "), "{message}");

    // The CPU quantizer is unaffected.
    let w: Vec<f32> = (0..64).map(|i| i as f32 - 20.0).collect();
    let mut d = unsafe { std::mem::zeroed::<q4vk_matrix_desc>() };
    unsafe { q4vk_matrix_desc_default(&mut d) };
    (d.n, d.k, d.dtype, d.group_size) = (2, 32, 0, 32);
    (d.weight, d.weight_bytes) = (w.as_ptr().cast(), 256);
    let (mut qw, mut qs) = ([0u8; 32], [0u8; 4]);
    let status = unsafe {
        q4vk_q4_quantize(
            &d,
            qw.as_mut_ptr(),
            32,
            qs.as_mut_ptr().cast(),
            4,
            std::ptr::null_mut(),
            0,
        )
    };
    assert_eq!(status, Q4VK_OK);
}
