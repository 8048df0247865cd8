/* The adopted device, engine-style: this program is the "engine". It owns the VkInstance
 * (validation layer required and verified active; any message fails the run), VkDevice,
 * queue, buffers, its own compute pipeline (engine_ops.comp) and the command buffer; q4vk
 * borrows the device and records q4vk_cmd_gemv BETWEEN two of the engine's dispatches:
 *
 *   engine (a): x = a*x0 + b      -> barrier (shader write -> shader read)
 *   q4vk_cmd_gemv: y = W x        -> barrier (shader write -> shader read)
 *   engine (b): out = c*y + d     -> barrier (shader write -> host read)
 *
 * in ONE command buffer, submitted on the engine's queue with the engine's fence. After
 * q4vk_cmd_gemv the engine rebinds its pipeline, its descriptor set and its push
 * constants, since q4vk leaves its own bound (see q4vk_cmd_gemv in q4vk.h). `out` is
 * checked against an f64 CPU reference of the whole chain, for m = 1, 4 and 16 (prefill: the
 * GEMM) on shapes with odd n and k not a multiple of the group. Where the device has packed 8-bit dot
 * products the engine enables them and tells q4vk (extension + feature chain), asks
 * q4vk_gemv_workspace_size and passes a workspace of that size: then q4vk_cmd_gemv records
 * its digits pre-pass, a barrier and the integer dot-product GEMV (by default where the
 * driver reports them accelerated; Q4VK_INTDOT=1 forces it). --expect-int-dot fails the run
 * unless every case at m <= 8 got a workspace. --round-x-f16 passes Q4VK_GEMV_ROUND_X_TO_F16
 * (to q4vk_gemv_workspace_size and q4vk_cmd_gemv): where the device runs the tensor-core
 * GEMM on x in fragments (m = 16) the result is that of x rounded to f16 and is held to
 * 1e-3; everywhere else the flag changes nothing and every case is held to 1e-5.
 * --replay N records the GEMV through a q4vk_gemv_binding (this engine enables no push
 * descriptors, so the binding owns its descriptor sets) into a command buffer recorded
 * once and submitted N times, x0 rewritten before the last submission: the result must be
 * that of the new x0. --host-memory gives q4vk the engine's allocator (each matrix buffer in
 * a VkDeviceMemory the engine allocates, device-local and unmapped) and uploads every matrix
 * through q4vk_matrix_create_recorded: its copies go into the engine's command buffer from
 * the engine's staging buffer, sized by q4vk_matrix_footprint; every allocation must come
 * back through the free callback.
 * Exit status 0 on success.
 * Usage: engine_pipeline [ENGINE_OPS_SPV] [--expect-int-dot] [--round-x-f16] [--replay N]
 *        [--host-memory] */
#define _POSIX_C_SOURCE 200809L
#include "q4vk.h"

#include <vulkan/vulkan.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_memory.h"
#include "util.h"
#include "vk_check.h"

#ifndef ENGINE_OPS_SPV
#define ENGINE_OPS_SPV "engine_ops.spv"
#endif

static const char *const VALIDATION_LAYER = "VK_LAYER_KHRONOS_validation";

static int messages;      /* validation + q4vk log messages: must stay 0 */
static int probe_active;  /* during the deliberate probe, messages go here instead */
static int probe_hits;

static VKAPI_ATTR VkBool32 VKAPI_CALL on_validation(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                    VkDebugUtilsMessageTypeFlagsEXT types,
                                                    const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                    void *user) {
    (void)severity;
    (void)types;
    (void)user;
    if (probe_active) {
        if (data->pMessageIdName && strstr(data->pMessageIdName, "VkFenceCreateInfo-flags")) probe_hits++;
        return VK_FALSE;
    }
    fprintf(stderr, "validation: %s\n", data->pMessage);
    messages++;
    return VK_FALSE;
}

static void on_q4vk_log(void *user, uint32_t level, const char *message) {
    (void)user;
    fprintf(stderr, "q4vk [%u]: %s\n", level, message);
    if (level <= Q4VK_LOG_WARN) messages++;
}

typedef struct {
    VkBuffer buffer;
    VkDeviceMemory memory;
    void *mapped; /* NULL for device-local buffers the host never touches */
} engine_buffer;

/* host: host-visible + coherent, mapped. Otherwise device-local (the engine's
 * GPU-only intermediates x and y), falling back to any type the buffer accepts. */
static engine_buffer make_buffer(VkPhysicalDevice pd, VkDevice dev, VkDeviceSize size, int host) {
    engine_buffer b = {VK_NULL_HANDLE, VK_NULL_HANDLE, NULL};
    VkBufferCreateInfo info = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    info.size = size;
    info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT;
    info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    CHECK_VK(vkCreateBuffer(dev, &info, NULL, &b.buffer));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev, b.buffer, &req);
    VkPhysicalDeviceMemoryProperties props;
    vkGetPhysicalDeviceMemoryProperties(pd, &props);
    VkMemoryPropertyFlags want = host ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
                                      : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    uint32_t type = UINT32_MAX;
    for (uint32_t i = 0; i < props.memoryTypeCount && type == UINT32_MAX; i++)
        if ((req.memoryTypeBits & (1u << i)) && (props.memoryTypes[i].propertyFlags & want) == want) type = i;
    for (uint32_t i = 0; !host && i < props.memoryTypeCount && type == UINT32_MAX; i++)
        if (req.memoryTypeBits & (1u << i)) type = i;
    if (type == UINT32_MAX) {
        fprintf(stderr, "FAIL: no suitable memory type\n");
        exit(1);
    }
    VkMemoryAllocateInfo alloc = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    alloc.allocationSize = req.size;
    alloc.memoryTypeIndex = type;
    CHECK_VK(vkAllocateMemory(dev, &alloc, NULL, &b.memory));
    CHECK_VK(vkBindBufferMemory(dev, b.buffer, b.memory, 0));
    if (host) CHECK_VK(vkMapMemory(dev, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped));
    return b;
}

static void free_buffer(VkDevice dev, engine_buffer *b) {
    if (b->mapped) vkUnmapMemory(dev, b->memory);
    vkDestroyBuffer(dev, b->buffer, NULL);
    vkFreeMemory(dev, b->memory, NULL);
}

static uint32_t *read_spirv(const char *path, size_t *bytes) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "FAIL: cannot open %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (len <= 0 || len % 4 != 0) {
        fprintf(stderr, "FAIL: %s is not SPIR-V (%ld bytes)\n", path, len);
        exit(1);
    }
    uint32_t *code = malloc((size_t)len);
    if (fread(code, 1, (size_t)len, f) != (size_t)len || code[0] != 0x07230203u) {
        fprintf(stderr, "FAIL: %s is not SPIR-V\n", path);
        exit(1);
    }
    fclose(f);
    *bytes = (size_t)len;
    return code;
}

/* The engine's push constants (engine_ops.comp). */
typedef struct {
    uint32_t mode, count;
    float p, q;
} engine_push;

typedef struct {
    size_t n, k;
    uint32_t m;
} gemv_case;

/* Everything a case allocates on the device, kept until the end of the run. */
typedef struct {
    engine_buffer x0, x, y, out, workspace;
    q4vk_matrix *mat;
} case_objects;

int main(int argc, char **argv) {
    const char *spv_path = ENGINE_OPS_SPV;
    int expect_int_dot = 0;
    uint32_t gemv_flags = 0;
    long replay = 0;
    int host_memory = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--expect-int-dot") == 0)
            expect_int_dot = 1;
        else if (strcmp(argv[i], "--host-memory") == 0)
            host_memory = 1;
        else if (strcmp(argv[i], "--replay") == 0 && i + 1 < argc)
            replay = strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--round-x-f16") == 0)
            gemv_flags = Q4VK_GEMV_ROUND_X_TO_F16;
        else
            spv_path = argv[i];
    }
    const size_t group = 128;
    const gemv_case cases[] = {{301, 1000, 1}, {301, 1000, 4}, {77, 333, 1}, {77, 333, 4}, {77, 333, 16}};
    enum { NCASES = sizeof cases / sizeof cases[0] };
    const float a = 0.75f, b = -0.125f, c = 1.5f, d = 0.25f;

    /* ---- the engine's instance: the validation layer is required, not optional ---- */
    uint32_t layer_count = 0;
    CHECK_VK(vkEnumerateInstanceLayerProperties(&layer_count, NULL));
    VkLayerProperties *layers = calloc(layer_count ? layer_count : 1, sizeof *layers);
    CHECK_VK(vkEnumerateInstanceLayerProperties(&layer_count, layers));
    int listed = 0;
    for (uint32_t i = 0; i < layer_count; i++)
        if (strcmp(layers[i].layerName, VALIDATION_LAYER) == 0) listed = 1;
    free(layers);
    if (!listed) {
        fprintf(stderr, "FAIL: %s is not installed\n", VALIDATION_LAYER);
        return 1;
    }
    VkDebugUtilsMessengerCreateInfoEXT mci = {.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    mci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    mci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    mci.pfnUserCallback = on_validation;
    const char *instance_exts[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "q4vk engine_pipeline";
    app.apiVersion = VK_API_VERSION_1_1;
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ici.pNext = &mci; /* also covers vkCreateInstance/vkDestroyInstance */
    ici.pApplicationInfo = &app;
    ici.enabledLayerCount = 1;
    ici.ppEnabledLayerNames = &VALIDATION_LAYER;
    ici.enabledExtensionCount = 1;
    ici.ppEnabledExtensionNames = instance_exts;
    VkInstance instance;
    VkResult created = vkCreateInstance(&ici, NULL, &instance);
    if (created != VK_SUCCESS) {
        fprintf(stderr, "FAIL: vkCreateInstance with %s = %d\n", VALIDATION_LAYER, (int)created);
        return 1;
    }
    PFN_vkCreateDebugUtilsMessengerEXT create_messenger =
        (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT");
    PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger =
        (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT");
    if (!create_messenger || !destroy_messenger) {
        fprintf(stderr, "FAIL: VK_EXT_debug_utils entry points missing\n");
        return 1;
    }
    VkDebugUtilsMessengerEXT messenger;
    CHECK_VK(create_messenger(instance, &mci, NULL, &messenger));

    uint32_t pd_count = 0;
    CHECK_VK(vkEnumeratePhysicalDevices(instance, &pd_count, NULL));
    if (pd_count == 0) {
        fprintf(stderr, "FAIL: no Vulkan device\n");
        return 1;
    }
    VkPhysicalDevice *pds = calloc(pd_count, sizeof *pds);
    CHECK_VK(vkEnumeratePhysicalDevices(instance, &pd_count, pds));
    VkPhysicalDevice pd = pds[0];
    free(pds);

    /* Is the layer really in the call chain? The loader reports the instance's active
     * layers through the (deprecated) device-layer query. */
    uint32_t active_count = 0;
    CHECK_VK(vkEnumerateDeviceLayerProperties(pd, &active_count, NULL));
    VkLayerProperties *active = calloc(active_count ? active_count : 1, sizeof *active);
    CHECK_VK(vkEnumerateDeviceLayerProperties(pd, &active_count, active));
    int layer_active = 0;
    for (uint32_t i = 0; i < active_count; i++)
        if (strcmp(active[i].layerName, VALIDATION_LAYER) == 0) layer_active = 1;
    free(active);
    if (!layer_active) {
        fprintf(stderr, "FAIL: %s is not active on the instance\n", VALIDATION_LAYER);
        return 1;
    }

    uint32_t qf_count = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &qf_count, NULL);
    VkQueueFamilyProperties *qfs = calloc(qf_count, sizeof *qfs);
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &qf_count, qfs);
    uint32_t family = UINT32_MAX;
    for (uint32_t i = 0; i < qf_count && family == UINT32_MAX; i++)
        if (qfs[i].queueFlags & VK_QUEUE_COMPUTE_BIT) family = i;
    free(qfs);
    if (family == UINT32_MAX) {
        fprintf(stderr, "FAIL: no compute queue family\n");
        return 1;
    }
    float priority = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    qci.queueFamilyIndex = family;
    qci.queueCount = 1;
    qci.pQueuePriorities = &priority;
    /* Packed 8-bit dot products, where the device has them: the extension and its feature,
     * enabled here and passed on to q4vk. */
    const char *dot_ext = VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME;
    uint32_t ext_count = 0;
    CHECK_VK(vkEnumerateDeviceExtensionProperties(pd, NULL, &ext_count, NULL));
    VkExtensionProperties *exts = calloc(ext_count ? ext_count : 1, sizeof *exts);
    CHECK_VK(vkEnumerateDeviceExtensionProperties(pd, NULL, &ext_count, exts));
    int has_dot_ext = 0;
    for (uint32_t i = 0; i < ext_count; i++)
        if (strcmp(exts[i].extensionName, dot_ext) == 0) has_dot_ext = 1;
    free(exts);
    VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR dot_feature = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR};
    VkPhysicalDeviceFeatures2 features = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    int int_dot = 0;
    if (has_dot_ext) { /* the feature struct is the extension's: query it only where listed */
        features.pNext = &dot_feature;
        vkGetPhysicalDeviceFeatures2(pd, &features);
        int_dot = dot_feature.shaderIntegerDotProduct == VK_TRUE;
    }
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    if (int_dot) {
        dot_feature.pNext = NULL;
        features.pNext = &dot_feature;
        memset(&features.features, 0, sizeof features.features);
        dci.pNext = &features;
        dci.enabledExtensionCount = 1;
        dci.ppEnabledExtensionNames = &dot_ext;
    }
    VkDevice device;
    CHECK_VK(vkCreateDevice(pd, &dci, NULL, &device));
    VkQueue queue;
    vkGetDeviceQueue(device, family, 0, &queue);

    /* ...and does it validate? One deliberate invalid call (an undefined VkFenceCreateFlags
     * bit, harmless to the driver) must reach the engine's messenger; it is the only
     * message excused. */
    {
        VkFenceCreateInfo bad = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        bad.flags = 0x40000000u;
        VkFence probe = VK_NULL_HANDLE;
        probe_active = 1;
        VkResult pr = vkCreateFence(device, &bad, NULL, &probe);
        probe_active = 0;
        if (pr == VK_SUCCESS) vkDestroyFence(device, probe, NULL);
        if (probe_hits == 0) {
            fprintf(stderr, "FAIL: the validation layer did not report a deliberate error\n");
            return 1;
        }
    }

    /* ---- the engine's pipeline: one set (x0, x, y, out), 16 bytes of push constants ---- */
    size_t spv_bytes;
    uint32_t *spv = read_spirv(spv_path, &spv_bytes);
    VkShaderModuleCreateInfo smci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    smci.codeSize = spv_bytes;
    smci.pCode = spv;
    VkShaderModule module;
    CHECK_VK(vkCreateShaderModule(device, &smci, NULL, &module));
    free(spv);
    VkDescriptorSetLayoutBinding bindings[4];
    for (uint32_t i = 0; i < 4; i++) {
        memset(&bindings[i], 0, sizeof bindings[i]);
        bindings[i].binding = i;
        bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        bindings[i].descriptorCount = 1;
        bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo dslci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    dslci.bindingCount = 4;
    dslci.pBindings = bindings;
    VkDescriptorSetLayout set_layout;
    CHECK_VK(vkCreateDescriptorSetLayout(device, &dslci, NULL, &set_layout));
    VkPushConstantRange push_range = {VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(engine_push)};
    VkPipelineLayoutCreateInfo plci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    plci.setLayoutCount = 1;
    plci.pSetLayouts = &set_layout;
    plci.pushConstantRangeCount = 1;
    plci.pPushConstantRanges = &push_range;
    VkPipelineLayout layout;
    CHECK_VK(vkCreatePipelineLayout(device, &plci, NULL, &layout));
    VkComputePipelineCreateInfo cpci = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    cpci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    cpci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    cpci.stage.module = module;
    cpci.stage.pName = "main";
    cpci.layout = layout;
    VkPipeline pipeline;
    CHECK_VK(vkCreateComputePipelines(device, VK_NULL_HANDLE, 1, &cpci, NULL, &pipeline));
    VkDescriptorPoolSize pool_size = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 4 * NCASES};
    VkDescriptorPoolCreateInfo dpci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    dpci.maxSets = NCASES;
    dpci.poolSizeCount = 1;
    dpci.pPoolSizes = &pool_size;
    VkDescriptorPool desc_pool;
    CHECK_VK(vkCreateDescriptorPool(device, &dpci, NULL, &desc_pool));
    VkCommandPoolCreateInfo cpi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    cpi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    cpi.queueFamilyIndex = family;
    VkCommandPool cmd_pool;
    CHECK_VK(vkCreateCommandPool(device, &cpi, NULL, &cmd_pool));
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    cai.commandPool = cmd_pool;
    cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cai.commandBufferCount = 1;
    VkCommandBuffer cmd;
    CHECK_VK(vkAllocateCommandBuffers(device, &cai, &cmd));
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    CHECK_VK(vkCreateFence(device, &fci, NULL, &fence));

    /* ---- q4vk borrows the engine's device and queue ---- */
    q4vk_context_desc cd;
    q4vk_context_desc_default(&cd);
    cd.log = on_q4vk_log;
    cd.get_instance_proc_addr = (q4vk_void_fn)vkGetInstanceProcAddr;
    cd.instance = instance;
    cd.physical_device = pd;
    cd.device = device;
    cd.queue = queue; /* single-threaded engine: no queue_lock needed */
    cd.queue_family_index = family;
    cd.api_version = VK_API_VERSION_1_1;
    engine_allocator allocator = {pd, device, 0, 0, 0};
    if (host_memory) {
        cd.allocate = engine_allocate;
        cd.free = engine_free;
        cd.allocator_user = &allocator;
    }
    if (int_dot) {
        cd.enabled_features = &features;
        cd.enabled_extensions = &dot_ext;
        cd.enabled_extension_count = 1;
    }
    q4vk_context *ctx = NULL;
    CHECK_Q4(q4vk_context_create(&cd, &ctx));
    char name[256];
    q4vk_context_device_name(ctx, name, sizeof name);

    int failures = 0;
    case_objects objs[NCASES];
    rng r = {7};
    for (int ci = 0; ci < NCASES; ci++) {
        const size_t n = cases[ci].n, k = cases[ci].k, m = cases[ci].m;
        case_objects *o = &objs[ci];

        /* W: quantized by q4vk from f32 for the CPU reference, uploaded from the same floats. */
        float *w = malloc(n * k * sizeof *w), *x0 = malloc(m * k * sizeof *x0);
        for (size_t i = 0; i < n * k; i++) w[i] = (float)(rng_uniform(&r) * 2.0 - 1.0);
        for (size_t i = 0; i < m * k; i++) x0[i] = (float)(rng_uniform(&r) * 2.0 - 1.0);
        q4vk_matrix_desc md;
        q4vk_matrix_desc_default(&md);
        md.n = n;
        md.k = k;
        md.group_size = (int32_t)group;
        md.dtype = Q4VK_DTYPE_F32;
        md.weight = w;
        md.weight_bytes = n * k * sizeof *w;
        size_t qw_bytes, qs_bytes, qz_bytes;
        CHECK_Q4(q4vk_q4_quantize_size(&md, &qw_bytes, &qs_bytes, &qz_bytes));
        uint8_t *qw = malloc(qw_bytes);
        uint16_t *qs = malloc(qs_bytes);
        CHECK_Q4(q4vk_q4_quantize(&md, qw, qw_bytes, qs, qs_bytes, NULL, 0));
        o->mat = NULL;
        if (host_memory) {
            /* The upload on the engine's terms: its staging buffer (sized by the footprint),
             * its command buffer, its submission. */
            q4vk_matrix_footprint_info fp;
            memset(&fp, 0, sizeof fp);
            fp.struct_size = sizeof fp;
            CHECK_Q4(q4vk_matrix_footprint(ctx, &md, &fp));
            engine_buffer staging = make_buffer(pd, device, fp.upload_bytes ? fp.upload_bytes : 16, 1);
            q4vk_staging st;
            st.buffer.buffer = (uint64_t)staging.buffer;
            st.buffer.offset = 0;
            st.buffer.range = fp.upload_bytes ? fp.upload_bytes : 16;
            st.mapped = staging.mapped;
            VkCommandBufferBeginInfo once = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
            once.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
            CHECK_VK(vkResetCommandBuffer(cmd, 0));
            CHECK_VK(vkBeginCommandBuffer(cmd, &once));
            CHECK_Q4(q4vk_matrix_create_recorded(ctx, &md, cmd, &st, &o->mat));
            CHECK_VK(vkEndCommandBuffer(cmd));
            VkSubmitInfo upload = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO};
            upload.commandBufferCount = 1;
            upload.pCommandBuffers = &cmd;
            CHECK_VK(vkQueueSubmit(queue, 1, &upload, fence));
            CHECK_VK(vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX));
            CHECK_VK(vkResetFences(device, 1, &fence));
            free_buffer(device, &staging);
            printf("  %zu x %zu: %u buffers, %llu device bytes in the engine's memory, %llu staging bytes\n", n, k,
                   fp.buffers, (unsigned long long)fp.device_bytes, (unsigned long long)fp.upload_bytes);
        } else {
            CHECK_Q4(q4vk_matrix_create(ctx, &md, &o->mat));
        }
        /* Load time: compile now what the step will record (no shader compile mid-step). */
        CHECK_Q4(q4vk_gemv_prepare(ctx, o->mat, 1, (uint32_t)m, gemv_flags));

        o->x0 = make_buffer(pd, device, m * k * sizeof(float), 1);
        o->x = make_buffer(pd, device, m * k * sizeof(float), 0);
        o->y = make_buffer(pd, device, m * n * sizeof(float), 0);
        o->out = make_buffer(pd, device, m * n * sizeof(float), 1);
        /* The workspace q4vk_cmd_gemv can use for this matrix and m (0: none). */
        uint64_t workspace = 0;
        CHECK_Q4(q4vk_gemv_workspace_size(ctx, o->mat, (uint32_t)m, gemv_flags, &workspace));
        o->workspace = (engine_buffer){VK_NULL_HANDLE, VK_NULL_HANDLE, NULL};
        if (workspace) o->workspace = make_buffer(pd, device, workspace, 0);
        /* What the step will record for this matrix (the same decision q4vk_cmd_gemv makes). */
        q4vk_gemv_plan_info plan;
        memset(&plan, 0, sizeof plan);
        plan.struct_size = sizeof plan;
        CHECK_Q4(q4vk_gemv_plan(ctx, o->mat, (uint32_t)m, gemv_flags, workspace, &plan));
        if (plan.workspace_bytes != workspace) {
            printf("FAIL: plan uses %llu workspace bytes, the size query said %llu\n",
                   (unsigned long long)plan.workspace_bytes, (unsigned long long)workspace);
            failures++;
        }
        printf("  m %zu N %zu K %zu: %s\n", m, n, k, plan.name);
        if (expect_int_dot && m <= 8 && !workspace) {
            printf("FAIL: no workspace for m %zu N %zu K %zu (integer dot products not used)\n", m, n, k);
            failures++;
        }
        memcpy(o->x0.mapped, x0, m * k * sizeof(float));
        float *out = o->out.mapped;
        for (size_t i = 0; i < m * n; i++) out[i] = NAN;

        VkDescriptorSetAllocateInfo dsai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
        dsai.descriptorPool = desc_pool;
        dsai.descriptorSetCount = 1;
        dsai.pSetLayouts = &set_layout;
        VkDescriptorSet set;
        CHECK_VK(vkAllocateDescriptorSets(device, &dsai, &set));
        VkDescriptorBufferInfo infos[4] = {{o->x0.buffer, 0, VK_WHOLE_SIZE},
                                           {o->x.buffer, 0, VK_WHOLE_SIZE},
                                           {o->y.buffer, 0, VK_WHOLE_SIZE},
                                           {o->out.buffer, 0, VK_WHOLE_SIZE}};
        VkWriteDescriptorSet writes[4];
        for (uint32_t i = 0; i < 4; i++) {
            memset(&writes[i], 0, sizeof writes[i]);
            writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
            writes[i].dstSet = set;
            writes[i].dstBinding = i;
            writes[i].descriptorCount = 1;
            writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
            writes[i].pBufferInfo = &infos[i];
        }
        vkUpdateDescriptorSets(device, 4, writes, 0, NULL);

        /* ---- one command buffer: engine (a) -> q4vk GEMV -> engine (b) ---- */
        CHECK_VK(vkResetCommandBuffer(cmd, 0));
        VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        begin.flags = replay ? 0 : VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
        CHECK_VK(vkBeginCommandBuffer(cmd, &begin));
        VkMemoryBarrier to_compute = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER};
        to_compute.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
        to_compute.dstAccessMask = VK_ACCESS_SHADER_READ_BIT;

        /* (a) x = a*x0 + b (the host's x0 writes are visible through vkQueueSubmit). */
        engine_push pa = {0, (uint32_t)(m * k), a, b};
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
        vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, &set, 0, NULL);
        vkCmdPushConstants(cmd, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pa, &pa);
        vkCmdDispatch(cmd, (uint32_t)((m * k + 63) / 64), 1, 1);
        /* x: compute shader write -> compute shader read (q4vk_cmd_gemv's "before"). */
        vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                             &to_compute, 0, NULL, 0, NULL);

        /* y = W x: binds q4vk's pipeline, its sets 0 and 1 and 48 bytes of push constants
         * (with a workspace: also a barrier, the digits pre-pass and a second barrier). */
        q4vk_gemv_args args;
        q4vk_gemv_args_default(&args);
        args.m = (uint32_t)m;
        args.flags = gemv_flags;
        args.x.buffer = (uint64_t)o->x.buffer;
        args.x.range = m * k * sizeof(float);
        args.y.buffer = (uint64_t)o->y.buffer;
        args.y.range = m * n * sizeof(float);
        args.workspace.buffer = (uint64_t)o->workspace.buffer;
        args.workspace.range = workspace;
        q4vk_gemv_binding *binding = NULL;
        if (replay) {
            /* Bound once: the sets it writes here name x, y and the workspace for good. */
            CHECK_Q4(q4vk_gemv_binding_create(ctx, o->mat, &args, &binding));
            CHECK_Q4(q4vk_cmd_gemv_bound(ctx, binding, cmd));
        } else {
            CHECK_Q4(q4vk_cmd_gemv(ctx, o->mat, cmd, &args));
        }
        /* y: compute shader write -> compute shader read (q4vk_cmd_gemv's "after"). */
        vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                             &to_compute, 0, NULL, 0, NULL);

        /* (b) out = c*y + d. q4vk left its own pipeline, sets and push constants bound:
         * rebind all of the engine's state before dispatching. */
        engine_push pb = {1, (uint32_t)(m * n), c, d};
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
        vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, &set, 0, NULL);
        vkCmdPushConstants(cmd, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pb, &pb);
        vkCmdDispatch(cmd, (uint32_t)((m * n + 63) / 64), 1, 1);
        VkMemoryBarrier to_host = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER};
        to_host.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
        to_host.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
        vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &to_host, 0,
                             NULL, 0, NULL);
        CHECK_VK(vkEndCommandBuffer(cmd));

        /* On the engine's queue, with the engine's fence. */
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO};
        si.commandBufferCount = 1;
        si.pCommandBuffers = &cmd;
        for (long rep = 0; rep < (replay ? replay : 1); rep++) {
            if (replay && rep == replay - 1) {
                /* New activations for the last submission of the same command buffer. */
                for (size_t i = 0; i < m * k; i++) x0[i] = (float)(rng_uniform(&r) * 2.0 - 1.0);
                memcpy(o->x0.mapped, x0, m * k * sizeof(float));
            }
            CHECK_VK(vkQueueSubmit(queue, 1, &si, fence));
            CHECK_VK(vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX));
            CHECK_VK(vkResetFences(device, 1, &fence));
        }
        q4vk_gemv_binding_destroy(binding);

        /* f64 reference of the chain: xs = a*x0 + b; y = dequant(W) xs; ref = c*y + d. */
        double *xs = malloc(k * sizeof *xs);
        double diff = 0, norm = 0;
        int unwritten = 0;
        for (size_t row = 0; row < m; row++) {
            for (size_t i = 0; i < k; i++) xs[i] = (double)a * x0[row * k + i] + (double)b;
            for (size_t j = 0; j < n; j++) {
                double acc = 0;
                for (size_t i = 0; i < k; i++) acc += q4_weight(qw, qs, k, group, j, i) * xs[i];
                double ref = (double)c * acc + (double)d, got = out[row * n + j];
                if (!isfinite(got)) unwritten++;
                diff += (got - ref) * (got - ref);
                norm += ref * ref;
            }
        }
        double err = sqrt(diff / norm);
        /* x rounded to f16 where the flag was asked for and a GEMM workspace was used. */
        double tolerance = gemv_flags && m > 8 && workspace ? 1e-3 : 1e-5;
        int ok = unwritten == 0 && err < tolerance;
        if (!ok) failures++;
        printf("%s: m %zu N %zu K %zu g%zu: engine(a) -> %s (workspace %llu bytes) -> engine(b), "
               "rel err %.2e%s\n",
               ok ? "ok" : "FAIL", m, n, k, group, replay ? "q4vk_cmd_gemv_bound" : "q4vk_cmd_gemv",
               (unsigned long long)workspace, err, unwritten ? " (out not written)" : "");
        if (replay) printf("    one command buffer recorded once, submitted %ld times\n", replay);
        free(xs);
        free(w);
        free(x0);
        free(qw);
        free(qs);
    }

    /* ---- q4vk releases only its own objects; the engine then destroys its own ---- */
    for (int ci = 0; ci < NCASES; ci++) q4vk_matrix_destroy(objs[ci].mat);
    q4vk_context_destroy(ctx);
    if (host_memory) {
        int ok = allocator.allocations > 0 && allocator.frees == allocator.allocations;
        if (!ok) failures++;
        printf("%s: the engine's allocator gave %d allocations (%llu bytes), %d came back\n", ok ? "ok" : "FAIL",
               allocator.allocations, (unsigned long long)allocator.bytes, allocator.frees);
    }
    for (int ci = 0; ci < NCASES; ci++) {
        free_buffer(device, &objs[ci].x0);
        free_buffer(device, &objs[ci].x);
        free_buffer(device, &objs[ci].y);
        free_buffer(device, &objs[ci].out);
        free_buffer(device, &objs[ci].workspace);
    }
    vkDestroyFence(device, fence, NULL);
    vkDestroyCommandPool(device, cmd_pool, NULL);
    vkDestroyDescriptorPool(device, desc_pool, NULL);
    vkDestroyPipeline(device, pipeline, NULL);
    vkDestroyPipelineLayout(device, layout, NULL);
    vkDestroyDescriptorSetLayout(device, set_layout, NULL);
    vkDestroyShaderModule(device, module, NULL);
    vkDestroyDevice(device, NULL);
    destroy_messenger(instance, messenger, NULL);
    vkDestroyInstance(instance, NULL);
    if (messages) {
        printf("FAIL: %d validation/log message(s)\n", messages);
        failures++;
    }
    printf("%s: engine_pipeline on \"%s\": %d case(s), validation on (layer active, probe caught), %d message(s)\n",
           failures ? "FAIL" : "ok", name, NCASES, messages);
    return failures ? 1 : 0;
}
