//! The epilogue of `q4vk_gemv_host` (applied on the host after the product), checked on any
//! context: bias (f32, f16), SiLU and GELU gates, a residual apart from y and in place,
//! against an f64 reference of the dequantized weights within 1e-5 of y's norm; bad
//! operands refused with nothing written.

use super::blocks::dequantized;
use super::{gemv_host_args, last_error, q4_desc, random_q4, upload_q4, Gpu, Rng};
use q4vk::ffi::gemv::*;
use q4vk::ffi::matrix::q4vk_matrix_destroy;
use q4vk::ffi::status::*;

fn silu(g: f64) -> f64 {
    g / (1.0 + (-g).exp())
}

fn gelu_tanh(g: f64) -> f64 {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * g * (1.0 + (c * (g + 0.044715 * g * g * g)).tanh())
}

fn bytes_of(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

/// Runs every check on `gpu`'s context (`label` names it in messages).
pub fn check_host_epilogue(gpu: &Gpu, label: &str) {
    let mut rng = Rng(0x405E);
    let (n, k, m) = (40usize, 256usize, 3usize);
    let data = random_q4(&mut rng, n, k, 64, true, false);
    let w = dequantized(&q4_desc(&data));
    let mat = upload_q4(gpu, &data);
    let x = rng.vec(m * k);
    let bias = rng.vec(n);
    let bias_f16: Vec<u8> = bias
        .iter()
        .flat_map(|&b| half::f16::from_f32(b).to_ne_bytes())
        .collect();
    let gate: Vec<f32> = (0..m * n).map(|_| rng.f32() * 6.0).collect();
    let residual = rng.vec(m * n);
    let product = |t: usize, i: usize| -> f64 {
        (0..k)
            .map(|j| w[i * k + j] as f64 * x[t * k + j] as f64)
            .sum()
    };
    let args = |y: &mut Vec<f32>, flags: u32| {
        let mut a = gemv_host_args();
        a.x = x.as_ptr().cast();
        a.x_bytes = 4 * m * k;
        a.y = y.as_mut_ptr();
        a.y_len = y.len();
        a.m = m as u32;
        a.flags = flags;
        a
    };
    // f16 bias and SiLU gate; f32 bias and GELU gate; f32 bias and a residual in place (y
    // holds it); a residual apart from y, unaligned.
    let bias_bytes = bytes_of(&bias);
    let residual_bytes = bytes_of(&residual);
    let mut shifted = vec![0u8; residual_bytes.len() + 1];
    shifted[1..].copy_from_slice(&residual_bytes);
    // y from (W x + bias, gate, residual).
    type Want = fn(f64, f64, f64) -> f64;
    let cases: [(&str, u32, bool, Want); 4] = [
        (
            "f16 bias, SiLU",
            Q4VK_GEMV_BIAS | Q4VK_GEMV_BIAS_F16 | Q4VK_GEMV_SILU_GATE,
            false,
            |v, g, _| v * silu(g),
        ),
        (
            "GELU",
            Q4VK_GEMV_BIAS | Q4VK_GEMV_GELU_GATE,
            false,
            |v, g, _| v * gelu_tanh(g),
        ),
        (
            "residual in place",
            Q4VK_GEMV_BIAS | Q4VK_GEMV_RESIDUAL,
            true,
            |v, _, r| v + r,
        ),
        (
            "residual apart, unaligned",
            Q4VK_GEMV_RESIDUAL,
            false,
            |v, _, r| v + r,
        ),
    ];
    for (what, flags, in_place, want_of) in cases {
        let mut y = match in_place {
            true => residual.clone(),
            false => vec![f32::NAN; m * n],
        };
        let mut a = args(&mut y, flags);
        let f16_bias = flags & Q4VK_GEMV_BIAS_F16 != 0;
        if flags & Q4VK_GEMV_BIAS != 0 {
            let b = if f16_bias { &bias_f16 } else { &bias_bytes };
            a.bias = b.as_ptr().cast();
            a.bias_bytes = b.len();
        }
        if flags & (Q4VK_GEMV_SILU_GATE | Q4VK_GEMV_GELU_GATE) != 0 {
            a.gate = gate.as_ptr().cast();
            a.gate_bytes = 4 * gate.len();
        }
        if flags & Q4VK_GEMV_RESIDUAL != 0 {
            a.residual = match in_place {
                true => a.y.cast_const().cast(),
                false => shifted[1..].as_ptr().cast(),
            };
            a.residual_bytes = 4 * m * n;
        }
        let status = unsafe { q4vk_gemv_host(gpu.ctx, mat, &a) };
        assert_eq!(status, Q4VK_OK, "{label}: {what}: {}", last_error());
        let want: Vec<f64> = (0..m * n)
            .map(|at| {
                let (t, i) = (at / n, at % n);
                let b = match (flags & Q4VK_GEMV_BIAS != 0, f16_bias) {
                    (false, _) => 0.0,
                    (true, true) => half::f16::from_f32(bias[i]).to_f64(),
                    (true, false) => bias[i] as f64,
                };
                want_of(product(t, i) + b, gate[at] as f64, residual[at] as f64)
            })
            .collect();
        let err = q4vk::cpu::reference::relative_error(&y, &want);
        assert!(err < 1e-5, "{label}: {what}: relative error {err:e}");
    }

    // Refusals: nothing written.
    let mut y = vec![f32::NAN; m * n + 8];
    let base = args(&mut y, Q4VK_GEMV_BIAS);
    let with_bias = q4vk_gemv_host_args {
        bias: bias_bytes.as_ptr().cast(),
        bias_bytes: bias_bytes.len(),
        ..base
    };
    let y_ptr = base.y;
    let cases = [
        (
            "no bias",
            base,
            Q4VK_ERROR_NULL_POINTER,
            "args->bias is NULL",
        ),
        (
            "short bias",
            q4vk_gemv_host_args {
                bias_bytes: 4 * n - 1,
                ..with_bias
            },
            Q4VK_ERROR_BUFFER_TOO_SMALL,
            "args->bias_bytes",
        ),
        (
            "gate without its flag",
            q4vk_gemv_host_args {
                gate: gate.as_ptr().cast(),
                gate_bytes: 4 * gate.len(),
                ..with_bias
            },
            Q4VK_ERROR_INVALID_ARGUMENT,
            "lacks Q4VK_GEMV_SILU_GATE",
        ),
        (
            "gate over y",
            q4vk_gemv_host_args {
                flags: Q4VK_GEMV_BIAS | Q4VK_GEMV_SILU_GATE,
                gate: y_ptr.cast_const().cast(),
                gate_bytes: 4 * m * n,
                ..with_bias
            },
            Q4VK_ERROR_INVALID_ARGUMENT,
            "overlap",
        ),
        (
            "residual partly over y",
            q4vk_gemv_host_args {
                flags: Q4VK_GEMV_BIAS | Q4VK_GEMV_RESIDUAL,
                residual: unsafe { y_ptr.add(4) }.cast_const().cast(),
                residual_bytes: 4 * m * n,
                ..with_bias
            },
            Q4VK_ERROR_INVALID_ARGUMENT,
            "args->residual overlaps args->y",
        ),
        (
            "f16 y",
            q4vk_gemv_host_args {
                flags: Q4VK_GEMV_BIAS | Q4VK_GEMV_F16_OUTPUT,
                ..with_bias
            },
            Q4VK_ERROR_UNSUPPORTED,
            "Q4VK_GEMV_F16_OUTPUT",
        ),
        (
            "gate and residual",
            q4vk_gemv_host_args {
                flags: Q4VK_GEMV_BIAS | Q4VK_GEMV_SILU_GATE | Q4VK_GEMV_RESIDUAL,
                ..with_bias
            },
            Q4VK_ERROR_UNSUPPORTED,
            "one or the other",
        ),
    ];
    for (what, a, want, words) in cases {
        let status = unsafe { q4vk_gemv_host(gpu.ctx, mat, &a) };
        let message = last_error();
        assert_eq!(status, want, "{label}: {what}: {message}");
        assert!(
            message.contains(words),
            "{label}: {what}: {message:?} lacks {words:?}"
        );
        assert!(y.iter().all(|v| v.is_nan()), "{label}: {what}: y written");
    }
    unsafe { q4vk_matrix_destroy(mat) };
}
