// How a chunk of 32 columns of x is rounded to one signed byte per element
// (`Q4VK_GEMV_ROUND_X_TO_INT8`), shared by the pre-pass that writes x in bytes
// (`x_digits.comp` built with BYTES) and the integer dot-product GEMV that rounds x itself
// (`gemv_q4.comp`'s X_BYTES_HERE), so that both use one formula. With a the chunk's largest
// magnitude: d = a / 127 and q = round((x p) f), to nearest even, where p = 2^64 for chunks
// whose a is below 2^-105 (else 1) and f = 127 / (a p), so that f stays finite (x p is
// exact). |q| <= 127 and q is within half a unit of x / d up to the f32 roundings of f and
// of the product. A chunk with an infinite or NaN element gets d NaN and every q 0; a chunk
// of zeros, or of subnormals on a device that flushes them to zero, gets d 0 and q 0.

// Below this (float bits of 2^-105), a chunk's values are scaled by 2^64 first.
const uint BYTES_TINY_LARGEST = 0x0B000000u;

// The rounding of one chunk (`byte_rounding`).
struct ByteRounding {
    float pre;    // p
    float factor; // f
    float d;      // the chunk's scale
    bool finite;  // no infinite or NaN element
};

// The rounding of a chunk whose largest magnitude has float bits `largest` (as compared as
// unsigned integers: an infinity or NaN is above every finite value).
ByteRounding byte_rounding(uint largest) {
    ByteRounding r;
    r.finite = largest < 0x7F800000u;
    float a = uintBitsToFloat(largest);
    r.pre = largest < BYTES_TINY_LARGEST ? 18446744073709551616.0 : 1.0;
    float scaled = a * r.pre;
    r.factor = r.finite && scaled > 0.0 ? 127.0 / scaled : 0.0;
    // A chunk the device flushed to zero (its q all 0) gets d 0 too.
    r.d = r.finite ? (r.factor > 0.0 ? a / 127.0 : 0.0) : uintBitsToFloat(0x7FC00000u);
    return r;
}

// Four values x of a finite chunk, already multiplied by its `pre` (exact: a power of two,
// only for tiny chunks, so callers multiply under a branch rather than per value), rounded
// to bytes (q).
ivec4 bytes_of(vec4 x, ByteRounding r) {
    return ivec4(roundEven(x * r.factor));
}

// Four bytes in one word, a in the low byte.
uint pack_bytes(int a, int b, int c, int d) {
    uint w = bitfieldInsert(uint(a) & 0xFFu, uint(b), 8, 8);
    w = bitfieldInsert(w, uint(c), 16, 8);
    return bitfieldInsert(w, uint(d), 24, 8);
}
