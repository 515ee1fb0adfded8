/* edgernn serial link: COBS framing with CRC-32, the same codec as edgernn/link/framing.py. */
#include "protocol.h"

uint32_t edgernn_crc32(uint32_t crc, const uint8_t *data, size_t len)
{
    /* Bitwise, table-free: 1 KiB of table is not worth it next to the model's own work per step. */
    crc = ~crc;
    for (size_t i = 0; i < len; ++i) {
        crc ^= data[i];
        for (int bit = 0; bit < 8; ++bit) {
            crc = (crc >> 1) ^ (0xEDB88320u & (uint32_t)(-(int32_t)(crc & 1u)));
        }
    }
    return ~crc;
}

void edgernn_parser_init(edgernn_parser_t *parser)
{
    parser->len = 0;
    parser->remaining = 0;
    parser->prev_code = 0;
    parser->overflow = 0;
    parser->bad_cobs = 0;
    parser->error = 0;
}

static void parser_append(edgernn_parser_t *parser, uint8_t byte)
{
    if (parser->len < EDGERNN_LINK_RX_FRAME) {
        parser->frame[parser->len++] = byte;
    } else {
        parser->overflow = 1;
    }
}

static edgernn_parse_result_t parser_finish(edgernn_parser_t *parser)
{
    edgernn_parse_result_t result = EDGERNN_PARSE_BAD;
    size_t len = parser->len;
    int empty = (parser->prev_code == 0);

    if (parser->overflow) {
        parser->error = EDGERNN_ERR_TOO_LONG;
    } else if (parser->bad_cobs || parser->remaining != 0) {
        parser->error = EDGERNN_ERR_BAD_COBS;
    } else if (len < EDGERNN_LINK_MIN_FRAME) {
        parser->error = EDGERNN_ERR_BAD_LENGTH;
    } else if (edgernn_crc32(0, parser->frame, len - EDGERNN_LINK_CRC) !=
               edgernn_get_u32(parser->frame + len - EDGERNN_LINK_CRC)) {
        parser->error = EDGERNN_ERR_BAD_CRC;
    } else {
        result = EDGERNN_PARSE_FRAME;
    }
    parser->remaining = 0;
    parser->prev_code = 0;
    parser->overflow = 0;
    parser->bad_cobs = 0;
    if (result != EDGERNN_PARSE_FRAME) {
        parser->len = 0;
        /* Back-to-back delimiters are idle line, not an error. */
        if (empty) {
            return EDGERNN_PARSE_MORE;
        }
    }
    return result;
}

edgernn_parse_result_t edgernn_parser_feed(edgernn_parser_t *parser, uint8_t byte)
{
    if (parser->prev_code == 0 && parser->remaining == 0 && parser->len != 0) {
        /* The previous call returned a frame; its bytes are consumed now. */
        parser->len = 0;
    }
    if (byte == 0x00) {
        return parser_finish(parser);
    }
    if (parser->remaining == 0) {
        /* A code byte. Every block but the first is preceded by the zero its code stood for,
         * unless the previous block was a full 254-byte run (code 0xFF). */
        if (parser->prev_code != 0 && parser->prev_code != 0xFFu) {
            parser_append(parser, 0x00);
        }
        parser->prev_code = byte;
        parser->remaining = (uint8_t)(byte - 1u);
    } else {
        parser_append(parser, byte);
        parser->remaining--;
    }
    return EDGERNN_PARSE_MORE;
}

size_t edgernn_cobs_encode(const uint8_t *raw, size_t len, uint8_t *out)
{
    size_t code_at = 0;
    size_t o = 1;
    uint8_t code = 1;

    for (size_t i = 0; i < len; ++i) {
        if (raw[i] == 0x00) {
            out[code_at] = code;
            code_at = o++;
            code = 1;
        } else {
            out[o++] = raw[i];
            if (++code == 0xFFu) {
                out[code_at] = code;
                code_at = o++;
                code = 1;
            }
        }
    }
    out[code_at] = code;
    out[o++] = 0x00;
    return o;
}

size_t edgernn_frame_seal(uint8_t *frame, uint8_t type, uint16_t seq, size_t payload_len)
{
    size_t body = EDGERNN_LINK_HEADER + payload_len;
    frame[0] = (uint8_t)EDGERNN_LINK_VERSION;
    frame[1] = type;
    edgernn_put_u16(frame + 2, seq);
    edgernn_put_u32(frame + body, edgernn_crc32(0, frame, body));
    return body + EDGERNN_LINK_CRC;
}
