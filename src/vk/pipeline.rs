//! The GEMV pipelines: descriptor set layouts (set 0: a matrix part, set 1: x and y), the
//! pipeline layout with its push-constant block, a pipeline cache, and the pipelines
//! themselves, created on first use per variant and specialization.

use super::device::Device;
use super::params::Epilogue;
use super::shaders;
use super::xy_sets::SET1_BINDINGS;
use crate::error::{Error, Result};
use crate::import::gguf_blocks::BlockType;
use crate::plan::tuning::SimtGemv;
use crate::plan::{CoopGemmTuning, FragmentShape, GemmTile};
use ash::vk;
use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

/// The push-constant block of `shaders/q4_common.glsl`, field for field.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Push {
    /// Rows in this part.
    pub rows: u32,
    /// Index in y of the part's first row.
    pub row_base: u32,
    /// 16-byte chunks per row.
    pub chunks: u32,
    /// Input features.
    pub k: u32,
    /// Scale groups per row.
    pub groups: u32,
    /// log2(group size / 32); 31 per channel.
    pub group_shift: u32,
    /// Elements between rows of x.
    pub x_stride: u32,
    /// Elements between rows of y.
    pub y_stride: u32,
    /// Workgroups in this dispatch.
    pub wg_count: u32,
    /// First workgroup of this dispatch within the part.
    pub wg_offset: u32,
}

impl Push {
    /// The block followed by `m` (the GEMM kernels' 11th word) and `word11` (the 12th: the
    /// SIMT GEMV's first activation row of its pass, or the word of the workspace where the
    /// tensor-core GEMM's K slices write their sums) as bytes for `vkCmdPushConstants`: the
    /// pipeline layout's whole range.
    pub fn bytes_with(&self, m: u32, word11: u32) -> [u8; 4 * PUSH_WORDS] {
        let mut words = [word11; PUSH_WORDS];
        words[..GEMM_PUSH_WORDS].copy_from_slice(&self.words_with_m(m));
        let mut out = [0u8; 4 * PUSH_WORDS];
        for (dst, w) in out.chunks_exact_mut(4).zip(words) {
            dst.copy_from_slice(&w.to_ne_bytes());
        }
        out
    }

    /// The block followed by `m`, as 32-bit words (the GEMM kernels' block).
    pub fn words_with_m(&self, m: u32) -> [u32; GEMM_PUSH_WORDS] {
        let mut out = [m; GEMM_PUSH_WORDS];
        out[..10].copy_from_slice(&self.words());
        out
    }

    /// The block as 32-bit words, in member order.
    pub fn words(&self) -> [u32; 10] {
        [
            self.rows,
            self.row_base,
            self.chunks,
            self.k,
            self.groups,
            self.group_shift,
            self.x_stride,
            self.y_stride,
            self.wg_count,
            self.wg_offset,
        ]
    }
}

/// Workgroup shape of a context's GEMV kernels (specialization constants 0, 1, 6, 7, 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuning {
    /// Invocations per workgroup (a power of two, a multiple of the subgroup size).
    pub workgroup: u32,
    /// Rows per workgroup.
    pub rows: u32,
    /// 16-byte chunks (words, with `word_lanes`) per row each invocation loads per step
    /// (independent loads in flight).
    pub unroll: u32,
    /// Invocations sharing each chunk (and its x), each taking `rows / split` of the rows;
    /// divides `rows` and is at most `min_workgroup`.
    pub split: u32,
    /// Subgroup size the shared reduction array is sized for.
    pub subgroup: u32,
    /// Smallest workgroup a matrix with few chunks per row gets (a power of two, at least
    /// the device's subgroup size).
    pub min_workgroup: u32,
    /// The GEMV's invocations step over words of codes (8 weights, 4 per chunk) instead of
    /// chunks, so that a subgroup's x (or digits) loads are contiguous (the exported and
    /// portable kernels step over chunks).
    pub word_lanes: bool,
}

impl Tuning {
    /// The shape of a variant on a device: the portable kernels' workgroup of 64 and 4 rows;
    /// the subgroup kernels' from the device's tuning row (`row`), its workgroup at least the
    /// subgroup size. `min_subgroup_size` sizes the per-subgroup reduction slots.
    pub fn for_device(
        portable: bool,
        row: &SimtGemv,
        subgroup_size: u32,
        min_subgroup_size: u32,
    ) -> Tuning {
        if portable {
            Tuning {
                workgroup: 64,
                rows: 4,
                unroll: 1,
                split: 1,
                subgroup: 1,
                min_workgroup: 32,
                word_lanes: false,
            }
        } else {
            Tuning {
                workgroup: row.workgroup.max(subgroup_size),
                rows: row.rows,
                unroll: row.unroll,
                split: row.split,
                subgroup: min_subgroup_size,
                min_workgroup: 32.max(subgroup_size),
                word_lanes: row.word_lanes,
            }
        }
    }

    /// Bytes of the kernel's shared reduction array for `m` activation rows: one float
    /// per (invocation or subgroup, row, activation row).
    pub fn shared_bytes(&self, portable: bool, m: u32) -> u32 {
        let slots = if portable {
            self.workgroup
        } else {
            self.workgroup / self.subgroup
        };
        4 * slots * self.rows * m
    }

    /// Workgroup size for rows of `steps` steps of an invocation (16-byte chunks, or words
    /// with word lanes): `workgroup`, or less when a row has fewer steps than that (so no
    /// invocation idles), never below `min_workgroup`.
    pub fn workgroup_for(&self, steps: usize) -> u32 {
        let fit = (steps.max(1) as u64)
            .next_power_of_two()
            .min(u32::MAX as u64) as u32;
        self.workgroup.min(fit.max(self.min_workgroup))
    }
}

/// A specialization constant of the SIMT kernel (`shaders/gemv_q4.comp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spec {
    /// Invocations per workgroup.
    Workgroup,
    /// Rows per workgroup.
    Rows,
    /// Activation rows.
    M,
    /// Per-group zero points.
    HasZeros,
    /// f32 scales.
    ScaleF32,
    /// f16 activations.
    XF16,
    /// The subgroup size the reduction is sized for.
    SubgroupSize,
    /// Chunks per row per step.
    Unroll,
    /// Invocations sharing a chunk.
    Split,
    /// Per-group f32 offsets.
    HasOffsets,
    /// Columns gathered from inputs out of order (binding 3).
    HasKOrder,
    /// Each word decoded once for all activation rows (not in the exported builds).
    DecodeOnce,
    /// Invocations step over words of codes instead of chunks (not in the exported builds).
    WordLanes,
    /// The integer dot-product kernel on x rounded to one byte per element (its build only).
    XBytes,
}

/// The one table of the SIMT kernel's specialization ids: (constant, id in q4vk's own
/// build (`local_size_x_id` 0, then `SPEC_*` of `shaders/gemv_q4.comp`), id in the exported
/// build and id in the extended exported build (`shaders/gemv_export.glsl`: ncnn wants the
/// kernel's own ids contiguous from 0, with the subgroup size last as the portable variant
/// lacks it); `None`: not in that build).
pub const SPECS: [(Spec, u32, Option<u32>, Option<u32>); 14] = [
    (Spec::Workgroup, 0, Some(5), Some(5)),
    (Spec::Rows, 1, Some(0), Some(0)),
    (Spec::M, 2, Some(1), Some(1)),
    (Spec::HasZeros, 3, Some(2), Some(2)),
    (Spec::ScaleF32, 4, Some(3), Some(3)),
    (Spec::XF16, 5, Some(4), Some(4)),
    (Spec::SubgroupSize, 6, Some(8), Some(10)),
    (Spec::Unroll, 7, Some(6), Some(6)),
    (Spec::Split, 8, Some(7), Some(7)),
    (Spec::HasOffsets, 9, None, Some(8)),
    (Spec::HasKOrder, 10, None, Some(9)),
    (Spec::DecodeOnce, 11, None, None),
    (Spec::WordLanes, 12, None, None),
    (Spec::XBytes, 13, None, None),
];

/// Which GEMV pipeline: kernel variant plus the per-call specialization.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PipelineKey {
    /// Shared-memory reduction only.
    pub portable: bool,
    /// Invocations per workgroup ([`Tuning::workgroup_for`]).
    pub workgroup: u32,
    /// Rows per workgroup ([`Tuning::rows`]).
    pub rows: u32,
    /// Chunks per row each invocation loads per step ([`Tuning::unroll`]).
    pub unroll: u32,
    /// Invocations sharing each chunk ([`Tuning::split`]).
    pub split: u32,
    /// Activation rows (1..=8).
    pub m: u32,
    /// Per-group zero points.
    pub zeros: bool,
    /// f32 scales.
    pub scale_f32: bool,
    /// f16 activations.
    pub x_f16: bool,
    /// Per-group f32 offsets instead of zero points.
    pub offsets: bool,
    /// x gathered through the matrix's column-to-input order.
    pub k_order: bool,
    /// x in 8-bit digits, packed integer dot products (`vk::int_dot`; subgroup kernels).
    pub dot: bool,
    /// With `dot`: x rounded to one signed byte per element and a scale per chunk
    /// (`Q4VK_GEMV_ROUND_X_TO_INT8`), instead of three exact digits.
    pub x_bytes: bool,
    /// f32 kernel, m ≥ 2: each word of codes decoded once for all activation rows, x read
    /// a word at a time (else decoded per activation row, a chunk's x loaded at once).
    pub decode_once: bool,
    /// Invocations step over words of codes (8 weights) instead of 16-byte chunks, so that
    /// a subgroup's x (or digits) loads are contiguous ([`Tuning::word_lanes`]).
    pub word_lanes: bool,
    /// A gate+up pair (subgroup kernels): gate's part in set 0 and up's, of the same form,
    /// in set 2; one dispatch writes gate's output (the epilogue's gate binding) and y =
    /// act(gate) · up (`vk::multi`).
    pub pair: bool,
}

/// Which tensor-core GEMV pipeline (`shaders/gemv_q4_coop.comp`, specialization
/// constants 0..6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CoopKey {
    /// Row tiles of 16 rows per subgroup (1..4).
    pub tiles: u32,
    /// Subgroups of 32 per workgroup, splitting K.
    pub subgroups: u32,
    /// Activation rows (1..=8).
    pub m: u32,
    /// Per-group zero points.
    pub zeros: bool,
    /// f16 activations.
    pub x_f16: bool,
    /// k per block (32, 64 or 128).
    pub block: u32,
    /// Per-group f32 offsets instead of zero points.
    pub offsets: bool,
}

impl CoopKey {
    /// The specialization constants of `shaders/gemv_q4_coop.comp` by id (0..6).
    fn spec_values(&self) -> [u32; 7] {
        [
            32 * self.subgroups,
            self.tiles,
            self.m,
            self.zeros as u32,
            self.x_f16 as u32,
            self.block,
            self.offsets as u32,
        ]
    }

    /// Bytes of the kernel's shared memory ([`coop_shared_bytes`]).
    pub fn shared_bytes(&self) -> u32 {
        coop_shared_bytes(self.tiles, self.subgroups, self.m, self.block)
    }
}

/// Which SIMT GEMM pipeline (`shaders/gemm_q4.comp`, m > 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GemmKey {
    /// The tile: for q4vk's calls the context's fixed one or the device row's
    /// (`plan::DeviceTuning::simt_gemm_tiles`), which `vk::gemv_plan` replaces by
    /// [`crate::plan::GEMM_TILE`] where it does not fit or gives too few workgroups;
    /// [`crate::plan::GEMM_TILE`] grown along tokens for the export.
    pub tile: GemmTile,
    /// Per-group zero points.
    pub zeros: bool,
    /// f32 scales.
    pub scale_f32: bool,
    /// f16 activations.
    pub x_f16: bool,
    /// Per-group f32 offsets instead of zero points.
    pub offsets: bool,
    /// x gathered through the matrix's column-to-input order.
    pub k_order: bool,
    /// K groups: groups of the tile's invocations in one workgroup that take interleaved
    /// 32-k chunks of the same tile (1 for the export; q4vk's build only).
    pub ksplit: u32,
}

impl GemmKey {
    /// The specialization constants of q4vk's own build (ids 0..9): [`Self::spec_values`]
    /// for the whole workgroup (the tile's invocations per K group), then the K groups.
    pub fn own_spec_values(&self) -> [u32; 10] {
        let mut v = [self.ksplit; 10];
        v[..9].copy_from_slice(&self.spec_values(self.tile.invocations() * self.ksplit));
        v
    }

    /// The specialization constants of `shaders/gemm_q4.comp` by id (0..8), with
    /// `workgroup` invocations of the tile's rows and tokens per invocation: the exported
    /// builds' (the v0 export has ids 0..6 only); q4vk's own adds id 9
    /// ([`Self::own_spec_values`]).
    pub fn spec_values(&self, workgroup: u32) -> [u32; 9] {
        let t = self.tile;
        [
            workgroup,
            t.tx,
            t.rn,
            t.rm,
            self.zeros as u32,
            self.scale_f32 as u32,
            self.x_f16 as u32,
            self.offsets as u32,
            self.k_order as u32,
        ]
    }
}

/// Invocations per workgroup of the digits pre-pass (`shaders/x_digits.comp`), four per
/// chunk of 32 columns: Vulkan's guaranteed minimum of `maxComputeWorkGroupInvocations`.
pub const DIGITS_WORKGROUP: u32 = 128;

/// Which pipeline of the digits pre-pass (`shaders/x_digits.comp`), which writes x in
/// 8-bit digits for the integer dot-product GEMV (`vk::int_dot`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DigitsKey {
    /// f16 activations.
    pub x_f16: bool,
    /// x gathered through the matrix's column-to-input order.
    pub k_order: bool,
    /// x rounded to one signed byte per element and a scale per chunk
    /// (`Q4VK_GEMV_ROUND_X_TO_INT8`), instead of three exact digits.
    pub bytes: bool,
    /// Each code word's columns in input order (the GEMV on GGUF blocks) instead of its
    /// even columns, then its odd ones (the Q4 layout's nibble order).
    pub natural: bool,
}

impl DigitsKey {
    /// The specialization constants by id (0..5).
    fn spec_values(&self) -> [u32; 5] {
        [
            DIGITS_WORKGROUP,
            self.x_f16 as u32,
            self.k_order as u32,
            self.bytes as u32,
            self.natural as u32,
        ]
    }
}

/// Invocations per workgroup of the tensor-core GEMM's fragments pre-pass
/// (`shaders/x_fragments.comp`), four columns each.
pub const FRAGMENTS_WORKGROUP: u32 = 128;

/// Which pipeline of the tensor-core GEMM's fragments pre-pass (`shaders/x_fragments.comp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FragmentsKey {
    /// f16 activations (copied; f32 ones are split or rounded per block).
    pub x_f16: bool,
    /// k per block (32, 64 or 128): the blocks whose factors and sums it writes.
    pub block: u32,
    /// B columns per token: 2 for f32 x as its two exact f16 parts, 1 for f16 x and f32 x
    /// rounded to f16.
    pub parts: u32,
}

impl FragmentsKey {
    /// The specialization constants by id (0..3).
    fn spec_values(&self) -> [u32; 4] {
        [
            FRAGMENTS_WORKGROUP,
            self.x_f16 as u32,
            self.block,
            self.parts,
        ]
    }
}

/// Invocations per workgroup of the kernel that adds the tensor-core GEMM's K slices
/// (`shaders/gemm_slices.comp`), one per row and token.
pub const SLICES_WORKGROUP: u32 = 256;

/// Which pipeline adds the tensor-core GEMM's K slices into y (`shaders/gemm_slices.comp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SlicesKey {
    /// K slices the GEMM ran in (2 or more).
    pub slices: u32,
}

impl SlicesKey {
    /// The specialization constants by id (0..2).
    fn spec_values(&self) -> [u32; 2] {
        [SLICES_WORKGROUP, self.slices]
    }
}

/// Which pipeline of the tensor-core GEMM on the SIMT layout
/// (`shaders/gemm_q4_coop_tiles.comp`, `vk::coop_tiles`; specialization constants 0..11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TilesKey {
    /// The workgroup's fragments and tiles.
    pub tiles: FragmentTiles,
    /// Per-group zero points.
    pub zeros: bool,
    /// f32 scales.
    pub scale_f32: bool,
    /// Per-group f32 offsets instead of zero points.
    pub offsets: bool,
    /// x gathered through the matrix's column-to-input order.
    pub k_order: bool,
    /// k per block: a multiple of 32 and of `shape.k` dividing the group size.
    pub block: u32,
}

/// The fragments and tiles of a workgroup of the tensor-core GEMMs through shared memory
/// (`vk::coop_tiles`: on the SIMT layout and on GGUF blocks); specialization constants 0..5
/// of both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FragmentTiles {
    /// The device's fragment shape.
    pub shape: FragmentShape,
    /// Invocations per workgroup, a multiple of every subgroup size the device may use.
    pub workgroup: u32,
    /// Row tiles of `shape.m` rows per workgroup.
    pub row_tiles: u32,
    /// Column tiles of `shape.n` columns per workgroup (two per token for f32 x).
    pub col_tiles: u32,
    /// f16 activations (one column per token; f32 x takes two, its exact parts).
    pub x_f16: bool,
}

impl FragmentTiles {
    /// Specialization constants 0..5: invocations, the fragment's m, n and k, row tiles,
    /// column tiles.
    pub fn spec_values(&self) -> [u32; 6] {
        let s = self.shape;
        [
            self.workgroup,
            s.m,
            s.n,
            s.k,
            self.row_tiles,
            self.col_tiles,
        ]
    }

    /// Rows per workgroup.
    pub fn rows(&self) -> u32 {
        self.row_tiles * self.shape.m
    }

    /// B columns per workgroup.
    pub fn columns(&self) -> u32 {
        self.col_tiles * self.shape.n
    }

    /// Tokens (activation rows) per workgroup.
    pub fn tokens(&self) -> u32 {
        self.columns() / if self.x_f16 { 1 } else { 2 }
    }
}

/// "M×N×K fragments, R rows x T tokens", as the plans name the kernels.
impl fmt::Display for FragmentTiles {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.shape;
        write!(
            out,
            "{}x{}x{} fragments, {} rows x {} tokens",
            s.m,
            s.n,
            s.k,
            self.rows(),
            self.tokens()
        )
    }
}

impl TilesKey {
    /// The specialization constants by id (0..11).
    pub fn spec_values(&self) -> [u32; 12] {
        let [w, m, n, k, rt, ct] = self.tiles.spec_values();
        [
            w,
            m,
            n,
            k,
            rt,
            ct,
            self.zeros as u32,
            self.scale_f32 as u32,
            self.tiles.x_f16 as u32,
            self.offsets as u32,
            self.k_order as u32,
            self.block,
        ]
    }

    /// Bytes of the kernel's shared memory: A and B staged as f16 (rows and columns of
    /// `block / 8 + 1` 16-byte words), C as f32 (rows of the columns + 4), and per token
    /// the segments' largest |x| and sums, the block factor and sum.
    pub fn shared_bytes(&self) -> u32 {
        let (rows, cols) = (self.tiles.rows(), self.tiles.columns());
        let stride = 16 * (self.block / 8 + 1);
        let segments = self.block / 8;
        stride * (rows + cols)
            + 4 * rows * (cols + 4)
            + 4 * self.tiles.tokens() * (2 * segments + 2)
    }
}

/// Which pipeline of the tensor-core GEMM on GGUF blocks in their native bytes
/// (`shaders/gemm_blocks_coop.comp`, the type's build, `vk::coop_tiles`; specialization
/// constants 0..6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlocksTilesKey {
    /// The workgroup's fragments and tiles (depth 8 or 16: a run of 16 inputs is whole
    /// fragments).
    pub tiles: FragmentTiles,
    /// The block type.
    pub ty: BlockType,
}

impl BlocksTilesKey {
    /// The specialization constants by id (0..6).
    pub fn spec_values(&self) -> [u32; 7] {
        let [w, m, n, k, rt, ct] = self.tiles.spec_values();
        [w, m, n, k, rt, ct, self.tiles.x_f16 as u32]
    }

    /// Sums a piece keeps apart: one per run where the type's two runs of a piece keep
    /// scales of their own (Q6_K's, which do not fold into its codes exactly in f16).
    pub fn runs(&self) -> u32 {
        match self.ty {
            BlockType::Q6K => 2,
            _ => 1,
        }
    }

    /// Bytes of the kernel's shared memory: A and B staged as f16 (rows and columns of a
    /// piece's 32 inputs in five 16-byte words), C as f32 per run kept apart (rows of the
    /// columns + 4), each row's scales and offsets, and per token the piece's segments'
    /// largest |x| and sums, its factor and its runs' sums.
    pub fn shared_bytes(&self) -> u32 {
        let (rows, cols) = (self.tiles.rows(), self.tiles.columns());
        80 * (rows + cols)
            + 4 * self.runs() * rows * (cols + 4)
            + 16 * rows
            + 44 * self.tiles.tokens()
    }
}

/// Which pipeline of the tensor-core GEMM on GGUF blocks in their native bytes with A's
/// fragments built in registers (`shaders/gemm_blocks_frag.comp`, the type's build; the
/// tensor-core layout's devices; specialization constants 0..5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlocksFragKey {
    /// The shape, as the tensor-core GEMM's (its look-ahead of B unused: x is staged).
    pub shape: CoopGemmTuning,
    /// f16 activations.
    pub x_f16: bool,
    /// The block type.
    pub ty: BlockType,
}

impl BlocksFragKey {
    /// The specialization constants by id (0..5).
    pub fn spec_values(&self) -> [u32; 6] {
        let s = self.shape;
        [
            32 * s.subgroups,
            s.tiles,
            s.tokens,
            self.x_f16 as u32,
            s.k_groups,
            s.token_groups,
        ]
    }

    /// Rows per workgroup.
    pub fn rows(&self) -> u32 {
        let s = self.shape;
        16 * s.tiles * s.subgroups / (s.k_groups * s.token_groups)
    }

    /// Bytes of the kernel's shared memory: per K group staged B (f16, [`COOP_KPAD`] × one
    /// column per token for f16 activations, two for f32), the stage's factors and the runs'
    /// sums of x (8 per token; 4 floats for types without offsets); the sums K groups 1..
    /// hand to group 0; the table types' byte values.
    pub fn shared_bytes(&self) -> u32 {
        let tokens = self.shape.tokens;
        let cols = if self.x_f16 { 1 } else { 2 } * tokens;
        let sums = match self.ty.has_minima() {
            true => 4 * 8 * tokens,
            false => 16,
        };
        let per_group = 2 * COOP_KPAD * cols + 4 * tokens + sums;
        let red = match self.shape.k_groups {
            1 => 16,
            k => 4 * (k - 1) * self.rows() * tokens,
        };
        let table = match self.ty.looked_up() {
            true => 4 * 256,
            false => 0,
        };
        self.shape.k_groups * per_group + red + table
    }

    /// This shape with its K groups halved until it fits `max_shared` bytes.
    pub fn fitted(mut self, max_shared: u32) -> BlocksFragKey {
        while self.shared_bytes() > max_shared && self.shape.k_groups > 1 {
            self.shape.k_groups /= 2;
        }
        self
    }
}

/// Which GEMV pipeline on GGUF blocks in their native bytes (`shaders/gemv_blocks.comp`,
/// the type's build, specialization constants 0..6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlocksKey {
    /// Shared-memory reduction only.
    pub portable: bool,
    /// Invocations per workgroup.
    pub workgroup: u32,
    /// Rows per workgroup.
    pub rows: u32,
    /// Activation rows (1..=8).
    pub m: u32,
    /// f16 activations.
    pub x_f16: bool,
    /// The block type.
    pub ty: BlockType,
    /// Invocations stride over quarters of pieces (a 32-bit word of codes) instead of
    /// whole pieces, so that neighbouring invocations read neighbouring x.
    pub word_lanes: bool,
    /// Packed integer dot products on x rounded to bytes (`Q4VK_GEMV_ROUND_X_TO_INT8`, the
    /// digits pre-pass in input order) instead of f32 arithmetic on x; the subgroup
    /// reduction, whole pieces, passes of up to [`MAX_M`](super::params::MAX_M) rows.
    pub dot: bool,
    /// A gate+up pair (subgroup kernels), as [`PipelineKey::pair`].
    pub pair: bool,
    /// Pieces per step of each invocation where it strides over whole pieces with x held
    /// (all their loads issued before any decode); 1 elsewhere.
    pub unroll: u32,
}

/// The most activation rows per pass of the GEMV on GGUF blocks whose x each invocation
/// holds in registers for all its rows (32 values per activation row), and the rules'
/// default pass; passes of more rows load a piece's x again for each row. With word lanes
/// an invocation holds 8 values per activation row, for every m of a pass.
pub const BLOCKS_MAX_M: u32 = 4;

impl BlocksKey {
    /// Whether each invocation holds its x of every activation row for all its rows (else
    /// it loads them again per row).
    pub fn x_held(&self) -> bool {
        self.dot || self.word_lanes || self.m <= BLOCKS_MAX_M
    }

    /// The specialization constants by id (0..7) on a device of `subgroup` invocations.
    pub fn spec_values(&self, subgroup: u32) -> [u32; 8] {
        [
            self.workgroup,
            self.rows,
            self.m,
            self.x_f16 as u32,
            subgroup,
            self.x_held() as u32,
            self.word_lanes as u32,
            self.unroll,
        ]
    }

    /// Bytes of the kernel's shared memory (its reduction's slots) on a device of
    /// `subgroup` invocations.
    pub fn shared_bytes(&self, subgroup: u32) -> u32 {
        let slots = match self.portable {
            true => self.workgroup,
            false => self.workgroup / subgroup.max(1),
        };
        // The table of byte values of the types that look their values up (a placeholder
        // word for the others).
        let table = match self.ty.looked_up() {
            true => 4 * 256,
            false => 4,
        };
        // A pair parks gate's sums.
        let parked = match self.pair {
            true => 4 * self.m * self.rows,
            false => 0,
        };
        4 * slots * self.m * self.rows + table + parked
    }
}

/// Which GEMM pipeline on GGUF blocks in their native bytes (`shaders/gemm_blocks.comp`,
/// the type's build, specialization constants 0..5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlocksGemmKey {
    /// The tile, chosen as the SIMT GEMM's (`vk::gemv_plan`).
    pub tile: GemmTile,
    /// K groups per workgroup, chosen as the SIMT GEMM's.
    pub ksplit: u32,
    /// f16 activations.
    pub x_f16: bool,
    /// The block type.
    pub ty: BlockType,
}

impl BlocksGemmKey {
    /// The specialization constants by id (0..5): invocations, the tile's invocations along
    /// rows, rows and tokens per invocation, f16 activations, K groups.
    pub fn spec_values(&self) -> [u32; 6] {
        let t = self.tile;
        [
            t.invocations() * self.ksplit,
            t.tx,
            t.rn,
            t.rm,
            self.x_f16 as u32,
            self.ksplit,
        ]
    }
}

/// Which tensor-core GEMM pipeline (`shaders/gemm_q4_coop.comp`: m > 8, and m = 3..8 where
/// `vk::gemv::decide` says so; specialization constants 0..11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CoopGemmKey {
    /// Row tiles of 16 rows per subgroup.
    pub tiles: u32,
    /// Subgroups of 32 per workgroup: `ksplit` K groups of `tsplit` token groups, each
    /// subgroup of a token group with its own row tiles.
    pub subgroups: u32,
    /// Tokens (activation rows) per workgroup, a multiple of 8 and of `subgroups`; each
    /// token group takes `tokens / tsplit` of them (a multiple of 8).
    pub tokens: u32,
    /// Per-group zero points.
    pub zeros: bool,
    /// f16 activations.
    pub x_f16: bool,
    /// k per block (32, 64 or 128).
    pub block: u32,
    /// Per-group f32 offsets instead of zero points.
    pub offsets: bool,
    /// Groups of subgroups splitting K (divides `subgroups`).
    pub ksplit: u32,
    /// x written as B fragments into a workspace by `shaders/x_fragments.comp`
    /// ([`FragmentsKey`]; f16 x, f32 x as its two exact parts, or with `x_rounded`): they
    /// are loaded from there, nothing is staged in shared memory.
    pub x_fragments: bool,
    /// With `x_fragments`: f32 x rounded to f16 per block (the block factors apply).
    pub x_rounded: bool,
    /// With `x_fragments`: k-steps of B fragments each invocation loads ahead of their
    /// products (2, 4 or 8; 2 otherwise, where it is unused).
    pub b_ahead: u32,
    /// Token groups per K group: its subgroups split the workgroup's tokens this many ways
    /// (divides `subgroups / ksplit`).
    pub tsplit: u32,
    /// With `x_fragments`: the build that runs in K slices (`-DK_SLICES`: its sums go into
    /// the workspace for `shaders/gemm_slices.comp` to add; the other build never writes its
    /// workspace, so validation sees no write there).
    pub k_slices: bool,
}

impl CoopGemmKey {
    /// The specialization constants of `shaders/gemm_q4_coop.comp` by id (0..11).
    fn spec_values(&self) -> [u32; 12] {
        [
            32 * self.subgroups,
            self.tiles,
            self.tokens,
            self.zeros as u32,
            self.x_f16 as u32,
            self.block,
            self.offsets as u32,
            self.ksplit,
            self.x_fragments as u32,
            self.x_rounded as u32,
            self.b_ahead,
            self.tsplit,
        ]
    }

    /// Bytes of the kernel's shared memory: per K group staged B (f16, [`COOP_KPAD`] × one
    /// column per token for f16 activations, two for f32) with its block factors and sums
    /// (with `x_fragments` four elements of each); and the sums K groups 1.. hand to group 0.
    pub fn shared_bytes(&self) -> u32 {
        let cols = if self.x_f16 { 1 } else { 2 } * self.tokens;
        let per_group = match self.x_fragments {
            true => 8 * 4 + 2 * 4 * 4,
            false => 2 * COOP_KPAD * cols + 2 * 4 * (128 / self.block) * self.tokens,
        };
        let red = match self.ksplit {
            1 => 16,
            k => 4 * (k - 1) * self.rows() * self.tokens,
        };
        self.ksplit * per_group + red
    }

    /// Rows per workgroup.
    pub fn rows(&self) -> u32 {
        16 * self.tiles * self.subgroups / (self.ksplit * self.tsplit)
    }

    /// This shape with its K groups halved until their staged B fit `max_shared` bytes
    /// (each K group has its own; the 4-group f32 shape needs 47 KiB).
    pub fn fitted(mut self, max_shared: u32) -> CoopGemmKey {
        while self.shared_bytes() > max_shared && self.ksplit > 1 {
            self.ksplit /= 2;
        }
        self
    }
}

/// 32-bit words of the GEMM kernels' push block: [`Push`], then m.
pub const GEMM_PUSH_WORDS: usize = 11;

/// 32-bit words of the pipeline layout's push-constant range: the GEMM kernels' block, then
/// the SIMT GEMV's first activation row of a pass or, for the tensor-core GEMM in K slices
/// and the kernel adding them, where their sums lie in the workspace (the exported GEMV and
/// GEMM have 10 and [`GEMM_PUSH_WORDS`]).
pub const PUSH_WORDS: usize = 12;

/// Column stride (f16 elements) of the tensor-core kernels' staged B (`KPAD` of
/// `shaders/coop_common.glsl`): 128 k and a pad of 8.
pub const COOP_KPAD: u32 = 136;

/// Bytes of the tensor-core kernel's shared memory for `tiles` × `subgroups` at `m`
/// activation rows and blocks of `block` k: per subgroup, staged B (f16, [`COOP_KPAD`] ×
/// 8 columns per 4 activation rows), block factors and block sums (both padded ×4), final sums.
pub fn coop_shared_bytes(tiles: u32, subgroups: u32, m: u32, block: u32) -> u32 {
    let cols = 8 * m.div_ceil(4);
    let per_subgroup = 2 * COOP_KPAD * cols + 2 * 16 * (128 / block) * m + 4 * tiles * 16 * m;
    subgroups * per_subgroup
}

/// Bindings of set 0: a matrix part's weights, scales, zero points (or offsets) and column
/// order.
const MATRIX_BINDINGS: u32 = 4;

/// The specialization constant of every GEMV and GEMM kernel that holds its epilogue
/// (`shaders/epilogue.glsl`).
pub const EPILOGUE_SPEC_ID: u32 = 20;

/// The pipelines of one kernel, created on first use per key. Creation runs outside the
/// set's lock, so that threads create different pipelines at once (tuning does); where
/// two create the same key, the first stored is kept and the other destroyed.
struct PipelineSet<K> {
    /// The kernel, as the pipelines' debug names say it.
    kernel: &'static str,
    map: Mutex<HashMap<K, vk::Pipeline>>,
}

impl<K: Eq + Hash + std::fmt::Debug> PipelineSet<K> {
    fn new(kernel: &'static str) -> Self {
        PipelineSet {
            kernel,
            map: Mutex::new(HashMap::new()),
        }
    }

    /// The pipeline for `key`, made the first time by `create`, which is given the debug
    /// name of the pipeline ("q4vk <kernel> pipeline <key>"); a pipeline another thread
    /// stored for `key` meanwhile wins, and this one is destroyed on `device`.
    fn get_or_create(
        &self,
        device: &ash::Device,
        key: K,
        create: impl FnOnce(&str) -> Result<vk::Pipeline>,
    ) -> Result<vk::Pipeline> {
        if let Some(&p) = self.map.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(p);
        }
        let pipeline = create(&format!("q4vk {} pipeline {key:?}", self.kernel))?;
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        match map.entry(key) {
            std::collections::hash_map::Entry::Occupied(stored) => {
                // SAFETY: the pipeline was created on `device` just now and never used.
                unsafe { device.destroy_pipeline(pipeline, None) };
                Ok(*stored.get())
            }
            std::collections::hash_map::Entry::Vacant(slot) => Ok(*slot.insert(pipeline)),
        }
    }

    /// How many pipelines were created so far.
    fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Every pipeline created so far with its key, as `Debug` text.
    fn listed(&self) -> Vec<(String, vk::Pipeline)> {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.iter().map(|(k, &p)| (format!("{k:?}"), p)).collect()
    }

    /// The keys of the pipelines created so far.
    fn keys(&self) -> Vec<K>
    where
        K: Copy,
    {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.keys().copied().collect()
    }

    /// Every pipeline created, removed from the set (for destruction).
    fn take_all(&mut self) -> Vec<vk::Pipeline> {
        let map = self.map.get_mut().unwrap_or_else(|p| p.into_inner());
        map.drain().map(|(_, p)| p).collect()
    }
}

/// Layouts, cache and lazily created pipelines of one context.
pub struct Pipelines {
    device: Arc<Device>,
    /// Set 0: weights, scales, zeros (or offsets) of one matrix part, and its column order.
    pub matrix_set: vk::DescriptorSetLayout,
    /// Set 1: x, y and the epilogue's operands (`vk::xy_sets::Set1`; a push-descriptor
    /// layout when the device has them).
    pub xy_set: vk::DescriptorSetLayout,
    /// The pipeline layout (sets 0 and 1, 48 bytes of push constants: [`Push`], the GEMM's
    /// m and the SIMT GEMV pass's first row).
    pub layout: vk::PipelineLayout,
    cache: vk::PipelineCache,
    /// The one kernel variant this context runs: portable (shared-memory reduction) or
    /// subgroup. Only its module exists, so a device without subgroup arithmetic never
    /// sees the subgroup SPIR-V.
    pub portable: bool,
    module: vk::ShaderModule,
    coop_module: vk::ShaderModule,
    /// The integer dot-product GEMV's module (contexts that use it only).
    dot_module: vk::ShaderModule,
    /// The gate+up pair's builds of the subgroup GEMV (f32 x, then x in digits or bytes),
    /// each created with its first pipeline.
    pair_modules: [Mutex<vk::ShaderModule>; 2],
    /// The GEMM kernels' modules (SIMT, tensor-core), each created with its first
    /// pipeline: contexts that never see m > 8 never create them.
    gemm_module: Mutex<vk::ShaderModule>,
    coop_gemm_module: Mutex<vk::ShaderModule>,
    /// The tensor-core GEMM's build in K slices, likewise.
    coop_gemm_slices_module: Mutex<vk::ShaderModule>,
    /// The digits pre-pass's module, created with its first pipeline.
    digits_module: Mutex<vk::ShaderModule>,
    /// The tensor-core GEMM's fragments pre-pass's module, likewise.
    fragments_module: Mutex<vk::ShaderModule>,
    /// The module adding the tensor-core GEMM's K slices, likewise.
    slices_module: Mutex<vk::ShaderModule>,
    /// The tensor-core GEMM on the SIMT layout's module, likewise (contexts whose device
    /// offers its fragment shape only: `coop_tiles`).
    tiles_module: Mutex<vk::ShaderModule>,
    /// The GEMV on GGUF blocks' modules, a build per block type (the context's reduction
    /// variant), likewise (contexts that never see such a matrix never create them).
    blocks_modules: [Mutex<vk::ShaderModule>; BlockType::ALL.len()],
    /// The GEMM on GGUF blocks' modules, a build per block type, likewise.
    blocks_gemm_modules: [Mutex<vk::ShaderModule>; BlockType::ALL.len()],
    /// The tensor-core GEMM on GGUF blocks' modules, a build per block type, likewise
    /// (contexts with `coop_tiles` only).
    blocks_tiles_modules: [Mutex<vk::ShaderModule>; BlockType::ALL.len()],
    /// The tensor-core GEMM on GGUF blocks with fragments in registers' modules, a build
    /// per block type, likewise (contexts that use the tensor-core layout only).
    blocks_frag_modules: [Mutex<vk::ShaderModule>; BlockType::ALL.len()],
    /// The GEMV on GGUF blocks' integer dot-product builds, a build per block type,
    /// likewise (contexts that use the integer dot-product GEMV only).
    blocks_dot_modules: [Mutex<vk::ShaderModule>; BlockType::ALL.len()],
    /// Their gate+up pair builds (on x, then on x in bytes), a build per block type,
    /// likewise.
    blocks_pair_modules: [[Mutex<vk::ShaderModule>; BlockType::ALL.len()]; 2],
    coop_tiles: bool,
    /// Workgroup shape.
    pub tuning: Tuning,
    pipelines: PipelineSet<(PipelineKey, Epilogue)>,
    coop_pipelines: PipelineSet<(CoopKey, Epilogue)>,
    gemm_pipelines: PipelineSet<(GemmKey, Epilogue)>,
    coop_gemm_pipelines: PipelineSet<(CoopGemmKey, Epilogue)>,
    digits_pipelines: PipelineSet<DigitsKey>,
    fragments_pipelines: PipelineSet<FragmentsKey>,
    slices_pipelines: PipelineSet<(SlicesKey, Epilogue)>,
    tiles_pipelines: PipelineSet<(TilesKey, Epilogue)>,
    blocks_pipelines: PipelineSet<(BlocksKey, Epilogue)>,
    blocks_gemm_pipelines: PipelineSet<(BlocksGemmKey, Epilogue)>,
    blocks_tiles_pipelines: PipelineSet<(BlocksTilesKey, Epilogue)>,
    blocks_frag_pipelines: PipelineSet<(BlocksFragKey, Epilogue)>,
}

fn storage_bindings(count: u32) -> Vec<vk::DescriptorSetLayoutBinding<'static>> {
    (0..count)
        .map(|i| {
            vk::DescriptorSetLayoutBinding::default()
                .binding(i)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::COMPUTE)
        })
        .collect()
}

/// The module slot of block type `ty` among `slots` (one per [`BlockType::ALL`] entry).
fn type_slot<T>(slots: &[T; BlockType::ALL.len()], ty: BlockType) -> Result<&T> {
    BlockType::ALL
        .iter()
        .position(|&t| t == ty)
        .map(|i| &slots[i])
        .ok_or_else(|| Error::Internal("a block type without a build".into()))
}

/// Creates a shader module from embedded SPIR-V, named "q4vk shader module `name`" (the
/// shader's file name without its extension).
pub fn shader_module(device: &Device, spv: &[u8], name: &str) -> Result<vk::ShaderModule> {
    let words = shaders::words(spv)?;
    // SAFETY: valid SPIR-V embedded at build time.
    let module = unsafe {
        device
            .device
            .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&words), None)
    }
    .map_err(|e| Error::vk("vkCreateShaderModule", e))?;
    device
        .namer
        .name(module, &format!("q4vk shader module {name}"));
    Ok(module)
}

impl Pipelines {
    /// Creates the layouts, the cache (seeded with `initial_cache` when it is a blob of
    /// this device, see [`cache_blob_matches`]), the shader module of the portable or the
    /// subgroup kernel and, with `coop`, the tensor-core one, with `dot` the integer
    /// dot-product one; `coop_tiles`: the tensor-core GEMM on the SIMT layout may run.
    pub fn new(
        device: &Arc<Device>,
        tuning: Tuning,
        portable: bool,
        coop: bool,
        coop_tiles: bool,
        dot: bool,
        initial_cache: &[u8],
    ) -> Result<Pipelines> {
        let bound = MATRIX_BINDINGS + SET1_BINDINGS;
        if device.info.max_storage_buffers < bound {
            return Err(Error::Unsupported(format!(
                "the kernels bind {bound} storage buffers in the compute stage and {} allows {} (maxPerStageDescriptorStorageBuffers)",
                device.info.name, device.info.max_storage_buffers
            )));
        }
        let d = &device.device;
        let mut this = Pipelines {
            device: device.clone(),
            matrix_set: vk::DescriptorSetLayout::null(),
            xy_set: vk::DescriptorSetLayout::null(),
            layout: vk::PipelineLayout::null(),
            cache: vk::PipelineCache::null(),
            portable,
            module: vk::ShaderModule::null(),
            coop_module: vk::ShaderModule::null(),
            dot_module: vk::ShaderModule::null(),
            pair_modules: [(); 2].map(|_| Mutex::new(vk::ShaderModule::null())),
            gemm_module: Mutex::new(vk::ShaderModule::null()),
            coop_gemm_module: Mutex::new(vk::ShaderModule::null()),
            coop_gemm_slices_module: Mutex::new(vk::ShaderModule::null()),
            digits_module: Mutex::new(vk::ShaderModule::null()),
            fragments_module: Mutex::new(vk::ShaderModule::null()),
            slices_module: Mutex::new(vk::ShaderModule::null()),
            tiles_module: Mutex::new(vk::ShaderModule::null()),
            blocks_modules: BlockType::ALL.map(|_| Mutex::new(vk::ShaderModule::null())),
            blocks_gemm_modules: BlockType::ALL.map(|_| Mutex::new(vk::ShaderModule::null())),
            blocks_tiles_modules: BlockType::ALL.map(|_| Mutex::new(vk::ShaderModule::null())),
            blocks_frag_modules: BlockType::ALL.map(|_| Mutex::new(vk::ShaderModule::null())),
            blocks_dot_modules: BlockType::ALL.map(|_| Mutex::new(vk::ShaderModule::null())),
            blocks_pair_modules: [(); 2]
                .map(|_| BlockType::ALL.map(|_| Mutex::new(vk::ShaderModule::null()))),
            coop_tiles,
            tuning,
            pipelines: PipelineSet::new("gemv"),
            coop_pipelines: PipelineSet::new("tensor-core gemv"),
            gemm_pipelines: PipelineSet::new("gemm"),
            coop_gemm_pipelines: PipelineSet::new("tensor-core gemm"),
            digits_pipelines: PipelineSet::new("x digits pre-pass"),
            fragments_pipelines: PipelineSet::new("x fragments pre-pass"),
            slices_pipelines: PipelineSet::new("gemm K slices sum"),
            tiles_pipelines: PipelineSet::new("tensor-core gemm on the SIMT layout"),
            blocks_pipelines: PipelineSet::new("gemv on GGUF blocks"),
            blocks_gemm_pipelines: PipelineSet::new("gemm on GGUF blocks"),
            blocks_tiles_pipelines: PipelineSet::new("tensor-core gemm on GGUF blocks"),
            blocks_frag_pipelines: PipelineSet::new(
                "tensor-core gemm on GGUF blocks, fragments in registers",
            ),
        };
        // SAFETY: valid create infos; Drop destroys whatever was created.
        unsafe {
            let b4 = storage_bindings(MATRIX_BINDINGS);
            this.matrix_set = d
                .create_descriptor_set_layout(
                    &vk::DescriptorSetLayoutCreateInfo::default().bindings(&b4),
                    None,
                )
                .map_err(|e| Error::vk("vkCreateDescriptorSetLayout", e))?;
            let names = &device.namer;
            names.name(
                this.matrix_set,
                "q4vk descriptor set layout 0 (matrix part)",
            );
            let b5 = storage_bindings(SET1_BINDINGS);
            let flags = if device.push_descriptor.is_some() {
                vk::DescriptorSetLayoutCreateFlags::PUSH_DESCRIPTOR_KHR
            } else {
                vk::DescriptorSetLayoutCreateFlags::empty()
            };
            this.xy_set = d
                .create_descriptor_set_layout(
                    &vk::DescriptorSetLayoutCreateInfo::default()
                        .bindings(&b5)
                        .flags(flags),
                    None,
                )
                .map_err(|e| Error::vk("vkCreateDescriptorSetLayout", e))?;
            names.name(
                this.xy_set,
                "q4vk descriptor set layout 1 (x, y, epilogue operands)",
            );
            // Set 2: the second matrix part of a gate+up pair (the pair kernels only).
            let sets = [this.matrix_set, this.xy_set, this.matrix_set];
            // The kernels read the first 40 bytes, the GEMM ones also m, the SIMT GEMV the
            // first row of its pass.
            let ranges = [vk::PushConstantRange::default()
                .stage_flags(vk::ShaderStageFlags::COMPUTE)
                .size(4 * PUSH_WORDS as u32)];
            this.layout = d
                .create_pipeline_layout(
                    &vk::PipelineLayoutCreateInfo::default()
                        .set_layouts(&sets)
                        .push_constant_ranges(&ranges),
                    None,
                )
                .map_err(|e| Error::vk("vkCreatePipelineLayout", e))?;
            names.name(this.layout, "q4vk pipeline layout (matrix part, x and y)");
            let props = device
                .instance
                .instance
                .get_physical_device_properties(device.physical);
            let seed = if cache_blob_matches(initial_cache, &props) {
                initial_cache
            } else {
                &[]
            };
            this.cache = d
                .create_pipeline_cache(
                    &vk::PipelineCacheCreateInfo::default().initial_data(seed),
                    None,
                )
                .map_err(|e| Error::vk("vkCreatePipelineCache", e))?;
            names.name(this.cache, "q4vk pipeline cache");
            this.module = match portable {
                true => shader_module(device, shaders::GEMV_PORTABLE, "gemv_q4_portable")?,
                false => shader_module(device, shaders::GEMV_SUBGROUP, "gemv_q4_subgroup")?,
            };
            if coop {
                this.coop_module = shader_module(device, shaders::GEMV_COOP, "gemv_q4_coop")?;
            }
            if dot {
                this.dot_module = shader_module(device, shaders::GEMV_DOT, "gemv_q4_dot")?;
            }
        }
        Ok(this)
    }

    /// The pipeline cache's current contents (`vkGetPipelineCacheData`): a blob an app can
    /// save and pass back to a later context to skip shader compilation.
    pub fn cache_data(&self) -> Result<Vec<u8>> {
        // SAFETY: our cache; pipeline caches are internally synchronized.
        unsafe { self.device.device.get_pipeline_cache_data(self.cache) }
            .map_err(|e| Error::vk("vkGetPipelineCacheData", e))
    }

    /// The pipeline for `key` with the epilogue `epi`, created (through the cache) on
    /// first use.
    pub fn get(&self, key: PipelineKey, epi: Epilogue) -> Result<vk::Pipeline> {
        if key.portable != self.portable {
            return Err(Error::Internal(format!(
                "pipeline for portable = {} requested from a context with portable = {}",
                key.portable, self.portable
            )));
        }
        let t = self.tuning;
        let value = |spec: Spec| match spec {
            Spec::Workgroup => key.workgroup,
            Spec::Rows => key.rows,
            Spec::M => key.m,
            Spec::HasZeros => key.zeros as u32,
            Spec::ScaleF32 => key.scale_f32 as u32,
            Spec::XF16 => key.x_f16 as u32,
            Spec::SubgroupSize => t.subgroup,
            Spec::Unroll => key.unroll,
            Spec::Split => key.split,
            Spec::HasOffsets => key.offsets as u32,
            Spec::HasKOrder => key.k_order as u32,
            Spec::DecodeOnce => key.decode_once as u32,
            Spec::WordLanes => key.word_lanes as u32,
            Spec::XBytes => key.x_bytes as u32,
        };
        let mut values = [0u32; SPECS.len()];
        for (spec, id, _, _) in SPECS {
            values[id as usize] = value(spec);
        }
        let module = match key.dot {
            false => self.module,
            true if self.dot_module != vk::ShaderModule::null() && !self.portable => {
                self.dot_module
            }
            true => {
                return Err(Error::Internal(
                    "integer dot-product pipeline requested from a context without it".into(),
                ))
            }
        };
        if key.pair && self.portable {
            return Err(Error::Internal(
                "gate+up pair pipeline requested from a portable context".into(),
            ));
        }
        self.pipelines
            .get_or_create(&self.device.device, (key, epi), |name| {
                let module = match (key.pair, key.dot) {
                    (false, _) => module,
                    (true, false) => {
                        self.lazy_module(&self.pair_modules[0], shaders::GEMV_PAIR, "gemv_q4_pair")?
                    }
                    (true, true) => self.lazy_module(
                        &self.pair_modules[1],
                        shaders::GEMV_DOT_PAIR,
                        "gemv_q4_dot_pair",
                    )?,
                };
                self.create(module, &values, epi, name)
            })
    }

    /// The tensor-core pipeline for `key`, created on first use (contexts made with
    /// `coop` only).
    pub fn get_coop(&self, key: CoopKey, epi: Epilogue) -> Result<vk::Pipeline> {
        self.check_coop()?;
        self.coop_pipelines
            .get_or_create(&self.device.device, (key, epi), |name| {
                self.create(self.coop_module, &key.spec_values(), epi, name)
            })
    }

    /// The SIMT GEMM pipeline for `key`, created (with the module, the first time) on first
    /// use.
    pub fn get_gemm(&self, key: GemmKey, epi: Epilogue) -> Result<vk::Pipeline> {
        self.gemm_pipelines
            .get_or_create(&self.device.device, (key, epi), |name| {
                let module = self.lazy_module(&self.gemm_module, shaders::GEMM, "gemm_q4")?;
                self.create(module, &key.own_spec_values(), epi, name)
            })
    }

    /// The tensor-core GEMM pipeline for `key`, created (with the module, the first time)
    /// on first use (contexts made with `coop` only). Its build in K slices writes the
    /// workspace, not y: its epilogue is the slices' sum's.
    pub fn get_coop_gemm(&self, key: CoopGemmKey, epi: Epilogue) -> Result<vk::Pipeline> {
        self.check_coop()?;
        let epi = if key.k_slices { Epilogue::NONE } else { epi };
        self.coop_gemm_pipelines
            .get_or_create(&self.device.device, (key, epi), |name| {
                let module = match key.k_slices {
                    true => self.lazy_module(
                        &self.coop_gemm_slices_module,
                        shaders::GEMM_COOP_SLICES,
                        "gemm_q4_coop_slices",
                    )?,
                    false => self.lazy_module(
                        &self.coop_gemm_module,
                        shaders::GEMM_COOP,
                        "gemm_q4_coop",
                    )?,
                };
                self.create(module, &key.spec_values(), epi, name)
            })
    }

    /// The digits pre-pass's pipeline for `key`, created (with the module, the first time)
    /// on first use (contexts that run the integer dot-product GEMV only).
    pub fn get_digits(&self, key: DigitsKey) -> Result<vk::Pipeline> {
        if self.dot_module == vk::ShaderModule::null() {
            return Err(Error::Internal(
                "digits pre-pass requested from a context without the integer dot-product GEMV"
                    .into(),
            ));
        }
        self.digits_pipelines
            .get_or_create(&self.device.device, key, |name| {
                let module =
                    self.lazy_module(&self.digits_module, shaders::X_DIGITS, "x_digits")?;
                self.create(module, &key.spec_values(), Epilogue::NONE, name)
            })
    }

    /// The tensor-core GEMM's fragments pre-pass's pipeline for `key`, created (with the
    /// module, the first time) on first use. It needs no optional feature: tests run it on
    /// any device.
    pub fn get_fragments(&self, key: FragmentsKey) -> Result<vk::Pipeline> {
        self.fragments_pipelines
            .get_or_create(&self.device.device, key, |name| {
                let module =
                    self.lazy_module(&self.fragments_module, shaders::X_FRAGMENTS, "x_fragments")?;
                self.create(module, &key.spec_values(), Epilogue::NONE, name)
            })
    }

    /// The pipeline adding the tensor-core GEMM's K slices for `key`, created (with the
    /// module, the first time) on first use.
    pub fn get_slices(&self, key: SlicesKey, epi: Epilogue) -> Result<vk::Pipeline> {
        self.slices_pipelines
            .get_or_create(&self.device.device, (key, epi), |name| {
                let module =
                    self.lazy_module(&self.slices_module, shaders::GEMM_SLICES, "gemm_slices")?;
                self.create(module, &key.spec_values(), epi, name)
            })
    }

    /// The tensor-core GEMM on the SIMT layout's pipeline for `key`, created (with the
    /// module, the first time) on first use (contexts whose device offers it only).
    pub fn get_tiles(&self, key: TilesKey, epi: Epilogue) -> Result<vk::Pipeline> {
        if !self.coop_tiles {
            return Err(Error::Internal(
                "tensor-core GEMM on the SIMT layout requested from a context without it".into(),
            ));
        }
        self.tiles_pipelines
            .get_or_create(&self.device.device, (key, epi), |name| {
                let module = self.lazy_module(
                    &self.tiles_module,
                    shaders::GEMM_COOP_TILES,
                    "gemm_q4_coop_tiles",
                )?;
                self.create(module, &key.spec_values(), epi, name)
            })
    }

    /// The GEMV on GGUF blocks' pipeline for `key`, created (with the module of the
    /// context's reduction variant, the first time) on first use.
    pub fn get_blocks(&self, key: BlocksKey, epi: Epilogue) -> Result<vk::Pipeline> {
        if key.portable != self.portable {
            return Err(Error::Internal(format!(
                "blocks pipeline for portable = {} requested from a context with portable = {}",
                key.portable, self.portable
            )));
        }
        if key.dot && self.dot_module == vk::ShaderModule::null() {
            return Err(Error::Internal(
                "the integer dot-product GEMV on blocks requested from a context without the integer dot-product GEMV"
                    .into(),
            ));
        }
        if key.pair && self.portable {
            return Err(Error::Internal(
                "gate+up pair pipeline on blocks requested from a portable context".into(),
            ));
        }
        self.blocks_pipelines
            .get_or_create(&self.device.device, (key, epi), |name| {
                let (slots, spv, build) = match (key.pair, key.dot) {
                    (true, dot) => (
                        &self.blocks_pair_modules[dot as usize],
                        shaders::gemv_blocks_pair(key.ty, dot),
                        "gemv_blocks_pair",
                    ),
                    (false, true) => (
                        &self.blocks_dot_modules,
                        shaders::gemv_blocks_dot(key.ty),
                        "gemv_blocks_dot",
                    ),
                    (false, false) => (
                        &self.blocks_modules,
                        shaders::gemv_blocks(key.ty, self.portable),
                        "gemv_blocks",
                    ),
                };
                let module = self.type_module(slots, key.ty, spv, build)?;
                let values = key.spec_values(self.tuning.subgroup);
                self.create(module, &values, epi, name)
            })
    }

    /// The GEMM on GGUF blocks' pipeline for `key`, created (with the type's module, the
    /// first time) on first use.
    pub fn get_blocks_gemm(&self, key: BlocksGemmKey, epi: Epilogue) -> Result<vk::Pipeline> {
        self.blocks_gemm_pipelines
            .get_or_create(&self.device.device, (key, epi), |name| {
                let spv = shaders::gemm_blocks(key.ty);
                let module =
                    self.type_module(&self.blocks_gemm_modules, key.ty, spv, "gemm_blocks")?;
                self.create(module, &key.spec_values(), epi, name)
            })
    }

    /// The tensor-core GEMM on GGUF blocks' pipeline for `key`, created (with the type's
    /// module, the first time) on first use (contexts whose device offers its fragment
    /// shape only).
    pub fn get_blocks_tiles(&self, key: BlocksTilesKey, epi: Epilogue) -> Result<vk::Pipeline> {
        if !self.coop_tiles {
            return Err(Error::Internal(
                "tensor-core GEMM on GGUF blocks requested from a context without it".into(),
            ));
        }
        self.blocks_tiles_pipelines
            .get_or_create(&self.device.device, (key, epi), |name| {
                let spv = shaders::gemm_blocks_coop(key.ty);
                let module =
                    self.type_module(&self.blocks_tiles_modules, key.ty, spv, "gemm_blocks_coop")?;
                self.create(module, &key.spec_values(), epi, name)
            })
    }

    /// The module of block type `ty`'s build `spv` of kernel `build` (its file name), in its
    /// slot of `slots`, created on first use.
    fn type_module(
        &self,
        slots: &[Mutex<vk::ShaderModule>; BlockType::ALL.len()],
        ty: BlockType,
        spv: &[u8],
        build: &str,
    ) -> Result<vk::ShaderModule> {
        self.lazy_module(
            type_slot(slots, ty)?,
            spv,
            &format!("{build} {}", ty.name()),
        )
    }

    /// The pipeline of the tensor-core GEMM on GGUF blocks with fragments in registers for
    /// `key`, created (with the type's module, the first time) on first use (contexts that
    /// use the tensor-core layout only).
    pub fn get_blocks_frag(&self, key: BlocksFragKey, epi: Epilogue) -> Result<vk::Pipeline> {
        self.check_coop()?;
        self.blocks_frag_pipelines
            .get_or_create(&self.device.device, (key, epi), |name| {
                let spv = shaders::gemm_blocks_frag(key.ty);
                let module =
                    self.type_module(&self.blocks_frag_modules, key.ty, spv, "gemm_blocks_frag")?;
                self.create(module, &key.spec_values(), epi, name)
            })
    }

    /// Refuses the tensor-core kernels on a context that does not run them.
    fn check_coop(&self) -> Result<()> {
        if self.coop_module == vk::ShaderModule::null() {
            return Err(Error::Unsupported(
                "the matrix is in the tensor-core layout (made by a context that uses cooperative matrices) and this context does not use them (Q4VK_CONTEXT_NO_COOPMAT, Q4VK_NO_COOPMAT=1, the portable kernels or an adopted device); create the matrix on this context".into(),
            ));
        }
        Ok(())
    }

    /// The module in `slot`, created from `spv` (named after `name`) on first use.
    fn lazy_module(
        &self,
        slot: &Mutex<vk::ShaderModule>,
        spv: &[u8],
        name: &str,
    ) -> Result<vk::ShaderModule> {
        let mut module = slot.lock().unwrap_or_else(|p| p.into_inner());
        if *module == vk::ShaderModule::null() {
            *module = shader_module(&self.device, spv, name)?;
        }
        Ok(*module)
    }

    /// A compute pipeline of `module` with specialization constants 0.. = `values` and
    /// [`EPILOGUE_SPEC_ID`] = `epi`'s value (modules without it ignore it), named `name`.
    fn create(
        &self,
        module: vk::ShaderModule,
        values: &[u32],
        epi: Epilogue,
        name: &str,
    ) -> Result<vk::Pipeline> {
        if values.len() > EPILOGUE_SPEC_ID as usize {
            return Err(Error::Internal(format!(
                "{name}: {} specialization constants reach the epilogue's id {EPILOGUE_SPEC_ID}",
                values.len()
            )));
        }
        let values: Vec<u32> = values.iter().copied().chain([epi.spec_value()]).collect();
        let data: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let last = values.len() as u32 - 1;
        let entries: Vec<vk::SpecializationMapEntry> = (0..values.len() as u32)
            .map(|i| vk::SpecializationMapEntry {
                constant_id: if i == last { EPILOGUE_SPEC_ID } else { i },
                offset: 4 * i,
                size: 4,
            })
            .collect();
        let spec = vk::SpecializationInfo::default()
            .map_entries(&entries)
            .data(&data);
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(c"main")
            .specialization_info(&spec);
        let flags = if self.device.statistics.is_some() {
            vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR
        } else {
            vk::PipelineCreateFlags::empty()
        };
        let info = [vk::ComputePipelineCreateInfo::default()
            .flags(flags)
            .stage(stage)
            .layout(self.layout)];
        // SAFETY: valid module, layout and specialization.
        let pipeline = unsafe {
            self.device
                .device
                .create_compute_pipelines(self.cache, &info, None)
        }
        .map_err(|(_, e)| Error::vk("vkCreateComputePipelines", e))?[0];
        self.device.namer.name(pipeline, name);
        Ok(pipeline)
    }
}

/// Whether `blob` starts with a `VkPipelineCacheHeaderVersionOne` of this device (header
/// length ≥ 32, version 1, vendor and device ID, `pipelineCacheUUID`). q4vk checks this
/// itself rather than trusting every driver to reject foreign or corrupt data.
pub fn cache_blob_matches(blob: &[u8], props: &vk::PhysicalDeviceProperties) -> bool {
    if blob.len() < 32 {
        return false;
    }
    let word = |i: usize| u32::from_ne_bytes(blob[i..i + 4].try_into().expect("4 bytes"));
    let header_len = word(0) as usize;
    header_len >= 32
        && header_len <= blob.len()
        && word(4) == vk::PipelineCacheHeaderVersion::ONE.as_raw() as u32
        && word(8) == props.vendor_id
        && word(12) == props.device_id
        && blob[16..32] == props.pipeline_cache_uuid
}

impl Pipelines {
    /// How many pipelines of every kernel the context has created so far.
    pub fn created(&self) -> usize {
        self.pipelines.len()
            + self.coop_pipelines.len()
            + self.gemm_pipelines.len()
            + self.coop_gemm_pipelines.len()
            + self.digits_pipelines.len()
            + self.fragments_pipelines.len()
            + self.slices_pipelines.len()
            + self.tiles_pipelines.len()
            + self.blocks_pipelines.len()
            + self.blocks_gemm_pipelines.len()
            + self.blocks_tiles_pipelines.len()
            + self.blocks_frag_pipelines.len()
    }

    /// How many gate+up pair pipelines (of the SIMT GEMV and of the GEMV on GGUF blocks)
    /// this context created so far: whether its multi calls ran pairs (tests and tools).
    pub fn gate_up_pairs(&self) -> usize {
        let simt = self.pipelines.keys().iter().filter(|(k, _)| k.pair).count();
        let blocks = self
            .blocks_pipelines
            .keys()
            .iter()
            .filter(|(k, _)| k.pair)
            .count();
        simt + blocks
    }

    /// The compiler statistics of every pipeline this context created so far, by key
    /// (`vk::stats`; an error where statistics were not enabled).
    pub fn statistics(&self) -> Result<Vec<(String, Vec<super::stats::Executable>)>> {
        let mut all = self.pipelines.listed();
        all.extend(self.coop_pipelines.listed());
        all.extend(self.gemm_pipelines.listed());
        all.extend(self.coop_gemm_pipelines.listed());
        all.extend(self.digits_pipelines.listed());
        all.extend(self.fragments_pipelines.listed());
        all.extend(self.slices_pipelines.listed());
        all.extend(self.tiles_pipelines.listed());
        all.extend(self.blocks_pipelines.listed());
        all.extend(self.blocks_gemm_pipelines.listed());
        all.extend(self.blocks_tiles_pipelines.listed());
        all.extend(self.blocks_frag_pipelines.listed());
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all.into_iter()
            .map(|(key, p)| Ok((key, super::stats::of_pipeline(&self.device, p)?)))
            .collect()
    }
}

impl Drop for Pipelines {
    fn drop(&mut self) {
        let d = &self.device.device;
        let mut all = self.pipelines.take_all();
        all.extend(self.coop_pipelines.take_all());
        all.extend(self.gemm_pipelines.take_all());
        all.extend(self.coop_gemm_pipelines.take_all());
        all.extend(self.digits_pipelines.take_all());
        all.extend(self.fragments_pipelines.take_all());
        all.extend(self.slices_pipelines.take_all());
        all.extend(self.tiles_pipelines.take_all());
        all.extend(self.blocks_pipelines.take_all());
        all.extend(self.blocks_gemm_pipelines.take_all());
        all.extend(self.blocks_tiles_pipelines.take_all());
        all.extend(self.blocks_frag_pipelines.take_all());
        let lazy = [
            &mut self.gemm_module,
            &mut self.coop_gemm_module,
            &mut self.coop_gemm_slices_module,
            &mut self.digits_module,
            &mut self.fragments_module,
            &mut self.slices_module,
            &mut self.tiles_module,
        ]
        .into_iter()
        .chain(&mut self.blocks_modules)
        .chain(&mut self.blocks_gemm_modules)
        .chain(&mut self.blocks_tiles_modules)
        .chain(&mut self.blocks_frag_modules)
        .chain(&mut self.blocks_dot_modules)
        .chain(&mut self.pair_modules)
        .chain(self.blocks_pair_modules.iter_mut().flatten())
        .map(|slot| *slot.get_mut().unwrap_or_else(|p| p.into_inner()))
        .collect::<Vec<_>>();
        // SAFETY: ours; no q4vk submission is pending, and host command buffers must not
        // outlive the context (contract).
        unsafe {
            for p in all {
                d.destroy_pipeline(p, None);
            }
            for module in lazy {
                d.destroy_shader_module(module, None);
            }
            d.destroy_shader_module(self.module, None);
            d.destroy_shader_module(self.coop_module, None);
            d.destroy_shader_module(self.dot_module, None);
            d.destroy_pipeline_cache(self.cache, None);
            d.destroy_pipeline_layout(self.layout, None);
            d.destroy_descriptor_set_layout(self.xy_set, None);
            d.destroy_descriptor_set_layout(self.matrix_set, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workgroup_shrinks_to_short_rows_only() {
        let t = Tuning {
            workgroup: 128,
            rows: 4,
            unroll: 1,
            split: 1,
            subgroup: 32,
            min_workgroup: 32,
            word_lanes: false,
        };
        assert_eq!(t.workgroup_for(1), 32);
        assert_eq!(t.workgroup_for(33), 64);
        assert_eq!(t.workgroup_for(128), 128);
        assert_eq!(t.workgroup_for(100_000), 128);
    }

    #[test]
    fn push_block_matches_the_glsl_layout() {
        assert_eq!(std::mem::size_of::<Push>(), 40);
        let p = Push {
            rows: 1,
            wg_offset: 10,
            ..Default::default()
        };
        let b = p.bytes_with(3, 16);
        assert_eq!(b.len(), 4 * PUSH_WORDS);
        assert_eq!(&b[0..4], &1u32.to_ne_bytes());
        assert_eq!(&b[36..40], &10u32.to_ne_bytes());
        assert_eq!(&b[40..44], &3u32.to_ne_bytes());
        assert_eq!(&b[44..48], &16u32.to_ne_bytes());
        assert_eq!(std::mem::offset_of!(Push, wg_offset), 36);
    }
}
