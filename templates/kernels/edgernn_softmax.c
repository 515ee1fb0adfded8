#include "edgernn_fixedpoint.h"
#include "edgernn_kernels.h"

/* ---- 8-bit: reference_ops::Softmax, gemmlowp fixed point ---- */

/* gemmlowp::exp_on_interval_between_negative_one_quarter_and_0_excl, Q0.31 in and out */
static int32_t exp_quarter(int32_t a)
{
    const int32_t constant_term = 1895147668;    /* exp(-1/8) */
    const int32_t constant_1_over_3 = 715827883;
    const int32_t x = a + (1 << 28);
    const int32_t x2 = edgernn_srdhm(x, x);
    const int32_t x3 = edgernn_srdhm(x2, x);
    const int32_t x4 = edgernn_srdhm(x2, x2);
    const int32_t x4_over_4 = edgernn_rdbpot(x4, 2);
    const int32_t poly = edgernn_rdbpot(edgernn_srdhm(x4_over_4 + x3, constant_1_over_3) + x2, 1);
    return constant_term + edgernn_srdhm(constant_term, x + poly);
}

/* gemmlowp::exp_on_negative_values for an input with 5 integer bits; result Q0.31 */
static int32_t exp_on_negative_values_5(int32_t a)
{
    static const int32_t multipliers[7] = {1672461947, 1302514674, 790015084, 290630308,
                                           39332535, 720401, 242};
    const int fractional_bits = 26;
    const int32_t one_quarter = (int32_t)1 << (fractional_bits - 2);
    const int32_t mask = one_quarter - 1;
    const int32_t a_mod_quarter_minus_one_quarter = (a & mask) - one_quarter;
    int32_t result = exp_quarter(edgernn_saturating_shl(a_mod_quarter_minus_one_quarter, 5));
    const int32_t remainder = a_mod_quarter_minus_one_quarter - a;
    int k;
    for (k = 0; k < 7; ++k) {   /* exponents -2 .. +4 */
        if (remainder & ((int32_t)1 << (fractional_bits - 2 + k))) {
            result = edgernn_srdhm(result, multipliers[k]);
        }
    }
    return a == 0 ? INT32_MAX : result;
}

void edgernn_softmax_s8(int32_t input_multiplier, int input_left_shift, int32_t diff_min, const int8_t *in,
                        int rows, int depth, int8_t *out)
{
    int r, c;
    for (r = 0; r < rows; ++r) {
        const int8_t *x = in + (size_t)r * depth;
        int8_t *y = out + (size_t)r * depth;
        int32_t max_in_row = -128;
        int32_t sum_of_exps = 0;   /* Q12.19 */
        int headroom_plus_one, num_bits_over_unit;
        int32_t shifted_scale;
        for (c = 0; c < depth; ++c) {
            max_in_row = x[c] > max_in_row ? x[c] : max_in_row;
        }
        for (c = 0; c < depth; ++c) {
            const int32_t diff = x[c] - max_in_row;
            if (diff >= diff_min) {
                const int32_t scaled = edgernn_srdhm(diff * (1 << input_left_shift), input_multiplier);
                sum_of_exps += edgernn_rdbpot(exp_on_negative_values_5(scaled), 12);
            }
        }
        /* tflite::GetReciprocal(sum, 12 integer bits) */
        headroom_plus_one = edgernn_clz32((uint32_t)sum_of_exps);
        num_bits_over_unit = 12 - headroom_plus_one;
        shifted_scale = edgernn_one_over_one_plus_x(
            (int32_t)(((uint32_t)sum_of_exps << headroom_plus_one) - ((uint32_t)1 << 31)));
        for (c = 0; c < depth; ++c) {
            const int32_t diff = x[c] - max_in_row;
            if (diff >= diff_min) {
                const int32_t scaled = edgernn_srdhm(diff * (1 << input_left_shift), input_multiplier);
                const int32_t e = exp_on_negative_values_5(scaled);
                const int32_t unsat = edgernn_rdbpot(edgernn_srdhm(shifted_scale, e), num_bits_over_unit + 31 - 8);
                y[c] = (int8_t)edgernn_clamp(unsat - 128, -128, 127);
            } else {
                y[c] = -128;
            }
        }
    }
}

/* ---- 16-bit: reference_ops::SoftmaxInt16, two interpolated 513-entry tables ---- */

void edgernn_softmax_s16(const int16_t *exp_lut, const int16_t *recip_lut, int32_t input_multiplier,
                         int input_shift, const int16_t *in, int rows, int depth, int16_t *out)
{
    int r, c;
    for (r = 0; r < rows; ++r) {
        const int16_t *x = in + (size_t)r * depth;
        int16_t *y = out + (size_t)r * depth;
        int32_t max_in_row = -32768;
        int32_t sum_of_exps = 0;   /* Q16.15 */
        int headroom_plus_one, right_shift;
        int32_t shifted_sum, reciprocal;
        for (c = 0; c < depth; ++c) {
            max_in_row = x[c] > max_in_row ? x[c] : max_in_row;
        }
        /* exp(x - max) into y (Q0.15), inputs scaled so that [-65535, 0] is [-10, 0] */
        for (c = 0; c < depth; ++c) {
            const int32_t scaled = edgernn_mbqm(x[c] - max_in_row, input_multiplier, input_shift);
            const int32_t symmetric = edgernn_clamp(scaled + 32767, -32768, 32767);
            y[c] = (int16_t)edgernn_lut_lookup_s16(exp_lut, symmetric);
            sum_of_exps += y[c];
        }
        headroom_plus_one = edgernn_clz32((uint32_t)sum_of_exps);
        shifted_sum = (int32_t)((((int64_t)sum_of_exps << (headroom_plus_one - 1)) + (1 << 13)) >> 14);
        reciprocal = edgernn_lut_lookup_s16(recip_lut,
                                    edgernn_clamp(shifted_sum - ((1 << 15) + (1 << 16)), -32768, 32767));
        right_shift = 31 - headroom_plus_one;
        for (c = 0; c < depth; ++c) {
            const int64_t round = (int64_t)1 << (right_shift - 1);
            const int32_t result = (int32_t)(((int64_t)y[c] * (int64_t)(int16_t)reciprocal + round) >> right_shift);
            y[c] = (int16_t)edgernn_clamp(result, 0, 32767);
        }
    }
}
