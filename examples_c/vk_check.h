/* Fail-fast checks for the C examples that drive Vulkan themselves: a failed Vulkan call
 * or q4vk call prints what failed (with q4vk's message) and exits with status 1. */
#ifndef Q4VK_EXAMPLES_VK_CHECK_H
#define Q4VK_EXAMPLES_VK_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include <vulkan/vulkan.h>

#include "q4vk.h"

#define CHECK_VK(call)                                                                 \
    do {                                                                               \
        VkResult r_ = (call);                                                          \
        if (r_ != VK_SUCCESS) {                                                        \
            fprintf(stderr, "FAIL: %s = %d (line %d)\n", #call, (int)r_, __LINE__);    \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

#define CHECK_Q4(call)                                                                 \
    do {                                                                               \
        q4vk_status s_ = (call);                                                       \
        if (s_ != Q4VK_OK) {                                                           \
            char msg_[512];                                                            \
            q4vk_last_error_message(msg_, sizeof msg_);                                \
            fprintf(stderr, "FAIL: %s = %s: %s\n", #call, q4vk_status_str(s_), msg_);  \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

#endif
