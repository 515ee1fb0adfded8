/* How the AI-deck firmware reports an edgernn_init() that failed (the lines of edgernn/link/protocol.py:
 * INIT_FAILED). The lines go out at once; then the firmware stays, and sends them again whenever the host
 * sends something, instead of exiting: a host that opened the link late still reads why. A real UART drops
 * what it sent before its port was opened; GVSOC's UART server holds the bytes for a client that has not
 * connected yet, but loses them, and those it has not passed on yet, when the simulation ends. The host
 * reports the lines as DeviceInitError once the device has answered no request for a while after them
 * (edgernn/link/client.py: INIT_FAILED_QUIET_S) and stops an emulated board itself. */
#ifndef EDGERNN_INIT_FAILED_H
#define EDGERNN_INIT_FAILED_H

/* Send a text (a line outside any frame: the init-failure lines, the firmware's last line). */
void edgernn_hal_write_text(const char *text);
/* Send "~~~EDGERNN INIT FAILED: why~~~" and keep why (a string that lives on) for the repeats. */
void edgernn_hal_say_init_failed(const char *why);
/* Send the plain init-failure line, then every line again each time bytes arrive from the host. Returns
 * only by exiting with status 2, once the link is gone for good. */
void edgernn_hal_stop_init_failed(void);

#endif
