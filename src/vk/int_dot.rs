//! The integer dot-product GEMV (`shaders/gemv_q4.comp` built with `DOT`): what a device
//! offers of it, and x in 8-bit digits as that kernel reads it, built on the host by
//! `q4vk_gemv` (`vk::gemv::gemv_host`).
//!
//! The digits are those of the CPU context's integer path (`cpu::digits`): per row of x
//! an exponent `E` (of the power of two at or below its largest magnitude), per chunk of
//! 32 columns a scale `t` and integers `q = round(x·2^-E / t)` within `2^-23.99` of the
//! chunk's largest magnitude (chunks below about `2^-100` of the row's largest lose
//! precision: `t` is clamped to f32's smallest normal), split into three signed bytes `q = D0·2^16 + D1·2^8 + D2`.
//! Layout (uvec4 units, [`row_vectors`] per activation row): a header `(E, 0, 0, 0)`,
//! then per chunk 7 uvec4: for each digit two, the first `(even w0, odd w0, even w1,
//! odd w1)`, the second the same for words 2 and 3 of the chunk's codes (`even wj`: the
//! digits of columns `8j, 8j + 2, 8j + 4, 8j + 6`, one per byte, as the low nibbles of
//! code word `j` hold those columns; `odd wj` columns `8j + 1, …, 8j + 7`), then
//! `(t as f32 bits, Σ D0, Σ D1, Σ D2)`.

use crate::cpu::digits::{block_scale, pow2, row_exponent, split_one};
use ash::vk;
use std::ffi::CStr;

/// The extension of the packed dot products. Core in Vulkan 1.3, but q4vk's instance asks
/// for Vulkan 1.1, so the device extension is what makes them usable.
pub const EXTENSION: &CStr = ash::khr::shader_integer_dot_product::NAME;

/// Columns per chunk (one scale `t`).
const CHUNK: usize = 32;
/// uvec4 per chunk: 6 of digits, 1 of scale and digit sums.
const CHUNK_VECTORS: usize = 7;

/// Whether `physical` has [`EXTENSION`] among `available` with `shaderIntegerDotProduct`:
/// `Some(accelerated)`, `accelerated` being `integerDotProduct4x8BitPackedSignedAccelerated`
/// (the driver runs packed signed 8-bit dot products faster than their emulation).
pub fn offered(
    vki: &ash::Instance,
    physical: vk::PhysicalDevice,
    available: &[vk::ExtensionProperties],
) -> Option<bool> {
    let listed = available
        .iter()
        .any(|e| e.extension_name_as_c_str() == Ok(EXTENSION));
    if !listed {
        return None;
    }
    let mut feature = vk::PhysicalDeviceShaderIntegerDotProductFeatures::default();
    let mut features = vk::PhysicalDeviceFeatures2::default().push_next(&mut feature);
    // SAFETY: a valid physical device of this instance; the struct is its extension's.
    unsafe { vki.get_physical_device_features2(physical, &mut features) };
    if feature.shader_integer_dot_product == 0 {
        return None;
    }
    // SAFETY: as above.
    Some(unsafe { accelerated(vki, physical) })
}

/// `integerDotProduct4x8BitPackedSignedAccelerated` of `physical`.
///
/// # Safety
/// `physical` is a valid physical device of `vki`'s instance that has the extension (or
/// Vulkan 1.3).
pub unsafe fn accelerated(vki: &ash::Instance, physical: vk::PhysicalDevice) -> bool {
    let mut props = vk::PhysicalDeviceShaderIntegerDotProductProperties::default();
    let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut props);
    // SAFETY: the caller's contract.
    unsafe { vki.get_physical_device_properties2(physical, &mut props2) };
    props.integer_dot_product4x8_bit_packed_signed_accelerated != 0
}

/// The feature to chain into `VkDeviceCreateInfo`.
pub fn feature() -> vk::PhysicalDeviceShaderIntegerDotProductFeatures<'static> {
    vk::PhysicalDeviceShaderIntegerDotProductFeatures::default().shader_integer_dot_product(true)
}

/// uvec4 of one activation row of `k` columns in digits: the header and 7 per chunk.
pub fn row_vectors(k: usize) -> usize {
    1 + CHUNK_VECTORS * k.div_ceil(CHUNK)
}

/// Writes the first `m` rows of x (`k` columns each, `x.len() ≥ m·k`) in digits into `out`
/// (`m` rows of [`row_vectors`]`(k)` uvec4), each through [`encode_row`]; `false` as soon
/// as a row has an infinite or NaN element (`out` is then unspecified).
pub fn encode(x: &[f32], k: usize, m: usize, order: Option<&[u32]>, out: &mut [u8]) -> bool {
    assert!(x.len() >= m * k && out.len() == 16 * row_vectors(k) * m);
    out.chunks_exact_mut(16 * row_vectors(k))
        .zip(x.chunks_exact(k))
        .all(|(to, row)| encode_row(row, order, to))
}

/// Writes a row of x in digits into `out` (`16·row_vectors(k)` bytes, native byte order):
/// its `k` columns are `x` in order, or with `order` column `j` is `x[order[j]]` (a
/// matrix's column order, GPTQ act-order). `false`, leaving `out` unspecified, when x has
/// an infinite or NaN element (the f32 kernel keeps its policy for those).
pub fn encode_row(x: &[f32], order: Option<&[u32]>, out: &mut [u8]) -> bool {
    let k = x.len();
    assert!(order.is_none_or(|o| o.len() == k));
    assert_eq!(out.len(), 16 * row_vectors(k));
    let mut largest = 0f32;
    for v in x {
        if !v.is_finite() {
            return false;
        }
        largest = largest.max(v.abs());
    }
    let column = |j: usize| match order {
        Some(o) => x[o[j] as usize],
        None => x[j],
    };
    let exponent = row_exponent(largest);
    let unit = pow2(-exponent);
    let (header, chunks) = out.split_at_mut(16);
    header.fill(0);
    header[..4].copy_from_slice(&exponent.to_ne_bytes());
    for (first, to) in (0..k)
        .step_by(CHUNK)
        .zip(chunks.chunks_exact_mut(16 * CHUNK_VECTORS))
    {
        let mut words = [0u32; 4 * CHUNK_VECTORS];
        // The chunk's columns, zeros past K.
        let mut chunk = [0f32; CHUNK];
        for (c, j) in chunk.iter_mut().zip(first..k.min(first + CHUNK)) {
            *c = column(j);
        }
        let max = chunk.iter().fold(0f32, |m, v| m.max(v.abs()));
        if max != 0.0 {
            let t = block_scale(max, unit);
            let scale = unit / f64::from(t);
            let mut sums = [0i32; 3];
            for (c, &v) in chunk.iter().enumerate() {
                // Rounded to nearest, ties to even, in f64 (as the CPU context's digits).
                let q = (f64::from(v) * scale).round_ties_even() as i32;
                let (word, within) = (c / 8, c % 8);
                for (level, digit) in split_one(q).into_iter().enumerate() {
                    let at = 4 * (2 * level + word / 2) + 2 * (word % 2) + within % 2;
                    words[at] |= u32::from(digit as i8 as u8) << (8 * (within / 2));
                    sums[level] += digit;
                }
            }
            words[24] = t.to_bits();
            for (w, s) in words[25..].iter_mut().zip(sums) {
                *w = s as u32;
            }
        }
        for (bytes, w) in to.chunks_exact_mut(4).zip(words) {
            bytes.copy_from_slice(&w.to_ne_bytes());
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value a chunk's digits encode for column `c`, in units of `2^E`.
    fn decoded(out: &[u8], c: usize) -> f64 {
        let word = |i: usize| u32::from_ne_bytes(out[4 * i..4 * i + 4].try_into().unwrap());
        let base = 4 + 4 * CHUNK_VECTORS * (c / CHUNK);
        let (w, within) = ((c % CHUNK) / 8, c % 8);
        let q: i64 = (0..3)
            .map(|level| {
                let at = base + 4 * (2 * level + w / 2) + 2 * (w % 2) + within % 2;
                let digit = (word(at) >> (8 * (within / 2))) as u8 as i8;
                i64::from(digit) << (8 * (2 - level))
            })
            .sum();
        q as f64 * f64::from(f32::from_bits(word(base + 24)))
    }

    #[test]
    fn digits_encode_every_column_within_the_bound() {
        // Chunks with a huge and a tiny element, zeros, a negative run, and a short tail.
        let mut x: Vec<f32> = (0..100)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.173)
            .collect();
        x[3] = 3.0e4;
        x[40] = -7.5e-6;
        x[64..96].fill(0.0);
        let mut out = vec![0u8; 16 * row_vectors(x.len())];
        assert!(encode_row(&x, None, &mut out));
        let e = i32::from_ne_bytes(out[..4].try_into().unwrap());
        for (c, &v) in x.iter().enumerate() {
            let chunk = &x[c / CHUNK * CHUNK..(c / CHUNK * CHUNK + CHUNK).min(x.len())];
            let max = chunk.iter().fold(0f32, |m, v| m.max(v.abs()));
            let got = decoded(&out, c) * pow2(e);
            assert!(
                (got - f64::from(v)).abs() <= f64::from(max) * 2f64.powf(-23.99),
                "column {c}: {got} for {v}"
            );
        }
        // The digit sums are the sums of the digits.
        let word = |i: usize| u32::from_ne_bytes(out[4 * i..4 * i + 4].try_into().unwrap());
        for chunk in 0..x.len().div_ceil(CHUNK) {
            let base = 4 + 4 * CHUNK_VECTORS * chunk;
            for level in 0..3 {
                let sum: i32 = (0..8)
                    .flat_map(|i| (word(base + 8 * level + i)).to_ne_bytes())
                    .map(|b| i32::from(b as i8))
                    .sum();
                assert_eq!(sum, word(base + 25 + level) as i32);
            }
        }
    }

    #[test]
    fn non_finite_x_is_refused() {
        let mut out = vec![0u8; 16 * row_vectors(3)];
        assert!(!encode_row(&[1.0, f32::INFINITY, 0.0], None, &mut out));
        assert!(!encode_row(&[f32::NAN, 1.0, 0.0], None, &mut out));
    }

    #[test]
    fn a_column_order_encodes_the_gathered_row() {
        let x: Vec<f32> = (0..70).map(|i| (i as f32 - 30.0) * 0.37).collect();
        let order: Vec<u32> = (0..70).map(|j| (j * 29 % 70) as u32).collect();
        let gathered: Vec<f32> = order.iter().map(|&i| x[i as usize]).collect();
        let mut a = vec![0u8; 16 * row_vectors(70)];
        let mut b = a.clone();
        assert!(encode_row(&x, Some(&order), &mut a));
        assert!(encode_row(&gathered, None, &mut b));
        assert_eq!(a, b);
    }
}
