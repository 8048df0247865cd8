// Q4Linear: an ncnn custom layer (Vulkan) for a 4-bit Linear, y[m][n] = x[m][k] · W[n][k]ᵀ,
// running q4vk's exported fused int4-dequant kernels inside ncnn's own command buffer: the
// GEMV for m = 1..8 (decode) and the GEMM for m > 8 (prefill), on the same uploaded weights.
//
// Everything Vulkan is ncnn's: the pipeline is an ncnn::Pipeline made from the SPIR-V and
// specialization constants q4vk_kernel_export returns, the weights are uploaded with ncnn's
// allocator (VkTransfer::record_upload) from the device-layout bytes q4vk_matrix_pack
// writes, and forward() records the dispatch with VkCompute::record_pipeline. q4vk makes no
// Vulkan call at all here (no q4vk context: see `variant` below).
//
// .param (layer type name as registered, e.g. "Q4Linear"):
//   0 = n            output features (num_output)                          required
//   1 = k            input features                                        required
//   2 = group_size   -1 (per channel), 32, 64, 128, 256                    default 128
//   3 = zero_points  0 symmetric, 1 per-group zero points                  default 0
//   4 = weight_format 0: n·k fp32 weights [n][k] in the .bin (ncnn's usual tagged blob),
//                       quantized at load with q4vk's quantizer (q4vk_matrix_pack of a
//                       FLOAT desc = q4vk_q4_quantize + device layout)
//                     1: pre-quantized (q4vk_q4_quantize's outputs), each a raw blob of
//                       4-byte words, zero-padded: packed nibbles n·ceil(k/2) bytes, f16
//                       scales n·groups·2 bytes, zero points n·groups bytes (if 3=1)
//                     2: an imported 4-bit checkpoint tensor, not requantized (source 7):
//                       the tensors q4vk_matrix_desc takes for that source, each a raw
//                       blob of 4-byte words, zero-padded, in the order weight, scales,
//                       zeros, g_idx (those whose byte count 10..13 is not 0); GGUF
//                       types q4vk keeps in their native blocks (every one but Q4_0) run
//                       the kernels on blocks (Q4VK_KERNEL_EXPORT_BLOCKS +
//                       q4vk_matrix_pack_blocks), the others the extended kernel
//                       (Q4VK_KERNEL_EXPORT_EXTENDED + q4vk_matrix_pack_extended:
//                       column order)
//   5 = variant      0 portable kernel (no subgroup operations; runs everywhere),
//                    1 subgroup kernel (needs subgroup basic+arithmetic; subgroup size
//                      taken from ncnn's GpuInfo),
//                    2 auto: subgroup when ncnn's GpuInfo reports the operations, else
//                      portable                                             default 2
//   6 = max_m        largest blob height (m) to support; 0 = any. One GEMV pipeline per
//                    m = 1..min(max_m, 8) (the exported GEMV is specialized on m) and,
//                    when max_m is 0 or above 8, one GEMM pipeline for every m > 8 (m is
//                    a push constant there)                                 default 0
//   Format 2 only:
//   7 = source       Q4VK_SOURCE_GGUF_Q4_0 (3), _Q4_1 (4), _Q4_K (5), Q4VK_SOURCE_GPTQ (6),
//                    Q4VK_SOURCE_AWQ (7), Q4VK_SOURCE_GGUF_Q5_0 (8) .. _NVFP4 (16) (scales
//                    f16, as checkpoints store them; 2 = group size for GPTQ/AWQ,
//                    ignored for GGUF)                                     required
//   8 = gptq_format  1 (zeros stored minus one) or 2 (GPTQModel's v2)      default 1
//   10..13           bytes of weight, scales, zeros, g_idx (0: absent)     default 0
//   Every format:
//   9 = bias_term    1: n fp32 bias values follow the weights in the .bin (raw, untagged,
//                    as InnerProduct's), added by the kernel (Q4VK_KERNEL_EXPORT_BIAS)
//                                                                          default 0
//
// Blobs: elempack 1 (keep packing off for this layer, which is the default for custom
// layers), fp32, or fp16 where the net runs with opt.use_fp16_storage (ncnn's default on
// devices with 16-bit storage): x is then read and y written as f16 (the extended export
// with Q4VK_GEMV_F16_ACTIVATIONS | Q4VK_GEMV_F16_OUTPUT), the sums and the bias stay fp32;
// bf16 storage is refused. Input 1-D w = k (m = 1; output 1-D w = n) or 2-D w = k, h = m
// (output 2-D w = n, h = m), like ncnn's InnerProduct.
#pragma once

#include "command.h"
#include "gpu.h"
#include "layer.h"
#include "pipeline.h"

#include <cstdint>
#include <vector>

#include "q4vk.h"

class Q4Linear : public ncnn::Layer
{
public:
    Q4Linear();

    int load_param(const ncnn::ParamDict& pd) override;
    int load_model(const ncnn::ModelBin& mb) override;
    int create_pipeline(const ncnn::Option& opt) override;
    int destroy_pipeline(const ncnn::Option& opt) override;
    int upload_model(ncnn::VkTransfer& cmd, const ncnn::Option& opt) override;
    using ncnn::Layer::forward;
    int forward(const ncnn::VkMat& bottom_blob, ncnn::VkMat& top_blob, ncnn::VkCompute& cmd,
                const ncnn::Option& opt) const override;

    // The variant the pipelines were created with (Q4VK_KERNEL_PORTABLE / _SUBGROUP).
    uint32_t exported_variant() const { return variant_used; }
    // Whether the pipelines read and write fp16 blobs (the net's opt.use_fp16_storage).
    bool fp16_blobs() const { return fp16; }

    static const int MAX_M = 8;  // largest m of the GEMV; larger m runs the GEMM

private:
    q4vk_matrix_desc matrix_desc() const;  // shape + data pointers of the loaded weights
    int load_weights(const ncnn::ModelBin& mb);  // load_model's weights, before the bias
    // Exports the kernel for m (the GEMM when m > 8) and creates its ncnn pipeline.
    int make_pipeline(const q4vk_matrix_desc& d, int m, uint32_t subgroup_size, q4vk_kernel_info& info,
                      ncnn::Pipeline*& pipe);
    // The GEMM's push constants 8 and 10 and group counts for m (q4vk.h's documented rule).
    int gemm_dispatch(int m, std::vector<ncnn::vk_constant_type>& constants, uint32_t groups[3]) const;

    int n = 0, k = 0, group_size = 128, zero_points = 0, weight_format = 0, variant = 2, max_m = 0;
    int source = 0, gptq_format = 1, bias_term = 0;
    int imported_bytes[4] = {};                   // format 2: weight, scales, zeros, g_idx

    // CPU data until upload_model (released afterwards with opt.lightmode).
    ncnn::Mat weight_f32;                         // format 0
    ncnn::Mat q_weight, q_scales, q_zeros;        // format 1 (raw words)
    ncnn::Mat imported[4];                        // format 2 (raw words)
    ncnn::Mat bias_data;                          // bias_term: n fp32

    // Device side, created with ncnn's allocators.
    ncnn::VkMat w_gpu, s_gpu, z_gpu;
    ncnn::VkMat o_gpu, k_gpu;                     // format 2: offsets, column order (or empty)
    ncnn::VkMat h_gpu;                            // blocks: Q5_0's and Q5_1's fifth bits (or empty)
    bool blocks = false;                          // format 2 of a type kept in its native blocks
    ncnn::VkMat b_gpu;                            // bias_term: the bias (or empty)

    uint32_t variant_used = Q4VK_KERNEL_PORTABLE;
    bool fp16 = false;                            // fp16 x and y (opt.use_fp16_storage)
    ncnn::Pipeline* pipes[MAX_M] = {};           // GEMV, m = 1..8
    q4vk_kernel_info infos[MAX_M] = {};
    ncnn::Pipeline* gemm_pipe = nullptr;          // GEMM, every m > 8
    q4vk_kernel_info gemm_info = {};              // exported at m = 9; see forward()
};

ncnn::Layer* Q4Linear_layer_creator(void* userdata);
