//! Reliability on the GPU path (lavapipe in CI, validation on, any message fails):
//! device-memory exhaustion, many threads sharing a context (with the layer's
//! thread-safety checks), create/destroy churn with the validation layer's object
//! tracking, and bitwise determinism.

mod gpu_support;

use gpu_support::*;
use q4vk::ffi::matrix::*;
use q4vk::ffi::status::*;
use q4vk::quant::q4::{Q4Data, Q4Shape, ScaleType};
use std::borrow::Cow;

/// Anonymous, read-only zero pages mapped without reserving memory for them.
struct ZeroPages {
    at: *mut libc::c_void,
    len: usize,
}

impl ZeroPages {
    fn new(len: usize) -> ZeroPages {
        // SAFETY: a fresh anonymous mapping; nothing else refers to its range.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        assert_ne!(at, libc::MAP_FAILED, "mmap of {len} bytes");
        ZeroPages { at, len }
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: a readable mapping of `len` bytes, alive as long as `self`.
        unsafe { std::slice::from_raw_parts(self.at.cast::<u8>(), self.len) }
    }
}

impl Drop for ZeroPages {
    fn drop(&mut self) {
        // SAFETY: our mapping; the slices borrowed from it are gone.
        unsafe { libc::munmap(self.at, self.len) };
    }
}

/// A matrix larger than the largest device heap is refused with OUT_OF_DEVICE_MEMORY and a
/// message, nothing aborts, and the context keeps working.
#[test]
fn matrix_larger_than_device_heap_is_refused_and_context_survives() {
    let gpu = Gpu::new(false);
    let heap = gpu.context().device.largest_device_heap();
    let k = 65536usize;
    let n = (heap / (k as u64 / 2)) as usize + 4096;
    let shape = Q4Shape::new(n as u64, k as u64, 128, 0).unwrap();
    // Zero pages reserved without backing store stand for the weights: untouched or read,
    // they cost no memory, even where the device heap is the size of host RAM (lavapipe)
    // and a heap's worth of host memory could not be had.
    let weight = ZeroPages::new(shape.weight_bytes());
    let data = Q4Data {
        shape,
        weight: Cow::Borrowed(weight.bytes()),
        scale_type: ScaleType::F16,
        scales: Cow::Owned(vec![0u8; 2 * shape.scale_count()]),
        zeros: Cow::Owned(Vec::new()),
    };
    let mut desc = unsafe { std::mem::zeroed::<q4vk_matrix_desc>() };
    unsafe { q4vk_matrix_desc_default(&mut desc) };
    desc.source = Q4VK_SOURCE_Q4;
    (desc.n, desc.k, desc.group_size, desc.dtype) = (n as u64, k as u64, 128, 1);
    desc.weight = data.weight.as_ptr().cast();
    desc.weight_bytes = data.weight.len();
    desc.scales = data.scales.as_ptr().cast();
    desc.scales_bytes = data.scales.len();
    let sentinel = std::ptr::dangling_mut::<q4vk_matrix>();
    let mut mat = sentinel; // must stay untouched on failure
    let status = unsafe { q4vk_matrix_create(gpu.ctx, &desc, &mut mat) };
    assert_eq!(status, Q4VK_ERROR_OUT_OF_DEVICE_MEMORY, "{}", last_error());
    assert_eq!(mat, sentinel, "out-parameter written on failure");
    assert!(last_error().contains("device memory"), "{}", last_error());
    drop(data);
    drop(weight);
    // The context still works.
    let mut rng = Rng(3);
    let small = random_q4(&mut rng, 96, 256, 64, true, false);
    let mat = upload_q4(&gpu, &small);
    let x = rng.vec(256);
    assert!(check_gemv(&gpu, mat, &small, &x, 1) < 1e-5);
    unsafe { q4vk_matrix_destroy(mat) };
}

/// 8 threads share one context and three matrices, 200 GEMVs each with every result
/// checked, while also creating and destroying matrices of their own. The validation
/// layer's core and thread-safety checks are on (a q4vk call that used an externally
/// synchronized object from two threads at once would be reported); its synchronization
/// validation is not: the synchronization validator of the Khronos layer keeps per-queue
/// state that it updates under a shared lock, so a `vkQueueSubmit` on one thread while
/// other threads create and destroy objects can crash the layer itself (reported upstream
/// as Vulkan-ValidationLayers issue 11226, "Race Condition in QueueSyncState"; seen here
/// with Debian 12's layer 1.3.239 as a SEGV inside the layer during q4vk's submit, which
/// q4vk serializes per context). q4vk's barriers are checked by synchronization validation
/// in `tests/gpu_sync_validation.rs`, on one thread.
#[test]
fn eight_threads_share_a_context() {
    let gpu = Gpu::new(false);
    let mut rng = Rng(17);
    let shared = shared_test_matrices(&mut rng);
    let mats: Vec<usize> = shared.iter().map(|d| upload_q4(&gpu, d) as usize).collect();
    let gemvs = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for t in 0..8u64 {
            let (gpu, shared, mats, gemvs) = (&gpu, &shared, &mats, &gemvs);
            scope.spawn(move || {
                let mut rng = Rng(100 + t);
                for i in 0..200usize {
                    let which = (i + t as usize) % shared.len();
                    let m = 1 + (i % 3);
                    let x = rng.vec(m * shared[which].shape.k);
                    let err =
                        check_gemv(gpu, mats[which] as *mut q4vk_matrix, &shared[which], &x, m);
                    assert!(err < 1e-5, "thread {t} gemv {i}: error {err}");
                    gemvs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i % 40 == 0 {
                        let own = random_q4(&mut rng, 32 + t as usize, 64, 32, i % 80 == 0, false);
                        let mat = upload_q4(gpu, &own);
                        let x = rng.vec(64);
                        assert!(check_gemv(gpu, mat, &own, &x, 1) < 1e-5);
                        unsafe { q4vk_matrix_destroy(mat) };
                    }
                }
            });
        }
    });
    assert_eq!(gemvs.into_inner(), 1600);
    for mat in mats {
        unsafe { q4vk_matrix_destroy(mat as *mut q4vk_matrix) };
    }
}

/// Contexts and matrices created and destroyed in a loop; with validation on, any object
/// q4vk forgot to destroy is reported by the layer's object tracker when the device and
/// instance are destroyed (and fails the test through the log sink).
/// `Q4VK_CHURN_CONTEXTS` (default 100) and `Q4VK_CHURN_MATRICES` (2000) set the counts: a
/// driver that allows fewer instances per process needs fewer contexts (NVIDIA 580.159.04
/// in a container refuses the 30th, docs/gpu.md).
#[test]
fn create_destroy_churn_leaves_no_vulkan_objects() {
    let mut rng = Rng(5);
    let data = random_q4(&mut rng, 40, 64, 32, true, false);
    let contexts = std::env::var("Q4VK_CHURN_CONTEXTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let matrices = std::env::var("Q4VK_CHURN_MATRICES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    for c in 0..contexts {
        let gpu = Gpu::new(c % 2 == 1);
        for _ in 0..matrices / contexts {
            let mat = upload_q4(&gpu, &data);
            unsafe { q4vk_matrix_destroy(mat) };
        }
        let mat = upload_q4(&gpu, &data);
        let x = rng.vec(64);
        assert!(check_gemv(&gpu, mat, &data, &x, 1) < 1e-5);
        unsafe { q4vk_matrix_destroy(mat) };
        // Dropping `gpu` destroys the context and asserts no message arrived.
    }
}

/// The same inputs give bitwise-identical outputs across runs, for both kernel variants.
#[test]
fn gemv_is_bitwise_deterministic() {
    for portable in [false, true] {
        let gpu = Gpu::new(portable);
        let mut rng = Rng(23);
        let data = random_q4(&mut rng, 300, 1000, 128, true, false);
        let mat = upload_q4(&gpu, &data);
        let m = 3;
        let x = rng.vec(m * 1000);
        let mut first: Option<Vec<u32>> = None;
        for _ in 0..5 {
            let (status, y) = gemv_c(gpu.ctx, mat, &x, 300, m);
            assert_eq!(status, Q4VK_OK);
            let bits: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
            match &first {
                None => first = Some(bits),
                Some(f) => assert!(
                    f == &bits,
                    "portable={portable}: results differ between runs"
                ),
            }
        }
        unsafe { q4vk_matrix_destroy(mat) };
    }
}
