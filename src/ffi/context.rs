//! Vulkan contexts: q4vk's own instance and device, or the host's adopted ones.

use super::backend::Backend;
use super::byte_counts::ByteCountRule;
use super::panic::{guard, guard_value};
use super::ptr::{
    c_strings, check_size, copy_c_string, handle, in_bytes, into_handle, out_bytes, read_struct,
    release, require, write_out, VersionedStruct,
};
use super::status::q4vk_status;
use super::version::check_header_version;
use crate::cpu::context::CpuContext;
use crate::error::{invalid, Error, Result};
use crate::parallel::resolve_threads;
use crate::plan::Overrides;
use crate::vk::context::{Adoption, Context, ContextConfig, IntDot};
use crate::vk::device::KEEP_CPU_VULKAN_ENV;
use crate::vk::features::HostFeatures;
use crate::vk::log::Logger;
use crate::vk::memory::{DeviceAllocator, HostAllocation};
use crate::vk::submit::QueueLock;
use ash::vk::{self, Handle};
use libc::c_char;
use std::ffi::c_void;
use std::sync::Arc;

/// A generic function pointer (`void (*)(void)`), cast to the real type by the receiver.
pub type q4vk_void_fn = Option<unsafe extern "C" fn()>;
/// Log callback: `level` is a `Q4VK_LOG_*` value, `message` a NUL-terminated string valid
/// only during the call. May be called from any thread that calls into the context; must
/// not unwind and must not call back into q4vk.
pub type q4vk_log_fn =
    Option<unsafe extern "C" fn(user: *mut c_void, level: u32, message: *const c_char)>;
/// Queue lock callback (see `q4vk_context_desc.queue_lock`).
pub type q4vk_queue_lock_fn = Option<unsafe extern "C" fn(user: *mut c_void)>;

/// Device memory the host's allocator gives for one of q4vk's buffers
/// (`q4vk_context_desc.allocate`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct q4vk_allocation {
    /// The `VkDeviceMemory`, of one of the types the request allows.
    pub memory: u64,
    /// Where the buffer binds in it: a multiple of the request's alignment, with the
    /// request's size available from there.
    pub offset: u64,
    /// The host's mapping of `offset` where the memory is host-visible and host-coherent
    /// (q4vk then writes the matrix in place), else NULL (q4vk copies it there through a
    /// staging buffer on its queue).
    pub mapped: *mut c_void,
}

/// Allocation callback (`q4vk_context_desc.allocate`): memory of `size` bytes at an
/// offset aligned to `alignment`, of a type among `memory_type_bits`, into `*out`; returns
/// 0 on success, anything else where the host has none.
pub type q4vk_allocate_fn = Option<
    unsafe extern "C" fn(
        user: *mut c_void,
        size: u64,
        alignment: u64,
        memory_type_bits: u32,
        out: *mut q4vk_allocation,
    ) -> i32,
>;
/// Free callback (`q4vk_context_desc.free`): takes back an allocation of `allocate`
/// (its buffer was destroyed).
pub type q4vk_free_fn =
    Option<unsafe extern "C" fn(user: *mut c_void, allocation: *const q4vk_allocation)>;

/// Errors.
pub const Q4VK_LOG_ERROR: u32 = 0;
/// Warnings (and validation-layer warnings).
pub const Q4VK_LOG_WARN: u32 = 1;
/// Informational: the device and kernel variant chosen.
pub const Q4VK_LOG_INFO: u32 = 2;
/// Debug detail.
pub const Q4VK_LOG_DEBUG: u32 = 3;
/// Enable `VK_LAYER_KHRONOS_validation` (own instance only; if installed) and deliver its
/// warnings and errors to the log callback as text beginning `validation: `. With the layer,
/// q4vk enables `VK_EXT_debug_utils` (where offered) and gives every Vulkan object it
/// creates a debug name that validation messages and GPU captures show: the matrix's shape
/// and part (`q4vk matrix 4096x11008 weights`, `... scales`, `... zeros`, `... offsets`,
/// `... column order`, `... part 2/3 weights` when split), the kernel and key of a pipeline
/// (`q4vk gemv pipeline PipelineKey { ... }`), `q4vk staging x`, `q4vk workspace`,
/// `q4vk command buffer` and so on. Objects on an adopted device stay unnamed: q4vk is not
/// told which instance extensions the host enabled.
pub const Q4VK_CONTEXT_VALIDATION: u32 = 0x1;
/// Force the portable kernels (no subgroup operations, no 8/16-bit storage, no f16
/// arithmetic). The environment variable `Q4VK_PORTABLE=1` does the same (read by
/// `q4vk_context_create` only; `Q4VK_NO_PUSH_DESCRIPTORS=1` there keeps q4vk's own device
/// from enabling `VK_KHR_push_descriptor`).
pub const Q4VK_CONTEXT_PORTABLE_KERNELS: u32 = 0x2;
/// `q4vk_context_desc.flags`: never use the tensor-core GEMV (`VK_KHR_cooperative_matrix`),
/// only the SIMT kernels; as the environment variable `Q4VK_NO_COOPMAT=1` does. Without
/// it, a context on q4vk's own device uses tensor cores where the device offers
/// cooperative matrices (f16 16 × 8 × 16, subgroups of 32) with the fragment layout the
/// kernel is written for (checked by a probe at creation; NVIDIA Turing and later).
pub const Q4VK_CONTEXT_NO_COOPMAT: u32 = 0x4;
/// A CPU context: no Vulkan is loaded; matrices live in host memory (4-bit codes, f32
/// scales, zero points) and `q4vk_gemv` runs a multi-threaded SIMD kernel (AVX-512, AVX2 +
/// FMA or NEON, the best the CPU has, else portable code) with fp32 accumulation, to the
/// same accuracy as the GPU kernels (with AVX-512 VNNI, AVX2, or NEON with the ARMv8.2 dot
/// product, m = 1 runs integer dot products of the codes and x split into three 8-bit
/// digits per element, each within 2^-23.99 of the largest magnitude of its block of 32). `q4vk_context_device_name` names the CPU context's
/// kernel and threads, e.g. `CPU (AVX2+FMA, 2 threads)`. `q4vk_cmd_gemv`,
/// `q4vk_gemv_workspace_size`, `q4vk_kernel_export` and the pipeline-cache functions answer
/// `Q4VK_ERROR_UNSUPPORTED` on it. Threads: `cpu_threads`. With an adopted
/// device: `Q4VK_ERROR_INVALID_ARGUMENT`. `device_index` (any value) and the Vulkan-only
/// flags are ignored.
pub const Q4VK_CONTEXT_CPU: u32 = 0x8;
/// A Vulkan context when a usable device exists, else (no Vulkan loader, no device, or a
/// driver whose instance or device creation fails) a CPU context as with
/// `Q4VK_CONTEXT_CPU`; an INFO log gives the reason. A CPU implementation of Vulkan
/// (`VK_PHYSICAL_DEVICE_TYPE_CPU`: lavapipe, SwiftShader, as on emulators and CI
/// machines) is not a usable device here, being many times slower than q4vk's CPU
/// kernels, unless `device_index` names it or the environment variable
/// `Q4VK_KEEP_CPU_VULKAN=1` keeps it (an INFO log then says so). Without this flag, such
/// a device is used like any other. `q4vk_context_device_name` says which
/// (a CPU context's name begins with `CPU (`). With an adopted device or with
/// `Q4VK_CONTEXT_CPU`: `Q4VK_ERROR_INVALID_ARGUMENT`.
pub const Q4VK_CONTEXT_CPU_FALLBACK: u32 = 0x10;
/// `q4vk_context_desc.flags`: never run the integer dot-product GEMV, only the f32 SIMT
/// kernels; as the environment variable `Q4VK_NO_INTDOT=1` does. Without it, a context
/// runs that kernel for SIMT matrices wherever they run the GEMV (m ≤ 8, and past 8 in
/// passes, see `q4vk_gemv_args.m`; `q4vk_gemv`, and `q4vk_cmd_gemv` given a workspace) on
/// matrices where x in digits pays for its pre-pass (the device's tuning row: at m = 1
/// from 2^25 weights, at larger m within the f32 GEMV's reach from 3072 rows; the f32 GEMV
/// on smaller ones), where the
/// device has `shaderIntegerDotProduct`
/// (`VK_KHR_shader_integer_dot_product`; an adopted device: enabled by the host) and
/// reports `integerDotProduct4x8BitPackedSignedAccelerated`. x is split on the device into
/// three signed 8-bit digits per element, each within 2^-22 of the largest magnitude of
/// its block of 32 (at every magnitude, subnormals included), and each block of 32 codes is
/// 24 packed dot products, exact in int32. (`Q4VK_INTDOT=1` runs it on devices that do
/// not report acceleration too.) Calls with `Q4VK_GEMV_ROUND_X_TO_INT8` run it on x
/// rounded to bytes instead, where the row says that pays (see there).
pub const Q4VK_CONTEXT_NO_INTDOT: u32 = 0x20;
/// `q4vk_context_desc.flags`: every byte count given to a call on this context must be
/// exactly what the call reads or writes: a matrix desc's `weight_bytes`, `scales_bytes`,
/// `zeros_bytes` and `g_idx_bytes` (in `q4vk_matrix_create`), `x_len` and `y_len` of
/// `q4vk_gemv`, `x_bytes` and `y_len` of `q4vk_gemv_host`, and the x and y `range` of
/// `q4vk_cmd_gemv` (the workspace's may be larger); any other is
/// `Q4VK_ERROR_INVALID_ARGUMENT`, nothing written. For hosts that want a dtype or flag
/// mistake refused rather than computed. Without it larger counts are accepted (only the
/// bytes the call needs are read), and one that is exactly what another element type
/// would need (f32 weights with `dtype` F16; f32 x with `Q4VK_GEMV_F16_ACTIVATIONS`) is
/// logged at `Q4VK_LOG_WARN`, naming both readings.
pub const Q4VK_CONTEXT_STRICT_SIZES: u32 = 0x40;

/// A context (opaque): a Vulkan device, or the CPU (`Q4VK_CONTEXT_CPU`). Created by
/// `q4vk_context_create`, released by `q4vk_context_destroy`. Safe to use from several
/// threads at once: q4vk serializes its own submissions.
pub struct q4vk_context {
    /// The engine: a Vulkan device or the CPU.
    pub(crate) backend: Backend,
    /// How calls on it judge the byte counts they are given (`Q4VK_CONTEXT_STRICT_SIZES`).
    pub(crate) byte_counts: ByteCountRule,
}

/// How to create a context. Initialize with `q4vk_context_desc_default`.
///
/// Own device (the default): leave `get_instance_proc_addr`, `instance`,
/// `physical_device`, `device` and `queue` NULL; q4vk loads the Vulkan loader at run time
/// (`libvulkan.so.1`; `libvulkan.so` on Android),
/// creates a Vulkan 1.1 instance and device, and destroys them in `q4vk_context_destroy`.
///
/// Adopted device: set `get_instance_proc_addr`, `instance`, `physical_device` and
/// `device` (all four), optionally `queue`, plus `queue_family_index`, `api_version` and
/// the enabled device extensions. q4vk borrows them, never destroys them and never enables
/// anything on them (it creates only its own pipelines, buffers, pools and fences on the
/// device, and destroys those). The host keeps them alive until `q4vk_context_destroy`
/// has returned for every context adopting them and `q4vk_matrix_destroy` for every matrix
/// created on the device: destroy q4vk's objects (in any order), then the `VkDevice`.
/// Several contexts may adopt one device and share its matrices (a matrix made by a context
/// that runs the tensor-core kernels needs a context that runs them too: contexts adopting
/// one device with the same features and flags do). The tensor-core kernels run where the
/// host enabled their features (`enabled_features`, `enabled_extensions`) and the device has
/// what they need, unless `Q4VK_CONTEXT_NO_COOPMAT`; `VK_KHR_push_descriptor` is used only
/// if it is in `enabled_extensions`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct q4vk_context_desc {
    /// `sizeof(q4vk_context_desc)`; smaller than v0 is refused, larger accepted.
    pub struct_size: u32,
    /// `Q4VK_HEADER_VERSION` of the caller's header (major and minor must match).
    pub header_version: u32,
    /// -1 (default): best device, discrete > integrated > virtual > cpu; else the index in
    /// `vkEnumeratePhysicalDevices` order. Own device only. Below -1:
    /// `Q4VK_ERROR_INVALID_ARGUMENT`, except on a CPU context (`Q4VK_CONTEXT_CPU`), which
    /// ignores the field whatever its value.
    pub device_index: i32,
    /// `Q4VK_CONTEXT_*` bits; others are refused.
    pub flags: u32,
    /// Most verbose `Q4VK_LOG_*` level delivered; default `Q4VK_LOG_WARN`.
    pub log_level: u32,
    /// Adopted device only: family of `queue` (and of q4vk's command pool).
    pub queue_family_index: u32,
    /// Adopted device only: the `VkApplicationInfo.apiVersion` the host used (≥ 1.1).
    pub api_version: u32,
    /// Adopted device only: entries in `enabled_extensions`.
    pub enabled_extension_count: u32,
    /// May be NULL: the library never prints.
    pub log: q4vk_log_fn,
    /// Passed to `log`.
    pub log_user: *mut c_void,
    /// `PFN_vkGetInstanceProcAddr` of the host's loader (adopted device).
    pub get_instance_proc_addr: q4vk_void_fn,
    /// `VkInstance` (adopted device).
    pub instance: *mut c_void,
    /// `VkPhysicalDevice` (adopted device).
    pub physical_device: *mut c_void,
    /// `VkDevice` (adopted device).
    pub device: *mut c_void,
    /// `VkQueue` of `queue_family_index`; may be NULL if the host only records with
    /// `q4vk_cmd_gemv` (then `q4vk_gemv` returns `Q4VK_ERROR_UNSUPPORTED`, and matrices
    /// need host-visible device memory).
    pub queue: *mut c_void,
    /// The feature chain the host enabled (its `VkPhysicalDeviceFeatures2` and the structs
    /// chained to it); NULL = none beyond core. Read for the tensor-core kernels: where it
    /// enables cooperativeMatrix (`VkPhysicalDeviceCooperativeMatrixFeaturesKHR`),
    /// vulkanMemoryModel and shaderFloat16 (their own structs or
    /// `VkPhysicalDeviceVulkan12Features`), `VK_KHR_cooperative_matrix` is in
    /// `enabled_extensions` and the device offers an f16 16 × 8 × 16 shape with 32-wide
    /// subgroups, new matrices use them (checked by a probe dispatch on `queue` at
    /// creation; without a queue they are not used). Read too for the integer dot-product
    /// kernel (`Q4VK_CONTEXT_NO_INTDOT`): shaderIntegerDotProduct in
    /// `VkPhysicalDeviceShaderIntegerDotProductFeatures` or `VkPhysicalDeviceVulkan13Features`,
    /// with `VK_KHR_shader_integer_dot_product` in `enabled_extensions` or Vulkan 1.3 in use
    /// (`api_version` and the device's). Other structs are skipped.
    pub enabled_features: *const c_void,
    /// Device extensions the host enabled (`enabled_extension_count` NUL-terminated names).
    pub enabled_extensions: *const *const c_char,
    /// Optional: called before each of q4vk's submits to an adopted queue (set both or
    /// neither). If NULL, the host must not submit to that queue while a q4vk call that
    /// submits runs: `q4vk_gemv`, `q4vk_gemv_host`, `q4vk_matrix_create` on
    /// non-host-visible memory, `q4vk_matrix_blob`, `q4vk_matrix_create_from_blob`,
    /// `q4vk_context_tune`, and `q4vk_context_create` itself (its probes). Only
    /// one of `queue_lock` / `queue_unlock` set (own device too):
    /// `Q4VK_ERROR_INVALID_ARGUMENT`.
    pub queue_lock: q4vk_queue_lock_fn,
    /// Called after each of those submits.
    pub queue_unlock: q4vk_queue_lock_fn,
    /// Passed to `queue_lock` and `queue_unlock`.
    pub queue_lock_user: *mut c_void,
    /// Optional (appended after v0; callers with the v0 `struct_size` read as NULL/0): a
    /// blob from `q4vk_context_pipeline_cache_data` of an earlier context, to skip shader
    /// compilation (on phones, tens to hundreds of ms per kernel variant). Used only if its
    /// `VkPipelineCacheHeaderVersionOne` names this driver and device (vendor, device ID,
    /// `pipelineCacheUUID`); anything else — another GPU, a driver update, a truncated
    /// file — is ignored (an INFO log says so), never an error. Copied during the call.
    pub pipeline_cache_data: *const c_void,
    /// Bytes at `pipeline_cache_data`; 0 = no blob.
    pub pipeline_cache_size: usize,
    /// Optional (appended after the pipeline-cache fields; older callers read as 0): most
    /// threads a GEMV of a CPU context uses; 0 (default) = one per available core, larger
    /// values are clamped to the core count. Not read by Vulkan contexts. Threads are
    /// started by each call and joined before it returns.
    pub cpu_threads: u32,
    /// Optional (appended after `cpu_threads`; older callers read as NULL/0): a blob from
    /// `q4vk_context_tune` of an earlier context. Its SIMT GEMV shapes (one per class of
    /// matrices: short rows, long rows) and its shape of the GEMV on GGUF Q4_K and Q5_K
    /// blocks replace the device row's where the blob was made on this device, driver and
    /// q4vk version and is whole
    /// (`q4vk_gemv_plan_info.shape_source` then says `Q4VK_GEMV_SHAPE_TUNED`); anything
    /// else is ignored with an INFO log saying why, never an error. Copied during the call.
    pub tuning_data: *const c_void,
    /// Bytes at `tuning_data`; 0 = no blob.
    pub tuning_size: usize,
    /// Optional (appended after `tuning_size`; older callers read as NULL), set both or
    /// neither: the host's allocator of device memory for the matrices made on this
    /// context (weights, scales, zero points or offsets, column order). q4vk creates each
    /// buffer, calls `allocate` with its `VkMemoryRequirements` and binds the memory given
    /// at its offset; when the matrix is destroyed it destroys the buffer and calls `free`
    /// with the same allocation. Staging, readback and q4vk's small internal buffers stay
    /// q4vk's own. The callbacks may run on any thread that creates or destroys a matrix,
    /// and must stay valid until the last matrix made on the context is destroyed (matrices
    /// may outlive their context). `q4vk_matrix_footprint` gives the sizes before creation.
    pub allocate: q4vk_allocate_fn,
    /// See `allocate`.
    pub free: q4vk_free_fn,
    /// Passed to `allocate` and `free`.
    pub allocator_user: *mut c_void,
}

// SAFETY: repr(C), starts with u32 struct_size; integers, raw pointers, Option<fn>.
unsafe impl VersionedStruct for q4vk_context_desc {
    // The v0 desc ended at `queue_lock_user`; the pipeline-cache fields were appended.
    const V0_SIZE: usize = std::mem::offset_of!(q4vk_context_desc, pipeline_cache_data);
    const NAME: &'static str = "q4vk_context_desc";
}

/// Fills `desc` with the defaults: own device, best device (-1), no flags, log level WARN,
/// no callbacks, `header_version = Q4VK_HEADER_VERSION`. NULL is ignored.
///
/// # Safety
/// `desc` must be NULL or point to a writable `q4vk_context_desc`.
#[no_mangle]
pub unsafe extern "C" fn q4vk_context_desc_default(desc: *mut q4vk_context_desc) {
    let value = q4vk_context_desc {
        struct_size: std::mem::size_of::<q4vk_context_desc>() as u32,
        header_version: super::version::Q4VK_HEADER_VERSION,
        device_index: -1,
        flags: 0,
        log_level: Q4VK_LOG_WARN,
        queue_family_index: 0,
        api_version: 0,
        enabled_extension_count: 0,
        log: None,
        log_user: std::ptr::null_mut(),
        get_instance_proc_addr: None,
        instance: std::ptr::null_mut(),
        physical_device: std::ptr::null_mut(),
        device: std::ptr::null_mut(),
        queue: std::ptr::null_mut(),
        enabled_features: std::ptr::null(),
        enabled_extensions: std::ptr::null(),
        queue_lock: None,
        queue_unlock: None,
        queue_lock_user: std::ptr::null_mut(),
        pipeline_cache_data: std::ptr::null(),
        pipeline_cache_size: 0,
        cpu_threads: 0,
        tuning_data: std::ptr::null(),
        tuning_size: 0,
        allocate: None,
        free: None,
        allocator_user: std::ptr::null_mut(),
    };
    let _ = guard("q4vk_context_desc_default", || {
        // SAFETY: `desc` is NULL (skipped) or writable (caller's contract).
        unsafe { write_out(desc, value, "desc") }.or(Ok(()))
    });
}

/// The host's allocator as its C callbacks.
#[derive(Debug)]
struct HostCallbacks {
    allocate: unsafe extern "C" fn(*mut c_void, u64, u64, u32, *mut q4vk_allocation) -> i32,
    free: unsafe extern "C" fn(*mut c_void, *const q4vk_allocation),
    /// `allocator_user`, kept as an address (the callbacks may run on any thread).
    user: usize,
}

impl DeviceAllocator for HostCallbacks {
    fn allocate(&self, size: u64, alignment: u64, memory_type_bits: u32) -> Option<HostAllocation> {
        let mut out = q4vk_allocation {
            memory: 0,
            offset: 0,
            mapped: std::ptr::null_mut(),
        };
        // SAFETY: the host's callback with its user pointer and a writable out-parameter
        // (its contract: valid while matrices of the context live).
        let status = unsafe {
            (self.allocate)(
                self.user as *mut c_void,
                size,
                alignment,
                memory_type_bits,
                &mut out,
            )
        };
        (status == 0).then(|| HostAllocation {
            memory: vk::DeviceMemory::from_raw(out.memory),
            offset: out.offset,
            mapped: out.mapped.cast(),
        })
    }

    fn free(&self, a: &HostAllocation) {
        let out = q4vk_allocation {
            memory: a.memory.as_raw(),
            offset: a.offset,
            mapped: a.mapped.cast(),
        };
        // SAFETY: as above; the allocation is the one `allocate` gave.
        unsafe { (self.free)(self.user as *mut c_void, &out) };
    }
}

/// The context switches of the environment: kill switches (triage of driver bugs; each
/// forces the next path down) and one forcing switch.
#[derive(Debug, Clone, Copy, Default)]
pub struct EnvSwitches {
    /// `Q4VK_PORTABLE=1`: the portable kernels.
    pub portable: bool,
    /// `Q4VK_NO_PUSH_DESCRIPTORS=1`: q4vk's own device without `VK_KHR_push_descriptor`.
    pub no_push_descriptors: bool,
    /// `Q4VK_NO_COOPMAT=1`: the SIMT kernels instead of the tensor-core one.
    pub no_coopmat: bool,
    /// The integer dot-product GEMV (`ContextConfig::int_dot`): `Q4VK_NO_INTDOT=1` never,
    /// `Q4VK_INTDOT=1` also where the device does not report it accelerated, else `Auto`.
    pub int_dot: IntDot,
    /// `Q4VK_KEEP_CPU_VULKAN=1`: `Q4VK_CONTEXT_CPU_FALLBACK` takes a CPU implementation of
    /// Vulkan (lavapipe, SwiftShader) as a usable device.
    pub keep_cpu_vulkan: bool,
}

/// The environment's switches, read here only (at context creation; the core never reads
/// the environment). Not part of the C API; tools that create contexts directly
/// (`q4vk-bench`) call it too.
pub fn env_switches() -> EnvSwitches {
    let on = |name: &str| std::env::var(name).is_ok_and(|v| v == "1");
    EnvSwitches {
        portable: on("Q4VK_PORTABLE"),
        no_push_descriptors: on("Q4VK_NO_PUSH_DESCRIPTORS"),
        no_coopmat: on("Q4VK_NO_COOPMAT"),
        int_dot: match (on("Q4VK_NO_INTDOT"), on("Q4VK_INTDOT")) {
            (true, _) => IntDot::Off,
            (false, true) => IntDot::Forced,
            (false, false) => IntDot::Auto,
        },
        keep_cpu_vulkan: on(KEEP_CPU_VULKAN_ENV),
    }
}

/// Reads the adopted-device part of a desc (None: own device).
///
/// # Safety
/// `enabled_extensions` must be valid as `q4vk_context_desc` documents, and
/// `get_instance_proc_addr` the host's `PFN_vkGetInstanceProcAddr`.
unsafe fn adoption_of(d: &q4vk_context_desc) -> Result<Option<Adoption>> {
    let given = [
        d.get_instance_proc_addr.is_some(),
        !d.instance.is_null(),
        !d.physical_device.is_null(),
        !d.device.is_null(),
    ];
    if given.iter().all(|&g| !g) {
        if !d.queue.is_null() {
            return Err(invalid!("desc->queue is set but desc->device is NULL"));
        }
        return Ok(None);
    }
    if given.iter().any(|&g| !g) {
        return Err(Error::NullPointer(
            "an adopted device needs all of desc->get_instance_proc_addr, instance, physical_device and device".into(),
        ));
    }
    if d.api_version < vk::API_VERSION_1_1 {
        return Err(Error::Unsupported(format!(
            "desc->api_version is {:#x}; q4vk needs Vulkan 1.1 (VK_API_VERSION_1_1 = {:#x})",
            d.api_version,
            vk::API_VERSION_1_1
        )));
    }
    let extensions = if d.enabled_extension_count > 0 {
        // SAFETY: `enabled_extension_count` NUL-terminated names (caller's contract).
        unsafe {
            c_strings(
                d.enabled_extensions,
                d.enabled_extension_count as usize,
                "desc->enabled_extensions",
            )
        }?
    } else {
        Vec::new()
    };
    let lock = match (d.queue_lock, d.queue_unlock) {
        (Some(lock), Some(unlock)) => Some(QueueLock {
            lock,
            unlock,
            user: d.queue_lock_user,
        }),
        // Only one of them set was refused by q4vk_context_create.
        _ => None,
    };
    let gipa = d.get_instance_proc_addr.expect("checked above");
    // SAFETY: the host passes its PFN_vkGetInstanceProcAddr as q4vk_void_fn (contract);
    // both are function pointers of the C calling convention.
    let get_instance_proc_addr = unsafe {
        std::mem::transmute::<unsafe extern "C" fn(), vk::PFN_vkGetInstanceProcAddr>(gipa)
    };
    Ok(Some(Adoption {
        get_instance_proc_addr,
        instance: vk::Instance::from_raw(d.instance as u64),
        physical: vk::PhysicalDevice::from_raw(d.physical_device as u64),
        device: vk::Device::from_raw(d.device as u64),
        queue: vk::Queue::from_raw(d.queue as u64),
        queue_family: d.queue_family_index,
        extensions,
        // SAFETY: NULL or the host's enabled-feature chain (contract of the field).
        features: unsafe { HostFeatures::from_chain(d.enabled_features) },
        api_version: d.api_version,
        lock,
    }))
}

/// Creates a context (see `q4vk_context_desc`) and stores it in `*out`.
///
/// Statuses: `Q4VK_ERROR_NULL_POINTER` (desc or out NULL, or an incomplete adopted set),
/// `Q4VK_ERROR_INVALID_ARGUMENT` (struct_size, unknown flags or log level, inconsistent
/// fields), `Q4VK_ERROR_ABI_MISMATCH` (header_version), `Q4VK_ERROR_NO_DEVICE` (no Vulkan
/// loader on this machine, no Vulkan 1.1 device with a compute queue, or `device_index` out
/// of range), `Q4VK_ERROR_UNSUPPORTED` (adopted device older than 1.1),
/// `Q4VK_ERROR_VULKAN` / `_OUT_OF_*_MEMORY` (a Vulkan call failed; the message names it).
/// With `Q4VK_CONTEXT_CPU_FALLBACK` the device errors give a CPU context instead; with
/// `Q4VK_CONTEXT_CPU` no Vulkan call is made. `*out` is written only on success; release it with `q4vk_context_destroy`.
///
/// # Safety
/// `desc` must be NULL or a valid desc whose pointers are valid as documented; `out` NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn q4vk_context_create(
    desc: *const q4vk_context_desc,
    out: *mut *mut q4vk_context,
) -> q4vk_status {
    guard("q4vk_context_create", || {
        // SAFETY: `desc` is NULL or a readable desc of its `struct_size` (contract).
        let d = unsafe { read_struct(desc, "desc") }?;
        require(out, "out")?;
        check_header_version(d.header_version)?;
        let known = Q4VK_CONTEXT_VALIDATION
            | Q4VK_CONTEXT_PORTABLE_KERNELS
            | Q4VK_CONTEXT_NO_COOPMAT
            | Q4VK_CONTEXT_CPU
            | Q4VK_CONTEXT_CPU_FALLBACK
            | Q4VK_CONTEXT_NO_INTDOT
            | Q4VK_CONTEXT_STRICT_SIZES;
        if d.flags & !known != 0 {
            return Err(invalid!(
                "desc->flags has unknown bits {:#x}",
                d.flags & !known
            ));
        }
        if d.log_level > Q4VK_LOG_DEBUG {
            return Err(invalid!(
                "desc->log_level is {}; expected Q4VK_LOG_ERROR (0) .. Q4VK_LOG_DEBUG (3)",
                d.log_level
            ));
        }
        if d.queue_lock.is_some() != d.queue_unlock.is_some() {
            return Err(invalid!(
                "set both desc->queue_lock and desc->queue_unlock, or neither"
            ));
        }
        let allocator = match (d.allocate, d.free) {
            (None, None) => None,
            (Some(allocate), Some(free)) => Some(Arc::new(HostCallbacks {
                allocate,
                free,
                user: d.allocator_user as usize,
            }) as Arc<dyn DeviceAllocator>),
            _ => {
                return Err(invalid!(
                    "set both desc->allocate and desc->free, or neither"
                ))
            }
        };
        // SAFETY: the desc's pointers are valid as documented (contract).
        let adopt = unsafe { adoption_of(&d) }?;
        let (cpu, fallback) = (
            d.flags & Q4VK_CONTEXT_CPU != 0,
            d.flags & Q4VK_CONTEXT_CPU_FALLBACK != 0,
        );
        if cpu && fallback {
            return Err(invalid!(
                "desc->flags has both Q4VK_CONTEXT_CPU and Q4VK_CONTEXT_CPU_FALLBACK; set one"
            ));
        }
        if (cpu || fallback) && adopt.is_some() {
            return Err(invalid!(
                "desc->flags asks for a CPU context (Q4VK_CONTEXT_CPU or _CPU_FALLBACK) but desc adopts a Vulkan device"
            ));
        }
        let logger = Logger::new(d.log, d.log_user, d.log_level);
        let byte_counts = ByteCountRule {
            strict: d.flags & Q4VK_CONTEXT_STRICT_SIZES != 0,
            logger,
        };
        let handle_of = |backend| {
            into_handle(q4vk_context {
                backend,
                byte_counts,
            })
        };
        let cpu_context = || Backend::Cpu(CpuContext::new(resolve_threads(d.cpu_threads)));
        if cpu {
            let context = handle_of(cpu_context());
            // SAFETY: `out` is writable (contract; checked non-NULL above).
            return unsafe { write_out(out, context, "out") };
        }
        // A CPU context ignores device_index; a Vulkan one (also with the fallback) uses it.
        if d.device_index < -1 {
            return Err(invalid!(
                "desc->device_index is {}; expected -1 (best device) or an index >= 0",
                d.device_index
            ));
        }
        let pipeline_cache = if d.pipeline_cache_size == 0 {
            Vec::new()
        } else {
            // SAFETY: `pipeline_cache_size` readable bytes, copied during the call.
            let blob = unsafe {
                in_bytes(
                    d.pipeline_cache_data.cast::<u8>(),
                    d.pipeline_cache_size,
                    "desc->pipeline_cache_data",
                )
            }?;
            crate::alloc::collect(blob.iter().copied(), "the pipeline-cache blob")?
        };
        let tuned_blob = if d.tuning_size == 0 {
            Vec::new()
        } else {
            // SAFETY: `tuning_size` readable bytes, copied during the call.
            let blob = unsafe {
                in_bytes(
                    d.tuning_data.cast::<u8>(),
                    d.tuning_size,
                    "desc->tuning_data",
                )
            }?;
            crate::alloc::collect(blob.iter().copied(), "the tuning blob")?
        };
        let env = env_switches();
        // The fallback's "usable device" is a GPU unless the caller names the device or
        // asks to keep CPU implementations of Vulkan (the CPU kernels are faster).
        let skip_cpu_devices = fallback && d.device_index == -1 && !env.keep_cpu_vulkan;
        let config = ContextConfig {
            device_index: d.device_index,
            skip_cpu_devices,
            validation: d.flags & Q4VK_CONTEXT_VALIDATION != 0,
            portable: d.flags & Q4VK_CONTEXT_PORTABLE_KERNELS != 0 || env.portable,
            no_push_descriptors: env.no_push_descriptors,
            adopt,
            tuning: None,
            pipeline_cache,
            unroll: None,
            split: None,
            no_coop: d.flags & Q4VK_CONTEXT_NO_COOPMAT != 0 || env.no_coopmat,
            coop_tiles_only: false,
            tuned_blob,
            row: None,
            allocator,
            int_dot: match (d.flags & Q4VK_CONTEXT_NO_INTDOT != 0, env.int_dot) {
                (true, _) => IntDot::Off,
                (false, int_dot) => int_dot,
            },
            overrides: Overrides::default(),
            pipeline_statistics: false,
        };
        let backend = match Context::new(config, logger) {
            Ok(c) => {
                if fallback && c.device.info.cpu {
                    let why = match d.device_index {
                        -1 => format!("{KEEP_CPU_VULKAN_ENV}=1 keeps it"),
                        index => format!("desc->device_index {index} names it"),
                    };
                    c.logger.log(
                        Q4VK_LOG_INFO,
                        &format!(
                            "Q4VK_CONTEXT_CPU_FALLBACK: using the CPU implementation of Vulkan {} ({why})",
                            c.device.info.name
                        ),
                    );
                }
                Backend::Vulkan(c)
            }
            Err(e) if fallback && no_usable_device(&e) => {
                let cpu = cpu_context();
                Logger::new(d.log, d.log_user, d.log_level).log(
                    Q4VK_LOG_INFO,
                    &format!(
                        "no usable Vulkan device ({e}); using the CPU: {}",
                        cpu.device_name()
                    ),
                );
                cpu
            }
            Err(e) => return Err(e),
        };
        let context = handle_of(backend);
        // SAFETY: `out` is writable (contract; checked non-NULL above).
        unsafe { write_out(out, context, "out") }
    })
}

/// Whether a failed Vulkan context creation means "no usable device" (so
/// `Q4VK_CONTEXT_CPU_FALLBACK` uses the CPU): no loader or device, or a driver that fails
/// or runs out of memory while q4vk sets it up. Host memory exhaustion is not one.
fn no_usable_device(e: &Error) -> bool {
    matches!(
        e,
        Error::NoDevice(_)
            | Error::Vulkan { .. }
            | Error::Unsupported(_)
            | Error::OutOfDeviceMemory(_)
            | Error::DeviceLost(_)
    )
}

/// Destroys a context and everything q4vk created for it (its own device and instance
/// included; never an adopted object). NULL is ignored. No call on this context may be in
/// progress, and no host command buffer recorded with it may be pending. Matrices may be
/// destroyed before or after the context (they keep q4vk's own device alive), and so may
/// bindings (`q4vk_gemv_binding_destroy`; a binding cannot be recorded once its context is
/// gone); on an adopted device, all of them before the host destroys its `VkDevice`.
///
/// # Safety
/// `ctx` must be NULL or a live context from `q4vk_context_create`, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn q4vk_context_destroy(ctx: *mut q4vk_context) {
    // SAFETY: NULL or a live context from q4vk_context_create, given up (contract).
    guard_value("q4vk_context_destroy", (), || unsafe { release(ctx) })
}

/// Copies the device's name NUL-terminated into `buf` (truncated to fit) and returns its
/// full length without the NUL. `buf` may be NULL when `buf_len` is 0; `ctx` NULL returns 0.
/// Thread-safe.
///
/// # Safety
/// `ctx` must be NULL or a live context; `buf` NULL or writable for `buf_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn q4vk_context_device_name(
    ctx: *const q4vk_context,
    buf: *mut c_char,
    buf_len: usize,
) -> usize {
    guard_value("q4vk_context_device_name", 0, || {
        // SAFETY: NULL or a live context (contract).
        match unsafe { handle(ctx, "ctx") } {
            // SAFETY: `buf` is NULL or writable for `buf_len` bytes (contract).
            Ok(c) => unsafe { copy_c_string(c.backend.device_name(), buf, buf_len) },
            Err(_) => 0,
        }
    })
}

/// Stores in `*bytes` the current size of the context's pipeline-cache blob (see
/// `q4vk_context_pipeline_cache_data`). The blob grows as kernel variants are first used
/// (each `m`, scale type, zero-point mode and f16-activation choice is one variant).
///
/// Statuses: `NULL_POINTER`, `VULKAN` (`vkGetPipelineCacheData` failed). Thread-safe.
///
/// # Safety
/// `ctx` NULL or live; `bytes` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn q4vk_context_pipeline_cache_size(
    ctx: *const q4vk_context,
    bytes: *mut usize,
) -> q4vk_status {
    guard("q4vk_context_pipeline_cache_size", || {
        // SAFETY: NULL or a live context (contract).
        let c = unsafe { handle(ctx, "ctx") }?;
        require(bytes, "bytes")?;
        let blob = c
            .backend
            .vulkan("q4vk_context_pipeline_cache_size")?
            .pipelines
            .cache_data()?;
        // SAFETY: `bytes` is writable (contract; checked non-NULL).
        unsafe { write_out(bytes, blob.len(), "bytes") }
    })
}

/// Copies the context's pipeline-cache blob (`vkGetPipelineCacheData`: compiled kernels,
/// tagged with the driver's and device's identity) into `data` and stores its length in
/// `*written`. Save it after the first GEMVs (the kernel variants used so far are in it)
/// and pass it back in `q4vk_context_desc.pipeline_cache_data` at the next start. The blob
/// is opaque and specific to the driver version and device; a mismatching one is ignored.
///
/// Size first with `q4vk_context_pipeline_cache_size`; a buffer smaller than the blob at
/// the time of this call (it may have grown since) gives `BUFFER_TOO_SMALL` and nothing is
/// written. Statuses: `NULL_POINTER`, `BUFFER_TOO_SMALL`, `VULKAN`. Thread-safe.
///
/// # Safety
/// `ctx` NULL or live; `data` NULL or writable for `data_bytes` bytes; `written` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn q4vk_context_pipeline_cache_data(
    ctx: *const q4vk_context,
    data: *mut c_void,
    data_bytes: usize,
    written: *mut usize,
) -> q4vk_status {
    guard("q4vk_context_pipeline_cache_data", || {
        // SAFETY: NULL or a live context (contract).
        let c = unsafe { handle(ctx, "ctx") }?;
        require(data, "data")?;
        require(written, "written")?;
        let blob = c
            .backend
            .vulkan("q4vk_context_pipeline_cache_data")?
            .pipelines
            .cache_data()?;
        check_size("data_bytes", data_bytes, blob.len())?;
        // SAFETY: `data` is writable for `data_bytes` ≥ the blob's length (contract).
        unsafe { out_bytes(data.cast(), blob.len(), "data") }?.copy_from_slice(&blob);
        // SAFETY: `written` is writable (contract; checked non-NULL).
        unsafe { write_out(written, blob.len(), "written") }
    })
}

/// The Vulkan context behind a handle (None for NULL or a CPU context), for Rust tests and
/// tools that tune limits (lowering them exercises buffer and dispatch splitting). Not
/// part of the C API.
///
/// # Safety
/// `ctx` must be NULL or a live context not used concurrently while the reference lives.
pub unsafe fn context_mut<'a>(ctx: *mut q4vk_context) -> Option<&'a mut Context> {
    // SAFETY: NULL or live and unshared while the reference lives (contract).
    match unsafe { ctx.as_mut() }?.backend {
        Backend::Vulkan(ref mut c) => Some(c),
        Backend::Cpu(_) => None,
    }
}
