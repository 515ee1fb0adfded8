/* edgernn serial link: frame codec shared with edgernn/link/framing.py. Wire format: docs/protocol.md. */
#ifndef EDGERNN_PROTOCOL_H
#define EDGERNN_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#ifndef EDGERNN_LINK_VERSION
#define EDGERNN_LINK_VERSION 2
#endif

/* The board's raw frame (header + payload + CRC) in both directions; the frames of a model whose step
 * needs more grow to it (below). The device announces its limits in HELLO and the host sizes its STEP
 * batches to fit. */
#ifndef EDGERNN_LINK_MAX_FRAME
#define EDGERNN_LINK_MAX_FRAME 4096
#endif

/* The raw frames one step of the model needs: the STEP request with one input (received), and its answer
 * with the output, the cycle count and the state bytes twice (sent). edgernn's generator writes them into
 * the firmware folder's copy of this file (0 here: no model). Where one is more than the board's frame it
 * is that direction's limit, so a frame model's input always fits one frame, and only the receive buffer
 * grows for a camera frame. */
#define EDGERNN_LINK_MODEL_RX_FRAME 0
#define EDGERNN_LINK_MODEL_TX_FRAME 0

/* EDGERNN_LINK_FIXED_FRAME=1 (a board with little RAM) keeps both limits at EDGERNN_LINK_MAX_FRAME whatever
 * the model needs: a step that does not fit is then refused by the host in one line. */
#ifndef EDGERNN_LINK_FIXED_FRAME
#define EDGERNN_LINK_FIXED_FRAME 0
#endif
#if EDGERNN_LINK_MODEL_RX_FRAME > EDGERNN_LINK_MAX_FRAME && !EDGERNN_LINK_FIXED_FRAME
#define EDGERNN_LINK_RX_FRAME EDGERNN_LINK_MODEL_RX_FRAME
#else
#define EDGERNN_LINK_RX_FRAME EDGERNN_LINK_MAX_FRAME
#endif
#if EDGERNN_LINK_MODEL_TX_FRAME > EDGERNN_LINK_MAX_FRAME && !EDGERNN_LINK_FIXED_FRAME
#define EDGERNN_LINK_TX_FRAME EDGERNN_LINK_MODEL_TX_FRAME
#else
#define EDGERNN_LINK_TX_FRAME EDGERNN_LINK_MAX_FRAME
#endif
#if EDGERNN_LINK_RX_FRAME > 0xFFFFFFFF || EDGERNN_LINK_TX_FRAME > 0xFFFFFFFF
#error "a link frame past the 32-bit limit of HELLO's fields"
#endif

#define EDGERNN_LINK_HEADER 4u      /* version, type, seq (u16 LE) */
#define EDGERNN_LINK_CRC 4u         /* CRC-32 (IEEE 802.3, as zlib.crc32), LE */
#define EDGERNN_LINK_MIN_FRAME (EDGERNN_LINK_HEADER + EDGERNN_LINK_CRC)
#define EDGERNN_LINK_MAX_TX_PAYLOAD (EDGERNN_LINK_TX_FRAME - EDGERNN_LINK_MIN_FRAME)
/* A sent frame COBS-encoded: one byte more per 254 plus the leading code byte; +1 for the 0x00 delimiter. */
#define EDGERNN_LINK_MAX_TX_ENCODED (EDGERNN_LINK_TX_FRAME + EDGERNN_LINK_TX_FRAME / 254u + 2u)
/* STEP's step count is 16-bit */
#define EDGERNN_LINK_MAX_STEPS 0xFFFFu
#define EDGERNN_LINK_NO_SEQ 0xFFFFu

enum edgernn_msg_type {
    EDGERNN_MSG_HELLO = 0x01,
    EDGERNN_MSG_RESET = 0x02,
    EDGERNN_MSG_STEP = 0x03,
    EDGERNN_MSG_BYE = 0x04,
    EDGERNN_MSG_REPLY = 0x80, /* reply type = request type | 0x80 */
    EDGERNN_MSG_ERROR = 0xFF
};

enum edgernn_link_error {
    EDGERNN_ERR_BAD_CRC = 1,
    EDGERNN_ERR_BAD_VERSION = 2,
    EDGERNN_ERR_BAD_TYPE = 3,
    EDGERNN_ERR_BAD_LENGTH = 4,
    EDGERNN_ERR_TOO_LONG = 5,
    EDGERNN_ERR_NOT_RESET = 6,
    EDGERNN_ERR_MODEL = 7,
    EDGERNN_ERR_BAD_COBS = 8
};

#define EDGERNN_STEP_STATE_EVERY 0x01u
#define EDGERNN_STEP_STATE_LAST 0x02u
/* STEP flag: each step's record also carries the team's own cycle count (edgernn_hal_team_cycles) */
#define EDGERNN_STEP_TEAM_CYCLES 0x04u
/* HELLO target flag: the device counts the team's own cycles too, so the host may ask for them */
#define EDGERNN_LINK_TARGET_TEAM_CYCLES 0x04u

typedef enum {
    EDGERNN_PARSE_MORE = 0,      /* byte consumed, no frame yet */
    EDGERNN_PARSE_FRAME = 1,     /* a whole frame with a good CRC is in parser->frame */
    EDGERNN_PARSE_BAD = 2        /* a delimited frame was corrupt: parser->error says why */
} edgernn_parse_result_t;

typedef struct {
    uint8_t frame[EDGERNN_LINK_RX_FRAME];  /* decoded bytes of the frame being received */
    size_t len;                            /* decoded length so far / of the finished frame */
    uint8_t remaining;                     /* data bytes left in the current COBS block */
    uint8_t prev_code;                     /* code byte of the current block, 0 before the first */
    uint8_t overflow;                      /* frame grew past the limit: drop it at the delimiter */
    uint8_t bad_cobs;                      /* a delimiter came inside a block, or similar */
    uint8_t error;                         /* edgernn_link_error for EDGERNN_PARSE_BAD */
} edgernn_parser_t;

uint32_t edgernn_crc32(uint32_t crc, const uint8_t *data, size_t len);
void edgernn_parser_init(edgernn_parser_t *parser);
/* Feed one received byte. Garbage of any kind yields EDGERNN_PARSE_BAD at the next delimiter at worst. */
edgernn_parse_result_t edgernn_parser_feed(edgernn_parser_t *parser, uint8_t byte);

/* COBS-encode raw[0..len) into out and append the 0x00 delimiter. Returns the encoded length.
 * out must hold len + len / 254 + 2 bytes. */
size_t edgernn_cobs_encode(const uint8_t *raw, size_t len, uint8_t *out);

/* Write header and CRC around a payload already placed at frame + EDGERNN_LINK_HEADER.
 * Returns the raw frame length. */
size_t edgernn_frame_seal(uint8_t *frame, uint8_t type, uint16_t seq, size_t payload_len);

static inline uint16_t edgernn_get_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t edgernn_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline void edgernn_put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void edgernn_put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

#endif
