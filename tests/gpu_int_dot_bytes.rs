//! The integer dot-product GEMV on x rounded to bytes (`Q4VK_GEMV_ROUND_X_TO_INT8`) on the
//! system's Vulkan device (lavapipe in CI, where the integer dot-product GEMV is forced
//! with `IntDot::Forced`), validation on: the pre-pass writes, per chunk of 32 columns,
//! `d = a / 127` and bytes `q` within half a unit of `127·x / a` with their exact sum (f32
//! and f16 x, a column order, huge, tiny, subnormal, zero, infinite and NaN values); the
//! GEMV on them stays within the bound the rounding allows (`Σ |w|·d / 2` per output, plus
//! f32 accumulation) against the f64 reference on exact x, and is not the exact result, at
//! m = 1..8 and past 8 in passes, stepping over chunks and over words, for zero points,
//! f32 scales, per-group offsets, a column order and every GGUF block type (x's bytes then
//! in input order), through `q4vk_cmd_gemv`'s path and
//! `q4vk_gemv`'s, and in multi calls (Q, K and V with one workspace key; blocks and Q4
//! matrices on one x, whose bytes differ in column order, each rounding its own); a non-finite
//! chunk gives NaN rows; without the flag, or on a context without the integer dot-product
//! GEMV, the call stays exact.

mod gpu_support;
use gpu_support::int_dot::{activations, f32_bytes, record_in_workspace};
use gpu_support::*;
use q4vk::cpu::reference;
use q4vk::quant::q4::Q4Data;
use q4vk::vk::context::{Context, ContextConfig, IntDot};
use q4vk::vk::gemv::{self, gemv_host_with, BufferRange, HostX, Room, XRounding};
use q4vk::vk::int_dot::{row_vectors_of, BYTE_CHUNK_VECTORS, CHUNK};
use q4vk::vk::matrix::{upload, DeviceMatrix};
use q4vk::vk::memory::{Buffer, MemoryKind};

/// The GEMM runs from this m on in these tests' contexts: below, the GEMV runs past m = 8
/// in passes of 8 rows.
const GEMM_FROM: u32 = 24;

/// Slack on half a unit of a byte for the f32 roundings of the quotient (the pre-pass
/// rounds `127 / qa` and `q·(127 / qa)` in f32, then to an integer).
const HALF_UNIT: f64 = 0.5 + 1.0 / 1024.0;

fn context(int_dot: IntDot, word_lanes: Option<bool>) -> Context {
    context_shaped(int_dot, word_lanes, None)
}

/// [`context`] with the SIMT GEMV's shapes fixed to (workgroup, rows per workgroup,
/// invocations sharing a chunk).
fn context_shaped(
    int_dot: IntDot,
    word_lanes: Option<bool>,
    shape: Option<(u32, u32, u32)>,
) -> Context {
    let config = ContextConfig {
        tuning: shape.map(|(workgroup, rows, _)| (workgroup, rows)),
        split: shape.map(|(_, _, split)| split),
        device_index: -1,
        validation: true,
        no_coop: true,
        int_dot,
        overrides: q4vk::plan::Overrides {
            gemm_from_m: Some(GEMM_FROM),
            simt_gemv_word_lanes: word_lanes,
            ..Default::default()
        },
        ..Default::default()
    };
    Context::new(config, counting_logger()).unwrap()
}

/// A call on `m` dense rows of x with the flag (`rounded`) or without.
fn params(mat: &DeviceMatrix, m: usize, x_f16: bool, rounded: bool) -> gemv::GemvParams {
    let how = Recording {
        x_f16,
        x_round_int8: rounded,
        ..Default::default()
    };
    dense_params(&mat.form, m, how)
}

/// Whether a call with `p` on `mat` given a workspace runs the GEMV on x in bytes.
fn runs_on_bytes(ctx: &Context, mat: &DeviceMatrix, p: &gemv::GemvParams) -> bool {
    let choice = gemv::decide(&ctx.rules, &mat.form, p, Room::AsNeeded).unwrap();
    let bytes = matches!(
        choice.prepass,
        Some(gemv::PrepassChoice::Digits(key)) if key.bytes
    );
    match choice.kernel {
        gemv::KernelChoice::SimtGemv { key, .. } => assert_eq!(key.x_bytes, bytes, "{choice:?}"),
        gemv::KernelChoice::BlocksGemv { key, .. } => assert_eq!(key.dot, bytes, "{choice:?}"),
        _ => {}
    }
    bytes
}

/// Records `mat`'s call with `p` on `x_bytes` with a workspace of exactly the bytes it
/// asks for inside a larger buffer; returns y and the workspace's words, both poisoned
/// before the run (and checks nothing outside the workspace was written).
fn record(
    ctx: &Context,
    mat: &DeviceMatrix,
    x_bytes: &[u8],
    p: &gemv::GemvParams,
) -> (Vec<f32>, Vec<u32>) {
    record_in_workspace(ctx, mat, x_bytes, p, Some(256))
}

/// The largest magnitude of each chunk of 32 of `row` (columns past its end count as 0).
fn chunk_largest(row: &[f32]) -> Vec<f32> {
    row.chunks(CHUNK)
        .map(|c| {
            c.iter().fold(0f32, |a, v| {
                if v.abs() > a || v.is_nan() {
                    v.abs()
                } else {
                    a
                }
            })
        })
        .collect()
}

/// Asserts that `words` hold x rounded to bytes for every row of `x` (rows of `k`, in the
/// matrix's column order), as `vk::int_dot` describes them: each code word's even columns,
/// then its odd ones (the Q4 layout's order).
fn assert_bytes_of(words: &[u32], x: &[f32], k: usize, what: &str) {
    assert_bytes_in_order(words, x, k, false, what);
}

/// [`assert_bytes_of`], with `natural` in input order (the GEMV on GGUF blocks): column
/// 4t + i of a chunk in byte i of its word t.
fn assert_bytes_in_order(words: &[u32], x: &[f32], k: usize, natural: bool, what: &str) {
    let per_row = 4 * row_vectors_of(k, true);
    assert_eq!(
        words.len(),
        per_row * (x.len() / k),
        "{what}: workspace words"
    );
    for (r, row) in x.chunks_exact(k).enumerate() {
        for (c, (chunk, a)) in row.chunks(CHUNK).zip(chunk_largest(row)).enumerate() {
            let at = r * per_row + 4 * BYTE_CHUNK_VECTORS * c;
            let (bytes, meta) = (&words[at..at + 8], &words[at + 8..at + 12]);
            let q = |j: usize| {
                let (word, within) = (j / 8, j % 8);
                let byte = match natural {
                    true => bytes[j / 4] >> (8 * (j % 4)),
                    false => bytes[2 * word + within % 2] >> (8 * (within / 2)),
                };
                byte as u8 as i8 as i32
            };
            let d = f32::from_bits(meta[0]);
            let sum = meta[1] as i32;
            let at_chunk = format!("{what}: row {r} chunk {c}");
            assert_eq!(&meta[2..], &[0, 0], "{at_chunk}: padding");
            if !a.is_finite() {
                assert!(d.is_nan(), "{at_chunk}: d {d} for a non-finite chunk");
                assert!(bytes.iter().all(|&b| b == 0) && sum == 0, "{at_chunk}");
                continue;
            }
            let want_d = a / 127.0;
            // A subnormal d: flushed to 0 on some devices, else within a few of its units.
            let off = (f64::from(d) - f64::from(want_d)).abs();
            let subnormal = want_d != 0.0 && !want_d.is_normal();
            let close = match subnormal {
                true => d == 0.0 || off <= 4.0 * f64::from(f32::from_bits(1)),
                false => off <= f64::from(want_d) * 1e-6,
            };
            assert!(close, "{at_chunk}: d {d:e}, want {want_d:e}");
            let mut total = 0;
            for j in 0..CHUNK {
                let v = chunk.get(j).copied().unwrap_or(0.0);
                let exact = if a == 0.0 {
                    0.0
                } else {
                    127.0 * f64::from(v) / f64::from(a)
                };
                let got = q(j);
                assert!(
                    (f64::from(got) - exact).abs() <= HALF_UNIT && got.abs() <= 127,
                    "{at_chunk} column {j}: q {got} for {exact}"
                );
                total += got;
            }
            assert_eq!(sum, total, "{at_chunk}: sum of q");
        }
    }
}

/// Asserts every output of `y` (m rows of n) is within the bound of x rounded to bytes of
/// the f64 reference `want` on exact x: per output `Σ_c d_c·HALF_UNIT·Σ_{k in c} |w|` plus
/// `1e-5·Σ |w x|` for the f32 accumulation, with `w` the dequantized weights (`weight(row,
/// kk)`) and `xo` x in the matrix's column order.
fn assert_within_bound(
    y: &[f32],
    want: &[f64],
    xo: &[f32],
    n: usize,
    k: usize,
    weight: &dyn Fn(usize, usize) -> f64,
    what: &str,
) {
    for (t, row) in xo.chunks_exact(k).enumerate() {
        let d: Vec<f64> = chunk_largest(row)
            .iter()
            .map(|&a| f64::from(a) / 127.0)
            .collect();
        for i in 0..n {
            let (mut bound, mut size) = (0f64, 0f64);
            for (kk, &v) in row.iter().enumerate() {
                let w = weight(i, kk).abs();
                bound += w * d[kk / CHUNK] * HALF_UNIT;
                size += w * f64::from(v).abs();
            }
            let (got, exact) = (f64::from(y[t * n + i]), want[t * n + i]);
            assert!(
                (got - exact).abs() <= bound + 1e-5 * size + 1e-30,
                "{what}: token {t} row {i}: {got} against {exact}, bound {bound:e}"
            );
        }
    }
}

/// The dequantized weight of (row, column) of `d` (with its per-group `offsets`: `s·u + o`).
fn weight_of<'a>(d: &'a Q4Data, offsets: Option<&'a [f32]>) -> impl Fn(usize, usize) -> f64 + 'a {
    move |row, kk| {
        let g = row * d.shape.groups() + kk / d.shape.group_size;
        let u = f64::from(d.code(row, kk));
        match offsets {
            Some(o) => f64::from(d.scale(g)) * u + f64::from(o[g]),
            None => (u - f64::from(d.zero(g))) * f64::from(d.scale(g)),
        }
    }
}

#[test]
fn the_pre_pass_rounds_each_chunk_to_bytes() {
    let ctx = context(IntDot::Forced, None);
    assert!(
        ctx.rules.int_dot,
        "the device has no shaderIntegerDotProduct (Vulkan 1.3 / VK_KHR_shader_integer_dot_product)"
    );
    let mut rng = Rng(0xB17E);
    // 200 columns: six whole chunks and one of 8.
    let (n, k) = (8usize, 200usize);
    let d = random_q4(&mut rng, n, k, 32, true, false);
    let mat = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
    // Row 0: huge, tiny and zero blocks, ties of the rounding (2.5 and -3.5 units of
    // a / 127), f32's largest value; row 1: subnormals only; row 2: an infinity in one
    // chunk and a NaN in another; row 3: random.
    let mut x = activations(&mut rng, 4, k);
    x[128] = 127.0;
    x[129] = 2.5;
    x[130] = -3.5;
    x[131] = -0.0;
    x[k - 3] = f32::MAX;
    for (i, v) in x[k..2 * k].iter_mut().enumerate() {
        *v = f32::from_bits(1 + (i as u32 * 7919) % 0x007F_FFFF)
            * if i % 3 == 0 { -1.0 } else { 1.0 };
    }
    x[2 * k + 40] = f32::NEG_INFINITY;
    x[2 * k + 100] = f32::NAN;
    let p = params(&mat, 4, false, true);
    assert!(runs_on_bytes(&ctx, &mat, &p));
    let (y, words) = record(&ctx, &mat, &f32_bytes(&x), &p);
    assert_bytes_of(&words, &x, k, "f32");
    // The row with an infinity and a NaN gives NaN throughout.
    assert!(
        y[2 * n..3 * n].iter().all(|v| v.is_nan()),
        "{:?}",
        &y[2 * n..3 * n]
    );
    // f16 x: the bytes of its values.
    let (widened, bytes) = rounded_to_f16(&x[3 * k..]);
    let p = params(&mat, 1, true, true);
    let (_, words) = record(&ctx, &mat, &bytes, &p);
    assert_bytes_of(&words, &widened, k, "f16");
    assert_nothing_logged();
}

#[test]
fn the_bytes_gemv_stays_within_its_bound() {
    // Chunks and words one invocation each; chunks shared by 4 invocations (4 rows, one
    // each: the NVIDIA row's shape for many short rows in passes of 8).
    for (word_lanes, shape) in [(false, None), (true, None), (false, Some((64, 4, 4)))] {
        let ctx = context_shaped(IntDot::Forced, Some(word_lanes), shape);
        let mut rng = Rng(0xB7E5 + u64::from(word_lanes));
        // (n, k, group, zero points, f32 scales)
        let cases = [
            (37usize, 300usize, 32i32, true, false),
            (64, 256, 128, false, false),
            (21, 515, 64, true, true),
            (130, 1024, 256, true, false),
        ];
        for &(n, k, g, z, f32s) in &cases {
            let d = random_q4(&mut rng, n, k, g, z, f32s);
            let mat = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
            for m in (1..=8usize).chain([9, 16]) {
                let x = activations(&mut rng, m, k);
                let p = params(&mat, m, false, true);
                assert!(runs_on_bytes(&ctx, &mat, &p), "m = {m}");
                let key = simt_gemv_key(&ctx, &mat.form, m, Room::AsNeeded);
                assert_eq!(key.word_lanes, word_lanes);
                if let Some((_, rows, split)) = shape {
                    assert_eq!((key.rows, key.split), (rows, split));
                }
                let (y, _) = record(&ctx, &mat, &f32_bytes(&x), &p);
                let want = reference::gemv(&d, &x, m);
                let what = format!(
                    "{n}x{k} g{g} z{z} f32 scales {f32s} m {m} lanes {word_lanes} shape {shape:?}"
                );
                assert_within_bound(&y, &want, &x, n, k, &weight_of(&d, None), &what);
                // Rounded, not exact.
                assert!(reference::relative_error(&y, &want) > 1e-5, "{what}");
            }
        }
    }
    assert_nothing_logged();
}

#[test]
fn offsets_and_a_column_order_on_bytes() {
    for word_lanes in [false, true] {
        let ctx = context(IntDot::Forced, Some(word_lanes));
        let mut rng = Rng(0x0FB7 + u64::from(word_lanes));
        let (n, k) = (40usize, 232usize);
        let d = random_q4(&mut rng, n, k, 32, false, true);
        let offsets: Vec<f32> = (0..n * k.div_ceil(32)).map(|_| rng.f32() * 0.05).collect();
        let with_offsets = DeviceMatrix::new(&ctx, &d, Some(&offsets), None).unwrap();
        let order: Vec<u32> = (0..k).map(|j| (j * 97 % k) as u32).collect();
        let ordered = DeviceMatrix::new(&ctx, &d, None, Some(&order)).unwrap();
        for m in [1usize, 5, 11] {
            let x = activations(&mut rng, m, k);
            let what = format!("offsets m {m} lanes {word_lanes}");
            let p = params(&with_offsets, m, false, true);
            assert!(runs_on_bytes(&ctx, &with_offsets, &p));
            let (y, _) = record(&ctx, &with_offsets, &f32_bytes(&x), &p);
            let want = reference::gemv_with_offsets(&d, &offsets, &x, m);
            let weight = weight_of(&d, Some(&offsets));
            assert_within_bound(&y, &want, &x, n, k, &weight, &what);
            // Column j of the matrix meets input order[j]: the pre-pass gathers, then rounds.
            let xo: Vec<f32> = x
                .chunks_exact(k)
                .flat_map(|row| order.iter().map(|&i| row[i as usize]))
                .collect();
            let what = format!("act-order m {m} lanes {word_lanes}");
            let p = params(&ordered, m, false, true);
            assert!(runs_on_bytes(&ctx, &ordered, &p));
            let (y, words) = record(&ctx, &ordered, &f32_bytes(&x), &p);
            assert_bytes_of(&words, &xo, k, &what);
            let want = reference::gemv(&d, &xo, m);
            assert_within_bound(&y, &want, &xo, n, k, &weight_of(&d, None), &what);
        }
    }
    assert_nothing_logged();
}

#[test]
fn q4vk_gemv_rounds_to_bytes_where_the_flag_allows_it() {
    let mut rng = Rng(0x4057);
    let (n, k) = (48usize, 384usize);
    let d = random_q4(&mut rng, n, k, 128, true, false);
    let rounded = XRounding {
        int8: true,
        ..Default::default()
    };
    let run = |ctx: &Context, x: &[f32], m: usize, rounding: XRounding| {
        let mat = DeviceMatrix::new(ctx, &d, None, None).unwrap();
        let mut y = vec![f32::NAN; m * n];
        gemv_host_with(ctx, &mat, HostX::f32(x), &mut y, m as u32, rounding).unwrap();
        assert!(y.iter().all(|v| v.is_finite()), "unwritten y");
        y
    };
    let forced = context(IntDot::Forced, None);
    let mat = DeviceMatrix::new(&forced, &d, None, None).unwrap();
    for m in [1usize, 4, 8] {
        let p = params(&mat, m, false, true);
        assert_eq!(
            gemv::workspace_bytes(&forced.rules, &mat.form, &p).unwrap(),
            48 * m as u64 * k.div_ceil(32) as u64
        );
        let x = activations(&mut rng, m, k);
        let want = reference::gemv(&d, &x, m);
        let y = run(&forced, &x, m, rounded);
        let what = format!("q4vk_gemv m {m}");
        assert_within_bound(&y, &want, &x, n, k, &weight_of(&d, None), &what);
        assert!(
            reference::relative_error(&y, &want) > 1e-5,
            "{what}: not rounded"
        );
        // Without the flag, and on a context without the integer dot-product GEMV, exact.
        let exact = run(&forced, &x, m, XRounding::default());
        assert!(
            reference::relative_error(&exact, &want) < 1e-5,
            "{what}: flag off"
        );
        let off = context(IntDot::Off, None);
        let f32_kernel = run(&off, &x, m, rounded);
        assert!(
            reference::relative_error(&f32_kernel, &want) < 1e-5,
            "{what}: no int dot"
        );
    }
    assert_nothing_logged();
}

/// The workspace keys of calls `ps` on `mats`.
fn workspace_keys(ctx: &Context, mats: &[&DeviceMatrix], ps: &[gemv::GemvParams]) -> Vec<u64> {
    mats.iter()
        .zip(ps)
        .map(|(mat, p)| gemv::workspace_key(&ctx.rules, mat, p).unwrap())
        .collect()
}

/// Records `mats`' calls `ps` on the `m` rows of `x` as one multi call sharing one
/// workspace (the largest any asks for); returns each call's y, poisoned before the run.
fn run_multi(
    ctx: &Context,
    mats: &[&DeviceMatrix],
    ps: &[gemv::GemvParams],
    x: &[f32],
) -> Vec<Vec<f32>> {
    use q4vk::vk::gemv::{EpilogueOperands, MultiCall};
    let ws_bytes = mats
        .iter()
        .zip(ps)
        .map(|(mat, p)| gemv::workspace_bytes(&ctx.rules, &mat.form, p).unwrap())
        .max()
        .unwrap();
    let xb = upload(ctx, &f32_bytes(x), "test x").unwrap();
    let wb = Buffer::new(&ctx.device, ws_bytes, MemoryKind::Device, "test workspace").unwrap();
    let rows = |p: &gemv::GemvParams, mat: &DeviceMatrix| p.m as usize * mat.form.shape.n;
    let ys: Vec<Buffer> = mats
        .iter()
        .zip(ps)
        .map(|(mat, p)| filled_readback(ctx, 4 * rows(p, mat), 0xFF, "test y"))
        .collect();
    let range = |b: &Buffer, bytes: usize| BufferRange {
        buffer: b.buffer,
        offset: 0,
        range: bytes as u64,
    };
    let calls: Vec<MultiCall> = mats
        .iter()
        .zip(ps)
        .zip(&ys)
        .map(|((mat, p), y)| MultiCall {
            mat,
            x: range(&xb, 4 * x.len()),
            y: range(y, 4 * rows(p, mat)),
            ops: EpilogueOperands::default(),
            p: *p,
            workspace: Some(range(&wb, ws_bytes as usize)),
        })
        .collect();
    submit_for_host(ctx, |cmd| gemv::record_multi(ctx, cmd, &calls)).unwrap();
    ys.iter()
        .zip(mats.iter().zip(ps))
        .map(|(yb, (mat, p))| read_f32s(yb, rows(p, mat)))
        .collect()
}

#[test]
fn a_multi_call_rounds_x_once_for_its_matrices() {
    let ctx = context(IntDot::Forced, None);
    let mut rng = Rng(0x3C17);
    let (k, m) = (320usize, 3usize);
    // Q, K and V of one layer's input.
    let datas: Vec<_> = [64usize, 16, 16]
        .iter()
        .map(|&n| random_q4(&mut rng, n, k, 64, true, false))
        .collect();
    let owned: Vec<DeviceMatrix> = datas
        .iter()
        .map(|d| DeviceMatrix::new(&ctx, d, None, None).unwrap())
        .collect();
    let mats: Vec<&DeviceMatrix> = owned.iter().collect();
    let ps: Vec<_> = mats.iter().map(|mat| params(mat, m, false, true)).collect();
    let keys = workspace_keys(&ctx, &mats, &ps);
    assert!(
        keys[0] != 0 && keys.iter().all(|&key| key == keys[0]),
        "{keys:?}"
    );
    let x = activations(&mut rng, m, k);
    let ys = run_multi(&ctx, &mats, &ps, &x);
    for ((d, mat), y) in datas.iter().zip(&mats).zip(&ys) {
        let n = mat.form.shape.n;
        let want = reference::gemv(d, &x, m);
        let what = format!("multi call, {n} rows");
        assert_within_bound(y, &want, &x, n, k, &weight_of(d, None), &what);
        assert!(
            reference::relative_error(y, &want) > 1e-5,
            "{what}: not rounded"
        );
    }
    assert_nothing_logged();
}

#[test]
fn gguf_blocks_on_bytes_stay_within_their_bound() {
    use gpu_support::blocks::{blocks_desc, dequantized, random_blocks};
    use q4vk::import::gguf_blocks::BlockType;
    use q4vk::vk::matrix::UploadRoute;
    let forced = context(IntDot::Forced, None);
    let off = context(IntDot::Off, None);
    let mut rng = Rng(0xB10C);
    let rounded = XRounding {
        int8: true,
        ..Default::default()
    };
    for ty in BlockType::ALL {
        let b = ty.block_elements();
        // Odd rows (a partial workgroup), several blocks per row.
        let (n, k) = (37usize, 3 * b.max(64));
        let bytes = random_blocks(&mut rng, ty, n, k);
        let w = dequantized(&blocks_desc(ty, n, k, &bytes));
        let weight = |row: usize, kk: usize| f64::from(w[row * k + kk]);
        let mat = |ctx: &Context| {
            DeviceMatrix::from_blocks(ctx, ty, n, k, &bytes, &mut UploadRoute::Queue).unwrap()
        };
        let on_forced = mat(&forced);
        // One pass, a partial one, passes of 8 and the rest.
        for m in [1usize, 3, 8, 11] {
            let what = format!("{} {n}x{k} m {m}", ty.name());
            let x = activations(&mut rng, m, k);
            let want = reference::gemv_dense(&w, &x, n, k, m);
            let p = params(&on_forced, m, false, true);
            assert!(runs_on_bytes(&forced, &on_forced, &p), "{what}");
            let (y, words) = record(&forced, &on_forced, &f32_bytes(&x), &p);
            assert_bytes_in_order(&words, &x, k, true, &what);
            assert_within_bound(&y, &want, &x, n, k, &weight, &what);
            assert!(
                reference::relative_error(&y, &want) > 1e-5,
                "{what}: not rounded"
            );
            // q4vk_gemv's path: rounded with the flag, exact without it and on a context
            // without the integer dot-product GEMV.
            let mut host = vec![f32::NAN; m * n];
            gemv_host_with(
                &forced,
                &on_forced,
                HostX::f32(&x),
                &mut host,
                m as u32,
                rounded,
            )
            .unwrap();
            assert_within_bound(&host, &want, &x, n, k, &weight, &what);
            for (ctx, rounding, how) in [
                (&forced, XRounding::default(), "flag off"),
                (&off, rounded, "no int dot"),
            ] {
                let mut exact = vec![f32::NAN; m * n];
                gemv_host_with(
                    ctx,
                    &mat(ctx),
                    HostX::f32(&x),
                    &mut exact,
                    m as u32,
                    rounding,
                )
                .unwrap();
                let err = reference::relative_error(&exact, &want);
                assert!(err < 1e-5, "{what}, {how}: relative error {err:e}");
            }
        }
        // f16 x: the bytes of its values.
        let (widened, xh) = rounded_to_f16(&activations(&mut rng, 2, k));
        let p = params(&on_forced, 2, true, true);
        let (y, words) = record(&forced, &on_forced, &xh, &p);
        let what = format!("{} f16 x", ty.name());
        assert_bytes_in_order(&words, &widened, k, true, &what);
        let want = reference::gemv_dense(&w, &widened, n, k, 2);
        assert_within_bound(&y, &want, &widened, n, k, &weight, &what);
    }
    assert_nothing_logged();
}

#[test]
fn a_multi_call_of_blocks_and_q4_rounds_x_per_column_order() {
    use gpu_support::blocks::{blocks_desc, dequantized, random_blocks};
    use q4vk::import::gguf_blocks::BlockType;
    use q4vk::vk::matrix::UploadRoute;
    let ctx = context(IntDot::Forced, None);
    let mut rng = Rng(0x3B10);
    let (k, m) = (512usize, 2usize);
    // Q6_K blocks, a Q4 matrix (x's bytes by parity), Q8_0 blocks (in input order again).
    let q6 = random_blocks(&mut rng, BlockType::Q6K, 40, k);
    let q8 = random_blocks(&mut rng, BlockType::Q8_0, 24, k);
    let q4 = random_q4(&mut rng, 32, k, 128, true, false);
    let blocks = |ty, n, bytes: &[u8]| {
        let w = dequantized(&blocks_desc(ty, n, k, bytes));
        let mat = DeviceMatrix::from_blocks(&ctx, ty, n, k, bytes, &mut UploadRoute::Queue);
        (mat.unwrap(), w)
    };
    let (m6, w6) = blocks(BlockType::Q6K, 40, &q6);
    let (m8, w8) = blocks(BlockType::Q8_0, 24, &q8);
    let m4 = DeviceMatrix::new(&ctx, &q4, None, None).unwrap();
    let w4: Vec<f32> = (0..32 * k)
        .map(|i| weight_of(&q4, None)(i / k, i % k) as f32)
        .collect();
    let mats = [&m6, &m4, &m8];
    let weights = [&w6, &w4, &w8];
    let ps: Vec<_> = mats.iter().map(|mat| params(mat, m, false, true)).collect();
    let keys = workspace_keys(&ctx, &mats, &ps);
    assert!(keys[0] == keys[2] && keys[0] != keys[1], "{keys:?}");
    let x = activations(&mut rng, m, k);
    let ys = run_multi(&ctx, &mats, &ps, &x);
    for ((mat, w), y) in mats.iter().zip(weights).zip(&ys) {
        let n = mat.form.shape.n;
        let want = reference::gemv_dense(w, &x, n, k, m);
        let weight = |row: usize, kk: usize| f64::from(w[row * k + kk]);
        let what = format!("multi call, {n} rows");
        assert_within_bound(y, &want, &x, n, k, &weight, &what);
    }
    assert_nothing_logged();
}
