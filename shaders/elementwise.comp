#version 450
// Benchmark baseline only: the epilogue passes of a decoder step whose GEMVs write plain y
// (`q4vk-bench --model`, the unfused form), updating y (binding 0) in place from a
// (binding 1) over `count` f32 values: mode 0 adds a bias, y[i] += a[i % n]; mode 1 adds a
// residual, y[i] += a[i]; mode 2 is SwiGLU, y[i] = silu(y[i]) a[i]. A grid-stride loop keeps
// the dispatch within 65,535 workgroups.
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) buffer Y { float y[]; };
layout(set = 0, binding = 1) readonly buffer A { float a[]; };
layout(push_constant) uniform Push {
    uint count; // values of y updated
    uint n;     // values per row (the bias's length)
    uint mode;  // 0 bias, 1 residual, 2 SwiGLU
} p;

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < p.count; i += stride) {
        float v = y[i];
        if (p.mode == 0u) {
            v += a[i % p.n];
        } else if (p.mode == 1u) {
            v += a[i];
        } else {
            v = v / (1.0 + exp(-v)) * a[i];
        }
        y[i] = v;
    }
}
