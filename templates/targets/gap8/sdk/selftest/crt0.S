/* Bare-metal start for GAP8's fabric controller under GVSOC: set gp and sp, clear .bss, call main,
 * then hand main's return value to the APB SoC control CORESTATUS register (0x1A1040A0): writing
 * 0x80000000 | code ends the simulation, and gapy / gvsoc_launcher exit with that code. */
  .section .text.start, "ax"
  .globl _start
_start:
  .option push
  .option norelax
  la gp, __global_pointer$
  .option pop
  la sp, __stack_top
  la t0, __bss_start
  la t1, __bss_end
1:
  bgeu t0, t1, 2f
  sw zero, 0(t0)
  addi t0, t0, 4
  j 1b
2:
  call main
  .globl gvsoc_exit
gvsoc_exit:
  li t0, 0x80000000
  or a0, a0, t0
  li t1, 0x1A1040A0
  sw a0, 0(t1)
3:
  wfi
  j 3b
