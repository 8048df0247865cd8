//! The shape rules of the tensor-core kernels (`shaders/gemv_q4_coop.comp`,
//! `shaders/gemm_q4_coop.comp`, `shaders/gemm_blocks_frag.comp`): tiles, subgroups, tokens,
//! K groups, K slices and B's look-ahead per call, as pure functions of the matrix, m and
//! the device's SM count and shared memory. `vk::gemv_plan::decide` asks them when it decides
//! a call. They were fitted on NVIDIA's H200 and H100, whose fragment layout the kernels take
//! (`vk::coop::probe`); a device class of another fragment layout or subgroup size needs its
//! own.

use super::params::MAX_M;
use super::pipeline::{coop_shared_bytes, CoopGemmKey};
use crate::import::gguf_blocks::BlockType;

/// (row tiles per subgroup, subgroups, tokens per workgroup, K groups) of the tensor-core
/// GEMM on staged x for `n` rows at `m` tokens: at m ≤ 8, 8 tokens, 1 tile × 8 subgroups
/// (128 rows); beyond, 16 tokens and, where workgroups of 256 rows would number ≤ 32
/// (≤ 64) — short matrices at small m, whose few workgroups leave SMs idle — 2 tiles × 8
/// subgroups in 4 (2) K groups; else f32 activations 2 tiles × 4 subgroups up to m = 32 and
/// × 8 (256 rows) beyond, f16 activations 1 tile × 8. Fitted on an NVIDIA H200
/// (`bench/history/h200-2026-12-01-gemm-sweep-short.txt`).
pub fn choose_gemm_shape(n: usize, m: u32, x_f16: bool) -> (u32, u32, u32, u32) {
    let wide = (n as u64).div_ceil(256) * (m as u64).div_ceil(16);
    match (x_f16, m) {
        (_, ..=MAX_M) => (1, 8, 8, 1),
        _ if wide <= 32 => (2, 8, 16, 4),
        _ if wide <= 64 => (2, 8, 16, 2),
        (true, _) => (1, 8, 16, 1),
        (false, ..=32) => (2, 4, 16, 1),
        (false, _) => (2, 8, 16, 1),
    }
}

/// (row tiles per subgroup, subgroups, tokens per workgroup, K groups) of the tensor-core
/// GEMM on GGUF blocks of `ty` with fragments in registers for `n` rows at `m` tokens: for
/// Q4_K and Q5_K (whose stage is one sum) from m = 256, 32 tokens per workgroup (f32 x 2 row
/// tiles × 8 subgroups, f16 x 1 × 8), whose decoded A fragments each feed twice the MMAs;
/// elsewhere [`choose_gemm_shape`]'s. Fitted on Q4_K at m = 64 and 512 on an NVIDIA H100
/// (`bench/history/h100-2026-12-06-blocks-fragments.txt`: 32 tokens lost at m = 64 on two of
/// three matrices and won at m = 512 on all three; the other types were not timed with it).
pub fn choose_blocks_frag_shape(
    ty: BlockType,
    n: usize,
    m: u32,
    x_f16: bool,
) -> (u32, u32, u32, u32) {
    let one_sum_per_stage = matches!(ty, BlockType::Q4K | BlockType::Q5K);
    match (x_f16, m) {
        _ if !one_sum_per_stage || m < 256 => choose_gemm_shape(n, m, x_f16),
        (true, _) => (1, 8, 32, 1),
        (false, _) => (2, 8, 32, 1),
    }
}

/// (row tiles per subgroup, subgroups, tokens per workgroup, K groups, token groups) of the
/// tensor-core GEMM on x in fragments (`x_fragments`) for an `n` × `k` matrix at `m` tokens
/// with `parts` B columns per token; with `slices`, the larger tile where the call runs in K
/// slices ([`choose_fragments_slices`]; without, where their sums do not fit the workspace,
/// the shape before them). Fitted on an NVIDIA H200 (`bench/history/`: `m8-shapes`,
/// `filling-slices`, `inner-loop`, `small-groups`).
///
/// - m ≤ 8 (where this GEMM replaces the GEMV): 8 tokens per workgroup and K split 8 ways,
///   since one token tile leaves few workgroups: f16 x 1 row tile × 8 subgroups (16 rows),
///   f32 x in two parts 2 × 8 (32 rows).
/// - Beyond: 32 columns per workgroup (16 up to m = 16), so 32 tokens of f16 x and 16 of
///   f32 x in two parts. Past m = 16 on a GPU whose SM count is known: the larger tile
///   (f16 x 4 row tiles × 4 subgroups, 256 rows; exact f32 x 2 × 4, 128 rows, or 4 × 4 past
///   4096 tasks) wherever [`filling_slices`] finds K slices of it that fill the GPU (or it
///   fills the GPU alone; without room for the slices' sums, the K groups' shape below).
///   Elsewhere, and where the SM count is unknown: fewer than 1024 tasks of 32 rows × 32
///   tokens (too few to fill the GPU) take 2 row tiles × 8 subgroups in 4 K groups; more
///   take 4 row tiles × 4 subgroups, no K split (exact f32 x up to 4096 tasks 2 × 4).
/// - Where the larger tile runs whole, one column per token (f16 x, and f32 x rounded to
///   f16) from m = 64 runs the wide tile instead where it pads m by at most 1/16 more
///   (`runs_wide_tile`): 2 row tiles × 4 subgroups, 128 rows × 64 tokens, each subgroup
///   32 rows × 64 tokens, so each decoded A fragment feeds 8 MMAs instead of 4. Past
///   K = 16384 the larger tile stays, except for `small_groups` (groups of 32 or 64
///   without offsets, whose block epilogue comes often enough that the wide tile's longer
///   look-ahead pays: [`choose_fragments_lookahead`]). Exact f32 x in two parts keeps its
///   tiles (64 tokens would be 16 B fragments per k-step).
pub fn choose_fragments_gemm_shape(
    n: usize,
    k: usize,
    m: u32,
    parts: u32,
    small_groups: bool,
    slices: bool,
    sm_count: Option<u32>,
) -> (u32, u32, u32, u32, u32) {
    if m <= MAX_M {
        return match parts {
            1 => (1, 8, 8, 8, 1),
            _ => (2, 8, 8, 8, 1),
        };
    }
    let tokens = if m <= 16 { 16 } else { 32 } / parts;
    let tasks = tasks(n, m);
    let k_groups = (2, 8, tokens, 4, 1);
    let (tiles, subgroups) = larger_tile(parts, tasks);
    let large = (tiles, subgroups, tokens, 1, 1);
    // The larger tile run whole (no K slices): the wide tile where it applies.
    let whole = match runs_wide_tile(k, m, parts, small_groups) {
        true => WIDE_TILE,
        false => large,
    };
    if let Some(z) = filling_slices(n, k, m, parts, sm_count) {
        return match (z, slices) {
            (1, _) => whole,
            (_, true) => large,
            (_, false) => k_groups,
        };
    }
    match tasks {
        _ if slices && choose_fragments_slices(n, k, m, parts, sm_count) > 1 => large,
        ..1024 => k_groups,
        _ => whole,
    }
}

/// The wide tile of [`choose_fragments_gemm_shape`] as its (row tiles per subgroup,
/// subgroups, tokens, K groups, token groups): 128 rows × 64 tokens.
const WIDE_TILE: (u32, u32, u32, u32, u32) = (2, 4, 64, 1, 1);

/// Tasks of 32 rows × 32 tokens in an `n`-row matrix at `m` tokens, the unit the shape rules
/// count work in.
fn tasks(n: usize, m: u32) -> u64 {
    (n as u64).div_ceil(32) * u64::from(m).div_ceil(32)
}

/// (row tiles per subgroup, subgroups) of the larger tile of [`choose_fragments_gemm_shape`]
/// for `parts` B columns per token at `tasks` ([`tasks`]): 4 × 4 (256 rows) for f16 x, and for
/// exact f32 x in two parts past 4096 tasks; else 2 × 4 (128 rows).
fn larger_tile(parts: u32, tasks: u64) -> (u32, u32) {
    match (parts, tasks) {
        (1, _) | (_, 4096..) => (4, 4),
        _ => (2, 4),
    }
}

/// Whether [`choose_fragments_gemm_shape`] runs the wide tile (2 row tiles × 4 subgroups,
/// 128 rows × 64 tokens; each subgroup 32 rows × 64 tokens) where it would run its larger
/// tile whole: one column per token from m = 64 on K ≤ 16384 (any K for `small_groups`),
/// where 64-token tiles pad m by at most 1/16 more than 32-token tiles do.
fn runs_wide_tile(k: usize, m: u32, parts: u32, small_groups: bool) -> bool {
    let little_padding =
        u64::from(m.next_multiple_of(64)) * 16 <= 17 * u64::from(m.next_multiple_of(32));
    parts == 1 && m >= 64 && (k <= 16384 || small_groups) && little_padding
}

/// Whether a call of one column per token is one the K-slice rule ([`filling_slices`]) was
/// not fitted on: from m = 512 on K ≤ 16384 where tiles of 128 rows × 128 tokens number at
/// least 128 and pad m by at most 1/16 (the calls that ran token groups then).
fn beyond_fitted_slices(n: usize, k: usize, m: u32, parts: u32) -> bool {
    let wide_tiles = (n as u64).div_ceil(128) * u64::from(m).div_ceil(128);
    let little_padding = u64::from(m.next_multiple_of(128)) * 16 <= 17 * u64::from(m);
    parts == 1 && m >= 512 && k <= 16384 && wide_tiles >= 128 && little_padding
}

/// K slices of the tensor-core GEMM on x in fragments for an `n` × `k` matrix at `m` tokens
/// with `parts` B columns per token (1: none). Past m = 16 on a GPU whose SM count is
/// known: [`filling_slices`] where they fill it. Otherwise 4 slices of the larger tile of
/// [`choose_fragments_gemm_shape`] where the call has fewer than 1024 tasks of 32 rows ×
/// 32 tokens, K ≥ 16384 (few rows, a long K: the K groups' shape re-reads x from the L2 for
/// every 64 rows) and at least two token tiles (with one, the K groups' shape is faster).
/// Fitted on an NVIDIA H200 (`bench/history/h200-2026-12-02-k-slices.txt`).
pub fn choose_fragments_slices(
    n: usize,
    k: usize,
    m: u32,
    parts: u32,
    sm_count: Option<u32>,
) -> u32 {
    if let Some(z) = filling_slices(n, k, m, parts, sm_count) {
        return z;
    }
    match m > 16 && m > 32 / parts && tasks(n, m) < 1024 && k >= 16384 {
        true => 4,
        false => 1,
    }
}

/// K slices of the larger tile of [`choose_fragments_gemm_shape`] that fill a GPU of
/// `sm_count` SMs, past m = 16: the most slices, up to 8 and of 16 stages (2048 k) or more
/// on average, whose workgroups number at most `most` per SM, where they number at least
/// `least` per SM (1 where the tiles alone do); `None` where they fall shorter, where the
/// rule was not fitted (f16 x from m = 512 on many tiles, `beyond_fitted_slices`; exact
/// f32 x past 4096 tasks, which runs another tile) or the SM count is unknown (the rules
/// without it apply).
///
/// - f16 x (256 rows × 32 tokens, 128 invocations): `most` 2, `least` 1.4: an SM runs two
///   such workgroups faster than one, and faster than one workgroup of the K groups'
///   shape, which fills its one place per SM only where the call has enough rows.
/// - Exact f32 x in two parts (128 rows × 16 tokens, fewer accumulators): `most` 8,
///   `least` 2.8: more workgroups per SM kept gaining up to about 8.
///
/// Fitted on an NVIDIA H200 (`bench/history/h200-2026-12-02-filling-slices.txt`).
pub fn filling_slices(
    n: usize,
    k: usize,
    m: u32,
    parts: u32,
    sm_count: Option<u32>,
) -> Option<u32> {
    let sms = u64::from(sm_count.filter(|_| m > 16)?);
    if beyond_fitted_slices(n, k, m, parts) {
        return None;
    }
    // Workgroups per SM at most and (in tenths) at least, for the tiles the rule was fitted
    // on (not exact f32 x's 4 × 4 past 4096 tasks).
    let tile = larger_tile(parts, tasks(n, m));
    let (most, least_tenths) = match (parts, tile) {
        (1, _) => (2, 14),
        (_, (2, 4)) => (8, 28),
        _ => return None,
    };
    let rows = 16 * u64::from(tile.0 * tile.1);
    let tokens = u64::from(32 / parts);
    let tiles = ((n as u64).div_ceil(rows) * u64::from(m).div_ceil(tokens)).max(1);
    let deepest = ((k as u64).div_ceil(128) / 16).clamp(1, 8);
    let z = (most * sms / tiles).clamp(1, deepest);
    (10 * tiles * z >= least_tenths * sms).then_some(z as u32)
}

/// k-steps of B fragments the tensor-core GEMM on x in fragments loads ahead of their
/// products, for `key`'s shape (its `b_ahead` aside) at `m` tokens of `parts` B columns
/// each: with K groups 4 (the shapes have registers to spare), and 8 for f32 x at m ≤ 8
/// (its 2 × 8 shape). Without K groups 2 (4 costs more registers than it hides latency),
/// except 4 on the wide tile of f16 x for groups of 32 and 64, whose block epilogue every
/// 2 or 4 k-steps leaves the loads too little time. With offsets, 4 spills registers, so 2.
/// Fitted on an NVIDIA H200 (`bench/history/`: `pairs`, `ring`, `small-groups`).
pub fn choose_fragments_lookahead(key: &CoopGemmKey, m: u32, parts: u32) -> u32 {
    let shape = (key.tiles, key.subgroups, key.tokens, key.ksplit, key.tsplit);
    let f16_x = key.x_f16 && !key.x_rounded;
    match key.ksplit {
        1 if shape == WIDE_TILE && small_groups(key.block, key.offsets, f16_x) => 4,
        1 => 2,
        _ if m <= MAX_M && parts == 2 => 8,
        _ => 4,
    }
}

/// Whether the tensor-core GEMM on x in fragments takes the rules for small groups (the
/// wide tile at any K, B loaded 4 k-steps ahead on it): blocks of 32 or 64 k on `f16_x`
/// (f16 activations, not f32 ones rounded to f16), without offsets, as timed (offsets and
/// rounded f32 x keep per-block sums or factors live, and 4 ahead spilled with offsets).
pub fn small_groups(block: u32, offsets: bool, f16_x: bool) -> bool {
    block < 128 && !offsets && f16_x
}

/// (row tiles per subgroup, subgroups per workgroup) of the tensor-core GEMV for a matrix
/// of `rows` rows and `stages` stages of 128 k at `m` activation rows, on a device with
/// `sm_count` SMs where known:
/// - m > 4: (4, 4), each staged x block serving 64 rows, where those workgroups fill the
///   SMs (rows / 64 ≥ SMs) and m ≠ 7; else (2, 8), since (4, 4) leaves SMs idle on fewer
///   rows and was slower at m = 7. Without an SM count: (4, 4).
/// - m ≤ 4: 2 tiles (x prefetched) in workgroups sized to the SMs: 8 subgroups; 16 where
///   8-subgroup workgroups would leave SMs without one; 4 where they number ≥ 2.5 per SM.
///
/// Never more subgroups than stages, never more shared memory than `max_shared` (halving
/// subgroups, then tiles). Fitted on an NVIDIA H200 (`q4vk-bench --coop-sweep`;
/// `bench/history/h200-2026-12-02-sm-rule.txt`).
pub fn choose_shape(
    rows: usize,
    stages: usize,
    m: u32,
    block: u32,
    max_shared: u32,
    sm_count: Option<u32>,
) -> (u32, u32) {
    let (mut t, mut s) = match sm_count {
        Some(sms) if m > 4 && (m == 7 || rows.div_ceil(64) < sms as usize) => (2u32, 8u32),
        _ if m > 4 => (4, 4),
        _ => (2, 8),
    };
    if let (Some(sms), true) = (sm_count, m <= 4) {
        let workgroups = rows.div_ceil(16 * t as usize) as u64;
        let sms = sms as u64;
        if workgroups < sms {
            s = 16;
        } else if 2 * workgroups >= 5 * sms {
            s = 4;
        }
    }
    while s > 1 && s as usize > stages {
        s /= 2;
    }
    let fits = |t: u32, s: u32| coop_shared_bytes(t, s, m, block) <= max_shared;
    while !fits(t, s) && s > 1 {
        s /= 2;
    }
    while !fits(t, s) && t > 1 {
        t /= 2;
    }
    (t, s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_take_32_tokens_from_m_256_where_a_stage_is_one_sum() {
        for ty in [BlockType::Q4K, BlockType::Q5K] {
            assert_eq!(
                choose_blocks_frag_shape(ty, 4096, 512, false),
                (2, 8, 32, 1)
            );
            assert_eq!(choose_blocks_frag_shape(ty, 4096, 256, true), (1, 8, 32, 1));
            assert_eq!(
                choose_blocks_frag_shape(ty, 4096, 255, false),
                choose_gemm_shape(4096, 255, false)
            );
        }
        for ty in [BlockType::Q6K, BlockType::Q8_0, BlockType::Nvfp4] {
            assert_eq!(
                choose_blocks_frag_shape(ty, 1536, 512, false),
                choose_gemm_shape(1536, 512, false)
            );
        }
    }

    #[test]
    fn gemm_shapes_split_k_only_where_workgroups_are_few() {
        // 4096 rows: 16 workgroups of 256 rows per 16 tokens.
        assert_eq!(choose_gemm_shape(4096, 16, false), (2, 8, 16, 4));
        assert_eq!(choose_gemm_shape(4096, 64, false), (2, 8, 16, 2));
        assert_eq!(choose_gemm_shape(4096, 512, false), (2, 8, 16, 1));
        assert_eq!(choose_gemm_shape(8192, 16, true), (2, 8, 16, 4));
        assert_eq!(choose_gemm_shape(8192, 64, true), (1, 8, 16, 1));
        assert_eq!(choose_gemm_shape(28672, 16, false), (2, 4, 16, 1));
        assert_eq!(choose_gemm_shape(28672, 64, false), (2, 8, 16, 1));
        // m ≤ 8 (the GEMM at m = 8 on tall matrices): 8 tokens, never split.
        assert_eq!(choose_gemm_shape(4096, 8, false), (1, 8, 8, 1));
        // x in fragments (f16): K groups only where few tasks would leave SMs idle.
        assert_eq!(
            choose_fragments_gemm_shape(4096, 4096, 64, 1, false, true, None),
            (2, 8, 32, 4, 1)
        );
        assert_eq!(
            choose_fragments_gemm_shape(28672, 8192, 16, 1, false, true, None),
            (2, 8, 16, 4, 1)
        );
        // The larger tile whole: the wide tile for f16 x from m = 64 on K ≤ 16384.
        assert_eq!(
            choose_fragments_gemm_shape(28672, 8192, 64, 1, false, true, None),
            (2, 4, 64, 1, 1)
        );
        assert_eq!(
            choose_fragments_gemm_shape(28672, 8192, 256, 1, false, true, None),
            (2, 4, 64, 1, 1)
        );
        assert_eq!(
            choose_fragments_gemm_shape(28672, 8192, 48, 1, false, true, None),
            (4, 4, 32, 1, 1)
        );
        // m = 96 pads to 128 in 64-token tiles (96 in 32): the 4 × 4 tile.
        assert_eq!(
            choose_fragments_gemm_shape(28672, 8192, 96, 1, false, true, None),
            (4, 4, 32, 1, 1)
        );
        assert_eq!(
            choose_fragments_gemm_shape(28672, 8192, 100, 1, false, true, None),
            (2, 4, 64, 1, 1)
        );
        // Few tasks on a long K, two token tiles or more: 4 K slices of the larger tile.
        assert_eq!(choose_fragments_slices(8192, 28672, 64, 1, None), 4);
        assert_eq!(choose_fragments_slices(8192, 28672, 32, 1, None), 1);
        assert_eq!(choose_fragments_slices(8192, 28672, 17, 2, None), 4);
        assert_eq!(
            choose_fragments_gemm_shape(8192, 28672, 64, 1, false, true, None),
            (4, 4, 32, 1, 1)
        );
        assert_eq!(
            choose_fragments_gemm_shape(8192, 28672, 64, 2, false, true, None),
            (2, 4, 16, 1, 1)
        );
        assert_eq!(
            choose_fragments_gemm_shape(8192, 28672, 64, 1, false, false, None),
            (2, 8, 32, 4, 1)
        );
        assert_eq!(choose_fragments_slices(8192, 28672, 16, 2, None), 1);
        assert_eq!(
            choose_fragments_gemm_shape(8192, 28672, 16, 1, false, true, None),
            (2, 8, 16, 4, 1)
        );
        assert_eq!(choose_fragments_slices(8192, 28672, 512, 1, None), 1);
        assert_eq!(choose_fragments_slices(4096, 11008, 64, 1, None), 1);
        // Large m: the wide tile too, no token groups; K past 16384 keeps the 4 × 4 tile.
        assert_eq!(
            choose_fragments_gemm_shape(4096, 4096, 512, 1, false, true, None),
            (2, 4, 64, 1, 1)
        );
        assert_eq!(
            choose_fragments_gemm_shape(28672, 8192, 2048, 1, false, true, None),
            (2, 4, 64, 1, 1)
        );
        assert_eq!(
            choose_fragments_gemm_shape(8192, 28672, 512, 1, false, true, None),
            (4, 4, 32, 1, 1)
        );
        // Groups of 32 or 64 take the wide tile at any K.
        assert_eq!(
            choose_fragments_gemm_shape(8192, 28672, 512, 1, true, true, None),
            (2, 4, 64, 1, 1)
        );
        assert_eq!(
            choose_fragments_gemm_shape(4096, 16384, 512, 1, false, true, None),
            (2, 4, 64, 1, 1)
        );
        assert_eq!(
            choose_fragments_gemm_shape(4096, 16512, 512, 1, false, true, None),
            (4, 4, 32, 1, 1)
        );
        assert_eq!(
            choose_fragments_gemm_shape(4096, 4096, 1000, 1, false, true, None),
            (2, 4, 64, 1, 1)
        );
        // Padding: m = 545 takes 576 tokens in tiles of either width (wide); m = 160 would
        // take 192 in 64-token tiles against 160 (the 4 × 4 tile).
        assert_eq!(
            choose_fragments_gemm_shape(28672, 8192, 545, 1, false, true, None),
            (2, 4, 64, 1, 1)
        );
        assert_eq!(
            choose_fragments_gemm_shape(28672, 8192, 160, 1, false, true, None),
            (4, 4, 32, 1, 1)
        );
        // f32 x in two parts: half the tokens, the same columns; 2 tiles up to 4096 tasks.
        assert_eq!(
            choose_fragments_gemm_shape(28672, 8192, 64, 2, false, true, None),
            (2, 4, 16, 1, 1)
        );
        assert_eq!(
            choose_fragments_gemm_shape(4096, 4096, 512, 2, false, true, None),
            (2, 4, 16, 1, 1)
        );
        assert_eq!(
            choose_fragments_gemm_shape(28672, 8192, 512, 2, false, true, None),
            (4, 4, 16, 1, 1)
        );
        // m ≤ 8: 8 tokens, K split 8 ways; f32 x 8 k-steps ahead.
        assert_eq!(
            choose_fragments_gemm_shape(28672, 8192, 8, 2, false, true, None),
            (2, 8, 8, 8, 1)
        );
        assert_eq!(
            choose_fragments_gemm_shape(4096, 4096, 8, 1, false, true, None),
            (1, 8, 8, 8, 1)
        );
        let key = |(tiles, subgroups, tokens, ksplit), block, offsets| CoopGemmKey {
            tiles,
            subgroups,
            tokens,
            zeros: false,
            x_f16: true,
            block,
            offsets,
            ksplit,
            x_fragments: true,
            x_rounded: false,
            b_ahead: 2,
            tsplit: 1,
            k_slices: false,
        };
        assert_eq!(
            choose_fragments_lookahead(&key((2, 8, 8, 8), 128, false), 8, 2),
            8
        );
        assert_eq!(
            choose_fragments_lookahead(&key((1, 8, 8, 8), 128, false), 8, 1),
            4
        );
        assert_eq!(
            choose_fragments_lookahead(&key((2, 8, 16, 4), 128, false), 64, 2),
            4
        );
        assert_eq!(
            choose_fragments_lookahead(&key((2, 4, 16, 1), 128, false), 64, 2),
            2
        );
        // The wide tile: 4 ahead for groups under 128 without offsets, else 2.
        let wide = (2, 4, 64, 1);
        assert_eq!(choose_fragments_lookahead(&key(wide, 32, false), 512, 1), 4);
        assert_eq!(choose_fragments_lookahead(&key(wide, 64, false), 64, 1), 4);
        assert_eq!(
            choose_fragments_lookahead(&key(wide, 128, false), 512, 1),
            2
        );
        assert_eq!(choose_fragments_lookahead(&key(wide, 32, true), 512, 1), 2);
        assert_eq!(
            choose_fragments_lookahead(&key((4, 4, 32, 1), 32, false), 512, 1),
            2
        );
    }

    #[test]
    fn slices_fill_a_gpu_of_known_sms() {
        const H200: Option<u32> = Some(132);
        // 5120 × 13824 at m = 64: 40 tiles of 256 × 32, 6 slices fill 240 of 264 places.
        assert_eq!(filling_slices(5120, 13824, 64, 1, H200), Some(6));
        assert_eq!(choose_fragments_slices(5120, 13824, 64, 1, H200), 6);
        assert_eq!(
            choose_fragments_gemm_shape(5120, 13824, 64, 1, false, true, H200),
            (4, 4, 32, 1, 1)
        );
        // Without room for the slices' sums: the K groups' shape.
        assert_eq!(
            choose_fragments_gemm_shape(5120, 13824, 64, 1, false, false, H200),
            (2, 8, 32, 4, 1)
        );
        // 14336 × 4096: 2 slices (16 stages each) fill 224 places.
        assert_eq!(filling_slices(14336, 4096, 48, 1, H200), Some(2));
        // 160 of 264 places: the rules without the SM count (the K groups, no slices).
        assert_eq!(filling_slices(4096, 11008, 64, 1, H200), None);
        assert_eq!(
            choose_fragments_gemm_shape(4096, 11008, 64, 1, false, true, H200),
            (2, 8, 32, 4, 1)
        );
        // 4096²: at most 2 slices of 16 stages fill 64 of 264 places; the K groups run.
        assert_eq!(filling_slices(4096, 4096, 64, 1, H200), None);
        assert_eq!(choose_fragments_slices(4096, 4096, 64, 1, H200), 1);
        assert_eq!(
            choose_fragments_gemm_shape(4096, 4096, 64, 1, false, true, H200),
            (2, 8, 32, 4, 1)
        );
        // Tiles that fill the GPU alone: no slices, the larger tile whole (the wide tile
        // from m = 64 on K ≤ 16384, f16 x).
        assert_eq!(filling_slices(28672, 8192, 64, 1, H200), Some(1));
        assert_eq!(
            choose_fragments_gemm_shape(28672, 8192, 64, 1, false, false, H200),
            (2, 4, 64, 1, 1)
        );
        assert_eq!(filling_slices(28672, 8192, 32, 1, H200), Some(2));
        assert_eq!(
            choose_fragments_gemm_shape(28672, 8192, 32, 1, false, true, H200),
            (4, 4, 32, 1, 1)
        );
        assert_eq!(filling_slices(8192, 28672, 512, 1, H200), Some(1));
        assert_eq!(
            choose_fragments_gemm_shape(8192, 28672, 512, 1, false, true, H200),
            (4, 4, 32, 1, 1)
        );
        // At most 8 slices; from m = 512 on many tiles the rule stays off (the wide tile).
        assert_eq!(filling_slices(8192, 28672, 32, 1, H200), Some(8));
        assert_eq!(filling_slices(4096, 4096, 512, 1, H200), None);
        assert_eq!(
            choose_fragments_gemm_shape(4096, 4096, 512, 1, false, true, H200),
            (2, 4, 64, 1, 1)
        );
        // Exact f32 x in two parts: 128 × 16 tiles, up to 8 workgroups per SM, at least 2.8.
        assert_eq!(filling_slices(5120, 13824, 32, 2, H200), Some(6));
        assert_eq!(filling_slices(14336, 4096, 64, 2, H200), Some(2));
        assert_eq!(filling_slices(8192, 28672, 64, 2, H200), Some(4));
        assert_eq!(filling_slices(4096, 11008, 32, 2, H200), None);
        assert_eq!(
            choose_fragments_gemm_shape(5120, 13824, 32, 2, false, true, H200),
            (2, 4, 16, 1, 1)
        );
        // Tiles that fill it alone; past 4096 tasks the 4 × 4 shape, as without the count.
        assert_eq!(filling_slices(28672, 8192, 64, 2, H200), Some(1));
        assert_eq!(
            choose_fragments_gemm_shape(28672, 8192, 64, 2, false, false, H200),
            (2, 4, 16, 1, 1)
        );
        assert_eq!(
            choose_fragments_gemm_shape(28672, 8192, 512, 2, false, true, H200),
            (4, 4, 16, 1, 1)
        );
        // Calls it was not fitted on keep the rules without it (however many SMs): f16 x
        // from m = 512 on many tiles, exact f32 x past 4096 tasks.
        assert_eq!(filling_slices(4096, 4096, 512, 1, Some(1024)), None);
        assert_eq!(filling_slices(28672, 8192, 512, 2, Some(1024)), None);
        // m ≤ 16 and an unknown SM count keep the rules without it.
        assert_eq!(filling_slices(5120, 13824, 16, 1, H200), None);
        assert_eq!(filling_slices(5120, 13824, 64, 1, None), None);
    }

    #[test]
    fn gemv_shape_follows_m_stages_and_shared_memory() {
        const KB48: u32 = 48 * 1024;
        assert_eq!(choose_shape(8192, 64, 1, 128, KB48, None), (2, 8));
        assert_eq!(choose_shape(8192, 64, 4, 128, KB48, None), (2, 8));
        assert_eq!(choose_shape(8192, 64, 8, 128, KB48, None), (4, 4));
        // Workgroups sized to the SMs (132 on the H200) at m <= 4.
        let h200 = Some(132);
        assert_eq!(choose_shape(4096, 86, 1, 128, KB48, h200), (2, 16));
        assert_eq!(choose_shape(8192, 224, 2, 128, KB48, h200), (2, 8));
        assert_eq!(choose_shape(11008, 32, 1, 128, KB48, h200), (2, 4));
        assert_eq!(choose_shape(28672, 64, 4, 128, KB48, h200), (2, 4));
        // m > 4: four tiles where their workgroups fill the SMs, but at m = 7.
        assert_eq!(choose_shape(28672, 64, 8, 128, KB48, h200), (4, 4));
        assert_eq!(choose_shape(11008, 32, 5, 128, KB48, h200), (4, 4));
        assert_eq!(choose_shape(28672, 64, 7, 128, KB48, h200), (2, 8));
        assert_eq!(choose_shape(8192, 224, 8, 128, KB48, h200), (2, 8));
        assert_eq!(choose_shape(4096, 32, 6, 128, KB48, h200), (2, 8));
        // 16 subgroups fit 48 KB up to m = 4; with less shared memory they halve.
        assert_eq!(choose_shape(4096, 86, 4, 128, KB48, h200), (2, 16));
        assert_eq!(choose_shape(4096, 86, 1, 128, 32 * 1024, h200), (2, 8));
        // Never more subgroups than stages.
        assert_eq!(choose_shape(8192, 3, 1, 128, KB48, None), (2, 2));
        assert_eq!(choose_shape(4096, 12, 1, 128, KB48, h200), (2, 8));
        // Halved to fit the shared memory: subgroups first, then tiles.
        let (t, s) = choose_shape(8192, 64, 8, 128, 16 * 1024, None);
        assert!(coop_shared_bytes(t, s, 8, 128) <= 16 * 1024 && t == 4 && s < 4);
    }

    #[test]
    fn k_groups_shrink_to_the_shared_memory() {
        let key = |ksplit, x_f16| crate::vk::pipeline::CoopGemmKey {
            tiles: 2,
            subgroups: 8,
            tokens: 16,
            zeros: false,
            x_f16,
            block: 128,
            offsets: false,
            ksplit,
            x_fragments: false,
            x_rounded: false,
            b_ahead: 2,
            tsplit: 1,
            k_slices: false,
        };
        // f32, 4 groups: 4 staged B of 32 columns (8.8 KB each) and 3 × 64 × 16 sums.
        assert!(key(4, false).shared_bytes() <= 48 * 1024);
        assert_eq!(key(4, false).fitted(48 * 1024).ksplit, 4);
        assert_eq!(key(4, false).fitted(32 * 1024).ksplit, 2);
        assert_eq!(key(4, false).fitted(16 * 1024).ksplit, 1);
        assert_eq!(key(4, true).fitted(32 * 1024).ksplit, 4);
        // Nothing to take away from a shape without groups, even where it does not fit.
        assert_eq!(key(1, false).fitted(1024).ksplit, 1);
    }
}
