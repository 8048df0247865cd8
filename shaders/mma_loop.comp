#version 450
// Benchmark ceiling only: the tensor-core GEMM's inner loop (`gemm_q4_coop.comp` on x in
// fragments) with no memory traffic. Every subgroup runs `iters` blocks of 8 k-steps; each
// k-step decodes TILES A fragments from words in registers (`decode`), rebuilds COLS B
// fragments from words in registers (`b_fragment`) and issues the TILES x COLS MMAs, and
// each block ends with the GEMM's epilogue (acc = fma(C, scale, acc), C cleared). The words
// change every block so that nothing can be hoisted. Built for the GEMM's subgroup tiles
// 4 x 4 (its 256-row tile) and 2 x 8 (its 128-row x 64-token tile and token groups);
// q4vk-bench prints the rate beside the GEMM's.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require

#include "coop_fragments.glsl"

layout(local_size_x = 128) in;
layout(set = 0, binding = 0) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Push { uint iters; } p;

void main() {
    // Words the compiler cannot know (from the push constant and the invocation).
    uint seed = p.iters * 0x9E3779B9u + gl_GlobalInvocationID.x * 0x85EBCA6Bu;
    uint words[TILES][8];
    float scale[TILES][2];
    [[unroll]] for (uint t = 0u; t < TILES; t++) {
        [[unroll]] for (uint k = 0u; k < 8u; k++) {
            words[t][k] = seed * (t * 8u + k + 1u);
        }
        scale[t][0] = uintBitsToFloat((seed & 0xFFFFu) | 0x3F800000u);
        scale[t][1] = scale[t][0] * 0.5;
    }
    // B's words: finite f16 (exponent below 15).
    uvec2 b_words[COLS][2];
    [[unroll]] for (uint h = 0u; h < COLS; h++) {
        b_words[h][0] = uvec2(seed ^ h, seed + h) & uvec2(0x3BFF3BFFu);
        b_words[h][1] = uvec2(seed * 3u ^ h, seed + 7u * h) & uvec2(0x3BFF3BFFu);
    }
    float acc[TILES][COLS][4];
    MatC c[TILES][COLS];
    [[unroll]] for (uint t = 0u; t < TILES; t++) {
        [[unroll]] for (uint h = 0u; h < COLS; h++) {
            c[t][h] = MatC(0.0);
            [[unroll]] for (uint e = 0u; e < 4u; e++) {
                acc[t][h][e] = 0.0;
            }
        }
    }
    const f16vec2 base0 = f16vec2(1032.0), base1 = f16vec2(72.0);
    for (uint it = 0u; it < p.iters; it++) {
        [[unroll]] for (uint ks = 0u; ks < 8u; ks++) {
            MatB b[COLS];
            [[unroll]] for (uint h = 0u; h < COLS; h++) {
                b[h] = b_fragment(b_words[h][ks % 2u]);
            }
            [[unroll]] for (uint t = 0u; t < TILES; t++) {
                MatA a = decode(words[t][ks], base0, base1);
                [[unroll]] for (uint h = 0u; h < COLS; h++) {
                    c[t][h] = coopMatMulAdd(a, b[h], c[t][h]);
                }
            }
            if (ks % 2u == 1u) {
                [[unroll]] for (uint h = 0u; h < COLS; h++) {
                    b_words[h][0] = (b_words[h][0] + uvec2(0x00010001u)) & uvec2(0x3BFF3BFFu);
                    b_words[h][1] = (b_words[h][1] + uvec2(0x00010001u)) & uvec2(0x3BFF3BFFu);
                }
            }
        }
        [[unroll]] for (uint t = 0u; t < TILES; t++) {
            [[unroll]] for (uint k = 0u; k < 8u; k++) {
                words[t][k] += 0x11111111u;
            }
            [[unroll]] for (uint h = 0u; h < COLS; h++) {
                [[unroll]] for (uint e = 0u; e < 4u; e++) {
                    acc[t][h][e] = fma(c[t][h][e], scale[t][e / 2u], acc[t][h][e]);
                }
                c[t][h] = MatC(0.0);
            }
        }
    }
    // One sum per invocation, so that none of the work can be dropped.
    float total = 0.0;
    [[unroll]] for (uint t = 0u; t < TILES; t++) {
        [[unroll]] for (uint h = 0u; h < COLS; h++) {
            [[unroll]] for (uint e = 0u; e < 4u; e++) {
                total += acc[t][h][e];
            }
        }
    }
    o[gl_GlobalInvocationID.x] = total;
}
