//! Devices without VK_KHR_push_descriptor: x/y descriptor sets come from the context's
//! cache (forced here with the kill switch; this binary holds only this test because the
//! switch is process-wide). Validation on.

mod gpu_support;
use gpu_support::*;
use q4vk::ffi::matrix::q4vk_matrix_destroy;

#[test]
fn gemv_without_push_descriptors() {
    let gpu = Gpu::with_env("Q4VK_NO_PUSH_DESCRIPTORS", "1", false);
    assert!(gpu.context().device.push_descriptor.is_none());
    assert!(gpu.context().xy_sets.is_some());
    let mut rng = Rng(77);
    // Growing m and n reallocates the staging buffers, which drops their cached sets.
    for &(n, k, m) in &[
        (10usize, 64usize, 1usize),
        (10, 64, 1),
        (50, 130, 2),
        (300, 512, 8),
        (20, 64, 1),
    ] {
        let data = random_q4(&mut rng, n, k, 64, m % 2 == 0, false);
        let mat = upload_q4(&gpu, &data);
        let x = rng.vec(m * k);
        let err = check_gemv(&gpu, mat, &data, &x, m);
        assert!(err < 1e-5, "{err:e}");
        unsafe { q4vk_matrix_destroy(mat) };
    }
}

/// The x/y descriptor sets are a bounded ring: 3 × `Q4VK_CMD_GEMV_SET_RING` recorded GEMVs
/// with distinct x offsets (each command buffer reset after 256 of them, as the contract
/// allows) allocate exactly `Q4VK_CMD_GEMV_SET_RING` sets; then GEMVs at different x and
/// y offsets in one submitted command buffer each read and write their own ranges.
#[test]
fn descriptor_sets_are_a_bounded_ring() {
    use ash::vk;
    use ash::vk::Handle;
    use q4vk::cpu::reference;
    use q4vk::ffi::gemv::*;
    use q4vk::ffi::status::Q4VK_OK;
    use q4vk::vk::memory::{Buffer, MemoryKind};

    let gpu = Gpu::with_env("Q4VK_NO_PUSH_DESCRIPTORS", "1", false);
    let ctx = gpu.context();
    let d = &ctx.device.device;
    let mut rng = Rng(5);
    let (n, k) = (40usize, 96usize);
    let data = random_q4(&mut rng, n, k, 32, false, false);
    let mat = upload_q4(&gpu, &data);
    let align = ctx.device.info.storage_alignment.max(4) as usize;
    let x_slot = (4 * k).next_multiple_of(align);
    let y_slot = (4 * n).next_multiple_of(align);
    let slots = 64usize;
    let xb = Buffer::new(
        &ctx.device,
        (slots * x_slot) as u64,
        MemoryKind::Upload,
        "test x",
    )
    .unwrap();
    let yb = Buffer::new(
        &ctx.device,
        (slots * y_slot) as u64,
        MemoryKind::Readback,
        "test y",
    )
    .unwrap();
    let (pool, cmd) = command_buffer(ctx);
    let args_at = |xi: usize, yi: usize| {
        let mut a = unsafe { std::mem::zeroed::<q4vk_gemv_args>() };
        unsafe { q4vk_gemv_args_default(&mut a) };
        a.x = q4vk_buffer_ref {
            buffer: xb.buffer.as_raw(),
            offset: (xi * x_slot) as u64,
            range: (4 * k) as u64,
        };
        a.y = q4vk_buffer_ref {
            buffer: yb.buffer.as_raw(),
            offset: (yi * y_slot) as u64,
            range: (4 * n) as u64,
        };
        a
    };
    let begin = || unsafe {
        d.reset_command_buffer(cmd, vk::CommandBufferResetFlags::empty())
            .unwrap();
        d.begin_command_buffer(cmd, &vk::CommandBufferBeginInfo::default())
            .unwrap();
    };
    let record = |cmd: vk::CommandBuffer, a: &q4vk_gemv_args| {
        let status = unsafe { q4vk_cmd_gemv(gpu.ctx, mat, cmd.as_raw() as *mut _, a) };
        assert_eq!(status, Q4VK_OK, "q4vk_cmd_gemv: {}", last_error());
    };
    let ring = Q4VK_CMD_GEMV_SET_RING as usize;
    for batch in 0..3 * ring / 256 {
        begin();
        for i in 0..256 {
            record(cmd, &args_at((batch * 256 + i) % slots, i % slots));
        }
        unsafe { d.end_command_buffer(cmd).unwrap() };
    }
    let allocated = ctx.xy_sets.as_ref().unwrap().lock().unwrap().allocated();
    assert_eq!(allocated, ring, "sets allocated after {} calls", 3 * ring);

    // Four GEMVs with their own x and y ranges in one command buffer, submitted.
    let xs: Vec<Vec<f32>> = (0..4).map(|_| rng.vec(k)).collect();
    for (i, x) in xs.iter().enumerate() {
        let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_ne_bytes()).collect();
        xb.write(3 * i * x_slot, &bytes);
    }
    yb.write(0, &vec![0xFFu8; slots * y_slot]); // NaN everywhere
    unsafe {
        submit_and_wait(d, ctx.device.queue, pool, |c| {
            for i in 0..4 {
                record(c, &args_at(3 * i, 5 * i));
            }
        });
        d.destroy_command_pool(pool, None);
    }
    for (i, x) in xs.iter().enumerate() {
        let mut bytes = vec![0u8; 4 * n];
        yb.read(5 * i * y_slot, &mut bytes);
        let y: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_ne_bytes(b.try_into().unwrap()))
            .collect();
        let err = reference::relative_error(&y, &reference::gemv(&data, x, 1));
        assert!(err < 1e-5, "GEMV {i}: relative error {err:e}");
    }
    drop((xb, yb));
    unsafe { q4vk_matrix_destroy(mat) };
}
