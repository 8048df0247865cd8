//! A q4vk context: instance, device, pipelines and the synchronous-submission state.
//! Safe to share between threads: submissions and staging sit behind one mutex, the
//! pipeline map and the x/y descriptor cache behind their own.

use super::device::{Device, DeviceInfo, DeviceOptions, HostEnabled};
use super::instance::Instance;
use super::liveness::{Liveness, Token};
use super::log::{Logger, LEVEL_INFO};
use super::memory::DeviceAllocator;
use super::params::MAX_M;
use super::pipeline::{Pipelines, Tuning};
use super::rules::{BytesShapes, Rules};
use super::staging::GemvBuffers;
use super::submit::{QueueLock, Submitter};
use super::xy_sets::XySets;
use crate::error::Result;
use crate::plan::tuned::{runnable, SimtGroup, TunedBlob};
use crate::plan::tuned_gemm::gemm_tile_runnable;
use crate::plan::GemmTile;
use crate::plan::Overrides;
use ash::vk;
use std::ffi::CString;
use std::sync::{Arc, Mutex};

/// How to create a context.
#[derive(Debug, Clone, Default)]
pub struct ContextConfig {
    /// -1: best device; otherwise the index in the instance's device list (own device only).
    pub device_index: i32,
    /// Own device chosen as the best (`device_index` -1): CPU implementations of Vulkan
    /// count as no device (`Q4VK_CONTEXT_CPU_FALLBACK` then uses q4vk's CPU kernels).
    pub skip_cpu_devices: bool,
    /// Enable the validation layer (own instance only).
    pub validation: bool,
    /// Force the portable kernels.
    pub portable: bool,
    /// Own device: do not enable `VK_KHR_push_descriptor` (x/y go through the set ring).
    pub no_push_descriptors: bool,
    /// Borrow these host objects instead of creating an instance and device.
    pub adopt: Option<Adoption>,
    /// Workgroup size and rows per workgroup instead of the per-device choice (tuning
    /// experiments, e.g. `q4vk-bench --workgroup 256 --rows 8`); the subgroup size stays
    /// the device's. This, `unroll` or `split` makes one shape hold for matrices of short
    /// and of long rows.
    pub tuning: Option<(u32, u32)>,
    /// A pipeline-cache blob from an earlier context (`Pipelines::cache_data`); ignored
    /// unless it was made by the same driver and device.
    pub pipeline_cache: Vec<u8>,
    /// Chunks per row each invocation loads per step instead of the per-device choice
    /// (1..8; tuning experiments, `q4vk-bench --unroll U`).
    pub unroll: Option<u32>,
    /// Invocations sharing each chunk instead of the per-device choice (a power of two
    /// dividing the rows per workgroup, at most 32; `q4vk-bench --split S`).
    pub split: Option<u32>,
    /// A tuning blob of an earlier context (`vk::tune`): its SIMT GEMV shapes (one for
    /// matrices of short rows, one for long rows) replace the device row's where it was made on this device, driver and q4vk version and is whole;
    /// otherwise it is ignored (logged at INFO with the reason).
    pub tuned_blob: Vec<u8>,
    /// A tuning row to use instead of the device class's (`q4vk-bench --row`: a device
    /// treated as one without a fitted row).
    pub row: Option<&'static crate::plan::DeviceTuning>,
    /// The host's allocator of device memory for matrices (`None`: q4vk allocates its own).
    pub allocator: Option<Arc<dyn DeviceAllocator>>,
    /// Never use the tensor-core kernel (`Q4VK_CONTEXT_NO_COOPMAT`, `Q4VK_NO_COOPMAT=1`).
    pub no_coop: bool,
    /// Of the tensor-core kernels, only the GEMM on the SIMT layout (`vk::coop_tiles`):
    /// matrices stay in the SIMT layout even where the tensor-core layout's kernels could run
    /// (comparisons: `q4vk-bench --coop-tiles`).
    pub coop_tiles_only: bool,
    /// When the SIMT GEMV runs on x in 8-bit digits with packed integer dot products
    /// (`vk::int_dot`).
    pub int_dot: IntDot,
    /// Fixed choices replacing the rules' (tuning experiments and tests: `q4vk-bench
    /// --coop`, `--coop-gemm`, `--gemm-from`, `--gemm-tile`, `--gemm-ksplit`,
    /// `--coop-gemm-slices`), checked at creation.
    pub overrides: Overrides,
    /// Own device: capture the compiler statistics of every pipeline where the device
    /// offers `VK_KHR_pipeline_executable_properties` (`Pipelines::statistics`,
    /// `q4vk-bench --stats`).
    pub pipeline_statistics: bool,
}

/// When a context runs the integer dot-product GEMV (`vk::int_dot`) for SIMT matrices (calls
/// with a workspace, up to `vk::gemv::int_dot_gemv_up_to` rows).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum IntDot {
    /// Where the device has `shaderIntegerDotProduct` and reports packed signed 8-bit dot
    /// products accelerated, on the calls where the device's tuning row says x in digits
    /// pays (`IntDotReach::pays`: where it is faster than the f32 kernel, its pre-pass
    /// included; bench/RESULTS.md), or x rounded to bytes where a call allows it
    /// (`IntDotReach::bytes_pay`).
    #[default]
    Auto,
    /// Never: the f32 kernel (`Q4VK_CONTEXT_NO_INTDOT`, `Q4VK_NO_INTDOT=1`).
    Off,
    /// Wherever the device has `shaderIntegerDotProduct`, accelerated or not, on every call
    /// with a workspace within the kernel's reach in m, whatever the matrix's size (tests
    /// on lavapipe, comparisons; `Q4VK_INTDOT=1`).
    Forced,
}

/// The host's Vulkan objects a context borrows.
#[derive(Debug, Clone)]
pub struct Adoption {
    /// The host's `vkGetInstanceProcAddr`.
    pub get_instance_proc_addr: vk::PFN_vkGetInstanceProcAddr,
    /// `VkInstance`.
    pub instance: vk::Instance,
    /// `VkPhysicalDevice`.
    pub physical: vk::PhysicalDevice,
    /// `VkDevice`.
    pub device: vk::Device,
    /// `VkQueue`, or null when the host only records.
    pub queue: vk::Queue,
    /// The queue's family.
    pub queue_family: u32,
    /// Device extensions the host enabled.
    pub extensions: Vec<CString>,
    /// The optional kernels' features, as the host's feature chain enabled them.
    pub features: super::features::HostFeatures,
    /// The host's `VkApplicationInfo.apiVersion`.
    pub api_version: u32,
    /// Host lock around q4vk's submits to the queue.
    pub lock: Option<QueueLock>,
}

/// Limits the dispatcher respects; the device's by default, lowered by tests to exercise
/// buffer and dispatch splitting on small matrices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest buffer of one matrix part, in bytes.
    pub max_part_bytes: u64,
    /// Upload matrices through a staging buffer and a copy even into mappable device
    /// memory (the path of discrete GPUs; tests force it on unified-memory devices).
    pub staged_uploads: bool,
}

/// q4vk's own command buffer and staging, used one call at a time.
pub struct Exec {
    /// One-shot submission.
    pub submitter: Submitter,
    /// Buffers of `q4vk_gemv` (staging and the integer dot-product GEMV's workspace).
    pub buffers: GemvBuffers,
}

/// A Vulkan context.
pub struct Context {
    /// Submission state (behind a mutex: one q4vk submission at a time).
    pub exec: Mutex<Exec>,
    /// x/y descriptor sets when the device has no push descriptors.
    pub xy_sets: Option<Mutex<XySets>>,
    /// Pipelines and layouts.
    pub pipelines: Pipelines,
    /// Using the tensor-core kernel (`vk::coop`) for matrices created on this context.
    pub coop: bool,
    /// What every kernel decision reads: the device's class, its tuning row, the caller's
    /// fixed choices, the kernel families the context runs.
    pub rules: Rules,
    /// Dispatcher limits.
    pub limits: Limits,
    /// The host's queue lock (adopted queue).
    pub queue_lock: Option<QueueLock>,
    /// The host's allocator of device memory for matrices, where it gave one.
    pub allocator: Option<Arc<dyn DeviceAllocator>>,
    /// The device (keeps the instance alive).
    pub device: Arc<Device>,
    /// Log sink.
    pub logger: Arc<Logger>,
    /// Held while the context lives: bindings made on it hold its token
    /// ([`Context::liveness`]).
    alive: Liveness,
}

impl Context {
    /// A token of this context's life, for objects that must be used with it alone.
    pub fn liveness(&self) -> Token {
        self.alive.token()
    }

    /// Whether `token` ([`Context::liveness`]) is this context's.
    pub fn is(&self, token: &Token) -> bool {
        self.alive.is(token)
    }

    /// Replaces one or more fixed choices for later calls (tuning sweeps and tests run
    /// several on the same matrices), checked as at creation.
    pub fn set_overrides(&mut self, edit: impl FnOnce(&mut Overrides)) -> Result<()> {
        self.rules.set_overrides(edit)
    }

    /// Creates a context as `config` says.
    pub fn new(config: ContextConfig, logger: Logger) -> Result<Context> {
        let logger = Arc::new(logger);
        let want_coop = !(config.portable || config.no_coop);
        let (device, queue_lock) = match &config.adopt {
            None => {
                let instance = Arc::new(Instance::create(config.validation, logger.clone())?);
                (
                    Arc::new(Device::create(
                        instance,
                        config.device_index,
                        DeviceOptions {
                            no_push: config.no_push_descriptors,
                            want_coop,
                            want_statistics: config.pipeline_statistics,
                            skip_cpu_type: config.skip_cpu_devices,
                        },
                    )?),
                    None,
                )
            }
            Some(a) => {
                // SAFETY: the host's handles, valid until q4vk_context_destroy (contract).
                let instance = Arc::new(unsafe {
                    Instance::adopt(a.get_instance_proc_addr, a.instance, logger.clone())
                });
                let names: Vec<&std::ffi::CStr> =
                    a.extensions.iter().map(|c| c.as_c_str()).collect();
                // SAFETY: a valid physical device of the host's instance (contract).
                let device_api = unsafe {
                    instance
                        .instance
                        .get_physical_device_properties(a.physical)
                        .api_version
                };
                let int_dot = a
                    .features
                    .run_int_dot(&names, a.api_version.min(device_api));
                // SAFETY: as above; the handles belong to that instance (contract).
                let device = unsafe {
                    Device::adopt(
                        instance,
                        a.physical,
                        a.device,
                        a.queue,
                        a.queue_family,
                        &names,
                        HostEnabled {
                            coop: want_coop && a.features.run_coop(&names),
                            int_dot,
                            device_scope_atomics: a.features.device_scope_atomics(),
                        },
                    )?
                };
                (Arc::new(device), a.lock)
            }
        };
        logger.log(LEVEL_INFO, &device.capabilities());
        let info = &device.info;
        let subgroup_ok = info.subgroup_kernels_ok();
        let portable = config.portable || !subgroup_ok;
        // The integer dot-product GEMV is settled below, once the device is known to run it.
        let mut rules = match config.row {
            Some(row) => Rules::with_row(info.class(), row, portable, false),
            None => Rules::for_class(info.class(), portable, false),
        };
        rules.set_overrides(|o| *o = config.overrides)?;
        if !config.tuned_blob.is_empty() {
            let class = info.class();
            let taken = match TunedBlob::decode(&config.tuned_blob, &device.identity()) {
                Err(why) => Err(why),
                Ok(_) if portable => Err("the portable kernels have one shape".into()),
                Ok(b) => match b
                    .simt_gemv
                    .into_iter()
                    .chain(b.int_dot_gemv)
                    .find(|s| !runnable(s, &class))
                {
                    Some(s) => Err(format!("its shape {s:?} does not run on this device")),
                    None => match b.gemm.entries().iter().find_map(|g| {
                        let simt = g.simt.filter(|t| !gemm_tile_runnable(t, &class, false));
                        let blocks = g.blocks.filter(|t| !gemm_tile_runnable(t, &class, true));
                        simt.map(|t| ("SIMT GEMM", t))
                            .or(blocks.map(|t| ("GEMM on GGUF blocks", t)))
                    }) {
                        Some((what, t)) => {
                            Err(format!("its {what} tile {t:?} does not run on this device"))
                        }
                        None => Ok(b),
                    },
                },
            };
            let said = match taken {
                Ok(b) => {
                    let tuning = |s: &crate::plan::tuning::SimtGemv| {
                        Tuning::for_device(false, s, class.subgroup_size, class.min_subgroup_size)
                    };
                    rules.simt_groups = b.simt_gemv.map(|s| tuning(&s));
                    rules.simt_tuned = true;
                    rules.set_tuned_blocks_shape(b.blocks_gemv);
                    rules.blocks_tuned = true;
                    let int_dot = match b.int_dot_gemv {
                        Some(s) => {
                            rules.int_dot_simt = Some(tuning(&s));
                            rules.int_dot_tuned = true;
                            format!("{s} ({:.3} of the table's time)", b.int_dot_time_vs_table)
                        }
                        None => "the table's".into(),
                    };
                    rules.simt_gemm_tuned = b.gemm.tiles(false);
                    rules.blocks_gemm_tuned = b.gemm.tiles(true);
                    let gemm = gemm_tiles_said(&b);
                    let simt = SimtGroup::ALL
                        .iter()
                        .map(|g| {
                            format!(
                                "on {g} {} ({:.3} of the table's time where tuned)",
                                b.simt_gemv[g.index()],
                                b.simt_time_vs_table[g.index()]
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(", ");
                    format!(
                        "used: SIMT GEMV {simt}; GEMV on GGUF blocks {} ({:.3} of the table's time where tuned); integer dot-product GEMV {int_dot}; SIMT GEMM {gemm}",
                        b.blocks_gemv,
                        b.blocks_time_vs_table
                    )
                }
                Err(why) => format!("ignored ({why}); the table's shape"),
            };
            logger.log(
                LEVEL_INFO,
                &format!(
                    "tuning blob: {} bytes given, {said}",
                    config.tuned_blob.len()
                ),
            );
        }
        // A fixed shape (or part of one) holds for every call: each group of calls takes it
        // over its own shape.
        let int_dot = rules.int_dot_simt.as_mut();
        let bytes = rules.bytes_simt.as_mut().map(BytesShapes::each_mut);
        for tuning in rules
            .simt_groups
            .iter_mut()
            .chain(int_dot)
            .chain(bytes.into_iter().flatten())
        {
            fix_shape(tuning, &config, info, portable)?;
        }
        let tuning = rules.simt();
        if config.adopt.is_some() && config.validation {
            logger.log(
                LEVEL_INFO,
                "Q4VK_CONTEXT_VALIDATION is ignored for an adopted device: layers belong to the host's instance",
            );
        }
        logger.log(
            LEVEL_INFO,
            &format!(
                "{} kernels, workgroup {}, {} rows per workgroup, unroll {}, split {}",
                if portable { "portable" } else { "subgroup" },
                tuning.workgroup,
                tuning.rows,
                tuning.unroll,
                tuning.split
            ),
        );
        if !config.pipeline_cache.is_empty() {
            let props = unsafe {
                // SAFETY: a plain query on a live physical device.
                device
                    .instance
                    .instance
                    .get_physical_device_properties(device.physical)
            };
            let used = super::pipeline::cache_blob_matches(&config.pipeline_cache, &props);
            logger.log(
                LEVEL_INFO,
                &format!(
                    "pipeline cache: {} bytes given, {}",
                    config.pipeline_cache.len(),
                    if used {
                        "used"
                    } else {
                        "ignored (not a cache of this driver and device)"
                    }
                ),
            );
        }
        let mut submitter = Submitter::new(&device)?;
        let coop =
            want_coop && !portable && !config.coop_tiles_only && device.coop_offer.fragments && {
                let probed = super::coop::probe(&device, &mut submitter, queue_lock.as_ref());
                if let Err(e) = &probed {
                    logger.log(
                        LEVEL_INFO,
                        &format!("tensor-core layout not used ({e}); SIMT layout"),
                    );
                }
                probed.is_ok()
            };
        if coop {
            logger.log(
                LEVEL_INFO,
                "tensor-core GEMV (VK_KHR_cooperative_matrix) for new matrices",
            );
        }
        rules.coop_fragments = coop;
        // Subgroup-scope fragments: not on contexts that keep to the portable kernels.
        rules.coop_tiles = device.coop_offer.tiles.filter(|_| want_coop && !portable);
        if let Some(s) = rules.coop_tiles {
            logger.log(
                LEVEL_INFO,
                &format!(
                    "tensor-core GEMM on the SIMT layout available ({} x {} x {} f16 fragments), {}",
                    s.m,
                    s.n,
                    s.k,
                    match rules.overrides().coop_tiles.unwrap_or(rules.row.coop_tiles_gemm) {
                        true => "run where a GEMM runs",
                        false => "not run by default on this device",
                    }
                ),
            );
        }
        let int_dot = !portable
            && match (config.int_dot, device.int_dot) {
                (IntDot::Off, _) | (_, None) => false,
                (IntDot::Auto, Some(accelerated)) => accelerated,
                (IntDot::Forced, Some(_)) => true,
            };
        if int_dot {
            logger.log(
                LEVEL_INFO,
                "integer dot-product GEMV (x in 8-bit digits) for SIMT matrices given a workspace",
            );
        }
        rules.int_dot = int_dot;
        rules.int_dot_everywhere = int_dot && config.int_dot == IntDot::Forced;
        let pipelines = Pipelines::new(
            &device,
            *rules.simt(),
            portable,
            coop,
            rules.coop_tiles.is_some(),
            int_dot,
            &config.pipeline_cache,
        )?;
        let limits = Limits {
            max_part_bytes: info.max_storage_range.min(info.max_allocation).min(1 << 31) / 16 * 16,
            staged_uploads: false,
        };
        let xy_sets = device
            .push_descriptor
            .is_none()
            .then(|| Mutex::new(XySets::new(&device)));
        Ok(Context {
            exec: Mutex::new(Exec {
                submitter,
                buffers: GemvBuffers::default(),
            }),
            xy_sets,
            pipelines,
            coop,
            rules,
            limits,
            queue_lock,
            allocator: config.allocator,
            device,
            logger,
            alive: Liveness::default(),
        })
    }

    /// Records with `record` into q4vk's command buffer, submits and waits.
    pub fn submit(&self, record: impl FnOnce(vk::CommandBuffer) -> Result<()>) -> Result<()> {
        let mut exec = self.exec.lock().unwrap_or_else(|e| e.into_inner());
        exec.submitter.run(self.queue_lock.as_ref(), record)
    }

    /// The device's name.
    pub fn device_name(&self) -> &str {
        &self.device.info.name
    }

    /// Which GEMV kernel new matrices of this context use: "coopmat" (tensor cores),
    /// "subgroup" or "portable".
    pub fn kernel_path(&self) -> &'static str {
        if self.coop {
            "coopmat"
        } else if self.rules.portable {
            "portable"
        } else {
            "subgroup"
        }
    }
}

/// The GEMMs' tiles of a tuning blob in words, for its log line: per m timed, each GEMM's
/// tile and its time against the table's, or the table's.
fn gemm_tiles_said(b: &TunedBlob) -> String {
    let entries = b.gemm.entries();
    if entries.is_empty() {
        return "the table's tiles (no prefill m timed)".into();
    }
    let tile = |t: Option<GemmTile>, ratio: f32| match t {
        Some(t) => format!(
            "tile ({}, {}, {}, {}) ({ratio:.3} of the table's time)",
            t.tx, t.ty, t.rn, t.rm
        ),
        None => "the table's tile".into(),
    };
    let said: Vec<String> = entries
        .iter()
        .map(|g| {
            format!(
                "from m = {} {}, on GGUF blocks {}",
                g.m,
                tile(g.simt, g.simt_time_vs_table),
                tile(g.blocks, g.blocks_time_vs_table)
            )
        })
        .collect();
    said.join("; ")
}

/// Applies the context's fixed SIMT GEMV shape (`ContextConfig::tuning`, `unroll`, `split`)
/// to `tuning`, checked against the device.
fn fix_shape(
    tuning: &mut Tuning,
    config: &ContextConfig,
    info: &DeviceInfo,
    portable: bool,
) -> Result<()> {
    if let Some((workgroup, rows)) = config.tuning {
        let valid = workgroup.is_power_of_two()
            && workgroup >= info.subgroup_size.max(tuning.subgroup)
            && workgroup <= info.max_workgroup
            && (1..=32).contains(&rows);
        if !valid {
            return Err(crate::error::invalid!(
                "tuning ({workgroup}, {rows}): the workgroup must be a power of two from the subgroup size to {}, rows 1..32",
                info.max_workgroup
            ));
        }
        tuning.workgroup = workgroup;
        tuning.rows = rows;
        tuning.min_workgroup = tuning.min_workgroup.min(workgroup);
    }
    if let Some(unroll) = config.unroll {
        if !(1..=8).contains(&unroll) {
            return Err(crate::error::invalid!("unroll {unroll}: expected 1..8"));
        }
        tuning.unroll = unroll;
    }
    if let Some(split) = config.split {
        tuning.split = split;
    }
    if !tuning.split.is_power_of_two()
        || !tuning.rows.is_multiple_of(tuning.split)
        || tuning.split > tuning.min_workgroup
    {
        return Err(crate::error::invalid!(
            "split {}: expected a power of two dividing the rows per workgroup ({}), at most {}",
            tuning.split,
            tuning.rows,
            tuning.min_workgroup
        ));
    }
    let shared = tuning.shared_bytes(portable, MAX_M);
    if shared > info.max_shared {
        return Err(crate::error::Error::Unsupported(format!(
            "workgroup {} x {} rows needs {shared} bytes of shared memory at m = {MAX_M}; the device has {}",
            tuning.workgroup, tuning.rows, info.max_shared
        )));
    }
    Ok(())
}
