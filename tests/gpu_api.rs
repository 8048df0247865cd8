//! The rest of the Vulkan C API on the system's device, validation on: recording into a
//! host command buffer (strides, offsets, f16 activations), buffer and dispatch splitting,
//! FLOAT and PADDLE sources, and the error statuses (nothing written on error).

mod gpu_support;
use ash::vk::{self, Handle};
use gpu_support::*;
use q4vk::cpu::reference;
use q4vk::ffi::context::*;
use q4vk::ffi::gemv::*;
use q4vk::ffi::matrix::*;
use q4vk::ffi::status::*;
use q4vk::ffi::weight::*;
use q4vk::quant::q4::{Q4Data, Q4Shape, ScaleType};
use q4vk::vk::gemv::runs_int_dot;
use q4vk::vk::memory::{Buffer, MemoryKind};
use std::borrow::Cow;

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn cmd_gemv_with_strides_offsets_and_f16_activations() {
    for portable in [false, true] {
        let gpu = Gpu::new(portable);
        let mut rng = Rng(3);
        let (n, k) = (45usize, 300usize);
        let data = random_q4(&mut rng, n, k, 64, true, false);
        let mat = upload_q4(&gpu, &data);
        // m = 3: a GEMV kernel; m = 11: on SIMT matrices the GEMV in two passes (the GEMM on
        // tensor cores); m = 40: the GEMM (on SIMT matrices with integer dot products, the
        // GEMV in five passes).
        for (f16, m) in [
            (false, 3usize),
            (true, 3),
            (true, 11),
            (false, 40),
            (true, 40),
        ] {
            let (xs, ys) = (k + 5, n + 3);
            let x: Vec<f32> = rng
                .vec(m * k)
                .iter()
                .map(|&v| {
                    if f16 {
                        half::f16::from_f32(v).to_f32()
                    } else {
                        v
                    }
                })
                .collect();
            let mut x_dev = vec![0u8; 256];
            for mi in 0..m {
                for kk in 0..xs {
                    let v = if kk < k { x[mi * k + kk] } else { f32::NAN };
                    if f16 {
                        x_dev.extend(half::f16::from_f32(v).to_le_bytes());
                    } else {
                        x_dev.extend(v.to_le_bytes());
                    }
                }
            }
            x_dev.resize(x_dev.len().next_multiple_of(4), 0);
            let ctx = gpu.context();
            let xb = Buffer::new(
                &ctx.device,
                x_dev.len() as u64,
                MemoryKind::Upload,
                "test x",
            )
            .unwrap();
            xb.write(0, &x_dev);
            let y_len = 64 + m * ys;
            let yb = Buffer::new(
                &ctx.device,
                4 * y_len as u64,
                MemoryKind::Readback,
                "test y",
            )
            .unwrap();
            yb.write(0, &f32_bytes(&vec![f32::NAN; y_len]));
            let mut args = unsafe { std::mem::zeroed::<q4vk_gemv_args>() };
            unsafe { q4vk_gemv_args_default(&mut args) };
            args.m = m as u32;
            args.flags = if f16 { Q4VK_GEMV_F16_ACTIVATIONS } else { 0 };
            args.x = q4vk_buffer_ref {
                buffer: xb.buffer.as_raw(),
                offset: 256,
                range: x_dev.len() as u64 - 256,
            };
            args.y = q4vk_buffer_ref {
                buffer: yb.buffer.as_raw(),
                offset: 256,
                range: 4 * (m * ys) as u64,
            };
            args.x_row_stride = xs as u64;
            args.y_row_stride = ys as u64;
            assert_eq!(run_cmd(&gpu, mat, &args), Q4VK_OK, "{}", last_error());
            let mut out = vec![0u8; 4 * y_len];
            yb.read(0, &mut out);
            let y: Vec<f32> = out
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            let mut packed = Vec::new();
            for (i, &v) in y.iter().enumerate() {
                let (mi, col) = (
                    (i as isize - 64) / ys as isize,
                    (i as isize - 64) % ys as isize,
                );
                if i >= 64 && (col as usize) < n {
                    assert!(v.is_finite(), "y[{mi}][{col}] not written");
                    packed.push(v);
                } else {
                    assert!(v.is_nan(), "element {i} outside y was written");
                }
            }
            let err = reference::relative_error(&packed, &reference::gemv(&data, &x, m));
            assert!(err < 1e-5, "portable {portable} f16 {f16} m {m}: {err:e}");
        }
        // Errors: nothing recorded, specific status.
        let mut args = unsafe { std::mem::zeroed::<q4vk_gemv_args>() };
        unsafe { q4vk_gemv_args_default(&mut args) };
        assert_eq!(run_cmd(&gpu, mat, &args), Q4VK_ERROR_NULL_POINTER);
        // x would span more than 2^32 elements.
        args.m = u32::MAX;
        assert_eq!(run_cmd(&gpu, mat, &args), Q4VK_ERROR_UNSUPPORTED);
        args.m = 1;
        args.reserved0 = 1;
        assert_eq!(run_cmd(&gpu, mat, &args), Q4VK_ERROR_INVALID_ARGUMENT);
        unsafe { q4vk_matrix_destroy(mat) };
    }
}

#[test]
fn large_matrices_split_across_buffers_and_dispatches() {
    let mut gpu = Gpu::new(false);
    let mut rng = Rng(5);
    let (n, k) = (1001usize, 200usize);
    let data = random_q4(&mut rng, n, k, 32, false, false);
    {
        let ctx = gpu.context_mut();
        // 7 chunks of 16 bytes per row: parts of 10 rows (tensor-core layout: tiles of 16
        // rows × 2 stages of 1 KB, parts of 3 tiles), dispatches of at most 3 x 2 groups.
        ctx.limits.max_part_bytes = if ctx.coop { 3 * 2 * 1024 } else { 10 * 7 * 16 };
        ctx.rules.class.max_groups = [3, 2];
        // And the discrete-GPU upload path: staging buffer + vkCmdCopyBuffer.
        ctx.limits.staged_uploads = true;
    }
    let mat = upload_q4(&gpu, &data);
    // m = 11: SIMT matrices' GEMV in two passes; m = 40: the GEMM (or passes); over parts
    // and dispatches too.
    for m in [1usize, 4, 11, 40] {
        let x = rng.vec(m * k);
        let err = check_gemv(&gpu, mat, &data, &x, m);
        assert!(err < 1e-5, "m {m}: {err:e}");
    }
    unsafe { q4vk_matrix_destroy(mat) };
}

#[test]
fn lavapipe_scale_buffer_limit_is_respected() {
    // 128 MiB storage buffers on lavapipe: 9,000 x 32,768 int4 weights (~141 MiB) need two.
    let gpu = Gpu::new(false);
    let mut rng = Rng(9);
    let (n, k) = (9000usize, 32768usize);
    let data = random_q4(&mut rng, n, k, 128, false, false);
    let mat = upload_q4(&gpu, &data);
    let x = rng.vec(k);
    let err = check_gemv(&gpu, mat, &data, &x, 1);
    assert!(err < 1e-5, "{err:e}");
    unsafe { q4vk_matrix_destroy(mat) };
}

fn float_desc(
    n: usize,
    k: usize,
    dtype: u32,
    bytes: &[u8],
    group: i32,
    zeros: u32,
    transposed: u32,
) -> q4vk_matrix_desc {
    let mut d = unsafe { std::mem::zeroed::<q4vk_matrix_desc>() };
    unsafe { q4vk_matrix_desc_default(&mut d) };
    d.n = n as u64;
    d.k = k as u64;
    d.dtype = dtype;
    d.group_size = group;
    d.zero_points = zeros;
    d.transposed = transposed;
    d.weight = bytes.as_ptr().cast();
    d.weight_bytes = bytes.len();
    d
}

#[test]
fn float_source_uploads_what_q4_quantize_writes() {
    let gpu = Gpu::new(false);
    let mut rng = Rng(21);
    for (dtype, transposed, group, zeros) in [
        (0u32, 0u32, 128i32, 0u32),
        (1, 1, 32, 1),
        (2, 0, -1, 1),
        (1, 0, 256, 0),
    ] {
        let (n, k) = (37usize, 333usize);
        let w = rng.vec(n * k);
        let bytes: Vec<u8> = w
            .iter()
            .flat_map(|&v| match dtype {
                0 => v.to_le_bytes().to_vec(),
                1 => half::f16::from_f32(v).to_le_bytes().to_vec(),
                _ => half::bf16::from_f32(v).to_le_bytes().to_vec(),
            })
            .collect();
        let desc = float_desc(n, k, dtype, &bytes, group, zeros, transposed);
        let (mut wb, mut sb, mut zb) = (0usize, 0usize, 0usize);
        assert_eq!(
            unsafe { q4vk_q4_quantize_size(&desc, &mut wb, &mut sb, &mut zb) },
            Q4VK_OK
        );
        let (mut qw, mut qs, mut qz) = (vec![0u8; wb], vec![0u8; sb], vec![0u8; zb]);
        let status = unsafe {
            q4vk_q4_quantize(
                &desc,
                qw.as_mut_ptr(),
                wb,
                qs.as_mut_ptr().cast(),
                sb,
                qz.as_mut_ptr(),
                zb,
            )
        };
        assert_eq!(status, Q4VK_OK, "{}", last_error());
        let shape = Q4Shape::new(n as u64, k as u64, group, zeros).unwrap();
        let data = Q4Data {
            shape,
            weight: Cow::Owned(qw),
            scale_type: ScaleType::F16,
            scales: Cow::Owned(qs),
            zeros: Cow::Owned(qz),
        };
        let mut mat = std::ptr::null_mut();
        assert_eq!(
            unsafe { q4vk_matrix_create(gpu.ctx, &desc, &mut mat) },
            Q4VK_OK,
            "{}",
            last_error()
        );
        let x = rng.vec(2 * k);
        let err = check_gemv(&gpu, mat, &data, &x, 2);
        assert!(err < 1e-5, "dtype {dtype}: {err:e}");
        unsafe { q4vk_matrix_destroy(mat) };
    }
    // NaN weights: NON_FINITE, nothing written.
    let mut w = vec![0.5f32; 64];
    w[17] = f32::NAN;
    let bytes = w.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>();
    let desc = float_desc(2, 32, 0, &bytes, 32, 0, 0);
    let mut mat = std::ptr::null_mut();
    assert_eq!(
        unsafe { q4vk_matrix_create(gpu.ctx, &desc, &mut mat) },
        Q4VK_ERROR_NON_FINITE
    );
    assert!(mat.is_null());
}

#[test]
fn paddle_source_matches_its_codes_and_scales() {
    let gpu = Gpu::new(false);
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
        let esize = if dtype == Q4VK_DTYPE_F32 { 4 } else { 2 };
        let w: Vec<u8> = rng
            .vec(k * n)
            .iter()
            .flat_map(|&v| match dtype {
                Q4VK_DTYPE_F32 => v.to_le_bytes().to_vec(),
                Q4VK_DTYPE_F16 => half::f16::from_f32(v).to_le_bytes().to_vec(),
                _ => half::bf16::from_f32(v).to_le_bytes().to_vec(),
            })
            .collect();
        let (mut qb, mut sb) = (0usize, 0usize);
        assert_eq!(
            unsafe { q4vk_weight_quantize_size(&pd, &mut qb, &mut sb) },
            Q4VK_OK
        );
        let (mut q, mut s) = (vec![0i8; qb], vec![0u8; sb]);
        assert_eq!(
            unsafe {
                q4vk_weight_quantize(
                    &pd,
                    w.as_ptr().cast(),
                    w.len(),
                    q.as_mut_ptr(),
                    qb,
                    s.as_mut_ptr().cast(),
                    sb,
                )
            },
            Q4VK_OK
        );
        let mut plain = vec![0i8; qb];
        assert_eq!(
            unsafe { q4vk_weight_unpermute(&pd, q.as_ptr(), qb, plain.as_mut_ptr(), qb) },
            Q4VK_OK
        );
        let mut md = unsafe { std::mem::zeroed::<q4vk_matrix_desc>() };
        unsafe { q4vk_matrix_desc_default(&mut md) };
        md.source = Q4VK_SOURCE_PADDLE;
        (md.n, md.k, md.group_size, md.dtype, md.arch) = (n as u64, k as u64, group, dtype, arch);
        (md.weight, md.weight_bytes, md.scales, md.scales_bytes) =
            (q.as_ptr().cast(), qb, s.as_ptr().cast(), sb);
        let mut mat = std::ptr::null_mut();
        assert_eq!(
            unsafe { q4vk_matrix_create(gpu.ctx, &md, &mut mat) },
            Q4VK_OK,
            "{}",
            last_error()
        );
        let x = rng.vec(k);
        let mut y = vec![f32::NAN; n];
        assert_eq!(
            unsafe { q4vk_gemv(gpu.ctx, mat, x.as_ptr(), k, y.as_mut_ptr(), n, 1) },
            Q4VK_OK
        );
        // Independent reference: plain signed codes times Paddle's scales, in f64.
        let gsz = if group < 0 { k } else { group as usize };
        let reference: Vec<f64> = (0..n)
            .map(|col| {
                (0..k)
                    .map(|kk| {
                        let byte = plain[(kk * n + col) / 2] as u8;
                        let code = (((if col % 2 == 0 { byte & 15 } else { byte >> 4 }) << 4) as i8
                            >> 4) as f64;
                        let i = ((kk / gsz) * n + col) * esize;
                        let sc = match dtype {
                            Q4VK_DTYPE_F32 => {
                                f32::from_le_bytes(s[i..i + 4].try_into().unwrap()) as f64
                            }
                            Q4VK_DTYPE_F16 => half::f16::from_le_bytes([s[i], s[i + 1]]).to_f64(),
                            _ => half::bf16::from_le_bytes([s[i], s[i + 1]]).to_f64(),
                        };
                        code * sc * x[kk] as f64
                    })
                    .sum()
            })
            .collect();
        let err = reference::relative_error(&y, &reference);
        assert!(err < 1e-5, "arch {arch}: {err:e}");
        unsafe { q4vk_matrix_destroy(mat) };
    }
}

#[test]
fn bad_calls_get_specific_statuses_and_write_nothing() {
    let gpu = Gpu::new(false);
    let mut rng = Rng(1);
    let data = random_q4(&mut rng, 8, 64, 32, false, false);
    let mat = upload_q4(&gpu, &data);
    let x = rng.vec(9 * 64);
    let mut y = vec![7.0f32; 9 * 8];
    let call = |m: u32, x: *const f32, xl: usize, y: *mut f32, yl: usize| unsafe {
        q4vk_gemv(gpu.ctx, mat, x, xl, y, yl, m)
    };
    assert_eq!(
        call(9, x.as_ptr(), x.len(), y.as_mut_ptr(), 8 * 8),
        Q4VK_ERROR_BUFFER_TOO_SMALL
    );
    assert_eq!(
        call(0, x.as_ptr(), x.len(), y.as_mut_ptr(), y.len()),
        Q4VK_ERROR_INVALID_ARGUMENT
    );
    assert_eq!(
        call(1, std::ptr::null(), 0, y.as_mut_ptr(), y.len()),
        Q4VK_ERROR_NULL_POINTER
    );
    assert_eq!(
        call(2, x.as_ptr(), 127, y.as_mut_ptr(), y.len()),
        Q4VK_ERROR_BUFFER_TOO_SMALL
    );
    assert_eq!(
        call(2, x.as_ptr(), x.len(), y.as_mut_ptr(), 15),
        Q4VK_ERROR_BUFFER_TOO_SMALL
    );
    assert!(y.iter().all(|&v| v == 7.0));
    assert!(last_error().contains("y_len"), "{}", last_error());
    // Zero point out of range in Q4 input.
    let mut bad = random_q4(&mut rng, 4, 64, 64, true, false);
    bad.zeros.to_mut()[3] = 16;
    let mut desc = unsafe { std::mem::zeroed::<q4vk_matrix_desc>() };
    unsafe { q4vk_matrix_desc_default(&mut desc) };
    desc.source = Q4VK_SOURCE_Q4;
    (desc.n, desc.k, desc.group_size, desc.zero_points) = (4, 64, 64, 1);
    (desc.weight, desc.weight_bytes) = (bad.weight.as_ptr().cast(), bad.weight.len());
    (desc.scales, desc.scales_bytes) = (bad.scales.as_ptr().cast(), bad.scales.len());
    (desc.zeros, desc.zeros_bytes) = (bad.zeros.as_ptr().cast(), bad.zeros.len());
    let mut out = std::ptr::null_mut();
    assert_eq!(
        unsafe { q4vk_matrix_create(gpu.ctx, &desc, &mut out) },
        Q4VK_ERROR_INVALID_ARGUMENT
    );
    desc.zeros_bytes = 3;
    assert_eq!(
        unsafe { q4vk_matrix_create(gpu.ctx, &desc, &mut out) },
        Q4VK_ERROR_BUFFER_TOO_SMALL
    );
    assert!(out.is_null());
    unsafe { q4vk_matrix_destroy(mat) };
}

#[test]
fn gemv_workspace_size_answers_for_the_context_and_refuses_bad_calls() {
    let mut rng = Rng(0x5E5);
    let data = random_q4(&mut rng, 40, 100, 32, true, false);
    // Without the integer dot-product GEMV (the flag; lavapipe also does not report it
    // accelerated, so the default agrees): no workspace at any m, but where the tensor-core
    // GEMM runs on x in fragments (m ≥ 8 on tensor-core contexts).
    for flags in [0, Q4VK_CONTEXT_NO_INTDOT] {
        let gpu = Gpu::with(false, |d| d.flags |= flags).unwrap();
        let mat = upload_q4(&gpu, &data);
        // The kernel runs on SIMT matrices (a tensor-core context makes none) up to its limit
        // (past m = 8 in passes).
        let ctx = gpu.context();
        let form = plain_form(ctx, &data);
        let expected = |m: u32| match !ctx.coop && runs_int_dot(&ctx.rules, &form, m) {
            true => 112 * u64::from(m) * 4,
            false => 0,
        };
        for m in [1u32, 8, 9] {
            let mut bytes = u64::MAX;
            let status = unsafe { q4vk_gemv_workspace_size(gpu.ctx, mat, m, 0, &mut bytes) };
            assert_eq!(status, Q4VK_OK);
            // From m = 8 (with a workspace the GEMM runs there).
            let fragments = ctx.coop && m >= 8;
            match fragments {
                true => assert!(bytes > 0, "x in fragments, m {m}"),
                false => assert_eq!(bytes, expected(m), "flags {flags:#x} m {m}"),
            }
            // A key where the call has a pre-pass, 0 where it has none.
            let mut key = u64::MAX;
            let status = unsafe { q4vk_gemv_workspace_key(gpu.ctx, mat, m, 0, &mut key) };
            assert_eq!(status, Q4VK_OK);
            assert_eq!(key == 0, bytes == 0, "key {key:#x}, {bytes} bytes, m {m}");
            // Letting f32 x round to f16 halves that workspace (one f16 column per token
            // instead of two exact parts) and adds none elsewhere; at m = 8 x is not rounded
            // (the flag applies from m = 9): the same workspace and key.
            let round = Q4VK_GEMV_ROUND_X_TO_F16;
            let exact = bytes;
            let status = unsafe { q4vk_gemv_workspace_size(gpu.ctx, mat, m, round, &mut bytes) };
            assert_eq!(status, Q4VK_OK);
            match fragments {
                true if m == 8 => assert_eq!(bytes, exact, "rounded x, m 8"),
                true => assert!(bytes > 0 && bytes < exact, "rounded x, m {m}"),
                false => assert_eq!(bytes, expected(m), "rounded x, flags {flags:#x} m {m}"),
            }
            // Rounded and exact x in fragments are different bytes: different keys.
            let mut rounded_key = u64::MAX;
            let status =
                unsafe { q4vk_gemv_workspace_key(gpu.ctx, mat, m, round, &mut rounded_key) };
            assert_eq!(status, Q4VK_OK);
            match (fragments, m) {
                (true, 8) => assert_eq!(rounded_key, key, "m 8"),
                (true, _) => assert!(rounded_key != 0 && rounded_key != key, "m {m}"),
                (false, _) => {}
            }
        }
        if flags != 0 {
            assert!(!gpu.context().rules.int_dot);
        }
        let mut bytes = 5u64;
        let call = |m: u32, f: u32, out: *mut u64| unsafe {
            q4vk_gemv_workspace_size(gpu.ctx, mat, m, f, out)
        };
        assert_eq!(call(0, 0, &mut bytes), Q4VK_ERROR_INVALID_ARGUMENT);
        assert_eq!(
            call(1, 0x8000_0000, &mut bytes),
            Q4VK_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(call(1, 0, std::ptr::null_mut()), Q4VK_ERROR_NULL_POINTER);
        assert_eq!(
            unsafe { q4vk_gemv_workspace_size(std::ptr::null_mut(), mat, 1, 0, &mut bytes) },
            Q4VK_ERROR_NULL_POINTER
        );
        assert_eq!(bytes, 5, "written on error");
        let key = |m: u32, f: u32, out: *mut u64| unsafe {
            q4vk_gemv_workspace_key(gpu.ctx, mat, m, f, out)
        };
        assert_eq!(key(0, 0, &mut bytes), Q4VK_ERROR_INVALID_ARGUMENT);
        assert_eq!(key(1, 0x8000_0000, &mut bytes), Q4VK_ERROR_INVALID_ARGUMENT);
        assert_eq!(key(1, 0, std::ptr::null_mut()), Q4VK_ERROR_NULL_POINTER);
        assert_eq!(
            unsafe { q4vk_gemv_workspace_key(gpu.ctx, std::ptr::null(), 1, 0, &mut bytes) },
            Q4VK_ERROR_NULL_POINTER
        );
        assert_eq!(bytes, 5, "key written on error");
        unsafe { q4vk_matrix_destroy(mat) };
        gpu.assert_quiet();
    }
}

#[test]
fn context_errors() {
    let mut desc = unsafe { std::mem::zeroed::<q4vk_context_desc>() };
    unsafe { q4vk_context_desc_default(&mut desc) };
    let mut ctx = std::ptr::null_mut();
    desc.device_index = 99;
    assert_eq!(
        unsafe { q4vk_context_create(&desc, &mut ctx) },
        Q4VK_ERROR_NO_DEVICE
    );
    desc.device_index = -1;
    desc.header_version += 1 << 12;
    assert_eq!(
        unsafe { q4vk_context_create(&desc, &mut ctx) },
        Q4VK_ERROR_ABI_MISMATCH
    );
    unsafe { q4vk_context_desc_default(&mut desc) };
    desc.flags = 0x80;
    assert_eq!(
        unsafe { q4vk_context_create(&desc, &mut ctx) },
        Q4VK_ERROR_INVALID_ARGUMENT
    );
    unsafe { q4vk_context_desc_default(&mut desc) };
    desc.instance = std::ptr::dangling_mut();
    assert_eq!(
        unsafe { q4vk_context_create(&desc, &mut ctx) },
        Q4VK_ERROR_NULL_POINTER
    );
    assert!(ctx.is_null());
    let gpu = Gpu::new(false);
    let mut name = [0 as std::ffi::c_char; 256];
    let len = unsafe { q4vk_context_device_name(gpu.ctx, name.as_mut_ptr(), name.len()) };
    assert!(len > 0);
}

/// The harness itself: a validation message must reach the log sink and fail the test.
#[test]
#[should_panic(expected = "validation: ")]
fn validation_messages_fail_the_test() {
    let gpu = Gpu::new(false);
    let d = &gpu.context().device.device;
    unsafe {
        // A zero-sized buffer is invalid usage.
        let info = vk::BufferCreateInfo::default()
            .size(0)
            .usage(vk::BufferUsageFlags::STORAGE_BUFFER);
        if let Ok(b) = d.create_buffer(&info, None) {
            d.destroy_buffer(b, None);
        }
    }
    gpu.assert_quiet();
}

#[test]
fn one_context_many_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<q4vk::vk::context::Context>();
    shareable::<q4vk::vk::matrix::DeviceMatrix>();
    let gpu = Gpu::new(false);
    let mut rng = Rng(99);
    let data = random_q4(&mut rng, 130, 512, 128, true, false);
    let mat = upload_q4(&gpu, &data) as usize;
    let ctx = gpu.ctx as usize;
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let data = &data;
            s.spawn(move || {
                let mut rng = Rng(1000 + t);
                for m in 1..=4usize {
                    let x = rng.vec(m * 512);
                    let (status, y) = gemv_c(ctx as *mut _, mat as *const _, &x, 130, m);
                    assert_eq!(status, Q4VK_OK);
                    let err = reference::relative_error(&y, &reference::gemv(data, &x, m));
                    assert!(err < 1e-5, "thread {t} m {m}: {err:e}");
                }
            });
        }
    });
    unsafe { q4vk_matrix_destroy(mat as *mut _) };
}

/// `q4vk_gemv_host` of `mat` (`n` rows) on `m` rows of x given as bytes (`flags` say f32 or
/// f16), starting one byte into a buffer when `unaligned`, into a NaN-poisoned y.
fn gemv_host_c(
    gpu: &Gpu,
    mat: *const q4vk_matrix,
    x: &[u8],
    flags: u32,
    (n, m): (usize, usize),
    unaligned: bool,
) -> (q4vk_status, Vec<f32>) {
    let shift = usize::from(unaligned);
    let mut held = vec![0u8; x.len() + shift];
    held[shift..].copy_from_slice(x);
    let mut y = vec![f32::NAN; m * n];
    let mut args = gemv_host_args();
    args.flags = flags;
    args.m = m as u32;
    args.x = held[shift..].as_ptr().cast();
    args.x_bytes = x.len();
    args.y = y.as_mut_ptr();
    args.y_len = y.len();
    let status = unsafe { q4vk_gemv_host(gpu.ctx, mat, &args) };
    (status, y)
}

#[test]
fn gemv_host_runs_f16_and_f32_activations_from_any_alignment() {
    let gpu = Gpu::new(false);
    let mut rng = Rng(0x6E);
    // Odd k: an odd count of f16 values at odd m (the kernels read them in pairs).
    for (n, k) in [(45usize, 300usize), (17, 301)] {
        let data = random_q4(&mut rng, n, k, 64, true, false);
        let mat = upload_q4(&gpu, &data);
        // m = 1, 3: GEMV kernels; m = 8: the GEMM on tensor-core contexts; m = 40: the GEMM
        // (on SIMT matrices with integer dot products, the GEMV in passes).
        for m in [1usize, 3, 8, 40] {
            check_gemv_host(&gpu, mat, &data, &mut rng, m);
        }
        unsafe { q4vk_matrix_destroy(mat) };
    }
}

/// `q4vk_gemv_host` of `mat` at `m` on random x: f16 and f32, aligned or not, against the
/// reference (f16: of the values as given), flag-less f32 bit for bit as `q4vk_gemv`, and
/// f32 rounded to f16.
fn check_gemv_host(gpu: &Gpu, mat: *mut q4vk_matrix, data: &Q4Data, rng: &mut Rng, m: usize) {
    let (n, k) = (data.shape.n, data.shape.k);
    let x: Vec<f32> = rng.vec(m * k);
    let halves: Vec<half::f16> = x.iter().map(|&v| half::f16::from_f32(v)).collect();
    let widened: Vec<f32> = halves.iter().map(|h| h.to_f32()).collect();
    let f16_bytes: Vec<u8> = halves.iter().flat_map(|h| h.to_ne_bytes()).collect();
    let f32_bytes: Vec<u8> = x.iter().flat_map(|v| v.to_ne_bytes()).collect();
    let want = reference::gemv(data, &x, m);
    for unaligned in [false, true] {
        let f16 = Q4VK_GEMV_F16_ACTIVATIONS;
        let (status, y) = gemv_host_c(gpu, mat, &f16_bytes, f16, (n, m), unaligned);
        assert_eq!(status, Q4VK_OK, "f16 k {k} m {m}: {}", last_error());
        let err = reference::relative_error(&y, &reference::gemv(data, &widened, m));
        assert!(
            err < 1e-5,
            "f16 x, k {k} m {m}, unaligned {unaligned}: {err:e}"
        );
        let (status, y) = gemv_host_c(gpu, mat, &f32_bytes, 0, (n, m), unaligned);
        assert_eq!(status, Q4VK_OK, "f32 k {k} m {m}: {}", last_error());
        let err = reference::relative_error(&y, &want);
        assert!(
            err < 1e-5,
            "f32 x, k {k} m {m}, unaligned {unaligned}: {err:e}"
        );
        // Without flags it is q4vk_gemv, bit for bit.
        let (status, same) = gemv_c(gpu.ctx, mat, &x, n, m);
        assert_eq!(status, Q4VK_OK);
        assert_eq!(
            y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            same.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "f32 x, k {k} m {m}"
        );
    }
    // Rounding f32 x to f16 where that is faster: within f16's error where the tensor-core
    // GEMM runs (m > 8), the exact result elsewhere.
    let round = Q4VK_GEMV_ROUND_X_TO_F16;
    let (status, y) = gemv_host_c(gpu, mat, &f32_bytes, round, (n, m), false);
    assert_eq!(status, Q4VK_OK, "rounded k {k} m {m}: {}", last_error());
    let err = reference::relative_error(&y, &want);
    match gpu.context().coop && m > 8 {
        true => assert!(err < 2e-3, "rounded x, k {k} m {m}: {err:e}"),
        false => assert!(
            err < 1e-5,
            "rounded x, no rounding kernel, k {k} m {m}: {err:e}"
        ),
    }
}

#[test]
fn gemv_host_refuses_bad_args_and_writes_nothing() {
    let gpu = Gpu::new(false);
    let mut rng = Rng(0x6F);
    let (n, k, m) = (20usize, 64usize, 2usize);
    let data = random_q4(&mut rng, n, k, 32, false, false);
    let mat = upload_q4(&gpu, &data);
    let x: Vec<u8> = rng
        .vec(m * k)
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    let mut y = vec![f32::NAN; m * n];
    let base = gemv_host_args();
    let good = q4vk_gemv_host_args {
        m: m as u32,
        x: x.as_ptr().cast(),
        x_bytes: x.len(),
        y: y.as_mut_ptr(),
        y_len: m * n,
        ..base
    };
    let f16 = Q4VK_GEMV_F16_ACTIVATIONS;
    let cases: Vec<(&str, q4vk_gemv_host_args, q4vk_status)> = vec![
        (
            "struct_size",
            q4vk_gemv_host_args {
                struct_size: 40,
                ..good
            },
            Q4VK_ERROR_INVALID_ARGUMENT,
        ),
        (
            "unknown flag",
            q4vk_gemv_host_args {
                flags: 0x8000_0000,
                ..good
            },
            Q4VK_ERROR_INVALID_ARGUMENT,
        ),
        (
            "reuse flag",
            q4vk_gemv_host_args {
                flags: Q4VK_GEMV_REUSE_WORKSPACE,
                ..good
            },
            Q4VK_ERROR_INVALID_ARGUMENT,
        ),
        (
            "reserved0",
            q4vk_gemv_host_args {
                reserved0: 1,
                ..good
            },
            Q4VK_ERROR_INVALID_ARGUMENT,
        ),
        (
            "m = 0",
            q4vk_gemv_host_args { m: 0, ..good },
            Q4VK_ERROR_INVALID_ARGUMENT,
        ),
        (
            "NULL x",
            q4vk_gemv_host_args {
                x: std::ptr::null(),
                ..good
            },
            Q4VK_ERROR_NULL_POINTER,
        ),
        (
            "NULL y",
            q4vk_gemv_host_args {
                y: std::ptr::null_mut(),
                ..good
            },
            Q4VK_ERROR_NULL_POINTER,
        ),
        (
            "short f32 x",
            q4vk_gemv_host_args {
                x_bytes: x.len() - 1,
                ..good
            },
            Q4VK_ERROR_BUFFER_TOO_SMALL,
        ),
        (
            "short f16 x",
            q4vk_gemv_host_args {
                flags: f16,
                x_bytes: x.len() / 2 - 1,
                ..good
            },
            Q4VK_ERROR_BUFFER_TOO_SMALL,
        ),
        (
            "short y",
            q4vk_gemv_host_args {
                y_len: m * n - 1,
                ..good
            },
            Q4VK_ERROR_BUFFER_TOO_SMALL,
        ),
        (
            "x overlapping y",
            q4vk_gemv_host_args {
                x: y.as_ptr().cast(),
                x_bytes: 4 * m * k,
                ..good
            },
            Q4VK_ERROR_INVALID_ARGUMENT,
        ),
    ];
    for (what, args, want) in cases {
        let status = unsafe { q4vk_gemv_host(gpu.ctx, mat, &args) };
        assert_eq!(status, want, "{what}: {}", last_error());
        assert!(!last_error().is_empty(), "{what}: no message");
        assert!(y.iter().all(|v| v.is_nan()), "{what}: y written");
    }
    let status = unsafe { q4vk_gemv_host(gpu.ctx, mat, std::ptr::null()) };
    assert_eq!(status, Q4VK_ERROR_NULL_POINTER);
    // The good call succeeds and writes every element.
    let status = unsafe { q4vk_gemv_host(gpu.ctx, mat, &good) };
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    assert!(y.iter().all(|v| v.is_finite()));
    unsafe { q4vk_matrix_destroy(mat) };
}
