#include "edgernn_fixedpoint.h"
#include "edgernn_kernels.h"

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

/* Four output rows at a time share each load of the input: a plain-C form of the blocking that
 * CMSIS-NN's arm_nn_vec_mat_mult_t_s8 uses, about 3.5 instructions per multiply-accumulate on a scalar
 * core. The sums are exact int32 arithmetic, so the order does not change the result. */
void edgernn_fully_connected_s8(const int8_t *in, const int8_t *w, const int32_t *bias,
                                const int32_t *multiplier, const int32_t *shift, int32_t output_offset,
                                int32_t act_min, int32_t act_max, int rows, int n_in, int n_out,
                                int8_t *out)
{
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
            for (i = 0; i < n_in; ++i) {
                const int32_t xi = x[i];
                a0 += xi * w0[i];
                a1 += xi * w1[i];
                a2 += xi * w2[i];
                a3 += xi * w3[i];
            }
            y[o] = (int8_t)edgernn_clamp(edgernn_mbqm_single(a0, multiplier[o], shift[o]) + output_offset,
                                         act_min, act_max);
            y[o + 1] = (int8_t)edgernn_clamp(
                edgernn_mbqm_single(a1, multiplier[o + 1], shift[o + 1]) + output_offset, act_min, act_max);
            y[o + 2] = (int8_t)edgernn_clamp(
                edgernn_mbqm_single(a2, multiplier[o + 2], shift[o + 2]) + output_offset, act_min, act_max);
            y[o + 3] = (int8_t)edgernn_clamp(
                edgernn_mbqm_single(a3, multiplier[o + 3], shift[o + 3]) + output_offset, act_min, act_max);
        }
        for (; o < n_out; ++o) {
            const int8_t *wo = w + (size_t)o * n_in;
            int32_t acc = bias[o];
            for (i = 0; i < n_in; ++i) {
                acc += (int32_t)x[i] * (int32_t)wo[i];
            }
            acc = edgernn_mbqm_single(acc, multiplier[o], shift[o]) + output_offset;
            y[o] = (int8_t)edgernn_clamp(acc, act_min, act_max);
        }
    }
}

void edgernn_fully_connected_s16(const int16_t *in, const int8_t *w, const int64_t *bias,
                                 const int32_t *multiplier, const int32_t *shift, int32_t output_offset,
                                 int32_t act_min, int32_t act_max, int rows, int n_in, int n_out,
                                 int16_t *out)
{
    int r, o, i;
    for (r = 0; r < rows; ++r) {
        const int16_t *x = in + (size_t)r * n_in;
        for (o = 0; o < n_out; ++o) {
            const int8_t *wo = w + (size_t)o * n_in;
            int64_t acc = 0;
            int32_t scaled;
            for (i = 0; i < n_in; ++i) {
                acc += (int32_t)x[i] * (int32_t)wo[i];
            }
            acc += bias[o];
            scaled = edgernn_mbqm64(acc, multiplier[o], shift[o]) + output_offset;
            out[(size_t)r * n_out + o] = (int16_t)edgernn_clamp(scaled, act_min, act_max);
        }
    }
}
