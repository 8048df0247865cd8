#version 450
// Tensor-core GEMM for m > 8 (prefill) through VK_KHR_cooperative_matrix (f16 x f16 -> f32,
// 16 x 8 x 16) on the tensor-core layout, exact by construction as the GEMV
// (`gemv_q4_coop.comp`, whose header gives the fragment layout it assumes):
//
// * A (16 rows x 16 k) holds u - z, exact in f16, decoded from the invocation's own words
//   (`decode`), once per k-step and row tile, and used against every token of the tile.
// * B holds the tile's tokens: f16 activations as they are (one column per token: products
//   with u - z are exact in f32, no scaling); f32 activations as two exact f16 parts of
//   2^-e x per block (`split_block`; columns 2 t and 2 t + 1 of token t), summed after the
//   block's products.
// * The block sums are scaled in f32 by s (and 2^e) into fp32 accumulators; matrices with
//   offsets add b · Σx per block.
//
// Work split: a workgroup owns (SUBGROUPS / (KSPLIT TSPLIT)) x TILES row tiles (16 rows
// each) by TOKENS tokens. Its subgroups form KSPLIT K groups that take interleaved stages of
// 128 k of those rows (so short matrices still give every SM work); each K group stages its
// tokens' x into its own shared B per stage (token t by subgroup t % (SUBGROUPS / KSPLIT),
// four values per invocation). A K group's subgroups form TSPLIT token groups of
// TOKENS / TSPLIT tokens; each subgroup of a token group multiplies its TILES row tiles
// against that group's tokens (the token groups read the same weights, which the L1 serves
// once, so the workgroup's tile grows along tokens with the same accumulators per
// invocation).
// Every K group runs the same number of steps (the barriers are workgroup-wide). Each
// invocation loads the next stage's words (and scales, zeros) and x while it computes the
// current one. At the end K groups 1.. hand their sums to group 0 through shared memory.
// K slices (the build with -DK_SLICES, on x in fragments only; dispatched with
// gl_NumWorkGroups.z = Z > 1; the other build runs with Z = 1 and writes y): workgroup
// (wg, z) takes the z-th of Z contiguous ranges of the stages, so a matrix with few row
// tiles and a long K still fills the GPU with workgroups of large tiles (which read x from
// the L2 fewer times than more, smaller tiles would), and writes its sums into the workspace
// after the fragments (a part's Z · m · rows floats from word p.partials + Z m row_base on,
// slice z's of token t at (z m + t) rows + row); `gemm_slices.comp` then adds the Z slices
// into y.
// Workgroups are numbered tokens fastest, so the ones reading the same rows run together
// and find the weights in the L2.
//
// With X_FRAGMENTS, binding 0 of set 1 is not x but the workspace its pre-pass wrote
// (`x_fragments.comp`: every token's B columns in fragment order, as B holds them here —
// f16 x one column, f32 x its two exact parts — or, X_ROUNDED, f32 x rounded to f16 in one
// column; with the block factors and sums): each invocation loads its share of two
// k-steps' fragments with one 16-byte load (the L1 serves the workgroup's other
// subgroups), so there is no staging, no barrier and no shared B. The loads run B_AHEAD
// k-steps ahead of their products (a ring per invocation).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require
#define GEMM

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TILES = 2;         // row tiles of 16 rows per subgroup
layout(constant_id = 2) const uint TOKENS = 32;       // tokens per workgroup (a multiple of 8)
layout(constant_id = 3) const bool HAS_ZEROS = false; // per-group zero points (else 8)
layout(constant_id = 4) const bool X_F16 = false;     // activations are f16 (else f32)
layout(constant_id = 5) const uint BLOCK = 128;       // k per block: min(group, 128), >= 32
// Per-group f32 offsets in binding 2 (w = s·u + b, no zero point: GGUF Q4_1 / Q4_K).
layout(constant_id = 6) const bool HAS_OFFSETS = false;
// Groups of subgroups splitting the stages (K) of the same rows (divides the subgroups).
layout(constant_id = 7) const uint KSPLIT = 1;
// x written by `x_fragments.comp` into the workspace bound as x (else x itself, staged here).
layout(constant_id = 8) const bool X_FRAGMENTS = false;
// With X_FRAGMENTS only: the workspace holds f32 x rounded to f16, scaled by 2^-e per block
// (Q4VK_GEMV_ROUND_X_TO_F16): the block factors apply.
layout(constant_id = 9) const bool X_ROUNDED = false;
// With X_FRAGMENTS only: k-steps of B fragments loaded ahead of their use (2, 4 or 8).
layout(constant_id = 10) const uint B_AHEAD = 2;
// Token groups: the subgroups of a K group split the workgroup's tokens this many ways, each
// taking TOKENS / TSPLIT of them against its own row tiles, so the workgroup's tile grows
// along tokens without more accumulators per invocation (the L1 serves the weights its
// token groups share).
layout(constant_id = 11) const uint TSPLIT = 1;

const uint SUBGROUPS = gl_WorkGroupSize.x / 32u;
const uint SG = SUBGROUPS / KSPLIT;    // subgroups per K group
const uint SGR = SG / TSPLIT;          // subgroups of a token group, each with its own row tiles
const uint ROW_TILES = SGR * TILES;    // row tiles per workgroup
const uint SG_TOKENS = TOKENS / TSPLIT; // tokens per token group
const uint PARTS = X_F16 ? 1u : 2u;    // columns of B per token
const uint COLS = PARTS * TOKENS;      // columns of a staged B row
const uint NB = PARTS * SG_TOKENS / 8u; // B matrices per k-step of a subgroup
const uint BLOCKS = 128u / BLOCK;      // blocks per stage
const uint TPS = TOKENS / SG;          // tokens each subgroup stages (the host keeps it whole)

#include "q4_common.glsl"
// Push-constant fields as this kernel reads them: rows = rows of the part; chunks = stages
// of 128 k per row tile; groups, group_shift as for the SIMT kernel; m = tokens.

#include "coop_common.glsl"

// The workspace (X_FRAGMENTS): B fragments in pairs of k-steps, an invocation's four f16 of
// each per uvec4 (x1 reads its factors and sums).
layout(set = 1, binding = 0) readonly buffer XB { uvec4 xb[]; };
#ifdef K_SLICES
// K slices: the same workspace, where this workgroup's slice of the sums goes (only this
// build writes it).
layout(set = 1, binding = 0) writeonly buffer Partials { float partials_out[]; };
#endif

// Every shared array is a multiple of 16 bytes (TOKENS is a multiple of 8), so staged_b
// (read by coopMatLoad, which needs 16-byte alignment) stays aligned wherever it is placed.
// One B per K group.
// With X_FRAGMENTS none of B's arrays is used (four elements each keep them declared).
shared uvec2 staged_b[KSPLIT][X_FRAGMENTS ? 4u : COLS * KPAD4];
shared float block_scale[KSPLIT][X_FRAGMENTS ? 4u : BLOCKS * TOKENS];
shared float block_sum[KSPLIT][X_FRAGMENTS ? 4u : BLOCKS * TOKENS];
// The sums of K groups 1.. for group 0 to add: [group - 1][row of the workgroup][token]
// (4 unused floats without a split: every shared array stays a multiple of 16 bytes).
shared float red[KSPLIT == 1u ? 4u : (KSPLIT - 1u) * ROW_TILES * 16u * TOKENS];

#include "coop_gemm_tiles.glsl"

// Stages this subgroup's tokens (loaded by load_x) as columns of K group kg's B, with the
// per-block factors (and sums of x).
void stage_b(uint kg, uint sub, uint lane, vec4 xv[TPS]) {
    [[unroll]] for (uint i = 0u; i < TPS; i++) {
        uint t = sub + SG * i;
        vec4 v = xv[i];
        float factor = 1.0;
        if (X_F16) {
            staged_b[kg][t * KPAD4 + lane] = pack4(f16vec4(v));
        } else {
            f16vec4 hi, lo;
            factor = split_block(v, BLOCK, hi, lo);
            uint at = 2u * t * KPAD4 + lane;
            staged_b[kg][at] = pack4(hi);
            staged_b[kg][at + KPAD4] = pack4(lo);
        }
        float sum = HAS_OFFSETS ? block_total(v, BLOCK) : 0.0;
        if (lane % (BLOCK / 4u) == 0u) {
            uint at = (4u * lane / BLOCK) * TOKENS + t;
            block_scale[kg][at] = factor;
            block_sum[kg][at] = sum;
        }
    }
}

// Pair j (k-steps 2 j, 2 j + 1) of B fragment h (columns 8 h.. of the tile from tok0) of
// stage `stage` from the workspace (X_FRAGMENTS): the invocation's four f16 of each, one
// 16-byte load.
uvec4 fragment_pair(uint tok0, uint h, uint stage, uint j, uint lane) {
    uint g = PARTS * tok0 / 8u + h;
    return xb[((g * p.chunks + stage) * 4u + j) * 32u + lane];
}

// The fragment of k-step `odd` (0 or 1) of a pair.
MatB fragment_of(uvec4 pair, uint odd) {
    return b_fragment(odd == 0u ? pair.xy : pair.zw);
}

// Tokens of the workspace (X_FRAGMENTS): m rounded up to TOKENS.
uint fragment_tokens() {
    return (p.m + TOKENS - 1u) / TOKENS * TOKENS;
}

// The workspace's block factors (F), after its B: PARTS columns of 128 p.chunks f16 per
// token, as 32-bit words.
uint fragment_factors() {
    return PARTS * fragment_tokens() * p.chunks * 64u;
}

// The factor 2^e of block b of stage `stage` for token tk (within the tile from tok0): from
// shared memory, or (X_FRAGMENTS) the workspace's F.
float factor_of(uint kg, uint stage, uint b, uint tok0, uint tk) {
    if (!X_FRAGMENTS) {
        return block_scale[kg][b * TOKENS + tk];
    }
    uint nb = p.chunks * BLOCKS;
    return x1[fragment_factors() + (tok0 + tk) * nb + stage * BLOCKS + b];
}

// The sum of x over that block (matrices with offsets), likewise (the workspace's S).
float sum_of(uint kg, uint stage, uint b, uint tok0, uint tk) {
    if (!X_FRAGMENTS) {
        return block_sum[kg][b * TOKENS + tk];
    }
    uint nb = p.chunks * BLOCKS;
    uint sums = fragment_factors() + fragment_tokens() * nb;
    return x1[sums + (tok0 + tk) * nb + stage * BLOCKS + b];
}

void main() {
    uint wg = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (wg >= p.wg_count) {
        return;
    }
    wg += p.wg_offset;
    uint sg = gl_SubgroupID;
    uint kg = sg / SG;  // K group: stages kg, kg + KSPLIT, ...
    uint sub = sg % SG; // its tokens to stage within the K group
    uint rs = sub % SGR; // its row tiles
    uint ts0 = (sub / SGR) * SG_TOKENS; // its first token within the workgroup's tile
    uint hb = PARTS * ts0 / 8u;         // its first B matrix among the workgroup's
    uint lane = gl_SubgroupInvocationID;
    uint g4 = lane / 4u;
    uint c4 = lane % 4u;
    uint tiles = (p.rows + 15u) / 16u;
    uint stages = p.chunks;
    uint token_tiles = (p.m + TOKENS - 1u) / TOKENS;
    uint tok0 = (wg % token_tiles) * TOKENS;
    uint wg_tile0 = (wg / token_tiles) * ROW_TILES;
    uint tile0 = wg_tile0 + rs * TILES;

    uint tile[TILES];
    [[unroll]] for (uint t = 0u; t < TILES; t++) {
        tile[t] = min(tile0 + t, tiles - 1u);
    }

    // acc[t][h][e] sums C element e of B matrix h (acc_place; f32 activations: elements 0
    // and 2 hold hi + lo).
    float acc[TILES][NB][4];
    [[unroll]] for (uint t = 0u; t < TILES; t++) {
        [[unroll]] for (uint h = 0u; h < NB; h++) {
            [[unroll]] for (uint e = 0u; e < 4u; e++) {
                acc[t][h][e] = 0.0;
            }
        }
    }

    // Every K group runs the same number of steps (barriers are workgroup-wide); a group
    // past the last stage loads the last one again and skips its products.
    // This workgroup's K slice: stages s0 .. s1 - 1 (all of them without slices).
    uint slice = gl_WorkGroupID.z;
    uint per_slice = (stages + gl_NumWorkGroups.z - 1u) / gl_NumWorkGroups.z;
    uint s0 = min(slice * per_slice, stages);
    uint s1 = min(s0 + per_slice, stages);
    uint steps = (s1 - s0 + KSPLIT - 1u) / KSPLIT;
    uint first = min(s0 + kg, stages - 1u);
    vec4 xv[TPS];
    uvec4 words[TILES][2];
    float sc[TILES][BLOCKS][2];
    float zr[TILES][BLOCKS][2];
    [[unroll]] for (uint t = 0u; t < TILES; t++) {
        load_stage(tile[t], stages, first, lane, words[t], sc[t], zr[t]);
    }
    if (!X_FRAGMENTS) {
        load_x(sub, lane, first, tok0, xv);
    }
    // X_FRAGMENTS: the B fragment pairs of the next B_AHEAD k-steps, in flight (pair j of a
    // stage in slot j % PAIRS_AHEAD), and the pair of the current k-step.
    const uint PAIRS_AHEAD = X_FRAGMENTS ? B_AHEAD / 2u : 1u;
    uvec4 ring[PAIRS_AHEAD][NB];
    uvec4 pair[NB];
    if (X_FRAGMENTS) {
        [[unroll]] for (uint d = 0u; d < PAIRS_AHEAD; d++) {
            [[unroll]] for (uint h = 0u; h < NB; h++) {
                ring[d][h] = fragment_pair(tok0, hb + h, first, d, lane);
            }
        }
    }

    for (uint step = 0u; step < steps; step++) {
        uint stage = s0 + step * KSPLIT + kg;
        // The next stage's words, scales and zero points, and x, in flight while this one
        // runs.
        uint next = min(stage + KSPLIT, stages - 1u);
        vec4 next_xv[TPS];
        uvec4 next_words[TILES][2];
        float next_sc[TILES][BLOCKS][2];
        float next_zr[TILES][BLOCKS][2];
        [[unroll]] for (uint t = 0u; t < TILES; t++) {
            load_stage(tile[t], stages, next, lane, next_words[t], next_sc[t], next_zr[t]);
        }
        if (!X_FRAGMENTS) {
            load_x(sub, lane, next, tok0, next_xv);
            barrier();
            stage_b(kg, sub, lane, xv);
            barrier();
        }

        // Only K groups can run past the slice's last stage (KSPLIT = 1 folds this away).
        if (KSPLIT == 1u || stage < s1) {
            // X_FRAGMENTS: this stage's block factors (f32 x) and sums (offsets) from the
            // workspace, loaded now so that the block's products hide their latency
            // (element [b][h][i]: f16 columns token 8 h + 2 c4 + i; two parts token
            // 4 h + c4, i = 0).
            float fx[BLOCKS][NB][2];
            float sx[BLOCKS][NB][2];
            if (X_FRAGMENTS) {
                [[unroll]] for (uint b = 0u; b < BLOCKS; b++) {
                    [[unroll]] for (uint h = 0u; h < NB; h++) {
                        [[unroll]] for (uint i = 0u; i < 2u; i++) {
                            uint tk = ts0 + (X_F16 ? 8u * h + 2u * c4 + i : 4u * h + c4);
                            bool factors = X_ROUNDED || !X_F16;
                            fx[b][h][i] = factors ? factor_of(kg, stage, b, tok0, tk) : 1.0;
                            sx[b][h][i] = HAS_OFFSETS ? sum_of(kg, stage, b, tok0, tk) : 0.0;
                        }
                    }
                }
            }
            [[unroll]] for (uint b = 0u; b < BLOCKS; b++) {
                MatC c[TILES][NB];
                [[unroll]] for (uint t = 0u; t < TILES; t++) {
                    [[unroll]] for (uint h = 0u; h < NB; h++) {
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
                    MatB bm[NB];
                    [[unroll]] for (uint h = 0u; h < NB; h++) {
                        if (X_FRAGMENTS) {
                            // An even k-step takes its pair from the ring, whose slot then
                            // takes the pair B_AHEAD k-steps on (in the next stage past
                            // the fourth).
                            if (ks % 2u == 0u) {
                                uint slot = (ks / 2u) % PAIRS_AHEAD;
                                uint ahead = ks / 2u + PAIRS_AHEAD;
                                pair[h] = ring[slot][h];
                                ring[slot][h] = fragment_pair(tok0, hb + h,
                                                              ahead < 4u ? stage : next,
                                                              ahead % 4u, lane);
                            }
                            bm[h] = fragment_of(pair[h], ks % 2u);
                        } else {
                            coopMatLoad(bm[h], staged_b[kg], 8u * (hb + h) * KPAD4 + ks * 4u,
                                        KPAD4, gl_CooperativeMatrixLayoutColumnMajor);
                        }
                    }
                    [[unroll]] for (uint t = 0u; t < TILES; t++) {
                        MatA a = decode(words[t][ks / 4u][ks % 4u], base0[t], base1[t]);
                        [[unroll]] for (uint h = 0u; h < NB; h++) {
                            c[t][h] = coopMatMulAdd(a, bm[h], c[t][h]);
                        }
                    }
                }
                [[unroll]] for (uint h = 0u; h < NB; h++) {
                    [[unroll]] for (uint t = 0u; t < TILES; t++) {
                        if (X_F16) {
                            // Tokens 8 h + 2 c4 (elements 0, 2) and + 1 (elements 1, 3).
                            uint tk = ts0 + 8u * h + 2u * c4;
                            [[unroll]] for (uint e = 0u; e < 4u; e++) {
                                uint r = e / 2u;
                                float scale = X_ROUNDED ? sc[t][b][r] * fx[b][h][e % 2u]
                                                        : sc[t][b][r];
                                float v = fma(c[t][h][e], scale, acc[t][h][e]);
                                float sum = X_FRAGMENTS ? sx[b][h][e % 2u]
                                                    : sum_of(kg, stage, b, tok0, tk + e % 2u);
                                acc[t][h][e] = HAS_OFFSETS ? fma(zr[t][b][r], sum, v) : v;
                            }
                        } else {
                            uint tk = ts0 + 4u * h + c4;
                            float f = X_FRAGMENTS ? fx[b][h][0] : factor_of(kg, stage, b, tok0, tk);
                            float sum = X_FRAGMENTS ? sx[b][h][0] : sum_of(kg, stage, b, tok0, tk);
                            [[unroll]] for (uint r = 0u; r < 2u; r++) {
                                float v = fma(c[t][h][2u * r] + c[t][h][2u * r + 1u],
                                              sc[t][b][r] * f, acc[t][h][2u * r]);
                                acc[t][h][2u * r] = HAS_OFFSETS ? fma(zr[t][b][r], sum, v) : v;
                            }
                        }
                    }
                }
            }
        }

        if (!X_FRAGMENTS) {
            [[unroll]] for (uint i = 0u; i < TPS; i++) {
                xv[i] = next_xv[i];
            }
        }
        [[unroll]] for (uint t = 0u; t < TILES; t++) {
            words[t] = next_words[t];
            [[unroll]] for (uint b = 0u; b < BLOCKS; b++) {
                sc[t][b] = next_sc[t][b];
                zr[t][b] = next_zr[t][b];
            }
        }
    }

    // K groups 1.. hand their sums to group 0, which adds them and writes y.
    if (KSPLIT > 1u) {
        if (kg > 0u) {
            [[unroll]] for (uint t = 0u; t < TILES; t++) {
                [[unroll]] for (uint h = 0u; h < NB; h++) {
                    [[unroll]] for (uint e = 0u; e < 4u; e++) {
                        uvec2 at = acc_place(rs, ts0, t, h, e, g4, c4);
                        if (X_F16 || e % 2u == 0u) {
                            red[((kg - 1u) * ROW_TILES * 16u + at.x) * TOKENS + at.y] = acc[t][h][e];
                        }
                    }
                }
            }
        }
        barrier();
        if (kg > 0u) {
            return;
        }
        [[unroll]] for (uint t = 0u; t < TILES; t++) {
            [[unroll]] for (uint h = 0u; h < NB; h++) {
                [[unroll]] for (uint e = 0u; e < 4u; e++) {
                    uvec2 at = acc_place(rs, ts0, t, h, e, g4, c4);
                    for (uint q = 1u; q < KSPLIT; q++) {
                        acc[t][h][e] += red[((q - 1u) * ROW_TILES * 16u + at.x) * TOKENS + at.y];
                    }
                }
            }
        }
    }

    [[unroll]] for (uint t = 0u; t < TILES; t++) {
        if (tile0 + t >= tiles) {
            continue;
        }
        [[unroll]] for (uint h = 0u; h < NB; h++) {
            [[unroll]] for (uint e = 0u; e < 4u; e++) {
                if (!X_F16 && e % 2u == 1u) {
                    continue;
                }
                uvec2 at = acc_place(rs, ts0, t, h, e, g4, c4);
                uint row = wg_tile0 * 16u + at.x;
                uint tok = tok0 + at.y;
                if (row < p.rows && tok < p.m) {
#ifdef K_SLICES
                    uint part = p.partials + gl_NumWorkGroups.z * p.m * p.row_base;
                    partials_out[part + (slice * p.m + tok) * p.rows + row] = acc[t][h][e];
#else
                    store_y(tok, row, acc[t][h][e]);
#endif
                }
            }
        }
    }
}
