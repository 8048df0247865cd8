//! Property tests of the Paddle layouts: for random plain codes and every arch,
//! `unpermute(permute(x)) == x`, and `permute` gives `quantize`'s bytes for the same codes.

mod common;

use common::Rng;
use q4vk::ffi::status::*;
use q4vk::ffi::weight::*;

fn desc(algo: u32, arch: i32, k: u64, n: u64, threads: u32) -> q4vk_weight_quantize_desc {
    let mut d = std::mem::MaybeUninit::uninit();
    unsafe { q4vk_weight_quantize_desc_default(d.as_mut_ptr()) };
    let mut d = unsafe { d.assume_init() };
    (d.algo, d.arch, d.k, d.n, d.threads) = (algo, arch, k, n, threads);
    d
}

#[test]
fn unpermute_inverts_permute_for_every_arch() {
    let mut rng = Rng::new(7);
    for arch in [70, 75, 80, 86, 89, 90, 100] {
        for algo in [Q4VK_ALGO_WEIGHT_ONLY_INT4, Q4VK_ALGO_WEIGHT_ONLY_INT8] {
            for trial in 0..6 {
                let k = if arch == 70 {
                    1 + rng.next_u64() % 300
                } else {
                    64 * (1 + rng.next_u64() % 5)
                };
                let n = 16 * (1 + rng.next_u64() % 9) + if trial == 5 { 4096 } else { 0 };
                let d = desc(algo, arch, k, n, 1 + (trial % 3) as u32);
                let mut bytes = 0usize;
                assert_eq!(unsafe { q4vk_weight_plain_size(&d, &mut bytes) }, Q4VK_OK);
                let plain = rng.bytes(bytes);
                let mut permuted = vec![0u8; bytes];
                let mut back = vec![0u8; bytes];
                let ok = unsafe {
                    q4vk_weight_permute(
                        &d,
                        plain.as_ptr().cast(),
                        bytes,
                        permuted.as_mut_ptr().cast(),
                        bytes,
                    )
                };
                assert_eq!(ok, Q4VK_OK);
                assert_ne!(permuted, plain, "arch {arch}: the layout moved nothing");
                let ok = unsafe {
                    q4vk_weight_unpermute(
                        &d,
                        permuted.as_ptr().cast(),
                        bytes,
                        back.as_mut_ptr().cast(),
                        bytes,
                    )
                };
                assert_eq!(ok, Q4VK_OK);
                assert!(
                    back == plain,
                    "arch {arch} algo {algo} k {k} n {n}: round trip differs"
                );
            }
        }
    }
}

#[test]
fn quantize_equals_codes_then_permute() {
    let mut rng = Rng::new(11);
    for arch in [70, 80] {
        for algo in [Q4VK_ALGO_WEIGHT_ONLY_INT4, Q4VK_ALGO_WEIGHT_ONLY_INT8] {
            for group_size in [-1, 64, 128] {
                let (k, n) = (192u64, 4096 + 48u64);
                let mut d = desc(algo, arch, k, n, 0);
                d.group_size = group_size;
                let weight: Vec<u8> = (0..k * n)
                    .flat_map(|_| half::f16::from_f64(rng.normal() * 0.02).to_le_bytes())
                    .collect();
                let (mut qb, mut sb) = (0, 0);
                assert_eq!(
                    unsafe { q4vk_weight_quantize_size(&d, &mut qb, &mut sb) },
                    Q4VK_OK
                );
                let (mut q, mut s) = (vec![0u8; qb], vec![0u8; sb]);
                let ok = unsafe {
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
                assert_eq!(ok, Q4VK_OK);
                // Codes by the scalar formula from the returned scales, packed plain.
                let scales: Vec<f32> = s
                    .chunks_exact(2)
                    .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                    .collect();
                let rows = if group_size < 0 { k } else { group_size as u64 };
                let code = |kk: u64, nn: u64| -> i8 {
                    let x = half::f16::from_le_bytes([
                        weight[(2 * (kk * n + nn)) as usize],
                        weight[(2 * (kk * n + nn) + 1) as usize],
                    ])
                    .to_f32();
                    let r = (x / scales[((kk / rows) * n + nn) as usize]).round();
                    let b = if algo == Q4VK_ALGO_WEIGHT_ONLY_INT4 {
                        7.0
                    } else {
                        127.0
                    };
                    r.clamp(-b, b) as i8
                };
                let mut plain = vec![0u8; qb];
                for kk in 0..k {
                    for nn in 0..n {
                        let c = code(kk, nn);
                        if algo == Q4VK_ALGO_WEIGHT_ONLY_INT4 {
                            let byte = &mut plain[((kk * n + nn) / 2) as usize];
                            *byte |= ((c as u8) & 0xf) << (4 * (nn % 2));
                        } else {
                            plain[(kk * n + nn) as usize] = c as u8;
                        }
                    }
                }
                let mut permuted = vec![0u8; qb];
                let ok = unsafe {
                    q4vk_weight_permute(
                        &d,
                        plain.as_ptr().cast(),
                        qb,
                        permuted.as_mut_ptr().cast(),
                        qb,
                    )
                };
                assert_eq!(ok, Q4VK_OK);
                assert!(permuted == q, "arch {arch} algo {algo} group {group_size}");
            }
        }
    }
}
