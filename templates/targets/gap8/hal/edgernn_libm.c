/* The float functions of the C library that edgernn's kernels call, for GAP8 firmware.
 *
 * The GAP SDK links FreeRTOS applications with -nostdlib: its small libc has memcpy, memset and strlen
 * but no math, and GAP8 has no FPU, so a float32 model (or an int8 one with QUANTIZE or SUM, which
 * round in float) would not link. These are the same functions under the same names, in float
 * arithmetic only (soft-float on GAP8: IEEE single precision, correctly rounded by libgcc, so a
 * build of this file on any IEEE machine without FMA contraction gives the same bits; the tests
 * compare it there with the host's libm):
 *
 *   floorf, roundf, sqrtf   exact (sqrtf correctly rounded)
 *   expf, expm1f            <= 1 ulp   (measured against glibc on every 7th float)
 *   tanhf                   <= 3 ulp
 *
 * The methods are those of Sun's fdlibm (its float versions, as in FreeBSD's msun): range reduction
 * by ln 2 split in two, a rational approximation of exp on [-ln2/2, ln2/2] and the exponent put back
 * in the bits; tanh from expm1, which keeps small arguments exact. */
/* <math.h> is not included: these definitions are its declarations, and a test build on a host
 * renames them with -D, which glibc's math.h does not survive. */
#include <stdint.h>

static uint32_t float_bits(float x)
{
    union {
        float f;
        uint32_t u;
    } v;
    v.f = x;
    return v.u;
}

static float bits_float(uint32_t u)
{
    union {
        float f;
        uint32_t u;
    } v;
    v.u = u;
    return v.f;
}

/* y * 2^k for y in [1/2, 2] and k in [-151, 128], rounded once: 2^k itself is a normal float for
 * k in [-126, 127]; beyond, the scaling is split so that only the last product can round. */
static float scale_by_pow2(float y, int k)
{
    if (k > 127) {
        return y * 2.0f * 0x1p127f;
    }
    if (k < -125) {
        return y * bits_float((uint32_t)(k + 100 + 127) << 23) * 0x1p-100f;
    }
    return y * bits_float((uint32_t)(k + 127) << 23);
}

float floorf(float x)
{
    const uint32_t u = float_bits(x);
    const int e = (int)((u >> 23) & 0xff) - 127;
    uint32_t frac;
    if (e >= 23) {
        return x; /* integral, inf or NaN */
    }
    if (e < 0) {
        /* |x| < 1 */
        if ((u & 0x7fffffffu) == 0) {
            return x;
        }
        return (u >> 31) ? -1.0f : 0.0f;
    }
    frac = 0x007fffffu >> e;
    if ((u & frac) == 0) {
        return x;
    }
    if (u >> 31) {
        return bits_float((u + frac) & ~frac); /* toward -inf: the magnitude goes up */
    }
    return bits_float(u & ~frac);
}

float roundf(float x)
{
    const uint32_t u = float_bits(x);
    const int e = (int)((u >> 23) & 0xff) - 127;
    uint32_t frac;
    if (e >= 23) {
        return x;
    }
    if (e < 0) {
        /* |x| < 1: +-0, or +-1 from 0.5 on (half away from zero) */
        return bits_float((u & 0x80000000u) | (e == -1 ? 0x3f800000u : 0u));
    }
    frac = 0x007fffffu >> e;
    if ((u & frac) == 0) {
        return x;
    }
    /* add half of the last integral unit to the magnitude, then drop the fraction */
    return bits_float((u + (0x00400000u >> e)) & ~frac);
}

float sqrtf(float x)
{
    uint32_t u = float_bits(x);
    int e = (int)(u >> 23);
    uint32_t m, q, r, s, bit;
    if (u == 0 || u == 0x80000000u) {
        return x; /* +-0 */
    }
    if (u >> 31) {
        return (x - x) / (x - x); /* NaN for x < 0 */
    }
    if (e == 0xff) {
        return x; /* +inf, NaN */
    }
    if (e == 0) {
        /* subnormal: normalize */
        m = u;
        e = 1;
        while ((m & 0x00800000u) == 0) {
            m <<= 1;
            --e;
        }
    } else {
        m = (u & 0x007fffffu) | 0x00800000u;
    }
    e -= 127;
    if (e & 1) {
        m <<= 1; /* an even exponent: m in [2^23, 2^25) */
    }
    e >>= 1; /* floor(e / 2): the odd case doubled m */
    /* bit-by-bit square root of m * 2^1 (fdlibm's e_sqrtf): q gets 24 bits, then the remainder
     * rounds to nearest (a tie cannot happen for a square root). */
    m <<= 1;
    q = 0;
    s = 0;
    bit = 0x01000000u;
    while (bit != 0) {
        r = s + bit;
        if (r <= m) {
            s = r + bit;
            m -= r;
            q += bit;
        }
        m <<= 1;
        bit >>= 1;
    }
    if (m != 0) {
        q += q & 1u; /* m > q: round to nearest */
    }
    return bits_float((q >> 1) + ((uint32_t)(e + 126) << 23));
}

/* ln 2 = hi + lo, hi with its low mantissa bits zero, so that k * hi is exact for the k that occur */
static const float exp_ln2_hi = 6.9314575195e-01f;   /* 0x3f317200 */
static const float exp_ln2_lo = 1.4286067653e-06f;   /* 0x35bfbe8e */
static const float expm1_ln2_hi = 6.9313812256e-01f; /* 0x3f317180 */
static const float expm1_ln2_lo = 9.0580006145e-06f; /* 0x3717f7d1 */
static const float inv_ln2 = 1.4426950216e+00f;      /* 0x3fb8aa3b */
/* fdlibm's coefficients of the rational approximation of exp on [-ln2/2, ln2/2] (float version) */
static const float exp_p1 = 1.6666625440e-1f;
static const float exp_p2 = -2.7667332906e-3f;

float expf(float x)
{
    const uint32_t u = float_bits(x);
    const uint32_t ax = u & 0x7fffffffu;
    float hi, lo, r, t, c, y;
    int k;

    if (ax > 0x7f800000u) {
        return x + x; /* NaN */
    }
    if (ax == 0x7f800000u) {
        return (u >> 31) ? 0.0f : x;
    }
    if (ax >= 0x42b17218u) {
        /* |x| >= ln(FLT_MAX) */
        if (!(u >> 31)) {
            return 0x1p127f * 0x1p127f; /* overflow: +inf */
        }
        if (x < -1.0397208405e+02f) {
            return 0x1p-100f * 0x1p-100f; /* below the smallest subnormal: +0 */
        }
    }
    if (ax < 0x39000000u) {
        return 1.0f + x; /* |x| < 2^-13 */
    }
    /* x = k ln2 + r, |r| <= ln2/2; r is kept as hi - lo */
    if (ax < 0x3eb17218u) {
        /* |x| < ln2/2 */
        k = 0;
        hi = x;
        lo = 0.0f;
    } else {
        const float kf = x * inv_ln2;
        k = (int)(kf + (kf < 0.0f ? -0.5f : 0.5f));
        hi = x - (float)k * exp_ln2_hi;
        lo = (float)k * exp_ln2_lo;
    }
    r = hi - lo;
    t = r * r;
    c = r - t * (exp_p1 + t * exp_p2);
    y = 1.0f - ((lo - (r * c) / (2.0f - c)) - hi);
    return k == 0 ? y : scale_by_pow2(y, k);
}

/* fdlibm's coefficients of expm1 on [-ln2/2, ln2/2] (float version) */
static const float expm1_q1 = -3.3333212137e-2f;
static const float expm1_q2 = 1.5807170421e-3f;

float expm1f(float x)
{
    const uint32_t u = float_bits(x);
    const uint32_t ax = u & 0x7fffffffu;
    const int negative = (int)(u >> 31);
    float hi, lo, c, hfx, hxs, r1, t, e;
    int k;

    if (ax >= 0x4195b844u) {
        /* |x| >= 27 ln2 */
        if (ax > 0x7f800000u) {
            return x + x; /* NaN */
        }
        if (ax == 0x7f800000u) {
            return negative ? -1.0f : x;
        }
        if (negative) {
            return -1.0f; /* exp(x) < 2^-27: -1 after rounding */
        }
        if (ax >= 0x42b17218u) {
            return 0x1p127f * 0x1p127f; /* x >= ln(FLT_MAX): +inf */
        }
    }
    if (ax > 0x3eb17218u) {
        /* |x| > ln2/2: argument reduction */
        if (ax < 0x3F851592u) {
            /* |x| < 1.5 ln2 */
            if (!negative) {
                hi = x - expm1_ln2_hi;
                lo = expm1_ln2_lo;
                k = 1;
            } else {
                hi = x + expm1_ln2_hi;
                lo = -expm1_ln2_lo;
                k = -1;
            }
        } else {
            const float kf = inv_ln2 * x;
            k = (int)(kf + (negative ? -0.5f : 0.5f));
            t = (float)k;
            hi = x - t * expm1_ln2_hi;
            lo = t * expm1_ln2_lo;
        }
        x = hi - lo;
        c = (hi - x) - lo;
    } else if (ax < 0x33000000u) {
        /* |x| < 2^-25: expm1(x) rounds to x */
        return x;
    } else {
        k = 0;
        c = 0.0f;
    }
    /* x is now in [-ln2/2, ln2/2] */
    hfx = 0.5f * x;
    hxs = x * hfx;
    r1 = 1.0f + hxs * (expm1_q1 + hxs * expm1_q2);
    t = 3.0f - r1 * hfx;
    e = hxs * ((r1 - t) / (6.0f - x * t));
    if (k == 0) {
        return x - (x * e - hxs);
    }
    e = (x * (e - c) - c);
    e -= hxs;
    if (k == -1) {
        return 0.5f * (x - e) - 0.5f;
    }
    if (k == 1) {
        if (x < -0.25f) {
            return -2.0f * (e - (x + 0.5f));
        }
        return 1.0f + 2.0f * (x - e);
    }
    if (k <= -2 || k > 56) {
        /* exp(x) - 1 with exp(x) either tiny next to 1 or too large for the -1 to matter */
        const float y = 1.0f - (e - x);
        return scale_by_pow2(y, k) - 1.0f;
    }
    if (k < 23) {
        const float one_minus = bits_float(0x3f800000u - (0x01000000u >> k)); /* 1 - 2^-k */
        const float y = one_minus - (e - x);
        return scale_by_pow2(y, k);
    }
    {
        const float two_minus_k = bits_float((uint32_t)(127 - k) << 23); /* 2^-k */
        const float y = (x - (e + two_minus_k)) + 1.0f;
        return scale_by_pow2(y, k);
    }
}

float tanhf(float x)
{
    const uint32_t u = float_bits(x);
    const uint32_t ax = u & 0x7fffffffu;
    float z;

    if (ax >= 0x7f800000u) {
        if (ax > 0x7f800000u) {
            return x + x; /* NaN */
        }
        return (u >> 31) ? -1.0f : 1.0f;
    }
    if (ax < 0x41100000u) {
        /* |x| < 9 */
        const float a = bits_float(ax);
        if (ax < 0x39800000u) {
            return x; /* |x| < 2^-12: tanh(x) rounds to x */
        }
        if (ax >= 0x3f800000u) {
            /* |x| >= 1: 1 - 2 / (exp(2|x|) + 1) */
            z = 1.0f - 2.0f / (expm1f(a + a) + 2.0f);
        } else {
            /* |x| < 1: -t / (t + 2), t = expm1(-2|x|), with no cancellation */
            const float t = expm1f(-(a + a));
            z = -t / (t + 2.0f);
        }
    } else {
        z = 1.0f; /* |x| >= 9: tanh(x) rounds to +-1 */
    }
    return (u >> 31) ? -z : z;
}

float fabsf(float x)
{
    return bits_float(float_bits(x) & 0x7fffffffu);
}
