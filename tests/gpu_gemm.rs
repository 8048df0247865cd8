//! GEMM (m > 8, the prefill path of `q4vk_gemv`) on the system's Vulkan device (lavapipe in
//! CI) with the validation layer on, against the f64 reference: m = 9 .. 300 on odd n and k
//! (partial chunks, groups and tiles of rows and tokens), every group size, zero points on
//! and off, f16 and f32 scales, on both context kinds (the GEMM kernel is the same SPIR-V;
//! a portable context must take it too). The subgroup contexts are made with
//! `Q4VK_CONTEXT_NO_COOPMAT`, so that devices with tensor cores run this kernel too (their
//! tensor-core GEMM is `gpu_coop`'s). f16 activations, strides and buffer offsets of the GEMM
//! are covered by `gpu_api`'s recorded GEMV, imported sources by `gpu_import`. Also the
//! SIMT GEMV past m = 8, in passes of 8 rows: the same cases, the default limits, and that
//! each pass reads and writes its own rows only.

mod gpu_support;
use gpu_support::*;
use q4vk::cpu::reference;
use q4vk::ffi::context::Q4VK_CONTEXT_NO_COOPMAT;
use q4vk::ffi::matrix::q4vk_matrix_destroy;
use q4vk::ffi::status::Q4VK_ERROR_UNSUPPORTED;
use q4vk::plan::tuned_gemm::gemm_candidates;
use q4vk::plan::GemmTile;
use q4vk::vk::context::{Context, ContextConfig, IntDot};
use q4vk::vk::gemv::{self, runs_gemm, simt_gemv_up_to};
use q4vk::vk::matrix::{upload, DeviceMatrix};
use q4vk::vk::memory::{Buffer, MemoryKind};

/// A context of the kind asked for that runs the SIMT GEMM from m = 9 whatever the device
/// has (by default the SIMT GEMV takes m up to `simt_gemv_up_to` in passes).
fn simt_gpu(portable: bool) -> Gpu {
    let mut gpu = Gpu::with(portable, |d| d.flags |= Q4VK_CONTEXT_NO_COOPMAT).unwrap();
    gpu.context_mut()
        .set_overrides(|o| o.gemm_from_m = Some(9))
        .unwrap();
    gpu
}

/// A fixed SIMT GEMM tile, as `Overrides::gemm_tile` takes it.
fn tile(tx: u32, ty: u32, rn: u32, rm: u32) -> Option<GemmTile> {
    Some(GemmTile { tx, ty, rn, rm })
}

fn sweep(portable: bool) {
    let gpu = simt_gpu(portable);
    let mut rng = Rng(if portable { 23 } else { 19 });
    run_cases(&gpu, &mut rng, &GEMM_CASES);
}

#[test]
fn gemm_matches_reference_on_a_subgroup_context() {
    sweep(false);
}

#[test]
fn gemm_matches_reference_on_a_portable_context() {
    sweep(true);
}

/// The default rule: the SIMT GEMV takes m = 9 .. `simt_gemv_up_to` (11 on lavapipe) in
/// passes of up to 8 activation rows (each pass its own dispatch from its first row; the
/// last pass of the rows left), the GEMM beyond, on both context kinds; the cases' m = 9
/// runs two passes on lavapipe (a GPU's f32 GEMV takes m = 9 too), the rest the GEMM; then
/// every case in passes.
#[test]
fn gemv_in_passes_matches_reference_up_to_its_limit() {
    for portable in [false, true] {
        let mut gpu = Gpu::with(portable, |d| d.flags |= Q4VK_CONTEXT_NO_COOPMAT).unwrap();
        let mut rng = Rng(if portable { 37 } else { 41 });
        run_cases(&gpu, &mut rng, &GEMM_CASES);
        // Every case in passes (m = 300: 38 of them).
        gpu.context_mut()
            .set_overrides(|o| o.gemm_from_m = Some(301))
            .unwrap();
        run_cases(&gpu, &mut rng, &GEMM_CASES);
        gpu.context_mut()
            .set_overrides(|o| o.gemm_from_m = None)
            .unwrap();
        let data = random_q4(&mut rng, 33, 97, 32, false, false);
        let mat = DeviceMatrix::new(gpu.context(), &data, None, None).unwrap();
        let up_to = simt_gemv_up_to(&gpu.context().rules);
        for (m, gemm) in [(8, false), (9, false), (up_to, false), (up_to + 1, true)] {
            assert_eq!(
                runs_gemm(&gpu.context().rules, &mat.form, m),
                gemm,
                "m = {m}"
            );
        }
    }
}

/// Other tiles than the per-m choice (lavapipe takes the CPU tiles of
/// `vk::pipeline::gemm_tile`): the three GPU tiles (the third, past m = 32, only where a
/// call has enough workgroups, which these small matrices do not give); the export's tile with its workgroup grown
/// along tokens (to subgroups of 128 and 256); two rows staged per invocation, and one and a
/// half; 256 invocations; 12 tokens per invocation over 16 invocations along tokens; a
/// workgroup of 96 whose x staging ends in a partial round (`q4vk-bench --gemm-tile` sweeps
/// tiles). A tile beyond the device's shared memory is refused per call, one that breaks the
/// kernel's rules when set.
#[test]
fn gemm_matches_reference_at_other_tiles() {
    let mut gpu = simt_gpu(false);
    let mut rng = Rng(29);
    let tiles = [
        Some(q4vk::plan::tuning::NVIDIA.simt_gemm_tiles.for_m(9)),
        Some(q4vk::plan::tuning::NVIDIA.simt_gemm_tiles.for_m(17)),
        Some(q4vk::plan::tuning::NVIDIA.simt_gemm_tiles.for_m(33)),
        tile(8, 16, 8, 4),
        tile(8, 32, 8, 4),
        tile(16, 4, 8, 8),
        tile(8, 8, 12, 4),
        tile(32, 8, 4, 4),
        tile(8, 16, 4, 12),
        tile(12, 8, 4, 4),
    ];
    for t in tiles {
        gpu.context_mut()
            .set_overrides(|o| o.gemm_tile = t)
            .unwrap();
        run_cases(&gpu, &mut rng, &GEMM_CASES);
    }
    assert!(gpu
        .context_mut()
        .set_overrides(|o| o.gemm_tile = tile(16, 4, 6, 8))
        .is_err());
    assert!(gpu
        .context_mut()
        .set_overrides(|o| o.gemm_tile = tile(64, 32, 4, 4))
        .is_err());

    gpu.context_mut()
        .set_overrides(|o| o.gemm_tile = tile(8, 128, 4, 16))
        .unwrap();
    let data = random_q4(&mut rng, 33, 97, 32, false, false);
    let mat = upload_q4(&gpu, &data);
    let x = rng.vec(9 * 97);
    let (status, _) = gemv_c(gpu.ctx, mat, &x, 33, 9);
    assert_eq!(status, Q4VK_ERROR_UNSUPPORTED);
    assert!(last_error().contains("shared memory"), "{}", last_error());
    unsafe { q4vk_matrix_destroy(mat) };
}

/// The tiles a tuning run may choose on this device (`plan::tuned_gemm::gemm_candidates`
/// at m = 512, which allows every token count) compute what the reference does: the first
/// of each count of invocations along rows and tokens and the first of each count of rows
/// and tokens per invocation (what the kernel's staging loops depend on; each tile is a
/// pipeline to build), on a partial tile of rows and whole or partial tiles of tokens.
#[test]
fn the_tiles_tuning_may_choose_match_reference() {
    let mut gpu = simt_gpu(false);
    let mut rng = Rng(43);
    let class = gpu.context().rules.class;
    let all = gemm_candidates(&q4vk::plan::GEMM_TILE, 512, &class, false);
    let tiles = sampled_tiles(&all);
    assert!(tiles.len() >= 8, "{tiles:?} of {all:?}");
    for t in tiles {
        gpu.context_mut()
            .set_overrides(|o| o.gemm_tile = Some(t))
            .unwrap();
        run_cases(&gpu, &mut rng, &GEMM_CASES[4..5]);
    }
}

/// K groups (several groups of a tile's invocations in one workgroup, taking interleaved
/// chunks of K and adding their sums at the end; GPUs take them where the tiles are too
/// few): 2, 3 and 4 groups on five tiles, including calls whose k has fewer chunks than
/// groups (idle groups) and a tile of 64 tokens, whose sums fit the weight tiles for 2
/// groups only (the 128 × 64 GPU tile with 2 groups needs 48 KiB of shared memory, more
/// than lavapipe's 32). More groups than that tile allows are refused per call, more than 8
/// when set.
#[test]
fn gemm_matches_reference_with_k_groups() {
    let mut gpu = simt_gpu(false);
    let mut rng = Rng(31);
    let runs = [
        (tile(8, 4, 4, 4), 4),
        (tile(16, 4, 4, 4), 3),
        (tile(8, 8, 8, 4), 2),
        (tile(12, 8, 4, 4), 2),
        (tile(8, 8, 4, 8), 2),
    ];
    for (t, k) in runs {
        gpu.context_mut()
            .set_overrides(|o| o.gemm_tile = t)
            .unwrap();
        gpu.context_mut()
            .set_overrides(|o| o.gemm_ksplit = Some(k))
            .unwrap();
        run_cases(&gpu, &mut rng, &GEMM_CASES);
    }
    assert!(gpu
        .context_mut()
        .set_overrides(|o| o.gemm_ksplit = Some(0))
        .is_err());
    assert!(gpu
        .context_mut()
        .set_overrides(|o| o.gemm_ksplit = Some(9))
        .is_err());

    // 16 rows × 64 tokens: 3 groups fit the shared memory (30 KiB) but not the rule.
    gpu.context_mut()
        .set_overrides(|o| o.gemm_tile = tile(4, 8, 4, 8))
        .unwrap();
    gpu.context_mut()
        .set_overrides(|o| o.gemm_ksplit = Some(3))
        .unwrap();
    let data = random_q4(&mut rng, 33, 97, 32, false, false);
    let mat = upload_q4(&gpu, &data);
    let x = rng.vec(9 * 97);
    let (status, _) = gemv_c(gpu.ctx, mat, &x, 33, 9);
    assert_eq!(status, Q4VK_ERROR_UNSUPPORTED);
    assert!(
        last_error().contains("at most 2 K groups"),
        "{}",
        last_error()
    );
    unsafe { q4vk_matrix_destroy(mat) };
}

/// The passes read and write their own rows only: x and y are bound 8 rows longer than m
/// (x's extra rows NaN, y's a sentinel), so a last pass that took 8 rows instead of the
/// rows left would turn the sentinel into NaN. The f32 GEMV (no workspace) and the integer
/// dot-product GEMV (x in digits, with a workspace), at m = 9 and 13 (a partial last pass)
/// and 16 (whole passes), f32 and f16 x.
#[test]
fn gemv_passes_touch_only_their_rows() {
    const SENTINEL: f32 = 12345.0;
    let mut rng = Rng(43);
    let (n, k) = (21usize, 200usize);
    let data = random_q4(&mut rng, n, k, 64, true, false);
    for int_dot in [IntDot::Off, IntDot::Forced] {
        let config = ContextConfig {
            device_index: -1,
            validation: true,
            no_coop: true,
            int_dot,
            overrides: q4vk::plan::Overrides {
                gemm_from_m: Some(17),
                ..Default::default()
            },
            ..Default::default()
        };
        let ctx = Context::new(config, counting_logger()).unwrap();
        let mat = DeviceMatrix::new(&ctx, &data, None, None).unwrap();
        for (m, x_f16) in [(9usize, false), (13, true), (16, false)] {
            let rows = m + 8;
            let mut x = rng.vec(m * k);
            if x_f16 {
                x.iter_mut()
                    .for_each(|v| *v = half::f16::from_f32(*v).to_f32());
            }
            let x_bytes: Vec<u8> = x
                .iter()
                .copied()
                .chain(std::iter::repeat_n(f32::NAN, 8 * k))
                .flat_map(|v| match x_f16 {
                    true => half::f16::from_f32(v).to_le_bytes().to_vec(),
                    false => v.to_le_bytes().to_vec(),
                })
                .collect();
            let xb = upload(&ctx, &x_bytes, "test x").unwrap();
            let yb = Buffer::new(
                &ctx.device,
                4 * (rows * n) as u64,
                MemoryKind::Readback,
                "test y",
            )
            .unwrap();
            let fill: Vec<u8> = (0..rows * n).flat_map(|_| SENTINEL.to_le_bytes()).collect();
            yb.write(0, &fill);
            let how = Recording {
                x_f16,
                ..Default::default()
            };
            let p = dense_params(&mat.form, m, how);
            assert!(!runs_gemm(&ctx.rules, &mat.form, p.m));
            let ws_bytes = gemv::workspace_bytes(&ctx.rules, &mat.form, &p).unwrap();
            assert_eq!(ws_bytes > 0, ctx.rules.int_dot, "{int_dot:?}");
            let wb = Buffer::new(
                &ctx.device,
                ws_bytes.max(16),
                MemoryKind::Device,
                "test workspace",
            )
            .unwrap();
            let workspace = (ws_bytes > 0).then(|| whole_range(&wb));
            submit_for_host(&ctx, |cmd| {
                gemv::record(
                    &ctx,
                    cmd,
                    &mat,
                    whole_range(&xb),
                    whole_range(&yb),
                    &p,
                    workspace,
                )
            })
            .unwrap();
            let y = read_f32s(&yb, rows * n);
            let what = format!("{int_dot:?} m {m} f16 x {x_f16}");
            let err = reference::relative_error(&y[..m * n], &reference::gemv(&data, &x, m));
            assert!(err < 1e-5, "{what}: {err:e}");
            assert!(
                y[m * n..].iter().all(|&v| v == SENTINEL),
                "{what}: rows past m written"
            );
        }
    }
    assert_nothing_logged();
}
