/* Small helpers shared by the q4vk C examples and tests: f16/bf16 bit conversions, a
   seeded random generator, a monotonic clock and file loading. Header-only, C11. */
#ifndef Q4VK_EXAMPLES_UTIL_H
#define Q4VK_EXAMPLES_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* IEEE binary16 bits -> float (exact). */
static inline float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else { /* subnormal: normalize */
        int e = -1;
        do {
            man <<= 1;
            e++;
        } while (!(man & 0x400u));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* float -> IEEE binary16 bits, round to nearest even (finite inputs in range). */
static inline uint16_t f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: Inf */
    if (ax < 0x38800000u) {                                     /* subnormal or zero */
        float mag;
        memcpy(&mag, &ax, sizeof mag);
        /* Adding 0.5 makes the FPU round the value to a multiple of 2^-24 (RNE). */
        float t = mag + 0.5f;
        uint32_t tb;
        memcpy(&tb, &t, sizeof tb);
        return (uint16_t)(sign | (tb - 0x3f000000u));
    }
    uint32_t mant_odd = (ax >> 13) & 1u;
    ax += 0xc8000fffu + mant_odd; /* rebias exponent (-112 << 23) and round to nearest even */
    return (uint16_t)(sign | (ax >> 13));
}

/* x[0..len) rounded to f16: the bits into `halves` and their exact f32 values into `widened`. */
static inline void round_to_f16(const float *x, size_t len, uint16_t *halves, float *widened) {
    for (size_t i = 0; i < len; i++) {
        halves[i] = f32_to_f16(x[i]);
        widened[i] = f16_to_f32(halves[i]);
    }
}

/* bfloat16 bits -> float (exact). */
static inline float bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline uint32_t f32_bits(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* xorshift64*: a seeded, reproducible generator. */
typedef struct rng { uint64_t s; } rng;
static inline uint64_t rng_next(rng *r) {
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1DULL;
}
/* Uniform in (0, 1). */
static inline double rng_uniform(rng *r) {
    return ((double)(rng_next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}
/* Standard normal (Box-Muller; one value per call, the simplest form). */
static inline double rng_normal(rng *r) {
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static inline double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Weight (row, i) of the symmetric Q4 data q4vk_q4_quantize writes (n x k codes, two per
 * byte, even i in the low nibble; f16 scales per `group` along K), dequantized in f64. */
static inline double q4_weight(const uint8_t *w, const uint16_t *s, size_t k, size_t group, size_t row,
                               size_t i) {
    uint8_t byte = w[row * ((k + 1) / 2) + i / 2];
    int u = (i % 2 == 0) ? (byte & 15) : (byte >> 4);
    return (double)(u - 8) * (double)f16_to_f32(s[row * ((k + group - 1) / group) + i / group]);
}

/* ||y - ref|| / ||ref|| for y[m][n] against the f64 product x[m][k] W^T of such Q4 data. */
static inline double q4_rel_error(const float *y, const uint8_t *w, const uint16_t *s, const float *x, size_t n,
                                  size_t k, size_t group, size_t m) {
    double diff = 0, norm = 0;
    for (size_t t = 0; t < m; t++)
        for (size_t r = 0; r < n; r++) {
            double acc = 0;
            for (size_t i = 0; i < k; i++) acc += q4_weight(w, s, k, group, r, i) * (double)x[t * k + i];
            double d = y[t * n + r] - acc;
            diff += d * d;
            norm += acc * acc;
        }
    return sqrt(diff / norm);
}

/* Reads a whole file; returns NULL (and prints why) on failure. */
static inline void *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return NULL;
    }
    void *buf = NULL;
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc(size > 0 ? (size_t)size : 1);
        if (buf && fread(buf, 1, (size_t)size, f) != (size_t)size) {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "cannot read %s\n", path);
        return NULL;
    }
    *len = (size_t)size;
    return buf;
}

#endif
