/* HAL for `ai_deck` (GAP8, PMSIS on FreeRTOS): the GAP8 UART at 115200 for the validation link, the
 * fabric controller's cycle counter, and pmsis_exit. Runs on the fabric controller. */
#include "pmsis.h"

#include "hal.h"

#ifndef EDGERNN_UART_BAUD
#define EDGERNN_UART_BAUD 115200
#endif

static struct pi_device uart;
static struct pi_uart_conf uart_conf;
static uint32_t cycles_last;  /* widening the 32-bit counter to 64 bits */
static uint64_t cycles_high;

void hal_init(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    pi_uart_conf_init(&uart_conf);
    uart_conf.baudrate_bps = EDGERNN_UART_BAUD;
    /* Under FreeRTOS pi_uart_conf_init leaves both directions off: turn them on explicitly. */
    uart_conf.enable_tx = 1;
    uart_conf.enable_rx = 1;
    pi_open_from_conf(&uart, &uart_conf);
    if (pi_uart_open(&uart) != 0) {
        pmsis_exit(-1);
    }
    pi_perf_conf(1 << PI_PERF_CYCLES);
    pi_perf_reset();
    pi_perf_start();
}

int hal_uart_read(uint8_t *buf, int max)
{
    /* One byte per transfer: pi_uart_read blocks until it has all it asked for, and a frame's length
     * is only known at its delimiter. The host waits for each answer before it sends again. */
    if (max < 1) {
        return 0;
    }
    if (pi_uart_read(&uart, buf, 1) != 0) {
        return -1;
    }
    return 1;
}

void hal_uart_write(const uint8_t *buf, int len)
{
    if (len > 0) {
        /* pi_uart_write takes a non-const pointer; it only reads the buffer */
        (void)pi_uart_write(&uart, (void *)(uintptr_t)buf, (uint32_t)len);
    }
}

uint64_t hal_cycles(void)
{
    const uint32_t now = (uint32_t)pi_perf_read(PI_PERF_CYCLES);
    if (now < cycles_last) {
        cycles_high += (uint64_t)1 << 32;
    }
    cycles_last = now;
    return cycles_high | now;
}

void hal_exit(int code)
{
    pmsis_exit(code);
}
