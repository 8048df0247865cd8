//! x as the tensor-core GEMM's B fragments (`shaders/x_fragments.comp`, recorded by
//! `vk::gemv::record` into a workspace before `shaders/gemm_q4_coop.comp` built with
//! `X_FRAGMENTS`): x written once per call in the order the GEMM's invocations hold it, so
//! that they load it (one 16-byte load per invocation and two fragments) instead of each
//! workgroup converting and staging x through shared memory behind barriers. Used wherever
//! the tensor-core GEMM runs on a workspace (m > 8, and from m = 3, 4, 5, 7 or 8 where
//! `vk::gemv::decide` says so) for f16 activations, f32 ones as their
//! two exact f16 parts, and f32 ones that
//! `Q4VK_GEMV_ROUND_X_TO_F16` lets round to f16 (bench/RESULTS.md has the H200 figures).
//!
//! Layout ([`FragmentGeometry`]; kpad = 128 · stages, K padded to the tensor-core layout;
//! tokens = m rounded up to the GEMM's tokens per workgroup, a multiple of 8; parts = B
//! columns per token):
//! * B: `parts · tokens` columns of kpad f16, zero past K and for tokens ≥ m: f16 x as it is,
//!   column `t` token `t`; f32 x as `2^-e x` per block of `block` k (the block's largest
//!   magnitude scaled into [2^14, 2^15): nothing overflows), either as its two exact parts
//!   (hi: 11 significant bits, exact in f16, in column `2t`; lo = the rest rounded to f16, in
//!   `2t + 1`; parts = 2) or rounded to f16 in column `t` (a relative rounding; parts = 1).
//!   Stored as 16 × 8 fragments in pairs of k-steps: fragments `(g, s)` and
//!   `(g, s + 1)`, s even (columns `8g ..`, k `16s ..`), at uvec4 `(g · kpad/32 + s/2) · 32 +
//!   lane`, the lane's four elements ([`crate::layout::coop::b_element`]) of `(g, s)` in
//!   order, then those of `(g, s + 1)`: one 16-byte load per invocation and two k-steps.
//! * F at [`FragmentGeometry::factors_offset`]: f32 `[tokens][kpad / block]`, each block's
//!   factor `2^e` (1 for f16 x).
//! * S at [`FragmentGeometry::sums_offset`]: f32 `[tokens][kpad / block]`, each block's sum of
//!   x in f32 (read by matrices with per-group offsets).

use super::pipeline::{Push, FRAGMENTS_WORKGROUP};
use crate::plan::DeviceClass;

/// Geometry of one x in fragments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FragmentGeometry {
    /// Stages of 128 k of the matrix's tensor-core layout (kpad = 128 · stages ≥ K).
    pub stages: u32,
    /// k per block with its own factor and sum (32, 64 or 128: the layout's block).
    pub block: u32,
    /// Tokens held: m rounded up to the GEMM's tokens per workgroup (a multiple of 8).
    pub tokens: u32,
    /// f16 activations (else f32 ones, split or rounded per block).
    pub x_f16: bool,
    /// B columns per token: 2 for f32 x as its two exact f16 parts, 1 for f16 x and f32 x
    /// rounded to f16 (`Q4VK_GEMV_ROUND_X_TO_F16`).
    pub parts: u32,
}

impl FragmentGeometry {
    /// K padded to whole stages.
    pub fn kpad(&self) -> u64 {
        128 * u64::from(self.stages)
    }

    /// Blocks per token.
    pub fn blocks(&self) -> u64 {
        self.kpad() / u64::from(self.block)
    }

    /// Byte offset of the block factors (the bytes of B).
    pub fn factors_offset(&self) -> u64 {
        2 * u64::from(self.parts) * u64::from(self.tokens) * self.kpad()
    }

    /// Byte offset of the block sums.
    pub fn sums_offset(&self) -> u64 {
        self.factors_offset() + 4 * u64::from(self.tokens) * self.blocks()
    }

    /// Bytes of the whole workspace.
    pub fn bytes(&self) -> u64 {
        self.sums_offset() + 4 * u64::from(self.tokens) * self.blocks()
    }

    /// Whether the geometry is one the kernels take: blocks of 32, 64 or 128 k, whole
    /// fragments of 8 tokens, at least one stage.
    pub fn is_valid(&self) -> bool {
        [32, 64, 128].contains(&self.block)
            && self.tokens.is_multiple_of(8)
            && self.stages > 0
            && (self.parts == 1 || (self.parts == 2 && !self.x_f16))
    }

    /// Whether the pre-pass's grid and the workspace fit the device's limits.
    pub fn fits(&self, class: &DeviceClass) -> bool {
        let [max_x, max_y] = class.max_groups;
        self.grid()[0] <= max_x && self.tokens <= max_y && self.bytes() <= class.max_storage_range
    }

    /// The pre-pass's grid: workgroups of [`FRAGMENTS_WORKGROUP`] invocations, four columns
    /// each, along kpad; one row of them per token.
    pub(crate) fn grid(&self) -> [u32; 2] {
        [
            (128 * self.stages).div_ceil(4 * FRAGMENTS_WORKGROUP),
            self.tokens,
        ]
    }

    /// The pre-pass's push block (its fields as `shaders/x_fragments.comp` reads them) for x of
    /// `k` columns, `x_stride` elements apart.
    pub(crate) fn push(&self, k: u32, x_stride: u32) -> Push {
        Push {
            rows: self.tokens,
            chunks: self.stages,
            k,
            x_stride,
            ..Default::default()
        }
    }
}
