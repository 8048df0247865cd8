//! Tuning the SIMT GEMM's tile on the device itself, as plain data: the tiles a tuning run
//! times at a prefill m ([`gemm_candidates`]) and the tiles it chose per m timed
//! ([`TunedGemmTiles`]), which a tuning blob carries to the next context.

use super::tuning::GemmTile;
use super::DeviceClass;

/// Most prefill m a tuning run times the SIMT GEMM at (and its blob carries a tile for).
pub const MAX_GEMM_MS: usize = 4;

/// Smallest and largest prefill m a tuning run takes: past the GEMVs' 8 rows, up to a
/// long prompt's chunk.
pub const GEMM_MS: std::ops::RangeInclusive<u32> = 9..=2048;

/// The SIMT GEMM's tiles a tuning run chose, one per m it timed: a call of m tokens takes
/// the tile chosen at the largest timed m at or below its own (the device row's where
/// tuning kept the row's there, and for calls below every timed m).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TunedGemmTiles {
    /// (m timed, the tile chosen there or `None` for the row's), ascending m; the first
    /// `count` are used.
    at: [(u32, Option<GemmTile>); MAX_GEMM_MS],
    count: usize,
}

impl TunedGemmTiles {
    /// The tiles chosen at `entries`' m, sorted by m; `None` where there are more than
    /// [`MAX_GEMM_MS`] or an m repeats.
    pub fn new(entries: &[(u32, Option<GemmTile>)]) -> Option<TunedGemmTiles> {
        if entries.len() > MAX_GEMM_MS {
            return None;
        }
        let mut at = [(0, None); MAX_GEMM_MS];
        at[..entries.len()].copy_from_slice(entries);
        at[..entries.len()].sort_by_key(|&(m, _)| m);
        if at[..entries.len()].windows(2).any(|w| w[0].0 == w[1].0) {
            return None;
        }
        Some(TunedGemmTiles {
            at,
            count: entries.len(),
        })
    }

    /// The (m, tile) entries, ascending m.
    pub fn entries(&self) -> &[(u32, Option<GemmTile>)] {
        &self.at[..self.count]
    }

    /// The tile a tuning run chose for calls of `m` tokens; `None` where the row's tile
    /// holds (no timed m at or below `m`, or tuning kept the row's there).
    pub fn tile_for(&self, m: u32) -> Option<GemmTile> {
        self.entries()
            .iter()
            .rev()
            .find(|&&(at, _)| at <= m)
            .and_then(|&(_, tile)| tile)
    }
}

/// Whether the SIMT GEMM takes `tile` on `class` with one K group: 4, 8, 12 or 16 rows and
/// tokens per invocation, a workgroup of the device's subgroup size up to its largest, and
/// its tiles within the shared memory.
pub fn gemm_tile_runnable(tile: &GemmTile, class: &DeviceClass) -> bool {
    let per_invocation = |v: u32| v.is_multiple_of(4) && (4..=16).contains(&v);
    let invocations = u64::from(tile.tx) * u64::from(tile.ty);
    per_invocation(tile.rn)
        && per_invocation(tile.rm)
        && invocations >= u64::from(class.subgroup_size.max(1))
        && invocations <= u64::from(class.max_workgroup)
        && u64::from(tile.shared_bytes()) <= u64::from(class.max_shared)
}

/// The SIMT GEMM tiles a tuning run times at `m` tokens on `class`: `table` (the device
/// row's tile at that m) first, then the others [`gemm_tile_runnable`] allows of 4..32
/// invocations along rows, 4..16 along tokens (64..256 in all), 4 or 8 rows and tokens per
/// invocation and no more tokens than m rounded up to a power of two (at least 16), nearest
/// the table first (fewest fields changed, then the smallest change), so that a short budget
/// still tries its neighbours.
pub fn gemm_candidates(table: &GemmTile, m: u32, class: &DeviceClass) -> Vec<GemmTile> {
    let most_tokens = m.next_power_of_two().max(16);
    let mut all = Vec::new();
    for tx in [4, 8, 16, 32] {
        for ty in [4, 8, 16] {
            for rn in [4, 8] {
                for rm in [4, 8] {
                    let t = GemmTile { tx, ty, rn, rm };
                    if (64..=256).contains(&t.invocations())
                        && t.tokens() <= most_tokens
                        && gemm_tile_runnable(&t, class)
                        && t != *table
                    {
                        all.push(t);
                    }
                }
            }
        }
    }
    let steps = |a: u32, b: u32| (a.max(1).ilog2() as i32 - b.max(1).ilog2() as i32).unsigned_abs();
    all.sort_by_key(|t| {
        let d = [
            steps(t.tx, table.tx),
            steps(t.ty, table.ty),
            steps(t.rn, table.rn),
            steps(t.rm, table.rm),
        ];
        (d.iter().filter(|&&v| v > 0).count(), d.iter().sum::<u32>())
    });
    let mut out = vec![*table];
    out.extend(all);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Family, GEMM_TILE};

    fn class(subgroup_size: u32, max_shared: u32) -> DeviceClass {
        DeviceClass {
            family: Family::Other,
            vendor: 0,
            cpu: false,
            subgroup_size,
            min_subgroup_size: subgroup_size,
            max_shared,
            max_workgroup: 1024,
            max_storage_range: 1 << 32,
            max_groups: [65535; 2],
            sm_count: None,
        }
    }

    fn tile(tx: u32, ty: u32, rn: u32, rm: u32) -> GemmTile {
        GemmTile { tx, ty, rn, rm }
    }

    #[test]
    fn a_call_takes_the_tile_of_the_largest_timed_m_at_or_below_its_own() {
        let wide = tile(16, 8, 8, 8);
        let tuned = TunedGemmTiles::new(&[(512, Some(wide)), (64, None)]).unwrap();
        assert_eq!(tuned.entries(), &[(64, None), (512, Some(wide))]);
        assert_eq!(tuned.tile_for(63), None);
        assert_eq!(tuned.tile_for(64), None);
        assert_eq!(tuned.tile_for(511), None);
        assert_eq!(tuned.tile_for(512), Some(wide));
        assert_eq!(tuned.tile_for(u32::MAX), Some(wide));
        assert_eq!(TunedGemmTiles::default().tile_for(100), None);
        assert!(TunedGemmTiles::new(&[(64, None), (64, Some(wide))]).is_none());
        assert!(TunedGemmTiles::new(&[(9, None); 5]).is_none());
    }

    #[test]
    fn candidates_start_at_the_table_fit_the_device_and_waste_no_tokens() {
        let wide = class(32, 49152);
        let all = gemm_candidates(&GEMM_TILE, 64, &wide);
        assert_eq!(all[0], GEMM_TILE);
        assert!(all[1..].iter().all(|t| *t != GEMM_TILE));
        assert!(all
            .iter()
            .all(|t| gemm_tile_runnable(t, &wide) && t.tokens() <= 64));
        // Neighbours first: one field changed by one step.
        let changed = |t: &GemmTile| {
            [(t.tx, 8), (t.ty, 8), (t.rn, 8), (t.rm, 4)]
                .iter()
                .filter(|(a, b)| a != b)
                .count()
        };
        assert_eq!(changed(&all[1]), 1);
        assert!(all
            .windows(2)
            .skip(1)
            .all(|w| changed(&w[0]) <= changed(&w[1])));
        // At m = 16 no tile has more than 16 tokens.
        assert!(gemm_candidates(&GEMM_TILE, 16, &wide)[1..]
            .iter()
            .all(|t| t.tokens() <= 16));
        // 16 KiB of shared memory and subgroups of 128 leave fewer.
        let small = class(128, 16384);
        let few = gemm_candidates(&GEMM_TILE, 512, &small);
        assert!(few[1..]
            .iter()
            .all(|t| t.shared_bytes() <= 16384 && t.invocations() >= 128));
        assert!(few.len() < gemm_candidates(&GEMM_TILE, 512, &wide).len());
    }

    #[test]
    fn runnable_tiles_take_multiples_of_4_per_invocation_within_the_limits() {
        let c = class(32, 49152);
        assert!(gemm_tile_runnable(&GEMM_TILE, &c));
        assert!(!gemm_tile_runnable(&tile(8, 8, 6, 4), &c));
        assert!(!gemm_tile_runnable(&tile(8, 8, 4, 20), &c));
        assert!(!gemm_tile_runnable(&tile(4, 4, 4, 4), &c));
        assert!(!gemm_tile_runnable(&tile(64, 32, 4, 4), &c));
        assert!(!gemm_tile_runnable(&tile(32, 16, 16, 16), &c));
    }
}
