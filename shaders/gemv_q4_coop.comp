#version 450
// Tensor-core GEMV for m = 1..8 through VK_KHR_cooperative_matrix (f16 x f16 -> f32,
// 16 x 8 x 16), exact by construction:
//
//   y[mi][row] = sum over blocks b of  s[row][g(b)] * 2^e[mi][b] * sum_{k in b} (u - z) * x'
//                (+ o[row][g(b)] * sum_{k in b} x, for matrices with per-group offsets)
//
// * A (16 rows x 16 k) holds u - z, exact in f16 (|u - z| <= 15). Each invocation's eight
//   elements come from one 32-bit word of the matrix (8 codes, laid out on the host in the
//   order of the fragment, `layout::coop`), decoded two at a time: a mask puts two nibbles
//   into the mantissas of the f16 pair (1024 + u, 1024 + u') (or 1024 + 16u), and one packed
//   subtract (or fma with 1/16) takes 1024 + z off - one LOP3 and one HADD2/HFMA2 per two
//   codes.
// * B (16 k x 8 columns) holds x in two exact f16 parts: per block of BLOCK k and activation
//   row, x is scaled by a power of two 2^-e that puts the block's max |x| in [2^14, 2^15),
//   then hi = f16(x'), lo = f16(x' - hi); hi + lo keeps 22 bits of every x (relative error
//   <= 2^-22), and what falls below f16's normal range is < 2^-38 of the block max. Column
//   2 (mi % 4) + part of B half mi / 4 is activation row mi's part (hi 0, lo 1); other
//   columns are 0. The subgroup builds its B blocks in shared memory from x (4 values per
//   invocation and activation row), so x is read once per subgroup and stage.
// * Products (u - z) x' are exact in f32 (5 x 11 bits) and summed by the tensor core in f32
//   over one block (C is cleared per block); the block sum is scaled once, in f32, by
//   s * 2^e (exact power of two) into fp32 accumulators. Measured error against the f64
//   reference: bench/RESULTS.md (rel. err column).
//
// Work split: a subgroup owns TILES row tiles of 16 rows; the SUBGROUPS subgroups of a
// workgroup take interleaved stages of 128 k of the same tiles and add their sums through
// shared memory at the end. Each invocation loads two uvec4 (8 k-steps) per tile and stage,
// and four x per activation row (one vec4 where aligned), the next stage's (and its scales,
// zeros) while it computes the current one.
//
// Fragment layout assumed (and checked by shaders/coop_probe.comp at context creation;
// devices whose mapping differs get the SIMT kernel): for invocation L, g = L / 4,
// c = L % 4 - A element e: row g + 8 (e / 4), k 2c + (e % 2) + 8 ((e / 2) % 2); B element e:
// k 2c + (e % 2) + 8 (e / 2), column g; C element e: row g + 8 (e / 2), column 2c + (e % 2).
// It is the layout of NVIDIA's mma.m16n8k16. The subgroup size must be 32.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TILES = 2;         // row tiles of 16 rows per subgroup
layout(constant_id = 2) const uint M = 1;             // activation rows, 1..8
layout(constant_id = 3) const bool HAS_ZEROS = false; // per-group zero points (else 8)
layout(constant_id = 4) const bool X_F16 = false;     // activations are f16 (else f32)
layout(constant_id = 5) const uint BLOCK = 128;       // k per block: min(group, 128), >= 32
// Per-group f32 offsets in binding 2 (w = s·u + b, no zero point: GGUF Q4_1 / Q4_K): the
// block adds b · Σx, with Σx of the block's activations summed in f32 while staging B.
layout(constant_id = 6) const bool HAS_OFFSETS = false;

const uint SUBGROUPS = gl_WorkGroupSize.x / 32u;
const uint HALVES = (M + 3u) / 4u;      // B matrices of 8 columns (4 activation rows each)
const uint COLS = 8u * HALVES;          // columns of a staged B row
const uint BLOCKS = 128u / BLOCK;       // blocks per stage

#include "q4_common.glsl"
// Push-constant fields as this kernel reads them: rows = rows of the part; chunks = stages
// of 128 k per row tile; groups, group_shift as for the SIMT kernel.

#include "coop_common.glsl"

// Every shared array is a multiple of 16 bytes (block_scale holds four times the factors
// it needs), so staged_b (read by coopMatLoad, which needs 16-byte alignment) stays
// aligned wherever the compiler places it.
shared uvec2 staged_b[SUBGROUPS][COLS * KPAD4];
shared float block_scale[SUBGROUPS][4 * BLOCKS * M];
shared float block_sum[SUBGROUPS][4 * BLOCKS * M];
shared float red[SUBGROUPS][TILES * 16 * M];

// This invocation's four activations of stage `stage` for every activation row.
void load_x(uint lane, uint stage, out vec4 xv[M]) {
    [[unroll]] for (uint mi = 0u; mi < M; mi++) {
        xv[mi] = x4_at(mi, stage * 128u + 4u * lane);
    }
}

// Stages the activations xv (load_x) of every activation row as f16 hi/lo columns of B,
// and the per-block factors 2^e, in this subgroup's shared memory.
void stage_b(uint sg, uint lane, vec4 xv[M]) {
    [[unroll]] for (uint mi = 0u; mi < M; mi++) {
        vec4 v = xv[mi];
        f16vec4 hi, lo;
        float factor = split_block(v, BLOCK, hi, lo);
        uint col = 8u * (mi / 4u) + 2u * (mi % 4u);
        uint at = col * KPAD4 + lane;
        staged_b[sg][at] = pack4(hi);
        staged_b[sg][at + KPAD4] = pack4(lo);
        if (HAS_OFFSETS) {
            float sum = block_total(v, BLOCK);
            if (lane % (BLOCK / 4u) == 0u) {
                block_sum[sg][(4u * lane / BLOCK) * M + mi] = sum;
            }
        }
        if (lane % (BLOCK / 4u) == 0u) {
            block_scale[sg][(4u * lane / BLOCK) * M + mi] = factor;
        }
    }
}

void main() {
    uint wg = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (wg >= p.wg_count) {
        return;
    }
    uint sg = gl_SubgroupID;
    uint lane = gl_SubgroupInvocationID;
    uint g4 = lane / 4u;
    uint tiles = (p.rows + 15u) / 16u;
    uint stages = p.chunks;
    uint tile0 = (p.wg_offset + wg) * TILES;

    uint tile[TILES];
    [[unroll]] for (uint t = 0u; t < TILES; t++) {
        tile[t] = min(tile0 + t, tiles - 1u);
    }
    // Columns of B past the activation rows stay 0.
    for (uint i = lane; i < COLS * KPAD4; i += 32u) {
        staged_b[sg][i] = uvec2(0u);
    }

    float acc[TILES][2][HALVES];
    [[unroll]] for (uint t = 0u; t < TILES; t++) {
        [[unroll]] for (uint r = 0u; r < 2u; r++) {
            [[unroll]] for (uint h = 0u; h < HALVES; h++) {
                acc[t][r][h] = 0.0;
            }
        }
    }

    uvec4 words[TILES][2];
    float sc[TILES][BLOCKS][2];
    float zr[TILES][BLOCKS][2];
    uint stage = sg;
    uint first = min(stage, stages - 1u);
    [[unroll]] for (uint t = 0u; t < TILES; t++) {
        load_stage(tile[t], stages, first, lane, words[t], sc[t], zr[t]);
    }
    vec4 xv[M];
    load_x(lane, first, xv);

    for (; stage < stages; stage += SUBGROUPS) {
        // The next stage's words, scales, zero points and x, in flight while this one runs.
        uint next = min(stage + SUBGROUPS, stages - 1u);
        uvec4 next_words[TILES][2];
        float next_sc[TILES][BLOCKS][2];
        float next_zr[TILES][BLOCKS][2];
        [[unroll]] for (uint t = 0u; t < TILES; t++) {
            load_stage(tile[t], stages, next, lane, next_words[t], next_sc[t], next_zr[t]);
        }

        vec4 next_xv[M];
        load_x(lane, next, next_xv);

        subgroupBarrier();
        stage_b(sg, lane, xv);
        subgroupMemoryBarrierShared();
        subgroupBarrier();

        [[unroll]] for (uint b = 0u; b < BLOCKS; b++) {
            MatC c[TILES][HALVES];
            [[unroll]] for (uint t = 0u; t < TILES; t++) {
                [[unroll]] for (uint h = 0u; h < HALVES; h++) {
                    c[t][h] = MatC(0.0);
                }
            }
            f16vec2 base0[TILES], base1[TILES];
            [[unroll]] for (uint t = 0u; t < TILES; t++) {
                // With offsets, zr holds them and the codes' zero point is 0.
                base0[t] = f16vec2(float16_t(HAS_OFFSETS ? 1024.0 : 1024.0 + zr[t][b][0]));
                base1[t] = f16vec2(float16_t(HAS_OFFSETS ? 64.0 : 64.0 + zr[t][b][1]));
            }
            [[unroll]] for (uint ks = b * (BLOCK / 16u); ks < (b + 1u) * (BLOCK / 16u); ks++) {
                MatB bm[HALVES];
                [[unroll]] for (uint h = 0u; h < HALVES; h++) {
                    coopMatLoad(bm[h], staged_b[sg], 8u * h * KPAD4 + ks * 4u, KPAD4,
                                gl_CooperativeMatrixLayoutColumnMajor);
                }
                [[unroll]] for (uint t = 0u; t < TILES; t++) {
                    uint q = words[t][ks / 4u][ks % 4u];
                    MatA a = decode(q, base0[t], base1[t]);
                    [[unroll]] for (uint h = 0u; h < HALVES; h++) {
                        c[t][h] = coopMatMulAdd(a, bm[h], c[t][h]);
                    }
                }
            }
            [[unroll]] for (uint h = 0u; h < HALVES; h++) {
                uint mi = 4u * h + lane % 4u;
                float f = mi < M ? block_scale[sg][b * M + mi] : 0.0;
                float xsum = HAS_OFFSETS && mi < M ? block_sum[sg][b * M + mi] : 0.0;
                [[unroll]] for (uint t = 0u; t < TILES; t++) {
                    acc[t][0][h] = fma(c[t][h][0] + c[t][h][1], sc[t][b][0] * f, acc[t][0][h]);
                    acc[t][1][h] = fma(c[t][h][2] + c[t][h][3], sc[t][b][1] * f, acc[t][1][h]);
                    if (HAS_OFFSETS) {
                        acc[t][0][h] = fma(zr[t][b][0], xsum, acc[t][0][h]);
                        acc[t][1][h] = fma(zr[t][b][1], xsum, acc[t][1][h]);
                    }
                }
            }
        }

        [[unroll]] for (uint t = 0u; t < TILES; t++) {
            words[t][0] = next_words[t][0];
            words[t][1] = next_words[t][1];
            [[unroll]] for (uint b = 0u; b < BLOCKS; b++) {
                sc[t][b] = next_sc[t][b];
                zr[t][b] = next_zr[t][b];
            }
        }
        [[unroll]] for (uint mi = 0u; mi < M; mi++) {
            xv[mi] = next_xv[mi];
        }
    }

    // Sums of the subgroups, then one invocation per output.
    [[unroll]] for (uint h = 0u; h < HALVES; h++) {
        uint mi = 4u * h + lane % 4u;
        if (mi < M) {
            [[unroll]] for (uint t = 0u; t < TILES; t++) {
                red[sg][(t * 16u + g4) * M + mi] = acc[t][0][h];
                red[sg][(t * 16u + g4 + 8u) * M + mi] = acc[t][1][h];
            }
        }
    }
    barrier();
    for (uint i = gl_LocalInvocationID.x; i < TILES * 16u * M; i += gl_WorkGroupSize.x) {
        uint mi = i % M;
        uint r = i / M;
        uint row = (tile0 + r / 16u) * 16u + r % 16u;
        if (tile0 + r / 16u < tiles && row < p.rows) {
            float v = 0.0;
            for (uint q = 0u; q < SUBGROUPS; q++) {
                v += red[q][i];
            }
            store_y(mi, row, v);
        }
    }
}
