/* GAP8's Xpulpv2 instructions that edgernn's hand-written kernels use, as GNU assembler macros that
 * emit each instruction's encoding with `.word`, so that any RISC-V GNU assembler builds them: Debian's
 * riscv64-unknown-elf-as (which knows no Xpulp) and GAP's own gcc 7 toolchain alike. Included by the
 * `.S` kernels only (edgernn_dot_xpulp.S).
 *
 * The encodings are GVSOC's ISA description of GAP8's cores (gap_sdk:
 * gvsoc/gvsoc/models/cpu/iss/isa_gen/isa_riscv_gen.py, the formats in the same file):
 *   p.lw rd, imm(rs1!)    LPOST, '------- ----- ----- 010 ----- 0001011': I-type on opcode 0x0b, funct3 2;
 *                         rd = mem32[rs1], then rs1 += imm
 *   pv.sdotsp.b rd,rs1,rs2 RRRR, '101110- ----- ----- 001 ----- 1010111': R-type on opcode 0x57, funct3 1,
 *                         funct7 1011100; rd += the sum of the four signed byte products of rs1 and rs2
 *   lp.setup L, rs1, uimm HL0, '------- ----- ----- 100 0000- 1111011': loop L (bit 7), count rs1
 *                         (bits 19:15), uimm (bits 31:20) the offset in half-words from the lp.setup to
 *                         the LAST instruction of the body (gvsoc pulp_v2.hpp lp_setup_exec: start =
 *                         pc + 4, end = pc + (uimm << 1), and hwloop_check_exec loops back after the
 *                         instruction at `end`)
 *   lp.setupi L, n, uimm  HL1, '------- ----- ----- 101 0000- 1111011': count n (bits 31:20), the offset
 *                         to the last instruction in bits 19:15
 * The registers are numbers (RV_* below), since the macros build the words arithmetically.
 *
 * A hardware loop on GAP8's silicon has rules that GVSOC does not check (docs/ops.md, "Hand-written
 * Xpulp kernels"; edgernn/targets/gap8/hwloop_check.py checks every GAP8 ELF the tests build): the body is
 * at least 3 instructions, none compressed (the kernels are assembled under `.option norvc`); its last
 * instruction is not a branch; loop 0 is the inner loop; a count of 0 runs the body once, so the code
 * branches around a loop whose count may be 0. */
#ifndef EDGERNN_XPULP_ASM_H
#define EDGERNN_XPULP_ASM_H

#define RV_ZERO 0
#define RV_RA 1
#define RV_SP 2
#define RV_T0 5
#define RV_T1 6
#define RV_T2 7
#define RV_S0 8
#define RV_S1 9
#define RV_A0 10
#define RV_A1 11
#define RV_A2 12
#define RV_A3 13
#define RV_A4 14
#define RV_A5 15
#define RV_A6 16
#define RV_A7 17
#define RV_T3 28
#define RV_T4 29
#define RV_T5 30
#define RV_T6 31

/* p.lw rd, imm(rs1!) */
.macro XP_LW_POSTINC rd, rs1, imm
    .word ((((\imm) & 0xfff) << 20) | ((\rs1) << 15) | (2 << 12) | ((\rd) << 7) | 0x0b)
.endm

/* pv.sdotsp.b rd, rs1, rs2 */
.macro XP_SDOTSP_B rd, rs1, rs2
    .word ((0x5c << 25) | ((\rs2) << 20) | ((\rs1) << 15) | (1 << 12) | ((\rd) << 7) | 0x57)
.endm

/* lp.setup L, rs1, last: loop L runs the instructions from the next one to the label `last` (included)
 * rs1 times. The offset is a difference of labels in one section, known when the file is assembled
 * under `.option norvc` and `.option norelax` (no instruction changes size at link time). */
.macro XP_LP_SETUP l, rs1, last
    .word (((((\last) - .) >> 1) & 0xfff) << 20) | ((\rs1) << 15) | (4 << 12) | ((\l) << 7) | 0x7b
.endm

/* lp.setupi L, count, last: the same with an immediate count (12 bits) and the body's last instruction at
 * most 31 half-words after the lp.setupi (HL1: bits 19:15) */
.macro XP_LP_SETUPI l, count, last
    .word (((\count) & 0xfff) << 20) | (((((\last) - .) >> 1) & 31) << 15) | (5 << 12) | ((\l) << 7) | 0x7b
.endm

#endif /* EDGERNN_XPULP_ASM_H */
