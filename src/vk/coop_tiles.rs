//! The tensor-core GEMM on the SIMT layout (`shaders/gemm_q4_coop_tiles.comp`): the kernel
//! for devices whose `VK_KHR_cooperative_matrix` offers a usable f16 shape but not the
//! fragment layout or subgroups of 32 that the tensor-core layout's kernels are written for
//! (Adreno, AMD, Intel, lavapipe). Fragments go through shared memory, so any shape and
//! subgroup size serves. Its pipeline key and the rules of its shape, as plain data; and
//! the same for its counterpart on GGUF blocks (`shaders/gemm_blocks_coop.comp`).

use super::matrix_form::MatrixForm;
use super::params::GemvParams;
use super::pipeline::{BlocksTilesKey, TilesKey};
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
    let shape = r.coop_tiles?;
    let layout = &form.layout;
    // One scale per row and block: the group (32 · 2^shift; the whole row for shift 31).
    let group = 32u64 << layout.group_shift.min(31);
    let (workgroup, row_tiles, col_tiles) = workgroup_tiles(r, shape, p)?;
    let key = TilesKey {
        shape,
        workgroup,
        row_tiles,
        col_tiles,
        zeros: form.shape.zero_points,
        scale_f32: form.scale_f32,
        x_f16: p.x_f16,
        offsets: form.offsets,
        k_order: form.column_order && !p.x_gathered,
        block: group.min(128) as u32,
    };
    fitted(
        r,
        key,
        |k| k.shared_bytes(),
        |k| (&mut k.row_tiles, &mut k.col_tiles),
    )
}

/// Whether a call on GGUF blocks `form` that runs a GEMM runs the tensor-core GEMM on
/// blocks (`shaders/gemm_blocks_coop.comp`): on contexts with a usable fragment shape whose
/// depth divides a run of 16 inputs, where the caller fixed it (`Overrides::coop_tiles`) or
/// else the device's row says (`DeviceTuning::blocks_coop_tiles_gemm`).
pub fn runs_blocks_tiles(r: &Rules, form: &MatrixForm) -> bool {
    form.blocks.is_some()
        && r.coop_tiles.is_some_and(|s| 16 % s.k == 0)
        && r.overrides()
            .coop_tiles
            .unwrap_or(r.row.blocks_coop_tiles_gemm)
}

/// The tensor-core GEMM on blocks' key for a call with `p` on GGUF blocks of type `ty`,
/// sized as [`tiles_key`]'s; `None` where the shape's depth does not divide 16 or one tile
/// of each does not fit the shared memory (the GEMM on blocks runs).
pub fn blocks_tiles_key(r: &Rules, ty: BlockType, p: &GemvParams) -> Option<BlocksTilesKey> {
    let shape = r.coop_tiles.filter(|s| 16 % s.k == 0)?;
    let (workgroup, row_tiles, col_tiles) = workgroup_tiles(r, shape, p)?;
    let key = BlocksTilesKey {
        shape,
        workgroup,
        row_tiles,
        col_tiles,
        x_f16: p.x_f16,
        ty,
    };
    fitted(
        r,
        key,
        |k| k.shared_bytes(),
        |k| (&mut k.row_tiles, &mut k.col_tiles),
    )
}

/// The workgroup (`None` where the device's subgroups do not fill it), row tiles and
/// column tiles the kernels aim at for a call with `p` on fragments of `shape`: 64 rows,
/// the columns of the call's tokens (at most 32; two columns per token for f32 x).
fn workgroup_tiles(r: &Rules, shape: FragmentShape, p: &GemvParams) -> Option<(u32, u32, u32)> {
    let parts = if p.x_f16 { 1 } else { 2 };
    let workgroup = WORKGROUP.min(r.class.max_workgroup);
    // Subgroups must fill the workgroup; the kernel's rows must split into whole tiles.
    workgroup
        .is_multiple_of(r.class.subgroup_size.max(1))
        .then_some((
            workgroup,
            (ROWS_PER_WORKGROUP / shape.m).max(1),
            (parts * p.m.min(MAX_TOKENS)).div_ceil(shape.n),
        ))
}

/// `key` with its column tiles, then its row tiles (`tiles` of the key), halved while its
/// shared memory (`bytes`) exceeds the device's; `None` where one of each does not fit.
fn fitted<K>(
    r: &Rules,
    mut key: K,
    bytes: impl Fn(&K) -> u32,
    tiles: impl Fn(&mut K) -> (&mut u32, &mut u32),
) -> Option<K> {
    while bytes(&key) > r.class.max_shared {
        let (row_tiles, col_tiles) = tiles(&mut key);
        if *col_tiles > 1 {
            *col_tiles /= 2;
        } else if *row_tiles > 1 {
            *row_tiles /= 2;
        } else {
            return None;
        }
    }
    Some(key)
}
