/* UNIDIRECTIONAL_SEQUENCE_LSTM: one batch, T time steps, the state updated in place.
 *
 * The int8 kernel is TFLite's integer LSTM (lstm_eval.cc, EvalInteger8x8_16) without layer norm,
 * projection, peephole or CIFG: int8 input and hidden state, int8 weights, int16 gates in Q3.12
 * before their activation and Q0.15 after it, an int16 cell state with a power-of-two scale.
 * The sigmoid and tanh are gemmlowp's 16-bit fixed-point logistic and tanh, which TFLite's
 * portable tensor utils apply (ApplySigmoid, ApplyTanh), reproduced here operation for operation,
 * including the wrap-around of 16-bit adds that gemmlowp leaves unsaturated.
 */
#include <math.h>

#include "edgernn_fixedpoint.h"
#include "edgernn_kernels.h"

/* ---- gemmlowp fixed point on int16 raw values ---- */

/* The activations are inlined into their callers so that constant integer bits fold away (except
 * when optimizing for size). */
#if defined(__GNUC__) && !defined(__OPTIMIZE_SIZE__)
#define FX_INLINE inline __attribute__((always_inline))
#else
#define FX_INLINE inline
#endif

static inline int16_t fx_wrap(int32_t x)
{
    return (int16_t)x;
}

static inline int16_t fx_mul(int16_t a, int16_t b)
{
    int32_t ab;
    int32_t nudge;
    if (a == b && a == INT16_MIN) {
        return INT16_MAX;
    }
    ab = (int32_t)a * (int32_t)b;
    nudge = ab >= 0 ? (1 << 14) : (1 - (1 << 14));
    return (int16_t)((ab + nudge) / (1 << 15));
}

static inline int16_t fx_rdbpot(int16_t x, int exponent)
{
    const int16_t mask = (int16_t)((1 << exponent) - 1);
    const int16_t remainder = (int16_t)(x & mask);
    const int16_t threshold = (int16_t)((mask >> 1) + (x < 0 ? 1 : 0));
    return fx_wrap((x >> exponent) + (remainder > threshold ? 1 : 0));
}

/* SaturatingRoundingMultiplyByPOT<exponent> */
static inline int16_t fx_mul_pot(int16_t x, int exponent)
{
    if (exponent > 0) {
        const int32_t threshold = (1 << (15 - exponent)) - 1;
        if (x > threshold) {
            return INT16_MAX;
        }
        if (x < -threshold) {
            return INT16_MIN;
        }
        return fx_wrap((int32_t)x * (1 << exponent));
    }
    if (exponent < 0) {
        return fx_rdbpot(x, -exponent);
    }
    return x;
}

static inline int16_t fx_saturating_add(int16_t a, int16_t b)
{
    return (int16_t)edgernn_clamp((int32_t)a + (int32_t)b, INT16_MIN, INT16_MAX);
}

/* The 32-bit constants of gemmlowp, rounded to 16 bits (RescaleConstantInitializer). */
#define FX_EXP_MINUS_ONE_EIGHTH 28918 /* 1895147668 */
#define FX_ONE_THIRD 10923            /* 715827883 */
#define FX_48_OVER_17 23130           /* 1515870810, Q2.13 */
#define FX_NEG_32_OVER_17 (-15420)    /* -1010580540, Q2.13 */

/* exp(-2^k) for k = -2..4: the barrel shifter's factors (gemmlowp's 1672461947, 1302514674,
 * 790015084, 290630308, 39332535, 720401, 242) */
#define FX_EXP_BARREL(remainder, result, integer_bits, fractional_bits, k, factor)                  \
    do {                                                                                          \
        if ((integer_bits) > (k) && (((uint16_t)(remainder) >> ((fractional_bits) + (k))) & 1u)) { \
            (result) = fx_mul((result), (factor));                                                \
        }                                                                                         \
    } while (0)

/* exp(a) for a in [-1/4, 0), Q0.15 in and out */
static FX_INLINE int16_t fx_exp_quarter(int16_t a)
{
    const int16_t x = fx_wrap(a + (1 << 12));
    const int16_t x2 = fx_mul(x, x);
    const int16_t x3 = fx_mul(x2, x);
    const int16_t x4 = fx_mul(x2, x2);
    const int16_t x4_over_4 = fx_mul_pot(x4, -2);
    const int16_t poly =
        fx_mul_pot(fx_wrap(fx_mul(fx_wrap(x4_over_4 + x3), FX_ONE_THIRD) + x2), -1);
    return fx_saturating_add(FX_EXP_MINUS_ONE_EIGHTH, fx_mul(FX_EXP_MINUS_ONE_EIGHTH, fx_wrap(x + poly)));
}

/* exp(a) for a <= 0 with integer_bits integer bits, result Q0.15 */
static FX_INLINE int16_t fx_exp_on_negative(int16_t a, int integer_bits)
{
    const int fractional_bits = 15 - integer_bits;
    const int16_t one_quarter = (int16_t)(1 << (fractional_bits - 2));
    const int16_t mask = (int16_t)(one_quarter - 1);
    const int16_t a_mod_quarter_minus_one_quarter = fx_wrap((a & mask) - one_quarter);
    const int16_t remainder = fx_wrap(a_mod_quarter_minus_one_quarter - a);
    int16_t result = fx_exp_quarter(fx_mul_pot(a_mod_quarter_minus_one_quarter, integer_bits));
    FX_EXP_BARREL(remainder, result, integer_bits, fractional_bits, -2, 25520);
    FX_EXP_BARREL(remainder, result, integer_bits, fractional_bits, -1, 19875);
    FX_EXP_BARREL(remainder, result, integer_bits, fractional_bits, 0, 12055);
    FX_EXP_BARREL(remainder, result, integer_bits, fractional_bits, 1, 4435);
    FX_EXP_BARREL(remainder, result, integer_bits, fractional_bits, 2, 600);
    FX_EXP_BARREL(remainder, result, integer_bits, fractional_bits, 3, 11);
    FX_EXP_BARREL(remainder, result, integer_bits, fractional_bits, 4, 0);
    if (integer_bits > 5) {
        const int16_t clamp = (int16_t)(-(1 << (20 - integer_bits))); /* -32 */
        if (a < clamp) {
            result = 0;
        }
    }
    return a == 0 ? INT16_MAX : result;
}

/* Newton-Raphson for 1 / (1 + a) (logistic) and (1 - a) / (1 + a) (tanh), a in Q0.15 */
static FX_INLINE int16_t fx_newton_half_reciprocal(int16_t a)
{
    const int32_t sum = (int32_t)a + INT16_MAX;
    const int16_t half_denominator = (int16_t)((sum + (sum >= 0 ? 1 : -1)) / 2);
    int16_t x = fx_wrap(FX_48_OVER_17 + fx_mul(half_denominator, FX_NEG_32_OVER_17));
    int k;
    for (k = 0; k < 3; ++k) {
        const int16_t one_minus = fx_wrap((1 << 13) - fx_mul(half_denominator, x));
        x = fx_wrap(x + fx_mul_pot(fx_mul(x, one_minus), 2));
    }
    return x; /* Q2.13 */
}

/* gemmlowp::logistic of a Q3.12 input, Q0.15 output */
static FX_INLINE int16_t fx_logistic_q3(int16_t a)
{
    const int16_t abs_input = a > 0 ? a : fx_wrap(-a);
    const int16_t result_if_positive =
        fx_mul_pot(fx_newton_half_reciprocal(fx_exp_on_negative(fx_wrap(-abs_input), 3)), 1);
    if (a == 0) {
        return 1 << 14;
    }
    return a > 0 ? result_if_positive : fx_wrap(INT16_MAX - result_if_positive);
}

/* gemmlowp::tanh of an input with integer_bits integer bits (0..6), Q0.15 output */
static FX_INLINE int16_t fx_tanh(int16_t a, int integer_bits)
{
    const int16_t n = a < 0 ? a : fx_wrap(-a);
    const int16_t exp_value = fx_exp_on_negative(n, integer_bits + 1);
    const int16_t t = fx_mul_pot(fx_wrap(fx_newton_half_reciprocal(exp_value) - (1 << 13)), 2);
    if (a == 0) {
        return 0;
    }
    return a < 0 ? fx_wrap(-t) : t;
}

/* ---- int8 ---- */

static int16_t gate_add(int32_t acc, int32_t multiplier, int32_t shift, int16_t gate)
{
    return (int16_t)edgernn_clamp(edgernn_mbqm(acc, multiplier, (int)shift) + gate, INT16_MIN, INT16_MAX);
}

/* gate[r] = clamp16(MBQM(bias[r] + w[r] . v, multiplier, shift) + gate[r]) for one gate: TFLite's
 * MatrixBatchVectorMultiplyAccumulate with int16 output, four rows at a time so that each v[c] is
 * loaded once for four products. */
static void gate_accumulate_s8(const int8_t *w, const int32_t *bias, int32_t multiplier, int32_t shift,
                               const int8_t *v, int n_cols, int n_rows, int16_t *gate)
{
    int r = 0;
    for (; r + 4 <= n_rows; r += 4) {
        const int8_t *w0 = w + (size_t)r * (size_t)n_cols;
        const int8_t *w1 = w0 + n_cols;
        const int8_t *w2 = w1 + n_cols;
        const int8_t *w3 = w2 + n_cols;
        int32_t a0 = bias[r], a1 = bias[r + 1], a2 = bias[r + 2], a3 = bias[r + 3];
        int c;
        for (c = 0; c < n_cols; ++c) {
            const int32_t vc = v[c];
            a0 += (int32_t)w0[c] * vc;
            a1 += (int32_t)w1[c] * vc;
            a2 += (int32_t)w2[c] * vc;
            a3 += (int32_t)w3[c] * vc;
        }
        gate[r] = gate_add(a0, multiplier, shift, gate[r]);
        gate[r + 1] = gate_add(a1, multiplier, shift, gate[r + 1]);
        gate[r + 2] = gate_add(a2, multiplier, shift, gate[r + 2]);
        gate[r + 3] = gate_add(a3, multiplier, shift, gate[r + 3]);
    }
    for (; r < n_rows; ++r) {
        const int8_t *row = w + (size_t)r * (size_t)n_cols;
        int32_t acc = bias[r];
        int c;
        for (c = 0; c < n_cols; ++c) {
            acc += (int32_t)row[c] * (int32_t)v[c];
        }
        gate[r] = gate_add(acc, multiplier, shift, gate[r]);
    }
}

void edgernn_lstm_s8(const edgernn_lstm_s8_params_t *p, const int8_t *w_in, const int8_t *w_rec,
                     const int32_t *bias_in, const int32_t *bias_rec, int steps, const int8_t *x,
                     int8_t *h, int16_t *c, int8_t *y, int16_t *scratch)
{
    const int n_in = (int)p->n_input;
    const int n_cell = (int)p->n_cell;
    const int tanh_cell = p->cell_tanh_integer_bits >= 0 && p->cell_tanh_integer_bits <= 6;
    int t;
    for (t = 0; t < steps; ++t) {
        const int8_t *xt = x + (size_t)t * (size_t)n_in;
        int g, j;
        for (j = 0; j < 4 * n_cell; ++j) {
            scratch[j] = 0;
        }
        /* gates i, f, c, o: input part, then recurrent part on the previous h */
        for (g = 0; g < 4; ++g) {
            int16_t *gate = scratch + (size_t)g * (size_t)n_cell;
            gate_accumulate_s8(w_in + (size_t)g * (size_t)n_cell * (size_t)n_in, bias_in + (size_t)g * (size_t)n_cell,
                               p->in_multiplier[g], p->in_shift[g], xt, n_in, n_cell, gate);
            gate_accumulate_s8(w_rec + (size_t)g * (size_t)n_cell * (size_t)n_cell,
                               bias_rec + (size_t)g * (size_t)n_cell, p->rec_multiplier[g], p->rec_shift[g], h,
                               n_cell, n_cell, gate);
        }
        for (j = 0; j < n_cell; ++j) {
            const int16_t ig = fx_logistic_q3(scratch[j]);
            const int16_t fg = fx_logistic_q3(scratch[n_cell + j]);
            const int16_t cg = fx_tanh(scratch[2 * n_cell + j], 3);
            const int16_t og = fx_logistic_q3(scratch[3 * n_cell + j]);
            /* UpdateLstmCellInteger: CwiseMul by 2^-15 and 2^-(30 + cell scale), CwiseAdd, clip */
            const int16_t kept = (int16_t)edgernn_rdbpot((int32_t)fg * (int32_t)c[j], 15);
            const int16_t added = (int16_t)edgernn_rdbpot((int32_t)ig * (int32_t)cg, (int)p->cell_shift);
            int32_t cell = edgernn_clamp((int32_t)kept + (int32_t)added, INT16_MIN, INT16_MAX);
            int32_t hidden;
            if (p->cell_clip > 0) {
                cell = edgernn_clamp(cell, -p->cell_clip, p->cell_clip);
            }
            c[j] = (int16_t)cell;
            /* CalculateLstmOutputInteger8x8_16 without projection. TFLite's ApplyTanh handles 0 to 6
             * integer bits; for any other cell scale it writes nothing, and the product takes the
             * input gate left in that scratch buffer instead of tanh(c). */
            hidden = (int32_t)og * (int32_t)(tanh_cell ? fx_tanh(c[j], (int)p->cell_tanh_integer_bits) : ig);
            hidden = edgernn_mbqm(hidden, p->hidden_multiplier, (int)p->hidden_shift) + p->hidden_zero_point;
            scratch[j] = (int16_t)edgernn_clamp(hidden, -128, 127);
        }
        /* h is read by every gate of this step, so it changes only now */
        for (j = 0; j < n_cell; ++j) {
            h[j] = (int8_t)scratch[j];
            y[(size_t)t * (size_t)n_cell + (size_t)j] = h[j];
        }
    }
}

/* ---- float32 ---- */

static float sigmoidf_ref(float v)
{
    return 1.0f / (1.0f + expf(-v));
}

void edgernn_lstm_f32(const edgernn_lstm_f32_params_t *p, const float *w_in, const float *w_rec,
                      const float *bias, int steps, const float *x, float *h, float *c, float *y,
                      float *scratch)
{
    const int n_in = (int)p->n_input;
    const int n_cell = (int)p->n_cell;
    int t;
    for (t = 0; t < steps; ++t) {
        const float *xt = x + (size_t)t * (size_t)n_in;
        int r, j;
        for (r = 0; r < 4 * n_cell; ++r) {
            const float *wi = w_in + (size_t)r * (size_t)n_in;
            const float *wr = w_rec + (size_t)r * (size_t)n_cell;
            float acc_in = 0.0f;
            float acc_rec = 0.0f;
            int k;
            for (k = 0; k < n_in; ++k) {
                acc_in += wi[k] * xt[k];
            }
            for (k = 0; k < n_cell; ++k) {
                acc_rec += wr[k] * h[k];
            }
            scratch[r] = (bias[r] + acc_in) + acc_rec;
        }
        for (j = 0; j < n_cell; ++j) {
            const float ig = sigmoidf_ref(scratch[j]);
            const float fg = sigmoidf_ref(scratch[n_cell + j]);
            const float cg = tanhf(scratch[2 * n_cell + j]);
            const float og = sigmoidf_ref(scratch[3 * n_cell + j]);
            float cell = fg * c[j];
            cell += cg * ig;
            if (p->cell_clip > 0.0f) {
                cell = cell > p->cell_clip ? p->cell_clip : (cell < -p->cell_clip ? -p->cell_clip : cell);
            }
            c[j] = cell;
            scratch[j] = og * tanhf(cell);
        }
        for (j = 0; j < n_cell; ++j) {
            h[j] = scratch[j];
            y[(size_t)t * (size_t)n_cell + (size_t)j] = scratch[j];
        }
    }
}
