//! The f32 weights `[n][k]` of an imported (or any Q4) matrix, in the order of the
//! inputs: `w = scale·(u − zero)` or `w = scale·u + offset`, in f32. Both products are
//! exact for the scales the formats store (an f16 or Q4_K's `d·sc` times an integer of at
//! most 4 bits), so the one rounding is the final one, as in gguf-py, AutoGPTQ,
//! GPTQModel and AutoAWQ.

use super::canonical::ImportedMatrix;
use crate::error::{Error, Result};

/// Writes the weights of `m` to `out` (exactly `n·k` values, row-major `[n][k]`).
pub fn dequantize(m: &ImportedMatrix, out: &mut [f32]) -> Result<()> {
    let q4 = &m.q4;
    let (n, k, gs, groups) = (
        q4.shape.n,
        q4.shape.k,
        q4.shape.group_size,
        q4.shape.groups(),
    );
    if out.len() != n * k {
        return Err(Error::Internal(format!(
            "dequantize: {} outputs given, {} expected",
            out.len(),
            n * k
        )));
    }
    for (row, dst) in out.chunks_exact_mut(k).enumerate() {
        for col in 0..k {
            let g = row * groups + col / gs;
            let u = q4.code(row, col) as f32;
            let s = q4.scale(g);
            let w = match &m.offsets {
                Some(offsets) => s * u + offsets[g],
                None => (u - q4.zero(g) as f32) * s,
            };
            let i = m.k_order.as_ref().map_or(col, |p| p[col] as usize);
            dst[i] = w;
        }
    }
    Ok(())
}
