//! Packed matrix blobs (`q4vk_matrix_blob`, `q4vk_matrix_create_from_blob`): a matrix's
//! buffers exactly as the device holds them, after a header naming the layout, so that a
//! later run creates the matrix by copying bytes, without converting or packing anything.
//!
//! Layout (little-endian): `Q4VKMTRX`, format, header bytes, q4vk version (16 bytes), n, k
//! (u64), group size (u32, 0 per channel), flags (u32: zero points 1, f32 scales 2, offsets
//! 4, column order 8, tensor-core layout 16, GGUF blocks in their native bytes 32 with the
//! block type's ggml id in bits 8..15), rows per part (u64), buffers (u32), bytes per
//! scale of the source (u32), each buffer's length (u64); then the buffers, each at a
//! multiple of 16 bytes, in creation order (the column order, then per part weights,
//! scales, zero points or offsets); then a checksum (u64, [`checksum`]) of all before it.

use super::context::Context;
use super::matrix::{part_buffer_bytes, DeviceMatrix, MatrixBytes, UploadRoute};
use super::matrix_form::MatrixForm;
use super::memory::{Buffer, MemoryKind};
use super::submit::{record_barrier, SHADER_TO_HOST};
use crate::error::{invalid, Error, Result};
use crate::import::gguf_blocks::of_ggml_id;
use crate::plan::tuned::version_bytes;
use crate::quant::q4::Q4Shape;
use ash::vk;
use std::ops::Range;

/// The blob's first bytes.
const MAGIC: &[u8; 8] = b"Q4VKMTRX";
/// The layout version.
const FORMAT: u32 = 1;
/// Bytes of the fixed header before the buffer lengths.
const FIXED: usize = 72;
/// Alignment of every buffer in the blob (and of the first after the header).
const ALIGN: usize = 16;

/// Flags of the header.
const ZEROS: u32 = 1;
const SCALE_F32: u32 = 2;
const OFFSETS: u32 = 4;
const ORDER: u32 = 8;
const COOP: u32 = 16;
const BLOCKS: u32 = 32;
/// Where a block-type matrix's ggml type id sits in the flags.
const BLOCK_TYPE_SHIFT: u32 = 8;

/// A 64-bit checksum of `bytes` that runs near memory speed: four lanes of little-endian
/// 64-bit words, each mixed by xor, multiply and rotate (so a changed, swapped or moved word
/// changes its lane), the tail bytes FNV-1a style, all folded with the length at the end.
/// A guard against truncation and corruption, not against tampering.
pub fn checksum(bytes: &[u8]) -> u64 {
    const P1: u64 = 0x9E37_79B1_85EB_CA87;
    const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
    let mut lanes = [P1, P2, !P1, !P2];
    let mut blocks = bytes.chunks_exact(32);
    for block in &mut blocks {
        for (lane, word) in lanes.iter_mut().zip(block.chunks_exact(8)) {
            let w = u64::from_le_bytes(word.try_into().expect("8 bytes"));
            *lane = (*lane ^ w)
                .wrapping_mul(P1)
                .rotate_left(31)
                .wrapping_mul(P2);
        }
    }
    let mut h = lanes.iter().fold(bytes.len() as u64, |h, &l| {
        (h ^ l).wrapping_mul(P1).rotate_left(27)
    });
    for &b in blocks.remainder() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h ^ (h >> 29)
}

/// The buffers of `mat` in creation order.
fn buffers(mat: &DeviceMatrix) -> Vec<&Buffer> {
    let mut all: Vec<&Buffer> = mat.k_order.iter().map(|o| &o.buffer).collect();
    all.extend(mat.parts.iter().flat_map(|p| p.buffers()));
    all
}

/// Where each buffer of `lengths` starts after a header of `header` bytes, and the blob's
/// bytes (with the checksum); `None` where that is past the address space (a corrupted
/// header's lengths).
fn placement(header: usize, lengths: &[u64]) -> Option<(Vec<usize>, usize)> {
    let aligned = |at: usize| at.checked_next_multiple_of(ALIGN);
    let mut at = aligned(header)?;
    let mut starts = Vec::with_capacity(lengths.len());
    for &len in lengths {
        starts.push(at);
        at = aligned(at.checked_add(usize::try_from(len).ok()?)?)?;
    }
    Some((starts, at.checked_add(8)?))
}

/// The placement of a blob of `lengths` made by this q4vk (its own buffers' sizes: within
/// the address space, as they were allocated).
fn own_placement(lengths: &[u64]) -> (Vec<usize>, usize) {
    placement(FIXED + 8 * lengths.len(), lengths).expect("the sizes of allocated buffers")
}

/// Bytes of `mat`'s blob.
pub fn blob_bytes(mat: &DeviceMatrix) -> usize {
    let lengths: Vec<u64> = buffers(mat).iter().map(|b| b.size).collect();
    own_placement(&lengths).1
}

/// The header's flags of a matrix of `form`.
fn flags_of(form: &MatrixForm) -> u32 {
    [
        (form.shape.zero_points, ZEROS),
        (form.scale_f32, SCALE_F32),
        (form.offsets, OFFSETS),
        (form.column_order, ORDER),
        (form.coop.is_some(), COOP),
    ]
    .iter()
    .filter(|(on, _)| *on)
    .fold(0, |acc, (_, bit)| acc | bit)
        | form
            .blocks
            .map_or(0, |b| BLOCKS | b.ty.ggml_id() << BLOCK_TYPE_SHIFT)
}

/// Bytes per scale of the source the header records for a matrix of `form`: the SIMT
/// layout keeps scales as given; the tensor-core layout's are f32 whatever.
fn scale_size_of(form: &MatrixForm) -> usize {
    match form.scale_f32 {
        true => 4,
        false => 2,
    }
}

/// The blob of `mat` (made on `ctx`'s device): its buffers read back (directly where q4vk
/// maps them, else through a copy on `ctx`'s queue).
pub fn blob_of(ctx: &Context, mat: &DeviceMatrix) -> Result<Vec<u8>> {
    let scale_size = scale_size_of(&mat.form);
    let all = buffers(mat);
    let lengths: Vec<u64> = all.iter().map(|b| b.size).collect();
    let header = FIXED + 8 * lengths.len();
    let (starts, total) = own_placement(&lengths);
    let mut blob: Vec<u8> = crate::alloc::filled(total, "the matrix blob")?;
    let f = &mat.form;
    let shape = &f.shape;
    let flags = flags_of(f);
    let mut w = Vec::with_capacity(header);
    w.extend_from_slice(MAGIC);
    w.extend(FORMAT.to_le_bytes());
    w.extend((header as u32).to_le_bytes());
    w.extend(version_bytes());
    w.extend((shape.n as u64).to_le_bytes());
    w.extend((shape.k as u64).to_le_bytes());
    let group = if shape.per_channel {
        0
    } else {
        shape.group_size as u32
    };
    w.extend(group.to_le_bytes());
    w.extend(flags.to_le_bytes());
    w.extend((f.rows_per_part as u64).to_le_bytes());
    w.extend((all.len() as u32).to_le_bytes());
    w.extend((scale_size as u32).to_le_bytes());
    lengths.iter().for_each(|l| w.extend(l.to_le_bytes()));
    blob[..header].copy_from_slice(&w);
    for (b, &start) in all.iter().zip(&starts) {
        read_back(ctx, b, &mut blob[start..start + b.size as usize])?;
    }
    let sum = checksum(&blob[..total - 8]);
    blob[total - 8..].copy_from_slice(&sum.to_le_bytes());
    Ok(blob)
}

/// Copies `b`'s bytes into `out`: from its mapping, or through a readback buffer and a copy
/// on `ctx`'s queue (where it has none, or the context's limits stage every transfer).
fn read_back(ctx: &Context, b: &Buffer, out: &mut [u8]) -> Result<()> {
    if b.mapped().is_some() && !ctx.limits.staged_uploads {
        b.read(0, out);
        return Ok(());
    }
    let readback = Buffer::new(
        &ctx.device,
        b.size,
        MemoryKind::Readback,
        "q4vk blob readback",
    )?;
    ctx.submit(|cmd| {
        let region = [vk::BufferCopy::default().size(b.size.max(4))];
        let [_, host] = SHADER_TO_HOST;
        // SAFETY: q4vk's own command buffer; both buffers are q4vk's and large enough.
        unsafe {
            ctx.device
                .device
                .cmd_copy_buffer(cmd, b.buffer, readback.buffer, &region);
            record_barrier(
                &ctx.device.device,
                cmd,
                (
                    vk::PipelineStageFlags::TRANSFER,
                    vk::AccessFlags::TRANSFER_WRITE,
                ),
                host,
            );
        }
        Ok(())
    })?;
    readback.read(0, out);
    Ok(())
}

/// A blob checked and taken apart: the matrix's form on the context and its buffers.
struct ParsedBlob<'a> {
    form: MatrixForm,
    scale_size: usize,
    buffers: Vec<&'a [u8]>,
}

impl MatrixBytes for ParsedBlob<'_> {
    fn scale_size(&self) -> usize {
        self.scale_size
    }

    fn column_order(&self) -> Result<Option<Vec<u32>>> {
        if !self.form.column_order {
            return Ok(None);
        }
        let bytes = self.buffers[0];
        crate::alloc::collect(
            bytes
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))),
            "the column order",
        )
        .map(Some)
    }

    fn fill(&self, which: usize, part: usize, _rows: Range<usize>, dst: &mut [u8]) {
        let per_part = self.form.buffers_per_part();
        let first = usize::from(self.form.column_order);
        dst.copy_from_slice(self.buffers[first + part * per_part + which]);
    }
}

/// Checks `blob` against the format and `ctx` and takes it apart: `InvalidArgument` where it
/// is not a whole blob of this q4vk version (truncated, corrupted, another format or
/// version), `Unsupported` where it was made for another device layout (the tensor-core
/// layout on a context without it, or parts split at another size).
fn parse<'a>(ctx: &Context, blob: &'a [u8]) -> Result<ParsedBlob<'a>> {
    if blob.len() < FIXED + 8 || &blob[..8] != MAGIC {
        return Err(invalid!(
            "not a q4vk matrix blob ({} bytes; one starts with Q4VKMTRX)",
            blob.len()
        ));
    }
    let u32_at = |i: usize| u32::from_le_bytes(blob[i..i + 4].try_into().expect("4 bytes"));
    let u64_at = |i: usize| u64::from_le_bytes(blob[i..i + 8].try_into().expect("8 bytes"));
    if u32_at(8) != FORMAT {
        return Err(invalid!(
            "matrix blob format {}; this q4vk reads {FORMAT}",
            u32_at(8)
        ));
    }
    let (header, count) = (u32_at(12) as usize, u32_at(64) as usize);
    let described = count.checked_mul(8).and_then(|b| b.checked_add(FIXED));
    if described != Some(header) || header > blob.len() {
        return Err(invalid!(
            "the matrix blob's header is truncated or corrupted"
        ));
    }
    let lengths: Vec<u64> = (0..count).map(|i| u64_at(FIXED + 8 * i)).collect();
    let (starts, total) = placement(header, &lengths).ok_or_else(|| {
        invalid!("the matrix blob's header describes buffers past the address space (corrupted)")
    })?;
    if total != blob.len() {
        return Err(invalid!(
            "the matrix blob has {} bytes; its header describes {total} (truncated or corrupted)",
            blob.len()
        ));
    }
    if u64_at(total - 8) != checksum(&blob[..total - 8]) {
        return Err(invalid!(
            "the matrix blob's checksum does not match: it is corrupted"
        ));
    }
    if blob[16..32] != version_bytes() {
        return Err(invalid!(
            "the matrix blob was made by q4vk {}; this is q4vk {}",
            String::from_utf8_lossy(&blob[16..32]).trim_end_matches('\0'),
            env!("CARGO_PKG_VERSION")
        ));
    }
    let flags = u32_at(52);
    let group = match u32_at(48) {
        0 => -1,
        g => g as i32,
    };
    let shape = Q4Shape::new(u64_at(32), u64_at(40), group, u32::from(flags & ZEROS != 0))?;
    let coop = flags & COOP != 0;
    if coop && !ctx.coop {
        return Err(Error::Unsupported(
            "the matrix blob holds the tensor-core layout and this context does not run those kernels; make the blob on a context of the same kind".into(),
        ));
    }
    let form = match flags & BLOCKS {
        0 => MatrixForm::new(
            shape,
            flags & SCALE_F32 != 0,
            flags & OFFSETS != 0,
            flags & ORDER != 0,
            coop,
            ctx.limits.max_part_bytes,
        )?,
        _ => {
            let id = (flags >> BLOCK_TYPE_SHIFT) & 0xFF;
            let ty = of_ggml_id(id).ok_or_else(|| {
                invalid!("the matrix blob names GGUF block type {id}, which this q4vk does not keep (corrupted)")
            })?;
            MatrixForm::of_blocks(ty, shape.n, shape.k, ctx.limits.max_part_bytes)?
        }
    };
    if form.rows_per_part as u64 != u64_at(56) {
        return Err(Error::Unsupported(format!(
            "the matrix blob splits the matrix into parts of {} rows; this device takes parts of {} rows (make the blob on this device)",
            u64_at(56),
            form.rows_per_part
        )));
    }
    let scale_size = u32_at(68) as usize;
    // Every buffer has the length the form gives it, in creation order (compared as they
    // come: a corrupted header may describe more parts than memory holds lengths).
    let order = form.column_order.then_some(4 * shape.k as u64);
    let expected = order.into_iter().chain(
        form.parts()
            .flat_map(|rows| part_buffer_bytes(&form, scale_size, rows.len()))
            .filter(|&len| len > 0)
            .map(|len| len as u64),
    );
    if flags != flags_of(&form)
        || scale_size != scale_size_of(&form)
        || !expected.eq(lengths.iter().copied())
    {
        return Err(invalid!(
            "the matrix blob's flags, scale size or buffers do not match its {}x{} header (corrupted)",
            shape.n,
            shape.k
        ));
    }
    let buffers = starts
        .iter()
        .zip(&lengths)
        .map(|(&start, &len)| &blob[start..start + len as usize])
        .collect();
    Ok(ParsedBlob {
        form,
        scale_size,
        buffers,
    })
}

/// A matrix on `ctx` from `blob` (`blob_of` of a matrix made on a context of the same
/// device and kind): its buffers copied as they are.
pub fn matrix_from_blob(ctx: &Context, blob: &[u8]) -> Result<DeviceMatrix> {
    let parsed = parse(ctx, blob)?;
    DeviceMatrix::assemble(ctx, parsed.form, &parsed, &mut UploadRoute::Queue)
}
