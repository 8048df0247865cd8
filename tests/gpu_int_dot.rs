//! The integer dot-product GEMV (`vk::int_dot`: x in 8-bit digits, packed dot products;
//! opted in with `ContextConfig::int_dot`) on the system's Vulkan device (lavapipe in CI,
//! which has `shaderIntegerDotProduct`), validation on: `q4vk_gemv`'s path (`gemv_host`)
//! matches the f64 reference within 1e-5 at m = 1..8 for every group size, zero points on
//! and off, f16 and f32 scales, per-group offsets, a column order (act-order), odd K, and
//! x with a huge, a tiny and an all-zero block; x with an infinite element keeps the f32
//! kernel, as does a context that did not opt in; a short x or y is refused.

mod gpu_support;
use gpu_support::*;
use q4vk::cpu::reference;
use q4vk::vk::context::{Context, ContextConfig};
use q4vk::vk::gemv::gemv_host;
use q4vk::vk::matrix::DeviceMatrix;

fn context(int_dot: bool) -> Context {
    let config = ContextConfig {
        device_index: -1,
        validation: true,
        no_coop: true,
        int_dot,
        ..Default::default()
    };
    Context::new(config, counting_logger()).unwrap()
}

/// `m` rows of `k` activations, with a block of huge values, one of tiny ones and one of
/// zeros where K has room.
fn activations(rng: &mut Rng, m: usize, k: usize) -> Vec<f32> {
    let mut x = rng.vec(m * k);
    for row in x.chunks_exact_mut(k) {
        if k >= 128 {
            row[..32].iter_mut().for_each(|v| *v *= 3.0e3);
            row[32..64].iter_mut().for_each(|v| *v *= 1.0e-9);
            row[64..96].fill(0.0);
        }
    }
    x
}

/// Runs `q4vk_gemv`'s path at `m` and checks every output against `want` (1e-5).
fn assert_gemv_matches(
    ctx: &Context,
    mat: &DeviceMatrix,
    x: &[f32],
    m: usize,
    want: &[f64],
    what: &str,
) {
    let mut y = vec![f32::NAN; want.len()];
    gemv_host(ctx, mat, x, &mut y, m as u32).unwrap();
    assert!(y.iter().all(|v| v.is_finite()), "{what}: unwritten y");
    let err = reference::relative_error(&y, want);
    assert!(err < 1e-5, "{what} m {m}: {err:e}");
}

#[test]
fn digits_gemv_matches_the_reference() {
    let ctx = context(true);
    assert!(
        ctx.int_dot,
        "the device has no shaderIntegerDotProduct (Vulkan 1.3 / VK_KHR_shader_integer_dot_product)"
    );
    let mut rng = Rng(0x1D07);
    // (n, k, group, zero points, f32 scales)
    let cases = [
        (37usize, 300usize, 32i32, true, false),
        (64, 256, 128, false, false),
        (21, 515, 64, true, true),
        (9, 96, -1, false, true),
        (130, 1024, 256, true, false),
    ];
    for &(n, k, g, z, f32s) in &cases {
        let d = random_q4(&mut rng, n, k, g, z, f32s);
        let mat = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
        for m in 1..=8usize {
            let x = activations(&mut rng, m, k);
            let want = reference::gemv(&d, &x, m);
            let what = format!("{n}x{k} g{g} z{z} f32 scales {f32s}");
            assert_gemv_matches(&ctx, &mat, &x, m, &want, &what);
        }
    }
    assert_nothing_logged();
}

#[test]
fn digits_gemv_with_offsets_matches_the_reference() {
    let ctx = context(true);
    assert!(ctx.int_dot);
    let mut rng = Rng(0x0FF5);
    for &(n, k) in &[(40usize, 256usize), (17, 200)] {
        let d = random_q4(&mut rng, n, k, 32, false, true);
        let offsets: Vec<f32> = (0..n * k.div_ceil(32)).map(|_| rng.f32() * 0.05).collect();
        let mat = DeviceMatrix::new(&ctx, &d, Some(&offsets), None).unwrap();
        for m in [1usize, 3, 8] {
            let x = activations(&mut rng, m, k);
            let want = reference::gemv_with_offsets(&d, &offsets, &x, m);
            assert_gemv_matches(&ctx, &mat, &x, m, &want, &format!("offsets {n}x{k}"));
        }
    }
    assert_nothing_logged();
}

#[test]
fn digits_gemv_with_a_column_order_matches_the_reference() {
    let ctx = context(true);
    assert!(ctx.int_dot);
    let mut rng = Rng(0x0DE5);
    let (n, k) = (33usize, 232usize);
    let d = random_q4(&mut rng, n, k, 32, true, false);
    let order: Vec<u32> = (0..k).map(|j| (j * 97 % k) as u32).collect();
    let mat = DeviceMatrix::new(&ctx, &d, None, Some(&order)).unwrap();
    for m in [1usize, 5] {
        let x = activations(&mut rng, m, k);
        // Column j of the matrix meets input order[j].
        let xo: Vec<f32> = x
            .chunks_exact(k)
            .flat_map(|row| order.iter().map(|&i| row[i as usize]))
            .collect();
        let want = reference::gemv(&d, &xo, m);
        assert_gemv_matches(&ctx, &mat, &x, m, &want, "act-order");
    }
    assert_nothing_logged();
}

#[test]
fn non_finite_x_and_contexts_without_it_keep_the_f32_kernel() {
    let mut rng = Rng(0x1F1);
    let (n, k) = (24usize, 128usize);
    let d = random_q4(&mut rng, n, k, 32, true, false);
    let mut x = rng.vec(2 * k);
    x[k + 5] = f32::INFINITY;
    let run = |ctx: &Context| {
        let mat = DeviceMatrix::new(ctx, &d, None, None).unwrap();
        let mut y = vec![0f32; 2 * n];
        gemv_host(ctx, &mat, &x, &mut y, 2).unwrap();
        y
    };
    let (forced, f32_only) = (context(true), context(false));
    assert!(forced.int_dot && !f32_only.int_dot);
    // The same f32 kernel ran on both: the same bits, inf/NaN included.
    let (a, b) = (run(&forced), run(&f32_only));
    assert_eq!(
        a.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        b.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    assert!(a[n..].iter().any(|v| !v.is_finite()));
    assert_nothing_logged();
}

#[test]
fn a_short_x_or_y_is_refused_on_either_path() {
    let mut rng = Rng(0x5407);
    let (n, k) = (16usize, 96usize);
    let d = random_q4(&mut rng, n, k, 32, false, false);
    for int_dot in [true, false] {
        let ctx = context(int_dot);
        let mat = DeviceMatrix::new(&ctx, &d, None, None).unwrap();
        let x = rng.vec(2 * k);
        let mut y = vec![0f32; 2 * n];
        let short_x = gemv_host(&ctx, &mat, &x[..k], &mut y, 2);
        assert!(matches!(
            short_x,
            Err(q4vk::error::Error::BufferTooSmall(_))
        ));
        let short_y = gemv_host(&ctx, &mat, &x, &mut y[..n], 2);
        assert!(matches!(
            short_y,
            Err(q4vk::error::Error::BufferTooSmall(_))
        ));
        assert!(y.iter().all(|&v| v == 0.0), "written on error");
    }
    assert_nothing_logged();
}
