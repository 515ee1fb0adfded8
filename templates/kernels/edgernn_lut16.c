#include "edgernn_kernels.h"

/* reference_integer_ops::LookupTable for int16 (LUTLookup): 512 segments of 128 input steps, linear
 * interpolation between lut[k] and lut[k + 1], rounded half up. */
void edgernn_lut_s16(const int16_t *table, const int16_t *in, int n, int16_t *out)
{
    int i;
    for (i = 0; i < n; ++i) {
        const int32_t value = in[i];
        const int32_t index = 256 + (value >> 7);
        const int32_t offset = value & 0x7f;
        const int32_t base = table[index];
        const int32_t slope = table[index + 1] - table[index];
        const int32_t delta = (slope * offset + 64) >> 7;
        out[i] = (int16_t)(base + delta);
    }
}
