// The exact two-part f16 split of f32 activations that the tensor-core kernels and the
// fragments pre-pass use (through x_parts.glsl) and the tensor-core GEMM on the SIMT layout
// (gemm_q4_coop_tiles.comp) uses directly.

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
