// Q4Linear (q4linear.h) inside real ncnn, on Vulkan, against ncnn's own InnerProduct.
//
// For each case (n, k, group size, zero points) the program writes a .param/.bin holding
//
//   Input data -> Split -> Q4Linear  (portable kernel, fp32 weights quantized at load)
//                       -> Q4Linear  (subgroup kernel, same weights; portable again when
//                                     ncnn's GpuInfo lacks subgroup arithmetic)
//                       -> Q4Linear  (pre-quantized q4 weights from q4vk_q4_quantize)
//                       -> InnerProduct (fp32, DEQUANTIZED weights s·(u − z))
//
// (three of the cases with a bias in every layer: Q4Linear's 9=1, InnerProduct's bias_term)
//
// and, for imported checkpoints (golden cases of tests/data: GGUF Q4_0, GPTQ with and
// without act-order, AWQ: the extended kernel, column order; GGUF Q4_1, Q4_K and gguf-py's
// Q5_0, Q8_0, Q5_K, Q6_K, IQ4_XS, MXFP4 vectors: the kernels on blocks),
//
//   Input data -> Split -> Q4Linear  (portable kernel, the checkpoint's tensors as stored)
//                       -> Q4Linear  (subgroup kernel, same tensors)
//                       -> InnerProduct (fp32, no bias, q4vk_matrix_dequantize's weights)
//
// registers Q4Linear with Net::register_custom_layer, loads the files with
// opt.use_vulkan_compute = true (fp32 storage), feeds x with m = 1..8 rows (the exported
// GEMV, one pipeline per m) and m = 9, 64, 200 (the exported GEMM, one pipeline for all)
// (2-D blob w = k, h = m; and m = 1 also as a 1-D blob) and checks
// ‖y_q4 − y_ip‖ / ‖y_ip‖ < 1e-5 for every Q4Linear branch. Q4Linear has no CPU forward, so
// a result proves the Vulkan path ran.
//
// Some cases run again with opt.use_fp16_storage = true (ncnn's default where the device
// has 16-bit storage): the blobs are fp16, x is rounded to fp16 before it is fed, and every
// Q4Linear branch is checked against the f64 product of the same weights (and bias) with
// that x: ‖y − ref‖ / ‖ref‖ < 1e-3 (y rounded to fp16: 2^-11 per element). ncnn's
// InnerProduct is not the reference there (it rounds its weights to fp16).
//
//   q4linear_test WORKDIR DATADIR   exit 0 = all cases pass (DATADIR: the repository's
//                                   tests/data)
#include "q4linear.h"

#include "mat.h"
#include "net.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

const double TOL = 1e-5;
// fp16 blobs: y rounded to fp16 (half an ulp is 2^-11 of each element).
const double TOL_FP16 = 1e-3;
// Heights fed to every net: 0 = a 1-D blob (one row); 1..8 run the GEMV, 9, 64, 200 the GEMM.
const int MS[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 64, 200};

struct Case {
    int n, k, group_size, zero_points, bias;
};

// What the Q4Linear branches compute: y = x · wᵀ (+ bias), w [n][k] the dequantized weights.
struct Reference {
    std::vector<float> w;
    std::vector<float> bias;  // empty without a bias
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

// Writes the model files; returns the dequantized weights [n][k] and the bias through `ref`.
bool write_model(const std::string& dir, const Case& c, uint32_t seed, Reference& ref) {
    std::vector<float>& wdq = ref.w;
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
    std::vector<float> bias((size_t)n);
    for (float& v : bias) v = frand(seed);
    if (c.bias) ref.bias = bias;
    std::fprintf(fp, "7767517\n6 9\n");
    std::fprintf(fp, "Input data 0 1 data\n");
    std::fprintf(fp, "Split split 1 4 data d0 d1 d2 d3\n");
    const char* fmt = "Q4Linear %s 1 1 %s %s 0=%d 1=%d 2=%d 3=%d 4=%d 5=%d 9=%d\n";
    std::fprintf(fp, fmt, "q4_portable", "d0", "y_portable", n, k, c.group_size, c.zero_points, 0, 0, c.bias);
    std::fprintf(fp, fmt, "q4_subgroup", "d1", "y_subgroup", n, k, c.group_size, c.zero_points, 0, 2, c.bias);
    std::fprintf(fp, fmt, "q4_prequant", "d2", "y_prequant", n, k, c.group_size, c.zero_points, 1, 2, c.bias);
    std::fprintf(fp, "InnerProduct fc 1 1 d3 y_ref 0=%d 1=%d 2=%d\n", n, c.bias, n * k);
    std::fclose(fp);

    fp = std::fopen((dir + "/q4.bin").c_str(), "wb");
    if (!fp) return std::perror("q4.bin"), false;
    const uint32_t tag = 0;  // ncnn's blob tag: 0 = raw fp32 follows
    // Each layer's bias, when it has one, follows its weights: raw fp32, untagged.
    const auto put_bias = [&] {
        if (c.bias) std::fwrite(bias.data(), 4, bias.size(), fp);
    };
    for (int rep = 0; rep < 2; rep++) {  // q4_portable, q4_subgroup: fp32 weights [n][k]
        std::fwrite(&tag, 4, 1, fp);
        std::fwrite(w.data(), 4, w.size(), fp);
        put_bias();
    }
    put_words(fp, q.data(), qb);  // q4_prequant: untagged raw words
    put_words(fp, s.data(), sb);
    if (c.zero_points) put_words(fp, z.data(), zb);
    put_bias();
    std::fwrite(&tag, 4, 1, fp);  // fc: dequantized weights, same [n][k] layout
    std::fwrite(wdq.data(), 4, wdq.size(), fp);
    put_bias();
    std::fclose(fp);
    return true;
}

// ‖y − x·wᵀ(+ bias)‖ / ‖x·wᵀ(+ bias)‖ in f64, or infinity where y has the wrong shape.
double rel_err_f64(const ncnn::Mat& y, const ncnn::Mat& x, int rows, int n, int k, const Reference& ref) {
    if (y.w != n || (rows > 1 && y.h != rows) || y.elemsize != 4u || y.elempack != 1) return INFINITY;
    const float* xv = x;
    const float* yv = y;
    double dd = 0, rr = 0;
    for (int t = 0; t < rows; t++)
        for (int r = 0; r < n; r++) {
            double want = ref.bias.empty() ? 0.0 : ref.bias[r];
            for (int i = 0; i < k; i++) want += (double)xv[(size_t)t * k + i] * ref.w[(size_t)r * k + i];
            const double d = yv[(size_t)t * n + r] - want;
            dd += d * d;
            rr += want * want;
        }
    return rr > 0 ? std::sqrt(dd / rr) : std::sqrt(dd);
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

// Loads WORKDIR/q4.param + q4.bin, feeds x with every m of MS (0: a 1-D blob) and compares
// every branch with y_ref (ncnn's InnerProduct), or with fp16 storage (`fp16`) with the
// f64 product of `ref`; prints one line headed `label`.
bool check_net(const std::string& dir, int n, int k, const std::vector<const char*>& branches, uint32_t seed,
               const std::string& label, const Reference& ref_w, bool fp16) {
    ncnn::Net net;
    net.opt.use_vulkan_compute = true;  // before load_param
    fp32_only(net.opt);
    net.opt.use_fp16_storage = fp16;
    net.opt.num_threads = 1;
    if (net.register_custom_layer("Q4Linear", Q4Linear_layer_creator) != 0) return false;
    if (net.load_param((dir + "/q4.param").c_str()) != 0) return std::puts("load_param failed"), false;
    if (net.load_model((dir + "/q4.bin").c_str()) != 0) return std::puts("load_model failed"), false;
    if (!net.opt.use_vulkan_compute) return std::puts("ncnn dropped Vulkan (no device?)"), false;
    if (fp16 && !net.opt.use_fp16_storage)
        return std::puts("ncnn turned fp16 storage off: the device lacks 16-bit storage"), false;

    const char* variant_name[2] = {"portable", "subgroup"};
    std::string variants;
    for (const ncnn::Layer* l : net.layers()) {
        const Q4Linear* q = dynamic_cast<const Q4Linear*>(l);
        if (!q) continue;
        variants += std::string(variants.empty() ? "" : "/") + variant_name[q->exported_variant() & 1];
        if (q->fp16_blobs() != fp16) return std::puts("a Q4Linear layer runs another storage type"), false;
    }
    const double tol = fp16 ? TOL_FP16 : TOL;
    std::vector<double> worst(branches.size(), 0.0), worst_gemm(branches.size(), 0.0);  // m <= 8, m > 8
    bool ok = true;
    for (int m : MS) {
        ncnn::Mat x = m == 0 ? ncnn::Mat(k) : ncnn::Mat(k, m);
        uint32_t xs = seed ^ (0x9e3779b9u * (uint32_t)(m + 1));
        for (size_t i = 0; i < x.total(); i++) x[i] = frand(xs);
        // fp16 storage: x as it will be stored (the cast on upload is then exact).
        if (fp16)
            for (size_t i = 0; i < x.total(); i++) x[i] = ncnn::float16_to_float32(ncnn::float32_to_float16(x[i]));

        ncnn::Extractor ex = net.create_extractor();
        ex.input("data", x);
        ncnn::Mat ref;
        if (ex.extract("y_ref", ref) != 0) return std::puts("extract y_ref failed"), false;
        const int rows = m == 0 ? 1 : m;
        if (ref.w != n || ref.h != rows || ref.dims != (m == 0 ? 1 : 2)) {
            std::printf("InnerProduct output dims %d w %d h %d, expected w %d h %d\n", ref.dims, ref.w, ref.h, n,
                        rows);
            return false;
        }
        for (size_t b = 0; b < branches.size(); b++) {
            ncnn::Mat y;
            double e = INFINITY;
            if (ex.extract(branches[b], y) == 0) e = fp16 ? rel_err_f64(y, x, rows, n, k, ref_w) : rel_err(y, ref);
            if (!(e < tol)) {
                std::printf("   %s m=%d%s: rel err %.3g\n", branches[b], rows, m == 0 ? " (1-D)" : "", e);
                ok = false;
            }
            double& w = rows > Q4Linear::MAX_M ? worst_gemm[b] : worst[b];
            w = std::fmax(w, e);
        }
    }
    std::printf("[%s] %s%s m=1..8,9,64,200 (%s): max ||d||/||ref|| GEMV/GEMM", ok ? " OK " : "FAIL",
                label.c_str(), fp16 ? " fp16" : "", variants.c_str());
    for (size_t b = 0; b < branches.size(); b++)
        std::printf("  %s %.2e/%.2e", branches[b] + 2, worst[b], worst_gemm[b]);
    std::printf("\n");
    return ok;
}

bool run_case(const std::string& dir, const Case& c, uint32_t seed, bool fp16) {
    Reference ref;
    if (!write_model(dir, c, seed, ref)) return false;
    char label[96];
    std::snprintf(label, sizeof label, "n=%-4d k=%-4d group=%-4d zero_points=%d%s", c.n, c.k, c.group_size,
                  c.zero_points, c.bias ? " bias" : "");
    return check_net(dir, c.n, c.k, {"y_portable", "y_subgroup", "y_prequant"}, seed, label, ref, fp16);
}

// An imported golden case of tests/data: the tensors q4vk_matrix_desc takes for `source`.
struct ImportedCase {
    const char* set;  // gguf, gptq, awq
    const char* name;
    q4vk_matrix_source source;
    int n, k, group_size, gptq_format;
};

bool read_file(const std::string& path, std::vector<uint8_t>& out) {
    FILE* fp = std::fopen(path.c_str(), "rb");
    if (!fp) return std::perror(path.c_str()), false;
    out.clear();
    uint8_t buf[65536];
    size_t got;
    while ((got = std::fread(buf, 1, sizeof buf, fp)) > 0) out.insert(out.end(), buf, buf + got);
    std::fclose(fp);
    return true;
}

// Writes the model of an imported case: two Q4Linear (format 2, portable and subgroup)
// and InnerProduct on q4vk_matrix_dequantize's weights, which it returns through `ref`.
bool write_imported_model(const std::string& dir, const std::string& data, const ImportedCase& c,
                          Reference& ref) {
    // weight, scales, zeros, g_idx
    std::vector<uint8_t> t[4];
    const std::string base = data + "/" + c.set + "/" + c.name;
    if (c.source != Q4VK_SOURCE_GPTQ && c.source != Q4VK_SOURCE_AWQ) {  // GGUF: the blocks
        if (!read_file(base + ".quant.u8.bin", t[0])) return false;
    } else {
        const char* files[4] = {"qweight.i32.bin", "scales.f16.bin", "qzeros.i32.bin", "g_idx.i32.bin"};
        for (int i = 0; i < (c.source == Q4VK_SOURCE_GPTQ ? 4 : 3); i++)
            if (!read_file(base + "/" + files[i], t[i])) return false;
    }
    q4vk_matrix_desc d;
    q4vk_matrix_desc_default(&d);
    d.source = c.source;
    d.n = (uint64_t)c.n;
    d.k = (uint64_t)c.k;
    d.group_size = c.group_size;
    d.gptq_format = (uint32_t)c.gptq_format;
    const void** ptrs[4] = {&d.weight, &d.scales, &d.zeros, &d.g_idx};
    size_t* sizes[4] = {&d.weight_bytes, &d.scales_bytes, &d.zeros_bytes, &d.g_idx_bytes};
    for (int i = 0; i < 4; i++) {
        *ptrs[i] = t[i].empty() ? nullptr : t[i].data();
        *sizes[i] = t[i].size();
    }
    std::vector<float>& wdq = ref.w;
    wdq.assign((size_t)c.n * c.k, 0.f);
    if (q4vk_matrix_dequantize(&d, wdq.data(), wdq.size() * sizeof(float)) != Q4VK_OK)
        return q4vk_fail("q4vk_matrix_dequantize"), false;

    FILE* fp = std::fopen((dir + "/q4.param").c_str(), "wb");
    if (!fp) return std::perror("q4.param"), false;
    std::fprintf(fp, "7767517\n5 7\n");
    std::fprintf(fp, "Input data 0 1 data\n");
    std::fprintf(fp, "Split split 1 3 data d0 d1 d2\n");
    const char* fmt = "Q4Linear %s 1 1 %s %s 0=%d 1=%d 2=%d 4=2 5=%d 7=%d 8=%d 10=%zu 11=%zu 12=%zu 13=%zu\n";
    for (int v = 0; v < 2; v++)
        std::fprintf(fp, fmt, v ? "q4_subgroup" : "q4_portable", v ? "d1" : "d0", v ? "y_subgroup" : "y_portable",
                     c.n, c.k, c.group_size, v ? 2 : 0, (int)c.source, c.gptq_format, t[0].size(), t[1].size(),
                     t[2].size(), t[3].size());
    std::fprintf(fp, "InnerProduct fc 1 1 d2 y_ref 0=%d 1=0 2=%d\n", c.n, c.n * c.k);
    std::fclose(fp);

    fp = std::fopen((dir + "/q4.bin").c_str(), "wb");
    if (!fp) return std::perror("q4.bin"), false;
    for (int v = 0; v < 2; v++)  // untagged raw words, in the order weight, scales, zeros, g_idx
        for (const std::vector<uint8_t>& blob : t)
            if (!blob.empty()) put_words(fp, blob.data(), blob.size());
    const uint32_t tag = 0;  // fc: fp32 dequantized weights [n][k]
    std::fwrite(&tag, 4, 1, fp);
    std::fwrite(wdq.data(), 4, wdq.size(), fp);
    std::fclose(fp);
    return true;
}

bool run_imported(const std::string& dir, const std::string& data, const ImportedCase& c, uint32_t seed,
                  bool fp16) {
    Reference ref;
    if (!write_imported_model(dir, data, c, ref)) return false;
    char label[96];
    std::snprintf(label, sizeof label, "%-31s n=%-4d k=%-4d", c.name, c.n, c.k);
    return check_net(dir, c.n, c.k, {"y_portable", "y_subgroup"}, seed, label, ref, fp16);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::puts("usage: q4linear_test WORKDIR DATADIR (the repository's tests/data)");
        return 2;
    }
    const std::string dir = argv[1], data = argv[2];
    if (ncnn::get_gpu_count() <= 0) {
        std::puts("FAIL: ncnn sees no Vulkan device");
        return 1;
    }
    const ncnn::GpuInfo& gi = ncnn::get_gpu_info(ncnn::get_default_gpu_index());
    std::printf("ncnn device: %s (subgroup size %u, subgroup ops 0x%x)\n", gi.device_name(), gi.subgroup_size(),
                gi.support_subgroup_ops());

    const Case cases[] = {
        {37, 100, 32, 0, 0},    // odd n, k = 3·32 + 4
        {37, 100, 32, 1, 1},    // with a bias (the extended kernel, binding 7)
        {129, 200, 64, 0, 0},   // k = 3·64 + 8
        {129, 200, 64, 1, 0},
        {65, 333, 128, 0, 1},   // odd k, k = 2·128 + 77
        {65, 333, 128, 1, 0},
        {31, 257, -1, 0, 0},    // per channel, odd k
        {255, 1000, 256, 1, 1}, // larger, k = 3·256 + 232
        {1, 31, 32, 1, 0},      // one row, k < one chunk
    };
    int failed = 0;
    size_t runs = 0;
    uint32_t seed = 2026;
    // fp16 storage on the odd n / bias cases and the largest one.
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (bool fp16 : {false, true}) {
            if (fp16 && i != 1 && i != 4 && i != 7) continue;
            if (!run_case(dir, cases[i], seed, fp16)) failed++;
            runs++;
        }
        seed = seed * 747796405u + 2891336453u;
    }
    // Imported checkpoints: the extended kernel, or the kernels on blocks.
    const ImportedCase imported[] = {
        {"gguf", "q4_0_mid_llm", Q4VK_SOURCE_GGUF_Q4_0, 32, 256, 32, 1},
        {"gguf", "q4_1_mid_llm", Q4VK_SOURCE_GGUF_Q4_1, 32, 256, 32, 1},         // offsets
        {"gguf", "q4_k_dequant_random", Q4VK_SOURCE_GGUF_Q4_K, 4, 512, 32, 1},   // offsets, f32 scales
        {"gptq", "gptq_v1_asym_g128_96x384", Q4VK_SOURCE_GPTQ, 96, 384, 128, 1},
        {"gptq", "gptq_v1_asym_g32_act_96x384", Q4VK_SOURCE_GPTQ, 96, 384, 32, 1},       // act-order
        {"gptq", "gptq_v2_asym_g32_act_96x384", Q4VK_SOURCE_GPTQ, 96, 384, 32, 2},       // act-order, v2
        {"gptq", "gptq_v1_asym_g128_act_512x2048", Q4VK_SOURCE_GPTQ, 512, 2048, 128, 1},  // act-order
        {"awq", "awq_g32_96x384", Q4VK_SOURCE_AWQ, 96, 384, 32, 1},
        // GGUF types in their native blocks (gguf-py's vectors): the kernels on blocks.
        {"gguf-more", "q5_0_p_33x512_q", Q4VK_SOURCE_GGUF_Q5_0, 33, 512, 32, 1},   // fifth bits
        {"gguf-more", "q8_0_p_33x512_q", Q4VK_SOURCE_GGUF_Q8_0, 33, 512, 32, 1},
        {"gguf-more", "q5_k_p_33x512_dq", Q4VK_SOURCE_GGUF_Q5_K, 33, 512, 32, 1},
        {"gguf-more", "q6_k_p_33x512_dq", Q4VK_SOURCE_GGUF_Q6_K, 33, 512, 32, 1},
        {"gguf-more", "iq4_xs_p_33x512_dq", Q4VK_SOURCE_GGUF_IQ4_XS, 33, 512, 32, 1},
        {"gguf-more", "mxfp4_p_33x512_q", Q4VK_SOURCE_GGUF_MXFP4, 33, 512, 32, 1},
    };
    // fp16 storage on Q4_K (blocks), act-order GPTQ (column order) and Q6_K (blocks).
    for (size_t i = 0; i < sizeof imported / sizeof imported[0]; i++) {
        for (bool fp16 : {false, true}) {
            if (fp16 && i != 2 && i != 4 && i != 11) continue;
            if (!run_imported(dir, data, imported[i], seed, fp16)) failed++;
            runs++;
        }
        seed = seed * 747796405u + 2891336453u;
    }
    ncnn::destroy_gpu_instance();
    std::printf("%s (%d of %zu runs failed)\n", failed ? "Q4LINEAR FAILED" : "Q4LINEAR PASSED", failed, runs);
    return failed ? 1 : 0;
}
