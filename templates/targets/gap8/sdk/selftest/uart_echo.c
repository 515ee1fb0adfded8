/* Bare-metal GAP8 UART echo for GVSOC (no SDK, no libc): edgernn's self-test of every GVSOC it builds
 * (edgernn/targets/gap8/gvsoc_check.py), and of tests/targets/gap8/test_gvsoc.py. It proves the simulated UART on a TCP port
 * carries bursts both ways, byte-exact, and reads the PULP performance counters.
 *
 * Build (Debian's compiler; edgernn does it): riscv64-unknown-elf-gcc -march=rv32imc_zicsr -mabi=ilp32 -O2 -nostdlib
 *   -ffreestanding -T gap8_l2.ld crt0.S uart_echo.c -o echo.elf  (in templates/targets/gap8/sdk/selftest/)
 *
 * Protocol (host -> firmware, after the firmware has sent "GVSOC-ECHO READY ...\n"):
 *   'E' n:u16le data[n]  echo each byte as soon as it arrives, then "ECHO n=.. sum=.. cycles=.. instret=..\n"
 *   'L' n:u32le          run a busy loop of n iterations, then "LOOP n=.. cycles=.. instret=..\n"
 *   'W' n:u32le          poll the idle UART for n cycles, then "WAIT cycles=..\n"
 *   'Q' code:u8          send "~~~GVSOC ECHO DONE~~~\n", drain the UART, end with exit code `code`
 *
 * Two facts of the uDMA shape the receive path (GVSOC's udma_v2 and the hardware alike):
 *   - it drops every byte that arrives while no receive transfer is queued, so two one-byte
 *     transfers are always queued and a finished one is re-queued at once;
 *   - GVSOC's SADDR/SIZE registers read back what was written, not the progress of a transfer, so
 *     a transfer is known to be finished only from the channel's CFG register (EN: one or more
 *     queued, SHADOW: two queued). One-byte transfers make each byte visible as it lands.
 * And one of GVSOC's uDMA model: it clears the two low address bits of every L2 access, so a
 * transfer must start on a word boundary (an unaligned TX buffer repeats the bytes before it). TX
 * therefore goes through an aligned staging buffer.
 */
#include <stdint.h>

#define REG(addr) (*(volatile uint32_t *)(addr))

#define FLL_SOC_STATUS 0x1A100000u     /* measured multiplication factor */
#define FLL_SOC_CONF1 0x1A100004u      /* target factor [15:0], output divider [29:26] */
#define UDMA_CG 0x1A102780u            /* uDMA peripheral clock gates */
#define UDMA_UART_ID 4u
#define UART_BASE 0x1A102200u          /* uDMA peripheral 4 */
#define UART_RX_SADDR (UART_BASE + 0x00u)
#define UART_RX_SIZE (UART_BASE + 0x04u)
#define UART_RX_CFG (UART_BASE + 0x08u)
#define UART_TX_SADDR (UART_BASE + 0x10u)
#define UART_TX_SIZE (UART_BASE + 0x14u)
#define UART_TX_CFG (UART_BASE + 0x18u)
#define UART_STATUS (UART_BASE + 0x20u)
#define UART_SETUP (UART_BASE + 0x24u)
#define UART_STATUS_TX_BUSY (1u << 0)
#define CFG_EN (1u << 4)
#define CFG_SHADOW (1u << 5)

#ifndef BAUD
#define BAUD 115200u             /* the board's baud: -DBAUD=... (edgernn/targets/gap8/gvsoc_check.py) */
#endif
#define TX_RING 4096u                  /* power of two */
#define TX_STAGE 256u

static volatile uint32_t rx_slot[2];   /* one word each: GVSOC writes whole words to L2 */
static unsigned rx_head;
static uint8_t tx_ring[TX_RING];
static uint32_t tx_stage[TX_STAGE / 4];  /* word-aligned, see above */
static unsigned tx_head, tx_tail;
static uint32_t uart_div;

static inline uint32_t perf_cycles(void)
{
    uint32_t v;
    __asm__ volatile("csrr %0, 0x780" : "=r"(v));
    return v;
}

static inline uint32_t perf_instret(void)
{
    uint32_t v;
    __asm__ volatile("csrr %0, 0x781" : "=r"(v));
    return v;
}

/* GAP8 has no mcycle/minstret in GVSOC: the PULP counters are enabled (PCER: cycles|instructions),
 * reset (PCCR31) and started (PCMR) here. */
static void perf_start(void)
{
    __asm__ volatile("csrw 0xCC0, %0" ::"r"(3));
    __asm__ volatile("csrw 0x79F, zero");
    __asm__ volatile("csrw 0xCC1, %0" ::"r"(1));
}

static void wait_cycles(uint32_t n)
{
    uint32_t start = perf_cycles();
    while (perf_cycles() - start < n) {
    }
}

/* The SoC FLL is still converging when the ROM jumps here (about 58 MHz, settling near 50 MHz within
 * about 2 ms of simulated time); a divider set before that would be several percent off. Wait until
 * the measured factor has stayed within 2% of the target for four samples, then use the target. */
static uint32_t soc_frequency_settled(void)
{
    uint32_t conf1 = REG(FLL_SOC_CONF1);
    uint32_t target = conf1 & 0xFFFFu;
    uint32_t div = (conf1 >> 26) & 0xFu;
    unsigned stable = 0;
    while (stable < 4) {
        wait_cycles(10000);
        uint32_t mult = REG(FLL_SOC_STATUS) & 0xFFFFu;
        uint32_t delta = mult > target ? mult - target : target - mult;
        stable = delta * 50u <= target ? stable + 1 : 0;
    }
    return target << (16u - div);
}

static void rx_queue(unsigned slot)
{
    REG(UART_RX_SADDR) = (uint32_t)(uintptr_t)&rx_slot[slot];
    REG(UART_RX_SIZE) = 1;
    REG(UART_RX_CFG) = CFG_EN;
}

static void uart_init(uint32_t freq)
{
    REG(UDMA_CG) |= 1u << UDMA_UART_ID;
    uart_div = freq / BAUD;            /* as PMSIS computes it */
    /* 8 data bits, no parity, 1 stop bit, TX and RX on */
    REG(UART_SETUP) = (3u << 1) | (1u << 8) | (1u << 9) | (uart_div << 16);
    rx_queue(0);
    rx_queue(1);
    rx_head = 0;
}

/* -1 when no byte has landed; otherwise the oldest byte, its slot queued again at once. */
static int uart_poll(void)
{
    uint32_t cfg = REG(UART_RX_CFG);
    unsigned queued = (cfg & CFG_EN) ? ((cfg & CFG_SHADOW) ? 2u : 1u) : 0u;
    if (queued >= 2)
        return -1;
    /* The channel reports the end one uDMA cycle before its word reaches L2: one more APB read
     * is longer than that. */
    (void)REG(UART_STATUS);
    int byte = (int)(rx_slot[rx_head] & 0xFFu);
    rx_queue(rx_head);
    rx_head ^= 1u;
    return byte;
}

/* Start the next TX transfer once the previous one is done: one at a time, copied from the ring to
 * the aligned staging buffer. GVSOC's channel reports a transfer done once it has read all of it
 * from L2 (its words may still be queued in the UART), so the staging buffer is free again then. */
static void tx_pump(void)
{
    if (REG(UART_TX_CFG) & CFG_EN)
        return;
    unsigned pending = (tx_head - tx_tail) & (TX_RING - 1);
    if (pending == 0)
        return;
    unsigned n = pending < TX_STAGE ? pending : TX_STAGE;
    uint8_t *stage = (uint8_t *)tx_stage;
    for (unsigned i = 0; i < n; i++)
        stage[i] = tx_ring[(tx_tail + i) & (TX_RING - 1)];
    tx_tail = (tx_tail + n) & (TX_RING - 1);
    REG(UART_TX_SADDR) = (uint32_t)(uintptr_t)tx_stage;
    REG(UART_TX_SIZE) = n;
    REG(UART_TX_CFG) = CFG_EN;
}

static void tx_byte(uint8_t b)
{
    while (((tx_head + 1) & (TX_RING - 1)) == tx_tail)
        tx_pump();
    tx_ring[tx_head] = b;
    tx_head = (tx_head + 1) & (TX_RING - 1);
}

static void tx_str(const char *s)
{
    while (*s)
        tx_byte((uint8_t)*s++);
    tx_pump();
}

static void tx_dec(uint32_t v)
{
    char buf[11];
    int i = 10;
    buf[i] = 0;
    do {
        buf[--i] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v);
    tx_str(&buf[i]);
}

static void tx_hex(uint32_t v)
{
    char buf[9];
    for (int i = 0; i < 8; i++) {
        uint32_t d = (v >> (28 - 4 * i)) & 0xFu;
        buf[i] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
    }
    buf[8] = 0;
    tx_str(buf);
}

/* A finished transfer (CFG.EN clear) may still have words queued in the UART: STATUS.TX_BUSY covers
 * them up to the last data bit. The stop bit, and the host's sampling of that last byte, come later:
 * exiting before them loses the last byte. */
static void tx_drain(void)
{
    while (tx_head != tx_tail || (REG(UART_TX_CFG) & CFG_EN) || (REG(UART_STATUS) & UART_STATUS_TX_BUSY))
        tx_pump();
    wait_cycles(uart_div * 20u);       /* two character times */
}

static uint8_t rx_wait(void)
{
    int b;
    while ((b = uart_poll()) < 0)
        tx_pump();
    return (uint8_t)b;
}

static uint32_t rx_u32(unsigned nbytes)
{
    uint32_t v = 0;
    for (unsigned i = 0; i < nbytes; i++)
        v |= (uint32_t)rx_wait() << (8 * i);
    return v;
}

static void echo(uint32_t n)
{
    uint32_t c0 = perf_cycles(), i0 = perf_instret(), sum = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint8_t b = rx_wait();
        sum += b;
        tx_byte(b);
        tx_pump();
    }
    uint32_t c1 = perf_cycles(), i1 = perf_instret();
    tx_str("ECHO n=");
    tx_dec(n);
    tx_str(" sum=");
    tx_hex(sum);
    tx_str(" cycles=");
    tx_dec(c1 - c0);
    tx_str(" instret=");
    tx_dec(i1 - i0);
    tx_str("\n");
}

static void busy_loop(uint32_t n)
{
    uint32_t c0 = perf_cycles(), i0 = perf_instret();
    for (uint32_t i = 0; i < n; i++)
        __asm__ volatile("");
    uint32_t c1 = perf_cycles(), i1 = perf_instret();
    tx_str("LOOP n=");
    tx_dec(n);
    tx_str(" cycles=");
    tx_dec(c1 - c0);
    tx_str(" instret=");
    tx_dec(i1 - i0);
    tx_str("\n");
}

static void idle_wait(uint32_t n)
{
    uint32_t c0 = perf_cycles();
    while (perf_cycles() - c0 < n)
        tx_pump();
    tx_str("WAIT cycles=");
    tx_dec(perf_cycles() - c0);
    tx_str("\n");
}

int main(void)
{
    perf_start();
    uint32_t freq = soc_frequency_settled();
    uart_init(freq);
    tx_str("GVSOC-ECHO READY freq=");
    tx_dec(freq);
    tx_str(" div=");
    tx_dec(uart_div);
    tx_str(" boot_cycles=");
    tx_dec(perf_cycles());
    tx_str("\n");
    for (;;) {
        uint8_t cmd = rx_wait();
        if (cmd == 'E') {
            echo(rx_u32(2));
        } else if (cmd == 'L') {
            busy_loop(rx_u32(4));
        } else if (cmd == 'W') {
            idle_wait(rx_u32(4));
        } else if (cmd == 'Q') {
            uint8_t code = rx_wait();
            tx_str("~~~GVSOC ECHO DONE~~~\n");
            tx_drain();
            return code;
        } else {
            tx_str("ERR unknown command ");
            tx_hex(cmd);
            tx_str("\n");
        }
    }
}
