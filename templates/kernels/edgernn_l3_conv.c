/* The int8 CONV_2D with its filter in the stream memory (edgernn_l3_stream.h), in chunks of output channels.
 *
 * In edgernn_dot.h's blocked layout, the filter's output channels [c0, c1) with c0 a multiple of 8 are bytes
 * [c0 * n_in, c1 * n_in) of w, laid out as a w of c1 - c0 channels (edgernn_l3_fc.c's rows). A chunk computes
 * those channels of every output pixel with the convolution's own code (edgernn_conv.c's conv_s8_channels:
 * each pixel's patch, the same dot products and requantization, its outputs g->out_c apart), so the bytes are
 * the unstreamed call's. Each chunk gathers the patches again: the convolutions that stream are the large
 * filters of a CNN's last blocks, whose frames are small (PULP-Dronet's 128-channel block: 7x7 pixels), so with a
 * work area in the team's fast memory the input, the patches and each chunk are there (the cores read L1). This
 * file includes edgernn_conv.c and replaces it in a build that streams a CONV_2D. */
#include "edgernn_conv.c"

#include "edgernn_kernels.h"
#include "edgernn_l3_stream.h"
#include "edgernn_team.h"

/* A copy of n bytes (a multiple of 4, both ends word-aligned) split across the team by words. */
typedef struct {
    uint32_t *dst;
    const uint32_t *src;
} l3_conv_copy_t;

static void l3_conv_copy_words(const void *args, int begin, int end)
{
    const l3_conv_copy_t *a = (const l3_conv_copy_t *)args;
    int k;
    for (k = begin; k < end; ++k) {
        a->dst[k] = a->src[k];
    }
}

static void l3_conv_copy(void *dst, const void *src, size_t n, int team)
{
    l3_conv_copy_t a;
    a.dst = (uint32_t *)dst;
    a.src = (const uint32_t *)src;
    if (team) {
        edgernn_team_split(l3_conv_copy_words, &a, (int)(n >> 2), 1);
    } else {
        l3_conv_copy_words(&a, 0, (int)(n >> 2));
    }
}

#define L3_CONV_ALIGN(n) (((size_t)(n) + 7u) & ~(size_t)7u)

/* fast (fast_bytes, NULL: none): a work area in the team's fast memory (GAP8: the DMA tiles in L1, free between
 * banded ops). When the patches (scratch_bytes), a chunk and the input fit it, the input is copied there once and
 * each chunk as it arrives, and the patches are gathered there: the dot products then read L1, not L2. */
void edgernn_l3_conv_s8(const edgernn_l3_stream_t *s, const edgernn_conv_geom_t *g, const int8_t *in, const int8_t *w,
                        const int32_t *bias, const int32_t *multiplier, const int32_t *shift, int32_t input_zero_point,
                        int32_t output_offset, int32_t act_min, int32_t act_max, int8_t *scratch, int8_t *out, int team,
                        uint8_t *fast, int32_t fast_bytes, int32_t scratch_bytes)
{
    const int on_team = team && edgernn_team_workers() <= EDGERNN_CONV_TEAM_SLOTS;
    const size_t in_bytes = (size_t)g->in_h * (size_t)g->in_w * (size_t)g->in_c;
    const size_t patches = L3_CONV_ALIGN(scratch_bytes), chunk_bytes = L3_CONV_ALIGN(s->slot_bytes);
    const int staged = fast != NULL && patches + chunk_bytes + L3_CONV_ALIGN(in_bytes) <= (size_t)fast_bytes &&
                       (in_bytes & 3u) == 0 && ((uintptr_t)in & 3u) == 0;
    int8_t *const fast_chunk = staged ? (int8_t *)(fast + patches) : NULL;
    int c0;
    (void)w;
    if (staged) {
        int8_t *const fast_in = (int8_t *)(fast + patches + chunk_bytes);
        l3_conv_copy(fast_in, in, in_bytes, on_team);
        in = fast_in;
        scratch = (int8_t *)fast;
    }
    edgernn_l3_begin(s);
    for (c0 = 0; c0 < g->out_c; c0 += s->chunk_units) {
        const int n = g->out_c - c0 < s->chunk_units ? g->out_c - c0 : s->chunk_units;
        const int8_t *chunk = (const int8_t *)edgernn_l3_chunk(s, c0, s->next);
        if (EDGERNN_L3_BENCH == 1) {
            continue;
        }
        if (staged) {
            l3_conv_copy(fast_chunk, chunk, ((size_t)n * (size_t)s->unit_bytes[0] + 3u) & ~(size_t)3u, on_team);
            chunk = fast_chunk;
        }
        conv_s8_channels(g, in, chunk, bias + c0, multiplier + c0, shift + c0, input_zero_point, output_offset,
                         act_min, act_max, scratch, out + c0, n, on_team);
    }
}
