//! Every conversion from C pointers to Rust references and slices happens here: NULL
//! checks, length checks, overlap checks, versioned-struct reads, handles and C strings.
//! The exports call these (each call with its SAFETY comment) instead of dereferencing raw
//! pointers themselves.

use crate::error::{Error, Result};
use std::ffi::{CStr, CString};
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
    // SAFETY: non-NULL and, by the caller's contract, readable for its leading u32.
    let declared = unsafe { std::ptr::read_unaligned(ptr.cast::<u32>()) } as usize;
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
    // SAFETY: the caller's `struct_size` bytes are readable and `known` is at most that
    // and at most our size; every bit pattern of the fields is valid (VersionedStruct).
    unsafe {
        std::ptr::copy_nonoverlapping(ptr.cast::<u8>(), value.as_mut_ptr().cast::<u8>(), known);
        Ok(value.assume_init())
    }
}

/// Borrows `len` bytes at `ptr` as input. NULL is refused even when `len` is 0, because
/// every input buffer of the API is required.
///
/// # Safety
/// `ptr` must be NULL or valid for reads of `len` bytes for the lifetime `'a`.
pub(crate) unsafe fn in_bytes<'a>(ptr: *const u8, len: usize, arg: &str) -> Result<&'a [u8]> {
    // SAFETY: forwarded from the caller's contract.
    unsafe { in_slice(ptr, len, arg) }
}

/// Borrows `len` elements of `T` at `ptr` as input (NULL refused).
///
/// # Safety
/// `ptr` must be NULL or valid and aligned for reads of `len` elements for the lifetime
/// `'a`, and not written meanwhile.
pub(crate) unsafe fn in_slice<'a, T>(ptr: *const T, len: usize, arg: &str) -> Result<&'a [T]> {
    if ptr.is_null() {
        return Err(Error::NullPointer(format!("{arg} is NULL")));
    }
    // SAFETY: non-NULL; valid for `len` reads by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Borrows `len` bytes at `ptr` as output.
///
/// # Safety
/// `ptr` must be NULL or valid for writes of `len` bytes for the lifetime `'a`, and not
/// aliased by any other live reference (check with [`check_disjoint`] first).
pub(crate) unsafe fn out_bytes<'a>(ptr: *mut u8, len: usize, arg: &str) -> Result<&'a mut [u8]> {
    // SAFETY: forwarded from the caller's contract.
    unsafe { out_slice(ptr, len, arg) }
}

/// Borrows `len` elements of `T` at `ptr` as output (NULL refused).
///
/// # Safety
/// `ptr` must be NULL or valid and aligned for writes of `len` elements for the lifetime
/// `'a`, and not aliased by any other live reference (check with [`check_disjoint`]).
pub(crate) unsafe fn out_slice<'a, T>(ptr: *mut T, len: usize, arg: &str) -> Result<&'a mut [T]> {
    if ptr.is_null() {
        return Err(Error::NullPointer(format!("{arg} is NULL")));
    }
    // SAFETY: non-NULL; valid for `len` writes and unaliased by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
}

/// Borrows the object behind a handle; NULL is `NullPointer` naming `arg`.
///
/// # Safety
/// `ptr` must be NULL or point to a live object that outlives `'a`.
pub(crate) unsafe fn handle<'a, T>(ptr: *const T, arg: &str) -> Result<&'a T> {
    // SAFETY: NULL or live, by the caller's contract.
    unsafe { ptr.as_ref() }.ok_or_else(|| Error::NullPointer(format!("{arg} is NULL")))
}

/// Hands an object to C as an opaque handle, released by [`release`].
pub(crate) fn into_handle<T>(value: T) -> *mut T {
    Box::into_raw(Box::new(value))
}

/// Destroys the object behind a handle made by [`into_handle`]; NULL is ignored.
///
/// # Safety
/// `ptr` must be NULL or a live handle of the same type from [`into_handle`], not used
/// afterwards (and not concurrently).
pub(crate) unsafe fn release<T>(ptr: *mut T) {
    if !ptr.is_null() {
        // SAFETY: made by Box::into_raw in into_handle; the caller gives up the handle.
        drop(unsafe { Box::from_raw(ptr) });
    }
}

/// Copies `count` NUL-terminated strings from a C array of strings; NULL (the array or an
/// entry) is `NullPointer`.
///
/// # Safety
/// `ptr` must be NULL or valid for reads of `count` pointers, each NULL or a NUL-terminated
/// string.
pub(crate) unsafe fn c_strings(
    ptr: *const *const libc::c_char,
    count: usize,
    arg: &str,
) -> Result<Vec<CString>> {
    // SAFETY: forwarded from the caller's contract.
    let entries = unsafe { in_slice(ptr, count, arg) }?;
    let mut out = Vec::with_capacity(count);
    for (i, &entry) in entries.iter().enumerate() {
        require(entry, &format!("{arg}[{i}]"))?;
        // SAFETY: non-NULL and NUL-terminated by the caller's contract.
        out.push(unsafe { CStr::from_ptr(entry) }.to_owned());
    }
    Ok(out)
}

/// Copies the first `len` bytes of `value` to `ptr` (a caller struct of an older, shorter
/// version of `T`; `len` at most `size_of::<T>()`).
///
/// # Safety
/// `ptr` must be NULL or valid for writes of `len` bytes.
pub(crate) unsafe fn write_prefix<T>(ptr: *mut T, value: &T, len: usize, arg: &str) -> Result<()> {
    require(ptr, arg)?;
    let len = len.min(size_of::<T>());
    // SAFETY: `value` is readable for size_of::<T>() ≥ len bytes; `ptr` is writable for
    // len bytes by the caller's contract; a Rust value and a caller buffer do not overlap.
    unsafe {
        std::ptr::copy_nonoverlapping((value as *const T).cast::<u8>(), ptr.cast::<u8>(), len)
    };
    Ok(())
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
    // SAFETY: non-NULL and writable by the caller's contract.
    unsafe { std::ptr::write_unaligned(ptr, value) };
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
        // SAFETY: n + 1 ≤ buf_len bytes, writable by the caller's contract; `text` is ours.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
            *buf.add(n) = 0;
        }
    }
    text.len()
}
