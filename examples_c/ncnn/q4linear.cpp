// Q4Linear: see q4linear.h.
#include "q4linear.h"

#include "modelbin.h"
#include "paramdict.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace {

void log_q4vk(const char* what, q4vk_status st) {
    char msg[512];
    q4vk_last_error_message(msg, sizeof msg);
    NCNN_LOGE("Q4Linear: %s failed (status %d): %s", what, (int)st, msg);
}

// ceil(bytes / 4) 32-bit words, as the pre-quantized blobs are stored in the .bin.
int words_of(size_t bytes) { return (int)((bytes + 3) / 4); }

// A 1-D view of blob `mat` over whole 32-bit words: the kernels read an f16 x and write an
// f16 y a word (two elements) at a time, so a blob of an odd element count is bound one
// element longer. ncnn allocates every blob rounded up to 4 bytes (VkMat::create), so the
// view stays within the allocation; its offset in the buffer is the blob's.
ncnn::VkMat word_view(const ncnn::VkMat& mat) {
    ncnn::VkMat v = mat;
    const int elems = (int)((mat.total() * mat.elemsize + 3) / 4 * 4 / mat.elemsize);
    v.dims = 1;
    v.w = elems;
    v.h = v.d = v.c = 1;
    v.cstep = (size_t)elems;
#if NCNN_BATCH
    v.nstep = (size_t)elems;
#endif
    return v;
}

}  // namespace

Q4Linear::Q4Linear() {
    one_blob_only = true;
    support_inplace = false;
    support_vulkan = true;
    // support_vulkan_packing / support_vulkan_any_packing stay false: ncnn hands this layer
    // elempack-1 blobs, the layout the kernel reads (x[m][k] rows, y[m][n] rows).
}

int Q4Linear::load_param(const ncnn::ParamDict& pd) {
    n = pd.get(0, 0);
    k = pd.get(1, 0);
    group_size = pd.get(2, 128);
    zero_points = pd.get(3, 0);
    weight_format = pd.get(4, 0);
    variant = pd.get(5, 2);
    max_m = pd.get(6, 0);
    source = pd.get(7, 0);
    gptq_format = pd.get(8, 1);
    bias_term = pd.get(9, 0);
    for (int i = 0; i < 4; i++) imported_bytes[i] = pd.get(10 + i, 0);
    const bool imported_ok = weight_format != 2 || (source >= (int)Q4VK_SOURCE_GGUF_Q4_0 &&
                                                    source <= (int)Q4VK_SOURCE_GGUF_NVFP4 && imported_bytes[0] > 0 &&
                                                    imported_bytes[1] >= 0 && imported_bytes[2] >= 0 &&
                                                    imported_bytes[3] >= 0);
    if (n <= 0 || k <= 0 || (zero_points != 0 && zero_points != 1) || weight_format < 0 || weight_format > 2 ||
        variant < 0 || variant > 2 || max_m < 0 || !imported_ok || (bias_term != 0 && bias_term != 1)) {
        NCNN_LOGE("Q4Linear: bad params n=%d k=%d zero_points=%d format=%d variant=%d max_m=%d source=%d bias_term=%d",
                  n, k, zero_points, weight_format, variant, max_m, source, bias_term);
        return -1;
    }
    // The group size, gptq_format and the tensors' sizes are checked by q4vk
    // (q4vk_matrix_pack_size / q4vk_matrix_pack_extended_size) in load_model.
    return 0;
}

q4vk_matrix_desc Q4Linear::matrix_desc() const {
    q4vk_matrix_desc d;
    q4vk_matrix_desc_default(&d);
    d.n = (uint64_t)n;
    d.k = (uint64_t)k;
    d.group_size = group_size;
    d.zero_points = (uint32_t)zero_points;
    if (weight_format == 0) {
        d.source = Q4VK_SOURCE_FLOAT;
        d.dtype = Q4VK_DTYPE_F32;  // [n][k] row-major = ncnn InnerProduct's weight layout
        d.weight = weight_f32.data;
        d.weight_bytes = weight_f32.total() * weight_f32.elemsize;
    } else if (weight_format == 2) {
        d.source = (q4vk_matrix_source)source;
        d.dtype = Q4VK_DTYPE_F16;  // GPTQ/AWQ scales as checkpoints store them
        d.gptq_format = (uint32_t)gptq_format;
        d.zero_points = 0;
        const void** ptrs[4] = {&d.weight, &d.scales, &d.zeros, &d.g_idx};
        size_t* sizes[4] = {&d.weight_bytes, &d.scales_bytes, &d.zeros_bytes, &d.g_idx_bytes};
        for (int i = 0; i < 4; i++) {  // exact byte counts (the blobs are padded to words)
            *ptrs[i] = imported_bytes[i] ? imported[i].data : nullptr;
            *sizes[i] = imported_bytes[i] ? (size_t)imported_bytes[i] : 0;
        }
    } else {
        d.source = Q4VK_SOURCE_Q4;
        d.dtype = Q4VK_DTYPE_F16;  // scale type
        d.weight = q_weight.data;
        d.weight_bytes = q_weight.total() * q_weight.elemsize;
        d.scales = q_scales.data;
        d.scales_bytes = q_scales.total() * q_scales.elemsize;
        d.zeros = zero_points ? q_zeros.data : nullptr;
        d.zeros_bytes = zero_points ? q_zeros.total() * q_zeros.elemsize : 0;
    }
    return d;
}

int Q4Linear::load_model(const ncnn::ModelBin& mb) {
    const int weights = load_weights(mb);
    if (weights != 0 || !bias_term) return weights;
    bias_data = mb.load(n, 1);  // raw fp32, as InnerProduct's bias
    return bias_data.empty() ? -100 : 0;
}

int Q4Linear::load_weights(const ncnn::ModelBin& mb) {
    if (weight_format == 2) {
        // Raw 4-byte words (type 1: no tag), in the order weight, scales, zeros, g_idx.
        for (int i = 0; i < 4; i++) {
            if (!imported_bytes[i]) continue;
            imported[i] = mb.load(words_of((size_t)imported_bytes[i]), 1);
            if (imported[i].empty()) return -100;
        }
        // Validates the desc and g_idx (act-order or not) now. A GGUF type q4vk keeps in its
        // native blocks runs the kernels on blocks.
        q4vk_matrix_desc d = matrix_desc();
        size_t sizes[5];
        blocks = q4vk_matrix_pack_blocks_size(&d, &sizes[0], &sizes[1], &sizes[2]) == Q4VK_OK;
        if (blocks) return 0;
        q4vk_status st = q4vk_matrix_pack_extended_size(&d, &sizes[0], &sizes[1], &sizes[2], &sizes[3], &sizes[4]);
        if (st != Q4VK_OK) {
            log_q4vk("q4vk_matrix_pack_extended_size", st);
            return -1;
        }
        return 0;
    }
    if (weight_format == 0) {
        weight_f32 = mb.load(n * k, 0);  // tagged blob: fp32 (or fp16/int8, ncnn converts)
        if (weight_f32.empty()) return -100;
        if (weight_f32.elemsize != 4u) {
            NCNN_LOGE("Q4Linear: weight blob is not fp32 after loading (elemsize %zu)", weight_f32.elemsize);
            return -1;
        }
    } else {
        q4vk_matrix_desc d = matrix_desc();  // shape only
        d.source = Q4VK_SOURCE_Q4;
        size_t wb = 0, sb = 0, zb = 0;
        q4vk_status st = q4vk_q4_quantize_size(&d, &wb, &sb, &zb);
        if (st != Q4VK_OK) {
            log_q4vk("q4vk_q4_quantize_size", st);
            return -1;
        }
        // Raw 4-byte words (type 1: no tag); the data is reinterpreted, never read as float.
        q_weight = mb.load(words_of(wb), 1);
        q_scales = mb.load(words_of(sb), 1);
        if (q_weight.empty() || q_scales.empty()) return -100;
        if (zero_points) {
            q_zeros = mb.load(words_of(zb), 1);
            if (q_zeros.empty()) return -100;
        }
    }
    // Validate the desc now (group size, zero points ≤ 15 are checked by pack later).
    q4vk_matrix_desc d = matrix_desc();
    size_t wb = 0, sb = 0, zb = 0;
    q4vk_status st = q4vk_matrix_pack_size(&d, &wb, &sb, &zb);
    if (st != Q4VK_OK) {
        log_q4vk("q4vk_matrix_pack_size", st);
        return -1;
    }
    return 0;
}

int Q4Linear::create_pipeline(const ncnn::Option& opt) {
    if (!vkdev) return 0;  // CPU-only net: nothing to do (this layer has no CPU forward)
    // Blobs of elempack 1 are fp16 exactly when the net stores fp16 (fp16_packed alone packs
    // only elempack 4).
    if (opt.use_bf16_storage) {
        NCNN_LOGE("Q4Linear: bf16 storage blobs are not supported; set opt.use_bf16_storage = false");
        return -1;
    }
    fp16 = opt.use_fp16_storage;

    // Which kernel. No q4vk context is created: the portable kernel needs none, and the
    // subgroup kernel without a context needs only the subgroup size the shader will run
    // with. ncnn's Pipeline pins it: with VK_EXT_subgroup_size_control it passes
    // requiredSubgroupSize = Pipeline's subgroup size (default GpuInfo::subgroup_size()),
    // without it the device runs its default subgroupSize = GpuInfo::subgroup_size(). So
    // ncnn's own GpuInfo answers exactly what q4vk asks, on exactly ncnn's device; a q4vk
    // context would open a second VkInstance/VkDevice only to read the same properties.
    const ncnn::GpuInfo& gi = vkdev->info;
    const uint32_t need = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
    const uint32_t sg = gi.subgroup_size();
    const bool sg_ok = (gi.support_subgroup_ops() & need) == need && sg >= 4 && sg <= 128 && (sg & (sg - 1)) == 0;
    if (variant == 1 && !sg_ok) {
        NCNN_LOGE("Q4Linear: subgroup kernel requested but %s lacks subgroup basic+arithmetic (size %u)",
                  gi.device_name(), sg);
        return -1;
    }
    variant_used = (variant == 1 || (variant == 2 && sg_ok)) ? Q4VK_KERNEL_SUBGROUP : Q4VK_KERNEL_PORTABLE;

    // The export reads no data pointer but a GPTQ g_idx (loaded by now) to tell act-order
    // apart. Imported checkpoints take the extended kernel (bindings 5 and 6: per-group
    // offsets, column order); the other formats the v0 kernel.
    const q4vk_matrix_desc d = matrix_desc();
    const int gemv_max = max_m == 0 ? MAX_M : std::min(max_m, MAX_M);
    for (int m = 1; m <= gemv_max; m++)
        if (make_pipeline(d, m, variant_used == Q4VK_KERNEL_SUBGROUP ? sg : 0, infos[m - 1], pipes[m - 1]) != 0)
            return -1;
    // Prefill: the GEMM (no subgroup operations; every variant exports it). Its pipeline
    // does not depend on m, so one export at m = 9 serves every m > 8; forward() derives
    // the per-m push constants and group counts. ncnn rounds local sizes up to a multiple
    // of its subgroup size: pass that size so the export's local size already is one.
    if (max_m == 0 || max_m > MAX_M) {
        const bool pow2 = sg >= 1 && sg <= 128 && (sg & (sg - 1)) == 0;
        if (make_pipeline(d, MAX_M + 1, pow2 ? sg : 0, gemm_info, gemm_pipe) != 0) return -1;
    }
    return 0;
}

int Q4Linear::make_pipeline(const q4vk_matrix_desc& d, int m, uint32_t subgroup_size, q4vk_kernel_info& info,
                            ncnn::Pipeline*& pipe) {
    const ncnn::GpuInfo& gi = vkdev->info;
    q4vk_kernel_export_desc e;
    q4vk_kernel_export_desc_default(&e);
    // A bias is binding 7 of the extended kernel, which takes the v0 pack's bytes too
    // (bindings 5 and 6 then hold nothing), or the last binding of the kernels on blocks.
    // fp16 blobs: f16 x, and f16 y from the extended kernel or the kernels on blocks.
    if (blocks)
        e.export_flags = Q4VK_KERNEL_EXPORT_BLOCKS;
    else if (weight_format == 2 || bias_term || fp16)
        e.export_flags = Q4VK_KERNEL_EXPORT_EXTENDED;
    if (bias_term) e.export_flags |= Q4VK_KERNEL_EXPORT_BIAS;
    if (fp16) e.flags = Q4VK_GEMV_F16_ACTIVATIONS | Q4VK_GEMV_F16_OUTPUT;
    e.variant = variant_used;
    e.m = (uint32_t)m;
    e.subgroup_size = subgroup_size;
    std::memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    std::vector<uint32_t> spv;
    q4vk_status st = q4vk_kernel_export(nullptr, &d, &e, &info, nullptr, 0);  // size query
    if (st == Q4VK_OK) {
        spv.assign(info.spirv_words, 0u);
        st = q4vk_kernel_export(nullptr, &d, &e, &info, spv.data(), spv.size());
    }
    if (st != Q4VK_OK) {
        log_q4vk("q4vk_kernel_export", st);
        return -1;
    }
    for (uint32_t b = 0; b < info.binding_count; b++) {
        if (info.bindings[b].bytes > gi.physicalDeviceProperties().limits.maxStorageBufferRange) {
            NCNN_LOGE("Q4Linear: binding %u needs %llu bytes > maxStorageBufferRange", b,
                      (unsigned long long)info.bindings[b].bytes);
            return -1;
        }
    }
    // Specialization constants: vector entry i = constant_id i (ncnn's rule). The export
    // lists the kernel's own ids 0..N-1, then 233..235 (the local size; ncnn strips
    // those and injects set_local_size_xyz's values, but its reflection counts them).
    std::vector<ncnn::vk_specialization_type> specs(info.specialization_count);
    for (uint32_t i = 0; i < info.specialization_count; i++) {
        const uint32_t id = info.specializations[i].id;
        if (id != i && id < 233) {
            NCNN_LOGE("Q4Linear: specialization %u has id %u (ncnn maps entry i to id i)", i, id);
            return -1;
        }
        specs[i].u32 = info.specializations[i].value;
    }
    ncnn::Pipeline* p = new ncnn::Pipeline(vkdev);
    pipe = p;
    p->set_local_size_xyz((int)info.local_size[0], (int)info.local_size[1], (int)info.local_size[2]);
    if (p->local_size_x() != info.local_size[0] || p->local_size_y() != info.local_size[1] ||
        p->local_size_z() != info.local_size[2]) {
        NCNN_LOGE("Q4Linear: ncnn adjusted the local size %u,%u,%u to %u,%u,%u", info.local_size[0],
                  info.local_size[1], info.local_size[2], p->local_size_x(), p->local_size_y(), p->local_size_z());
        return -1;
    }
    if (p->create(spv.data(), spv.size() * sizeof(uint32_t), specs) != 0) {
        NCNN_LOGE("Q4Linear: Pipeline::create failed (m=%d)", m);
        return -1;
    }
    const ncnn::ShaderInfo& si = p->shader_info();
    if (si.binding_count != (int)info.binding_count || si.push_constant_count != (int)info.push_constant_count) {
        NCNN_LOGE("Q4Linear: ncnn reflected %d bindings / %d push constants, export says %u / %u", si.binding_count,
                  si.push_constant_count, info.binding_count, info.push_constant_count);
        return -1;
    }
    return 0;
}

int Q4Linear::destroy_pipeline(const ncnn::Option& opt) {
    (void)opt;
    for (ncnn::Pipeline*& p : pipes) {
        delete p;
        p = nullptr;
    }
    delete gemm_pipe;
    gemm_pipe = nullptr;
    return 0;
}

int Q4Linear::upload_model(ncnn::VkTransfer& cmd, const ncnn::Option& opt) {
    q4vk_matrix_desc d = matrix_desc();
    // Device-layout bytes: weights, scales, zeros, and (format 2) offsets, column order; or
    // the blocks' codes, scales and fifth bits.
    size_t sizes[5] = {};
    q4vk_status st = blocks ? q4vk_matrix_pack_blocks_size(&d, &sizes[0], &sizes[1], &sizes[2])
                     : weight_format == 2
                         ? q4vk_matrix_pack_extended_size(&d, &sizes[0], &sizes[1], &sizes[2], &sizes[3], &sizes[4])
                         : q4vk_matrix_pack_size(&d, &sizes[0], &sizes[1], &sizes[2]);
    if (st != Q4VK_OK) {
        log_q4vk("q4vk_matrix_pack(_extended)_size", st);
        return -1;
    }
    // The device layout as raw bytes: 1-D Mats with elemsize 1, so record_upload neither
    // casts (it casts only 32-bit elements to fp16/bf16) nor repacks them. A size of 0 (no
    // zero points, offsets or column order) leaves its Mat empty.
    ncnn::Mat host[5];
    for (int i = 0; i < 5; i++) {
        if (!sizes[i]) continue;
        host[i].create((int)sizes[i], (size_t)1u);
        if (host[i].empty()) return -100;
    }
    st = blocks ? q4vk_matrix_pack_blocks(&d, host[0].data, sizes[0], host[1].data, sizes[1], host[2].data, sizes[2])
         : weight_format == 2 ? q4vk_matrix_pack_extended(&d, host[0].data, sizes[0], host[1].data, sizes[1],
                                                         host[2].data, sizes[2], host[3].data, sizes[3],
                                                         host[4].data, sizes[4])
                              : q4vk_matrix_pack(&d, host[0].data, sizes[0], host[1].data, sizes[1], host[2].data,
                                                 sizes[2]);
    if (st != Q4VK_OK) {
        log_q4vk("q4vk_matrix_pack(_extended)", st);
        return -1;
    }
    ncnn::Option raw = opt;  // ncnn's weight allocator (opt.blob_vkallocator in upload_model)
    raw.use_packing_layout = false;
    raw.use_fp16_storage = raw.use_fp16_packed = false;
    raw.use_bf16_storage = raw.use_bf16_packed = false;
    raw.use_int8_storage = false;
    ncnn::VkMat* gpu[5] = {&w_gpu, &s_gpu, blocks ? &h_gpu : &z_gpu, &o_gpu, &k_gpu};
    for (int i = 0; i < 5; i++)  // empty ones stay empty -> ncnn binds a dummy buffer
        if (sizes[i]) cmd.record_upload(host[i], *gpu[i], raw);
    if (bias_term) cmd.record_upload(bias_data, b_gpu, raw);
    if (opt.lightmode) {
        weight_f32.release();
        bias_data.release();
        q_weight.release();
        q_scales.release();
        q_zeros.release();
        for (ncnn::Mat& m : imported) m.release();  // the pipelines are made: no more export
    }
    return 0;
}

int Q4Linear::forward(const ncnn::VkMat& bottom, ncnn::VkMat& top, ncnn::VkCompute& cmd,
                      const ncnn::Option& opt) const {
    const size_t elemsize = fp16 ? 2u : 4u;
    if (bottom.elempack != 1 || bottom.elemsize != elemsize) {
        NCNN_LOGE("Q4Linear: input must be elempack 1 of elemsize %zu (the pipelines' storage) "
                  "(got elemsize %zu elempack %d)",
                  elemsize, bottom.elemsize, bottom.elempack);
        return -1;
    }
    const int m = bottom.dims == 1 ? 1 : bottom.h;
    const bool gemm = m > MAX_M;
    if (bottom.w != k || (bottom.dims != 1 && bottom.dims != 2) || m < 1 || (max_m != 0 && m > max_m)) {
        NCNN_LOGE("Q4Linear: input dims %d w %d h %d; expected w = %d, h = m in 1..max_m (%d; 0 = any)", bottom.dims,
                  bottom.w, bottom.h, k, max_m);
        return -1;
    }
    const q4vk_kernel_info& info = gemm ? gemm_info : infos[m - 1];
    const ncnn::Pipeline* pipe = gemm ? gemm_pipe : pipes[m - 1];
    std::vector<ncnn::vk_constant_type> constants(info.push_constant_count);
    for (uint32_t i = 0; i < info.push_constant_count; i++) constants[i].u32 = info.push_constants[i];
    uint32_t groups[3] = {info.group_count[0], info.group_count[1], info.group_count[2]};
    if (gemm && gemm_dispatch(m, constants, groups) != 0) return -1;

    if (bottom.dims == 1)
        top.create(n, elemsize, 1, opt.blob_vkallocator);
    else
        top.create(n, m, elemsize, 1, opt.blob_vkallocator);
    if (top.empty()) return -100;

    // Bindings in the export's order (its bindings[i].role says which is which); x and y as
    // views over whole words.
    const ncnn::VkMat x_words = word_view(bottom), y_words = word_view(top);
    std::vector<ncnn::VkMat> bindings(info.binding_count);
    for (uint32_t i = 0; i < info.binding_count; i++) {
        const ncnn::VkMat* b = nullptr;
        switch (info.bindings[i].role) {
        case Q4VK_BINDING_WEIGHTS: b = &w_gpu; break;
        case Q4VK_BINDING_SCALES: b = &s_gpu; break;
        case Q4VK_BINDING_ZEROS: b = &z_gpu; break;  // empty when symmetric (bytes 0)
        case Q4VK_BINDING_X: b = &x_words; break;
        case Q4VK_BINDING_Y: b = &y_words; break;
        case Q4VK_BINDING_OFFSETS: b = &o_gpu; break;  // extended kernel; empty without offsets
        case Q4VK_BINDING_K_ORDER: b = &k_gpu; break;  // extended kernel; empty in input order
        case Q4VK_BINDING_BIAS: b = &b_gpu; break;     // a bias (or empty: 0 bytes)
        case Q4VK_BINDING_HIGH_BITS: b = &h_gpu; break;  // kernels on blocks: Q5_0's, Q5_1's fifth bits
        default: NCNN_LOGE("Q4Linear: unknown binding role %u", info.bindings[i].role); return -1;
        }
        // x and y: m dense rows in whole 32-bit words (the GEMM was exported at m = 9, so
        // not its bytes).
        const uint64_t need = info.bindings[i].role == Q4VK_BINDING_X   ? ((uint64_t)elemsize * m * k + 3) / 4 * 4
                              : info.bindings[i].role == Q4VK_BINDING_Y ? ((uint64_t)elemsize * m * n + 3) / 4 * 4
                                                                        : info.bindings[i].bytes;
        if (need && (b->empty() || b->buffer_capacity() < need)) {
            NCNN_LOGE("Q4Linear: binding %u has %zu bytes, kernel needs %llu", i, b->empty() ? 0 : b->buffer_capacity(),
                      (unsigned long long)need);
            return -1;
        }
        bindings[i] = *b;
    }
    // ncnn dispatches ceil(w/lx), ceil(h·d/ly), ceil(c/lz) workgroups: ask for exactly the
    // export's group counts (the local size was checked equal in create_pipeline).
    ncnn::Mat dispatcher;
    dispatcher.w = (int)(groups[0] * info.local_size[0]);
    dispatcher.h = (int)(groups[1] * info.local_size[1]);
    dispatcher.d = 1;
    dispatcher.c = (int)(groups[2] * info.local_size[2]);
    cmd.record_pipeline(pipe, bindings, std::vector<ncnn::VkImageMat>(), constants, dispatcher);
    return 0;
}

int Q4Linear::gemm_dispatch(int m, std::vector<ncnn::vk_constant_type>& constants, uint32_t groups[3]) const {
    // The rule of q4vk.h (q4vk_kernel_info.push_constants): a workgroup computes TX·RN rows
    // × (local_size_x / TX)·RM tokens (specialization ids 1, 2, 3); per m only wg_count
    // (push constant 8), m (10) and the group counts change.
    const q4vk_kernel_info& info = gemm_info;
    const uint32_t tx = info.specializations[1].value, rn = info.specializations[2].value;
    const uint32_t rm = info.specializations[3].value;
    const uint64_t rows = (uint64_t)tx * rn, tokens = (uint64_t)(info.local_size[0] / tx) * rm;
    const uint64_t wg = ((uint64_t)n + rows - 1) / rows * (((uint64_t)m + tokens - 1) / tokens);
    const uint32_t* max_groups = vkdev->info.physicalDeviceProperties().limits.maxComputeWorkGroupCount;
    const uint64_t gx = std::min<uint64_t>(wg, max_groups[0]);
    const uint64_t gy = (wg + gx - 1) / gx;
    if (wg > UINT32_MAX || gy > max_groups[1]) {
        NCNN_LOGE("Q4Linear: m = %d needs %llu workgroups, beyond the device's grid", m, (unsigned long long)wg);
        return -1;
    }
    constants[8].u32 = (uint32_t)wg;
    constants[10].u32 = (uint32_t)m;
    groups[0] = (uint32_t)gx;
    groups[1] = (uint32_t)gy;
    groups[2] = 1;
    return 0;
}

DEFINE_LAYER_CREATOR(Q4Linear)
