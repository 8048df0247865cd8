//! The library's error type, its mapping to C status codes, and the thread-local text of
//! the last failure that `q4vk_last_error_message` reports.

use std::cell::RefCell;

/// Every way a q4vk operation can fail. The message says which argument or which Vulkan
/// call, and why; `ffi::status` maps each variant to its stable C code.
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

impl Error {
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
            R::ERROR_DEVICE_LOST => {
                Error::DeviceLost(format!("{call} failed: VK_ERROR_DEVICE_LOST"))
            }
            _ => Error::Vulkan { call, result },
        }
    }

    /// The same error with `prefix` before its message (which of several calls failed); a
    /// Vulkan result keeps its call's name.
    pub fn prefixed(self, prefix: &str) -> Error {
        let p = |m: String| format!("{prefix}{m}");
        match self {
            Error::InvalidArgument(m) => Error::InvalidArgument(p(m)),
            Error::NullPointer(m) => Error::NullPointer(p(m)),
            Error::BufferTooSmall(m) => Error::BufferTooSmall(p(m)),
            Error::Unsupported(m) => Error::Unsupported(p(m)),
            Error::NonFinite(m) => Error::NonFinite(p(m)),
            Error::AbiMismatch(m) => Error::AbiMismatch(p(m)),
            Error::OutOfHostMemory(m) => Error::OutOfHostMemory(p(m)),
            Error::NoDevice(m) => Error::NoDevice(p(m)),
            Error::OutOfDeviceMemory(m) => Error::OutOfDeviceMemory(p(m)),
            Error::DeviceLost(m) => Error::DeviceLost(p(m)),
            Error::Internal(m) => Error::Internal(p(m)),
            e @ Error::Vulkan { .. } => e,
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
