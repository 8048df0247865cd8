// x as the integer dot-product GEMVs read it (`gemv_q4.comp` and `gemv_blocks.comp` built
// with DOT): in binding X as the pre-pass `x_digits.comp` wrote it into the workspace, or,
// with X_HERE_CHUNKS set (x rounded to bytes only), rounded by the workgroup itself from x
// in binding X into shared memory before its K loop, in the same layout and with the same
// bits (`x_round.glsl`): no pre-pass dispatch, no barrier between two dispatches and no
// workspace, at the cost of every workgroup rounding the x of its pass.
//
// The including shader defines XY_SET, X_BINDING, SPEC_X_HERE_CHUNKS, M, WORKGROUP, X_F16
// (f16 x), X_NATURAL (columns in input order, `x_digits.comp`'s NATURAL), X_HERE_GATHERS
// (columns are inputs out of order) and `uint x_here_input(uint kk)` (the input of column
// kk), and includes q4_common.glsl first.
#include "x_round.glsl"

layout(set = XY_SET, binding = X_BINDING) readonly buffer XD { uvec4 xd[]; };
layout(set = XY_SET, binding = X_BINDING) readonly buffer XD2 { uvec2 xd2[]; };
// Binding X as x itself (f32 bits, or two f16 per word), where the workgroup rounds it.
layout(set = XY_SET, binding = X_BINDING) readonly buffer XRaw { uint x_raw[]; };
layout(set = XY_SET, binding = X_BINDING) readonly buffer XRaw4 { uvec4 x_raw4[]; };

// Chunks of 32 columns per activation row that the workgroup rounds itself (the matrix's;
// 0: x arrives in the workspace).
layout(constant_id = SPEC_X_HERE_CHUNKS) const uint X_HERE_CHUNKS = 0;
const bool X_HERE = X_HERE_CHUNKS != 0u;
// The pass's x in bytes, 3 uvec4 per chunk as in the workspace (one spare uvec4 keeps the
// array non-empty where the workspace holds x).
shared uvec4 x_here[3u * X_HERE_CHUNKS * M + 1u];

// The f32 bits of element i of binding X (f32 as stored; f16 widened exactly).
uint x_raw_bits(uint i) {
    if (X_F16) {
        vec2 pair = unpackHalf2x16(x_raw[i >> 1]);
        return floatBitsToUint((i & 1u) == 0u ? pair.x : pair.y);
    }
    return x_raw[i];
}

// The f32 bits of the 32 columns of chunk c of the x row starting at element row_start (0
// past K): 16-byte loads where the chunk is whole and aligned in input order.
void load_chunk_bits(uint row_start, uint c, out uint bits[32]) {
    uint k0 = 32u * c;
    uint first = row_start + k0;
    bool whole = k0 + 32u <= p.k && !X_HERE_GATHERS;
    if (!X_F16 && whole && (first & 3u) == 0u) {
        [[unroll]] for (uint v = 0u; v < 8u; v++) {
            uvec4 w = x_raw4[(first >> 2) + v];
            [[unroll]] for (uint e = 0u; e < 4u; e++) {
                bits[4u * v + e] = w[e];
            }
        }
        return;
    }
    if (X_F16 && whole && (first & 7u) == 0u) {
        [[unroll]] for (uint v = 0u; v < 4u; v++) {
            uvec4 w = x_raw4[(first >> 3) + v];
            [[unroll]] for (uint e = 0u; e < 4u; e++) {
                vec2 pair = unpackHalf2x16(w[e]);
                bits[8u * v + 2u * e] = floatBitsToUint(pair.x);
                bits[8u * v + 2u * e + 1u] = floatBitsToUint(pair.y);
            }
        }
        return;
    }
    [[unroll]] for (uint t = 0u; t < 32u; t++) {
        uint kk = k0 + t;
        bits[t] = kk < p.k ? x_raw_bits(row_start + x_here_input(kk)) : 0u;
    }
}

// X_HERE: the workgroup rounds the x of its pass (M rows of X_HERE_CHUNKS chunks) into
// `x_here`, one chunk per invocation at a time, then waits for all of it.
void round_x_here(uint tid) {
    for (uint i = tid; i < M * X_HERE_CHUNKS; i += WORKGROUP) {
        uint mi = i / X_HERE_CHUNKS;
        uint c = i - mi * X_HERE_CHUNKS;
        uint bits[32];
        load_chunk_bits(token_row(mi) * p.x_stride, c, bits);
        uint largest = 0u;
        [[unroll]] for (uint t = 0u; t < 32u; t++) {
            largest = max(largest, bits[t] & 0x7FFFFFFFu);
        }
        ChunkScaling s = chunk_scaling(largest, true);
        int total = 0;
        uvec2 words[4];
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            uint word[8];
            [[unroll]] for (uint e = 0u; e < 8u; e++) {
                word[e] = bits[8u * j + e];
            }
            words[j] = word_bytes(word, s, X_NATURAL, total);
        }
        x_here[3u * i] = uvec4(words[0], words[1]);
        x_here[3u * i + 1u] = uvec4(words[2], words[3]);
        x_here[3u * i + 2u] = uvec4(floatBitsToUint(chunk_byte_scale(largest)), uint(total), 0u, 0u);
    }
    barrier();
}

// Where chunk c of activation row mi of the pass starts among x's uvec4: in the workspace
// (rows x_stride uvec4 apart), or in `x_here`. Chunk sizes: 3 uvec4 in bytes, 7 in digits.
uint x_chunk_at(uint mi, uint c, uint vectors) {
    return X_HERE ? 3u * (mi * X_HERE_CHUNKS + c) : token_row(mi) * p.x_stride + vectors * c;
}

// The uvec4 `at` of x in bytes or digits (`x_chunk_at`).
uvec4 x_vec(uint at) {
    return X_HERE ? x_here[at] : xd[at];
}

// The uvec2 `at2` (half of uvec4 at2 / 2) of x in bytes or digits.
uvec2 x_pair(uint at2) {
    if (X_HERE) {
        uvec4 v = x_here[at2 >> 1];
        return (at2 & 1u) == 0u ? v.xy : v.zw;
    }
    return xd2[at2];
}
