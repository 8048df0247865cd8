//! What stands behind a context or matrix handle: Vulkan (a device and its buffers) or the
//! CPU (host threads and host memory). Calls that only make sense on one refuse the other.

use crate::cpu::context::CpuContext;
use crate::cpu::matrix::CpuMatrix;
use crate::error::{Error, Result};
use crate::vk::context::Context;
use crate::vk::matrix::DeviceMatrix;

/// A context's engine.
// One per context, inside the handle's own heap allocation: the variants' sizes do not
// matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Backend {
    /// A Vulkan device (q4vk's own or adopted).
    Vulkan(Context),
    /// The host CPU.
    Cpu(CpuContext),
}

impl Backend {
    /// The Vulkan context, or `Unsupported` naming `call` on a CPU context.
    pub(crate) fn vulkan(&self, call: &str) -> Result<&Context> {
        match self {
            Backend::Vulkan(c) => Ok(c),
            Backend::Cpu(c) => Err(Error::Unsupported(format!(
                "{call} needs a Vulkan context; ctx runs on the CPU ({}: created with Q4VK_CONTEXT_CPU, or Q4VK_CONTEXT_CPU_FALLBACK found no usable Vulkan device)",
                c.device_name()
            ))),
        }
    }

    /// The device (or CPU) name.
    pub(crate) fn device_name(&self) -> &str {
        match self {
            Backend::Vulkan(c) => c.device_name(),
            Backend::Cpu(c) => c.device_name(),
        }
    }
}

/// A matrix's storage.
pub(crate) enum Matrix {
    /// Buffers on a Vulkan device.
    Device(DeviceMatrix),
    /// Host memory of a CPU context.
    Cpu(CpuMatrix),
}
