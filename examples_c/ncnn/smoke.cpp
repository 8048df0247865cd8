// Smoke test for the cached ncnn+Vulkan build (examples_c/ncnn/fetch_build.sh).
//
//  1. ncnn::get_gpu_count() > 0 (lavapipe counts as a GPU), prints the device name.
//  2. A 1-layer InnerProduct net, written by this program as .param/.bin, run with
//     opt.use_vulkan_compute = true; the output is extracted as a VkMat (so it
//     provably came off the GPU path) and compared with a plain C++ reference and
//     with the same net on the CPU.
//  3. The raw path a q4vk custom layer will use: ncnn::Pipeline::create() from
//     glslc-compiled SPIR-V (scale.comp) + specialization constants, dispatched with
//     VkCompute::record_pipeline() on VkMat buffers.
//
// ---------------------------------------------------------------------------
// Notes for the custom-layer author (ncnn 1.0.20261020, read from its sources)
// ---------------------------------------------------------------------------
// Headers: installed under <prefix>/include/ncnn/ ; with find_package(ncnn) +
//   target_link_libraries(x ncnn) include them as "net.h", "layer.h", "gpu.h",
//   "pipeline.h", "command.h", "mat.h", "option.h": the target's
//   INTERFACE_INCLUDE_DIRECTORIES is <prefix>/include/ncnn (not <prefix>/include),
//   so write "net.h", not <ncnn/net.h>.
//   platform.h has NCNN_VULKAN=1, NCNN_SIMPLEVK=0 for this build, so gpu.h
//   includes the system <vulkan/vulkan.h> (+ ncnn's vulkan_header_fix.h).
//   ncnn links Vulkan::Vulkan (system libvulkan.so.1), glslang (bundled, static,
//   installed next to libncnn.a) and OpenMP; ncnnConfig.cmake pulls all of that.
//
// Pipeline::create(const uint32_t* spv, size_t spv_size_in_BYTES,
//                  const std::vector<vk_specialization_type>& specializations)
//   * vk_specialization_type is a 4-byte union {int i; float f; uint32_t u32;}.
//     Entry k of the vector becomes VkSpecializationMapEntry{constantID = k,
//     offset = 4k, size = 4}: the shader's constant_id must be 0..N-1, all 4 bytes.
//   * Local size: call pipeline.set_local_size_xyz(x, y, z) (or
//     set_optimal_local_size_xyz) BEFORE create(). ncnn rewrites the SPIR-V when
//     it makes the shader module (gpu.cpp inject_local_size_xyz): a literal
//     OpExecutionMode LocalSize is REPLACED by those values (so a kernel that
//     hard-codes local_size_x = 64 must be given set_local_size_xyz(64,1,1));
//     constants decorated SpecId 233/234/235 (GLSL: layout(local_size_x_id = 233,
//     local_size_y_id = 234, local_size_z_id = 235) in;) are stripped and
//     replaced the same way. GOTCHA (verified in this smoke test): reflection
//     (resolve_shader_info) runs on the ORIGINAL SPIR-V and counts SpecId
//     233-235 as specialization constants, and create() fails with
//     "pipeline specialization count mismatch, expect N+3 but got N" unless the
//     vector has N+3 entries (the 3 extra map to constantIDs N..N+2, which are
//     ignored). ncnn's own shaders declare no local size at all (=> 1,1,1
//     literal, rewritten). Both forms are exercised below (scale.comp,
//     scale_ids.comp). set_local_size_xyz rounds to multiples of the subgroup
//     size (adjust_xyz); read back pipeline.local_size_x() if it matters.
//     With SPIR-V >= 1.6 (LocalSizeId) ncnn uses OpExecutionModeId instead;
//     same rules.
//   * Bindings: reflected from the SPIR-V (resolve_shader_info): descriptor set 0,
//     binding N -> storage buffer (type 1), storage image (2) or sampler (3);
//     at most 16 bindings.
//   * Push constants: counted ONLY as the members of the block whose TYPE name is
//     "parameter" (layout(push_constant) uniform parameter { int n; ... } p;).
//     Each member is one 4-byte vk_constant_type; pipeline layout size = 4*count.
//     => the SPIR-V must keep OpName/OpMemberName (`spirv-opt --strip-debug`
//     removes them and silently gives a 0-byte push-constant range; check with
//     spirv-dis), and q4vk's block must be named "parameter" with only 4-byte
//     members, or the push-constant range will be wrong. A kernel without push
//     constants is fine (count 0, pass an empty vector).
//   * The pipeline is cached by vkdev->get_pipeline_cache(); creating the same
//     SPIR-V + specializations + local size twice is cheap.
//
// VkCompute::record_pipeline(const Pipeline*, const std::vector<VkMat>& bindings,
//                            const std::vector<vk_constant_type>& constants,
//                            const VkMat& dispatcher)
//   A plain `const Mat& dispatcher` (only .w/.h/.d/.c are read, no data) exists
//   only in the 5-argument overload with image bindings:
//     record_pipeline(pipe, buffers, std::vector<VkImageMat>(), constants, Mat dispatcher)
//   * bindings[i] goes to the i-th buffer binding in binding order; an empty VkMat
//     binds a dummy buffer. Descriptor = {buffer(), buffer_offset(),
//     buffer_capacity()}. ncnn inserts the read/write barriers itself.
//   * group count = ceil(dispatcher.w / local_size_x), ceil(dispatcher.h*d /
//     local_size_y), ceil(dispatcher.c / local_size_z). For a GEMV over N rows
//     pass a Mat dispatcher with w = N (or N / rows_per_invocation), h = c = 1.
//   * record_upload(Mat, VkMat, opt) casts fp32 -> fp16/bf16 when the device is a
//     DISCRETE gpu and opt.use_fp16_storage/packed (or bf16) is on: it treats any
//     Mat with elemsize == 4*elempack as float. Upload packed int4 weights as a
//     Mat with elemsize 1 (bytes), or clear those opt flags for the upload, or the
//     bits get mangled on real GPUs (lavapipe is type CPU, so it won't show here).
//   * record_download(VkMat, Mat, opt) (and record_upload) run ncnn's own
//     convert_packing/cast shader: with opt.use_packing_layout (default true) a
//     download whose element count % 4 == 0 comes back as elempack 4 (w/4,
//     elemsize 16), and with fp16/bf16 storage the data is cast. For raw q4vk
//     buffers use an Option copy with use_packing_layout = false and fp16/bf16 off
//     (see run_raw_pipeline below).
//   * In a layer, do weight upload in upload_model(VkTransfer& cmd, const Option&)
//     with cmd.record_upload(..., opt), keep the VkMat as a member.
//
// Custom layer with Vulkan:
//   class Q4Gemv : public ncnn::Layer {
//     Q4Gemv() { one_blob_only = true; support_vulkan = true; }
//     int load_param(const ncnn::ParamDict&) override; int load_model(const ncnn::ModelBin&) override;
//     int create_pipeline(const ncnn::Option& opt) override {   // vkdev is set by Net
//       pipe = new ncnn::Pipeline(vkdev); pipe->set_local_size_xyz(64,1,1);
//       return pipe->create(spv, spv_bytes, specs); }
//     int destroy_pipeline(const ncnn::Option&) override { delete pipe; pipe = 0; return 0; }
//     int upload_model(ncnn::VkTransfer& cmd, const ncnn::Option& opt) override;
//     int forward(const ncnn::VkMat& in, ncnn::VkMat& out, ncnn::VkCompute& cmd,
//                 const ncnn::Option& opt) const override {
//       out.create(N, 4u, 1, opt.blob_vkallocator);   // elemsize, elempack
//       cmd.record_pipeline(pipe, {in, w_gpu, out}, constants, out); return 0; }
//     // a CPU forward(const Mat&, Mat&, const Option&) is the fallback when Vulkan is off
//   };
//   DEFINE_LAYER_CREATOR(Q4Gemv)   // -> Q4Gemv_layer_creator
//   net.opt.use_vulkan_compute = true;                 // BEFORE load_param
//   net.register_custom_layer("Q4Gemv", Q4Gemv_layer_creator);  // BEFORE load_param
//   Keep support_vulkan_packing/any_packing false (default) to receive elempack=1
//   fp32 blobs; set opt.use_fp16_storage/packed = false (as below) if the kernel
//   expects fp32 activations (otherwise ncnn hands fp16 blobs between layers on
//   GPUs that support it). Layers that don't set support_vulkan run on the CPU and
//   ncnn inserts the download/upload itself.
// ---------------------------------------------------------------------------

#include "command.h"
#include "gpu.h"
#include "layer.h"
#include "mat.h"
#include "net.h"
#include "pipeline.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

static const uint32_t kScaleSpv[] = {
#include "scale.spv.inc"  // glslc -mfmt=num scale.comp (CMake custom command)
};
static const uint32_t kScaleIdsSpv[] = {
#include "scale_ids.spv.inc"  // same kernel, local size on spec ids 233..235
};

int g_fail = 0;

void check(bool ok, const char* what) {
    std::printf("[%s] %s\n", ok ? " OK " : "FAIL", what);
    if (!ok) g_fail = 1;
}

// Deterministic pseudo-random in [-1, 1).
float frand(uint32_t& s) {
    s = s * 1664525u + 1013904223u;
    return static_cast<float>(s >> 8) / 8388608.0f - 1.0f;
}

void fp32_only(ncnn::Option& opt) {
    // Exact fp32 everywhere so GPU == CPU within float rounding.
    opt.use_fp16_packed = false;
    opt.use_fp16_storage = false;
    opt.use_fp16_arithmetic = false;
    opt.use_bf16_storage = false;
    opt.use_bf16_packed = false;
    opt.use_int8_storage = false;
    opt.use_int8_arithmetic = false;
}

float max_abs_diff(const ncnn::Mat& m, const std::vector<float>& ref) {
    if (m.w != static_cast<int>(ref.size()) || m.elempack != 1 || m.elemsize != 4u) {
        std::printf("unexpected output Mat: dims %d w %d h %d c %d elemsize %zu elempack %d\n", m.dims, m.w, m.h, m.c,
                    m.elemsize, m.elempack);
        return INFINITY;
    }
    float d = 0.f;
    const float* p = m;
    for (size_t i = 0; i < ref.size(); i++) d = std::fmax(d, std::fabs(p[i] - ref[i]));
    return d;
}

int run_innerproduct(const std::string& dir, bool vulkan, const ncnn::Mat& in, ncnn::Mat& out) {
    ncnn::Net net;
    net.opt.use_vulkan_compute = vulkan;  // must be set before load_param
    fp32_only(net.opt);
    net.opt.num_threads = 1;
    if (net.load_param((dir + "/fc.param").c_str()) != 0) return -1;
    if (net.load_model((dir + "/fc.bin").c_str()) != 0) return -2;
    if (vulkan && !net.opt.use_vulkan_compute) return -3;  // ncnn silently dropped Vulkan
    ncnn::Extractor ex = net.create_extractor();
    if (!vulkan) {
        if (ex.input("data", in) != 0) return -4;
        return ex.extract("out", out) == 0 ? 0 : -5;
    }
    // GPU path: extract as VkMat, then download ourselves.
    const ncnn::VulkanDevice* vkdev = net.vulkan_device();
    ncnn::VkAllocator* blob = vkdev->acquire_blob_allocator();
    ncnn::VkAllocator* staging = vkdev->acquire_staging_allocator();
    ex.set_blob_vkallocator(blob);
    ex.set_workspace_vkallocator(blob);
    ex.set_staging_vkallocator(staging);
    int rc = 0;
    {
        ncnn::VkCompute cmd(vkdev);
        ncnn::Option opt = net.opt;
        opt.blob_vkallocator = blob;
        opt.workspace_vkallocator = blob;
        opt.staging_vkallocator = staging;
        ncnn::VkMat in_gpu;
        cmd.record_upload(in, in_gpu, opt);
        ex.input("data", in_gpu);
        ncnn::VkMat out_gpu;
        if (ex.extract("out", out_gpu, cmd) != 0) rc = -6;
        if (rc == 0) {
            ncnn::Mat dl;
            cmd.record_download(out_gpu, dl, opt);
            if (cmd.submit_and_wait() != 0) rc = -7;
            if (rc == 0 && dl.elempack != 1) ncnn::convert_packing(dl, out, 1, opt);
            else out = dl;
        }
    }
    ex.clear();
    vkdev->reclaim_blob_allocator(blob);
    vkdev->reclaim_staging_allocator(staging);
    return rc;
}

int run_raw_pipeline(const uint32_t* spv, size_t spv_bytes, int extra_specs, int n, float scale, const ncnn::Mat& a,
                     ncnn::Mat& b, int* lsx) {
    ncnn::VulkanDevice* vkdev = ncnn::get_gpu_device(ncnn::get_default_gpu_index());
    ncnn::VkAllocator* blob = vkdev->acquire_blob_allocator();
    ncnn::VkAllocator* staging = vkdev->acquire_staging_allocator();
    ncnn::Option opt;
    opt.use_vulkan_compute = true;
    fp32_only(opt);
    // record_download() repacks to elempack 4 on the GPU (extra convert_packing
    // dispatch) when use_packing_layout is on and the element count % 4 == 0.
    // Raw buffers want the bytes as they are.
    opt.use_packing_layout = false;
    opt.blob_vkallocator = blob;
    opt.workspace_vkallocator = blob;
    opt.staging_vkallocator = staging;
    int rc = 0;
    {
        ncnn::Pipeline pipe(vkdev);
        pipe.set_local_size_xyz(64, 1, 1);
        // constant_id 0, then fillers for SpecId 233..235 if the shader declares them
        std::vector<ncnn::vk_specialization_type> specs(1 + extra_specs);
        specs[0].f = scale;
        for (int i = 1; i <= extra_specs; i++) specs[i].u32 = 0;
        if (pipe.create(spv, spv_bytes, specs) != 0) rc = -1;
        *lsx = static_cast<int>(pipe.local_size_x());
        if (rc == 0 && (pipe.shader_info().binding_count != 2 || pipe.shader_info().push_constant_count != 1)) {
            std::printf("shader_info: bindings %d push constants %d\n", pipe.shader_info().binding_count,
                        pipe.shader_info().push_constant_count);
            rc = -2;
        }
        if (rc == 0) {
            ncnn::VkCompute cmd(vkdev);
            ncnn::VkMat a_gpu;
            cmd.record_upload(a, a_gpu, opt);
            ncnn::VkMat b_gpu;
            b_gpu.create(n, 4u, 1, blob);
            std::vector<ncnn::VkMat> bindings(2);
            bindings[0] = a_gpu;
            bindings[1] = b_gpu;
            std::vector<ncnn::vk_constant_type> constants(1);
            constants[0].i = n;
            ncnn::Mat dispatcher;  // only w/h/c are read
            dispatcher.w = n;
            dispatcher.h = 1;
            dispatcher.c = 1;
            cmd.record_pipeline(&pipe, bindings, std::vector<ncnn::VkImageMat>(), constants, dispatcher);
            cmd.record_download(b_gpu, b, opt);
            if (cmd.submit_and_wait() != 0) rc = -3;
        }
    }
    vkdev->reclaim_blob_allocator(blob);
    vkdev->reclaim_staging_allocator(staging);
    return rc;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string dir = argc > 1 ? argv[1] : ".";
    const int K = 67;  // inputs (odd on purpose: no pack4 shortcuts)
    const int N = 37;  // outputs

    const int gpus = ncnn::get_gpu_count();  // creates the Vulkan instance lazily
    std::printf("ncnn gpu count: %d\n", gpus);
    check(gpus > 0, "get_gpu_count() > 0");
    if (gpus <= 0) return 1;
    const int idx = ncnn::get_default_gpu_index();
    const ncnn::GpuInfo& info = ncnn::get_gpu_info(idx);
    std::printf("device %d: %s (type %d, api %u.%u.%u, subgroup %u)\n", idx, info.device_name(), info.type(),
                VK_VERSION_MAJOR(info.api_version()), VK_VERSION_MINOR(info.api_version()),
                VK_VERSION_PATCH(info.api_version()), info.subgroup_size());

    // --- model files -------------------------------------------------------
    uint32_t seed = 12345;
    std::vector<float> w(static_cast<size_t>(N) * K), bias(N), x(K);
    for (float& v : w) v = frand(seed);
    for (float& v : bias) v = frand(seed);
    for (float& v : x) v = frand(seed);
    {
        FILE* fp = std::fopen((dir + "/fc.param").c_str(), "wb");
        if (!fp) { std::perror("fc.param"); return 1; }
        // magic, layer count, blob count; InnerProduct: 0=num_output 1=bias_term 2=weight_data_size
        std::fprintf(fp, "7767517\n2 2\nInput data 0 1 data 0=%d\nInnerProduct fc 1 1 data out 0=%d 1=1 2=%d\n", K, N,
                     N * K);
        std::fclose(fp);
        fp = std::fopen((dir + "/fc.bin").c_str(), "wb");
        if (!fp) { std::perror("fc.bin"); return 1; }
        const uint32_t flag = 0;  // weight: 4-byte type tag, 0 = raw fp32; then row-major [N][K]
        std::fwrite(&flag, 4, 1, fp);
        std::fwrite(w.data(), 4, w.size(), fp);
        std::fwrite(bias.data(), 4, bias.size(), fp);  // bias: raw fp32, no tag
        std::fclose(fp);
    }
    std::vector<float> ref(N);
    for (int n = 0; n < N; n++) {
        double acc = bias[n];
        for (int k = 0; k < K; k++) acc += static_cast<double>(w[static_cast<size_t>(n) * K + k]) * x[k];
        ref[n] = static_cast<float>(acc);
    }
    ncnn::Mat in(K);
    for (int k = 0; k < K; k++) in[k] = x[k];

    // --- InnerProduct on CPU and on GPU --------------------------------------
    ncnn::Mat out_cpu, out_gpu;
    int rc = run_innerproduct(dir, false, in, out_cpu);
    const float d_cpu = rc == 0 ? max_abs_diff(out_cpu, ref) : INFINITY;
    std::printf("InnerProduct CPU rc=%d max|diff| vs reference = %g\n", rc, d_cpu);
    check(rc == 0 && d_cpu < 1e-4f, "InnerProduct on CPU matches reference");
    rc = run_innerproduct(dir, true, in, out_gpu);
    const float d_gpu = rc == 0 ? max_abs_diff(out_gpu, ref) : INFINITY;
    std::printf("InnerProduct Vulkan rc=%d max|diff| vs reference = %g\n", rc, d_gpu);
    check(rc == 0 && d_gpu < 1e-4f, "InnerProduct on Vulkan matches reference");

    // --- raw Pipeline from SPIR-V --------------------------------------------
    const int n = 1000;
    const float scale = 2.5f;
    ncnn::Mat a(n), b;
    for (int i = 0; i < n; i++) a[i] = frand(seed);
    std::vector<float> ref_b(n);
    for (int i = 0; i < n; i++) ref_b[i] = a[i] * scale + 1.0f;
    int lsx = 0;
    rc = run_raw_pipeline(kScaleSpv, sizeof(kScaleSpv), 0, n, scale, a, b, &lsx);
    float d_raw = rc == 0 ? max_abs_diff(b, ref_b) : INFINITY;
    std::printf("raw Pipeline, literal local size (local_size_x=%d) rc=%d max|diff| = %g\n", lsx, rc, d_raw);
    check(rc == 0 && d_raw < 1e-6f, "Pipeline::create(SPIR-V, 1 spec const) + record_pipeline");
    b.release();
    rc = run_raw_pipeline(kScaleIdsSpv, sizeof(kScaleIdsSpv), 3, n, scale, a, b, &lsx);
    d_raw = rc == 0 ? max_abs_diff(b, ref_b) : INFINITY;
    std::printf("raw Pipeline, spec ids 233-235 (local_size_x=%d) rc=%d max|diff| = %g\n", lsx, rc, d_raw);
    check(rc == 0 && d_raw < 1e-6f, "Pipeline::create(SPIR-V with 233-235, 1+3 spec consts) + record_pipeline");

    ncnn::destroy_gpu_instance();
    std::printf("%s\n", g_fail ? "SMOKE FAILED" : "SMOKE PASSED");
    return g_fail;
}
