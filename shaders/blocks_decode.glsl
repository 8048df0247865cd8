// GGUF blocks in their native bytes (`layout::blocks`): the stream bindings of set 0 and
// the decode of one piece (32 weights) of a block, shared by the GEMV (`gemv_blocks.comp`)
// and the GEMM (`gemm_blocks.comp`). The including shader builds with -DBLOCK_TYPE=n.
//
// A matrix part is three streams, each row-major [rows][blocks per row] of one field group
// of every block (the file's bytes, regrouped; nothing added):
//   binding 0: the codes, QW 16-byte words per block;
//   binding 1: the scales (and minima), SA bytes per block, read as 32-bit words;
//   binding 2: Q5_0's and Q5_1's fifth bits, 4 bytes per block (other types bind binding 1
//              again, unread; their exported builds have no binding 2);
//   binding 3: unused (the matrix set's column order slot).
// Every block is split into pieces of 32 weights (a block of 32 is one piece, of 64 two,
// of 256 eight): two runs of 16 inputs, each with one scale (and offset); `piece_inputs`
// gives where they start.

// The block type (below), one build per type (-DBLOCK_TYPE=n): a driver then compiles the
// decode of that type only.
const uint TYPE = BLOCK_TYPE;

// Block types (the builds of `scripts/build-shaders.sh`).
const uint T_Q5_0 = 0u;
const uint T_Q5_1 = 1u;
const uint T_Q8_0 = 2u;
const uint T_Q5_K = 3u;
const uint T_Q6_K = 4u;
const uint T_IQ4_NL = 5u;
const uint T_IQ4_XS = 6u;
const uint T_MXFP4 = 7u;
const uint T_NVFP4 = 8u;
const uint T_Q4_1 = 9u;
const uint T_Q4_K = 10u;

// Code words (16 bytes) and pieces (32 weights) per block, weights per block.
const uint QW = TYPE == T_Q8_0 || TYPE == T_NVFP4 ? 2u
              : TYPE == T_Q5_K ? 10u
              : TYPE == T_Q6_K ? 13u
              : TYPE == T_IQ4_XS || TYPE == T_Q4_K ? 8u : 1u;
const uint PIECES = TYPE == T_Q5_K || TYPE == T_Q6_K || TYPE == T_IQ4_XS || TYPE == T_Q4_K ? 8u
                  : TYPE == T_NVFP4 ? 2u : 1u;
const uint BLOCK = 32u * PIECES;
// Scale bytes per block.
const uint SA = TYPE == T_Q5_K || TYPE == T_Q4_K ? 16u
              : TYPE == T_IQ4_XS ? 8u
              : TYPE == T_Q5_1 || TYPE == T_Q4_1 || TYPE == T_NVFP4 ? 4u
              : TYPE == T_MXFP4 ? 1u : 2u;
// Types whose weights carry a per-run offset (a minimum).
const bool HAS_MIN = TYPE == T_Q5_1 || TYPE == T_Q5_K || TYPE == T_Q4_1 || TYPE == T_Q4_K;

layout(set = 0, binding = 0) coherent readonly buffer Codes { uvec4 q[]; };
layout(set = 0, binding = 1) readonly buffer Scales { uint a[]; };
// The same stream as 16-byte words (Q4_K's and Q5_K's 16 scale bytes per block: one load;
// every part's streams start 16-byte aligned).
layout(set = 0, binding = 1) readonly buffer Scales16 { uvec4 a16[]; };
// The exported builds (-DEXPORT) of types without fifth bits leave binding 2 out (x
// takes its number).
#if !defined(EXPORT) || BLOCK_TYPE == 0 || BLOCK_TYPE == 1
layout(set = 0, binding = 2) readonly buffer HighBits { uint hb[]; };
#endif
#ifdef PAIR
// The second matrix of a gate+up pair (`gemv_blocks.comp` built with PAIR): its part's
// streams in set 2, in the same form as set 0's.
layout(set = 2, binding = 0) coherent readonly buffer Codes2 { uvec4 q2[]; };
layout(set = 2, binding = 1) readonly buffer Scales2 { uint a2[]; };
layout(set = 2, binding = 1) readonly buffer Scales16_2 { uvec4 a16_2[]; };
layout(set = 2, binding = 2) readonly buffer HighBits2 { uint hb2[]; };
#endif

// Matrix `mat`'s streams (`PAIR_STREAM`).
PAIR_STREAM(uvec4, codes_of, q, q2)
PAIR_STREAM(uint, scales_of, a, a2)
PAIR_STREAM(uvec4, scales16_of, a16, a16_2)
#if !defined(EXPORT) || BLOCK_TYPE == 0 || BLOCK_TYPE == 1
PAIR_STREAM(uint, high_bits_of, hb, hb2)
#endif

// IQ4_NL's and IQ4_XS's 16 values as signed bytes, four per word (no arrays: drivers turn
// a dynamically indexed constant array into memory or long select chains).
const uvec4 IQ4_WORDS = uvec4(0xBFAD9881u, 0xF6EADDCFu, 0x26190D01u, 0x71594535u);

// Small unsigned integers (below 2^23) less `bias` as floats without an integer-to-float
// conversion (a slow instruction on some GPUs): each is ORed into the mantissa of 2^23 and
// 2^23 + bias is subtracted, both exact.
vec4 from_integers(uvec4 u, float bias) {
    return uintBitsToFloat(u | uvec4(0x4B000000u)) - (8388608.0 + bias);
}

// The four bytes of v, each shifted right by `shift` and masked with `mask`.
uvec4 byte_fields(uint v, uint shift, uint mask) {
    return (uvec4(v) >> uvec4(shift, shift + 8u, shift + 16u, shift + 24u)) & uvec4(mask);
}

// The four signed bytes of word v (offset by 128 to unsigned, and back).
vec4 signed_bytes(uint v) {
    return from_integers(byte_fields(v ^ 0x80808080u, 0u, 0xFFu), 128.0);
}

// E2M1's 16 values doubled (integers: 0, 1, 2, 3, 4, 6, 8, 12, then their negatives) as
// signed bytes, four per word, as IQ4_WORDS.
const uvec4 FP4_WORDS = uvec4(0x03020100u, 0x0C080604u, 0xFDFEFF00u, 0xF4F8FAFCu);

// The bytes (two's complement) of four values of `table` (16 signed bytes, byte i & 3 of
// word i >> 2, chosen by selects: IQ4_WORDS or FP4_WORDS) by the four nibbles at shift
// `shift` of the bytes of word v.
uvec4 table_bytes(uint v, uint shift, uvec4 table) {
    uvec4 i = byte_fields(v, shift, 0xFu);
    bvec4 high = notEqual(i & 8u, uvec4(0u));
    bvec4 odd = notEqual(i & 4u, uvec4(0u));
    uvec4 word = mix(mix(uvec4(table.x), uvec4(table.y), odd),
                     mix(uvec4(table.z), uvec4(table.w), odd), high);
    return (word >> (8u * (i & 3u))) & 0xFFu;
}

// Those four values as floats.
vec4 looked_up(uint v, uint shift, uvec4 table) {
    return from_integers(table_bytes(v, shift, table) ^ 0x80u, 128.0);
}

// An unsigned E4M3 scale (bias 7) as f32.
float ue4m3(uint x) {
    uint e = (x >> 3) & 0xFu;
    float m = float(x & 7u);
    return e == 0u ? m * exp2(-9.0) : (1.0 + m / 8.0) * exp2(float(e) - 7.0);
}

// 2^(e - 128) from an E8M0 exponent (subnormal for e < 2).
float e8m0_half(uint e) {
    return uintBitsToFloat(e < 2u ? 0x00200000u << e : (e - 1u) << 23);
}

// Q4_K's and Q5_K's six-bit scales (.x) and minima (.y) of sub-blocks 2j and 2j + 1 (j =
// 0..3) in bytes 0 and 1, from its 12 scale bytes (words s.x, s.y, s.z), both sub-blocks at
// once on a 16-bit half of each word and without branches (neighbouring invocations take
// different j): sub-blocks 0..3 keep the low six bits of bytes i and i + 4; 4..7 the
// nibbles of byte i + 4 with the top two bits of bytes i - 4 and i above them.
uvec2 k_pair_scales_mins(uvec3 s, uint j) {
    uint at = 16u * (j & 1u);
    uvec2 low = (uvec2(s.x, s.y) >> at) & 0x3F3Fu;
    uint c = s.z >> at;
    uvec2 high = (uvec2(c, c >> 4) & 0x0F0Fu) | ((uvec2(s.x, s.y) >> (at + 2u)) & 0x3030u);
    return j < 2u ? low : high;
}

// The first inputs within a block of piece `piece`'s two runs of 16.
void piece_inputs(uint piece, out uint ka, out uint kb) {
    if (TYPE == T_Q5_K || TYPE == T_Q4_K) {
        // Bytes 16h .. 16h + 15 of chunk j: sub-blocks 2j and 2j + 1.
        ka = 64u * (piece >> 1) + 16u * (piece & 1u);
        kb = ka + 32u;
    } else if (TYPE == T_Q6_K) {
        // Bytes o .. o + 15 of half n's 64 ql bytes: inputs 128n + o and 128n + 64 + o.
        ka = 128u * (piece >> 2) + 16u * (piece & 3u);
        kb = ka + 64u;
    } else {
        ka = 32u * piece;
        kb = ka + 16u;
    }
}

// The 16-byte code word piece `piece` of block `gb` (index into the part's streams)
// decodes from.
uint piece_word(uint gb, uint piece) {
    return gb * QW + (TYPE == T_Q5_K ? 2u + piece : piece);
}

// Whether a piece decodes from a second 16-byte code word (`piece_second_word`): Q8_0's,
// Q5_K's and Q6_K's; the other types' kernels load no second one (NVFP4's second run lies
// in other 32-bit words of its one code word).
const bool SECOND_WORD = TYPE == T_Q8_0 || TYPE == T_Q5_K || TYPE == T_Q6_K;
// Whether a quarter's second 32-bit word (`quarter_second`) is one the first does not
// give: a word of the second code word, or NVFP4's other word of its one.
const bool SECOND_QUARTER_WORD = SECOND_WORD || TYPE == T_NVFP4;

// The second 16-byte code word of the piece's decode: Q8_0's second half, Q5_K's fifth
// bits, Q6_K's two high bits; the first again for the other types (unread, but NVFP4's,
// whose runs lie in its one word).
uint piece_second_word(uint gb, uint piece) {
    if (TYPE == T_Q8_0) {
        return gb * QW + 1u;
    }
    if (TYPE == T_Q5_K) {
        // Bits 2j, 2j + 1 of bytes 16h .. 16h + 15 of qh for code word 16h of chunk j.
        return gb * QW + (piece & 1u);
    }
    if (TYPE == T_Q6_K) {
        // Pairs of qh byte 32n + o % 32 + t for ql bytes o .. o + 15 of half n.
        uint o = 16u * (piece & 3u);
        return gb * QW + 8u + 2u * (piece >> 2) + ((o & 31u) >> 4);
    }
    return piece_word(gb, piece);
}

// Which 32-bit words of the first and second code words quarter c (0..3) of a piece
// decodes from: word c of each, but NVFP4's: word c % 2 (sub-block 2 piece) and word
// 2 + c % 2 (sub-block 2 piece + 1) of the first.
uint quarter_first(uint c) {
    return TYPE == T_NVFP4 ? c & 1u : c;
}
uint quarter_second(uint c) {
    return TYPE == T_NVFP4 ? 2u + (c & 1u) : c;
}

// Q5_0's and Q5_1's fifth bits of block gb of matrix `mat` (0 for the other types).
uint block_high_bits(uint mat, uint gb) {
#if defined(EXPORT) && BLOCK_TYPE != 0 && BLOCK_TYPE != 1
    return 0u;
#else
    return TYPE == T_Q5_0 || TYPE == T_Q5_1 ? high_bits_of(mat, gb) : 0u;
#endif
}

// The types whose codes index a table of values (IQ4's, E2M1's); the others' codes are
// integers of up to 8 bits.
const bool LOOKED_UP = TYPE == T_IQ4_NL || TYPE == T_IQ4_XS || TYPE == T_MXFP4 || TYPE == T_NVFP4;

// Bits 0 .. 3 of `nibble` as bit 0 of bytes 0 .. 3 (the four products do not overlap).
uint spread_bits(uint nibble) {
    return (nibble * 0x00204081u) & 0x01010101u;
}

#ifdef BYTE_TABLE
// Per code byte b of the LOOKED_UP types, the table's values (as bytes) of its low nibble
// (bits 0 .. 7) and of its high nibble (bits 16 .. 23): filled by the workgroup before its
// loop, four loads per 8 codes in place of a select chain per code. The including shader
// defines BYTE_TABLE and WORKGROUP and calls `fill_byte_values` in uniform control flow.
shared uint byte_values[LOOKED_UP ? 256 : 1];

// Fills `byte_values` (LOOKED_UP types); every invocation of the workgroup calls it.
void fill_byte_values(uint tid) {
    if (!LOOKED_UP) {
        return;
    }
    uvec4 table = TYPE == T_IQ4_NL || TYPE == T_IQ4_XS ? IQ4_WORDS : FP4_WORDS;
    for (uint b = tid; b < 256u; b += WORKGROUP) {
        uvec4 v = table_bytes((b & 0xFu) | ((b >> 4) << 8), 0u, table);
        byte_values[b] = v.x | (v.y << 16);
    }
    barrier();
}

// The table's values of the four bytes of code word w: of their low nibbles packed into
// .x (byte i's in byte i), of their high nibbles into .y.
uvec2 word_values(uint w) {
    uint low_pair = byte_values[w & 0xFFu] | (byte_values[(w >> 8) & 0xFFu] << 8);
    uint high_pair = byte_values[(w >> 16) & 0xFFu] | (byte_values[w >> 24] << 8);
    return uvec2((low_pair & 0xFFFFu) | (high_pair << 16), (low_pair >> 16) | (high_pair & 0xFFFF0000u));
}

// Quarter c (0..3) of piece `piece` of a LOOKED_UP type as `quarter_code_bytes` gives the
// others': the values (two's complement bytes) of inputs 4c .. 4c + 3 of the first run (ua)
// and of the second (ub).
void table_quarter_bytes(uint c, uint w1, uint w2, out uint ua, out uint ub) {
    if (TYPE == T_NVFP4) {
        // Low nibbles for quarters 0 and 1, high ones for 2 and 3.
        uvec2 a = word_values(w1);
        uvec2 b = word_values(w2);
        ua = c < 2u ? a.x : a.y;
        ub = c < 2u ? b.x : b.y;
    } else {
        uvec2 v = word_values(w1);
        ua = v.x;
        ub = v.y;
    }
}
#endif

// Quarter c (0..3) of piece `piece` of a type that is not LOOKED_UP, as packed bytes: the
// codes of inputs 4c .. 4c + 3 of the first run (ua, byte i input 4c + i) and of the second
// (ub), unsigned before the code bias (below 64), or for Q8_0 two's complement; from the
// 32-bit words w1 and w2 of the piece's first and second code words that `quarter_first`
// and `quarter_second` name, and the block's fifth bits h (`block_high_bits`).
void quarter_code_bytes(uint piece, uint c, uint w1, uint w2, uint h, out uint ua, out uint ub) {
    if (TYPE == T_Q8_0) {
        ua = w1;
        ub = w2;
    } else if (TYPE == T_Q6_K) {
        // ql word `piece` = bytes o .. o + 15 of half n's 64: inputs 128n + o + t (low) and
        // 128n + 64 + o + t (high); their two high bits: pairs o/32 and 2 + o/32 of
        // qh byte 32n + o % 32 + t.
        uint pa = 2u * ((16u * (piece & 3u)) >> 5);
        ua = (w1 & 0x0F0F0F0Fu) | (((w2 >> pa) & 0x03030303u) << 4);
        ub = ((w1 >> 4) & 0x0F0F0F0Fu) | (((w2 >> (pa + 4u)) & 0x03030303u) << 4);
    } else {
        // Q4_1, Q5_0, Q5_1, Q4_K, Q5_K: byte j is input j's low nibble and input j + 16's
        // (Q4_K, Q5_K: j + 32's) high one; Q5_0's and Q5_1's fifth bits are bits j and
        // j + 16 of qh, Q5_K's bits 2 (piece / 2) and 2 (piece / 2) + 1 of the same bytes of
        // its qh word.
        ua = w1 & 0x0F0F0F0Fu;
        ub = (w1 >> 4) & 0x0F0F0F0Fu;
        if (TYPE == T_Q5_0 || TYPE == T_Q5_1) {
            ua |= spread_bits((h >> (4u * c)) & 0xFu) << 4;
            ub |= spread_bits((h >> (16u + 4u * c)) & 0xFu) << 4;
        } else if (TYPE == T_Q5_K) {
            uint j = piece >> 1;
            ua |= ((w2 >> (2u * j)) & 0x01010101u) << 4;
            ub |= ((w2 >> (2u * j + 1u)) & 0x01010101u) << 4;
        }
    }
}

// The four fields `mask << shift` of the bytes of v (shift + the field's width <= 8) less
// `bias`, as floats, decoded in place: each field is masked where it lies (bytes 2 and 3
// after one shift of the word by 16) and ORed into the mantissa of a power of two whose
// exponent makes the field's lowest bit weigh 1 (2^(23 - shift) for bytes 0 and 2,
// 2^(15 - shift) for bytes 1 and 3); that power plus `bias` is subtracted, both exact. One
// mask-and-or (a single LOP3 on NVIDIA) and one subtraction per field, no conversion.
vec4 byte_codes(uint v, uint shift, uint mask, float bias) {
    uint even = (150u - shift) << 23;
    uint odd = (142u - shift) << 23;
    uvec4 fields = uvec4(v, v, v >> 16, v >> 16) & uvec4(mask << shift, mask << (shift + 8u), mask << shift, mask << (shift + 8u));
    float low = uintBitsToFloat(even);
    float high = uintBitsToFloat(odd);
    return uintBitsToFloat(fields | uvec4(even, odd, even, odd)) - (vec4(low, high, low, high) + bias);
}

// Quarter c (0..3) of piece `piece`: its codes as numbers, qa of inputs 4c .. 4c + 3 of
// the first run, qb of the second's (in input order; the runs: `piece_inputs`), from the
// 32-bit words w1 and w2 of the piece's first and second code words that `quarter_first`
// and `quarter_second` name, and the block's fifth bits h (`block_high_bits`).
void decode_quarter(uint piece, uint c, uint w1, uint w2, uint h, out vec4 qa, out vec4 qb) {
#ifdef BYTE_TABLE
    if (LOOKED_UP) {
        uint ua;
        uint ub;
        table_quarter_bytes(c, w1, w2, ua, ub);
        qa = byte_codes(ua ^ 0x80808080u, 0u, 0xFFu, 128.0);
        qb = byte_codes(ub ^ 0x80808080u, 0u, 0xFFu, 128.0);
        return;
    }
#endif
    if (TYPE == T_IQ4_NL || TYPE == T_MXFP4 || TYPE == T_IQ4_XS) {
        // Byte j: input j low nibble, j + 16 high.
        uvec4 table = TYPE == T_MXFP4 ? FP4_WORDS : IQ4_WORDS;
        qa = looked_up(w1, 0u, table);
        qb = looked_up(w1, 4u, table);
    } else if (TYPE == T_NVFP4) {
        // Sub-block 2 piece (bytes 0..7 of the word) and 2 piece + 1 (bytes 8..15); byte
        // j of a sub-block: input j low nibble, j + 8 high.
        qa = looked_up(w1, 4u * (c >> 1), FP4_WORDS);
        qb = looked_up(w2, 4u * (c >> 1), FP4_WORDS);
    } else if (TYPE == T_Q4_1 || TYPE == T_Q4_K) {
        // Straight from the code word: low nibbles, then high nibbles.
        qa = byte_codes(w1, 0u, 0xFu, 0.0);
        qb = byte_codes(w1, 4u, 0xFu, 0.0);
    } else {
        uint ua;
        uint ub;
        quarter_code_bytes(piece, c, w1, w2, h, ua, ub);
        if (TYPE == T_Q8_0) {
            // Two's complement to unsigned offset by 128.
            qa = byte_codes(ua ^ 0x80808080u, 0u, 0xFFu, 128.0);
            qb = byte_codes(ub ^ 0x80808080u, 0u, 0xFFu, 128.0);
        } else {
            uint mask = TYPE == T_Q6_K ? 0x3Fu : 0x1Fu;
            float bias = TYPE == T_Q6_K ? 32.0 : TYPE == T_Q5_0 ? 16.0 : 0.0;
            qa = byte_codes(ua, 0u, mask, bias);
            qb = byte_codes(ub, 0u, mask, bias);
        }
    }
}

// The words of matrix `mat`'s scales stream that piece `piece` of block gb takes its scales
// from, loaded and not yet used (`scales_from_words`), so that a kernel can load a piece
// ahead of its decode: `d` the word of the block's f16 scale (or its scale and minimum, or
// its E8M0 or UE4M3 scale bytes), `s` the block's sub-block scales (Q4_K's and Q5_K's 16
// header bytes, Q6_K's 16 signed scales, IQ4_XS's two words; else unused).
void scale_words(uint mat, uint gb, uint piece, out uvec4 s, out uint d) {
    s = uvec4(0u);
    d = 0u;
    if (TYPE == T_Q5_0 || TYPE == T_IQ4_NL || TYPE == T_Q8_0 || TYPE == T_Q6_K) {
        d = scales_of(mat, gb >> 1);
    } else if (TYPE == T_MXFP4) {
        d = scales_of(mat, gb >> 2);
    } else if (TYPE == T_Q5_1 || TYPE == T_Q4_1 || TYPE == T_NVFP4) {
        d = scales_of(mat, gb);
    }
    if (TYPE == T_Q5_K || TYPE == T_Q4_K) {
        s = scales16_of(mat, gb);
    } else if (TYPE == T_Q6_K) {
        s = codes_of(mat, gb * QW + 12u);
    } else if (TYPE == T_IQ4_XS) {
        s.xy = uvec2(scales_of(mat, 2u * gb), scales_of(mat, 2u * gb + 1u));
    }
}

// Piece `piece` of block `gb`'s scales and offsets (s_a, o_a, s_b, o_b) of its two runs,
// from its `scale_words`.
vec4 scales_from_words(uvec4 s, uint d, uint gb, uint piece) {
    if (TYPE == T_Q5_0 || TYPE == T_IQ4_NL || TYPE == T_Q8_0) {
        vec2 pair = unpackHalf2x16(d);
        float dd = (gb & 1u) == 0u ? pair.x : pair.y;
        return vec4(dd, 0.0, dd, 0.0);
    } else if (TYPE == T_Q5_1 || TYPE == T_Q4_1) {
        vec2 dm = unpackHalf2x16(d);
        return vec4(dm.x, dm.y, dm.x, dm.y);
    } else if (TYPE == T_MXFP4) {
        float dd = e8m0_half((d >> (8u * (gb & 3u))) & 0xFFu);
        return vec4(dd, 0.0, dd, 0.0);
    } else if (TYPE == T_NVFP4) {
        uint h = d >> (16u * piece);
        return vec4(ue4m3(h & 0xFFu) * 0.5, 0.0, ue4m3((h >> 8) & 0xFFu) * 0.5, 0.0);
    } else if (TYPE == T_Q5_K || TYPE == T_Q4_K) {
        vec2 dm = unpackHalf2x16(s.x);
        uvec2 sm = k_pair_scales_mins(s.yzw, piece >> 1);
        vec4 sc = byte_codes(sm.x, 0u, 0x3Fu, 0.0);
        vec4 mn = byte_codes(sm.y, 0u, 0x3Fu, 0.0);
        return vec4(dm.x * sc.x, -(dm.y * mn.x), dm.x * sc.y, -(dm.y * mn.y));
    } else if (TYPE == T_Q6_K) {
        uint n = piece >> 2;
        uint o = 16u * (piece & 3u);
        uint ia = 8u * n + (o >> 4);
        uint ib = ia + 4u;
        vec2 pair = unpackHalf2x16(d);
        float dd = (gb & 1u) == 0u ? pair.x : pair.y;
        // The two runs' signed 8-bit scales, offset by 128 to unsigned and back.
        uvec2 sc = (uvec2(s[ia >> 2], s[ib >> 2]) >> (8u * uvec2(ia & 3u, ib & 3u))) & 0xFFu;
        vec4 scf = from_integers(uvec4(sc ^ 0x80u, 0u, 0u), 128.0);
        return vec4(dd * scf.x, 0.0, dd * scf.y, 0.0);
    }
    // IQ4_XS.
    uint lo = (s.y >> (4u * piece)) & 0xFu;
    uint hi = (s.x >> (16u + 2u * piece)) & 3u;
    float dd = unpackHalf2x16(s.x).x;
    float dl = dd * from_integers(uvec4(lo | (hi << 4)), 32.0).x;
    return vec4(dl, 0.0, dl, 0.0);
}

// Piece `piece` of block `gb`'s scales and offsets (s_a, o_a, s_b, o_b) of its two runs
// (of matrix `mat`).
vec4 piece_scales(uint mat, uint gb, uint piece) {
    uvec4 s;
    uint d;
    scale_words(mat, gb, piece, s, d);
    return scales_from_words(s, d, gb, piece);
}
