/* bad_input: the bad-input matrix of the six CPU functions of the C API
 * (q4vk_weight_quantize_size, _plain_size, _quantize, _dequantize, _permute, _unpermute):
 * NULL pointers, zero and overflowing sizes, undersized buffers, unknown enum values,
 * unsupported shapes, struct_size smaller than v0 (and larger, which is accepted), NaN/Inf
 * weights and overlapping buffers. Every case expects its specific status, a fresh
 * q4vk_last_error_message that names the argument, and output buffers left exactly as
 * they were (poisoned before the call). */
#define _POSIX_C_SOURCE 200809L
#include "q4vk.h"
#include "util.h"

#include <pthread.h>

enum fn { QUANTIZE_SIZE, PLAIN_SIZE, QUANTIZE, DEQUANTIZE, PERMUTE, UNPERMUTE, FN_COUNT };

/* Parameter names, as the messages should name them: inputs, then outputs. */
static const struct fn_info {
    const char *name;
    int n_in, n_out;
    const char *in[2], *in_len[2], *out[2], *out_len[2];
} FN[FN_COUNT] = {
    [QUANTIZE_SIZE] = {"q4vk_weight_quantize_size", 0, 2, {0}, {0},
                       {"qweight_bytes", "scale_bytes"}, {0}},
    [PLAIN_SIZE] = {"q4vk_weight_plain_size", 0, 1, {0}, {0}, {"plain_bytes"}, {0}},
    [QUANTIZE] = {"q4vk_weight_quantize", 1, 2, {"weight"}, {"weight_bytes"},
                  {"qweight", "scale"}, {"qweight_bytes", "scale_bytes"}},
    [DEQUANTIZE] = {"q4vk_weight_dequantize", 2, 1, {"qweight", "scale"},
                    {"qweight_bytes", "scale_bytes"}, {"weight"}, {"weight_bytes"}},
    [PERMUTE] = {"q4vk_weight_permute", 1, 1, {"plain"}, {"plain_bytes"}, {"qweight"},
                 {"qweight_bytes"}},
    [UNPERMUTE] = {"q4vk_weight_unpermute", 1, 1, {"qweight"}, {"qweight_bytes"}, {"plain"},
                   {"plain_bytes"}},
};

/* The arguments of one call. For the size queries, out[] point to size_t results. */
typedef struct args {
    const q4vk_weight_quantize_desc *desc;
    const void *in[2];
    size_t in_len[2];
    void *out[2];
    size_t out_len[2];
} args;

static q4vk_status call(enum fn f, const args *a) {
    switch (f) {
    case QUANTIZE_SIZE: return q4vk_weight_quantize_size(a->desc, a->out[0], a->out[1]);
    case PLAIN_SIZE: return q4vk_weight_plain_size(a->desc, a->out[0]);
    case QUANTIZE:
        return q4vk_weight_quantize(a->desc, a->in[0], a->in_len[0], a->out[0], a->out_len[0],
                                    a->out[1], a->out_len[1]);
    case DEQUANTIZE:
        return q4vk_weight_dequantize(a->desc, a->in[0], a->in_len[0], a->in[1], a->in_len[1],
                                      a->out[0], a->out_len[0]);
    case PERMUTE:
        return q4vk_weight_permute(a->desc, a->in[0], a->in_len[0], a->out[0], a->out_len[0]);
    case UNPERMUTE:
        return q4vk_weight_unpermute(a->desc, a->in[0], a->in_len[0], a->out[0], a->out_len[0]);
    default: return Q4VK_ERROR_INTERNAL;
    }
}

/* Valid inputs and poisoned outputs for the base problem, large enough for every case. */
#define K 128
#define N 32
#define POISON 0xA5
static float weight_f32[K * N];
static uint16_t weight_f16[K * N];
static int8_t qweight_in[K * N], plain_in[K * N];
static uint16_t scale_in[N * 2];
static uint8_t out_a[K * N * 4], out_b[K * N * 4]; /* outputs (poisoned) */

static int cases, failures;

static void poison(void) {
    memset(out_a, POISON, sizeof out_a);
    memset(out_b, POISON, sizeof out_b);
}

static int poisoned(void) {
    for (size_t i = 0; i < sizeof out_a; i++)
        if (out_a[i] != POISON || out_b[i] != POISON) return 0;
    return 1;
}

/* Leaves a known message behind so each case can tell that its call set a new one. */
static const char PRIMER[] = "desc->arch is 424242";
static void prime(void) {
    q4vk_weight_quantize_desc d;
    q4vk_weight_quantize_desc_default(&d);
    d.arch = 424242;
    size_t a, b;
    q4vk_weight_quantize_size(&d, &a, &b);
}

/* Valid arguments of f for desc d (which may itself be invalid: sizes come from `sizes`). */
static args base_args(enum fn f, const q4vk_weight_quantize_desc *d, const q4vk_weight_quantize_desc *sizes) {
    size_t qb = 0, sb = 0;
    q4vk_weight_quantize_size(sizes, &qb, &sb);
    size_t wb = (size_t)(sizes->k * sizes->n) * (sizes->dtype == Q4VK_DTYPE_F32 ? 4 : 2);
    const void *w = sizes->dtype == Q4VK_DTYPE_F32 ? (const void *)weight_f32 : weight_f16;
    args a = {d, {0}, {0}, {out_a, out_b}, {0}};
    switch (f) {
    case QUANTIZE_SIZE: case PLAIN_SIZE: break;
    case QUANTIZE: a = (args){d, {w}, {wb}, {out_a, out_b}, {qb, sb}}; break;
    case DEQUANTIZE: a = (args){d, {qweight_in, scale_in}, {qb, sb}, {out_a}, {wb}}; break;
    case PERMUTE: a = (args){d, {plain_in}, {qb}, {out_a}, {qb}}; break;
    case UNPERMUTE: a = (args){d, {qweight_in}, {qb}, {out_a}, {qb}}; break;
    default: break;
    }
    return a;
}

/* Runs one case: status `want`; on an error, a fresh message containing `needle` and
   untouched outputs. */
static void expect(enum fn f, const args *a, q4vk_status want, const char *needle, const char *label) {
    cases++;
    poison();
    prime();
    q4vk_status got = call(f, a);
    char msg[512] = "";
    q4vk_last_error_message(msg, sizeof msg);
    const char *problem = NULL;
    if (got != want) problem = "wrong status";
    else if (want != Q4VK_OK && (!msg[0] || strstr(msg, PRIMER))) problem = "no new error message";
    else if (want != Q4VK_OK && !strstr(msg, needle)) problem = "message does not name the argument";
    else if (want != Q4VK_OK && !poisoned()) problem = "an output was written on error";
    if (problem) {
        failures++;
        printf("FAIL %-26s %-34s %s: got %s (%u), want %s (%u); expected \"%s\" in message \"%s\"\n",
               FN[f].name, label, problem, q4vk_status_str(got), got, q4vk_status_str(want), want,
               needle ? needle : "", msg);
    } else {
        printf("ok   %-26s %-34s %-28s %s\n", FN[f].name, label, q4vk_status_str(got),
               want == Q4VK_OK ? "" : msg);
    }
}

/* A desc change that must be refused by every function. */
typedef struct desc_case {
    const char *label;
    void (*edit)(q4vk_weight_quantize_desc *);
    q4vk_status want;
    const char *needle;
} desc_case;
static void k_zero(q4vk_weight_quantize_desc *d) { d->k = 0; }
static void n_zero(q4vk_weight_quantize_desc *d) { d->n = 0; }
static void kn_overflow(q4vk_weight_quantize_desc *d) { d->k = 1ull << 40; d->n = 1ull << 40; }
static void k_huge(q4vk_weight_quantize_desc *d) { d->k = UINT64_MAX - 63; }
static void algo_bad(q4vk_weight_quantize_desc *d) { d->algo = 2; }
static void dtype_bad(q4vk_weight_quantize_desc *d) { d->dtype = 3; }
static void arch_bad(q4vk_weight_quantize_desc *d) { d->arch = 81; }
static void arch_neg(q4vk_weight_quantize_desc *d) { d->arch = -1; }
static void group_bad(q4vk_weight_quantize_desc *d) { d->group_size = 32; }
static void group_zero(q4vk_weight_quantize_desc *d) { d->group_size = 0; }
static void n_not16(q4vk_weight_quantize_desc *d) { d->n = 40; }
static void k_not64(q4vk_weight_quantize_desc *d) { d->k = 96; }
static void size_small(q4vk_weight_quantize_desc *d) { d->struct_size = sizeof *d - 1; }
static void size_zero(q4vk_weight_quantize_desc *d) { d->struct_size = 0; }
static const desc_case DESC_CASES[] = {
    {"k = 0", k_zero, Q4VK_ERROR_INVALID_ARGUMENT, "desc->k"},
    {"n = 0", n_zero, Q4VK_ERROR_INVALID_ARGUMENT, "desc->n"},
    {"k * n overflows (2^40 * 2^40)", kn_overflow, Q4VK_ERROR_INVALID_ARGUMENT, "desc->k"},
    {"k = 2^64 - 64", k_huge, Q4VK_ERROR_INVALID_ARGUMENT, "desc->k"},
    {"algo = 2", algo_bad, Q4VK_ERROR_INVALID_ARGUMENT, "desc->algo"},
    {"dtype = 3", dtype_bad, Q4VK_ERROR_INVALID_ARGUMENT, "desc->dtype"},
    {"arch = 81", arch_bad, Q4VK_ERROR_INVALID_ARGUMENT, "desc->arch"},
    {"arch = -1", arch_neg, Q4VK_ERROR_INVALID_ARGUMENT, "desc->arch"},
    {"group_size = 32", group_bad, Q4VK_ERROR_INVALID_ARGUMENT, "desc->group_size"},
    {"group_size = 0", group_zero, Q4VK_ERROR_INVALID_ARGUMENT, "desc->group_size"},
    {"n = 40 (n % 16 != 0)", n_not16, Q4VK_ERROR_INVALID_ARGUMENT, "desc->n"},
    {"k = 96 at arch 80 (k % 64 != 0)", k_not64, Q4VK_ERROR_INVALID_ARGUMENT, "desc->k"},
    {"struct_size = 39", size_small, Q4VK_ERROR_INVALID_ARGUMENT, "struct_size"},
    {"struct_size = 0", size_zero, Q4VK_ERROR_INVALID_ARGUMENT, "struct_size"},
};

static void matrix(enum fn f, const q4vk_weight_quantize_desc *base) {
    args ok = base_args(f, base, base);
    expect(f, &ok, Q4VK_OK, NULL, "valid arguments");
    char label[96];

    args a = ok;
    a.desc = NULL;
    expect(f, &a, Q4VK_ERROR_NULL_POINTER, "desc", "desc = NULL");
    for (int i = 0; i < FN[f].n_in; i++) {
        a = ok;
        a.in[i] = NULL;
        snprintf(label, sizeof label, "%s = NULL", FN[f].in[i]);
        expect(f, &a, Q4VK_ERROR_NULL_POINTER, FN[f].in[i], label);
    }
    for (int i = 0; i < FN[f].n_out; i++) {
        a = ok;
        a.out[i] = NULL;
        snprintf(label, sizeof label, "%s = NULL", FN[f].out[i]);
        expect(f, &a, Q4VK_ERROR_NULL_POINTER, FN[f].out[i], label);
    }
    /* Undersized and zero-sized buffers (the size queries have none). */
    for (int i = 0; f != QUANTIZE_SIZE && f != PLAIN_SIZE && i < FN[f].n_in + FN[f].n_out; i++) {
        int is_in = i < FN[f].n_in;
        int j = is_in ? i : i - FN[f].n_in;
        const char *name = is_in ? FN[f].in_len[j] : FN[f].out_len[j];
        size_t *len = is_in ? &a.in_len[j] : &a.out_len[j];
        for (int zero = 0; zero < 2; zero++) {
            a = ok;
            *len = zero ? 0 : *len - 1;
            snprintf(label, sizeof label, "%s = %zu (needs %zu)", name, *len,
                     is_in ? ok.in_len[j] : ok.out_len[j]);
            expect(f, &a, Q4VK_ERROR_BUFFER_TOO_SMALL, name, label);
        }
    }
    for (size_t c = 0; c < sizeof DESC_CASES / sizeof DESC_CASES[0]; c++) {
        q4vk_weight_quantize_desc d = *base;
        DESC_CASES[c].edit(&d);
        a = base_args(f, &d, base);
        expect(f, &a, DESC_CASES[c].want, DESC_CASES[c].needle, DESC_CASES[c].label);
    }
    /* A newer caller's larger struct: accepted, the unknown tail ignored. */
    struct { q4vk_weight_quantize_desc d; uint64_t future[3]; } big;
    memset(&big, 0xFF, sizeof big);
    big.d = *base;
    big.d.struct_size = sizeof big;
    a = ok;
    a.desc = &big.d;
    expect(f, &a, Q4VK_OK, NULL, "struct_size = 64 (newer caller)");
    q4vk_weight_quantize_desc many = *base;
    many.threads = 100000;
    a = ok;
    a.desc = &many;
    expect(f, &a, Q4VK_OK, NULL, "threads = 100000 (clamped)");
}

static void non_finite(void) {
    static const struct { q4vk_dtype dtype; const char *name; uint32_t bits[3]; } T[] = {
        {Q4VK_DTYPE_F16, "f16", {0x7e00, 0x7c00, 0xfc00}},
        {Q4VK_DTYPE_BF16, "bf16", {0x7fc0, 0x7f80, 0xff80}},
        {Q4VK_DTYPE_F32, "f32", {0x7fc00000u, 0x7f800000u, 0xff800000u}},
    };
    static const char *what[3] = {"NaN", "+Inf", "-Inf"};
    static uint8_t w[K * N * 4];
    for (int t = 0; t < 3; t++) {
        for (int v = 0; v < 3; v++) {
            q4vk_weight_quantize_desc d;
            q4vk_weight_quantize_desc_default(&d);
            d.k = K, d.n = N, d.dtype = T[t].dtype, d.threads = 1;
            size_t es = T[t].dtype == Q4VK_DTYPE_F32 ? 4 : 2;
            memcpy(w, T[t].dtype == Q4VK_DTYPE_F32 ? (const void *)weight_f32 : weight_f16, K * N * es);
            if (T[t].dtype == Q4VK_DTYPE_BF16)
                for (int i = 0; i < K * N; i++)
                    ((uint16_t *)w)[i] = (uint16_t)(f32_bits(weight_f32[i]) >> 16);
            size_t at = 77 * N + 5; /* row 77, column 5 */
            memcpy(w + at * es, &T[t].bits[v], es); /* little-endian: low bytes first */
            args a = base_args(QUANTIZE, &d, &d);
            a.in[0] = w;
            char label[64];
            snprintf(label, sizeof label, "%s at [77][5], %s", what[v], T[t].name);
            expect(QUANTIZE, &a, Q4VK_ERROR_NON_FINITE, "weight", label);
        }
    }
}

static void overlap(const q4vk_weight_quantize_desc *base) {
    /* The output starts inside the input. */
    static uint8_t buf[K * N * 4];
    memcpy(buf, plain_in, K * N / 2);
    args a = base_args(PERMUTE, base, base);
    a.in[0] = buf;
    a.out[0] = buf + 16;
    cases++;
    prime();
    q4vk_status got = call(PERMUTE, &a);
    char msg[512];
    q4vk_last_error_message(msg, sizeof msg);
    int ok = got == Q4VK_ERROR_INVALID_ARGUMENT && strstr(msg, "overlap") &&
             !memcmp(buf, plain_in, K * N / 2);
    printf("%s %-26s %-34s %s: %s\n", ok ? "ok  " : "FAIL", FN[PERMUTE].name,
           "qweight overlaps plain", q4vk_status_str(got), msg);
    failures += !ok;
}

/* Runs on another thread: fails a call there and keeps that thread's message. */
static void *fail_on_other_thread(void *out) {
    size_t a, b;
    q4vk_weight_quantize_size(NULL, &a, &b);
    q4vk_last_error_message(out, 512);
    return NULL;
}

static void messages(void) {
    /* The message is per thread: a failure on another thread leaves this one's alone. */
    prime();
    char mine[512], other[512] = "";
    pthread_t t;
    int started = pthread_create(&t, NULL, fail_on_other_thread, other) == 0;
    if (started) pthread_join(t, NULL);
    q4vk_last_error_message(mine, sizeof mine);
    int tl = started && strstr(mine, PRIMER) && strstr(other, "desc is NULL");
    cases++;
    failures += !tl;
    printf("%s q4vk_last_error_message is thread-local: here \"%s\", other thread \"%s\"\n",
           tl ? "ok  " : "FAIL", mine, other);

    /* q4vk_last_error_message: full length returned, truncation, NULL with 0. */
    prime();
    size_t full = q4vk_last_error_message(NULL, 0);
    char whole[512];
    q4vk_last_error_message(whole, sizeof whole);
    char small[8];
    memset(small, 'x', sizeof small);
    size_t again = q4vk_last_error_message(small, 5);
    int ok = full > 5 && again == full && small[4] == 0 && strlen(small) == 4 && small[5] == 'x' &&
             !strncmp(small, whole, 4) && strlen(whole) == full;
    cases++;
    failures += !ok;
    printf("%s q4vk_last_error_message: length %zu with (NULL, 0); truncated to \"%s\" in 5 bytes\n",
           ok ? "ok  " : "FAIL", full, small);
    /* q4vk_status_str: non-empty for every code, also unknown ones. */
    int all = 1;
    for (uint32_t s = 0; s <= 13; s++) all &= q4vk_status_str(s) && q4vk_status_str(s)[0];
    all &= q4vk_status_str(UINT32_MAX) && q4vk_status_str(UINT32_MAX)[0];
    cases++;
    failures += !all;
    printf("%s q4vk_status_str: non-empty for 0..13 and UINT32_MAX (\"%s\")\n", all ? "ok  " : "FAIL",
           q4vk_status_str(UINT32_MAX));
    q4vk_weight_quantize_desc_default(NULL); /* documented: ignored */
}

int main(void) {
    rng r = {12345};
    for (int i = 0; i < K * N; i++) {
        weight_f16[i] = f32_to_f16((float)rng_normal(&r));
        weight_f32[i] = f16_to_f32(weight_f16[i]);
    }
    q4vk_weight_quantize_desc base;
    q4vk_weight_quantize_desc_default(&base);
    base.k = K, base.n = N, base.threads = 1;
    size_t qb, sb;
    if (q4vk_weight_quantize_size(&base, &qb, &sb) != Q4VK_OK || sb > sizeof scale_in ||
        q4vk_weight_quantize(&base, weight_f16, sizeof weight_f16, qweight_in, qb, scale_in, sb) ||
        q4vk_weight_unpermute(&base, qweight_in, qb, plain_in, qb)) {
        printf("FAIL: cannot prepare valid inputs\n");
        return 1;
    }
    for (int f = 0; f < FN_COUNT; f++) matrix((enum fn)f, &base);
    non_finite();
    overlap(&base);
    messages();
    printf("\n%s: %d of %d bad-input cases behaved as specified\n", failures ? "FAILED" : "PASSED",
           cases - failures, cases);
    return failures ? 1 : 0;
}
