//! How a context judges the byte counts callers give it, once the usual checks (not NULL,
//! not too small) have passed: a count larger than the call reads is accepted, but one
//! that equals exactly what another element type would need (f32 weights described as
//! f16, f32 x passed with the f16-x flag) is most likely a dtype mistake and gets a WARN
//! naming both readings; with `Q4VK_CONTEXT_STRICT_SIZES` any count larger than the exact
//! one is refused (a smaller one is the call's own `BUFFER_TOO_SMALL`).

use crate::error::{invalid, Result};
use crate::quant::dtype::Dtype;
use crate::vk::log::{Logger, LEVEL_WARN};

/// One byte count of a call: the argument, what the caller gave, what the call reads, and
/// how the call reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ByteCount {
    /// The argument as the header names it (`desc->weight_bytes`, `args->x.range`).
    pub arg: String,
    /// What the argument counts: `"bytes"`, or `"floats"` for `x_len`, `y_len`.
    pub unit: &'static str,
    /// Bytes given.
    pub given: u64,
    /// Bytes the call reads or writes.
    pub exact: u64,
    /// The elements the call takes from the buffer, where they have a type another
    /// reading could swap: (count, type).
    pub elements: Option<(u64, Dtype)>,
}

impl ByteCount {
    /// A count of untyped bytes (codes, zero points, indices).
    pub(crate) fn bytes(arg: impl Into<String>, given: u64, exact: u64) -> ByteCount {
        ByteCount {
            arg: arg.into(),
            unit: "bytes",
            given,
            exact,
            elements: None,
        }
    }

    /// A count of floats (`x_len`, `y_len`: the type is the call's own).
    pub(crate) fn floats(arg: impl Into<String>, given: usize, exact: usize) -> ByteCount {
        ByteCount {
            unit: "floats",
            ..ByteCount::bytes(arg, given as u64, exact as u64)
        }
    }

    /// A count of bytes holding `count` elements of `dtype` (`exact` may round up to
    /// whole words).
    pub(crate) fn typed(
        arg: impl Into<String>,
        given: u64,
        exact: u64,
        (count, dtype): (u64, Dtype),
    ) -> ByteCount {
        ByteCount {
            elements: Some((count, dtype)),
            ..ByteCount::bytes(arg, given, exact)
        }
    }

    /// The element types of another size whose `count` elements take exactly `given`
    /// bytes (none when the count is exact or untyped).
    fn other_readings(&self) -> Vec<Dtype> {
        let Some((count, dtype)) = self.elements else {
            return Vec::new();
        };
        if self.given == self.exact {
            return Vec::new();
        }
        [Dtype::F32, Dtype::F16]
            .into_iter()
            .filter(|other| other.size() != dtype.size())
            .filter(|other| count.checked_mul(other.size() as u64) == Some(self.given))
            .collect()
    }
}

/// A context's rule for byte counts and where its warnings go.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ByteCountRule {
    /// `Q4VK_CONTEXT_STRICT_SIZES`: only exact counts.
    pub strict: bool,
    /// The context's log.
    pub logger: Logger,
}

impl ByteCountRule {
    /// In strict mode, refuses the first count larger than what the call reads
    /// (`InvalidArgument`); smaller ones are left to the call's own checks
    /// (`BUFFER_TOO_SMALL`). Runs before the call does anything.
    pub(crate) fn refuse_inexact(&self, counts: &[ByteCount]) -> Result<()> {
        let Some(c) = counts.iter().find(|c| self.strict && c.given > c.exact) else {
            return Ok(());
        };
        let hint = match c.other_readings().first() {
            Some(other) => format!(
                " ({} bytes is what {} elements would take)",
                c.given,
                other.name()
            ),
            None => String::new(),
        };
        Err(invalid!(
            "{} is {} {unit}; this context (Q4VK_CONTEXT_STRICT_SIZES) takes exactly the {} {unit} the call uses{hint}",
            c.arg,
            c.given,
            c.exact,
            unit = c.unit
        ))
    }

    /// Logs at WARN each count that is exactly what another element type would take.
    /// Runs after the call succeeded.
    pub(crate) fn warn_other_readings(&self, counts: &[ByteCount]) {
        for c in counts {
            let Some((count, dtype)) = c.elements else {
                continue;
            };
            for other in c.other_readings() {
                self.logger.log(
                    LEVEL_WARN,
                    &format!(
                        "{} is {} bytes: exactly {count} {} elements, while the call read {count} {} elements ({} bytes); check the dtype and flags (Q4VK_CONTEXT_STRICT_SIZES refuses counts that are not exact)",
                        c.arg,
                        c.given,
                        other.name(),
                        dtype.name(),
                        c.exact
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::{c_char, c_void, CStr};
    use std::sync::Mutex;

    unsafe extern "C" fn keep(user: *mut c_void, _: u32, message: *const c_char) {
        // SAFETY: the test's Mutex and the callback's NUL-terminated message.
        let (lines, text) = unsafe {
            (
                &*(user as *const Mutex<Vec<String>>),
                CStr::from_ptr(message).to_string_lossy().into_owned(),
            )
        };
        lines.lock().unwrap().push(text);
    }

    /// The rule's verdict on `counts` and, where it lets the call run, its warnings.
    fn judged(strict: bool, counts: &[ByteCount]) -> (Result<()>, Vec<String>) {
        let lines = Mutex::new(Vec::new());
        let logger = Logger::new(Some(keep), &lines as *const _ as *mut c_void, LEVEL_WARN);
        let rule = ByteCountRule { strict, logger };
        let result = rule.refuse_inexact(counts);
        if result.is_ok() {
            rule.warn_other_readings(counts);
        }
        (result, lines.into_inner().unwrap())
    }

    #[test]
    fn another_types_exact_size_is_a_warning() {
        // f32 weights (4 bytes each) described as f16.
        let f32_as_f16 = ByteCount::typed("desc->weight_bytes", 4 * 96, 2 * 96, (96, Dtype::F16));
        let (result, lines) = judged(false, std::slice::from_ref(&f32_as_f16));
        assert!(result.is_ok());
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("desc->weight_bytes") && lines[0].contains("96 f32"));
        assert!(lines[0].contains("96 f16"), "{}", lines[0]);
        // f32 x passed with the f16-x flag: as many bytes as f32 x takes.
        let (_, lines) = judged(
            false,
            &[ByteCount::typed("args->x_bytes", 16, 8, (4, Dtype::F16))],
        );
        assert!(lines[0].contains("4 f32"), "{lines:?}");
    }

    #[test]
    fn other_larger_counts_are_quiet_unless_strict() {
        let counts = [
            ByteCount::typed("desc->weight_bytes", 2 * 96 + 2, 2 * 96, (96, Dtype::F16)),
            ByteCount::bytes("desc->zeros_bytes", 100, 96),
            ByteCount::typed("desc->scales_bytes", 8, 8, (2, Dtype::F32)),
        ];
        let (result, lines) = judged(false, &counts);
        assert!(result.is_ok() && lines.is_empty(), "{lines:?}");
        let (result, lines) = judged(true, &counts);
        let message = result.unwrap_err().to_string();
        assert!(
            message.contains("desc->weight_bytes is 194 bytes"),
            "{message}"
        );
        assert!(lines.is_empty());
        // Exact counts pass in strict mode.
        let exact = [ByteCount::typed(
            "desc->scales_bytes",
            8,
            8,
            (2, Dtype::F32),
        )];
        assert!(judged(true, &exact).0.is_ok());
        // A strict refusal says what the count would fit.
        let swapped = [ByteCount::typed("args->x_bytes", 16, 8, (4, Dtype::F16))];
        let message = judged(true, &swapped).0.unwrap_err().to_string();
        assert!(message.contains("f32 elements would take"), "{message}");
    }
}
