//! The GGUF block types kept in their native bytes (`import::gguf_blocks`): every case of
//! `tests/data/gguf-more` (gguf-py 0.19's `dequantize` of random blocks and, for Q5_0, Q5_1,
//! Q8_0 and MXFP4, of blocks its `quantize` made) and the Q4_1 and Q4_K cases of
//! `tests/data/gguf` decoded bit for bit, the files checked against their SHA-256 first
//! where the manifest gives one; tensor sizes checked.

mod common;
mod import_support;
use common::{manifest, vectors_dir};
use import_support::{dequantize as c_dequantize, last_error, sha256_hex};
use q4vk::ffi::context::*;
use q4vk::ffi::import::q4vk_source_from_ggml_type;
use q4vk::ffi::matrix::*;
use q4vk::ffi::status::*;
use q4vk::import::gguf_blocks::{dequantize as decode_tensor, BlockType};

/// Decodes `quant` as `ty` (`n` × `k`) and compares with gguf-py's `want`, bit for bit.
fn assert_decodes(ty: BlockType, n: u64, k: u64, quant: &[u8], want: &[u8], name: &str) {
    assert_eq!(quant.len(), ty.tensor_bytes(n, k).unwrap(), "{name}");
    let mut got = vec![f32::NAN; (n * k) as usize];
    decode_tensor(ty, quant, &mut got);
    let got_bytes: Vec<u8> = got.iter().flat_map(|v| v.to_le_bytes()).collect();
    if got_bytes != want {
        let first = got_bytes
            .chunks_exact(4)
            .zip(want.chunks_exact(4))
            .position(|(a, b)| a != b)
            .unwrap();
        let w = f32::from_le_bytes(want[4 * first..4 * first + 4].try_into().unwrap());
        panic!(
            "{name}: element {first} is {} where gguf-py has {w}",
            got[first]
        );
    }
}

/// The block type named `qtype`, checked against a case's id and block geometry.
fn block_type_of(c: &serde_json::Value, name: &str) -> BlockType {
    let qtype = c["qtype"].as_str().unwrap();
    let ty = BlockType::ALL
        .into_iter()
        .find(|t| t.name() == qtype)
        .unwrap_or_else(|| panic!("{name}: type {qtype}"));
    assert_eq!(
        u64::from(ty.ggml_id()),
        c["ggml_type_id"].as_u64().unwrap(),
        "{name}"
    );
    assert_eq!(
        ty.block_elements() as u64,
        c["block_size"].as_u64().unwrap()
    );
    assert_eq!(ty.block_bytes() as u64, c["block_bytes"].as_u64().unwrap());
    ty
}

#[test]
fn every_case_decodes_bit_for_bit() {
    let m = manifest("gguf-more");
    let cases = m["cases"].as_array().expect("cases");
    let mut decoded = std::collections::BTreeMap::<&str, usize>::new();
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let ty = block_type_of(c, name);
        let (n, k) = (
            c["shape"][0].as_u64().unwrap(),
            c["shape"][1].as_u64().unwrap(),
        );
        let read = |suffix: &str, sha: &str| {
            let bytes = std::fs::read(vectors_dir("gguf-more").join(format!("{name}.{suffix}")))
                .unwrap_or_else(|e| panic!("{name}.{suffix}: {e}"));
            // The manifest gives a SHA-256 for every quant file and most dequant files.
            if let Some(want) = c[sha].as_str() {
                assert_eq!(sha256_hex(&bytes), want, "{name}.{suffix}");
            }
            bytes
        };
        let quant = read("quant.u8.bin", "sha256_quant");
        let want = read("dequant.f32.bin", "sha256_dequant");
        assert_decodes(ty, n, k, &quant, &want, name);
        *decoded.entry(ty.name()).or_default() += 1;
    }
    // The 4-bit set (`tests/data/gguf`): its Q4_1 and Q4_K cases (Q4_0 stays in the Q4
    // layout, `import::gguf`).
    let m = manifest("gguf");
    for c in m["cases"].as_array().expect("cases") {
        let name = c["name"].as_str().unwrap();
        if c["qtype"].as_str() == Some("Q4_0") {
            continue;
        }
        let ty = block_type_of(c, name);
        let (n, k) = (
            c["shape"][0].as_u64().unwrap(),
            c["shape"][1].as_u64().unwrap(),
        );
        let read = |role: &str| {
            let f = &c["files"][role];
            let file = f["file"].as_str()?;
            let bytes = std::fs::read(vectors_dir("gguf").join(file)).ok()?;
            assert_eq!(sha256_hex(&bytes), f["sha256"].as_str().unwrap(), "{file}");
            Some(bytes)
        };
        // Some cases' files are not copied into the repository (tests/data/README.md).
        let (Some(quant), Some(want)) = (read("quantized"), read("dequantized")) else {
            continue;
        };
        assert_decodes(ty, n, k, &quant, &want, name);
        *decoded.entry(ty.name()).or_default() += 1;
    }
    // Every type had its cases.
    assert_eq!(decoded.len(), BlockType::ALL.len(), "{decoded:?}");
}

#[test]
fn tensor_sizes_are_checked() {
    for ty in BlockType::ALL {
        let b = ty.block_elements() as u64;
        assert_eq!(ty.tensor_bytes(3, 2 * b).unwrap(), 6 * ty.block_bytes());
        for (n, k) in [(0, b), (1, 0), (1, b + 1)] {
            let e = ty.tensor_bytes(n, k).unwrap_err().to_string();
            assert!(e.contains(ty.name()) && e.contains("multiple"), "{e}");
        }
        assert!(ty.tensor_bytes(u64::MAX / 2, b).is_err());
    }
}

/// A desc of the GGUF tensor `quant` of `n` × `k`, its source from the ggml type id.
fn desc_of(ggml_id: u32, n: u64, k: u64, quant: &[u8]) -> q4vk_matrix_desc {
    let mut source = 0;
    let status = unsafe { q4vk_source_from_ggml_type(ggml_id, &mut source) };
    assert_eq!(status, Q4VK_OK, "{}", last_error());
    let mut d = unsafe { std::mem::zeroed::<q4vk_matrix_desc>() };
    unsafe { q4vk_matrix_desc_default(&mut d) };
    d.source = source;
    (d.n, d.k) = (n, k);
    d.weight = quant.as_ptr().cast();
    d.weight_bytes = quant.len();
    d
}

#[test]
fn the_c_api_takes_every_type_by_its_ggml_id() {
    let m = manifest("gguf-more");
    for c in m["cases"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        let id = c["ggml_type_id"].as_u64().unwrap() as u32;
        let (n, k) = (
            c["shape"][0].as_u64().unwrap(),
            c["shape"][1].as_u64().unwrap(),
        );
        let quant =
            std::fs::read(vectors_dir("gguf-more").join(format!("{name}.quant.u8.bin"))).unwrap();
        let want = std::fs::read(vectors_dir("gguf-more").join(format!("{name}.dequant.f32.bin")))
            .unwrap();
        let d = desc_of(id, n, k, &quant);
        let (status, got) = c_dequantize(&d);
        assert_eq!(status, Q4VK_OK, "{name}: {}", last_error());
        let got: Vec<u8> = got.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert!(
            got == want,
            "{name}: q4vk_matrix_dequantize differs from gguf-py"
        );
        // A CPU context takes a matrix of every type by its id (GEMVs: `gpu_blocks`).
        let mut cd = unsafe { std::mem::zeroed::<q4vk_context_desc>() };
        unsafe { q4vk_context_desc_default(&mut cd) };
        cd.flags = Q4VK_CONTEXT_CPU;
        let mut ctx = std::ptr::null_mut();
        assert_eq!(unsafe { q4vk_context_create(&cd, &mut ctx) }, Q4VK_OK);
        let mut mat = std::ptr::null_mut();
        let status = unsafe { q4vk_matrix_create(ctx, &d, &mut mat) };
        assert_eq!(status, Q4VK_OK, "{name}: {}", last_error());
        assert!(!mat.is_null());
        unsafe { q4vk_matrix_destroy(mat) };
        unsafe { q4vk_context_destroy(ctx) };
    }
}

#[test]
fn bad_tensors_and_unknown_types_are_refused() {
    // Types q4vk does not take, named.
    for (id, name) in [
        (1u32, "GGML_TYPE_F16"),
        (11, "GGML_TYPE_Q3_K"),
        (16, "GGML_TYPE_IQ2_XXS"),
        (34, "GGML_TYPE_TQ1_0"),
        (999, "ggml type 999"),
    ] {
        let mut source = 77;
        let status = unsafe { q4vk_source_from_ggml_type(id, &mut source) };
        assert_eq!(status, Q4VK_ERROR_UNSUPPORTED);
        assert!(last_error().contains(name), "{}", last_error());
        assert_eq!(source, 77, "written on failure");
    }
    assert_eq!(
        unsafe { q4vk_source_from_ggml_type(8, std::ptr::null_mut()) },
        Q4VK_ERROR_NULL_POINTER
    );
    // A Q8_0 block with an infinite d, an MXFP4 block with the E8M0 NaN, an NVFP4 scale NaN.
    for (id, block_bytes, at, value) in [
        (8u32, 34usize, 0usize, vec![0x00u8, 0x7C]),
        (39, 17, 0, vec![0xFF]),
        (40, 36, 2, vec![0x7F]),
    ] {
        let elems = BlockType::ALL
            .iter()
            .find(|t| t.ggml_id() == id)
            .unwrap()
            .block_elements();
        let mut quant = vec![0x11u8; 2 * block_bytes];
        quant[block_bytes + at..block_bytes + at + value.len()].copy_from_slice(&value);
        let d = desc_of(id, 1, 2 * elems as u64, &quant);
        let (status, _) = c_dequantize(&d);
        assert_eq!(status, Q4VK_ERROR_NON_FINITE, "type {id}: {}", last_error());
        assert!(last_error().contains("block 1"), "{}", last_error());
        // k not a multiple of the block; too few bytes.
        let mut odd = d;
        odd.k += 1;
        assert_eq!(c_dequantize(&odd).0, Q4VK_ERROR_INVALID_ARGUMENT);
        let mut short = d;
        short.weight_bytes -= 1;
        assert_eq!(c_dequantize(&short).0, Q4VK_ERROR_BUFFER_TOO_SMALL);
    }
    // MXFP4's largest exponents: 2^126 (E8M0 254) times a doubled E2M1 value of 4 and
    // 2^125 (253) times 8 are infinite weights; one value less is the largest finite.
    for (e, code, finite) in [
        (254u8, 0x4u8, false),
        (254, 0x3, true),
        (253, 0x6, false),
        (253, 0x5, true),
        (253, 0xE, false),
    ] {
        let mut quant = vec![0x11u8; 2 * 17];
        quant[17] = e;
        quant[17 + 9] = code << 4 | 0x1;
        let d = desc_of(39, 1, 64, &quant);
        let (status, out) = c_dequantize(&d);
        let what = format!("E8M0 {e}, code {code:#x}");
        if finite {
            assert_eq!(status, Q4VK_OK, "{what}: {}", last_error());
            assert!(out.iter().all(|v| v.is_finite()), "{what}");
        } else {
            assert_eq!(status, Q4VK_ERROR_NON_FINITE, "{what}");
            assert!(last_error().contains("block 1"), "{what}: {}", last_error());
        }
    }
}
