//! Fuzzes `q4vk_weight_permute` with arbitrary descs, buffer lengths and codes; a success
//! must be undone exactly by `q4vk_weight_unpermute`.
#![no_main]

mod input;

use input::*;
use libfuzzer_sys::fuzz_target;
use q4vk::ffi::status::*;
use q4vk::ffi::weight::*;

fuzz_target!(|data: &[u8]| {
    let mut input = Bytes(data);
    let d = desc(&mut input);
    let (_, bytes, _) = sizes(&d);
    let (p_len, q_len) = (input.len_near(bytes), input.len_near(bytes));
    let plain = input.fill(p_len);
    let q_before = input.fill(q_len);
    let mut q = q_before.clone();
    let status = unsafe { q4vk_weight_permute(&d, plain.as_ptr().cast(), plain.len(), q.as_mut_ptr().cast(), q.len()) };
    check(status, &[(&q, &q_before)]);
    if status == Q4VK_OK {
        let mut back = vec![0u8; bytes];
        assert_eq!(unsafe { q4vk_weight_unpermute(&d, q.as_ptr().cast(), bytes, back.as_mut_ptr().cast(), bytes) }, Q4VK_OK);
        assert!(back[..] == plain[..bytes], "unpermute(permute(p)) != p");
    }
});
