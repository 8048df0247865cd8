/* The main job end to end from C: quantize float weights to q4vk's Q4 format, upload them
 * to whatever Vulkan device exists (lavapipe on CPU-only machines), run the fused int4
 * GEMV (m = 1) and GEMM (m = 64, prefill), and print the error against an f64 reference
 * of the dequantized weights and the throughput. Times are end to end through q4vk_gemv
 * (host copies and submit included); q4vk-bench measures the kernels alone. Usage:
 * gemv_demo [N K]... (m = 1 each; default 4096 4096 and 11008 4096 at m = 1, 4096 4096 at
 * m = 64). Exit status 0 when every error is below 1e-5. */
#define _POSIX_C_SOURCE 200809L
#include "q4vk.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static void on_log(void *user, uint32_t level, const char *message) {
    (void)user;
    fprintf(stderr, "q4vk [%u]: %s\n", level, message);
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One row of the table: y[m][n] = x[m][k] W^T for random f16 W (m = 1: decode, a GEMV;
 * m > 8: prefill, the GEMM). */
static int run(q4vk_context *ctx, size_t n, size_t k, size_t m) {
    const size_t group = 128;
    uint16_t *w = malloc(n * k * sizeof *w);
    float *x = malloc(m * k * sizeof *x), *y = malloc(m * n * sizeof *y);
    rng r = {0x5eed + n * 31 + k};
    for (size_t i = 0; i < n * k; i++) w[i] = f32_to_f16((float)(rng_normal(&r) * 0.02));
    for (size_t i = 0; i < m * k; i++) x[i] = (float)(rng_uniform(&r) * 2.0 - 1.0);

    q4vk_matrix_desc md;
    q4vk_matrix_desc_default(&md); /* FLOAT source, group 128, symmetric, f16 */
    md.n = n;
    md.k = k;
    md.weight = w;
    md.weight_bytes = n * k * sizeof *w;
    size_t wb, sb, zb;
    q4vk_q4_quantize_size(&md, &wb, &sb, &zb);
    uint8_t *qw = malloc(wb);
    uint16_t *qs = malloc(sb);
    q4vk_matrix *mat = NULL;
    if (q4vk_q4_quantize(&md, qw, wb, qs, sb, NULL, 0) != Q4VK_OK || q4vk_matrix_create(ctx, &md, &mat) != Q4VK_OK) {
        char msg[512];
        q4vk_last_error_message(msg, sizeof msg);
        printf("FAIL: %s\n", msg);
        return 1;
    }
    enum { RUNS = 5 };
    double times[RUNS];
    for (int i = 0; i < RUNS + 1; i++) {
        double t0 = now_seconds();
        q4vk_status s = q4vk_gemv(ctx, mat, x, m * k, y, m * n, (uint32_t)m);
        double t = now_seconds() - t0;
        if (s != Q4VK_OK) {
            char msg[512];
            q4vk_last_error_message(msg, sizeof msg);
            printf("FAIL: q4vk_gemv: %s\n", msg);
            return 1;
        }
        if (i > 0) times[i - 1] = t; /* the first run creates the pipeline and staging */
    }
    qsort(times, RUNS, sizeof times[0], compare);
    double err = q4_rel_error(y, qw, qs, x, n, k, group, m);
    double bytes = (double)(wb + sb + 4 * m * (k + n)), sec = times[RUNS / 2];
    printf("| %zu x %zu | %zu | %.2e | %.3f | %.2f | %.1f |\n", n, k, m, err, sec * 1e3, bytes / sec / 1e9,
           2.0 * (double)(m * n * k) / sec / 1e9);
    q4vk_matrix_destroy(mat);
    free(w);
    free(x);
    free(y);
    free(qw);
    free(qs);
    return err < 1e-5 ? 0 : 1;
}

int main(int argc, char **argv) {
    q4vk_context_desc cd;
    q4vk_context_desc_default(&cd);
    cd.log = on_log;
    q4vk_context *ctx = NULL;
    q4vk_status s = q4vk_context_create(&cd, &ctx);
    if (s != Q4VK_OK) {
        char msg[512];
        q4vk_last_error_message(msg, sizeof msg);
        printf("FAIL: %s: %s\n", q4vk_status_str(s), msg);
        return 1;
    }
    char name[256];
    q4vk_context_device_name(ctx, name, sizeof name);
    printf("device: %s; FLOAT f16 weights -> Q4 g128 -> q4vk_gemv (end to end: m = 1 decode, m = 64 "
           "prefill)\n\n",
           name);
    printf("| N x K | m | rel. error vs f64 | ms (median of 5) | GB/s end to end | GFLOP/s |\n"
           "|---|---|---|---|---|---|\n");
    int failures = 0;
    if (argc > 2) {
        for (int i = 1; i + 1 < argc; i += 2) failures += run(ctx, (size_t)atol(argv[i]), (size_t)atol(argv[i + 1]), 1);
    } else {
        failures += run(ctx, 4096, 4096, 1);
        failures += run(ctx, 11008, 4096, 1);
        failures += run(ctx, 4096, 4096, 64);
    }
    q4vk_context_destroy(ctx);
    return failures ? 1 : 0;
}
