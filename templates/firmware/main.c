/* Firmware entry: the validation server around the generated model. Ends on a fixed line. */
#include "hal.h"
#include "model.h"
#include "server.h"

static void write_line(const char *line)
{
    int n = 0;
    while (line[n] != '\0') {
        ++n;
    }
    edgernn_hal_uart_write((const uint8_t *)line, n);
}

int main(int argc, char **argv)
{
    int code;

    edgernn_hal_init(argc, argv);
    if (edgernn_init() != EDGERNN_OK) {
        write_line("\n~~~EDGERNN INIT FAILED~~~\n");
        edgernn_hal_exit(2);
        return 2;
    }
    code = edgernn_serve();
    write_line(code == 0 ? "\n~~~EDGERNN SERVER DONE~~~\n" : "\n~~~EDGERNN LINK LOST~~~\n");
    edgernn_hal_exit(code);
    return code;
}
