#version 450
// x in 8-bit digits for the integer dot-product GEMV (`gemv_q4.comp` built with DOT; the
// layout is described there and in `vk::int_dot`): the pre-pass that `q4vk_gemv` and
// `q4vk_cmd_gemv` record before that kernel, reading x (f32 or f16, through the matrix's
// column order when it has one) from binding X and writing the digits to binding Y of set
// 1. Workgroup (i, mi) writes chunks i WORKGROUP / 4 .. of activation row mi, four
// invocations per chunk (one per 8-column code word); chunks are independent.
//
// Exact and cheap: a chunk whose largest |x| lies in [2^e, 2^(e+1)) (compared as float
// bits: for non-negative floats their order is the integers') gets the scale
// t = 2^tau, tau = e - 21, and each x = M 2^(ev - 23) (M its 24-bit significand) becomes
// q = M 2^(ev - 23 - tau) rounded to nearest, ties to even: exact, the same bits on every
// device (an f32 multiplication by a power of two where that is exact, else an integer
// shift of the significand; subnormals included). So |q| <= 2^22, its digits
// D0 2^16 + D1 2^8 + D2 are signed bytes (|D0| <= 64), and |x - q t| <= 2^-22 of the
// chunk's largest |x| at every magnitude (the GPU digits; the host-made ones of the CPU
// context are finer). A chunk with an infinite or NaN element gets tau = 256 and zero
// digits, which the GEMV turns into NaN.
//
// With BYTES (`Q4VK_GEMV_ROUND_X_TO_INT8`, less exact) it writes x rounded to one signed
// byte per element instead: per chunk the scale d = a / 127 (a its largest |x|) and
// q = round(x 127 / a) (|q| <= 127; to nearest up to the f32 roundings of 127 / qa and of
// the product, so a near-tie may go either way), computed from the exact q above as
// round(q 127 / qa) (qa the largest's q, in [2^21, 2^22]: no overflow, underflow or
// division by a tiny a); 3 uvec4 per chunk: for each code word j its even columns' bytes,
// then its odd ones', then (d's bits, sum of q, 0, 0). A chunk with an infinite or NaN
// element gets d NaN and q 0, one of zeros d 0.
//
// With NATURAL (the GEMV on GGUF blocks, whose runs of codes are in input order) each code
// word's two words hold its columns in order, 8j .. 8j + 3 then 8j + 4 .. 8j + 7, in place
// of its even columns then its odd ones (both forms): with BYTES, uvec4 0 of a chunk holds
// columns 0 .. 15 and uvec4 1 columns 16 .. 31, column 4t + i in byte i of word t.
//
// Assumes: Vulkan 1.0 storage buffers and 32-bit integer arithmetic; a workgroup of a
// multiple of 4 invocations; no subgroup operations, no 8- or 16-bit storage (f16 x is read
// as packed pairs).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool X_F16 = false;      // activations are f16 (else f32)
layout(constant_id = 2) const bool HAS_K_ORDER = false; // gather x through k_order
layout(constant_id = 3) const bool BYTES = false;       // one rounded byte per element
layout(constant_id = 4) const bool NATURAL = false;     // columns in input order
#define WORKGROUP gl_WorkGroupSize.x

#include "q4_common.glsl"

layout(set = 0, binding = 3) readonly buffer KOrder { uint k_order[]; };
// x as 32-bit words: one f32, or two f16.
layout(set = 1, binding = 0) readonly buffer XU { uint xu[]; };
layout(set = 1, binding = 1) writeonly buffer Digits { uvec4 digits[]; };
layout(set = 1, binding = 1) writeonly buffer Digits2 { uvec2 digits2[]; };

// Per invocation: the largest magnitude bits of its 8 columns, then its digit sums.
shared uint word_largest[WORKGROUP];
shared ivec3 word_sums[WORKGROUP];

// The f32 bits of activation i of x (an index into the whole buffer): f32 x as stored, no
// float operation on the way (subnormals stay exact).
uint x_bits(uint i) {
    if (X_F16) {
        vec2 pair = unpackHalf2x16(xu[i >> 1]);
        return floatBitsToUint((i & 1u) == 0u ? pair.x : pair.y);
    }
    return xu[i];
}

// floor(log2 |v|) of a non-zero finite |v| given as float bits (subnormals included).
int exponent_of(uint bits) {
    return bits >= 0x00800000u ? int(bits >> 23) - 127 : findMSB(bits) - 149;
}

// q = M 2^-s rounded to nearest, ties to even, for the significand M of |x| (its bits
// without the sign; M < 2^24) and a shift s (negative for the smallest subnormal rows).
int rounded_shift(uint significand, int s) {
    if (s <= 0) {
        return int(significand << uint(-s));
    }
    if (s >= 26) {
        return 0;
    }
    uint q = significand >> uint(s);
    uint rest = significand & ((1u << uint(s)) - 1u);
    uint half_unit = 1u << uint(s - 1);
    q += (rest > half_unit || (rest == half_unit && (q & 1u) == 1u)) ? 1u : 0u;
    return int(q);
}

// q = |x| 2^-tau rounded to nearest, ties to even, in integer arithmetic, for |x| given as
// float bits (subnormals included): |x| = M 2^(ev - 23) (subnormals: M = bits, ev = -126),
// so q = M 2^-s with s = tau + 23 - ev.
int scaled_magnitude(uint bits, int tau) {
    bool normal = bits >= 0x00800000u;
    int ev = normal ? int(bits >> 23) - 127 : -126;
    uint significand = normal ? (bits & 0x007FFFFFu) | 0x00800000u : bits;
    return rounded_shift(significand, tau + 23 - ev);
}

void main() {
    uint mi = gl_WorkGroupID.y;
    uint tid = gl_LocalInvocationID.x;
    uint row_start = mi * p.x_stride;
    uint out_start = mi * p.y_stride;
    // This invocation's columns: word j (8 columns) of chunk c.
    uint c = (gl_WorkGroupID.x * WORKGROUP + tid) / 4u;
    uint j = tid % 4u;
    bool live = c < p.chunks;
    uint bits[8];
    bool negative[8];
    uint largest8 = 0u;
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint kk = 32u * c + 8u * j + i;
        uint v = 0u;
        if (live && kk < p.k) {
            v = x_bits(row_start + (HAS_K_ORDER ? k_order[kk] : kk));
        }
        // Sign and magnitude from the bits.
        bits[i] = v & 0x7FFFFFFFu;
        negative[i] = v >= 0x80000000u;
        largest8 = max(largest8, bits[i]);
    }
    word_largest[tid] = largest8;
    barrier();
    uint first = tid - j;
    uint chunk_largest = max(max(word_largest[first], word_largest[first + 1u]),
                             max(word_largest[first + 2u], word_largest[first + 3u]));
    // Digits of D0, D1, D2: (even columns, odd columns) of this word, one byte each (with
    // NATURAL: its first four columns, its last four).
    uvec2 packed[3] = uvec2[3](uvec2(0u), uvec2(0u), uvec2(0u));
    ivec3 sums = ivec3(0);
    bool finite = chunk_largest < 0x7F800000u;
    int tau = finite ? 0 : 256;
    if (finite && chunk_largest != 0u) {
        int e_chunk = exponent_of(chunk_largest);
        tau = e_chunk - 21;
        // Usually q = |x| 2^-tau exactly in f32 (a normal power of two; subnormal x, which a
        // device may flush to 0, are below 2^-126 <= 2^(e_chunk - 22), half a unit of q, so
        // they round to 0 either way); the integer path otherwise.
        bool fast = e_chunk >= -104;
        float unit = uintBitsToFloat(uint(127 - max(tau, -125)) << 23);
        // BYTES: 127 / (the largest's q), which rounds the largest to 127.
        float byte_factor = 0.0;
        if (BYTES) {
            byte_factor = 127.0 / float(scaled_magnitude(chunk_largest, tau));
        }
        [[unroll]] for (uint i = 0u; i < 8u; i++) {
            // q < 2^(e_chunk + 1 - tau) = 2^22.
            int q = fast ? int(roundEven(uintBitsToFloat(bits[i]) * unit))
                         : scaled_magnitude(bits[i], tau);
            // The byte and word of column i: (i / 2, i % 2) by parity, (i % 4, i / 4) in order.
            int offset = int(8u * (NATURAL ? i % 4u : i / 2u));
            uint slot = NATURAL ? i / 4u : i % 2u;
            // No early exit from this loop: it must stay unrolled (the arrays in registers).
            if (BYTES) {
                q = min(int(roundEven(float(q) * byte_factor)), 127);
                q = negative[i] ? -q : q;
                sums.x += q;
                packed[0][slot] = bitfieldInsert(packed[0][slot], uint(q), offset, 8);
            } else {
                q = negative[i] ? -q : q;
                int d2 = ((q + 128) & 255) - 128;
                int q1 = (q - d2) >> 8;
                int d1 = ((q1 + 128) & 255) - 128;
                int d0 = (q1 - d1) >> 8;
                sums += ivec3(d0, d1, d2);
                packed[0][slot] = bitfieldInsert(packed[0][slot], uint(d0), offset, 8);
                packed[1][slot] = bitfieldInsert(packed[1][slot], uint(d1), offset, 8);
                packed[2][slot] = bitfieldInsert(packed[2][slot], uint(d2), offset, 8);
            }
        }
    }
    word_sums[tid] = sums;
    barrier();
    if (!live) {
        return;
    }
    if (BYTES) {
        uint at = out_start + 3u * c;
        digits2[2u * at + j] = packed[0];
        if (j == 0u) {
            int total = word_sums[first].x + word_sums[first + 1u].x + word_sums[first + 2u].x
                        + word_sums[first + 3u].x;
            float a = uintBitsToFloat(chunk_largest);
            float d = finite ? a / 127.0 : uintBitsToFloat(0x7FC00000u);
            digits[at + 2u] = uvec4(floatBitsToUint(d), uint(total), 0u, 0u);
        }
        return;
    }
    // Words 6 j + 2 level and 6 j + 2 level + 1 of the chunk's 28.
    uint at = out_start + 7u * c;
    [[unroll]] for (uint level = 0u; level < 3u; level++) {
        digits2[2u * at + 3u * j + level] = packed[level];
    }
    if (j == 0u) {
        ivec3 total = word_sums[first] + word_sums[first + 1u] + word_sums[first + 2u]
                      + word_sums[first + 3u];
        digits[at + 6u] = uvec4(uint(tau), uvec3(total));
    }
}
