//! Matrices with a column order (GPTQ act-order: column j multiplies input `order[j]`) on
//! the system's Vulkan device (lavapipe in CI), validation on, both SIMT families: the
//! `q4vk_gemv` path (x gathered on the host once per call, then the plain kernels) and
//! the recorded path of `q4vk_cmd_gemv` (the kernels gather x from the host's buffer) both
//! match the f64 reference at m = 1, 8 (GEMV) and 33 (GEMM), for a shuffled order, every
//! group size and zero points on and off; the host gather of f16 x (`q4vk_gemv_host`) too.

mod gpu_support;
use gpu_support::*;
use q4vk::cpu::reference;
use q4vk::vk::context::{Context, ContextConfig};
use q4vk::vk::gemv::{gemv_host, gemv_host_with, HostX, XRounding};
use q4vk::vk::matrix::DeviceMatrix;

#[test]
fn act_order_matrices_match_reference_on_both_paths() {
    let mut rng = Rng(0xAC7);
    let cases = [
        (45usize, 300usize, 32i32, true),
        (70, 256, 128, false),
        (33, 520, 64, true),
        (17, 96, -1, false),
    ];
    for portable in [false, true] {
        let config = ContextConfig {
            device_index: -1,
            validation: true,
            portable,
            ..Default::default()
        };
        let ctx = Context::new(config, counting_logger()).unwrap();
        for &(n, k, g, z) in &cases {
            let d = random_q4(&mut rng, n, k, g, z, false);
            let order = shuffled(&mut rng, k);
            let mat = DeviceMatrix::new(&ctx, &d, None, Some(&order)).unwrap();
            for m in [1usize, 8, 33] {
                let x = rng.vec(m * k);
                // Column j of the matrix meets input order[j].
                let xo: Vec<f32> = x
                    .chunks_exact(k)
                    .flat_map(|row| order.iter().map(|&i| row[i as usize]))
                    .collect();
                let want = reference::gemv(&d, &xo, m);
                let mut y = vec![f32::NAN; m * n];
                gemv_host(&ctx, &mat, &x, &mut y, m as u32).unwrap();
                assert!(y.iter().all(|v| v.is_finite()), "unwritten y (host gather)");
                let err = reference::relative_error(&y, &want);
                assert!(
                    err < 1e-5,
                    "host gather {portable} {n}x{k} g{g} m {m}: {err:e}"
                );
                // f16 x gathered on the host (two bytes per value).
                let halves: Vec<half::f16> = x.iter().map(|&v| half::f16::from_f32(v)).collect();
                let hb: Vec<u8> = halves.iter().flat_map(|h| h.to_ne_bytes()).collect();
                let ho: Vec<f32> = xo
                    .iter()
                    .map(|&v| half::f16::from_f32(v).to_f32())
                    .collect();
                let mut y = vec![f32::NAN; m * n];
                let xh = HostX {
                    bytes: &hb,
                    f16: true,
                };
                gemv_host_with(&ctx, &mat, xh, &mut y, m as u32, XRounding::default()).unwrap();
                let err = reference::relative_error(&y, &reference::gemv(&d, &ho, m));
                assert!(
                    err < 1e-5,
                    "host gather f16 {portable} {n}x{k} g{g} m {m}: {err:e}"
                );
                let xb: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
                let y = record_gemv(&ctx, &mat, &xb, m, false);
                assert!(
                    y.iter().all(|v| v.is_finite()),
                    "unwritten y (kernel gather)"
                );
                let err = reference::relative_error(&y, &want);
                assert!(
                    err < 1e-5,
                    "kernel gather {portable} {n}x{k} g{g} m {m}: {err:e}"
                );
            }
        }
    }
    assert_nothing_logged();
}
