#version 450
// Fused int4-dequant GEMV: y[m][row] = sum_k x[m][k] * s * (u - z).
// A workgroup owns ROWS consecutive rows; its invocations stride over the rows' 16-byte
// chunks (coalesced: neighbouring invocations read neighbouring chunks of a row), UNROLL
// chunks per row at a time. SPLIT neighbouring invocations share each chunk (and so its
// x, one L1 access), each taking ROWS / SPLIT of the rows. Each step first issues all
// UNROLL x ROWS / SPLIT independent 16-byte weight loads and their scales (and zeros),
// then for each chunk and activation row loads its 32 x values (8 vec4, shared by the
// invocation's rows) and accumulates s * sum x*(u - z) as an FMA chain; with DECODE_ONCE
// (m >= 2) it instead decodes and scales each word's 8 codes once and runs them against
// every activation row's 8 x values, read a word at a time. Rows and chunks past the end
// are clamped to the last one (no branch around the weight loads) and their sums dropped
// (DECODE_ONCE skips a dead chunk's x loads and products altogether). With WORD_LANES the
// invocations stride over words (8 codes) instead of chunks, so a subgroup's x loads are
// contiguous. Each invocation keeps M x ROWS / SPLIT fp32 partial sums; one reduction after
// the K loop: subgroupAdd (+ shared memory across subgroups) (SUBGROUP), or a
// shared-memory tree. On the H200 this kernel is bound by the dequant ALU work (see
// bench/RESULTS.md), not by memory.
//
// What each variant assumes of the device (the mobile GPUs it is written for cannot be
// measured here; the tested sizes are lavapipe's 8 and NVIDIA's 32):
// * both: Vulkan 1.0 storage buffers and f32 arithmetic only. No 8- or 16-bit storage:
//   codes are read as 32-bit words, f16 scales and activations as packed pairs through
//   unpackHalf2x16; no int8 or f16 arithmetic (Mali before Valhall has no fast int8,
//   many drivers no shaderFloat16). Weights and x are read as 16-byte vectors (with
//   WORD_LANES: weights as 32-bit words, x as 16-byte vectors).
// * SUBGROUP: subgroup arithmetic in compute shaders (subgroupAdd), any power-of-two
//   subgroup size from 4 to 128 (Adreno runs 64 or 128 wide, Mali Valhall 16, Intel 8-32,
//   AMD 32/64, NVIDIA 32, lavapipe 8 at 256 bits). The reduction slots are sized for the
//   smallest subgroup the device may use (VK_EXT_subgroup_size_control's minimum), so a
//   driver that picks another size per pipeline still stays within them.
// * portable: nothing beyond the common part; the reduction is a shared-memory tree over
//   the workgroup (Mali Midgard/Bifrost, older Adreno, drivers whose subgroup operations
//   are missing or broken: Q4VK_CONTEXT_PORTABLE_KERNELS / Q4VK_PORTABLE=1).
// * DOT (with SUBGROUP; `vk::int_dot`): x arrives as three signed 8-bit digits per element
//   (written by the pre-pass `x_digits.comp`), and each 32-code chunk is 24 packed 4 x 8-bit
//   dot products (VK_KHR_shader_integer_dot_product, Vulkan 1.3 core) instead of 32 FMAs
//   plus the decode. Exact: per chunk (per word with WORD_LANES) and digit the sum of
//   (u - z) times the digit is an exact int32; the three become one f32 with one rounding
//   (with WORD_LANES the chunk's zero-point term is one word's), scaled by the chunk's power of
//   two 2^tau as two exact factors 2^(tau/2) and 2^(tau - tau/2) (tau may lie beyond f32's
//   exponent range; an infinite or NaN chunk has tau = 256, so 0 times inf gives NaN); x's
//   digits are within 2^-22 of the chunk's largest |x|. Binding X holds, per activation row
//   (x_stride uvec4 apart), 7 uvec4 (28 words) per chunk: for each code word j of the chunk
//   six words, for each digit D0 (x 2^16), D1 (x 2^8), D2 its even columns (k = 8j, 8j + 2,
//   8j + 4, 8j + 6, one byte each, as in the low nibbles of code word j) then its odd ones;
//   then (tau, sum of D0, of D1, of D2). y = sum s 2^tau value. With WORD_LANES an
//   invocation reads its word's six words (next to its neighbour's) and the chunk's last
//   uvec4; the invocation of the chunk's first word also takes the chunk's zero-point and
//   offset terms (which need the sums).
// * DOT with X_BYTES (`Q4VK_GEMV_ROUND_X_TO_INT8`, less exact): x rounded to one signed
//   8-bit value per element, q = round(x 127 / a) with a the chunk's largest |x| (written by
//   the pre-pass built with BYTES), and the chunk's scale d = a / 127: each chunk is 8 packed
//   dot products, an exact int32 sum e, and y = sum s d (e - z sum q) (+ o d sum q). Binding
//   X holds, per activation row, 3 uvec4 per chunk: for each code word j its even columns'
//   bytes then its odd ones' (words 2j, 2j + 1), then (d's bits, sum of q, 0, 0). A chunk
//   with an infinite or NaN element has d NaN and q 0.
#extension GL_GOOGLE_include_directive : require
// Every loop over specialization constants is unrolled: the per-row arrays must stay in
// registers (a dynamically indexed array goes to local memory on NVIDIA).
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
#include "gemv_export.glsl"
#else
layout(local_size_x_id = 0) in;
#define WORKGROUP gl_WorkGroupSize.x
#define SPEC_ROWS 1
#define SPEC_M 2
#define SPEC_HAS_ZEROS 3
#define SPEC_SCALE_F32 4
#define SPEC_X_F16 5
#define SPEC_SUBGROUP_SIZE 6
#define SPEC_UNROLL 7
#define SPEC_SPLIT 8
#define SPEC_HAS_OFFSETS 9
#define SPEC_HAS_K_ORDER 10
#define SPEC_DECODE_ONCE 11
#define SPEC_WORD_LANES 12
#define SPEC_X_BYTES 13
#define OFFSETS_BINDING 2
#define K_ORDER_BINDING 3
#define XY_SET 1
#define X_BINDING 0
#define Y_BINDING 1
#endif
layout(constant_id = SPEC_ROWS) const uint ROWS = 4;           // rows per workgroup
layout(constant_id = SPEC_M) const uint M = 1;                 // activation rows
layout(constant_id = SPEC_HAS_ZEROS) const bool HAS_ZEROS = false; // per-group zero points (else 8)
layout(constant_id = SPEC_SCALE_F32) const bool SCALE_F32 = false; // scales stored as f32 (else f16)
layout(constant_id = SPEC_X_F16) const bool X_F16 = false;     // activations are f16 (else f32)
#if defined(EXPORT) && !defined(SUBGROUP)
// The portable export has no subgroup-size constant (its ids stay contiguous).
const uint SUBGROUP_SIZE = 1;
#else
layout(constant_id = SPEC_SUBGROUP_SIZE) const uint SUBGROUP_SIZE = 32; // the device's subgroup size
#endif
layout(constant_id = SPEC_UNROLL) const uint UNROLL = 1;       // chunks per row per step
layout(constant_id = SPEC_SPLIT) const uint SPLIT = 1;         // invocations sharing a chunk (divides ROWS)
#ifdef EXPORT
const bool DECODE_ONCE = false;
#else
// Several activation rows: decode each word once for all of them (fewer registers and ALU
// work per weight, x read a word at a time) rather than once per activation row (all of a
// chunk's x loaded at once).
layout(constant_id = SPEC_DECODE_ONCE) const bool DECODE_ONCE = false;
// Invocations take a word of codes (8 weights) at a time instead of a whole chunk, so that
// neighbouring invocations read neighbouring x (a subgroup's x loads span as many bytes as
// they carry, where chunk-wide steps put each invocation's x 128 bytes from the next one's)
// and neighbouring words of each row.
layout(constant_id = SPEC_WORD_LANES) const bool WORD_LANES = false;
// The weights a word at a time (binding 0 as 32-bit words).
layout(set = 0, binding = 0) coherent readonly buffer WeightWords { uint w_words[]; };
#ifdef PAIR
layout(set = 2, binding = 0) coherent readonly buffer WeightWords2 { uint w_words2[]; };
#endif
#endif
#if defined(EXPORT) && !defined(EXTENDED)
const bool HAS_OFFSETS = false;
const bool HAS_K_ORDER = false;
#else
// Per-group f32 offsets in binding OFFSETS_BINDING (w = s·u + b, no zero point: GGUF Q4_1 /
// Q4_K).
layout(constant_id = SPEC_HAS_OFFSETS) const bool HAS_OFFSETS = false;
// Column k of the matrix holds input k_order[k] (binding K_ORDER_BINDING; GPTQ act-order):
// x is gathered.
layout(constant_id = SPEC_HAS_K_ORDER) const bool HAS_K_ORDER = false;
layout(set = 0, binding = K_ORDER_BINDING) readonly buffer KOrder { uint k_order[]; };
#endif

// Passes of M activation rows along workgroup z (`token_row`).
#define PASSES_ALONG_Z
#include "q4_common.glsl"
#include "q4_simt.glsl"
#ifndef EXPORT
// Word i of matrix `mat`'s weights (`weights_of`).
PAIR_STREAM(uint, word_of, w_words, w_words2)
#endif
#ifdef DOT
layout(set = XY_SET, binding = X_BINDING) readonly buffer XD { uvec4 xd[]; };
layout(set = XY_SET, binding = X_BINDING) readonly buffer XD2 { uvec2 xd2[]; };
// x rounded to one signed byte per element with a scale per chunk, instead of three exact
// digits.
layout(constant_id = SPEC_X_BYTES) const bool X_BYTES = false;
#endif

const uint MR = M * ROWS;
#if defined(PAIR) && (!defined(SUBGROUP) || defined(EXPORT))
#error "the gate+up pair is a build of the subgroup GEMV"
#endif
#ifdef SUBGROUP
shared float red[(WORKGROUP / SUBGROUP_SIZE) * MR];
#else
shared float red[WORKGROUP * MR];
#endif

// Sum of a chunk's 32 activations (the offsets' term b · Σx).
float sum8(vec4 xv[8]) {
    vec4 t = (xv[0] + xv[1]) + (xv[2] + xv[3]) + ((xv[4] + xv[5]) + (xv[6] + xv[7]));
    return (t.x + t.y) + (t.z + t.w);
}

// Sum of one word's 8 activations (`load_x_word`).
float sum8_word(vec4 xa, vec4 xb) {
    vec4 t = xa + xb;
    return (t.x + t.y) + (t.z + t.w);
}

// Activations 8q .. 8q + 7 of chunk c of activation row mi (those of word q of a chunk's
// codes): xa the first four, xb the last.
void load_x_word(uint mi, uint c, uint q, out vec4 xa, out vec4 xb) {
    uint row_start = token_row(mi) * p.x_stride;
    uint k0 = c * 32u + 8u * q;
    if (!HAS_K_ORDER && c * 32u + 32u <= p.k && ((row_start & 3u) == 0u)) {
        if (X_F16) {
            uint base = (row_start + k0) >> 1;
            xa = vec4(unpackHalf2x16(xh[base]), unpackHalf2x16(xh[base + 1u]));
            xb = vec4(unpackHalf2x16(xh[base + 2u]), unpackHalf2x16(xh[base + 3u]));
        } else {
            uint base = (row_start + k0) >> 2;
            xa = x4[base];
            xb = x4[base + 1u];
        }
    } else {
        xa = vec4(x_at(row_start, k0), x_at(row_start, k0 + 1u), x_at(row_start, k0 + 2u),
                  x_at(row_start, k0 + 3u));
        xb = vec4(x_at(row_start, k0 + 4u), x_at(row_start, k0 + 5u), x_at(row_start, k0 + 6u),
                  x_at(row_start, k0 + 7u));
    }
}

// The 32 activations of chunk c of activation row mi.
void load_x(uint mi, uint c, out vec4 xv[8]) {
    uint row_start = token_row(mi) * p.x_stride;
    uint k0 = c * 32u;
    if (!HAS_K_ORDER && k0 + 32u <= p.k && ((row_start & 3u) == 0u)) {
        if (X_F16) {
            uint base = (row_start + k0) >> 1;
            [[unroll]] for (uint i = 0u; i < 8u; i++) {
                xv[i] = vec4(unpackHalf2x16(xh[base + 2u * i]), unpackHalf2x16(xh[base + 2u * i + 1u]));
            }
        } else {
            uint base = (row_start + k0) >> 2;
            [[unroll]] for (uint i = 0u; i < 8u; i++) {
                xv[i] = x4[base + i];
            }
        }
    } else {
        [[unroll]] for (uint i = 0u; i < 8u; i++) {
            uint kk = k0 + 4u * i;
            xv[i] = vec4(x_at(row_start, kk), x_at(row_start, kk + 1u), x_at(row_start, kk + 2u),
                         x_at(row_start, kk + 3u));
        }
    }
}

#ifdef DOT
// Per digit l, the sum over code word w's 8 codes u of u times that digit of their x
// (dw[l]: its even columns' bytes, then its odd ones').
ivec3 word_dot(uint w, uvec2 dw[3]) {
    int even = int(w & 0x0F0F0F0Fu);
    int odd = int((w >> 4) & 0x0F0F0F0Fu);
    ivec3 e;
    [[unroll]] for (uint l = 0u; l < 3u; l++) {
        e[l] = sdot4(even, int(dw[l].x), 0) + sdot4(odd, int(dw[l].y), 0);
    }
    return e;
}

// The digits of code word j of a chunk whose first six uvec4 are d.
void chunk_word_digits(uvec4 d[6], uint j, out uvec2 dw[3]) {
    [[unroll]] for (uint l = 0u; l < 3u; l++) {
        uint at = 6u * j + 2u * l;
        dw[l] = uvec2(d[at >> 2][at & 3u], d[at >> 2][(at & 3u) + 1u]);
    }
}

// s (sum of (u q) t - z (sum of q) t) + o (sum of q) t, with `e` the per-digit sums of u
// times the digits of q = D0 2^16 + D1 2^8 + D2 (over a chunk, or a word of it), `dsum` the
// digits' sums over the chunk (or 0: the chunk's zero-point and offset terms are taken
// elsewhere), scale t = t1 t2, zero point z (0 with offsets), scale s, offset o: per digit
// an exact int32 (|.| <= 32 * 15 * 64 for D0, 32 * 15 * 128 for D1 and D2), combined into
// one exact int32 (|.| < 2^31) and converted once (one rounding), multiplied by t before s
// or o (|value t| <= ~960 |x|: no overflow where s x has none).
float digits_value(ivec3 e, ivec3 dsum, float t1, float t2, int z, float s, float o) {
    e -= z * dsum;
    float value = float(e.x * 65536 + e.y * 256 + e.z);
    if (HAS_OFFSETS) {
        float q = float(dsum.x * 65536 + dsum.y * 256 + dsum.z);
        return fma(s, (value * t1) * t2, o * ((q * t1) * t2));
    }
    return s * ((value * t1) * t2);
}

// 2^e for |e| <= 128 (2^128: inf), from the bits.
float pow2(int e) {
    return uintBitsToFloat(uint(e + 127) << 23);
}

// X_BYTES: the sum over code word w's 8 codes u of u q, with `xw` the word's bytes of q
// (its even columns', then its odd ones').
int word_dot_bytes(uint w, uvec2 xw) {
    return sdot4(int(w & 0x0F0F0F0Fu), int(xw.x), 0) + sdot4(int((w >> 4) & 0x0F0F0F0Fu), int(xw.y), 0);
}

// X_BYTES: s d (e - z qsum) + o d qsum, with e the sum of u q over a chunk (or a word of it)
// and `qsum` the chunk's sum of q (or 0: its zero-point and offset terms are taken
// elsewhere); |e - z qsum| <= 32 * 15 * 127, exact, converted once.
float bytes_value(int e, int qsum, float d, int z, float s, float o) {
    float value = float(e - z * qsum) * d;
    if (HAS_OFFSETS) {
        return fma(s, value, o * (float(qsum) * d));
    }
    return s * value;
}
#endif

const uint RPI = ROWS / SPLIT; // rows per invocation
const uint UR = UNROLL * RPI;
const uint MRI = M * RPI;

// This invocation's share of output i = mi ROWS + q (row row0 + q of activation row mi):
// its sum when it owns row q (q % SPLIT == j), else 0.
float partial(float acc[MRI], uint i, uint j) {
    uint mi = i / ROWS;
    uint q = i % ROWS;
    return q % SPLIT == j ? acc[mi * RPI + q / SPLIT] : 0.0;
}

#ifndef EXPORT
// The K loop with WORD_LANES: invocation `cl` of the `stride` sharing rows takes words
// cl, cl + stride, .. of each of its rows (words past the end are clamped for the loads and
// add nothing), UNROLL words per row at a time, and adds into `acc` as the chunk loop does:
// per activation row (DOT: the word's packed dot products; else dot8_acc, then the scale)
// or, with DECODE_ONCE, each word decoded and scaled once for all activation rows.
void word_lanes(uint mat, uint row0, uint j, uint cl, uint stride, inout float acc[MRI]) {
    uint words = p.chunks * 4u;
    uint last_word = words - 1u;
    uint last_row = p.rows - 1u;
    for (uint w0 = cl; w0 < words; w0 += stride * UNROLL) {
        uint wd[UR];
        float sc[UR];
        vec4 off[UR];
        float ob[UR];
        int zi[UR];
        [[unroll]] for (uint u = 0u; u < UNROLL; u++) {
            uint wi = min(w0 + u * stride, last_word);
            uint g = (wi >> 2) >> p.group_shift;
            [[unroll]] for (uint r = 0u; r < RPI; r++) {
                uint row = min(row0 + r * SPLIT + j, last_row);
                uint i = u * RPI + r;
                wd[i] = word_of(mat, row * words + wi);
                sc[i] = scale_of(mat, row * p.groups + g);
                float z = zero_of(mat, row * p.groups + g);
                off[i] = nibble_offset(z);
                zi[i] = int(z);
                ob[i] = offset_of(mat, row * p.groups + g);
            }
        }
        [[unroll]] for (uint u = 0u; u < UNROLL; u++) {
            uint wi = w0 + u * stride;
            // A word past the end adds nothing at all: its x may hold an infinity that a
            // zero weight would turn into NaN.
            if (wi >= words) {
                continue;
            }
            uint c = wi >> 2;
            uint q = wi & 3u;
#ifdef DOT
            if (X_BYTES) {
                [[unroll]] for (uint mi = 0u; mi < M; mi++) {
                    uint at = token_row(mi) * p.x_stride + 3u * c;
                    uvec2 xw = xd2[2u * at + q];
                    uvec2 meta = xd2[2u * at + 4u];
                    float d = uintBitsToFloat(meta.x);
                    int qsum = q == 0u ? int(meta.y) : 0;
                    [[unroll]] for (uint r = 0u; r < RPI; r++) {
                        uint i = u * RPI + r;
                        acc[mi * RPI + r] += bytes_value(word_dot_bytes(wd[i], xw), qsum, d, zi[i], sc[i], ob[i]);
                    }
                }
                continue;
            }
            [[unroll]] for (uint mi = 0u; mi < M; mi++) {
                uint at = token_row(mi) * p.x_stride + 7u * c;
                uvec2 dw[3];
                [[unroll]] for (uint l = 0u; l < 3u; l++) {
                    dw[l] = xd2[2u * at + 3u * q + l];
                }
                uvec4 meta = xd[at + 6u];
                int tau = int(meta.x);
                float t1 = pow2(tau / 2);
                float t2 = pow2(tau - tau / 2);
                ivec3 dsum = q == 0u ? ivec3(meta.yzw) : ivec3(0);
                [[unroll]] for (uint r = 0u; r < RPI; r++) {
                    uint i = u * RPI + r;
                    acc[mi * RPI + r] += digits_value(word_dot(wd[i], dw), dsum, t1, t2, zi[i], sc[i], ob[i]);
                }
            }
#else
            if (!DECODE_ONCE) {
                [[unroll]] for (uint mi = 0u; mi < M; mi++) {
                    vec4 xa;
                    vec4 xb;
                    load_x_word(mi, c, q, xa, xb);
                    float xsum = HAS_OFFSETS ? sum8_word(xa, xb) : 0.0;
                    [[unroll]] for (uint r = 0u; r < RPI; r++) {
                        uint i = u * RPI + r;
                        float t = dot8_acc(wd[i], xa, xb, off[i], 0.0);
                        acc[mi * RPI + r] += HAS_OFFSETS ? fma(sc[i], t, ob[i] * xsum) : sc[i] * t;
                    }
                }
                continue;
            }
            vec4 lo[RPI];
            vec4 hi[RPI];
            [[unroll]] for (uint r = 0u; r < RPI; r++) {
                uint i = u * RPI + r;
                lo[r] = nibbles_lo(wd[i], off[i]) * sc[i];
                hi[r] = nibbles_lo(wd[i] >> 16, off[i]) * sc[i];
            }
            [[unroll]] for (uint mi = 0u; mi < M; mi++) {
                vec4 xa;
                vec4 xb;
                load_x_word(mi, c, q, xa, xb);
                float xsum = HAS_OFFSETS ? sum8_word(xa, xb) : 0.0;
                [[unroll]] for (uint r = 0u; r < RPI; r++) {
                    float t = fma8(lo[r], hi[r], xa, xb, acc[mi * RPI + r]);
                    acc[mi * RPI + r] = HAS_OFFSETS ? fma(ob[u * RPI + r], xsum, t) : t;
                }
            }
#endif
        }
    }
}
#endif

// The K loop over chunks: invocation `cl` of the STRIDE sharing rows takes chunks cl,
// cl + STRIDE, .. of its rows of matrix `mat`, UNROLL per row at a time, and adds into `acc`.
void chunk_steps(uint mat, uint row0, uint j, uint cl, inout float acc[MRI]) {
    const uint STRIDE = WORKGROUP / SPLIT;
    uint last_row = p.rows - 1u;
    uint last_chunk = p.chunks - 1u;
    for (uint c0 = cl; c0 < p.chunks; c0 += STRIDE * UNROLL) {
        uvec4 wv[UR];
        float sc[UR];
        vec4 off[UR];
#ifdef DOT
        int zi[UR];
#endif
        float ob[UR];
        [[unroll]] for (uint u = 0u; u < UNROLL; u++) {
            uint c = min(c0 + u * STRIDE, last_chunk);
            uint g = c >> p.group_shift;
            [[unroll]] for (uint r = 0u; r < RPI; r++) {
                uint row = min(row0 + r * SPLIT + j, last_row);
                wv[u * RPI + r] = weights_of(mat, row * p.chunks + c);
                sc[u * RPI + r] = scale_of(mat, row * p.groups + g);
                float z = zero_of(mat, row * p.groups + g);
                off[u * RPI + r] = nibble_offset(z);
#ifdef DOT
                zi[u * RPI + r] = int(z);
#endif
                ob[u * RPI + r] = offset_of(mat, row * p.groups + g);
            }
        }
        [[unroll]] for (uint u = 0u; u < UNROLL; u++) {
            uint cu = c0 + u * STRIDE;
            bool live = cu < p.chunks;
            uint c = min(cu, last_chunk);
#ifdef DOT
            if (X_BYTES) {
                [[unroll]] for (uint mi = 0u; mi < M; mi++) {
                    uint at = token_row(mi) * p.x_stride + 3u * c;
                    uvec4 xa = xd[at];
                    uvec4 xb = xd[at + 1u];
                    uvec2 meta = xd2[2u * at + 4u];
                    float d = uintBitsToFloat(meta.x);
                    [[unroll]] for (uint r = 0u; r < RPI; r++) {
                        uint i = u * RPI + r;
                        int e = word_dot_bytes(wv[i].x, xa.xy) + word_dot_bytes(wv[i].y, xa.zw)
                                + word_dot_bytes(wv[i].z, xb.xy) + word_dot_bytes(wv[i].w, xb.zw);
                        float v = bytes_value(e, int(meta.y), d, zi[i], sc[i], ob[i]);
                        acc[mi * RPI + r] += live ? v : 0.0;
                    }
                }
                continue;
            }
            [[unroll]] for (uint mi = 0u; mi < M; mi++) {
                uint at = token_row(mi) * p.x_stride + 7u * c;
                uvec4 d[6];
                [[unroll]] for (uint i = 0u; i < 6u; i++) {
                    d[i] = xd[at + i];
                }
                uvec4 meta = xd[at + 6u];
                int tau = int(meta.x);
                float t1 = pow2(tau / 2);
                float t2 = pow2(tau - tau / 2);
                ivec3 dsum = ivec3(meta.yzw);
                [[unroll]] for (uint r = 0u; r < RPI; r++) {
                    uint i = u * RPI + r;
                    ivec3 e = ivec3(0);
                    [[unroll]] for (uint q = 0u; q < 4u; q++) {
                        uvec2 dw[3];
                        chunk_word_digits(d, q, dw);
                        e += word_dot(wv[i][q], dw);
                    }
                    acc[mi * RPI + r] += live ? digits_value(e, dsum, t1, t2, zi[i], sc[i], ob[i]) : 0.0;
                }
            }
#else
            if (!DECODE_ONCE) {
                [[unroll]] for (uint mi = 0u; mi < M; mi++) {
                    vec4 xv[8];
                    load_x(mi, c, xv);
                    float xsum = HAS_OFFSETS ? sum8(xv) : 0.0;
                    [[unroll]] for (uint r = 0u; r < RPI; r++) {
                        uint i = u * RPI + r;
                        float t = dot8_acc(wv[i].x, xv[0], xv[1], off[i], 0.0);
                        t = dot8_acc(wv[i].y, xv[2], xv[3], off[i], t);
                        t = dot8_acc(wv[i].z, xv[4], xv[5], off[i], t);
                        t = dot8_acc(wv[i].w, xv[6], xv[7], off[i], t);
                        float v = HAS_OFFSETS ? fma(sc[i], t, ob[i] * xsum) : sc[i] * t;
                        acc[mi * RPI + r] += live ? v : 0.0;
                    }
                }
            } else if (live) {
                // DECODE_ONCE: each word's 8 codes are decoded and scaled once per row, then
                // serve every activation row, whose x is read a word (8 values) at a time.
                // A chunk past the end (clamped) adds nothing at all: its x may hold an
                // infinity that a zero weight would turn into NaN.
                float xsum[M];
                [[unroll]] for (uint mi = 0u; mi < M; mi++) {
                    xsum[mi] = 0.0;
                }
                [[unroll]] for (uint q = 0u; q < 4u; q++) {
                    vec4 lo[RPI];
                    vec4 hi[RPI];
                    [[unroll]] for (uint r = 0u; r < RPI; r++) {
                        uint i = u * RPI + r;
                        lo[r] = nibbles_lo(wv[i][q], off[i]) * sc[i];
                        hi[r] = nibbles_lo(wv[i][q] >> 16, off[i]) * sc[i];
                    }
                    [[unroll]] for (uint mi = 0u; mi < M; mi++) {
                        vec4 xa;
                        vec4 xb;
                        load_x_word(mi, c, q, xa, xb);
                        if (HAS_OFFSETS) {
                            xsum[mi] += sum8_word(xa, xb);
                        }
                        [[unroll]] for (uint r = 0u; r < RPI; r++) {
                            acc[mi * RPI + r] = fma8(lo[r], hi[r], xa, xb, acc[mi * RPI + r]);
                        }
                    }
                }
                if (HAS_OFFSETS) {
                    [[unroll]] for (uint mi = 0u; mi < M; mi++) {
                        [[unroll]] for (uint r = 0u; r < RPI; r++) {
                            acc[mi * RPI + r] = fma(ob[u * RPI + r], xsum[mi], acc[mi * RPI + r]);
                        }
                    }
                }
            }
#endif
        }
    }
}

// Matrix `mat`'s share of this invocation's sums of rows row0 .. (invocation `cl` of those
// sharing rows, taking rows row0 + SPLIT r + j), into `acc`.
void k_loop(uint mat, uint row0, uint j, uint cl, inout float acc[MRI]) {
    [[unroll]] for (uint i = 0u; i < MRI; i++) {
        acc[i] = 0.0;
    }
#ifndef EXPORT
    if (WORD_LANES) {
        word_lanes(mat, row0, j, cl, WORKGROUP / SPLIT, acc);
        return;
    }
#endif
    chunk_steps(mat, row0, j, cl, acc);
}

#ifdef PAIR
// The gate's sums of the workgroup's outputs (i = mi ROWS + q), reduced before up's loop
// so that it has the accumulators' registers to itself.
shared float gate_sums[MR];

// Reduces gate's `acc` over the workgroup into `gate_sums` (in the order the reduction of
// a call of gate alone adds them: the same bits).
void park_gate_sums(float acc[MRI], uint j, uint tid) {
    [[unroll]] for (uint i = 0u; i < MR; i++) {
        float v = subgroupAdd(partial(acc, i, j));
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
    // Invocation tid takes rows row0 + SPLIT r + j (r < RPI) and chunks cl, cl + STRIDE, ..:
    // the SPLIT invocations of a chunk read the same x (one L1 access).
    uint j = tid % SPLIT;
    uint cl = tid / SPLIT;

    float acc[MRI];
    k_loop(0u, row0, j, cl, acc);
#ifdef PAIR
    // Gate's sums parked in shared memory; then the second matrix (up) on the same rows,
    // for y = act(gate) · up.
    park_gate_sums(acc, j, tid);
    k_loop(1u, row0, j, cl, acc);
#endif

#ifdef SUBGROUP
    if (gl_NumSubgroups == 1u) {
        // One subgroup: no shared memory, no barrier.
        [[unroll]] for (uint i = 0u; i < MR; i++) {
            float v = subgroupAdd(partial(acc, i, j));
            uint mi = i / ROWS;
            uint row = row0 + i % ROWS;
            if (subgroupElect() && row < p.rows) {
                store_result(i, token_row(mi), row, v);
            }
        }
        return;
    }
    [[unroll]] for (uint i = 0u; i < MR; i++) {
        float v = subgroupAdd(partial(acc, i, j));
        if (subgroupElect()) {
            red[gl_SubgroupID * MR + i] = v;
        }
    }
    barrier();
    // MR may exceed the workgroup (small workgroups, many rows and activation rows).
    for (uint i = tid; i < MR; i += WORKGROUP) {
        float v = 0.0;
        for (uint sg = 0u; sg < gl_NumSubgroups; sg++) {
            v += red[sg * MR + i];
        }
        uint mi = i / ROWS;
        uint row = row0 + i % ROWS;
        if (row < p.rows) {
            store_result(i, token_row(mi), row, v);
        }
    }
#else
    [[unroll]] for (uint i = 0u; i < MR; i++) {
        red[tid * MR + i] = partial(acc, i, j);
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
        uint mi = i / ROWS;
        uint row = row0 + i % ROWS;
        if (row < p.rows) {
            store_y(token_row(mi), row, red[i]);
        }
    }
#endif
}
