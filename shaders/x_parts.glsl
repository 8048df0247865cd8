// x as the tensor-core kernels and the GEMM's fragments pre-pass (`x_fragments.comp`) read
// it: binding 0 of set 1, f32 or f16 (packed two per 32-bit word), p.x_stride elements
// between rows; and the exact two-part f16 split of f32 activations that both use (the
// pre-pass stores both parts, or with Q4VK_GEMV_ROUND_X_TO_F16 their sum rounded to f16).
// The including
// shader defines X_F16 and includes q4_common.glsl first.

layout(set = 1, binding = 0) readonly buffer X1 { float x1[]; };
layout(set = 1, binding = 0) readonly buffer XH { uint xh[]; };
layout(set = 1, binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(set = 1, binding = 0) readonly buffer XH4 { uvec2 xh4[]; };

// Activation kk of row mi, 0 past K.
float x_at(uint mi, uint kk) {
    if (kk >= p.k) {
        return 0.0;
    }
    uint i = mi * p.x_stride + kk;
    if (X_F16) {
        vec2 pair = unpackHalf2x16(xh[i >> 1]);
        return (i & 1u) == 0u ? pair.x : pair.y;
    }
    return x1[i];
}

// Activations kk .. kk + 3 of row mi (0 past K): one 16-byte (f32) or 8-byte (f16) load
// where the row and K allow, else one at a time.
vec4 x4_at(uint mi, uint kk) {
    uint i = mi * p.x_stride + kk;
    if (kk + 4u <= p.k && (i & 3u) == 0u) {
        if (X_F16) {
            uvec2 pairs = xh4[i >> 2];
            return vec4(unpackHalf2x16(pairs.x), unpackHalf2x16(pairs.y));
        }
        return x4[i >> 2];
    }
    return vec4(x_at(mi, kk), x_at(mi, kk + 1u), x_at(mi, kk + 2u), x_at(mi, kk + 3u));
}

// Four activations v of a block whose largest |x| has the f32 bits `largest`, as
// x' = 2^-e v in two exact parts: 2^-e puts the block's largest |x| in [2^14, 2^15) (both
// 2^e and 2^-e normal f32 powers of two); hi = x' truncated to 11 significant bits (exact
// in f16 from 2^-14 up), by integer ops a compiler cannot fold; lo = x' - hi, exact in f32
// (13 bits), which the caller rounds to f16. `precise`: no narrowing or reassociation of
// these steps. Returns 2^e, the block's factor.
float split_scaled(vec4 v, uint largest, out vec4 hi32, out vec4 lo32) {
    int e = int(bitfieldExtract(largest, 23, 8)) - 127;
    int shift = clamp(14 - e, -126, 126);
    float up = uintBitsToFloat(uint(127 + shift) << 23);
    precise vec4 scaled = v * up;
    precise vec4 hi = uintBitsToFloat(floatBitsToUint(scaled) & 0xFFFFE000u);
    precise vec4 lo = scaled - hi;
    hi32 = hi;
    lo32 = lo;
    return uintBitsToFloat(uint(127 - shift) << 23);
}
