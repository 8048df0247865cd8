/* import_vectors: imported 4-bit checkpoints from C. q4vk_matrix_dequantize on GGUF
 * (Q4_0, Q4_1, Q4_K), GPTQ (v1 with zero point 0, v2 act-order) and AWQ golden cases from
 * tests/data must equal the reference packages' f32 weights bit for bit. Each case also
 * packs for the kernel export: q4vk_matrix_pack_size takes it unless it has offsets (Q4_1,
 * Q4_K) or a column order (act-order), q4vk_matrix_pack_extended always, with the sizes of
 * the extended export's bindings 0, 1, 2, 5, 6. Every case of the three manifests made a
 * matrix of a CPU context (Q4VK_CONTEXT_CPU: per-group offsets, x gathered for act-order)
 * must compute q4vk_gemv within 1e-5 (relative) of the f64 product of the reference
 * weights, for m = 1, 8 and 33. Then bad input (wrong byte counts, k not a multiple of the
 * block, g_idx out of range or too short, zeros or g_idx given to a format without them,
 * ...) must give the expected status and a message naming the problem, and leave the
 * poisoned output untouched.
 * Usage: import_vectors DATA_DIR (the repository's tests/data). */
#define _POSIX_C_SOURCE 200809L
#include "json.h"
#include "q4vk.h"
#include "util.h"

#define POISON 0x7fa5a5a5u

typedef struct tensors {
    void *weight, *scales, *zeros, *g_idx, *dequant;
    size_t weight_len, scales_len, zeros_len, g_idx_len, dequant_len;
} tensors;

typedef struct gold {
    const char *set, *name;
    q4vk_matrix_source source;
    uint64_t n, k;
    int32_t group_size;
    uint32_t gptq_format;
} gold;

static const gold CASES[] = {
    {"gguf", "q4_0_special", Q4VK_SOURCE_GGUF_Q4_0, 8, 64, 0, 1},
    {"gguf", "q4_1_wide_range", Q4VK_SOURCE_GGUF_Q4_1, 16, 128, 0, 1},
    {"gguf", "q4_k_dequant_random", Q4VK_SOURCE_GGUF_Q4_K, 4, 512, 0, 1},
    {"gptq", "gptq_v1_zero0_asym_g32_64x128", Q4VK_SOURCE_GPTQ, 64, 128, 32, 1},
    {"gptq", "gptq_v2_asym_g32_act_96x384", Q4VK_SOURCE_GPTQ, 96, 384, 32, 2},
    {"awq", "awq_g32_zero_extremes_64x128", Q4VK_SOURCE_AWQ, 64, 128, 32, 1},
};
enum { GGUF_Q4_0, GGUF_Q4_1, GGUF_Q4_K, GPTQ_V1, GPTQ_ACT, AWQ, CASE_COUNT };

static void *load(const char *dir, const gold *g, const char *file, size_t *len) {
    char path[1024];
    if (!strcmp(g->set, "gguf"))
        snprintf(path, sizeof path, "%s/gguf/%s.%s", dir, g->name, file);
    else
        snprintf(path, sizeof path, "%s/%s/%s/%s", dir, g->set, g->name, file);
    return read_file(path, len);
}

/* Loads a case's tensors and, when `dequant` is set, its reference weights. */
static int load_case(const char *dir, const gold *g, tensors *t, int dequant) {
    memset(t, 0, sizeof *t);
    int gguf = !strcmp(g->set, "gguf");
    if (dequant) {
        t->dequant = load(dir, g, "dequant.f32.bin", &t->dequant_len);
        if (!t->dequant) return 0;
    }
    if (gguf) {
        t->weight = load(dir, g, "quant.u8.bin", &t->weight_len);
        return t->weight != NULL;
    }
    t->weight = load(dir, g, "qweight.i32.bin", &t->weight_len);
    t->scales = load(dir, g, "scales.f16.bin", &t->scales_len);
    t->zeros = load(dir, g, "qzeros.i32.bin", &t->zeros_len);
    if (g->source == Q4VK_SOURCE_GPTQ) {
        t->g_idx = load(dir, g, "g_idx.i32.bin", &t->g_idx_len);
        if (!t->g_idx) return 0;
    }
    return t->weight && t->scales && t->zeros;
}

static void free_case(tensors *t) {
    free(t->weight);
    free(t->scales);
    free(t->zeros);
    free(t->g_idx);
    free(t->dequant);
}

static q4vk_matrix_desc desc_of(const gold *g, const tensors *t) {
    q4vk_matrix_desc d;
    q4vk_matrix_desc_default(&d);
    d.source = g->source;
    d.n = g->n;
    d.k = g->k;
    d.group_size = g->group_size ? g->group_size : 128;
    d.gptq_format = g->gptq_format;
    d.weight = t->weight;
    d.weight_bytes = t->weight_len;
    d.scales = t->scales;
    d.scales_bytes = t->scales_len;
    d.zeros = t->zeros;
    d.zeros_bytes = t->zeros_len;
    d.g_idx = t->g_idx;
    d.g_idx_bytes = t->g_idx_len;
    return d;
}

static float *poisoned(size_t count) {
    float *out = malloc(count * sizeof *out);
    for (size_t i = 0; out && i < count; i++) {
        uint32_t bits = POISON;
        memcpy(&out[i], &bits, sizeof bits);
    }
    return out;
}

static int untouched(const float *out, size_t count) {
    for (size_t i = 0; i < count; i++)
        if (f32_bits(out[i]) != POISON) return 0;
    return 1;
}

/* Expects `status` and `needle` in the message for desc `d` (out_bytes as given), and the
   output untouched. */
static int expect_refusal(const char *what, const q4vk_matrix_desc *d, size_t count, size_t out_bytes,
                          q4vk_status want, const char *needle) {
    float *out = poisoned(count);
    if (!out) return 1;
    q4vk_status s = q4vk_matrix_dequantize(d, out, out_bytes);
    char msg[512];
    q4vk_last_error_message(msg, sizeof msg);
    int ok = s == want && strstr(msg, needle) && untouched(out, count);
    printf("%s %-44s %s (%u): \"%s\"\n", ok ? "ok  " : "FAIL", what, q4vk_status_str(s), s, msg);
    if (!ok && s != want) printf("     expected %s\n", q4vk_status_str(want));
    if (!ok && !strstr(msg, needle)) printf("     message lacks \"%s\"\n", needle);
    free(out);
    return !ok;
}

/* The case as a matrix of the CPU context `ctx`: q4vk_gemv for m = 1, 8 and 33 against the f64
   product of the reference weights (the shipped file, or where the case ships only their
   SHA-256, q4vk_matrix_dequantize's, which the Rust tests check against it). Returns the
   number of failures. */
static int cpu_gemv(q4vk_context *ctx, const gold *g, const tensors *t) {
    q4vk_matrix_desc d = desc_of(g, t);
    size_t n = (size_t)g->n, k = (size_t)g->k;
    float *w = malloc(n * k * sizeof *w);
    q4vk_status s = w ? Q4VK_OK : Q4VK_ERROR_OUT_OF_HOST_MEMORY;
    if (w && t->dequant && t->dequant_len == n * k * sizeof *w)
        memcpy(w, t->dequant, t->dequant_len);
    else if (w)
        s = q4vk_matrix_dequantize(&d, w, n * k * sizeof *w);
    q4vk_matrix *mat = NULL;
    if (s == Q4VK_OK) s = q4vk_matrix_create(ctx, &d, &mat);
    static const uint32_t ms[] = {1, 8, 33};
    float *x = malloc(33 * k * sizeof *x), *y = malloc(33 * n * sizeof *y);
    int failures = 0;
    rng r = {0xc0de + n * k};
    for (size_t mi = 0; s == Q4VK_OK && x && y && mi < sizeof ms / sizeof ms[0]; mi++) {
        uint32_t m = ms[mi];
        for (size_t i = 0; i < m * k; i++) x[i] = (float)(rng_uniform(&r) * 2.0 - 1.0);
        for (size_t i = 0; i < m * n; i++) y[i] = NAN;
        s = q4vk_gemv(ctx, mat, x, m * k, y, m * n, m);
        double diff = 0, norm = 0;
        for (size_t xr = 0; s == Q4VK_OK && xr < m; xr++) {
            for (size_t row = 0; row < n; row++) {
                double want = 0;
                for (size_t i = 0; i < k; i++) want += (double)w[row * k + i] * (double)x[xr * k + i];
                double got = y[xr * n + row];
                diff += (got - want) * (got - want);
                norm += want * want;
            }
        }
        double err = sqrt(diff / norm);
        int ok = s == Q4VK_OK && err < 1e-5;
        printf("%s CPU gemv %-36s m = %u: relative error %.3g\n", ok ? "ok  " : "FAIL", g->name, m, err);
        failures += !ok;
    }
    if (s != Q4VK_OK || !x || !y) {
        char msg[512];
        q4vk_last_error_message(msg, sizeof msg);
        printf("FAIL CPU gemv %s: %s: %s\n", g->name, q4vk_status_str(s), msg);
        failures += s != Q4VK_OK || !x || !y;
    }
    q4vk_matrix_destroy(mat);
    free(w);
    free(x);
    free(y);
    return failures;
}

/* cpu_gemv on every case of DIR/SET/cases.json; adds the cases run to *count. Returns the
   number of failures. */
static int cpu_gemv_set(q4vk_context *ctx, const char *dir, const char *set, int *count) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/cases.json", dir, set);
    size_t len = 0;
    char *text = read_file(path, &len);
    json *root = text ? json_parse(text, len) : NULL;
    free(text);
    const json *cases = json_get(root, "cases");
    if (!cases || cases->type != JSON_ARRAY) {
        printf("FAIL %s: not a manifest with a \"cases\" array\n", path);
        json_free(root);
        return 1;
    }
    int failures = 0, gguf = !strcmp(set, "gguf");
    for (const json *c = cases->child; c; c = c->next) {
        const json *name = json_get(c, "name");
        const json *ref = json_get(json_get(json_get(c, "files"), gguf ? "dequantized" : "dequant"), "file");
        gold g = {set, name && name->type == JSON_STRING ? name->str : "?", 0, 0, 0, 0, 1};
        if (gguf) {
            const json *qtype = json_get(c, "qtype"), *shape = json_get(c, "shape");
            const char *q = qtype && qtype->type == JSON_STRING ? qtype->str : "";
            g.source = !strcmp(q, "Q4_0") ? Q4VK_SOURCE_GGUF_Q4_0
                       : !strcmp(q, "Q4_1") ? Q4VK_SOURCE_GGUF_Q4_1
                                            : Q4VK_SOURCE_GGUF_Q4_K;
            if (shape && shape->child && shape->child->next) {
                g.n = (uint64_t)shape->child->num;
                g.k = (uint64_t)shape->child->next->num;
            }
        } else {
            const json *n = json_get(c, "n"), *k = json_get(c, "k"), *group = json_get(c, "group_size"),
                       *version = json_get(c, "version");
            g.source = !strcmp(set, "gptq") ? Q4VK_SOURCE_GPTQ : Q4VK_SOURCE_AWQ;
            g.n = n ? (uint64_t)n->num : 0;
            g.k = k ? (uint64_t)k->num : 0;
            g.group_size = group ? (int32_t)group->num : 0;
            g.gptq_format = version && version->type == JSON_STRING && !strcmp(version->str, "gptq_v2") ? 2 : 1;
        }
        tensors t;
        if (!load_case(dir, &g, &t, ref && ref->type == JSON_STRING)) {
            printf("FAIL CPU gemv %s: cannot load the case\n", g.name);
            failures++;
        } else {
            failures += cpu_gemv(ctx, &g, &t);
        }
        free_case(&t);
        ++*count;
    }
    json_free(root);
    return failures;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DATA_DIR (tests/data of the repository)\n", argv[0]);
        return 2;
    }
    int failures = 0;
    tensors t[CASE_COUNT];
    for (int c = 0; c < CASE_COUNT; c++) {
        if (!load_case(argv[1], &CASES[c], &t[c], 1)) {
            printf("FAIL %s: cannot load the case\n", CASES[c].name);
            return 1;
        }
    }

    /* Bit-exact dequantization. */
    for (int c = 0; c < CASE_COUNT; c++) {
        const gold *g = &CASES[c];
        size_t count = (size_t)(g->n * g->k);
        q4vk_matrix_desc d = desc_of(g, &t[c]);
        float *out = poisoned(count);
        q4vk_status s = out ? q4vk_matrix_dequantize(&d, out, count * sizeof *out) : Q4VK_ERROR_OUT_OF_HOST_MEMORY;
        size_t differ = 0;
        for (size_t i = 0; s == Q4VK_OK && t[c].dequant_len == 4 * count && i < count; i++) {
            uint32_t want;
            memcpy(&want, (const char *)t[c].dequant + 4 * i, sizeof want);
            differ += f32_bits(out[i]) != want;
        }
        int ok = s == Q4VK_OK && t[c].dequant_len == 4 * count && differ == 0;
        printf("%s dequantize %-34s %zu weights, %zu differ from the reference\n", ok ? "ok  " : "FAIL",
               g->name, count, differ);
        if (s != Q4VK_OK) {
            char msg[512];
            q4vk_last_error_message(msg, sizeof msg);
            printf("     %s: %s\n", q4vk_status_str(s), msg);
        }
        failures += !ok;
        free(out);
    }

    /* The kernel export's device layout: the v0 pack for sources without offsets or column
       order, the extended pack for every one, sized as the extended export's bindings. */
    for (int c = 0; c < CASE_COUNT; c++) {
        const gold *g = &CASES[c];
        q4vk_matrix_desc pd = desc_of(g, &t[c]);
        const int extras = c == GGUF_Q4_1 || c == GGUF_Q4_K || c == GPTQ_ACT;
        size_t v0[3] = {7, 7, 7}, ext[5] = {0, 0, 0, 0, 0};
        q4vk_status s0 = q4vk_matrix_pack_size(&pd, &v0[0], &v0[1], &v0[2]);
        q4vk_status s1 = q4vk_matrix_pack_extended_size(&pd, &ext[0], &ext[1], &ext[2], &ext[3], &ext[4]);
        int ok = s1 == Q4VK_OK && (extras ? s0 == Q4VK_ERROR_UNSUPPORTED && v0[0] == 7
                                          : s0 == Q4VK_OK && !memcmp(v0, ext, sizeof v0)) &&
                 (ext[3] > 0) == (c == GGUF_Q4_1 || c == GGUF_Q4_K) && (ext[4] > 0) == (c == GPTQ_ACT);
        q4vk_kernel_export_desc e;
        q4vk_kernel_export_desc_default(&e);
        e.export_flags = Q4VK_KERNEL_EXPORT_EXTENDED;
        q4vk_kernel_info info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        ok = ok && q4vk_kernel_export(NULL, &pd, &e, &info, NULL, 0) == Q4VK_OK && info.binding_count == 7;
        const int roles[5] = {Q4VK_BINDING_WEIGHTS, Q4VK_BINDING_SCALES, Q4VK_BINDING_ZEROS, Q4VK_BINDING_OFFSETS,
                              Q4VK_BINDING_K_ORDER};
        void *buf[5] = {NULL, NULL, NULL, NULL, NULL};
        for (int i = 0; ok && i < 5; i++) {
            ok = info.bindings[roles[i]].bytes == ext[i];
            if (ext[i] && !(buf[i] = malloc(ext[i]))) ok = 0;
        }
        ok = ok && q4vk_matrix_pack_extended(&pd, buf[0], ext[0], buf[1], ext[1], buf[2], ext[2], buf[3], ext[3],
                                             buf[4], ext[4]) == Q4VK_OK;
        printf("%s pack (v0 %s, extended %zu/%zu/%zu/%zu/%zu bytes) %s\n", ok ? "ok  " : "FAIL",
               s0 == Q4VK_OK ? "taken" : "refused", ext[0], ext[1], ext[2], ext[3], ext[4], g->name);
        failures += !ok;
        for (int i = 0; i < 5; i++) free(buf[i]);
    }

    /* GEMV on a CPU context (no Vulkan needed). */
    q4vk_context_desc cd;
    q4vk_context_desc_default(&cd);
    cd.flags = Q4VK_CONTEXT_CPU;
    q4vk_context *ctx = NULL;
    if (q4vk_context_create(&cd, &ctx) != Q4VK_OK) {
        printf("FAIL: q4vk_context_create (CPU)\n");
        return 1;
    }
    int gemv_cases = 0;
    failures += cpu_gemv_set(ctx, argv[1], "gguf", &gemv_cases);
    failures += cpu_gemv_set(ctx, argv[1], "gptq", &gemv_cases);
    failures += cpu_gemv_set(ctx, argv[1], "awq", &gemv_cases);
    q4vk_context_destroy(ctx);
    /* 5 Q4_0 + 5 Q4_1 + 1 Q4_K + 12 GPTQ (3 act-order) + 7 AWQ. */
    if (gemv_cases != 30) {
        printf("FAIL CPU gemv: %d cases in the manifests, 30 expected\n", gemv_cases);
        failures++;
    }

    /* Bad input. */
    q4vk_matrix_desc d;
    size_t count;
#define CASE_DESC(c) (d = desc_of(&CASES[c], &t[c]), count = (size_t)(CASES[c].n * CASES[c].k))
    CASE_DESC(GGUF_Q4_0);
    d.weight_bytes -= 1;
    failures += expect_refusal("GGUF tensor one byte short", &d, count, 4 * count, Q4VK_ERROR_BUFFER_TOO_SMALL,
                               "desc->weight_bytes");
    CASE_DESC(GGUF_Q4_0);
    d.k = 48;
    failures += expect_refusal("Q4_0 with k not a multiple of 32", &d, count, 4 * count,
                               Q4VK_ERROR_INVALID_ARGUMENT, "multiple of 32");
    CASE_DESC(GGUF_Q4_K);
    d.k = 320;
    failures += expect_refusal("Q4_K with k not a multiple of 256", &d, count, 4 * count,
                               Q4VK_ERROR_INVALID_ARGUMENT, "multiple of 256");
    CASE_DESC(GGUF_Q4_1);
    d.zeros = t[AWQ].zeros;
    d.zeros_bytes = 4;
    failures += expect_refusal("zeros given to GGUF Q4_1", &d, count, 4 * count, Q4VK_ERROR_INVALID_ARGUMENT,
                               "desc->zeros must be NULL");
    CASE_DESC(AWQ);
    d.g_idx = t[GPTQ_V1].g_idx;
    d.g_idx_bytes = t[GPTQ_V1].g_idx_len;
    failures += expect_refusal("g_idx given to AWQ", &d, count, 4 * count, Q4VK_ERROR_INVALID_ARGUMENT,
                               "desc->g_idx must be NULL");
    CASE_DESC(GPTQ_ACT);
    d.g_idx_bytes -= 4;
    failures += expect_refusal("GPTQ g_idx one entry short", &d, count, 4 * count, Q4VK_ERROR_BUFFER_TOO_SMALL,
                               "desc->g_idx_bytes");
    {
        int32_t *bad = malloc(t[GPTQ_ACT].g_idx_len);
        if (!bad) return 1;
        memcpy(bad, t[GPTQ_ACT].g_idx, t[GPTQ_ACT].g_idx_len);
        bad[7] = 12; /* 384 / 32 = 12 groups: 0..11 */
        CASE_DESC(GPTQ_ACT);
        d.g_idx = bad;
        failures += expect_refusal("GPTQ g_idx entry out of range", &d, count, 4 * count,
                                   Q4VK_ERROR_INVALID_ARGUMENT, "g_idx[7] is 12");
        memcpy(bad, t[GPTQ_ACT].g_idx, t[GPTQ_ACT].g_idx_len);
        bad[0] = (bad[0] + 1) % 12; /* one input moved: two groups no longer hold 32 each */
        failures += expect_refusal("GPTQ g_idx with unequal groups", &d, count, 4 * count,
                                   Q4VK_ERROR_INVALID_ARGUMENT, "inputs to group");
        free(bad);
    }
    CASE_DESC(GPTQ_V1);
    d.zeros_bytes -= 1;
    failures += expect_refusal("GPTQ qzeros one byte short", &d, count, 4 * count, Q4VK_ERROR_BUFFER_TOO_SMALL,
                               "desc->zeros_bytes");
    CASE_DESC(GPTQ_V1);
    d.gptq_format = 3;
    failures += expect_refusal("GPTQ gptq_format 3", &d, count, 4 * count, Q4VK_ERROR_INVALID_ARGUMENT,
                               "gptq_format");
    CASE_DESC(AWQ);
    d.n = 60;
    failures += expect_refusal("AWQ with n not a multiple of 8", &d, count, 4 * count,
                               Q4VK_ERROR_INVALID_ARGUMENT, "multiple of 8");
    CASE_DESC(AWQ);
    failures += expect_refusal("output one float short", &d, count, 4 * count - 4, Q4VK_ERROR_BUFFER_TOO_SMALL,
                               "out_bytes");
    CASE_DESC(AWQ);
    d.struct_size = 8;
    failures += expect_refusal("struct_size smaller than v0", &d, count, 4 * count, Q4VK_ERROR_INVALID_ARGUMENT,
                               "struct_size");
#undef CASE_DESC

    for (int c = 0; c < CASE_COUNT; c++) free_case(&t[c]);
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "ok", failures);
    return failures ? 1 : 0;
}
