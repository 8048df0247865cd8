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

/// The message of a panic payload (`&str` or `String`).
fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

fn install_quiet_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            // q4vk's worker threads run only inside an export; their panics continue on
            // the calling thread (`parallel::Worker::join`), whose boundary reports them.
            let worker = std::thread::current().name() == Some(crate::parallel::WORKER_NAME);
            if worker || INSIDE_BOUNDARY.with(Cell::get) > 0 {
                let location = info
                    .location()
                    .map(|l| format!(" at {}:{}", l.file(), l.line()))
                    .unwrap_or_default();
                let payload = payload_text(info.payload());
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
        Err(payload) => {
            let mut text = PANIC_TEXT.with(|t| std::mem::take(&mut *t.borrow_mut()));
            if text.is_empty() {
                // Resumed from a worker thread: the hook ran there; the payload has the text.
                text = payload_text(payload.as_ref());
            }
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

    /// A panic on a worker thread reaches the caller's last error with its message.
    #[test]
    fn worker_panic_is_reported_with_its_message() {
        let status = guard("q4vk_test", || {
            let mut out = vec![0u8; 64];
            crate::parallel::for_each_unit(
                &mut out,
                4,
                |_| 16,
                4,
                // Unit 0 is in the first span, which runs on a worker thread.
                |unit, _| assert!(unit != 0, "worker boom {unit}"),
            );
            Ok(())
        });
        assert_eq!(status, Q4VK_ERROR_INTERNAL);
        with_last_error(|m| {
            assert!(
                m.starts_with("q4vk_test: internal error (caught panic: worker boom 0"),
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
