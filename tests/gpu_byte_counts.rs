//! Byte counts that read as a dtype or flag mistake, on a CPU and a Vulkan context: a count
//! that is exactly what another element type would need (f32 weights described as f16,
//! f32 scales as f16, f32 x with the f16-x flag) is accepted with one WARN naming both
//! readings; with `Q4VK_CONTEXT_STRICT_SIZES` any count larger than exact is refused
//! (`INVALID_ARGUMENT`, nothing written) and exact counts run. `q4vk_cmd_gemv`'s x and y
//! ranges likewise, and a range of `VK_WHOLE_SIZE` is refused with what to pass instead.

mod gpu_support;
use ash::vk::Handle;
use gpu_support::*;
use q4vk::ffi::context::*;
use q4vk::ffi::gemv::*;
use q4vk::ffi::matrix::*;
use q4vk::ffi::status::*;
use q4vk::ffi::weight::{Q4VK_DTYPE_F16, Q4VK_DTYPE_F32};
use q4vk::vk::memory::{Buffer, MemoryKind};

const N: usize = 16;
const K: usize = 64;

/// A context of `kind` (`Q4VK_CONTEXT_CPU` or 0 for Vulkan), strict or not.
fn context(kind: u32, strict: bool) -> Gpu {
    Gpu::with(false, |d| {
        d.flags |= kind | if strict { Q4VK_CONTEXT_STRICT_SIZES } else { 0 };
    })
    .expect("a context")
}

/// The WARN messages the context logged since the last call, taken (so that the
/// context's drop, which fails on any, sees none of the expected ones).
fn take_warnings(gpu: &Gpu) -> Vec<String> {
    std::mem::take(&mut *gpu.sink.messages.lock().unwrap())
}

fn float_desc(weight: &[u8], dtype: u32) -> q4vk_matrix_desc {
    let mut d = unsafe { std::mem::zeroed::<q4vk_matrix_desc>() };
    unsafe { q4vk_matrix_desc_default(&mut d) };
    (d.source, d.n, d.k, d.group_size, d.dtype) =
        (Q4VK_SOURCE_FLOAT, N as u64, K as u64, 32, dtype);
    (d.weight, d.weight_bytes) = (weight.as_ptr().cast(), weight.len());
    d
}

fn create(gpu: &Gpu, d: &q4vk_matrix_desc) -> (q4vk_status, *mut q4vk_matrix) {
    let poison = std::ptr::dangling_mut::<q4vk_matrix>();
    let mut mat = poison;
    let status = unsafe { q4vk_matrix_create(gpu.ctx, d, &mut mat) };
    if status != Q4VK_OK {
        assert_eq!(mat, poison, "out written on status {status}");
    }
    (status, mat)
}

fn f16_bytes(v: &[f32]) -> Vec<u8> {
    v.iter()
        .flat_map(|&f| half::f16::from_f32(f).to_bits().to_le_bytes())
        .collect()
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|f| f.to_le_bytes()).collect()
}

#[test]
fn matrix_byte_counts_of_another_dtype_warn_or_are_refused() {
    let mut rng = Rng(35);
    // Quarters: their f32 bit patterns read as f16 pairs are finite (a mistake the
    // library cannot see in the values), as f32 weights mostly are.
    let w: Vec<f32> = (0..N * K)
        .map(|i| ((i * 7 % 17) as f32 - 8.0) * 0.25)
        .collect();
    let (as_f32, as_f16) = (f32_bytes(&w), f16_bytes(&w));
    for kind in [Q4VK_CONTEXT_CPU, 0] {
        // f32 weights with dtype F16: 4·n·k bytes, exactly what f32 needs.
        let lenient = context(kind, false);
        let (status, mat) = create(&lenient, &float_desc(&as_f32, Q4VK_DTYPE_F16));
        assert_eq!(status, Q4VK_OK, "{}", last_error());
        unsafe { q4vk_matrix_destroy(mat) };
        let warnings = take_warnings(&lenient);
        assert_eq!(warnings.len(), 1, "kind {kind:#x}: {warnings:?}");
        let w0 = &warnings[0];
        assert!(w0.contains("desc->weight_bytes is 4096 bytes"), "{w0}");
        assert!(
            w0.contains("1024 f32 elements") && w0.contains("1024 f16 elements"),
            "{w0}"
        );
        // A larger count another type does not explain, and exact counts: quiet.
        let longer = [as_f16.as_slice(), &[0u8; 6]].concat();
        for bytes in [&longer, &as_f16] {
            let (status, mat) = create(&lenient, &float_desc(bytes, Q4VK_DTYPE_F16));
            assert_eq!(status, Q4VK_OK, "{}", last_error());
            unsafe { q4vk_matrix_destroy(mat) };
        }
        assert!(take_warnings(&lenient).is_empty());

        let strict = context(kind, true);
        for bytes in [&as_f32, &longer] {
            let (status, _) = create(&strict, &float_desc(bytes, Q4VK_DTYPE_F16));
            assert_eq!(status, Q4VK_ERROR_INVALID_ARGUMENT, "kind {kind:#x}");
            let message = last_error();
            assert!(message.contains("Q4VK_CONTEXT_STRICT_SIZES"), "{message}");
        }
        assert!(
            last_error().contains("desc->weight_bytes is 2054 bytes"),
            "{}",
            last_error()
        );
        let (status, _) = create(&strict, &float_desc(&as_f32, Q4VK_DTYPE_F16));
        assert_eq!(status, Q4VK_ERROR_INVALID_ARGUMENT);
        assert!(
            last_error().contains("f32 elements would take"),
            "{}",
            last_error()
        );
        // Short is still BUFFER_TOO_SMALL; exact runs.
        let (status, _) = create(
            &strict,
            &float_desc(&as_f16[..as_f16.len() - 2], Q4VK_DTYPE_F16),
        );
        assert_eq!(status, Q4VK_ERROR_BUFFER_TOO_SMALL);
        for (bytes, dtype) in [(&as_f16, Q4VK_DTYPE_F16), (&as_f32, Q4VK_DTYPE_F32)] {
            let (status, mat) = create(&strict, &float_desc(bytes, dtype));
            assert_eq!(status, Q4VK_OK, "{}", last_error());
            unsafe { q4vk_matrix_destroy(mat) };
        }
        assert!(take_warnings(&strict).is_empty());

        // Q4 scales: f32 scales (quarters, finite as f16 pairs too) given with dtype F16.
        let data = random_q4(&mut rng, N, K, 32, false, true);
        let scales: Vec<f32> = (0..N * K / 32).map(|i| 0.25 * (1 + i % 4) as f32).collect();
        let scales = f32_bytes(&scales);
        let mut d = unsafe { std::mem::zeroed::<q4vk_matrix_desc>() };
        unsafe { q4vk_matrix_desc_default(&mut d) };
        (d.source, d.n, d.k, d.group_size, d.dtype) =
            (Q4VK_SOURCE_Q4, N as u64, K as u64, 32, Q4VK_DTYPE_F16);
        (d.weight, d.weight_bytes) = (data.weight.as_ptr().cast(), data.weight.len());
        (d.scales, d.scales_bytes) = (scales.as_ptr().cast(), scales.len());
        let (status, mat) = create(&lenient, &d);
        assert_eq!(status, Q4VK_OK, "{}", last_error());
        unsafe { q4vk_matrix_destroy(mat) };
        let warnings = take_warnings(&lenient);
        assert!(
            warnings.len() == 1 && warnings[0].contains("desc->scales_bytes"),
            "{warnings:?}"
        );
        let (status, _) = create(&strict, &d);
        assert_eq!(status, Q4VK_ERROR_INVALID_ARGUMENT, "{}", last_error());
    }
}

#[test]
fn activation_byte_counts_of_another_type_warn_or_are_refused() {
    let mut rng = Rng(36);
    let data = random_q4(&mut rng, N, K, 32, true, false);
    let m = 3;
    let x = rng.vec(m * K);
    let x32 = f32_bytes(&x);
    for kind in [Q4VK_CONTEXT_CPU, 0] {
        for strict in [false, true] {
            let gpu = context(kind, strict);
            let mat = upload_q4(&gpu, &data);
            // f32 x passed with the f16-x flag: 4·m·k bytes.
            let mut y = vec![f32::NAN; m * N];
            let mut a = gemv_host_args();
            (a.m, a.flags, a.x, a.x_bytes) = (
                m as u32,
                Q4VK_GEMV_F16_ACTIVATIONS,
                x32.as_ptr().cast(),
                x32.len(),
            );
            (a.y, a.y_len) = (y.as_mut_ptr(), y.len());
            let status = unsafe { q4vk_gemv_host(gpu.ctx, mat, &a) };
            let warnings = take_warnings(&gpu);
            if strict {
                assert_eq!(status, Q4VK_ERROR_INVALID_ARGUMENT, "kind {kind:#x}");
                assert!(last_error().contains("args->x_bytes"), "{}", last_error());
                assert!(y.iter().all(|v| v.is_nan()), "y written on refusal");
                assert!(warnings.is_empty(), "{warnings:?}");
            } else {
                assert_eq!(status, Q4VK_OK, "{}", last_error());
                assert!(
                    warnings.len() == 1
                        && warnings[0].contains("args->x_bytes")
                        && warnings[0].contains("192 f32 elements"),
                    "{warnings:?}"
                );
            }
            // q4vk_gemv: one float more than m·k.
            let longer = [x.as_slice(), &[0.0]].concat();
            let mut y = vec![f32::NAN; m * N];
            let status = unsafe {
                q4vk_gemv(
                    gpu.ctx,
                    mat,
                    longer.as_ptr(),
                    longer.len(),
                    y.as_mut_ptr(),
                    y.len(),
                    m as u32,
                )
            };
            let expected = if strict {
                Q4VK_ERROR_INVALID_ARGUMENT
            } else {
                Q4VK_OK
            };
            assert_eq!(status, expected, "kind {kind:#x}: {}", last_error());
            if strict {
                assert!(
                    last_error().contains("x_len is 193 floats"),
                    "{}",
                    last_error()
                );
                assert!(y.iter().all(|v| v.is_nan()));
            }
            // Exact counts run either way.
            let (status, _) = gemv_c(gpu.ctx, mat, &x, N, m);
            assert_eq!(status, Q4VK_OK, "{}", last_error());
            assert!(take_warnings(&gpu).is_empty());
            unsafe { q4vk_matrix_destroy(mat) };
        }
    }
}

#[test]
fn cmd_gemv_ranges_of_another_type_warn_or_are_refused() {
    let mut rng = Rng(37);
    let data = random_q4(&mut rng, N, K, 32, false, false);
    let m = 2;
    let x32 = f32_bytes(&rng.vec(m * K));
    for strict in [false, true] {
        let gpu = context(0, strict);
        let ctx = gpu.context();
        let mat = upload_q4(&gpu, &data);
        let xb = Buffer::new(&ctx.device, x32.len() as u64, MemoryKind::Upload, "test x").unwrap();
        xb.write(0, &x32);
        let yb = Buffer::new(
            &ctx.device,
            (4 * m * N) as u64,
            MemoryKind::Readback,
            "test y",
        )
        .unwrap();
        let nan: Vec<u8> = (0..m * N).flat_map(|_| f32::NAN.to_le_bytes()).collect();
        yb.write(0, &nan);
        let mut a = unsafe { std::mem::zeroed::<q4vk_gemv_args>() };
        unsafe { q4vk_gemv_args_default(&mut a) };
        (a.m, a.flags) = (m as u32, Q4VK_GEMV_F16_ACTIVATIONS);
        a.x = q4vk_buffer_ref {
            buffer: xb.buffer.as_raw(),
            offset: 0,
            range: x32.len() as u64,
        };
        a.y = q4vk_buffer_ref {
            buffer: yb.buffer.as_raw(),
            offset: 0,
            range: (4 * m * N) as u64,
        };
        // f32 x with the f16-x flag: the x range is what f32 x takes.
        let status = run_cmd(&gpu, mat, &a);
        let warnings = take_warnings(&gpu);
        if strict {
            assert_eq!(status, Q4VK_ERROR_INVALID_ARGUMENT);
            assert!(last_error().contains("args->x.range"), "{}", last_error());
            assert!(warnings.is_empty(), "{warnings:?}");
            assert!(read_f32s(&yb, m * N).iter().all(|v| v.is_nan()));
        } else {
            assert_eq!(status, Q4VK_OK, "{}", last_error());
            assert!(
                warnings.len() == 1 && warnings[0].contains("args->x.range"),
                "{warnings:?}"
            );
        }
        // VK_WHOLE_SIZE says what to pass instead.
        let mut whole = a;
        (whole.flags, whole.y.range) = (0, ash::vk::WHOLE_SIZE);
        assert_eq!(run_cmd(&gpu, mat, &whole), Q4VK_ERROR_INVALID_ARGUMENT);
        let message = last_error();
        assert!(
            message.contains("args->y.range is VK_WHOLE_SIZE") && message.contains("minus"),
            "{message}"
        );
        // Exact ranges run in either mode.
        a.flags = 0;
        assert_eq!(run_cmd(&gpu, mat, &a), Q4VK_OK, "{}", last_error());
        assert!(take_warnings(&gpu).is_empty());
        unsafe { q4vk_matrix_destroy(mat) };
    }
}
