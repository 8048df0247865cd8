/* dlopen_vulkan: the Vulkan path through dlopen/dlsym only (no link-time dependency on
 * libq4vk, as an app that loads it as a plugin does): context with validation ->
 * q4vk_q4_quantize -> matrix create (Q4 and FLOAT sources) -> q4vk_gemv for m = 1..4 ->
 * check against an f64 reference of the weights dequantized by the documented Q4 formula
 * -> pipeline-cache blob and a short tuning run's blob -> a second context seeded with both
 * (it must say it uses the tuned shape) -> destroy -> dlclose.
 * Any validation (or other WARN/ERROR) message fails the test, and so does a validation
 * layer that is not enabled. Usage: dlopen_vulkan path/to/libq4vk.so */
#define _POSIX_C_SOURCE 200809L
#include "q4vk.h"
#include "util.h"

#include <dlfcn.h>

static int failures;
static void expect(int ok, const char *what) {
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok) failures++;
}

typedef struct {
    int messages;       /* WARN or ERROR */
    int validation_on;  /* the INFO line saying the layer is enabled */
    int tuned_shape;    /* the INFO line saying the tuning blob is used */
    char last[512];
} log_state;

static void on_log(void *user, uint32_t level, const char *message) {
    log_state *s = user;
    if (level <= Q4VK_LOG_WARN) {
        s->messages++;
        snprintf(s->last, sizeof s->last, "%s", message);
        fprintf(stderr, "q4vk [%u]: %s\n", level, message);
    } else if (strstr(message, "validation layer enabled")) {
        s->validation_on = 1;
    } else if (strstr(message, "tuning blob") && strstr(message, "used")) {
        s->tuned_shape = 1;
    }
}

/* The API, resolved with dlsym. */
static struct {
    size_t (*last_error)(char *, size_t);
    void (*context_desc_default)(q4vk_context_desc *);
    q4vk_status (*context_create)(const q4vk_context_desc *, q4vk_context **);
    void (*context_destroy)(q4vk_context *);
    size_t (*device_name)(const q4vk_context *, char *, size_t);
    q4vk_status (*cache_size)(const q4vk_context *, size_t *);
    q4vk_status (*cache_data)(const q4vk_context *, void *, size_t, size_t *);
    void (*matrix_desc_default)(q4vk_matrix_desc *);
    q4vk_status (*q4_size)(const q4vk_matrix_desc *, size_t *, size_t *, size_t *);
    q4vk_status (*q4_quantize)(const q4vk_matrix_desc *, uint8_t *, size_t, void *, size_t, uint8_t *, size_t);
    q4vk_status (*matrix_create)(q4vk_context *, const q4vk_matrix_desc *, q4vk_matrix **);
    void (*matrix_destroy)(q4vk_matrix *);
    q4vk_status (*gemv)(q4vk_context *, const q4vk_matrix *, const float *, size_t, float *, size_t, uint32_t);
    void (*tune_desc_default)(q4vk_tune_desc *);
    q4vk_status (*tune)(q4vk_context *, const q4vk_tune_desc *, void *, size_t, size_t *, q4vk_tune_info *);
} api;

/* dlsym into a typed function pointer without an object-to-function pointer cast. */
static int resolve(void *lib, const char *name, void *fn_ptr_addr) {
    void *sym = dlsym(lib, name);
    memcpy(fn_ptr_addr, &sym, sizeof sym);
    if (!sym) printf("FAIL dlsym %s: %s\n", name, dlerror());
    return sym != NULL;
}

static int check_status(q4vk_status st, const char *call) {
    if (st == Q4VK_OK) return 1;
    char msg[512];
    api.last_error(msg, sizeof msg);
    printf("FAIL %s: status %u: %s\n", call, st, msg);
    failures++;
    return 0;
}

static q4vk_context *make_context(log_state *log, const void *cache, size_t cache_size, const void *tuned,
                                  size_t tuned_size) {
    q4vk_context_desc d;
    api.context_desc_default(&d);
    d.header_version = Q4VK_HEADER_VERSION;
    d.flags = Q4VK_CONTEXT_VALIDATION;
    d.log = on_log;
    d.log_user = log;
    d.log_level = Q4VK_LOG_INFO; /* to see the "validation layer enabled" line */
    d.pipeline_cache_data = cache;
    d.pipeline_cache_size = cache_size;
    d.tuning_data = tuned;
    d.tuning_size = tuned_size;
    q4vk_context *ctx = NULL;
    return check_status(api.context_create(&d, &ctx), "q4vk_context_create") ? ctx : NULL;
}

/* Quantizes a random [n][k] f32 weight, uploads it as Q4 and as FLOAT, runs m = 1..4. */
static void run_case(q4vk_context *ctx, size_t n, size_t k, int group, int zero_points) {
    char what[160];
    rng r = {0xd1 + n * 7 + k};
    float *w = malloc(n * k * sizeof *w);
    for (size_t i = 0; i < n * k; i++) w[i] = (float)rng_normal(&r);
    q4vk_matrix_desc md;
    api.matrix_desc_default(&md);
    md.n = n;
    md.k = k;
    md.group_size = group;
    md.zero_points = (uint32_t)zero_points;
    md.dtype = Q4VK_DTYPE_F32;
    md.weight = w;
    md.weight_bytes = n * k * sizeof *w;
    size_t wb = 0, sb = 0, zb = 0;
    if (!check_status(api.q4_size(&md, &wb, &sb, &zb), "q4vk_q4_quantize_size")) return;
    uint8_t *qw = malloc(wb), *qz = malloc(zb ? zb : 1);
    uint16_t *qs = malloc(sb);
    q4vk_matrix *from_float = NULL, *from_q4 = NULL;
    if (check_status(api.q4_quantize(&md, qw, wb, qs, sb, zb ? qz : NULL, zb), "q4vk_q4_quantize") &&
        check_status(api.matrix_create(ctx, &md, &from_float), "q4vk_matrix_create (FLOAT)")) {
        q4vk_matrix_desc qd = md;
        qd.source = Q4VK_SOURCE_Q4;
        qd.dtype = Q4VK_DTYPE_F16; /* scale type */
        qd.weight = qw;
        qd.weight_bytes = wb;
        qd.scales = qs;
        qd.scales_bytes = sb;
        qd.zeros = zb ? qz : NULL;
        qd.zeros_bytes = zb;
        check_status(api.matrix_create(ctx, &qd, &from_q4), "q4vk_matrix_create (Q4)");
    }
    if (from_float && from_q4) {
        /* W = (u - z) * s, z = 8 when symmetric, in f64. */
        size_t g = group < 0 ? k : (size_t)group, groups = (k + g - 1) / g, row_bytes = (k + 1) / 2;
        double *deq = malloc(n * k * sizeof *deq);
        for (size_t i = 0; i < n; i++)
            for (size_t c = 0; c < k; c++) {
                uint8_t b = qw[i * row_bytes + c / 2];
                int u = c % 2 ? b >> 4 : b & 0xf;
                size_t gi = i * groups + c / g;
                int z = zero_points ? qz[gi] : 8;
                deq[i * k + c] = (double)(u - z) * f16_to_f32(qs[gi]);
            }
        for (uint32_t m = 1; m <= 4; m++) {
            float *x = malloc(m * k * sizeof *x), *y = malloc(m * n * sizeof *y);
            for (size_t i = 0; i < m * k; i++) x[i] = (float)(rng_uniform(&r) * 2 - 1);
            for (int source = 0; source < 2; source++) {
                for (size_t i = 0; i < m * n; i++) y[i] = NAN;
                if (!check_status(api.gemv(ctx, source ? from_q4 : from_float, x, m * k, y, m * n, m),
                                  "q4vk_gemv"))
                    continue;
                double num = 0, den = 0;
                for (uint32_t row = 0; row < m; row++)
                    for (size_t i = 0; i < n; i++) {
                        double ref = 0;
                        for (size_t c = 0; c < k; c++) ref += (double)x[row * k + c] * deq[i * k + c];
                        double d = (double)y[row * n + i] - ref;
                        num += d * d;
                        den += ref * ref;
                    }
                double err = sqrt(num / den);
                snprintf(what, sizeof what, "n=%zu k=%zu g=%d%s %s m=%u: rel err %.2e < 1e-5", n, k, group,
                         zero_points ? " zp" : "", source ? "Q4" : "FLOAT", m, err);
                expect(err < 1e-5, what); /* NaN (unwritten y) fails too */
            }
            free(x);
            free(y);
        }
        free(deq);
    }
    api.matrix_destroy(from_float);
    api.matrix_destroy(from_q4);
    free(w);
    free(qw);
    free(qz);
    free(qs);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s libq4vk.so\n", argv[0]);
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("FAIL dlopen(%s): %s\n", argv[1], dlerror());
        return 1;
    }
    int ok = resolve(lib, "q4vk_last_error_message", &api.last_error) &
             resolve(lib, "q4vk_context_desc_default", &api.context_desc_default) &
             resolve(lib, "q4vk_context_create", &api.context_create) &
             resolve(lib, "q4vk_context_destroy", &api.context_destroy) &
             resolve(lib, "q4vk_context_device_name", &api.device_name) &
             resolve(lib, "q4vk_context_pipeline_cache_size", &api.cache_size) &
             resolve(lib, "q4vk_context_pipeline_cache_data", &api.cache_data) &
             resolve(lib, "q4vk_matrix_desc_default", &api.matrix_desc_default) &
             resolve(lib, "q4vk_q4_quantize_size", &api.q4_size) &
             resolve(lib, "q4vk_q4_quantize", &api.q4_quantize) &
             resolve(lib, "q4vk_matrix_create", &api.matrix_create) &
             resolve(lib, "q4vk_matrix_destroy", &api.matrix_destroy) &
             resolve(lib, "q4vk_gemv", &api.gemv) &
             resolve(lib, "q4vk_tune_desc_default", &api.tune_desc_default) &
             resolve(lib, "q4vk_context_tune", &api.tune);
    if (!ok) return 1;
    expect(1, "15 functions resolved with dlsym");

    log_state log = {0};
    q4vk_context *ctx = make_context(&log, NULL, 0, NULL, 0);
    if (!ctx) return 1;
    char name[256];
    api.device_name(ctx, name, sizeof name);
    printf("     device: %s\n", name);
    expect(log.validation_on, "the validation layer is enabled");
    run_case(ctx, 64, 256, 128, 0);
    run_case(ctx, 37, 300, 64, 1);
    run_case(ctx, 130, 97, -1, 0);

    /* Pipeline-cache blob: save, seed a second context, run again. */
    size_t size = 0, written = 0;
    void *blob = NULL;
    if (check_status(api.cache_size(ctx, &size), "q4vk_context_pipeline_cache_size")) {
        blob = malloc(size);
        check_status(api.cache_data(ctx, blob, size, &written), "q4vk_context_pipeline_cache_data");
        char what[96];
        snprintf(what, sizeof what, "pipeline-cache blob: %zu bytes", written);
        expect(written == size && size >= 32, what);
    }
    /* A short tuning run on one small shape: its blob goes to the next context. */
    q4vk_tune_desc td;
    api.tune_desc_default(&td);
    const uint64_t shapes[2] = {96, 1024};
    const uint32_t ms[1] = {1};
    td.budget_ms = 300;
    td.shape_count = 1;
    td.shapes = shapes;
    td.m_count = 1;
    td.ms = ms;
    td.cold_bytes = 1 << 20;
    unsigned char tuned[Q4VK_TUNING_BLOB_MAX_BYTES];
    size_t tuned_size = 0;
    q4vk_tune_info ti;
    memset(&ti, 0, sizeof ti);
    ti.struct_size = sizeof ti;
    if (check_status(api.tune(ctx, &td, tuned, sizeof tuned, &tuned_size, &ti), "q4vk_context_tune")) {
        char what[160];
        /* Groups by bits: long rows 1, many rows 2, m = 1 4. Only calls of m = 1 on a matrix of
           short rows and few rows were timed (group 4): the others keep the table's shape of
           their row length. */
        const q4vk_tuned_simt_gemv *g = ti.simt_groups;
        snprintf(what, sizeof what, "tuning blob: %zu bytes, %u of %u shapes timed, at m = 1 workgroup %u, %u rows",
                 tuned_size, ti.candidates_timed, ti.candidates, g[4].shape.workgroup, g[4].shape.rows);
        expect(tuned_size > 0 && ti.simt_group_count == 8 && ti.many_rows_from == 4096 &&
                   ti.long_rows_from_k == 4096 && g[4].decode == 1 && g[4].long_rows == 0 && g[4].many_rows == 0 &&
                   g[4].candidates_timed >= 1 && ti.candidates_timed == g[4].candidates_timed &&
                   g[4].time_vs_table <= 1.0 && g[4].shape.workgroup >= 1 && g[4].shape.rows >= 1,
               what);
        int kept = 1;
        for (int i = 0; i < 8; i++) {
            if (i == 4) continue;
            const q4vk_simt_gemv_shape *s = &g[i].shape, *t = &g[i].table_shape;
            kept = kept && g[i].candidates_timed == 0 && g[i].time_vs_table == 1.0 && s->workgroup == t->workgroup &&
                   s->rows == t->rows && s->unroll == t->unroll && s->split == t->split &&
                   s->word_lanes == t->word_lanes && (i & 1 ? t->workgroup == ti.long_rows_table_workgroup
                                                            : t->workgroup == ti.table_workgroup);
        }
        expect(kept, "tuning keeps the table's shape for the groups no call was of");
        /* k = 1024 is whole Q4_K blocks and m = 1 one pass: the GEMV on blocks is tuned too. */
        expect(ti.blocks_candidates_timed >= 1 && ti.blocks_time_vs_table <= 1.0 && ti.blocks_rows >= 1 &&
                   ti.blocks_unroll >= 1 && ti.blocks_table_rows >= 1 && ti.blocks_table_unroll >= 1,
               "tuning times the GEMV on GGUF blocks");
        /* The integer dot-product GEMV is timed only where the context runs it; else its
           row's shape is kept. */
        expect(ti.int_dot_time_vs_table <= 1.0 && ti.int_dot_table_workgroup >= 1 && ti.reserved1 == 0 &&
                   (ti.int_dot_candidates_timed > 0 ||
                    (ti.int_dot_time_vs_table == 1.0 && ti.int_dot_workgroup == ti.int_dot_table_workgroup &&
                     ti.int_dot_rows == ti.int_dot_table_rows && ti.int_dot_unroll == ti.int_dot_table_unroll &&
                     ti.int_dot_split == ti.int_dot_table_split &&
                     ti.int_dot_word_lanes == ti.int_dot_table_word_lanes)),
               "tuning reports the integer dot-product GEMV's shape");
        /* The default desc times the tiles of the SIMT GEMM and of the GEMM on GGUF blocks
           at m = 64 where the context runs them there (not where its GEMM at m = 64 is the
           tensor-core one). */
        const q4vk_tuned_gemm *gemms[2] = {ti.gemm, ti.blocks_gemm};
        const uint32_t counts[2] = {ti.gemm_count, ti.blocks_gemm_count};
        for (int g = 0; g < 2; g++) {
            const q4vk_tuned_gemm *t = gemms[g];
            expect(ti.reserved2 == 0 && ti.reserved3 == 0 && counts[g] <= 1 &&
                       (counts[g] == 0 ||
                        (t[0].m == 64 && t[0].candidates_timed >= 1 && t[0].time_vs_table > 0.0 &&
                         t[0].time_vs_table <= 1.0 && t[0].table_tile.rows_per_invocation >= 4 &&
                         t[0].tile.tokens_per_invocation >= 4)) &&
                       t[1].m == 0,
                   g ? "tuning reports the GEMM on GGUF blocks' tile at the default prefill m"
                     : "tuning reports the SIMT GEMM's tile at the default prefill m");
        }
    }
    api.context_destroy(ctx);
    log_state log2 = {0};
    q4vk_context *ctx2 = make_context(&log2, blob, written, tuned, tuned_size);
    free(blob);
    if (ctx2) {
        expect(log2.tuned_shape, "the second context uses the tuned shape");
        run_case(ctx2, 48, 128, 32, 1);
        api.context_destroy(ctx2);
    }

    int messages = log.messages + log2.messages;
    char what[700];
    snprintf(what, sizeof what, "no validation or other WARN/ERROR message (%d%s%s)", messages,
             messages ? "; last: " : "", log.messages ? log.last : log2.last);
    expect(messages == 0, what);
    if (dlclose(lib) != 0) {
        printf("FAIL dlclose: %s\n", dlerror());
        failures++;
    }
    printf("\n%s: Vulkan path through dlopen/dlsym, %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
    return failures ? 1 : 0;
}
