/* The reference kernel set's own instructions: none. The reference kernels (templates/kernels/) are
 * portable C, with the vector units the compiler finds (SSE2 on x86-64, edgernn_dot.h); they are what the
 * host tests hold to LiteRT. A family's optimized set (templates/targets/<set>/kernels/, chosen by the board
 * file's toolchain.kernels) replaces this file with its own edgernn_arch.h, which may define these hooks:
 *
 *   EDGERNN_DOT_SIMD4, edgernn_v4s, EDGERNN_SDOTSP4(a, b, acc)
 *                                  four int8 lanes in a word and their dot product added to acc
 *                                  (edgernn_dot.h's blocks, edgernn_conv.c's patch pairs)
 *   EDGERNN_DOT_USE_ASM, EDGERNN_DOT8_ASM, EDGERNN_DOT4_ASM, EDGERNN_DOT_ASM_MIN_INPUTS
 *                                  a block's whole groups of 4 inputs in the set's own routine
 *   EDGERNN_DOT4_ALL_ASM                          a 4-row block's bias and all its inputs (the int8 FC group)
 *   EDGERNN_MBQM_HI_TIGHT_ASM, edgernn_mbqm_hi_tight    edgernn_fixedpoint.h's tight requantization
 *   EDGERNN_HALVES_ASM, edgernn_halves_xpulp            edgernn_fixedpoint.h's requantization from 16-bit halves
 *   EDGERNN_ARCH_CLAMP, edgernn_clamp                    a clamp without branches
 *   EDGERNN_ARCH_CLZ, edgernn_clz32_nonzero              leading zero bits of a nonzero word
 *   EDGERNN_ARCH_ROUND_HI(hi, shift)                     hi = (hi + 2^(e-2)) >> (e-1), e = -shift
 *   EDGERNN_FC_REQUANT_ASM, FC_ASM8_ONCE ...             FULLY_CONNECTED's block requantization
 *   CONV_QUAD_LOOP(WSTEP)                                a quad of CONV_2D's patch pairs
 *   EDGERNN_MAX4(a, b)                                   each int8 lane's maximum of two words (MAX_POOL_2D)
 *   EDGERNN_ARCH_SMALL_ICACHE                            one copy of the LSTM's code, not two; the int8 FC
 *                                                        group compiled at -O2
 *   EDGERNN_FC_S16_ROWS4(x, w0, w1, w2, w3, groups, &s0, &s1, &s2, &s3)
 *                                  16x8 FULLY_CONNECTED: 4 rows' int32 sums over whole groups of 4 int16
 *                                  inputs (at most 64 groups, so no sum overflows); returns the groups done
 *   EDGERNN_S16_REQUANT_INLINE     the 16x8 requantization inlined into its row (not one shared call)
 *   EDGERNN_CONV_S8_ARCH, EDGERNN_DEPTHWISE_S8_ARCH, EDGERNN_MAX_POOL_S8_ARCH
 *                                  the set's own single-core int8 CONV_2D, DEPTHWISE_CONV_2D and MAX_POOL_2D, called
 *                                  first with the kernel's arguments; nonzero when they took the geometry
 *
 * Each must compute the reference C's exact bytes: the kernels' tests compile both. */
#ifndef EDGERNN_ARCH_H
#define EDGERNN_ARCH_H

#endif /* EDGERNN_ARCH_H */
