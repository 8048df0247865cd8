//! A Q4 matrix on the device: split into parts of whole rows so no buffer exceeds
//! `maxStorageBufferRange` or `maxMemoryAllocationSize`; each part has its weights, scales
//! and zero points in the GPU layout (`layout::vk`) and an immutable descriptor set.

use super::context::Context;
use super::device::Device;
use super::liveness::{Liveness, Token};
use super::matrix_form::MatrixForm;
use super::memory::{storage_set, Buffer, MemoryKind, Placement};
use super::params::BufferRange;
use crate::error::{invalid, Error, Result};
use crate::import::gguf_blocks::BlockType;
use crate::layout::blocks::{BlocksLayout, Stream};
use crate::quant::q4::{Q4Data, Q4Shape, ScaleType};
use ash::vk;
use std::ops::Range;
use std::sync::Arc;

/// Rows `first_row .. first_row + rows` of a matrix, in their own buffers.
pub struct Part {
    /// First row (index into y).
    pub first_row: usize,
    /// Rows in this part.
    pub rows: usize,
    /// Set 0 of the GEMV pipeline layout, written once at creation.
    pub set: vk::DescriptorSet,
    buffers: Vec<Buffer>,
}

impl Part {
    /// Its buffers: weights, scales, and zero points or offsets where the matrix has them.
    pub fn buffers(&self) -> &[Buffer] {
        &self.buffers
    }
}

/// The input of each column of a matrix whose columns are not in input order: on the
/// device for the kernels that gather x (binding 3 of every part: `q4vk_cmd_gemv`), and on
/// the host, where `q4vk_gemv` gathers x once per call and runs the plain kernels.
pub struct ColumnOrder {
    /// `inputs` as u32 on the device.
    pub buffer: Buffer,
    /// Column j multiplies input `inputs[j]`.
    pub inputs: Vec<u32>,
}

/// An immutable Q4 matrix in device memory; shareable between threads.
pub struct DeviceMatrix {
    /// What the kernel rules read of it: shape, scheme, layout, parts.
    pub form: MatrixForm,
    /// The input of each column, when not in order (GPTQ act-order).
    pub k_order: Option<ColumnOrder>,
    /// The parts, in row order.
    pub parts: Vec<Part>,
    pool: vk::DescriptorPool,
    device: Arc<Device>,
    /// Held while the matrix lives: bindings that name it hold its token
    /// ([`DeviceMatrix::liveness`]).
    alive: Liveness,
}

/// Writes `bytes` into a new device buffer named `name`: directly when its memory is
/// mapped, else through a staging buffer and a copy on q4vk's queue.
pub fn upload(ctx: &Context, bytes: &[u8], name: &str) -> Result<Buffer> {
    upload_with(ctx, bytes.len(), name, |dst| dst.copy_from_slice(bytes))
}

/// A new device buffer of `len` bytes (in the host's memory where the context has its
/// allocator), named `name`, whose contents `fill` writes in place:
/// into the buffer's own mapping when it has one, else into a staging buffer's (named
/// `name` and "staging") that a copy on q4vk's queue then transfers (no host-side copy of
/// the data either way).
pub fn upload_with(
    ctx: &Context,
    len: usize,
    name: &str,
    fill: impl FnOnce(&mut [u8]),
) -> Result<Buffer> {
    upload_via(ctx, &mut UploadRoute::Queue, len, name, fill)
}

/// How a matrix's bytes reach buffers whose memory q4vk does not write in place.
pub enum UploadRoute<'a> {
    /// Through q4vk's own staging buffer and a copy on its queue, waited for.
    Queue,
    /// Through the host's staging memory, by copies recorded later into the host's command
    /// buffer ([`RecordedUpload::record`]).
    Recorded(&'a mut RecordedUpload),
}

/// The host's staging memory for recorded uploads, and the copies planned so far.
pub struct RecordedUpload {
    staging: BufferRange,
    mapped: *mut u8,
    used: u64,
    copies: Vec<(u64, vk::Buffer, u64)>,
}

/// Alignment of each buffer's bytes in the host's staging memory.
const STAGING_ALIGN: u64 = 16;

/// Bytes of staging a recorded upload takes once a buffer of `len` bytes follows `at`
/// bytes of earlier ones: each starts at a multiple of [`STAGING_ALIGN`].
fn staged_after(at: u64, len: u64) -> u64 {
    at.next_multiple_of(STAGING_ALIGN) + len
}

impl RecordedUpload {
    /// Uploads through `staging`, which the host maps at `mapped` (host-coherent memory,
    /// its first byte at `staging.offset`).
    ///
    /// # Safety
    /// `mapped` is writable for `staging.range` bytes until the recorded copies executed,
    /// and nothing else uses that memory meanwhile.
    pub unsafe fn new(staging: BufferRange, mapped: *mut u8) -> RecordedUpload {
        RecordedUpload {
            staging,
            mapped,
            used: 0,
            copies: Vec::new(),
        }
    }

    /// Writes `len` bytes with `fill` into the next piece of the staging memory, for a
    /// copy into `dst`; `BufferTooSmall` where the staging memory ends first.
    fn stage(
        &mut self,
        dst: vk::Buffer,
        len: usize,
        name: &str,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<()> {
        let at = self.used.next_multiple_of(STAGING_ALIGN);
        let end = at + len as u64;
        if end > self.staging.range {
            return Err(Error::BufferTooSmall(format!(
                "the staging range is {} bytes and {name} needs bytes {at}..{end} of it (q4vk_matrix_footprint_info.upload_bytes gives the whole)",
                self.staging.range
            )));
        }
        // SAFETY: in bounds of the host's mapping (checked), which it lent for this upload.
        fill(unsafe { std::slice::from_raw_parts_mut(self.mapped.add(at as usize), len) });
        self.copies.push((at, dst, len as u64));
        self.used = end;
        Ok(())
    }

    /// Records the planned copies into `cmd`, then a barrier from the transfers' writes to
    /// compute shaders' reads.
    ///
    /// # Safety
    /// `cmd` is a command buffer of `device` in the recording state, outside a render pass;
    /// the destination buffers outlive its execution.
    pub unsafe fn record(&self, device: &Device, cmd: vk::CommandBuffer) {
        let d = &device.device;
        for &(at, dst, len) in &self.copies {
            let region = [vk::BufferCopy::default()
                .src_offset(self.staging.offset + at)
                .size(len.max(1))];
            // SAFETY: the caller's contract; ranges checked when staged.
            unsafe { d.cmd_copy_buffer(cmd, self.staging.buffer, dst, &region) };
        }
        // SAFETY: as above.
        unsafe {
            let [src, dst] = super::submit::TRANSFER_TO_SHADER;
            super::submit::record_barrier(d, cmd, src, dst)
        };
    }
}

/// [`upload_with`] by `route`: in place where the buffer is mapped (unless the context's
/// limits stage every upload), else through `route`.
pub fn upload_via(
    ctx: &Context,
    route: &mut UploadRoute,
    len: usize,
    name: &str,
    fill: impl FnOnce(&mut [u8]),
) -> Result<Buffer> {
    let mut buffer = match &ctx.allocator {
        Some(allocator) => Buffer::in_host_memory(&ctx.device, len as u64, allocator, name)?,
        None => Buffer::new(&ctx.device, len as u64, MemoryKind::Device, name)?,
    };
    if buffer.mapped().is_some() && !ctx.limits.staged_uploads {
        buffer.fill(len, fill);
        return Ok(buffer);
    }
    if let UploadRoute::Recorded(recorded) = route {
        recorded.stage(buffer.buffer, len, name, fill)?;
        return Ok(buffer);
    }
    let mut staging = Buffer::new(
        &ctx.device,
        len as u64,
        MemoryKind::Staging,
        &format!("{name} staging"),
    )?;
    staging.fill(len, fill);
    ctx.submit(|cmd| {
        let d = &ctx.device.device;
        let region = [vk::BufferCopy::default().size(len.max(4) as u64)];
        // Later dispatches read what the copy wrote.
        // SAFETY: both buffers are ours and large enough; q4vk's own command buffer.
        unsafe {
            d.cmd_copy_buffer(cmd, staging.buffer, buffer.buffer, &region);
            let [src, dst] = super::submit::TRANSFER_TO_SHADER;
            super::submit::record_barrier(d, cmd, src, dst);
        }
        Ok(())
    })?;
    Ok(buffer)
}

/// Bytes of the buffers of a part of `count` rows of a matrix of `form` whose scales take
/// `scale_size` bytes each (as given; the tensor-core layout stores f32): weights, scales,
/// and zero points or offsets (0: the matrix has neither); of a block-type matrix, its
/// streams (`layout::blocks`).
pub(super) fn part_buffer_bytes(form: &MatrixForm, scale_size: usize, count: usize) -> [usize; 3] {
    if let Some(b) = &form.blocks {
        return Stream::ALL.map(|stream| b.stream_bytes(stream, count));
    }
    let third = form.offsets || form.shape.zero_points;
    match &form.coop {
        Some(c) => [
            c.weights_bytes(count),
            c.scales_bytes(count),
            match (form.offsets, third) {
                (true, _) => c.scales_bytes(count),
                (false, true) => c.zeros_bytes(true, count),
                (false, false) => 0,
            },
        ],
        None => {
            let layout = &form.layout;
            [
                layout.weights_bytes(count),
                layout.scales_bytes(scale_size, count),
                match (form.offsets, third) {
                    (true, _) => layout.scales_bytes(4, count),
                    (false, true) => layout.zeros_bytes(true, count),
                    (false, false) => 0,
                },
            ]
        }
    }
}

/// What a matrix takes on a device before it is created (`q4vk_matrix_footprint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footprint {
    /// Bytes of device memory: every buffer's allocation, as the driver sizes it.
    pub device_bytes: u64,
    /// Buffers (each with its own allocation).
    pub buffers: u32,
    /// The largest alignment any of them needs.
    pub alignment: u64,
    /// Memory types every one of them can live in.
    pub memory_type_bits: u32,
    /// Host-visible staging the upload holds at most at once (0 where q4vk's device memory
    /// is mapped and written in place; with the host's allocator, every buffer counts).
    pub staging_bytes: u64,
    /// Staging an upload recorded into the host's command buffer takes, all buffers at once
    /// (`UploadRoute::Recorded`; 0 where the device memory is written in place).
    pub upload_bytes: u64,
}

/// The footprint of a matrix of `shape` with scales of `scale` (with per-group offsets, a
/// column order) that `DeviceMatrix::new` would create on `ctx`: its form and buffers,
/// their memory requirements queried once per buffer size on buffers created and destroyed
/// without memory.
pub fn footprint(
    ctx: &Context,
    shape: Q4Shape,
    scale: ScaleType,
    offsets: bool,
    k_order: bool,
) -> Result<Footprint> {
    let form = MatrixForm::new(
        shape,
        scale == ScaleType::F32,
        offsets,
        k_order,
        ctx.coop,
        ctx.limits.max_part_bytes,
    )?;
    form_footprint(ctx, &form, scale.size())
}

/// The footprint of a matrix of `form` whose source scales take `scale_size` bytes each.
pub fn form_footprint(ctx: &Context, form: &MatrixForm, scale_size: usize) -> Result<Footprint> {
    // In the order the matrix uploads them: the column order, then part by part (walked,
    // not collected: a desc may describe more parts than memory holds sizes).
    let order = form.column_order.then_some(4 * form.shape.k);
    let sizes = order.into_iter().chain(
        form.parts()
            .flat_map(|rows| part_buffer_bytes(form, scale_size, rows.len()))
            .filter(|&bytes| bytes > 0),
    );
    let mut f = Footprint {
        device_bytes: 0,
        buffers: 0,
        alignment: 1,
        memory_type_bits: u32::MAX,
        staging_bytes: 0,
        upload_bytes: 0,
    };
    // Parts share their sizes (all but the last have the same rows): one query per size.
    let mut placed: Vec<(usize, Placement)> = Vec::new();
    for bytes in sizes {
        let place = match placed.iter().find(|(size, _)| *size == bytes) {
            Some(&(_, p)) => p,
            None => {
                let p = Buffer::placement(&ctx.device, bytes as u64, MemoryKind::Device)?;
                placed.push((bytes, p));
                p
            }
        };
        f.buffers = f.buffers.checked_add(1).ok_or_else(|| {
            Error::Unsupported(format!(
                "a {}x{} matrix takes more than 2^32 buffers on this device",
                form.shape.n, form.shape.k
            ))
        })?;
        let r = place.requirements;
        f.device_bytes += r.size;
        f.alignment = f.alignment.max(r.alignment);
        f.memory_type_bits &= r.memory_type_bits;
        // With the host's allocator, whether it maps the memory is its own to say: count
        // the staging every buffer would take.
        if !place.mapped || ctx.limits.staged_uploads || ctx.allocator.is_some() {
            f.staging_bytes = f.staging_bytes.max(bytes as u64);
            f.upload_bytes = staged_after(f.upload_bytes, bytes as u64);
        }
    }
    Ok(f)
}

/// Checks that `order` holds each of the `k` columns once: the kernels read x at these
/// columns unchecked (a blob's order is read from the caller's bytes).
fn check_permutation(order: &[u32], k: usize) -> Result<()> {
    if order.len() != k {
        return Err(invalid!(
            "the column order has {} columns; the matrix has k = {k} (corrupted)",
            order.len()
        ));
    }
    let mut seen = crate::alloc::filled::<bool>(k, "the column order's check")?;
    for &column in order {
        match seen.get_mut(column as usize) {
            Some(seen) if !*seen => *seen = true,
            _ => {
                return Err(invalid!(
                    "the column order holds column {column} twice or past k = {k} (corrupted)"
                ))
            }
        }
    }
    Ok(())
}

/// Where a matrix's buffer bytes come from (`DeviceMatrix::assemble`): packed from the
/// caller's data, or copied from a packed blob (`vk::matrix_blob`).
pub(super) trait MatrixBytes {
    /// Bytes per scale of the source (the SIMT layout keeps them as given).
    fn scale_size(&self) -> usize;
    /// The column order, where the matrix has one.
    fn column_order(&self) -> Result<Option<Vec<u32>>>;
    /// Writes buffer `which` (0 weights, 1 scales, 2 zero points or offsets) of part `part`,
    /// rows `rows`, into `dst` (of `part_buffer_bytes`' length).
    fn fill(&self, which: usize, part: usize, rows: Range<usize>, dst: &mut [u8]);
}

/// A matrix's bytes packed from the caller's data into `form`'s layout.
struct PackedFrom<'a, 'b> {
    data: &'a Q4Data<'b>,
    offsets: Option<&'a [f32]>,
    k_order: Option<&'a [u32]>,
    form: MatrixForm,
}

impl MatrixBytes for PackedFrom<'_, '_> {
    fn scale_size(&self) -> usize {
        self.data.scale_type.size()
    }

    fn column_order(&self) -> Result<Option<Vec<u32>>> {
        self.k_order
            .map(|o| crate::alloc::collect(o.iter().copied(), "the column order"))
            .transpose()
    }

    fn fill(&self, which: usize, _part: usize, rows: Range<usize>, dst: &mut [u8]) {
        let data = self.data;
        match (&self.form.coop, which, self.offsets) {
            (Some(c), 0, _) => c.pack_weights(data, rows, dst),
            (Some(c), 1, _) => c.pack_scales(data, rows, dst),
            (Some(c), _, Some(o)) => c.pack_offsets(data, o, rows, dst),
            (Some(c), _, None) => c.pack_zeros(data, rows, dst),
            (None, 0, _) => self.form.layout.pack_weights(data, rows, dst),
            (None, 1, _) => self.form.layout.pack_scales(data, rows, dst),
            (None, _, Some(o)) => self.form.layout.pack_offsets(o, rows, dst),
            (None, _, None) => self.form.layout.pack_zeros(data, rows, dst),
        }
    }
}

/// A block-type matrix's bytes regrouped from the file's tensor into its streams.
struct BlocksFrom<'a> {
    tensor: &'a [u8],
    layout: BlocksLayout,
}

impl MatrixBytes for BlocksFrom<'_> {
    fn scale_size(&self) -> usize {
        2
    }

    fn column_order(&self) -> Result<Option<Vec<u32>>> {
        Ok(None)
    }

    fn fill(&self, which: usize, _part: usize, rows: Range<usize>, dst: &mut [u8]) {
        self.layout.pack(self.tensor, Stream::ALL[which], rows, dst);
    }
}

impl DeviceMatrix {
    /// An `n` × `k` matrix of GGUF blocks of `ty` from `tensor` (the file's bytes, already
    /// checked: whole blocks, finite scales), kept in their native bytes on the device
    /// (`layout::blocks`); bytes not written in place go by `route`.
    pub fn from_blocks(
        ctx: &Context,
        ty: BlockType,
        n: usize,
        k: usize,
        tensor: &[u8],
        route: &mut UploadRoute,
    ) -> Result<DeviceMatrix> {
        let form = MatrixForm::of_blocks(ty, n, k, ctx.limits.max_part_bytes)?;
        if tensor.len() as u64 != form.device_bytes() {
            return Err(Error::Internal(format!(
                "a GGUF {} tensor of {n} x {k} has {} bytes, not {}",
                ty.name(),
                tensor.len(),
                form.device_bytes()
            )));
        }
        let layout = BlocksLayout::new(ty, k);
        Self::assemble(ctx, form, &BlocksFrom { tensor, layout }, route)
    }

    /// Bytes of device memory the matrix holds (every buffer's allocation).
    pub fn allocated_bytes(&self) -> u64 {
        let order = self.k_order.as_ref().map_or(0, |o| o.buffer.allocated);
        self.parts
            .iter()
            .flat_map(|p| &p.buffers)
            .map(|b| b.allocated)
            .sum::<u64>()
            + order
    }

    /// Uploads `data` (already validated) into parts of at most `ctx`'s part size, in the
    /// layout of the context's kernel; with `offsets` (`[n][groups]` f32, finite, and `data`
    /// without zero points), a matrix of `w = scale·u + offset` whose offsets take the zero
    /// points' binding; with `k_order` (a permutation of `0..k`), a matrix whose column j
    /// holds input `k_order[j]` (always in the SIMT layout: the tensor-core kernel does not
    /// gather x).
    pub fn new(
        ctx: &Context,
        data: &Q4Data,
        offsets: Option<&[f32]>,
        k_order: Option<&[u32]>,
    ) -> Result<DeviceMatrix> {
        Self::in_layout(
            ctx,
            data,
            offsets,
            k_order,
            ctx.coop,
            &mut UploadRoute::Queue,
        )
    }

    /// [`DeviceMatrix::new`] in the tensor-core layout only where `coop` (and the context
    /// runs those kernels), else in the SIMT layout; bytes not written in place go by
    /// `route`.
    pub fn in_layout(
        ctx: &Context,
        data: &Q4Data,
        offsets: Option<&[f32]>,
        k_order: Option<&[u32]>,
        coop: bool,
        route: &mut UploadRoute,
    ) -> Result<DeviceMatrix> {
        if k_order.is_some_and(|o| o.len() != data.shape.k) {
            return Err(Error::Internal(
                "a column order needs one input per column".into(),
            ));
        }
        if offsets.is_some_and(|o| data.shape.zero_points || o.len() != data.shape.scale_count()) {
            return Err(Error::Internal(
                "per-group offsets need a matrix without zero points and one offset per scale"
                    .into(),
            ));
        }
        let form = MatrixForm::new(
            data.shape,
            data.scale_type == ScaleType::F32,
            offsets.is_some(),
            k_order.is_some(),
            coop && ctx.coop,
            ctx.limits.max_part_bytes,
        )?;
        let source = PackedFrom {
            data,
            offsets,
            k_order,
            form,
        };
        Self::assemble(ctx, form, &source, route)
    }

    /// A matrix of `form` on `ctx` whose buffers `source` fills (bytes not written in place
    /// go by `route`): the column order first, then per part its weights, scales and zero
    /// points or offsets, with a descriptor set per part.
    pub(super) fn assemble(
        ctx: &Context,
        form: MatrixForm,
        source: &dyn MatrixBytes,
        route: &mut UploadRoute,
    ) -> Result<DeviceMatrix> {
        let shape = form.shape;
        let part_count = form.parts().count();
        let d = &ctx.device.device;
        let matrix_name = format!("q4vk matrix {}x{}", shape.n, shape.k);
        let sizes = [vk::DescriptorPoolSize {
            ty: vk::DescriptorType::STORAGE_BUFFER,
            descriptor_count: 4 * part_count as u32,
        }];
        // SAFETY: valid create info.
        let pool = unsafe {
            d.create_descriptor_pool(
                &vk::DescriptorPoolCreateInfo::default()
                    .max_sets(part_count as u32)
                    .pool_sizes(&sizes),
                None,
            )
        }
        .map_err(|e| Error::vk("vkCreateDescriptorPool", e))?;
        ctx.device
            .namer
            .name(pool, &format!("{matrix_name} descriptor pool"));
        let mut this = DeviceMatrix {
            form,
            k_order: None,
            parts: Vec::with_capacity(part_count),
            pool,
            device: ctx.device.clone(),
            alive: Liveness::default(),
        };
        let needed = this.form.device_bytes();
        let heap = ctx.device.largest_device_heap();
        if needed > heap {
            return Err(Error::OutOfDeviceMemory(format!(
                "the matrix needs {needed} bytes of device memory; this device's largest device-local heap holds {heap} bytes"
            )));
        }
        if let Some(order) = source.column_order()? {
            check_permutation(&order, shape.k)?;
            let bytes: Vec<u8> = order.iter().flat_map(|i| i.to_le_bytes()).collect();
            this.k_order = Some(ColumnOrder {
                buffer: upload_via(
                    ctx,
                    route,
                    bytes.len(),
                    &format!("{matrix_name} column order"),
                    |dst| dst.copy_from_slice(&bytes),
                )?,
                inputs: order,
            });
        }
        for (p, rows) in form.parts().enumerate() {
            let part_name = match part_count {
                1 => matrix_name.clone(),
                _ => format!("{matrix_name} part {}/{part_count}", p + 1),
            };
            let third_name = match (form.blocks, form.offsets, shape.zero_points) {
                (Some(_), _, _) => "fifth bits",
                (None, true, _) => "offsets",
                (None, false, true) => "zeros",
                (None, false, false) => "",
            };
            let lengths = part_buffer_bytes(&form, source.scale_size(), rows.len());
            let mut buffers = Vec::with_capacity(3);
            for (which, name) in ["weights", "scales", third_name].into_iter().enumerate() {
                if lengths[which] == 0 {
                    continue;
                }
                let name = format!("{part_name} {name}");
                buffers.push(upload_via(ctx, route, lengths[which], &name, |dst| {
                    source.fill(which, p, rows.clone(), dst)
                })?);
            }
            // Symmetric matrices bind the scales again as the (unread) zero buffer, and
            // matrices with inputs in order as the (unread) column order.
            let scales = &buffers[1];
            let zero_buffer = buffers.get(2).unwrap_or(scales);
            let order_buffer = this.k_order.as_ref().map_or(scales, |o| &o.buffer);
            // SAFETY: the pool and layout are the context's; the pool has room for one set
            // per part.
            let set = unsafe {
                storage_set(
                    &ctx.device,
                    pool,
                    ctx.pipelines.matrix_set,
                    &[&buffers[0], scales, zero_buffer, order_buffer],
                )
            }?;
            this.parts.push(Part {
                first_row: rows.start,
                rows: rows.len(),
                set,
                buffers,
            });
        }
        Ok(this)
    }

    /// A token that stops upgrading when the matrix is dropped.
    pub fn liveness(&self) -> Token {
        self.alive.token()
    }

    /// Whether `token` ([`DeviceMatrix::liveness`]) is this matrix's.
    pub fn is(&self, token: &Token) -> bool {
        self.alive.is(token)
    }

    /// Whether this matrix lives on `ctx`'s `VkDevice` (contexts adopting the same device
    /// share matrices: set 0's layout is defined identically in every context).
    pub fn same_device(&self, ctx: &Context) -> bool {
        self.device.device.handle() == ctx.device.device.handle()
    }
}

impl Drop for DeviceMatrix {
    fn drop(&mut self) {
        // SAFETY: ours; destroying the pool frees the parts' sets; the buffers drop after.
        unsafe { self.device.device.destroy_descriptor_pool(self.pool, None) };
    }
}
