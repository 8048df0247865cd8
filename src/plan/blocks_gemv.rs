//! The shapes of the GEMV on GGUF blocks (`shaders/gemv_blocks.comp`) as data: how its
//! invocations stride (whole pieces of 32 weights, or quarters of pieces) and how many rows
//! a workgroup takes, per class of block type ([`BlocksClass`]) and class of call (one pass
//! on a matrix of few rows or of many, or several passes).
//!
//! Why the classes differ: striding over whole pieces, each invocation loads its piece's
//! 32 activations as one run of 128 bytes, so every load instruction of a subgroup touches
//! as many cache lines as it has invocations; the rows of a workgroup share those loads.
//! Quarters make neighbouring invocations read neighbouring activations (one line per
//! eight invocations) but decode a piece's scales once per quarter: cheap for one scale per
//! block of 32, dear for the packed scales of the super-blocks. Many rows per workgroup
//! share the activations among more rows but leave a GPU idle on matrices of few rows.

use crate::import::gguf_blocks::BlockType;

/// One shape of the GEMV on GGUF blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlocksGemvShape {
    /// Rows per workgroup (a power of two, 1..32).
    pub rows: u32,
    /// Pieces per step of each invocation (1..4; capped per call by the held x; 1 with
    /// `word_lanes`).
    pub unroll: u32,
    /// Invocations stride over quarters of pieces instead of pieces (`BlocksKey::word_lanes`).
    pub word_lanes: bool,
}

impl std::fmt::Display for BlocksGemvShape {
    /// `2 rows, 2 pieces per step` or `2 rows, quarters` (logs and the bench).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.word_lanes {
            true => write!(f, "{} rows, quarters", self.rows),
            false => write!(f, "{} rows, {} pieces per step", self.rows, self.unroll),
        }
    }
}

impl BlocksGemvShape {
    /// Whole pieces, `rows` rows per workgroup, one piece per step.
    pub const fn pieces(rows: u32) -> BlocksGemvShape {
        BlocksGemvShape {
            rows,
            unroll: 1,
            word_lanes: false,
        }
    }

    /// Quarters of pieces, `rows` rows per workgroup.
    pub const fn quarters(rows: u32) -> BlocksGemvShape {
        BlocksGemvShape {
            rows,
            unroll: 1,
            word_lanes: true,
        }
    }

    /// Whether the GEMV on GGUF blocks takes this shape: rows a power of two up to 32,
    /// 1..4 pieces per step, one with quarters.
    pub fn runnable(&self) -> bool {
        self.rows.is_power_of_two()
            && self.rows <= 32
            && (1..=4).contains(&self.unroll)
            && (!self.word_lanes || self.unroll == 1)
    }
}

/// The classes of GGUF block types whose GEMV wants the same shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BlocksClass {
    /// Blocks of 32 integer codes with one scale (and offset) each: Q4_1, Q5_0, Q5_1, Q8_0.
    Runs,
    /// Codes that index a table of values: IQ4_NL, IQ4_XS, MXFP4, NVFP4 (their table in
    /// shared memory adds bank conflicts to every decode).
    LookedUp,
    /// Super-blocks of 256 with a 6-bit scale and minimum per sub-block of 32, packed in
    /// pairs (a piece's decode unpacks them): Q4_K, Q5_K.
    PackedScales,
    /// Super-blocks of 256 with a byte scale per 16 weights and each code's bits in two
    /// arrays (a quarter loads a word of each): Q6_K.
    ByteScales,
}

impl BlocksClass {
    /// The class of `ty`.
    pub fn of(ty: BlockType) -> BlocksClass {
        match ty {
            BlockType::Q4_1 | BlockType::Q5_0 | BlockType::Q5_1 | BlockType::Q8_0 => {
                BlocksClass::Runs
            }
            BlockType::Iq4Nl | BlockType::Iq4Xs | BlockType::Mxfp4 | BlockType::Nvfp4 => {
                BlocksClass::LookedUp
            }
            BlockType::Q4K | BlockType::Q5K => BlocksClass::PackedScales,
            BlockType::Q6K => BlocksClass::ByteScales,
        }
    }
}

/// The shapes of one class of block types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlocksGemvShapes {
    /// Calls of one pass (m up to 4) on matrices of fewer rows than
    /// [`BlocksGemvTable::many_rows_from`].
    pub few_rows: BlocksGemvShape,
    /// Calls of one pass on matrices of at least that many rows.
    pub many_rows: BlocksGemvShape,
    /// Calls of more activation rows than a pass of pieces holds (m > 4): quarters hold 8
    /// activation rows per pass, pieces 4.
    pub past_one_pass: BlocksGemvShape,
}

impl BlocksGemvShapes {
    /// The shape for a call of one pass on a matrix of `n` rows under `table`.
    pub fn one_pass(&self, table: &BlocksGemvTable, n: u64) -> BlocksGemvShape {
        match n >= table.many_rows_from {
            true => self.many_rows,
            false => self.few_rows,
        }
    }
}

/// A device row's shapes of the GEMV on GGUF blocks, per class of block type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlocksGemvTable {
    /// [`BlocksClass::Runs`].
    pub runs: BlocksGemvShapes,
    /// [`BlocksClass::LookedUp`].
    pub looked_up: BlocksGemvShapes,
    /// [`BlocksClass::PackedScales`].
    pub packed_scales: BlocksGemvShapes,
    /// [`BlocksClass::ByteScales`].
    pub byte_scales: BlocksGemvShapes,
    /// Matrices of at least this many rows take the classes' `many_rows` shapes.
    pub many_rows_from: u64,
}

impl BlocksGemvTable {
    /// The shapes of `class`.
    pub fn of(&self, class: BlocksClass) -> &BlocksGemvShapes {
        match class {
            BlocksClass::Runs => &self.runs,
            BlocksClass::LookedUp => &self.looked_up,
            BlocksClass::PackedScales => &self.packed_scales,
            BlocksClass::ByteScales => &self.byte_scales,
        }
    }

    /// The shape for a call of `m` activation rows on a matrix of `n` rows of `ty` blocks,
    /// where a pass over whole pieces holds `pieces_pass` activation rows: past one such
    /// pass the class's `past_one_pass`, else its one-pass shape by the matrix's height.
    pub fn shape(&self, ty: BlockType, n: u64, m: u32, pieces_pass: u32) -> BlocksGemvShape {
        let shapes = self.of(BlocksClass::of(ty));
        match m > pieces_pass {
            true => shapes.past_one_pass,
            false => shapes.one_pass(self, n),
        }
    }

    /// The shapes of `class`, to change.
    pub fn of_mut(&mut self, class: BlocksClass) -> &mut BlocksGemvShapes {
        match class {
            BlocksClass::Runs => &mut self.runs,
            BlocksClass::LookedUp => &mut self.looked_up,
            BlocksClass::PackedScales => &mut self.packed_scales,
            BlocksClass::ByteScales => &mut self.byte_scales,
        }
    }

    /// Every shape the table names.
    pub fn shapes(&self) -> impl Iterator<Item = BlocksGemvShape> + '_ {
        [
            &self.runs,
            &self.looked_up,
            &self.packed_scales,
            &self.byte_scales,
        ]
        .into_iter()
        .flat_map(|s| [s.few_rows, s.many_rows, s.past_one_pass])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_has_a_class_and_the_classes_split_as_documented() {
        let of = |class| {
            BlockType::ALL
                .into_iter()
                .filter(|&t| BlocksClass::of(t) == class)
                .map(BlockType::name)
                .collect::<Vec<_>>()
        };
        assert_eq!(of(BlocksClass::Runs), ["Q4_1", "Q5_0", "Q5_1", "Q8_0"]);
        assert_eq!(
            of(BlocksClass::LookedUp),
            ["IQ4_NL", "IQ4_XS", "MXFP4", "NVFP4"]
        );
        assert_eq!(of(BlocksClass::PackedScales), ["Q4_K", "Q5_K"]);
        assert_eq!(of(BlocksClass::ByteScales), ["Q6_K"]);
        // The looked-up class is the types whose kernels fill the shared table.
        for t in BlockType::ALL {
            assert_eq!(BlocksClass::of(t) == BlocksClass::LookedUp, t.looked_up());
        }
    }

    #[test]
    fn the_height_picks_the_shape_at_the_table_threshold() {
        let shapes = BlocksGemvShapes {
            few_rows: BlocksGemvShape::quarters(2),
            many_rows: BlocksGemvShape::pieces(8),
            past_one_pass: BlocksGemvShape::quarters(4),
        };
        let table = BlocksGemvTable {
            runs: shapes,
            looked_up: shapes,
            packed_scales: shapes,
            byte_scales: shapes,
            many_rows_from: 8192,
        };
        assert_eq!(shapes.one_pass(&table, 8191), shapes.few_rows);
        assert_eq!(shapes.one_pass(&table, 8192), shapes.many_rows);
        assert_eq!(table.shapes().count(), 12);
    }
}
