/* The fast forms of edgernn_fixedpoint.h against gemmlowp's literal definitions.
 * Prints the number of disagreements (0 expected) over edge cases and pseudo-random operands. */
#include <stdint.h>
#include <stdio.h>

#include "edgernn_fixedpoint.h"

/* gemmlowp::SaturatingRoundingDoublingHighMul, as written there */
static int32_t ref_srdhm(int32_t a, int32_t b)
{
    int64_t ab, nudge;
    if (a == b && a == INT32_MIN) {
        return INT32_MAX;
    }
    ab = (int64_t)a * (int64_t)b;
    nudge = ab >= 0 ? ((int64_t)1 << 30) : (1 - ((int64_t)1 << 30));
    return (int32_t)((ab + nudge) / ((int64_t)1 << 31));
}

/* gemmlowp::RoundingDivideByPOT, as written there */
static int32_t ref_rdbpot(int32_t x, int exponent)
{
    const int32_t mask = (int32_t)(((int64_t)1 << exponent) - 1);
    const int32_t remainder = x & mask;
    const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

/* ruy's x86 rescale (kernel_avx2_fma.cc, kernel_avx512.cc, one lane): x shifted left in 32 bits, a
 * "half" (2^30) added to the 64-bit product before the shift by 31, then rounding_right_shift: a nudge
 * of 2^(exp-1) and an arithmetic shift, or 1 << (31 - exp) when the nudged value would overflow. */
static int32_t ref_ruy_rescale(int32_t x, int32_t multiplier, int exponent)
{
    const int left = exponent > 0 ? exponent : 0;
    const int right = exponent > 0 ? 0 : -exponent;
    const int32_t shifted = (int32_t)((uint32_t)x << left);
    const int32_t results = (int32_t)(((int64_t)shifted * multiplier + ((int64_t)1 << 30)) >> 31);
    const int32_t nudge = right > 0 ? (int32_t)1 << (right - 1) : 0;
    if (results > 0x7fffffff - nudge) {
        return (int32_t)1 << (31 - right);
    }
    return (results + nudge) >> right;
}

static uint64_t state = 0x9E3779B97F4A7C15ull;

static uint32_t next(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (uint32_t)(state >> 16);
}

int main(void)
{
    static const int32_t edges[] = {0, 1, -1, 2, -2, 255, -255, 256, -256, 32767, -32768, 65535, -65535,
                                    1 << 20, -(1 << 20), (1 << 28) - 1, -(1 << 28), INT32_MAX, INT32_MIN,
                                    1 << 30, (1 << 30) + 1, 1073741823, 2147483646, -2147483647};
    const int n_edges = (int)(sizeof edges / sizeof edges[0]);
    long bad = 0, checked = 0;
    int i, j, e, L;
    for (i = 0; i < n_edges; ++i) {
        for (j = 0; j < n_edges; ++j) {
            bad += edgernn_srdhm(edges[i], edges[j]) != ref_srdhm(edges[i], edges[j]);
            ++checked;
        }
        for (e = 0; e < 31; ++e) {
            bad += edgernn_rdbpot(edges[i], e) != ref_rdbpot(edges[i], e);
            ++checked;
        }
    }
    for (i = 0; i < 2000000; ++i) {
        const int32_t a = (int32_t)next(), b = (int32_t)next();
        const int ex = (int)(next() % 32);
        bad += edgernn_srdhm(a, b) != ref_srdhm(a, b);
        bad += edgernn_rdbpot(a, ex) != ref_rdbpot(a, ex);
        checked += 2;
    }
    /* the merged rescale, for the left shifts of ADD/SUB (20, 15) and MUL (0), near ties included */
    for (L = 0; L <= 20; L += (L == 0 ? 15 : 5)) {
        const int32_t lim = L == 20 ? 255 : (L == 15 ? 32768 : INT32_MAX);
        for (i = 0; i < 1000000; ++i) {
            const int32_t m = (int32_t)(next() % 3 == 0 ? (1u << 30) + (next() % 4) : ((next() >> 1) | (1u << 30)));
            const int32_t sm = (next() & 1) ? m : -m;
            const int32_t x = (int32_t)((int64_t)(int32_t)next() % ((int64_t)lim + 1));
            const int ex = (int)(next() % 24);
            const edgernn_rescale_t r = edgernn_rescale_make(sm, L, ex);
            const int32_t want = ref_rdbpot(ref_srdhm((int32_t)((int64_t)x * ((int64_t)1 << L)), sm), ex);
            bad += edgernn_rescale(&r, x) != want;
            ++checked;
        }
    }
    /* the narrow form of the output rescale (L = 0) for x bounded by 2^(31 - up), ties and x = -1 included */
    for (i = 0; i < 3000000; ++i) {
        const int32_t m = (int32_t)(next() % 3 == 0 ? (1u << 30) + (next() % 4) : ((next() >> 1) | (1u << 30)));
        const int ex = (int)(next() % 24);
        const int up = 2 + (int)(next() % (uint32_t)(30 - ex));
        const int32_t lim = (int32_t)(INT32_MAX >> up);
        int32_t x = (int32_t)((int64_t)(int32_t)next() % ((int64_t)lim + 1));
        if (i % 4 == 1 && lim >= 4) {
            x = (int32_t)(next() % 9) - 4;
        } else if (i % 4 == 2) {
            x = (next() & 1) ? lim : -lim;
        }
        {
            const edgernn_rescale_t r = edgernn_rescale_make(m, 0, ex);
            bad += edgernn_rescale_narrow(x, m, up, ex) != edgernn_rescale(&r, x);
            bad += edgernn_rescale_narrow(x, m, up, ex) != ref_rdbpot(ref_srdhm(x, m), ex);
            checked += 2;
        }
    }
    /* the 32-bit word form, |x| * 2^L <= 2^30, multipliers of either sign (a SUB's), shifts 0..30; the bound's
     * ends, ties (x small, m = 2^30) and random */
    for (i = 0; i < 4000000; ++i) {
        const int L = (int)(i % 4 == 0 ? 15 : next() % 30);
        const int32_t lim = (int32_t)1 << (30 - L);
        const int32_t mag = (int32_t)(next() % 3 == 0 ? (1u << 30) + (next() % 4) : (next() >> 1));
        const int32_t m = (next() & 1) ? mag : -mag;
        const int ex = (int)(next() % 31);
        int32_t x = (int32_t)((int64_t)(int32_t)next() % ((int64_t)lim + 1));
        if (i % 5 == 1) {
            x = ((int32_t)(next() % 9) - 4) % (lim + 1);
        } else if (i % 5 == 2) {
            x = (next() & 1) ? lim : -lim;
        }
        {
            const edgernn_rescale_t r = edgernn_rescale_make(m, L, ex);
            bad += edgernn_rescale_words(x, m, L, ex) != edgernn_rescale(&r, x);
            ++checked;
        }
    }
    /* the single-rounding rescale of FULLY_CONNECTED */
    for (i = 0; i < 2000000; ++i) {
        const int32_t x = (int32_t)next(), m = (int32_t)((next() >> 1) | (1u << 30));
        const int sh = -(int)(next() % 31);
        const int total = 31 - sh;
        const int32_t want = (int32_t)(((int64_t)x * m + ((int64_t)1 << (total - 1))) >> total);
        bad += edgernn_mbqm_single(x, m, sh) != want;
        ++checked;
    }
    /* the two-rounding rescale of LiteRT's builtin FULLY_CONNECTED, right shifts 0..31 and left shifts up
     * to 7 (ruy's range), near ties and the overflow of the nudge included */
    for (i = 0; i < 3000000; ++i) {
        const int32_t m = (int32_t)((next() >> 1) | (1u << 30));
        const int sh = (int)(next() % 39) - 31;
        int32_t x = (int32_t)next();
        if (i % 3 == 1) {
            x = (int32_t)(next() % 200001) - 100000;
        } else if (i % 3 == 2) {
            x = edges[next() % (uint32_t)n_edges];
        }
        bad += edgernn_mbqm_double_up(x, m, sh) != ref_ruy_rescale(x, m, sh);
        ++checked;
    }
    /* edgernn_mbqm_hi_tight (the C twin of GAP8's 9 instructions) against MultiplyByQuantizedMultiplier
     * written out, for the multipliers and right shifts it takes: 2^30 < m < 2^31, e >= 2; ties of the
     * second rounding (odd multiples of 2^(e-1) as the high product) at both signs, edges, random */
    for (i = 0; i < 3000000; ++i) {
        const int32_t m = (int32_t)((next() >> 1) | (1u << 30)) | (i % 5 == 0 ? 1 : 0);
        const int e = 2 + (int)(next() % 30);
        int32_t x = (int32_t)next();
        if (i % 4 == 1) {
            x = (int32_t)(next() % 2000001) - 1000000;
        } else if (i % 4 == 2) {
            x = edges[next() % (uint32_t)n_edges];
        }
        if (!edgernn_mbqm_hi_tight_applies(m, -e)) {
            continue;
        }
        bad += edgernn_mbqm_hi_tight(x, m, e - 1) != ref_rdbpot(ref_srdhm(x, m), e);
        bad += edgernn_mbqm_hi_tight(x, m, e - 1) != edgernn_mbqm_hi(x, m, -e);
        checked += 2;
    }
    for (e = 2; e < 32; ++e) {
        for (i = 0; i < 64; ++i) {
            /* m = 2^30 + 1: x * m / 2^31 is within 2^-31 |x| of x / 2; x = +-(2k + 1) 2^e lands on ties */
            const int32_t m = (1 << 30) + 1;
            const int64_t t = (int64_t)(2 * i + 1) << e;
            if (t > INT32_MAX) {
                break;
            }
            bad += edgernn_mbqm_hi_tight((int32_t)t, m, e - 1) != ref_rdbpot(ref_srdhm((int32_t)t, m), e);
            bad += edgernn_mbqm_hi_tight((int32_t)-t, m, e - 1) != ref_rdbpot(ref_srdhm((int32_t)-t, m), e);
            checked += 2;
        }
    }
    /* edgernn_halves (the C twin of GAP8's depthwise requantization from 16-bit halves) against
     * MultiplyByQuantizedMultiplier plus the offset, for what it takes: 2^30 <= m < 2^31 (halves ml >= 2^15
     * and mh' next to 2^15 included), e = 1..22, -2^30 <= x < 2^30 (its ends, small x, ties of the second
     * rounding at both signs, random); and its SIGNLESS form (s taken as 1, k4 + 1) clamped at act_min >= off */
    for (i = 0; i < 4000000; ++i) {
        static const int32_t ms[] = {1 << 30, (1 << 30) + 1, (1 << 30) + 0x7FFF, (1 << 30) + 0x8000, (1 << 30) + 0xFFFF,
                                     0x7FFE7FFF, 0x7FFE8000, 0x7FFEFFFF, 0x7FFF7FFF, 0x7FFF8000, INT32_MAX};
        const int32_t m = i % 3 == 0 ? ms[next() % (sizeof ms / sizeof ms[0])] : (int32_t)((next() >> 1) | (1u << 30));
        const int e = 1 + (int)(next() % 22);
        const int32_t off = (int32_t)(next() % 256) - 128;
        int32_t x = (int32_t)(next() & 0x7FFFFFFFu) - (1 << 30);
        edgernn_halves_t h;
        if (i % 5 == 1) {
            x = (int32_t)(next() % 400001) - 200000;
        } else if (i % 5 == 2) {
            static const int32_t xe[] = {0, 1, -1, 2, -2, 65535, 65536, -65536, -65537, (1 << 30) - 1, -(1 << 30),
                                         -(1 << 30) + 1, (1 << 30) - 65536, 32767, -32768};
            x = xe[next() % (sizeof xe / sizeof xe[0])];
        } else if (i % 5 == 3 && e < 30) {
            const int32_t t = (int32_t)(((int64_t)(2 * (int32_t)(next() % 1024) + 1) << (e - 1)) % (1 << 29));
            x = (next() & 1) ? t : -t; /* with m near 2^30, x m / 2^31 lands near x / 2: ties of the rounding by 2^e */
        }
        if (!edgernn_halves_make(&h, m, -e, off)) {
            bad += ((uint32_t)m & 0xFFFF8000u) != 0x7FFF8000u && m >= (1 << 30); /* refused only where mh' = 2^15 */
            ++checked;
            continue;
        }
        {
            const uint32_t xs = (uint32_t)x + (1u << 30);
            const int32_t want = ref_rdbpot(ref_srdhm(x, m), e) + off;
            edgernn_halves_t hs = h;
            int32_t lo = off + (int32_t)(next() % 3), got_sl;
            bad += edgernn_halves(xs, &h) != want;
            hs.k4 += 1;
            {
                /* SIGNLESS: s = 1 for every x, as the kernel's ReLU loops compute it */
                const uint32_t xl = xs & 0xFFFFu, xh = xs >> 16;
                uint32_t a = (xl * (hs.k1 & 0xFFFFu)) >> 16;
                a += xl * (uint32_t)(int32_t)(int16_t)(hs.k2 & 0xFFFFu) + xh * (uint32_t)(int32_t)(int16_t)(hs.k2 >> 16);
                a = (a + hs.k3) >> 15;
                a += xh * (hs.k1 >> 16);
                got_sl = (int32_t)(a + (uint32_t)hs.k4 + (1u << (hs.e - 1))) >> hs.e;
            }
            if (lo > 127) {
                lo = 127;
            }
            bad += edgernn_clamp(got_sl, lo, 127) != edgernn_clamp(want, lo, 127);
            checked += 2;
        }
    }
    printf("checked %ld mismatches %ld\n", checked, bad);
    return bad != 0;
}
