//! The GGUF block types beyond 4-bit codes (`import::gguf_blocks`): every case of
//! `tests/data/gguf-more` (gguf-py 0.19's `dequantize` of random blocks and, for Q5_0, Q5_1,
//! Q8_0 and MXFP4, of blocks its `quantize` made) decoded bit for bit, the files checked
//! against their SHA-256 first where the manifest gives one; tensor sizes checked.

mod common;
mod import_support;
use common::{manifest, vectors_dir};
use import_support::sha256_hex;
use q4vk::import::gguf_blocks::{dequantize, BlockType};

#[test]
fn every_case_decodes_bit_for_bit() {
    let m = manifest("gguf-more");
    let cases = m["cases"].as_array().expect("cases");
    let mut decoded = std::collections::BTreeMap::<&str, usize>::new();
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let qtype = c["qtype"].as_str().unwrap();
        if qtype == "Q4_K" {
            // Imported as 4-bit codes (`import::gguf`), checked by `import_vectors`.
            continue;
        }
        let ty = BlockType::ALL
            .into_iter()
            .find(|t| t.name() == qtype)
            .unwrap_or_else(|| panic!("{name}: type {qtype}"));
        assert_eq!(u64::from(ty.ggml_id()), c["ggml_type_id"].as_u64().unwrap(), "{name}");
        assert_eq!(ty.block_elements() as u64, c["block_size"].as_u64().unwrap());
        assert_eq!(ty.block_bytes() as u64, c["block_bytes"].as_u64().unwrap());
        let (n, k) = (c["shape"][0].as_u64().unwrap(), c["shape"][1].as_u64().unwrap());
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
        assert_eq!(quant.len(), ty.tensor_bytes(n, k).unwrap(), "{name}");
        let mut got = vec![f32::NAN; (n * k) as usize];
        dequantize(ty, &quant, &mut got);
        let got_bytes: Vec<u8> = got.iter().flat_map(|v| v.to_le_bytes()).collect();
        if got_bytes != want {
            let first = got_bytes
                .chunks_exact(4)
                .zip(want.chunks_exact(4))
                .position(|(a, b)| a != b)
                .unwrap();
            let w = f32::from_le_bytes(want[4 * first..4 * first + 4].try_into().unwrap());
            panic!("{name}: element {first} is {} where gguf-py has {w}", got[first]);
        }
        *decoded.entry(qtype).or_default() += 1;
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
