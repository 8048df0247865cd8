//! A host's device with the tensor-core kernels' features enabled (or not), adopted by a
//! context: the context runs the tensor-core kernels exactly when the host enabled their
//! extension and features and the device has what they need (NVIDIA: yes; lavapipe: no
//! shape, so the SIMT kernels), reads those features from the host's chain, and matches
//! the f64 reference at m = 1, 8 and 40 (GEMV and GEMM) either way. The host's instance
//! has the validation layer on (unless `Q4VK_TESTS_WITHOUT_LAYER=1`); any message fails.

mod gpu_support;
use ash::vk;
use gpu_support::*;
use q4vk::cpu::reference;
use q4vk::vk::context::{Adoption, Context, ContextConfig};
use q4vk::vk::coop::{self, HostFeatures};
use q4vk::vk::gemv::gemv_host;
use q4vk::vk::log::Logger;
use q4vk::vk::matrix::DeviceMatrix;
use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::atomic::{AtomicUsize, Ordering};

static MESSAGES: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn count(_: *mut c_void, _: u32, message: *const c_char) {
    let text = CStr::from_ptr(message).to_string_lossy();
    eprintln!("{text}");
    if fails_test(&text) {
        MESSAGES.fetch_add(1, Ordering::SeqCst);
    }
}

unsafe extern "system" fn on_validation(
    _: vk::DebugUtilsMessageSeverityFlagsEXT,
    _: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    _: *mut c_void,
) -> vk::Bool32 {
    eprintln!("validation: {:?}", (*data).message_as_c_str());
    MESSAGES.fetch_add(1, Ordering::SeqCst);
    vk::FALSE
}

/// The host: an instance (with the validation layer where the machine has it), the first
/// physical device, a device with one compute queue and, with `enable`, the tensor-core
/// kernels' extensions and features where the device offers them.
struct Host {
    entry: ash::Entry,
    instance: ash::Instance,
    messenger: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    physical: vk::PhysicalDevice,
    device: ash::Device,
    family: u32,
    offers: bool,
    enabled: bool,
}

impl Host {
    fn new(enable: bool) -> Host {
        // SAFETY: plain Vulkan object creation with valid create infos; everything is
        // destroyed in Drop after the context that adopted it.
        unsafe {
            let entry = ash::Entry::load().expect("a Vulkan loader");
            let layer = c"VK_LAYER_KHRONOS_validation";
            let with_layer = entry
                .enumerate_instance_layer_properties()
                .unwrap()
                .iter()
                .any(|l| l.layer_name_as_c_str() == Ok(layer));
            let layerless = std::env::var("Q4VK_TESTS_WITHOUT_LAYER").is_ok_and(|v| v == "1");
            assert!(with_layer || layerless, "the validation layer is missing");
            let layers = [layer.as_ptr()];
            let exts = [ash::ext::debug_utils::NAME.as_ptr()];
            let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_1);
            let mut info = vk::InstanceCreateInfo::default().application_info(&app);
            if with_layer {
                info = info
                    .enabled_layer_names(&layers)
                    .enabled_extension_names(&exts);
            }
            let instance = entry.create_instance(&info, None).unwrap();
            let messenger = with_layer.then(|| {
                let utils = ash::ext::debug_utils::Instance::new(&entry, &instance);
                let info = vk::DebugUtilsMessengerCreateInfoEXT::default()
                    .message_severity(
                        vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
                            | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
                    )
                    .message_type(
                        vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                            | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION,
                    )
                    .pfn_user_callback(Some(on_validation));
                let m = utils.create_debug_utils_messenger(&info, None).unwrap();
                (utils, m)
            });
            let physical = instance.enumerate_physical_devices().unwrap()[0];
            let family = instance
                .get_physical_device_queue_family_properties(physical)
                .iter()
                .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
                .expect("a compute queue") as u32;
            let available = instance
                .enumerate_device_extension_properties(physical)
                .unwrap();
            let offers = coop::device_offers(&entry, &instance, physical, &available);
            let enabled = enable && offers;
            let names: Vec<*const c_char> = if enabled {
                coop::EXTENSIONS.iter().map(|n| n.as_ptr()).collect()
            } else {
                Vec::new()
            };
            let mut features = coop::EnabledFeatures::all_on();
            let priority = [1.0f32];
            let queues = [vk::DeviceQueueCreateInfo::default()
                .queue_family_index(family)
                .queue_priorities(&priority)];
            let mut info = vk::DeviceCreateInfo::default()
                .queue_create_infos(&queues)
                .enabled_extension_names(&names);
            if enabled {
                info = info
                    .push_next(&mut features.coop)
                    .push_next(&mut features.model)
                    .push_next(&mut features.f16);
            }
            let device = instance.create_device(physical, &info, None).unwrap();
            Host {
                entry,
                instance,
                messenger,
                physical,
                device,
                family,
                offers,
                enabled,
            }
        }
    }

    /// A context adopting the device, told what the host enabled the way a C host tells
    /// it: extension names and the enabled-feature chain.
    fn context(&self) -> Context {
        let extensions: Vec<CString> = if self.enabled {
            coop::EXTENSIONS.iter().map(|n| (*n).to_owned()).collect()
        } else {
            Vec::new()
        };
        let mut features = coop::EnabledFeatures::all_on();
        let mut chain = vk::PhysicalDeviceFeatures2::default();
        if self.enabled {
            chain = chain
                .push_next(&mut features.coop)
                .push_next(&mut features.model)
                .push_next(&mut features.f16);
        }
        // SAFETY: a chain of live, complete structs.
        let host_features = unsafe {
            HostFeatures::from_chain((&chain as *const vk::PhysicalDeviceFeatures2).cast())
        };
        // SAFETY: the device's first queue of `family` exists (one was asked for).
        let queue = unsafe { self.device.get_device_queue(self.family, 0) };
        let adopt = Adoption {
            get_instance_proc_addr: self.entry.static_fn().get_instance_proc_addr,
            instance: self.instance.handle(),
            physical: self.physical,
            device: self.device.handle(),
            queue,
            queue_family: self.family,
            extensions,
            features: host_features,
            lock: None,
        };
        let config = ContextConfig {
            adopt: Some(adopt),
            ..Default::default()
        };
        Context::new(config, Logger::new(Some(count), std::ptr::null_mut(), 1)).unwrap()
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        // SAFETY: the host's own objects; the adopting context was dropped first.
        unsafe {
            self.device.destroy_device(None);
            if let Some((utils, m)) = &self.messenger {
                utils.destroy_debug_utils_messenger(*m, None);
            }
            self.instance.destroy_instance(None);
        }
    }
}

#[test]
fn adopted_devices_run_the_tensor_core_kernels_where_the_host_enabled_them() {
    let mut rng = Rng(515);
    let d = random_q4(&mut rng, 200, 384, 128, true, false);
    for enable in [false, true] {
        let host = Host::new(enable);
        {
            let ctx = host.context();
            assert_eq!(
                ctx.coop, host.enabled,
                "enable {enable}, device offers {}",
                host.offers
            );
            let mat = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
            assert_eq!(mat.coop.is_some(), ctx.coop);
            for m in [1usize, 8, 40] {
                let x = rng.vec(m * d.shape.k);
                let mut y = vec![f32::NAN; m * d.shape.n];
                gemv_host(&ctx, &mat, &x, &mut y, m as u32).unwrap();
                assert!(y.iter().all(|v| v.is_finite()), "unwritten y at m {m}");
                let err = reference::relative_error(&y, &reference::gemv(&d, &x, m));
                assert!(err < 1e-5, "enable {enable} m {m}: {err:e}");
            }
        }
        drop(host);
    }
    assert_eq!(MESSAGES.load(Ordering::SeqCst), 0);
}
