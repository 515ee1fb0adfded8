/* The STM32 set's single-core CONV_2D and MAX_POOL_2D (int8) on the Cortex-M4's DSP extension.
 * edgernn_conv.c's kernels call them first (edgernn_arch.h's EDGERNN_CONV_S8_ARCH and EDGERNN_MAX_POOL_S8_ARCH);
 * each returns 0 for a geometry it does not take, and the reference C runs instead.
 *
 * The bytes are the reference's: the same int32 sums (exact, in any order), the same requantization
 * (edgernn_mbqm_hi, or its tight twin where the channel allows it: the same value), the same clamp, and the
 * same taps: a tap outside the frame counts as the input zero point, which the folded bias cancels, as in the
 * reference's patches; a pool's maximum is over the same taps. tests/targets/stm32/test_dsp_kernels.py and test_qemu_stm32f405.py hold them
 * to the reference and to LiteRT. */
#include <stdint.h>
#include <string.h>

#include "edgernn_dot.h"
#include "edgernn_fixedpoint.h"
#include "edgernn_kernels.h"

#if defined(EDGERNN_CONV_S8_ARCH)

/* n bytes from s to d: a word, a halfword, a byte at a time (fixed-size memcpy: one load and one store at any
 * alignment; the M4 allows unaligned LDR and STR). A 3x3 filter's row of taps over one channel is 3 bytes. */
static inline void m4_copy_run(int8_t *d, const int8_t *s, int32_t n)
{
    for (; n >= 4; n -= 4, d += 4, s += 4) {
        memcpy(d, s, 4);
    }
    if (n & 2) {
        memcpy(d, s, 2);
        d += 2;
        s += 2;
    }
    if (n & 1) {
        *d = *s;
    }
}

static inline void m4_fill_run(int8_t *d, uint32_t pad4, int32_t n)
{
    for (; n >= 4; n -= 4, d += 4) {
        memcpy(d, &pad4, 4);
    }
    if (n & 2) {
        memcpy(d, &pad4, 2);
        d += 2;
    }
    if (n & 1) {
        *d = (int8_t)pad4;
    }
}

/* The patch of the pixel whose first tap is (y0, x0), in the filter's order [ky][kx][c] (edgernn_conv.c's
 * CONV_PATCH): a row of taps inside the frame one run of k_w * in_c bytes when the filter is not dilated along
 * x, a tap outside the frame in_c bytes of the zero point. */
static inline __attribute__((always_inline)) void m4_patch(const edgernn_conv_geom_t *g, const int8_t *in, uint32_t pad4, int8_t *d, int32_t y0,
                     int32_t x0)
{
    const int32_t c = g->in_c, k_w = g->k_w, run = k_w * c;
    const int whole = g->dil_w == 1 && x0 >= 0 && x0 + k_w <= g->in_w;
    int32_t ky, kx;
    for (ky = 0; ky < g->k_h; ++ky, d += run) {
        const int32_t iy = y0 + ky * g->dil_h;
        const int8_t *row;
        if (iy < 0 || iy >= g->in_h) {
            m4_fill_run(d, pad4, run);
            continue;
        }
        row = in + (size_t)iy * g->in_w * c;
        if (whole) {
            m4_copy_run(d, row + (size_t)x0 * c, run);
            continue;
        }
        for (kx = 0; kx < k_w; ++kx) {
            const int32_t ix = x0 + kx * g->dil_w;
            if (ix < 0 || ix >= g->in_w) {
                m4_fill_run(d + kx * c, pad4, c);
            } else {
                m4_copy_run(d + kx * c, row + (size_t)ix * c, c);
            }
        }
    }
}

/* edgernn_conv.c's requantization of an output (CONV_S8_OUT): edgernn_mbqm_hi, through its 11-instruction tight
 * twin where the channel's multiplier and shift allow it (the same value); SSAT when the clamp is the whole
 * int8 range (full, a constant once inlined). */
static inline __attribute__((always_inline)) int8_t m4_out(int32_t acc, int32_t m, int32_t sh, int32_t off,
                                                           int32_t lo, int32_t hi, int full)
{
    const int32_t v = (edgernn_mbqm_hi_tight_applies(m, sh) ? edgernn_mbqm_hi_tight(acc, m, -sh - 1)
                                                             : edgernn_mbqm_hi(acc, m, sh)) + off;
    return (int8_t)(full ? __ssat(v, 8) : (v < lo ? lo : (v > hi ? hi : v)));
}

/* One pixel's every output channel from its patch x (word-aligned): blocks of 8 rows, then 4, then rows one
 * by one (the blocked layout, edgernn_dot.h), as edgernn_conv.c's conv_s8_rows walks them. */
static inline __attribute__((always_inline)) void m4_conv_pixel(const int8_t *x, int n_in, const int8_t *w,
                                                                const int32_t *bias, const int32_t *mult,
                                                                const int32_t *shift, int32_t off, int32_t lo,
                                                                int32_t hi, int n_out, int8_t *y, int full)
{
    int o = 0, k;
    for (; o + 8 <= n_out; o += 8, w += 8 * (size_t)n_in) {
        int32_t acc[8];
        for (k = 0; k < 8; ++k) {
            acc[k] = bias[o + k];
        }
        edgernn_dot8_s8(x, w, n_in, acc);
        for (k = 0; k < 8; ++k) {
            y[o + k] = m4_out(acc[k], mult[o + k], shift[o + k], off, lo, hi, full);
        }
    }
    if (o + 4 <= n_out) {
        int32_t acc[4];
        for (k = 0; k < 4; ++k) {
            acc[k] = bias[o + k];
        }
        edgernn_dot4_s8(x, w, n_in, acc);
        for (k = 0; k < 4; ++k) {
            y[o + k] = m4_out(acc[k], mult[o + k], shift[o + k], off, lo, hi, full);
        }
        o += 4;
        w += 4 * (size_t)n_in;
    }
    for (; o < n_out; ++o, w += n_in) {
        y[o] = m4_out(edgernn_dot1_s8(x, w, n_in, bias[o]), mult[o], shift[o], off, lo, hi, full);
    }
}

static inline __attribute__((always_inline)) void m4_conv_pixels(const edgernn_conv_geom_t *g, const int8_t *in, const int8_t *w, const int32_t *bias,
                           const int32_t *mult, const int32_t *shift, uint32_t pad4, int32_t off, int32_t lo,
                           int32_t hi, int8_t *patch, int8_t *out, int full)
{
    const int n_in = g->k_h * g->k_w * g->in_c, n_out = g->out_c;
    /* a 1x1 stride-1 filter's patches are the pixels, read where they lie when word-aligned */
    const int in_place = g->k_h == 1 && g->k_w == 1 && g->stride_h == 1 && g->stride_w == 1 &&
                         ((n_in | (int)((uintptr_t)in & 3u)) & 3) == 0;
    int32_t oy, ox;
    for (oy = 0; oy < g->out_h; ++oy) {
        const int32_t y0 = oy * g->stride_h - g->pad_top;
        for (ox = 0; ox < g->out_w; ++ox, out += n_out) {
            const int8_t *x = patch;
            if (in_place) {
                x = in + ((size_t)oy * g->out_w + ox) * n_in;
            } else {
                m4_patch(g, in, pad4, patch, y0, ox * g->stride_w - g->pad_left);
            }
            if (full) {
                m4_conv_pixel(x, n_in, w, bias, mult, shift, off, -128, 127, n_out, out, 1);
            } else {
                m4_conv_pixel(x, n_in, w, bias, mult, shift, off, lo, hi, n_out, out, 0);
            }
        }
    }
}

/* CONV_2D pixel by pixel: each patch gathered into scratch (word-aligned, so the whole groups of 4 inputs run
 * on SMLAD: edgernn_arch.h's EDGERNN_DOT8_ASM and EDGERNN_DOT4_ASM), then its output channels. The reference
 * gathers a whole output row's patches one after the other, n_in bytes apart: unaligned unless n_in is a
 * multiple of 4 (a 3x3 stem over one channel has 9), and then its dot products take bytes. */
int edgernn_m4_conv_s8(const edgernn_conv_geom_t *g, const int8_t *in, const int8_t *w, const int32_t *bias,
                       const int32_t *multiplier, const int32_t *shift, int32_t input_zero_point,
                       int32_t output_offset, int32_t act_min, int32_t act_max, int8_t *scratch, int8_t *out)
{
    const uint32_t pad4 = (uint32_t)(uint8_t)input_zero_point * 0x01010101u;
    if ((((uintptr_t)scratch | (uintptr_t)w) & 3u) != 0) {
        return 0;
    }
    if (act_min <= -128 && act_max >= 127) {
        m4_conv_pixels(g, in, w, bias, multiplier, shift, pad4, output_offset, act_min, act_max, scratch, out, 1);
    } else {
        m4_conv_pixels(g, in, w, bias, multiplier, shift, pad4, output_offset, act_min, act_max, scratch, out, 0);
    }
    return 1;
}

/* ---- MAX_POOL_2D, four channels a word ----
 * Each lane's maximum of two words in two instructions: SSUB8 sets each lane's GE flag where a >= b (signed),
 * SEL takes a's lane there and b's elsewhere. The window's taps inside the frame only, as the reference's
 * POOL_ROWS; the clamp to the whole int8 range is none. */
static inline __attribute__((always_inline)) uint32_t m4_max4(uint32_t a, uint32_t b)
{
    uint32_t r, t;
    __asm__("ssub8 %1, %2, %3\n\tsel %0, %2, %3" : "=r"(r), "=&r"(t) : "r"(a), "r"(b));
    return r;
}

int edgernn_m4_max_pool_s8(const edgernn_conv_geom_t *g, const int8_t *in, int32_t act_min, int32_t act_max,
                           int8_t *out)
{
    const int32_t words = g->in_c >> 2, row = g->in_w * words;
    const uint32_t *const in4 = (const uint32_t *)(const void *)in;
    uint32_t *out4 = (uint32_t *)(void *)out;
    int32_t oy, ox, k, ky, kx;
    if ((g->in_c & 3) != 0 || ((((uintptr_t)in) | (uintptr_t)out) & 3u) != 0 || act_min > -128 || act_max < 127) {
        return 0;
    }
    for (oy = 0; oy < g->out_h; ++oy) {
        const int32_t y0 = oy * g->stride_h - g->pad_top;
        const int32_t ky0 = y0 < 0 ? -y0 : 0, ky1 = g->in_h - y0 < g->k_h ? g->in_h - y0 : g->k_h;
        for (ox = 0; ox < g->out_w; ++ox) {
            const int32_t x0 = ox * g->stride_w - g->pad_left;
            const int32_t kx0 = x0 < 0 ? -x0 : 0, kx1 = g->in_w - x0 < g->k_w ? g->in_w - x0 : g->k_w;
            const uint32_t *const first = in4 + (size_t)(y0 + ky0) * row + (size_t)(x0 + kx0) * words;
            for (k = 0; k < words; ++k) {
                uint32_t acc = first[k];
                for (ky = 0; ky < ky1 - ky0; ++ky) {
                    const uint32_t *tap = first + (size_t)ky * row + k;
                    for (kx = 0; kx < kx1 - kx0; ++kx, tap += words) {
                        acc = m4_max4(acc, *tap);
                    }
                }
                *out4++ = acc;
            }
        }
    }
    return 1;
}

#endif /* EDGERNN_CONV_S8_ARCH */
