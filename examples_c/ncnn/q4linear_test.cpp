// Q4Linear (q4linear.h) inside real ncnn, on Vulkan, against ncnn's own InnerProduct.
//
// For each case (n, k, group size, zero points) the program writes a .param/.bin holding
//
//   Input data -> Split -> Q4Linear  (portable kernel, fp32 weights quantized at load)
//                       -> Q4Linear  (subgroup kernel, same weights; portable again when
//                                     ncnn's GpuInfo lacks subgroup arithmetic)
//                       -> Q4Linear  (pre-quantized q4 weights from q4vk_q4_quantize)
//                       -> InnerProduct (fp32, no bias, DEQUANTIZED weights s·(u − z))
//
// registers Q4Linear with Net::register_custom_layer, loads the files with
// opt.use_vulkan_compute = true (fp32 storage), feeds x with m = 1..8 rows (2-D blob
// w = k, h = m; and m = 1 also as a 1-D blob) and checks ‖y_q4 − y_ip‖ / ‖y_ip‖ < 1e-5
// for every Q4Linear branch. Q4Linear has no CPU forward, so a result proves the Vulkan
// path ran.
//
//   q4linear_test WORKDIR          exit 0 = all cases pass
#include "q4linear.h"

#include "mat.h"
#include "net.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

const double TOL = 1e-5;

struct Case {
    int n, k, group_size, zero_points;
};

float frand(uint32_t& s) {
    s = s * 1664525u + 1013904223u;
    return static_cast<float>(s >> 8) / 8388608.0f - 1.0f;  // [-1, 1)
}

void fp32_only(ncnn::Option& opt) {
    opt.use_fp16_packed = false;
    opt.use_fp16_storage = false;
    opt.use_fp16_arithmetic = false;
    opt.use_bf16_storage = false;
    opt.use_bf16_packed = false;
    opt.use_int8_storage = false;
    opt.use_int8_arithmetic = false;
}

void q4vk_fail(const char* what) {
    char msg[512];
    q4vk_last_error_message(msg, sizeof msg);
    std::fprintf(stderr, "%s: %s\n", what, msg);
}

void put_words(FILE* fp, const void* data, size_t bytes) {  // raw blob padded to 4 bytes
    std::vector<uint8_t> buf((bytes + 3) / 4 * 4, 0);
    std::copy(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + bytes, buf.begin());
    std::fwrite(buf.data(), 1, buf.size(), fp);
}

// Writes the model files; returns the dequantized weights [n][k] through `wdq`.
bool write_model(const std::string& dir, const Case& c, uint32_t seed, std::vector<float>& wdq) {
    const int n = c.n, k = c.k;
    std::vector<float> w((size_t)n * k);
    for (float& v : w) v = frand(seed);
    if (c.zero_points)  // asymmetric ranges, so the zero points differ from 8
        for (size_t i = 0; i < w.size(); i++) w[i] = w[i] * 0.7f + 0.25f;

    // Quantize on the CPU exactly as the layer's FLOAT path does, and dequantize.
    q4vk_matrix_desc d;
    q4vk_matrix_desc_default(&d);
    d.source = Q4VK_SOURCE_FLOAT;
    d.dtype = Q4VK_DTYPE_F32;
    d.n = (uint64_t)n;
    d.k = (uint64_t)k;
    d.group_size = c.group_size;
    d.zero_points = (uint32_t)c.zero_points;
    d.weight = w.data();
    d.weight_bytes = w.size() * sizeof(float);
    size_t qb = 0, sb = 0, zb = 0;
    if (q4vk_q4_quantize_size(&d, &qb, &sb, &zb) != Q4VK_OK) return q4vk_fail("q4vk_q4_quantize_size"), false;
    std::vector<uint8_t> q(qb), z(zb);
    std::vector<uint16_t> s(sb / 2);
    if (q4vk_q4_quantize(&d, q.data(), qb, s.data(), sb, zb ? z.data() : nullptr, zb) != Q4VK_OK)
        return q4vk_fail("q4vk_q4_quantize"), false;
    const int groups = c.group_size < 0 ? 1 : (k + c.group_size - 1) / c.group_size;
    const int gs = c.group_size < 0 ? k : c.group_size;
    const size_t row_bytes = (size_t)(k + 1) / 2;
    wdq.assign((size_t)n * k, 0.f);
    for (int r = 0; r < n; r++)
        for (int i = 0; i < k; i++) {
            const uint8_t byte = q[r * row_bytes + i / 2];
            const int u = (i & 1) ? byte >> 4 : byte & 15;
            const int g = i / gs;
            const float scale = ncnn::float16_to_float32(s[(size_t)r * groups + g]);
            const int zero = c.zero_points ? z[(size_t)r * groups + g] : 8;
            wdq[(size_t)r * k + i] = scale * (float)(u - zero);  // exact in fp32
        }

    FILE* fp = std::fopen((dir + "/q4.param").c_str(), "wb");
    if (!fp) return std::perror("q4.param"), false;
    std::fprintf(fp, "7767517\n6 9\n");
    std::fprintf(fp, "Input data 0 1 data\n");
    std::fprintf(fp, "Split split 1 4 data d0 d1 d2 d3\n");
    const char* fmt = "Q4Linear %s 1 1 %s %s 0=%d 1=%d 2=%d 3=%d 4=%d 5=%d\n";
    std::fprintf(fp, fmt, "q4_portable", "d0", "y_portable", n, k, c.group_size, c.zero_points, 0, 0);
    std::fprintf(fp, fmt, "q4_subgroup", "d1", "y_subgroup", n, k, c.group_size, c.zero_points, 0, 2);
    std::fprintf(fp, fmt, "q4_prequant", "d2", "y_prequant", n, k, c.group_size, c.zero_points, 1, 2);
    std::fprintf(fp, "InnerProduct fc 1 1 d3 y_ref 0=%d 1=0 2=%d\n", n, n * k);
    std::fclose(fp);

    fp = std::fopen((dir + "/q4.bin").c_str(), "wb");
    if (!fp) return std::perror("q4.bin"), false;
    const uint32_t tag = 0;  // ncnn's blob tag: 0 = raw fp32 follows
    for (int rep = 0; rep < 2; rep++) {  // q4_portable, q4_subgroup: fp32 weights [n][k]
        std::fwrite(&tag, 4, 1, fp);
        std::fwrite(w.data(), 4, w.size(), fp);
    }
    put_words(fp, q.data(), qb);  // q4_prequant: untagged raw words
    put_words(fp, s.data(), sb);
    if (c.zero_points) put_words(fp, z.data(), zb);
    std::fwrite(&tag, 4, 1, fp);  // fc: dequantized weights, same [n][k] layout
    std::fwrite(wdq.data(), 4, wdq.size(), fp);
    std::fclose(fp);
    return true;
}

double rel_err(const ncnn::Mat& y, const ncnn::Mat& ref) {
    if (y.dims != ref.dims || y.w != ref.w || y.h != ref.h || y.elemsize != 4u || y.elempack != 1 ||
        ref.elempack != 1)
        return INFINITY;
    double dd = 0, rr = 0;
    const float* a = y;
    const float* b = ref;
    for (size_t i = 0; i < (size_t)ref.w * ref.h; i++) {
        dd += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        rr += (double)b[i] * b[i];
    }
    return rr > 0 ? std::sqrt(dd / rr) : std::sqrt(dd);
}

bool run_case(const std::string& dir, const Case& c, uint32_t seed) {
    std::vector<float> wdq;
    if (!write_model(dir, c, seed, wdq)) return false;

    ncnn::Net net;
    net.opt.use_vulkan_compute = true;  // before load_param
    fp32_only(net.opt);
    net.opt.num_threads = 1;
    if (net.register_custom_layer("Q4Linear", Q4Linear_layer_creator) != 0) return false;
    if (net.load_param((dir + "/q4.param").c_str()) != 0) return std::puts("load_param failed"), false;
    if (net.load_model((dir + "/q4.bin").c_str()) != 0) return std::puts("load_model failed"), false;
    if (!net.opt.use_vulkan_compute) return std::puts("ncnn dropped Vulkan (no device?)"), false;

    const char* branches[3] = {"y_portable", "y_subgroup", "y_prequant"};
    const char* variant_name[2] = {"portable", "subgroup"};
    std::string variants;
    for (const ncnn::Layer* l : net.layers()) {
        const Q4Linear* q = dynamic_cast<const Q4Linear*>(l);
        if (q) variants += std::string(variants.empty() ? "" : "/") + variant_name[q->exported_variant() & 1];
    }
    double worst[3] = {0, 0, 0};
    bool ok = true;
    for (int m = 0; m <= 8; m++) {  // m = 0: a 1-D blob (one row)
        ncnn::Mat x = m == 0 ? ncnn::Mat(c.k) : ncnn::Mat(c.k, m);
        uint32_t xs = seed ^ (0x9e3779b9u * (uint32_t)(m + 1));
        for (size_t i = 0; i < x.total(); i++) x[i] = frand(xs);

        ncnn::Extractor ex = net.create_extractor();
        ex.input("data", x);
        ncnn::Mat ref;
        if (ex.extract("y_ref", ref) != 0) return std::puts("extract y_ref failed"), false;
        const int rows = m == 0 ? 1 : m;
        if (ref.w != c.n || ref.h != rows || ref.dims != (m == 0 ? 1 : 2)) {
            std::printf("InnerProduct output dims %d w %d h %d, expected w %d h %d\n", ref.dims, ref.w, ref.h, c.n,
                        rows);
            return false;
        }
        for (int b = 0; b < 3; b++) {
            ncnn::Mat y;
            double e = INFINITY;
            if (ex.extract(branches[b], y) == 0) e = rel_err(y, ref);
            if (!(e < TOL)) {
                std::printf("   %s m=%d%s: rel err %.3g\n", branches[b], rows, m == 0 ? " (1-D)" : "", e);
                ok = false;
            }
            worst[b] = std::fmax(worst[b], e);
        }
    }
    std::printf("[%s] n=%-4d k=%-4d group=%-4d zero_points=%d m=1..8 (%s): max ||d||/||ref|| "
                "portable %.2e  subgroup %.2e  prequant %.2e\n",
                ok ? " OK " : "FAIL", c.n, c.k, c.group_size, c.zero_points, variants.c_str(), worst[0], worst[1],
                worst[2]);
    return ok;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string dir = argc > 1 ? argv[1] : ".";
    if (ncnn::get_gpu_count() <= 0) {
        std::puts("FAIL: ncnn sees no Vulkan device");
        return 1;
    }
    const ncnn::GpuInfo& gi = ncnn::get_gpu_info(ncnn::get_default_gpu_index());
    std::printf("ncnn device: %s (subgroup size %u, subgroup ops 0x%x)\n", gi.device_name(), gi.subgroup_size(),
                gi.support_subgroup_ops());

    const Case cases[] = {
        {37, 100, 32, 0},    // odd n, k = 3·32 + 4
        {37, 100, 32, 1},
        {129, 200, 64, 0},   // k = 3·64 + 8
        {129, 200, 64, 1},
        {65, 333, 128, 0},   // odd k, k = 2·128 + 77
        {65, 333, 128, 1},
        {31, 257, -1, 0},    // per channel, odd k
        {255, 1000, 256, 1}, // larger, k = 3·256 + 232
        {1, 31, 32, 1},      // one row, k < one chunk
    };
    int failed = 0;
    uint32_t seed = 2026;
    for (const Case& c : cases) {
        if (!run_case(dir, c, seed)) failed++;
        seed = seed * 747796405u + 2891336453u;
    }
    ncnn::destroy_gpu_instance();
    std::printf("%s (%d of %zu cases failed)\n", failed ? "Q4LINEAR FAILED" : "Q4LINEAR PASSED", failed,
                sizeof cases / sizeof cases[0]);
    return failed ? 1 : 0;
}
