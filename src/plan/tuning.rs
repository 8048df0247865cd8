//! Tuning values per device class: one [`DeviceTuning`] row per class, plain data, each
//! saying what device and driver its values were fitted on; [`DeviceTuning::for_class`]
//! picks the row once per context. The measurements behind each value are the raw bench
//! logs in `bench/history/` that the fields' comments name.

use super::blocks_gemv::{BlocksGemvShape, BlocksGemvShapes, BlocksGemvTable};
use super::device_class::{DeviceClass, Family};

/// Tile of the SIMT GEMM: invocations along rows and tokens, rows and tokens per invocation
/// (multiples of 4: the kernel reads them four at a time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GemmTile {
    /// Invocations along rows.
    pub tx: u32,
    /// Invocations along tokens.
    pub ty: u32,
    /// Rows per invocation.
    pub rn: u32,
    /// Tokens per invocation.
    pub rm: u32,
}

impl GemmTile {
    /// Rows per workgroup.
    pub fn rows(&self) -> u32 {
        self.tx * self.rn
    }

    /// Tokens (activation rows) per workgroup.
    pub fn tokens(&self) -> u32 {
        self.ty * self.rm
    }

    /// Invocations per workgroup.
    pub fn invocations(&self) -> u32 {
        self.tx * self.ty
    }

    /// Bytes of the kernel's shared memory: its tiles hold 32 k of f32 per row and per token.
    pub fn shared_bytes(&self) -> u32 {
        4 * 32 * (self.rows() + self.tokens())
    }

    /// Bytes of the GEMM on GGUF blocks' shared memory with this tile: the SIMT GEMM's
    /// tiles and 4 floats of padding per input of the tokens' tile.
    pub fn blocks_shared_bytes(&self) -> u32 {
        self.shared_bytes() + 4 * 32 * 4
    }
}

/// The SIMT GEMM's tile that runs on any device: 64 invocations (Vulkan's minimum
/// workgroup limit is 128), 64 rows × 32 tokens, 8 × 4 outputs per invocation, 12 KiB of
/// shared memory; the fallback where a row's tile exceeds the device's limits.
pub const GEMM_TILE: GemmTile = GemmTile {
    tx: 8,
    ty: 8,
    rn: 8,
    rm: 4,
};

/// How a row picks the SIMT GEMM's tile for m tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimtGemmTiles {
    /// The first tile whose bound is at least m (`None`: any m).
    ByM(&'static [(Option<u32>, GemmTile)]),
    /// `tx` × `ty` invocations of `rn` rows by the fewest tokens per invocation (4, 8, 12,
    /// 16) that cover m: devices that keep an invocation's tile in vector registers.
    CoverM {
        /// Invocations along rows.
        tx: u32,
        /// Invocations along tokens.
        ty: u32,
        /// Rows per invocation.
        rn: u32,
    },
}

impl SimtGemmTiles {
    /// The tile for `m` tokens.
    pub fn for_m(&self, m: u32) -> GemmTile {
        match *self {
            SimtGemmTiles::ByM(tiles) => tiles
                .iter()
                .find(|(bound, _)| bound.is_none_or(|b| m <= b))
                .map_or(GEMM_TILE, |(_, t)| *t),
            SimtGemmTiles::CoverM { tx, ty, rn } => GemmTile {
                tx,
                ty,
                rn,
                rm: 4 * m.div_ceil(16).min(4),
            },
        }
    }
}

/// The SIMT GEMV's workgroup shape (subgroup kernels; the portable kernels have their own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimtGemv {
    /// Invocations per workgroup (at least the device's subgroup size is taken).
    pub workgroup: u32,
    /// Rows per workgroup.
    pub rows: u32,
    /// 16-byte chunks (words, with `word_lanes`) per row each invocation loads per step.
    pub unroll: u32,
    /// Invocations sharing each chunk.
    pub split: u32,
    /// The GEMV's invocations step over words of codes instead of 16-byte chunks
    /// (`vk::pipeline::Tuning::word_lanes`).
    pub word_lanes: bool,
}

impl std::fmt::Display for SimtGemv {
    /// `workgroup 128, 8 rows, unroll 1, split 2, word lanes false` (logs and the bench).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "workgroup {}, {} rows, unroll {}, split {}, word lanes {}",
            self.workgroup, self.rows, self.unroll, self.split, self.word_lanes
        )
    }
}

/// The integer dot-product GEMV's shapes on x rounded to bytes, by the matrix's class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BytesGemv {
    /// Matrices of long rows (`plan::tuned::has_long_rows`).
    pub long_rows: SimtGemv,
    /// Matrices of short rows and at least `many_rows_from` rows.
    pub many_rows: SimtGemv,
    /// As `many_rows`, in passes of 8 activation rows on rows of fewer than
    /// `many_rows_at_8_below_k` columns.
    pub many_rows_at_8: SimtGemv,
    /// See `many_rows_at_8`.
    pub many_rows_at_8_below_k: u64,
    /// Matrices of short rows and fewer rows.
    pub few_rows: SimtGemv,
    /// See `many_rows`.
    pub many_rows_from: usize,
}

/// The integer dot-product GEMV's reach in m (passes of 8 rows up to it, the SIMT GEMM
/// beyond).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntDotReach {
    /// Largest m by default.
    pub up_to: u32,
    /// Largest m on matrices of at most `few_rows` rows and at least `long_k` columns,
    /// where the GEMM's tiles leave few workgroups.
    pub up_to_long_k: u32,
    /// See `up_to_long_k`.
    pub few_rows: usize,
    /// See `up_to_long_k`.
    pub long_k: usize,
    /// At m = 1, x in digits pays (its pre-pass costs a dispatch) on matrices of at least
    /// 2^`from_weights_log2_at_1` weights; the f32 GEMV runs on smaller ones.
    pub from_weights_log2_at_1: u32,
    /// At m ≥ 2, where the alternative is the f32 GEMV (up to `simt_gemv_up_to`), x in
    /// digits pays on matrices of at least `from_rows` rows; the f32 GEMV runs on fewer,
    /// whose few workgroups leave the pre-pass's cost unpaid.
    pub from_rows: usize,
    /// x rounded to bytes (`Q4VK_GEMV_ROUND_X_TO_INT8`) pays, its pre-pass included, at
    /// m = 1 on matrices of at least 2^`bytes_from_weights_log2_at_1` weights.
    pub bytes_from_weights_log2_at_1: u32,
    /// x rounded to bytes pays at m ≥ 2 on matrices of at least 2^`bytes_from_weights_log2`
    /// weights.
    pub bytes_from_weights_log2: u32,
    /// On GGUF blocks, whose f32 decode costs more than the Q4 layout's, x rounded to bytes
    /// pays at m = 1 on matrices of at least 2^`blocks_bytes_from_weights_log2_at_1`
    /// weights, and at m ≥ 2 on every matrix (`h100-2026-12-06-blocks-on-bytes.txt`).
    pub blocks_bytes_from_weights_log2_at_1: u32,
}

impl IntDotReach {
    /// Whether x in digits pays at `m` on an `n` × `k` matrix where the f32 GEMV would run
    /// otherwise (`m` up to the row's `simt_gemv_up_to`; beyond, against the SIMT GEMM, it
    /// pays wherever the reach allows).
    pub fn pays(&self, n: usize, k: usize, m: u32) -> bool {
        match m {
            1 => at_least_weights(n, k, self.from_weights_log2_at_1),
            _ => n >= self.from_rows,
        }
    }

    /// As [`Self::pays`] for x rounded to bytes (`Q4VK_GEMV_ROUND_X_TO_INT8`): one dot
    /// product where the exact digits take three.
    pub fn bytes_pay(&self, n: usize, k: usize, m: u32) -> bool {
        let log2 = match m {
            1 => self.bytes_from_weights_log2_at_1,
            _ => self.bytes_from_weights_log2,
        };
        at_least_weights(n, k, log2)
    }

    /// As [`Self::bytes_pay`] on GGUF blocks, against their f32 decode.
    pub fn blocks_bytes_pay(&self, n: usize, k: usize, m: u32) -> bool {
        m > 1 || at_least_weights(n, k, self.blocks_bytes_from_weights_log2_at_1)
    }
}

/// Whether an `n` × `k` matrix has at least 2^`log2` weights.
fn at_least_weights(n: usize, k: usize, log2: u32) -> bool {
    let weights = (n as u64).saturating_mul(k as u64);
    weights.checked_shr(log2).unwrap_or(0) > 0
}

/// Where the tensor-core GEMM on x in fragments replaces the GEMV at m ≤ 8 (given a
/// workspace): per activation type, the smallest m for matrices of at least 2^bits weights,
/// the first row that applies; 9 for none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FragmentsFromM {
    /// f16 x: (least log2 weights, from m).
    pub f16: [(u32, u32); 3],
    /// f32 x: (least log2 weights, from m).
    pub f32: [(u32, u32); 3],
}

impl FragmentsFromM {
    /// The smallest m for an `n` × `k` matrix and x of f16 (`x_f16`) or f32.
    pub fn for_matrix(&self, n: usize, k: usize, x_f16: bool) -> u32 {
        let weights = n as u64 * k as u64;
        let rows = if x_f16 { &self.f16 } else { &self.f32 };
        rows.iter()
            .find(|(bits, _)| weights >= 1u64 << bits)
            .map_or(9, |(_, m)| *m)
    }
}

/// Tuning values for a class of devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceTuning {
    /// The row's name (in logs and the bench).
    pub name: &'static str,
    /// The device and driver the values were fitted on.
    pub fitted_on: &'static str,
    /// The SIMT GEMV's workgroup shape (`q4vk-bench --sweep`: `h200-2026-12-01-sweep.txt`;
    /// on long rows `h100-2026-12-06-long-row-steps.txt`); on matrices of short rows only
    /// where `simt_gemv_short_rows` is `None`.
    pub simt_gemv: SimtGemv,
    /// The SIMT GEMV's shape on matrices of short rows (k below
    /// `plan::tuned::LONG_ROWS_FROM_K`) where it differs from `simt_gemv`: such a matrix's
    /// rows fill fewer lanes, and one of few rows fewer workgroups
    /// (`h200-2026-12-05-tuned-shapes.txt`).
    pub simt_gemv_short_rows: Option<SimtGemv>,
    /// The integer dot-product GEMV's shape on matrices of every row length where it differs
    /// from the f32 GEMV's (`simt_gemv`, `simt_gemv_short_rows`): its x in digits is read
    /// per chunk, and word steps cost it more than they save
    /// (`h100-2026-12-05-word-lanes.txt`, `h100-2026-12-06-phone-shapes-tuning.txt`).
    pub int_dot_gemv: Option<SimtGemv>,
    /// The integer dot-product GEMV's shapes on x rounded to bytes
    /// (`Q4VK_GEMV_ROUND_X_TO_INT8`), where they differ from `int_dot_gemv`: its x takes 3
    /// of the digits' 7 uvec4 per chunk and its dot products a third of theirs, so fewer
    /// rows per workgroup pay (`h100-2026-12-06-x-in-bytes.txt`).
    pub bytes_gemv: Option<BytesGemv>,
    /// Whether matrices whose rows have fewer 16-byte chunks than the SIMT GEMV's workgroup
    /// has lanes along a row (workgroup / split) step over words of codes even where the
    /// shape steps over chunks: chunk steps would shrink the workgroup or leave lanes idle
    /// there, word steps fill it (`h100-2026-12-05-word-lanes.txt`).
    pub simt_gemv_word_lanes_on_short_rows: bool,
    /// From how many rows the f32 SIMT GEMV at m ≥ 2 decodes each word of codes once for
    /// all activation rows (`None`: never; `h200-2026-12-04-decode-once.txt`,
    /// `lavapipe-2026-12-04-decode-once.txt`).
    pub simt_gemv_decode_once_from_rows: Option<usize>,
    /// Largest m at which SIMT matrices run the f32 GEMV on x itself, in passes of 8 rows
    /// (the SIMT GEMM beyond; `h200-2026-12-02-simt-passes.txt`).
    pub simt_gemv_up_to: u32,
    /// The integer dot-product GEMV's reach (`h200-2026-12-02-simt-passes.txt`; where it
    /// pays at m ≤ 8: `h200-2026-12-04-simt-phone-shapes.txt`).
    pub int_dot: IntDotReach,
    /// Tensor-core matrices of at least `.0` rows and at most `.1` columns run the GEMM at
    /// m = 8 (where it beat the GEMV: `h200-2026-12-02-m8-rule.txt`); `None`: the GEMV.
    pub coop_gemm_at_8: Option<(usize, usize)>,
    /// Where the GEMM on x in fragments replaces the GEMV (`h200-2026-12-02-defer-and-m4-7.txt`,
    /// `h200-2026-12-02-alternate-and-m2-3.txt`).
    pub fragments_from_m: FragmentsFromM,
    /// The SIMT GEMM's tiles (`h200-2026-12-02-coherent-simt-gemm.txt`,
    /// `h200-2026-12-02-stage-major-simt-tiles.txt`).
    pub simt_gemm_tiles: SimtGemmTiles,
    /// The tiles of the GEMM on GGUF blocks (`h100-2026-12-06-blocks-gemm-tiles.txt` and
    /// `h100-2026-12-06-blocks-gemm-staging.txt`).
    pub blocks_gemm_tiles: SimtGemmTiles,
    /// Workgroups a SIMT GEMM call should have in flight per SM where the driver reports
    /// SMs, and in all where it does not (`h200-2026-12-02-k-groups.txt`).
    pub simt_gemm_workgroups: (u64, u64),
    /// Whether SIMT-layout matrices run the tensor-core GEMM on the SIMT layout
    /// (`vk::coop_tiles`) instead of the SIMT GEMM, where the device's cooperative matrices
    /// offer its shape.
    pub coop_tiles_gemm: bool,
    /// Whether GGUF block matrices run the tensor-core GEMM on blocks
    /// (`shaders/gemm_blocks_coop.comp`) instead of the SIMT GEMM on blocks, where the
    /// device's cooperative matrices offer its shape.
    pub blocks_coop_tiles_gemm: bool,
    /// The shapes of the GEMV on GGUF blocks with f32 arithmetic, per class of block type
    /// and class of call (`plan::blocks_gemv`; `h100-2026-12-07-blocks-classes.txt`: quarters
    /// or more rows per workgroup share each activation load among more weights).
    pub blocks_gemv: BlocksGemvTable,
    /// Rows per workgroup of the GEMV on GGUF blocks on x rounded to bytes (packed integer
    /// dot products, whole pieces, every pass).
    pub blocks_dot_gemv_rows: u32,
}

/// The GPU tiles of the SIMT GEMM: up to m = 16, 64 rows × 16 tokens (4 × 4 outputs per
/// invocation), where [`GEMM_TILE`]'s 32 tokens would leave half its products unused; up to
/// 32 [`GEMM_TILE`]; beyond, 128 rows × 64 tokens (8 × 8 outputs), whose outputs per staged
/// weight halve the shared-memory reads per product.
const GPU_GEMM_TILES: [(Option<u32>, GemmTile); 3] = [
    (
        Some(16),
        GemmTile {
            tx: 16,
            ty: 4,
            rn: 4,
            rm: 4,
        },
    ),
    (Some(32), GEMM_TILE),
    (
        None,
        GemmTile {
            tx: 16,
            ty: 8,
            rn: 8,
            rm: 8,
        },
    ),
];

/// The GPU tiles of the GEMM on GGUF blocks: the SIMT GEMM's up to m = 16, then
/// [`GEMM_TILE`] (the 128 × 64 tile, which holds more registers beside the next piece's
/// words, was slower there at m = 512).
const GPU_BLOCKS_GEMM_TILES: [(Option<u32>, GemmTile); 2] = [GPU_GEMM_TILES[0], (None, GEMM_TILE)];

/// The NVIDIA row's shapes of the GEMV on GGUF blocks (`h100-2026-12-07-blocks-classes.txt`):
/// quarters on blocks of 32 where the rows are few, many rows per workgroup where they are
/// many; whole pieces for the super-blocks, whose quarters would decode the scales again.
const NVIDIA_BLOCKS_GEMV: BlocksGemvTable = BlocksGemvTable {
    runs: BlocksGemvShapes {
        few_rows: BlocksGemvShape::quarters(2),
        many_rows: BlocksGemvShape::pieces(8),
        past_one_pass: BlocksGemvShape::quarters(4),
    },
    looked_up: BlocksGemvShapes {
        few_rows: BlocksGemvShape::quarters(2),
        many_rows: BlocksGemvShape::quarters(4),
        past_one_pass: BlocksGemvShape::quarters(4),
    },
    packed_scales: BlocksGemvShapes {
        few_rows: BlocksGemvShape::pieces(4),
        many_rows: BlocksGemvShape::pieces(4),
        past_one_pass: BlocksGemvShape::pieces(8),
    },
    byte_scales: BlocksGemvShapes {
        few_rows: BlocksGemvShape::pieces(4),
        many_rows: BlocksGemvShape::pieces(4),
        past_one_pass: BlocksGemvShape::quarters(4),
    },
    // Between the rows timed (2048: few; 28672: many); matrices of 4096 to 16384 rows are
    // untimed on either side of it.
    many_rows_from: 8192,
};

/// Every other device's shapes of the GEMV on GGUF blocks: the NVIDIA row's strides, but no
/// more than 4 rows per workgroup and quarters (8 held inputs per activation row) where that
/// row takes 8 rows of pieces, so that an invocation's outputs and held inputs fit the
/// smaller register files of mobile GPUs; the super-blocks keep 2 rows. Not timed on such
/// devices.
const DEFAULT_BLOCKS_GEMV: BlocksGemvTable = BlocksGemvTable {
    runs: BlocksGemvShapes {
        few_rows: BlocksGemvShape::quarters(2),
        many_rows: BlocksGemvShape::quarters(4),
        past_one_pass: BlocksGemvShape::quarters(4),
    },
    looked_up: NVIDIA_BLOCKS_GEMV.looked_up,
    packed_scales: BlocksGemvShapes {
        few_rows: BlocksGemvShape::pieces(2),
        many_rows: BlocksGemvShape::pieces(2),
        past_one_pass: BlocksGemvShape::pieces(4),
    },
    byte_scales: BlocksGemvShapes {
        few_rows: BlocksGemvShape::pieces(2),
        many_rows: BlocksGemvShape::pieces(2),
        past_one_pass: BlocksGemvShape::quarters(4),
    },
    many_rows_from: NVIDIA_BLOCKS_GEMV.many_rows_from,
};

/// CPU implementations' shapes of the GEMV on GGUF blocks: whole pieces of 2 rows per
/// workgroup in one pass, 4 past it, for every class (a workgroup runs on one thread, where
/// loads of neighbouring invocations do not meet).
const CPU_BLOCKS_GEMV: BlocksGemvTable = {
    let shapes = BlocksGemvShapes {
        few_rows: BlocksGemvShape::pieces(2),
        many_rows: BlocksGemvShape::pieces(2),
        past_one_pass: BlocksGemvShape::pieces(4),
    };
    BlocksGemvTable {
        runs: shapes,
        looked_up: shapes,
        packed_scales: shapes,
        byte_scales: shapes,
        many_rows_from: 8192,
    }
};

/// NVIDIA GPUs with 32-wide subgroups.
pub const NVIDIA: DeviceTuning = DeviceTuning {
    name: "nvidia",
    fitted_on: "NVIDIA H200 and H100, driver 580.159.04",
    simt_gemv: SimtGemv {
        workgroup: 128,
        rows: 2,
        unroll: 4,
        split: 1,
        word_lanes: true,
    },
    simt_gemv_short_rows: Some(SimtGemv {
        workgroup: 128,
        rows: 4,
        unroll: 1,
        split: 1,
        word_lanes: false,
    }),
    int_dot_gemv: Some(SimtGemv {
        workgroup: 128,
        rows: 8,
        unroll: 1,
        split: 2,
        word_lanes: false,
    }),
    bytes_gemv: Some(BytesGemv {
        long_rows: SimtGemv {
            workgroup: 128,
            rows: 4,
            unroll: 2,
            split: 1,
            word_lanes: false,
        },
        many_rows: SimtGemv {
            workgroup: 128,
            rows: 8,
            unroll: 1,
            split: 2,
            word_lanes: false,
        },
        many_rows_at_8: SimtGemv {
            workgroup: 128,
            rows: 4,
            unroll: 1,
            split: 4,
            word_lanes: false,
        },
        // Timed on k = 1536 only; at k = 2048 the digits' shape led.
        many_rows_at_8_below_k: 2048,
        few_rows: SimtGemv {
            workgroup: 128,
            rows: 2,
            unroll: 4,
            split: 1,
            word_lanes: false,
        },
        many_rows_from: 8192,
    }),
    simt_gemv_word_lanes_on_short_rows: true,
    simt_gemv_decode_once_from_rows: Some(4096),
    simt_gemv_up_to: 9,
    int_dot: IntDotReach {
        up_to: 40,
        up_to_long_k: 64,
        few_rows: 8192,
        long_k: 16384,
        from_weights_log2_at_1: 25,
        from_rows: 3072,
        bytes_from_weights_log2_at_1: 25,
        bytes_from_weights_log2: 23,
        blocks_bytes_from_weights_log2_at_1: 23,
    },
    coop_gemm_at_8: Some((10240, 8192)),
    fragments_from_m: FragmentsFromM {
        f16: [(26, 3), (25, 4), (0, 5)],
        f32: [(26, 5), (25, 7), (0, 8)],
    },
    simt_gemm_tiles: SimtGemmTiles::ByM(&GPU_GEMM_TILES),
    blocks_gemm_tiles: SimtGemmTiles::ByM(&GPU_BLOCKS_GEMM_TILES),
    simt_gemm_workgroups: (3, 384),
    // Its own tensor-core kernels run the tensor-core layout; SIMT-layout matrices (a column
    // order) keep the SIMT GEMM.
    coop_tiles_gemm: false,
    // Not yet timed against the SIMT GEMM on blocks on these GPUs.
    blocks_coop_tiles_gemm: false,
    blocks_gemv: NVIDIA_BLOCKS_GEMV,
    blocks_dot_gemv_rows: 2,
};

/// The SIMT GEMM's tiles on CPU implementations (and the GEMM on GGUF blocks'): 192 rows
/// by the fewest of 16–64 tokens covering m.
const CPU_GEMM_TILES: SimtGemmTiles = SimtGemmTiles::CoverM {
    tx: 16,
    ty: 4,
    rn: 12,
};

/// CPU implementations of Vulkan: workgroups run on one thread each, so tiles live in
/// vector registers and caches, and a pass of the GEMV costs less against the GEMM.
pub const CPU_IMPLEMENTATION: DeviceTuning = DeviceTuning {
    name: "cpu-implementation",
    fitted_on: "Mesa lavapipe 22.3 (LLVM 15), 2-core x86-64",
    simt_gemv: SimtGemv {
        workgroup: 128,
        rows: 4,
        unroll: 1,
        split: 1,
        word_lanes: false,
    },
    // A workgroup runs on one thread: no lanes idle.
    simt_gemv_word_lanes_on_short_rows: false,
    simt_gemv_up_to: 11,
    // Either way within noise (`lavapipe-2026-12-04-decode-once.txt`): the one with less
    // work per weight.
    simt_gemv_decode_once_from_rows: Some(1),
    simt_gemm_tiles: CPU_GEMM_TILES,
    blocks_gemm_tiles: CPU_GEMM_TILES,
    blocks_gemv: CPU_BLOCKS_GEMV,
    ..DEFAULT
};

/// Every other device: the NVIDIA row's thresholds (the only ones measured) with the
/// generic workgroup shape, until the device has a row of its own.
pub const DEFAULT: DeviceTuning = DeviceTuning {
    name: "default",
    fitted_on: "none: thresholds of the NVIDIA row",
    simt_gemv: SimtGemv {
        workgroup: 128,
        rows: 4,
        unroll: 1,
        split: 1,
        word_lanes: false,
    },
    simt_gemv_short_rows: None,
    int_dot_gemv: None,
    bytes_gemv: None,
    // Cooperative matrices without NVIDIA's fragment layout: the tensor cores wherever a
    // GEMM runs.
    coop_tiles_gemm: true,
    blocks_coop_tiles_gemm: true,
    blocks_gemv: DEFAULT_BLOCKS_GEMV,
    ..NVIDIA
};

impl DeviceTuning {
    /// The SIMT GEMV's shape on matrices of short rows.
    pub fn short_rows_simt_gemv(&self) -> &SimtGemv {
        self.simt_gemv_short_rows
            .as_ref()
            .unwrap_or(&self.simt_gemv)
    }

    /// Every row, by name.
    pub const ALL: [&'static DeviceTuning; 3] = [&NVIDIA, &CPU_IMPLEMENTATION, &DEFAULT];

    /// The row named `name`.
    pub fn named(name: &str) -> Option<&'static DeviceTuning> {
        Self::ALL.iter().copied().find(|r| r.name == name)
    }

    /// The row for a device of `class`.
    pub fn for_class(class: &DeviceClass) -> &'static DeviceTuning {
        match class.family {
            Family::Software => &CPU_IMPLEMENTATION,
            Family::Nvidia if class.subgroup_size == 32 => &NVIDIA,
            _ => &DEFAULT,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tuning times one shape of its class at every height and a blob's choice replaces
    /// both (`plan::tuned::blocks_shape_of_row`): every row gives that class one shape, and
    /// every shape of every row is one the kernel takes; the generic row (phones, the
    /// export) takes at most 4 rows per workgroup.
    #[test]
    fn rows_give_the_tuned_blocks_class_one_shape_and_only_runnable_ones() {
        assert!(DEFAULT.blocks_gemv.shapes().all(|s| s.rows <= 4));
        for row in DeviceTuning::ALL {
            let tuned = row.blocks_gemv.of(super::super::tuned::TUNED_BLOCKS_CLASS);
            assert_eq!(tuned.few_rows, tuned.many_rows, "{}", row.name);
            assert!(
                row.blocks_gemv.shapes().all(|s| s.runnable()),
                "{}",
                row.name
            );
        }
    }

    #[test]
    fn gpu_tiles_follow_m_and_cpu_tiles_cover_it() {
        let gpu = NVIDIA.simt_gemm_tiles;
        assert_eq!(gpu.for_m(16).tokens(), 16);
        assert_eq!(gpu.for_m(17), GEMM_TILE);
        assert_eq!(gpu.for_m(33).tokens(), 64);
        let cpu = CPU_IMPLEMENTATION.simt_gemm_tiles;
        assert_eq!((cpu.for_m(9).tokens(), cpu.for_m(17).tokens()), (16, 32));
        assert_eq!(cpu.for_m(1000).tokens(), 64);
    }

    #[test]
    fn fragments_gemm_replaces_the_gemv_by_activation_type_and_matrix_size() {
        let from = |n, k, f16| NVIDIA.fragments_from_m.for_matrix(n, k, f16);
        assert_eq!(from(4096, 4096, true), 5);
        assert_eq!(from(4096, 8192, true), 4);
        assert_eq!(from(8192, 8192, true), 3);
        assert_eq!(from(8192, 8191, true), 4);
        assert_eq!(from(4096, 8191, true), 5);
        assert_eq!(from(4096, 11008, false), 7);
        assert_eq!(from(4096, 8191, false), 8);
        assert_eq!(from(8192, 8192, false), 5);
        assert_eq!(from(8192, 8191, false), 7);
        assert_eq!(from(28672, 8192, false), 5);
    }

    #[test]
    fn digits_pay_on_large_matrices_at_m_1_and_on_many_rows_up_to_m_8() {
        let reach = NVIDIA.int_dot;
        // m = 1: from 2^25 weights.
        assert!(!reach.pays(8192, 3072, 1));
        assert!(reach.pays(8192, 4096, 1));
        assert!(reach.pays(usize::MAX, usize::MAX, 1));
        // m = 2..8: from 3072 rows, whatever K.
        assert!(!reach.pays(2048, 65536, 2));
        assert!(reach.pays(3072, 32, 8));
        // As at m = 2 up to the f32 GEMV's reach (`runs_int_dot` asks only there).
        assert!(!reach.pays(2048, 4096, 9));
    }

    #[test]
    fn bytes_pay_on_large_matrices_at_m_1_and_on_mid_sized_ones_from_m_2() {
        let reach = NVIDIA.int_dot;
        // m = 1: from 2^25 weights, as the exact digits.
        assert!(!reach.bytes_pay(8192, 3072, 1));
        assert!(reach.bytes_pay(8192, 4096, 1));
        // m = 2..8: from 2^23 weights, whatever the rows.
        assert!(!reach.bytes_pay(2048, 2048, 2));
        assert!(reach.bytes_pay(1536, 8960, 2));
        assert!(reach.bytes_pay(256, 32768, 8));
        assert!(!reach.bytes_pay(4095, 2048, 8));
    }

    #[test]
    fn rows_follow_the_device_class() {
        let class = |family, subgroup_size| DeviceClass {
            family,
            vendor: 0,
            cpu: family == Family::Software,
            subgroup_size,
            min_subgroup_size: subgroup_size,
            max_shared: 49152,
            max_workgroup: 1024,
            max_storage_range: 1 << 32,
            max_groups: [65535; 2],
            sm_count: None,
        };
        assert_eq!(
            DeviceTuning::for_class(&class(Family::Nvidia, 32)).name,
            "nvidia"
        );
        assert_eq!(
            DeviceTuning::for_class(&class(Family::Nvidia, 64)).name,
            "default"
        );
        assert_eq!(
            DeviceTuning::for_class(&class(Family::Software, 8)).name,
            "cpu-implementation"
        );
        assert_eq!(
            DeviceTuning::for_class(&class(Family::Adreno, 64)).name,
            "default"
        );
    }
}
