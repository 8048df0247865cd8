// What a GEMV or GEMM kernel does with each finished sum: `store_y(tok, row, v)` stores
// y[tok][row_base + row] (element tok · y_stride + row_base + row). This file declares y
// (binding Y_BINDING of set XY_SET); the including shader defines those and declares the
// push-constant block `p` first. The epilogue, specialization constant 20
// (`vk::params::Epilogue`'s bits), runs in this order:
//   v += bias[row_base + row]                 (EPI_BIAS; f16 bias with EPI_BIAS_F16)
//   v  = act(gate[tok][row_base + row]) · v   (EPI_SILU_GATE: silu, EPI_GELU_GATE: gelu)
//   v += residual[tok][row_base + row]        (EPI_RESIDUAL; y itself: EPI_RESIDUAL_IS_Y)
// then stores v as f32, or as f16 with EPI_Y_F16. The gate and the residual are laid out as
// y (its stride, its type) and share binding 3: a call has one or the other. A residual
// that is y itself is read through y's own binding (binding 3, read-only, would let the
// compiler move its read past this invocation's store to the same word). Bindings 2
// (bias) and 3 are bound to some readable buffer where the call has no such operand; 0
// keeps the plain store. Four bindings in set XY_SET and four in the matrix's set keep every
// kernel within 8 storage buffers per stage (Vulkan's limit on some devices).
// y is one variable of 32-bit words, stored to as f32 and, for an f16 y, written without
// 16-bit storage: two atomics clear and set this element's half of its word, so the
// neighbouring element (another invocation's, or not the call's at all) keeps its bits.
// The exported kernels (-DEXPORT) keep ncnn's bindings and store f32 y; the extended export
// (-DEXTENDED) and the export on GGUF blocks store f16 y where their specialization constant
// SPEC_Y_F16 (defined by the including shader) is true, and with a bias (-DEXPORT_BIAS) add
// the n f32 values of binding 7 (EXPORT_BIAS_BINDING) first.

// The exported builds with an f16 y: the extended export of the Q4 layout, and the
// exported kernels on GGUF blocks (which define EXPORT_Y_F16 themselves).
#if defined(EXPORT) && defined(EXTENDED)
#define EXPORT_Y_F16
#endif
#if !defined(EXPORT) || defined(EXPORT_Y_F16)
layout(set = XY_SET, binding = Y_BINDING) buffer Y { uint y_words[]; };

// Stores v as f16 element `at` of y (two per word, the first in the low half).
void store_half_y(uint at, float v) {
    uint shift = 16u * (at & 1u);
    uint bits = packHalf2x16(vec2(v, 0.0)) & 0xFFFFu;
    atomicAnd(y_words[at >> 1u], ~(0xFFFFu << shift));
    atomicOr(y_words[at >> 1u], bits << shift);
}
#endif

#ifdef EXPORT
#ifdef EXPORT_Y_F16
layout(constant_id = SPEC_Y_F16) const bool Y_F16 = false;
#else
layout(set = XY_SET, binding = Y_BINDING) writeonly buffer Y { float y[]; };
#endif
#ifdef EXPORT_BIAS
// Binding 7 of the Q4 layout's export; the kernels on blocks define their own binding and
// read it only where their constant EXPORT_HAS_BIAS says (EXPORT_BIAS_SPECIALIZED).
#ifndef EXPORT_BIAS_BINDING
#define EXPORT_BIAS_BINDING 7
#endif
layout(set = 0, binding = EXPORT_BIAS_BINDING) readonly buffer ExportBias { float export_bias[]; };
#ifndef EXPORT_BIAS_SPECIALIZED
const bool EXPORT_HAS_BIAS = true;
#endif
#endif
void store_y(uint tok, uint row, float v) {
#ifdef EXPORT_BIAS
    if (EXPORT_HAS_BIAS) {
        v += export_bias[p.row_base + row];
    }
#endif
    uint at = tok * p.y_stride + p.row_base + row;
#ifdef EXPORT_Y_F16
    if (Y_F16) {
        store_half_y(at, v);
    } else {
        y_words[at] = floatBitsToUint(v);
    }
#else
    y[at] = v;
#endif
}
#else
layout(constant_id = 20) const uint EPILOGUE = 0u;
const uint EPI_BIAS = 1u;
const uint EPI_BIAS_F16 = 2u;
const uint EPI_RESIDUAL = 4u;
const uint EPI_SILU_GATE = 8u;
const uint EPI_GELU_GATE = 16u;
const uint EPI_Y_F16 = 32u;
const uint EPI_RESIDUAL_IS_Y = 64u;

layout(set = XY_SET, binding = 2) readonly buffer EpilogueBias { uint bias_words[]; };
#ifdef PAIR
// The gate+up pair writes its gate projection there.
layout(set = XY_SET, binding = 3) buffer EpilogueOperand { uint operand_words[]; };
#else
layout(set = XY_SET, binding = 3) readonly buffer EpilogueOperand { uint operand_words[]; };
#endif

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

#ifdef PAIR
// A gate+up pair's row: g, the gate projection's sum, stored into the gate's output
// (binding 3, laid out as y), then up's sum u with the epilogue, whose gate is g as stored
// (rounded to f16 with an f16 y), as the call of up alone would read it.
void store_pair(uint tok, uint row, float g, float u) {
    uint at = tok * p.y_stride + p.row_base + row;
    bool half_y = (EPILOGUE & EPI_Y_F16) != 0u;
    if (half_y) {
        uint shift = 16u * (at & 1u);
        uint bits = packHalf2x16(vec2(g, 0.0)) & 0xFFFFu;
        atomicAnd(operand_words[at >> 1u], ~(0xFFFFu << shift));
        atomicOr(operand_words[at >> 1u], bits << shift);
        g = unpackHalf2x16(bits).x;
    } else {
        operand_words[at] = floatBitsToUint(g);
    }
    if ((EPILOGUE & EPI_BIAS) != 0u) {
        u += EPILOGUE_LOAD(bias_words, p.row_base + row, (EPILOGUE & EPI_BIAS_F16) != 0u);
    }
    if ((EPILOGUE & EPI_SILU_GATE) != 0u) {
        u *= silu(g);
    }
    if ((EPILOGUE & EPI_GELU_GATE) != 0u) {
        u *= gelu_tanh(g);
    }
    if (half_y) {
        store_half_y(at, u);
    } else {
        y_words[at] = floatBitsToUint(u);
    }
}
#endif

// Element `at` of y, read before this invocation stores it: the residual when it is y.
// An f16 y's word holds another invocation's element too, which it may be storing now:
// the word is read atomically.
float residual_in_y(uint at, bool half_y) {
    if (half_y) {
        return unpackHalf2x16(atomicOr(y_words[at >> 1u], 0u))[at & 1u];
    }
    return uintBitsToFloat(y_words[at]);
}

void store_y(uint tok, uint row, float v) {
    uint at = tok * p.y_stride + p.row_base + row;
    if (EPILOGUE == 0u) {
        y_words[at] = floatBitsToUint(v);
        return;
    }
    bool half_y = (EPILOGUE & EPI_Y_F16) != 0u;
    if ((EPILOGUE & EPI_BIAS) != 0u) {
        v += EPILOGUE_LOAD(bias_words, p.row_base + row, (EPILOGUE & EPI_BIAS_F16) != 0u);
    }
    if ((EPILOGUE & EPI_SILU_GATE) != 0u) {
        v *= silu(EPILOGUE_LOAD(operand_words, at, half_y));
    }
    if ((EPILOGUE & EPI_GELU_GATE) != 0u) {
        v *= gelu_tanh(EPILOGUE_LOAD(operand_words, at, half_y));
    }
    if ((EPILOGUE & EPI_RESIDUAL_IS_Y) != 0u) {
        v += residual_in_y(at, half_y);
    } else if ((EPILOGUE & EPI_RESIDUAL) != 0u) {
        v += EPILOGUE_LOAD(operand_words, at, half_y);
    }
    if (half_y) {
        store_half_y(at, v);
    } else {
        y_words[at] = floatBitsToUint(v);
    }
}
#endif
