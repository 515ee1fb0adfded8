/* The int8 FULLY_CONNECTED (and its groups) with w in the stream memory (edgernn_l3_stream.h).
 *
 * In edgernn_dot.h's blocked layout, output rows [r0, r1) with r0 a multiple of 8 are bytes
 * [r0 * n_in, r1 * n_in) of w, laid out as a w of r1 - r0 rows: the team's split of a FULLY_CONNECTED
 * already computes such a range as the same call with w, bias, multiplier and shift advanced by r0 rows
 * (edgernn_fully_connected.c). A chunk of rows is that range with w read from the chunk's slot, so its
 * bytes are the unstreamed call's. The chunks' transfers are edgernn_l3_stream.c's; after a call's last
 * chunk comes the first of the next streamed call.
 *
 * A wide FULLY_CONNECTED (the flatten of a camera CNN into a Dense) has chunks of few rows: 8 rows of 3,072
 * inputs are 24 KiB. Split by rows, such a chunk would keep one core busy. So when a chunk has fewer blocks
 * of 8 rows than the team has workers, the team splits its inputs instead (l3_fc_slices): each of
 * L3_FC_SLICES slices of whole groups of 4 inputs (the last with the n_in mod 4 that follow them) sums its
 * inputs for every row of the chunk, on the same dot products; the core that runs the step then adds the
 * slices' int32 sums, exactly (integers), and requantizes each row as edgernn_fully_connected.c does. This
 * file includes edgernn_fully_connected.c (and replaces it in a build that streams a FULLY_CONNECTED) for
 * that requantization. */
#include "edgernn_fully_connected.c"

#include <stddef.h>

#include "edgernn_kernels.h"
#include "edgernn_l3_stream.h"
#include "edgernn_team.h"

#define L3_FC_GRAIN 8       /* rows: a block of edgernn_dot.h's layout */
/* the input slices of a chunk split by inputs, one a worker: layout.TEAM_SLOTS (GAP8's cluster has 8 cores) */
#define L3_FC_SLICES 8
#define L3_FC_SLICE_ROWS 64 /* the most rows of a chunk split by inputs (fewer blocks of 8 than workers) */

/* each slice's sums of each row of the chunk being computed */
static int32_t l3_fc_partial[L3_FC_SLICES][L3_FC_SLICE_ROWS];

typedef struct {
    const int8_t *in, *w;
    const int8_t *x;        /* the input row of a chunk split by inputs */
    int n_chunk;            /* the chunk's rows */
    const int32_t *bias, *multiplier, *rnd, *shift, *ends;
    int rounding, rows, n_in, n_out;
    int row0;               /* the chunk's first row in the call */
    int group_row0;         /* a group's row of the call's first row (the group kernel's row0) */
    int32_t output_offset, act_min, act_max;
    int8_t *out[4];
} l3_fc_args_t;

/* Rows [begin, end) of the chunk whose first row is a->row0 of the call (a->w: the chunk's slot). */
static void l3_fc_rows(const void *args, int begin, int end)
{
    const l3_fc_args_t *a = (const l3_fc_args_t *)args;
    const int o = a->row0 + begin;
    int r;
    for (r = 0; r < a->rows; ++r) {
        edgernn_fully_connected_s8(a->in + (size_t)r * (size_t)a->n_in, a->w + (size_t)begin * (size_t)a->n_in,
                                   a->bias + o, a->multiplier + o, a->shift + o, a->rounding, a->output_offset,
                                   a->act_min, a->act_max, 1, a->n_in, end - begin,
                                   a->out[0] + (size_t)r * (size_t)a->n_out + o);
    }
}

static void l3_fc_group_rows(const void *args, int begin, int end)
{
    const l3_fc_args_t *a = (const l3_fc_args_t *)args;
    const int o = a->row0 + begin;
    edgernn_fully_connected_group_s8(a->in, a->w + (size_t)begin * (size_t)a->n_in, a->bias + o, a->multiplier + o,
                                     a->rnd + o, a->shift + o, a->rounding, a->ends, a->group_row0 + o, a->act_min,
                                     a->act_max, a->n_in, end - begin, a->out[0], a->out[1], a->out[2], a->out[3]);
}

/* Slices [begin, end) of the inputs, for every row of the chunk of a->n_chunk rows at a->w. */
static void l3_fc_slices(const void *args, int begin, int end)
{
    const l3_fc_args_t *a = (const l3_fc_args_t *)args;
    const int groups = a->n_in >> 2;
    int k;
    for (k = begin; k < end; ++k) {
        const int g0 = groups * k / L3_FC_SLICES, g1 = groups * (k + 1) / L3_FC_SLICES;
        const int n = 4 * (g1 - g0) + (k == L3_FC_SLICES - 1 ? (a->n_in & 3) : 0);
        const int8_t *x = a->x + 4 * g0;
        const int8_t *w = a->w;
        int32_t *sums = l3_fc_partial[k];
        int o = 0, j;
        for (; o + 8 <= a->n_chunk; o += 8, w += 8 * (size_t)a->n_in) {
            int32_t acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            edgernn_dot8_s8(x, w + 32 * g0, n, acc);
            for (j = 0; j < 8; ++j) {
                sums[o + j] = acc[j];
            }
        }
        if (o + 4 <= a->n_chunk) {
            int32_t acc[4] = {0, 0, 0, 0};
            edgernn_dot4_s8(x, w + 16 * g0, n, acc);
            for (j = 0; j < 4; ++j) {
                sums[o + j] = acc[j];
            }
            o += 4;
            w += 4 * (size_t)a->n_in;
        }
        for (; o < a->n_chunk; ++o, w += a->n_in) {
            sums[o] = edgernn_dot1_s8(x, w + 4 * g0, n, 0);
        }
    }
}

/* The chunk's rows from its slices' sums, for input row r. */
static void l3_fc_finish(const l3_fc_args_t *a, int r)
{
    int8_t *y = a->out[0] + (size_t)r * (size_t)a->n_out + a->row0;
    int o, k;
    for (o = 0; o < a->n_chunk; ++o) {
        const int row = a->row0 + o;
        int32_t acc = a->bias[row];
        for (k = 0; k < L3_FC_SLICES; ++k) {
            acc += l3_fc_partial[k][o];
        }
        y[o] = requantize_s8(acc, a->multiplier[row], a->shift[row], a->rounding, a->output_offset, a->act_min,
                             a->act_max);
    }
}

/* Each chunk of a's call: fn over its rows, on the team or on this core. */
static void l3_fc_chunks(const edgernn_l3_stream_t *s, l3_fc_args_t *a, edgernn_range_fn fn, int team)
{
    int o0;
    edgernn_l3_begin(s);
    for (o0 = 0; o0 < a->n_out; o0 += s->chunk_units) {
        const int n = a->n_out - o0 < s->chunk_units ? a->n_out - o0 : s->chunk_units;
        a->w = (const int8_t *)edgernn_l3_chunk(s, o0, s->next);
        a->row0 = o0;
        if (EDGERNN_L3_BENCH == 1) {
            continue;
        }
        a->n_chunk = n;
        if (team && fn == l3_fc_rows && n <= L3_FC_SLICE_ROWS &&
            (n + L3_FC_GRAIN - 1) / L3_FC_GRAIN < edgernn_team_workers()) {
            int r;
            for (r = 0; r < a->rows; ++r) {
                a->x = a->in + (size_t)r * (size_t)a->n_in;
                edgernn_team_split(l3_fc_slices, a, L3_FC_SLICES, 1);
                l3_fc_finish(a, r);
            }
        } else if (team) {
            edgernn_team_split(fn, a, n, L3_FC_GRAIN);
        } else {
            fn(a, 0, n);
        }
    }
}

void edgernn_l3_fully_connected_s8(const edgernn_l3_stream_t *s, const int8_t *in, const int8_t *w,
                                   const int32_t *bias, const int32_t *multiplier, const int32_t *shift, int rounding,
                                   int32_t output_offset, int32_t act_min, int32_t act_max, int rows, int n_in,
                                   int n_out, int8_t *out, int team)
{
    l3_fc_args_t a = {.in = in, .bias = bias, .multiplier = multiplier, .shift = shift, .rounding = rounding,
                      .rows = rows, .n_in = n_in, .n_out = n_out, .output_offset = output_offset,
                      .act_min = act_min, .act_max = act_max, .out = {out}};
    (void)w;
    l3_fc_chunks(s, &a, l3_fc_rows, team);
}

void edgernn_l3_fully_connected_group_s8(const edgernn_l3_stream_t *s, const int8_t *in, const int8_t *w,
                                         const int32_t *bias, const int32_t *multiplier, const int32_t *rnd,
                                         const int32_t *shift, int rounding, const int32_t *ends, int row0,
                                         int32_t act_min, int32_t act_max, int n_in, int n_out, int8_t *out0,
                                         int8_t *out1, int8_t *out2, int8_t *out3, int team)
{
    l3_fc_args_t a = {.in = in, .bias = bias, .multiplier = multiplier, .rnd = rnd, .shift = shift, .ends = ends,
                      .rounding = rounding, .rows = 1, .group_row0 = row0, .n_in = n_in, .n_out = n_out,
                      .act_min = act_min, .act_max = act_max, .out = {out0, out1, out2, out3}};
    (void)w;
    l3_fc_chunks(s, &a, l3_fc_group_rows, team);
}
