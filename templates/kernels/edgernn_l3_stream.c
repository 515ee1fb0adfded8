/* The chunks of the streamed calls (edgernn_l3_stream.h). One double buffer serves every streamed call of
 * the model: while the team computes chunk k from one slot, the stream memory fills the other with chunk
 * k + 1; after a call's last chunk it fills it with the first chunk of what streams next (the call's next
 * time step, or the next streamed call), so that transfer runs on through the unstreamed ops between. */
#include <stddef.h>

#include "edgernn_l3_stream.h"

static const edgernn_l3_stream_t *l3_pending;   /* whose first chunk is in flight in l3_slot */
static int l3_slot;

#if EDGERNN_L3_BENCH == 4
static uint8_t *l3_fast_tiles;

void edgernn_l3_bench_fast_tiles(uint8_t *tiles)
{
    l3_fast_tiles = tiles;
}
#endif

/* Start the transfer of s's chunk from unit first_unit into slot. */
static void l3_fetch(const edgernn_l3_stream_t *s, int slot, int first_unit)
{
    const uint32_t left = (uint32_t)(s->units - first_unit);
    const uint32_t units = left < (uint32_t)s->chunk_units ? left : (uint32_t)s->chunk_units;
    uint8_t *dst = s->tiles + (size_t)slot * (size_t)s->slot_bytes;
    int m;
    if (EDGERNN_L3_BENCH == 2 || EDGERNN_L3_BENCH == 4) {
        return;
    }
    for (m = 0; m < 2; ++m) {
        if (s->l3[m] >= 0) {
            const uint32_t unit = (uint32_t)s->unit_bytes[m];
            edgernn_l3_read(slot, m, dst, (uint32_t)s->l3[m] + unit * (uint32_t)first_unit, unit * units);
            dst += unit * (uint32_t)s->chunk_units;
        }
    }
}

void edgernn_l3_begin(const edgernn_l3_stream_t *s)
{
    if (l3_pending != s) {
        if (l3_pending != NULL) {
            /* another call's first chunk is in flight in this slot (a schedule that skipped it): let it land
             * before the slot is filled again */
            edgernn_l3_wait(l3_slot);
        }
        l3_fetch(s, l3_slot, 0);
    }
    l3_pending = NULL;
}

const uint8_t *edgernn_l3_chunk(const edgernn_l3_stream_t *s, int first_unit, const edgernn_l3_stream_t *then)
{
    const int slot = l3_slot;
    edgernn_l3_wait(slot);
    if (first_unit + s->chunk_units < s->units) {
        l3_fetch(s, slot ^ 1, first_unit + s->chunk_units);
    } else if (then != NULL) {
        l3_fetch(then, slot ^ 1, 0);
        l3_pending = then;
    }
    l3_slot = slot ^ 1;
#if EDGERNN_L3_BENCH == 4
    if (l3_fast_tiles != NULL) {
        return l3_fast_tiles + (size_t)slot * (size_t)s->slot_bytes;
    }
#endif
    return s->tiles + (size_t)slot * (size_t)s->slot_bytes;
}
