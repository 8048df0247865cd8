//! The scales of GGUF blocks, a step of 256 columns at a time, in the form the CPU's
//! integer dot-product kernels take (`super::blocks_dot`): per run of 32 columns (per 16
//! for Q6_K and NVFP4: [`per_half`]) a weight scale and a constant, so that every weight
//! is `scale·c + constant` with its code's value `c`
//! an integer — the value of gguf-py's `dequantize` up to the rounding of its own product
//! (`d·sc` and the like are formed as the decode forms them). The kernels decode the
//! codes themselves, in registers, one run of 32 columns at a time ([`CodeClass`] says
//! what a code is).
//!
//! Runs: run `r` of a step is columns `32r..32r + 32`: sub-block `r` of the 256-weight
//! types, block `r` of the 32-weight types, and sub-blocks `2(r % 2)` and `2(r % 2) + 1`
//! of NVFP4's block `r / 2`.

use crate::import::gguf::q4k_scales_mins;
use crate::import::gguf_blocks::{e8m0_half, ue4m3, BlockType, FP4_DOUBLED, IQ4_VALUES};

/// Columns per step: one block of the 256-weight types, several of the others.
pub(super) const STEP: usize = 256;
/// Columns per weight scale and constant (the finest of any type: Q6_K's and NVFP4's).
pub(super) const HALF: usize = 16;
/// Scales (and constants) per step.
pub(super) const HALVES: usize = STEP / HALF;

/// What the code bytes of a type hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CodeClass {
    /// The codes, unsigned, at most 63.
    Unsigned,
    /// Signed bytes, −128..=127.
    Signed,
    /// Indices into IQ4's table of signed values (magnitudes up to 127).
    Iq4,
    /// Indices into the table of E2M1 values doubled (magnitudes up to 12).
    Fp4,
}

impl CodeClass {
    /// The class of `ty`'s codes.
    pub(super) fn of(ty: BlockType) -> CodeClass {
        match ty {
            BlockType::Q8_0 => CodeClass::Signed,
            BlockType::Iq4Nl | BlockType::Iq4Xs => CodeClass::Iq4,
            BlockType::Mxfp4 | BlockType::Nvfp4 => CodeClass::Fp4,
            _ => CodeClass::Unsigned,
        }
    }

    /// The values the indices of a table class look up (`None` for the others).
    pub(super) fn table(self) -> Option<&'static [i8; 16]> {
        match self {
            CodeClass::Iq4 => Some(&IQ4_VALUES),
            CodeClass::Fp4 => Some(&FP4_DOUBLED),
            _ => None,
        }
    }

    /// The largest magnitude of a code's value.
    #[cfg(any(test, target_arch = "aarch64"))]
    pub(super) fn largest(self) -> u32 {
        match self {
            CodeClass::Unsigned => 63,
            CodeClass::Signed => 128,
            CodeClass::Iq4 => 127,
            CodeClass::Fp4 => 12,
        }
    }
}

/// Whether `ty` has constants (offsets, minima or a code bias) besides its scales.
pub(super) fn has_constants(ty: BlockType) -> bool {
    matches!(
        ty,
        BlockType::Q4_1
            | BlockType::Q5_0
            | BlockType::Q5_1
            | BlockType::Q4K
            | BlockType::Q5K
            | BlockType::Q6K
    )
}

/// Whether `ty` has a scale (and constant) per 16 columns (Q6_K, NVFP4); the others have
/// one per run of 32.
pub(super) fn per_half(ty: BlockType) -> bool {
    matches!(ty, BlockType::Q6K | BlockType::Nvfp4)
}

/// Bytes of a step of `ty`: its blocks of 256 columns.
pub(super) fn step_bytes(ty: BlockType) -> usize {
    STEP / ty.block_elements() * ty.block_bytes()
}

/// The scales and constants of one row's step of up to 256 columns: one per 16 columns
/// where the type has them so ([`per_half`]), else one per run of 32 (the first 8).
pub(super) struct Step {
    /// The weight scale of each 16 (or 32) columns.
    pub(super) scales: [f32; HALVES],
    /// The constant of each 16 (or 32) columns' weights (0 for types without one).
    pub(super) constants: [f32; HALVES],
}

impl Step {
    /// A step of zeros.
    pub(super) fn new() -> Step {
        Step {
            scales: [0.0; HALVES],
            constants: [0.0; HALVES],
        }
    }

    /// The scales and constants of the blocks of `ty` in `bytes` that cover `columns`
    /// columns (a multiple of the type's block, at most 256).
    #[inline(always)]
    pub(super) fn fill(&mut self, ty: BlockType, bytes: &[u8], columns: usize) {
        let blocks = bytes[..columns / ty.block_elements() * ty.block_bytes()]
            .chunks_exact(ty.block_bytes())
            .enumerate();
        match ty {
            BlockType::Q4K | BlockType::Q5K => {
                let b = &bytes[..ty.block_bytes()];
                let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
                let (sc, m) = q4k_scales_mins(&b[4..16]);
                for s in 0..8 {
                    self.scales[s] = d * f32::from(sc[s]);
                    self.constants[s] = -(dmin * f32::from(m[s]));
                }
            }
            BlockType::Q6K => {
                let b = &bytes[..ty.block_bytes()];
                let d = f16_at(b, 208);
                for (i, &s) in b[192..208].iter().enumerate() {
                    let scale = d * f32::from(s as i8);
                    self.scales[i] = scale;
                    self.constants[i] = -32.0 * scale;
                }
            }
            BlockType::Iq4Xs => {
                let b = &bytes[..ty.block_bytes()];
                let d = f16_at(b, 0);
                let scales_h = u16::from_le_bytes([b[2], b[3]]);
                for s in 0..8 {
                    let lo = (b[4 + s / 2] >> (4 * (s % 2))) & 0x0F;
                    let hi = ((scales_h >> (2 * s)) & 0x03) as u8;
                    self.scales[s] = d * f32::from((lo | hi << 4) as i8 - 32);
                }
            }
            BlockType::Nvfp4 => {
                for (j, b) in blocks {
                    for (scale, &e) in self.scales[4 * j..][..4].iter_mut().zip(&b[..4]) {
                        *scale = 0.5 * ue4m3(e);
                    }
                }
            }
            // The types of 32 weights per block.
            _ => {
                for (j, b) in blocks {
                    let (scale, constant) = match ty {
                        BlockType::Q4_1 | BlockType::Q5_1 => (f16_at(b, 0), f16_at(b, 2)),
                        BlockType::Q5_0 => (f16_at(b, 0), -16.0 * f16_at(b, 0)),
                        BlockType::Mxfp4 => (e8m0_half(b[0]), 0.0),
                        // Q8_0, IQ4_NL.
                        _ => (f16_at(b, 0), 0.0),
                    };
                    self.scales[j] = scale;
                    self.constants[j] = constant;
                }
            }
        }
    }
}

/// The f16 at byte `at` of `b`, as f32: normal numbers by their bits, the rest through
/// `half`.
#[inline(always)]
fn f16_at(b: &[u8], at: usize) -> f32 {
    let h = u16::from_le_bytes([b[at], b[at + 1]]);
    let exponent = u32::from((h >> 10) & 0x1F);
    match exponent {
        1..=30 => {
            let sign = u32::from(h >> 15) << 31;
            f32::from_bits(sign | (exponent + 112) << 23 | u32::from(h & 0x3FF) << 13)
        }
        _ => half::f16::from_bits(h).to_f32(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every type's step gives each column a scale and a constant with which the decoded
    /// weight is `scale·c + constant` for an integer `c` within the class's range, on
    /// random blocks with small random f16 scales of either sign.
    #[test]
    fn a_step_holds_the_scales_and_constants_of_the_decode() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for ty in BlockType::ALL {
            let size = ty.block_bytes();
            let mut bytes: Vec<u8> = (0..STEP / ty.block_elements() * size)
                .map(|_| next() as u8)
                .collect();
            for block in bytes.chunks_exact_mut(size) {
                for &(at, _) in ty.f16_scale_fields() {
                    let v = half::f16::from_f32((next() % 2000) as f32 * 1e-5 - 0.01);
                    block[at..at + 2].copy_from_slice(&v.to_le_bytes());
                }
                match ty {
                    BlockType::Mxfp4 => block[0] = 100 + (next() % 50) as u8,
                    BlockType::Nvfp4 => block[..4].iter_mut().for_each(|s| *s &= 0x7E),
                    _ => {}
                }
            }
            let mut want = vec![0f32; STEP];
            let elems = ty.block_elements();
            for (block, w) in bytes.chunks_exact(size).zip(want.chunks_exact_mut(elems)) {
                ty.decode(block, w);
            }
            let mut step = Step::new();
            step.fill(ty, &bytes, STEP);
            let largest = f64::from(CodeClass::of(ty).largest());
            for (j, &w) in want.iter().enumerate() {
                let at = if per_half(ty) {
                    j / HALF
                } else {
                    j / (2 * HALF)
                };
                let (scale, constant) = (step.scales[at], step.constants[at]);
                assert!(
                    constant == 0.0 || has_constants(ty),
                    "{} column {j}",
                    ty.name()
                );
                if scale == 0.0 {
                    assert_eq!(w, constant, "{} column {j}", ty.name());
                    continue;
                }
                let c = (f64::from(w) - f64::from(constant)) / f64::from(scale);
                // Within the f32 roundings of the decode's own products.
                let size = c.abs() + (f64::from(constant) / f64::from(scale)).abs();
                assert!(
                    (c - c.round()).abs() <= 2f64.powi(-21) * size && c.round().abs() <= largest,
                    "{} column {j}: {c}",
                    ty.name()
                );
            }
        }
    }

    #[test]
    fn f16_at_is_half_for_every_value() {
        for h in 0..=u16::MAX {
            let b = h.to_le_bytes();
            let (got, want) = (f16_at(&b, 0), half::f16::from_bits(h).to_f32());
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "{h:#06x}"
            );
        }
    }
}
