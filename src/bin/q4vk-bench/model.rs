//! `q4vk-bench --model NAME`: the linear layers of one decoder step of a model's shapes, every
//! layer's seven matrices (Q, K, V, O, gate, up, down; random weights of the table's form,
//! g128 int4, `--type T` blocks, or `--type Q4_K_M`: Q4_K with Q6_K for V and down in the
//! layers llama.cpp's Q4_K_M files give more bits) recorded into one command buffer as a
//! decoder step runs
//! them: Q, K and V on the layer's input, O on Q's output, gate and up on O's, down on
//! gate's, which is the next layer's input; calls on one x as one multi call (Q, K and V;
//! gate and up: one pre-pass of x where the kernels have one), a barrier between dependent
//! calls. No attention or norms. Each m runs three forms in the same run: the GEMVs alone
//! (O on Q into its own buffer, gate and up on O's, down on gate's); the fused step (Q, K
//! and V with their bias where the model has one; O and down adding the residual into the
//! layer's input in place; up with the SiLU of gate's output, after it); and the unfused
//! chain that computes the same as the fused step with plain GEMVs and separate epilogue
//! passes (`shaders/elementwise.comp`: the bias on Q, K and V; the residual after O and
//! after down; SwiGLU after gate and up), as an engine without fused epilogues runs it.
//! Timed between two timestamps, the median of runs, beside the time the step's bytes take
//! at the copy bandwidth of the same run (the bandwidth ideal). `--quick`: two layers of a
//! quarter of each dimension. `--gate-up-apart`: the plain and unfused forms also run up
//! after gate (a barrier between them), as the fused form does, which measures what running
//! them side by side is worth.

use super::*;
use ash::vk;
use q4vk::error::Result;
use q4vk::vk::context::Context;
use q4vk::vk::gemv::{
    self, BufferRange, Epilogue, EpilogueOperands, GateActivation, GemvParams, Room,
};
use q4vk::vk::kernel::Kernel;
use q4vk::vk::matrix::{DeviceMatrix, UploadRoute};
use q4vk::vk::memory::{Buffer, MemoryKind};
use q4vk::vk::shaders;

/// A decoder's linear-layer shapes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ModelShape {
    /// The name `--model` takes.
    pub(crate) name: &'static str,
    /// Hidden size (Q and O: hidden × hidden).
    pub(crate) hidden: usize,
    /// Intermediate size (gate and up: intermediate × hidden; down: hidden × intermediate).
    pub(crate) intermediate: usize,
    /// K and V outputs (key-value heads × head size).
    pub(crate) kv: usize,
    /// Decoder layers.
    pub(crate) layers: usize,
    /// Q, K and V have a bias (Qwen2).
    pub(crate) qkv_bias: bool,
}

/// The models of `--model` (their configs' sizes).
pub(crate) const MODELS: [ModelShape; 5] = [
    ModelShape {
        name: "Qwen2.5-1.5B",
        hidden: 1536,
        intermediate: 8960,
        kv: 256,
        layers: 28,
        qkv_bias: true,
    },
    ModelShape {
        name: "Llama-3.2-1B",
        hidden: 2048,
        intermediate: 8192,
        kv: 512,
        layers: 16,
        qkv_bias: false,
    },
    ModelShape {
        name: "Llama-3.2-3B",
        hidden: 3072,
        intermediate: 8192,
        kv: 1024,
        layers: 28,
        qkv_bias: false,
    },
    ModelShape {
        name: "Qwen2.5-7B",
        hidden: 3584,
        intermediate: 18944,
        kv: 512,
        layers: 28,
        qkv_bias: true,
    },
    ModelShape {
        name: "Llama-3.1-8B",
        hidden: 4096,
        intermediate: 14336,
        kv: 1024,
        layers: 32,
        qkv_bias: false,
    },
];

/// The model `--model` names (case-insensitive), or a message listing them.
pub(crate) fn model_named(name: &str) -> std::result::Result<ModelShape, String> {
    MODELS
        .iter()
        .find(|m| m.name.eq_ignore_ascii_case(name))
        .copied()
        .ok_or_else(|| {
            let names: Vec<&str> = MODELS.iter().map(|m| m.name).collect();
            format!("--model {name}: one of {}", names.join(", "))
        })
}

/// The activation buffers of a step: the layer input (and output of down), Q, K, V, O, gate
/// and up outputs.
#[derive(Clone, Copy)]
enum Act {
    Input,
    Q,
    K,
    V,
    O,
    Gate,
    Up,
}

impl Act {
    /// Every buffer, in the order of their index (`as usize`).
    const ALL: [Act; 7] = [
        Act::Input,
        Act::Q,
        Act::K,
        Act::V,
        Act::O,
        Act::Gate,
        Act::Up,
    ];

    /// Values per activation row.
    fn size(self, s: &ModelShape) -> usize {
        match self {
            Act::Input | Act::Q | Act::O => s.hidden,
            Act::K | Act::V => s.kv,
            Act::Gate | Act::Up => s.intermediate,
        }
    }
}

/// One matrix of a layer: its rows (outputs), inputs, the buffers it reads and writes, and
/// its epilogue.
struct Linear {
    n: usize,
    k: usize,
    from: Act,
    to: Act,
    /// Whether a barrier orders it after the call before (it reads what that one wrote).
    after_barrier: bool,
    /// A bias of n values is added.
    bias: bool,
    /// The residual added in place (`to` itself).
    residual: bool,
    /// The buffer whose SiLU multiplies the sums.
    gate: Option<Act>,
}

/// The three forms of a step each m runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// The GEMVs alone.
    Plain,
    /// Bias, residuals and the SiLU gate in the GEMVs' epilogues.
    Fused,
    /// The fused step's result from plain GEMVs and separate epilogue passes.
    Unfused,
}

/// A layer's seven matrices in the order a step of `form` records them; with `gate_up_apart`
/// the plain and unfused forms put a barrier between gate and up, as the fused form's order
/// does.
fn layer_linears(s: &ModelShape, form: Form, gate_up_apart: bool) -> [Linear; 7] {
    let (h, i, kv) = (s.hidden, s.intermediate, s.kv);
    let l = |n, k, from, to, after_barrier| Linear {
        n,
        k,
        from,
        to,
        after_barrier,
        bias: false,
        residual: false,
        gate: None,
    };
    let bias = s.qkv_bias;
    match form {
        Form::Plain => [
            l(h, h, Act::Input, Act::Q, true),
            l(kv, h, Act::Input, Act::K, false),
            l(kv, h, Act::Input, Act::V, false),
            l(h, h, Act::Q, Act::O, true),
            l(i, h, Act::O, Act::Gate, true),
            l(i, h, Act::O, Act::Up, gate_up_apart),
            l(h, i, Act::Gate, Act::Input, true),
        ],
        Form::Fused => [
            Linear {
                bias,
                ..l(h, h, Act::Input, Act::Q, true)
            },
            Linear {
                bias,
                ..l(kv, h, Act::Input, Act::K, false)
            },
            Linear {
                bias,
                ..l(kv, h, Act::Input, Act::V, false)
            },
            Linear {
                residual: true,
                ..l(h, h, Act::Q, Act::Input, true)
            },
            l(i, h, Act::Input, Act::Gate, true),
            // After gate, in gate's multi call (which orders it).
            Linear {
                gate: Some(Act::Gate),
                ..l(i, h, Act::Input, Act::Up, false)
            },
            Linear {
                residual: true,
                ..l(h, i, Act::Up, Act::Input, true)
            },
        ],
        // The fused step's data flow; O and down write O's buffer, which a pass adds to
        // the input, and down reads gate's, where SwiGLU's pass leaves its result.
        Form::Unfused => [
            l(h, h, Act::Input, Act::Q, true),
            l(kv, h, Act::Input, Act::K, false),
            l(kv, h, Act::Input, Act::V, false),
            l(h, h, Act::Q, Act::O, true),
            l(i, h, Act::Input, Act::Gate, true),
            l(i, h, Act::Input, Act::Up, gate_up_apart),
            l(h, i, Act::Gate, Act::O, true),
        ],
    }
}

/// An epilogue pass of the unfused form (`shaders/elementwise.comp`), on a step's buffers.
#[derive(Clone, Copy)]
enum Pass {
    /// The bias added to a buffer's rows.
    Bias(Act),
    /// O's buffer added to the input (the residual of O and of down).
    Residual,
    /// SwiGLU: gate's buffer becomes `silu(gate)·up`.
    SwiGlu,
}

impl Pass {
    /// The buffer updated, and the one read beside it (`None`: the bias).
    fn buffers(self) -> (Act, Option<Act>) {
        match self {
            Pass::Bias(y) => (y, None),
            Pass::Residual => (Act::Input, Some(Act::O)),
            Pass::SwiGlu => (Act::Gate, Some(Act::Up)),
        }
    }

    /// Its descriptor set's index among a layer's passes.
    fn slot(self) -> usize {
        match self {
            Pass::Bias(Act::Q) => 0,
            Pass::Bias(Act::K) => 1,
            // V, the only other buffer with a bias.
            Pass::Bias(_) => 2,
            Pass::Residual => 3,
            Pass::SwiGlu => 4,
        }
    }

    /// The shader's mode.
    fn mode(self) -> u32 {
        match self {
            Pass::Bias(_) => 0,
            Pass::Residual => 1,
            Pass::SwiGlu => 2,
        }
    }
}

/// The passes the unfused form records after the calls of layer matrix `index` (and of
/// those sharing its x), after one barrier.
fn passes_after(s: &ModelShape, index: usize) -> &'static [Pass] {
    match index {
        2 if s.qkv_bias => &[Pass::Bias(Act::Q), Pass::Bias(Act::K), Pass::Bias(Act::V)],
        3 | 6 => &[Pass::Residual],
        5 => &[Pass::SwiGlu],
        _ => &[],
    }
}

/// A layer's passes: bias on Q, K and V, the residual, SwiGLU.
const PASS_SLOTS: usize = 5;

/// The unfused form's pass kernel and a set per pass of a layer (by `Pass::slot`; the
/// buffers are the same in every layer).
struct Passes {
    kernel: Kernel,
    sets: [vk::DescriptorSet; PASS_SLOTS],
}

impl Passes {
    /// The kernel and its sets on a step's activation buffers `acts` (by `Act as usize`)
    /// and `bias`.
    fn new(ctx: &Context, acts: &[(Buffer, u64)], bias: &Buffer) -> Result<Passes> {
        let kernel = Kernel::new(
            &ctx.device,
            shaders::ELEMENTWISE,
            "elementwise",
            2,
            12,
            PASS_SLOTS as u32,
        )?;
        let all = [
            Pass::Bias(Act::Q),
            Pass::Bias(Act::K),
            Pass::Bias(Act::V),
            Pass::Residual,
            Pass::SwiGlu,
        ];
        let mut sets = [vk::DescriptorSet::null(); PASS_SLOTS];
        for pass in all {
            let (y, a) = pass.buffers();
            let a = a.map_or(bias, |a| &acts[a as usize].0);
            sets[pass.slot()] = kernel.set(&[&acts[y as usize].0, a])?;
        }
        Ok(Passes { kernel, sets })
    }
}

/// Prints the model-step table of `model` on `ctx`: one row per m of the table.
pub(crate) fn model_table(ctx: &Context, opt: &Options, model: ModelShape) -> Result<()> {
    let div = if opt.quick { 4 } else { 1 };
    let shape = ModelShape {
        hidden: model.hidden / div,
        intermediate: model.intermediate / div,
        kv: model.kv / div,
        layers: if opt.quick { 2 } else { model.layers },
        ..model
    };
    let linears = layer_linears(&shape, Form::Plain, false);
    let mut seed = 0x5_7E9u64;
    let mut mats = Vec::with_capacity(shape.layers * linears.len());
    for layer in 0..shape.layers {
        for (index, l) in linears.iter().enumerate() {
            let ty = match opt.q4_k_m {
                true => Some(q4_k_m_type(index, layer, shape.layers)),
                false => opt.block_type,
            };
            mats.push(upload_random(ctx, opt, ty, (l.n, l.k), &mut seed)?);
        }
    }
    let matrix_bytes: u64 = mats.iter().map(|m| m.form.device_bytes()).sum();
    let copy = Copy::new(ctx, if opt.quick { 16 << 20 } else { 256 << 20 })?;
    let copy_gbs = copy.bandwidth(ctx, if opt.quick { 3 } else { 20 }, opt.warm)?;
    println!(
        "model step: {} ({} layers, hidden {}, intermediate {}, K/V {}), weights {}; {:.1} MiB of matrices; copy bandwidth {copy_gbs:.0} GB/s",
        shape.name,
        shape.layers,
        shape.hidden,
        shape.intermediate,
        shape.kv,
        match (opt.q4_k_m, opt.block_type) {
            (true, _) => {
                let more = (0..shape.layers)
                    .filter(|&i| more_bits(i, shape.layers))
                    .count();
                format!(
                    "GGUF Q4_K_M's mix (Q4_K blocks; Q6_K for V and down in {more} of {} layers)",
                    shape.layers
                )
            }
            (false, Some(ty)) => format!("GGUF {} blocks", ty.name()),
            (false, None) => format!("int4 g{}", opt.group_size()),
        },
        matrix_bytes as f64 / f64::from(1 << 20)
    );
    println!("| m | form | step µs | µs per layer | MB read | ideal µs at copy bandwidth | % of ideal | ÷ fused | kernels of the first layer |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for &m in &opt.ms {
        // Every form first, then the rows with their time against the fused step's.
        let mut rows = Vec::new();
        for form in [Form::Plain, Form::Unfused, Form::Fused] {
            let linears = layer_linears(&shape, form, opt.gate_up_apart);
            let step = Step::new(ctx, opt, &shape, &linears, &mats, m, form)?;
            let warm = Some((&copy, opt.warm));
            let us = time_runs(ctx, opt.iters.clamp(3, 50), warm, |cmd, _| {
                step.record(ctx, cmd, &shape)
            })?;
            let kernels = step.kernels(ctx, &mats[..linears.len()])?;
            rows.push((form, us, matrix_bytes + step.activation_bytes, kernels));
        }
        let fused_us = rows.last().map_or(f64::NAN, |r| r.1);
        for (form, us, bytes, kernels) in rows {
            let ideal = bytes as f64 / (copy_gbs * 1e3);
            let ratio = match form {
                Form::Fused => String::from("—"),
                _ => format!("{:.2}", us / fused_us),
            };
            println!(
                "| {m} | {form:?} | {us:.1} | {:.2} | {:.1} | {ideal:.1} | {:.0}% | {ratio} | {kernels} |",
                us / shape.layers as f64,
                bytes as f64 / 1e6,
                100.0 * ideal / us,
            );
        }
    }
    Ok(())
}

/// Whether llama.cpp's Q4_K_M files give layer `i` of `n` more bits (Q6_K) in V and down:
/// its first and last eighth, and every third layer between (`use_more_bits` of its
/// quantizer).
fn more_bits(i: usize, n: usize) -> bool {
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

/// The block type of layer matrix `index` (Q, K, V, O, gate, up, down) of layer `layer` of
/// `layers` in a Q4_K_M file: Q6_K for V and down where [`more_bits`], else Q4_K.
fn q4_k_m_type(index: usize, layer: usize, layers: usize) -> BlockType {
    match (index == 2 || index == 6) && more_bits(layer, layers) {
        true => BlockType::Q6K,
        false => BlockType::Q4K,
    }
}

/// A device matrix of `n` × `k` random weights: GGUF blocks of `ty`, else the table's int4
/// form.
fn upload_random(
    ctx: &Context,
    opt: &Options,
    ty: Option<BlockType>,
    (n, k): (usize, usize),
    seed: &mut u64,
) -> Result<DeviceMatrix> {
    match ty {
        Some(ty) => {
            let bytes = random_blocks(ty, n, k, seed);
            DeviceMatrix::from_blocks(ctx, ty, n, k, &bytes, &mut UploadRoute::Queue)
        }
        None => {
            let data = random_matrix_grouped(n, k, opt.group_size(), seed);
            DeviceMatrix::new(ctx, &data, None, None)
        }
    }
}

/// A step at `m` activation rows: its activation buffers (x random, the rest written by the
/// step), the bias (one for every matrix: n values of the widest), one workspace per matrix
/// every call uses (the largest any asks; calls on one x share its pre-pass) and the calls.
struct Step<'a> {
    linears: &'a [Linear],
    mats: &'a [DeviceMatrix],
    m: u32,
    acts: Vec<(Buffer, u64)>,
    bias: Buffer,
    workspace: Option<(Buffer, u64)>,
    /// The calls let x be rounded to bytes (`--round-x-int8`).
    x_round_int8: bool,
    /// Bytes of x and y the step's calls (and passes) move.
    activation_bytes: u64,
    /// The unfused form's epilogue passes.
    passes: Option<Passes>,
}

impl<'a> Step<'a> {
    fn new(
        ctx: &Context,
        opt: &Options,
        shape: &ModelShape,
        linears: &'a [Linear],
        mats: &'a [DeviceMatrix],
        m: u32,
        form: Form,
    ) -> Result<Step<'a>> {
        let mb = u64::from(m);
        let mut acts = Vec::new();
        for act in Act::ALL {
            let size = act.size(shape);
            let bytes = 4 * mb * size as u64;
            let buffer = match act {
                Act::Input => {
                    let x: Vec<f32> = (0..m as usize).flat_map(|_| activations(size)).collect();
                    let xv: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
                    q4vk::vk::matrix::upload(ctx, &xv, "q4vk-bench model step input")?
                }
                _ => Buffer::new(
                    &ctx.device,
                    bytes,
                    MemoryKind::Device,
                    "q4vk-bench model step activations",
                )?,
            };
            acts.push((buffer, bytes));
        }
        let mut bytes = 0;
        for (l, mat) in linears.iter().zip(mats) {
            bytes = bytes.max(gemv::workspace_bytes(
                &ctx.rules,
                &mat.form,
                &params(l, m, opt.round_x_int8),
            )?);
        }
        let workspace = match bytes > 0 && !opt.no_workspace {
            true => Some((
                Buffer::new(
                    &ctx.device,
                    bytes,
                    MemoryKind::Device,
                    "q4vk-bench model step workspace",
                )?,
                bytes,
            )),
            false => None,
        };
        // x and y, and what the epilogues read: the bias, the gate, the residual.
        let activation_bytes = shape.layers as u64
            * linears
                .iter()
                .map(|l| {
                    let reads = l.bias as u64 + mb * (l.residual as u64 + l.gate.is_some() as u64);
                    4 * mb * (l.n + l.k) as u64 + 4 * l.n as u64 * reads
                })
                .sum::<u64>();
        let widest = shape.hidden.max(shape.intermediate);
        let bias_values: Vec<u8> = activations(widest)
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let bias = q4vk::vk::matrix::upload(ctx, &bias_values, "q4vk-bench model step bias")?;
        let (passes, pass_bytes) = match form {
            Form::Unfused => {
                let passes = Passes::new(ctx, &acts, &bias)?;
                // Each pass reads y and a (the bias: a row of it) and writes y.
                let bytes: u64 = (0..linears.len())
                    .flat_map(|i| passes_after(shape, i))
                    .map(|pass| {
                        let (y, a) = pass.buffers();
                        let values = mb * y.size(shape) as u64;
                        4 * (2 * values + a.map_or(y.size(shape) as u64, |_| values))
                    })
                    .sum();
                (Some(passes), shape.layers as u64 * bytes)
            }
            _ => (None, 0),
        };
        Ok(Step {
            linears,
            mats,
            m,
            acts,
            bias,
            workspace,
            x_round_int8: opt.round_x_int8,
            activation_bytes: activation_bytes + pass_bytes,
            passes,
        })
    }

    /// The range of activation buffer `a`.
    fn act(&self, a: Act) -> BufferRange {
        let (buffer, range) = &self.acts[a as usize];
        BufferRange {
            buffer: buffer.buffer,
            offset: 0,
            range: *range,
        }
    }

    /// Records the whole step of `shape` into `cmd`: each run of calls on one x with no
    /// barrier between them (Q, K and V; gate and up) as one multi call, a barrier before
    /// the others; in the unfused form each run's epilogue passes after it.
    fn record(&self, ctx: &Context, cmd: vk::CommandBuffer, shape: &ModelShape) -> Result<()> {
        let per_layer = self.linears.len();
        let mut group: Vec<gemv::MultiCall> = Vec::new();
        for (i, mat) in self.mats.iter().enumerate() {
            let l = &self.linears[i % per_layer];
            let joins = !l.after_barrier && group.first().is_some_and(|g| g.x == self.act(l.from));
            if !joins && !group.is_empty() {
                gemv::record_multi(ctx, cmd, &group)?;
                group.clear();
                self.record_passes(ctx, cmd, shape, (i - 1) % per_layer);
            }
            if i > 0 && l.after_barrier {
                // SAFETY: `cmd` is recording.
                unsafe { record_compute_barrier(ctx, cmd) };
            }
            group.push(self.call(mat, l));
        }
        gemv::record_multi(ctx, cmd, &group)?;
        self.record_passes(ctx, cmd, shape, per_layer - 1);
        Ok(())
    }

    /// Records the unfused form's passes after the calls of layer matrix `index`, after
    /// one barrier (they touch different buffers; none in the other forms).
    fn record_passes(
        &self,
        ctx: &Context,
        cmd: vk::CommandBuffer,
        shape: &ModelShape,
        index: usize,
    ) {
        let Some(passes) = &self.passes else {
            return;
        };
        let after = passes_after(shape, index);
        if !after.is_empty() {
            // SAFETY: `cmd` is recording.
            unsafe { record_compute_barrier(ctx, cmd) };
        }
        for &pass in after {
            let y = pass.buffers().0;
            let count = self.m * y.size(shape) as u32;
            let mut push = [0u8; 12];
            for (at, v) in push
                .chunks_exact_mut(4)
                .zip([count, y.size(shape) as u32, pass.mode()])
            {
                at.copy_from_slice(&v.to_ne_bytes());
            }
            // SAFETY: `cmd` is recording; the set's buffers live as long as the step.
            unsafe {
                passes.kernel.record(
                    cmd,
                    passes.sets[pass.slot()],
                    &push,
                    count.div_ceil(256).min(65535),
                );
            }
        }
    }

    /// The call of `l` on `mat`.
    fn call<'m>(&self, mat: &'m DeviceMatrix, l: &Linear) -> gemv::MultiCall<'m> {
        let workspace = self.workspace.as_ref().map(|(b, range)| BufferRange {
            buffer: b.buffer,
            offset: 0,
            range: *range,
        });
        let ops = EpilogueOperands {
            bias: l.bias.then_some(BufferRange {
                buffer: self.bias.buffer,
                offset: 0,
                range: 4 * l.n as u64,
            }),
            residual: l.residual.then(|| self.act(l.to)),
            gate: l.gate.map(|g| self.act(g)),
        };
        gemv::MultiCall {
            mat,
            x: self.act(l.from),
            y: self.act(l.to),
            ops,
            p: params(l, self.m, self.x_round_int8),
            workspace,
        }
    }

    /// The kernels the first layer's calls run, as the plan names them, distinct ones once.
    fn kernels(&self, ctx: &Context, first: &[DeviceMatrix]) -> Result<String> {
        let mut names: Vec<String> = Vec::new();
        let room = self
            .workspace
            .as_ref()
            .map_or(Room::None, |(_, b)| Room::Bytes(*b));
        for (l, mat) in self.linears.iter().zip(first) {
            let choice = gemv::decide(
                &ctx.rules,
                &mat.form,
                &params(l, self.m, self.x_round_int8),
                room,
            )?;
            let name = choice.to_string();
            if !names.contains(&name) {
                names.push(name);
            }
        }
        Ok(names.join("; "))
    }
}

/// The parameters of `l`'s call at `m` rows: dense f32 x and y, its epilogue.
fn params(l: &Linear, m: u32, x_round_int8: bool) -> GemvParams {
    GemvParams {
        m,
        x_f16: false,
        x_stride: l.k as u64,
        y_stride: l.n as u64,
        x_gathered: false,
        x_round_f16: false,
        x_round_int8,
        workspace_filled: false,
        epilogue: Epilogue {
            bias_f16: l.bias.then_some(false),
            gate: l.gate.map(|_| GateActivation::Silu),
            residual: l.residual,
            ..Epilogue::NONE
        },
    }
}
