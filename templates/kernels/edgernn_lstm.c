/* UNIDIRECTIONAL_SEQUENCE_LSTM: one batch, T time steps, the state updated in place.
 *
 * The int8 kernel is TFLite's integer LSTM (lstm_eval.cc, EvalInteger8x8_16) without layer norm,
 * projection, peephole or CIFG: int8 input and hidden state, int8 weights, int16 gates in Q3.12
 * before their activation and Q0.15 after it, an int16 cell state with a power-of-two scale.
 * The sigmoid and tanh are gemmlowp's 16-bit fixed-point logistic and tanh, which TFLite's
 * portable tensor utils apply (ApplySigmoid, ApplyTanh): the same roundings in the same order, for
 * the same result on every input, without the saturations and wraps that their ranges never reach.
 */
#include <math.h>

#include "edgernn_dot.h"
#include "edgernn_fixedpoint.h"
#include "edgernn_kernels.h"
#include "edgernn_team.h"

/* ---- gemmlowp fixed point on int16 raw values ----
 *
 * gemmlowp's logistic and tanh (fixedpoint.h: exp_on_negative_values, one_over_one_plus_x_for_x_in_0_1,
 * one_minus_x_over_one_plus_x_for_x_in_0_1) at 16 bits, with the paths that cannot trigger on their
 * value ranges left out. Every intermediate below stays inside int16, so gemmlowp's wrapping 16-bit
 * adds never wrap and are done in int32; the saturations kept are the ones that do occur.
 * tests/c/lstm_fx_check.cc holds the result against gemmlowp itself on all 65,536 inputs. */

/* The activations are inlined into their callers so that constant integer bits fold away (except
 * when optimizing for size). */
#if defined(__GNUC__) && !defined(__OPTIMIZE_SIZE__)
#define FX_INLINE inline __attribute__((always_inline))
#else
#define FX_INLINE inline
#endif

/* SaturatingRoundingDoublingHighMul of int16: its nudge and truncating division equal
 * floor((a*b + 2^14) / 2^15) for every product (as for edgernn_srdhm in 32 bits). It saturates only
 * for a == b == INT16_MIN, which no product below has: one operand is always a positive constant or
 * a value known to be positive. */
static inline int32_t fx_mul(int32_t a, int32_t b)
{
    return (a * b + (1 << 14)) >> 15;
}

/* The 32-bit constants of gemmlowp, rounded to 16 bits (RescaleConstantInitializer). */
#define FX_EXP_MINUS_ONE_EIGHTH 28918 /* 1895147668 */
#define FX_ONE_THIRD 10923            /* 715827883 */
#define FX_48_OVER_17 23130           /* 1515870810, Q2.13 */
#define FX_NEG_32_OVER_17 (-15420)    /* -1010580540, Q2.13 */

/* exp(a) for a in [-1/4, 0), Q0.15 in and out (exp_on_interval_between_negative_one_quarter_and_0_excl).
 * On that interval x is in [-1/8, 1/8), x4 and x4/24 + x3/6 + x2/2 are >= 0 (so the two rounding
 * divisions by 4 and 2 are of non-negative values), and the result stays below 1, so the final
 * saturating add never saturates (every input checked). */
static FX_INLINE int32_t fx_exp_quarter(int32_t a)
{
    const int32_t x = a + (1 << 12);
    const int32_t x2 = fx_mul(x, x);
    const int32_t x3 = fx_mul(x2, x);
    const int32_t x4_over_4 = (fx_mul(x2, x2) + 2) >> 2;
    const int32_t poly = (fx_mul(x4_over_4 + x3, FX_ONE_THIRD) + x2 + 1) >> 1;
    return FX_EXP_MINUS_ONE_EIGHTH + fx_mul(FX_EXP_MINUS_ONE_EIGHTH, x + poly);
}

/* The barrel shifter: result times exp(-2^(j-2)) when bit j of sel is set, j = 0..5 (gemmlowp's
 * 1672461947, 1302514674, 790015084, 290630308, 39332535, 720401). gemmlowp has the factor only for
 * integer bits > j - 2; with fewer integer bits sel has no bit j, max_ib lets constant integer bits
 * drop the stage at compile time. */
#define FX_EXP_STAGE(j, factor)                                                                     \
    do {                                                                                          \
        if ((j) < max_ib + 2 && ((sel >> (j)) & 1)) {                                             \
            result = fx_mul(result, (factor));                                                    \
        }                                                                                         \
    } while (0)

/* exp(a) for a < 0 with ib integer bits (1..7, at most max_ib), given u = -a - 1 in [0, 2^15), result
 * in Q0.15. gemmlowp writes -a as a multiple of 1/4 plus a rest in (0, 1/4]: with u, the rest is
 * (u mod 1/4) + 1 (exp of minus it by the polynomial) and the multiple is sel = u / (1/4), whose bits
 * pick the barrel's factors. Its last factor, exp(-16), is 0 in 16 bits, and for more than 5 integer
 * bits gemmlowp clamps a < -32 to 0: together, sel >= 64 gives 0. a == 0 is the caller's. */
static FX_INLINE int32_t fx_exp_on_negative(int32_t u, int ib, int max_ib)
{
    const int quarter_shift = 13 - ib; /* 1/4 in Q(ib) is 2^(13 - ib) */
    const int32_t sel = u >> quarter_shift;
    int32_t result = fx_exp_quarter(-(((u & ((1 << quarter_shift) - 1)) + 1) << ib));
    FX_EXP_STAGE(0, 25520);
    FX_EXP_STAGE(1, 19875);
    FX_EXP_STAGE(2, 12055);
    FX_EXP_STAGE(3, 4435);
    FX_EXP_STAGE(4, 600);
    FX_EXP_STAGE(5, 11);
    if (max_ib >= 5 && sel >= 64) {
        result = 0;
    }
    return result;
}

/* Newton-Raphson for 2 / (1 + e), e in [0, 1) Q0.15, result Q2.13 in [1, 2]: the half denominator
 * (RoundingHalfSum(e, 1), of a positive sum) is in [1/2, 1), every correction x * (1 - hd * x) stays
 * under 2^9 in magnitude, so Rescale<2> of it never saturates. */
static FX_INLINE int32_t fx_newton_half_reciprocal(int32_t e)
{
    const int32_t half_denominator = (e + (1 << 15)) >> 1;
    int32_t x = FX_48_OVER_17 + fx_mul(half_denominator, FX_NEG_32_OVER_17);
    x += 4 * fx_mul(x, (1 << 13) - fx_mul(half_denominator, x));
    x += 4 * fx_mul(x, (1 << 13) - fx_mul(half_denominator, x));
    x += 4 * fx_mul(x, (1 << 13) - fx_mul(half_denominator, x));
    return x;
}

/* u = |a| - 1 for a != 0, with |INT16_MIN| taken as 2^15 (gemmlowp negates with a 16-bit wrap, which
 * leaves INT16_MIN as it is, the same -8 of the exp). */
static inline int32_t fx_magnitude_minus_one(int16_t a)
{
    return a > 0 ? (int32_t)a - 1 : ~(int32_t)a;
}

/* gemmlowp::logistic of a Q3.12 input, Q0.15 output: 1 / (1 + exp(-|a|)) is the Newton result
 * rescaled from Q1.14 to Q0.15 (saturating), and 1 minus it for a < 0. */
static FX_INLINE int16_t fx_logistic_q3(int16_t a)
{
    const int32_t r = 2 * fx_newton_half_reciprocal(fx_exp_on_negative(fx_magnitude_minus_one(a), 3, 3));
    const int32_t positive = r < INT16_MAX ? r : INT16_MAX;
    if (a == 0) {
        return 1 << 14;
    }
    return (int16_t)(a > 0 ? positive : INT16_MAX - positive);
}

/* gemmlowp::tanh of an input with ib integer bits (0 to max_ib <= 6), Q0.15 output:
 * (1 - exp(-2|a|)) / (1 + exp(-2|a|)), the exp's input being |a| with ib + 1 integer bits. */
static FX_INLINE int16_t fx_tanh_bits(int16_t a, int ib, int max_ib)
{
    const int32_t t =
        4 * (fx_newton_half_reciprocal(fx_exp_on_negative(fx_magnitude_minus_one(a), ib + 1, max_ib + 1)) - (1 << 13));
    const int32_t positive = t < INT16_MAX ? t : INT16_MAX;
    if (a == 0) {
        return 0;
    }
    return (int16_t)(a < 0 ? -positive : positive);
}

/* the cell gate's tanh, of a Q3.12 input */
static FX_INLINE int16_t fx_tanh_q3(int16_t a)
{
    return fx_tanh_bits(a, 3, 3);
}

/* tanh(c): integer bits known only at run time (0..6) */
static inline int16_t fx_tanh(int16_t a, int ib)
{
    return fx_tanh_bits(a, ib, 6);
}

/* ---- int8 ---- */

/* TFLite's MultiplyByQuantizedMultiplier(x, multiplier, shift), set up once per call. The left shift
 * wraps in int32 as TFLite's does. On a 64-bit core the rest is edgernn_rescale's one 64-bit
 * expression; a 32-bit core (or -DEDGERNN_LSTM_SCALE32) shifts the 64-bit product by the constant 31
 * only, floor((a * m + 2^30) / 2^31), the doubling high multiply (its saturation needs
 * m == INT32_MIN, which a quantized multiplier never is), and rounds the right shift in 32 bits. */
#if UINTPTR_MAX > 0xFFFFFFFFu && !defined(EDGERNN_LSTM_SCALE32)
typedef struct {
    edgernn_rescale_t rescale;
    int left_shift;
} lstm_scale_t;

static lstm_scale_t lstm_scale(int32_t multiplier, int32_t shift)
{
    lstm_scale_t s;
    s.rescale = edgernn_rescale_make(multiplier, 0, shift > 0 ? 0 : (int)-shift);
    s.left_shift = shift > 0 ? (int)shift : 0;
    return s;
}

static inline int32_t lstm_scaled(const lstm_scale_t *s, int32_t x)
{
    return edgernn_rescale(&s->rescale, (int32_t)((uint32_t)x << s->left_shift));
}
#else
typedef struct {
    int32_t multiplier;
    int left_shift;
    int right_shift;
    int64_t nudge_positive, nudge_negative; /* with a right shift: see lstm_scaled */
} lstm_scale_t;

static lstm_scale_t lstm_scale(int32_t multiplier, int32_t shift)
{
    lstm_scale_t s;
    s.multiplier = multiplier;
    s.left_shift = shift > 0 ? (int)shift : 0;
    s.right_shift = shift > 0 ? 0 : (int)-shift;
    s.nudge_positive = 0;
    s.nudge_negative = 0;
    if (s.right_shift > 0) {
        s.nudge_positive = ((int64_t)1 << 30) + ((int64_t)1 << (30 + s.right_shift));
        s.nudge_negative = s.nudge_positive - ((int64_t)1 << 31);
    }
    return s;
}

/* With a right shift e >= 1 (and so no left shift), the high multiply h = floor((x * m + 2^30) / 2^31)
 * and the rounding divide floor((h + 2^(e-1) - [h < 0]) / 2^e) nest into one floor:
 * (x * m + 2^30 + 2^(30+e) - [h < 0] * 2^31) >> (31 + e). h < 0 is x * m < -2^30; taking x < 0 instead
 * (m >= 0) changes only x * m in [-2^30, 0), where h is 0 and both sums stay in [0, 2^(31+e)), giving 0.
 * The shift is 32 or more, so only the high word of the 64-bit sum is shifted. */
static inline int32_t lstm_scaled(const lstm_scale_t *s, int32_t x)
{
    if (s->right_shift > 0) {
        const int64_t sum = (int64_t)x * s->multiplier + (x < 0 ? s->nudge_negative : s->nudge_positive);
        return (int32_t)(sum >> 32) >> (s->right_shift - 1);
    } else {
        const int32_t a = (int32_t)((uint32_t)x << s->left_shift);
        return (int32_t)(((int64_t)a * s->multiplier + ((int64_t)1 << 30)) >> 31);
    }
}
#endif

static inline int32_t clamp16(int32_t v)
{
    return edgernn_clamp(v, INT16_MIN, INT16_MAX);
}

/* Both kernels, the single-core one and the team's, run the time steps alike: the units' work of a
 * step (lstm_*_units over [0, n_cell), or split across the team by ranges of units), then the new h
 * published to the state and the output. Unit ranges start at multiples of 4, so at the start of an
 * int8 weight block of two units. */
#define LSTM_GRAIN 4

typedef struct {
    const edgernn_lstm_s8_params_t *p;
    const int8_t *w_in, *w_rec;
    const int32_t *bias_in, *bias_rec;
    const int8_t *xt, *h;
    int16_t *c, *scratch;
} lstm_s8_args_t;

/* Everything of a step that depends on the parameters only, computed once per call. */
typedef struct {
    lstm_scale_t in[4], rec[4], hidden;
    int cell_shift, tanh_bits, tanh_cell;
    int32_t cell_clip, hidden_zero_point;
} lstm_s8_consts_t;

/* One unit's cell update and new hidden state from its four gates (i, f, c, o) in Q3.12: c in place,
 * the new h returned. */
static int16_t lstm_s8_unit_tail(const lstm_s8_consts_t *k, const int32_t *gate, int16_t *c)
{
    const int16_t ig = fx_logistic_q3((int16_t)gate[0]);
    const int16_t fg = fx_logistic_q3((int16_t)gate[1]);
    const int16_t cg = fx_tanh_q3((int16_t)gate[2]);
    const int16_t og = fx_logistic_q3((int16_t)gate[3]);
    /* UpdateLstmCellInteger: CwiseMul by 2^-15 and 2^-(30 + cell scale), CwiseAdd, clip */
    const int16_t kept = (int16_t)edgernn_rdbpot((int32_t)fg * (int32_t)*c, 15);
    const int16_t added = (int16_t)edgernn_rdbpot((int32_t)ig * (int32_t)cg, k->cell_shift);
    int32_t cell = clamp16((int32_t)kept + (int32_t)added);
    int32_t hidden;
    if (k->cell_clip > 0) {
        cell = edgernn_clamp(cell, -k->cell_clip, k->cell_clip);
    }
    *c = (int16_t)cell;
    /* CalculateLstmOutputInteger8x8_16 without projection. TFLite's ApplyTanh handles 0 to 6
     * integer bits; for any other cell scale it writes nothing, and the product takes the
     * input gate left in that scratch buffer instead of tanh(c). */
    hidden = (int32_t)og * (int32_t)(k->tanh_cell ? fx_tanh((int16_t)cell, k->tanh_bits) : ig);
    hidden = lstm_scaled(&k->hidden, hidden) + k->hidden_zero_point;
    return (int16_t)edgernn_clamp(hidden, -128, 127);
}

/* One gate row: its input part, clamp16(MBQM(acc)), or its recurrent part added to that. */
#define LSTM_GATE_IN(r) gate[r] = clamp16(lstm_scaled(&k->in[(r) & 3], acc[r]))
#define LSTM_GATE_REC(r) gate[r] = clamp16(lstm_scaled(&k->rec[(r) & 3], acc[r]) + gate[r])

/* The gates of `units` (2 or 1, a constant once inlined) units, the 4 * units rows of one weight block,
 * then their tails. TFLite's MatrixBatchVectorMultiplyAccumulate with int16 output:
 * gate = clamp16(MBQM(bias + w . x)), then gate = clamp16(MBQM(bias + w . h) + gate) with the recurrent
 * scale. The rows are written out so that the sums and gates stay in registers. */
static EDGERNN_DOT_INLINE void lstm_s8_block(const lstm_s8_consts_t *k, const lstm_s8_args_t *a, int units,
                                             const int8_t *w_in, const int8_t *w_rec, const int32_t *bias_in,
                                             const int32_t *bias_rec, int16_t *c, int16_t *h_new)
{
    const int n_in = (int)a->p->n_input;
    const int n_cell = (int)a->p->n_cell;
    int32_t acc[8];
    int32_t gate[8];
    acc[0] = bias_in[0];
    acc[1] = bias_in[1];
    acc[2] = bias_in[2];
    acc[3] = bias_in[3];
    if (units == 2) {
        acc[4] = bias_in[4];
        acc[5] = bias_in[5];
        acc[6] = bias_in[6];
        acc[7] = bias_in[7];
        edgernn_dot8_s8(a->xt, w_in, n_in, acc);
        LSTM_GATE_IN(4);
        LSTM_GATE_IN(5);
        LSTM_GATE_IN(6);
        LSTM_GATE_IN(7);
        acc[4] = bias_rec[4];
        acc[5] = bias_rec[5];
        acc[6] = bias_rec[6];
        acc[7] = bias_rec[7];
    } else {
        edgernn_dot4_s8(a->xt, w_in, n_in, acc);
    }
    LSTM_GATE_IN(0);
    LSTM_GATE_IN(1);
    LSTM_GATE_IN(2);
    LSTM_GATE_IN(3);
    acc[0] = bias_rec[0];
    acc[1] = bias_rec[1];
    acc[2] = bias_rec[2];
    acc[3] = bias_rec[3];
    if (units == 2) {
        edgernn_dot8_s8(a->h, w_rec, n_cell, acc);
        LSTM_GATE_REC(4);
        LSTM_GATE_REC(5);
        LSTM_GATE_REC(6);
        LSTM_GATE_REC(7);
    } else {
        edgernn_dot4_s8(a->h, w_rec, n_cell, acc);
    }
    LSTM_GATE_REC(0);
    LSTM_GATE_REC(1);
    LSTM_GATE_REC(2);
    LSTM_GATE_REC(3);
    h_new[0] = lstm_s8_unit_tail(k, gate, c);
    if (units == 2) {
        h_new[1] = lstm_s8_unit_tail(k, gate + 4, c + 1);
    }
}

/* One time step for the units [begin, end): their four gates from x_t and all of the previous h, two
 * units at a time (the weights and biases are unit-major: unit u's gates i, f, c, o are rows 4u..4u+3,
 * in edgernn_dot.h's blocked layout), their cell state c[u] in place, and their new hidden state in
 * scratch[u]. It writes nothing another unit reads, so disjoint ranges can run at once; h changes only
 * after all of them. Any ranges give the same bytes. */
static void lstm_s8_units(const void *args, int begin, int end)
{
    const lstm_s8_args_t *a = (const lstm_s8_args_t *)args;
    const edgernn_lstm_s8_params_t *p = a->p;
    const size_t n_in = (size_t)p->n_input;
    const size_t n_cell = (size_t)p->n_cell;
    lstm_s8_consts_t k;
    int g, u;
    for (g = 0; g < 4; ++g) {
        k.in[g] = lstm_scale(p->in_multiplier[g], p->in_shift[g]);
        k.rec[g] = lstm_scale(p->rec_multiplier[g], p->rec_shift[g]);
    }
    k.hidden = lstm_scale(p->hidden_multiplier, p->hidden_shift);
    k.cell_shift = (int)p->cell_shift;
    k.tanh_bits = (int)p->cell_tanh_integer_bits;
    k.tanh_cell = k.tanh_bits >= 0 && k.tanh_bits <= 6;
    k.cell_clip = p->cell_clip;
    k.hidden_zero_point = p->hidden_zero_point;
    for (u = begin; u + 2 <= end; u += 2) {
        const size_t row = 4 * (size_t)u;
        lstm_s8_block(&k, a, 2, a->w_in + row * n_in, a->w_rec + row * n_cell, a->bias_in + row,
                      a->bias_rec + row, a->c + u, a->scratch + u);
    }
    if (u < end) {
        const size_t row = 4 * (size_t)u;
        lstm_s8_block(&k, a, 1, a->w_in + row * n_in, a->w_rec + row * n_cell, a->bias_in + row,
                      a->bias_rec + row, a->c + u, a->scratch + u);
    }
}

static void lstm_s8_steps(const edgernn_lstm_s8_params_t *p, const int8_t *w_in, const int8_t *w_rec,
                          const int32_t *bias_in, const int32_t *bias_rec, int steps, const int8_t *x, int8_t *h,
                          int16_t *c, int8_t *y, int16_t *scratch, int team)
{
    const int n_cell = (int)p->n_cell;
    lstm_s8_args_t a;
    int t, j;
    a.p = p;
    a.w_in = w_in;
    a.w_rec = w_rec;
    a.bias_in = bias_in;
    a.bias_rec = bias_rec;
    a.h = h;
    a.c = c;
    a.scratch = scratch;
    for (t = 0; t < steps; ++t) {
        a.xt = x + (size_t)t * (size_t)p->n_input;
        if (team) {
            edgernn_team_split(lstm_s8_units, &a, n_cell, LSTM_GRAIN);
        } else {
            lstm_s8_units(&a, 0, n_cell);
        }
        /* h is read by every gate of this step, so it changes only now */
        for (j = 0; j < n_cell; ++j) {
            h[j] = (int8_t)scratch[j];
            y[(size_t)t * (size_t)n_cell + (size_t)j] = h[j];
        }
    }
}

void edgernn_lstm_s8(const edgernn_lstm_s8_params_t *p, const int8_t *w_in, const int8_t *w_rec,
                     const int32_t *bias_in, const int32_t *bias_rec, int steps, const int8_t *x,
                     int8_t *h, int16_t *c, int8_t *y, int16_t *scratch)
{
    lstm_s8_steps(p, w_in, w_rec, bias_in, bias_rec, steps, x, h, c, y, scratch, 0);
}

void edgernn_team_lstm_s8(const edgernn_lstm_s8_params_t *p, const int8_t *w_in, const int8_t *w_rec,
                          const int32_t *bias_in, const int32_t *bias_rec, int steps, const int8_t *x, int8_t *h,
                          int16_t *c, int8_t *y, int16_t *scratch)
{
    lstm_s8_steps(p, w_in, w_rec, bias_in, bias_rec, steps, x, h, c, y, scratch, 1);
}

/* ---- float32 ---- */

static float sigmoidf_ref(float v)
{
    return 1.0f / (1.0f + expf(-v));
}

typedef struct {
    const edgernn_lstm_f32_params_t *p;
    const float *w_in, *w_rec, *bias;
    const float *xt, *h;
    float *c, *scratch;
} lstm_f32_args_t;

/* The float32 step for the units [begin, end), as lstm_s8_units. */
static void lstm_f32_units(const void *args, int begin, int end)
{
    const lstm_f32_args_t *a = (const lstm_f32_args_t *)args;
    const edgernn_lstm_f32_params_t *p = a->p;
    float *c = a->c;
    float *scratch = a->scratch;
    const int n_in = (int)p->n_input;
    const int n_cell = (int)p->n_cell;
    int g, j;
    for (g = 0; g < 4; ++g) {
        const int first = g * n_cell;
        int r;
        for (r = first + begin; r < first + end; ++r) {
            const float *wi = a->w_in + (size_t)r * (size_t)n_in;
            const float *wr = a->w_rec + (size_t)r * (size_t)n_cell;
            float acc_in = 0.0f;
            float acc_rec = 0.0f;
            int k;
            for (k = 0; k < n_in; ++k) {
                acc_in += wi[k] * a->xt[k];
            }
            for (k = 0; k < n_cell; ++k) {
                acc_rec += wr[k] * a->h[k];
            }
            scratch[r] = (a->bias[r] + acc_in) + acc_rec;
        }
    }
    for (j = begin; j < end; ++j) {
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
}

static void lstm_f32_steps(const edgernn_lstm_f32_params_t *p, const float *w_in, const float *w_rec,
                           const float *bias, int steps, const float *x, float *h, float *c, float *y, float *scratch,
                           int team)
{
    const int n_cell = (int)p->n_cell;
    lstm_f32_args_t a;
    int t, j;
    a.p = p;
    a.w_in = w_in;
    a.w_rec = w_rec;
    a.bias = bias;
    a.h = h;
    a.c = c;
    a.scratch = scratch;
    for (t = 0; t < steps; ++t) {
        a.xt = x + (size_t)t * (size_t)p->n_input;
        if (team) {
            edgernn_team_split(lstm_f32_units, &a, n_cell, LSTM_GRAIN);
        } else {
            lstm_f32_units(&a, 0, n_cell);
        }
        for (j = 0; j < n_cell; ++j) {
            h[j] = scratch[j];
            y[(size_t)t * (size_t)n_cell + (size_t)j] = scratch[j];
        }
    }
}

void edgernn_lstm_f32(const edgernn_lstm_f32_params_t *p, const float *w_in, const float *w_rec,
                      const float *bias, int steps, const float *x, float *h, float *c, float *y,
                      float *scratch)
{
    lstm_f32_steps(p, w_in, w_rec, bias, steps, x, h, c, y, scratch, 0);
}

void edgernn_team_lstm_f32(const edgernn_lstm_f32_params_t *p, const float *w_in, const float *w_rec,
                           const float *bias, int steps, const float *x, float *h, float *c, float *y,
                           float *scratch)
{
    lstm_f32_steps(p, w_in, w_rec, bias, steps, x, h, c, y, scratch, 1);
}
