//! Soundness of the GPU path against the C contract (lavapipe, validation on, any message
//! fails): a context creates only the shader module it can use, and q4vk_gemv checks a
//! call against the device before its staging buffers grow.

mod gpu_support;

use gpu_support::*;
use q4vk::ffi::gemv::q4vk_gemv;
use q4vk::ffi::matrix::q4vk_matrix_destroy;
use q4vk::ffi::status::*;
use q4vk::vk::pipeline::PipelineKey;

/// A portable context has no subgroup shader module (on a device without subgroup
/// arithmetic creating it is invalid usage), so it cannot build a subgroup pipeline; and
/// a subgroup context has no portable module.
#[test]
fn a_context_creates_only_the_module_it_uses() {
    for portable in [true, false] {
        let gpu = Gpu::new(portable);
        let ctx = gpu.context();
        if !portable && ctx.rules.portable {
            // The device cannot run the subgroup kernels: its context is portable anyway.
            assert!(!ctx.device.info.subgroup_kernels_ok());
        }
        assert_eq!(ctx.pipelines.portable, ctx.rules.portable);
        let key = |portable| PipelineKey {
            portable,
            workgroup: ctx.pipelines.tuning.workgroup_for(8),
            rows: ctx.rules.simt().rows,
            unroll: ctx.rules.simt().unroll,
            split: ctx.rules.simt().split,
            m: 1,
            zeros: false,
            scale_f32: false,
            x_f16: false,
            offsets: false,
            k_order: false,
            dot: false,
            x_bytes: false,
            decode_once: false,
            word_lanes: false,
            pair: false,
        };
        ctx.pipelines
            .get(key(ctx.rules.portable), q4vk::vk::gemv::Epilogue::NONE)
            .expect("the context's own variant");
        let other = ctx
            .pipelines
            .get(key(!ctx.rules.portable), q4vk::vk::gemv::Epilogue::NONE);
        assert!(
            other.is_err(),
            "a portable = {} context built a portable = {} pipeline",
            ctx.rules.portable,
            !ctx.rules.portable
        );
        // The gate+up pair is a build of the subgroup kernels only.
        let pair = PipelineKey {
            pair: true,
            ..key(ctx.rules.portable)
        };
        let built = ctx.pipelines.get(pair, q4vk::vk::gemv::Epilogue::NONE);
        assert_eq!(
            built.is_ok(),
            !ctx.rules.portable,
            "pair pipeline: {built:?}"
        );
    }
}

/// x beyond maxStorageBufferRange: UNSUPPORTED with a message about q4vk_gemv's own
/// arguments (not `args->`), x never read, and the staging buffers as they were.
#[test]
fn oversized_gemv_is_refused_before_staging_grows() {
    let gpu = Gpu::new(false);
    let ctx = gpu.context();
    let max = ctx.device.info.max_storage_range;
    let mut rng = Rng(9);
    // A first, valid call sizes the staging buffers.
    let small = random_q4(&mut rng, 16, 64, 32, false, false);
    let small_mat = upload_q4(&gpu, &small);
    assert!(check_gemv(&gpu, small_mat, &small, &rng.vec(64), 1) < 1e-5);
    let staged = ctx.exec.lock().unwrap().buffers.bytes();
    // One row of k inputs with m = 8: 8·k floats of x exceed the limit.
    let m = 8usize;
    let k = ((max / (4 * m as u64)) as usize + 256).next_multiple_of(128);
    let big = q4vk::quant::q4::Q4Data {
        shape: q4vk::quant::q4::Q4Shape::new(1, k as u64, 128, 0).unwrap(),
        weight: vec![0x88u8; k / 2].into(),
        scale_type: q4vk::quant::q4::ScaleType::F16,
        scales: vec![0u8; 2 * (k / 128)].into(),
        zeros: Vec::new().into(),
    };
    let big_mat = upload_q4(&gpu, &big);
    // Zeroed (untouched, so unbacked) memory: the call must not read it.
    let x = vec![0f32; m * k];
    let mut y = vec![f32::NAN; m];
    let status = unsafe {
        q4vk_gemv(
            gpu.ctx,
            big_mat,
            x.as_ptr(),
            x.len(),
            y.as_mut_ptr(),
            y.len(),
            m as u32,
        )
    };
    let message = last_error();
    assert_eq!(status, Q4VK_ERROR_UNSUPPORTED, "{message}");
    assert!(message.contains("maxStorageBufferRange"), "{message}");
    assert!(!message.contains("args->"), "{message}");
    assert!(y.iter().all(|v| v.is_nan()), "y written on failure");
    assert_eq!(ctx.exec.lock().unwrap().buffers.bytes(), staged);
    unsafe {
        q4vk_matrix_destroy(big_mat);
        q4vk_matrix_destroy(small_mat);
    }
}
