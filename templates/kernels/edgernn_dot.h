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
 * firmware through edgernn's wrapper, templates/gap_sdk/) gets the same instruction by its encoding,
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

/* Where the core has a vector unit, a block of 16 inputs is a loop of fixed length, which gcc and
 * clang vectorize at -O2; on a scalar core (or with -DEDGERNN_FC_SCALAR) it is 8 inputs written
 * out, which saves the loop's overhead. */
#if (defined(__SSE2__) || defined(__ARM_NEON) || defined(__ARM_NEON__)) && !defined(EDGERNN_FC_SCALAR)
#define EDGERNN_DOT_VECTOR_BLOCK 1
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

/* Four rows, four inputs per pv.sdotsp.b. */
#define EDGERNN_DOT_XPULP_ROWS4(X, W0, W1, W2, W3)                                                  \
    for (i = 0; i < n4; i += 4) {                                                                 \
        const edgernn_v4s xv = edgernn_load4((X) + i);                                            \
        a0 = EDGERNN_SDOTSP4(xv, edgernn_load4((W0) + i), a0);                                    \
        a1 = EDGERNN_SDOTSP4(xv, edgernn_load4((W1) + i), a1);                                    \
        a2 = EDGERNN_SDOTSP4(xv, edgernn_load4((W2) + i), a2);                                    \
        a3 = EDGERNN_SDOTSP4(xv, edgernn_load4((W3) + i), a3);                                    \
    }
#endif

#define EDGERNN_DOT_MAC4(k)                                                                         \
    do {                                                                                            \
        const int32_t xk = x[k];                                                                    \
        a0 += xk * w0[k];                                                                           \
        a1 += xk * w1[k];                                                                           \
        a2 += xk * w2[k];                                                                           \
        a3 += xk * w3[k];                                                                           \
    } while (0)

/* acc[k] += sum over i < n of x[i] * w[k * n + i], for the four rows k = 0..3 of w (rows of n).
 * Xpulp: four inputs per instruction; when x and w start on a word and n is a multiple of 4, every
 * row does and the loads are declared aligned; inputs past the last multiple of 4 in plain C.
 * Portable: blocks of 16 (vector unit) or 8 (scalar core) inputs, then two at a time, then the last. */
static EDGERNN_DOT_INLINE void edgernn_dot4_s8(const int8_t *x, const int8_t *w, int n, int32_t acc[4])
{
    const int8_t *w0 = w;
    const int8_t *w1 = w0 + n;
    const int8_t *w2 = w1 + n;
    const int8_t *w3 = w2 + n;
    int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    int i;
#if defined(EDGERNN_DOT_XPULP)
    const int n4 = n & ~3;
    if ((((uintptr_t)x | (uintptr_t)w0 | (uintptr_t)n) & 3u) == 0) {
        EDGERNN_DOT_XPULP_ROWS4(EDGERNN_ALIGNED4(x), EDGERNN_ALIGNED4(w0), EDGERNN_ALIGNED4(w1),
                                EDGERNN_ALIGNED4(w2), EDGERNN_ALIGNED4(w3))
    } else {
        EDGERNN_DOT_XPULP_ROWS4(x, w0, w1, w2, w3)
    }
    for (i = n4; i < n; ++i) {
        EDGERNN_DOT_MAC4(i);
    }
#else
#if defined(EDGERNN_DOT_VECTOR_BLOCK)
    for (i = 0; i + 16 <= n; i += 16) {
        int k;
        for (k = 0; k < 16; ++k) {
            EDGERNN_DOT_MAC4(i + k);
        }
    }
#else
    for (i = 0; i + 4 <= n; i += 4) {
        EDGERNN_DOT_MAC4(i);
        EDGERNN_DOT_MAC4(i + 1);
        EDGERNN_DOT_MAC4(i + 2);
        EDGERNN_DOT_MAC4(i + 3);
    }
#endif
    for (; i + 2 <= n; i += 2) {
        const int32_t x0 = x[i], x1 = x[i + 1];
        a0 += x0 * w0[i] + x1 * w0[i + 1];
        a1 += x0 * w1[i] + x1 * w1[i + 1];
        a2 += x0 * w2[i] + x1 * w2[i + 1];
        a3 += x0 * w3[i] + x1 * w3[i + 1];
    }
    if (i < n) {
        EDGERNN_DOT_MAC4(i);
    }
#endif
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
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
#endif
    for (; i < n; ++i) {
        acc += (int32_t)x[i] * (int32_t)w[i];
    }
    return acc;
}

#endif /* EDGERNN_DOT_H */
