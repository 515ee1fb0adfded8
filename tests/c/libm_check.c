/* templates/targets/gap8/hal/edgernn_libm.c against the host's libm. The file is compiled with its
 * functions renamed (-Dexpf=edgernn_expf ...); every STRIDE-th float (all signs, exponents, NaN and
 * infinities included) goes through both, and the largest distance in units in the last place is
 * printed per function: "expf 1\ntanhf 3\n...". */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

float edgernn_expf(float);
float edgernn_expm1f(float);
float edgernn_tanhf(float);
float edgernn_sqrtf(float);
float edgernn_floorf(float);
float edgernn_roundf(float);
float edgernn_fabsf(float);

#ifndef STRIDE
#define STRIDE 97u
#endif

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Distance in ulp, with -0 == +0 and any NaN equal to any NaN; a NaN against a number is huge. */
static int64_t ulp_distance(float a, float b)
{
    int32_t ia, ib;
    if (isnan(a) || isnan(b)) {
        return (isnan(a) && isnan(b)) ? 0 : INT64_MAX / 2;
    }
    memcpy(&ia, &a, sizeof ia);
    memcpy(&ib, &b, sizeof ib);
    if (ia < 0) {
        ia = INT32_MIN - ia;
    }
    if (ib < 0) {
        ib = INT32_MIN - ib;
    }
    return ia > ib ? (int64_t)ia - ib : (int64_t)ib - ia;
}

#define CHECK(name, mine, ref)                                                                      \
    do {                                                                                          \
        int64_t d = ulp_distance(mine(x), ref(x));                                                \
        if (d > worst[name]) {                                                                    \
            worst[name] = d;                                                                      \
            where[name] = x;                                                                      \
        }                                                                                         \
    } while (0)

int main(void)
{
    enum { EXP, EXPM1, TANH, SQRT, FLOOR, ROUND, FABS, N };
    static const char *names[N] = {"expf", "expm1f", "tanhf", "sqrtf", "floorf", "roundf", "fabsf"};
    int64_t worst[N] = {0};
    float where[N] = {0};
    /* the edges first: zeros, infinities, NaN, the largest and smallest floats, the overflow and
     * underflow thresholds of exp, halves for the roundings */
    static const uint32_t edges[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                                     0x7f7fffffu, 0xff7fffffu, 0x00000001u, 0x807fffffu, 0x42b17217u,
                                     0x42b17218u, 0xc2cff1b4u, 0xc2cff1b5u, 0x3f000000u, 0xbf000000u,
                                     0x3fc00000u, 0x40200000u, 0xbfc00000u, 0x4b000000u, 0x4afffffeu};
    const uint64_t n_edges = sizeof edges / sizeof edges[0];
    uint64_t u;
    for (u = 0; u < n_edges + 0x100000000ull / STRIDE; ++u) {
        const float x = from_bits(u < n_edges ? edges[u] : (uint32_t)((u - n_edges) * STRIDE));
        CHECK(EXP, edgernn_expf, expf);
        CHECK(EXPM1, edgernn_expm1f, expm1f);
        CHECK(TANH, edgernn_tanhf, tanhf);
        CHECK(SQRT, edgernn_sqrtf, sqrtf);
        CHECK(FLOOR, edgernn_floorf, floorf);
        CHECK(ROUND, edgernn_roundf, roundf);
        CHECK(FABS, edgernn_fabsf, fabsf);
    }
    for (int k = 0; k < N; ++k) {
        printf("%s %lld %a\n", names[k], (long long)worst[k], (double)where[k]);
    }
    return 0;
}
