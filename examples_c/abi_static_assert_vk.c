/* Pins the C ABI of the Vulkan part of q4vk.h in C11: sizeof/offsetof and field types of
 * every Vulkan-section struct, the constants, and the function signatures (LP64). Builds
 * without vulkan.h: handles cross as void * and uint64_t. */
#include "q4vk.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define SAME_TYPE(expr, type) _Generic((expr), type: 1, default: 0)
#define FIELD(s, f, off, type)                                                        \
    _Static_assert(offsetof(struct s, f) == (off), #s "." #f " offset");              \
    _Static_assert(SAME_TYPE(((struct s *)0)->f, type), #s "." #f " type")

_Static_assert(SAME_TYPE((q4vk_matrix_source)0, uint32_t), "q4vk_matrix_source is uint32_t");

/* v0 ended at queue_lock_user (128 bytes, still accepted as struct_size); the
   pipeline-cache fields, then cpu_threads, then the tuning blob, then the allocator were
   appended after it. */
_Static_assert(sizeof(struct q4vk_context_desc) == 192, "q4vk_context_desc size");
FIELD(q4vk_context_desc, struct_size, 0, uint32_t);
FIELD(q4vk_context_desc, header_version, 4, uint32_t);
FIELD(q4vk_context_desc, device_index, 8, int32_t);
FIELD(q4vk_context_desc, flags, 12, uint32_t);
FIELD(q4vk_context_desc, log_level, 16, uint32_t);
FIELD(q4vk_context_desc, queue_family_index, 20, uint32_t);
FIELD(q4vk_context_desc, api_version, 24, uint32_t);
FIELD(q4vk_context_desc, enabled_extension_count, 28, uint32_t);
FIELD(q4vk_context_desc, log, 32, q4vk_log_fn);
FIELD(q4vk_context_desc, log_user, 40, void *);
FIELD(q4vk_context_desc, get_instance_proc_addr, 48, q4vk_void_fn);
FIELD(q4vk_context_desc, instance, 56, void *);
FIELD(q4vk_context_desc, physical_device, 64, void *);
FIELD(q4vk_context_desc, device, 72, void *);
FIELD(q4vk_context_desc, queue, 80, void *);
FIELD(q4vk_context_desc, enabled_features, 88, const void *);
FIELD(q4vk_context_desc, enabled_extensions, 96, const char *const *);
FIELD(q4vk_context_desc, queue_lock, 104, q4vk_queue_lock_fn);
FIELD(q4vk_context_desc, queue_unlock, 112, q4vk_queue_lock_fn);
FIELD(q4vk_context_desc, queue_lock_user, 120, void *);
FIELD(q4vk_context_desc, pipeline_cache_data, 128, const void *);
FIELD(q4vk_context_desc, pipeline_cache_size, 136, size_t);
FIELD(q4vk_context_desc, cpu_threads, 144, uint32_t);
FIELD(q4vk_context_desc, tuning_data, 152, const void *);
FIELD(q4vk_context_desc, tuning_size, 160, size_t);
FIELD(q4vk_context_desc, allocate, 168, q4vk_allocate_fn);
FIELD(q4vk_context_desc, free, 176, q4vk_free_fn);
FIELD(q4vk_context_desc, allocator_user, 184, void *);
_Static_assert(sizeof(q4vk_allocation) == 24, "q4vk_allocation size");
FIELD(q4vk_allocation, memory, 0, uint64_t);
FIELD(q4vk_allocation, offset, 8, uint64_t);
FIELD(q4vk_allocation, mapped, 16, void *);

/* v0 ended at zeros_bytes (96 bytes, still accepted as struct_size); g_idx, g_idx_bytes and
   gptq_format were appended after it. */
_Static_assert(sizeof(struct q4vk_matrix_desc) == 120, "q4vk_matrix_desc size");
FIELD(q4vk_matrix_desc, struct_size, 0, uint32_t);
FIELD(q4vk_matrix_desc, source, 4, q4vk_matrix_source);
FIELD(q4vk_matrix_desc, n, 8, uint64_t);
FIELD(q4vk_matrix_desc, k, 16, uint64_t);
FIELD(q4vk_matrix_desc, group_size, 24, int32_t);
FIELD(q4vk_matrix_desc, zero_points, 28, uint32_t);
FIELD(q4vk_matrix_desc, dtype, 32, q4vk_dtype);
FIELD(q4vk_matrix_desc, transposed, 36, uint32_t);
FIELD(q4vk_matrix_desc, arch, 40, int32_t);
FIELD(q4vk_matrix_desc, reserved0, 44, uint32_t);
FIELD(q4vk_matrix_desc, weight, 48, const void *);
FIELD(q4vk_matrix_desc, weight_bytes, 56, size_t);
FIELD(q4vk_matrix_desc, scales, 64, const void *);
FIELD(q4vk_matrix_desc, scales_bytes, 72, size_t);
FIELD(q4vk_matrix_desc, zeros, 80, const void *);
FIELD(q4vk_matrix_desc, zeros_bytes, 88, size_t);
FIELD(q4vk_matrix_desc, g_idx, 96, const void *);
FIELD(q4vk_matrix_desc, g_idx_bytes, 104, size_t);
FIELD(q4vk_matrix_desc, gptq_format, 112, uint32_t);

_Static_assert(sizeof(struct q4vk_buffer_ref) == 24, "q4vk_buffer_ref size");
FIELD(q4vk_buffer_ref, buffer, 0, uint64_t);
FIELD(q4vk_buffer_ref, offset, 8, uint64_t);
FIELD(q4vk_buffer_ref, range, 16, uint64_t);

/* v0 ended at y_row_stride (80 bytes, still accepted as struct_size); workspace was
   appended after it. */
_Static_assert(sizeof(struct q4vk_gemv_args) == 176, "q4vk_gemv_args size");
FIELD(q4vk_gemv_args, struct_size, 0, uint32_t);
FIELD(q4vk_gemv_args, flags, 4, uint32_t);
FIELD(q4vk_gemv_args, m, 8, uint32_t);
FIELD(q4vk_gemv_args, reserved0, 12, uint32_t);
FIELD(q4vk_gemv_args, x, 16, q4vk_buffer_ref);
FIELD(q4vk_gemv_args, y, 40, q4vk_buffer_ref);
FIELD(q4vk_gemv_args, x_row_stride, 64, uint64_t);
FIELD(q4vk_gemv_args, y_row_stride, 72, uint64_t);
FIELD(q4vk_gemv_args, workspace, 80, q4vk_buffer_ref);
FIELD(q4vk_gemv_args, bias, 104, q4vk_buffer_ref);
FIELD(q4vk_gemv_args, residual, 128, q4vk_buffer_ref);
FIELD(q4vk_gemv_args, gate, 152, q4vk_buffer_ref);
_Static_assert(Q4VK_GEMV_F16_OUTPUT == 0x8, "Q4VK_GEMV_F16_OUTPUT");
_Static_assert(Q4VK_GEMV_BIAS == 0x10, "Q4VK_GEMV_BIAS");
_Static_assert(Q4VK_GEMV_BIAS_F16 == 0x20, "Q4VK_GEMV_BIAS_F16");
_Static_assert(Q4VK_GEMV_RESIDUAL == 0x40, "Q4VK_GEMV_RESIDUAL");
_Static_assert(Q4VK_GEMV_SILU_GATE == 0x80, "Q4VK_GEMV_SILU_GATE");
_Static_assert(Q4VK_GEMV_GELU_GATE == 0x100, "Q4VK_GEMV_GELU_GATE");
_Static_assert(Q4VK_GEMV_ROUND_X_TO_INT8 == 0x200, "Q4VK_GEMV_ROUND_X_TO_INT8");
_Static_assert(Q4VK_GEMV_PREPASS_NONE == 0 && Q4VK_GEMV_PREPASS_DIGITS == 1 &&
                   Q4VK_GEMV_PREPASS_FRAGMENTS == 2 && Q4VK_GEMV_PREPASS_BYTES == 3,
               "pre-passes");

_Static_assert(sizeof(struct q4vk_gemv_host_args) == 96, "q4vk_gemv_host_args size");
FIELD(q4vk_gemv_host_args, struct_size, 0, uint32_t);
FIELD(q4vk_gemv_host_args, flags, 4, uint32_t);
FIELD(q4vk_gemv_host_args, m, 8, uint32_t);
FIELD(q4vk_gemv_host_args, reserved0, 12, uint32_t);
FIELD(q4vk_gemv_host_args, x, 16, const void *);
FIELD(q4vk_gemv_host_args, x_bytes, 24, size_t);
FIELD(q4vk_gemv_host_args, y, 32, float *);
FIELD(q4vk_gemv_host_args, y_len, 40, size_t);
FIELD(q4vk_gemv_host_args, bias, 48, const void *);
FIELD(q4vk_gemv_host_args, bias_bytes, 56, size_t);
FIELD(q4vk_gemv_host_args, residual, 64, const void *);
FIELD(q4vk_gemv_host_args, residual_bytes, 72, size_t);
FIELD(q4vk_gemv_host_args, gate, 80, const void *);
FIELD(q4vk_gemv_host_args, gate_bytes, 88, size_t);

_Static_assert(sizeof(struct q4vk_kernel_export_desc) == 48, "q4vk_kernel_export_desc size");
FIELD(q4vk_kernel_export_desc, struct_size, 0, uint32_t);
FIELD(q4vk_kernel_export_desc, variant, 4, q4vk_kernel_variant);
FIELD(q4vk_kernel_export_desc, flags, 8, uint32_t);
FIELD(q4vk_kernel_export_desc, m, 12, uint32_t);
FIELD(q4vk_kernel_export_desc, subgroup_size, 16, uint32_t);
FIELD(q4vk_kernel_export_desc, reserved0, 20, uint32_t);
FIELD(q4vk_kernel_export_desc, x_row_stride, 24, uint64_t);
FIELD(q4vk_kernel_export_desc, y_row_stride, 32, uint64_t);
FIELD(q4vk_kernel_export_desc, export_flags, 40, uint32_t);
FIELD(q4vk_kernel_export_desc, reserved1, 44, uint32_t);

_Static_assert(sizeof(struct q4vk_kernel_binding) == 16, "q4vk_kernel_binding size");
FIELD(q4vk_kernel_binding, binding, 0, uint32_t);
FIELD(q4vk_kernel_binding, role, 4, q4vk_binding_role);
FIELD(q4vk_kernel_binding, bytes, 8, uint64_t);

_Static_assert(sizeof(struct q4vk_kernel_specialization) == 8, "q4vk_kernel_specialization size");
FIELD(q4vk_kernel_specialization, id, 0, uint32_t);
FIELD(q4vk_kernel_specialization, value, 4, uint32_t);

_Static_assert(sizeof(struct q4vk_kernel_info) == 392, "q4vk_kernel_info size");
FIELD(q4vk_kernel_info, struct_size, 0, uint32_t);
FIELD(q4vk_kernel_info, variant, 4, q4vk_kernel_variant);
_Static_assert(offsetof(struct q4vk_kernel_info, entry_point) == 8, "entry_point offset");
_Static_assert(sizeof(((struct q4vk_kernel_info *)0)->entry_point) == 16, "entry_point size");
FIELD(q4vk_kernel_info, spirv_words, 24, size_t);
FIELD(q4vk_kernel_info, binding_count, 32, uint32_t);
FIELD(q4vk_kernel_info, push_constant_count, 36, uint32_t);
FIELD(q4vk_kernel_info, specialization_count, 40, uint32_t);
FIELD(q4vk_kernel_info, reserved0, 44, uint32_t);
_Static_assert(offsetof(struct q4vk_kernel_info, local_size) == 48, "local_size offset");
_Static_assert(offsetof(struct q4vk_kernel_info, group_count) == 60, "group_count offset");
_Static_assert(offsetof(struct q4vk_kernel_info, bindings) == 72, "bindings offset");
_Static_assert(offsetof(struct q4vk_kernel_info, push_constants) == 200, "push_constants offset");
_Static_assert(offsetof(struct q4vk_kernel_info, specializations) == 264, "specializations offset");
_Static_assert(sizeof(((struct q4vk_kernel_info *)0)->bindings) / sizeof(struct q4vk_kernel_binding) ==
                   Q4VK_KERNEL_MAX_BINDINGS, "bindings capacity");
_Static_assert(sizeof(((struct q4vk_kernel_info *)0)->push_constants) / 4 == Q4VK_KERNEL_MAX_PUSH_CONSTANTS,
               "push constants capacity");
_Static_assert(sizeof(((struct q4vk_kernel_info *)0)->specializations) / sizeof(struct q4vk_kernel_specialization) ==
                   Q4VK_KERNEL_MAX_SPECIALIZATIONS, "specializations capacity");
_Static_assert(Q4VK_KERNEL_PORTABLE == 0 && Q4VK_KERNEL_SUBGROUP == 1 && Q4VK_KERNEL_AUTO == 2, "kernel variants");
_Static_assert(Q4VK_BINDING_WEIGHTS == 0 && Q4VK_BINDING_SCALES == 1 && Q4VK_BINDING_ZEROS == 2 &&
                   Q4VK_BINDING_X == 3 && Q4VK_BINDING_Y == 4, "binding roles");

_Static_assert(Q4VK_LOG_ERROR == 0 && Q4VK_LOG_WARN == 1 && Q4VK_LOG_INFO == 2 && Q4VK_LOG_DEBUG == 3, "log levels");
_Static_assert(Q4VK_CONTEXT_VALIDATION == 0x1u && Q4VK_CONTEXT_PORTABLE_KERNELS == 0x2u &&
                   Q4VK_CONTEXT_NO_COOPMAT == 0x4u && Q4VK_CONTEXT_CPU == 0x8u &&
                   Q4VK_CONTEXT_CPU_FALLBACK == 0x10u && Q4VK_CONTEXT_NO_INTDOT == 0x20u &&
                   Q4VK_CONTEXT_STRICT_SIZES == 0x40u,
               "context flags");
_Static_assert(Q4VK_SOURCE_FLOAT == 0 && Q4VK_SOURCE_Q4 == 1 && Q4VK_SOURCE_PADDLE == 2, "sources");
_Static_assert(Q4VK_SOURCE_GGUF_Q4_0 == 3 && Q4VK_SOURCE_GGUF_Q4_1 == 4 && Q4VK_SOURCE_GGUF_Q4_K == 5 &&
                   Q4VK_SOURCE_GPTQ == 6 && Q4VK_SOURCE_AWQ == 7 && Q4VK_SOURCE_GGUF_Q5_0 == 8 &&
                   Q4VK_SOURCE_GGUF_Q5_1 == 9 && Q4VK_SOURCE_GGUF_Q8_0 == 10 && Q4VK_SOURCE_GGUF_Q5_K == 11 &&
                   Q4VK_SOURCE_GGUF_Q6_K == 12 && Q4VK_SOURCE_GGUF_IQ4_NL == 13 &&
                   Q4VK_SOURCE_GGUF_IQ4_XS == 14 && Q4VK_SOURCE_GGUF_MXFP4 == 15 &&
                   Q4VK_SOURCE_GGUF_NVFP4 == 16,
               "imported sources");
_Static_assert(Q4VK_GEMV_F16_ACTIVATIONS == 0x1u && Q4VK_GEMV_ROUND_X_TO_F16 == 0x2u &&
                   Q4VK_GEMV_REUSE_WORKSPACE == 0x4u,
               "gemv flags");

static void (*const p_context_desc_default)(q4vk_context_desc *) = q4vk_context_desc_default;
static q4vk_status (*const p_context_create)(const q4vk_context_desc *, q4vk_context **) = q4vk_context_create;
static void (*const p_context_destroy)(q4vk_context *) = q4vk_context_destroy;
static size_t (*const p_device_name)(const q4vk_context *, char *, size_t) = q4vk_context_device_name;
static q4vk_status (*const p_cache_size)(const q4vk_context *, size_t *) = q4vk_context_pipeline_cache_size;
static q4vk_status (*const p_cache_data)(const q4vk_context *, void *, size_t, size_t *) =
    q4vk_context_pipeline_cache_data;
static void (*const p_matrix_desc_default)(q4vk_matrix_desc *) = q4vk_matrix_desc_default;
static q4vk_status (*const p_q4_size)(const q4vk_matrix_desc *, size_t *, size_t *, size_t *) = q4vk_q4_quantize_size;
static q4vk_status (*const p_q4_quantize)(const q4vk_matrix_desc *, uint8_t *, size_t, void *, size_t, uint8_t *,
                                          size_t) = q4vk_q4_quantize;
static q4vk_status (*const p_matrix_create)(q4vk_context *, const q4vk_matrix_desc *, q4vk_matrix **) =
    q4vk_matrix_create;
static void (*const p_matrix_destroy)(q4vk_matrix *) = q4vk_matrix_destroy;
static q4vk_status (*const p_gemv)(q4vk_context *, const q4vk_matrix *, const float *, size_t, float *, size_t,
                                   uint32_t) = q4vk_gemv;
static void (*const p_gemv_args_default)(q4vk_gemv_args *) = q4vk_gemv_args_default;
static void (*const p_gemv_host_args_default)(q4vk_gemv_host_args *) = q4vk_gemv_host_args_default;
static q4vk_status (*const p_gemv_host)(q4vk_context *, const q4vk_matrix *, const q4vk_gemv_host_args *) =
    q4vk_gemv_host;
static q4vk_status (*const p_cmd_gemv)(q4vk_context *, const q4vk_matrix *, void *, const q4vk_gemv_args *) =
    q4vk_cmd_gemv;
static q4vk_status (*const p_workspace_size)(q4vk_context *, const q4vk_matrix *, uint32_t, uint32_t,
                                             uint64_t *) = q4vk_gemv_workspace_size;
static q4vk_status (*const p_workspace_key)(q4vk_context *, const q4vk_matrix *, uint32_t, uint32_t,
                                            uint64_t *) = q4vk_gemv_workspace_key;
static q4vk_status (*const p_gemv_prepare)(q4vk_context *, const q4vk_matrix *, uint32_t, uint32_t, uint32_t) =
    q4vk_gemv_prepare;
static q4vk_status (*const p_gemv_plan)(q4vk_context *, const q4vk_matrix *, uint32_t, uint32_t, uint64_t,
                                        q4vk_gemv_plan_info *) = q4vk_gemv_plan;
/* The first version ended at name (128 bytes, still accepted); shape_source was appended. */
_Static_assert(sizeof(q4vk_gemv_plan_info) == 136, "q4vk_gemv_plan_info size");
_Static_assert(offsetof(q4vk_gemv_plan_info, workspace_bytes) == 16, "q4vk_gemv_plan_info.workspace_bytes");
_Static_assert(offsetof(q4vk_gemv_plan_info, name) == 32, "q4vk_gemv_plan_info.name");
FIELD(q4vk_gemv_plan_info, shape_source, 128, q4vk_gemv_shape_source);
_Static_assert(SAME_TYPE((q4vk_gemv_shape_source)0, uint32_t), "q4vk_gemv_shape_source is uint32_t");
static void (*const p_tune_desc_default)(q4vk_tune_desc *) = q4vk_tune_desc_default;
static q4vk_status (*const p_from_ggml)(uint32_t, q4vk_matrix_source *) = q4vk_source_from_ggml_type;
static q4vk_status (*const p_binding_create)(q4vk_context *, const q4vk_matrix *, const q4vk_gemv_args *,
                                             q4vk_gemv_binding **) = q4vk_gemv_binding_create;
static q4vk_status (*const p_cmd_gemv_bound)(q4vk_context *, const q4vk_gemv_binding *, void *) =
    q4vk_cmd_gemv_bound;
static void (*const p_binding_destroy)(q4vk_gemv_binding *) = q4vk_gemv_binding_destroy;
static q4vk_status (*const p_cmd_gemv_multi)(q4vk_context *, uint32_t, const q4vk_matrix *const *, void *,
                                             const q4vk_gemv_args *) = q4vk_cmd_gemv_multi;
static q4vk_status (*const p_binding_create_multi)(q4vk_context *, uint32_t, const q4vk_matrix *const *,
                                                   const q4vk_gemv_args *, q4vk_gemv_binding **) =
    q4vk_gemv_binding_create_multi;
_Static_assert(Q4VK_GEMV_MULTI_MAX_CALLS == 64, "Q4VK_GEMV_MULTI_MAX_CALLS");
_Static_assert(Q4VK_KERNEL_EXPORT_BIAS == 0x2 && Q4VK_BINDING_BIAS == 7, "export with a bias");
_Static_assert(Q4VK_KERNEL_EXPORT_BLOCKS == 0x4 && Q4VK_BINDING_HIGH_BITS == 8, "export on GGUF blocks");
static q4vk_status (*const p_pack_blocks_size)(const q4vk_matrix_desc *, size_t *, size_t *, size_t *) =
    q4vk_matrix_pack_blocks_size;
static q4vk_status (*const p_pack_blocks)(const q4vk_matrix_desc *, void *, size_t, void *, size_t, void *, size_t) =
    q4vk_matrix_pack_blocks;
static q4vk_status (*const p_footprint)(const q4vk_context *, const q4vk_matrix_desc *, q4vk_matrix_footprint_info *) =
    q4vk_matrix_footprint;
_Static_assert(sizeof(q4vk_matrix_footprint_info) == 48, "q4vk_matrix_footprint_info size");
FIELD(q4vk_matrix_footprint_info, upload_bytes, 40, uint64_t);
static q4vk_status (*const p_create_recorded)(q4vk_context *, const q4vk_matrix_desc *, void *,
                                              const q4vk_staging *, q4vk_matrix **) = q4vk_matrix_create_recorded;
_Static_assert(sizeof(q4vk_staging) == 32, "q4vk_staging size");
static q4vk_status (*const p_blob_size)(const q4vk_context *, const q4vk_matrix *, size_t *) =
    q4vk_matrix_blob_size;
static q4vk_status (*const p_blob)(const q4vk_context *, const q4vk_matrix *, void *, size_t, size_t *) =
    q4vk_matrix_blob;
static q4vk_status (*const p_from_blob)(q4vk_context *, const void *, size_t, q4vk_matrix **) =
    q4vk_matrix_create_from_blob;
FIELD(q4vk_staging, buffer, 0, q4vk_buffer_ref);
FIELD(q4vk_staging, mapped, 24, void *);
FIELD(q4vk_matrix_footprint_info, struct_size, 0, uint32_t);
FIELD(q4vk_matrix_footprint_info, buffers, 4, uint32_t);
FIELD(q4vk_matrix_footprint_info, device_bytes, 8, uint64_t);
FIELD(q4vk_matrix_footprint_info, alignment, 16, uint64_t);
FIELD(q4vk_matrix_footprint_info, staging_bytes, 24, uint64_t);
FIELD(q4vk_matrix_footprint_info, memory_type_bits, 32, uint32_t);
static q4vk_status (*const p_context_memory)(const q4vk_context *, q4vk_context_memory_info *) =
    q4vk_context_memory;
_Static_assert(sizeof(q4vk_context_memory_info) == 32, "q4vk_context_memory_info size");
FIELD(q4vk_context_memory_info, struct_size, 0, uint32_t);
FIELD(q4vk_context_memory_info, pipelines, 4, uint32_t);
FIELD(q4vk_context_memory_info, pipeline_cache_bytes, 8, uint64_t);
FIELD(q4vk_context_memory_info, gemv_buffer_bytes, 16, uint64_t);
FIELD(q4vk_context_memory_info, descriptor_sets, 24, uint32_t);
FIELD(q4vk_context_memory_info, descriptor_pools, 28, uint32_t);
static q4vk_status (*const p_context_tune)(q4vk_context *, const q4vk_tune_desc *, void *, size_t, size_t *,
                                           q4vk_tune_info *) = q4vk_context_tune;
_Static_assert(sizeof(q4vk_tune_desc) == 56, "q4vk_tune_desc size");
FIELD(q4vk_tune_desc, struct_size, 0, uint32_t);
FIELD(q4vk_tune_desc, budget_ms, 4, uint32_t);
FIELD(q4vk_tune_desc, shape_count, 8, uint32_t);
FIELD(q4vk_tune_desc, m_count, 12, uint32_t);
FIELD(q4vk_tune_desc, shapes, 16, const uint64_t *);
FIELD(q4vk_tune_desc, ms, 24, const uint32_t *);
FIELD(q4vk_tune_desc, cold_bytes, 32, uint64_t);
FIELD(q4vk_tune_desc, prefill_m_count, 40, uint32_t);
FIELD(q4vk_tune_desc, reserved0, 44, uint32_t);
FIELD(q4vk_tune_desc, prefill_ms, 48, const uint32_t *);
_Static_assert(sizeof(q4vk_gemm_tile) == 16, "q4vk_gemm_tile size");
FIELD(q4vk_gemm_tile, row_invocations, 0, uint32_t);
FIELD(q4vk_gemm_tile, token_invocations, 4, uint32_t);
FIELD(q4vk_gemm_tile, rows_per_invocation, 8, uint32_t);
FIELD(q4vk_gemm_tile, tokens_per_invocation, 12, uint32_t);
_Static_assert(sizeof(q4vk_tuned_gemm) == 48, "q4vk_tuned_gemm size");
FIELD(q4vk_tuned_gemm, m, 0, uint32_t);
FIELD(q4vk_tuned_gemm, candidates_timed, 4, uint32_t);
FIELD(q4vk_tuned_gemm, tile, 8, q4vk_gemm_tile);
FIELD(q4vk_tuned_gemm, table_tile, 24, q4vk_gemm_tile);
FIELD(q4vk_tuned_gemm, time_vs_table, 40, double);
_Static_assert(sizeof(q4vk_simt_gemv_shape) == 24, "q4vk_simt_gemv_shape size");
FIELD(q4vk_simt_gemv_shape, workgroup, 0, uint32_t);
FIELD(q4vk_simt_gemv_shape, rows, 4, uint32_t);
FIELD(q4vk_simt_gemv_shape, unroll, 8, uint32_t);
FIELD(q4vk_simt_gemv_shape, split, 12, uint32_t);
FIELD(q4vk_simt_gemv_shape, word_lanes, 16, uint32_t);
FIELD(q4vk_simt_gemv_shape, reserved, 20, uint32_t);
_Static_assert(sizeof(q4vk_tuned_simt_gemv) == 72, "q4vk_tuned_simt_gemv size");
FIELD(q4vk_tuned_simt_gemv, long_rows, 0, uint32_t);
FIELD(q4vk_tuned_simt_gemv, many_rows, 4, uint32_t);
FIELD(q4vk_tuned_simt_gemv, decode, 8, uint32_t);
FIELD(q4vk_tuned_simt_gemv, candidates_timed, 12, uint32_t);
FIELD(q4vk_tuned_simt_gemv, shape, 16, q4vk_simt_gemv_shape);
FIELD(q4vk_tuned_simt_gemv, table_shape, 40, q4vk_simt_gemv_shape);
FIELD(q4vk_tuned_simt_gemv, time_vs_table, 64, double);
_Static_assert(sizeof(q4vk_tune_info) == 1192, "q4vk_tune_info size");
FIELD(q4vk_tune_info, struct_size, 0, uint32_t);
FIELD(q4vk_tune_info, candidates_timed, 4, uint32_t);
FIELD(q4vk_tune_info, candidates, 8, uint32_t);
FIELD(q4vk_tune_info, workgroup, 12, uint32_t);
FIELD(q4vk_tune_info, rows, 16, uint32_t);
FIELD(q4vk_tune_info, unroll, 20, uint32_t);
FIELD(q4vk_tune_info, split, 24, uint32_t);
FIELD(q4vk_tune_info, table_workgroup, 28, uint32_t);
FIELD(q4vk_tune_info, table_rows, 32, uint32_t);
FIELD(q4vk_tune_info, table_unroll, 36, uint32_t);
FIELD(q4vk_tune_info, table_split, 40, uint32_t);
FIELD(q4vk_tune_info, time_vs_table, 48, double);
FIELD(q4vk_tune_info, word_lanes, 56, uint32_t);
FIELD(q4vk_tune_info, table_word_lanes, 60, uint32_t);
FIELD(q4vk_tune_info, long_rows_from_k, 64, uint32_t);
FIELD(q4vk_tune_info, long_rows_workgroup, 68, uint32_t);
FIELD(q4vk_tune_info, long_rows_rows, 72, uint32_t);
FIELD(q4vk_tune_info, long_rows_unroll, 76, uint32_t);
FIELD(q4vk_tune_info, long_rows_split, 80, uint32_t);
FIELD(q4vk_tune_info, long_rows_word_lanes, 84, uint32_t);
FIELD(q4vk_tune_info, long_rows_time_vs_table, 88, double);
FIELD(q4vk_tune_info, long_rows_table_workgroup, 96, uint32_t);
FIELD(q4vk_tune_info, long_rows_table_rows, 100, uint32_t);
FIELD(q4vk_tune_info, long_rows_table_unroll, 104, uint32_t);
FIELD(q4vk_tune_info, long_rows_table_split, 108, uint32_t);
FIELD(q4vk_tune_info, long_rows_table_word_lanes, 112, uint32_t);
FIELD(q4vk_tune_info, reserved0, 116, uint32_t);
FIELD(q4vk_tune_info, blocks_rows, 120, uint32_t);
FIELD(q4vk_tune_info, blocks_unroll, 124, uint32_t);
FIELD(q4vk_tune_info, blocks_table_rows, 128, uint32_t);
FIELD(q4vk_tune_info, blocks_table_unroll, 132, uint32_t);
FIELD(q4vk_tune_info, blocks_candidates_timed, 136, uint32_t);
FIELD(q4vk_tune_info, blocks_word_lanes, 140, uint32_t);
FIELD(q4vk_tune_info, blocks_time_vs_table, 144, double);
FIELD(q4vk_tune_info, int_dot_workgroup, 152, uint32_t);
FIELD(q4vk_tune_info, int_dot_rows, 156, uint32_t);
FIELD(q4vk_tune_info, int_dot_unroll, 160, uint32_t);
FIELD(q4vk_tune_info, int_dot_split, 164, uint32_t);
FIELD(q4vk_tune_info, int_dot_word_lanes, 168, uint32_t);
FIELD(q4vk_tune_info, int_dot_table_workgroup, 172, uint32_t);
FIELD(q4vk_tune_info, int_dot_table_rows, 176, uint32_t);
FIELD(q4vk_tune_info, int_dot_table_unroll, 180, uint32_t);
FIELD(q4vk_tune_info, int_dot_table_split, 184, uint32_t);
FIELD(q4vk_tune_info, int_dot_table_word_lanes, 188, uint32_t);
FIELD(q4vk_tune_info, int_dot_candidates_timed, 192, uint32_t);
FIELD(q4vk_tune_info, reserved1, 196, uint32_t);
FIELD(q4vk_tune_info, int_dot_time_vs_table, 200, double);
FIELD(q4vk_tune_info, gemm_count, 208, uint32_t);
FIELD(q4vk_tune_info, reserved2, 212, uint32_t);
_Static_assert(offsetof(q4vk_tune_info, gemm) == 216, "q4vk_tune_info.gemm offset");
_Static_assert(sizeof(((q4vk_tune_info *)0)->gemm) == 4 * sizeof(q4vk_tuned_gemm), "q4vk_tune_info.gemm size");
FIELD(q4vk_tune_info, blocks_gemm_count, 408, uint32_t);
FIELD(q4vk_tune_info, reserved3, 412, uint32_t);
_Static_assert(offsetof(q4vk_tune_info, blocks_gemm) == 416, "q4vk_tune_info.blocks_gemm offset");
_Static_assert(sizeof(((q4vk_tune_info *)0)->blocks_gemm) == 4 * sizeof(q4vk_tuned_gemm),
               "q4vk_tune_info.blocks_gemm size");
FIELD(q4vk_tune_info, many_rows_from, 608, uint32_t);
FIELD(q4vk_tune_info, simt_group_count, 612, uint32_t);
_Static_assert(offsetof(q4vk_tune_info, simt_groups) == 616, "q4vk_tune_info.simt_groups offset");
_Static_assert(sizeof(((q4vk_tune_info *)0)->simt_groups) == 8 * sizeof(q4vk_tuned_simt_gemv),
               "q4vk_tune_info.simt_groups size");
_Static_assert(Q4VK_TUNING_BLOB_MAX_BYTES == 256, "Q4VK_TUNING_BLOB_MAX_BYTES");
_Static_assert(Q4VK_GEMV_SHAPE_TABLE == 0 && Q4VK_GEMV_SHAPE_TUNED == 1, "Q4VK_GEMV_SHAPE_*");
_Static_assert(Q4VK_GEMV_KERNEL_COOP_TILES_GEMM == 7, "Q4VK_GEMV_KERNEL_COOP_TILES_GEMM");
_Static_assert(Q4VK_GEMV_KERNEL_BLOCKS_GEMV == 8, "Q4VK_GEMV_KERNEL_BLOCKS_GEMV");
_Static_assert(Q4VK_GEMV_KERNEL_BLOCKS_GEMM == 9, "Q4VK_GEMV_KERNEL_BLOCKS_GEMM");
_Static_assert(Q4VK_GEMV_KERNEL_BLOCKS_COOP_GEMM == 10, "Q4VK_GEMV_KERNEL_BLOCKS_COOP_GEMM");
_Static_assert(Q4VK_GEMV_KERNEL_BLOCKS_FRAGMENT_GEMM == 11, "Q4VK_GEMV_KERNEL_BLOCKS_FRAGMENT_GEMM");
static void (*const p_export_desc_default)(q4vk_kernel_export_desc *) = q4vk_kernel_export_desc_default;
static q4vk_status (*const p_kernel_export)(const q4vk_context *, const q4vk_matrix_desc *,
                                            const q4vk_kernel_export_desc *, q4vk_kernel_info *, uint32_t *,
                                            size_t) = q4vk_kernel_export;
static q4vk_status (*const p_pack_size)(const q4vk_matrix_desc *, size_t *, size_t *, size_t *) =
    q4vk_matrix_pack_size;
static q4vk_status (*const p_pack)(const q4vk_matrix_desc *, void *, size_t, void *, size_t, void *, size_t) =
    q4vk_matrix_pack;
static q4vk_status (*const p_pack_ext_size)(const q4vk_matrix_desc *, size_t *, size_t *, size_t *, size_t *,
                                            size_t *) = q4vk_matrix_pack_extended_size;
static q4vk_status (*const p_pack_ext)(const q4vk_matrix_desc *, void *, size_t, void *, size_t, void *, size_t,
                                       void *, size_t, void *, size_t) = q4vk_matrix_pack_extended;
static q4vk_status (*const p_dequantize)(const q4vk_matrix_desc *, float *, size_t) = q4vk_matrix_dequantize;

int main(void) {
    int failures = 0;
    q4vk_context_desc cd;
    memset(&cd, 0xA5, sizeof cd);
    p_context_desc_default(&cd);
    if (cd.struct_size != sizeof cd || cd.header_version != Q4VK_HEADER_VERSION || cd.device_index != -1 ||
        cd.flags != 0 || cd.log_level != Q4VK_LOG_WARN || cd.log || cd.instance || cd.device || cd.queue_lock ||
        cd.pipeline_cache_data || cd.pipeline_cache_size || cd.cpu_threads || cd.tuning_data || cd.tuning_size || cd.allocate || cd.free ||
        cd.allocator_user) {
        printf("FAIL: q4vk_context_desc_default\n");
        failures++;
    }
    q4vk_matrix_desc md;
    memset(&md, 0xA5, sizeof md);
    p_matrix_desc_default(&md);
    if (md.struct_size != sizeof md || md.source != Q4VK_SOURCE_FLOAT || md.group_size != 128 ||
        md.zero_points != 0 || md.dtype != Q4VK_DTYPE_F16 || md.reserved0 != 0 || md.weight || md.g_idx ||
        md.g_idx_bytes || md.gptq_format != 1) {
        printf("FAIL: q4vk_matrix_desc_default\n");
        failures++;
    }
    q4vk_gemv_args ga;
    memset(&ga, 0xA5, sizeof ga);
    p_gemv_args_default(&ga);
    if (ga.struct_size != sizeof ga || ga.flags != 0 || ga.m != 1 || ga.reserved0 != 0 || ga.x.buffer ||
        ga.x_row_stride || ga.y_row_stride || ga.workspace.buffer || ga.workspace.offset ||
        ga.workspace.range) {
        printf("FAIL: q4vk_gemv_args_default\n");
        failures++;
    }
    q4vk_gemv_host_args ha;
    memset(&ha, 0xA5, sizeof ha);
    p_gemv_host_args_default(&ha);
    if (ha.struct_size != sizeof ha || ha.flags != 0 || ha.m != 1 || ha.reserved0 != 0 || ha.x || ha.x_bytes ||
        ha.y || ha.y_len) {
        printf("FAIL: q4vk_gemv_host_args_default\n");
        failures++;
    }
    q4vk_kernel_export_desc ed;
    memset(&ed, 0xA5, sizeof ed);
    p_export_desc_default(&ed);
    if (ed.struct_size != sizeof ed || ed.variant != Q4VK_KERNEL_PORTABLE || ed.flags != 0 || ed.m != 1 ||
        ed.subgroup_size != 0 || ed.reserved0 != 0 || ed.x_row_stride || ed.y_row_stride || ed.export_flags ||
        ed.reserved1) {
        printf("FAIL: q4vk_kernel_export_desc_default\n");
        failures++;
    }
    q4vk_tune_desc td;
    memset(&td, 0xA5, sizeof td);
    p_tune_desc_default(&td);
    if (td.struct_size != sizeof td || td.budget_ms != 2000 || td.shape_count || td.m_count || td.shapes ||
        td.ms || td.cold_bytes || td.prefill_m_count != 1 || td.reserved0 || !td.prefill_ms ||
        td.prefill_ms[0] != 64) {
        printf("FAIL: q4vk_tune_desc_default\n");
        failures++;
    }
    if (!p_context_tune || !p_binding_create || !p_cmd_gemv_bound || !p_binding_destroy || !p_footprint ||
        !p_context_memory || !p_create_recorded || !p_blob_size || !p_blob || !p_from_blob || !p_from_ggml ||
        !p_cmd_gemv_multi || !p_binding_create_multi)
        failures++;
    if (!p_kernel_export || !p_pack_size || !p_pack || !p_pack_ext_size || !p_pack_ext || !p_dequantize) failures++;
    if (!p_pack_blocks_size || !p_pack_blocks) failures++;
    if (!p_context_create || !p_context_destroy || !p_device_name || !p_q4_size || !p_q4_quantize ||
        !p_matrix_create || !p_matrix_destroy || !p_gemv || !p_gemv_host || !p_cmd_gemv || !p_workspace_size ||
        !p_workspace_key || !p_gemv_prepare || !p_gemv_plan ||
        !p_cache_size || !p_cache_data)
        failures++;
    printf("%s: C11 layout of the Vulkan section of q4vk.h\n", failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}
