//! The tensor-core GEMM on the SIMT layout (`shaders/gemm_q4_coop_tiles.comp`): the kernel
//! for devices whose `VK_KHR_cooperative_matrix` offers a usable f16 shape but not the
//! fragment layout or subgroups of 32 that the tensor-core layout's kernels are written for
//! (Adreno, AMD, Intel, lavapipe). Fragments go through shared memory, so any shape and
//! subgroup size serves. Its pipeline key and the rules of its shape, as plain data; and
//! the same for its counterpart on GGUF blocks (`shaders/gemm_blocks_coop.comp`).

use super::matrix_form::MatrixForm;
use super::params::GemvParams;
use super::pipeline::{BlocksTilesKey, FragmentTiles, TilesKey};
use super::rules::Rules;
use crate::import::gguf_blocks::BlockType;
use crate::plan::FragmentShape;

/// Rows a workgroup of the kernel aims at (row tiles of the fragment's rows).
const ROWS_PER_WORKGROUP: u32 = 64;

/// Tokens a workgroup takes at most.
const MAX_TOKENS: u32 = 32;

/// Invocations per workgroup: a multiple of every power-of-two subgroup size up to 128,
/// and Vulkan's guaranteed minimum of `maxComputeWorkGroupInvocations`.
const WORKGROUP: u32 = 128;

/// Whether a call on `form` that runs a GEMM (`runs_gemm`) runs this kernel: SIMT-layout
/// matrices on contexts with a usable fragment shape, where the caller fixed it
/// (`Overrides::coop_tiles`) or else the device's row says (`DeviceTuning::coop_tiles_gemm`).
pub fn runs_tiles(r: &Rules, form: &MatrixForm) -> bool {
    form.coop.is_none()
        && r.coop_tiles.is_some()
        && r.overrides().coop_tiles.unwrap_or(r.row.coop_tiles_gemm)
}

/// The kernel's key for a call with `p` on `form` (on a context with `r.coop_tiles`): 64
/// rows per workgroup (at least one row tile), the column tiles that hold the call's tokens
/// (at most 32), both halved while the shared memory does not hold them; `None` where even
/// one tile of each does not fit (the SIMT GEMM runs).
pub fn tiles_key(r: &Rules, form: &MatrixForm, p: &GemvParams) -> Option<TilesKey> {
    // One scale per row and block: the group (32 · 2^shift; the whole row for shift 31).
    let group = 32u64 << form.layout.group_shift.min(31);
    let key = TilesKey {
        tiles: workgroup_tiles(r, r.coop_tiles?, p)?,
        zeros: form.shape.zero_points,
        scale_f32: form.scale_f32,
        offsets: form.offsets,
        k_order: form.column_order && !p.x_gathered,
        block: group.min(128) as u32,
    };
    fitted(r, key, TilesKey::shared_bytes, |k| &mut k.tiles)
}

/// The fragment shape of the tensor-core GEMM on GGUF blocks: the context's, where its
/// depth divides a run of 16 inputs.
fn blocks_shape(r: &Rules) -> Option<FragmentShape> {
    r.coop_tiles.filter(|s| 16 % s.k == 0)
}

/// Whether a call on GGUF blocks `form` that runs a GEMM runs the tensor-core GEMM on
/// blocks (`shaders/gemm_blocks_coop.comp`): on contexts with a usable fragment shape whose
/// depth divides a run of 16 inputs, where the caller fixed it (`Overrides::coop_tiles`) or
/// else the device's row says (`DeviceTuning::blocks_coop_tiles_gemm`).
pub fn runs_blocks_tiles(r: &Rules, form: &MatrixForm) -> bool {
    form.blocks.is_some()
        && blocks_shape(r).is_some()
        && r.overrides()
            .coop_tiles
            .unwrap_or(r.row.blocks_coop_tiles_gemm)
}

/// The tensor-core GEMM on blocks' key for a call with `p` on GGUF blocks of type `ty`,
/// sized as [`tiles_key`]'s; `None` where the shape's depth does not divide 16 or one tile
/// of each does not fit the shared memory (the GEMM on blocks runs).
pub fn blocks_tiles_key(r: &Rules, ty: BlockType, p: &GemvParams) -> Option<BlocksTilesKey> {
    let key = BlocksTilesKey {
        tiles: workgroup_tiles(r, blocks_shape(r)?, p)?,
        ty,
    };
    fitted(r, key, BlocksTilesKey::shared_bytes, |k| &mut k.tiles)
}

/// The fragments and tiles the kernels aim at for a call with `p` on fragments of `shape`
/// (`None` where the device's subgroups do not fill the workgroup): 64 rows, the columns of
/// the call's tokens (at most 32; two columns per token for f32 x).
fn workgroup_tiles(r: &Rules, shape: FragmentShape, p: &GemvParams) -> Option<FragmentTiles> {
    let parts = if p.x_f16 { 1 } else { 2 };
    let workgroup = WORKGROUP.min(r.class.max_workgroup);
    // Subgroups must fill the workgroup; the kernel's rows must split into whole tiles.
    workgroup
        .is_multiple_of(r.class.subgroup_size.max(1))
        .then_some(FragmentTiles {
            shape,
            workgroup,
            row_tiles: (ROWS_PER_WORKGROUP / shape.m).max(1),
            col_tiles: (parts * p.m.min(MAX_TOKENS)).div_ceil(shape.n),
            x_f16: p.x_f16,
        })
}

/// `key` with the column tiles, then the row tiles of its fragment tiles (`tiles`) halved
/// while its shared memory (`bytes`) exceeds the device's; `None` where one of each does
/// not fit.
fn fitted<K>(
    r: &Rules,
    mut key: K,
    bytes: impl Fn(&K) -> u32,
    tiles: impl Fn(&mut K) -> &mut FragmentTiles,
) -> Option<K> {
    while bytes(&key) > r.class.max_shared {
        let t = tiles(&mut key);
        if t.col_tiles > 1 {
            t.col_tiles /= 2;
        } else if t.row_tiles > 1 {
            t.row_tiles /= 2;
        } else {
            return None;
        }
    }
    Some(key)
}
