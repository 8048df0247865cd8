//! GGUF (ggml) 4-bit block formats, as stored in a `.gguf` tensor: `n` rows of `k/block`
//! blocks (`ne0 = k`, `ne1 = n`), little-endian.
//!
//! * Q4_0, 18 bytes per 32 elements: f16 `d` | `qs[16]`; element `j` is the low nibble of
//!   `qs[j]`, element `j + 16` its high nibble; `w = d·(q − 8)`.
//! * Q4_1, 20 bytes per 32: f16 `d` | f16 `m` | `qs[16]` (same order); `w = d·q + m`.
//! * Q4_K, 144 bytes per 256: f16 `d` | f16 `dmin` | 12 bytes of eight 6-bit scales `sc`
//!   and minima `m` | `qs[128]`; sub-block `2c + h` (32 elements) is nibble `h` of
//!   `qs[32c .. 32c + 32]`; `w = (d·sc)·q − dmin·m`.
//!
//! Imported with groups of 32: Q4_0 as symmetric codes with its f16 `d`; Q4_1 with f16
//! scale `d` and offset `m`; Q4_K with the f32 scale `d·sc` and offset `−(dmin·m)`, both
//! exact in f32 (an 11-bit significand times a 6-bit integer), as gguf-py computes them.

use super::canonical::{check_offsets, dims, CodeRows, ImportedMatrix};
use crate::alloc;
use crate::error::{invalid, Error, Result};
use crate::quant::q4::{Q4Data, Q4Shape, ScaleType};
use crate::size;
use std::borrow::Cow;

/// Elements per group of the imported matrix (Q4_0/Q4_1 blocks, Q4_K sub-blocks).
const GROUP: usize = 32;

/// A GGUF 4-bit block type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GgufType {
    /// `GGML_TYPE_Q4_0` (2).
    Q4_0,
    /// `GGML_TYPE_Q4_1` (3).
    Q4_1,
    /// `GGML_TYPE_Q4_K` (12).
    Q4K,
}

impl GgufType {
    /// Elements per block.
    pub fn block_elements(self) -> usize {
        match self {
            GgufType::Q4_0 | GgufType::Q4_1 => 32,
            GgufType::Q4K => 256,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        match self {
            GgufType::Q4_0 => 18,
            GgufType::Q4_1 => 20,
            GgufType::Q4K => 144,
        }
    }

    /// The stored scale type of the imported matrix: f16 `d` (Q4_0, Q4_1), or the f32
    /// product `d·sc` (Q4_K).
    pub fn scale_type(self) -> ScaleType {
        match self {
            GgufType::Q4_0 | GgufType::Q4_1 => ScaleType::F16,
            GgufType::Q4K => ScaleType::F32,
        }
    }

    /// Whether the imported matrix has per-group offsets (a stored minimum: Q4_1, Q4_K).
    pub fn has_offsets(self) -> bool {
        self != GgufType::Q4_0
    }

    /// The type's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            GgufType::Q4_0 => "GGUF Q4_0",
            GgufType::Q4_1 => "GGUF Q4_1",
            GgufType::Q4K => "GGUF Q4_K",
        }
    }

    /// Validates `n`, `k` (a multiple of the block) and returns the shape of the imported
    /// matrix and the bytes of the tensor.
    pub fn shape(self, n: u64, k: u64) -> Result<(Q4Shape, usize)> {
        let (n, k) = dims(n, k)?;
        let block = self.block_elements();
        if k % block != 0 {
            return Err(invalid!(
                "desc->k is {k}; {} stores blocks of {block} elements, so k must be a multiple of {block}",
                self.name()
            ));
        }
        let shape = Q4Shape {
            n,
            k,
            group_size: GROUP,
            per_channel: false,
            zero_points: false,
        };
        let bytes = size::product(
            "the bytes of the GGUF tensor (blocks * block bytes)",
            &[n * (k / block), self.block_bytes()],
        )?;
        Ok((shape, bytes))
    }
}

fn f16_at(bytes: &[u8], at: usize) -> half::f16 {
    half::f16::from_le_bytes([bytes[at], bytes[at + 1]])
}

fn check_finite(value: half::f16, what: &str, row: usize, block: usize) -> Result<()> {
    if value.is_finite() {
        Ok(())
    } else {
        Err(Error::NonFinite(format!(
            "{what} of row {row}, block {block} is not finite"
        )))
    }
}

/// The eight 6-bit scales and minima of a Q4_K block's 12 scale bytes.
pub(crate) fn q4k_scales_mins(s: &[u8]) -> ([u8; 8], [u8; 8]) {
    let (mut sc, mut m) = ([0u8; 8], [0u8; 8]);
    for j in 0..4 {
        sc[j] = s[j] & 0x3f;
        m[j] = s[4 + j] & 0x3f;
        sc[4 + j] = (s[8 + j] & 0x0f) | ((s[j] >> 2) & 0x30);
        m[4 + j] = (s[8 + j] >> 4) | ((s[4 + j] >> 2) & 0x30);
    }
    (sc, m)
}

/// Imports a GGUF tensor of `ty` (exactly `ty.shape(n, k).1` bytes). NaN/Inf in `d`,
/// `m` or `dmin`: `NonFinite`.
pub fn decode(ty: GgufType, n: u64, k: u64, tensor: &[u8]) -> Result<ImportedMatrix<'static>> {
    let (shape, bytes) = ty.shape(n, k)?;
    if tensor.len() != bytes {
        return Err(Error::Internal(format!(
            "gguf::decode: {} bytes given, {bytes} expected",
            tensor.len()
        )));
    }
    let groups = shape.groups();
    let mut codes = CodeRows::new(&shape)?;
    let (bb, per_row) = (ty.block_bytes(), shape.k / ty.block_elements());
    let scale_type = ty.scale_type();
    let mut scales = alloc::filled::<u8>(shape.scale_count() * scale_type.size(), "scales")?;
    let mut offsets = if ty.has_offsets() {
        Some(alloc::filled::<f32>(shape.scale_count(), "offsets")?)
    } else {
        None
    };
    for (b, block) in tensor.chunks_exact(bb).enumerate() {
        let (row, in_row) = (b / per_row, b % per_row);
        let d = f16_at(block, 0);
        check_finite(d, "d", row, in_row)?;
        match ty {
            GgufType::Q4_0 | GgufType::Q4_1 => {
                let g = row * groups + in_row;
                scales[2 * g..2 * g + 2].copy_from_slice(&block[..2]);
                let qs = if ty == GgufType::Q4_1 {
                    let m = f16_at(block, 2);
                    check_finite(m, "m", row, in_row)?;
                    if let Some(o) = offsets.as_mut() {
                        o[g] = m.to_f32();
                    }
                    &block[4..20]
                } else {
                    &block[2..18]
                };
                let col = in_row * GROUP;
                for (j, &q) in qs.iter().enumerate() {
                    codes.set(row, col + j, q & 0x0f);
                    codes.set(row, col + j + 16, q >> 4);
                }
            }
            GgufType::Q4K => {
                let dmin = f16_at(block, 2);
                check_finite(dmin, "dmin", row, in_row)?;
                let (d, dmin) = (d.to_f32(), dmin.to_f32());
                let (sc, m) = q4k_scales_mins(&block[4..16]);
                let qs = &block[16..144];
                for sub in 0..8 {
                    let g = row * groups + in_row * 8 + sub;
                    scales[4 * g..4 * g + 4].copy_from_slice(&(d * sc[sub] as f32).to_le_bytes());
                    if let Some(o) = offsets.as_mut() {
                        o[g] = -(dmin * m[sub] as f32);
                    }
                    let (c, shift) = (sub / 2, 4 * (sub % 2));
                    let col = (in_row * 8 + sub) * GROUP;
                    for (e, &q) in qs[32 * c..32 * c + 32].iter().enumerate() {
                        codes.set(row, col + e, (q >> shift) & 0x0f);
                    }
                }
            }
        }
    }
    if let Some(o) = &offsets {
        check_offsets(o, groups)?;
    }
    let q4 = Q4Data {
        shape,
        weight: Cow::Owned(codes.bytes),
        scale_type,
        scales: Cow::Owned(scales),
        zeros: Cow::Owned(Vec::new()),
    };
    q4.validate()?;
    Ok(ImportedMatrix {
        q4,
        offsets,
        k_order: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q4k_scale_bytes_unpack_like_ggml() {
        // sc = 1..8 (sc[4..8] use the high bits), m = 63, 0, 33, 7, 40, 2, 61, 16.
        let sc = [1u8, 2, 3, 4, 53, 6, 47, 8];
        let m = [63u8, 0, 33, 7, 40, 2, 61, 16];
        let mut s = [0u8; 12];
        for j in 0..4 {
            s[j] = sc[j] | ((sc[4 + j] >> 4) << 6);
            s[4 + j] = m[j] | ((m[4 + j] >> 4) << 6);
            s[8 + j] = (sc[4 + j] & 0x0f) | ((m[4 + j] & 0x0f) << 4);
        }
        assert_eq!(q4k_scales_mins(&s), (sc, m));
    }

    #[test]
    fn refuses_partial_blocks_and_non_finite_d() {
        assert!(GgufType::Q4K.shape(2, 288).is_err());
        assert!(GgufType::Q4_0.shape(2, 48).is_err());
        let mut t = vec![0u8; 18];
        t[..2].copy_from_slice(&half::f16::NAN.to_le_bytes());
        assert!(matches!(
            decode(GgufType::Q4_0, 1, 32, &t),
            Err(Error::NonFinite(_))
        ));
    }
}
