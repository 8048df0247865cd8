//! GEMV on the system's Vulkan device (lavapipe in CI) with the validation layer on: any
//! validation message fails the test, and so does a missing device.
//!
//! Each case is one pipeline specialization (workgroup from the row length, activation rows,
//! zero points, scale type) and one set of runtime edges (a partial last chunk, unaligned
//! activation rows, a partial last workgroup of rows, partial groups), chosen so that every
//! value of every decision appears at least once per kernel variant rather than their cross
//! product; a cold Mesa shader cache compiles each pipeline once.

mod gpu_support;
use gpu_support::*;

const CASES: [Case; 8] = [
    // One chunk per row: the smallest workgroup; one output row.
    case(1, 32, -1, false, false, 1),
    // A partial last chunk (k % 32), unaligned activation rows (k % 4), zero points.
    case(7, 33, 32, true, false, 3),
    // f32 scales, a partial last group (96 = 64 + 32).
    case(33, 96, 64, false, true, 2),
    // The largest batch, zero points with f32 scales, partial chunk and group.
    case(129, 1000, 128, true, true, 8),
    // Rows longer than the workgroup (several chunks per invocation), group 256.
    case(17, 4096, 256, false, false, 5),
    // Many chunks per row, per-channel zero points, a partial last workgroup of rows.
    case(5, 16384, -1, true, false, 4),
    // Many rows, odd n and k (partial chunk, unaligned activation rows, partial row group).
    case(255, 2047, 32, false, true, 7),
    // m = 6 on a medium row length with group 64.
    case(64, 257, 64, true, false, 6),
];

fn sweep(portable: bool) {
    let gpu = Gpu::new(portable);
    let mut rng = Rng(if portable { 11 } else { 7 });
    let mut ms = [false; 8];
    for c in &CASES {
        ms[c.m - 1] = true;
    }
    assert!(ms.iter().all(|&seen| seen), "every m in 1..=8 is covered");
    run_cases(&gpu, &mut rng, &CASES);
}

#[test]
fn gemv_subgroup_kernels_match_reference() {
    sweep(false);
}

#[test]
fn gemv_portable_kernels_match_reference() {
    sweep(true);
}

/// The f32 GEMV's two ways through m ≥ 2 (each word of codes decoded once for all activation
/// rows, or once per activation row): the device row picks one by the matrix's rows, so the
/// sweep above runs one of them on small matrices; this runs both, fixed, on every case.
#[test]
fn gemv_decoding_once_or_per_activation_row_matches_reference() {
    use q4vk::vk::gemv::{decide, GemvParams, KernelChoice, Room};
    for portable in [false, true] {
        for once in [false, true] {
            let mut gpu = Gpu::new(portable);
            gpu.context_mut()
                .set_overrides(|o| o.simt_gemv_decode_once = Some(once))
                .expect("a valid override");
            let mut rng = Rng(if once { 23 } else { 29 });
            run_cases(&gpu, &mut rng, &CASES);
            // The kernel the calls ran decodes as fixed (m ≥ 2; m = 1 has one way).
            let ctx = gpu.context();
            let data = random_q4(&mut rng, 33, 96, 64, false, false);
            let mat = q4vk::vk::matrix::DeviceMatrix::new(ctx, &data, None, None).unwrap();
            for m in 1..=8u32 {
                let p = GemvParams {
                    m,
                    x_f16: false,
                    x_stride: 96,
                    y_stride: 33,
                    x_gathered: false,
                    x_round_f16: false,
                    workspace_filled: false,
                };
                let choice = decide(&ctx.rules, &mat.form, &p, Room::None).unwrap();
                let KernelChoice::SimtGemv { key, .. } = choice.kernel else {
                    panic!("m = {m}: {choice:?} is not the SIMT GEMV");
                };
                assert_eq!(key.decode_once, once && m >= 2, "m = {m}");
            }
        }
    }
}
