//! The decision grid: every kernel decision the rules make (`vk::gemv::decide`) over made-up
//! device classes, matrix forms and shapes, activation counts and types and workspaces,
//! against the record in `tests/data/decision-grid.txt`. The rules are pure (no Vulkan), so
//! this runs anywhere in well under a second. A change that should change no decision must
//! leave the record as it is; a change that should change some shows them in the record's
//! diff: `Q4VK_BLESS_DECISIONS=1 cargo test --test decision_grid` rewrites it.
//!
//! One line per (device, kernel families, form, shape, activation type, workspace): the
//! choices over m, each written once for the run of m it holds for (`1-4:` … `5:` …), then
//! the workspace bytes at each m that has one. What follows from m alone (a GEMV pass's
//! rows, the fragments' padded tokens, where the K slices' sums start) is left out.
//!
//! Kernels: `gemv(wg W)` the SIMT GEMV, `gemm(TX x TY x RN x RM kK)` the SIMT GEMM,
//! `cgemv(T x S bB)` the tensor-core GEMV, `cgemm(T,S,M,K,A,G bB zZ)` the tensor-core GEMM
//! (`CoopGemmTuning`'s fields, Z K slices), `tgemm(MxNxK wgW rR cC bB)` the tensor-core GEMM
//! on the SIMT layout (fragment shape, workgroup, row and column tiles); pre-passes `+digits`, `+fragments(STAGES st
//! bB pP)`. Flags: `z` zero points, `s` f32 scales, `h` f16 x, `o` offsets, `k` x gathered
//! through the column order, `d` x in digits (with `b`: rounded to bytes), `p` portable
//! kernels, `w` each word decoded once for all activation rows, `l` word lanes
//! (invocations stepping over words of codes or quarters of pieces), `f` x in fragments,
//! `r` f32 x rounded to f16, `q` in K slices.

use q4vk::import::gguf_blocks::BlockType;
use q4vk::plan::{DeviceClass, Family, FragmentShape};
use q4vk::quant::q4::Q4Shape;
use q4vk::vk::gemv::{decide, Choice, GemvParams, KernelChoice, PrepassChoice, Room};
use q4vk::vk::matrix_form::MatrixForm;
use q4vk::vk::pipeline::{FragmentTiles, PipelineKey};
use q4vk::vk::rules::Rules;
use std::fmt::Write;
use std::path::PathBuf;

/// A device class as the rules see one: the named families with the sizes and limits
/// such devices report.
fn class(
    family: Family,
    (subgroup_size, min_subgroup_size): (u32, u32),
    max_shared: u32,
    max_workgroup: u32,
    max_storage_range: u64,
    max_groups: [u32; 2],
    sm_count: Option<u32>,
) -> DeviceClass {
    DeviceClass {
        family,
        vendor: 0,
        cpu: family == Family::Software,
        subgroup_size,
        min_subgroup_size,
        max_shared,
        max_workgroup,
        max_storage_range,
        max_groups,
        sm_count,
    }
}

/// Which kernel families a context of a class runs.
#[derive(Clone, Copy)]
struct Families {
    name: &'static str,
    coop: bool,
    portable: bool,
    int_dot: bool,
    int_dot_everywhere: bool,
    /// The fragment shape of the tensor-core GEMM on the SIMT layout, where offered.
    coop_tiles: Option<FragmentShape>,
}

const COOP: Families = Families {
    name: "coop",
    coop: true,
    portable: false,
    int_dot: false,
    int_dot_everywhere: false,
    coop_tiles: None,
};
const SIMT: Families = Families {
    name: "simt",
    coop: false,
    portable: false,
    int_dot: false,
    int_dot_everywhere: false,
    coop_tiles: None,
};
const INT_DOT: Families = Families {
    name: "int-dot",
    coop: false,
    portable: false,
    int_dot: true,
    int_dot_everywhere: false,
    coop_tiles: None,
};
const INT_DOT_EVERYWHERE: Families = Families {
    name: "int-dot-everywhere",
    coop: false,
    portable: false,
    int_dot: true,
    int_dot_everywhere: true,
    coop_tiles: None,
};
const PORTABLE: Families = Families {
    name: "portable",
    coop: false,
    portable: true,
    int_dot: false,
    int_dot_everywhere: false,
    coop_tiles: None,
};

/// SIMT kernels and the tensor-core GEMM on the SIMT layout with fragments of `m` × `n` × `k`.
const fn coop_tiles(name: &'static str, m: u32, n: u32, k: u32) -> Families {
    Families {
        name,
        coop_tiles: Some(FragmentShape { m, n, k }),
        ..SIMT
    }
}

/// The made-up devices: (name, class, the kernel families to try on it).
fn devices() -> Vec<(&'static str, DeviceClass, Vec<Families>)> {
    const BIG: u64 = u32::MAX as u64;
    vec![
        (
            "h200-like",
            class(
                Family::Nvidia,
                (32, 32),
                49152,
                1024,
                BIG,
                [i32::MAX as u32, 65535],
                Some(132),
            ),
            vec![COOP, SIMT, INT_DOT, INT_DOT_EVERYWHERE, PORTABLE],
        ),
        (
            "nvidia-without-sm-count",
            class(
                Family::Nvidia,
                (32, 32),
                49152,
                1024,
                BIG,
                [i32::MAX as u32, 65535],
                None,
            ),
            vec![COOP, INT_DOT],
        ),
        (
            "lavapipe-like",
            class(
                Family::Software,
                (8, 8),
                32768,
                1024,
                1 << 27,
                [65535, 65535],
                None,
            ),
            vec![
                SIMT,
                INT_DOT_EVERYWHERE,
                coop_tiles("coop-tiles-8x8x8", 8, 8, 8),
            ],
        ),
        (
            "generic-gpu",
            class(
                Family::Other,
                (32, 32),
                32768,
                256,
                1 << 27,
                [65535, 65535],
                None,
            ),
            vec![SIMT, PORTABLE],
        ),
        (
            "wave64-gpu",
            class(
                Family::Amd,
                (64, 64),
                65536,
                1024,
                BIG,
                [i32::MAX as u32, 65535],
                None,
            ),
            vec![SIMT, INT_DOT, coop_tiles("coop-tiles-16x16x16", 16, 16, 16)],
        ),
        (
            "adreno-like",
            class(
                Family::Adreno,
                (64, 64),
                32768,
                1024,
                1 << 27,
                [65535, 65535],
                None,
            ),
            vec![SIMT, INT_DOT, coop_tiles("coop-tiles-16x8x16", 16, 8, 16)],
        ),
        (
            "mali-like",
            class(
                Family::Mali,
                (16, 16),
                32768,
                512,
                1 << 27,
                [65535, 65535],
                None,
            ),
            vec![SIMT, INT_DOT],
        ),
    ]
}

/// Matrix forms: (name, group size, zero points, f32 scales and offsets, column order).
const FORMS: [(&str, i32, bool, bool, bool); 6] = [
    ("g128", 128, false, false, false),
    ("g128z", 128, true, false, false),
    ("g64", 64, false, false, false),
    ("g32o", 32, false, true, false),
    ("per-channel", -1, false, false, false),
    ("g128z-act-order", 128, true, false, true),
];

/// Shapes (n, k) from 1 to 64 k each way.
const SHAPES: [(u64, u64); 14] = [
    (7, 96),
    (130, 300),
    (256, 1536),
    (1536, 8960),
    (3071, 4096),
    (3072, 4096),
    (4095, 2048),
    (8960, 1536),
    (4096, 4096),
    (11008, 4096),
    (28672, 8192),
    (8192, 28672),
    (65536, 512),
    (512, 65536),
];

/// Activation counts, 1 to 1024: every m up to 12, then each side of the tuning rows'
/// bounds and the kernels' tiles.
const MS: [u32; 29] = [
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 16, 17, 24, 32, 33, 40, 41, 48, 64, 65, 96, 128, 200,
    256, 512, 513, 1024,
];

/// Activation types: (name, (f16 x, x may be rounded to f16, x may be rounded to bytes)).
const XS: [(&str, (bool, bool, bool)); 5] = [
    ("f32", (false, false, false)),
    ("f16", (true, false, false)),
    ("f32-round", (false, true, false)),
    ("f32-round-int8", (false, false, true)),
    ("f16-round-int8", (true, false, true)),
];

/// Workspaces: (name, room).
const ROOMS: [(&str, Room); 3] = [
    ("none", Room::None),
    ("as-needed", Room::AsNeeded),
    ("1MiB", Room::Bytes(1 << 20)),
];

/// The whole grid as text.
fn grid() -> String {
    let mut out = String::new();
    for (device, class, families) in devices() {
        let max_part_bytes = class.max_storage_range.min(1 << 31) / 16 * 16;
        for f in families {
            let mut rules = Rules::for_class(class, f.portable, f.int_dot);
            rules.int_dot_everywhere = f.int_dot_everywhere;
            rules.coop_tiles = f.coop_tiles;
            rules.coop_fragments = f.coop;
            for (form_name, group, zeros, offsets, order) in FORMS {
                for (n, k) in SHAPES {
                    let Ok(shape) = Q4Shape::new(n, k, group, zeros as u32) else {
                        continue;
                    };
                    let form =
                        MatrixForm::new(shape, offsets, offsets, order, f.coop, max_part_bytes)
                            .expect("every grid matrix fits a part");
                    for (x_name, x) in &XS[..4] {
                        let (_, round_f16, round_int8) = *x;
                        // Rounding to f16 only ever changes the tensor-core GEMM on
                        // fragments; to bytes, the integer dot-product GEMV on SIMT matrices.
                        let simt = form.coop.is_none();
                        if (round_f16 && simt) || (round_int8 && !(f.int_dot && simt)) {
                            continue;
                        }
                        for (room_name, room) in ROOMS {
                            // A room of so many bytes only ever changes the K slices.
                            if matches!(room, Room::Bytes(_)) && simt {
                                continue;
                            }
                            let line = runs(&rules, &form, *x, room);
                            writeln!(
                                out,
                                "{device} {} {form_name} {n}x{k} {x_name} ws-{room_name}: {line}",
                                f.name
                            )
                            .unwrap();
                        }
                    }
                }
            }
            // GGUF blocks kept in their native bytes: the kernels on x, and on x rounded to
            // bytes given a workspace.
            for ty in [
                BlockType::Q8_0,
                BlockType::Iq4Nl,
                BlockType::Q4K,
                BlockType::Q6K,
            ] {
                for (n, k) in SHAPES {
                    if !(k as usize).is_multiple_of(ty.block_elements()) {
                        continue;
                    }
                    let form = MatrixForm::of_blocks(ty, n as usize, k as usize, max_part_bytes)
                        .expect("every grid matrix fits a part");
                    for (x_name, x) in [XS[0], XS[1], XS[4]] {
                        let (room_name, room) = match x.2 {
                            true => ROOMS[1],
                            false => ROOMS[0],
                        };
                        let line = runs(&rules, &form, x, room);
                        writeln!(
                            out,
                            "{device} {} gguf-{} {n}x{k} {x_name} ws-{room_name}: {line}",
                            f.name,
                            ty.name()
                        )
                        .unwrap();
                    }
                }
            }
        }
    }
    out
}

/// The choices over [`MS`], each with the run of m it holds for.
/// `x`: (f16 x, rounded to f16, rounded to bytes).
fn runs(
    rules: &Rules,
    form: &MatrixForm,
    (x_f16, x_round_f16, x_round_int8): (bool, bool, bool),
    room: Room,
) -> String {
    let mut runs: Vec<(u32, u32, String)> = Vec::new();
    let mut workspaces = Vec::new();
    for m in MS {
        let p = GemvParams {
            x_f16,
            x_round_f16,
            x_round_int8,
            ..GemvParams::dense(m, form.shape.k as u64, form.shape.n as u64)
        };
        let choice = match decide(rules, form, &p, room) {
            Ok(c) => {
                if c.workspace_bytes > 0 {
                    workspaces.push((m, c.workspace_bytes));
                }
                written(&c)
            }
            Err(e) => format!("{e:?}"),
        };
        match runs.last_mut() {
            Some((_, last, c)) if *c == choice => *last = m,
            _ => runs.push((m, m, choice)),
        }
    }
    runs.iter()
        .map(|(a, b, c)| match a == b {
            true => format!("{a}: {c}"),
            false => format!("{a}-{b}: {c}"),
        })
        .collect::<Vec<_>>()
        .join(" | ")
        + &written_workspaces(&workspaces)
}

/// The workspace bytes at each m that has one (`(m, bytes)`), as the record writes them:
/// `ws B·m` where every m has B bytes per activation row, else `ws m:bytes …`.
fn written_workspaces(workspaces: &[(u32, u64)]) -> String {
    let Some(&(m0, b0)) = workspaces.first() else {
        return String::new();
    };
    let per_row = b0 / u64::from(m0);
    if workspaces.iter().all(|&(m, b)| b == per_row * u64::from(m)) {
        return format!(" || ws {per_row}·m");
    }
    let each: Vec<String> = workspaces.iter().map(|(m, b)| format!("{m}:{b}")).collect();
    format!(" || ws {}", each.join(" "))
}

/// The letters of the flags that are set, in order (`-` for none).
fn flags(set: &[(bool, char)]) -> String {
    let s: String = set.iter().filter(|(on, _)| *on).map(|(_, c)| *c).collect();
    match s.is_empty() {
        true => "-".into(),
        false => s,
    }
}

/// The flags the SIMT kernels' keys share: zero points, f32 scales, f16 x, offsets, x
/// gathered through the column order.
fn simt_form(
    zeros: bool,
    f32_scales: bool,
    x_f16: bool,
    offsets: bool,
    gathers: bool,
) -> Vec<(bool, char)> {
    [
        (zeros, 'z'),
        (f32_scales, 's'),
        (x_f16, 'h'),
        (offsets, 'o'),
        (gathers, 'k'),
    ]
    .to_vec()
}

/// The fragment tiles of the tensor-core GEMMs through shared memory as the record writes
/// them: shape, workgroup, row tiles, column tiles.
fn tiles_written(t: &FragmentTiles) -> String {
    let s = t.shape;
    format!(
        "{}x{}x{} wg{} r{} c{}",
        s.m, s.n, s.k, t.workgroup, t.row_tiles, t.col_tiles
    )
}

/// A choice as the record writes it (the module's doc says how).
fn written(c: &Choice) -> String {
    let kernel = match c.kernel {
        KernelChoice::SimtGemv { key: k, last } => format!(
            "gemv(wg{}{} {})",
            k.workgroup,
            // The last pass where its variant differs from a full pass's (beyond its rows).
            match last.decode_once == k.decode_once {
                true => "",
                false => " last-per-row",
            },
            flags(
                &[
                    simt_form(k.zeros, k.scale_f32, k.x_f16, k.offsets, k.k_order),
                    [
                        (k.dot, 'd'),
                        (k.x_bytes, 'b'),
                        (k.portable, 'p'),
                        (k.decode_once, 'w'),
                        (k.word_lanes, 'l'),
                    ]
                    .to_vec(),
                ]
                .concat()
            )
        ),
        KernelChoice::BlocksGemv { key: k, .. } => format!(
            "blocks({} wg{} r{} {})",
            k.ty.name(),
            k.workgroup,
            k.rows,
            flags(&[
                (k.x_f16, 'h'),
                (k.portable, 'p'),
                (k.word_lanes, 'l'),
                (k.dot, 'd')
            ])
        ),
        KernelChoice::BlocksGemm(k) => format!(
            "blocks-gemm({} {}x{}x{}x{} k{} {})",
            k.ty.name(),
            k.tile.tx,
            k.tile.ty,
            k.tile.rn,
            k.tile.rm,
            k.ksplit,
            flags(&[(k.x_f16, 'h')])
        ),
        KernelChoice::BlocksTiles(k) => format!(
            "blocks-tgemm({} {} {})",
            k.ty.name(),
            tiles_written(&k.tiles),
            flags(&[(k.tiles.x_f16, 'h')])
        ),
        KernelChoice::BlocksFrag(k) => format!(
            "blocks-fgemm({} {}x{}x{} k{} g{} {})",
            k.ty.name(),
            k.shape.tiles,
            k.shape.subgroups,
            k.shape.tokens,
            k.shape.k_groups,
            k.shape.token_groups,
            flags(&[(k.x_f16, 'h')])
        ),
        KernelChoice::SimtGemm(k) => format!(
            "gemm({}x{}x{}x{} k{} {})",
            k.tile.tx,
            k.tile.ty,
            k.tile.rn,
            k.tile.rm,
            k.ksplit,
            flags(&simt_form(
                k.zeros,
                k.scale_f32,
                k.x_f16,
                k.offsets,
                k.k_order
            ))
        ),
        KernelChoice::CoopTiles(k) => format!(
            "tgemm({} b{} {})",
            tiles_written(&k.tiles),
            k.block,
            flags(&simt_form(
                k.zeros,
                k.scale_f32,
                k.tiles.x_f16,
                k.offsets,
                k.k_order
            ))
        ),
        KernelChoice::CoopGemv(k) => format!(
            "cgemv({}x{} b{} {})",
            k.tiles,
            k.subgroups,
            k.block,
            flags(&[(k.zeros, 'z'), (k.x_f16, 'h'), (k.offsets, 'o')])
        ),
        KernelChoice::CoopGemm { key: k, slices, .. } => format!(
            "cgemm({},{},{},{},{},{} b{} z{slices} {})",
            k.tiles,
            k.subgroups,
            k.tokens,
            k.ksplit,
            k.b_ahead,
            k.tsplit,
            k.block,
            flags(&[
                (k.zeros, 'z'),
                (k.x_f16, 'h'),
                (k.offsets, 'o'),
                (k.x_fragments, 'f'),
                (k.x_rounded, 'r'),
                (k.k_slices, 'q'),
            ])
        ),
    };
    let prepass = match c.prepass {
        None => String::new(),
        Some(PrepassChoice::Digits(k)) => {
            format!(
                " +digits({})",
                flags(&[
                    (k.x_f16, 'h'),
                    (k.k_order, 'k'),
                    (k.bytes, 'b'),
                    (k.natural, 'n')
                ])
            )
        }
        Some(PrepassChoice::Fragments(g)) => format!(
            " +fragments({}st b{} p{} {})",
            g.stages,
            g.block,
            g.parts,
            flags(&[(g.x_f16, 'h')])
        ),
    };
    kernel + &prepass
}

#[test]
fn the_rules_decide_as_recorded() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/decision-grid.txt");
    let now = grid();
    if std::env::var_os("Q4VK_BLESS_DECISIONS").is_some() {
        std::fs::write(&path, &now).expect("writing the record");
        return;
    }
    let record = std::fs::read_to_string(&path).expect("tests/data/decision-grid.txt");
    if now == record {
        return;
    }
    let actual = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("decision-grid.txt");
    std::fs::write(&actual, &now).expect("writing the decisions");
    let differ: Vec<String> = record
        .lines()
        .zip(now.lines())
        .filter(|(a, b)| a != b)
        .take(5)
        .map(|(a, b)| format!("  recorded: {a}\n  now:      {b}"))
        .collect();
    panic!(
        "the rules decide differently from tests/data/decision-grid.txt ({} lines recorded, {} now); all now in {}; the first that differ:\n{}",
        record.lines().count(),
        now.lines().count(),
        actual.display(),
        differ.join("\n")
    );
}

/// The SIMT GEMV's keys (a full pass, the last pass) on a plain `n` × `k` matrix (group
/// 128, symmetric) at `m` under `rules`, given `room` for a workspace.
fn simt_keys_in(rules: &Rules, n: u64, k: u64, m: u32, room: Room) -> (PipelineKey, PipelineKey) {
    let shape = Q4Shape::new(n, k, 128, 0).unwrap();
    let form = MatrixForm::new(shape, false, false, false, false, 1 << 31).unwrap();
    match decide(rules, &form, &GemvParams::dense(m, k, n), room)
        .unwrap()
        .kernel
    {
        KernelChoice::SimtGemv { key, last } => (key, last),
        other => panic!("{n} x {k} at m = {m} runs {other:?}, not the SIMT GEMV"),
    }
}

/// [`simt_keys_in`] without a workspace.
fn simt_keys(rules: &Rules, n: u64, k: u64, m: u32) -> (PipelineKey, PipelineKey) {
    simt_keys_in(rules, n, k, m, Room::None)
}

/// Whether the SIMT GEMV steps over words on an `n` × `k` matrix at `m` under `rules`.
fn steps_over_words(rules: &Rules, n: u64, k: u64, m: u32) -> bool {
    let (key, last) = simt_keys(rules, n, k, m);
    assert_eq!(
        key.word_lanes, last.word_lanes,
        "one stepping for every pass"
    );
    key.word_lanes
}

/// The integer dot-product GEMV's key (a full pass) on a plain `n` × `k` matrix at `m`
/// under `rules` (which run it), given the workspace it asks for.
fn int_dot_key(rules: &Rules, n: u64, k: u64, m: u32) -> PipelineKey {
    let (key, _) = simt_keys_in(rules, n, k, m, Room::AsNeeded);
    assert!(
        key.dot,
        "{n} x {k} at m = {m} runs {key:?}, not the integer dot-product GEMV"
    );
    key
}

/// On the NVIDIA row the f32 SIMT GEMV steps over words on every matrix: long rows
/// (k ≥ 4096) by the row's long-row shape, short rows by having fewer chunks than its
/// short-row shape's 128 lanes along a row. The integer dot-product GEMV keeps its own
/// shape (2 lanes to a chunk, 64 along a row) and steps over chunks on rows of at least 64
/// chunks. A caller's fixed choice holds on both; the CPU row keeps chunks (one thread per
/// workgroup, no lanes idle).
#[test]
fn short_rows_step_over_words_where_the_row_says() {
    let (_, h200, _) = devices().into_iter().next().unwrap();
    let mut rules = Rules::for_class(h200, false, false);
    // m = 9: two passes (8 + 1), one stepping.
    for m in [1, 2, 8, 9] {
        for (n, k) in [
            (8960, 1536),
            (256, 1984),
            (8192, 3072),
            (4096, 4096),
            (1536, 8960),
        ] {
            assert!(steps_over_words(&rules, n, k, m), "{n} x {k} at m = {m}");
        }
    }
    let dot = Rules::for_class(h200, false, true);
    let key = int_dot_key(&dot, 4096, 8192, 8);
    assert!(!key.word_lanes);
    assert_eq!(
        (key.workgroup, key.rows, key.split, key.unroll),
        (128, 8, 2, 1)
    );
    assert!(!int_dot_key(&dot, 8192, 2048, 8).word_lanes);
    assert!(int_dot_key(&dot, 8192, 1536, 8).word_lanes);
    rules
        .set_overrides(|o| o.simt_gemv_word_lanes = Some(false))
        .unwrap();
    assert!(!steps_over_words(&rules, 8960, 1536, 1));
    assert!(!steps_over_words(&rules, 1536, 8960, 1));
    let (_, lavapipe, _) = devices().into_iter().nth(2).unwrap();
    let cpu = Rules::for_class(lavapipe, false, false);
    assert!(!steps_over_words(&cpu, 8960, 1536, 1));
}

/// The GEMV on `ty` blocks' (rows per workgroup, quarters) on an `n` × `k` matrix at `m`.
fn blocks_shape(rules: &Rules, ty: BlockType, n: usize, k: usize, m: u32) -> (u32, bool) {
    let form = MatrixForm::of_blocks(ty, n, k, 1 << 31).unwrap();
    let p = GemvParams::dense(m, k as u64, n as u64);
    match decide(rules, &form, &p, Room::None).unwrap().kernel {
        KernelChoice::BlocksGemv { key, last } => {
            assert_eq!(key.word_lanes, last.word_lanes, "one stride for every pass");
            (key.rows, key.word_lanes)
        }
        other => panic!(
            "{} at m = {m} runs {other:?}, not the GEMV on blocks",
            ty.name()
        ),
    }
}

/// On the NVIDIA row, each class of block type takes its own shapes: quarters on blocks of
/// 32 where the rows are few, more rows per workgroup where they are many, whole pieces
/// for the super-blocks in one pass; past one pass of pieces (m > 4) quarters of 4 rows but
/// for Q4_K and Q5_K (pieces of 8 rows). A caller's fixed choice holds.
#[test]
fn blocks_shapes_follow_the_type_class_and_the_matrix_height() {
    let (_, h200, _) = devices().into_iter().next().unwrap();
    let mut rules = Rules::for_class(h200, false, false);
    let (few, many) = ((2048, 8192), (28672, 8192));
    let at = |rules: &Rules, ty, (n, k): (usize, usize), m| blocks_shape(rules, ty, n, k, m);
    for m in 1..=4 {
        for ty in [BlockType::Q4_1, BlockType::Q5_0, BlockType::Q8_0] {
            assert_eq!(at(&rules, ty, few, m), (2, true), "{} m {m}", ty.name());
            assert_eq!(at(&rules, ty, many, m), (8, false), "{} m {m}", ty.name());
        }
        for ty in [BlockType::Iq4Nl, BlockType::Iq4Xs, BlockType::Mxfp4] {
            assert_eq!(at(&rules, ty, few, m), (2, true), "{} m {m}", ty.name());
            assert_eq!(at(&rules, ty, many, m), (4, true), "{} m {m}", ty.name());
        }
        for ty in [BlockType::Q4K, BlockType::Q5K, BlockType::Q6K] {
            for shape in [few, many] {
                assert_eq!(at(&rules, ty, shape, m), (4, false), "{} m {m}", ty.name());
            }
        }
    }
    for m in 5..=9 {
        for shape in [few, many] {
            assert_eq!(at(&rules, BlockType::Q6K, shape, m), (4, true));
            assert_eq!(at(&rules, BlockType::Q8_0, shape, m), (4, true));
            assert_eq!(at(&rules, BlockType::Iq4Nl, shape, m), (4, true));
            assert_eq!(at(&rules, BlockType::Q4K, shape, m), (8, false));
        }
    }
    rules
        .set_overrides(|o| {
            o.blocks_gemv_word_lanes = Some(false);
            o.blocks_gemv_rows = Some(1);
        })
        .unwrap();
    assert_eq!(at(&rules, BlockType::Q6K, few, 8), (1, false));
    assert_eq!(at(&rules, BlockType::Q8_0, many, 1), (1, false));
}

/// The SIMT GEMV key's (rows per workgroup, split) on an `n` × `k` matrix at m = 1.
fn simt_rows(rules: &Rules, n: u64, k: u64) -> (u32, u32) {
    let (key, _) = simt_keys(rules, n, k, 1);
    (key.rows, key.split)
}

/// A tuned shape for long rows (`Rules::set_simt_class`) serves matrices of k ≥ 4096 only;
/// shorter rows keep the other.
#[test]
fn long_rows_take_their_own_shape() {
    let (_, h200, _) = devices().into_iter().next().unwrap();
    let mut rules = Rules::for_class(h200, false, false);
    let table = (rules.simt().rows, rules.simt().split);
    let long_rows = q4vk::vk::pipeline::Tuning::for_device(
        false,
        &q4vk::plan::tuning::SimtGemv {
            workgroup: 128,
            rows: 2,
            unroll: 1,
            split: 1,
            word_lanes: false,
        },
        32,
        32,
    );
    rules.set_simt_class(true, long_rows);
    assert_eq!(simt_rows(&rules, 1536, 8960), (2, 1));
    assert_eq!(simt_rows(&rules, 4096, 4096), (2, 1));
    assert_eq!(simt_rows(&rules, 4096, 3968), table);
    assert_eq!(simt_rows(&rules, 8960, 1536), table);
}
