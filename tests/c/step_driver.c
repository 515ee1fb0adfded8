/* Test driver for generated firmware: runs a whole sequence and records every output and state.
 *
 * usage: step_driver IN OUT [--state-every-step]
 *   IN:  int32 n_steps, then n_steps * EDGERNN_INPUT_SIZE inputs (edgernn_in_t), then optionally
 *        EDGERNN_STATE_BYTES of initial state (else the reset state);
 *        with --state-every-step, each step's inputs followed by that step's own EDGERNN_STATE_BYTES of state
 *        (a model whose state inputs are operands, tests/support/op_graphs.py, gets a fresh draw of each)
 *   OUT: for each step, EDGERNN_OUTPUT_SIZE outputs (edgernn_out_t) then EDGERNN_STATE_BYTES of state
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

int main(int argc, char **argv)
{
    FILE *in, *out;
    int32_t n_steps;
    int t, every_step;
    static edgernn_in_t x[EDGERNN_INPUT_SIZE];
    static edgernn_out_t y[EDGERNN_OUTPUT_SIZE];
    static uint8_t state[EDGERNN_STATE_BYTES + 1];
    every_step = argc == 4 && strcmp(argv[3], "--state-every-step") == 0;
    if (argc != 3 && !every_step) {
        fprintf(stderr, "usage: %s IN OUT [--state-every-step]\n", argv[0]);
        return 2;
    }
    in = fopen(argv[1], "rb");
    out = fopen(argv[2], "wb");
    if (!in || !out || fread(&n_steps, sizeof n_steps, 1, in) != 1) {
        return 2;
    }
    if (edgernn_init() != EDGERNN_OK) {
        return 3;
    }
    for (t = 0; t < n_steps; ++t) {
        if (fread(x, sizeof(edgernn_in_t), EDGERNN_INPUT_SIZE, in) != EDGERNN_INPUT_SIZE) {
            return 2;
        }
        if (every_step) {
            if (fread(state, 1, EDGERNN_STATE_BYTES, in) != EDGERNN_STATE_BYTES) {
                return 2;
            }
            edgernn_set_state(state);
        } else if (t == 0 && EDGERNN_STATE_BYTES > 0) {
            long pos = ftell(in);
            if (fseek(in, (long)(n_steps - 1) * (long)sizeof x, SEEK_CUR) == 0 &&
                fread(state, 1, EDGERNN_STATE_BYTES, in) == EDGERNN_STATE_BYTES) {
                edgernn_set_state(state);
            }
            fseek(in, pos, SEEK_SET);
        }
        if (edgernn_step(x, y) != EDGERNN_OK) {
            return 4;
        }
        edgernn_get_state(state);
        fwrite(y, sizeof(edgernn_out_t), EDGERNN_OUTPUT_SIZE, out);
        fwrite(state, 1, EDGERNN_STATE_BYTES, out);
    }
    fclose(in);
    fclose(out);
    printf("~~~EDGERNN STEPS DONE~~~\n");
    return 0;
}
