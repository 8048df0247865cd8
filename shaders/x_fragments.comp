#version 450
// The pre-pass of the tensor-core GEMM on a workspace (`gemm_q4_coop.comp` built with
// X_FRAGMENTS), which `q4vk_cmd_gemv` records before it when given a workspace: x (binding 0
// of set 1) into the workspace (binding 1), once per call, so that the GEMM's workgroups
// load their B fragments straight from there instead of each converting and staging x
// again. f16 x is one f16 column per token, as it is; f32 x is 2^-e x per block (the
// block's largest |x| scaled into [2^14, 2^15), so nothing overflows), either as its two
// exact parts (`split_scaled`: hi in column 2 t, lo in 2 t + 1; PARTS = 2, what the host
// builds for f32 x unless asked to round) or rounded to f16 in one column (Q4VK_GEMV_ROUND_X_TO_F16: a relative rounding).
// With kpad = 128 p.chunks (K padded to the tensor-core layout's stages), mpad = p.rows (m
// rounded up to the GEMM's tokens per workgroup, a multiple of 8), cols = PARTS mpad and
// nb = kpad / BLOCK:
//
//   B  f16, cols columns of kpad, stored as the GEMM's B fragments (16 k x 8 columns,
//      `layout::coop::b_element`) in pairs of k-steps: fragments (g, s) and (g, s + 1), s
//      even (columns 8 g .. 8 g + 7, k 16 s .. 16 s + 31), at uvec4 (g kpad / 32 + s / 2)
//      32 + lane, the lane's four elements of (g, s) in order, then those of (g, s + 1); so
//      each invocation of the GEMM loads its share of two fragments with one 16-byte load,
//      a subgroup's 512 contiguous bytes;
//   F  f32 [mpad][nb]: each block's factor 2^e (1 for f16 x);
//   S  f32 [mpad][nb]: each block's sum of x in f32 (read by matrices with offsets only).
//
// Columns past K and tokens m .. mpad - 1 are written as zeros. Workgroup (i, t) covers
// columns 4 WORKGROUP i .. of token t, four per invocation; the BLOCK / 4 invocations of a
// block find its largest |x| (compared as float bits) and its sum through shared memory.
//
// Assumes: storage buffers and 32-bit arithmetic only (no subgroup operations, no 16-bit
// types: f16 is written with packHalf2x16); WORKGROUP a multiple of 32.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#define GEMM

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool X_F16 = false; // activations are f16 (else f32)
layout(constant_id = 2) const uint BLOCK = 128;   // k per block: 32, 64 or 128
// B columns per token: 2 for f32 x as its exact parts, else 1 (f16 x; f32 x rounded).
layout(constant_id = 3) const uint PARTS = 1;
#define WORKGROUP gl_WorkGroupSize.x

#include "q4_common.glsl"
#include "x_parts.glsl"

layout(set = 1, binding = 1) writeonly buffer OutB { uint out_b[]; };
layout(set = 1, binding = 1) writeonly buffer OutF { float out_f[]; };

// Per invocation: the largest magnitude bits and the sum of its four activations.
shared uint part_largest[WORKGROUP];
shared float part_sum[WORKGROUP];

// The 32-bit word of B holding column col's halves k, k + 1 (k even): element e = k % 2 +
// 2 ((k % 16) / 8) of lane 4 (col % 8) + (k % 8) / 2 in fragment (col / 8, k / 16), the
// (k % 32) / 16-th of its pair.
uint b_word(uint col, uint k, uint kpad) {
    uint lane = (col % 8u) * 4u + (k % 8u) / 2u;
    uint pair = (col / 8u) * (kpad / 32u) + k / 32u;
    return ((pair * 32u + lane) * 2u + (k % 32u) / 16u) * 2u + (k % 16u) / 8u;
}

// Columns k .. k + 3 of column col as two words of B.
void store_b(uint col, uint k, uint kpad, vec4 v) {
    out_b[b_word(col, k, kpad)] = packHalf2x16(v.xy);
    out_b[b_word(col, k + 2u, kpad)] = packHalf2x16(v.zw);
}

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint t = gl_WorkGroupID.y;
    uint kpad = p.chunks * 128u;
    uint mpad = p.rows;
    uint kk = (gl_WorkGroupID.x * WORKGROUP + lid) * 4u;
    vec4 v = t < p.m ? x4_at(t, kk) : vec4(0.0);
    uvec4 magnitude = floatBitsToUint(v) & 0x7FFFFFFFu;
    part_largest[lid] = max(max(magnitude.x, magnitude.y), max(magnitude.z, magnitude.w));
    part_sum[lid] = (v.x + v.y) + (v.z + v.w);
    barrier();
    if (kk >= kpad) {
        return;
    }
    uint first = lid - lid % (BLOCK / 4u);
    uint largest = 0u;
    float sum = 0.0;
    for (uint i = first; i < first + BLOCK / 4u; i++) {
        largest = max(largest, part_largest[i]);
        sum += part_sum[i];
    }

    float factor = 1.0;
    if (X_F16) {
        store_b(t, kk, kpad, v);
    } else {
        vec4 hi, lo;
        factor = split_scaled(v, largest, hi, lo);
        if (PARTS == 2u) {
            // hi is exact in f16; packHalf2x16 rounds lo to f16, as the staging GEMM does.
            store_b(2u * t, kk, kpad, hi);
            store_b(2u * t + 1u, kk, kpad, lo);
        } else {
            // hi + lo is 2^-e x exactly (f32; -0 comes out +0); packHalf2x16 rounds it.
            store_b(t, kk, kpad, hi + lo);
        }
    }
    if (lid == first) {
        uint nb = kpad / BLOCK;
        uint factors = PARTS * mpad * (kpad / 2u);
        uint block = t * nb + kk / BLOCK;
        out_f[factors + block] = factor;
        out_f[factors + mpad * nb + block] = sum;
    }
}
