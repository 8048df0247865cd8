//! The GEMVs on x rounded to bytes (`Q4VK_GEMV_ROUND_X_TO_INT8`) whose workgroups round x
//! themselves (`PipelineKey::x_here_chunks`; `q4vk_gemv_plan` names
//! `Q4VK_GEMV_PREPASS_BYTES_IN_KERNEL`), on the system's Vulkan device (lavapipe in CI,
//! where the integer dot-product GEMV is forced with `IntDot::Forced`), validation on:
//! - y has the bits of the same call through the pre-pass, every element written, on the
//!   SIMT layout (zero points, f32 scales, per-group offsets, a column order the kernel
//!   gathers, f32 and f16 x, chunk and word steps, one to eight activation rows) and every
//!   GGUF block type, on x with huge, tiny, subnormal, zero, tied, infinite and NaN values
//!   and a partial last chunk;
//! - such a call records no pre-pass and needs no workspace (it runs without one);
//! - the device row takes it at the m it names, where the shared memory holds the pass's
//!   x, and the pre-pass elsewhere.

mod gpu_support;
use gpu_support::int_dot::{activations, f32_bytes, record_in_workspace};
use gpu_support::*;
use q4vk::vk::context::{Context, ContextConfig, IntDot};
use q4vk::vk::gemv::{self, GemvParams, PrepassChoice, Room};
use q4vk::vk::matrix::DeviceMatrix;

/// A context running the integer dot-product GEMV wherever it can, whose GEMV on x rounded
/// to bytes rounds x in its workgroups (`here`) or through the pre-pass; `None` leaves
/// that to the device row, as it does the word steps.
fn context(here: Option<bool>, word_lanes: Option<bool>) -> Context {
    let config = ContextConfig {
        device_index: -1,
        validation: true,
        no_coop: true,
        int_dot: IntDot::Forced,
        overrides: q4vk::plan::Overrides {
            simt_gemv_word_lanes: word_lanes,
            bytes_here: here,
            ..Default::default()
        },
        ..Default::default()
    };
    Context::new(config, counting_logger()).unwrap()
}

/// A call with the flag on `m` dense rows of x (f16 with `x_f16`).
fn params(mat: &DeviceMatrix, m: usize, x_f16: bool) -> GemvParams {
    let how = Recording {
        x_f16,
        x_round_int8: true,
        ..Default::default()
    };
    dense_params(&mat.form, m, how)
}

/// Whether a call with `p` on `mat` rounds x in its workgroups: then asserts it has no
/// pre-pass and no workspace, whatever the room; else that it runs on bytes behind the
/// pre-pass.
fn rounds_here(ctx: &Context, mat: &DeviceMatrix, p: &GemvParams) -> bool {
    let choice = gemv::decide(&ctx.rules, &mat.form, p, Room::AsNeeded).unwrap();
    if choice.rounds_x_here() {
        assert!(choice.prepass.is_none(), "{choice:?}");
        assert_eq!(choice.workspace_bytes, 0, "{choice:?}");
        let without = gemv::decide(&ctx.rules, &mat.form, p, Room::None).unwrap();
        assert_eq!(without.kernel, choice.kernel, "without a workspace");
        assert!(choice.to_string().contains("in the workgroup"), "{choice}");
        return true;
    }
    assert!(
        matches!(choice.prepass, Some(PrepassChoice::Digits(key)) if key.bytes),
        "{choice:?}"
    );
    false
}

/// y of `mat`'s call with `p` on `x_bytes`, recorded with the workspace it asks for (none
/// where its workgroups round x), poisoned before the run.
fn run(ctx: &Context, mat: &DeviceMatrix, x_bytes: &[u8], p: &GemvParams) -> Vec<f32> {
    let ws = gemv::workspace_bytes(&ctx.rules, &mat.form, p).unwrap();
    record_in_workspace(ctx, mat, x_bytes, p, (ws > 0).then_some(64)).0
}

/// Asserts that `here` (rounded in the workgroups) has the bits of `pre` (through the
/// pre-pass) and that every element was written (not the poison's bits).
fn assert_same_bits(here: &[f32], pre: &[f32], what: &str) {
    assert_eq!(here.len(), pre.len(), "{what}");
    for (i, (a, b)) in here.iter().zip(pre).enumerate() {
        assert_ne!(a.to_bits(), u32::MAX, "{what}: y[{i}] not written");
        assert_ne!(
            b.to_bits(),
            u32::MAX,
            "{what}: y[{i}] not written by the pre-pass path"
        );
        // NaN from a non-finite chunk may differ in its payload.
        let same = a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        assert!(
            same,
            "{what}: y[{i}] = {a:e} in the workgroup, {b:e} through the pre-pass"
        );
    }
}

/// `m` rows of `k` activations with huge, tiny and zero chunks, and, where there are
/// several rows, ties of the rounding and f32's largest value in row 0, subnormals only in
/// row 1 and an infinity and a NaN in row 2.
fn extreme_activations(rng: &mut Rng, m: usize, k: usize) -> Vec<f32> {
    let mut x = activations(rng, m, k);
    if k >= 200 {
        x[128] = 127.0;
        x[129] = 2.5;
        x[130] = -3.5;
        x[131] = -0.0;
        x[k - 3] = f32::MAX;
    }
    if m >= 2 {
        for (i, v) in x[k..2 * k].iter_mut().enumerate() {
            let sign = if i % 3 == 0 { -1.0 } else { 1.0 };
            *v = f32::from_bits(1 + (i as u32 * 7919) % 0x007F_FFFF) * sign;
        }
    }
    if m >= 3 {
        x[2 * k + 5] = f32::NEG_INFINITY;
        x[2 * k + k / 2] = f32::NAN;
    }
    x
}

/// Asserts that the call at `m` (f16 x with `x_f16`) on `here_mat` (of `here`) rounds x in
/// its workgroups and writes the bits that the same call on `pre_mat` (of `pre`) writes
/// through the pre-pass.
fn assert_call_matches(
    (here, here_mat): (&Context, &DeviceMatrix),
    (pre, pre_mat): (&Context, &DeviceMatrix),
    x: &[f32],
    m: usize,
    x_f16: bool,
    what: &str,
) {
    let what = format!("{what} m {m} f16 x {x_f16}");
    let bytes = match x_f16 {
        true => rounded_to_f16(x).1,
        false => f32_bytes(x),
    };
    let p = params(here_mat, m, x_f16);
    assert!(rounds_here(here, here_mat, &p), "{what}");
    assert!(!rounds_here(pre, pre_mat, &p), "{what}");
    let y_here = run(here, here_mat, &bytes, &p);
    let y_pre = run(pre, pre_mat, &bytes, &p);
    assert_same_bits(&y_here, &y_pre, &what);
}

#[test]
fn q4_matrices_give_the_pre_pass_bits() {
    for word_lanes in [false, true] {
        let here = context(Some(true), Some(word_lanes));
        let pre = context(Some(false), Some(word_lanes));
        assert!(
            here.rules.int_dot,
            "the device has no shaderIntegerDotProduct"
        );
        let mut rng = Rng(0xB4E7 + u64::from(word_lanes));
        // (n, k, group, zero points, f32 scales, m): a partial last chunk, groups of 32 to
        // 256, one to eight activation rows.
        let cases = [
            (37usize, 300usize, 32i32, true, false, &[1usize, 3, 8][..]),
            (64, 256, 128, false, false, &[2, 5]),
            (21, 515, 64, true, true, &[1, 4]),
            (130, 1024, 256, true, false, &[1, 7]),
        ];
        for &(n, k, g, z, f32s, ms) in &cases {
            let d = random_q4(&mut rng, n, k, g, z, f32s);
            let on_here = DeviceMatrix::new(&here, &d, None, None).unwrap();
            let on_pre = DeviceMatrix::new(&pre, &d, None, None).unwrap();
            for &m in ms {
                let x = extreme_activations(&mut rng, m, k);
                let what = format!("{n}x{k} g{g} z{z} f32 scales {f32s} lanes {word_lanes}");
                assert_call_matches((&here, &on_here), (&pre, &on_pre), &x, m, false, &what);
            }
            let x = extreme_activations(&mut rng, 2, k);
            let what = format!("{n}x{k} lanes {word_lanes}");
            assert_call_matches((&here, &on_here), (&pre, &on_pre), &x, 2, true, &what);
        }
        // Per-group offsets, and a column order the kernel gathers x through.
        let (n, k) = (40usize, 232usize);
        let d = random_q4(&mut rng, n, k, 32, false, true);
        let offsets: Vec<f32> = (0..n * k.div_ceil(32)).map(|_| rng.f32() * 0.05).collect();
        let order = shuffled(&mut rng, k);
        for (offsets, order, what) in [
            (Some(&offsets[..]), None, "offsets"),
            (None, Some(&order[..]), "column order"),
        ] {
            let on_here = DeviceMatrix::new(&here, &d, offsets, order).unwrap();
            let on_pre = DeviceMatrix::new(&pre, &d, offsets, order).unwrap();
            for (m, x_f16) in [(1usize, false), (3, true), (6, false)] {
                let x = extreme_activations(&mut rng, m, k);
                let what = format!("{what} lanes {word_lanes}");
                assert_call_matches((&here, &on_here), (&pre, &on_pre), &x, m, x_f16, &what);
            }
        }
    }
    assert_nothing_logged();
}

#[test]
fn gguf_blocks_give_the_pre_pass_bits() {
    use gpu_support::blocks::random_blocks;
    use q4vk::import::gguf_blocks::BlockType;
    use q4vk::vk::matrix::UploadRoute;
    let here = context(Some(true), None);
    let pre = context(Some(false), None);
    let mut rng = Rng(0xB10C + 7);
    for ty in BlockType::ALL {
        let b = ty.block_elements();
        // Odd rows (a partial workgroup), several blocks per row.
        let (n, k) = (37usize, 3 * b.max(64) + b.max(32));
        let bytes = random_blocks(&mut rng, ty, n, k);
        let mat = |ctx: &Context| {
            DeviceMatrix::from_blocks(ctx, ty, n, k, &bytes, &mut UploadRoute::Queue).unwrap()
        };
        let (on_here, on_pre) = (mat(&here), mat(&pre));
        for (m, x_f16) in [(1usize, false), (3, false), (2, true)] {
            let x = extreme_activations(&mut rng, m, k);
            let what = format!("{} {n}x{k}", ty.name());
            assert_call_matches((&here, &on_here), (&pre, &on_pre), &x, m, x_f16, &what);
        }
    }
    assert_nothing_logged();
}

#[test]
fn each_row_rounds_in_the_workgroup_where_it_says_and_the_shared_memory_holds_x() {
    use q4vk::plan::DeviceTuning;
    let mut rng = Rng(0x5A4E);
    let d = random_q4(&mut rng, 64, 1024, 128, true, false);
    let mut some_row_rounds_here = false;
    for row in DeviceTuning::ALL {
        let config = ContextConfig {
            device_index: -1,
            validation: true,
            no_coop: true,
            int_dot: IntDot::Forced,
            row: Some(row),
            ..Default::default()
        };
        let ctx = Context::new(config, counting_logger()).unwrap();
        let mat = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
        let reach = row.int_dot;
        some_row_rounds_here |= reach.bytes_here_up_to >= 1;
        let weights_log2 = (64f64 * 1024.0).log2();
        for m in 1..=reach.bytes_here_up_to + 1 {
            let wanted = m <= reach.bytes_here_up_to
                && f64::from(reach.bytes_here_from_weights_log2) <= weights_log2;
            let p = params(&mat, m as usize, false);
            assert_eq!(rounds_here(&ctx, &mat, &p), wanted, "{} m {m}", row.name);
        }
    }
    assert!(some_row_rounds_here, "no row rounds x in the workgroup");
    // Rows of x longer than the shared memory holds: the pre-pass, even where forced.
    let forced = context(Some(true), None);
    let chunks = forced.rules.class.max_shared as usize / 48 + 1;
    let long = random_q4(&mut rng, 8, 32 * chunks, 128, false, false);
    let long_mat = DeviceMatrix::new(&forced, &long, None, None).unwrap();
    assert!(!rounds_here(
        &forced,
        &long_mat,
        &params(&long_mat, 1, false)
    ));
    // Without the flag the call stays on x itself, exact.
    let mat = DeviceMatrix::new(&forced, &d, None, None).unwrap();
    let mut p = params(&mat, 1, false);
    p.x_round_int8 = false;
    let choice = gemv::decide(&forced.rules, &mat.form, &p, Room::AsNeeded).unwrap();
    assert!(!choice.rounds_x_here(), "{choice:?}");
    assert_nothing_logged();
}

/// Where a call of [`record_calls`] takes its gate operand from.
#[derive(Clone, Copy)]
enum GateFrom<'a> {
    /// No gate: a plain call.
    None,
    /// The y of an earlier call of the same multi call.
    Call(usize),
    /// These values, uploaded.
    Values(&'a [f32]),
}

/// Records `calls` (matrix, parameters, gate) on the `m` rows of `x` as one multi call
/// without a workspace; returns each call's y, poisoned before the run.
fn record_calls(
    ctx: &Context,
    x: &[f32],
    calls: &[(&DeviceMatrix, GemvParams, GateFrom)],
) -> Vec<Vec<f32>> {
    use q4vk::vk::gemv::{BufferRange, EpilogueOperands, MultiCall};
    use q4vk::vk::matrix::upload;
    use q4vk::vk::memory::Buffer;
    let range = |b: &Buffer, len: usize| BufferRange {
        buffer: b.buffer,
        offset: 0,
        range: len as u64,
    };
    let len = |mat: &DeviceMatrix, p: &GemvParams| 4 * p.m as usize * mat.form.shape.n;
    let xb = upload(ctx, &f32_bytes(x), "test x").unwrap();
    let ys: Vec<Buffer> = calls
        .iter()
        .map(|(mat, p, _)| filled_readback(ctx, len(mat, p), 0xFF, "test y"))
        .collect();
    let gates: Vec<Option<Buffer>> = calls
        .iter()
        .map(|(_, _, from)| match from {
            GateFrom::Values(g) => Some(upload(ctx, &f32_bytes(g), "test gate").unwrap()),
            _ => None,
        })
        .collect();
    let multi: Vec<MultiCall> = calls
        .iter()
        .enumerate()
        .map(|(i, (mat, p, from))| MultiCall {
            mat,
            x: range(&xb, 4 * x.len()),
            y: range(&ys[i], len(mat, p)),
            ops: EpilogueOperands {
                gate: match from {
                    GateFrom::None => None,
                    GateFrom::Call(j) => Some(range(&ys[*j], len(calls[*j].0, &calls[*j].1))),
                    GateFrom::Values(_) => gates[i].as_ref().map(|b| range(b, len(mat, p))),
                },
                ..Default::default()
            },
            p: *p,
            workspace: None,
        })
        .collect();
    submit_for_host(ctx, |cmd| gemv::record_multi(ctx, cmd, &multi)).unwrap();
    ys.iter()
        .zip(calls)
        .map(|(yb, (mat, p, _))| read_f32s(yb, len(mat, p) / 4))
        .collect()
}

#[test]
fn a_gate_up_pair_rounds_x_once_with_the_bits_of_two_calls() {
    use gpu_support::blocks::random_blocks;
    use q4vk::epilogue::GateActivation;
    use q4vk::import::gguf_blocks::BlockType;
    use q4vk::vk::matrix::UploadRoute;
    let ctx = context(Some(true), None);
    let mut rng = Rng(0x9A1E);
    let (n, k) = (72usize, 512usize);
    let q4 = |rng: &mut Rng| {
        let d = random_q4(rng, n, k, 128, true, false);
        DeviceMatrix::new(&ctx, &d, None, None).unwrap()
    };
    let q4k = |rng: &mut Rng| {
        let bytes = random_blocks(rng, BlockType::Q4K, n, k);
        DeviceMatrix::from_blocks(&ctx, BlockType::Q4K, n, k, &bytes, &mut UploadRoute::Queue)
            .unwrap()
    };
    let pairs = [
        ("Q4", q4(&mut rng), q4(&mut rng)),
        ("Q4_K", q4k(&mut rng), q4k(&mut rng)),
    ];
    for (what, gate, up) in &pairs {
        for m in [1usize, 3] {
            let what = format!("{what} m {m}");
            let x = extreme_activations(&mut rng, m, k);
            let plain = params(gate, m, false);
            let mut gated = params(up, m, false);
            gated.epilogue.gate = Some(GateActivation::Silu);
            assert!(rounds_here(&ctx, gate, &plain), "{what}");
            let before = ctx.pipelines.gate_up_pairs();
            let pair = record_calls(
                &ctx,
                &x,
                &[
                    (gate, plain, GateFrom::None),
                    (up, gated, GateFrom::Call(0)),
                ],
            );
            assert!(
                ctx.pipelines.gate_up_pairs() > before,
                "{what}: no pair pipeline"
            );
            // Gate alone, then up alone on gate's y.
            let g = record_calls(&ctx, &x, &[(gate, plain, GateFrom::None)]).remove(0);
            let u = record_calls(&ctx, &x, &[(up, gated, GateFrom::Values(&g))]).remove(0);
            assert_same_bits(&pair[0], &g, &format!("{what}: gate"));
            assert_same_bits(&pair[1], &u, &format!("{what}: up"));
        }
    }
    assert_nothing_logged();
}
