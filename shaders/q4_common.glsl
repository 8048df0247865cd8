// Shared declarations of the q4vk GEMV kernels: the push-constant block (mirrored by
// `vk::gemv::Push` in Rust) and the nibble decode.
//
// Device layout of one matrix part (rows [row_base, row_base + rows) of W):
//   binding 0: weights, row-major [rows][chunks] uvec4; a chunk is 16 bytes = 32 codes of
//              k = 32c .. 32c + 31, k even in the low nibble (the Q4 byte order), padded
//              past K with zero bytes;
//   binding 1: scales, row-major [rows][groups], f16 packed two per uint (low half first)
//              or f32 bits (SCALE_F32);
//   binding 2: zero points, row-major [rows][groups] bytes packed four per uint.

layout(push_constant) uniform Push {
    uint rows;        // rows in this part
    uint row_base;    // index in y of the part's first row
    uint chunks;      // 16-byte chunks per row (= ceil(K / 32))
    uint k;           // input features
    uint groups;      // scale groups per row
    uint group_shift; // log2(group_size / 32); 31 for per-channel (one group)
    uint x_stride;    // elements between rows of x
    uint y_stride;    // elements between rows of y
    uint wg_count;    // workgroups of this dispatch (it may be 2-D)
    uint wg_offset;   // first workgroup of this dispatch within the part
} p;

// Exact ((u0 - z), 16 (u1 - z), 256 (u2 - z), 4096 (u3 - z)) of the four nibbles of the low
// 16 bits of w: each masked nibble u·16^j is OR-ed into the mantissa of 2^23, and
// `offset` = 2^23 + z·(1, 16, 256, 4096) is subtracted (both operands lie in [2^23, 2^24),
// so the difference is exact). Pair it with x pre-scaled by (1, 1/16, 1/256, 1/4096): one
// mask+or, one subtract and one FMA per code, and no separate zero-point correction.
vec4 nibbles_lo(uint w, vec4 offset) {
    uvec4 bits = (uvec4(w) & uvec4(0xFu, 0xF0u, 0xF00u, 0xF000u)) | 0x4B000000u;
    return uintBitsToFloat(bits) - offset;
}

const vec4 NIBBLE_WEIGHT = vec4(1.0, 16.0, 256.0, 4096.0);
const vec4 X_PRESCALE = vec4(1.0, 1.0 / 16.0, 1.0 / 256.0, 1.0 / 4096.0);

// The offset of nibbles_lo for zero point z.
vec4 nibble_offset(float z) {
    return 8388608.0 + z * NIBBLE_WEIGHT;
}

// Sum of x_i (u_i - z) over the 8 codes of word w, with pre-scaled activations.
float dot8(uint w, vec4 xa, vec4 xb, vec4 offset) {
    return dot(nibbles_lo(w, offset), xa) + dot(nibbles_lo(w >> 16, offset), xb);
}
