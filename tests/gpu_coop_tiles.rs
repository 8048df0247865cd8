//! The tensor-core GEMM on the SIMT layout (`shaders/gemm_q4_coop_tiles.comp`, `vk::coop_tiles`):
//! on a device whose `VK_KHR_cooperative_matrix` offers a usable f16 shape (in CI Mesa
//! 26.1's lavapipe: 8 × 8 × 8 fragments, subgroups of 8, not NVIDIA's fragment layout),
//! every matrix form (zero points, f32 scales, offsets, a column order, per-channel and
//! every group size), f32 and f16 x, m from 1 (GEMV sizes, the kernel forced from m = 1) to
//! 70, odd shapes and partial tiles, matrices in several parts, against the f64 reference
//! with validation on; its counterpart on GGUF blocks (`shaders/gemm_blocks_coop.comp`) on
//! every block type; and by default they replace the SIMT GEMMs where the device's row says.
//! On a device without such a shape the context must say so and run the SIMT GEMM;
//! `Q4VK_EXPECT_COOP_TILES=1` (CI's run on that lavapipe) makes that a failure.

mod gpu_support;
use gpu_support::blocks::{blocks_desc, dequantized, random_blocks};
use gpu_support::*;
use q4vk::cpu::reference;
use q4vk::cpu::reference::gemv_dense;
use q4vk::import::gguf_blocks::BlockType;
use q4vk::plan::Overrides;
use q4vk::quant::q4::Q4Data;
use q4vk::vk::context::{Context, ContextConfig};
use q4vk::vk::gemv::{decide, gemv_host, KernelChoice, Room};
use q4vk::vk::matrix::{DeviceMatrix, UploadRoute};

/// A validated context with the tensor-core GEMM on the SIMT layout fixed on from
/// `gemm_from_m` (`None`: the rules'), or `None` where the device offers no shape for it
/// (an error where `Q4VK_EXPECT_COOP_TILES=1`).
fn tiles_context(gemm_from_m: Option<u32>) -> Option<Context> {
    let config = ContextConfig {
        device_index: -1,
        validation: true,
        overrides: Overrides {
            coop_tiles: gemm_from_m.map(|_| true),
            gemm_from_m,
            ..Default::default()
        },
        ..Default::default()
    };
    let ctx = Context::new(config, counting_logger()).unwrap();
    if ctx.rules.coop_tiles.is_none() {
        let expected = std::env::var("Q4VK_EXPECT_COOP_TILES").is_ok_and(|v| v == "1");
        assert!(
            !expected,
            "{}: Q4VK_EXPECT_COOP_TILES=1 but the device offers no fragment shape for the tensor-core GEMM on the SIMT layout",
            ctx.device_name()
        );
        eprintln!(
            "{}: no cooperative-matrix shape for the tensor-core GEMM on the SIMT layout; it does not run here",
            ctx.device_name()
        );
        return None;
    }
    Some(ctx)
}

/// Runs `m` rows of x on `mat` recorded (f32 and f16 x), asserting that the call runs the
/// tiles kernel of the matrix's form (on the SIMT layout or on GGUF blocks) and matches
/// `reference` (y of `x` in the matrix's column order) within 1e-5.
fn assert_tiles_call_matches(
    ctx: &Context,
    mat: &DeviceMatrix,
    m: usize,
    rng: &mut Rng,
    reference: impl Fn(&[f32]) -> Vec<f64>,
    what: &str,
) {
    let k = mat.form.shape.k;
    let x = rng.vec(m * k);
    let (xh, xh_bytes) = rounded_to_f16(&x);
    let x_bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    for (x_f16, bytes, values) in [(false, &x_bytes, &x), (true, &xh_bytes, &xh)] {
        let how = Recording {
            x_f16,
            ..Default::default()
        };
        let p = dense_params(&mat.form, m, how);
        let choice = decide(&ctx.rules, &mat.form, &p, Room::AsNeeded).unwrap();
        let tiles = match mat.form.blocks {
            Some(_) => matches!(choice.kernel, KernelChoice::BlocksTiles(_)),
            None => matches!(choice.kernel, KernelChoice::CoopTiles(_)),
        };
        assert!(tiles, "{what} m {m} f16 {x_f16}: {choice}");
        let y = try_record_gemv(ctx, mat, bytes, m, how).unwrap();
        assert!(y.iter().all(|v| v.is_finite()), "unwritten y: {what} m {m}");
        let err = reference::relative_error(&y, &reference(values));
        assert!(err < 1e-5, "{what} m {m} f16 {x_f16}: {err:e}");
    }
}

#[test]
fn every_form_matches_reference_at_every_m() {
    let Some(mut ctx) = tiles_context(Some(1)) else {
        return;
    };
    // Parts of a few row tiles each, so the part loop and partial tiles run too.
    ctx.limits.max_part_bytes = 24 * 1024;
    let mut rng = Rng(0x711E5);
    // (n, k, group, zero points, f32 scales)
    let cases = [
        (61usize, 700usize, 32i32, true, false),
        (130, 384, 128, false, true),
        (9, 1000, -1, false, false),
        (200, 256, 64, true, true),
        (33, 96, 32, false, false),
    ];
    for &(n, k, g, z, f32_scales) in &cases {
        let d = random_q4(&mut rng, n, k, g, z, f32_scales);
        let mat = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
        assert!(mat.form.coop.is_none());
        for m in [1usize, 2, 5, 8, 9, 33, 70] {
            let what = format!("{n}x{k} g{g} z{z} s{f32_scales}");
            assert_tiles_call_matches(
                &ctx,
                &mat,
                m,
                &mut rng,
                |x| reference::gemv(&d, x, m),
                &what,
            );
        }
    }
    // Per-group offsets (w = s·u + o, GGUF Q4_1 / Q4_K).
    for &(n, k, g) in &[(45usize, 300usize, 32i32), (70, 512, 64)] {
        let d = random_q4(&mut rng, n, k, g, false, true);
        let offsets = rng.vec(d.shape.scale_count());
        let mat = DeviceMatrix::new(&ctx, &d, Some(&offsets), None).unwrap();
        for m in [1usize, 8, 40] {
            let reference = |x: &[f32]| reference::gemv_with_offsets(&d, &offsets, x, m);
            assert_tiles_call_matches(&ctx, &mat, m, &mut rng, reference, "offsets");
        }
    }
    // A column order (GPTQ act-order): the kernel gathers x.
    for &(n, k, g, z) in &[(45usize, 300usize, 32i32, true), (70, 256, 128, false)] {
        let d = random_q4(&mut rng, n, k, g, z, false);
        let order = shuffled(&mut rng, k);
        let mat = DeviceMatrix::new(&ctx, &d, None, Some(&order)).unwrap();
        for m in [1usize, 33] {
            let reference = |x: &[f32]| {
                let ordered: Vec<f32> = x
                    .chunks_exact(k)
                    .flat_map(|row| order.iter().map(|&i| row[i as usize]))
                    .collect();
                reference::gemv(&d, &ordered, m)
            };
            assert_tiles_call_matches(&ctx, &mat, m, &mut rng, reference, "act-order");
        }
    }
    assert_nothing_logged();
}

/// A seeded random `n` × `k` matrix of GGUF blocks of `ty` on `ctx`, and its weights as
/// `q4vk_matrix_dequantize` gives them (`[n][k]`).
fn blocks_matrix(
    ctx: &Context,
    rng: &mut Rng,
    ty: BlockType,
    n: usize,
    k: usize,
) -> (DeviceMatrix, Vec<f32>) {
    let bytes = random_blocks(rng, ty, n, k);
    let w = dequantized(&blocks_desc(ty, n, k, &bytes));
    let mat = DeviceMatrix::from_blocks(ctx, ty, n, k, &bytes, &mut UploadRoute::Queue).unwrap();
    (mat, w)
}

/// Every GGUF block type on the tensor-core GEMM on blocks (`shaders/gemm_blocks_coop.comp`):
/// one block per row and several, odd row counts and parts of a few row tiles, GEMV and
/// GEMM sizes of m (one token tile and several), f32 and f16 x, against the f64 GEMV of `q4vk_matrix_dequantize`'s
/// weights (bit for bit gguf-py's).
#[test]
fn every_block_type_matches_reference() {
    let Some(mut ctx) = tiles_context(Some(1)) else {
        return;
    };
    ctx.limits.max_part_bytes = 24 * 1024;
    let mut rng = Rng(0xB10C5);
    for ty in BlockType::ALL {
        let b = ty.block_elements();
        for (n, k) in [(37usize, b), (70, 3 * b)] {
            let (mat, w) = blocks_matrix(&ctx, &mut rng, ty, n, k);
            for m in [1usize, 19, 45] {
                let what = format!("{} {n}x{k}", ty.name());
                let reference = |x: &[f32]| gemv_dense(&w, x, n, k, m);
                assert_tiles_call_matches(&ctx, &mat, m, &mut rng, reference, &what);
            }
        }
    }
    assert_nothing_logged();
}

/// Activations so large or small that f32 x is split at the ends of its range: the
/// block factors keep the sums exact to the tolerance.
#[test]
fn extreme_activations_keep_their_accuracy() {
    let Some(ctx) = tiles_context(Some(1)) else {
        return;
    };
    let mut rng = Rng(0xE87);
    let d: Q4Data = random_q4(&mut rng, 40, 512, 128, true, false);
    let mat = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
    for scale in [1e-30f32, 1e30] {
        let m = 3;
        // One block of every row much smaller than the rest.
        let x: Vec<f32> = rng
            .vec(m * 512)
            .iter()
            .enumerate()
            .map(|(i, v)| {
                if i % 512 < 128 {
                    v * 1e-6 * scale
                } else {
                    v * scale
                }
            })
            .collect();
        let want = reference::gemv(&d, &x, m);
        let mut y = vec![f32::NAN; m * 40];
        gemv_host(&ctx, &mat, &x, &mut y, m as u32).unwrap();
        let err = reference::relative_error(&y, &want);
        assert!(err < 1e-5, "x scaled by {scale:e}: {err:e}");
    }
    assert_nothing_logged();
}

/// Without fixed choices the device's row decides: where it runs the kernel, every call that
/// runs a GEMM on a SIMT-layout matrix runs it, and likewise its counterpart on GGUF blocks;
/// the GEMV sizes keep the GEMVs.
#[test]
fn the_device_row_decides_where_it_runs() {
    let Some(ctx) = tiles_context(None) else {
        return;
    };
    let mut rng = Rng(0x70);
    let d = random_q4(&mut rng, 100, 512, 128, false, false);
    let mat = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
    let by_row = ctx.rules.row.coop_tiles_gemm;
    for m in [1usize, 8, 64, 200] {
        let p = dense_params(&mat.form, m, Recording::default());
        let choice = decide(&ctx.rules, &mat.form, &p, Room::None).unwrap();
        let tiles = matches!(choice.kernel, KernelChoice::CoopTiles(_));
        assert_eq!(tiles, by_row && choice.runs_gemm(), "m {m}: {choice}");
        let x = rng.vec(m * 512);
        let mut y = vec![f32::NAN; m * 100];
        gemv_host(&ctx, &mat, &x, &mut y, m as u32).unwrap();
        let err = reference::relative_error(&y, &reference::gemv(&d, &x, m));
        assert!(err < 1e-5, "m {m} ({choice}): {err:e}");
    }
    // GGUF blocks: the tensor-core GEMM on blocks where the row takes it.
    let by_row = ctx.rules.row.blocks_coop_tiles_gemm;
    let (n, k) = (100, 512);
    let (mat, w) = blocks_matrix(&ctx, &mut rng, BlockType::Q4K, n, k);
    for m in [1usize, 8, 64] {
        let p = dense_params(&mat.form, m, Recording::default());
        let choice = decide(&ctx.rules, &mat.form, &p, Room::None).unwrap();
        let tiles = matches!(choice.kernel, KernelChoice::BlocksTiles(_));
        assert_eq!(tiles, by_row && choice.runs_gemm(), "Q4_K m {m}: {choice}");
        let x = rng.vec(m * k);
        let mut y = vec![f32::NAN; m * n];
        gemv_host(&ctx, &mat, &x, &mut y, m as u32).unwrap();
        let err = reference::relative_error(&y, &gemv_dense(&w, &x, n, k, m));
        assert!(err < 1e-5, "Q4_K m {m} ({choice}): {err:e}");
    }
    assert_nothing_logged();
}
