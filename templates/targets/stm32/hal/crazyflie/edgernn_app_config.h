/* The Crazyflie app's settings (edgernn, board crazyflie). Edit them here; `edgernn build` writes this file
 * again only into a new OUT. docs/boards/stm32.md says what each one does. */
#ifndef EDGERNN_APP_CONFIG_H
#define EDGERNN_APP_CONFIG_H

/* Steps a second at start; the parameter edgernn.rateHz changes it in flight (1..1000). */
#define EDGERNN_APP_RATE_HZ 100

/* The model's inputs, in order, as "group.name" of the firmware's log variables, read with logGetFloat at
 * every step by the default input hook (edgernn_app_read_inputs in edgernn_app.c). An input with no name here,
 * or whose variable does not exist, reads 0. To feed the model from anything else, define your own
 *     void edgernn_app_read_inputs(float *x, int n)
 * in a .c file of this folder and add it to Kbuild's obj-y: it replaces the default (a weak symbol). */
#define EDGERNN_APP_INPUT_LOGS                                                                                  \
    {                                                                                                           \
        "stateEstimate.x", "stateEstimate.y", "stateEstimate.z", "stateEstimate.vx", "stateEstimate.vy",        \
            "stateEstimate.vz", "stateEstimate.roll", "stateEstimate.pitch", "stateEstimate.yaw",               \
            "stateEstimate.ax", "stateEstimate.ay", "stateEstimate.az"                                          \
    }

/* 1: instead of stepping on the firmware's data, the app runs edgernn's validation server on UART1 (the deck
 * connector's RX1/TX1) at EDGERNN_APP_SERVE_BAUD, for `edgernn validate OUT --port /dev/ttyUSB0`. */
#define EDGERNN_APP_SERVE 0
#define EDGERNN_APP_SERVE_BAUD 115200

#endif
