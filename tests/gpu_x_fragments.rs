//! The tensor-core GEMM's fragments pre-pass (`shaders/x_fragments.comp`,
//! `vk::x_fragments`) on the system's Vulkan device (lavapipe in CI: the pre-pass needs no
//! optional feature, while the GEMM that reads it runs only where cooperative matrices
//! exist, and is checked there by `gpu_coop`), validation on: the workspace holds, bit for
//! bit (B's zeros up to their sign, which Vulkan leaves to the device), the B fragments,
//! block factors and block sums of a model of the algorithm, for f16 x, f32 x in two exact
//! parts and f32 x rounded to f16 (`Q4VK_GEMV_ROUND_X_TO_F16`), blocks of 32, 64 and 128, K
//! ending inside a stage, fewer rows than tokens held (zero columns), a row stride above K,
//! and blocks of huge, tiny (normal) and zero values; bad calls are refused.

mod gpu_support;
use gpu_support::*;
use q4vk::layout::coop::b_element;
use q4vk::vk::context::{Context, ContextConfig};
use q4vk::vk::gemv::{record_x_fragments, BufferRange, Epilogue, GemvParams};
use q4vk::vk::matrix::upload;
use q4vk::vk::memory::{Buffer, MemoryKind};
use q4vk::vk::x_fragments::FragmentGeometry;

fn context() -> Context {
    let config = ContextConfig {
        device_index: -1,
        validation: true,
        ..Default::default()
    };
    Context::new(config, counting_logger()).unwrap()
}

/// What the pre-pass must write for `m` rows of `x` (`k` columns, `stride` apart), as the
/// workspace's 32-bit words: B's halves in fragment order, then the factors and sums.
fn model(x: &[f32], m: usize, k: usize, stride: usize, g: &FragmentGeometry) -> Vec<u32> {
    let (kpad, block, tokens) = (g.kpad() as usize, g.block as usize, g.tokens as usize);
    let parts = g.parts as usize;
    // Column-major B (token t: column t, or columns 2 t (hi) and 2 t + 1 (lo)), then the
    // fragment order.
    let mut columns = vec![0u16; parts * tokens * kpad];
    let mut factors = vec![0f32; tokens * kpad / block];
    let mut sums = vec![0f32; tokens * kpad / block];
    for t in 0..tokens {
        for b in 0..kpad / block {
            let v: Vec<f32> = (b * block..(b + 1) * block)
                .map(|kk| match t < m && kk < k {
                    true => x[t * stride + kk],
                    false => 0.0,
                })
                .collect();
            let at = t * kpad / block + b;
            sums[at] = v
                .chunks_exact(4)
                .map(|q| (q[0] + q[1]) + (q[2] + q[3]))
                .fold(0.0, |s, p| s + p);
            let mut column = |c: usize, halves: &[u16]| {
                columns[c * kpad + b * block..][..block].copy_from_slice(halves);
            };
            factors[at] = match (g.x_f16, parts) {
                (true, _) => {
                    let halves: Vec<u16> = v
                        .iter()
                        .map(|&vi| half::f16::from_f32(vi).to_bits())
                        .collect();
                    column(t, &halves);
                    1.0
                }
                (false, 1) => {
                    let (factor, halves) = round_block_to_f16(&v);
                    column(t, &halves);
                    factor
                }
                (false, _) => {
                    let (factor, pairs) = split_block_to_f16(&v);
                    let (hi, lo): (Vec<u16>, Vec<u16>) = pairs.into_iter().unzip();
                    column(2 * t, &hi);
                    column(2 * t + 1, &lo);
                    factor
                }
            };
        }
    }
    let mut halves = vec![0u16; columns.len()];
    for group in 0..parts * tokens / 8 {
        for step in 0..kpad / 16 {
            for lane in 0..32 {
                for e in 0..4 {
                    let (kk, n) = b_element(lane, e);
                    let pair = group * kpad / 32 + step / 2;
                    let at = ((pair * 32 + lane) * 2 + step % 2) * 4 + e;
                    halves[at] = columns[(8 * group + n) * kpad + 16 * step + kk];
                }
            }
        }
    }
    let mut words: Vec<u32> = halves
        .chunks_exact(2)
        .map(|h| h[0] as u32 | (h[1] as u32) << 16)
        .collect();
    words.extend(factors.iter().chain(&sums).map(|v| v.to_bits()));
    words
}

/// Runs the pre-pass on `x` (f16 bytes with `g.x_f16`) into a poisoned workspace of
/// `ws_bytes` and returns its words, or what `record_x_fragments` refused.
fn run(
    ctx: &Context,
    x_bytes: &[u8],
    p: &GemvParams,
    k: u32,
    g: &FragmentGeometry,
    ws_bytes: u64,
) -> Result<Vec<u32>, q4vk::error::Error> {
    let xb = upload(ctx, x_bytes, "test x").unwrap();
    let wb = Buffer::new(
        &ctx.device,
        ws_bytes,
        MemoryKind::Readback,
        "test workspace",
    )
    .unwrap();
    wb.write(0, &vec![0xFF; ws_bytes as usize]);
    let range = |b: &Buffer, bytes: u64| BufferRange {
        buffer: b.buffer,
        offset: 0,
        range: bytes,
    };
    submit_for_host(ctx, |cmd| {
        record_x_fragments(
            ctx,
            cmd,
            range(&xb, x_bytes.len() as u64),
            range(&wb, ws_bytes),
            p,
            k,
            g,
        )
    })?;
    Ok(read_words(&wb, ws_bytes as usize / 4))
}

/// `m` rows of `k` activations `stride` apart: a huge block, a tiny one and a zero one where
/// K has room, f16-exact values for f16 x.
fn activations(rng: &mut Rng, m: usize, k: usize, stride: usize, x_f16: bool) -> Vec<f32> {
    let mut x = rng.vec(m * stride);
    for row in x.chunks_exact_mut(stride) {
        if k >= 256 {
            let (huge, tiny) = if x_f16 {
                (3.0e3, 1.0e-3)
            } else {
                (1.0e30, 1.0e-35)
            };
            row[..32].iter_mut().for_each(|v| *v *= huge);
            // Tiny but normal f32 (|v| of 0.5 .. 1 times `tiny`): devices may flush
            // subnormal activations, as `q4vk_gemv_args.x` says.
            row[64..96]
                .iter_mut()
                .for_each(|v| *v = v.signum() * (0.5 + v.abs() / 2.0) * tiny);
            row[128..192].fill(0.0);
        }
    }
    if x_f16 {
        x.iter_mut()
            .for_each(|v| *v = half::f16::from_f32(*v).to_f32());
    }
    x
}

fn bytes_of(x: &[f32], x_f16: bool) -> Vec<u8> {
    let mut out: Vec<u8> = match x_f16 {
        true => x
            .iter()
            .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
            .collect(),
        false => x.iter().flat_map(|v| v.to_le_bytes()).collect(),
    };
    out.resize(out.len().next_multiple_of(4), 0);
    out
}

#[test]
fn workspace_matches_the_model() {
    let ctx = context();
    let mut rng = Rng(0x5A17);
    // (m, tokens, k, stride, block)
    let cases = [
        (13usize, 16u32, 300usize, 310usize, 128u32),
        (8, 8, 256, 256, 64),
        (9, 32, 1000, 1003, 32),
        (40, 48, 128, 130, 128),
    ];
    let mut failures = Vec::new();
    // f32 in two parts, f32 rounded to f16, f16.
    for (x_f16, parts) in [(false, 2), (false, 1), (true, 1)] {
        for &(m, tokens, k, stride, block) in &cases {
            let g = FragmentGeometry {
                stages: k.div_ceil(128) as u32,
                block,
                tokens,
                x_f16,
                parts,
            };
            let x = activations(&mut rng, m, k, stride, x_f16);
            let p = GemvParams {
                m: m as u32,
                x_f16,
                x_stride: stride as u64,
                y_stride: 1,
                x_gathered: false,
                x_round_f16: !x_f16 && parts == 1,
                x_round_int8: false,
                workspace_filled: false,
                epilogue: Epilogue::NONE,
            };
            let got = run(&ctx, &bytes_of(&x, x_f16), &p, k as u32, &g, g.bytes()).unwrap();
            let want = model(&x, m, k, stride, &g);
            assert_eq!(got.len(), want.len());
            let b_words = (g.factors_offset() / 4) as usize;
            let what = |i: usize| match i < b_words {
                true => "B",
                false if i < (g.sums_offset() / 4) as usize => "factor",
                false => "sum",
            };
            // B's halves compare with -0 equal to +0: Vulkan leaves the sign of a zero to
            // the device (`hi + lo` of a value that underflows to -0 may keep its sign).
            let zero_sign = |w: u32| {
                let half = |h: u32| if h == 0x8000 { 0 } else { h };
                half(w & 0xFFFF) | half(w >> 16) << 16
            };
            let wrong: Vec<String> = (0..got.len())
                .filter(|&i| match i < b_words {
                    true => zero_sign(got[i]) != zero_sign(want[i]),
                    false => got[i] != want[i],
                })
                .map(|i| {
                    format!(
                        "{} word {i}: {:#010x}, want {:#010x}",
                        what(i),
                        got[i],
                        want[i]
                    )
                })
                .collect();
            if !wrong.is_empty() {
                failures.push(format!(
                    "f16 {x_f16} parts {parts} m {m} k {k} block {block}: {} of {} words wrong, first: {:?}",
                    wrong.len(),
                    got.len(),
                    &wrong[..wrong.len().min(8)]
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    assert_nothing_logged();
}

#[test]
fn bad_calls_are_refused() {
    use q4vk::error::Error;
    let ctx = context();
    let g = FragmentGeometry {
        stages: 2,
        block: 128,
        tokens: 16,
        x_f16: false,
        parts: 1,
    };
    let x = bytes_of(&vec![1.0; 16 * 256], false);
    let p = |m: u32, x_f16: bool, x_round_f16: bool| GemvParams {
        m,
        x_f16,
        x_stride: 256,
        y_stride: 1,
        x_gathered: false,
        x_round_f16,
        x_round_int8: false,
        workspace_filled: false,
        epilogue: Epilogue::NONE,
    };
    let run_with =
        |x: &[u8], p: GemvParams, k: u32, g: &FragmentGeometry, ws: u64| run(&ctx, x, &p, k, g, ws);
    let invalid = |r: Result<Vec<u32>, Error>| {
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    };
    // f32 x the call does not let round (for a rounded geometry, and the reverse); f16 x for
    // an f32 geometry, or in two parts; more rows than tokens; K beyond the stages; tokens
    // not whole fragments; a block the kernels do not take.
    invalid(run_with(&x, p(16, false, false), 256, &g, g.bytes()));
    let two = FragmentGeometry { parts: 2, ..g };
    invalid(run_with(&x, p(16, false, true), 256, &two, two.bytes()));
    invalid(run_with(&x, p(16, true, false), 256, &g, g.bytes()));
    let f16_two = FragmentGeometry { x_f16: true, ..two };
    invalid(run_with(
        &x,
        p(16, true, false),
        256,
        &f16_two,
        f16_two.bytes(),
    ));
    invalid(run_with(&x, p(17, false, true), 256, &g, g.bytes()));
    invalid(run_with(&x, p(16, false, true), 257, &g, g.bytes()));
    let odd = FragmentGeometry { tokens: 12, ..g };
    invalid(run_with(&x, p(12, false, true), 256, &odd, odd.bytes()));
    let block = FragmentGeometry { block: 48, ..g };
    invalid(run_with(&x, p(16, false, true), 256, &block, block.bytes()));
    // A short workspace or x.
    let short = run_with(&x, p(16, false, true), 256, &g, g.bytes() - 4);
    assert!(matches!(short, Err(Error::BufferTooSmall(_))), "{short:?}");
    let short = run_with(&x[..x.len() - 4], p(16, false, true), 256, &g, g.bytes());
    assert!(matches!(short, Err(Error::BufferTooSmall(_))), "{short:?}");
    assert!(run_with(&x, p(16, false, true), 256, &g, g.bytes()).is_ok());
    assert_nothing_logged();
}
