// Shared by the tensor-core GEMV (`gemv_q4_coop.comp`) and GEMM (`gemm_q4_coop.comp`): the
// bindings of a matrix part in the tensor-core layout (`layout::coop`) and of y, the
// fragment types and the exact decode of A (x's bindings and loads: `x_parts.glsl`; its
// staging as B: `coop_staging.glsl`). The including shader defines HAS_ZEROS, X_F16,
// BLOCK, BLOCKS (= 128 / BLOCK) and HAS_OFFSETS and includes q4_common.glsl first.

#include "x_parts.glsl"
#include "coop_fragments.glsl"
#include "coop_staging.glsl"

layout(set = 0, binding = 0) coherent readonly buffer Weights { uvec4 w[]; };
layout(set = 0, binding = 1) readonly buffer Scales { float s[]; };
layout(set = 0, binding = 2) readonly buffer Zeros { uint z[]; };
layout(set = 0, binding = 2) readonly buffer Offsets { float group_offset[]; };
#define XY_SET 1
#define Y_BINDING 1
#include "epilogue.glsl"

// The zero point of scale slot i, or for matrices with offsets that offset (their codes
// have no zero point: the decode subtracts 0).
float zero_at(uint i) {
    if (HAS_OFFSETS) {
        return group_offset[i];
    }
    return float((z[i >> 2] >> (8u * (i & 3u))) & 0xFFu);
}

// This invocation's share of row tile `tile` at stage `stage` (of `stages` per tile): its
// two uvec4 of A words (eight k-steps of 16) and, per block, the scales and zero points (or
// offsets) of its rows g4 and g4 + 8.
void load_stage(uint tile, uint stages, uint stage, uint lane, out uvec4 words[2],
                out float sc[BLOCKS][2], out float zr[BLOCKS][2]) {
    uint base = ((tile * stages + stage) * 2u) * 32u + lane;
    words[0] = w[base];
    words[1] = w[base + 32u];
    [[unroll]] for (uint b = 0u; b < BLOCKS; b++) {
        uint g = ((stage * 128u + b * BLOCK) >> 5) >> p.group_shift;
        uint at = (tile * p.groups + g) * 16u + lane / 4u;
        sc[b][0] = s[at];
        sc[b][1] = s[at + 8u];
        zr[b][0] = HAS_ZEROS || HAS_OFFSETS ? zero_at(at) : 8.0;
        zr[b][1] = HAS_ZEROS || HAS_OFFSETS ? zero_at(at + 8u) : 8.0;
    }
}
