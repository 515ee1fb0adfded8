/* The int8 fused LSTM with gate matrices in the board's stream memory (the AI-deck's L3), read in chunks
 * of units into double buffers while the team computes the chunk before (edgernn_l3_lstm.c). */
#ifndef EDGERNN_L3_LSTM_H
#define EDGERNN_L3_LSTM_H

#include <stdint.h>

#include "edgernn_kernels.h"

/* One streamed LSTM call, written by the build (edgernn/backend/streaming.py). */
typedef struct edgernn_l3_lstm_s {
    const edgernn_lstm_s8_params_t *p;   /* the call's parameters (its n_input and n_cell size the chunks) */
    int32_t w_in_l3;        /* w_in's byte offset in the stream memory's blob, or -1: w_in is on chip */
    int32_t w_rec_l3;       /* the same for w_rec */
    int32_t chunk_units;    /* units per chunk: a multiple of 4 (two int8 weight blocks of two units) */
    uint8_t *tiles;         /* two slots of slot_bytes each */
    int32_t slot_bytes;
    /* The streamed call that comes next in the schedule (itself when it is the only one, the first of the
     * next step after the last): its first chunk is fetched while the rest of the step runs. */
    const struct edgernn_l3_lstm_s *next;
} edgernn_l3_lstm_t;

/* edgernn_lstm_s8 (edgernn_kernels.h) whose streamed matrices (NULL here) come from the stream memory;
 * team: split each chunk's units across the team (edgernn_team_lstm_s8), else one core. */
void edgernn_l3_lstm_s8(const edgernn_l3_lstm_t *s, const edgernn_lstm_s8_params_t *p, const int8_t *w_in,
                        const int8_t *w_rec, const int32_t *bias_in, const int32_t *bias_rec, int steps,
                        const int8_t *x, int8_t *h, int16_t *c, int8_t *y, int16_t *scratch, int team);

/* The board's side (boards/<board>.toml: placement.stream_source). */
/* Before the first step, on the core that calls edgernn_init: the stream memory ready with its blob of
 * `bytes` bytes whose checksum is `checksum` (FNV-1a over its 32-bit words, edgernn/backend/streaming.py;
 * the AI-deck: edgernn_l3.bin from the flash image's readfs copied into HyperRAM). 0: done. */
int edgernn_l3_open(uint32_t bytes, uint32_t checksum);
/* Start copying `bytes` from the blob at `offset` to dst, as part `part` (0 or 1) of slot `slot` (0 or 1). */
void edgernn_l3_read(int slot, int part, void *dst, uint32_t offset, uint32_t bytes);
/* Wait until every part started on `slot` has arrived. */
void edgernn_l3_wait(int slot);

#endif /* EDGERNN_L3_LSTM_H */
