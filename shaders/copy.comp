#version 450
// Benchmark ceiling only: copies uvec4s, one per invocation (a grid-stride loop keeps the
// dispatch within 65,535 workgroups).
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer Src { uvec4 src[]; };
layout(set = 0, binding = 1) writeonly buffer Dst { uvec4 dst[]; };
layout(push_constant) uniform Push { uint count; } p;

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < p.count; i += stride) {
        dst[i] = src[i];
    }
}
