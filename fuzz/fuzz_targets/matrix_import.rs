//! Fuzzes imported checkpoints: `q4vk_matrix_dequantize` of GGUF Q4_0/Q4_1/Q4_K, GPTQ and
//! AWQ descs (and sometimes FLOAT/Q4/PADDLE) with random shapes, group sizes, formats,
//! buffer lengths and contents, and `g_idx` that is trivial, a permutation of groups, or
//! random. Refusals must leave the poisoned output untouched; a success must write every
//! weight. A GPTQ desc with `g_idx` must dequantize like the same desc without it when
//! `g_idx` is `i / group_size`. Each successful desc is then packed with
//! `q4vk_matrix_pack_extended` (refused as UNSUPPORTED, or every byte written, and the
//! packed device layout, decoded on the CPU, gives exactly the dequantized weights; the
//! extended export's binding sizes and the v0 size query agree with it), and goes to
//! `q4vk_matrix_create` on one Vulkan context: it is created or refused as UNSUPPORTED, and
//! a created matrix's GEMV matches the dequantized weights.
#![no_main]

mod input;

use input::*;
use libfuzzer_sys::fuzz_target;
use q4vk::ffi::context::*;
use q4vk::ffi::gemv::q4vk_gemv;
use q4vk::ffi::import::q4vk_matrix_dequantize;
use q4vk::ffi::kernel::*;
use q4vk::ffi::matrix::*;
use q4vk::ffi::status::*;
use std::sync::OnceLock;

/// One context for the whole run.
struct Ctx(*mut q4vk_context);
// SAFETY: a q4vk context may be used from any thread (API contract).
unsafe impl Send for Ctx {}
// SAFETY: as above.
unsafe impl Sync for Ctx {}

fn context() -> *mut q4vk_context {
    static CTX: OnceLock<Ctx> = OnceLock::new();
    CTX.get_or_init(|| {
        let mut desc = unsafe { std::mem::zeroed::<q4vk_context_desc>() };
        unsafe { q4vk_context_desc_default(&mut desc) };
        let mut ctx = std::ptr::null_mut();
        let status = unsafe { q4vk_context_create(&desc, &mut ctx) };
        assert_eq!(status, Q4VK_OK, "no Vulkan device for the fuzzer: {}", last_message());
        Ctx(ctx)
    })
    .0
}

const POISON: u32 = 0x7fa5_a5a5;

/// Dequantizes `d` into a poisoned buffer of `n·k` floats (a short one when that is
/// huge); returns the status and the buffer, after checking the API's promises.
fn dequantize(d: &q4vk_matrix_desc) -> (q4vk_status, Vec<f32>) {
    let count = (d.n as usize).saturating_mul(d.k as usize);
    let len = if count <= 1 << 20 { count } else { 16 };
    let mut out = vec![f32::from_bits(POISON); len];
    let status = unsafe { q4vk_matrix_dequantize(d, out.as_mut_ptr(), 4 * len) };
    check(status, &[]);
    if status == Q4VK_OK {
        // Weights are never NaN (finite codes, scales and offsets); they may overflow to
        // ±Inf only with f32 or bf16 scales near f32's range, as on the GPU, and for the
        // GGUF block types beyond 4-bit codes (8 and up: MXFP4's E8M0 reaches 2^127).
        let may_overflow = d.dtype != 1 || d.source >= 8;
        assert!(
            out.iter().all(|v| !v.is_nan()) && (may_overflow || out.iter().all(|v| v.is_finite())),
            "a weight unwritten or NaN (source {}, dtype {})",
            d.source,
            d.dtype
        );
    } else {
        assert!(out.iter().all(|v| v.to_bits() == POISON), "output written on status {status}");
    }
    (status, out)
}

/// The weights `[n][k]` (inputs in order) that the packed device layout stands for: code u
/// of column j (nibble j of its row's chunks), scale s and zero point z or offset o of its
/// group, input `k_order[j]`; `s·(u − z)` (z = 8 when symmetric) or `s·u + o`, in f32.
fn unpack(d: &q4vk_matrix_desc, packed: &[Vec<u8>; 5]) -> Vec<f32> {
    let (n, k) = (d.n as usize, d.k as usize);
    let gs = match (d.source, d.group_size) {
        (3..=5, _) => 32,
        (_, g) if g > 0 => g as usize,
        _ => k,
    };
    let groups = k.div_ceil(gs);
    // FLOAT sources are quantized with f16 scales; Q4_K stores d·sc as f32; the others
    // keep f16 scales and widen bf16/f32 ones to f32.
    let f32_scales = match d.source {
        0 | 3 | 4 => false,
        5 => true,
        _ => d.dtype != 1,
    };
    let [w, s, z, o, order] = packed;
    let word = |b: &[u8], i: usize| u32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap());
    let row_bytes = 16 * k.div_ceil(32);
    let mut out = vec![0f32; n * k];
    for r in 0..n {
        for j in 0..k {
            let u = (w[r * row_bytes + j / 2] >> (4 * (j % 2))) & 0x0f;
            let g = r * groups + j / gs;
            let scale = if f32_scales {
                f32::from_bits(word(s, g))
            } else {
                half::f16::from_le_bytes([s[2 * g], s[2 * g + 1]]).to_f32()
            };
            let v = if !o.is_empty() {
                scale * u as f32 + f32::from_bits(word(o, g))
            } else {
                let zero = if z.is_empty() { 8 } else { z[g] };
                scale * (u as f32 - zero as f32)
            };
            let input = if order.is_empty() { j } else { word(order, j) as usize };
            out[r * k + input] = v;
        }
    }
    out
}

/// Packs `d` (dequantized to `w`) with the extended functions and checks what they promise.
fn check_pack(d: &q4vk_matrix_desc, w: &[f32]) {
    let mut sizes = [usize::MAX; 5];
    let [a, b, c, o, k] = &mut sizes;
    let status = unsafe { q4vk_matrix_pack_extended_size(d, a, b, c, o, k) };
    if status != Q4VK_OK {
        assert_eq!(status, Q4VK_ERROR_UNSUPPORTED, "size query refused a desc dequantize took: {}", last_message());
        assert_eq!(sizes, [usize::MAX; 5], "sizes written on status {status}");
        return;
    }
    // The v0 size query: the same three sizes, or UNSUPPORTED for offsets / column order.
    let mut v0 = [usize::MAX; 3];
    let [a, b, c] = &mut v0;
    let status = unsafe { q4vk_matrix_pack_size(d, a, b, c) };
    if sizes[3] == 0 && sizes[4] == 0 {
        assert_eq!((status, v0.as_slice()), (Q4VK_OK, &sizes[..3]), "{}", last_message());
    } else {
        assert_eq!((status, v0), (Q4VK_ERROR_UNSUPPORTED, [usize::MAX; 3]));
    }
    if sizes.iter().sum::<usize>() > 64 << 20 {
        return;
    }
    // The extended export: its binding sizes are the pack's (or the shape is too large).
    let mut e = unsafe { std::mem::zeroed::<q4vk_kernel_export_desc>() };
    unsafe { q4vk_kernel_export_desc_default(&mut e) };
    e.export_flags = Q4VK_KERNEL_EXPORT_EXTENDED;
    let mut info = unsafe { std::mem::zeroed::<q4vk_kernel_info>() };
    info.struct_size = std::mem::size_of::<q4vk_kernel_info>() as u32;
    let status = unsafe { q4vk_kernel_export(std::ptr::null(), d, &e, &mut info, std::ptr::null_mut(), 0) };
    if status == Q4VK_OK {
        let bytes = [0, 1, 2, 5, 6].map(|i| info.bindings[i].bytes as usize);
        assert_eq!(bytes, sizes, "export and pack disagree");
    } else {
        assert_eq!(status, Q4VK_ERROR_UNSUPPORTED, "{}", last_message());
    }
    let mut packed = sizes.map(|len| vec![0xA5u8; len]);
    let ptr = |v: &mut Vec<u8>| if v.is_empty() { std::ptr::null_mut() } else { v.as_mut_ptr().cast() };
    let [pw, ps, pz, po, pk] = &mut packed;
    let status = unsafe {
        q4vk_matrix_pack_extended(
            d, ptr(pw), pw.len(), ptr(ps), ps.len(), ptr(pz), pz.len(), ptr(po), po.len(), ptr(pk), pk.len(),
        )
    };
    assert_eq!(status, Q4VK_OK, "pack refused what its size query took: {}", last_message());
    let from_layout = unpack(d, &packed);
    assert!(
        from_layout.iter().zip(w).all(|(a, b)| a.to_bits() == b.to_bits()),
        "the packed layout stands for other weights (source {})",
        d.source
    );
}

fuzz_target!(|data: &[u8]| {
    let mut input = Bytes(data);
    let mut d = unsafe { std::mem::zeroed::<q4vk_matrix_desc>() };
    unsafe { q4vk_matrix_desc_default(&mut d) };
    d.struct_size = input.pick_u32(&[d.struct_size, d.struct_size, d.struct_size, 96, 8]);
    d.source = input.pick_u32(&[3, 4, 5, 6, 6, 7, 7, 0, 1, 2]);
    d.n = input.dim(8).min(if input.u8() < 8 { u64::MAX } else { 256 });
    d.k = input.dim(32).min(if input.u8() < 8 { u64::MAX } else { 2048 });
    d.group_size = input.pick_i32(&[-1, 32, 64, 128, 256, 16, 1024]);
    d.dtype = input.pick_u32(&[1, 1, 1, 0, 2]);
    d.gptq_format = input.pick_u32(&[1, 1, 2, 0]);
    d.zero_points = input.pick_u32(&[0, 1]);
    let (n, k) = (d.n as usize, d.k as usize);
    let groups = match d.group_size {
        g if g > 0 => k.div_ceil(g as usize),
        _ => 1,
    };
    let scale_size = if d.dtype == 0 { 4 } else { 2 };
    let (w_need, s_need, z_need) = match d.source {
        3 => (n.saturating_mul(k / 32).saturating_mul(18), 0, 0),
        4 => (n.saturating_mul(k / 32).saturating_mul(20), 0, 0),
        5 => (n.saturating_mul(k / 256).saturating_mul(144), 0, 0),
        6 | 7 => (
            n.saturating_mul(k) / 2,
            n.saturating_mul(groups).saturating_mul(scale_size),
            n.saturating_mul(groups) / 2,
        ),
        _ => (n.saturating_mul(k).saturating_mul(scale_size), 0, 0),
    };
    let weight = { let len = input.len_near(w_need); input.fill(len) };
    let scales = { let len = input.len_near(s_need); input.fill(len) };
    let zeros = { let len = input.len_near(z_need); input.fill(len) };
    let gs = if d.group_size > 0 { d.group_size as usize } else { k.max(1) };
    let trivial: Vec<i32> = (0..k.min(1 << 16)).map(|i| (i / gs) as i32).collect();
    let g_idx: Vec<i32> = match input.u8() % 4 {
        0 => Vec::new(),
        1 => trivial.clone(),
        2 => {
            // Groups of the trivial g_idx, shuffled by the input (act-order-like).
            let mut v = trivial.clone();
            for i in (1..v.len()).rev() {
                let j = (input.u32() as usize) % (i + 1);
                v.swap(i, j);
            }
            v
        }
        _ => input.fill(4 * k.min(1 << 16)).chunks_exact(4).map(|b| i32::from_le_bytes(b.try_into().unwrap())).collect(),
    };
    d.weight = if input.u8() < 4 { std::ptr::null() } else { weight.as_ptr().cast() };
    d.weight_bytes = weight.len();
    d.scales = if scales.is_empty() { std::ptr::null() } else { scales.as_ptr().cast() };
    d.scales_bytes = scales.len();
    d.zeros = if zeros.is_empty() { std::ptr::null() } else { zeros.as_ptr().cast() };
    d.zeros_bytes = zeros.len();
    if !g_idx.is_empty() && (d.source == 6 || input.u8() < 16) {
        d.g_idx = g_idx.as_ptr().cast();
        d.g_idx_bytes = 4 * g_idx.len() - if input.u8() < 16 { 4 } else { 0 };
    }

    let (status, w) = dequantize(&d);
    if status != Q4VK_OK {
        return;
    }
    if d.source == 6 && !d.g_idx.is_null() && g_idx == trivial && d.g_idx_bytes == 4 * k {
        let mut plain = d;
        plain.g_idx = std::ptr::null();
        plain.g_idx_bytes = 0;
        let (s, w2) = dequantize(&plain);
        assert_eq!(s, Q4VK_OK, "{}", last_message());
        assert!(w.iter().zip(&w2).all(|(a, b)| a.to_bits() == b.to_bits()), "trivial g_idx changed the weights");
    }

    if w.len() == n * k {
        check_pack(&d, &w);
    }
    if w.iter().any(|v| !v.is_finite()) {
        return; // no finite reference for the GEMV
    }
    let ctx = context();
    let mut mat = 0x1usize as *mut q4vk_matrix;
    let status = unsafe { q4vk_matrix_create(ctx, &d, &mut mat) };
    if status != Q4VK_OK {
        assert!(
            matches!(status, Q4VK_ERROR_UNSUPPORTED | Q4VK_ERROR_OUT_OF_DEVICE_MEMORY),
            "create refused a desc dequantize took: status {status}: {}",
            last_message()
        );
        assert_eq!(mat as usize, 1, "out-parameter written on status {status}");
        return;
    }
    let x: Vec<f32> = (0..k).map(|i| ((i * 7919) % 17) as f32 * 0.125 - 1.0).collect();
    let mut y = vec![f32::from_bits(POISON); n];
    let status = unsafe { q4vk_gemv(ctx, mat, x.as_ptr(), k, y.as_mut_ptr(), n, 1) };
    assert_eq!(status, Q4VK_OK, "gemv on a created matrix: {}", last_message());
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for row in 0..n {
        let want: f64 = (0..k).map(|i| w[row * k + i] as f64 * x[i] as f64).sum();
        let scale: f64 = (0..k).map(|i| (w[row * k + i] as f64 * x[i] as f64).abs()).sum();
        diff = diff.max((y[row] as f64 - want).abs());
        norm = norm.max(scale);
    }
    // f32 accumulation overflows only where Σ|w·x| nears f32's range (huge f32/bf16 scales).
    if norm < f32::MAX as f64 / 2.0 {
        assert!(
            diff <= 1e-5 * norm.max(f64::MIN_POSITIVE) + 1e-30,
            "gemv differs from the dequantized weights: {diff} (scale {norm})"
        );
    }
    unsafe { q4vk_matrix_destroy(mat) };
});
