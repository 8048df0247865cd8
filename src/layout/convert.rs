//! Lossless conversion of Paddle int4 weights (`weight_quantize` output) to q4vk's Q4
//! format: unpermute to plain signed codes `q[k][n]`, transpose to rows of W with
//! `u = q + 8` (so `(u - 8) * s = q * s`, Paddle's dequantization), and transpose the
//! scales `[groups][n]` to `[n][groups]` (f16 kept, bf16 widened to f32 exactly, f32 kept).

use crate::alloc;
use crate::error::Result;
use crate::quant::dtype::Dtype;
use crate::quant::paddle::PaddleScheme;
use crate::quant::q4::{Q4Data, Q4Shape, ScaleType};
use std::borrow::Cow;

/// Converts Paddle's `qweight` (`scheme.qweight_bytes()`) and `scale`
/// (`scheme.scale_bytes()`) of an int4 scheme into a Q4 matrix.
pub fn paddle_to_q4(
    scheme: &PaddleScheme,
    qweight: &[u8],
    scale: &[u8],
    threads: usize,
) -> Result<Q4Data<'static>> {
    let (k, n) = (scheme.geometry.k, scheme.geometry.n);
    let mut plain = alloc::filled::<u8>(scheme.qweight_bytes(), "plain codes")?;
    scheme.geometry.unpermute(qweight, &mut plain, threads);
    let shape = Q4Shape {
        n,
        k,
        group_size: scheme.group_rows,
        per_channel: scheme.per_channel,
        zero_points: false,
    };
    let row_bytes = shape.row_bytes();
    let mut weight = alloc::filled::<u8>(shape.weight_bytes(), "Q4 weights")?;
    for (row, dst) in weight.chunks_exact_mut(row_bytes).enumerate() {
        for kk in 0..k {
            let byte = plain[(kk * n + row) / 2];
            let q = if row % 2 == 0 { byte & 0x0f } else { byte >> 4 };
            let u = (q ^ 0x08) & 0x0f; // two's-complement nibble + 8
            dst[kk / 2] |= if kk % 2 == 0 { u } else { u << 4 };
        }
    }
    let groups = shape.groups();
    let size = scheme.dtype.size();
    let (scale_type, out_size) = match scheme.dtype {
        Dtype::F16 => (ScaleType::F16, 2),
        Dtype::Bf16 | Dtype::F32 => (ScaleType::F32, 4),
    };
    let mut scales = alloc::filled::<u8>(n * groups * out_size, "Q4 scales")?;
    for g in 0..groups {
        for col in 0..n {
            let src = &scale[(g * n + col) * size..(g * n + col + 1) * size];
            let dst = &mut scales[(col * groups + g) * out_size..(col * groups + g + 1) * out_size];
            match scheme.dtype {
                Dtype::Bf16 => dst.copy_from_slice(&[0, 0, src[0], src[1]]),
                _ => dst.copy_from_slice(src),
            }
        }
    }
    Ok(Q4Data {
        shape,
        weight: Cow::Owned(weight),
        scale_type,
        scales: Cow::Owned(scales),
        zeros: Cow::Owned(Vec::new()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::paddle::{self, PaddleParams};

    #[test]
    fn paddle_round_trip_matches_paddle_dequantize() {
        for (dtype, arch, gs) in [(1u32, 80, -1), (2, 70, 64), (0, 90, 128)] {
            let (k, n) = (128usize, 32usize);
            let scheme = PaddleScheme::new(PaddleParams {
                algo: 1,
                dtype,
                arch,
                group_size: gs,
                k: k as u64,
                n: n as u64,
            })
            .unwrap();
            let mut seed = 1u64;
            let vals: Vec<f32> = (0..k * n)
                .map(|_| {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                    ((seed >> 40) as f32 / 16777216.0) - 0.5
                })
                .collect();
            let bytes: Vec<u8> = vals
                .iter()
                .flat_map(|&v| {
                    let bits = scheme.dtype.from_f32(v);
                    bits.to_le_bytes()[..scheme.dtype.size()].to_vec()
                })
                .collect();
            let mut q = vec![0u8; scheme.qweight_bytes()];
            let mut s = vec![0u8; scheme.scale_bytes()];
            paddle::quantize(&scheme, &bytes, &mut q, &mut s, 1).unwrap();
            let data = paddle_to_q4(&scheme, &q, &s, 2).unwrap();
            let mut plain = vec![0u8; scheme.qweight_bytes()];
            scheme.geometry.unpermute(&q, &mut plain, 1);
            for kk in 0..k {
                for col in 0..n {
                    let byte = plain[(kk * n + col) / 2];
                    let nib = if col % 2 == 0 { byte & 15 } else { byte >> 4 };
                    let code = ((nib << 4) as i8 >> 4) as f32;
                    let g = kk / scheme.group_rows;
                    let i = (g * n + col) * scheme.dtype.size();
                    let sc = match scheme.dtype {
                        Dtype::F32 => f32::from_le_bytes(s[i..i + 4].try_into().unwrap()),
                        Dtype::F16 => half::f16::from_le_bytes([s[i], s[i + 1]]).to_f32(),
                        Dtype::Bf16 => half::bf16::from_le_bytes([s[i], s[i + 1]]).to_f32(),
                    };
                    let gi = col * data.shape.groups() + g;
                    let got = (data.code(col, kk) as f32 - 8.0) * data.scale(gi);
                    assert_eq!(got, code * sc, "dtype {dtype} k {kk} n {col}");
                }
            }
        }
    }
}
