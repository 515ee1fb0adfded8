/* The stream memory of tests/c/l3_*_check.c on the host (edgernn_l3_stream.h's board side): a copy in RAM,
 * `stream_memory`, which the including file defines before this header, whose transfers land only when
 * edgernn_l3_wait is called, so a chunk computed before its wait reads stale bytes. A slot's part read again
 * before its wait ends the check with status 2. */
#ifndef L3_STREAM_HOST_H
#define L3_STREAM_HOST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgernn_l3_stream.h"

static struct {
    void *dst;
    const uint8_t *src;
    uint32_t n;
} pending[2][2];

int edgernn_l3_open(uint32_t bytes, uint32_t checksum)
{
    (void)bytes;
    (void)checksum;
    return 0;
}

void edgernn_l3_read(int slot, int part, void *dst, uint32_t offset, uint32_t bytes)
{
    if (pending[slot][part].n != 0) {
        fprintf(stderr, "slot %d part %d read again before its wait\n", slot, part);
        exit(2);
    }
    pending[slot][part].dst = dst;
    pending[slot][part].src = stream_memory + offset;
    pending[slot][part].n = bytes;
}

void edgernn_l3_wait(int slot)
{
    int part;
    for (part = 0; part < 2; ++part) {
        if (pending[slot][part].n != 0) {
            memcpy(pending[slot][part].dst, pending[slot][part].src, pending[slot][part].n);
            pending[slot][part].n = 0;
        }
    }
}

#endif /* L3_STREAM_HOST_H */
