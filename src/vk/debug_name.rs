//! Debug names (`VK_EXT_debug_utils`) on the Vulkan objects q4vk creates, so validation
//! messages and GPU captures (RenderDoc, Nsight, AGI) say whose object each one is.
//!
//! Naming an object without the extension enabled on the instance is invalid usage, so
//! names are given only where q4vk knows it is: on its own instance, which enables it with
//! validation ([`Instance::debug_utils_enabled`]). An adopted device's objects stay unnamed:
//! the host's instance extensions are not part of what q4vk is told, and the loader hands
//! out the function whether or not the host enabled the extension.
//!
//! Descriptor sets (freed with their pool, never one by one) and the instance are not
//! named: drivers keep a name until its object is destroyed on its own, and Mesa's
//! lavapipe 22.3 never releases the names of those (valgrind counts them lost). The pools'
//! names say whose sets they hold.

use super::instance::Instance;
use ash::vk;
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::Mutex;

/// Gives objects of one device their debug names, or does nothing where the extension is
/// off.
pub struct Namer {
    utils: Option<ash::ext::debug_utils::Device>,
    /// Names given so far, per object type.
    given: Mutex<HashMap<vk::ObjectType, u64>>,
}

impl Namer {
    /// A namer for `device` of `instance`: active where the instance enabled
    /// `VK_EXT_debug_utils` and the device resolves `vkSetDebugUtilsObjectNameEXT`.
    pub fn new(instance: &Instance, device: &ash::Device) -> Namer {
        let command = c"vkSetDebugUtilsObjectNameEXT";
        let resolves = || {
            // SAFETY: a live device of this instance; a plain look-up of a command name.
            unsafe {
                let vki = &instance.instance;
                vki.get_device_proc_addr(device.handle(), command.as_ptr())
            }
            .is_some()
        };
        let utils = (instance.debug_utils_enabled() && resolves())
            .then(|| ash::ext::debug_utils::Device::new(&instance.instance, device));
        Namer {
            utils,
            given: Mutex::new(HashMap::new()),
        }
    }

    /// A namer that names nothing (devices whose instance q4vk does not know to have the
    /// extension).
    pub fn off() -> Namer {
        Namer {
            utils: None,
            given: Mutex::new(HashMap::new()),
        }
    }

    /// Names `handle` `name` (NUL bytes become spaces). Does nothing where the extension is
    /// off or the handle is null; a failed call is ignored, as a name is only a debugging
    /// aid. The caller owns `handle` and names it before any other thread can use it (the
    /// name is externally synchronized with the object).
    pub fn name<H: vk::Handle + Copy>(&self, handle: H, name: &str) {
        let Some(utils) = &self.utils else {
            return;
        };
        if handle.is_null() {
            return;
        }
        let text = CString::new(name.replace('\0', " ")).unwrap_or_default();
        let info = vk::DebugUtilsObjectNameInfoEXT::default()
            .object_handle(handle)
            .object_name(&text);
        // SAFETY: a live object of this device (the caller's), named while no other thread
        // uses it; the extension is enabled on the instance.
        if unsafe { utils.set_debug_utils_object_name(&info) }.is_ok() {
            let mut given = self.given.lock().unwrap_or_else(|p| p.into_inner());
            *given.entry(H::TYPE).or_default() += 1;
        }
    }

    /// How many objects of type `kind` were given a name so far.
    pub fn given(&self, kind: vk::ObjectType) -> u64 {
        let given = self.given.lock().unwrap_or_else(|p| p.into_inner());
        given.get(&kind).copied().unwrap_or(0)
    }
}
