//! The Vulkan instance: q4vk's own (with optional validation and a debug messenger that
//! forwards to the log callback) or the host's, borrowed.

use super::log::{Logger, LEVEL_ERROR, LEVEL_INFO, LEVEL_WARN};
use crate::error::{Error, Result};
use ash::vk;
use std::ffi::{c_void, CStr};
use std::sync::Arc;

const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

/// A loaded instance. Destroys it (and its messenger) on drop only if q4vk created it.
pub struct Instance {
    /// Loader entry points.
    pub entry: ash::Entry,
    /// Instance functions.
    pub instance: ash::Instance,
    owned: bool,
    messenger: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    /// Keeps the logger the messenger's user pointer points at alive.
    _logger: Arc<Logger>,
}

unsafe extern "system" fn forward_validation(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    // Never unwind into the loader.
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: the layer passes valid callback data; user is the Arc'd logger.
        let (logger, data) = unsafe { (&*(user as *const Logger), &*data) };
        let text = if data.p_message.is_null() {
            "(no message)".into()
        } else {
            // SAFETY: a NUL-terminated string from the layer.
            unsafe { CStr::from_ptr(data.p_message) }.to_string_lossy()
        };
        let level = if severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR) {
            LEVEL_ERROR
        } else {
            LEVEL_WARN
        };
        logger.log(level, &format!("validation: {text}"));
    });
    vk::FALSE
}

/// The loader library `ash::Entry::load` opens (ash 0.38 picks it by target OS: Android
/// ships only the unversioned `libvulkan.so` in /system/lib64, desktop Linux distributions
/// install `libvulkan.so.1`).
#[cfg(any(target_os = "android", target_os = "fuchsia"))]
const LOADER_NAME: &str = "libvulkan.so";
#[cfg(target_os = "windows")]
const LOADER_NAME: &str = "vulkan-1.dll";
#[cfg(any(target_os = "macos", target_os = "ios"))]
const LOADER_NAME: &str = "libvulkan.dylib";
#[cfg(not(any(
    target_os = "android",
    target_os = "fuchsia",
    target_os = "windows",
    target_os = "macos",
    target_os = "ios"
)))]
const LOADER_NAME: &str = "libvulkan.so.1";

/// Loads the system's Vulkan loader, or fails with `NoDevice`.
pub fn load_entry() -> Result<ash::Entry> {
    // SAFETY: loading the system loader library; ash keeps it loaded.
    unsafe { ash::Entry::load() }.map_err(|e| {
        Error::NoDevice(format!(
            "the Vulkan loader ({LOADER_NAME}) could not be loaded: {e}"
        ))
    })
}

impl Instance {
    /// Creates q4vk's own Vulkan 1.1 instance; with `validation`, enables the Khronos
    /// validation layer (if installed) and forwards its warnings and errors to `logger`.
    pub fn create(validation: bool, logger: Arc<Logger>) -> Result<Instance> {
        let entry = load_entry()?;
        // SAFETY: plain queries and creation with valid create infos.
        unsafe {
            let version = entry
                .try_enumerate_instance_version()
                .map_err(|e| Error::vk("vkEnumerateInstanceVersion", e))?
                .unwrap_or(vk::API_VERSION_1_0);
            if version < vk::API_VERSION_1_1 {
                return Err(Error::NoDevice(format!(
                    "the Vulkan loader supports only {}.{}; q4vk needs 1.1",
                    vk::api_version_major(version),
                    vk::api_version_minor(version)
                )));
            }
            let layers = entry
                .enumerate_instance_layer_properties()
                .map_err(|e| Error::vk("vkEnumerateInstanceLayerProperties", e))?;
            let extensions = entry
                .enumerate_instance_extension_properties(None)
                .map_err(|e| Error::vk("vkEnumerateInstanceExtensionProperties", e))?;
            let has_ext = |name: &CStr| {
                extensions
                    .iter()
                    .any(|e| e.extension_name_as_c_str() == Ok(name))
            };
            let mut layer_names = Vec::new();
            let mut ext_names = Vec::new();
            let mut debug = false;
            if validation {
                if layers
                    .iter()
                    .any(|l| l.layer_name_as_c_str() == Ok(VALIDATION_LAYER))
                {
                    layer_names.push(VALIDATION_LAYER.as_ptr());
                    if has_ext(ash::ext::debug_utils::NAME) {
                        ext_names.push(ash::ext::debug_utils::NAME.as_ptr());
                        debug = true;
                    }
                } else {
                    logger.log(
                        LEVEL_WARN,
                        "validation requested but VK_LAYER_KHRONOS_validation is not installed",
                    );
                }
            }
            let mut flags = vk::InstanceCreateFlags::empty();
            if has_ext(ash::khr::portability_enumeration::NAME) {
                ext_names.push(ash::khr::portability_enumeration::NAME.as_ptr());
                flags |= vk::InstanceCreateFlags::ENUMERATE_PORTABILITY_KHR;
            }
            let app = vk::ApplicationInfo::default()
                .application_name(c"q4vk")
                .engine_name(c"q4vk")
                .api_version(vk::API_VERSION_1_1);
            let info = vk::InstanceCreateInfo::default()
                .application_info(&app)
                .enabled_layer_names(&layer_names)
                .enabled_extension_names(&ext_names)
                .flags(flags);
            let instance = entry.create_instance(&info, None).map_err(|e| match e {
                // The loader found no driver (no ICD installed or none loadable).
                vk::Result::ERROR_INCOMPATIBLE_DRIVER | vk::Result::ERROR_INITIALIZATION_FAILED => {
                    Error::NoDevice(format!(
                        "vkCreateInstance failed with {e:?}: the Vulkan loader found no usable driver"
                    ))
                }
                _ => Error::vk("vkCreateInstance", e),
            })?;
            let mut this = Instance {
                entry,
                instance,
                owned: true,
                messenger: None,
                _logger: logger.clone(),
            };
            if debug {
                let utils = ash::ext::debug_utils::Instance::new(&this.entry, &this.instance);
                let info = vk::DebugUtilsMessengerCreateInfoEXT::default()
                    .message_severity(
                        vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
                            | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
                    )
                    .message_type(
                        vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                            | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                            | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
                    )
                    .pfn_user_callback(Some(forward_validation))
                    .user_data(Arc::as_ptr(&logger) as *mut c_void);
                let messenger = utils
                    .create_debug_utils_messenger(&info, None)
                    .map_err(|e| Error::vk("vkCreateDebugUtilsMessengerEXT", e))?;
                this.messenger = Some((utils, messenger));
                logger.log(LEVEL_INFO, "validation layer enabled");
            }
            Ok(this)
        }
    }

    /// Borrows the host's instance through its `vkGetInstanceProcAddr`.
    ///
    /// # Safety
    /// `get_instance_proc_addr` and `instance` must be valid and stay alive until every
    /// object built on the returned value is dropped.
    pub unsafe fn adopt(
        get_instance_proc_addr: vk::PFN_vkGetInstanceProcAddr,
        instance: vk::Instance,
        logger: Arc<Logger>,
    ) -> Instance {
        // SAFETY: the host's live vkGetInstanceProcAddr and instance (caller's contract).
        let (entry, instance) = unsafe {
            let entry = ash::Entry::from_static_fn(ash::StaticFn {
                get_instance_proc_addr,
            });
            let instance = ash::Instance::load(entry.static_fn(), instance);
            (entry, instance)
        };
        Instance {
            entry,
            instance,
            owned: false,
            messenger: None,
            _logger: logger,
        }
    }

    /// Whether `VK_EXT_debug_utils` is enabled on this instance as far as q4vk knows: on its
    /// own instance made with validation (where the loader offers the extension), never on
    /// an adopted one, whose enabled instance extensions q4vk is not told.
    pub fn debug_utils_enabled(&self) -> bool {
        self.messenger.is_some()
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // SAFETY: only what q4vk created, after everything built on it (Arc order).
        unsafe {
            if let Some((utils, messenger)) = self.messenger.take() {
                utils.destroy_debug_utils_messenger(messenger, None);
            }
            if self.owned {
                self.instance.destroy_instance(None);
            }
        }
    }
}
