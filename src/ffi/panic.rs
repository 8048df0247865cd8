//! The panic boundary every export runs inside. A panic never unwinds into C: it becomes
//! `Q4VK_ERROR_INTERNAL` (or a getter's neutral value) and its message becomes the thread's
//! last error. Panics inside the boundary are not printed: the library never writes to
//! stderr (the previous panic hook still runs for panics outside q4vk's exports).

use super::status::{q4vk_status, status_of, Q4VK_ERROR_INTERNAL, Q4VK_OK};
use crate::error::{set_last_error, Result};
use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    static INSIDE_BOUNDARY: Cell<u32> = const { Cell::new(0) };
    static PANIC_TEXT: RefCell<String> = const { RefCell::new(String::new()) };
}

fn install_quiet_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if INSIDE_BOUNDARY.with(Cell::get) > 0 {
                let location = info
                    .location()
                    .map(|l| format!(" at {}:{}", l.file(), l.line()))
                    .unwrap_or_default();
                let payload = info
                    .payload()
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| info.payload().downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".to_string());
                PANIC_TEXT.with(|t| *t.borrow_mut() = format!("{payload}{location}"));
            } else {
                previous(info);
            }
        }));
    });
}

fn run_caught<T>(function: &'static str, f: impl FnOnce() -> T) -> Option<T> {
    install_quiet_hook();
    INSIDE_BOUNDARY.with(|c| c.set(c.get() + 1));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    INSIDE_BOUNDARY.with(|c| c.set(c.get() - 1));
    match result {
        Ok(value) => Some(value),
        Err(_) => {
            let text = PANIC_TEXT.with(|t| std::mem::take(&mut *t.borrow_mut()));
            set_last_error(format!("{function}: internal error (caught panic: {text})"));
            None
        }
    }
}

/// Runs the body of an export that returns a status. Errors are recorded as the thread's
/// last error, prefixed with the function name.
pub(crate) fn guard(function: &'static str, f: impl FnOnce() -> Result<()>) -> q4vk_status {
    match run_caught(function, f) {
        Some(Ok(())) => Q4VK_OK,
        Some(Err(error)) => {
            set_last_error(format!("{function}: {error}"));
            status_of(&error)
        }
        None => Q4VK_ERROR_INTERNAL,
    }
}

/// Runs the body of a getter that cannot report a status; a panic yields `fallback`.
pub(crate) fn guard_value<T>(function: &'static str, fallback: T, f: impl FnOnce() -> T) -> T {
    run_caught(function, f).unwrap_or(fallback)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{with_last_error, Error};

    #[test]
    fn panic_becomes_internal_with_message() {
        let status = guard("q4vk_test", || panic!("boom {}", 7));
        assert_eq!(status, Q4VK_ERROR_INTERNAL);
        with_last_error(|m| {
            assert!(
                m.starts_with("q4vk_test: internal error (caught panic: boom 7"),
                "{m}"
            )
        });
    }

    #[test]
    fn error_is_prefixed_and_mapped() {
        let status = guard("q4vk_test", || Err(Error::Internal("bad".into())));
        assert_eq!(status, Q4VK_ERROR_INTERNAL);
        with_last_error(|m| assert_eq!(m, "q4vk_test: bad"));
        assert_eq!(guard_value("q4vk_test", 5u32, || panic!("x")), 5);
    }
}
