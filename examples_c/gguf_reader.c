/* The minimal GGUF reader: see gguf_reader.h. Every read goes through the cursor below,
 * which refuses to step past the end of the buffer; every size is computed with overflow
 * checks before it is compared with what is left. */
#include "gguf_reader.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_ARRAY_DEPTH 8
#define GGUF_MAX_KEY 65535 /* bytes of a metadata key */
#define GGUF_MAX_NAME 64   /* bytes of a tensor name (ggml's GGML_MAX_NAME) */

typedef struct cursor {
    const uint8_t *base;
    size_t size, pos;
    char *err;
    size_t err_len;
} cursor;

static int fail(cursor *c, const char *fmt, ...) {
    if (c->err && c->err_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->err_len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static size_t left(const cursor *c) { return c->size - c->pos; }

static int skip(cursor *c, uint64_t n, const char *what) {
    if (n > left(c))
        return fail(c, "truncated: %s needs %llu bytes at offset %zu, %zu left", what, (unsigned long long)n, c->pos,
                    left(c));
    c->pos += (size_t)n;
    return 0;
}

static int read_bytes(cursor *c, void *dst, size_t n, const char *what) {
    size_t at = c->pos;
    if (skip(c, n, what)) return -1;
    memcpy(dst, c->base + at, n);
    return 0;
}

/* Little-endian integers, independent of the host's byte order. */
static int read_u32(cursor *c, uint32_t *v, const char *what) {
    uint8_t b[4];
    if (read_bytes(c, b, 4, what)) return -1;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return 0;
}

static int read_u64(cursor *c, uint64_t *v, const char *what) {
    uint32_t lo, hi;
    if (read_u32(c, &lo, what) || read_u32(c, &hi, what)) return -1;
    *v = (uint64_t)hi << 32 | lo;
    return 0;
}

/* A GGUF string: u64 length, then that many bytes (not NUL-terminated). */
static int read_string(cursor *c, const char **s, size_t *len, const char *what) {
    uint64_t n;
    if (read_u64(c, &n, what)) return -1;
    size_t at = c->pos;
    if (skip(c, n, what)) return -1;
    *s = (const char *)(c->base + at);
    *len = (size_t)n;
    return 0;
}

/* Bytes of one value of a fixed-size type; 0 for STRING, ARRAY and unknown types. */
static size_t fixed_size(uint32_t type) {
    switch (type) {
    case GGUF_VALUE_UINT8:
    case GGUF_VALUE_INT8:
    case GGUF_VALUE_BOOL: return 1;
    case GGUF_VALUE_UINT16:
    case GGUF_VALUE_INT16: return 2;
    case GGUF_VALUE_UINT32:
    case GGUF_VALUE_INT32:
    case GGUF_VALUE_FLOAT32: return 4;
    case GGUF_VALUE_UINT64:
    case GGUF_VALUE_INT64:
    case GGUF_VALUE_FLOAT64: return 8;
    default: return 0;
    }
}

/* Steps over one value of `type` (checking it fits), recursing into arrays. */
static int skip_value(cursor *c, uint32_t type, int depth) {
    size_t size = fixed_size(type);
    if (size) return skip(c, size, "a metadata value");
    if (type == GGUF_VALUE_STRING) {
        const char *s;
        size_t len;
        return read_string(c, &s, &len, "a metadata string");
    }
    if (type != GGUF_VALUE_ARRAY) return fail(c, "unknown metadata value type %u at offset %zu", type, c->pos - 4);
    if (depth >= GGUF_MAX_ARRAY_DEPTH) return fail(c, "metadata arrays nested deeper than %d", GGUF_MAX_ARRAY_DEPTH);
    uint32_t item;
    uint64_t count;
    if (read_u32(c, &item, "an array item type") || read_u64(c, &count, "an array length")) return -1;
    size_t item_size = fixed_size(item);
    if (item_size) {
        if (count > left(c) / item_size)
            return fail(c, "truncated: an array of %llu items of %zu bytes at offset %zu, %zu bytes left",
                        (unsigned long long)count, item_size, c->pos, left(c));
        return skip(c, count * item_size, "array items");
    }
    if (item != GGUF_VALUE_STRING && item != GGUF_VALUE_ARRAY) return fail(c, "unknown array item type %u", item);
    /* Strings and arrays take at least 8 bytes each, so the loop ends within the buffer. */
    for (uint64_t i = 0; i < count; i++)
        if (skip_value(c, item, depth + 1)) return -1;
    return 0;
}

/* ggml's type traits: {type id, name, elements per block, bytes per block}. */
static const struct {
    uint32_t type;
    const char *name;
    uint32_t block, block_bytes;
} ggml_types[] = {
    {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},      {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},      {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 36},
    {10, "Q2_K", 256, 84},    {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66}, {17, "IQ2_XS", 256, 74},
    {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},   {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},
    {22, "IQ2_S", 256, 82},   {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},         {25, "I16", 1, 2},
    {26, "I32", 1, 4},        {27, "I64", 1, 8},        {28, "F64", 1, 8},        {29, "IQ1_M", 256, 56},
    {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},   {35, "TQ2_0", 256, 66},   {39, "MXFP4", 32, 17},
    {40, "NVFP4", 64, 36},    {41, "Q1_0", 128, 18},
};

int gguf_type_block(uint32_t type, uint32_t *block, uint32_t *block_bytes) {
    for (size_t i = 0; i < sizeof ggml_types / sizeof ggml_types[0]; i++) {
        if (ggml_types[i].type == type) {
            *block = ggml_types[i].block;
            *block_bytes = ggml_types[i].block_bytes;
            return 1;
        }
    }
    return 0;
}

const char *gguf_type_name(uint32_t type) {
    for (size_t i = 0; i < sizeof ggml_types / sizeof ggml_types[0]; i++)
        if (ggml_types[i].type == type) return ggml_types[i].name;
    return "?";
}

/* Reads one tensor info; checks dims, type, and that the byte size fits in 64 bits. */
static int read_tensor_info(cursor *c, gguf_tensor *t) {
    if (read_string(c, &t->name, &t->name_len, "a tensor name")) return -1;
    if (t->name_len > GGUF_MAX_NAME)
        return fail(c, "a tensor name of %zu bytes at offset %zu (at most %d)", t->name_len, c->pos - t->name_len,
                    GGUF_MAX_NAME);
    if (read_u32(c, &t->n_dims, "a tensor's n_dims")) return -1;
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return fail(c, "tensor '%.*s': %u dimensions (1..%d allowed)", (int)t->name_len, t->name, t->n_dims,
                    GGUF_MAX_DIMS);
    uint64_t elements = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d < t->n_dims && read_u64(c, &t->ne[d], "a tensor dimension")) return -1;
        if (t->ne[d] == 0) return fail(c, "tensor '%.*s': dimension %u is 0", (int)t->name_len, t->name, d);
        if (elements > INT64_MAX / t->ne[d])
            return fail(c, "tensor '%.*s': element count overflows", (int)t->name_len, t->name);
        elements *= t->ne[d];
    }
    if (read_u32(c, &t->type, "a tensor type") || read_u64(c, &t->offset, "a tensor offset")) return -1;
    uint32_t block, block_bytes;
    if (!gguf_type_block(t->type, &block, &block_bytes))
        return fail(c, "tensor '%.*s': unknown ggml type %u", (int)t->name_len, t->name, t->type);
    if (t->ne[0] % block)
        return fail(c, "tensor '%.*s': ne0 = %llu is not a multiple of the %s block (%u)", (int)t->name_len, t->name,
                    (unsigned long long)t->ne[0], gguf_type_name(t->type), block);
    uint64_t blocks = elements / block;
    if (blocks > INT64_MAX / block_bytes)
        return fail(c, "tensor '%.*s': byte size overflows", (int)t->name_len, t->name);
    t->nbytes = blocks * block_bytes;
    return 0;
}

static int parse(cursor *c, gguf_file *f) {
    uint8_t magic[4];
    if (read_bytes(c, magic, 4, "the magic")) return -1;
    if (memcmp(magic, "GGUF", 4))
        return fail(c, "not a GGUF file (magic %02x %02x %02x %02x)", magic[0], magic[1], magic[2], magic[3]);
    if (read_u32(c, &f->version, "the version")) return -1;
    if (f->version == 0x02000000u || f->version == 0x03000000u)
        return fail(c, "big-endian GGUF files are not supported");
    if (f->version != 2 && f->version != 3)
        return fail(c, "GGUF version %u is not supported (2 and 3 are)", f->version);
    if (read_u64(c, &f->tensor_count, "the tensor count") ||
        read_u64(c, &f->kv_count, "the metadata count")) return -1;
    /* Each entry takes at least 12 (key/value) or 24 (tensor info) bytes: bound the
     * counts by what is left before allocating. */
    if (f->kv_count > left(c) / 12)
        return fail(c, "truncated: %llu metadata entries cannot fit in %zu bytes", (unsigned long long)f->kv_count,
                    left(c));
    if (f->tensor_count > left(c) / 24)
        return fail(c, "truncated: %llu tensor infos cannot fit in %zu bytes", (unsigned long long)f->tensor_count,
                    left(c));
    f->kvs = calloc(f->kv_count ? (size_t)f->kv_count : 1, sizeof *f->kvs);
    f->tensors = calloc(f->tensor_count ? (size_t)f->tensor_count : 1, sizeof *f->tensors);
    if (!f->kvs || !f->tensors) return fail(c, "out of memory");

    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < f->kv_count; i++) {
        gguf_kv *kv = &f->kvs[i];
        if (read_string(c, &kv->key, &kv->key_len, "a metadata key")) return -1;
        if (kv->key_len > GGUF_MAX_KEY)
            return fail(c, "a metadata key of %zu bytes at offset %zu (at most %d)", kv->key_len, c->pos - kv->key_len,
                        GGUF_MAX_KEY);
        if (read_u32(c, &kv->type, "a metadata type")) return -1;
        size_t at = c->pos;
        if (skip_value(c, kv->type, 0)) return -1;
        kv->value = c->base + at;
        kv->value_bytes = c->pos - at;
        if (kv->key_len == 17 && !memcmp(kv->key, "general.alignment", 17)) {
            if (kv->type != GGUF_VALUE_UINT32) return fail(c, "general.alignment has type %u, not u32", kv->type);
            const uint8_t *v = kv->value;
            uint32_t a = (uint32_t)v[0] | (uint32_t)v[1] << 8 | (uint32_t)v[2] << 16 | (uint32_t)v[3] << 24;
            if (a == 0 || (a & (a - 1))) return fail(c, "general.alignment = %u is not a power of two", a);
            f->alignment = a;
        }
    }
    for (uint64_t i = 0; i < f->tensor_count; i++) {
        gguf_tensor *t = &f->tensors[i];
        if (read_tensor_info(c, t)) return -1;
        for (uint64_t j = 0; j < i; j++)
            if (f->tensors[j].name_len == t->name_len && !memcmp(f->tensors[j].name, t->name, t->name_len))
                return fail(c, "duplicate tensor name '%.*s'", (int)t->name_len, t->name);
    }

    /* The data section starts at the aligned end of the tensor infos. */
    uint64_t pad = (f->alignment - c->pos % f->alignment) % f->alignment;
    if (skip(c, pad, "the padding before the tensor data")) return -1;
    f->data_offset = c->pos;
    uint64_t data_size = left(c);
    for (uint64_t i = 0; i < f->tensor_count; i++) {
        gguf_tensor *t = &f->tensors[i];
        if (t->offset % f->alignment)
            return fail(c, "tensor '%.*s': offset %llu is not a multiple of the alignment %u", (int)t->name_len,
                        t->name, (unsigned long long)t->offset, f->alignment);
        /* gguf-py and llama.cpp pad every tensor (the last one too) to the alignment. */
        uint64_t padded = t->nbytes + (f->alignment - t->nbytes % f->alignment) % f->alignment;
        if (padded < t->nbytes || t->offset > data_size || padded > data_size - t->offset)
            return fail(c, "tensor '%.*s': data [%llu, +%llu) runs past the end of the data section (%llu bytes)",
                        (int)t->name_len, t->name, (unsigned long long)t->offset, (unsigned long long)padded,
                        (unsigned long long)data_size);
        t->data = c->base + f->data_offset + t->offset;
    }
    return 0;
}

int gguf_parse(const uint8_t *data, size_t size, gguf_file *out, char *err, size_t err_len) {
    cursor c = {data, size, 0, err, err_len};
    memset(out, 0, sizeof *out);
    if (!data) return fail(&c, "no data");
    if (parse(&c, out)) {
        gguf_free(out);
        return -1;
    }
    return 0;
}

void gguf_free(gguf_file *f) {
    free(f->kvs);
    free(f->tensors);
    memset(f, 0, sizeof *f);
}

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key) {
    size_t len = strlen(key);
    for (uint64_t i = 0; i < f->kv_count; i++)
        if (f->kvs[i].key_len == len && !memcmp(f->kvs[i].key, key, len)) return &f->kvs[i];
    return NULL;
}
