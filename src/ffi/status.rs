//! Status codes, their static descriptions and the thread-local last-error message.

use super::panic::guard_value;
use super::ptr::copy_c_string;
use crate::error::{with_last_error, Error};
use libc::c_char;

/// Result of every q4vk function that can fail. 0 is success; codes are never renumbered.
pub type q4vk_status = u32;

/// Success.
pub const Q4VK_OK: q4vk_status = 0;
/// A value is out of range or inconsistent with another argument.
pub const Q4VK_ERROR_INVALID_ARGUMENT: q4vk_status = 1;
/// A required pointer was NULL.
pub const Q4VK_ERROR_NULL_POINTER: q4vk_status = 2;
/// A caller buffer is smaller than needed (the size queries say how large).
pub const Q4VK_ERROR_BUFFER_TOO_SMALL: q4vk_status = 3;
/// A valid request that this build or device cannot do; the message says what and why.
pub const Q4VK_ERROR_UNSUPPORTED: q4vk_status = 4;
/// NaN or Inf in the input weights.
pub const Q4VK_ERROR_NON_FINITE: q4vk_status = 5;
/// The caller was built against a header whose major/minor version differs.
pub const Q4VK_ERROR_ABI_MISMATCH: q4vk_status = 6;
/// A host memory allocation failed.
pub const Q4VK_ERROR_OUT_OF_HOST_MEMORY: q4vk_status = 7;
/// No Vulkan loader, or no usable Vulkan device.
pub const Q4VK_ERROR_NO_DEVICE: q4vk_status = 8;
/// A Vulkan call failed: the message names the call and its VkResult.
pub const Q4VK_ERROR_VULKAN: q4vk_status = 9;
/// A device memory allocation failed.
pub const Q4VK_ERROR_OUT_OF_DEVICE_MEMORY: q4vk_status = 10;
/// The Vulkan device was lost.
pub const Q4VK_ERROR_DEVICE_LOST: q4vk_status = 11;
/// A bug in q4vk, such as a caught panic; never expected.
pub const Q4VK_ERROR_INTERNAL: q4vk_status = 12;

/// The status code of an error.
pub(crate) fn status_of(error: &Error) -> q4vk_status {
    match error {
        Error::InvalidArgument(_) => Q4VK_ERROR_INVALID_ARGUMENT,
        Error::NullPointer(_) => Q4VK_ERROR_NULL_POINTER,
        Error::BufferTooSmall(_) => Q4VK_ERROR_BUFFER_TOO_SMALL,
        Error::Unsupported(_) => Q4VK_ERROR_UNSUPPORTED,
        Error::NonFinite(_) => Q4VK_ERROR_NON_FINITE,
        Error::AbiMismatch(_) => Q4VK_ERROR_ABI_MISMATCH,
        Error::OutOfHostMemory(_) => Q4VK_ERROR_OUT_OF_HOST_MEMORY,
        Error::NoDevice(_) => Q4VK_ERROR_NO_DEVICE,
        Error::Vulkan { .. } => Q4VK_ERROR_VULKAN,
        Error::OutOfDeviceMemory(_) => Q4VK_ERROR_OUT_OF_DEVICE_MEMORY,
        Error::DeviceLost(_) => Q4VK_ERROR_DEVICE_LOST,
        Error::Internal(_) => Q4VK_ERROR_INTERNAL,
    }
}

/// Returns a static, NUL-terminated description of `status`. Never NULL, also for codes
/// this version does not know. The string must not be freed.
#[no_mangle]
pub extern "C" fn q4vk_status_str(status: q4vk_status) -> *const c_char {
    let text: &'static [u8] = match status {
        Q4VK_OK => b"success\0",
        Q4VK_ERROR_INVALID_ARGUMENT => b"invalid argument\0",
        Q4VK_ERROR_NULL_POINTER => b"null pointer\0",
        Q4VK_ERROR_BUFFER_TOO_SMALL => b"buffer too small\0",
        Q4VK_ERROR_UNSUPPORTED => b"unsupported\0",
        Q4VK_ERROR_NON_FINITE => b"non-finite value (NaN or Inf) in input\0",
        Q4VK_ERROR_ABI_MISMATCH => b"ABI mismatch between header and library\0",
        Q4VK_ERROR_OUT_OF_HOST_MEMORY => b"out of host memory\0",
        Q4VK_ERROR_NO_DEVICE => b"no Vulkan loader or no usable device\0",
        Q4VK_ERROR_VULKAN => b"Vulkan call failed\0",
        Q4VK_ERROR_OUT_OF_DEVICE_MEMORY => b"out of device memory\0",
        Q4VK_ERROR_DEVICE_LOST => b"device lost\0",
        Q4VK_ERROR_INTERNAL => b"internal error\0",
        _ => b"unknown status code\0",
    };
    text.as_ptr().cast()
}

/// Copies the NUL-terminated detail of the last failed call on this thread into `buf`
/// (truncated to fit) and returns its full length without the NUL, so a caller can size
/// the buffer with a first call. `buf` may be NULL when `buf_len` is 0. Returns 0 when no
/// call on this thread has failed yet. Successful calls do not clear the message.
///
/// # Safety
/// `buf` must be NULL or valid for writes of `buf_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn q4vk_last_error_message(buf: *mut c_char, buf_len: usize) -> usize {
    guard_value("q4vk_last_error_message", 0, || {
        // SAFETY: `buf` is NULL or writable for `buf_len` bytes (caller's contract).
        with_last_error(|text| unsafe { copy_c_string(text, buf, buf_len) })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_dense_and_mapped() {
        let errors = [
            Error::InvalidArgument(String::new()),
            Error::NullPointer(String::new()),
            Error::BufferTooSmall(String::new()),
            Error::Unsupported(String::new()),
            Error::NonFinite(String::new()),
            Error::AbiMismatch(String::new()),
            Error::OutOfHostMemory(String::new()),
            Error::NoDevice(String::new()),
            Error::Vulkan {
                call: "vkX",
                result: ash::vk::Result::ERROR_UNKNOWN,
            },
            Error::OutOfDeviceMemory(String::new()),
            Error::DeviceLost(String::new()),
            Error::Internal(String::new()),
        ];
        for (i, e) in errors.iter().enumerate() {
            assert_eq!(status_of(e), i as u32 + 1);
        }
        assert_eq!(Q4VK_ERROR_INTERNAL, 12);
    }

    #[test]
    fn status_str_never_null() {
        for s in 0..20 {
            assert!(!q4vk_status_str(s).is_null());
        }
        // SAFETY: q4vk_status_str returns a static NUL-terminated string.
        let unknown = unsafe { std::ffi::CStr::from_ptr(q4vk_status_str(9999)) };
        assert_eq!(unknown.to_str().unwrap(), "unknown status code");
    }
}
