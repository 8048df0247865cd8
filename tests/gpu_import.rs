//! Imported checkpoints on the system's Vulkan device (lavapipe in CI) with the validation
//! layer on: every GGUF (Q4_0, Q4_1 and Q4_K: per-group offsets), GPTQ and AWQ golden case
//! (act-order ones too: the kernels gather x through the column order) becomes a matrix
//! through `q4vk_matrix_create`, and its GEMV (m = 1 and 8, both kernel families) and GEMM (m = 33, subgroup context) match
//! the f64 GEMV of the reference weights within 1e-5 (relative).

mod gpu_support;
mod import_support;

use gpu_support::{last_error, Gpu, Rng};
use import_support::*;
use q4vk::cpu::reference::relative_error;
use q4vk::ffi::gemv::q4vk_gemv;
use q4vk::ffi::matrix::*;
use q4vk::ffi::status::*;

const TOL: f64 = 1e-5;

fn sweep(portable: bool) {
    let gpu = Gpu::new(portable);
    let mut rng = Rng(if portable { 5 } else { 3 });
    let mut cases = gguf_cases();
    cases.extend(packed_cases("gptq"));
    cases.extend(packed_cases("awq"));
    let (mut created, mut act_orders) = (0, 0);
    for c in &cases {
        let d = c.desc();
        // The reference weights: the shipped file, or (hash-only cases) the dequantized
        // bytes once their SHA-256 matches the manifest's.
        let (status, w) = dequantize(&d);
        assert_eq!(status, Q4VK_OK, "{}: {}", c.name, last_error());
        assert_eq!(sha256_hex(&f32_bytes(&w)), c.dequant_sha256, "{}", c.name);
        let mut mat = std::ptr::null_mut();
        let status = unsafe { q4vk_matrix_create(gpu.ctx, &d, &mut mat) };
        let act_order = c.source == Q4VK_SOURCE_GPTQ
            && c.group_size > 0
            && c.g_idx.chunks_exact(4).enumerate().any(|(i, b)| {
                i32::from_le_bytes(b.try_into().unwrap()) as usize != i / c.group_size as usize
            });
        act_orders += act_order as usize;
        assert_eq!(status, Q4VK_OK, "{}: {}", c.name, last_error());
        let (n, k) = (c.n as usize, c.k as usize);
        // m = 33: the GEMM (a whole and a partial tile of tokens; one SPIR-V for both
        // context kinds, so once).
        let ms: &[usize] = if portable { &[1, 8] } else { &[1, 8, 33] };
        for &m in ms {
            let x = rng.vec(m * k);
            let mut y = vec![f32::NAN; m * n];
            let status = unsafe {
                q4vk_gemv(
                    gpu.ctx,
                    mat,
                    x.as_ptr(),
                    x.len(),
                    y.as_mut_ptr(),
                    y.len(),
                    m as u32,
                )
            };
            assert_eq!(status, Q4VK_OK, "{}: {}", c.name, last_error());
            assert!(y.iter().all(|v| v.is_finite()), "{}: y not written", c.name);
            let err = relative_error(&y, &reference(&w, &x, n, k, m));
            assert!(err < TOL, "{} m {m}: rel err {err:e}", c.name);
        }
        unsafe { q4vk_matrix_destroy(mat) };
        created += 1;
    }
    // 5 Q4_0 + 5 Q4_1 + 1 Q4_K + 12 GPTQ (3 act-order) + 7 AWQ.
    assert_eq!((created, act_orders), (30, 3));
    gpu.assert_quiet();
}

#[test]
fn imported_gemv_subgroup_kernels_match_reference() {
    sweep(false);
}

#[test]
fn imported_gemv_portable_kernels_match_reference() {
    sweep(true);
}
