//! The library's error type, its mapping to C status codes, and the thread-local text of
//! the last failure that `q4vk_last_error_message` reports.

use std::cell::RefCell;

/// Every way a q4vk operation can fail. The message says which argument or which Vulkan
/// call, and why; `status()` gives the stable C code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A value out of range or inconsistent with another.
    #[error("{0}")]
    InvalidArgument(String),
    /// A required pointer was NULL.
    #[error("{0}")]
    NullPointer(String),
    /// A caller buffer is smaller than the operation needs.
    #[error("{0}")]
    BufferTooSmall(String),
    /// A valid request that this build or device cannot do.
    #[error("{0}")]
    Unsupported(String),
    /// NaN or Inf in input weights.
    #[error("{0}")]
    NonFinite(String),
    /// The caller was compiled against an incompatible header.
    #[error("{0}")]
    AbiMismatch(String),
    /// A host allocation failed.
    #[error("{0}")]
    OutOfHostMemory(String),
    /// No Vulkan loader, or no usable device.
    #[error("{0}")]
    NoDevice(String),
    /// A Vulkan call failed with a result that has no more specific status.
    #[error("{call} failed: {result:?}")]
    Vulkan {
        /// The Vulkan function that failed.
        call: &'static str,
        /// The result it returned.
        result: ash::vk::Result,
    },
    /// A device allocation failed.
    #[error("{0}")]
    OutOfDeviceMemory(String),
    /// The device was lost.
    #[error("{0}")]
    DeviceLost(String),
    /// A bug in q4vk (for example a caught panic).
    #[error("{0}")]
    Internal(String),
}

/// Numeric status codes of the C ABI. Never renumbered; `ffi::status` exports the same
/// values as `Q4VK_*` constants (a test checks they agree).
pub mod code {
    /// Success.
    pub const OK: u32 = 0;
    /// See [`super::Error::InvalidArgument`].
    pub const INVALID_ARGUMENT: u32 = 1;
    /// See [`super::Error::NullPointer`].
    pub const NULL_POINTER: u32 = 2;
    /// See [`super::Error::BufferTooSmall`].
    pub const BUFFER_TOO_SMALL: u32 = 3;
    /// See [`super::Error::Unsupported`].
    pub const UNSUPPORTED: u32 = 4;
    /// See [`super::Error::NonFinite`].
    pub const NON_FINITE: u32 = 5;
    /// See [`super::Error::AbiMismatch`].
    pub const ABI_MISMATCH: u32 = 6;
    /// See [`super::Error::OutOfHostMemory`].
    pub const OUT_OF_HOST_MEMORY: u32 = 7;
    /// See [`super::Error::NoDevice`].
    pub const NO_DEVICE: u32 = 8;
    /// See [`super::Error::Vulkan`].
    pub const VULKAN: u32 = 9;
    /// See [`super::Error::OutOfDeviceMemory`].
    pub const OUT_OF_DEVICE_MEMORY: u32 = 10;
    /// See [`super::Error::DeviceLost`].
    pub const DEVICE_LOST: u32 = 11;
    /// See [`super::Error::Internal`].
    pub const INTERNAL: u32 = 12;
}

impl Error {
    /// The C status code of this error.
    pub fn status(&self) -> u32 {
        match self {
            Error::InvalidArgument(_) => code::INVALID_ARGUMENT,
            Error::NullPointer(_) => code::NULL_POINTER,
            Error::BufferTooSmall(_) => code::BUFFER_TOO_SMALL,
            Error::Unsupported(_) => code::UNSUPPORTED,
            Error::NonFinite(_) => code::NON_FINITE,
            Error::AbiMismatch(_) => code::ABI_MISMATCH,
            Error::OutOfHostMemory(_) => code::OUT_OF_HOST_MEMORY,
            Error::NoDevice(_) => code::NO_DEVICE,
            Error::Vulkan { .. } => code::VULKAN,
            Error::OutOfDeviceMemory(_) => code::OUT_OF_DEVICE_MEMORY,
            Error::DeviceLost(_) => code::DEVICE_LOST,
            Error::Internal(_) => code::INTERNAL,
        }
    }

    /// Maps a failed Vulkan call to the most specific error: out-of-memory results and
    /// device loss get their own codes, anything else is [`Error::Vulkan`].
    pub fn vk(call: &'static str, result: ash::vk::Result) -> Error {
        use ash::vk::Result as R;
        match result {
            R::ERROR_OUT_OF_HOST_MEMORY => {
                Error::OutOfHostMemory(format!("{call} failed: VK_ERROR_OUT_OF_HOST_MEMORY"))
            }
            R::ERROR_OUT_OF_DEVICE_MEMORY => {
                Error::OutOfDeviceMemory(format!("{call} failed: VK_ERROR_OUT_OF_DEVICE_MEMORY"))
            }
            R::ERROR_DEVICE_LOST => Error::DeviceLost(format!("{call} failed: VK_ERROR_DEVICE_LOST")),
            _ => Error::Vulkan { call, result },
        }
    }
}

/// Shorthand for results of q4vk operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Builds an [`Error::InvalidArgument`] from a format string.
macro_rules! invalid {
    ($($arg:tt)*) => { $crate::error::Error::InvalidArgument(format!($($arg)*)) };
}
pub(crate) use invalid;

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Records `message` as this thread's last error (what `q4vk_last_error_message` returns).
pub fn set_last_error(message: String) {
    LAST_ERROR.with(|cell| *cell.borrow_mut() = message);
}

/// Runs `f` with this thread's last error message.
pub fn with_last_error<R>(f: impl FnOnce(&str) -> R) -> R {
    LAST_ERROR.with(|cell| f(&cell.borrow()))
}
