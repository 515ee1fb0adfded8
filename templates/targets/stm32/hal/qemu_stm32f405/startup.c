/* Start-up of the STM32F405 (Cortex-M4F) for `qemu_stm32f405` and the bare-metal builds of its family:
 * the vector table at the start of flash, the copy of .data from flash to SRAM, .bss cleared, the FPU switched
 * on, then main. The C library is newlib's nano (as in the Crazyflie firmware), which needs no set-up here.
 * The memory map is stm32f405.ld's, rendered from the board file's [[memory]] tables. */
#include <stdint.h>
#include <string.h>

extern int main(int argc, char **argv);
extern char __data_start[], __data_source[], __data_size[];
extern char __bss_start[], __bss_size[];
extern char __stack[];

void edgernn_reset_handler(void);
void edgernn_fault_handler(void);
void edgernn_hal_exit(int code);

#define SCB_CPACR (*(volatile uint32_t *)0xE000ED88u)

void edgernn_reset_handler(void)
{
    memcpy(__data_start, __data_source, (size_t)__data_size);
    memset(__bss_start, 0, (size_t)__bss_size);
    /* CP10 and CP11 full access: without it the first floating-point instruction faults (UsageFault). */
    SCB_CPACR |= 0xFu << 20;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    edgernn_hal_exit(main(0, 0));
}

/* Every fault ends the run with code 3 (a device fault), so the host sees the board go, not a hang. */
void edgernn_fault_handler(void)
{
    edgernn_hal_exit(3);
}

typedef void (*vector_t)(void);

/* The initial stack pointer, then the handlers: reset, NMI, HardFault, MemManage, BusFault, UsageFault. */
__attribute__((section(".vectors"), used)) static const vector_t vectors[16] = {
    (vector_t)(uintptr_t)__stack, edgernn_reset_handler, edgernn_fault_handler, edgernn_fault_handler,
    edgernn_fault_handler, edgernn_fault_handler, edgernn_fault_handler,
};
