// Shared by the tensor-core GEMV (`gemv_q4_coop.comp`) and GEMM (`gemm_q4_coop.comp`): the
// bindings of a matrix part in the tensor-core layout (`layout::coop`) and of y, the
// fragment types, the exact decode of A and the exact two-part split of a block of x
// (x's bindings and loads: `x_parts.glsl`). The including shader defines HAS_ZEROS, X_F16,
// BLOCK, BLOCKS (= 128 / BLOCK) and HAS_OFFSETS and includes q4_common.glsl first.

#include "x_parts.glsl"
#include "coop_fragments.glsl"

layout(set = 0, binding = 0) coherent readonly buffer Weights { uvec4 w[]; };
layout(set = 0, binding = 1) readonly buffer Scales { float s[]; };
layout(set = 0, binding = 2) readonly buffer Zeros { uint z[]; };
layout(set = 0, binding = 2) readonly buffer Offsets { float group_offset[]; };
#define XY_SET 1
#define Y_BINDING 1
#include "epilogue.glsl"

// Staged B is column-major (element (k, column) at column * KPAD + k), held as uvec2 (four
// f16 each, KPAD4 per column) so that an invocation's four consecutive k of one column are
// one explicit 8-byte store and a subgroup's stores of a column are contiguous; the 8-half
// pad puts the eight 16-byte column segments a fragment load reads at once in different
// banks. coopMatLoad reads it as f16 with offsets and stride in uvec2 units.
const uint KPAD = 136;
const uint KPAD4 = KPAD / 4u;

// Four f16 as one uvec2 (the first in the low half of x).
uvec2 pack4(f16vec4 v) {
    return uvec2(packFloat2x16(v.xy), packFloat2x16(v.zw));
}

// Activations x' = 2^-e x of one block of BLOCK k, held four per invocation by its
// BLOCK / 4 neighbouring invocations (a butterfly over them), split into two exact f16
// parts (`split_scaled`). Returns 2^e, the block's factor.
float split_block(vec4 v, out f16vec4 hi, out f16vec4 lo) {
    vec4 a = abs(v);
    float mx = max(max(a.x, a.y), max(a.z, a.w));
    [[unroll]] for (uint d = 1u; d < BLOCK / 4u; d <<= 1) {
        mx = max(mx, subgroupShuffleXor(mx, d));
    }
    vec4 hi32, lo32;
    float factor = split_scaled(v, floatBitsToUint(mx), hi32, lo32);
    hi = f16vec4(hi32);
    lo = f16vec4(lo32);
    return factor;
}

// Sum of the block's activations (held as v by its BLOCK / 4 invocations), in f32.
float block_total(vec4 v) {
    float sum = (v.x + v.y) + (v.z + v.w);
    [[unroll]] for (uint d = 1u; d < BLOCK / 4u; d <<= 1) {
        sum += subgroupShuffleXor(sum, d);
    }
    return sum;
}

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
