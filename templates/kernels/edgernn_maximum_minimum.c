/* MAXIMUM and MINIMUM, 8 and 16 bits: TFLite's MaximumMinimumBroadcastSlow compares the raw integers
 * (the converter gives both inputs the output's quantization), so the kernels hold no arithmetic. */
#include "edgernn_kernels.h"
#include "edgernn_maximum_minimum.h"

/* The 4-D broadcasting walk of edgernn_elementwise.c's binary ops, one body for both widths. */
#define EDGERNN_MAXIMUM_MINIMUM(T)                                                                  \
    int d0, d1, d2, d3;                                                                             \
    size_t o = 0;                                                                                   \
    for (d0 = 0; d0 < b->dims[0]; ++d0) {                                                           \
        for (d1 = 0; d1 < b->dims[1]; ++d1) {                                                       \
            for (d2 = 0; d2 < b->dims[2]; ++d2) {                                                   \
                const T *p1 = in1 + (size_t)d0 * b->stride1[0] + (size_t)d1 * b->stride1[1] +        \
                              (size_t)d2 * b->stride1[2];                                           \
                const T *p2 = in2 + (size_t)d0 * b->stride2[0] + (size_t)d1 * b->stride2[1] +        \
                              (size_t)d2 * b->stride2[2];                                           \
                for (d3 = 0; d3 < b->dims[3]; ++d3, ++o) {                                          \
                    const T x = *p1, y = *p2;                                                       \
                    out[o] = minimum ? (x < y ? x : y) : (x > y ? x : y);                           \
                    p1 += b->stride1[3];                                                            \
                    p2 += b->stride2[3];                                                            \
                }                                                                                   \
            }                                                                                       \
        }                                                                                           \
    }

void edgernn_maximum_minimum_s8(const edgernn_bcast_t *b, int minimum, const int8_t *in1, const int8_t *in2,
                                int8_t *out)
{
    EDGERNN_MAXIMUM_MINIMUM(int8_t)
}

void edgernn_maximum_minimum_s16(const edgernn_bcast_t *b, int minimum, const int16_t *in1,
                                 const int16_t *in2, int16_t *out)
{
    EDGERNN_MAXIMUM_MINIMUM(int16_t)
}
