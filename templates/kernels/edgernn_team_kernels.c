/* Team kernels: each packs its arguments, and every worker calls the unchanged kernel on its own
 * sub-range of the output, with offset pointers and a smaller count (see edgernn_team.h). */
#include "edgernn_team.h"

/* FULLY_CONNECTED splits its output features when there is one row (the step models' case), else its
 * rows. Feature sub-ranges start at multiples of 4, the row block of the int8 kernel. */
#define FC_GRAIN 4

typedef struct {
    const float *in, *w, *bias;
    float act_min, act_max;
    int rows, n_in, n_out;
    float *out;
} fc_f32_args_t;

static void fc_f32_range(const void *args, int begin, int end)
{
    const fc_f32_args_t *a = (const fc_f32_args_t *)args;
    if (a->rows == 1) {
        edgernn_fully_connected_f32(a->in, a->w + (size_t)begin * a->n_in, a->bias ? a->bias + begin : NULL,
                                    a->act_min, a->act_max, 1, a->n_in, end - begin, a->out + begin);
    } else {
        edgernn_fully_connected_f32(a->in + (size_t)begin * a->n_in, a->w, a->bias, a->act_min, a->act_max,
                                    end - begin, a->n_in, a->n_out, a->out + (size_t)begin * a->n_out);
    }
}

void edgernn_team_fully_connected_f32(const float *in, const float *w, const float *bias, float act_min,
                                      float act_max, int rows, int n_in, int n_out, float *out)
{
    fc_f32_args_t a;
    a.in = in;
    a.w = w;
    a.bias = bias;
    a.act_min = act_min;
    a.act_max = act_max;
    a.rows = rows;
    a.n_in = n_in;
    a.n_out = n_out;
    a.out = out;
    edgernn_team_split(fc_f32_range, &a, rows == 1 ? n_out : rows, rows == 1 ? FC_GRAIN : 1);
}

typedef struct {
    const void *in;
    const int8_t *w;
    const void *bias;
    const int32_t *multiplier, *shift;
    int rounding;                /* int8 only */
    int32_t output_offset, act_min, act_max;
    int rows, n_in, n_out;
    void *out;
} fc_int_args_t;

static void fc_s8_range(const void *args, int begin, int end)
{
    const fc_int_args_t *a = (const fc_int_args_t *)args;
    const int8_t *in = (const int8_t *)a->in;
    const int32_t *bias = (const int32_t *)a->bias;
    int8_t *out = (int8_t *)a->out;
    if (a->rows == 1) {
        edgernn_fully_connected_s8(in, a->w + (size_t)begin * a->n_in, bias + begin, a->multiplier + begin,
                                   a->shift + begin, a->rounding, a->output_offset, a->act_min, a->act_max, 1,
                                   a->n_in, end - begin, out + begin);
    } else {
        edgernn_fully_connected_s8(in + (size_t)begin * a->n_in, a->w, bias, a->multiplier, a->shift,
                                   a->rounding, a->output_offset, a->act_min, a->act_max, end - begin, a->n_in,
                                   a->n_out, out + (size_t)begin * a->n_out);
    }
}

static void fc_s16_range(const void *args, int begin, int end)
{
    const fc_int_args_t *a = (const fc_int_args_t *)args;
    const int16_t *in = (const int16_t *)a->in;
    const int64_t *bias = (const int64_t *)a->bias;
    int16_t *out = (int16_t *)a->out;
    if (a->rows == 1) {
        edgernn_fully_connected_s16(in, a->w + (size_t)begin * a->n_in, bias + begin, a->multiplier + begin,
                                    a->shift + begin, a->output_offset, a->act_min, a->act_max, 1, a->n_in,
                                    end - begin, out + begin);
    } else {
        edgernn_fully_connected_s16(in + (size_t)begin * a->n_in, a->w, bias, a->multiplier, a->shift,
                                    a->output_offset, a->act_min, a->act_max, end - begin, a->n_in, a->n_out,
                                    out + (size_t)begin * a->n_out);
    }
}

static void fc_int(edgernn_range_fn fn, const void *in, const int8_t *w, const void *bias,
                   const int32_t *multiplier, const int32_t *shift, int rounding, int32_t output_offset,
                   int32_t act_min, int32_t act_max, int rows, int n_in, int n_out, void *out)
{
    fc_int_args_t a;
    a.in = in;
    a.w = w;
    a.bias = bias;
    a.multiplier = multiplier;
    a.shift = shift;
    a.rounding = rounding;
    a.output_offset = output_offset;
    a.act_min = act_min;
    a.act_max = act_max;
    a.rows = rows;
    a.n_in = n_in;
    a.n_out = n_out;
    a.out = out;
    edgernn_team_split(fn, &a, rows == 1 ? n_out : rows, rows == 1 ? FC_GRAIN : 1);
}

void edgernn_team_fully_connected_s8(const int8_t *in, const int8_t *w, const int32_t *bias,
                                     const int32_t *multiplier, const int32_t *shift, int rounding,
                                     int32_t output_offset, int32_t act_min, int32_t act_max, int rows,
                                     int n_in, int n_out, int8_t *out)
{
    fc_int(fc_s8_range, in, w, bias, multiplier, shift, rounding, output_offset, act_min, act_max, rows, n_in,
           n_out, out);
}

void edgernn_team_fully_connected_s16(const int16_t *in, const int8_t *w, const int64_t *bias,
                                      const int32_t *multiplier, const int32_t *shift, int32_t output_offset,
                                      int32_t act_min, int32_t act_max, int rows, int n_in, int n_out,
                                      int16_t *out)
{
    fc_int(fc_s16_range, in, w, bias, multiplier, shift, EDGERNN_ROUND_ONCE, output_offset, act_min, act_max, rows,
           n_in, n_out, out);
}

/* ---- binary element-wise, one-dimensional broadcast: a sub-range is a shorter walk along dims[3] ---- */

static edgernn_bcast_t sub_bcast(const edgernn_bcast_t *b, int begin, int end)
{
    edgernn_bcast_t s = *b;
    s.dims[3] = end - begin;
    return s;
}

typedef void (*binary_f32_fn)(const edgernn_bcast_t *, const float *, const float *, float, float, float *);

typedef struct {
    binary_f32_fn kernel;
    const edgernn_bcast_t *b;
    const float *in1, *in2;
    float act_min, act_max;
    float *out;
} binary_f32_args_t;

static void binary_f32_range(const void *args, int begin, int end)
{
    const binary_f32_args_t *a = (const binary_f32_args_t *)args;
    const edgernn_bcast_t s = sub_bcast(a->b, begin, end);
    a->kernel(&s, a->in1 + (size_t)begin * a->b->stride1[3], a->in2 + (size_t)begin * a->b->stride2[3],
              a->act_min, a->act_max, a->out + begin);
}

static void binary_f32(binary_f32_fn kernel, const edgernn_bcast_t *b, const float *in1, const float *in2,
                       float act_min, float act_max, float *out)
{
    binary_f32_args_t a;
    a.kernel = kernel;
    a.b = b;
    a.in1 = in1;
    a.in2 = in2;
    a.act_min = act_min;
    a.act_max = act_max;
    a.out = out;
    edgernn_team_split(binary_f32_range, &a, b->dims[3], 1);
}

void edgernn_team_add_f32(const edgernn_bcast_t *b, const float *in1, const float *in2, float act_min,
                          float act_max, float *out)
{
    binary_f32(edgernn_add_f32, b, in1, in2, act_min, act_max, out);
}

void edgernn_team_sub_f32(const edgernn_bcast_t *b, const float *in1, const float *in2, float act_min,
                          float act_max, float *out)
{
    binary_f32(edgernn_sub_f32, b, in1, in2, act_min, act_max, out);
}

void edgernn_team_mul_f32(const edgernn_bcast_t *b, const float *in1, const float *in2, float act_min,
                          float act_max, float *out)
{
    binary_f32(edgernn_mul_f32, b, in1, in2, act_min, act_max, out);
}

typedef struct {
    const edgernn_bcast_t *b;
    const void *params;
    int subtract;
    const void *in1, *in2;
    void *out;
} binary_int_args_t;

static void addsub_s8_range(const void *args, int begin, int end)
{
    const binary_int_args_t *a = (const binary_int_args_t *)args;
    const edgernn_bcast_t s = sub_bcast(a->b, begin, end);
    edgernn_addsub_s8(&s, (const edgernn_addsub_params_t *)a->params, a->subtract,
                      (const int8_t *)a->in1 + (size_t)begin * a->b->stride1[3],
                      (const int8_t *)a->in2 + (size_t)begin * a->b->stride2[3], (int8_t *)a->out + begin);
}

static void addsub_s16_range(const void *args, int begin, int end)
{
    const binary_int_args_t *a = (const binary_int_args_t *)args;
    const edgernn_bcast_t s = sub_bcast(a->b, begin, end);
    edgernn_addsub_s16(&s, (const edgernn_addsub_params_t *)a->params, a->subtract,
                       (const int16_t *)a->in1 + (size_t)begin * a->b->stride1[3],
                       (const int16_t *)a->in2 + (size_t)begin * a->b->stride2[3], (int16_t *)a->out + begin);
}

static void mul_s8_range(const void *args, int begin, int end)
{
    const binary_int_args_t *a = (const binary_int_args_t *)args;
    const edgernn_bcast_t s = sub_bcast(a->b, begin, end);
    edgernn_mul_s8(&s, (const edgernn_mul_params_t *)a->params,
                   (const int8_t *)a->in1 + (size_t)begin * a->b->stride1[3],
                   (const int8_t *)a->in2 + (size_t)begin * a->b->stride2[3], (int8_t *)a->out + begin);
}

static void mul_s16_range(const void *args, int begin, int end)
{
    const binary_int_args_t *a = (const binary_int_args_t *)args;
    const edgernn_bcast_t s = sub_bcast(a->b, begin, end);
    edgernn_mul_s16(&s, (const edgernn_mul_params_t *)a->params,
                    (const int16_t *)a->in1 + (size_t)begin * a->b->stride1[3],
                    (const int16_t *)a->in2 + (size_t)begin * a->b->stride2[3], (int16_t *)a->out + begin);
}

static void binary_int(edgernn_range_fn fn, const edgernn_bcast_t *b, const void *params, int subtract,
                       const void *in1, const void *in2, void *out)
{
    binary_int_args_t a;
    a.b = b;
    a.params = params;
    a.subtract = subtract;
    a.in1 = in1;
    a.in2 = in2;
    a.out = out;
    edgernn_team_split(fn, &a, b->dims[3], 1);
}

void edgernn_team_addsub_s8(const edgernn_bcast_t *b, const edgernn_addsub_params_t *p, int subtract,
                            const int8_t *in1, const int8_t *in2, int8_t *out)
{
    binary_int(addsub_s8_range, b, p, subtract, in1, in2, out);
}

void edgernn_team_addsub_s16(const edgernn_bcast_t *b, const edgernn_addsub_params_t *p, int subtract,
                             const int16_t *in1, const int16_t *in2, int16_t *out)
{
    binary_int(addsub_s16_range, b, p, subtract, in1, in2, out);
}

void edgernn_team_mul_s8(const edgernn_bcast_t *b, const edgernn_mul_params_t *p, const int8_t *in1,
                         const int8_t *in2, int8_t *out)
{
    binary_int(mul_s8_range, b, p, 0, in1, in2, out);
}

void edgernn_team_mul_s16(const edgernn_bcast_t *b, const edgernn_mul_params_t *p, const int16_t *in1,
                          const int16_t *in2, int16_t *out)
{
    binary_int(mul_s16_range, b, p, 0, in1, in2, out);
}

/* ---- binary element-wise without broadcasting, over n elements ---- */

typedef struct {
    const void *params;
    int flag;                 /* subtract, or negate for a constant operand */
    const void *in1, *in2;    /* in2 is the int32 constant of the _const kernels */
    void *out;
} flat_args_t;

static void addsub_n_s8_range(const void *args, int begin, int end)
{
    const flat_args_t *a = (const flat_args_t *)args;
    edgernn_addsub_n_s8((const edgernn_addsub_params_t *)a->params, a->flag, (const int8_t *)a->in1 + begin,
                        (const int8_t *)a->in2 + begin, end - begin, (int8_t *)a->out + begin);
}

static void addsub_n_s16_range(const void *args, int begin, int end)
{
    const flat_args_t *a = (const flat_args_t *)args;
    edgernn_addsub_n_s16((const edgernn_addsub_params_t *)a->params, a->flag, (const int16_t *)a->in1 + begin,
                         (const int16_t *)a->in2 + begin, end - begin, (int16_t *)a->out + begin);
}

static void addsub_const_s8_range(const void *args, int begin, int end)
{
    const flat_args_t *a = (const flat_args_t *)args;
    edgernn_addsub_const_s8((const edgernn_addsub_params_t *)a->params, a->flag, (const int8_t *)a->in1 + begin,
                            (const int32_t *)a->in2 + begin, end - begin, (int8_t *)a->out + begin);
}

static void addsub_const_s16_range(const void *args, int begin, int end)
{
    const flat_args_t *a = (const flat_args_t *)args;
    edgernn_addsub_const_s16((const edgernn_addsub_params_t *)a->params, a->flag,
                             (const int16_t *)a->in1 + begin, (const int32_t *)a->in2 + begin, end - begin,
                             (int16_t *)a->out + begin);
}

static void mul_n_s8_range(const void *args, int begin, int end)
{
    const flat_args_t *a = (const flat_args_t *)args;
    edgernn_mul_n_s8((const edgernn_mul_params_t *)a->params, (const int8_t *)a->in1 + begin,
                     (const int8_t *)a->in2 + begin, end - begin, (int8_t *)a->out + begin);
}

static void mul_n_s16_range(const void *args, int begin, int end)
{
    const flat_args_t *a = (const flat_args_t *)args;
    edgernn_mul_n_s16((const edgernn_mul_params_t *)a->params, (const int16_t *)a->in1 + begin,
                      (const int16_t *)a->in2 + begin, end - begin, (int16_t *)a->out + begin);
}

static void flat(edgernn_range_fn fn, const void *params, int flag, const void *in1, const void *in2, int n,
                 void *out)
{
    flat_args_t a;
    a.params = params;
    a.flag = flag;
    a.in1 = in1;
    a.in2 = in2;
    a.out = out;
    edgernn_team_split(fn, &a, n, 1);
}

void edgernn_team_addsub_n_s8(const edgernn_addsub_params_t *p, int subtract, const int8_t *in1,
                              const int8_t *in2, int n, int8_t *out)
{
    flat(addsub_n_s8_range, p, subtract, in1, in2, n, out);
}

void edgernn_team_addsub_n_s16(const edgernn_addsub_params_t *p, int subtract, const int16_t *in1,
                               const int16_t *in2, int n, int16_t *out)
{
    flat(addsub_n_s16_range, p, subtract, in1, in2, n, out);
}

void edgernn_team_addsub_const_s8(const edgernn_addsub_params_t *p, int negate, const int8_t *in,
                                  const int32_t *k, int n, int8_t *out)
{
    flat(addsub_const_s8_range, p, negate, in, k, n, out);
}

void edgernn_team_addsub_const_s16(const edgernn_addsub_params_t *p, int negate, const int16_t *in,
                                   const int32_t *k, int n, int16_t *out)
{
    flat(addsub_const_s16_range, p, negate, in, k, n, out);
}

void edgernn_team_mul_n_s8(const edgernn_mul_params_t *p, const int8_t *in1, const int8_t *in2, int n,
                           int8_t *out)
{
    flat(mul_n_s8_range, p, 0, in1, in2, n, out);
}

void edgernn_team_mul_n_s16(const edgernn_mul_params_t *p, const int16_t *in1, const int16_t *in2, int n,
                            int16_t *out)
{
    flat(mul_n_s16_range, p, 0, in1, in2, n, out);
}

/* ---- unary element-wise over n elements ---- */

typedef struct {
    edgernn_unary_t op;
    const float *in;
    float *out;
} unary_f32_args_t;

static void unary_f32_range(const void *args, int begin, int end)
{
    const unary_f32_args_t *a = (const unary_f32_args_t *)args;
    edgernn_unary_f32(a->op, a->in + begin, end - begin, a->out + begin);
}

void edgernn_team_unary_f32(edgernn_unary_t op, const float *in, int n, float *out)
{
    unary_f32_args_t a;
    a.op = op;
    a.in = in;
    a.out = out;
    edgernn_team_split(unary_f32_range, &a, n, 1);
}

typedef struct {
    const int8_t *table;
    const int8_t *in;
    int8_t *out;
} lut_s8_args_t;

static void lut_s8_range(const void *args, int begin, int end)
{
    const lut_s8_args_t *a = (const lut_s8_args_t *)args;
    edgernn_lut_s8(a->table, a->in + begin, end - begin, a->out + begin);
}

void edgernn_team_lut_s8(const int8_t *table, const int8_t *in, int n, int8_t *out)
{
    lut_s8_args_t a;
    a.table = table;
    a.in = in;
    a.out = out;
    edgernn_team_split(lut_s8_range, &a, n, 1);
}

typedef void (*activation_s16_fn)(int32_t, int32_t, const int16_t *, int, int16_t *);

typedef struct {
    activation_s16_fn kernel;
    int32_t input_multiplier, input_left_shift;
    const int16_t *in;
    int16_t *out;
} activation_s16_args_t;

static void activation_s16_range(const void *args, int begin, int end)
{
    const activation_s16_args_t *a = (const activation_s16_args_t *)args;
    a->kernel(a->input_multiplier, a->input_left_shift, a->in + begin, end - begin, a->out + begin);
}

static void activation_s16(activation_s16_fn kernel, int32_t input_multiplier, int32_t input_left_shift,
                           const int16_t *in, int n, int16_t *out)
{
    activation_s16_args_t a;
    a.kernel = kernel;
    a.input_multiplier = input_multiplier;
    a.input_left_shift = input_left_shift;
    a.in = in;
    a.out = out;
    edgernn_team_split(activation_s16_range, &a, n, 1);
}

void edgernn_team_logistic_s16(int32_t input_multiplier, int32_t input_left_shift, const int16_t *in, int n,
                               int16_t *out)
{
    activation_s16(edgernn_logistic_s16, input_multiplier, input_left_shift, in, n, out);
}

void edgernn_team_tanh_s16(int32_t input_multiplier, int32_t input_left_shift, const int16_t *in, int n,
                           int16_t *out)
{
    activation_s16(edgernn_tanh_s16, input_multiplier, input_left_shift, in, n, out);
}
