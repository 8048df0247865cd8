//! Host allocations whose size comes from the caller: they fail with
//! `Q4VK_ERROR_OUT_OF_HOST_MEMORY` instead of aborting the host process. Unit tests can make
//! the n-th such allocation on a thread fail (`fail_after`) to prove every path recovers.

use crate::error::{Error, Result};

/// A vector of `len` default values, or `OutOfHostMemory` naming `what` when the
/// allocation fails.
pub fn filled<T: Clone + Default>(len: usize, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    if injected_failure() || v.try_reserve_exact(len).is_err() {
        return Err(Error::OutOfHostMemory(format!(
            "allocating {len} × {} bytes for {what} failed",
            std::mem::size_of::<T>()
        )));
    }
    v.resize(len, T::default());
    Ok(v)
}

/// Collects an exact-size iterator into a vector allocated with [`filled`].
pub fn collect<T: Clone + Default>(
    items: impl ExactSizeIterator<Item = T>,
    what: &str,
) -> Result<Vec<T>> {
    let mut v = filled(0, what)?;
    if v.try_reserve_exact(items.len()).is_err() {
        return Err(Error::OutOfHostMemory(format!(
            "allocating {} × {} bytes for {what} failed",
            items.len(),
            std::mem::size_of::<T>()
        )));
    }
    v.extend(items);
    Ok(v)
}

#[cfg(test)]
thread_local! {
    static COUNTDOWN: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// Test hook: the allocation after `n` more successful ones on this thread fails (and
/// every later one, until reset with `None`).
#[cfg(test)]
pub fn fail_after(n: Option<usize>) {
    COUNTDOWN.with(|c| c.set(n));
}

#[cfg(test)]
fn injected_failure() -> bool {
    COUNTDOWN.with(|c| match c.get() {
        Some(0) => true,
        Some(n) => {
            c.set(Some(n - 1));
            false
        }
        None => false,
    })
}

#[cfg(not(test))]
#[inline(always)]
fn injected_failure() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::status::*;
    use crate::ffi::weight::*;

    #[test]
    fn huge_allocation_fails_cleanly() {
        let e = filled::<u64>(usize::MAX / 4, "a test buffer").unwrap_err();
        assert!(matches!(e, Error::OutOfHostMemory(_)), "{e}");
    }

    /// Every caller-sized allocation of the Paddle functions is fallible: failing the
    /// 1st, 2nd, ... one gives OUT_OF_HOST_MEMORY with nothing written, until enough
    /// succeed and the call does.
    #[test]
    fn paddle_functions_recover_from_each_allocation_failure() {
        let (k, n) = (128u64, 64u64);
        let weight: Vec<u8> = (0..k * n)
            .flat_map(|i| half::f16::from_f32((i % 97) as f32 * 0.01 - 0.4).to_le_bytes())
            .collect();
        for group_size in [-1, 64] {
            let mut d = std::mem::MaybeUninit::uninit();
            // SAFETY: a writable desc, then fully initialized by the call.
            let mut d = unsafe {
                q4vk_weight_quantize_desc_default(d.as_mut_ptr());
                d.assume_init()
            };
            (d.k, d.n, d.group_size) = (k, n, group_size);
            let (mut qb, mut sb) = (0, 0);
            assert_eq!(
                // SAFETY: valid desc and out-parameters.
                unsafe { q4vk_weight_quantize_size(&d, &mut qb, &mut sb) },
                Q4VK_OK
            );
            let mut failures = 0;
            for countdown in 0.. {
                let (mut q, mut s) = (vec![0x5Au8; qb], vec![0x5Au8; sb]);
                fail_after(Some(countdown));
                // SAFETY: every buffer is valid for the bytes passed with it.
                let status = unsafe {
                    q4vk_weight_quantize(
                        &d,
                        weight.as_ptr().cast(),
                        weight.len(),
                        q.as_mut_ptr().cast(),
                        qb,
                        s.as_mut_ptr().cast(),
                        sb,
                    )
                };
                fail_after(None);
                if status == Q4VK_OK {
                    break;
                }
                assert_eq!(status, Q4VK_ERROR_OUT_OF_HOST_MEMORY);
                assert!(q.iter().chain(&s).all(|&b| b == 0x5A), "written on failure");
                failures += 1;
            }
            assert!(
                failures >= 3,
                "only {failures} fallible allocations were exercised"
            );
            let mut out = vec![0u8; (k * n * 2) as usize];
            let (q, s) = (vec![0x11u8; qb], vec![0x22u8; sb]);
            fail_after(Some(0));
            // SAFETY: every buffer is valid for the bytes passed with it.
            let status = unsafe {
                q4vk_weight_dequantize(
                    &d,
                    q.as_ptr().cast(),
                    qb,
                    s.as_ptr().cast(),
                    sb,
                    out.as_mut_ptr().cast(),
                    out.len(),
                )
            };
            fail_after(None);
            assert_eq!(status, Q4VK_ERROR_OUT_OF_HOST_MEMORY);
            assert!(out.iter().all(|&b| b == 0));
        }
    }
}
