// x as the GEMM kernels on GGUF blocks read it (`gemm_blocks.comp`,
// `gemm_blocks_coop.comp`): binding X_BINDING of set XY_SET, rows of p.x_stride elements,
// f32 or (X_F16) f16 two per 32-bit word. The including shader defines XY_SET, X_BINDING
// and X_F16 and declares the push-constant block `p` first.

layout(set = XY_SET, binding = X_BINDING) readonly buffer X1 { float x1[]; };
layout(set = XY_SET, binding = X_BINDING) readonly buffer XH { uint xh[]; };

// Input k of token tok.
float x_at(uint tok, uint k) {
    uint at = tok * p.x_stride + k;
    if (X_F16) {
        vec2 pair = unpackHalf2x16(xh[at >> 1]);
        return (at & 1u) == 0u ? pair.x : pair.y;
    }
    return x1[at];
}
