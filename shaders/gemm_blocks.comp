#version 450
// GEMM on GGUF blocks kept in their native bytes (prefill: the m where the rules stop
// running the GEMV's passes): y[t][row] = sum_k x[t][k] w[row][k], w the value gguf-py's
// `dequantize` gives (Q4_K's, Q5_K's and Q6_K's `d·sc` products as it forms them; the
// offset types' w = s·q + o with one rounding). One build per block type (BLOCK_TYPE); no
// subgroup operations.
//
// The streams and the decode of a piece of 32 weights: `blocks_decode.glsl`. A workgroup
// owns a tile of TN = TX * RN rows by TM = TY * RM tokens (activation rows), as
// `gemm_q4.comp`'s. Per piece it decodes the tile's weights once into shared memory as f32
// (an invocation stages whole rows: one piece of one row each) and stages the tokens' 32
// inputs of that piece there, in the piece's order (its first run of 16, then its second);
// the words of the next piece and its inputs (8 neighbouring inputs of each of 4 tokens per
// 32 invocations) are loaded into registers while this one is multiplied. Every
// invocation accumulates its RN x RM outputs as outer products: rows and tokens in groups of
// four neighbours, the groups of neighbouring invocations side by side. Each piece's
// products are summed apart and then added to the f32 total. Workgroups are numbered tokens
// fastest, so the workgroups that read the same weight rows run together and find them in
// the L2. Where the tiles are too few to fill the device, the workgroup holds KSPLIT groups
// of TX * TY invocations (K groups) that take interleaved pieces of the same tile, each with
// its own shared tiles, and add their sums through shared memory at the end.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#define GEMM

#ifdef EXPORT
// The exported GEMM (`q4vk_kernel_export` with Q4VK_KERNEL_EXPORT_BLOCKS at m > 8,
// -DEXPORT): the bindings of the exported GEMV on blocks (`gemv_blocks.comp`: codes 0,
// scales 1, Q5_0's and Q5_1's fifth bits 2, then x, y, bias), the push block named
// `parameter` (m its eleventh word), the local size on 233..235 (unused: the kernel reads
// WORKGROUP). Own ids: WORKGROUP 0, TX 1, RN 2, RM 3, X_F16 4, Y_F16 5, HAS_BIAS 6; one K
// group.
layout(local_size_x_id = 233, local_size_y_id = 234, local_size_z_id = 235) in;
layout(constant_id = 0) const uint WORKGROUP = 64;              // TX * TY invocations
#else
layout(local_size_x_id = 0) in;                                 // TX * TY * KSPLIT invocations
#endif
layout(constant_id = 1) const uint TX = 8;                      // invocations along rows
layout(constant_id = 2) const uint RN = 8;                      // rows per invocation
layout(constant_id = 3) const uint RM = 4;                      // tokens per invocation
layout(constant_id = 4) const bool X_F16 = false;               // activations are f16 (else f32)
#ifdef EXPORT
const uint KSPLIT = 1u;
#define SPEC_Y_F16 5
layout(constant_id = 6) const bool EXPORT_HAS_BIAS = false;
#define XY_SET 0
#if BLOCK_TYPE == 0 || BLOCK_TYPE == 1
#define X_BINDING 3
#define Y_BINDING 4
#define EXPORT_BIAS_BINDING 5
#else
#define X_BINDING 2
#define Y_BINDING 3
#define EXPORT_BIAS_BINDING 4
#endif
#define EXPORT_Y_F16
#define EXPORT_BIAS
#define EXPORT_BIAS_SPECIALIZED
#define Push parameter
#else
// K groups per workgroup (the host keeps TM * (KSPLIT - 1) <= 32 * KSPLIT: their sums meet
// in tile_w).
layout(constant_id = 5) const uint KSPLIT = 1;
#define XY_SET 1
#define X_BINDING 0
#define Y_BINDING 1
#endif
#include "q4_common.glsl"
#include "blocks_decode.glsl"

#include "x_tokens.glsl"
#include "epilogue.glsl"

#ifndef EXPORT
const uint WORKGROUP = gl_WorkGroupSize.x;
#endif
const uint GROUP = WORKGROUP / KSPLIT; // invocations per K group
const uint TY = GROUP / TX;
const uint TN = TX * RN; // rows per workgroup
const uint TM = TY * RM; // tokens per workgroup

// Each invocation stages WS rows' piece and XS activations per piece of its K group.
const uint WS = (TN + GROUP - 1u) / GROUP;
const uint XS = (32u * TM + GROUP - 1u) / GROUP;
// Floats per staged input of tile_x: the tokens and 4 of padding, so that the stores of
// neighbouring invocations (`staged_input`) spread over the banks while every group of four
// tokens stays 16-byte aligned.
const uint XT = TM + 4u;

shared float tile_w[KSPLIT * 32 * TN]; // [K group][piece element][row]
shared float tile_x[KSPLIT * 32 * XT]; // [K group][piece element][token]

// Row i of the invocation's RN (token j of its RM): groups of four neighbours, one 16-byte
// shared load each, the groups of neighbouring invocations side by side.
uint own_row(uint tx, uint i) {
    return (i & 3u) + 4u * tx + 4u * TX * (i >> 2);
}
uint own_token(uint ty, uint j) {
    return (j & 3u) + 4u * ty + 4u * TY * (j >> 2);
}

// The input (of the piece's 32) and the token (of the tile's TM) of staged element e:
// every 32 neighbouring elements are 8 neighbouring inputs of 4 neighbouring tokens, so
// that a subgroup's loads read 32 bytes of each token and its stores into tile_x fall in
// 32 different banks.
uint staged_input(uint e) {
    return (e & 7u) + 8u * ((e >> 5) & 3u);
}
uint staged_token(uint e) {
    return ((e >> 3) & 3u) + 4u * (e >> 7);
}

// What an invocation stages of one piece, loaded a piece ahead of its decode: its rows'
// code words, fifth bits and scale words (`scale_words`), and its inputs.
uvec4 st_v[WS];
uvec4 st_v2[WS];
uint st_h[WS];
uvec4 st_s[WS];
uint st_d[WS];
float st_x[XS];

// The row of the tile's row r (rows past the part repeat its last row, whose outputs are
// not written).
uint tile_row(uint row0, uint r) {
    return min(row0 + r, p.rows - 1u);
}

// Loads piece c's share of invocation tid of a K group: the piece of rows tid, tid + GROUP,
// ... below TN, and the elements tid, tid + GROUP, ... of the tile's 32 inputs x TM tokens
// (`staged_input`, `staged_token`; tokens past m read as 0).
void load_piece(uint c, uint tid, uint row0, uint tok0) {
    uint blk = c / PIECES;
    uint piece = c % PIECES;
    [[unroll]] for (uint s = 0u; s < WS; s++) {
        uint r = tid + s * GROUP;
        if (r < TN) {
            uint gb = tile_row(row0, r) * p.groups + blk;
            st_v[s] = codes_of(0u, piece_word(gb, piece));
            st_v2[s] = SECOND_WORD ? codes_of(0u, piece_second_word(gb, piece)) : st_v[s];
            st_h[s] = block_high_bits(0u, gb);
            scale_words(0u, gb, piece, st_s[s], st_d[s]);
        }
    }
    uint ka;
    uint kb;
    piece_inputs(piece, ka, kb);
    ka += blk * BLOCK;
    kb += blk * BLOCK;
    [[unroll]] for (uint s = 0u; s < XS; s++) {
        uint e = tid + s * GROUP;
        uint n = staged_input(e);
        uint tok = tok0 + staged_token(e);
        uint k = n < 16u ? ka + n : kb + (n - 16u);
        st_x[s] = e < 32u * TM && tok < p.m ? x_at(tok, k) : 0.0;
    }
}

// Writes the loaded piece c into K group kg's tiles: its rows' weights decoded to f32,
// and its inputs in the piece's order (its first run of 16, then its second).
void store_piece(uint c, uint tid, uint kg, uint row0) {
    uint blk = c / PIECES;
    uint piece = c % PIECES;
    uint w0 = kg * 32u * TN;
    [[unroll]] for (uint s = 0u; s < WS; s++) {
        uint r = tid + s * GROUP;
        if (r < TN) {
            uint gb = tile_row(row0, r) * p.groups + blk;
            vec4 so = scales_from_words(st_s[s], st_d[s], gb, piece);
            [[unroll]] for (uint i = 0u; i < 4u; i++) {
                vec4 qa;
                vec4 qb;
                decode_quarter(piece, i, st_v[s][quarter_first(i)], st_v2[s][quarter_second(i)], st_h[s], qa, qb);
                [[unroll]] for (uint e = 0u; e < 4u; e++) {
                    tile_w[w0 + (4u * i + e) * TN + r] = fma(so.x, qa[e], so.y);
                    tile_w[w0 + (16u + 4u * i + e) * TN + r] = fma(so.z, qb[e], so.w);
                }
            }
        }
    }
    [[unroll]] for (uint s = 0u; s < XS; s++) {
        uint e = tid + s * GROUP;
        if (e < 32u * TM) {
            tile_x[kg * 32u * XT + staged_input(e) * XT + staged_token(e)] = st_x[s];
        }
    }
}

void main() {
    uint wg = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (wg >= p.wg_count) {
        return;
    }
    wg += p.wg_offset;
    uint token_tiles = (p.m + TM - 1u) / TM;
    uint row0 = (wg / token_tiles) * TN;
    uint tok0 = (wg % token_tiles) * TM;
    // K group: pieces kg, kg + KSPLIT, ... (spelled out for one group, so that its indices
    // fold to constants).
    uint kg = KSPLIT == 1u ? 0u : gl_LocalInvocationID.x / GROUP;
    uint tid = KSPLIT == 1u ? gl_LocalInvocationID.x : gl_LocalInvocationID.x % GROUP;
    uint tx = tid % TX;
    uint ty = tid / TX;

    float acc[RN * RM];
    [[unroll]] for (uint i = 0u; i < RN * RM; i++) {
        acc[i] = 0.0;
    }
    // p.chunks: pieces per row (k / 32); p.groups: blocks per row. Every K group runs the
    // same number of steps (barriers are workgroup-wide); a group past the last piece
    // stages a valid one and skips its products.
    uint steps = (p.chunks + KSPLIT - 1u) / KSPLIT;
    uint w0 = kg * 32u * TN;
    uint x0 = kg * 32u * XT;
    // The piece whose words the registers hold.
    uint loaded = min(kg, p.chunks - 1u);
    load_piece(loaded, tid, row0, tok0);
    for (uint s = 0u; s < steps; s++) {
        uint c = s * KSPLIT + kg;
        store_piece(loaded, tid, kg, row0);
        barrier();
        // The next piece's loads are in flight while this one is multiplied.
        if (c + KSPLIT < p.chunks) {
            loaded = c + KSPLIT;
            load_piece(loaded, tid, row0, tok0);
        }
        if (KSPLIT == 1u || c < p.chunks) {
            float part[RN * RM];
            [[unroll]] for (uint i = 0u; i < RN * RM; i++) {
                part[i] = 0.0;
            }
            [[unroll]] for (uint kk = 0u; kk < 32u; kk++) {
                float a[RN];
                float b[RM];
                [[unroll]] for (uint i = 0u; i < RN; i++) {
                    a[i] = tile_w[w0 + kk * TN + own_row(tx, i)];
                }
                [[unroll]] for (uint j = 0u; j < RM; j++) {
                    b[j] = tile_x[x0 + kk * XT + own_token(ty, j)];
                }
                [[unroll]] for (uint i = 0u; i < RN; i++) {
                    [[unroll]] for (uint j = 0u; j < RM; j++) {
                        part[i * RM + j] = fma(a[i], b[j], part[i * RM + j]);
                    }
                }
            }
            [[unroll]] for (uint i = 0u; i < RN * RM; i++) {
                acc[i] += part[i];
            }
        }
        barrier();
    }

    // K groups 1.. hand their sums to group 0 through tile_w (every group is past its last
    // read of the tiles: the loop ends with a barrier), which adds them and writes y.
    if (KSPLIT > 1u) {
        if (kg > 0u) {
            [[unroll]] for (uint i = 0u; i < RN; i++) {
                [[unroll]] for (uint j = 0u; j < RM; j++) {
                    uint at = own_row(tx, i) * TM + own_token(ty, j);
                    tile_w[(kg - 1u) * TN * TM + at] = acc[i * RM + j];
                }
            }
        }
        barrier();
        if (kg > 0u) {
            return;
        }
        for (uint q = 1u; q < KSPLIT; q++) {
            [[unroll]] for (uint i = 0u; i < RN; i++) {
                [[unroll]] for (uint j = 0u; j < RM; j++) {
                    uint at = own_row(tx, i) * TM + own_token(ty, j);
                    acc[i * RM + j] += tile_w[(q - 1u) * TN * TM + at];
                }
            }
        }
    }

    [[unroll]] for (uint i = 0u; i < RN; i++) {
        uint row = row0 + own_row(tx, i);
        [[unroll]] for (uint j = 0u; j < RM; j++) {
            uint tok = tok0 + own_token(ty, j);
            if (row < p.rows && tok < p.m) {
                store_y(tok, row, acc[i * RM + j]);
            }
        }
    }
}
