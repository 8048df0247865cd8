//! Lossless conversion of Paddle int4 weights (`weight_quantize` output) to q4vk's Q4
//! format: unpermute to plain signed codes `q[k][n]`, transpose to rows of W with
//! `u = q + 8` (so `(u - 8) * s = q * s`, Paddle's dequantization), and transpose the
//! scales `[groups][n]` to `[n][groups]` (f16 kept, bf16 widened to f32 exactly, f32 kept).

use super::transpose::{scatter_columns, BLOCK};
use crate::alloc;
use crate::error::Result;
use crate::parallel::for_each_unit;
use crate::quant::dtype::Dtype;
use crate::quant::paddle::PaddleScheme;
use crate::quant::q4::{Q4Data, Q4Shape, ScaleType};
use crate::simd::multiversion;
use std::borrow::Cow;

multiversion! {
    /// Byte `kk / 2` of rows `n0..n0 + width` of W from plain codes: `run[j]` holds
    /// `u = q + 8` of (kk, n0 + j) in its low nibble and, when `odd`, of (kk + 1, n0 + j)
    /// in its high nibble.
    fn pair_codes<>(plain: &[u8], n: usize, kk: usize, n0: usize, width: usize, odd: bool, run: &mut [u8; BLOCK]) {
        // Plain int4 rows pack columns 2c, 2c + 1 in one byte (n0 and n are even).
        let biased = |byte: u8| byte ^ 0x88; // two's-complement nibbles + 8, both at once
        let low = &plain[(kk * n + n0) / 2..][..width / 2];
        for (pair, &byte) in run.chunks_exact_mut(2).zip(low) {
            let byte = biased(byte);
            (pair[0], pair[1]) = (byte & 0x0f, byte >> 4);
        }
        if odd {
            let high = &plain[((kk + 1) * n + n0) / 2..][..width / 2];
            for (pair, &byte) in run.chunks_exact_mut(2).zip(high) {
                let byte = biased(byte);
                pair[0] |= byte << 4;
                pair[1] |= byte & 0xf0;
            }
        }
    }
}

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
    // Blocks of 64 rows of W (columns of the plain codes) on up to `threads` threads;
    // each 64 × 64 block of codes is transposed through byte runs.
    let rows_of = |unit: usize| (n - unit * BLOCK).min(BLOCK);
    for_each_unit(
        &mut weight,
        n.div_ceil(BLOCK),
        |unit| rows_of(unit) * row_bytes,
        threads,
        |unit, dst| {
            let (n0, width) = (unit * BLOCK, rows_of(unit));
            let mut runs = [[0u8; BLOCK]; BLOCK / 2];
            for k0 in (0..k).step_by(BLOCK) {
                let height = (k - k0).min(BLOCK).div_ceil(2);
                for (b, run) in runs[..height].iter_mut().enumerate() {
                    let kk = k0 + 2 * b;
                    pair_codes(&plain, n, kk, n0, width, kk + 1 < k, run);
                }
                scatter_columns(&runs[..height], width, dst, |j| j * row_bytes + k0 / 2);
            }
        },
    );
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
        // Whole and partial 64 × 64 blocks, odd k (Volta), several threads.
        for (dtype, arch, gs, k, n) in [
            (1u32, 80, -1, 128usize, 32usize),
            (2, 70, 64, 128, 32),
            (0, 90, 128, 128, 32),
            (1, 80, 64, 192, 144),
            (1, 70, -1, 71, 80),
            (2, 70, 64, 130, 16),
        ] {
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
            let data = paddle_to_q4(&scheme, &q, &s, 1 + n / 64).unwrap();
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
            if k % 2 == 1 {
                for col in 0..n {
                    let last = data.weight[col * data.shape.row_bytes() + k / 2];
                    assert_eq!(last >> 4, 0, "unused high nibble of row {col}");
                }
            }
        }
    }
}
