/* libFuzzer harness for the device-side frame parser (templates/firmware/protocol.c).
 *
 * Feeds arbitrary bytes through edgernn_parser_feed and checks what the parser promises: a frame it
 * accepts is within the size limit, at least header + CRC long, and carries a CRC that matches; and
 * re-encoding an accepted frame and feeding it again yields the same frame. ASan and UBSan catch
 * every out-of-bounds access or undefined operation on the way. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"

static edgernn_parser_t parser;
static edgernn_parser_t again;
/* both directions are the same size here (no model): EDGERNN_LINK_RX_FRAME == EDGERNN_LINK_TX_FRAME */
static uint8_t encoded[EDGERNN_LINK_MAX_TX_ENCODED];

static void check_frame(const edgernn_parser_t *p)
{
    if (p->len < EDGERNN_LINK_MIN_FRAME || p->len > EDGERNN_LINK_RX_FRAME) {
        abort();
    }
    if (edgernn_crc32(0, p->frame, p->len - EDGERNN_LINK_CRC) != edgernn_get_u32(p->frame + p->len - EDGERNN_LINK_CRC)) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    edgernn_parser_init(&parser);
    for (size_t i = 0; i < size; ++i) {
        if (edgernn_parser_feed(&parser, data[i]) == EDGERNN_PARSE_FRAME) {
            size_t n;
            int seen = 0;

            check_frame(&parser);
            n = edgernn_cobs_encode(parser.frame, parser.len, encoded);
            edgernn_parser_init(&again);
            for (size_t j = 0; j < n; ++j) {
                if (edgernn_parser_feed(&again, encoded[j]) == EDGERNN_PARSE_FRAME) {
                    if (again.len != parser.len || memcmp(again.frame, parser.frame, parser.len) != 0) {
                        abort();
                    }
                    seen = 1;
                }
            }
            if (!seen) {
                abort();
            }
        }
    }
    /* Sealing a frame from fuzz bytes must also parse back. */
    if (size >= 1 && size <= EDGERNN_LINK_MAX_TX_PAYLOAD) {
        static uint8_t frame[EDGERNN_LINK_TX_FRAME];
        size_t len;
        size_t n;
        int seen = 0;

        memcpy(frame + EDGERNN_LINK_HEADER, data, size);
        len = edgernn_frame_seal(frame, data[0], (uint16_t)size, size);
        n = edgernn_cobs_encode(frame, len, encoded);
        edgernn_parser_init(&again);
        for (size_t j = 0; j < n; ++j) {
            if (edgernn_parser_feed(&again, encoded[j]) == EDGERNN_PARSE_FRAME) {
                seen = again.len == len && memcmp(again.frame, frame, len) == 0;
            }
        }
        if (!seen) {
            abort();
        }
    }
    return 0;
}
