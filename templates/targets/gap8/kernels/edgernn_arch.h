/* The GAP8 kernel set's own instructions: what the reference kernels (templates/kernels/) take from the
 * set's edgernn_arch.h where they have a hook, here Xpulpv2 (GAP8's cluster cores and fabric controller).
 * This file replaces the reference set's edgernn_arch.h of the same name in a firmware whose board file
 * says `toolchain.kernels = "gap8"`; the hooks it defines are listed in that file.
 *
 * The dot products take GAP8's Xpulp SIMD instruction pv.sdotsp.b (four int8 products summed into
 * int32) through the PULP builtin __builtin_pulp_sdotsp4 when the GAP SDK compiles the kernels: the SDK's
 * chip configuration, force-included in its GAP8 builds, defines ARCHI_CORE_HAS_PULPV2 (gap_sdk:
 * pulp-os/include/gap_rev1_config.h), and the SDK's own wrappers select the builtins on __pulp__ (gap_sdk:
 * tools/autotiler_v3/Emulation/GapBuiltins.h, `!defined(__EMUL__) || defined(__pulp__)`), with __GAP8__
 * for GAP8-only ones. -DEDGERNN_XPULP=1 forces the path and -DEDGERNN_XPULP=0 turns it off;
 * -DEDGERNN_XPULP_EMULATE builds it anywhere on the C emulation of edgernn_xpulp_emul.h (the host tests).
 *
 * A RISC-V compiler without the PULP builtins (Debian's riscv64-unknown-elf-gcc building GAP8 firmware
 * through edgernn's wrapper, templates/targets/gap8/sdk/) gets the same instruction by its encoding,
 * `.insn r 0x57, 1, 0x5c, rd, rs1, rs2` (pv.sdotsp.b: OP-V major opcode, funct3 1, funct7 0101110x;
 * gap_sdk gvsoc isa_riscv_gen.py), rd being the accumulator it adds to. The builtin is used wherever the
 * compiler has it: GAP's gcc 7 (which predates __has_builtin) or a macro standing in for it.
 * -DEDGERNN_XPULP_INSN=1 or 0 forces the choice. */
#ifndef EDGERNN_ARCH_H
#define EDGERNN_ARCH_H

#include <stdint.h>
#include <string.h>

/* ---- pv.sdotsp.b: EDGERNN_DOT_SIMD4, edgernn_v4s, EDGERNN_SDOTSP4 ---- */
#if defined(EDGERNN_XPULP_EMULATE)
#include "edgernn_xpulp_emul.h"
#define EDGERNN_DOT_SIMD4 1
#elif defined(EDGERNN_XPULP)
#if EDGERNN_XPULP
#define EDGERNN_DOT_SIMD4 1
#endif
#elif (defined(__riscv) || defined(__riscv__)) && \
    (defined(ARCHI_CORE_HAS_PULPV2) || defined(__pulp__) || defined(__GAP8__) || defined(__gap8__))
#define EDGERNN_DOT_SIMD4 1
#endif

#if defined(EDGERNN_DOT_SIMD4) && !defined(EDGERNN_XPULP_EMULATE) && !defined(EDGERNN_XPULP_INSN)
#if defined(__builtin_pulp_sdotsp4)
#define EDGERNN_XPULP_INSN 0
#elif defined(__has_builtin)
#if __has_builtin(__builtin_pulp_sdotsp4)
#define EDGERNN_XPULP_INSN 0
#else
#define EDGERNN_XPULP_INSN 1
#endif
#else
#define EDGERNN_XPULP_INSN 0
#endif
#endif

#if defined(EDGERNN_DOT_SIMD4) && !defined(EDGERNN_XPULP_EMULATE)
#if EDGERNN_XPULP_INSN
/* Four int8 lanes in one 32-bit register, lane k = byte k (GAP8 is little-endian). */
typedef uint32_t edgernn_v4s;

static inline __attribute__((always_inline)) int32_t edgernn_sdotsp4_insn(edgernn_v4s a, edgernn_v4s b,
                                                                         int32_t acc)
{
    __asm__(".insn r 0x57, 1, 0x5c, %0, %1, %2" : "+r"(acc) : "r"(a), "r"(b));
    return acc;
}
#define EDGERNN_SDOTSP4(a, b, acc) edgernn_sdotsp4_insn((a), (b), (acc))

/* pv.max.b: each int8 lane's maximum (gap_sdk gvsoc isa_riscv_gen.py: funct7 001100x, funct3 1, OP-V). */
static inline __attribute__((always_inline)) uint32_t edgernn_max4_insn(uint32_t a, uint32_t b)
{
    uint32_t r;
    __asm__(".insn r 0x57, 1, 0x18, %0, %1, %2" : "=r"(r) : "r"(a), "r"(b));
    return r;
}
#define EDGERNN_MAX4(a, b) edgernn_max4_insn((a), (b))
#else
typedef signed char edgernn_v4s __attribute__((vector_size(4)));
#define EDGERNN_SDOTSP4(a, b, acc) __builtin_pulp_sdotsp4((a), (b), (acc))
/* pv.max.b by its builtin, unless the dot product's builtin is a macro standing in for it (a host test's) and
 * this one is not: then the portable lanes (edgernn_conv.c) */
#if defined(__builtin_pulp_max4) || !defined(__builtin_pulp_sdotsp4)
#define EDGERNN_MAX4(a, b) ((uint32_t)__builtin_pulp_max4((edgernn_v4s)(a), (edgernn_v4s)(b)))
#endif
#endif
#endif

/* GAP8 builds with the hand-written Xpulp kernels (edgernn_dot_xpulp.S, assembled where the GAP8
 * Makefile sets EDGERNN_DOT_ASM to 1 or 2): a block's whole groups of 4 inputs go through them when x and
 * w are 4-byte aligned and there are at least EDGERNN_DOT_ASM_MIN_INPUTS inputs, and the last n mod 4
 * inputs through the C below. EDGERNN_DOT_ASM=1 takes the form that suits the compiler (below), 2 the
 * .S functions whatever the compiler. They add the same exact int32
 * products as the C. */
#if defined(EDGERNN_DOT_SIMD4) && !defined(EDGERNN_XPULP_EMULATE) && defined(EDGERNN_DOT_ASM) && EDGERNN_DOT_ASM
#define EDGERNN_DOT_USE_ASM 1
#if EDGERNN_XPULP_INSN && EDGERNN_DOT_ASM != 2
/* A compiler without Xpulp (Debian's gcc, which never emits hardware loops itself): the same loops as
 * inline assembly, so that the sums stay in registers across them and nothing is called. The encodings
 * are edgernn_xpulp_asm.h's, spelled with .insn, which takes the compiler's register names: p.lw rd,
 * 4(rs1!) is `.insn i 0x0b, 2, rd, 4(rs1)`, lp.setup 0, rs1, uimm is `.insn i 0x7b, 4, x0, rs1, uimm`
 * (x0 in the rd field: loop 0). The body's size is fixed (.option norvc), so lp.setup's offset to the
 * body's last instruction is a constant: 34 half-words for the 17 instructions of 8 rows, 18 for the 9
 * of 4. */
#define EDGERNN_DOT_INLINE_ASM 1
#define EDGERNN_ASM_LW4(rd, rs) ".insn i 0x0b, 2, %[" rd "], 4(%[" rs "])\n\t"
#define EDGERNN_ASM_SDOT(rd, a, b) ".insn r 0x57, 1, 0x5c, %[" rd "], %[" a "], %[" b "]\n\t"
#ifndef EDGERNN_DOT_ASM_MIN_INPUTS
#define EDGERNN_DOT_ASM_MIN_INPUTS 4
#endif
#else
/* The .S kernels are called (EDGERNN_DOT_ASM=2 forces it with any compiler): where the compiler knows Xpulp
 * (GAP's gcc 7) it may make hardware loops of its own, which a loop inside inline assembly would break; it
 * makes none around a call. Fewer inputs stay in
 * the inlined C: a call costs its sums' loads and stores and the caller's spills, more than the assembly
 * saves on 1 to 3 groups (about 5 cycles each in GVSOC). */
#ifndef EDGERNN_DOT_ASM_MIN_INPUTS
#define EDGERNN_DOT_ASM_MIN_INPUTS 16
#endif
#endif
void edgernn_dot8_s8_xpulp(const int8_t *x, const int8_t *w, int groups, int32_t acc[8]);
void edgernn_dot4_s8_xpulp(const int8_t *x, const int8_t *w, int groups, int32_t acc[4]);
#endif

/* ---- the whole blocks of edgernn_dot.h's dot products (EDGERNN_DOT_USE_ASM) ---- */
#if defined(EDGERNN_DOT_INLINE_ASM)
/* acc[r] += the products of the groups of 4 inputs of a block of 8 rows (edgernn_dot_xpulp.S's loop) */
static EDGERNN_DOT_INLINE void edgernn_dot8_s8_xpulp_inline(const int8_t *x, const int8_t *w, int groups,
                                                            int32_t acc[8])
{
    int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3], a4 = acc[4], a5 = acc[5], a6 = acc[6], a7 = acc[7];
    uint32_t xv, wa, wb;
    __asm__ volatile(".option push\n\t.option norvc\n\t"
                     "blez %[n], 2f\n\t"                      /* a count of 0 would run the body once */
                     ".insn i 0x7b, 4, x0, %[n], 34\n\t"      /* lp.setup 0, n: to the 17th instruction */
                     EDGERNN_ASM_LW4("xv", "x") EDGERNN_ASM_LW4("wa", "w") EDGERNN_ASM_LW4("wb", "w")
                     EDGERNN_ASM_SDOT("a0", "xv", "wa") EDGERNN_ASM_LW4("wa", "w")
                     EDGERNN_ASM_SDOT("a1", "xv", "wb") EDGERNN_ASM_LW4("wb", "w")
                     EDGERNN_ASM_SDOT("a2", "xv", "wa") EDGERNN_ASM_LW4("wa", "w")
                     EDGERNN_ASM_SDOT("a3", "xv", "wb") EDGERNN_ASM_LW4("wb", "w")
                     EDGERNN_ASM_SDOT("a4", "xv", "wa") EDGERNN_ASM_LW4("wa", "w")
                     EDGERNN_ASM_SDOT("a5", "xv", "wb") EDGERNN_ASM_LW4("wb", "w")
                     EDGERNN_ASM_SDOT("a6", "xv", "wa")
                     EDGERNN_ASM_SDOT("a7", "xv", "wb")        /* the body's last instruction */
                     "2:\n\t.option pop"
                     : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [a4] "+r"(a4), [a5] "+r"(a5),
                       [a6] "+r"(a6), [a7] "+r"(a7), [x] "+r"(x), [w] "+r"(w), [xv] "=&r"(xv), [wa] "=&r"(wa),
                       [wb] "=&r"(wb)
                     : [n] "r"(groups)
                     : "memory");
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
    acc[4] = a4;
    acc[5] = a5;
    acc[6] = a6;
    acc[7] = a7;
}

/* The same for a block of 4 rows */
static EDGERNN_DOT_INLINE void edgernn_dot4_s8_xpulp_inline(const int8_t *x, const int8_t *w, int groups,
                                                            int32_t acc[4])
{
    int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    uint32_t xv, wa, wb;
    __asm__ volatile(".option push\n\t.option norvc\n\t"
                     "blez %[n], 2f\n\t"
                     ".insn i 0x7b, 4, x0, %[n], 18\n\t"      /* lp.setup 0, n: to the 9th instruction */
                     EDGERNN_ASM_LW4("xv", "x") EDGERNN_ASM_LW4("wa", "w") EDGERNN_ASM_LW4("wb", "w")
                     EDGERNN_ASM_SDOT("a0", "xv", "wa") EDGERNN_ASM_LW4("wa", "w")
                     EDGERNN_ASM_SDOT("a1", "xv", "wb") EDGERNN_ASM_LW4("wb", "w")
                     EDGERNN_ASM_SDOT("a2", "xv", "wa")
                     EDGERNN_ASM_SDOT("a3", "xv", "wb")
                     "2:\n\t.option pop"
                     : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [x] "+r"(x), [w] "+r"(w),
                       [xv] "=&r"(xv), [wa] "=&r"(wa), [wb] "=&r"(wb)
                     : [n] "r"(groups)
                     : "memory");
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}
#define EDGERNN_DOT8_ASM edgernn_dot8_s8_xpulp_inline
#define EDGERNN_DOT4_ASM edgernn_dot4_s8_xpulp_inline

/* The last group of a block (g = n mod 4 inputs, each row's g weights after the one before: edgernn_dot.h's layout)
 * with the R sums in registers: xt holds the g inputs in its low lanes and zeros above, and each row's weights are
 * one word loaded at any alignment (GAP8's cores split a misaligned load in two): the word's bytes past the row's
 * (the next row's, or for the block's last row up to 3 bytes after it, still in the same memory) meet xt's zero
 * lanes and add nothing. */
#define EDGERNN_ASM_TAIL_ROW(rd, wreg)                                                              \
    "lw %[" wreg "], 0(%[w])\n\tadd %[w], %[w], %[g]\n\t" EDGERNN_ASM_SDOT(rd, "xt", wreg)
static inline __attribute__((always_inline)) uint32_t edgernn_tail_word(const int8_t *x, int g)
{
    uint32_t xt = (uint8_t)x[0];
    if (g > 1) {
        xt |= (uint32_t)(uint8_t)x[1] << 8;
        if (g > 2) {
            xt |= (uint32_t)(uint8_t)x[2] << 16;
        }
    }
    return xt;
}

/* acc[r] = bias[r] + the products of a block of 4 rows over all its n inputs (the int8 FC group's blocks): the whole
 * groups as edgernn_dot4_s8_xpulp_inline's loop, then the last group as above. For any n >= 1; x and w 4-byte
 * aligned. */
static EDGERNN_DOT_INLINE void edgernn_dot4_s8_xpulp_all(const int8_t *x, const int8_t *w, int n, const int32_t *bias,
                                                         int32_t acc[4])
{
    int32_t a0 = bias[0], a1 = bias[1], a2 = bias[2], a3 = bias[3];
    const int groups = n >> 2, g = n & 3;
    uint32_t xv, wa, wb;
    __asm__ volatile(".option push\n\t.option norvc\n\t"
                     "blez %[n], 2f\n\t"
                     ".insn i 0x7b, 4, x0, %[n], 18\n\t"
                     EDGERNN_ASM_LW4("xv", "x") EDGERNN_ASM_LW4("wa", "w") EDGERNN_ASM_LW4("wb", "w")
                     EDGERNN_ASM_SDOT("a0", "xv", "wa") EDGERNN_ASM_LW4("wa", "w")
                     EDGERNN_ASM_SDOT("a1", "xv", "wb") EDGERNN_ASM_LW4("wb", "w")
                     EDGERNN_ASM_SDOT("a2", "xv", "wa")
                     EDGERNN_ASM_SDOT("a3", "xv", "wb")
                     "2:\n\t.option pop"
                     : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [x] "+r"(x), [w] "+r"(w),
                       [xv] "=&r"(xv), [wa] "=&r"(wa), [wb] "=&r"(wb)
                     : [n] "r"(groups)
                     : "memory");
    if (g) {
        const uint32_t xt = edgernn_tail_word(x, g);
        __asm__ volatile(EDGERNN_ASM_TAIL_ROW("a0", "wa") EDGERNN_ASM_TAIL_ROW("a1", "wb")
                         EDGERNN_ASM_TAIL_ROW("a2", "wa") EDGERNN_ASM_TAIL_ROW("a3", "wb")
                         : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [w] "+r"(w), [wa] "=&r"(wa),
                           [wb] "=&r"(wb)
                         : [xt] "r"(xt), [g] "r"(g)
                         : "memory");
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}
#define EDGERNN_DOT4_ALL_ASM edgernn_dot4_s8_xpulp_all
#elif defined(EDGERNN_DOT_USE_ASM)
#define EDGERNN_DOT8_ASM edgernn_dot8_s8_xpulp
#define EDGERNN_DOT4_ASM edgernn_dot4_s8_xpulp
#endif

/* ---- edgernn_fixedpoint.h ---- */

/* edgernn_mbqm_hi_tight as Xpulp (the C twin and what it computes: edgernn_fixedpoint.h) */
#if defined(EDGERNN_DOT_SIMD4) && !defined(EDGERNN_XPULP_EMULATE) && EDGERNN_XPULP_INSN
#define EDGERNN_MBQM_HI_TIGHT_ASM 1
static inline __attribute__((always_inline)) int32_t edgernn_mbqm_hi_tight(int32_t x, int32_t multiplier, int32_t e1)
{
    int32_t lo, hi, s, t;
    const int32_t sign_bit = (int32_t)0x80000000u, quarter = 0x40000000;
    /* mulh's 5 cycles are a stall in GVSOC's model whatever follows; lo is used 5 instructions after its mul */
    __asm__("mul %[lo], %[x], %[m]\n\t"
            "mulh %[hi], %[x], %[m]\n\t"
            "and %[t], %[x], %[sb]\n\t"
            "srai %[s], %[x], 31\n\t"
            "xor %[t], %[t], %[q]\n\t"
            "add %[t], %[lo], %[t]\n\t"
            "sltu %[t], %[t], %[lo]\n\t"
            "add %[hi], %[hi], %[t]\n\t"
            ".insn r 0x5b, 6, 0x20, %[hi], %[s], %[e1]" /* p.addRN hi, s, e1 */
            : [lo] "=&r"(lo), [hi] "=&r"(hi), [s] "=&r"(s), [t] "=&r"(t)
            : [x] "r"(x), [m] "r"(multiplier), [e1] "r"(e1), [sb] "r"(sign_bit), [q] "r"(quarter));
    return hi;
}
#endif

/* edgernn_halves as Xpulp on GAP8 itself (the C twin and what it computes: edgernn_fixedpoint.h), 8 one-cycle instructions,
 * by their encodings (gap_sdk gvsoc isa_riscv_gen.py and its isa_lib/int.h for the semantics):
 *   p.muluN rd, rs1, rs2, 16    .insn r 0x5b, 0, 0x10, ...   (zext rs1[15:0] * zext rs2[15:0]) >> 16
 *   pv.sdotusp.h rd, rs1, rs2   .insn r 0x57, 0, 0x54, ...   rd += rs1's unsigned halves . rs2's signed ones
 *   p.adduN rd, rs1, rs2, 15    .insn r 0x5b, 2, 0x4f, ...   (rs1 + rs2) >> 15, logical
 *   p.machhu rd, rs1, rs2       .insn r 0x5b, 1, 0x20, ...   rd += zext rs1[31:16] * zext rs2[31:16]
 *   p.addRN rd, rs1, rs2        .insn r 0x5b, 6, 0x20, ...   (rd + rs1 + 2^(rs2-1)) >> rs2, arithmetic
 * EDGERNN_HALVES_CORE and _SIGN are strings over named asm operands: the accumulator word xs, the result a,
 * a scratch s, and the constants [k1] [k2] [k3] [k4] [e] (edgernn_conv.c's depthwise loops use them too). */
#if defined(EDGERNN_DOT_SIMD4) && !defined(EDGERNN_XPULP_EMULATE) && (defined(__riscv) || defined(__riscv__))
/* The _REGS forms take every register as asm text (a named operand "%[a]" or a register's name "t5"), for a loop
 * that names its registers itself (edgernn_conv.c's two-row depthwise loop, past GCC's 30 operands). */
#define EDGERNN_HALVES_CORE_REGS(a, xs, k1, k2, k3)                                                 \
    ".insn r 0x5b, 0, 0x10, " a ", " xs ", " k1 "\n\t"                                              \
    ".insn r 0x57, 0, 0x54, " a ", " xs ", " k2 "\n\t"                                              \
    ".insn r 0x5b, 2, 0x4f, " a ", " a ", " k3 "\n\t"                                               \
    ".insn r 0x5b, 1, 0x20, " a ", " xs ", " k1 "\n\t"
#define EDGERNN_HALVES_SIGN_REGS(a, xs, s) "srli " s ", " xs ", 30\n\tadd " a ", " a ", " s "\n\t"
#define EDGERNN_HALVES_ROUND_REGS(a, k4, e) ".insn r 0x5b, 6, 0x20, " a ", " k4 ", " e "\n\t"
#define EDGERNN_HALVES_CORE(a, xs) EDGERNN_HALVES_CORE_REGS("%[" a "]", "%[" xs "]", "%[k1]", "%[k2]", "%[k3]")
#define EDGERNN_HALVES_SIGN(a, xs, s) EDGERNN_HALVES_SIGN_REGS("%[" a "]", "%[" xs "]", "%[" s "]")
#define EDGERNN_HALVES_ROUND(a) EDGERNN_HALVES_ROUND_REGS("%[" a "]", "%[k4]", "%[e]")
#define EDGERNN_HALVES_ASM 1
static inline __attribute__((always_inline)) int32_t edgernn_halves_xpulp(uint32_t xs, uint32_t k1, uint32_t k2,
                                                                        uint32_t k3, int32_t k4, int32_t e)
{
    int32_t a, s;
    __asm__(EDGERNN_HALVES_CORE("a", "xs") EDGERNN_HALVES_SIGN("a", "xs", "s") EDGERNN_HALVES_ROUND("a")
            : [a] "=&r"(a), [s] "=&r"(s)
            : [xs] "r"(xs), [k1] "r"(k1), [k2] "r"(k2), [k3] "r"(k3), [k4] "r"(k4), [e] "r"(e));
    return a;
}
#endif

#if defined(EDGERNN_DOT_SIMD4) && !defined(EDGERNN_XPULP_EMULATE) && EDGERNN_XPULP_INSN
/* GAP8 built by a compiler without Xpulp (edgernn_dot.h): the clamp as Xpulp's p.max and p.min by their
 * encodings (OP major opcode, funct7 0000010, funct3 6 and 4; gap_sdk gvsoc isa_riscv_gen.py), one
 * cycle each, where the compiler's compare-and-branch pays a taken branch in the common, unclamped case
 * (GAP's own gcc emits these for the C below). */
#define EDGERNN_ARCH_CLAMP 1
static inline int32_t edgernn_clamp(int32_t x, int32_t lo, int32_t hi)
{
    __asm__(".insn r 0x33, 6, 2, %0, %0, %1" : "+r"(x) : "r"(lo)); /* p.max */
    __asm__(".insn r 0x33, 4, 2, %0, %0, %1" : "+r"(x) : "r"(hi)); /* p.min */
    return x;
}

/* Leading zero bits of x != 0 as Xpulp's p.fl1 (funct7 0001000, funct3 1, OP major opcode; gap_sdk gvsoc
 * isa_riscv_gen.py and its lib_FL1: the index of the highest bit set), one cycle, where a compiler without Xpulp
 * calls libgcc's __clzsi2 (the LTC's DIV counts twice an element: 848 cycles of a step's core 0). */
#define EDGERNN_ARCH_CLZ 1
static inline int edgernn_clz32_nonzero(uint32_t x)
{
    uint32_t msb;
    __asm__(".insn r 0x33, 1, 0x08, %0, %1, x0" : "=r"(msb) : "r"(x)); /* p.fl1 */
    return 31 - (int)msb;
}
#endif

/* ---- edgernn_conv.c: memory a cluster core reads in a cycle ----
 * The cluster's L1 (its TCDM: 64 KiB at 0x10000000, gap_sdk gap_archi chips/gap8 memory_map.h and properties.h),
 * where a word load takes a core one cycle; from L2 it took some 18 in GVSOC (the one-channel CONV_2D's trace,
 * docs/design/gap8_kernels.md). The stem's kernel copies a frame's rows into L1 scratch where the frame is not; the
 * host's builds of this set copy them always (a test may define EDGERNN_NEAR itself). */
#if (defined(__riscv) || defined(__riscv__)) && !defined(EDGERNN_NEAR)
#define EDGERNN_NEAR(p) (((uintptr_t)(p) >> 16) == 0x1000u)
#endif

/* ---- edgernn_fully_connected.c ---- */

#if defined(EDGERNN_DOT_SIMD4) && !defined(EDGERNN_XPULP_EMULATE) && EDGERNN_XPULP_INSN
/* Xpulp's p.addRN rd, rs1, rs2 by its encoding (funct7 0100000, funct3 6, opcode 0x5b; gap_sdk gvsoc
 * isa_riscv_gen.py): rd = (rd + rs1 + 2^(rs2 - 1)) >> rs2, the same 32-bit add and arithmetic shift as
 * (hi + 2^(e-2)) >> (e-1) in one cycle, rs2 = -shift - 1 >= 1 (edgernn_fully_connected.c's rescale_s8) */
#define EDGERNN_ARCH_ROUND_HI(hi, shift) __asm__(".insn r 0x5b, 6, 0x20, %0, x0, %1" : "+r"(hi) : "r"(~(shift)))
#endif

/* GAP8 built by a compiler without Xpulp (edgernn_dot.h's EDGERNN_XPULP_INSN): the requantization of a
 * block of 8 (or 4) outputs as one stretch of Xpulp, the block's sums in registers from the dot loop to
 * the stores. Per output, with the right shift e = -shift >= 2 of rescale_s8's high-word form:
 *   p.lw m, 4(mp!)         the row's multiplier        p.lw s, 4(sp!)       its shift
 *   mulh h, acc, m         hi (5 cycles in GVSOC's model: a stall of the pipeline, whatever follows)
 *   [mul l, acc, m; sltu l, 0xBFFFFFFF < l; add h, h, l]   EDGERNN_ROUND_TWICE_UP: the carry of lo + 2^30
 *   not s, s               -shift - 1 = e - 1          p.min t, t, s        the least e - 1 of the block
 *   p.addRN h, x0, s       (h + 2^(e-2)) >> (e-1), the rounding of rescale_s8 in one instruction
 *   add h, h, zp; p.max h, h, act_min; p.min h, h, act_max; p.sb h, 1(y!)
 * 10 instructions and the mulh's 4 stalls (13 and 4 for TWICE_UP), no branch. A row with e < 2 (shift >= -1)
 * is not that form: t ends below 1 and the caller writes the block again with rescale_s8 (the sums are
 * inputs of the asm, left as they were). p.lw's result is used two instructions later, so no load stalls.
 * The encodings: p.lw post-increment `.insn i 0x0b, 2`, p.sb post-increment `.insn s 0x2b, 0`, p.addRN
 * (register shift) `.insn r 0x5b, 6, 0x20`, p.max/p.min `.insn r 0x33, 6/4, 2` (gap_sdk gvsoc
 * isa_riscv_gen.py; GVSOC's lib_ADD_NR_R: a 32-bit add, then the arithmetic shift). tests/targets/
 * test_gap8_requant.py holds the bytes against Python's reference over a table of edge cases in GVSOC. */
#if defined(EDGERNN_DOT_SIMD4) && !defined(EDGERNN_XPULP_EMULATE) && EDGERNN_XPULP_INSN && \
    !defined(EDGERNN_FC_REQUANT_C)
#define EDGERNN_FC_REQUANT_ASM 1
#define FC_RQ_LOADS(a)                                                                              \
    ".insn i 0x0b, 2, %[m], 4(%[mp])\n\t"                                                            \
    ".insn i 0x0b, 2, %[s], 4(%[sp])\n\t"                                                            \
    "mulh %[h], %[" a "], %[m]\n\t"
/* TWICE_UP: mul after both loads (the multiplier's used 2 instructions on), its low word used 2 on */
#define FC_RQ_CARRY(a)                                                                              \
    ".insn i 0x0b, 2, %[m], 4(%[mp])\n\t"                                                            \
    ".insn i 0x0b, 2, %[s], 4(%[sp])\n\t"                                                            \
    "mul %[l], %[" a "], %[m]\n\t"                                                                   \
    "mulh %[h], %[" a "], %[m]\n\t"                                                                  \
    "sltu %[l], %[c], %[l]\n\t"                                                                      \
    "add %[h], %[h], %[l]\n\t"
#define FC_RQ_TAIL                                                                                  \
    "not %[s], %[s]\n\t"                                                                             \
    ".insn r 0x33, 4, 2, %[t], %[t], %[s]\n\t"                                                       \
    ".insn r 0x5b, 6, 0x20, %[h], x0, %[s]\n\t"                                                      \
    "add %[h], %[h], %[zp]\n\t"                                                                      \
    ".insn r 0x33, 6, 2, %[h], %[h], %[lo]\n\t"                                                      \
    ".insn r 0x33, 4, 2, %[h], %[h], %[hi]\n\t"                                                      \
    ".insn s 0x2b, 0, %[h], 1(%[y])\n\t"
#define FC_RQ_ONCE(a) FC_RQ_LOADS(a) FC_RQ_TAIL
#define FC_RQ_TWICE(a) FC_RQ_CARRY(a) FC_RQ_TAIL
#define FC_RQ_IN8                                                                                    \
    [a0] "r"(acc[0]), [a1] "r"(acc[1]), [a2] "r"(acc[2]), [a3] "r"(acc[3]), [a4] "r"(acc[4]),          \
        [a5] "r"(acc[5]), [a6] "r"(acc[6]), [a7] "r"(acc[7]), [zp] "r"(output_offset), [lo] "r"(act_min),  \
        [hi] "r"(act_max)
#define FC_RQ_IN4                                                                                    \
    [a0] "r"(acc[0]), [a1] "r"(acc[1]), [a2] "r"(acc[2]), [a3] "r"(acc[3]), [zp] "r"(output_offset),    \
        [lo] "r"(act_min), [hi] "r"(act_max)
#define FC_RQ_OUT                                                                                    \
    [mp] "+r"(mp), [sp] "+r"(sp), [y] "+r"(yp), [t] "+r"(t_), [m] "=&r"(m_), [s] "=&r"(s_), [h] "=&r"(h_)
/* ONCE: the sums, the zero point and the clamp in registers; TWICE_UP: the low word and its threshold too */
#define FC_RQ_BLOCK_ONCE(BODY, IN, OUT, EACH)                                                       \
    do {                                                                                            \
        const int32_t *mp = multiplier + o, *sp = shift + o;                                        \
        int8_t *yp = y + o;                                                                         \
        int32_t m_, s_, h_, t_ = 31;                                                                \
        __asm__ volatile(BODY : FC_RQ_OUT : IN : "memory");                                         \
        if (__builtin_expect(t_ < 1, 0)) {                                                          \
            EACH(OUT);                                                                              \
        }                                                                                           \
    } while (0)
#define FC_RQ_BLOCK_TWICE(BODY, IN, OUT, EACH)                                                      \
    do {                                                                                            \
        const int32_t *mp = multiplier + o, *sp = shift + o;                                        \
        int8_t *yp = y + o;                                                                         \
        int32_t m_, s_, h_, l_, t_ = 31;                                                            \
        __asm__ volatile(BODY : FC_RQ_OUT, [l] "=&r"(l_) : IN, [c] "r"(carry_above) : "memory");    \
        if (__builtin_expect(t_ < 1, 0)) {                                                          \
            EACH(OUT);                                                                              \
        }                                                                                           \
    } while (0)
#define FC_RQ8(RQ) RQ("a0") RQ("a1") RQ("a2") RQ("a3") RQ("a4") RQ("a5") RQ("a6") RQ("a7")
#define FC_RQ4(RQ) RQ("a0") RQ("a1") RQ("a2") RQ("a3")
#define FC_ASM8_ONCE(OUT) FC_RQ_BLOCK_ONCE(FC_RQ8(FC_RQ_ONCE), FC_RQ_IN8, OUT, FC_EACH8)
#define FC_ASM4_ONCE(OUT) FC_RQ_BLOCK_ONCE(FC_RQ4(FC_RQ_ONCE), FC_RQ_IN4, OUT, FC_EACH4)
#define FC_ASM8_TWICE_UP(OUT) FC_RQ_BLOCK_TWICE(FC_RQ8(FC_RQ_TWICE), FC_RQ_IN8, OUT, FC_EACH8)
#define FC_ASM4_TWICE_UP(OUT) FC_RQ_BLOCK_TWICE(FC_RQ4(FC_RQ_TWICE), FC_RQ_IN4, OUT, FC_EACH4)
#endif

/* ---- edgernn_conv.c: CONV_PAIRS' quad loop (CONV_QUAD_LOOP) ---- */

/* GAP8 itself (not the host's emulation): the groups as a hardware loop of post-increment loads (Xpulpv2,
 * by their encodings so that any GNU assembler takes them; gap_sdk gvsoc isa_riscv_gen.py):
 *   lp.setup  L, rs1, uimmL  .insn i 0x7b, 4, x<L>, rs1, uimmL   loop L, count rs1, its last instruction
 *                                                                uimmL halfwords after lp.setup
 *   p.lw rd, imm(rs1!)       .insn i 0x0b, 2, rd, rs1, imm       load, then rs1 += imm
 *   pv.sdotsp.b rd, rs1, rs2 .insn r 0x57, 1, 0x5c, rd, rs1, rs2  rd += 4 int8 products
 * The body is 14 uncompressed instructions (.option norvc), the last a pv.sdotsp.b, loop 0 and no loop
 * around it: the rules silicon keeps and GVSOC does not check (tests/targets' hardware-loop test reads them
 * from the ELF). The loop runs only with a count of 1 or more (a count of 0 would run it once): the branch
 * before lp.setup skips it on 0, where the hardware-loop check sees the guard next to the loop. The last
 * weight load steps to the next group: 4 * R - 12 bytes. No load is used by the instruction after it. */
#if defined(EDGERNN_DOT_SIMD4) && !defined(EDGERNN_XPULP_EMULATE) && (defined(__riscv) || defined(__riscv__))
#ifndef EDGERNN_CONV_HWLOOP
#define EDGERNN_CONV_HWLOOP 1
#endif
#endif

#if defined(EDGERNN_CONV_HWLOOP) && EDGERNN_CONV_HWLOOP
#define CONV_QUAD_LOOP(WSTEP)                                                                       \
    __asm__ volatile(                                                                               \
        ".option push\n\t"                                                                          \
        ".option norvc\n\t"                                                                         \
        "beqz %[n], 1f\n\t"                                                                         \
        ".insn i 0x7b, 4, x0, %[n], 28\n\t"                                                         \
        ".insn i 0x0b, 2, %[xa], %[px0], 4\n\t"                                                     \
        ".insn i 0x0b, 2, %[xb], %[px1], 4\n\t"                                                     \
        ".insn i 0x0b, 2, %[w0], %[pw], 4\n\t"                                                      \
        ".insn i 0x0b, 2, %[w1], %[pw], 4\n\t"                                                      \
        ".insn i 0x0b, 2, %[w2], %[pw], 4\n\t"                                                      \
        ".insn i 0x0b, 2, %[w3], %[pw], " #WSTEP "\n\t"                                             \
        ".insn r 0x57, 1, 0x5c, %[a0], %[xa], %[w0]\n\t"                                            \
        ".insn r 0x57, 1, 0x5c, %[a1], %[xa], %[w1]\n\t"                                            \
        ".insn r 0x57, 1, 0x5c, %[a2], %[xa], %[w2]\n\t"                                            \
        ".insn r 0x57, 1, 0x5c, %[a3], %[xa], %[w3]\n\t"                                            \
        ".insn r 0x57, 1, 0x5c, %[b0], %[xb], %[w0]\n\t"                                            \
        ".insn r 0x57, 1, 0x5c, %[b1], %[xb], %[w1]\n\t"                                            \
        ".insn r 0x57, 1, 0x5c, %[b2], %[xb], %[w2]\n\t"                                            \
        ".insn r 0x57, 1, 0x5c, %[b3], %[xb], %[w3]\n\t"                                            \
        "1:\n\t"                                                                                    \
        ".option pop"                                                                               \
        : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [b0] "+r"(b0), [b1] "+r"(b1),  \
          [b2] "+r"(b2), [b3] "+r"(b3), [px0] "+r"(p0), [px1] "+r"(p1), [pw] "+r"(pw), [xa] "=&r"(xa),  \
          [xb] "=&r"(xb), [w0] "=&r"(w0), [w1] "=&r"(w1), [w2] "=&r"(w2), [w3] "=&r"(w3)              \
        : [n] "r"(groups)                                                                           \
        : "memory")
#endif

/* ---- edgernn_lstm.c ---- */

/* GAP8 (its cluster and FC, any variant of the build): a divider of many cycles, and a 4 KiB instruction
 * cache on the cluster (GVSOC: 64 sets of 4 ways of 16 bytes) that the code of one unit's step must fit,
 * or the dot loop's lines are fetched again for every unit: the LSTM keeps one copy of its code. */
#if defined(EDGERNN_DOT_SIMD4) || defined(__GAP8__)
#define EDGERNN_ARCH_SMALL_ICACHE 1
#endif

#endif /* EDGERNN_ARCH_H */
