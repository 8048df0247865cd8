/* An engine's allocator for q4vk's matrix buffers (q4vk_context_desc.allocate, .free,
 * .allocator_user), shared by the engine examples. Header-only, C11. */
#ifndef Q4VK_EXAMPLES_ENGINE_MEMORY_H
#define Q4VK_EXAMPLES_ENGINE_MEMORY_H

#include <stdint.h>

#include <vulkan/vulkan.h>

#include "q4vk.h"

/* The engine's allocator for q4vk's matrix buffers: a dedicated, device-local (else any
 * allowed type), unmapped VkDeviceMemory per request, counted. */
typedef struct {
    VkPhysicalDevice pd;
    VkDevice dev;
    int allocations, frees;
    VkDeviceSize bytes;
} engine_allocator;

static inline int32_t engine_allocate(void *user, uint64_t size, uint64_t alignment, uint32_t type_bits,
                               q4vk_allocation *out) {
    engine_allocator *a = user;
    (void)alignment; /* a dedicated allocation starts at 0, aligned for anything */
    VkPhysicalDeviceMemoryProperties props;
    vkGetPhysicalDeviceMemoryProperties(a->pd, &props);
    uint32_t type = UINT32_MAX;
    for (uint32_t i = 0; i < props.memoryTypeCount && type == UINT32_MAX; i++)
        if ((type_bits & (1u << i)) && (props.memoryTypes[i].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT))
            type = i;
    for (uint32_t i = 0; i < props.memoryTypeCount && type == UINT32_MAX; i++)
        if (type_bits & (1u << i)) type = i;
    if (type == UINT32_MAX) return 1;
    VkMemoryAllocateInfo info = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    info.allocationSize = size;
    info.memoryTypeIndex = type;
    VkDeviceMemory memory;
    if (vkAllocateMemory(a->dev, &info, NULL, &memory) != VK_SUCCESS) return 1;
    out->memory = (uint64_t)memory;
    out->offset = 0;
    out->mapped = NULL; /* q4vk uploads through staging */
    a->allocations++;
    a->bytes += size;
    return 0;
}

static inline void engine_free(void *user, const q4vk_allocation *allocation) {
    engine_allocator *a = user;
    vkFreeMemory(a->dev, (VkDeviceMemory)allocation->memory, NULL);
    a->frees++;
}

#endif
