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
/// sweeps above run one of them on small matrices; this runs both, fixed, on every case of
/// m ≥ 2 and on the other matrix forms (the subgroup kernels: the portable ones share this
/// code, their reduction aside).
#[test]
fn gemv_decoding_once_or_per_activation_row_matches_reference() {
    use q4vk::vk::gemv::Room;
    let batched: Vec<Case> = CASES
        .iter()
        .filter(|c| c.m >= 2)
        .map(|c| case(c.n, c.k, c.group, c.zeros, c.f32_scales, c.m))
        .collect();
    for once in [false, true] {
        let mut gpu = Gpu::new(false);
        gpu.context_mut()
            .set_overrides(|o| o.simt_gemv_decode_once = Some(once))
            .expect("a valid override");
        let mut rng = Rng(if once { 23 } else { 29 });
        run_cases(&gpu, &mut rng, &batched);
        forms_through_recording(&gpu, &mut rng);
        // The kernel the calls ran decodes as fixed (m ≥ 2; m = 1 has one way).
        let ctx = gpu.context();
        let form = plain_form(ctx, &random_q4(&mut rng, 33, 96, 64, false, false));
        for m in 1..=8usize {
            let key = simt_gemv_key(ctx, &form, m, Room::None);
            assert_eq!(key.decode_once, once && m >= 2, "m = {m}");
        }
    }
}

/// The f32 GEMV with its invocations stepping over words of codes instead of chunks (a
/// device row's or tuning's choice; the digits GEMV's: `gpu_int_dot`): every case, both ways through m ≥ 2, and the other
/// matrix forms, each call checked to have run word lanes (the portable kernels have one
/// shape and never do).
#[test]
fn gemv_word_lanes_match_reference() {
    use q4vk::vk::gemv::Room;
    for once in [false, true] {
        let mut gpu = Gpu::new(false);
        gpu.context_mut()
            .set_overrides(|o| {
                o.simt_gemv_word_lanes = Some(true);
                o.simt_gemv_decode_once = Some(once);
            })
            .expect("a valid override");
        let mut rng = Rng(if once { 41 } else { 43 });
        run_cases(&gpu, &mut rng, &CASES);
        forms_through_recording(&gpu, &mut rng);
        let ctx = gpu.context();
        let form = plain_form(ctx, &random_q4(&mut rng, 33, 96, 64, false, false));
        for m in [1usize, 2, 8] {
            let key = simt_gemv_key(ctx, &form, m, Room::None);
            assert!(key.word_lanes && !key.dot, "m = {m}: {key:?}");
            // A row of 3 chunks is 12 words: the smallest workgroup.
            assert_eq!(key.workgroup, ctx.rules.simt().workgroup_for(12), "m = {m}");
        }
    }
}

/// f16 x, per-group offsets and a column order (gathered by the kernel) at m = 2, 5 and 9
/// (two passes, the last of one row), through
/// `gemv::record` (`q4vk_cmd_gemv`'s path), against the f64 reference of the same x.
fn forms_through_recording(gpu: &Gpu, rng: &mut Rng) {
    use q4vk::cpu::reference;
    use q4vk::vk::matrix::DeviceMatrix;
    let ctx = gpu.context();
    let (n, k) = (37, 200);
    let data = random_q4(rng, n, k, 32, false, true);
    let offsets: Vec<f32> = (0..data.shape.scale_count())
        .map(|_| rng.f32() - 0.5)
        .collect();
    let order: Vec<u32> = (0..k as u32).map(|i| (i * 7 + 3) % k as u32).collect();
    let with_offsets = DeviceMatrix::new(ctx, &data, Some(&offsets), None).unwrap();
    let ordered = DeviceMatrix::new(ctx, &data, None, Some(&order)).unwrap();
    for m in [2usize, 5, 9] {
        let x: Vec<f32> = rng
            .vec(m * k)
            .into_iter()
            .map(|v| half::f16::from_f32(v).to_f32())
            .collect();
        let f16_bytes: Vec<u8> = x
            .iter()
            .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
            .collect();
        let f32_bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
        let y = record_gemv(ctx, &with_offsets, &f16_bytes, m, true);
        let err =
            reference::relative_error(&y, &reference::gemv_with_offsets(&data, &offsets, &x, m));
        assert!(err < 1e-5, "offsets, f16 x, m = {m}: rel err {err:e}");
        // Column j holds input order[j]: the reference multiplies it by x[order[j]].
        let gathered: Vec<f32> = (0..m)
            .flat_map(|mi| order.iter().map(move |&i| (mi, i)))
            .map(|(mi, i)| x[mi * k + i as usize])
            .collect();
        let y = record_gemv(ctx, &ordered, &f32_bytes, m, false);
        let err = reference::relative_error(&y, &reference::gemv(&data, &gathered, m));
        assert!(err < 1e-5, "column order, m = {m}: rel err {err:e}");
    }
}
