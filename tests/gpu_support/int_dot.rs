//! Helpers of the integer dot-product GEMV tests (`gpu_int_dot`, `gpu_int_dot_bytes`): x
//! with extreme blocks, and a recorded call whose workspace is read back and checked for
//! writes outside it.

use super::{filled_readback, read_f32s, read_words, submit_for_host, Rng};
use q4vk::vk::context::Context;
use q4vk::vk::gemv::{self, BufferRange, GemvParams};
use q4vk::vk::matrix::{upload, DeviceMatrix};
use q4vk::vk::memory::Buffer;

/// `m` rows of `k` activations, with a block of huge values, one of tiny ones and one of
/// zeros where K has room.
pub fn activations(rng: &mut Rng, m: usize, k: usize) -> Vec<f32> {
    let mut x = rng.vec(m * k);
    for row in x.chunks_exact_mut(k) {
        if k >= 128 {
            row[..32].iter_mut().for_each(|v| *v *= 3.0e3);
            row[32..64].iter_mut().for_each(|v| *v *= 1.0e-9);
            row[64..96].fill(0.0);
        }
    }
    x
}

/// The bytes of f32 values, in the host's order.
pub fn f32_bytes(x: &[f32]) -> Vec<u8> {
    x.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

/// Records `mat`'s call with `p` on `x_bytes` (the path of `q4vk_cmd_gemv`) with a
/// workspace at byte `workspace` of a larger buffer (or none); returns y (its `p.m` rows of
/// n) and the workspace's words (empty without one), both poisoned before the run, and
/// checks that nothing outside the workspace's bytes was written.
pub fn record_in_workspace(
    ctx: &Context,
    mat: &DeviceMatrix,
    x_bytes: &[u8],
    p: &GemvParams,
    workspace: Option<usize>,
) -> (Vec<f32>, Vec<u32>) {
    let (m, n) = (p.m as usize, mat.form.shape.n);
    let ws_bytes = gemv::workspace_bytes(&ctx.rules, &mat.form, p).unwrap() as usize;
    let at = workspace.unwrap_or(0);
    let xb = upload(ctx, x_bytes, "test x").unwrap();
    let yb = filled_readback(ctx, 4 * m * n, 0xFF, "test y");
    let wb = filled_readback(ctx, at + ws_bytes + 64, 0xA5, "test workspace");
    let range = |b: &Buffer, offset: usize, bytes: usize| BufferRange {
        buffer: b.buffer,
        offset: offset as u64,
        range: bytes as u64,
    };
    submit_for_host(ctx, |cmd| {
        gemv::record(
            ctx,
            cmd,
            mat,
            range(&xb, 0, x_bytes.len()),
            range(&yb, 0, 4 * m * n),
            p,
            // A range past what the call needs: only its bytes are written.
            workspace.map(|_| range(&wb, at, ws_bytes + 64)),
        )
    })
    .unwrap();
    let y = read_f32s(&yb, m * n);
    let w = read_words(&wb, (at + ws_bytes + 64) / 4);
    let (before, rest) = w.split_at(at / 4);
    let (inside, after) = rest.split_at(ws_bytes / 4);
    assert!(
        before.iter().chain(after).all(|&v| v == 0xA5A5_A5A5),
        "written outside the workspace"
    );
    let words = match workspace {
        Some(_) => inside.to_vec(),
        None => Vec::new(),
    };
    (y, words)
}
