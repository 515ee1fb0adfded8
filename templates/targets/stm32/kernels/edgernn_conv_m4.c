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
static inline __attribute__((always_inline)) void m4_copy_run(int8_t *d, const int8_t *s, int32_t n)
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

/* The patch of a pixel whose taps are all inside the frame (dil_w 1): k_h runs of `run` bytes, row_step apart
 * from s; the usual runs (a 3x3 filter over 1, 2 or 4 channels, 1x1 over 4) with their length a constant. */
static inline __attribute__((always_inline)) void m4_rows(int8_t *d, const int8_t *s, size_t row_step, int32_t k_h,
                                                          int32_t run)
{
    int32_t ky;
    for (ky = 0; ky < k_h; ++ky, d += run, s += row_step) {
        m4_copy_run(d, s, run);
    }
}

static inline __attribute__((always_inline)) void m4_patch_inside(int8_t *d, const int8_t *s, size_t row_step,
                                                                  int32_t k_h, int32_t run)
{
    switch (run) {
    case 3:
        m4_rows(d, s, row_step, k_h, 3);
        break;
    case 4:
        m4_rows(d, s, row_step, k_h, 4);
        break;
    case 6:
        m4_rows(d, s, row_step, k_h, 6);
        break;
    case 12:
        m4_rows(d, s, row_step, k_h, 12);
        break;
    default:
        m4_rows(d, s, row_step, k_h, run);
        break;
    }
}

/* The patch of a pixel at the frame's border (no dilation): the P bytes of its slot (a multiple of 4, word-aligned)
 * filled with the zero point a word at a time, then the runs of its taps inside the frame copied over them. */
static void m4_patch_border(const edgernn_conv_geom_t *g, const int8_t *in, uint32_t pad4, int8_t *d, int P,
                            int32_t y0, int32_t x0)
{
    const int32_t c = g->in_c, run = g->k_w * c;
    const int32_t ky0 = y0 < 0 ? -y0 : 0, ky1 = g->in_h - y0 < g->k_h ? g->in_h - y0 : g->k_h;
    const int32_t kx0 = x0 < 0 ? -x0 : 0, kx1 = g->in_w - x0 < g->k_w ? g->in_w - x0 : g->k_w;
    uint32_t *const d4 = (uint32_t *)(void *)d;
    int32_t i, ky;
    for (i = 0; i < P >> 2; ++i) {
        d4[i] = pad4;
    }
    if (kx1 <= kx0) {
        return;
    }
    for (ky = ky0; ky < ky1; ++ky) {
        m4_copy_run(d + ky * run + kx0 * c, in + ((size_t)(y0 + ky) * g->in_w + x0 + kx0) * c, (kx1 - kx0) * c);
    }
}

/* A loop over a block's channels written out (gcc does not unroll at -O2): its sums stay in registers (the
 * tight requantization's; the general one, rare, stays a loop) */
#define M4_UNROLL _Pragma("GCC unroll 8")

/* A block's channels' requantization parameters, read once a chunk of pixels: edgernn_mbqm_hi's multiplier
 * and shift, and where every channel of the block is tight (edgernn_mbqm_hi_tight_applies), its e1 = -shift - 1
 * and rounding constant 2^(e1 - 1). */
typedef struct {
    int32_t m, sh, e1, round;
} m4_quant_t;

static inline __attribute__((always_inline)) int m4_quant(m4_quant_t *q, const int32_t *mult, const int32_t *shift,
                                                          int n)
{
    int k, tight = 1;
    for (k = 0; k < n; ++k) {
        q[k].m = mult[k];
        q[k].sh = shift[k];
        q[k].e1 = -shift[k] - 1;
        q[k].round = (int32_t)(1u << ((-shift[k] - 2) & 31));
        tight &= edgernn_mbqm_hi_tight_applies(mult[k], shift[k]);
    }
    return tight;
}

/* edgernn_mbqm_hi_tight (the same value) with its rounding constant given: hi + carry + 2^(e1-1) + s, s = -1 for
 * x < 0, as the high word, the carry of lo + K, less the sign bit (7 instructions with SMULL) */
static inline __attribute__((always_inline)) int32_t m4_tight(int32_t x, const m4_quant_t *q)
{
    const int64_t p = (int64_t)x * (int64_t)q->m;
    const uint32_t lo = (uint32_t)p;
    const uint32_t k = ((uint32_t)x & 0x80000000u) ^ 0x40000000u;
    const uint32_t carry = (uint32_t)(lo + k) < lo;
    return (int32_t)((uint32_t)(p >> 32) + carry + (uint32_t)q->round - ((uint32_t)x >> 31)) >> q->e1;
}

/* The output byte: + the output offset, clamped (SSAT when the clamp is the whole int8 range: full, a
 * constant once inlined) */
static inline __attribute__((always_inline)) int8_t m4_clamp(int32_t v, int32_t lo, int32_t hi, int full)
{
    return (int8_t)(full ? __ssat(v, 8) : (v < lo ? lo : (v > hi ? hi : v)));
}

/* R (8 or 4) output channels of n pixels whose patches lie P bytes apart at x (word-aligned): each pixel's
 * sums over the block of R rows at w (edgernn_dot.h's layout: EDGERNN_DOT8_ASM or EDGERNN_DOT4_ASM for the
 * whole groups of 4 inputs), requantized as edgernn_conv.c's CONV_S8_OUT does. */
static inline __attribute__((always_inline)) void m4_block(const int8_t *x, int P, int n, int n_in, int R,
                                                           const int8_t *w, const int32_t *bias, const int32_t *mult,
                                                           const int32_t *shift, int32_t off, int32_t lo, int32_t hi,
                                                           int8_t *y, int out_c, int full)
{
    m4_quant_t q[8];
    const int tight = m4_quant(q, mult, shift, R);
    int p, k;
    for (p = 0; p < n; ++p, x += P, y += out_c) {
        int32_t acc[8];
        M4_UNROLL
        for (k = 0; k < R; ++k) {
            acc[k] = bias[k];
        }
        if (R == 8) {
            edgernn_dot8_s8(x, w, n_in, acc);
        } else {
            edgernn_dot4_s8(x, w, n_in, acc);
        }
        if (tight) {
            M4_UNROLL
            for (k = 0; k < R; ++k) {
                y[k] = m4_clamp(m4_tight(acc[k], &q[k]) + off, lo, hi, full);
            }
        } else {
            for (k = 0; k < R; ++k) {
                y[k] = m4_clamp(edgernn_mbqm_hi(acc[k], q[k].m, q[k].sh) + off, lo, hi, full);
            }
        }
    }
}

/* Every output channel of n pixels (patches P bytes apart at x): blocks of 8 rows, then 4, then rows one by one,
 * as edgernn_conv.c's conv_s8_rows walks them, each block over all n pixels. */
static inline __attribute__((always_inline)) void m4_pixels(const int8_t *x, int P, int n, int n_in, const int8_t *w,
                                                            const int32_t *bias, const int32_t *mult,
                                                            const int32_t *shift, int32_t off, int32_t lo, int32_t hi,
                                                            int8_t *y, int out_c, int full)
{
    int o = 0, p;
    for (; o + 8 <= out_c; o += 8, w += 8 * (size_t)n_in) {
        m4_block(x, P, n, n_in, 8, w, bias + o, mult + o, shift + o, off, lo, hi, y + o, out_c, full);
    }
    if (o + 4 <= out_c) {
        m4_block(x, P, n, n_in, 4, w, bias + o, mult + o, shift + o, off, lo, hi, y + o, out_c, full);
        o += 4;
        w += 4 * (size_t)n_in;
    }
    for (; o < out_c; ++o, w += n_in) {
        for (p = 0; p < n; ++p) {
            const int32_t acc = edgernn_dot1_s8(x + (size_t)p * P, w, n_in, bias[o]);
            y[(size_t)p * out_c + o] = m4_clamp(edgernn_mbqm_hi(acc, mult[o], shift[o]) + off, lo, hi, full);
        }
    }
}

/* The patches a chunk: the scratch holds at least 16 patches rounded up to 4 bytes (the team's 8 slots of 2,
 * edgernn/backend/layout.py's patch_slots_elems) */
#define M4_CHUNK 16

static void m4_conv(const edgernn_conv_geom_t *g, const int8_t *in, const int8_t *w, const int32_t *bias,
                    const int32_t *mult, const int32_t *shift, uint32_t pad4, int32_t off, int32_t lo, int32_t hi,
                    int8_t *scratch, int8_t *out, int full)
{
    const int n_in = g->k_h * g->k_w * g->in_c, out_c = g->out_c, n_pix = g->out_h * g->out_w;
    /* a 1x1 stride-1 filter's patches are the pixels, read where they lie when word-aligned */
    const int in_place = g->k_h == 1 && g->k_w == 1 && g->stride_h == 1 && g->stride_w == 1 &&
                         ((n_in | (int)((uintptr_t)in & 3u)) & 3) == 0;
    const int P = in_place ? n_in : (n_in + 3) & ~3;
    int32_t p0 = 0, oy = 0, ox = 0, p;
    while (p0 < n_pix) {
        /* a chunk: up to 16 pixels, of one output row where they are gathered */
        const int n = in_place ? (n_pix - p0 < M4_CHUNK ? n_pix - p0 : M4_CHUNK)
                               : (g->out_w - ox < M4_CHUNK ? g->out_w - ox : M4_CHUNK);
        const int8_t *x = scratch;
        if (in_place) {
            x = in + (size_t)p0 * n_in;
        } else {
            const int32_t y0 = oy * g->stride_h - g->pad_top;
            for (p = 0; p < n; ++p) {
                const int32_t x0 = (ox + p) * g->stride_w - g->pad_left;
                if (g->dil_w == 1 && y0 >= 0 && y0 + (g->k_h - 1) * g->dil_h < g->in_h && x0 >= 0 &&
                    x0 + g->k_w <= g->in_w) {
                    m4_patch_inside(scratch + (size_t)p * P, in + ((size_t)y0 * g->in_w + x0) * g->in_c,
                                    (size_t)g->dil_h * g->in_w * g->in_c, g->k_h, g->k_w * g->in_c);
                } else if (g->dil_w == 1 && g->dil_h == 1) {
                    m4_patch_border(g, in, pad4, scratch + (size_t)p * P, P, y0, x0);
                } else {
                    m4_patch(g, in, pad4, scratch + (size_t)p * P, y0, x0);
                }
            }
            ox += n;
            if (ox == g->out_w) {
                ox = 0;
                ++oy;
            }
        }
        if (full) {
            m4_pixels(x, P, n, n_in, w, bias, mult, shift, off, -128, 127, out + (size_t)p0 * out_c, out_c, 1);
        } else {
            m4_pixels(x, P, n, n_in, w, bias, mult, shift, off, lo, hi, out + (size_t)p0 * out_c, out_c, 0);
        }
        p0 += n;
    }
}

/* CONV_2D: the patches of up to 16 pixels of an output row gathered into scratch, word-aligned (so that the
 * whole groups of 4 inputs run on SMLAD: edgernn_arch.h's EDGERNN_DOT8_ASM and EDGERNN_DOT4_ASM), then each block
 * of output channels over them, its requantization parameters read once. The reference gathers a row's patches
 * n_in bytes apart: unaligned unless n_in is a multiple of 4 (a 3x3 stem over one channel has 9), and then its
 * dot products take bytes. */
int edgernn_m4_conv_s8(const edgernn_conv_geom_t *g, const int8_t *in, const int8_t *w, const int32_t *bias,
                       const int32_t *multiplier, const int32_t *shift, int32_t input_zero_point,
                       int32_t output_offset, int32_t act_min, int32_t act_max, int8_t *scratch, int8_t *out)
{
    const uint32_t pad4 = (uint32_t)(uint8_t)input_zero_point * 0x01010101u;
    if (scratch == NULL || (((uintptr_t)scratch | (uintptr_t)w) & 3u) != 0) {
        return 0;
    }
    m4_conv(g, in, w, bias, multiplier, shift, pad4, output_offset, act_min, act_max, scratch, out,
            act_min <= -128 && act_max >= 127);
    return 1;
}

/* ---- DEPTHWISE_CONV_2D, depth multiplier 1, four channels a word ----
 * The frame is copied into scratch with its padding around it, a word at a time (the padding is the input zero
 * point, which the folded bias cancels, as in the reference's DW_PADDED_FRAME; scratch holds the padded frame:
 * edgernn/backend/layout.py's padded_frame_elems), so that every pixel walks its taps without a bounds check.
 * Channels outermost, four a word, their requantization parameters read once: a tap's input word and filter
 * word, each split by SXTB16 into lanes 0 and 2 and (rotated by 8) lanes 1 and 3, then one SMLABB or SMLATT per
 * channel. No plane is filled and no memset called (newlib-nano's is a byte loop). */
/* One tap of four channels: SXTB16 of the input and filter words, one SMLABB or SMLATT per channel; the fence
 * (edgernn_dot.h's) keeps gcc from hoisting the next taps' loads above it (18 loads live at once, spilled) */
#define M4_DW_TAP(xv_, wv_)                                                                         \
    do {                                                                                            \
        const uint32_t x_ = (xv_), w_ = (wv_);                                                      \
        const int16x2_t x02_ = __sxtb16((int8x4_t)x_), x13_ = edgernn_sxtb16_ror8(x_);              \
        const int16x2_t w02_ = __sxtb16((int8x4_t)w_), w13_ = edgernn_sxtb16_ror8(w_);              \
        s0 = __smlabb(x02_, w02_, s0);                                                              \
        s2 = __smlatt(x02_, w02_, s2);                                                              \
        s1 = __smlabb(x13_, w13_, s1);                                                              \
        s3 = __smlatt(x13_, w13_, s3);                                                              \
        EDGERNN_DOT_FENCE(x_);                                                                      \
    } while (0)

/* A filter row of 3 taps (x pointer xp_, tap_x words apart; filter words wp_, `words` apart), written out */
#define M4_DW_ROW3(xp_, wp_)                                                                        \
    do {                                                                                            \
        M4_DW_TAP((xp_)[0], (wp_)[0]);                                                              \
        M4_DW_TAP((xp_)[tap_x], (wp_)[words]);                                                      \
        M4_DW_TAP((xp_)[2 * tap_x], (wp_)[2 * words]);                                              \
    } while (0)

/* A 3x3 filter's 9 taps of four channels into s0..s3, written out */
static inline __attribute__((always_inline)) void m4_dw_k3(const uint32_t *base, const uint32_t *wc, int32_t tap_y,
                                                           int32_t tap_x, int32_t words, int32_t *a0, int32_t *a1,
                                                           int32_t *a2, int32_t *a3)
{
    int32_t s0 = *a0, s1 = *a1, s2 = *a2, s3 = *a3;
    M4_DW_ROW3(base, wc);
    M4_DW_ROW3(base + tap_y, wc + 3 * words);
    M4_DW_ROW3(base + 2 * tap_y, wc + 6 * words);
    *a0 = s0;
    *a1 = s1;
    *a2 = s2;
    *a3 = s3;
}

static inline __attribute__((always_inline)) void m4_dw(const edgernn_conv_geom_t *g, const uint32_t *frame, int32_t pw,
                                                        const int8_t *w, const int32_t *bias, const int32_t *mult,
                                                        const int32_t *shift, int32_t off, int32_t lo, int32_t hi,
                                                        int8_t *out, int full)
{
    const int32_t words = g->in_c >> 2, C = g->out_c, k_h = g->k_h, k_w = g->k_w;
    const int32_t tap_x = g->dil_w * words, tap_y = g->dil_h * pw * words;
    const int32_t step_x = g->stride_w * words, step_y = g->stride_h * pw * words;
    const int k3 = k_h == 3 && k_w == 3;
    int32_t c, oy, ox, k, ky, kx;
    for (c = 0; c < words; ++c) {
        m4_quant_t q[4];
        const int tight = m4_quant(q, mult + 4 * c, shift + 4 * c, 4);
        const uint32_t *const wc = (const uint32_t *)(const void *)w + c;
        const int32_t b0 = bias[4 * c], b1 = bias[4 * c + 1], b2 = bias[4 * c + 2], b3 = bias[4 * c + 3];
        int8_t *y = out + 4 * c;
        for (oy = 0; oy < g->out_h; ++oy) {
            const uint32_t *base = frame + oy * step_y + c;
            for (ox = 0; ox < g->out_w; ++ox, base += step_x, y += C) {
                int32_t s0 = b0, s1 = b1, s2 = b2, s3 = b3;
                int32_t acc[4];
                if (k3) {
                    m4_dw_k3(base, wc, tap_y, tap_x, words, &s0, &s1, &s2, &s3);
                } else {
                    const uint32_t *wt = wc;
                    for (ky = 0; ky < k_h; ++ky) {
                        const uint32_t *xp = base + ky * tap_y;
                        for (kx = 0; kx < k_w; ++kx, xp += tap_x, wt += words) {
                            M4_DW_TAP(*xp, *wt);
                        }
                    }
                }
                acc[0] = s0;
                acc[1] = s1;
                acc[2] = s2;
                acc[3] = s3;
                if (tight) {
                    M4_UNROLL
                    for (k = 0; k < 4; ++k) {
                        y[k] = m4_clamp(m4_tight(acc[k], &q[k]) + off, lo, hi, full);
                    }
                } else {
                    for (k = 0; k < 4; ++k) {
                        y[k] = m4_clamp(edgernn_mbqm_hi(acc[k], q[k].m, q[k].sh) + off, lo, hi, full);
                    }
                }
            }
        }
    }
}

int edgernn_m4_depthwise_conv_s8(const edgernn_conv_geom_t *g, const int8_t *in, const int8_t *w,
                                 const int32_t *bias, const int32_t *multiplier, const int32_t *shift,
                                 int32_t input_zero_point, int32_t output_offset, int32_t act_min, int32_t act_max,
                                 int8_t *scratch, int8_t *out)
{
    const uint32_t pad4 = (uint32_t)(uint8_t)input_zero_point * 0x01010101u;
    const int32_t ph = (g->out_h - 1) * g->stride_h + (g->k_h - 1) * g->dil_h + 1;
    const int32_t pw = (g->out_w - 1) * g->stride_w + (g->k_w - 1) * g->dil_w + 1;
    const int32_t words = g->in_c >> 2;
    const int32_t rows = g->in_h < ph - g->pad_top ? g->in_h : ph - g->pad_top;
    const int32_t cols = g->in_w < pw - g->pad_left ? g->in_w : pw - g->pad_left;
    uint32_t *const frame = (uint32_t *)(void *)scratch;
    int32_t r, i;
    if (scratch == NULL || g->depth_multiplier != 1 || (g->in_c & 3) != 0 ||
        ((((uintptr_t)in) | (uintptr_t)w | (uintptr_t)scratch) & 3u) != 0) {
        return 0;
    }
    for (i = 0; i < ph * pw * words; ++i) {
        frame[i] = pad4;
    }
    for (r = 0; r < rows; ++r) {
        const uint32_t *src = (const uint32_t *)(const void *)in + (size_t)r * g->in_w * words;
        uint32_t *dst = frame + ((size_t)(r + g->pad_top) * pw + g->pad_left) * words;
        for (i = 0; i < cols * words; ++i) {
            dst[i] = src[i];
        }
    }
    if (act_min <= -128 && act_max >= 127) {
        m4_dw(g, frame, pw, w, bias, multiplier, shift, output_offset, act_min, act_max, out, 1);
    } else {
        m4_dw(g, frame, pw, w, bias, multiplier, shift, output_offset, act_min, act_max, out, 0);
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
