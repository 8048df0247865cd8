//! Kernel export of the kernels on GGUF blocks in their native bytes
//! (`q4vk_kernel_export` with `Q4VK_KERNEL_EXPORT_BLOCKS`): the GEMV (`shaders/gemv_blocks.comp`)
//! for m ≤ 8 and the GEMM (`shaders/gemm_blocks.comp`) beyond, built with -DEXPORT in the
//! conventions of the Q4 layout's export (`vk::export`: one descriptor set, the kernel's own
//! specialization ids 0..N-1 then the local size on 233..235, the push block named
//! `parameter`). Bindings in order: the codes, the scales, Q5_0's and Q5_1's fifth bits
//! (only for those types), x, y and the bias (read where the export has one). The matrix
//! is in the streams `q4vk_matrix_pack_blocks` writes (`layout::blocks`). Pure: no Vulkan
//! call.

use super::export::{
    finish, gemm_tile, xy_of, Export, ExportDevice, ExportRequest, Kernel, ROLE_BIAS,
    ROLE_HIGH_BITS, ROLE_SCALES, ROLE_WEIGHTS, ROLE_X, ROLE_Y,
};
use super::params::{XyExtent, MAX_M};
use super::pipeline::{BlocksKey, BLOCKS_MAX_M};
use super::shaders;
use crate::error::{invalid, Error, Result};
use crate::import::gguf_blocks::BlockType;
use crate::layout::blocks::{stream_block_bytes, BlocksLayout, Stream};
use crate::layout::vk::VkLayout;

/// The GEMV for `req.m` ≤ [`MAX_M`] rows on `ty` blocks of `pieces` pieces per row, in one
/// pass: the shape the rules of a device without a row of its own take for the type's class
/// (`plan::tuning::DEFAULT`'s `blocks_gemv`, by the matrix's rows up to [`BLOCKS_MAX_M`]
/// activation rows, else past one pass), with quarters of pieces past [`BLOCKS_MAX_M`]
/// (which hold x for all 8), and its rows per workgroup halved until its shared memory
/// fits the device's.
fn gemv_kernel(
    req: &ExportRequest,
    dev: &ExportDevice,
    ty: BlockType,
    pieces: usize,
) -> Result<Kernel> {
    let t = dev.tuning;
    let shape =
        crate::plan::tuning::DEFAULT
            .blocks_gemv
            .shape(ty, req.shape.n as u64, req.m, BLOCKS_MAX_M);
    let word_lanes = shape.word_lanes || req.m > BLOCKS_MAX_M;
    let steps = match word_lanes {
        true => pieces.saturating_mul(4),
        false => pieces,
    };
    let mut key = BlocksKey {
        portable: !req.subgroup,
        workgroup: t.workgroup_for(steps),
        rows: shape.rows,
        m: req.m,
        x_f16: req.x_f16,
        ty,
        word_lanes,
        dot: false,
        pair: false,
        unroll: 1,
    };
    if key.workgroup > dev.max_workgroup {
        return Err(Error::Unsupported(format!(
            "the exported GEMV needs a workgroup of {}; the device allows {}",
            key.workgroup, dev.max_workgroup
        )));
    }
    // Fewer rows per workgroup where the reduction's slots (the portable variant's: one per
    // invocation and output) would not fit the device's shared memory.
    while key.rows > 1 && key.shared_bytes(t.subgroup) > dev.max_shared {
        key.rows /= 2;
    }
    let shared = key.shared_bytes(t.subgroup);
    if shared > dev.max_shared {
        return Err(Error::Unsupported(format!(
            "the exported GEMV on {} blocks needs {shared} bytes of shared memory at m = {}; the device has {}",
            ty.name(),
            req.m,
            dev.max_shared
        )));
    }
    // Ids: ROWS, M, X_F16, WORKGROUP, X_HELD, WORD_LANES, Y_F16, HAS_BIAS, then the
    // subgroup variant's SUBGROUP_SIZE.
    let mut specs = vec![
        key.rows,
        key.m,
        key.x_f16 as u32,
        key.workgroup,
        key.x_held() as u32,
        key.word_lanes as u32,
        req.y_f16 as u32,
        req.bias as u32,
    ];
    if req.subgroup {
        specs.push(t.subgroup);
    }
    Ok(Kernel {
        subgroup: req.subgroup,
        spirv: shaders::gemv_blocks_export(ty, !req.subgroup),
        workgroup: key.workgroup,
        rows: u64::from(key.rows),
        tokens: u64::from(key.m),
        spec: by_id(specs),
    })
}

/// The GEMM for m > [`MAX_M`]: the exported GEMM's tile (`export::gemm_tile`), one K group.
fn gemm_kernel(req: &ExportRequest, dev: &ExportDevice, ty: BlockType) -> Result<Kernel> {
    let (workgroup, tile) = gemm_tile(dev)?;
    // A piece of the tile's rows and of its tokens, as f32.
    let shared = tile.blocks_shared_bytes();
    if shared > dev.max_shared {
        return Err(Error::Unsupported(format!(
            "the exported GEMM on {} blocks needs {shared} bytes of shared memory; the device has {}",
            ty.name(),
            dev.max_shared
        )));
    }
    Ok(Kernel {
        subgroup: false,
        spirv: shaders::gemm_blocks_export(ty),
        workgroup,
        rows: u64::from(tile.rows()),
        tokens: u64::from(tile.tokens()),
        // Ids: WORKGROUP, TX, RN, RM, X_F16, Y_F16, HAS_BIAS.
        spec: by_id(vec![
            workgroup,
            tile.tx,
            tile.rn,
            tile.rm,
            req.x_f16 as u32,
            req.y_f16 as u32,
            req.bias as u32,
        ]),
    })
}

/// The own specialization constants `values`, by id (0..).
fn by_id(values: Vec<u32>) -> Box<dyn Fn(u32) -> Option<u32>> {
    Box::new(move |id| values.get(id as usize).copied())
}

/// Builds the export for `req` on `dev` of a matrix of `ty` blocks: the GEMV for m ≤
/// [`MAX_M`], the GEMM beyond. `req.extras` must be empty (block types have neither
/// offsets of the Q4 layout nor a column order); a bias and an f16 y need no extended
/// kernel here.
pub fn export(req: &ExportRequest, dev: &ExportDevice, ty: BlockType) -> Result<Export> {
    let shape = &req.shape;
    let (n, k) = (shape.n as u64, shape.k as u64);
    if req.extras.extended || req.extras.offsets || req.extras.k_order {
        return Err(invalid!(
            "the kernels on GGUF blocks have no extended build: Q4VK_KERNEL_EXPORT_BLOCKS excludes Q4VK_KERNEL_EXPORT_EXTENDED"
        ));
    }
    if !(k as usize).is_multiple_of(ty.block_elements()) {
        return Err(invalid!(
            "k = {k} is not a multiple of the {} block ({} weights)",
            ty.name(),
            ty.block_elements()
        ));
    }
    let XyExtent {
        x_bytes, y_bytes, ..
    } = xy_of(req)?;
    // Pieces per row (chunks), blocks per row (groups) and log2(block / 32), as the
    // kernels read them.
    let l = VkLayout::of(shape);
    let kernel = match req.m > MAX_M {
        true => gemm_kernel(req, dev, ty)?,
        false => gemv_kernel(req, dev, ty, l.chunks)?,
    };
    // The streams as `q4vk_matrix_pack_blocks` writes them (each padded to whole words;
    // n · k fits a valid shape, so these products do).
    let blocks = BlocksLayout::new(ty, k as usize).blocks as u64;
    let [codes, scales, high_bits] =
        Stream::ALL.map(|s| (n * blocks * stream_block_bytes(ty, s) as u64).next_multiple_of(4));
    let bias_bytes = 4 * n;
    // The kernels index the streams in 32-bit words and x, y and the bias in elements.
    if [codes, scales, high_bits]
        .iter()
        .any(|&b| b / 4 > u32::MAX as u64)
        || n > u32::MAX as u64
    {
        return Err(Error::Unsupported(
            "the matrix needs more than 2^32 words in one buffer; the exported kernel indexes with 32 bits and takes one buffer per stream (q4vk_matrix_create splits such matrices; the export cannot)".into(),
        ));
    }
    let buffers = [
        ("codes", codes),
        ("scales", scales),
        ("fifth bits", high_bits),
        ("x", x_bytes),
        ("y", y_bytes),
        ("bias", bias_bytes),
    ];
    let mut roles = vec![(ROLE_WEIGHTS, codes), (ROLE_SCALES, scales)];
    if high_bits > 0 {
        roles.push((ROLE_HIGH_BITS, high_bits));
    }
    roles.extend([
        (ROLE_X, x_bytes),
        (ROLE_Y, y_bytes),
        (ROLE_BIAS, if req.bias { bias_bytes } else { 0 }),
    ]);
    finish(req, dev, &l, kernel, &buffers, &roles)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::q4::Q4Shape;
    use crate::quant::q4::ScaleType;
    use crate::vk::export::{default_tuning, Extras};

    fn request(n: u64, k: u64, m: u32, subgroup: bool) -> ExportRequest {
        ExportRequest {
            shape: Q4Shape::new(n, k, 32, 0).unwrap(),
            scale: ScaleType::F16,
            m,
            x_f16: false,
            y_f16: false,
            x_stride: k,
            y_stride: n,
            subgroup,
            extras: Extras::default(),
            bias: false,
        }
    }

    /// The exported GEMV fits the shared memory every Vulkan device has (16 KiB) for every
    /// type and m of one dispatch, in both variants; on less it takes fewer rows per
    /// workgroup rather than refusing.
    #[test]
    fn the_exported_gemv_fits_the_shared_memory_it_is_given() {
        for subgroup in [false, true] {
            let dev = ExportDevice::unknown(default_tuning(subgroup, 32, 32));
            for ty in BlockType::ALL {
                for (n, k) in [(64, 2048), (20000, 2048)] {
                    for m in 1..=MAX_M {
                        let made = export(&request(n, k, m, subgroup), &dev, ty);
                        assert!(made.is_ok(), "{} {n}x{k} m {m}: {made:?}", ty.name());
                    }
                }
            }
        }
        // Quarters of 4 rows on many rows of Q8_0 at m = 4: the portable variant's slots of
        // 16 outputs per invocation pass 4 KiB; fewer rows fit.
        let mut dev = ExportDevice::unknown(default_tuning(false, 32, 32));
        dev.max_shared = 4096;
        let made = export(&request(20000, 2048, 4, false), &dev, BlockType::Q8_0).unwrap();
        let (id, rows) = made.specs[0];
        assert_eq!(id, 0);
        assert!((1..4).contains(&rows), "ROWS {rows}");
    }
}
