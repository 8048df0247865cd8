#version 450
// Fused int4-dequant GEMM for m > 8 (prefill) on the SIMT layout: y[t][row] = sum_k x[t][k] w,
// w = s * (u - z) (or s * u + b for matrices with per-group offsets).
//
// A workgroup owns a tile of TN = TX * RN rows by TM = TY * RM tokens (activation rows). Per
// 32-k chunk it dequantizes the tile's weights once into shared memory (exact f32 s * (u - z);
// an invocation stages whole rows: one 16-byte chunk, one scale and zero point each) and
// stages the tokens' 32 activations there (tokens fastest, so the stores of neighbouring
// invocations fall in different banks). The next chunk's codes, factors and activations are
// loaded into registers while the current one is multiplied. Every invocation accumulates
// its RN x RM outputs as outer products: rows and tokens in groups of four neighbours (one
// 16-byte shared load each; RN and RM are multiples of 4), the groups of neighbouring
// invocations side by side. Each chunk's products are summed apart and then added to the
// fp32 total (shorter f32 chains than one sum over K). Workgroups are numbered tokens
// fastest, so the workgroups that read the same weight rows run together and find them in
// the L2. Where the tiles are too few to fill the device, the workgroup holds KSPLIT groups of
// TX * TY invocations (K groups) that take interleaved chunks of the same tile, each with its
// own shared tiles, and add their sums through shared memory at the end. No subgroup
// operations: one SPIR-V for every device.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#define GEMM

#ifdef EXPORT
// The exported GEMM (`q4vk_kernel_export` at m > 8, compiled with -DEXPORT [-DEXTENDED]):
// the bindings, push block name and local-size ids of the exported GEMV
// (`gemv_export.glsl`: set 0 = weights 0, scales 1, zeros 2, x 3, y 4, and with EXTENDED
// offsets 5, column order 6; the block type named `parameter`; the local size on 233..235,
// which a host may rewrite). The own constants keep this kernel's ids 0..6 (0..9 with
// EXTENDED, f16 y on 9), WORKGROUP on id 0 as a plain constant that must equal
// local_size_x.
layout(local_size_x_id = 233, local_size_y_id = 234, local_size_z_id = 235) in;
layout(constant_id = 0) const uint WORKGROUP = 64;             // TX * TY invocations
#define XY_SET 0
#define X_BINDING 3
#define Y_BINDING 4
#define Push parameter
#ifdef EXTENDED
#define OFFSETS_BINDING 5
#define K_ORDER_BINDING 6
// f16 y (the extended export only).
#define SPEC_Y_F16 9
#endif
#else
layout(local_size_x_id = 0) in;                                // TX * TY * KSPLIT invocations
#define K_ORDER_BINDING 3
#endif
layout(constant_id = 1) const uint TX = 8;                      // invocations along rows
layout(constant_id = 2) const uint RN = 4;                      // rows per invocation
layout(constant_id = 3) const uint RM = 4;                      // tokens per invocation
layout(constant_id = 4) const bool HAS_ZEROS = false;           // per-group zero points (else 8)
layout(constant_id = 5) const bool SCALE_F32 = false;           // scales stored as f32 (else f16)
layout(constant_id = 6) const bool X_F16 = false;               // activations are f16 (else f32)
#if defined(EXPORT) && !defined(EXTENDED)
const bool HAS_OFFSETS = false;
const bool HAS_K_ORDER = false;
#else
// Per-group f32 offsets in binding 2 (EXTENDED export: 5) (w = s·u + b, no zero point: GGUF
// Q4_1 / Q4_K).
layout(constant_id = 7) const bool HAS_OFFSETS = false;
// Column k of the matrix holds input k_order[k] (binding K_ORDER_BINDING; GPTQ act-order):
// x is gathered.
layout(constant_id = 8) const bool HAS_K_ORDER = false;
layout(set = 0, binding = K_ORDER_BINDING) readonly buffer KOrder { uint k_order[]; };
#endif
#ifdef EXPORT
const uint KSPLIT = 1u;
#else
// K groups per workgroup (the host keeps TM * (KSPLIT - 1) <= 32 * KSPLIT: their sums meet
// in tile_w).
layout(constant_id = 9) const uint KSPLIT = 1;
#endif
#ifndef EXPORT
#define XY_SET 1
#define X_BINDING 0
#define Y_BINDING 1
#endif

#include "q4_common.glsl"
#include "q4_simt.glsl"

#ifndef EXPORT
const uint WORKGROUP = gl_WorkGroupSize.x;
#endif
const uint GROUP = WORKGROUP / KSPLIT; // invocations per K group
const uint TY = GROUP / TX;
const uint TN = TX * RN; // rows per workgroup
const uint TM = TY * RM; // tokens per workgroup

// Each invocation stages WS rows' chunk (one uvec4 of codes, the scale and zero point or
// offset) and XS activations per 32-k chunk of its K group.
const uint WS = (TN + GROUP - 1u) / GROUP;
const uint XS = (32u * TM + GROUP - 1u) / GROUP;

shared float tile_w[KSPLIT * 32 * TN]; // [K group][k][row]
shared float tile_x[KSPLIT * 32 * TM]; // [K group][k][token]

// Row i of the invocation's RN (token j of its RM): groups of four neighbours, one 16-byte
// shared load each, the groups of neighbouring invocations side by side.
uint own_row(uint tx, uint i) {
    return (i & 3u) + 4u * tx + 4u * TX * (i >> 2);
}
uint own_token(uint ty, uint j) {
    return (j & 3u) + 4u * ty + 4u * TY * (j >> 2);
}

// What an invocation stages of one chunk, loaded a chunk ahead.
uvec4 st_codes[WS];
float st_scale[WS];
float st_zero[WS]; // the offset, for matrices with offsets
float st_x[XS];

// Loads chunk c's share of invocation tid of a K group: the chunks of rows tid, tid + GROUP,
// ... below TN (rows past the part repeat its last row; their outputs are not written) and
// the activations tid, tid + GROUP, ... of the tile's 32 k × TM tokens, tokens fastest
// (tokens past m and columns past K read as 0: the latter meet the codes' zero padding).
void load_chunk(uint c, uint tid, uint row0, uint tok0) {
    uint g = c >> p.group_shift;
    [[unroll]] for (uint q = 0u; q < WS; q++) {
        uint r = tid + q * GROUP;
        if (r < TN) {
            uint row = min(row0 + r, p.rows - 1u);
            uint slot = row * p.groups + g;
            st_codes[q] = w[row * p.chunks + c];
            st_scale[q] = scale_at(slot);
            st_zero[q] = HAS_OFFSETS ? offset_at(slot) : zero_at(slot);
        }
    }
    [[unroll]] for (uint q = 0u; q < XS; q++) {
        uint e = tid + q * GROUP;
        uint tok = tok0 + e % TM;
        st_x[q] = e < 32u * TM && tok < p.m ? x_at(tok * p.x_stride, 32u * c + e / TM) : 0.0;
    }
}

// Writes a loaded chunk into K group kg's tiles: the codes as exact f32 s · (u − z)
// (s · u + b with offsets), code k = 8 j + n of a chunk in nibble n of word j; neighbouring
// invocations write neighbouring rows (tokens).
void store_chunk(uint tid, uint kg) {
    [[unroll]] for (uint q = 0u; q < WS; q++) {
        uint r = tid + q * GROUP;
        if (r < TN) {
            [[unroll]] for (uint n = 0u; n < 32u; n++) {
                float u = float((st_codes[q][n / 8u] >> (4u * (n % 8u))) & 0xFu);
                tile_w[(kg * 32u + n) * TN + r] = HAS_OFFSETS ? fma(st_scale[q], u, st_zero[q])
                                                 : st_scale[q] * (u - st_zero[q]);
            }
        }
    }
    [[unroll]] for (uint q = 0u; q < XS; q++) {
        uint e = tid + q * GROUP;
        if (e < 32u * TM) {
            tile_x[kg * 32u * TM + e] = st_x[q];
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
    // K group: chunks kg, kg + KSPLIT, ... (spelled out for one group, so that its indices
    // fold to constants).
    uint kg = KSPLIT == 1u ? 0u : gl_LocalInvocationID.x / GROUP;
    uint tid = KSPLIT == 1u ? gl_LocalInvocationID.x : gl_LocalInvocationID.x % GROUP;
    uint tx = tid % TX;
    uint ty = tid / TX;

    float acc[RN * RM];
    [[unroll]] for (uint i = 0u; i < RN * RM; i++) {
        acc[i] = 0.0;
    }

    // Every K group runs the same number of steps (barriers are workgroup-wide); a group past
    // the last chunk stages a valid one and skips its products.
    uint steps = (p.chunks + KSPLIT - 1u) / KSPLIT;
    load_chunk(min(kg, p.chunks - 1u), tid, row0, tok0);
    for (uint s = 0u; s < steps; s++) {
        uint c = s * KSPLIT + kg;
        store_chunk(tid, kg);
        barrier();
        // The next chunk's loads are in flight while this one is multiplied.
        if (c + KSPLIT < p.chunks) {
            load_chunk(c + KSPLIT, tid, row0, tok0);
        }

        if (KSPLIT == 1u || c < p.chunks) {
            float part[RN * RM];
            [[unroll]] for (uint i = 0u; i < RN * RM; i++) {
                part[i] = 0.0;
            }
            uint w0 = kg * 32u * TN;
            uint x0 = kg * 32u * TM;
            [[unroll]] for (uint kk = 0u; kk < 32u; kk++) {
                float a[RN];
                float b[RM];
                [[unroll]] for (uint i = 0u; i < RN; i++) {
                    a[i] = tile_w[w0 + kk * TN + own_row(tx, i)];
                }
                [[unroll]] for (uint j = 0u; j < RM; j++) {
                    b[j] = tile_x[x0 + kk * TM + own_token(ty, j)];
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
