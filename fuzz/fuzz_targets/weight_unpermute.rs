//! Fuzzes `q4vk_weight_unpermute` with arbitrary descs, buffer lengths and bytes; a success
//! must be undone exactly by `q4vk_weight_permute`.
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
    let (q_len, p_len) = (input.len_near(bytes), input.len_near(bytes));
    let q = input.fill(q_len);
    let p_before = input.fill(p_len);
    let mut plain = p_before.clone();
    let status = unsafe { q4vk_weight_unpermute(&d, q.as_ptr().cast(), q.len(), plain.as_mut_ptr().cast(), plain.len()) };
    check(status, &[(&plain, &p_before)]);
    if status == Q4VK_OK {
        let mut back = vec![0u8; bytes];
        assert_eq!(unsafe { q4vk_weight_permute(&d, plain.as_ptr().cast(), bytes, back.as_mut_ptr().cast(), bytes) }, Q4VK_OK);
        assert!(back[..] == q[..bytes], "permute(unpermute(q)) != q");
    }
});
