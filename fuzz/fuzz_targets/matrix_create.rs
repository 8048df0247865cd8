//! Fuzzes matrix creation from arbitrary descs and bytes: `q4vk_q4_quantize_size`,
//! `q4vk_q4_quantize` (CPU) and `q4vk_matrix_create` on one Vulkan context (lavapipe on a
//! machine without a GPU) or one CPU context, for every source (FLOAT, Q4, PADDLE) with
//! random field values, buffer lengths and contents. A created matrix must run a GEMV that
//! writes every output (outputs are poisoned with a NaN payload the kernels never
//! produce), and refuse a GEMV whose m (up to 2^32 − 1) the given buffers do not hold,
//! writing nothing; then it is destroyed.
#![no_main]

mod input;

use input::*;
use libfuzzer_sys::fuzz_target;
use q4vk::ffi::context::*;
use q4vk::ffi::gemv::q4vk_gemv;
use q4vk::ffi::matrix::*;
use q4vk::ffi::status::*;
use std::sync::OnceLock;

/// One context for the whole run (creating a device per input would dominate the time).
struct Ctx(*mut q4vk_context);
// SAFETY: a q4vk context may be used from any thread (API contract).
unsafe impl Send for Ctx {}
// SAFETY: as above.
unsafe impl Sync for Ctx {}

fn create(flags: u32) -> Ctx {
    let mut desc = unsafe { std::mem::zeroed::<q4vk_context_desc>() };
    unsafe { q4vk_context_desc_default(&mut desc) };
    desc.flags = flags;
    let mut ctx = std::ptr::null_mut();
    let status = unsafe { q4vk_context_create(&desc, &mut ctx) };
    assert_eq!(status, Q4VK_OK, "no context (flags {flags:#x}) for the fuzzer: {}", last_message());
    Ctx(ctx)
}

/// The Vulkan context, or with `cpu` the CPU one.
fn context(cpu: bool) -> *mut q4vk_context {
    static VULKAN: OnceLock<Ctx> = OnceLock::new();
    static CPU: OnceLock<Ctx> = OnceLock::new();
    match cpu {
        false => VULKAN.get_or_init(|| create(0)).0,
        true => CPU.get_or_init(|| create(Q4VK_CONTEXT_CPU)).0,
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Bytes(data);
    let mut d = unsafe { std::mem::zeroed::<q4vk_matrix_desc>() };
    unsafe { q4vk_matrix_desc_default(&mut d) };
    d.struct_size = input.pick_u32(&[d.struct_size, d.struct_size, d.struct_size, 0, 8, 200]);
    d.source = input.pick_u32(&[0, 1, 2]);
    d.n = input.dim(16).min(if input.u8() < 8 { u64::MAX } else { 300 });
    d.k = input.dim(64).min(if input.u8() < 8 { u64::MAX } else { 600 });
    d.group_size = input.pick_i32(&[-1, 32, 64, 128, 256]);
    d.zero_points = input.pick_u32(&[0, 1]);
    d.dtype = input.pick_u32(&[0, 1, 2]);
    d.transposed = input.pick_u32(&[0, 1]);
    d.arch = input.pick_i32(&[70, 80, 90]);
    d.reserved0 = input.pick_u32(&[0, 0, 0, 1]);
    let elements = (d.n as usize).saturating_mul(d.k as usize);
    let element_size = if d.dtype == 0 { 4 } else { 2 };
    let (mut wq, mut sq, mut zq) = (0usize, 0usize, 0usize);
    let q4_sizes_ok = unsafe { q4vk_q4_quantize_size(&d, &mut wq, &mut sq, &mut zq) } == Q4VK_OK;
    let (w_need, s_need, z_need) = match d.source {
        0 => (elements.saturating_mul(element_size), 0, 0),
        1 => (wq, sq, zq),
        _ => (elements / 2, d.n as usize * element_size * (1 + d.k as usize / 64), 0),
    };
    let weight = { let len = input.len_near(w_need); input.fill(len) };
    let scales = { let len = input.len_near(s_need); input.fill(len) };
    let zeros = { let len = input.len_near(z_need); input.fill(len) };
    d.weight = if input.u8() < 4 { std::ptr::null() } else { weight.as_ptr().cast() };
    d.weight_bytes = weight.len();
    d.scales = if scales.is_empty() { std::ptr::null() } else { scales.as_ptr().cast() };
    d.scales_bytes = scales.len();
    d.zeros = if zeros.is_empty() { std::ptr::null() } else { zeros.as_ptr().cast() };
    d.zeros_bytes = zeros.len();

    // CPU quantization of a FLOAT desc, with poisoned outputs.
    if d.source == 0 && q4_sizes_ok && wq <= 1 << 22 {
        let (wb, sb, zb) = (vec![0xA5u8; wq], vec![0xA5u8; sq], vec![0xA5u8; zq]);
        let (mut w, mut s, mut z) = (wb.clone(), sb.clone(), zb.clone());
        let status = unsafe {
            q4vk_q4_quantize(&d, w.as_mut_ptr(), w.len(), s.as_mut_ptr().cast(), s.len(), z.as_mut_ptr(), z.len())
        };
        check(status, &[(&w, &wb), (&s, &sb), (&z, &zb)]);
    }

    // The CPU context for one input in four (read after the desc, so that the corpus's
    // inputs keep their meaning; an exhausted input picks Vulkan).
    let ctx = context(input.u8() % 4 == 1);
    let mut mat = 0x1usize as *mut q4vk_matrix;
    let status = unsafe { q4vk_matrix_create(ctx, &d, &mut mat) };
    check(status, &[]);
    if status != Q4VK_OK {
        assert_eq!(mat as usize, 1, "out-parameter written on status {status}");
        return;
    }
    let (n, k) = (d.n as usize, d.k as usize);
    let x: Vec<f32> = (0..k).map(|i| ((i * 7919) % 17) as f32 * 0.125 - 1.0).collect();
    const POISON: u32 = 0x7fa5_a5a5;
    let mut y = vec![f32::from_bits(POISON); n];
    let status = unsafe { q4vk_gemv(ctx, mat, x.as_ptr(), k, y.as_mut_ptr(), n, 1) };
    assert_eq!(status, Q4VK_OK, "gemv on a created matrix: {}", last_message());
    assert!(y.iter().all(|v| v.to_bits() != POISON), "gemv left an output unwritten (n {n}, k {k})");
    // An m past what x and y hold, up to 2^32 − 1: refused, nothing written.
    let m = input.pick_u32(&[2, 1 << 16, 1 << 31, u32::MAX]).max(2);
    let mut y = vec![f32::from_bits(POISON); n];
    let status = unsafe { q4vk_gemv(ctx, mat, x.as_ptr(), k, y.as_mut_ptr(), n, m) };
    assert_ne!(status, Q4VK_OK, "gemv with m = {m} on buffers for m = 1");
    check(status, &[]);
    assert!(y.iter().all(|v| v.to_bits() == POISON), "a refused gemv (m = {m}) wrote y");
    unsafe { q4vk_matrix_destroy(mat) };
});
