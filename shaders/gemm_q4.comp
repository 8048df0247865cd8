#version 450
// Fused int4-dequant GEMM for m > 8 (prefill) on the SIMT layout: y[t][row] = sum_k x[t][k] w,
// w = s * (u - z) (or s * u + b for matrices with per-group offsets).
//
// A workgroup owns a tile of TN = TX * RN rows by TM = TY * RM tokens (activation rows). Per
// 32-k chunk it dequantizes the tile's weights once into shared memory (exact f32 s * (u - z),
// each row's 16-byte chunk read by four neighbouring invocations) and stages the tokens' 32
// activations there, then every invocation accumulates its RN x RM outputs (rows tx + TX i,
// tokens ty + TY j: neighbouring invocations read neighbouring shared words) as outer
// products: RN + RM shared loads per RN * RM FMAs. Each chunk's products are summed apart and
// then added to the fp32 total (shorter f32 chains than one sum over K). Workgroups are
// numbered tokens fastest, so the workgroups that read the same weight rows run together
// and find them in the L2. No subgroup operations: one SPIR-V for every device.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#define GEMM

#ifdef EXPORT
// The exported GEMM (`q4vk_kernel_export` at m > 8, compiled with -DEXPORT [-DEXTENDED]):
// the bindings, push block name and local-size ids of the exported GEMV
// (`gemv_export.glsl`: set 0 = weights 0, scales 1, zeros 2, x 3, y 4, and with EXTENDED
// offsets 5, column order 6; the block type named `parameter`; the local size on 233..235,
// which a host may rewrite). The own constants keep this kernel's ids 0..6 (0..8 with
// EXTENDED), WORKGROUP on id 0 as a plain constant that must equal local_size_x.
layout(local_size_x_id = 233, local_size_y_id = 234, local_size_z_id = 235) in;
layout(constant_id = 0) const uint WORKGROUP = 64;             // TX * TY invocations
#define XY_SET 0
#define X_BINDING 3
#define Y_BINDING 4
#define Push parameter
#ifdef EXTENDED
#define OFFSETS_BINDING 5
#define K_ORDER_BINDING 6
#endif
#else
layout(local_size_x_id = 0) in;                                // TX * TY invocations
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
#ifndef EXPORT
#define XY_SET 1
#define X_BINDING 0
#define Y_BINDING 1
#endif

#include "q4_common.glsl"
#include "q4_simt.glsl"

layout(set = 0, binding = 0) coherent readonly buffer WeightWords { uint w1[]; };

#ifndef EXPORT
const uint WORKGROUP = gl_WorkGroupSize.x;
#endif
const uint TY = WORKGROUP / TX;
const uint TN = TX * RN; // rows per workgroup
const uint TM = TY * RM; // tokens per workgroup

shared float tile_w[32 * TN]; // [k][row]
shared float tile_x[32 * TM]; // [k][token]

void main() {
    uint wg = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (wg >= p.wg_count) {
        return;
    }
    wg += p.wg_offset;
    uint token_tiles = (p.m + TM - 1u) / TM;
    uint row0 = (wg / token_tiles) * TN;
    uint tok0 = (wg % token_tiles) * TM;
    uint tid = gl_LocalInvocationID.x;
    uint tx = tid % TX;
    uint ty = tid / TX;
    uint last_row = p.rows - 1u;

    float acc[RN * RM];
    [[unroll]] for (uint i = 0u; i < RN * RM; i++) {
        acc[i] = 0.0;
    }

    for (uint c = 0u; c < p.chunks; c++) {
        uint g = c >> p.group_shift;
        // Word j of row r's chunk: codes k = 8 j .. 8 j + 7 (nibble n is k = 8 j + n). Rows
        // past the part repeat its last row; their outputs are not written.
        for (uint i = tid; i < 4u * TN; i += WORKGROUP) {
            uint r = i / 4u;
            uint j = i % 4u;
            uint row = min(row0 + r, last_row);
            uint word = w1[(row * p.chunks + c) * 4u + j];
            uint slot = row * p.groups + g;
            float sc = scale_at(slot);
            float zr = zero_at(slot);
            float off = offset_at(slot);
            [[unroll]] for (uint n = 0u; n < 8u; n++) {
                float u = float((word >> (4u * n)) & 0xFu);
                tile_w[(8u * j + n) * TN + r] = HAS_OFFSETS ? fma(sc, u, off) : sc * (u - zr);
            }
        }
        // Tokens past m read as 0 (their outputs are not written), as do columns past K
        // (they meet the zero padding of the codes).
        for (uint i = tid; i < 32u * TM; i += WORKGROUP) {
            uint kk = i % 32u;
            uint t = i / 32u;
            uint tok = tok0 + t;
            tile_x[kk * TM + t] = tok < p.m ? x_at(tok * p.x_stride, 32u * c + kk) : 0.0;
        }
        barrier();

        float part[RN * RM];
        [[unroll]] for (uint i = 0u; i < RN * RM; i++) {
            part[i] = 0.0;
        }
        [[unroll]] for (uint kk = 0u; kk < 32u; kk++) {
            float a[RN];
            float b[RM];
            [[unroll]] for (uint i = 0u; i < RN; i++) {
                a[i] = tile_w[kk * TN + tx + TX * i];
            }
            [[unroll]] for (uint j = 0u; j < RM; j++) {
                b[j] = tile_x[kk * TM + ty + TY * j];
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
        barrier();
    }

    [[unroll]] for (uint i = 0u; i < RN; i++) {
        uint row = row0 + tx + TX * i;
        [[unroll]] for (uint j = 0u; j < RM; j++) {
            uint tok = tok0 + ty + TY * j;
            if (row < p.rows && tok < p.m) {
                y[tok * p.y_stride + p.row_base + row] = acc[i * RM + j];
            }
        }
    }
}
