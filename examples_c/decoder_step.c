/* The linear layers of a decoder step, as an engine runs them with q4vk: the whole path
 * from footprint to replay, on the engine's own Vulkan device (validation layer required;
 * any message fails the run).
 *
 *   footprint -> allocate -> upload -> prepare -> bind -> record once -> replay
 *
 * A small model of LAYERS layers (hidden D, key/value KV, feed-forward F; random weights,
 * quantized by q4vk to int4 with groups of 64). Per layer, from the hidden state h:
 *
 *   q = Wq h + bq,  k = Wk h + bk,  v = Wv h + bv    bias epilogue; one multi call (one
 *                                                     pre-pass of h where there is one)
 *   a = Wo q + h                                      residual epilogue (q stands in for
 *                                                     attention, which is not q4vk's)
 *   g = Wg a;  u = silu(g) * (Wu a)                   SiLU-gate epilogue (SwiGLU); one
 *                                                     multi call, up ordered after gate
 *   h' = Wd u + a                                     residual epilogue
 *
 * Memory: the engine's allocator gives every matrix buffer (engine_memory.h), sized before
 * creation by q4vk_matrix_footprint; the upload is recorded into the engine's command
 * buffer from its staging buffer (q4vk_matrix_create_recorded). Load time:
 * q4vk_gemv_prepare creates every pipeline the step will record; recording and replaying
 * then create none (checked with q4vk_context_memory). The device has no push descriptors
 * enabled, so each group of calls is a q4vk_gemv_binding owning its descriptor sets
 * (q4vk_gemv_binding_create_multi): the step is
 * recorded once into one command buffer (a barrier between dependent calls) and submitted
 * REPLAYS times; before the last submission the engine writes a new input. Both the first
 * and the last results are checked against an f64 reference on q4vk_matrix_dequantize's
 * weights (relative error below 1e-4 on every output: the step's f32 sums through three
 * layers). Exit status 0 on success.
 * Usage: decoder_step [REPLAYS] */
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
#include "vk_host.h"

enum { D = 256, KV = 64, F = 512, LAYERS = 3, GROUP = 64 };

/* The projections of one layer, in recording order. */
enum { PQ, PK, PV, PO, PG, PU, PD, PROJECTIONS };

/* One linear layer: its shape, its weights as q4vk computes with them, its matrix. */
typedef struct {
    size_t n, k;
    double *w; /* [n][k], q4vk_matrix_dequantize's */
    q4vk_matrix *mat;
} linear;

/* The activations of the step: h[0] the input, h[l + 1] layer l's output. */
typedef struct {
    vk_host_buffer h[LAYERS + 1], a[LAYERS], q[LAYERS], k[LAYERS], v[LAYERS], g[LAYERS], u[LAYERS];
    vk_host_buffer bias[LAYERS][3]; /* bq, bk, bv */
} activations;

static size_t out_dim(int p) {
    switch (p) {
        case PK:
        case PV: return KV;
        case PG:
        case PU: return F;
        default: return D;
    }
}

static size_t in_dim(int p) { return p == PD ? F : D; }

/* Quantizes random weights (scaled by 1/sqrt(k)) and creates the matrix in the engine's
 * memory through a recorded upload; keeps the weights q4vk computes with. */
static linear make_linear(const vk_host *h, q4vk_context *ctx, size_t n, size_t k, rng *r) {
    linear l = {n, k, NULL, NULL};
    float *w = malloc(n * k * sizeof *w);
    double scale = 1.0 / sqrt((double)k);
    for (size_t i = 0; i < n * k; i++) w[i] = (float)((rng_uniform(r) * 2.0 - 1.0) * scale);
    q4vk_matrix_desc md;
    q4vk_matrix_desc_default(&md);
    md.source = Q4VK_SOURCE_FLOAT;
    md.n = n;
    md.k = k;
    md.group_size = GROUP;
    md.dtype = Q4VK_DTYPE_F32;
    md.weight = w;
    md.weight_bytes = n * k * sizeof *w;
    float *deq = malloc(n * k * sizeof *deq);
    CHECK_Q4(q4vk_matrix_dequantize(&md, deq, n * k * sizeof *deq));
    l.w = malloc(n * k * sizeof *l.w);
    for (size_t i = 0; i < n * k; i++) l.w[i] = deq[i];
    free(deq);
    q4vk_matrix_footprint_info fp;
    memset(&fp, 0, sizeof fp);
    fp.struct_size = sizeof fp;
    CHECK_Q4(q4vk_matrix_footprint(ctx, &md, &fp));
    VkDeviceSize staging_bytes = fp.upload_bytes ? fp.upload_bytes : 16;
    vk_host_buffer staging = vk_host_buffer_create_usage(h, staging_bytes, VK_BUFFER_USAGE_TRANSFER_SRC_BIT);
    q4vk_staging st;
    st.buffer.buffer = (uint64_t)staging.buffer;
    st.buffer.offset = 0;
    st.buffer.range = staging_bytes;
    st.mapped = staging.mapped;
    VkCommandBuffer cmd = vk_host_begin_once(h);
    CHECK_Q4(q4vk_matrix_create_recorded(ctx, &md, cmd, &st, &l.mat));
    vk_host_submit_once(h, cmd);
    vk_host_buffer_destroy(h, &staging);
    free(w);
    return l;
}

static q4vk_buffer_ref ref_of(const vk_host_buffer *b, size_t floats) {
    q4vk_buffer_ref r = {(uint64_t)b->buffer, 0, floats * sizeof(float)};
    return r;
}

static void fill(const vk_host_buffer *b, size_t len, rng *r) {
    float *p = b->mapped;
    for (size_t i = 0; i < len; i++) p[i] = (float)(rng_uniform(r) * 2.0 - 1.0);
}

/* y = W x (+ bias) over one row. */
static void ref_gemv(const linear *l, const double *x, const double *bias, double *y) {
    for (size_t i = 0; i < l->n; i++) {
        double acc = bias ? bias[i] : 0.0;
        for (size_t j = 0; j < l->k; j++) acc += l->w[i * l->k + j] * x[j];
        y[i] = acc;
    }
}

static double silu(double g) { return g / (1.0 + exp(-g)); }

/* Relative error of the device's `got` (len floats) against `want`. */
static double rel_error(const float *got, const double *want, size_t len) {
    double diff = 0, norm = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isfinite(got[i])) return INFINITY;
        diff += (got[i] - want[i]) * (got[i] - want[i]);
        norm += want[i] * want[i];
    }
    return sqrt(diff / (norm > 0 ? norm : 1));
}

/* The f64 reference of the whole step from h[0]; checks every output buffer. */
static int check_step(linear model[LAYERS][PROJECTIONS], const activations *act, const char *when) {
    double h[D], q[D], k[KV], v[KV], a[D], g[F], u[F], up[F], o[D], d[D];
    const float *h0 = act->h[0].mapped;
    for (size_t i = 0; i < D; i++) h[i] = h0[i];
    int failures = 0;
    double worst = 0;
    for (int l = 0; l < LAYERS; l++) {
        double bias[3][D];
        for (int b = 0; b < 3; b++) {
            const float *bb = act->bias[l][b].mapped;
            for (size_t i = 0; i < out_dim(b); i++) bias[b][i] = bb[i];
        }
        ref_gemv(&model[l][PQ], h, bias[0], q);
        ref_gemv(&model[l][PK], h, bias[1], k);
        ref_gemv(&model[l][PV], h, bias[2], v);
        ref_gemv(&model[l][PO], q, NULL, o);
        for (size_t i = 0; i < D; i++) a[i] = o[i] + h[i];
        ref_gemv(&model[l][PG], a, NULL, g);
        ref_gemv(&model[l][PU], a, NULL, up);
        for (size_t i = 0; i < F; i++) u[i] = silu(g[i]) * up[i];
        ref_gemv(&model[l][PD], u, NULL, d);
        for (size_t i = 0; i < D; i++) h[i] = d[i] + a[i];
        const struct {
            const char *name;
            const vk_host_buffer *b;
            const double *want;
            size_t len;
        } outs[] = {{"q", &act->q[l], q, D},    {"k", &act->k[l], k, KV}, {"v", &act->v[l], v, KV},
                    {"a", &act->a[l], a, D},    {"g", &act->g[l], g, F},  {"u", &act->u[l], u, F},
                    {"h", &act->h[l + 1], h, D}};
        for (size_t o2 = 0; o2 < sizeof outs / sizeof outs[0]; o2++) {
            double err = rel_error(outs[o2].b->mapped, outs[o2].want, outs[o2].len);
            if (err > worst) worst = err;
            if (!(err < 1e-4)) {
                fprintf(stderr, "FAIL %s: layer %d %s: relative error %.3g\n", when, l, outs[o2].name, err);
                failures++;
            }
        }
    }
    printf("  %s: every output of %d layers within %.2g of the f64 reference\n", when, LAYERS, worst);
    return failures;
}

static uint32_t pipelines_held(q4vk_context *ctx) {
    q4vk_context_memory_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    CHECK_Q4(q4vk_context_memory(ctx, &info));
    return info.pipelines;
}

int main(int argc, char **argv) {
    int replays = argc > 1 ? atoi(argv[1]) : 1000;
    if (replays < 2) {
        fprintf(stderr, "usage: decoder_step [REPLAYS >= 2]\n");
        return 2;
    }
    vk_host h = vk_host_create(0);
    engine_allocator allocator = {h.physical, h.device, 0, 0, 0};
    q4vk_context_desc cd = vk_host_desc(&h, 0);
    cd.allocate = engine_allocate;
    cd.free = engine_free;
    cd.allocator_user = &allocator;
    q4vk_context *ctx = NULL;
    CHECK_Q4(q4vk_context_create(&cd, &ctx));
    char name[256];
    q4vk_context_device_name(ctx, name, sizeof name);
    printf("decoder_step on %s: %d layers, hidden %d, key/value %d, feed-forward %d, int4 groups of %d\n", name,
           LAYERS, D, KV, F, GROUP);

    /* Load: matrices in the engine's memory, uploaded on its queue. */
    rng r = {0xDEC0DE};
    static linear model[LAYERS][PROJECTIONS];
    for (int l = 0; l < LAYERS; l++)
        for (int p = 0; p < PROJECTIONS; p++) model[l][p] = make_linear(&h, ctx, out_dim(p), in_dim(p), &r);
    printf("  %d matrices in %d allocations of the engine, %llu bytes\n", LAYERS * PROJECTIONS,
           allocator.allocations, (unsigned long long)allocator.bytes);

    /* The flags of each projection's call: its epilogue. */
    uint32_t flags[PROJECTIONS] = {Q4VK_GEMV_BIAS, Q4VK_GEMV_BIAS,        Q4VK_GEMV_BIAS, Q4VK_GEMV_RESIDUAL, 0,
                                   Q4VK_GEMV_SILU_GATE, Q4VK_GEMV_RESIDUAL};

    /* Load time: every pipeline the step records, and the workspace it can use. */
    uint64_t ws_bytes = 0;
    for (int l = 0; l < LAYERS; l++)
        for (int p = 0; p < PROJECTIONS; p++) {
            CHECK_Q4(q4vk_gemv_prepare(ctx, model[l][p].mat, 1, 1, flags[p]));
            uint64_t bytes = 0;
            CHECK_Q4(q4vk_gemv_workspace_size(ctx, model[l][p].mat, 1, flags[p], &bytes));
            if (bytes > ws_bytes) ws_bytes = bytes;
        }
    uint32_t prepared = pipelines_held(ctx);
    vk_host_buffer ws = vk_host_buffer_create(&h, ws_bytes ? ws_bytes : 16);

    activations act;
    for (int l = 0; l <= LAYERS; l++) act.h[l] = vk_host_buffer_create(&h, D * sizeof(float));
    for (int l = 0; l < LAYERS; l++) {
        act.a[l] = vk_host_buffer_create(&h, D * sizeof(float));
        act.q[l] = vk_host_buffer_create(&h, D * sizeof(float));
        act.k[l] = vk_host_buffer_create(&h, KV * sizeof(float));
        act.v[l] = vk_host_buffer_create(&h, KV * sizeof(float));
        act.g[l] = vk_host_buffer_create(&h, F * sizeof(float));
        act.u[l] = vk_host_buffer_create(&h, F * sizeof(float));
        for (int b = 0; b < 3; b++) {
            act.bias[l][b] = vk_host_buffer_create(&h, out_dim(b) * sizeof(float));
            fill(&act.bias[l][b], out_dim(b), &r);
        }
    }
    fill(&act.h[0], D, &r);

    /* Bind: the calls of a layer in four groups, each one binding owning its descriptor
     * sets: Q, K and V on h as one multi call (x's pre-pass, where the device has one, runs
     * once for the three), O, gate then up as one multi call (q4vk orders up after gate,
     * whose output it reads), down. */
    enum { GROUPS = 4 };
    static const int group_first[GROUPS] = {PQ, PO, PG, PD}, group_count[GROUPS] = {3, 1, 2, 1};
    static q4vk_gemv_binding *bindings[LAYERS][GROUPS];
    for (int l = 0; l < LAYERS; l++) {
        const vk_host_buffer *x_of[PROJECTIONS] = {&act.h[l], &act.h[l], &act.h[l], &act.q[l],
                                                  &act.a[l], &act.a[l], &act.u[l]};
        const vk_host_buffer *y_of[PROJECTIONS] = {&act.q[l], &act.k[l], &act.v[l], &act.a[l],
                                                  &act.g[l], &act.u[l], &act.h[l + 1]};
        q4vk_gemv_args args[PROJECTIONS];
        const q4vk_matrix *mats[PROJECTIONS];
        for (int p = 0; p < PROJECTIONS; p++) {
            q4vk_gemv_args_default(&args[p]);
            args[p].flags = flags[p];
            args[p].x = ref_of(x_of[p], in_dim(p));
            args[p].y = ref_of(y_of[p], out_dim(p));
            if (p <= PV) args[p].bias = ref_of(&act.bias[l][p], out_dim(p));
            if (p == PO) args[p].residual = ref_of(&act.h[l], D);
            if (p == PU) args[p].gate = ref_of(&act.g[l], F);
            if (p == PD) args[p].residual = ref_of(&act.a[l], D);
            uint64_t need = 0;
            CHECK_Q4(q4vk_gemv_workspace_size(ctx, model[l][p].mat, 1, flags[p], &need));
            if (need) {
                args[p].workspace.buffer = (uint64_t)ws.buffer;
                args[p].workspace.range = ws_bytes;
            }
            mats[p] = model[l][p].mat;
        }
        for (int gi = 0; gi < GROUPS; gi++)
            CHECK_Q4(q4vk_gemv_binding_create_multi(ctx, (uint32_t)group_count[gi], &mats[group_first[gi]],
                                                    &args[group_first[gi]], &bindings[l][gi]));
    }

    /* Record once: the step, a barrier after every group (each reads the one before). */
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    cai.commandPool = h.pool;
    cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cai.commandBufferCount = 1;
    VkCommandBuffer cmd;
    CHECK_VK(vkAllocateCommandBuffers(h.device, &cai, &cmd));
    CHECK_VK(vkBeginCommandBuffer(cmd, &(VkCommandBufferBeginInfo){.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO}));
    VkMemoryBarrier host_to_shader = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    host_to_shader.srcAccessMask = VK_ACCESS_HOST_WRITE_BIT;
    host_to_shader.dstAccessMask = VK_ACCESS_SHADER_READ_BIT;
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_HOST_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &host_to_shader,
                         0, NULL, 0, NULL);
    VkMemoryBarrier between = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    between.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    between.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    for (int l = 0; l < LAYERS; l++)
        for (int gi = 0; gi < GROUPS; gi++) {
            CHECK_Q4(q4vk_cmd_gemv_bound(ctx, bindings[l][gi], cmd));
            vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                                 &between, 0, NULL, 0, NULL);
        }
    VkMemoryBarrier shader_to_host = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    shader_to_host.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    shader_to_host.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &shader_to_host,
                         0, NULL, 0, NULL);
    CHECK_VK(vkEndCommandBuffer(cmd));
    printf("  recorded once: %d calls in %d bindings, %llu workspace bytes\n", LAYERS * PROJECTIONS, LAYERS * GROUPS,
           (unsigned long long)ws_bytes);

    /* Replay. */
    VkFence fence;
    CHECK_VK(vkCreateFence(h.device, &(VkFenceCreateInfo){.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO}, NULL, &fence));
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd;
    int failures = 0;
    double t0 = now_seconds();
    for (int i = 0; i < replays; i++) {
        if (i == replays - 1) fill(&act.h[0], D, &r); /* a new token's input */
        CHECK_VK(vkQueueSubmit(h.queue, 1, &si, fence));
        CHECK_VK(vkWaitForFences(h.device, 1, &fence, VK_TRUE, UINT64_MAX));
        CHECK_VK(vkResetFences(h.device, 1, &fence));
        if (i == 0) failures += check_step(model, &act, "first replay");
    }
    double seconds = now_seconds() - t0;
    failures += check_step(model, &act, "last replay, new input");
    printf("  %d replays in %.2f s (%.3f ms per step, submit and wait included)\n", replays, seconds,
           1e3 * seconds / replays);
    uint32_t after = pipelines_held(ctx);
    if (after != prepared) {
        fprintf(stderr, "FAIL: %u pipelines after prepare, %u after recording and replaying\n", prepared, after);
        failures++;
    }

    vkDestroyFence(h.device, fence, NULL);
    vkFreeCommandBuffers(h.device, h.pool, 1, &cmd);
    for (int l = 0; l < LAYERS; l++) {
        for (int gi = 0; gi < GROUPS; gi++) q4vk_gemv_binding_destroy(bindings[l][gi]);
        for (int p = 0; p < PROJECTIONS; p++) {
            q4vk_matrix_destroy(model[l][p].mat);
            free(model[l][p].w);
        }
    }
    q4vk_context_destroy(ctx);
    if (allocator.frees != allocator.allocations) {
        fprintf(stderr, "FAIL: %d allocations, %d frees\n", allocator.allocations, allocator.frees);
        failures++;
    }
    vk_host_buffer_destroy(&h, &ws);
    for (int l = 0; l <= LAYERS; l++) vk_host_buffer_destroy(&h, &act.h[l]);
    for (int l = 0; l < LAYERS; l++) {
        vk_host_buffer *bs[] = {&act.a[l], &act.q[l], &act.k[l], &act.v[l], &act.g[l], &act.u[l],
                                &act.bias[l][0], &act.bias[l][1], &act.bias[l][2]};
        for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) vk_host_buffer_destroy(&h, bs[i]);
    }
    int messages = vk_host_destroy(&h);
    if (messages) {
        fprintf(stderr, "FAIL: %d validation or q4vk messages\n", messages);
        failures++;
    }
    if (failures) return 1;
    printf("decoder_step: ok\n");
    return 0;
}
