/* Int8 dot products of FULLY_CONNECTED (edgernn_fully_connected.c) and of the fused LSTM's gates
 * (edgernn_lstm.c): four weight rows at a time share each load of the input (the blocking of
 * CMSIS-NN's arm_nn_vec_mat_mult_t_s8). The sums are exact int32 arithmetic, so the order of the
 * products does not change the result.
 *
 * The dot products take GAP8's Xpulp SIMD instruction pv.sdotsp.b (four int8 products summed
 * into int32) through the PULP builtin __builtin_pulp_sdotsp4 when the GAP SDK compiles the kernels:
 * the SDK's chip configuration, force-included in its GAP8 builds, defines ARCHI_CORE_HAS_PULPV2
 * (gap_sdk: pulp-os/include/gap_rev1_config.h), and the SDK's own wrappers select the builtins on
 * __pulp__ (gap_sdk: tools/autotiler_v3/Emulation/GapBuiltins.h, `!defined(__EMUL__) ||
 * defined(__pulp__)`), with __GAP8__ for GAP8-only ones. -DEDGERNN_XPULP=1 forces the path and
 * -DEDGERNN_XPULP=0 turns it off; -DEDGERNN_XPULP_EMULATE builds it anywhere on the C emulation
 * of edgernn_xpulp_emul.h. Everywhere else the portable C below is compiled.
 *
 * A RISC-V compiler without the PULP builtins (Debian's riscv64-unknown-elf-gcc building GAP8
 * firmware through edgernn's wrapper, templates/targets/gap8/sdk/) gets the same instruction by its encoding,
 * `.insn r 0x57, 1, 0x5c, rd, rs1, rs2` (pv.sdotsp.b: OP-V major opcode, funct3 1, funct7 0101110x;
 * gap_sdk gvsoc isa_riscv_gen.py), rd being the accumulator it adds to. The builtin is used wherever
 * the compiler has it: GAP's gcc 7 (which predates __has_builtin) or a macro standing in for it.
 * -DEDGERNN_XPULP_INSN=1 or 0 forces the choice. */
#ifndef EDGERNN_DOT_H
#define EDGERNN_DOT_H

#include <stdint.h>
#include <string.h>

#if defined(EDGERNN_XPULP_EMULATE)
#include "edgernn_xpulp_emul.h"
#define EDGERNN_DOT_XPULP 1
#elif defined(EDGERNN_XPULP)
#if EDGERNN_XPULP
#define EDGERNN_DOT_XPULP 1
#endif
#elif (defined(__riscv) || defined(__riscv__)) && \
    (defined(ARCHI_CORE_HAS_PULPV2) || defined(__pulp__) || defined(__GAP8__) || defined(__gap8__))
#define EDGERNN_DOT_XPULP 1
#endif

#if defined(EDGERNN_DOT_XPULP) && !defined(EDGERNN_XPULP_EMULATE) && !defined(EDGERNN_XPULP_INSN)
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

#if defined(EDGERNN_DOT_XPULP) && !defined(EDGERNN_XPULP_EMULATE)
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
#else
typedef signed char edgernn_v4s __attribute__((vector_size(4)));
#define EDGERNN_SDOTSP4(a, b, acc) __builtin_pulp_sdotsp4((a), (b), (acc))
#endif
#endif

/* GAP8 builds with the hand-written Xpulp kernels (edgernn_dot_xpulp.S, assembled where the GAP8
 * Makefile sets EDGERNN_DOT_ASM to 1 or 2): a block's whole groups of 4 inputs go through them when x and
 * w are 4-byte aligned and there are at least EDGERNN_DOT_ASM_MIN_INPUTS inputs, and the last n mod 4
 * inputs through the C below. EDGERNN_DOT_ASM=1 takes the form that suits the compiler (below), 2 the
 * .S functions whatever the compiler. They add the same exact int32
 * products as the C. */
#if defined(EDGERNN_DOT_XPULP) && !defined(EDGERNN_XPULP_EMULATE) && defined(EDGERNN_DOT_ASM) && EDGERNN_DOT_ASM
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

/* Where the core has a vector unit, a block of 16 inputs is a loop of fixed length, which gcc and
 * clang vectorize at -O2; on a scalar core (or with -DEDGERNN_FC_SCALAR) it is 8 inputs written
 * out, which saves the loop's overhead. */
#if (defined(__SSE2__) || defined(__ARM_NEON) || defined(__ARM_NEON__)) && !defined(EDGERNN_FC_SCALAR)
#define EDGERNN_DOT_VECTOR_BLOCK 1
#endif

/* x86-64 (SSE2, always there) and not forced scalar: the int8 blocks take SSE2's pmaddwd, two products
 * of int16 summed into an int32 lane, on the blocked layout: a group's 4 inputs repeated twice against
 * 2 rows' 8 weights. gcc does not vectorize the grouped layout by itself. */
#if defined(__SSE2__) && !defined(EDGERNN_FC_SCALAR) && !defined(EDGERNN_DOT_XPULP)
#define EDGERNN_DOT_SSE2 1
#include <emmintrin.h>

/* x[0..3] as int16, twice: x0 x1 x2 x3 x0 x1 x2 x3 */
static inline __m128i edgernn_sse2_x4(const int8_t *x)
{
    int32_t v;
    __m128i b;
    memcpy(&v, x, sizeof v);
    b = _mm_cvtsi32_si128(v);
    b = _mm_srai_epi16(_mm_unpacklo_epi8(b, b), 8);
    return _mm_unpacklo_epi64(b, b);
}

/* 4 rows' group (16 bytes): s01 lanes += rows 0, 0, 1, 1 (inputs 0-1, 2-3), s23 the same for rows 2, 3 */
static inline void edgernn_sse2_rows4(const int8_t *w, __m128i xv, __m128i *s01, __m128i *s23)
{
    const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)w);
    *s01 = _mm_add_epi32(*s01, _mm_madd_epi16(_mm_srai_epi16(_mm_unpacklo_epi8(v, v), 8), xv));
    *s23 = _mm_add_epi32(*s23, _mm_madd_epi16(_mm_srai_epi16(_mm_unpackhi_epi8(v, v), 8), xv));
}

/* the two rows' sums of s: lanes 0 + 1 and 2 + 3 */
static inline void edgernn_sse2_pairs(__m128i s, int32_t *r0, int32_t *r1)
{
    int32_t lane[4];
    _mm_storeu_si128((__m128i *)(void *)lane, s);
    *r0 += lane[0] + lane[1];
    *r1 += lane[2] + lane[3];
}
#endif

/* Inlined into each caller, so that the four sums live in registers (except when optimizing for size). */
#if defined(__GNUC__) && !defined(__OPTIMIZE_SIZE__)
#define EDGERNN_DOT_INLINE inline __attribute__((always_inline))
#else
#define EDGERNN_DOT_INLINE inline
#endif

#if defined(EDGERNN_DOT_XPULP)
/* Four bytes as one word: memcpy is safe at any alignment, and where the pointer is known to be
 * 4-byte aligned the compiler turns it into a single word load. */
static inline edgernn_v4s edgernn_load4(const int8_t *p)
{
    edgernn_v4s v;
    memcpy(&v, p, sizeof v);
    return v;
}

#if defined(__GNUC__)
#define EDGERNN_ALIGNED4(p) ((const int8_t *)__builtin_assume_aligned((p), 4))
#else
#define EDGERNN_ALIGNED4(p) (p)
#endif

#endif

/* ---- The blocked weights layout ----
 *
 * The int8 weights of FULLY_CONNECTED and of the fused LSTM are stored by the lowering
 * (edgernn/backend/lowering/blocking.py) in blocks of 8 rows, then one block of 4 if 4 or more rows
 * are left, then the last rows one by one, row-major. Inside a block of R rows and n inputs the inputs go
 * by groups of 4 (the last group holds n mod 4): group k holds w[r][4k..4k+3] for r = 0..R-1, one row's 4
 * bytes after the other. So one pointer walks the block front to back, each input byte is loaded once
 * for R rows, and Xpulp's pv.sdotsp.b finds a row's 4 weights in one word. A block of R rows is R * n
 * bytes, as in row-major order, so rows [r0, r1) with r0 a multiple of 8 start at w + r0 * n either way. */
#define EDGERNN_DOT_MACR(j, g)                                                                      \
    do {                                                                                            \
        const int32_t xj = x[j];                                                                    \
        EDGERNN_DOT_ROWS(xj, j, g)                                                                  \
        EDGERNN_DOT_FENCE(w);                                                                       \
    } while (0)

/* gcc's scheduler would hoist every weight load of a group of 4 inputs above the multiplies (32 loads
 * for 8 rows) and spill them to the stack; a compiler barrier after each input keeps the next input's
 * loads after it, so one input's 8 loads are live at a time. It emits nothing; the sums are locals
 * whose address is never taken, so they stay in registers across it. */
#if defined(__GNUC__)
#define EDGERNN_DOT_FENCE(p) __asm__ volatile("" ::: "memory")
#else
#define EDGERNN_DOT_FENCE(p) ((void)0)
#endif

#define EDGERNN_DOT_ROW(r, xj, j, g) a##r += (xj) * w[(r) * (g) + (j)];

#if defined(EDGERNN_DOT_XPULP)
/* One pv.sdotsp.b per row and group of 4 inputs; word loads declared aligned when x and w are. */
#define EDGERNN_DOT_XPULP_GROUPS(R, XP, WP)                                                         \
    for (; x < xe; x += 4, w += 4 * (R)) {                                                          \
        const edgernn_v4s xv = edgernn_load4(XP(x));                                              \
        EDGERNN_DOT_XPULP_ROWS(xv, WP)                                                              \
    }
#define EDGERNN_DOT_GROUPS(R)                                                                       \
    if ((((uintptr_t)x | (uintptr_t)w) & 3u) == 0) {                                                \
        EDGERNN_DOT_XPULP_GROUPS(R, EDGERNN_ALIGNED4, EDGERNN_ALIGNED4)                             \
    } else {                                                                                        \
        EDGERNN_DOT_XPULP_GROUPS(R, , )                                                             \
    }
#elif defined(__OPTIMIZE_SIZE__)
/* Compact: a loop over the group's 4 inputs. */
#define EDGERNN_DOT_GROUPS(R)                                                                       \
    for (; x < xe; x += 4, w += 4 * (R)) {                                                          \
        int j;                                                                                      \
        for (j = 0; j < 4; ++j) {                                                                   \
            EDGERNN_DOT_MACR(j, 4);                                                                 \
        }                                                                                           \
    }
#else
/* A group written out: 4 input loads, then per weight byte one load, one multiply, one add. */
#define EDGERNN_DOT_GROUPS(R)                                                                       \
    for (; x < xe; x += 4, w += 4 * (R)) {                                                          \
        EDGERNN_DOT_MACR(0, 4);                                                                     \
        EDGERNN_DOT_MACR(1, 4);                                                                     \
        EDGERNN_DOT_MACR(2, 4);                                                                     \
        EDGERNN_DOT_MACR(3, 4);                                                                     \
    }
#endif

/* The last group, of g = n mod 4 inputs: a case per g, so that the offsets are constants (a loop when
 * optimizing for size). */
#if defined(__OPTIMIZE_SIZE__)
#define EDGERNN_DOT_LAST_GROUP()                                                                    \
    do {                                                                                            \
        const int g = n & 3;                                                                        \
        int j;                                                                                      \
        for (j = 0; j < g; ++j) {                                                                   \
            EDGERNN_DOT_MACR(j, g);                                                                 \
        }                                                                                           \
    } while (0)
#else
#define EDGERNN_DOT_LAST_GROUP()                                                                    \
    do {                                                                                            \
        switch (n & 3) {                                                                            \
        case 3:                                                                                     \
            EDGERNN_DOT_MACR(0, 3);                                                                 \
            EDGERNN_DOT_MACR(1, 3);                                                                 \
            EDGERNN_DOT_MACR(2, 3);                                                                 \
            break;                                                                                  \
        case 2:                                                                                     \
            EDGERNN_DOT_MACR(0, 2);                                                                 \
            EDGERNN_DOT_MACR(1, 2);                                                                 \
            break;                                                                                  \
        case 1:                                                                                     \
            EDGERNN_DOT_MACR(0, 1);                                                                 \
            break;                                                                                  \
        default:                                                                                    \
            break;                                                                                  \
        }                                                                                           \
    } while (0)
#endif

/* acc[r] += sum over i < n of x[i] * w_r[i] for the 8 rows of a block (the layout above), in C. */
static EDGERNN_DOT_INLINE void edgernn_dot8_s8_c(const int8_t *x, const int8_t *w, int n, int32_t acc[8])
{
    const int8_t *xe = x + (n & ~3);
    int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    int32_t a4 = acc[4], a5 = acc[5], a6 = acc[6], a7 = acc[7];
#define EDGERNN_DOT_ROWS(xj, j, g)                                                                  \
    EDGERNN_DOT_ROW(0, xj, j, g) EDGERNN_DOT_ROW(1, xj, j, g) EDGERNN_DOT_ROW(2, xj, j, g)           \
    EDGERNN_DOT_ROW(3, xj, j, g) EDGERNN_DOT_ROW(4, xj, j, g) EDGERNN_DOT_ROW(5, xj, j, g)           \
    EDGERNN_DOT_ROW(6, xj, j, g) EDGERNN_DOT_ROW(7, xj, j, g)
#if defined(EDGERNN_DOT_XPULP)
#define EDGERNN_DOT_XPULP_ROWS(xv, WP)                                                              \
    a0 = EDGERNN_SDOTSP4(xv, edgernn_load4(WP(w)), a0);                                             \
    a1 = EDGERNN_SDOTSP4(xv, edgernn_load4(WP(w + 4)), a1);                                         \
    a2 = EDGERNN_SDOTSP4(xv, edgernn_load4(WP(w + 8)), a2);                                         \
    a3 = EDGERNN_SDOTSP4(xv, edgernn_load4(WP(w + 12)), a3);                                        \
    a4 = EDGERNN_SDOTSP4(xv, edgernn_load4(WP(w + 16)), a4);                                        \
    a5 = EDGERNN_SDOTSP4(xv, edgernn_load4(WP(w + 20)), a5);                                        \
    a6 = EDGERNN_SDOTSP4(xv, edgernn_load4(WP(w + 24)), a6);                                        \
    a7 = EDGERNN_SDOTSP4(xv, edgernn_load4(WP(w + 28)), a7);
#endif
#if defined(EDGERNN_DOT_SSE2)
    {
        __m128i s0 = _mm_setzero_si128(), s1 = s0, s2 = s0, s3 = s0;
        for (; x < xe; x += 4, w += 32) {
            const __m128i xv = edgernn_sse2_x4(x);
            edgernn_sse2_rows4(w, xv, &s0, &s1);
            edgernn_sse2_rows4(w + 16, xv, &s2, &s3);
        }
        edgernn_sse2_pairs(s0, &a0, &a1);
        edgernn_sse2_pairs(s1, &a2, &a3);
        edgernn_sse2_pairs(s2, &a4, &a5);
        edgernn_sse2_pairs(s3, &a6, &a7);
    }
#else
    EDGERNN_DOT_GROUPS(8)
#endif
    EDGERNN_DOT_LAST_GROUP();
#undef EDGERNN_DOT_ROWS
#undef EDGERNN_DOT_XPULP_ROWS
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
    acc[4] = a4;
    acc[5] = a5;
    acc[6] = a6;
    acc[7] = a7;
}

/* The same for a block of 4 rows, in C. */
static EDGERNN_DOT_INLINE void edgernn_dot4_s8_c(const int8_t *x, const int8_t *w, int n, int32_t acc[4])
{
    const int8_t *xe = x + (n & ~3);
    int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
#define EDGERNN_DOT_ROWS(xj, j, g)                                                                  \
    EDGERNN_DOT_ROW(0, xj, j, g) EDGERNN_DOT_ROW(1, xj, j, g) EDGERNN_DOT_ROW(2, xj, j, g)           \
    EDGERNN_DOT_ROW(3, xj, j, g)
#if defined(EDGERNN_DOT_XPULP)
#define EDGERNN_DOT_XPULP_ROWS(xv, WP)                                                              \
    a0 = EDGERNN_SDOTSP4(xv, edgernn_load4(WP(w)), a0);                                             \
    a1 = EDGERNN_SDOTSP4(xv, edgernn_load4(WP(w + 4)), a1);                                         \
    a2 = EDGERNN_SDOTSP4(xv, edgernn_load4(WP(w + 8)), a2);                                         \
    a3 = EDGERNN_SDOTSP4(xv, edgernn_load4(WP(w + 12)), a3);
#endif
#if defined(EDGERNN_DOT_SSE2)
    {
        __m128i s0 = _mm_setzero_si128(), s1 = s0;
        for (; x < xe; x += 4, w += 16) {
            edgernn_sse2_rows4(w, edgernn_sse2_x4(x), &s0, &s1);
        }
        edgernn_sse2_pairs(s0, &a0, &a1);
        edgernn_sse2_pairs(s1, &a2, &a3);
    }
#else
    EDGERNN_DOT_GROUPS(4)
#endif
    EDGERNN_DOT_LAST_GROUP();
#undef EDGERNN_DOT_ROWS
#undef EDGERNN_DOT_XPULP_ROWS
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}

/* edgernn_dot8_s8 and edgernn_dot4_s8, what the kernels call: on GAP8 with the assembly, the whole groups
 * of 4 inputs there when x and w are 4-byte aligned and the last n mod 4 inputs in C (the layout's last
 * group follows the whole ones); the C alone everywhere else. */
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
#elif defined(EDGERNN_DOT_USE_ASM)
#define EDGERNN_DOT8_ASM edgernn_dot8_s8_xpulp
#define EDGERNN_DOT4_ASM edgernn_dot4_s8_xpulp
#endif

static EDGERNN_DOT_INLINE void edgernn_dot8_s8(const int8_t *x, const int8_t *w, int n, int32_t acc[8])
{
#if defined(EDGERNN_DOT_USE_ASM)
    if (n >= EDGERNN_DOT_ASM_MIN_INPUTS && (((uintptr_t)x | (uintptr_t)w) & 3u) == 0) {
        EDGERNN_DOT8_ASM(x, w, n >> 2, acc);
        x += n & ~3;
        w += 8 * (n & ~3);
        n &= 3;
    }
#endif
    edgernn_dot8_s8_c(x, w, n, acc);
}

static EDGERNN_DOT_INLINE void edgernn_dot4_s8(const int8_t *x, const int8_t *w, int n, int32_t acc[4])
{
#if defined(EDGERNN_DOT_USE_ASM)
    if (n >= EDGERNN_DOT_ASM_MIN_INPUTS && (((uintptr_t)x | (uintptr_t)w) & 3u) == 0) {
        EDGERNN_DOT4_ASM(x, w, n >> 2, acc);
        x += n & ~3;
        w += 4 * (n & ~3);
        n &= 3;
    }
#endif
    edgernn_dot4_s8_c(x, w, n, acc);
}

/* acc + sum over i < n of x[i] * w[i]: one row, for the rows past the last multiple of 4. */
static EDGERNN_DOT_INLINE int32_t edgernn_dot1_s8(const int8_t *x, const int8_t *w, int n, int32_t acc)
{
    int i = 0;
#if defined(EDGERNN_DOT_XPULP)
    const int n4 = n & ~3;
    for (; i < n4; i += 4) {
        acc = EDGERNN_SDOTSP4(edgernn_load4(x + i), edgernn_load4(w + i), acc);
    }
#elif !defined(__OPTIMIZE_SIZE__)
    /* 4 products per loop test (a Dense(1) head is one such row) */
    for (; i + 4 <= n; i += 4) {
        acc += (int32_t)x[i] * (int32_t)w[i] + (int32_t)x[i + 1] * (int32_t)w[i + 1] +
               (int32_t)x[i + 2] * (int32_t)w[i + 2] + (int32_t)x[i + 3] * (int32_t)w[i + 3];
    }
#endif
    for (; i < n; ++i) {
        acc += (int32_t)x[i] * (int32_t)w[i];
    }
    return acc;
}

#endif /* EDGERNN_DOT_H */
