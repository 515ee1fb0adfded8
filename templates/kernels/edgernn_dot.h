/* Int8 dot products of FULLY_CONNECTED (edgernn_fully_connected.c) and of the fused LSTM's gates
 * (edgernn_lstm.c): four weight rows at a time share each load of the input (the blocking of
 * CMSIS-NN's arm_nn_vec_mat_mult_t_s8). The sums are exact int32 arithmetic, so the order of the
 * products does not change the result.
 *
 * A kernel set with a 4-lane int8 dot product (edgernn_arch.h's EDGERNN_DOT_SIMD4 and EDGERNN_SDOTSP4:
 * GAP8's pv.sdotsp.b in templates/targets/gap8/kernels/) takes a group of 4 inputs of a row in one
 * instruction, and one with whole-block routines (EDGERNN_DOT_USE_ASM) takes a block's whole groups there;
 * the reference set has neither, and the portable C below (SSE2's pmaddwd on x86-64) is compiled. */
#ifndef EDGERNN_DOT_H
#define EDGERNN_DOT_H

#include <stdint.h>
#include <string.h>

/* Inlined into each caller, so that the four sums live in registers (except when optimizing for size). */
#if defined(__GNUC__) && !defined(__OPTIMIZE_SIZE__)
#define EDGERNN_DOT_INLINE inline __attribute__((always_inline))
#else
#define EDGERNN_DOT_INLINE inline
#endif

/* The kernel set's own instructions (templates/kernels/edgernn_arch.h in the reference set: none). */
#include "edgernn_arch.h"

/* Where the core has a vector unit, a block of 16 inputs is a loop of fixed length, which gcc and
 * clang vectorize at -O2; on a scalar core (or with -DEDGERNN_FC_SCALAR) it is 8 inputs written
 * out, which saves the loop's overhead. */
#if (defined(__SSE2__) || defined(__ARM_NEON) || defined(__ARM_NEON__)) && !defined(EDGERNN_FC_SCALAR)
#define EDGERNN_DOT_VECTOR_BLOCK 1
#endif

/* x86-64 (SSE2, always there) and not forced scalar: the int8 blocks take SSE2's pmaddwd, two products
 * of int16 summed into an int32 lane, on the blocked layout: a group's 4 inputs repeated twice against
 * 2 rows' 8 weights. gcc does not vectorize the grouped layout by itself. */
#if defined(__SSE2__) && !defined(EDGERNN_FC_SCALAR) && !defined(EDGERNN_DOT_SIMD4)
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


#if defined(EDGERNN_DOT_SIMD4)
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

#if defined(EDGERNN_DOT_SIMD4)
/* One pv.sdotsp.b per row and group of 4 inputs; word loads declared aligned when x and w are. */
#define EDGERNN_DOT_SIMD4_GROUPS(R, XP, WP)                                                         \
    for (; x < xe; x += 4, w += 4 * (R)) {                                                          \
        const edgernn_v4s xv = edgernn_load4(XP(x));                                              \
        EDGERNN_DOT_SIMD4_ROWS(xv, WP)                                                              \
    }
#define EDGERNN_DOT_GROUPS(R)                                                                       \
    if ((((uintptr_t)x | (uintptr_t)w) & 3u) == 0) {                                                \
        EDGERNN_DOT_SIMD4_GROUPS(R, EDGERNN_ALIGNED4, EDGERNN_ALIGNED4)                             \
    } else {                                                                                        \
        EDGERNN_DOT_SIMD4_GROUPS(R, , )                                                             \
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
#if defined(EDGERNN_DOT_SIMD4)
#define EDGERNN_DOT_SIMD4_ROWS(xv, WP)                                                              \
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
#undef EDGERNN_DOT_SIMD4_ROWS
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
#if defined(EDGERNN_DOT_SIMD4)
#define EDGERNN_DOT_SIMD4_ROWS(xv, WP)                                                              \
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
#undef EDGERNN_DOT_SIMD4_ROWS
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}

/* edgernn_dot8_s8 and edgernn_dot4_s8, what the kernels call: on GAP8 with the assembly, the whole groups
 * of 4 inputs there when x and w are 4-byte aligned and the last n mod 4 inputs in C (the layout's last
 * group follows the whole ones); the C alone everywhere else. */

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
#if defined(EDGERNN_DOT_SIMD4)
    const int n4 = n & ~3;
    if ((((uintptr_t)x | (uintptr_t)w) & 3u) == 0) {
        /* both aligned (a Dense head's row over the arena usually is): one word load each, where the
         * memcpy of edgernn_load4 at an unknown alignment is four byte loads, four stores and a load */
        for (; i < n4; i += 4) {
            acc = EDGERNN_SDOTSP4(edgernn_load4(EDGERNN_ALIGNED4(x + i)), edgernn_load4(EDGERNN_ALIGNED4(w + i)), acc);
        }
    }
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
