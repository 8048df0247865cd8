//! Logging through the host's callback only: the library never prints.

use std::ffi::{c_char, c_void, CString};

/// `Q4VK_LOG_ERROR`.
pub const LEVEL_ERROR: u32 = 0;
/// `Q4VK_LOG_WARN`.
pub const LEVEL_WARN: u32 = 1;
/// `Q4VK_LOG_INFO`.
pub const LEVEL_INFO: u32 = 2;
/// `Q4VK_LOG_DEBUG`.
pub const LEVEL_DEBUG: u32 = 3;

/// The host's log callback (`q4vk_log_fn`).
pub type LogFn = unsafe extern "C" fn(user: *mut c_void, level: u32, message: *const c_char);

/// A host callback plus its user pointer and the most verbose level it wants.
#[derive(Debug, Clone, Copy)]
pub struct Logger {
    callback: Option<LogFn>,
    user: *mut c_void,
    max_level: u32,
}

// SAFETY: the C contract makes the host responsible for a callback that may be called from
// any thread that calls into the context (documented on q4vk_context_desc).
unsafe impl Send for Logger {}
// SAFETY: as above; the logger itself is immutable.
unsafe impl Sync for Logger {}

impl Logger {
    /// A logger delivering levels up to `max_level` to `callback` (none: silent).
    pub fn new(callback: Option<LogFn>, user: *mut c_void, max_level: u32) -> Logger {
        Logger {
            callback,
            user,
            max_level,
        }
    }

    /// A logger that drops everything.
    pub fn silent() -> Logger {
        Logger::new(None, std::ptr::null_mut(), 0)
    }

    /// Delivers `message` at `level` if the host asked for that level.
    pub fn log(&self, level: u32, message: &str) {
        if let Some(callback) = self.callback {
            if level <= self.max_level {
                let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
                // SAFETY: the host's callback, called as the contract says.
                unsafe { callback(self.user, level, text.as_ptr()) };
            }
        }
    }
}
