/* HAL for the STM32F405 bare metal (`qemu_stm32f405`): USART1 polled, TIM2 as the counter, and
 * semihosting to stop the machine with an exit code.
 *
 * The counter: QEMU 7.2's STM32F2xx/F4xx timer counts virtual nanoseconds (its clock-frequency property is
 * 1 GHz on netduinoplus2), and under `-icount shift=0` one guest instruction is one virtual nanosecond. With
 * the prescaler at 0, TIM2's 32-bit CNT is thus the instructions QEMU has run: "instructions (QEMU)", not
 * cycles. On a real STM32F405 it counts timer ticks instead. The Cortex-M4's DWT cycle counter reads 0 in
 * QEMU. */
#include "hal.h"

#define REG(addr) (*(volatile uint32_t *)(addr))

#define RCC_APB1ENR REG(0x40023840u)
#define RCC_APB2ENR REG(0x40023844u)

#define USART1_SR REG(0x40011000u)
#define USART1_DR REG(0x40011004u)
#define USART1_BRR REG(0x40011008u)
#define USART1_CR1 REG(0x4001100Cu)
#define USART_SR_RXNE (1u << 5)
#define USART_SR_TXE (1u << 7)
#define USART_CR1_UE (1u << 13)
#define USART_CR1_TE (1u << 3)
#define USART_CR1_RE (1u << 2)

#define TIM2_CR1 REG(0x40000000u)
#define TIM2_EGR REG(0x40000014u)
#define TIM2_CNT REG(0x40000024u)
#define TIM2_PSC REG(0x40000028u)
#define TIM2_ARR REG(0x4000002Cu)

/* 168 MHz APB2 at 84 MHz: 115200 baud is 84e6 / 115200 = 729.2 -> mantissa 45, fraction 9 (16x oversampling).
 * QEMU ignores it; a real chip after the Crazyflie's clock set-up needs it. */
#define USART1_BRR_115200 ((45u << 4) | 9u)

void edgernn_hal_init(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    RCC_APB1ENR |= 1u << 0; /* TIM2 */
    RCC_APB2ENR |= 1u << 4; /* USART1 */
    USART1_BRR = USART1_BRR_115200;
    USART1_CR1 = USART_CR1_UE | USART_CR1_TE | USART_CR1_RE;
    TIM2_PSC = 0u;
    TIM2_ARR = 0xFFFFFFFFu;
    TIM2_EGR = 1u; /* load the prescaler */
    TIM2_CR1 = 1u; /* count */
}

int edgernn_hal_uart_read(uint8_t *buf, int max)
{
    int n = 0;
    while ((USART1_SR & USART_SR_RXNE) == 0u) {
    }
    while (n < max && (USART1_SR & USART_SR_RXNE) != 0u) {
        buf[n++] = (uint8_t)USART1_DR;
    }
    return n;
}

void edgernn_hal_uart_write(const uint8_t *buf, int len)
{
    for (int i = 0; i < len; ++i) {
        while ((USART1_SR & USART_SR_TXE) == 0u) {
        }
        USART1_DR = buf[i];
    }
}

uint64_t edgernn_hal_cycles(void)
{
    /* CNT wraps every 2^32 instructions; the server reads the counter at least once a step, far more often. */
    static uint32_t last;
    static uint32_t wraps;
    uint32_t now = TIM2_CNT;
    if (now < last) {
        ++wraps;
    }
    last = now;
    return ((uint64_t)wraps << 32) | now;
}

/* Semihosting SYS_EXIT: QEMU ends with status 0 for ADP_Stopped_ApplicationExit, 1 for any other reason. */
void edgernn_hal_exit(int code)
{
    register uint32_t op __asm__("r0") = 0x18u;
    register uint32_t reason __asm__("r1") = code == 0 ? 0x20026u : 0x20023u;
    __asm__ volatile("bkpt 0xAB" : : "r"(op), "r"(reason) : "memory");
    for (;;) {
    }
}
