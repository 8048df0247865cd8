//! q4vk's canonical form of an imported 4-bit matrix: a [`Q4Data`] (codes `u` 0..15 in
//! `[n][k]` order, one scale per group, zero points when the format has them) plus what
//! the Q4 form alone cannot say: a per-group f32 offset (`w = scale·u + offset`, GGUF
//! Q4_1 and Q4_K) and a permutation of K that makes GPTQ act-order groups contiguous.

use crate::alloc;
use crate::error::{invalid, Error, Result};
use crate::quant::q4::{Q4Data, Q4Shape};

/// What the device needs of an imported matrix: its Q4 data, per-group offsets and column
/// order ([`ImportedMatrix::device_parts`]).
pub type DeviceParts<'m, 'a> = (&'m Q4Data<'a>, Option<&'m [f32]>, Option<&'m [u32]>);

/// An imported matrix. Column `j` of `q4` is input feature `k_order[j]` (or `j` without a
/// permutation), and belongs to group `j / group_size` of its row.
#[derive(Debug, Clone)]
pub struct ImportedMatrix<'a> {
    /// Codes, scales and (for `w = scale·(u − zero)` formats) zero points; symmetric
    /// formats use zero point 8 (`zero_points` false).
    pub q4: Q4Data<'a>,
    /// `[n][groups]` offsets of formats that store a float minimum: `w = scale·u + offset`
    /// (then `q4.shape.zero_points` is false and the implicit zero point 8 is unused).
    pub offsets: Option<Vec<f32>>,
    /// The input feature of each column (`k` entries, a permutation of `0..k`), when the
    /// checkpoint's groups are not runs of consecutive inputs (GPTQ act-order).
    pub k_order: Option<Vec<u32>>,
}

impl<'a> ImportedMatrix<'a> {
    /// A plain Q4 matrix: no offsets, inputs in order.
    pub fn plain(q4: Q4Data<'a>) -> ImportedMatrix<'a> {
        ImportedMatrix {
            q4,
            offsets: None,
            k_order: None,
        }
    }

    /// The Q4 data, the per-group offsets and the column order, when q4vk's device layouts
    /// and GEMV kernels represent this matrix exactly: zero points, symmetric codes or
    /// offsets, and a group size the kernels index (32, 64, 128, 256 or one per row).
    /// Otherwise `Unsupported`, naming what the device side lacks.
    pub fn device_parts(&self) -> Result<DeviceParts<'_, 'a>> {
        check_device_groups(&self.q4.shape)?;
        Ok((&self.q4, self.offsets.as_deref(), self.k_order.as_deref()))
    }
}

/// `Unsupported` unless the device layouts index the groups of `shape`: 32, 64, 128 or
/// 256 inputs, or one per row.
pub fn check_device_groups(shape: &Q4Shape) -> Result<()> {
    if !shape.per_channel && !matches!(shape.group_size, 32 | 64 | 128 | 256) {
        return Err(Error::Unsupported(format!(
            "group size {}: the device layout takes groups of 32, 64, 128 or 256 inputs, or one per row",
            shape.group_size
        )));
    }
    Ok(())
}

/// Validates `n` and `k` (at least 1; the f32 weights, `n·k·4` bytes, fit this platform's
/// size_t) and returns them as usize.
pub fn dims(n: u64, k: u64) -> Result<(usize, usize)> {
    if n == 0 || k == 0 {
        return Err(invalid!(
            "desc->n and desc->k must be at least 1 (n = {n}, k = {k})"
        ));
    }
    let too_big = || invalid!("desc->n * desc->k = {n} * {k} overflows this platform's size_t");
    let n = usize::try_from(n).map_err(|_| too_big())?;
    let k = usize::try_from(k).map_err(|_| too_big())?;
    n.checked_mul(k)
        .and_then(|e| e.checked_mul(4))
        .ok_or_else(too_big)?;
    Ok((n, k))
}

/// Packed codes of a Q4 matrix under construction: `[n][ceil(k/2)]`, column even in the
/// low nibble.
pub struct CodeRows {
    row_bytes: usize,
    /// The packed bytes.
    pub bytes: Vec<u8>,
}

impl CodeRows {
    /// All-zero codes for `shape`.
    pub fn new(shape: &Q4Shape) -> Result<CodeRows> {
        Ok(CodeRows {
            row_bytes: shape.row_bytes(),
            bytes: alloc::filled::<u8>(shape.weight_bytes(), "imported codes")?,
        })
    }

    /// Sets the code (0..15) of `(row, col)`; each code is set once.
    #[inline]
    pub fn set(&mut self, row: usize, col: usize, code: u8) {
        self.bytes[row * self.row_bytes + col / 2] |= (code & 0x0f) << (4 * (col % 2));
    }
}

/// Checks that every offset is finite.
pub fn check_offsets(offsets: &[f32], groups: usize) -> Result<()> {
    match offsets.iter().position(|o| !o.is_finite()) {
        None => Ok(()),
        Some(i) => Err(Error::NonFinite(format!(
            "the minimum of row {}, group {} is not finite",
            i / groups,
            i % groups
        ))),
    }
}
