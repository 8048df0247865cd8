//! Debug names (`vk::debug_name`): with validation on, q4vk's own instance enables
//! `VK_EXT_debug_utils` and every kind of object that a context, a matrix and a GEMV create
//! carries a name, which the validation layer then reports in its messages; without
//! validation, and on an adopted device (whose instance extensions q4vk is not told),
//! nothing is named.

mod gpu_support;
use ash::vk;
use gpu_support::*;
use q4vk::vk::context::{Context, ContextConfig};
use q4vk::vk::device::{Device, DeviceOptions};
use q4vk::vk::gemv::gemv_host;
use q4vk::vk::instance::Instance;
use q4vk::vk::log::Logger;
use q4vk::vk::matrix::DeviceMatrix;
use std::ffi::{c_void, CStr};
use std::sync::{Arc, Mutex};

/// The kinds of object a context, a matrix and a GEMV on host memory create (without push
/// descriptors, so that x and y take sets from the context's ring).
const KINDS: [vk::ObjectType; 13] = [
    vk::ObjectType::DEVICE,
    vk::ObjectType::QUEUE,
    vk::ObjectType::COMMAND_POOL,
    vk::ObjectType::COMMAND_BUFFER,
    vk::ObjectType::FENCE,
    vk::ObjectType::DESCRIPTOR_SET_LAYOUT,
    vk::ObjectType::PIPELINE_LAYOUT,
    vk::ObjectType::PIPELINE_CACHE,
    vk::ObjectType::SHADER_MODULE,
    vk::ObjectType::PIPELINE,
    vk::ObjectType::DESCRIPTOR_POOL,
    vk::ObjectType::BUFFER,
    vk::ObjectType::DEVICE_MEMORY,
];

/// Whether the machine lacks the validation layer and says so
/// (`Q4VK_TESTS_WITHOUT_LAYER=1`): then nothing can be named and the naming tests skip.
fn layer_missing(ctx: &Context) -> bool {
    let without = std::env::var("Q4VK_TESTS_WITHOUT_LAYER").is_ok_and(|v| v == "1");
    if without && !ctx.device.instance.debug_utils_enabled() {
        eprintln!("no validation layer: debug names not checked");
        return true;
    }
    false
}

/// A context of q4vk's own device without push descriptors (validation on or off), a
/// 64 × 128 matrix on it (with a column order when `ordered`), and one GEMV run.
fn context_matrix_gemv(validation: bool, ordered: bool, logger: Logger) -> (Context, DeviceMatrix) {
    let config = ContextConfig {
        validation,
        no_push_descriptors: true,
        ..Default::default()
    };
    let ctx = Context::new(config, logger).unwrap();
    let mut rng = Rng(11);
    let (n, k) = (64, 128);
    let data = random_q4(&mut rng, n, k, 32, true, false);
    let order: Vec<u32> = (0..k as u32).rev().collect();
    let mat = DeviceMatrix::new(&ctx, &data, None, ordered.then_some(&order[..])).unwrap();
    let x = rng.vec(k);
    let mut y = vec![0f32; n];
    gemv_host(&ctx, &mat, &x, &mut y, 1).unwrap();
    (ctx, mat)
}

#[test]
fn every_kind_of_object_is_named_under_validation() {
    let (ctx, mat) = context_matrix_gemv(true, false, counting_logger());
    if layer_missing(&ctx) {
        return;
    }
    assert!(ctx.device.instance.debug_utils_enabled());
    let named = |kind| ctx.device.namer.given(kind);
    for kind in KINDS {
        assert!(named(kind) > 0, "no {kind:?} was named");
    }
    // Each buffer has its own allocation, named alike.
    assert_eq!(
        named(vk::ObjectType::BUFFER),
        named(vk::ObjectType::DEVICE_MEMORY)
    );
    for (kind, count) in [
        (vk::ObjectType::DEVICE, 1),
        (vk::ObjectType::QUEUE, 1),
        (vk::ObjectType::COMMAND_POOL, 1),
        (vk::ObjectType::COMMAND_BUFFER, 1),
        (vk::ObjectType::FENCE, 1),
        (vk::ObjectType::DESCRIPTOR_SET_LAYOUT, 2),
        (vk::ObjectType::PIPELINE_LAYOUT, 1),
        (vk::ObjectType::PIPELINE_CACHE, 1),
    ] {
        assert_eq!(named(kind), count, "{kind:?}");
    }
    // Names are valid usage: the layer said nothing about them, nor about the objects'
    // destruction.
    drop((mat, ctx));
    assert_nothing_logged();
}

#[test]
fn nothing_is_named_without_validation() {
    let (ctx, _mat) = context_matrix_gemv(false, false, counting_logger());
    assert!(!ctx.device.instance.debug_utils_enabled());
    for kind in KINDS {
        assert_eq!(ctx.device.namer.given(kind), 0, "{kind:?}");
    }
}

#[test]
fn adopted_devices_stay_unnamed() {
    // The host: q4vk's own instance with validation (so VK_EXT_debug_utils is on) and device.
    let instance = Arc::new(Instance::create(true, Arc::new(counting_logger())).unwrap());
    let host = Device::create(instance, -1, DeviceOptions::default()).unwrap();
    let adopt = adoption_of(&host, Vec::new(), Default::default());
    let config = ContextConfig {
        adopt: Some(adopt),
        ..Default::default()
    };
    let ctx = Context::new(config, counting_logger()).unwrap();
    let mut rng = Rng(3);
    let data = random_q4(&mut rng, 16, 64, 32, false, false);
    let mat = DeviceMatrix::new(&ctx, &data, None, None).unwrap();
    let mut y = vec![0f32; 16];
    gemv_host(&ctx, &mat, &rng.vec(64), &mut y, 1).unwrap();
    for kind in KINDS {
        assert_eq!(ctx.device.namer.given(kind), 0, "{kind:?}");
    }
    drop((mat, ctx));
    assert_nothing_logged();
}

/// Object names of every message a debug messenger received.
struct SeenNames(Mutex<Vec<String>>);

unsafe extern "system" fn collect_object_names(
    _severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    // SAFETY: the layer's callback data; `user` is the test's `SeenNames`.
    let (data, seen) = unsafe { (&*data, &*(user as *const SeenNames)) };
    let objects: &[vk::DebugUtilsObjectNameInfoEXT] = match data.object_count {
        0 => &[],
        // SAFETY: `object_count` entries, as the layer passes them.
        count => unsafe { std::slice::from_raw_parts(data.p_objects, count as usize) },
    };
    let mut names = seen.0.lock().unwrap_or_else(|e| e.into_inner());
    for object in objects.iter().filter(|o| !o.p_object_name.is_null()) {
        // SAFETY: a NUL-terminated name from the layer.
        let name = unsafe { CStr::from_ptr(object.p_object_name) };
        names.push(name.to_string_lossy().into_owned());
    }
    vk::FALSE
}

/// A deliberately invalid copy within a matrix's column order (overlapping source and
/// destination, in bounds: harmless were it to reach the driver; the layer reports it and
/// does not pass it on): the layer's message names the buffer and q4vk's command buffer as
/// q4vk named them.
#[test]
fn validation_messages_carry_the_names() {
    // The context's own log drops the message this test provokes.
    let (ctx, mat) = context_matrix_gemv(true, true, Logger::silent());
    if layer_missing(&ctx) {
        return;
    }
    let instance = &ctx.device.instance;
    let utils = ash::ext::debug_utils::Instance::new(&instance.entry, &instance.instance);
    let seen = SeenNames(Mutex::new(Vec::new()));
    let info = vk::DebugUtilsMessengerCreateInfoEXT::default()
        .message_severity(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR)
        .message_type(vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION)
        .pfn_user_callback(Some(collect_object_names))
        .user_data(&seen as *const SeenNames as *mut c_void);
    // SAFETY: a valid create info; `seen` outlives the messenger, destroyed below.
    let messenger = unsafe { utils.create_debug_utils_messenger(&info, None) }.unwrap();
    let order = &mat.k_order.as_ref().expect("a column order").buffer;
    let d = &ctx.device.device;
    let overlapping = [vk::BufferCopy {
        src_offset: 0,
        dst_offset: 4,
        size: 8,
    }];
    ctx.submit(|cmd| {
        // SAFETY: q4vk's command buffer, recording; the copy is invalid only for its overlap
        // (in bounds of a live buffer), which the layer reports and does not pass on.
        unsafe { d.cmd_copy_buffer(cmd, order.buffer, order.buffer, &overlapping) };
        Ok(())
    })
    .unwrap();
    // SAFETY: the messenger made above; the submission was waited for.
    unsafe { utils.destroy_debug_utils_messenger(messenger, None) };
    let names = seen.0.into_inner().unwrap();
    for expected in ["q4vk matrix 64x128 column order", "q4vk command buffer"] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected:?} not among the objects the layer named: {names:?}"
        );
    }
}
