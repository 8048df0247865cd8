//! `q4vk-bench --load`: load time. Per shape, creating a matrix from its packed blob
//! (`q4vk_matrix_create_from_blob`), against copying the same bytes into one device buffer
//! the way q4vk uploads (mapped memory written in place, else staging and
//! `vkCmdCopyBuffer`), and against creating it from Q4 data (conversion and packing); MiB/s
//! of the blob's bytes, the fastest of the runs.

use super::data::random_matrix_grouped;
use super::Options;
use q4vk::error::Result;
use q4vk::vk::context::Context;
use q4vk::vk::matrix::{upload, DeviceMatrix};
use q4vk::vk::matrix_blob::{blob_of, matrix_from_blob};
use std::time::Instant;

/// The fastest of `runs` timings of `f`, in seconds.
fn fastest<T>(runs: usize, mut f: impl FnMut() -> Result<T>) -> Result<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..runs {
        let started = Instant::now();
        let value = f()?;
        best = best.min(started.elapsed().as_secs_f64());
        drop(value);
    }
    Ok(best)
}

/// Prints the load-time table for `shapes` on `ctx`.
pub(crate) fn load_table(ctx: &Context, opt: &Options, shapes: &[(usize, usize)]) -> Result<()> {
    let runs = if opt.quick { 3 } else { 10 };
    println!("load time: fastest of {runs}; MiB/s of the blob's bytes");
    println!("| N × K | blob MiB | from blob ms | from blob MiB/s | plain copy ms | plain copy MiB/s | from blob / plain copy | from Q4 data ms |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut seed = 0x10AD_u64;
    for &(n, k) in shapes {
        let data = random_matrix_grouped(n, k, opt.group_size(), &mut seed);
        let mat = DeviceMatrix::new(ctx, &data, None, None)?;
        let blob = blob_of(ctx, &mat)?;
        drop(mat);
        let mib = blob.len() as f64 / f64::from(1 << 20);
        let from_blob = fastest(runs, || matrix_from_blob(ctx, &blob))?;
        let plain = fastest(runs, || upload(ctx, &blob, "q4vk-bench plain copy"))?;
        let from_data = fastest(runs, || DeviceMatrix::new(ctx, &data, None, None))?;
        println!(
            "| {n} × {k} | {mib:.1} | {:.2} | {:.0} | {:.2} | {:.0} | {:.2} | {:.2} |",
            1e3 * from_blob,
            mib / from_blob,
            1e3 * plain,
            mib / plain,
            plain / from_blob,
            1e3 * from_data
        );
    }
    Ok(())
}
