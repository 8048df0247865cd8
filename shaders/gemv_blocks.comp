#version 450
// Fused GEMV on GGUF blocks kept in their native bytes (`layout::blocks`): y[m][row] =
// sum_k x[m][k] w[row][k], w the exact value gguf-py's `dequantize` gives. One build per
// block type (BLOCK_TYPE) and reduction variant (SUBGROUP or portable).
//
// The streams and the decode of a piece of 32 weights: `blocks_decode.glsl`.
// Invocations stride over a row's pieces (neighbours read neighbouring code words), ROWS
// rows each; for each piece they load its 32 inputs of every activation row once (X_HELD:
// M up to 4; else again per row), then per row decode its 32 codes once into floats that
// serve every activation row: y += s_a * sum(q_a x) + s_b * sum(q_b x) (+ o_a sum(x_a) +
// o_b sum(x_b) for the types with minima), q an integer (E2M1 values doubled, their scale
// halved) and s the block's f32 scale product as gguf-py forms it. With x held, UNROLL
// pieces per step: all their loads first, then their decodes. With WORD_LANES the
// invocations stride over quarters of pieces instead (a 32-bit word of codes: four inputs
// of each run), so that neighbouring invocations read neighbouring x; each holds its
// quarter's x of every activation row (8 values per row, M up to 8) and decodes its
// piece's scales itself. One reduction after the loop, as in `gemv_q4.comp`. Vulkan 1.0
// storage buffers and f32 arithmetic only; no 8/16-bit storage.
//
// DOT (with SUBGROUP; `Q4VK_GEMV_ROUND_X_TO_INT8` on devices with packed integer dot
// products): x arrives rounded to bytes by the pre-pass `x_digits.comp` built with BYTES and
// NATURAL, per chunk of 32 inputs a scale d and q = round(x / d) (|q| <= 127). Per piece and
// activation row an invocation loads each run's 16 bytes of q (one uvec4) and its chunk's
// d; per row it packs each run's 16 codes as bytes (the integer codes of the f32 decode, in
// input order; IQ4's and E2M1's values from a table of byte pairs the workgroup fills in
// shared memory) and takes 4 packed dot products per run: e = sum u q, an exact int32, and
// y += s d (e - bias sum q) (+ o d sum q for the types with minima), bias the code offset of
// Q5_0 (16) and Q6_K (32), sum q the run's (4 more dot products per activation row). Binding
// X holds, per activation row (x_stride uvec4 apart), 3 uvec4 per chunk: the bytes of
// inputs 0 .. 15, of 16 .. 31 (input 4t + i in byte i of word t), then (d's bits, sum of q,
// 0, 0). A chunk with an infinite or NaN element has d NaN. No word lanes; M up to 8.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#ifdef SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#ifdef DOT
#extension GL_EXT_spirv_intrinsics : require
// OpSDotKHR on packed 4 x 8-bit operands (PackedVectorFormat4x8Bit = 0).
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot4(int a, int b, spirv_literal int packed_format);
#endif

#ifdef EXPORT
// The exported GEMV (`q4vk_kernel_export` with Q4VK_KERNEL_EXPORT_BLOCKS, -DEXPORT): the
// conventions of `gemv_export.glsl` (ncnn's) with this kernel's own bindings and ids. One
// descriptor set: codes 0, scales 1, Q5_0's and Q5_1's fifth bits 2 (the other types leave
// the number out), then x, y and n f32 bias values (read where HAS_BIAS). Ids: ROWS 0, M 1,
// X_F16 2, WORKGROUP 3, X_HELD 4, WORD_LANES 5, Y_F16 6, HAS_BIAS 7, SUBGROUP_SIZE 8 (the
// subgroup variant; the portable one has none); the local size on 233..235, unused (the
// kernel reads WORKGROUP). One dispatch computes every activation row: M up to 8.
layout(local_size_x_id = 233, local_size_y_id = 234, local_size_z_id = 235) in;
layout(constant_id = 0) const uint ROWS = 2;
layout(constant_id = 1) const uint M = 1;
layout(constant_id = 2) const bool X_F16 = false;
layout(constant_id = 3) const uint WORKGROUP = 64;
layout(constant_id = 4) const bool X_HELD = true;
layout(constant_id = 5) const bool WORD_LANES = false;
const uint UNROLL = 1;
#define SPEC_Y_F16 6
layout(constant_id = 7) const bool EXPORT_HAS_BIAS = false;
#ifdef SUBGROUP
layout(constant_id = 8) const uint SUBGROUP_SIZE = 32;
#endif
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
layout(local_size_x_id = 0) in;
#define WORKGROUP gl_WorkGroupSize.x
layout(constant_id = 1) const uint ROWS = 2;                 // rows per workgroup
layout(constant_id = 2) const uint M = 1;                    // activation rows
layout(constant_id = 3) const bool X_F16 = false;            // activations are f16 (else f32)
layout(constant_id = 4) const uint SUBGROUP_SIZE = 32;       // the device's subgroup size
// Each invocation holds a piece's x of every activation row in registers for all its rows
// (32 floats per activation row; passes of up to 4 rows), else loads it again for each row.
layout(constant_id = 5) const bool X_HELD = true;
// Invocations stride over quarters of pieces (x always held) instead of whole pieces.
layout(constant_id = 6) const bool WORD_LANES = false;
// Pieces per step of each invocation where it strides over whole pieces with x held: every
// load of a step (the pieces' code and scale words of every row, their x) is issued before
// any piece is decoded, so that more of them are in flight at once.
layout(constant_id = 7) const uint UNROLL = 1;
#define XY_SET 1
#define X_BINDING 0
#define Y_BINDING 1
#endif
// Passes of M activation rows along workgroup z (`token_row`).
#define PASSES_ALONG_Z
#include "q4_common.glsl"
// IQ4's and E2M1's codes through a table of byte values in shared memory.
#define BYTE_TABLE
#include "blocks_decode.glsl"

#include "epilogue.glsl"
const uint MR = M * ROWS;

#ifdef DOT
layout(set = XY_SET, binding = X_BINDING) readonly buffer XBytes { uvec4 xd[]; };

// The offset subtracted from every code: Q5_0's 16 and Q6_K's 32 (else 0).
const int CODE_BIAS = TYPE == T_Q5_0 ? 16 : TYPE == T_Q6_K ? 32 : 0;
// Whether a run's sum of q enters its value (an offset or a code bias).
const bool NEEDS_QSUM = HAS_MIN || CODE_BIAS != 0;

// Quarter c (0..3) of piece `piece` as `decode_quarter` gives it, but as packed bytes: the
// codes of inputs 4c .. 4c + 3 of the first run (ua) and of the second (ub), unsigned before
// the code bias (below 64) or, for the signed types, two's complement.
void quarter_codes(uint piece, uint c, uint w1, uint w2, uint h, out uint ua, out uint ub) {
    if (LOOKED_UP) {
        table_quarter_bytes(c, w1, w2, ua, ub);
    } else {
        quarter_code_bytes(piece, c, w1, w2, h, ua, ub);
    }
}

// The sum of a run's 16 bytes of q.
int run_qsum(uvec4 xw) {
    int t = 0;
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        t += sdot4(int(xw[i]), 0x01010101, 0);
    }
    return t;
}

// The sum of u q over a run: its packed codes `u` against its bytes of q.
int run_dot_bytes(uvec4 u, uvec4 xw) {
    int t = 0;
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        t += sdot4(int(u[i]), int(xw[i]), 0);
    }
    return t;
}

// The K loop on x in bytes: invocation tid takes pieces tid, tid + WORKGROUP, .. of each row.
void dot_pieces(uint mat, uint row0, uint tid, inout float acc[MR]) {
    uint last_row = p.rows - 1u;
    for (uint c = tid; c < p.chunks; c += WORKGROUP) {
        uint blk = c / PIECES;
        uint piece = c % PIECES;
        uint ka;
        uint kb;
        piece_inputs(piece, ka, kb);
        ka += blk * BLOCK;
        kb += blk * BLOCK;
        // Each run's bytes of q, its chunk's d, and its sum of q, per activation row.
        uvec4 xa[M];
        uvec4 xb[M];
        vec2 d[M];
        ivec2 qsum[M];
        [[unroll]] for (uint mi = 0u; mi < M; mi++) {
            uint base = token_row(mi) * p.x_stride;
            uint ca = base + 3u * (ka >> 5);
            uint cb = base + 3u * (kb >> 5);
            xa[mi] = xd[ca + ((ka >> 4) & 1u)];
            xb[mi] = xd[cb + ((kb >> 4) & 1u)];
            d[mi] = vec2(uintBitsToFloat(xd[ca + 2u].x), uintBitsToFloat(xd[cb + 2u].x));
            qsum[mi] = NEEDS_QSUM ? ivec2(run_qsum(xa[mi]), run_qsum(xb[mi])) : ivec2(0);
        }
        [[unroll]] for (uint r = 0u; r < ROWS; r++) {
            uint gb = min(row0 + r, last_row) * p.groups + blk;
            uvec4 v = codes_of(mat, piece_word(gb, piece));
            uvec4 v2 = SECOND_WORD ? codes_of(mat, piece_second_word(gb, piece)) : v;
            uint h = block_high_bits(mat, gb);
            uvec4 ua;
            uvec4 ub;
            [[unroll]] for (uint i = 0u; i < 4u; i++) {
                quarter_codes(piece, i, v[quarter_first(i)], v2[quarter_second(i)], h, ua[i], ub[i]);
            }
            vec4 so = piece_scales(mat, gb, piece);
            [[unroll]] for (uint mi = 0u; mi < M; mi++) {
                // |e| <= 16 * 128 * 127 + 32 * 16 * 127: exact, converted once.
                int ea = run_dot_bytes(ua, xa[mi]) - CODE_BIAS * qsum[mi].x;
                int eb = run_dot_bytes(ub, xb[mi]) - CODE_BIAS * qsum[mi].y;
                float t = acc[mi * ROWS + r];
                t = fma(so.x, float(ea) * d[mi].x, t);
                t = fma(so.z, float(eb) * d[mi].y, t);
                if (HAS_MIN) {
                    t = fma(so.y, float(qsum[mi].x) * d[mi].x, t);
                    t = fma(so.w, float(qsum[mi].y) * d[mi].y, t);
                }
                acc[mi * ROWS + r] = t;
            }
        }
    }
}
#else
layout(set = XY_SET, binding = X_BINDING) readonly buffer X4 { vec4 x4[]; };
layout(set = XY_SET, binding = X_BINDING) readonly buffer X1 { float x1[]; };
layout(set = XY_SET, binding = X_BINDING) readonly buffer XH { uint xh[]; };
// The codes as 32-bit words (word lanes).
layout(set = 0, binding = 0) coherent readonly buffer CodeWords { uint q_words[]; };
#ifdef PAIR
layout(set = 2, binding = 0) coherent readonly buffer CodeWords2 { uint q_words2[]; };
#endif

// Word i of matrix `mat`'s codes (`codes_of`).
PAIR_STREAM(uint, code_word_of, q_words, q_words2)

// The 4 activations k0 .. k0 + 3 (k0 a multiple of 4) of activation row mi.
vec4 load_quad(uint mi, uint k0) {
    uint row_start = token_row(mi) * p.x_stride;
    if ((row_start & 3u) == 0u) {
        if (X_F16) {
            uint base = (row_start + k0) >> 1;
            return vec4(unpackHalf2x16(xh[base]), unpackHalf2x16(xh[base + 1u]));
        }
        return x4[(row_start + k0) >> 2];
    }
    vec4 v;
    [[unroll]] for (uint e = 0u; e < 4u; e++) {
        uint at = row_start + k0 + e;
        if (X_F16) {
            vec2 pair = unpackHalf2x16(xh[at >> 1]);
            v[e] = (at & 1u) == 0u ? pair.x : pair.y;
        } else {
            v[e] = x1[at];
        }
    }
    return v;
}

// The 16 activations k0 .. k0 + 15 of activation row mi.
void load_run(uint mi, uint k0, out vec4 xv[4]) {
    uint row_start = token_row(mi) * p.x_stride;
    if ((row_start & 3u) == 0u) {
        if (X_F16) {
            uint base = (row_start + k0) >> 1;
            [[unroll]] for (uint i = 0u; i < 4u; i++) {
                xv[i] = vec4(unpackHalf2x16(xh[base + 2u * i]), unpackHalf2x16(xh[base + 2u * i + 1u]));
            }
        } else {
            uint base = (row_start + k0) >> 2;
            [[unroll]] for (uint i = 0u; i < 4u; i++) {
                xv[i] = x4[base + i];
            }
        }
        return;
    }
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        [[unroll]] for (uint e = 0u; e < 4u; e++) {
            uint at = row_start + k0 + 4u * i + e;
            if (X_F16) {
                vec2 pair = unpackHalf2x16(xh[at >> 1]);
                xv[i][e] = (at & 1u) == 0u ? pair.x : pair.y;
            } else {
                xv[i][e] = x1[at];
            }
        }
    }
}

// sum q x over a run, as an FMA chain.
float run_dot(vec4 qv[4], vec4 xv[4]) {
    float t = 0.0;
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        t = fma(qv[i].x, xv[i].x, t);
        t = fma(qv[i].y, xv[i].y, t);
        t = fma(qv[i].z, xv[i].z, t);
        t = fma(qv[i].w, xv[i].w, t);
    }
    return t;
}

// sum x over a run.
float run_sum(vec4 xv[4]) {
    vec4 t = (xv[0] + xv[1]) + (xv[2] + xv[3]);
    return (t.x + t.y) + (t.z + t.w);
}

// The K loop with WORD_LANES: invocation tid takes quarters tid, tid + WORKGROUP, .. of
// each row's pieces.
void word_lanes(uint mat, uint row0, uint tid, inout float acc[MR]) {
    uint last_row = p.rows - 1u;
    uint quarters = p.chunks * 4u;
    for (uint wi = tid; wi < quarters; wi += WORKGROUP) {
        uint c = wi >> 2;
        uint quarter = wi & 3u;
        uint blk = c / PIECES;
        uint piece = c % PIECES;
        uint ka;
        uint kb;
        piece_inputs(piece, ka, kb);
        ka += blk * BLOCK + 4u * quarter;
        kb += blk * BLOCK + 4u * quarter;
        vec4 xa[M];
        vec4 xb[M];
        vec2 xsum[M];
        [[unroll]] for (uint mi = 0u; mi < M; mi++) {
            xa[mi] = load_quad(mi, ka);
            xb[mi] = load_quad(mi, kb);
            xsum[mi] = HAS_MIN ? vec2(dot(xa[mi], vec4(1.0)), dot(xb[mi], vec4(1.0))) : vec2(0.0);
        }
        [[unroll]] for (uint r = 0u; r < ROWS; r++) {
            uint gb = min(row0 + r, last_row) * p.groups + blk;
            uint w1 = code_word_of(mat, 4u * piece_word(gb, piece) + quarter_first(quarter));
            uint w2 = SECOND_QUARTER_WORD
                ? code_word_of(mat, 4u * piece_second_word(gb, piece) + quarter_second(quarter))
                : w1;
            vec4 qa;
            vec4 qb;
            decode_quarter(piece, quarter, w1, w2, block_high_bits(mat, gb), qa, qb);
            vec4 so = piece_scales(mat, gb, piece);
            [[unroll]] for (uint mi = 0u; mi < M; mi++) {
                float t = acc[mi * ROWS + r];
                t = fma(so.x, dot(qa, xa[mi]), t);
                t = fma(so.z, dot(qb, xb[mi]), t);
                if (HAS_MIN) {
                    t = fma(so.y, xsum[mi].x, t);
                    t = fma(so.w, xsum[mi].y, t);
                }
                acc[mi * ROWS + r] = t;
            }
        }
    }
}
#endif
// A piece loads its x once for all its rows (32 registers per activation row): the rules
// run this kernel in passes of at most 4 activation rows (`vk::pipeline::BLOCKS_MAX_M`);
// with WORD_LANES an invocation holds 8 values per activation row, for passes of up to 8.
#ifdef SUBGROUP
shared float red[(WORKGROUP / SUBGROUP_SIZE) * MR];
#else
shared float red[WORKGROUP * MR];
#endif

#ifndef DOT
// What a step loads of one piece of one row before decoding it: its code words (the
// second: `piece_second_word`), its block's fifth bits and its scale words (`scale_words`).
struct PieceWords {
    uvec4 v;
    uvec4 v2;
    uint h;
    uvec4 s;
    uint d;
};

// Piece `piece` of block gb of matrix `mat`: its words, loaded and not yet used.
PieceWords load_piece(uint mat, uint gb, uint piece) {
    PieceWords w;
    w.v = codes_of(mat, piece_word(gb, piece));
    w.v2 = SECOND_WORD ? codes_of(mat, piece_second_word(gb, piece)) : w.v;
    w.h = block_high_bits(mat, gb);
    scale_words(mat, gb, piece, w.s, w.d);
    return w;
}

// Pieces per step: UNROLL where x is held.
const uint U = X_HELD ? UNROLL : 1u;

// The K loop over pieces: invocation tid takes pieces tid, tid + WORKGROUP, .. of each row
// of matrix `mat`, U of them per step where x is held (a step's pieces past the last
// load the last one again and drop their products).
void piece_steps(uint mat, uint row0, uint tid, inout float acc[MR]) {
    uint last_row = p.rows - 1u;
    for (uint c0 = tid; c0 < p.chunks; c0 += U * WORKGROUP) {
        uint ka[U];
        uint kb[U];
        vec4 held[U][8u * M];
        PieceWords words[U][ROWS];
        [[unroll]] for (uint u = 0u; u < U; u++) {
            uint c = min(c0 + u * WORKGROUP, p.chunks - 1u);
            uint blk = c / PIECES;
            uint piece = c % PIECES;
            piece_inputs(piece, ka[u], kb[u]);
            ka[u] += blk * BLOCK;
            kb[u] += blk * BLOCK;
            [[unroll]] for (uint r = 0u; r < ROWS; r++) {
                uint row = min(row0 + r, last_row);
                words[u][r] = load_piece(mat, row * p.groups + blk, piece);
            }
            if (X_HELD) {
                [[unroll]] for (uint mi = 0u; mi < M; mi++) {
                    vec4 xa[4];
                    vec4 xb[4];
                    load_run(mi, ka[u], xa);
                    load_run(mi, kb[u], xb);
                    [[unroll]] for (uint i = 0u; i < 4u; i++) {
                        held[u][8u * mi + i] = xa[i];
                        held[u][8u * mi + 4u + i] = xb[i];
                    }
                }
            }
        }
        [[unroll]] for (uint u = 0u; u < U; u++) {
            uint c = c0 + u * WORKGROUP;
            if (c >= p.chunks) {
                continue;
            }
            uint blk = c / PIECES;
            uint piece = c % PIECES;
            // The runs' sums of x (for the types with minima), once for all rows where x is
            // held.
            vec2 xsum[M];
            [[unroll]] for (uint mi = 0u; mi < M; mi++) {
                xsum[mi] = vec2(0.0);
                if (HAS_MIN && X_HELD) {
                    vec4 xa[4];
                    vec4 xb[4];
                    [[unroll]] for (uint i = 0u; i < 4u; i++) {
                        xa[i] = held[u][8u * mi + i];
                        xb[i] = held[u][8u * mi + 4u + i];
                    }
                    xsum[mi] = vec2(run_sum(xa), run_sum(xb));
                }
            }
            [[unroll]] for (uint r = 0u; r < ROWS; r++) {
                uint gb = min(row0 + r, last_row) * p.groups + blk;
                PieceWords w = words[u][r];
                vec4 qa[4];
                vec4 qb[4];
                [[unroll]] for (uint q = 0u; q < 4u; q++) {
                    decode_quarter(piece, q, w.v[quarter_first(q)], w.v2[quarter_second(q)], w.h, qa[q], qb[q]);
                }
                vec4 so = scales_from_words(w.s, w.d, gb, piece);
                [[unroll]] for (uint mi = 0u; mi < M; mi++) {
                    vec4 xa[4];
                    vec4 xb[4];
                    if (X_HELD) {
                        [[unroll]] for (uint i = 0u; i < 4u; i++) {
                            xa[i] = held[u][8u * mi + i];
                            xb[i] = held[u][8u * mi + 4u + i];
                        }
                    } else {
                        load_run(mi, ka[u], xa);
                        load_run(mi, kb[u], xb);
                    }
                    float t = acc[mi * ROWS + r];
                    t = fma(so.x, run_dot(qa, xa), t);
                    t = fma(so.z, run_dot(qb, xb), t);
                    if (HAS_MIN) {
                        vec2 sums = X_HELD ? xsum[mi] : vec2(run_sum(xa), run_sum(xb));
                        t = fma(so.y, sums.x, t);
                        t = fma(so.w, sums.y, t);
                    }
                    acc[mi * ROWS + r] = t;
                }
            }
        }
    }
}
#endif

// Matrix `mat`'s share of this invocation's sums of rows row0 .., into `acc`.
void k_loop(uint mat, uint row0, uint tid, inout float acc[MR]) {
    [[unroll]] for (uint i = 0u; i < MR; i++) {
        acc[i] = 0.0;
    }
#ifdef DOT
    dot_pieces(mat, row0, tid, acc);
#else
    if (WORD_LANES) {
        word_lanes(mat, row0, tid, acc);
        return;
    }
    piece_steps(mat, row0, tid, acc);
#endif
}

#ifdef PAIR
#if !defined(SUBGROUP) || defined(EXPORT)
#error "the gate+up pair is a build of the subgroup GEMV"
#endif
// The gate's sums of the workgroup's outputs (i = mi ROWS + r), reduced before up's loop
// so that it has the accumulators' registers to itself.
shared float gate_sums[MR];

// Reduces gate's `acc` over the workgroup into `gate_sums` (in the order the reduction of
// a call of gate alone adds them: the same bits).
void park_gate_sums(float acc[MR], uint tid) {
    [[unroll]] for (uint i = 0u; i < MR; i++) {
        float v = subgroupAdd(acc[i]);
        if (subgroupElect()) {
            red[gl_SubgroupID * MR + i] = v;
        }
    }
    barrier();
    for (uint i = tid; i < MR; i += WORKGROUP) {
        float v = 0.0;
        for (uint sg = 0u; sg < gl_NumSubgroups; sg++) {
            v += red[sg * MR + i];
        }
        gate_sums[i] = v;
    }
    barrier();
}
#endif

// Stores output i (row `row` of activation row `tok`) of the workgroup: v (with PAIR, up's
// sum beside the gate's parked one).
void store_result(uint i, uint tok, uint row, float v) {
#ifdef PAIR
    store_pair(tok, row, gate_sums[i], v);
#else
    store_y(tok, row, v);
#endif
}

void main() {
    uint wg = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (wg >= p.wg_count) {
        return;
    }
    uint row0 = (p.wg_offset + wg) * ROWS;
    uint tid = gl_LocalInvocationID.x;

    // p.chunks: pieces per row (k / 32); p.groups: blocks per row.
    fill_byte_values(tid);
    float acc[MR];
    k_loop(0u, row0, tid, acc);
#ifdef PAIR
    // Gate's sums parked in shared memory; then the second matrix (up) on the same rows,
    // for y = act(gate) · up.
    park_gate_sums(acc, tid);
    k_loop(1u, row0, tid, acc);
#endif

#ifdef SUBGROUP
    if (gl_NumSubgroups == 1u) {
        [[unroll]] for (uint i = 0u; i < MR; i++) {
            float v = subgroupAdd(acc[i]);
            uint row = row0 + i % ROWS;
            if (subgroupElect() && row < p.rows) {
                store_result(i, token_row(i / ROWS), row, v);
            }
        }
        return;
    }
    [[unroll]] for (uint i = 0u; i < MR; i++) {
        float v = subgroupAdd(acc[i]);
        if (subgroupElect()) {
            red[gl_SubgroupID * MR + i] = v;
        }
    }
    barrier();
    for (uint i = tid; i < MR; i += WORKGROUP) {
        float v = 0.0;
        for (uint sg = 0u; sg < gl_NumSubgroups; sg++) {
            v += red[sg * MR + i];
        }
        uint row = row0 + i % ROWS;
        if (row < p.rows) {
            store_result(i, token_row(i / ROWS), row, v);
        }
    }
#else
    [[unroll]] for (uint i = 0u; i < MR; i++) {
        red[tid * MR + i] = acc[i];
    }
    barrier();
    for (uint half_size = WORKGROUP / 2u; half_size > 0u; half_size >>= 1) {
        if (tid < half_size) {
            [[unroll]] for (uint i = 0u; i < MR; i++) {
                red[tid * MR + i] += red[(tid + half_size) * MR + i];
            }
        }
        barrier();
    }
    for (uint i = tid; i < MR; i += WORKGROUP) {
        uint row = row0 + i % ROWS;
        if (row < p.rows) {
            store_y(token_row(i / ROWS), row, red[i]);
        }
    }
#endif
}
