/* Two contexts adopting one VkDevice share a matrix, and q4vk's objects are destroyed in
 * the order q4vk.h documents for adopted devices: contexts and matrices in any order (here
 * the matrix after the context that created it), then the host's VkDevice. Context A
 * binds x/y through its descriptor-set ring, context B through VK_KHR_push_descriptor
 * (when the device offers it). Validation layer required; any message fails the run.
 * Exit status 0 on success. */
#define _POSIX_C_SOURCE 200809L
#include "q4vk.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "vk_host.h"

static int failures;

static void expect_close(const char *what, const vk_host_weights *t, const float *y) {
    double err = vk_host_weights_error(t, y);
    printf("%s: rel err %.2e\n", what, err);
    if (!(err < 1e-5)) {
        printf("FAIL: %s: relative error %.3g, bound 1e-5\n", what, err);
        failures++;
    }
}

int main(void) {
    const size_t n = 301, k = 1000;
    vk_host h = vk_host_create(1);
    q4vk_context_desc da = vk_host_desc(&h, 0), db = vk_host_desc(&h, 1);
    q4vk_context *a = NULL, *b = NULL;
    CHECK_Q4(q4vk_context_create(&da, &a));
    CHECK_Q4(q4vk_context_create(&db, &b));
    vk_host_weights t = vk_host_weights_make(n, k, 7);
    q4vk_matrix *mat = NULL;
    CHECK_Q4(q4vk_matrix_create(a, &t.desc, &mat));
    float *y = malloc(n * sizeof *y);

    /* The matrix of A on B: synchronous, and recorded into the host's command buffer. */
    CHECK_Q4(q4vk_gemv(b, mat, t.x, k, y, n, 1));
    expect_close("q4vk_gemv(B, matrix of A)", &t, y);
    vk_host_buffer xb = vk_host_buffer_create(&h, k * sizeof(float));
    vk_host_buffer yb = vk_host_buffer_create(&h, n * sizeof(float));
    memcpy(xb.mapped, t.x, k * sizeof(float));
    for (size_t i = 0; i < n; i++) ((float *)yb.mapped)[i] = NAN;
    vk_host_cmd_gemv(&h, b, mat, &xb, k, &yb, n);
    expect_close("q4vk_cmd_gemv(B, matrix of A)", &t, yb.mapped);
    for (size_t i = 0; i < n; i++) ((float *)yb.mapped)[i] = NAN;
    vk_host_cmd_gemv(&h, a, mat, &xb, k, &yb, n);
    expect_close("q4vk_cmd_gemv(A, matrix of A)", &t, yb.mapped);

    /* A goes first; its matrix still works on B, and is destroyed after A. */
    q4vk_context_destroy(a);
    CHECK_Q4(q4vk_gemv(b, mat, t.x, k, y, n, 1));
    expect_close("q4vk_gemv(B, matrix of destroyed A)", &t, y);
    q4vk_matrix_destroy(mat);
    q4vk_context_destroy(b);

    /* Only then the host's own objects and device. */
    vk_host_buffer_destroy(&h, &xb);
    vk_host_buffer_destroy(&h, &yb);
    int push = h.push_descriptor;
    int messages = vk_host_destroy(&h);
    if (messages) {
        printf("FAIL: %d validation/log message(s)\n", messages);
        failures++;
    }
    printf("%s: one VkDevice, two contexts (B %s), shared matrix, documented teardown order\n",
           failures ? "FAIL" : "ok", push ? "with push descriptors" : "with the set ring");
    vk_host_weights_free(&t);
    free(y);
    return failures ? 1 : 0;
}
