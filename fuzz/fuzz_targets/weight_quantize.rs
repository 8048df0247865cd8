//! Fuzzes `q4vk_weight_quantize` (and its size queries) with arbitrary descs, buffer
//! lengths and weight bytes (NaN/Inf included); a success must also round-trip through
//! unpermute/permute.
#![no_main]

mod input;

use input::*;
use libfuzzer_sys::fuzz_target;
use q4vk::ffi::status::*;
use q4vk::ffi::weight::*;

fuzz_target!(|data: &[u8]| {
    let mut input = Bytes(data);
    let d = desc(&mut input);
    let (weight_bytes, qweight_bytes, scale_bytes) = sizes(&d);
    let weight_len = input.len_near(weight_bytes);
    let (q_len, s_len) = (input.len_near(qweight_bytes), input.len_near(scale_bytes));
    let weight = input.fill(weight_len);
    let (q_before, s_before) = (input.fill(q_len), input.fill(s_len));
    let (mut q, mut s) = (q_before.clone(), s_before.clone());
    let status = unsafe {
        q4vk_weight_quantize(&d, weight.as_ptr().cast(), weight.len(), q.as_mut_ptr().cast(), q.len(), s.as_mut_ptr().cast(), s.len())
    };
    check(status, &[(&q, &q_before), (&s, &s_before)]);
    if status == Q4VK_OK {
        let mut plain = vec![0u8; qweight_bytes];
        let mut back = vec![0u8; qweight_bytes];
        assert_eq!(unsafe { q4vk_weight_unpermute(&d, q.as_ptr().cast(), qweight_bytes, plain.as_mut_ptr().cast(), qweight_bytes) }, Q4VK_OK);
        assert_eq!(unsafe { q4vk_weight_permute(&d, plain.as_ptr().cast(), qweight_bytes, back.as_mut_ptr().cast(), qweight_bytes) }, Q4VK_OK);
        assert!(back[..] == q[..qweight_bytes], "permute(unpermute(q)) != q");
    }
});
