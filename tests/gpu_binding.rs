//! Bindings (`q4vk_gemv_binding_create`, `q4vk_cmd_gemv_bound`) on a device without
//! `VK_KHR_push_descriptor` (forced with the kill switch; this binary holds only such
//! tests because the switch is process-wide), validation on: a command buffer recorded
//! once with a binding is submitted again and again with new x, each time right, while
//! thousands of other GEMVs take the context's ring of sets round in between (a command
//! buffer recorded with `q4vk_cmd_gemv` would have its set rewritten); a workspace where
//! the call has a pre-pass (`Q4VK_INTDOT=1`: the digits). A binding refuses another
//! context and a destroyed matrix; bad arguments are refused as `q4vk_cmd_gemv` refuses
//! them, writing nothing.

mod gpu_support;
use ash::vk;
use ash::vk::Handle;
use gpu_support::*;
use q4vk::cpu::reference;
use q4vk::ffi::binding::*;
use q4vk::ffi::gemv::*;
use q4vk::ffi::matrix::{q4vk_matrix, q4vk_matrix_destroy};
use q4vk::ffi::status::*;
use q4vk::vk::memory::{Buffer, MemoryKind};

/// `q4vk_gemv_args` of m rows of dense x in `xb` into `yb`, with `workspace` (null: none).
fn args(
    xb: &Buffer,
    yb: &Buffer,
    (n, k, m): (usize, usize, usize),
    ws: Option<&Buffer>,
    ws_bytes: u64,
) -> q4vk_gemv_args {
    let mut a = unsafe { std::mem::zeroed::<q4vk_gemv_args>() };
    unsafe { q4vk_gemv_args_default(&mut a) };
    a.m = m as u32;
    a.x = q4vk_buffer_ref {
        buffer: xb.buffer.as_raw(),
        offset: 0,
        range: (4 * m * k) as u64,
    };
    a.y = q4vk_buffer_ref {
        buffer: yb.buffer.as_raw(),
        offset: 0,
        range: (4 * m * n) as u64,
    };
    if let Some(w) = ws {
        a.workspace = q4vk_buffer_ref {
            buffer: w.buffer.as_raw(),
            offset: 0,
            range: ws_bytes,
        };
    }
    a
}

fn bytes_of(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|f| f.to_le_bytes()).collect()
}

#[test]
fn a_recorded_binding_replays_after_the_ring_came_round() {
    let gpu = Gpu::with_env("Q4VK_NO_PUSH_DESCRIPTORS", "1", false);
    let ctx = gpu.context();
    assert!(ctx.device.push_descriptor.is_none());
    let d = &ctx.device.device;
    let mut rng = Rng(0xB1D);
    let (n, k, m) = (40usize, 256usize, 3usize);
    let data = random_q4(&mut rng, n, k, 64, true, false);
    let mat = upload_q4(&gpu, &data);
    let xb = Buffer::new(
        &ctx.device,
        (4 * m * k) as u64,
        MemoryKind::Upload,
        "test x",
    )
    .unwrap();
    let yb = Buffer::new(
        &ctx.device,
        (4 * m * n) as u64,
        MemoryKind::Readback,
        "test y",
    )
    .unwrap();
    let mut ws_bytes = 0u64;
    let status = unsafe { q4vk_gemv_workspace_size(gpu.ctx, mat, m as u32, 0, &mut ws_bytes) };
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    let wb = (ws_bytes > 0)
        .then(|| Buffer::new(&ctx.device, ws_bytes, MemoryKind::Device, "test workspace").unwrap());
    let a = args(&xb, &yb, (n, k, m), wb.as_ref(), ws_bytes);
    let mut binding: *mut q4vk_gemv_binding = std::ptr::null_mut();
    let status = unsafe { q4vk_gemv_binding_create(gpu.ctx, mat, &a, &mut binding) };
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    let (pool, cmd) = command_buffer(gpu.context());
    unsafe {
        d.begin_command_buffer(cmd, &vk::CommandBufferBeginInfo::default())
            .unwrap();
        // x's host writes before the GEMV; its y before the host reads.
        let host_to_shader = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::HOST_WRITE)
            .dst_access_mask(vk::AccessFlags::SHADER_READ)];
        d.cmd_pipeline_barrier(
            cmd,
            vk::PipelineStageFlags::HOST,
            vk::PipelineStageFlags::COMPUTE_SHADER,
            vk::DependencyFlags::empty(),
            &host_to_shader,
            &[],
            &[],
        );
    }
    let status = unsafe { q4vk_cmd_gemv_bound(gpu.ctx, binding, cmd.as_raw() as *mut _) };
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    unsafe {
        let [src, dst] = q4vk::vk::submit::SHADER_TO_HOST;
        q4vk::vk::submit::record_barrier(d, cmd, src, dst);
        d.end_command_buffer(cmd).unwrap();
    }
    let fence = unsafe { d.create_fence(&vk::FenceCreateInfo::default(), None) }.unwrap();
    // GEMVs on another matrix, each taking a set of the ring.
    let other = random_q4(&mut rng, 8, 64, 32, false, false);
    let other_mat = upload_q4(&gpu, &other);
    let other_x = rng.vec(64);
    let ring = Q4VK_CMD_GEMV_SET_RING as usize;
    for round in 0..3 {
        let x = rng.vec(m * k);
        xb.write(0, &bytes_of(&x));
        yb.write(0, &bytes_of(&vec![f32::NAN; m * n]));
        let submit = [vk::SubmitInfo::default().command_buffers(std::slice::from_ref(&cmd))];
        unsafe {
            d.queue_submit(ctx.device.queue, &submit, fence).unwrap();
            d.wait_for_fences(&[fence], true, u64::MAX).unwrap();
            d.reset_fences(&[fence]).unwrap();
        }
        let y = read_f32s(&yb, m * n);
        assert!(
            y.iter().all(|v| v.is_finite()),
            "round {round}: y not written"
        );
        let err = reference::relative_error(&y, &reference::gemv(&data, &x, m));
        assert!(err < 1e-5, "round {round}: {err:e}");
        // The ring comes round: every set it holds is rewritten.
        for _ in 0..ring + 8 {
            let (status, _) = gemv_c(gpu.ctx, other_mat, &other_x, 8, 1);
            assert_eq!(status, Q4VK_OK, "{}", last_error());
        }
    }
    // The ring is full; the binding's sets are not in it.
    let mut memory =
        unsafe { std::mem::zeroed::<q4vk::ffi::footprint::q4vk_context_memory_info>() };
    memory.struct_size = std::mem::size_of_val(&memory) as u32;
    let status = unsafe { q4vk::ffi::footprint::q4vk_context_memory(gpu.ctx, &mut memory) };
    assert_eq!(status, Q4VK_OK);
    assert_eq!(memory.descriptor_sets, Q4VK_CMD_GEMV_SET_RING);
    assert!(memory.descriptor_pools >= 1);
    unsafe {
        d.destroy_fence(fence, None);
        d.destroy_command_pool(pool, None);
        q4vk_gemv_binding_destroy(binding);
        q4vk_matrix_destroy(mat);
        q4vk_matrix_destroy(other_mat);
    }
}

/// Records `binding` into a fresh command buffer of `gpu` and returns the status.
fn record_status(gpu: &Gpu, on: &Gpu, binding: *const q4vk_gemv_binding) -> q4vk_status {
    let (pool, cmd) = command_buffer(gpu.context());
    let d = &gpu.context().device.device;
    unsafe {
        d.begin_command_buffer(cmd, &vk::CommandBufferBeginInfo::default())
            .unwrap();
        let s = q4vk_cmd_gemv_bound(on.ctx, binding, cmd.as_raw() as *mut _);
        d.end_command_buffer(cmd).unwrap();
        d.destroy_command_pool(pool, None);
        s
    }
}

#[test]
fn bindings_refuse_another_context_a_destroyed_matrix_and_bad_arguments() {
    let gpu = Gpu::with_env("Q4VK_NO_PUSH_DESCRIPTORS", "1", false);
    let other = Gpu::with_env("Q4VK_NO_PUSH_DESCRIPTORS", "1", false);
    let ctx = gpu.context();
    let mut rng = Rng(0xBAD);
    let (n, k) = (16usize, 64usize);
    let data = random_q4(&mut rng, n, k, 32, false, false);
    let mat: *mut q4vk_matrix = upload_q4(&gpu, &data);
    let xb = Buffer::new(&ctx.device, (4 * k) as u64, MemoryKind::Upload, "test x").unwrap();
    let yb = Buffer::new(&ctx.device, (4 * n) as u64, MemoryKind::Readback, "test y").unwrap();
    let good = args(&xb, &yb, (n, k, 1), None, 0);
    let sentinel = std::ptr::dangling_mut::<q4vk_gemv_binding>();

    // Bad arguments: refused as q4vk_cmd_gemv refuses them, `out` untouched.
    let mut small_y = good;
    small_y.y.range = 8;
    let mut whole = good;
    whole.x.range = vk::WHOLE_SIZE;
    let mut bad_flags = good;
    bad_flags.flags = 0x8000_0000;
    for (a, want, why) in [
        (small_y, Q4VK_ERROR_BUFFER_TOO_SMALL, "args->y.range"),
        (whole, Q4VK_ERROR_INVALID_ARGUMENT, "VK_WHOLE_SIZE"),
        (bad_flags, Q4VK_ERROR_INVALID_ARGUMENT, "flags"),
    ] {
        let mut out = sentinel;
        let status = unsafe { q4vk_gemv_binding_create(gpu.ctx, mat, &a, &mut out) };
        assert_eq!(status, want, "{why}: {}", last_error());
        assert!(last_error().contains(why), "{}", last_error());
        assert_eq!(out, sentinel, "out written on failure ({why})");
    }
    let status = unsafe { q4vk_gemv_binding_create(gpu.ctx, mat, &good, std::ptr::null_mut()) };
    assert_eq!(status, Q4VK_ERROR_NULL_POINTER);

    let mut binding: *mut q4vk_gemv_binding = std::ptr::null_mut();
    let status = unsafe { q4vk_gemv_binding_create(gpu.ctx, mat, &good, &mut binding) };
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    assert_eq!(
        record_status(&gpu, &gpu, binding),
        Q4VK_OK,
        "{}",
        last_error()
    );
    // Another context (of the same device) did not make it.
    assert_eq!(
        record_status(&gpu, &other, binding),
        Q4VK_ERROR_INVALID_ARGUMENT
    );
    assert!(last_error().contains("another context"), "{}", last_error());
    assert_eq!(
        record_status(&gpu, &gpu, std::ptr::null()),
        Q4VK_ERROR_NULL_POINTER
    );
    // Its matrix destroyed: refused, nothing recorded.
    unsafe { q4vk_matrix_destroy(mat) };
    assert_eq!(
        record_status(&gpu, &gpu, binding),
        Q4VK_ERROR_INVALID_ARGUMENT
    );
    assert!(last_error().contains("destroyed"), "{}", last_error());
    unsafe { q4vk_gemv_binding_destroy(binding) };
    unsafe { q4vk_gemv_binding_destroy(std::ptr::null_mut()) };
}

/// Two contexts adopting one host device, and a binding made on the first: only the first
/// records it (the second is of the same device, and after the first is destroyed it may
/// even sit at the first one's address: the binding holds the first one's token, which no
/// later context's can equal).
#[test]
fn a_binding_is_recorded_on_the_context_that_made_it_alone() {
    use q4vk::vk::binding::Binding;
    use q4vk::vk::context::{Context, ContextConfig};
    use q4vk::vk::device::{Device, DeviceOptions};
    use q4vk::vk::gemv::{EpilogueOperands, GemvParams};
    use q4vk::vk::instance::Instance;
    use q4vk::vk::matrix::DeviceMatrix;
    use std::sync::Arc;
    let instance = Arc::new(Instance::create(false, Arc::new(counting_logger())).unwrap());
    let host = Device::create(instance, -1, DeviceOptions::default()).unwrap();
    let adopted = || {
        let config = ContextConfig {
            adopt: Some(adoption_of(&host, Vec::new(), Default::default())),
            no_push_descriptors: true,
            ..Default::default()
        };
        Context::new(config, counting_logger()).unwrap()
    };
    let (first, second) = (adopted(), adopted());
    let mut rng = Rng(0xB1D);
    let (n, k) = (16usize, 64usize);
    let mat = DeviceMatrix::new(
        &first,
        &random_q4(&mut rng, n, k, 32, false, false),
        None,
        None,
    )
    .unwrap();
    let xb = Buffer::new(&first.device, (4 * k) as u64, MemoryKind::Upload, "test x").unwrap();
    let yb = Buffer::new(
        &first.device,
        (4 * n) as u64,
        MemoryKind::Readback,
        "test y",
    )
    .unwrap();
    let p = GemvParams::dense(1, k as u64, n as u64);
    let ops = EpilogueOperands::default();
    let binding = Binding::new(
        &first,
        &mat,
        (whole_range(&xb), whole_range(&yb)),
        &ops,
        &p,
        None,
    )
    .unwrap();
    assert!(binding.made_on(&first));
    assert!(!binding.made_on(&second));
    drop(first);
    assert!(!binding.made_on(&second));
    let third = adopted();
    assert!(!binding.made_on(&third));
    drop((binding, mat, xb, yb));
}
