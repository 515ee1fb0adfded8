/* The board interface the validation server runs on. One implementation per board under templates/hal/. */
#ifndef EDGERNN_HAL_H
#define EDGERNN_HAL_H

#include <stdint.h>

void edgernn_hal_init(int argc, char **argv);
/* Block until at least one byte has arrived; return how many were stored (1..max), or -1 when the
 * link is gone for good. */
int edgernn_hal_uart_read(uint8_t *buf, int max);
void edgernn_hal_uart_write(const uint8_t *buf, int len);
/* A free-running counter: retired instructions, core cycles or nanoseconds, as the board file says. */
uint64_t edgernn_hal_cycles(void);
void edgernn_hal_exit(int code);

/* A board whose step runs on a team apart from the link's core (GAP8's cluster) may count the team's
 * own cycles too: with EDGERNN_HAL_TEAM_CYCLES=1 (a define of its board file) edgernn_hal_team_cycles is
 * that second free-running counter, in the same unit as edgernn_hal_cycles, and the server offers it
 * to the host (docs/protocol.md, STEP flag 0x04). */
#ifndef EDGERNN_HAL_TEAM_CYCLES
#define EDGERNN_HAL_TEAM_CYCLES 0
#endif
#if EDGERNN_HAL_TEAM_CYCLES
uint64_t edgernn_hal_team_cycles(void);
#endif

#endif
