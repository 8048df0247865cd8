/* gguf_import: builds q4vk matrices straight from the quantized tensors of a .gguf file,
 * without requantizing, whatever their types. Reads the file with the minimal reader
 * (gguf_reader.h), lists its metadata and tensors, and for each 2-D tensor asks
 * q4vk_source_from_ggml_type for its source: a type q4vk does not take (F16 embeddings,
 * Q3_K ...) is reported with q4vk's message and left to the host. Every other tensor's raw
 * blocks become a matrix: q4vk_matrix_dequantize must succeed with finite weights, then a
 * matrix on a validated Vulkan context runs q4vk_gemv for m = 1 (one token) and 3 with
 * seeded random x; y (poisoned with NaN first) must be fully written and within 1e-5
 * (relative L2) of an f64 GEMV of the dequantized weights. At the end a table per type
 * gives the tensors, the file's bytes, the bytes a GEMV reads (q4vk_gemv_plan) and the
 * device memory (q4vk_matrix_footprint); the bytes read must be within 3% of the file's
 * (the weights stay in their native size on the device). Any validation or WARN/ERROR
 * message fails. With --round-x-int8 each GEMV runs through q4vk_gemv_host with
 * Q4VK_GEMV_ROUND_X_TO_INT8 instead, as an engine running a GGUF model on a phone calls it:
 * the plan must name the pre-pass that rounds x to bytes, and each output must lie within
 * what rounding x to bytes allows (per 32 columns d = max|x| / 127, each x within d / 2:
 * sum |w|·d / 2 over the row, plus 1e-5 of sum |w·x| for f32 accumulation) of the f64
 * GEMV on exact x (run it where the integer dot-product GEMV runs: Q4VK_INTDOT=1 on
 * lavapipe).
 *   gguf_import FILE [--expect N] [--golden TENSOR REF]... [--round-x-int8]
 *       N: how many matrices the file must give; REF: an f32 file whose first n·k values
 *       the dequantized TENSOR must equal bit for bit (e.g. gguf-py's dequantize)
 *   gguf_import --self-test FILE    the reader on every truncation of FILE and on damaged
 *                                   copies: each must be refused with a message, no crash
 * Exit status 0 only when every check passes. */
#define _POSIX_C_SOURCE 200809L
#include "q4vk.h"

#include <math.h>

#include "gguf_reader.h"
#include "util.h"

static int failures;
static void expect(int ok, const char *what) {
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok) failures++;
}

/* --round-x-int8: the GEMVs run on x rounded to bytes. */
static int round_x_int8;

/* --golden pairs: tensor name, reference f32 file; and whether the tensor was compared. */
enum { MAX_GOLDEN = 16 };
static const char *golden_name[MAX_GOLDEN], *golden_path[MAX_GOLDEN];
static int golden_count, golden_used[MAX_GOLDEN];

typedef struct log_state {
    int messages;      /* WARN or ERROR */
    int validation_on; /* the INFO line saying the layer is enabled */
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
    }
}

static void q4_fail(const char *call) {
    char msg[512];
    q4vk_last_error_message(msg, sizeof msg);
    printf("FAIL %s: %s\n", call, msg);
    failures++;
}

/* Per ggml type: the tensors imported, their bytes in the file, the bytes a GEMV reads and
 * the device memory their matrices take. */
enum { MAX_TYPES = 64 };
typedef struct type_total {
    uint32_t type;
    int tensors;
    uint64_t file_bytes, read_bytes, device_bytes;
} type_total;
static type_total totals[MAX_TYPES];
static int total_count;

static type_total *total_of(uint32_t type) {
    for (int i = 0; i < total_count; i++)
        if (totals[i].type == type) return &totals[i];
    if (total_count == MAX_TYPES) return NULL;
    totals[total_count].type = type;
    return &totals[total_count++];
}

/* The GEMV on x rounded to bytes: q4vk_gemv_host with Q4VK_GEMV_ROUND_X_TO_INT8, whose plan
 * must round x to bytes; returns the call's status. */
static q4vk_status gemv_on_bytes(q4vk_context *ctx, const q4vk_matrix *mat, const float *x, float *y, size_t n,
                                 size_t k, uint32_t m, const char *name) {
    uint64_t ws = 0;
    q4vk_gemv_plan_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (q4vk_gemv_workspace_size(ctx, mat, m, Q4VK_GEMV_ROUND_X_TO_INT8, &ws) != Q4VK_OK ||
        q4vk_gemv_plan(ctx, mat, m, Q4VK_GEMV_ROUND_X_TO_INT8, ws, &info) != Q4VK_OK) {
        q4_fail("q4vk_gemv_plan");
        return Q4VK_ERROR_INVALID_ARGUMENT;
    }
    char what[256];
    snprintf(what, sizeof what, "%s: m = %u plans the pre-pass rounding x to bytes (%s)", name, m, info.name);
    expect(info.prepass == Q4VK_GEMV_PREPASS_BYTES, what);
    q4vk_gemv_host_args args;
    q4vk_gemv_host_args_default(&args);
    args.flags = Q4VK_GEMV_ROUND_X_TO_INT8;
    args.m = m;
    args.x = x;
    args.x_bytes = m * k * sizeof *x;
    args.y = y;
    args.y_len = m * n;
    q4vk_status status = q4vk_gemv_host(ctx, mat, &args);
    if (status != Q4VK_OK) q4_fail("q4vk_gemv_host");
    return status;
}

/* One GEMV of `mat` with m rows of x against the f64 reference of the weights `w`: within
 * 1e-5 (relative L2) on exact x, or, with --round-x-int8, each output within the bound
 * rounding x to bytes allows. */
static void check_gemv(q4vk_context *ctx, const q4vk_matrix *mat, const float *w, size_t n, size_t k, uint32_t m,
                       const char *name) {
    float *x = malloc(m * k * sizeof *x), *y = malloc(m * n * sizeof *y);
    rng r = {0x9e3779b97f4a7c15ULL ^ (n * 131 + k * 7 + m)};
    for (size_t i = 0; i < m * k; i++) x[i] = (float)(rng_uniform(&r) * 2.0 - 1.0);
    for (size_t i = 0; i < m * n; i++) y[i] = NAN;
    q4vk_status status = round_x_int8 ? gemv_on_bytes(ctx, mat, x, y, n, k, m, name)
                                      : q4vk_gemv(ctx, mat, x, m * k, y, m * n, m);
    if (status != Q4VK_OK) {
        if (!round_x_int8) q4_fail("q4vk_gemv");
    } else {
        double diff = 0, norm = 0;
        size_t unwritten = 0, outside = 0;
        for (size_t row = 0; row < m; row++) {
            const float *xr = x + row * k;
            for (size_t o = 0; o < n; o++) {
                double ref = 0, bound = 0, size = 0;
                for (size_t i = 0; i < k; i++) {
                    double wi = (double)w[o * k + i];
                    ref += wi * (double)xr[i];
                    size += fabs(wi * (double)xr[i]);
                }
                /* Per chunk of 32 columns: d / 2 (and a little for the f32 roundings of the
                 * pre-pass's quotient) times the chunk's sum of |w|. */
                for (size_t c = 0; round_x_int8 && c < k; c += 32) {
                    double largest = 0, weights = 0;
                    for (size_t i = c; i < c + 32 && i < k; i++) {
                        if (fabs((double)xr[i]) > largest) largest = fabs((double)xr[i]);
                        weights += fabs((double)w[o * k + i]);
                    }
                    bound += weights * largest / 127.0 * (0.5 + 1.0 / 1024.0);
                }
                float v = y[row * n + o];
                if (!isfinite(v)) unwritten++;
                if (fabs((double)v - ref) > bound + 1e-5 * size + 1e-30) outside++;
                diff += ((double)v - ref) * ((double)v - ref);
                norm += ref * ref;
            }
        }
        double err = norm > 0 ? sqrt(diff / norm) : sqrt(diff);
        char what[256];
        if (round_x_int8) {
            snprintf(what, sizeof what,
                     "%s: m = %u on x in bytes: every y written (%zu not), %zu outside the bound, rel. error %.2e",
                     name, m, unwritten, outside, err);
            expect(unwritten == 0 && outside == 0, what);
        } else {
            snprintf(what, sizeof what, "%s: q4vk_gemv m = %u: every y written (%zu not), rel. error %.2e < 1e-5",
                     name, m, unwritten, err);
            expect(unwritten == 0 && err < 1e-5, what);
        }
    }
    free(x);
    free(y);
}

/* Dequantizes, uploads and multiplies one tensor of source `source`; returns 1 if it was
 * attempted. */
static int import_tensor(q4vk_context *ctx, const gguf_tensor *t, q4vk_matrix_source source) {
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(t->name_len < 100 ? t->name_len : 100), t->name);
    q4vk_matrix_desc md;
    q4vk_matrix_desc_default(&md);
    md.source = source;
    md.n = t->ne[1];
    md.k = t->ne[0];
    md.weight = t->data;
    md.weight_bytes = (size_t)t->nbytes;
    if (md.n > SIZE_MAX / md.k / sizeof(float)) {
        printf("FAIL %s: %llu x %llu weights do not fit in memory\n", name, (unsigned long long)md.n,
               (unsigned long long)md.k);
        failures++;
        return 1;
    }
    size_t count = (size_t)(md.n * md.k);
    float *w = malloc(count * sizeof *w);
    if (!w) {
        printf("FAIL %s: out of memory\n", name);
        failures++;
        return 1;
    }
    if (q4vk_matrix_dequantize(&md, w, count * sizeof *w) != Q4VK_OK) {
        q4_fail("q4vk_matrix_dequantize");
    } else {
        size_t bad = 0;
        double sum = 0;
        for (size_t i = 0; i < count; i++) {
            if (!isfinite(w[i])) bad++;
            sum += fabs((double)w[i]);
        }
        char what[256];
        snprintf(what, sizeof what, "%s: q4vk_matrix_dequantize: %zu weights, all finite (%zu not), mean |w| %.4g",
                 name, count, bad, sum / (double)count);
        expect(bad == 0 && sum > 0, what);
        for (int g = 0; g < golden_count; g++) {
            if (strcmp(golden_name[g], name)) continue;
            golden_used[g] = 1;
            size_t ref_len = 0, differ = 0;
            float *ref = read_file(golden_path[g], &ref_len);
            if (ref && ref_len >= count * sizeof *ref)
                for (size_t i = 0; i < count; i++) differ += f32_bits(ref[i]) != f32_bits(w[i]);
            snprintf(what, sizeof what, "%s: dequantized weights equal %s bit for bit (%zu of %zu differ)", name,
                     golden_path[g], differ, count);
            expect(ref && ref_len >= count * sizeof *ref && differ == 0, what);
            free(ref);
        }
        q4vk_matrix *mat = NULL;
        q4vk_matrix_footprint_info fp = {.struct_size = sizeof fp};
        q4vk_gemv_plan_info plan = {.struct_size = sizeof plan};
        if (q4vk_matrix_footprint(ctx, &md, &fp) != Q4VK_OK) {
            q4_fail("q4vk_matrix_footprint");
        } else if (q4vk_matrix_create(ctx, &md, &mat) != Q4VK_OK) {
            q4_fail("q4vk_matrix_create");
        } else if (q4vk_gemv_plan(ctx, mat, 1, 0, UINT64_MAX, &plan) != Q4VK_OK) {
            q4_fail("q4vk_gemv_plan");
            q4vk_matrix_destroy(mat);
        } else {
            type_total *total = total_of(t->type);
            if (total) {
                total->tensors++;
                total->file_bytes += t->nbytes;
                total->read_bytes += plan.matrix_bytes;
                total->device_bytes += fp.device_bytes;
            }
            printf("     %s, %llu bytes read per GEMV\n", plan.name, (unsigned long long)plan.matrix_bytes);
            check_gemv(ctx, mat, w, (size_t)md.n, (size_t)md.k, 1, name);
            check_gemv(ctx, mat, w, (size_t)md.n, (size_t)md.k, 3, name);
            q4vk_matrix_destroy(mat);
        }
    }
    free(w);
    return 1;
}

static void print_kv(const gguf_kv *kv) {
    printf("     %.*s: ", (int)kv->key_len, kv->key);
    uint64_t len = 0;
    switch (kv->type) {
    case GGUF_VALUE_STRING:
        for (int i = 0; i < 8; i++) len |= (uint64_t)kv->value[i] << (8 * i);
        printf("\"%.*s\"\n", (int)(len < 60 ? len : 60), (const char *)kv->value + 8);
        break;
    case GGUF_VALUE_UINT32:
        printf("%u\n",
               (unsigned)(kv->value[0] | kv->value[1] << 8 | kv->value[2] << 16 | (uint32_t)kv->value[3] << 24));
        break;
    case GGUF_VALUE_ARRAY:
        for (int i = 0; i < 8; i++) len |= (uint64_t)kv->value[4 + i] << (8 * i);
        printf("array of %llu (item type %u)\n", (unsigned long long)len, kv->value[0]);
        break;
    default: printf("type %u, %zu bytes\n", kv->type, kv->value_bytes);
    }
}

static int run(const uint8_t *data, size_t size, long expected) {
    char err[256];
    gguf_file f;
    if (gguf_parse(data, size, &f, err, sizeof err)) {
        printf("FAIL: %s\n", err);
        return 1;
    }
    printf("GGUF v%u: %llu metadata entries, %llu tensors, alignment %u, data at %llu\n", f.version,
           (unsigned long long)f.kv_count, (unsigned long long)f.tensor_count, f.alignment,
           (unsigned long long)f.data_offset);
    for (uint64_t i = 0; i < f.kv_count; i++) print_kv(&f.kvs[i]);

    log_state log = {0};
    q4vk_context_desc cd;
    q4vk_context_desc_default(&cd);
    cd.flags = Q4VK_CONTEXT_VALIDATION;
    cd.log = on_log;
    cd.log_user = &log;
    cd.log_level = Q4VK_LOG_INFO; /* to see the "validation layer enabled" line */
    q4vk_context *ctx = NULL;
    if (q4vk_context_create(&cd, &ctx) != Q4VK_OK) {
        q4_fail("q4vk_context_create");
        gguf_free(&f);
        return 1;
    }
    char device[256];
    q4vk_context_device_name(ctx, device, sizeof device);
    printf("     device: %s\n", device);
    expect(log.validation_on, "the validation layer is enabled");

    long imported = 0;
    for (uint64_t i = 0; i < f.tensor_count; i++) {
        const gguf_tensor *t = &f.tensors[i];
        int is_matrix = t->ne[2] == 1 && t->ne[3] == 1; /* 1-D (one row) or 2-D */
        printf("tensor %.*s: %s [%llu, %llu, %llu, %llu], %llu bytes at %llu", (int)t->name_len, t->name,
               gguf_type_name(t->type), (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
               (unsigned long long)t->ne[2], (unsigned long long)t->ne[3], (unsigned long long)t->nbytes,
               (unsigned long long)t->offset);
        q4vk_matrix_source source = 0;
        if (!is_matrix || t->n_dims < 2) {
            printf(": not a matrix, left to the host\n");
            continue;
        }
        if (q4vk_source_from_ggml_type(t->type, &source) != Q4VK_OK) {
            char msg[512];
            q4vk_last_error_message(msg, sizeof msg);
            printf(": left to the host (%s)\n", msg);
            continue;
        }
        printf("\n");
        imported += import_tensor(ctx, t, source);
    }
    q4vk_context_destroy(ctx);
    gguf_free(&f);

    const double mib = 1024.0 * 1024.0;
    printf("\n%-8s %7s %10s %10s %10s\n", "type", "tensors", "file MiB", "read MiB", "device MiB");
    for (int i = 0; i < total_count; i++) {
        const type_total *tt = &totals[i];
        printf("%-8s %7d %10.4f %10.4f %10.4f\n", gguf_type_name(tt->type), tt->tensors, tt->file_bytes / mib,
               tt->read_bytes / mib, tt->device_bytes / mib);
    }
    for (int i = 0; i < total_count; i++) {
        const type_total *tt = &totals[i];
        char line[256];
        snprintf(line, sizeof line, "%s: a GEMV reads %.4f of the file's bytes (native size: at most 1.03)",
                 gguf_type_name(tt->type), (double)tt->read_bytes / (double)tt->file_bytes);
        expect((double)tt->read_bytes <= 1.03 * (double)tt->file_bytes, line);
    }

    char what[700];
    snprintf(what, sizeof what, "no validation or other WARN/ERROR message (%d%s%s)", log.messages,
             log.messages ? "; last: " : "", log.last);
    expect(log.messages == 0, what);
    snprintf(what, sizeof what, "%ld matrices imported (%s %ld)", imported,
             expected >= 0 ? "expected" : "at least", expected >= 0 ? expected : 1);
    expect(expected >= 0 ? imported == expected : imported > 0, what);
    for (int g = 0; g < golden_count; g++) {
        snprintf(what, sizeof what, "--golden %s: the tensor was imported and compared", golden_name[g]);
        expect(golden_used[g], what);
    }
    return 0;
}

/* gguf_parse on a private copy of `len` bytes (so a sanitizer sees any read past it). */
static int parse_copy(const uint8_t *data, size_t len, char *err, size_t err_len) {
    uint8_t *copy = malloc(len ? len : 1);
    if (len) memcpy(copy, data, len);
    gguf_file f;
    err[0] = 0;
    int rc = gguf_parse(len ? copy : NULL, len, &f, err, err_len);
    if (rc == 0) gguf_free(&f);
    free(copy);
    return rc;
}

/* A damaged copy (one u32 or u64 at `at` replaced) must be refused with `word` in the
 * message. */
static void refuse_patched(const uint8_t *data, size_t size, size_t at, uint64_t v, int bytes, const char *word,
                           const char *what) {
    uint8_t *copy = malloc(size);
    memcpy(copy, data, size);
    for (int i = 0; i < bytes; i++) copy[at + i] = (uint8_t)(v >> (8 * i));
    char err[256], line[512];
    int rc = parse_copy(copy, size, err, sizeof err);
    snprintf(line, sizeof line, "%s: refused (%s)", what, rc ? err : "accepted!");
    expect(rc != 0 && strstr(err, word) != NULL, line);
    free(copy);
}

static int self_test(const uint8_t *data, size_t size) {
    char err[256], what[512];
    gguf_file f;
    if (gguf_parse(data, size, &f, err, sizeof err)) {
        printf("FAIL: the intact file is refused: %s\n", err);
        return 1;
    }
    expect(f.tensor_count > 0 && f.kv_count > 0, "the intact file parses, with tensors and metadata");

    size_t silent = 0, accepted = 0;
    for (size_t len = 0; len < size; len++) {
        int rc = parse_copy(data, len, err, sizeof err);
        if (rc == 0) accepted++;
        else if (!err[0]) silent++;
    }
    snprintf(what, sizeof what,
             "every truncation (0..%zu bytes) refused with a message (%zu accepted, %zu without message)", size - 1,
             accepted, silent);
    expect(accepted == 0 && silent == 0, what);

    refuse_patched(data, size, 0, 0x46554746u, 4, "not a GGUF", "bad magic");
    refuse_patched(data, size, 4, 1, 4, "version", "version 1");
    refuse_patched(data, size, 4, 4, 4, "version", "version 4");
    refuse_patched(data, size, 4, 0x03000000u, 4, "big-endian", "byte-swapped version");
    refuse_patched(data, size, 8, UINT64_MAX, 8, "truncated", "tensor count 2^64-1");
    refuse_patched(data, size, 16, UINT64_MAX / 2, 8, "truncated", "metadata count 2^63-1");
    const gguf_kv *align = gguf_find_kv(&f, "general.alignment");
    if (align) {
        size_t at = (size_t)(align->value - data);
        refuse_patched(data, size, at, 48, 4, "power of two", "general.alignment = 48");
        refuse_patched(data, size, at, 0, 4, "power of two", "general.alignment = 0");
        refuse_patched(data, size, at - 4, GGUF_VALUE_UINT64, 4, "not u32", "general.alignment stored as u64");
    }
    /* The last tensor info: its ne0, type and offset fields, found from its name. */
    const gguf_tensor *t = &f.tensors[f.tensor_count - 1];
    size_t dims_at = (size_t)((const uint8_t *)t->name - data) + t->name_len + 4;
    size_t type_at = dims_at + 8 * t->n_dims, offset_at = type_at + 4;
    refuse_patched(data, size, dims_at, UINT64_MAX / 2, 8, "overflows", "ne0 = 2^63-1");
    refuse_patched(data, size, dims_at, 0, 8, "is 0", "ne0 = 0");
    refuse_patched(data, size, type_at, 99, 4, "unknown ggml type", "ggml type 99");
    refuse_patched(data, size, offset_at, (uint64_t)f.alignment * 1000000, 8, "past the end",
                   "offset beyond the file");
    refuse_patched(data, size, offset_at, UINT64_MAX - (f.alignment - 1), 8, "past the end",
                   "offset 2^64 - alignment");
    refuse_patched(data, size, offset_at, t->offset + 1, 8, "alignment", "unaligned offset");
    refuse_patched(data, size, dims_at - 4, 5, 4, "dimensions", "n_dims = 5");
    size_t name_len_at = (size_t)((const uint8_t *)t->name - data) - 8;
    refuse_patched(data, size, name_len_at, 65, 8, "at most 64", "a tensor name of 65 bytes");
    /* A later tensor renamed to the first one's name (same length keeps the layout). */
    for (uint64_t j = 1; j < f.tensor_count; j++) {
        const gguf_tensor *t0 = &f.tensors[0], *tj = &f.tensors[j];
        if (t0->name_len != tj->name_len) continue;
        uint8_t *copy = malloc(size);
        memcpy(copy, data, size);
        memcpy(copy + ((const uint8_t *)tj->name - data), t0->name, t0->name_len);
        int rc = parse_copy(copy, size, err, sizeof err);
        snprintf(what, sizeof what, "duplicate tensor name: refused (%s)", rc ? err : "accepted!");
        expect(rc != 0 && strstr(err, "duplicate"), what);
        free(copy);
        break;
    }

    /* Every byte of the header, metadata and tensor infos flipped in turn: no crash, and
     * every refusal carries a message. */
    size_t refused = 0;
    silent = 0;
    uint8_t *copy = malloc(size);
    for (size_t i = 0; i < f.data_offset; i++) {
        memcpy(copy, data, size);
        copy[i] ^= 0xff;
        if (parse_copy(copy, size, err, sizeof err)) {
            refused++;
            if (!err[0]) silent++;
        }
    }
    free(copy);
    snprintf(what, sizeof what,
             "each of %llu header bytes flipped: no crash, %zu refused, all with a message (%zu without)",
             (unsigned long long)f.data_offset, refused, silent);
    expect(silent == 0 && refused > 0, what);
    gguf_free(&f);
    return 0;
}

int main(int argc, char **argv) {
    int self = argc >= 2 && !strcmp(argv[1], "--self-test");
    const char *path = argc >= 2 + self ? argv[1 + self] : NULL;
    long expected = -1;
    int usage = !path || (self && argc != 3);
    for (int i = 2; !self && !usage && i < argc; i++) {
        if (!strcmp(argv[i], "--expect") && i + 1 < argc) {
            expected = atol(argv[++i]);
        } else if (!strcmp(argv[i], "--round-x-int8")) {
            round_x_int8 = 1;
        } else if (!strcmp(argv[i], "--golden") && i + 2 < argc && golden_count < MAX_GOLDEN) {
            golden_name[golden_count] = argv[i + 1];
            golden_path[golden_count++] = argv[i + 2];
            i += 2;
        } else {
            usage = 1;
        }
    }
    if (usage) {
        fprintf(stderr,
                "usage: gguf_import FILE [--expect N] [--golden TENSOR REF.f32]... [--round-x-int8] | gguf_import "
                "--self-test FILE\n");
        return 2;
    }
    size_t size = 0;
    uint8_t *data = read_file(path, &size);
    if (!data) return 1;
    int rc = self ? self_test(data, size) : run(data, size, expected);
    free(data);
    printf("\n%s: %s, %d failure(s)\n", rc || failures ? "FAILED" : "PASSED",
           self ? "GGUF reader self-test" : "GGUF import", failures);
    return rc || failures ? 1 : 0;
}
