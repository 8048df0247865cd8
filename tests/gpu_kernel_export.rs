//! The kernel-export contract without ncnn: a raw Vulkan host (ash, its own instance with
//! the validation layer, device, buffers, pipeline) that uses ONLY what
//! `q4vk_kernel_export` and `q4vk_matrix_pack` return — SPIR-V, entry point, bindings and
//! their sizes, push constants, specialization constants, local size, group counts, and
//! the device-layout bytes — dispatches, and checks y against the f64 reference.
//! Zero validation messages, every y element written.

mod export_host;
mod gpu_support;
use export_host::*;
use gpu_support::*;
use q4vk::cpu::reference;
use q4vk::ffi::gemv::Q4VK_GEMV_F16_ACTIVATIONS;
use q4vk::ffi::kernel::*;
use q4vk::ffi::matrix::*;
use q4vk::ffi::status::*;
use q4vk::ffi::weight::*;
use q4vk::quant::q4::{Q4Data, ScaleType};

const TOL: f64 = 1e-5;

/// A Q4-source matrix desc for `data` (pointers into it).
fn q4_desc(data: &Q4Data) -> q4vk_matrix_desc {
    let mut desc = unsafe { std::mem::zeroed::<q4vk_matrix_desc>() };
    unsafe { q4vk_matrix_desc_default(&mut desc) };
    desc.source = Q4VK_SOURCE_Q4;
    desc.n = data.shape.n as u64;
    desc.k = data.shape.k as u64;
    desc.group_size = if data.shape.per_channel {
        -1
    } else {
        data.shape.group_size as i32
    };
    desc.zero_points = data.shape.zero_points as u32;
    desc.dtype = if data.scale_type == ScaleType::F32 {
        Q4VK_DTYPE_F32
    } else {
        Q4VK_DTYPE_F16
    };
    desc.weight = data.weight.as_ptr().cast();
    desc.weight_bytes = data.weight.len();
    desc.scales = data.scales.as_ptr().cast();
    desc.scales_bytes = data.scales.len();
    if data.shape.zero_points {
        desc.zeros = data.zeros.as_ptr().cast();
        desc.zeros_bytes = data.zeros.len();
    }
    desc
}

/// Packs `mat` with q4vk_matrix_pack and checks the sizes against the export's.
fn pack(mat: &q4vk_matrix_desc, info: &q4vk_kernel_info) -> [Vec<u8>; 3] {
    let (mut wb, mut sb, mut zb) = (0usize, 0usize, 0usize);
    let s = unsafe { q4vk_matrix_pack_size(mat, &mut wb, &mut sb, &mut zb) };
    assert_eq!(s, Q4VK_OK, "pack size: {}", last_error());
    assert_eq!(
        [wb as u64, sb as u64, zb as u64],
        [
            info.bindings[0].bytes,
            info.bindings[1].bytes,
            info.bindings[2].bytes
        ]
    );
    let (mut w, mut sc, mut z) = (vec![0xAAu8; wb], vec![0xAAu8; sb], vec![0xAAu8; zb]);
    let zp = if zb > 0 {
        z.as_mut_ptr().cast()
    } else {
        std::ptr::null_mut()
    };
    let s = unsafe {
        q4vk_matrix_pack(
            mat,
            w.as_mut_ptr().cast(),
            wb,
            sc.as_mut_ptr().cast(),
            sb,
            zp,
            zb,
        )
    };
    assert_eq!(s, Q4VK_OK, "pack: {}", last_error());
    [w, sc, z]
}

/// The activation side of one run: m rows of k, n outputs, row strides of x and y.
#[derive(Clone, Copy)]
struct Run {
    m: usize,
    k: usize,
    n: usize,
    strides: (usize, usize),
    x_f16: bool,
}

/// Runs the exported kernel on the host and returns y (m rows of n, from the strided buffer).
fn run_case(
    host: &Host,
    info: &q4vk_kernel_info,
    spirv: &[u32],
    packed: &[Vec<u8>; 3],
    x: &[f32],
    r: Run,
) -> Vec<f32> {
    let Run {
        m,
        k,
        n,
        strides,
        x_f16,
    } = r;
    let (xs, ys) = strides;
    let x_bytes = info.bindings[3].bytes as usize;
    let mut xbuf = vec![0u8; x_bytes];
    for mi in 0..m {
        for kk in 0..k {
            let v = x[mi * k + kk];
            let i = mi * xs + kk;
            if x_f16 {
                xbuf[2 * i..2 * i + 2].copy_from_slice(&half::f16::from_f32(v).to_le_bytes());
            } else {
                xbuf[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
            }
        }
    }
    let y_bytes = info.bindings[4].bytes as usize;
    let ybuf: Vec<u8> = std::iter::repeat_n(f32::NAN.to_le_bytes(), y_bytes / 4)
        .flatten()
        .collect();
    let w = host.buffer(&packed[0]);
    let s = host.buffer(&packed[1]);
    // Symmetric: bytes 0, the kernel never reads it; bind the scales (any valid buffer).
    let z = if info.bindings[2].bytes == 0 {
        None
    } else {
        Some(host.buffer(&packed[2]))
    };
    let xb = host.buffer(&xbuf);
    let yb = host.buffer(&ybuf);
    let zr = z.map_or((s.0, s.2), |z| (z.0, z.2));
    host.run(
        info,
        spirv,
        &[(w.0, w.2), (s.0, s.2), zr, (xb.0, xb.2), (yb.0, yb.2)],
    );
    let out = host.read(yb.1, y_bytes);
    let mut y = Vec::with_capacity(m * n);
    for mi in 0..m {
        for row in 0..n {
            let i = 4 * (mi * ys + row);
            y.push(f32::from_le_bytes(out[i..i + 4].try_into().unwrap()));
        }
    }
    for (b, mem, _) in [Some(w), Some(s), z, Some(xb), Some(yb)]
        .into_iter()
        .flatten()
    {
        unsafe {
            host.device.destroy_buffer(b, None);
            host.device.free_memory(mem, None);
        }
    }
    y
}

fn check(y: &[f32], data: &Q4Data, x: &[f32], m: usize, what: &str) {
    if let Some(i) = y.iter().position(|v| !v.is_finite()) {
        panic!("{what}: y[{i}] was not written");
    }
    let err = reference::relative_error(y, &reference::gemv(data, x, m));
    assert!(err < TOL, "{what}: rel err {err:e}");
}

/// One exported-kernel run: the weights (`n` x `k`, `group`, zero points, f32 scales), the
/// batch `m`, how the kernel is chosen (`mode`: 0 the portable kernel without a context, 1
/// the context's choice, subgroup on lavapipe, 2 the subgroup kernel described without a
/// context by the host's subgroup size), padded row strides and f16 activations.
struct RawCase {
    n: usize,
    k: usize,
    group: i32,
    zeros: bool,
    f32_scales: bool,
    m: usize,
    mode: usize,
    strided: bool,
    x_f16: bool,
}

#[allow(clippy::too_many_arguments)]
const fn raw(
    (n, k): (usize, usize),
    group: i32,
    zeros: bool,
    f32_scales: bool,
    m: usize,
    mode: usize,
    strided: bool,
    x_f16: bool,
) -> RawCase {
    RawCase {
        n,
        k,
        group,
        zeros,
        f32_scales,
        m,
        mode,
        strided,
        x_f16,
    }
}

/// Every mode meets zero points, f32 scales, strides and f16 activations both on and off,
/// and every m in 1..=8 appears; shapes with a partial chunk, partial groups and few rows.
/// One case per pipeline instead of the cross product: each export is compiled once.
const RAW_CASES: [RawCase; 9] = [
    raw((1, 32), -1, false, false, 1, 0, false, false),
    raw((129, 1000), 256, true, true, 2, 0, true, true),
    raw((33, 96), 256, true, false, 7, 0, false, false),
    raw((7, 33), 32, true, false, 3, 1, false, true),
    raw((5, 8191), 32, true, false, 5, 1, true, false),
    raw((129, 1000), 128, false, true, 6, 1, false, false),
    raw((33, 96), 128, false, true, 8, 2, true, false),
    raw((129, 1000), -1, false, false, 8, 2, false, true),
    raw((7, 33), 128, true, true, 4, 2, true, false),
];

/// Exports `c` (without a context, through `gpu`'s or as the subgroup variant by `c.mode`),
/// runs it on `host` and checks y against the reference; returns the info.
fn run_raw(host: &Host, gpu: &Gpu, rng: &mut Rng, c: &RawCase) -> q4vk_kernel_info {
    let (n, k, m) = (c.n, c.k, c.m);
    let data = random_q4(rng, n, k, c.group, c.zeros, c.f32_scales);
    let desc = q4_desc(&data);
    let mut e = unsafe { std::mem::zeroed::<q4vk_kernel_export_desc>() };
    unsafe { q4vk_kernel_export_desc_default(&mut e) };
    e.m = m as u32;
    let ctx = match c.mode {
        0 => std::ptr::null(),
        1 => {
            e.variant = Q4VK_KERNEL_AUTO;
            gpu.ctx as *const _
        }
        _ => {
            e.variant = Q4VK_KERNEL_SUBGROUP;
            e.subgroup_size = host.subgroup_size;
            std::ptr::null()
        }
    };
    let strides = if c.strided { (k + 3, n + 5) } else { (k, n) };
    if c.strided {
        e.x_row_stride = strides.0 as u64;
        e.y_row_stride = strides.1 as u64;
    }
    if c.x_f16 {
        e.flags = Q4VK_GEMV_F16_ACTIVATIONS;
    }
    let (info, spirv) = export(ctx, &desc, &e);
    let packed = pack(&desc, &info);
    let mut x = rng.vec(m * k);
    if c.x_f16 {
        for v in &mut x {
            *v = half::f16::from_f32(*v).to_f32();
        }
    }
    let r = Run {
        m,
        k,
        n,
        strides,
        x_f16: c.x_f16,
    };
    let y = run_case(host, &info, &spirv, &packed, &x, r);
    let what = format!(
        "n {n} k {k} g {} zeros {} f32s {} m {m} mode {} strided {} f16x {}",
        c.group, c.zeros, c.f32_scales, c.mode, c.strided, c.x_f16
    );
    check(&y, &data, &x, m, &what);
    info
}

/// The exported kernel on a raw Vulkan host ([`RAW_CASES`]), checked against the reference.
#[test]
fn exported_kernel_runs_on_a_raw_vulkan_host() {
    let host = Host::new();
    let gpu = Gpu::new(false);
    let mut rng = Rng(2024);
    let mut ms = [false; 8];
    for c in &RAW_CASES {
        let info = run_raw(&host, &gpu, &mut rng, c);
        if c.mode == 0 {
            assert_eq!(info.variant, Q4VK_KERNEL_PORTABLE);
        }
        if c.mode == 2 {
            assert_eq!(info.variant, Q4VK_KERNEL_SUBGROUP);
        }
        ms[c.m - 1] = true;
    }
    assert!(ms.iter().all(|&seen| seen), "every m in 1..=8 is covered");
    drop(gpu);
    drop(host);
    assert_quiet();
}

/// m > 8 exports the GEMM (SPIR-V 1.0, m in push word 10, portable whatever the variant:
/// `export` checks those): m = 9, 33, 64 on odd shapes, zero points on and off, f16 and f32
/// scales and activations, padded strides, without a context, through the context and as
/// the subgroup variant.
#[test]
fn exported_gemm_runs_on_a_raw_vulkan_host() {
    let cases = [
        raw((129, 1000), 128, true, false, 9, 0, true, false),
        raw((65, 333), 32, false, true, 33, 1, false, true),
        raw((200, 257), -1, true, false, 64, 2, true, true),
        raw((33, 96), 256, false, false, 64, 0, false, false),
    ];
    let host = Host::new();
    let gpu = Gpu::new(false);
    let mut rng = Rng(909);
    for c in &cases {
        let info = run_raw(&host, &gpu, &mut rng, c);
        assert!(info.local_size[0] >= 64 && info.local_size[0].is_multiple_of(host.subgroup_size));
    }
    drop(gpu);
    drop(host);
    assert_quiet();
}

/// FLOAT and PADDLE sources: q4vk_matrix_pack quantizes / converts exactly as
/// q4vk_matrix_create does (the reference uses q4vk_q4_quantize's output and Paddle's
/// dequantization formula through the lossless conversion).
#[test]
fn exported_kernel_takes_float_and_paddle_sources() {
    let host = Host::new();
    let mut rng = Rng(99);
    let (n, k) = (48usize, 256usize);
    // FLOAT, f32 weights [n][k], zero points.
    let w: Vec<f32> = rng.vec(n * k);
    let mut desc = unsafe { std::mem::zeroed::<q4vk_matrix_desc>() };
    unsafe { q4vk_matrix_desc_default(&mut desc) };
    desc.n = n as u64;
    desc.k = k as u64;
    desc.group_size = 64;
    desc.zero_points = 1;
    desc.dtype = Q4VK_DTYPE_F32;
    desc.weight = w.as_ptr().cast();
    desc.weight_bytes = 4 * w.len();
    let (mut wb, mut sb, mut zb) = (0, 0, 0);
    assert_eq!(
        unsafe { q4vk_q4_quantize_size(&desc, &mut wb, &mut sb, &mut zb) },
        Q4VK_OK
    );
    let (mut qw, mut qs, mut qz) = (vec![0u8; wb], vec![0u8; sb], vec![0u8; zb]);
    let s = unsafe {
        q4vk_q4_quantize(
            &desc,
            qw.as_mut_ptr(),
            wb,
            qs.as_mut_ptr().cast(),
            sb,
            qz.as_mut_ptr(),
            zb,
        )
    };
    assert_eq!(s, Q4VK_OK);
    let data = Q4Data {
        shape: q4vk::quant::q4::Q4Shape::new(n as u64, k as u64, 64, 1).unwrap(),
        weight: qw.into(),
        scale_type: ScaleType::F16,
        scales: qs.into(),
        zeros: qz.into(),
    };
    for m in [1usize, 8] {
        let mut e = unsafe { std::mem::zeroed::<q4vk_kernel_export_desc>() };
        unsafe { q4vk_kernel_export_desc_default(&mut e) };
        e.m = m as u32;
        let (info, spirv) = export(std::ptr::null(), &desc, &e);
        let packed = pack(&desc, &info);
        let x = rng.vec(m * k);
        let y = run_case(
            &host,
            &info,
            &spirv,
            &packed,
            &x,
            Run {
                m,
                k,
                n,
                strides: (k, n),
                x_f16: false,
            },
        );
        check(&y, &data, &x, m, &format!("FLOAT m {m}"));
    }
    // PADDLE, f16 and bf16 (→ f32 scales) weights [k][n], arch 80 and 70, per channel and 128.
    for (dtype, arch, group) in [(Q4VK_DTYPE_F16, 80, -1), (Q4VK_DTYPE_BF16, 70, 128)] {
        let mut qd = unsafe { std::mem::zeroed::<q4vk_weight_quantize_desc>() };
        unsafe { q4vk_weight_quantize_desc_default(&mut qd) };
        qd.dtype = dtype;
        qd.arch = arch;
        qd.group_size = group;
        qd.k = k as u64;
        qd.n = n as u64;
        let wt: Vec<u8> = (0..k * n)
            .flat_map(|_| {
                let v = rng.f32();
                if dtype == Q4VK_DTYPE_F16 {
                    half::f16::from_f32(v).to_le_bytes()
                } else {
                    half::bf16::from_f32(v).to_le_bytes()
                }
            })
            .collect();
        let (mut qb, mut sbytes) = (0, 0);
        assert_eq!(
            unsafe { q4vk_weight_quantize_size(&qd, &mut qb, &mut sbytes) },
            Q4VK_OK
        );
        let (mut q, mut sc) = (vec![0i8; qb], vec![0u8; sbytes]);
        let s = unsafe {
            q4vk_weight_quantize(
                &qd,
                wt.as_ptr().cast(),
                wt.len(),
                q.as_mut_ptr(),
                qb,
                sc.as_mut_ptr().cast(),
                sbytes,
            )
        };
        assert_eq!(s, Q4VK_OK, "{}", last_error());
        let mut pd = unsafe { std::mem::zeroed::<q4vk_matrix_desc>() };
        unsafe { q4vk_matrix_desc_default(&mut pd) };
        pd.source = Q4VK_SOURCE_PADDLE;
        pd.n = n as u64;
        pd.k = k as u64;
        pd.group_size = group;
        pd.dtype = dtype;
        pd.arch = arch;
        pd.weight = q.as_ptr().cast();
        pd.weight_bytes = qb;
        pd.scales = sc.as_ptr().cast();
        pd.scales_bytes = sbytes;
        let scheme = q4vk::quant::paddle::PaddleScheme::new(q4vk::quant::paddle::PaddleParams {
            algo: 1,
            dtype,
            arch,
            group_size: group,
            k: k as u64,
            n: n as u64,
        })
        .unwrap();
        let qbytes: Vec<u8> = q.iter().map(|&b| b as u8).collect();
        let data = q4vk::layout::convert::paddle_to_q4(&scheme, &qbytes, &sc, 1).unwrap();
        for m in [1usize, 5] {
            let mut e = unsafe { std::mem::zeroed::<q4vk_kernel_export_desc>() };
            unsafe { q4vk_kernel_export_desc_default(&mut e) };
            e.m = m as u32;
            let (info, spirv) = export(std::ptr::null(), &pd, &e);
            assert_eq!(
                info.specializations[3].value,
                (dtype != Q4VK_DTYPE_F16) as u32
            );
            let packed = pack(&pd, &info);
            let x = rng.vec(m * k);
            let y = run_case(
                &host,
                &info,
                &spirv,
                &packed,
                &x,
                Run {
                    m,
                    k,
                    n,
                    strides: (k, n),
                    x_f16: false,
                },
            );
            check(
                &y,
                &data,
                &x,
                m,
                &format!("PADDLE dtype {dtype} arch {arch} m {m}"),
            );
        }
    }
    drop(host);
    assert_quiet();
}

/// A grid wider than maxComputeWorkGroupCount[0] goes 2-D; the GEMV and the GEMM skip the
/// surplus workgroups (dispatch computed with lowered limits through the Rust core).
#[test]
fn exported_kernel_two_dimensional_grid() {
    use q4vk::vk::export::{default_tuning, export as core_export, ExportDevice, ExportRequest};
    let host = Host::new();
    let mut rng = Rng(5);
    let (n, k) = (1001usize, 64usize);
    let data = random_q4(&mut rng, n, k, 32, true, false);
    let desc = q4_desc(&data);
    // The GEMV at m = 3 (251 workgroups of 4 rows) and the GEMM at m = 40 (16 row tiles x 2
    // token tiles).
    for (m, groups) in [(3usize, [7, 36, 1]), (40, [7, 5, 1])] {
        let mut e = unsafe { std::mem::zeroed::<q4vk_kernel_export_desc>() };
        unsafe { q4vk_kernel_export_desc_default(&mut e) };
        e.m = m as u32;
        let (mut info, _) = export(std::ptr::null(), &desc, &e);
        let mut dev = ExportDevice::unknown(default_tuning(false, 1, 1));
        dev.max_groups = [7, 65535];
        let x2 = core_export(
            &ExportRequest {
                shape: data.shape,
                scale: ScaleType::F16,
                m: m as u32,
                x_f16: false,
                y_f16: false,
                x_stride: k as u64,
                y_stride: n as u64,
                subgroup: false,
                extras: Default::default(),
                bias: false,
            },
            &dev,
        )
        .unwrap();
        assert_eq!(x2.groups, groups);
        info.group_count = x2.groups;
        info.push_constants[..x2.push.len()].copy_from_slice(&x2.push);
        let packed = pack(&desc, &info);
        let x = rng.vec(m * k);
        let r = Run {
            m,
            k,
            n,
            strides: (k, n),
            x_f16: false,
        };
        let y = run_case(&host, &info, &x2.spirv, &packed, &x, r);
        check(&y, &data, &x, m, &format!("2-D grid m {m}"));
    }
    drop(host);
    assert_quiet();
}

#[test]
fn export_refusals() {
    let mut rng = Rng(1);
    let data = random_q4(&mut rng, 4, 64, 32, false, false);
    let desc = q4_desc(&data);
    let mut e = unsafe { std::mem::zeroed::<q4vk_kernel_export_desc>() };
    unsafe { q4vk_kernel_export_desc_default(&mut e) };
    let mut info = unsafe { std::mem::zeroed::<q4vk_kernel_info>() };
    let call = |e: &q4vk_kernel_export_desc, info: &mut q4vk_kernel_info| unsafe {
        q4vk_kernel_export(std::ptr::null(), &desc, e, info, std::ptr::null_mut(), 0)
    };
    // info->struct_size 0: refused, nothing written.
    assert_eq!(call(&e, &mut info), Q4VK_ERROR_INVALID_ARGUMENT);
    assert_eq!(info.binding_count, 0);
    info.struct_size = std::mem::size_of::<q4vk_kernel_info>() as u32;
    let mut bad = e;
    // x spans more than 2^32 elements: the GEMM indexes with 32 bits.
    bad.m = 1 << 27;
    assert_eq!(call(&bad, &mut info), Q4VK_ERROR_UNSUPPORTED);
    assert!(last_error().contains("2^32"), "{}", last_error());
    bad = e;
    bad.m = 64;
    bad.variant = Q4VK_KERNEL_SUBGROUP; // the GEMM too checks the variant's subgroup size
    assert_eq!(call(&bad, &mut info), Q4VK_ERROR_INVALID_ARGUMENT);
    bad = e;
    bad.m = 0;
    assert_eq!(call(&bad, &mut info), Q4VK_ERROR_INVALID_ARGUMENT);
    bad = e;
    bad.variant = Q4VK_KERNEL_SUBGROUP; // no context, no subgroup size
    assert_eq!(call(&bad, &mut info), Q4VK_ERROR_INVALID_ARGUMENT);
    bad = e;
    bad.flags = 0x80;
    assert_eq!(call(&bad, &mut info), Q4VK_ERROR_INVALID_ARGUMENT);
    bad = e;
    bad.x_row_stride = 63;
    assert_eq!(call(&bad, &mut info), Q4VK_ERROR_INVALID_ARGUMENT);
    assert_eq!(info.binding_count, 0, "nothing written on error");
    // A matrix whose weights exceed 2^32 uvec4 indices cannot be one buffer.
    let mut big = desc;
    big.n = 1 << 20;
    big.k = 1 << 17;
    assert_eq!(
        unsafe {
            q4vk_kernel_export(
                std::ptr::null(),
                &big,
                &e,
                &mut info,
                std::ptr::null_mut(),
                0,
            )
        },
        Q4VK_ERROR_UNSUPPORTED
    );
    assert!(last_error().contains("one buffer"), "{}", last_error());
    // Pack: a too-small output is refused.
    let (mut wb, mut sb, mut zb) = (0, 0, 0);
    assert_eq!(
        unsafe { q4vk_matrix_pack_size(&desc, &mut wb, &mut sb, &mut zb) },
        Q4VK_OK
    );
    assert_eq!((wb, sb, zb), (4 * 2 * 16, 16, 0));
    let (mut w, mut s) = (vec![0u8; wb], vec![0u8; sb]);
    let st = unsafe {
        q4vk_matrix_pack(
            &desc,
            w.as_mut_ptr().cast(),
            wb - 1,
            s.as_mut_ptr().cast(),
            sb,
            std::ptr::null_mut(),
            0,
        )
    };
    assert_eq!(st, Q4VK_ERROR_BUFFER_TOO_SMALL);
}

/// Without a context, a subgroup size given for the portable kernel makes the local size a
/// multiple of it (ncnn would round it so), also for short rows and for the GEMM (m > 8);
/// the result stays exact.
#[test]
fn exported_portable_kernel_rounds_to_subgroup() {
    let host = Host::new();
    let mut rng = Rng(77);
    // m > 8: the GEMM, its workgroup grown along tokens to the subgroup (TY 16).
    let cases = [
        (64u32, 33usize, 8usize),
        (128, 40, 1),
        (16, 1000, 5),
        (128, 97, 40),
        (128, 65, 150),
    ];
    for (sg, k, m) in cases {
        let n = 19;
        let data = random_q4(&mut rng, n, k, 32, true, false);
        let desc = q4_desc(&data);
        let mut e = unsafe { std::mem::zeroed::<q4vk_kernel_export_desc>() };
        unsafe { q4vk_kernel_export_desc_default(&mut e) };
        e.m = m as u32;
        e.subgroup_size = sg;
        let (info, spirv) = export(std::ptr::null(), &desc, &e);
        assert_eq!(info.variant, Q4VK_KERNEL_PORTABLE);
        assert_eq!(info.local_size[0] % sg, 0);
        assert!(info.local_size[0] >= 32);
        let packed = pack(&desc, &info);
        let x = rng.vec(m * k);
        let r = Run {
            m,
            k,
            n,
            strides: (k, n),
            x_f16: false,
        };
        let y = run_case(&host, &info, &spirv, &packed, &x, r);
        check(&y, &data, &x, m, &format!("sg {sg} k {k} m {m}"));
    }
    drop(host);
    assert_quiet();
}
