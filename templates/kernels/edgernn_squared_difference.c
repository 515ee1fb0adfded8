#include "edgernn_fixedpoint.h"
#include "edgernn_kernels.h"

/* squared_difference.cc, 8-bit: both inputs shifted left by 7 and rescaled to twice the larger
 * input scale, the difference squared in int32, then one requantization. */
static int8_t squared_difference_one(const edgernn_addsub_params_t *p, int32_t a, int32_t c)
{
    const int32_t x = (p->input1_offset + a) * (1 << p->left_shift);
    const int32_t y = (p->input2_offset + c) * (1 << p->left_shift);
    const int32_t sx = edgernn_mbqm(x, p->input1_multiplier, p->input1_shift);
    const int32_t sy = edgernn_mbqm(y, p->input2_multiplier, p->input2_shift);
    const int32_t diff = sx - sy;
    const int32_t raw = edgernn_mbqm(diff * diff, p->output_multiplier, p->output_shift) + p->output_offset;
    return (int8_t)edgernn_clamp(raw, p->act_min, p->act_max);
}

void edgernn_squared_difference_s8(const edgernn_bcast_t *b, const edgernn_addsub_params_t *p,
                                   const int8_t *in1, const int8_t *in2, int8_t *out)
{
    int d0, d1, d2, d3;
    size_t o = 0;
    for (d0 = 0; d0 < b->dims[0]; ++d0) {
        for (d1 = 0; d1 < b->dims[1]; ++d1) {
            for (d2 = 0; d2 < b->dims[2]; ++d2) {
                size_t i1 = (size_t)d0 * b->stride1[0] + (size_t)d1 * b->stride1[1] + (size_t)d2 * b->stride1[2];
                size_t i2 = (size_t)d0 * b->stride2[0] + (size_t)d1 * b->stride2[1] + (size_t)d2 * b->stride2[2];
                for (d3 = 0; d3 < b->dims[3]; ++d3, ++o) {
                    out[o] = squared_difference_one(p, in1[i1], in2[i2]);
                    i1 += (size_t)b->stride1[3];
                    i2 += (size_t)b->stride2[3];
                }
            }
        }
    }
}
