//! Byte-matrix transposes for the column-run layouts: a block of up to 64 columns is built
//! row by row (`rows[b][j]`: byte b of column j's run) and written out column by column.
//! The AVX2 kernel transposes 16 × 32 bytes at a time with 4 rounds of unpacks; the
//! portable path moves one byte at a time. Both write the same bytes.

use crate::simd::Isa;

/// Columns of a run block (one CUTLASS tile is 64 wide).
pub(crate) const BLOCK: usize = 64;

/// For `j < width`: writes column j of `rows` (`rows[b][j]` for every b) to
/// `out[offset(j)..offset(j) + rows.len()]`, with the widest kernel this CPU has.
#[inline]
pub(crate) fn scatter_columns(
    rows: &[[u8; BLOCK]],
    width: usize,
    out: &mut [u8],
    offset: impl Fn(usize) -> usize,
) {
    scatter_columns_with(Isa::best(), rows, width, out, offset);
}

/// [`scatter_columns`] with the kernel for `isa`, which this CPU must support.
pub(crate) fn scatter_columns_with(
    isa: Isa,
    rows: &[[u8; BLOCK]],
    width: usize,
    out: &mut [u8],
    offset: impl Fn(usize) -> usize,
) {
    assert!(width <= BLOCK, "a run block is at most {BLOCK} columns");
    assert!(isa <= Isa::best(), "{isa:?} is not supported by this CPU");
    #[allow(unused_mut)] // assigned only on x86-64
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if isa >= Isa::Avx2 && rows.len().is_multiple_of(16) {
        // SAFETY: AVX2 is supported (asserted above); the kernel checks every destination.
        done = unsafe { x86::scatter_avx2(rows, width, out, &offset) };
    }
    for j in done..width {
        let run = &mut out[offset(j)..][..rows.len()];
        for (byte, row) in run.iter_mut().zip(rows) {
            *byte = row[j];
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::BLOCK;
    use std::arch::x86_64::*;

    /// Transposes 16 rows of 32 bytes per 128-bit lane pair: on return `t[c]` holds, in
    /// its low lane, bytes 0..16 of column c and, in its high lane, of column 16 + c.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn transpose_16x32(a: [__m256i; 16]) -> [__m256i; 16] {
        // Round 1: byte pairs of rows (2p, 2p+1); s1[2p] has columns 0..8, s1[2p+1] 8..16.
        let mut s1 = [_mm256_setzero_si256(); 16];
        for p in 0..8 {
            s1[2 * p] = _mm256_unpacklo_epi8(a[2 * p], a[2 * p + 1]);
            s1[2 * p + 1] = _mm256_unpackhi_epi8(a[2 * p], a[2 * p + 1]);
        }
        // Round 2: 4 rows per 32-bit element; s2[4q + m] has columns 4m..4m+4.
        let mut s2 = [_mm256_setzero_si256(); 16];
        for q in 0..4 {
            for h in 0..2 {
                let (x, y) = (s1[4 * q + h], s1[4 * q + 2 + h]);
                s2[4 * q + 2 * h] = _mm256_unpacklo_epi16(x, y);
                s2[4 * q + 2 * h + 1] = _mm256_unpackhi_epi16(x, y);
            }
        }
        // Round 3: 8 rows per 64-bit element; s3[8o + t] has columns 2t, 2t+1.
        let mut s3 = [_mm256_setzero_si256(); 16];
        for o in 0..2 {
            for m in 0..4 {
                let (x, y) = (s2[8 * o + m], s2[8 * o + 4 + m]);
                s3[8 * o + 2 * m] = _mm256_unpacklo_epi32(x, y);
                s3[8 * o + 2 * m + 1] = _mm256_unpackhi_epi32(x, y);
            }
        }
        // Round 4: all 16 rows; column 2t and 2t+1.
        let mut t = [_mm256_setzero_si256(); 16];
        for u in 0..8 {
            t[2 * u] = _mm256_unpacklo_epi64(s3[u], s3[8 + u]);
            t[2 * u + 1] = _mm256_unpackhi_epi64(s3[u], s3[8 + u]);
        }
        t
    }

    /// The AVX2 part of `scatter_columns_with`: whole groups of 32 columns (`rows.len()` a
    /// multiple of 16); returns how many columns were written.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn scatter_avx2(
        rows: &[[u8; BLOCK]],
        width: usize,
        out: &mut [u8],
        offset: &impl Fn(usize) -> usize,
    ) -> usize {
        // SAFETY: the caller guarantees what this function's doc requires: the CPU features it enables (detected at run time) and the bounds of every pointer it reads or writes.
        unsafe {
            let height = rows.len();
            let whole = width / 32 * 32;
            for j0 in (0..whole).step_by(32) {
                let mut at = [0usize; 32];
                for (c, at) in at.iter_mut().enumerate() {
                    *at = offset(j0 + c);
                    assert!(*at + height <= out.len(), "column run outside the output");
                }
                let base = out.as_mut_ptr();
                for b0 in (0..height).step_by(16) {
                    let mut a = [_mm256_setzero_si256(); 16];
                    for (i, a) in a.iter_mut().enumerate() {
                        *a = _mm256_loadu_si256(rows[b0 + i][j0..j0 + 32].as_ptr().cast());
                    }
                    let t = transpose_16x32(a);
                    for c in 0..16 {
                        // SAFETY: at[c] + height <= out.len() and b0 + 16 <= height.
                        _mm_storeu_si128(base.add(at[c] + b0).cast(), _mm256_castsi256_si128(t[c]));
                        _mm_storeu_si128(
                            base.add(at[16 + c] + b0).cast(),
                            _mm256_extracti128_si256::<1>(t[c]),
                        );
                    }
                }
            }
            whole
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kernel writes exactly `rows[b][j]` at `offset(j) + b`, for every width (all
    /// tails of the 32-column vector blocks) and run height, and nothing else.
    #[test]
    fn every_kernel_writes_each_column_run() {
        let mut state = 0x1234_5678_9abc_def1u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for isa in Isa::supported() {
            for height in [1, 16, 32, 48, 64] {
                for width in 0..=BLOCK {
                    let mut rows = vec![[0u8; BLOCK]; height];
                    for row in &mut rows {
                        row.iter_mut().for_each(|b| *b = next() as u8);
                    }
                    // Column runs in a shuffled order with a gap between neighbours.
                    let mut slots: Vec<usize> = (0..BLOCK).collect();
                    for i in (1..BLOCK).rev() {
                        slots.swap(i, next() as usize % (i + 1));
                    }
                    let stride = height + 3;
                    let offset = |j: usize| 5 + slots[j] * stride;
                    let mut out = vec![0xEEu8; 5 + BLOCK * stride];
                    let mut want = out.clone();
                    for j in 0..width {
                        for (b, row) in rows.iter().enumerate() {
                            want[offset(j) + b] = row[j];
                        }
                    }
                    scatter_columns_with(isa, &rows, width, &mut out, offset);
                    assert_eq!(out, want, "{isa:?} height {height} width {width}");
                }
            }
        }
    }
}
