/* edgernn_l3_fully_connected_s8 and edgernn_l3_fully_connected_group_s8 (w streamed in chunks of rows)
 * against edgernn_fully_connected_s8 and edgernn_fully_connected_group_s8 (w in memory), byte for byte:
 * tests/backend/test_l3_fc.py. Built with a host firmware folder on the include path (the kernels'
 * headers and sources). The weights, biases and rescales are pseudo-random (any bytes are a w of the
 * blocked layout, and both sides compute the same function of them). Two calls with their own weights
 * run in turn (each the other's `next`, as two streamed layers are), `rounds` times.
 * The stream memory is a copy in RAM whose transfers land only when edgernn_l3_wait is called, so a chunk
 * computed before its wait reads stale bytes (the slots start filled with 0x5a).
 *     l3_fc_check N_IN N_OUT CHUNK TEAM ROWS GROUP ROUNDS -> prints the mismatches
 * GROUP: 0 a FULLY_CONNECTED of ROWS rows; 2..4 a group of that many ops (one row each), their rows split as
 * evenly as the n_out allows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgernn_kernels.h"
#include "edgernn_l3_stream.h"
#include "edgernn_team.h"

#define MAX_IN 256
#define MAX_OUT 256
#define MAX_ROWS 4

static uint8_t stream_memory[2 * MAX_IN * MAX_OUT];
static uint8_t tiles[2 * MAX_IN * MAX_OUT];
#include "l3_stream_host.h"

static unsigned seed = 12345u;

static uint32_t next_random(void)
{
    seed = seed * 1103515245u + 12345u;
    return seed >> 8;
}

int main(int argc, char **argv)
{
    static int32_t bias[2][MAX_OUT], mult[2][MAX_OUT], shift[2][MAX_OUT], rnd[2][MAX_OUT];
    static int8_t x[MAX_ROWS * MAX_IN], y[2][MAX_ROWS * MAX_OUT], y_ref[MAX_ROWS * MAX_OUT];
    const int n_in = argc == 8 ? atoi(argv[1]) : 0, n_out = argc == 8 ? atoi(argv[2]) : 0;
    const int chunk = argc == 8 ? atoi(argv[3]) : 0, team = argc == 8 ? atoi(argv[4]) : 0;
    const int rows = argc == 8 ? atoi(argv[5]) : 0, group = argc == 8 ? atoi(argv[6]) : 0;
    const int rounds = argc == 8 ? atoi(argv[7]) : 0;
    const size_t w_bytes = (size_t)n_in * (size_t)n_out;
    const int32_t at[2] = {0, (int32_t)((w_bytes + 7u) & ~(size_t)7u)};
    int32_t ends[4] = {0, 0, 0, 0};
    edgernn_l3_stream_t desc[2];
    long mismatches = 0;
    int r, k, i, m;

    if (argc != 8 || n_in < 1 || n_in > MAX_IN || n_out < 1 || n_out > MAX_OUT || rows < 1 || rows > MAX_ROWS ||
        (group != 0 && (group < 2 || group > 4 || rows != 1 || n_out < group))) {
        return 2;
    }
    if (edgernn_team_open() != 0) {
        return 2;
    }
    for (m = 0; m < group; ++m) {
        ends[m] = (int32_t)(n_out * (m + 1) / group);
    }
    for (k = 0; k < 2; ++k) {
        for (i = 0; i < (int)w_bytes; ++i) {
            stream_memory[at[k] + i] = (uint8_t)next_random();
        }
        for (i = 0; i < n_out; ++i) {
            const int e = 2 + (int)(next_random() % 9u);     /* the right shift e >= 2 of both kernels */
            bias[k][i] = (int32_t)(next_random() % 40001u) - 20000;
            mult[k][i] = (int32_t)(0x40000000u + next_random() % 0x3fffffffu);
            shift[k][i] = group ? e - 1 : -e;
            rnd[k][i] = (1 << (e - 2)) + ((int32_t)(next_random() % 21u) - 10) * (1 << (e - 1));
        }
        desc[k].units = n_out;
        desc[k].chunk_units = chunk;
        desc[k].l3[0] = at[k];
        desc[k].l3[1] = -1;
        desc[k].unit_bytes[0] = n_in;
        desc[k].unit_bytes[1] = 0;
        desc[k].tiles = tiles;
        desc[k].slot_bytes = chunk * n_in;
        desc[k].next = &desc[1 - k];
    }
    memset(tiles, 0x5a, sizeof tiles);
    for (r = 0; r < rounds; ++r) {
        for (k = 0; k < 2; ++k) {
            const int8_t *w = (const int8_t *)stream_memory + at[k];
            const int rounding = (r + k) % 2 ? EDGERNN_ROUND_TWICE_UP : EDGERNN_ROUND_ONCE;
            for (i = 0; i < rows * n_in; ++i) {
                x[i] = (int8_t)next_random();
            }
            memset(y_ref, 0x11, sizeof y_ref);
            memset(y[k], 0x22, sizeof y[k]);
            if (group) {
                int8_t *o[4] = {y_ref, y_ref + ends[0], y_ref + ends[1], y_ref + ends[2]};
                int8_t *s[4] = {y[k], y[k] + ends[0], y[k] + ends[1], y[k] + ends[2]};
                edgernn_fully_connected_group_s8(x, w, bias[k], mult[k], rnd[k], shift[k], rounding, ends, 0, -100,
                                                 120, n_in, n_out, o[0], o[1], o[2], o[3]);
                edgernn_l3_fully_connected_group_s8(&desc[k], x, NULL, bias[k], mult[k], rnd[k], shift[k], rounding,
                                                    ends, 0, -100, 120, n_in, n_out, s[0], s[1], s[2], s[3], team);
            } else {
                edgernn_fully_connected_s8(x, w, bias[k], mult[k], shift[k], rounding, 7, -128, 127, rows, n_in,
                                           n_out, y_ref);
                edgernn_l3_fully_connected_s8(&desc[k], x, NULL, bias[k], mult[k], shift[k], rounding, 7, -128, 127,
                                              rows, n_in, n_out, y[k], team);
            }
            for (i = 0; i < rows * n_out; ++i) {
                mismatches += y_ref[i] != y[k][i];
            }
        }
    }
    printf("mismatches %ld\n", mismatches);
    return 0;
}
