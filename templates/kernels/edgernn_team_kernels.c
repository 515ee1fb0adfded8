/* Team kernels: each packs its arguments, and every worker calls the unchanged kernel on its own
 * sub-range of the output, with offset pointers and a smaller count (see edgernn_team.h).
 *
 * Generated from edgernn/backend/kernels.py (kernels.write_sources()): each kernel's
 * splits there say which argument is the range's length and which pointers advance with it. */
#include "edgernn_team.h"

/* FULLY_CONNECTED splits its output features when there is one row (the step models' case),
 * else its rows; feature sub-ranges start at multiples of 4, the row block of the int8 kernel. */
typedef struct {
    const float *in;
    const float *w;
    const float *bias;
    float act_min;
    float act_max;
    int rows;
    int n_in;
    int n_out;
    float *out;
} fully_connected_f32_args_t;

static void fully_connected_f32_range(const void *args, int begin, int end)
{
    const fully_connected_f32_args_t *a = (const fully_connected_f32_args_t *)args;
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
    fully_connected_f32_args_t a;
    a.in = in;
    a.w = w;
    a.bias = bias;
    a.act_min = act_min;
    a.act_max = act_max;
    a.rows = rows;
    a.n_in = n_in;
    a.n_out = n_out;
    a.out = out;
    edgernn_team_split(fully_connected_f32_range, &a, rows == 1 ? n_out : rows, rows == 1 ? 4 : 1);
}

typedef struct {
    const int8_t *in;
    const int8_t *w;
    const int32_t *bias;
    const int32_t *multiplier;
    const int32_t *shift;
    int rounding;
    int32_t output_offset;
    int32_t act_min;
    int32_t act_max;
    int rows;
    int n_in;
    int n_out;
    int8_t *out;
} fully_connected_s8_args_t;

static void fully_connected_s8_range(const void *args, int begin, int end)
{
    const fully_connected_s8_args_t *a = (const fully_connected_s8_args_t *)args;
    if (a->rows == 1) {
        edgernn_fully_connected_s8(a->in, a->w + (size_t)begin * a->n_in, a->bias + begin,
                                   a->multiplier + begin, a->shift + begin, a->rounding, a->output_offset,
                                   a->act_min, a->act_max, 1, a->n_in, end - begin, a->out + begin);
    } else {
        edgernn_fully_connected_s8(a->in + (size_t)begin * a->n_in, a->w, a->bias, a->multiplier, a->shift,
                                   a->rounding, a->output_offset, a->act_min, a->act_max, end - begin,
                                   a->n_in, a->n_out, a->out + (size_t)begin * a->n_out);
    }
}

void edgernn_team_fully_connected_s8(const int8_t *in, const int8_t *w, const int32_t *bias,
                                     const int32_t *multiplier, const int32_t *shift, int rounding,
                                     int32_t output_offset, int32_t act_min, int32_t act_max, int rows,
                                     int n_in, int n_out, int8_t *out)
{
    fully_connected_s8_args_t a;
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
    edgernn_team_split(fully_connected_s8_range, &a, rows == 1 ? n_out : rows, rows == 1 ? 4 : 1);
}

typedef struct {
    const int16_t *in;
    const int8_t *w;
    const int64_t *bias;
    const int32_t *multiplier;
    const int32_t *shift;
    int32_t output_offset;
    int32_t act_min;
    int32_t act_max;
    int rows;
    int n_in;
    int n_out;
    int16_t *out;
} fully_connected_s16_args_t;

static void fully_connected_s16_range(const void *args, int begin, int end)
{
    const fully_connected_s16_args_t *a = (const fully_connected_s16_args_t *)args;
    if (a->rows == 1) {
        edgernn_fully_connected_s16(a->in, a->w + (size_t)begin * a->n_in, a->bias + begin,
                                    a->multiplier + begin, a->shift + begin, a->output_offset, a->act_min,
                                    a->act_max, 1, a->n_in, end - begin, a->out + begin);
    } else {
        edgernn_fully_connected_s16(a->in + (size_t)begin * a->n_in, a->w, a->bias, a->multiplier, a->shift,
                                    a->output_offset, a->act_min, a->act_max, end - begin, a->n_in, a->n_out,
                                    a->out + (size_t)begin * a->n_out);
    }
}

void edgernn_team_fully_connected_s16(const int16_t *in, const int8_t *w, const int64_t *bias,
                                      const int32_t *multiplier, const int32_t *shift, int32_t output_offset,
                                      int32_t act_min, int32_t act_max, int rows, int n_in, int n_out,
                                      int16_t *out)
{
    fully_connected_s16_args_t a;
    a.in = in;
    a.w = w;
    a.bias = bias;
    a.multiplier = multiplier;
    a.shift = shift;
    a.output_offset = output_offset;
    a.act_min = act_min;
    a.act_max = act_max;
    a.rows = rows;
    a.n_in = n_in;
    a.n_out = n_out;
    a.out = out;
    edgernn_team_split(fully_connected_s16_range, &a, rows == 1 ? n_out : rows, rows == 1 ? 4 : 1);
}

/* Binary element-wise ops whose broadcast is one-dimensional (dims[0..2] == 1); the schedule only
 * uses them there. */
typedef struct {
    const edgernn_bcast_t *b;
    const float *in1;
    const float *in2;
    float act_min;
    float act_max;
    float *out;
} add_f32_args_t;

static void add_f32_range(const void *args, int begin, int end)
{
    const add_f32_args_t *a = (const add_f32_args_t *)args;
    edgernn_bcast_t sub = *a->b;
    sub.dims[3] = end - begin;
    edgernn_add_f32(&sub, a->in1 + (size_t)begin * a->b->stride1[3],
                    a->in2 + (size_t)begin * a->b->stride2[3], a->act_min, a->act_max, a->out + begin);
}

void edgernn_team_add_f32(const edgernn_bcast_t *b, const float *in1, const float *in2, float act_min,
                          float act_max, float *out)
{
    add_f32_args_t a;
    a.b = b;
    a.in1 = in1;
    a.in2 = in2;
    a.act_min = act_min;
    a.act_max = act_max;
    a.out = out;
    edgernn_team_split(add_f32_range, &a, b->dims[3], 1);
}

typedef struct {
    const edgernn_bcast_t *b;
    const float *in1;
    const float *in2;
    float act_min;
    float act_max;
    float *out;
} sub_f32_args_t;

static void sub_f32_range(const void *args, int begin, int end)
{
    const sub_f32_args_t *a = (const sub_f32_args_t *)args;
    edgernn_bcast_t sub = *a->b;
    sub.dims[3] = end - begin;
    edgernn_sub_f32(&sub, a->in1 + (size_t)begin * a->b->stride1[3],
                    a->in2 + (size_t)begin * a->b->stride2[3], a->act_min, a->act_max, a->out + begin);
}

void edgernn_team_sub_f32(const edgernn_bcast_t *b, const float *in1, const float *in2, float act_min,
                          float act_max, float *out)
{
    sub_f32_args_t a;
    a.b = b;
    a.in1 = in1;
    a.in2 = in2;
    a.act_min = act_min;
    a.act_max = act_max;
    a.out = out;
    edgernn_team_split(sub_f32_range, &a, b->dims[3], 1);
}

typedef struct {
    const edgernn_bcast_t *b;
    const float *in1;
    const float *in2;
    float act_min;
    float act_max;
    float *out;
} mul_f32_args_t;

static void mul_f32_range(const void *args, int begin, int end)
{
    const mul_f32_args_t *a = (const mul_f32_args_t *)args;
    edgernn_bcast_t sub = *a->b;
    sub.dims[3] = end - begin;
    edgernn_mul_f32(&sub, a->in1 + (size_t)begin * a->b->stride1[3],
                    a->in2 + (size_t)begin * a->b->stride2[3], a->act_min, a->act_max, a->out + begin);
}

void edgernn_team_mul_f32(const edgernn_bcast_t *b, const float *in1, const float *in2, float act_min,
                          float act_max, float *out)
{
    mul_f32_args_t a;
    a.b = b;
    a.in1 = in1;
    a.in2 = in2;
    a.act_min = act_min;
    a.act_max = act_max;
    a.out = out;
    edgernn_team_split(mul_f32_range, &a, b->dims[3], 1);
}

typedef struct {
    const edgernn_bcast_t *b;
    const edgernn_addsub_params_t *p;
    int subtract;
    const int8_t *in1;
    const int8_t *in2;
    int8_t *out;
} addsub_s8_args_t;

static void addsub_s8_range(const void *args, int begin, int end)
{
    const addsub_s8_args_t *a = (const addsub_s8_args_t *)args;
    edgernn_bcast_t sub = *a->b;
    sub.dims[3] = end - begin;
    edgernn_addsub_s8(&sub, a->p, a->subtract, a->in1 + (size_t)begin * a->b->stride1[3],
                      a->in2 + (size_t)begin * a->b->stride2[3], a->out + begin);
}

void edgernn_team_addsub_s8(const edgernn_bcast_t *b, const edgernn_addsub_params_t *p, int subtract,
                            const int8_t *in1, const int8_t *in2, int8_t *out)
{
    addsub_s8_args_t a;
    a.b = b;
    a.p = p;
    a.subtract = subtract;
    a.in1 = in1;
    a.in2 = in2;
    a.out = out;
    edgernn_team_split(addsub_s8_range, &a, b->dims[3], 1);
}

typedef struct {
    const edgernn_bcast_t *b;
    const edgernn_addsub_params_t *p;
    int subtract;
    const int16_t *in1;
    const int16_t *in2;
    int16_t *out;
} addsub_s16_args_t;

static void addsub_s16_range(const void *args, int begin, int end)
{
    const addsub_s16_args_t *a = (const addsub_s16_args_t *)args;
    edgernn_bcast_t sub = *a->b;
    sub.dims[3] = end - begin;
    edgernn_addsub_s16(&sub, a->p, a->subtract, a->in1 + (size_t)begin * a->b->stride1[3],
                       a->in2 + (size_t)begin * a->b->stride2[3], a->out + begin);
}

void edgernn_team_addsub_s16(const edgernn_bcast_t *b, const edgernn_addsub_params_t *p, int subtract,
                             const int16_t *in1, const int16_t *in2, int16_t *out)
{
    addsub_s16_args_t a;
    a.b = b;
    a.p = p;
    a.subtract = subtract;
    a.in1 = in1;
    a.in2 = in2;
    a.out = out;
    edgernn_team_split(addsub_s16_range, &a, b->dims[3], 1);
}

typedef struct {
    const edgernn_bcast_t *b;
    const edgernn_mul_params_t *p;
    const int8_t *in1;
    const int8_t *in2;
    int8_t *out;
} mul_s8_args_t;

static void mul_s8_range(const void *args, int begin, int end)
{
    const mul_s8_args_t *a = (const mul_s8_args_t *)args;
    edgernn_bcast_t sub = *a->b;
    sub.dims[3] = end - begin;
    edgernn_mul_s8(&sub, a->p, a->in1 + (size_t)begin * a->b->stride1[3],
                   a->in2 + (size_t)begin * a->b->stride2[3], a->out + begin);
}

void edgernn_team_mul_s8(const edgernn_bcast_t *b, const edgernn_mul_params_t *p, const int8_t *in1,
                         const int8_t *in2, int8_t *out)
{
    mul_s8_args_t a;
    a.b = b;
    a.p = p;
    a.in1 = in1;
    a.in2 = in2;
    a.out = out;
    edgernn_team_split(mul_s8_range, &a, b->dims[3], 1);
}

typedef struct {
    const edgernn_bcast_t *b;
    const edgernn_mul_params_t *p;
    const int16_t *in1;
    const int16_t *in2;
    int16_t *out;
} mul_s16_args_t;

static void mul_s16_range(const void *args, int begin, int end)
{
    const mul_s16_args_t *a = (const mul_s16_args_t *)args;
    edgernn_bcast_t sub = *a->b;
    sub.dims[3] = end - begin;
    edgernn_mul_s16(&sub, a->p, a->in1 + (size_t)begin * a->b->stride1[3],
                    a->in2 + (size_t)begin * a->b->stride2[3], a->out + begin);
}

void edgernn_team_mul_s16(const edgernn_bcast_t *b, const edgernn_mul_params_t *p, const int16_t *in1,
                          const int16_t *in2, int16_t *out)
{
    mul_s16_args_t a;
    a.b = b;
    a.p = p;
    a.in1 = in1;
    a.in2 = in2;
    a.out = out;
    edgernn_team_split(mul_s16_range, &a, b->dims[3], 1);
}

/* The same without broadcasting, over n elements. */
typedef struct {
    const edgernn_addsub_params_t *p;
    int subtract;
    const int8_t *in1;
    const int8_t *in2;
    int n;
    int8_t *out;
} addsub_n_s8_args_t;

static void addsub_n_s8_range(const void *args, int begin, int end)
{
    const addsub_n_s8_args_t *a = (const addsub_n_s8_args_t *)args;
    edgernn_addsub_n_s8(a->p, a->subtract, a->in1 + begin, a->in2 + begin, end - begin, a->out + begin);
}

void edgernn_team_addsub_n_s8(const edgernn_addsub_params_t *p, int subtract, const int8_t *in1,
                              const int8_t *in2, int n, int8_t *out)
{
    addsub_n_s8_args_t a;
    a.p = p;
    a.subtract = subtract;
    a.in1 = in1;
    a.in2 = in2;
    a.n = n;
    a.out = out;
    edgernn_team_split(addsub_n_s8_range, &a, n, 1);
}

typedef struct {
    const edgernn_addsub_params_t *p;
    int subtract;
    const int16_t *in1;
    const int16_t *in2;
    int n;
    int16_t *out;
} addsub_n_s16_args_t;

static void addsub_n_s16_range(const void *args, int begin, int end)
{
    const addsub_n_s16_args_t *a = (const addsub_n_s16_args_t *)args;
    edgernn_addsub_n_s16(a->p, a->subtract, a->in1 + begin, a->in2 + begin, end - begin, a->out + begin);
}

void edgernn_team_addsub_n_s16(const edgernn_addsub_params_t *p, int subtract, const int16_t *in1,
                               const int16_t *in2, int n, int16_t *out)
{
    addsub_n_s16_args_t a;
    a.p = p;
    a.subtract = subtract;
    a.in1 = in1;
    a.in2 = in2;
    a.n = n;
    a.out = out;
    edgernn_team_split(addsub_n_s16_range, &a, n, 1);
}

typedef struct {
    const edgernn_addsub_params_t *p;
    int negate;
    const int8_t *in;
    const int32_t *k;
    int n;
    int8_t *out;
} addsub_const_s8_args_t;

static void addsub_const_s8_range(const void *args, int begin, int end)
{
    const addsub_const_s8_args_t *a = (const addsub_const_s8_args_t *)args;
    edgernn_addsub_const_s8(a->p, a->negate, a->in + begin, a->k + begin, end - begin, a->out + begin);
}

void edgernn_team_addsub_const_s8(const edgernn_addsub_params_t *p, int negate, const int8_t *in,
                                  const int32_t *k, int n, int8_t *out)
{
    addsub_const_s8_args_t a;
    a.p = p;
    a.negate = negate;
    a.in = in;
    a.k = k;
    a.n = n;
    a.out = out;
    edgernn_team_split(addsub_const_s8_range, &a, n, 1);
}

typedef struct {
    const edgernn_addsub_params_t *p;
    int negate;
    const int16_t *in;
    const int32_t *k;
    int n;
    int16_t *out;
} addsub_const_s16_args_t;

static void addsub_const_s16_range(const void *args, int begin, int end)
{
    const addsub_const_s16_args_t *a = (const addsub_const_s16_args_t *)args;
    edgernn_addsub_const_s16(a->p, a->negate, a->in + begin, a->k + begin, end - begin, a->out + begin);
}

void edgernn_team_addsub_const_s16(const edgernn_addsub_params_t *p, int negate, const int16_t *in,
                                   const int32_t *k, int n, int16_t *out)
{
    addsub_const_s16_args_t a;
    a.p = p;
    a.negate = negate;
    a.in = in;
    a.k = k;
    a.n = n;
    a.out = out;
    edgernn_team_split(addsub_const_s16_range, &a, n, 1);
}

typedef struct {
    const edgernn_mul_params_t *p;
    const int8_t *in1;
    const int8_t *in2;
    int n;
    int8_t *out;
} mul_n_s8_args_t;

static void mul_n_s8_range(const void *args, int begin, int end)
{
    const mul_n_s8_args_t *a = (const mul_n_s8_args_t *)args;
    edgernn_mul_n_s8(a->p, a->in1 + begin, a->in2 + begin, end - begin, a->out + begin);
}

void edgernn_team_mul_n_s8(const edgernn_mul_params_t *p, const int8_t *in1, const int8_t *in2, int n,
                           int8_t *out)
{
    mul_n_s8_args_t a;
    a.p = p;
    a.in1 = in1;
    a.in2 = in2;
    a.n = n;
    a.out = out;
    edgernn_team_split(mul_n_s8_range, &a, n, 1);
}

typedef struct {
    const edgernn_mul_params_t *p;
    const int16_t *in1;
    const int16_t *in2;
    int n;
    int16_t *out;
} mul_n_s16_args_t;

static void mul_n_s16_range(const void *args, int begin, int end)
{
    const mul_n_s16_args_t *a = (const mul_n_s16_args_t *)args;
    edgernn_mul_n_s16(a->p, a->in1 + begin, a->in2 + begin, end - begin, a->out + begin);
}

void edgernn_team_mul_n_s16(const edgernn_mul_params_t *p, const int16_t *in1, const int16_t *in2, int n,
                            int16_t *out)
{
    mul_n_s16_args_t a;
    a.p = p;
    a.in1 = in1;
    a.in2 = in2;
    a.n = n;
    a.out = out;
    edgernn_team_split(mul_n_s16_range, &a, n, 1);
}

/* Unary element-wise ops over n elements. */
typedef struct {
    edgernn_unary_t op;
    const float *in;
    int n;
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
    a.n = n;
    a.out = out;
    edgernn_team_split(unary_f32_range, &a, n, 1);
}

typedef struct {
    const int8_t *table;
    const int8_t *in;
    int n;
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
    a.n = n;
    a.out = out;
    edgernn_team_split(lut_s8_range, &a, n, 1);
}

typedef struct {
    int32_t input_multiplier;
    int32_t input_left_shift;
    const int16_t *in;
    int n;
    int16_t *out;
} logistic_s16_args_t;

static void logistic_s16_range(const void *args, int begin, int end)
{
    const logistic_s16_args_t *a = (const logistic_s16_args_t *)args;
    edgernn_logistic_s16(a->input_multiplier, a->input_left_shift, a->in + begin, end - begin,
                         a->out + begin);
}

void edgernn_team_logistic_s16(int32_t input_multiplier, int32_t input_left_shift, const int16_t *in, int n,
                               int16_t *out)
{
    logistic_s16_args_t a;
    a.input_multiplier = input_multiplier;
    a.input_left_shift = input_left_shift;
    a.in = in;
    a.n = n;
    a.out = out;
    edgernn_team_split(logistic_s16_range, &a, n, 1);
}

typedef struct {
    int32_t input_multiplier;
    int32_t input_left_shift;
    const int16_t *in;
    int n;
    int16_t *out;
} tanh_s16_args_t;

static void tanh_s16_range(const void *args, int begin, int end)
{
    const tanh_s16_args_t *a = (const tanh_s16_args_t *)args;
    edgernn_tanh_s16(a->input_multiplier, a->input_left_shift, a->in + begin, end - begin, a->out + begin);
}

void edgernn_team_tanh_s16(int32_t input_multiplier, int32_t input_left_shift, const int16_t *in, int n,
                           int16_t *out)
{
    tanh_s16_args_t a;
    a.input_multiplier = input_multiplier;
    a.input_left_shift = input_left_shift;
    a.in = in;
    a.n = n;
    a.out = out;
    edgernn_team_split(tanh_s16_range, &a, n, 1);
}
