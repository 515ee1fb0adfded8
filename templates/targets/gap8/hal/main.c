/* Firmware entry on the AI-deck: PMSIS starts FreeRTOS and runs edgernn_main as its main task on the
 * fabric controller. The validation server is the one of every board; each step runs on the cluster
 * (edgernn_team.c). Ends on a fixed line, as on the emulated boards. */
#include "pmsis.h"

#include "hal.h"
#include "init_failed.h"
#include "model.h"
#include "server.h"

static void edgernn_main(void)
{
    int code;

    edgernn_hal_init(0, (char **)0);
    if (edgernn_init() != EDGERNN_OK) {
        edgernn_hal_stop_init_failed();     /* says why to the host, however late it comes (init_failed.h) */
        return;
    }
    code = edgernn_serve();
    edgernn_hal_write_text(code == 0 ? "\n~~~EDGERNN SERVER DONE~~~\n" : "\n~~~EDGERNN LINK LOST~~~\n");
    edgernn_hal_exit(code);
}

int main(void)
{
    return pmsis_kickoff((void *)edgernn_main);
}
