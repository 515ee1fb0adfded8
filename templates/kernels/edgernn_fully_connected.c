#include <stdint.h>
#include <string.h>

#include "edgernn_fixedpoint.h"
#include "edgernn_kernels.h"

/* The int8 dot products take GAP8's Xpulp SIMD instruction pv.sdotsp.b (four int8 products summed
 * into int32) through the PULP builtin __builtin_pulp_sdotsp4 when the GAP SDK compiles this file:
 * the SDK's chip configuration, force-included in its GAP8 builds, defines ARCHI_CORE_HAS_PULPV2
 * (gap_sdk: pulp-os/include/gap_rev1_config.h), and the SDK's own wrappers select the builtins on
 * __pulp__ (gap_sdk: tools/autotiler_v3/Emulation/GapBuiltins.h, `!defined(__EMUL__) ||
 * defined(__pulp__)`), with __GAP8__ for GAP8-only ones. -DEDGERNN_XPULP=1 forces the path and
 * -DEDGERNN_XPULP=0 turns it off; -DEDGERNN_XPULP_EMULATE builds it anywhere on the C emulation
 * of edgernn_xpulp_emul.h. Everywhere else the portable C below is compiled. */
#if defined(EDGERNN_XPULP_EMULATE)
#include "edgernn_xpulp_emul.h"
#define EDGERNN_FC_XPULP 1
#elif defined(EDGERNN_XPULP)
#if EDGERNN_XPULP
#define EDGERNN_FC_XPULP 1
#endif
#elif (defined(__riscv) || defined(__riscv__)) && \
    (defined(ARCHI_CORE_HAS_PULPV2) || defined(__pulp__) || defined(__GAP8__) || defined(__gap8__))
#define EDGERNN_FC_XPULP 1
#endif

#if defined(EDGERNN_FC_XPULP) && !defined(EDGERNN_XPULP_EMULATE)
typedef signed char edgernn_v4s __attribute__((vector_size(4)));
#define EDGERNN_SDOTSP4(a, b, acc) __builtin_pulp_sdotsp4((a), (b), (acc))
#endif

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

static inline int8_t requantize_s8(int32_t acc, int32_t multiplier, int32_t shift, int32_t output_offset,
                                   int32_t act_min, int32_t act_max)
{
    return (int8_t)edgernn_clamp(edgernn_mbqm_single(acc, multiplier, shift) + output_offset, act_min, act_max);
}

#if defined(EDGERNN_FC_XPULP)
/* Four bytes as one word: memcpy is safe at any alignment, and where the pointer is known to be
 * 4-byte aligned the compiler turns it into a single word load. */
static inline edgernn_v4s load4(const int8_t *p)
{
    edgernn_v4s v;
    memcpy(&v, p, sizeof v);
    return v;
}

#if defined(__GNUC__)
#define EDGERNN_ALIGNED4(p) ((const int8_t *)__builtin_assume_aligned((p), 4))
#else
#define EDGERNN_ALIGNED4(p) (p)
#endif

/* Four rows, four inputs per pv.sdotsp.b; inputs past the last multiple of 4 in plain C. */
#define EDGERNN_FC_XPULP_ROWS4(X, W0, W1, W2, W3)                                                   \
    for (i = 0; i < n4; i += 4) {                                                                 \
        const edgernn_v4s xv = load4((X) + i);                                                    \
        a0 = EDGERNN_SDOTSP4(xv, load4((W0) + i), a0);                                            \
        a1 = EDGERNN_SDOTSP4(xv, load4((W1) + i), a1);                                            \
        a2 = EDGERNN_SDOTSP4(xv, load4((W2) + i), a2);                                            \
        a3 = EDGERNN_SDOTSP4(xv, load4((W3) + i), a3);                                            \
    }

static void fully_connected_s8_xpulp(const int8_t *in, const int8_t *w, const int32_t *bias,
                                     const int32_t *multiplier, const int32_t *shift, int32_t output_offset,
                                     int32_t act_min, int32_t act_max, int rows, int n_in, int n_out,
                                     int8_t *out)
{
    const int n4 = n_in & ~3;
    int r, o, i;
    for (r = 0; r < rows; ++r) {
        const int8_t *x = in + (size_t)r * n_in;
        int8_t *y = out + (size_t)r * n_out;
        for (o = 0; o + 4 <= n_out; o += 4) {
            const int8_t *w0 = w + (size_t)o * n_in;
            const int8_t *w1 = w0 + n_in;
            const int8_t *w2 = w1 + n_in;
            const int8_t *w3 = w2 + n_in;
            int32_t a0 = bias[o], a1 = bias[o + 1], a2 = bias[o + 2], a3 = bias[o + 3];
            if ((((uintptr_t)x | (uintptr_t)w0 | (uintptr_t)n_in) & 3u) == 0) {
                /* x and all four rows start on a word: word loads */
                EDGERNN_FC_XPULP_ROWS4(EDGERNN_ALIGNED4(x), EDGERNN_ALIGNED4(w0), EDGERNN_ALIGNED4(w1),
                                       EDGERNN_ALIGNED4(w2), EDGERNN_ALIGNED4(w3))
            } else {
                EDGERNN_FC_XPULP_ROWS4(x, w0, w1, w2, w3)
            }
            for (i = n4; i < n_in; ++i) {
                const int32_t xi = x[i];
                a0 += xi * w0[i];
                a1 += xi * w1[i];
                a2 += xi * w2[i];
                a3 += xi * w3[i];
            }
            y[o] = requantize_s8(a0, multiplier[o], shift[o], output_offset, act_min, act_max);
            y[o + 1] = requantize_s8(a1, multiplier[o + 1], shift[o + 1], output_offset, act_min, act_max);
            y[o + 2] = requantize_s8(a2, multiplier[o + 2], shift[o + 2], output_offset, act_min, act_max);
            y[o + 3] = requantize_s8(a3, multiplier[o + 3], shift[o + 3], output_offset, act_min, act_max);
        }
        for (; o < n_out; ++o) {
            const int8_t *wo = w + (size_t)o * n_in;
            int32_t acc = bias[o];
            for (i = 0; i < n4; i += 4) {
                acc = EDGERNN_SDOTSP4(load4(x + i), load4(wo + i), acc);
            }
            for (; i < n_in; ++i) {
                acc += (int32_t)x[i] * (int32_t)wo[i];
            }
            y[o] = requantize_s8(acc, multiplier[o], shift[o], output_offset, act_min, act_max);
        }
    }
}
#endif

/* Where the core has a vector unit, a block of 16 inputs is a loop of fixed length, which gcc and
 * clang vectorize at -O2; on a scalar core (or with -DEDGERNN_FC_SCALAR) it is 8 inputs written
 * out, which saves the loop's overhead. */
#if (defined(__SSE2__) || defined(__ARM_NEON) || defined(__ARM_NEON__)) && !defined(EDGERNN_FC_SCALAR)
#define EDGERNN_FC_VECTOR_BLOCK 1
#endif

#define EDGERNN_FC_MAC4(k)                                                                          \
    do {                                                                                            \
        const int32_t xk = x[k];                                                                    \
        a0 += xk * w0[k];                                                                           \
        a1 += xk * w1[k];                                                                           \
        a2 += xk * w2[k];                                                                           \
        a3 += xk * w3[k];                                                                           \
    } while (0)

/* Four output rows at a time share each load of the input (the blocking of CMSIS-NN's
 * arm_nn_vec_mat_mult_t_s8), in blocks of inputs as above, then two inputs per iteration and a
 * last one. The sums are exact int32 arithmetic, so the order does not change the result. Rows
 * [r0, r1) of the output are the same call with w, bias, multiplier, shift advanced by r0 rows, out
 * by r0, and n_out = r1 - r0 (rows == 1). */
void edgernn_fully_connected_s8(const int8_t *in, const int8_t *w, const int32_t *bias,
                                const int32_t *multiplier, const int32_t *shift, int32_t output_offset,
                                int32_t act_min, int32_t act_max, int rows, int n_in, int n_out,
                                int8_t *out)
{
#if defined(EDGERNN_FC_XPULP)
    fully_connected_s8_xpulp(in, w, bias, multiplier, shift, output_offset, act_min, act_max, rows, n_in, n_out,
                             out);
#else
    int r, o, i;
    for (r = 0; r < rows; ++r) {
        const int8_t *x = in + (size_t)r * n_in;
        int8_t *y = out + (size_t)r * n_out;
        for (o = 0; o + 4 <= n_out; o += 4) {
            const int8_t *w0 = w + (size_t)o * n_in;
            const int8_t *w1 = w0 + n_in;
            const int8_t *w2 = w1 + n_in;
            const int8_t *w3 = w2 + n_in;
            int32_t a0 = bias[o], a1 = bias[o + 1], a2 = bias[o + 2], a3 = bias[o + 3];
#if defined(EDGERNN_FC_VECTOR_BLOCK)
            for (i = 0; i + 16 <= n_in; i += 16) {
                int k;
                for (k = 0; k < 16; ++k) {
                    EDGERNN_FC_MAC4(i + k);
                }
            }
#else
            for (i = 0; i + 8 <= n_in; i += 8) {
                EDGERNN_FC_MAC4(i);
                EDGERNN_FC_MAC4(i + 1);
                EDGERNN_FC_MAC4(i + 2);
                EDGERNN_FC_MAC4(i + 3);
                EDGERNN_FC_MAC4(i + 4);
                EDGERNN_FC_MAC4(i + 5);
                EDGERNN_FC_MAC4(i + 6);
                EDGERNN_FC_MAC4(i + 7);
            }
#endif
            for (; i + 2 <= n_in; i += 2) {
                const int32_t x0 = x[i], x1 = x[i + 1];
                a0 += x0 * w0[i] + x1 * w0[i + 1];
                a1 += x0 * w1[i] + x1 * w1[i + 1];
                a2 += x0 * w2[i] + x1 * w2[i + 1];
                a3 += x0 * w3[i] + x1 * w3[i + 1];
            }
            if (i < n_in) {
                const int32_t x0 = x[i];
                a0 += x0 * w0[i];
                a1 += x0 * w1[i];
                a2 += x0 * w2[i];
                a3 += x0 * w3[i];
            }
            y[o] = requantize_s8(a0, multiplier[o], shift[o], output_offset, act_min, act_max);
            y[o + 1] = requantize_s8(a1, multiplier[o + 1], shift[o + 1], output_offset, act_min, act_max);
            y[o + 2] = requantize_s8(a2, multiplier[o + 2], shift[o + 2], output_offset, act_min, act_max);
            y[o + 3] = requantize_s8(a3, multiplier[o + 3], shift[o + 3], output_offset, act_min, act_max);
        }
        for (; o < n_out; ++o) {
            const int8_t *wo = w + (size_t)o * n_in;
            int32_t acc = bias[o];
            for (i = 0; i < n_in; ++i) {
                acc += (int32_t)x[i] * (int32_t)wo[i];
            }
            y[o] = requantize_s8(acc, multiplier[o], shift[o], output_offset, act_min, act_max);
        }
    }
#endif
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

static inline int16_t requantize_s16(int64_t acc, int32_t multiplier, int32_t shift, int32_t output_offset,
                                     int32_t act_min, int32_t act_max)
{
    return (int16_t)edgernn_clamp(edgernn_mbqm64(acc, multiplier, shift) + output_offset, act_min, act_max);
}

void edgernn_fully_connected_s16(const int16_t *in, const int8_t *w, const int64_t *bias,
                                 const int32_t *multiplier, const int32_t *shift, int32_t output_offset,
                                 int32_t act_min, int32_t act_max, int rows, int n_in, int n_out,
                                 int16_t *out)
{
    int r, o, i, i0;
    for (r = 0; r < rows; ++r) {
        const int16_t *x = in + (size_t)r * n_in;
        int16_t *y = out + (size_t)r * n_out;
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
#if defined(EDGERNN_FC_VECTOR_BLOCK)
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
            y[o] = requantize_s16(a0, multiplier[o], shift[o], output_offset, act_min, act_max);
            y[o + 1] = requantize_s16(a1, multiplier[o + 1], shift[o + 1], output_offset, act_min, act_max);
            y[o + 2] = requantize_s16(a2, multiplier[o + 2], shift[o + 2], output_offset, act_min, act_max);
            y[o + 3] = requantize_s16(a3, multiplier[o + 3], shift[o + 3], output_offset, act_min, act_max);
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
            y[o] = requantize_s16(acc, multiplier[o], shift[o], output_offset, act_min, act_max);
        }
    }
}
