#include <math.h>

#include "edgernn_elementwise.h"
#include "edgernn_fixedpoint.h"
#include "edgernn_kernels.h"

/* The 4-D broadcasting walk shared by the binary ops: BODY sees in1[i1], in2[i2], out[o]. */
#define EDGERNN_BCAST_LOOP(b, BODY)                                                             \
    do {                                                                                        \
        int d0, d1, d2, d3;                                                                     \
        size_t o = 0;                                                                           \
        for (d0 = 0; d0 < (b)->dims[0]; ++d0) {                                                 \
            for (d1 = 0; d1 < (b)->dims[1]; ++d1) {                                             \
                for (d2 = 0; d2 < (b)->dims[2]; ++d2) {                                         \
                    size_t i1 = (size_t)d0 * (b)->stride1[0] + (size_t)d1 * (b)->stride1[1] +   \
                                (size_t)d2 * (b)->stride1[2];                                   \
                    size_t i2 = (size_t)d0 * (b)->stride2[0] + (size_t)d1 * (b)->stride2[1] +   \
                                (size_t)d2 * (b)->stride2[2];                                   \
                    for (d3 = 0; d3 < (b)->dims[3]; ++d3, ++o) {                                \
                        BODY;                                                                   \
                        i1 += (size_t)(b)->stride1[3];                                          \
                        i2 += (size_t)(b)->stride2[3];                                          \
                    }                                                                           \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
    } while (0)

static float clampf(float x, float lo, float hi)
{
    return x < lo ? lo : (x > hi ? hi : x);
}

void edgernn_add_f32(const edgernn_bcast_t *b, const float *in1, const float *in2, float act_min,
                     float act_max, float *out)
{
    EDGERNN_BCAST_LOOP(b, out[o] = clampf(in1[i1] + in2[i2], act_min, act_max));
}

void edgernn_sub_f32(const edgernn_bcast_t *b, const float *in1, const float *in2, float act_min,
                     float act_max, float *out)
{
    EDGERNN_BCAST_LOOP(b, out[o] = clampf(in1[i1] - in2[i2], act_min, act_max));
}

void edgernn_mul_f32(const edgernn_bcast_t *b, const float *in1, const float *in2, float act_min,
                     float act_max, float *out)
{
    EDGERNN_BCAST_LOOP(b, out[o] = clampf(in1[i1] * in2[i2], act_min, act_max));
}

void edgernn_div_f32(const edgernn_bcast_t *b, const float *in1, const float *in2, float act_min,
                     float act_max, float *out)
{
    EDGERNN_BCAST_LOOP(b, out[o] = clampf(in1[i1] / in2[i2], act_min, act_max));
}

void edgernn_maximum_f32(const edgernn_bcast_t *b, const float *in1, const float *in2, float *out)
{
    EDGERNN_BCAST_LOOP(b, out[o] = in1[i1] > in2[i2] ? in1[i1] : in2[i2]);
}

void edgernn_minimum_f32(const edgernn_bcast_t *b, const float *in1, const float *in2, float *out)
{
    EDGERNN_BCAST_LOOP(b, out[o] = in1[i1] < in2[i2] ? in1[i1] : in2[i2]);
}

void edgernn_squared_difference_f32(const edgernn_bcast_t *b, const float *in1, const float *in2,
                                    float *out)
{
    EDGERNN_BCAST_LOOP(b, out[o] = (in1[i1] - in2[i2]) * (in1[i1] - in2[i2]));
}

/* The per-element arithmetic of ADD/SUB and MUL is in edgernn_elementwise.h, shared with the fused
 * loops of model.c; each kernel sets its constants up once per call and keeps them in registers. */
/* The flat loop, with the input whose rescale is an exact product (HALF: 1 or 2, 0 for neither)
 * known at compile time, which leaves one rescale fewer per element and fewer live constants. */
#define EDGERNN_ADDSUB_FLAT(T, HALF)                                                                \
    for (i = 0; i < n; ++i) {                                                                       \
        const int32_t x1 = in1[i] + k.off1, x2 = in2[i] + k.off2;                                   \
        const int32_t s1 = edgernn_addsub_scaled(&k.r1, (HALF) == 1, k.half_mul, x1);               \
        const int32_t s2 = edgernn_addsub_scaled(&k.r2, (HALF) == 2, k.half_mul, x2);               \
        out[i] = (T)edgernn_addsub_out(&k, s1 + k.sign2 * s2);                                              \
    }

static int is_flat(const edgernn_bcast_t *b)
{
    return b->dims[0] == 1 && b->dims[1] == 1 && b->dims[2] == 1 && b->stride1[3] == 1 && b->stride2[3] == 1;
}

/* The int8 and int16 kernels of ADD/SUB and MUL are one body each, written once for the element type T
 * and defined for both: EDGERNN_ADDSUB_KERNELS(s8, int8_t) defines edgernn_addsub_n_s8, edgernn_addsub_s8
 * and edgernn_addsub_const_s8. */
#define EDGERNN_ADDSUB_KERNELS(SUFFIX, T)                                                           \
    void edgernn_addsub_n_##SUFFIX(const edgernn_addsub_params_t *p, int subtract, const T *in1,    \
                                   const T *in2, int n, T *out)                                     \
    {                                                                                               \
        const edgernn_addsub_k_t k = edgernn_addsub_k(p, subtract);                                 \
        int i;                                                                                      \
        if (k.half1) {                                                                              \
            EDGERNN_ADDSUB_FLAT(T, 1)                                                               \
        } else if (k.half2) {                                                                       \
            EDGERNN_ADDSUB_FLAT(T, 2)                                                               \
        } else {                                                                                    \
            EDGERNN_ADDSUB_FLAT(T, 0)                                                               \
        }                                                                                           \
    }                                                                                               \
                                                                                                    \
    void edgernn_addsub_##SUFFIX(const edgernn_bcast_t *b, const edgernn_addsub_params_t *p,        \
                                 int subtract, const T *in1, const T *in2, T *out)                  \
    {                                                                                               \
        if (is_flat(b)) {                                                                           \
            edgernn_addsub_n_##SUFFIX(p, subtract, in1, in2, b->dims[3], out);                      \
            return;                                                                                 \
        }                                                                                           \
        const edgernn_addsub_k_t k = edgernn_addsub_k(p, subtract);                                 \
        EDGERNN_BCAST_LOOP(b, out[o] = (T)edgernn_addsub_elem(&k, in1[i1], in2[i2]));               \
    }                                                                                               \
                                                                                                    \
    /* One operand constant: its rescaled value, with the sign of the op, is folded at generation   \
     * time into k[i]; the input's fields of p describe the other operand. */                       \
    void edgernn_addsub_const_##SUFFIX(const edgernn_addsub_params_t *p, int negate, const T *in,   \
                                       const int32_t *k, int n, T *out)                             \
    {                                                                                               \
        const edgernn_addsub_k_t q = edgernn_addsub_k(p, negate);                                   \
        int i;                                                                                      \
        if (q.half1) {                                                                              \
            for (i = 0; i < n; ++i) {                                                               \
                out[i] = (T)edgernn_addsub_out(                                                     \
                    &q, q.sign2 * edgernn_addsub_scaled(&q.r1, 1, q.half_mul, in[i] + q.off1) + k[i]); \
            }                                                                                       \
        } else {                                                                                    \
            for (i = 0; i < n; ++i) {                                                               \
                out[i] = (T)edgernn_addsub_out(                                                     \
                    &q, q.sign2 * edgernn_addsub_scaled(&q.r1, 0, q.half_mul, in[i] + q.off1) + k[i]); \
            }                                                                                       \
        }                                                                                           \
    }

EDGERNN_ADDSUB_KERNELS(s8, int8_t)
EDGERNN_ADDSUB_KERNELS(s16, int16_t)

/* int16 ADD as LiteRT's builtin kernel computes it (edgernn_add_blocks_elem): element i of the call is
 * element first + i of the op, which lies in a block when first + i < blocked (n - n % 16 of the op's n). */
void edgernn_add_blocks_n_s16(const edgernn_addsub_params_t *p, int first, int blocked, const int16_t *in1,
                              const int16_t *in2, int n, int16_t *out)
{
    const edgernn_addsub_k_t k = edgernn_addsub_k(p, 0);
    int i;
    for (i = 0; i < n; ++i) {
        out[i] = (int16_t)edgernn_add_blocks_elem(&k, in1[i], in2[i], first + i < blocked);
    }
}

void edgernn_add_blocks_const_s16(const edgernn_addsub_params_t *p, int first, int blocked, const int16_t *in,
                                  const int32_t *k, int n, int16_t *out)
{
    const edgernn_addsub_k_t q = edgernn_addsub_k(p, 0);
    int i;
    for (i = 0; i < n; ++i) {
        out[i] = (int16_t)edgernn_add_blocks_const_elem(&q, in[i], k[i], first + i < blocked);
    }
}

/* int8 ADD and MUL as LiteRT's builtin kernels compute them (edgernn_vector_out_s8): output element o lies in one
 * of their vector blocks when o % run < blocked (edgernn/backend/lowering/elementwise.py, builtin_vector_blocks);
 * element i of a flat call is the op's element first + i. */
#define EDGERNN_IN_BLOCK(o) ((int)((o) % (size_t)run) < blocked)

void edgernn_add_blocks_n_s8(const edgernn_addsub_params_t *p, int first, int run, int blocked, const int8_t *in1,
                             const int8_t *in2, int n, int8_t *out)
{
    const edgernn_addsub_k_t k = edgernn_addsub_k(p, 0);
    int i;
    for (i = 0; i < n; ++i) {
        out[i] = (int8_t)edgernn_add_vector_elem_s8(&k, in1[i], in2[i], EDGERNN_IN_BLOCK((size_t)(first + i)));
    }
}

void edgernn_add_blocks_const_s8(const edgernn_addsub_params_t *p, int first, int run, int blocked, const int8_t *in,
                                 const int32_t *k, int n, int8_t *out)
{
    const edgernn_addsub_k_t q = edgernn_addsub_k(p, 0);
    int i;
    for (i = 0; i < n; ++i) {
        out[i] = (int8_t)edgernn_add_vector_const_elem_s8(&q, in[i], k[i], EDGERNN_IN_BLOCK((size_t)(first + i)));
    }
}

void edgernn_add_blocks_s8(const edgernn_bcast_t *b, const edgernn_addsub_params_t *p, int run, int blocked,
                           const int8_t *in1, const int8_t *in2, int8_t *out)
{
    const edgernn_addsub_k_t k = edgernn_addsub_k(p, 0);
    EDGERNN_BCAST_LOOP(b, out[o] = (int8_t)edgernn_add_vector_elem_s8(&k, in1[i1], in2[i2], EDGERNN_IN_BLOCK(o)));
}

void edgernn_mul_blocks_n_s8(const edgernn_mul_params_t *p, int first, int run, int blocked, const int8_t *in1,
                             const int8_t *in2, int n, int8_t *out)
{
    const edgernn_mul_k_t k = edgernn_mul_k(p);
    int i;
    for (i = 0; i < n; ++i) {
        out[i] = (int8_t)edgernn_mul_vector_elem_s8(&k, in1[i], in2[i], EDGERNN_IN_BLOCK((size_t)(first + i)));
    }
}

void edgernn_mul_blocks_s8(const edgernn_bcast_t *b, const edgernn_mul_params_t *p, int run, int blocked,
                           const int8_t *in1, const int8_t *in2, int8_t *out)
{
    const edgernn_mul_k_t k = edgernn_mul_k(p);
    EDGERNN_BCAST_LOOP(b, out[o] = (int8_t)edgernn_mul_vector_elem_s8(&k, in1[i1], in2[i2], EDGERNN_IN_BLOCK(o)));
}

#define EDGERNN_MUL_KERNELS(SUFFIX, T)                                                              \
    void edgernn_mul_n_##SUFFIX(const edgernn_mul_params_t *p, const T *in1, const T *in2, int n,   \
                                T *out)                                                             \
    {                                                                                               \
        const edgernn_mul_k_t k = edgernn_mul_k(p);                                                 \
        int i;                                                                                      \
        for (i = 0; i < n; ++i) {                                                                   \
            out[i] = (T)edgernn_mul_elem(&k, in1[i], in2[i]);                                       \
        }                                                                                           \
    }                                                                                               \
                                                                                                    \
    void edgernn_mul_##SUFFIX(const edgernn_bcast_t *b, const edgernn_mul_params_t *p, const T *in1, \
                              const T *in2, T *out)                                                 \
    {                                                                                               \
        if (is_flat(b)) {                                                                           \
            edgernn_mul_n_##SUFFIX(p, in1, in2, b->dims[3], out);                                   \
            return;                                                                                 \
        }                                                                                           \
        const edgernn_mul_k_t k = edgernn_mul_k(p);                                                 \
        EDGERNN_BCAST_LOOP(b, out[o] = (T)edgernn_mul_elem(&k, in1[i1], in2[i2]));                  \
    }

EDGERNN_MUL_KERNELS(s8, int8_t)
EDGERNN_MUL_KERNELS(s16, int16_t)

/* ---- DIV, 8-bit: the per-element arithmetic is edgernn_div_elem (edgernn_elementwise.h) ---- */

void edgernn_div_s8(const edgernn_bcast_t *b, const edgernn_mul_params_t *p, const int8_t *in1,
                    const int8_t *in2, int8_t *out)
{
    EDGERNN_BCAST_LOOP(b, out[o] = (int8_t)edgernn_div_elem(p, in1[i1], in2[i2]));
}

/* ---- unary ---- */

void edgernn_unary_f32(edgernn_unary_t op, const float *in, int n, float *out)
{
    int i;
    for (i = 0; i < n; ++i) {
        const float v = in[i];
        float r;
        switch (op) {
        case EDGERNN_UNARY_LOGISTIC: r = 1.0f / (1.0f + expf(-v)); break;
        case EDGERNN_UNARY_TANH: r = tanhf(v); break;
        case EDGERNN_UNARY_EXP: r = expf(v); break;
        case EDGERNN_UNARY_ABS: r = fabsf(v); break;
        case EDGERNN_UNARY_NEG: r = -v; break;
        case EDGERNN_UNARY_RELU: r = v > 0.0f ? v : 0.0f; break;
        case EDGERNN_UNARY_RELU6: r = v > 0.0f ? (v < 6.0f ? v : 6.0f) : 0.0f; break;
        case EDGERNN_UNARY_RSQRT: r = 1.0f / sqrtf(v); break;
        case EDGERNN_UNARY_SQRT: r = sqrtf(v); break;
        case EDGERNN_UNARY_SQUARE: r = v * v; break;
        default: r = v; break;
        }
        out[i] = r;
    }
}

void edgernn_lut_s8(const int8_t *table, const int8_t *in, int n, int8_t *out)
{
    int i;
    for (i = 0; i < n; ++i) {
        out[i] = (int8_t)edgernn_lut_elem(table, in[i]);
    }
}

/* reference_integer_ops::Logistic and Tanh, int16: the per-element arithmetic is edgernn_elementwise.h's */
#define EDGERNN_SIGMOID_S16_KERNEL(NAME, ELEM)                                                       \
    void NAME(int32_t input_multiplier, int32_t input_left_shift, const int16_t *in, int n, int16_t *out) \
    {                                                                                               \
        int32_t round;                                                                              \
        int i;                                                                                      \
        if (input_multiplier == 0) {                                                                \
            input_multiplier = 3 << input_left_shift;                                               \
            input_left_shift = 0;                                                                   \
        }                                                                                           \
        round = input_left_shift > 0 ? 1 << (input_left_shift - 1) : 0;                             \
        for (i = 0; i < n; ++i) {                                                                   \
            out[i] = (int16_t)ELEM(edgernn_sigmoid_table_uint16, in[i], input_multiplier, input_left_shift, \
                                   round);                                                          \
        }                                                                                           \
    }

EDGERNN_SIGMOID_S16_KERNEL(edgernn_logistic_s16, edgernn_logistic_s16_elem)
EDGERNN_SIGMOID_S16_KERNEL(edgernn_tanh_s16, edgernn_tanh_s16_elem)

void edgernn_requantize_s16(const edgernn_mul_params_t *p, edgernn_requantize_t mode, const int16_t *in,
                            int n, int16_t *out)
{
    int i;
    for (i = 0; i < n; ++i) {
        int32_t v = (int32_t)in[i] + p->input1_offset;
        int32_t r;
        if (mode == EDGERNN_REQUANTIZE_ABS) {
            v = v < 0 ? -v : v;
        } else if (mode == EDGERNN_REQUANTIZE_NEG) {
            v = -v;
        }
        r = edgernn_mbqm(v, p->output_multiplier, p->output_shift) + p->output_offset;
        out[i] = (int16_t)edgernn_clamp(r, p->act_min, p->act_max);
    }
}

/* QUANTIZE between the two integer types: LiteRT's Requantize, out = clamp(MultiplyByQuantizedMultiplier(
 * in - input_zero_point, s_in / s_out) + output_zero_point) to the output type. For int8 -> int16 the
 * effective scale is usually above 1 (a left shift before the high multiply); that is the same formula.
 *
 * MultiplyByQuantizedMultiplier with a left shift L and a right shift e is edgernn_rescale_narrow of
 * x * 2^L with up = 2 wherever its bounds hold for every input of the call: |x| * 2^(L + 2) <= INT32_MAX
 * (|x| is at most 2^15 + |zero point| for int16, 2^7 + |zero point| for int8), e <= 29 and a multiplier
 * of at least 2^30 (QuantizeMultiplier's). That is one 32-bit high multiply an element instead of the
 * 64-bit products of edgernn_mbqm; the choice is made once per call, and the parameters are read into
 * locals because the int8 output may alias them. tests/backend/test_mixed_seams.py holds both seams over every
 * input value against LiteRT. */
static int requantize_narrow_applies(int32_t multiplier, int32_t shift, int32_t x_max)
{
    const int left = shift > 0 ? shift : 0;
    const int e = shift > 0 ? 0 : -shift;
    return multiplier >= ((int32_t)1 << 30) && e <= 29 && left <= 28 &&
           ((int64_t)x_max << (left + 2)) <= (int64_t)INT32_MAX;
}

void edgernn_requantize_s8_s16(const edgernn_mul_params_t *p, const int8_t *in, int n, int16_t *out)
{
    const int32_t off = p->input1_offset, zo = p->output_offset, m = p->output_multiplier;
    const int32_t shift = p->output_shift, lo = p->act_min, hi = p->act_max;
    int i;
    if (requantize_narrow_applies(m, shift, 128 + (off < 0 ? -off : off))) {
        const int left = shift > 0 ? shift : 0;
        const int e = shift > 0 ? 0 : -shift;
        for (i = 0; i < n; ++i) {
            out[i] = (int16_t)edgernn_requantize_narrow_elem(in[i], off, left, m, e, zo, lo, hi);
        }
        return;
    }
    for (i = 0; i < n; ++i) {
        out[i] = (int16_t)edgernn_requantize_elem(in[i], off, m, shift, zo, lo, hi);
    }
}

void edgernn_requantize_s16_s8(const edgernn_mul_params_t *p, const int16_t *in, int n, int8_t *out)
{
    const int32_t off = p->input1_offset, zo = p->output_offset, m = p->output_multiplier;
    const int32_t shift = p->output_shift, lo = p->act_min, hi = p->act_max;
    int i;
    if (requantize_narrow_applies(m, shift, 32768 + (off < 0 ? -off : off))) {
        const int left = shift > 0 ? shift : 0;
        const int e = shift > 0 ? 0 : -shift;
        for (i = 0; i < n; ++i) {
            out[i] = (int8_t)edgernn_requantize_narrow_elem(in[i], off, left, m, e, zo, lo, hi);
        }
        return;
    }
    for (i = 0; i < n; ++i) {
        out[i] = (int8_t)edgernn_requantize_elem(in[i], off, m, shift, zo, lo, hi);
    }
}

static int32_t round_half_away(float x)
{
    return (int32_t)(x >= 0.0f ? floorf(x + 0.5f) : -floorf(-x + 0.5f));
}

void edgernn_quantize_f32_s8(float scale, int32_t zero_point, const float *in, int n, int8_t *out)
{
    int i;
    for (i = 0; i < n; ++i) {
        out[i] = (int8_t)edgernn_clamp(round_half_away(in[i] / scale) + zero_point, -128, 127);
    }
}

void edgernn_quantize_f32_s16(float scale, int32_t zero_point, const float *in, int n, int16_t *out)
{
    int i;
    for (i = 0; i < n; ++i) {
        out[i] = (int16_t)edgernn_clamp(round_half_away(in[i] / scale) + zero_point, -32768, 32767);
    }
}

/* LiteRT's builtin QUANTIZE float32 -> int16 (optimized AffineQuantize): x times the float32 inverse of the scale,
 * rounded to nearest with halves to even (the vector conversion's rounding), measured on an LTC's float DIVs
 * between int16 tensors (docs/ops.md). t cuts toward zero; x - t is exact below 2^23, where an x of more is
 * whole already. */
void edgernn_quantize_f32_s16_even(float inverse_scale, float scale, int32_t zero_point, const float *in, int n,
                                   int16_t *out)
{
    /* LiteRT's builtin kernel takes the elements in blocks of 8 (its NEON path, emulated by NEON_2_SSE on x86):
     * x * inverse_scale in float32, halves to even; the last n % 8 in its scalar tail, TfLiteRound(x / scale)
     * with scale as a double: halves away from zero (measured: tests/backend/test_mixed_seams.py). */
    const int blocked = n - n % 8;
    int i;
    for (i = blocked; i < n; ++i) {
        double q = (double)in[i] / (double)scale;
        int32_t t;
        q = q > 65536.0 ? 65536.0 : (q < -65536.0 ? -65536.0 : q);
        t = (int32_t)q;
        if (q - (double)t >= 0.5) {
            ++t;
        } else if (q - (double)t <= -0.5) {
            --t;
        }
        out[i] = (int16_t)edgernn_clamp(t + zero_point, -32768, 32767);
    }
    for (i = 0; i < blocked; ++i) {
        float x = in[i] * inverse_scale;
        int32_t t;
        float f;
        x = x > 65536.0f ? 65536.0f : (x < -65536.0f ? -65536.0f : x);
        t = (int32_t)x;
        f = x - (float)t;
        if (f > 0.5f || (f == 0.5f && (t & 1))) {
            ++t;
        } else if (f < -0.5f || (f == -0.5f && (t & 1))) {
            --t;
        }
        out[i] = (int16_t)edgernn_clamp(t + zero_point, -32768, 32767);
    }
}

void edgernn_dequantize_s8_f32(float scale, int32_t zero_point, const int8_t *in, int n, float *out)
{
    int i;
    for (i = 0; i < n; ++i) {
        out[i] = (float)((double)scale * (double)((int32_t)in[i] - zero_point));
    }
}

void edgernn_dequantize_s16_f32(float scale, int32_t zero_point, const int16_t *in, int n, float *out)
{
    int i;
    for (i = 0; i < n; ++i) {
        out[i] = (float)((double)scale * (double)((int32_t)in[i] - zero_point));
    }
}
