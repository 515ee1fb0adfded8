/* The STM32 family's kernel set (toolchain.kernels = "stm32"): the Cortex-M4's DSP extension under the
 * reference kernels' hooks (templates/kernels/edgernn_arch.h lists them). Everything else is the reference C.
 *
 *   EDGERNN_DOT_SIMD4, edgernn_v4s, EDGERNN_SDOTSP4(a, b, acc)
 *       four int8 lanes in a word and their dot product added to acc: SXTB16 takes lanes 0 and 2 (and, of the
 *       word rotated by 8, lanes 1 and 3) to two int16 halves, SMLAD adds both halves' products to acc. This is
 *       CMSIS-NN's arm_nn_vec_mat_mult_t_s8 blocking: edgernn_dot.h walks 8 (then 4) weight rows per group of
 *       4 inputs, so the input's two extended words are computed once a group (the compiler shares them across
 *       the rows: the intrinsics are pure) and each row costs one word load, two SXTB16 and two SMLAD.
 *
 * The sums are the reference's exact int32 sums (SMLAD wraps as the C int32 sum does; the products of two
 * int8 cannot overflow an int16 x int16 product), so the bytes are the reference's, which are LiteRT's:
 * tests/targets/stm32/test_qemu_stm32f405.py validates the board with this set, and test_dsp_kernels.py
 * holds both sets' outputs equal and checks the ELF for the instructions. */
#ifndef EDGERNN_ARCH_H
#define EDGERNN_ARCH_H

#include <stdint.h>

#if defined(__ARM_FEATURE_SIMD32) && __ARM_FEATURE_SIMD32 && !defined(EDGERNN_FC_SCALAR)
#include <arm_acle.h>

#define EDGERNN_DOT_SIMD4 1
typedef uint32_t edgernn_v4s;

static inline __attribute__((always_inline)) int32_t edgernn_sdot4_dsp(edgernn_v4s a, edgernn_v4s b, int32_t acc)
{
    const int16x2_t a02 = __sxtb16((int8x4_t)a);
    const int16x2_t a13 = __sxtb16((int8x4_t)((a >> 8) | (a << 24)));
    const int16x2_t b02 = __sxtb16((int8x4_t)b);
    const int16x2_t b13 = __sxtb16((int8x4_t)((b >> 8) | (b << 24)));
    return __smlad(a13, b13, __smlad(a02, b02, acc));
}
#define EDGERNN_SDOTSP4(a, b, acc) edgernn_sdot4_dsp((a), (b), (acc))
#endif

#endif /* EDGERNN_ARCH_H */
