#version 450
// Cooperative-matrix fragment probe (run once per context on devices that offer the
// tensor-core GEMV): loads matrices whose element (r, c) holds its own row-major index,
// then each invocation writes the indices its fragment elements hold. The host compares
// them with the fragment layout `shaders/gemv_q4_coop.comp` is written for (an
// implementation chooses the element-to-invocation mapping; VK_KHR_cooperative_matrix
// leaves it unspecified).
//
// out[0 .. 256):   A 16x16 f16 (MatrixA), invocation i's element e at 8 i + e
// out[256 .. 384): B 16x8 f16 (MatrixB), at 256 + 4 i + e
// out[384 .. 512): C 16x8 f32 (Accumulator), at 384 + 4 i + e
// out[512 .. 515): the three fragment lengths
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require

layout(local_size_x = 32) in;
layout(set = 0, binding = 0) writeonly buffer Out { float o[]; };

shared float16_t index16[256];
shared float index32[128];

void main() {
    uint lane = gl_LocalInvocationID.x;
    for (uint i = lane; i < 256u; i += 32u) {
        index16[i] = float16_t(i);
    }
    for (uint i = lane; i < 128u; i += 32u) {
        index32[i] = float(i);
    }
    barrier();
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a;
    coopmat<float16_t, gl_ScopeSubgroup, 16, 8, gl_MatrixUseB> b;
    coopmat<float, gl_ScopeSubgroup, 16, 8, gl_MatrixUseAccumulator> c;
    coopMatLoad(a, index16, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
    coopMatLoad(b, index16, 0, 8, gl_CooperativeMatrixLayoutRowMajor);
    coopMatLoad(c, index32, 0, 8, gl_CooperativeMatrixLayoutRowMajor);
    for (uint e = 0u; e < uint(a.length()) && e < 8u; e++) {
        o[8u * lane + e] = float(a[e]);
    }
    for (uint e = 0u; e < uint(b.length()) && e < 4u; e++) {
        o[256u + 4u * lane + e] = float(b[e]);
    }
    for (uint e = 0u; e < uint(c.length()) && e < 4u; e++) {
        o[384u + 4u * lane + e] = c[e];
    }
    if (lane == 0u) {
        o[512] = float(a.length());
        o[513] = float(b.length());
        o[514] = float(c.length());
    }
}
