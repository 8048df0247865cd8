//! `Q4VK_CONTEXT_CPU_FALLBACK` and CPU implementations of Vulkan: where the best device is
//! one (lavapipe in CI), the fallback takes q4vk's CPU kernels instead, and says why in an
//! INFO log; naming the device (`device_index`) or `Q4VK_KEEP_CPU_VULKAN=1` keeps it; a
//! context without the flag uses it as before. Where the best device is a GPU, the
//! fallback takes that GPU. One test, since it sets a process-wide variable.

mod gpu_support;
use gpu_support::*;
use q4vk::ffi::context::*;
use std::ffi::{c_char, c_void, CStr};
use std::sync::Mutex;

unsafe extern "C" fn keep(user: *mut c_void, _level: u32, message: *const c_char) {
    let log = &*(user as *const Mutex<Vec<String>>);
    let text = CStr::from_ptr(message).to_string_lossy().into_owned();
    log.lock().unwrap().push(text);
}

/// A context with `flags` and `device_index`: its device name and every INFO-or-worse
/// log line of its creation.
fn create(flags: u32, device_index: i32) -> (String, Vec<String>) {
    let log = Mutex::new(Vec::new());
    let mut desc = unsafe { std::mem::zeroed::<q4vk_context_desc>() };
    unsafe { q4vk_context_desc_default(&mut desc) };
    (desc.flags, desc.device_index) = (flags, device_index);
    desc.log = Some(keep);
    (desc.log_user, desc.log_level) = (&log as *const _ as *mut c_void, Q4VK_LOG_INFO);
    let mut ctx = std::ptr::null_mut();
    let status = unsafe { q4vk_context_create(&desc, &mut ctx) };
    assert_eq!(status, 0, "flags {flags:#x}: {}", last_error());
    let mut buf = vec![0 as c_char; 256];
    unsafe { q4vk_context_device_name(ctx, buf.as_mut_ptr(), buf.len()) };
    let name = unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    unsafe { q4vk_context_destroy(ctx) };
    let lines = log.into_inner().unwrap();
    (name, lines)
}

fn mentions(lines: &[String], text: &str) -> bool {
    lines.iter().any(|l| l.contains(text))
}

#[test]
fn fallback_takes_the_cpu_kernels_over_a_cpu_implementation_of_vulkan() {
    assert!(std::env::var_os("Q4VK_KEEP_CPU_VULKAN").is_none());
    let best = Gpu::new(false);
    let best_is_cpu = best.context().device.info.cpu;
    let best_name = best.context().device.info.name.clone();
    drop(best);

    // Without the flag: the best device, whatever its type.
    let (name, _) = create(0, -1);
    assert_eq!(name, best_name);

    let (name, lines) = create(Q4VK_CONTEXT_CPU_FALLBACK, -1);
    if !best_is_cpu {
        // A GPU is usable: the fallback takes it.
        assert_eq!(name, best_name, "{lines:?}");
        return;
    }
    assert!(name.starts_with("CPU ("), "{name}: {lines:?}");
    assert!(
        mentions(&lines, "are CPU implementations") && mentions(&lines, "using the CPU"),
        "the INFO log does not say why: {lines:?}"
    );
    assert!(mentions(&lines, &best_name), "{lines:?}");

    // Naming the device keeps it (device 0: the best when all are CPU implementations,
    // as on a machine with lavapipe alone).
    let (name, lines) = create(Q4VK_CONTEXT_CPU_FALLBACK, 0);
    assert!(!name.starts_with("CPU ("), "{name}");
    assert!(mentions(&lines, "device_index 0 names it"), "{lines:?}");
    // Every context states the device's capabilities.
    assert!(mentions(&lines, "CPU implementation"), "{lines:?}");

    std::env::set_var("Q4VK_KEEP_CPU_VULKAN", "1");
    let (name, lines) = create(Q4VK_CONTEXT_CPU_FALLBACK, -1);
    std::env::remove_var("Q4VK_KEEP_CPU_VULKAN");
    assert_eq!(name, best_name, "{lines:?}");
    assert!(
        mentions(&lines, "Q4VK_KEEP_CPU_VULKAN=1 keeps it"),
        "{lines:?}"
    );
}
