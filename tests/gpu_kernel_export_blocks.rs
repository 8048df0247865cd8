//! The kernel export on GGUF blocks (`Q4VK_KERNEL_EXPORT_BLOCKS`): every block type kept in
//! its native bytes (Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4,
//! NVFP4), seeded random blocks with sane scales, exported and packed with
//! `q4vk_matrix_pack_blocks`, runs on a raw Vulkan host (validation layer on, zero messages)
//! that uses only what the export and the pack return, into a NaN-poisoned y, and matches
//! the f64 GEMV of `q4vk_matrix_dequantize`'s weights within 1e-5: the GEMV at m = 1, 3
//! (pieces) and 6 (quarters of pieces), the GEMM at m = 11; portable and subgroup kernels;
//! f16 x, f16 y and a bias. The pack writes every byte of the file once, and bad input gets
//! a clear status with nothing written.

mod export_host;
mod gpu_support;

use export_host::{assert_quiet, y_values, Host};
use gpu_support::blocks::*;
use gpu_support::{last_error, Rng};
use q4vk::cpu::reference::relative_error;
use q4vk::ffi::gemv::{Q4VK_GEMV_F16_ACTIVATIONS, Q4VK_GEMV_F16_OUTPUT};
use q4vk::ffi::kernel::*;
use q4vk::ffi::matrix::q4vk_matrix_desc;
use q4vk::ffi::pack_blocks::*;
use q4vk::ffi::status::*;
use q4vk::import::gguf_blocks::BlockType;

/// The three streams of `d` (codes, scales, fifth bits) at the sizes the size query gives,
/// packed over two poisons with equal results (every byte written).
fn pack(d: &q4vk_matrix_desc) -> [Vec<u8>; 3] {
    let mut sizes = [usize::MAX; 3];
    let [a, b, c] = &mut sizes;
    let s = unsafe { q4vk_matrix_pack_blocks_size(d, a, b, c) };
    assert_eq!(s, Q4VK_OK, "pack size: {}", last_error());
    let packed = [0x00u8, 0xFF].map(|poison| {
        let mut out = sizes.map(|n| vec![poison; n]);
        let ptr = |v: &mut Vec<u8>| match v.is_empty() {
            true => std::ptr::null_mut(),
            false => v.as_mut_ptr().cast(),
        };
        let [c, s, h] = &mut out;
        let st = unsafe {
            q4vk_matrix_pack_blocks(d, ptr(c), c.len(), ptr(s), s.len(), ptr(h), h.len())
        };
        assert_eq!(st, Q4VK_OK, "pack: {}", last_error());
        out
    });
    let [first, second] = packed;
    assert_eq!(first, second, "some byte of the pack was not written");
    first
}

/// Exports for `d` with `flags` (`Q4VK_GEMV_*`) and `export_flags`, checking the info: the
/// bindings' roles in order (codes, scales, fifth bits for Q5_0 and Q5_1, x, y, bias), the
/// streams' bytes as the pack's, the push constants, ncnn's specialization ids.
fn export(
    d: &q4vk_matrix_desc,
    (ty, m): (BlockType, u32),
    (variant, subgroup_size): (u32, u32),
    (flags, export_flags): (u32, u32),
    streams: &[Vec<u8>; 3],
) -> (q4vk_kernel_info, Vec<u32>) {
    let mut e = unsafe { std::mem::zeroed::<q4vk_kernel_export_desc>() };
    unsafe { q4vk_kernel_export_desc_default(&mut e) };
    e.m = m;
    e.variant = variant;
    e.subgroup_size = match variant {
        Q4VK_KERNEL_SUBGROUP => subgroup_size,
        _ => 0,
    };
    e.flags = flags;
    e.export_flags = Q4VK_KERNEL_EXPORT_BLOCKS | export_flags;
    let mut info = unsafe { std::mem::zeroed::<q4vk_kernel_info>() };
    info.struct_size = std::mem::size_of::<q4vk_kernel_info>() as u32;
    let s =
        unsafe { q4vk_kernel_export(std::ptr::null(), d, &e, &mut info, std::ptr::null_mut(), 0) };
    assert_eq!(s, Q4VK_OK, "size query: {}", last_error());
    let mut spirv = vec![0u32; info.spirv_words];
    let s = unsafe {
        q4vk_kernel_export(
            std::ptr::null(),
            d,
            &e,
            &mut info,
            spirv.as_mut_ptr(),
            spirv.len(),
        )
    };
    assert_eq!(s, Q4VK_OK, "export: {}", last_error());
    let high_bits = matches!(ty, BlockType::Q5_0 | BlockType::Q5_1);
    let mut roles = vec![Q4VK_BINDING_WEIGHTS, Q4VK_BINDING_SCALES];
    if high_bits {
        roles.push(Q4VK_BINDING_HIGH_BITS);
    }
    roles.extend([Q4VK_BINDING_X, Q4VK_BINDING_Y, Q4VK_BINDING_BIAS]);
    let bindings = &info.bindings[..info.binding_count as usize];
    assert_eq!(
        bindings.iter().map(|b| b.role).collect::<Vec<_>>(),
        roles,
        "{}",
        ty.name()
    );
    for (i, b) in bindings.iter().enumerate() {
        assert_eq!(b.binding, i as u32);
    }
    for (i, stream) in streams.iter().enumerate().take(2 + usize::from(high_bits)) {
        assert_eq!(bindings[i].bytes, stream.len() as u64);
    }
    let bias = bindings.last().unwrap().bytes;
    let want_bias = match export_flags & Q4VK_KERNEL_EXPORT_BIAS {
        0 => 0,
        _ => 4 * d.n,
    };
    assert_eq!(bias, want_bias);
    assert_eq!(info.push_constant_count, if m > 8 { 11 } else { 10 });
    let specs = &info.specializations[..info.specialization_count as usize];
    let own = specs.len() - 3;
    for (i, s) in specs.iter().enumerate() {
        let want = match i < own {
            true => i as u32,
            false => 233 + (i - own) as u32,
        };
        assert_eq!(s.id, want);
    }
    (info, spirv)
}

/// Runs the export on the host with the streams, x (bytes), a bias (n f32) and y of
/// `y_elems` elements (f16 where `y_f16`), poisoned with NaN; returns y as f32, checking
/// every element was written.
fn run(
    host: &Host,
    (info, spirv): (&q4vk_kernel_info, &[u32]),
    streams: &[Vec<u8>; 3],
    x: &[u8],
    bias: &[f32],
    (y_elems, y_f16): (usize, bool),
) -> Vec<f32> {
    let bias_bytes: Vec<u8> = bias.iter().flat_map(|v| v.to_le_bytes()).collect();
    let bindings = &info.bindings[..info.binding_count as usize];
    let y_at = bindings
        .iter()
        .position(|b| b.role == Q4VK_BINDING_Y)
        .unwrap();
    let y_len = bindings[y_at].bytes as usize;
    let poison = vec![0xFFu8; y_len];
    let bufs: Vec<_> = bindings
        .iter()
        .map(|b| {
            let data: &[u8] = match b.role {
                // A binding of 0 bytes is not read; Vulkan still needs a valid buffer.
                _ if b.bytes == 0 => &streams[1],
                Q4VK_BINDING_WEIGHTS => &streams[0],
                Q4VK_BINDING_SCALES => &streams[1],
                Q4VK_BINDING_HIGH_BITS => &streams[2],
                Q4VK_BINDING_X => x,
                Q4VK_BINDING_Y => &poison,
                Q4VK_BINDING_BIAS => &bias_bytes,
                other => panic!("unknown role {other}"),
            };
            host.buffer(data)
        })
        .collect();
    let binds: Vec<_> = bufs.iter().map(|&(b, _, size)| (b, size)).collect();
    host.run(info, spirv, &binds);
    let out = host.read(bufs[y_at].1, y_len);
    for (b, mem, _) in bufs {
        unsafe {
            host.device.destroy_buffer(b, None);
            host.device.free_memory(mem, None);
        }
    }
    let y = y_values(&out, y_elems, y_f16);
    if let Some(i) = y.iter().position(|v| !v.is_finite()) {
        panic!("y[{i}] is {}: not written", y[i]);
    }
    y
}

/// The f64 GEMV of `w` (`[n][k]`) on `x` (`m` rows of `k`), plus `bias` per row.
fn reference(w: &[f32], x: &[f32], bias: &[f32], (n, k, m): (usize, usize, usize)) -> Vec<f64> {
    let mut y = vec![0f64; m * n];
    for t in 0..m {
        for r in 0..n {
            let dot: f64 = (0..k)
                .map(|i| w[r * k + i] as f64 * x[t * k + i] as f64)
                .sum();
            y[t * n + r] = dot + bias.get(r).map_or(0.0, |&b| b as f64);
        }
    }
    y
}

/// A shape of a few blocks per row of `ty`, rows not a multiple of the kernels' rows.
fn shape(ty: BlockType) -> (usize, usize) {
    (37, 3 * ty.block_elements().max(64))
}

#[test]
fn every_type_runs_exported_on_a_raw_host() {
    let host = Host::new();
    let mut rng = Rng(0xE8B1);
    for ty in BlockType::ALL {
        let calls = [
            (1u32, Q4VK_KERNEL_PORTABLE),
            (3, Q4VK_KERNEL_SUBGROUP),
            (6, Q4VK_KERNEL_SUBGROUP),
            (6, Q4VK_KERNEL_PORTABLE),
            (11, Q4VK_KERNEL_PORTABLE),
        ];
        runs_exported(&host, &mut rng, ty, shape(ty), &calls);
    }
}

/// Random `ty` blocks of `n` × `k` exported for each (m, variant) of `calls` and run on
/// `host` with f32 x and y, no bias: y within 1e-5 of the f64 reference of the dequantized
/// weights, no validation message.
fn runs_exported(
    host: &Host,
    rng: &mut Rng,
    ty: BlockType,
    (n, k): (usize, usize),
    calls: &[(u32, u32)],
) {
    let bytes = random_blocks(rng, ty, n, k);
    let d = blocks_desc(ty, n, k, &bytes);
    let w = dequantized(&d);
    let streams = pack(&d);
    for &(m, variant) in calls {
        let x: Vec<f32> = (0..m as usize * k).map(|_| rng.f32()).collect();
        let x_bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
        let what = format!("{} {n}x{k} m = {m} variant {variant}", ty.name());
        let exported = export(&d, (ty, m), (variant, host.subgroup_size), (0, 0), &streams);
        let y = run(
            host,
            (&exported.0, &exported.1),
            &streams,
            &x_bytes,
            &[],
            (m as usize * n, false),
        );
        let err = relative_error(&y, &reference(&w, &x, &[], (n, k, m as usize)));
        assert!(err < 1e-5, "{what}: relative error {err:e}");
    }
    assert_quiet();
}

/// Matrices of many rows (past the generic row's `many_rows_from`, not a multiple of the
/// rows per workgroup) take that row's many-rows shapes: quarters of 4 rows for blocks of 32
/// and looked-up codes, pieces for the super-blocks.
#[test]
fn many_rows_run_exported() {
    let host = Host::new();
    let mut rng = Rng(0x8193);
    for ty in [BlockType::Q8_0, BlockType::Iq4Nl, BlockType::Q4K] {
        let calls = [(1u32, Q4VK_KERNEL_SUBGROUP), (3, Q4VK_KERNEL_PORTABLE)];
        runs_exported(
            &host,
            &mut rng,
            ty,
            (8193, ty.block_elements().max(64)),
            &calls,
        );
    }
}

/// f16 x, f16 y and a bias on the GEMV (pieces and quarters) and the GEMM.
#[test]
fn f16_and_a_bias_run_exported() {
    let host = Host::new();
    let mut rng = Rng(0xF16B);
    for ty in [
        BlockType::Q4K,
        BlockType::Q5_0,
        BlockType::Q6K,
        BlockType::Mxfp4,
    ] {
        let (n, k) = shape(ty);
        let bytes = random_blocks(&mut rng, ty, n, k);
        let d = blocks_desc(ty, n, k, &bytes);
        let w = dequantized(&d);
        let streams = pack(&d);
        let bias: Vec<f32> = (0..n).map(|_| rng.f32()).collect();
        for m in [2u32, 7, 12] {
            let what = format!("{} m = {m}", ty.name());
            // f16 x (its values as the reference's x), f16 y, a bias.
            let x: Vec<f32> = (0..m as usize * k)
                .map(|_| half::f16::from_f32(rng.f32()).to_f32())
                .collect();
            let x_bytes: Vec<u8> = x
                .iter()
                .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
                .collect();
            let flags = Q4VK_GEMV_F16_ACTIVATIONS | Q4VK_GEMV_F16_OUTPUT;
            let exported = export(
                &d,
                (ty, m),
                (Q4VK_KERNEL_SUBGROUP, host.subgroup_size),
                (flags, Q4VK_KERNEL_EXPORT_BIAS),
                &streams,
            );
            let y = run(
                &host,
                (&exported.0, &exported.1),
                &streams,
                &x_bytes,
                &bias,
                (m as usize * n, true),
            );
            let want = reference(&w, &x, &bias, (n, k, m as usize));
            // y rounded to f16: within its half ulp.
            let err = relative_error(&y, &want);
            assert!(err < 1e-3, "{what}: relative error {err:e}");
        }
        assert_quiet();
    }
}

/// Bad input: each refused with a status and a message, the outputs untouched.
#[test]
fn bad_input_is_refused() {
    let mut rng = Rng(0xBAD5);
    let ty = BlockType::Q5_1;
    let (n, k) = (4, 64);
    let bytes = random_blocks(&mut rng, ty, n, k);
    let d = blocks_desc(ty, n, k, &bytes);
    let mut info = unsafe { std::mem::zeroed::<q4vk_kernel_info>() };
    info.struct_size = std::mem::size_of::<q4vk_kernel_info>() as u32;
    let mut e = unsafe { std::mem::zeroed::<q4vk_kernel_export_desc>() };
    unsafe { q4vk_kernel_export_desc_default(&mut e) };
    let export =
        |e: &q4vk_kernel_export_desc, d: &q4vk_matrix_desc, info: &mut q4vk_kernel_info| unsafe {
            q4vk_kernel_export(std::ptr::null(), d, e, info, std::ptr::null_mut(), 0)
        };
    // Without the flag the block type is refused by name, with a pointer to the flag.
    assert_eq!(export(&e, &d, &mut info), Q4VK_ERROR_UNSUPPORTED);
    assert!(last_error().contains("Q5_1"), "{}", last_error());
    // The extended kernel and the kernels on blocks exclude each other.
    e.export_flags = Q4VK_KERNEL_EXPORT_BLOCKS | Q4VK_KERNEL_EXPORT_EXTENDED;
    assert_eq!(export(&e, &d, &mut info), Q4VK_ERROR_INVALID_ARGUMENT);
    assert!(last_error().contains("EXTENDED"), "{}", last_error());
    // A Q4 layout's source with the flag.
    e.export_flags = Q4VK_KERNEL_EXPORT_BLOCKS;
    let mut q4_0 = d;
    q4_0.source = q4vk::ffi::matrix::Q4VK_SOURCE_GGUF_Q4_0;
    q4_0.weight_bytes = n * k / 32 * 18;
    assert_eq!(export(&e, &q4_0, &mut info), Q4VK_ERROR_UNSUPPORTED);
    assert!(last_error().contains("Q4 layout"), "{}", last_error());
    // The pack: an output too small, overlapping outputs, a NaN scale, another source.
    let mut sizes = [0usize; 3];
    let [a, b, c] = &mut sizes;
    assert_eq!(
        unsafe { q4vk_matrix_pack_blocks_size(&d, a, b, c) },
        Q4VK_OK
    );
    assert!(sizes.iter().all(|&s| s > 0), "Q5_1 has three streams");
    let mut out = sizes.map(|s| vec![0x5Au8; s]);
    let pack = |d: &q4vk_matrix_desc, out: &mut [Vec<u8>; 3], short: usize| {
        let [c, s, h] = out;
        unsafe {
            q4vk_matrix_pack_blocks(
                d,
                c.as_mut_ptr().cast(),
                c.len() - short,
                s.as_mut_ptr().cast(),
                s.len(),
                h.as_mut_ptr().cast(),
                h.len(),
            )
        }
    };
    assert_eq!(pack(&d, &mut out, 1), Q4VK_ERROR_BUFFER_TOO_SMALL);
    let mut nan = bytes.clone();
    // Q5_1's f16 d of the first block: NaN.
    nan[0..2].copy_from_slice(&half::f16::NAN.to_le_bytes());
    let nan_desc = blocks_desc(ty, n, k, &nan);
    assert_eq!(pack(&nan_desc, &mut out, 0), Q4VK_ERROR_NON_FINITE);
    let [c, s, h] = &mut out;
    let overlap = unsafe {
        q4vk_matrix_pack_blocks(
            &d,
            c.as_mut_ptr().cast(),
            c.len(),
            c.as_mut_ptr().cast(),
            s.len(),
            h.as_mut_ptr().cast(),
            h.len(),
        )
    };
    assert_eq!(overlap, Q4VK_ERROR_INVALID_ARGUMENT);
    assert_eq!(pack(&q4_0, &mut out, 0), Q4VK_ERROR_UNSUPPORTED);
    assert!(
        out.iter().all(|v| v.iter().all(|&b| b == 0x5A)),
        "nothing written"
    );
}
