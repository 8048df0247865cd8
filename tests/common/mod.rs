//! Helpers shared by the integration tests: golden-vector access and a seeded RNG.
#![allow(dead_code)]

use std::path::PathBuf;

/// Directory of a golden-vector set in `tests/data` (provenance in `tests/data/README.md`).
pub fn vectors_dir(set: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(set)
}

/// Loads a set's `cases.json`.
pub fn manifest(set: &str) -> serde_json::Value {
    let path = vectors_dir(set).join("cases.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).expect("cases.json parses")
}

/// Reads one file of a case as bytes.
pub fn read_case_file(set: &str, case: &serde_json::Value, key: &str) -> Vec<u8> {
    let rel = case["files"][key]["path"]
        .as_str()
        .unwrap_or_else(|| panic!("case has no {key}"));
    let path = vectors_dir(set).join(rel);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    assert_eq!(
        bytes.len() as u64,
        case["files"][key]["bytes"].as_u64().unwrap(),
        "{rel}"
    );
    bytes
}

/// A small, seeded xorshift generator for reproducible random inputs.
pub struct Rng(u64);

impl Rng {
    /// A generator with the given seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.uniform().max(1e-300);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
    /// Random bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }
}
