// How the tensor-core kernels stage x as B in shared memory: the padded column-major tile
// and the exact two-part split of a block of f32 x. Shared by the kernels on the
// tensor-core layout (through coop_common.glsl) and the GEMM on GGUF blocks with fragments
// in registers (`gemm_blocks_frag.comp`); the including shader includes x_parts.glsl first.

// Staged B is column-major (element (k, column) at column * KPAD + k), held as uvec2 (four
// f16 each, KPAD4 per column) so that an invocation's four consecutive k of one column are
// one explicit 8-byte store and a subgroup's stores of a column are contiguous; the 8-half
// pad puts the eight 16-byte column segments a fragment load reads at once in different
// banks. coopMatLoad reads it as f16 with offsets and stride in uvec2 units.
const uint KPAD = 136;
const uint KPAD4 = KPAD / 4u;

// Four f16 as one uvec2 (the first in the low half of x).
uvec2 pack4(f16vec4 v) {
    return uvec2(packFloat2x16(v.xy), packFloat2x16(v.zw));
}

// Activations x' = 2^-e x of one block of `span` k, held four per invocation by its
// span / 4 neighbouring invocations (a butterfly over them), split into two exact f16
// parts (`split_scaled`). Returns 2^e, the block's factor.
float split_block(vec4 v, uint span, out f16vec4 hi, out f16vec4 lo) {
    vec4 a = abs(v);
    float mx = max(max(a.x, a.y), max(a.z, a.w));
    [[unroll]] for (uint d = 1u; d < span / 4u; d <<= 1) {
        mx = max(mx, subgroupShuffleXor(mx, d));
    }
    vec4 hi32, lo32;
    float factor = split_scaled(v, floatBitsToUint(mx), hi32, lo32);
    hi = f16vec4(hi32);
    lo = f16vec4(lo32);
    return factor;
}

// Sum of a block's `span` activations (held as v by its span / 4 invocations), in f32.
float block_total(vec4 v, uint span) {
    float sum = (v.x + v.y) + (v.z + v.w);
    [[unroll]] for (uint d = 1u; d < span / 4u; d <<= 1) {
        sum += subgroupShuffleXor(sum, d);
    }
    return sum;
}
