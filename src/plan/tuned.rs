//! Tuning on the device itself, as plain data: the candidate SIMT GEMV shapes a device can
//! run ([`candidates`]; the integer dot-product GEMV's are of the same kind) and those of
//! the GEMV on GGUF blocks ([`blocks_candidates`]), and
//! the blob that carries the shapes a tuning run chose ([`TunedBlob`]) from one context to
//! the next. The blob names the device, driver and q4vk
//! version it was made with, and a checksum; anything else is refused with the reason.

use super::blocks_gemv::{BlocksClass, BlocksGemvShape};
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

/// The class of block types whose GEMV shape tuning times (on Q4_K matrices) and a tuning
/// blob carries: its choice replaces the class's one-pass shape at every height.
pub const TUNED_BLOCKS_CLASS: BlocksClass = BlocksClass::PackedScales;

/// The shape tuning starts from and a blob's choice replaces: `row`'s one-pass shape of
/// [`TUNED_BLOCKS_CLASS`] (the same at every height on every row).
pub fn blocks_shape_of_row(row: &DeviceTuning) -> BlocksGemvShape {
    row.blocks_gemv.of(TUNED_BLOCKS_CLASS).few_rows
}

/// Matrices of at least this many rows form the tuning's class of many rows; fewer the
/// other. The two want different shapes: few rows leave a GPU's cores idle unless each
/// workgroup takes few of them, many rows fill it with larger workgroups.
pub const MANY_ROWS_FROM: usize = 4096;

/// The f32 SIMT GEMV's groups of calls: each is tuned apart and takes its own shape. A
/// call's group is its matrix's class of row length ([`has_long_rows`]) and of row count
/// ([`MANY_ROWS_FROM`]), and whether it has one activation row (decode) or several: one
/// row gives a workgroup's rows no reuse of the weights, several share each weight among
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SimtGroup {
    /// Matrices of long rows.
    pub long_rows: bool,
    /// Matrices of many rows.
    pub many_rows: bool,
    /// Calls of one activation row.
    pub decode: bool,
}

impl SimtGroup {
    /// Every group, in the order of [`SimtGroup::index`].
    pub const ALL: [SimtGroup; 8] = {
        let mut all = [SimtGroup {
            long_rows: false,
            many_rows: false,
            decode: false,
        }; 8];
        let mut i = 0;
        while i < 8 {
            all[i] = SimtGroup {
                long_rows: i & 1 != 0,
                many_rows: i & 2 != 0,
                decode: i & 4 != 0,
            };
            i += 1;
        }
        all
    };

    /// The group of a call of `m` activation rows on an `n` × `k` matrix.
    pub fn of(n: usize, k: u64, m: u32) -> SimtGroup {
        SimtGroup {
            long_rows: has_long_rows(k),
            many_rows: n >= MANY_ROWS_FROM,
            decode: m == 1,
        }
    }

    /// Where the group is in [`SimtGroup::ALL`] (and in arrays by group).
    pub fn index(self) -> usize {
        usize::from(self.long_rows) + 2 * usize::from(self.many_rows) + 4 * usize::from(self.decode)
    }
}

impl std::fmt::Display for SimtGroup {
    /// `short rows, few rows, m = 1` or `long rows, many rows, m > 1` (logs and the bench).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let length = match self.long_rows {
            true => "long rows",
            false => "short rows",
        };
        let count = match self.many_rows {
            true => "many rows",
            false => "few rows",
        };
        let m = match self.decode {
            true => "m = 1",
            false => "m > 1",
        };
        write!(f, "{length}, {count}, {m}")
    }
}

/// What a tuning run found, as carried by its blob.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TunedBlob {
    /// The device it was timed on.
    pub identity: DeviceIdentity,
    /// The SIMT GEMV shape it chose per group of calls (by [`SimtGroup::index`]; the
    /// device row's shape of the group's class where none was faster or no case was of
    /// the group).
    pub simt_gemv: [SimtGemv; 8],
    /// Each one's time against the row's over the group's tuned cases (geometric mean of
    /// the ratios; below 1 is faster; 1 where none was timed; kept to [`RATIO_UNIT`]).
    pub simt_time_vs_table: [f32; 8],
    /// The shape of the GEMV on GGUF blocks it chose for calls of one pass on
    /// [`TUNED_BLOCKS_CLASS`].
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
const FORMAT: u32 = 8;
/// Bytes of a blob: magic, format, length, q4vk version (16), identity (28), then per SIMT
/// GEMV group a shape ([`SHAPE_BYTES`]) and its ratio, the blocks GEMV's shape (4) and its
/// ratio, the integer dot-product GEMV's shape (with whether it was chosen) and its ratio,
/// the count of prefill m (4) and [`MAX_GEMM_MS`] entries (m, then for the SIMT GEMM and
/// the GEMM on blocks the tile's four counts in a byte each, or 0 for the row's, and its
/// ratio: 16 each), checksum (8). Each ratio is 2 bytes ([`RATIO_UNIT`]).
const BLOB_BYTES: usize = 232;
/// Bytes of a SIMT GEMV shape in a blob: workgroup (2), rows, unroll, split, word lanes,
/// whether it was chosen (for the integer dot-product GEMV's; 1 elsewhere), and a zero
/// byte.
const SHAPE_BYTES: usize = 8;
/// A blob keeps each time ratio as a whole number of these (2 bytes: ratios up to 2).
pub const RATIO_UNIT: f32 = 1.0 / 32768.0;
/// Where the SIMT GEMV's shapes start.
const SIMT_AT: usize = 60;
/// Where the GEMV on blocks' shape starts.
const BLOCKS_AT: usize = SIMT_AT + SimtGroup::ALL.len() * (SHAPE_BYTES + 2);
/// Where the integer dot-product GEMV's shape starts.
const INT_DOT_AT: usize = BLOCKS_AT + 6;
/// Where the GEMMs' tiles start.
const GEMM_AT: usize = INT_DOT_AT + SHAPE_BYTES + 2;
/// Bytes of one prefill m's GEMM tiles.
const GEMM_ENTRY_BYTES: usize = 16;
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

/// A time ratio's 2 bytes in a blob: the nearest whole number of [`RATIO_UNIT`]s (ratios
/// past 2 are kept as 2).
fn ratio_bytes(ratio: f32) -> [u8; 2] {
    ((ratio / RATIO_UNIT).round().clamp(0.0, f32::from(u16::MAX)) as u16).to_le_bytes()
}

/// The ratio [`ratio_bytes`] wrote.
fn ratio_of(b: &[u8]) -> f32 {
    f32::from(u16::from_le_bytes([b[0], b[1]])) * RATIO_UNIT
}

impl TunedBlob {
    /// The blob's bytes (232, little-endian).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(BLOB_BYTES);
        b.extend_from_slice(MAGIC);
        let words = |b: &mut Vec<u8>, w: &[u32]| w.iter().for_each(|v| b.extend(v.to_le_bytes()));
        words(&mut b, &[FORMAT, BLOB_BYTES as u32]);
        b.extend_from_slice(&version_bytes());
        let id = &self.identity;
        words(&mut b, &[id.vendor, id.device, id.driver]);
        b.extend_from_slice(&id.cache_uuid);
        debug_assert_eq!(b.len(), SIMT_AT);
        for (s, ratio) in self.simt_gemv.iter().zip(self.simt_time_vs_table) {
            b.extend(shape_bytes(Some(s)));
            b.extend(ratio_bytes(ratio));
        }
        debug_assert_eq!(b.len(), BLOCKS_AT);
        let g = &self.blocks_gemv;
        let byte = |v: u32| u8::try_from(v).unwrap_or(0);
        b.extend([byte(g.rows), byte(g.unroll), u8::from(g.word_lanes), 0]);
        b.extend(ratio_bytes(self.blocks_time_vs_table));
        debug_assert_eq!(b.len(), INT_DOT_AT);
        b.extend(shape_bytes(self.int_dot_gemv.as_ref()));
        b.extend(ratio_bytes(self.int_dot_time_vs_table));
        debug_assert_eq!(b.len(), GEMM_AT);
        let entries = self.gemm.entries();
        words(&mut b, &[entries.len() as u32]);
        let packed =
            |tile: Option<GemmTile>| tile.map_or([0; 4], |t| [t.tx, t.ty, t.rn, t.rm].map(byte));
        for i in 0..MAX_GEMM_MS {
            let g = entries.get(i).copied().unwrap_or_default();
            words(&mut b, &[g.m]);
            b.extend(packed(g.simt));
            b.extend(ratio_bytes(g.simt_time_vs_table));
            b.extend(packed(g.blocks));
            b.extend(ratio_bytes(g.blocks_time_vs_table));
        }
        debug_assert_eq!(b.len(), CHECKSUM_AT);
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
        let ratio = |at: usize| ratio_of(&bytes[at..at + 2]);
        let simt = (0..SimtGroup::ALL.len())
            .map(|group| {
                let at = SIMT_AT + group * (SHAPE_BYTES + 2);
                let shape = decode_shape(&bytes[at..at + SHAPE_BYTES])?
                    .ok_or_else(|| format!("SIMT GEMV shape {group} marked as not chosen"))?;
                Ok((shape, ratio(at + SHAPE_BYTES)))
            })
            .collect::<Result<Vec<_>, String>>()?;
        let simt_gemv = std::array::from_fn(|group| simt[group].0);
        let simt_time_vs_table = std::array::from_fn(|group| simt[group].1);
        let blocks = &bytes[BLOCKS_AT..BLOCKS_AT + 4];
        let blocks_gemv = BlocksGemvShape {
            rows: u32::from(blocks[0]),
            unroll: u32::from(blocks[1]),
            word_lanes: match (blocks[2], blocks[3]) {
                (0, 0) => false,
                (1, 0) => true,
                (lanes, pad) => {
                    return Err(format!(
                        "GEMV on blocks word lanes {lanes} and last byte {pad}: not 0 or 1, and 0"
                    ))
                }
            },
        };
        if !blocks_gemv.runnable() {
            return Err(format!(
                "GEMV on blocks with {blocks_gemv}: not a shape it takes"
            ));
        }
        let int_dot_gemv = decode_shape(&bytes[INT_DOT_AT..INT_DOT_AT + SHAPE_BYTES])?;
        let gemm_count = word(GEMM_AT) as usize;
        if gemm_count > MAX_GEMM_MS {
            return Err(format!(
                "GEMM tiles for {gemm_count} prefill m; a blob holds at most {MAX_GEMM_MS}"
            ));
        }
        let tile = |at: usize| {
            let counts: [u8; 4] = bytes[at..at + 4].try_into().expect("4 bytes");
            match counts.map(u32::from) {
                [0, 0, 0, 0] => None,
                [tx, ty, rn, rm] => Some(GemmTile { tx, ty, rn, rm }),
            }
        };
        let mut gemm = Vec::with_capacity(gemm_count);
        for i in 0..gemm_count {
            let at = GEMM_AT + 4 + GEMM_ENTRY_BYTES * i;
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
                blocks: tile(at + 10),
                blocks_time_vs_table: ratio(at + 14),
            });
        }
        let gemm =
            TunedGemms::new(&gemm).ok_or_else(|| "GEMM tiles for one m twice".to_string())?;
        Ok(TunedBlob {
            identity: found,
            simt_gemv,
            simt_time_vs_table,
            blocks_gemv,
            blocks_time_vs_table: ratio(BLOCKS_AT + 4),
            int_dot_gemv,
            int_dot_time_vs_table: ratio(INT_DOT_AT + SHAPE_BYTES),
            gemm,
        })
    }
}

/// A SIMT GEMV shape's bytes in a blob ([`SHAPE_BYTES`]); `None` is all zero. A count too
/// large for its bytes is written as 0, which no device runs.
fn shape_bytes(shape: Option<&SimtGemv>) -> [u8; SHAPE_BYTES] {
    let Some(s) = shape else {
        return [0; SHAPE_BYTES];
    };
    let byte = |v: u32| u8::try_from(v).unwrap_or(0);
    let [w0, w1] = u16::try_from(s.workgroup).unwrap_or(0).to_le_bytes();
    [
        w0,
        w1,
        byte(s.rows),
        byte(s.unroll),
        byte(s.split),
        u8::from(s.word_lanes),
        1,
        0,
    ]
}

/// The shape [`shape_bytes`] wrote (`None` where its flag says none was chosen), or why
/// the bytes are not one.
fn decode_shape(b: &[u8]) -> Result<Option<SimtGemv>, String> {
    let word_lanes = match b[5] {
        0 => false,
        1 => true,
        v => return Err(format!("word lanes {v}: not 0 or 1")),
    };
    match (b[6], b[7]) {
        (0, 0) if b.iter().all(|&v| v == 0) => Ok(None),
        (0, 0) => Err("a SIMT GEMV shape marked as not chosen, with fields".into()),
        (1, 0) => Ok(Some(SimtGemv {
            workgroup: u32::from(u16::from_le_bytes([b[0], b[1]])),
            rows: u32::from(b[2]),
            unroll: u32::from(b[3]),
            split: u32::from(b[4]),
            word_lanes,
        })),
        (flag, pad) => Err(format!(
            "a SIMT GEMV shape flagged {flag} with {pad} in its last byte"
        )),
    }
}

/// Bytes of the subgroup SIMT GEMV's reduction slots with `shape` on `class` at its largest
/// m (8): one float per (subgroup, row, activation row), and one per (row, activation row)
/// where a gate+up pair parks the gate's sums.
fn reduction_bytes(shape: &SimtGemv, class: &DeviceClass) -> u64 {
    let subgroups = u64::from(shape.workgroup / class.min_subgroup_size.max(1));
    4 * (subgroups + 1) * u64::from(shape.rows) * 8
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
    nearest_first(table, all, |s| simt_distance(s, table))
}

/// Each field's steps from `s` to `table`: workgroup, rows, split, unroll, word steps.
fn simt_distance(s: &SimtGemv, table: &SimtGemv) -> [u32; 5] {
    [
        steps(s.workgroup, table.workgroup),
        steps(s.rows, table.rows),
        steps(s.split, table.split),
        steps(s.unroll, table.unroll),
        u32::from(s.word_lanes != table.word_lanes),
    ]
}

/// The [`candidates`] around `shape` one step from it (one field doubled, halved or, for
/// word steps, switched): where a tuning run climbs next.
pub fn neighbours(shape: &SimtGemv, class: &DeviceClass) -> Vec<SimtGemv> {
    candidates(shape, class)
        .into_iter()
        .filter(|s| simt_distance(s, shape).iter().sum::<u32>() == 1)
        .collect()
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
        let shape = |workgroup, rows, unroll, split, word_lanes| SimtGemv {
            workgroup,
            rows,
            unroll,
            split,
            word_lanes,
        };
        TunedBlob {
            identity: identity(),
            simt_gemv: [
                shape(256, 4, 2, 2, true),
                shape(128, 2, 1, 1, false),
                shape(1024, 16, 8, 4, false),
                shape(64, 1, 4, 1, true),
                shape(128, 8, 1, 2, false),
                shape(64, 2, 2, 2, true),
                shape(256, 1, 1, 1, false),
                shape(512, 32, 1, 32, true),
            ],
            // Whole numbers of `RATIO_UNIT`s: the blob keeps them exactly.
            simt_time_vs_table: [0.875, 0.75, 0.9375, 1.0, 0.5, 0.625, 0.96875, 1.0],
            blocks_gemv: BlocksGemvShape {
                rows: 4,
                unroll: 1,
                word_lanes: true,
            },
            blocks_time_vs_table: 0.6875,
            int_dot_gemv: Some(SimtGemv {
                workgroup: 64,
                rows: 8,
                unroll: 4,
                split: 4,
                word_lanes: false,
            }),
            int_dot_time_vs_table: 0.59375,
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
        refused(&bytes[..40], &identity(), "232");
        refused(&bytes[..12], &identity(), "not a q4vk tuning blob");
        let mut older = bytes.clone();
        older[8] = 7;
        refused(&older, &identity(), "blob format 7");
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
        // A SIMT GEMV shape's bytes: word lanes not 0 or 1, a group's shape flagged as not
        // chosen, a last byte not 0 (each with a valid checksum).
        let resummed = |mut b: Vec<u8>| {
            let sum = checksum(&b[..CHECKSUM_AT]);
            b[CHECKSUM_AT..].copy_from_slice(&sum.to_le_bytes());
            b
        };
        for (at, value, why) in [
            (SIMT_AT + 5, 2, "word lanes 2"),
            (SIMT_AT + SHAPE_BYTES + 2 + 6, 0, "not chosen, with fields"),
            (INT_DOT_AT + 7, 1, "in its last byte"),
            (BLOCKS_AT + 2, 2, "GEMV on blocks word lanes 2"),
        ] {
            let mut odd = blob().encode();
            odd[at] = value;
            refused(&resummed(odd), &identity(), why);
        }
        let mut unset = blob().encode();
        let second = SIMT_AT + SHAPE_BYTES + 2;
        unset[second..second + SHAPE_BYTES].fill(0);
        refused(
            &resummed(unset),
            &identity(),
            "shape 1 marked as not chosen",
        );
        // A count too large for its byte is written as 0: a shape no device runs.
        let wide = TunedBlob {
            simt_gemv: [SimtGemv {
                rows: 300,
                ..blob().simt_gemv[0]
            }; 8],
            ..blob()
        };
        let decoded = TunedBlob::decode(&wide.encode(), &identity()).unwrap();
        assert_eq!(decoded.simt_gemv[0].rows, 0);
        // Ratios are kept to the nearest unit, up to 2.
        let rounded = TunedBlob {
            blocks_time_vs_table: 0.9,
            int_dot_time_vs_table: 3.0,
            ..blob()
        };
        let decoded = TunedBlob::decode(&rounded.encode(), &identity()).unwrap();
        assert!((decoded.blocks_time_vs_table - 0.9).abs() <= RATIO_UNIT / 2.0);
        assert_eq!(
            decoded.int_dot_time_vs_table,
            f32::from(u16::MAX) * RATIO_UNIT
        );
        // GEMM tiles: for more m than a blob holds, an m out of range, one m twice.
        let mut many = blob().encode();
        many[GEMM_AT] = 5;
        let sum = checksum(&many[..CHECKSUM_AT]);
        many[CHECKSUM_AT..].copy_from_slice(&sum.to_le_bytes());
        refused(&many, &identity(), "at most 4");
        for (m, why) in [(8, "m = 8"), (64, "twice")] {
            let mut odd = blob().encode();
            let second = GEMM_AT + 4 + GEMM_ENTRY_BYTES;
            odd[second..second + 4].copy_from_slice(&(m as u32).to_le_bytes());
            let sum = checksum(&odd[..CHECKSUM_AT]);
            odd[CHECKSUM_AT..].copy_from_slice(&sum.to_le_bytes());
            refused(&odd, &identity(), why);
        }
    }

    #[test]
    fn a_call_falls_in_the_group_of_its_row_length_row_count_and_m() {
        for (i, group) in SimtGroup::ALL.iter().enumerate() {
            assert_eq!(group.index(), i, "{group}");
        }
        let distinct: std::collections::HashSet<_> = SimtGroup::ALL.iter().collect();
        assert_eq!(distinct.len(), 8);
        let of = |n, k, m| SimtGroup::of(n, k, m);
        assert_eq!(of(4095, 4095, 2), SimtGroup::ALL[0]);
        assert_eq!(of(4095, 4096, 2), SimtGroup::ALL[1]);
        assert_eq!(of(4096, 4095, 8), SimtGroup::ALL[2]);
        assert_eq!(of(28672, 8192, 512), SimtGroup::ALL[3]);
        assert_eq!(of(256, 1536, 1), SimtGroup::ALL[4]);
        assert_eq!(of(1536, 8960, 1), SimtGroup::ALL[5]);
        assert_eq!(of(8960, 1536, 1), SimtGroup::ALL[6]);
        assert_eq!(of(8192, 28672, 1), SimtGroup::ALL[7]);
        assert_eq!(
            SimtGroup::ALL[6].to_string(),
            "short rows, many rows, m = 1"
        );
    }

    #[test]
    fn neighbours_are_one_step_from_the_shape() {
        let class = mali();
        let shape = SimtGemv {
            workgroup: 128,
            rows: 4,
            unroll: 2,
            split: 2,
            word_lanes: false,
        };
        let near = neighbours(&shape, &class);
        // Workgroup, rows, split and unroll halved or doubled, word steps switched.
        assert_eq!(near.len(), 9, "{near:?}");
        for s in &near {
            assert!(runnable(s, &class));
            assert_eq!(simt_distance(s, &shape).iter().sum::<u32>(), 1, "{s:?}");
        }
        assert!(near.contains(&SimtGemv {
            word_lanes: true,
            ..shape
        }));
        assert!(near.contains(&SimtGemv { rows: 8, ..shape }));
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

    /// A Mali-like device: subgroups of 16, 32 KiB of shared memory, workgroups up to 512.
    fn mali() -> DeviceClass {
        DeviceClass {
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
        }
    }

    #[test]
    fn candidates_start_at_the_table_and_all_run_on_the_device() {
        let class = mali();
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

    /// The shared memory a shape needs counts a gate+up pair's parked sums beside the
    /// reduction's slots: 512 invocations of 32 rows on subgroups of 16 take 32 KiB of
    /// slots at m = 8, and the pair's 1 KiB more does not fit a 32 KiB device.
    #[test]
    fn a_shape_fits_with_the_pairs_parked_sums() {
        let class = mali();
        let full = SimtGemv {
            workgroup: 512,
            rows: 32,
            unroll: 1,
            split: 1,
            word_lanes: false,
        };
        assert!(!runnable(&full, &class));
        assert!(runnable(&SimtGemv { rows: 16, ..full }, &class));
    }
}
