//! The tensor-core GEMV (`VK_KHR_cooperative_matrix`, shaders/gemv_q4_coop.comp). On a
//! device that offers it (NVIDIA): every (tiles, subgroups) shape of the kernel against the
//! f64 reference, with matrices split into several parts, m = 1..8, odd shapes, every group
//! size, zero points on and off. On a device without it (lavapipe in CI): the context must
//! fall back to the SIMT kernels, and `Q4VK_CONTEXT_NO_COOPMAT` must always do so. The
//! tensor-core GEMM (m > 8, shaders/gemm_q4_coop.comp) likewise: every tile shape, f32 and
//! f16 activations in fragments from a workspace and staged without one, f32 rounded to f16
//! with `Q4VK_GEMV_ROUND_X_TO_F16`, zero points and offsets, partial tiles of rows and
//! tokens, token groups, the m = 2..7 calls that run it on x in fragments instead of the
//! GEMV, and where the wide tile runs by default.

mod gpu_support;
use gpu_support::*;
use q4vk::cpu::reference;
use q4vk::ffi::context::Q4VK_CONTEXT_NO_COOPMAT;
use q4vk::plan::{CoopGemmTuning, Overrides};
use q4vk::quant::q4::Q4Data;
use q4vk::vk::context::{Context, ContextConfig};
use q4vk::vk::gemv::{self, gemv_host};
use q4vk::vk::matrix::DeviceMatrix;

fn context(coop_tuning: Option<(u32, u32)>) -> Context {
    gemm_context(coop_tuning, None, None)
}

/// A validated context with the tensor-core GEMV shape, GEMM shape and GEMM threshold
/// fixed where given.
fn gemm_context(
    coop_tuning: Option<(u32, u32)>,
    coop_gemm_tuning: Option<CoopGemmTuning>,
    gemm_from_m: Option<u32>,
) -> Context {
    let config = ContextConfig {
        device_index: -1,
        validation: true,
        overrides: Overrides {
            coop_gemv: coop_tuning,
            coop_gemm: coop_gemm_tuning,
            gemm_from_m,
            ..Default::default()
        },
        ..Default::default()
    };
    Context::new(config, counting_logger()).unwrap()
}

/// y of `gemv_host` (poisoned with NaN first) on `m` rows `x`, or `None` where the fixed
/// shape is refused, which may only be for lack of shared memory (the largest shapes).
fn gemv_unless_too_wide(
    ctx: &Context,
    mat: &DeviceMatrix,
    x: &[f32],
    m: usize,
) -> Option<Vec<f32>> {
    let mut y = vec![f32::NAN; m * mat.form.shape.n];
    match gemv_host(ctx, mat, x, &mut y, m as u32) {
        Ok(()) => Some(y),
        Err(e) => {
            assert!(e.to_string().contains("shared memory"), "{e}");
            None
        }
    }
}

/// A random matrix per (n, k, group, zero points) case, f32 scales on even n.
fn random_cases(
    rng: &mut Rng,
    cases: &[(usize, usize, i32, bool)],
) -> Vec<q4vk::quant::q4::Q4Data<'static>> {
    cases
        .iter()
        .map(|&(n, k, g, z)| random_q4(rng, n, k, g, z, n % 2 == 0))
        .collect()
}

#[test]
fn tensor_core_shapes_match_reference_or_fall_back() {
    let probe = context(None);
    if !probe.coop {
        // Nothing here can run the kernel: the context must have said no for a reason
        // (the device lacks the extension, its features, the shape or 32-wide subgroups)
        // and serve matrices with the SIMT kernels.
        assert!(!probe.device.coop_offer.fragments || probe.rules.portable);
        assert_ne!(probe.kernel_path(), "coopmat");
        eprintln!(
            "{}: no tensor-core path (kernel: {}); the SIMT fallback is what runs",
            probe.device_name(),
            probe.kernel_path()
        );
        return;
    }
    drop(probe);
    let mut rng = Rng(777);
    let cases = [
        (61usize, 700usize, 32i32, true),
        (9, 4096, -1, false),
        (130, 96, 256, true),
        (33, 1000, 64, false),
        (200, 384, 128, true),
    ];
    let data = random_cases(&mut rng, &cases);
    for tuning in [(1, 1), (1, 4), (2, 2), (2, 8), (4, 4), (4, 16), (3, 2)] {
        let mut ctx = context(Some(tuning));
        // Parts of a few tiles each, so the dispatcher's part loop runs too.
        ctx.limits.max_part_bytes = 3 * 16 * 1024;
        for d in &data {
            let mat = DeviceMatrix::new(&ctx, d, None, None).unwrap();
            assert!(mat.form.coop.is_some());
            for m in [1usize, 3, 4, 5, 8] {
                let x = rng.vec(m * d.shape.k);
                let Some(y) = gemv_unless_too_wide(&ctx, &mat, &x, m) else {
                    continue;
                };
                assert!(y.iter().all(|v| v.is_finite()), "unwritten y {tuning:?}");
                let want = reference::gemv(d, &x, m);
                let err = reference::relative_error(&y, &want);
                assert!(
                    err < 1e-5,
                    "tiles/subgroups {tuning:?} n {} k {} m {m}: {err:e}",
                    d.shape.n,
                    d.shape.k
                );
                // With a workspace (as `gemv_host` has) m = 8 runs the GEMM on x in
                // fragments; the GEMV of this shape runs without one.
                if m == 8 {
                    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
                    let how = Recording {
                        no_workspace: true,
                        ..Default::default()
                    };
                    match try_record_gemv(&ctx, &mat, &bytes, m, how) {
                        Ok(y) => {
                            let err = reference::relative_error(&y, &want);
                            assert!(err < 1e-5, "GEMV {tuning:?} m 8: {err:e}");
                        }
                        Err(e) => assert!(e.to_string().contains("shared memory"), "{e}"),
                    }
                }
            }
        }
    }
    // Per-group offsets (w = s·u + o, GGUF Q4_1 / Q4_K) in the tensor-core layout.
    for &(n, k, g) in &[(45usize, 300usize, 32i32), (130, 1024, 32), (20, 256, 64)] {
        let d = random_q4(&mut rng, n, k, g, false, n % 2 == 0);
        let offsets = rng.vec(d.shape.scale_count());
        let ctx = context(Some((2, 4)));
        let mat = DeviceMatrix::new(&ctx, &d, Some(&offsets), None).unwrap();
        for m in [1usize, 6] {
            let x = rng.vec(m * k);
            let mut y = vec![f32::NAN; m * n];
            gemv_host(&ctx, &mat, &x, &mut y, m as u32).unwrap();
            let want = reference::gemv_with_offsets(&d, &offsets, &x, m);
            let err = reference::relative_error(&y, &want);
            assert!(err < 1e-5, "offsets n {n} k {k} g {g} m {m}: {err:e}");
        }
    }
    assert_nothing_logged();
}

/// A context on the tensor-core path, or `None` (after saying that `what` does not run)
/// where the device has none.
fn tensor_core_context(what: &str) -> Option<Context> {
    let ctx = context(None);
    if !ctx.coop {
        eprintln!("no tensor-core path: {what} does not run");
        return None;
    }
    Some(ctx)
}

/// Runs `m` rows of fresh f16 x on `mat` (with a workspace, y poisoned) and asserts that
/// every element was written and matches the f64 reference of `d` within 1e-5.
fn assert_f16_call_matches(ctx: &Context, mat: &DeviceMatrix, d: &Q4Data, m: usize, rng: &mut Rng) {
    let x: Vec<f32> = rng.vec(m * d.shape.k);
    let xh: Vec<f32> = x.iter().map(|&v| half::f16::from_f32(v).to_f32()).collect();
    let y = try_record_gemv(ctx, mat, &f16_le_bytes(&xh), m, F16_X).unwrap();
    let what = format!("f16 x {:?} m {m}", d.shape);
    assert!(y.iter().all(|v| v.is_finite()), "unwritten y: {what}");
    let err = reference::relative_error(&y, &reference::gemv(d, &xh, m));
    assert!(err < 1e-5, "{what}: {err:e}");
}

#[test]
fn fragments_gemm_replaces_the_gemv_by_activation_type_and_matrix_size() {
    let Some(ctx) = tensor_core_context("the GEMM on x in fragments") else {
        return;
    };
    let mut rng = Rng(5150);
    // f16 x with a workspace on small matrices: the GEMM (8-token tiles, most of them
    // padding) from m = 5; f32 x keeps the GEMV below m = 8.
    let cases = [
        (61usize, 700usize, 32i32, true),
        (130, 96, 256, false),
        (33, 1000, 64, true),
    ];
    for d in &random_cases(&mut rng, &cases) {
        let mat = DeviceMatrix::new(&ctx, d, None, None).unwrap();
        for m in [4usize, 5, 7] {
            let gemm = call_runs_gemm(&ctx, &mat, &dense_params(&mat.form, m, F16_X), true);
            assert_eq!(gemm, m >= 5, "f16 x, m {m}");
            let f32_params = dense_params(&mat.form, m, Recording::default());
            assert!(!call_runs_gemm(&ctx, &mat, &f32_params, true));
            assert_f16_call_matches(&ctx, &mat, d, m, &mut rng);
        }
    }
    // Larger matrices, (rows, columns, m, activation type, whether the GEMM runs): 2^25
    // weights take it from m = 4 for f16 x and from m = 7 for f32 x, 2^26 from m = 3 for
    // f16 x and m = 5 for f32 x.
    let cases = [
        (4096usize, 8192usize, 4usize, true, true),
        (4096, 8192, 3, true, false),
        (4096, 8192, 6, false, false),
        (4096, 8192, 7, false, true),
        (8192, 8192, 4, false, false),
        (8192, 8192, 6, false, true),
        (8192, 8192, 2, true, false),
        (8192, 8192, 3, true, true),
    ];
    for (n, k, m, x_f16, want_gemm) in cases {
        let d = random_q4(&mut rng, n, k, 128, false, false);
        let mat = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
        let how = Recording {
            x_f16,
            ..Default::default()
        };
        let what = format!("{n} x {k}, m {m}, f16 x {x_f16}");
        let gemm = call_runs_gemm(&ctx, &mat, &dense_params(&mat.form, m, how), true);
        assert_eq!(gemm, want_gemm, "{what}");
        let mut x: Vec<f32> = rng.vec(m * k);
        if x_f16 {
            x.iter_mut()
                .for_each(|v| *v = half::f16::from_f32(*v).to_f32());
        }
        let bytes: Vec<u8> = match x_f16 {
            true => f16_le_bytes(&x),
            false => x.iter().flat_map(|v| v.to_le_bytes()).collect(),
        };
        let y = try_record_gemv(&ctx, &mat, &bytes, m, how).unwrap();
        assert!(y.iter().all(|v| v.is_finite()), "unwritten y: {what}");
        let err = reference::relative_error(&y, &reference::gemv(&d, &x, m));
        assert!(err < 1e-5, "{what}: {err:e}");
    }
    assert_nothing_logged();
}

/// f16 x from m = 64 on K ≤ 16384 runs the wide tile (2 × 4 subgroups, 128 rows × 64
/// tokens) where the rules run a tile whole, and the 4 × 4 tile where 64-token tiles would
/// pad m by more than 32-token ones; the wide tile loads B 4 k-steps ahead for groups under
/// 128 and 2 for groups of 128; each against the reference, y poisoned first.
#[test]
fn wide_tile_runs_by_default_for_f16_x() {
    let Some(ctx) = tensor_core_context("the tensor-core GEMM") else {
        return;
    };
    let mut rng = Rng(6061);
    let d = random_q4(&mut rng, 8192, 1000, 64, true, false);
    let mat = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
    // (m, tiles, subgroups, tokens): m = 530 pads to 576 in either tile width, m = 160 to
    // 192 in 64-token tiles against 160.
    for (m, tiles, subgroups, tokens) in [
        (512usize, 2u32, 4u32, 64u32),
        (1000, 2, 4, 64),
        (530, 2, 4, 64),
        (160, 4, 4, 32),
    ] {
        let params = dense_params(&mat.form, m, F16_X);
        let (shape, slices) = coop_gemm_shape(&ctx, &mat, &params, true).unwrap();
        let got = (
            shape.tiles,
            shape.subgroups,
            shape.tokens,
            shape.token_groups,
            slices,
        );
        assert_eq!(got, (tiles, subgroups, tokens, 1, 1), "m {m}: {shape}");
        // Groups under 128 load B 4 k-steps ahead on the wide tile, 2 on the other.
        assert_eq!(
            shape.b_ahead,
            if tokens == 64 { 4 } else { 2 },
            "m {m}: {shape}"
        );
        assert_f16_call_matches(&ctx, &mat, &d, m, &mut rng);
    }
    // Groups of 32 take the same look-ahead, groups of 128 keep 2.
    for (group, ahead) in [(32, 4), (128, 2)] {
        let d = random_q4(&mut rng, 8192, 1000, group, false, false);
        let mat = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
        let params = dense_params(&mat.form, 512, F16_X);
        let (shape, _) = coop_gemm_shape(&ctx, &mat, &params, true).unwrap();
        assert_eq!(
            (shape.tokens, shape.b_ahead),
            (64, ahead),
            "group {group}: {shape}"
        );
        assert_f16_call_matches(&ctx, &mat, &d, 512, &mut rng);
    }
    assert_nothing_logged();
}

/// Where the driver reports its SM count, the rules run the tensor-core GEMM in the K
/// slices that `vk::coop_shapes::filling_slices` gives (on the H200: 8 for f16 x and for exact f32
/// x on 4096 × 16384 at m = 64), with a workspace `workspace_bytes` sized for their sums;
/// f16 and exact f32 x against the reference, y poisoned first.
#[test]
fn filling_slices_run_by_default() {
    let Some(ctx) = tensor_core_context("K slices that fill the GPU") else {
        return;
    };
    let Some(sms) = ctx.device.info.sm_count else {
        eprintln!("the driver reports no SM count: K slices that fill the GPU do not run");
        return;
    };
    let mut rng = Rng(7070);
    let (n, k, m) = (4096usize, 16384usize, 64usize);
    let d = random_q4(&mut rng, n, k, 128, false, false);
    let mat = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
    for (how, parts) in [(F16_X, 1), (Recording::default(), 2)] {
        let params = dense_params(&mat.form, m, how);
        let want = q4vk::vk::coop_shapes::filling_slices(n, k, m as u32, parts, Some(sms));
        let (shape, slices) = coop_gemm_shape(&ctx, &mat, &params, true).unwrap();
        if let Some(z) = want {
            assert_eq!(slices, z, "{parts} parts on {sms} SMs: {shape}");
            let sums = 4 * u64::from(z) * (m * n) as u64;
            assert!(gemv::workspace_bytes(&ctx.rules, &mat.form, &params).unwrap() >= sums);
        }
        match how.x_f16 {
            true => assert_f16_call_matches(&ctx, &mat, &d, m, &mut rng),
            false => {
                let x: Vec<f32> = rng.vec(m * k);
                let mut y = vec![f32::NAN; m * n];
                gemv_host(&ctx, &mat, &x, &mut y, m as u32).unwrap();
                assert!(y.iter().all(|v| v.is_finite()), "unwritten y, exact f32 x");
                let err = reference::relative_error(&y, &reference::gemv(&d, &x, m));
                assert!(err < 1e-5, "exact f32 x in {slices} slices: {err:e}");
            }
        }
    }
    assert_nothing_logged();
}

#[test]
fn no_coopmat_flag_selects_the_simt_kernels() {
    let gpu = Gpu::with(false, |d| d.flags |= Q4VK_CONTEXT_NO_COOPMAT).unwrap();
    assert_eq!(gpu.context().kernel_path(), "subgroup");
    let mut rng = Rng(5);
    let data = random_q4(&mut rng, 40, 300, 32, true, false);
    let mat = upload_q4(&gpu, &data);
    let x = rng.vec(2 * 300);
    assert!(check_gemv(&gpu, mat, &data, &x, 2) < 1e-5);
    unsafe { q4vk::ffi::matrix::q4vk_matrix_destroy(mat) };
}

/// f32 x that `Q4VK_GEMV_ROUND_X_TO_F16` lets round to f16.
const ROUNDED: Recording = Recording {
    x_f16: false,
    x_round_f16: true,
    x_round_int8: false,
    no_workspace: false,
};

/// f16 x, with a workspace.
const F16_X: Recording = Recording {
    x_f16: true,
    x_round_f16: false,
    x_round_int8: false,
    no_workspace: false,
};

/// f32 x without a workspace (each workgroup stages it).
const STAGED: Recording = Recording {
    x_f16: false,
    x_round_f16: false,
    x_round_int8: false,
    no_workspace: true,
};

/// Rows of `k` activations as `Q4VK_GEMV_ROUND_X_TO_F16` rounds them, per block of
/// `block` columns ([`round_block_to_f16`]), as f32 values.
fn rounded_x(x: &[f32], k: usize, block: usize) -> Vec<f32> {
    let mut out = x.to_vec();
    for row in out.chunks_exact_mut(k) {
        for b in row.chunks_mut(block) {
            let (factor, halves) = round_block_to_f16(b);
            for (v, h) in b.iter_mut().zip(halves) {
                *v = half::f16::from_bits(h).to_f32() * factor;
            }
        }
    }
    out
}

/// f16 values held as f32, as f16 bytes padded to whole 32-bit words.
fn f16_le_bytes(x: &[f32]) -> Vec<u8> {
    let mut xv: Vec<u8> = x
        .iter()
        .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
        .collect();
    xv.resize(xv.len().next_multiple_of(4), 0);
    xv
}

#[test]
fn tensor_core_gemm_matches_reference() {
    if !context(None).coop {
        eprintln!("no tensor-core path: the SIMT GEMM (gpu_gemm) is what runs");
        return;
    }
    let mut rng = Rng(4242);
    let cases = [
        (61usize, 700usize, 32i32, true),
        (9, 4096, -1, false),
        (130, 96, 256, true),
        (200, 384, 128, false),
    ];
    let data = random_cases(&mut rng, &cases);
    // (tiles, subgroups, tokens, K groups, k-steps of B ahead on x in fragments or 0 for
    // the default, token groups); None: the default per activation type.
    let shapes = [
        None,
        Some(CoopGemmTuning::new(1, 1, 8, 1, 0, 1)),
        Some(CoopGemmTuning::new(1, 8, 16, 1, 8, 1)),
        Some(CoopGemmTuning::new(3, 2, 24, 1, 0, 1)),
        Some(CoopGemmTuning::new(2, 4, 128, 1, 0, 1)),
        Some(CoopGemmTuning::new(4, 4, 16, 1, 4, 1)),
        Some(CoopGemmTuning::new(2, 8, 16, 2, 0, 1)),
        Some(CoopGemmTuning::new(1, 4, 16, 2, 0, 1)),
        Some(CoopGemmTuning::new(2, 4, 8, 4, 2, 1)),
        Some(CoopGemmTuning::new(2, 8, 16, 4, 8, 1)),
        // The wide tile the rules run for f16 x from m = 64 (128 rows × 64 tokens).
        Some(CoopGemmTuning::new(2, 4, 64, 1, 0, 1)),
        // Token groups: alone, with K groups, and 4 of them with one row subgroup each.
        Some(CoopGemmTuning::new(2, 4, 64, 1, 2, 2)),
        Some(CoopGemmTuning::new(1, 8, 32, 2, 4, 2)),
        Some(CoopGemmTuning::new(4, 4, 64, 1, 2, 4)),
    ];
    for shape in shapes {
        let mut ctx = gemm_context(None, shape, None);
        ctx.limits.max_part_bytes = 3 * 16 * 1024;
        for d in &data {
            let mat = DeviceMatrix::new(&ctx, d, None, None).unwrap();
            for m in [9usize, 40, 130] {
                let x: Vec<f32> = rng.vec(m * d.shape.k);
                let want = reference::gemv(d, &x, m);
                let Some(y) = gemv_unless_too_wide(&ctx, &mat, &x, m) else {
                    continue;
                };
                assert!(y.iter().all(|v| v.is_finite()), "unwritten y {shape:?}");
                let err = reference::relative_error(&y, &want);
                assert!(err < 1e-5, "GEMM {shape:?} {:?} m {m}: {err:e}", d.shape);
                let xh: Vec<f32> = x.iter().map(|&v| half::f16::from_f32(v).to_f32()).collect();
                let want_h = reference::gemv(d, &xh, m);
                let f32_bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
                // f32 x staged by each workgroup (no workspace; gemv_host ran it in two
                // parts in fragments).
                match try_record_gemv(&ctx, &mat, &f32_bytes, m, STAGED) {
                    Ok(y) => {
                        let err = reference::relative_error(&y, &want);
                        assert!(
                            err < 1e-5,
                            "GEMM {shape:?} {:?} m {m} f32 staged: {err:e}",
                            d.shape
                        );
                    }
                    Err(e) if e.to_string().contains("shared memory") => {}
                    Err(e) => panic!("{shape:?} f32 staged: {e}"),
                }
                let f16_bytes = f16_le_bytes(&xh);
                // f16 x in fragments (a workspace) and staged by each workgroup (none).
                for fragments in [true, false] {
                    let how = Recording {
                        x_f16: true,
                        no_workspace: !fragments,
                        ..Default::default()
                    };
                    let y = match try_record_gemv(&ctx, &mat, &f16_bytes, m, how) {
                        Ok(y) => y,
                        Err(e) if !fragments && e.to_string().contains("shared memory") => continue,
                        Err(e) => panic!("{shape:?} f16 fragments {fragments}: {e}"),
                    };
                    let what = format!(
                        "GEMM {shape:?} {:?} m {m} f16 fragments {fragments}",
                        d.shape
                    );
                    assert!(y.iter().all(|v| v.is_finite()), "unwritten y: {what}");
                    let err = reference::relative_error(&y, &want_h);
                    assert!(err < 1e-5, "{what}: {err:e}");
                }
                // f32 x rounded to f16 (Q4VK_GEMV_ROUND_X_TO_F16) in fragments: the exact
                // result of the rounded x, and within 1e-3 of the unrounded one.
                let block = mat.form.coop.as_ref().unwrap().block as usize;
                let rounded = rounded_x(&x, d.shape.k, block);
                let y = try_record_gemv(&ctx, &mat, &f32_bytes, m, ROUNDED).unwrap();
                let what = format!("GEMM {shape:?} {:?} m {m} rounded x", d.shape);
                assert!(y.iter().all(|v| v.is_finite()), "unwritten y: {what}");
                let err = reference::relative_error(&y, &reference::gemv(d, &rounded, m));
                assert!(err < 1e-5, "{what}: {err:e} against the rounded x");
                let err = reference::relative_error(&y, &want);
                assert!(err < 1e-3, "{what}: {err:e} against x");
            }
        }
    }
    // The GEMM kernel at m = 2..8 (the default at m = 8 for tall matrices).
    let ctx = gemm_context(None, None, Some(2));
    for d in &data {
        let mat = DeviceMatrix::new(&ctx, d, None, None).unwrap();
        assert!(gemv::runs_gemm(&ctx.rules, &mat.form, 2));
        for m in [2usize, 5, 8] {
            let x: Vec<f32> = rng.vec(m * d.shape.k);
            let mut y = vec![f32::NAN; m * d.shape.n];
            gemv_host(&ctx, &mat, &x, &mut y, m as u32).unwrap();
            let err = reference::relative_error(&y, &reference::gemv(d, &x, m));
            assert!(err < 1e-5, "GEMM at m {m} {:?}: {err:e}", d.shape);
        }
    }
    for &(n, k, g) in &[(45usize, 300usize, 32i32), (130, 1024, 64)] {
        let d = random_q4(&mut rng, n, k, g, false, n % 2 == 0);
        let offsets = rng.vec(d.shape.scale_count());
        let ctx = context(None);
        let mat = DeviceMatrix::new(&ctx, &d, Some(&offsets), None).unwrap();
        let m = 37;
        let x = rng.vec(m * k);
        let mut y = vec![f32::NAN; m * n];
        gemv_host(&ctx, &mat, &x, &mut y, m as u32).unwrap();
        let want = reference::gemv_with_offsets(&d, &offsets, &x, m);
        let err = reference::relative_error(&y, &want);
        assert!(err < 1e-5, "GEMM offsets n {n} k {k} g {g}: {err:e}");
        // f32 x rounded to f16 in fragments (the offsets meet the exact block sums).
        let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
        let y = try_record_gemv(&ctx, &mat, &bytes, m, ROUNDED).unwrap();
        let err = reference::relative_error(&y, &want);
        assert!(
            err < 1e-3,
            "GEMM rounded x offsets n {n} k {k} g {g}: {err:e}"
        );
        // f16 x in fragments (a workspace) and staged by each workgroup (none).
        let xh: Vec<f32> = x.iter().map(|&v| half::f16::from_f32(v).to_f32()).collect();
        let want = reference::gemv_with_offsets(&d, &offsets, &xh, m);
        for fragments in [true, false] {
            let how = Recording {
                x_f16: true,
                no_workspace: !fragments,
                ..Default::default()
            };
            let y = try_record_gemv(&ctx, &mat, &f16_le_bytes(&xh), m, how).unwrap();
            let err = reference::relative_error(&y, &want);
            assert!(
                err < 1e-5,
                "GEMM f16 offsets n {n} k {k} g {g} fragments {fragments}: {err:e}"
            );
        }
    }
    // Offsets with token groups: each group's sums of x, for f32 x (two parts in fragments,
    // and staged) and f16 x in fragments.
    let ctx = gemm_context(None, Some(CoopGemmTuning::new(2, 4, 64, 1, 2, 2)), None);
    let d = random_q4(&mut rng, 130, 1024, 64, false, false);
    let offsets = rng.vec(d.shape.scale_count());
    let mat = DeviceMatrix::new(&ctx, &d, Some(&offsets), None).unwrap();
    let m = 100;
    let x = rng.vec(m * 1024);
    let xh: Vec<f32> = x.iter().map(|&v| half::f16::from_f32(v).to_f32()).collect();
    let f32_bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let runs = [
        (&f32_bytes, Recording::default(), &x),
        (&f32_bytes, STAGED, &x),
        (&f16_le_bytes(&xh), F16_X, &xh),
    ];
    for (bytes, how, xv) in runs {
        let y = try_record_gemv(&ctx, &mat, bytes, m, how).unwrap();
        assert!(y.iter().all(|v| v.is_finite()), "unwritten y: {how:?}");
        let err = reference::relative_error(&y, &reference::gemv_with_offsets(&d, &offsets, xv, m));
        assert!(err < 1e-5, "token groups with offsets, {how:?}: {err:e}");
    }
    assert_nothing_logged();
}

/// The tensor-core GEMM in K slices (`Overrides::coop_gemm_slices`; on x in fragments,
/// so `gemv_host`'s workspace and recorded calls with one): every slice count from 2 to
/// more than the stages (clamped to one slice per stage), stages that do not divide among
/// the slices, K groups and token groups inside the slices, matrix parts (each adds its own
/// rows), offsets; f32 x in two parts, f16 x and rounded x, against the reference; y
/// poisoned with NaN first and every element checked written.
#[test]
fn k_slices_match_reference() {
    let Some(_) = tensor_core_context("K slices") else {
        return;
    };
    let mut rng = Rng(5150);
    // (n, k, group, zero points): 1, 3, 5 and 9 stages of 128 k.
    let cases = [
        (61usize, 100usize, 32i32, true),
        (130, 300, 128, false),
        (96, 640, 64, true),
        (200, 1100, -1, false),
    ];
    let data = random_cases(&mut rng, &cases);
    let shapes = [
        None,
        Some(CoopGemmTuning::new(2, 8, 32, 4, 0, 1)),
        Some(CoopGemmTuning::new(2, 4, 64, 1, 2, 2)),
    ];
    for (slices, shape) in [
        (2, shapes[0]),
        (3, shapes[1]),
        (4, shapes[2]),
        (16, shapes[0]),
    ] {
        let mut ctx = gemm_context(None, shape, None);
        ctx.set_overrides(|o| o.coop_gemm_slices = Some(slices))
            .unwrap();
        ctx.limits.max_part_bytes = 3 * 16 * 1024;
        for d in &data {
            let mat = DeviceMatrix::new(&ctx, d, None, None).unwrap();
            for m in [9usize, 40, 130] {
                let what = format!("{slices} slices {shape:?} {:?} m {m}", d.shape);
                let x: Vec<f32> = rng.vec(m * d.shape.k);
                let y = gemv_unless_too_wide(&ctx, &mat, &x, m).expect(&what);
                assert!(y.iter().all(|v| v.is_finite()), "unwritten y: {what}");
                let err = reference::relative_error(&y, &reference::gemv(d, &x, m));
                assert!(err < 1e-5, "{what}: {err:e}");
                let xh: Vec<f32> = x.iter().map(|&v| half::f16::from_f32(v).to_f32()).collect();
                let y = try_record_gemv(&ctx, &mat, &f16_le_bytes(&xh), m, F16_X).unwrap();
                assert!(y.iter().all(|v| v.is_finite()), "unwritten y: {what} f16");
                let err = reference::relative_error(&y, &reference::gemv(d, &xh, m));
                assert!(err < 1e-5, "{what} f16: {err:e}");
                let block = mat.form.coop.as_ref().unwrap().block as usize;
                let rounded = rounded_x(&x, d.shape.k, block);
                let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
                let y = try_record_gemv(&ctx, &mat, &bytes, m, ROUNDED).unwrap();
                let err = reference::relative_error(&y, &reference::gemv(d, &rounded, m));
                assert!(err < 1e-5, "{what} rounded x: {err:e}");
            }
        }
    }
    // Offsets (each slice adds its blocks' b · Σx).
    let mut ctx = gemm_context(None, None, None);
    ctx.set_overrides(|o| o.coop_gemm_slices = Some(3)).unwrap();
    let d = random_q4(&mut rng, 130, 1024, 64, false, false);
    let offsets = rng.vec(d.shape.scale_count());
    let mat = DeviceMatrix::new(&ctx, &d, Some(&offsets), None).unwrap();
    let m = 37;
    let x = rng.vec(m * 1024);
    let mut y = vec![f32::NAN; m * 130];
    gemv_host(&ctx, &mat, &x, &mut y, m as u32).unwrap();
    let err = reference::relative_error(&y, &reference::gemv_with_offsets(&d, &offsets, &x, m));
    assert!(err < 1e-5, "3 slices with offsets: {err:e}");
    assert_nothing_logged();
}

/// Calls in K slices sharing x and one workspace in one command buffer (equal workspace
/// keys), the later ones with `Q4VK_GEMV_REUSE_WORKSPACE` (each one's sums overwrite the
/// last's after a barrier; the matrices' n, so their workspace sizes, differ); a reusing
/// call whose workspace was sized for the smaller matrix, and a call whose workspace holds
/// the fragments but not the slices' sums (both run without slices): every y against the
/// reference, poisoned first.
#[test]
fn k_slices_share_and_fit_the_workspace() {
    use q4vk::vk::gemv::{self, BufferRange};
    use q4vk::vk::memory::{Buffer, MemoryKind};
    let Some(mut ctx) = tensor_core_context("K slices") else {
        return;
    };
    let mut rng = Rng(6160);
    // One group size, so one key: the matrices share the pre-pass's bytes.
    let data = random_cases(&mut rng, &[(61, 640, 64, true), (130, 640, 64, false)]);
    let mats: Vec<DeviceMatrix> = data
        .iter()
        .map(|d| DeviceMatrix::new(&ctx, d, None, None).unwrap())
        .collect();
    let m = 40;
    let x = rng.vec(m * 640);
    let xb = q4vk::vk::matrix::upload(&ctx, &f16_le_bytes(&x), "test x").unwrap();
    let xh: Vec<f32> = x.iter().map(|&v| half::f16::from_f32(v).to_f32()).collect();
    let range = |b: &Buffer, bytes: u64| BufferRange {
        buffer: b.buffer,
        offset: 0,
        range: bytes,
    };
    // Each call: (matrix, reuse the workspace), into its own y; `ws_bytes` shared.
    let run = |ctx: &Context, calls: &[(usize, bool)], ws_bytes: u64| -> Vec<Vec<f32>> {
        let ys: Vec<Buffer> = calls
            .iter()
            .map(|&(i, _)| {
                let b = Buffer::new(
                    &ctx.device,
                    4 * (m * mats[i].form.shape.n) as u64,
                    MemoryKind::Readback,
                    "test y",
                )
                .unwrap();
                b.write(0, &vec![0xFF; 4 * m * mats[i].form.shape.n]);
                b
            })
            .collect();
        let wb = Buffer::new(&ctx.device, ws_bytes, MemoryKind::Device, "test workspace").unwrap();
        submit_for_host(ctx, |cmd| {
            for (&(i, reuse), yb) in calls.iter().zip(&ys) {
                let p = gemv::GemvParams {
                    workspace_filled: reuse,
                    ..dense_params(&mats[i].form, m, F16_X)
                };
                let y = range(yb, 4 * (m * mats[i].form.shape.n) as u64);
                let x = range(&xb, 2 * x.len() as u64);
                gemv::record(ctx, cmd, &mats[i], x, y, &p, Some(range(&wb, ws_bytes)))?;
            }
            Ok(())
        })
        .unwrap();
        ys.iter()
            .zip(calls)
            .map(|(b, &(i, _))| read_f32s(b, m * mats[i].form.shape.n))
            .collect()
    };
    let need = |ctx: &Context, i: usize| {
        gemv::workspace_bytes(
            &ctx.rules,
            &mats[i].form,
            &dense_params(&mats[i].form, m, F16_X),
        )
        .unwrap()
    };
    ctx.set_overrides(|o| o.coop_gemm_slices = Some(1)).unwrap();
    let fragments_only = need(&ctx, 1);
    ctx.set_overrides(|o| o.coop_gemm_slices = Some(3)).unwrap();
    assert!(need(&ctx, 0) < need(&ctx, 1) && fragments_only < need(&ctx, 1));
    let check = |ys: Vec<Vec<f32>>, calls: &[(usize, bool)], what: &str| {
        for (y, &(i, _)) in ys.iter().zip(calls) {
            assert!(y.iter().all(|v| v.is_finite()), "unwritten y: {what}");
            let err = reference::relative_error(y, &reference::gemv(&data[i], &xh, m));
            assert!(err < 1e-5, "{what}, matrix {i}: {err:e}");
        }
    };
    let key = |i: usize| {
        gemv::workspace_key(&ctx.rules, &mats[i], &dense_params(&mats[i].form, m, F16_X)).unwrap()
    };
    assert_eq!(key(0), key(1));
    let shared = [(0, false), (1, true), (0, true)];
    check(
        run(&ctx, &shared, need(&ctx, 1)),
        &shared,
        "shared workspace",
    );
    // Sized for the smaller n: the larger matrix's reusing call runs without slices.
    let sized_for_0 = [(0, false), (1, true)];
    check(
        run(&ctx, &sized_for_0, need(&ctx, 0)),
        &sized_for_0,
        "workspace sized for the smaller matrix",
    );
    let short = [(1, false)];
    check(
        run(&ctx, &short, fragments_only),
        &short,
        "workspace without room for the sums",
    );
    assert_nothing_logged();
}
