// The "engine's" own compute kernel for examples_c/engine_pipeline.c: one pipeline, one
// descriptor set, two behaviours selected by a push constant.
//   mode 0 ("produce x"): x[i]   = p * x0[i] + q
//   mode 1 ("consume y"): out[i] = y[i] * p + q
#version 450

layout(local_size_x = 64) in;

layout(set = 0, binding = 0) readonly buffer X0 { float x0[]; };
layout(set = 0, binding = 1) writeonly buffer X { float x[]; };
layout(set = 0, binding = 2) readonly buffer Y { float y[]; };
layout(set = 0, binding = 3) writeonly buffer Out { float outv[]; };

layout(push_constant) uniform Push {
    uint mode;
    uint count;
    float p;
    float q;
} pc;

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= pc.count) return;
    if (pc.mode == 0u) {
        x[i] = pc.p * x0[i] + pc.q;
    } else {
        outv[i] = y[i] * pc.p + pc.q;
    }
}
