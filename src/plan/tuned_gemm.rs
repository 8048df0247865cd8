//! Tuning the tiles of the SIMT GEMM and of the GEMM on GGUF blocks on the device itself, as
//! plain data: the tiles a tuning run times at a prefill m ([`gemm_candidates`]), what it
//! chose at each m ([`GemmTilesAt`], which a tuning blob carries to the next context) and
//! the tiles a context then takes per GEMM ([`TunedGemmTiles`]).

use super::nearest::{nearest_first, steps};
use super::tuning::GemmTile;
use super::DeviceClass;

/// Most prefill m a tuning run times the GEMMs at (and its blob carries tiles for).
pub const MAX_GEMM_MS: usize = 4;

/// Smallest and largest prefill m a tuning run takes: past the GEMVs' 8 rows, up to a
/// long prompt's chunk.
pub const GEMM_MS: std::ops::RangeInclusive<u32> = 9..=2048;

/// What a tuning run chose at one prefill m for each GEMM whose tile it tunes (`None`: the
/// device row's, where it kept the row's or that GEMM did not run at m).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct GemmTilesAt {
    /// The prefill m.
    pub m: u32,
    /// The SIMT GEMM's tile from m.
    pub simt: Option<GemmTile>,
    /// Its time against the row's rules over the cases timed at m (1 where kept).
    pub simt_time_vs_table: f32,
    /// The GEMM on GGUF blocks' tile from m.
    pub blocks: Option<GemmTile>,
    /// Its time against the row's rules, as `simt_time_vs_table`.
    pub blocks_time_vs_table: f32,
}

/// What a tuning run chose at each prefill m it timed (at most [`MAX_GEMM_MS`], ascending
/// m), as its blob carries it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TunedGemms {
    at: [GemmTilesAt; MAX_GEMM_MS],
    count: usize,
}

impl TunedGemms {
    /// `at` sorted by m; `None` where there are more than [`MAX_GEMM_MS`] or an m repeats.
    pub fn new(at: &[GemmTilesAt]) -> Option<TunedGemms> {
        if at.len() > MAX_GEMM_MS {
            return None;
        }
        let mut sorted = [GemmTilesAt::default(); MAX_GEMM_MS];
        sorted[..at.len()].copy_from_slice(at);
        sorted[..at.len()].sort_by_key(|g| g.m);
        if sorted[..at.len()].windows(2).any(|w| w[0].m == w[1].m) {
            return None;
        }
        Some(TunedGemms {
            at: sorted,
            count: at.len(),
        })
    }

    /// The entries, ascending m.
    pub fn entries(&self) -> &[GemmTilesAt] {
        &self.at[..self.count]
    }

    /// The SIMT GEMM's tiles (`blocks` false) or the GEMM on GGUF blocks'.
    pub fn tiles(&self, blocks: bool) -> TunedGemmTiles {
        let mut tiles = TunedGemmTiles {
            count: self.count,
            ..TunedGemmTiles::default()
        };
        for (slot, g) in tiles.at.iter_mut().zip(self.entries()) {
            *slot = (g.m, if blocks { g.blocks } else { g.simt });
        }
        tiles
    }
}

/// One GEMM's tiles from a tuning run, one per prefill m it timed: a call of m tokens takes
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

/// Whether the SIMT GEMM (`blocks` false) or the GEMM on GGUF blocks takes `tile` on
/// `class` with one K group: 4, 8, 12 or 16 rows and tokens per invocation, a workgroup of
/// the device's subgroup size up to its largest, and its tiles within the shared memory.
pub fn gemm_tile_runnable(tile: &GemmTile, class: &DeviceClass, blocks: bool) -> bool {
    let per_invocation = |v: u32| v.is_multiple_of(4) && (4..=16).contains(&v);
    let invocations = u64::from(tile.tx) * u64::from(tile.ty);
    let shared = match blocks {
        true => tile.blocks_shared_bytes(),
        false => tile.shared_bytes(),
    };
    per_invocation(tile.rn)
        && per_invocation(tile.rm)
        && invocations >= u64::from(class.subgroup_size.max(1))
        && invocations <= u64::from(class.max_workgroup)
        && u64::from(shared) <= u64::from(class.max_shared)
}

/// The tiles a tuning run times at `m` tokens on `class` for the SIMT GEMM (`blocks` false)
/// or the GEMM on GGUF blocks: `table` (the device row's tile at that m) first, then the others [`gemm_tile_runnable`] allows of 4..32
/// invocations along rows, 4..16 along tokens (64..256 in all), 4 or 8 rows and tokens per
/// invocation and no more tokens than m rounded up to a power of two (at least 16), nearest
/// the table first (fewest fields changed, then the smallest change), so that a short budget
/// still tries its neighbours.
pub fn gemm_candidates(
    table: &GemmTile,
    m: u32,
    class: &DeviceClass,
    blocks: bool,
) -> Vec<GemmTile> {
    let most_tokens = m.next_power_of_two().max(16);
    let mut all = Vec::new();
    for tx in [4, 8, 16, 32] {
        for ty in [4, 8, 16] {
            for rn in [4, 8] {
                for rm in [4, 8] {
                    let t = GemmTile { tx, ty, rn, rm };
                    if (64..=256).contains(&t.invocations())
                        && t.tokens() <= most_tokens
                        && gemm_tile_runnable(&t, class, blocks)
                        && t != *table
                    {
                        all.push(t);
                    }
                }
            }
        }
    }
    nearest_first(table, all, |t| {
        [
            steps(t.tx, table.tx),
            steps(t.ty, table.ty),
            steps(t.rn, table.rn),
            steps(t.rm, table.rm),
        ]
    })
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
        // Per GEMM from what a tuning run chose at each m.
        let at = [
            GemmTilesAt {
                m: 64,
                simt: Some(wide),
                blocks: None,
                ..GemmTilesAt::default()
            },
            GemmTilesAt {
                m: 16,
                simt: None,
                blocks: Some(wide),
                ..GemmTilesAt::default()
            },
        ];
        let gemms = TunedGemms::new(&at).unwrap();
        assert_eq!(gemms.entries()[0].m, 16);
        assert!(TunedGemms::new(&[at[0], at[0]]).is_none());
        let (simt, blocks) = (gemms.tiles(false), gemms.tiles(true));
        assert_eq!((simt.tile_for(20), simt.tile_for(64)), (None, Some(wide)));
        assert_eq!(
            (blocks.tile_for(20), blocks.tile_for(64)),
            (Some(wide), None)
        );
    }

    #[test]
    fn candidates_start_at_the_table_fit_the_device_and_waste_no_tokens() {
        let wide = class(32, 49152);
        let all = gemm_candidates(&GEMM_TILE, 64, &wide, false);
        assert_eq!(all[0], GEMM_TILE);
        assert!(all[1..].iter().all(|t| *t != GEMM_TILE));
        assert!(all
            .iter()
            .all(|t| gemm_tile_runnable(t, &wide, false) && t.tokens() <= 64));
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
        assert!(gemm_candidates(&GEMM_TILE, 16, &wide, false)[1..]
            .iter()
            .all(|t| t.tokens() <= 16));
        // 16 KiB of shared memory and subgroups of 128 leave fewer.
        let small = class(128, 16384);
        let few = gemm_candidates(&GEMM_TILE, 512, &small, false);
        assert!(few[1..]
            .iter()
            .all(|t| t.shared_bytes() <= 16384 && t.invocations() >= 128));
        assert!(few.len() < gemm_candidates(&GEMM_TILE, 512, &wide, false).len());
    }

    #[test]
    fn runnable_tiles_take_multiples_of_4_per_invocation_within_the_limits() {
        let c = class(32, 49152);
        assert!(gemm_tile_runnable(&GEMM_TILE, &c, false));
        assert!(!gemm_tile_runnable(&tile(8, 8, 6, 4), &c, false));
        assert!(!gemm_tile_runnable(&tile(8, 8, 4, 20), &c, false));
        assert!(!gemm_tile_runnable(&tile(4, 4, 4, 4), &c, false));
        assert!(!gemm_tile_runnable(&tile(64, 32, 4, 4), &c, false));
        assert!(!gemm_tile_runnable(&tile(32, 16, 16, 16), &c, false));
        // The GEMM on blocks pads its tokens' tile: 48 KiB exactly fits the SIMT GEMM only.
        let exact = tile(16, 16, 16, 8);
        assert_eq!(exact.shared_bytes(), 49152);
        assert!(gemm_tile_runnable(&exact, &c, false));
        assert!(!gemm_tile_runnable(&exact, &c, true));
    }
}
