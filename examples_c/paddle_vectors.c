/* paddle_vectors: checks every case of the PaddlePaddle golden vectors byte for byte
 * through the C API, with threads = 1 and threads = 0 (all cores):
 *   - q4vk_weight_quantize_size matches the sizes of Paddle's qweight and scale;
 *   - q4vk_weight_quantize(weight) == Paddle's qweight and scale;
 *   - q4vk_weight_unpermute(Paddle's qweight) == the plain codes qint (packed as the C API's
 *     plain layout), and q4vk_weight_permute(qint) == Paddle's qweight;
 *   - q4vk_weight_dequantize(Paddle's qweight, scale), widened to f32, has the bits of
 *     dequant_ref.
 * Usage: paddle_vectors VECTORS_DIR   (the directory holding cases.json) */
#define _POSIX_C_SOURCE 200809L
#include "json.h"
#include "q4vk.h"
#include "util.h"

typedef struct blob { void *data; size_t len; } blob;

static int load(const char *dir, const json *c, const char *name, blob *out) {
    const json *f = json_get(json_get(c, "files"), name);
    const json *path = json_get(f, "path"), *bytes = json_get(f, "bytes");
    if (!path || path->type != JSON_STRING || !bytes || bytes->type != JSON_NUMBER) {
        printf("    cases.json: files.%s lacks path or bytes\n", name);
        return 0;
    }
    char full[4096];
    snprintf(full, sizeof full, "%s/%s", dir, path->str);
    out->data = read_file(full, &out->len);
    if (!out->data) return 0;
    if (out->len != (size_t)bytes->num) {
        printf("    %s: %zu bytes, cases.json says %.0f\n", full, out->len, bytes->num);
        return 0;
    }
    return 1;
}

/* Reports the first differing byte; returns 1 when equal. */
static int same(const char *what, const void *got, const void *want, size_t len, uint32_t th) {
    if (!memcmp(got, want, len)) return 1;
    const uint8_t *g = got, *w = want;
    size_t i = 0, diffs = 0;
    while (g[i] == w[i]) i++;
    for (size_t j = 0; j < len; j++) diffs += g[j] != w[j];
    printf("    threads=%u %s: %zu of %zu bytes differ; first at byte %zu: got 0x%02x, "
           "expected 0x%02x\n", th, what, diffs, len, i, g[i], w[i]);
    return 0;
}

static int status_ok(q4vk_status st, const char *fn, uint32_t th) {
    if (st == Q4VK_OK) return 1;
    char msg[512];
    q4vk_last_error_message(msg, sizeof msg);
    printf("    threads=%u %s: %s: %s\n", th, fn, q4vk_status_str(st), msg);
    return 0;
}

/* One case; returns 1 when every check passed. */
static int run_case(const char *dir, const json *c) {
    const json *jn = json_get(c, "name"), *jk = json_get(c, "K"), *jN = json_get(c, "N"),
               *jd = json_get(c, "dtype"), *ja = json_get(c, "algo"),
               *jarch = json_get(c, "arch"), *jg = json_get(c, "group_size");
    const char *name = jn && jn->type == JSON_STRING ? jn->str : "?";
    if (!jk || !jN || !jd || !ja || !jarch || !jg || jd->type != JSON_STRING ||
        ja->type != JSON_STRING) {
        printf("FAIL %s: cases.json lacks K, N, dtype, algo, arch or group_size\n", name);
        return 0;
    }
    q4vk_weight_quantize_desc d;
    q4vk_weight_quantize_desc_default(&d);
    d.k = (uint64_t)jk->num;
    d.n = (uint64_t)jN->num;
    d.arch = (int32_t)jarch->num;
    d.group_size = (int32_t)jg->num;
    int bf16 = !strcmp(jd->str, "bfloat16");
    if (!bf16 && strcmp(jd->str, "float16")) {
        printf("FAIL %s: unknown dtype %s\n", name, jd->str);
        return 0;
    }
    d.dtype = bf16 ? Q4VK_DTYPE_BF16 : Q4VK_DTYPE_F16;
    int int4 = !strcmp(ja->str, "weight_only_int4");
    if (!int4 && strcmp(ja->str, "weight_only_int8")) {
        printf("FAIL %s: unknown algo %s\n", name, ja->str);
        return 0;
    }
    d.algo = int4 ? Q4VK_ALGO_WEIGHT_ONLY_INT4 : Q4VK_ALGO_WEIGHT_ONLY_INT8;

    int ok = 1;
    blob weight = {0}, qweight = {0}, scale = {0}, qint = {0}, deq_ref = {0};
    void *q = NULL, *s = NULL, *packed = NULL, *plain = NULL, *deq = NULL;
    uint32_t *deq_bits = NULL;
    size_t count = (size_t)(d.k * d.n);
    if (!load(dir, c, "weight", &weight) || !load(dir, c, "qweight", &qweight) ||
        !load(dir, c, "scale", &scale) || !load(dir, c, "qint", &qint) ||
        !load(dir, c, "dequant_ref", &deq_ref) || qint.len != count ||
        deq_ref.len != count * 4) {
        ok = 0;
        goto done;
    }

    /* The C API's plain layout: int8 one code per byte; int4 two per byte along n, even n
       in the low nibble, two's-complement nibbles. qint holds one code per byte. */
    size_t plain_len = int4 ? count / 2 : count;
    packed = malloc(plain_len);
    q = malloc(qweight.len);
    s = malloc(scale.len);
    plain = malloc(plain_len);
    deq = malloc(weight.len);
    deq_bits = malloc(count * 4);
    if (!packed || !q || !s || !plain || !deq || !deq_bits) {
        printf("    out of memory\n");
        ok = 0;
        goto done;
    }
    const int8_t *codes = qint.data;
    for (size_t i = 0; i < plain_len; i++)
        ((uint8_t *)packed)[i] =
            int4 ? (uint8_t)((codes[2 * i] & 0xf) | ((codes[2 * i + 1] & 0xf) << 4))
                 : (uint8_t)codes[i];

    const uint32_t thread_counts[2] = {1, 0};
    for (int t = 0; t < 2 && ok; t++) {
        d.threads = thread_counts[t];
        uint32_t th = d.threads;
        size_t qb = 0, sb = 0, pb = 0;
        if (!status_ok(q4vk_weight_quantize_size(&d, &qb, &sb), "q4vk_weight_quantize_size", th) ||
            !status_ok(q4vk_weight_plain_size(&d, &pb), "q4vk_weight_plain_size", th)) {
            ok = 0;
            break;
        }
        if (qb != qweight.len || sb != scale.len || pb != plain_len) {
            printf("    threads=%u sizes: qweight %zu (file %zu), scale %zu (file %zu), plain %zu "
                   "(expected %zu)\n", th, qb, qweight.len, sb, scale.len, pb, plain_len);
            ok = 0;
            break;
        }
        memset(q, 0xA5, qb);
        memset(s, 0xA5, sb);
        ok &= status_ok(q4vk_weight_quantize(&d, weight.data, weight.len, q, qb, s, sb),
                        "q4vk_weight_quantize", th) &&
              (same("quantize qweight", q, qweight.data, qb, th) &
               same("quantize scale", s, scale.data, sb, th));

        memset(plain, 0xA5, plain_len);
        ok &= status_ok(q4vk_weight_unpermute(&d, qweight.data, qb, plain, plain_len),
                        "q4vk_weight_unpermute", th) &&
              same("unpermute vs qint", plain, packed, plain_len, th);

        memset(q, 0xA5, qb);
        ok &= status_ok(q4vk_weight_permute(&d, packed, plain_len, q, qb),
                        "q4vk_weight_permute", th) &&
              same("permute(qint) vs qweight", q, qweight.data, qb, th);

        memset(deq, 0xA5, weight.len);
        if (status_ok(q4vk_weight_dequantize(&d, qweight.data, qb, scale.data, sb, deq,
                                             weight.len),
                      "q4vk_weight_dequantize", th)) {
            const uint16_t *h = deq;
            for (size_t i = 0; i < count; i++)
                deq_bits[i] = f32_bits(bf16 ? bf16_to_f32(h[i]) : f16_to_f32(h[i]));
            ok &= same("dequantize vs dequant_ref (f32 bits)", deq_bits, deq_ref.data,
                       count * 4, th);
        } else {
            ok = 0;
        }
    }
done:
    printf("%s %-40s K=%-4llu N=%-4llu %-8s %s arch %-3d group %d\n", ok ? "ok  " : "FAIL", name,
           (unsigned long long)d.k, (unsigned long long)d.n, jd->str, int4 ? "int4" : "int8",
           d.arch, d.group_size);
    free(weight.data), free(qweight.data), free(scale.data), free(qint.data), free(deq_ref.data);
    free(q), free(s), free(packed), free(plain), free(deq), free(deq_bits);
    return ok;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s VECTORS_DIR\n", argv[0]);
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/cases.json", argv[1]);
    size_t len = 0;
    char *text = read_file(path, &len);
    if (!text) return 1;
    json *root = json_parse(text, len);
    free(text);
    const json *cases = json_get(root, "cases");
    if (!cases || cases->type != JSON_ARRAY || !cases->child) {
        fprintf(stderr, "%s: not a manifest with a non-empty \"cases\" array\n", path);
        json_free(root);
        return 1;
    }
    int total = 0, passed = 0;
    for (const json *c = cases->child; c; c = c->next, total++) passed += run_case(argv[1], c);
    json_free(root);
    printf("\n%d of %d Paddle cases identical through the C API (threads = 1 and 0)\n", passed,
           total);
    return passed == total ? 0 : 1;
}
