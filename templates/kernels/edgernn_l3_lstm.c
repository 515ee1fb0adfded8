/* The int8 fused LSTM with its gate matrices in the stream memory (edgernn_l3_lstm.h).
 *
 * A time step's units are independent until the new h is published (lstm_s8_units), and unit u's weights
 * are rows 4u..4u+3 of each matrix, contiguous in edgernn_dot.h's blocked layout for ranges that start at
 * a multiple of two units. So a chunk of units is the very computation of edgernn_lstm.c on a shorter
 * matrix: the same function on the same bytes, hence the same result. This file includes edgernn_lstm.c
 * (and replaces it in a build that streams) to call its unit code. While the team computes chunk k from
 * one slot, the stream memory fills the other with chunk k + 1; after the last chunk it fills it with the
 * first chunk of the next time step, or after the call's last step of the next streamed call, so the
 * transfer runs on through the unstreamed ops. */
#include "edgernn_lstm.c"

#include <stddef.h>

#include "edgernn_l3_lstm.h"

/* Only for bench/bench_l3.py, never in a build that validates: 1 the transfers alone (no chunk computed),
 * 2 the chunks alone (no transfer: computed on whatever the tiles hold); the step's two bounds. */
#ifndef EDGERNN_L3_BENCH
#define EDGERNN_L3_BENCH 0
#endif

static const edgernn_l3_lstm_t *l3_pending;     /* whose first chunk is in flight in l3_slot */
static int l3_slot;

/* Start the transfer of the chunk of units from first_unit into slot. */
static void l3_fetch(const edgernn_l3_lstm_t *s, int slot, int first_unit)
{
    const uint32_t n_in = (uint32_t)s->p->n_input;
    const uint32_t n_cell = (uint32_t)s->p->n_cell;
    const uint32_t left = n_cell - (uint32_t)first_unit;
    const uint32_t units = left < (uint32_t)s->chunk_units ? left : (uint32_t)s->chunk_units;
    uint8_t *dst = s->tiles + (size_t)slot * (size_t)s->slot_bytes;
    if (EDGERNN_L3_BENCH == 2) {
        return;
    }
    if (s->w_in_l3 >= 0) {
        edgernn_l3_read(slot, 0, dst, (uint32_t)s->w_in_l3 + 4u * (uint32_t)first_unit * n_in, 4u * units * n_in);
        dst += 4u * (uint32_t)s->chunk_units * n_in;
    }
    if (s->w_rec_l3 >= 0) {
        edgernn_l3_read(slot, 1, dst, (uint32_t)s->w_rec_l3 + 4u * (uint32_t)first_unit * n_cell,
                        4u * units * n_cell);
    }
}

void edgernn_l3_lstm_s8(const edgernn_l3_lstm_t *s, const edgernn_lstm_s8_params_t *p, const int8_t *w_in,
                        const int8_t *w_rec, const int32_t *bias_in, const int32_t *bias_rec, int steps,
                        const int8_t *x, int8_t *h, int16_t *c, int8_t *y, int16_t *scratch, int team)
{
    const int n_in = (int)p->n_input;
    const int n_cell = (int)p->n_cell;
    int t, j;
    for (t = 0; t < steps; ++t) {
        const int8_t *xt = x + (size_t)t * (size_t)n_in;
        int u0;
        if (l3_pending != s) {
            if (l3_pending != NULL) {
                /* another call's first chunk is in flight in this slot (a schedule that skipped it): let it
                 * land before the slot is filled again */
                edgernn_l3_wait(l3_slot);
            }
            l3_fetch(s, l3_slot, 0);
        }
        l3_pending = NULL;
        for (u0 = 0; u0 < n_cell; u0 += s->chunk_units) {
            const int units = n_cell - u0 < s->chunk_units ? n_cell - u0 : s->chunk_units;
            const int slot = l3_slot;
            const uint8_t *tile = s->tiles + (size_t)slot * (size_t)s->slot_bytes;
            lstm_s8_args_t a;
            edgernn_l3_wait(slot);
            if (u0 + s->chunk_units < n_cell) {
                l3_fetch(s, slot ^ 1, u0 + s->chunk_units);
            } else {
                /* the first chunk of what streams next: this call's next time step, else the next call */
                const edgernn_l3_lstm_t *next = t + 1 < steps ? s : s->next;
                if (next != NULL) {
                    l3_fetch(next, slot ^ 1, 0);
                    l3_pending = next;
                }
            }
            a.p = p;
            a.w_in = s->w_in_l3 >= 0 ? (const int8_t *)tile : w_in + 4 * (size_t)u0 * (size_t)n_in;
            a.w_rec = s->w_rec_l3 >= 0
                          ? (const int8_t *)tile + (s->w_in_l3 >= 0 ? 4 * (size_t)s->chunk_units * (size_t)n_in : 0)
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
            l3_slot = slot ^ 1;
        }
        /* h is read by every gate of this step, so it changes only now */
        for (j = 0; j < n_cell; ++j) {
            h[j] = (int8_t)scratch[j];
            y[(size_t)t * (size_t)n_cell + (size_t)j] = h[j];
        }
    }
}
