//! Paddle-compatible weight-only quantization, byte-identical to the CPU kernel of
//! `paddle.nn.quant.weight_quantize` (Paddle 3.3.1) for finite f16/bf16 input:
//!
//! * scale `s = T(a / B)` with B = 7 (int4) or 127 (int8), `a` the column's (per channel)
//!   or group's largest magnitude, computed in f32 and rounded to the weight type T;
//! * code `q = clamp(round_half_away(x / s))` with an f32 division by the T-rounded scale,
//!   and Paddle's treatment of zero scales (int4 → -7, int8 → ±127 by sign, +127 for 0/0);
//! * the per-channel maximum of an all-zero column keeps the sign of `x[0][n]` (-0.0 scale).
//!
//! f32 input is a q4vk extension: the same math with an f32 scale.

use super::codes::{quantize_row, reciprocal, Divisors};
use super::dtype::{with_element, Dtype, Element};
use crate::alloc;
use crate::error::{invalid, Error, Result};
use crate::layout::paddle::{for_each_rows, Arrangement, Bits, PaddleGeometry};
use crate::layout::tile::CodeTile;
use crate::parallel::for_each_unit;
use crate::simd::multiversion;

/// A validated Paddle quantization problem: algorithm, types, layout and shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PaddleScheme {
    /// Weight (and scale) element type.
    pub dtype: Dtype,
    /// Code width and byte layout.
    pub geometry: PaddleGeometry,
    /// Rows of K per scale group (K itself when per channel).
    pub group_rows: usize,
    /// Whether one scale spans all of K (group_size = -1).
    pub per_channel: bool,
}

/// The raw C-level parameters of a Paddle quantization call.
#[derive(Debug, Clone, Copy)]
pub struct PaddleParams {
    /// `Q4VK_ALGO_*`.
    pub algo: u32,
    /// `Q4VK_DTYPE_*`.
    pub dtype: u32,
    /// Paddle's `arch`.
    pub arch: i32,
    /// -1, 64 or 128.
    pub group_size: i32,
    /// Input features.
    pub k: u64,
    /// Output features.
    pub n: u64,
}

impl PaddleScheme {
    /// Validates the parameters the way Paddle does, and additionally refuses the shapes
    /// Paddle accepts but mishandles (K % 64 != 0 for arch ≥ 75) and sizes that overflow.
    pub fn new(p: PaddleParams) -> Result<PaddleScheme> {
        let bits = match p.algo {
            0 => Bits::Int8,
            1 => Bits::Int4,
            other => {
                return Err(invalid!(
                    "desc->algo is {other}; expected Q4VK_ALGO_WEIGHT_ONLY_INT8 (0) or Q4VK_ALGO_WEIGHT_ONLY_INT4 (1)"
                ))
            }
        };
        let dtype = Dtype::from_c(p.dtype, "desc->dtype")?;
        let arrangement = match p.arch {
            70 => Arrangement::Volta,
            75 | 80 | 86 | 89 | 90 | 100 => Arrangement::Cutlass,
            other => {
                return Err(invalid!(
                    "desc->arch is {other}; Paddle supports 70, 75, 80, 86, 89, 90 and 100"
                ))
            }
        };
        if !matches!(p.group_size, -1 | 64 | 128) {
            return Err(invalid!(
                "desc->group_size is {}; expected -1 (per channel), 64 or 128",
                p.group_size
            ));
        }
        if p.k == 0 || p.n == 0 {
            return Err(invalid!(
                "desc->k and desc->n must be at least 1 (k = {}, n = {})",
                p.k,
                p.n
            ));
        }
        if !p.n.is_multiple_of(16) {
            return Err(invalid!(
                "desc->n is {}; Paddle's layouts need n % 16 == 0",
                p.n
            ));
        }
        if arrangement == Arrangement::Cutlass && !p.k.is_multiple_of(64) {
            return Err(invalid!(
                "desc->k is {}; arch {} (CUTLASS layout) needs k % 64 == 0 (Paddle itself corrupts memory here)",
                p.k,
                p.arch
            ));
        }
        let too_big = || {
            invalid!(
                "desc->k * desc->n = {} * {} overflows this platform's size_t",
                p.k,
                p.n
            )
        };
        let k = usize::try_from(p.k).map_err(|_| too_big())?;
        let n = usize::try_from(p.n).map_err(|_| too_big())?;
        // The largest buffer is the f32 weight (or its dequantized copy): k * n * 4 bytes.
        k.checked_mul(n)
            .and_then(|e| e.checked_mul(4))
            .ok_or_else(too_big)?;
        let per_channel = p.group_size == -1;
        Ok(PaddleScheme {
            dtype,
            geometry: PaddleGeometry {
                bits,
                arrangement,
                k,
                n,
            },
            group_rows: if per_channel {
                k
            } else {
                p.group_size as usize
            },
            per_channel,
        })
    }

    /// Number of scale groups along K.
    pub fn groups(&self) -> usize {
        self.geometry.k.div_ceil(self.group_rows)
    }

    /// Bytes of the float weight `[K][N]` (also of the dequantized output).
    pub fn weight_bytes(&self) -> usize {
        self.geometry.k * self.geometry.n * self.dtype.size()
    }

    /// Bytes of the quantized weight (permuted or plain: the same size).
    pub fn qweight_bytes(&self) -> usize {
        self.geometry.bytes()
    }

    /// Bytes of the scale: `[N]` per channel, `[groups][N]` group-wise, in the weight type.
    pub fn scale_bytes(&self) -> usize {
        self.groups() * self.geometry.n * self.dtype.size()
    }

    fn bound(&self) -> f32 {
        match self.geometry.bits {
            Bits::Int4 => 7.0,
            Bits::Int8 => 127.0,
        }
    }
}

multiversion! {
    /// `maxima[i] = max(maxima[i], |row[i]|)` on magnitude bits.
    fn fold_magnitudes<E: Element>(row: &[u8], maxima: &mut [u32]) {
        for (m, x) in maxima.iter_mut().zip(row.chunks_exact(E::SIZE)) {
            *m = (*m).max(E::load(x) & E::MAGNITUDE);
        }
    }
}

/// Per column (per channel) or per (group, column): the largest magnitude bits, as the
/// first pass of quantization. Fails on NaN/Inf with the position of the first one.
fn max_magnitudes<E: Element>(s: &PaddleScheme, weight: &[u8], threads: usize) -> Result<Vec<u32>> {
    let (k, n) = (s.geometry.k, s.geometry.n);
    let row_len = n * E::SIZE;
    let scan_rows = |rows: std::ops::Range<usize>, maxima: &mut [u32]| {
        for row in weight[rows.start * row_len..rows.end * row_len].chunks_exact(row_len) {
            fold_magnitudes::<E>(row, maxima);
        }
    };
    let maxima = if s.per_channel {
        // Partial maxima over row ranges, one per thread, then merged.
        let parts = threads.min(k).max(1);
        let rows_per_part = k.div_ceil(parts);
        let mut partial = alloc::filled::<u32>(parts * n, "per-thread column maxima")?;
        for_each_unit(
            &mut partial,
            parts,
            |_| n,
            threads,
            |part, maxima| {
                let first = (part * rows_per_part).min(k);
                scan_rows(first..(first + rows_per_part).min(k), maxima)
            },
        );
        let mut merged = alloc::collect(partial[..n].iter().copied(), "column maxima")?;
        for part in partial[n..].chunks_exact(n) {
            merged
                .iter_mut()
                .zip(part)
                .for_each(|(m, &p)| *m = (*m).max(p));
        }
        merged
    } else {
        let mut maxima = alloc::filled::<u32>(s.groups() * n, "group maxima")?;
        let g = s.group_rows;
        for_each_unit(
            &mut maxima,
            s.groups(),
            |_| n,
            threads,
            |group, maxima| scan_rows(group * g..((group + 1) * g).min(k), maxima),
        );
        maxima
    };
    if maxima.iter().any(|&m| m >= E::INFINITY) {
        let (index, x) = weight
            .chunks_exact(E::SIZE)
            .enumerate()
            .find(|(_, x)| E::load(x) & E::MAGNITUDE >= E::INFINITY)
            .expect("a non-finite maximum comes from a non-finite element");
        let kind = if E::load(x) & E::MAGNITUDE == E::INFINITY {
            "Inf"
        } else {
            "NaN"
        };
        return Err(Error::NonFinite(format!(
            "weight[{}][{}] (of [k={k}][n={n}]) is {kind}; only finite weights can be quantized",
            index / n,
            index % n
        )));
    }
    Ok(maxima)
}

/// Quantizes a `[K][N]` row-major weight into Paddle's permuted qweight and its scales.
/// Buffers must have exactly the scheme's sizes. Nothing is written when the weight holds
/// NaN or Inf.
pub fn quantize(
    s: &PaddleScheme,
    weight: &[u8],
    qweight: &mut [u8],
    scale: &mut [u8],
    threads: usize,
) -> Result<()> {
    with_element!(s.dtype, E => quantize_typed::<E>(s, weight, qweight, scale, threads))
}

fn quantize_typed<E: Element>(
    s: &PaddleScheme,
    weight: &[u8],
    qweight: &mut [u8],
    scale_out: &mut [u8],
    threads: usize,
) -> Result<()> {
    let n = s.geometry.n;
    let maxima = max_magnitudes::<E>(s, weight, threads)?;
    // Scales in the weight type, and their f32 values used for the codes.
    let scale_bits = alloc::collect(
        maxima.iter().enumerate().map(|(i, &m)| {
            let a = if s.per_channel && m == 0 {
                E::widen(E::load(&weight[i * E::SIZE..])) // ±0 from row 0: Paddle's signed seed
            } else {
                E::widen(m)
            };
            s.dtype.from_f32(a / s.bound())
        }),
        "scales",
    )?;
    // The f32 values of the type-rounded scales are what the codes divide by.
    let scales = alloc::collect(scale_bits.iter().map(|&b| E::widen(b)), "scale values")?;
    let reciprocals = alloc::collect(scales.iter().map(|&s| reciprocal(s)), "scale reciprocals")?;
    let int4 = s.geometry.bits == Bits::Int4;
    let group_rows = s.group_rows;
    s.geometry
        .write_layout(qweight, threads, |tile: &mut CodeTile| {
            for r in 0..tile.rows {
                let k = tile.k0 + r;
                let first = k * n + tile.n0;
                let row = &weight[first * E::SIZE..(first + tile.cols) * E::SIZE];
                let at = (k / group_rows) * n + tile.n0;
                let row_scales = Divisors {
                    scales: &scales[at..][..tile.cols],
                    reciprocals: &reciprocals[at..][..tile.cols],
                };
                // The next row's segment is read next: one input row further on.
                quantize_row::<E>(row, row_scales, tile.row_mut(r), int4, n * E::SIZE);
            }
        });
    for (i, &bits) in scale_bits.iter().enumerate() {
        s.dtype.put_bits(scale_out, i, bits);
    }
    Ok(())
}

/// Dequantizes Paddle's permuted qweight with its scales into `[K][N]` row-major floats
/// of the weight type: `T(float(q) * float(scale))`, rounded to nearest even.
pub fn dequantize(
    s: &PaddleScheme,
    qweight: &[u8],
    scale: &[u8],
    out: &mut [u8],
    threads: usize,
) -> Result<()> {
    let (k, n, size) = (s.geometry.k, s.geometry.n, s.dtype.size());
    let scales = with_element!(s.dtype, E => alloc::collect(scale.chunks_exact(E::SIZE).map(|x| E::widen(E::load(x))), "scale values"))?;
    for_each_rows(out, k, n, n * size, threads, |tile, slice, first_row| {
        s.geometry.gather(qweight, tile);
        for r in 0..tile.rows {
            let kk = tile.k0 + r;
            let row_scales = &scales[(kk / s.group_rows) * n + tile.n0..][..tile.cols];
            let base = (kk - first_row) * n + tile.n0;
            for (c, (&q, &sc)) in tile.row(r).iter().zip(row_scales).enumerate() {
                s.dtype
                    .put_bits(slice, base + c, s.dtype.from_f32(q as f32 * sc));
            }
        }
    });
    Ok(())
}
