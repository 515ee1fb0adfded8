/* HAL for the `host` board: the firmware is a native process. Its UART is a file descriptor, the
 * master side of a pseudo-terminal given as `--fd N`, or stdin/stdout without arguments. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hal.h"

static int fd_in = 0;
static int fd_out = 1;

void edgernn_hal_init(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; ++i) {
        if (strcmp(argv[i], "--fd") == 0) {
            fd_in = fd_out = atoi(argv[i + 1]);
        }
    }
}

int edgernn_hal_uart_read(uint8_t *buf, int max)
{
    for (;;) {
        struct pollfd pfd = {fd_in, POLLIN, 0};
        ssize_t n;

        if (poll(&pfd, 1, 100) < 0 && errno != EINTR) {
            return -1;
        }
        n = read(fd_in, buf, (size_t)max);
        if (n > 0) {
            return (int)n;
        }
        if (n == 0) {
            return -1; /* end of file: the host side has gone */
        }
        /* EIO on a pty master means nobody holds the slave open right now; a host may open it later. */
        if (errno != EINTR && errno != EAGAIN && errno != EIO) {
            return -1;
        }
        if (errno == EIO) {
            struct timespec pause = {0, 10000000L};
            nanosleep(&pause, NULL);
        }
    }
}

void edgernn_hal_uart_write(const uint8_t *buf, int len)
{
    while (len > 0) {
        ssize_t n = write(fd_out, buf, (size_t)len);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) {
                struct pollfd pfd = {fd_out, POLLOUT, 0};
                (void)poll(&pfd, 1, 100);
                continue;
            }
            return;
        }
        buf += n;
        len -= (int)n;
    }
}

uint64_t edgernn_hal_cycles(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

void edgernn_hal_exit(int code)
{
    exit(code);
}
