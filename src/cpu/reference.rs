//! f64 reference GEMV of the *dequantized* Q4 weights: `y[m][n] = sum_k x[m][k] * (u - z) * s`
//! (or `(s·u + o)` for matrices with per-group offsets), and of dense f32 weights.

use crate::quant::q4::Q4Data;

/// Reference `y` (`m·n`, row-major) for `x` (`m·k`, row-major).
pub fn gemv(data: &Q4Data, x: &[f32], m: usize) -> Vec<f64> {
    gemv_of(data, x, m, |g, u| {
        (u - data.zero(g) as f64) * data.scale(g) as f64
    })
}

/// Reference `y` (`m·n`) of dense f32 weights `w` (`[n][k]`) for `x` (`m·k`).
pub fn gemv_dense(w: &[f32], x: &[f32], n: usize, k: usize, m: usize) -> Vec<f64> {
    let mut y = vec![0f64; m * n];
    for (i, xs) in x.chunks_exact(k).take(m).enumerate() {
        for (r, row) in w.chunks_exact(k).take(n).enumerate() {
            y[i * n + r] = row
                .iter()
                .zip(xs)
                .map(|(&a, &b)| f64::from(a) * f64::from(b))
                .sum();
        }
    }
    y
}

/// Reference `y` of a matrix with per-group offsets (`offsets`: `[n][groups]`, one per
/// scale): `w = s·u + o`, codes without a zero point.
pub fn gemv_with_offsets(data: &Q4Data, offsets: &[f32], x: &[f32], m: usize) -> Vec<f64> {
    gemv_of(data, x, m, |g, u| {
        data.scale(g) as f64 * u + offsets[g] as f64
    })
}

/// `y = W x` in f64 with `W[row][k] = weight(scale index, code)`.
fn gemv_of(data: &Q4Data, x: &[f32], m: usize, weight: impl Fn(usize, f64) -> f64) -> Vec<f64> {
    let (n, k) = (data.shape.n, data.shape.k);
    let groups = data.shape.groups();
    let mut y = vec![0.0f64; m * n];
    let mut w = vec![0.0f64; k];
    for row in 0..n {
        for (kk, wk) in w.iter_mut().enumerate() {
            let g = row * groups + kk / data.shape.group_size;
            *wk = weight(g, data.code(row, kk) as f64);
        }
        for mi in 0..m {
            let xr = &x[mi * k..(mi + 1) * k];
            y[mi * n + row] = w.iter().zip(xr).map(|(&a, &b)| a * b as f64).sum();
        }
    }
    y
}

/// ‖y − reference‖ / ‖reference‖ (f64).
pub fn relative_error(y: &[f32], reference: &[f64]) -> f64 {
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for (&a, &b) in y.iter().zip(reference) {
        diff += (a as f64 - b) * (a as f64 - b);
        norm += b * b;
    }
    (diff / norm.max(f64::MIN_POSITIVE)).sqrt()
}
