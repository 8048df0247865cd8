//! `q4vk_matrix_create_recorded` on the system's Vulkan device (lavapipe in CI), validation
//! on: the upload of every buffer of a matrix (zero points, or GGUF blocks in their native
//! bytes; split into parts) is recorded into the host's command buffer from the host's
//! staging memory, of exactly `q4vk_matrix_footprint_info.upload_bytes`; once the host
//! submitted it, GEMVs match the f64 reference. Device memory q4vk maps is written in place
//! (no staging needed). A staging range one byte short is refused with nothing recorded;
//! bad arguments write nothing.

mod gpu_support;
use ash::vk;
use ash::vk::Handle;
use gpu_support::*;
use q4vk::ffi::context::*;
use q4vk::ffi::footprint::*;
use q4vk::ffi::gemv::q4vk_buffer_ref;
use q4vk::ffi::matrix::*;
use q4vk::ffi::status::*;
use q4vk::ffi::upload::*;
use q4vk::vk::memory::{Buffer, MemoryKind};
use std::ffi::c_void;

/// The footprint of `desc` on `gpu`'s context.
fn footprint_of(gpu: &Gpu, desc: &q4vk_matrix_desc) -> q4vk_matrix_footprint_info {
    let mut f = unsafe { std::mem::zeroed::<q4vk_matrix_footprint_info>() };
    f.struct_size = std::mem::size_of::<q4vk_matrix_footprint_info>() as u32;
    assert_eq!(
        unsafe { q4vk_matrix_footprint(gpu.ctx, desc, &mut f) },
        Q4VK_OK
    );
    f
}

/// Records the upload of `desc` into a fresh command buffer with `range` bytes of staging,
/// submits it where the call succeeded, and returns the status and the matrix.
fn recorded(gpu: &Gpu, desc: &q4vk_matrix_desc, range: u64) -> (q4vk_status, *mut q4vk_matrix) {
    let ctx = gpu.context();
    let d = &ctx.device.device;
    let staging = Buffer::new(
        &ctx.device,
        range.max(16),
        MemoryKind::Staging,
        "test staging",
    )
    .unwrap();
    let (pool, cmd) = command_buffer(ctx);
    let s = q4vk_staging {
        buffer: q4vk_buffer_ref {
            buffer: staging.buffer.as_raw(),
            offset: 0,
            range,
        },
        mapped: staging.mapped().unwrap().cast(),
    };
    let sentinel = std::ptr::dangling_mut::<q4vk_matrix>();
    let mut mat = sentinel;
    unsafe {
        d.begin_command_buffer(cmd, &vk::CommandBufferBeginInfo::default())
            .unwrap();
        let status =
            q4vk_matrix_create_recorded(gpu.ctx, desc, cmd.as_raw() as *mut _, &s, &mut mat);
        d.end_command_buffer(cmd).unwrap();
        if status == Q4VK_OK {
            let submit = [vk::SubmitInfo::default().command_buffers(std::slice::from_ref(&cmd))];
            d.queue_submit(ctx.device.queue, &submit, vk::Fence::null())
                .unwrap();
            d.queue_wait_idle(ctx.device.queue).unwrap();
        } else {
            assert_eq!(mat, sentinel, "out written on failure");
        }
        d.destroy_command_pool(pool, None);
        (status, mat)
    }
}

#[test]
fn a_recorded_upload_runs_after_the_hosts_submission() {
    let mut gpu = Gpu::new(false);
    let mut rng = Rng(0x5EC);
    for staged in [true, false] {
        gpu.context_mut().limits.staged_uploads = staged;
        gpu.context_mut().limits.max_part_bytes = 16 * 1024;
        let data = random_q4(&mut rng, 77, 640, 64, true, false);
        let desc = q4_desc(&data);
        let f = footprint_of(&gpu, &desc);
        assert_eq!(f.upload_bytes > 0, staged, "{f:?}");
        if staged {
            // Every buffer at a multiple of 16 bytes: at least the data, at most 15 more each.
            assert!(f.upload_bytes <= f.device_bytes + 15 * u64::from(f.buffers));
            let (status, _) = recorded(&gpu, &desc, f.upload_bytes - 1);
            assert_eq!(status, Q4VK_ERROR_BUFFER_TOO_SMALL, "{}", last_error());
            assert!(last_error().contains("upload_bytes"), "{}", last_error());
        }
        let (status, mat) = recorded(&gpu, &desc, f.upload_bytes.max(16));
        assert_eq!(status, Q4VK_OK, "{}", last_error());
        for m in [1usize, 12] {
            let x = rng.vec(m * 640);
            assert!(
                check_gemv(&gpu, mat, &data, &x, m) < 1e-5,
                "staged {staged} m {m}"
            );
        }
        unsafe { q4vk_matrix_destroy(mat) };
    }
}

#[test]
fn bad_staging_is_refused() {
    let gpu = Gpu::new(false);
    let mut rng = Rng(0x5E);
    let data = random_q4(&mut rng, 8, 64, 32, false, false);
    let desc = q4_desc(&data);
    let mut out = std::ptr::dangling_mut::<q4vk_matrix>();
    let cmd = std::ptr::dangling_mut::<c_void>();
    let good = q4vk_staging {
        buffer: q4vk_buffer_ref {
            buffer: 1,
            offset: 0,
            range: 64,
        },
        mapped: cmd,
    };
    let mut whole = good;
    whole.buffer.range = vk::WHOLE_SIZE;
    let mut null_buffer = good;
    null_buffer.buffer.buffer = 0;
    let mut null_map = good;
    null_map.mapped = std::ptr::null_mut();
    for (s, want, why) in [
        (whole, Q4VK_ERROR_INVALID_ARGUMENT, "range"),
        (null_buffer, Q4VK_ERROR_NULL_POINTER, "staging->buffer"),
        (null_map, Q4VK_ERROR_NULL_POINTER, "staging->mapped"),
    ] {
        let status = unsafe { q4vk_matrix_create_recorded(gpu.ctx, &desc, cmd, &s, &mut out) };
        assert_eq!(status, want, "{why}: {}", last_error());
        assert!(last_error().contains(why), "{}", last_error());
    }
    let status =
        unsafe { q4vk_matrix_create_recorded(gpu.ctx, &desc, cmd, std::ptr::null(), &mut out) };
    assert_eq!(status, Q4VK_ERROR_NULL_POINTER);
    let status = unsafe {
        q4vk_matrix_create_recorded(gpu.ctx, &desc, std::ptr::null_mut(), &good, &mut out)
    };
    assert_eq!(status, Q4VK_ERROR_NULL_POINTER);
    assert_eq!(out, std::ptr::dangling_mut::<q4vk_matrix>());
    // A CPU context has no device to upload to.
    let mut cd = unsafe { std::mem::zeroed::<q4vk_context_desc>() };
    unsafe { q4vk_context_desc_default(&mut cd) };
    cd.flags = Q4VK_CONTEXT_CPU;
    let mut cpu = std::ptr::null_mut();
    assert_eq!(unsafe { q4vk_context_create(&cd, &mut cpu) }, Q4VK_OK);
    let status = unsafe { q4vk_matrix_create_recorded(cpu, &desc, cmd, &good, &mut out) };
    assert_eq!(status, Q4VK_ERROR_UNSUPPORTED, "{}", last_error());
    unsafe { q4vk_context_destroy(cpu) };
}

/// GGUF blocks kept in their native bytes (Q5_0: three streams per part, matrix in parts)
/// upload the same way, from exactly `upload_bytes` of staging.
#[test]
fn gguf_blocks_upload_recorded() {
    let mut gpu = Gpu::new(false);
    gpu.context_mut().limits.staged_uploads = true;
    gpu.context_mut().limits.max_part_bytes = 4 * 1024;
    let mut rng = Rng(0x5ED);
    let (n, k) = (77usize, 640usize);
    let mut blocks: Vec<u8> = (0..n * k / 32 * 22).map(|_| rng.next_u64() as u8).collect();
    for b in blocks.chunks_exact_mut(22) {
        b[..2].copy_from_slice(&half::f16::from_f32(0.004 + 0.03 * rng.f32().abs()).to_le_bytes());
    }
    let mut desc = unsafe { std::mem::zeroed::<q4vk_matrix_desc>() };
    unsafe { q4vk_matrix_desc_default(&mut desc) };
    desc.source = Q4VK_SOURCE_GGUF_Q5_0;
    (desc.n, desc.k) = (n as u64, k as u64);
    desc.weight = blocks.as_ptr().cast();
    desc.weight_bytes = blocks.len();
    let f = footprint_of(&gpu, &desc);
    assert!(
        f.buffers > 3,
        "{f:?}: the matrix should be in several parts"
    );
    let (status, _) = recorded(&gpu, &desc, f.upload_bytes - 1);
    assert_eq!(status, Q4VK_ERROR_BUFFER_TOO_SMALL, "{}", last_error());
    let (status, mat) = recorded(&gpu, &desc, f.upload_bytes);
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    let mut w = vec![0f32; n * k];
    let s =
        unsafe { q4vk::ffi::import::q4vk_matrix_dequantize(&desc, w.as_mut_ptr(), 4 * w.len()) };
    assert_eq!(s, Q4VK_OK);
    let x = rng.vec(k);
    let (status, y) = gemv_c(gpu.ctx, mat, &x, n, 1);
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    let want = q4vk::cpu::reference::gemv_dense(&w, &x, n, k, 1);
    assert!(y.iter().all(|v| v.is_finite()));
    assert!(q4vk::cpu::reference::relative_error(&y, &want) < 1e-5);
    unsafe { q4vk_matrix_destroy(mat) };
}
