// Q4Linear for MNN: shape inference, the Vulkan execution and its creator (see q4linear_mnn.h).
//
// Compiled against MNN's source tree (its internal Vulkan headers, as MNN's own ops are) and
// with MNN's flags: -fno-rtti, since the classes derived here need the base classes'
// typeinfo, which an -fno-rtti MNN does not emit.
#include "q4linear_mnn.h"

#include <MNN/plugin/PluginKernel.hpp>
#include <MNN/plugin/PluginShapeInference.hpp>

#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "MNN_generated.h"
#include "VulkanBackend.hpp"
#include "VulkanBasicExecution.hpp"
#include "component/VulkanBuffer.hpp"
#include "core/TensorUtils.hpp"

namespace {

using MNN::Backend;
using MNN::ErrorCode;
using MNN::Tensor;
using MNN::VulkanBackend;

const char* const OP_TYPE = "Q4Linear";

// ---- the q4vk context of each VkDevice -------------------------------------------------

std::mutex& registry_mutex() {
    static std::mutex m;
    return m;
}

std::map<void*, q4vk_context*>& registry() {
    static std::map<void*, q4vk_context*> contexts;
    return contexts;
}

q4vk_context* context_for(void* device) {
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto it = registry().find(device);
    return it == registry().end() ? nullptr : it->second;
}

std::string q4vk_error(q4vk_status st) {
    char msg[512];
    q4vk_last_error_message(msg, sizeof msg);
    return std::string(q4vk_status_str(st)) + ": " + msg;
}

// ---- attributes ---------------------------------------------------------------------

const MNN::Attribute* find_attr(const MNN::Plugin* plugin, const char* key) {
    if (plugin->attr() == nullptr) return nullptr;
    for (const MNN::Attribute* a : *plugin->attr())
        if (a->key() != nullptr && a->key()->str() == key) return a;
    return nullptr;
}

// The op's attributes as the creator reads them (shape inference needs only n and k).
struct Params {
    int n = 0, k = 0, group_size = 128, zero_points = 0;
    const float* weight = nullptr;
    size_t weight_count = 0;

    bool read(const MNN::Plugin* plugin) {
        const MNN::Attribute* a;
        if ((a = find_attr(plugin, "n")) != nullptr) n = a->i();
        if ((a = find_attr(plugin, "k")) != nullptr) k = a->i();
        if ((a = find_attr(plugin, "group_size")) != nullptr) group_size = a->i();
        if ((a = find_attr(plugin, "zero_points")) != nullptr) zero_points = a->i();
        if ((a = find_attr(plugin, "weight")) != nullptr && a->tensor() != nullptr && a->tensor()->float32s()) {
            weight = a->tensor()->float32s()->data();
            weight_count = a->tensor()->float32s()->size();
        }
        if (n <= 0 || k <= 0) {
            MNN_ERROR("Q4Linear: attributes n = %d, k = %d must be positive\n", n, k);
            return false;
        }
        return true;
    }
};

// ---- shape inference ------------------------------------------------------------------

// y has x's shape with the last dimension k replaced by n, fp32, x's data format.
class Q4LinearShape : public MNN::plugin::InferShapeKernel {
public:
    bool compute(MNN::plugin::InferShapeContext* ctx) override {
        if (ctx->inputs().size() != 1 || ctx->outputs().size() != 1) {
            MNN_ERROR("Q4Linear: one input and one output expected\n");
            return false;
        }
        int n = 0, k = 0;
        if (const MNN::Attribute* a = ctx->getAttr("n")) n = a->i();
        if (const MNN::Attribute* a = ctx->getAttr("k")) k = a->i();
        const Tensor* x = ctx->input(0);
        const int dims = x->dimensions();
        if (n <= 0 || k <= 0 || dims < 1 || x->length(dims - 1) != k ||
            x->getType() != halide_type_of<float>()) {
            MNN_ERROR("Q4Linear: input must be fp32 [..., k = %d] (n = %d), got %d dims, last %d\n", k, n, dims,
                      dims > 0 ? x->length(dims - 1) : 0);
            return false;
        }
        Tensor* y = ctx->output(0);
        y->buffer().dimensions = dims;
        for (int i = 0; i < dims - 1; i++) y->setLength(i, x->length(i));
        y->setLength(dims - 1, n);
        y->buffer().type = halide_type_of<float>();
        MNN::TensorUtils::getDescribe(y)->dimensionFormat = MNN::TensorUtils::getDescribe(x)->dimensionFormat;
        return true;
    }
};

// ---- the CPU "kernel": a clean refusal ------------------------------------------------

// When the Vulkan creator refuses the op, MNN falls back to its CPU backend, whose plugin
// execution dereferences the CPU kernel registered for the type without checking that one
// exists (CPUPlugin's constructor). This one makes that fallback fail with a message.
class Q4LinearNoCpu : public MNN::plugin::CPUComputeKernel {
public:
    bool init(MNN::plugin::CPUKernelContext*) override { return true; }
    bool resize(MNN::plugin::CPUKernelContext*) override {
        MNN_ERROR("Q4Linear: no CPU kernel; the op runs on MNN's Vulkan backend, on a device with an attached "
                  "q4vk context (see the Vulkan backend's message above)\n");
        return false;
    }
    bool compute(MNN::plugin::CPUKernelContext*) override { return false; }
};

// ---- the Vulkan execution -----------------------------------------------------------

uint64_t handle_bits(VkBuffer b) {
    return (uint64_t)(uintptr_t)b;
}

// Records q4vk_cmd_gemv into MNN's command buffer. MNN's execution wrapper has already
// recorded a barrier making x's writes visible to compute-shader reads (VulkanBasicExecution-
// Direct/InDirect::onResize: barrierSource on every input); the next op's wrapper does the
// same for y. MNN rebinds its own pipeline and descriptor sets for every op, so the state
// q4vk_cmd_gemv leaves bound needs no restoring. Where q4vk runs the integer dot-product GEMV
// for this matrix and m (q4vk_gemv_workspace_size > 0), the execution owns the workspace it
// passes: a buffer of MNN's memory pool, grown (never shrunk) when a larger m needs more.
// Growing frees the old buffer while the command buffer recorded before may still name it;
// that is safe because MNN 3.x waits for every submission (VulkanBackend::_finish) and
// re-encodes every op after a resize before it submits again. (MNN's VulkanBuffer reports a
// failed allocation only in its log.)
class Q4LinearExecution : public MNN::VulkanBasicExecution {
public:
    Q4LinearExecution(Backend* bn, q4vk_context* ctx, q4vk_matrix* mat, int n, int k)
        : VulkanBasicExecution(bn), ctx_(ctx), mat_(mat), n_(n), k_(k) {}

    ~Q4LinearExecution() override { q4vk_matrix_destroy(mat_); }

    ErrorCode onEncode(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                       const MNN::VulkanCommandPool::Buffer* cmd) override {
        const Tensor* x = inputs[0];
        const Tensor* y = outputs[0];
        if (MNN::TensorUtils::getDescribe(x)->dimensionFormat == MNN::MNN_DATA_FORMAT_NC4HW4 ||
            MNN::TensorUtils::getDescribe(y)->dimensionFormat == MNN::MNN_DATA_FORMAT_NC4HW4) {
            MNN_ERROR("Q4Linear: NC4HW4 tensors are not supported (row-major [m, k] expected)\n");
            return MNN::NOT_SUPPORT;
        }
        const size_t m = (size_t)x->elementSize() / (size_t)k_;
        auto* vk = static_cast<VulkanBackend*>(backend());
        // (VkBuffer, bytes MNN reserved (rounded up to 4 elements), byte offset in the buffer):
        // tensors share MNN's pooled VkBuffers (x and y are often in the same one), so the
        // offset is often not 0.
        const MNN::VULKAN_TENSOR xb = vk->getBuffer(x);
        const MNN::VULKAN_TENSOR yb = vk->getBuffer(y);
        q4vk_gemv_args a;
        q4vk_gemv_args_default(&a);
        a.m = (uint32_t)m;
        a.x = q4vk_buffer_ref{handle_bits(std::get<0>(xb)), std::get<2>(xb), m * (size_t)k_ * sizeof(float)};
        a.y = q4vk_buffer_ref{handle_bits(std::get<0>(yb)), std::get<2>(yb), m * (size_t)n_ * sizeof(float)};
        uint64_t workspace = 0;
        q4vk_status st = q4vk_gemv_workspace_size(ctx_, mat_, a.m, 0, &workspace);
        if (st != Q4VK_OK) {
            MNN_ERROR("Q4Linear: q4vk_gemv_workspace_size (m = %zu): %s\n", m, q4vk_error(st).c_str());
            return MNN::NOT_SUPPORT;
        }
        if (workspace > 0) {
            if (workspace_ == nullptr || workspace_->size() < workspace)
                workspace_ = std::make_shared<MNN::VulkanBuffer>(vk->getMemoryPool(), false, (size_t)workspace);
            a.workspace = q4vk_buffer_ref{handle_bits(workspace_->buffer()), 0, workspace};
        }
        st = q4vk_cmd_gemv(ctx_, mat_, cmd->get(), &a);
        if (st != Q4VK_OK) {
            MNN_ERROR("Q4Linear: q4vk_cmd_gemv (m = %zu): %s\n", m, q4vk_error(st).c_str());
            return MNN::NOT_SUPPORT;
        }
        return MNN::NO_ERROR;
    }

private:
    q4vk_context* ctx_;
    q4vk_matrix* mat_;
    int n_, k_;
    std::shared_ptr<MNN::VulkanBuffer> workspace_;
};

class Q4LinearCreator : public VulkanBackend::Creator {
public:
    MNN::VulkanBasicExecution* onCreate(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                                        const MNN::Op* op, Backend* bn) const override {
        const MNN::Plugin* plugin = op->main_as_Plugin();
        if (plugin == nullptr || plugin->type() == nullptr || plugin->type()->str() != OP_TYPE) return nullptr;
        if (inputs.size() != 1 || outputs.size() != 1) return nullptr;
        auto* vk = static_cast<VulkanBackend*>(bn);
        if (vk->useFP16()) {
            MNN_ERROR("Q4Linear: the Vulkan backend stores fp16 tensors; this op takes fp32 tensors "
                      "(use BackendConfig::Precision_High, or a shared context)\n");
            return nullptr;
        }
        void* device = (void*)vk->device().get();
        q4vk_context* ctx = context_for(device);
        if (ctx == nullptr) {
            MNN_ERROR("Q4Linear: no q4vk context attached to MNN's VkDevice %p (q4linear_mnn::attach)\n", device);
            return nullptr;
        }
        Params p;
        if (!p.read(plugin)) return nullptr;
        if (p.weight == nullptr || p.weight_count != (size_t)p.n * (size_t)p.k) {
            MNN_ERROR("Q4Linear: attribute \"weight\" must hold n·k = %zu floats (has %zu)\n",
                      (size_t)p.n * (size_t)p.k, p.weight_count);
            return nullptr;
        }
        const q4vk_matrix_desc d = q4linear_mnn::weight_desc(p.weight, p.n, p.k, p.group_size, p.zero_points != 0);
        q4vk_matrix* mat = nullptr;
        const q4vk_status st = q4vk_matrix_create(ctx, &d, &mat);
        if (st != Q4VK_OK) {
            MNN_ERROR("Q4Linear: q4vk_matrix_create: %s\n", q4vk_error(st).c_str());
            return nullptr;
        }
        return new Q4LinearExecution(bn, ctx, mat, p.n, p.k);
    }
};

// Registration, as MNN's own ops do it: from a static initializer. MNN's Vulkan (buffer)
// backend has no creator of its own for OpType_Plugin; if one were registered first,
// VulkanBackend::addCreator would keep it, so the check says so.
const bool registered = [] {
    MNN::plugin::InferShapeKernelRegister::add(OP_TYPE, [] { return new Q4LinearShape; });
    MNN::plugin::ComputeKernelRegistry<MNN::plugin::CPUComputeKernel>::add(OP_TYPE, [] { return new Q4LinearNoCpu; });
    auto* creator = new Q4LinearCreator;
    VulkanBackend::addCreator(MNN::OpType_Plugin, creator);
    if (VulkanBackend::getCreator(MNN::OpType_Plugin) != creator)
        std::fprintf(stderr, "Q4Linear: another Vulkan creator owns OpType_Plugin; Q4Linear is not registered\n");
    return true;
}();

}  // namespace

namespace q4linear_mnn {

void attach(void* device, q4vk_context* ctx) {
    std::lock_guard<std::mutex> lock(registry_mutex());
    registry()[device] = ctx;
}

void detach(void* device) {
    std::lock_guard<std::mutex> lock(registry_mutex());
    registry().erase(device);
}

q4vk_matrix_desc weight_desc(const float* w, int n, int k, int group_size, bool zero_points) {
    q4vk_matrix_desc d;
    q4vk_matrix_desc_default(&d);
    d.source = Q4VK_SOURCE_FLOAT;
    d.dtype = Q4VK_DTYPE_F32;
    d.n = (uint64_t)n;
    d.k = (uint64_t)k;
    d.group_size = group_size;
    d.zero_points = zero_points ? 1u : 0u;
    d.weight = w;
    d.weight_bytes = (size_t)n * (size_t)k * sizeof(float);
    return d;
}

MNN::Express::VARP linear(MNN::Express::VARP x, const float* w, int n, int k, int group_size, bool zero_points) {
    std::unique_ptr<MNN::OpT> op(new MNN::OpT);
    op->type = MNN::OpType_Plugin;
    op->main.type = MNN::OpParameter_Plugin;
    op->main.value = new MNN::PluginT;
    MNN::PluginT* plugin = op->main.AsPlugin();
    plugin->type = OP_TYPE;
    auto add_int = [plugin](const char* key, int value) {
        std::unique_ptr<MNN::AttributeT> a(new MNN::AttributeT);
        a->key = key;
        a->i = value;
        plugin->attr.emplace_back(std::move(a));
    };
    add_int("n", n);
    add_int("k", k);
    add_int("group_size", group_size);
    add_int("zero_points", zero_points ? 1 : 0);
    std::unique_ptr<MNN::AttributeT> weight(new MNN::AttributeT);
    weight->key = "weight";
    weight->tensor.reset(new MNN::BlobT);
    weight->tensor->dims = {n, k};
    weight->tensor->dataType = MNN::DataType_DT_FLOAT;
    weight->tensor->float32s.assign(w, w + (size_t)n * (size_t)k);
    plugin->attr.emplace_back(std::move(weight));
    return MNN::Express::Variable::create(MNN::Express::Expr::create(op.get(), {x}));
}

}  // namespace q4linear_mnn
