#version 450
// Minimal shader in the shape ncnn::Pipeline expects (see smoke.cpp notes):
//  * specialization constants with constant_id 0..N-1 (ncnn maps vector index i -> constantID i)
//  * a LITERAL local size (or none = 1,1,1): ncnn rewrites it with the values from
//    Pipeline::set_local_size_xyz() when it creates the shader module, so 64 here is
//    only a placeholder. This is the form ncnn's own shaders use.
//  * push constant block whose TYPE name is "parameter" (ncnn counts its members by OpMemberName)
layout (constant_id = 0) const float scale = 1.0;
layout (local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout (binding = 0) readonly buffer a_blob { float a[]; };
layout (binding = 1) writeonly buffer b_blob { float b[]; };

layout (push_constant) uniform parameter
{
    int n;
} p;

void main()
{
    int gx = int(gl_GlobalInvocationID.x);
    if (gx >= p.n)
        return;
    b[gx] = a[gx] * scale + 1.0;
}
