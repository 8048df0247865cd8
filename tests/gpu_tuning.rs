//! Other workgroup shapes (specialization constants) of both kernel variants, through the
//! Rust core with validation on: every (workgroup, rows, unroll, split) the context accepts
//! must give the reference result, with no validation message; a shape is refused only for
//! lack of shared memory. Each shape runs one GEMV (one pipeline compile): m = 1, or m = 5
//! where m x rows exceeds the workgroup (the kernel's strided store loop); the matrices take
//! turns. Batch sizes are covered per variant in `gpu_gemv.rs`. Also: the pipelines'
//! compiler statistics (`q4vk-bench --stats`) where the device offers them.

mod gpu_support;
use gpu_support::*;
use q4vk::cpu::reference;
use q4vk::vk::context::{Context, ContextConfig};
use q4vk::vk::gemv::gemv_host;
use q4vk::vk::matrix::DeviceMatrix;

#[test]
fn workgroup_shapes_of_both_variants() {
    let mut rng = Rng(4242);
    let cases = [
        (61usize, 700usize, 32i32, true),
        (9, 4096, -1, false),
        (130, 96, 256, true),
    ];
    let data: Vec<_> = cases
        .iter()
        .map(|&(n, k, g, z)| random_q4(&mut rng, n, k, g, z, false))
        .collect();
    let mut ran = 0;
    for portable in [false, true] {
        for (i, (wg, rows, unroll, split)) in [
            // One row per workgroup, nothing unrolled or split.
            (32, 1, 1, 1),
            // Split in two, unroll 4.
            (64, 2, 4, 2),
            // Split in four.
            (256, 8, 1, 4),
            // Rows not a power of two; a large workgroup.
            (512, 3, 2, 1),
            // The largest shape: refused where its reduction array exceeds shared memory.
            (1024, 16, 3, 8),
            // The largest unroll.
            (32, 4, 8, 1),
            // One row per invocation (split = rows); m x rows exceeds the workgroup.
            (64, 16, 2, 16),
        ]
        .into_iter()
        .enumerate()
        {
            let config = ContextConfig {
                device_index: -1,
                validation: true,
                portable,
                no_push_descriptors: false,
                adopt: None,
                tuning: Some((wg, rows)),
                pipeline_cache: Vec::new(),
                unroll: Some(unroll),
                split: Some(split),
                // The SIMT kernels' shapes are under test here (tests/gpu_coop.rs has the
                // tensor-core kernel's).
                no_coop: true,
                overrides: Default::default(),
                pipeline_statistics: false,
                ..Default::default()
            };
            let ctx = match Context::new(config, counting_logger()) {
                Ok(ctx) => ctx,
                // Refused only for lack of shared memory: the bytes it names exceed the
                // device's (which shapes fit depends on the subgroup size).
                Err(e) => {
                    let text = e.to_string();
                    assert!(text.contains("shared memory"), "{text}");
                    let numbers: Vec<u64> = text
                        .split(|c: char| !c.is_ascii_digit())
                        .filter_map(|w| w.parse().ok())
                        .collect();
                    let (need, have) = (numbers[numbers.len() - 3], numbers[numbers.len() - 1]);
                    assert!(need > have, "refused with room: {text}");
                    continue;
                }
            };
            ran += 1;
            let m = if 5 * rows > wg { 5usize } else { 1 };
            let d = &data[i % data.len()];
            let mat = DeviceMatrix::new(&ctx, d, None, None).unwrap();
            let x = rng.vec(m * d.shape.k);
            let mut y = vec![f32::NAN; m * d.shape.n];
            gemv_host(&ctx, &mat, &x, &mut y, m as u32).unwrap();
            assert!(
                y.iter().all(|v| v.is_finite()),
                "unwritten y (wg {wg} rows {rows})"
            );
            let err = reference::relative_error(&y, &reference::gemv(d, &x, m));
            assert!(
                err < 1e-5,
                "portable {portable} wg {wg} rows {rows} n {} k {} m {m}: {err:e}",
                d.shape.n,
                d.shape.k
            );
        }
    }
    // lavapipe (256 bits, subgroups of 8) takes 10 of the 14; wider subgroups, more.
    assert!(ran >= 10, "configurations the device accepts: {ran}");
    assert_nothing_logged();
}

/// Word lanes (invocations stepping over words of codes) under other workgroup shapes:
/// splits, unrolls and rows that leave some words of a step past the end, on the f32 GEMV
/// (each word decoded per activation row and once for all) and the integer dot-product
/// GEMV, each call checked to have run word lanes, at m = 1 and 5, against the reference.
#[test]
fn word_lanes_under_other_shapes() {
    use q4vk::vk::context::IntDot;
    use q4vk::vk::gemv::Room;
    let mut rng = Rng(4343);
    let cases = [(37usize, 300usize, 32i32, true), (9, 1000, 128, false)];
    let data: Vec<_> = cases
        .iter()
        .map(|&(n, k, g, z)| random_q4(&mut rng, n, k, g, z, false))
        .collect();
    let mut ran = 0;
    for int_dot in [IntDot::Off, IntDot::Forced] {
        for (i, (wg, rows, unroll, split)) in [
            (64, 2, 4, 2),
            (256, 8, 1, 4),
            (32, 4, 8, 1),
            (128, 8, 1, 2),
            (64, 16, 2, 16),
        ]
        .into_iter()
        .enumerate()
        {
            let config = ContextConfig {
                device_index: -1,
                validation: true,
                tuning: Some((wg, rows)),
                unroll: Some(unroll),
                split: Some(split),
                no_coop: true,
                int_dot,
                overrides: q4vk::plan::Overrides {
                    simt_gemv_word_lanes: Some(true),
                    simt_gemv_decode_once: Some(i % 2 == 0),
                    ..Default::default()
                },
                ..Default::default()
            };
            let ctx = match Context::new(config, counting_logger()) {
                Ok(ctx) => ctx,
                Err(e) => {
                    assert!(e.to_string().contains("shared memory"), "{e}");
                    continue;
                }
            };
            for (j, d) in data.iter().enumerate() {
                let mat = DeviceMatrix::new(&ctx, d, None, None).unwrap();
                for m in [1usize, 5] {
                    let key = simt_gemv_key(&ctx, &mat.form, m, Room::AsNeeded);
                    assert!(key.word_lanes, "{key:?}");
                    assert_eq!(key.dot, int_dot == IntDot::Forced, "{key:?}");
                    let x = rng.vec(m * d.shape.k);
                    let mut y = vec![f32::NAN; m * d.shape.n];
                    gemv_host(&ctx, &mat, &x, &mut y, m as u32).unwrap();
                    assert!(y.iter().all(|v| v.is_finite()), "unwritten y");
                    let err = reference::relative_error(&y, &reference::gemv(d, &x, m));
                    assert!(
                        err < 1e-5,
                        "{int_dot:?} wg {wg} rows {rows} unroll {unroll} split {split} case {j} m {m}: {err:e}"
                    );
                    ran += 1;
                }
            }
        }
    }
    assert!(ran >= 32, "calls run: {ran}");
    assert_nothing_logged();
}

#[test]
fn pipeline_statistics_where_offered() {
    let mut rng = Rng(77);
    let d = random_q4(&mut rng, 40, 256, 128, false, false);
    for asked in [false, true] {
        let config = ContextConfig {
            device_index: -1,
            validation: true,
            pipeline_statistics: asked,
            ..Default::default()
        };
        let ctx = Context::new(config, counting_logger()).unwrap();
        let mat = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
        let x = rng.vec(d.shape.k);
        let mut y = vec![f32::NAN; d.shape.n];
        gemv_host(&ctx, &mat, &x, &mut y, 1).unwrap();
        let err = reference::relative_error(&y, &reference::gemv(&d, &x, 1));
        assert!(err < 1e-5, "statistics {asked}: {err:e}");
        match ctx.pipelines.statistics() {
            Ok(list) => {
                assert!(asked && ctx.device.statistics.is_some());
                assert!(!list.is_empty(), "the GEMV's pipeline is listed");
                for (key, executables) in &list {
                    assert!(!executables.is_empty(), "{key}: no executable");
                    assert!(
                        executables.iter().all(|e| !e.statistics.is_empty()),
                        "{key}: an executable without statistics"
                    );
                }
            }
            Err(e) => {
                // Not asked for, or the device does not offer the extension (lavapipe of
                // Debian 12 does not).
                assert!(!asked || ctx.device.statistics.is_none(), "{e}");
                assert!(e.to_string().contains("not enabled"), "{e}");
            }
        }
    }
    assert_nothing_logged();
}
