#version 450
// Same as scale.comp but with local size on spec ids 233/234/235 (local_size_*_id).
// ncnn also accepts this and sets them from Pipeline::set_local_size_xyz(), BUT its
// reflection counts SpecId 233-235 as specialization constants: the vector passed to
// Pipeline::create() must then have N+3 entries (constant_id 0..N-1 first, then 3
// ignored fillers), otherwise "pipeline specialization count mismatch, expect 4 but got 1".
layout (constant_id = 0) const float scale = 1.0;
layout (local_size_x_id = 233, local_size_y_id = 234, local_size_z_id = 235) in;

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
