#version 450
// Benchmark ceiling only: the tensor cores' rate through VK_KHR_cooperative_matrix, the
// MMA the GEMM and GEMV issue (f16 x f16 -> f32, 16 x 8 x 16), with no memory traffic.
// Every subgroup runs `iters` rounds of eight independent products (A and B in registers,
// eight accumulator chains, so the MMA latency is hidden) and writes one element per
// accumulator so that none of the work can be dropped. q4vk-bench compares the GEMM's
// TFLOP/s with this rate measured in the same run.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x = 128) in;
layout(set = 0, binding = 0) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Push { uint iters; } p;

#include "coop_fragments.glsl"

const uint CHAINS = 8;

void main() {
    // Non-zero operands the compiler cannot know (from the push constant, uniform as a
    // splat must be).
    float16_t v = float16_t((p.iters & 7u) + 1u);
    MatA a = MatA(v * float16_t(1.0 / 64.0));
    MatB b[2];
    b[0] = MatB(v);
    b[1] = MatB(v + float16_t(1.0));
    MatC c[CHAINS];
    [[unroll]] for (uint i = 0u; i < CHAINS; i++) {
        c[i] = MatC(0.0);
    }
    for (uint it = 0u; it < p.iters; it++) {
        [[unroll]] for (uint i = 0u; i < CHAINS; i++) {
            c[i] = coopMatMulAdd(a, b[i % 2u], c[i]);
        }
    }
    uint at = gl_GlobalInvocationID.x * CHAINS;
    [[unroll]] for (uint i = 0u; i < CHAINS; i++) {
        o[at + i] = c[i][0];
    }
}
