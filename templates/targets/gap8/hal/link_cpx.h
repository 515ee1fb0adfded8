/* The AI-deck's WiFi link: CPX through the deck's ESP32 (link_cpx.c). */
#ifndef EDGERNN_LINK_CPX_H
#define EDGERNN_LINK_CPX_H

#include <stdint.h>

/* 1: the validation link is CPX over the ESP32 (`edgernn build --link wifi`); 0: the UART (hal.c) */
#ifndef EDGERNN_LINK_WIFI
#define EDGERNN_LINK_WIFI 0
#endif
/* 1: the firmware is the deck application (`edgernn build --app camera`, templates/targets/gap8/app/), which
 * sends its outputs as CPX APP packets through this file's transport */
#ifndef EDGERNN_APP_CAMERA
#define EDGERNN_APP_CAMERA 0
#endif

/* header + data of one CPX packet, on SPI and on WiFi alike (Bitcraze's aideck-esp-firmware) */
#define EDGERNN_CPX_MTU 1022
/* the CPX function of edgernn's validation protocol: outside Bitcraze's 0x01-0x0F (docs/protocol.md) */
#define EDGERNN_CPX_FUNCTION 0x20

/* CPX targets and functions (Bitcraze's cpx.h) */
#define EDGERNN_CPX_STM32 1u
#define EDGERNN_CPX_WIFI_HOST 3u
#define EDGERNN_CPX_GAP8 4u
#define EDGERNN_CPX_F_WIFI_CTRL 4u
#define EDGERNN_CPX_F_APP 5u

/* Opens the GPIOs and SPI1 to the ESP32; 0, or -1 when a driver would not open. */
int edgernn_cpx_open(void);

/* Sends one packet from the GAP8 to `destination` with `function`, the last-packet flag when `last` is nonzero;
 * n is at most EDGERNN_CPX_MTU - 2. Returns once its transfer has ended. */
void edgernn_cpx_send(unsigned destination, unsigned function, int last, const uint8_t *data, int n);

/* One transfer with nothing to send: takes what the ESP32 has for the GAP8 (waits for its ready line). */
void edgernn_cpx_poll(void);

/* 1 while a WiFi host is connected to the deck's ESP32, as its WIFI_CTRL news (0x32) last said; 0 before any. */
int edgernn_cpx_host_connected(void);

#endif
