//! A host's device with the tensor-core kernels' features enabled (or not), adopted by a
//! context: the context runs the tensor-core kernels exactly when the host enabled their
//! extension and features and the device has what they need (NVIDIA: yes; lavapipe: no
//! shape, so the SIMT kernels), reads those features from the host's chain, and matches
//! the f64 reference at m = 1, 8 and 40 (GEMV and GEMM) either way. The "host" is q4vk's
//! own instance (validation layer on, its messages counted) and device, made with or
//! without the kernels' features; a second context adopts their raw handles. Likewise the
//! opt-in integer dot-product kernel: used on an adopted device exactly when the host's
//! chain enabled shaderIntegerDotProduct and its extension is listed.

mod gpu_support;
use ash::vk;
use gpu_support::*;
use q4vk::cpu::reference;
use q4vk::vk::context::{Context, ContextConfig, IntDot};
use q4vk::vk::device::{Device, DeviceOptions};
use q4vk::vk::features::{self, HostFeatures};
use q4vk::vk::gemv::gemv_host;
use q4vk::vk::instance::Instance;
use q4vk::vk::int_dot;
use q4vk::vk::log::{Logger, LEVEL_INFO};
use q4vk::vk::matrix::DeviceMatrix;
use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::Arc;
use std::sync::Mutex;

/// A context adopting `host`'s device, told what the host enabled the way a C host tells
/// it: extension names and the enabled-feature chain (the tensor-core features where the
/// host enabled them; integer dot products when `tell_int_dot`), opted in to the integer
/// dot-product kernel.
fn adopt(host: &Device, tell_int_dot: bool) -> Context {
    adopt_logged(host, tell_int_dot, counting_logger())
}

/// [`adopt`] with the context's log going to `logger`.
fn adopt_logged(host: &Device, tell_int_dot: bool, logger: Logger) -> Context {
    let enabled = host.coop_enabled;
    let mut extensions: Vec<CString> = if enabled {
        features::EXTENSIONS
            .iter()
            .map(|n| (*n).to_owned())
            .collect()
    } else {
        Vec::new()
    };
    let mut coop_features = features::EnabledFeatures::all_on(false);
    let mut dot = int_dot::feature();
    let mut chain = vk::PhysicalDeviceFeatures2::default();
    if enabled {
        chain = chain
            .push_next(&mut coop_features.coop)
            .push_next(&mut coop_features.model)
            .push_next(&mut coop_features.f16);
    }
    if tell_int_dot {
        extensions.push(int_dot::EXTENSION.to_owned());
        chain = chain.push_next(&mut dot);
    }
    // SAFETY: a chain of live, complete structs.
    let features =
        unsafe { HostFeatures::from_chain((&chain as *const vk::PhysicalDeviceFeatures2).cast()) };
    let adopt = adoption_of(host, extensions, features);
    let config = ContextConfig {
        adopt: Some(adopt),
        int_dot: IntDot::Forced,
        ..Default::default()
    };
    Context::new(config, logger).unwrap()
}

#[test]
fn adopted_devices_run_the_tensor_core_kernels_where_the_host_enabled_them() {
    let mut rng = Rng(515);
    let d = random_q4(&mut rng, 200, 384, 128, true, false);
    let mut offered = false;
    for want_coop in [false, true] {
        let instance = Arc::new(Instance::create(true, Arc::new(counting_logger())).unwrap());
        let options = DeviceOptions {
            want_coop,
            ..Default::default()
        };
        let host = Device::create(instance, -1, options).unwrap();
        offered |= host.coop_enabled;
        let ctx = adopt(&host, false);
        assert_eq!(ctx.coop, host.coop_offer.fragments, "want_coop {want_coop}");
        assert_eq!(ctx.rules.coop_tiles, host.coop_offer.tiles);
        let mat = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
        assert_eq!(mat.form.coop.is_some(), ctx.coop);
        for m in [1usize, 8, 40] {
            let x = rng.vec(m * d.shape.k);
            let mut y = vec![f32::NAN; m * d.shape.n];
            gemv_host(&ctx, &mat, &x, &mut y, m as u32).unwrap();
            assert!(y.iter().all(|v| v.is_finite()), "unwritten y at m {m}");
            let err = reference::relative_error(&y, &reference::gemv(&d, &x, m));
            assert!(err < 1e-5, "want_coop {want_coop} m {m}: {err:e}");
        }
        // The adopting context and its matrix go before the host's device.
        drop(mat);
        drop(ctx);
    }
    eprintln!("tensor-core kernels offered by this device: {offered}");
    assert_nothing_logged();
}

#[test]
fn adopted_devices_run_the_integer_dot_product_kernel_where_the_host_enabled_it() {
    let mut rng = Rng(0xD07);
    let d = random_q4(&mut rng, 70, 300, 32, true, false);
    let instance = Arc::new(Instance::create(true, Arc::new(counting_logger())).unwrap());
    let options = DeviceOptions {
        want_coop: false,
        ..Default::default()
    };
    // q4vk's own device enables the extension and feature where the device has them.
    let host = Device::create(instance, -1, options).unwrap();
    assert!(
        host.int_dot.is_some(),
        "the device has no VK_KHR_shader_integer_dot_product"
    );
    for tell in [false, true] {
        let ctx = adopt(&host, tell);
        assert_eq!(ctx.rules.int_dot, tell);
        let mat = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
        for m in [1usize, 8] {
            let x = rng.vec(m * d.shape.k);
            let mut y = vec![f32::NAN; m * d.shape.n];
            gemv_host(&ctx, &mat, &x, &mut y, m as u32).unwrap();
            let err = reference::relative_error(&y, &reference::gemv(&d, &x, m));
            assert!(err < 1e-5, "told {tell} m {m}: {err:e}");
        }
        drop(mat);
        drop(ctx);
    }
    assert_nothing_logged();
}

unsafe extern "C" fn keep_line(user: *mut c_void, _level: u32, message: *const c_char) {
    let lines = &*(user as *const Mutex<Vec<String>>);
    let text = CStr::from_ptr(message).to_string_lossy().into_owned();
    lines.lock().unwrap().push(text);
}

/// The capabilities line of the INFO log of a context made by `make` with a logger.
fn capabilities_line(make: impl FnOnce(Logger) -> Context) -> String {
    let lines = Mutex::new(Vec::<String>::new());
    let logger = Logger::new(
        Some(keep_line),
        &lines as *const _ as *mut c_void,
        LEVEL_INFO,
    );
    drop(make(logger));
    let lines = lines.into_inner().unwrap();
    let found = lines.iter().find(|l| l.starts_with("device "));
    found
        .cloned()
        .unwrap_or_else(|| panic!("no capabilities line in {lines:?}"))
}

/// An adopted device states the same capabilities line in the INFO log as q4vk's own
/// device: name, owner, subgroup sizes and every optional feature as enabled.
#[test]
fn adopted_devices_state_their_capabilities_as_own_devices_do() {
    let own = capabilities_line(|logger| Context::new(ContextConfig::default(), logger).unwrap());
    let instance = Arc::new(Instance::create(true, Arc::new(counting_logger())).unwrap());
    let host = Device::create(instance, -1, DeviceOptions::default()).unwrap();
    let adopted = capabilities_line(|logger| adopt_logged(&host, true, logger));
    let info = &host.info;
    assert!(own.contains("(q4vk's own,"), "{own}");
    assert!(adopted.contains("(adopted,"), "{adopted}");
    let fields = [
        format!("device {} (", info.name),
        format!(
            "subgroup size {} (smallest {})",
            info.subgroup_size, info.min_subgroup_size
        ),
        "subgroup arithmetic ".into(),
        format!("shared memory {} bytes", info.max_shared),
        "push descriptors ".into(),
        "cooperative matrices ".into(),
        "pipeline statistics ".into(),
        "integer dot products ".into(),
    ];
    for field in &fields {
        assert!(own.contains(field.as_str()), "{field:?} missing: {own}");
        assert!(
            adopted.contains(field.as_str()),
            "{field:?} missing: {adopted}"
        );
    }
    // The host told the adopting context of the integer dot products it enabled.
    assert!(!adopted.ends_with("integer dot products no"), "{adopted}");
    drop(host);
    assert_nothing_logged();
}
