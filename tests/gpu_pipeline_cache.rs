//! The pipeline-cache blob: saved from one context, passed to the next through the
//! appended `q4vk_context_desc` fields; foreign or corrupt blobs are ignored; callers with
//! the v0 `struct_size` still work; size/data statuses (nothing written on error).

mod gpu_support;
use gpu_support::*;
use q4vk::ffi::context::*;
use q4vk::ffi::matrix::*;
use q4vk::ffi::status::*;

fn blob_of(gpu: &Gpu) -> Vec<u8> {
    let mut size = 0usize;
    let st = unsafe { q4vk_context_pipeline_cache_size(gpu.ctx, &mut size) };
    assert_eq!(st, Q4VK_OK, "{}", last_error());
    let mut blob = vec![0u8; size];
    let mut written = 0usize;
    let st = unsafe {
        q4vk_context_pipeline_cache_data(gpu.ctx, blob.as_mut_ptr().cast(), size, &mut written)
    };
    assert_eq!(st, Q4VK_OK, "{}", last_error());
    assert_eq!(written, size);
    blob
}

/// One matrix and GEMVs for m = 1..4 (four pipeline variants); the relative errors.
fn exercise(gpu: &Gpu) -> Vec<f64> {
    let mut rng = Rng(11);
    let (n, k) = (70, 256);
    let data = random_q4(&mut rng, n, k, 128, false, false);
    let mat = upload_q4(gpu, &data);
    let errs = (1..=4)
        .map(|m| check_gemv(gpu, mat, &data, &rng.vec(m * k), m))
        .collect();
    unsafe { q4vk_matrix_destroy(mat) };
    errs
}

#[test]
fn blob_round_trip_and_bad_blobs() {
    let first = Gpu::new(false);
    let empty = blob_of(&first);
    assert!(
        empty.len() >= 32,
        "even an empty cache has its 32-byte header"
    );
    for e in exercise(&first) {
        assert!(e < 1e-5, "{e}");
    }
    let blob = blob_of(&first);
    assert!(
        blob.len() >= empty.len(),
        "the blob holds the pipelines used: {} -> {} bytes",
        empty.len(),
        blob.len()
    );
    assert_eq!(&blob[..16], &empty[..16], "same header");
    let dev = &first.context().device;
    let props = unsafe {
        dev.instance
            .instance
            .get_physical_device_properties(dev.physical)
    };
    assert!(
        q4vk::vk::pipeline::cache_blob_matches(&blob, &props),
        "the saved blob is recognized as this device's (so a new context seeds from it)"
    );
    assert!(!q4vk::vk::pipeline::cache_blob_matches(&blob[..31], &props));

    // A second context seeded with the blob works and gives the same results.
    let second = Gpu::with(false, |d| {
        d.pipeline_cache_data = blob.as_ptr().cast();
        d.pipeline_cache_size = blob.len();
    })
    .expect("context from the saved blob");
    for e in exercise(&second) {
        assert!(e < 1e-5, "{e}");
    }
    assert!(blob_of(&second).len() >= 32);

    // Corrupt, truncated and foreign blobs are ignored, not errors.
    let mut foreign = blob.clone();
    foreign[16] ^= 0xff; // pipelineCacheUUID
    let mut bad_version = blob.clone();
    bad_version[4] = 7;
    let garbage = vec![0xa5u8; 100];
    for b in [&foreign, &bad_version, &garbage, &blob[..20].to_vec()] {
        let gpu = Gpu::with(false, |d| {
            d.pipeline_cache_data = b.as_ptr().cast();
            d.pipeline_cache_size = b.len();
        })
        .expect("a bad blob is ignored");
        for e in exercise(&gpu) {
            assert!(e < 1e-5, "{e}");
        }
    }

    // Size without data: NULL_POINTER.
    let err = Gpu::with(false, |d| d.pipeline_cache_size = 64)
        .err()
        .unwrap();
    assert_eq!(err.0, Q4VK_ERROR_NULL_POINTER, "{}", err.1);
    assert!(err.1.contains("pipeline_cache_data"), "{}", err.1);

    // A caller built against the v0 header (struct ends before the pipeline-cache fields):
    // whatever lies beyond its struct_size is not read.
    let v0 = std::mem::offset_of!(q4vk_context_desc, pipeline_cache_data);
    assert_eq!(v0, 128);
    let old = Gpu::with(false, |d| {
        d.struct_size = v0 as u32;
        d.pipeline_cache_data = std::ptr::dangling(); // would crash if read
        d.pipeline_cache_size = 1 << 40;
    })
    .expect("v0 struct_size");
    for e in exercise(&old) {
        assert!(e < 1e-5, "{e}");
    }
    let err = Gpu::with(false, |d| d.struct_size = v0 as u32 - 8)
        .err()
        .unwrap();
    assert_eq!(err.0, Q4VK_ERROR_INVALID_ARGUMENT);

    // size/data statuses; nothing written on error.
    let mut size = 7usize;
    assert_eq!(
        unsafe { q4vk_context_pipeline_cache_size(std::ptr::null(), &mut size) },
        Q4VK_ERROR_NULL_POINTER
    );
    assert_eq!(
        unsafe { q4vk_context_pipeline_cache_size(first.ctx, std::ptr::null_mut()) },
        Q4VK_ERROR_NULL_POINTER
    );
    assert_eq!(size, 7);
    let mut small = vec![0u8; blob.len() - 1];
    let mut written = 7usize;
    assert_eq!(
        unsafe {
            q4vk_context_pipeline_cache_data(
                first.ctx,
                small.as_mut_ptr().cast(),
                small.len(),
                &mut written,
            )
        },
        Q4VK_ERROR_BUFFER_TOO_SMALL
    );
    assert!(last_error().contains("data_bytes"), "{}", last_error());
    assert_eq!(written, 7);
    assert!(small.iter().all(|&b| b == 0));
    assert_eq!(
        unsafe {
            q4vk_context_pipeline_cache_data(
                first.ctx,
                small.as_mut_ptr().cast(),
                1,
                std::ptr::null_mut(),
            )
        },
        Q4VK_ERROR_NULL_POINTER
    );
}
