/* quantize_demo: the q4vk main job until the Vulkan GEMV exists.
 *
 * Quantizes a seeded random f16 weight [K, N] (K = input features, N = output features)
 * to Paddle's int4 layout with q4vk_weight_quantize, recovers the plain codes with
 * q4vk_weight_unpermute, and checks the round trip:
 *   - permute(unpermute(q)) == q, byte for byte;
 *   - threads = 1 and threads = 0 (all cores) give identical bytes;
 *   - every code is within [-7, 7] and |w - q*s| <= s/2 (plus the f16 rounding of s);
 *   - q4vk_weight_dequantize(q) == f16(q * s) exactly, and |w - dequant| / s is reported.
 * It prints the time and input throughput of each step.
 *
 * Usage: quantize_demo [K N]...   (default: 4096 4096 and 4096 11008)
 * Exit status 0 when every check passes. */
#define _POSIX_C_SOURCE 200809L
#include "q4vk.h"
#include "util.h"

#include <unistd.h>

#define REPEATS 3 /* each timing is the best of this many runs */

static int failures;

static void check(int ok, const char *what, const char *detail) {
    printf("  check  %-44s %s%s%s\n", what, ok ? "ok" : "FAILED", detail[0] ? "  " : "",
           detail);
    if (!ok) failures++;
}

static int call_ok(q4vk_status st, const char *fn) {
    if (st == Q4VK_OK) return 1;
    char msg[512];
    q4vk_last_error_message(msg, sizeof msg);
    fprintf(stderr, "  %s failed: %s (%u): %s\n", fn, q4vk_status_str(st), st, msg);
    failures++;
    return 0;
}

/* Quantizes with the given thread count REPEATS times; returns the best time in seconds
   or a negative value on error. */
static double time_quantize(q4vk_weight_quantize_desc d, uint32_t threads, const uint16_t *w,
                            size_t wbytes, int8_t *q, size_t qbytes, uint16_t *s, size_t sbytes) {
    double best = 1e30;
    d.threads = threads;
    for (int r = 0; r < REPEATS; r++) {
        double t0 = now_seconds();
        if (!call_ok(q4vk_weight_quantize(&d, w, wbytes, q, qbytes, s, sbytes),
                     "q4vk_weight_quantize"))
            return -1;
        double t = now_seconds() - t0;
        if (t < best) best = t;
    }
    return best;
}

static void print_time(const char *step, const char *who, double seconds, size_t bytes) {
    printf("  %-10s %-12s %9.2f ms  %7.2f GB/s of f16 input\n", step, who, seconds * 1e3,
           (double)bytes / seconds * 1e-9);
}

/* Runs the whole demo on one shape and grouping; returns 0 when it could run. */
static int run(uint64_t K, uint64_t N, int32_t group_size, long cores) {
    q4vk_weight_quantize_desc d;
    q4vk_weight_quantize_desc_default(&d); /* int4, f16, arch 80, per channel, all cores */
    d.k = K;
    d.n = N;
    d.group_size = group_size;

    size_t qbytes = 0, sbytes = 0;
    if (!call_ok(q4vk_weight_quantize_size(&d, &qbytes, &sbytes), "q4vk_weight_quantize_size"))
        return -1;
    size_t count = (size_t)(K * N), wbytes = count * sizeof(uint16_t);
    size_t groups = sbytes / sizeof(uint16_t) / (size_t)N;
    size_t group_rows = group_size > 0 ? (size_t)group_size : (size_t)K;

    char grouping[64];
    if (group_size > 0)
        snprintf(grouping, sizeof grouping, "group %d (%zu groups)", group_size, groups);
    else
        snprintf(grouping, sizeof grouping, "per channel");
    printf("\n[%llu x %llu] f16 -> int4, arch %d, %s: in %.1f MB, qweight %.1f MB, "
           "scale %.1f KB\n",
           (unsigned long long)K, (unsigned long long)N, d.arch, grouping, (double)wbytes / 1e6,
           (double)qbytes / 1e6, (double)sbytes / 1e3);

    uint16_t *w = malloc(wbytes), *s = malloc(sbytes), *s1 = malloc(sbytes),
             *deq = malloc(wbytes);
    int8_t *q = malloc(qbytes), *q1 = malloc(qbytes), *plain = malloc(qbytes),
           *q2 = malloc(qbytes);
    if (!w || !s || !s1 || !deq || !q || !q1 || !plain || !q2) {
        fprintf(stderr, "  out of memory\n");
        failures++;
        goto done;
    }

    /* Seeded N(0, 0.02) weights, like a freshly initialized linear layer. */
    rng r = {0x9E3779B97F4A7C15ULL ^ (K * 1000003u + N)};
    for (size_t i = 0; i < count; i++) w[i] = f32_to_f16((float)(0.02 * rng_normal(&r)));

    double t1 = time_quantize(d, 1, w, wbytes, q1, qbytes, s1, sbytes);
    double tn = time_quantize(d, 0, w, wbytes, q, qbytes, s, sbytes);
    if (t1 < 0 || tn < 0) goto done;
    char who[32];
    print_time("quantize", "1 thread", t1, wbytes);
    snprintf(who, sizeof who, "%ld threads", cores);
    print_time("quantize", who, tn, wbytes);
    printf("  %-10s %-12s %9.2fx\n", "speed-up", "", t1 / tn);
    /* Context: one memcpy of the same input bytes (into the dequantize buffer). */
    double tm = 1e30;
    for (int rep = 0; rep < REPEATS; rep++) {
        double t0 = now_seconds();
        memcpy(deq, w, wbytes);
        double t = now_seconds() - t0;
        if (t < tm) tm = t;
    }
    print_time("memcpy", "1 thread", tm, wbytes);

    double t0 = now_seconds();
    if (!call_ok(q4vk_weight_unpermute(&d, q, qbytes, plain, qbytes), "q4vk_weight_unpermute"))
        goto done;
    double t_unperm = now_seconds() - t0;
    t0 = now_seconds();
    if (!call_ok(q4vk_weight_permute(&d, plain, qbytes, q2, qbytes), "q4vk_weight_permute"))
        goto done;
    double t_perm = now_seconds() - t0;
    t0 = now_seconds();
    if (!call_ok(q4vk_weight_dequantize(&d, q, qbytes, s, sbytes, deq, wbytes),
                 "q4vk_weight_dequantize"))
        goto done;
    double t_deq = now_seconds() - t0;
    printf("  %-10s %-12s %9.2f ms\n", "unpermute", who, t_unperm * 1e3);
    printf("  %-10s %-12s %9.2f ms\n", "permute", who, t_perm * 1e3);
    printf("  %-10s %-12s %9.2f ms\n", "dequantize", who, t_deq * 1e3);

    char detail[160];
    snprintf(detail, sizeof detail, "(%zu bytes)", qbytes);
    check(memcmp(q, q2, qbytes) == 0, "permute(unpermute(q)) == q", detail);
    check(memcmp(q, q1, qbytes) == 0 && memcmp(s, s1, sbytes) == 0,
          "threads = 1 and all threads: same bytes", "");

    /* Plain codes: q[k][n] row-major, two per byte along n, even n in the low nibble. */
    double worst_code = 0, worst_deq = 0;
    size_t bad_range = 0, bad_deq = 0, zero_scales = 0;
    for (size_t k = 0; k < K; k++) {
        for (size_t n = 0; n < N; n++) {
            size_t i = k * N + n;
            uint8_t byte = (uint8_t)plain[i / 2];
            int code = (n & 1) ? (byte >> 4) : (byte & 0xf);
            if (code >= 8) code -= 16; /* two's-complement nibble */
            if (code < -7 || code > 7) bad_range++;
            float sc = f16_to_f32(s[(k / group_rows) * N + n]);
            float x = f16_to_f32(w[i]);
            uint16_t expect = f32_to_f16((float)code * sc);
            if (deq[i] != expect) bad_deq++;
            if (sc == 0.0f) {
                zero_scales++;
                continue;
            }
            double e_code = fabs((double)x - (double)code * sc) / sc;
            double e_deq = fabs((double)x - (double)f16_to_f32(deq[i])) / sc;
            if (e_code > worst_code) worst_code = e_code;
            if (e_deq > worst_deq) worst_deq = e_deq;
        }
    }
    snprintf(detail, sizeof detail, "(%zu outside)", bad_range);
    check(bad_range == 0, "every code in [-7, 7]", detail);
    /* s = f16(absmax / 7) is within 2^-11 of absmax / 7, so the clamped extreme code can be
       off by 7 * 2^-11 of a step; everything else rounds to the nearest step. */
    const double bound = 0.5 + 7.0 / 2048.0;
    snprintf(detail, sizeof detail, "max = %.4f (bound %.4f)", worst_code, bound);
    check(worst_code <= bound, "|w - q*s| / s", detail);
    snprintf(detail, sizeof detail, "(%zu differ)", bad_deq);
    check(bad_deq == 0, "dequantize == f16(q * s), bit for bit", detail);
    snprintf(detail, sizeof detail, "max = %.4f (bound %.4f)", worst_deq, bound + 7.0 / 2048.0);
    check(worst_deq <= bound + 7.0 / 2048.0, "|w - dequantize(q)| / s", detail);
    if (zero_scales) printf("  note: %zu elements have a zero scale\n", zero_scales);

done:
    free(w), free(s), free(s1), free(deq), free(q), free(q1), free(plain), free(q2);
    return 0;
}

int main(int argc, char **argv) {
    uint64_t shapes[16][2] = {{4096, 4096}, {4096, 11008}};
    int nshapes = 2;
    if (argc > 1) {
        if ((argc - 1) % 2 != 0 || (argc - 1) / 2 > 16) {
            fprintf(stderr, "usage: %s [K N]...\n", argv[0]);
            return 2;
        }
        nshapes = (argc - 1) / 2;
        for (int i = 0; i < nshapes; i++) {
            shapes[i][0] = strtoull(argv[1 + 2 * i], NULL, 10);
            shapes[i][1] = strtoull(argv[2 + 2 * i], NULL, 10);
        }
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    printf("q4vk %s (header %d.%d.%d): Paddle-compatible weight-only int4 quantization on "
           "the CPU\n",
           q4vk_version_string(), Q4VK_VERSION_MAJOR, Q4VK_VERSION_MINOR, Q4VK_VERSION_PATCH);
    printf("%ld cores online; times are the best of %d runs\n", cores, REPEATS);
    if (q4vk_version() != (uint32_t)Q4VK_HEADER_VERSION) {
        fprintf(stderr, "library version %#x differs from the header's %#x\n", q4vk_version(),
                (unsigned)Q4VK_HEADER_VERSION);
        return 1;
    }
    for (int i = 0; i < nshapes; i++) {
        run(shapes[i][0], shapes[i][1], -1, cores);
        run(shapes[i][0], shapes[i][1], 128, cores);
    }
    printf("\n%s: %d check(s) failed\n", failures ? "FAILED" : "PASSED", failures);
    return failures ? 1 : 0;
}
