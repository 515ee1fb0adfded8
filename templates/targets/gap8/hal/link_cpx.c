/* The AI-deck's WiFi link (`edgernn build --link wifi`, EDGERNN_LINK_WIFI=1): the validation protocol's bytes in
 * CPX packets between the GAP8 and the WiFi host, through the deck's ESP32 (docs/boards/ai_deck.md, "Over WiFi").
 *
 * CPX, as Bitcraze's aideck-gap8-examples (lib/cpx) and aideck-esp-firmware carry it:
 *   - a packet is a 2-byte header, then at most EDGERNN_CPX_MTU - 2 bytes of data. Header byte 0: destination in
 *     bits 0-2, source in bits 3-5, last-packet flag in bit 6; byte 1: function in bits 0-5, version (0) in 6-7;
 *   - edgernn's packets go GAP8 (4) <-> WIFI_HOST (3) with function EDGERNN_CPX_FUNCTION (0x20, outside the
 *     functions Bitcraze assigns, 0x01-0x0F: CONSOLE and APP traffic passes beside it). A write of the server
 *     (one encoded frame) is split at the MTU, the last-packet flag on its last part only; the host joins the
 *     data of its packets into the byte stream the frame parser reads, so packet boundaries carry no meaning;
 *   - packets of any other function (the ESP32's WIFI_CTRL news, a Crazyflie's APP packets) are dropped here.
 *
 * The GAP8 <-> ESP32 wire (the ESP32's spi_transport): the GAP8 is SPI master on SPI1, CS0, 10 MHz, mode 0. The
 * ESP32 raises its line (GAP8 GPIO18) when it has set a transfer up: because it has a packet for the GAP8, or
 * because the GAP8 raised its own line (GPIO3) to say it has one. Each transfer is full duplex: both sides shift
 * [u16 length, little-endian][header][data], the length counting header and data (0: nothing to send). The first
 * 4 bytes carry both lengths; the transfer then goes on for the longer of the two, rounded up to 4 bytes, with
 * chip select held low between the two parts.
 *
 * Waiting: the ESP32's rising edge gives a semaphore from the GPIO interrupt, so the FC sleeps while it waits.
 * Each edge is one transfer set up by the ESP32, and each exchange here takes one; a transfer that brings
 * nothing costs one exchange and is otherwise harmless (the ESP32's own firmware does the same). */
#include "link_cpx.h"

#if EDGERNN_LINK_WIFI || EDGERNN_APP_CAMERA

#include "pmsis.h"
#include "FreeRTOS.h"
#include "semphr.h"

#include "hal.h"

#define CPX_TARGET_WIFI_HOST EDGERNN_CPX_WIFI_HOST
#define CPX_TARGET_GAP8 EDGERNN_CPX_GAP8
#define CPX_WIFI_CLIENT_NEWS 0x32u                 /* WIFI_CTRL: a host connected (1) or left (0) */
#define CPX_LAST_PACKET 0x40u
#define CPX_FIRST_TRANSFER 4                       /* bytes: both lengths, and the start of both headers */
#define CPX_BUFFER_BYTES (EDGERNN_CPX_MTU + 2 + 4) /* length, packet, and room for the rounding up to 4 bytes */

#define ESP_READY_GPIO 18u                         /* in: the ESP32 has set a transfer up (rising edge) */
#define GAP_RTT_GPIO 3u                            /* out: the GAP8 has a packet to send */

#ifndef EDGERNN_CPX_SPI_HZ
#define EDGERNN_CPX_SPI_HZ 10000000
#endif
/* bytes received and not read yet: four packets, the most that can arrive while the server writes a frame */
#ifndef EDGERNN_CPX_RX_BYTES
#define EDGERNN_CPX_RX_BYTES (4 * EDGERNN_CPX_MTU)
#endif

static struct pi_device spi;
static struct pi_device gpio;
static pi_gpio_callback_t ready_callback;
static SemaphoreHandle_t ready;
/* what the uDMA reads and writes: word-aligned L2 */
static uint32_t tx_words[(CPX_BUFFER_BYTES + 3) / 4];
static uint32_t rx_words[(CPX_BUFFER_BYTES + 3) / 4];
static uint8_t rx_ring[EDGERNN_CPX_RX_BYTES];
static uint32_t rx_head, rx_tail;                  /* bytes taken in and read out, modulo 2^32 */
static uint32_t rx_dropped;                        /* bytes that found the ring full (the host's retry resends) */
static volatile int host_connected;                /* the ESP32's last WIFI_CTRL news of its WiFi client */

static void ready_edge(void *arg)
{
    BaseType_t woken = pdFALSE;
    (void)arg;
    xSemaphoreGiveFromISR(ready, &woken);
    portYIELD_FROM_ISR(woken);
}

int edgernn_cpx_open(void)
{
    struct pi_gpio_conf gpio_conf;
    struct pi_spi_conf spi_conf;
    uint32_t level = 0;

    ready = xSemaphoreCreateBinary();
    if (ready == NULL) {
        return -1;
    }
    pi_gpio_conf_init(&gpio_conf);
    pi_open_from_conf(&gpio, &gpio_conf);
    if (pi_gpio_open(&gpio) != 0) {
        return -1;
    }
    pi_gpio_pin_configure(&gpio, GAP_RTT_GPIO, PI_GPIO_OUTPUT);
    pi_pad_set_function(PI_PAD_15_B1_RF_PACTRL3, PI_PAD_15_B1_GPIO_A3_FUNC1);
    pi_gpio_pin_write(&gpio, GAP_RTT_GPIO, 0);

    pi_spi_conf_init(&spi_conf);
    spi_conf.wordsize = PI_SPI_WORDSIZE_8;
    spi_conf.big_endian = 1;
    spi_conf.max_baudrate = EDGERNN_CPX_SPI_HZ;
    spi_conf.polarity = 0;
    spi_conf.phase = 0;
    spi_conf.itf = 1;
    spi_conf.cs = 0;
    pi_open_from_conf(&spi, &spi_conf);
    if (pi_spi_open(&spi) != 0) {
        return -1;
    }

    pi_gpio_pin_configure(&gpio, ESP_READY_GPIO, PI_GPIO_INPUT);
    pi_gpio_pin_notif_configure(&gpio, ESP_READY_GPIO, PI_GPIO_NOTIF_RISE);
    pi_pad_set_function(PI_PAD_32_A13_TIMER0_CH1, PI_PAD_32_A13_GPIO_A18_FUNC1);
    pi_gpio_callback_init(&ready_callback, 1u << ESP_READY_GPIO, ready_edge, NULL);
    pi_gpio_callback_add(&gpio, &ready_callback);
    /* an ESP32 that set a transfer up before the edge could be seen: take it as the edge */
    pi_gpio_pin_read(&gpio, ESP_READY_GPIO, &level);
    if (level != 0u) {
        xSemaphoreGive(ready);
    }
    rx_head = rx_tail = 0;
    return 0;
}

static void take_packet(const uint8_t *packet, int length)
{
    const uint8_t route = packet[0];
    const uint8_t function = packet[1];

    if ((route & 0x7u) == CPX_TARGET_GAP8 && (function & 0x3Fu) == EDGERNN_CPX_F_WIFI_CTRL && length >= 4
        && packet[2] == CPX_WIFI_CLIENT_NEWS) {
        host_connected = packet[3] != 0u;
        return;
    }
    if ((route & 0x7u) != CPX_TARGET_GAP8 || (function & 0x3Fu) != EDGERNN_CPX_FUNCTION || (function >> 6) != 0u) {
        return;     /* not edgernn's: the ESP32's other news, CONSOLE or APP traffic */
    }
    for (int i = 2; i < length; ++i) {
        if (rx_head - rx_tail == (uint32_t)EDGERNN_CPX_RX_BYTES) {
            rx_dropped += (uint32_t)(length - i);
            return;
        }
        rx_ring[rx_head % EDGERNN_CPX_RX_BYTES] = packet[i];
        ++rx_head;
    }
}

/* One transfer: send the packet in tx_words (length in its first two bytes; 0: none), take what comes back. */
static void exchange(int tx_length)
{
    uint8_t *tx = (uint8_t *)tx_words;
    uint8_t *rx = (uint8_t *)rx_words;
    int rx_length, rest;

    tx[0] = (uint8_t)tx_length;
    tx[1] = (uint8_t)(tx_length >> 8);
    if (tx_length > 0) {
        pi_gpio_pin_write(&gpio, GAP_RTT_GPIO, 1);
    }
    xSemaphoreTake(ready, portMAX_DELAY);
    pi_spi_transfer(&spi, tx, rx, CPX_FIRST_TRANSFER * 8, PI_SPI_LINES_SINGLE | PI_SPI_CS_KEEP);
    rx_length = rx[0] | (rx[1] << 8);
    if (rx_length > EDGERNN_CPX_MTU) {
        rx_length = 0;      /* not a length: a garbled transfer, whose bytes are not taken */
    }
    rest = (tx_length > rx_length ? tx_length : rx_length) + 2 - CPX_FIRST_TRANSFER;
    if (rest <= 0) {
        rest = 4;           /* a transfer of 0 bits would upset the next one */
    }
    rest = (rest + 3) & ~3;
    if (tx_length > 0) {
        pi_gpio_pin_write(&gpio, GAP_RTT_GPIO, 0);
    }
    pi_spi_transfer(&spi, tx + CPX_FIRST_TRANSFER, rx + CPX_FIRST_TRANSFER, (size_t)rest * 8,
                    PI_SPI_LINES_SINGLE | PI_SPI_CS_AUTO);
    if (rx_length >= 2) {
        take_packet(rx + 2, rx_length);
    }
}

int edgernn_hal_uart_read(uint8_t *buf, int max)
{
    int n = 0;

    if (max < 1) {
        return 0;
    }
    while (rx_head == rx_tail) {
        exchange(0);
    }
    while (n < max && rx_tail != rx_head) {
        buf[n++] = rx_ring[rx_tail % EDGERNN_CPX_RX_BYTES];
        ++rx_tail;
    }
    return n;
}

void edgernn_cpx_send(unsigned destination, unsigned function, int last, const uint8_t *data, int n)
{
    uint8_t *tx = (uint8_t *)tx_words;

    tx[2] = (uint8_t)((destination & 0x7u) | (CPX_TARGET_GAP8 << 3) | (last ? CPX_LAST_PACKET : 0u));
    tx[3] = (uint8_t)(function & 0x3Fu);
    for (int i = 0; i < n; ++i) {
        tx[4 + i] = data[i];
    }
    exchange(n + 2);
}

void edgernn_cpx_poll(void)
{
    exchange(0);
}

int edgernn_cpx_host_connected(void)
{
    return host_connected;
}

void edgernn_hal_uart_write(const uint8_t *buf, int len)
{
    while (len > 0) {
        const int n = len < EDGERNN_CPX_MTU - 2 ? len : EDGERNN_CPX_MTU - 2;
        edgernn_cpx_send(CPX_TARGET_WIFI_HOST, EDGERNN_CPX_FUNCTION, n == len, buf, n);
        buf += n;
        len -= n;
    }
}

#endif
