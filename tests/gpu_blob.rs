//! Packed matrix blobs (`q4vk_matrix_blob`, `q4vk_matrix_create_from_blob`,
//! `vk::matrix_blob`) on the system's Vulkan device (lavapipe in CI), validation on: for
//! every matrix form (zero points, f16 and f32 scales, per channel, offsets with a column
//! order) and matrices in several parts, read back directly and through copies, a matrix
//! created from the blob gives bit for bit the y of the matrix it came from, and matches the
//! f64 reference. Truncated, corrupted, other-version and other-layout blobs are refused with
//! the reason, nothing written.

mod gpu_support;
use gpu_support::*;
use q4vk::cpu::reference;
use q4vk::ffi::blob::*;
use q4vk::ffi::matrix::*;
use q4vk::ffi::status::*;
use q4vk::vk::gemv::gemv_host;
use q4vk::vk::matrix::DeviceMatrix;
use q4vk::vk::matrix_blob::{blob_of, checksum, matrix_from_blob};

/// The blob of `mat` through the C API.
fn blob(gpu: &Gpu, mat: *const q4vk_matrix) -> Vec<u8> {
    let mut size = 0usize;
    assert_eq!(
        unsafe { q4vk_matrix_blob_size(gpu.ctx, mat, &mut size) },
        Q4VK_OK
    );
    let mut bytes = vec![0u8; size];
    let mut written = 0usize;
    // One byte short: refused, nothing written.
    let status = unsafe {
        q4vk_matrix_blob(
            gpu.ctx,
            mat,
            bytes.as_mut_ptr().cast(),
            size - 1,
            &mut written,
        )
    };
    assert_eq!(status, Q4VK_ERROR_BUFFER_TOO_SMALL);
    assert_eq!(written, 0);
    let status =
        unsafe { q4vk_matrix_blob(gpu.ctx, mat, bytes.as_mut_ptr().cast(), size, &mut written) };
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    assert_eq!(written, size);
    bytes
}

/// The matrix of `bytes` through the C API, or its status and message.
fn from_blob(gpu: &Gpu, bytes: &[u8]) -> Result<*mut q4vk_matrix, (q4vk_status, String)> {
    let sentinel = std::ptr::dangling_mut::<q4vk_matrix>();
    let mut mat = sentinel;
    let status = unsafe {
        q4vk_matrix_create_from_blob(gpu.ctx, bytes.as_ptr().cast(), bytes.len(), &mut mat)
    };
    match status {
        Q4VK_OK => Ok(mat),
        s => {
            assert_eq!(mat, sentinel, "out written on failure");
            Err((s, last_error()))
        }
    }
}

#[test]
fn a_matrix_from_its_blob_computes_the_same_bits() {
    let mut gpu = Gpu::new(false);
    let mut rng = Rng(0xB10B);
    for (max_part_bytes, staged) in [(u64::MAX, false), (16 * 1024, true)] {
        gpu.context_mut().limits.max_part_bytes = max_part_bytes;
        gpu.context_mut().limits.staged_uploads = staged;
        for &(n, k, g, z, f32_scales) in &[
            (61usize, 700usize, 32i32, true, false),
            (130, 384, 128, false, true),
            (9, 1024, -1, false, false),
        ] {
            let d = random_q4(&mut rng, n, k, g, z, f32_scales);
            let mat = upload_q4(&gpu, &d);
            let bytes = blob(&gpu, mat);
            let again = from_blob(&gpu, &bytes).unwrap();
            for m in [1usize, 9] {
                let x = rng.vec(m * k);
                let (s1, y1) = gemv_c(gpu.ctx, mat, &x, n, m);
                let (s2, y2) = gemv_c(gpu.ctx, again, &x, n, m);
                assert_eq!((s1, s2), (Q4VK_OK, Q4VK_OK));
                let same = y1.iter().zip(&y2).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{n}x{k} g{g} m {m}: y differs");
                let err = reference::relative_error(&y2, &reference::gemv(&d, &x, m));
                assert!(err < 1e-5, "{err:e}");
            }
            unsafe {
                q4vk_matrix_destroy(mat);
                q4vk_matrix_destroy(again);
            }
        }
        // Offsets and a column order, through the Rust core.
        let ctx = gpu.context();
        let d = random_q4(&mut rng, 45, 300, 32, false, true);
        let offsets = rng.vec(d.shape.scale_count());
        let order: Vec<u32> = (0..300u32).map(|i| (i * 7) % 300).collect();
        let mat = DeviceMatrix::new(ctx, &d, Some(&offsets), Some(&order)).unwrap();
        let again = matrix_from_blob(ctx, &blob_of(ctx, &mat).unwrap()).unwrap();
        assert_eq!(again.k_order.as_ref().unwrap().inputs, order);
        let x = rng.vec(3 * 300);
        let (mut y1, mut y2) = (vec![f32::NAN; 3 * 45], vec![f32::NAN; 3 * 45]);
        gemv_host(ctx, &mat, &x, &mut y1, 3).unwrap();
        gemv_host(ctx, &again, &x, &mut y2, 3).unwrap();
        assert!(y1.iter().zip(&y2).all(|(a, b)| a.to_bits() == b.to_bits()));
    }
}

/// `bytes` with its checksum made right again.
fn resealed(mut bytes: Vec<u8>) -> Vec<u8> {
    let end = bytes.len() - 8;
    let sum = checksum(&bytes[..end]);
    bytes[end..].copy_from_slice(&sum.to_le_bytes());
    bytes
}

#[test]
fn bad_blobs_are_refused_with_the_reason() {
    let mut gpu = Gpu::new(false);
    let mut rng = Rng(0xBAD0);
    let d = random_q4(&mut rng, 64, 512, 64, true, false);
    gpu.context_mut().limits.max_part_bytes = 8 * 1024;
    let mat = upload_q4(&gpu, &d);
    let good = blob(&gpu, mat);
    unsafe { q4vk_matrix_destroy(mat) };
    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 1;
    let mut other_version = good.clone();
    other_version[16] ^= 0x20;
    let mut other_n = good.clone();
    other_n[32] ^= 1;
    // Header fields that disagree with the layout they describe, the checksum made right:
    // f32 scales flagged over f16 scales' buffers, the scale size alone, a flag no layout
    // has, a count of buffers past the address space.
    let edited = |at: usize, value: u32| {
        let mut bytes = good.clone();
        bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
        resealed(bytes)
    };
    let word = |at: usize| u32::from_le_bytes(good[at..at + 4].try_into().unwrap());
    let (flags, scale_size) = (word(52), word(68));
    assert_eq!(scale_size, 2);
    let cases: Vec<(Vec<u8>, q4vk_status, &str)> = vec![
        (
            good[..good.len() - 1].to_vec(),
            Q4VK_ERROR_INVALID_ARGUMENT,
            "truncated",
        ),
        (
            good[..40].to_vec(),
            Q4VK_ERROR_INVALID_ARGUMENT,
            "not a q4vk matrix blob",
        ),
        (flipped, Q4VK_ERROR_INVALID_ARGUMENT, "checksum"),
        (
            resealed(other_version),
            Q4VK_ERROR_INVALID_ARGUMENT,
            "made by q4vk",
        ),
        (
            resealed(other_n),
            Q4VK_ERROR_INVALID_ARGUMENT,
            "do not match",
        ),
        (
            edited(52, flags | 2),
            Q4VK_ERROR_INVALID_ARGUMENT,
            "do not match",
        ),
        (edited(68, 4), Q4VK_ERROR_INVALID_ARGUMENT, "do not match"),
        (
            edited(52, flags | 128),
            Q4VK_ERROR_INVALID_ARGUMENT,
            "do not match",
        ),
        (edited(64, u32::MAX), Q4VK_ERROR_INVALID_ARGUMENT, "header"),
        // n of 2^40 rows (in 2^35 parts) with the buffers of 64: refused before its parts'
        // lengths are listed (terabytes).
        (
            edited_u64(&good, 32, 1 << 40),
            Q4VK_ERROR_INVALID_ARGUMENT,
            "do not match",
        ),
    ];
    for (bytes, want, why) in cases {
        let (status, message) = from_blob(&gpu, &bytes).unwrap_err();
        assert_eq!(status, want, "{why}: {message}");
        assert!(message.contains(why), "{why}: {message}");
    }
    // Made with parts of another size.
    gpu.context_mut().limits.max_part_bytes = u64::MAX;
    let (status, message) = from_blob(&gpu, &good).unwrap_err();
    assert_eq!(status, Q4VK_ERROR_UNSUPPORTED, "{message}");
    assert!(message.contains("parts"), "{message}");
    let mut out = std::ptr::null_mut();
    let status = unsafe { q4vk_matrix_create_from_blob(gpu.ctx, std::ptr::null(), 8, &mut out) };
    assert_eq!(status, Q4VK_ERROR_NULL_POINTER);

    // A column order (the kernels read x at its columns unchecked) that names a column past
    // k, or one column twice: refused, though every length and the checksum are right.
    let ctx = gpu.context();
    let d = random_q4(&mut rng, 16, 256, 32, false, false);
    let order: Vec<u32> = (0..256u32).map(|i| (i * 5) % 256).collect();
    let mat = DeviceMatrix::new(ctx, &d, None, Some(&order)).unwrap();
    let ordered = blob_of(ctx, &mat).unwrap();
    assert!(matrix_from_blob(ctx, &ordered).is_ok());
    // The order is the first buffer, after the header's 72 bytes and its buffers' lengths.
    let first = (72 + 8 * word_of(&ordered, 64) as usize).next_multiple_of(16);
    assert_eq!(word_of(&ordered, first + 4), 5, "the order's second column");
    for column in [256u32, u32::MAX, 0] {
        let mut bytes = ordered.clone();
        bytes[first + 4..first + 8].copy_from_slice(&column.to_le_bytes());
        let err = matrix_from_blob(ctx, &resealed(bytes))
            .err()
            .expect("refused");
        assert!(err.to_string().contains("column order"), "{column}: {err}");
    }
}

/// `bytes` with the u64 at byte `at` set to `value`, the checksum made right.
fn edited_u64(bytes: &[u8], at: usize, value: u64) -> Vec<u8> {
    let mut bytes = bytes.to_vec();
    bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
    resealed(bytes)
}

/// The little-endian u32 at byte `at` of `bytes`.
fn word_of(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
}
