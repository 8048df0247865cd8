//! Fuzzes `q4vk_source_from_ggml_type` and `q4vk_matrix_dequantize` on the GGUF block types
//! kept in their native bytes (and Q4_0) with arbitrary ids, shapes, buffer lengths and block bytes: a known
//! status, a message and nothing written on failure; every weight written and finite, on
//! success (an accepted tensor has finite scales and no product past f32).
#![no_main]

mod input;

use input::*;
use libfuzzer_sys::fuzz_target;
use q4vk::ffi::import::*;
use q4vk::ffi::matrix::*;
use q4vk::ffi::status::*;

fuzz_target!(|data: &[u8]| {
    let mut input = Bytes(data);
    let id = input.pick_u32(&[6, 7, 8, 13, 14, 20, 23, 39, 40, 2, 3, 12, 1, 11]);
    let mut source = 0xAAAA_AAAA;
    let status = unsafe { q4vk_source_from_ggml_type(id, &mut source) };
    check(status, &[(&source.to_le_bytes(), &0xAAAA_AAAAu32.to_le_bytes())]);
    if status != Q4VK_OK {
        return;
    }
    let (block, block_bytes) = match id {
        2 => (32, 18),
        3 => (32, 20),
        12 => (256, 144),
        6 => (32, 22),
        7 => (32, 24),
        8 => (32, 34),
        13 => (256, 176),
        14 => (256, 210),
        20 => (32, 18),
        23 => (256, 136),
        39 => (32, 17),
        _ => (64, 36),
    };
    let mut d = unsafe { std::mem::zeroed::<q4vk_matrix_desc>() };
    unsafe { q4vk_matrix_desc_default(&mut d) };
    d.source = source;
    d.n = input.dim(1).min(1 << 12);
    d.k = input.dim(block).min(1 << 14);
    let needed = (d.n * (d.k / block) * block_bytes) as usize;
    let len = input.len_near(needed);
    let weight = input.fill(len);
    d.weight = weight.as_ptr().cast();
    d.weight_bytes = weight.len();
    let len = (d.n * d.k) as usize;
    let before = vec![0xA5u8; 4 * len];
    let mut out = before.clone();
    let status =
        unsafe { q4vk_matrix_dequantize(&d, out.as_mut_ptr().cast(), out.len()) };
    check(status, &[(&out, &before)]);
    if status == Q4VK_OK {
        for (i, w) in out.chunks_exact(4).enumerate() {
            let v = f32::from_le_bytes(w.try_into().unwrap());
            assert!(v.is_finite(), "weight {i} is not finite (type {id})");
        }
    }
});
