/* The AI-deck's WiFi link: CPX through the deck's ESP32 (link_cpx.c). */
#ifndef EDGERNN_LINK_CPX_H
#define EDGERNN_LINK_CPX_H

/* 1: the validation link is CPX over the ESP32 (`edgernn build --link wifi`); 0: the UART (hal.c) */
#ifndef EDGERNN_LINK_WIFI
#define EDGERNN_LINK_WIFI 0
#endif

/* header + data of one CPX packet, on SPI and on WiFi alike (Bitcraze's aideck-esp-firmware) */
#define EDGERNN_CPX_MTU 1022
/* the CPX function of edgernn's validation protocol: outside Bitcraze's 0x01-0x0F (docs/protocol.md) */
#define EDGERNN_CPX_FUNCTION 0x20

/* Opens the GPIOs and SPI1 to the ESP32; 0, or -1 when a driver would not open. */
int edgernn_cpx_open(void);

#endif
