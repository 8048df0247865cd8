//! `q4vk_matrix_dequantize` on every GGUF (gguf-py 0.19), GPTQ (AutoGPTQ 0.7.1, GPTQModel
//! 7.7.0) and AWQ (AutoAWQ 0.2.9) golden case in `tests/data`: bit for bit the reference
//! packages' dequantization (compared element by element, or by SHA-256 where the manifest
//! pins the large cases' weights by hash); and the bad inputs the import refuses.

mod import_support;

use import_support::*;
use q4vk::ffi::matrix::*;
use q4vk::ffi::status::*;

fn check_case(c: &Case) {
    let d = c.desc();
    let (status, w) = dequantize(&d);
    assert_eq!(status, Q4VK_OK, "{}: {}", c.name, last_error());
    let bytes = f32_bytes(&w);
    if let Some(want) = &c.dequant {
        let bad = w
            .iter()
            .zip(want.chunks_exact(4))
            .filter(|(a, b)| a.to_bits() != u32::from_le_bytes((*b).try_into().unwrap()))
            .count();
        assert_eq!(bad, 0, "{}: {bad} of {} weights differ", c.name, w.len());
        assert_eq!(&bytes, want, "{}", c.name);
    }
    assert_eq!(sha256_hex(&bytes), c.dequant_sha256, "{}", c.name);
}

#[test]
fn sha256_matches_fips_examples() {
    assert_eq!(
        sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(
        sha256_hex(&[b'a'; 1_000]),
        "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3"
    );
}

#[test]
fn gguf_dequantize_is_bit_exact() {
    let cases = gguf_cases();
    assert_eq!(cases.len(), 11);
    for source in [
        Q4VK_SOURCE_GGUF_Q4_0,
        Q4VK_SOURCE_GGUF_Q4_1,
        Q4VK_SOURCE_GGUF_Q4_K,
    ] {
        assert!(cases.iter().any(|c| c.source == source));
    }
    cases.iter().for_each(check_case);
}

#[test]
fn gptq_dequantize_is_bit_exact() {
    let cases = packed_cases("gptq");
    assert_eq!(cases.len(), 12);
    assert!(
        cases.iter().any(|c| c.dequant.is_none()),
        "the hash-only case"
    );
    cases.iter().for_each(check_case);
}

#[test]
fn awq_dequantize_is_bit_exact() {
    let cases = packed_cases("awq");
    assert_eq!(cases.len(), 7);
    cases.iter().for_each(check_case);
}

#[test]
fn gptq_v1_zero0_needs_the_word_decode() {
    // A per-nibble +1 reader gets zero points of this case wrong; the word decode must not.
    let c = packed_cases("gptq")
        .into_iter()
        .find(|c| c.name == "gptq_v1_zero0_asym_g32_64x128")
        .unwrap();
    let words: Vec<u32> = c
        .zeros
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let per_nibble_differs = words.iter().any(|&w| {
        let word = w.wrapping_add(0x1111_1111);
        (0..8).any(|j| ((w >> (4 * j)) + 1) & 15 != (word >> (4 * j)) & 15)
    });
    assert!(per_nibble_differs);
    check_case(&c);
}

/// Runs `edit` on a copy of case `name`'s desc and expects `status` with `needle` in the
/// message and the poisoned output untouched.
fn refused(
    cases: &[Case],
    name: &str,
    edit: impl FnOnce(&mut q4vk_matrix_desc),
    status: u32,
    needle: &str,
) {
    let c = cases.iter().find(|c| c.name == name).unwrap();
    let mut d = c.desc();
    edit(&mut d);
    let len = (c.n * c.k) as usize;
    let mut out = vec![f32::from_bits(0x7fa5_a5a5); len];
    let got = unsafe { q4vk::ffi::import::q4vk_matrix_dequantize(&d, out.as_mut_ptr(), 4 * len) };
    let msg = last_error();
    assert_eq!(got, status, "{name}: {msg}");
    assert!(msg.contains(needle), "{name}: {msg:?} lacks {needle:?}");
    assert!(
        out.iter().all(|v| v.to_bits() == 0x7fa5_a5a5),
        "{name}: output written"
    );
}

#[test]
fn bad_inputs_are_refused_without_writing() {
    let gguf = gguf_cases();
    let gptq = packed_cases("gptq");
    let awq = packed_cases("awq");
    let q40 = "q4_0_mid_llm";
    refused(
        &gguf,
        q40,
        |d| d.weight_bytes -= 1,
        Q4VK_ERROR_BUFFER_TOO_SMALL,
        "desc->weight_bytes",
    );
    refused(
        &gguf,
        q40,
        |d| d.weight = std::ptr::null(),
        Q4VK_ERROR_NULL_POINTER,
        "desc->weight",
    );
    refused(
        &gguf,
        q40,
        |d| d.k = 240,
        Q4VK_ERROR_INVALID_ARGUMENT,
        "multiple of 32",
    );
    refused(
        &gguf,
        "q4_k_dequant_random",
        |d| d.k = 384,
        Q4VK_ERROR_INVALID_ARGUMENT,
        "multiple of 256",
    );
    let zeros = [0u8; 16];
    refused(
        &gguf,
        q40,
        |d| {
            d.zeros = zeros.as_ptr().cast();
            d.zeros_bytes = 16
        },
        Q4VK_ERROR_INVALID_ARGUMENT,
        "desc->zeros must be NULL",
    );
    refused(
        &gguf,
        "q4_1_mid_llm",
        |d| {
            d.scales = zeros.as_ptr().cast();
            d.scales_bytes = 16
        },
        Q4VK_ERROR_INVALID_ARGUMENT,
        "desc->scales must be NULL",
    );
    let g_idx = vec![0u8; 4 * 256];
    refused(
        &gguf,
        q40,
        |d| {
            d.g_idx = g_idx.as_ptr().cast();
            d.g_idx_bytes = g_idx.len()
        },
        Q4VK_ERROR_INVALID_ARGUMENT,
        "desc->g_idx must be NULL",
    );
    refused(
        &awq,
        "awq_g32_64x128",
        |d| {
            d.g_idx = g_idx.as_ptr().cast();
            d.g_idx_bytes = 512
        },
        Q4VK_ERROR_INVALID_ARGUMENT,
        "desc->g_idx must be NULL",
    );

    let act = "gptq_v1_asym_g32_act_96x384";
    refused(
        &gptq,
        act,
        |d| d.g_idx_bytes -= 4,
        Q4VK_ERROR_BUFFER_TOO_SMALL,
        "desc->g_idx_bytes",
    );
    refused(
        &gptq,
        act,
        |d| d.zeros_bytes -= 4,
        Q4VK_ERROR_BUFFER_TOO_SMALL,
        "desc->zeros_bytes",
    );
    refused(
        &gptq,
        act,
        |d| d.scales_bytes = 0,
        Q4VK_ERROR_BUFFER_TOO_SMALL,
        "desc->scales_bytes",
    );
    refused(
        &gptq,
        act,
        |d| d.zeros = std::ptr::null(),
        Q4VK_ERROR_NULL_POINTER,
        "desc->zeros",
    );
    refused(
        &gptq,
        act,
        |d| d.k = 380,
        Q4VK_ERROR_INVALID_ARGUMENT,
        "multiple of 8",
    );
    refused(
        &gptq,
        act,
        |d| d.n = 92,
        Q4VK_ERROR_INVALID_ARGUMENT,
        "multiple of 8",
    );
    refused(
        &gptq,
        act,
        |d| d.gptq_format = 0,
        Q4VK_ERROR_INVALID_ARGUMENT,
        "gptq_format",
    );
    refused(
        &gptq,
        act,
        |d| d.group_size = 0,
        Q4VK_ERROR_INVALID_ARGUMENT,
        "group_size",
    );
    refused(
        &gptq,
        act,
        |d| d.dtype = 7,
        Q4VK_ERROR_INVALID_ARGUMENT,
        "desc->dtype",
    );
    let c = gptq.iter().find(|c| c.name == act).unwrap();
    let mut out_of_range = c.g_idx.clone();
    out_of_range[4 * 5..4 * 6].copy_from_slice(&12i32.to_le_bytes());
    refused(
        &gptq,
        act,
        |d| d.g_idx = out_of_range.as_ptr().cast(),
        Q4VK_ERROR_INVALID_ARGUMENT,
        "g_idx[5] is 12",
    );
    let mut negative = c.g_idx.clone();
    negative[..4].copy_from_slice(&(-1i32).to_le_bytes());
    refused(
        &gptq,
        act,
        |d| d.g_idx = negative.as_ptr().cast(),
        Q4VK_ERROR_INVALID_ARGUMENT,
        "g_idx[0] is -1",
    );
    let mut unequal = c.g_idx.clone();
    let first = i32::from_le_bytes(unequal[..4].try_into().unwrap());
    unequal[..4].copy_from_slice(&((first + 1) % 12).to_le_bytes());
    refused(
        &gptq,
        act,
        |d| d.g_idx = unequal.as_ptr().cast(),
        Q4VK_ERROR_INVALID_ARGUMENT,
        "inputs to group",
    );
    let mut nan_scale = c.scales.clone();
    nan_scale[6..8].copy_from_slice(&half::f16::NAN.to_le_bytes());
    refused(
        &gptq,
        act,
        |d| d.scales = nan_scale.as_ptr().cast(),
        Q4VK_ERROR_NON_FINITE,
        "not finite",
    );

    refused(
        &awq,
        "awq_g64_64x128",
        |d| d.group_size = 48,
        Q4VK_ERROR_INVALID_ARGUMENT,
        "divide k",
    );
    refused(
        &awq,
        "awq_g64_64x128",
        |d| d.weight_bytes /= 2,
        Q4VK_ERROR_BUFFER_TOO_SMALL,
        "desc->weight_bytes",
    );
    refused(
        &awq,
        "awq_g64_64x128",
        |d| d.source = 17,
        Q4VK_ERROR_INVALID_ARGUMENT,
        "desc->source is 17",
    );
    refused(
        &awq,
        "awq_g64_64x128",
        |d| d.reserved0 = 1,
        Q4VK_ERROR_INVALID_ARGUMENT,
        "reserved0",
    );

    // The output: too small, NULL, overlapping an input.
    let c = &awq[0];
    let d = c.desc();
    let len = (c.n * c.k) as usize;
    let mut out = vec![0f32; len];
    let s = unsafe { q4vk::ffi::import::q4vk_matrix_dequantize(&d, out.as_mut_ptr(), 4 * len - 1) };
    assert_eq!(s, Q4VK_ERROR_BUFFER_TOO_SMALL, "{}", last_error());
    let s = unsafe { q4vk::ffi::import::q4vk_matrix_dequantize(&d, std::ptr::null_mut(), 4 * len) };
    assert_eq!(s, Q4VK_ERROR_NULL_POINTER);
    let mut alias = c.weight.clone();
    alias.resize(4 * len, 0);
    let mut d2 = d;
    d2.weight = alias.as_ptr().cast();
    let s = unsafe {
        q4vk::ffi::import::q4vk_matrix_dequantize(&d2, alias.as_mut_ptr().cast(), 4 * len)
    };
    assert_eq!(s, Q4VK_ERROR_INVALID_ARGUMENT, "{}", last_error());
    assert!(last_error().contains("overlaps"));
}

#[test]
fn older_callers_read_the_appended_fields_as_absent() {
    // A caller compiled against the v0 header passes the v0 struct_size: g_idx reads as
    // NULL and gptq_format as 0, so GPTQ needs the new header; v0 sources still work.
    let c = &packed_cases("awq")[0];
    let mut d = c.desc();
    d.struct_size = std::mem::offset_of!(q4vk_matrix_desc, g_idx) as u32;
    let (status, _) = dequantize(&d);
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    d.struct_size -= 8;
    let (status, _) = dequantize(&d);
    assert_eq!(status, Q4VK_ERROR_INVALID_ARGUMENT);
}

#[test]
fn v0_sources_dequantize_as_the_gpu_sees_them() {
    // Q4 with zero points: (u - z)·s; FLOAT: q4vk_q4_quantize's output dequantized.
    let (n, k) = (3usize, 40usize);
    let weight: Vec<u8> = (0..n * k.div_ceil(2))
        .map(|i| (i * 37 % 256) as u8)
        .collect();
    let groups = 2;
    let scales: Vec<u8> = (0..n * groups)
        .flat_map(|i| half::f16::from_f32(0.25 - i as f32 * 0.125).to_le_bytes())
        .collect();
    let zeros: Vec<u8> = (0..n * groups).map(|i| (i * 5 % 16) as u8).collect();
    let mut d = unsafe { std::mem::zeroed::<q4vk_matrix_desc>() };
    unsafe { q4vk_matrix_desc_default(&mut d) };
    d.source = Q4VK_SOURCE_Q4;
    (d.n, d.k, d.group_size, d.zero_points) = (n as u64, k as u64, 32, 1);
    (d.weight, d.weight_bytes) = (weight.as_ptr().cast(), weight.len());
    (d.scales, d.scales_bytes) = (scales.as_ptr().cast(), scales.len());
    (d.zeros, d.zeros_bytes) = (zeros.as_ptr().cast(), zeros.len());
    let (status, w) = dequantize(&d);
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    for row in 0..n {
        for kk in 0..k {
            let byte = weight[row * k.div_ceil(2) + kk / 2];
            let u = if kk % 2 == 0 { byte & 15 } else { byte >> 4 } as f32;
            let g = row * groups + kk / 32;
            let s = half::f16::from_le_bytes([scales[2 * g], scales[2 * g + 1]]).to_f32();
            assert_eq!(
                w[row * k + kk].to_bits(),
                ((u - zeros[g] as f32) * s).to_bits()
            );
        }
    }

    let x: Vec<f32> = (0..n * k)
        .map(|i| ((i * 7919) % 201) as f32 / 100.0 - 1.0)
        .collect();
    let mut f = d;
    f.source = Q4VK_SOURCE_FLOAT;
    f.dtype = q4vk::ffi::weight::Q4VK_DTYPE_F32;
    (f.weight, f.weight_bytes) = (x.as_ptr().cast(), 4 * x.len());
    (f.scales, f.scales_bytes, f.zeros, f.zeros_bytes) = (std::ptr::null(), 0, std::ptr::null(), 0);
    let (mut qw, mut qs, mut qz) = (0usize, 0usize, 0usize);
    assert_eq!(
        unsafe { q4vk_q4_quantize_size(&f, &mut qw, &mut qs, &mut qz) },
        Q4VK_OK
    );
    let (mut bw, mut bs, mut bz) = (vec![0u8; qw], vec![0u8; qs], vec![0u8; qz]);
    let s = unsafe {
        q4vk_q4_quantize(
            &f,
            bw.as_mut_ptr(),
            qw,
            bs.as_mut_ptr().cast(),
            qs,
            bz.as_mut_ptr(),
            qz,
        )
    };
    assert_eq!(s, Q4VK_OK);
    let mut q = d;
    (q.weight, q.scales, q.zeros) = (bw.as_ptr().cast(), bs.as_ptr().cast(), bz.as_ptr().cast());
    let (s1, from_float) = dequantize(&f);
    let (s2, from_q4) = dequantize(&q);
    assert_eq!((s1, s2), (Q4VK_OK, Q4VK_OK));
    assert_eq!(f32_bytes(&from_float), f32_bytes(&from_q4));
    // Quantization error is bounded by half a step of the largest group scale.
    let worst = x
        .iter()
        .zip(&from_float)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    assert!(worst < 0.1, "{worst}");
}

#[test]
fn functions_of_contract_v0_refuse_what_they_cannot_hold() {
    // q4vk_q4_quantize_size takes FLOAT, Q4 or PADDLE only: an imported source is
    // UNSUPPORTED, never mistaken for another source. q4vk_matrix_pack_size takes every
    // source whose device layout needs no offsets (GGUF Q4_1/Q4_K) and no column order (GPTQ
    // act-order); those are UNSUPPORTED there, nothing written, and the message names
    // q4vk_matrix_pack_extended.
    let mut cases = gguf_cases();
    cases.extend(packed_cases("gptq"));
    cases.extend(packed_cases("awq"));
    let mut refused = 0;
    for c in &cases {
        let d = c.desc();
        let (mut a, mut b, mut z) = (7usize, 7usize, 7usize);
        let s = unsafe { q4vk_q4_quantize_size(&d, &mut a, &mut b, &mut z) };
        assert_eq!(s, Q4VK_ERROR_UNSUPPORTED, "{}: {}", c.name, last_error());
        assert!(last_error().contains("q4vk_matrix_dequantize"));
        let s = unsafe { q4vk::ffi::kernel::q4vk_matrix_pack_size(&d, &mut a, &mut b, &mut z) };
        let extras = matches!(c.source, Q4VK_SOURCE_GGUF_Q4_1 | Q4VK_SOURCE_GGUF_Q4_K)
            || c.name.contains("_act_");
        if extras {
            assert_eq!(s, Q4VK_ERROR_UNSUPPORTED, "{}: {}", c.name, last_error());
            assert!(last_error().contains("q4vk_matrix_pack_extended"));
            assert_eq!((a, b, z), (7, 7, 7));
            refused += 1;
        } else {
            assert_eq!(s, Q4VK_OK, "{}: {}", c.name, last_error());
            let rows = 16 * c.k.div_ceil(32) as usize;
            assert_eq!(a, c.n as usize * rows, "{}", c.name);
        }
    }
    // 5 Q4_1 + 1 Q4_K + 3 GPTQ act-order.
    assert_eq!(refused, 9);
}
