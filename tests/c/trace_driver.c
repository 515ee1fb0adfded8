/* Debug driver: one step from a given input and state, writing every operator's output.
 * usage: trace_driver IN OUT   (IN: x then EDGERNN_STATE_BYTES of state; OUT: records of
 * int32 op index, int32 byte count, bytes) */
#include <stdio.h>

#include "model.h"

static FILE *trace_out;

void edgernn_trace(int op_index, const void *data, size_t nbytes);
void edgernn_trace(int op_index, const void *data, size_t nbytes)
{
    int32_t head[2];
    head[0] = op_index;
    head[1] = (int32_t)nbytes;
    fwrite(head, sizeof head, 1, trace_out);
    fwrite(data, 1, nbytes, trace_out);
}

int main(int argc, char **argv)
{
    static edgernn_in_t x[EDGERNN_INPUT_SIZE];
    static edgernn_out_t y[EDGERNN_OUTPUT_SIZE];
    static uint8_t state[EDGERNN_STATE_BYTES + 1];
    FILE *in;
    if (argc != 3) {
        return 2;
    }
    in = fopen(argv[1], "rb");
    trace_out = fopen(argv[2], "wb");
    if (!in || !trace_out || fread(x, sizeof x, 1, in) != 1) {
        return 2;
    }
    edgernn_init();
    if (EDGERNN_STATE_BYTES > 0 && fread(state, 1, EDGERNN_STATE_BYTES, in) == EDGERNN_STATE_BYTES) {
        edgernn_set_state(state);
    }
    edgernn_step(x, y);
    fclose(trace_out);
    return 0;
}
