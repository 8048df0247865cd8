// Shared declarations of the q4vk GEMV kernels: the push-constant block (mirrored by
// `vk::pipeline::Push` in Rust) and the nibble decode.
//
// Device layout of one matrix part (rows [row_base, row_base + rows) of W):
//   binding 0: weights, row-major [rows][chunks] uvec4; a chunk is 16 bytes = 32 codes of
//              k = 32c .. 32c + 31, k even in the low nibble (the Q4 byte order), padded
//              past K with zero bytes;
//   binding 1: scales, row-major [rows][groups], f16 packed two per uint (low half first)
//              or f32 bits (SCALE_F32);
//   binding 2: zero points, row-major [rows][groups] bytes packed four per uint; or, for
//              matrices with per-group offsets (w = s·u + b), those f32 offsets
//              [rows][groups];
//   binding 3: for matrices whose columns are inputs out of order (GPTQ act-order), the
//              input of each column, [k] u32 (other matrices bind a placeholder there).

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
#ifdef GEMM
    uint m;           // activation rows (the GEMM kernels only; the GEMV's is a constant)
#ifndef EXPORT
    uint partials;    // the tensor-core GEMM in K slices: word of the workspace where its
                      // per-slice sums start (`gemm_slices.comp` adds them into y)
#endif
#elif !defined(EXPORT)
    uint gemm_m;      // the GEMM kernels' m (the GEMV's is a constant: unused)
    uint token_base;  // first activation row of this dispatch: the SIMT GEMVs run their
                      // activation rows in passes of M, workgroup z taking rows
                      // token_base + z M .. (the exported GEMV always starts at 0)
#endif
} p;

// `T NAME(uint mat, uint i)`: element i of matrix `mat`'s stream, FIRST's (set 0) for
// mat 0 and, in a gate+up pair's build (PAIR), SECOND's (set 2) for mat 1. Callers pass a
// constant, so the choice folds away.
#ifdef PAIR
#define PAIR_STREAM(T, NAME, FIRST, SECOND) \
    T NAME(uint mat, uint i) { if (mat != 0u) { return SECOND[i]; } return FIRST[i]; }
#else
#define PAIR_STREAM(T, NAME, FIRST, SECOND) \
    T NAME(uint mat, uint i) { return FIRST[i]; }
#endif

// Activation row mi of this workgroup's pass as a row of x and y (the SIMT GEMVs, which
// define PASSES_ALONG_Z and M, take pass z of their dispatch along workgroup z).
uint token_row(uint mi) {
#if defined(GEMM) || defined(EXPORT)
    return mi;
#elif defined(PASSES_ALONG_Z)
    return p.token_base + gl_WorkGroupID.z * M + mi;
#else
    return p.token_base + mi;
#endif
}

// Exact (u0 - z, u1 - z, u2 - z, u3 - z) of the four nibbles of the low 16 bits of w: nibble
// j (bits 4j .. 4j+3), masked in place, is OR-ed into the mantissa of a float whose
// exponent makes bit 4j weigh 1 (2^23, 2^19, 2^15, 2^11), and `offset` = that power of two
// + z is subtracted (both operands are exact, so is the difference). One mask+or (a single
// LOP3 on NVIDIA), one subtract and one FMA per code; no pre-scaled activations and no
// separate zero-point correction.
const uvec4 NIBBLE_MASK = uvec4(0xFu, 0xF0u, 0xF00u, 0xF000u);
const uvec4 NIBBLE_MAGIC = uvec4(0x4B000000u, 0x49000000u, 0x47000000u, 0x45000000u);
const vec4 NIBBLE_BASE = vec4(8388608.0, 524288.0, 32768.0, 2048.0);

vec4 nibbles_lo(uint w, vec4 offset) {
    return uintBitsToFloat((uvec4(w) & NIBBLE_MASK) | NIBBLE_MAGIC) - offset;
}

// The offset of nibbles_lo for zero point z.
vec4 nibble_offset(float z) {
    return NIBBLE_BASE + z;
}

// t + a·xa + b·xb as a chain of FMAs (a word's 8 decoded weights against its 8 x).
float fma8(vec4 a, vec4 b, vec4 xa, vec4 xb, float t) {
    t = fma(a.x, xa.x, t);
    t = fma(a.y, xa.y, t);
    t = fma(a.z, xa.z, t);
    t = fma(a.w, xa.w, t);
    t = fma(b.x, xb.x, t);
    t = fma(b.y, xb.y, t);
    t = fma(b.z, xb.z, t);
    return fma(b.w, xb.w, t);
}

// t + sum of x_i (u_i - z) over the 8 codes of word w (codes k = 0..3 against xa, 4..7
// against xb), as a chain of FMAs.
float dot8_acc(uint w, vec4 xa, vec4 xb, vec4 offset, float t) {
    return fma8(nibbles_lo(w, offset), nibbles_lo(w >> 16, offset), xa, xb, t);
}
