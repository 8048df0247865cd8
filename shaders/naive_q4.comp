#version 450
// Benchmark baseline only: the classic tutorial GEMV, one invocation per output row,
// one u32 of 8 nibbles per load, a per-row f32 scale and zero point. y = W x, m = 1.
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer Weights { uint w[]; };
layout(set = 0, binding = 1) readonly buffer ScaleZero { vec2 sz[]; };
layout(set = 0, binding = 2) readonly buffer X { float x[]; };
layout(set = 0, binding = 3) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Push { uint n; uint k; } p;

void main() {
    uint row = gl_GlobalInvocationID.x;
    if (row >= p.n) {
        return;
    }
    uint words = p.k / 8u;
    float acc = 0.0;
    for (uint i = 0u; i < words; i++) {
        uint v = w[row * words + i];
        for (uint j = 0u; j < 8u; j++) {
            acc += float((v >> (4u * j)) & 0xFu) * x[i * 8u + j];
        }
    }
    float sum_x = 0.0;
    for (uint i = 0u; i < p.k; i++) {
        sum_x += x[i];
    }
    y[row] = sz[row].x * (acc - sz[row].y * sum_x);
}
