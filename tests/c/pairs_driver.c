/* Test driver for generated firmware: every step from its own input AND its own state, so that a model
 * whose state inputs are operands (tests/support/op_graphs.py) sees a fresh draw of each at every step.
 *
 * usage: pairs_driver IN OUT
 *   IN:  int32 n_steps, then per step EDGERNN_INPUT_SIZE inputs (edgernn_in_t) and EDGERNN_STATE_BYTES of state
 *   OUT: per step EDGERNN_OUTPUT_SIZE outputs (edgernn_out_t) then EDGERNN_STATE_BYTES of state
 */
#include <stdio.h>

#include "model.h"

int main(int argc, char **argv)
{
    FILE *in, *out;
    int32_t n_steps;
    int t;
    static edgernn_in_t x[EDGERNN_INPUT_SIZE];
    static edgernn_out_t y[EDGERNN_OUTPUT_SIZE];
    static uint8_t state[EDGERNN_STATE_BYTES + 1];
    if (argc != 3) {
        fprintf(stderr, "usage: %s IN OUT\n", argv[0]);
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
        if (fread(x, sizeof(edgernn_in_t), EDGERNN_INPUT_SIZE, in) != EDGERNN_INPUT_SIZE ||
            fread(state, 1, EDGERNN_STATE_BYTES, in) != EDGERNN_STATE_BYTES) {
            return 2;
        }
        edgernn_set_state(state);
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
