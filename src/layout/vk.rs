//! q4vk's GPU layout of a Q4 matrix, chosen for the GEMV kernel (`shaders/q4_common.glsl`):
//!
//! * weights: each row padded to a whole number of 16-byte chunks (`chunks = ceil(k/32)`),
//!   rows back to back, so invocation `t` of a workgroup reads chunk `t` of a row and
//!   neighbours read neighbouring 16 bytes; inside a chunk the Q4 byte order (k even in
//!   the low nibble). Padding bytes are 0 and meet zero activations in the kernel.
//! * scales: `[rows][groups]`, f16 packed two per 32-bit word (or f32), apart from the
//!   nibbles so a chunk's scale is one small cached load;
//! * zero points: `[rows][groups]` bytes packed four per word (absent when symmetric).
//!
//! Each buffer is padded to a multiple of 4 bytes.

use crate::quant::q4::{Q4Data, Q4Shape};
use std::ops::Range;

/// Geometry of the GPU layout of one matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VkLayout {
    /// 16-byte chunks per row.
    pub chunks: usize,
    /// Scale groups per row.
    pub groups: usize,
    /// log2(group size / 32), or 31 when one group spans the row.
    pub group_shift: u32,
}

impl VkLayout {
    /// The layout of a Q4 shape.
    pub fn of(shape: &Q4Shape) -> VkLayout {
        let group_shift = if shape.per_channel {
            31
        } else {
            (shape.group_size / 32).trailing_zeros()
        };
        VkLayout {
            chunks: shape.k.div_ceil(32),
            groups: shape.groups(),
            group_shift,
        }
    }

    /// Bytes per padded row.
    pub fn row_bytes(&self) -> usize {
        self.chunks * 16
    }

    /// Bytes of the packed weights of `rows` rows.
    pub fn weights_bytes(&self, rows: usize) -> usize {
        rows * self.row_bytes()
    }

    /// Bytes of the scales of `rows` rows stored as `scale_size`-byte values, padded to 4.
    pub fn scales_bytes(&self, scale_size: usize, rows: usize) -> usize {
        (rows * self.groups * scale_size).next_multiple_of(4)
    }

    /// Bytes of the zero points of `rows` rows, padded to 4 (0 when symmetric).
    pub fn zeros_bytes(&self, zero_points: bool, rows: usize) -> usize {
        if zero_points {
            (rows * self.groups).next_multiple_of(4)
        } else {
            0
        }
    }

    /// Writes the packed weights of `rows` into `out` (exactly
    /// [`weights_bytes`](Self::weights_bytes) long), padding included: every byte is written.
    pub fn pack_weights(&self, data: &Q4Data, rows: Range<usize>, out: &mut [u8]) {
        let src_row = data.shape.row_bytes();
        debug_assert_eq!(out.len(), self.weights_bytes(rows.len()));
        // Write-only (the destination may be write-combined mapped memory): the unused high
        // nibble of an odd row's last byte is masked on the way.
        let mask = if data.shape.k % 2 == 1 { 0x0f } else { 0xff };
        for (dst, row) in out.chunks_exact_mut(self.row_bytes()).zip(rows) {
            let src = &data.weight[row * src_row..(row + 1) * src_row];
            dst[..src_row - 1].copy_from_slice(&src[..src_row - 1]);
            dst[src_row - 1] = src[src_row - 1] & mask;
            dst[src_row..].fill(0);
        }
    }

    /// Writes the scales of `rows` in their stored type into `out` (exactly
    /// [`scales_bytes`](Self::scales_bytes) long), zero padding included.
    pub fn pack_scales(&self, data: &Q4Data, rows: Range<usize>, out: &mut [u8]) {
        let size = data.scale_type.size();
        let range = rows.start * self.groups * size..rows.end * self.groups * size;
        copy_padded(&data.scales[range], out);
    }

    /// Writes the zero points of `rows` into `out` (exactly
    /// [`zeros_bytes`](Self::zeros_bytes) long: empty when symmetric), zero padding included.
    pub fn pack_zeros(&self, data: &Q4Data, rows: Range<usize>, out: &mut [u8]) {
        if data.shape.zero_points {
            copy_padded(
                &data.zeros[rows.start * self.groups..rows.end * self.groups],
                out,
            );
        }
    }

    /// Writes the f32 offsets (`[n][groups]`, one per scale) of `rows` into `out`, exactly
    /// [`scales_bytes`](Self::scales_bytes)`(4, rows)` long.
    pub fn pack_offsets(&self, offsets: &[f32], rows: Range<usize>, out: &mut [u8]) {
        let values = &offsets[rows.start * self.groups..rows.end * self.groups];
        for (dst, v) in out.chunks_exact_mut(4).zip(values) {
            dst.copy_from_slice(&v.to_le_bytes());
        }
    }
}

/// Copies `src` to the start of `out` and zeroes the rest.
fn copy_padded(src: &[u8], out: &mut [u8]) {
    let (head, tail) = out.split_at_mut(src.len());
    head.copy_from_slice(src);
    tail.fill(0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::q4::ScaleType;
    use std::borrow::Cow;

    #[test]
    fn rows_are_padded_to_chunks() {
        let shape = Q4Shape::new(2, 33, 32, 1).unwrap();
        let l = VkLayout::of(&shape);
        assert_eq!((l.chunks, l.groups, l.group_shift), (2, 2, 0));
        let weight: Vec<u8> = (0..34).map(|i| i as u8 | 0xf0).collect();
        let data = Q4Data {
            shape,
            weight: Cow::Owned(weight),
            scale_type: ScaleType::F16,
            scales: Cow::Owned(vec![1; 8]),
            zeros: Cow::Owned(vec![3; 4]),
        };
        let mut w = vec![0xAAu8; l.weights_bytes(1)];
        l.pack_weights(&data, 1..2, &mut w);
        assert_eq!(w.len(), 32);
        assert_eq!(w[0], 17 | 0xf0);
        assert_eq!(w[16], 33 & 0x0f);
        assert!(w[17..].iter().all(|&b| b == 0));
        let mut z = vec![0xAAu8; l.zeros_bytes(true, 1)];
        l.pack_zeros(&data, 0..1, &mut z);
        assert_eq!(z, vec![3, 3, 0, 0]);
        let mut s = vec![0xAAu8; l.scales_bytes(2, 1)];
        l.pack_scales(&data, 0..1, &mut s);
        assert_eq!(s, vec![1, 1, 1, 1]);
        assert_eq!(
            VkLayout::of(&Q4Shape::new(1, 64, -1, 0).unwrap()).group_shift,
            31
        );
        assert_eq!(
            VkLayout::of(&Q4Shape::new(1, 64, 256, 0).unwrap()).group_shift,
            3
        );
    }
}
