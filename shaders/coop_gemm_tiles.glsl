// What the tensor-core GEMMs on staged x share of their tiling (`gemm_q4_coop.comp`,
// `gemm_blocks_frag.comp`): a subgroup's loads of x for staging and where an accumulator
// element of its C fragments lies. The including shader defines TPS, SG, TILES and X_F16,
// declares the push-constant block `p` and includes x_parts.glsl first.

// This subgroup's activations of stage `stage`: tokens sub + SG i of the workgroup's tile,
// four inputs per invocation (0 for tokens past m).
void load_x(uint sub, uint lane, uint stage, uint tok0, out vec4 xv[TPS]) {
    [[unroll]] for (uint i = 0u; i < TPS; i++) {
        uint tok = tok0 + sub + SG * i;
        xv[i] = tok < p.m ? x4_at(tok, stage * 128u + 4u * lane) : vec4(0.0);
    }
}


// Row (within the workgroup) and token (within its tile) of accumulator element e of B
// matrix h in row tile t of the subgroup with row tiles rs and tokens from ts0 (C element
// e: row g4 + 8 (e / 2), column 8 h + 2 c4 + e % 2; for f32 activations columns 2 t' and
// 2 t' + 1 are token t').
uvec2 acc_place(uint rs, uint ts0, uint t, uint h, uint e, uint g4, uint c4) {
    uint row = (rs * TILES + t) * 16u + g4 + 8u * (e / 2u);
    uint tok = ts0 + (X_F16 ? 8u * h + 2u * c4 + e % 2u : 4u * h + c4);
    return uvec2(row, tok);
}
