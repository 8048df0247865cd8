/* q4vk_context_create refuses inconsistent descs with Q4VK_ERROR_INVALID_ARGUMENT, a
 * message naming the field, and an untouched out-parameter: device_index below -1 (which a
 * CPU context ignores), and only one of queue_lock / queue_unlock (own device as well as
 * adopted). A valid desc then
 * creates a context (so the refusals are not a missing device). Exit status 0 on success. */
#include "q4vk.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void noop_lock(void *user) { (void)user; }

static int failures;

static void expect_refused(const char *what, const q4vk_context_desc *d, const char *field) {
    q4vk_context *poison = (q4vk_context *)(uintptr_t)0x1;
    q4vk_context *ctx = poison;
    q4vk_status s = q4vk_context_create(d, &ctx);
    char msg[512];
    q4vk_last_error_message(msg, sizeof msg);
    if (s != Q4VK_ERROR_INVALID_ARGUMENT || ctx != poison || !strstr(msg, field)) {
        printf("FAIL: %s: %s (%s), out %s\n", what, q4vk_status_str(s), msg,
               ctx == poison ? "untouched" : "written");
        if (s == Q4VK_OK && ctx != poison) q4vk_context_destroy(ctx);
        failures++;
    } else {
        printf("ok: %s: %s\n", what, msg);
    }
}

int main(void) {
    q4vk_context_desc d;
    const int32_t bad_indices[] = {-2, -100, INT32_MIN};
    for (size_t i = 0; i < sizeof bad_indices / sizeof bad_indices[0]; i++) {
        q4vk_context_desc_default(&d);
        d.device_index = bad_indices[i];
        char what[64];
        snprintf(what, sizeof what, "device_index %d", (int)bad_indices[i]);
        expect_refused(what, &d, "device_index");
    }
    q4vk_context_desc_default(&d);
    d.queue_lock = noop_lock;
    expect_refused("own device, queue_lock without queue_unlock", &d, "queue_unlock");
    q4vk_context_desc_default(&d);
    d.queue_unlock = noop_lock;
    expect_refused("own device, queue_unlock without queue_lock", &d, "queue_lock");

    /* A CPU context ignores device_index, whatever its value (as the header says). */
    for (size_t i = 0; i < sizeof bad_indices / sizeof bad_indices[0]; i++) {
        q4vk_context_desc_default(&d);
        d.flags = Q4VK_CONTEXT_CPU;
        d.device_index = bad_indices[i];
        q4vk_context *cpu = NULL;
        if (q4vk_context_create(&d, &cpu) != Q4VK_OK) {
            printf("FAIL: CPU context with device_index %d refused\n", (int)bad_indices[i]);
            failures++;
        }
        q4vk_context_destroy(cpu);
    }

    /* Control: the default desc (device_index -1) and both callbacks are accepted. */
    q4vk_context_desc_default(&d);
    d.queue_lock = noop_lock;
    d.queue_unlock = noop_lock;
    q4vk_context *ctx = NULL;
    q4vk_status s = q4vk_context_create(&d, &ctx);
    if (s != Q4VK_OK) {
        char msg[512];
        q4vk_last_error_message(msg, sizeof msg);
        printf("FAIL: valid desc: %s (%s)\n", q4vk_status_str(s), msg);
        failures++;
    }
    q4vk_context_destroy(ctx);
    printf("%s: context desc checks\n", failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}
