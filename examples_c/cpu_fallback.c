/* Q4VK_CONTEXT_CPU_FALLBACK on a machine without a usable Vulkan driver: CTest runs this
 * with VK_DRIVER_FILES and VK_ICD_FILENAMES naming a file that does not exist, so the
 * loader finds no driver. The context must still be created (on the CPU, as its device
 * name and an INFO log say), a FLOAT matrix must be created on it, and q4vk_gemv must
 * match an f64 reference of the quantized weights (relative error < 1e-5) for m = 1..8,
 * and q4vk_gemv_host likewise on f16 activations (m = 3); m = 2^32 - 1 on buffers for
 * m = 1 is refused with nothing written.
 * q4vk_cmd_gemv must answer Q4VK_ERROR_UNSUPPORTED. Exit status 0 on success. */
#define _POSIX_C_SOURCE 200809L
#include "q4vk.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util.h"

static int fell_back_logged;

static void on_log(void *user, uint32_t level, const char *message) {
    (void)user;
    fprintf(stderr, "q4vk [%u]: %s\n", level, message);
    if (level == Q4VK_LOG_INFO && strstr(message, "using the CPU")) fell_back_logged = 1;
}

/* ||y - ref|| / ||ref|| for y[m][n] against the f64 product of x[m][k] and the asymmetric
 * Q4 data (codes qw, f16 scales qs, zero points qz, groups of `group`). */
static double rel_error(const float *y, const float *x, size_t m, size_t n, size_t k, size_t group,
                        const uint8_t *qw, const uint16_t *qs, const uint8_t *qz) {
    size_t groups = (k + group - 1) / group, row_bytes = (k + 1) / 2;
    double diff = 0, norm = 0;
    for (size_t t = 0; t < m; t++) {
        for (size_t row = 0; row < n; row++) {
            double acc = 0;
            for (size_t i = 0; i < k; i++) {
                uint8_t byte = qw[row * row_bytes + i / 2];
                int u = (i % 2 == 0) ? (byte & 15) : (byte >> 4);
                size_t g = row * groups + i / group;
                acc += (double)(u - qz[g]) * (double)f16_to_f32(qs[g]) * (double)x[t * k + i];
            }
            double d = y[t * n + row] - acc;
            diff += d * d;
            norm += acc * acc;
        }
    }
    return sqrt(diff / norm);
}

static int fail(const char *what) {
    char msg[512];
    q4vk_last_error_message(msg, sizeof msg);
    printf("FAIL: %s: %s\n", what, msg);
    return 1;
}

int main(void) {
    const char *drivers = getenv("VK_DRIVER_FILES");
    struct stat st;
    if (!drivers || stat(drivers, &st) == 0) {
        printf("FAIL: run with VK_DRIVER_FILES naming a file that does not exist\n");
        return 1;
    }
    q4vk_context_desc cd;
    q4vk_context_desc_default(&cd);
    cd.flags = Q4VK_CONTEXT_CPU_FALLBACK;
    cd.log = on_log;
    cd.log_level = Q4VK_LOG_INFO;
    q4vk_context *ctx = NULL;
    if (q4vk_context_create(&cd, &ctx) != Q4VK_OK) return fail("q4vk_context_create");
    char name[128];
    q4vk_context_device_name(ctx, name, sizeof name);
    printf("device: %s\n", name);
    if (strncmp(name, "CPU (", 5) != 0 || !fell_back_logged) {
        printf("FAIL: expected a CPU context and an INFO log saying so\n");
        return 1;
    }

    const size_t n = 300, k = 1000, group = 64;
    float *w = malloc(n * k * sizeof *w);
    float *x = malloc(8 * k * sizeof *x), *y = malloc(8 * n * sizeof *y);
    rng r = {0xfa11bac};
    for (size_t i = 0; i < n * k; i++) w[i] = (float)(rng_normal(&r) * 0.02);
    for (size_t i = 0; i < 8 * k; i++) x[i] = (float)(rng_uniform(&r) * 2.0 - 1.0);
    q4vk_matrix_desc md;
    q4vk_matrix_desc_default(&md);
    md.n = n;
    md.k = k;
    md.group_size = (int32_t)group;
    md.zero_points = 1;
    md.dtype = Q4VK_DTYPE_F32;
    md.weight = w;
    md.weight_bytes = n * k * sizeof *w;
    size_t wb, sb, zb;
    if (q4vk_q4_quantize_size(&md, &wb, &sb, &zb) != Q4VK_OK) return fail("q4vk_q4_quantize_size");
    uint8_t *qw = malloc(wb), *qz = malloc(zb);
    uint16_t *qs = malloc(sb);
    if (q4vk_q4_quantize(&md, qw, wb, qs, sb, qz, zb) != Q4VK_OK) return fail("q4vk_q4_quantize");
    q4vk_matrix *mat = NULL;
    if (q4vk_matrix_create(ctx, &md, &mat) != Q4VK_OK) return fail("q4vk_matrix_create");

    int bad = 0;
    for (uint32_t m = 1; m <= 8; m++) {
        for (size_t i = 0; i < m * n; i++) y[i] = NAN;
        if (q4vk_gemv(ctx, mat, x, m * k, y, m * n, m) != Q4VK_OK) return fail("q4vk_gemv");
        double err = rel_error(y, x, m, n, k, group, qw, qs, qz);
        printf("m = %u: relative error %.3g\n", m, err);
        if (!(err < 1e-5)) bad = 1;
    }
    /* f16 activations through q4vk_gemv_host (widened exactly on the CPU), m = 3. */
    {
        const uint32_t m = 3;
        uint16_t *xh = malloc(m * k * sizeof *xh);
        float *xw = malloc(m * k * sizeof *xw);
        round_to_f16(x, m * k, xh, xw);
        q4vk_gemv_host_args ha;
        q4vk_gemv_host_args_default(&ha);
        ha.flags = Q4VK_GEMV_F16_ACTIVATIONS;
        ha.m = m;
        ha.x = xh;
        ha.x_bytes = m * k * sizeof *xh;
        ha.y = y;
        ha.y_len = m * n;
        for (size_t i = 0; i < m * n; i++) y[i] = NAN;
        if (q4vk_gemv_host(ctx, mat, &ha) != Q4VK_OK) return fail("q4vk_gemv_host");
        double err = rel_error(y, xw, m, n, k, group, qw, qs, qz);
        printf("f16 x, m = %u: relative error %.3g\n", m, err);
        if (!(err < 1e-5)) bad = 1;
        free(xh), free(xw);
    }
    /* The largest m on buffers for m = 1: refused (x_len short of m·k), y not written. */
    for (size_t i = 0; i < n; i++) y[i] = NAN;
    if (q4vk_gemv(ctx, mat, x, k, y, n, UINT32_MAX) != Q4VK_ERROR_BUFFER_TOO_SMALL) {
        printf("FAIL: q4vk_gemv with m = 2^32 - 1 on buffers for m = 1 must be BUFFER_TOO_SMALL\n");
        bad = 1;
    }
    for (size_t i = 0; i < n; i++)
        if (!isnan(y[i])) {
            printf("FAIL: a refused q4vk_gemv wrote y[%zu]\n", i);
            bad = 1;
            break;
        }
    q4vk_gemv_args args;
    q4vk_gemv_args_default(&args);
    int fake_command_buffer;
    if (q4vk_cmd_gemv(ctx, mat, &fake_command_buffer, &args) != Q4VK_ERROR_UNSUPPORTED) {
        printf("FAIL: q4vk_cmd_gemv on a CPU context must be UNSUPPORTED\n");
        bad = 1;
    }
    q4vk_matrix_destroy(mat);
    q4vk_context_destroy(ctx);
    free(w), free(x), free(y), free(qw), free(qz), free(qs);
    printf(bad ? "FAIL\n" : "OK\n");
    return bad;
}
