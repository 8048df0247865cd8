//! Tuning on the device (`q4vk_context_tune`, `vk::tune`) on the system's Vulkan device
//! (lavapipe in CI), validation on: a short run times the table's shape and some
//! neighbours and writes a blob; a context given the blob runs the chosen shape (the plan
//! says so) and matches the f64 reference; a blob that is corrupted, truncated, of another
//! device or driver is ignored with the reason in the log and the table's shape runs; bad
//! arguments are refused before anything runs and write nothing; a caller of an older,
//! shorter info gets its prefix only.

mod gpu_support;
use gpu_support::blocks::*;
use gpu_support::*;
use q4vk::cpu::reference::gemv_dense;
use q4vk::ffi::context::*;
use q4vk::ffi::gemv::*;
use q4vk::ffi::matrix::q4vk_matrix_create;
use q4vk::ffi::matrix::q4vk_matrix_destroy;
use q4vk::ffi::status::*;
use q4vk::ffi::tune::*;
use q4vk::import::gguf_blocks::BlockType;
use q4vk::plan::blocks_gemv::BlocksGemvShape;
use q4vk::plan::tuned::{SimtGroup, TunedBlob, TUNED_BLOCKS_CLASS};
use q4vk::plan::tuned_gemm::{GemmTilesAt, TunedGemms};
use q4vk::plan::tuning::SimtGemv;
use q4vk::plan::GemmTile;
use std::ffi::{c_char, c_void, CStr};
use std::sync::Mutex;

/// Every message of the contexts made by `logged_context`, INFO included.
static MESSAGES: Mutex<Vec<String>> = Mutex::new(Vec::new());

unsafe extern "C" fn keep(_: *mut c_void, level: u32, message: *const c_char) {
    let text = CStr::from_ptr(message).to_string_lossy().into_owned();
    if level <= Q4VK_LOG_WARN {
        assert!(!fails_test(&text), "{text}");
    }
    MESSAGES.lock().unwrap().push(text);
}

/// Makes a context's desc log everything up to INFO into [`MESSAGES`] and take `blob` as
/// its tuning blob.
fn logged(blob: &[u8]) -> impl FnOnce(&mut q4vk_context_desc) + '_ {
    move |desc| {
        desc.log = Some(keep);
        desc.log_level = Q4VK_LOG_INFO;
        desc.tuning_data = blob.as_ptr().cast();
        desc.tuning_size = blob.len();
    }
}

/// Held while a logged context is created: its tuning-blob line is then the only one
/// logged meanwhile (the tests run in parallel and share [`MESSAGES`]).
static CREATING: Mutex<()> = Mutex::new(());

thread_local! {
    /// The tuning-blob line of the last context this thread made with [`created`].
    static BLOB_LINE: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// The context `create` makes, with its tuning-blob line kept for [`blob_line`].
fn created(create: impl FnOnce() -> Gpu) -> Gpu {
    let _alone = CREATING.lock().unwrap_or_else(|e| e.into_inner());
    let from = MESSAGES.lock().unwrap().len();
    let gpu = create();
    let line = MESSAGES.lock().unwrap()[from..]
        .iter()
        .rev()
        .find(|m| m.starts_with("tuning blob"))
        .cloned()
        .unwrap_or_default();
    BLOB_LINE.with(|l| *l.borrow_mut() = line);
    gpu
}

/// A validated context on the system's device with `blob` as its tuning blob, logging
/// everything up to INFO into [`MESSAGES`].
fn logged_context(blob: &[u8]) -> Gpu {
    created(|| Gpu::with(false, logged(blob)).expect("q4vk_context_create"))
}

/// [`logged_context`] that runs the integer dot-product GEMV on every call given a
/// workspace where the device has packed 8-bit dot products, accelerated or not
/// (`Q4VK_INTDOT=1`).
fn logged_int_dot_context(blob: &[u8]) -> Gpu {
    created(|| Gpu::with_env_and("Q4VK_INTDOT", "1", false, logged(blob)))
}

/// The tuning-blob line of the last context this thread made (empty where it logged
/// none).
fn blob_line() -> String {
    BLOB_LINE.with(|l| l.borrow().clone())
}

/// A short tuning run's desc: `shapes`, `ms`, 1 MiB of copies, no prefill m.
fn small_desc(budget_ms: u32, shapes: &[u64], ms: &[u32]) -> q4vk_tune_desc {
    let mut d = unsafe { std::mem::zeroed::<q4vk_tune_desc>() };
    unsafe { q4vk_tune_desc_default(&mut d) };
    d.budget_ms = budget_ms;
    d.shape_count = (shapes.len() / 2) as u32;
    d.shapes = shapes.as_ptr();
    d.m_count = ms.len() as u32;
    d.ms = ms.as_ptr();
    d.cold_bytes = 1 << 20;
    d.prefill_m_count = 0;
    d
}

/// `q4vk_context_tune` on `gpu` with `desc` into all of `blob`, `info` as given (NULL or
/// writable for its `struct_size`).
fn tune_into(
    gpu: &Gpu,
    desc: &q4vk_tune_desc,
    blob: &mut [u8],
    written: &mut usize,
    info: *mut q4vk_tune_info,
) -> q4vk_status {
    // SAFETY: live context, readable desc, writable blob of its length and written; info
    // as the caller says.
    unsafe {
        q4vk_context_tune(
            gpu.ctx,
            desc,
            blob.as_mut_ptr().cast(),
            blob.len(),
            written,
            info,
        )
    }
}

/// `q4vk_context_tune` on `gpu` with `desc` into a blob of the largest size and a whole
/// info, checked to succeed: the blob (its written bytes) and the info.
fn tuned(gpu: &Gpu, desc: &q4vk_tune_desc) -> (Vec<u8>, q4vk_tune_info) {
    let mut blob = vec![0u8; Q4VK_TUNING_BLOB_MAX_BYTES];
    let mut written = 0usize;
    let mut info = unsafe { std::mem::zeroed::<q4vk_tune_info>() };
    info.struct_size = std::mem::size_of::<q4vk_tune_info>() as u32;
    let status = tune_into(gpu, desc, &mut blob, &mut written, &mut info);
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    assert!(written > 0 && written <= blob.len());
    blob.truncate(written);
    (blob, info)
}

/// The plan's shape source of an m = 1 GEMV on a fresh matrix of 200 × `k` on `gpu`, after
/// checking the GEMV against the reference at m = 1 and 3.
fn checked_plan_at(gpu: &Gpu, k: usize) -> u32 {
    let mut rng = Rng(0x7u64);
    let d = random_q4(&mut rng, 200, k, 128, true, false);
    let mat = upload_q4(gpu, &d);
    for m in [1usize, 3] {
        let x = rng.vec(m * k);
        assert!(check_gemv(gpu, mat, &d, &x, m) < 1e-5, "m {m}");
    }
    let mut info = unsafe { std::mem::zeroed::<q4vk_gemv_plan_info>() };
    info.struct_size = std::mem::size_of::<q4vk_gemv_plan_info>() as u32;
    let status = unsafe { q4vk_gemv_plan(gpu.ctx, mat, 1, 0, 0, &mut info) };
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    unsafe { q4vk_matrix_destroy(mat) };
    info.shape_source
}

/// [`checked_plan_at`] on a matrix of short rows, then of long rows: the plan's shape
/// source, the same for both.
fn checked_plan(gpu: &Gpu) -> u32 {
    let short = checked_plan_at(gpu, 512);
    assert_eq!(checked_plan_at(gpu, 4096), short, "long rows");
    short
}

/// The SIMT GEMV shapes `gpu`'s context runs per group of calls (`SimtGroup::index`):
/// workgroup, rows, unroll, split, word lanes.
fn shape_of(gpu: &Gpu) -> [[u32; 5]; 8] {
    gpu.context()
        .rules
        .simt_groups
        .map(|t| [t.workgroup, t.rows, t.unroll, t.split, t.word_lanes.into()])
}

/// The fields of a `q4vk_simt_gemv_shape` in [`shape_of`]'s order.
fn fields(s: &q4vk_simt_gemv_shape) -> [u32; 5] {
    [s.workgroup, s.rows, s.unroll, s.split, s.word_lanes]
}

/// The plan names of an m = 1 and an m = 3 GEMV on a fresh matrix of `n` × `k` on `gpu`.
fn plan_names(gpu: &Gpu, n: usize, k: usize) -> [String; 2] {
    let mut rng = Rng(0x7u64);
    let d = random_q4(&mut rng, n, k, 128, true, false);
    let mat = upload_q4(gpu, &d);
    let names = [1, 3].map(|m| plan_of(gpu.ctx, mat, m, 0, 0).1);
    unsafe { q4vk_matrix_destroy(mat) };
    names
}

#[test]
fn a_tuned_blob_is_used_by_the_next_context_and_a_bad_one_is_not() {
    let gpu = logged_context(&[]);
    // A matrix of short rows and one of long rows, both of few rows.
    let shapes = [96u64, 1024, 32, 4096];
    let ms = [1u32, 2];
    let desc = small_desc(1500, &shapes, &ms);
    let (blob, info) = tuned(&gpu, &desc);
    assert_eq!(
        (
            info.long_rows_from_k,
            info.many_rows_from,
            info.simt_group_count
        ),
        (4096, 4096, 8)
    );
    let table = [
        info.table_workgroup,
        info.table_rows,
        info.table_unroll,
        info.table_split,
        info.table_word_lanes,
    ];
    let long_rows_table = [
        info.long_rows_table_workgroup,
        info.long_rows_table_rows,
        info.long_rows_table_unroll,
        info.long_rows_table_split,
        info.long_rows_table_word_lanes,
    ];
    let mut timed = 0;
    for (i, g) in info.simt_groups.iter().enumerate() {
        eprintln!(
            "group {i} (long rows {}, many rows {}, m = 1 {}): {:?} at {:.3} of the table's {:?}, {} timed",
            g.long_rows,
            g.many_rows,
            g.decode,
            fields(&g.shape),
            g.time_vs_table,
            fields(&g.table_shape),
            g.candidates_timed
        );
        let group = SimtGroup::ALL[i];
        assert_eq!(
            (g.long_rows, g.many_rows, g.decode),
            (
                group.long_rows.into(),
                group.many_rows.into(),
                group.decode.into()
            )
        );
        let class_table = match group.long_rows {
            true => long_rows_table,
            false => table,
        };
        assert_eq!(fields(&g.table_shape), class_table, "group {i}");
        assert_eq!((g.shape.reserved, g.table_shape.reserved), (0, 0));
        assert!(g.time_vs_table > 0.0 && g.time_vs_table <= 1.0, "group {i}");
        // The desc's matrices have few rows: the groups of many rows have no calls.
        match group.many_rows {
            true => assert_eq!(
                (g.candidates_timed, fields(&g.shape), g.time_vs_table),
                (0, class_table, 1.0),
                "group {i}"
            ),
            false => assert!(g.candidates_timed >= 1, "group {i}"),
        }
        timed += g.candidates_timed;
    }
    assert_eq!(info.candidates_timed, timed);
    assert!(info.candidates_timed <= info.candidates);
    // The first fields repeat the groups of few rows at m > 1.
    let [short, long] = [0, 1].map(|i| &info.simt_groups[i]);
    assert_eq!(
        (
            [
                info.workgroup,
                info.rows,
                info.unroll,
                info.split,
                info.word_lanes
            ],
            info.time_vs_table
        ),
        (fields(&short.shape), short.time_vs_table)
    );
    assert_eq!(
        (
            [
                info.long_rows_workgroup,
                info.long_rows_rows,
                info.long_rows_unroll,
                info.long_rows_split,
                info.long_rows_word_lanes
            ],
            info.long_rows_time_vs_table
        ),
        (fields(&long.shape), long.time_vs_table)
    );
    let tables: [[u32; 5]; 8] = SimtGroup::ALL.map(|g| match g.long_rows {
        true => long_rows_table,
        false => table,
    });
    assert_eq!(shape_of(&gpu), tables);
    assert_eq!(info.reserved0, 0);
    assert_eq!(checked_plan(&gpu), Q4VK_GEMV_SHAPE_TABLE);
    drop(gpu);

    // The next context takes the blob's shapes.
    let tuned = logged_context(&blob);
    assert!(blob_line().contains("used"), "{}", blob_line());
    assert_eq!(checked_plan(&tuned), Q4VK_GEMV_SHAPE_TUNED);
    assert_eq!(shape_of(&tuned), info.simt_groups.map(|g| fields(&g.shape)));
    drop(tuned);

    // Shapes other than the table's run right too, each on its group: the blob of the
    // neighbour most unlike the table's for short rows and another per group of long
    // rows (re-encoded for this device).
    let decoded = TunedBlob::decode(&blob, &device_identity()).unwrap();
    let unlike = q4vk::plan::tuning::SimtGemv {
        workgroup: 64.max(info.table_workgroup / 2),
        rows: 2,
        unroll: 2,
        split: 2,
        word_lanes: info.table_word_lanes == 0,
    };
    let with = |workgroup, rows| q4vk::plan::tuning::SimtGemv {
        workgroup,
        rows,
        split: 1,
        unroll: 1,
        ..unlike
    };
    // By group: long rows, many rows, m = 1 in its bits.
    let other = TunedBlob {
        simt_gemv: [
            unlike,
            with(64, 1),
            with(64, 4),
            with(128, 2),
            with(128, 8),
            with(256, 8),
            with(64, 16),
            with(512, 4),
        ],
        ..decoded
    };
    let forced = logged_context(&other.encode());
    assert!(
        blob_line().contains("used: SIMT GEMV on short rows, few rows, m > 1 workgroup"),
        "{}",
        blob_line()
    );
    assert_eq!(checked_plan(&forced), Q4VK_GEMV_SHAPE_TUNED);
    let shapes = shape_of(&forced);
    assert_eq!(shapes[0][4], u32::from(info.table_word_lanes == 0));
    assert_eq!(shapes.map(|s| s[1]), [2, 1, 4, 2, 8, 8, 16, 4]);
    // Long rows (4096 columns) do not shrink the workgroup: the plan names it per group.
    for (n, workgroups) in [(200, [256, 64]), (4096, [512, 128])] {
        let [at_1, at_3] = plan_names(&forced, n, 4096);
        assert!(
            at_1.contains(&format!("workgroup {},", workgroups[0])),
            "{n}: {at_1}"
        );
        assert!(
            at_3.contains(&format!("workgroup {},", workgroups[1])),
            "{n}: {at_3}"
        );
    }
    drop(forced);

    // Corrupted, truncated, foreign: ignored with the reason, the table's shape runs.
    let mut corrupted = blob.clone();
    corrupted[62] ^= 0x40;
    let foreign = TunedBlob {
        identity: q4vk::plan::tuned::DeviceIdentity {
            device: decoded.identity.device ^ 1,
            ..decoded.identity
        },
        ..decoded
    }
    .encode();
    let newer_driver = TunedBlob {
        identity: q4vk::plan::tuned::DeviceIdentity {
            driver: decoded.identity.driver.wrapping_add(1),
            ..decoded.identity
        },
        ..decoded
    }
    .encode();
    for (bad, why) in [
        (&corrupted[..], "checksum"),
        (&blob[..40], "bytes"),
        (&foreign[..], "made on device"),
        (&newer_driver[..], "driver version"),
    ] {
        let gpu = logged_context(bad);
        let line = blob_line();
        assert!(line.contains("ignored") && line.contains(why), "{line}");
        assert_eq!(checked_plan(&gpu), Q4VK_GEMV_SHAPE_TABLE);
    }
}

/// The plan of an m-row call on a fresh Q4 matrix of 200 × 256 on `gpu` (its shape source
/// and name), after checking the call against the f64 reference.
fn checked_gemm_plan(gpu: &Gpu, m: usize) -> (u32, String) {
    let mut rng = Rng(0x9E);
    let d = random_q4(&mut rng, 200, 256, 128, true, false);
    let mat = upload_q4(gpu, &d);
    let x = rng.vec(m * 256);
    assert!(check_gemv(gpu, mat, &d, &x, m) < 1e-5, "m {m}");
    let (info, name) = plan_of(gpu.ctx, mat, m, 0, 0);
    unsafe { q4vk_matrix_destroy(mat) };
    (info.shape_source, name)
}

/// The tiles of the SIMT GEMM and of the GEMM on GGUF blocks at prefill m: tuning times
/// each at m = 16 and 32 where the context runs it there without a workspace (the row's
/// tile is the baseline; a context whose GEMM there is another, such as a tensor-core one,
/// reports no entries); a blob with other tiles from m = 16 and the row's from m = 40 makes
/// the next context run them from m = 16 to 39 (the plan says so; the GEMMs match the
/// reference) and the row's elsewhere; a blob with a tile the device cannot run is ignored
/// with the reason.
#[test]
fn tuned_gemm_tiles_are_used_by_the_next_context() {
    let gpu = logged_context(&[]);
    let shapes = [64u64, 256];
    let prefill = [32u32, 16];
    let mut desc = small_desc(3000, &shapes, &[1]);
    desc.prefill_m_count = prefill.len() as u32;
    desc.prefill_ms = prefill.as_ptr();
    let (blob, info) = tuned(&gpu, &desc);
    let (source, name) = checked_gemm_plan(&gpu, 16);
    assert_eq!(source, Q4VK_GEMV_SHAPE_TABLE, "{name}");
    let runs_simt_gemm = name.starts_with("SIMT GEMM");
    let (source, blocks_name) = checked_blocks_plan(&gpu, 16);
    assert_eq!(source, Q4VK_GEMV_SHAPE_TABLE, "{blocks_name}");
    let runs_blocks_gemm = blocks_name.starts_with("GEMM on GGUF Q4_K blocks");
    assert_eq!((info.reserved2, info.reserved3), (0, 0));
    let row = gpu.context().rules.row;
    let kernels = [
        (
            info.gemm_count,
            &info.gemm,
            runs_simt_gemm,
            &row.simt_gemm_tiles,
        ),
        (
            info.blocks_gemm_count,
            &info.blocks_gemm,
            runs_blocks_gemm,
            &row.blocks_gemm_tiles,
        ),
    ];
    for (count, entries, runs, tiles) in kernels {
        eprintln!("{count} entries: {:?}", &entries[..count as usize]);
        assert_eq!(count, if runs { 2 } else { 0 }, "{name} / {blocks_name}");
        for (g, m) in entries[..count as usize].iter().zip([16, 32]) {
            assert_eq!(g.m, m);
            assert_eq!(g.table_tile, tiles.for_m(m).into());
            assert!(g.candidates_timed >= 1);
            assert!(g.time_vs_table > 0.0 && g.time_vs_table <= 1.0);
            assert!(g.time_vs_table < 1.0 || g.tile == g.table_tile);
        }
        assert!(entries[count as usize..]
            .iter()
            .all(|g| *g == q4vk_tuned_gemm::default()));
    }
    drop(gpu);

    let decoded = TunedBlob::decode(&blob, &device_identity()).unwrap();
    let at_16 = decoded.gemm.entries().iter().find(|g| g.m == 16).unwrap();
    let chosen = |count: u32, g: &q4vk_tuned_gemm| count > 0 && g.time_vs_table < 1.0;
    assert_eq!(at_16.simt.is_some(), chosen(info.gemm_count, &info.gemm[0]));
    assert_eq!(
        at_16.blocks.is_some(),
        chosen(info.blocks_gemm_count, &info.blocks_gemm[0])
    );
    let tile = |tx, ty, rn, rm| GemmTile { tx, ty, rn, rm };
    let (simt, blocks) = (tile(8, 8, 4, 4), tile(8, 8, 4, 8));
    let with_tiles = |simt: GemmTile, blocks: GemmTile| {
        let kept = GemmTilesAt {
            m: 40,
            simt: None,
            simt_time_vs_table: 1.0,
            blocks: None,
            blocks_time_vs_table: 1.0,
        };
        let chosen = GemmTilesAt {
            m: 16,
            simt: Some(simt),
            simt_time_vs_table: 0.9,
            blocks: Some(blocks),
            blocks_time_vs_table: 0.8,
        };
        TunedBlob {
            gemm: TunedGemms::new(&[kept, chosen]).unwrap(),
            ..decoded
        }
        .encode()
    };
    let forced = logged_context(&with_tiles(simt, blocks));
    let line = blob_line();
    assert!(
        line.contains("from m = 16 tile (8, 8, 4, 4) (0.900 of the table's time), on GGUF blocks tile (8, 8, 4, 8) (0.800 of the table's time); from m = 40 the table's tile, on GGUF blocks the table's tile"),
        "{line}"
    );
    for m in [12, 16, 39, 40, 48] {
        let tuned_here = (16..40).contains(&m);
        for (runs, (source, name), tile_name) in [
            (
                runs_simt_gemm,
                checked_gemm_plan(&forced, m),
                "tile 8x8x4x4",
            ),
            (
                runs_blocks_gemm,
                checked_blocks_plan(&forced, m),
                "tile 8x8x4x8",
            ),
        ] {
            let tuned = runs && tuned_here;
            assert_eq!(name.contains(tile_name), tuned, "m = {m}: {name}");
            let want = match tuned {
                true => Q4VK_GEMV_SHAPE_TUNED,
                false => Q4VK_GEMV_SHAPE_TABLE,
            };
            assert_eq!(source, want, "m = {m}: {name}");
        }
    }
    drop(forced);

    // A tile of 2048 invocations: no device in CI runs it.
    let wide = tile(64, 32, 4, 4);
    for (simt, blocks, what) in [
        (wide, blocks, "its SIMT GEMM tile"),
        (simt, wide, "its GEMM on GGUF blocks tile"),
    ] {
        let refused = logged_context(&with_tiles(simt, blocks));
        let line = blob_line();
        assert!(
            line.contains("ignored")
                && line.contains(what)
                && line.contains("does not run on this device"),
            "{line}"
        );
        assert_eq!(checked_gemm_plan(&refused, 16).0, Q4VK_GEMV_SHAPE_TABLE);
        assert_eq!(checked_blocks_plan(&refused, 16).0, Q4VK_GEMV_SHAPE_TABLE);
    }
}

/// The plan of an m-row GEMV on a Q4_K matrix of 70 × 1024 on `gpu` (its shape source and
/// name), after checking the GEMV against the f64 reference of its dequantized weights.
fn checked_blocks_plan(gpu: &Gpu, m: usize) -> (u32, String) {
    checked_plan_on(gpu, BlockType::Q4K, m)
}

/// As [`checked_blocks_plan`], on a matrix of `ty` blocks.
fn checked_plan_on(gpu: &Gpu, ty: BlockType, m: usize) -> (u32, String) {
    let mut rng = Rng(0xB7);
    let (n, k) = (70usize, 1024usize);
    let bytes = random_blocks(&mut rng, ty, n, k);
    let desc = blocks_desc(ty, n, k, &bytes);
    let w = dequantized(&desc);
    let mut mat = std::ptr::null_mut();
    let status = unsafe { q4vk_matrix_create(gpu.ctx, &desc, &mut mat) };
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    let x = rng.vec(m * k);
    let (status, y) = gemv_c(gpu.ctx, mat, &x, n, m);
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    assert_close(
        &y,
        &gemv_dense(&w, &x, n, k, m),
        &format!("{}, m = {m}", ty.name()),
    );
    let (info, name) = plan_of(gpu.ctx, mat, m, 0, 0);
    unsafe { q4vk_matrix_destroy(mat) };
    (info.shape_source, name)
}

/// A logged context given `blob` with its shape of the GEMV on GGUF blocks replaced by
/// `shape`, after checking the log says how it took it (`said`).
fn context_with_blocks_shape(blob: &TunedBlob, shape: BlocksGemvShape, said: &str) -> Gpu {
    let gpu = logged_context(
        &TunedBlob {
            blocks_gemv: shape,
            ..*blob
        }
        .encode(),
    );
    let line = blob_line();
    assert!(line.contains(said), "{line}");
    gpu
}

/// The GEMV on GGUF blocks' shape for calls of up to 4 rows: tuned on a shape of whole Q4_K
/// blocks at m = 1 (the row's shape is its baseline); a blob with another shape (pieces per
/// step, or quarters) makes the next context run it in calls of one pass (the plan says so;
/// the GEMV matches the reference), not in calls of several; a blob with a shape the GEMV
/// does not take is ignored.
#[test]
fn a_tuned_blocks_shape_is_used_by_the_next_context() {
    let gpu = logged_context(&[]);
    let shapes = [96u64, 1024];
    let desc = small_desc(1500, &shapes, &[1]);
    let (blob, info) = tuned(&gpu, &desc);
    eprintln!(
        "blocks: {} rows, {} pieces per step at {:.3} of the table's {} rows, {} pieces ({} timed)",
        info.blocks_rows,
        info.blocks_unroll,
        info.blocks_time_vs_table,
        info.blocks_table_rows,
        info.blocks_table_unroll,
        info.blocks_candidates_timed
    );
    // The row's shape of the tuned class, at both heights.
    let row = gpu.context().rules.row.blocks_gemv.of(TUNED_BLOCKS_CLASS);
    for s in [row.few_rows, row.many_rows] {
        assert_eq!(
            (info.blocks_table_rows, info.blocks_table_unroll),
            (s.rows, s.unroll)
        );
    }
    assert!(info.blocks_candidates_timed >= 1 && info.blocks_candidates_timed <= 16);
    assert!(info.blocks_time_vs_table > 0.0 && info.blocks_time_vs_table <= 1.0);
    assert!(info.blocks_word_lanes <= 1);
    assert_eq!(checked_blocks_plan(&gpu, 1).0, Q4VK_GEMV_SHAPE_TABLE);
    drop(gpu);

    let decoded = TunedBlob::decode(&blob, &device_identity()).unwrap();
    assert_eq!(
        (
            decoded.blocks_gemv.rows,
            decoded.blocks_gemv.unroll,
            u32::from(decoded.blocks_gemv.word_lanes)
        ),
        (info.blocks_rows, info.blocks_unroll, info.blocks_word_lanes)
    );
    let shape = BlocksGemvShape {
        rows: 4,
        unroll: 2,
        word_lanes: false,
    };
    let forced = context_with_blocks_shape(
        &decoded,
        shape,
        "GEMV on GGUF blocks 4 rows, 2 pieces per step",
    );
    // The tuned class takes the blob's shape at every height; the others keep the row's.
    let rules = &forced.context().rules;
    let tuned = rules.blocks_gemv.of(TUNED_BLOCKS_CLASS);
    assert_eq!((tuned.few_rows, tuned.many_rows), (shape, shape));
    let row = &rules.row.blocks_gemv;
    assert_eq!(
        (rules.blocks_gemv.runs, rules.blocks_gemv.looked_up),
        (row.runs, row.looked_up)
    );
    let (source, name) = checked_blocks_plan(&forced, 1);
    assert_eq!(source, Q4VK_GEMV_SHAPE_TUNED, "{name}");
    assert!(
        name.contains("4 rows per workgroup") && name.contains("2 pieces per step"),
        "{name}"
    );
    // Q5_K shares the tuned class; Q8_0 and IQ4_NL keep the row's shapes.
    let (source, name) = checked_plan_on(&forced, BlockType::Q5K, 1);
    assert_eq!(source, Q4VK_GEMV_SHAPE_TUNED, "{name}");
    assert!(
        name.contains("4 rows per workgroup") && name.contains("2 pieces per step"),
        "{name}"
    );
    for ty in [BlockType::Q8_0, BlockType::Iq4Nl] {
        let (source, name) = checked_plan_on(&forced, ty, 1);
        assert_eq!(source, Q4VK_GEMV_SHAPE_TABLE, "{} {name}", ty.name());
        assert!(!name.contains("4 rows per workgroup"), "{name}");
    }
    // Three rows in one pass: the tuned rows, one piece per step (the held x's cap).
    let (source, name) = checked_blocks_plan(&forced, 3);
    assert_eq!(source, Q4VK_GEMV_SHAPE_TUNED, "{name}");
    assert!(!name.contains("pieces per step"), "{name}");
    // Two passes: the row's rows for several passes.
    assert_eq!(checked_blocks_plan(&forced, 6).0, Q4VK_GEMV_SHAPE_TABLE);
    drop(forced);

    // Quarters of pieces with 8 rows per workgroup.
    let quarters = BlocksGemvShape {
        rows: 8,
        unroll: 1,
        word_lanes: true,
    };
    let forced =
        context_with_blocks_shape(&decoded, quarters, "GEMV on GGUF blocks 8 rows, quarters");
    for m in [1, 4] {
        let (source, name) = checked_blocks_plan(&forced, m);
        assert_eq!(source, Q4VK_GEMV_SHAPE_TUNED, "{name}");
        assert!(
            name.contains("8 rows per workgroup") && name.contains("word lanes"),
            "{name}"
        );
    }
    drop(forced);

    let odd = BlocksGemvShape {
        rows: 3,
        unroll: 1,
        word_lanes: false,
    };
    let gpu = context_with_blocks_shape(&decoded, odd, "not a shape it takes");
    assert!(blob_line().contains("ignored"), "{}", blob_line());
    let rules = &gpu.context().rules;
    assert_eq!(rules.blocks_gemv, rules.row.blocks_gemv);
}

/// The plan of an m-row GEMV given the workspace it asks on a fresh matrix of 200 × 2048 on
/// `gpu` (its shape source and name), after checking `q4vk_gemv` (which gives itself that
/// workspace) against the reference.
fn checked_int_dot_plan(gpu: &Gpu, m: usize) -> (u32, String) {
    let mut rng = Rng(0x1D07);
    // Rows of 64 chunks: a workgroup of 64 is not shrunk to fewer.
    let (n, k) = (200usize, 2048usize);
    let d = random_q4(&mut rng, n, k, 128, true, false);
    let mat = upload_q4(gpu, &d);
    let x = rng.vec(m * k);
    assert!(check_gemv(gpu, mat, &d, &x, m) < 1e-5, "m {m}");
    let (info, name) = plan_of(gpu.ctx, mat, m, 0, u64::MAX);
    unsafe { q4vk_matrix_destroy(mat) };
    assert_eq!(info.kernel, Q4VK_GEMV_KERNEL_INT_DOT_GEMV, "{name}");
    (info.shape_source, name)
}

/// The integer dot-product GEMV's shape: tuned (its digits pre-pass included) on the calls
/// that run it, with the row's rules as the baseline; a blob with another shape makes the
/// next context run it on every call given a workspace (the plan says so; the GEMV matches
/// the reference) while the f32 GEMV keeps its own; a blob with a shape the device does not
/// run is ignored. On a device without packed 8-bit dot products nothing is timed and the
/// row's shape is kept.
#[test]
fn a_tuned_int_dot_shape_is_used_by_the_next_context() {
    let gpu = logged_int_dot_context(&[]);
    let runs_int_dot = gpu.context().rules.int_dot;
    assert_eq!(runs_int_dot, gpu.context().device.int_dot.is_some());
    let shapes = [200u64, 512];
    let desc = small_desc(3000, &shapes, &[1, 3]);
    let (blob, info) = tuned(&gpu, &desc);
    let chosen = [
        info.int_dot_workgroup,
        info.int_dot_rows,
        info.int_dot_unroll,
        info.int_dot_split,
        info.int_dot_word_lanes,
    ];
    let table = [
        info.int_dot_table_workgroup,
        info.int_dot_table_rows,
        info.int_dot_table_unroll,
        info.int_dot_table_split,
        info.int_dot_table_word_lanes,
    ];
    eprintln!(
        "integer dot-product GEMV: {chosen:?} at {:.3} of the table's {table:?} ({} timed)",
        info.int_dot_time_vs_table, info.int_dot_candidates_timed
    );
    let rules = &gpu.context().rules;
    let row_shape = rules
        .row
        .int_dot_gemv
        .unwrap_or(*rules.row.short_rows_simt_gemv());
    assert_eq!(
        table,
        [
            row_shape.workgroup,
            row_shape.rows,
            row_shape.unroll,
            row_shape.split,
            row_shape.word_lanes.into()
        ]
    );
    assert!(info.int_dot_time_vs_table > 0.0 && info.int_dot_time_vs_table <= 1.0);
    assert_eq!(info.reserved1, 0);
    let decoded = TunedBlob::decode(&blob, &device_identity()).unwrap();
    if !runs_int_dot {
        eprintln!("the device has no packed 8-bit dot products: nothing to time");
        assert_eq!(info.int_dot_candidates_timed, 0);
        assert_eq!((chosen, info.int_dot_time_vs_table), (table, 1.0));
        assert_eq!(decoded.int_dot_gemv, None);
        return;
    }
    assert!(info.int_dot_candidates_timed >= 1);
    match decoded.int_dot_gemv {
        Some(s) => assert_eq!(
            chosen,
            [s.workgroup, s.rows, s.unroll, s.split, s.word_lanes.into()]
        ),
        None => assert_eq!((chosen, info.int_dot_time_vs_table), (table, 1.0)),
    }
    drop(gpu);

    // A blob whose integer dot-product shape is 64 invocations of 2 rows.
    let shape = SimtGemv {
        workgroup: 64,
        rows: 2,
        unroll: 1,
        split: 1,
        word_lanes: false,
    };
    let forced = logged_int_dot_context(
        &TunedBlob {
            int_dot_gemv: Some(shape),
            ..decoded
        }
        .encode(),
    );
    let line = blob_line();
    assert!(
        line.contains("integer dot-product GEMV workgroup 64, 2 rows"),
        "{line}"
    );
    let rules = &forced.context().rules;
    assert!(rules.int_dot_tuned);
    let taken = rules.int_dot_simt.expect("a tuned shape");
    assert_eq!((taken.workgroup, taken.rows), (64, 2));
    for m in [1, 3] {
        let (source, name) = checked_int_dot_plan(&forced, m);
        assert_eq!(source, Q4VK_GEMV_SHAPE_TUNED, "{name}");
        assert!(name.contains("workgroup 64"), "{name}");
    }
    drop(forced);

    // A blob that kept the row's: the row's rules, not marked tuned.
    let kept = logged_int_dot_context(
        &TunedBlob {
            int_dot_gemv: None,
            int_dot_time_vs_table: 1.0,
            ..decoded
        }
        .encode(),
    );
    assert!(blob_line().contains("integer dot-product GEMV the table's"));
    assert!(!kept.context().rules.int_dot_tuned);
    let row = kept.context().rules.row;
    assert_eq!(
        kept.context()
            .rules
            .int_dot_simt
            .map(|t| (t.workgroup, t.rows)),
        row.int_dot_gemv.map(|s| (s.workgroup, s.rows))
    );
    drop(kept);

    // A workgroup no device runs.
    let odd = SimtGemv {
        workgroup: 96,
        ..shape
    };
    let ignored = logged_int_dot_context(
        &TunedBlob {
            int_dot_gemv: Some(odd),
            ..decoded
        }
        .encode(),
    );
    assert!(blob_line().contains("ignored"), "{}", blob_line());
    assert!(!ignored.context().rules.int_dot_tuned);
}

/// The identity of the system's default device, read through a context.
fn device_identity() -> q4vk::plan::tuned::DeviceIdentity {
    let ctx = q4vk::vk::context::Context::new(
        q4vk::vk::context::ContextConfig {
            device_index: -1,
            ..Default::default()
        },
        counting_logger(),
    )
    .unwrap();
    ctx.device.identity()
}

#[test]
fn bad_arguments_are_refused_before_anything_runs() {
    let gpu = logged_context(&[]);
    let ctx = gpu.ctx;
    let shapes = [96u64, 1024];
    let ms = [1u32];
    let mut blob = vec![0xAAu8; Q4VK_TUNING_BLOB_MAX_BYTES];
    let mut written = 7usize;
    let call = |desc: &q4vk_tune_desc, capacity: usize, written: &mut usize, blob: &mut [u8]| unsafe {
        q4vk_context_tune(
            ctx,
            desc,
            blob.as_mut_ptr().cast(),
            capacity,
            written,
            std::ptr::null_mut(),
        )
    };
    let good = small_desc(100, &shapes, &ms);
    let cases: Vec<(q4vk_tune_desc, usize, q4vk_status, &str)> = vec![
        (good, 16, Q4VK_ERROR_BUFFER_TOO_SMALL, "blob_capacity"),
        (
            q4vk_tune_desc {
                budget_ms: 0,
                ..good
            },
            blob.len(),
            Q4VK_ERROR_INVALID_ARGUMENT,
            "budget",
        ),
        (
            q4vk_tune_desc {
                shapes: [96u64, 1000].as_ptr(),
                ..good
            },
            blob.len(),
            Q4VK_ERROR_INVALID_ARGUMENT,
            "multiple of 128",
        ),
        (
            q4vk_tune_desc {
                ms: [9u32].as_ptr(),
                ..good
            },
            blob.len(),
            Q4VK_ERROR_INVALID_ARGUMENT,
            "m values",
        ),
        (
            q4vk_tune_desc {
                struct_size: 8,
                ..good
            },
            blob.len(),
            Q4VK_ERROR_INVALID_ARGUMENT,
            "struct_size",
        ),
        (
            q4vk_tune_desc {
                shapes: std::ptr::null(),
                ..good
            },
            blob.len(),
            Q4VK_ERROR_NULL_POINTER,
            "shapes",
        ),
        (
            q4vk_tune_desc {
                prefill_m_count: 5,
                prefill_ms: [16u32, 32, 64, 128, 256].as_ptr(),
                ..good
            },
            blob.len(),
            Q4VK_ERROR_INVALID_ARGUMENT,
            "prefill_m_count",
        ),
        (
            q4vk_tune_desc {
                prefill_m_count: 1,
                prefill_ms: [8u32].as_ptr(),
                ..good
            },
            blob.len(),
            Q4VK_ERROR_INVALID_ARGUMENT,
            "prefill m values",
        ),
        (
            q4vk_tune_desc {
                prefill_m_count: 2,
                prefill_ms: [64u32, 64].as_ptr(),
                ..good
            },
            blob.len(),
            Q4VK_ERROR_INVALID_ARGUMENT,
            "distinct",
        ),
        (
            q4vk_tune_desc {
                prefill_m_count: 1,
                prefill_ms: std::ptr::null(),
                ..good
            },
            blob.len(),
            Q4VK_ERROR_NULL_POINTER,
            "prefill_ms",
        ),
    ];
    for (desc, capacity, want, why) in cases {
        let status = call(&desc, capacity, &mut written, &mut blob);
        assert_eq!(status, want, "{why}: {}", last_error());
        assert!(last_error().contains(why), "{}", last_error());
        assert_eq!(written, 7, "written on failure ({why})");
        assert!(
            blob.iter().all(|&b| b == 0xAA),
            "blob written on failure ({why})"
        );
    }
    let status = unsafe {
        q4vk_context_tune(
            ctx,
            std::ptr::null(),
            blob.as_mut_ptr().cast(),
            blob.len(),
            &mut written,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(status, Q4VK_ERROR_NULL_POINTER);
    drop(gpu);
    // A CPU context has no GPU kernels to tune.
    let mut desc = unsafe { std::mem::zeroed::<q4vk_context_desc>() };
    unsafe { q4vk_context_desc_default(&mut desc) };
    desc.flags = Q4VK_CONTEXT_CPU;
    let mut cpu = std::ptr::null_mut();
    assert_eq!(unsafe { q4vk_context_create(&desc, &mut cpu) }, Q4VK_OK);
    let status = unsafe {
        q4vk_context_tune(
            cpu,
            &good,
            blob.as_mut_ptr().cast(),
            blob.len(),
            &mut written,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(status, Q4VK_ERROR_UNSUPPORTED, "{}", last_error());
    unsafe { q4vk_context_destroy(cpu) };
}

/// A caller built against the info before the long-rows fields (its `struct_size` ends at
/// `table_word_lanes`) gets those fields and nothing past them.
#[test]
fn an_older_info_gets_only_its_prefix() {
    let gpu = logged_context(&[]);
    let shapes = [96u64, 1024];
    let ms = [1u32];
    let desc = small_desc(1, &shapes, &ms);
    let mut blob = vec![0u8; Q4VK_TUNING_BLOB_MAX_BYTES];
    let mut written = 0usize;
    let older = std::mem::offset_of!(q4vk_tune_info, long_rows_from_k);
    let mut info = std::mem::MaybeUninit::<q4vk_tune_info>::uninit();
    // SAFETY: a plain-data struct, every byte written here.
    unsafe {
        std::ptr::write_bytes(
            info.as_mut_ptr().cast::<u8>(),
            0xAB,
            std::mem::size_of::<q4vk_tune_info>(),
        )
    };
    unsafe { (*info.as_mut_ptr()).struct_size = older as u32 };
    let status = tune_into(&gpu, &desc, &mut blob, &mut written, info.as_mut_ptr());
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    // SAFETY: as above.
    let bytes: &[u8] = unsafe {
        std::slice::from_raw_parts(info.as_ptr().cast(), std::mem::size_of::<q4vk_tune_info>())
    };
    assert!(
        bytes[older..].iter().all(|&b| b == 0xAB),
        "written past struct_size"
    );
    let info = unsafe { info.assume_init() };
    assert_eq!(info.struct_size as usize, older);
    assert!(info.candidates_timed >= 1 && info.candidates_timed <= info.candidates);
    assert!(info.time_vs_table > 0.0 && info.time_vs_table <= 1.0);
    assert_eq!(
        shape_of(&gpu)[0][..2],
        [info.table_workgroup, info.table_rows]
    );
    assert!(info.table_word_lanes <= 1);

    // A caller built against the desc before the prefill fields: whatever follows its
    // `struct_size` is not read, and no prefill m is timed.
    let mut older_desc = small_desc(1, &shapes, &ms);
    older_desc.struct_size = std::mem::offset_of!(q4vk_tune_desc, prefill_m_count) as u32;
    older_desc.prefill_m_count = 3;
    older_desc.prefill_ms = std::ptr::null();
    let mut info = unsafe { std::mem::zeroed::<q4vk_tune_info>() };
    info.struct_size = std::mem::size_of::<q4vk_tune_info>() as u32;
    let status = tune_into(&gpu, &older_desc, &mut blob, &mut written, &mut info);
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    assert_eq!(info.gemm_count, 0);
}

/// A row with a shape per class of matrices (the NVIDIA row, on whatever device the tests
/// run): the context takes each class's shape, and tuning on a budget that allows no
/// candidate keeps each group's row shape, the baseline of its class.
#[test]
fn a_row_with_two_shapes_is_each_class_baseline() {
    use q4vk::plan::tuning::NVIDIA;
    use q4vk::vk::context::{Context, ContextConfig};
    use q4vk::vk::tune::{tune, TuneOptions};
    let config = ContextConfig {
        device_index: -1,
        validation: true,
        row: Some(&NVIDIA),
        ..Default::default()
    };
    let ctx = Context::new(config, counting_logger()).unwrap();
    let short = NVIDIA
        .simt_gemv_short_rows
        .expect("the NVIDIA row has a shape for short rows");
    let long = NVIDIA.simt_gemv;
    assert_ne!(short, long);
    let shape_of = |t: &q4vk::vk::pipeline::Tuning| (t.workgroup, t.rows, t.unroll, t.split);
    let want = |s: &q4vk::plan::tuning::SimtGemv| (s.workgroup, s.rows, s.unroll, s.split);
    for group in SimtGroup::ALL {
        let table = match group.long_rows {
            true => &long,
            false => &short,
        };
        assert_eq!(
            shape_of(&ctx.rules.simt_groups[group.index()]),
            want(table),
            "{group}"
        );
    }
    let opts = TuneOptions {
        budget: std::time::Duration::from_millis(1),
        shapes: vec![(32, 1024), (16, 4096)],
        ms: vec![1],
        prefill_ms: Vec::new(),
        cold_bytes: 1 << 20,
    }
    .checked()
    .unwrap();
    let found = tune(&ctx, &opts).unwrap();
    for group in SimtGroup::ALL {
        let g = &found.simt[group.index()];
        let table = match group.long_rows {
            true => long,
            false => short,
        };
        assert_eq!(g.table, table, "{group}");
        // Only calls of m = 1 on matrices of few rows were asked: the other groups have
        // none.
        let timed = usize::from(group.decode && !group.many_rows);
        assert_eq!(g.timed, timed, "{group}: the row's shape, nothing else");
        assert_eq!((g.chosen, g.time_vs_table), (table, 1.0), "{group}");
    }
    drop(ctx);
    assert_nothing_logged();
}

/// `q4vk_kernel_export` with a context takes the context's shape for its matrix's and m's
/// group: on a matrix of long rows and few rows (8192 columns: 256 chunks, which the
/// exported kernel's workgroup steps over), a blob with a workgroup of 256 for calls of
/// one row and of 64 for more exports those.
#[test]
fn the_kernel_export_takes_the_tuned_shape_of_its_group() {
    use q4vk::ffi::kernel::*;
    let gpu = logged_context(&[]);
    let (blob, _) = tuned(&gpu, &small_desc(1, &[96, 1024], &[1]));
    drop(gpu);
    let decoded = TunedBlob::decode(&blob, &device_identity()).unwrap();
    let with = |workgroup| SimtGemv {
        workgroup,
        rows: 2,
        unroll: 1,
        split: 1,
        word_lanes: false,
    };
    let mut shapes = decoded.simt_gemv;
    for (decode, workgroup) in [(false, 64), (true, 256)] {
        let group = SimtGroup {
            long_rows: true,
            many_rows: false,
            decode,
        };
        shapes[group.index()] = with(workgroup);
    }
    let gpu = logged_context(
        &TunedBlob {
            simt_gemv: shapes,
            ..decoded
        }
        .encode(),
    );
    assert!(blob_line().contains("used"), "{}", blob_line());
    let mut rng = Rng(0xE7);
    let data = random_q4(&mut rng, 200, 8192, 128, true, false);
    let desc = q4_desc(&data);
    for (m, workgroup) in [(1u32, 256u32), (2, 64), (8, 64)] {
        let mut e = unsafe { std::mem::zeroed::<q4vk_kernel_export_desc>() };
        unsafe { q4vk_kernel_export_desc_default(&mut e) };
        e.m = m;
        e.variant = Q4VK_KERNEL_AUTO;
        let mut info = unsafe { std::mem::zeroed::<q4vk_kernel_info>() };
        info.struct_size = std::mem::size_of::<q4vk_kernel_info>() as u32;
        let status =
            unsafe { q4vk_kernel_export(gpu.ctx, &desc, &e, &mut info, std::ptr::null_mut(), 0) };
        assert_eq!(status, Q4VK_OK, "{}", last_error());
        assert_eq!(info.local_size[0], workgroup, "m = {m}");
    }
}
