//! `q4vk_cmd_gemv_multi`: several matrices on one x as one call, validation on. Q, K and V
//! with their biases, and gate then up with the gate's SiLU (the call orders up after gate
//! itself), at m = 1 and 5, without and with a workspace (under `Q4VK_INTDOT=1` the digits
//! pre-pass, run once for all three of Q, K and V: on a device without push descriptors
//! the calls take four sets of the ring, not six), against an f64 reference of
//! `q4vk_matrix_dequantize`'s weights within 1e-5; outputs poisoned first. Bad calls are
//! refused naming the call, recording nothing.

mod gpu_support;
use ash::vk::Handle;
use gpu_support::blocks::{blocks_desc, dequantized, random_blocks};
use gpu_support::*;
use q4vk::ffi::footprint::*;
use q4vk::ffi::gemv::*;
use q4vk::ffi::matrix::*;
use q4vk::ffi::status::*;
use q4vk::import::gguf_blocks::BlockType;
use q4vk::vk::memory::{Buffer, MemoryKind};

/// A host-visible buffer holding `values`.
fn buffer_of(gpu: &Gpu, values: &[f32], name: &str) -> Buffer {
    let b = Buffer::new(
        &gpu.context().device,
        4 * values.len().max(1) as u64,
        MemoryKind::Readback,
        name,
    )
    .unwrap();
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    b.write(0, &bytes);
    b
}

fn whole(b: &Buffer, floats: usize) -> q4vk_buffer_ref {
    q4vk_buffer_ref {
        buffer: b.buffer.as_raw(),
        offset: 0,
        range: 4 * floats as u64,
    }
}

/// `W x` in f64 for `m` rows of x (`[m][k]`) and weights `w` (`[n][k]`): `[m][n]`.
fn product(w: &[f32], x: &[f32], (n, k, m): (usize, usize, usize)) -> Vec<f64> {
    (0..m * n)
        .map(|at| {
            let (t, i) = (at / n, at % n);
            (0..k)
                .map(|j| w[i * k + j] as f64 * x[t * k + j] as f64)
                .sum()
        })
        .collect()
}

/// A context without push descriptors (the kill switch is process-wide: set only while the
/// context is created, no other being created meanwhile).
fn ring_gpu() -> Gpu {
    let gpu = Gpu::with_env("Q4VK_NO_PUSH_DESCRIPTORS", "1", false);
    assert!(gpu.context().device.push_descriptor.is_none());
    gpu
}

/// The sets the context's ring holds (0 with push descriptors).
fn ring_sets(gpu: &Gpu) -> u32 {
    let mut info = unsafe { std::mem::zeroed::<q4vk_context_memory_info>() };
    info.struct_size = std::mem::size_of_val(&info) as u32;
    assert_eq!(unsafe { q4vk_context_memory(gpu.ctx, &mut info) }, Q4VK_OK);
    info.descriptor_sets
}

struct Layer {
    k: usize,
    /// Q, K, V, gate, up: (rows, matrix, dequantized weights).
    mats: Vec<(usize, *mut q4vk_matrix, Vec<f32>)>,
}

fn layer(gpu: &Gpu, rng: &mut Rng) -> Layer {
    let k = 256;
    let mats = [64usize, 16, 16, 48, 48]
        .iter()
        .map(|&n| {
            let data = random_q4(rng, n, k, 64, true, false);
            let w = dequantized(&q4_desc(&data));
            (n, upload_q4(gpu, &data), w)
        })
        .collect();
    Layer { k, mats }
}

fn args_for(
    x: &Buffer,
    y: &Buffer,
    (n, k, m): (usize, usize, usize),
    flags: u32,
) -> q4vk_gemv_args {
    let mut a = gemv_args();
    a.m = m as u32;
    a.flags = flags;
    a.x = whole(x, m * k);
    a.y = whole(y, m * n);
    a
}

fn gemv_args() -> q4vk_gemv_args {
    let mut a = unsafe { std::mem::zeroed::<q4vk_gemv_args>() };
    unsafe { q4vk_gemv_args_default(&mut a) };
    a
}

/// Q, K and V with biases, then gate and up with the gate's SiLU, in one multi call each,
/// on `gpu` at m = 1 and 5, without and with a workspace.
fn run_layer(gpu: &Gpu, rng: &mut Rng) {
    let l = layer(gpu, rng);
    let k = l.k;
    for m in [1usize, 5] {
        let x = rng.vec(m * k);
        let xb = buffer_of(gpu, &x, "test x");
        let ptrs: Vec<*const q4vk_matrix> = l.mats.iter().map(|(_, m, _)| *m as *const _).collect();
        let (ws, ws_bytes) = shared_workspace(gpu, &ptrs, m, Q4VK_GEMV_BIAS);
        for with_workspace in [false, true] {
            if with_workspace && ws_bytes == 0 {
                continue;
            }
            // Q, K, V.
            let qkv = &l.mats[..3];
            let biases: Vec<Vec<f32>> = qkv.iter().map(|(n, _, _)| rng.vec(*n)).collect();
            let bias_bufs: Vec<Buffer> = biases
                .iter()
                .map(|b| buffer_of(gpu, b, "test bias"))
                .collect();
            let ys: Vec<Buffer> = qkv
                .iter()
                .map(|(n, _, _)| buffer_of(gpu, &vec![f32::NAN; m * n], "test y"))
                .collect();
            let args: Vec<q4vk_gemv_args> = qkv
                .iter()
                .enumerate()
                .map(|(i, (n, _, _))| {
                    let mut a = args_for(&xb, &ys[i], (*n, k, m), Q4VK_GEMV_BIAS);
                    a.bias = whole(&bias_bufs[i], *n);
                    if with_workspace {
                        a.workspace = workspace_ref(&ws, ws_bytes);
                    }
                    a
                })
                .collect();
            let mats: Vec<*const q4vk_matrix> =
                qkv.iter().map(|(_, m, _)| *m as *const _).collect();
            let sets_before = ring_sets(gpu);
            assert_eq!(run_multi(gpu, &mats, &args), Q4VK_OK, "{}", last_error());
            let sets = ring_sets(gpu) - sets_before;
            if gpu.context().device.push_descriptor.is_none() && sets_before + 6 < 4096 {
                // One set per call, one more for the one pre-pass that runs.
                let want = if with_workspace && ws_bytes > 0 { 4 } else { 3 };
                assert_eq!(sets, want, "m = {m}: sets the QKV call took");
            }
            for (i, (n, _, w)) in qkv.iter().enumerate() {
                let want: Vec<f64> = product(w, &x, (*n, k, m))
                    .iter()
                    .enumerate()
                    .map(|(at, v)| v + biases[i][at % n] as f64)
                    .collect();
                let y = read_f32s(&ys[i], m * n);
                assert!(
                    y.iter().all(|v| v.is_finite()),
                    "m = {m}: QKV {i}: y not written"
                );
                let err = q4vk::cpu::reference::relative_error(&y, &want);
                assert!(
                    err < 1e-5,
                    "m = {m}, workspace {with_workspace}: QKV {i}: {err:e}"
                );
            }
            // Gate, then up with the gate's SiLU: the call orders them.
            let (n, _, wg) = &l.mats[3];
            let (_, _, wu) = &l.mats[4];
            let n = *n;
            let g = buffer_of(gpu, &vec![f32::NAN; m * n], "test gate");
            let u = buffer_of(gpu, &vec![f32::NAN; m * n], "test up");
            let mut ga = args_for(&xb, &g, (n, k, m), 0);
            let mut ua = args_for(&xb, &u, (n, k, m), Q4VK_GEMV_SILU_GATE);
            ua.gate = whole(&g, m * n);
            if with_workspace {
                for a in [&mut ga, &mut ua] {
                    a.workspace = workspace_ref(&ws, ws_bytes);
                }
            }
            let mats = [l.mats[3].1 as *const _, l.mats[4].1 as *const _];
            assert_eq!(
                run_multi(gpu, &mats, &[ga, ua]),
                Q4VK_OK,
                "{}",
                last_error()
            );
            let gw = product(wg, &x, (n, k, m));
            let want: Vec<f64> = product(wu, &x, (n, k, m))
                .iter()
                .zip(&gw)
                .map(|(up, &g)| up * activation(Q4VK_GEMV_SILU_GATE, g))
                .collect();
            let y = read_f32s(&u, m * n);
            let err = q4vk::cpu::reference::relative_error(&y, &want);
            assert!(
                err < 1e-5,
                "m = {m}, workspace {with_workspace}: SwiGLU: {err:e}"
            );
        }
    }
    for (_, mat, _) in l.mats {
        unsafe { q4vk_matrix_destroy(mat) };
    }
}

#[test]
fn multi_calls_run_qkv_and_swiglu_pushed_and_from_the_ring() {
    let mut rng = Rng(0x4D17);
    let pushed = Gpu::new(false);
    run_layer(&pushed, &mut rng);
    pushed.assert_quiet();
    drop(pushed);
    let ring = ring_gpu();
    run_layer(&ring, &mut rng);
    ring.assert_quiet();
    assert_nothing_logged();
}

#[test]
fn bad_multi_calls_are_refused_naming_the_call() {
    let gpu = Gpu::new(false);
    let mut rng = Rng(0xBAD2);
    let l = layer(&gpu, &mut rng);
    let k = l.k;
    let x = buffer_of(&gpu, &rng.vec(k), "test x");
    let other_x = buffer_of(&gpu, &rng.vec(k), "test other x");
    let ya = buffer_of(&gpu, &[f32::NAN; 64], "test y a");
    let yb = buffer_of(&gpu, &[f32::NAN; 64], "test y b");
    let (qa, ka) = (
        l.mats[0].1 as *const q4vk_matrix,
        l.mats[1].1 as *const q4vk_matrix,
    );
    let a0 = args_for(&x, &ya, (64, k, 1), 0);
    let a1 = args_for(&x, &yb, (16, k, 1), 0);
    let mut other = a1;
    other.x = whole(&other_x, k);
    let mut reuse = a1;
    reuse.flags = Q4VK_GEMV_REUSE_WORKSPACE;
    let mut small = a1;
    small.y.range = 8;
    let mut sized = a1;
    sized.struct_size -= 8;
    let mats = [qa, ka];
    // Refused before anything is recorded: no command buffer is needed to see it.
    let unrecorded = std::ptr::dangling_mut::<std::ffi::c_void>();
    let direct = |count: u32, mats: *const *const q4vk_matrix, args: &[q4vk_gemv_args]| unsafe {
        q4vk_cmd_gemv_multi(gpu.ctx, count, mats, unrecorded, args.as_ptr())
    };
    type Case<'a> = (Box<dyn Fn() -> q4vk_status + 'a>, q4vk_status, &'static str);
    let cases: Vec<Case> = vec![
        (
            Box::new(|| direct(0, mats.as_ptr(), &[a0])),
            Q4VK_ERROR_INVALID_ARGUMENT,
            "count is 0",
        ),
        (
            Box::new(|| direct(1, std::ptr::null(), &[a0])),
            Q4VK_ERROR_NULL_POINTER,
            "mats",
        ),
        (
            Box::new(|| run_multi(&gpu, &mats, &[a0, other])),
            Q4VK_ERROR_INVALID_ARGUMENT,
            "args[1] differs from args[0]",
        ),
        (
            Box::new(|| run_multi(&gpu, &mats, &[a0, reuse])),
            Q4VK_ERROR_INVALID_ARGUMENT,
            "args[1].flags has Q4VK_GEMV_REUSE_WORKSPACE",
        ),
        (
            Box::new(|| run_multi(&gpu, &mats, &[a0, small])),
            Q4VK_ERROR_BUFFER_TOO_SMALL,
            "args[1]: args->y.range",
        ),
        (
            Box::new(|| run_multi(&gpu, &mats, &[a0, sized])),
            Q4VK_ERROR_INVALID_ARGUMENT,
            "args[1].struct_size",
        ),
    ];
    for (i, (call, want, words)) in cases.iter().enumerate() {
        let status = call();
        let message = last_error();
        assert_eq!(status, *want, "case {i}: {message}");
        assert!(
            message.contains(words),
            "case {i}: {message:?} lacks {words:?}"
        );
        assert!(
            read_f32s(&ya, 64).iter().all(|v| v.is_nan()),
            "case {i}: y written"
        );
    }
    for (_, mat, _) in l.mats {
        unsafe { q4vk_matrix_destroy(mat) };
    }
    gpu.assert_quiet();
}

#[test]
fn a_multi_binding_replays_gate_then_up() {
    let gpu = ring_gpu();
    let mut rng = Rng(0xB1D2);
    let l = layer(&gpu, &mut rng);
    let (k, m) = (l.k, 2usize);
    let (n, _, wg) = &l.mats[3];
    let (_, _, wu) = &l.mats[4];
    let n = *n;
    let xb = buffer_of(&gpu, &vec![0.0; m * k], "test x");
    let g = buffer_of(&gpu, &vec![f32::NAN; m * n], "test gate");
    let u = buffer_of(&gpu, &vec![f32::NAN; m * n], "test up");
    let mut ga = args_for(&xb, &g, (n, k, m), 0);
    let mut ua = args_for(&xb, &u, (n, k, m), Q4VK_GEMV_SILU_GATE);
    ua.gate = whole(&g, m * n);
    let mats = [l.mats[3].1 as *const q4vk_matrix, l.mats[4].1 as *const _];
    let (ws, ws_bytes) = shared_workspace(&gpu, &mats, m, 0);
    if ws_bytes > 0 {
        for a in [&mut ga, &mut ua] {
            a.workspace = workspace_ref(&ws, ws_bytes);
        }
    }
    let mut binding = std::ptr::null_mut();
    let status = unsafe {
        q4vk::ffi::binding::q4vk_gemv_binding_create_multi(
            gpu.ctx,
            2,
            mats.as_ptr(),
            [ga, ua].as_ptr(),
            &mut binding,
        )
    };
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    let ctx = gpu.context();
    let d = &ctx.device.device;
    // Recorded once, submitted every round.
    let (pool, cmd) = command_buffer(ctx);
    unsafe {
        d.begin_command_buffer(cmd, &ash::vk::CommandBufferBeginInfo::default())
            .unwrap();
        let host_to_shader = [ash::vk::MemoryBarrier::default()
            .src_access_mask(ash::vk::AccessFlags::HOST_WRITE)
            .dst_access_mask(ash::vk::AccessFlags::SHADER_READ)];
        d.cmd_pipeline_barrier(
            cmd,
            ash::vk::PipelineStageFlags::HOST,
            ash::vk::PipelineStageFlags::COMPUTE_SHADER,
            ash::vk::DependencyFlags::empty(),
            &host_to_shader,
            &[],
            &[],
        );
        let s = q4vk::ffi::binding::q4vk_cmd_gemv_bound(gpu.ctx, binding, cmd.as_raw() as *mut _);
        assert_eq!(s, Q4VK_OK, "{}", last_error());
        let [src, dst] = q4vk::vk::submit::SHADER_TO_HOST;
        q4vk::vk::submit::record_barrier(d, cmd, src, dst);
        d.end_command_buffer(cmd).unwrap();
    }
    let fence = unsafe { d.create_fence(&ash::vk::FenceCreateInfo::default(), None) }.unwrap();
    let (other_data, other_x) = (random_q4(&mut rng, 8, 64, 32, false, false), rng.vec(64));
    let other = upload_q4(&gpu, &other_data);
    for round in 0..3 {
        let x = rng.vec(m * k);
        xb.write(
            0,
            &x.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>(),
        );
        let submit = [ash::vk::SubmitInfo::default().command_buffers(std::slice::from_ref(&cmd))];
        unsafe {
            d.queue_submit(ctx.device.queue, &submit, fence).unwrap();
            d.wait_for_fences(&[fence], true, u64::MAX).unwrap();
            d.reset_fences(&[fence]).unwrap();
        }
        let gw = product(wg, &x, (n, k, m));
        let want: Vec<f64> = product(wu, &x, (n, k, m))
            .iter()
            .zip(&gw)
            .map(|(up, &g)| up * activation(Q4VK_GEMV_SILU_GATE, g))
            .collect();
        let err = q4vk::cpu::reference::relative_error(&read_f32s(&u, m * n), &want);
        assert!(err < 1e-5, "round {round}: {err:e}");
        // Other GEMVs take the ring round; the binding's sets are its own.
        for _ in 0..(Q4VK_CMD_GEMV_SET_RING as usize + 8) {
            let (status, _) = gemv_c(gpu.ctx, other, &other_x, 8, 1);
            assert_eq!(status, Q4VK_OK);
        }
    }
    // A destroyed matrix ends the binding's use.
    unsafe { q4vk_matrix_destroy(l.mats[4].1) };
    let status = unsafe {
        let mut s = Q4VK_OK;
        let other_pool = d
            .create_command_pool(
                &ash::vk::CommandPoolCreateInfo::default()
                    .queue_family_index(ctx.device.queue_family),
                None,
            )
            .unwrap();
        submit_and_wait(d, ctx.device.queue, other_pool, |cmd| {
            s = q4vk::ffi::binding::q4vk_cmd_gemv_bound(gpu.ctx, binding, cmd.as_raw() as *mut _);
        });
        d.destroy_command_pool(other_pool, None);
        s
    };
    assert_eq!(status, Q4VK_ERROR_INVALID_ARGUMENT);
    assert!(last_error().contains("was destroyed"), "{}", last_error());
    unsafe {
        q4vk::ffi::binding::q4vk_gemv_binding_destroy(binding);
        d.destroy_fence(fence, None);
        d.destroy_command_pool(pool, None);
        q4vk_matrix_destroy(other);
        for (_, mat, _) in &l.mats[..4] {
            q4vk_matrix_destroy(*mat);
        }
    }
    gpu.assert_quiet();
}

/// A buffer of `words` poisoned 32-bit words (NaN as f32, NaN pairs as f16).
fn poisoned(gpu: &Gpu, words: usize, name: &str) -> Buffer {
    buffer_of(gpu, &vec![f32::from_bits(0x7E00_7E00); words], name)
}

/// A workspace for calls on `mats` with `m` and `flags`: the largest
/// `q4vk_gemv_workspace_size` of them (at least 4 bytes), and that size.
fn shared_workspace(gpu: &Gpu, mats: &[*const q4vk_matrix], m: usize, flags: u32) -> (Buffer, u64) {
    let mut bytes = 0u64;
    for &mat in mats {
        let mut b = 0u64;
        let status = unsafe { q4vk_gemv_workspace_size(gpu.ctx, mat, m as u32, flags, &mut b) };
        assert_eq!(status, Q4VK_OK, "{}", last_error());
        bytes = bytes.max(b);
    }
    let ws = Buffer::new(
        &gpu.context().device,
        bytes.max(4),
        MemoryKind::Device,
        "test workspace",
    )
    .unwrap();
    (ws, bytes)
}

/// The first `bytes` of workspace `ws`.
fn workspace_ref(ws: &Buffer, bytes: u64) -> q4vk_buffer_ref {
    q4vk_buffer_ref {
        buffer: ws.buffer.as_raw(),
        offset: 0,
        range: bytes,
    }
}

/// The gate activation of flag `act` (SiLU, or GELU's tanh form) of g, in f64.
fn activation(act: u32, g: f64) -> f64 {
    match act == Q4VK_GEMV_SILU_GATE {
        true => g / (1.0 + (-g).exp()),
        false => 0.5 * g * (1.0 + (0.7978845608028654 * (g + 0.044715 * g * g * g)).tanh()),
    }
}

/// Gate, then up with gate's activation, as one multi call on `gpu` with `flags` on both
/// calls: it must run as a gate+up pair (a pipeline built for two matrices) and write
/// gate's y and up's y bit for bit as the two calls recorded alone do, at m = 1, 3, 8 and
/// 11 (a pass of 8 and a last pass of 3), SiLU and GELU, f32 and f16 y, up with and
/// without a bias; y is also checked against an f64 reference (f32 y and exact x).
fn pair_writes_what_two_calls_write(gpu: &Gpu, rng: &mut Rng, flags: u32, what: &str) {
    let (n, k) = (40usize, 512usize);
    let gate_data = random_q4(rng, n, k, 128, false, false);
    let up_data = random_q4(rng, n, k, 128, false, false);
    let descs = [q4_desc(&gate_data), q4_desc(&up_data)];
    pair_on(gpu, rng, &descs, (n, k), flags, what);
}

/// [`pair_writes_what_two_calls_write`] on matrices of `descs` (gate's, up's; n × k).
fn pair_on(
    gpu: &Gpu,
    rng: &mut Rng,
    descs: &[q4vk_matrix_desc; 2],
    (n, k): (usize, usize),
    flags: u32,
    what: &str,
) {
    let (wg, wu) = (dequantized(&descs[0]), dequantized(&descs[1]));
    let mats = descs.map(|d| {
        let mut mat = std::ptr::null_mut();
        let status = unsafe { q4vk_matrix_create(gpu.ctx, &d, &mut mat) };
        assert_eq!(status, Q4VK_OK, "{}", last_error());
        mat as *const q4vk_matrix
    });
    let pairs_before = gpu.context().pipelines.gate_up_pairs();
    let bias = rng.vec(n);
    let bias_buf = buffer_of(gpu, &bias, "test bias");
    // (m, activation, f16 y, bias on up): each variant is pipelines of its own.
    let cases = [
        (1usize, Q4VK_GEMV_SILU_GATE, false, false),
        (3, Q4VK_GEMV_GELU_GATE, true, true),
        (8, Q4VK_GEMV_SILU_GATE, true, false),
        (11, Q4VK_GEMV_GELU_GATE, false, true),
    ];
    for (m, act, y_f16, with_bias) in cases {
        let x = rng.vec(m * k);
        let xb = buffer_of(gpu, &x, "test x");
        let (ws, ws_bytes) = shared_workspace(gpu, &mats, m, flags);
        let (out, words) = match y_f16 {
            true => (Q4VK_GEMV_F16_OUTPUT, (m * n).div_ceil(2)),
            false => (0, m * n),
        };
        let y_of = |b: &Buffer| q4vk_buffer_ref {
            buffer: b.buffer.as_raw(),
            offset: 0,
            range: 4 * words as u64,
        };
        let bias_flag = if with_bias { Q4VK_GEMV_BIAS } else { 0 };
        let args = |g: &Buffer, y: &Buffer| {
            let mut ga = args_for(&xb, g, (n, k, m), flags | out);
            let mut ua = args_for(&xb, y, (n, k, m), flags | out | act | bias_flag);
            ga.y = y_of(g);
            ua.y = y_of(y);
            ua.gate = y_of(g);
            if with_bias {
                ua.bias = whole(&bias_buf, n);
            }
            if ws_bytes > 0 {
                ga.workspace = workspace_ref(&ws, ws_bytes);
                ua.workspace = workspace_ref(&ws, ws_bytes);
            }
            [ga, ua]
        };
        let label = format!("{what}, m = {m}, act {act}, f16 y {y_f16}, bias {with_bias}");
        // The two calls alone.
        let (g_alone, y_alone) = (
            poisoned(gpu, words, "test g"),
            poisoned(gpu, words, "test y"),
        );
        let [ga, ua] = args(&g_alone, &y_alone);
        for (mat, a) in [(mats[0], &ga), (mats[1], &ua)] {
            assert_eq!(run_cmd(gpu, mat as *mut _, a), Q4VK_OK, "{}", last_error());
        }
        // The pair.
        let (g_pair, y_pair) = (
            poisoned(gpu, words, "test g"),
            poisoned(gpu, words, "test y"),
        );
        let status = run_multi(gpu, &mats, &args(&g_pair, &y_pair));
        assert_eq!(status, Q4VK_OK, "{}", last_error());
        let g_words = read_words(&g_alone, words);
        let y_words = read_words(&y_alone, words);
        assert_eq!(read_words(&g_pair, words), g_words, "{label}: gate's y");
        assert_eq!(read_words(&y_pair, words), y_words, "{label}: y");
        if y_f16 {
            continue;
        }
        let y = read_f32s(&y_pair, m * n);
        assert!(y.iter().all(|v| v.is_finite()), "{label}: y not written");
        let g = read_f32s(&g_pair, m * n);
        assert!(
            g.iter().all(|v| v.is_finite()),
            "{label}: gate's y not written"
        );
        if flags != 0 {
            continue;
        }
        let gw = product(&wg, &x, (n, k, m));
        let want: Vec<f64> = product(&wu, &x, (n, k, m))
            .iter()
            .zip(&gw)
            .enumerate()
            .map(|(at, (up, &g))| {
                let up = up + if with_bias { bias[at % n] as f64 } else { 0.0 };
                up * activation(act, g)
            })
            .collect();
        let err = q4vk::cpu::reference::relative_error(&y, &want);
        assert!(err < 1e-5, "{label}: y against f64: {err:e}");
    }
    assert!(
        gpu.context().pipelines.gate_up_pairs() > pairs_before,
        "{what}: no gate+up pair pipeline was created"
    );
    for mat in mats {
        unsafe { q4vk_matrix_destroy(mat as *mut _) };
    }
}

#[test]
fn a_gate_up_pair_is_one_kernel_writing_what_two_calls_write() {
    let mut rng = Rng(0x9A1E);
    let gpu = Gpu::new(false);
    pair_writes_what_two_calls_write(&gpu, &mut rng, 0, "f32 GEMV");
    gpu.assert_quiet();
    drop(gpu);
    let gpu = Gpu::with_env("Q4VK_INTDOT", "1", false);
    pair_writes_what_two_calls_write(&gpu, &mut rng, 0, "digits");
    pair_writes_what_two_calls_write(&gpu, &mut rng, Q4VK_GEMV_ROUND_X_TO_INT8, "bytes");
    // GGUF blocks: the f32 decode and x in bytes (Q4_K), Q5_0's fifth bits, IQ4_XS's
    // table.
    let (n, k) = (40usize, 512usize);
    for (ty, flags) in [
        (BlockType::Q4K, 0),
        (BlockType::Q4K, Q4VK_GEMV_ROUND_X_TO_INT8),
        (BlockType::Q5_0, 0),
        (BlockType::Iq4Xs, Q4VK_GEMV_ROUND_X_TO_INT8),
    ] {
        let bytes = [0, 1].map(|_| random_blocks(&mut rng, ty, n, k));
        let descs = [0, 1].map(|i| blocks_desc(ty, n, k, &bytes[i]));
        let what = format!("{} blocks, flags {flags:#x}", ty.name());
        pair_on(&gpu, &mut rng, &descs, (n, k), flags, &what);
    }
    // The shapes device rows give blocks of 32: quarters of pieces, and pieces of 8 rows per
    // workgroup (partial last workgroups).
    let mut gpu = gpu;
    for (ty, quarters, rows) in [(BlockType::Q8_0, true, 2), (BlockType::Q4_1, false, 8)] {
        gpu.context_mut()
            .set_overrides(|o| {
                o.blocks_gemv_word_lanes = Some(quarters);
                o.blocks_gemv_rows = Some(rows);
            })
            .unwrap();
        let bytes = [0, 1].map(|_| random_blocks(&mut rng, ty, n, k));
        let descs = [0, 1].map(|i| blocks_desc(ty, n, k, &bytes[i]));
        let what = format!("{} blocks, quarters {quarters}, {rows} rows", ty.name());
        pair_on(&gpu, &mut rng, &descs, (n, k), 0, &what);
    }
    gpu.assert_quiet();
    assert_nothing_logged();
}
