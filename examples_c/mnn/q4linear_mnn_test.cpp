// Q4Linear (q4linear_mnn.h) inside real MNN, on Vulkan, against MNN's own MatMul.
//
// The app owns the device: it creates a VkInstance (Khronos validation layer on, a debug
// messenger counting every warning, error and performance message), a VkDevice and its
// queue, gives them to MNN as a shared context (MNNVulkanContext in
// BackendConfig::sharedContext of a Vulkan Express executor) and to q4vk as an adopted
// device whose queue is guarded by the app's queue_lock/queue_unlock. Then, for each case
// (n, k, group size, zero points) and each m of the list:
//
//   x [m, k] (Express input) -> Q4Linear (q4vk_cmd_gemv in MNN's command buffer)
//                            -> MatMul(x, Wdqᵀ) (MNN's kernel; Wdq = the dequantized weights
//                               as a constant, from q4vk_matrix_dequantize)
//
// both run by MNN's Vulkan backend; ‖y − y_matmul‖/‖y_matmul‖ < 1e-5 is required, on a
// first run and again after x is rewritten (MNN resubmits the command buffers it recorded).
// Q4Linear has no CPU kernel, so a result proves it ran on the Vulkan backend. The same
// weights also go through q4vk_gemv (q4vk's own submit on the app's queue, inside the
// app's queue lock) and must match too. On executors with MNN's own device (no shared
// context), at normal and high precision, the op must be refused cleanly. Teardown
// releases MNN, q4vk and the device with the validation layer still on, which reports any
// Vulkan object left alive.
//
//   q4linear_mnn_test [m ...]      default m = 1 3 8 9 64; exit 0 = every check passed
// Environment: Q4VK_MNN_VALIDATION=0 runs without the validation layer (default: required);
// Q4VK_MNN_PUSH_DESCRIPTORS=0 leaves VK_KHR_push_descriptor off on the device (default: on
// when offered), so q4vk takes x/y descriptor sets from its ring instead.
#include <vulkan/vulkan.h>

#include <MNN/HalideRuntime.h>  // MNNSharedContext.h uses halide_type_t without including it
#include <MNN/expr/Executor.hpp>
#include <MNN/expr/ExecutorScope.hpp>
#include <MNN/expr/ExprCreator.hpp>
#define MNN_VULKAN  // MNNSharedContext.h declares MNNVulkanContext only under this macro
#include <MNN/MNNSharedContext.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "q4linear_mnn.h"

using MNN::Express::VARP;

namespace {

const double TOL = 1e-5;

struct Case {
    int n, k, group_size, zero_points;
};

int g_messages = 0;  // validation-layer and q4vk warnings: must stay 0

VKAPI_ATTR VkBool32 VKAPI_CALL on_validation(VkDebugUtilsMessageSeverityFlagBitsEXT, VkDebugUtilsMessageTypeFlagsEXT,
                                             const VkDebugUtilsMessengerCallbackDataEXT* data, void*) {
    std::fprintf(stderr, "validation: %s\n", data->pMessage);
    g_messages++;
    return VK_FALSE;
}

void on_q4vk_log(void*, uint32_t level, const char* message) {
    std::fprintf(stderr, "q4vk [%u]: %s\n", level, message);
    if (level <= Q4VK_LOG_WARN) g_messages++;
}

// The app's lock around its queue. Recursive: q4vk_matrix_create may submit (a staging
// upload) from inside an MNN run, i.e. on the thread that already holds the lock around MNN.
struct QueueGuard {
    std::recursive_mutex mutex;
    int q4vk_locks = 0;
};

void lock_queue(void* user) {
    auto* g = static_cast<QueueGuard*>(user);
    g->mutex.lock();
    g->q4vk_locks++;
}

void unlock_queue(void* user) {
    static_cast<QueueGuard*>(user)->mutex.unlock();
}

bool vk_ok(VkResult r, const char* what) {
    if (r != VK_SUCCESS) std::fprintf(stderr, "FAIL: %s: VkResult %d\n", what, (int)r);
    return r == VK_SUCCESS;
}

bool q4vk_ok(q4vk_status st, const char* what) {
    if (st == Q4VK_OK) return true;
    char msg[512];
    q4vk_last_error_message(msg, sizeof msg);
    std::fprintf(stderr, "FAIL: %s: %s: %s\n", what, q4vk_status_str(st), msg);
    return false;
}

float frand(uint32_t& s) {
    s = s * 1664525u + 1013904223u;
    return static_cast<float>(s >> 8) / 8388608.0f - 1.0f;  // [-1, 1)
}

double rel_err(const float* y, const float* ref, size_t count) {
    double dd = 0, rr = 0;
    for (size_t i = 0; i < count; i++) {
        const double d = (double)y[i] - (double)ref[i];
        dd += d * d;
        rr += (double)ref[i] * ref[i];
    }
    return rr > 0 ? std::sqrt(dd / rr) : std::sqrt(dd);
}

// The app's Vulkan objects: instance (+ validation), one compute queue, the device.
struct HostVulkan {
    VkInstance instance = VK_NULL_HANDLE;
    VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
    VkPhysicalDevice physical = VK_NULL_HANDLE;
    VkDevice device = VK_NULL_HANDLE;
    VkQueue queue = VK_NULL_HANDLE;
    uint32_t family = 0;
    std::vector<const char*> device_exts;
    VkPhysicalDeviceProperties props{};
    // Packed 8-bit dot products, enabled where offered and passed on to q4vk (its integer
    // dot-product GEMV; the feature chain must outlive q4vk_context_create).
    VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR dot_feature{};
    VkPhysicalDeviceFeatures2 features{};
    bool int_dot = false;

    bool create(bool validation, bool push_descriptors) {
        VkApplicationInfo app{};
        app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
        app.pApplicationName = "q4vk mnn";
        app.apiVersion = VK_API_VERSION_1_1;
        VkDebugUtilsMessengerCreateInfoEXT mci{};
        mci.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
        mci.messageSeverity =
            VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
        mci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
        mci.pfnUserCallback = on_validation;
        const char* layer = "VK_LAYER_KHRONOS_validation";
        const char* debug_ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
        VkInstanceCreateInfo ici{};
        ici.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
        ici.pApplicationInfo = &app;
        if (validation) {  // the chained messenger also sees vkCreate/DestroyInstance
            ici.pNext = &mci;
            ici.enabledLayerCount = 1;
            ici.ppEnabledLayerNames = &layer;
            ici.enabledExtensionCount = 1;
            ici.ppEnabledExtensionNames = &debug_ext;
        }
        if (!vk_ok(vkCreateInstance(&ici, nullptr, &instance), "vkCreateInstance (validation layer installed?)"))
            return false;
        if (validation) {
            auto create_messenger = (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
                instance, "vkCreateDebugUtilsMessengerEXT");
            if (!create_messenger || !vk_ok(create_messenger(instance, &mci, nullptr, &messenger), "messenger"))
                return false;
        }
        uint32_t count = 0;
        vkEnumeratePhysicalDevices(instance, &count, nullptr);
        std::vector<VkPhysicalDevice> pds(count);
        vkEnumeratePhysicalDevices(instance, &count, pds.data());
        for (VkPhysicalDevice pd : pds) {  // the first Vulkan 1.1 device with a compute queue
            VkPhysicalDeviceProperties candidate;
            vkGetPhysicalDeviceProperties(pd, &candidate);
            uint32_t nf = 0;
            vkGetPhysicalDeviceQueueFamilyProperties(pd, &nf, nullptr);
            std::vector<VkQueueFamilyProperties> fams(nf);
            vkGetPhysicalDeviceQueueFamilyProperties(pd, &nf, fams.data());
            for (uint32_t f = 0; f < nf && physical == VK_NULL_HANDLE; f++)
                if ((fams[f].queueFlags & VK_QUEUE_COMPUTE_BIT) && candidate.apiVersion >= VK_API_VERSION_1_1) {
                    physical = pd;
                    family = f;
                    props = candidate;
                }
        }
        if (physical == VK_NULL_HANDLE) return std::fputs("FAIL: no Vulkan 1.1 device\n", stderr), false;
        // VK_KHR_push_descriptor when offered: q4vk then pushes x/y descriptors, so a command
        // buffer MNN recorded once may be resubmitted any number of times (see README.md).
        uint32_t next = 0;
        vkEnumerateDeviceExtensionProperties(physical, nullptr, &next, nullptr);
        std::vector<VkExtensionProperties> exts(next);
        vkEnumerateDeviceExtensionProperties(physical, nullptr, &next, exts.data());
        bool dot_ext = false;
        for (const VkExtensionProperties& e : exts) {
            if (push_descriptors && std::strcmp(e.extensionName, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME) == 0)
                device_exts.push_back(VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
            if (std::strcmp(e.extensionName, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME) == 0) dot_ext = true;
        }
        dot_feature.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR;
        features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
        if (dot_ext) {  // the feature struct is the extension's: query it only where listed
            features.pNext = &dot_feature;
            vkGetPhysicalDeviceFeatures2(physical, &features);
            int_dot = dot_feature.shaderIntegerDotProduct == VK_TRUE;
        }
        if (int_dot) device_exts.push_back(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
        features.features = VkPhysicalDeviceFeatures{};  // only the dot products beyond core
        const float priority = 1.0f;
        VkDeviceQueueCreateInfo qci{};
        qci.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
        qci.queueFamilyIndex = family;
        qci.queueCount = 1;
        qci.pQueuePriorities = &priority;
        VkDeviceCreateInfo dci{};
        dci.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
        dci.queueCreateInfoCount = 1;
        dci.pQueueCreateInfos = &qci;
        dci.enabledExtensionCount = (uint32_t)device_exts.size();
        dci.ppEnabledExtensionNames = device_exts.data();
        if (int_dot) dci.pNext = &features;
        if (!vk_ok(vkCreateDevice(physical, &dci, nullptr, &device), "vkCreateDevice")) return false;
        vkGetDeviceQueue(device, family, 0, &queue);
        return true;
    }

    void destroy() {
        if (device != VK_NULL_HANDLE) vkDestroyDevice(device, nullptr);
        if (messenger != VK_NULL_HANDLE) {
            auto destroy_messenger = (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
                instance, "vkDestroyDebugUtilsMessengerEXT");
            destroy_messenger(instance, messenger, nullptr);
        }
        if (instance != VK_NULL_HANDLE) vkDestroyInstance(instance, nullptr);
    }
};

// Weights and their dequantization (what the q4vk matrix computes with).
struct Weights {
    std::vector<float> w, wdq;
    bool make(const Case& c, uint32_t seed) {
        w.resize((size_t)c.n * c.k);
        for (float& v : w) v = frand(seed);
        if (c.zero_points)  // asymmetric ranges, so the zero points differ from 8
            for (float& v : w) v = v * 0.7f + 0.25f;
        q4vk_matrix_desc d = desc(c);
        wdq.resize(w.size());
        return q4vk_ok(q4vk_matrix_dequantize(&d, wdq.data(), wdq.size() * sizeof(float)), "q4vk_matrix_dequantize");
    }
    q4vk_matrix_desc desc(const Case& c) const {
        return q4linear_mnn::weight_desc(w.data(), c.n, c.k, c.group_size, c.zero_points != 0);
    }
};

struct Worst {
    double vs_matmul = 0, direct = 0;
};

// One m: builds x -> {Q4Linear, MatMul}, runs twice (x rewritten in between), compares.
bool run_m(const Case& c, const Weights& wt, int m, uint32_t seed, q4vk_context* ctx, q4vk_matrix* direct,
           QueueGuard& guard, Worst& worst) {
    VARP x = MNN::Express::_Input({m, c.k}, MNN::Express::NCHW);
    VARP y = q4linear_mnn::linear(x, wt.w.data(), c.n, c.k, c.group_size, c.zero_points != 0);
    VARP wdq = MNN::Express::_Const(wt.wdq.data(), {c.n, c.k}, MNN::Express::NCHW);
    VARP ref = MNN::Express::_MatMul(x, wdq, false, true);
    const size_t out = (size_t)m * c.n;
    for (int pass = 0; pass < 2; pass++) {
        std::vector<float> xv((size_t)m * c.k);
        for (float& v : xv) v = frand(seed);
        std::memcpy(x->writeMap<float>(), xv.data(), xv.size() * sizeof(float));
        std::vector<float> yv, rv;
        {
            std::lock_guard<std::recursive_mutex> lock(guard.mutex);  // MNN submits to the app's queue
            const float* yp = y->readMap<float>();
            const float* rp = ref->readMap<float>();
            if (yp == nullptr || rp == nullptr)
                return std::fprintf(stderr, "FAIL: MNN did not compute %s (m = %d)\n", yp ? "MatMul" : "Q4Linear", m),
                       false;
            auto yi = y->getInfo();
            if (yi == nullptr || yi->dim != std::vector<int>({m, c.n}))
                return std::fprintf(stderr, "FAIL: Q4Linear output shape (m = %d)\n", m), false;
            yv.assign(yp, yp + out);
            rv.assign(rp, rp + out);
        }
        std::vector<float> yd(out, NAN);  // q4vk's own submit on the app's queue
        if (!q4vk_ok(q4vk_gemv(ctx, direct, xv.data(), xv.size(), yd.data(), yd.size(), (uint32_t)m), "q4vk_gemv"))
            return false;
        const double e = rel_err(yv.data(), rv.data(), out), ed = rel_err(yd.data(), rv.data(), out);
        worst.vs_matmul = std::fmax(worst.vs_matmul, e);
        worst.direct = std::fmax(worst.direct, ed);
        if (!(e < TOL) || !(ed < TOL)) {
            std::fprintf(stderr, "   m = %d pass %d: Q4Linear vs MatMul %.3g, q4vk_gemv vs MatMul %.3g\n", m, pass, e,
                         ed);
            return false;
        }
    }
    return true;
}

bool run_case(const Case& c, const std::vector<int>& ms, uint32_t seed, q4vk_context* ctx, QueueGuard& guard) {
    Weights wt;
    if (!wt.make(c, seed)) return false;
    q4vk_matrix_desc d = wt.desc(c);
    q4vk_matrix* direct = nullptr;
    if (!q4vk_ok(q4vk_matrix_create(ctx, &d, &direct), "q4vk_matrix_create")) return false;
    Worst worst;
    bool ok = true;
    std::string mlist;
    for (int m : ms) {
        mlist += (mlist.empty() ? "" : ",") + std::to_string(m);
        ok = run_m(c, wt, m, seed ^ (0x9e3779b9u * (uint32_t)m), ctx, direct, guard, worst) && ok;
    }
    q4vk_matrix_destroy(direct);
    std::printf("[%s] n=%-4d k=%-4d group=%-4d zero_points=%d m=%s: max ||d||/||ref|| Q4Linear vs MatMul %.2e, "
                "q4vk_gemv vs MatMul %.2e\n",
                ok ? " OK " : "FAIL", c.n, c.k, c.group_size, c.zero_points, mlist.c_str(), worst.vs_matmul,
                worst.direct);
    return ok;
}

// MNN's own device (no shared context): q4vk cannot adopt it, so no context is attached
// and the op must be refused cleanly (Vulkan creator, then MNN's CPU fallback), not run
// on a device of q4vk's own and not crash. Precision_Normal on a device with fp16 storage
// is refused for that first (MNN then stores fp16 tensors), Precision_High for the context.
bool own_device_refused(MNN::BackendConfig::PrecisionMode precision) {
    MNN::BackendConfig config;
    config.precision = precision;
    std::shared_ptr<MNN::Express::Executor> executor =
        MNN::Express::Executor::newExecutor(MNN_FORWARD_VULKAN, config, 1);
    if (!executor) return std::fputs("FAIL: MNN has no Vulkan executor of its own\n", stderr), false;
    MNN::Express::ExecutorScope scope(executor);
    const int n = 8, k = 32;
    std::vector<float> w((size_t)n * k, 0.5f);
    VARP x = MNN::Express::_Input({1, k}, MNN::Express::NCHW);
    std::fill(x->writeMap<float>(), x->writeMap<float>() + k, 1.0f);
    VARP y = q4linear_mnn::linear(x, w.data(), n, k, -1, false);
    const bool refused = y->readMap<float>() == nullptr;
    std::printf("[%s] MNN's own device, %s precision: Q4Linear %s\n", refused ? " OK " : "FAIL",
                precision == MNN::BackendConfig::Precision_High ? "high" : "normal",
                refused ? "refused (message above)" : "ran: it must not");
    return refused;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<int> ms;
    for (int i = 1; i < argc; i++) ms.push_back(std::atoi(argv[i]));
    if (ms.empty()) ms = {1, 3, 8, 9, 64};  // GEMV kernels up to 8, the prefill GEMM above
    for (int m : ms)
        if (m < 1) return std::fprintf(stderr, "usage: q4linear_mnn_test [m ...] (m >= 1)\n"), 2;
    const char* env = std::getenv("Q4VK_MNN_VALIDATION");
    const bool validation = env == nullptr || std::strcmp(env, "0") != 0;
    env = std::getenv("Q4VK_MNN_PUSH_DESCRIPTORS");
    const bool push_descriptors = env == nullptr || std::strcmp(env, "0") != 0;

    HostVulkan vk;
    if (!vk.create(validation, push_descriptors)) return vk.destroy(), 1;
    std::printf("app device: %s (queue family %u, push descriptors %s, nonCoherentAtomSize %llu, "
                "minStorageBufferOffsetAlignment %llu), validation %s\n",
                vk.props.deviceName, vk.family, vk.device_exts.empty() ? "off" : "on",
                (unsigned long long)vk.props.limits.nonCoherentAtomSize,
                (unsigned long long)vk.props.limits.minStorageBufferOffsetAlignment, validation ? "on" : "OFF");

    QueueGuard guard;
    q4vk_context_desc cd;
    q4vk_context_desc_default(&cd);
    cd.log = on_q4vk_log;
    cd.log_level = Q4VK_LOG_WARN;
    cd.get_instance_proc_addr = (q4vk_void_fn)vkGetInstanceProcAddr;
    cd.instance = vk.instance;
    cd.physical_device = vk.physical;
    cd.device = vk.device;
    cd.queue = vk.queue;
    cd.queue_family_index = vk.family;
    cd.api_version = VK_API_VERSION_1_1;
    cd.enabled_extensions = vk.device_exts.data();
    cd.enabled_extension_count = (uint32_t)vk.device_exts.size();
    cd.enabled_features = vk.int_dot ? &vk.features : nullptr;
    cd.queue_lock = lock_queue;
    cd.queue_unlock = unlock_queue;
    cd.queue_lock_user = &guard;
    q4vk_context* ctx = nullptr;
    if (!q4vk_ok(q4vk_context_create(&cd, &ctx), "q4vk_context_create")) return vk.destroy(), 1;
    q4linear_mnn::attach(vk.device, ctx);
    // Q4VK_MNN_EXPECT_INT_DOT=1 (run.sh, with Q4VK_INTDOT=1): the op must get a workspace,
    // i.e. run the integer dot-product GEMV, or the run fails.
    const char* expect_int_dot = std::getenv("Q4VK_MNN_EXPECT_INT_DOT");
    if (expect_int_dot != nullptr && std::strcmp(expect_int_dot, "1") == 0) {
        const int n = 8, k = 64;
        std::vector<float> w((size_t)n * k, 0.5f);
        const q4vk_matrix_desc d = q4linear_mnn::weight_desc(w.data(), n, k, 32, false);
        q4vk_matrix* probe = nullptr;
        uint64_t workspace = 0;
        if (!q4vk_ok(q4vk_matrix_create(ctx, &d, &probe), "q4vk_matrix_create (probe)") ||
            !q4vk_ok(q4vk_gemv_workspace_size(ctx, probe, 1, 0, &workspace), "q4vk_gemv_workspace_size") ||
            workspace == 0) {
            std::fputs("FAIL: Q4VK_MNN_EXPECT_INT_DOT=1 but q4vk asks for no workspace (integer dot products off)\n",
                       stderr);
            q4vk_matrix_destroy(probe);
            q4vk_context_destroy(ctx);
            return vk.destroy(), 1;
        }
        q4vk_matrix_destroy(probe);
        std::printf("integer dot-product GEMV: %llu-byte workspace at m = 1, k = %d\n",
                    (unsigned long long)workspace, k);
    }

    const Case cases[] = {
        {37, 100, 32, 0},    // odd n, k = 3·32 + 4
        {129, 200, 64, 1},   // k = 3·64 + 8, zero points
        {65, 333, 128, 0},   // odd k
        {31, 257, -1, 0},    // per channel
        {255, 1000, 256, 1}, // larger
    };
    int failed = 0;
    {
        MNNVulkanContext shared = {vk.instance, vk.physical, vk.device, vk.queue, vk.family};
        MNN::BackendConfig config;
        config.precision = MNN::BackendConfig::Precision_Normal;  // fp32 anyway: see q4linear_mnn.h
        config.sharedContext = &shared;
        std::shared_ptr<MNN::Express::Executor> executor =
            MNN::Express::Executor::newExecutor(MNN_FORWARD_VULKAN, config, 1);
        if (!executor) {
            std::fputs("FAIL: MNN has no Vulkan executor\n", stderr);
            failed = 1;
        } else {
            MNN::Express::ExecutorScope scope(executor);
            uint32_t seed = 2026;
            for (const Case& c : cases) {
                if (!run_case(c, ms, seed, ctx, guard)) failed++;
                seed = seed * 747796405u + 2891336453u;
            }
        }
    }  // MNN's executor, runtime and every execution (and its q4vk matrix) are released here
    for (auto precision : {MNN::BackendConfig::Precision_Normal, MNN::BackendConfig::Precision_High})
        if (!own_device_refused(precision)) failed++;

    q4linear_mnn::detach(vk.device);
    q4vk_context_destroy(ctx);
    vk.destroy();  // the validation layer reports any object left alive on the device
    std::printf("q4vk submits inside the app's queue lock: %d\n", guard.q4vk_locks);
    if (guard.q4vk_locks == 0) {
        std::fputs("FAIL: q4vk never called queue_lock (q4vk_gemv submits on the app's queue)\n", stderr);
        failed++;
    }
    if (g_messages != 0) {
        std::fprintf(stderr, "FAIL: %d validation / q4vk warning message(s)\n", g_messages);
        failed++;
    }
    std::printf("%s (%d failure(s); %zu cases; validation messages %d)\n", failed ? "Q4LINEAR MNN FAILED" : "Q4LINEAR MNN PASSED",
                failed, sizeof cases / sizeof cases[0], g_messages);
    return failed ? 1 : 0;
}
