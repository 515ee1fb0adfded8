/* edgernn kernels: plain C99, caller-owned buffers, no malloc, no recursion.
 *
 * Integer kernels reproduce TFLite's reference integer kernels bit for bit. Every quantization
 * constant (multipliers, shifts, offsets, lookup tables, folded biases) is computed by edgernn in
 * Python from the model and passed in, so these kernels hold arithmetic only.
 *
 * Generated from edgernn/backend/kernels.py (kernels.write_sources()): edit the table, not
 * this file.
 */
#ifndef EDGERNN_KERNELS_H
#define EDGERNN_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Broadcasting of a binary element-wise op, collapsed to at most 4 dimensions. Strides are in
 * elements; a stride of 0 repeats the operand along that dimension. */
typedef struct {
    int32_t dims[4];
    int32_t stride1[4];
    int32_t stride2[4];
} edgernn_bcast_t;

/* ADD and SUB of TFLite's general 8/16-bit path. */
typedef struct {
    int32_t input1_offset, input2_offset, output_offset;
    int32_t left_shift;
    int32_t input1_multiplier, input1_shift;
    int32_t input2_multiplier, input2_shift;
    int32_t output_multiplier, output_shift;
    int32_t act_min, act_max;
} edgernn_addsub_params_t;

/* MUL, and the requantizing unary ops. */
typedef struct {
    int32_t input1_offset, input2_offset, output_offset;
    int32_t output_multiplier, output_shift;
    int32_t act_min, act_max;
} edgernn_mul_params_t;

/* A contiguous run of elements copied by the data-movement ops. */
typedef struct {
    int32_t dst, src, count;
} edgernn_run_t;

/* UNIDIRECTIONAL_SEQUENCE_LSTM, 8-bit (edgernn_lstm_s8). */
typedef struct {
    int32_t n_input, n_cell;
    int32_t in_multiplier[4], in_shift[4];   /* effective input-to-gate scales, per gate */
    int32_t rec_multiplier[4], rec_shift[4]; /* effective recurrent-to-gate scales, per gate */
    int32_t hidden_multiplier, hidden_shift, hidden_zero_point;
    int32_t cell_shift;                      /* 30 + log2(cell scale): input gate x cell gate */
    int32_t cell_tanh_integer_bits;          /* 15 + log2(cell scale) */
    int32_t cell_clip;                       /* quantized cell clip, 0 for none */
} edgernn_lstm_s8_params_t;

/* UNIDIRECTIONAL_SEQUENCE_LSTM, float (edgernn_lstm_f32). */
typedef struct {
    int32_t n_input, n_cell;
    float cell_clip;                        /* 0 for none */
} edgernn_lstm_f32_params_t;

/* 1 when this build's int8 dot products use SIMD instructions (edgernn_dot.h: Xpulp pv.sdotsp.b). */
int edgernn_dot_simd(void);

/* edgernn_fully_connected_s8's rounding */
#define EDGERNN_ROUND_ONCE 0
#define EDGERNN_ROUND_TWICE_UP 1

/* edgernn_unary_f32's op */
typedef enum {
    EDGERNN_UNARY_LOGISTIC,
    EDGERNN_UNARY_TANH,
    EDGERNN_UNARY_EXP,
    EDGERNN_UNARY_ABS,
    EDGERNN_UNARY_NEG,
    EDGERNN_UNARY_RELU,
    EDGERNN_UNARY_RELU6,
    EDGERNN_UNARY_RSQRT,
    EDGERNN_UNARY_SQRT,
    EDGERNN_UNARY_SQUARE
} edgernn_unary_t;

/* edgernn_requantize_s16's mode: what is applied to (in - input_offset) before the rescale. The
 * generated code passes the numbers (edgernn/backend/kernels.py REQUANTIZE_*). */
typedef enum {
    EDGERNN_REQUANTIZE_IDENTITY = 0, /* QUANTIZE */
    EDGERNN_REQUANTIZE_ABS = 1,
    EDGERNN_REQUANTIZE_NEG = 2
} edgernn_requantize_t;

/* memmove, which the generated code uses instead of the C library's: the GAP SDK's FreeRTOS libc
 * declares memmove but does not define it. Ranges that do not overlap go to memcpy; overlapping ones
 * are copied a byte at a time in the direction that reads every byte before it is overwritten. */
void edgernn_move_bytes(void *dst, const void *src, size_t n);

/* ---- fully connected: out[r][o] = act(sum_i in[r][i] * w[o][i] + bias[o]) ---- */
void edgernn_fully_connected_f32(const float *in, const float *w, const float *bias, float act_min,
                                 float act_max, int rows, int n_in, int n_out, float *out);
/* bias already holds bias[o] + input_offset * sum_i w[o][i]. rounding: how the int32 sum is rescaled,
 * as the kernel of the graph's oracle does it (docs/ops.md): EDGERNN_ROUND_ONCE, LiteRT's reference
 * kernel, (x * m + 2^(30 - shift)) >> (31 - shift); EDGERNN_ROUND_TWICE_UP, its builtin kernel (ruy on
 * x86), the rounded high multiply then a rounding right shift, halves up. */
void edgernn_fully_connected_s8(const int8_t *in, const int8_t *w, const int32_t *bias,
                                const int32_t *multiplier, const int32_t *shift, int rounding,
                                int32_t output_offset, int32_t act_min, int32_t act_max, int rows, int n_in,
                                int n_out, int8_t *out);
void edgernn_fully_connected_s16(const int16_t *in, const int8_t *w, const int64_t *bias,
                                 const int32_t *multiplier, const int32_t *shift, int32_t output_offset,
                                 int32_t act_min, int32_t act_max, int rows, int n_in, int n_out,
                                 int16_t *out);

/* ---- binary element-wise ---- */
void edgernn_add_f32(const edgernn_bcast_t *b, const float *in1, const float *in2, float act_min,
                     float act_max, float *out);
void edgernn_sub_f32(const edgernn_bcast_t *b, const float *in1, const float *in2, float act_min,
                     float act_max, float *out);
void edgernn_mul_f32(const edgernn_bcast_t *b, const float *in1, const float *in2, float act_min,
                     float act_max, float *out);
void edgernn_div_f32(const edgernn_bcast_t *b, const float *in1, const float *in2, float act_min,
                     float act_max, float *out);
void edgernn_maximum_f32(const edgernn_bcast_t *b, const float *in1, const float *in2, float *out);
void edgernn_minimum_f32(const edgernn_bcast_t *b, const float *in1, const float *in2, float *out);
void edgernn_squared_difference_f32(const edgernn_bcast_t *b, const float *in1, const float *in2, float *out);
/* subtract != 0: in1 - in2 with TFLite's 8-bit SUB rounding; for int16 SUB TFLite negates the
 * second multiplier instead and calls ADD, which the caller expresses through the parameters. */
void edgernn_addsub_s8(const edgernn_bcast_t *b, const edgernn_addsub_params_t *p, int subtract,
                       const int8_t *in1, const int8_t *in2, int8_t *out);
void edgernn_addsub_s16(const edgernn_bcast_t *b, const edgernn_addsub_params_t *p, int subtract,
                        const int16_t *in1, const int16_t *in2, int16_t *out);
void edgernn_mul_s8(const edgernn_bcast_t *b, const edgernn_mul_params_t *p, const int8_t *in1,
                    const int8_t *in2, int8_t *out);
void edgernn_mul_s16(const edgernn_bcast_t *b, const edgernn_mul_params_t *p, const int16_t *in1,
                     const int16_t *in2, int16_t *out);
void edgernn_div_s8(const edgernn_bcast_t *b, const edgernn_mul_params_t *p, const int8_t *in1,
                    const int8_t *in2, int8_t *out);
/* squared_difference.cc's 8-bit path; left_shift is 7, the activation range the full int8 range */
void edgernn_squared_difference_s8(const edgernn_bcast_t *b, const edgernn_addsub_params_t *p,
                                   const int8_t *in1, const int8_t *in2, int8_t *out);
/* The same without broadcasting, on n elements: a range [i0, i1) of the output is the same call with
 * every pointer advanced by i0 and n = i1 - i0. */
void edgernn_addsub_n_s8(const edgernn_addsub_params_t *p, int subtract, const int8_t *in1, const int8_t *in2,
                         int n, int8_t *out);
void edgernn_addsub_n_s16(const edgernn_addsub_params_t *p, int subtract, const int16_t *in1,
                          const int16_t *in2, int n, int16_t *out);
/* One operand constant, rescaled at generation time: out[i] = rescale_out(+-rescale_1(in[i]) + k[i]),
 * the input1 fields of p describing in, negate != 0 for constant - in. */
void edgernn_addsub_const_s8(const edgernn_addsub_params_t *p, int negate, const int8_t *in, const int32_t *k,
                             int n, int8_t *out);
void edgernn_addsub_const_s16(const edgernn_addsub_params_t *p, int negate, const int16_t *in,
                              const int32_t *k, int n, int16_t *out);
void edgernn_mul_n_s8(const edgernn_mul_params_t *p, const int8_t *in1, const int8_t *in2, int n,
                      int8_t *out);
void edgernn_mul_n_s16(const edgernn_mul_params_t *p, const int16_t *in1, const int16_t *in2, int n,
                       int16_t *out);

/* ---- unary ---- */
void edgernn_unary_f32(edgernn_unary_t op, const float *in, int n, float *out);
/* Any 8-bit op that maps each input value to one output value, through a 256-entry table indexed
 * by (uint8_t)input. */
void edgernn_lut_s8(const int8_t *table, const int8_t *in, int n, int8_t *out);
/* TFLite's interpolating int16 lookup (LUTLookup) over a 513-entry table. */
void edgernn_lut_s16(const int16_t *table, const int16_t *in, int n, int16_t *out);
void edgernn_logistic_s16(int32_t input_multiplier, int32_t input_left_shift, const int16_t *in, int n,
                          int16_t *out);
void edgernn_tanh_s16(int32_t input_multiplier, int32_t input_left_shift, const int16_t *in, int n,
                      int16_t *out);
/* out = clamp(MultiplyByQuantizedMultiplier(mode(in - input_offset)) + output_offset). */
void edgernn_requantize_s16(const edgernn_mul_params_t *p, edgernn_requantize_t mode, const int16_t *in,
                            int n, int16_t *out);
void edgernn_quantize_f32_s8(float scale, int32_t zero_point, const float *in, int n, int8_t *out);
void edgernn_quantize_f32_s16(float scale, int32_t zero_point, const float *in, int n, int16_t *out);
void edgernn_dequantize_s8_f32(float scale, int32_t zero_point, const int8_t *in, int n, float *out);
void edgernn_dequantize_s16_f32(float scale, int32_t zero_point, const int16_t *in, int n, float *out);

/* ---- data movement: SPLIT, SPLIT_V, CONCATENATION, STRIDED_SLICE, RESHAPE, PACK, GATHER ... ---- */
void edgernn_copy_runs(const edgernn_run_t *runs, int n_runs, size_t elem_size, const void *src, void *dst);

/* ---- softmax over the last dimension (depth) of rows ---- */
/* with TFLite's beta */
void edgernn_softmax_f32(const float *in, int rows, int depth, float beta, float *out);
/* 8-bit: TFLite's reference fixed-point softmax (output scale 1/256, zero point -128) */
void edgernn_softmax_s8(int32_t input_multiplier, int input_left_shift, int32_t diff_min, const int8_t *in,
                        int rows, int depth, int8_t *out);
/* 16-bit: TFLite's SoftmaxInt16 with its exp and 1 / (1 + x) tables (output scale 1/32768) */
void edgernn_softmax_s16(const int16_t *exp_lut, const int16_t *recip_lut, int32_t input_multiplier,
                         int input_shift, const int16_t *in, int rows, int depth, int16_t *out);

/* ---- reductions: out[o][i] = sum_r in[o][r][i] ---- */
void edgernn_sum_f32(const float *in, int outer, int reduced, int inner, float *out);
void edgernn_mean_f32(const float *in, int outer, int reduced, int inner, float *out);
/* MEAN, 8-bit: out = clamp(mbqm(sum - reduced * input_zero_point) + output_zero_point) */
void edgernn_mean_s8(const int8_t *in, int outer, int reduced, int inner, int32_t input_zero_point,
                     int32_t multiplier, int shift, int32_t output_zero_point, int8_t *out);
/* SUM, 8-bit: out = clamp(roundf(sum * scale + bias) + output_zero_point), in float32 */
void edgernn_sum_s8(const int8_t *in, int outer, int reduced, int inner, float scale, float bias,
                    int32_t output_zero_point, int8_t *out);

/* ---- UNIDIRECTIONAL_SEQUENCE_LSTM (edgernn_lstm.c): batch 1, `steps` time steps ---- */
/* Gates are packed in the order input, forget, cell, output: w_in is [4 * n_cell][n_input] and
 * w_rec [4 * n_cell][n_cell], row-major. h and c are the op's variable tensors (the persistent
 * state), updated in place; y receives h after every step. scratch holds 4 * n_cell gate values.
 * bias_in[r] = gate bias - input zero point * sum(w_in[r]); bias_rec[r] = -h zero point * sum(w_rec[r]).
 * The team versions, edgernn_team_lstm_* (edgernn_team.h), are in edgernn_lstm.c too, which firmware
 * holds only when its schedule has an LSTM. */
void edgernn_lstm_s8(const edgernn_lstm_s8_params_t *p, const int8_t *w_in, const int8_t *w_rec,
                     const int32_t *bias_in, const int32_t *bias_rec, int steps, const int8_t *x, int8_t *h,
                     int16_t *c, int8_t *y, int16_t *scratch);
void edgernn_lstm_f32(const edgernn_lstm_f32_params_t *p, const float *w_in, const float *w_rec,
                      const float *bias, int steps, const float *x, float *h, float *c, float *y,
                      float *scratch);

#endif /* EDGERNN_KERNELS_H */
