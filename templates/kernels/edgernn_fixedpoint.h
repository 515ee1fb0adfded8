/* Fixed-point helpers of TFLite's reference integer kernels (gemmlowp semantics).
 * Right shifts of negative values are arithmetic on every compiler edgernn supports. */
#ifndef EDGERNN_FIXEDPOINT_H
#define EDGERNN_FIXEDPOINT_H

#include <stdint.h>

static inline int32_t edgernn_srdhm(int32_t a, int32_t b)
{
    int64_t ab;
    int64_t nudge;
    if (a == b && a == INT32_MIN) {
        return INT32_MAX;
    }
    ab = (int64_t)a * (int64_t)b;
    nudge = ab >= 0 ? ((int64_t)1 << 30) : (1 - ((int64_t)1 << 30));
    return (int32_t)((ab + nudge) / ((int64_t)1 << 31));
}

static inline int32_t edgernn_rdbpot(int32_t x, int exponent)
{
    const int32_t mask = (int32_t)(((int64_t)1 << exponent) - 1);
    const int32_t remainder = x & mask;
    const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

/* tflite::MultiplyByQuantizedMultiplier(int32_t, int32_t, int): two roundings, halves away from zero. */
static inline int32_t edgernn_mbqm(int32_t x, int32_t multiplier, int shift)
{
    const int left = shift > 0 ? shift : 0;
    const int right = shift > 0 ? 0 : -shift;
    return edgernn_rdbpot(edgernn_srdhm((int32_t)((int64_t)x * ((int64_t)1 << left)), multiplier), right);
}

/* The same product with one rounding, halves toward +infinity: what LiteRT's 8-bit FULLY_CONNECTED
 * gives (its reference kernel multiplies through ruy, whose rescaling rounds once). */
static inline int32_t edgernn_mbqm_single(int32_t x, int32_t multiplier, int shift)
{
    const int total_shift = 31 - shift;
    const int64_t round = (int64_t)1 << (total_shift - 1);
    return (int32_t)(((int64_t)x * (int64_t)multiplier + round) >> total_shift);
}

/* The 16x8 FULLY_CONNECTED rescale of LiteRT (through ruy): the 64-bit accumulator times the full
 * Q31 multiplier, one rounding, halves toward +infinity. Exact while |x| < 2^32, which holds for
 * int16 x int8 dot products of fewer than 2^13 terms. */
static inline int32_t edgernn_mbqm64(int64_t x, int32_t multiplier, int shift)
{
    const int total_shift = 31 - shift;
    const int64_t round = (int64_t)1 << (total_shift - 1);
    return (int32_t)((x * (int64_t)multiplier + round) >> total_shift);
}

static inline int32_t edgernn_clamp(int32_t x, int32_t lo, int32_t hi)
{
    return x < lo ? lo : (x > hi ? hi : x);
}

#endif /* EDGERNN_FIXEDPOINT_H */
