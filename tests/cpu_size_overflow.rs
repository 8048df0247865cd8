//! Products of caller-given sizes that overflow `size_t` on the CPU context: a matrix with
//! k = 2^33 and m = 2^31 rows of x make m·k = 2^64, which a wrapping product turns into 0
//! elements of x, so a length check would pass and the kernel would read far past x. The
//! calls must refuse with `INVALID_ARGUMENT` naming the product and write nothing.
//!
//! The matrix's source codes and the caller's y are anonymous mappings reserved without
//! backing (`MAP_NORESERVE`): reading the untouched codes costs no memory, and a refused
//! call never touches y. The CPU matrix's own copy of the codes takes 4 GiB for the
//! duration of the test.

mod gpu_support;
use gpu_support::*;
use q4vk::ffi::context::*;
use q4vk::ffi::gemv::*;
use q4vk::ffi::matrix::*;
use q4vk::ffi::status::*;

/// An anonymous private mapping of `len` bytes without reserved swap, unmapped on drop.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(len: usize) -> Mapping {
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        assert_ne!(ptr, libc::MAP_FAILED, "mmap of {len} bytes failed");
        Mapping {
            ptr: ptr.cast(),
            len,
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

const K: u64 = 1 << 33;
const M: u32 = 1 << 31;
const POISON: u32 = 0x7fa5_a5a5;

#[test]
#[cfg(target_pointer_width = "64")]
fn m_times_k_past_size_t_is_refused_on_the_cpu_context() {
    let ctx = Gpu::with(false, |d| d.flags = Q4VK_CONTEXT_CPU).expect("a CPU context");
    // One row of k = 2^33 zero codes, one f16 scale (per channel).
    let codes = Mapping::new((K / 2) as usize);
    let scale = half::f16::from_f32(0.5).to_bits();
    let mut d = unsafe { std::mem::zeroed::<q4vk_matrix_desc>() };
    unsafe { q4vk_matrix_desc_default(&mut d) };
    (d.source, d.n, d.k, d.group_size) = (Q4VK_SOURCE_Q4, 1, K, -1);
    (d.weight, d.weight_bytes) = (codes.ptr.cast_const().cast(), codes.len);
    (d.scales, d.scales_bytes) = ((&scale as *const u16).cast(), 2);
    let mut mat = std::ptr::null_mut();
    let status = unsafe { q4vk_matrix_create(ctx.ctx, &d, &mut mat) };
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    drop(codes);

    // x: 64 floats, honestly described; a wrapped m·k (0) would call that enough.
    let x = vec![1.0f32; 64];
    // y: m·n = 2^31 floats reserved; only its first and last pages are poisoned and read.
    let y = Mapping::new(4 * M as usize);
    let floats = y.len / 4;
    let page = 1024;
    let y_floats = unsafe { std::slice::from_raw_parts_mut(y.ptr.cast::<f32>(), floats) };
    for i in (0..page).chain(floats - page..floats) {
        y_floats[i] = f32::from_bits(POISON);
    }
    let untouched = |y: &[f32]| {
        (0..page)
            .chain(floats - page..floats)
            .all(|i| y[i].to_bits() == POISON)
    };

    let status = unsafe { q4vk_gemv(ctx.ctx, mat, x.as_ptr(), x.len(), y.ptr.cast(), floats, M) };
    let message = last_error();
    assert_eq!(status, Q4VK_ERROR_INVALID_ARGUMENT, "{message}");
    assert!(message.contains("m * k"), "{message}");
    assert!(untouched(y_floats), "q4vk_gemv wrote y on refusal");

    let mut args = unsafe { std::mem::zeroed::<q4vk_gemv_host_args>() };
    unsafe { q4vk_gemv_host_args_default(&mut args) };
    (args.m, args.x, args.x_bytes) = (M, x.as_ptr().cast(), 4 * x.len());
    (args.y, args.y_len) = (y.ptr.cast(), floats);
    let status = unsafe { q4vk_gemv_host(ctx.ctx, mat, &args) };
    let message = last_error();
    assert_eq!(status, Q4VK_ERROR_INVALID_ARGUMENT, "{message}");
    assert!(message.contains("m * k"), "{message}");
    assert!(untouched(y_floats), "q4vk_gemv_host wrote y on refusal");

    // f16 x: m·k values fit no better.
    args.flags = Q4VK_GEMV_F16_ACTIVATIONS;
    let status = unsafe { q4vk_gemv_host(ctx.ctx, mat, &args) };
    assert_eq!(status, Q4VK_ERROR_INVALID_ARGUMENT, "{}", last_error());
    assert!(untouched(y_floats), "q4vk_gemv_host wrote y on refusal");
    unsafe { q4vk_matrix_destroy(mat) };
}
