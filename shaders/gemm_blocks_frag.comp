#version 450
// Tensor-core GEMM (prefill) on GGUF blocks kept in their native bytes (`layout::blocks`),
// one build per block type (BLOCK_TYPE), with A's fragments built in registers from the
// blocks' code bytes: the structure of `gemm_q4_coop.comp` (x staged per stage of 128
// inputs as B in shared memory, the next stage's words and x loaded while a stage is
// multiplied, K groups) on the decode of `blocks_decode.glsl`. It assumes the fragment
// layout of NVIDIA's mma.m16n8k16 (`gemv_q4_coop.comp`'s header; checked by the probe at
// context creation, so it runs only where the tensor-core layout does) and subgroups of 32.
// Exact as the other tensor-core kernels:
//
//   y[t][row] = sum over stages c of 2^e[t][c] * sum over units u of c of
//               s[row][u] * sum_{k in u} a[row][k] x'[t][k]  +  sum over runs r of o[row][r] * sum_{k in r} x[t][k]
//
// * A run is 16 inputs with one scale and offset (a piece of 32 weights is two runs:
//   `piece_inputs`), so one k-step of 16 is one run. A (16 rows x 16 k) holds the codes of
//   a run as exact f16: invocation (g = lane / 4, c = lane % 4) takes inputs 2c, 2c + 1
//   (quarter c / 2 of the run) and 2c + 8, 2c + 9 (quarter 2 + c / 2) of rows g and g + 8,
//   from the 32-bit words of the piece's code words those quarters decode from; each pair
//   of code bytes goes into the mantissas of an f16 pair (1024 + byte) and one packed
//   subtraction takes 1024 and the code's bias off.
// * Q4_K and Q5_K fold their six-bit sub-block scales into A (at most 63 · 31, exact in
//   f16) and NVFP4 its UE4M3 run scales (at most six significant bits with its codes), so
//   their runs share the rest of the scale (d; 1) and a stage sums in one fragment (unit:
//   the stage); Q6_K, whose six-bit codes times its signed 8-bit scales exceed f16's exact
//   integers, sums each run in its own (unit: the run); every other type shares one scale
//   over a piece's two runs (unit: the piece).
// * B holds the stage's 128 inputs of the workgroup's tokens (staged as in
//   `gemm_q4_coop.comp`, `coop_staging.glsl`): f16 x its own column, f32 x scaled by the
//   power of two 2^-e that puts the stage's largest |x| in [2^14, 2^15) and split into two
//   exact f16 parts, columns 2t and 2t + 1; the runs' sums of x (types with offsets) in
//   f32 beside it.
// * Each unit's sums are scaled in f32 by s (and 2^e) into fp32 accumulators; types with
//   offsets add o · Σx per run once per stage.
//
// Work split as `gemm_q4_coop.comp` without x in fragments and K slices: a workgroup owns
// (SUBGROUPS / (KSPLIT TSPLIT)) x TILES row tiles (16 rows each) by TOKENS tokens; its
// subgroups form KSPLIT K groups taking interleaved stages, each staging its own B, and
// TSPLIT token groups. Workgroups are numbered tokens fastest. The host runs it where K is
// a multiple of 128 (a stage is 4 pieces: half a block of 256, two of 64 or four of 32).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require
#define GEMM
#define BYTE_TABLE
#define WORKGROUP gl_WorkGroupSize.x

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TILES = 2;         // row tiles of 16 rows per subgroup
layout(constant_id = 2) const uint TOKENS = 16;       // tokens per workgroup (a multiple of 8)
layout(constant_id = 3) const bool X_F16 = false;     // activations are f16 (else f32)
// Groups of subgroups splitting the stages (K) of the same rows (divides the subgroups).
layout(constant_id = 4) const uint KSPLIT = 1;
// Token groups: the subgroups of a K group split the workgroup's tokens this many ways.
layout(constant_id = 5) const uint TSPLIT = 1;

const uint SUBGROUPS = gl_WorkGroupSize.x / 32u;
const uint SG = SUBGROUPS / KSPLIT;     // subgroups per K group
const uint SGR = SG / TSPLIT;           // subgroups of a token group, each with its own row tiles
const uint ROW_TILES = SGR * TILES;     // row tiles per workgroup
const uint SG_TOKENS = TOKENS / TSPLIT; // tokens per token group
const uint PARTS = X_F16 ? 1u : 2u;     // columns of B per token
const uint COLS = PARTS * TOKENS;       // columns of a staged B row
const uint NB = PARTS * SG_TOKENS / 8u; // B matrices per k-step of a subgroup
const uint TPS = TOKENS / SG;           // tokens each subgroup stages (the host keeps it whole)

#include "q4_common.glsl"
// Push-constant fields as this kernel reads them: rows = rows of the part; chunks = pieces
// of 32 per row; groups = blocks per row; k = inputs per row (a multiple of 128); m =
// tokens.
#include "blocks_decode.glsl"
#include "x_parts.glsl"
#include "coop_fragments.glsl"
#include "coop_staging.glsl"
#define XY_SET 1
#define Y_BINDING 1
#include "epilogue.glsl"

// The codes stream as 32-bit words (an invocation reads the two of each code word that
// its quarters decode from).
layout(set = 0, binding = 0) readonly buffer Codes32 { uint q32[]; };

// Runs (k-steps) per unit summed in one fragment, and per stage.
const bool FOLDS = TYPE == T_Q4_K || TYPE == T_Q5_K || TYPE == T_NVFP4;
const uint UNIT = FOLDS ? 8u : TYPE == T_Q6_K ? 1u : 2u;
// Blocks whose scale words a stage reads per row: one per block it spans.
const uint SETS = PIECES >= 4u ? 1u : 4u / PIECES;
// What the byte code pairs have added before their 1024 comes off: the codes' bias, or
// 128 for codes kept as two's complement bytes (Q8_0's and the table values).
const float CODE_BIAS = TYPE == T_Q8_0 || LOOKED_UP ? 128.0
                      : TYPE == T_Q6_K ? 32.0 : TYPE == T_Q5_0 ? 16.0 : 0.0;

// One K group's staged B, the factors 2^e of the stage's tokens and (types with offsets)
// the sums of x over each run of 16 ([run][token]). Every array is a multiple of 16 bytes,
// so staged_b stays aligned for coopMatLoad.
shared uvec2 staged_b[KSPLIT][COLS * KPAD4];
shared float stage_factor[KSPLIT][TOKENS];
shared float run_sum[KSPLIT][HAS_MIN ? 8u * TOKENS : 4u];
// The sums of K groups 1.. for group 0 to add: [group - 1][row of the workgroup][token].
shared float red[KSPLIT == 1u ? 4u : (KSPLIT - 1u) * ROW_TILES * 16u * TOKENS];

// What an invocation loads of one row tile per stage, for its rows g (index 0) and g + 8:
// per piece the 32-bit words of its quarters c / 2 and 2 + c / 2 of the first code word
// (w1) and second (w2), the block's fifth bits (h), and per block spanned the scale words
// (`scale_words`).
struct StageWords {
    uint w1[2][4][2];
    uint w2[2][4][2];
    uint h[2][4];
    uvec4 s[2][SETS];
    uint d[2][SETS];
};

// Block and piece within it of piece pc (0..3) of stage `stage`.
uvec2 block_piece(uint stage, uint pc) {
    uint i = stage * 4u + pc;
    return uvec2(i / PIECES, i % PIECES);
}

// Row r (0: g, 1: g + 8) of row tile `tile` as a row of the part (rows past it repeat its
// last; their outputs are not written).
uint tile_row(uint tile, uint g4, uint r) {
    return min(tile * 16u + g4 + 8u * r, p.rows - 1u);
}

// This invocation's words of row tile `tile` at stage `stage`.
void load_stage(uint tile, uint stage, uint g4, uint c4, out StageWords sw) {
    uint quarter[2] = uint[2](c4 >> 1, 2u + (c4 >> 1));
    [[unroll]] for (uint r = 0u; r < 2u; r++) {
        uint row = tile_row(tile, g4, r);
        [[unroll]] for (uint pc = 0u; pc < 4u; pc++) {
            uvec2 bp = block_piece(stage, pc);
            uint gb = row * p.groups + bp.x;
            uint first = piece_word(gb, bp.y) * 4u;
            uint second = piece_second_word(gb, bp.y) * 4u;
            [[unroll]] for (uint i = 0u; i < 2u; i++) {
                sw.w1[r][pc][i] = q32[first + quarter_first(quarter[i])];
                sw.w2[r][pc][i] =
                    SECOND_QUARTER_WORD ? q32[second + quarter_second(quarter[i])] : 0u;
            }
            sw.h[r][pc] = block_high_bits(0u, gb);
        }
        [[unroll]] for (uint b = 0u; b < SETS; b++) {
            uvec2 bp = block_piece(stage, b * (4u / SETS));
            scale_words(0u, row * p.groups + bp.x, bp.y, sw.s[r][b], sw.d[r][b]);
        }
    }
}

// Two codes (byte pair `half_` of the four packed code bytes u) as an f16 pair, their bias
// off: each byte in the mantissa of 1024, then one packed subtraction.
f16vec2 code_pair(uint u, uint half_) {
    uint v = u >> (16u * half_);
    f16vec2 biased = unpackFloat2x16((v & 0xFFu) | ((v & 0xFF00u) << 8) | 0x64006400u);
    return biased - f16vec2(float16_t(1024.0 + CODE_BIAS));
}

// Quarter c of piece `piece`'s two runs as packed code bytes (ua, ub: byte i input 4c + i),
// unsigned before their bias or two's complement offset to unsigned.
void quarter_bytes(uint piece, uint c, uint w1, uint w2, uint h, out uint ua, out uint ub) {
    if (LOOKED_UP) {
        table_quarter_bytes(c, w1, w2, ua, ub);
    } else {
        quarter_code_bytes(piece, c, w1, w2, h, ua, ub);
    }
    if (LOOKED_UP || TYPE == T_Q8_0) {
        ua ^= 0x80808080u;
        ub ^= 0x80808080u;
    }
}

// The A fragments of piece pc's runs (a: its first, b: its second) for row tile t's words,
// with the factors A takes per row and run (fold[r]: run a's, run b's).
void piece_fragments(StageWords sw, uint stage, uint pc, uint c4, vec2 fold[2], out MatA fa,
                     out MatA fb) {
    uint piece = block_piece(stage, pc).y;
    uint half_ = c4 & 1u;
    uint quarter[2] = uint[2](c4 >> 1, 2u + (c4 >> 1));
    [[unroll]] for (uint r = 0u; r < 2u; r++) {
        [[unroll]] for (uint i = 0u; i < 2u; i++) {
            uint ua;
            uint ub;
            quarter_bytes(piece, quarter[i], sw.w1[r][pc][i], sw.w2[r][pc][i], sw.h[r][pc], ua, ub);
            f16vec2 pa = code_pair(ua, half_);
            f16vec2 pb = code_pair(ub, half_);
            if (FOLDS) {
                pa *= float16_t(fold[r].x);
                pb *= float16_t(fold[r].y);
            }
            // A element e: row g + 8 (e / 4), k 2c + e % 2 + 8 ((e / 2) % 2).
            uint e = 4u * r + 2u * i;
            fa[e] = pa.x;
            fa[e + 1u] = pa.y;
            fb[e] = pb.x;
            fb[e + 1u] = pb.y;
        }
    }
}

// Piece pc's scales and offsets (s_a, o_a, s_b, o_b) of row r of row tile `tile` at stage
// `stage`, the factors A takes out of them (`fold`: the runs' six-bit scales of Q4_K and
// Q5_K, NVFP4's run scales; else 1) removed.
vec4 piece_scales_of(StageWords sw, uint tile, uint stage, uint pc, uint g4, uint r,
                     out vec2 fold) {
    uvec2 bp = block_piece(stage, pc);
    uint gb = tile_row(tile, g4, r) * p.groups + bp.x;
    uint b = pc / (4u / SETS);
    fold = vec2(1.0);
    if (TYPE == T_Q4_K || TYPE == T_Q5_K) {
        uvec4 s = sw.s[r][b];
        vec2 dm = unpackHalf2x16(s.x);
        // Sub-blocks 2j, 2j + 1: pieces pc and pc ^ 1 share them (written so that the
        // compiler sees it and decodes them once).
        uvec2 sm = k_pair_scales_mins(s.yzw, 2u * (stage & 1u) + (pc >> 1));
        fold = byte_codes(sm.x, 0u, 0x3Fu, 0.0).xy;
        vec2 mn = byte_codes(sm.y, 0u, 0x3Fu, 0.0).xy;
        return vec4(dm.x, -(dm.y * mn.x), dm.x, -(dm.y * mn.y));
    }
    vec4 so = scales_from_words(sw.s[r][b], sw.d[r][b], gb, bp.y);
    if (TYPE == T_NVFP4) {
        fold = so.xz;
        return vec4(1.0, 0.0, 1.0, 0.0);
    }
    return so;
}

#include "coop_gemm_tiles.glsl"

// Stages this subgroup's tokens (loaded by load_x) as columns of K group kg's B, with the
// stage's factors and (types with offsets) the runs' sums of x.
void stage_b(uint kg, uint sub, uint lane, vec4 xv[TPS]) {
    [[unroll]] for (uint i = 0u; i < TPS; i++) {
        uint t = sub + SG * i;
        vec4 v = xv[i];
        float factor = 1.0;
        if (X_F16) {
            staged_b[kg][t * KPAD4 + lane] = pack4(f16vec4(v));
        } else {
            f16vec4 hi, lo;
            factor = split_block(v, 128u, hi, lo);
            uint at = 2u * t * KPAD4 + lane;
            staged_b[kg][at] = pack4(hi);
            staged_b[kg][at + KPAD4] = pack4(lo);
        }
        if (HAS_MIN) {
            float sum = block_total(v, 16u);
            if (lane % 4u == 0u) {
                run_sum[kg][(lane / 4u) * TOKENS + t] = sum;
            }
        }
        if (lane == 0u) {
            stage_factor[kg][t] = factor;
        }
    }
}

// The local k-step (0..7) of piece pc's runs within its stage.
uvec2 run_steps(uint pc) {
    uint ka;
    uint kb;
    piece_inputs(pc % PIECES, ka, kb);
    uint base = (pc / PIECES) * BLOCK;
    return uvec2(base + ka, base + kb) / 16u;
}

void main() {
    fill_byte_values(gl_LocalInvocationID.x);
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
    uint stages = p.k / 128u;
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
    uint steps = (stages + KSPLIT - 1u) / KSPLIT;
    uint first = min(kg, stages - 1u);
    vec4 xv[TPS];
    StageWords words[TILES];
    [[unroll]] for (uint t = 0u; t < TILES; t++) {
        load_stage(tile[t], first, g4, c4, words[t]);
    }
    load_x(sub, lane, first, tok0, xv);

    for (uint step = 0u; step < steps; step++) {
        uint stage = step * KSPLIT + kg;
        // The next stage's words and x, in flight while this one runs.
        uint next = min(stage + KSPLIT, stages - 1u);
        vec4 next_xv[TPS];
        StageWords next_words[TILES];
        [[unroll]] for (uint t = 0u; t < TILES; t++) {
            load_stage(tile[t], next, g4, c4, next_words[t]);
        }
        load_x(sub, lane, next, tok0, next_xv);
        barrier();
        stage_b(kg, sub, lane, xv);
        barrier();

        // Only K groups can run past the last stage (KSPLIT = 1 folds this away).
        if (KSPLIT == 1u || stage < stages) {
            // The stage's factors of this invocation's tokens (element [h][i]: f16 columns
            // token 8 h + 2 c4 + i; two parts token 4 h + c4, i = 0).
            float fx[NB][2];
            [[unroll]] for (uint h = 0u; h < NB; h++) {
                [[unroll]] for (uint i = 0u; i < 2u; i++) {
                    uint tk = ts0 + (X_F16 ? 8u * h + 2u * c4 + i : 4u * h + c4);
                    fx[h][i] = X_F16 ? 1.0 : stage_factor[kg][tk];
                }
            }
            // Per row tile and row: the scales each unit's sums take, the offsets of the
            // stage's runs (by k-step), and the factors A takes per piece.
            float unit_scale[TILES][2][8];
            float run_offset[TILES][2][8];
            vec2 fold[TILES][4][2];
            [[unroll]] for (uint t = 0u; t < TILES; t++) {
                [[unroll]] for (uint r = 0u; r < 2u; r++) {
                    [[unroll]] for (uint pc = 0u; pc < 4u; pc++) {
                        vec4 so = piece_scales_of(words[t], tile[t], stage, pc, g4, r, fold[t][pc][r]);
                        uvec2 js = run_steps(pc);
                        unit_scale[t][r][js.x] = so.x;
                        unit_scale[t][r][js.y] = so.z;
                        run_offset[t][r][js.x] = so.y;
                        run_offset[t][r][js.y] = so.w;
                    }
                }
            }

            MatC c[TILES][NB];
            [[unroll]] for (uint pc = 0u; pc < 4u; pc++) {
                uvec2 js = run_steps(pc);
                MatA fa[TILES];
                MatA fb[TILES];
                [[unroll]] for (uint t = 0u; t < TILES; t++) {
                    piece_fragments(words[t], stage, pc, c4, fold[t][pc], fa[t], fb[t]);
                }
                [[unroll]] for (uint run = 0u; run < 2u; run++) {
                    uint ks = run == 0u ? js.x : js.y;
                    // The unit's ordinal among the stage's (its first run opens it, its
                    // last closes it).
                    uint ordinal = 2u * pc + run;
                    MatB bm[NB];
                    [[unroll]] for (uint h = 0u; h < NB; h++) {
                        coopMatLoad(bm[h], staged_b[kg], 8u * (hb + h) * KPAD4 + ks * 4u,
                                    KPAD4, gl_CooperativeMatrixLayoutColumnMajor);
                    }
                    [[unroll]] for (uint t = 0u; t < TILES; t++) {
                        [[unroll]] for (uint h = 0u; h < NB; h++) {
                            if (ordinal % UNIT == 0u) {
                                c[t][h] = MatC(0.0);
                            }
                            c[t][h] = coopMatMulAdd(run == 0u ? fa[t] : fb[t], bm[h], c[t][h]);
                        }
                    }
                    if (ordinal % UNIT != UNIT - 1u) {
                        continue;
                    }
                    // The unit's sums into the totals, scaled as its last run says (the
                    // runs of a unit share the scale). The factor first: s · 2^e alone
                    // may fall below the normal range.
                    [[unroll]] for (uint t = 0u; t < TILES; t++) {
                        [[unroll]] for (uint h = 0u; h < NB; h++) {
                            [[unroll]] for (uint r = 0u; r < 2u; r++) {
                                float s = unit_scale[t][r][ks];
                                if (X_F16) {
                                    [[unroll]] for (uint i = 0u; i < 2u; i++) {
                                        uint e = 2u * r + i;
                                        acc[t][h][e] = fma(c[t][h][e], s, acc[t][h][e]);
                                    }
                                } else {
                                    float sum = c[t][h][2u * r] + c[t][h][2u * r + 1u];
                                    acc[t][h][2u * r] = fma(sum * fx[h][0], s, acc[t][h][2u * r]);
                                }
                            }
                        }
                    }
                }
            }
            // The runs' offsets times their sums of x.
            if (HAS_MIN) {
                [[unroll]] for (uint h = 0u; h < NB; h++) {
                    [[unroll]] for (uint i = 0u; i < (X_F16 ? 2u : 1u); i++) {
                        uint tk = ts0 + (X_F16 ? 8u * h + 2u * c4 + i : 4u * h + c4);
                        [[unroll]] for (uint ks = 0u; ks < 8u; ks++) {
                            float xs = run_sum[kg][ks * TOKENS + tk];
                            [[unroll]] for (uint t = 0u; t < TILES; t++) {
                                [[unroll]] for (uint r = 0u; r < 2u; r++) {
                                    uint e = 2u * r + i;
                                    acc[t][h][e] = fma(run_offset[t][r][ks], xs, acc[t][h][e]);
                                }
                            }
                        }
                    }
                }
            }
        }

        [[unroll]] for (uint i = 0u; i < TPS; i++) {
            xv[i] = next_xv[i];
        }
        [[unroll]] for (uint t = 0u; t < TILES; t++) {
            words[t] = next_words[t];
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
                    store_y(tok, row, acc[t][h][e]);
                }
            }
        }
    }
}
