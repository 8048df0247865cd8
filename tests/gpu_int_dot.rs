//! The integer dot-product GEMV (`vk::int_dot`: x split into 8-bit digits on the device by
//! a pre-pass, packed dot products) on the system's Vulkan device (lavapipe in CI, which
//! has `shaderIntegerDotProduct` but does not report it accelerated: the tests force it
//! with `IntDot::Forced`), validation on: the pre-pass writes exactly the digits of a model
//! of its algorithm (f32 and f16 x, a column order, subnormal, huge, tied and zero
//! values); `q4vk_gemv`'s path (`gemv_host`) and `q4vk_cmd_gemv`'s (`gemv::record` with a
//! workspace) match the f64 reference within 1e-5 at m = 1..8, and past 8 in passes of 8
//! rows (m = 9, 16, 21 and others), for every group size, zero points on and off, f16 and f32 scales, per-group offsets, a column order (act-order),
//! odd K, f16 x, and x with a huge, a tiny and an all-zero block; x with an infinite
//! element keeps the f32 kernel in `q4vk_gemv` and gives NaN rows with a workspace;
//! contexts with `IntDot::Off` (and `Auto` on a device without acceleration) run the f32
//! kernel; a short x or y and a bad workspace are refused.

mod gpu_support;
use gpu_support::int_dot::{activations, f32_bytes, record_in_workspace};
use gpu_support::*;
use q4vk::cpu::reference;
use q4vk::error::Error;
use q4vk::vk::context::{Context, ContextConfig, IntDot};
use q4vk::vk::gemv::{self, gemv_host, BufferRange, Epilogue, GemvParams};
use q4vk::vk::int_dot::{row_vectors, CHUNK, CHUNK_VECTORS};
use q4vk::vk::matrix::{upload, DeviceMatrix};
use q4vk::vk::memory::{Buffer, MemoryKind};

/// The GEMM runs from this m on in these tests' contexts: below, the GEMV runs past m = 8
/// in passes of 8 rows whatever the device's default (`vk::gemv::simt_gemv_up_to`).
const GEMM_FROM: u32 = 24;

fn context(int_dot: IntDot) -> Context {
    let config = ContextConfig {
        device_index: -1,
        validation: true,
        no_coop: true,
        int_dot,
        overrides: q4vk::plan::Overrides {
            gemm_from_m: Some(GEMM_FROM),
            ..Default::default()
        },
        ..Default::default()
    };
    Context::new(config, counting_logger()).unwrap()
}

/// [`context`] with the digits GEMV's invocations fixed to step over chunks or over words
/// of codes (`word_lanes`), both checked by the reference tests.
fn context_with_lanes(word_lanes: bool) -> Context {
    let mut ctx = context(IntDot::Forced);
    ctx.set_overrides(|o| o.simt_gemv_word_lanes = Some(word_lanes))
        .expect("a valid override");
    ctx
}

/// Asserts that a call at `m` on `mat` runs the digits GEMV stepping as `ctx` fixes.
fn assert_runs_digits_gemv(ctx: &Context, mat: &DeviceMatrix, m: usize, word_lanes: bool) {
    let key = simt_gemv_key(ctx, &mat.form, m, gemv::Room::AsNeeded);
    assert!(key.dot, "m = {m}: {key:?}");
    assert_eq!(key.word_lanes, word_lanes, "m = {m}");
}

/// Runs `q4vk_gemv`'s path at `m` and checks every output against `want` (1e-5).
fn assert_gemv_matches(
    ctx: &Context,
    mat: &DeviceMatrix,
    x: &[f32],
    m: usize,
    want: &[f64],
    what: &str,
) {
    let mut y = vec![f32::NAN; want.len()];
    gemv_host(ctx, mat, x, &mut y, m as u32).unwrap();
    assert!(y.iter().all(|v| v.is_finite()), "{what}: unwritten y");
    let err = reference::relative_error(&y, want);
    assert!(err < 1e-5, "{what} m {m}: {err:e}");
}

/// The digits the pre-pass must write for one row of x (its columns in matrix order), as
/// 32-bit words: a model of `shaders/x_digits.comp` in integer arithmetic on the bits.
fn model_digits(row: &[f32]) -> Vec<u32> {
    let magnitude = |v: f32| v.to_bits() & 0x7FFF_FFFF;
    let exponent = |bits: u32| match bits {
        b if b >= 0x0080_0000 => (b >> 23) as i32 - 127,
        b => 31 - b.leading_zeros() as i32 - 149,
    };
    let mut out = vec![0u32; 4 * row_vectors(row.len())];
    for (c, chunk) in row.chunks(CHUNK).enumerate() {
        let words = &mut out[4 * CHUNK_VECTORS * c..][..4 * CHUNK_VECTORS];
        let largest = chunk.iter().map(|&v| magnitude(v)).max().unwrap_or(0);
        if largest >= 0x7F80_0000 {
            words[24] = 256;
            continue;
        }
        if largest == 0 {
            continue;
        }
        let tau = exponent(largest) - 21;
        let mut sums = [0i32; 3];
        for (j, &v) in chunk.iter().enumerate() {
            let bits = magnitude(v);
            let (significand, ev) = if bits >= 0x0080_0000 {
                (
                    i64::from((bits & 0x007F_FFFF) | 0x0080_0000),
                    (bits >> 23) as i32 - 127,
                )
            } else {
                (i64::from(bits), -126)
            };
            // q = significand · 2^-s, rounded to nearest, ties to even (exact in f64).
            let s = tau + 23 - ev;
            let q = (significand as f64 * 2f64.powi(-s)).round_ties_even() as i32;
            let q = if v.is_sign_negative() { -q } else { q };
            assert!(q.abs() <= 1 << 22);
            let d2 = ((q + 128) & 255) - 128;
            let q1 = (q - d2) >> 8;
            let d1 = ((q1 + 128) & 255) - 128;
            let d0 = (q1 - d1) >> 8;
            let (word, within) = (j / 8, j % 8);
            for (level, digit) in [d0, d1, d2].into_iter().enumerate() {
                let at = 6 * word + 2 * level + within % 2;
                words[at] |= u32::from(digit as i8 as u8) << (8 * (within / 2));
                sums[level] += digit;
            }
        }
        words[24] = tau as u32;
        for (w, s) in words[25..].iter_mut().zip(sums) {
            *w = s as u32;
        }
    }
    out
}

/// Records `mat`'s GEMV with a workspace (the path of `q4vk_cmd_gemv`) on `x_bytes` (f32,
/// or f16 with `x_f16`; dense rows); returns y and the workspace's words, both poisoned
/// before the run.
fn record_with_workspace(
    ctx: &Context,
    mat: &DeviceMatrix,
    x_bytes: &[u8],
    m: usize,
    x_f16: bool,
) -> (Vec<f32>, Vec<u32>) {
    record_call(ctx, mat, x_bytes, m, x_f16, mat.form.shape.k, Some(0))
}

/// Records `mat`'s GEMV on `x_bytes` (rows `x_stride` elements apart) with a workspace at
/// byte `workspace` of a larger buffer (or none); returns y (its `m` rows of n) and the
/// workspace's words (empty without one), both poisoned before the run.
fn record_call(
    ctx: &Context,
    mat: &DeviceMatrix,
    x_bytes: &[u8],
    m: usize,
    x_f16: bool,
    x_stride: usize,
    workspace: Option<u64>,
) -> (Vec<f32>, Vec<u32>) {
    let p = GemvParams {
        x_f16,
        x_stride: x_stride as u64,
        ..GemvParams::dense(m as u32, mat.form.shape.k as u64, mat.form.shape.n as u64)
    };
    if workspace.is_some() {
        let ws_bytes = gemv::workspace_bytes(&ctx.rules, &mat.form, &p).unwrap() as usize;
        assert_eq!(ws_bytes, 16 * m * row_vectors(mat.form.shape.k));
    }
    record_in_workspace(ctx, mat, x_bytes, &p, workspace.map(|at| at as usize))
}

/// x rounded to f16: its bytes (padded to whole 32-bit words, as the kernels read them)
/// and its values widened back to f32 (what the digits and the reference see).
fn f16_x(x: &[f32]) -> (Vec<u8>, Vec<f32>) {
    let xh: Vec<half::f16> = x.iter().map(|&v| half::f16::from_f32(v)).collect();
    let mut bytes: Vec<u8> = xh.iter().flat_map(|v| v.to_le_bytes()).collect();
    bytes.resize(bytes.len().next_multiple_of(4), 0);
    (bytes, xh.iter().map(|v| v.to_f32()).collect())
}

/// Asserts that the workspace `words` hold the model's digits of every row of `x` (rows of
/// `k`, in the matrix's column order).
fn assert_model_digits(words: &[u32], x: &[f32], k: usize, what: &str) {
    let per_row = 4 * row_vectors(k);
    assert_eq!(
        words.len(),
        per_row * (x.len() / k),
        "{what}: workspace words"
    );
    for (r, row) in x.chunks_exact(k).enumerate() {
        assert_eq!(
            words[r * per_row..(r + 1) * per_row],
            model_digits(row)[..],
            "{what}: row {r}"
        );
    }
}

#[test]
fn the_pre_pass_writes_the_models_digits() {
    let ctx = context(IntDot::Forced);
    assert!(ctx.rules.int_dot);
    let mut rng = Rng(0xD161);
    let (n, k) = (8usize, 200usize);
    let d = random_q4(&mut rng, n, k, 32, true, false);
    let mat = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
    // Row 0: a huge block, a tiny one (the integer path of the pre-pass), negative
    // zeros, exact ties of the rounding; row 1: subnormals only; row 2: zeros; row 3:
    // random with one value at f32's largest.
    let mut x = activations(&mut rng, 4, k);
    x[..k].iter_mut().enumerate().for_each(|(i, v)| {
        if (96..128).contains(&i) {
            *v *= 1.0e-35;
        }
    });
    x[130] = -0.0;
    // Ties: (odd or even + 1/2) units of 2^-21 of the chunk's largest (row 0's largest is
    // above 1, so the unit is coarser still: the ties come out of exact shifts).
    x[160] = 1.0;
    x[161] = (2f32).powi(-21) * 2.5;
    x[162] = -(2f32).powi(-21) * 3.5;
    x[163] = (2f32).powi(-20) * 1.5;
    for (i, v) in x[k..2 * k].iter_mut().enumerate() {
        *v = f32::from_bits(1 + (i as u32 * 7919) % 0x007F_FFFF)
            * if i % 3 == 0 { -1.0 } else { 1.0 };
    }
    x[2 * k..3 * k].fill(0.0);
    x[3 * k + 17] = f32::MAX;
    let (_, words) = record_with_workspace(&ctx, &mat, &f32_bytes(&x), 4, false);
    assert_model_digits(&words, &x, k, "f32");
    // f16 x: the digits of its f32 values.
    let (bytes, widened) = f16_x(&x[..k]);
    let (_, words) = record_with_workspace(&ctx, &mat, &bytes, 1, true);
    assert_model_digits(&words, &widened, k, "f16");
    assert_nothing_logged();
}

#[test]
fn the_pre_pass_reads_unaligned_rows_one_by_one() {
    let ctx = context(IntDot::Forced);
    let mut rng = Rng(0xA116);
    // Rows of 202 start off the 16-byte vectors of f32 and f16 x alike.
    let (n, k, m) = (8usize, 202usize, 3usize);
    let d = random_q4(&mut rng, n, k, 32, true, false);
    let mat = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
    let mut x = activations(&mut rng, m, k);
    // The largest magnitude of rows 1 and 2 in their last, scalar-read elements.
    x[2 * k - 1] = -7.0e4;
    x[3 * k - 2] = 6.5e4;
    let (_, words) = record_with_workspace(&ctx, &mat, &f32_bytes(&x), m, false);
    assert_model_digits(&words, &x, k, "f32");
    let (bytes, widened) = f16_x(&x);
    let (_, words) = record_with_workspace(&ctx, &mat, &bytes, m, true);
    assert_model_digits(&words, &widened, k, "f16");
    assert_nothing_logged();
}

#[test]
fn the_pre_pass_gathers_through_a_column_order() {
    let ctx = context(IntDot::Forced);
    let mut rng = Rng(0x6A7E);
    let (n, k) = (16usize, 150usize);
    let d = random_q4(&mut rng, n, k, 32, false, false);
    let order: Vec<u32> = (0..k).map(|j| (j * 61 % k) as u32).collect();
    let mat = DeviceMatrix::new(&ctx, &d, None, Some(&order)).unwrap();
    let x = activations(&mut rng, 2, k);
    let (y, words) = record_with_workspace(&ctx, &mat, &f32_bytes(&x), 2, false);
    let gathered: Vec<f32> = x
        .chunks_exact(k)
        .flat_map(|row| order.iter().map(|&i| row[i as usize]))
        .collect();
    assert_model_digits(&words, &gathered, k, "act-order");
    let err = reference::relative_error(&y, &reference::gemv(&d, &gathered, 2));
    assert!(err < 1e-5, "{err:e}");
    assert_nothing_logged();
}

#[test]
fn digits_gemv_matches_the_reference() {
    for word_lanes in [false, true] {
        digits_gemv_matches_the_reference_stepping(word_lanes);
    }
}

fn digits_gemv_matches_the_reference_stepping(word_lanes: bool) {
    let ctx = context_with_lanes(word_lanes);
    assert!(
        ctx.rules.int_dot,
        "the device has no shaderIntegerDotProduct (Vulkan 1.3 / VK_KHR_shader_integer_dot_product)"
    );
    let mut rng = Rng(0x1D07 + u64::from(word_lanes));
    // (n, k, group, zero points, f32 scales)
    let cases = [
        (37usize, 300usize, 32i32, true, false),
        (64, 256, 128, false, false),
        (21, 515, 64, true, true),
        (9, 96, -1, false, true),
        (130, 1024, 256, true, false),
    ];
    for &(n, k, g, z, f32s) in &cases {
        let d = random_q4(&mut rng, n, k, g, z, f32s);
        let mat = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
        assert_runs_digits_gemv(&ctx, &mat, 3, word_lanes);
        for m in (1..=8usize).chain([9, 16, 21]) {
            let x = activations(&mut rng, m, k);
            let want = reference::gemv(&d, &x, m);
            let what = format!("{n}x{k} g{g} z{z} f32 scales {f32s} word lanes {word_lanes}");
            assert_gemv_matches(&ctx, &mat, &x, m, &want, &what);
        }
    }
    assert_nothing_logged();
}

/// By default (no `gemm_from_m`) the digits GEMV runs up to `int_dot_gemv_up_to` given a
/// workspace, in passes of 8 rows, and the GEMM beyond; without a workspace the f32 kernels
/// keep `runs_gemm`'s rule. At that limit it matches the reference: 40 rows (5 passes, the
/// last whole) on a short K, 64 (8 passes) on few rows and K ≥ 16384.
#[test]
fn the_digits_gemv_runs_up_to_its_limit_by_default() {
    let config = ContextConfig {
        device_index: -1,
        validation: true,
        no_coop: true,
        int_dot: IntDot::Forced,
        ..Default::default()
    };
    let ctx = Context::new(config, counting_logger()).unwrap();
    let mut rng = Rng(0x40D0);
    for (n, k, limit) in [(19usize, 160usize, 40u32), (8192, 200, 40), (5, 16384, 64)] {
        assert_eq!(
            gemv::int_dot_gemv_up_to(&ctx.rules, n, k),
            limit,
            "{n} x {k}"
        );
        if n > 1000 {
            continue; // the rule alone: a tall matrix keeps 40
        }
        let d = random_q4(&mut rng, n, k, 32, true, false);
        let mat = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
        let params = |m: u32| dense_params(&mat.form, m as usize, Recording::default());
        assert!(gemv::runs_int_dot(&ctx.rules, &mat.form, limit));
        assert!(!gemv::runs_int_dot(&ctx.rules, &mat.form, limit + 1));
        assert!(!call_runs_gemm(&ctx, &mat, &params(limit), true));
        assert!(call_runs_gemm(&ctx, &mat, &params(limit + 1), true));
        assert!(call_runs_gemm(&ctx, &mat, &params(limit), false));
        let m = limit as usize;
        let x = activations(&mut rng, m, k);
        let (y, _) = record_with_workspace(&ctx, &mat, &f32_bytes(&x), m, false);
        let err = reference::relative_error(&y, &reference::gemv(&d, &x, m));
        assert!(err < 1e-5, "{n} x {k} m {m}: {err:e}");
    }
    assert_nothing_logged();
}

#[test]
fn digits_gemv_with_offsets_matches_the_reference() {
    for word_lanes in [false, true] {
        let ctx = context_with_lanes(word_lanes);
        assert!(ctx.rules.int_dot);
        let mut rng = Rng(0x0FF5);
        for &(n, k) in &[(40usize, 256usize), (17, 200)] {
            let d = random_q4(&mut rng, n, k, 32, false, true);
            let offsets: Vec<f32> = (0..n * k.div_ceil(32)).map(|_| rng.f32() * 0.05).collect();
            let mat = DeviceMatrix::new(&ctx, &d, Some(&offsets), None).unwrap();
            assert_runs_digits_gemv(&ctx, &mat, 1, word_lanes);
            for m in [1usize, 3, 8, 13] {
                let x = activations(&mut rng, m, k);
                let want = reference::gemv_with_offsets(&d, &offsets, &x, m);
                let what = format!("offsets {n}x{k} word lanes {word_lanes}");
                assert_gemv_matches(&ctx, &mat, &x, m, &want, &what);
            }
        }
    }
    assert_nothing_logged();
}

#[test]
fn digits_gemv_with_a_column_order_matches_the_reference() {
    for word_lanes in [false, true] {
        let ctx = context_with_lanes(word_lanes);
        assert!(ctx.rules.int_dot);
        let mut rng = Rng(0x0DE5);
        let (n, k) = (33usize, 232usize);
        let d = random_q4(&mut rng, n, k, 32, true, false);
        let order: Vec<u32> = (0..k).map(|j| (j * 97 % k) as u32).collect();
        let mat = DeviceMatrix::new(&ctx, &d, None, Some(&order)).unwrap();
        assert_runs_digits_gemv(&ctx, &mat, 5, word_lanes);
        for m in [1usize, 5, 11] {
            let x = activations(&mut rng, m, k);
            // Column j of the matrix meets input order[j].
            let xo: Vec<f32> = x
                .chunks_exact(k)
                .flat_map(|row| order.iter().map(|&i| row[i as usize]))
                .collect();
            let want = reference::gemv(&d, &xo, m);
            let what = format!("act-order word lanes {word_lanes}");
            assert_gemv_matches(&ctx, &mat, &x, m, &want, &what);
        }
    }
    assert_nothing_logged();
}

#[test]
fn non_finite_x_and_contexts_without_it_keep_the_f32_kernel_in_q4vk_gemv() {
    let mut rng = Rng(0x1F1);
    let (n, k) = (24usize, 128usize);
    let d = random_q4(&mut rng, n, k, 32, true, false);
    let mut x = rng.vec(2 * k);
    x[k + 5] = f32::INFINITY;
    let run = |ctx: &Context| {
        let mat = DeviceMatrix::new(ctx, &d, None, None).unwrap();
        let mut y = vec![0f32; 2 * n];
        gemv_host(ctx, &mat, &x, &mut y, 2).unwrap();
        y
    };
    let (forced, f32_only) = (context(IntDot::Forced), context(IntDot::Off));
    assert!(forced.rules.int_dot && !f32_only.rules.int_dot);
    // The same f32 kernel ran on both: the same bits, inf/NaN included.
    let (a, b) = (run(&forced), run(&f32_only));
    assert_eq!(
        a.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        b.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    assert!(a[n..].iter().any(|v| !v.is_finite()));
    assert_nothing_logged();
}

#[test]
fn a_short_x_or_y_is_refused_on_either_path() {
    let mut rng = Rng(0x5407);
    let (n, k) = (16usize, 96usize);
    let d = random_q4(&mut rng, n, k, 32, false, false);
    for int_dot in [IntDot::Forced, IntDot::Off] {
        let ctx = context(int_dot);
        let mat = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
        let x = rng.vec(2 * k);
        let mut y = vec![0f32; 2 * n];
        let short_x = gemv_host(&ctx, &mat, &x[..k], &mut y, 2);
        assert!(matches!(
            short_x,
            Err(q4vk::error::Error::BufferTooSmall(_))
        ));
        let short_y = gemv_host(&ctx, &mat, &x, &mut y[..n], 2);
        assert!(matches!(
            short_y,
            Err(q4vk::error::Error::BufferTooSmall(_))
        ));
        assert!(y.iter().all(|&v| v == 0.0), "written on error");
    }
    assert_nothing_logged();
}

#[test]
fn the_recorded_path_with_a_workspace_matches_the_reference() {
    let ctx = context(IntDot::Forced);
    let mut rng = Rng(0x3C0D);
    // (n, k, group, zero points, f32 scales)
    for &(n, k, g, z, f32s) in &[
        (37usize, 300usize, 32i32, true, false),
        (24, 515, 128, false, true),
    ] {
        let d = random_q4(&mut rng, n, k, g, z, f32s);
        let mat = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
        for m in (1..=8usize).chain([12, 19]) {
            let x = activations(&mut rng, m, k);
            let (y, _) = record_with_workspace(&ctx, &mat, &f32_bytes(&x), m, false);
            let err = reference::relative_error(&y, &reference::gemv(&d, &x, m));
            assert!(err < 1e-5, "{n}x{k} m {m}: {err:e}");
            // f16 x: against the reference of its f32 values.
            let (bytes, widened) = f16_x(&x);
            let (y, _) = record_with_workspace(&ctx, &mat, &bytes, m, true);
            let err = reference::relative_error(&y, &reference::gemv(&d, &widened, m));
            assert!(err < 1e-5, "f16 x {n}x{k} m {m}: {err:e}");
        }
    }
    assert_nothing_logged();
}

#[test]
fn a_non_finite_row_gives_nan_rows_with_a_workspace() {
    let ctx = context(IntDot::Forced);
    let mut rng = Rng(0x7A7);
    let (n, k) = (20usize, 96usize);
    let d = random_q4(&mut rng, n, k, 32, true, false);
    let mat = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
    let mut x = rng.vec(3 * k);
    x[k + 40] = f32::INFINITY;
    x[2 * k + 3] = f32::NAN;
    let (y, _) = record_with_workspace(&ctx, &mat, &f32_bytes(&x), 3, false);
    assert!(y[n..].iter().all(|v| v.is_nan()));
    let err = reference::relative_error(&y[..n], &reference::gemv(&d, &x[..k], 1));
    assert!(err < 1e-5, "{err:e}");
    assert_nothing_logged();
}

#[test]
fn a_bad_workspace_is_refused_and_none_keeps_the_f32_kernel() {
    let ctx = context(IntDot::Forced);
    let mut rng = Rng(0xBAD);
    let (n, k, m) = (16usize, 64usize, 2usize);
    let d = random_q4(&mut rng, n, k, 32, false, false);
    let mat = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
    let p = GemvParams::dense(m as u32, k as u64, n as u64);
    let need = gemv::workspace_bytes(&ctx.rules, &mat.form, &p).unwrap();
    // x, y and the workspace each 1024-byte aligned in one buffer.
    let b = Buffer::new(
        &ctx.device,
        2048 + need,
        MemoryKind::Device,
        "test x, y and workspace",
    )
    .unwrap();
    let at = |offset: u64, range: u64| BufferRange {
        buffer: b.buffer,
        offset,
        range,
    };
    let (x, y) = (at(0, 4 * (m * k) as u64), at(1024, 4 * (m * n) as u64));
    let mut cases = vec![
        (at(2048, need - 16), "BufferTooSmall"),
        (at(256, need), "InvalidArgument"),
        (at(1024, need), "InvalidArgument"),
        (
            BufferRange {
                buffer: ash::vk::Buffer::null(),
                offset: 0,
                range: need,
            },
            "NullPointer",
        ),
    ];
    let align = ctx.device.info.storage_alignment;
    if align > 1 {
        cases.push((at(2048 + align / 2, need), "InvalidArgument"));
    }
    for (ws, want) in cases {
        let got = ctx.submit(|cmd| gemv::record(&ctx, cmd, &mat, x, y, &p, Some(ws)));
        let name = match got {
            Err(Error::BufferTooSmall(_)) => "BufferTooSmall",
            Err(Error::InvalidArgument(_)) => "InvalidArgument",
            Err(Error::NullPointer(_)) => "NullPointer",
            other => panic!("{ws:?}: {other:?}"),
        };
        assert_eq!(name, want, "{ws:?}");
    }
    // Without a workspace the f32 kernel runs: the bits of a context without the kernel.
    let off = context(IntDot::Off);
    let mat_off = DeviceMatrix::new(&off, &d, None, None).unwrap();
    assert_eq!(
        gemv::workspace_bytes(&off.rules, &mat_off.form, &p).unwrap(),
        0
    );
    let xs = f32_bytes(&rng.vec(m * k));
    let (none, _) = record_call(&ctx, &mat, &xs, m, false, k, None);
    let (f32_kernel, _) = record_call(&off, &mat_off, &xs, m, false, k, None);
    assert_eq!(
        none.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        f32_kernel.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    assert_nothing_logged();
}

#[test]
fn strides_offsets_extreme_rows_and_the_ring() {
    let mut rng = Rng(0x57D);
    let (n, k, m) = (33usize, 200usize, 4usize);
    let d = random_q4(&mut rng, n, k, 64, true, false);
    // Rows 3 apart beyond k; row 1 scaled to 1e-35 (a chunk scale 2^-137, beyond one f32),
    // row 2 to 1e30, row 3 with one subnormal-only chunk.
    let stride = k + 3;
    let mut x = rng.vec(m * stride);
    x[stride..stride + k].iter_mut().for_each(|v| *v *= 1.0e-35);
    x[2 * stride..2 * stride + k]
        .iter_mut()
        .for_each(|v| *v *= 1.0e30);
    x[3 * stride + 32..3 * stride + 64]
        .iter_mut()
        .for_each(|v| *v = f32::from_bits((v.to_bits() & 0x8000_0000) | 0x0000_1234));
    let dense: Vec<f32> = x
        .chunks(stride)
        .flat_map(|row| row[..k].iter().copied())
        .collect();
    let want = reference::gemv(&d, &dense, m);
    // The ring of descriptor sets (no push descriptors: two sets per call) and pushed ones.
    for no_push in [false, true] {
        let ctx = Context::new(
            ContextConfig {
                device_index: -1,
                validation: true,
                no_coop: true,
                no_push_descriptors: no_push,
                int_dot: IntDot::Forced,
                ..Default::default()
            },
            counting_logger(),
        )
        .unwrap();
        assert_eq!(
            ctx.xy_sets.is_some(),
            no_push || ctx.device.push_descriptor.is_none()
        );
        let mat = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
        let offset = 3 * ctx.device.info.storage_alignment.max(16);
        let (y, _) = record_call(&ctx, &mat, &f32_bytes(&x), m, false, stride, Some(offset));
        for (r, (got, want)) in y.chunks(n).zip(want.chunks(n)).enumerate() {
            let err = reference::relative_error(got, want);
            assert!(err < 1e-5, "no_push {no_push} row {r}: {err:e}");
        }
        // q4vk_gemv's path on the ring too, several calls.
        for _ in 0..3 {
            assert_gemv_matches(&ctx, &mat, &dense, m, &want, "gemv_host");
        }
    }
    assert_nothing_logged();
}

#[test]
fn auto_follows_the_devices_acceleration() {
    let ctx = context(IntDot::Auto);
    assert_eq!(ctx.rules.int_dot, ctx.device.int_dot == Some(true));
    eprintln!("accelerated 8-bit dot products: {:?}", ctx.device.int_dot);
}

#[test]
fn the_pre_pass_spans_workgroups_and_tiny_rows() {
    let ctx = context(IntDot::Forced);
    let mut rng = Rng(0x71D7);
    // k = 5000: 157 chunks over 5 workgroups of 32; k = 1 and 33: one partial chunk, and
    // a full one beside one column.
    for &(n, k, m) in &[(12usize, 5000usize, 3usize), (5, 1, 2), (7, 33, 8)] {
        let d = random_q4(&mut rng, n, k, -1, true, false);
        let mat = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
        let x = rng.vec(m * k);
        let (y, words) = record_with_workspace(&ctx, &mat, &f32_bytes(&x), m, false);
        assert_model_digits(&words, &x, k, &format!("k {k}"));
        let err = reference::relative_error(&y, &reference::gemv(&d, &x, m));
        assert!(err < 1e-5, "k {k}: {err:e}");
    }
    assert_nothing_logged();
}

#[test]
fn matrices_sharing_x_share_one_pre_pass() {
    let ctx = context(IntDot::Forced);
    let mut rng = Rng(0x5EED);
    let (m, k) = (3usize, 300usize);
    let a = random_q4(&mut rng, 40, k, 32, true, false);
    let b = random_q4(&mut rng, 70, k, 64, false, true);
    let d = random_q4(&mut rng, 40, 256, 32, true, false);
    let order: Vec<u32> = (0..k as u32).rev().collect();
    let ma = DeviceMatrix::new(&ctx, &a, None, None).unwrap();
    let mb = DeviceMatrix::new(&ctx, &b, None, None).unwrap();
    let mc = DeviceMatrix::new(&ctx, &a, None, Some(&order)).unwrap();
    let md = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
    let p = |mat: &DeviceMatrix, m: usize, x_f16: bool, filled: bool| GemvParams {
        m: m as u32,
        x_f16,
        x_stride: k as u64,
        y_stride: mat.form.shape.n as u64,
        x_gathered: false,
        x_round_f16: false,
        x_round_int8: false,
        workspace_filled: filled,
        epilogue: Epilogue::NONE,
    };
    let key = |mat: &DeviceMatrix, m: usize, x_f16: bool| {
        gemv::workspace_key(&ctx.rules, mat, &p(mat, m, x_f16, false)).unwrap()
    };
    // Equal for the same K, x type and column order whatever the rows and groups; else not.
    assert_ne!(key(&ma, m, false), 0);
    assert_eq!(key(&ma, m, false), key(&mb, m, false));
    assert_ne!(key(&ma, m, false), key(&mc, m, false), "column order");
    assert_ne!(key(&ma, m, false), key(&md, m, false), "K");
    assert_ne!(key(&ma, m, false), key(&ma, m, true), "x type");
    assert_eq!(
        key(&ma, GEMM_FROM as usize, false),
        0,
        "the GEMM has no pre-pass"
    );

    let x = rng.vec(m * k);
    let xb = upload(&ctx, &f32_bytes(&x), "test x").unwrap();
    let need = gemv::workspace_bytes(&ctx.rules, &ma.form, &p(&ma, m, false, false)).unwrap();
    assert_eq!(
        need,
        gemv::workspace_bytes(&ctx.rules, &mb.form, &p(&mb, m, false, false)).unwrap()
    );
    let wb = Buffer::new(&ctx.device, need, MemoryKind::Readback, "test workspace").unwrap();
    let ya = Buffer::new(
        &ctx.device,
        4 * (m * 40) as u64,
        MemoryKind::Readback,
        "test y 40",
    )
    .unwrap();
    let yb = Buffer::new(
        &ctx.device,
        4 * (m * 70) as u64,
        MemoryKind::Readback,
        "test y",
    )
    .unwrap();
    let run = |record_a: bool| {
        submit_for_host(&ctx, |cmd| {
            if record_a {
                gemv::record(
                    &ctx,
                    cmd,
                    &ma,
                    whole_range(&xb),
                    whole_range(&ya),
                    &p(&ma, m, false, false),
                    Some(whole_range(&wb)),
                )?;
            }
            gemv::record(
                &ctx,
                cmd,
                &mb,
                whole_range(&xb),
                whole_range(&yb),
                &p(&mb, m, false, true),
                Some(whole_range(&wb)),
            )
        })
        .unwrap()
    };
    // One command buffer: A's call writes the digits, B's reuses them.
    run(true);
    let err = reference::relative_error(&read_f32s(&ya, m * 40), &reference::gemv(&a, &x, m));
    assert!(err < 1e-5, "A: {err:e}");
    let err = reference::relative_error(&read_f32s(&yb, m * 70), &reference::gemv(&b, &x, m));
    assert!(err < 1e-5, "B on A's pre-pass: {err:e}");
    // The flag is honoured: on a workspace no pre-pass wrote, B's call computes nothing of x.
    wb.write(0, &vec![0u8; need as usize]);
    run(false);
    let err = reference::relative_error(&read_f32s(&yb, m * 70), &reference::gemv(&b, &x, m));
    assert!(err > 0.5, "B ran a pre-pass of its own: {err:e}");
    assert_nothing_logged();
}
