/* A minimal, bounds-checked reader of GGUF files (versions 2 and 3, little-endian) over a
 * buffer that holds the whole file: the header, every metadata key/value (all value types,
 * nested arrays included, are parsed and checked, and kept by reference), the tensor
 * infos, `general.alignment` (u32, default 32), and the data section, which starts at the
 * aligned end of the tensor infos. Tensor names are at most 64 bytes, keys 65535. Each
 * tensor's data (its padded size, as gguf-py writes it) must lie inside the file at an
 * aligned offset. Malformed input (truncated, bad magic, unknown version or ggml type,
 * offsets out of range, sizes that overflow) is refused with a message; nothing is read
 * outside the buffer. C11, no dependencies. */
#ifndef Q4VK_EXAMPLES_GGUF_READER_H
#define Q4VK_EXAMPLES_GGUF_READER_H

#include <stddef.h>
#include <stdint.h>

/* GGUF metadata value types. */
enum gguf_value_type {
    GGUF_VALUE_UINT8 = 0,
    GGUF_VALUE_INT8 = 1,
    GGUF_VALUE_UINT16 = 2,
    GGUF_VALUE_INT16 = 3,
    GGUF_VALUE_UINT32 = 4,
    GGUF_VALUE_INT32 = 5,
    GGUF_VALUE_FLOAT32 = 6,
    GGUF_VALUE_BOOL = 7,
    GGUF_VALUE_STRING = 8,
    GGUF_VALUE_ARRAY = 9,
    GGUF_VALUE_UINT64 = 10,
    GGUF_VALUE_INT64 = 11,
    GGUF_VALUE_FLOAT64 = 12,
};

/* Most dimensions of a ggml tensor. */
#define GGUF_MAX_DIMS 4

/* One metadata entry; `key` and `value` point into the file buffer (the key is not
 * NUL-terminated). `value` is the encoded value as stored (for a string: its u64 length
 * then its bytes; for an array: item type, u64 count, items). */
typedef struct gguf_kv {
    const char *key;
    size_t key_len;
    uint32_t type;
    const uint8_t *value;
    size_t value_bytes;
} gguf_kv;

/* One tensor info; `name` and `data` point into the file buffer. `ne[0]` is the
 * innermost (contiguous) dimension; unused dimensions are 1. */
typedef struct gguf_tensor {
    const char *name;
    size_t name_len;
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    uint32_t type;
    uint64_t offset; /* from the start of the data section */
    uint64_t nbytes; /* unpadded */
    const uint8_t *data;
} gguf_tensor;

/* A parsed file: owns the `kvs` and `tensors` arrays, borrows the buffer. */
typedef struct gguf_file {
    uint32_t version;
    uint64_t kv_count, tensor_count;
    uint32_t alignment;
    uint64_t data_offset; /* start of the data section in the buffer */
    gguf_kv *kvs;
    gguf_tensor *tensors;
} gguf_file;

/* Parses `size` bytes at `data` (which must stay alive while `out` is used). Returns 0 and
 * fills `out`, or -1 with a message in `err` (`out` left empty, nothing to free). */
int gguf_parse(const uint8_t *data, size_t size, gguf_file *out, char *err, size_t err_len);

/* Frees what gguf_parse allocated; `f` may be empty (all zero). */
void gguf_free(gguf_file *f);

/* The metadata entry named `key`, or NULL. */
const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key);

/* Elements per block and bytes per block of ggml type `type`; 0 if the type is unknown. */
int gguf_type_block(uint32_t type, uint32_t *block, uint32_t *block_bytes);

/* ggml's name of `type` ("Q4_K"), or "?" when unknown. */
const char *gguf_type_name(uint32_t type);

#endif
