/* Test driver for the generated head: usage head_driver IN OUT
 * IN: int32 n, then n * EDGERNN_HEAD_INPUT_SIZE inputs; OUT: n * EDGERNN_HEAD_OUTPUT_SIZE outputs. */
#include <stdio.h>

#include "model.h"

int main(int argc, char **argv)
{
    static edgernn_head_in_t h[EDGERNN_HEAD_INPUT_SIZE];
    static edgernn_head_out_t y[EDGERNN_HEAD_OUTPUT_SIZE];
    FILE *in, *out;
    int32_t n;
    int k;
    if (argc != 3) {
        return 2;
    }
    in = fopen(argv[1], "rb");
    out = fopen(argv[2], "wb");
    if (!in || !out || fread(&n, sizeof n, 1, in) != 1) {
        return 2;
    }
    for (k = 0; k < n; ++k) {
        if (fread(h, sizeof h, 1, in) != 1 || edgernn_head(h, y) != EDGERNN_OK) {
            return 3;
        }
        fwrite(y, sizeof y, 1, out);
    }
    fclose(out);
    return 0;
}
