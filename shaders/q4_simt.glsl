// Access to a matrix part in the SIMT layout (`shaders/q4_common.glsl` describes it) and to
// x and y, shared by the GEMV (`gemv_q4.comp`) and the GEMM (`gemm_q4.comp`). The including
// shader defines HAS_ZEROS, SCALE_F32, X_F16, HAS_OFFSETS, HAS_K_ORDER (and k_order when it
// can be true), XY_SET, X_BINDING, Y_BINDING and optionally OFFSETS_BINDING (default 2), and
// includes q4_common.glsl first.

// Weights are read once: `coherent` keeps them out of the L1 (NVIDIA), which then holds x.
layout(set = 0, binding = 0) coherent readonly buffer Weights { uvec4 w[]; };
layout(set = 0, binding = 1) readonly buffer Scales { uint s[]; };
layout(set = 0, binding = 2) readonly buffer Zeros { uint z[]; };
#ifndef OFFSETS_BINDING
#define OFFSETS_BINDING 2
#endif
layout(set = 0, binding = OFFSETS_BINDING) readonly buffer Offsets { float group_offset[]; };
layout(set = XY_SET, binding = X_BINDING) readonly buffer X4 { vec4 x4[]; };
layout(set = XY_SET, binding = X_BINDING) readonly buffer X1 { float x1[]; };
layout(set = XY_SET, binding = X_BINDING) readonly buffer XH { uint xh[]; };
#include "epilogue.glsl"

#ifdef PAIR
// The second matrix of a gate+up pair (`gemv_q4.comp` built with PAIR): its part in set 2,
// in the same form as set 0's.
layout(set = 2, binding = 0) coherent readonly buffer Weights2 { uvec4 w2[]; };
layout(set = 2, binding = 1) readonly buffer Scales2 { uint s2[]; };
layout(set = 2, binding = 2) readonly buffer Zeros2 { uint z2[]; };
layout(set = 2, binding = OFFSETS_BINDING) readonly buffer Offsets2 { float group_offset2[]; };
#endif

// Matrix `mat`'s streams (`PAIR_STREAM`).
PAIR_STREAM(uvec4, weights_of, w, w2)
PAIR_STREAM(uint, scale_word_of, s, s2)
PAIR_STREAM(uint, zero_word_of, z, z2)
PAIR_STREAM(float, offset_word_of, group_offset, group_offset2)

float scale_of(uint mat, uint i) {
    if (SCALE_F32) {
        return uintBitsToFloat(scale_word_of(mat, i));
    }
    vec2 pair = unpackHalf2x16(scale_word_of(mat, i >> 1));
    return (i & 1u) == 0u ? pair.x : pair.y;
}

float zero_of(uint mat, uint i) {
    if (HAS_OFFSETS) {
        return 0.0;
    }
    if (!HAS_ZEROS) {
        return 8.0;
    }
    return float((zero_word_of(mat, i >> 2) >> (8u * (i & 3u))) & 0xFFu);
}

float offset_of(uint mat, uint i) {
    return HAS_OFFSETS ? offset_word_of(mat, i) : 0.0;
}

float scale_at(uint i) {
    return scale_of(0u, i);
}

float zero_at(uint i) {
    return zero_of(0u, i);
}

float offset_at(uint i) {
    return offset_of(0u, i);
}

// The input feature of column kk.
uint input_of(uint kk) {
#if defined(EXPORT) && !defined(EXTENDED)
    return kk;
#else
    return HAS_K_ORDER ? k_order[kk] : kk;
#endif
}

// Activation kk of the x row starting at element row_start (gathered through the column
// order), 0 past K.
float x_at(uint row_start, uint kk) {
    if (kk >= p.k) {
        return 0.0;
    }
    uint i = row_start + input_of(kk);
    if (X_F16) {
        vec2 pair = unpackHalf2x16(xh[i >> 1]);
        return (i & 1u) == 0u ? pair.x : pair.y;
    }
    return x1[i];
}
