/* The GAP8 compiler's __builtin_pulp_* that the GAP SDK's FreeRTOS/PMSIS sources use, for a compiler
 * without them (Debian's riscv64-unknown-elf-gcc, through bin/riscv32-unknown-elf-gcc, which
 * force-includes this file). Without these gcc only warns about an implicit declaration and the link
 * fails on an undefined __builtin_pulp_* symbol.
 *
 * CSR access is plain RISC-V (csrr/csrw/csrrs/csrrc); the event unit's load-and-sleep p.elw is emitted
 * by its encoding (LOAD opcode 0x03, funct3 6), which is what the GAP toolchain assembles it to; the
 * bit-manipulation and min/max builtins are C with the PULP instructions' semantics. edgernn's own
 * kernels do not rely on this file: their Xpulp dot product is in edgernn_dot.h. */
#ifndef EDGERNN_GAP8_BUILTINS_H
#define EDGERNN_GAP8_BUILTINS_H

#if !defined(__ASSEMBLER__)

/* CSR number `reg` must be a constant, as for the GAP compiler. */
#define __builtin_pulp_spr_read(reg) \
    __extension__({ unsigned int __v; __asm__ __volatile__("csrr %0, %1" : "=r"(__v) : "i"(reg)); __v; })
#define __builtin_pulp_spr_read_vol(reg) __builtin_pulp_spr_read(reg)
#define __builtin_pulp_spr_write(reg, val) \
    __asm__ __volatile__("csrw %0, %1" : : "i"(reg), "r"((unsigned int)(val)) : "memory")
/* Set (clear) the bits of val in the CSR; the CSR's old value. */
#define __builtin_pulp_read_then_spr_bit_set(reg, val) \
    __extension__({ unsigned int __v; __asm__ __volatile__("csrrs %0, %1, %2" : "=r"(__v) : "i"(reg), "r"((unsigned int)(val)) : "memory"); __v; })
#define __builtin_pulp_read_then_spr_bit_clr(reg, val) \
    __extension__({ unsigned int __v; __asm__ __volatile__("csrrc %0, %1, %2" : "=r"(__v) : "i"(reg), "r"((unsigned int)(val)) : "memory"); __v; })
#define __builtin_pulp_spr_bit_set(reg, val) ((void)__builtin_pulp_read_then_spr_bit_set(reg, val))
#define __builtin_pulp_spr_bit_clr(reg, val) ((void)__builtin_pulp_read_then_spr_bit_clr(reg, val))

/* p.elw rd, 0(rs1): a load from the event unit that puts the core to sleep until the event comes. */
#define __builtin_pulp_event_unit_read(base, offset) \
    __extension__({ int __v; __asm__ __volatile__(".insn i 0x03, 6, %0, 0(%1)" : "=r"(__v) : "r"((char *)(base) + (offset)) : "memory"); __v; })
#define __builtin_pulp_event_unit_read_fenced(base, offset) __builtin_pulp_event_unit_read(base, offset)

/* GAP8's cluster has 8 cores. */
#define __builtin_pulp_CoreCount() 8

/* A volatile 32-bit load from (or store to) the byte address base + offset: how GAP8's PMU HAL reads its
 * registers (pmu_dlc.h passes base 0 and the register's address as the offset). */
#define __builtin_pulp_OffsetedRead(base, offset) \
    (*(volatile int *)((unsigned long)(base) + (unsigned long)(offset)))
#define __builtin_pulp_OffsetedWrite(value, base, offset) \
    ((void)(*(volatile int *)((unsigned long)(base) + (unsigned long)(offset)) = (int)(value)))

/* p.ff1 / p.fl1: index of the first (last) set bit; 32 for 0. */
static inline __attribute__((always_inline)) int __edgernn_pulp_ff1(unsigned int x)
{
    return x ? __builtin_ctz(x) : 32;
}
static inline __attribute__((always_inline)) int __edgernn_pulp_fl1(unsigned int x)
{
    return x ? 31 - __builtin_clz(x) : 32;
}
#define __builtin_pulp_ff1(x) __edgernn_pulp_ff1((unsigned int)(x))
#define __builtin_pulp_fl1(x) __edgernn_pulp_fl1((unsigned int)(x))

/* p.extract / p.extractu: size bits from bit off, sign- or zero-extended. */
static inline __attribute__((always_inline)) int __edgernn_pulp_bextract(int src, int size, int off)
{
    return (int)((unsigned int)src << (32 - size - off)) >> (32 - size);
}
static inline __attribute__((always_inline)) unsigned int __edgernn_pulp_bextractu(unsigned int src, int size, int off)
{
    return (src << (32 - size - off)) >> (32 - size);
}
#define __builtin_pulp_bextract(src, size, off) __edgernn_pulp_bextract((int)(src), (size), (off))
#define __builtin_pulp_bextractu(src, size, off) __edgernn_pulp_bextractu((unsigned int)(src), (size), (off))

/* p.insert, as the GAP compiler spells it: (dst & not_mask) | ((src << off) & mask). */
#define __builtin_pulp_binsert(dst, not_mask, src, mask, off) \
    ((int)(((unsigned int)(dst) & (unsigned int)(not_mask)) | (((unsigned int)(src) << (off)) & (unsigned int)(mask))))

/* p.max / p.min */
static inline __attribute__((always_inline)) int __edgernn_pulp_maxsi(int a, int b)
{
    return a > b ? a : b;
}
static inline __attribute__((always_inline)) int __edgernn_pulp_minsi(int a, int b)
{
    return a < b ? a : b;
}
#define __builtin_pulp_maxsi(a, b) __edgernn_pulp_maxsi((a), (b))
#define __builtin_pulp_minsi(a, b) __edgernn_pulp_minsi((a), (b))

#endif /* !__ASSEMBLER__ */
#endif /* EDGERNN_GAP8_BUILTINS_H */
