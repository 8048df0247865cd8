/* Caller-sized work under an address-space limit (setrlimit RLIMIT_AS a few MiB above
 * what the process already maps), where an allocation or a thread spawn fails:
 *   1. q4vk_matrix_pack of a 131072 x 1024 Q4 matrix writes straight into the caller's
 *      buffers: Q4VK_OK and the exact layout, with no host copy to allocate;
 *   2. q4vk_matrix_pack of FLOAT weights needs host scratch to quantize into:
 *      Q4VK_ERROR_OUT_OF_HOST_MEMORY with a message, outputs untouched, no abort;
 *   3. q4vk_weight_permute on all cores when no worker thread can be spawned (its stack
 *      does not fit): the work runs on the calling thread, Q4VK_OK and the same bytes as
 *      a 1-thread run made before the limit.
 * Linux only (/proc/self/statm); not built with the sanitizers (their shadow memory does
 * not fit an address-space limit). Exit status 0 on success. */
#define _POSIX_C_SOURCE 200809L
#include "q4vk.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "util.h"

static int failures;

/* A size query or a reference run (no limit in force) must succeed. */
#define MUST(call)                                                                     \
    do {                                                                               \
        q4vk_status s_ = (call);                                                       \
        if (s_ != Q4VK_OK) {                                                           \
            printf("FAIL: %s = %s\n", #call, q4vk_status_str(s_));                      \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

/* Bytes of address space the process maps now. */
static size_t mapped_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (!f || fscanf(f, "%lu", &pages) != 1) {
        fprintf(stderr, "FAIL: cannot read /proc/self/statm\n");
        exit(1);
    }
    fclose(f);
    return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* Grows the main thread's stack now, so that its growth during a call under the limit
 * cannot be what runs out of address space. */
static void grow_stack(void) {
    volatile char pad[512 * 1024];
    for (size_t i = 0; i < sizeof pad; i += 4096) pad[i] = (char)i;
}

static void limit_address_space(size_t headroom) {
    struct rlimit r;
    getrlimit(RLIMIT_AS, &r);
    r.rlim_cur = mapped_bytes() + headroom;
    if (setrlimit(RLIMIT_AS, &r) != 0) {
        perror("FAIL: setrlimit");
        exit(1);
    }
}

static void unlimit_address_space(void) {
    struct rlimit r;
    getrlimit(RLIMIT_AS, &r);
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_AS, &r);
}

static void report(const char *what, q4vk_status got, q4vk_status want, int bytes_ok) {
    char msg[512] = "";
    if (got != Q4VK_OK) q4vk_last_error_message(msg, sizeof msg);
    if (got != want || !bytes_ok || (want != Q4VK_OK && msg[0] == 0)) {
        printf("FAIL: %s: %s (%s), expected %s%s\n", what, q4vk_status_str(got), msg, q4vk_status_str(want),
               bytes_ok ? "" : ", wrong or clobbered output bytes");
        failures++;
    } else {
        printf("ok: %s: %s%s%s\n", what, q4vk_status_str(got), msg[0] ? ": " : "", msg);
    }
}

static int all_bytes(const uint8_t *p, size_t len, uint8_t value) {
    for (size_t i = 0; i < len; i++)
        if (p[i] != value) return 0;
    return 1;
}

int main(void) {
    rng r = {11};
    grow_stack();

    /* 1. Q4 source, 131072 x 1024 (64 MiB of nibbles): packed in place. */
    q4vk_matrix_desc d;
    q4vk_matrix_desc_default(&d);
    d.source = Q4VK_SOURCE_Q4;
    d.n = 131072;
    d.k = 1024;
    d.group_size = 128;
    d.dtype = Q4VK_DTYPE_F16;
    size_t wb, sb, zb;
    MUST(q4vk_q4_quantize_size(&d, &wb, &sb, &zb));
    uint8_t *weight = malloc(wb);
    uint16_t *scales = malloc(sb);
    for (size_t i = 0; i < wb; i++) weight[i] = (uint8_t)rng_next(&r);
    for (size_t i = 0; i < sb / 2; i++) scales[i] = f32_to_f16((float)rng_uniform(&r) + 0.01f);
    d.weight = weight;
    d.weight_bytes = wb;
    d.scales = scales;
    d.scales_bytes = sb;
    size_t pw, ps, pz;
    MUST(q4vk_matrix_pack_size(&d, &pw, &ps, &pz));
    uint8_t *packed_w = malloc(pw), *packed_s = malloc(ps);
    memset(packed_w, 0xA5, pw);
    memset(packed_s, 0xA5, ps);
    limit_address_space(8u << 20);
    q4vk_status s = q4vk_matrix_pack(&d, packed_w, pw, packed_s, ps, NULL, 0);
    unlimit_address_space();
    /* k = 1024: rows are whole 16-byte chunks and scales a multiple of 4 bytes, so the
     * device layout equals the Q4 input byte for byte. */
    report("q4vk_matrix_pack Q4 131072 x 1024 under a +8 MiB limit", s, Q4VK_OK,
           pw == wb && ps == sb && memcmp(packed_w, weight, wb) == 0 && memcmp(packed_s, scales, sb) == 0);
    free(packed_w);
    free(packed_s);
    free(weight);
    free(scales);

    /* 2. FLOAT source (f16, 16384 x 1024): quantizing needs 8 MiB of scratch. */
    q4vk_matrix_desc_default(&d);
    d.n = 16384;
    d.k = 1024;
    size_t fb = (size_t)d.n * (size_t)d.k * 2;
    uint16_t *w16 = malloc(fb);
    for (size_t i = 0; i < fb / 2; i++) w16[i] = f32_to_f16((float)(rng_uniform(&r) * 2 - 1));
    d.weight = w16;
    d.weight_bytes = fb;
    MUST(q4vk_matrix_pack_size(&d, &pw, &ps, &pz));
    packed_w = malloc(pw);
    packed_s = malloc(ps);
    memset(packed_w, 0xA5, pw);
    memset(packed_s, 0xA5, ps);
    limit_address_space(1u << 20);
    s = q4vk_matrix_pack(&d, packed_w, pw, packed_s, ps, NULL, 0);
    unlimit_address_space();
    report("q4vk_matrix_pack FLOAT 16384 x 1024 under a +1 MiB limit", s, Q4VK_ERROR_OUT_OF_HOST_MEMORY,
           all_bytes(packed_w, pw, 0xA5) && all_bytes(packed_s, ps, 0xA5));
    /* Without the limit the same call succeeds (the refusal was the limit's). */
    s = q4vk_matrix_pack(&d, packed_w, pw, packed_s, ps, NULL, 0);
    report("q4vk_matrix_pack FLOAT 16384 x 1024 without a limit", s, Q4VK_OK, 1);
    free(packed_w);
    free(packed_s);
    free(w16);

    /* 3. Permute on all cores when no thread can be spawned. */
    q4vk_weight_quantize_desc wd;
    q4vk_weight_quantize_desc_default(&wd);
    wd.k = 4096;
    wd.n = 4096;
    size_t plain_bytes, qb;
    MUST(q4vk_weight_plain_size(&wd, &plain_bytes));
    MUST(q4vk_weight_quantize_size(&wd, &qb, &sb));
    int8_t *plain = malloc(plain_bytes), *want = malloc(qb), *got = malloc(qb);
    for (size_t i = 0; i < plain_bytes; i++) plain[i] = (int8_t)rng_next(&r);
    wd.threads = 1;
    MUST(q4vk_weight_permute(&wd, plain, plain_bytes, want, qb));
    memset(got, 0x5A, qb);
    wd.threads = 0;
    limit_address_space(1u << 20);
    s = q4vk_weight_permute(&wd, plain, plain_bytes, got, qb);
    unlimit_address_space();
    report("q4vk_weight_permute 4096 x 4096, all cores, no thread can be spawned", s, Q4VK_OK,
           memcmp(got, want, qb) == 0);
    free(plain);
    free(want);
    free(got);

    printf("%s: caller-sized work under an address-space limit\n", failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}
