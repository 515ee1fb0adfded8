/* HAL of the Crazyflie app (edgernn, board crazyflie) for its validation server (EDGERNN_APP_SERVE=1 in
 * edgernn_app_config.h): the deck connector's UART1 through the firmware's uart1 driver, and the
 * Cortex-M4's DWT cycle counter, which counts core cycles at 168 MHz on the real chip. Compiled by the
 * firmware's Kbuild with the firmware's flags. */
#include "hal.h"

#include "FreeRTOS.h"
#include "task.h"
#include "uart1.h"

#include "edgernn_app_config.h"

#define DEMCR (*(volatile uint32_t *)0xE000EDFCu)
#define DWT_CTRL (*(volatile uint32_t *)0xE0001000u)
#define DWT_CYCCNT (*(volatile uint32_t *)0xE0001004u)

void edgernn_hal_init(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    uart1Init(EDGERNN_APP_SERVE_BAUD);
    DEMCR |= 1u << 24; /* TRCENA: the DWT on */
    DWT_CYCCNT = 0u;
    DWT_CTRL |= 1u; /* CYCCNTENA */
}

int edgernn_hal_uart_read(uint8_t *buf, int max)
{
    int n = 0;
    while (!uart1GetDataWithTimeout(&buf[0], M2T(1000))) {
    }
    n = 1;
    while (n < max && uart1GetDataWithTimeout(&buf[n], 0)) {
        ++n;
    }
    return n;
}

void edgernn_hal_uart_write(const uint8_t *buf, int len)
{
    uart1SendData((uint32_t)len, (uint8_t *)buf);
}

uint64_t edgernn_hal_cycles(void)
{
    static uint32_t last;
    static uint32_t wraps;
    const uint32_t now = DWT_CYCCNT;
    if (now < last) {
        ++wraps; /* every 25.6 s at 168 MHz */
    }
    last = now;
    return ((uint64_t)wraps << 32) | now;
}

/* The server ended (BYE): the app task waits, and appMain serves the next session. */
void edgernn_hal_exit(int code)
{
    (void)code;
}
