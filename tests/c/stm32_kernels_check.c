/* The STM32 family's kernel set against the portable reference set, on the Cortex-M4 (qemu_stm32f405), case by
 * case from a table: 16x8 and 8-bit FULLY_CONNECTED on edge values (the int16 and int8 extremes, whose chunk sums
 * reach 2^30; rounding ties of both roundings; the extreme multipliers 2^30 and 2^31 - 1; shifts from -31 to +1,
 * the words path's ends -3 and -31 and the general path beyond; clamps narrower than the type; row counts with
 * every tail; inputs across the 256-input chunks) and the saturating clamps. Each mismatch is printed on USART1;
 * the exit status (semihosting) is 0 when every byte agrees. Built by tests/targets/stm32/test_dsp_kernels.py.
 * The int8 CONV_2D, DEPTHWISE_CONV_2D and MAX_POOL_2D likewise (edgernn_conv_m4.c against the reference C), on
 * geometries from a table: one channel and many, strides, dilations, SAME and VALID padding, 1x1 filters read in
 * place or gathered, output rows longer than a chunk, channel counts with every block tail, multipliers and
 * shifts on both sides of the tight requantization, clamps narrower than int8, and those the set refuses. */
#include <stdint.h>
#include <string.h>

#include "edgernn_kernels.h"
#include "hal.h"

void ref_fully_connected_s16(const int16_t *in, const int8_t *w, const int64_t *bias, const int32_t *multiplier,
                             const int32_t *shift, const int64_t *scale, int rounding, int32_t output_offset,
                             int32_t act_min, int32_t act_max, int rows, int n_in, int n_out, int16_t *out);
void ref_fully_connected_s8(const int8_t *in, const int8_t *w, const int32_t *bias, const int32_t *multiplier,
                            const int32_t *shift, int rounding, int32_t output_offset, int32_t act_min,
                            int32_t act_max, int rows, int n_in, int n_out, int8_t *out);
void ref_conv_s8(const edgernn_conv_geom_t *g, const int8_t *in, const int8_t *w, const int32_t *bias,
                 const int32_t *multiplier, const int32_t *shift, int32_t input_zero_point, int32_t output_offset,
                 int32_t act_min, int32_t act_max, int8_t *scratch, int8_t *out);
void ref_depthwise_conv_s8(const edgernn_conv_geom_t *g, const int8_t *in, const int8_t *w, const int32_t *bias,
                           const int32_t *multiplier, const int32_t *shift, int32_t input_zero_point,
                           int32_t output_offset, int32_t act_min, int32_t act_max, int8_t *scratch, int8_t *out);
void ref_max_pool_s8(const edgernn_conv_geom_t *g, const int8_t *in, int32_t act_min, int32_t act_max, int8_t *out);
int32_t dsp_clamp16(int32_t x);
int32_t dsp_clamp8(int32_t x);
int32_t dsp_clamp_relu16(int32_t x);
int32_t ref_clamp16(int32_t x);
int32_t ref_clamp8(int32_t x);
int32_t ref_clamp_relu16(int32_t x);

#define MAX_IN 600
#define MAX_OUT 17

static void say(const char *s)
{
    edgernn_hal_uart_write((const uint8_t *)s, (int)strlen(s));
}

static void say_int(long long v)
{
    char buf[24];
    int n = 0;
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    if (v < 0) {
        say("-");
    }
    do {
        buf[n++] = (char)('0' + u % 10u);
        u /= 10u;
    } while (u);
    while (n) {
        char c[2] = {buf[--n], 0};
        say(c);
    }
}

static uint32_t lcg = 12345u;
static uint32_t next(void)
{
    lcg = lcg * 1664525u + 1013904223u;
    return lcg >> 8;
}

enum fill { ALL_MIN, ALL_MAX, ALTERNATE, RANDOM, TIES };

static int32_t value16(enum fill f, int i)
{
    switch (f) {
    case ALL_MIN:
        return -32768;
    case ALL_MAX:
        return 32767;
    case ALTERNATE:
        return (i & 1) ? 32767 : -32768;
    case TIES:
        return 8; /* with a weight of 1 and the biases 16 (o - 8): sums at the odd multiples of 8 */
    default:
        return (int32_t)(next() & 0xFFFFu) - 32768;
    }
}

static int32_t value8(enum fill f, int i)
{
    switch (f) {
    case ALL_MIN:
        return -128;
    case ALL_MAX:
        return 127;
    case ALTERNATE:
        return (i & 1) ? 127 : -128;
    case TIES:
        return 1;
    default:
        return (int32_t)(next() & 0xFFu) - 128;
    }
}

/* scale = multiplier * 2^(shift - 31), exactly, as a double's bits (what the generation writes for EDGERNN_ROUND_DOUBLE) */
static int64_t scale_bits(int32_t multiplier, int32_t shift)
{
    union {
        double d;
        int64_t bits;
    } u;
    double s = (double)multiplier;
    int k;
    for (k = 0; k < 31 - shift; ++k) {
        s *= 0.5;
    }
    for (k = 0; k < shift - 31; ++k) {
        s *= 2.0;
    }
    u.d = s;
    return u.bits;
}

typedef struct {
    int n_in, n_out, rounding;
    int32_t multiplier, shift;
    int64_t bias;
    int32_t act_min, act_max;
    enum fill x, w;
} case16_t;

static const case16_t CASES16[] = {
    /* the extremes: chunk sums of 2^30, 64-bit sums across chunks, every shift of the words path and beyond */
    {256, 4, EDGERNN_ROUND_DOUBLE, 1 << 30, -31, 0, -32768, 32767, ALL_MIN, ALL_MIN},
    {256, 5, EDGERNN_ROUND_DOUBLE, INT32_MAX, -31, 0, -32768, 32767, ALL_MIN, ALL_MAX},
    {600, 9, EDGERNN_ROUND_DOUBLE, INT32_MAX, -31, 0, -32768, 32767, ALL_MAX, ALL_MAX},
    {600, 9, EDGERNN_ROUND_DOUBLE, 1 << 30, -3, -5, -32768, 32767, ALTERNATE, ALTERNATE},
    {257, 3, EDGERNN_ROUND_DOUBLE, 1518500250, -20, 123456789, -32768, 32767, RANDOM, RANDOM},
    {255, 7, EDGERNN_ROUND_DOUBLE, 1518500250, -2, 0, -32768, 32767, RANDOM, RANDOM},
    {64, 8, EDGERNN_ROUND_DOUBLE, INT32_MAX, 0, 0, -32768, 32767, RANDOM, RANDOM},
    {64, 8, EDGERNN_ROUND_DOUBLE, INT32_MAX, 1, 0, -32768, 32767, RANDOM, RANDOM},
    {64, 6, EDGERNN_ROUND_DOUBLE, 1 << 30, -12, 0, 0, 32767, RANDOM, RANDOM},
    {64, 6, EDGERNN_ROUND_DOUBLE, 1 << 30, -12, 0, -100, 100, RANDOM, RANDOM},
    {33, 2, EDGERNN_ROUND_DOUBLE, 1 << 30, -9, -7, -32768, 32767, RANDOM, RANDOM},
    /* rounding ties: acc * scale = x / 16 with x an odd multiple of 8, halves in both directions */
    {1, 17, EDGERNN_ROUND_DOUBLE, 1 << 30, -3, 0, -32768, 32767, TIES, TIES},
    {1, 17, EDGERNN_ROUND_TWICE_UP, 1 << 30, -3, 0, -32768, 32767, TIES, TIES},
    /* ruy's two roundings, halves up: an int32 sum */
    {100, 9, EDGERNN_ROUND_TWICE_UP, 1518500250, -10, 0, -32768, 32767, RANDOM, RANDOM},
    {64, 4, EDGERNN_ROUND_TWICE_UP, INT32_MAX, -31, 0, -32768, 32767, ALL_MIN, ALL_MIN},
    /* every small shape: groups of 4 and their tails, 1 to 3 rows past the last block */
    {2, 9, EDGERNN_ROUND_DOUBLE, 1518500250, -8, 3, -32768, 32767, RANDOM, RANDOM},
    {3, 1, EDGERNN_ROUND_DOUBLE, 1518500250, -8, 0, -32768, 32767, RANDOM, RANDOM},
    {4, 2, EDGERNN_ROUND_DOUBLE, 1518500250, -8, 0, -32768, 32767, RANDOM, RANDOM},
    {5, 3, EDGERNN_ROUND_DOUBLE, 1518500250, -8, 0, -32768, 32767, RANDOM, RANDOM},
    {7, 17, EDGERNN_ROUND_DOUBLE, 1518500250, -8, 0, -32768, 32767, RANDOM, RANDOM},
};

typedef struct {
    int n_in, n_out, rounding;
    int32_t multiplier, shift, bias, output_offset, act_min, act_max;
    enum fill x, w;
} case8_t;

static const case8_t CASES8[] = {
    {64, 16, EDGERNN_ROUND_ONCE, INT32_MAX, -31, 0, 0, -128, 127, ALL_MIN, ALL_MIN},
    {64, 16, EDGERNN_ROUND_TWICE_UP, INT32_MAX, -31, 0, 0, -128, 127, ALL_MIN, ALL_MIN},
    {600, 12, EDGERNN_ROUND_ONCE, 1 << 30, -20, -1000, 5, -128, 127, ALTERNATE, ALL_MAX},
    {65, 13, EDGERNN_ROUND_ONCE, 1518500250, -8, 77, -3, -128, 127, RANDOM, RANDOM},
    {65, 13, EDGERNN_ROUND_TWICE_UP, 1518500250, -8, 77, -3, -128, 127, RANDOM, RANDOM},
    {9, 17, EDGERNN_ROUND_ONCE, 1518500250, -2, 0, 0, -128, 127, RANDOM, RANDOM},
    {8, 8, EDGERNN_ROUND_ONCE, 1518500250, 0, 0, 0, -128, 127, RANDOM, RANDOM},
    {7, 3, EDGERNN_ROUND_TWICE_UP, 1518500250, 1, 0, 0, -128, 127, RANDOM, RANDOM},
    {32, 4, EDGERNN_ROUND_ONCE, 1 << 30, -10, 0, -128, -128, 0, RANDOM, RANDOM},
    {1, 17, EDGERNN_ROUND_ONCE, 1 << 30, -3, 0, 0, -128, 127, TIES, TIES},
    {1, 17, EDGERNN_ROUND_TWICE_UP, 1 << 30, -3, 0, 0, -128, 127, TIES, TIES},
};

enum frame_op { CONV, DEPTHWISE, POOL };

typedef struct {
    enum frame_op op;
    int in_h, in_w, in_c, out_c, k, stride, dil, same;   /* square filters, strides and dilations */
    int32_t multiplier, shift, act_min, act_max;         /* channel o's shift: shift - (o % 3) */
} case_frame_t;

static const case_frame_t CASES_FRAME[] = {
    {CONV, 12, 12, 1, 4, 3, 2, 1, 1, 1518500250, -8, -128, 127},    /* frame_cfc's stem */
    {CONV, 9, 11, 3, 8, 3, 2, 1, 1, 1 << 30, -7, -128, 127},        /* every border padded; multipliers 2^30 */
    {CONV, 7, 9, 2, 8, 3, 1, 1, 0, 1518500250, -6, -128, 40},       /* VALID, a narrow clamp */
    {CONV, 6, 6, 4, 4, 1, 1, 1, 0, 1518500250, -5, -128, 127},      /* 1x1 read in place */
    {CONV, 5, 7, 3, 2, 1, 1, 1, 0, 1518500250, -5, -128, 127},      /* 1x1 gathered, 2 rows */
    {CONV, 8, 8, 5, 13, 3, 1, 2, 1, 1518500250, -9, -128, 127},     /* dilation 2; blocks of 8, 4 and 1 */
    {CONV, 10, 10, 2, 4, 5, 2, 1, 1, 1518500250, 1, -128, 127},     /* shifts +1, 0, -1: not tight */
    {CONV, 20, 20, 1, 4, 3, 1, 1, 1, INT32_MAX, -10, -100, 100},    /* rows longer than a chunk of 16 */
    {CONV, 6, 1, 2, 4, 3, 1, 1, 1, 1518500250, -8, -128, 127},      /* a frame 1 wide: one column of taps */
    {CONV, 1, 6, 3, 4, 3, 1, 1, 1, 1518500250, -8, -128, 127},      /* a frame 1 high: one row of taps */
    {DEPTHWISE, 6, 6, 4, 4, 3, 1, 1, 1, 1518500250, -8, -128, 127}, /* frame_cfc's */
    {DEPTHWISE, 7, 9, 8, 8, 3, 2, 1, 1, 1 << 30, -7, 0, 127},       /* strided, a clamp from 0 */
    {DEPTHWISE, 8, 8, 4, 4, 5, 1, 1, 0, 1518500250, -3, -128, 127}, /* 5x5 VALID */
    {DEPTHWISE, 9, 9, 8, 8, 3, 1, 2, 1, 1518500250, 0, -128, 127},  /* dilation 2, shifts 0 to -2 */
    {DEPTHWISE, 6, 6, 3, 3, 3, 1, 1, 1, 1518500250, -8, -128, 127}, /* 3 channels: the reference's */
    {DEPTHWISE, 5, 1, 4, 4, 3, 1, 1, 1, 1518500250, -8, -128, 127}, /* a frame 1 wide */
    {POOL, 6, 6, 4, 4, 2, 2, 1, 0, 0, 0, -128, 127},
    {POOL, 7, 9, 8, 8, 3, 1, 1, 1, 0, 0, -128, 127},
    {POOL, 5, 5, 4, 4, 3, 2, 1, 1, 0, 0, -20, 127},                 /* a narrower clamp: the reference's */
};

#define FRAME_MAX 1600
static int8_t frame_in[FRAME_MAX] __attribute__((aligned(8))), frame_w[FRAME_MAX] __attribute__((aligned(8)));
static int8_t frame_dsp[2 * FRAME_MAX] __attribute__((aligned(8))), frame_ref[2 * FRAME_MAX] __attribute__((aligned(8)));
static int8_t frame_scratch[8192] __attribute__((aligned(8)));
static int32_t frame_bias[32], frame_mult[32], frame_shift[32];

/* TFLite's output size and padding along one axis */
static void frame_axis(int in, int k, int stride, int dil, int same, int32_t *out, int32_t *pad)
{
    const int span = (k - 1) * dil + 1;
    const int total = same ? ((in + stride - 1) / stride - 1) * stride + span - in : 0;
    *out = same ? (in + stride - 1) / stride : (in - span) / stride + 1;
    *pad = total > 0 ? total / 2 : 0;
}

static int16_t x16[MAX_IN], y16_dsp[MAX_OUT], y16_ref[MAX_OUT];
/* aligned as the generation aligns activations and weights */
static int8_t x8[MAX_IN] __attribute__((aligned(8))), w8[MAX_IN * MAX_OUT] __attribute__((aligned(8)));
static int8_t y8_dsp[MAX_OUT], y8_ref[MAX_OUT];
static int64_t bias64[MAX_OUT], scale64[MAX_OUT];
static int32_t bias32[MAX_OUT], mult[MAX_OUT], shift[MAX_OUT];

static int failures;

static void mismatch(const char *what, int c, int o, long long got, long long want)
{
    ++failures;
    say(what);
    say(" case ");
    say_int(c);
    say(" output ");
    say_int(o);
    say(": set ");
    say_int(got);
    say(", reference ");
    say_int(want);
    say("\n");
}

int main(int argc, char **argv)
{
    unsigned c;
    int i, o, outputs = 0;
    static const int32_t edges[] = {INT32_MIN, -2147483647, -65536, -32769, -32768, -32767, -129, -128, -127, -1,
                                    0, 1, 126, 127, 128, 32766, 32767, 32768, 65535, 2147483646, INT32_MAX};
    edgernn_hal_init(argc, argv);
    for (c = 0; c < sizeof CASES16 / sizeof CASES16[0]; ++c) {
        const case16_t *k = &CASES16[c];
        for (i = 0; i < k->n_in; ++i) {
            x16[i] = (int16_t)value16(k->x, i);
        }
        for (i = 0; i < k->n_in * k->n_out; ++i) {
            w8[i] = (int8_t)value8(k->w, i);
        }
        for (o = 0; o < k->n_out; ++o) {
            bias64[o] = k->x == TIES ? 16 * (o - 8) : k->bias * (o + 1);
            mult[o] = k->multiplier;
            shift[o] = k->shift;
            scale64[o] = scale_bits(k->multiplier, k->shift);
        }
        edgernn_fully_connected_s16(x16, w8, bias64, mult, shift, scale64, k->rounding, 0, k->act_min, k->act_max, 1,
                                    k->n_in, k->n_out, y16_dsp);
        ref_fully_connected_s16(x16, w8, bias64, mult, shift, scale64, k->rounding, 0, k->act_min, k->act_max, 1,
                                k->n_in, k->n_out, y16_ref);
        for (o = 0; o < k->n_out; ++o, ++outputs) {
            if (y16_dsp[o] != y16_ref[o]) {
                mismatch("16x8", (int)c, o, y16_dsp[o], y16_ref[o]);
            }
        }
    }
    for (c = 0; c < sizeof CASES8 / sizeof CASES8[0]; ++c) {
        const case8_t *k = &CASES8[c];
        for (i = 0; i < k->n_in; ++i) {
            x8[i] = (int8_t)value8(k->x, i);
        }
        for (i = 0; i < k->n_in * k->n_out; ++i) {
            w8[i] = (int8_t)value8(k->w, i);
        }
        for (o = 0; o < k->n_out; ++o) {
            bias32[o] = k->x == TIES ? 16 * (o - 8) : k->bias * (o + 1);
            mult[o] = k->multiplier;
            shift[o] = k->shift;
        }
        edgernn_fully_connected_s8(x8, w8, bias32, mult, shift, k->rounding, k->output_offset, k->act_min,
                                   k->act_max, 1, k->n_in, k->n_out, y8_dsp);
        ref_fully_connected_s8(x8, w8, bias32, mult, shift, k->rounding, k->output_offset, k->act_min, k->act_max, 1,
                               k->n_in, k->n_out, y8_ref);
        for (o = 0; o < k->n_out; ++o, ++outputs) {
            if (y8_dsp[o] != y8_ref[o]) {
                mismatch("8-bit", (int)c, o, y8_dsp[o], y8_ref[o]);
            }
        }
    }
    for (c = 0; c < sizeof CASES_FRAME / sizeof CASES_FRAME[0]; ++c) {
        const case_frame_t *k = &CASES_FRAME[c];
        edgernn_conv_geom_t g;
        const int32_t zp = (int32_t)(next() & 0xFFu) - 128, off = (int32_t)(next() & 0x3Fu) - 32;
        int n_w, n_out;
        g.in_h = k->in_h;
        g.in_w = k->in_w;
        g.in_c = k->in_c;
        g.out_c = k->out_c;
        g.k_h = g.k_w = k->k;
        g.stride_h = g.stride_w = k->stride;
        g.dil_h = g.dil_w = k->dil;
        g.depth_multiplier = 1;
        frame_axis(k->in_h, k->k, k->stride, k->dil, k->same, &g.out_h, &g.pad_top);
        frame_axis(k->in_w, k->k, k->stride, k->dil, k->same, &g.out_w, &g.pad_left);
        n_out = g.out_h * g.out_w * g.out_c;
        n_w = k->op == CONV ? k->k * k->k * k->in_c * k->out_c : k->k * k->k * k->out_c;
        for (i = 0; i < k->in_h * k->in_w * k->in_c; ++i) {
            frame_in[i] = (int8_t)value8(RANDOM, i);
        }
        for (i = 0; i < n_w; ++i) {
            frame_w[i] = (int8_t)value8(i % 7 == 0 ? ALL_MIN : RANDOM, i);
        }
        for (o = 0; o < k->out_c; ++o) {
            frame_bias[o] = (int32_t)(next() & 0x3FFFFu) - 0x20000;
            frame_mult[o] = k->multiplier;
            frame_shift[o] = k->shift - (o % 3);
        }
        memset(frame_dsp, 0x55, sizeof frame_dsp);
        memset(frame_ref, 0x55, sizeof frame_ref);
        if (k->op == CONV) {
            edgernn_conv_s8(&g, frame_in, frame_w, frame_bias, frame_mult, frame_shift, zp, off, k->act_min,
                            k->act_max, frame_scratch, frame_dsp);
            ref_conv_s8(&g, frame_in, frame_w, frame_bias, frame_mult, frame_shift, zp, off, k->act_min, k->act_max,
                        frame_scratch, frame_ref);
        } else if (k->op == DEPTHWISE) {
            edgernn_depthwise_conv_s8(&g, frame_in, frame_w, frame_bias, frame_mult, frame_shift, zp, off,
                                      k->act_min, k->act_max, frame_scratch, frame_dsp);
            ref_depthwise_conv_s8(&g, frame_in, frame_w, frame_bias, frame_mult, frame_shift, zp, off, k->act_min,
                                  k->act_max, frame_scratch, frame_ref);
        } else {
            edgernn_max_pool_s8(&g, frame_in, k->act_min, k->act_max, frame_dsp);
            ref_max_pool_s8(&g, frame_in, k->act_min, k->act_max, frame_ref);
        }
        /* the outputs and the bytes after them (nothing written past the end) */
        for (o = 0; o < n_out + 8; ++o, ++outputs) {
            if (frame_dsp[o] != frame_ref[o]) {
                mismatch(k->op == CONV ? "conv" : k->op == DEPTHWISE ? "depthwise" : "max_pool", (int)c, o,
                         frame_dsp[o], frame_ref[o]);
            }
        }
    }
    for (c = 0; c < sizeof edges / sizeof edges[0]; ++c, outputs += 3) {
        if (dsp_clamp16(edges[c]) != ref_clamp16(edges[c])) {
            mismatch("clamp16", (int)c, 0, dsp_clamp16(edges[c]), ref_clamp16(edges[c]));
        }
        if (dsp_clamp8(edges[c]) != ref_clamp8(edges[c])) {
            mismatch("clamp8", (int)c, 0, dsp_clamp8(edges[c]), ref_clamp8(edges[c]));
        }
        if (dsp_clamp_relu16(edges[c]) != ref_clamp_relu16(edges[c])) {
            mismatch("clamp_relu16", (int)c, 0, dsp_clamp_relu16(edges[c]), ref_clamp_relu16(edges[c]));
        }
    }
    say("outputs ");
    say_int(outputs);
    say(", mismatches ");
    say_int(failures);
    say("\n~~~STM32 KERNEL CHECK DONE~~~\n");
    return failures ? 1 : 0;
}
