//! Tuning on the device itself, as plain data: the candidate SIMT GEMV shapes a device can
//! run ([`candidates`]; the integer dot-product GEMV's are of the same kind) and those of
//! the GEMV on GGUF blocks ([`blocks_candidates`]), and
//! the blob that carries the shapes a tuning run chose ([`TunedBlob`]) from one context to
//! the next. The blob names the device, driver and q4vk
//! version it was made with, and a checksum; anything else is refused with the reason.

use super::nearest::{nearest_first, steps};
use super::tuned_gemm::{GemmTilesAt, TunedGemms, GEMM_MS, MAX_GEMM_MS};
use super::tuning::{DeviceTuning, GemmTile, SimtGemv};
use super::DeviceClass;

/// The device, driver and q4vk build a blob belongs to: a blob made with any other is
/// refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceIdentity {
    /// `vendorID`.
    pub vendor: u32,
    /// `deviceID`.
    pub device: u32,
    /// `driverVersion`.
    pub driver: u32,
    /// `pipelineCacheUUID`: changes with the driver build.
    pub cache_uuid: [u8; 16],
}

/// Matrices whose rows hold at least this many weights (k) form the tuning's class of long
/// rows (the MLP-down matrices of 1–3B models, every matrix of 7B ones); shorter rows the
/// other. The two want different shapes: short rows fill a workgroup's lanes only with
/// fewer weights per step, long rows run few workgroups on matrices of few rows.
pub const LONG_ROWS_FROM_K: u64 = 4096;

/// The tuning class of a matrix of `k` columns: `true` for long rows
/// ([`LONG_ROWS_FROM_K`]).
pub fn has_long_rows(k: u64) -> bool {
    k >= LONG_ROWS_FROM_K
}

/// The shape of the GEMV on GGUF blocks for calls of up to 4 rows on x
/// (`DeviceTuning::blocks_gemv_rows`'s first and `DeviceTuning::blocks_gemv_unroll`, steps
/// over pieces).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlocksGemvShape {
    /// Rows per workgroup (a power of two, 1..32).
    pub rows: u32,
    /// Pieces per step of each invocation (1..4; capped per call by the held x; 1 with
    /// `word_lanes`).
    pub unroll: u32,
    /// Invocations stride over quarters of pieces instead of pieces (`BlocksKey::word_lanes`).
    pub word_lanes: bool,
}

impl std::fmt::Display for BlocksGemvShape {
    /// `2 rows, 2 pieces per step` or `2 rows, quarters` (logs and the bench).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.word_lanes {
            true => write!(f, "{} rows, quarters", self.rows),
            false => write!(f, "{} rows, {} pieces per step", self.rows, self.unroll),
        }
    }
}

impl BlocksGemvShape {
    /// The shape `row` gives: its rows per workgroup for one pass and pieces per step.
    pub fn of_row(row: &DeviceTuning) -> BlocksGemvShape {
        BlocksGemvShape {
            rows: row.blocks_gemv_rows.0,
            unroll: row.blocks_gemv_unroll,
            word_lanes: false,
        }
    }

    /// Whether the GEMV on GGUF blocks takes this shape: rows a power of two up to 32,
    /// 1..4 pieces per step, one with quarters.
    pub fn runnable(&self) -> bool {
        self.rows.is_power_of_two()
            && self.rows <= 32
            && (1..=4).contains(&self.unroll)
            && (!self.word_lanes || self.unroll == 1)
    }
}

/// What a tuning run found, as carried by its blob.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TunedBlob {
    /// The device it was timed on.
    pub identity: DeviceIdentity,
    /// The SIMT GEMV shape it chose for matrices of short rows (k below
    /// [`LONG_ROWS_FROM_K`]).
    pub simt_gemv: SimtGemv,
    /// Its time against the table's shape over the tuned cases of short rows (geometric
    /// mean of the ratios; below 1 is faster; 1 where none was timed).
    pub time_vs_table: f32,
    /// The shape it chose for matrices of long rows.
    pub long_rows: SimtGemv,
    /// Its time against the table's shape over the cases of long rows, as above.
    pub long_rows_time_vs_table: f32,
    /// The shape of the GEMV on GGUF blocks it chose for calls of one pass.
    pub blocks_gemv: BlocksGemvShape,
    /// Its time against the table's over the cases timed on blocks, as above.
    pub blocks_time_vs_table: f32,
    /// The integer dot-product GEMV's shape it chose on x in digits, for matrices of every
    /// row length; `None` where it kept the device row's (`DeviceTuning::int_dot_gemv`, or
    /// the f32 GEMV's of the matrix's class where the row has none).
    pub int_dot_gemv: Option<SimtGemv>,
    /// Its time against the row's over the cases timed on the integer dot-product GEMV,
    /// as above.
    pub int_dot_time_vs_table: f32,
    /// The tiles of the SIMT GEMM and of the GEMM on GGUF blocks it chose per prefill m.
    pub gemm: TunedGemms,
}

/// The blob's first bytes.
const MAGIC: &[u8; 8] = b"Q4VKTUNE";
/// The blob's layout version.
const FORMAT: u32 = 6;
/// Bytes of a blob: magic, format, length, q4vk version (16), identity (28), then for short
/// rows and for long rows a shape (20) and its ratio, the blocks GEMV's shape (12) and its
/// ratio, whether the integer dot-product GEMV's shape was chosen (4), that shape (20) and
/// its ratio, the count of prefill m (4) and [`MAX_GEMM_MS`] entries (m, then for the SIMT
/// GEMM and the GEMM on blocks the tile's four counts in a byte each, or 0 for the row's,
/// and its ratio: 20 each), checksum (8).
const BLOB_BYTES: usize = 244;
/// Where the GEMMs' tiles start.
const GEMM_AT: usize = 152;
/// Where the checksum starts.
const CHECKSUM_AT: usize = BLOB_BYTES - 8;
/// The q4vk version a blob (tuning or matrix) is made with and must match, NUL-padded.
pub(crate) fn version_bytes() -> [u8; 16] {
    let mut v = [0u8; 16];
    let s = env!("CARGO_PKG_VERSION").as_bytes();
    v[..s.len().min(16)].copy_from_slice(&s[..s.len().min(16)]);
    v
}

/// FNV-1a over `bytes`.
fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl TunedBlob {
    /// The blob's bytes (244, little-endian).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(BLOB_BYTES);
        b.extend_from_slice(MAGIC);
        let words = |b: &mut Vec<u8>, w: &[u32]| w.iter().for_each(|v| b.extend(v.to_le_bytes()));
        words(&mut b, &[FORMAT, BLOB_BYTES as u32]);
        b.extend_from_slice(&version_bytes());
        let id = &self.identity;
        words(&mut b, &[id.vendor, id.device, id.driver]);
        b.extend_from_slice(&id.cache_uuid);
        let shape_words =
            |s: &SimtGemv| [s.workgroup, s.rows, s.unroll, s.split, s.word_lanes as u32];
        for (s, ratio) in [
            (&self.simt_gemv, self.time_vs_table),
            (&self.long_rows, self.long_rows_time_vs_table),
        ] {
            words(&mut b, &shape_words(s));
            b.extend(ratio.to_le_bytes());
        }
        let g = &self.blocks_gemv;
        words(&mut b, &[g.rows, g.unroll, g.word_lanes as u32]);
        b.extend(self.blocks_time_vs_table.to_le_bytes());
        words(&mut b, &[self.int_dot_gemv.is_some() as u32]);
        words(
            &mut b,
            &self.int_dot_gemv.as_ref().map_or([0; 5], shape_words),
        );
        b.extend(self.int_dot_time_vs_table.to_le_bytes());
        debug_assert_eq!(b.len(), GEMM_AT);
        let entries = self.gemm.entries();
        words(&mut b, &[entries.len() as u32]);
        let packed = |tile: Option<GemmTile>| {
            tile.map_or(0, |t| {
                u32::from_le_bytes([t.tx, t.ty, t.rn, t.rm].map(|v| v as u8))
            })
        };
        for i in 0..MAX_GEMM_MS {
            let g = entries.get(i).copied().unwrap_or_default();
            words(&mut b, &[g.m, packed(g.simt)]);
            b.extend(g.simt_time_vs_table.to_le_bytes());
            words(&mut b, &[packed(g.blocks)]);
            b.extend(g.blocks_time_vs_table.to_le_bytes());
        }
        let sum = checksum(&b);
        b.extend(sum.to_le_bytes());
        debug_assert_eq!(b.len(), BLOB_BYTES);
        b
    }

    /// The blob in `bytes` if it is whole and was made by this q4vk build on the device
    /// `identity` names; else why not (for the log: the context then keeps the table).
    pub fn decode(bytes: &[u8], identity: &DeviceIdentity) -> Result<TunedBlob, String> {
        if bytes.len() < 16 || &bytes[..8] != MAGIC {
            return Err("not a q4vk tuning blob".into());
        }
        let word = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
        if word(8) != FORMAT {
            return Err(format!("blob format {}; this q4vk reads {FORMAT}", word(8)));
        }
        if bytes.len() != BLOB_BYTES || word(12) != BLOB_BYTES as u32 {
            return Err(format!(
                "{} bytes; a tuning blob has {BLOB_BYTES}",
                bytes.len()
            ));
        }
        let sum = u64::from_le_bytes(bytes[CHECKSUM_AT..].try_into().expect("8 bytes"));
        if sum != checksum(&bytes[..CHECKSUM_AT]) {
            return Err("checksum mismatch: the blob is corrupted".into());
        }
        if bytes[16..32] != version_bytes() {
            let made = String::from_utf8_lossy(&bytes[16..32]);
            return Err(format!(
                "made by q4vk {}; this is q4vk {}",
                made.trim_end_matches('\0'),
                env!("CARGO_PKG_VERSION")
            ));
        }
        let found = DeviceIdentity {
            vendor: word(32),
            device: word(36),
            driver: word(40),
            cache_uuid: bytes[44..60].try_into().expect("16 bytes"),
        };
        if (found.vendor, found.device) != (identity.vendor, identity.device) {
            return Err(format!(
                "made on device {:#06x}:{:#06x}; this is {:#06x}:{:#06x}",
                found.vendor, found.device, identity.vendor, identity.device
            ));
        }
        if found.driver != identity.driver || found.cache_uuid != identity.cache_uuid {
            return Err(format!(
                "made with driver version {:#x} (another build); this driver is {:#x}",
                found.driver, identity.driver
            ));
        }
        let shape = |at: usize| -> Result<(SimtGemv, f32), String> {
            let shape = SimtGemv {
                workgroup: word(at),
                rows: word(at + 4),
                unroll: word(at + 8),
                split: word(at + 12),
                word_lanes: match word(at + 16) {
                    0 => false,
                    1 => true,
                    v => return Err(format!("word lanes {v}: not 0 or 1")),
                },
            };
            let ratio = f32::from_le_bytes(bytes[at + 20..at + 24].try_into().expect("4 bytes"));
            Ok((shape, ratio))
        };
        let (simt_gemv, time_vs_table) = shape(60)?;
        let (long_rows, long_rows_time_vs_table) = shape(84)?;
        let blocks_gemv = BlocksGemvShape {
            rows: word(108),
            unroll: word(112),
            word_lanes: match word(116) {
                0 => false,
                1 => true,
                v => return Err(format!("GEMV on blocks word lanes {v}: not 0 or 1")),
            },
        };
        if !blocks_gemv.runnable() {
            return Err(format!(
                "GEMV on blocks with {blocks_gemv}: not a shape it takes"
            ));
        }
        let (int_dot, int_dot_time_vs_table) = shape(128)?;
        let int_dot_gemv = match word(124) {
            0 => None,
            1 => Some(int_dot),
            v => return Err(format!("integer dot-product shape flag {v}: not 0 or 1")),
        };
        let gemm_count = word(GEMM_AT) as usize;
        if gemm_count > MAX_GEMM_MS {
            return Err(format!(
                "GEMM tiles for {gemm_count} prefill m; a blob holds at most {MAX_GEMM_MS}"
            ));
        }
        let tile = |at: usize| match word(at).to_le_bytes().map(u32::from) {
            [0, 0, 0, 0] => None,
            [tx, ty, rn, rm] => Some(GemmTile { tx, ty, rn, rm }),
        };
        let ratio = |at: usize| f32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let mut gemm = Vec::with_capacity(gemm_count);
        for i in 0..gemm_count {
            let at = GEMM_AT + 4 + 20 * i;
            let m = word(at);
            if !GEMM_MS.contains(&m) {
                return Err(format!(
                    "GEMM tiles for m = {m}: expected {}..{}",
                    GEMM_MS.start(),
                    GEMM_MS.end()
                ));
            }
            gemm.push(GemmTilesAt {
                m,
                simt: tile(at + 4),
                simt_time_vs_table: ratio(at + 8),
                blocks: tile(at + 12),
                blocks_time_vs_table: ratio(at + 16),
            });
        }
        let gemm =
            TunedGemms::new(&gemm).ok_or_else(|| "GEMM tiles for one m twice".to_string())?;
        Ok(TunedBlob {
            identity: found,
            simt_gemv,
            time_vs_table,
            long_rows,
            long_rows_time_vs_table,
            blocks_gemv,
            blocks_time_vs_table: f32::from_le_bytes(bytes[120..124].try_into().expect("4 bytes")),
            int_dot_gemv,
            int_dot_time_vs_table,
            gemm,
        })
    }
}

/// Bytes of the subgroup SIMT GEMV's reduction slots with `shape` on `class` at its largest
/// m (8): one float per (subgroup, row, activation row).
fn reduction_bytes(shape: &SimtGemv, class: &DeviceClass) -> u64 {
    let subgroups = u64::from(shape.workgroup / class.min_subgroup_size.max(1));
    4 * subgroups * u64::from(shape.rows) * 8
}

/// Whether the subgroup SIMT GEMV can run `shape` on `class`: a power-of-two workgroup
/// from the subgroup size (and 32) to the device's largest, rows 1..32, a power-of-two split
/// dividing the rows and at most the smallest workgroup, unroll 1..8, and reduction slots
/// within the shared memory.
pub fn runnable(shape: &SimtGemv, class: &DeviceClass) -> bool {
    let min_workgroup = 32.max(class.subgroup_size);
    shape.workgroup.is_power_of_two()
        && shape.workgroup >= class.subgroup_size
        && shape.workgroup <= class.max_workgroup
        && (1..=32).contains(&shape.rows)
        && shape.split.is_power_of_two()
        && shape.rows.is_multiple_of(shape.split)
        && shape.split <= min_workgroup.min(shape.workgroup)
        && (1..=8).contains(&shape.unroll)
        && reduction_bytes(shape, class) <= u64::from(class.max_shared)
}

/// The SIMT GEMV shapes a tuning run times on `class`, `table` (the device row's) first,
/// then the others that [`runnable`] allows of workgroups 64..256, rows 1..16, splits 1..4,
/// unrolls 1, 2 and 4 and steps of chunks or words, nearest the table first (fewest fields
/// changed, then the smallest change), so that a short budget still tries its neighbours.
pub fn candidates(table: &SimtGemv, class: &DeviceClass) -> Vec<SimtGemv> {
    let mut all = Vec::new();
    for workgroup in [64, 128, 256] {
        for rows in [1, 2, 4, 8, 16] {
            for split in [1, 2, 4] {
                for unroll in [1, 2, 4] {
                    for word_lanes in [false, true] {
                        let s = SimtGemv {
                            workgroup: workgroup.max(class.subgroup_size),
                            rows,
                            unroll,
                            split,
                            word_lanes,
                        };
                        if runnable(&s, class) && s != *table && !all.contains(&s) {
                            all.push(s);
                        }
                    }
                }
            }
        }
    }
    nearest_first(table, all, |s| {
        [
            steps(s.workgroup, table.workgroup),
            steps(s.rows, table.rows),
            steps(s.split, table.split),
            steps(s.unroll, table.unroll),
            u32::from(s.word_lanes != table.word_lanes),
        ]
    })
}

/// The shapes of the GEMV on GGUF blocks a tuning run times: `table` (the device row's)
/// first, then rows 1, 2, 4 and 8 with 1, 2 and 4 pieces per step or with quarters, nearest
/// the table first (fewest fields changed, then the smallest change).
pub fn blocks_candidates(table: &BlocksGemvShape) -> Vec<BlocksGemvShape> {
    let steps_of = [(1, false), (2, false), (4, false), (1, true)];
    let all: Vec<BlocksGemvShape> = [1, 2, 4, 8]
        .into_iter()
        .flat_map(|rows| {
            steps_of.map(|(unroll, word_lanes)| BlocksGemvShape {
                rows,
                unroll,
                word_lanes,
            })
        })
        .filter(|s| s != table)
        .collect();
    nearest_first(table, all, |s| {
        [
            steps(s.rows, table.rows),
            steps(s.unroll, table.unroll),
            u32::from(s.word_lanes != table.word_lanes),
        ]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Family;

    fn identity() -> DeviceIdentity {
        DeviceIdentity {
            vendor: 0x10DE,
            device: 0x2335,
            driver: 0x91_27c0,
            cache_uuid: [7; 16],
        }
    }

    fn blob() -> TunedBlob {
        TunedBlob {
            identity: identity(),
            simt_gemv: SimtGemv {
                workgroup: 256,
                rows: 4,
                unroll: 2,
                split: 2,
                word_lanes: true,
            },
            time_vs_table: 0.9,
            long_rows: SimtGemv {
                workgroup: 128,
                rows: 2,
                unroll: 1,
                split: 1,
                word_lanes: false,
            },
            long_rows_time_vs_table: 0.8,
            blocks_gemv: BlocksGemvShape {
                rows: 4,
                unroll: 1,
                word_lanes: true,
            },
            blocks_time_vs_table: 0.7,
            int_dot_gemv: Some(SimtGemv {
                workgroup: 64,
                rows: 8,
                unroll: 4,
                split: 4,
                word_lanes: false,
            }),
            int_dot_time_vs_table: 0.6,
            gemm: TunedGemms::new(&[
                GemmTilesAt {
                    m: 64,
                    simt: Some(GemmTile {
                        tx: 16,
                        ty: 4,
                        rn: 8,
                        rm: 8,
                    }),
                    simt_time_vs_table: 0.5,
                    blocks: None,
                    blocks_time_vs_table: 1.0,
                },
                GemmTilesAt {
                    m: 512,
                    simt: None,
                    simt_time_vs_table: 1.0,
                    blocks: Some(GemmTile {
                        tx: 8,
                        ty: 8,
                        rn: 4,
                        rm: 8,
                    }),
                    blocks_time_vs_table: 0.75,
                },
            ])
            .unwrap(),
        }
    }

    #[test]
    fn a_blob_round_trips_and_anything_else_is_refused_with_the_reason() {
        let bytes = blob().encode();
        assert_eq!(bytes.len(), BLOB_BYTES);
        assert_eq!(TunedBlob::decode(&bytes, &identity()), Ok(blob()));
        // A blob that kept the row's integer dot-product shape.
        let kept = TunedBlob {
            int_dot_gemv: None,
            int_dot_time_vs_table: 1.0,
            ..blob()
        };
        assert_eq!(TunedBlob::decode(&kept.encode(), &identity()), Ok(kept));
        let refused = |b: &[u8], id: &DeviceIdentity, why: &str| {
            let e = TunedBlob::decode(b, id).unwrap_err();
            assert!(e.contains(why), "{e}");
        };
        refused(&bytes[..40], &identity(), "244");
        refused(&bytes[..12], &identity(), "not a q4vk tuning blob");
        let mut older = bytes.clone();
        older[8] = 5;
        refused(&older, &identity(), "blob format 5");
        // Every byte is covered: a flip anywhere is refused.
        for i in 0..BLOB_BYTES {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(TunedBlob::decode(&bad, &identity()).is_err(), "flip at {i}");
        }
        let other_device = DeviceIdentity {
            device: 0x1234,
            ..identity()
        };
        refused(&bytes, &other_device, "made on device");
        let other_driver = DeviceIdentity {
            driver: 1,
            ..identity()
        };
        refused(&bytes, &other_driver, "driver");
        let other_build = DeviceIdentity {
            cache_uuid: [8; 16],
            ..identity()
        };
        refused(&bytes, &other_build, "driver");
        let mut flipped = bytes.clone();
        flipped[64] ^= 1;
        refused(&flipped, &identity(), "checksum");
        // A blocks shape the GEMV does not take, with a valid checksum.
        for (rows, unroll, word_lanes) in [(3, 1, false), (2, 2, true), (2, 5, false)] {
            let odd = TunedBlob {
                blocks_gemv: BlocksGemvShape {
                    rows,
                    unroll,
                    word_lanes,
                },
                ..blob()
            };
            refused(&odd.encode(), &identity(), "not a shape it takes");
        }
        // GEMM tiles: for more m than a blob holds, an m out of range, one m twice.
        let mut many = blob().encode();
        many[GEMM_AT] = 5;
        let sum = checksum(&many[..CHECKSUM_AT]);
        many[CHECKSUM_AT..].copy_from_slice(&sum.to_le_bytes());
        refused(&many, &identity(), "at most 4");
        for (m, why) in [(8, "m = 8"), (64, "twice")] {
            let mut odd = blob().encode();
            odd[GEMM_AT + 24..GEMM_AT + 28].copy_from_slice(&(m as u32).to_le_bytes());
            let sum = checksum(&odd[..CHECKSUM_AT]);
            odd[CHECKSUM_AT..].copy_from_slice(&sum.to_le_bytes());
            refused(&odd, &identity(), why);
        }
    }

    #[test]
    fn blocks_candidates_start_at_the_table_nearest_first() {
        let shape = |rows, unroll, word_lanes| BlocksGemvShape {
            rows,
            unroll,
            word_lanes,
        };
        let table = shape(2, 1, false);
        let all = blocks_candidates(&table);
        assert_eq!(all.len(), 16);
        assert_eq!(all[0], table);
        assert!(all.iter().all(BlocksGemvShape::runnable));
        // One field one step away first: 1 or 4 rows, 2 pieces, quarters.
        let first: Vec<_> = all[1..5].to_vec();
        for s in [
            shape(1, 1, false),
            shape(4, 1, false),
            shape(2, 2, false),
            shape(2, 1, true),
        ] {
            assert!(first.contains(&s), "{first:?}");
        }
        let mut unique = all.clone();
        unique.sort_by_key(|s| (s.rows, s.unroll, s.word_lanes));
        unique.dedup();
        assert_eq!(unique.len(), all.len());
    }

    #[test]
    fn candidates_start_at_the_table_and_all_run_on_the_device() {
        let class = DeviceClass {
            family: Family::Mali,
            vendor: 0x13B5,
            cpu: false,
            subgroup_size: 16,
            min_subgroup_size: 16,
            max_shared: 32768,
            max_workgroup: 512,
            max_storage_range: 1 << 27,
            max_groups: [65535, 65535],
            sm_count: None,
        };
        let table = SimtGemv {
            workgroup: 128,
            rows: 4,
            unroll: 1,
            split: 1,
            word_lanes: false,
        };
        let all = candidates(&table, &class);
        assert_eq!(all[0], table);
        assert!(all.iter().all(|s| runnable(s, &class)));
        // The nearest come first: one field changed by one step.
        let changed = |s: &SimtGemv| {
            [
                s.workgroup != table.workgroup,
                s.rows != table.rows,
                s.split != table.split,
                s.unroll != table.unroll,
                s.word_lanes != table.word_lanes,
            ]
            .iter()
            .filter(|&&c| c)
            .count()
        };
        assert!(all[1..6].iter().all(|s| changed(s) == 1), "{:?}", &all[..6]);
        let mut unique = all.clone();
        unique.dedup();
        assert_eq!(unique.len(), all.len());
        // A split larger than the rows or a workgroup beyond the device never appears.
        let too_big = SimtGemv {
            workgroup: 1024,
            ..table
        };
        assert!(!runnable(&too_big, &class));
        let split_past_rows = SimtGemv { split: 8, ..table };
        assert!(!runnable(&split_past_rows, &class));
    }
}
