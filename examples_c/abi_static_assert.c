/* Pins the C ABI of q4vk.h in C11: sizeof/offsetof of every public struct, the type of
 * every field and alias, and the value of every constant. Included first and alone, so it
 * also proves the header compiles standalone as C11 (with -Wpedantic -Werror). A change
 * here is an ABI change: the ABI policy (README) allows only new trailing fields and new
 * constants. */
#include "q4vk.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define SAME_TYPE(expr, type) _Generic((expr), type: 1, default: 0)
#define FIELD(s, f, off, type)                                                        \
    _Static_assert(offsetof(struct s, f) == (off), #s "." #f " offset");              \
    _Static_assert(SAME_TYPE(((struct s *)0)->f, type), #s "." #f " type")

/* Type aliases. */
_Static_assert(SAME_TYPE((q4vk_status)0, uint32_t), "q4vk_status is uint32_t");
_Static_assert(SAME_TYPE((q4vk_algo)0, uint32_t), "q4vk_algo is uint32_t");
_Static_assert(SAME_TYPE((q4vk_dtype)0, uint32_t), "q4vk_dtype is uint32_t");

/* q4vk_weight_quantize_desc: 40 bytes, 8-byte aligned. */
_Static_assert(sizeof(struct q4vk_weight_quantize_desc) == 40, "q4vk_weight_quantize_desc size");
_Static_assert(_Alignof(struct q4vk_weight_quantize_desc) == 8, "q4vk_weight_quantize_desc align");
_Static_assert(sizeof(q4vk_weight_quantize_desc) == 40, "typedef names the struct");
FIELD(q4vk_weight_quantize_desc, struct_size, 0, uint32_t);
FIELD(q4vk_weight_quantize_desc, algo, 4, q4vk_algo);
FIELD(q4vk_weight_quantize_desc, dtype, 8, q4vk_dtype);
FIELD(q4vk_weight_quantize_desc, arch, 12, int32_t);
FIELD(q4vk_weight_quantize_desc, group_size, 16, int32_t);
FIELD(q4vk_weight_quantize_desc, threads, 20, uint32_t);
FIELD(q4vk_weight_quantize_desc, k, 24, uint64_t);
FIELD(q4vk_weight_quantize_desc, n, 32, uint64_t);

/* Status codes. */
_Static_assert(Q4VK_OK == 0, "Q4VK_OK");
_Static_assert(Q4VK_ERROR_INVALID_ARGUMENT == 1, "Q4VK_ERROR_INVALID_ARGUMENT");
_Static_assert(Q4VK_ERROR_NULL_POINTER == 2, "Q4VK_ERROR_NULL_POINTER");
_Static_assert(Q4VK_ERROR_BUFFER_TOO_SMALL == 3, "Q4VK_ERROR_BUFFER_TOO_SMALL");
_Static_assert(Q4VK_ERROR_UNSUPPORTED == 4, "Q4VK_ERROR_UNSUPPORTED");
_Static_assert(Q4VK_ERROR_NON_FINITE == 5, "Q4VK_ERROR_NON_FINITE");
_Static_assert(Q4VK_ERROR_ABI_MISMATCH == 6, "Q4VK_ERROR_ABI_MISMATCH");
_Static_assert(Q4VK_ERROR_OUT_OF_HOST_MEMORY == 7, "Q4VK_ERROR_OUT_OF_HOST_MEMORY");
_Static_assert(Q4VK_ERROR_NO_DEVICE == 8, "Q4VK_ERROR_NO_DEVICE");
_Static_assert(Q4VK_ERROR_VULKAN == 9, "Q4VK_ERROR_VULKAN");
_Static_assert(Q4VK_ERROR_OUT_OF_DEVICE_MEMORY == 10, "Q4VK_ERROR_OUT_OF_DEVICE_MEMORY");
_Static_assert(Q4VK_ERROR_DEVICE_LOST == 11, "Q4VK_ERROR_DEVICE_LOST");
_Static_assert(Q4VK_ERROR_INTERNAL == 12, "Q4VK_ERROR_INTERNAL");

/* Versions. */
_Static_assert(Q4VK_VERSION_MAJOR == 0, "Q4VK_VERSION_MAJOR");
_Static_assert(Q4VK_VERSION_MINOR == 1, "Q4VK_VERSION_MINOR");
_Static_assert(Q4VK_VERSION_PATCH == 0, "Q4VK_VERSION_PATCH");
_Static_assert(Q4VK_HEADER_VERSION == ((0 << 22) | (1 << 12) | 0), "Q4VK_HEADER_VERSION packing");

/* Enums. */
_Static_assert(Q4VK_DTYPE_F32 == 0, "Q4VK_DTYPE_F32");
_Static_assert(Q4VK_DTYPE_F16 == 1, "Q4VK_DTYPE_F16");
_Static_assert(Q4VK_DTYPE_BF16 == 2, "Q4VK_DTYPE_BF16");
_Static_assert(Q4VK_ALGO_WEIGHT_ONLY_INT8 == 0, "Q4VK_ALGO_WEIGHT_ONLY_INT8");
_Static_assert(Q4VK_ALGO_WEIGHT_ONLY_INT4 == 1, "Q4VK_ALGO_WEIGHT_ONLY_INT4");

/* Function signatures: assigning to a pointer of the contract's type fails to compile on
   any change of parameter or return types. */
static uint32_t (*const p_version)(void) = q4vk_version;
static const char *(*const p_version_string)(void) = q4vk_version_string;
static const char *(*const p_status_str)(q4vk_status) = q4vk_status_str;
static size_t (*const p_last_error_message)(char *, size_t) = q4vk_last_error_message;
static void (*const p_desc_default)(q4vk_weight_quantize_desc *) = q4vk_weight_quantize_desc_default;
static q4vk_status (*const p_quantize_size)(const q4vk_weight_quantize_desc *, size_t *, size_t *) =
    q4vk_weight_quantize_size;
static q4vk_status (*const p_plain_size)(const q4vk_weight_quantize_desc *, size_t *) =
    q4vk_weight_plain_size;
static q4vk_status (*const p_quantize)(const q4vk_weight_quantize_desc *, const void *, size_t,
                                       int8_t *, size_t, void *, size_t) = q4vk_weight_quantize;
static q4vk_status (*const p_dequantize)(const q4vk_weight_quantize_desc *, const int8_t *, size_t,
                                         const void *, size_t, void *, size_t) =
    q4vk_weight_dequantize;
static q4vk_status (*const p_permute)(const q4vk_weight_quantize_desc *, const int8_t *, size_t,
                                      int8_t *, size_t) = q4vk_weight_permute;
static q4vk_status (*const p_unpermute)(const q4vk_weight_quantize_desc *, const int8_t *, size_t,
                                        int8_t *, size_t) = q4vk_weight_unpermute;

int main(void) {
    /* Run-time half: the library matches the header it was compiled with. */
    int failures = 0;
    char header[32];
    snprintf(header, sizeof header, "%d.%d.%d", Q4VK_VERSION_MAJOR, Q4VK_VERSION_MINOR,
             Q4VK_VERSION_PATCH);
    if (p_version() != (uint32_t)Q4VK_HEADER_VERSION) {
        printf("FAIL: q4vk_version() = %#x, header %#x\n", p_version(),
               (unsigned)Q4VK_HEADER_VERSION);
        failures++;
    }
    if (strcmp(p_version_string(), header) != 0) {
        printf("FAIL: q4vk_version_string() = \"%s\", header %s\n", p_version_string(), header);
        failures++;
    }
    q4vk_weight_quantize_desc d;
    memset(&d, 0xA5, sizeof d);
    p_desc_default(&d);
    if (d.struct_size != sizeof d || d.algo != Q4VK_ALGO_WEIGHT_ONLY_INT4 ||
        d.dtype != Q4VK_DTYPE_F16 || d.arch != 80 || d.group_size != -1 || d.threads != 0 ||
        d.k != 0 || d.n != 0) {
        printf("FAIL: q4vk_weight_quantize_desc_default: struct_size %u (sizeof %zu), algo %u, "
               "dtype %u, arch %d, group_size %d, threads %u, k %llu, n %llu; expected 40, "
               "INT4, F16, 80, -1, 0, 0, 0\n",
               d.struct_size, sizeof d, d.algo, d.dtype, d.arch, d.group_size, d.threads,
               (unsigned long long)d.k, (unsigned long long)d.n);
        failures++;
    }
    /* Referenced so that every pointer above is used. */
    if (!p_status_str || !p_last_error_message || !p_quantize_size || !p_plain_size ||
        !p_quantize || !p_dequantize || !p_permute || !p_unpermute)
        failures++;
    printf("%s: C11 layout of q4vk.h %s (library %s)\n", failures ? "FAIL" : "ok", header,
           p_version_string());
    return failures ? 1 : 0;
}
