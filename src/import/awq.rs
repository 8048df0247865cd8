//! AutoAWQ checkpoints of the GEMM version: `qweight` int32 `[k][n/8]` and `qzeros` int32
//! `[k/group_size][n/8]`, both packed along the outputs in AWQ's order — nibble `j` of word
//! `[r][c]` is output `8c + [0, 2, 4, 6, 1, 3, 5, 7][j]` — zero points stored as they are;
//! `scales` `[k/group_size][n]` (f16; bf16 and f32 accepted); no `g_idx`. The group size
//! divides k (-1: one group per row); `w = scale·(q − zero)`.

use super::canonical::{CodeRows, ImportedMatrix};
use super::gptq::{transpose_scales, word, PackedShape};
use crate::alloc;
use crate::error::{invalid, Error, Result};
use crate::quant::q4::Q4Data;
use crate::size;
use std::borrow::Cow;

/// Output column (within its 8) of nibble `j` of a packed word.
const ORDER: [usize; 8] = [0, 2, 4, 6, 1, 3, 5, 7];

/// Validates that the group size divides k (AWQ has no partial groups) and returns the
/// bytes of `qweight` (`[k][n/8]` int32).
pub fn qweight_bytes(shape: &PackedShape) -> Result<usize> {
    let s = &shape.q4;
    if !s.k.is_multiple_of(s.group_size) {
        return Err(invalid!(
            "desc->group_size is {}; AWQ groups divide k = {} exactly",
            s.group_size,
            s.k
        ));
    }
    size::product("the bytes of qweight (k * n / 2)", &[s.k, s.n / 2])
}

/// The tensors of an AWQ layer, each exactly its size.
#[derive(Debug, Clone, Copy)]
pub struct AwqTensors<'a> {
    /// `qweight`.
    pub qweight: &'a [u8],
    /// `scales`.
    pub scales: &'a [u8],
    /// `qzeros`.
    pub qzeros: &'a [u8],
}

/// Imports an AWQ layer of `shape` whose tensors have exactly the sizes the shape implies.
pub fn decode(shape: &PackedShape, t: AwqTensors) -> Result<ImportedMatrix<'static>> {
    let s = shape.q4;
    let (n, k, groups, words) = (s.n, s.k, s.groups(), s.n / 8);
    let sizes = [
        (t.qweight.len(), qweight_bytes(shape)?),
        (t.scales.len(), shape.scales_bytes()?),
        (t.qzeros.len(), shape.qzeros_bytes()),
    ];
    if sizes.iter().any(|&(given, want)| given != want) {
        return Err(Error::Internal(
            "awq::decode: tensor sizes do not match the shape".into(),
        ));
    }
    let mut codes = CodeRows::new(&s)?;
    for i in 0..k {
        for c in 0..words {
            let w = word(t.qweight, i * words + c);
            for (j, &p) in ORDER.iter().enumerate() {
                codes.set(8 * c + p, i, (w >> (4 * j)) as u8 & 0x0f);
            }
        }
    }
    let mut zeros = alloc::filled::<u8>(n * groups, "zero points")?;
    for g in 0..groups {
        for c in 0..words {
            let w = word(t.qzeros, g * words + c);
            for (j, &p) in ORDER.iter().enumerate() {
                zeros[(8 * c + p) * groups + g] = (w >> (4 * j)) as u8 & 0x0f;
            }
        }
    }
    let (scale_type, scales) = transpose_scales(shape, t.scales)?;
    let q4 = Q4Data {
        shape: s,
        weight: Cow::Owned(codes.bytes),
        scale_type,
        scales: Cow::Owned(scales),
        zeros: Cow::Owned(zeros),
    };
    q4.validate()?;
    Ok(ImportedMatrix::plain(q4))
}
