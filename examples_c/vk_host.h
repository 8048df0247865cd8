/* A minimal Vulkan host for the adopted-device tests: an instance with the validation
 * layer (required: the tests fail without it) whose messages are counted, the first
 * physical device, a device with one compute queue (optionally VK_KHR_push_descriptor),
 * host-visible buffers, one-shot submission, and a q4vk_context_desc that lends them. */
#ifndef Q4VK_EXAMPLES_VK_HOST_H
#define Q4VK_EXAMPLES_VK_HOST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vulkan/vulkan.h>

#include "q4vk.h"
#include "util.h"
#include "vk_check.h"

typedef struct {
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    VkPhysicalDevice physical;
    VkDevice device;
    VkQueue queue;
    uint32_t family;
    VkCommandPool pool;
    int push_descriptor; /* VK_KHR_push_descriptor enabled on the device */
} vk_host;

typedef struct {
    VkBuffer buffer;
    VkDeviceMemory memory;
    void *mapped;
} vk_host_buffer;

/* Validation-layer and q4vk WARN/ERROR messages seen so far. */
static int vk_host_messages;

static VKAPI_ATTR VkBool32 VKAPI_CALL vk_host_on_validation(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                            VkDebugUtilsMessageTypeFlagsEXT types,
                                                            const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                            void *user) {
    (void)severity;
    (void)types;
    (void)user;
    fprintf(stderr, "validation: %s\n", data->pMessage);
    vk_host_messages++;
    return VK_FALSE;
}

static inline void vk_host_on_log(void *user, uint32_t level, const char *message) {
    (void)user;
    fprintf(stderr, "q4vk [%u]: %s\n", level, message);
    if (level <= Q4VK_LOG_WARN) vk_host_messages++;
}

/* Creates the host's objects; with want_push, enables VK_KHR_push_descriptor if offered. */
static inline vk_host vk_host_create(int want_push) {
    vk_host h;
    memset(&h, 0, sizeof h);
    const char *layers[] = {"VK_LAYER_KHRONOS_validation"};
    const char *instance_exts[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "q4vk vk_host";
    app.apiVersion = VK_API_VERSION_1_1;
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ici.pApplicationInfo = &app;
    ici.enabledLayerCount = 1;
    ici.ppEnabledLayerNames = layers;
    ici.enabledExtensionCount = 1;
    ici.ppEnabledExtensionNames = instance_exts;
    if (vkCreateInstance(&ici, NULL, &h.instance) != VK_SUCCESS) {
        fprintf(stderr, "FAIL: no instance with VK_LAYER_KHRONOS_validation (this test needs the layer)\n");
        exit(1);
    }
    PFN_vkCreateDebugUtilsMessengerEXT create_messenger =
        (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(h.instance, "vkCreateDebugUtilsMessengerEXT");
    VkDebugUtilsMessengerCreateInfoEXT mci = {.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    mci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    mci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT;
    mci.pfnUserCallback = vk_host_on_validation;
    CHECK_VK(create_messenger(h.instance, &mci, NULL, &h.messenger));
    uint32_t count = 1;
    VkResult r = vkEnumeratePhysicalDevices(h.instance, &count, &h.physical);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || count == 0) {
        fprintf(stderr, "FAIL: no Vulkan device\n");
        exit(1);
    }
    uint32_t families = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(h.physical, &families, NULL);
    VkQueueFamilyProperties *props = calloc(families, sizeof *props);
    vkGetPhysicalDeviceQueueFamilyProperties(h.physical, &families, props);
    h.family = UINT32_MAX;
    for (uint32_t i = 0; i < families && h.family == UINT32_MAX; i++)
        if (props[i].queueFlags & VK_QUEUE_COMPUTE_BIT) h.family = i;
    free(props);
    if (want_push) {
        uint32_t n = 0;
        vkEnumerateDeviceExtensionProperties(h.physical, NULL, &n, NULL);
        VkExtensionProperties *exts = calloc(n ? n : 1, sizeof *exts);
        vkEnumerateDeviceExtensionProperties(h.physical, NULL, &n, exts);
        for (uint32_t i = 0; i < n; i++)
            if (strcmp(exts[i].extensionName, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME) == 0) h.push_descriptor = 1;
        free(exts);
    }
    const char *device_exts[] = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
    float priority = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    qci.queueFamilyIndex = h.family;
    qci.queueCount = 1;
    qci.pQueuePriorities = &priority;
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    dci.enabledExtensionCount = h.push_descriptor ? 1 : 0;
    dci.ppEnabledExtensionNames = device_exts;
    CHECK_VK(vkCreateDevice(h.physical, &dci, NULL, &h.device));
    vkGetDeviceQueue(h.device, h.family, 0, &h.queue);
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pci.queueFamilyIndex = h.family;
    pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    CHECK_VK(vkCreateCommandPool(h.device, &pci, NULL, &h.pool));
    return h;
}

/* A desc lending the host's objects (no queue lock: these tests submit from one thread).
 * With push, lists VK_KHR_push_descriptor if the device has it enabled. */
static inline q4vk_context_desc vk_host_desc(const vk_host *h, int push) {
    static const char *push_name[] = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
    q4vk_context_desc cd;
    q4vk_context_desc_default(&cd);
    cd.log = vk_host_on_log;
    cd.get_instance_proc_addr = (q4vk_void_fn)vkGetInstanceProcAddr;
    cd.instance = h->instance;
    cd.physical_device = h->physical;
    cd.device = h->device;
    cd.queue = h->queue;
    cd.queue_family_index = h->family;
    cd.api_version = VK_API_VERSION_1_1;
    if (push && h->push_descriptor) {
        cd.enabled_extension_count = 1;
        cd.enabled_extensions = push_name;
    }
    return cd;
}

/* A host-visible, coherent, mapped buffer of `size` bytes for `usage`. */
static inline vk_host_buffer vk_host_buffer_create_usage(const vk_host *h, VkDeviceSize size, VkBufferUsageFlags usage) {
    vk_host_buffer b;
    VkBufferCreateInfo info = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    info.size = size;
    info.usage = usage;
    info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    CHECK_VK(vkCreateBuffer(h->device, &info, NULL, &b.buffer));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(h->device, b.buffer, &req);
    VkPhysicalDeviceMemoryProperties props;
    vkGetPhysicalDeviceMemoryProperties(h->physical, &props);
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
    CHECK_VK(vkAllocateMemory(h->device, &alloc, NULL, &b.memory));
    CHECK_VK(vkBindBufferMemory(h->device, b.buffer, b.memory, 0));
    CHECK_VK(vkMapMemory(h->device, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped));
    return b;
}

/* A host-visible storage buffer of `size` bytes. */
static inline vk_host_buffer vk_host_buffer_create(const vk_host *h, VkDeviceSize size) {
    return vk_host_buffer_create_usage(h, size, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT);
}

static inline void vk_host_buffer_destroy(const vk_host *h, vk_host_buffer *b) {
    vkUnmapMemory(h->device, b->memory);
    vkDestroyBuffer(h->device, b->buffer, NULL);
    vkFreeMemory(h->device, b->memory, NULL);
}

/* A fresh one-time command buffer of the host's pool, recording. */
static inline VkCommandBuffer vk_host_begin_once(const vk_host *h) {
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    cai.commandPool = h->pool;
    cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cai.commandBufferCount = 1;
    VkCommandBuffer cmd;
    CHECK_VK(vkAllocateCommandBuffers(h->device, &cai, &cmd));
    VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    CHECK_VK(vkBeginCommandBuffer(cmd, &begin));
    return cmd;
}

/* Ends `cmd` (from vk_host_begin_once), submits it, waits for it and frees it. */
static inline void vk_host_submit_once(const vk_host *h, VkCommandBuffer cmd) {
    CHECK_VK(vkEndCommandBuffer(cmd));
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    CHECK_VK(vkCreateFence(h->device, &fci, NULL, &fence));
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd;
    CHECK_VK(vkQueueSubmit(h->queue, 1, &si, fence));
    CHECK_VK(vkWaitForFences(h->device, 1, &fence, VK_TRUE, UINT64_MAX));
    vkDestroyFence(h->device, fence, NULL);
    vkFreeCommandBuffers(h->device, h->pool, 1, &cmd);
}

/* Records y = W x of q4vk into a fresh command buffer (x, y whole buffers of k and n
 * floats), submits it with a shader-write -> host-read barrier and waits. */
static inline void vk_host_cmd_gemv(const vk_host *h, q4vk_context *ctx, const q4vk_matrix *mat,
                             const vk_host_buffer *x, size_t k, const vk_host_buffer *y, size_t n) {
    VkCommandBuffer cmd = vk_host_begin_once(h);
    q4vk_gemv_args args;
    q4vk_gemv_args_default(&args);
    args.x.buffer = (uint64_t)x->buffer;
    args.x.range = k * sizeof(float);
    args.y.buffer = (uint64_t)y->buffer;
    args.y.range = n * sizeof(float);
    CHECK_Q4(q4vk_cmd_gemv(ctx, mat, cmd, &args));
    VkMemoryBarrier barrier = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &barrier, 0,
                         NULL, 0, NULL);
    vk_host_submit_once(h, cmd);
}

/* Destroys the host's device and instance (after every q4vk object, as q4vk.h requires)
 * and returns the number of validation/log messages seen over the whole run. */
static inline int vk_host_destroy(vk_host *h) {
    vkDestroyCommandPool(h->device, h->pool, NULL);
    vkDestroyDevice(h->device, NULL);
    PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger =
        (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(h->instance, "vkDestroyDebugUtilsMessengerEXT");
    destroy_messenger(h->instance, h->messenger, NULL);
    vkDestroyInstance(h->instance, NULL);
    return vk_host_messages;
}

/* Random weights [n][k] quantized by q4vk (symmetric, group 128, f16 scales) and a random
 * x[k]: the Q4 data, for the f64 reference, and a desc that uploads the same weights. */
typedef struct {
    size_t n, k;
    float *w, *x;
    uint8_t *q;
    uint16_t *s;
    q4vk_matrix_desc desc;
} vk_host_weights;

static inline vk_host_weights vk_host_weights_make(size_t n, size_t k, uint64_t seed) {
    vk_host_weights t;
    t.n = n;
    t.k = k;
    t.w = malloc(n * k * sizeof *t.w);
    t.x = malloc(k * sizeof *t.x);
    rng r = {seed};
    for (size_t i = 0; i < n * k; i++) t.w[i] = (float)(rng_uniform(&r) * 2.0 - 1.0);
    for (size_t i = 0; i < k; i++) t.x[i] = (float)(rng_uniform(&r) * 2.0 - 1.0);
    q4vk_matrix_desc_default(&t.desc);
    t.desc.n = n;
    t.desc.k = k;
    t.desc.group_size = 128;
    t.desc.dtype = Q4VK_DTYPE_F32;
    t.desc.weight = t.w;
    t.desc.weight_bytes = n * k * sizeof *t.w;
    size_t qb, sb, zb;
    CHECK_Q4(q4vk_q4_quantize_size(&t.desc, &qb, &sb, &zb));
    t.q = malloc(qb);
    t.s = malloc(sb);
    CHECK_Q4(q4vk_q4_quantize(&t.desc, t.q, qb, t.s, sb, NULL, 0));
    return t;
}

/* Relative L2 error of y against the f64 product of the Q4 weights and x. */
static inline double vk_host_weights_error(const vk_host_weights *t, const float *y) {
    return q4_rel_error(y, t->q, t->s, t->x, t->n, t->k, 128, 1);
}

static inline void vk_host_weights_free(vk_host_weights *t) {
    free(t->w);
    free(t->x);
    free(t->q);
    free(t->s);
}

#endif
