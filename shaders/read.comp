#version 450
// Benchmark ceiling only: reads uvec4s and writes (almost) nothing, to measure what a kernel
// that only reads can pull from device memory. Each invocation keeps four loads in flight
// per round of a grid-stride loop (count / (4 · invocations) whole rounds, the same for
// every invocation) and folds them with XOR; the single store is taken
// only if the fold equals a 128-bit value no real data produces, so the loads cannot be
// removed and the bytes written are none.
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer Src { uvec4 src[]; };
layout(set = 0, binding = 1) writeonly buffer Dst { uvec4 dst[]; };
layout(push_constant) uniform Push { uint count; } p;

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uvec4 fold = uvec4(0u);
    uint rounds = p.count / (4u * stride);
    for (uint r = 0u, i = gl_GlobalInvocationID.x; r < rounds; r++, i += 4u * stride) {
        uvec4 a = src[i];
        uvec4 b = src[i + stride];
        uvec4 c = src[i + 2u * stride];
        uvec4 d = src[i + 3u * stride];
        fold ^= (a ^ b) ^ (c ^ d);
    }
    if (all(equal(fold, uvec4(0x9E3779B9u, 0x7F4A7C15u, 0xF39CC060u, 0x5A0B2F3Du)))) {
        dst[gl_GlobalInvocationID.x] = fold;
    }
}
