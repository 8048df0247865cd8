//! `q4vk_matrix_footprint_info` (`vk::matrix::footprint`) on the system's Vulkan device (lavapipe
//! in CI), validation on: for every matrix form (f16 and f32 scales, zero points, offsets, a
//! column order) and matrices split into parts, the footprint asked before creation is
//! exactly the device memory the created matrix then holds, buffer for buffer; staging is
//! reported where uploads go through it; bad arguments and CPU contexts are refused, nothing
//! written. `q4vk_context_memory` counts what a context holds as calls add it.

mod gpu_support;
use gpu_support::*;
use q4vk::ffi::context::*;
use q4vk::ffi::footprint::*;
use q4vk::ffi::gemv::*;
use q4vk::ffi::matrix::q4vk_matrix_destroy;
use q4vk::ffi::status::*;
use q4vk::vk::matrix::{footprint, DeviceMatrix};

#[test]
fn the_footprint_is_what_the_matrix_then_holds() {
    let mut gpu = Gpu::new(false);
    let mut rng = Rng(0xF007);
    for max_part_bytes in [u64::MAX, 24 * 1024] {
        if max_part_bytes != u64::MAX {
            gpu.context_mut().limits.max_part_bytes = max_part_bytes;
        }
        let ctx = gpu.context();
        for &(n, k, g, zeros, f32_scales) in &[
            (61usize, 700usize, 32i32, true, false),
            (300, 512, 128, false, true),
            (9, 1024, -1, false, false),
        ] {
            let d = random_q4(&mut rng, n, k, g, zeros, f32_scales);
            let f = footprint(ctx, d.shape, d.scale_type, false, false).unwrap();
            let mat = DeviceMatrix::new(ctx, &d, None, None).unwrap();
            assert_eq!(f.device_bytes, mat.allocated_bytes(), "{n}x{k} g{g}");
            let parts = mat.parts.len() as u32;
            assert_eq!(f.buffers, parts * (2 + zeros as u32), "{n}x{k}");
            assert!(f.device_bytes >= mat.form.device_bytes());
            assert!(f.alignment.is_power_of_two() && f.memory_type_bits != 0);
            // The C entry point answers the same for the same data.
            let desc = q4_desc(&d);
            let mut info = unsafe { std::mem::zeroed::<q4vk_matrix_footprint_info>() };
            info.struct_size = std::mem::size_of::<q4vk_matrix_footprint_info>() as u32;
            let status = unsafe { q4vk_matrix_footprint(gpu.ctx, &desc, &mut info) };
            assert_eq!(status, Q4VK_OK, "{}", last_error());
            assert_eq!(
                (
                    info.device_bytes,
                    info.buffers,
                    info.alignment,
                    info.staging_bytes
                ),
                (f.device_bytes, f.buffers, f.alignment, f.staging_bytes)
            );
            assert_eq!(info.memory_type_bits, f.memory_type_bits);
        }
        // Offsets and a column order.
        let d = random_q4(&mut rng, 45, 300, 32, false, true);
        let offsets = rng.vec(d.shape.scale_count());
        let order: Vec<u32> = (0..300u32).rev().collect();
        let f = footprint(ctx, d.shape, d.scale_type, true, true).unwrap();
        let mat = DeviceMatrix::new(ctx, &d, Some(&offsets), Some(&order)).unwrap();
        assert_eq!(f.device_bytes, mat.allocated_bytes());
        assert_eq!(f.buffers, 3 * mat.parts.len() as u32 + 1);
    }
    // Uploads through staging: the largest buffer is held at once.
    gpu.context_mut().limits.staged_uploads = true;
    let d = random_q4(&mut rng, 64, 256, 64, true, false);
    let f = footprint(gpu.context(), d.shape, d.scale_type, false, false).unwrap();
    assert_eq!(f.staging_bytes, (64 * 256 / 2) as u64);
    gpu.assert_quiet();
}

#[test]
fn bad_arguments_and_cpu_contexts_are_refused() {
    let gpu = Gpu::new(false);
    let mut rng = Rng(0xF0);
    let d = random_q4(&mut rng, 16, 64, 32, false, false);
    let desc = q4_desc(&d);
    let poison = || {
        let mut info = unsafe { std::mem::zeroed::<q4vk_matrix_footprint_info>() };
        info.struct_size = std::mem::size_of::<q4vk_matrix_footprint_info>() as u32;
        info.device_bytes = 0xDEAD;
        info
    };
    let mut info = poison();
    let mut short = desc;
    short.weight_bytes = 3;
    let status = unsafe { q4vk_matrix_footprint(gpu.ctx, &short, &mut info) };
    assert_eq!(status, Q4VK_ERROR_BUFFER_TOO_SMALL, "{}", last_error());
    assert_eq!(info.device_bytes, 0xDEAD, "written on failure");
    let status = unsafe { q4vk_matrix_footprint(gpu.ctx, &desc, std::ptr::null_mut()) };
    assert_eq!(status, Q4VK_ERROR_NULL_POINTER);
    let mut small = poison();
    small.struct_size = 4;
    let status = unsafe { q4vk_matrix_footprint(gpu.ctx, &desc, &mut small) };
    assert_eq!(status, Q4VK_ERROR_INVALID_ARGUMENT);
    assert_eq!(small.device_bytes, 0xDEAD);
    // A CPU context keeps its matrices in host memory.
    let mut cd = unsafe { std::mem::zeroed::<q4vk_context_desc>() };
    unsafe { q4vk_context_desc_default(&mut cd) };
    cd.flags = Q4VK_CONTEXT_CPU;
    let mut cpu = std::ptr::null_mut();
    assert_eq!(unsafe { q4vk_context_create(&cd, &mut cpu) }, Q4VK_OK);
    let mut info = poison();
    let status = unsafe { q4vk_matrix_footprint(cpu, &desc, &mut info) };
    assert_eq!(status, Q4VK_ERROR_UNSUPPORTED, "{}", last_error());
    assert!(last_error().contains("host memory"), "{}", last_error());
    assert_eq!(info.device_bytes, 0xDEAD);
    unsafe { q4vk_context_destroy(cpu) };
    // The plan's matrix bytes (what a GEMV reads) never exceed the footprint.
    let mat = upload_q4(&gpu, &d);
    let mut plan = unsafe { std::mem::zeroed::<q4vk_gemv_plan_info>() };
    plan.struct_size = std::mem::size_of::<q4vk_gemv_plan_info>() as u32;
    assert_eq!(
        unsafe { q4vk_gemv_plan(gpu.ctx, mat, 1, 0, 0, &mut plan) },
        Q4VK_OK
    );
    let mut info = poison();
    assert_eq!(
        unsafe { q4vk_matrix_footprint(gpu.ctx, &desc, &mut info) },
        Q4VK_OK
    );
    assert!(plan.matrix_bytes <= info.device_bytes);
    unsafe { q4vk_matrix_destroy(mat) };
}

/// `q4vk_context_memory` of `ctx`.
fn context_memory(ctx: *mut q4vk_context) -> q4vk_context_memory_info {
    let mut info = unsafe { std::mem::zeroed::<q4vk_context_memory_info>() };
    info.struct_size = std::mem::size_of::<q4vk_context_memory_info>() as u32;
    let status = unsafe { q4vk_context_memory(ctx, &mut info) };
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    info
}

#[test]
fn a_context_counts_what_it_holds() {
    let gpu = Gpu::new(false);
    let fresh = context_memory(gpu.ctx);
    assert_eq!((fresh.pipelines, fresh.gemv_buffer_bytes), (0, 0));
    let mut rng = Rng(0xC0);
    let d = random_q4(&mut rng, 100, 512, 128, false, false);
    let mat = upload_q4(&gpu, &d);
    let x = rng.vec(512 * 9);
    assert!(check_gemv(&gpu, mat, &d, &x, 9) < 1e-5);
    let used = context_memory(gpu.ctx);
    assert!(used.pipelines >= 1, "{used:?}");
    // x and y of 9 rows at least, in allocations of the driver's size.
    assert!(used.gemv_buffer_bytes >= 4 * 9 * (512 + 100), "{used:?}");
    let with_push = gpu.context().device.push_descriptor.is_some();
    assert_eq!(used.descriptor_sets == 0, with_push, "{used:?}");
    unsafe { q4vk_matrix_destroy(mat) };
    assert_eq!(
        unsafe { q4vk_context_memory(gpu.ctx, std::ptr::null_mut()) },
        Q4VK_ERROR_NULL_POINTER
    );
    // A CPU context holds none of it.
    let mut cd = unsafe { std::mem::zeroed::<q4vk_context_desc>() };
    unsafe { q4vk_context_desc_default(&mut cd) };
    cd.flags = Q4VK_CONTEXT_CPU;
    let mut cpu = std::ptr::null_mut();
    assert_eq!(unsafe { q4vk_context_create(&cd, &mut cpu) }, Q4VK_OK);
    let info = context_memory(cpu);
    assert_eq!(
        (
            info.pipelines,
            info.pipeline_cache_bytes,
            info.gemv_buffer_bytes,
            info.descriptor_sets
        ),
        (0, 0, 0, 0)
    );
    unsafe { q4vk_context_destroy(cpu) };
}
