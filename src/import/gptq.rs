//! GPTQ 4-bit checkpoint tensors (AutoGPTQ, GPTQModel, Transformers):
//!
//! * `qweight` int32 `[k/8][n]`: the code of input `i`, output `o` is nibble `i % 8`
//!   (lowest first) of word `[i/8][o]`, read unsigned;
//! * `qzeros` int32 `[groups][n/8]`: zero point of group `g`, output `o` is nibble `o % 8`
//!   of word `[g][o/8]`. Format v1 stores zero − 1; it is decoded per 32-bit word by adding
//!   `0x11111111` (mod 2^32) before taking nibbles, which also recovers zero point 0 that
//!   GPTQModel's v1 writer stores by borrowing from the next nibble. Format v2 stores it
//!   as is;
//! * `scales` `[groups][n]` (f16 in checkpoints; bf16 and f32 accepted);
//! * `g_idx` int32 `[k]` (optional): input `i` belongs to group `g_idx[i]`.
//!
//! `groups = ceil(k / group_size)` (1 per channel), and `w = scale·(q − zero)`. A `g_idx`
//! that is not `i / group_size` (act-order) must give each group exactly as many inputs as
//! consecutive groups would have; the import then orders K by group (stably), so groups
//! become contiguous, and keeps that order as `k_order`.

use super::canonical::{dims, CodeRows, ImportedMatrix};
use crate::alloc;
use crate::error::{invalid, Error, Result};
use crate::quant::dtype::Dtype;
use crate::quant::q4::{Q4Data, Q4Shape, ScaleType};
use crate::size;
use std::borrow::Cow;

/// How `qzeros` stores the zero points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GptqFormat {
    /// Zero point − 1 (AutoGPTQ, Transformers, GPTQModel's default `gptq` format).
    V1,
    /// The zero point itself (GPTQModel's `gptq_v2`).
    V2,
}

impl GptqFormat {
    /// Parses the C value (`desc->gptq_format`): 1 or 2.
    pub fn from_c(value: u32) -> Result<GptqFormat> {
        match value {
            1 => Ok(GptqFormat::V1),
            2 => Ok(GptqFormat::V2),
            _ => Err(invalid!(
                "desc->gptq_format is {value}; expected 1 (zeros stored minus one: AutoGPTQ, Transformers) \
                 or 2 (stored as is: GPTQModel's gptq_v2)"
            )),
        }
    }
}

/// Shape of a GPTQ (or AWQ) layer: the Q4 shape of the import and the scale dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackedShape {
    /// Shape of the imported matrix (zero points on).
    pub q4: Q4Shape,
    /// Element type of `scales`.
    pub scale_dtype: Dtype,
}

impl PackedShape {
    /// Validates `n` (a multiple of 8), `k` and `group_size` (-1 or at least 1) and the
    /// scale dtype.
    pub fn new(n: u64, k: u64, group_size: i32, scale_dtype: u32, what: &str) -> Result<Self> {
        let (n, k) = dims(n, k)?;
        if n % 8 != 0 {
            return Err(invalid!(
                "desc->n is {n}; {what} packs 8 outputs per int32 word, so n must be a multiple of 8"
            ));
        }
        if group_size != -1 && group_size < 1 {
            return Err(invalid!(
                "desc->group_size is {group_size}; expected -1 (one group per row) or the checkpoint's group size"
            ));
        }
        let per_channel = group_size == -1;
        Ok(PackedShape {
            q4: Q4Shape {
                n,
                k,
                group_size: if per_channel { k } else { group_size as usize },
                per_channel,
                zero_points: true,
            },
            scale_dtype: Dtype::from_c(scale_dtype, "desc->dtype")?,
        })
    }

    /// The stored scale type of the imported matrix: f16 kept, bf16 and f32 as f32.
    pub fn scale_type(&self) -> ScaleType {
        match self.scale_dtype {
            Dtype::F16 => ScaleType::F16,
            Dtype::Bf16 | Dtype::F32 => ScaleType::F32,
        }
    }

    /// Bytes of `scales` (`[groups][n]`).
    pub fn scales_bytes(&self) -> Result<usize> {
        size::product(
            "the bytes of scales (groups * n * dtype size)",
            &[self.q4.scale_count(), self.scale_dtype.size()],
        )
    }

    /// Bytes of `qzeros` (`[groups][n/8]` int32).
    pub fn qzeros_bytes(&self) -> usize {
        self.q4.groups() * self.q4.n / 2
    }
}

/// Bytes of GPTQ's `qweight` (`[k/8][n]` int32); `k` must be a multiple of 8.
pub fn qweight_bytes(shape: &PackedShape) -> Result<usize> {
    let k = shape.q4.k;
    if !k.is_multiple_of(8) {
        return Err(invalid!(
            "desc->k is {k}; GPTQ packs 8 inputs per int32 word, so k must be a multiple of 8"
        ));
    }
    size::product("the bytes of qweight (k / 2 * n)", &[k / 2, shape.q4.n])
}

/// The tensors of a GPTQ layer, each exactly its size.
#[derive(Debug, Clone, Copy)]
pub struct GptqTensors<'a> {
    /// `qweight`.
    pub qweight: &'a [u8],
    /// `scales`.
    pub scales: &'a [u8],
    /// `qzeros`.
    pub qzeros: &'a [u8],
    /// `g_idx` (`4·k` bytes), or None.
    pub g_idx: Option<&'a [u8]>,
}

/// Little-endian u32 word `i` of `bytes`.
#[inline]
pub fn word(bytes: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap())
}

/// Scales `[groups][n]` of `dtype` transposed to the Q4 form `[n][groups]` (f16 kept,
/// bf16 widened to f32 exactly, f32 kept).
pub fn transpose_scales(shape: &PackedShape, scales: &[u8]) -> Result<(ScaleType, Vec<u8>)> {
    let (n, groups) = (shape.q4.n, shape.q4.groups());
    let size = shape.scale_dtype.size();
    let scale_type = shape.scale_type();
    let out_size = scale_type.size();
    let mut out = alloc::filled::<u8>(n * groups * out_size, "scales")?;
    for g in 0..groups {
        for o in 0..n {
            let src = &scales[(g * n + o) * size..(g * n + o + 1) * size];
            let dst = &mut out[(o * groups + g) * out_size..(o * groups + g + 1) * out_size];
            match shape.scale_dtype {
                Dtype::Bf16 => dst.copy_from_slice(&[0, 0, src[0], src[1]]),
                _ => dst.copy_from_slice(src),
            }
        }
    }
    Ok((scale_type, out))
}

/// The column order that makes the groups of `g_idx` contiguous, or None when `g_idx`
/// already is `i / group_size`. Every entry must lie in `0..groups`, and each group must
/// hold exactly the inputs consecutive groups would.
pub fn k_order(shape: &Q4Shape, g_idx: &[u8]) -> Result<Option<Vec<u32>>> {
    let (k, gs, groups) = (shape.k, shape.group_size, shape.groups());
    let mut counts = alloc::filled::<usize>(groups, "group counts")?;
    let mut trivial = true;
    for i in 0..k {
        let g = word(g_idx, i) as i32;
        if g < 0 || g as usize >= groups {
            return Err(invalid!(
                "desc->g_idx[{i}] is {g}; with k = {k} and group size {gs} the groups are 0..{}",
                groups - 1
            ));
        }
        trivial &= g as usize == i / gs;
        counts[g as usize] += 1;
    }
    if trivial {
        return Ok(None);
    }
    for (g, &c) in counts.iter().enumerate() {
        let want = gs.min(k - g * gs);
        if c != want {
            return Err(invalid!(
                "desc->g_idx assigns {c} inputs to group {g}; with k = {k} and group size {gs} each group has {want}"
            ));
        }
    }
    let mut order = alloc::filled::<u32>(k, "the act-order permutation")?;
    let mut next: Vec<usize> = (0..groups).map(|g| g * gs).collect();
    for i in 0..k {
        let g = word(g_idx, i) as usize;
        order[next[g]] = i as u32;
        next[g] += 1;
    }
    Ok(Some(order))
}

/// Imports a GPTQ layer of `shape` whose tensors have exactly the sizes the shape implies.
pub fn decode(
    shape: &PackedShape,
    format: GptqFormat,
    t: GptqTensors,
) -> Result<ImportedMatrix<'static>> {
    let s = shape.q4;
    let (n, k, groups) = (s.n, s.k, s.groups());
    let sizes = [
        (t.qweight.len(), qweight_bytes(shape)?),
        (t.scales.len(), shape.scales_bytes()?),
        (t.qzeros.len(), shape.qzeros_bytes()),
        (t.g_idx.map_or(4 * k, <[u8]>::len), 4 * k),
    ];
    if sizes.iter().any(|&(given, want)| given != want) {
        return Err(Error::Internal(
            "gptq::decode: tensor sizes do not match the shape".into(),
        ));
    }
    let order = match t.g_idx {
        Some(g_idx) => k_order(&s, g_idx)?,
        None => None,
    };
    let mut codes = CodeRows::new(&s)?;
    for col in 0..k {
        let i = order.as_ref().map_or(col, |p| p[col] as usize);
        let shift = 4 * (i % 8);
        for o in 0..n {
            codes.set(
                o,
                col,
                (word(t.qweight, (i / 8) * n + o) >> shift) as u8 & 0x0f,
            );
        }
    }
    let mut zeros = alloc::filled::<u8>(n * groups, "zero points")?;
    for g in 0..groups {
        for c in 0..n / 8 {
            let mut w = word(t.qzeros, g * (n / 8) + c);
            if format == GptqFormat::V1 {
                w = w.wrapping_add(0x1111_1111);
            }
            for j in 0..8 {
                zeros[(8 * c + j) * groups + g] = (w >> (4 * j)) as u8 & 0x0f;
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
    Ok(ImportedMatrix {
        q4,
        offsets: None,
        k_order: order,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn le(words: &[i32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn act_order_groups_become_contiguous() {
        let shape = PackedShape::new(8, 8, 4, 1, "GPTQ").unwrap().q4;
        assert_eq!(
            k_order(&shape, &le(&[0, 0, 0, 0, 1, 1, 1, 1])).unwrap(),
            None
        );
        let order = k_order(&shape, &le(&[1, 0, 1, 0, 0, 1, 1, 0])).unwrap();
        assert_eq!(order, Some(vec![1, 3, 4, 7, 0, 2, 5, 6]));
        let e = k_order(&shape, &le(&[1, 0, 1, 0, 1, 1, 1, 0])).unwrap_err();
        assert!(e.to_string().contains("3 inputs to group 0"), "{e}");
        let e = k_order(&shape, &le(&[0, 0, 0, 0, 1, 1, 1, 2])).unwrap_err();
        assert!(e.to_string().contains("g_idx[7] is 2"), "{e}");
    }

    #[test]
    fn v1_zeros_decode_per_word() {
        // Zero points 0 and 15 alternating; GPTQModel's v1 writer subtracts 0x11111111.
        let v2 = 0xF0F0_F0F0u32;
        let v1 = v2.wrapping_sub(0x1111_1111);
        let shape = PackedShape::new(8, 8, -1, 1, "GPTQ").unwrap();
        let scales = half::f16::ONE.to_le_bytes().repeat(8);
        let zeros = |format, word: u32| {
            let t = GptqTensors {
                qweight: &[0; 32],
                scales: &scales,
                qzeros: &word.to_le_bytes(),
                g_idx: None,
            };
            decode(&shape, format, t).unwrap().q4.zeros.to_vec()
        };
        let want = vec![0, 15, 0, 15, 0, 15, 0, 15];
        assert_eq!(zeros(GptqFormat::V1, v1), want);
        assert_eq!(zeros(GptqFormat::V2, v2), want);
    }
}
