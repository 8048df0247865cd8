//! Float element types of weights and scales, and exact conversions between their bit
//! patterns and f32. Decoding is branch-free so the quantizer's inner loops vectorize.

use crate::error::{invalid, Result};

/// Element type of float weights and scales.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    /// IEEE binary32.
    F32,
    /// IEEE binary16.
    F16,
    /// bfloat16 (the upper half of a binary32).
    Bf16,
}

impl Dtype {
    /// Parses the C enum value (`Q4VK_DTYPE_*`).
    pub fn from_c(value: u32, arg: &str) -> Result<Dtype> {
        match value {
            0 => Ok(Dtype::F32),
            1 => Ok(Dtype::F16),
            2 => Ok(Dtype::Bf16),
            _ => Err(invalid!(
                "{arg} is {value}; expected Q4VK_DTYPE_F32 (0), Q4VK_DTYPE_F16 (1) or Q4VK_DTYPE_BF16 (2)"
            )),
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::F16 | Dtype::Bf16 => 2,
        }
    }

    /// Name used in messages.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
        }
    }

    /// Rounds an f32 to this type (to nearest, ties to even, subnormals included) and
    /// returns its raw bits.
    #[inline]
    pub fn from_f32(self, value: f32) -> u32 {
        match self {
            Dtype::F32 => value.to_bits(),
            Dtype::F16 => half::f16::from_f32(value).to_bits() as u32,
            Dtype::Bf16 => half::bf16::from_f32(value).to_bits() as u32,
        }
    }

    /// Writes raw bits as element `i` of little-endian `bytes`.
    #[inline(always)]
    pub fn put_bits(self, bytes: &mut [u8], i: usize, bits: u32) {
        match self {
            Dtype::F32 => bytes[4 * i..4 * i + 4].copy_from_slice(&bits.to_le_bytes()),
            Dtype::F16 | Dtype::Bf16 => {
                bytes[2 * i..2 * i + 2].copy_from_slice(&(bits as u16).to_le_bytes())
            }
        }
    }
}

/// Hot-loop access to one element type, implemented by zero-sized markers so loops are
/// compiled once per type (dispatch with `with_element!`).
pub trait Element {
    /// The element type this marker stands for.
    const KIND: Dtype;
    /// Bytes per element.
    const SIZE: usize;
    /// Sign-clearing mask: for finite values the integer order of `bits & MAGNITUDE` is the
    /// order of the absolute values.
    const MAGNITUDE: u32;
    /// The smallest magnitude pattern that is not finite (Inf; NaNs are above it).
    const INFINITY: u32;
    /// Raw bits of the little-endian element in `bytes[..SIZE]`.
    fn load(bytes: &[u8]) -> u32;
    /// Widens raw bits of a finite value to f32, exactly.
    fn widen(bits: u32) -> f32;
}

/// Marker for [`Dtype::F32`].
pub struct F32;
/// Marker for [`Dtype::F16`].
pub struct F16;
/// Marker for [`Dtype::Bf16`].
pub struct Bf16;

impl Element for F32 {
    const KIND: Dtype = Dtype::F32;
    const SIZE: usize = 4;
    const MAGNITUDE: u32 = 0x7fff_ffff;
    const INFINITY: u32 = 0x7f80_0000;
    #[inline(always)]
    fn load(bytes: &[u8]) -> u32 {
        let bytes: &[u8; 4] = bytes[..4].try_into().expect("4 bytes");
        // SAFETY: `bytes` is exactly 4 readable bytes; the read has no alignment requirement.
        u32::from_le(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<u32>()) })
    }
    #[inline(always)]
    fn widen(bits: u32) -> f32 {
        f32::from_bits(bits)
    }
}

impl Element for F16 {
    const KIND: Dtype = Dtype::F16;
    const SIZE: usize = 2;
    const MAGNITUDE: u32 = 0x7fff;
    const INFINITY: u32 = 0x7c00;
    #[inline(always)]
    fn load(bytes: &[u8]) -> u32 {
        load_u16(bytes)
    }
    #[inline(always)]
    fn widen(bits: u32) -> f32 {
        f16_bits_to_f32(bits)
    }
}

impl Element for Bf16 {
    const KIND: Dtype = Dtype::Bf16;
    const SIZE: usize = 2;
    const MAGNITUDE: u32 = 0x7fff;
    const INFINITY: u32 = 0x7f80;
    #[inline(always)]
    fn load(bytes: &[u8]) -> u32 {
        load_u16(bytes)
    }
    #[inline(always)]
    fn widen(bits: u32) -> f32 {
        f32::from_bits(bits << 16)
    }
}

/// Evaluates `$body` with the type alias `$E` bound to the [`Element`] marker of `$dtype`.
macro_rules! with_element {
    ($dtype:expr, $E:ident => $body:expr) => {
        match $dtype {
            $crate::quant::dtype::Dtype::F32 => {
                type $E = $crate::quant::dtype::F32;
                $body
            }
            $crate::quant::dtype::Dtype::F16 => {
                type $E = $crate::quant::dtype::F16;
                $body
            }
            $crate::quant::dtype::Dtype::Bf16 => {
                type $E = $crate::quant::dtype::Bf16;
                $body
            }
        }
    };
}
pub(crate) use with_element;

/// One unaligned little-endian 16-bit load (vectorizes, unlike two byte loads).
#[inline(always)]
fn load_u16(bytes: &[u8]) -> u32 {
    let bytes: &[u8; 2] = bytes[..2].try_into().expect("2 bytes");
    // SAFETY: `bytes` is exactly 2 readable bytes; the read has no alignment requirement.
    u16::from_le(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<u16>()) }) as u32
}

/// Exact f16 -> f32 for finite values without branches: normals by re-biasing the
/// exponent, subnormals through an integer-to-float conversion (never an f32 subnormal, so
/// a host that set denormals-are-zero does not change the result).
#[inline(always)]
fn f16_bits_to_f32(bits: u32) -> f32 {
    let sign = (bits & 0x8000) << 16;
    let magnitude = bits & 0x7fff;
    let normal = f32::from_bits((magnitude << 13) + (112 << 23));
    let subnormal = magnitude as f32 * (1.0 / 16_777_216.0); // magnitude * 2^-24
    let value = if magnitude < 0x0400 {
        subnormal
    } else {
        normal
    };
    f32::from_bits(value.to_bits() | sign)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_decode_matches_half_for_every_finite_value() {
        for bits in 0u32..=0xffff {
            if bits & 0x7fff >= 0x7c00 {
                continue;
            }
            let want = half::f16::from_bits(bits as u16).to_f32();
            assert_eq!(
                F16::widen(bits).to_bits(),
                want.to_bits(),
                "bits {bits:#06x}"
            );
        }
    }

    #[test]
    fn round_trip_bits() {
        let mut buf = [0u8; 8];
        Dtype::F32.put_bits(&mut buf, 1, 0xdead_beef);
        assert_eq!(F32::load(&buf[4..]), 0xdead_beef);
        Dtype::Bf16.put_bits(&mut buf, 0, 0xbeef);
        assert_eq!(Bf16::load(&buf), 0xbeef);
        assert_eq!(Bf16::widen(0x3f80), 1.0);
        assert_eq!(Dtype::Bf16.from_f32(1.0), 0x3f80);
        assert_eq!(Dtype::F16.from_f32(1.0), 0x3c00);
    }
}
