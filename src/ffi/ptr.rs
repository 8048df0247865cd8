//! Every conversion from C pointers to Rust references and slices happens here: NULL
//! checks, length checks, overlap checks and versioned-struct reads. Nothing else in q4vk
//! calls `from_raw_parts`.

use crate::error::{Error, Result};
use std::mem::{size_of, MaybeUninit};

/// A `#[repr(C)]` struct that starts with `uint32_t struct_size` and has a v0 size.
///
/// # Safety
/// Implementors must be `#[repr(C)]`, start with a `u32` size field, and be valid for any
/// bit pattern of the fields up to `size_of::<Self>()` that a C caller can write (integers,
/// raw pointers and `Option` of function pointers only).
pub(crate) unsafe trait VersionedStruct: Copy {
    /// Size of the struct in the first published version of the header.
    const V0_SIZE: usize;
    /// Name used in error messages.
    const NAME: &'static str;
}

/// Reads a versioned struct: checks NULL and `struct_size` (smaller than v0 is refused,
/// larger is accepted), and returns a copy of the fields this library knows.
///
/// # Safety
/// `ptr` must be NULL or point to at least `struct_size` readable bytes.
pub(crate) unsafe fn read_struct<T: VersionedStruct>(ptr: *const T, arg: &str) -> Result<T> {
    if ptr.is_null() {
        return Err(Error::NullPointer(format!("{arg} is NULL")));
    }
    let declared = std::ptr::read_unaligned(ptr.cast::<u32>()) as usize;
    if declared < T::V0_SIZE {
        return Err(Error::InvalidArgument(format!(
            "{arg}->struct_size is {declared}, smaller than sizeof({}) = {} (initialize it with {}_default)",
            T::NAME,
            T::V0_SIZE,
            T::NAME
        )));
    }
    let known = declared.min(size_of::<T>());
    // Start from zeroes so fields newer than the caller's header (if `declared` is smaller
    // than our struct) read as zero.
    let mut value = MaybeUninit::<T>::zeroed();
    std::ptr::copy_nonoverlapping(ptr.cast::<u8>(), value.as_mut_ptr().cast::<u8>(), known);
    Ok(value.assume_init())
}

/// Borrows `len` bytes at `ptr` as input. NULL is refused even when `len` is 0, because
/// every input buffer of the API is required.
///
/// # Safety
/// `ptr` must be NULL or valid for reads of `len` bytes for the lifetime `'a`.
pub(crate) unsafe fn in_bytes<'a>(ptr: *const u8, len: usize, arg: &str) -> Result<&'a [u8]> {
    if ptr.is_null() {
        return Err(Error::NullPointer(format!("{arg} is NULL")));
    }
    Ok(std::slice::from_raw_parts(ptr, len))
}

/// Borrows `len` bytes at `ptr` as output.
///
/// # Safety
/// `ptr` must be NULL or valid for writes of `len` bytes for the lifetime `'a`, and not
/// aliased by any other live reference (check with [`check_disjoint`] first).
pub(crate) unsafe fn out_bytes<'a>(ptr: *mut u8, len: usize, arg: &str) -> Result<&'a mut [u8]> {
    if ptr.is_null() {
        return Err(Error::NullPointer(format!("{arg} is NULL")));
    }
    Ok(std::slice::from_raw_parts_mut(ptr, len))
}

/// Checks that no output region overlaps another region (input or output). Each region
/// is `(name, address, bytes)`; NULL or empty regions are ignored.
pub(crate) fn check_disjoint(
    outputs: &[(&str, usize, usize)],
    inputs: &[(&str, usize, usize)],
) -> Result<()> {
    let overlaps = |a: usize, alen: usize, b: usize, blen: usize| {
        a != 0
            && b != 0
            && alen > 0
            && blen > 0
            && a < b.saturating_add(blen)
            && b < a.saturating_add(alen)
    };
    for (i, &(oname, oaddr, olen)) in outputs.iter().enumerate() {
        for &(name, addr, len) in outputs[i + 1..].iter().chain(inputs) {
            if overlaps(oaddr, olen, addr, len) {
                return Err(Error::InvalidArgument(format!("{oname} overlaps {name}")));
            }
        }
    }
    Ok(())
}

/// Checks that a caller buffer holds at least `needed` bytes.
pub(crate) fn check_size(arg: &str, given: usize, needed: usize) -> Result<()> {
    if given < needed {
        return Err(Error::BufferTooSmall(format!(
            "{arg} is {given} bytes, {needed} needed"
        )));
    }
    Ok(())
}

/// Writes an out-parameter after checking it is not NULL.
///
/// # Safety
/// `ptr` must be NULL or valid for a write of `T`.
pub(crate) unsafe fn write_out<T>(ptr: *mut T, value: T, arg: &str) -> Result<()> {
    if ptr.is_null() {
        return Err(Error::NullPointer(format!("{arg} is NULL")));
    }
    std::ptr::write_unaligned(ptr, value);
    Ok(())
}

/// Fails with `NullPointer` when `ptr` is NULL (for out-parameters checked before any work,
/// so that nothing is written when one of several is NULL).
pub(crate) fn require<T>(ptr: *const T, arg: &str) -> Result<()> {
    if ptr.is_null() {
        return Err(Error::NullPointer(format!("{arg} is NULL")));
    }
    Ok(())
}

/// Copies `text` NUL-terminated into a caller buffer (truncated to fit) and returns its
/// full length without the NUL. `buf` may be NULL when `buf_len` is 0.
///
/// # Safety
/// `buf` must be NULL or valid for writes of `buf_len` bytes.
pub(crate) unsafe fn copy_c_string(text: &str, buf: *mut libc::c_char, buf_len: usize) -> usize {
    if !buf.is_null() && buf_len > 0 {
        let n = text.len().min(buf_len - 1);
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
        *buf.add(n) = 0;
    }
    text.len()
}
