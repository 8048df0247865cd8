//! Prints every kernel decision q4vk makes on the system's Vulkan device over a grid of
//! contexts, matrix shapes and forms, activation counts and activation types: which kernel
//! family a call runs with and without a workspace, the tensor-core GEMV and GEMM shapes
//! and K slices, the SIMT GEMM's tile and K groups, the integer dot-product GEMV, and the
//! workspace's size and key. One line per case, in a fixed order, so that two builds' dumps
//! on one device compare with `diff` (a change to the rules that should change no decision
//! must leave the dump identical).
//!
//! `cargo run --release --example decisions > dump.txt`; `--quick` runs a smaller grid.

use q4vk::quant::q4::{Q4Data, Q4Shape, ScaleType};
use q4vk::vk::context::{Context, ContextConfig, IntDot};
use q4vk::vk::gemv::{self, Epilogue, GemvParams, Room};
use q4vk::vk::log::Logger;
use q4vk::vk::matrix::DeviceMatrix;
use std::borrow::Cow;
use std::io::Write;

/// Matrix shapes (n, k): the bench's, larger models' and small phone models'.
const SHAPES: [(usize, usize); 17] = [
    (4096, 4096),
    (11008, 4096),
    (4096, 11008),
    (28672, 8192),
    (8192, 28672),
    (14336, 4096),
    (5120, 13824),
    (1536, 8960),
    (8960, 1536),
    (2048, 8192),
    (8192, 2048),
    (3072, 8192),
    (8192, 3072),
    (2048, 2048),
    (1536, 1536),
    (256, 1536),
    (130, 300),
];

/// Activation counts.
const MS: [u32; 27] = [
    1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 16, 17, 24, 32, 33, 40, 41, 48, 64, 65, 96, 128, 256, 512,
    1024, 2048,
];

/// Matrix forms: (name, group size, zero points, per-group offsets).
const FORMS: [(&str, i32, bool, bool); 5] = [
    ("g128", 128, false, false),
    ("g128z", 128, true, false),
    ("g64", 64, false, false),
    ("g32", 32, false, false),
    ("g32o", 32, false, true),
];

fn configs() -> Vec<(&'static str, ContextConfig)> {
    let base = ContextConfig::default;
    vec![
        ("default", base()),
        (
            "no-coop",
            ContextConfig {
                no_coop: true,
                ..base()
            },
        ),
        (
            "no-coop-int-dot",
            ContextConfig {
                no_coop: true,
                int_dot: IntDot::Forced,
                ..base()
            },
        ),
        (
            "no-coop-no-int-dot",
            ContextConfig {
                no_coop: true,
                int_dot: IntDot::Off,
                ..base()
            },
        ),
        (
            "portable",
            ContextConfig {
                portable: true,
                ..base()
            },
        ),
        (
            "gemm-from-5",
            ContextConfig {
                overrides: q4vk::plan::Overrides {
                    gemm_from_m: Some(5),
                    ..Default::default()
                },
                ..base()
            },
        ),
    ]
}

/// A matrix of zero codes and unit scales (the decisions read only its geometry).
fn matrix(ctx: &Context, n: usize, k: usize, form: (&str, i32, bool, bool)) -> DeviceMatrix {
    let (_, group, zeros, offsets) = form;
    let shape = Q4Shape::new(n as u64, k as u64, group, u32::from(zeros)).unwrap();
    let data = Q4Data {
        shape,
        weight: Cow::Owned(vec![0u8; shape.weight_bytes()]),
        scale_type: ScaleType::F32,
        scales: Cow::Owned(1f32.to_le_bytes().repeat(shape.scale_count())),
        zeros: Cow::Owned(vec![8u8; shape.zeros_bytes()]),
    };
    let offsets = offsets.then(|| vec![0f32; shape.scale_count()]);
    DeviceMatrix::new(ctx, &data, offsets.as_deref(), None).unwrap()
}

fn decisions(ctx: &Context, mat: &DeviceMatrix, p: &GemvParams) -> String {
    let choice = |ws: bool| {
        let room = if ws { Room::AsNeeded } else { Room::None };
        gemv::decide(&ctx.rules, &mat.form, p, room)
    };
    let coop_gemm = |ws| match choice(ws).map(|c| c.coop_gemm_shape()) {
        Ok(Some((shape, slices))) => format!("{shape}/{slices}"),
        Ok(None) => "-".into(),
        Err(e) => format!("refused({e})"),
    };
    let runs_gemm = |ws| match choice(ws) {
        Ok(c) => (c.runs_gemm() as u8).to_string(),
        Err(e) => format!("refused({e})"),
    };
    let simt_gemm = match gemv::simt_gemm_shape(&ctx.rules, &mat.form, p.m) {
        Ok((t, k)) => format!("{},{},{},{}/{k}", t.tx, t.ty, t.rn, t.rm),
        Err(e) => format!("refused({e})"),
    };
    let t = &ctx.pipelines.tuning;
    let simt_gemv = format!(
        "{},{},{},{}",
        t.workgroup_for(mat.form.layout.chunks),
        t.rows,
        t.unroll,
        t.split
    );
    format!(
        "gemm={} ws-gemm={} int-dot={} coop-gemv={:?} coop-gemm={} ws-coop-gemm={} simt-gemv={simt_gemv} simt-gemm={simt_gemm} ws={} key={:016x}",
        runs_gemm(false),
        runs_gemm(true),
        gemv::runs_int_dot(&ctx.rules, &mat.form, p.m) as u8,
        gemv::coop_gemv_shape(&ctx.rules, &mat.form, p),
        coop_gemm(false),
        coop_gemm(true),
        gemv::workspace_bytes(&ctx.rules, &mat.form, p).unwrap_or(0),
        gemv::workspace_key(&ctx.rules, mat, p).unwrap_or(0),
    )
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let out = std::io::stdout();
    let mut out = out.lock();
    for (label, config) in configs() {
        let ctx = match Context::new(config, Logger::silent()) {
            Ok(c) => c,
            Err(e) => {
                writeln!(out, "{label}: no context ({e})").unwrap();
                continue;
            }
        };
        let shapes = if quick { &SHAPES[13..] } else { &SHAPES[..] };
        for &(n, k) in shapes {
            for form in FORMS {
                let mat = matrix(&ctx, n, k, form);
                for m in MS {
                    for (x, x_f16, x_round_f16) in [
                        ("f32", false, false),
                        ("f16", true, false),
                        ("r16", false, true),
                    ] {
                        let p = GemvParams {
                            m,
                            x_f16,
                            x_stride: k as u64,
                            y_stride: n as u64,
                            x_gathered: false,
                            x_round_f16,
                            x_round_int8: false,
                            workspace_filled: false,
                            epilogue: Epilogue::NONE,
                        };
                        writeln!(
                            out,
                            "{label} {n}x{k} {} x={x} m={m}: {}",
                            form.0,
                            decisions(&ctx, &mat, &p)
                        )
                        .unwrap();
                    }
                }
            }
        }
    }
}
