//! The tuning sweeps: SIMT workgroup shapes (`--sweep`) and tensor-core tiles × subgroups
//! (`--coop-sweep`) on the target cases, each in a fresh context.

use super::*;
use q4vk::cpu::reference;
use q4vk::error::{Error, Result};
use q4vk::quant::q4::Q4Data;

/// (workgroup, rows, unroll, split) grid of `--sweep`.
pub(crate) const GRID: [(u32, u32, u32, u32); 24] = [
    (128, 8, 1, 1),
    (128, 16, 1, 1),
    (64, 8, 1, 1),
    (128, 8, 1, 2),
    (128, 8, 1, 4),
    (128, 8, 1, 8),
    (128, 16, 1, 2),
    (128, 16, 1, 4),
    (128, 16, 1, 8),
    (128, 16, 1, 16),
    (128, 32, 1, 4),
    (128, 32, 1, 8),
    (64, 16, 1, 4),
    (64, 16, 1, 8),
    (64, 32, 1, 8),
    (256, 16, 1, 4),
    (256, 16, 1, 8),
    (256, 32, 1, 8),
    (128, 16, 2, 4),
    (128, 16, 2, 8),
    (64, 16, 2, 4),
    (32, 16, 1, 4),
    (32, 16, 2, 8),
    (256, 8, 1, 2),
];

/// Times the four target cases over a grid of workgroup shapes, each in a fresh context.
pub(crate) fn sweep(opt: &Options) -> Result<()> {
    let div = if opt.quick { 4 } else { 1 };
    let mut seed = 0x51u64;
    let cases: Vec<(Q4Data, Vec<f32>, Vec<f64>, bool)> = [
        (28672, 8192, true),
        (8192, 28672, true),
        (11008, 4096, false),
        (4096, 11008, false),
    ]
    .into_iter()
    .map(|(n, k, cold)| {
        let data = random_matrix(n / div, k / div, &mut seed);
        let x = activations(data.shape.k);
        let r = reference::gemv(&data, &x, 1);
        (data, x, r, cold)
    })
    .collect();
    print!("| workgroup | rows | unroll | split |");
    for (d, _, _, cold) in &cases {
        let mode = if *cold { "cold" } else { "hot" };
        print!(" {} × {} {mode} µs |", d.shape.n, d.shape.k);
    }
    println!();
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for (wg, rows, unroll, split) in GRID {
        // A workgroup smaller than this device's subgroup is refused: skip it.
        let Ok(ctx) = context(opt, Some((wg, rows)), Some(unroll), Some(split), &[]) else {
            continue;
        };
        let probe = Copy::new(&ctx, if opt.quick { 16 << 20 } else { 256 << 20 })?;
        print!("| {wg} | {rows} | {unroll} | {split} |");
        for (d, x, r, cold) in &cases {
            let (c, h, _, e, _, _) = time_gemv(&ctx, opt, (d, None), x, 1, Some(r), &probe)?;
            if e > 1e-5 {
                print!(" wrong ({e:.1e}) |");
                continue;
            }
            print!(" {:.1} |", if *cold { c } else { h });
        }
        println!();
    }
    Ok(())
}

/// (row tiles, subgroups) grid of `--coop-sweep`.
pub(crate) const COOP_GRID: [(u32, u32); 10] = [
    (1, 4),
    (1, 8),
    (1, 16),
    (2, 2),
    (2, 4),
    (2, 8),
    (2, 16),
    (4, 2),
    (4, 4),
    (4, 8),
];

/// Times the tensor-core kernel over [`COOP_GRID`] on the target cases (m = 1, and m = 8
/// on 28672 × 8192 cold), the per-matrix default first; every case is uploaded once and
/// timed at each shape of the grid in turn.
pub(crate) fn coop_sweep(opt: &Options) -> Result<()> {
    let div = if opt.quick { 4 } else { 1 };
    let mut seed = 0x51u64;
    let mut ctx = context(opt, None, None, None, &[])?;
    if !ctx.coop {
        return Err(Error::Unsupported(
            "this device has no tensor-core path".into(),
        ));
    }
    let probe = Copy::new(&ctx, if opt.quick { 16 << 20 } else { 256 << 20 })?;
    let mut cases = Vec::new();
    print!("| tiles | subgroups |");
    for (n, k, m, cold) in [
        (28672, 8192, 1, true),
        (8192, 28672, 1, true),
        (11008, 4096, 1, false),
        (4096, 11008, 1, false),
        (28672, 8192, 8, true),
    ] {
        let data = random_matrix(n / div, k / div, &mut seed);
        let x = activations(m as usize * data.shape.k);
        let r = reference::gemv(&data, &x, m as usize);
        print!(
            " {} × {} m={m} {} µs |",
            data.shape.n,
            data.shape.k,
            if cold { "cold" } else { "hot" }
        );
        cases.push((
            prepare(&ctx, opt, (&data, None).into(), &x, m, Some(&r))?,
            cold,
        ));
    }
    println!();
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let grid = std::iter::once(None).chain(COOP_GRID.iter().map(|&g| Some(g)));
    for g in grid {
        ctx.set_overrides(|o| o.coop_gemv = g)?;
        match g {
            Some((t, s)) => print!("| {t} | {s} |"),
            None => print!("| default | default |"),
        }
        for (case, cold) in &cases {
            match case.time(&ctx, opt, &probe) {
                Ok((_, _, _, e, _, _)) if e > 1e-5 => print!(" wrong ({e:.1e}) |"),
                Ok((c, h, _, _, _, _)) => print!(" {:.1} |", if *cold { c } else { h }),
                Err(e) => print!(" {e} |"),
            }
        }
        println!();
    }
    Ok(())
}
