#version 450
// Tensor-core GEMM (any m) on GGUF blocks kept in their native bytes, one build per block
// type (BLOCK_TYPE), for any device whose VK_KHR_cooperative_matrix offers an f16 x f16 ->
// f32 subgroup shape CM x CN x CK with CK dividing 16, whatever its subgroup size: as in
// `gemm_q4_coop_tiles.comp`, every fragment is loaded from and stored to shared memory and
// no fragment element is indexed. Exact as the other tensor-core kernels: per run r of 16
// inputs with one scale s and offset o (`blocks_decode.glsl`: a piece of 32 weights is two
// runs),
//
//   y[t][row] = sum over pieces c of 2^e[t][c] * sum over c's runs r of
//               (s[row][r] * sum_{k in r} q * x' + o[row][r] * sum_{k in r} x)
//
// * A: per piece, the workgroup's rows' codes q as exact f16 (integers of up to 8 bits, or
//   the IQ4 and doubled E2M1 table values), in the piece's order: its first run's 16
//   inputs, then its second's. Row-major. Where a run's scale is an integer factor of the
//   block's (Q4_K's and Q5_K's six-bit scales of d) or its product with every code is exact
//   in f16 (NVFP4's UE4M3 scales, times values of at most two significant bits), A holds
//   q times that factor (at most 63 · 31), and the two runs share the rest of the scale.
// * B: the tokens' inputs of the piece in the same order; f32 x scaled by the power of two
//   2^-e that puts the piece's largest |x| in [2^14, 2^15) and split into two exact f16
//   parts (`split_scaled`), columns 2t and 2t + 1; f16 x its own column t, factor 1.
//   Column-major.
// * Types whose two runs then share a scale (all but Q6_K, whose six-bit codes times its
//   signed 8-bit scales exceed f16's exact integers) sum the piece in one fragment; Q6_K sums
//   each run in its own. Each subgroup multiplies its row
//   tiles by every column tile, stores the sums to shared memory, and every invocation adds
//   them, scaled in f32, into its totals.
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
layout(constant_id = 3) const uint CK = 16;             // fragment depth: 8 or 16
layout(constant_id = 4) const uint ROW_TILES = 4;       // row tiles of CM per workgroup
layout(constant_id = 5) const uint COL_TILES = 1;       // column tiles of CN per workgroup
layout(constant_id = 6) const bool X_F16 = false;       // activations are f16 (else f32)
#define XY_SET 1
#define X_BINDING 0
#define Y_BINDING 1

#include "q4_common.glsl"
#include "blocks_decode.glsl"
#include "x_tokens.glsl"
#include "epilogue.glsl"
#include "x_split.glsl"

#define MatA coopmat<float16_t, gl_ScopeSubgroup, CM, CK, gl_MatrixUseA>
#define MatB coopmat<float16_t, gl_ScopeSubgroup, CK, CN, gl_MatrixUseB>
#define MatC coopmat<float, gl_ScopeSubgroup, CM, CN, gl_MatrixUseAccumulator>

const uint WORKGROUP = gl_WorkGroupSize.x;
const uint ROWS = ROW_TILES * CM;
const uint COLS = COL_TILES * CN;
const uint PARTS = X_F16 ? 1u : 2u;      // B columns per token
const uint TOKENS = COLS / PARTS;
// Runs of a piece summed apart, and the inputs of each.
const uint RUNS = TYPE == T_Q6_K ? 2u : 1u;
const uint RUN_K = 32u / RUNS;
// A piece is 4 segments of 8 inputs (one uvec4 of f16): 0 and 1 its first run, 2 and 3 its
// second. A staged row of A or column of B takes 5 (one of padding).
const uint STRIDE = 5u;
const uint C_STRIDE = COLS + 4u;         // floats per staged row of C
const uint OUTS = (ROWS * TOKENS + WORKGROUP - 1u) / WORKGROUP;    // outputs per invocation
const uint A_ITEMS = (ROWS * 2u + WORKGROUP - 1u) / WORKGROUP;     // half pieces per invocation
const uint X_ITEMS = (TOKENS * 4u + WORKGROUP - 1u) / WORKGROUP;   // x segments per invocation

// Every array is of 16-byte elements or a multiple of 4 floats per row, so the fragment
// loads and stores (which need 16-byte alignment) start aligned.
shared uvec4 tile_a[ROWS * STRIDE];
shared uvec4 tile_b[COLS * STRIDE];
shared float tile_c[RUNS * ROWS * C_STRIDE];
shared vec4 row_scales[ROWS];            // the piece's scales of its runs' sums and offsets (s_a, o_a, s_b, o_b)
shared float seg_max[TOKENS * 4u];
shared float seg_sum[TOKENS * 4u];
shared float piece_factor[TOKENS];
shared vec2 run_xsum[TOKENS];            // the piece's sum of x over each run

// Eight f32 as f16, two per 32-bit word.
uvec4 pack8(vec4 a, vec4 b) {
    return uvec4(packHalf2x16(a.xy), packHalf2x16(a.zw), packHalf2x16(b.xy), packHalf2x16(b.zw));
}

// Piece `piece` of block gb: the factors its runs' codes take in A (`fold`) and the scales
// of the runs' sums and their offsets (s_a, o_a, s_b, o_b; `piece_scales` without what A
// took).
vec4 folded_scales(uint gb, uint piece, out vec2 fold) {
    if (TYPE == T_Q4_K || TYPE == T_Q5_K) {
        uvec4 hdr = scales16_of(0u, gb);
        vec2 dm = unpackHalf2x16(hdr.x);
        uvec2 sm = k_pair_scales_mins(hdr.yzw, piece >> 1);
        fold = byte_codes(sm.x, 0u, 0x3Fu, 0.0).xy;
        vec2 mn = byte_codes(sm.y, 0u, 0x3Fu, 0.0).xy;
        return vec4(dm.x, -(dm.y * mn.x), dm.x, -(dm.y * mn.y));
    }
    vec4 so = piece_scales(0u, gb, piece);
    if (TYPE == T_NVFP4) {
        fold = so.xz;
        return vec4(1.0, 0.0, 1.0, 0.0);
    }
    fold = vec2(1.0);
    return so;
}

// Stages piece c of the workgroup's rows into tile_a as f16 codes: item i is half h = i % 2
// (quarters 2h and 2h + 1: inputs 8h .. 8h + 7 of each run) of row i / 2 (rows past the
// part repeat its last row, whose outputs are not written). Returns each item's row's
// scales (`folded_scales`; those of first halves are stored after the next barrier: the
// previous piece's sums may still be reading row_scales).
void stage_a(uint row0, uint c, out vec4 scales[A_ITEMS]) {
    uint blk = c / PIECES;
    uint piece = c % PIECES;
    [[unroll]] for (uint s = 0u; s < A_ITEMS; s++) {
        uint i = gl_LocalInvocationID.x + s * WORKGROUP;
        scales[s] = vec4(0.0);
        if (i < ROWS * 2u) {
            uint r = i >> 1;
            uint h = i & 1u;
            uint gb = min(row0 + r, p.rows - 1u) * p.groups + blk;
            uvec4 v = codes_of(0u, piece_word(gb, piece));
            uvec4 v2 = SECOND_WORD ? codes_of(0u, piece_second_word(gb, piece)) : v;
            uint hbits = block_high_bits(0u, gb);
            uint c0 = 2u * h;
            uint c1 = c0 + 1u;
            vec4 qa0, qb0, qa1, qb1;
            decode_quarter(piece, c0, v[quarter_first(c0)], v2[quarter_second(c0)], hbits, qa0, qb0);
            decode_quarter(piece, c1, v[quarter_first(c1)], v2[quarter_second(c1)], hbits, qa1, qb1);
            vec2 fold;
            scales[s] = folded_scales(gb, piece, fold);
            tile_a[r * STRIDE + h] = pack8(qa0 * fold.x, qa1 * fold.x);
            tile_a[r * STRIDE + 2u + h] = pack8(qb0 * fold.y, qb1 * fold.y);
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

    // p.chunks: pieces per row (k / 32); p.groups: blocks per row.
    for (uint c = 0u; c < p.chunks; c++) {
        vec4 scales[A_ITEMS];
        stage_a(row0, c, scales);

        // x of the piece: segments of 8 inputs per token, loaded; their largest |x| (and
        // sums) shared with the token's other segments.
        uint ka;
        uint kb;
        piece_inputs(c % PIECES, ka, kb);
        ka += (c / PIECES) * BLOCK;
        kb += (c / PIECES) * BLOCK;
        vec4 xa[X_ITEMS], xb[X_ITEMS];
        [[unroll]] for (uint q = 0u; q < X_ITEMS; q++) {
            uint e = lid + q * WORKGROUP;
            xa[q] = vec4(0.0);
            xb[q] = vec4(0.0);
            if (e < TOKENS * 4u) {
                uint tok = tok0 + e / 4u;
                uint j = e % 4u;
                uint k0 = (j < 2u ? ka : kb) + 8u * (j & 1u);
                if (tok < p.m) {
                    xa[q] = vec4(x_at(tok, k0), x_at(tok, k0 + 1u), x_at(tok, k0 + 2u), x_at(tok, k0 + 3u));
                    xb[q] = vec4(x_at(tok, k0 + 4u), x_at(tok, k0 + 5u), x_at(tok, k0 + 6u), x_at(tok, k0 + 7u));
                }
                vec4 a = max(abs(xa[q]), abs(xb[q]));
                seg_max[e] = max(max(a.x, a.y), max(a.z, a.w));
                if (HAS_MIN) {
                    vec4 s2 = xa[q] + xb[q];
                    seg_sum[e] = (s2.x + s2.y) + (s2.z + s2.w);
                }
            }
        }
        barrier();
        [[unroll]] for (uint s = 0u; s < A_ITEMS; s++) {
            uint i = lid + s * WORKGROUP;
            if (i < ROWS * 2u && (i & 1u) == 0u) {
                row_scales[i >> 1] = scales[s];
            }
        }
        [[unroll]] for (uint q = 0u; q < X_ITEMS; q++) {
            uint e = lid + q * WORKGROUP;
            if (e < TOKENS * 4u) {
                uint t = e / 4u;
                uint j = e % 4u;
                float factor = 1.0;
                if (X_F16) {
                    tile_b[t * STRIDE + j] = pack8(xa[q], xb[q]);
                } else {
                    float largest = max(max(seg_max[4u * t], seg_max[4u * t + 1u]),
                                        max(seg_max[4u * t + 2u], seg_max[4u * t + 3u]));
                    vec4 hi_a, lo_a, hi_b, lo_b;
                    uint bits = floatBitsToUint(largest);
                    factor = split_scaled(xa[q], bits, hi_a, lo_a);
                    split_scaled(xb[q], bits, hi_b, lo_b);
                    tile_b[2u * t * STRIDE + j] = pack8(hi_a, hi_b);
                    tile_b[(2u * t + 1u) * STRIDE + j] = pack8(lo_a, lo_b);
                }
                if (j == 0u) {
                    piece_factor[t] = factor;
                    if (HAS_MIN) {
                        run_xsum[t] = vec2(seg_sum[4u * t] + seg_sum[4u * t + 1u],
                                           seg_sum[4u * t + 2u] + seg_sum[4u * t + 3u]);
                    }
                }
            }
        }
        barrier();

        // One accumulator at a time (no arrays of fragments, loops not unrolled: small
        // code on every compiler); A is loaded again per column tile, from shared memory.
        for (uint rt = gl_SubgroupID; rt < ROW_TILES; rt += gl_NumSubgroups) {
            for (uint ct = 0u; ct < COL_TILES; ct++) {
                for (uint run = 0u; run < RUNS; run++) {
                    MatC acc_c = MatC(0.0);
                    for (uint ks = 0u; ks < RUN_K / CK; ks++) {
                        uint seg = run * (RUN_K / 8u) + ks * (CK / 8u);
                        MatA a;
                        MatB bm;
                        coopMatLoad(a, tile_a, rt * CM * STRIDE + seg, STRIDE,
                                    gl_CooperativeMatrixLayoutRowMajor);
                        coopMatLoad(bm, tile_b, ct * CN * STRIDE + seg, STRIDE,
                                    gl_CooperativeMatrixLayoutColumnMajor);
                        acc_c = coopMatMulAdd(a, bm, acc_c);
                    }
                    coopMatStore(acc_c, tile_c, (run * ROWS + rt * CM) * C_STRIDE + ct * CN,
                                 C_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
                }
            }
        }
        barrier();

        // The piece's sums into the totals, tokens fastest. The next piece's staging
        // writes other arrays; what this step reads is written again after the next
        // piece's first barrier.
        [[unroll]] for (uint q = 0u; q < OUTS; q++) {
            uint o = lid + q * WORKGROUP;
            if (o < ROWS * TOKENS) {
                uint r = o / TOKENS;
                uint t = o % TOKENS;
                vec4 so = row_scales[r];
                float factor = piece_factor[t];
                [[unroll]] for (uint run = 0u; run < RUNS; run++) {
                    uint at = (run * ROWS + r) * C_STRIDE + PARTS * t;
                    float sum = tile_c[at];
                    if (!X_F16) {
                        sum += tile_c[at + 1u];
                    }
                    // The factor first: s · 2^e alone may fall below the normal range.
                    acc[q] = fma(sum * factor, run == 0u ? so.x : so.z, acc[q]);
                }
                if (HAS_MIN) {
                    vec2 xsum = run_xsum[t];
                    acc[q] = fma(so.y, xsum.x, acc[q]);
                    acc[q] = fma(so.w, xsum.y, acc[q]);
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
