//! Matrices in the host's device memory (`q4vk_context_desc.allocate` / `free`), on an
//! adopted device (lavapipe in CI), validation on: a host bump allocator that maps its
//! block gives q4vk memory it writes in place, and one that does not map it gets the
//! matrices through staging copies; both give results matching the f64 reference, every
//! allocation is given back when the matrices go, and their sizes are what
//! `q4vk_matrix_footprint` said. An allocator with nothing to give is `OUT_OF_DEVICE_MEMORY`;
//! one that breaks the alignment it was asked for is refused and its allocation given back.

mod gpu_support;
use ash::vk;
use gpu_support::*;
use q4vk::ffi::context::*;
use q4vk::ffi::footprint::*;
use q4vk::ffi::matrix::*;
use q4vk::ffi::status::*;
use q4vk::vk::device::{Device, DeviceOptions};
use q4vk::vk::instance::Instance;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

/// The host's device memory: one block, handed out in aligned pieces.
struct Bump {
    device: ash::Device,
    memory: vk::DeviceMemory,
    type_index: u32,
    size: u64,
    mapped: *mut u8,
    /// Map the pieces for q4vk (else NULL: q4vk stages).
    map: bool,
    /// Offset to misalign every piece by (0: none).
    skew: u64,
    /// Give nothing.
    empty: bool,
    state: Mutex<BumpState>,
}

/// What a [`Bump`] has handed out.
#[derive(Default)]
struct BumpState {
    /// The next free offset.
    next: u64,
    /// Live allocations: (offset, size).
    live: Vec<(u64, u64)>,
    /// Allocations given back.
    freed: u64,
}

unsafe extern "C" fn bump_allocate(
    user: *mut c_void,
    size: u64,
    alignment: u64,
    bits: u32,
    out: *mut q4vk_allocation,
) -> i32 {
    let b = &*(user as *const Bump);
    let mut s = b.state.lock().unwrap();
    let at = s.next.next_multiple_of(alignment.max(1)) + b.skew;
    if b.empty || bits & (1 << b.type_index) == 0 || at + size > b.size {
        return 1;
    }
    s.next = at + size;
    s.live.push((at, size));
    *out = q4vk_allocation {
        memory: vk::Handle::as_raw(b.memory),
        offset: at,
        mapped: if b.map {
            b.mapped.add(at as usize).cast()
        } else {
            std::ptr::null_mut()
        },
    };
    0
}

unsafe extern "C" fn bump_free(user: *mut c_void, a: *const q4vk_allocation) {
    let b = &*(user as *const Bump);
    let a = &*a;
    assert_eq!(a.memory, vk::Handle::as_raw(b.memory));
    let mut s = b.state.lock().unwrap();
    let i = s
        .live
        .iter()
        .position(|&(at, _)| at == a.offset)
        .expect("a live allocation");
    s.live.remove(i);
    s.freed += 1;
}

/// A block of 64 MiB of the host device's first host-visible memory type.
fn bump(host: &Device, map: bool, skew: u64, empty: bool) -> Box<Bump> {
    let size = 64u64 << 20;
    let props = &host.info.memory;
    let host_visible =
        vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
    let type_index = (0..props.memory_type_count)
        .find(|&i| {
            props.memory_types[i as usize]
                .property_flags
                .contains(host_visible)
        })
        .expect("a host-visible memory type");
    let d = host.device.clone();
    let memory = unsafe {
        d.allocate_memory(
            &vk::MemoryAllocateInfo::default()
                .allocation_size(size)
                .memory_type_index(type_index),
            None,
        )
    }
    .unwrap();
    let mapped = unsafe { d.map_memory(memory, 0, size, vk::MemoryMapFlags::empty()) }
        .unwrap()
        .cast();
    Box::new(Bump {
        device: d,
        memory,
        type_index,
        size,
        mapped,
        map,
        skew,
        empty,
        state: Mutex::new(BumpState::default()),
    })
}

impl Drop for Bump {
    fn drop(&mut self) {
        unsafe { self.device.free_memory(self.memory, None) };
    }
}

/// A context adopting `host`'s device with `b` as its allocator.
fn adopting(host: &Device, b: &Bump) -> Gpu {
    Gpu::with(false, |d| {
        d.instance = vk::Handle::as_raw(host.instance.instance.handle()) as *mut c_void;
        d.physical_device = vk::Handle::as_raw(host.physical) as *mut c_void;
        d.device = vk::Handle::as_raw(host.device.handle()) as *mut c_void;
        d.queue = vk::Handle::as_raw(host.queue) as *mut c_void;
        d.queue_family_index = host.queue_family;
        d.api_version = vk::API_VERSION_1_1;
        let gipa: vk::PFN_vkGetInstanceProcAddr =
            host.instance.entry.static_fn().get_instance_proc_addr;
        // SAFETY: a C function pointer passed on as the desc's untyped one (q4vk casts it
        // back to PFN_vkGetInstanceProcAddr).
        d.get_instance_proc_addr = Some(unsafe {
            std::mem::transmute::<vk::PFN_vkGetInstanceProcAddr, unsafe extern "C" fn()>(gipa)
        });
        d.flags = 0;
        d.allocate = Some(bump_allocate);
        d.free = Some(bump_free);
        d.allocator_user = b as *const Bump as *mut c_void;
    })
    .expect("an adopting context")
}

fn host_device() -> Device {
    let instance = Arc::new(Instance::create(true, Arc::new(counting_logger())).unwrap());
    Device::create(instance, -1, DeviceOptions::default()).unwrap()
}

#[test]
fn matrices_live_in_the_hosts_memory_mapped_or_staged() {
    let host = host_device();
    let mut rng = Rng(0x4057);
    for map in [true, false] {
        let b = bump(&host, map, 0, false);
        let gpu = adopting(&host, &b);
        let mut mats = Vec::new();
        for &(n, k, g, z) in &[(61usize, 700usize, 32i32, true), (130, 384, 128, false)] {
            let d = random_q4(&mut rng, n, k, g, z, n % 2 == 0);
            let mut f = unsafe { std::mem::zeroed::<q4vk_matrix_footprint_info>() };
            f.struct_size = std::mem::size_of::<q4vk_matrix_footprint_info>() as u32;
            assert_eq!(
                unsafe { q4vk_matrix_footprint(gpu.ctx, &q4_desc(&d), &mut f) },
                Q4VK_OK
            );
            let before = b
                .state
                .lock()
                .unwrap()
                .live
                .iter()
                .map(|&(_, s)| s)
                .sum::<u64>();
            let mat = upload_q4(&gpu, &d);
            let (live, taken): (usize, u64) = {
                let s = b.state.lock().unwrap();
                (s.live.len(), s.live.iter().map(|&(_, s)| s).sum())
            };
            assert!(live as u32 >= f.buffers, "{live} allocations");
            assert_eq!(
                taken - before,
                f.device_bytes,
                "the footprint's bytes, map {map}"
            );
            for m in [1usize, 9] {
                let x = rng.vec(m * k);
                assert!(check_gemv(&gpu, mat, &d, &x, m) < 1e-5, "map {map} m {m}");
            }
            mats.push(mat);
        }
        for mat in mats {
            unsafe { q4vk_matrix_destroy(mat) };
        }
        let s = b.state.lock().unwrap();
        assert!(
            s.live.is_empty(),
            "allocations not given back: {:?}",
            s.live
        );
        assert!(s.freed >= 4, "frees: {}", s.freed);
        drop(s);
        drop(gpu);
    }
    assert_nothing_logged();
}

#[test]
fn an_empty_or_misaligning_allocator_is_refused() {
    let host = host_device();
    let mut rng = Rng(0xE3);
    let d = random_q4(&mut rng, 16, 256, 64, false, false);
    let desc = q4_desc(&d);
    for (empty, skew, want, why) in [
        (
            true,
            0,
            Q4VK_ERROR_OUT_OF_DEVICE_MEMORY,
            "host's allocator has no",
        ),
        (false, 1, Q4VK_ERROR_INVALID_ARGUMENT, "a multiple of"),
    ] {
        let b = bump(&host, true, skew, empty);
        let gpu = adopting(&host, &b);
        let sentinel = std::ptr::dangling_mut::<q4vk_matrix>();
        let mut mat = sentinel;
        let status = unsafe { q4vk_matrix_create(gpu.ctx, &desc, &mut mat) };
        assert_eq!(status, want, "{why}: {}", last_error());
        assert!(last_error().contains(why), "{}", last_error());
        assert_eq!(mat, sentinel);
        assert!(
            b.state.lock().unwrap().live.is_empty(),
            "an allocation kept"
        );
        drop(gpu);
    }
    // One of the two callbacks alone is refused.
    let mut desc = unsafe { std::mem::zeroed::<q4vk_context_desc>() };
    unsafe { q4vk_context_desc_default(&mut desc) };
    desc.allocate = Some(bump_allocate);
    let mut ctx = std::ptr::null_mut();
    let status = unsafe { q4vk_context_create(&desc, &mut ctx) };
    assert_eq!(status, Q4VK_ERROR_INVALID_ARGUMENT);
    assert!(last_error().contains("allocate"), "{}", last_error());
    assert_nothing_logged();
}
