//! The embedded SPIR-V (compiled from `shaders/` by `scripts/build-shaders.sh`).

use crate::error::{Error, Result};
use crate::import::gguf_blocks::BlockType;
/// The tensor-core GEMM's build in K slices (`-DK_SLICES`: sums into the workspace).
pub const GEMM_COOP_SLICES: &[u8] = include_bytes!("../../shaders/spv/gemm_q4_coop_slices.spv");
/// Adds the tensor-core GEMM's K slices into y.
pub const GEMM_SLICES: &[u8] = include_bytes!("../../shaders/spv/gemm_slices.spv");

/// Fused GEMV using subgroup arithmetic for the reduction.
pub const GEMV_SUBGROUP: &[u8] = include_bytes!("../../shaders/spv/gemv_q4_subgroup.spv");
/// Fused GEMV with a shared-memory reduction only (no subgroup ops, no 8/16-bit storage).
pub const GEMV_PORTABLE: &[u8] = include_bytes!("../../shaders/spv/gemv_q4_portable.spv");
/// Fused GEMV on x in 8-bit digits (or rounded to bytes) with packed integer dot products
/// (`vk::int_dot`), subgroup reduction.
pub const GEMV_DOT: &[u8] = include_bytes!("../../shaders/spv/gemv_q4_dot.spv");
/// [`GEMV_SUBGROUP`] for a gate+up pair: gate's part in set 0, up's in set 2, one dispatch
/// writing gate's output and `act(gate) · up`.
pub const GEMV_PAIR: &[u8] = include_bytes!("../../shaders/spv/gemv_q4_pair.spv");
/// [`GEMV_DOT`] for a gate+up pair, as [`GEMV_PAIR`].
pub const GEMV_DOT_PAIR: &[u8] = include_bytes!("../../shaders/spv/gemv_q4_dot_pair.spv");
/// The digits pre-pass of [`GEMV_DOT`]: x in 8-bit digits, or rounded to bytes
/// (`vk::int_dot`).
pub const X_DIGITS: &[u8] = include_bytes!("../../shaders/spv/x_digits.spv");
/// The pre-pass of [`GEMM_COOP`] on a workspace: x as its f16 B fragments, once per call.
pub const X_FRAGMENTS: &[u8] = include_bytes!("../../shaders/spv/x_fragments.spv");
/// Tensor-core GEMV (`VK_KHR_cooperative_matrix`, f16 16 × 8 × 16), `layout::coop` weights.
pub const GEMV_COOP: &[u8] = include_bytes!("../../shaders/spv/gemv_q4_coop.spv");
/// Fused GEMM for m > 8 on the SIMT layout (no subgroup operations).
pub const GEMM: &[u8] = include_bytes!("../../shaders/spv/gemm_q4.spv");
/// Tensor-core GEMM (`VK_KHR_cooperative_matrix`, `layout::coop` weights): m > 8, and m = 3..8
/// where `vk::gemv::decide` says so.
pub const GEMM_COOP: &[u8] = include_bytes!("../../shaders/spv/gemm_q4_coop.spv");
/// Tensor-core GEMM on the SIMT layout (`vk::coop_tiles`): any m, any f16 fragment shape and
/// subgroup size, fragments through shared memory.
pub const GEMM_COOP_TILES: &[u8] = include_bytes!("../../shaders/spv/gemm_q4_coop_tiles.spv");
/// Fragment-layout probe of the tensor-core path (`vk::coop::probe`).
pub const COOP_PROBE: &[u8] = include_bytes!("../../shaders/spv/coop_probe.spv");
/// Exported GEMV (`q4vk_kernel_export`), portable, SPIR-V 1.0, ncnn's conventions.
pub const GEMV_EXPORT_PORTABLE: &[u8] =
    include_bytes!("../../shaders/spv/gemv_q4_export_portable.spv");
/// Exported GEMV with the subgroup reduction (SPIR-V 1.3).
pub const GEMV_EXPORT_SUBGROUP: &[u8] =
    include_bytes!("../../shaders/spv/gemv_q4_export_subgroup.spv");
/// Extended exported GEMV (`Q4VK_KERNEL_EXPORT_EXTENDED`: per-group offsets and column
/// order in bindings 5 and 6), portable, SPIR-V 1.0.
pub const GEMV_EXPORT_EXTENDED_PORTABLE: &[u8] =
    include_bytes!("../../shaders/spv/gemv_q4_export_extended_portable.spv");
/// Extended exported GEMV with the subgroup reduction (SPIR-V 1.3).
pub const GEMV_EXPORT_EXTENDED_SUBGROUP: &[u8] =
    include_bytes!("../../shaders/spv/gemv_q4_export_extended_subgroup.spv");
/// Exported GEMM (`q4vk_kernel_export` at m > 8), SPIR-V 1.0, ncnn's conventions; no
/// subgroup operations, so it serves every variant.
pub const GEMM_EXPORT: &[u8] = include_bytes!("../../shaders/spv/gemm_q4_export.spv");
/// Extended exported GEMM (bindings 5 and 6 as [`GEMV_EXPORT_EXTENDED_PORTABLE`]).
pub const GEMM_EXPORT_EXTENDED: &[u8] =
    include_bytes!("../../shaders/spv/gemm_q4_export_extended.spv");
/// Extended exported GEMV with a bias (`Q4VK_KERNEL_EXPORT_BIAS`: binding 7), portable,
/// SPIR-V 1.0.
pub const GEMV_EXPORT_BIAS_PORTABLE: &[u8] =
    include_bytes!("../../shaders/spv/gemv_q4_export_bias_portable.spv");
/// Extended exported GEMV with a bias and the subgroup reduction (SPIR-V 1.3).
pub const GEMV_EXPORT_BIAS_SUBGROUP: &[u8] =
    include_bytes!("../../shaders/spv/gemv_q4_export_bias_subgroup.spv");
/// Extended exported GEMM with a bias (binding 7).
pub const GEMM_EXPORT_BIAS: &[u8] = include_bytes!("../../shaders/spv/gemm_q4_export_bias.spv");
/// Benchmark baseline: one invocation per row (binding 0 words, 1 scale+zero, 2 x, 3 y).
pub const NAIVE: &[u8] = include_bytes!("../../shaders/spv/naive_q4.spv");
/// Benchmark ceiling: uvec4 copy (binding 0 source, 1 destination).
pub const COPY: &[u8] = include_bytes!("../../shaders/spv/copy.spv");
/// Benchmark baseline: the epilogue passes of an unfused decoder step (binding 0 y updated
/// in place from binding 1; push constants: count, n, mode: 0 bias, 1 residual, 2 SwiGLU).
pub const ELEMENTWISE: &[u8] = include_bytes!("../../shaders/spv/elementwise.spv");
/// Benchmark ceiling: reads device memory and writes nothing (`q4vk-bench`).
pub const READ: &[u8] = include_bytes!("../../shaders/spv/read.spv");
/// Benchmark ceiling: the tensor cores' MMA rate, operands in registers (binding 0 output;
/// push constant: rounds; needs the tensor-core extensions).
pub const MMA_PEAK: &[u8] = include_bytes!("../../shaders/spv/mma_peak.spv");
/// Benchmark ceiling: the tensor-core GEMM's inner loop without memory traffic on its 4 × 4
/// subgroup tile (4 A, 4 B fragments per k-step; binding 0 output; push constant: blocks of
/// 8 k-steps; needs the tensor-core extensions).
pub const MMA_LOOP_4X4: &[u8] = include_bytes!("../../shaders/spv/mma_loop_4x4.spv");
/// Benchmark ceiling: the same on the GEMM's 2 × 8 subgroup tile.
pub const MMA_LOOP_2X8: &[u8] = include_bytes!("../../shaders/spv/mma_loop_2x8.spv");

/// SPIR-V bytes as words (checks the length and the magic number).
pub fn words(spv: &[u8]) -> Result<Vec<u32>> {
    ash::util::read_spv(&mut std::io::Cursor::new(spv))
        .map_err(|e| Error::Internal(format!("embedded SPIR-V is malformed: {e}")))
}

/// The embedded build `spv/<prefix><type><suffix>.spv` of the kernels on GGUF blocks for
/// block type `ty` (one build per type: a driver compiles the decode of that type only).
macro_rules! blocks_build {
    ($ty:expr, $prefix:literal, $suffix:literal) => {
        match $ty {
            BlockType::Q4_1 => include_bytes!(concat!(
                "../../shaders/spv/",
                $prefix,
                "q4_1",
                $suffix,
                ".spv"
            )) as &[u8],
            BlockType::Q5_0 => include_bytes!(concat!(
                "../../shaders/spv/",
                $prefix,
                "q5_0",
                $suffix,
                ".spv"
            )),
            BlockType::Q5_1 => include_bytes!(concat!(
                "../../shaders/spv/",
                $prefix,
                "q5_1",
                $suffix,
                ".spv"
            )),
            BlockType::Q8_0 => include_bytes!(concat!(
                "../../shaders/spv/",
                $prefix,
                "q8_0",
                $suffix,
                ".spv"
            )),
            BlockType::Q4K => include_bytes!(concat!(
                "../../shaders/spv/",
                $prefix,
                "q4_k",
                $suffix,
                ".spv"
            )),
            BlockType::Q5K => include_bytes!(concat!(
                "../../shaders/spv/",
                $prefix,
                "q5_k",
                $suffix,
                ".spv"
            )),
            BlockType::Q6K => include_bytes!(concat!(
                "../../shaders/spv/",
                $prefix,
                "q6_k",
                $suffix,
                ".spv"
            )),
            BlockType::Iq4Nl => include_bytes!(concat!(
                "../../shaders/spv/",
                $prefix,
                "iq4_nl",
                $suffix,
                ".spv"
            )),
            BlockType::Iq4Xs => include_bytes!(concat!(
                "../../shaders/spv/",
                $prefix,
                "iq4_xs",
                $suffix,
                ".spv"
            )),
            BlockType::Mxfp4 => include_bytes!(concat!(
                "../../shaders/spv/",
                $prefix,
                "mxfp4",
                $suffix,
                ".spv"
            )),
            BlockType::Nvfp4 => include_bytes!(concat!(
                "../../shaders/spv/",
                $prefix,
                "nvfp4",
                $suffix,
                ".spv"
            )),
        }
    };
}

/// The GEMV on GGUF blocks of `ty` in their native bytes (`layout::blocks`), with the
/// subgroup reduction or (`portable`) a shared-memory one only.
pub fn gemv_blocks(ty: BlockType, portable: bool) -> &'static [u8] {
    match portable {
        true => blocks_build!(ty, "gemv_blocks_", "_portable"),
        false => blocks_build!(ty, "gemv_blocks_", "_subgroup"),
    }
}

/// The GEMV on GGUF blocks of `ty` in their native bytes on x rounded to bytes, packed
/// integer dot products and the subgroup reduction.
pub fn gemv_blocks_dot(ty: BlockType) -> &'static [u8] {
    blocks_build!(ty, "gemv_blocks_", "_dot")
}

/// [`gemv_blocks`]'s subgroup build (or, with `dot`, [`gemv_blocks_dot`]) for a gate+up
/// pair: gate's part in set 0, up's in set 2.
pub fn gemv_blocks_pair(ty: BlockType, dot: bool) -> &'static [u8] {
    match dot {
        false => blocks_build!(ty, "gemv_blocks_", "_pair"),
        true => blocks_build!(ty, "gemv_blocks_", "_dot_pair"),
    }
}

/// The GEMM on GGUF blocks of `ty` in their native bytes (`layout::blocks`; no subgroup
/// operations, one build per type).
pub fn gemm_blocks(ty: BlockType) -> &'static [u8] {
    blocks_build!(ty, "gemm_blocks_", "")
}

/// The tensor-core GEMM on GGUF blocks of `ty` in their native bytes, fragments through
/// shared memory (`vk::coop_tiles`; any f16 fragment shape of depth 8 or 16 and any
/// subgroup size).
pub fn gemm_blocks_coop(ty: BlockType) -> &'static [u8] {
    blocks_build!(ty, "gemm_blocks_", "_coop")
}

/// The tensor-core GEMM on GGUF blocks of `ty` in their native bytes with A's fragments
/// built in registers (the tensor-core layout's fragment layout and subgroups of 32).
pub fn gemm_blocks_frag(ty: BlockType) -> &'static [u8] {
    blocks_build!(ty, "gemm_blocks_", "_frag")
}

/// The exported GEMV on GGUF blocks of `ty` (`q4vk_kernel_export` with
/// `Q4VK_KERNEL_EXPORT_BLOCKS`, m ≤ 8): the subgroup reduction or (`portable`) a
/// shared-memory one only.
pub fn gemv_blocks_export(ty: BlockType, portable: bool) -> &'static [u8] {
    match portable {
        true => blocks_build!(ty, "gemv_blocks_", "_export_portable"),
        false => blocks_build!(ty, "gemv_blocks_", "_export_subgroup"),
    }
}

/// The exported GEMM on GGUF blocks of `ty` (`q4vk_kernel_export` with
/// `Q4VK_KERNEL_EXPORT_BLOCKS`, m > 8; no subgroup operations).
pub fn gemm_blocks_export(ty: BlockType) -> &'static [u8] {
    blocks_build!(ty, "gemm_blocks_", "_export")
}
