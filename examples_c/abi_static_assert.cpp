// Pins the C ABI of q4vk.h in C++17: sizeof/offsetof of every public struct, the type of
// every field and alias, and the value of every constant. Included first and alone, so it
// also proves the header compiles standalone as C++17 (with -Wpedantic -Werror) and that its
// functions have C linkage (the program links against libq4vk.so).
#include "q4vk.h"

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <type_traits>

#define FIELD(s, f, off, type)                                               \
    static_assert(offsetof(s, f) == (off), #s "." #f " offset");             \
    static_assert(std::is_same<decltype(s::f), type>::value, #s "." #f " type")

static_assert(std::is_same<q4vk_status, uint32_t>::value, "q4vk_status is uint32_t");
static_assert(std::is_same<q4vk_algo, uint32_t>::value, "q4vk_algo is uint32_t");
static_assert(std::is_same<q4vk_dtype, uint32_t>::value, "q4vk_dtype is uint32_t");

static_assert(std::is_standard_layout<q4vk_weight_quantize_desc>::value, "standard layout");
static_assert(std::is_trivially_copyable<q4vk_weight_quantize_desc>::value, "trivially copyable");
static_assert(sizeof(q4vk_weight_quantize_desc) == 40, "q4vk_weight_quantize_desc size");
static_assert(alignof(q4vk_weight_quantize_desc) == 8, "q4vk_weight_quantize_desc align");
FIELD(q4vk_weight_quantize_desc, struct_size, 0, uint32_t);
FIELD(q4vk_weight_quantize_desc, algo, 4, q4vk_algo);
FIELD(q4vk_weight_quantize_desc, dtype, 8, q4vk_dtype);
FIELD(q4vk_weight_quantize_desc, arch, 12, int32_t);
FIELD(q4vk_weight_quantize_desc, group_size, 16, int32_t);
FIELD(q4vk_weight_quantize_desc, threads, 20, uint32_t);
FIELD(q4vk_weight_quantize_desc, k, 24, uint64_t);
FIELD(q4vk_weight_quantize_desc, n, 32, uint64_t);

static_assert(Q4VK_OK == 0, "Q4VK_OK");
static_assert(Q4VK_ERROR_INVALID_ARGUMENT == 1, "Q4VK_ERROR_INVALID_ARGUMENT");
static_assert(Q4VK_ERROR_NULL_POINTER == 2, "Q4VK_ERROR_NULL_POINTER");
static_assert(Q4VK_ERROR_BUFFER_TOO_SMALL == 3, "Q4VK_ERROR_BUFFER_TOO_SMALL");
static_assert(Q4VK_ERROR_UNSUPPORTED == 4, "Q4VK_ERROR_UNSUPPORTED");
static_assert(Q4VK_ERROR_NON_FINITE == 5, "Q4VK_ERROR_NON_FINITE");
static_assert(Q4VK_ERROR_ABI_MISMATCH == 6, "Q4VK_ERROR_ABI_MISMATCH");
static_assert(Q4VK_ERROR_OUT_OF_HOST_MEMORY == 7, "Q4VK_ERROR_OUT_OF_HOST_MEMORY");
static_assert(Q4VK_ERROR_NO_DEVICE == 8, "Q4VK_ERROR_NO_DEVICE");
static_assert(Q4VK_ERROR_VULKAN == 9, "Q4VK_ERROR_VULKAN");
static_assert(Q4VK_ERROR_OUT_OF_DEVICE_MEMORY == 10, "Q4VK_ERROR_OUT_OF_DEVICE_MEMORY");
static_assert(Q4VK_ERROR_DEVICE_LOST == 11, "Q4VK_ERROR_DEVICE_LOST");
static_assert(Q4VK_ERROR_INTERNAL == 12, "Q4VK_ERROR_INTERNAL");

static_assert(Q4VK_VERSION_MAJOR == 0, "Q4VK_VERSION_MAJOR");
static_assert(Q4VK_VERSION_MINOR == 1, "Q4VK_VERSION_MINOR");
static_assert(Q4VK_VERSION_PATCH == 0, "Q4VK_VERSION_PATCH");
static_assert(Q4VK_HEADER_VERSION == ((0 << 22) | (1 << 12) | 0), "Q4VK_HEADER_VERSION packing");

static_assert(Q4VK_DTYPE_F32 == 0, "Q4VK_DTYPE_F32");
static_assert(Q4VK_DTYPE_F16 == 1, "Q4VK_DTYPE_F16");
static_assert(Q4VK_DTYPE_BF16 == 2, "Q4VK_DTYPE_BF16");
static_assert(Q4VK_ALGO_WEIGHT_ONLY_INT8 == 0, "Q4VK_ALGO_WEIGHT_ONLY_INT8");
static_assert(Q4VK_ALGO_WEIGHT_ONLY_INT4 == 1, "Q4VK_ALGO_WEIGHT_ONLY_INT4");

// Function signatures of the v0 contract, exactly.
#define SIG(fn, type) static_assert(std::is_same<decltype(&fn), type>::value, #fn " signature")
SIG(q4vk_version, uint32_t (*)(void));
SIG(q4vk_version_string, const char *(*)(void));
SIG(q4vk_status_str, const char *(*)(q4vk_status));
SIG(q4vk_last_error_message, size_t (*)(char *, size_t));
SIG(q4vk_weight_quantize_desc_default, void (*)(q4vk_weight_quantize_desc *));
SIG(q4vk_weight_quantize_size, q4vk_status (*)(const q4vk_weight_quantize_desc *, size_t *, size_t *));
SIG(q4vk_weight_plain_size, q4vk_status (*)(const q4vk_weight_quantize_desc *, size_t *));
SIG(q4vk_weight_quantize, q4vk_status (*)(const q4vk_weight_quantize_desc *, const void *, size_t,
                                          int8_t *, size_t, void *, size_t));
SIG(q4vk_weight_dequantize, q4vk_status (*)(const q4vk_weight_quantize_desc *, const int8_t *,
                                            size_t, const void *, size_t, void *, size_t));
SIG(q4vk_weight_permute, q4vk_status (*)(const q4vk_weight_quantize_desc *, const int8_t *, size_t,
                                         int8_t *, size_t));
SIG(q4vk_weight_unpermute, q4vk_status (*)(const q4vk_weight_quantize_desc *, const int8_t *,
                                           size_t, int8_t *, size_t));

// Kernel export (C++ hosts such as an ncnn layer): layout and signatures.
static_assert(std::is_standard_layout<q4vk_kernel_info>::value, "standard layout");
static_assert(std::is_trivially_copyable<q4vk_kernel_info>::value, "trivially copyable");
static_assert(sizeof(q4vk_kernel_export_desc) == 48, "q4vk_kernel_export_desc size");
static_assert(sizeof(q4vk_kernel_binding) == 16, "q4vk_kernel_binding size");
static_assert(sizeof(q4vk_kernel_specialization) == 8, "q4vk_kernel_specialization size");
static_assert(sizeof(q4vk_kernel_info) == 392, "q4vk_kernel_info size");
FIELD(q4vk_kernel_export_desc, m, 12, uint32_t);
FIELD(q4vk_kernel_export_desc, y_row_stride, 32, uint64_t);
FIELD(q4vk_kernel_export_desc, export_flags, 40, uint32_t);
FIELD(q4vk_kernel_export_desc, reserved1, 44, uint32_t);
FIELD(q4vk_kernel_info, spirv_words, 24, size_t);
FIELD(q4vk_kernel_info, specializations, 264, q4vk_kernel_specialization[16]);
SIG(q4vk_kernel_export, q4vk_status (*)(const q4vk_context *, const q4vk_matrix_desc *,
                                        const q4vk_kernel_export_desc *, q4vk_kernel_info *, uint32_t *,
                                        size_t));
SIG(q4vk_matrix_pack_size, q4vk_status (*)(const q4vk_matrix_desc *, size_t *, size_t *, size_t *));
SIG(q4vk_matrix_pack, q4vk_status (*)(const q4vk_matrix_desc *, void *, size_t, void *, size_t, void *,
                                      size_t));
SIG(q4vk_matrix_pack_extended_size,
    q4vk_status (*)(const q4vk_matrix_desc *, size_t *, size_t *, size_t *, size_t *, size_t *));
SIG(q4vk_matrix_pack_extended, q4vk_status (*)(const q4vk_matrix_desc *, void *, size_t, void *, size_t, void *,
                                               size_t, void *, size_t, void *, size_t));
SIG(q4vk_matrix_dequantize, q4vk_status (*)(const q4vk_matrix_desc *, float *, size_t));
static_assert(sizeof(q4vk_matrix_desc) == 120, "q4vk_matrix_desc size");
FIELD(q4vk_matrix_desc, gptq_format, 112, uint32_t);

int main() {
    int failures = 0;
    if (q4vk_version() != static_cast<uint32_t>(Q4VK_HEADER_VERSION)) {
        std::printf("FAIL: q4vk_version() = %#x, header %#x\n", q4vk_version(),
                    static_cast<unsigned>(Q4VK_HEADER_VERSION));
        failures++;
    }
    q4vk_weight_quantize_desc d;
    std::memset(&d, 0xA5, sizeof d);
    q4vk_weight_quantize_desc_default(&d);
    if (d.struct_size != sizeof d) {
        std::printf("FAIL: struct_size %u, sizeof %zu\n", d.struct_size, sizeof d);
        failures++;
    }
    std::printf("%s: C++17 layout of q4vk.h (library %s)\n", failures ? "FAIL" : "ok",
                q4vk_version_string());
    return failures ? 1 : 0;
}
