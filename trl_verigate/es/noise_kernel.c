/* es-noise-v1 on the CPU in one pass per element: the same values as trl_verigate/es/noise.py's torch ops.
 *
 * noise.py defines the generator (its module docstring and `_normal_`); this loop performs, for each element, the
 * same IEEE-754 float32 operations in the same order, each correctly rounded:
 * - built with -ffp-contract=off -fno-fast-math (noise_kernel.py): no multiply-add is fused, nothing reassociated,
 *   divisions stay divisions;
 * - the 32-bit hash words are uint32 (wrap-around products, logical shifts), and the two places where noise.py
 *   shifts an int32 arithmetically (an exponent that may be negative) shift an int32_t, which GCC and Clang shift
 *   arithmetically;
 * - bit casts between float and int32 go through memcpy.
 * The float constants (polynomial coefficients and the scale factors) are passed in from noise.py, so they have one
 * definition. Only the scheduling differs: the compiler vectorizes the loop, which changes no element's value.
 */

#include <stdint.h>
#include <string.h>

#define LOG_TERMS 6
#define SIN_TERMS 7
/* floats[]: LOG_SERIES (6), SIN_SERIES (7), then the three scale constants below. */
#define MINUS_TWO_PI_OVER_2_24 (LOG_TERMS + SIN_TERMS)
#define MINUS_TWO_LN2 (LOG_TERMS + SIN_TERMS + 1)
#define SQRT_CHORD_SLOPE (LOG_TERMS + SIN_TERMS + 2)
#define FLOAT_CONSTANTS (LOG_TERMS + SIN_TERMS + 3)

static inline uint32_t mix32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    x ^= x >> 16;
    return x;
}

static inline float float_from_bits(uint32_t bits) {
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

static inline uint32_t bits_of(float value) {
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

/* noise.py's `_cos_two_pi`: cos(2π·u2) from the hash word h, u2 = (h >>> 8) / 2^24. */
static inline float cos_two_pi(uint32_t h, const float *c) {
    int32_t centered = (int32_t)(h ^ 0x80000000u) >> 8; /* j − 2^23, j = h >>> 8 */
    int32_t e = (1 << 22) - (centered < 0 ? -centered : centered);
    float minus_t = (float)e * c[MINUS_TWO_PI_OVER_2_24];
    float square = minus_t * minus_t;
    const float *sin_series = c + LOG_TERMS;
    float series = square * sin_series[SIN_TERMS - 1];
    for (int k = SIN_TERMS - 2; k >= 0; k--) {
        if (k < SIN_TERMS - 2) series = series * square;
        series = series + sin_series[k];
    }
    return minus_t * series;
}

/* noise.py's `_box_muller_radius`: sqrt(−2·ln u1) from the hash word h, u1 = (2·(h >>> 9) + 1) / 2^24. */
static inline float box_muller_radius(uint32_t h, const float *c, uint32_t sqrt_half_bits, uint32_t half_bits) {
    float u1_numerator = (float)(int32_t)(((h >> 8) & 0xFFFFFFu) | 1u);
    uint32_t w = bits_of(u1_numerator) - (sqrt_half_bits + (24u << 23));
    int32_t exponent = (int32_t)w >> 23;
    float mantissa = float_from_bits((w & 0x7FFFFFu) + sqrt_half_bits);
    float denominator = mantissa + 1.0f;
    float s = (mantissa - 1.0f) / denominator;
    float square = s * s;
    float series = square * c[LOG_TERMS - 1];
    for (int k = LOG_TERMS - 2; k >= 0; k--) {
        if (k < LOG_TERMS - 2) series = series * square;
        series = series + c[k];
    }
    series = series * s;
    float x = series * -4.0f;
    x = x + (float)exponent * c[MINUS_TWO_LN2];

    uint32_t v = bits_of(x) - (half_bits + (1u << 24));
    int32_t q_minus_1 = (int32_t)v >> 24;
    float m = float_from_bits((v & 0xFFFFFFu) + half_bits);
    float y = (m + 1.0f) * c[SQRT_CHORD_SLOPE];
    for (int step = 0; step < 4; step++) {
        y = y + m / y;
        if (step < 3) y = y * 0.5f;
    }
    return float_from_bits(bits_of(y) + (uint32_t)q_minus_1 * (1u << 23));
}

/* ε of element counter `counter` under the key words k (noise.py's `_normal_`). */
static inline float noise_at(uint64_t counter, const uint32_t *k, const float *c, uint32_t sqrt_half_bits,
                             uint32_t half_bits) {
    uint32_t x = mix32(mix32((uint32_t)counter ^ k[0]) ^ (uint32_t)(counter >> 32) ^ k[1]);
    float cosine = cos_two_pi(mix32(x ^ k[3]), c);
    float radius = box_muller_radius(mix32(x ^ k[2]), c, sqrt_half_bits, half_bits);
    return radius * cosine;
}

/* out[j] ← ε of element counter first + j, for j < count, with key words k0..k3 and noise.py's constants. */
void es_noise_fill(float *restrict out, int64_t count, uint64_t first, uint32_t k0, uint32_t k1, uint32_t k2,
                   uint32_t k3, const float *restrict float_constants, uint32_t sqrt_half_bits, uint32_t half_bits) {
    const uint32_t k[4] = {k0, k1, k2, k3};
    float c[FLOAT_CONSTANTS];
    for (int i = 0; i < FLOAT_CONSTANTS; i++) c[i] = float_constants[i];
    for (int64_t j = 0; j < count; j++) out[j] = noise_at(first + (uint64_t)j, k, c, sqrt_half_bits, half_bits);
}

/* out[j] ← addend[j] + ε_j·scale (the product rounded, then the sum), elements 0..count − 1 of one tensor's noise.
 * `out` may be `addend` (an accumulator). */
void es_noise_scaled_add(float *out, const float *addend, int64_t count, uint32_t k0, uint32_t k1, uint32_t k2,
                         uint32_t k3, float scale, const float *restrict float_constants, uint32_t sqrt_half_bits,
                         uint32_t half_bits) {
    const uint32_t k[4] = {k0, k1, k2, k3};
    float c[FLOAT_CONSTANTS];
    for (int i = 0; i < FLOAT_CONSTANTS; i++) c[i] = float_constants[i];
    for (int64_t j = 0; j < count; j++) {
        float scaled = noise_at((uint64_t)j, k, c, sqrt_half_bits, half_bits) * scale;
        out[j] = addend[j] + scaled;
    }
}

/* The two float stages on given hash words (tests run them on every input the stages can see, as for noise.py's). */
void es_noise_stages(const uint32_t *restrict hashes, float *restrict radius, float *restrict cosine, int64_t count,
                     const float *restrict float_constants, uint32_t sqrt_half_bits, uint32_t half_bits) {
    float c[FLOAT_CONSTANTS];
    for (int i = 0; i < FLOAT_CONSTANTS; i++) c[i] = float_constants[i];
    for (int64_t j = 0; j < count; j++) {
        radius[j] = box_muller_radius(hashes[j], c, sqrt_half_bits, half_bits);
        cosine[j] = cos_two_pi(hashes[j], c);
    }
}
