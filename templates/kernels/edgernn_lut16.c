#include "edgernn_fixedpoint.h"
#include "edgernn_kernels.h"

/* reference_integer_ops::LookupTable for int16, per element (edgernn_lut_lookup_s16) */
void edgernn_lut_s16(const int16_t *table, const int16_t *in, int n, int16_t *out)
{
    int i;
    for (i = 0; i < n; ++i) {
        out[i] = (int16_t)edgernn_lut_lookup_s16(table, in[i]);
    }
}
