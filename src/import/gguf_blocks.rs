//! The GGUF (ggml) block types q4vk keeps in their native bytes, decoded on the host exactly
//! as gguf-py's `dequantize` computes them (f32 arithmetic in its order, so the results are
//! bit for bit the same): Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4 and
//! NVFP4. A tensor is `n` rows of `k / block` blocks as the file stores them, little-endian.
//!
//! * Q4_1, 20 bytes per 32: f16 `d` | f16 `m` | `qs[16]` (element j low nibble, j + 16
//!   high); `w = d·q + m`.
//! * Q5_0, 22 bytes per 32: f16 `d` | `qh` (u32, bit j the fifth bit of element j) | `qs[16]`
//!   (element j low nibble, j + 16 high); `w = d·(q − 16)`.
//! * Q5_1, 24 bytes per 32: f16 `d` | f16 `m` | `qh` | `qs[16]`; `w = d·q + m`.
//! * Q8_0, 34 bytes per 32: f16 `d` | `qs[32]` (i8); `w = d·q`.
//! * Q4_K, 144 bytes per 256: f16 `d` | f16 `dmin` | 12 bytes of eight 6-bit scales and
//!   minima | `qs[128]` (sub-block s: nibble s % 2 of bytes 32·(s / 2) ..);
//!   `w = (d·sc)·q − dmin·m`.
//! * Q5_K, 176 bytes per 256: f16 `d` | f16 `dmin` | 12 bytes of eight 6-bit scales and
//!   minima (as Q4_K) | `qh[32]` (bit s of byte l: the fifth bit of element l of sub-block s)
//!   | `qs[128]` (sub-block s: nibble s % 2 of bytes 32·(s / 2) ..); `w = (d·sc)·q − dmin·m`.
//! * Q6_K, 210 bytes per 256: `ql[128]` | `qh[64]` | `scales[16]` (i8, one per 16) | f16 `d`;
//!   element i of half h = i / 128: low four bits nibble (i % 128) / 64 of `ql[64h + i % 64]`,
//!   high two bits pair (i % 128) / 32 of `qh[32h + i % 32]`; `w = (d·sc)·(q − 32)`.
//! * IQ4_NL, 18 bytes per 32: f16 `d` | `qs[16]` (as Q4_0) of indices into a table of 16
//!   values; `w = d·table[q]`.
//! * IQ4_XS, 136 bytes per 256: f16 `d` | `scales_h` (u16, two bits per sub-block) |
//!   `scales_l[4]` (a nibble per sub-block) | `qs[128]` (sub-block s: 16 bytes, low nibbles
//!   then high); six-bit scale `ls − 32`, `w = (d·ls)·table[q]`.
//! * MXFP4, 17 bytes per 32: E8M0 `e` | `qs[16]` (as Q4_0) of E2M1 codes; `w = 2^(e−128)·2v`
//!   with `2v` the E2M1 value doubled (an integer).
//! * NVFP4, 36 bytes per 64: four UE4M3 scales (one per 16) | `qs[32]` (sub-block s: 8 bytes,
//!   element j low nibble, j + 8 high) of E2M1 codes; `w = scale·v`.

use crate::error::{invalid, Error, Result};

/// IQ4_NL's and IQ4_XS's values.
pub(crate) const IQ4_VALUES: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// E2M1 values, doubled (integers), by code.
pub(crate) const FP4_DOUBLED: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// A GGUF block type decoded on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BlockType {
    /// `GGML_TYPE_Q4_1` (3).
    Q4_1,
    /// `GGML_TYPE_Q5_0` (6).
    Q5_0,
    /// `GGML_TYPE_Q5_1` (7).
    Q5_1,
    /// `GGML_TYPE_Q8_0` (8).
    Q8_0,
    /// `GGML_TYPE_Q4_K` (12).
    Q4K,
    /// `GGML_TYPE_Q5_K` (13).
    Q5K,
    /// `GGML_TYPE_Q6_K` (14).
    Q6K,
    /// `GGML_TYPE_IQ4_NL` (20).
    Iq4Nl,
    /// `GGML_TYPE_IQ4_XS` (23).
    Iq4Xs,
    /// `GGML_TYPE_MXFP4` (39).
    Mxfp4,
    /// `GGML_TYPE_NVFP4` (40).
    Nvfp4,
}

impl BlockType {
    /// Every type, in ggml id order.
    pub const ALL: [BlockType; 11] = [
        BlockType::Q4_1,
        BlockType::Q5_0,
        BlockType::Q5_1,
        BlockType::Q8_0,
        BlockType::Q4K,
        BlockType::Q5K,
        BlockType::Q6K,
        BlockType::Iq4Nl,
        BlockType::Iq4Xs,
        BlockType::Mxfp4,
        BlockType::Nvfp4,
    ];

    /// The type's `ggml_type` id.
    pub fn ggml_id(self) -> u32 {
        match self {
            BlockType::Q4_1 => 3,
            BlockType::Q5_0 => 6,
            BlockType::Q5_1 => 7,
            BlockType::Q8_0 => 8,
            BlockType::Q4K => 12,
            BlockType::Q5K => 13,
            BlockType::Q6K => 14,
            BlockType::Iq4Nl => 20,
            BlockType::Iq4Xs => 23,
            BlockType::Mxfp4 => 39,
            BlockType::Nvfp4 => 40,
        }
    }

    /// The type's name as ggml writes it.
    pub fn name(self) -> &'static str {
        match self {
            BlockType::Q4_1 => "Q4_1",
            BlockType::Q5_0 => "Q5_0",
            BlockType::Q5_1 => "Q5_1",
            BlockType::Q8_0 => "Q8_0",
            BlockType::Q4K => "Q4_K",
            BlockType::Q5K => "Q5_K",
            BlockType::Q6K => "Q6_K",
            BlockType::Iq4Nl => "IQ4_NL",
            BlockType::Iq4Xs => "IQ4_XS",
            BlockType::Mxfp4 => "MXFP4",
            BlockType::Nvfp4 => "NVFP4",
        }
    }

    /// Whether the type's codes index a table of values (IQ4's, E2M1's) rather than being
    /// the values' integers themselves.
    pub fn looked_up(self) -> bool {
        matches!(
            self,
            BlockType::Iq4Nl | BlockType::Iq4Xs | BlockType::Mxfp4 | BlockType::Nvfp4
        )
    }

    /// Whether the type's weights carry an offset (a minimum) per run besides a scale.
    pub fn has_minima(self) -> bool {
        matches!(
            self,
            BlockType::Q4_1 | BlockType::Q5_1 | BlockType::Q4K | BlockType::Q5K
        )
    }

    /// Elements per block.
    pub fn block_elements(self) -> usize {
        match self {
            BlockType::Q4K | BlockType::Q5K | BlockType::Q6K | BlockType::Iq4Xs => 256,
            BlockType::Nvfp4 => 64,
            _ => 32,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        match self {
            BlockType::Q4_1 => 20,
            BlockType::Q5_0 => 22,
            BlockType::Q5_1 => 24,
            BlockType::Q8_0 => 34,
            BlockType::Q4K => 144,
            BlockType::Q5K => 176,
            BlockType::Q6K => 210,
            BlockType::Iq4Nl => 18,
            BlockType::Iq4Xs => 136,
            BlockType::Mxfp4 => 17,
            BlockType::Nvfp4 => 36,
        }
    }

    /// The block's f16 scale fields: (byte offset, name as gguf-py calls it).
    pub fn f16_scale_fields(self) -> &'static [(usize, &'static str)] {
        match self {
            BlockType::Q5_0 | BlockType::Q8_0 | BlockType::Iq4Nl | BlockType::Iq4Xs => &[(0, "d")],
            BlockType::Q4_1 | BlockType::Q5_1 => &[(0, "d"), (2, "m")],
            BlockType::Q4K | BlockType::Q5K => &[(0, "d"), (2, "dmin")],
            BlockType::Q6K => &[(208, "d")],
            BlockType::Mxfp4 | BlockType::Nvfp4 => &[],
        }
    }

    /// Checks `n` × `k` (k a multiple of the block, the f32 weights' bytes within this
    /// platform) and returns the bytes of such a tensor.
    pub fn tensor_bytes(self, n: u64, k: u64) -> Result<usize> {
        let block = self.block_elements() as u64;
        if n == 0 || k == 0 || !k.is_multiple_of(block) {
            return Err(invalid!(
                "GGUF {}: n = {n} and k = {k}; both must be at least 1 and k a multiple of {block}",
                self.name()
            ));
        }
        let f32_bytes = n.checked_mul(k).and_then(|e| e.checked_mul(4));
        let bytes = n
            .checked_mul(k / block)
            .and_then(|b| b.checked_mul(self.block_bytes() as u64));
        match (f32_bytes, bytes) {
            (Some(f), Some(b)) if usize::try_from(f).is_ok() => Ok(b as usize),
            _ => Err(invalid!(
                "GGUF {} tensor of {n} x {k} is too large for this platform",
                self.name()
            )),
        }
    }

    /// Decodes one block into `out` (`block_elements` values).
    pub fn decode(self, b: &[u8], out: &mut [f32]) {
        let f16_at = |i: usize| half::f16::from_le_bytes([b[i], b[i + 1]]).to_f32();
        match self {
            BlockType::Q4_1 => {
                let (d, m) = (f16_at(0), f16_at(2));
                for j in 0..16 {
                    out[j] = d * f32::from(b[4 + j] & 0x0F) + m;
                    out[j + 16] = d * f32::from(b[4 + j] >> 4) + m;
                }
            }
            BlockType::Q5_0 | BlockType::Q5_1 => {
                let (d, m, at) = match self {
                    BlockType::Q5_0 => (f16_at(0), None, 2),
                    _ => (f16_at(0), Some(f16_at(2)), 4),
                };
                let qh = u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
                let qs = &b[at + 4..at + 20];
                // The 32 five-bit codes first, then one pass of the block's arithmetic.
                let mut q = [0u8; 32];
                for j in 0..16 {
                    q[j] = (qs[j] & 0x0F) | (((qh >> j) & 1) << 4) as u8;
                    q[j + 16] = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4) as u8;
                }
                let out = out[..32].iter_mut().zip(&q);
                match m {
                    None => out.for_each(|(o, &q)| *o = d * (f32::from(q) - 16.0)),
                    Some(m) => out.for_each(|(o, &q)| *o = d * f32::from(q) + m),
                }
            }
            BlockType::Q8_0 => {
                let d = f16_at(0);
                for (o, &q) in out.iter_mut().zip(&b[2..34]) {
                    *o = d * f32::from(q as i8);
                }
            }
            BlockType::Q4K => {
                let (d, dmin) = (f16_at(0), f16_at(2));
                let (scs, mins) = super::gguf::q4k_scales_mins(&b[4..16]);
                let qs = &b[16..144];
                for s in 0..8 {
                    let (ds, dm) = (d * f32::from(scs[s]), dmin * f32::from(mins[s]));
                    for l in 0..32 {
                        let q = (qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0x0F;
                        out[32 * s + l] = ds * f32::from(q) - dm;
                    }
                }
            }
            BlockType::Q5K => {
                let (d, dmin) = (f16_at(0), f16_at(2));
                let (scales, qh, qs) = (&b[4..16], &b[16..48], &b[48..176]);
                let (scs, mins) = super::gguf::q4k_scales_mins(scales);
                for s in 0..8 {
                    let (sc, m) = (scs[s], mins[s]);
                    let (ds, dm) = (d * f32::from(sc), dmin * f32::from(m));
                    for l in 0..32 {
                        let lo = (qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0x0F;
                        let hi = (qh[l] >> s) & 1;
                        out[32 * s + l] = ds * f32::from(lo | hi << 4) - dm;
                    }
                }
            }
            BlockType::Q6K => {
                let (ql, qh, sc) = (&b[..128], &b[128..192], &b[192..208]);
                let d = f16_at(208);
                // Element 128 h + 32 p + l: the low nibble of ql byte 64 h + 32 (p % 2) + l
                // (the high one for p ≥ 2), bits 2p, 2p + 1 of qh byte 32 h + l; scale
                // (i / 16) per run of 16.
                for (i, run) in out[..256].chunks_exact_mut(16).enumerate() {
                    let (h, p, half) = (i / 8, i / 2 % 4, i % 2);
                    let lows = &ql[64 * h + 32 * (p % 2) + 16 * half..][..16];
                    let highs = &qh[32 * h + 16 * half..][..16];
                    let ds = d * f32::from(sc[i] as i8);
                    for ((o, &lo), &hi) in run.iter_mut().zip(lows).zip(highs) {
                        let q = ((lo >> (4 * (p / 2))) & 0x0F) | ((hi >> (2 * p)) & 0x03) << 4;
                        *o = ds * (i32::from(q) - 32) as f32;
                    }
                }
            }
            BlockType::Iq4Nl => {
                let values = scaled(f16_at(0), &IQ4_VALUES, 1.0);
                look_up(&values, &b[2..18], &mut out[..32]);
            }
            BlockType::Iq4Xs => {
                let d = f16_at(0);
                let scales_h = u16::from_le_bytes([b[2], b[3]]);
                let (scales_l, qs) = (&b[4..8], &b[8..136]);
                for s in 0..8 {
                    let lo = (scales_l[s / 2] >> (4 * (s % 2))) & 0x0F;
                    let hi = ((scales_h >> (2 * s)) & 0x03) as u8;
                    let dl = d * f32::from((lo | hi << 4) as i8 - 32);
                    let values = scaled(dl, &IQ4_VALUES, 1.0);
                    look_up(&values, &qs[16 * s..][..16], &mut out[32 * s..][..32]);
                }
            }
            BlockType::Mxfp4 => {
                let values = scaled(e8m0_half(b[0]), &FP4_DOUBLED, 1.0);
                look_up(&values, &b[1..17], &mut out[..32]);
            }
            BlockType::Nvfp4 => {
                for s in 0..4 {
                    let values = scaled(ue4m3(b[s]), &FP4_DOUBLED, 0.5);
                    look_up(&values, &b[4 + 8 * s..][..8], &mut out[16 * s..][..16]);
                }
            }
        }
    }
}

/// The 16 values of a table of codes (`IQ4_VALUES`, `FP4_DOUBLED`) times `d`, each formed as
/// the decode forms it: `d · (factor · v)` (`factor` 1 or NVFP4's 0.5, exact).
fn scaled(d: f32, table: &[i8; 16], factor: f32) -> [f32; 16] {
    table.map(|v| d * (factor * f32::from(v)))
}

/// `out[j]` and `out[j + n]` (n = `codes.len()`) from the low and high nibbles of
/// `codes[j]` through `values`.
fn look_up(values: &[f32; 16], codes: &[u8], out: &mut [f32]) {
    let (low, high) = out.split_at_mut(codes.len());
    for ((&q, l), h) in codes.iter().zip(low).zip(high) {
        *l = values[usize::from(q & 0x0F)];
        *h = values[usize::from(q >> 4)];
    }
}

/// An E8M0 exponent as f32, halved (`2^(e − 128)`): the factor of MXFP4's doubled E2M1
/// values, as ggml's `GGML_E8M0_TO_FP32_HALF` (subnormal for e < 2).
pub(crate) fn e8m0_half(e: u8) -> f32 {
    let bits = match e {
        0 | 1 => 0x0020_0000u32 << e,
        _ => u32::from(e - 1) << 23,
    };
    f32::from_bits(bits)
}

/// An unsigned E4M3 scale (bias 7, no infinities; 0x7F the NaN) as f32.
pub(crate) fn ue4m3(x: u8) -> f32 {
    let (e, m) = (u32::from((x >> 3) & 0x0F), u32::from(x & 0x07));
    match e {
        // m · 2^-9, exact.
        0 => m as f32 / 512.0,
        // (1 + m/8) · 2^(e − 7): exponent e − 7 + 127, the three mantissa bits on top.
        _ => f32::from_bits((e + 120) << 23 | m << 20),
    }
}

/// Checks that every scale field of a tensor of `ty` with rows of `blocks_per_row` blocks is
/// finite (f16 `d`, `m`, `dmin`; MXFP4's E8M0 other than 0xFF; NVFP4's UE4M3 other than
/// NaN), and every weight: an MXFP4 exponent of 253 or 254 times a large E2M1 value is
/// past f32 (the other types' largest products are far inside it). `NonFinite` naming
/// the first that is not.
pub fn check_finite(ty: BlockType, bytes: &[u8], blocks_per_row: usize) -> Result<()> {
    let f16_fields = ty.f16_scale_fields();
    for (i, b) in bytes.chunks_exact(ty.block_bytes()).enumerate() {
        let (row, block) = (i / blocks_per_row.max(1), i % blocks_per_row.max(1));
        let bad = f16_fields
            .iter()
            .find(|&&(at, _)| !half::f16::from_le_bytes([b[at], b[at + 1]]).is_finite())
            .map(|&(_, what)| what)
            .or_else(|| match ty {
                BlockType::Mxfp4 if b[0] == 0xFF => Some("the E8M0 scale"),
                BlockType::Mxfp4 => {
                    mxfp4_overflows(b).then_some("a weight (E8M0 scale times E2M1 value)")
                }
                BlockType::Nvfp4 => b[..4]
                    .iter()
                    .any(|&s| s & 0x7F == 0x7F)
                    .then_some("a UE4M3 scale"),
                _ => None,
            });
        if let Some(what) = bad {
            return Err(Error::NonFinite(format!(
                "GGUF {}: {what} of row {row}, block {block} is not finite",
                ty.name()
            )));
        }
    }
    Ok(())
}

/// Whether an MXFP4 block (E8M0 byte, then 16 bytes of codes) has a weight past f32: its
/// scale `2^(e − 128)` times a doubled E2M1 value reaching `2^128` (4 and more at e = 254,
/// 8 and more at e = 253; none below).
fn mxfp4_overflows(block: &[u8]) -> bool {
    let scale = e8m0_half(block[0]);
    block[0] >= 253
        && block[1..17]
            .iter()
            .flat_map(|&q| [q & 0x0F, q >> 4])
            .any(|c| !(scale * f32::from(FP4_DOUBLED[usize::from(c)])).is_finite())
}

/// The type of a `ggml_type` id among these.
pub fn of_ggml_id(id: u32) -> Option<BlockType> {
    BlockType::ALL.into_iter().find(|t| t.ggml_id() == id)
}

/// The name ggml gives the type `id`, where it is one of ggml's.
pub fn ggml_type_name(id: u32) -> Option<&'static str> {
    const NAMES: [(u32, &str); 33] = [
        (0, "F32"),
        (1, "F16"),
        (2, "Q4_0"),
        (3, "Q4_1"),
        (6, "Q5_0"),
        (7, "Q5_1"),
        (8, "Q8_0"),
        (9, "Q8_1"),
        (10, "Q2_K"),
        (11, "Q3_K"),
        (12, "Q4_K"),
        (13, "Q5_K"),
        (14, "Q6_K"),
        (15, "Q8_K"),
        (16, "IQ2_XXS"),
        (17, "IQ2_XS"),
        (18, "IQ3_XXS"),
        (19, "IQ1_S"),
        (20, "IQ4_NL"),
        (21, "IQ3_S"),
        (22, "IQ2_S"),
        (23, "IQ4_XS"),
        (24, "I8"),
        (25, "I16"),
        (26, "I32"),
        (27, "I64"),
        (28, "F64"),
        (29, "IQ1_M"),
        (30, "BF16"),
        (34, "TQ1_0"),
        (35, "TQ2_0"),
        (39, "MXFP4"),
        (40, "NVFP4"),
    ];
    NAMES.iter().find(|(i, _)| *i == id).map(|(_, n)| *n)
}

/// Decodes a tensor of `ty` (`n` rows of `k / block` blocks) into `out` (`n·k` values).
pub fn dequantize(ty: BlockType, bytes: &[u8], out: &mut [f32]) {
    let (elems, size) = (ty.block_elements(), ty.block_bytes());
    for (block, dst) in bytes.chunks_exact(size).zip(out.chunks_exact_mut(elems)) {
        ty.decode(block, dst);
    }
}

#[cfg(test)]
mod tests {
    use super::ue4m3;

    #[test]
    fn ue4m3_is_its_definition_for_every_code() {
        for x in 0u8..0x80 {
            let (e, m) = (i32::from(x >> 3), f64::from(x & 7));
            let want = match e {
                0 => m * 2f64.powi(-9),
                _ => (1.0 + m / 8.0) * 2f64.powi(e - 7),
            };
            assert_eq!(f64::from(ue4m3(x)), want, "code {x:#04x}");
            // The sign bit is not part of an unsigned scale.
            assert_eq!(ue4m3(x | 0x80).to_bits(), ue4m3(x).to_bits());
        }
    }
}
