//! The tensor-core GEMM on GGUF blocks with A's fragments built in registers
//! (`shaders/gemm_blocks_frag.comp`, `Q4VK_GEMV_KERNEL_BLOCKS_FRAGMENT_GEMM`). On a context
//! that uses the tensor-core layout (NVIDIA): every block type, f32 and f16 x, partial row
//! tiles and token tiles, the rules' shapes and fixed ones (K groups, token groups, one row
//! tile), through `q4vk_gemv` into a NaN-poisoned y, against an f64 GEMV of
//! `q4vk_matrix_dequantize`'s weights within 1e-5; k not a multiple of 128 keeps the GEMM on
//! blocks. On any other context (lavapipe in CI) the plan must never name this kernel.

mod gpu_support;
use gpu_support::blocks::*;
use gpu_support::*;
use q4vk::cpu::reference::gemv_dense;
use q4vk::ffi::gemv::*;
use q4vk::ffi::matrix::*;
use q4vk::ffi::status::*;
use q4vk::import::gguf_blocks::BlockType;
use q4vk::plan::CoopGemmTuning;

/// The kernel `q4vk_gemv_plan` names for a call at `m` on `mat`.
fn planned_kernel(gpu: &Gpu, mat: *mut q4vk_matrix, m: usize) -> q4vk_gemv_kernel {
    let mut info = unsafe { std::mem::zeroed::<q4vk_gemv_plan_info>() };
    info.struct_size = std::mem::size_of::<q4vk_gemv_plan_info>() as u32;
    let status = unsafe { q4vk_gemv_plan(gpu.ctx, mat, m as u32, 0, 0, &mut info) };
    assert_eq!(status, Q4VK_OK, "q4vk_gemv_plan: {}", last_error());
    info.kernel
}

/// What a call's plan must name.
enum Planned {
    /// This kernel.
    Is(q4vk_gemv_kernel),
    /// Any kernel but this one.
    Not(q4vk_gemv_kernel),
}

/// Creates an `n` × `k` matrix of random `ty` blocks on `gpu` and checks that each call at
/// `ms` plans as `planned` says and matches the reference with f32 x and, where `f16_x`,
/// f16 x.
fn check(
    gpu: &Gpu,
    rng: &mut Rng,
    ty: BlockType,
    (n, k): (usize, usize),
    (ms, f16_x): (&[usize], bool),
    planned: Planned,
    what: &str,
) {
    let bytes = random_blocks(rng, ty, n, k);
    let desc = blocks_desc(ty, n, k, &bytes);
    let w = dequantized(&desc);
    let mut mat = std::ptr::null_mut();
    let status = unsafe { q4vk_matrix_create(gpu.ctx, &desc, &mut mat) };
    assert_eq!(
        status,
        Q4VK_OK,
        "{what}: q4vk_matrix_create: {}",
        last_error()
    );
    for &m in ms {
        let what = format!("{what}, {} {n}x{k}, m = {m}", ty.name());
        let kernel = planned_kernel(gpu, mat, m);
        match planned {
            Planned::Is(want) => assert_eq!(kernel, want, "{what}"),
            Planned::Not(other) => assert_ne!(kernel, other, "{what}"),
        }
        let x = rng.vec(m * k);
        let (status, y) = gemv_c(gpu.ctx, mat, &x, n, m);
        assert_eq!(status, Q4VK_OK, "{what}: q4vk_gemv: {}", last_error());
        assert_close(&y, &gemv_dense(&w, &x, n, k, m), &format!("{what}, f32 x"));
        if f16_x {
            let (xh, bytes) = rounded_to_f16(&x);
            let y = gemv_f16_x(gpu.ctx, mat, &bytes, n, m);
            assert_close(&y, &gemv_dense(&w, &xh, n, k, m), &format!("{what}, f16 x"));
        }
    }
    unsafe { q4vk_matrix_destroy(mat) };
}

/// A validated context, and whether it uses the tensor-core layout.
fn context() -> (Gpu, bool) {
    let gpu = Gpu::new(false);
    let coop = gpu.context().coop;
    if !coop {
        eprintln!("no tensor-core layout: the GEMM on GGUF blocks with fragments in registers does not run");
    }
    (gpu, coop)
}

/// k of `stages` stages of 128 inputs, rounded up to whole blocks.
fn stage_k(ty: BlockType, stages: usize) -> usize {
    (128 * stages).next_multiple_of(ty.block_elements())
}

#[test]
fn every_type_matches_the_reference() {
    let (gpu, coop) = context();
    let mut rng = Rng(0xF4A6);
    for ty in BlockType::ALL {
        if !coop {
            // Where the tensor-core layout is not used, the plan never names the kernel.
            check(
                &gpu,
                &mut rng,
                ty,
                (37, stage_k(ty, 2)),
                (&[33], false),
                Planned::Not(Q4VK_GEMV_KERNEL_BLOCKS_FRAGMENT_GEMM),
                "no fragments",
            );
            continue;
        }
        // One stage, partial row and token tiles; several blocks per row and stages.
        for shape in [(37, stage_k(ty, 1)), (70, stage_k(ty, 6)), (16, 2048)] {
            check(
                &gpu,
                &mut rng,
                ty,
                shape,
                (&[17, 40], true),
                Planned::Is(Q4VK_GEMV_KERNEL_BLOCKS_FRAGMENT_GEMM),
                "rules' shape",
            );
        }
    }
    gpu.assert_quiet();
}

#[test]
fn fixed_shapes_match_the_reference() {
    let (mut gpu, coop) = context();
    if !coop {
        return;
    }
    let mut rng = Rng(0xF4A7);
    // (T, S, M, K groups, token groups): 4 and 2 K groups (a K group past the last stage),
    // 2 token groups, one row tile of 8 subgroups, 64 tokens.
    let shapes = [
        (2, 8, 16, 4, 1),
        (1, 4, 32, 2, 2),
        (1, 8, 16, 1, 1),
        (2, 4, 64, 1, 1),
    ];
    for (t, s, m, kg, g) in shapes {
        gpu.context_mut()
            .set_overrides(|o| o.coop_gemm = Some(CoopGemmTuning::new(t, s, m, kg, 0, g)))
            .unwrap();
        for ty in [
            BlockType::Q4K,
            BlockType::Q6K,
            BlockType::Q5_1,
            BlockType::Nvfp4,
        ] {
            let what = format!("shape {t},{s},{m},{kg},{g}");
            check(
                &gpu,
                &mut rng,
                ty,
                (45, stage_k(ty, 5)),
                (&[12, 70], true),
                Planned::Is(Q4VK_GEMV_KERNEL_BLOCKS_FRAGMENT_GEMM),
                &what,
            );
        }
    }
    gpu.assert_quiet();
}

#[test]
fn k_off_the_stage_keeps_the_gemm_on_blocks() {
    let (gpu, coop) = context();
    if !coop {
        return;
    }
    let mut rng = Rng(0xF4A8);
    // 96 and 160 inputs: blocks of 32 and 64 that end inside a stage of 128.
    for (ty, k) in [
        (BlockType::Q8_0, 96),
        (BlockType::Nvfp4, 192),
        (BlockType::Iq4Nl, 160),
    ] {
        check(
            &gpu,
            &mut rng,
            ty,
            (21, k),
            (&[33], false),
            Planned::Is(Q4VK_GEMV_KERNEL_BLOCKS_GEMM),
            "k off the stage",
        );
    }
    gpu.assert_quiet();
}
