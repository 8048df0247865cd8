//! The kernel export of imported checkpoints: every GGUF (Q4_0, Q4_1 and Q4_K: per-group
//! offsets), GPTQ (act-order too: a column order) and AWQ golden case, exported with
//! `Q4VK_KERNEL_EXPORT_EXTENDED` and packed with `q4vk_matrix_pack_extended`, runs on a raw
//! Vulkan host (validation layer on, zero messages) that uses only what the export and the
//! pack return, and matches the f64 GEMV of `q4vk_matrix_dequantize`'s weights within 1e-5
//! (m = 1 and 8, portable and subgroup kernels, with and without a context; m = 33, the
//! GEMM); the v0 export
//! and pack run the sources that need neither offsets nor a column order, and stay what they
//! were for v0 callers; bad input gets a clear status and nothing is written.

mod export_host;
mod gpu_support;
mod import_support;

use export_host::*;
use gpu_support::{last_error, Gpu, Rng};
use import_support::*;
use q4vk::cpu::reference::relative_error;
use q4vk::ffi::context::q4vk_context;
use q4vk::ffi::gemv::{Q4VK_GEMV_F16_ACTIVATIONS, Q4VK_GEMV_F16_OUTPUT};
use q4vk::ffi::kernel::*;
use q4vk::ffi::matrix::*;
use q4vk::ffi::status::*;

const TOL: f64 = 1e-5;
/// Output poison of the pack tests.
const POISON: u8 = 0xA5;

/// Every golden case of the three imported formats.
fn all_cases() -> Vec<Case> {
    let mut cases = gguf_cases();
    cases.extend(packed_cases("gptq"));
    cases.extend(packed_cases("awq"));
    cases
}

/// Whether a case needs the extended layout: offsets (GGUF Q4_1/Q4_K) or a column order
/// (GPTQ act-order).
fn needs_extended(c: &Case) -> bool {
    matches!(c.source, Q4VK_SOURCE_GGUF_Q4_1 | Q4VK_SOURCE_GGUF_Q4_K) || c.name.contains("_act_")
}

fn export_desc(m: u32, extended: bool) -> q4vk_kernel_export_desc {
    let mut e = unsafe { std::mem::zeroed::<q4vk_kernel_export_desc>() };
    unsafe { q4vk_kernel_export_desc_default(&mut e) };
    e.m = m;
    if extended {
        e.export_flags = Q4VK_KERNEL_EXPORT_EXTENDED;
    }
    e
}

/// A zeroed info with its struct_size set.
fn new_info() -> q4vk_kernel_info {
    let mut info = unsafe { std::mem::zeroed::<q4vk_kernel_info>() };
    info.struct_size = std::mem::size_of::<q4vk_kernel_info>() as u32;
    info
}

/// The five outputs of `q4vk_matrix_pack_extended` (weights, scales, zeros, offsets,
/// column order): sizes from `q4vk_matrix_pack_extended_size`, equal to the `bytes` of the
/// export's bindings 0, 1, 2, 5, 6; packed twice over different poisons with equal results,
/// so every byte is written.
fn pack_extended(d: &q4vk_matrix_desc, info: &q4vk_kernel_info) -> [Vec<u8>; 5] {
    let mut sizes = [usize::MAX; 5];
    let [a, b, c, o, k] = &mut sizes;
    let s = unsafe { q4vk_matrix_pack_extended_size(d, a, b, c, o, k) };
    assert_eq!(s, Q4VK_OK, "pack size: {}", last_error());
    let want: Vec<u64> = [0, 1, 2, 5, 6]
        .iter()
        .map(|&i| info.bindings[i].bytes)
        .collect();
    assert_eq!(sizes.map(|v| v as u64).to_vec(), want);
    let packed = [0x00u8, 0xFF].map(|poison| {
        let mut out = sizes.map(|n| vec![poison; n]);
        let ptr = |v: &mut Vec<u8>| {
            if v.is_empty() {
                std::ptr::null_mut()
            } else {
                v.as_mut_ptr().cast()
            }
        };
        let [w, s, z, o, k] = &mut out;
        let st = unsafe {
            q4vk_matrix_pack_extended(
                d,
                ptr(w),
                w.len(),
                ptr(s),
                s.len(),
                ptr(z),
                z.len(),
                ptr(o),
                o.len(),
                ptr(k),
                k.len(),
            )
        };
        assert_eq!(st, Q4VK_OK, "pack: {}", last_error());
        out
    });
    let [first, second] = packed;
    assert_eq!(first, second, "some byte of the pack was not written");
    first
}

/// Runs the exported kernel on the host with the packed buffers by role (weights, scales,
/// zeros, offsets, column order), x (`m` rows of `k`) and, for the kernel with a bias, `bias`
/// (n values); returns y (`m` rows of `n`), checking every element was written.
fn run(
    host: &Host,
    info: &q4vk_kernel_info,
    spirv: &[u32],
    (packed, bias): (&[Vec<u8>], &[f32]),
    x: &[f32],
    (n, k): (usize, usize),
) -> Vec<f32> {
    let x_bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let y_elems = x.len() / k * n;
    let y = run_bytes(
        host,
        info,
        spirv,
        (packed, bias),
        &x_bytes,
        (y_elems, false),
    );
    assert_eq!(y.len() * 4, info.bindings[4].bytes as usize);
    y
}

/// [`run`] on x given as bytes (f32 or f16, as the export was made), y of `y_elems`
/// elements stored as f16 (`y_f16`, binding 4 rounded up to whole words) or f32; returns
/// y's elements as f32, checking every one was written.
fn run_bytes(
    host: &Host,
    info: &q4vk_kernel_info,
    spirv: &[u32],
    (packed, bias): (&[Vec<u8>], &[f32]),
    x_bytes: &[u8],
    (y_elems, y_f16): (usize, bool),
) -> Vec<f32> {
    let bias_bytes: Vec<u8> = bias.iter().flat_map(|v| v.to_le_bytes()).collect();
    let y_len = info.bindings[4].bytes as usize;
    // NaN in f32, two NaNs in f16.
    let y_poison = vec![0xFFu8; y_len];
    let empty = Vec::new();
    let data = |role: u32| -> &[u8] {
        match role {
            0 => &packed[0],
            1 => &packed[1],
            2 => &packed[2],
            3 => x_bytes,
            4 => &y_poison,
            5 => packed.get(3).unwrap_or(&empty),
            6 => packed.get(4).unwrap_or(&empty),
            Q4VK_BINDING_BIAS => &bias_bytes,
            other => panic!("unknown binding role {other}"),
        }
    };
    let count = info.binding_count as usize;
    // A binding of 0 bytes is not read; Vulkan still needs a valid buffer: the scales.
    let bufs: Vec<_> = info.bindings[..count]
        .iter()
        .map(|b| {
            let role = if b.bytes == 0 { 1 } else { b.role };
            host.buffer(data(role))
        })
        .collect();
    let binds: Vec<_> = bufs.iter().map(|&(b, _, size)| (b, size)).collect();
    host.run(info, spirv, &binds);
    let out = host.read(bufs[4].1, y_len);
    for (b, mem, _) in bufs {
        unsafe {
            host.device.destroy_buffer(b, None);
            host.device.free_memory(mem, None);
        }
    }
    let y = y_values(&out, y_elems, y_f16);
    assert_eq!(y.len(), y_elems);
    if let Some(i) = y.iter().position(|v| !v.is_finite()) {
        panic!("y[{i}] is {}: not written, or out of range", y[i]);
    }
    y
}

/// The reference weights of a case: `q4vk_matrix_dequantize`, whose SHA-256 must match the
/// manifest's (bit-exact with the formats' reference implementations).
fn weights(c: &Case) -> Vec<f32> {
    let (status, w) = dequantize(&c.desc());
    assert_eq!(status, Q4VK_OK, "{}: {}", c.name, last_error());
    assert_eq!(sha256_hex(&f32_bytes(&w)), c.dequant_sha256, "{}", c.name);
    w
}

#[test]
fn extended_export_runs_every_imported_case() {
    let host = Host::new();
    let gpu = Gpu::new(false);
    let mut rng = Rng(14);
    let (mut runs, mut with_offsets, mut with_order) = (0, 0, 0);
    for (i, c) in all_cases().iter().enumerate() {
        let d = c.desc();
        let w = weights(c);
        let (n, k) = (c.n as usize, c.k as usize);
        for (mi, m) in [1usize, 8, 33].into_iter().enumerate() {
            // Portable and subgroup kernels without a context in turn (each case meets
            // both), and every third case's m = 1 through the context's choice.
            let mut e = export_desc(m as u32, true);
            let ctx = if i % 3 == 0 && m == 1 {
                e.variant = Q4VK_KERNEL_AUTO;
                gpu.ctx as *const q4vk_context
            } else {
                if (i + mi) % 2 == 1 {
                    e.variant = Q4VK_KERNEL_SUBGROUP;
                    e.subgroup_size = host.subgroup_size;
                }
                std::ptr::null()
            };
            let (info, spirv) = export(ctx, &d, &e);
            let offsets = info.bindings[5].bytes > 0;
            let order = info.bindings[6].bytes > 0;
            assert_eq!(offsets || order, needs_extended(c), "{}", c.name);
            with_offsets += offsets as usize;
            with_order += order as usize;
            let packed = pack_extended(&d, &info);
            let x = rng.vec(m * k);
            let y = run(&host, &info, &spirv, (&packed, &[]), &x, (n, k));
            let err = relative_error(&y, &reference(&w, &x, n, k, m));
            assert!(err < TOL, "{} m {m}: rel err {err:e}", c.name);
            runs += 1;
        }
    }
    // 30 cases × 3; 6 GGUF with offsets (5 Q4_1, 1 Q4_K) and 3 act-order GPTQ, 3 times each.
    assert_eq!((runs, with_offsets, with_order), (90, 18, 9));
    drop(host);
    assert_quiet();
    gpu.assert_quiet();
}

/// The extended kernel with a bias (`Q4VK_KERNEL_EXPORT_BIAS`): binding 7 holds n f32
/// values added to every row of y, on the GEMV (m = 1, 8; portable and subgroup) and the
/// GEMM (m = 33), for cases with offsets, a column order and neither.
#[test]
fn extended_export_with_a_bias_adds_it() {
    let host = Host::new();
    let mut rng = Rng(15);
    let mut runs = 0;
    for (i, c) in all_cases().iter().enumerate().filter(|(i, _)| i % 4 == 0) {
        let d = c.desc();
        let w = weights(c);
        let (n, k) = (c.n as usize, c.k as usize);
        for (mi, m) in [1usize, 8, 33].into_iter().enumerate() {
            let mut e = export_desc(m as u32, true);
            e.export_flags |= Q4VK_KERNEL_EXPORT_BIAS;
            if (i + mi) % 2 == 1 {
                e.variant = Q4VK_KERNEL_SUBGROUP;
                e.subgroup_size = host.subgroup_size;
            }
            let (info, spirv) = export(std::ptr::null(), &d, &e);
            assert_eq!(info.binding_count, 8, "{}", c.name);
            let b = &info.bindings[7];
            assert_eq!(
                (b.binding, b.role, b.bytes),
                (7, Q4VK_BINDING_BIAS, 4 * n as u64)
            );
            let packed = pack_extended(&d, &info);
            let x = rng.vec(m * k);
            let bias = rng.vec(n);
            let y = run(&host, &info, &spirv, (&packed, &bias), &x, (n, k));
            let want: Vec<f64> = reference(&w, &x, n, k, m)
                .iter()
                .enumerate()
                .map(|(at, v)| v + bias[at % n] as f64)
                .collect();
            let err = relative_error(&y, &want);
            assert!(err < TOL, "{} m {m}: rel err {err:e}", c.name);
            runs += 1;
        }
    }
    assert!(runs >= 18, "{runs} runs");
    drop(host);
    assert_quiet();
}

/// `Q4VK_GEMV_F16_OUTPUT` with the extended kernel: y stored as f16 (two elements per word,
/// rows of an odd n sharing words across workgroups), with f16 x too (ncnn's fp16 storage)
/// and with a bias, on the GEMV (m = 1, 5; portable and subgroup) and the GEMM (m = 33);
/// within f16's rounding of the f64 reference. The v0 kernel refuses it.
#[test]
fn extended_export_stores_f16_y() {
    let host = Host::new();
    let mut rng = Rng(17);
    let mut runs = 0;
    for (i, c) in all_cases().iter().enumerate().filter(|(i, _)| i % 3 == 0) {
        let d = c.desc();
        let w = weights(c);
        let (n, k) = (c.n as usize, c.k as usize);
        for (mi, m) in [1usize, 5, 33].into_iter().enumerate() {
            // Both variants meet both x types across the cases.
            let x_f16 = mi != 1;
            let bias_term = (i + mi) % 3 == 0;
            let mut e = export_desc(m as u32, true);
            e.flags = Q4VK_GEMV_F16_OUTPUT | if x_f16 { Q4VK_GEMV_F16_ACTIVATIONS } else { 0 };
            if bias_term {
                e.export_flags |= Q4VK_KERNEL_EXPORT_BIAS;
            }
            if (i + mi) % 2 == 1 {
                e.variant = Q4VK_KERNEL_SUBGROUP;
                e.subgroup_size = host.subgroup_size;
            }
            let (info, spirv) = export(std::ptr::null(), &d, &e);
            let y_elems = (m * n) as u64;
            assert_eq!(
                info.bindings[4].bytes,
                (2 * y_elems).div_ceil(4) * 4,
                "{}",
                c.name
            );
            let packed = pack_extended(&d, &info);
            // x scaled by a power of two (exact) so that y stays well within f16's range
            // (the wide-range cases reach beyond it at x of magnitude 1).
            let x = rng.vec(m * k);
            let largest = reference(&w, &x, n, k, m)
                .iter()
                .fold(0f64, |a, v| a.max(v.abs()));
            let scale = 2f32.powi(-((largest / 1024.0).log2().ceil().max(0.0) as i32));
            let x: Vec<f32> = x
                .into_iter()
                .map(|v| v * scale)
                .map(|v| match x_f16 {
                    true => half::f16::from_f32(v).to_f32(),
                    false => v,
                })
                .collect();
            let x_bytes: Vec<u8> = match x_f16 {
                true => x
                    .iter()
                    .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
                    .collect(),
                false => x.iter().flat_map(|v| v.to_le_bytes()).collect(),
            };
            let bias = if bias_term { rng.vec(n) } else { Vec::new() };
            let y = run_bytes(
                &host,
                &info,
                &spirv,
                (&packed, &bias),
                &x_bytes,
                (y_elems as usize, true),
            );
            let want: Vec<f64> = reference(&w, &x, n, k, m)
                .iter()
                .enumerate()
                .map(|(at, v)| v + bias.get(at % n).map_or(0.0, |&b| b as f64))
                .collect();
            // Within f16's rounding (half an ulp: 2^-11 relative) of the f64 values over the
            // vector, and each element within an ulp of its value plus the f32 kernel's
            // error (TOL of the largest, as the f32 tests allow over the vector).
            let err = relative_error(&y, &want);
            assert!(err < 6e-4, "{} m {m}: rel err {err:e}", c.name);
            let largest = want.iter().fold(0f64, |a, v| a.max(v.abs()));
            for (at, (&got, &want)) in y.iter().zip(&want).enumerate() {
                let bound = want.abs() / 1024.0 + TOL * largest;
                assert!(
                    (got as f64 - want).abs() <= bound,
                    "{} m {m} y[{at}]: {got} against {want}",
                    c.name
                );
            }
            runs += 1;
        }
    }
    assert!(runs >= 9, "{runs} runs");
    // The v0 kernel has no f16 y.
    let d = all_cases()[0].desc();
    let mut e = export_desc(1, false);
    e.flags = Q4VK_GEMV_F16_OUTPUT;
    let mut info = new_info();
    let s =
        unsafe { q4vk_kernel_export(std::ptr::null(), &d, &e, &mut info, std::ptr::null_mut(), 0) };
    assert_eq!(s, Q4VK_ERROR_INVALID_ARGUMENT);
    assert!(last_error().contains("extended"), "{}", last_error());
    drop(host);
    assert_quiet();
}

/// Sources without offsets or column order run on the v0 kernel with the v0 pack, whose
/// bytes are the extended pack's first three; the extended kernel with the same bytes gives
/// the same y.
#[test]
fn v0_export_runs_imported_cases_without_extras() {
    let host = Host::new();
    let mut rng = Rng(41);
    let mut runs = 0;
    for c in all_cases().iter().filter(|c| !needs_extended(c)) {
        let d = c.desc();
        let w = weights(c);
        let (n, k, m) = (c.n as usize, c.k as usize, 3);
        let (info, spirv) = export(std::ptr::null(), &d, &export_desc(m as u32, false));
        let (mut wb, mut sb, mut zb) = (0, 0, 0);
        let s = unsafe { q4vk_matrix_pack_size(&d, &mut wb, &mut sb, &mut zb) };
        assert_eq!(s, Q4VK_OK, "{}: {}", c.name, last_error());
        let mut v0 = [wb, sb, zb].map(|len| vec![POISON; len]);
        let [pw, ps, pz] = &mut v0;
        let zp = if zb > 0 {
            pz.as_mut_ptr().cast()
        } else {
            std::ptr::null_mut()
        };
        let s = unsafe {
            q4vk_matrix_pack(
                &d,
                pw.as_mut_ptr().cast(),
                wb,
                ps.as_mut_ptr().cast(),
                sb,
                zp,
                zb,
            )
        };
        assert_eq!(s, Q4VK_OK, "{}: {}", c.name, last_error());
        let (ext_info, ext_spirv) = export(std::ptr::null(), &d, &export_desc(m as u32, true));
        let ext = pack_extended(&d, &ext_info);
        assert_eq!(&ext[..3], &v0[..], "{}", c.name);
        assert!(ext[3].is_empty() && ext[4].is_empty(), "{}", c.name);
        let x = rng.vec(m * k);
        let y = run(&host, &info, &spirv, (&v0, &[]), &x, (n, k));
        let err = relative_error(&y, &reference(&w, &x, n, k, m));
        assert!(err < TOL, "{} v0: rel err {err:e}", c.name);
        let y_ext = run(&host, &ext_info, &ext_spirv, (&ext, &[]), &x, (n, k));
        assert_eq!(y, y_ext, "{}: the two kernels differ", c.name);
        runs += 1;
    }
    // 5 Q4_0 + 9 GPTQ + 7 AWQ.
    assert_eq!(runs, 21);
    drop(host);
    assert_quiet();
}

/// A v0 caller (v0 `struct_size`, whatever lies past it) gets exactly the export of a
/// desc with `export_flags` 0: the same info and SPIR-V bytes.
#[test]
fn v0_callers_get_the_v0_export() {
    let cases = gguf_cases();
    let q4_0 = &cases[0];
    let d = q4_0.desc();
    let e = export_desc(4, false);
    let (info, spirv) = export(std::ptr::null(), &d, &e);
    let mut old = export_desc(4, true);
    old.struct_size = std::mem::offset_of!(q4vk_kernel_export_desc, export_flags) as u32;
    old.reserved1 = 7;
    let (old_info, old_spirv) = export(std::ptr::null(), &d, &old);
    assert_eq!(old_spirv, spirv);
    assert_eq!(format!("{old_info:?}"), format!("{info:?}"));
    // The extended kernel is another module; the v0 one is the build without -DEXTENDED.
    let (ext, ext_spirv) = export(std::ptr::null(), &d, &export_desc(4, true));
    assert_ne!(ext_spirv, spirv);
    assert_eq!(ext.push_constants, info.push_constants);
    // Q4_K through a v0 desc: refused, info untouched.
    let q4k = cases
        .iter()
        .find(|c| c.source == Q4VK_SOURCE_GGUF_Q4_K)
        .unwrap();
    let mut info = new_info();
    info.binding_count = 77;
    let s = unsafe {
        q4vk_kernel_export(
            std::ptr::null(),
            &q4k.desc(),
            &old,
            &mut info,
            std::ptr::null_mut(),
            0,
        )
    };
    assert_eq!(s, Q4VK_ERROR_UNSUPPORTED);
    assert!(
        last_error().contains("Q4VK_KERNEL_EXPORT_EXTENDED"),
        "{}",
        last_error()
    );
    assert_eq!(info.binding_count, 77);
}

/// Calls `q4vk_matrix_pack_extended` into poisoned outputs of `sizes` (None: NULL with 0
/// bytes); returns the status and whether every output kept its poison.
fn pack_into(d: &q4vk_matrix_desc, sizes: [Option<usize>; 5]) -> (q4vk_status, bool) {
    let mut out = sizes.map(|s| s.map(|n| vec![POISON; n]));
    let arg = |v: &mut Option<Vec<u8>>| match v {
        Some(v) => (v.as_mut_ptr().cast(), v.len()),
        None => (std::ptr::null_mut(), 0),
    };
    let [w, s, z, o, k] = &mut out;
    let ((w, wl), (s, sl), (z, zl), (o, ol), (k, kl)) = (arg(w), arg(s), arg(z), arg(o), arg(k));
    let st = unsafe { q4vk_matrix_pack_extended(d, w, wl, s, sl, z, zl, o, ol, k, kl) };
    let untouched = out.iter().flatten().flatten().all(|&b| b == POISON);
    (st, untouched)
}

/// `q4vk_matrix_pack_extended_size` of `d`.
fn extended_sizes(d: &q4vk_matrix_desc) -> (q4vk_status, [usize; 5]) {
    let mut sizes = [0usize; 5];
    let [a, b, c, o, k] = &mut sizes;
    let s = unsafe { q4vk_matrix_pack_extended_size(d, a, b, c, o, k) };
    (s, sizes)
}

/// The export, the size query and the pack of a desc: each status (the pack into outputs
/// of `sizes`), and that neither the info nor any output was written.
fn all_three(d: &q4vk_matrix_desc, sizes: [usize; 5]) -> [q4vk_status; 3] {
    let mut info = new_info();
    info.binding_count = 77;
    let e = export_desc(1, true);
    let s1 =
        unsafe { q4vk_kernel_export(std::ptr::null(), d, &e, &mut info, std::ptr::null_mut(), 0) };
    assert_eq!(info.binding_count, 77, "export wrote its info on error");
    let mut out = [9usize; 5];
    let [a, b, c, o, k] = &mut out;
    let s2 = unsafe { q4vk_matrix_pack_extended_size(d, a, b, c, o, k) };
    assert_eq!(out, [9; 5], "the size query wrote on error");
    let (s3, untouched) = pack_into(d, sizes.map(Some));
    assert!(untouched, "the pack wrote on error");
    [s1, s2, s3]
}

#[test]
fn extended_export_and_pack_refuse_bad_input() {
    let gguf = gguf_cases();
    let gptq = packed_cases("gptq");
    let q4_1 = gguf.iter().find(|c| c.name == "q4_1_mid_llm").unwrap();
    let act = gptq
        .iter()
        .find(|c| c.name == "gptq_v1_asym_g32_act_96x384")
        .unwrap();

    // Unknown export_flags bits, reserved1.
    let d = q4_1.desc();
    let mut info = new_info();
    // (The bias is the extended kernel's: alone it is refused too.)
    for (flags, reserved1) in [
        (0x8, 0),
        (Q4VK_KERNEL_EXPORT_BIAS, 0),
        (Q4VK_KERNEL_EXPORT_EXTENDED, 1),
    ] {
        let mut e = export_desc(1, true);
        e.export_flags = flags;
        e.reserved1 = reserved1;
        let s = unsafe {
            q4vk_kernel_export(std::ptr::null(), &d, &e, &mut info, std::ptr::null_mut(), 0)
        };
        assert_eq!(s, Q4VK_ERROR_INVALID_ARGUMENT, "{}", last_error());
        assert_eq!(info.binding_count, 0);
    }

    // The v0 pack of sources that need the extended layout: UNSUPPORTED, nothing written.
    for c in [q4_1, act] {
        let d = c.desc();
        let (mut a, mut b, mut z) = (3usize, 3usize, 3usize);
        let s = unsafe { q4vk_matrix_pack_size(&d, &mut a, &mut b, &mut z) };
        assert_eq!(s, Q4VK_ERROR_UNSUPPORTED, "{}", c.name);
        assert_eq!((a, b, z), (3, 3, 3));
        let mut w = vec![POISON; 1 << 20];
        let mut sc = vec![POISON; 1 << 20];
        let mut zs = vec![POISON; 1 << 20];
        let s = unsafe {
            q4vk_matrix_pack(
                &d,
                w.as_mut_ptr().cast(),
                w.len(),
                sc.as_mut_ptr().cast(),
                sc.len(),
                zs.as_mut_ptr().cast(),
                zs.len(),
            )
        };
        assert_eq!(s, Q4VK_ERROR_UNSUPPORTED, "{}", c.name);
        assert!(
            last_error().contains("q4vk_matrix_pack_extended"),
            "{}",
            last_error()
        );
        assert!([w, sc, zs].iter().flatten().all(|&b| b == POISON));
    }

    // Outputs: each one byte short, or NULL where needed: nothing written.
    for c in [q4_1, act] {
        let d = c.desc();
        let (s, sizes) = extended_sizes(&d);
        assert_eq!(s, Q4VK_OK);
        assert!(sizes[3] > 0 || sizes[4] > 0, "{}", c.name);
        for i in (0..5).filter(|&i| sizes[i] > 0) {
            let mut short = sizes.map(Some);
            short[i] = Some(sizes[i] - 1);
            assert_eq!(
                pack_into(&d, short),
                (Q4VK_ERROR_BUFFER_TOO_SMALL, true),
                "{} output {i}",
                c.name
            );
            let mut null = sizes.map(Some);
            null[i] = None;
            assert_eq!(
                pack_into(&d, null),
                (Q4VK_ERROR_NULL_POINTER, true),
                "{} output {i}",
                c.name
            );
        }
        assert_eq!(pack_into(&d, sizes.map(Some)).0, Q4VK_OK);
        // A NULL size out-parameter: the others are not written either.
        let mut out = [5usize; 4];
        let [a, b, z, o] = &mut out;
        let s = unsafe { q4vk_matrix_pack_extended_size(&d, a, b, z, o, std::ptr::null_mut()) };
        assert_eq!(s, Q4VK_ERROR_NULL_POINTER);
        assert_eq!(out, [5; 4]);
    }

    // Overlapping outputs, and an output over an input.
    let d = q4_1.desc();
    let (_, sizes) = extended_sizes(&d);
    let mut buf = vec![POISON; sizes.iter().sum::<usize>() + 64];
    let base = buf.as_mut_ptr();
    let p = |at: usize| unsafe { base.add(at).cast::<std::ffi::c_void>() };
    let n = std::ptr::null_mut();
    let s = unsafe {
        q4vk_matrix_pack_extended(
            &d,
            p(0),
            sizes[0],
            p(sizes[0]),
            sizes[1],
            n,
            0,
            p(8),
            sizes[3],
            n,
            0,
        )
    };
    assert_eq!(s, Q4VK_ERROR_INVALID_ARGUMENT, "{}", last_error());
    assert!(buf.iter().all(|&b| b == POISON));
    let mut over = q4_1.weight.clone();
    let mut d2 = d;
    d2.weight = over.as_ptr().cast();
    let out_w = over.as_mut_ptr().cast();
    let mut rest = [sizes[1], sizes[3]].map(|len| vec![POISON; len]);
    let [rs, ro] = &mut rest;
    let s = unsafe {
        q4vk_matrix_pack_extended(
            &d2,
            out_w,
            sizes[0],
            rs.as_mut_ptr().cast(),
            rs.len(),
            n,
            0,
            ro.as_mut_ptr().cast(),
            ro.len(),
            n,
            0,
        )
    };
    assert_eq!(s, Q4VK_ERROR_INVALID_ARGUMENT, "{}", last_error());
    assert!(last_error().contains("overlap"), "{}", last_error());
    assert_eq!(over, q4_1.weight);

    // g_idx of the wrong length, out of range, or with unequal groups; the desc's other
    // fields: k not a multiple of the GGUF block, zeros for GGUF, a group size the device
    // layout does not index.
    let (_, act_sizes) = extended_sizes(&act.desc());
    let k = act.k as usize;
    let mut g_short = act.desc();
    g_short.g_idx_bytes = 4 * k - 4;
    assert_eq!(
        all_three(&g_short, act_sizes),
        [Q4VK_ERROR_BUFFER_TOO_SMALL; 3]
    );
    let mut bad = act.g_idx.clone();
    bad[4 * (k - 1)..].copy_from_slice(&1000i32.to_le_bytes());
    let mut g_range = act.desc();
    g_range.g_idx = bad.as_ptr().cast();
    assert_eq!(
        all_three(&g_range, act_sizes),
        [Q4VK_ERROR_INVALID_ARGUMENT; 3]
    );
    assert!(last_error().contains("g_idx"), "{}", last_error());
    let mut unequal = act.g_idx.clone();
    let first = unequal[..4].to_vec();
    let other = (0..k)
        .map(|i| unequal[4 * i..4 * i + 4].to_vec())
        .find(|g| *g != first)
        .unwrap();
    unequal[..4].copy_from_slice(&other);
    let mut g_unequal = act.desc();
    g_unequal.g_idx = unequal.as_ptr().cast();
    assert_eq!(
        all_three(&g_unequal, act_sizes),
        [Q4VK_ERROR_INVALID_ARGUMENT; 3]
    );
    let q4k = gguf
        .iter()
        .find(|c| c.source == Q4VK_SOURCE_GGUF_Q4_K)
        .unwrap();
    let (_, q4k_sizes) = extended_sizes(&q4k.desc());
    let mut partial = q4k.desc();
    partial.k += 32;
    assert_eq!(
        all_three(&partial, q4k_sizes),
        [Q4VK_ERROR_INVALID_ARGUMENT; 3]
    );
    assert!(last_error().contains("multiple of 256"), "{}", last_error());
    let mut zeros = q4k.desc();
    let z = [0u8; 64];
    (zeros.zeros, zeros.zeros_bytes) = (z.as_ptr().cast(), z.len());
    assert_eq!(
        all_three(&zeros, q4k_sizes),
        [Q4VK_ERROR_INVALID_ARGUMENT; 3]
    );
    let mut g16 = act.desc();
    (g16.g_idx, g16.g_idx_bytes, g16.group_size) = (std::ptr::null(), 0, 16);
    assert_eq!(all_three(&g16, act_sizes), [Q4VK_ERROR_UNSUPPORTED; 3]);
    assert!(last_error().contains("group size 16"), "{}", last_error());

    // A NaN minimum in a Q4_1 block: NON_FINITE, nothing written.
    let mut nan = q4_1.weight.clone();
    nan[2..4].copy_from_slice(&half::f16::NAN.to_le_bytes());
    let mut d_nan = q4_1.desc();
    d_nan.weight = nan.as_ptr().cast();
    let (_, q4_1_sizes) = extended_sizes(&d_nan);
    assert_eq!(
        pack_into(&d_nan, q4_1_sizes.map(Some)),
        (Q4VK_ERROR_NON_FINITE, true)
    );
}
