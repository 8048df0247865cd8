//! Byte-for-byte agreement with PaddlePaddle 3.3.1's CPU `weight_quantize` on every golden
//! case in `tests/data/paddle`, through the C entry points; dequantize against the
//! cases' `dequant_ref`; unpermute against the recovered codes.

mod common;

use common::{manifest, read_case_file};
use q4vk::ffi::status::*;
use q4vk::ffi::weight::*;

fn desc_for(case: &serde_json::Value, threads: u32) -> q4vk_weight_quantize_desc {
    let mut d = std::mem::MaybeUninit::uninit();
    unsafe { q4vk_weight_quantize_desc_default(d.as_mut_ptr()) };
    let mut d = unsafe { d.assume_init() };
    d.algo = match case["algo"].as_str().unwrap() {
        "weight_only_int4" => Q4VK_ALGO_WEIGHT_ONLY_INT4,
        "weight_only_int8" => Q4VK_ALGO_WEIGHT_ONLY_INT8,
        other => panic!("unknown algo {other}"),
    };
    d.dtype = match case["dtype"].as_str().unwrap() {
        "float16" => Q4VK_DTYPE_F16,
        "bfloat16" => Q4VK_DTYPE_BF16,
        other => panic!("unknown dtype {other}"),
    };
    d.arch = case["arch"].as_i64().unwrap() as i32;
    d.group_size = case["group_size"].as_i64().unwrap() as i32;
    d.k = case["K"].as_u64().unwrap();
    d.n = case["N"].as_u64().unwrap();
    d.threads = threads;
    d
}

fn cases() -> Vec<serde_json::Value> {
    let m = manifest("paddle");
    let cases = m["cases"].as_array().unwrap().clone();
    assert!(
        cases.len() >= 30,
        "expected the 30 public cases, found {}",
        cases.len()
    );
    cases
}

#[test]
fn quantize_matches_paddle_bytes() {
    for case in cases() {
        let name = case["name"].as_str().unwrap();
        let weight = read_case_file("paddle", &case, "weight");
        let want_q = read_case_file("paddle", &case, "qweight");
        let want_s = read_case_file("paddle", &case, "scale");
        for threads in [1, 2, 0] {
            let d = desc_for(&case, threads);
            let (mut qb, mut sb) = (0usize, 0usize);
            assert_eq!(
                unsafe { q4vk_weight_quantize_size(&d, &mut qb, &mut sb) },
                Q4VK_OK,
                "{name}"
            );
            assert_eq!((qb, sb), (want_q.len(), want_s.len()), "{name}: sizes");
            let mut q = vec![0xA5u8; qb];
            let mut s = vec![0xA5u8; sb];
            let status = unsafe {
                q4vk_weight_quantize(
                    &d,
                    weight.as_ptr().cast(),
                    weight.len(),
                    q.as_mut_ptr().cast(),
                    qb,
                    s.as_mut_ptr().cast(),
                    sb,
                )
            };
            assert_eq!(status, Q4VK_OK, "{name}");
            assert!(
                q == want_q,
                "{name}: qweight differs at byte {:?}",
                q.iter().zip(&want_q).position(|(a, b)| a != b)
            );
            assert!(
                s == want_s,
                "{name}: scale differs at byte {:?}",
                s.iter().zip(&want_s).position(|(a, b)| a != b)
            );
        }
    }
}

#[test]
fn unpermute_recovers_paddle_codes_and_permute_restores_bytes() {
    for case in cases() {
        let name = case["name"].as_str().unwrap();
        let d = desc_for(&case, 0);
        let qweight = read_case_file("paddle", &case, "qweight");
        let qint = read_case_file("paddle", &case, "qint"); // one signed code per byte, [K][N]
        let mut plain_bytes = 0usize;
        assert_eq!(
            unsafe { q4vk_weight_plain_size(&d, &mut plain_bytes) },
            Q4VK_OK
        );
        let mut plain = vec![0x5Au8; plain_bytes];
        let status = unsafe {
            q4vk_weight_unpermute(
                &d,
                qweight.as_ptr().cast(),
                qweight.len(),
                plain.as_mut_ptr().cast(),
                plain_bytes,
            )
        };
        assert_eq!(status, Q4VK_OK, "{name}");
        let codes: Vec<i8> = if d.algo == Q4VK_ALGO_WEIGHT_ONLY_INT4 {
            plain
                .iter()
                .flat_map(|&b| [((b << 4) as i8) >> 4, (b as i8) >> 4])
                .collect()
        } else {
            plain.iter().map(|&b| b as i8).collect()
        };
        let want: Vec<i8> = qint.iter().map(|&b| b as i8).collect();
        assert!(codes == want, "{name}: codes differ");
        let mut back = vec![0u8; qweight.len()];
        let status = unsafe {
            q4vk_weight_permute(
                &d,
                plain.as_ptr().cast(),
                plain_bytes,
                back.as_mut_ptr().cast(),
                back.len(),
            )
        };
        assert_eq!(status, Q4VK_OK);
        assert!(back == qweight, "{name}: permute(unpermute(x)) != x");
    }
}

#[test]
fn dequantize_matches_reference() {
    for case in cases() {
        let name = case["name"].as_str().unwrap();
        let d = desc_for(&case, 0);
        let qweight = read_case_file("paddle", &case, "qweight");
        let scale = read_case_file("paddle", &case, "scale");
        let want = read_case_file("paddle", &case, "dequant_ref");
        let elements = want.len() / 4;
        let mut out = vec![0xA5u8; elements * 2];
        let status = unsafe {
            q4vk_weight_dequantize(
                &d,
                qweight.as_ptr().cast(),
                qweight.len(),
                scale.as_ptr().cast(),
                scale.len(),
                out.as_mut_ptr().cast(),
                out.len(),
            )
        };
        assert_eq!(status, Q4VK_OK, "{name}");
        for i in 0..elements {
            let bits = u16::from_le_bytes([out[2 * i], out[2 * i + 1]]);
            let got = if d.dtype == Q4VK_DTYPE_F16 {
                half::f16::from_bits(bits).to_f32()
            } else {
                half::bf16::from_bits(bits).to_f32()
            };
            let want = f32::from_le_bytes(want[4 * i..4 * i + 4].try_into().unwrap());
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{name}: element {i}: {got} vs {want}"
            );
        }
    }
}
