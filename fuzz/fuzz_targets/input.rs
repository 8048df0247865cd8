//! Turns fuzzer bytes into a `q4vk_weight_quantize_desc` and caller buffers, and checks the
//! C API's promises on the outcome: a known status that is never INTERNAL, a message on
//! failure, and caller buffers untouched unless the call succeeded. Every target includes
//! this module and uses part of it.
#![allow(dead_code)]

use q4vk::ffi::status::*;
use q4vk::ffi::weight::*;

/// Reads fields from the fuzzer's bytes; zero once they run out.
pub struct Bytes<'a>(pub &'a [u8]);

impl Bytes<'_> {
    pub fn u8(&mut self) -> u8 {
        let (first, rest) = self.0.split_first().map(|(b, r)| (*b, r)).unwrap_or((0, &[]));
        self.0 = rest;
        first
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    pub fn u64(&mut self) -> u64 {
        self.u32() as u64 | (self.u32() as u64) << 32
    }
    /// Picks from `common` most of the time, else a raw value.
    pub fn pick_i32(&mut self, common: &[i32]) -> i32 {
        let sel = self.u8() as usize;
        if sel < 224 { common[sel % common.len()] } else { self.u32() as i32 }
    }
    pub fn pick_u32(&mut self, common: &[u32]) -> u32 {
        let sel = self.u8() as usize;
        if sel < 224 { common[sel % common.len()] } else { self.u32() }
    }
    /// A dimension: usually small multiples that a kernel accepts, sometimes anything.
    pub fn dim(&mut self, unit: u64) -> u64 {
        match self.u8() % 8 {
            0 => self.u64(),
            1 => self.u8() as u64,
            _ => unit * (1 + self.u8() as u64 % 12),
        }
    }
    /// A buffer length near `needed` (exact, short, long, empty), capped at 4 MiB.
    pub fn len_near(&mut self, needed: usize) -> usize {
        let needed = needed.min(1 << 22);
        match self.u8() % 6 {
            0 => 0,
            1 => needed.saturating_sub(1 + self.u8() as usize),
            2 => needed + self.u8() as usize,
            _ => needed,
        }
    }
    /// `len` bytes of content: the remaining input repeated, or a pattern.
    pub fn fill(&mut self, len: usize) -> Vec<u8> {
        let seed = self.u8();
        if self.0.is_empty() {
            return (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect();
        }
        self.0.iter().copied().cycle().take(len).collect()
    }
}

pub fn desc(input: &mut Bytes) -> q4vk_weight_quantize_desc {
    let mut d = std::mem::MaybeUninit::uninit();
    unsafe { q4vk_weight_quantize_desc_default(d.as_mut_ptr()) };
    let mut d = unsafe { d.assume_init() };
    d.struct_size = input.pick_u32(&[d.struct_size, d.struct_size, d.struct_size, 0, 8, 39, 64]);
    d.algo = input.pick_u32(&[0, 1]);
    d.dtype = input.pick_u32(&[0, 1, 2]);
    d.arch = input.pick_i32(&[70, 75, 80, 86, 89, 90, 100]);
    d.group_size = input.pick_i32(&[-1, 64, 128]);
    d.threads = input.pick_u32(&[0, 1, 2, 3]);
    d.k = input.dim(64);
    d.n = input.dim(16);
    d
}

/// Sizes the library reports for `d`, or zeros when it refuses the desc.
pub fn sizes(d: &q4vk_weight_quantize_desc) -> (usize, usize, usize) {
    let (mut q, mut s, mut p) = (0usize, 0usize, 0usize);
    let ok = unsafe { q4vk_weight_quantize_size(d, &mut q, &mut s) } == Q4VK_OK
        && unsafe { q4vk_weight_plain_size(d, &mut p) } == Q4VK_OK;
    if !ok {
        return (0, 0, 0);
    }
    assert_eq!(q, p, "plain and permuted sizes differ");
    let elements = (d.k as usize).saturating_mul(d.n as usize);
    let weight = elements.saturating_mul(if d.dtype == 0 { 4 } else { 2 });
    (weight, q, s)
}

/// Checks a call's outcome: a known non-internal status, a message on failure, and
/// `outputs` unchanged (vs `before`) unless it succeeded.
pub fn check(status: q4vk_status, outputs: &[(&[u8], &[u8])]) {
    assert!(status <= Q4VK_ERROR_INTERNAL, "unknown status {status}");
    assert_ne!(status, Q4VK_ERROR_INTERNAL, "internal error: {}", last_message());
    if status != Q4VK_OK {
        assert!(!last_message().is_empty(), "status {status} without a message");
        for (after, before) in outputs {
            assert!(after == before, "an output was written on status {status}");
        }
    }
}

pub fn last_message() -> String {
    let len = unsafe { q4vk_last_error_message(std::ptr::null_mut(), 0) };
    let mut buf = vec![0u8; len + 1];
    unsafe { q4vk_last_error_message(buf.as_mut_ptr().cast(), buf.len()) };
    String::from_utf8_lossy(&buf[..len]).into_owned()
}
