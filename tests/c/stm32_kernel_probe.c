/* The kernels of one set, compiled into the STM32 kernel check (stm32_kernels_check.c): FULLY_CONNECTED's file
 * as it is, and the clamps as the requantizations and fused loops inline them (constant bounds). Compiled twice,
 * in a firmware folder with the family's edgernn_arch.h (PROBE=dsp) and in a copy with the reference's
 * (PROBE=ref, the kernels' external names renamed ref_...): tests/targets/stm32/test_dsp_kernels.py. */
#include "edgernn_fully_connected.c"

#define PROBE_CAT2(a, b) a##b
#define PROBE_CAT(a, b) PROBE_CAT2(a, b)

int32_t PROBE_CAT(PROBE, _clamp16)(int32_t x);
int32_t PROBE_CAT(PROBE, _clamp8)(int32_t x);
int32_t PROBE_CAT(PROBE, _clamp_relu16)(int32_t x);

int32_t PROBE_CAT(PROBE, _clamp16)(int32_t x)
{
    return edgernn_clamp(x, -32768, 32767);
}

int32_t PROBE_CAT(PROBE, _clamp8)(int32_t x)
{
    return edgernn_clamp(x, -128, 127);
}

int32_t PROBE_CAT(PROBE, _clamp_relu16)(int32_t x)
{
    return edgernn_clamp(x, 0, 32767);
}
