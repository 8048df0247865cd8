#version 450
// Tensor-core GEMM (any m, GEMV sizes included) on the SIMT layout, for any device whose
// VK_KHR_cooperative_matrix offers an f16 x f16 -> f32 subgroup shape CM x CN x CK (CK a
// multiple of 8), whatever its subgroup size: every fragment is loaded from and stored to
// shared memory (coopMatLoad / coopMatStore) and no fragment element is indexed, so the
// device's fragment layout does not matter. Exact as the other tensor-core kernels:
//
//   y[t][row] = sum over blocks b of s[row][g(b)] * 2^e[t][b] * sum_{k in b} (u - z) * x'
//               (+ o[row][g(b)] * sum_{k in b} x, for matrices with per-group offsets)
//
// * A: the workgroup's ROWS rows by BLOCK k, decoded into shared memory as the exact f16
//   u - z (|u - z| <= 255), row-major.
// * B: per block of BLOCK k and token, f32 x is scaled by the power of two 2^-e that puts
//   the block's largest |x| in [2^14, 2^15) and split into two exact f16 parts
//   (`split_scaled`: hi + lo keeps 22 bits of every x), columns 2t and 2t + 1; f16 x is its
//   own column t with factor 1. Column-major, gathered through the column order where the
//   matrix has one.
// * Each subgroup multiplies its row tiles by every column tile over the block (products
//   exact in f32, summed in f32), stores the sums to shared memory, and every invocation
//   adds the block sums of its outputs, scaled in f32 by s * 2^e, into its totals.
//
// A workgroup owns ROWS = ROW_TILES * CM rows by TOKENS tokens (COL_TILES * CN columns);
// workgroups are numbered tokens fastest. The subgroups take row tiles gl_SubgroupID,
// + gl_NumSubgroups, ..., so any subgroup size that divides the workgroup serves.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require
#define GEMM

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint CM = 16;             // fragment rows (A, C)
layout(constant_id = 2) const uint CN = 16;             // fragment columns (B, C)
layout(constant_id = 3) const uint CK = 16;             // fragment depth, a multiple of 8
layout(constant_id = 4) const uint ROW_TILES = 4;       // row tiles of CM per workgroup
layout(constant_id = 5) const uint COL_TILES = 1;       // column tiles of CN per workgroup
layout(constant_id = 6) const bool HAS_ZEROS = false;   // per-group zero points (else 8)
layout(constant_id = 7) const bool SCALE_F32 = false;   // scales stored as f32 (else f16)
layout(constant_id = 8) const bool X_F16 = false;       // activations are f16 (else f32)
// Per-group f32 offsets in binding 2 (w = s·u + b, no zero point: GGUF Q4_1 / Q4_K).
layout(constant_id = 9) const bool HAS_OFFSETS = false;
// Column k of the matrix holds input k_order[k] (binding 3; GPTQ act-order): x is gathered.
layout(constant_id = 10) const bool HAS_K_ORDER = false;
// k per block: a multiple of 32 and of CK that divides the group size (one scale per row).
layout(constant_id = 11) const uint BLOCK = 128;

#define K_ORDER_BINDING 3
layout(set = 0, binding = K_ORDER_BINDING) readonly buffer KOrder { uint k_order[]; };
#define XY_SET 1
#define X_BINDING 0
#define Y_BINDING 1

#include "q4_common.glsl"
#include "q4_simt.glsl"
#include "x_split.glsl"

#define MatA coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA>
#define MatB coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB>
#define MatC coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>

const uint WORKGROUP = gl_WorkGroupSize.x;
const uint ROWS = ROW_TILES * CM;
const uint COLS = COL_TILES * CN;
const uint PARTS = X_F16 ? 1u : 2u;      // B columns per token
const uint TOKENS = COLS / PARTS;
const uint SEGS = BLOCK / 8u;            // segments of 8 k (one uvec4 of f16) per block
const uint CHUNKS = BLOCK / 32u;         // 16-byte chunks of codes per row and block
const uint STRIDE = SEGS + 1u;           // uvec4 per staged row of A or column of B
const uint C_STRIDE = COLS + 4u;         // floats per staged row of C
const uint OUTS = (ROWS * TOKENS + WORKGROUP - 1u) / WORKGROUP;  // outputs per invocation
const uint X_ITEMS = (TOKENS * SEGS + WORKGROUP - 1u) / WORKGROUP; // x segments per invocation

// Every array is of 16-byte elements or a multiple of 4 floats per row, so the fragment
// loads and stores (which need 16-byte alignment) start aligned.
shared uvec4 tile_a[ROWS * STRIDE];
shared uvec4 tile_b[COLS * STRIDE];
shared float tile_c[ROWS * C_STRIDE];
shared float seg_max[TOKENS * SEGS];
shared float seg_sum[TOKENS * SEGS];
shared float block_factor[TOKENS];
shared float block_xsum[TOKENS];

// The eight codes of `word` (code n in nibble n) as exact f16 u - z, two per 32-bit word.
uvec4 decode8(uint word, float z) {
    uvec4 r;
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint pair = word >> (8u * i);
        r[i] = packHalf2x16(vec2(float(pair & 0xFu) - z, float((pair >> 4) & 0xFu) - z));
    }
    return r;
}

// Eight f32 as f16, two per 32-bit word.
uvec4 pack8(vec4 a, vec4 b) {
    return uvec4(packHalf2x16(a.xy), packHalf2x16(a.zw), packHalf2x16(b.xy), packHalf2x16(b.zw));
}

// Stages the codes of block `k0` of the workgroup's rows as f16 u - z (rows past the part
// repeat its last row, whose outputs are not written; chunks past K are zero codes, which
// meet zero activations).
void stage_a(uint row0, uint k0, uint g) {
    for (uint i = gl_LocalInvocationID.x; i < ROWS * CHUNKS; i += WORKGROUP) {
        uint r = i / CHUNKS;
        uint j = i % CHUNKS;
        uint row = min(row0 + r, p.rows - 1u);
        uint c = k0 / 32u + j;
        uvec4 q = c < p.chunks ? w[row * p.chunks + c] : uvec4(0u);
        float z = zero_at(row * p.groups + g);
        [[unroll]] for (uint h = 0u; h < 4u; h++) {
            tile_a[r * STRIDE + 4u * j + h] = decode8(q[h], z);
        }
    }
}

void main() {
    uint wg = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (wg >= p.wg_count) {
        return;
    }
    wg += p.wg_offset;
    uint lid = gl_LocalInvocationID.x;
    uint token_tiles = (p.m + TOKENS - 1u) / TOKENS;
    uint row0 = (wg / token_tiles) * ROWS;
    uint tok0 = (wg % token_tiles) * TOKENS;

    float acc[OUTS];
    [[unroll]] for (uint q = 0u; q < OUTS; q++) {
        acc[q] = 0.0;
    }

    uint blocks = (p.chunks * 32u + BLOCK - 1u) / BLOCK;
    for (uint b = 0u; b < blocks; b++) {
        uint k0 = b * BLOCK;
        uint g = (k0 >> 5) >> p.group_shift;
        stage_a(row0, k0, g);

        // x of the block: segments of 8 k per token, loaded; their largest |x| (and sums)
        // shared with the token's other segments.
        vec4 xa[X_ITEMS], xb[X_ITEMS];
        [[unroll]] for (uint q = 0u; q < X_ITEMS; q++) {
            uint e = lid + q * WORKGROUP;
            xa[q] = vec4(0.0);
            xb[q] = vec4(0.0);
            if (e < TOKENS * SEGS) {
                uint tok = tok0 + e / SEGS;
                uint kk = k0 + 8u * (e % SEGS);
                if (tok < p.m) {
                    uint start = tok * p.x_stride;
                    xa[q] = vec4(x_at(start, kk), x_at(start, kk + 1u), x_at(start, kk + 2u),
                                 x_at(start, kk + 3u));
                    xb[q] = vec4(x_at(start, kk + 4u), x_at(start, kk + 5u),
                                 x_at(start, kk + 6u), x_at(start, kk + 7u));
                }
                vec4 a = max(abs(xa[q]), abs(xb[q]));
                seg_max[e] = max(max(a.x, a.y), max(a.z, a.w));
                if (HAS_OFFSETS) {
                    vec4 s2 = xa[q] + xb[q];
                    seg_sum[e] = (s2.x + s2.y) + (s2.z + s2.w);
                }
            }
        }
        barrier();
        [[unroll]] for (uint q = 0u; q < X_ITEMS; q++) {
            uint e = lid + q * WORKGROUP;
            if (e < TOKENS * SEGS) {
                uint t = e / SEGS;
                uint j = e % SEGS;
                float factor = 1.0;
                if (X_F16) {
                    tile_b[t * STRIDE + j] = pack8(xa[q], xb[q]);
                } else {
                    float largest = 0.0;
                    for (uint i = 0u; i < SEGS; i++) {
                        largest = max(largest, seg_max[t * SEGS + i]);
                    }
                    vec4 hi_a, lo_a, hi_b, lo_b;
                    uint bits = floatBitsToUint(largest);
                    factor = split_scaled(xa[q], bits, hi_a, lo_a);
                    split_scaled(xb[q], bits, hi_b, lo_b);
                    tile_b[2u * t * STRIDE + j] = pack8(hi_a, hi_b);
                    tile_b[(2u * t + 1u) * STRIDE + j] = pack8(lo_a, lo_b);
                }
                if (j == 0u) {
                    block_factor[t] = factor;
                    if (HAS_OFFSETS) {
                        float sum = 0.0;
                        for (uint i = 0u; i < SEGS; i++) {
                            sum += seg_sum[t * SEGS + i];
                        }
                        block_xsum[t] = sum;
                    }
                }
            }
        }
        barrier();

        // One accumulator at a time (no arrays of fragments, loops not unrolled: small
        // code on every compiler); A is loaded again per column tile, from shared memory.
        for (uint rt = gl_SubgroupID; rt < ROW_TILES; rt += gl_NumSubgroups) {
            for (uint ct = 0u; ct < COL_TILES; ct++) {
                MatC c = MatC(0.0);
                for (uint ks = 0u; ks < BLOCK / CK; ks++) {
                    MatA a;
                    MatB bm;
                    coopMatLoad(a, tile_a, rt * CM * STRIDE + ks * (CK / 8u), STRIDE,
                                gl_CooperativeMatrixLayoutRowMajor);
                    coopMatLoad(bm, tile_b, ct * CN * STRIDE + ks * (CK / 8u), STRIDE,
                                gl_CooperativeMatrixLayoutColumnMajor);
                    c = coopMatMulAdd(a, bm, c);
                }
                coopMatStore(c, tile_c, rt * CM * C_STRIDE + ct * CN, C_STRIDE,
                             gl_CooperativeMatrixLayoutRowMajor);
            }
        }
        barrier();

        // The block's sums into the totals, tokens fastest. The next block's staging
        // writes other arrays; its multiplies come after two more barriers.
        [[unroll]] for (uint q = 0u; q < OUTS; q++) {
            uint o = lid + q * WORKGROUP;
            if (o < ROWS * TOKENS) {
                uint r = o / TOKENS;
                uint t = o % TOKENS;
                uint slot = min(row0 + r, p.rows - 1u) * p.groups + g;
                float sum = tile_c[r * C_STRIDE + PARTS * t];
                if (!X_F16) {
                    sum += tile_c[r * C_STRIDE + PARTS * t + 1u];
                }
                // The factor first: s · 2^e alone may fall below the normal range.
                acc[q] = fma(sum * block_factor[t], scale_at(slot), acc[q]);
                if (HAS_OFFSETS) {
                    acc[q] = fma(offset_at(slot), block_xsum[t], acc[q]);
                }
            }
        }
    }

    [[unroll]] for (uint q = 0u; q < OUTS; q++) {
        uint o = lid + q * WORKGROUP;
        uint row = row0 + o / TOKENS;
        uint tok = tok0 + o % TOKENS;
        if (o < ROWS * TOKENS && row < p.rows && tok < p.m) {
            store_y(tok, row, acc[q]);
        }
    }
}
