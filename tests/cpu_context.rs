//! The CPU context (`Q4VK_CONTEXT_CPU`): the GEMV correctness sweep of the GPU tests (same
//! shapes, group sizes, zero points, f16/f32 scales, m = 1..8) against the f64 reference,
//! every matrix source (every imported GGUF/GPTQ/AWQ golden case too: per-group offsets and
//! act-order), thread caps, the Vulkan-only calls refused, `q4vk_gemv_host`'s epilogue, and
//! bad input refused with nothing written.

mod gpu_support;
mod import_support;
use gpu_support::*;
use import_support::imported_gemv_sweep;
use q4vk::ffi::context::*;
use q4vk::ffi::gemv::*;
use q4vk::ffi::kernel::*;
use q4vk::ffi::matrix::*;
use q4vk::ffi::status::*;
use q4vk::ffi::weight::*;
use q4vk::layout::convert::paddle_to_q4;
use q4vk::quant::paddle::{PaddleParams, PaddleScheme};
use q4vk::quant::q4::{Q4Data, Q4Shape, ScaleType};
use std::borrow::Cow;

const TOL: f64 = 1e-5;

fn cpu(threads: u32) -> Gpu {
    Gpu::with(false, |d| {
        d.flags = Q4VK_CONTEXT_CPU;
        d.cpu_threads = threads;
    })
    .expect("a CPU context")
}

/// A CPU context that refuses byte counts other than exact (`Q4VK_CONTEXT_STRICT_SIZES`):
/// the tests that give exact counts run on it too, which checks that the sizes the rule
/// computes for each source are the ones the data path reads.
fn strict_cpu(threads: u32) -> Gpu {
    Gpu::with(false, |d| {
        d.flags = Q4VK_CONTEXT_CPU | Q4VK_CONTEXT_STRICT_SIZES;
        d.cpu_threads = threads;
    })
    .expect("a strict CPU context")
}

fn name(ctx: *mut q4vk_context) -> String {
    let mut buf = vec![0 as std::ffi::c_char; 128];
    unsafe { q4vk_context_device_name(ctx, buf.as_mut_ptr(), buf.len()) };
    unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

fn sweep(threads: u32, seed: u64) {
    // One thread on a strict context: every Q4 desc and call below gives exact counts.
    let ctx = if threads == 1 {
        strict_cpu(1)
    } else {
        cpu(threads)
    };
    let mut rng = Rng(seed);
    let mut cases = 0;
    for &(n, k) in &[
        (1usize, 32usize),
        (7, 33),
        (33, 96),
        (64, 257),
        (129, 1000),
        (255, 2048),
        (17, 4096),
        (3, 8191),
        (5, 16384),
    ] {
        for &group in &[-1i32, 32, 64, 128, 256] {
            for zeros in [false, true] {
                let f32_scales = (n + k) % 2 == 0 && group == 64;
                let data = random_q4(&mut rng, n, k, group, zeros, f32_scales);
                let mat = upload_q4(&ctx, &data);
                for m in 1..=8usize {
                    let x = rng.vec(m * k);
                    let err = check_gemv(&ctx, mat, &data, &x, m);
                    assert!(
                        err < TOL,
                        "n {n} k {k} g {group} zeros {zeros} m {m}: rel err {err:e}"
                    );
                    cases += 1;
                }
                unsafe { q4vk_matrix_destroy(mat) };
            }
        }
    }
    assert_eq!(cases, 9 * 5 * 2 * 8);
}

#[test]
fn gemm_sizes_match_reference() {
    // m > 8 through the C API, as on the GPU (the same cases as tests/gpu_gemm.rs).
    run_cases(&cpu(0), &mut Rng(29), &GEMM_CASES);
}

#[test]
fn gemv_matches_reference_all_cores() {
    sweep(0, 7);
}

#[test]
fn gemv_matches_reference_one_thread() {
    sweep(1, 11);
}

#[test]
fn f32_scales_with_zero_points_and_many_rows() {
    // Large enough that every core gets rows; f32 scales with zero points.
    let ctx = cpu(0);
    let mut rng = Rng(3);
    for (n, k, group) in [(1031, 1100, 128), (700, 2048, -1)] {
        let data = random_q4(&mut rng, n, k, group, true, true);
        let mat = upload_q4(&ctx, &data);
        for m in [1usize, 3, 8] {
            let x = rng.vec(m * k);
            let err = check_gemv(&ctx, mat, &data, &x, m);
            assert!(err < TOL, "n {n} k {k} m {m}: {err:e}");
        }
        unsafe { q4vk_matrix_destroy(mat) };
    }
}

/// Every GGUF (Q4_0; Q4_1 and Q4_K: per-group offsets), GPTQ (act-order too: x gathered
/// through the column order) and AWQ golden case, with all cores and with one thread.
#[test]
fn imported_sources_match_reference() {
    for (threads, seed) in [(0, 13), (1, 17)] {
        // One thread on a strict context: the golden cases give exact counts.
        let ctx = if threads == 1 {
            strict_cpu(1)
        } else {
            cpu(threads)
        };
        let mut rng = Rng(seed);
        imported_gemv_sweep(ctx.ctx, &[1, 8], |len| rng.vec(len));
    }
}

#[test]
fn device_name_says_cpu_and_threads() {
    let one = cpu(1);
    let n1 = name(one.ctx);
    assert!(
        n1.starts_with("CPU (") && n1.ends_with(", 1 thread)"),
        "{n1}"
    );
    let all = cpu(0);
    let cores = std::thread::available_parallelism().unwrap().get();
    let na = name(all.ctx);
    assert!(
        na.ends_with(&format!(
            " {cores} thread{})",
            if cores == 1 { "" } else { "s" }
        )),
        "{na}"
    );
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx512f") {
        assert!(na.contains("AVX-512"), "{na}");
    } else if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
        assert!(na.contains("AVX2+FMA"), "{na}");
    }
    #[cfg(target_arch = "aarch64")]
    assert!(na.contains("NEON"), "{na}");
    // Larger than the core count: clamped.
    let many = cpu(100_000);
    assert_eq!(name(many.ctx), na);
}

fn float_bytes(v: &[f32], dtype: u32) -> Vec<u8> {
    v.iter()
        .flat_map(|&v| match dtype {
            Q4VK_DTYPE_F32 => v.to_le_bytes().to_vec(),
            Q4VK_DTYPE_F16 => half::f16::from_f32(v).to_le_bytes().to_vec(),
            _ => half::bf16::from_f32(v).to_le_bytes().to_vec(),
        })
        .collect()
}

#[test]
fn float_source_computes_what_q4_quantize_writes() {
    let ctx = strict_cpu(0); // exact counts only
    let mut rng = Rng(21);
    for (dtype, transposed, group, zeros) in [
        (Q4VK_DTYPE_F32, 0u32, 128i32, 0u32),
        (Q4VK_DTYPE_F16, 1, 32, 1),
        (Q4VK_DTYPE_BF16, 0, -1, 1),
        (Q4VK_DTYPE_F16, 0, 256, 0),
    ] {
        let (n, k) = (37usize, 333usize);
        let bytes = float_bytes(&rng.vec(n * k), dtype);
        let mut d = unsafe { std::mem::zeroed::<q4vk_matrix_desc>() };
        unsafe { q4vk_matrix_desc_default(&mut d) };
        (d.n, d.k, d.dtype, d.group_size, d.zero_points, d.transposed) =
            (n as u64, k as u64, dtype, group, zeros, transposed);
        (d.weight, d.weight_bytes) = (bytes.as_ptr().cast(), bytes.len());
        let (mut wb, mut sb, mut zb) = (0usize, 0usize, 0usize);
        assert_eq!(
            unsafe { q4vk_q4_quantize_size(&d, &mut wb, &mut sb, &mut zb) },
            Q4VK_OK
        );
        let (mut qw, mut qs, mut qz) = (vec![0u8; wb], vec![0u8; sb], vec![0u8; zb]);
        let status = unsafe {
            q4vk_q4_quantize(
                &d,
                qw.as_mut_ptr(),
                wb,
                qs.as_mut_ptr().cast(),
                sb,
                qz.as_mut_ptr(),
                zb,
            )
        };
        assert_eq!(status, Q4VK_OK, "{}", last_error());
        let data = Q4Data {
            shape: Q4Shape::new(n as u64, k as u64, group, zeros).unwrap(),
            weight: Cow::Owned(qw),
            scale_type: ScaleType::F16,
            scales: Cow::Owned(qs),
            zeros: Cow::Owned(qz),
        };
        let mut mat = std::ptr::null_mut();
        assert_eq!(
            unsafe { q4vk_matrix_create(ctx.ctx, &d, &mut mat) },
            Q4VK_OK,
            "{}",
            last_error()
        );
        for m in [1usize, 2, 5] {
            let x = rng.vec(m * k);
            let err = check_gemv(&ctx, mat, &data, &x, m);
            assert!(err < TOL, "dtype {dtype} m {m}: {err:e}");
        }
        unsafe { q4vk_matrix_destroy(mat) };
    }
}

#[test]
fn paddle_source_computes_its_codes_and_scales() {
    let ctx = strict_cpu(0); // exact counts only
    let mut rng = Rng(33);
    for (arch, group, dtype) in [
        (80, 64, Q4VK_DTYPE_F16),
        (70, -1, Q4VK_DTYPE_BF16),
        (90, 128, Q4VK_DTYPE_F32),
    ] {
        let (k, n) = (256usize, 48usize);
        let mut pd = unsafe { std::mem::zeroed::<q4vk_weight_quantize_desc>() };
        unsafe { q4vk_weight_quantize_desc_default(&mut pd) };
        (pd.dtype, pd.arch, pd.group_size, pd.k, pd.n) = (dtype, arch, group, k as u64, n as u64);
        let w = float_bytes(&rng.vec(k * n), dtype);
        let (mut qb, mut sb) = (0usize, 0usize);
        assert_eq!(
            unsafe { q4vk_weight_quantize_size(&pd, &mut qb, &mut sb) },
            Q4VK_OK
        );
        let (mut q, mut s) = (vec![0i8; qb], vec![0u8; sb]);
        let status = unsafe {
            q4vk_weight_quantize(
                &pd,
                w.as_ptr().cast(),
                w.len(),
                q.as_mut_ptr(),
                qb,
                s.as_mut_ptr().cast(),
                sb,
            )
        };
        assert_eq!(status, Q4VK_OK);
        let mut md = unsafe { std::mem::zeroed::<q4vk_matrix_desc>() };
        unsafe { q4vk_matrix_desc_default(&mut md) };
        md.source = Q4VK_SOURCE_PADDLE;
        (md.n, md.k, md.group_size, md.dtype, md.arch) = (n as u64, k as u64, group, dtype, arch);
        (md.weight, md.weight_bytes, md.scales, md.scales_bytes) =
            (q.as_ptr().cast(), qb, s.as_ptr().cast(), sb);
        let mut mat = std::ptr::null_mut();
        assert_eq!(
            unsafe { q4vk_matrix_create(ctx.ctx, &md, &mut mat) },
            Q4VK_OK,
            "{}",
            last_error()
        );
        // The reference reads the same bytes through the library's converter.
        let scheme = PaddleScheme::new(PaddleParams {
            algo: 1,
            dtype,
            arch,
            group_size: group,
            k: k as u64,
            n: n as u64,
        })
        .unwrap();
        let qbytes: Vec<u8> = q.iter().map(|&b| b as u8).collect();
        let data = paddle_to_q4(&scheme, &qbytes, &s, 1).unwrap();
        for m in [1usize, 4, 8] {
            let x = rng.vec(m * k);
            let err = check_gemv(&ctx, mat, &data, &x, m);
            assert!(err < TOL, "arch {arch} m {m}: {err:e}");
        }
        unsafe { q4vk_matrix_destroy(mat) };
    }
}

#[test]
fn vulkan_only_calls_are_unsupported() {
    let ctx = cpu(0);
    let mut rng = Rng(5);
    let data = random_q4(&mut rng, 8, 64, 32, false, false);
    let mat = upload_q4(&ctx, &data);
    let mut args = unsafe { std::mem::zeroed::<q4vk_gemv_args>() };
    unsafe { q4vk_gemv_args_default(&mut args) };
    let fake_cmd = 0x1000usize as *mut std::ffi::c_void;
    assert_eq!(
        unsafe { q4vk_cmd_gemv(ctx.ctx, mat, fake_cmd, &args) },
        Q4VK_ERROR_UNSUPPORTED
    );
    assert!(last_error().contains("CPU"), "{}", last_error());
    let mut workspace = 77u64;
    assert_eq!(
        unsafe { q4vk_gemv_workspace_size(ctx.ctx, mat, 1, 0, &mut workspace) },
        Q4VK_ERROR_UNSUPPORTED
    );
    assert_eq!(workspace, 77);
    assert_eq!(
        unsafe { q4vk_gemv_workspace_key(ctx.ctx, mat, 1, 0, &mut workspace) },
        Q4VK_ERROR_UNSUPPORTED
    );
    assert_eq!(workspace, 77);
    let mut bytes = 77usize;
    assert_eq!(
        unsafe { q4vk_context_pipeline_cache_size(ctx.ctx, &mut bytes) },
        Q4VK_ERROR_UNSUPPORTED
    );
    assert!(last_error().contains("runs on the CPU"), "{}", last_error());
    assert_eq!(bytes, 77);
    let mut blob = [0u8; 16];
    let mut written = 5usize;
    assert_eq!(
        unsafe {
            q4vk_context_pipeline_cache_data(
                ctx.ctx,
                blob.as_mut_ptr().cast(),
                blob.len(),
                &mut written,
            )
        },
        Q4VK_ERROR_UNSUPPORTED
    );
    assert_eq!(written, 5);
    let mut md = unsafe { std::mem::zeroed::<q4vk_matrix_desc>() };
    unsafe { q4vk_matrix_desc_default(&mut md) };
    (md.source, md.n, md.k) = (Q4VK_SOURCE_Q4, 8, 64);
    let mut ed = unsafe { std::mem::zeroed::<q4vk_kernel_export_desc>() };
    unsafe { q4vk_kernel_export_desc_default(&mut ed) };
    let mut info = unsafe { std::mem::zeroed::<q4vk_kernel_info>() };
    info.struct_size = std::mem::size_of::<q4vk_kernel_info>() as u32;
    let mut words = vec![0u32; 1 << 16];
    let status = unsafe {
        q4vk_kernel_export(
            ctx.ctx,
            &md,
            &ed,
            &mut info,
            words.as_mut_ptr(),
            words.len(),
        )
    };
    assert_eq!(status, Q4VK_ERROR_UNSUPPORTED, "{}", last_error());
    assert!(
        last_error().contains("q4vk_kernel_export"),
        "{}",
        last_error()
    );
    assert!(words.iter().all(|&w| w == 0));
    unsafe { q4vk_matrix_destroy(mat) };
}

#[test]
fn bad_input_is_refused_and_nothing_written() {
    let ctx = cpu(0);
    let mut rng = Rng(1);
    let data = random_q4(&mut rng, 8, 64, 32, false, false);
    let mat = upload_q4(&ctx, &data);
    let x = rng.vec(9 * 64);
    let mut y = vec![7.0f32; 9 * 8];
    let call = |m: u32, x: *const f32, xl: usize, y: *mut f32, yl: usize| unsafe {
        q4vk_gemv(ctx.ctx, mat, x, xl, y, yl, m)
    };
    let yp = y.as_mut_ptr();
    assert_eq!(call(0, x.as_ptr(), 64, yp, 8), Q4VK_ERROR_INVALID_ARGUMENT);
    assert_eq!(
        call(9, x.as_ptr(), 9 * 64, yp, 64),
        Q4VK_ERROR_BUFFER_TOO_SMALL
    );
    assert_eq!(
        call(2, x.as_ptr(), 127, yp, 16),
        Q4VK_ERROR_BUFFER_TOO_SMALL
    );
    assert_eq!(
        call(2, x.as_ptr(), 128, yp, 15),
        Q4VK_ERROR_BUFFER_TOO_SMALL
    );
    // The largest m: m·k and m·n fit size_t here but not the buffers (products that
    // overflow: tests/cpu_size_overflow.rs).
    for m in [1 << 31, u32::MAX] {
        assert_eq!(
            call(m, x.as_ptr(), x.len(), yp, y.len()),
            Q4VK_ERROR_BUFFER_TOO_SMALL
        );
    }
    assert_eq!(
        call(1, std::ptr::null(), 64, yp, 8),
        Q4VK_ERROR_NULL_POINTER
    );
    assert_eq!(
        call(1, x.as_ptr(), 64, std::ptr::null_mut(), 8),
        Q4VK_ERROR_NULL_POINTER
    );
    // y overlapping x.
    let mut xy = rng.vec(64 + 8);
    let p = xy.as_mut_ptr();
    assert_eq!(
        call(1, p, 64, unsafe { p.add(60) }, 8),
        Q4VK_ERROR_INVALID_ARGUMENT
    );
    assert!(y.iter().all(|&v| v == 7.0), "y written by a refused call");
    assert_eq!(
        unsafe { q4vk_gemv(ctx.ctx, std::ptr::null(), x.as_ptr(), 64, yp, 8, 1) },
        Q4VK_ERROR_NULL_POINTER
    );
    // Bad matrix data: zero point 16, NaN scale.
    let mut bad = data.clone();
    bad.shape.zero_points = true;
    bad.zeros = Cow::Owned(vec![16u8; 8 * 2]);
    let mut d = unsafe { std::mem::zeroed::<q4vk_matrix_desc>() };
    unsafe { q4vk_matrix_desc_default(&mut d) };
    (d.source, d.n, d.k, d.group_size, d.zero_points) = (Q4VK_SOURCE_Q4, 8, 64, 32, 1);
    (d.weight, d.weight_bytes) = (bad.weight.as_ptr().cast(), bad.weight.len());
    (d.scales, d.scales_bytes) = (bad.scales.as_ptr().cast(), bad.scales.len());
    (d.zeros, d.zeros_bytes) = (bad.zeros.as_ptr().cast(), bad.zeros.len());
    let mut out = std::ptr::null_mut();
    assert_eq!(
        unsafe { q4vk_matrix_create(ctx.ctx, &d, &mut out) },
        Q4VK_ERROR_INVALID_ARGUMENT
    );
    d.zeros_bytes = 15;
    assert_eq!(
        unsafe { q4vk_matrix_create(ctx.ctx, &d, &mut out) },
        Q4VK_ERROR_BUFFER_TOO_SMALL
    );
    let nan_scales = vec![0xffu8; bad.scales.len()];
    (d.zero_points, d.scales) = (0, nan_scales.as_ptr().cast());
    assert_eq!(
        unsafe { q4vk_matrix_create(ctx.ctx, &d, &mut out) },
        Q4VK_ERROR_NON_FINITE
    );
    assert!(out.is_null());
    unsafe { q4vk_matrix_destroy(mat) };
}

#[test]
fn context_desc_checks() {
    let err = |edit: &dyn Fn(&mut q4vk_context_desc)| Gpu::with(false, edit).err().map(|e| e.0);
    assert_eq!(
        err(&|d| d.flags = Q4VK_CONTEXT_CPU | Q4VK_CONTEXT_CPU_FALLBACK),
        Some(Q4VK_ERROR_INVALID_ARGUMENT)
    );
    // A CPU context cannot adopt a Vulkan device (the handles are never touched).
    unsafe extern "C" fn fake_gipa() {}
    for flags in [Q4VK_CONTEXT_CPU, Q4VK_CONTEXT_CPU_FALLBACK] {
        let got = err(&|d| {
            d.flags = flags;
            d.get_instance_proc_addr = Some(fake_gipa);
            d.instance = std::ptr::dangling_mut();
            d.physical_device = 2usize as *mut _;
            d.device = 3usize as *mut _;
            d.api_version = (1 << 22) | (1 << 12);
        });
        assert_eq!(got, Some(Q4VK_ERROR_INVALID_ARGUMENT), "flags {flags:#x}");
        assert!(last_error().contains("adopts"), "{}", last_error());
    }
    assert_eq!(err(&|d| d.flags = 0x80), Some(Q4VK_ERROR_INVALID_ARGUMENT));
    // A CPU context ignores device_index, whatever its value (the header says so); a
    // context that may be Vulkan checks it.
    for index in [-2, i32::MIN, 7] {
        let ctx = Gpu::with(false, |d| {
            d.flags = Q4VK_CONTEXT_CPU;
            d.device_index = index;
        });
        assert!(ctx.is_ok(), "device_index {index}: {:?}", ctx.err());
    }
    assert_eq!(
        err(&|d| {
            d.flags = Q4VK_CONTEXT_CPU_FALLBACK;
            d.device_index = -2;
        }),
        Some(Q4VK_ERROR_INVALID_ARGUMENT)
    );
    // A caller whose desc ends before cpu_threads gets all cores.
    let old = Gpu::with(false, |d| {
        d.flags = Q4VK_CONTEXT_CPU;
        d.cpu_threads = 1;
        d.struct_size = std::mem::offset_of!(q4vk_context_desc, cpu_threads) as u32;
    })
    .unwrap();
    assert_eq!(name(old.ctx), name(cpu(0).ctx));
}

/// Matrices are tied to their kind of context: a CPU matrix on a Vulkan context (and the
/// reverse) is refused. Needs the system's Vulkan device (lavapipe in CI).
#[test]
fn matrices_do_not_cross_context_kinds() {
    let host = cpu(0);
    let gpu = Gpu::new(false);
    let mut rng = Rng(9);
    let data = random_q4(&mut rng, 8, 64, 32, false, false);
    let (cm, gm) = (upload_q4(&host, &data), upload_q4(&gpu, &data));
    let x = rng.vec(64);
    let mut y = vec![7.0f32; 8];
    for (ctx, mat) in [(host.ctx, gm), (gpu.ctx, cm)] {
        let status = unsafe { q4vk_gemv(ctx, mat, x.as_ptr(), 64, y.as_mut_ptr(), 8, 1) };
        assert_eq!(status, Q4VK_ERROR_INVALID_ARGUMENT);
        assert!(last_error().contains("CPU context"), "{}", last_error());
    }
    assert!(y.iter().all(|&v| v == 7.0));
    // Both compute the same product.
    let (ec, eg) = (
        check_gemv(&host, cm, &data, &x, 1),
        check_gemv(&gpu, gm, &data, &x, 1),
    );
    assert!(ec < TOL && eg < TOL, "{ec:e} {eg:e}");
    unsafe {
        q4vk_matrix_destroy(cm);
        q4vk_matrix_destroy(gm);
    }
}

#[test]
fn gemv_host_applies_the_epilogue_after_the_product() {
    let gpu = cpu(2);
    gpu_support::host_epilogue::check_host_epilogue(&gpu, "CPU context");
}

#[test]
fn gemv_host_takes_f16_activations_and_ignores_rounding() {
    let ctx = cpu(2);
    let mut rng = Rng(0x70);
    let (n, k) = (33usize, 257usize);
    let data = random_q4(&mut rng, n, k, 64, true, false);
    let mat = upload_q4(&ctx, &data);
    for m in [1usize, 5, 12] {
        let x = rng.vec(m * k);
        let halves: Vec<half::f16> = x.iter().map(|&v| half::f16::from_f32(v)).collect();
        let widened: Vec<f32> = halves.iter().map(|h| h.to_f32()).collect();
        // f16 bytes one byte into a buffer: any alignment is taken.
        let mut held = vec![0u8; 1 + 2 * m * k];
        for (i, h) in halves.iter().enumerate() {
            held[1 + 2 * i..3 + 2 * i].copy_from_slice(&h.to_ne_bytes());
        }
        let mut y = vec![f32::NAN; m * n];
        let mut args = gemv_host_args();
        args.flags = Q4VK_GEMV_F16_ACTIVATIONS;
        args.m = m as u32;
        args.x = held[1..].as_ptr().cast();
        args.x_bytes = 2 * m * k;
        args.y = y.as_mut_ptr();
        args.y_len = y.len();
        let status = unsafe { q4vk_gemv_host(ctx.ctx, mat, &args) };
        assert_eq!(status, Q4VK_OK, "m {m}: {}", last_error());
        let err = q4vk::cpu::reference::relative_error(
            &y,
            &q4vk::cpu::reference::gemv(&data, &widened, m),
        );
        assert!(err < TOL, "f16 x, m {m}: {err:e}");
        // f32 x with the rounding flag: the CPU kernels are exact, so q4vk_gemv's result.
        let (status, want) = gemv_c(ctx.ctx, mat, &x, n, m);
        assert_eq!(status, Q4VK_OK);
        args.flags = Q4VK_GEMV_ROUND_X_TO_F16;
        args.x = x.as_ptr().cast();
        args.x_bytes = 4 * m * k;
        let status = unsafe { q4vk_gemv_host(ctx.ctx, mat, &args) };
        assert_eq!(status, Q4VK_OK, "m {m}: {}", last_error());
        assert_eq!(
            y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "rounded x on the CPU, m {m}"
        );
    }
    unsafe { q4vk_matrix_destroy(mat) };
}

/// `Q4VK_GEMV_ROUND_X_TO_INT8` on a CPU context: the GEMV on GGUF blocks runs on x rounded
/// to bytes where the CPU has the integer kernel (x86-64 with AVX2, aarch64 with the dot
/// product) and the rows of x are few enough (`cpu::blocks_dot::max_rows_of_x`): the
/// product of the decoded weights and x rounded per 32 columns (`d = a / 127`, `q =
/// round(127·x / a)`), not the exact one; more rows, and CPUs without the kernel, are
/// exact (the same bits as without the flag). Without the flag every m is exact (x in
/// digits up to a few rows, the f32 decode past them).
#[test]
fn gemv_host_rounds_x_to_bytes_on_gguf_blocks() {
    use gpu_support::blocks::{blocks_desc, dequantized, random_blocks};
    use q4vk::import::gguf_blocks::BlockType;
    let ctx = cpu(2);
    let mut rng = Rng(0xB7E5);
    let kernel = q4vk::cpu::blocks_dot::supported();
    for ty in [
        BlockType::Q4K,
        BlockType::Q6K,
        BlockType::Q8_0,
        BlockType::Mxfp4,
    ] {
        let (n, k) = (21usize, 512usize);
        let bytes = random_blocks(&mut rng, ty, n, k);
        let desc = blocks_desc(ty, n, k, &bytes);
        let w = dequantized(&desc);
        let mut mat = std::ptr::null_mut();
        let status = unsafe { q4vk_matrix_create(ctx.ctx, &desc, &mut mat) };
        assert_eq!(status, Q4VK_OK, "{}", last_error());
        for m in [1usize, 2, 3, 9] {
            let x = rng.vec(m * k);
            let run = |flags: u32| {
                let mut y = vec![f32::NAN; m * n];
                let mut args = gemv_host_args();
                args.flags = flags;
                args.m = m as u32;
                args.x = x.as_ptr().cast();
                args.x_bytes = 4 * m * k;
                args.y = y.as_mut_ptr();
                args.y_len = y.len();
                let status = unsafe { q4vk_gemv_host(ctx.ctx, mat, &args) };
                assert_eq!(status, Q4VK_OK, "{}", last_error());
                y
            };
            let (exact, flagged) = (run(0), run(Q4VK_GEMV_ROUND_X_TO_INT8));
            let what = format!("{} m {m}", ty.name());
            let want = q4vk::cpu::reference::gemv_dense(&w, &x, n, k, m);
            let err = q4vk::cpu::reference::relative_error(&exact, &want);
            assert!(err < 1e-5, "{what}, exact: {err:e}");
            let blocks_rows = q4vk::cpu::blocks_dot::max_rows_of_x(ty, true);
            if !kernel || m > blocks_rows {
                assert_eq!(
                    flagged.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    exact.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "{what}: the flag changes nothing here"
                );
                continue;
            }
            let rounded: Vec<f32> = x
                .chunks_exact(32)
                .flat_map(|run| {
                    let a = run.iter().fold(0f32, |a, v| a.max(v.abs()));
                    let d = a / 127.0;
                    run.iter().map(move |&v| {
                        let q = (f64::from(v) * 127.0 / f64::from(a)).round_ties_even();
                        (f64::from(d) * q) as f32
                    })
                })
                .collect();
            let want_rounded = q4vk::cpu::reference::gemv_dense(&w, &rounded, n, k, m);
            let err = q4vk::cpu::reference::relative_error(&flagged, &want_rounded);
            assert!(err < 1e-6, "{what}, x rounded: {err:e}");
            let off = q4vk::cpu::reference::relative_error(&flagged, &want);
            assert!(
                off > 1e-5 && off < 3e-2,
                "{what}: {off:e} from the exact product"
            );
        }
        unsafe { q4vk_matrix_destroy(mat) };
    }
}
