//! The tensor-core GEMM on the SIMT layout (`shaders/gemm_q4_coop_tiles.comp`): the kernel
//! for devices whose `VK_KHR_cooperative_matrix` offers a usable f16 shape but not the
//! fragment layout or subgroups of 32 that the tensor-core layout's kernels are written for
//! (Adreno, AMD, Intel, lavapipe). Fragments go through shared memory, so any shape and
//! subgroup size serves. Its pipeline key and the rules of its shape, as plain data.

use super::matrix_form::MatrixForm;
use super::params::GemvParams;
use super::pipeline::TilesKey;
use super::rules::Rules;

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
    let parts = if p.x_f16 { 1 } else { 2 };
    let mut key = TilesKey {
        shape,
        workgroup: WORKGROUP.min(r.class.max_workgroup),
        row_tiles: (ROWS_PER_WORKGROUP / shape.m).max(1),
        col_tiles: (parts * p.m.min(MAX_TOKENS)).div_ceil(shape.n),
        zeros: form.shape.zero_points,
        scale_f32: form.scale_f32,
        x_f16: p.x_f16,
        offsets: form.offsets,
        k_order: form.column_order && !p.x_gathered,
        block: group.min(128) as u32,
    };
    // Subgroups must fill the workgroup; the kernel's rows must split into whole tiles.
    if !key.workgroup.is_multiple_of(r.class.subgroup_size.max(1)) {
        return None;
    }
    while key.shared_bytes() > r.class.max_shared {
        if key.col_tiles > 1 {
            key.col_tiles /= 2;
        } else if key.row_tiles > 1 {
            key.row_tiles /= 2;
        } else {
            return None;
        }
    }
    Some(key)
}
