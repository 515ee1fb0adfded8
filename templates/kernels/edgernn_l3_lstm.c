/* The int8 fused LSTM with its gate matrices in the stream memory (edgernn_l3_stream.h).
 *
 * A time step's units are independent until the new h is published (lstm_s8_units), and unit u's weights
 * are rows 4u..4u+3 of each matrix, contiguous in edgernn_dot.h's blocked layout for ranges that start at
 * a multiple of two units. So a chunk of units is the very computation of edgernn_lstm.c on a shorter
 * matrix: the same function on the same bytes, hence the same result. This file includes edgernn_lstm.c
 * (and replaces it in a build that streams an LSTM) to call its unit code. The chunks' transfers are
 * edgernn_l3_stream.c's: after the last chunk of a time step comes the first of the next time step, or
 * after the call's last step the first of the next streamed call. */
#include "edgernn_lstm.c"

#include <stddef.h>

#include "edgernn_l3_stream.h"

void edgernn_l3_lstm_s8(const edgernn_l3_stream_t *s, const edgernn_lstm_s8_params_t *p, const int8_t *w_in,
                        const int8_t *w_rec, const int32_t *bias_in, const int32_t *bias_rec, int steps,
                        const int8_t *x, int8_t *h, int16_t *c, int8_t *y, int16_t *scratch, int team)
{
    const int n_in = (int)p->n_input;
    const int n_cell = (int)p->n_cell;
    int t, j;
    for (t = 0; t < steps; ++t) {
        const int8_t *xt = x + (size_t)t * (size_t)n_in;
        int u0;
        edgernn_l3_begin(s);
        for (u0 = 0; u0 < n_cell; u0 += s->chunk_units) {
            const int units = n_cell - u0 < s->chunk_units ? n_cell - u0 : s->chunk_units;
            const uint8_t *tile = edgernn_l3_chunk(s, u0, t + 1 < steps ? s : s->next);
            lstm_s8_args_t a;
            a.p = p;
            a.w_in = s->l3[0] >= 0 ? (const int8_t *)tile : w_in + 4 * (size_t)u0 * (size_t)n_in;
            a.w_rec = s->l3[1] >= 0
                          ? (const int8_t *)tile + (s->l3[0] >= 0 ? 4 * (size_t)s->chunk_units * (size_t)n_in : 0)
                          : w_rec + 4 * (size_t)u0 * (size_t)n_cell;
            a.bias_in = bias_in + 4 * (size_t)u0;
            a.bias_rec = bias_rec + 4 * (size_t)u0;
            a.xt = xt;
            a.h = h;
            a.c = c + u0;
            a.scratch = scratch + u0;
            if (EDGERNN_L3_BENCH == 1) {
                (void)a;
            } else if (team) {
                edgernn_team_split(lstm_s8_units, &a, units, LSTM_GRAIN);
            } else {
                lstm_s8_units(&a, 0, units);
            }
        }
        /* h is read by every gate of this step, so it changes only now */
        for (j = 0; j < n_cell; ++j) {
            h[j] = (int8_t)scratch[j];
            y[(size_t)t * (size_t)n_cell + (size_t)j] = h[j];
        }
    }
}
