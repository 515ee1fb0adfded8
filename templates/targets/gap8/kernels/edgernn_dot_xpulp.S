/* The int8 dot products of edgernn_dot.h's blocked weights layout in GAP8 Xpulpv2 assembly: the whole
 * groups of 4 inputs of a block of 8 (or 4) rows, for FULLY_CONNECTED, the fused LSTM's gates and
 * the convolutions' rows. edgernn_dot.h calls them on GAP8 builds (EDGERNN_DOT_ASM, set by the GAP8
 * Makefile) when x and w are 4-byte aligned, with a compiler that knows Xpulp (GAP's gcc 7, which may make
 * hardware loops of its own but none around a call) or with EDGERNN_DOT_ASM=2; with Debian's gcc it
 * inlines the same loops (edgernn_dot.h), so that the sums stay in registers. The last n mod 4 inputs
 * stay in C.
 *
 *   void edgernn_dot8_s8_xpulp(const int8_t *x, const int8_t *w, int groups, int32_t acc[8]);
 *   void edgernn_dot4_s8_xpulp(const int8_t *x, const int8_t *w, int groups, int32_t acc[4]);
 *
 * acc[r] += sum over i < 4 * groups of x[i] * w_r[i]. One iteration is one group: a p.lw of 4 inputs,
 * then for each row a p.lw of its 4 weights and a pv.sdotsp.b. The weights alternate between two
 * registers so that every loaded word is used two instructions after its load: GVSOC charges a load's
 * result used by the very next instruction one more cycle, so the 8-row body runs in its 17
 * instructions, 17 cycles for 32 MACs (the 4-row body: 9 for 16), and the hardware loop's back edge
 * costs nothing. Sums are exact int32, as in C, so the bytes are those of the portable path.
 *
 * Only caller-saved registers are used (a0-a7, t0-t6): no stack frame. */
#if defined(__riscv) && defined(EDGERNN_DOT_ASM) && EDGERNN_DOT_ASM && defined(EDGERNN_XPULP) && EDGERNN_XPULP
#include "edgernn_xpulp_asm.h"

    .option push
    .option norvc
    .option norelax
    .text

    .globl edgernn_dot8_s8_xpulp
    .type edgernn_dot8_s8_xpulp, @function
    .p2align 2
edgernn_dot8_s8_xpulp:                  /* a0 x, a1 w, a2 groups, a3 acc */
    blez a2, 9f                         /* a count of 0 would run the body once */
    lw t0, 0(a3)
    lw t1, 4(a3)
    lw t2, 8(a3)
    lw t3, 12(a3)
    lw t4, 16(a3)
    lw t5, 20(a3)
    lw t6, 24(a3)
    lw a4, 28(a3)
    XP_LP_SETUP 0, RV_A2, 1f
    XP_LW_POSTINC RV_A5, RV_A0, 4       /* the group's 4 inputs */
    XP_LW_POSTINC RV_A6, RV_A1, 4       /* row 0's 4 weights */
    XP_LW_POSTINC RV_A7, RV_A1, 4       /* row 1's */
    XP_SDOTSP_B RV_T0, RV_A5, RV_A6
    XP_LW_POSTINC RV_A6, RV_A1, 4       /* row 2's */
    XP_SDOTSP_B RV_T1, RV_A5, RV_A7
    XP_LW_POSTINC RV_A7, RV_A1, 4       /* row 3's */
    XP_SDOTSP_B RV_T2, RV_A5, RV_A6
    XP_LW_POSTINC RV_A6, RV_A1, 4       /* row 4's */
    XP_SDOTSP_B RV_T3, RV_A5, RV_A7
    XP_LW_POSTINC RV_A7, RV_A1, 4       /* row 5's */
    XP_SDOTSP_B RV_T4, RV_A5, RV_A6
    XP_LW_POSTINC RV_A6, RV_A1, 4       /* row 6's */
    XP_SDOTSP_B RV_T5, RV_A5, RV_A7
    XP_LW_POSTINC RV_A7, RV_A1, 4       /* row 7's */
    XP_SDOTSP_B RV_T6, RV_A5, RV_A6
1:  XP_SDOTSP_B RV_A4, RV_A5, RV_A7     /* the body's last instruction */
    sw t0, 0(a3)
    sw t1, 4(a3)
    sw t2, 8(a3)
    sw t3, 12(a3)
    sw t4, 16(a3)
    sw t5, 20(a3)
    sw t6, 24(a3)
    sw a4, 28(a3)
9:  ret
    .size edgernn_dot8_s8_xpulp, . - edgernn_dot8_s8_xpulp

    .globl edgernn_dot4_s8_xpulp
    .type edgernn_dot4_s8_xpulp, @function
    .p2align 2
edgernn_dot4_s8_xpulp:                  /* a0 x, a1 w, a2 groups, a3 acc */
    blez a2, 9f
    lw t0, 0(a3)
    lw t1, 4(a3)
    lw t2, 8(a3)
    lw t3, 12(a3)
    XP_LP_SETUP 0, RV_A2, 1f
    XP_LW_POSTINC RV_A5, RV_A0, 4
    XP_LW_POSTINC RV_A6, RV_A1, 4
    XP_LW_POSTINC RV_A7, RV_A1, 4
    XP_SDOTSP_B RV_T0, RV_A5, RV_A6
    XP_LW_POSTINC RV_A6, RV_A1, 4
    XP_SDOTSP_B RV_T1, RV_A5, RV_A7
    XP_LW_POSTINC RV_A7, RV_A1, 4
    XP_SDOTSP_B RV_T2, RV_A5, RV_A6
1:  XP_SDOTSP_B RV_T3, RV_A5, RV_A7
    sw t0, 0(a3)
    sw t1, 4(a3)
    sw t2, 8(a3)
    sw t3, 12(a3)
9:  ret
    .size edgernn_dot4_s8_xpulp, . - edgernn_dot4_s8_xpulp

    .option pop

#endif
