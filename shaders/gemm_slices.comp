#version 450
// Adds the K slices of the tensor-core GEMM into y (`gemm_q4_coop.comp` built with
// -DK_SLICES, dispatched with gl_NumWorkGroups.z = SLICES > 1): a matrix part's sums
// (SLICES · m · rows floats) are in the workspace (binding 0 of set 1) from word
// p.partials + SLICES m row_base on, slice z's of token t at (z m + t) rows + row;
// y[t][row_base + row] = their sum, added in slice order (so the result does not depend on
// timing). Push constants: the GEMM's for the same part and call, with this dispatch's
// wg_count and wg_offset; one invocation per row and token.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#define GEMM

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint SLICES = 2;
#define WORKGROUP gl_WorkGroupSize.x

#include "q4_common.glsl"

layout(set = 1, binding = 0) readonly buffer Partials { float partial[]; };
#define XY_SET 1
#define Y_BINDING 1
#include "epilogue.glsl"

void main() {
    uint wg = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (wg >= p.wg_count) {
        return;
    }
    uint i = (wg + p.wg_offset) * WORKGROUP + gl_LocalInvocationID.x;
    uint row = i % p.rows;
    uint tok = i / p.rows;
    if (tok >= p.m) {
        return;
    }
    uint at = p.partials + SLICES * p.m * p.row_base + tok * p.rows + row;
    uint slice_words = p.m * p.rows;
    float sum = partial[at];
    [[unroll]] for (uint z = 1u; z < SLICES; z++) {
        sum += partial[at + z * slice_words];
    }
    store_y(tok, row, sum);
}
