/* HAL for `ai_deck` (GAP8, PMSIS on FreeRTOS), on the fabric controller: the clocks, the GAP8 UART for
 * the validation link, the step's cycle count, and pmsis_exit.
 *
 * Board and voltage: first, as Bitcraze's AI-deck examples do, pi_bsp_init() sets the board's pads, and the
 * FC's supply is set to EDGERNN_FC_MV (1200 mV) with __pi_pmu_voltage_set before the FC clock is raised: the
 * voltage first, then the frequency that needs it (250 MHz wants the 1.2 V of the DC-DC converter).
 * GVSOC does not model the PMU (tests/targets/gap8/test_ai_deck.py checks the order of these calls).
 *
 * Clocks: the FC is set to EDGERNN_FC_HZ here, before the UART is opened, so the UART's divider is
 * computed once for the final clock (the UART driver recomputes it on a change, but only by waiting
 * with interrupts off for its transfers to end, and our receive transfers never end on their own).
 * The cluster clock is set where the cluster is opened (edgernn_team.c): powering the cluster up
 * resets its FLL to 50 MHz. There is no wait for the FLL to settle: the divider comes from the nominal
 * frequency, and nothing crosses the UART before the host's first request, long after.
 *
 * Receiving: the GAP8 uDMA drops every byte that arrives while no receive transfer is queued, on the
 * chip and in GVSOC alike. So reception is never left without a transfer: EDGERNN_UART_RX_SLOTS
 * one-byte reads are queued at start, one per slot of a ring, and each slot is read again as soon as
 * its byte has been taken. The UART driver starts the next queued read from its interrupt handler the
 * moment one ends, well within the time of one byte. A slot is 4 bytes wide and 4-byte aligned because
 * the uDMA writes whole 32-bit words at the word address (GVSOC's model does so, writing bytes past the
 * end of a short transfer too). edgernn_hal_uart_read sleeps on the oldest slot (its pi_task) and then takes
 * every slot that has completed since, in order.
 *
 * Sending: each chunk is copied into an aligned L2 buffer first (the uDMA reads whole aligned words
 * from L2, and the caller's bytes may be elsewhere), and sent with a blocking pi_uart_write. Before
 * pmsis_exit the UART is drained (edgernn_hal_exit).
 *
 * Over WiFi (`edgernn build --link wifi`, EDGERNN_LINK_WIFI=1) the link is CPX through the deck's ESP32
 * instead (link_cpx.c), and the UART is not opened: what this file says of it holds for the UART link only.
 *
 * An init that failed (init_failed.h): the firmware stays, and sends its lines again whenever the host
 * sends something, for a host that opened the link after the first ones. */
#include "pmsis.h"
#include "pmsis/implem/hal/hal.h" /* hal_uart_tx_status_get: the UART's own TX-busy bit (GAP8 FreeRTOS) */
#include "bsp/bsp.h"                /* pi_bsp_init */

#include "init_failed.h"
/* 1: the link is CPX through the deck's ESP32 (`edgernn build --link wifi`, link_cpx.c); 0: the UART below */
#ifndef EDGERNN_LINK_WIFI
#define EDGERNN_LINK_WIFI 0
#endif
#if EDGERNN_LINK_WIFI
#include "link_cpx.h"
#endif

#include "hal.h"

#ifndef EDGERNN_UART_BAUD
#define EDGERNN_UART_BAUD 115200
#endif
/* FC clock; 0 keeps the boot clock (50 MHz) */
#ifndef EDGERNN_FC_HZ
#define EDGERNN_FC_HZ 0
#endif
/* FC supply voltage in mV, set before the FC clock is raised */
#ifndef EDGERNN_FC_MV
#define EDGERNN_FC_MV 1200
#endif
/* 1 (the default): edgernn_hal_cycles counts the whole step on the FC's timer, dispatch and wake-up
 * included, and edgernn_hal_team_cycles the cluster's own count; 0: both are the cluster's count */
#ifndef EDGERNN_CYCLES_FC
#define EDGERNN_CYCLES_FC 1
#endif
#ifndef EDGERNN_UART_RX_SLOTS
#define EDGERNN_UART_RX_SLOTS 64
#endif
#ifndef EDGERNN_UART_TX_CHUNK
#define EDGERNN_UART_TX_CHUNK 256
#endif

/* The step's cycles, counted on the cluster by edgernn_team.c */
uint64_t edgernn_team_cluster_cycles(void);

#if !EDGERNN_LINK_WIFI
typedef struct {
    pi_task_t task;
    uint32_t word;  /* the uDMA writes the byte into word's first byte */
} rx_slot_t;

static struct pi_device uart;
static struct pi_uart_conf uart_conf;
static rx_slot_t rx_slots[EDGERNN_UART_RX_SLOTS];
static int rx_next;  /* the oldest queued slot: the next byte in arrival order */
static uint32_t tx_words[(EDGERNN_UART_TX_CHUNK + 3) / 4];

static int rx_queue(rx_slot_t *slot)
{
    pi_task_block(&slot->task);
    return pi_uart_read_async(&uart, &slot->word, 1, &slot->task);
}

static void open_link(void)
{
    pi_uart_conf_init(&uart_conf);
    uart_conf.baudrate_bps = EDGERNN_UART_BAUD;
    /* Under FreeRTOS pi_uart_conf_init leaves both directions off: turn them on explicitly. */
    uart_conf.enable_tx = 1;
    uart_conf.enable_rx = 1;
    pi_open_from_conf(&uart, &uart_conf);
    if (pi_uart_open(&uart) != 0) {
        pmsis_exit(-1);
    }
    /* If the runtime had opened UART0 already (`io = uart`: printf, before main, with RX off), the open
     * above only counted another user and applied nothing: set the configuration and both directions
     * on the open device. */
    if (pi_uart_ioctl(&uart, PI_UART_IOCTL_CONF_SETUP, &uart_conf) != 0 ||
        pi_uart_ioctl(&uart, PI_UART_IOCTL_ENABLE_RX, NULL) != 0 ||
        pi_uart_ioctl(&uart, PI_UART_IOCTL_ENABLE_TX, NULL) != 0) {
        pmsis_exit(-1);
    }
    for (int i = 0; i < EDGERNN_UART_RX_SLOTS; ++i) {
        if (rx_queue(&rx_slots[i]) != 0) {
            pmsis_exit(-1);
        }
    }
    rx_next = 0;
}

int edgernn_hal_uart_read(uint8_t *buf, int max)
{
    int n = 0;
    rx_slot_t *slot = &rx_slots[rx_next];

    if (max < 1) {
        return 0;
    }
    pi_task_wait_on(&slot->task);
    do {
        buf[n++] = *(const volatile uint8_t *)&slot->word;
        if (rx_queue(slot) != 0) {
            return -1;
        }
        rx_next = rx_next + 1 == EDGERNN_UART_RX_SLOTS ? 0 : rx_next + 1;
        slot = &rx_slots[rx_next];
    } while (n < max && slot->task.done);
    return n;
}

void edgernn_hal_uart_write(const uint8_t *buf, int len)
{
    while (len > 0) {
        const int n = len < EDGERNN_UART_TX_CHUNK ? len : EDGERNN_UART_TX_CHUNK;
        uint8_t *tx = (uint8_t *)tx_words;
        for (int i = 0; i < n; ++i) {
            tx[i] = buf[i];
        }
        (void)pi_uart_write(&uart, tx, (uint32_t)n);
        buf += n;
        len -= n;
    }
}

/* pi_uart_write returns once the uDMA has fetched the last bytes from L2 (GVSOC ends a TX transfer there),
 * while the UART may still hold some of them and shifts out the last stop bit after that. Wait for the
 * UART's TX-busy bit to clear, then for two more character times, so that pmsis_exit does not cut the end
 * of the final line; each loop turn takes several cycles. */
static void drain_link(void)
{
    const uint32_t turns = pi_freq_get(PI_FREQ_DOMAIN_FC) / EDGERNN_UART_BAUD * 20u;
    while (hal_uart_tx_status_get(uart_conf.uart_id)) {
    }
    for (volatile uint32_t i = 0; i < turns; ++i) {
    }
}
#else
/* CPX (link_cpx.c): a write returns once its last transfer has ended, so there is nothing left to drain. */
static void open_link(void)
{
    if (edgernn_cpx_open() != 0) {
        pmsis_exit(-1);
    }
}

static void drain_link(void)
{
}
#endif

void edgernn_hal_init(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    pi_bsp_init();
    if (EDGERNN_FC_HZ != 0) {
        __pi_pmu_voltage_set(PI_PMU_DOMAIN_FC, EDGERNN_FC_MV);
        pi_freq_set(PI_FREQ_DOMAIN_FC, EDGERNN_FC_HZ);
    }
    open_link();
    /* Every receive transfer is queued (the UART), or the ESP32 keeps what comes until the GAP8 takes it
     * (CPX): from now on no byte is lost. Say so with one idle delimiter (0x00, which the frame parser
     * takes for an idle line), for a host that waits for it before its first request (boards/ai_deck.toml:
     * hal.ready_byte; edgernn validate on gvsoc_gap8). */
    {
        static const uint8_t ready = 0;
        edgernn_hal_uart_write(&ready, 1);
    }
}

#if EDGERNN_CYCLES_FC
/* The default (`make EDGERNN_CYCLES_FC=1`): the step as the FC sees it, dispatch to the cluster and
 * wake-up included: what an application that calls edgernn_step waits. The FC's core counters stop
 * while it sleeps, so this reads the one clock that runs through any sleep: FreeRTOS's tick (FC timer
 * 0, counting FC clock cycles and reset at each tick, configTICK_RATE_HZ times a second) extended by
 * the tick count, as pi_time_get_us does, but kept in FC cycles instead of truncated to microseconds.
 * The sum is returned in cluster cycles, the unit of the cluster's counter, so the server's
 * stop - start compares with it directly; converting the running total (not each step) keeps the
 * rounding from adding up. */
static uint64_t fc_clock_cycles(void)
{
    uint32_t tick, value;
    /* The timer restarts from 0 at each tick and the tick count follows in the tick's interrupt: read
     * the count on both sides of the timer, so a tick that ends between the two reads is seen and the
     * pair taken again (interrupts stay on, so the tick's handler runs in between). */
    do {
        tick = (uint32_t)xTaskGetTickCount();
        value = pi_timer_value_read(SYS_TIMER);
    } while ((uint32_t)xTaskGetTickCount() != tick);
    return (uint64_t)tick * (system_core_clock_get() / configTICK_RATE_HZ) + value;
}

/* cluster_hz / fc_hz as a 0.32 fixed-point fraction (the cluster is never faster than the FC: 175 and
 * 250 MHz), computed again only when a clock has changed: the conversion of each reading is then two
 * 32 x 32 -> 64-bit products, not the three 64-bit divisions (library calls of hundreds of cycles on a
 * 32-bit core) it took before, which fell inside the counted step. 0 when the clocks do not allow it. */
static uint32_t fc_to_cluster_ratio(void)
{
    static uint32_t ratio, ratio_fc_hz, ratio_cl_hz;
    const uint32_t fc_hz = pi_freq_get(PI_FREQ_DOMAIN_FC);
    const uint32_t cl_hz = pi_freq_get(PI_FREQ_DOMAIN_CL);
    if (fc_hz != ratio_fc_hz || cl_hz != ratio_cl_hz) {
        ratio = (fc_hz != 0u && cl_hz < fc_hz) ? (uint32_t)(((uint64_t)cl_hz << 32) / fc_hz) : 0u;
        ratio_fc_hz = fc_hz;
        ratio_cl_hz = cl_hz;
    }
    return ratio;
}

uint64_t edgernn_hal_cycles(void)
{
    const uint64_t fc = fc_clock_cycles();
    const uint32_t ratio = fc_to_cluster_ratio();
    if (ratio == 0u) {
        return fc; /* equal clocks (or unknown ones): FC cycles are cluster cycles */
    }
    /* floor(fc * ratio / 2^32), fc split into 32-bit halves: exact for the fraction, which is
     * cluster_hz / fc_hz within 2^-32 (a drift under one cycle per 2^32 counted) */
    return (uint64_t)(uint32_t)(fc >> 32) * ratio + (((uint64_t)(uint32_t)fc * ratio) >> 32);
}
#else
/* `make EDGERNN_CYCLES_FC=0`: the cluster master's count of the step's work, without the FC's
 * dispatch (edgernn_team.c) */
uint64_t edgernn_hal_cycles(void)
{
    return edgernn_team_cluster_cycles();
}
#endif

#if EDGERNN_HAL_TEAM_CYCLES
/* The cluster's own count of the step (report.json's cluster_cycles_per_step) */
uint64_t edgernn_hal_team_cycles(void)
{
    return edgernn_team_cluster_cycles();
}
#endif

void edgernn_hal_exit(int code)
{
    drain_link();
    pmsis_exit(code);
}

static const char *init_why; /* the reason edgernn_hal_say_init_failed gave, or none */

void edgernn_hal_write_text(const char *text)
{
    int n = 0;
    while (text[n] != '\0') {
        ++n;
    }
    edgernn_hal_uart_write((const uint8_t *)text, n);
}

static void say_why(void)
{
    if (init_why != (const char *)0) {
        edgernn_hal_write_text("\n~~~EDGERNN INIT FAILED: ");
        edgernn_hal_write_text(init_why);
        edgernn_hal_write_text("~~~\n");
    }
}

void edgernn_hal_say_init_failed(const char *why)
{
    init_why = why;
    say_why();
}

void edgernn_hal_stop_init_failed(void)
{
    static const char plain[] = "\n~~~EDGERNN INIT FAILED~~~\n";
    uint8_t bytes[16];

    edgernn_hal_write_text(plain);
    while (edgernn_hal_uart_read(bytes, (int)sizeof bytes) > 0) {
        say_why();      /* whatever the host sent, it reads why */
        edgernn_hal_write_text(plain);
    }
    edgernn_hal_exit(2); /* the link is gone for good */
}
