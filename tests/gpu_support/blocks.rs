//! Matrices of GGUF block types for the GPU tests: seeded random blocks with sane scales,
//! their C API desc and the weights `q4vk_matrix_dequantize` gives for them; a call with f16
//! x and the check of a y against its f64 reference.

use super::{gemv_host_args, last_error, Rng};
use q4vk::ffi::context::q4vk_context;
use q4vk::ffi::gemv::{q4vk_gemv_host, Q4VK_GEMV_F16_ACTIVATIONS};
use q4vk::ffi::import::q4vk_matrix_dequantize;
use q4vk::ffi::matrix::*;
use q4vk::ffi::status::Q4VK_OK;
use q4vk::import::gguf_blocks::BlockType;

/// The `Q4VK_SOURCE_GGUF_*` source of `ty`.
pub fn source_of(ty: BlockType) -> q4vk_matrix_source {
    match ty {
        BlockType::Q4_1 => Q4VK_SOURCE_GGUF_Q4_1,
        BlockType::Q5_0 => Q4VK_SOURCE_GGUF_Q5_0,
        BlockType::Q5_1 => Q4VK_SOURCE_GGUF_Q5_1,
        BlockType::Q8_0 => Q4VK_SOURCE_GGUF_Q8_0,
        BlockType::Q4K => Q4VK_SOURCE_GGUF_Q4_K,
        BlockType::Q5K => Q4VK_SOURCE_GGUF_Q5_K,
        BlockType::Q6K => Q4VK_SOURCE_GGUF_Q6_K,
        BlockType::Iq4Nl => Q4VK_SOURCE_GGUF_IQ4_NL,
        BlockType::Iq4Xs => Q4VK_SOURCE_GGUF_IQ4_XS,
        BlockType::Mxfp4 => Q4VK_SOURCE_GGUF_MXFP4,
        BlockType::Nvfp4 => Q4VK_SOURCE_GGUF_NVFP4,
    }
}

/// An f16 of magnitude 0.002 .. 0.05 and random sign, as bytes.
pub fn sane_f16(rng: &mut Rng) -> [u8; 2] {
    let v = rng.f32();
    let magnitude = 0.002 + 0.048 * v.abs();
    half::f16::from_f32(magnitude.copysign(v)).to_le_bytes()
}

/// `n` rows of `k / block` random blocks of `ty` whose scale fields are finite and sane
/// (f16 `d`, `m`, `dmin` in ±0.002..0.05, E8M0 exponents near 1, UE4M3 scales below 8).
pub fn random_blocks(rng: &mut Rng, ty: BlockType, n: usize, k: usize) -> Vec<u8> {
    let size = ty.block_bytes();
    let mut bytes: Vec<u8> = (0..n * k / ty.block_elements() * size)
        .map(|_| rng.next_u64() as u8)
        .collect();
    for block in bytes.chunks_exact_mut(size) {
        for &(at, _) in ty.f16_scale_fields() {
            block[at..at + 2].copy_from_slice(&sane_f16(rng));
        }
        match ty {
            BlockType::Mxfp4 => block[0] = 120 + (rng.next_u64() % 12) as u8,
            BlockType::Nvfp4 => {
                for s in &mut block[..4] {
                    // Exponent 0..9 (subnormals included), never the NaN 0x7F.
                    *s = (rng.next_u64() % 80) as u8;
                }
            }
            _ => {}
        }
    }
    bytes
}

/// The desc of an `n` × `k` tensor of `ty` whose blocks are `bytes`.
pub fn blocks_desc(ty: BlockType, n: usize, k: usize, bytes: &[u8]) -> q4vk_matrix_desc {
    let mut d = unsafe { std::mem::zeroed::<q4vk_matrix_desc>() };
    unsafe { q4vk_matrix_desc_default(&mut d) };
    d.source = source_of(ty);
    d.n = n as u64;
    d.k = k as u64;
    d.weight = bytes.as_ptr().cast();
    d.weight_bytes = bytes.len();
    d
}

/// The weights `q4vk_matrix_dequantize` gives for `desc` (`[n][k]`).
pub fn dequantized(desc: &q4vk_matrix_desc) -> Vec<f32> {
    let mut w = vec![f32::NAN; (desc.n * desc.k) as usize];
    let status = unsafe { q4vk_matrix_dequantize(desc, w.as_mut_ptr(), 4 * w.len()) };
    assert_eq!(status, Q4VK_OK, "q4vk_matrix_dequantize: {}", last_error());
    w
}

/// `q4vk_gemv_host` with f16 x (`bytes`) into a NaN-poisoned y.
pub fn gemv_f16_x(
    ctx: *mut q4vk_context,
    mat: *mut q4vk_matrix,
    bytes: &[u8],
    n: usize,
    m: usize,
) -> Vec<f32> {
    let mut y = vec![f32::NAN; m * n];
    let mut args = gemv_host_args();
    args.x = bytes.as_ptr().cast();
    args.x_bytes = bytes.len();
    args.y = y.as_mut_ptr();
    args.y_len = y.len();
    args.m = m as u32;
    args.flags = Q4VK_GEMV_F16_ACTIVATIONS;
    let status = unsafe { q4vk_gemv_host(ctx, mat, &args) };
    assert_eq!(status, Q4VK_OK, "q4vk_gemv_host: {}", last_error());
    y
}

/// Asserts `y` is all written and within 1e-5 of `want`.
pub fn assert_close(y: &[f32], want: &[f64], what: &str) {
    if let Some(i) = y.iter().position(|v| !v.is_finite()) {
        panic!("{what}: y[{i}] was not written");
    }
    let err = q4vk::cpu::reference::relative_error(y, want);
    assert!(err < 1e-5, "{what}: relative error {err:e}");
}
