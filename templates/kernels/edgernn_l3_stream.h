/* Kernels whose weight matrices are in the board's stream memory (the AI-deck's L3), read in chunks into
 * the two slots of a double buffer while the team computes the chunk before (edgernn/backend/streaming.py
 * plans them):
 *   edgernn_l3_stream.c  the chunks' transfers, shared by every streamed call of a model, so that each
 *                        call fetches the first chunk of the one after it;
 *   edgernn_l3_lstm.c    the int8 fused LSTM, in chunks of units;
 *   edgernn_l3_fc.c      the int8 FULLY_CONNECTED (and its groups), in chunks of output rows;
 *   edgernn_l3_conv.c    the int8 CONV_2D, in chunks of output channels. */
#ifndef EDGERNN_L3_STREAM_H
#define EDGERNN_L3_STREAM_H

#include <stdint.h>

#include "edgernn_kernels.h"

/* One streamed call, written by the build. A unit is what a chunk counts: an LSTM's cell (4 rows of each
 * gate matrix), a FULLY_CONNECTED's output row, a CONV_2D's output channel. A chunk's slot holds its units of matrix 0, then (at
 * chunk_units * unit_bytes[0] when matrix 0 is streamed) those of matrix 1. */
typedef struct edgernn_l3_stream_s {
    int32_t units;          /* the call's units */
    int32_t chunk_units;    /* units per chunk, a multiple of the kernel's grain (LSTM 4, FC 8) */
    int32_t l3[2];          /* each matrix's byte offset in the stream memory's blob, -1: not streamed */
    int32_t unit_bytes[2];  /* the bytes of one unit in each matrix */
    uint8_t *tiles;         /* two slots of slot_bytes each */
    int32_t slot_bytes;
    /* The streamed call that comes next in the schedule (itself when it is the only one, the first of the
     * next step after the last): its first chunk is fetched while the rest of the step runs. */
    const struct edgernn_l3_stream_s *next;
} edgernn_l3_stream_t;

/* edgernn_lstm_s8 (edgernn_kernels.h) whose streamed matrices (NULL here) come from the stream memory;
 * team: split each chunk's units across the team (as edgernn_team_lstm_s8), else one core. */
void edgernn_l3_lstm_s8(const edgernn_l3_stream_t *s, const edgernn_lstm_s8_params_t *p, const int8_t *w_in,
                        const int8_t *w_rec, const int32_t *bias_in, const int32_t *bias_rec, int steps,
                        const int8_t *x, int8_t *h, int16_t *c, int8_t *y, int16_t *scratch, int team);

/* edgernn_fully_connected_s8 whose w (NULL here) comes from the stream memory; team: split each chunk's
 * rows across the team (as edgernn_team_fully_connected_s8), else one core. */
void edgernn_l3_fully_connected_s8(const edgernn_l3_stream_t *s, const int8_t *in, const int8_t *w,
                                   const int32_t *bias, const int32_t *multiplier, const int32_t *shift, int rounding,
                                   int32_t output_offset, int32_t act_min, int32_t act_max, int rows, int n_in,
                                   int n_out, int8_t *out, int team);

/* edgernn_conv_s8 whose filter w (NULL here) comes from the stream memory, in chunks of output channels; team:
 * split each chunk's pixels across the team (as edgernn_team_conv_s8), else one core; fast (NULL: none): a work
 * area of fast_bytes in the team's fast memory for the input, a chunk and the patches (scratch_bytes of them). */
void edgernn_l3_conv_s8(const edgernn_l3_stream_t *s, const edgernn_conv_geom_t *g, const int8_t *in, const int8_t *w,
                        const int32_t *bias, const int32_t *multiplier, const int32_t *shift, int32_t input_zero_point,
                        int32_t output_offset, int32_t act_min, int32_t act_max, int8_t *scratch, int8_t *out, int team,
                        uint8_t *fast, int32_t fast_bytes, int32_t scratch_bytes);

/* edgernn_fully_connected_group_s8 whose w (NULL here) comes from the stream memory; team as above. */
void edgernn_l3_fully_connected_group_s8(const edgernn_l3_stream_t *s, const int8_t *in, const int8_t *w,
                                         const int32_t *bias, const int32_t *multiplier, const int32_t *rnd,
                                         const int32_t *shift, int rounding, const int32_t *ends, int row0,
                                         int32_t act_min, int32_t act_max, int n_in, int n_out, int8_t *out0,
                                         int8_t *out1, int8_t *out2, int8_t *out3, int team);

/* The chunks (edgernn_l3_stream.c), on the core that runs the step. Before a call's chunks: its first
 * chunk in flight (already, when the call before fetched it). */
void edgernn_l3_begin(const edgernn_l3_stream_t *s);
/* The chunk of s from unit first_unit, once it has arrived; the transfer of the next one starts before
 * this returns: s's next chunk, or after its last the first chunk of `then` (NULL: none). */
const uint8_t *edgernn_l3_chunk(const edgernn_l3_stream_t *s, int first_unit, const edgernn_l3_stream_t *then);

/* Only for bench/bench_l3.py, never in a build that validates: 1 the transfers alone (no chunk computed),
 * 2 the chunks alone (no transfer: computed on whatever the tiles hold), 4 the same with the chunks read
 * from a buffer in the team's fast memory (L1) instead of the slots; the step's bounds. */
#ifndef EDGERNN_L3_BENCH
#define EDGERNN_L3_BENCH 0
#endif
#if EDGERNN_L3_BENCH == 4
/* EDGERNN_L3_BENCH 4: the buffer every chunk is read from, given by edgernn_init (NULL: the slots). */
void edgernn_l3_bench_fast_tiles(uint8_t *tiles);
#endif

/* The board's side (boards/<board>.toml: placement.stream_source). */
/* Before the first step, on the core that calls edgernn_init: the stream memory ready with its blob of
 * `bytes` bytes whose checksum is `checksum` (FNV-1a over its 32-bit words, edgernn/backend/streaming.py;
 * the AI-deck: edgernn_l3.bin from the flash image's readfs copied into HyperRAM). 0: done. */
int edgernn_l3_open(uint32_t bytes, uint32_t checksum);
/* Start copying `bytes` from the blob at `offset` to dst, as part `part` (0 or 1) of slot `slot` (0 or 1). */
void edgernn_l3_read(int slot, int part, void *dst, uint32_t offset, uint32_t bytes);
/* Wait until every part started on `slot` has arrived. */
void edgernn_l3_wait(int slot);

#endif /* EDGERNN_L3_STREAM_H */
