//! `q4vk_gemv_prepare` on the system's Vulkan device (lavapipe in CI), validation on: after
//! it, GEMV calls over the prepared range of m create no pipeline, whatever their path
//! (recorded with and without a workspace, `q4vk_gemv` on host memory), and a matrix with a
//! column order is prepared for both the gathering kernels and the host's gather; bad
//! arguments get their status.

mod gpu_support;
use gpu_support::*;
use q4vk::ffi::gemv::q4vk_gemv_prepare;
use q4vk::ffi::matrix::q4vk_matrix_destroy;
use q4vk::ffi::status::*;
use q4vk::vk::gemv::{self, gemv_host};
use q4vk::vk::matrix::DeviceMatrix;

/// The activation counts the calls below run: GEMV, GEMV passes, GEMM.
const MS: [usize; 8] = [1, 2, 3, 8, 9, 17, 33, 40];

/// Runs every path of a call at each of [`MS`] on `mat` (x of `k` columns).
fn run_every_path(gpu: &Gpu, mat: &DeviceMatrix, k: usize, rng: &mut Rng) {
    let ctx = gpu.context();
    for m in MS {
        let x = rng.vec(m * k);
        let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
        let y = record_gemv(ctx, mat, &bytes, m, false);
        assert!(y.iter().all(|v| v.is_finite()), "m = {m}: y written");
        let bare = Recording {
            no_workspace: true,
            ..Default::default()
        };
        try_record_gemv(ctx, mat, &bytes, m, bare).expect("the call without a workspace");
        let mut y = vec![f32::NAN; m * mat.form.shape.n];
        gemv_host(ctx, mat, &x, &mut y, m as u32).expect("q4vk_gemv's path");
    }
}

#[test]
fn prepared_calls_create_no_pipeline() {
    let gpu = Gpu::new(false);
    let mut rng = Rng(41);
    let (n, k) = (70, 320);
    let data = random_q4(&mut rng, n, k, 64, true, false);
    let order: Vec<u32> = (0..k as u32).rev().collect();
    let ctx = gpu.context();
    let plain = DeviceMatrix::new(ctx, &data, None, None).unwrap();
    let ordered = DeviceMatrix::new(ctx, &data, None, Some(&order)).unwrap();
    let last = *MS.last().unwrap() as u32;
    for mat in [&plain, &ordered] {
        for m in 1..=last {
            let p = q4vk::vk::gemv::GemvParams {
                m,
                x_f16: false,
                x_stride: k as u64,
                y_stride: n as u64,
                x_gathered: false,
                x_round_f16: false,
                workspace_filled: false,
            };
            gemv::prepare(ctx, mat, &p).expect("prepared");
        }
    }
    let prepared = ctx.pipelines.created();
    assert!(prepared > 0, "preparing created the pipelines");
    run_every_path(&gpu, &plain, k, &mut rng);
    run_every_path(&gpu, &ordered, k, &mut rng);
    assert_eq!(
        ctx.pipelines.created(),
        prepared,
        "a prepared call created a pipeline"
    );
    // Calls past the prepared range still work, creating what they need.
    run_every_path(&gpu, &plain, k, &mut rng);
    gpu.assert_quiet();
}

#[test]
fn the_c_entry_prepares_a_range_and_refuses_bad_arguments() {
    let gpu = Gpu::new(false);
    let mut rng = Rng(43);
    let data = random_q4(&mut rng, 33, 96, 32, false, false);
    let mat = upload_q4(&gpu, &data);
    unsafe {
        assert_eq!(
            q4vk_gemv_prepare(gpu.ctx, mat, 1, 12, 0),
            Q4VK_OK,
            "{}",
            last_error()
        );
        let prepared = gpu.context().pipelines.created();
        for m in 1..=12 {
            let x = rng.vec(m * 96);
            assert!(check_gemv(&gpu, mat, &data, &x, m) < 1e-5, "m = {m}");
        }
        assert_eq!(gpu.context().pipelines.created(), prepared);
        let refused = [
            (
                q4vk_gemv_prepare(gpu.ctx, mat, 0, 4, 0),
                Q4VK_ERROR_INVALID_ARGUMENT,
                "m_first 0",
            ),
            (
                q4vk_gemv_prepare(gpu.ctx, mat, 5, 4, 0),
                Q4VK_ERROR_INVALID_ARGUMENT,
                "m_first > m_last",
            ),
            (
                q4vk_gemv_prepare(gpu.ctx, mat, 1, 4, 0x80),
                Q4VK_ERROR_INVALID_ARGUMENT,
                "unknown flags",
            ),
            (
                q4vk_gemv_prepare(std::ptr::null_mut(), mat, 1, 4, 0),
                Q4VK_ERROR_NULL_POINTER,
                "NULL ctx",
            ),
            (
                q4vk_gemv_prepare(gpu.ctx, std::ptr::null(), 1, 4, 0),
                Q4VK_ERROR_NULL_POINTER,
                "NULL mat",
            ),
        ];
        for (status, want, what) in refused {
            assert_eq!(status, want, "{what}: {}", last_error());
        }
        // An m no call could run on this device (y beyond what the kernels index).
        assert_eq!(
            q4vk_gemv_prepare(gpu.ctx, mat, 1, u32::MAX, 0),
            Q4VK_ERROR_UNSUPPORTED,
            "{}",
            last_error()
        );
        q4vk_matrix_destroy(mat);
    }
    gpu.assert_quiet();
}
