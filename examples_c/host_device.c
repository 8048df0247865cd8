/* The adopted-device path from C: this program creates its own VkInstance (with the
 * validation layer when installed; any message fails the run), VkDevice, queue and
 * buffers through the Vulkan loader, hands them to q4vk_context_create, records
 * q4vk_cmd_gemv into its own command buffer, submits it, and checks y against an f64 CPU
 * reference of the dequantized weights, at m = 1 (a GEMV kernel) and m = M (default 64: the
 * prefill GEMM). It also runs q4vk_gemv (and q4vk_gemv_host on f16 activations), which
 * submit to the host's queue inside the host's queue_lock/queue_unlock callbacks.
 * Exit status 0 on success. Usage: host_device [N K [M]] */
#define _POSIX_C_SOURCE 200809L
#include "q4vk.h"

#include <vulkan/vulkan.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "vk_check.h"

static int validation_messages;

static VKAPI_ATTR VkBool32 VKAPI_CALL on_validation(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                    VkDebugUtilsMessageTypeFlagsEXT types,
                                                    const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                    void *user) {
    (void)severity;
    (void)types;
    (void)user;
    fprintf(stderr, "validation: %s\n", data->pMessage);
    validation_messages++;
    return VK_FALSE;
}

static void on_q4vk_log(void *user, uint32_t level, const char *message) {
    (void)user;
    fprintf(stderr, "q4vk [%u]: %s\n", level, message);
    if (level <= Q4VK_LOG_WARN) validation_messages++;
}

typedef struct {
    pthread_mutex_t mutex;
    int locks;
} queue_guard;

static void lock_queue(void *user) {
    queue_guard *g = user;
    pthread_mutex_lock(&g->mutex);
    g->locks++;
}

static void unlock_queue(void *user) {
    queue_guard *g = user;
    pthread_mutex_unlock(&g->mutex);
}

typedef struct {
    VkBuffer buffer;
    VkDeviceMemory memory;
    void *mapped;
} host_buffer;

static host_buffer make_buffer(VkPhysicalDevice pd, VkDevice dev, VkDeviceSize size) {
    host_buffer b;
    VkBufferCreateInfo info = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    info.size = size;
    info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
    info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    CHECK_VK(vkCreateBuffer(dev, &info, NULL, &b.buffer));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev, b.buffer, &req);
    VkPhysicalDeviceMemoryProperties props;
    vkGetPhysicalDeviceMemoryProperties(pd, &props);
    VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    uint32_t type = UINT32_MAX;
    for (uint32_t i = 0; i < props.memoryTypeCount && type == UINT32_MAX; i++)
        if ((req.memoryTypeBits & (1u << i)) && (props.memoryTypes[i].propertyFlags & want) == want) type = i;
    if (type == UINT32_MAX) {
        fprintf(stderr, "FAIL: no host-visible coherent memory\n");
        exit(1);
    }
    VkMemoryAllocateInfo alloc = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    alloc.allocationSize = req.size;
    alloc.memoryTypeIndex = type;
    CHECK_VK(vkAllocateMemory(dev, &alloc, NULL, &b.memory));
    CHECK_VK(vkBindBufferMemory(dev, b.buffer, b.memory, 0));
    CHECK_VK(vkMapMemory(dev, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped));
    return b;
}

static void free_buffer(VkDevice dev, host_buffer *b) {
    vkUnmapMemory(dev, b->memory);
    vkDestroyBuffer(dev, b->buffer, NULL);
    vkFreeMemory(dev, b->memory, NULL);
}

int main(int argc, char **argv) {
    size_t n = argc > 2 ? (size_t)atol(argv[1]) : 301, k = argc > 2 ? (size_t)atol(argv[2]) : 1000;
    size_t big_m = argc > 3 ? (size_t)atol(argv[3]) : 64;
    const size_t group = 128;

    /* ---- the host's own Vulkan objects ---- */
    uint32_t layer_count = 0;
    vkEnumerateInstanceLayerProperties(&layer_count, NULL);
    VkLayerProperties *layers = calloc(layer_count ? layer_count : 1, sizeof *layers);
    vkEnumerateInstanceLayerProperties(&layer_count, layers);
    int validation = 0;
    for (uint32_t i = 0; i < layer_count; i++)
        if (strcmp(layers[i].layerName, "VK_LAYER_KHRONOS_validation") == 0) validation = 1;
    free(layers);
    const char *layer_names[] = {"VK_LAYER_KHRONOS_validation"};
    const char *instance_exts[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "q4vk host_device";
    app.apiVersion = VK_API_VERSION_1_1;
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ici.pApplicationInfo = &app;
    ici.enabledLayerCount = validation ? 1 : 0;
    ici.ppEnabledLayerNames = layer_names;
    ici.enabledExtensionCount = validation ? 1 : 0;
    ici.ppEnabledExtensionNames = instance_exts;
    VkInstance instance;
    CHECK_VK(vkCreateInstance(&ici, NULL, &instance));
    VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
    PFN_vkCreateDebugUtilsMessengerEXT create_messenger =
        (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT");
    PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger =
        (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT");
    if (validation && create_messenger) {
        VkDebugUtilsMessengerCreateInfoEXT mci = {.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
        mci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
        mci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT;
        mci.pfnUserCallback = on_validation;
        CHECK_VK(create_messenger(instance, &mci, NULL, &messenger));
    }
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
    uint32_t qf_count = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &qf_count, NULL);
    VkQueueFamilyProperties *qfs = calloc(qf_count, sizeof *qfs);
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &qf_count, qfs);
    uint32_t family = UINT32_MAX;
    for (uint32_t i = 0; i < qf_count && family == UINT32_MAX; i++)
        if (qfs[i].queueFlags & VK_QUEUE_COMPUTE_BIT) family = i;
    free(qfs);
    float priority = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    qci.queueFamilyIndex = family;
    qci.queueCount = 1;
    qci.pQueuePriorities = &priority;
    /* As an engine does: enable the optional features it uses (here 16-bit storage, where
     * offered) through a VkPhysicalDeviceFeatures2 chain, and lend q4vk that chain. */
    VkPhysicalDevice16BitStorageFeatures storage16 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
    VkPhysicalDeviceFeatures2 features = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    features.pNext = &storage16;
    vkGetPhysicalDeviceFeatures2(pd, &features);
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    dci.pNext = &features;
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    VkDevice device;
    CHECK_VK(vkCreateDevice(pd, &dci, NULL, &device)); /* no extensions: q4vk uses cached sets */
    VkQueue queue;
    vkGetDeviceQueue(device, family, 0, &queue);

    /* ---- q4vk borrows them ---- */
    queue_guard guard = {PTHREAD_MUTEX_INITIALIZER, 0};
    q4vk_context_desc cd;
    q4vk_context_desc_default(&cd);
    cd.log = on_q4vk_log;
    cd.get_instance_proc_addr = (q4vk_void_fn)vkGetInstanceProcAddr;
    cd.instance = instance;
    cd.physical_device = pd;
    cd.device = device;
    cd.queue = queue;
    cd.queue_family_index = family;
    cd.api_version = VK_API_VERSION_1_1;
    cd.enabled_features = &features;
    cd.queue_lock = lock_queue;
    cd.queue_unlock = unlock_queue;
    cd.queue_lock_user = &guard;
    q4vk_context *ctx = NULL;
    CHECK_Q4(q4vk_context_create(&cd, &ctx));
    char name[256];
    q4vk_context_device_name(ctx, name, sizeof name);

    /* Weights: quantize on the CPU for the reference, and upload the same floats. */
    float *w = malloc(n * k * sizeof *w), *x = malloc(big_m * k * sizeof *x);
    rng r = {42};
    for (size_t i = 0; i < n * k; i++) w[i] = (float)(rng_uniform(&r) * 2.0 - 1.0);
    for (size_t i = 0; i < big_m * k; i++) x[i] = (float)(rng_uniform(&r) * 2.0 - 1.0);
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
    q4vk_matrix *mat = NULL;
    CHECK_Q4(q4vk_matrix_create(ctx, &md, &mat));

    /* ---- record q4vk_cmd_gemv into the host's command buffer ---- */
    host_buffer xb = make_buffer(pd, device, big_m * k * sizeof(float));
    host_buffer yb = make_buffer(pd, device, n * sizeof(float));
    host_buffer ymb = make_buffer(pd, device, big_m * n * sizeof(float));
    memcpy(xb.mapped, x, big_m * k * sizeof(float));
    float *y = yb.mapped, *ym = ymb.mapped;
    for (size_t i = 0; i < n; i++) y[i] = NAN;
    for (size_t i = 0; i < big_m * n; i++) ym[i] = NAN;
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pci.queueFamilyIndex = family;
    VkCommandPool pool;
    CHECK_VK(vkCreateCommandPool(device, &pci, NULL, &pool));
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    cai.commandPool = pool;
    cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cai.commandBufferCount = 1;
    VkCommandBuffer cmd;
    CHECK_VK(vkAllocateCommandBuffers(device, &cai, &cmd));
    VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    CHECK_VK(vkBeginCommandBuffer(cmd, &begin));
    q4vk_gemv_args args;
    q4vk_gemv_args_default(&args);
    args.x.buffer = (uint64_t)xb.buffer;
    args.x.range = k * sizeof(float);
    args.y.buffer = (uint64_t)yb.buffer;
    args.y.range = n * sizeof(float);
    CHECK_Q4(q4vk_cmd_gemv(ctx, mat, cmd, &args));
    /* The same call at m = big_m (the GEMM for m > 8) into its own y. */
    args.m = (uint32_t)big_m;
    args.x.range = big_m * k * sizeof(float);
    args.y.buffer = (uint64_t)ymb.buffer;
    args.y.range = big_m * n * sizeof(float);
    CHECK_Q4(q4vk_cmd_gemv(ctx, mat, cmd, &args));
    VkMemoryBarrier barrier = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &barrier,
                         0, NULL, 0, NULL);
    CHECK_VK(vkEndCommandBuffer(cmd));
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    CHECK_VK(vkCreateFence(device, &fci, NULL, &fence));
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd;
    lock_queue(&guard);
    CHECK_VK(vkQueueSubmit(queue, 1, &si, fence));
    unlock_queue(&guard);
    CHECK_VK(vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX));

    int failures = 0;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(y[i])) {
            printf("FAIL: y[%zu] not written\n", i);
            failures++;
            break;
        }
    for (size_t i = 0; i < big_m * n; i++)
        if (!isfinite(ym[i])) {
            printf("FAIL: y[%zu] of the m = %zu call not written\n", i, big_m);
            failures++;
            break;
        }
    double err_cmd = q4_rel_error(y, qw, qs, x, n, k, group, 1);
    double err_cmd_m = q4_rel_error(ym, qw, qs, x, n, k, group, big_m);

    /* ---- q4vk_gemv submits to the same queue under the host's lock ---- */
    float *y2 = malloc(n * sizeof *y2);
    int locks_before = guard.locks;
    CHECK_Q4(q4vk_gemv(ctx, mat, x, k, y2, n, 1));
    double err_sync = q4_rel_error(y2, qw, qs, x, n, k, group, 1);
    if (guard.locks <= locks_before) {
        printf("FAIL: q4vk_gemv did not call queue_lock\n");
        failures++;
    }
    /* ---- q4vk_gemv_host with f16 activations (x rounded to f16 here, so the reference is
       exact for them) ---- */
    uint16_t *xh = malloc(k * sizeof *xh);
    float *xw = malloc(k * sizeof *xw);
    round_to_f16(x, k, xh, xw);
    q4vk_gemv_host_args ha;
    q4vk_gemv_host_args_default(&ha);
    ha.flags = Q4VK_GEMV_F16_ACTIVATIONS;
    ha.x = xh;
    ha.x_bytes = k * sizeof *xh;
    ha.y = y2;
    ha.y_len = n;
    for (size_t i = 0; i < n; i++) y2[i] = NAN;
    CHECK_Q4(q4vk_gemv_host(ctx, mat, &ha));
    double err_f16 = q4_rel_error(y2, qw, qs, xw, n, k, group, 1);
    free(xh);
    free(xw);
    if (!(err_cmd < 1e-5) || !(err_cmd_m < 1e-5) || !(err_sync < 1e-5) || !(err_f16 < 1e-5)) {
        printf("FAIL: relative error %.3g (cmd) %.3g (cmd, m = %zu) %.3g (sync) %.3g (sync, f16 x), bound 1e-5\n",
               err_cmd, err_cmd_m, big_m, err_sync, err_f16);
        failures++;
    }

    /* ---- q4vk releases only its own objects; the host then destroys its own ---- */
    q4vk_matrix_destroy(mat);
    q4vk_context_destroy(ctx);
    vkDestroyFence(device, fence, NULL);
    vkDestroyCommandPool(device, pool, NULL);
    free_buffer(device, &xb);
    free_buffer(device, &ymb);
    free_buffer(device, &yb);
    vkDestroyDevice(device, NULL);
    if (messenger) destroy_messenger(instance, messenger, NULL);
    vkDestroyInstance(instance, NULL);
    if (validation_messages) {
        printf("FAIL: %d validation/log message(s)\n", validation_messages);
        failures++;
    }
    printf("%s: host device \"%s\", N %zu K %zu g%zu: rel err %.2e (cmd), %.2e (cmd, m = %zu), %.2e (q4vk_gemv), "
           "validation %s\n",
           failures ? "FAIL" : "ok", name, n, k, group, err_cmd, err_cmd_m, big_m, err_sync,
           validation ? "on" : "not installed");
    free(w);
    free(x);
    free(qw);
    free(qs);
    free(y2);
    return failures ? 1 : 0;
}
