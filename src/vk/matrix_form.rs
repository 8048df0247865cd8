//! What the kernel rules read of a matrix on the device, as plain data: its shape and
//! scheme, its scale and zero-point form, whether its columns are reordered, its layout
//! (SIMT, tensor-core, or GGUF blocks in their native bytes) and its split into parts. `vk::matrix::DeviceMatrix` holds one;
//! tools and tests build one for any matrix without Vulkan.

use crate::error::{Error, Result};
use crate::import::gguf_blocks::BlockType;
use crate::layout::blocks::{BlocksLayout, Stream};
use crate::layout::coop::{CoopLayout, TILE_ROWS};
use crate::layout::vk::VkLayout;
use crate::quant::q4::Q4Shape;
use std::ops::Range;

/// The form of a matrix on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatrixForm {
    /// Shape and scheme.
    pub shape: Q4Shape,
    /// Scales are f32 (else f16).
    pub scale_f32: bool,
    /// Per-group f32 offsets (`w = scale·u + offset`) take the zero points' place.
    pub offsets: bool,
    /// Columns are not in input order (GPTQ act-order): the kernels that read x gather it.
    pub column_order: bool,
    /// The SIMT layout's geometry.
    pub layout: VkLayout,
    /// The tensor-core layout, when the matrix is in it (then `layout` is unused).
    pub coop: Option<CoopLayout>,
    /// GGUF blocks in their native bytes (`layout::blocks`), when the matrix holds them:
    /// then `shape` has the block as its group and no zero points, `layout` gives the
    /// pieces of 32 inputs (`chunks`) and blocks (`groups`) per row, and the other fields
    /// are unused.
    pub blocks: Option<BlocksLayout>,
    /// Rows per part (the last part has the rows left).
    pub rows_per_part: usize,
}

impl MatrixForm {
    /// The form of a matrix of `shape` (with f32 scales where `scale_f32`, per-group
    /// `offsets`, a `column_order`), in the tensor-core layout where `coop` (never with a
    /// column order: the tensor-core kernels do not gather x), split into parts of at most
    /// `max_part_bytes` bytes of whole rows (SIMT) or tiles of 16 rows (tensor cores), with
    /// indices inside a part (row × chunks, 16-byte words of its tiles) within 32 bits.
    /// `Unsupported` where one row or tile exceeds `max_part_bytes`.
    pub fn new(
        shape: Q4Shape,
        scale_f32: bool,
        offsets: bool,
        column_order: bool,
        coop: bool,
        max_part_bytes: u64,
    ) -> Result<MatrixForm> {
        let layout = VkLayout::of(&shape);
        let coop = (coop && !column_order).then(|| CoopLayout::of(&shape));
        let (unit_rows, unit_bytes, unit_words) = match &coop {
            Some(c) => (TILE_ROWS, c.tile_bytes(), c.tile_bytes() / 16),
            None => (1, layout.row_bytes(), layout.chunks.max(1)),
        };
        let units_per_part = (max_part_bytes / unit_bytes as u64) as usize;
        if units_per_part == 0 {
            return Err(Error::Unsupported(format!(
                "{unit_rows} row(s) of k = {} need {unit_bytes} bytes, more than this device's largest storage buffer ({max_part_bytes} bytes)",
                shape.k,
            )));
        }
        Ok(MatrixForm {
            shape,
            scale_f32,
            offsets,
            column_order,
            layout,
            coop,
            blocks: None,
            rows_per_part: units_per_part.min(u32::MAX as usize / unit_words) * unit_rows,
        })
    }

    /// The form of an `n` × `k` matrix of GGUF blocks of `ty` (k a multiple of the block)
    /// kept in their native bytes, split into parts of at most `max_part_bytes` per buffer
    /// with 32-bit word indices. `InvalidArgument` where k is not a multiple of the block,
    /// `Unsupported` where one row exceeds `max_part_bytes`.
    pub fn of_blocks(ty: BlockType, n: usize, k: usize, max_part_bytes: u64) -> Result<MatrixForm> {
        ty.tensor_bytes(n as u64, k as u64)?;
        let shape = Q4Shape::new(n as u64, k as u64, ty.block_elements() as i32, 0)?;
        let blocks = BlocksLayout::new(ty, k);
        let row_bytes = blocks.row_bytes();
        let rows = (max_part_bytes / row_bytes as u64) as usize;
        if rows == 0 {
            return Err(Error::Unsupported(format!(
                "a row of {k} {} weights needs {row_bytes} bytes, more than this device's largest storage buffer ({max_part_bytes} bytes)",
                ty.name()
            )));
        }
        Ok(MatrixForm {
            shape,
            scale_f32: false,
            offsets: false,
            column_order: false,
            layout: VkLayout::of(&shape),
            coop: None,
            blocks: Some(blocks),
            rows_per_part: rows.min(u32::MAX as usize / (row_bytes / 16)),
        })
    }

    /// Buffers of each part: weights and scales, and zero points, offsets or a block
    /// type's fifth bits where the matrix has them.
    pub fn buffers_per_part(&self) -> usize {
        match &self.blocks {
            Some(b) => 2 + usize::from(b.stream_bytes(Stream::HighBits, 1) > 0),
            None => 2 + usize::from(self.offsets || self.shape.zero_points),
        }
    }

    /// The rows of each part, in order.
    pub fn parts(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        let (n, per) = (self.shape.n, self.rows_per_part);
        (0..n.div_ceil(per)).map(move |p| p * per..((p + 1) * per).min(n))
    }

    /// Device bytes of weights, scales, zero points or offsets and column order (what one
    /// GEMV reads).
    pub fn device_bytes(&self) -> u64 {
        let n = self.shape.n as u64;
        if let Some(b) = &self.blocks {
            return b.native_bytes(self.shape.n);
        }
        let order = match self.column_order {
            true => 4 * self.shape.k as u64,
            false => 0,
        };
        if let Some(c) = &self.coop {
            let tiles = n.div_ceil(TILE_ROWS as u64);
            let per_group = 4 + if self.offsets {
                4
            } else {
                self.shape.zero_points as usize
            };
            let tile = c.tile_bytes() + TILE_ROWS * c.groups * per_group;
            return tiles * tile as u64 + order;
        }
        let scale = if self.scale_f32 { 4 } else { 2 };
        let zeros = if self.offsets {
            4
        } else if self.shape.zero_points {
            1
        } else {
            0
        };
        n * (self.layout.row_bytes() as u64 + (scale + zeros) * self.layout.groups as u64) + order
    }
}
