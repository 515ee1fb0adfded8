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

/* ---- a block's whole groups of 4 inputs (EDGERNN_DOT_USE_ASM): 4 rows a pass ----
 * Eight rows' sums, the input's two halves, eight weight words and the pointers do not fit the M4's 13
 * registers: gcc keeps half of the sums on the stack. So a block of 8 rows is two passes of 4 rows over its
 * groups (the second at the block's offset of 16 bytes), which re-extends the input word (2 instructions a
 * group) and keeps every sum in a register; SXTB16's rotated form takes lanes 1 and 3 in one instruction. */
#define EDGERNN_DOT_USE_ASM 1
#define EDGERNN_DOT_ASM_MIN_INPUTS 8

static inline __attribute__((always_inline)) int16x2_t edgernn_sxtb16_ror8(uint32_t v)
{
    int16x2_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
    return r;
}

static inline __attribute__((always_inline)) uint32_t edgernn_word(const int8_t *p)
{
    uint32_t v;
    __builtin_memcpy(&v, __builtin_assume_aligned(p, 4), sizeof v);
    return v;
}

/* acc[r] += rows r = 0..3 of `groups` groups of 4 inputs, a group's 4 rows `stride` bytes after the last's */
static inline __attribute__((always_inline)) void edgernn_dot_rows4_dsp(const int8_t *x, const int8_t *w,
                                                                        int groups, int stride, int32_t acc[4])
{
    int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    const int8_t *const xe = x + 4 * groups;
    for (; x < xe; x += 4, w += stride) {
        const uint32_t xv = edgernn_word(x);
        const int16x2_t x02 = __sxtb16((int8x4_t)xv), x13 = edgernn_sxtb16_ror8(xv);
        const uint32_t w0 = edgernn_word(w), w1 = edgernn_word(w + 4);
        const uint32_t w2 = edgernn_word(w + 8), w3 = edgernn_word(w + 12);
        a0 = __smlad(x13, edgernn_sxtb16_ror8(w0), __smlad(x02, __sxtb16((int8x4_t)w0), a0));
        a1 = __smlad(x13, edgernn_sxtb16_ror8(w1), __smlad(x02, __sxtb16((int8x4_t)w1), a1));
        a2 = __smlad(x13, edgernn_sxtb16_ror8(w2), __smlad(x02, __sxtb16((int8x4_t)w2), a2));
        a3 = __smlad(x13, edgernn_sxtb16_ror8(w3), __smlad(x02, __sxtb16((int8x4_t)w3), a3));
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}

static inline __attribute__((always_inline)) void edgernn_dot8_s8_dsp(const int8_t *x, const int8_t *w, int groups,
                                                                      int32_t acc[8])
{
    edgernn_dot_rows4_dsp(x, w, groups, 32, acc);
    edgernn_dot_rows4_dsp(x, w + 16, groups, 32, acc + 4);
}

static inline __attribute__((always_inline)) void edgernn_dot4_s8_dsp(const int8_t *x, const int8_t *w, int groups,
                                                                      int32_t acc[4])
{
    edgernn_dot_rows4_dsp(x, w, groups, 16, acc);
}
#define EDGERNN_DOT8_ASM edgernn_dot8_s8_dsp
#define EDGERNN_DOT4_ASM edgernn_dot4_s8_dsp

/* ---- 16x8: int16 inputs times int8 weights (edgernn_fully_connected.c's EDGERNN_FC_S16_ROWS4) ----
 * SMLAD multiplies int16 halves pairwise, so a group of 4 inputs x0..x3 (two words, x0 x1 and x2 x3) is
 * repacked once into x0 x2 and x1 x3 (PKHBT, PKHTB), the lanes SXTB16 gives a row's weight word: w0 w2 and,
 * rotated by 8, w1 w3. A row then costs what an int8 row costs: one word load, two SXTB16, two SMLAD
 * (CMSIS-NN's arm_nn_vec_mat_mult_t_s16 repacks the weights instead, two more instructions a row). The caller's
 * chunk holds at most 256 inputs, so each sum (|x w| < 2^22) stays within int32, as the reference's does: the
 * sums are its exact int32 sums, whatever order SMLAD adds them in. Rows are row-major, at any alignment (the
 * M4 loads unaligned words; a row of n_in bytes starts anywhere). */
static inline __attribute__((always_inline)) uint32_t edgernn_word_any(const void *p)
{
    uint32_t v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}

/* s_r += rows r = 0..3 (w0..w3) of `groups` groups of 4 inputs of x; returns groups. In asm: the loop needs 14
 * registers (the input pointer, a count, 4 row pointers, 4 sums, the repacked pair, a weight word and its
 * extended halves), all the M4 has besides sp and pc, and gcc's C version keeps two row pointers and the end on
 * the stack and repacks with 5 instructions instead of PKHBT and PKHTB: 37 instructions a group, here 26. */
static inline __attribute__((always_inline)) int edgernn_fc_s16_rows4_dsp(const int16_t *x, const int8_t *w0,
                                                                          const int8_t *w1, const int8_t *w2,
                                                                          const int8_t *w3, int groups, int32_t *s0,
                                                                          int32_t *s1, int32_t *s2, int32_t *s3)
{
    int32_t a0 = *s0, a1 = *s1, a2 = *s2, a3 = *s3;
    int count = groups;
    uint32_t x02, x13, v, t;
    if (count > 0) {
        __asm__ volatile(
            "1:\n\t"
            "ldr %[v], [%[x]], #4\n\t"                 /* x0 x1 */
            "ldr %[x13], [%[x]], #4\n\t"               /* x2 x3 */
            "pkhbt %[x02], %[v], %[x13], lsl #16\n\t"  /* x0 x2 */
            "pkhtb %[x13], %[x13], %[v], asr #16\n\t"  /* x1 x3 */
            "ldr %[v], [%[w0]], #4\n\t"
            "sxtb16 %[t], %[v]\n\t"
            "smlad %[a0], %[x02], %[t], %[a0]\n\t"
            "sxtb16 %[t], %[v], ror #8\n\t"
            "smlad %[a0], %[x13], %[t], %[a0]\n\t"
            "ldr %[v], [%[w1]], #4\n\t"
            "sxtb16 %[t], %[v]\n\t"
            "smlad %[a1], %[x02], %[t], %[a1]\n\t"
            "sxtb16 %[t], %[v], ror #8\n\t"
            "smlad %[a1], %[x13], %[t], %[a1]\n\t"
            "ldr %[v], [%[w2]], #4\n\t"
            "sxtb16 %[t], %[v]\n\t"
            "smlad %[a2], %[x02], %[t], %[a2]\n\t"
            "sxtb16 %[t], %[v], ror #8\n\t"
            "smlad %[a2], %[x13], %[t], %[a2]\n\t"
            "ldr %[v], [%[w3]], #4\n\t"
            "sxtb16 %[t], %[v]\n\t"
            "smlad %[a3], %[x02], %[t], %[a3]\n\t"
            "sxtb16 %[t], %[v], ror #8\n\t"
            "smlad %[a3], %[x13], %[t], %[a3]\n\t"
            "subs %[n], %[n], #1\n\t"
            "bne 1b"
            : [x] "+r"(x), [n] "+r"(count), [w0] "+r"(w0), [w1] "+r"(w1), [w2] "+r"(w2), [w3] "+r"(w3),
              [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [x02] "=&r"(x02), [x13] "=&r"(x13),
              [v] "=&r"(v), [t] "=&r"(t)
            :
            : "cc", "memory");
    }
    *s0 = a0;
    *s1 = a1;
    *s2 = a2;
    *s3 = a3;
    return groups;
}
#define EDGERNN_FC_S16_ROWS4 edgernn_fc_s16_rows4_dsp
/* the 16x8 requantization inlined into the row function: its call passed 8 arguments, 4 on the stack, and cost
 * as much as the requantization itself (the M4 has no instruction cache to spare, as GAP8's cluster must) */
#define EDGERNN_S16_REQUANT_INLINE 1

/* ---- CONV_2D by pixel pairs (edgernn_conv.c's EDGERNN_CONV_PIXEL_PAIRS) ----
 * The single-core convolution takes the team's path with one worker: two pixels' patches gathered into a
 * slot at word-aligned strides, then the 4x2 blocking of conv_s8_pair (4 output channels x 2 pixels a group of
 * 4 inputs: the weight word loaded and extended once for both pixels), whatever n_in is: a 3x3 stem over one
 * channel (9 inputs a pixel) ran one pixel at a time with unaligned patches. Patches whose rows of taps are a
 * few bytes (in_c not a multiple of 4) are copied a word, a halfword, a byte at a time (the M4 loads and
 * stores unaligned words), not byte by byte. */
#define EDGERNN_CONV_PIXEL_PAIRS 1

/* ---- the single-core int8 CONV_2D and MAX_POOL_2D (edgernn_conv_m4.c) ----
 * edgernn_conv.c's kernels call these first; each returns 0 for a geometry it does not take (the reference C
 * then runs). CONV_2D: each pixel's patch gathered word-aligned by runs of words, halfwords and bytes, then the
 * dot products above; MAX_POOL_2D: four channels a word, SSUB8 and SEL. */
#define EDGERNN_CONV_S8_ARCH edgernn_m4_conv_s8
#define EDGERNN_DEPTHWISE_S8_ARCH edgernn_m4_depthwise_conv_s8
#define EDGERNN_MAX_POOL_S8_ARCH edgernn_m4_max_pool_s8

/* ---- saturation: SSAT ----
 * A clamp to the whole int8 or int16 range, where the bounds are known when compiling (the requantizations
 * that end a 16-bit op's arithmetic, a fused loop's constants once inlined), is SSAT #8 or #16: one instruction
 * for the two compares and two conditional moves of the C; any other clamp is the C. Same value for every x.
 * gcc finds SSAT by itself only where it sees the bounds in the clamp's own expression: a GRU(64) int16 firmware
 * held none with the reference's clamp, and 8 (its fused element-wise loops) with this one. */
#define EDGERNN_ARCH_CLAMP 1
static inline __attribute__((always_inline)) int32_t edgernn_clamp(int32_t x, int32_t lo, int32_t hi)
{
    if (__builtin_constant_p(lo) && __builtin_constant_p(hi)) {
        if (lo == -32768 && hi == 32767) {
            return __ssat(x, 16);
        }
        if (lo == -128 && hi == 127) {
            return __ssat(x, 8);
        }
    }
    return x < lo ? lo : (x > hi ? hi : x);
}
#endif

#endif /* EDGERNN_ARCH_H */
