// Q4Linear for MNN (3.6.1, Vulkan buffer mode): a 4-bit Linear y[m][n] = x[m][k] · W[n][k]ᵀ
// as an MNN op whose Vulkan execution records q4vk_cmd_gemv into MNN's own command buffer,
// on MNN's VkDevice, with MNN's tensors' VkBuffers and offsets.
//
// The op is MNN's plugin op (OpType_Plugin, type "Q4Linear"): its shape inference is an
// MNN::plugin::InferShapeKernel registered by name, its Vulkan execution a
// VulkanBackend::Creator registered for OpType_Plugin (as MNN's own Vulkan ops register for
// their op types), an MNN::VulkanBasicExecution whose onEncode records the GEMV. There is
// no CPU kernel (the one registered refuses with a message): a graph that reaches the op
// runs it on the Vulkan backend or fails.
//
// Attributes (MNN::Attribute in the op's Plugin parameter):
//   "n", "k"        output and input features (i)
//   "group_size"    -1 (per channel), 32, 64, 128, 256 (i)
//   "zero_points"   0 symmetric, 1 per-group zero points (i)
//   "weight"        fp32 [n][k] (nn.Linear order) in tensor->float32s; quantized with q4vk's
//                   quantizer when the execution is created (q4vk_matrix_create, FLOAT source)
//
// Device: q4vk cannot adopt a VkDevice that MNN created itself (MNN 3.6.1 keeps that
// device's VkInstance, VkPhysicalDevice and queue family private to its runtime). The app
// creates the device, gives it to MNN (MNNVulkanContext as BackendConfig::sharedContext)
// and to q4vk (an adopted-device q4vk context), then attaches that context here. The
// execution checks that MNN's backend records on the attached context's VkDevice.
//
// Tensors: fp32, row-major [m, k] in and [m, n] out (2-D, or more dims whose last is k;
// NC4HW4 tensors are refused). MNN stores fp32 only when it does not use fp16 storage:
// with a shared context it never does (it does not know which 16-bit features the app
// enabled); with an fp16 backend the creator refuses the op.
#pragma once

#include <MNN/expr/Expr.hpp>

#include <cstdint>

#include "q4vk.h"

namespace q4linear_mnn {

// Makes `ctx` the q4vk context Q4Linear executions use on the VkDevice `device` (the
// context's adopted device: `q4vk_context_desc.device`). One context per device; attaching
// again replaces it. The context must outlive every MNN execution created while it is
// attached (release MNN's executors and variables first, then detach, then destroy it).
// Thread-safe.
void attach(void* device, q4vk_context* ctx);

// Forgets the context attached to `device`. Thread-safe.
void detach(void* device);

// The q4vk matrix desc of fp32 weights w [n][k] (nn.Linear order) quantized by q4vk: what
// the op's execution creates its matrix from (and what q4vk_matrix_dequantize turns into
// the weights it computes with). `w` is referenced, not copied.
q4vk_matrix_desc weight_desc(const float* w, int n, int k, int group_size, bool zero_points);

// The Q4Linear op on x ([..., k], fp32) with fp32 weights w [n][k]: returns y [..., n].
// `w` is copied into the op. Builds the expression only; MNN runs it when y is read.
MNN::Express::VARP linear(MNN::Express::VARP x, const float* w, int n, int k, int group_size, bool zero_points);

}  // namespace q4linear_mnn
