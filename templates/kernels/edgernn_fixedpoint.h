/* Fixed-point helpers of TFLite's reference integer kernels (gemmlowp semantics).
 * Right shifts of negative values are arithmetic on every compiler edgernn supports. */
#ifndef EDGERNN_FIXEDPOINT_H
#define EDGERNN_FIXEDPOINT_H

#include <stdint.h>

#include "edgernn_dot.h" /* and through it the kernel set's edgernn_arch.h (edgernn_clamp, edgernn_mbqm_hi_tight) */

/* gemmlowp's SaturatingRoundingDoublingHighMul. Its nudge (2^30, or 1 - 2^30 for a negative product)
 * followed by a division that truncates toward zero is the same as floor((a*b + 2^30) / 2^31) for
 * every product: the ties of negative products go up, like the positive ones. One multiply, one add,
 * one shift. */
static inline int32_t edgernn_srdhm(int32_t a, int32_t b)
{
    if (a == b && a == INT32_MIN) {
        return INT32_MAX;
    }
    return (int32_t)(((int64_t)a * (int64_t)b + ((int64_t)1 << 30)) >> 31);
}

/* gemmlowp's RoundingDivideByPOT: halves away from zero, i.e. floor((x + 2^(e-1) - [x < 0]) / 2^e). */
static inline int32_t edgernn_rdbpot(int32_t x, int exponent)
{
    /* gemmlowp's mask and threshold, 0 <= exponent <= 31: no 64-bit add or shift, which a 32-bit
     * core pays for (the LSTM's cell update calls this per element) */
    const int32_t mask = (int32_t)((1u << exponent) - 1u);
    const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> exponent) + ((x & mask) > threshold ? 1 : 0);
}

/* RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x * 2^left_shift, m), e) in one 64-bit
 * expression, the rescale of TFLite's ADD/SUB inputs and outputs and of MultiplyByQuantizedMultiplier.
 * With y = x * m, c = 2^(30 - left_shift) and A = 2^(31 - left_shift), the high multiply is
 * q = floor((y + c) / A) (the identity above, the 2^left_shift factor cancelling), and for e > 0
 * floor((floor(u / A) + d) / 2^e) = floor((u + A * d) / (A * 2^e)) merges the two roundings, the sign
 * of q being the sign of y + c. Preconditions, as in TFLite: x * 2^left_shift fits in int32,
 * left_shift <= 30, e >= 0, m != INT32_MIN. */
typedef struct {
    int64_t m;        /* the Q31 multiplier */
    int64_t nudge;    /* c */
    int64_t round;    /* A * 2^(e-1), or 0 when e == 0 */
    int64_t neg;      /* A, or 0 when e == 0 */
    int shift;        /* 31 - left_shift + e */
} edgernn_rescale_t;

static inline edgernn_rescale_t edgernn_rescale_make(int32_t multiplier, int left_shift, int e)
{
    edgernn_rescale_t r;
    r.m = multiplier;
    r.nudge = (int64_t)1 << (30 - left_shift);
    r.round = e > 0 ? (int64_t)1 << (30 - left_shift + e) : 0;
    r.neg = e > 0 ? (int64_t)1 << (31 - left_shift) : 0;
    r.shift = 31 - left_shift + e;
    return r;
}

static inline int32_t edgernn_rescale(const edgernn_rescale_t *r, int32_t x)
{
    const int64_t t = (int64_t)x * r->m + r->nudge;
    return (int32_t)((t + r->round - ((t >> 63) & r->neg)) >> r->shift);
}

/* edgernn_rescale with left_shift 0 (the output rescale of ADD/SUB and MUL) as one 32-bit high multiply,
 * for an x that generation has bounded: |x| * 2^up <= INT32_MAX, 2 <= up, up + e <= 31, and a multiplier
 * 2^30 <= m < 2^31 (QuantizeMultiplier's range). With t = x*m + 2^30 the rescale is
 * floor((x*m + 2^30 + 2^(30+e) - [t < 0] 2^31) / 2^(31+e)) (e = 0 drops the last two terms). Scaled by
 * 2^up, every added term is a whole multiple of 2^32, so it passes through the floor of the high word:
 * (mulh(x * 2^up, m) + 2^(up-2) + 2^(up-2+e) - [t < 0] 2^(up-1)) >> (up - 1 + e). t < 0 exactly when
 * x < 0, except x = -1 with m = 2^30 (t = 0). No 64-bit add or shift: a 32-bit core's mulh and a few
 * adds (tests/c/fixedpoint_check.c holds it against edgernn_rescale). */
static inline int32_t edgernn_rescale_narrow(int32_t x, int32_t m, int up, int e)
{
    const int32_t scaled = (int32_t)((uint32_t)x << up);
    /* m = 2^30 (a rescale by a half, as an ADD of a constant at the output's scale has): the high word is
     * floor(scaled * 2^30 / 2^32) = scaled >> 2, a shift where the multiply is a 5-cycle mulh on GAP8; the
     * loops pass m as a literal, so the test folds away */
    const int32_t hi = m == ((int32_t)1 << 30) ? scaled >> 2 : (int32_t)(((int64_t)scaled * m) >> 32);
    const int32_t neg = m == ((int32_t)1 << 30) ? x < -1 : x < 0;
    const int32_t add = ((int32_t)1 << (up - 2)) +
                        (e > 0 ? ((int32_t)1 << (up - 2 + e)) - neg * ((int32_t)1 << (up - 1)) : 0);
    return (hi + add) >> (up - 1 + e);
}

/* edgernn_rescale in 32-bit words, for the 16-bit ops' operands: |x| * 2^left <= 2^30, left <= 29,
 * 0 <= e <= 30, any multiplier |m| < 2^31 (a SUB's is negative). With D = 2^(31 - left) and
 * P = x*m = hi * 2^32 + lo, h = floor((P + D/2) / D) = hi * 2^(1 + left) + floor((floor(lo / 2^(30 - left)) + 1) / 2)
 * (lo unsigned), and |h| <= 2^30; the rescale is floor((h + 2^(e-1) - [h < 0]) / 2^e), or h for e = 0, since
 * D's multiples pass through the floor. A mul and a mulh, no 64-bit add or variable shift: a 32-bit core's
 * int16 MUL, ADD and SUB in a fused loop (tests/c/fixedpoint_check.c holds it against edgernn_rescale). */
static inline int32_t edgernn_rescale_words(int32_t x, int32_t m, int left, int e)
{
    const int64_t p = (int64_t)x * m;
    const int32_t hi = (int32_t)((uint64_t)p >> 32);
    const uint32_t lo = (uint32_t)p;
    const int32_t h = (int32_t)((uint32_t)hi << (1 + left)) + (int32_t)(((lo >> (30 - left)) + 1u) >> 1);
    return e > 0 ? (h + ((int32_t)1 << (e - 1)) - (h < 0)) >> e : h;
}

/* tflite::MultiplyByQuantizedMultiplier(int32_t, int32_t, int): two roundings, halves away from zero. */
static inline int32_t edgernn_mbqm(int32_t x, int32_t multiplier, int shift)
{
    const int left = shift > 0 ? shift : 0;
    const int right = shift > 0 ? 0 : -shift;
    return edgernn_rdbpot(edgernn_srdhm((int32_t)((int64_t)x * ((int64_t)1 << left)), multiplier), right);
}

/* edgernn_mbqm (two roundings, halves away from zero) from the high word of the product, for a right
 * shift e = -shift >= 2 (the convolutions' usual case), else edgernn_mbqm itself. With P = x * m =
 * hi * 2^32 + lo and q = SaturatingRoundingDoublingHighMul(x, m), the nested floors merge into
 * floor((P + 2^30 + 2^(30+e) - [q < 0] 2^31) / 2^(31+e)); 2^(30+e) is a multiple of 2^32, so only hi and
 * the carry (or borrow) of lo + 2^30 - [q < 0] 2^31 reach the result: (hi' + 2^(e-2)) >> (e-1). q < 0
 * exactly when x < 0, except x = -1 with m = 2^30 (QuantizeMultiplier's m >= 2^30). On a 32-bit core: no
 * 64-bit add or shift (tests/backend/test_conv.py holds it against edgernn_mbqm). */
static inline int32_t edgernn_mbqm_hi(int32_t x, int32_t multiplier, int shift)
{
    if (shift <= -2) {
        const int64_t p = (int64_t)x * (int64_t)multiplier;
        const uint32_t lo = (uint32_t)p;
        int32_t hi = (int32_t)(p >> 32);
        const int neg = multiplier == ((int32_t)1 << 30) ? x < -1 : x < 0;
        hi += neg ? -(int32_t)(lo < 0x40000000u) : (int32_t)(lo >= 0xC0000000u);
        return (hi + ((int32_t)1 << (-shift - 2))) >> (-shift - 1);
    }
    return edgernn_mbqm(x, multiplier, shift);
}

/* edgernn_mbqm_hi in 9 instructions, for a multiplier m with 2^30 < m < 2^31 and a right shift e >= 2 (the
 * caller checks both once per channel or row: edgernn_mbqm_hi_tight_applies), e1 = e - 1. Its carry
 * hi' = hi + (x < 0 ? -(lo < 2^30) : (lo >= 2^32 - 2^30)) without a branch: with K = 2^30 + [x < 0] 2^31
 * (the sign bit of x put on 2^30), the unsigned add lo + K carries exactly when lo >= 2^32 - 2^30 for
 * x >= 0 and when lo >= 2^30 for x < 0, and the borrow of the negative case is that carry less 1: the -1
 * is the sign word s = x >> 31, which Xpulp's p.addRN adds with the rounding constant before its shift:
 * p.addRN hi, s, e1 = (hi + s + 2^(e1-1)) >> e1, the 32-bit sum in range (|hi| <= 2^30). For m > 2^30,
 * SaturatingRoundingDoublingHighMul(x, m) < 0 exactly when x < 0 (x = -1 gives a product below -2^30),
 * which is the sign edgernn_mbqm_hi takes. On GAP8 (Xpulp by .insn encodings) the sequence as asm, the
 * C twin everywhere else (tests/c/fixedpoint_check.c holds the twin against edgernn_mbqm_hi; the asm is
 * held in GVSOC by the depthwise convolution's bytes, tests/targets/gap8/test_gap8_requant.py). */
static inline int edgernn_mbqm_hi_tight_applies(int32_t multiplier, int32_t shift)
{
    return multiplier > ((int32_t)1 << 30) && shift <= -2;
}

#if !defined(EDGERNN_MBQM_HI_TIGHT_ASM)
static inline int32_t edgernn_mbqm_hi_tight(int32_t x, int32_t multiplier, int32_t e1)
{
    const int64_t p = (int64_t)x * (int64_t)multiplier;
    const uint32_t lo = (uint32_t)p;
    const uint32_t k = ((uint32_t)x & 0x80000000u) ^ 0x40000000u;
    const int32_t carry = (uint32_t)(lo + k) < lo;
    const int32_t s = x < 0 ? -1 : 0;
    const int32_t hi = (int32_t)(p >> 32) + carry;
    return (int32_t)((uint32_t)hi + (uint32_t)s + ((uint32_t)1 << (e1 - 1))) >> e1;
}
#endif

/* edgernn_mbqm's value plus an output offset from 16x16-bit products alone (GAP8: one cycle each, where a mulh
 * stalls five), for 2^30 <= m < 2^31, a right shift e = -shift of 1 to 22 and -2^30 <= x < 2^30: the depthwise
 * convolution's requantization where every accumulator of its channel is in that range. x enters as
 * xs = x + 2^30, whose halves xl = xs mod 2^16 (x's own) and xh' = xs >> 16 = xh + 2^14 (xh = floor(x / 2^16))
 * are both non-negative. With m = mh 2^16 + ml, c = [ml >= 2^15], ml' = ml - 2^16 c, mh' = mh + c (< 2^15,
 * else the form does not apply): x m = xh mh' 2^32 + (xh ml' + xl mh) 2^16 + xl ml, and MultiplyByQuantized-
 * Multiplier, floor((x m + 2^30 + 2^(30+e) - [x < 0] 2^31) / 2^(31+e)) (edgernn_mbqm_hi's note; [x < 0] for
 * [q < 0]: they differ only at x = -1 with m = 2^30, where both give 0), is the nested floors
 *   Y = xh ml' + xl mh + floor(xl ml / 2^16),  W = floor((Y + 2^14) / 2^15),
 *   F = floor((2 xh mh' + W - [x < 0] + 2^(e-1)) / 2^e),
 * which GAP8 computes as (k1 .. k4 per channel, edgernn_halves_make):
 *   p.muluN a, xs, k1, 16    a = floor(xl ml / 2^16)          k1 = ml | 2 mh' << 16
 *   pv.sdotusp.h a, xs, k2   a += xl mh + xh' ml'            k2 = mh | ml' << 16 (signed lanes)
 *   p.adduN a, a, k3, 15     a = (a + k3) >> 15 (logical)     k3 = 2^14 - 2^14 ml' + 2^29
 *   p.machhu a, xs, k1       a += xh' 2 mh'
 *   srli s, xs, 30; add a, a, s                               s = [x >= 0]
 *   p.addRN a, k4, e         a = (a + k4 + 2^(e-1)) >> e       k4 = off 2^e - 1 - 2^14 - 2^15 mh'
 * a + k3 = Y + 2^14 + 2^29 mod 2^32, and Y + 2^14 + 2^29 lies in [0, 2^32), so the logical shift gives
 * W + 2^14; the other sums may wrap, but the last one, 2 xh mh' + W - [x < 0] + off 2^e + 2^(e-1), is in
 * int32 (|2 xh mh' + W| < 2^30 + 2^16, e <= 22), and the constants cancel in it. Where act_min >= off (a
 * ReLU's clamp), a kernel may drop s and add 1 to k4 (SIGNLESS): for x < 0 that gives F or F + 1, never
 * above 0, and both clamp to act_min. tests/c/fixedpoint_check.c holds this C twin against
 * MultiplyByQuantizedMultiplier; the GAP8 sequence (its edgernn_arch.h) is held in GVSOC by
 * tests/targets/gap8/test_gap8_requant.py. */
typedef struct {
    uint32_t k1, k2, k3;
    int32_t k4, e;
} edgernn_halves_t;

static inline int edgernn_halves_make(edgernn_halves_t *h, int32_t multiplier, int32_t shift, int32_t output_offset)
{
    const uint32_t m = (uint32_t)multiplier, mh = m >> 16, ml = m & 0xFFFFu, c = ml >> 15;
    const uint32_t mh1 = mh + c, ml1 = ml - (c << 16); /* ml1: ml' as a 32-bit two's complement word */
    const int32_t e = -shift;
    if (multiplier < ((int32_t)1 << 30) || e < 1 || e > 22 || mh1 >= 0x8000u) {
        return 0;
    }
    h->k1 = ml | (2u * mh1) << 16;
    h->k2 = mh | ml1 << 16;
    h->k3 = (1u << 14) - (ml1 << 14) + (1u << 29);
    h->k4 = (int32_t)((uint32_t)output_offset * (1u << e) - 1u - (1u << 14) - (mh1 << 15));
    h->e = e;
    return 1;
}

/* xs = x + 2^30 */
static inline int32_t edgernn_halves(uint32_t xs, const edgernn_halves_t *h)
{
#if defined(EDGERNN_HALVES_ASM)
    return edgernn_halves_xpulp(xs, h->k1, h->k2, h->k3, h->k4, h->e);
#else
    const uint32_t xl = xs & 0xFFFFu, xh = xs >> 16;
    uint32_t a = (xl * (h->k1 & 0xFFFFu)) >> 16;
    a += xl * (uint32_t)(int32_t)(int16_t)(h->k2 & 0xFFFFu) + xh * (uint32_t)(int32_t)(int16_t)(h->k2 >> 16);
    a = (a + h->k3) >> 15;
    a += xh * (h->k1 >> 16);
    a += xs >> 30;
    return (int32_t)(a + (uint32_t)h->k4 + (1u << (h->e - 1))) >> h->e;
#endif
}

/* The same product with one rounding, halves toward +infinity: what LiteRT's reference 8-bit
 * FULLY_CONNECTED kernel gives (the BUILTIN_REF oracle; measured, docs/ops.md). */
static inline int32_t edgernn_mbqm_single(int32_t x, int32_t multiplier, int shift)
{
    /* (x * m + 2^(30 - shift)) >> (31 - shift), as ((x * m >> (30 - shift)) + 1) >> 1: nested floors */
    return (int32_t)(((((int64_t)x * (int64_t)multiplier) >> (30 - shift)) + 1) >> 1);
}

/* The same product as LiteRT's builtin 8-bit FULLY_CONNECTED rescales it on x86 (ruy's AVX2/AVX-512
 * kernels): x shifted left in 32 bits, the high multiply rounded as in SaturatingRoundingDoublingHighMul
 * ((y + 2^30) >> 31), then a rounding right shift by -shift whose halves go toward +infinity (not away
 * from zero, as in RoundingDivideByPOT). With e = -shift > 0 the nested floors merge:
 * floor((floor((y + 2^30) / 2^31) + 2^(e-1)) / 2^e) = (y + 2^30 + 2^(30+e)) >> (31 + e). For shift >= 0
 * it is edgernn_mbqm_single's value whenever x * 2^shift fits in int32. */
static inline int32_t edgernn_mbqm_double_up(int32_t x, int32_t multiplier, int shift)
{
    if (shift >= 0) {
        const int32_t xs = (int32_t)((uint32_t)x << shift);
        return (int32_t)(((int64_t)xs * (int64_t)multiplier + ((int64_t)1 << 30)) >> 31);
    }
    return (int32_t)(((int64_t)x * (int64_t)multiplier + ((int64_t)1 << 30) + ((int64_t)1 << (30 - shift)))
                     >> (31 - shift));
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

#if !defined(EDGERNN_ARCH_CLAMP)
static inline int32_t edgernn_clamp(int32_t x, int32_t lo, int32_t hi)
{
    return x < lo ? lo : (x > hi ? hi : x);
}
#endif

/* Leading zero bits of x (32 for 0), as the reference kernels' CountLeadingZeros. */
static inline int edgernn_clz32(uint32_t x)
{
    int n = 0;
    if (x == 0) {
        return 32;
    }
#if defined(EDGERNN_ARCH_CLZ)
    (void)n;
    return edgernn_clz32_nonzero(x);
#elif defined(__GNUC__)
    /* the count instruction (or libgcc's table) in place of up to 31 trips of the loop below; DIV
     * counts twice per element. unsigned int is 32 bits on every target edgernn builds for. */
    (void)n;
    return __builtin_clz(x);
#endif
    while (!(x & 0x80000000u)) {
        x <<= 1;
        ++n;
    }
    return n;
}

/* gemmlowp's SaturatingRoundingMultiplyByPOT for a positive exponent: x * 2^exponent, saturated. */
static inline int32_t edgernn_saturating_shl(int32_t x, int exponent)
{
    const int64_t wide = (int64_t)x * ((int64_t)1 << exponent);
    return wide > INT32_MAX ? INT32_MAX : (wide < INT32_MIN ? INT32_MIN : (int32_t)wide);
}

/* gemmlowp::one_over_one_plus_x_for_x_in_0_1: 1 / (1 + a) for a in [0, 1) (Q0.31), the result Q1.30
 * (raw bits; the Q0.31 result of 1 / (1 + a) / 2 for the caller that reads it so). */
static inline int32_t edgernn_one_over_one_plus_x(int32_t a)
{
    /* half_denominator = (a + 1) / 2 in Q0.31, via RoundingHalfSum(a, one) */
    const int64_t sum = (int64_t)a + (int64_t)INT32_MAX;
    const int32_t half_denominator = (int32_t)((sum + (sum >= 0 ? 1 : -1)) / 2);
    const int32_t constant_48_over_17 = 1515870810;      /* Q2.29 */
    const int32_t constant_neg_32_over_17 = -1010580540; /* Q2.29 */
    int32_t x = constant_48_over_17 + edgernn_srdhm(half_denominator, constant_neg_32_over_17);
    int k;
    for (k = 0; k < 3; ++k) {
        /* one in Q2.29 is 1 << 29; x * (1 - half_denominator * x) is Q4.27, back to Q2.29 by a
         * saturating shift by 2 */
        const int32_t one_minus = (1 << 29) - edgernn_srdhm(half_denominator, x);
        x = x + edgernn_saturating_shl(edgernn_srdhm(x, one_minus), 2);
    }
    return edgernn_saturating_shl(x, 1);
}

/* reference_integer_ops::LookupTable for int16 (LUTLookup): 512 segments of 128 input steps of a
 * 513-entry table, linear interpolation between table[k] and table[k + 1], rounded half up. */
static inline int32_t edgernn_lut_lookup_s16(const int16_t *table, int32_t value)
{
    const int32_t index = 256 + (value >> 7);
    const int32_t offset = value & 0x7f;
    const int32_t base = table[index];
    const int32_t slope = table[index + 1] - table[index];
    return base + ((slope * offset + 64) >> 7);
}

#endif /* EDGERNN_FIXEDPOINT_H */
