//! q4vk's own Q4 format on the CPU: the canonical packed matrix every GPU upload starts
//! from, and the quantizer that turns float weights into it.
//!
//! Layout (`q4vk_matrix_desc` in `include/q4vk.h`): rows of W, `[n][ceil(k/2)]` bytes, element k even in the low nibble,
//! unsigned nibbles `u`; scales `[n][groups]` (f16, or f32 for Q4 input with f32 scales);
//! zero points `[n][groups]` bytes 0..15. Symmetric `w = (u - 8) * s`, else `w = (u - z) * s`.
//!
//! Decisions the contract leaves open, fixed here:
//! * K not a multiple of the group size: the last group of a row is shorter
//!   (`groups = ceil(k / group_size)`); per channel is one group spanning all of K.
//! * Odd K: a row has `ceil(k/2)` bytes; the high nibble of its last byte is 0 and unused.
//! * With zero points, `max` and `min` of a group include 0 (`max = max(x, 0)`,
//!   `min = min(x, 0)`), so that `z = round(-min/s)` lies in 0..15 and no code clamps at
//!   the far end of a group that does not straddle 0 (GPTQ's convention).
//! * A scale that rounds to 0 in f16 (an all-zero group, or one below f16's range) makes
//!   every code of the group decode to 0: `u = 8` (symmetric) or `u = z = 0`.
//! * A scale beyond f16's range (|x| > ~458,000) is refused (`InvalidArgument`).

use super::codes::round_half_away;
use super::dtype::{with_element, Dtype, Element};
use crate::alloc;
use crate::error::{invalid, Error, Result};
use crate::simd::multiversion;
use std::borrow::Cow;

/// Shape and scheme of a Q4 matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Q4Shape {
    /// Output features (rows of W).
    pub n: usize,
    /// Input features.
    pub k: usize,
    /// K indices per scale group (K itself when per channel).
    pub group_size: usize,
    /// One group spanning all of K.
    pub per_channel: bool,
    /// Per-group zero points (else symmetric around 8).
    pub zero_points: bool,
}

impl Q4Shape {
    /// Validates the C-level parameters: n, k ≥ 1, group size -1/32/64/128/256, zero
    /// points 0/1, and sizes that fit this platform: the f32 weight with k rounded up to a
    /// multiple of 32 (`n·k'·4` bytes), which bounds every layout's bytes too (a row of
    /// codes takes 16 bytes per 32 columns begun).
    pub fn new(n: u64, k: u64, group_size: i32, zero_points: u32) -> Result<Q4Shape> {
        if n == 0 || k == 0 {
            return Err(invalid!(
                "desc->n and desc->k must be at least 1 (n = {n}, k = {k})"
            ));
        }
        if !matches!(group_size, -1 | 32 | 64 | 128 | 256) {
            return Err(invalid!(
                "desc->group_size is {group_size}; expected -1 (per channel), 32, 64, 128 or 256"
            ));
        }
        if zero_points > 1 {
            return Err(invalid!(
                "desc->zero_points is {zero_points}; expected 0 or 1"
            ));
        }
        let too_big = || invalid!("desc->n * desc->k = {n} * {k} overflows this platform's size_t");
        let n = usize::try_from(n).map_err(|_| too_big())?;
        let k = usize::try_from(k).map_err(|_| too_big())?;
        k.checked_next_multiple_of(32)
            .and_then(|k| k.checked_mul(n))
            .and_then(|e| e.checked_mul(4))
            .ok_or_else(too_big)?;
        let per_channel = group_size == -1;
        Ok(Q4Shape {
            n,
            k,
            group_size: if per_channel { k } else { group_size as usize },
            per_channel,
            zero_points: zero_points == 1,
        })
    }

    /// Scale groups per row.
    pub fn groups(&self) -> usize {
        self.k.div_ceil(self.group_size)
    }

    /// Packed bytes per row: `ceil(k/2)`.
    pub fn row_bytes(&self) -> usize {
        self.k.div_ceil(2)
    }

    /// Bytes of the packed weight.
    pub fn weight_bytes(&self) -> usize {
        self.n * self.row_bytes()
    }

    /// Number of scales (and of zero points when present).
    pub fn scale_count(&self) -> usize {
        self.n * self.groups()
    }

    /// Bytes of the zero points (0 when symmetric).
    pub fn zeros_bytes(&self) -> usize {
        if self.zero_points {
            self.scale_count()
        } else {
            0
        }
    }
}

/// Element type of Q4 scales.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleType {
    /// IEEE binary16 (what the quantizer writes).
    F16,
    /// IEEE binary32.
    F32,
}

impl ScaleType {
    /// Bytes per scale.
    pub fn size(self) -> usize {
        match self {
            ScaleType::F16 => 2,
            ScaleType::F32 => 4,
        }
    }
}

/// A Q4 matrix in host memory: packed nibbles, little-endian scales and zero points,
/// borrowed from the caller or owned after a conversion.
#[derive(Debug, Clone)]
pub struct Q4Data<'a> {
    /// Shape and scheme.
    pub shape: Q4Shape,
    /// `[n][ceil(k/2)]` packed nibbles.
    pub weight: Cow<'a, [u8]>,
    /// Type of `scales`.
    pub scale_type: ScaleType,
    /// `[n][groups]` scales.
    pub scales: Cow<'a, [u8]>,
    /// `[n][groups]` zero points 0..15 (empty when symmetric).
    pub zeros: Cow<'a, [u8]>,
}

impl Q4Data<'_> {
    /// Scale `i` (row-major `[n][groups]`) as f32.
    #[inline]
    pub fn scale(&self, i: usize) -> f32 {
        match self.scale_type {
            ScaleType::F16 => {
                half::f16::from_le_bytes([self.scales[2 * i], self.scales[2 * i + 1]]).to_f32()
            }
            ScaleType::F32 => f32::from_le_bytes(self.scales[4 * i..4 * i + 4].try_into().unwrap()),
        }
    }

    /// Zero point of scale group `i` (8 when symmetric).
    #[inline]
    pub fn zero(&self, i: usize) -> u8 {
        if self.shape.zero_points {
            self.zeros[i]
        } else {
            8
        }
    }

    /// Code `u` of element `(row, kk)`.
    #[inline]
    pub fn code(&self, row: usize, kk: usize) -> u8 {
        let byte = self.weight[row * self.shape.row_bytes() + kk / 2];
        if kk.is_multiple_of(2) {
            byte & 0x0f
        } else {
            byte >> 4
        }
    }

    /// Checks what a caller-supplied Q4 matrix must satisfy beyond its sizes: finite
    /// scales and zero points in 0..15.
    pub fn validate(&self) -> Result<()> {
        for i in 0..self.shape.scale_count() {
            if !self.scale(i).is_finite() {
                return Err(Error::NonFinite(format!(
                    "scale {i} (row {}, group {}) is not finite",
                    i / self.shape.groups(),
                    i % self.shape.groups()
                )));
            }
        }
        if let Some(i) = self.zeros.iter().position(|&z| z > 15) {
            return Err(invalid!(
                "zero point {i} is {}; zero points are 0..15",
                self.zeros[i]
            ));
        }
        Ok(())
    }
}

/// Float weights to quantize: `[n][k]` or, `transposed`, `[k][n]`, of `dtype`.
#[derive(Debug, Clone, Copy)]
pub struct FloatWeights<'a> {
    /// Element type.
    pub dtype: Dtype,
    /// `[k][n]` (Paddle) instead of `[n][k]` (nn.Linear).
    pub transposed: bool,
    /// Little-endian elements, exactly `n·k·dtype.size()` bytes.
    pub bytes: &'a [u8],
}

/// Outputs of [`quantize`]: exactly `weight_bytes()`, `2·scale_count()` and `zeros_bytes()`.
pub struct Q4Out<'a> {
    /// Packed nibbles.
    pub weight: &'a mut [u8],
    /// f16 scales.
    pub scales: &'a mut [u8],
    /// Zero points (empty when symmetric).
    pub zeros: &'a mut [u8],
}

multiversion! {
    /// The largest magnitude bit pattern in `bytes` (a fold without early exit, so it
    /// vectorizes).
    fn max_magnitude<E: Element>(bytes: &[u8]) -> u32 {
        bytes
            .chunks_exact(E::SIZE)
            .fold(0, |m, b| m.max(E::load(b) & E::MAGNITUDE))
    }
}

fn check_finite<E: Element>(bytes: &[u8], n: usize, k: usize, transposed: bool) -> Result<()> {
    if max_magnitude::<E>(bytes) < E::INFINITY {
        return Ok(());
    }
    let bad = bytes
        .chunks_exact(E::SIZE)
        .position(|b| E::load(b) & E::MAGNITUDE >= E::INFINITY);
    match bad {
        None => Ok(()),
        Some(i) => {
            let (row, col) = if transposed {
                (i % n, i / n)
            } else {
                (i / k, i % k)
            };
            Err(Error::NonFinite(format!(
                "weight element {i} (n = {row}, k = {col}) is NaN or Inf"
            )))
        }
    }
}

/// Rows widened together from a transposed (`[k][n]`) weight, so that each k reads one
/// contiguous run of the input instead of one element a row apart.
const ROW_BLOCK: usize = 32;

/// Widens rows `row0..row0 + count` of W to f32 into `out`: row r at `r * stride`.
fn widen_rows<E: Element>(
    w: &FloatWeights,
    shape: &Q4Shape,
    row0: usize,
    count: usize,
    stride: usize,
    out: &mut [f32],
) {
    if !w.transposed {
        widen_plain::<E>(w, shape, row0, count, stride, out);
        return;
    }
    #[allow(unused_mut)] // assigned only on x86-64
    let (mut rows, mut ks) = (0, 0);
    #[cfg(target_arch = "x86_64")]
    if crate::simd::has_avx2() {
        // SAFETY: the CPU supports AVX2, FMA and F16C; the kernel checks its bounds.
        (rows, ks) = unsafe {
            super::q4_x86::widen_transposed_avx2::<E>(
                w.bytes,
                (shape.n, shape.k),
                row0,
                count,
                stride,
                out,
            )
        };
    }
    // What the kernel left: the last k of its rows, then the remaining rows entirely.
    widen_transposed::<E>(w, shape, row0, 0..rows, ks..shape.k, stride, out);
    widen_transposed::<E>(w, shape, row0, rows..count, 0..shape.k, stride, out);
}

multiversion! {
    /// [`widen_rows`] of a `[n][k]` weight.
    fn widen_plain<E: Element>(w: &FloatWeights, shape: &Q4Shape, row0: usize, count: usize, stride: usize, out: &mut [f32]) {
        let k = shape.k;
        for (r, row) in out.chunks_mut(stride).take(count).enumerate() {
            let src = &w.bytes[(row0 + r) * k * E::SIZE..][..k * E::SIZE];
            for (v, x) in row.iter_mut().zip(src.chunks_exact(E::SIZE)) {
                *v = E::widen(E::load(x));
            }
        }
    }
}

/// [`widen_rows`] of a `[k][n]` weight, one element at a time, for block rows `rows` and
/// k in `ks`.
fn widen_transposed<E: Element>(
    w: &FloatWeights,
    shape: &Q4Shape,
    row0: usize,
    rows: std::ops::Range<usize>,
    ks: std::ops::Range<usize>,
    stride: usize,
    out: &mut [f32],
) {
    if rows.is_empty() {
        return;
    }
    for kk in ks {
        let run = &w.bytes[(kk * shape.n + row0 + rows.start) * E::SIZE..][..rows.len() * E::SIZE];
        for (r, x) in rows.clone().zip(run.chunks_exact(E::SIZE)) {
            out[r * stride + kk] = E::widen(E::load(x));
        }
    }
}

/// `(min(0, values), max(0, values))` of finite values (the sign of a zero result may
/// depend on the path; nothing downstream observes it).
fn range(values: &[f32]) -> (f32, f32) {
    #[cfg(target_arch = "x86_64")]
    if crate::simd::has_avx2() {
        // SAFETY: the CPU supports AVX2.
        return unsafe { super::q4_x86::range_avx2(values) };
    }
    values
        .iter()
        .fold((0.0f32, 0.0f32), |(lo, hi), &v| (lo.min(v), hi.max(v)))
}

multiversion! {
    /// The portable path of [`group_codes`].
    fn group_codes_portable<>(values: &[f32], s: f32, offset: i32, codes: &mut [u8]) {
        for (c, &v) in codes.iter_mut().zip(values) {
            // Beyond ±32.5 every code clamps the same way; bounding keeps the conversion
            // to int exact.
            let ratio = (v / s).clamp(-32.5, 32.5);
            *c = (round_half_away(ratio) + offset).clamp(0, 15) as u8;
        }
    }
}

/// `codes[i] = clamp(round(values[i] / s) + offset, 0, 15)`, C `round` (half away from
/// zero) of the f32 quotient; offset is 8 (symmetric) or the zero point. AVX-512 where
/// the CPU has it (the same bytes).
fn group_codes(values: &[f32], s: f32, offset: i32, codes: &mut [u8]) {
    #[allow(unused_mut)] // assigned only on x86-64
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if crate::simd::has_avx512() {
        // SAFETY: the CPU supports AVX-512 F/BW/VL; the kernel stays inside both slices.
        done = unsafe { super::q4_x86::group_codes_avx512(values, s, offset, codes) };
    }
    group_codes_portable(&values[done..], s, offset, &mut codes[done..]);
}

multiversion! {
    /// `dst[i] = codes[2i] | codes[2i + 1] << 4`.
    fn pack_nibbles<>(codes: &[u8], dst: &mut [u8]) {
        for (b, pair) in dst.iter_mut().zip(codes.chunks_exact(2)) {
            *b = pair[0] | (pair[1] << 4);
        }
    }
}

/// Quantizes one group: returns (f16 scale bits, zero point) and writes codes to `codes`.
fn quantize_group(values: &[f32], zero_points: bool, codes: &mut [u8]) -> Result<(u16, u8)> {
    let (lo, hi) = range(values);
    let raw = if zero_points {
        (hi - lo) / 15.0
    } else {
        lo.abs().max(hi) / 7.0
    };
    let scale = half::f16::from_f32(raw);
    if !scale.is_finite() {
        return Err(invalid!(
            "a group's range ({lo} .. {hi}) needs a scale beyond f16's range"
        ));
    }
    let s = scale.to_f32();
    if s == 0.0 {
        codes.fill(if zero_points { 0 } else { 8 });
        return Ok((scale.to_bits(), 0));
    }
    if zero_points {
        let z = (-lo / s).round().clamp(0.0, 15.0);
        group_codes(values, s, z as i32, codes);
        Ok((scale.to_bits(), z as u8))
    } else {
        group_codes(values, s, 8, codes);
        Ok((scale.to_bits(), 0))
    }
}

fn quantize_rows<E: Element>(
    w: &FloatWeights,
    shape: &Q4Shape,
    first_row: usize,
    out: Q4Out,
) -> Result<()> {
    let (k, groups, gs) = (shape.k, shape.groups(), shape.group_size);
    let block = if w.transposed { ROW_BLOCK } else { 1 };
    // Rows one cache line more than k apart, so that the column-wise writes of a
    // transposed block do not all fall into the same cache set.
    let stride = k + 16;
    let mut values = alloc::filled::<f32>(block * stride, "rows of weights")?;
    let mut codes = alloc::filled::<u8>(k + 1, "a row of codes")?;
    let rows = out.weight.len() / shape.row_bytes();
    for r0 in (0..rows).step_by(block) {
        let count = block.min(rows - r0);
        widen_rows::<E>(w, shape, first_row + r0, count, stride, &mut values);
        for (r, values) in (r0..r0 + count).zip(values.chunks(stride)) {
            let values = &values[..k];
            for g in 0..groups {
                let range = g * gs..((g + 1) * gs).min(k);
                let (s, z) =
                    quantize_group(&values[range.clone()], shape.zero_points, &mut codes[range])?;
                let i = r * groups + g;
                out.scales[2 * i..2 * i + 2].copy_from_slice(&s.to_le_bytes());
                if shape.zero_points {
                    out.zeros[i] = z;
                }
            }
            codes[k] = 0;
            let dst = &mut out.weight[r * shape.row_bytes()..(r + 1) * shape.row_bytes()];
            pack_nibbles(&codes, dst);
        }
    }
    Ok(())
}

/// Quantizes float weights to the Q4 format (see the module docs for the exact math) over
/// up to `threads` threads. NaN/Inf anywhere: `NonFinite`, and nothing is written.
pub fn quantize(shape: &Q4Shape, w: &FloatWeights, out: Q4Out, threads: usize) -> Result<()> {
    let expected = shape.n * shape.k * w.dtype.size();
    if w.bytes.len() != expected || out.weight.len() != shape.weight_bytes() {
        return Err(Error::Internal(
            "q4::quantize: buffer sizes do not match the shape".into(),
        ));
    }
    with_element!(w.dtype, E => check_finite::<E>(w.bytes, shape.n, shape.k, w.transposed))?;
    // Quantize into scratch first, so a refused group leaves the caller's buffers untouched.
    let mut weight = alloc::filled::<u8>(out.weight.len(), "quantized weights")?;
    let mut scales = alloc::filled::<u8>(out.scales.len(), "scales")?;
    let mut zeros = alloc::filled::<u8>(out.zeros.len(), "zero points")?;
    let threads = threads.clamp(1, shape.n);
    let per = shape.n.div_ceil(threads);
    let (rb, sb, zb) = (
        shape.row_bytes(),
        2 * shape.groups(),
        shape.zeros_bytes() / shape.n,
    );
    let results: Vec<Result<()>> = std::thread::scope(|scope| {
        let mut handles = Vec::new();
        let (mut wr, mut sr, mut zr) = (&mut weight[..], &mut scales[..], &mut zeros[..]);
        let mut first = 0;
        while first < shape.n {
            let rows = per.min(shape.n - first);
            let (w0, w1) = std::mem::take(&mut wr).split_at_mut(rows * rb);
            let (s0, s1) = std::mem::take(&mut sr).split_at_mut(rows * sb);
            let (z0, z1) = std::mem::take(&mut zr).split_at_mut(rows * zb);
            (wr, sr, zr) = (w1, s1, z1);
            let part = Q4Out {
                weight: w0,
                scales: s0,
                zeros: z0,
            };
            let start = first;
            handles.push(crate::parallel::spawn_or_run(
                scope,
                move || with_element!(w.dtype, E => quantize_rows::<E>(w, shape, start, part)),
            ));
            first += rows;
        }
        handles.into_iter().map(|h| h.join()).collect()
    });
    results.into_iter().collect::<Result<Vec<()>>>()?;
    out.weight.copy_from_slice(&weight);
    out.scales.copy_from_slice(&scales);
    out.zeros.copy_from_slice(&zeros);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::dtype::F16;

    /// The contract's formula, written directly in f64 where it is exact.
    fn direct(values: &[f32], zero_points: bool) -> (f32, u8, Vec<u8>) {
        let lo = values.iter().fold(0.0f32, |a, &v| a.min(v));
        let hi = values.iter().fold(0.0f32, |a, &v| a.max(v));
        let s = if zero_points {
            half::f16::from_f32((hi - lo) / 15.0).to_f32()
        } else {
            half::f16::from_f32(lo.abs().max(hi) / 7.0).to_f32()
        };
        let round = |v: f32| {
            let a = v.abs().floor() + if v.abs().fract() >= 0.5 { 1.0 } else { 0.0 };
            a.copysign(v)
        };
        if s == 0.0 {
            let u = if zero_points { 0 } else { 8 };
            return (0.0, 0, vec![u; values.len()]);
        }
        if zero_points {
            let z = round(-lo / s).clamp(0.0, 15.0);
            let codes = values
                .iter()
                .map(|&v| (round(v / s) + z).clamp(0.0, 15.0) as u8)
                .collect();
            (s, z as u8, codes)
        } else {
            let codes = values
                .iter()
                .map(|&v| (round(v / s).clamp(-8.0, 7.0) + 8.0) as u8)
                .collect();
            (s, 0, codes)
        }
    }

    fn lcg(seed: &mut u64) -> f32 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((*seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    #[test]
    fn matches_direct_formula_all_schemes() {
        let mut seed = 7u64;
        for &(n, k) in &[(3usize, 32usize), (5, 100), (2, 257), (4, 1)] {
            for &gs in &[-1i32, 32, 64, 128, 256] {
                for zp in 0..2u32 {
                    for transposed in [false, true] {
                        let shape = Q4Shape::new(n as u64, k as u64, gs, zp).unwrap();
                        let mut vals: Vec<f32> = (0..n * k).map(|_| lcg(&mut seed) * 3.0).collect();
                        vals[0] = 0.5; // a tie candidate
                        if k >= 64 {
                            for v in &mut vals[k..k + 32] {
                                *v = 0.0; // an all-zero group in row 1 (when not transposed)
                            }
                        }
                        let nk: Vec<f32> = vals.clone();
                        let stored: Vec<f32> = if transposed {
                            (0..k * n).map(|i| nk[(i % n) * k + i / n]).collect()
                        } else {
                            nk.clone()
                        };
                        let bytes: Vec<u8> = stored.iter().flat_map(|v| v.to_le_bytes()).collect();
                        let w = FloatWeights {
                            dtype: Dtype::F32,
                            transposed,
                            bytes: &bytes,
                        };
                        let mut qw = vec![0xAAu8; shape.weight_bytes()];
                        let mut qs = vec![0u8; 2 * shape.scale_count()];
                        let mut qz = vec![0u8; shape.zeros_bytes()];
                        let out = Q4Out {
                            weight: &mut qw,
                            scales: &mut qs,
                            zeros: &mut qz,
                        };
                        quantize(&shape, &w, out, 3).unwrap();
                        let data = Q4Data {
                            shape,
                            weight: Cow::Borrowed(&qw),
                            scale_type: ScaleType::F16,
                            scales: Cow::Borrowed(&qs),
                            zeros: Cow::Borrowed(&qz),
                        };
                        for row in 0..n {
                            for g in 0..shape.groups() {
                                let r = g * shape.group_size..((g + 1) * shape.group_size).min(k);
                                let (s, z, codes) = direct(&nk[row * k..][r.clone()], zp == 1);
                                let i = row * shape.groups() + g;
                                assert_eq!(data.scale(i), s);
                                if zp == 1 {
                                    assert_eq!(data.zero(i), z);
                                }
                                for (j, kk) in r.enumerate() {
                                    assert_eq!(
                                        data.code(row, kk),
                                        codes[j],
                                        "n{n} k{k} g{gs} zp{zp} t{transposed} row {row} k {kk}"
                                    );
                                }
                            }
                            if k % 2 == 1 {
                                assert_eq!(qw[row * shape.row_bytes() + k / 2] >> 4, 0);
                            }
                        }
                    }
                }
            }
        }
    }

    /// Quantizes `nk` (`[n][k]` values, already representable in `dtype`) stored as
    /// `dtype`, `[n][k]` or transposed, and compares every scale, zero point and code with
    /// [`direct`].
    fn check_against_direct(
        shape: Q4Shape,
        nk: &[f32],
        dtype: Dtype,
        transposed: bool,
        threads: usize,
    ) {
        let (n, k) = (shape.n, shape.k);
        let stored: Vec<f32> = if transposed {
            (0..k * n).map(|i| nk[(i % n) * k + i / n]).collect()
        } else {
            nk.to_vec()
        };
        let mut bytes = vec![0u8; n * k * dtype.size()];
        for (i, &v) in stored.iter().enumerate() {
            dtype.put_bits(&mut bytes, i, dtype.from_f32(v));
        }
        let w = FloatWeights {
            dtype,
            transposed,
            bytes: &bytes,
        };
        let mut qw = vec![0xAAu8; shape.weight_bytes()];
        let mut qs = vec![0u8; 2 * shape.scale_count()];
        let mut qz = vec![0u8; shape.zeros_bytes()];
        let out = Q4Out {
            weight: &mut qw,
            scales: &mut qs,
            zeros: &mut qz,
        };
        quantize(&shape, &w, out, threads).unwrap();
        let data = Q4Data {
            shape,
            weight: Cow::Borrowed(&qw),
            scale_type: ScaleType::F16,
            scales: Cow::Borrowed(&qs),
            zeros: Cow::Borrowed(&qz),
        };
        let what = format!(
            "n{n} k{k} g{} zp{} t{transposed} {dtype:?} threads {threads}",
            shape.group_size, shape.zero_points
        );
        for row in 0..n {
            for g in 0..shape.groups() {
                let r = g * shape.group_size..((g + 1) * shape.group_size).min(k);
                let (s, z, codes) = direct(&nk[row * k..][r.clone()], shape.zero_points);
                let i = row * shape.groups() + g;
                assert_eq!(data.scale(i), s, "{what} scale {i}");
                if shape.zero_points {
                    assert_eq!(data.zero(i), z, "{what} zero {i}");
                }
                for (j, kk) in r.enumerate() {
                    assert_eq!(data.code(row, kk), codes[j], "{what} row {row} k {kk}");
                }
            }
        }
    }

    /// Wide shapes (several row blocks of a transposed weight, partial last blocks, thread
    /// splits inside a block), every tail of the 8-lane loops, exact ties `(j + 0.5) · s`,
    /// subnormal and zero groups, in f16, bf16 and f32.
    #[test]
    fn matches_direct_formula_on_ties_and_wide_shapes() {
        let mut seed = 11u64;
        for &(n, k) in &[(33usize, 31usize), (70, 64), (37, 130), (65, 257), (40, 8)] {
            for &gs in &[-1i32, 32, 128] {
                for zp in 0..2u32 {
                    for dtype in [Dtype::F16, Dtype::Bf16, Dtype::F32] {
                        let shape = Q4Shape::new(n as u64, k as u64, gs, zp).unwrap();
                        let mut vals = vec![0.0f32; n * k];
                        for row in 0..n {
                            for g in 0..shape.groups() {
                                let r = g * shape.group_size..((g + 1) * shape.group_size).min(k);
                                // A scale representable in f16 (sometimes subnormal or 0).
                                let s0 = match lcg(&mut seed).abs() {
                                    x if x < 0.05 => 0.0,
                                    x if x < 0.15 => {
                                        half::f16::from_bits((x * 1e4) as u16 % 1023 + 1).to_f32()
                                    }
                                    x => half::f16::from_f32(x * 0.3).to_f32(),
                                };
                                for (j, kk) in r.clone().enumerate() {
                                    let t = lcg(&mut seed);
                                    let v = if j == 0 {
                                        7.0 * s0 // sets the group's scale to s0 exactly (symmetric)
                                    } else if t.abs() < 0.6 {
                                        ((t * 12.0).round() + 0.5) * s0 // an exact tie when representable
                                    } else {
                                        t * 7.0 * s0
                                    };
                                    vals[row * k + kk] = v;
                                }
                            }
                        }
                        // Values as stored in dtype (the reference sees what the quantizer sees).
                        for v in &mut vals {
                            *v = match dtype {
                                Dtype::F16 => half::f16::from_f32(*v).to_f32(),
                                Dtype::Bf16 => half::bf16::from_f32(*v).to_f32(),
                                Dtype::F32 => *v,
                            };
                        }
                        for transposed in [false, true] {
                            let threads = 1 + (n + k) % 3;
                            check_against_direct(shape, &vals, dtype, transposed, threads);
                        }
                    }
                }
            }
        }
    }

    /// Widening a block of a transposed weight (8 × 8 AVX2 blocks plus the element loop
    /// for the rest) puts every element where the element loop alone puts it, for every
    /// remainder of rows and k modulo 8; and the group range equals a plain fold.
    #[test]
    fn transposed_widening_and_range_match_element_loops() {
        let mut seed = 5u64;
        for &(n, k) in &[(40usize, 24usize), (41, 29), (70, 15), (9, 7), (16, 64)] {
            let bytes: Vec<u8> = (0..n * k)
                .flat_map(|_| half::f16::from_f32(lcg(&mut seed)).to_le_bytes())
                .collect();
            let shape = Q4Shape::new(n as u64, k as u64, -1, 0).unwrap();
            let w = FloatWeights {
                dtype: Dtype::F16,
                transposed: true,
                bytes: &bytes,
            };
            let stride = k + 16;
            for row0 in [0, 1, 8] {
                for count in 1..=(n - row0).min(ROW_BLOCK) {
                    let mut out = vec![f32::NAN; ROW_BLOCK * stride];
                    widen_rows::<F16>(&w, &shape, row0, count, stride, &mut out);
                    let mut want = vec![f32::NAN; ROW_BLOCK * stride];
                    widen_transposed::<F16>(&w, &shape, row0, 0..count, 0..k, stride, &mut want);
                    let same = out
                        .iter()
                        .zip(&want)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "n {n} k {k} row0 {row0} count {count}");
                    for r in 0..count {
                        let values = &out[r * stride..r * stride + k];
                        for len in 0..=k {
                            let (lo, hi) = range(&values[..len]);
                            let want = values[..len]
                                .iter()
                                .fold((0.0f32, 0.0f32), |(l, h), &v| (l.min(v), h.max(v)));
                            assert_eq!((lo, hi), want, "range of {len}");
                        }
                    }
                }
            }
        }
    }

    /// The group-code kernel (AVX-512 where present) equals the portable loop for every
    /// tail length of its 16-lane vectors, on exact ties `(j + 0.5) · s`, values beyond
    /// the clamps, f32 subnormals and zeros, f16 subnormal scales, and every offset.
    #[test]
    fn group_codes_kernel_matches_portable_loop() {
        let mut seed = 99u64;
        let mut checked = 0;
        for len in 0..=70 {
            for trial in 0..60 {
                let s = match trial % 4 {
                    0 => half::f16::from_bits(1 + (lcg(&mut seed).abs() * 1000.0) as u16).to_f32(),
                    _ => half::f16::from_f32(lcg(&mut seed).abs() * 2.0 + 1e-3).to_f32(),
                };
                let values: Vec<f32> = (0..len)
                    .map(|_| {
                        let t = lcg(&mut seed);
                        match (t.abs() * 8.0) as u32 {
                            0..=2 => ((t * 20.0).round() + 0.5) * s, // ties (exact when representable)
                            3 => t * 1e6 * s,                        // far beyond the clamps
                            4 => f32::from_bits((t.abs() * 8e6) as u32) * t.signum(), // subnormal
                            5 => [0.0, -0.0][(t < 0.0) as usize],
                            _ => t * 16.0 * s,
                        }
                    })
                    .collect();
                let offset = trial % 16;
                let (mut got, mut want) = (vec![0xAAu8; len], vec![0x55u8; len]);
                group_codes(&values, s, offset, &mut got);
                group_codes_portable(&values, s, offset, &mut want);
                assert_eq!(got, want, "len {len} trial {trial} s {s}");
                checked += len;
            }
        }
        assert!(checked > 100_000);
    }

    #[test]
    fn rejects_non_finite_without_writing() {
        let shape = Q4Shape::new(2, 4, -1, 0).unwrap();
        let mut vals = [1.0f32; 8];
        vals[6] = f32::NAN;
        let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        let w = FloatWeights {
            dtype: Dtype::F32,
            transposed: false,
            bytes: &bytes,
        };
        let (mut qw, mut qs) = (vec![0x55u8; 4], vec![0x55u8; 4]);
        let out = Q4Out {
            weight: &mut qw,
            scales: &mut qs,
            zeros: &mut [],
        };
        let e = quantize(&shape, &w, out, 1).unwrap_err();
        assert!(
            matches!(e, Error::NonFinite(ref m) if m.contains("n = 1, k = 2")),
            "{e}"
        );
        assert_eq!(qw, [0x55; 4]);
    }

    #[test]
    fn rejects_bad_params() {
        assert!(Q4Shape::new(0, 4, -1, 0).is_err());
        assert!(Q4Shape::new(4, 4, 16, 0).is_err());
        assert!(Q4Shape::new(4, 4, 32, 2).is_err());
        assert_eq!(Q4Shape::new(4, 100, 32, 1).unwrap().groups(), 4);
    }

    /// Short rows take 16 bytes of codes per 32 columns begun: the size bound counts k
    /// rounded up to 32, so that no layout's byte count wraps where n·k·4 alone fits.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn the_size_bound_counts_short_rows_as_32_columns() {
        assert!(Q4Shape::new(1 << 60, 1, -1, 0).is_err());
        assert!(Q4Shape::new(1 << 58, 31, -1, 0).is_err());
        let shape = Q4Shape::new(1 << 56, 1, -1, 0).unwrap();
        assert_eq!(
            (16 * shape.k.div_ceil(32)).checked_mul(shape.n),
            Some(1 << 60)
        );
    }
}
