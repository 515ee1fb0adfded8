#include <math.h>

#include "edgernn_fixedpoint.h"
#include "edgernn_kernels.h"

/* The int32 sum of one reduced run: `reduced` values, `stride` apart. It holds 2^16 values of int16 (or
 * 2^24 of int8) without overflow. */
#define REDUCE_SUM(T)                                                                               \
    static int32_t reduce_sum_##T(const T *p, int reduced, int stride)                              \
    {                                                                                               \
        int32_t sum = 0;                                                                            \
        int r;                                                                                      \
        for (r = 0; r < reduced; ++r) {                                                             \
            sum += p[(size_t)r * stride];                                                           \
        }                                                                                           \
        return sum;                                                                                 \
    }

REDUCE_SUM(int8_t)
REDUCE_SUM(int16_t)

/* MEAN, 8-bit: reference_ops::QuantizedMeanOrSum. The int32 sum of each reduced run, less
 * count * zero point, requantized once; the multiplier already holds 1 / count. */
void edgernn_mean_s8(const int8_t *in, int outer, int reduced, int inner, int32_t input_zero_point,
                     int32_t multiplier, int shift, int32_t output_zero_point, int8_t *out)
{
    int o, i;
    for (o = 0; o < outer; ++o) {
        for (i = 0; i < inner; ++i) {
            const int32_t sum = reduce_sum_int8_t(in + (size_t)o * reduced * inner + i, reduced, inner) -
                                input_zero_point * reduced;
            out[(size_t)o * inner + i] =
                (int8_t)edgernn_clamp(edgernn_mbqm(sum, multiplier, shift) + output_zero_point, -128, 127);
        }
    }
}

/* SUM, 8-bit, as LiteRT's SUM kernel computes it: the int32 sum rescaled in float,
 * out = clamp(roundf(sum * scale + bias) + output_zero_point), with scale = s_in / s_out and
 * bias = -zp_in * scale * count in float32. The product goes through a volatile so that no compiler
 * fuses it with the addition into an fma, which would round once instead of twice. */
void edgernn_sum_s8(const int8_t *in, int outer, int reduced, int inner, float scale, float bias,
                    int32_t output_zero_point, int8_t *out)
{
    int o, i;
    for (o = 0; o < outer; ++o) {
        for (i = 0; i < inner; ++i) {
            const int32_t sum = reduce_sum_int8_t(in + (size_t)o * reduced * inner + i, reduced, inner);
            volatile float scaled;
            float shifted;
            scaled = (float)sum * scale;
            shifted = scaled + bias;
            out[(size_t)o * inner + i] =
                (int8_t)edgernn_clamp((int32_t)roundf(shifted) + output_zero_point, -128, 127);
        }
    }
}

/* The int32 sum of one strided run, four values an iteration: a GAP8 core's compiled loops have no hardware
 * loop, and each taken branch back costs it three cycles. Same sum: int32 addition is associative, and no
 * partial sum overflows (see REDUCE_SUM). */
#define REDUCE_SUM_QUADS(T)                                                                         \
    static int32_t reduce_sum_quads_##T(const T *p, int reduced, int stride)                        \
    {                                                                                               \
        int32_t sum = 0;                                                                            \
        int r;                                                                                      \
        for (r = 0; r + 3 < reduced; r += 4) {                                                      \
            const int32_t a = p[0], b = p[stride], c = p[2 * stride], d = p[3 * stride];            \
            sum += (a + b) + (c + d);                                                               \
            p += 4 * (size_t)stride;                                                                \
        }                                                                                           \
        for (; r < reduced; ++r) {                                                                  \
            sum += p[0];                                                                            \
            p += stride;                                                                            \
        }                                                                                           \
        return sum;                                                                                 \
    }

REDUCE_SUM_QUADS(int8_t)
REDUCE_SUM_QUADS(int16_t)

/* SUM, 8-bit, by thresholds: edgernn_sum_s8's output as a function of the int32 sum is non-decreasing
 * (float products by a positive scale, adds and roundf all are), so generation lists the thresholds,
 * the least sum that gives each next output value, and a search over them replaces the float
 * arithmetic (software float on cores without an FPU: several hundred instructions per output).
 * The output is first plus the count of thresholds <= sum. The thresholds are about evenly spaced (the
 * output is about sum * scale + bias), so the count is guessed by interpolation between the first and
 * the last, and a walk from the guess corrects it: any start gives the exact count, and a good one takes a
 * step or two (a binary search over 255 thresholds takes eight). The interpolation's slope, (n - 1) / (last -
 * first) in 16.16, is thresholds[n], after the thresholds (generation computes it: no division at run time). */
void edgernn_sum_thresholds_s8(const int8_t *in, int outer, int reduced, int inner, int stride,
                               const int32_t *thresholds, int n_thresholds, int32_t first, int8_t *out)
{
    const int n = n_thresholds;
    const int32_t low = n > 0 ? thresholds[0] : 0, high = n > 0 ? thresholds[n - 1] : 0;
    /* the guess's product stays below (n - 1) << 16, n <= 256 */
    const uint32_t slope = (uint32_t)thresholds[n];
    int o, i;
    for (o = 0; o < outer; ++o) {
        for (i = 0; i < inner; ++i) {
            const int32_t sum = reduce_sum_quads_int8_t(in + (size_t)o * reduced * stride + i, reduced, stride);
            int count;
            if (n == 0 || sum < low) {
                count = 0;
            } else if (sum >= high) {
                count = n;
            } else {
                count = (int)((((uint32_t)sum - (uint32_t)low) * slope) >> 16);
                while (count < n && thresholds[count] <= sum) {
                    ++count;
                }
                while (count > 0 && thresholds[count - 1] > sum) {
                    --count;
                }
            }
            out[(size_t)o * inner + i] = (int8_t)(first + count);
        }
    }
}

/* MEAN, 16-bit: the same QuantizedMeanOrSum with zero points 0 (16x8 activations are symmetric). */
void edgernn_mean_s16(const int16_t *in, int outer, int reduced, int inner, int32_t multiplier, int shift,
                      int16_t *out)
{
    int o, i;
    for (o = 0; o < outer; ++o) {
        for (i = 0; i < inner; ++i) {
            const int32_t sum = reduce_sum_int16_t(in + (size_t)o * reduced * inner + i, reduced, inner);
            out[(size_t)o * inner + i] = (int16_t)edgernn_clamp(edgernn_mbqm(sum, multiplier, shift), -32768, 32767);
        }
    }
}

/* SUM at 16 bits with the input's quantization kept (zero points 0): LiteRT sums the raw values and
 * saturates the total to int16 (measured with LiteRT 2.3.0: tests/backend/test_mixed_seams.py). */
void edgernn_sum_s16(const int16_t *in, int outer, int reduced, int inner, int stride, int16_t *out)
{
    int o, i;
    for (o = 0; o < outer; ++o) {
        for (i = 0; i < inner; ++i) {
            const int32_t sum = reduce_sum_quads_int16_t(in + (size_t)o * reduced * stride + i, reduced, stride);
            out[(size_t)o * inner + i] = (int16_t)edgernn_clamp(sum, -32768, 32767);
        }
    }
}

/* REDUCE_MAX: the largest value of each reduced run. The integer ops keep their input's quantization
 * (generation checks it), so the raw values compare as the real ones do. */
#define REDUCE_MAX(T)                                                                               \
    do {                                                                                            \
        int o_, r_, i_;                                                                             \
        for (o_ = 0; o_ < outer; ++o_) {                                                            \
            for (i_ = 0; i_ < inner; ++i_) {                                                        \
                const T *p_ = in + (size_t)o_ * reduced * inner + i_;                               \
                T m_ = p_[0];                                                                       \
                for (r_ = 1; r_ < reduced; ++r_) {                                                  \
                    const T v_ = p_[(size_t)r_ * inner];                                            \
                    m_ = v_ > m_ ? v_ : m_;                                                         \
                }                                                                                   \
                out[(size_t)o_ * inner + i_] = m_;                                                  \
            }                                                                                       \
        }                                                                                           \
    } while (0)

void edgernn_reduce_max_f32(const float *in, int outer, int reduced, int inner, float *out)
{
    REDUCE_MAX(float);
}

void edgernn_reduce_max_s8(const int8_t *in, int outer, int reduced, int inner, int8_t *out)
{
    REDUCE_MAX(int8_t);
}

void edgernn_reduce_max_s16(const int16_t *in, int outer, int reduced, int inner, int16_t *out)
{
    REDUCE_MAX(int16_t);
}
