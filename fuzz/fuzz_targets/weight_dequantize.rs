//! Fuzzes `q4vk_weight_dequantize` with arbitrary descs, buffer lengths and bytes.
#![no_main]

mod input;

use input::*;
use libfuzzer_sys::fuzz_target;
use q4vk::ffi::weight::*;

fuzz_target!(|data: &[u8]| {
    let mut input = Bytes(data);
    let d = desc(&mut input);
    let (weight_bytes, qweight_bytes, scale_bytes) = sizes(&d);
    let (q_len, s_len, w_len) = (input.len_near(qweight_bytes), input.len_near(scale_bytes), input.len_near(weight_bytes));
    let (q, s) = (input.fill(q_len), input.fill(s_len));
    let w_before = input.fill(w_len);
    let mut w = w_before.clone();
    let status = unsafe {
        q4vk_weight_dequantize(&d, q.as_ptr().cast(), q.len(), s.as_ptr().cast(), s.len(), w.as_mut_ptr().cast(), w.len())
    };
    check(status, &[(&w, &w_before)]);
});
