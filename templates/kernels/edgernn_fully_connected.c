#include <stdint.h>

#include "edgernn_dot.h"
#include "edgernn_fixedpoint.h"
#include "edgernn_kernels.h"

/* The int8 dot products are edgernn_dot.h's (portable C, or GAP8's Xpulp SIMD builtin), on weights in
 * its blocked layout. */

int edgernn_dot_simd(void)
{
#if defined(EDGERNN_DOT_SIMD4)
    return 1;
#else
    return 0;
#endif
}

void edgernn_fully_connected_f32(const float *in, const float *w, const float *bias, float act_min,
                                 float act_max, int rows, int n_in, int n_out, float *out)
{
    int r, o, i;
    for (r = 0; r < rows; ++r) {
        const float *x = in + (size_t)r * n_in;
        for (o = 0; o < n_out; ++o) {
            const float *wo = w + (size_t)o * n_in;
            float acc = 0.0f;
            for (i = 0; i < n_in; ++i) {
                acc += x[i] * wo[i];
            }
            if (bias) {
                acc += bias[o];
            }
            acc = acc < act_min ? act_min : (acc > act_max ? act_max : acc);
            out[(size_t)r * n_out + o] = acc;
        }
    }
}

/* rounding: EDGERNN_ROUND_ONCE (LiteRT's reference kernel) or EDGERNN_ROUND_TWICE_UP (its builtin
 * kernel, through ruy), the oracle of the graph (docs/ops.md). */
static inline int32_t rescale_s8(int32_t acc, int32_t multiplier, int32_t shift, int rounding)
{
#if UINTPTR_MAX <= 0xFFFFFFFFu
    /* On a 32-bit core, with a right shift e = -shift >= 2 (the usual case), both roundings need only the
     * high word of the product: with P = acc * m = hi * 2^32 + lo, the one rounding
     * (P + 2^(30+e)) >> (31+e) is (hi + 2^(e-2)) >> (e-1), 2^(30+e) being a multiple of 2^32; the two
     * roundings (P + 2^30 + 2^(30+e)) >> (31+e) are the same with hi taking the carry of lo + 2^30. */
    /* expected: laid out as the fall-through, where gcc otherwise branches out to it and back (a taken
     * branch and a jump per output, 5 cycles on GAP8) */
#if defined(__GNUC__)
    if (__builtin_expect(shift <= -2, 1)) {
#else
    if (shift <= -2) {
#endif
        const int64_t p = (int64_t)acc * multiplier;
        int32_t hi = (int32_t)(p >> 32);
        if (rounding == EDGERNN_ROUND_TWICE_UP) {
            hi += (uint32_t)p >= 0xC0000000u; /* the carry of lo + 2^30 */
        }
#if defined(EDGERNN_ARCH_ROUND_HI)
        EDGERNN_ARCH_ROUND_HI(hi, shift); /* the set's one instruction for the line below */
        return hi;
#else
        return (hi + (1 << (-shift - 2))) >> (-shift - 1);
#endif
    }
#endif
    return rounding == EDGERNN_ROUND_TWICE_UP ? edgernn_mbqm_double_up(acc, multiplier, shift)
                                              : edgernn_mbqm_single(acc, multiplier, shift);
}

static inline int8_t requantize_s8(int32_t acc, int32_t multiplier, int32_t shift, int rounding,
                                   int32_t output_offset, int32_t act_min, int32_t act_max)
{
    const int32_t scaled = rescale_s8(acc, multiplier, shift, rounding);
    return (int8_t)edgernn_clamp(scaled + output_offset, act_min, act_max);
}

/* The outputs of one row of the input in blocks of 8, then 4, then one by one, in the blocked weights
 * layout (edgernn_dot.h), each input byte loaded once per block; OUT(k) stores output o + k from
 * acc[k]. Written out so that the block's sums stay in registers. Takes the caller's x, w, bias,
 * n_in, n_out and o. */
#define FC_S8_BLOCKS(OUT) FC_S8_BLOCKS_BY(OUT, FC_EACH8, FC_EACH4)
#define FC_EACH8(OUT)                                                                               \
    do {                                                                                            \
        OUT(0);                                                                                     \
        OUT(1);                                                                                     \
        OUT(2);                                                                                     \
        OUT(3);                                                                                     \
        OUT(4);                                                                                     \
        OUT(5);                                                                                     \
        OUT(6);                                                                                     \
        OUT(7);                                                                                     \
    } while (0)
#define FC_EACH4(OUT)                                                                               \
    do {                                                                                            \
        OUT(0);                                                                                     \
        OUT(1);                                                                                     \
        OUT(2);                                                                                     \
        OUT(3);                                                                                     \
    } while (0)
/* The same with the outputs of a block of 8 (of 4) written by BLOCK8(OUT) (BLOCK4(OUT)). */
#define FC_S8_BLOCKS_BY(OUT, BLOCK8, BLOCK4)                                                        \
    for (o = 0; o + 8 <= n_out; o += 8, w += 8 * (size_t)n_in) {                                    \
        int32_t acc[8];                                                                             \
        acc[0] = bias[o];                                                                           \
        acc[1] = bias[o + 1];                                                                       \
        acc[2] = bias[o + 2];                                                                       \
        acc[3] = bias[o + 3];                                                                       \
        acc[4] = bias[o + 4];                                                                       \
        acc[5] = bias[o + 5];                                                                       \
        acc[6] = bias[o + 6];                                                                       \
        acc[7] = bias[o + 7];                                                                       \
        edgernn_dot8_s8(x, w, n_in, acc);                                                           \
        BLOCK8(OUT);                                                                                \
    }                                                                                               \
    if (o + 4 <= n_out) {                                                                           \
        int32_t acc[4];                                                                             \
        acc[0] = bias[o];                                                                           \
        acc[1] = bias[o + 1];                                                                       \
        acc[2] = bias[o + 2];                                                                       \
        acc[3] = bias[o + 3];                                                                       \
        edgernn_dot4_s8(x, w, n_in, acc);                                                           \
        BLOCK4(OUT);                                                                                \
        o += 4;                                                                                     \
        w += 4 * (size_t)n_in;                                                                      \
    }                                                                                               \
    for (; o < n_out; ++o, w += n_in) {                                                             \
        int32_t acc[1];                                                                             \
        acc[0] = edgernn_dot1_s8(x, w, n_in, bias[o]);                                              \
        OUT(0);                                                                                     \
    }

#define FC_S8_OUT(k)                                                                                \
    y[o + (k)] = requantize_s8(acc[k], multiplier[o + (k)], shift[o + (k)], rounding, output_offset, act_min, \
                               act_max)


/* One row of the input (FC_S8_BLOCKS); rounding is a constant once inlined. */
#if defined(EDGERNN_FC_REQUANT_ASM)
static EDGERNN_DOT_INLINE void fc_s8_row(const int8_t *x, const int8_t *w, const int32_t *bias,
                                         const int32_t *multiplier, const int32_t *shift, int rounding,
                                         int32_t output_offset, int32_t act_min, int32_t act_max, int n_in,
                                         int n_out, int8_t *y)
{
    int o;
    const uint32_t carry_above = 0xBFFFFFFFu; /* lo >= 2^32 - 2^30: the carry of lo + 2^30 */
    if (rounding == EDGERNN_ROUND_TWICE_UP) {
        FC_S8_BLOCKS_BY(FC_S8_OUT, FC_ASM8_TWICE_UP, FC_ASM4_TWICE_UP);
    } else {
        FC_S8_BLOCKS_BY(FC_S8_OUT, FC_ASM8_ONCE, FC_ASM4_ONCE);
    }
}
#else
static EDGERNN_DOT_INLINE void fc_s8_row(const int8_t *x, const int8_t *w, const int32_t *bias,
                                         const int32_t *multiplier, const int32_t *shift, int rounding,
                                         int32_t output_offset, int32_t act_min, int32_t act_max, int n_in,
                                         int n_out, int8_t *y)
{
    int o;
    FC_S8_BLOCKS(FC_S8_OUT);
}
#endif

#if defined(__GNUC__)
#define FC_NOINLINE __attribute__((noinline))
#else
#define FC_NOINLINE
#endif

/* Every row of the input, in blocks of outputs (FC_S8_BLOCKS), one function per rounding: a model uses one, and
 * its code then lies in one stretch half the size of both, which a small instruction cache (GAP8's cluster:
 * 4 KiB, 4 ways of 1 KiB) holds with fewer of its lines competing for the same sets. */
#define FC_S8_ROWS(NAME, ROUNDING)                                                                  \
    static FC_NOINLINE void NAME(const int8_t *in, const int8_t *w, const int32_t *bias,             \
                                 const int32_t *multiplier, const int32_t *shift, int32_t output_offset, \
                                 int32_t act_min, int32_t act_max, int rows, int n_in, int n_out,     \
                                 int8_t *out)                                                       \
    {                                                                                               \
        int r;                                                                                      \
        for (r = 0; r < rows; ++r) {                                                                \
            fc_s8_row(in + (size_t)r * n_in, w, bias, multiplier, shift, ROUNDING, output_offset,    \
                      act_min, act_max, n_in, n_out, out + (size_t)r * n_out);                      \
        }                                                                                           \
    }
FC_S8_ROWS(fully_connected_s8_once, EDGERNN_ROUND_ONCE)
FC_S8_ROWS(fully_connected_s8_twice_up, EDGERNN_ROUND_TWICE_UP)

/* Rows [r0, r1) of the output, r0 a multiple of 8, are the same call with w, bias, multiplier, shift
 * advanced by r0 rows, out by r0, and n_out = r1 - r0 (rows == 1). */
void edgernn_fully_connected_s8(const int8_t *in, const int8_t *w, const int32_t *bias,
                                const int32_t *multiplier, const int32_t *shift, int rounding,
                                int32_t output_offset, int32_t act_min, int32_t act_max, int rows, int n_in,
                                int n_out, int8_t *out)
{
    if (rows == 1 && n_out == 1) {
        /* One output (a Dense(1) head, a cell's last small FC): the blocks' code for a last single row, the
         * same dot product and requantization, without their set-up; on GAP8 that set-up is some 200
         * instructions and their instruction-cache lines, ten times the work of a short row. */
        out[0] = requantize_s8(edgernn_dot1_s8(in, w, n_in, bias[0]), multiplier[0], shift[0], rounding,
                               output_offset, act_min, act_max);
        return;
    }
    if (rounding == EDGERNN_ROUND_TWICE_UP) {
        fully_connected_s8_twice_up(in, w, bias, multiplier, shift, output_offset, act_min, act_max, rows, n_in, n_out,
                                    out);
    } else {
        fully_connected_s8_once(in, w, bias, multiplier, shift, output_offset, act_min, act_max, rows, n_in, n_out, out);
    }
}

/* A group of int8 FULLY_CONNECTED ops that read the same input (same n_in, one row each): one call over
 * all their rows, whose weights, biases and rescales lie one op after the other (the weights in blocks of 4 rows
 * of the whole group, edgernn/backend/lowering/blocking.py), so that a block may hold rows of two ops, and the small
 * ops of a cell share one set-up and the blocks in place of each op's tail of single rows
 * (edgernn/backend/grouping.py). Op k writes out<k>; ends[k] is the row after its last, counted from the
 * group's first. row0 is the group's row of this call's first row: 0 for the whole group, the start of a
 * sub-range when the team splits it (w, bias, multiplier, rnd and shift then advanced by row0 rows,
 * row0 a multiple of 4).
 *
 * Blocks of 4 rows, not the 8 of a FULLY_CONNECTED's own layout: a group is a small cell's heads (a few dozen rows),
 * and the team splits it by blocks, so that 20 rows reach 5 workers and 8 rows 2 (in blocks of 8: 3 and 1).
 *
 * The rescale is rescale_s8's high-word form, with the op's output zero point folded in at generation:
 * every row has a right shift e >= 2, so with P = acc * m = hi * 2^32 + lo both roundings are
 * (hi' + 2^(e-2)) >> (e-1) (hi' = hi, or hi plus the carry of lo + 2^30), and adding the zero point z
 * after the shift is adding z * 2^(e-1) before it. So shift[r] = e - 1 and rnd[r] = 2^(e-2) + z * 2^(e-1),
 * and the generation has checked that hi' + rnd[r] cannot leave int32 for any input (the folded bias
 * and the weights bound acc). The bytes are those of the op's own call.
 *
 * One form on every board, small: each block's sums in memory and its outputs in one loop, one copy of the dot
 * product's tail and of the requantization for both block sizes and both roundings (on GAP8 a CfC(16) step is bound
 * by the cluster's 4 KiB instruction cache, which a form written out for each block size outgrew). */

/* gcc's optimization for size for these functions whatever the build's level, where the kernel set says its
 * instruction cache is small (EDGERNN_ARCH_SMALL_ICACHE: GAP8's cluster): at -O3 it unrolls and versions their
 * loops by the block's size, three times the code. */
#if defined(EDGERNN_ARCH_SMALL_ICACHE) && defined(__GNUC__) && !defined(__clang__)
#define FC_SMALL_CODE __attribute__((optimize("O2")))
#else
#define FC_SMALL_CODE
#endif

/* acc[r] += the products of a block of `rows` rows (4 or 1) over n inputs, in the blocked layout (edgernn_dot.h):
 * the whole groups of 4 inputs through the kernel set's block routine where it has one, and the rest in loops
 * that are written once for both block sizes. */
static FC_SMALL_CODE void fc_s8_group_dot(const int8_t *x, const int8_t *w, int n, int rows, int32_t acc[4])
{
    const int n4 = n & ~3, g = n & 3;
    int i = 0, r, j;
#if defined(EDGERNN_DOT_USE_ASM)
    if (rows != 1 && n >= EDGERNN_DOT_ASM_MIN_INPUTS && (((uintptr_t)x | (uintptr_t)w) & 3u) == 0) {
        EDGERNN_DOT4_ASM(x, w, n >> 2, acc);
        i = n4;
    }
#endif
    for (; i < n4; i += 4) {
        const int8_t *wg = w + (size_t)i * rows;
        for (r = 0; r < rows; ++r) {
            for (j = 0; j < 4; ++j) {
                acc[r] += (int32_t)x[i + j] * (int32_t)wg[4 * r + j];
            }
        }
    }
    if (g) {
        /* the last group, g = n mod 4 inputs a row, each row's g weights after the one before */
        const int32_t x0 = x[n4], x1 = g > 1 ? x[n4 + 1] : 0, x2 = g > 2 ? x[n4 + 2] : 0;
        w += (size_t)n4 * rows;
        for (r = 0; r < rows; ++r, w += g) {
            int32_t a = acc[r] + x0 * w[0];
            if (g > 1) {
                a += x1 * w[1];
                if (g > 2) {
                    a += x2 * w[2];
                }
            }
            acc[r] = a;
        }
    }
}

/* The group's rows [begin, end) in blocks of 4, then 1 row (the layout's): the range function itself
 * (edgernn_range_fn: the team's workers call it on their rows, the body calls it on all of them), its constants read
 * from the argument block, which the generated code fills once at init in the team's fast memory (a call of 17
 * arguments had been spilled and reloaded around the call by the body, the team's wrapper and each worker). */
FC_SMALL_CODE void edgernn_fully_connected_group_s8_range(const void *args, int begin, int end)
{
    const edgernn_fc_group_s8_args_t *a = (const edgernn_fc_group_s8_args_t *)args;
    const int n_in = a->n_in, n_out = end - begin, row0 = a->row0 + begin;
    const int twice = a->rounding == EDGERNN_ROUND_TWICE_UP;
    const int8_t *const x = a->in;
    const int8_t *w = a->w + (size_t)begin * n_in;
    const int32_t *bias = a->bias + begin, *multiplier = a->multiplier + begin, *rnd = a->rnd + begin;
    const int32_t *shift = a->shift + begin;
    const int32_t *const ends = a->ends;
    /* held in registers: the stores below might alias the block, for all gcc knows, and it would reload them */
    const int32_t act_min = a->act_min, act_max = a->act_max;
    int o, m = 0, rows;
    int8_t *y;
    int32_t end_m;
    while (ends[m] <= row0) {
        ++m;
    }
    y = a->out[m] + (row0 - (m ? ends[m - 1] : 0));
    end_m = ends[m] - row0;
    for (o = 0; o < n_out; o += rows, w += (size_t)rows * n_in) {
        int32_t acc[4];
        int k;
        rows = n_out - o >= 4 ? 4 : 1;
#if defined(EDGERNN_DOT4_ALL_ASM)
        if (rows != 1 && (((uintptr_t)x | (uintptr_t)w) & 3u) == 0) {
            EDGERNN_DOT4_ALL_ASM(x, w, n_in, bias, acc);
        } else
#endif
        {
            for (k = 0; k < rows; ++k) {
                acc[k] = bias[k];
            }
            fc_s8_group_dot(x, w, n_in, rows, acc);
        }
        for (k = 0; k < rows; ++k) {
            const int64_t p = (int64_t)acc[k] * multiplier[k];
            int32_t hi = (int32_t)(p >> 32);
            if (o + k == end_m) {
                ++m;
                y = a->out[m];
                end_m = ends[m] - row0;
            }
            if (twice) {
                hi += (uint32_t)p >= 0xC0000000u; /* the carry of lo + 2^30 */
            }
            *y++ = (int8_t)edgernn_clamp((hi + rnd[k]) >> shift[k], act_min, act_max);
        }
        bias += rows;
        multiplier += rows;
        rnd += rows;
        shift += rows;
    }
}

void edgernn_fully_connected_group_s8(const int8_t *x, const int8_t *w, const int32_t *bias,
                                      const int32_t *multiplier, const int32_t *rnd, const int32_t *shift,
                                      int rounding, const int32_t *ends, int row0, int32_t act_min, int32_t act_max,
                                      int n_in, int n_out, int8_t *out0, int8_t *out1, int8_t *out2, int8_t *out3)
{
    const edgernn_fc_group_s8_args_t a = {x, w, bias, multiplier, rnd, shift, ends, {out0, out1, out2, out3},
                                          rounding, act_min, act_max, n_in, row0};
    edgernn_fully_connected_group_s8_range(&a, 0, n_out);
}

/* 16x8: each product fits in 23 bits, so a chunk of up to 256 of them sums exactly in int32; the
 * chunks are added in int64. Four rows at a time and blocks of inputs, as in the 8-bit kernel. */
#define EDGERNN_S16_CHUNK 256

#define EDGERNN_FC_MAC4_S16(k)                                                                      \
    do {                                                                                            \
        const int32_t xk = x[k];                                                                    \
        s0 += xk * w0[k];                                                                           \
        s1 += xk * w1[k];                                                                           \
        s2 += xk * w2[k];                                                                           \
        s3 += xk * w3[k];                                                                           \
    } while (0)

/* round(acc * scale) in double, halves away from zero, as LiteRT's 16x8 FULLY_CONNECTED computes it; scale_bits
 * holds the double scale's bits (binary64 and int64 share their byte order on every target). (int64_t)y cuts
 * toward zero and y - t is exact (|y| < 2^52), so no libm round() is needed. */
#if defined(__GNUC__)
__attribute__((noinline)) /* rare: one copy, not one per unrolled output */
#endif
static int32_t rescale_s16_double(int64_t acc, int64_t scale_bits)
{
    union {
        int64_t bits;
        double value;
    } scale;
    double y, f;
    int64_t t;
    scale.bits = scale_bits;
    y = (double)acc * scale.value;
    t = (int64_t)y;
    f = y - (double)t;
    if (f >= 0.5) {
        ++t;
    } else if (f <= -0.5) {
        --t;
    }
    return (int32_t)t;
}

/* requantize_s16's usual case in 32-bit words: a sum within int32, a right shift 3 <= e = -shift <= 31, the range
 * of TFLite's QuantizeMultiplier, so no shift below reaches 32. With P = acc * m = hi * 2^32 + lo (|P| < 2^62),
 * q = P >> (30 + e) = (P >> 31) >> (e - 1) counts halves, and y = (q + 1) >> 1 is the one rounding. The 32 bits
 * below q's lowest, f = P >> (e - 2) (its low word), place P between two halves: P lies within the general path's
 * |P| / 2^30 + 2 of a half only if q is odd and f <= T, or q is even and f >= 2^32 - T, T = 4|q| + 8 (that bound
 * in f's units, floors included); only there is the double product computed (*scale_bits: the row's scale).
 * Beyond |q| >= 2^20 the clamp decides whatever the rounding. */
static inline int32_t rescale_s16_words(int32_t acc, int32_t multiplier, int32_t shift, const int64_t *scale_bits)
{
    const int64_t p = (int64_t)acc * multiplier;
    const uint32_t hi = (uint32_t)((uint64_t)p >> 32), lo = (uint32_t)p;
    const int e = -shift;
    const int32_t q = (int32_t)((hi << 1) | (lo >> 31)) >> (e - 1);
    const uint32_t f = (lo >> (e - 2)) | (hi << (34 - e));
    const uint32_t t = 4u * (uint32_t)(q < 0 ? -q : q) + 8u;
    if ((q < (1 << 20) && q > -(1 << 20)) && ((q & 1) ? f <= t : f >= 0u - t)) {
        return rescale_s16_double(acc, *scale_bits);
    }
    return (q + 1) >> 1;
}

/* EDGERNN_S16_WORDS: the 16x8 requantization's common case in 32-bit words (below); by default on a 32-bit core,
 * where it saves the 64-bit products and shifts; -DEDGERNN_S16_WORDS=1 or 0 chooses (the tests run both on a host). */
#if !defined(EDGERNN_S16_WORDS)
#if UINTPTR_MAX <= 0xFFFFFFFFu
#define EDGERNN_S16_WORDS 1
#else
#define EDGERNN_S16_WORDS 0
#endif
#endif

/* rounding EDGERNN_ROUND_DOUBLE: LiteRT's reference 16x8 FULLY_CONNECTED, and its builtin one with a bias,
 * round((double)acc * (s_in * s_w / s_out)), halves away from zero (docs/ops.md). The Q31 multiplier of that
 * scale, m / 2^(31 - shift), is within 2^-31 of it (relative), so P = acc * m with one rounding gives the same
 * integer unless acc * scale lies within |P| / 2^31 (in units of 2^-(31 - shift)) of a half: only there is the
 * double product computed, about once in 10^5 outputs of a trained layer. The sum stays below 2^32 (the
 * generation checks it), so P fits in int64. EDGERNN_ROUND_TWICE_UP: its builtin kernel without a bias, which
 * goes through ruy: the sum in int32 (below 2^31: checked) and ruy's two roundings, halves up, as the 8-bit
 * kernel's. */
#if defined(__GNUC__) && defined(EDGERNN_S16_REQUANT_INLINE)
__attribute__((always_inline)) inline /* the set's choice: no call, no stacked arguments, per output */
#elif defined(__GNUC__)
__attribute__((noinline)) /* one copy: GAP8's cluster shares a 4 KB instruction cache, the MACs are the hot loop */
#endif
static int16_t requantize_s16(int64_t acc, int32_t multiplier, int32_t shift, int64_t scale_bits,
                                     int rounding, int32_t output_offset, int32_t act_min, int32_t act_max)
{
    int32_t y;
    if (rounding == EDGERNN_ROUND_TWICE_UP) {
        y = edgernn_mbqm_double_up((int32_t)acc, multiplier, shift);
#if EDGERNN_S16_WORDS
    } else if (acc >= INT32_MIN && acc <= INT32_MAX && shift <= -3 && shift >= -31) {
        y = rescale_s16_words((int32_t)acc, multiplier, shift, &scale_bits);
#endif
    } else {
        const int total_shift = 31 - shift;
        const int64_t p = acc * (int64_t)multiplier;
        const int64_t half = (int64_t)1 << (total_shift - 1);
        const int64_t off = (p & ((half << 1) - 1)) - half;
        const int64_t tol = ((p < 0 ? -p : p) >> 30) + 2;
        y = (int32_t)((p + half) >> total_shift);
        if (off <= tol && off >= -tol) {
            y = rescale_s16_double(acc, scale_bits);
        }
    }
    return (int16_t)edgernn_clamp(y + output_offset, act_min, act_max);
}

/* EDGERNN_S16_COMPACT: the 16x8 row function's small form (below), by default on a 32-bit core. GAP8's cluster
 * fetches its code through a 4 KB instruction cache that every call of a step shares: a small cell's 16x8 call
 * spends more cycles refilling it than in its MACs (GVSOC), so there the code's size is what counts. The
 * large form (four rows at a time written out, their tails apart, the inner loop unrolled) is the default
 * elsewhere; -DEDGERNN_S16_COMPACT=1 or 0 chooses (the tests run both). */
#if !defined(EDGERNN_S16_COMPACT)
#if UINTPTR_MAX <= 0xFFFFFFFFu
#define EDGERNN_S16_COMPACT 1
#else
#define EDGERNN_S16_COMPACT 0
#endif
#endif

/* One row of the input: the outputs [0, n_out) of w, bias, multiplier, shift and scale, into y. One copy, shared
 * by the kernel and its grouped form below. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static void fc_s16_row(const int16_t *x, const int8_t *w, const int64_t *bias, const int32_t *multiplier,
                       const int32_t *shift, const int64_t *scale, int rounding, int32_t output_offset,
                       int32_t act_min, int32_t act_max, int n_in, int n_out, int16_t *y)
{
#if EDGERNN_S16_COMPACT
    /* four rows at a time, a tail of 1 to 3 rows as a block whose missing rows repeat its first (their sums
     * computed and dropped); one MAC4 a loop and one call of the requantization */
    int o, i, i0, k;
    for (o = 0; o < n_out; o += 4) {
        const int rows = n_out - o < 4 ? n_out - o : 4;
        const int8_t *w0 = w + (size_t)o * n_in;
        const int8_t *w1 = rows > 1 ? w0 + n_in : w0;
        const int8_t *w2 = rows > 2 ? w0 + 2 * (size_t)n_in : w0;
        const int8_t *w3 = rows > 3 ? w0 + 3 * (size_t)n_in : w0;
        int64_t acc[4];
        /* four stores, not an initializer: gcc clears a 32-byte array with a call of memset, which newlib-nano's
         * byte loop makes some 100 instructions on the M4, once per 4 outputs */
        acc[0] = 0;
        acc[1] = 0;
        acc[2] = 0;
        acc[3] = 0;
        for (i0 = 0; i0 < n_in; i0 += EDGERNN_S16_CHUNK) {
            const int end = n_in - i0 < EDGERNN_S16_CHUNK ? n_in : i0 + EDGERNN_S16_CHUNK;
            int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            i = i0;
#if defined(EDGERNN_FC_S16_ROWS4)
            /* the set's routine for the chunk's whole groups of 4 inputs, the C below for the rest */
            i += 4 * EDGERNN_FC_S16_ROWS4(x + i, w0 + i, w1 + i, w2 + i, w3 + i, (end - i) >> 2, &s0, &s1, &s2, &s3);
#endif
            for (; i < end; ++i) {
                EDGERNN_FC_MAC4_S16(i);
            }
            acc[0] += s0;
            acc[1] += s1;
            acc[2] += s2;
            acc[3] += s3;
        }
        for (k = 0; k < rows; ++k) {
            y[o + k] = requantize_s16(acc[k] + bias[o + k], multiplier[o + k], shift[o + k], scale[o + k], rounding,
                                      output_offset, act_min, act_max);
        }
    }
#else
    int o, i, i0;
    for (o = 0; o + 4 <= n_out; o += 4) {
        const int8_t *w0 = w + (size_t)o * n_in;
        const int8_t *w1 = w0 + n_in;
        const int8_t *w2 = w1 + n_in;
        const int8_t *w3 = w2 + n_in;
        int64_t a0 = bias[o], a1 = bias[o + 1], a2 = bias[o + 2], a3 = bias[o + 3];
        for (i0 = 0; i0 < n_in; i0 += EDGERNN_S16_CHUNK) {
            const int end = n_in - i0 < EDGERNN_S16_CHUNK ? n_in : i0 + EDGERNN_S16_CHUNK;
            int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            i = i0;
#if defined(EDGERNN_FC_S16_ROWS4)
            i += 4 * EDGERNN_FC_S16_ROWS4(x + i, w0 + i, w1 + i, w2 + i, w3 + i, (end - i) >> 2, &s0, &s1, &s2, &s3);
#endif
#if defined(EDGERNN_DOT_VECTOR_BLOCK)
            for (; i + 16 <= end; i += 16) {
                int k;
                for (k = 0; k < 16; ++k) {
                    EDGERNN_FC_MAC4_S16(i + k);
                }
            }
#else
            for (; i + 4 <= end; i += 4) {
                EDGERNN_FC_MAC4_S16(i);
                EDGERNN_FC_MAC4_S16(i + 1);
                EDGERNN_FC_MAC4_S16(i + 2);
                EDGERNN_FC_MAC4_S16(i + 3);
            }
#endif
            for (; i < end; ++i) {
                EDGERNN_FC_MAC4_S16(i);
            }
            a0 += s0;
            a1 += s1;
            a2 += s2;
            a3 += s3;
        }
        y[o] = requantize_s16(a0, multiplier[o], shift[o], scale[o], rounding, output_offset, act_min, act_max);
        y[o + 1] = requantize_s16(a1, multiplier[o + 1], shift[o + 1], scale[o + 1], rounding, output_offset,
                                  act_min, act_max);
        y[o + 2] = requantize_s16(a2, multiplier[o + 2], shift[o + 2], scale[o + 2], rounding, output_offset,
                                  act_min, act_max);
        y[o + 3] = requantize_s16(a3, multiplier[o + 3], shift[o + 3], scale[o + 3], rounding, output_offset,
                                  act_min, act_max);
    }
    for (; o < n_out; ++o) {
        const int8_t *wo = w + (size_t)o * n_in;
        int64_t acc = bias[o];
        for (i0 = 0; i0 < n_in; i0 += EDGERNN_S16_CHUNK) {
            const int end = n_in - i0 < EDGERNN_S16_CHUNK ? n_in : i0 + EDGERNN_S16_CHUNK;
            int32_t s = 0;
            for (i = i0; i < end; ++i) {
                s += (int32_t)x[i] * (int32_t)wo[i];
            }
            acc += s;
        }
        y[o] = requantize_s16(acc, multiplier[o], shift[o], scale[o], rounding, output_offset, act_min, act_max);
    }
#endif
}

void edgernn_fully_connected_s16(const int16_t *in, const int8_t *w, const int64_t *bias,
                                 const int32_t *multiplier, const int32_t *shift, const int64_t *scale,
                                 int rounding, int32_t output_offset, int32_t act_min, int32_t act_max, int rows,
                                 int n_in, int n_out, int16_t *out)
{
    int r;
    for (r = 0; r < rows; ++r) {
        fc_s16_row(in + (size_t)r * n_in, w, bias, multiplier, shift, scale, rounding, output_offset, act_min,
                   act_max, n_in, n_out, out + (size_t)r * n_out);
    }
}

/* The walk of a 16x8 group's rows, op by op: ROW(...) computes rows [o, stop) of op m into out[m] (the two
 * groups' forms differ only in their row function and their bias's type). */
#define FC_GROUP_S16_ROWS(ROW)                                                                                     \
    do {                                                                                                           \
        int16_t *const out[4] = {out0, out1, out2, out3};                                                          \
        int o = 0, m = 0;                                                                                          \
        while (o < n_out) {                                                                                        \
            int start, stop;                                                                                       \
            while (ends[m] <= row0 + o) {                                                                          \
                ++m;                                                                                               \
            }                                                                                                      \
            start = m ? ends[m - 1] : 0;                                                                           \
            stop = ends[m] - row0 < n_out ? ends[m] - row0 : n_out;                                                \
            ROW(in, w + (size_t)o * n_in, bias + o, multiplier + o, shift + o, scale + o, rounding, output_offset, \
                act_min, act_max, n_in, stop - o, out[m] + (row0 + o - start));                                    \
            o = stop;                                                                                              \
        }                                                                                                          \
    } while (0)

/* A group of 16x8 FULLY_CONNECTED ops that read the same input (same n_in, rounding, output zero point and
 * clamp; one row each): one call over all their rows, whose weights, biases, multipliers, shifts and scales lie
 * one op after the other (edgernn/backend/grouping.py). Op k writes out<k>; ends[k] is the row after its last,
 * counted from the group's first. row0 is the group's row of this call's first row: 0 for the whole group, the
 * start of a sub-range when the team splits it (the arrays then advanced by row0 rows). Each op's rows are
 * computed as its own call computes them, so the bytes are that call's. */
void edgernn_fully_connected_group_s16(const int16_t *in, const int8_t *w, const int64_t *bias,
                                       const int32_t *multiplier, const int32_t *shift, const int64_t *scale,
                                       int rounding, int32_t output_offset, int32_t act_min, int32_t act_max,
                                       const int32_t *ends, int row0, int n_in, int n_out, int16_t *out0,
                                       int16_t *out1, int16_t *out2, int16_t *out3)
{
    FC_GROUP_S16_ROWS(fc_s16_row);
}

/* The grouped 16x8 FULLY_CONNECTED of rows whose sums generation bounded to int32 for every int16 input
 * (|bias| + 32768 * sum |w| <= INT32_MAX, grouping.words_s16), each with a right shift of 3 to 31 (or the ruy
 * rounding): the sums in one int32 each, the bias (int32) added after the MACs, and the requantization's 32-bit
 * form with no test of the sum's range; the same bytes as edgernn_fully_connected_group_s16. Four rows at a time
 * as its compact form, a tail block's missing rows repeating its first. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static int16_t requantize_s16_words(int32_t acc, int32_t multiplier, int32_t shift, const int64_t *scale,
                                    int rounding, int32_t output_offset, int32_t act_min, int32_t act_max)
{
    const int32_t y = rounding == EDGERNN_ROUND_TWICE_UP ? edgernn_mbqm_double_up(acc, multiplier, shift)
                                                         : rescale_s16_words(acc, multiplier, shift, scale);
    return (int16_t)edgernn_clamp(y + output_offset, act_min, act_max);
}

#if defined(__GNUC__)
__attribute__((noinline))
#endif
static void fc_s16_row_words(const int16_t *x, const int8_t *w, const int32_t *bias, const int32_t *multiplier,
                             const int32_t *shift, const int64_t *scale, int rounding, int32_t output_offset,
                             int32_t act_min, int32_t act_max, int n_in, int n_out, int16_t *y)
{
    int o, i, k;
    for (o = 0; o < n_out; o += 4) {
        const int rows = n_out - o < 4 ? n_out - o : 4;
        const int8_t *w0 = w + (size_t)o * n_in;
        const int8_t *w1 = rows > 1 ? w0 + n_in : w0;
        const int8_t *w2 = rows > 2 ? w0 + 2 * (size_t)n_in : w0;
        const int8_t *w3 = rows > 3 ? w0 + 3 * (size_t)n_in : w0;
        int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        int32_t acc[4];
        i = 0;
#if defined(EDGERNN_FC_S16_ROWS4)
        i += 4 * EDGERNN_FC_S16_ROWS4(x, w0, w1, w2, w3, n_in >> 2, &s0, &s1, &s2, &s3);
#endif
        for (; i < n_in; ++i) {
            EDGERNN_FC_MAC4_S16(i);
        }
        acc[0] = s0;
        acc[1] = s1;
        acc[2] = s2;
        acc[3] = s3;
        for (k = 0; k < rows; ++k) {
            y[o + k] = requantize_s16_words(acc[k] + bias[o + k], multiplier[o + k], shift[o + k], scale + o + k,
                                            rounding, output_offset, act_min, act_max);
        }
    }
}

void edgernn_fully_connected_group_s16_words(const int16_t *in, const int8_t *w, const int32_t *bias,
                                             const int32_t *multiplier, const int32_t *shift, const int64_t *scale,
                                             int rounding, int32_t output_offset, int32_t act_min, int32_t act_max,
                                             const int32_t *ends, int row0, int n_in, int n_out, int16_t *out0,
                                             int16_t *out1, int16_t *out2, int16_t *out3)
{
    FC_GROUP_S16_ROWS(fc_s16_row_words);
}

/* A block of 8 outputs o..o+7 of acc into y: FC_S8_BLOCKS' BLOCK8 for a constant rounding. */
#if defined(EDGERNN_FC_REQUANT_ASM)
#define FC_S8_BLOCK8(ROUNDING)                                                                      \
    do {                                                                                            \
        if ((ROUNDING) == EDGERNN_ROUND_TWICE_UP) {                                                 \
            FC_ASM8_TWICE_UP(FC_S8_OUT);                                                            \
        } else {                                                                                    \
            FC_ASM8_ONCE(FC_S8_OUT);                                                                \
        }                                                                                           \
    } while (0)
#else
#define FC_S8_BLOCK8(ROUNDING) FC_EACH8(FC_S8_OUT)
#endif

/* A worker's rows of every gate (edgernn_fully_connected_gates_s8), one function per rounding as above: the
 * gates' loop around the blocks' code, so a split by units pays a kernel's call once, not once a gate. A
 * worker's units in whole blocks of 8 (every worker's share of a split in eights) are one loop over the gates'
 * blocks, with nothing of the 4-row and 1-row tails' code between them: fc_s8_row's walk, gate by gate, cost
 * some 100 instructions of set-up a block on GAP8 (GVSOC's profile of the LSTM(64) step, 8 blocks a worker),
 * about as much as its 8 requantizations. Other shares (a last worker's units of one gate, 13 of them) take
 * the rows' function, whose code is there already: one copy of the blocks' code in this function, not two (the
 * cluster's instruction cache is 4 KiB). Last in the file: a model that does not call it keeps the code before
 * it where it was (on GAP8 the instruction cache's sets are chosen by the code's addresses). */
#define FC_S8_GATES(NAME, ROWS, ROUNDING)                                                           \
    static FC_NOINLINE void NAME(const int8_t *in, const int8_t *w, const int32_t *bias,             \
                                 const int32_t *multiplier, const int32_t *shift, int32_t output_offset, \
                                 int32_t act_min, int32_t act_max, int n_in, int stride, int gates,    \
                                 int begin, int end, int8_t *out)                                   \
    {                                                                                               \
        const uint32_t carry_above = 0xBFFFFFFFu; /* TWICE_UP's block requantization (fc_s8_row) */ \
        const int rounding = (ROUNDING);                                                            \
        const size_t block = 8 * (size_t)n_in;                                                      \
        const int8_t *const x = in;                                                                 \
        int g;                                                                                      \
        (void)carry_above;                                                                          \
        if ((end - begin) & 7) {                                                                    \
            for (g = 0; g < gates; ++g) {                                                           \
                const size_t r = (size_t)g * (size_t)stride + (size_t)begin;                        \
                ROWS(in, w + r * (size_t)n_in, bias + r, multiplier + r, shift + r, output_offset,   \
                     act_min, act_max, 1, n_in, end - begin, out + r);                              \
            }                                                                                       \
            return;                                                                                 \
        }                                                                                           \
        {                                                                                           \
            const int per_gate = (end - begin) >> 3;                                                \
            const size_t skip = (size_t)(stride - (end - begin));                                   \
            const int32_t *bq = bias + begin, *mq = multiplier + begin, *sq = shift + begin;        \
            int8_t *yq = out + begin;                                                               \
            const int8_t *wb = w + (size_t)begin * (size_t)n_in;                                    \
            int b, k = 0;                                                                           \
            for (b = gates * per_gate; b > 0; --b) {                                                \
                int32_t acc[8];                                                                     \
                acc[0] = bq[0];                                                                     \
                acc[1] = bq[1];                                                                     \
                acc[2] = bq[2];                                                                     \
                acc[3] = bq[3];                                                                     \
                acc[4] = bq[4];                                                                     \
                acc[5] = bq[5];                                                                     \
                acc[6] = bq[6];                                                                     \
                acc[7] = bq[7];                                                                     \
                edgernn_dot8_s8(x, wb, n_in, acc);                                                  \
                {                                                                                   \
                    const int32_t *const multiplier = mq, *const shift = sq;                        \
                    int8_t *const y = yq;                                                           \
                    const int o = 0;                                                                \
                    FC_S8_BLOCK8(ROUNDING);                                                         \
                }                                                                                   \
                bq += 8;                                                                            \
                mq += 8;                                                                            \
                sq += 8;                                                                            \
                yq += 8;                                                                            \
                wb += block;                                                                        \
                if (++k == per_gate) {                                                              \
                    k = 0;                                                                          \
                    bq += skip;                                                                     \
                    mq += skip;                                                                     \
                    sq += skip;                                                                     \
                    yq += skip;                                                                     \
                    wb += skip * (size_t)n_in;                                                      \
                }                                                                                   \
            }                                                                                       \
        }                                                                                           \
    }
FC_S8_GATES(fully_connected_gates_s8_once, fully_connected_s8_once, EDGERNN_ROUND_ONCE)
FC_S8_GATES(fully_connected_gates_s8_twice_up, fully_connected_s8_twice_up, EDGERNN_ROUND_TWICE_UP)

void edgernn_fully_connected_gates_s8(const int8_t *in, const int8_t *w, const int32_t *bias,
                                      const int32_t *multiplier, const int32_t *shift, int rounding,
                                      int32_t output_offset, int32_t act_min, int32_t act_max, int n_in, int stride,
                                      int gates, int begin, int end, int8_t *out)
{
    if (rounding == EDGERNN_ROUND_TWICE_UP) {
        fully_connected_gates_s8_twice_up(in, w, bias, multiplier, shift, output_offset, act_min, act_max, n_in,
                                          stride, gates, begin, end, out);
    } else {
        fully_connected_gates_s8_once(in, w, bias, multiplier, shift, output_offset, act_min, act_max, n_in, stride,
                                      gates, begin, end, out);
    }
}
