// The exact scaling of a chunk of 32 activations and their rounding to bytes, shared by the
// pre-pass `x_digits.comp` and the GEMVs that round x in their workgroup (`x_here.glsl`),
// so that both give the same bits. `x_digits.comp` describes the arithmetic.
//
// Integer and f32 arithmetic only; x is handled as float bits (subnormals exact).

// floor(log2 |v|) of a non-zero finite |v| given as float bits (subnormals included).
int exponent_of(uint bits) {
    return bits >= 0x00800000u ? int(bits >> 23) - 127 : findMSB(bits) - 149;
}

// q = M 2^-s rounded to nearest, ties to even, for the significand M of |x| (its bits
// without the sign; M < 2^24) and a shift s (negative for the smallest subnormal rows).
int rounded_shift(uint significand, int s) {
    if (s <= 0) {
        return int(significand << uint(-s));
    }
    if (s >= 26) {
        return 0;
    }
    uint q = significand >> uint(s);
    uint rest = significand & ((1u << uint(s)) - 1u);
    uint half_unit = 1u << uint(s - 1);
    q += (rest > half_unit || (rest == half_unit && (q & 1u) == 1u)) ? 1u : 0u;
    return int(q);
}

// q = |x| 2^-tau rounded to nearest, ties to even, in integer arithmetic, for |x| given as
// float bits (subnormals included): |x| = M 2^(ev - 23) (subnormals: M = bits, ev = -126),
// so q = M 2^-s with s = tau + 23 - ev.
int scaled_magnitude(uint bits, int tau) {
    bool normal = bits >= 0x00800000u;
    int ev = normal ? int(bits >> 23) - 127 : -126;
    uint significand = normal ? (bits & 0x007FFFFFu) | 0x00800000u : bits;
    return rounded_shift(significand, tau + 23 - ev);
}

// A chunk's scaling, from the magnitude bits of its largest |x| (`chunk_scaling`).
struct ChunkScaling {
    // The chunk has a non-zero finite largest |x| (else every q is 0).
    bool live;
    // q = |x| 2^-tau; 256 for a chunk with an infinite or NaN element.
    int tau;
    // q = |x| * unit exactly in f32 (else the integer path).
    bool fast;
    float unit;
    // 127 / (the largest's q): rounds the largest to 127 (x in bytes only).
    float byte_factor;
};

// The scaling of a chunk whose largest magnitude bits are `largest`; `bytes`: also the
// factor of x rounded to bytes.
ChunkScaling chunk_scaling(uint largest, bool bytes) {
    ChunkScaling s;
    bool finite = largest < 0x7F800000u;
    s.live = finite && largest != 0u;
    s.tau = finite ? 0 : 256;
    s.fast = false;
    s.unit = 0.0;
    s.byte_factor = 0.0;
    if (s.live) {
        int e_chunk = exponent_of(largest);
        s.tau = e_chunk - 21;
        // Usually q = |x| 2^-tau exactly in f32 (a normal power of two; subnormal x, which a
        // device may flush to 0, are below 2^-126 <= 2^(e_chunk - 22), half a unit of q, so
        // they round to 0 either way); the integer path otherwise.
        s.fast = e_chunk >= -104;
        s.unit = uintBitsToFloat(uint(127 - max(s.tau, -125)) << 23);
        if (bytes) {
            s.byte_factor = 127.0 / float(scaled_magnitude(largest, s.tau));
        }
    }
    return s;
}

// The exact q = |x| 2^-tau (< 2^22) of magnitude bits `bits` in a live chunk.
int chunk_q(uint bits, ChunkScaling s) {
    return s.fast ? int(roundEven(uintBitsToFloat(bits) * s.unit)) : scaled_magnitude(bits, s.tau);
}

// The signed byte of x rounded to bytes, from its magnitude bits and sign, in a live chunk.
int rounded_byte(uint bits, bool negative, ChunkScaling s) {
    int q = min(int(roundEven(float(chunk_q(bits, s)) * s.byte_factor)), 127);
    return negative ? -q : q;
}

// The bytes of one word of 8 columns (their f32 bits, sign included) of a chunk scaled by
// `s`, packed as the GEMVs read them: (even columns, odd columns), one byte each in column
// order, or with `natural` (columns 0 .. 3, columns 4 .. 7); `sum` gains their bytes' sum.
// All zero in a chunk that is not live.
uvec2 word_bytes(uint bits[8], ChunkScaling s, bool natural, inout int sum) {
    uvec2 packed = uvec2(0u);
    if (!s.live) {
        return packed;
    }
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        int q = rounded_byte(bits[i] & 0x7FFFFFFFu, bits[i] >= 0x80000000u, s);
        sum += q;
        int offset = int(8u * (natural ? i % 4u : i / 2u));
        uint slot = natural ? i / 4u : i % 2u;
        packed[slot] = bitfieldInsert(packed[slot], uint(q), offset, 8);
    }
    return packed;
}

// The scale d = a / 127 of a chunk x rounded to bytes (a its largest |x|, as magnitude
// bits); NaN for a chunk with an infinite or NaN element.
float chunk_byte_scale(uint largest) {
    return largest < 0x7F800000u ? uintBitsToFloat(largest) / 127.0 : uintBitsToFloat(0x7FC00000u);
}
