#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "edgernn_dot.h"
#include "edgernn_fixedpoint.h"
#include "edgernn_kernels.h"
#include "edgernn_team.h"

/* A kernel set's own single-core int8 kernels, tried first (edgernn_arch.h; none in the reference set): nonzero
 * when they took the geometry. */
#if defined(EDGERNN_CONV_S8_ARCH)
int EDGERNN_CONV_S8_ARCH(const edgernn_conv_geom_t *g, const int8_t *in, const int8_t *w, const int32_t *bias,
                         const int32_t *multiplier, const int32_t *shift, int32_t input_zero_point,
                         int32_t output_offset, int32_t act_min, int32_t act_max, int8_t *scratch, int8_t *out);
#endif
#if defined(EDGERNN_DEPTHWISE_S8_ARCH)
int EDGERNN_DEPTHWISE_S8_ARCH(const edgernn_conv_geom_t *g, const int8_t *in, const int8_t *w, const int32_t *bias,
                              const int32_t *multiplier, const int32_t *shift, int32_t input_zero_point,
                              int32_t output_offset, int32_t act_min, int32_t act_max, int8_t *scratch, int8_t *out);
#endif
#if defined(EDGERNN_MAX_POOL_S8_ARCH)
int EDGERNN_MAX_POOL_S8_ARCH(const edgernn_conv_geom_t *g, const int8_t *in, int32_t act_min, int32_t act_max,
                             int8_t *out);
#endif

/* The per-frame CNN front end: CONV_2D, DEPTHWISE_CONV_2D, MAX_POOL_2D and AVERAGE_POOL_2D, batch 1,
 * NHWC, with the geometry of edgernn_conv_geom_t (padding already resolved into pad_top and pad_left
 * the way TFLite's ComputePaddingHeightWidth does it).
 *
 * CONV_2D gathers each output row's input patches (im2col) into scratch and runs them as rows of a
 * matrix product: the filter [out_c][k_h][k_w][in_c] is a weight matrix whose rows are in the patch's
 * order, so the int8 convolution gets FULLY_CONNECTED's blocked dot products (edgernn_dot.h: 8 output
 * channels per load of the patch, Xpulp SIMD on GAP8), and float32 the FC kernel itself. A tap outside
 * the frame is written as the input zero point: with the folded bias (bias - zero point * sum of the
 * weights) it contributes (zp - zp) * w = 0, which is what TFLite's reference kernel gets by skipping it.
 * Float and int16 (zero point 0) pad with 0 likewise. */

/* The geometry copied into a local first: an int8 store may alias any object, so the compiler would
 * reload every field read through the pointer after each output byte written. */
#define GEOM_LOCAL GEOM_LOCAL_FROM(geom_in)
#define GEOM_LOCAL_FROM(ptr)                                                                        \
    const edgernn_conv_geom_t geom_ = *(ptr);                                                       \
    const edgernn_conv_geom_t *const g = &geom_

/* The patch of output pixel (oy, ox): k_h * k_w * in_c elements at dst, in the filter's order. A row of
 * taps inside the frame is one run of k_w * in_c elements when the filter is not dilated along x, copied
 * element by element (runs are a few bytes: a call of memcpy would cost more than the copy); a tap
 * outside the frame is pad. */
#define CONV_PATCH(T, dst, oy, ox)                                                                  \
    do {                                                                                            \
        const int32_t c_ = g->in_c, y0_ = (oy) * g->stride_h - g->pad_top;                          \
        const int32_t x0_ = (ox) * g->stride_w - g->pad_left;                                       \
        T *d_ = (dst);                                                                              \
        int ky_, kx_, i_;                                                                           \
        for (ky_ = 0; ky_ < g->k_h; ++ky_) {                                                        \
            const int32_t iy_ = y0_ + ky_ * g->dil_h;                                               \
            if (iy_ < 0 || iy_ >= g->in_h) {                                                        \
                for (i_ = 0; i_ < g->k_w * c_; ++i_) {                                              \
                    *d_++ = (T)pad;                                                                 \
                }                                                                                   \
                continue;                                                                           \
            }                                                                                       \
            if (g->dil_w == 1 && x0_ >= 0 && x0_ + g->k_w <= g->in_w) {                             \
                const T *s_ = in + ((size_t)iy_ * g->in_w + x0_) * c_;                              \
                for (i_ = 0; i_ < g->k_w * c_; ++i_) {                                              \
                    *d_++ = s_[i_];                                                                 \
                }                                                                                   \
                continue;                                                                           \
            }                                                                                       \
            for (kx_ = 0; kx_ < g->k_w; ++kx_) {                                                    \
                const int32_t ix_ = x0_ + kx_ * g->dil_w;                                           \
                if (ix_ < 0 || ix_ >= g->in_w) {                                                    \
                    for (i_ = 0; i_ < c_; ++i_) {                                                   \
                        *d_++ = (T)pad;                                                             \
                    }                                                                               \
                } else {                                                                            \
                    const T *s_ = in + ((size_t)iy_ * g->in_w + ix_) * c_;                          \
                    for (i_ = 0; i_ < c_; ++i_) {                                                   \
                        *d_++ = s_[i_];                                                             \
                    }                                                                               \
                }                                                                                   \
            }                                                                                       \
        }                                                                                           \
    } while (0)

/* The patches of output row oy, one after the other (out_w patches of k_h * k_w * in_c elements). */
#define CONV_IM2COL(T)                                                                              \
    do {                                                                                            \
        int ox_;                                                                                    \
        for (ox_ = 0; ox_ < g->out_w; ++ox_) {                                                      \
            CONV_PATCH(T, scratch + (size_t)ox_ * g->k_h * g->k_w * g->in_c, oy, ox_);             \
        }                                                                                           \
    } while (0)

void edgernn_conv_f32(const edgernn_conv_geom_t *geom_in, const float *in, const float *w, const float *bias,
                      float act_min, float act_max, float *scratch, float *out)
{
    GEOM_LOCAL;
    const int n_in = g->k_h * g->k_w * g->in_c;
    const float pad = 0.0f;
    int oy;
    for (oy = 0; oy < g->out_h; ++oy) {
        CONV_IM2COL(float);
        edgernn_fully_connected_f32(scratch, w, bias, act_min, act_max, g->out_w, n_in, g->out_c,
                                    out + (size_t)oy * g->out_w * g->out_c);
    }
}

/* TFLite's reference ConvPerChannel and DepthwisePerChannel rescale with MultiplyByQuantizedMultiplier's
 * two roundings, halves away from zero (measured: not the one rounding of LiteRT's reference
 * FULLY_CONNECTED), so the int8 convolution has its own rows over the FC's blocked dot products. */
#define CONV_S8_OUT(k)                                                                              \
    y[o + (k)] = (int8_t)edgernn_clamp(edgernn_mbqm_hi(acc[k], multiplier[o + (k)], shift[o + (k)]) + output_offset, \
                                       act_min, act_max)

/* ---- Two pixels at a time (GAP8's Xpulp path): PULP-NN's 4x2 blocking ----
 *
 * Two patches x0, x1 (4-byte aligned) against a quad of 4 rows of the blocked weights (edgernn_dot.h's layout:
 * per group of 4 inputs, R rows' words side by side, R = 8 or 4): each group loads the two patches' words and
 * the quad's 4 weight words once and makes 8 pv.sdotsp.b, 4 output channels x 2 pixels, 32 MACs for 6 loads.
 * An 8-row block is two quads (rows 0-3 at the group's bytes 0-15, rows 4-7 at 16-31, a group being 32
 * bytes). The n mod 4 inputs of the last group (t bytes a row, rows one after the other) are summed one by
 * one. The sums are exact int32 arithmetic, so their order does not change a byte. */
#if defined(EDGERNN_DOT_SIMD4)
#define CONV_PAIRS 1

/* CONV_2D over one input channel, the frame read in place (below, after the depthwise planes it shares): nonzero
 * when it took the geometry. */
static int conv_stem_s8(const edgernn_conv_geom_t *g, const int8_t *in, const int8_t *w, const int32_t *bias,
                        const int32_t *multiplier, const int32_t *shift, int32_t input_zero_point,
                        int32_t output_offset, int32_t act_min, int32_t act_max, int8_t *scratch, int8_t *out,
                        int team);


/* acc[k] += x0 . row k, acc[4 + k] += x1 . row k for the quad's rows k < 4: wg its first group's words,
 * wt its first row's tail (t bytes a row), R the block's rows. */
static inline __attribute__((always_inline)) void conv_quad_s8(const int8_t *x0, const int8_t *x1, int groups, int t,
                                                               const int8_t *wg, const int8_t *wt, int R,
                                                               int32_t acc[8])
{
    int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    int32_t b0 = acc[4], b1 = acc[5], b2 = acc[6], b3 = acc[7];
    const int8_t *p0 = x0, *p1 = x1, *pw = wg;
    int j;
#if defined(CONV_QUAD_LOOP)
    if (groups > 0) {
        uint32_t xa, xb, w0, w1, w2, w3;
        if (R == 8) {
            CONV_QUAD_LOOP(20);
        } else {
            CONV_QUAD_LOOP(4);
        }
    }
#else
    for (j = 0; j < groups; ++j, p0 += 4, p1 += 4, pw += 4 * R) {
        const edgernn_v4s xa = edgernn_load4(EDGERNN_ALIGNED4(p0)), xb = edgernn_load4(EDGERNN_ALIGNED4(p1));
        const edgernn_v4s w0 = edgernn_load4(EDGERNN_ALIGNED4(pw)), w1 = edgernn_load4(EDGERNN_ALIGNED4(pw + 4));
        const edgernn_v4s w2 = edgernn_load4(EDGERNN_ALIGNED4(pw + 8)), w3 = edgernn_load4(EDGERNN_ALIGNED4(pw + 12));
        a0 = EDGERNN_SDOTSP4(xa, w0, a0);
        a1 = EDGERNN_SDOTSP4(xa, w1, a1);
        a2 = EDGERNN_SDOTSP4(xa, w2, a2);
        a3 = EDGERNN_SDOTSP4(xa, w3, a3);
        b0 = EDGERNN_SDOTSP4(xb, w0, b0);
        b1 = EDGERNN_SDOTSP4(xb, w1, b1);
        b2 = EDGERNN_SDOTSP4(xb, w2, b2);
        b3 = EDGERNN_SDOTSP4(xb, w3, b3);
    }
    p0 = x0 + 4 * groups;
    p1 = x1 + 4 * groups;
#endif
    (void)pw;
    for (j = 0; j < t; ++j) {
        const int32_t u = p0[j], v = p1[j];
        a0 += u * wt[j];
        a1 += u * wt[t + j];
        a2 += u * wt[2 * t + j];
        a3 += u * wt[3 * t + j];
        b0 += v * wt[j];
        b1 += v * wt[t + j];
        b2 += v * wt[2 * t + j];
        b3 += v * wt[3 * t + j];
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
    acc[4] = b0;
    acc[5] = b1;
    acc[6] = b2;
    acc[7] = b3;
}

#define CONV_S8_PAIR_OUT(k)                                                                         \
    do {                                                                                            \
        const int32_t m_ = multiplier[o + (k)], s_ = shift[o + (k)];                                \
        y0[o + (k)] = (int8_t)edgernn_clamp(edgernn_mbqm_hi(acc[k], m_, s_) + output_offset, act_min, act_max); \
        y1[o + (k)] = (int8_t)edgernn_clamp(edgernn_mbqm_hi(acc[4 + (k)], m_, s_) + output_offset, act_min, act_max); \
    } while (0)

/* The same where the channel's multiplier and shift take edgernn_mbqm_hi_tight (its 9 instructions, same value;
 * the quad's four channels checked once: conv_quad_tight). A convolution of few inputs a pixel (a camera CNN's
 * stem: 25) spends more on its outputs' requantization than on its MACs. */
#define CONV_S8_PAIR_OUT_TIGHT(k)                                                                   \
    do {                                                                                            \
        const int32_t m_ = multiplier[o + (k)], e1_ = -shift[o + (k)] - 1;                          \
        y0[o + (k)] = (int8_t)edgernn_clamp(edgernn_mbqm_hi_tight(acc[k], m_, e1_) + output_offset, act_min, act_max); \
        y1[o + (k)] = (int8_t)edgernn_clamp(edgernn_mbqm_hi_tight(acc[4 + (k)], m_, e1_) + output_offset, act_min, \
                                            act_max);                                               \
    } while (0)

static inline int conv_quad_tight(const int32_t *multiplier, const int32_t *shift, int o)
{
    return edgernn_mbqm_hi_tight_applies(multiplier[o], shift[o]) &&
           edgernn_mbqm_hi_tight_applies(multiplier[o + 1], shift[o + 1]) &&
           edgernn_mbqm_hi_tight_applies(multiplier[o + 2], shift[o + 2]) &&
           edgernn_mbqm_hi_tight_applies(multiplier[o + 3], shift[o + 3]);
}

/* A quad's four outputs of both pixels, tight where its channels allow. */
#define CONV_S8_PAIR_QUAD_OUT()                                                                     \
    do {                                                                                            \
        if (conv_quad_tight(multiplier, shift, o)) {                                                \
            for (k = 0; k < 4; ++k) {                                                               \
                CONV_S8_PAIR_OUT_TIGHT(k);                                                          \
            }                                                                                       \
        } else {                                                                                    \
            for (k = 0; k < 4; ++k) {                                                               \
                CONV_S8_PAIR_OUT(k);                                                                \
            }                                                                                       \
        }                                                                                           \
    } while (0)

/* Every output channel of two pixels: the blocks of 8 rows as two quads each, a block of 4 as one quad, the
 * last rows one by one. x0, x1 and w 4-byte aligned (the blocks then are too: 8 * n_in and 4 * n_in bytes). */
static void conv_s8_pair(const int8_t *x0, const int8_t *x1, int n_in, const int8_t *w, const int32_t *bias,
                         const int32_t *multiplier, const int32_t *shift, int32_t output_offset, int32_t act_min,
                         int32_t act_max, int n_out, int8_t *y0, int8_t *y1)
{
    const int groups = n_in >> 2, t = n_in & 3;
    int o = 0, k;
    int32_t acc[8];
    for (; o + 8 <= n_out; o += 8, w += 8 * (size_t)n_in) {
        const int8_t *tail = w + 32 * (size_t)groups;
        for (k = 0; k < 4; ++k) {
            acc[k] = acc[4 + k] = bias[o + k];
        }
        conv_quad_s8(x0, x1, groups, t, w, tail, 8, acc);
        CONV_S8_PAIR_QUAD_OUT();
        o += 4;
        for (k = 0; k < 4; ++k) {
            acc[k] = acc[4 + k] = bias[o + k];
        }
        conv_quad_s8(x0, x1, groups, t, w + 16, tail + 4 * t, 8, acc);
        CONV_S8_PAIR_QUAD_OUT();
        o -= 4;
    }
    if (o + 4 <= n_out) {
        for (k = 0; k < 4; ++k) {
            acc[k] = acc[4 + k] = bias[o + k];
        }
        conv_quad_s8(x0, x1, groups, t, w, w + 16 * (size_t)groups, 4, acc);
        CONV_S8_PAIR_QUAD_OUT();
        o += 4;
        w += 4 * (size_t)n_in;
    }
    for (; o < n_out; ++o, w += n_in) {
        acc[0] = edgernn_dot1_s8(x0, w, n_in, bias[o]);
        acc[4] = edgernn_dot1_s8(x1, w, n_in, bias[o]);
        CONV_S8_PAIR_OUT(0);
    }
}
#endif

/* n_pix patches of n_in bytes (rows of x, x_stride apart) times the blocked weights: n_out outputs per
 * patch (y_stride apart from one patch to the next). With Xpulp, two patches at a time (conv_s8_pair) when
 * the patches and weights are word-aligned; otherwise, and for a last odd patch, one at a time: 8 output
 * channels per walk over the patch, then 4, then one by one (edgernn_dot.h). */
static void conv_s8_rows(const int8_t *x, int n_pix, int n_in, int x_stride, const int8_t *w0, const int32_t *bias,
                         const int32_t *multiplier, const int32_t *shift, int32_t output_offset, int32_t act_min,
                         int32_t act_max, int n_out, int y_stride, int8_t *y)
{
    int p = 0;
#if defined(CONV_PAIRS)
    if ((((uintptr_t)x | (uintptr_t)x_stride | (uintptr_t)w0) & 3u) == 0) {
        for (; p + 2 <= n_pix; p += 2, x += 2 * (size_t)x_stride, y += 2 * (size_t)y_stride) {
            conv_s8_pair(x, x + x_stride, n_in, w0, bias, multiplier, shift, output_offset, act_min, act_max, n_out,
                         y, y + y_stride);
        }
    }
#endif
    for (; p < n_pix; ++p, x += x_stride, y += y_stride) {
        const int8_t *w = w0;
        int o;
        for (o = 0; o + 8 <= n_out; o += 8, w += 8 * (size_t)n_in) {
            int32_t acc[8];
            int k;
            for (k = 0; k < 8; ++k) {
                acc[k] = bias[o + k];
            }
            edgernn_dot8_s8(x, w, n_in, acc);
            for (k = 0; k < 8; ++k) {
                CONV_S8_OUT(k);
            }
        }
        if (o + 4 <= n_out) {
            int32_t acc[4];
            int k;
            for (k = 0; k < 4; ++k) {
                acc[k] = bias[o + k];
            }
            edgernn_dot4_s8(x, w, n_in, acc);
            for (k = 0; k < 4; ++k) {
                CONV_S8_OUT(k);
            }
            o += 4;
            w += 4 * (size_t)n_in;
        }
        for (; o < n_out; ++o, w += n_in) {
            int32_t acc[1];
            acc[0] = edgernn_dot1_s8(x, w, n_in, bias[o]);
            CONV_S8_OUT(0);
        }
    }
}

/* A 1x1 stride-1 filter reads each pixel's channels as they lie: no patches to gather. */
#define CONV_POINTWISE(g) ((g)->k_h == 1 && (g)->k_w == 1 && (g)->stride_h == 1 && (g)->stride_w == 1)

void edgernn_conv_s8(const edgernn_conv_geom_t *geom_in, const int8_t *in, const int8_t *w, const int32_t *bias,
                     const int32_t *multiplier, const int32_t *shift, int32_t input_zero_point,
                     int32_t output_offset, int32_t act_min, int32_t act_max, int8_t *scratch, int8_t *out)
{
    GEOM_LOCAL;
    const int n_in = g->k_h * g->k_w * g->in_c;
    const int32_t pad = input_zero_point;
    int oy;
#if defined(EDGERNN_CONV_S8_ARCH)
    if (EDGERNN_CONV_S8_ARCH(geom_in, in, w, bias, multiplier, shift, input_zero_point, output_offset, act_min,
                             act_max, scratch, out)) {
        return;
    }
#endif
#if defined(CONV_PAIRS)
    if (conv_stem_s8(geom_in, in, w, bias, multiplier, shift, input_zero_point, output_offset, act_min, act_max,
                     scratch, out, 0)) {
        return;
    }
#endif
    if (CONV_POINTWISE(g)) {
        conv_s8_rows(in, g->out_h * g->out_w, n_in, n_in, w, bias, multiplier, shift, output_offset, act_min, act_max,
                     g->out_c, g->out_c, out);
        return;
    }
    for (oy = 0; oy < g->out_h; ++oy) {
        CONV_IM2COL(int8_t);
        conv_s8_rows(scratch, g->out_w, n_in, n_in, w, bias, multiplier, shift, output_offset, act_min, act_max,
                     g->out_c, g->out_c, out + (size_t)oy * g->out_w * g->out_c);
    }
}

/* The team's CONV_2D: the output pixels split across the workers, each worker gathering its pixels'
 * patches one at a time into its own slot of scratch (slot k of worker k: EDGERNN_CONV_TEAM_SLOTS slots
 * of the patch size rounded up to 4 bytes), every pixel's outputs computed by conv_s8_rows as in the
 * single-core kernel. No core gathers for the others and a frame of few channels is split as well as
 * one of many. The split runs over the workers' indices (a count of edgernn_team_workers(), grain 1), so
 * each index is one worker and its slot; a team larger than the slots takes the single-core kernel. */
#define EDGERNN_CONV_TEAM_SLOTS 8
/* The int8 team's slot holds two patches (the pixel pair of conv_s8_pixels); the 16x8 one's the first. */
#define EDGERNN_CONV_SLOT_PATCHES 2

/* Workers [k_begin, k_end) of the team's split (one index per worker): worker k's share of the output
 * pixels, each pixel's patch gathered into slot k and run through ROWS(x, n_pix, y), a conv_*_rows call;
 * a 1x1 stride-1 filter's pixels (scratch NULL) are its rows, read in place. The pixel's row and column
 * are stepped along, not divided out per pixel: a division takes tens of cycles on GAP8's cluster cores.
 * Expects a (the team's struct: workers, n_in, slot_elems, scratch, out), g, in and pad in scope. */
#define CONV_TEAM_PIXELS(T, ROWS)                                                                   \
    do {                                                                                            \
        const int n_pix_ = g->out_h * g->out_w;                                                     \
        int k_;                                                                                     \
        for (k_ = k_begin; k_ < k_end; ++k_) {                                                      \
            int begin_, end_, p_, oy_, ox_;                                                         \
            T *slot_;                                                                               \
            edgernn_team_range(k_, a->workers, n_pix_, 1, &begin_, &end_);                          \
            if (a->scratch == NULL) {                                                               \
                ROWS(in + (size_t)begin_ * a->n_in, end_ - begin_, a->out + (size_t)begin_ * g->out_c); \
                continue;                                                                           \
            }                                                                                       \
            if (begin_ >= end_) {                                                                   \
                continue;                                                                           \
            }                                                                                       \
            slot_ = a->scratch + (size_t)k_ * a->slot_elems;                                        \
            oy_ = begin_ / g->out_w;                                                                \
            ox_ = begin_ % g->out_w;                                                                \
            for (p_ = begin_; p_ < end_; ++p_) {                                                    \
                CONV_PATCH(T, slot_, oy_, ox_);                                                     \
                ROWS(slot_, 1, a->out + (size_t)p_ * g->out_c);                                     \
                if (++ox_ == g->out_w) {                                                            \
                    ox_ = 0;                                                                        \
                    ++oy_;                                                                          \
                }                                                                                   \
            }                                                                                       \
        }                                                                                           \
    } while (0)

typedef struct {
    const edgernn_conv_geom_t *g;
    const int8_t *in, *w;
    const int32_t *bias, *multiplier, *shift;
    int32_t pad, output_offset, act_min, act_max;
    int n_in, slot_elems, workers;
    int n_out;              /* the output channels computed: g->out_c, or a streamed chunk's (edgernn_l3_conv.c) */
    int8_t *scratch, *out;  /* out: the first computed channel of pixel 0; a pixel's channels g->out_c apart */
} conv_s8_team_t;

/* One int8 patch as CONV_PATCH gathers it, a word at a time where a row of taps is whole words (in_c a
 * multiple of 4, the frame and the slot word-aligned): a 3x3 filter over 32 channels is 72 word copies. */
static void conv_patch_s8(const edgernn_conv_geom_t *g, const int8_t *in, int32_t pad, int8_t *dst, int32_t oy,
                          int32_t ox)
{
    const int32_t c = g->in_c, y0 = oy * g->stride_h - g->pad_top, x0 = ox * g->stride_w - g->pad_left;
    const int32_t run = g->k_w * c;
    int ky, i;
    if ((c & 3) != 0 || g->dil_w != 1 || (((uintptr_t)in | (uintptr_t)dst) & 3u) != 0) {
        CONV_PATCH(int8_t, dst, oy, ox);
        return;
    }
    {
        const uint32_t pad4 = (uint32_t)(uint8_t)pad * 0x01010101u;
        const int32_t words = run >> 2, cw = c >> 2;
        uint32_t *d = (uint32_t *)(void *)dst;
        for (ky = 0; ky < g->k_h; ++ky) {
            const int32_t iy = y0 + ky * g->dil_h;
            if (iy < 0 || iy >= g->in_h) {
                for (i = 0; i < words; ++i) {
                    *d++ = pad4;
                }
            } else if (x0 >= 0 && x0 + g->k_w <= g->in_w) {
                const uint32_t *s_ = (const uint32_t *)(const void *)(in + ((size_t)iy * g->in_w + x0) * c);
                for (i = 0; i < words; ++i) {
                    *d++ = s_[i];
                }
            } else {
                int kx;
                for (kx = 0; kx < g->k_w; ++kx) {
                    const int32_t ix = x0 + kx;
                    if (ix < 0 || ix >= g->in_w) {
                        for (i = 0; i < cw; ++i) {
                            *d++ = pad4;
                        }
                    } else {
                        const uint32_t *s_ = (const uint32_t *)(const void *)(in + ((size_t)iy * g->in_w + ix) * c);
                        for (i = 0; i < cw; ++i) {
                            *d++ = s_[i];
                        }
                    }
                }
            }
        }
    }
}

/* The int8 team's share: pairs of output pixels (the split's grain), both patches gathered into the worker's
 * slot (EDGERNN_CONV_SLOT_PATCHES patches of n_in rounded up to 4 bytes), then both pixels' every output
 * channel (conv_s8_rows: the 4x2 blocking on GAP8). A 1x1 stride-1 filter's pixels are read in place. */
static void conv_s8_pixels(const void *args, int k_begin, int k_end)
{
    const conv_s8_team_t *a = (const conv_s8_team_t *)args;
    GEOM_LOCAL_FROM(a->g);
    const int8_t *in = a->in;
    const int32_t pad = a->pad;
    const int n_pix = g->out_h * g->out_w, n_in = a->n_in, patch = a->slot_elems / EDGERNN_CONV_SLOT_PATCHES;
    int k;
    for (k = k_begin; k < k_end; ++k) {
        int begin, end, p, oy, ox;
        int8_t *slot;
        edgernn_team_range(k, a->workers, n_pix, EDGERNN_CONV_SLOT_PATCHES, &begin, &end);
        if (a->scratch == NULL) {
            conv_s8_rows(in + (size_t)begin * n_in, end - begin, n_in, n_in, a->w, a->bias, a->multiplier, a->shift,
                         a->output_offset, a->act_min, a->act_max, a->n_out, g->out_c, a->out + (size_t)begin * g->out_c);
            continue;
        }
        if (begin >= end) {
            continue;
        }
        slot = a->scratch + (size_t)k * a->slot_elems;
        oy = begin / g->out_w;
        ox = begin % g->out_w;
        for (p = begin; p < end;) {
            const int two = end - p >= 2 ? 2 : 1;
            int q;
            for (q = 0; q < two; ++q) {
                conv_patch_s8(g, in, pad, slot + (size_t)q * patch, oy, ox);
                if (++ox == g->out_w) {
                    ox = 0;
                    ++oy;
                }
            }
            conv_s8_rows(slot, two, n_in, patch, a->w, a->bias, a->multiplier, a->shift, a->output_offset, a->act_min,
                         a->act_max, a->n_out, g->out_c, a->out + (size_t)p * g->out_c);
            p += two;
        }
    }
}

/* Output channels [0, n_out) of every pixel (w, bias, multiplier, shift and out at the first of them), split by
 * pixels across the team (team) or on this core in one worker's slot. */
static void conv_s8_channels(const edgernn_conv_geom_t *geom_in, const int8_t *in, const int8_t *w,
                             const int32_t *bias, const int32_t *multiplier, const int32_t *shift,
                             int32_t input_zero_point, int32_t output_offset, int32_t act_min, int32_t act_max,
                             int8_t *scratch, int8_t *out, int n_out, int team)
{
    conv_s8_team_t a;
    const int workers = team ? edgernn_team_workers() : 1;
    a.g = geom_in;
    a.in = in;
    a.w = w;
    a.bias = bias;
    a.multiplier = multiplier;
    a.shift = shift;
    a.pad = input_zero_point;
    a.output_offset = output_offset;
    a.act_min = act_min;
    a.act_max = act_max;
    a.n_in = geom_in->k_h * geom_in->k_w * geom_in->in_c;
    a.slot_elems = EDGERNN_CONV_SLOT_PATCHES * ((a.n_in + 3) & ~3);
    a.workers = workers;
    a.n_out = n_out;
    a.scratch = CONV_POINTWISE(geom_in) ? NULL : scratch;
    a.out = out;
    if (team) {
        edgernn_team_split(conv_s8_pixels, &a, workers, 1);
    } else {
        conv_s8_pixels(&a, 0, 1);
    }
}

void edgernn_team_conv_s8(const edgernn_conv_geom_t *geom_in, const int8_t *in, const int8_t *w, const int32_t *bias,
                          const int32_t *multiplier, const int32_t *shift, int32_t input_zero_point,
                          int32_t output_offset, int32_t act_min, int32_t act_max, int8_t *scratch, int8_t *out)
{
#if defined(CONV_PAIRS)
    if (conv_stem_s8(geom_in, in, w, bias, multiplier, shift, input_zero_point, output_offset, act_min, act_max,
                     scratch, out, 1)) {
        return;
    }
#endif
    if (edgernn_team_workers() > EDGERNN_CONV_TEAM_SLOTS) {
        edgernn_conv_s8(geom_in, in, w, bias, multiplier, shift, input_zero_point, output_offset, act_min, act_max,
                        scratch, out);
        return;
    }
    conv_s8_channels(geom_in, in, w, bias, multiplier, shift, input_zero_point, output_offset, act_min, act_max,
                     scratch, out, geom_in->out_c, 1);
}

/* tflite::MultiplyByQuantizedMultiplier(int64_t, int32_t, int) of the 16x8 reference convolutions: the
 * multiplier reduced to Q15 (rounded, saturating at 0x7FFF), one rounding, halves toward +infinity. */
static inline int32_t conv_mbqm_s16(int64_t x, int32_t multiplier, int shift)
{
    const int64_t reduced = multiplier < 0x7FFF0000 ? ((int64_t)multiplier + (1 << 15)) >> 16 : 0x7FFF;
    const int total_shift = 15 - shift;
    return (int32_t)((x * reduced + ((int64_t)1 << (total_shift - 1))) >> total_shift);
}

/* 16x8: each product fits in 23 bits, so up to 256 of them sum exactly in int32; chunks add in int64. */
#define CONV_S16_CHUNK 256

static void conv_s16_rows(const int16_t *x, int n_pix, int n_in, const int8_t *w0, const int64_t *bias,
                          const int32_t *multiplier, const int32_t *shift, int32_t act_min, int32_t act_max,
                          int n_out, int16_t *y)
{
    int p, o, i, i0;
    for (p = 0; p < n_pix; ++p, x += n_in, y += n_out) {
        /* four output channels per walk over the patch, each input loaded once for the four */
        for (o = 0; o + 4 <= n_out; o += 4) {
            const int8_t *wa = w0 + (size_t)o * n_in, *wb = wa + n_in, *wc = wb + n_in, *wd = wc + n_in;
            int64_t a0 = bias[o], a1 = bias[o + 1], a2 = bias[o + 2], a3 = bias[o + 3];
            for (i0 = 0; i0 < n_in; i0 += CONV_S16_CHUNK) {
                const int end = n_in - i0 < CONV_S16_CHUNK ? n_in : i0 + CONV_S16_CHUNK;
                int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
                for (i = i0; i < end; ++i) {
                    const int32_t xi = x[i];
                    s0 += xi * wa[i];
                    s1 += xi * wb[i];
                    s2 += xi * wc[i];
                    s3 += xi * wd[i];
                }
                a0 += s0;
                a1 += s1;
                a2 += s2;
                a3 += s3;
            }
            y[o] = (int16_t)edgernn_clamp(conv_mbqm_s16(a0, multiplier[o], shift[o]), act_min, act_max);
            y[o + 1] = (int16_t)edgernn_clamp(conv_mbqm_s16(a1, multiplier[o + 1], shift[o + 1]), act_min, act_max);
            y[o + 2] = (int16_t)edgernn_clamp(conv_mbqm_s16(a2, multiplier[o + 2], shift[o + 2]), act_min, act_max);
            y[o + 3] = (int16_t)edgernn_clamp(conv_mbqm_s16(a3, multiplier[o + 3], shift[o + 3]), act_min, act_max);
        }
        for (; o < n_out; ++o) {
            const int8_t *w = w0 + (size_t)o * n_in;
            int64_t acc = bias[o];
            for (i0 = 0; i0 < n_in; i0 += CONV_S16_CHUNK) {
                const int end = n_in - i0 < CONV_S16_CHUNK ? n_in : i0 + CONV_S16_CHUNK;
                int32_t s = 0;
                for (i = i0; i < end; ++i) {
                    s += (int32_t)x[i] * (int32_t)w[i];
                }
                acc += s;
            }
            y[o] = (int16_t)edgernn_clamp(conv_mbqm_s16(acc, multiplier[o], shift[o]), act_min, act_max);
        }
    }
}

void edgernn_conv_s16(const edgernn_conv_geom_t *geom_in, const int16_t *in, const int8_t *w, const int64_t *bias,
                      const int32_t *multiplier, const int32_t *shift, int32_t act_min, int32_t act_max,
                      int16_t *scratch, int16_t *out)
{
    GEOM_LOCAL;
    const int n_in = g->k_h * g->k_w * g->in_c;
    const int32_t pad = 0;   /* 16x8 activations are symmetric */
    int oy;
    if (CONV_POINTWISE(g)) {
        conv_s16_rows(in, g->out_h * g->out_w, n_in, w, bias, multiplier, shift, act_min, act_max, g->out_c, out);
        return;
    }
    for (oy = 0; oy < g->out_h; ++oy) {
        CONV_IM2COL(int16_t);
        conv_s16_rows(scratch, g->out_w, n_in, w, bias, multiplier, shift, act_min, act_max, g->out_c,
                      out + (size_t)oy * g->out_w * g->out_c);
    }
}

/* The team's 16x8 CONV_2D: the output pixels split as in edgernn_team_conv_s8, each worker's patches in
 * its own slot (the patch rounded up to 4 elements). */
typedef struct {
    const edgernn_conv_geom_t *g;
    const int16_t *in;
    const int8_t *w;
    const int64_t *bias;
    const int32_t *multiplier, *shift;
    int32_t act_min, act_max;
    int n_in, slot_elems, workers;
    int16_t *scratch, *out;
} conv_s16_team_t;

#define CONV_S16_TEAM_ROWS(x, n_pix, y)                                                             \
    conv_s16_rows(x, n_pix, a->n_in, a->w, a->bias, a->multiplier, a->shift, a->act_min, a->act_max, g->out_c, y)

static void conv_s16_pixels(const void *args, int k_begin, int k_end)
{
    const conv_s16_team_t *a = (const conv_s16_team_t *)args;
    GEOM_LOCAL_FROM(a->g);
    const int16_t *in = a->in;
    const int32_t pad = 0;   /* 16x8 activations are symmetric */
    CONV_TEAM_PIXELS(int16_t, CONV_S16_TEAM_ROWS);
}

void edgernn_team_conv_s16(const edgernn_conv_geom_t *geom_in, const int16_t *in, const int8_t *w, const int64_t *bias,
                           const int32_t *multiplier, const int32_t *shift, int32_t act_min, int32_t act_max,
                           int16_t *scratch, int16_t *out)
{
    conv_s16_team_t a;
    const int workers = edgernn_team_workers();
    if (workers > EDGERNN_CONV_TEAM_SLOTS) {
        edgernn_conv_s16(geom_in, in, w, bias, multiplier, shift, act_min, act_max, scratch, out);
        return;
    }
    a.g = geom_in;
    a.in = in;
    a.w = w;
    a.bias = bias;
    a.multiplier = multiplier;
    a.shift = shift;
    a.act_min = act_min;
    a.act_max = act_max;
    a.n_in = geom_in->k_h * geom_in->k_w * geom_in->in_c;
    a.slot_elems = (a.n_in + 3) & ~3;
    a.workers = workers;
    a.scratch = CONV_POINTWISE(geom_in) ? NULL : scratch;
    a.out = out;
    edgernn_team_split(conv_s16_pixels, &a, workers, 1);
}

/* DEPTHWISE_CONV_2D: output channel oc = ic * depth_multiplier + m reads input channel ic; the filter is
 * [k_h][k_w][out_c]. The float kernel sums each output pixel's in-frame taps (TFLite's reference skips the
 * others) into acc[out_c] (scratch), tap by tap. */
void edgernn_depthwise_conv_f32(const edgernn_conv_geom_t *geom_in, const float *in, const float *w_f,
                                const float *bias, float act_min, float act_max, float *scratch, float *out)
{
    GEOM_LOCAL;
    const int dm = g->depth_multiplier;
    int oy, ox, c;
    float *acc = scratch;
    for (oy = 0; oy < g->out_h; ++oy) {
        const int32_t y0 = oy * g->stride_h - g->pad_top;
        for (ox = 0; ox < g->out_w; ++ox) {
            const int32_t x0 = ox * g->stride_w - g->pad_left;
            int ky, kx, ic, m;
            float *y = out + ((size_t)oy * g->out_w + ox) * g->out_c;
            for (c = 0; c < g->out_c; ++c) {
                acc[c] = 0.0f;
            }
            for (ky = 0; ky < g->k_h; ++ky) {
                const int32_t iy = y0 + ky * g->dil_h;
                if (iy < 0 || iy >= g->in_h) {
                    continue;
                }
                for (kx = 0; kx < g->k_w; ++kx) {
                    const int32_t ix = x0 + kx * g->dil_w;
                    const float *xt, *wt;
                    if (ix < 0 || ix >= g->in_w) {
                        continue;
                    }
                    xt = in + ((size_t)iy * g->in_w + ix) * g->in_c;
                    wt = w_f + ((size_t)ky * g->k_w + kx) * g->out_c;
                    for (ic = 0; ic < g->in_c; ++ic) {
                        for (m = 0; m < dm; ++m) {
                            acc[ic * dm + m] += xt[ic] * wt[ic * dm + m];
                        }
                    }
                }
            }
            for (c = 0; c < g->out_c; ++c) {
                float v = acc[c] + (bias ? bias[c] : 0.0f);
                y[c] = v < act_min ? act_min : (v > act_max ? act_max : v);
            }
        }
    }
}

/* The integer kernels first copy the frame into scratch with its padding around it, filled with the
 * input zero point (the padded frame is (out_h - 1) * stride_h + (k_h - 1) * dil_h + 1 rows of as many
 * columns likewise): bias[oc] holds bias + input_offset * sum of the filter's taps of oc, so a padded tap
 * contributes (zp - zp) * w = 0, as a skipped one does in TFLite's reference, and every output pixel
 * is one walk over its k_h * k_w taps without a bounds check, its sum in a register. */
#define DW_PADDED_FRAME(T)                                                                          \
    const int32_t ph = (g->out_h - 1) * g->stride_h + (g->k_h - 1) * g->dil_h + 1;                  \
    const int32_t pw = (g->out_w - 1) * g->stride_w + (g->k_w - 1) * g->dil_w + 1;                  \
    const int32_t c_in = g->in_c;                                                                   \
    T *frame = scratch;                                                                             \
    do {                                                                                            \
        int32_t r_, i_;                                                                             \
        const int32_t rows_ = g->in_h < ph - g->pad_top ? g->in_h : ph - g->pad_top;                \
        const int32_t cols_ = g->in_w < pw - g->pad_left ? g->in_w : pw - g->pad_left;              \
        for (i_ = 0; i_ < ph * pw * c_in; ++i_) {                                                   \
            frame[i_] = (T)pad;                                                                     \
        }                                                                                           \
        for (r_ = 0; r_ < rows_; ++r_) {                                                            \
            memcpy(frame + ((size_t)(r_ + g->pad_top) * pw + g->pad_left) * c_in,                   \
                   in + (size_t)r_ * g->in_w * c_in, (size_t)cols_ * c_in * sizeof(T));             \
        }                                                                                           \
    } while (0)

/* out[oy][ox][oc] for every pixel: the int32 sum of the taps' products, then STORE(k, sum) with oc = c + k
 * writes it (bias[oc] is added there). With a depth multiplier of 1 (SeparableConv2D's), four channels
 * at a time: each tap's four inputs and four weights lie side by side, the four sums stay in registers. */
#define DW_PIXELS(STORE)                                                                            \
    do {                                                                                            \
        const int dm = g->depth_multiplier;                                                         \
        const int32_t k_h = g->k_h, k_w = g->k_w, out_c = g->out_c;                                 \
        const size_t tap_y = (size_t)g->dil_h * pw * c_in, tap_x = (size_t)g->dil_w * c_in;         \
        int oy_, ox_, c, ky_, kx_;                                                                  \
        for (oy_ = oy_begin; oy_ < oy_end; ++oy_) {                                                 \
            for (ox_ = 0; ox_ < g->out_w; ++ox_) {                                                  \
                const T *base_ = frame + ((size_t)oy_ * g->stride_h * pw + (size_t)ox_ * g->stride_w) * c_in; \
                T *y_ = out + ((size_t)oy_ * g->out_w + ox_) * out_c;                               \
                c = 0;                                                                              \
                if (dm == 1) {                                                                      \
                    for (; c + 4 <= out_c; c += 4) {                                                \
                        const int8_t *wk_ = w + c;                                                  \
                        int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;                                     \
                        for (ky_ = 0; ky_ < k_h; ++ky_) {                                           \
                            const T *xk_ = base_ + ky_ * tap_y + c;                                 \
                            for (kx_ = 0; kx_ < k_w; ++kx_, xk_ += tap_x, wk_ += out_c) {           \
                                s0 += (int32_t)xk_[0] * wk_[0];                                     \
                                s1 += (int32_t)xk_[1] * wk_[1];                                     \
                                s2 += (int32_t)xk_[2] * wk_[2];                                     \
                                s3 += (int32_t)xk_[3] * wk_[3];                                     \
                            }                                                                       \
                        }                                                                           \
                        STORE(0, s0);                                                               \
                        STORE(1, s1);                                                               \
                        STORE(2, s2);                                                               \
                        STORE(3, s3);                                                               \
                    }                                                                               \
                }                                                                                   \
                for (; c < out_c; ++c) {                                                            \
                    const T *xc_ = base_ + c / dm;                                                  \
                    const int8_t *wk_ = w + c;                                                      \
                    int32_t s0 = 0;                                                                 \
                    for (ky_ = 0; ky_ < k_h; ++ky_) {                                               \
                        const T *xk_ = xc_ + ky_ * tap_y;                                           \
                        for (kx_ = 0; kx_ < k_w; ++kx_, xk_ += tap_x, wk_ += out_c) {               \
                            s0 += (int32_t)*xk_ * *wk_;                                             \
                        }                                                                           \
                    }                                                                               \
                    STORE(0, s0);                                                                   \
                }                                                                                   \
            }                                                                                       \
        }                                                                                           \
    } while (0)

#define DW_STORE_S8(k, sum)                                                                         \
    y_[c + (k)] = (int8_t)edgernn_clamp(                                                            \
        edgernn_mbqm_hi(bias[c + (k)] + (sum), multiplier[c + (k)], shift[c + (k)]) + output_offset, act_min, act_max)

/* 16x8: each product fits in 23 bits, so the int32 sum holds up to 256 taps (generation checks it); the
 * int64 bias is added after. */
#define DW_STORE_S16(k, sum)                                                                        \
    y_[c + (k)] = (int16_t)edgernn_clamp(conv_mbqm_s16(bias[c + (k)] + (sum), multiplier[c + (k)], shift[c + (k)]), \
                                         act_min, act_max)

/* The int8 depthwise output rows [oy_begin, oy_end) from the padded frame: a range of the team's split. */
typedef struct {
    const edgernn_conv_geom_t *g;
    const int8_t *frame, *w;
    const int32_t *bias, *multiplier, *shift;
    int32_t pw, output_offset, act_min, act_max;
    int8_t *out;
} dw_s8_split_t;

static void dw_s8_rows(const void *args, int oy_begin, int oy_end)
{
    typedef int8_t T;
    const dw_s8_split_t *a = (const dw_s8_split_t *)args;
    const edgernn_conv_geom_t geom_ = *a->g;
    const edgernn_conv_geom_t *const g = &geom_;
    const int8_t *const frame = a->frame, *const w = a->w;
    const int32_t *const bias = a->bias, *const multiplier = a->multiplier, *const shift = a->shift;
    const int32_t pw = a->pw, c_in = g->in_c, output_offset = a->output_offset;
    const int32_t act_min = a->act_min, act_max = a->act_max;
    int8_t *const out = a->out;
    DW_PIXELS(DW_STORE_S8);
}

static void dw_s8_setup(dw_s8_split_t *a, const edgernn_conv_geom_t *geom_in, const int8_t *in, const int8_t *w,
                        const int32_t *bias, const int32_t *multiplier, const int32_t *shift,
                        int32_t input_zero_point, int32_t output_offset, int32_t act_min, int32_t act_max,
                        int8_t *scratch, int8_t *out)
{
    GEOM_LOCAL;
    const int32_t pad = input_zero_point;
    DW_PADDED_FRAME(int8_t);
    a->g = geom_in;
    a->frame = frame;
    a->w = w;
    a->bias = bias;
    a->multiplier = multiplier;
    a->shift = shift;
    a->pw = pw;
    a->output_offset = output_offset;
    a->act_min = act_min;
    a->act_max = act_max;
    a->out = out;
}

/* ---- The int8 depthwise convolution by channel planes (GAP8's Xpulp path) ----
 *
 * With a depth multiplier of 1, a filter row of at most 3 taps along x, stride 1 or 2 and dilation 1 along x
 * (a 3x3 SAME or VALID filter at any stride along y), the team splits the channels, not the rows, and no core pads
 * the frame for the others: each worker copies its channels, 4 at a time, out of the HWC frame into planes of
 * its own (EDGERNN_DW_PLANES planes of ph rows of pw4 bytes in its slot of scratch, the padding filled with
 * the input zero point), one word load feeding 4 planes. Along a plane's row, two output pixels (ox, ox + 1)
 * read the 4 bytes at ox: a filter row packed as [w0 w1 w2 0] gives ox's taps, [0 w0 w1 w2] ox + 1's, so a
 * filter row of 2 pixels is 1 load and 2 pv.sdotsp.b (at stride 2 along x, a pixel's own word at 2 ox and
 * [w0 w1 w2 0]). The sum of each pixel is bias + the same 9 products
 * as the HWC walk's (a padded tap adds (zp - zp) * w = 0, a lane past the filter 0 * x), exact int32: the
 * bytes are those of the HWC walk. */
#if defined(CONV_PAIRS)
#define EDGERNN_DW_PLANES 4
#define DW_MAX_KH 8

/* The bytes of a plane's row: the padded frame's columns and 3 more, so that the last pair's word (and
 * the lanes past a filter narrower than 3) stays in the row, rounded up to 4. Its rows: the padded frame's. */
#define DW_PLANE_ROW(pw) (((pw) + 3 + 3) & ~3)

static int dw_planes_apply(const edgernn_conv_geom_t *g)
{
    return g->depth_multiplier == 1 && g->k_w <= 3 && (g->stride_w == 1 || g->stride_w == 2) && g->dil_w == 1 &&
           g->k_h <= DW_MAX_KH;
}

/* A word whose address need be only byte-aligned: GAP8 loads it in one instruction (a misaligned word
 * costs GVSOC one more cycle); memcpy elsewhere. */
static inline edgernn_v4s dw_load4(const uint8_t *p)
{
#if !(defined(__riscv) || defined(__riscv__))
    edgernn_v4s v;
    memcpy(&v, p, sizeof v);
    return v;
#else
    /* the 4 bytes read named as the asm's memory operand, so that it is ordered after their stores without
     * a "memory" clobber (which would reload every value the compiler keeps in memory) */
    typedef struct {
        uint8_t b[4];
    } dw_word_t;
    edgernn_v4s v;
    __asm__("lw %0, 0(%1)" : "=r"(v) : "r"(p), "m"(*(const dw_word_t *)(const void *)p));
    return v;
#endif
}

typedef struct {
    const edgernn_conv_geom_t *g;
    const int8_t *in, *w;
    const int32_t *bias, *multiplier, *shift;
    int32_t pad, output_offset, act_min, act_max;
    int workers, ph, pw, row;
    int8_t *scratch, *out;
} dw_planes_t;

static inline uint32_t dw_pack(int32_t b0, int32_t b1, int32_t b2, int32_t b3)
{
    return (uint32_t)(uint8_t)b0 | (uint32_t)(uint8_t)b1 << 8 | (uint32_t)(uint8_t)b2 << 16 | (uint32_t)(uint8_t)b3 << 24;
}

#if defined(EDGERNN_CONV_HWLOOP) && EDGERNN_CONV_HWLOOP
/* GAP8: words of the zero point, 4 a turn (p.sw post-increment, .insn s 0x2b, 2), then the rest */
static void dw_fill_words(uint32_t *p, uint32_t v, size_t words)
{
    const int n = (int)(words / 4);
    __asm__ volatile(".option push\n\t.option norvc\n\t"
                     "blez %[n], 1f\n\t"
                     ".insn i 0x7b, 4, x0, %[n], 8\n\t"
                     ".insn s 0x2b, 2, %[v], 4(%[p])\n\t"
                     ".insn s 0x2b, 2, %[v], 4(%[p])\n\t"
                     ".insn s 0x2b, 2, %[v], 4(%[p])\n\t"
                     ".insn s 0x2b, 2, %[v], 4(%[p])\n\t"
                     "1:\n\t.option pop"
                     : [p] "+r"(p)
                     : [n] "r"(n), [v] "r"(v)
                     : "memory");
    for (words -= 4 * (size_t)(n > 0 ? n : 0); words > 0; --words) {
        *p++ = v;
    }
}

/* GAP8: rows of a quad's planes, n >= 1 pixels each: each pixel's word (p.lw post-incremented by c_in, .insn r
 * 0x0b, 7, 0x10) and its 4 bytes to the 4 planes (p.sb post-increment; the word's first use stalls 1), loop 1
 * over the rows moving the source by src_adv and the planes by d_adv after each */
static void dw_fill_quad_rows(const int8_t *src, int32_t c_in, int n, int rows, int32_t src_adv, int32_t d_adv,
                              uint8_t *d0, uint8_t *d1, uint8_t *d2, uint8_t *d3)
{
    uint32_t v, t;
    __asm__ volatile(".option push\n\t.option norvc\n\t"
                     "blez %[n], 1f\n\t"
                     "blez %[rows], 1f\n\t"
                     ".insn i 0x7b, 4, x1, %[rows], 28\n\t"
                     ".insn i 0x7b, 4, x0, %[n], 16\n\t"
                     ".insn r 0x0b, 7, 0x10, %[v], %[s], %[ci]\n\t"
                     ".insn s 0x2b, 0, %[v], 1(%[d0])\n\t"
                     "srli %[t], %[v], 8\n\t"
                     ".insn s 0x2b, 0, %[t], 1(%[d1])\n\t"
                     "srli %[t], %[v], 16\n\t"
                     ".insn s 0x2b, 0, %[t], 1(%[d2])\n\t"
                     "srli %[t], %[v], 24\n\t"
                     ".insn s 0x2b, 0, %[t], 1(%[d3])\n\t"
                     "add %[s], %[s], %[sa]\n\t"
                     "add %[d0], %[d0], %[da]\n\t"
                     "add %[d1], %[d1], %[da]\n\t"
                     "add %[d2], %[d2], %[da]\n\t"
                     "add %[d3], %[d3], %[da]\n\t"
                     "1:\n\t.option pop"
                     : [s] "+r"(src), [d0] "+r"(d0), [d1] "+r"(d1), [d2] "+r"(d2), [d3] "+r"(d3), [v] "=&r"(v),
                       [t] "=&r"(t)
                     : [n] "r"(n), [ci] "r"(c_in), [rows] "r"(rows), [sa] "r"(src_adv), [da] "r"(d_adv)
                     : "memory");
}

/* GAP8: the same where n is a multiple of 4: four pixels a turn (4 p.lw post-incremented by c_in), their 4x4
 * bytes transposed by 8 pv.shuffle2.b (.insn r 0x57, 1, 0x64; lane i of rD takes byte m_i[1:0] of rs1 where
 * m_i[2] is set, else of rD: pixel pairs' bytes interleaved, then the pairs' halves) and one p.sw a plane
 * (misaligned where the plane's row starts at x0 = 1: one more cycle a store), 20 instructions for 4 pixels
 * where dw_fill_quad_rows takes 32 */
static void dw_fill_quad_rows4(const int8_t *src, int32_t c_in, int n4, int rows, int32_t src_adv, int32_t d_adv,
                               uint8_t *d0, uint8_t *d1, uint8_t *d2, uint8_t *d3)
{
    const uint32_t mlo = 0x05010400u, mhi = 0x07030602u, slo = 0x05040100u, shi = 0x07060302u;
    uint32_t w0, w1, w2, w3, t0, t1;
    __asm__ volatile(".option push\n\t.option norvc\n\t"
                     "blez %[n], 1f\n\t"
                     "blez %[rows], 1f\n\t"
                     ".insn i 0x7b, 4, x1, %[rows], 52\n\t"
                     ".insn i 0x7b, 4, x0, %[n], 40\n\t"
                     ".insn r 0x0b, 7, 0x10, %[w0], %[s], %[ci]\n\t"
                     ".insn r 0x0b, 7, 0x10, %[w1], %[s], %[ci]\n\t"
                     ".insn r 0x0b, 7, 0x10, %[w2], %[s], %[ci]\n\t"
                     ".insn r 0x0b, 7, 0x10, %[w3], %[s], %[ci]\n\t"
                     "addi %[t0], %[w0], 0\n\t"
                     ".insn r 0x57, 1, 0x64, %[t0], %[w1], %[mlo]\n\t" /* t0 = [w0.0 w1.0 w0.1 w1.1] */
                     ".insn r 0x57, 1, 0x64, %[w0], %[w1], %[mhi]\n\t" /* w0 = [w0.2 w1.2 w0.3 w1.3] */
                     "addi %[t1], %[w2], 0\n\t"
                     ".insn r 0x57, 1, 0x64, %[t1], %[w3], %[mlo]\n\t" /* t1 = [w2.0 w3.0 w2.1 w3.1] */
                     ".insn r 0x57, 1, 0x64, %[w2], %[w3], %[mhi]\n\t" /* w2 = [w2.2 w3.2 w2.3 w3.3] */
                     "addi %[w1], %[t0], 0\n\t"
                     ".insn r 0x57, 1, 0x64, %[w1], %[t1], %[slo]\n\t" /* w1: the bytes 0 */
                     ".insn r 0x57, 1, 0x64, %[t0], %[t1], %[shi]\n\t" /* t0: the bytes 1 */
                     "addi %[w3], %[w0], 0\n\t"
                     ".insn r 0x57, 1, 0x64, %[w3], %[w2], %[slo]\n\t" /* w3: the bytes 2 */
                     ".insn r 0x57, 1, 0x64, %[w0], %[w2], %[shi]\n\t" /* w0: the bytes 3 */
                     ".insn s 0x2b, 2, %[w1], 4(%[d0])\n\t"
                     ".insn s 0x2b, 2, %[t0], 4(%[d1])\n\t"
                     ".insn s 0x2b, 2, %[w3], 4(%[d2])\n\t"
                     ".insn s 0x2b, 2, %[w0], 4(%[d3])\n\t"
                     "add %[s], %[s], %[sa]\n\t"
                     "add %[d0], %[d0], %[da]\n\t"
                     "add %[d1], %[d1], %[da]\n\t"
                     "add %[d2], %[d2], %[da]\n\t"
                     "add %[d3], %[d3], %[da]\n\t"
                     "1:\n\t.option pop"
                     : [s] "+r"(src), [d0] "+r"(d0), [d1] "+r"(d1), [d2] "+r"(d2), [d3] "+r"(d3), [w0] "=&r"(w0),
                       [w1] "=&r"(w1), [w2] "=&r"(w2), [w3] "=&r"(w3), [t0] "=&r"(t0), [t1] "=&r"(t1)
                     : [n] "r"(n4), [ci] "r"(c_in), [rows] "r"(rows), [sa] "r"(src_adv), [da] "r"(d_adv),
                       [mlo] "r"(mlo), [mhi] "r"(mhi), [slo] "r"(slo), [shi] "r"(shi)
                     : "memory");
}
#endif

/* Planes of channels [c, c + n), n <= 4, at planes (ph rows of row bytes each, one after the other). */
static __attribute__((noinline)) void dw_fill_planes(const dw_planes_t *a, const edgernn_conv_geom_t *g, int c, int n,
                                                     uint8_t *planes)
{
    const int ph = a->ph, row = a->row, c_in = g->in_c;
    const size_t plane = (size_t)ph * row;
    const uint8_t pad = (uint8_t)a->pad;
    int r, x, j;
#if defined(EDGERNN_CONV_HWLOOP) && EDGERNN_CONV_HWLOOP
    /* the planes start 4-byte aligned and hold whole words (DW_PLANE_ROW) */
    dw_fill_words((uint32_t *)(void *)planes, pad * 0x01010101u, (size_t)n * plane / 4);
    if (n == 4 && (((uintptr_t)a->in | (uintptr_t)c | (uintptr_t)c_in) & 3u) == 0) {
        /* the frame's rows [r0, r1) of the padded rows, each its pixels [x0, x1) */
        const int32_t r0 = g->pad_top > 0 ? g->pad_top : 0;
        const int32_t r1 = g->pad_top + g->in_h < ph ? g->pad_top + g->in_h : ph;
        const int32_t x0 = g->pad_left, x1 = g->in_w + g->pad_left < row ? g->in_w + g->pad_left : row;
        uint8_t *d0 = planes + (size_t)r0 * row + x0;
        if (r1 > r0 && x1 > x0 && (x1 - x0) % 4 == 0) {
            dw_fill_quad_rows4(a->in + ((size_t)(r0 - g->pad_top) * g->in_w) * c_in + c, c_in, (x1 - x0) / 4,
                               r1 - r0, (g->in_w - (x1 - x0)) * c_in, row - (x1 - x0), d0, d0 + plane,
                               d0 + 2 * plane, d0 + 3 * plane);
        } else if (r1 > r0 && x1 > x0) {
            dw_fill_quad_rows(a->in + ((size_t)(r0 - g->pad_top) * g->in_w) * c_in + c, c_in, x1 - x0, r1 - r0,
                              (g->in_w - (x1 - x0)) * c_in, row - (x1 - x0), d0, d0 + plane, d0 + 2 * plane,
                              d0 + 3 * plane);
        }
        return;
    }
#else
    for (j = 0; j < n; ++j) {
        memset(planes + j * plane, pad, plane);
    }
#endif
    for (r = 0; r < ph; ++r) {
        const int32_t iy = r - g->pad_top;
        const int32_t x0 = g->pad_left, x1 = g->in_w + g->pad_left < row ? g->in_w + g->pad_left : row;
        const int8_t *src;
        if (iy < 0 || iy >= g->in_h) {
            continue;
        }
        src = a->in + (size_t)iy * g->in_w * c_in + c;
        if (n == 4 && (((uintptr_t)src | (uintptr_t)c_in) & 3u) == 0) {
            uint8_t *d0 = planes + (size_t)r * row, *d1 = d0 + plane, *d2 = d1 + plane, *d3 = d2 + plane;
            for (x = x0; x < x1; ++x, src += c_in) {
                uint32_t v;
                memcpy(&v, src, 4);
                d0[x] = (uint8_t)v;
                d1[x] = (uint8_t)(v >> 8);
                d2[x] = (uint8_t)(v >> 16);
                d3[x] = (uint8_t)(v >> 24);
            }
            continue;
        }
        for (j = 0; j < n; ++j) {
            uint8_t *d = planes + j * plane + (size_t)r * row;
            const int8_t *s_ = src + j;
            for (x = x0; x < x1; ++x, s_ += c_in) {
                d[x] = (uint8_t)*s_;
            }
        }
    }
}

/* off, lo, hi: the output offset and the activation's bounds, as locals (an int8 store may alias any object,
 * so the compiler would reload them through a pointer after each output byte) */
#define DW_PLANE_OUT(y, sum) (y) = (int8_t)edgernn_clamp(edgernn_mbqm_hi((sum), m, sh) + off, lo, hi)
/* The same where the channel's multiplier and shift take edgernn_mbqm_hi_tight (tight, a constant once
 * inlined; e1 = -sh - 1): GAP8's 9-instruction form of the same value */
#define DW_PLANE_OUT_K3(y, sum)                                                                     \
    (y) = (int8_t)edgernn_clamp((tight ? edgernn_mbqm_hi_tight((sum), m, e1) : edgernn_mbqm_hi((sum), m, sh)) + off, \
                                lo, hi)

/* A 3-row filter's pixel pairs of output row oy, its 6 packed filter words in registers. */
static EDGERNN_DOT_INLINE void dw_plane_row_k3(const uint8_t *base, size_t tap_y, int out_w, int out_c, int32_t b,
                                               int32_t m, int32_t sh, int tight, int32_t e1, edgernn_v4s v0,
                                               edgernn_v4s v1, edgernn_v4s v2, edgernn_v4s u0, edgernn_v4s u1,
                                               edgernn_v4s u2, const dw_planes_t *a, int8_t *y)
{
    const int32_t off = a->output_offset, lo = a->act_min, hi = a->act_max;
    const uint8_t *p0 = base, *p1 = base + tap_y, *p2 = base + 2 * tap_y;
    int ox;
    for (ox = 0; ox + 2 <= out_w; ox += 2, y += 2 * out_c) {
        const edgernn_v4s r0 = dw_load4(p0 + ox), r1 = dw_load4(p1 + ox), r2 = dw_load4(p2 + ox);
        int32_t s0 = EDGERNN_SDOTSP4(r0, v0, b), s1 = EDGERNN_SDOTSP4(r0, u0, b);
        s0 = EDGERNN_SDOTSP4(r1, v1, s0);
        s1 = EDGERNN_SDOTSP4(r1, u1, s1);
        s0 = EDGERNN_SDOTSP4(r2, v2, s0);
        s1 = EDGERNN_SDOTSP4(r2, u2, s1);
        DW_PLANE_OUT_K3(y[0], s0);
        DW_PLANE_OUT_K3(y[out_c], s1);
    }
    if (ox < out_w) {
        int32_t s0 = EDGERNN_SDOTSP4(dw_load4(p0 + ox), v0, b);
        s0 = EDGERNN_SDOTSP4(dw_load4(p1 + ox), v1, s0);
        s0 = EDGERNN_SDOTSP4(dw_load4(p2 + ox), v2, s0);
        DW_PLANE_OUT_K3(y[0], s0);
    }
}

/* ---- Rows of a 3-row filter with edgernn_halves, the requantization from 16-bit halves ----
 *
 * Where every accumulator of channel c (its bias and 9 products of any int8 inputs) lies in [-2^30, 2^30) and
 * its multiplier and shift take the form (edgernn_halves_make), each output is edgernn_halves of the sum
 * started at xs0 = bias + 2^30: on GAP8 eight one-cycle instructions where edgernn_mbqm_hi_tight takes 13
 * cycles (its mulh stalls 5), and where act_min >= the output offset (a ReLU's clamp) six (SIGNLESS, its note
 * in edgernn_fixedpoint.h); the clamp is one p.clip where it is int8's whole range. */
static int dw_halves_channel(const dw_planes_t *a, int c, edgernn_halves_t *h)
{
    /* No tap loop is needed for the bound: a channel has at most DW_MAX_KH x 3 = 24 taps, each product of int8
     * values at most 2^14 in magnitude, so the 9 (or 24) products add up to less than 2^19 in magnitude, and a
     * bias in [-2^29, 2^29) keeps every accumulator inside [-2^30, 2^30) for any input. */
    const int32_t bias = a->bias[c];
    return bias >= -((int32_t)1 << 29) && bias < ((int32_t)1 << 29) &&
           edgernn_halves_make(h, a->multiplier[c], a->shift[c], a->output_offset);
}

#if defined(EDGERNN_HALVES_ASM) && defined(EDGERNN_CONV_HWLOOP) && EDGERNN_CONV_HWLOOP
/* GAP8: a row's outputs as one hardware loop (the rules of CONV_QUAD_LOOP's note: uncompressed, loop 0, no
 * loop around it, entered with a count of 1 or more, the body ending on a store). Stride 1: a pixel pair a
 * turn, its 3 filter rows as 3 post-increment word loads (ox and ox + 1 from one word, edgernn_conv.c's
 * planes note) and 6 pv.sdotsp.b, then each sum's requantization and p.sb at out_c steps; stride 2: one
 * pixel a turn, 3 loads and 3 pv.sdotsp.b. A load's word is used 3 or more instructions on. */
#define DW_RQ_CLIP8(t) ".insn r 0x33, 1, 0x0a, %[" t "], %[" t "], x8\n\t" /* p.clip t, t, 8: [-128, 127] */
#define DW_RQ_MINMAX(t) ".insn r 0x33, 6, 2, %[" t "], %[" t "], %[lo]\n\t.insn r 0x33, 4, 2, %[" t "], %[" t "], %[hi]\n\t"
#define DW_RQ_STORE(t) ".insn r 0x2b, 4, 0, %[oc], %[y], %[" t "]\n\t" /* p.sb t, oc(y!) */
#define DW_RQ_SIGNED(acc, t, s, CLAMP) \
    EDGERNN_HALVES_CORE(t, acc) EDGERNN_HALVES_SIGN(t, acc, s) EDGERNN_HALVES_ROUND(t) CLAMP(t) DW_RQ_STORE(t)
#define DW_RQ_SIGNLESS(acc, t, s, CLAMP) EDGERNN_HALVES_CORE(t, acc) EDGERNN_HALVES_ROUND(t) CLAMP(t) DW_RQ_STORE(t)
#define DW_SDOT(acc, x, w) ".insn r 0x57, 1, 0x5c, %[" acc "], %[" x "], %[" w "]\n\t"
#define DW_LOAD(r, p, step) ".insn i 0x0b, 2, %[" r "], " #step "(%[" p "])\n\t"
#define DW_HALVES_OUT                                                                               \
    : [p0] "+r"(p0), [p1] "+r"(p1), [p2] "+r"(p2), [y] "+r"(y), [a0] "=&r"(a0), [a1] "=&r"(a1),    \
      [r0] "=&r"(r0), [r1] "=&r"(r1), [r2] "=&r"(r2)
#define DW_HALVES_IN                                                                                \
    : [n] "r"(n), [v0] "r"(v0), [v1] "r"(v1), [v2] "r"(v2), [u0] "r"(u0), [u1] "r"(u1), [u2] "r"(u2),  \
      [xs0] "r"(xs0), [k1] "r"(h->k1), [k2] "r"(h->k2), [k3] "r"(h->k3), [k4] "r"(k4), [e] "r"(h->e),    \
      [oc] "r"(oc)
/* the clamp's bounds where it is not p.clip's */
#define DW_HALVES_OPERANDS_MINMAX DW_HALVES_OUT DW_HALVES_IN, [lo] "r"(lo), [hi] "r"(hi) : "memory"
#define DW_HALVES_OPERANDS_CLIP8 DW_HALVES_OUT DW_HALVES_IN : "memory"
/* the same with DW_HALVES_ROWS' row count and pointer step (GCC's limit of 30 operands, an in-out one
 * counting 2, leaves no room for the bounds too: only p.clip's forms take all rows in one loop) */
#define DW_HALVES_OPERANDS_CLIP8_ROWS DW_HALVES_OUT DW_HALVES_IN, [rows] "r"(rows), [adv] "r"(adv) : "memory"
#define DW_PAIR_BODY(RQ, CLAMP)                                                                     \
    DW_LOAD("r0", "p0", 2) DW_LOAD("r1", "p1", 2) DW_LOAD("r2", "p2", 2)                           \
    "addi %[a0], %[xs0], 0\n\taddi %[a1], %[xs0], 0\n\t"                                           \
    DW_SDOT("a0", "r0", "v0") DW_SDOT("a1", "r0", "u0") DW_SDOT("a0", "r1", "v1")                  \
    DW_SDOT("a1", "r1", "u1") DW_SDOT("a0", "r2", "v2") DW_SDOT("a1", "r2", "u2")                  \
    RQ("a0", "r0", "r1", CLAMP) RQ("a1", "r2", "r0", CLAMP)
#define DW_SINGLE_BODY(RQ, CLAMP)                                                                   \
    DW_LOAD("r0", "p0", 2) DW_LOAD("r1", "p1", 2) DW_LOAD("r2", "p2", 2)                           \
    "addi %[a0], %[xs0], 0\n\t"                                                                    \
    DW_SDOT("a0", "r0", "v0") DW_SDOT("a0", "r1", "v1") DW_SDOT("a0", "r2", "v2")                  \
    RQ("a0", "r0", "r1", CLAMP)
/* HALFWORDS: lp.setup's offset to the body's last instruction, 2 a (4-byte) instruction: pairs 11 and two
 * requantizations (4 + 2 signed + 1 + 1 or 2 clamp + 1 store each), singles 7 and one */
#define DW_HALVES_ROW(BODY, RQ, CLAMP, OPERANDS, HALFWORDS)                                         \
    __asm__ volatile(".option push\n\t.option norvc\n\t"                                            \
                     "blez %[n], 1f\n\t"                                                            \
                     ".insn i 0x7b, 4, x0, %[n], " #HALFWORDS "\n\t"                                \
                     BODY(RQ, CLAMP)                                                                \
                     "1:\n\t.option pop" OPERANDS)
/* All rows: loop 1 over them around loop 0 (its body then 3 adds that move the plane's row pointers to the
 * next output row, adv; the output pointer runs on, the rows' outputs being consecutive) */
#define DW_HALVES_ROWS(BODY, RQ, CLAMP, OPERANDS, HALFWORDS)                                        \
    __asm__ volatile(".option push\n\t.option norvc\n\t"                                            \
                     "blez %[n], 2f\n\t"                                                            \
                     "blez %[rows], 2f\n\t"                                                         \
                     ".insn i 0x7b, 4, x1, %[rows], " #HALFWORDS " + 8\n\t"                         \
                     ".insn i 0x7b, 4, x0, %[n], " #HALFWORDS "\n\t"                                \
                     BODY(RQ, CLAMP)                                                                \
                     "add %[p0], %[p0], %[adv]\n\t"                                                 \
                     "add %[p1], %[p1], %[adv]\n\t"                                                 \
                     "add %[p2], %[p2], %[adv]\n\t"                                                 \
                     "2:\n\t.option pop" OPERANDS)

/* The first outputs of rows by the hardware loops, p0..p2 the first output's 3 filter rows: rows > 1 only where
 * every output of each row is the loop's (stride 2, or stride 1 with an even out_w), the rows' outputs then
 * consecutive, and the clamp p.clip's (form 2 or 3); else one row's, all at stride 2 and its pairs at stride 1.
 * Returns the outputs done in the (last) row. form: bit 0 SIGNLESS, bit 1 the p.clip clamp. */
static int dw_halves_rows_asm(const uint8_t *p0, const uint8_t *p1, const uint8_t *p2, size_t step_y, int rows,
                              int out_w, int sx, int32_t oc, uint32_t xs0, const edgernn_halves_t *h, int form,
                              int32_t lo, int32_t hi, const edgernn_v4s *wv, const edgernn_v4s *ws, int8_t *y)
{
    const edgernn_v4s v0 = wv[0], v1 = wv[1], v2 = wv[2], u0 = ws[0], u1 = ws[1], u2 = ws[2];
    const int32_t k4 = h->k4 + (form & 1);
    const int n = sx == 1 ? out_w / 2 : out_w;
    const int32_t adv = (int32_t)step_y - 2 * n;
    int32_t a0, a1, r0, r1, r2;
    if (rows > 1) {
        if (sx == 1) {
            if (form == 2) {
                DW_HALVES_ROWS(DW_PAIR_BODY, DW_RQ_SIGNED, DW_RQ_CLIP8, DW_HALVES_OPERANDS_CLIP8_ROWS, 58);
            } else {
                DW_HALVES_ROWS(DW_PAIR_BODY, DW_RQ_SIGNLESS, DW_RQ_CLIP8, DW_HALVES_OPERANDS_CLIP8_ROWS, 50);
            }
        } else if (form == 2) {
            DW_HALVES_ROWS(DW_SINGLE_BODY, DW_RQ_SIGNED, DW_RQ_CLIP8, DW_HALVES_OPERANDS_CLIP8_ROWS, 32);
        } else {
            DW_HALVES_ROWS(DW_SINGLE_BODY, DW_RQ_SIGNLESS, DW_RQ_CLIP8, DW_HALVES_OPERANDS_CLIP8_ROWS, 28);
        }
        return sx == 1 ? 2 * n : n; /* not 2 * n / sx: GCC emits a div (34 cycles) */
    }
    if (sx == 1) {
        switch (form) {
        case 0: DW_HALVES_ROW(DW_PAIR_BODY, DW_RQ_SIGNED, DW_RQ_MINMAX, DW_HALVES_OPERANDS_MINMAX, 62); break;
        case 1: DW_HALVES_ROW(DW_PAIR_BODY, DW_RQ_SIGNLESS, DW_RQ_MINMAX, DW_HALVES_OPERANDS_MINMAX, 54); break;
        case 2: DW_HALVES_ROW(DW_PAIR_BODY, DW_RQ_SIGNED, DW_RQ_CLIP8, DW_HALVES_OPERANDS_CLIP8, 58); break;
        default: DW_HALVES_ROW(DW_PAIR_BODY, DW_RQ_SIGNLESS, DW_RQ_CLIP8, DW_HALVES_OPERANDS_CLIP8, 50); break;
        }
        return 2 * n;
    }
    switch (form) {
    case 0: DW_HALVES_ROW(DW_SINGLE_BODY, DW_RQ_SIGNED, DW_RQ_MINMAX, DW_HALVES_OPERANDS_MINMAX, 34); break;
    case 1: DW_HALVES_ROW(DW_SINGLE_BODY, DW_RQ_SIGNLESS, DW_RQ_MINMAX, DW_HALVES_OPERANDS_MINMAX, 30); break;
    case 2: DW_HALVES_ROW(DW_SINGLE_BODY, DW_RQ_SIGNED, DW_RQ_CLIP8, DW_HALVES_OPERANDS_CLIP8, 32); break;
    default: DW_HALVES_ROW(DW_SINGLE_BODY, DW_RQ_SIGNLESS, DW_RQ_CLIP8, DW_HALVES_OPERANDS_CLIP8, 28); break;
    }
    return n;
}

/* GAP8: two output rows a turn, stride 1 and dilation 1 along y, an even out_w, the clamp p.clip's. Output rows oy
 * and oy + 1 read plane rows oy .. oy + 3, so a turn of 2 pixels x 2 rows is 4 word loads (register-step p.lw down
 * the 4 rows, the last stepping back up and 2 along) where two single-row turns take 6, and 12 pv.sdotsp.b; then the
 * 4 requantizations, row oy + 1's outputs stored at out_row bytes past y (p.sb rs2, rs3(rs1)), row oy's with y's
 * post-increment. Loop 1 runs over the row pairs (p += adv, y += out_row after each). The operands would be 36, past
 * GCC's 30: the asm reads its values from this record into registers it names itself (26 clobbered), the record's
 * pointer becoming adv. Body: 4 loads, 4 moves of the sum's start, 12 dot products, 4 x (8 or 6) + 4 stores. */
typedef struct {
    const uint8_t *p;                        /*  0: output row oy's first filter row at pixel 0 */
    int32_t row, back;                       /*  4: a plane row's bytes; 8: 2 - 3 row */
    int8_t *y;                               /* 12 */
    int32_t oc, out_row;                     /* 16: out_c; 20: out_w * out_c */
    uint32_t v0, v1, v2, u0, u1, u2;         /* 24 .. 44: [w0 w1 w2 0] and [0 w0 w1 w2] a filter row */
    uint32_t xs0, k1, k2, k3;                /* 48 .. 60: the sum's start and edgernn_halves' constants */
    int32_t k4, e;                           /* 64, 68 */
    int32_t n, row_pairs, adv;               /* 72: pixel pairs a row; 76; 80: 2 row - 2 n */
    int32_t yadv;                            /* 84: 2 out_row - 2 n oc (out_row where out_w is even) */
} dw_rows2_t;
typedef char dw_rows2_layout_t[offsetof(dw_rows2_t, yadv) == 84 && offsetof(dw_rows2_t, xs0) == 48 ? 1 : -1];

/* registers: p t0, row t1, back t2, y s0, oc s1, out_row a2, v0..v2 a3..a5, u0..u2 a6 a7 s2, xs0 s3, k1..k4 s4..s7,
 * e s8, the 4 sums s9 s10 s11 t3 (rows oy, oy; oy + 1, oy + 1), the loads t4 t5 t6, n ra, yadv a1, adv a0 (the
 * record's pointer, bound to a0: every other register the compiler allocates is clobbered) */
#define DW2_LOAD(r, step) ".insn r 0x0b, 7, 0x10, " r ", t0, " step "\n\t" /* p.lw r, step(t0!) */
#define DW2_SDOT(acc, x, w) ".insn r 0x57, 1, 0x5c, " acc ", " x ", " w "\n\t"
#define DW2_SUMS                                                                                    \
    DW2_LOAD("t4", "t1") DW2_LOAD("t5", "t1")                                                       \
    "addi s9, s3, 0\n\taddi s10, s3, 0\n\t"                                                        \
    DW2_SDOT("s9", "t4", "a3") DW2_SDOT("s10", "t4", "a6")                                          \
    DW2_LOAD("t6", "t1")                                                                            \
    "addi s11, s3, 0\n\taddi t3, s3, 0\n\t"                                                        \
    DW2_SDOT("s9", "t5", "a4") DW2_SDOT("s10", "t5", "a7") DW2_SDOT("s11", "t5", "a3") DW2_SDOT("t3", "t5", "a6") \
    DW2_LOAD("t4", "t2")                                                                            \
    DW2_SDOT("s9", "t6", "a5") DW2_SDOT("s10", "t6", "s2") DW2_SDOT("s11", "t6", "a4") DW2_SDOT("t3", "t6", "a7") \
    DW2_SDOT("s11", "t4", "a5") DW2_SDOT("t3", "t4", "s2")
/* the sum acc requantized into t5 (the sign's scratch: acc itself, dead by then), clipped to int8, stored */
#define DW2_RQ_SIGNED(acc) EDGERNN_HALVES_CORE_REGS("t5", acc, "s4", "s5", "s6")                   \
    EDGERNN_HALVES_SIGN_REGS("t5", acc, acc) EDGERNN_HALVES_ROUND_REGS("t5", "s7", "s8")            \
    ".insn r 0x33, 1, 0x0a, t5, t5, x8\n\t"
#define DW2_RQ_SIGNLESS(acc) EDGERNN_HALVES_CORE_REGS("t5", acc, "s4", "s5", "s6")                 \
    EDGERNN_HALVES_ROUND_REGS("t5", "s7", "s8") ".insn r 0x33, 1, 0x0a, t5, t5, x8\n\t"
#define DW2_STORE_NEXT_ROW ".insn r 0x23, 4, 0, a2, s0, t5\n\t" /* p.sb t5, a2(s0) */
#define DW2_STORE ".insn r 0x2b, 4, 0, s1, s0, t5\n\t"          /* p.sb t5, s1(s0!) */
#define DW2_BODY(RQ) DW2_SUMS RQ("s11") DW2_STORE_NEXT_ROW RQ("s9") DW2_STORE RQ("t3") DW2_STORE_NEXT_ROW \
    RQ("s10") DW2_STORE
/* HALFWORDS: lp.setup's offset to loop 0's last instruction, 2 a body instruction (56 signed, 48 signless) */
#define DW2_LOOP(RQ, HALFWORDS)                                                                     \
    __asm__ volatile(".option push\n\t.option norvc\n\t"                                            \
                     "lw t0, 0(%[q])\n\tlw t1, 4(%[q])\n\tlw t2, 8(%[q])\n\tlw s0, 12(%[q])\n\t"     \
                     "lw s1, 16(%[q])\n\tlw a2, 20(%[q])\n\tlw a3, 24(%[q])\n\tlw a4, 28(%[q])\n\t"  \
                     "lw a5, 32(%[q])\n\tlw a6, 36(%[q])\n\tlw a7, 40(%[q])\n\tlw s2, 44(%[q])\n\t"  \
                     "lw s3, 48(%[q])\n\tlw s4, 52(%[q])\n\tlw s5, 56(%[q])\n\tlw s6, 60(%[q])\n\t"  \
                     "lw s7, 64(%[q])\n\tlw s8, 68(%[q])\n\tlw ra, 72(%[q])\n\tlw t4, 76(%[q])\n\t"  \
                     "lw a1, 84(%[q])\n\tlw %[q], 80(%[q])\n\t"                                    \
                     "blez ra, 2f\n\t"                                                              \
                     "blez t4, 2f\n\t"                                                              \
                     ".insn i 0x7b, 4, x1, t4, " #HALFWORDS " + 6\n\t"                              \
                     ".insn i 0x7b, 4, x0, ra, " #HALFWORDS "\n\t"                                  \
                     DW2_BODY(RQ)                                                                   \
                     "add t0, t0, %[q]\n\t"                                                         \
                     "add s0, s0, a1\n\t"                                                           \
                     "2:\n\t.option pop"                                                            \
                     : [q] "+r"(q)                                                                  \
                     :                                                                              \
                     : "memory", "ra", "t0", "t1", "t2", "s0", "s1", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "s2", \
                       "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "t3", "t4", "t5", "t6")

static void dw_halves_rows2_asm(const dw_rows2_t *r, int signless)
{
    register const dw_rows2_t *q __asm__("a0") = r;
    if (signless) {
        DW2_LOOP(DW2_RQ_SIGNLESS, 96);
    } else {
        DW2_LOOP(DW2_RQ_SIGNED, 112);
    }
}

/* Whether a worker's channels take the two-row loop whole, with the record's words they share (r): a 3x3 filter at
 * stride 1 and dilation 1, an even out_h, the clamp p.clip's. Then each channel is dw_rows2_channel (an odd out_w's
 * last column in C). */
/* The record's words that every channel of the op shares: the planes' and the output's geometry. */
static void dw_rows2_shared(const dw_planes_t *a, const edgernn_conv_geom_t *g, dw_rows2_t *r)
{
    r->row = (int32_t)a->row;
    r->back = 2 - 3 * (int32_t)a->row;
    r->oc = g->out_c;
    r->out_row = g->out_w * g->out_c;
    r->n = g->out_w / 2;
    r->row_pairs = g->out_h / 2;
    r->adv = 2 * (int32_t)a->row - 2 * r->n;
    r->yadv = 2 * r->out_row - 2 * r->n * g->out_c; /* out_row where out_w is even */
}

/* A channel's words of the record: its plane and output, the sum's start, edgernn_halves' constants (k4 one more
 * for the signless form). */
static void dw_rows2_own(dw_rows2_t *r, const uint8_t *plane, int8_t *y, uint32_t xs0, const edgernn_halves_t *h,
                         int signless)
{
    r->p = plane;
    r->y = y;
    r->xs0 = xs0;
    r->k1 = h->k1;
    r->k2 = h->k2;
    r->k3 = h->k3;
    r->k4 = h->k4 + (signless ? 1 : 0);
    r->e = h->e;
}

static int dw_rows2_applies(const dw_planes_t *a, const edgernn_conv_geom_t *g, dw_rows2_t *r)
{
    if (!(g->k_h == 3 && g->k_w == 3 && g->stride_w == 1 && g->stride_h == 1 && g->dil_h == 1 && g->out_w >= 2 &&
          g->out_h >= 2 && (g->out_h & 1) == 0 && a->act_min == -128 && a->act_max == 127)) {
        return 0;
    }
    dw_rows2_shared(a, g, r);
    return 1;
}

/* Output channel c by the two-row loop, its words of r set from the filter, bias and multiplier (what
 * dw_plane_channel derives through its general path, in fewer instructions); 0 where the channel does not take
 * edgernn_halves (the caller then takes dw_plane_channel). */
static __attribute__((noinline)) int dw_rows2_channel(const dw_planes_t *a, dw_rows2_t *r, int c,
                                                      const uint8_t *plane)
{
    const int32_t bias = a->bias[c], oc = r->oc;
    const int8_t *w = a->w + c;
    edgernn_halves_t h;
    if (bias < -((int32_t)1 << 29) || bias >= ((int32_t)1 << 29) ||
        !edgernn_halves_make(&h, a->multiplier[c], a->shift[c], a->output_offset)) {
        return 0;
    }
    r->v0 = dw_pack(w[0], w[oc], w[2 * oc], 0);
    r->v1 = dw_pack(w[3 * oc], w[4 * oc], w[5 * oc], 0);
    r->v2 = dw_pack(w[6 * oc], w[7 * oc], w[8 * oc], 0);
    r->u0 = r->v0 << 8;
    r->u1 = r->v1 << 8;
    r->u2 = r->v2 << 8;
    dw_rows2_own(r, plane, a->out + c, (uint32_t)bias + (1u << 30), &h, a->act_min >= a->output_offset);
    dw_halves_rows2_asm(r, a->act_min >= a->output_offset);
    if (a->g->out_w & 1) {
        const int32_t ox = a->g->out_w - 1, rows = a->g->out_h, row = r->row;
        const uint8_t *p = plane + ox;
        int8_t *y = r->y + (size_t)ox * oc;
        edgernn_v4s wv[3];
        int oy;
        memcpy(wv, &r->v0, sizeof wv);
        for (oy = 0; oy < rows; ++oy, p += row, y += r->out_row) {
            int32_t s0 = EDGERNN_SDOTSP4(dw_load4(p), wv[0], (int32_t)r->xs0);
            s0 = EDGERNN_SDOTSP4(dw_load4(p + row), wv[1], s0);
            s0 = EDGERNN_SDOTSP4(dw_load4(p + 2 * row), wv[2], s0);
            *y = (int8_t)edgernn_clamp(edgernn_halves((uint32_t)s0, &h), -128, 127);
        }
    }
    return 1;
}
#endif

/* Output channel c of a 3-row filter with edgernn_halves (h), its filter rows packed in wv (and ws). */
static void dw_halves_channel_rows(const dw_planes_t *a, const edgernn_conv_geom_t *g, int c, const uint8_t *plane,
                                   const edgernn_halves_t *h, const edgernn_v4s *wv, const edgernn_v4s *ws)
{
    const int out_w = g->out_w, out_c = g->out_c, sx = g->stride_w;
    const size_t tap_y = (size_t)g->dil_h * a->row, step_y = (size_t)g->stride_h * a->row;
    const uint32_t xs0 = (uint32_t)a->bias[c] + (1u << 30);
    const int32_t lo = a->act_min, hi = a->act_max;
    int oy, ox;
#if defined(EDGERNN_HALVES_ASM) && defined(EDGERNN_CONV_HWLOOP) && EDGERNN_CONV_HWLOOP
    const int form = (lo >= a->output_offset ? 1 : 0) | (lo == -128 && hi == 127 ? 2 : 0);
#endif
    (void)ws;
#if defined(EDGERNN_HALVES_ASM) && defined(EDGERNN_CONV_HWLOOP) && EDGERNN_CONV_HWLOOP
    if (sx == 1 && g->stride_h == 1 && g->dil_h == 1 && out_w % 2 == 0 && out_w >= 2 && g->out_h >= 2 && (form & 2)) {
        dw_rows2_t r;
        dw_rows2_shared(a, g, &r);
        dw_rows2_own(&r, plane, a->out + c, xs0, h, form & 1);
        memcpy(&r.v0, wv, 3 * sizeof r.v0);
        memcpy(&r.u0, ws, 3 * sizeof r.u0);
        dw_halves_rows2_asm(&r, form & 1);
        if (g->out_h & 1) {
            const size_t oy = (size_t)g->out_h - 1;
            dw_halves_rows_asm(plane + oy * step_y, plane + oy * step_y + tap_y, plane + oy * step_y + 2 * tap_y,
                               step_y, 1, out_w, sx, out_c, xs0, h, form, lo, hi, wv, ws,
                               a->out + oy * out_w * out_c + c);
        }
        return;
    }
    if ((sx == 2 || out_w % 2 == 0) && out_w >= 2 && (form & 2)) {
        dw_halves_rows_asm(plane, plane + tap_y, plane + 2 * tap_y, step_y, g->out_h, out_w, sx, out_c, xs0, h, form,
                           lo, hi, wv, ws, a->out + c);
        return;
    }
#endif
    for (oy = 0; oy < g->out_h; ++oy) {
        const uint8_t *base = plane + (size_t)oy * step_y;
        int8_t *y = a->out + (size_t)oy * out_w * out_c + c;
        ox = 0;
#if defined(EDGERNN_HALVES_ASM) && defined(EDGERNN_CONV_HWLOOP) && EDGERNN_CONV_HWLOOP
        ox = dw_halves_rows_asm(base, base + tap_y, base + 2 * tap_y, step_y, 1, out_w, sx, out_c, xs0, h, form, lo,
                                hi, wv, ws, y);
#endif
        for (; ox < out_w; ++ox) {
            const uint8_t *p = base + (size_t)ox * sx;
            int32_t s0 = EDGERNN_SDOTSP4(dw_load4(p), wv[0], (int32_t)xs0);
            s0 = EDGERNN_SDOTSP4(dw_load4(p + tap_y), wv[1], s0);
            s0 = EDGERNN_SDOTSP4(dw_load4(p + 2 * tap_y), wv[2], s0);
            y[(size_t)ox * out_c] = (int8_t)edgernn_clamp(edgernn_halves((uint32_t)s0, h), lo, hi);
        }
    }
}

/* Output channel c from its plane. */
static __attribute__((noinline)) void dw_plane_channel(const dw_planes_t *a, const edgernn_conv_geom_t *g, int c,
                                                       const uint8_t *plane)
{
    const int k_h = g->k_h, k_w = g->k_w, out_c = g->out_c, row = a->row;
    const int32_t b = a->bias[c], m = a->multiplier[c], sh = a->shift[c];
    const int32_t off = a->output_offset, lo = a->act_min, hi = a->act_max;
    const size_t tap_y = (size_t)g->dil_h * row, step_y = (size_t)g->stride_h * row;
    edgernn_v4s wv[DW_MAX_KH], ws[DW_MAX_KH];
    int ky, oy, ox;
    for (ky = 0; ky < k_h; ++ky) {
        const int8_t *wk = a->w + (size_t)ky * k_w * out_c + c;
        const int32_t w0 = wk[0], w1 = k_w > 1 ? wk[out_c] : 0, w2 = k_w > 2 ? wk[2 * out_c] : 0;
        /* [0 w0 w1 w2] is [w0 w1 w2 0] a byte up */
        const uint32_t v = dw_pack(w0, w1, w2, 0), u = v << 8;
        memcpy(&wv[ky], &v, sizeof v);
        memcpy(&ws[ky], &u, sizeof u);
    }
    if (k_h == 3) {
        edgernn_halves_t h;
        if (dw_halves_channel(a, c, &h)) {
            dw_halves_channel_rows(a, g, c, plane, &h, wv, ws);
            return;
        }
    }
    if (k_h == 3 && g->stride_w == 1) {
        const edgernn_v4s v0 = wv[0], v1 = wv[1], v2 = wv[2], u0 = ws[0], u1 = ws[1], u2 = ws[2];
        const int32_t e1 = -sh - 1;
        if (edgernn_mbqm_hi_tight_applies(m, sh)) {
            for (oy = 0; oy < g->out_h; ++oy) {
                dw_plane_row_k3(plane + (size_t)oy * step_y, tap_y, g->out_w, out_c, b, m, sh, 1, e1, v0, v1, v2, u0,
                                u1, u2, a, a->out + (size_t)oy * g->out_w * out_c + c);
            }
        } else {
            for (oy = 0; oy < g->out_h; ++oy) {
                dw_plane_row_k3(plane + (size_t)oy * step_y, tap_y, g->out_w, out_c, b, m, sh, 0, e1, v0, v1, v2, u0,
                                u1, u2, a, a->out + (size_t)oy * g->out_w * out_c + c);
            }
        }
        return;
    }
    for (oy = 0; oy < g->out_h; ++oy) {
        const uint8_t *base = plane + (size_t)oy * step_y;
        int8_t *y = a->out + (size_t)oy * g->out_w * out_c + c;
        if (g->stride_w == 2) {
            for (ox = 0; ox < g->out_w; ++ox, y += out_c) {
                int32_t s0 = b;
                for (ky = 0; ky < k_h; ++ky) {
                    s0 = EDGERNN_SDOTSP4(dw_load4(base + ky * tap_y + 2 * ox), wv[ky], s0);
                }
                DW_PLANE_OUT(y[0], s0);
            }
            continue;
        }
        for (ox = 0; ox + 2 <= g->out_w; ox += 2, y += 2 * out_c) {
            int32_t s0 = b, s1 = b;
            for (ky = 0; ky < k_h; ++ky) {
                const edgernn_v4s r = dw_load4(base + ky * tap_y + ox);
                s0 = EDGERNN_SDOTSP4(r, wv[ky], s0);
                s1 = EDGERNN_SDOTSP4(r, ws[ky], s1);
            }
            DW_PLANE_OUT(y[0], s0);
            DW_PLANE_OUT(y[out_c], s1);
        }
        if (ox < g->out_w) {
            int32_t s0 = b;
            for (ky = 0; ky < k_h; ++ky) {
                s0 = EDGERNN_SDOTSP4(dw_load4(base + ky * tap_y + ox), wv[ky], s0);
            }
            DW_PLANE_OUT(y[0], s0);
        }
    }
}

/* Workers [k_begin, k_end): worker k's channels (whole quads where the team has enough of them), each
 * quad's planes filled in slot k, then each channel computed from its plane. */
static __attribute__((noinline)) void dw_planes_workers_general(const dw_planes_t *a, int k_begin, int k_end)
{
    GEOM_LOCAL_FROM(a->g);
    const size_t plane = (size_t)a->ph * a->row;
    const int grain = g->out_c >= 4 * a->workers ? 4 : 1;
    int k;
    for (k = k_begin; k < k_end; ++k) {
        uint8_t *slot = (uint8_t *)a->scratch + (size_t)k * EDGERNN_DW_PLANES * plane;
        int begin, end, c;
        edgernn_team_range(k, a->workers, g->out_c, grain, &begin, &end);
        for (c = begin; c < end; c += EDGERNN_DW_PLANES) {
            const int n = end - c < EDGERNN_DW_PLANES ? end - c : EDGERNN_DW_PLANES;
            int j;
            dw_fill_planes(a, g, c, n, slot);
            for (j = 0; j < n; ++j) {
                dw_plane_channel(a, g, c + j, slot + j * plane);
            }
        }
    }
}

#if defined(EDGERNN_HALVES_ASM) && defined(EDGERNN_CONV_HWLOOP) && EDGERNN_CONV_HWLOOP
/* The same where every channel may take the two-row loop (dw_rows2_applies): a worker's entry that holds nothing
 * for the general path (whose invariants, hoisted, took a core some 1,300 cycles before its first channel). */
static __attribute__((noinline)) void dw_rows2_workers(const dw_planes_t *a, dw_rows2_t *r, int k_begin, int k_end)
{
    const edgernn_conv_geom_t *g = a->g;
    const size_t plane = (size_t)a->ph * a->row;
    const int out_c = g->out_c, grain = out_c >= 4 * a->workers ? 4 : 1;
    int k;
    for (k = k_begin; k < k_end; ++k) {
        uint8_t *slot = (uint8_t *)a->scratch + (size_t)k * EDGERNN_DW_PLANES * plane;
        int begin, end, c;
        edgernn_team_range(k, a->workers, out_c, grain, &begin, &end);
        for (c = begin; c < end; c += EDGERNN_DW_PLANES) {
            const int n = end - c < EDGERNN_DW_PLANES ? end - c : EDGERNN_DW_PLANES;
            int j;
            dw_fill_planes(a, g, c, n, slot);
            for (j = 0; j < n; ++j) {
                if (!dw_rows2_channel(a, r, c + j, slot + j * plane)) {
                    dw_plane_channel(a, g, c + j, slot + j * plane);
                }
            }
        }
    }
}
#endif

static void dw_planes_workers(const void *args, int k_begin, int k_end)
{
    const dw_planes_t *a = (const dw_planes_t *)args;
#if defined(EDGERNN_HALVES_ASM) && defined(EDGERNN_CONV_HWLOOP) && EDGERNN_CONV_HWLOOP
    dw_rows2_t r;
    if (dw_rows2_applies(a, a->g, &r)) {
        dw_rows2_workers(a, &r, k_begin, k_end);
        return;
    }
#endif
    dw_planes_workers_general(a, k_begin, k_end);
}

static void dw_planes_setup(dw_planes_t *a, const edgernn_conv_geom_t *g, const int8_t *in, const int8_t *w,
                            const int32_t *bias, const int32_t *multiplier, const int32_t *shift,
                            int32_t input_zero_point, int32_t output_offset, int32_t act_min, int32_t act_max,
                            int workers, int8_t *scratch, int8_t *out)
{
    a->g = g;
    a->in = in;
    a->w = w;
    a->bias = bias;
    a->multiplier = multiplier;
    a->shift = shift;
    a->pad = input_zero_point;
    a->output_offset = output_offset;
    a->act_min = act_min;
    a->act_max = act_max;
    a->workers = workers;
    a->ph = (g->out_h - 1) * g->stride_h + (g->k_h - 1) * g->dil_h + 1;
    a->pw = (g->out_w - 1) * g->stride_w + (g->k_w - 1) * g->dil_w + 1;
    a->row = DW_PLANE_ROW(a->pw);
    a->scratch = scratch;
    a->out = out;
}
#endif

/* ---- CONV_2D over one input channel (a camera CNN's stem) ----
 *
 * With one input channel a pixel's patch is k_h rows of k_w bytes of the frame itself, so nothing is gathered:
 * where a filter row is at most 3 taps (dilation 1 along x, stride 1 or 2 along x, at most DW_MAX_KH rows),
 * each output channel is a depthwise planes' channel (the planes note above: a row's taps one word against
 * [w0 w1 w2 0], at stride 1 the next pixel's against [0 w0 w1 w2]) whose plane is the frame, read by every
 * channel; 3-row filters with edgernn_halves take the planes' hardware loop. Each sum is bias + the patch's
 * products (exact int32, in another order: the same bytes). Where the frame is far and scratch near
 * (EDGERNN_NEAR: GAP8's L2 and L1, where a load from L2 takes a cluster core some 18 cycles in GVSOC) and the
 * slots fit (conv_stem_slot), each worker copies the padded frame's rows of EDGERNN_STEM_CHUNK_ROWS output rows
 * at a time into its slot (the padding as the zero point) and reads them there, the team split by output rows.
 * Else a near frame is read in place, the team split by output channels where each worker gets as many, else by
 * pixels, and its padding is not made: a filter row outside the frame adds zp times its weights' sum to the
 * sum's start, its word's weights 0, and a pixel whose row of taps is not one word inside the frame (the left
 * and right edges) has its words made with the zero point in C. A far frame without slots is left to the
 * patches (one far load a tap, where in place would take one a filter row a channel). */
#if defined(CONV_PAIRS)
/* The output rows a worker's slot holds the input rows of, and the most bytes the 8 slots may take
 * (edgernn/backend/layout.py's STEM_CHUNK_ROWS and STEM_ROWS_MAX). */
#define EDGERNN_STEM_CHUNK_ROWS 2
#define EDGERNN_STEM_ROWS_MAX 4096
/* The stem's helpers out of line and without arrays of row pointers: a cluster core's stack is small, and under an
 * unfused DMA band's kernel the master's 2 KiB (the SDK's CL_MASTER_CORE_STACK_SIZE) already hold some 1,500 bytes
 * of the bands' frames (edgernn_conv_dma.c), an interrupt's on top. With its rows inlined, a worker's frame and
 * conv_stem_pixels' took 592 bytes, and a 40x200 frame's 3x3 stem in DMA bands never returned in GVSOC. */
#if defined(__GNUC__)
#define EDGERNN_STEM_NOINLINE __attribute__((noinline))
#else
#define EDGERNN_STEM_NOINLINE
#endif
#if defined(EDGERNN_NEAR)
#define STEM_COPY(in, scratch) (!EDGERNN_NEAR(in) && EDGERNN_NEAR(scratch))
#else
#define STEM_COPY(in, scratch) 1 /* no nearer memory: copied wherever the slots fit (the host's tests run it) */
#endif

typedef struct {
    const edgernn_conv_geom_t *g;
    const int8_t *in, *w;
    const int32_t *bias, *multiplier, *shift;
    int32_t pad, output_offset, act_min, act_max;
    int workers, by_channels;
    int32_t slot; /* bytes of a worker's slot of scratch where the rows are copied, 0 where read in place */
    int8_t *scratch, *out;
} conv_stem_t;

/* The frame's rows from first on as the kernel reads them: row iy at base + (iy - first) * row, pixel x of the
 * frame at byte x + left of its row, bytes [0, width) of a row readable (the zero point outside the frame's). */
typedef struct {
    const int8_t *base;
    int32_t row, first, left, width;
} conv_stem_rows_t;

/* One output channel's filter: its rows' words ([w0 w1 w2 0], and a byte up for a pair's second pixel), the sum's
 * start (bias, + 2^30 with halves) and the requantization. */
typedef struct {
    edgernn_v4s v[DW_MAX_KH], u[DW_MAX_KH];
    int32_t start, m, sh;
    int halves;
    edgernn_halves_t h;
} conv_stem_channel_t;

static int conv_stem_apply(const edgernn_conv_geom_t *g)
{
    return g->in_c == 1 && g->k_w <= 3 && g->dil_w == 1 && (g->stride_w == 1 || g->stride_w == 2) &&
           g->k_h <= DW_MAX_KH;
}

/* The bytes of a copied row: the padded frame's columns that the filter reads and 3 more (DW_PLANE_ROW). */
static int32_t conv_stem_row_bytes(const edgernn_conv_geom_t *g)
{
    return DW_PLANE_ROW((g->out_w - 1) * g->stride_w + g->k_w);
}

/* A worker's slot of copied rows in bytes, 0 where the slots would take more than EDGERNN_STEM_ROWS_MAX (the
 * frame then read in place): a chunk's input rows. The widths fix it, not the heights, so that a band of the
 * frame (edgernn_conv_max_pool_s8) needs no more than the whole. */
static int32_t conv_stem_slot(const edgernn_conv_geom_t *g)
{
    const int32_t rows = (EDGERNN_STEM_CHUNK_ROWS - 1) * g->stride_h + (g->k_h - 1) * g->dil_h + 1;
    const int32_t slot = rows * conv_stem_row_bytes(g);
    return slot * EDGERNN_CONV_TEAM_SLOTS <= EDGERNN_STEM_ROWS_MAX ? slot : 0;
}

/* Channel o, its filter read from the blocked weights (edgernn_dot.h) of out_c rows of k_h * k_w inputs: the
 * row's whole groups of 4 a word each, its last n mod 4 bytes, then each filter row's word from those. */
static EDGERNN_STEM_NOINLINE void conv_stem_channel(const conv_stem_t *a, const edgernn_conv_geom_t *g, int o,
                                                    conv_stem_channel_t *ch)
{
    const int n_out = g->out_c, k_h = g->k_h, k_w = g->k_w, n = k_h * k_w, o8 = n_out & ~7, whole = n & ~3;
    const int32_t bias = a->bias[o];
    const int R = o < o8 ? 8 : (n_out - o8 >= 4 && o < o8 + 4 ? 4 : 1); /* 1: a last row, row-major */
    const int oo = o & (R - 1);
    const uint8_t *w = (const uint8_t *)a->w + (size_t)(o - oo) * n;
    const uint32_t mask = 0xFFFFFFFFu >> (8 * (4 - k_w));
    uint32_t taps[(DW_MAX_KH * 3 + 3) / 4 + 1]; /* the row's n bytes, then zeros */
    uint8_t *t = (uint8_t *)taps;
    int j, ky;
    for (j = 0; j < whole; j += 4) {
        const edgernn_v4s v = dw_load4(w + (size_t)j * R + (size_t)oo * 4);
        memcpy(&taps[j >> 2], &v, sizeof v);
    }
    taps[whole >> 2] = 0;
    for (; j < n; ++j) {
        t[j] = w[(size_t)whole * R + (size_t)oo * (n - whole) + (j - whole)];
    }
    for (ky = 0; ky < k_h; ++ky) {
        edgernn_v4s v = dw_load4(t + ky * k_w);
        uint32_t b;
        memcpy(&b, &v, sizeof b);
        b &= mask;
        memcpy(&v, &b, sizeof v);
        ch->v[ky] = v;
        b <<= 8;
        memcpy(&ch->u[ky], &b, sizeof b);
    }
    ch->m = a->multiplier[o];
    ch->sh = a->shift[o];
    /* every accumulator inside [-2^30, 2^30): at most DW_MAX_KH x 3 products of int8 values (dw_halves_channel) */
    ch->halves = bias >= -((int32_t)1 << 29) && bias < ((int32_t)1 << 29) &&
                 edgernn_halves_make(&ch->h, ch->m, ch->sh, a->output_offset);
    ch->start = ch->halves ? (int32_t)((uint32_t)bias + (1u << 30)) : bias;
}

/* Output pixels [ox, end) of a row in C: filter row ky reads the frame's row y0 + ky dil_h of f where bit ky of
 * inside is set (the others are outside the frame, their zero point in start); a row of taps one word inside the
 * frame is loaded, another made with the zero point outside. */
static EDGERNN_STEM_NOINLINE void conv_stem_pixels(const conv_stem_t *a, const edgernn_conv_geom_t *g,
                                                   const conv_stem_rows_t *f, const conv_stem_channel_t *ch,
                                                   int32_t y0, uint32_t inside, int32_t start, int ox, int end,
                                                   int8_t *y)
{
    const int k_h = g->k_h, k_w = g->k_w, sx = g->stride_w, out_c = g->out_c;
    const int32_t in_w = f->width, pad = a->pad, off = a->output_offset, lo = a->act_min, hi = a->act_max;
    int ky, kx;
    for (; ox < end; ++ox, y += out_c) {
        const int32_t x0 = ox * sx - f->left;
        int32_t acc = start;
        for (ky = 0; ky < k_h; ++ky) {
            const int8_t *rp;
            edgernn_v4s r;
            if (!((inside >> ky) & 1u)) {
                continue;
            }
            rp = f->base + (size_t)(y0 + ky * g->dil_h - f->first) * f->row;
            if (x0 >= 0 && x0 + 4 <= in_w) {
                r = dw_load4((const uint8_t *)rp + x0);
            } else {
                uint32_t v = 0;
                for (kx = 0; kx < k_w; ++kx) {
                    const int32_t x = x0 + kx;
                    v |= (uint32_t)(uint8_t)(x >= 0 && x < in_w ? rp[x] : pad) << (8 * kx);
                }
                memcpy(&r, &v, sizeof r);
            }
            acc = EDGERNN_SDOTSP4(r, ch->v[ky], acc);
        }
        *y = (int8_t)edgernn_clamp(ch->halves ? edgernn_halves((uint32_t)acc, &ch->h)
                                              : edgernn_mbqm_hi(acc, ch->m, ch->sh) + off,
                                   lo, hi);
    }
}

/* Channel ch's outputs of pixels [xa, xb) of output row oy from the frame's rows f, y at pixel xa's; pixels
 * [lo, hi) of every row have their rows of taps one word of f's (x0 >= 0, x0 + 4 <= width): the hardware
 * loop's where it applies. */
static EDGERNN_STEM_NOINLINE void conv_stem_row(const conv_stem_t *a, const edgernn_conv_geom_t *g,
                                                const conv_stem_rows_t *f, const conv_stem_channel_t *ch, int oy,
                                                int xa, int xb, int lo, int hi, int8_t *y)
{
    const int k_h = g->k_h;
    const int32_t y0 = oy * g->stride_h - g->pad_top;
    const int mid0 = lo < xa ? xa : (lo > xb ? xb : lo), mid1 = hi > xb ? xb : (hi < mid0 ? mid0 : hi);
    const uint32_t ones = 0x01010101u;
    edgernn_v4s one;
    uint32_t inside = 0;
    int32_t start = ch->start;
    int ky, ox;
    memcpy(&one, &ones, sizeof one);
    for (ky = 0; ky < k_h; ++ky) {
        const int32_t iy = y0 + ky * g->dil_h;
        if (iy >= 0 && iy < g->in_h) {
            inside |= 1u << ky;
        } else {
            start += a->pad * EDGERNN_SDOTSP4(ch->v[ky], one, 0); /* the zero point times the row's weights */
        }
    }
    if (xa < mid0) {
        conv_stem_pixels(a, g, f, ch, y0, inside, start, xa, mid0, y);
    }
    ox = mid0;
#if defined(EDGERNN_HALVES_ASM) && defined(EDGERNN_CONV_HWLOOP) && EDGERNN_CONV_HWLOOP
    if (k_h == 3 && ch->halves && inside == 7u && mid1 > mid0) {
        /* every row inside (a row outside would be read at an address before or after the frame) */
        const int32_t lo_ = a->act_min, hi_ = a->act_max;
        const int form = (lo_ >= a->output_offset ? 1 : 0) | (lo_ == -128 && hi_ == 127 ? 2 : 0);
        const size_t tap_y = (size_t)g->dil_h * f->row;
        const uint8_t *p = (const uint8_t *)f->base + (size_t)(y0 - f->first) * f->row + mid0 * g->stride_w - f->left;
        ox += dw_halves_rows_asm(p, p + tap_y, p + 2 * tap_y, 0, 1, mid1 - mid0, g->stride_w, g->out_c,
                                 (uint32_t)start, &ch->h, form, lo_, hi_, ch->v, ch->u,
                                 y + (size_t)(mid0 - xa) * g->out_c);
    }
#else
    (void)mid1;
#endif
    if (ox < xb) {
        conv_stem_pixels(a, g, f, ch, y0, inside, start, ox, xb, y + (size_t)(ox - xa) * g->out_c);
    }
}

typedef struct {
    uint8_t b[4];
} conv_stem_word_t; /* the 4 bytes a store names as its memory operand (dw_load4's note) */

/* The padded frame's rows that output rows [oy0, oy1) read, copied into slot as rows of row bytes: the zero
 * point, the frame's row from byte pad_left (a word at a time: GAP8 loads and stores words at any byte), the
 * zero point after it; a row outside the frame all zero point. */
static void conv_stem_copy(const edgernn_conv_geom_t *g, const int8_t *in, int32_t pad, int oy0, int oy1, int32_t row,
                           int8_t *slot)
{
    const int32_t first = oy0 * g->stride_h, end = (oy1 - 1) * g->stride_h + (g->k_h - 1) * g->dil_h + 1;
    const int32_t pl = g->pad_left, n = g->in_w < row - pl ? g->in_w : row - pl;
    const uint32_t pad4 = (uint32_t)(uint8_t)pad * 0x01010101u;
    int32_t r, i;
    for (r = first; r < end; ++r) {
        const int32_t iy = r - g->pad_top;
        uint8_t *d = (uint8_t *)slot + (size_t)(r - first) * row;
        const uint8_t *src = (const uint8_t *)in + (size_t)iy * g->in_w;
        uint32_t *dw = (uint32_t *)(void *)d;
        for (i = 0; i < row >> 2; ++i) {
            dw[i] = pad4;
        }
        if (iy < 0 || iy >= g->in_h) {
            continue;
        }
        d += pl;
        for (i = 0; i + 4 <= n; i += 4) {
            const edgernn_v4s v = dw_load4(src + i);
#if defined(__riscv) || defined(__riscv__)
            __asm__("sw %1, 0(%2)" : "=m"(*(conv_stem_word_t *)(void *)(d + i)) : "r"(v), "r"(d + i));
#else
            memcpy(d + i, &v, sizeof v);
#endif
        }
        for (; i < n; ++i) {
            d[i] = src[i];
        }
    }
}

/* Channel ch's outputs of n output rows from their padded rows (f: conv_stem_copy's slot, the first output
 * row's first), y at the first row's pixel 0: all rows in one hardware loop where it takes them, else a row
 * at a time, its pixels the loop leaves in C. */
static EDGERNN_STEM_NOINLINE void conv_stem_chunk(const conv_stem_t *a, const edgernn_conv_geom_t *g,
                                                  const conv_stem_rows_t *f, const conv_stem_channel_t *ch, int n,
                                                  int8_t *y)
{
    const int out_w = g->out_w, k_h = g->k_h;
    const size_t tap_y = (size_t)g->dil_h * f->row, step_y = (size_t)g->stride_h * f->row;
    const size_t out_row = (size_t)out_w * g->out_c;
    int r;
#if !(defined(EDGERNN_HALVES_ASM) && defined(EDGERNN_CONV_HWLOOP) && EDGERNN_CONV_HWLOOP)
    (void)tap_y;
    (void)step_y;
#else
    const int32_t lo = a->act_min, hi = a->act_max;
    const int form = (lo >= a->output_offset ? 1 : 0) | (lo == -128 && hi == 127 ? 2 : 0);
    const int asm_rows = k_h == 3 && ch->halves;
    if (asm_rows && n > 1 && (form & 2) && (g->stride_w == 2 || (out_w & 1) == 0) && out_w >= 2) {
        const uint8_t *b = (const uint8_t *)f->base;
        dw_halves_rows_asm(b, b + tap_y, b + 2 * tap_y, step_y, n, out_w, g->stride_w, g->out_c,
                           (uint32_t)ch->start, &ch->h, form, lo, hi, ch->v, ch->u, y);
        return;
    }
#endif
    for (r = 0; r < n; ++r, y += out_row) {
        int done = 0;
#if defined(EDGERNN_HALVES_ASM) && defined(EDGERNN_CONV_HWLOOP) && EDGERNN_CONV_HWLOOP
        const uint8_t *rp0 = (const uint8_t *)f->base + (size_t)r * step_y;
        if (asm_rows) {
            done = dw_halves_rows_asm(rp0, rp0 + tap_y, rp0 + 2 * tap_y, 0, 1,
                                      out_w, g->stride_w, g->out_c, (uint32_t)ch->start, &ch->h, form, lo, hi, ch->v,
                                      ch->u, y);
        }
#endif
        if (done < out_w) {
            conv_stem_pixels(a, g, f, ch, (int32_t)(r * g->stride_h), (1u << k_h) - 1u, ch->start, done, out_w,
                             y + (size_t)done * g->out_c);
        }
    }
}

/* Workers [k_begin, k_end): worker k's channels of every pixel, or every channel of its pixels or output rows,
 * a channel's filter read once a chunk and then its rows. */
static void conv_stem_workers(const void *args, int k_begin, int k_end)
{
    const conv_stem_t *a = (const conv_stem_t *)args;
    const edgernn_conv_geom_t *const g = a->g; /* not copied: the stack is small (EDGERNN_STEM_NOINLINE) */
    const int n_pix = g->out_h * g->out_w, sx = g->stride_w, out_w = g->out_w;
    const int32_t pl = g->pad_left, last = g->in_w - 4 + pl; /* in place, x0 + 4 <= in_w: ox * sx <= last */
    int lo = sx == 1 ? pl : (pl + 1) >> 1, hi = last < 0 ? 0 : (sx == 1 ? last : last >> 1) + 1;
    conv_stem_channel_t ch;
    int k;
    lo = lo > out_w ? out_w : lo;
    hi = hi > out_w ? out_w : hi;
    for (k = k_begin; k < k_end; ++k) {
        int c0 = 0, c1 = g->out_c, p0 = 0, p1 = n_pix, c;
        if (a->slot) {
            int oy0, oy1;
            conv_stem_rows_t f;
            int8_t *slot = a->scratch + (size_t)k * a->slot;
            edgernn_team_range(k, a->workers, g->out_h, 1, &oy0, &oy1);
            f.row = f.width = conv_stem_row_bytes(g);
            f.left = 0;   /* the padding copied: every pixel's taps one word of its row */
            f.first = 0;
            f.base = slot;
            for (; oy0 < oy1; oy0 += EDGERNN_STEM_CHUNK_ROWS) {
                const int oy_end = oy1 - oy0 < EDGERNN_STEM_CHUNK_ROWS ? oy1 : oy0 + EDGERNN_STEM_CHUNK_ROWS;
                conv_stem_copy(g, a->in, a->pad, oy0, oy_end, f.row, slot);
                for (c = 0; c < g->out_c; ++c) {
                    conv_stem_channel(a, g, c, &ch);
                    conv_stem_chunk(a, g, &f, &ch, oy_end - oy0, a->out + (size_t)oy0 * out_w * g->out_c + c);
                }
            }
            continue;
        }
        if (a->by_channels) {
            edgernn_team_range(k, a->workers, g->out_c, 1, &c0, &c1);
        } else {
            edgernn_team_range(k, a->workers, n_pix, 1, &p0, &p1);
        }
        if (c0 >= c1 || p0 >= p1) {
            continue;
        }
        for (c = c0; c < c1; ++c) {
            conv_stem_rows_t f;
            int p = p0, oy = p0 / out_w, ox = p0 - oy * out_w;
            f.base = a->in;
            f.row = f.width = g->in_w;
            f.first = 0;
            f.left = pl;
            conv_stem_channel(a, g, c, &ch);
            while (p < p1) {
                const int xb = p1 - p < out_w - ox ? ox + (p1 - p) : out_w;
                conv_stem_row(a, g, &f, &ch, oy, ox, xb, lo, hi, a->out + (size_t)p * g->out_c + c);
                p += xb - ox;
                ox = 0;
                ++oy;
            }
        }
    }
}

/* Nonzero when the geometry is one the stem's kernel takes, which it then computed, on the team or not; scratch
 * the convolution's (edgernn/backend/kernels.py: the slots of conv_stem_slot where they fit). */
static int conv_stem_s8(const edgernn_conv_geom_t *g, const int8_t *in, const int8_t *w, const int32_t *bias,
                        const int32_t *multiplier, const int32_t *shift, int32_t input_zero_point,
                        int32_t output_offset, int32_t act_min, int32_t act_max, int8_t *scratch, int8_t *out,
                        int team)
{
    conv_stem_t a;
    const int workers = team ? edgernn_team_workers() : 1;
    if (!conv_stem_apply(g) || workers > EDGERNN_CONV_TEAM_SLOTS) {
        return 0;
    }
    a.g = g;
    a.in = in;
    a.w = w;
    a.bias = bias;
    a.multiplier = multiplier;
    a.shift = shift;
    a.pad = input_zero_point;
    a.output_offset = output_offset;
    a.act_min = act_min;
    a.act_max = act_max;
    a.workers = workers;
    a.by_channels = g->out_c % workers == 0;
    a.slot = scratch != NULL && STEM_COPY(in, scratch) ? conv_stem_slot(g) : 0;
#if defined(EDGERNN_NEAR)
    if (a.slot == 0 && !EDGERNN_NEAR(in)) {
        return 0; /* read in place, a far frame costs a far load a filter row a channel; the patches, one a tap */
    }
#endif
    a.scratch = scratch;
    a.out = out;
    if (team) {
        edgernn_team_split(conv_stem_workers, &a, workers, 1);
    } else {
        conv_stem_workers(&a, 0, 1);
    }
    return 1;
}
#endif

void edgernn_depthwise_conv_s8(const edgernn_conv_geom_t *geom_in, const int8_t *in, const int8_t *w,
                               const int32_t *bias, const int32_t *multiplier, const int32_t *shift,
                               int32_t input_zero_point, int32_t output_offset, int32_t act_min, int32_t act_max,
                               int8_t *scratch, int8_t *out)
{
    dw_s8_split_t a;
#if defined(EDGERNN_DEPTHWISE_S8_ARCH)
    if (EDGERNN_DEPTHWISE_S8_ARCH(geom_in, in, w, bias, multiplier, shift, input_zero_point, output_offset, act_min,
                                  act_max, scratch, out)) {
        return;
    }
#endif
#if defined(CONV_PAIRS)
    if (dw_planes_apply(geom_in)) {
        dw_planes_t p;
        dw_planes_setup(&p, geom_in, in, w, bias, multiplier, shift, input_zero_point, output_offset, act_min,
                        act_max, 1, scratch, out);
        dw_planes_workers(&p, 0, 1);
        return;
    }
#endif
    dw_s8_setup(&a, geom_in, in, w, bias, multiplier, shift, input_zero_point, output_offset, act_min, act_max,
                scratch, out);
    dw_s8_rows(&a, 0, geom_in->out_h);
}

/* The team's: by channel planes where they apply (above), else the calling core pads the frame, then the
 * output rows are split across the team. */
void edgernn_team_depthwise_conv_s8(const edgernn_conv_geom_t *geom_in, const int8_t *in, const int8_t *w,
                                    const int32_t *bias, const int32_t *multiplier, const int32_t *shift,
                                    int32_t input_zero_point, int32_t output_offset, int32_t act_min,
                                    int32_t act_max, int8_t *scratch, int8_t *out)
{
    dw_s8_split_t a;
#if defined(CONV_PAIRS)
    const int workers = edgernn_team_workers();
    if (dw_planes_apply(geom_in) && workers <= EDGERNN_CONV_TEAM_SLOTS) {
        dw_planes_t p;
        dw_planes_setup(&p, geom_in, in, w, bias, multiplier, shift, input_zero_point, output_offset, act_min,
                        act_max, workers, scratch, out);
        edgernn_team_split(dw_planes_workers, &p, workers, 1);
        return;
    }
#endif
    dw_s8_setup(&a, geom_in, in, w, bias, multiplier, shift, input_zero_point, output_offset, act_min, act_max,
                scratch, out);
    edgernn_team_split(dw_s8_rows, &a, geom_in->out_h, 1);
}

void edgernn_depthwise_conv_s16(const edgernn_conv_geom_t *geom_in, const int16_t *in, const int8_t *w,
                                const int64_t *bias, const int32_t *multiplier, const int32_t *shift,
                                int32_t act_min, int32_t act_max, int16_t *scratch, int16_t *out)
{
    GEOM_LOCAL;
    typedef int16_t T;
    const int32_t pad = 0;   /* 16x8 activations are symmetric */
    const int oy_begin = 0, oy_end = g->out_h;
    DW_PADDED_FRAME(int16_t);
    DW_PIXELS(DW_STORE_S16);
}

/* Pools: the window's in-frame taps only (TFLite's reference pooling), channel by channel. MAX_POOL_2D
 * and AVERAGE_POOL_2D keep the input's quantization, so the integer kernels work on the raw values. */
#define POOL_LOOP(T, ACC_T, INIT, TAP, STORE) POOL_ROWS(T, ACC_T, INIT, TAP, STORE, 0, g->out_h)
/* The output rows [OY0, OY1) only: a range of the team's split. */
#define POOL_ROWS(T, ACC_T, INIT, TAP, STORE, OY0, OY1)                                             \
    do {                                                                                            \
        int oy_, ox_, c_, ky_, kx_;                                                                 \
        for (oy_ = (OY0); oy_ < (OY1); ++oy_) {                                                     \
            const int32_t y0_ = oy_ * g->stride_h - g->pad_top;                                     \
            const int32_t ky0_ = y0_ < 0 ? -y0_ : 0;                                                \
            const int32_t ky1_ = g->in_h - y0_ < g->k_h ? g->in_h - y0_ : g->k_h;                   \
            for (ox_ = 0; ox_ < g->out_w; ++ox_) {                                                  \
                const int32_t x0_ = ox_ * g->stride_w - g->pad_left;                                \
                const int32_t kx0_ = x0_ < 0 ? -x0_ : 0;                                            \
                const int32_t kx1_ = g->in_w - x0_ < g->k_w ? g->in_w - x0_ : g->k_w;               \
                const int32_t count = (ky1_ - ky0_) * (kx1_ - kx0_);                                \
                T *y_ = out + ((size_t)oy_ * g->out_w + ox_) * g->out_c;                            \
                for (c_ = 0; c_ < g->out_c; ++c_) {                                                 \
                    ACC_T acc = INIT;                                                               \
                    for (ky_ = ky0_; ky_ < ky1_; ++ky_) {                                           \
                        const T *row_ = in + ((size_t)(y0_ + ky_) * g->in_w + x0_) * g->in_c + c_;  \
                        for (kx_ = kx0_; kx_ < kx1_; ++kx_) {                                       \
                            const ACC_T v = row_[(size_t)kx_ * g->in_c];                            \
                            TAP;                                                                    \
                        }                                                                           \
                    }                                                                               \
                    (void)count;                                                                    \
                    STORE;                                                                          \
                }                                                                                   \
            }                                                                                       \
        }                                                                                           \
    } while (0)

#define POOL_CLAMP(x) ((x) < act_min ? act_min : ((x) > act_max ? act_max : (x)))

void edgernn_max_pool_f32(const edgernn_conv_geom_t *geom_in, const float *in, float act_min, float act_max, float *out)
{
    GEOM_LOCAL;
    POOL_LOOP(float, float, -3.402823466e+38f, acc = v > acc ? v : acc, y_[c_] = POOL_CLAMP(acc));
}

/* The 8-bit pools over output rows [oy_begin, oy_end), and their team versions, which split the rows. */
typedef struct {
    const edgernn_conv_geom_t *g;
    const int8_t *in;
    int32_t act_min, act_max;
    int8_t *out;
} pool_s8_split_t;

static void max_pool_s8_rows(const void *args, int oy_begin, int oy_end)
{
    const pool_s8_split_t *a = (const pool_s8_split_t *)args;
    GEOM_LOCAL_FROM(a->g);
    const int8_t *const in = a->in;
    int8_t *const out = a->out;
    const int32_t act_min = a->act_min, act_max = a->act_max;
    POOL_ROWS(int8_t, int32_t, -128, acc = v > acc ? v : acc, y_[c_] = (int8_t)POOL_CLAMP(acc), oy_begin, oy_end);
}

static void pool_s8_split(edgernn_range_fn rows, const edgernn_conv_geom_t *g, const int8_t *in, int32_t act_min,
                          int32_t act_max, int8_t *out, int team)
{
    pool_s8_split_t a;
    a.g = g;
    a.in = in;
    a.act_min = act_min;
    a.act_max = act_max;
    a.out = out;
    if (team) {
        edgernn_team_split(rows, &a, g->out_h, 1);
    } else {
        rows(&a, 0, g->out_h);
    }
}

/* A kernel set's own single-core pool, tried first (edgernn_arch.h's EDGERNN_MAX_POOL_S8_ARCH: nonzero when it
 * took the geometry); none in the reference set */
#if defined(EDGERNN_MAX_POOL_S8_ARCH)
#define POOL_S8_ARCH_max_pool EDGERNN_MAX_POOL_S8_ARCH
#else
#define POOL_S8_ARCH_max_pool(g, in, lo, hi, out) 0
#endif
#define POOL_S8_ARCH_avg_pool(g, in, lo, hi, out) 0
#define POOL_S8_ARCH(NAME) POOL_S8_ARCH_##NAME
/* The team's pool tries these first (nonzero: the geometry was taken): the int8 MAX_POOL_2D by words
 * (max_pool_s8_words_team, below), the average pool by rows */
static int max_pool_s8_words_team(const edgernn_conv_geom_t *g, const int8_t *in, int32_t act_min, int32_t act_max,
                                  int8_t *out);
#define POOL_S8_TEAM_FIRST_max_pool max_pool_s8_words_team
#define POOL_S8_TEAM_FIRST_avg_pool(g, in, lo, hi, out) 0
#define POOL_S8_TEAM_FIRST(NAME) POOL_S8_TEAM_FIRST_##NAME

/* An int8 pool kernel and its team twin, NAME##_s8_rows over the output rows on this core or on the team's:
 * POOL_S8_KERNELS(max_pool) defines edgernn_max_pool_s8 and edgernn_team_max_pool_s8. */
#define POOL_S8_KERNELS(NAME)                                                                       \
    void edgernn_##NAME##_s8(const edgernn_conv_geom_t *geom_in, const int8_t *in, int32_t act_min,    \
                             int32_t act_max, int8_t *out)                                          \
    {                                                                                               \
        if (POOL_S8_ARCH(NAME)(geom_in, in, act_min, act_max, out)) {                               \
            return;                                                                                 \
        }                                                                                           \
        pool_s8_split(NAME##_s8_rows, geom_in, in, act_min, act_max, out, 0);                       \
    }                                                                                               \
                                                                                                    \
    void edgernn_team_##NAME##_s8(const edgernn_conv_geom_t *geom_in, const int8_t *in, int32_t act_min, \
                                  int32_t act_max, int8_t *out)                                     \
    {                                                                                               \
        if (POOL_S8_TEAM_FIRST(NAME)(geom_in, in, act_min, act_max, out)) {                         \
            return;                                                                                 \
        }                                                                                           \
        pool_s8_split(NAME##_s8_rows, geom_in, in, act_min, act_max, out, 1);                       \
    }

POOL_S8_KERNELS(max_pool)

/* The int8 MAX_POOL_2D over output pixels [begin, end) (the split's range: a band of few rows still gives every
 * worker pixels), four channels a word: in_c a multiple of 4, in and out word-aligned, and no clamp narrower
 * than int8 (the caller checks: max_pool_s8_by_words). Each word's maximum over the window's taps inside the
 * frame, as POOL_ROWS takes them, in a register: lane by lane the same maximum, so the same bytes. GAP8 takes
 * its lanes' maximum in one pv.max.b (edgernn_arch.h's EDGERNN_MAX4). */
#if defined(EDGERNN_MAX4)
#define POOL_MAX4(a, b) EDGERNN_MAX4((a), (b))
#else
static inline uint32_t pool_max4(uint32_t a, uint32_t b)
{
    uint32_t r = 0;
    int k;
    for (k = 0; k < 32; k += 8) {
        const int32_t x = (int32_t)(int8_t)(uint8_t)(a >> k), y = (int32_t)(int8_t)(uint8_t)(b >> k);
        r |= (uint32_t)(uint8_t)(x > y ? x : y) << k;
    }
    return r;
}
#define POOL_MAX4(a, b) pool_max4((a), (b))
#endif

static void max_pool_s8_words(const void *args, int begin, int end)
{
    const pool_s8_split_t *a = (const pool_s8_split_t *)args;
    GEOM_LOCAL_FROM(a->g);
    const int32_t words = g->in_c >> 2, row = g->in_w * words;
    const uint32_t *const in = (const uint32_t *)(const void *)a->in;
    uint32_t *out = (uint32_t *)(void *)a->out + (size_t)begin * (size_t)words;
    int32_t oy = begin / g->out_w, ox = begin % g->out_w;
    int p;
    for (p = begin; p < end; ++p) {
        const int32_t y0 = oy * g->stride_h - g->pad_top, x0 = ox * g->stride_w - g->pad_left;
        const int32_t ky0 = y0 < 0 ? -y0 : 0, ky1 = g->in_h - y0 < g->k_h ? g->in_h - y0 : g->k_h;
        const int32_t kx0 = x0 < 0 ? -x0 : 0, kx1 = g->in_w - x0 < g->k_w ? g->in_w - x0 : g->k_w;
        const uint32_t *const first = in + (size_t)(y0 + ky0) * (size_t)row + (size_t)(x0 + kx0) * (size_t)words;
        int32_t w;
        for (w = 0; w < words; ++w) {
            uint32_t acc = first[w];
            int32_t ky, kx;
            for (ky = 0; ky < ky1 - ky0; ++ky) {
                const uint32_t *tap = first + (size_t)ky * (size_t)row + w;
                for (kx = 0; kx < kx1 - kx0; ++kx, tap += words) {
                    acc = POOL_MAX4(acc, *tap);
                }
            }
            *out++ = acc;
        }
        if (++ox == g->out_w) {
            ox = 0;
            ++oy;
        }
    }
}

/* Whether max_pool_s8_words applies: channels in words, word-aligned, and no clamp narrower than int8 */
static int max_pool_s8_words_apply(const edgernn_conv_geom_t *g, const int8_t *in, int32_t act_min,
                                   int32_t act_max, const int8_t *out)
{
    return (g->in_c & 3) == 0 && ((((uintptr_t)in) | (uintptr_t)out) & 3u) == 0 && act_min <= -128 && act_max >= 127;
}

/* The team's own MAX_POOL_2D (edgernn_team_max_pool_s8) by words over the output pixels where they apply: every
 * worker gets pixels, where the rows' split left a frame of few output rows to few workers and took each byte's
 * window apart (examples/frame_ncp's 2x2 pool of 16x16x4: 3,239 cycles on 8 cores by rows). 0 where they do not. */
static int max_pool_s8_words_team(const edgernn_conv_geom_t *g, const int8_t *in, int32_t act_min, int32_t act_max,
                                  int8_t *out)
{
    pool_s8_split_t a;
    if (!max_pool_s8_words_apply(g, in, act_min, act_max, out)) {
        return 0;
    }
    a.g = g;
    a.in = in;
    a.act_min = act_min;
    a.act_max = act_max;
    a.out = out;
    edgernn_team_split(max_pool_s8_words, &a, g->out_h * g->out_w, 1);
    return 1;
}

/* The team's int8 MAX_POOL_2D of the fused pair: by words over the pixels where max_pool_s8_words applies, else
 * edgernn_team_max_pool_s8 (or the single-core kernel, team 0). */
static void max_pool_s8_by_words(const edgernn_conv_geom_t *g, const int8_t *in, int32_t act_min, int32_t act_max,
                                 int8_t *out, int team)
{
    pool_s8_split_t a;
    if (!max_pool_s8_words_apply(g, in, act_min, act_max, out)) {
        if (team) {
            edgernn_team_max_pool_s8(g, in, act_min, act_max, out);
        } else {
            edgernn_max_pool_s8(g, in, act_min, act_max, out);
        }
        return;
    }
    a.g = g;
    a.in = in;
    a.act_min = act_min;
    a.act_max = act_max;
    a.out = out;
    if (team) {
        edgernn_team_split(max_pool_s8_words, &a, g->out_h * g->out_w, 1);
    } else {
        max_pool_s8_words(&a, 0, g->out_h * g->out_w);
    }
}

/* The fused pair's int8 MAX_POOL_2D of a band (edgernn_conv_dma.c's bands too): max_pool_s8_by_words on the team. */
void edgernn_team_conv_pool_band_s8(const edgernn_conv_geom_t *g, const int8_t *in, int32_t act_min, int32_t act_max,
                                    int8_t *out);
void edgernn_team_conv_pool_band_s8(const edgernn_conv_geom_t *g, const int8_t *in, int32_t act_min, int32_t act_max,
                                    int8_t *out)
{
    max_pool_s8_by_words(g, in, act_min, act_max, out, 1);
}

/* CONV_2D whose output only a MAX_POOL_2D reads, both 8-bit: the convolution's output never exists whole. The
 * pool's output rows are made in bands of band_rows: for each band, the convolution's rows that the band's
 * windows read (conv_rows_read: the pool's halo; a row two bands share is computed twice) are computed into
 * scratch after the convolution's own patches, then pooled into the band's rows of out. Each band's geometry
 * is the frame's with in_h the rows it has, out_h the band's rows and pad_top moved by the rows it skips, as
 * in the DMA's bands (edgernn_conv_dma.c): every output byte is the unfused pair's. scratch: the
 * convolution's scratch, then at rows_at the band's convolution rows. */
static void conv_rows_read(const edgernn_conv_geom_t *g, int32_t oy0, int32_t oy1, int32_t *r0, int32_t *r1)
{
    const int32_t first = oy0 * g->stride_h - g->pad_top;
    const int32_t end = (oy1 - 1) * g->stride_h - g->pad_top + (g->k_h - 1) * g->dil_h + 1;
    *r0 = first < 0 ? 0 : first;
    *r1 = end > g->in_h ? g->in_h : end;
    if (*r1 < *r0) {
        *r1 = *r0;
    }
}

static void conv_pool_band(const edgernn_conv_geom_t *conv, const edgernn_conv_geom_t *pool, int32_t p0, int32_t p1,
                           edgernn_conv_geom_t *conv_band, edgernn_conv_geom_t *pool_band, int32_t *in0)
{
    int32_t c0, c1, i0, i1;
    conv_rows_read(pool, p0, p1, &c0, &c1);
    conv_rows_read(conv, c0, c1, &i0, &i1);
    *conv_band = *conv;
    conv_band->in_h = i1 - i0;
    conv_band->out_h = c1 - c0;
    conv_band->pad_top = conv->pad_top + i0 - c0 * conv->stride_h;
    *pool_band = *pool;
    pool_band->in_h = c1 - c0;
    pool_band->out_h = p1 - p0;
    pool_band->pad_top = pool->pad_top + c0 - p0 * pool->stride_h;
    *in0 = i0;
}

static void conv_max_pool_s8(const edgernn_conv_geom_t *g, const int8_t *in, const int8_t *w, const int32_t *bias,
                             const int32_t *multiplier, const int32_t *shift, int32_t input_zero_point,
                             int32_t output_offset, int32_t act_min, int32_t act_max, const edgernn_conv_geom_t *pool,
                             int32_t pool_min, int32_t pool_max, int32_t band_rows, int32_t rows_at,
                             int8_t *scratch, int8_t *out, int team)
{
    const edgernn_conv_geom_t conv = *g, pg = *pool;
    const size_t in_row = (size_t)conv.in_w * conv.in_c, out_row = (size_t)pg.out_w * pg.out_c;
    int8_t *rows = scratch + rows_at;
    int32_t p0;
    for (p0 = 0; p0 < pg.out_h; p0 += band_rows) {
        const int32_t p1 = p0 + band_rows < pg.out_h ? p0 + band_rows : pg.out_h;
        edgernn_conv_geom_t cb, pb;
        int32_t i0;
        conv_pool_band(&conv, &pg, p0, p1, &cb, &pb, &i0);
        if (team) {
            edgernn_team_conv_s8(&cb, in + (size_t)i0 * in_row, w, bias, multiplier, shift, input_zero_point,
                                 output_offset, act_min, act_max, scratch, rows);
            max_pool_s8_by_words(&pb, rows, pool_min, pool_max, out + (size_t)p0 * out_row, 1);
        } else {
            edgernn_conv_s8(&cb, in + (size_t)i0 * in_row, w, bias, multiplier, shift, input_zero_point, output_offset,
                            act_min, act_max, scratch, rows);
            max_pool_s8_by_words(&pb, rows, pool_min, pool_max, out + (size_t)p0 * out_row, 0);
        }
    }
}

void edgernn_conv_max_pool_s8(const edgernn_conv_geom_t *g, const int8_t *in, const int8_t *w, const int32_t *bias,
                              const int32_t *multiplier, const int32_t *shift, int32_t input_zero_point,
                              int32_t output_offset, int32_t act_min, int32_t act_max, const edgernn_conv_geom_t *pool,
                              int32_t pool_min, int32_t pool_max, int32_t band_rows, int32_t rows_at, int8_t *scratch,
                              int8_t *out)
{
    conv_max_pool_s8(g, in, w, bias, multiplier, shift, input_zero_point, output_offset, act_min, act_max, pool,
                     pool_min, pool_max, band_rows, rows_at, scratch, out, 0);
}

void edgernn_team_conv_max_pool_s8(const edgernn_conv_geom_t *g, const int8_t *in, const int8_t *w,
                                   const int32_t *bias, const int32_t *multiplier, const int32_t *shift,
                                   int32_t input_zero_point, int32_t output_offset, int32_t act_min, int32_t act_max,
                                   const edgernn_conv_geom_t *pool, int32_t pool_min, int32_t pool_max,
                                   int32_t band_rows, int32_t rows_at, int8_t *scratch, int8_t *out)
{
    conv_max_pool_s8(g, in, w, bias, multiplier, shift, input_zero_point, output_offset, act_min, act_max, pool,
                     pool_min, pool_max, band_rows, rows_at, scratch, out, 1);
}

void edgernn_max_pool_s16(const edgernn_conv_geom_t *geom_in, const int16_t *in, int32_t act_min, int32_t act_max,
                          int16_t *out)
{
    GEOM_LOCAL;
    POOL_LOOP(int16_t, int32_t, -32768, acc = v > acc ? v : acc, y_[c_] = (int16_t)POOL_CLAMP(acc));
}

void edgernn_avg_pool_f32(const edgernn_conv_geom_t *geom_in, const float *in, float act_min, float act_max, float *out)
{
    GEOM_LOCAL;
    POOL_LOOP(float, float, 0.0f, acc += v, { const float a_ = acc / (float)count; y_[c_] = POOL_CLAMP(a_); });
}

/* The integer mean rounds half away from zero with C's truncating division, as TFLite's reference */
#define POOL_ROUND_MEAN(acc, count) ((acc) > 0 ? ((acc) + (count) / 2) / (count) : ((acc) - (count) / 2) / (count))

static void avg_pool_s8_rows(const void *args, int oy_begin, int oy_end)
{
    const pool_s8_split_t *a = (const pool_s8_split_t *)args;
    GEOM_LOCAL_FROM(a->g);
    const int8_t *const in = a->in;
    int8_t *const out = a->out;
    const int32_t act_min = a->act_min, act_max = a->act_max;
    POOL_ROWS(int8_t, int32_t, 0, acc += v,
              { const int32_t a_ = POOL_ROUND_MEAN(acc, count); y_[c_] = (int8_t)POOL_CLAMP(a_); }, oy_begin, oy_end);
}

POOL_S8_KERNELS(avg_pool)

void edgernn_avg_pool_s16(const edgernn_conv_geom_t *geom_in, const int16_t *in, int32_t act_min, int32_t act_max,
                          int16_t *out)
{
    GEOM_LOCAL;
    POOL_LOOP(int16_t, int32_t, 0, acc += v,
              { const int32_t a_ = POOL_ROUND_MEAN(acc, count); y_[c_] = (int16_t)POOL_CLAMP(a_); });
}

/* LEAKY_RELU, which Keras' LeakyReLU after a convolution becomes. Float: x, or alpha * x below 0. */
void edgernn_leaky_relu_f32(const float *in, float alpha, int n, float *out)
{
    int i;
    for (i = 0; i < n; ++i) {
        out[i] = in[i] > 0.0f ? in[i] : in[i] * alpha;
    }
}

/* 16-bit: TFLite's QuantizeLeakyRelu, the input less its zero point rescaled by the identity or the
 * alpha multiplier (MultiplyByQuantizedMultiplier, two roundings) by its sign. (8-bit is a table.) */
void edgernn_leaky_relu_s16(const int16_t *in, int32_t input_zero_point, int32_t identity_multiplier,
                            int identity_shift, int32_t alpha_multiplier, int alpha_shift, int32_t output_zero_point,
                            int n, int16_t *out)
{
    int i;
    for (i = 0; i < n; ++i) {
        const int32_t v = (int32_t)in[i] - input_zero_point;
        const int32_t r = v >= 0 ? edgernn_mbqm(v, identity_multiplier, identity_shift)
                                 : edgernn_mbqm(v, alpha_multiplier, alpha_shift);
        out[i] = (int16_t)edgernn_clamp(r + output_zero_point, -32768, 32767);
    }
}
