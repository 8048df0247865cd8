// The tensor-core kernels' fragments (16 x 8 x 16, f16 x f16 -> f32) and how they are built
// from 32-bit words in registers: A from a word of eight 4-bit codes (`decode`), B from two
// words of four f16 (`b_fragment`). Shared by the GEMV and GEMM (through coop_common.glsl)
// and q4vk-bench's ceilings (`mma_peak.comp`, `mma_loop.comp`).

#define MatA coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define MatB coopmat<float16_t, gl_ScopeSubgroup, 16, 8, gl_MatrixUseB>
#define MatC coopmat<float, gl_ScopeSubgroup, 16, 8, gl_MatrixUseAccumulator>

// The eight codes of word q as u - z in A's element order (pairs: e0 e1 from nibbles 0, 4;
// e2 e3 from 2, 6; e4 e5 from 1, 5; e6 e7 from 3, 7). The invocation's first row
// (elements 0..3) sits in the low nibble of each byte and comes out as 1024 + u, its
// second row (4..7) in the high nibble, as 1024 + 16 u; base0 = 1024 + z0 and
// base1 = 64 + z1 (after the multiply by 1/16) take the zero points off.
MatA decode(uint q, f16vec2 base0, f16vec2 base1) {
    const f16vec2 SIXTEENTH = f16vec2(0.0625);
    f16vec2 p0 = unpackFloat2x16((q & 0x000F000Fu) | 0x64006400u) - base0;
    f16vec2 p1 = fma(unpackFloat2x16((q & 0x00F000F0u) | 0x64006400u), SIXTEENTH, -base1);
    uint q8 = q >> 8;
    f16vec2 p2 = unpackFloat2x16((q8 & 0x000F000Fu) | 0x64006400u) - base0;
    f16vec2 p3 = fma(unpackFloat2x16((q8 & 0x00F000F0u) | 0x64006400u), SIXTEENTH, -base1);
    MatA a;
    a[0] = p0.x;
    a[1] = p0.y;
    a[2] = p2.x;
    a[3] = p2.y;
    a[4] = p1.x;
    a[5] = p1.y;
    a[6] = p3.x;
    a[7] = p3.y;
    return a;
}

// B from two words holding its four f16 in element order (the first in the low half of
// q.x).
MatB b_fragment(uvec2 q) {
    f16vec2 e01 = unpackFloat2x16(q.x);
    f16vec2 e23 = unpackFloat2x16(q.y);
    MatB b;
    b[0] = e01.x;
    b[1] = e01.y;
    b[2] = e23.x;
    b[3] = e23.y;
    return b;
}
