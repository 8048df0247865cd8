#version 450
// Fused int4-dequant GEMV: y[m][row] = sum_k x[m][k] * s * (u - z).
// A workgroup owns ROWS consecutive rows; its invocations stride over the rows' 16-byte
// chunks (coalesced: neighbouring invocations read neighbouring chunks of a row). Each
// invocation keeps M x ROWS fp32 partial sums; per chunk it loads the ROWS weight uvec4s,
// their scales (and zeros) once, then for each activation row its 32 x values (8 vec4,
// shared by the ROWS rows) and accumulates s * sum x*(u - z). One reduction after
// the K loop: subgroupAdd + shared memory (SUBGROUP), or a shared-memory tree (portable).
#extension GL_GOOGLE_include_directive : require
#ifdef SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

#ifdef EXPORT
#include "gemv_export.glsl"
#else
layout(local_size_x_id = 0) in;
#define WORKGROUP gl_WorkGroupSize.x
#define SPEC_ID(i) (i)
#define XY_SET 1
#define X_BINDING 0
#define Y_BINDING 1
#endif
layout(constant_id = SPEC_ID(1)) const uint ROWS = 4;           // rows per workgroup
layout(constant_id = SPEC_ID(2)) const uint M = 1;              // activation rows
layout(constant_id = SPEC_ID(3)) const bool HAS_ZEROS = false;  // per-group zero points (else 8)
layout(constant_id = SPEC_ID(4)) const bool SCALE_F32 = false;  // scales stored as f32 (else f16)
layout(constant_id = SPEC_ID(5)) const bool X_F16 = false;      // activations are f16 (else f32)
layout(constant_id = SPEC_ID(6)) const uint SUBGROUP_SIZE = 32; // the device's subgroup size

#include "q4_common.glsl"

layout(set = 0, binding = 0) readonly buffer Weights { uvec4 w[]; };
layout(set = 0, binding = 1) readonly buffer Scales { uint s[]; };
layout(set = 0, binding = 2) readonly buffer Zeros { uint z[]; };
layout(set = XY_SET, binding = X_BINDING) readonly buffer X4 { vec4 x4[]; };
layout(set = XY_SET, binding = X_BINDING) readonly buffer X1 { float x1[]; };
layout(set = XY_SET, binding = X_BINDING) readonly buffer XH { uint xh[]; };
layout(set = XY_SET, binding = Y_BINDING) writeonly buffer Y { float y[]; };

const uint MR = M * ROWS;
#ifdef SUBGROUP
shared float red[(WORKGROUP / SUBGROUP_SIZE) * MR];
#else
shared float red[WORKGROUP * MR];
#endif

float scale_at(uint i) {
    if (SCALE_F32) {
        return uintBitsToFloat(s[i]);
    }
    vec2 pair = unpackHalf2x16(s[i >> 1]);
    return (i & 1u) == 0u ? pair.x : pair.y;
}

float zero_at(uint i) {
    if (!HAS_ZEROS) {
        return 8.0;
    }
    return float((z[i >> 2] >> (8u * (i & 3u))) & 0xFFu);
}

// One activation, 0 past K.
float x_at(uint row_start, uint kk) {
    if (kk >= p.k) {
        return 0.0;
    }
    uint i = row_start + kk;
    if (X_F16) {
        vec2 pair = unpackHalf2x16(xh[i >> 1]);
        return (i & 1u) == 0u ? pair.x : pair.y;
    }
    return x1[i];
}

// The 32 activations of chunk c of activation row mi, pre-scaled for dot8.
void load_x(uint mi, uint c, out vec4 xv[8]) {
    uint row_start = mi * p.x_stride;
    uint k0 = c * 32u;
    if (k0 + 32u <= p.k && ((row_start & 3u) == 0u)) {
        if (X_F16) {
            uint base = (row_start + k0) >> 1;
            for (uint i = 0u; i < 8u; i++) {
                xv[i] = vec4(unpackHalf2x16(xh[base + 2u * i]), unpackHalf2x16(xh[base + 2u * i + 1u]));
            }
        } else {
            uint base = (row_start + k0) >> 2;
            for (uint i = 0u; i < 8u; i++) {
                xv[i] = x4[base + i];
            }
        }
    } else {
        for (uint i = 0u; i < 8u; i++) {
            uint kk = k0 + 4u * i;
            xv[i] = vec4(x_at(row_start, kk), x_at(row_start, kk + 1u), x_at(row_start, kk + 2u),
                         x_at(row_start, kk + 3u));
        }
    }
    for (uint i = 0u; i < 8u; i++) {
        xv[i] *= X_PRESCALE;
    }
}

void main() {
    uint wg = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (wg >= p.wg_count) {
        return;
    }
    uint row0 = (p.wg_offset + wg) * ROWS;
    uint tid = gl_LocalInvocationID.x;

    float acc[MR];
    for (uint i = 0u; i < MR; i++) {
        acc[i] = 0.0;
    }

    for (uint c = tid; c < p.chunks; c += WORKGROUP) {
        uint g = c >> p.group_shift;
        uvec4 wv[ROWS];
        float sc[ROWS];
        vec4 off[ROWS];
        for (uint r = 0u; r < ROWS; r++) {
            uint row = row0 + r;
            if (row < p.rows) {
                wv[r] = w[row * p.chunks + c];
                sc[r] = scale_at(row * p.groups + g);
                off[r] = nibble_offset(zero_at(row * p.groups + g));
            } else {
                wv[r] = uvec4(0u);
                sc[r] = 0.0;
                off[r] = nibble_offset(0.0);
            }
        }
        for (uint mi = 0u; mi < M; mi++) {
            vec4 xv[8];
            load_x(mi, c, xv);
            for (uint r = 0u; r < ROWS; r++) {
                float d = dot8(wv[r].x, xv[0], xv[1], off[r]) + dot8(wv[r].y, xv[2], xv[3], off[r]) +
                          dot8(wv[r].z, xv[4], xv[5], off[r]) + dot8(wv[r].w, xv[6], xv[7], off[r]);
                acc[mi * ROWS + r] += sc[r] * d;
            }
        }
    }

#ifdef SUBGROUP
    for (uint i = 0u; i < MR; i++) {
        float v = subgroupAdd(acc[i]);
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
            y[mi * p.y_stride + p.row_base + row] = v;
        }
    }
#else
    for (uint i = 0u; i < MR; i++) {
        red[tid * MR + i] = acc[i];
    }
    barrier();
    for (uint half_size = WORKGROUP / 2u; half_size > 0u; half_size >>= 1) {
        if (tid < half_size) {
            for (uint i = 0u; i < MR; i++) {
                red[tid * MR + i] += red[(tid + half_size) * MR + i];
            }
        }
        barrier();
    }
    for (uint i = tid; i < MR; i += WORKGROUP) {
        uint mi = i / ROWS;
        uint row = row0 + i % ROWS;
        if (row < p.rows) {
            y[mi * p.y_stride + p.row_base + row] = red[i];
        }
    }
#endif
}
