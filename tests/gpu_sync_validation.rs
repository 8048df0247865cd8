//! q4vk's barriers under the validation layer's synchronization validation (any hazard is
//! a message, and any message fails): GEMVs of m = 1..3 (the integer dot-product GEMV
//! with its digits pre-pass where the device runs it), the GEMM, host GEMVs on f16 x,
//! matrices created and destroyed between calls, and epilogues whose kernels read y's own
//! bytes (f16 y, a residual in place) in several passes, a gate+up pair in one multi call,
//! on one context and one thread. Its own
//! binary: the layer reads `VK_LAYER_ENABLES` when an instance is created, so it is set
//! before any context of this process exists. (The threads of
//! `gpu_reliability::eight_threads_share_a_context` run without it: see there why.)

mod gpu_support;
use ash::vk::Handle;
use gpu_support::*;
use q4vk::ffi::gemv::*;
use q4vk::ffi::matrix::{q4vk_matrix, q4vk_matrix_destroy};
use q4vk::ffi::status::Q4VK_OK;
use q4vk::vk::memory::{Buffer, MemoryKind};

#[test]
fn calls_and_matrix_lifetimes_are_free_of_hazards() {
    std::env::set_var(
        "VK_LAYER_ENABLES",
        "VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT",
    );
    for portable in [false, true] {
        let gpu = Gpu::new(portable);
        let mut rng = Rng(17);
        let shared = shared_test_matrices(&mut rng);
        let mats: Vec<_> = shared.iter().map(|d| upload_q4(&gpu, d)).collect();
        for i in 0..60usize {
            let which = i % shared.len();
            let m = match i % 4 {
                3 => 40,
                r => 1 + r,
            };
            let x = rng.vec(m * shared[which].shape.k);
            let err = check_gemv(&gpu, mats[which], &shared[which], &x, m);
            assert!(
                err < 1e-5,
                "portable {portable} gemv {i} (m = {m}): error {err}"
            );
            if i % 10 == 0 {
                let own = random_q4(&mut rng, 33, 64, 32, i % 20 == 0, false);
                let mat = upload_q4(&gpu, &own);
                let x = rng.vec(64);
                assert!(check_gemv(&gpu, mat, &own, &x, 1) < 1e-5);
                unsafe { q4vk_matrix_destroy(mat) };
            }
        }
        epilogues_in_passes(&gpu, mats[0], &shared[0], &mut rng);
        gate_up_in_one_call(&gpu, &mut rng);
        y_over_an_earlier_workspace(&gpu, &mut rng);
        for mat in mats {
            unsafe { q4vk_matrix_destroy(mat) };
        }
    }
}

/// Calls whose kernels read y's own bytes (an f16 y written through its words, a residual
/// that is y) at m = 1, 10 and 40 (several passes of the GEMV, or the GEMM), with a
/// workspace where the call has a pre-pass: q4vk orders their dispatches; y is written.
fn epilogues_in_passes(
    gpu: &Gpu,
    mat: *mut q4vk_matrix,
    data: &q4vk::quant::q4::Q4Data,
    rng: &mut Rng,
) {
    let (n, k) = (data.shape.n, data.shape.k);
    let ctx = gpu.context();
    for m in [1usize, 10, 40] {
        for flags in [
            Q4VK_GEMV_F16_OUTPUT | Q4VK_GEMV_BIAS | Q4VK_GEMV_SILU_GATE,
            Q4VK_GEMV_RESIDUAL,
            Q4VK_GEMV_F16_OUTPUT | Q4VK_GEMV_RESIDUAL,
        ] {
            let f16 = flags & Q4VK_GEMV_F16_OUTPUT != 0;
            let y_bytes = if f16 {
                4 * (m * n).div_ceil(2)
            } else {
                4 * m * n
            };
            let buffer = |bytes: usize, values: &[f32], name: &str| {
                let b = Buffer::new(&ctx.device, bytes as u64, MemoryKind::Readback, name).unwrap();
                let raw: Vec<u8> = match f16 {
                    true => values
                        .iter()
                        .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
                        .collect(),
                    false => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
                };
                b.write(0, &raw[..raw.len().min(bytes)]);
                b
            };
            let x = Buffer::new(
                &ctx.device,
                (4 * m * k) as u64,
                MemoryKind::Readback,
                "test x",
            )
            .unwrap();
            let xs: Vec<u8> = rng
                .vec(m * k)
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect();
            x.write(0, &xs);
            let y = buffer(y_bytes, &rng.vec(m * n), "test y");
            let gate = buffer(y_bytes, &rng.vec(m * n), "test gate");
            let bias = Buffer::new(
                &ctx.device,
                (4 * n) as u64,
                MemoryKind::Readback,
                "test bias",
            )
            .unwrap();
            bias.write(
                0,
                &rng.vec(n)
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect::<Vec<u8>>(),
            );
            let mut a = unsafe { std::mem::zeroed::<q4vk_gemv_args>() };
            unsafe { q4vk_gemv_args_default(&mut a) };
            a.flags = flags;
            a.m = m as u32;
            a.x = buffer_ref(&x, 4 * m * k);
            a.y = buffer_ref(&y, y_bytes);
            if flags & Q4VK_GEMV_BIAS != 0 {
                a.bias = buffer_ref(&bias, 4 * n);
            }
            if flags & Q4VK_GEMV_SILU_GATE != 0 {
                a.gate = buffer_ref(&gate, y_bytes);
            }
            if flags & Q4VK_GEMV_RESIDUAL != 0 {
                a.residual = a.y;
            }
            let mut ws_bytes = 0u64;
            let status =
                unsafe { q4vk_gemv_workspace_size(gpu.ctx, mat, m as u32, flags, &mut ws_bytes) };
            assert_eq!(status, Q4VK_OK, "{}", last_error());
            let ws = (ws_bytes > 0).then(|| {
                Buffer::new(&ctx.device, ws_bytes, MemoryKind::Device, "test workspace").unwrap()
            });
            if let Some(w) = &ws {
                a.workspace = buffer_ref(w, ws_bytes as usize);
            }
            assert_eq!(
                run_cmd(gpu, mat, &a),
                Q4VK_OK,
                "m = {m}, flags {flags:#x}: {}",
                last_error()
            );
            let words = read_words(&y, y_bytes / 4);
            let finite = match f16 {
                true => words
                    .iter()
                    .flat_map(|w| [*w as u16, (*w >> 16) as u16])
                    .take(m * n)
                    .all(|h| half::f16::from_bits(h).is_finite()),
                false => words.iter().all(|w| f32::from_bits(*w).is_finite()),
            };
            assert!(finite, "m = {m}, flags {flags:#x}: y not finite");
        }
    }
}

/// Gate, then up with gate's SiLU, as one `q4vk_cmd_gemv_multi` at m = 1 and 10 (a gate+up
/// pair on the subgroup kernels, with the pre-pass where the device runs one; two calls
/// and a barrier on the portable ones), twice in a row on the same buffers: both outputs
/// written, no hazard.
fn gate_up_in_one_call(gpu: &Gpu, rng: &mut Rng) {
    let (n, k) = (40usize, 256usize);
    let ctx = gpu.context();
    let gate = random_q4(rng, n, k, 64, false, false);
    let up = random_q4(rng, n, k, 64, false, false);
    let mats = [
        upload_q4(gpu, &gate) as *const q4vk::ffi::matrix::q4vk_matrix,
        upload_q4(gpu, &up) as *const _,
    ];
    let filled = |values: &[f32], name: &str| {
        let b = Buffer::new(
            &ctx.device,
            4 * values.len() as u64,
            MemoryKind::Readback,
            name,
        )
        .unwrap();
        let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        b.write(0, &raw);
        b
    };
    for m in [1usize, 10] {
        let x = filled(&rng.vec(m * k), "test x");
        let g = filled(&vec![f32::NAN; m * n], "test gate's y");
        let y = filled(&vec![f32::NAN; m * n], "test y");
        let mut ws_bytes = 0u64;
        let status =
            unsafe { q4vk_gemv_workspace_size(gpu.ctx, mats[0], m as u32, 0, &mut ws_bytes) };
        assert_eq!(status, Q4VK_OK, "{}", last_error());
        let ws = (ws_bytes > 0).then(|| {
            Buffer::new(&ctx.device, ws_bytes, MemoryKind::Device, "test workspace").unwrap()
        });
        let args_to = |out: &Buffer, flags: u32| {
            let mut a = unsafe { std::mem::zeroed::<q4vk_gemv_args>() };
            unsafe { q4vk_gemv_args_default(&mut a) };
            a.m = m as u32;
            a.flags = flags;
            a.x = buffer_ref(&x, 4 * m * k);
            a.y = buffer_ref(out, 4 * m * n);
            if let Some(w) = &ws {
                a.workspace = buffer_ref(w, ws_bytes as usize);
            }
            a
        };
        let mut ua = args_to(&y, Q4VK_GEMV_SILU_GATE);
        ua.gate = buffer_ref(&g, 4 * m * n);
        let args = [args_to(&g, 0), ua];
        for round in 0..2 {
            let status = run_multi(gpu, &mats, &args);
            assert_eq!(status, Q4VK_OK, "m = {m}, round {round}: {}", last_error());
            for (b, what) in [(&g, "gate's y"), (&y, "y")] {
                let v = read_f32s(b, m * n);
                assert!(
                    v.iter().all(|v| v.is_finite()),
                    "m = {m}, round {round}: {what} not written"
                );
            }
        }
    }
    for mat in mats {
        unsafe { q4vk::ffi::matrix::q4vk_matrix_destroy(mat as *mut _) };
    }
}

/// One multi call whose second GEMV writes its y over the first one's workspace (scratch
/// memory a host reuses): where the first has a pre-pass (the integer dot-product GEMV,
/// `Q4VK_INTDOT=1`), its kernel reads the workspace, so the second waits for it.
fn y_over_an_earlier_workspace(gpu: &Gpu, rng: &mut Rng) {
    let (n, k, m) = (40usize, 256usize, 2usize);
    let ctx = gpu.context();
    let data = [
        random_q4(rng, n, k, 64, false, false),
        random_q4(rng, n, k, 64, false, false),
    ];
    let mats = data
        .each_ref()
        .map(|d| upload_q4(gpu, d) as *const q4vk_matrix);
    let mut ws_bytes = 0u64;
    let status = unsafe { q4vk_gemv_workspace_size(gpu.ctx, mats[0], m as u32, 0, &mut ws_bytes) };
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    let y_bytes = (4 * m * n) as u64;
    let scratch_bytes = ws_bytes.max(y_bytes);
    let buffer = |bytes: u64, name: &str| {
        Buffer::new(&ctx.device, bytes, MemoryKind::Readback, name).unwrap()
    };
    let (x, y, scratch) = (
        buffer((4 * m * k) as u64, "test x"),
        buffer(y_bytes, "test y"),
        buffer(scratch_bytes, "test scratch"),
    );
    let raw: Vec<u8> = rng
        .vec(m * k)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    x.write(0, &raw);
    let args_to = |out: q4vk_buffer_ref, workspace: Option<q4vk_buffer_ref>| {
        let mut a = unsafe { std::mem::zeroed::<q4vk_gemv_args>() };
        unsafe { q4vk_gemv_args_default(&mut a) };
        a.m = m as u32;
        a.x = buffer_ref(&x, 4 * m * k);
        a.y = out;
        if let Some(w) = workspace {
            a.workspace = w;
        }
        a
    };
    let first = args_to(
        buffer_ref(&y, y_bytes as usize),
        (ws_bytes > 0).then(|| buffer_ref(&scratch, ws_bytes as usize)),
    );
    let second = args_to(buffer_ref(&scratch, y_bytes as usize), None);
    let status = run_multi(gpu, &mats, &[first, second]);
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    for (b, what) in [(&y, "the first y"), (&scratch, "the second y")] {
        assert!(
            read_f32s(b, m * n).iter().all(|v| v.is_finite()),
            "{what} not written"
        );
    }
    for mat in mats {
        unsafe { q4vk_matrix_destroy(mat as *mut _) };
    }
}

/// The first `bytes` of `b` as the C API names a buffer range.
fn buffer_ref(b: &Buffer, bytes: usize) -> q4vk_buffer_ref {
    q4vk_buffer_ref {
        buffer: b.buffer.as_raw(),
        offset: 0,
        range: bytes as u64,
    }
}
