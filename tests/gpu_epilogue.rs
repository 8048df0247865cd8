//! The epilogue of `q4vk_cmd_gemv` (`shaders/epilogue.glsl`): bias (f32, f16), SiLU and
//! GELU gates, a residual (apart from y, or y itself; not with a gate), and f16 y, run by
//! every kernel this
//! device takes for a Q4 matrix and a GGUF Q6_K one — the GEMV (m = 1, 5), the GEMM
//! (m = 12), and with a workspace whatever pre-pass path the device has (the integer
//! dot-product GEMV under `Q4VK_INTDOT=1`, the tensor-core GEMM on lavapipe with
//! cooperative matrices) — through push descriptors and through the ring of sets, and
//! through a binding. Checked against an f64 GEMV of `q4vk_matrix_dequantize`'s weights
//! with the epilogue applied in f64 on the operands' stored values: within 1e-5 (relative
//! to y's norm) for f32 y, and per element within 2^-10 relative (f16's rounding and the
//! kernel's f32 error) for f16 y; every element written (y poisoned with NaN), and the
//! padding between rows of y, which shares 32-bit words with f16 rows, untouched. Bad
//! epilogue arguments are refused with a clear status, nothing written. `q4vk_gemv_host`
//! applies the epilogue on the host (`gpu_support::host_epilogue`).

mod gpu_support;
use ash::vk::Handle;
use gpu_support::blocks::*;
use gpu_support::*;
use q4vk::ffi::binding::*;
use q4vk::ffi::gemv::*;
use q4vk::ffi::matrix::*;
use q4vk::ffi::status::*;
use q4vk::import::gguf_blocks::BlockType;
use q4vk::vk::memory::{Buffer, MemoryKind};

/// One epilogue to check: its `Q4VK_GEMV_*` bits, whether the residual is y itself, and
/// the elements of padding between rows of y.
struct Variant {
    name: &'static str,
    flags: u32,
    residual_in_place: bool,
    y_pad: usize,
}

const VARIANTS: [Variant; 4] = [
    Variant {
        name: "f32 y, f32 bias, residual",
        flags: Q4VK_GEMV_BIAS | Q4VK_GEMV_RESIDUAL,
        residual_in_place: false,
        y_pad: 0,
    },
    Variant {
        name: "f16 y, f16 bias, residual in place, odd row stride",
        flags: Q4VK_GEMV_F16_OUTPUT | Q4VK_GEMV_BIAS | Q4VK_GEMV_BIAS_F16 | Q4VK_GEMV_RESIDUAL,
        residual_in_place: true,
        y_pad: 3,
    },
    Variant {
        name: "f32 y, GELU gate, padded rows",
        flags: Q4VK_GEMV_GELU_GATE,
        residual_in_place: false,
        y_pad: 1,
    },
    Variant {
        name: "f16 y, f16 bias, SiLU gate, odd row stride",
        flags: Q4VK_GEMV_F16_OUTPUT | Q4VK_GEMV_BIAS | Q4VK_GEMV_BIAS_F16 | Q4VK_GEMV_SILU_GATE,
        residual_in_place: false,
        y_pad: 5,
    },
];

/// Values of y's (or an operand's) type: f16 or f32, as stored bytes and as the f64 values
/// those bytes hold.
struct Stored {
    bytes: Vec<u8>,
    values: Vec<f64>,
}

fn stored(v: &[f32], f16: bool) -> Stored {
    if f16 {
        let h: Vec<half::f16> = v.iter().map(|&x| half::f16::from_f32(x)).collect();
        let mut bytes: Vec<u8> = h.iter().flat_map(|x| x.to_le_bytes()).collect();
        bytes.resize(bytes.len().div_ceil(4) * 4, 0);
        Stored {
            bytes,
            values: h.iter().map(|x| x.to_f64()).collect(),
        }
    } else {
        Stored {
            bytes: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            values: v.iter().map(|&x| x as f64).collect(),
        }
    }
}

fn silu(g: f64) -> f64 {
    g / (1.0 + (-g).exp())
}

fn gelu_tanh(g: f64) -> f64 {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * g * (1.0 + (c * (g + 0.044715 * g * g * g)).tanh())
}

/// A host-visible buffer holding `bytes` (at least 4 bytes).
fn buffer_with(gpu: &Gpu, bytes: &[u8], name: &str) -> Buffer {
    let size = bytes.len().max(4) as u64;
    let b = Buffer::new(&gpu.context().device, size, MemoryKind::Readback, name).unwrap();
    b.write(0, bytes);
    b
}

fn whole(b: &Buffer, bytes: usize) -> q4vk_buffer_ref {
    q4vk_buffer_ref {
        buffer: b.buffer.as_raw(),
        offset: 0,
        range: bytes as u64,
    }
}

/// Everything one checked call needs: its buffers, its arguments and what y must hold.
struct Call {
    args: q4vk_gemv_args,
    y: Buffer,
    /// Expected value of every element of y's buffer (padding included, as poisoned).
    want: Vec<f64>,
    /// The magnitude of each element's terms (`(Σ|w·x| + |bias|)·|act(gate)| + |residual|`):
    /// the scale of the kernel's f32 error before an f16 y rounds it.
    magnitude: Vec<f64>,
    /// Which elements are the call's (else padding that must keep its bits).
    written: Vec<bool>,
    poison: Vec<u8>,
    f16: bool,
    _keep: Vec<Buffer>,
}

/// A power of two that scales x so that the sums of `w`'s rows (`[n][k]`) stay near or
/// below 4 in spread (`sqrt(Σ w²)` of the largest row): with gates of up to 40 and a bias
/// and residual, every value then fits f16 y with room to spare, whatever the matrix
/// type's weight magnitudes.
fn x_scale(w: &[f32], k: usize) -> f32 {
    let spread = w
        .chunks_exact(k)
        .map(|row| {
            row.iter()
                .map(|&a| (a as f64) * (a as f64))
                .sum::<f64>()
                .sqrt()
        })
        .fold(0f64, f64::max);
    match spread > 4.0 {
        true => 2f32.powi(-((spread / 4.0).log2().ceil() as i32)),
        false => 1.0,
    }
}

/// The call of variant `v` on an `n` × `k` matrix with weights `w` (`[n][k]`), m rows,
/// with `workspace` bytes of workspace (0: none).
fn call(
    gpu: &Gpu,
    rng: &mut Rng,
    w: &[f32],
    (n, k, m): (usize, usize, usize),
    v: &Variant,
    workspace: u64,
) -> Call {
    let f16 = v.flags & Q4VK_GEMV_F16_OUTPUT != 0;
    let stride = n + v.y_pad;
    let elems = (m - 1) * stride + n;
    let scale = x_scale(w, k);
    let x: Vec<f32> = rng.vec(m * k).iter().map(|&a| a * scale).collect();
    let xb = buffer_with(gpu, &stored(&x, false).bytes, "test x");
    let mut keep = vec![];
    let mut args = unsafe { std::mem::zeroed::<q4vk_gemv_args>() };
    unsafe { q4vk_gemv_args_default(&mut args) };
    args.flags = v.flags;
    args.m = m as u32;
    args.x = whole(&xb, 4 * m * k);
    args.y_row_stride = stride as u64;
    // y's buffer: poison (NaN) where the call writes, a pattern in the padding; with the
    // residual in place, the residual's values where the call writes.
    let residual = stored(&rng.vec(elems), f16);
    let written: Vec<bool> = (0..elems).map(|i| i % stride < n).collect();
    let nan = stored(&vec![f32::NAN; elems], f16);
    let pattern = stored(&(0..elems).map(|i| i as f32 + 0.5).collect::<Vec<_>>(), f16);
    let element = if f16 { 2 } else { 4 };
    let mut poison = pattern.bytes.clone();
    for (i, _) in written.iter().enumerate().filter(|(_, &w)| w) {
        let from = if v.residual_in_place {
            &residual.bytes
        } else {
            &nan.bytes
        };
        poison[i * element..(i + 1) * element]
            .copy_from_slice(&from[i * element..(i + 1) * element]);
    }
    let y_bytes = poison.len();
    let yb = buffer_with(gpu, &poison, "test y");
    args.y = whole(&yb, y_bytes);
    let bias = match v.flags & Q4VK_GEMV_BIAS {
        0 => None,
        _ => Some(stored(&rng.vec(n), v.flags & Q4VK_GEMV_BIAS_F16 != 0)),
    };
    if let Some(b) = &bias {
        let buf = buffer_with(gpu, &b.bytes, "test bias");
        args.bias = whole(&buf, b.bytes.len());
        keep.push(buf);
    }
    let gated = v.flags & (Q4VK_GEMV_SILU_GATE | Q4VK_GEMV_GELU_GATE) != 0;
    // Gates of either sign, some far out (the activation's tails).
    let gate_values: Vec<f32> = (0..elems)
        .map(|i| rng.f32() * if i % 7 == 0 { 40.0 } else { 4.0 })
        .collect();
    let gate = stored(&gate_values, f16);
    if gated {
        let buf = buffer_with(gpu, &gate.bytes, "test gate");
        args.gate = whole(&buf, gate.bytes.len());
        keep.push(buf);
    }
    let has_residual = v.flags & Q4VK_GEMV_RESIDUAL != 0;
    if has_residual {
        args.residual = match v.residual_in_place {
            true => args.y,
            false => {
                let buf = buffer_with(gpu, &residual.bytes, "test residual");
                let r = whole(&buf, residual.bytes.len());
                keep.push(buf);
                r
            }
        };
    }
    if workspace > 0 {
        let ws = Buffer::new(
            &gpu.context().device,
            workspace,
            MemoryKind::Device,
            "test workspace",
        )
        .unwrap();
        args.workspace = whole(&ws, workspace as usize);
        keep.push(ws);
    }
    keep.push(xb);
    let mut want = pattern.values.clone();
    let mut magnitude = vec![0f64; elems];
    for t in 0..m {
        for i in 0..n {
            let at = t * stride + i;
            let row = &w[i * k..(i + 1) * k];
            let xs = &x[t * k..(t + 1) * k];
            let mut acc: f64 = row.iter().zip(xs).map(|(&a, &b)| a as f64 * b as f64).sum();
            let mut mag: f64 = row
                .iter()
                .zip(xs)
                .map(|(&a, &b)| (a as f64 * b as f64).abs())
                .sum();
            if let Some(b) = &bias {
                acc += b.values[i];
                mag += b.values[i].abs();
            }
            let act = match v.flags & (Q4VK_GEMV_SILU_GATE | Q4VK_GEMV_GELU_GATE) {
                Q4VK_GEMV_SILU_GATE => silu(gate.values[at]),
                Q4VK_GEMV_GELU_GATE => gelu_tanh(gate.values[at]),
                _ => 1.0,
            };
            acc *= act;
            mag *= act.abs();
            if has_residual {
                acc += residual.values[at];
                mag += residual.values[at].abs();
            }
            // The test's own values must fit f16 y (else its inf would be right).
            assert!(
                !f16 || acc.abs() < 32768.0,
                "test values out of f16's range: {acc}"
            );
            want[at] = acc;
            magnitude[at] = mag;
        }
    }
    Call {
        args,
        y: yb,
        want,
        magnitude,
        written,
        poison,
        f16,
        _keep: keep,
    }
}

impl Call {
    /// y's buffer as f64 values of its type.
    fn read(&self) -> Vec<f64> {
        let words = read_words(&self.y, self.poison.len() / 4);
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        match self.f16 {
            true => bytes
                .chunks_exact(2)
                .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f64())
                .collect(),
            false => bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
                .collect(),
        }
    }

    /// Asserts y holds what the call must write, and its padding what it held.
    fn check(&self, what: &str) {
        let got = self.read();
        let words = read_words(&self.y, self.poison.len() / 4);
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let element = if self.f16 { 2 } else { 4 };
        let (mut diff, mut norm) = (0f64, 0f64);
        for (i, (&g, &want)) in got.iter().zip(&self.want).enumerate() {
            if !self.written[i] {
                let at = i * element..(i + 1) * element;
                assert_eq!(
                    bytes[at.clone()],
                    self.poison[at],
                    "{what}: padding element {i} was written"
                );
                continue;
            }
            assert!(g.is_finite(), "{what}: y[{i}] = {g} (not written?)");
            if self.f16 {
                // f16's rounding (half an ulp, an ulp where the f32 error crosses a
                // rounding boundary) and the f32 error before it.
                let tol = want.abs() * 2f64.powi(-10) + 1e-6 * self.magnitude[i] + 1e-7;
                assert!((g - want).abs() <= tol, "{what}: y[{i}] = {g}, want {want}");
            }
            diff += (g - want) * (g - want);
            norm += want * want;
        }
        let err = (diff / norm.max(1e-300)).sqrt();
        assert!(
            err < if self.f16 { 1e-3 } else { 1e-5 },
            "{what}: relative error {err:e}"
        );
    }
}

/// The plan's kernel name of a call with `flags` at m with `workspace` bytes.
fn kernel_name(gpu: &Gpu, mat: *mut q4vk_matrix, m: usize, flags: u32, workspace: u64) -> String {
    plan_of(gpu.ctx, mat, m, flags, workspace).1
}

/// The matrices every case runs: a Q4 one (group 32, zero points) and a Q6_K one, with
/// their dequantized weights.
fn matrices(
    gpu: &Gpu,
    rng: &mut Rng,
    (n, k): (usize, usize),
) -> Vec<(String, *mut q4vk_matrix, Vec<f32>)> {
    let q4 = random_q4(rng, n, k, 32, true, false);
    let q4_desc = q4_desc(&q4);
    let q4_w = dequantized(&q4_desc);
    let blocks = random_blocks(rng, BlockType::Q6K, n, k);
    let desc = blocks_desc(BlockType::Q6K, n, k, &blocks);
    let q6_w = dequantized(&desc);
    let mut q6 = std::ptr::null_mut();
    let status = unsafe { q4vk_matrix_create(gpu.ctx, &desc, &mut q6) };
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    vec![
        ("Q4".into(), upload_q4(gpu, &q4), q4_w),
        ("Q6_K".into(), q6, q6_w),
    ]
}

/// Runs every variant on every matrix at m = 1, 5 (GEMV) and 12 (GEMM), without and with
/// a workspace, on `gpu`; returns the kernels that ran (matrix, m, the plan's name).
fn run_all(gpu: &Gpu, rng: &mut Rng) -> Vec<(String, usize, String)> {
    let (n, k) = (48usize, 512usize);
    let mut kernels = vec![];
    for (label, mat, w) in matrices(gpu, rng, (n, k)) {
        for m in [1usize, 5, 12] {
            for v in &VARIANTS {
                // The GEMM's pipelines are slow to build on lavapipe: two variants there.
                if m == 12 && v.y_pad == 1 {
                    continue;
                }
                let mut ws = 0u64;
                let status =
                    unsafe { q4vk_gemv_workspace_size(gpu.ctx, mat, m as u32, v.flags, &mut ws) };
                assert_eq!(status, Q4VK_OK, "{}", last_error());
                // Without and, where the call has a pre-pass path, with a workspace.
                let workspaces = if ws > 0 { vec![0, ws] } else { vec![0] };
                for workspace in workspaces {
                    let c = call(gpu, rng, &w, (n, k, m), v, workspace);
                    let kernel = kernel_name(gpu, mat, m, v.flags, workspace);
                    let what =
                        format!("{label} m={m} {} ({kernel}, workspace {workspace})", v.name);
                    assert_eq!(
                        run_cmd(gpu, mat, &c.args),
                        Q4VK_OK,
                        "{what}: {}",
                        last_error()
                    );
                    c.check(&what);
                    kernels.push((label.clone(), m, kernel));
                }
            }
        }
        unsafe { q4vk_matrix_destroy(mat) };
    }
    gpu.assert_quiet();
    assert_nothing_logged();
    kernels
}

#[test]
fn every_kernel_runs_every_epilogue_pushed_and_from_the_ring() {
    let mut rng = Rng(0xE9170);
    let pushed = Gpu::new(false);
    let kernels = run_all(&pushed, &mut rng);
    drop(pushed);
    let ran = |label: &str, m: usize, name: &str| {
        kernels
            .iter()
            .any(|(l, km, k)| l == label && *km == m && k.contains(name))
    };
    assert!(ran("Q4", 1, "GEMV"), "{kernels:?}");
    assert!(ran("Q4", 12, "GEMM"), "{kernels:?}");
    assert!(ran("Q6_K", 5, "GEMV on GGUF Q6_K blocks"), "{kernels:?}");
    assert!(ran("Q6_K", 12, "GEMM on GGUF Q6_K blocks"), "{kernels:?}");
    let ring = Gpu::with_env("Q4VK_NO_PUSH_DESCRIPTORS", "1", false);
    assert!(ring.context().device.push_descriptor.is_none());
    run_all(&ring, &mut rng);
}

/// `q4vk_gemv_prepare` with a residual prepares the builds for a residual apart from y and
/// for one that is y (read through y's own binding): neither call then creates a pipeline.
#[test]
fn a_prepared_residual_call_creates_no_pipeline() {
    let gpu = Gpu::new(false);
    let mut rng = Rng(0x9E5);
    let (n, k, m) = (32usize, 256usize, 2usize);
    let data = random_q4(&mut rng, n, k, 64, false, false);
    let w = dequantized(&q4_desc(&data));
    let mat = upload_q4(&gpu, &data);
    let variants = [&VARIANTS[0], &VARIANTS[1]];
    for v in variants {
        let status = unsafe { q4vk_gemv_prepare(gpu.ctx, mat, 1, m as u32, v.flags) };
        assert_eq!(status, Q4VK_OK, "{}", last_error());
    }
    let prepared = gpu.context().pipelines.created();
    for v in variants {
        let c = call(&gpu, &mut rng, &w, (n, k, m), v, 0);
        assert_eq!(run_cmd(&gpu, mat, &c.args), Q4VK_OK, "{}", last_error());
        c.check(v.name);
    }
    assert_eq!(
        gpu.context().pipelines.created(),
        prepared,
        "a prepared call created a pipeline"
    );
    unsafe { q4vk_matrix_destroy(mat) };
    gpu.assert_quiet();
}

#[test]
fn a_binding_replays_its_epilogue() {
    let gpu = Gpu::new(false);
    let mut rng = Rng(0xB1E);
    let (n, k, m) = (32usize, 256usize, 2usize);
    let data = random_q4(&mut rng, n, k, 64, false, false);
    let w = dequantized(&q4_desc(&data));
    let mat = upload_q4(&gpu, &data);
    let v = &VARIANTS[1];
    let c = call(&gpu, &mut rng, &w, (n, k, m), v, 0);
    let mut binding: *mut q4vk_gemv_binding = std::ptr::null_mut();
    let status = unsafe { q4vk_gemv_binding_create(gpu.ctx, mat, &c.args, &mut binding) };
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    let ctx = gpu.context();
    let d = &ctx.device.device;
    let pool = unsafe {
        d.create_command_pool(
            &ash::vk::CommandPoolCreateInfo::default().queue_family_index(ctx.device.queue_family),
            None,
        )
    }
    .unwrap();
    // In place: each replay adds W x (with its bias and gate) to y again, from the same
    // residual: reset y between replays and check each.
    for round in 0..3 {
        c.y.write(0, &c.poison);
        unsafe {
            submit_and_wait(d, ctx.device.queue, pool, |cmd| {
                let s = q4vk_cmd_gemv_bound(gpu.ctx, binding, cmd.as_raw() as *mut _);
                assert_eq!(s, Q4VK_OK, "{}", last_error());
            })
        };
        c.check(&format!("binding, replay {round}"));
    }
    unsafe {
        d.destroy_command_pool(pool, None);
        q4vk_gemv_binding_destroy(binding);
        q4vk_matrix_destroy(mat);
    }
    gpu.assert_quiet();
}

#[test]
fn gemv_host_applies_the_epilogue_after_the_product() {
    let gpu = Gpu::new(false);
    gpu_support::host_epilogue::check_host_epilogue(&gpu, "Vulkan context");
    gpu.assert_quiet();
}

#[test]
fn bad_epilogue_arguments_are_refused_and_write_nothing() {
    let gpu = Gpu::new(false);
    let mut rng = Rng(0xBADE);
    // y (4n bytes) is longer than any storage offset alignment.
    let (n, k) = (128usize, 64usize);
    let data = random_q4(&mut rng, n, k, 32, false, false);
    let w = dequantized(&q4_desc(&data));
    let mat = upload_q4(&gpu, &data);
    let base = call(&gpu, &mut rng, &w, (n, k, 1), &VARIANTS[0], 0);
    let align = gpu.context().device.info.storage_alignment;
    let good = base.args;
    let other = Buffer::new(
        &gpu.context().device,
        4096,
        MemoryKind::Device,
        "test other",
    )
    .unwrap();
    let mut cases: Vec<(q4vk_gemv_args, q4vk_status, &str)> = vec![];
    let mut a = good;
    a.flags &= !Q4VK_GEMV_BIAS;
    cases.push((a, Q4VK_ERROR_INVALID_ARGUMENT, "lacks Q4VK_GEMV_BIAS"));
    let mut a = good;
    a.bias.buffer = 0;
    cases.push((
        a,
        Q4VK_ERROR_NULL_POINTER,
        "args->bias.buffer is VK_NULL_HANDLE",
    ));
    let mut a = good;
    a.bias.range = 4 * n as u64 - 4;
    cases.push((a, Q4VK_ERROR_BUFFER_TOO_SMALL, "args->bias.range"));
    let mut a = good;
    a.residual.range = 8;
    cases.push((a, Q4VK_ERROR_BUFFER_TOO_SMALL, "args->residual.range"));
    let mut a = good;
    a.flags |= Q4VK_GEMV_BIAS_F16 | Q4VK_GEMV_F16_OUTPUT;
    a.flags &= !Q4VK_GEMV_BIAS;
    cases.push((a, Q4VK_ERROR_INVALID_ARGUMENT, "Q4VK_GEMV_BIAS_F16 without"));
    let mut a = good;
    a.flags |= Q4VK_GEMV_SILU_GATE | Q4VK_GEMV_GELU_GATE;
    a.gate = whole(&other, 4 * n);
    cases.push((a, Q4VK_ERROR_INVALID_ARGUMENT, "one gate"));
    let mut a = good;
    a.flags = Q4VK_GEMV_BIAS | Q4VK_GEMV_SILU_GATE;
    a.residual.buffer = 0;
    a.gate = a.y;
    cases.push((
        a,
        Q4VK_ERROR_INVALID_ARGUMENT,
        "args->gate overlaps args->y",
    ));
    let mut a = good;
    a.flags |= Q4VK_GEMV_SILU_GATE;
    a.gate = whole(&other, 4 * n);
    cases.push((a, Q4VK_ERROR_UNSUPPORTED, "one or the other"));
    let mut a = good;
    a.y = whole(&other, 4 * n);
    a.residual = q4vk_buffer_ref {
        buffer: a.y.buffer,
        offset: align,
        range: 4 * n as u64,
    };
    cases.push((
        a,
        Q4VK_ERROR_INVALID_ARGUMENT,
        "args->residual overlaps args->y",
    ));
    let mut a = good;
    a.gate = whole(&other, 4 * n);
    cases.push((a, Q4VK_ERROR_INVALID_ARGUMENT, "args->gate.buffer is set"));
    let mut a = good;
    a.bias.offset = 1;
    cases.push((
        a,
        Q4VK_ERROR_INVALID_ARGUMENT,
        "minStorageBufferOffsetAlignment",
    ));
    for (i, (a, want, words)) in cases.iter().enumerate() {
        base.y.write(0, &base.poison);
        let status = run_cmd(&gpu, mat, a);
        let message = last_error();
        assert_eq!(status, *want, "case {i}: {message}");
        assert!(
            message.contains(words),
            "case {i}: {message:?} lacks {words:?}"
        );
        let bytes: Vec<u8> = read_words(&base.y, base.poison.len() / 4)
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        assert_eq!(bytes, base.poison, "case {i}: y was written");
    }
    unsafe { q4vk_matrix_destroy(mat) };
    gpu.assert_quiet();
}
