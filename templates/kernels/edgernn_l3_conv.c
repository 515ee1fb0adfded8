/* The int8 CONV_2D with its filter in the stream memory (edgernn_l3_stream.h), in chunks of output channels.
 *
 * In edgernn_dot.h's blocked layout, the filter's output channels [c0, c1) with c0 a multiple of 8 are bytes
 * [c0 * n_in, c1 * n_in) of w, laid out as a w of c1 - c0 channels (edgernn_l3_fc.c's rows). A chunk computes
 * those channels of every output pixel with the convolution's own code (edgernn_conv.c's conv_s8_channels:
 * each pixel's patch, the same dot products and requantization, its outputs g->out_c apart), so the bytes are
 * the unstreamed call's. Each chunk gathers the patches again: the convolutions that stream are the large
 * filters of a CNN's last blocks, whose frames are small (PULP-Dronet's 128-channel block: 7x7 pixels). This
 * file includes edgernn_conv.c and replaces it in a build that streams a CONV_2D. */
#include "edgernn_conv.c"

#include "edgernn_kernels.h"
#include "edgernn_l3_stream.h"
#include "edgernn_team.h"

void edgernn_l3_conv_s8(const edgernn_l3_stream_t *s, const edgernn_conv_geom_t *g, const int8_t *in, const int8_t *w,
                        const int32_t *bias, const int32_t *multiplier, const int32_t *shift, int32_t input_zero_point,
                        int32_t output_offset, int32_t act_min, int32_t act_max, int8_t *scratch, int8_t *out, int team)
{
    const int on_team = team && edgernn_team_workers() <= EDGERNN_CONV_TEAM_SLOTS;
    int c0;
    (void)w;
    edgernn_l3_begin(s);
    for (c0 = 0; c0 < g->out_c; c0 += s->chunk_units) {
        const int n = g->out_c - c0 < s->chunk_units ? g->out_c - c0 : s->chunk_units;
        const int8_t *chunk = (const int8_t *)edgernn_l3_chunk(s, c0, s->next);
        if (EDGERNN_L3_BENCH == 1) {
            continue;
        }
        conv_s8_channels(g, in, chunk, bias + c0, multiplier + c0, shift + c0, input_zero_point, output_offset,
                         act_min, act_max, scratch, out + c0, n, on_team);
    }
}
