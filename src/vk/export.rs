//! Kernel export (`q4vk_kernel_export`): everything a host that records its own command
//! buffers (ncnn's `VkCompute`) needs to run q4vk's GEMV with its own pipeline and
//! buffers — SPIR-V (`shaders/spv/gemv_q4_export_*.spv`, ncnn's conventions, see
//! `shaders/gemv_export.glsl`), bindings with their byte sizes, push constants,
//! specialization constants, local size and group counts. Pure: no Vulkan call. The
//! extended kernel (`Q4VK_KERNEL_EXPORT_EXTENDED`, `gemv_q4_export_extended_*.spv`) appends
//! bindings for per-group offsets and the column order of imported matrices. For m > 8 the
//! export is the SIMT GEMM (`gemm_q4_export{,_extended}.spv`, same conventions, m as an
//! eleventh push constant).

use super::device::DeviceInfo;
use super::params::{dispatch_grid, xy_extent, Epilogue, GemvParams, XyExtent, MAX_M};
use super::pipeline::{GemmKey, Push, Spec, Tuning, GEMM_PUSH_WORDS, SPECS};
use super::shaders;
use crate::error::{Error, Result};
use crate::layout::vk::VkLayout;
use crate::plan::{GemmTile, GEMM_TILE};
use crate::quant::q4::{Q4Shape, ScaleType};

/// Binding roles, in binding order (binding i has role i).
pub(crate) const ROLE_WEIGHTS: u32 = 0;
/// Scales.
pub(crate) const ROLE_SCALES: u32 = 1;
/// Zero points (unread when symmetric).
pub(crate) const ROLE_ZEROS: u32 = 2;
/// Activations.
pub(crate) const ROLE_X: u32 = 3;
/// Output.
pub(crate) const ROLE_Y: u32 = 4;
/// Per-group f32 offsets (extended kernel; unread without them).
pub(crate) const ROLE_OFFSETS: u32 = 5;
/// Input of each column (extended kernel; unread without a column order).
pub(crate) const ROLE_K_ORDER: u32 = 6;
/// n f32 values added to every row of y (extended kernel with a bias).
pub(crate) const ROLE_BIAS: u32 = 7;
/// Q5_0's and Q5_1's fifth bits (the kernels on GGUF blocks, `vk::export_blocks`).
pub(crate) const ROLE_HIGH_BITS: u32 = 8;

/// Local size x, y, z (ncnn's convention).
pub const SPEC_LOCAL_SIZE: [u32; 3] = [233, 234, 235];

/// The specialization id of the extended GEMV's f16 y (`shaders/gemv_export.glsl`): after
/// the subgroup size in the subgroup variant, in its place in the portable one (which has
/// none).
pub fn gemv_spec_y_f16(subgroup: bool) -> u32 {
    if subgroup {
        11
    } else {
        10
    }
}
/// The specialization id of the extended GEMM's f16 y (`shaders/gemm_q4.comp`).
pub const GEMM_SPEC_Y_F16: u32 = 9;

/// Vulkan's guaranteed minimum limits, used when no device is known.
const MIN_MAX_GROUPS: u32 = 65535;
const MIN_MAX_SHARED: u32 = 16384;
const MIN_MAX_INVOCATIONS: u32 = 128;

/// What the export is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportRequest {
    /// Matrix shape.
    pub shape: Q4Shape,
    /// Stored scale type.
    pub scale: ScaleType,
    /// Activation rows, 1..=8.
    pub m: u32,
    /// f16 activations.
    pub x_f16: bool,
    /// f16 y (the extended kernel only).
    pub y_f16: bool,
    /// Elements between rows of x (≥ k).
    pub x_stride: u64,
    /// Elements between rows of y (≥ n).
    pub y_stride: u64,
    /// Subgroup variant (else portable).
    pub subgroup: bool,
    /// The extended kernel and what the matrix needs beyond the v0 layout.
    pub extras: Extras,
    /// The extended kernel with a bias (binding 7).
    pub bias: bool,
}

/// The extended export and what of it a matrix needs (all false: the v0 kernel of a plain
/// matrix).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Extras {
    /// The host takes the extended kernel (bindings 5 and 6 appended).
    pub extended: bool,
    /// The matrix has per-group f32 offsets, `w = scale·u + offset` (binding 5).
    pub offsets: bool,
    /// The matrix's columns are inputs out of order (binding 6).
    pub k_order: bool,
}

/// The device facts the export respects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportDevice {
    /// Workgroup shape (the context's, or the defaults).
    pub tuning: Tuning,
    /// `maxStorageBufferRange`.
    pub max_storage_range: u64,
    /// `maxComputeWorkGroupCount[0..2]`.
    pub max_groups: [u32; 2],
    /// `maxComputeSharedMemorySize`.
    pub max_shared: u32,
    /// Largest 1-D workgroup.
    pub max_workgroup: u32,
    /// The subgroup size the host rounds local sizes up to a multiple of (ncnn does), a
    /// power of two, or 0 for unknown: the GEMM's workgroup is at least this.
    pub subgroup_size: u32,
}

/// Default workgroup shape of a variant on a device of unknown vendor: the choice a
/// context makes there (`Tuning::for_device`).
pub fn default_tuning(subgroup: bool, subgroup_size: u32, min_subgroup_size: u32) -> Tuning {
    Tuning::for_device(
        !subgroup,
        &crate::plan::tuning::DEFAULT.simt_gemv,
        subgroup_size,
        min_subgroup_size,
    )
}

/// The workgroup never below `subgroup_size` (a power of two, or 0 for unknown): hosts
/// such as ncnn round the local size up to a multiple of it, and the kernel's WORKGROUP
/// constant must equal the local size.
pub fn round_to_subgroup(t: Tuning, subgroup_size: u32) -> Tuning {
    Tuning {
        workgroup: t.workgroup.max(subgroup_size),
        min_workgroup: t.min_workgroup.max(subgroup_size),
        ..t
    }
}

impl ExportDevice {
    /// No device known: Vulkan's guaranteed minimum limits, except the storage-buffer
    /// range (the host checks its own; only what 32-bit indexing cannot take is refused).
    pub fn unknown(tuning: Tuning) -> ExportDevice {
        ExportDevice {
            tuning,
            max_storage_range: u32::MAX as u64,
            max_groups: [MIN_MAX_GROUPS; 2],
            max_shared: MIN_MAX_SHARED,
            max_workgroup: MIN_MAX_INVOCATIONS,
            subgroup_size: 0,
        }
    }

    /// A known device with `tuning`.
    pub fn of(info: &DeviceInfo, tuning: Tuning) -> ExportDevice {
        ExportDevice {
            tuning,
            max_storage_range: info.max_storage_range,
            max_groups: info.max_groups,
            max_shared: info.max_shared,
            max_workgroup: info.max_workgroup,
            subgroup_size: info.subgroup_size,
        }
    }
}

/// One binding of the exported kernel (descriptor set 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportBinding {
    /// Binding number.
    pub binding: u32,
    /// `ROLE_*`.
    pub role: u32,
    /// Bytes the kernel may access (0: not read, bind any valid buffer).
    pub bytes: u64,
}

/// The exported kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// Subgroup variant.
    pub subgroup: bool,
    /// SPIR-V words.
    pub spirv: Vec<u32>,
    /// Bindings in binding order.
    pub bindings: Vec<ExportBinding>,
    /// Push constants (32-bit each, in block order from offset 0).
    pub push: Vec<u32>,
    /// (id, value), ascending ids: the kernel's own 0..N-1, then 233..235.
    pub specs: Vec<(u32, u32)>,
    /// Local size.
    pub local_size: [u32; 3],
    /// Workgroup counts of the one dispatch.
    pub groups: [u32; 3],
}

/// Device-layout bytes of weights, scales and zero points (0 when symmetric).
pub fn layout_bytes(shape: &Q4Shape, scale: ScaleType) -> Result<[u64; 3]> {
    // A valid shape's f32 weight fits the address space, so these sizes do too.
    let l = VkLayout::of(shape);
    Ok([
        l.weights_bytes(shape.n) as u64,
        l.scales_bytes(scale.size(), shape.n) as u64,
        l.zeros_bytes(shape.zero_points, shape.n) as u64,
    ])
}

/// Bytes of the per-group f32 offsets and of the column order (u32 per column) of the
/// extended layout; 0 where the matrix has none.
pub fn extra_bytes(shape: &Q4Shape, extras: Extras) -> [u64; 2] {
    let l = VkLayout::of(shape);
    [
        if extras.offsets {
            l.scales_bytes(4, shape.n) as u64
        } else {
            0
        },
        if extras.k_order {
            4 * shape.k as u64
        } else {
            0
        },
    ]
}

/// The SpecId decorations of a SPIR-V module, ascending.
pub fn spec_ids(words: &[u32]) -> Vec<u32> {
    let mut ids = Vec::new();
    let mut i = 5;
    while i < words.len() {
        let count = (words[i] >> 16) as usize;
        let op = words[i] & 0xffff;
        // OpDecorate <id> SpecId <value>
        if op == 71 && count == 4 && words.get(i + 2) == Some(&1) {
            ids.push(words[i + 3]);
        }
        i += count.max(1);
    }
    ids.sort_unstable();
    ids
}

/// What the exported kernels differ in (the GEMV and GEMM here and on GGUF blocks,
/// `vk::export_blocks`); [`finish`] builds the rest.
pub(crate) struct Kernel {
    /// The variant exported (the GEMM has no subgroup operations: always portable).
    pub(crate) subgroup: bool,
    /// Embedded SPIR-V.
    pub(crate) spirv: &'static [u8],
    /// Invocations per workgroup (local_size_x).
    pub(crate) workgroup: u32,
    /// Output rows per workgroup.
    pub(crate) rows: u64,
    /// Activation rows (tokens) per workgroup.
    pub(crate) tokens: u64,
    /// Value of the kernel's own specialization id (not 233..235).
    pub(crate) spec: Box<dyn Fn(u32) -> Option<u32>>,
}

/// The exported GEMM's workgroup and tile: [`GEMM_TILE`] grown along tokens to the device's
/// subgroup size where that is larger (hosts such as ncnn round local sizes up to a
/// multiple of it), checked against the device's workgroup limit.
pub(crate) fn gemm_tile(dev: &ExportDevice) -> Result<(u32, GemmTile)> {
    let t = GEMM_TILE;
    let workgroup = t.invocations().max(dev.subgroup_size);
    if !workgroup.is_multiple_of(t.tx) {
        return Err(Error::Unsupported(format!(
            "the exported GEMM's workgroup must be a multiple of {} and of the subgroup size {}",
            t.tx, dev.subgroup_size
        )));
    }
    if workgroup > dev.max_workgroup {
        return Err(Error::Unsupported(format!(
            "the exported GEMM needs a workgroup of {workgroup}; the device allows {}",
            dev.max_workgroup
        )));
    }
    Ok((
        workgroup,
        GemmTile {
            ty: workgroup / t.tx,
            ..t
        },
    ))
}

/// The extent of x and y of `req` on its matrix, strides and 32-bit indexing checked.
pub(crate) fn xy_of(req: &ExportRequest) -> Result<XyExtent> {
    let params = GemvParams {
        m: req.m,
        x_f16: req.x_f16,
        x_stride: req.x_stride,
        y_stride: req.y_stride,
        x_gathered: false,
        x_round_f16: false,
        x_round_int8: false,
        workspace_filled: false,
        epilogue: Epilogue {
            y_f16: req.y_f16,
            ..Epilogue::NONE
        },
    };
    xy_extent(req.shape.n as u64, req.shape.k as u64, &params, "desc->")
}

/// The export of `kernel` for `req` on a matrix of layout `l`: each of `buffers` (name,
/// bytes) within `maxStorageBufferRange`, the grid of the one dispatch, the push constants
/// (the GEMM's with m), the specialization constants by ascending id, and the bindings
/// `roles` (role, bytes) in binding order.
pub(crate) fn finish(
    req: &ExportRequest,
    dev: &ExportDevice,
    l: &VkLayout,
    kernel: Kernel,
    buffers: &[(&str, u64)],
    roles: &[(u32, u64)],
) -> Result<Export> {
    let (n, k) = (req.shape.n as u64, req.shape.k as u64);
    for &(name, bytes) in buffers {
        if bytes > dev.max_storage_range {
            return Err(Error::Unsupported(format!(
                "the {name} buffer needs {bytes} bytes, more than maxStorageBufferRange ({}); the exported kernel takes one buffer per binding (q4vk_matrix_create splits such matrices; the export cannot)",
                dev.max_storage_range
            )));
        }
    }
    let total = n.div_ceil(kernel.rows) * (req.m as u64).div_ceil(kernel.tokens);
    let [max_x, max_y] = dev.max_groups.map(u64::from);
    let (count, gx, gy) = dispatch_grid(total, [max_x, max_y]);
    if count < total {
        return Err(Error::Unsupported(format!(
            "{total} workgroups exceed the device's {max_x} x {max_y} grid"
        )));
    }
    let push = Push {
        rows: n as u32,
        row_base: 0,
        chunks: l.chunks as u32,
        k: k as u32,
        groups: l.groups as u32,
        group_shift: l.group_shift,
        x_stride: req.x_stride as u32,
        y_stride: req.y_stride as u32,
        wg_count: total as u32,
        wg_offset: 0,
    };
    // The GEMM's block has m after the GEMV's ten words (`#define GEMM`).
    let words = if req.m > MAX_M { GEMM_PUSH_WORDS } else { 10 };
    let push = push.words_with_m(req.m)[..words].to_vec();
    let spirv = shaders::words(kernel.spirv)?;
    let mut specs = Vec::new();
    for id in spec_ids(&spirv) {
        let value = match id {
            233 => Some(kernel.workgroup),
            234 | 235 => Some(1),
            own => (kernel.spec)(own),
        };
        let value = value.ok_or_else(|| {
            Error::Internal(format!(
                "the exported SPIR-V has an unknown specialization id {id}"
            ))
        })?;
        specs.push((id, value));
    }
    let bindings = roles
        .iter()
        .enumerate()
        .map(|(i, &(role, bytes))| ExportBinding {
            binding: i as u32,
            role,
            bytes,
        })
        .collect();
    Ok(Export {
        subgroup: kernel.subgroup,
        spirv,
        bindings,
        push,
        specs,
        local_size: [kernel.workgroup, 1, 1],
        groups: [gx as u32, gy as u32, 1],
    })
}

/// Chunks per row each invocation of the exported GEMV (which steps over chunks) takes per
/// step under the shape `t`: a shape that steps over words counts its unroll in words, four
/// to a chunk.
fn chunks_per_step(t: &Tuning) -> u32 {
    match t.word_lanes {
        true => (t.unroll / 4).max(1),
        false => t.unroll,
    }
}

/// The GEMV of `req.m` ≤ [`MAX_M`] rows with the device's workgroup choice.
fn gemv_kernel(req: &ExportRequest, dev: &ExportDevice, chunks: usize) -> Result<Kernel> {
    let t = dev.tuning;
    let workgroup = t.workgroup_for(chunks);
    let tuning = Tuning {
        workgroup,
        unroll: chunks_per_step(&t),
        ..t
    };
    if workgroup > dev.max_workgroup {
        return Err(Error::Unsupported(format!(
            "the exported kernel needs a workgroup of {workgroup}; the device allows {}",
            dev.max_workgroup
        )));
    }
    let shared = tuning.shared_bytes(!req.subgroup, req.m);
    if shared > dev.max_shared {
        return Err(Error::Unsupported(format!(
            "the exported kernel needs {shared} bytes of shared memory at m = {}; the device has {}",
            req.m, dev.max_shared
        )));
    }
    let (shape, scale, extras) = (req.shape, req.scale, req.extras);
    let (m, x_f16, y_f16) = (req.m, req.x_f16, req.y_f16);
    let y_f16_id = gemv_spec_y_f16(req.subgroup);
    let spec = move |id: u32| {
        if extras.extended && id == y_f16_id {
            return Some(y_f16 as u32);
        }
        let spec = SPECS
            .iter()
            .find(|s| (if extras.extended { s.3 } else { s.2 }) == Some(id))?
            .0;
        Some(match spec {
            Spec::Rows => tuning.rows,
            Spec::M => m,
            Spec::HasZeros => shape.zero_points as u32,
            Spec::ScaleF32 => (scale == ScaleType::F32) as u32,
            Spec::XF16 => x_f16 as u32,
            Spec::Workgroup => workgroup,
            Spec::Unroll => tuning.unroll,
            Spec::Split => tuning.split,
            Spec::SubgroupSize => tuning.subgroup,
            Spec::HasOffsets => extras.offsets as u32,
            Spec::HasKOrder => extras.k_order as u32,
            // Not in the exported builds.
            Spec::DecodeOnce | Spec::WordLanes | Spec::XBytes => return None,
        })
    };
    Ok(Kernel {
        subgroup: req.subgroup,
        spirv: match (extras.extended, req.bias, req.subgroup) {
            (false, _, false) => shaders::GEMV_EXPORT_PORTABLE,
            (false, _, true) => shaders::GEMV_EXPORT_SUBGROUP,
            (true, false, false) => shaders::GEMV_EXPORT_EXTENDED_PORTABLE,
            (true, false, true) => shaders::GEMV_EXPORT_EXTENDED_SUBGROUP,
            (true, true, false) => shaders::GEMV_EXPORT_BIAS_PORTABLE,
            (true, true, true) => shaders::GEMV_EXPORT_BIAS_SUBGROUP,
        },
        workgroup,
        rows: tuning.rows as u64,
        tokens: req.m as u64,
        spec: Box::new(spec),
    })
}

/// The SIMT GEMM (`shaders/gemm_q4.comp`) for m > [`MAX_M`]: [`GEMM_TILE`]'s tile, with
/// the workgroup grown along tokens to the device's subgroup size where that is larger
/// (hosts such as ncnn round local sizes up to a multiple of it).
fn gemm_kernel(req: &ExportRequest, dev: &ExportDevice) -> Result<Kernel> {
    let (workgroup, grown) = gemm_tile(dev)?;
    let shared = grown.shared_bytes();
    if shared > dev.max_shared {
        return Err(Error::Unsupported(format!(
            "the exported GEMM needs {shared} bytes of shared memory; the device has {}",
            dev.max_shared
        )));
    }
    let key = GemmKey {
        tile: grown,
        zeros: req.shape.zero_points,
        scale_f32: req.scale == ScaleType::F32,
        x_f16: req.x_f16,
        offsets: req.extras.offsets,
        k_order: req.extras.k_order,
        ksplit: 1,
    };
    let values = key.spec_values(workgroup);
    let (extended, y_f16) = (req.extras.extended, req.y_f16);
    Ok(Kernel {
        subgroup: false,
        spirv: match (req.extras.extended, req.bias) {
            (true, true) => shaders::GEMM_EXPORT_BIAS,
            (true, false) => shaders::GEMM_EXPORT_EXTENDED,
            (false, _) => shaders::GEMM_EXPORT,
        },
        workgroup,
        rows: grown.rows() as u64,
        tokens: grown.tokens() as u64,
        spec: Box::new(move |id| match id {
            GEMM_SPEC_Y_F16 if extended => Some(y_f16 as u32),
            own => values.get(own as usize).copied(),
        }),
    })
}

/// Builds the export for `req` on `dev`: the GEMV for m ≤ [`MAX_M`], the GEMM beyond.
pub fn export(req: &ExportRequest, dev: &ExportDevice) -> Result<Export> {
    let shape = &req.shape;
    let n = shape.n as u64;
    let extras = req.extras;
    if req.bias && !extras.extended {
        return Err(Error::InvalidArgument(
            "a bias needs the extended kernel (Q4VK_KERNEL_EXPORT_EXTENDED): it is binding 7"
                .into(),
        ));
    }
    if req.y_f16 && !extras.extended {
        return Err(Error::InvalidArgument(
            "f16 y (Q4VK_GEMV_F16_OUTPUT) needs the extended kernel (Q4VK_KERNEL_EXPORT_EXTENDED)"
                .into(),
        ));
    }
    if !extras.extended && (extras.offsets || extras.k_order) {
        return Err(Error::Unsupported(format!(
            "the matrix has {}; the v0 kernel has no binding for them: ask for the extended kernel (Q4VK_KERNEL_EXPORT_EXTENDED) and pack with q4vk_matrix_pack_extended",
            if extras.offsets {
                "per-group offsets (GGUF Q4_1/Q4_K)"
            } else {
                "a column order (GPTQ act-order)"
            }
        )));
    }
    let XyExtent {
        x_elems,
        y_elems,
        x_bytes: xb,
        y_bytes: yb,
    } = xy_of(req)?;
    let l = VkLayout::of(shape);
    let kernel = if req.m > MAX_M {
        gemm_kernel(req, dev)?
    } else {
        gemv_kernel(req, dev, l.chunks)?
    };
    let [wb, sb, zb] = layout_bytes(shape, req.scale)?;
    let [ob, kb] = extra_bytes(shape, extras);
    // The kernels index weights (by uvec4; bounded here in 32-bit words), scales, zeros, x
    // and y with 32 bits.
    let indices = [
        4 * n * l.chunks as u64,
        n * l.groups as u64,
        x_elems,
        y_elems,
    ];
    if indices.iter().any(|&i| i > u32::MAX as u64) || n > u32::MAX as u64 {
        return Err(Error::Unsupported(
            "the matrix or x/y need more than 2^32 elements in one buffer; the exported kernel indexes with 32 bits and takes one buffer per role (q4vk_matrix_create splits such matrices; the export cannot)".into(),
        ));
    }
    let buffers = [
        ("weights", wb),
        ("scales", sb),
        ("zeros", zb),
        ("x", xb),
        ("y", yb),
        ("offsets", ob),
        ("column order", kb),
        ("bias", 4 * n),
    ];
    let roles = [
        (ROLE_WEIGHTS, wb),
        (ROLE_SCALES, sb),
        (ROLE_ZEROS, zb),
        (ROLE_X, xb),
        (ROLE_Y, yb),
        (ROLE_OFFSETS, ob),
        (ROLE_K_ORDER, kb),
        (ROLE_BIAS, 4 * n),
    ];
    let used = match (extras.extended, req.bias) {
        (true, true) => 8,
        (true, false) => 7,
        (false, _) => 5,
    };
    finish(req, dev, &l, kernel, &buffers, &roles[..used])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The six exported builds.
    const BUILDS: [&[u8]; 6] = [
        shaders::GEMV_EXPORT_PORTABLE,
        shaders::GEMV_EXPORT_SUBGROUP,
        shaders::GEMV_EXPORT_EXTENDED_PORTABLE,
        shaders::GEMV_EXPORT_EXTENDED_SUBGROUP,
        shaders::GEMM_EXPORT,
        shaders::GEMM_EXPORT_EXTENDED,
    ];

    /// A shape stepping over words gives the exported kernel a quarter of its unroll in
    /// chunks (at least one); a shape stepping over chunks keeps its own.
    #[test]
    fn word_steps_become_chunk_steps() {
        let words = Tuning {
            workgroup: 128,
            rows: 2,
            unroll: 4,
            split: 1,
            subgroup: 32,
            min_workgroup: 32,
            word_lanes: true,
        };
        assert_eq!(chunks_per_step(&words), 1);
        assert_eq!(chunks_per_step(&Tuning { unroll: 8, ..words }), 2);
        assert_eq!(chunks_per_step(&Tuning { unroll: 2, ..words }), 1);
        let chunks = Tuning {
            word_lanes: false,
            ..words
        };
        assert_eq!(chunks_per_step(&chunks), 4);
    }

    /// ncnn's `Pipeline::create` maps entry i of its vector to constant id i and expects
    /// (own constants + 3) entries: the own ids must be 0..N-1, then 233..235.
    #[test]
    fn spec_ids_follow_ncnn() {
        // The extended builds end with f16 y: 10 (portable GEMV), 11 (subgroup GEMV), 9
        // (GEMM).
        for (spv, own) in BUILDS.into_iter().zip([8, 9, 11, 12, 7, 10]) {
            let ids = spec_ids(&shaders::words(spv).unwrap());
            let mut want: Vec<u32> = (0..own).collect();
            want.extend(SPEC_LOCAL_SIZE);
            assert_eq!(ids, want);
        }
        assert_eq!(gemv_spec_y_f16(false), 10);
        assert_eq!(gemv_spec_y_f16(true), 11);
    }

    /// ncnn counts push constants as the members of the block whose type is named
    /// `parameter`, so the names must survive compilation.
    #[test]
    fn push_block_is_named_parameter() {
        for spv in BUILDS {
            assert!(spv.windows(10).any(|w| w == b"parameter\0"));
        }
    }

    /// ncnn (SPIR-V < 1.6) deletes the constants with SpecId 233..235 and the
    /// `gl_WorkGroupSize` composite and writes the local size into `OpExecutionMode`: the
    /// kernel must not use them (it reads WORKGROUP instead).
    #[test]
    fn local_size_constants_are_unused() {
        for spv in BUILDS {
            let w = shaders::words(spv).unwrap();
            let mut insts = Vec::new();
            let mut i = 5;
            while i < w.len() {
                let count = (w[i] >> 16) as usize;
                insts.push(&w[i..i + count]);
                i += count;
            }
            let mut ids = Vec::new();
            for ins in &insts {
                let op = ins[0] & 0xffff;
                if op == 71 && ins[2] == 1 && (233..=235).contains(&ins[3]) {
                    ids.push(ins[1]);
                }
                if op == 71 && ins[2] == 11 && ins[3] == 25 {
                    ids.push(ins[1]);
                }
            }
            assert_eq!(ids.len(), 4);
            for ins in &insts {
                let op = ins[0] & 0xffff;
                // Skip decorations, debug names and the definitions themselves (OpSpecConstant,
                // OpSpecConstantComposite of gl_WorkGroupSize).
                if matches!(op, 71 | 5 | 6) || (matches!(op, 50 | 51) && ids.contains(&ins[2])) {
                    continue;
                }
                assert!(
                    !ins[1..].iter().any(|x| ids.contains(x)),
                    "opcode {op} uses a local-size constant"
                );
            }
        }
    }

    /// Every export lists its own ids 0..N-1 without a gap (a host maps entry i to id i),
    /// then the local size's; f16 y sets its id on the extended GEMV and GEMM, halves y's
    /// bytes (rounded up to 4) and is refused by the v0 kernel.
    #[test]
    fn the_export_lists_every_own_id() {
        let shape = Q4Shape::new(9, 64, 32, 0).unwrap();
        for (subgroup, extended, m, y_f16) in [
            (false, false, 1, false),
            (true, false, 3, false),
            (false, true, 1, true),
            (true, true, 2, true),
            (false, true, 1, false),
            (false, true, 9, true),
            (false, false, 9, false),
        ] {
            let req = ExportRequest {
                shape,
                scale: ScaleType::F16,
                m,
                x_f16: false,
                y_f16,
                x_stride: 64,
                y_stride: 9,
                subgroup,
                extras: Extras {
                    extended,
                    ..Default::default()
                },
                bias: false,
            };
            let dev = ExportDevice::unknown(default_tuning(subgroup, 8, 8));
            let what = format!("subgroup {subgroup} extended {extended} m {m} f16 y {y_f16}");
            let x = export(&req, &dev).expect(&what);
            let own: Vec<u32> = x.specs.iter().map(|s| s.0).filter(|&id| id < 233).collect();
            assert_eq!(own, (0..own.len() as u32).collect::<Vec<_>>(), "{what}");
            let y_id = if m > MAX_M {
                GEMM_SPEC_Y_F16
            } else {
                gemv_spec_y_f16(subgroup)
            };
            let y_spec = x.specs.iter().find(|s| s.0 == y_id).map(|s| s.1);
            assert_eq!(y_spec, extended.then_some(y_f16 as u32), "{what}");
            let y_bytes = x.bindings[ROLE_Y as usize].bytes;
            let elems = 9 * (m as u64 - 1) + 9;
            let want = if y_f16 {
                (2 * elems).div_ceil(4) * 4
            } else {
                4 * elems
            };
            assert_eq!(y_bytes, want, "{what}");
        }
        let v0 = ExportRequest {
            shape,
            scale: ScaleType::F16,
            m: 1,
            x_f16: false,
            y_f16: true,
            x_stride: 64,
            y_stride: 9,
            subgroup: false,
            extras: Extras::default(),
            bias: false,
        };
        let dev = ExportDevice::unknown(default_tuning(false, 8, 8));
        assert!(matches!(export(&v0, &dev), Err(Error::InvalidArgument(_))));
    }

    /// The extended kernel appends offsets (5) and column order (6) with their bytes and
    /// specializes on them; the v0 kernel refuses matrices that need them.
    #[test]
    fn extended_export_appends_offsets_and_order() {
        let shape = Q4Shape::new(10, 64, 32, 0).unwrap();
        let mut req = ExportRequest {
            shape,
            scale: ScaleType::F32,
            m: 1,
            x_f16: false,
            y_f16: false,
            x_stride: 64,
            y_stride: 10,
            subgroup: false,
            extras: Extras {
                extended: false,
                offsets: true,
                k_order: false,
            },
            bias: false,
        };
        let dev = ExportDevice::unknown(default_tuning(false, 1, 1));
        assert!(matches!(export(&req, &dev), Err(Error::Unsupported(_))));
        req.extras.extended = true;
        let e = export(&req, &dev).unwrap();
        let roles: Vec<_> = e
            .bindings
            .iter()
            .map(|b| (b.binding, b.role, b.bytes))
            .collect();
        assert_eq!(&roles[5..], &[(5, ROLE_OFFSETS, 80), (6, ROLE_K_ORDER, 0)]);
        assert_eq!(roles[2], (2, ROLE_ZEROS, 0));
        assert_eq!(&e.specs[8..10], &[(8, 1), (9, 0)]);
        req.extras = Extras {
            extended: true,
            offsets: false,
            k_order: true,
        };
        let e = export(&req, &dev).unwrap();
        assert_eq!(e.bindings[6].bytes, 256);
        assert_eq!(e.bindings[5].bytes, 0);
        assert_eq!(&e.specs[8..10], &[(8, 0), (9, 1)]);
        req.extras = Extras::default();
        let e = export(&req, &dev).unwrap();
        assert_eq!(e.bindings.len(), 5);
        assert_eq!(
            e.spirv,
            shaders::words(shaders::GEMV_EXPORT_PORTABLE).unwrap()
        );
    }

    #[test]
    fn groups_go_2d_past_the_limit() {
        let shape = Q4Shape::new(1000, 64, 32, 1).unwrap();
        let req = ExportRequest {
            shape,
            scale: ScaleType::F16,
            m: 2,
            x_f16: false,
            y_f16: false,
            x_stride: 64,
            y_stride: 1000,
            subgroup: false,
            extras: Extras::default(),
            bias: false,
        };
        let mut dev = ExportDevice::unknown(default_tuning(false, 1, 1));
        dev.max_groups = [100, 100];
        let e = export(&req, &dev).unwrap();
        assert_eq!(e.groups, [100, 3, 1]);
        assert_eq!(e.push[8], 250);
        dev.max_groups = [10, 10];
        assert!(matches!(export(&req, &dev), Err(Error::Unsupported(_))));
    }

    /// m > 8 exports the GEMM: SPIR-V 1.0 whatever the variant, m as push word 10, one
    /// workgroup per 64 rows x 32 tokens (tokens grown with a larger subgroup size), ids
    /// 0..6 (0..8 extended) as q4vk's own GEMM pipeline, the grid checked.
    #[test]
    fn gemm_export_for_larger_m() {
        let shape = Q4Shape::new(130, 100, 32, 1).unwrap();
        let mut req = ExportRequest {
            shape,
            scale: ScaleType::F16,
            m: 65,
            x_f16: true,
            y_f16: false,
            x_stride: 101,
            y_stride: 130,
            subgroup: true,
            extras: Extras::default(),
            bias: false,
        };
        let mut dev = ExportDevice::unknown(default_tuning(true, 32, 32));
        let e = export(&req, &dev).unwrap();
        assert!(!e.subgroup);
        assert_eq!(e.spirv, shaders::words(shaders::GEMM_EXPORT).unwrap());
        assert_eq!(e.spirv[1], 0x0001_0000, "SPIR-V 1.0");
        assert_eq!(e.push.len(), 11);
        assert_eq!((e.push[8], e.push[10]), (3 * 3, 65));
        assert_eq!(e.groups, [9, 1, 1]);
        assert_eq!(e.local_size, [64, 1, 1]);
        let own: Vec<u32> = e.specs[..7].iter().map(|s| s.1).collect();
        assert_eq!(own, [64, 8, 8, 4, 1, 0, 1]);
        assert_eq!(&e.specs[7..], &[(233, 64), (234, 1), (235, 1)]);
        // x: 64 rows of 101 then 100, f16 in whole words; y: 65 rows of 130.
        assert_eq!(e.bindings[3].bytes, 4 * (64 * 101u64 + 100).div_ceil(2));
        assert_eq!(e.bindings[4].bytes, 4 * 65 * 130);
        // A host that rounds to 128-wide subgroups: 16 x 8 invocations, 64 tokens each.
        dev.subgroup_size = 128;
        let e = export(&req, &dev).unwrap();
        assert_eq!(
            (e.local_size[0], e.specs[0].1, e.push[8]),
            (128, 128, 3 * 2)
        );
        dev.subgroup_size = 0;
        req.extras = Extras {
            extended: true,
            offsets: false,
            k_order: true,
        };
        let e = export(&req, &dev).unwrap();
        assert_eq!(
            e.spirv,
            shaders::words(shaders::GEMM_EXPORT_EXTENDED).unwrap()
        );
        assert_eq!(&e.specs[7..9], &[(7, 0), (8, 1)]);
        assert_eq!(e.bindings.len(), 7);
        dev.max_groups = [4, 2];
        assert!(matches!(export(&req, &dev), Err(Error::Unsupported(_))));
        dev.max_groups = [4, 3];
        assert_eq!(export(&req, &dev).unwrap().groups, [4, 3, 1]);
        dev.max_shared = 8192;
        assert!(matches!(export(&req, &dev), Err(Error::Unsupported(_))));
    }

    /// What q4vk_kernel_info documents for reusing one GEMM pipeline at another m: only
    /// push words 8 and 10, the group counts and the x/y bytes change, as computed there.
    #[test]
    fn gemm_export_per_m_follows_the_documented_rule() {
        let shape = Q4Shape::new(1000, 96, 32, 0).unwrap();
        for sg in [0, 128] {
            let mut dev = ExportDevice::unknown(default_tuning(false, 1, 1));
            dev.subgroup_size = sg;
            dev.max_groups = [20, 65535];
            let req = |m: u32| ExportRequest {
                shape,
                scale: ScaleType::F16,
                m,
                x_f16: false,
                y_f16: false,
                x_stride: 96,
                y_stride: 1000,
                subgroup: false,
                extras: Extras::default(),
                bias: false,
            };
            let base = export(&req(9), &dev).unwrap();
            let spec = |id: u32| base.specs.iter().find(|s| s.0 == id).unwrap().1;
            let rows = (spec(1) * spec(2)) as u64;
            let tokens = (base.local_size[0] / spec(1) * spec(3)) as u64;
            for m in [9u32, 33, 64, 200, 1000] {
                let e = export(&req(m), &dev).unwrap();
                assert_eq!((&e.spirv, &e.specs), (&base.spirv, &base.specs));
                assert_eq!(e.local_size, base.local_size);
                let wg = 1000u64.div_ceil(rows) * (m as u64).div_ceil(tokens);
                let gx = wg.min(20);
                let mut push = base.push.clone();
                push[8] = wg as u32;
                push[10] = m;
                assert_eq!(e.push, push, "m {m} sg {sg}");
                assert_eq!(e.groups, [gx as u32, wg.div_ceil(gx) as u32, 1]);
                let xy: Vec<u64> = e.bindings[3..5].iter().map(|b| b.bytes).collect();
                assert_eq!(xy, [4 * 96 * m as u64, 4 * 1000 * m as u64]);
            }
        }
    }
}
