/* HAL for `qemu_riscv32`: QEMU virt's 16550 UART at 0x10000000 (polled), the test device at 0x100000
 * to stop the machine, and minstret as the cycle counter (exact retired instructions under
 * -icount shift=0). */
#include "hal.h"

#define UART_BASE 0x10000000u
#define UART_RBR 0u /* receive buffer (read) */
#define UART_THR 0u /* transmit holding (write) */
#define UART_LSR 5u
#define UART_LSR_DR 0x01u   /* data ready */
#define UART_LSR_THRE 0x20u /* transmit holding register empty */
#define TEST_DEVICE 0x100000u
#define TEST_PASS 0x5555u
#define TEST_FAIL 0x3333u

static inline volatile uint8_t *uart_reg(unsigned offset)
{
    return (volatile uint8_t *)(UART_BASE + offset);
}

void edgernn_hal_init(int argc, char **argv)
{
    (void)argc;
    (void)argv;
}

int edgernn_hal_uart_read(uint8_t *buf, int max)
{
    int n = 0;
    while ((*uart_reg(UART_LSR) & UART_LSR_DR) == 0u) {
    }
    while (n < max && (*uart_reg(UART_LSR) & UART_LSR_DR) != 0u) {
        buf[n++] = *uart_reg(UART_RBR);
    }
    return n;
}

void edgernn_hal_uart_write(const uint8_t *buf, int len)
{
    for (int i = 0; i < len; ++i) {
        while ((*uart_reg(UART_LSR) & UART_LSR_THRE) == 0u) {
        }
        *uart_reg(UART_THR) = buf[i];
    }
}

uint64_t edgernn_hal_cycles(void)
{
    uint32_t lo;
    uint32_t hi;
    uint32_t hi2;
    /* GCC 12 wants zicsr spelled out for csrr, and -march=rv32imc_zicsr loses picolibc's multilib. */
    do {
        __asm__ volatile(".option push\n.option arch, +zicsr\ncsrr %0, minstreth\n.option pop" : "=r"(hi));
        __asm__ volatile(".option push\n.option arch, +zicsr\ncsrr %0, minstret\n.option pop" : "=r"(lo));
        __asm__ volatile(".option push\n.option arch, +zicsr\ncsrr %0, minstreth\n.option pop" : "=r"(hi2));
    } while (hi != hi2);
    return ((uint64_t)hi << 32) | lo;
}

void edgernn_hal_exit(int code)
{
    *(volatile uint32_t *)TEST_DEVICE = code == 0 ? TEST_PASS : (((uint32_t)code << 16) | TEST_FAIL);
    for (;;) {
    }
}
