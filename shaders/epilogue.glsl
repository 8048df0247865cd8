// What a GEMV or GEMM kernel does with each finished sum: `store_y(tok, row, v)` stores
// y[tok][row_base + row] (element tok · y_stride + row_base + row). The including shader
// declares y (`Y`, binding Y_BINDING of set XY_SET, float) and the push-constant block `p`
// first. The epilogue, specialization constant 20 (`vk::params::Epilogue`'s bits), runs in
// this order:
//   v += bias[row_base + row]                 (EPI_BIAS; f16 bias with EPI_BIAS_F16)
//   v  = act(gate[tok][row_base + row]) · v   (EPI_SILU_GATE: silu, EPI_GELU_GATE: gelu)
//   v += residual[tok][row_base + row]        (EPI_RESIDUAL; may be y itself)
// then stores v as f32, or as f16 with EPI_Y_F16. The gate and the residual are laid out as
// y (its stride, its type). Bindings 2 (bias), 3 (residual), 4 (gate) and 5 (y's words) of
// set XY_SET are bound to some readable buffer where the call has no such operand; 0 keeps
// the plain store.
// An f16 y is written without 16-bit storage: two atomics clear and set this element's half
// of its 32-bit word, so the neighbouring element (another invocation's, or not the call's
// at all) keeps its bits.
// The exported kernels (-DEXPORT) keep ncnn's bindings and store f32 y; the extended export
// with a bias (-DEXPORT_BIAS, with -DEXTENDED) adds the n f32 values of binding 7 first.

#ifdef EXPORT
#ifdef EXPORT_BIAS
layout(set = 0, binding = 7) readonly buffer ExportBias { float export_bias[]; };
#endif
void store_y(uint tok, uint row, float v) {
#ifdef EXPORT_BIAS
    v += export_bias[p.row_base + row];
#endif
    y[tok * p.y_stride + p.row_base + row] = v;
}
#else
layout(constant_id = 20) const uint EPILOGUE = 0u;
const uint EPI_BIAS = 1u;
const uint EPI_BIAS_F16 = 2u;
const uint EPI_RESIDUAL = 4u;
const uint EPI_SILU_GATE = 8u;
const uint EPI_GELU_GATE = 16u;
const uint EPI_Y_F16 = 32u;

// y's words for an f16 y's atomics: binding 5, bound to y only in calls with an f16 y (to
// a buffer the kernel never touches otherwise), so that the plain kernels' y stays
// write-only to whatever reads the bindings (the validation layer's hazard tracking).
layout(set = XY_SET, binding = 5) buffer YWords { uint y_words[]; };
layout(set = XY_SET, binding = 2) readonly buffer EpilogueBias { uint bias_words[]; };
layout(set = XY_SET, binding = 3) readonly buffer EpilogueResidual { uint residual_words[]; };
layout(set = XY_SET, binding = 4) readonly buffer EpilogueGate { uint gate_words[]; };

// Element i of a buffer of f16 (two per word, the first in the low half) or f32 values.
#define EPILOGUE_LOAD(words, i, f16) \
    ((f16) ? unpackHalf2x16(words[(i) >> 1u])[(i) & 1u] : uintBitsToFloat(words[i]))

float silu(float g) {
    return g / (1.0 + exp(-g));
}

// GELU in its tanh form (PyTorch's `approximate="tanh"`); tanh's argument is clamped where
// tanh is ±1 in f32 already, so that no implementation's exp overflows into NaN.
float gelu_tanh(float g) {
    float t = clamp(0.7978845608028654 * (g + 0.044715 * g * g * g), -10.0, 10.0);
    return 0.5 * g * (1.0 + tanh(t));
}

void store_y(uint tok, uint row, float v) {
    uint at = tok * p.y_stride + p.row_base + row;
    if (EPILOGUE == 0u) {
        y[at] = v;
        return;
    }
    bool half_y = (EPILOGUE & EPI_Y_F16) != 0u;
    if ((EPILOGUE & EPI_BIAS) != 0u) {
        v += EPILOGUE_LOAD(bias_words, p.row_base + row, (EPILOGUE & EPI_BIAS_F16) != 0u);
    }
    if ((EPILOGUE & EPI_SILU_GATE) != 0u) {
        v *= silu(EPILOGUE_LOAD(gate_words, at, half_y));
    }
    if ((EPILOGUE & EPI_GELU_GATE) != 0u) {
        v *= gelu_tanh(EPILOGUE_LOAD(gate_words, at, half_y));
    }
    if ((EPILOGUE & EPI_RESIDUAL) != 0u) {
        v += EPILOGUE_LOAD(residual_words, at, half_y);
    }
    if (!half_y) {
        y[at] = v;
        return;
    }
    uint shift = 16u * (at & 1u);
    uint bits = packHalf2x16(vec2(v, 0.0)) & 0xFFFFu;
    atomicAnd(y_words[at >> 1u], ~(0xFFFFu << shift));
    atomicOr(y_words[at >> 1u], bits << shift);
}
#endif
