//! Benchmark inputs: seeded random Q4 matrices (symmetric g128, with zero points, or the
//! imported offset form), random GGUF blocks, and activations.

use q4vk::import::gguf_blocks::BlockType;
use q4vk::quant::q4::{Q4Data, Q4Shape, ScaleType};
use std::borrow::Cow;

pub(crate) fn fill_random(bytes: &mut [u8], seed: &mut u64) {
    for chunk in bytes.chunks_mut(8) {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        let v = seed.to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}

pub(crate) fn random_matrix(n: usize, k: usize, seed: &mut u64) -> Q4Data<'static> {
    random_matrix_grouped(n, k, 128, seed)
}

pub(crate) fn random_matrix_grouped(
    n: usize,
    k: usize,
    group: i32,
    seed: &mut u64,
) -> Q4Data<'static> {
    let shape = Q4Shape::new(n as u64, k as u64, group, 0).expect("valid shape");
    let mut weight = vec![0u8; shape.weight_bytes()];
    fill_random(&mut weight, seed);
    let scales: Vec<u8> = (0..shape.scale_count())
        .flat_map(|i| half::f16::from_f32(0.01 + (i % 13) as f32 * 0.001).to_le_bytes())
        .collect();
    Q4Data {
        shape,
        weight: Cow::Owned(weight),
        scale_type: ScaleType::F16,
        scales: Cow::Owned(scales),
        zeros: Cow::Owned(Vec::new()),
    }
}

/// A random matrix in groups of `group` with a random zero point (0..=15) per group: the
/// asymmetric form.
pub(crate) fn random_matrix_with_zeros(
    n: usize,
    k: usize,
    group: i32,
    seed: &mut u64,
) -> Q4Data<'static> {
    let mut data = random_matrix_grouped(n, k, group, seed);
    data.shape = Q4Shape::new(n as u64, k as u64, group, 1).expect("valid shape");
    let mut zeros = vec![0u8; data.shape.scale_count()];
    fill_random(&mut zeros, seed);
    zeros.iter_mut().for_each(|z| *z &= 15);
    data.zeros = Cow::Owned(zeros);
    data
}

/// The imported Q4_K / Q4_1 form of a random matrix (groups of 32 there): f32 scales (the
/// f16 values widened) and per-group offsets.
pub(crate) fn random_offset_matrix(
    n: usize,
    k: usize,
    group: i32,
    seed: &mut u64,
) -> (Q4Data<'static>, Vec<f32>) {
    let mut data = random_matrix_grouped(n, k, group, seed);
    let scales: Vec<u8> = (0..data.shape.scale_count())
        .flat_map(|i| data.scale(i).to_le_bytes())
        .collect();
    data.scales = Cow::Owned(scales);
    data.scale_type = ScaleType::F32;
    let offsets = (0..data.shape.scale_count())
        .map(|i| -0.08 + (i % 17) as f32 * 0.001)
        .collect();
    (data, offsets)
}

pub(crate) fn activations(k: usize) -> Vec<f32> {
    (0..k)
        .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
        .collect()
}

/// `n` rows of `k / block` random blocks of `ty` with sane scale fields: f16 `d`, `m` and
/// `dmin` of 0.002 .. 0.05, E8M0 exponents 120 .. 131, UE4M3 scales below 8.
pub(crate) fn random_blocks(ty: BlockType, n: usize, k: usize, seed: &mut u64) -> Vec<u8> {
    let size = ty.block_bytes();
    let mut bytes = vec![0u8; n * (k / ty.block_elements()) * size];
    fill_random(&mut bytes, seed);
    for (i, block) in bytes.chunks_exact_mut(size).enumerate() {
        for &(at, _) in ty.f16_scale_fields() {
            let v = 0.002 + (i % 97) as f32 * 0.0005;
            block[at..at + 2].copy_from_slice(&half::f16::from_f32(v).to_le_bytes());
        }
        match ty {
            BlockType::Mxfp4 => block[0] = 120 + (i % 12) as u8,
            BlockType::Nvfp4 => block[..4].iter_mut().for_each(|s| *s %= 80),
            _ => {}
        }
    }
    bytes
}
