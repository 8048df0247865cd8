// x as the tensor-core kernels and the GEMM's fragments pre-pass (`x_fragments.comp`) read
// it: binding 0 of set 1, f32 or f16 (packed two per 32-bit word), p.x_stride elements
// between rows; and the exact two-part f16 split of f32 activations that both use (`x_split.glsl`; the
// pre-pass stores both parts, or with Q4VK_GEMV_ROUND_X_TO_F16 their sum rounded to f16).
// The including
// shader defines X_F16 and includes q4_common.glsl first.

layout(set = 1, binding = 0) readonly buffer X1 { float x1[]; };
layout(set = 1, binding = 0) readonly buffer XH { uint xh[]; };
layout(set = 1, binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(set = 1, binding = 0) readonly buffer XH4 { uvec2 xh4[]; };

// Activation kk of row mi, 0 past K.
float x_at(uint mi, uint kk) {
    if (kk >= p.k) {
        return 0.0;
    }
    uint i = mi * p.x_stride + kk;
    if (X_F16) {
        vec2 pair = unpackHalf2x16(xh[i >> 1]);
        return (i & 1u) == 0u ? pair.x : pair.y;
    }
    return x1[i];
}

// Activations kk .. kk + 3 of row mi (0 past K): one 16-byte (f32) or 8-byte (f16) load
// where the row and K allow, else one at a time.
vec4 x4_at(uint mi, uint kk) {
    uint i = mi * p.x_stride + kk;
    if (kk + 4u <= p.k && (i & 3u) == 0u) {
        if (X_F16) {
            uvec2 pairs = xh4[i >> 2];
            return vec4(unpackHalf2x16(pairs.x), unpackHalf2x16(pairs.y));
        }
        return x4[i >> 2];
    }
    return vec4(x_at(mi, kk), x_at(mi, kk + 1u), x_at(mi, kk + 2u), x_at(mi, kk + 3u));
}

#include "x_split.glsl"
