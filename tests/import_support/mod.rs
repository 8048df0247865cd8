//! Helpers of the import tests: the GGUF/GPTQ/AWQ golden vectors in `tests/data`, a
//! `q4vk_matrix_desc` for each case, SHA-256 (the manifests pin the large cases' reference
//! weights by hash), and the GEMV sweep over every case on a given context.
#![allow(dead_code)]

use q4vk::cpu::reference::relative_error;
use q4vk::ffi::context::q4vk_context;
use q4vk::ffi::gemv::q4vk_gemv;
use q4vk::ffi::matrix::*;
use q4vk::ffi::status::{q4vk_last_error_message, Q4VK_OK};
use q4vk::ffi::weight::Q4VK_DTYPE_F16;
use std::path::{Path, PathBuf};

/// One golden case: its desc inputs and the reference f32 weights (or their SHA-256).
pub struct Case {
    pub set: &'static str,
    pub name: String,
    pub source: q4vk_matrix_source,
    pub n: u64,
    pub k: u64,
    pub group_size: i32,
    pub gptq_format: u32,
    pub weight: Vec<u8>,
    pub scales: Vec<u8>,
    pub zeros: Vec<u8>,
    pub g_idx: Vec<u8>,
    /// The reference weights `[n][k]`, when the case ships them.
    pub dequant: Option<Vec<u8>>,
    /// SHA-256 of the reference weights' bytes.
    pub dequant_sha256: String,
}

impl Case {
    /// A desc pointing at this case's buffers.
    pub fn desc(&self) -> q4vk_matrix_desc {
        let mut d = unsafe { std::mem::zeroed::<q4vk_matrix_desc>() };
        unsafe { q4vk_matrix_desc_default(&mut d) };
        d.source = self.source;
        d.n = self.n;
        d.k = self.k;
        d.group_size = self.group_size;
        d.dtype = Q4VK_DTYPE_F16;
        d.gptq_format = self.gptq_format;
        let buf = |v: &Vec<u8>| {
            if v.is_empty() {
                (std::ptr::null(), 0)
            } else {
                (v.as_ptr().cast(), v.len())
            }
        };
        (d.weight, d.weight_bytes) = buf(&self.weight);
        (d.scales, d.scales_bytes) = buf(&self.scales);
        (d.zeros, d.zeros_bytes) = buf(&self.zeros);
        (d.g_idx, d.g_idx_bytes) = buf(&self.g_idx);
        d
    }
}

fn data_dir(set: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(set)
}

fn manifest(set: &str) -> serde_json::Value {
    let path = data_dir(set).join("cases.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).expect("cases.json parses")
}

/// Reads `files[key]` of a case in `dir`, checking its size and SHA-256 against the
/// manifest; None when the manifest lists it but the file is not shipped.
fn read(dir: &Path, case: &serde_json::Value, key: &str) -> Option<Vec<u8>> {
    let entry = &case["files"][key];
    let path = dir.join(entry["file"].as_str()?);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        bytes.len() as u64,
        entry["bytes"].as_u64().unwrap(),
        "{}",
        path.display()
    );
    assert_eq!(
        sha256_hex(&bytes),
        entry["sha256"].as_str().unwrap(),
        "{}",
        path.display()
    );
    Some(bytes)
}

/// Every GGUF case (Q4_0, Q4_1, Q4_K).
pub fn gguf_cases() -> Vec<Case> {
    let m = manifest("gguf");
    let dir = data_dir("gguf");
    m["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let shape = c["shape"].as_array().unwrap();
            Case {
                set: "gguf",
                name: c["name"].as_str().unwrap().into(),
                source: match c["qtype"].as_str().unwrap() {
                    "Q4_0" => Q4VK_SOURCE_GGUF_Q4_0,
                    "Q4_1" => Q4VK_SOURCE_GGUF_Q4_1,
                    "Q4_K" => Q4VK_SOURCE_GGUF_Q4_K,
                    other => panic!("unknown qtype {other}"),
                },
                n: shape[0].as_u64().unwrap(),
                k: shape[1].as_u64().unwrap(),
                group_size: 128,
                gptq_format: 1,
                weight: read(&dir, c, "quantized").expect("quantized tensor"),
                scales: Vec::new(),
                zeros: Vec::new(),
                g_idx: Vec::new(),
                dequant: read(&dir, c, "dequantized"),
                dequant_sha256: c["files"]["dequantized"]["sha256"].as_str().unwrap().into(),
            }
        })
        .collect()
}

/// Every GPTQ (`set` = "gptq") or AWQ ("awq") case.
pub fn packed_cases(set: &'static str) -> Vec<Case> {
    let m = manifest(set);
    m["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let name = c["name"].as_str().unwrap();
            let dir = data_dir(set).join(name);
            let gptq = set == "gptq";
            Case {
                set,
                name: name.into(),
                source: if gptq {
                    Q4VK_SOURCE_GPTQ
                } else {
                    Q4VK_SOURCE_AWQ
                },
                n: c["n"].as_u64().unwrap(),
                k: c["k"].as_u64().unwrap(),
                group_size: c["group_size"].as_i64().unwrap() as i32,
                gptq_format: if c["version"] == "gptq_v2" { 2 } else { 1 },
                weight: read(&dir, c, "qweight").expect("qweight"),
                scales: read(&dir, c, "scales").expect("scales"),
                zeros: read(&dir, c, "qzeros").expect("qzeros"),
                g_idx: if gptq {
                    read(&dir, c, "g_idx").expect("g_idx")
                } else {
                    Vec::new()
                },
                dequant: read(&dir, c, "dequant"),
                dequant_sha256: c["files"]["dequant"]["sha256"].as_str().unwrap().into(),
            }
        })
        .collect()
}

/// SHA-256 of `data` as lowercase hex (FIPS 180-4).
pub fn sha256_hex(data: &[u8]) -> String {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 64];
        for t in 0..16 {
            w[t] = u32::from_be_bytes(block[4 * t..4 * t + 4].try_into().unwrap());
        }
        for t in 16..64 {
            let s0 = w[t - 15].rotate_right(7) ^ w[t - 15].rotate_right(18) ^ (w[t - 15] >> 3);
            let s1 = w[t - 2].rotate_right(17) ^ w[t - 2].rotate_right(19) ^ (w[t - 2] >> 10);
            w[t] = w[t - 16]
                .wrapping_add(s0)
                .wrapping_add(w[t - 7])
                .wrapping_add(s1);
        }
        let mut v = h;
        for t in 0..64 {
            let s1 = v[4].rotate_right(6) ^ v[4].rotate_right(11) ^ v[4].rotate_right(25);
            let ch = (v[4] & v[5]) ^ (!v[4] & v[6]);
            let t1 = v[7]
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[t])
                .wrapping_add(w[t]);
            let s0 = v[0].rotate_right(2) ^ v[0].rotate_right(13) ^ v[0].rotate_right(22);
            let maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
            let t2 = s0.wrapping_add(maj);
            v = [
                t1.wrapping_add(t2),
                v[0],
                v[1],
                v[2],
                v[3].wrapping_add(t1),
                v[4],
                v[5],
                v[6],
            ];
        }
        for (a, b) in h.iter_mut().zip(v) {
            *a = a.wrapping_add(b);
        }
    }
    h.iter().map(|x| format!("{x:08x}")).collect()
}

/// `q4vk_matrix_dequantize` of `d` into a poisoned buffer; the status and the weights.
pub fn dequantize(d: &q4vk_matrix_desc) -> (u32, Vec<f32>) {
    let len = (d.n * d.k) as usize;
    let mut out = vec![f32::from_bits(0x7fa5_a5a5); len];
    let status = unsafe { q4vk::ffi::import::q4vk_matrix_dequantize(d, out.as_mut_ptr(), 4 * len) };
    (status, out)
}

/// Whether a GPTQ case's `g_idx` puts inputs of a group apart (act-order).
pub fn is_act_order(c: &Case) -> bool {
    c.source == Q4VK_SOURCE_GPTQ
        && c.group_size > 0
        && c.g_idx.chunks_exact(4).enumerate().any(|(i, b)| {
            i32::from_le_bytes(b.try_into().unwrap()) as usize != i / c.group_size as usize
        })
}

/// The calling thread's last error message.
pub fn last_error() -> String {
    let mut buf = vec![0 as std::ffi::c_char; 1024];
    unsafe { q4vk_last_error_message(buf.as_mut_ptr(), buf.len()) };
    unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// Every GGUF, GPTQ and AWQ case becomes a matrix of `ctx` through `q4vk_matrix_create`,
/// and `q4vk_gemv` for each m of `ms` (x from `random(len)`, y poisoned) matches the f64
/// GEMV of the reference weights within 1e-5 (relative). Checks that all 30 cases (3 of
/// them act-order) ran.
pub fn imported_gemv_sweep(
    ctx: *mut q4vk_context,
    ms: &[usize],
    mut random: impl FnMut(usize) -> Vec<f32>,
) {
    let mut cases = gguf_cases();
    cases.extend(packed_cases("gptq"));
    cases.extend(packed_cases("awq"));
    let (mut created, mut act_orders) = (0, 0);
    for c in &cases {
        let d = c.desc();
        // The reference weights: the shipped file, or (hash-only cases) the dequantized
        // bytes once their SHA-256 matches the manifest's.
        let (status, w) = dequantize(&d);
        assert_eq!(status, Q4VK_OK, "{}: {}", c.name, last_error());
        assert_eq!(sha256_hex(&f32_bytes(&w)), c.dequant_sha256, "{}", c.name);
        let mut mat = std::ptr::null_mut();
        let status = unsafe { q4vk_matrix_create(ctx, &d, &mut mat) };
        assert_eq!(status, Q4VK_OK, "{}: {}", c.name, last_error());
        act_orders += is_act_order(c) as usize;
        let (n, k) = (c.n as usize, c.k as usize);
        for &m in ms {
            let x = random(m * k);
            let mut y = vec![f32::NAN; m * n];
            let status = unsafe {
                q4vk_gemv(
                    ctx,
                    mat,
                    x.as_ptr(),
                    x.len(),
                    y.as_mut_ptr(),
                    y.len(),
                    m as u32,
                )
            };
            assert_eq!(status, Q4VK_OK, "{}: {}", c.name, last_error());
            assert!(y.iter().all(|v| v.is_finite()), "{}: y not written", c.name);
            let err = relative_error(&y, &reference(&w, &x, n, k, m));
            assert!(err < 1e-5, "{} m {m}: rel err {err:e}", c.name);
        }
        unsafe { q4vk_matrix_destroy(mat) };
        created += 1;
    }
    // 5 Q4_0 + 5 Q4_1 + 1 Q4_K + 12 GPTQ (3 act-order) + 7 AWQ.
    assert_eq!((created, act_orders), (30, 3));
}

/// The f32 bytes of `w`.
pub fn f32_bytes(w: &[f32]) -> Vec<u8> {
    w.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// The f64 GEMV `y[m][n] = Σ_k x[m][k]·w[n][k]` of weights `w` `[n][k]`.
pub fn reference(w: &[f32], x: &[f32], n: usize, k: usize, m: usize) -> Vec<f64> {
    let mut y = vec![0.0f64; m * n];
    for mi in 0..m {
        for row in 0..n {
            y[mi * n + row] = (0..k)
                .map(|kk| w[row * k + kk] as f64 * x[mi * k + kk] as f64)
                .sum();
        }
    }
    y
}
