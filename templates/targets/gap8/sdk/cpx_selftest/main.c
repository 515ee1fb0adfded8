/* The CPX self-test of a GVSOC build (edgernn/targets/gap8/cpx_check.py): the GAP8 side of the WiFi link,
 * link_cpx.c as the firmware has it, echoing what the host sends through the deck's ESP32 model.
 *
 * The host sends 'E', a u32 count n (little-endian), then n bytes whole; each piece is echoed the moment it
 * has arrived, so that bytes cross the ESP32 both ways at once and a burst spans many packets, each split at
 * the MTU. 'Q' ends the test with a fixed line. */
#include "pmsis.h"
#include "bsp/bsp.h"

#include "hal.h"
#include "link_cpx.h"

#define READY "CPX-ECHO READY\n"
#define DONE "~~~CPX ECHO DONE~~~\n"

static uint8_t piece[4096];

static void say(const char *text)
{
    int n = 0;
    while (text[n] != '\0') {
        ++n;
    }
    edgernn_hal_uart_write((const uint8_t *)text, n);
}

static void read_exactly(uint8_t *buf, int n)
{
    while (n > 0) {
        const int got = edgernn_hal_uart_read(buf, n);
        buf += got;
        n -= got;
    }
}

static void echo_main(void)
{
    pi_bsp_init();
    if (edgernn_cpx_open() != 0) {
        pmsis_exit(2);
    }
    say(READY);
    for (;;) {
        uint8_t command[5];
        uint32_t n;

        read_exactly(command, 1);
        if (command[0] == 'Q') {
            say(DONE);
            pmsis_exit(0);
        }
        if (command[0] != 'E') {
            say("CPX-ECHO BAD COMMAND\n");
            pmsis_exit(3);
        }
        read_exactly(command + 1, 4);
        n = (uint32_t)command[1] | ((uint32_t)command[2] << 8) | ((uint32_t)command[3] << 16) |
            ((uint32_t)command[4] << 24);
        while (n > 0u) {
            const int got = edgernn_hal_uart_read(piece, n < sizeof piece ? (int)n : (int)sizeof piece);
            edgernn_hal_uart_write(piece, got);
            n -= (uint32_t)got;
        }
    }
}

int main(void)
{
    return pmsis_kickoff((void *)echo_main);
}
