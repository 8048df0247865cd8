//! GGUF block types kept in their native bytes on the device (`layout::blocks`,
//! `shaders/gemv_blocks.comp`, `shaders/gemm_blocks.comp`): Q4_1, Q5_0, Q5_1, Q8_0, Q4_K,
//! Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4 and NVFP4 matrices created through the C ABI from
//! seeded random blocks with sane scales and from gguf-py's vectors, run through `q4vk_gemv`
//! (f32 and f16 x; m from 1 to 6: full and partial passes of 4 of the GEMV; m = 33: the
//! GEMM) into a NaN-poisoned y on the subgroup and portable kernels and on a CPU context,
//! against an f64 GEMV of `q4vk_matrix_dequantize`'s weights (bit for bit gguf-py's) within
//! 1e-5; the plan names the kernel and the matrix's bytes are the file's.

mod gpu_support;
use gpu_support::blocks::*;
use gpu_support::*;
use q4vk::cpu::reference::gemv_dense;
use q4vk::ffi::context::*;
use q4vk::ffi::footprint::*;
use q4vk::ffi::gemv::*;
use q4vk::ffi::matrix::*;
use q4vk::ffi::status::*;
use q4vk::import::gguf_blocks::BlockType;
use q4vk::plan::blocks_gemv::BlocksClass;
use q4vk::plan::tuned_gemm::gemm_candidates;

/// The calls [`check_matrix`] makes: the values of m, whether each also runs f16 x, and the
/// activation rows per pass the GEMV takes at each.
type Calls<'a> = (
    &'a [usize],
    &'a dyn Fn(usize) -> bool,
    &'a dyn Fn(usize) -> usize,
);

/// Creates the matrix of `desc` on `ctx` and checks its GEMV at every m of `ms` with f32
/// x, and with f16 x where `f16_x(m)`, against the f64 reference; on GPU contexts also the
/// plan (the GEMV in passes of `pass_rows(m)` rows) and the bytes.
fn check_matrix(
    ctx: *mut q4vk_context,
    desc: &q4vk_matrix_desc,
    (ms, f16_x, pass_rows): Calls,
    rng: &mut Rng,
    gpu: bool,
    what: &str,
) {
    let (n, k) = (desc.n as usize, desc.k as usize);
    let w = dequantized(desc);
    let mut mat = std::ptr::null_mut();
    let status = unsafe { q4vk_matrix_create(ctx, desc, &mut mat) };
    assert_eq!(
        status,
        Q4VK_OK,
        "{what}: q4vk_matrix_create: {}",
        last_error()
    );
    for &m in ms {
        let x = rng.vec(m * k);
        let (status, y) = gemv_c(ctx, mat, &x, n, m);
        assert_eq!(status, Q4VK_OK, "{what}: q4vk_gemv: {}", last_error());
        assert_close(
            &y,
            &gemv_dense(&w, &x, n, k, m),
            &format!("{what}, m = {m}, f32 x"),
        );
        if f16_x(m) {
            let (xh, bytes) = rounded_to_f16(&x);
            let y = gemv_f16_x(ctx, mat, &bytes, n, m);
            assert_close(
                &y,
                &gemv_dense(&w, &xh, n, k, m),
                &format!("{what}, m = {m}, f16 x"),
            );
        }
        let mut info = unsafe { std::mem::zeroed::<q4vk_gemv_plan_info>() };
        info.struct_size = std::mem::size_of::<q4vk_gemv_plan_info>() as u32;
        let status = unsafe { q4vk_gemv_plan(ctx, mat, m as u32, 0, 0, &mut info) };
        assert_eq!(status, Q4VK_OK, "{what}: q4vk_gemv_plan: {}", last_error());
        match gpu {
            // Every row's rules run the GEMV up to m = 8 and the GEMM past m = 16.
            true if m <= 8 => {
                assert_eq!(info.kernel, Q4VK_GEMV_KERNEL_BLOCKS_GEMV, "{what}");
                assert_eq!(info.passes as usize, m.div_ceil(pass_rows(m)), "{what}");
            }
            // Past it, contexts that use the tensor-core layout run their tensor-core GEMM
            // on blocks where k is whole stages of 128 (`gpu_blocks_frag`).
            true if m > 16 => {
                let coop = unsafe { context_mut(ctx) }.unwrap().coop;
                let want = match coop && k.is_multiple_of(128) {
                    true => Q4VK_GEMV_KERNEL_BLOCKS_FRAGMENT_GEMM,
                    false => Q4VK_GEMV_KERNEL_BLOCKS_GEMM,
                };
                assert_eq!(info.kernel, want, "{what}");
                assert_eq!(info.passes, 1, "{what}");
            }
            true => assert!(
                [
                    Q4VK_GEMV_KERNEL_BLOCKS_GEMV,
                    Q4VK_GEMV_KERNEL_BLOCKS_GEMM,
                    Q4VK_GEMV_KERNEL_BLOCKS_FRAGMENT_GEMM
                ]
                .contains(&info.kernel),
                "{what}"
            ),
            false => assert_eq!(info.kernel, Q4VK_GEMV_KERNEL_CPU, "{what}"),
        }
        assert_eq!(
            info.matrix_bytes, desc.weight_bytes as u64,
            "{what}: native bytes"
        );
    }
    unsafe { q4vk_matrix_destroy(mat) };
}

/// Activation rows per pass of the GEMV on `ty` blocks at `m` as the rules of `ctx` choose:
/// passes of 4 over pieces, of 8 where the type's class strides over quarters past one such
/// pass (`DeviceTuning::blocks_gemv`; or the caller's fixed stride).
fn row_pass_rows(ctx: *mut q4vk_context, ty: BlockType, m: usize) -> usize {
    let rules = &unsafe { context_mut(ctx) }.unwrap().rules;
    let past_one_pass = rules.blocks_gemv.of(BlocksClass::of(ty)).past_one_pass;
    let quarters = rules
        .overrides()
        .blocks_gemv_word_lanes
        .unwrap_or(past_one_pass.word_lanes);
    match quarters && m > 4 {
        true => 8,
        false => 4,
    }
}

/// Shapes: one block per row, odd row counts (partial workgroups), several blocks.
fn shapes(ty: BlockType) -> [(usize, usize); 3] {
    let b = ty.block_elements();
    [(1, b), (37, 3 * b), (70, 2048.max(b))]
}

/// Every type on every shape at each m of `ms`, with f32 and f16 x; past m = 8 (the GEMM,
/// whose pipelines take seconds each to compile on lavapipe) f16 x on a few types only:
/// one with minima (Q4_K), one with signed codes (Q6_K) and one with two scales per piece
/// (NVFP4).
/// `portable`: the portable kernels, which always stride over pieces.
fn run_all_types(ctx: *mut q4vk_context, gpu: bool, portable: bool, ms: &[usize], seed: u64) {
    let mut rng = Rng(seed);
    for ty in BlockType::ALL {
        let f16_x =
            |m: usize| m <= 8 || matches!(ty, BlockType::Q4K | BlockType::Q6K | BlockType::Nvfp4);
        for (n, k) in shapes(ty) {
            let bytes = random_blocks(&mut rng, ty, n, k);
            let desc = blocks_desc(ty, n, k, &bytes);
            check_matrix(
                ctx,
                &desc,
                (ms, &f16_x, &|m| {
                    if portable {
                        4
                    } else {
                        row_pass_rows(ctx, ty, m)
                    }
                }),
                &mut rng,
                gpu,
                &format!("{} {n}x{k}", ty.name()),
            );
        }
    }
}

#[test]
fn every_type_runs_on_the_subgroup_kernel() {
    let gpu = Gpu::new(false);
    run_all_types(gpu.ctx, true, false, &[1, 6], 0xB10C);
    // Two full passes of activation rows in one dispatch (workgroup z).
    run_all_types(gpu.ctx, true, false, &[8], 0xB10F);
    gpu.assert_quiet();
}

/// The portable GEMV, and the GEMM (which has no subgroup variant).
#[test]
fn every_type_runs_on_the_portable_kernel() {
    let gpu = Gpu::new(true);
    run_all_types(gpu.ctx, true, true, &[1, 5, 33], 0xB10D);
    gpu.assert_quiet();
}

#[test]
fn every_type_runs_on_a_cpu_context() {
    let mut desc = unsafe { std::mem::zeroed::<q4vk_context_desc>() };
    unsafe { q4vk_context_desc_default(&mut desc) };
    desc.flags = Q4VK_CONTEXT_CPU;
    let mut ctx = std::ptr::null_mut();
    let status = unsafe { q4vk_context_create(&desc, &mut ctx) };
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    run_all_types(ctx, false, false, &[1, 5, 9], 0xB10E);
    unsafe { q4vk_context_destroy(ctx) };
}

/// The GEMM's K groups (a tile's invocations in several groups taking interleaved pieces,
/// which GPUs take where the tiles are too few; lavapipe takes none by itself): 2 and 3
/// groups on two tiles, a type with minima and one with signed codes; the GEMV's rows per
/// workgroup fixed at 1 and 16, and passes of 8 activation rows (x loaded again per row).
/// The GEMV striding over quarters of pieces (a device row's choice): every type on every
/// shape, one pass of up to 8 activation rows holding x, f32 and f16 x.
#[test]
fn every_type_runs_with_word_lanes() {
    let mut gpu = Gpu::new(false);
    gpu.context_mut()
        .set_overrides(|o| o.blocks_gemv_word_lanes = Some(true))
        .unwrap();
    let mut rng = Rng(0xB115);
    for ty in BlockType::ALL {
        for (n, k) in shapes(ty) {
            let bytes = random_blocks(&mut rng, ty, n, k);
            let desc = blocks_desc(ty, n, k, &bytes);
            check_matrix(
                gpu.ctx,
                &desc,
                (&[1, 3, 8], &|m| m == 3, &|_| 8),
                &mut rng,
                true,
                &format!("{} {n}x{k}, word lanes", ty.name()),
            );
        }
    }
    // More rows per workgroup (partial last workgroups), one and eight activation rows.
    for rows in [1, 8] {
        gpu.context_mut()
            .set_overrides(|o| {
                o.blocks_gemv_word_lanes = Some(true);
                o.blocks_gemv_rows = Some(rows);
            })
            .unwrap();
        for ty in [BlockType::Q4K, BlockType::Q6K, BlockType::Nvfp4] {
            let (n, k) = shapes(ty)[1];
            let bytes = random_blocks(&mut rng, ty, n, k);
            let desc = blocks_desc(ty, n, k, &bytes);
            check_matrix(
                gpu.ctx,
                &desc,
                (&[2, 8], &|_| false, &|_| 8),
                &mut rng,
                true,
                &format!("{} {n}x{k}, word lanes, {rows} rows", ty.name()),
            );
        }
    }
    gpu.assert_quiet();
}

/// The plan's name for a call of `m` rows on a matrix of `desc` on `ctx`.
fn plan_name(ctx: *mut q4vk_context, desc: &q4vk_matrix_desc, m: u32) -> String {
    let mut mat = std::ptr::null_mut();
    let status = unsafe { q4vk_matrix_create(ctx, desc, &mut mat) };
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    let (_, name) = plan_of(ctx, mat, m as usize, 0, 0);
    unsafe { q4vk_matrix_destroy(mat) };
    name
}

/// Several pieces per step of the GEMV striding over pieces (a device row's choice): 4
/// asked, every type on every shape at m = 1 (4 pieces) and 2 (2: the cap that keeps a
/// step's held x within 4 rows of one piece); then 2 pieces with 1 and 8 rows per workgroup
/// (steps and workgroups past the last piece and row), with f16 x at m = 1. The plan names
/// the pieces per step, and none at m = 3 (the cap: one).
#[test]
fn every_type_runs_with_several_pieces_per_step() {
    let mut gpu = Gpu::new(false);
    let mut rng = Rng(0xB116);
    let runs: [(u32, Option<u32>, &[BlockType]); 3] = [
        (4, None, &BlockType::ALL),
        (
            2,
            Some(1),
            &[BlockType::Q4K, BlockType::Q6K, BlockType::Nvfp4],
        ),
        (
            2,
            Some(8),
            &[BlockType::Q5K, BlockType::Iq4Xs, BlockType::Q8_0],
        ),
    ];
    for (unroll, rows, types) in runs {
        gpu.context_mut()
            .set_overrides(|o| {
                o.blocks_gemv_unroll = Some(unroll);
                o.blocks_gemv_rows = rows;
            })
            .unwrap();
        let (ms, f16_x): (&[usize], &dyn Fn(usize) -> bool) = match rows {
            None => (&[1, 2], &|_| false),
            Some(_) => (&[1], &|_| true),
        };
        for &ty in types {
            let all = shapes(ty);
            let picked = match rows {
                None => &all[..],
                Some(_) => &all[1..2],
            };
            for &(n, k) in picked {
                let bytes = random_blocks(&mut rng, ty, n, k);
                let desc = blocks_desc(ty, n, k, &bytes);
                let what = format!("{} {n}x{k}, {unroll} pieces per step", ty.name());
                let name = plan_name(gpu.ctx, &desc, 1);
                assert!(
                    name.contains(&format!("{unroll} pieces per step")),
                    "{what}: {name}"
                );
                let capped = plan_name(gpu.ctx, &desc, 3);
                assert!(!capped.contains("pieces per step"), "{what}: {capped}");
                check_matrix(
                    gpu.ctx,
                    &desc,
                    (ms, f16_x, &|m| row_pass_rows(gpu.ctx, ty, m)),
                    &mut rng,
                    true,
                    &what,
                );
            }
        }
    }
    assert!(gpu
        .context_mut()
        .set_overrides(|o| o.blocks_gemv_unroll = Some(5))
        .is_err());
    gpu.assert_quiet();
}

/// The tiles a tuning run may choose for the GEMM on GGUF blocks on this device
/// (`plan::tuned_gemm::gemm_candidates` at m = 512: every token count) compute what the
/// reference does on Q4_K (the type tuning times; the tile's loops are those of every
/// type): the first of each count of invocations along rows and tokens and of each count
/// of rows and tokens per invocation (each tile is a pipeline to build), on partial tiles
/// of rows and tokens.
#[test]
fn the_tiles_tuning_may_choose_match_reference() {
    let mut gpu = Gpu::new(false);
    let mut rng = Rng(0xB11E);
    let class = gpu.context().rules.class;
    let all = gemm_candidates(&q4vk::plan::GEMM_TILE, 512, &class, true);
    let tiles = sampled_tiles(&all);
    assert!(tiles.len() >= 8, "{tiles:?} of {all:?}");
    let (n, k, m) = (37usize, 512usize, 45usize);
    let ty = BlockType::Q4K;
    let bytes = random_blocks(&mut rng, ty, n, k);
    let desc = blocks_desc(ty, n, k, &bytes);
    let w = dequantized(&desc);
    let mut mat = std::ptr::null_mut();
    assert_eq!(
        unsafe { q4vk_matrix_create(gpu.ctx, &desc, &mut mat) },
        Q4VK_OK
    );
    let x = rng.vec(m * k);
    let want = gemv_dense(&w, &x, n, k, m);
    for &t in &tiles {
        gpu.context_mut()
            .set_overrides(|o| {
                o.gemm_tile = Some(t);
                // The SIMT GEMM on blocks on every device.
                o.coop_tiles = Some(false);
            })
            .unwrap();
        let (_, name) = plan_of(gpu.ctx, mat, m, 0, 0);
        assert!(name.starts_with("GEMM on GGUF"), "{name}");
        let (status, y) = gemv_c(gpu.ctx, mat, &x, n, m);
        assert_eq!(status, Q4VK_OK, "{}", last_error());
        assert_close(&y, &want, &format!("{} tile {t:?}", ty.name()));
    }
    unsafe { q4vk_matrix_destroy(mat) };
    gpu.assert_quiet();
}

#[test]
fn k_groups_and_fixed_rows_compute_the_same() {
    let mut gpu = Gpu::new(false);
    let mut rng = Rng(0xB114);
    let tile = |tx, ty, rn, rm| Some(q4vk::plan::GemmTile { tx, ty, rn, rm });
    let runs = [
        (2, tile(8, 8, 8, 4), 1, Some(8)),
        (3, tile(8, 4, 4, 4), 16, None),
    ];
    for (ksplit, gemm_tile, rows, pass_rows) in runs {
        gpu.context_mut()
            .set_overrides(|o| {
                o.gemm_tile = gemm_tile;
                o.gemm_ksplit = Some(ksplit);
                o.blocks_gemv_rows = Some(rows);
                o.blocks_gemv_pass_rows = pass_rows;
                // The SIMT GEMM on blocks (whose K groups these are) on every device.
                o.coop_tiles = Some(false);
            })
            .unwrap();
        for ty in [BlockType::Q4K, BlockType::Q6K] {
            for (n, k) in [(37, 256), (70, 1024)] {
                let bytes = random_blocks(&mut rng, ty, n, k);
                let desc = blocks_desc(ty, n, k, &bytes);
                let what = format!("{} {n}x{k}, {ksplit} K groups, {rows} rows", ty.name());
                check_matrix(
                    gpu.ctx,
                    &desc,
                    (&[3, 7, 33], &|_| false, &|m| {
                        pass_rows.map_or(row_pass_rows(gpu.ctx, ty, m), |p| p as usize)
                    }),
                    &mut rng,
                    true,
                    &what,
                );
            }
        }
    }
    assert!(gpu
        .context_mut()
        .set_overrides(|o| o.blocks_gemv_rows = Some(3))
        .is_err());
    assert!(gpu
        .context_mut()
        .set_overrides(|o| o.blocks_gemv_pass_rows = Some(9))
        .is_err());
    gpu.assert_quiet();
}

/// gguf-py's own blocks (`tests/data/gguf-more`, quantizer output and random blocks).
#[test]
fn gguf_py_vectors_run_on_the_device() {
    let gpu = Gpu::new(false);
    let mut rng = Rng(0xB10F);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gguf-more");
    let mut ran = 0;
    for ty in BlockType::ALL {
        for (n, k) in [(33, 512), (7, 1024)] {
            for kind in ["dq", "q"] {
                let stem = format!("{}_p_{n}x{k}_{kind}", ty.name().to_lowercase());
                let Ok(bytes) = std::fs::read(dir.join(format!("{stem}.quant.u8.bin"))) else {
                    continue;
                };
                let desc = blocks_desc(ty, n, k, &bytes);
                check_matrix(
                    gpu.ctx,
                    &desc,
                    (&[1, 4], &|_| true, &|_| 4),
                    &mut rng,
                    true,
                    &stem,
                );
                ran += 1;
            }
        }
    }
    assert!(ran >= 18, "only {ran} vectors found");
    gpu.assert_quiet();
}

/// Device bytes within 3% of the file's on a phone-sized matrix of every type.
#[test]
fn device_bytes_are_the_files() {
    let gpu = Gpu::new(false);
    let mut rng = Rng(0xB110);
    for ty in BlockType::ALL {
        let (n, k) = (256, 1536);
        let bytes = random_blocks(&mut rng, ty, n, k);
        let desc = blocks_desc(ty, n, k, &bytes);
        let mut info = unsafe { std::mem::zeroed::<q4vk_matrix_footprint_info>() };
        info.struct_size = std::mem::size_of::<q4vk_matrix_footprint_info>() as u32;
        let status = unsafe { q4vk_matrix_footprint(gpu.ctx, &desc, &mut info) };
        assert_eq!(status, Q4VK_OK, "{}", last_error());
        let file = bytes.len() as f64;
        let device = info.device_bytes as f64;
        assert!(
            device >= file && device <= 1.03 * file,
            "{}: {device} device bytes for a {file}-byte tensor",
            ty.name()
        );
        assert_eq!(
            info.buffers,
            2 + u32::from(matches!(ty, BlockType::Q5_0 | BlockType::Q5_1))
        );
    }
    gpu.assert_quiet();
}

/// Non-finite scales, short buffers and k off the block are refused, nothing created.
#[test]
fn bad_blocks_are_refused() {
    let gpu = Gpu::new(false);
    let mut rng = Rng(0xB111);
    for ty in BlockType::ALL {
        let k = ty.block_elements();
        let mut bytes = random_blocks(&mut rng, ty, 2, 2 * k);
        let size = ty.block_bytes();
        // The last block's scale made non-finite.
        let at = 3 * size + if ty == BlockType::Q6K { 208 } else { 0 };
        match ty {
            BlockType::Mxfp4 => bytes[at] = 0xFF,
            BlockType::Nvfp4 => bytes[at] = 0x7F,
            _ => bytes[at..at + 2].copy_from_slice(&half::f16::INFINITY.to_le_bytes()),
        }
        let mut mat = std::ptr::null_mut();
        let desc = blocks_desc(ty, 2, 2 * k, &bytes);
        let status = unsafe { q4vk_matrix_create(gpu.ctx, &desc, &mut mat) };
        assert_eq!(status, Q4VK_ERROR_NON_FINITE, "{}", ty.name());
        assert!(last_error().contains("row 1, block 1"), "{}", last_error());
        assert!(mat.is_null());
        let mut short = blocks_desc(ty, 2, 2 * k, &bytes);
        short.weight_bytes -= 1;
        let status = unsafe { q4vk_matrix_create(gpu.ctx, &short, &mut mat) };
        assert_eq!(status, Q4VK_ERROR_BUFFER_TOO_SMALL, "{}", ty.name());
        let mut off = blocks_desc(ty, 2, 2 * k, &bytes);
        off.k = (2 * k - 16) as u64;
        let status = unsafe { q4vk_matrix_create(gpu.ctx, &off, &mut mat) };
        assert_eq!(status, Q4VK_ERROR_INVALID_ARGUMENT, "{}", ty.name());
        assert!(mat.is_null());
    }
    gpu.assert_quiet();
}

/// A block-type matrix's blob makes the same matrix again (its GEMV bit for bit the
/// original's); a blob whose type byte is changed is refused.
#[test]
fn blobs_keep_the_blocks() {
    use q4vk::ffi::blob::*;
    let gpu = Gpu::new(false);
    let mut rng = Rng(0xB112);
    for ty in [BlockType::Q5_1, BlockType::Q6K, BlockType::Nvfp4] {
        let (n, k) = (45, 2 * ty.block_elements().max(128));
        let bytes = random_blocks(&mut rng, ty, n, k);
        let desc = blocks_desc(ty, n, k, &bytes);
        let mut mat = std::ptr::null_mut();
        assert_eq!(
            unsafe { q4vk_matrix_create(gpu.ctx, &desc, &mut mat) },
            Q4VK_OK
        );
        let mut size = 0;
        assert_eq!(
            unsafe { q4vk_matrix_blob_size(gpu.ctx, mat, &mut size) },
            Q4VK_OK
        );
        let mut blob = vec![0u8; size];
        let mut written = 0;
        let status =
            unsafe { q4vk_matrix_blob(gpu.ctx, mat, blob.as_mut_ptr().cast(), size, &mut written) };
        assert_eq!(status, Q4VK_OK, "{}", last_error());
        let mut again = std::ptr::null_mut();
        let status = unsafe {
            q4vk_matrix_create_from_blob(gpu.ctx, blob.as_ptr().cast(), size, &mut again)
        };
        assert_eq!(status, Q4VK_OK, "{}", last_error());
        let x = rng.vec(3 * k);
        let (s1, y1) = gemv_c(gpu.ctx, mat, &x, n, 3);
        let (s2, y2) = gemv_c(gpu.ctx, again, &x, n, 3);
        assert_eq!((s1, s2), (Q4VK_OK, Q4VK_OK));
        assert!(y1.iter().all(|v| v.is_finite()));
        assert_eq!(y1, y2, "{}", ty.name());
        unsafe { q4vk_matrix_destroy(again) };
        unsafe { q4vk_matrix_destroy(mat) };
    }
    gpu.assert_quiet();
}

/// The Q4 layout's exported kernel does not read blocks: a block type is refused by name,
/// pointing to the export on blocks (`tests/gpu_kernel_export_blocks.rs`).
#[test]
fn the_kernel_export_refuses_blocks() {
    use q4vk::ffi::kernel::*;
    let mut rng = Rng(0xB113);
    let ty = BlockType::Q8_0;
    let bytes = random_blocks(&mut rng, ty, 4, 64);
    let matrix = blocks_desc(ty, 4, 64, &bytes);
    let mut desc = unsafe { std::mem::zeroed::<q4vk_kernel_export_desc>() };
    unsafe { q4vk_kernel_export_desc_default(&mut desc) };
    let mut info = unsafe { std::mem::zeroed::<q4vk_kernel_info>() };
    info.struct_size = std::mem::size_of::<q4vk_kernel_info>() as u32;
    let status = unsafe {
        q4vk_kernel_export(
            std::ptr::null(),
            &matrix,
            &desc,
            &mut info,
            std::ptr::null_mut(),
            0,
        )
    };
    assert_eq!(status, Q4VK_ERROR_UNSUPPORTED);
    assert!(last_error().contains("GGUF Q8_0"), "{}", last_error());
    assert!(
        last_error().contains("Q4VK_KERNEL_EXPORT_BLOCKS"),
        "{}",
        last_error()
    );
}
