// Manual check (not built by CMake or CI): q4vk_kernel_export + q4vk_matrix_pack driven
// through a real ncnn::Pipeline and VkCompute::record_pipeline (ncnn 1.0.20261020, the
// build of examples_c/ncnn/fetch_build.sh), against an f64 reference of
// q4vk_q4_quantize's codes. Not a custom layer: it shows the calls such a layer makes.
// Passed on lavapipe (subgroup 8) with VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation, no
// messages, 2026-11-30: portable m = 1, 2, 4, 8 and subgroup m = 3, 5, rel err < 2e-7.
//
//   cargo build --release                     # from the repository root
//   root=$PWD; prefix=$(examples_c/ncnn/fetch_build.sh | tail -1)
//   mkdir -p /tmp/kc && cat > /tmp/kc/CMakeLists.txt <<X
//   cmake_minimum_required(VERSION 3.16)
//   project(kcheck LANGUAGES CXX)
//   set(CMAKE_CXX_STANDARD 17)
//   find_package(ncnn REQUIRED)
//   add_executable(kcheck $root/examples_c/kernel_export_ncnn_check.cpp)
//   target_include_directories(kcheck PRIVATE $root/include)
//   target_link_libraries(kcheck PRIVATE ncnn $root/target/release/libq4vk.so)
//   X
//   cmake -S /tmp/kc -B /tmp/kc/build -Dncnn_DIR=$prefix/lib/cmake/ncnn && cmake --build /tmp/kc/build
//   /tmp/kc/build/kcheck

#include "command.h"
#include "gpu.h"
#include "mat.h"
#include "pipeline.h"
#include "q4vk.h"
#include <cmath>
#include <cstring>
#include <cstdio>
#include <vector>

static float frand(uint32_t& s) { s = s * 1664525u + 1013904223u; return (float)(s >> 8) / 8388608.0f - 1.0f; }

static int run(int n, int k, int m, int group, int zeros, uint32_t variant, uint32_t sg) {
    uint32_t seed = n * 31 + k * 7 + m;
    std::vector<float> w((size_t)n * k), x((size_t)m * k);
    for (auto& v : w) v = frand(seed);
    for (auto& v : x) v = frand(seed);
    q4vk_matrix_desc W; q4vk_matrix_desc_default(&W);
    W.n = n; W.k = k; W.group_size = group; W.zero_points = zeros; W.dtype = Q4VK_DTYPE_F32;
    W.weight = w.data(); W.weight_bytes = w.size() * 4;
    // reference from q4vk_q4_quantize
    size_t qb, sb, zb; q4vk_q4_quantize_size(&W, &qb, &sb, &zb);
    std::vector<uint8_t> q(qb), z(zb ? zb : 1); std::vector<uint16_t> s(sb / 2);
    if (q4vk_q4_quantize(&W, q.data(), qb, s.data(), sb, zb ? z.data() : nullptr, zb)) return 1;
    int gs = group < 0 ? k : group, groups = (k + gs - 1) / gs;
    std::vector<double> ref((size_t)m * n);
    for (int r = 0; r < n; r++) for (int mi = 0; mi < m; mi++) {
        double acc = 0;
        for (int kk = 0; kk < k; kk++) {
            int g = kk / gs; uint8_t b = q[(size_t)r * ((k + 1) / 2) + kk / 2]; int u = kk % 2 ? b >> 4 : b & 15;
            double zz = zeros ? z[(size_t)r * groups + g] : 8;
            acc += x[(size_t)mi * k + kk] * (u - zz) * (double)ncnn::float16_to_float32(s[(size_t)r * groups + g]);
        }
        ref[(size_t)mi * n + r] = acc;
    }
    q4vk_kernel_export_desc e; q4vk_kernel_export_desc_default(&e);
    e.m = m; e.variant = variant; e.subgroup_size = sg;
    q4vk_kernel_info info = {}; info.struct_size = sizeof info;
    if (q4vk_kernel_export(nullptr, &W, &e, &info, nullptr, 0)) { char b[300]; q4vk_last_error_message(b, 300); printf("%s\n", b); return 1; }
    std::vector<uint32_t> spv(info.spirv_words);
    if (q4vk_kernel_export(nullptr, &W, &e, &info, spv.data(), spv.size())) return 1;
    size_t pw, ps, pz; q4vk_matrix_pack_size(&W, &pw, &ps, &pz);
    ncnn::Mat mw((int)pw / 4, (size_t)4u), ms((int)ps / 4, (size_t)4u), mz;
    if (pz) mz.create((int)pz / 4, (size_t)4u);
    if (q4vk_matrix_pack(&W, mw.data, pw, ms.data, ps, pz ? mz.data : nullptr, pz)) return 1;

    ncnn::VulkanDevice* vkdev = ncnn::get_gpu_device(ncnn::get_default_gpu_index());
    ncnn::VkAllocator* blob = vkdev->acquire_blob_allocator();
    ncnn::VkAllocator* staging = vkdev->acquire_staging_allocator();
    ncnn::Option opt; opt.use_vulkan_compute = true; opt.use_fp16_packed = opt.use_fp16_storage = opt.use_fp16_arithmetic = false;
    opt.use_bf16_storage = false; opt.use_int8_storage = false; opt.use_packing_layout = false;
    opt.blob_vkallocator = blob; opt.workspace_vkallocator = blob; opt.staging_vkallocator = staging;
    int rc = 0; double err = 0;
    {
        ncnn::Pipeline pipe(vkdev);
        std::vector<ncnn::vk_specialization_type> sc(info.specialization_count);
        for (uint32_t i = 0; i < info.specialization_count; i++) sc[i].u32 = info.specializations[i].value;
        pipe.set_local_size_xyz(info.local_size[0], info.local_size[1], info.local_size[2]);
        if (pipe.local_size_x() != info.local_size[0]) printf("local size changed %u\n", pipe.local_size_x());
        if (pipe.create(spv.data(), spv.size() * 4, sc) != 0) { printf("create failed\n"); rc = 2; }
        printf("shader_info bindings %d push %d spec %d\n", pipe.shader_info().binding_count,
               pipe.shader_info().push_constant_count, pipe.shader_info().specialization_count);
        if (!rc) {
            ncnn::VkCompute cmd(vkdev);
            ncnn::Mat xin(k, m, (size_t)4u); memcpy(xin.data, x.data(), x.size() * 4);
            ncnn::VkMat wg, sgp, zg, xg, yg;
            cmd.record_upload(mw, wg, opt); cmd.record_upload(ms, sgp, opt);
            if (pz) cmd.record_upload(mz, zg, opt);
            cmd.record_upload(xin, xg, opt);
            if (xg.elempack != 1) { ncnn::VkMat x1; vkdev->convert_packing(xg, x1, 1, cmd, opt); xg = x1; }
            yg.create(n, m, 4u, 1, blob);
            std::vector<ncnn::VkMat> b = {wg, sgp, zg, xg, yg};
            std::vector<ncnn::vk_constant_type> pc(info.push_constant_count);
            for (uint32_t i = 0; i < info.push_constant_count; i++) pc[i].u32 = info.push_constants[i];
            ncnn::VkMat disp; disp.w = info.group_count[0] * info.local_size[0]; disp.h = info.group_count[1]; disp.d = 1; disp.c = 1;
            cmd.record_pipeline(&pipe, b, pc, disp);
            ncnn::Mat yout;
            cmd.record_download(yg, yout, opt);
            if (cmd.submit_and_wait() != 0) rc = 3;
            double d = 0, nn = 0; const float* y = yout;
            for (size_t i = 0; i < ref.size(); i++) { d += (y[i] - ref[i]) * (y[i] - ref[i]); nn += ref[i] * ref[i]; }
            err = std::sqrt(d / nn);
        }
    }
    vkdev->reclaim_blob_allocator(blob); vkdev->reclaim_staging_allocator(staging);
    printf("n %d k %d m %d g %d z %d variant %u: rc %d rel err %.3g\n", n, k, m, group, zeros, info.variant, rc, err);
    return rc || !(err < 1e-5);
}

int main() {
    int fail = 0;
    uint32_t sg = ncnn::get_gpu_info(ncnn::get_default_gpu_index()).subgroup_size();
    printf("subgroup %u\n", sg);
    fail |= run(37, 67, 1, -1, 0, Q4VK_KERNEL_PORTABLE, sg);
    fail |= run(130, 256, 1, 64, 1, Q4VK_KERNEL_PORTABLE, sg);
    fail |= run(130, 256, 2, 64, 0, Q4VK_KERNEL_PORTABLE, sg);
    fail |= run(130, 256, 8, 64, 0, Q4VK_KERNEL_PORTABLE, sg);
    fail |= run(37, 67, 8, -1, 0, Q4VK_KERNEL_PORTABLE, sg);
    fail |= run(37, 67, 4, -1, 0, Q4VK_KERNEL_PORTABLE, sg);
    fail |= run(36, 68, 4, -1, 0, Q4VK_KERNEL_PORTABLE, sg);
    fail |= run(33, 1000, 3, 32, 1, Q4VK_KERNEL_SUBGROUP, sg);
    fail |= run(5, 4096, 5, 128, 0, Q4VK_KERNEL_SUBGROUP, sg);
    printf(fail ? "FAIL\n" : "ALL OK\n");
    ncnn::destroy_gpu_instance();
    return fail;
}
