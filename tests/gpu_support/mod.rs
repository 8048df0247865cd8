//! Shared helpers of the GPU tests: a validated context whose log callback counts every
//! validation message, seeded random data, and checked GEMV runs against the f64
//! reference.
#![allow(dead_code)]

pub mod blocks;
pub mod host_epilogue;
pub mod int_dot;

use ash::vk;
use q4vk::cpu::reference;
use q4vk::ffi::context::*;
use q4vk::ffi::gemv::*;
use q4vk::ffi::matrix::*;
use q4vk::ffi::status::{q4vk_status, Q4VK_OK};
use q4vk::quant::q4::{Q4Data, Q4Shape, ScaleType};
use std::borrow::Cow;
use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock};

/// Serializes the tests' changes to the process environment against the creation of
/// contexts: a driver reads the environment (C `getenv`) while it creates an instance and a
/// device, and `setenv` on another test thread may free what it reads. [`Gpu::with`]
/// creates under the read side, [`Gpu::with_env`] sets, creates and removes under the write
/// side.
static ENVIRONMENT: RwLock<()> = RwLock::new(());

/// Messages the log callback received at WARN or ERROR.
pub struct LogSink {
    pub messages: Mutex<Vec<String>>,
}

/// Whether a WARN/ERROR message fails a test: every one does, except the missing-layer
/// notice when `Q4VK_TESTS_WITHOUT_LAYER=1` says the machine has no validation layer (a
/// GPU machine whose container lacks it; CI installs the layer and never sets it).
pub fn fails_test(text: &str) -> bool {
    let layerless = std::env::var("Q4VK_TESTS_WITHOUT_LAYER").is_ok_and(|v| v == "1");
    !(layerless && text.starts_with("validation requested but VK_LAYER_KHRONOS_validation"))
}

unsafe extern "C" fn collect(user: *mut c_void, level: u32, message: *const c_char) {
    let sink = &*(user as *const LogSink);
    let text = CStr::from_ptr(message).to_string_lossy().into_owned();
    if level <= Q4VK_LOG_WARN && fails_test(&text) {
        sink.messages
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(text);
    }
}

/// WARN/ERROR messages that fail a test (`fails_test`), from every logger made by
/// `counting_logger` in this test binary.
pub static LOGGED: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn count_logged(_: *mut c_void, _: u32, message: *const c_char) {
    let text = CStr::from_ptr(message).to_string_lossy();
    eprintln!("{text}");
    if fails_test(&text) {
        LOGGED.fetch_add(1, Ordering::SeqCst);
    }
}

/// A logger for contexts of the Rust core: delivers WARN and ERROR, prints them and counts
/// those that fail a test into [`LOGGED`].
pub fn counting_logger() -> q4vk::vk::log::Logger {
    q4vk::vk::log::Logger::new(Some(count_logged), std::ptr::null_mut(), Q4VK_LOG_WARN)
}

/// Asserts that no logger of [`counting_logger`] has received a message that fails a test.
pub fn assert_nothing_logged() {
    assert_eq!(
        LOGGED.load(Ordering::SeqCst),
        0,
        "validation or q4vk warnings"
    );
}

/// A context with validation on; fails (never skips) when no device exists.
pub struct Gpu {
    pub ctx: *mut q4vk_context,
    pub sink: Box<LogSink>,
}

impl Gpu {
    pub fn new(portable: bool) -> Gpu {
        Gpu::with(portable, |_| {}).expect("q4vk_context_create")
    }

    /// A validated context whose desc `edit` may change before creation; the status and
    /// message on failure.
    pub fn with(
        portable: bool,
        edit: impl FnOnce(&mut q4vk_context_desc),
    ) -> Result<Gpu, (u32, String)> {
        let _unchanged = ENVIRONMENT.read().unwrap_or_else(|e| e.into_inner());
        Gpu::create(portable, edit)
    }

    /// [`Gpu::new`] with environment variable `name` set to `value` while the context is
    /// created (removed afterwards), no other test thread creating one meanwhile.
    pub fn with_env(name: &str, value: &str, portable: bool) -> Gpu {
        Gpu::with_env_and(name, value, portable, |_| {})
    }

    /// [`Gpu::with_env`] with `edit` applied to the desc, as [`Gpu::with`].
    pub fn with_env_and(
        name: &str,
        value: &str,
        portable: bool,
        edit: impl FnOnce(&mut q4vk_context_desc),
    ) -> Gpu {
        let _changing = ENVIRONMENT.write().unwrap_or_else(|e| e.into_inner());
        std::env::set_var(name, value);
        let gpu = Gpu::create(portable, edit);
        std::env::remove_var(name);
        gpu.expect("q4vk_context_create")
    }

    /// [`Gpu::with`] without the environment's lock.
    fn create(
        portable: bool,
        edit: impl FnOnce(&mut q4vk_context_desc),
    ) -> Result<Gpu, (u32, String)> {
        let sink = Box::new(LogSink {
            messages: Mutex::new(Vec::new()),
        });
        let mut desc = unsafe { std::mem::zeroed::<q4vk_context_desc>() };
        unsafe { q4vk_context_desc_default(&mut desc) };
        desc.flags = Q4VK_CONTEXT_VALIDATION
            | if portable {
                Q4VK_CONTEXT_PORTABLE_KERNELS
            } else {
                0
            };
        desc.log = Some(collect);
        desc.log_user = &*sink as *const LogSink as *mut c_void;
        edit(&mut desc);
        let mut ctx = std::ptr::null_mut();
        let status = unsafe { q4vk_context_create(&desc, &mut ctx) };
        if status != Q4VK_OK {
            return Err((status, last_error()));
        }
        Ok(Gpu { ctx, sink })
    }

    pub fn context(&self) -> &q4vk::vk::context::Context {
        unsafe { context_mut(self.ctx) }.unwrap()
    }

    /// For tests that lower the dispatcher's limits.
    pub fn context_mut(&mut self) -> &mut q4vk::vk::context::Context {
        unsafe { context_mut(self.ctx) }.unwrap()
    }

    /// Fails if any validation (or other WARN/ERROR) message arrived.
    pub fn assert_quiet(&self) {
        let m = self
            .sink
            .messages
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        assert!(m.is_empty(), "{} log message(s), first: {}", m.len(), m[0]);
    }
}

// SAFETY: a q4vk context may be used from several threads at once (API contract), and the
// sink is a Mutex.
unsafe impl Sync for Gpu {}
// SAFETY: as above.
unsafe impl Send for Gpu {}

impl Drop for Gpu {
    fn drop(&mut self) {
        unsafe { q4vk_context_destroy(self.ctx) };
        if !std::thread::panicking() {
            self.assert_quiet();
        }
    }
}

/// `q4vk_gemv_plan` of a call of `m` rows with `flags` and `workspace` bytes of workspace
/// on `mat` (asserted to succeed), and its kernel's name.
pub fn plan_of(
    ctx: *mut q4vk_context,
    mat: *const q4vk_matrix,
    m: usize,
    flags: u32,
    workspace: u64,
) -> (q4vk_gemv_plan_info, String) {
    let mut info = unsafe { std::mem::zeroed::<q4vk_gemv_plan_info>() };
    info.struct_size = std::mem::size_of_val(&info) as u32;
    // SAFETY: a live context and matrix (the caller's), a writable info of its size.
    let status = unsafe { q4vk_gemv_plan(ctx, mat, m as u32, flags, workspace, &mut info) };
    assert_eq!(status, Q4VK_OK, "q4vk_gemv_plan: {}", last_error());
    // SAFETY: q4vk writes a NUL-terminated name.
    let name = unsafe { CStr::from_ptr(info.name.as_ptr()) };
    let name = name.to_string_lossy().into_owned();
    (info, name)
}

pub fn last_error() -> String {
    let mut buf = vec![0 as c_char; 1024];
    unsafe { q4vk::ffi::status::q4vk_last_error_message(buf.as_mut_ptr(), buf.len()) };
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// A small seeded generator (splitmix64).
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    pub fn f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
    pub fn vec(&mut self, len: usize) -> Vec<f32> {
        (0..len).map(|_| self.f32()).collect()
    }
}

/// Random Q4 data: nibbles, positive/negative f16 or f32 scales, zero points.
pub fn random_q4(
    rng: &mut Rng,
    n: usize,
    k: usize,
    group: i32,
    zeros: bool,
    f32_scales: bool,
) -> Q4Data<'static> {
    let shape = Q4Shape::new(n as u64, k as u64, group, zeros as u32).unwrap();
    let mut weight: Vec<u8> = (0..shape.weight_bytes())
        .map(|_| rng.next_u64() as u8)
        .collect();
    if k % 2 == 1 {
        for row in 0..n {
            weight[row * shape.row_bytes() + k / 2] &= 0x0f;
        }
    }
    let scale_type = if f32_scales {
        ScaleType::F32
    } else {
        ScaleType::F16
    };
    let scales: Vec<u8> = (0..shape.scale_count())
        .flat_map(|_| {
            let s = rng.f32() * 0.1;
            if f32_scales {
                s.to_le_bytes().to_vec()
            } else {
                half::f16::from_f32(s).to_le_bytes().to_vec()
            }
        })
        .collect();
    let zeros: Vec<u8> = (0..shape.zeros_bytes())
        .map(|_| (rng.next_u64() % 16) as u8)
        .collect();
    Q4Data {
        shape,
        weight: Cow::Owned(weight),
        scale_type,
        scales: Cow::Owned(scales),
        zeros: Cow::Owned(zeros),
    }
}

/// Uploads Q4 data through the C API (source Q4).
pub fn upload_q4(gpu: &Gpu, data: &Q4Data) -> *mut q4vk_matrix {
    let desc = q4_desc(data);
    let mut mat = std::ptr::null_mut();
    let status = unsafe { q4vk_matrix_create(gpu.ctx, &desc, &mut mat) };
    assert_eq!(status, Q4VK_OK, "q4vk_matrix_create: {}", last_error());
    mat
}

/// The desc of Q4 data for the C API (source Q4), pointing into `data`.
pub fn q4_desc(data: &Q4Data) -> q4vk_matrix_desc {
    let mut desc = unsafe { std::mem::zeroed::<q4vk_matrix_desc>() };
    unsafe { q4vk_matrix_desc_default(&mut desc) };
    desc.source = Q4VK_SOURCE_Q4;
    desc.n = data.shape.n as u64;
    desc.k = data.shape.k as u64;
    desc.group_size = if data.shape.per_channel {
        -1
    } else {
        data.shape.group_size as i32
    };
    desc.zero_points = data.shape.zero_points as u32;
    desc.dtype = if data.scale_type == ScaleType::F32 {
        0
    } else {
        1
    };
    desc.weight = data.weight.as_ptr().cast();
    desc.weight_bytes = data.weight.len();
    desc.scales = data.scales.as_ptr().cast();
    desc.scales_bytes = data.scales.len();
    if data.shape.zero_points {
        desc.zeros = data.zeros.as_ptr().cast();
        desc.zeros_bytes = data.zeros.len();
    }
    desc
}

/// `q4vk_gemv` of `mat` (`n` rows) on `m` activation rows `x` into a y poisoned with NaN:
/// its status and y.
pub fn gemv_c(
    ctx: *mut q4vk_context,
    mat: *const q4vk_matrix,
    x: &[f32],
    n: usize,
    m: usize,
) -> (q4vk_status, Vec<f32>) {
    let mut y = vec![f32::NAN; m * n];
    // SAFETY: a live context and matrix (the caller's), x and y valid for their lengths.
    let status = unsafe {
        q4vk_gemv(
            ctx,
            mat,
            x.as_ptr(),
            x.len(),
            y.as_mut_ptr(),
            y.len(),
            m as u32,
        )
    };
    (status, y)
}

/// `q4vk_gemv_host_args` as `q4vk_gemv_host_args_default` fills them.
pub fn gemv_host_args() -> q4vk_gemv_host_args {
    // SAFETY: zeroed is a valid value (integers and NULL pointers); the call overwrites it.
    unsafe {
        let mut a = std::mem::zeroed();
        q4vk_gemv_host_args_default(&mut a);
        a
    }
}

/// Runs q4vk_gemv with y poisoned by NaN and returns the relative error against the f64
/// reference (every element must have been written).
pub fn check_gemv(gpu: &Gpu, mat: *mut q4vk_matrix, data: &Q4Data, x: &[f32], m: usize) -> f64 {
    let n = data.shape.n;
    let (status, y) = gemv_c(gpu.ctx, mat, x, n, m);
    assert_eq!(status, Q4VK_OK, "q4vk_gemv: {}", last_error());
    if let Some(i) = y.iter().position(|v| !v.is_finite()) {
        panic!(
            "y[{i}] was not written (n = {n}, k = {}, m = {m})",
            data.shape.k
        );
    }
    reference::relative_error(&y, &reference::gemv(data, x, m))
}

/// One GEMV/GEMM case: `n` x `k` weights, `group` (-1 per channel), zero points, f32 scales,
/// `m` activation rows.
pub struct Case {
    pub n: usize,
    pub k: usize,
    pub group: i32,
    pub zeros: bool,
    pub f32_scales: bool,
    pub m: usize,
}

pub const fn case(n: usize, k: usize, group: i32, zeros: bool, f32_scales: bool, m: usize) -> Case {
    Case {
        n,
        k,
        group,
        zeros,
        f32_scales,
        m,
    }
}

/// Runs every case through `q4vk_gemv` on `gpu` (random Q4 data and x from `rng`) and fails
/// on a relative error of 1e-5 or more against the f64 reference.
pub fn run_cases(gpu: &Gpu, rng: &mut Rng, cases: &[Case]) {
    for c in cases {
        let data = random_q4(rng, c.n, c.k, c.group, c.zeros, c.f32_scales);
        let mat = upload_q4(gpu, &data);
        let x = rng.vec(c.m * c.k);
        let err = check_gemv(gpu, mat, &data, &x, c.m);
        assert!(
            err < 1e-5,
            "n {} k {} g {} zeros {} f32 scales {} m {}: rel err {err:e}",
            c.n,
            c.k,
            c.group,
            c.zeros,
            c.f32_scales,
            c.m
        );
        unsafe { q4vk_matrix_destroy(mat) };
    }
    gpu.assert_quiet();
}

/// GEMM cases (m > 8): partial and whole tiles of rows and tokens (the comments count in the
/// SIMT GEMM's GPU tiles, 64 rows × 16 tokens up to m = 16 and 64 × 32 beyond; CPU devices
/// such as lavapipe take 192 × 16 .. 192 × 64, and `gpu_gemm` also runs other tiles), every
/// group size, zero points, f32 scales, odd n and k.
pub const GEMM_CASES: [Case; 7] = [
    // The smallest GEMM: one partial tile of tokens, one partial chunk, per-channel.
    case(7, 33, -1, false, false, 9),
    // One whole tile of tokens (tiles up to m = 16: 64 rows x 16 tokens, beyond: 64 x 32),
    // group 32, zeros.
    case(33, 97, 32, true, false, 16),
    // One row past a tile of rows at m = 15, f32 scales, odd k over three chunks.
    case(65, 95, 32, false, true, 15),
    // One row and one token past a tile (65 = 64 + 1, 33 = 32 + 1), f32 scales, group 64
    // with a partial group.
    case(65, 160, 64, false, true, 33),
    // Two whole tiles of tokens, group 128 with a partial group, zeros and f32 scales.
    case(31, 300, 128, true, true, 64),
    // Tiles of rows whose last holds one row (four of 64 rows, two of the CPU's 192), group
    // 256 with a partial group.
    case(193, 513, 256, false, false, 128),
    // Many tokens (partial last tile), odd k, per-channel zeros.
    case(45, 255, -1, true, false, 300),
];

/// Records `record` into a one-time command buffer from `pool` followed by a compute-write →
/// host-read barrier, submits it to `queue`, waits for it and frees it.
///
/// # Safety
/// `device`, `queue` and `pool` are live and belong together; `pool` is not used by another
/// thread meanwhile.
pub unsafe fn submit_and_wait(
    device: &ash::Device,
    queue: vk::Queue,
    pool: vk::CommandPool,
    record: impl FnOnce(vk::CommandBuffer),
) {
    let d = device;
    let cmd = d
        .allocate_command_buffers(
            &vk::CommandBufferAllocateInfo::default()
                .command_pool(pool)
                .command_buffer_count(1),
        )
        .unwrap()[0];
    d.begin_command_buffer(
        cmd,
        &vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
    )
    .unwrap();
    record(cmd);
    let barrier = [vk::MemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::SHADER_WRITE)
        .dst_access_mask(vk::AccessFlags::HOST_READ)];
    d.cmd_pipeline_barrier(
        cmd,
        vk::PipelineStageFlags::COMPUTE_SHADER,
        vk::PipelineStageFlags::HOST,
        vk::DependencyFlags::empty(),
        &barrier,
        &[],
        &[],
    );
    d.end_command_buffer(cmd).unwrap();
    let fence = d
        .create_fence(&vk::FenceCreateInfo::default(), None)
        .unwrap();
    let cmds = [cmd];
    d.queue_submit(
        queue,
        &[vk::SubmitInfo::default().command_buffers(&cmds)],
        fence,
    )
    .unwrap();
    d.wait_for_fences(&[fence], true, u64::MAX).unwrap();
    d.destroy_fence(fence, None);
    d.free_command_buffers(pool, &cmds);
}

/// y of `mat` for `m` rows of activations `x_bytes` (f32, or f16 with `x_f16`; dense rows),
/// recorded through `gemv::record` (the path of `q4vk_cmd_gemv`: a column order is gathered
/// by the kernels; a workspace where the call can use one, NaN-poisoned too) into a
/// NaN-poisoned buffer and read back.
pub fn record_gemv(
    ctx: &q4vk::vk::context::Context,
    mat: &q4vk::vk::matrix::DeviceMatrix,
    x_bytes: &[u8],
    m: usize,
    x_f16: bool,
) -> Vec<f32> {
    let how = Recording {
        x_f16,
        ..Default::default()
    };
    try_record_gemv(ctx, mat, x_bytes, m, how).unwrap()
}

/// How [`try_record_gemv`] runs a call.
#[derive(Debug, Clone, Copy, Default)]
pub struct Recording {
    /// `Q4VK_GEMV_F16_ACTIVATIONS`.
    pub x_f16: bool,
    /// `Q4VK_GEMV_ROUND_X_TO_F16`.
    pub x_round_f16: bool,
    /// `Q4VK_GEMV_ROUND_X_TO_INT8`.
    pub x_round_int8: bool,
    /// No workspace even where the call could use one (the kernels that read x run).
    pub no_workspace: bool,
}

/// The parameters of a call on `m` dense rows of x (k apart) into y (n apart) of a matrix
/// of `form`, as `how` says (its `no_workspace` aside).
pub fn dense_params(
    form: &q4vk::vk::matrix_form::MatrixForm,
    m: usize,
    how: Recording,
) -> q4vk::vk::gemv::GemvParams {
    q4vk::vk::gemv::GemvParams {
        m: m as u32,
        x_f16: how.x_f16,
        x_stride: form.shape.k as u64,
        y_stride: form.shape.n as u64,
        x_gathered: false,
        x_round_f16: how.x_round_f16,
        x_round_int8: how.x_round_int8,
        workspace_filled: false,
        epilogue: q4vk::vk::gemv::Epilogue::NONE,
    }
}

/// Records with `record` into the context's own command buffer, then a barrier that makes
/// the shaders' writes visible to the host; submits and waits.
pub fn submit_for_host(
    ctx: &q4vk::vk::context::Context,
    record: impl FnOnce(vk::CommandBuffer) -> q4vk::error::Result<()>,
) -> q4vk::error::Result<()> {
    ctx.submit(|cmd| {
        record(cmd)?;
        let [src, dst] = q4vk::vk::submit::SHADER_TO_HOST;
        // SAFETY: recording into the context's own command buffer.
        unsafe { q4vk::vk::submit::record_barrier(&ctx.device.device, cmd, src, dst) };
        Ok(())
    })
}

/// The first `len` 32-bit words of a host-visible buffer.
pub fn read_words(b: &q4vk::vk::memory::Buffer, len: usize) -> Vec<u32> {
    let mut out = vec![0u8; 4 * len];
    b.read(0, &mut out);
    out.chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// A host-visible buffer of `bytes` bytes, each set to `fill`.
pub fn filled_readback(
    ctx: &q4vk::vk::context::Context,
    bytes: usize,
    fill: u8,
    name: &str,
) -> q4vk::vk::memory::Buffer {
    use q4vk::vk::memory::{Buffer, MemoryKind};
    let b = Buffer::new(&ctx.device, bytes as u64, MemoryKind::Readback, name).unwrap();
    b.write(0, &vec![fill; bytes]);
    b
}

/// The first `len` floats of a host-visible buffer.
pub fn read_f32s(b: &q4vk::vk::memory::Buffer, len: usize) -> Vec<f32> {
    read_words(b, len).into_iter().map(f32::from_bits).collect()
}

/// [`record_gemv`] as `how` says, returning what `gemv::record` refused.
pub fn try_record_gemv(
    ctx: &q4vk::vk::context::Context,
    mat: &q4vk::vk::matrix::DeviceMatrix,
    x_bytes: &[u8],
    m: usize,
    how: Recording,
) -> Result<Vec<f32>, q4vk::error::Error> {
    use q4vk::vk::gemv::{self, BufferRange};
    use q4vk::vk::memory::{Buffer, MemoryKind};
    let n = mat.form.shape.n;
    let xb = q4vk::vk::matrix::upload(ctx, x_bytes, "test x").unwrap();
    let yb = Buffer::new(
        &ctx.device,
        4 * (m * n) as u64,
        MemoryKind::Readback,
        "test y",
    )
    .unwrap();
    let nan: Vec<u8> = (0..m * n).flat_map(|_| f32::NAN.to_le_bytes()).collect();
    yb.write(0, &nan);
    let range = |b: &Buffer, bytes: usize| BufferRange {
        buffer: b.buffer,
        offset: 0,
        range: bytes as u64,
    };
    let p = dense_params(&mat.form, m, how);
    let ws_bytes = gemv::workspace_bytes(&ctx.rules, &mat.form, &p)? as usize;
    let wb = filled_readback(ctx, ws_bytes.max(16), 0xFF, "test workspace");
    let workspace = (!how.no_workspace && ws_bytes > 0).then(|| range(&wb, ws_bytes));
    submit_for_host(ctx, |cmd| {
        gemv::record(
            ctx,
            cmd,
            mat,
            range(&xb, x_bytes.len()),
            range(&yb, 4 * m * n),
            &p,
            workspace,
        )
    })?;
    Ok(read_f32s(&yb, m * n))
}

/// One block of f32 activations as the tensor-core kernels split them (`split_scaled`):
/// the factor 2^e that puts the block's largest |x| in [2^14, 2^15) and, per value, 2^-e x
/// as hi (truncated to 11 significant bits) and lo = the exact rest, both f32.
fn split_block(block: &[f32]) -> (f32, Vec<(f32, f32)>) {
    let largest = block
        .iter()
        .map(|v| v.to_bits() & 0x7FFF_FFFF)
        .max()
        .unwrap_or(0);
    let e = ((largest >> 23) & 0xFF) as i32 - 127;
    let shift = (14 - e).clamp(-126, 126);
    let up = f32::from_bits(((127 + shift) as u32) << 23);
    let factor = f32::from_bits(((127 - shift) as u32) << 23);
    let parts = block
        .iter()
        .map(|&v| {
            let scaled = v * up;
            let hi = f32::from_bits(scaled.to_bits() & 0xFFFF_E000);
            (hi, scaled - hi)
        })
        .collect();
    (factor, parts)
}

/// One block of f32 activations as `Q4VK_GEMV_ROUND_X_TO_F16` rounds them
/// (`vk::x_fragments`): the factor 2^e that puts the block's largest |x| in [2^14, 2^15)
/// and the f16 bits of 2^-e x, rounded to nearest (the device adds the exact hi and lo
/// parts of 2^-e x first, so -0 comes out +0).
pub fn round_block_to_f16(block: &[f32]) -> (f32, Vec<u16>) {
    let (factor, parts) = split_block(block);
    let halves = parts
        .iter()
        .map(|&(hi, lo)| half::f16::from_f32(hi + lo).to_bits())
        .collect();
    (factor, halves)
}

/// One block of f32 activations as the tensor-core GEMM's exact two-part form holds them
/// (`vk::x_fragments`, two columns per token): the factor 2^e and, per value, the f16 bits
/// of hi (exact) and of lo rounded to nearest.
pub fn split_block_to_f16(block: &[f32]) -> (f32, Vec<(u16, u16)>) {
    let (factor, parts) = split_block(block);
    let halves = parts
        .iter()
        .map(|&(hi, lo)| {
            let bits = |v: f32| half::f16::from_f32(v).to_bits();
            (bits(hi), bits(lo))
        })
        .collect();
    (factor, halves)
}

/// Runs `record` on a command buffer of a pool the test creates for it on the context's
/// queue family, submits it to the context's queue, waits, and returns what `record`
/// returned.
fn on_own_command_buffer(
    gpu: &Gpu,
    record: impl FnOnce(*mut std::ffi::c_void) -> q4vk_status,
) -> q4vk_status {
    use ash::vk::Handle;
    let ctx = gpu.context();
    let d = &ctx.device.device;
    let mut status = Q4VK_OK;
    unsafe {
        let pool = d
            .create_command_pool(
                &vk::CommandPoolCreateInfo::default().queue_family_index(ctx.device.queue_family),
                None,
            )
            .unwrap();
        submit_and_wait(d, ctx.device.queue, pool, |cmd| {
            status = record(cmd.as_raw() as *mut _);
        });
        d.destroy_command_pool(pool, None);
    }
    status
}

/// Records `q4vk_cmd_gemv_multi` into a command buffer the test owns, submits it to the
/// context's queue and waits.
pub fn run_multi(gpu: &Gpu, mats: &[*const q4vk_matrix], args: &[q4vk_gemv_args]) -> q4vk_status {
    on_own_command_buffer(gpu, |cmd| unsafe {
        q4vk_cmd_gemv_multi(
            gpu.ctx,
            mats.len() as u32,
            mats.as_ptr(),
            cmd as *mut _,
            args.as_ptr(),
        )
    })
}

/// Records `q4vk_cmd_gemv` into a command buffer the test owns, with its own barrier, and
/// submits it to the context's queue.
pub fn run_cmd(gpu: &Gpu, mat: *mut q4vk_matrix, args: &q4vk_gemv_args) -> q4vk_status {
    on_own_command_buffer(gpu, |cmd| unsafe {
        q4vk_cmd_gemv(gpu.ctx, mat, cmd as *mut _, args)
    })
}

/// The form `q4vk_matrix_create` gives `data` (no offsets, no column order) on `ctx`.
pub fn plain_form(
    ctx: &q4vk::vk::context::Context,
    data: &Q4Data,
) -> q4vk::vk::matrix_form::MatrixForm {
    q4vk::vk::matrix_form::MatrixForm::new(
        data.shape,
        data.scale_type == ScaleType::F32,
        false,
        false,
        ctx.coop,
        ctx.limits.max_part_bytes,
    )
    .unwrap()
}

/// Whether a call with `p` on `mat` runs a GEMM kernel, given a workspace as large as it
/// asks (`workspace`) or none: the context's choice for it.
pub fn call_runs_gemm(
    ctx: &q4vk::vk::context::Context,
    mat: &q4vk::vk::matrix::DeviceMatrix,
    p: &q4vk::vk::gemv::GemvParams,
    workspace: bool,
) -> bool {
    choice(ctx, mat, p, workspace).runs_gemm()
}

/// The tensor-core GEMM's shape and K slices a call with `p` on `mat` runs (a workspace as
/// large as it asks, or none), where it runs that GEMM.
pub fn coop_gemm_shape(
    ctx: &q4vk::vk::context::Context,
    mat: &q4vk::vk::matrix::DeviceMatrix,
    p: &q4vk::vk::gemv::GemvParams,
    workspace: bool,
) -> Option<(q4vk::plan::CoopGemmTuning, u32)> {
    choice(ctx, mat, p, workspace).coop_gemm_shape()
}

fn choice(
    ctx: &q4vk::vk::context::Context,
    mat: &q4vk::vk::matrix::DeviceMatrix,
    p: &q4vk::vk::gemv::GemvParams,
    workspace: bool,
) -> q4vk::vk::gemv::Choice {
    use q4vk::vk::gemv::{decide, Room};
    let room = if workspace {
        Room::AsNeeded
    } else {
        Room::None
    };
    decide(&ctx.rules, &mat.form, p, room).expect("the call's choice")
}

/// The SIMT GEMV key a dense call at `m` on `form` runs with `room` of workspace (panics
/// where the rules choose another kernel).
pub fn simt_gemv_key(
    ctx: &q4vk::vk::context::Context,
    form: &q4vk::vk::matrix_form::MatrixForm,
    m: usize,
    room: q4vk::vk::gemv::Room,
) -> q4vk::vk::pipeline::PipelineKey {
    use q4vk::vk::gemv::{decide, KernelChoice};
    let p = dense_params(form, m, Recording::default());
    let choice = decide(&ctx.rules, form, &p, room).expect("the call's choice");
    let KernelChoice::SimtGemv { key, .. } = choice.kernel else {
        panic!("m = {m}: {choice:?} is not the SIMT GEMV");
    };
    key
}

/// The three matrices the concurrency and synchronization tests share (group 32 and 64 with
/// zero points and per channel), from `rng`.
pub fn shared_test_matrices(rng: &mut Rng) -> Vec<Q4Data<'static>> {
    [
        (64, 128, 32, false),
        (130, 256, 64, true),
        (48, 512, -1, false),
    ]
    .iter()
    .map(|&(n, k, g, z)| random_q4(rng, n, k, g, z, false))
    .collect()
}

/// What a context needs to adopt `host` (q4vk's own device standing in for a host's), told
/// the host's enabled `extensions` and `features` as a C host tells them.
pub fn adoption_of(
    host: &q4vk::vk::device::Device,
    extensions: Vec<std::ffi::CString>,
    features: q4vk::vk::features::HostFeatures,
) -> q4vk::vk::context::Adoption {
    q4vk::vk::context::Adoption {
        get_instance_proc_addr: host.instance.entry.static_fn().get_instance_proc_addr,
        instance: host.instance.instance.handle(),
        physical: host.physical,
        device: host.device.handle(),
        queue: host.queue,
        queue_family: host.queue_family,
        extensions,
        features,
        api_version: vk::API_VERSION_1_1,
        lock: None,
    }
}

/// The whole of `b` as a buffer range.
pub fn whole_range(b: &q4vk::vk::memory::Buffer) -> q4vk::vk::gemv::BufferRange {
    q4vk::vk::gemv::BufferRange {
        buffer: b.buffer,
        offset: 0,
        range: b.size,
    }
}

/// A resettable primary command buffer of `ctx`'s queue family and its pool (the caller
/// destroys the pool).
pub fn command_buffer(ctx: &q4vk::vk::context::Context) -> (vk::CommandPool, vk::CommandBuffer) {
    let d = &ctx.device.device;
    let pool = unsafe {
        d.create_command_pool(
            &vk::CommandPoolCreateInfo::default()
                .queue_family_index(ctx.device.queue_family)
                .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
            None,
        )
    }
    .unwrap();
    let cmd = unsafe {
        d.allocate_command_buffers(
            &vk::CommandBufferAllocateInfo::default()
                .command_pool(pool)
                .level(vk::CommandBufferLevel::PRIMARY)
                .command_buffer_count(1),
        )
    }
    .unwrap()[0];
    (pool, cmd)
}

/// A shuffled permutation of 0..k (Fisher–Yates with the test's generator).
pub fn shuffled(rng: &mut Rng, k: usize) -> Vec<u32> {
    let mut order: Vec<u32> = (0..k as u32).collect();
    for i in (1..k).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

/// `x` rounded to f16: (the f32 values, the f16 bytes a call reads).
pub fn rounded_to_f16(x: &[f32]) -> (Vec<f32>, Vec<u8>) {
    let halves: Vec<half::f16> = x.iter().map(|&v| half::f16::from_f32(v)).collect();
    (
        halves.iter().map(|h| h.to_f32()).collect(),
        halves.iter().flat_map(|h| h.to_le_bytes()).collect(),
    )
}

/// The tiles of `all` that the GEMM tests run: the first of each count of invocations along
/// rows and tokens and the first of each count of rows and tokens per invocation (what the
/// kernels' staging loops depend on; each tile is a pipeline to build).
pub fn sampled_tiles(all: &[q4vk::plan::GemmTile]) -> Vec<q4vk::plan::GemmTile> {
    let mut tiles: Vec<q4vk::plan::GemmTile> = Vec::new();
    for t in all {
        let new_grid = !tiles.iter().any(|s| (s.tx, s.ty) == (t.tx, t.ty));
        let new_block = !tiles.iter().any(|s| (s.rn, s.rm) == (t.rn, t.rm));
        if new_grid || new_block {
            tiles.push(*t);
        }
    }
    tiles
}
