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

void edgernn_fully_connected_s8(const int8_t *in, const int8_t *w, const int32_t *bias,
                                const int32_t *multiplier, const int32_t *shift, int32_t output_offset,
                                int32_t act_min, int32_t act_max, int rows, int n_in, int n_out,
                                int8_t *out)
{
    int r, o, i;
    for (r = 0; r < rows; ++r) {
        const int8_t *x = in + (size_t)r * n_in;
        for (o = 0; o < n_out; ++o) {
            const int8_t *wo = w + (size_t)o * n_in;
            int32_t acc = 0;
            for (i = 0; i < n_in; ++i) {
                acc += (int32_t)x[i] * (int32_t)wo[i];
            }
            acc += bias[o];
            acc = edgernn_mbqm_single(acc, multiplier[o], shift[o]) + output_offset;
            out[(size_t)r * n_out + o] = (int8_t)edgernn_clamp(acc, act_min, act_max);
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
