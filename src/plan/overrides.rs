//! The caller's fixed choices that replace the rules' (tuning experiments and tests:
//! `q4vk-bench`'s `--coop`, `--gemm-tile` and friends), read in one place and checked once.

use super::tuning::GemmTile;
use crate::error::{invalid, Result};

/// Fixed choices of a context, each replacing one rule's answer where set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Overrides {
    /// (row tiles per subgroup, subgroups per workgroup) of the tensor-core GEMV.
    pub coop_gemv: Option<(u32, u32)>,
    /// The tensor-core GEMM's shape.
    pub coop_gemm: Option<CoopGemmTuning>,
    /// K slices of the tensor-core GEMM on x in fragments (1: none).
    pub coop_gemm_slices: Option<u32>,
    /// The first m that runs a GEMM kernel: from it on every call runs its layout's GEMM
    /// (on x or, with a workspace, on x in fragments), below it a GEMV (the SIMT or integer
    /// dot-product one in passes of 8 rows past m = 8). Tensor-core matrices run the GEMM
    /// past m = 8 whatever the value: their GEMV takes at most 8 rows.
    pub gemm_from_m: Option<u32>,
    /// The SIMT GEMM's tile.
    pub gemm_tile: Option<GemmTile>,
    /// The SIMT GEMM's K groups per workgroup.
    pub gemm_ksplit: Option<u32>,
    /// Whether the f32 SIMT GEMV at m ≥ 2 decodes each word once for all activation rows
    /// (`PipelineKey::decode_once`), whatever the matrix's rows.
    pub simt_gemv_decode_once: Option<bool>,
    /// Whether the SIMT GEMV's invocations (f32 and integer dot products) step over words of
    /// codes instead of chunks (`PipelineKey::word_lanes`), whatever the workgroup shape
    /// says.
    pub simt_gemv_word_lanes: Option<bool>,
    /// Whether SIMT-layout matrices run the tensor-core GEMM on the SIMT layout, and GGUF
    /// block matrices the tensor-core GEMM on blocks (`vk::coop_tiles`), where a GEMM runs,
    /// on contexts whose device offers them.
    pub coop_tiles: Option<bool>,
    /// Rows per workgroup of the GEMV on GGUF blocks (1, 2, 4, 8, 16 or 32), at every m.
    pub blocks_gemv_rows: Option<u32>,
    /// Activation rows per pass of the GEMV on GGUF blocks (1 to 8).
    pub blocks_gemv_pass_rows: Option<u32>,
    /// Whether the GEMV on GGUF blocks strides over quarters of pieces
    /// (`BlocksKey::word_lanes`).
    pub blocks_gemv_word_lanes: Option<bool>,
    /// Pieces per step of the GEMV on GGUF blocks (1 to 4; `BlocksGemvShape::unroll` of
    /// `DeviceTuning::blocks_gemv`, capped as there).
    pub blocks_gemv_unroll: Option<u32>,
}

impl Overrides {
    /// Checks each fixed choice (the device's limits are checked per call).
    pub fn checked(self) -> Result<Overrides> {
        check_coop_tuning(self.coop_gemv)?;
        check_coop_gemm_tuning(self.coop_gemm)?;
        check_gemm_tile(self.gemm_tile)?;
        check_gemm_ksplit(self.gemm_ksplit)?;
        check_coop_gemm_slices(self.coop_gemm_slices)?;
        if let Some(rows) = self.blocks_gemv_rows {
            if !rows.is_power_of_two() || rows > 32 {
                return Err(invalid!(
                    "rows per workgroup of the GEMV on GGUF blocks: {rows}; expected 1, 2, 4, 8, 16 or 32"
                ));
            }
        }
        check_count(
            self.blocks_gemv_pass_rows,
            8,
            "activation rows per pass of the GEMV on GGUF blocks",
        )?;
        check_count(
            self.blocks_gemv_unroll,
            4,
            "pieces per step of the GEMV on GGUF blocks",
        )?;
        Ok(self)
    }
}

/// A shape of the tensor-core GEMM (`shaders/gemm_q4_coop.comp`): fixed by
/// `Overrides::coop_gemm`, or the one the rules chose for a call
/// (`vk::gemv::Choice::coop_gemm_shape`). Written as `T,S,M,K,A,G` (`q4vk-bench --coop-gemm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CoopGemmTuning {
    /// Row tiles of 16 rows per subgroup (T).
    pub tiles: u32,
    /// Subgroups of 32 per workgroup (S).
    pub subgroups: u32,
    /// Tokens (activation rows) per workgroup (M).
    pub tokens: u32,
    /// K groups: groups of subgroups taking interleaved stages of the same rows (K).
    pub k_groups: u32,
    /// k-steps of B loaded ahead on x in fragments: 2, 4 or 8; 0 for the default (A).
    pub b_ahead: u32,
    /// Token groups per K group: its subgroups split the workgroup's tokens (G).
    pub token_groups: u32,
}

impl CoopGemmTuning {
    /// The shape `T,S,M,K,A,G`.
    pub const fn new(
        tiles: u32,
        subgroups: u32,
        tokens: u32,
        k_groups: u32,
        b_ahead: u32,
        token_groups: u32,
    ) -> CoopGemmTuning {
        CoopGemmTuning {
            tiles,
            subgroups,
            tokens,
            k_groups,
            b_ahead,
            token_groups,
        }
    }
}

impl std::fmt::Display for CoopGemmTuning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let CoopGemmTuning {
            tiles: t,
            subgroups: s,
            tokens: m,
            k_groups: k,
            b_ahead: a,
            token_groups: g,
        } = *self;
        write!(f, "{t},{s},{m},{k},{a},{g}")
    }
}

/// Checks a fixed shape of the tensor-core GEMV (`Overrides::coop_gemv`).
fn check_coop_tuning(tuning: Option<(u32, u32)>) -> Result<()> {
    match tuning {
        Some((tiles, subgroups))
            if !(1..=4).contains(&tiles) || ![1, 2, 4, 8, 16].contains(&subgroups) =>
        {
            Err(invalid!(
                "coop tuning ({tiles}, {subgroups}): expected 1..4 tiles and 1, 2, 4, 8 or 16 subgroups"
            ))
        }
        _ => Ok(()),
    }
}

/// Checks a fixed tile of the SIMT GEMM (`Overrides::gemm_tile`); the device's
/// workgroup and shared-memory limits are checked per call.
fn check_gemm_tile(tile: Option<GemmTile>) -> Result<()> {
    let Some(t) = tile else {
        return Ok(());
    };
    let per_invocation = |v: u32| v.is_multiple_of(4) && (4..=16).contains(&v);
    if !per_invocation(t.rn)
        || !per_invocation(t.rm)
        || t.tx == 0
        || t.ty == 0
        || u64::from(t.tx) * u64::from(t.ty) > 1024
    {
        return Err(invalid!(
            "GEMM tile ({}, {}, {}, {}): expected 4, 8, 12 or 16 rows and tokens per invocation and at most 1024 invocations",
            t.tx,
            t.ty,
            t.rn,
            t.rm
        ));
    }
    Ok(())
}

/// Largest count of K slices of the tensor-core GEMM that `Context::set_overrides`
/// takes.
const MAX_COOP_GEMM_SLICES: u32 = 16;

/// Checks a fixed count (`what`: K groups, K slices) of 1 to `max`, or none.
fn check_count(count: Option<u32>, max: u32, what: &str) -> Result<()> {
    match count {
        Some(c) if !(1..=max).contains(&c) => Err(invalid!("{what} {c}: expected 1 to {max}")),
        _ => Ok(()),
    }
}

/// Checks fixed K slices of the tensor-core GEMM (`Overrides::coop_gemm_slices`): 1 to
/// [`MAX_COOP_GEMM_SLICES`].
fn check_coop_gemm_slices(slices: Option<u32>) -> Result<()> {
    check_count(slices, MAX_COOP_GEMM_SLICES, "tensor-core GEMM K slices")
}

/// Largest count of K groups of the SIMT GEMM that `Context::set_overrides` takes.
const MAX_GEMM_KSPLIT: u32 = 8;

/// Checks fixed K groups of the SIMT GEMM (`Overrides::gemm_ksplit`): 1 to
/// [`MAX_GEMM_KSPLIT`]; the device's limits and the tile's are checked per call.
fn check_gemm_ksplit(ksplit: Option<u32>) -> Result<()> {
    check_count(ksplit, MAX_GEMM_KSPLIT, "GEMM K groups")
}

/// Checks a fixed shape of the tensor-core GEMM (`Overrides::coop_gemm`).
fn check_coop_gemm_tuning(tuning: Option<CoopGemmTuning>) -> Result<()> {
    let Some(shape) = tuning else {
        return Ok(());
    };
    let CoopGemmTuning {
        tiles,
        subgroups,
        tokens,
        k_groups: ksplit,
        b_ahead: ahead,
        token_groups: tsplit,
    } = shape;
    if !(1..=4).contains(&tiles)
        || ![1, 2, 4, 8].contains(&subgroups)
        || ksplit > subgroups
        || tsplit > subgroups
        || tokens % 8 != 0
        || tokens % subgroups != 0
        || !(8..=256).contains(&tokens)
        || ksplit == 0
        || tsplit == 0
        || subgroups % (ksplit * tsplit) != 0
        || tokens % (8 * tsplit) != 0
        || tokens / tsplit > 128
        || ![0, 2, 4, 8].contains(&ahead)
    {
        return Err(invalid!(
            "coop GEMM tuning {shape}: expected 1..4 tiles, 1, 2, 4 or 8 subgroups, 8..256 tokens in steps of 8 and of the subgroups, K groups times token groups dividing the subgroups, up to 128 tokens per token group in steps of 8, 0, 2, 4 or 8 k-steps ahead"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{check_coop_gemm_tuning, CoopGemmTuning};

    fn shape((t, s, m, k, a, g): (u32, u32, u32, u32, u32, u32)) -> Option<CoopGemmTuning> {
        Some(CoopGemmTuning::new(t, s, m, k, a, g))
    }

    #[test]
    fn coop_gemm_tunings_are_checked_before_any_pipeline() {
        // (tiles, subgroups, tokens, K groups, k-steps ahead, token groups).
        for ok in [
            (4, 4, 32, 1, 2, 1),
            (2, 8, 128, 1, 2, 2),
            (1, 8, 32, 2, 4, 2),
            (2, 4, 8, 4, 0, 1),
        ] {
            assert!(check_coop_gemm_tuning(shape(ok)).is_ok(), "{ok:?}");
        }
        for bad in [
            // Token groups that do not divide the K groups' subgroups, or leave a group
            // fewer than 8 tokens or more than 128.
            (2, 8, 128, 2, 2, 8),
            (2, 8, 24, 1, 2, 2),
            (2, 8, 256, 1, 2, 1),
            (2, 4, 32, 1, 2, 0),
            // Products past u32 (refused, not wrapped).
            (1, 8, 8, 65536, 0, 65536),
            (1, 8, 8, 8, 0, 1 << 29),
        ] {
            assert!(check_coop_gemm_tuning(shape(bad)).is_err(), "{bad:?}");
        }
    }
}
