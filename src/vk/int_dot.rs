//! The integer dot-product GEMV (`shaders/gemv_q4.comp` built with `DOT`): what a device
//! offers of it, and the size of x in 8-bit digits as that kernel reads it, written on the
//! device by the pre-pass `shaders/x_digits.comp` (recorded by `vk::gemv::record` into a
//! workspace: `q4vk_gemv`'s own, or the caller's of `q4vk_cmd_gemv`).
//!
//! The digits: per chunk of 32 columns of a row of x, a power of two `t = 2^τ`, `τ = e − 21`
//! (`2^e` at or below the chunk's largest magnitude; any exponent, subnormal chunks
//! included), and integers `q = round(x / t)` (ties to even; `|q| ≤ 2^22`), within `2^-22`
//! of the chunk's largest magnitude, split into three signed bytes `q = D0·2^16 + D1·2^8 +
//! D2`. A chunk with an infinite or NaN element gets `τ = 256` and zero digits (its results
//! are 0 · ∞: NaN where the driver keeps infinities and NaNs). Layout (uvec4 units,
//! [`row_vectors`] per activation row), per chunk 7 uvec4 (28 32-bit words): for each code
//! word `j` of the chunk six words, `(even D0, odd D0, even D1, odd D1, even D2, odd D2)`
//! (`even`: the digits of columns `8j, 8j + 2, 8j + 4, 8j + 6`, one per byte, as the low
//! nibbles of code word `j` hold those columns; `odd`: columns `8j + 1, …, 8j + 7`), so that
//! invocations taking neighbouring code words read neighbouring digits; then
//! `(τ, Σ D0, Σ D1, Σ D2)`.
//!
//! x rounded to bytes (`Q4VK_GEMV_ROUND_X_TO_INT8`, less exact): per chunk the scale
//! `d = a / 127` (`a` the chunk's largest magnitude) and `q = round(127 x / a)` (ties to
//! even, `|q| ≤ 127`, within `d / 2` of x up to the f32 roundings of `d` and of the
//! quotient), 3 uvec4 ([`BYTE_CHUNK_VECTORS`]) per chunk: for each code word `j` the bytes
//! of its even columns, then of its odd ones, then `(d's bits, Σ q, 0, 0)`. A chunk with an
//! infinite or NaN element gets `d` NaN and `q = 0`; where the device flushes subnormals, a
//! chunk whose `d` is subnormal counts as zeros.

use ash::vk;
use std::ffi::CStr;

/// The extension of the packed dot products. Core in Vulkan 1.3, but q4vk's instance asks
/// for Vulkan 1.1, so the device extension is what makes them usable.
pub const EXTENSION: &CStr = ash::khr::shader_integer_dot_product::NAME;

/// Columns per chunk (one scale `t`).
pub const CHUNK: usize = 32;
/// uvec4 per chunk: 6 of digits, 1 of scale and digit sums.
pub const CHUNK_VECTORS: usize = 7;
/// uvec4 per chunk of x rounded to bytes: 2 of bytes, 1 of scale and sum.
pub const BYTE_CHUNK_VECTORS: usize = 3;

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

/// uvec4 of one activation row of `k` columns in digits: 7 per chunk.
pub fn row_vectors(k: usize) -> usize {
    CHUNK_VECTORS * k.div_ceil(CHUNK)
}

/// uvec4 of one activation row of `k` columns in digits (`bytes`: rounded to bytes, 3 per
/// chunk; else [`row_vectors`]).
pub fn row_vectors_of(k: usize, bytes: bool) -> usize {
    match bytes {
        true => BYTE_CHUNK_VECTORS * k.div_ceil(CHUNK),
        false => row_vectors(k),
    }
}
