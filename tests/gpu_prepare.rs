//! `q4vk_gemv_prepare` and `q4vk_gemv_plan` on the system's Vulkan device (lavapipe in CI),
//! validation on: after `q4vk_gemv_prepare`, GEMV calls over the prepared range of m create
//! no pipeline, whatever their path (recorded with and without a workspace, `q4vk_gemv` on
//! host memory), and a matrix with a column order is prepared for both the gathering
//! kernels and the host's gather; `q4vk_gemv_plan` answers the decision the calls record;
//! bad arguments get their status.

mod gpu_support;
use gpu_support::*;
use q4vk::ffi::context::Q4VK_CONTEXT_CPU;
use q4vk::ffi::gemv::*;
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
            let p = dense_params(&mat.form, m as usize, Recording::default());
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
                q4vk_gemv_prepare(gpu.ctx, mat, 1, 4, 0x8000_0000),
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

/// Threads preparing the same calls at once (their pipelines created outside the sets'
/// locks): every call succeeds, each pipeline is kept once (as many as one thread
/// creates on another context), the calls then create none and compute the product, and
/// validation stays quiet.
#[test]
fn threads_prepare_the_same_calls_at_once() {
    /// A handle shared with the threads (the context is thread-safe).
    #[derive(Clone, Copy)]
    struct Shared(
        *mut q4vk::ffi::context::q4vk_context,
        *mut q4vk::ffi::matrix::q4vk_matrix,
    );
    // SAFETY: q4vk's contexts and matrices may be used from several threads at once.
    unsafe impl Send for Shared {}
    let mut rng = Rng(47);
    let data = random_q4(&mut rng, 45, 128, 32, true, false);
    let alone = Gpu::new(false);
    let mat_alone = upload_q4(&alone, &data);
    let status = unsafe { q4vk_gemv_prepare(alone.ctx, mat_alone, 1, 9, 0) };
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    let gpu = Gpu::new(false);
    let mat = upload_q4(&gpu, &data);
    let shared = Shared(gpu.ctx, mat);
    let statuses: Vec<u32> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(move || {
                    // The whole pair moves in (not its fields, which are not `Send`).
                    let handles = shared;
                    let Shared(ctx, mat) = handles;
                    // SAFETY: live handles.
                    unsafe { q4vk_gemv_prepare(ctx, mat, 1, 9, 0) }
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    assert!(
        statuses.iter().all(|&s| s == Q4VK_OK),
        "{statuses:?}: {}",
        last_error()
    );
    let created = gpu.context().pipelines.created();
    assert_eq!(created, alone.context().pipelines.created());
    for m in 1..=9 {
        let x = rng.vec(m * 128);
        assert!(check_gemv(&gpu, mat, &data, &x, m) < 1e-5, "m = {m}");
    }
    assert_eq!(gpu.context().pipelines.created(), created);
    unsafe {
        q4vk_matrix_destroy(mat);
        q4vk_matrix_destroy(mat_alone);
    }
    gpu.assert_quiet();
    alone.assert_quiet();
}

/// `q4vk_gemv_plan` for `m`, `flags` and a workspace of `workspace` bytes.
fn plan(
    gpu: &Gpu,
    mat: *mut q4vk::ffi::matrix::q4vk_matrix,
    m: u32,
    flags: u32,
    workspace: u64,
) -> (q4vk::ffi::status::q4vk_status, q4vk_gemv_plan_info) {
    let mut info: q4vk_gemv_plan_info = unsafe { std::mem::zeroed() };
    info.struct_size = std::mem::size_of::<q4vk_gemv_plan_info>() as u32;
    let status = unsafe { q4vk_gemv_plan(gpu.ctx, mat, m, flags, workspace, &mut info) };
    (status, info)
}

#[test]
fn the_plan_is_the_decision_calls_record() {
    use q4vk::vk::gemv::{decide, KernelChoice, PrepassChoice, Room};
    let gpu = Gpu::new(false);
    let mut rng = Rng(47);
    let (n, k) = (70, 320);
    let data = random_q4(&mut rng, n, k, 64, true, false);
    let mat = upload_q4(&gpu, &data);
    let ctx = gpu.context();
    let form = plain_form(ctx, &data);
    // Under Q4VK_INTDOT=1 the flag takes the integer dot-product GEMV to x in bytes.
    for (m, flags) in MS
        .map(|m| m as u32)
        .into_iter()
        .flat_map(|m| [(m, 0), (m, Q4VK_GEMV_ROUND_X_TO_INT8)])
    {
        let mut asked = 0u64;
        assert_eq!(
            unsafe { q4vk_gemv_workspace_size(gpu.ctx, mat, m, flags, &mut asked) },
            Q4VK_OK
        );
        for (workspace, room) in [(0, Room::None), (u64::MAX, Room::AsNeeded)] {
            let (status, info) = plan(&gpu, mat, m, flags, workspace);
            assert_eq!(status, Q4VK_OK, "m = {m}: {}", last_error());
            let how = Recording {
                x_round_int8: flags != 0,
                ..Default::default()
            };
            let p = dense_params(&form, m as usize, how);
            let choice = decide(&ctx.rules, &form, &p, room).unwrap();
            let (kernel, passes) = match choice.kernel {
                KernelChoice::SimtGemv { key, .. } if key.dot => {
                    (Q4VK_GEMV_KERNEL_INT_DOT_GEMV, m.div_ceil(key.m))
                }
                KernelChoice::SimtGemv { key, .. } => {
                    (Q4VK_GEMV_KERNEL_SIMT_GEMV, m.div_ceil(key.m))
                }
                KernelChoice::BlocksGemv { key, .. } => {
                    (Q4VK_GEMV_KERNEL_BLOCKS_GEMV, m.div_ceil(key.m))
                }
                KernelChoice::BlocksGemm(_) => (Q4VK_GEMV_KERNEL_BLOCKS_GEMM, 1),
                KernelChoice::BlocksTiles(_) => (Q4VK_GEMV_KERNEL_BLOCKS_COOP_GEMM, 1),
                KernelChoice::BlocksFrag(_) => (Q4VK_GEMV_KERNEL_BLOCKS_FRAGMENT_GEMM, 1),
                KernelChoice::SimtGemm(_) => (Q4VK_GEMV_KERNEL_SIMT_GEMM, 1),
                KernelChoice::CoopTiles(_) => (Q4VK_GEMV_KERNEL_COOP_TILES_GEMM, 1),
                KernelChoice::CoopGemv(_) => (Q4VK_GEMV_KERNEL_COOP_GEMV, 1),
                KernelChoice::CoopGemm { .. } => (Q4VK_GEMV_KERNEL_COOP_GEMM, 1),
            };
            assert_eq!((info.kernel, info.passes), (kernel, passes), "m = {m}");
            assert_eq!(info.workspace_bytes, choice.workspace_bytes, "m = {m}");
            assert_eq!(
                info.prepass != Q4VK_GEMV_PREPASS_NONE,
                info.workspace_bytes > 0
            );
            if let Some(PrepassChoice::Digits(key)) = choice.prepass {
                let want = match key.bytes {
                    true => Q4VK_GEMV_PREPASS_BYTES,
                    false => Q4VK_GEMV_PREPASS_DIGITS,
                };
                assert_eq!(info.prepass, want, "m = {m}, flags {flags}");
            }
            if workspace == u64::MAX {
                assert_eq!(info.workspace_bytes, asked, "m = {m}");
            }
            assert_eq!(info.matrix_bytes, form.device_bytes());
            let name = unsafe { std::ffi::CStr::from_ptr(info.name.as_ptr()) };
            assert_eq!(name.to_str().unwrap(), choice.to_string(), "m = {m}");
            assert!(!name.is_empty());
        }
        // A workspace one byte short of a pre-pass's is refused, as q4vk_cmd_gemv refuses it.
        if asked > 1 {
            let (status, _) = plan(&gpu, mat, m, flags, asked - 1);
            assert_eq!(status, Q4VK_ERROR_BUFFER_TOO_SMALL, "m = {m}");
        }
    }
    let mut short: q4vk_gemv_plan_info = unsafe { std::mem::zeroed() };
    short.struct_size = 8;
    let refused = unsafe {
        [
            (
                q4vk_gemv_plan(gpu.ctx, mat, 1, 0, 0, &mut short),
                Q4VK_ERROR_INVALID_ARGUMENT,
                "struct_size",
            ),
            (
                q4vk_gemv_plan(gpu.ctx, mat, 1, 0, 0, std::ptr::null_mut()),
                Q4VK_ERROR_NULL_POINTER,
                "NULL info",
            ),
            (
                plan(&gpu, mat, 0, 0, 0).0,
                Q4VK_ERROR_INVALID_ARGUMENT,
                "m = 0",
            ),
            (
                plan(&gpu, mat, 1, 0x8000_0000, 0).0,
                Q4VK_ERROR_INVALID_ARGUMENT,
                "unknown flags",
            ),
            (
                plan(&gpu, mat, u32::MAX, 0, 0).0,
                Q4VK_ERROR_UNSUPPORTED,
                "an m no call runs",
            ),
        ]
    };
    for (status, want, what) in refused {
        assert_eq!(status, want, "{what}: {}", last_error());
    }
    unsafe { q4vk_matrix_destroy(mat) };
    gpu.assert_quiet();
    // A CPU context runs its own kernels.
    let cpu = Gpu::with(false, |d| d.flags = Q4VK_CONTEXT_CPU).unwrap();
    let mat = upload_q4(&cpu, &data);
    let (status, info) = plan(&cpu, mat, 3, 0, u64::MAX);
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    assert_eq!(
        (info.kernel, info.workspace_bytes, info.passes),
        (Q4VK_GEMV_KERNEL_CPU, 0, 1)
    );
    assert!(info.matrix_bytes > 0);
    unsafe { q4vk_matrix_destroy(mat) };
}
