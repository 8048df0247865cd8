// Conventions of the exported GEMV (`q4vk_kernel_export`, compiled with -DEXPORT), those of
// ncnn's `Pipeline`: one descriptor set (weights 0, scales 1, zeros 2, x 3, y 4; the
// extended build, -DEXTENDED, appends per-group offsets 5 and the column order 6); the
// kernel's own specialization constants on ids 0..N-1, then the local size on 233..235; the
// push-constant block's type named `parameter` (ncnn counts its members by that name, so
// scripts/build-shaders.sh keeps the names with -g).
// A host may rewrite the local size and drop the 233..235 constants (ncnn does), so the
// kernel reads its workgroup size from WORKGROUP (id 5), which must equal local_size_x.
// Ids: ROWS 0, M 1, HAS_ZEROS 2, SCALE_F32 3, X_F16 4, WORKGROUP 5, UNROLL 6, SPLIT 7, then
// (EXTENDED) HAS_OFFSETS 8, HAS_K_ORDER 9, then SUBGROUP_SIZE (8, or 10 when EXTENDED; the
// portable variant has none), then (EXTENDED) Y_F16 (f16 y): 11, or 10 in the portable
// variant. Every build's ids are contiguous from 0 (ncnn maps entry i to id i and checks
// the count).
layout(local_size_x_id = 233, local_size_y_id = 234, local_size_z_id = 235) in;
layout(constant_id = 5) const uint WORKGROUP = 64;
#define SPEC_ROWS 0
#define SPEC_M 1
#define SPEC_HAS_ZEROS 2
#define SPEC_SCALE_F32 3
#define SPEC_X_F16 4
#define SPEC_UNROLL 6
#define SPEC_SPLIT 7
#ifdef EXTENDED
#define SPEC_HAS_OFFSETS 8
#define SPEC_HAS_K_ORDER 9
#define SPEC_SUBGROUP_SIZE 10
#ifdef SUBGROUP
#define SPEC_Y_F16 11
#else
#define SPEC_Y_F16 10
#endif
#define OFFSETS_BINDING 5
#define K_ORDER_BINDING 6
#else
#define SPEC_SUBGROUP_SIZE 8
#define OFFSETS_BINDING 2
#endif
#define XY_SET 0
#define X_BINDING 3
#define Y_BINDING 4
#define Push parameter
