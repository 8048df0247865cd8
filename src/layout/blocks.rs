//! GGUF blocks on the device in their native bytes (`shaders/gemv_blocks.comp`): the bytes
//! of each block regrouped into three streams, each `[rows][blocks per row]` of one field
//! group, so a kernel reads codes as aligned 16-byte words and scales as 32-bit words.
//! Nothing is added or converted: a matrix takes the file's bytes (plus at most 3 bytes of
//! padding per stream and part).
//!
//! * codes: the block's code bytes, a multiple of 16 (Q5_K: `qh` then `qs`; Q6_K: `ql`,
//!   `qh` and the sixteen 8-bit scales);
//! * scales: the block's scale fields (f16 `d`, `m`, `dmin`, packed six-bit scales, E8M0 or
//!   UE4M3 bytes), as stored;
//! * high bits: Q5_0's and Q5_1's 32-bit `qh` (other types have none).

use crate::import::gguf_blocks::BlockType;
use std::ops::Range;

/// One stream of a block-type matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// The code bytes (binding 0).
    Codes,
    /// The scale fields (binding 1).
    Scales,
    /// Q5_0's and Q5_1's fifth bits (binding 2).
    HighBits,
}

impl Stream {
    /// The streams in binding order.
    pub const ALL: [Stream; 3] = [Stream::Codes, Stream::Scales, Stream::HighBits];
}

/// The block's bytes that go to `stream` (offsets into one block as the file stores it;
/// empty where the type has no such stream).
fn field(ty: BlockType, stream: Stream) -> Range<usize> {
    use BlockType as T;
    match (ty, stream) {
        (T::Q4_1, Stream::Codes) => 4..20,
        (T::Q4_1, Stream::Scales) => 0..4,
        (T::Q5_0, Stream::Codes) => 6..22,
        (T::Q5_0, Stream::Scales) => 0..2,
        (T::Q5_0, Stream::HighBits) => 2..6,
        (T::Q5_1, Stream::Codes) => 8..24,
        (T::Q5_1, Stream::Scales) => 0..4,
        (T::Q5_1, Stream::HighBits) => 4..8,
        (T::Q8_0, Stream::Codes) => 2..34,
        (T::Q8_0, Stream::Scales) => 0..2,
        (T::Q4K, Stream::Codes) => 16..144,
        (T::Q4K, Stream::Scales) => 0..16,
        (T::Q5K, Stream::Codes) => 16..176,
        (T::Q5K, Stream::Scales) => 0..16,
        (T::Q6K, Stream::Codes) => 0..208,
        (T::Q6K, Stream::Scales) => 208..210,
        (T::Iq4Nl, Stream::Codes) => 2..18,
        (T::Iq4Nl, Stream::Scales) => 0..2,
        (T::Iq4Xs, Stream::Codes) => 8..136,
        (T::Iq4Xs, Stream::Scales) => 0..8,
        (T::Mxfp4, Stream::Codes) => 1..17,
        (T::Mxfp4, Stream::Scales) => 0..1,
        (T::Nvfp4, Stream::Codes) => 4..36,
        (T::Nvfp4, Stream::Scales) => 0..4,
        (_, Stream::HighBits) => 0..0,
    }
}

/// Bytes of one block in `stream`.
pub fn stream_block_bytes(ty: BlockType, stream: Stream) -> usize {
    field(ty, stream).len()
}

/// The device geometry of an `n` × `k` matrix of `ty`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlocksLayout {
    /// The block type.
    pub ty: BlockType,
    /// Blocks per row.
    pub blocks: usize,
}

impl BlocksLayout {
    /// The layout of rows of `k` inputs (a multiple of the block) of `ty`.
    pub fn new(ty: BlockType, k: usize) -> BlocksLayout {
        BlocksLayout {
            ty,
            blocks: k / ty.block_elements(),
        }
    }

    /// Bytes of `stream` for `rows` rows, padded to a multiple of 4 (0 where the type has no
    /// such stream).
    pub fn stream_bytes(&self, stream: Stream, rows: usize) -> usize {
        (rows * self.blocks * stream_block_bytes(self.ty, stream)).next_multiple_of(4)
    }

    /// Bytes of one row in its largest stream (the codes).
    pub fn row_bytes(&self) -> usize {
        self.blocks * stream_block_bytes(self.ty, Stream::Codes)
    }

    /// Bytes of the file's tensor of `rows` rows (what a GEMV reads).
    pub fn native_bytes(&self, rows: usize) -> u64 {
        rows as u64 * self.blocks as u64 * self.ty.block_bytes() as u64
    }

    /// Writes `stream` of rows `rows` of `tensor` (the file's bytes, whole rows from row 0)
    /// into `dst` (of [`BlocksLayout::stream_bytes`] for those rows; padding zeroed).
    pub fn pack(&self, tensor: &[u8], stream: Stream, rows: Range<usize>, dst: &mut [u8]) {
        let size = self.ty.block_bytes();
        let first = rows.start * self.blocks;
        let count = rows.len() * self.blocks;
        let range = field(self.ty, stream);
        let len = range.len();
        let blocks = tensor[first * size..(first + count) * size].chunks_exact(size);
        for (block, out) in blocks.zip(dst.chunks_exact_mut(len.max(1))) {
            out.copy_from_slice(&block[range.clone()]);
        }
        dst[count * len..].fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_streams_hold_every_byte_of_a_block_once() {
        for ty in BlockType::ALL {
            let mut seen = vec![0u8; ty.block_bytes()];
            for stream in Stream::ALL {
                seen[field(ty, stream)].iter_mut().for_each(|s| *s += 1);
            }
            assert!(seen.iter().all(|&s| s == 1), "{}", ty.name());
            assert_eq!(
                stream_block_bytes(ty, Stream::Codes) % 16,
                0,
                "{}",
                ty.name()
            );
        }
    }

    #[test]
    fn pack_regroups_the_fields_of_the_rows_asked() {
        let ty = BlockType::Q5_0;
        let layout = BlocksLayout::new(ty, 64);
        let tensor: Vec<u8> = (0..3 * 2 * 22).map(|i| i as u8).collect();
        let mut codes = vec![0xAA; layout.stream_bytes(Stream::Codes, 1)];
        layout.pack(&tensor, Stream::Codes, 1..2, &mut codes);
        // Row 1 = blocks 2 and 3: their bytes 6..22.
        let want: Vec<u8> = [2usize, 3]
            .iter()
            .flat_map(|b| tensor[b * 22 + 6..b * 22 + 22].to_vec())
            .collect();
        assert_eq!(codes, want);
        let mut scales = vec![0xAA; layout.stream_bytes(Stream::Scales, 3)];
        layout.pack(&tensor, Stream::Scales, 0..3, &mut scales);
        assert_eq!(scales.len(), 12);
        assert_eq!(&scales[..4], &[0, 1, 22, 23]);
    }
}
