/* edgernn_l3_lstm_s8 (weights streamed in chunks) against edgernn_lstm_s8 (weights in memory), byte for byte:
 * tests/backend/test_l3_lstm.py. Built with a host firmware folder of a fused int8 LSTM on the include path
 * (weights.h) and LSTM_P, LSTM_W_IN, ... naming its arrays. Two calls that share the weights and keep their
 * own states run in turn (each the other's `next`, as two streamed layers are), `rounds` times.
 * The stream memory is a copy in RAM whose transfers land only when edgernn_l3_wait is called, so a chunk
 * computed before its wait reads stale bytes (the slots start filled with 0x5a).
 *     l3_lstm_check CHUNK_UNITS STREAMED(1 w_in, 2 w_rec, 3 both) TEAM STEPS ROUNDS -> prints the mismatches */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgernn_l3_stream.h"
#include "edgernn_team.h"
#include "weights.h"

#define MAX_UNITS 256
#define MAX_IN 64

static uint8_t stream_memory[4 * MAX_UNITS * (MAX_IN + MAX_UNITS)];
static uint8_t tiles[2 * 4 * MAX_UNITS * (MAX_IN + MAX_UNITS)];
#include "l3_stream_host.h"

int main(int argc, char **argv)
{
    const edgernn_lstm_s8_params_t *p = &LSTM_P;
    const int n_in = (int)p->n_input, n_cell = (int)p->n_cell;
    const int chunk = atoi(argv[1]), streamed = atoi(argv[2]), team = atoi(argv[3]);
    const int steps = atoi(argv[4]), rounds = atoi(argv[5]);
    const size_t in_bytes = 4u * (size_t)n_cell * (size_t)n_in, rec_bytes = 4u * (size_t)n_cell * (size_t)n_cell;
    const int32_t rec_at = (int32_t)((in_bytes + 7u) & ~(size_t)7u);
    int8_t h[2][2][MAX_UNITS], y[2][2][8 * MAX_UNITS], x[8 * MAX_IN];
    int16_t c[2][2][MAX_UNITS], scratch[MAX_UNITS];
    edgernn_l3_stream_t desc[2];
    long mismatches = 0;
    int r, k, i;
    unsigned seed = 12345u;

    if (argc != 6 || n_cell > MAX_UNITS || n_in > MAX_IN || steps > 8) {
        return 2;
    }
    if (edgernn_team_open() != 0) {
        return 2;
    }
    memcpy(stream_memory, LSTM_W_IN, in_bytes);
    memcpy(stream_memory + rec_at, LSTM_W_REC, rec_bytes);
    memset(tiles, 0x5a, sizeof tiles);
    for (k = 0; k < 2; ++k) {
        desc[k].units = n_cell;
        desc[k].l3[0] = (streamed & 1) ? 0 : -1;
        desc[k].l3[1] = (streamed & 2) ? rec_at : -1;
        desc[k].unit_bytes[0] = 4 * n_in;
        desc[k].unit_bytes[1] = 4 * n_cell;
        desc[k].chunk_units = chunk;
        desc[k].tiles = tiles;
        desc[k].slot_bytes = chunk * 4 * (((streamed & 1) ? n_in : 0) + ((streamed & 2) ? n_cell : 0));
        desc[k].next = &desc[1 - k];
    }
    memset(h, 0, sizeof h);
    memset(c, 0, sizeof c);
    for (r = 0; r < rounds; ++r) {
        for (k = 0; k < 2; ++k) {       /* call k: [0] the reference's state, [1] the streamed one's */
            for (i = 0; i < steps * n_in; ++i) {
                seed = seed * 1103515245u + 12345u;
                x[i] = (int8_t)(seed >> 24);
            }
            edgernn_lstm_s8(p, LSTM_W_IN, LSTM_W_REC, LSTM_BIAS_IN, LSTM_BIAS_REC, steps, x, h[k][0], c[k][0],
                            y[k][0], scratch);
            edgernn_l3_lstm_s8(&desc[k], p, (streamed & 1) ? NULL : LSTM_W_IN, (streamed & 2) ? NULL : LSTM_W_REC,
                               LSTM_BIAS_IN, LSTM_BIAS_REC, steps, x, h[k][1], c[k][1], y[k][1], scratch, team);
            for (i = 0; i < n_cell; ++i) {
                mismatches += h[k][0][i] != h[k][1][i];
                mismatches += c[k][0][i] != c[k][1][i];
            }
            for (i = 0; i < steps * n_cell; ++i) {
                mismatches += y[k][0][i] != y[k][1][i];
            }
        }
    }
    printf("mismatches %ld\n", mismatches);
    return 0;
}
