/* Validation server around the generated model API. The wire format is in docs/protocol.md.
 *
 * Every request carries a sequence number. The last answer is kept: a request that repeats the
 * sequence number and type of the last one executed is answered from that copy, so a host retrying
 * after a lost reply never makes a step run twice. */
#include <string.h>

#include "hal.h"
#include "model.h"
#include "protocol.h"
#include "server.h"

#ifndef EDGERNN_BOARD_NAME
#define EDGERNN_BOARD_NAME "unknown"
#endif

#define IN_BYTES ((uint32_t)EDGERNN_INPUT_SIZE * (uint32_t)sizeof(edgernn_in_t))
#define OUT_BYTES ((uint32_t)EDGERNN_OUTPUT_SIZE * (uint32_t)sizeof(edgernn_out_t))

static edgernn_parser_t rx;
/* Received frames (rx) may be larger than sent ones (tx): a camera frame's STEP request against its answer
 * of a few outputs. Each buffer has its own direction's size (protocol.h). */
static uint8_t tx[EDGERNN_LINK_TX_FRAME];   /* last answer, kept for repeats */
static size_t tx_len;
static uint8_t err_frame[EDGERNN_LINK_MIN_FRAME + 4];
static uint8_t encoded[EDGERNN_LINK_MAX_TX_ENCODED];

static uint16_t cached_seq;
static uint8_t cached_type;
static uint8_t have_cache;
static uint8_t session_ready;  /* a RESET has run since boot */
static uint32_t steps_done;    /* steps since the last RESET */

/* Aligned copies: inputs inside a frame may sit at any address. Byte-sized inputs (int8) are read in place,
 * so a camera frame is held once, in the receive buffer, not twice. */
#define X_IN_PLACE (sizeof(edgernn_in_t) == 1u)
static edgernn_in_t x_step[X_IN_PLACE ? 1 : EDGERNN_INPUT_SIZE];
static edgernn_out_t y_step[EDGERNN_OUTPUT_SIZE];
static uint8_t state_buf[EDGERNN_STATE_BYTES + 1];

static void send_frame(const uint8_t *frame, size_t len)
{
    size_t n = edgernn_cobs_encode(frame, len, encoded);
    edgernn_hal_uart_write(encoded, (int)n);
}

static void send_error(uint16_t seq, uint8_t code, uint16_t detail)
{
    uint8_t *p = err_frame + EDGERNN_LINK_HEADER;
    p[0] = code;
    p[1] = (uint8_t)EDGERNN_LINK_VERSION;
    edgernn_put_u16(p + 2, detail);
    send_frame(err_frame, edgernn_frame_seal(err_frame, EDGERNN_MSG_ERROR, seq, 4));
}

static void answer_hello(uint16_t seq)
{
    static const char board[] = EDGERNN_BOARD_NAME;
    static const char sha[] = EDGERNN_MODEL_SHA256;
    uint8_t *p = tx + EDGERNN_LINK_HEADER;
    size_t board_len = sizeof(board) - 1u;
    size_t n = 0;

    if (board_len > 32u) {
        board_len = 32u;
    }
    p[n++] = (uint8_t)EDGERNN_LINK_VERSION;
    p[n++] = (uint8_t)sizeof(edgernn_in_t);
    p[n++] = (uint8_t)sizeof(edgernn_out_t);
    p[n++] = 0; /* reserved */
    edgernn_put_u32(p + n, (uint32_t)EDGERNN_INPUT_SIZE);
    n += 4;
    edgernn_put_u32(p + n, (uint32_t)EDGERNN_OUTPUT_SIZE);
    n += 4;
    edgernn_put_u32(p + n, (uint32_t)EDGERNN_STATE_BYTES);
    n += 4;
    edgernn_put_u32(p + n, (uint32_t)EDGERNN_LINK_RX_FRAME); /* the largest frame it receives */
    n += 4;
    edgernn_put_u32(p + n, (uint32_t)EDGERNN_LINK_TX_FRAME); /* the largest frame it sends */
    n += 4;
    p[n++] = (uint8_t)board_len;
    memcpy(p + n, board, board_len);
    n += board_len;
    memcpy(p + n, sha, 64);
    n += 64;
    /* The target block: what the step runs on (a model API without edgernn_target says 0, unknown). */
    {
        int workers = 0;
        unsigned flags = 0u;
#ifdef EDGERNN_TARGET_SIMD_DOT
        edgernn_target(&workers, &flags);
#endif
#if EDGERNN_HAL_TEAM_CYCLES
        flags |= EDGERNN_LINK_TARGET_TEAM_CYCLES;
#endif
        p[n++] = (uint8_t)workers;
        p[n++] = (uint8_t)flags;
        edgernn_put_u16(p + n, 0u); /* reserved */
        n += 2;
    }
    tx_len = edgernn_frame_seal(tx, EDGERNN_MSG_HELLO | EDGERNN_MSG_REPLY, seq, n);
    /* A new host session starts here: whatever was cached belongs to the previous one. */
    have_cache = 0;
    send_frame(tx, tx_len);
}

/* Runs the steps of one STEP request into tx. Returns 0, or an error code with *detail set. */
static uint8_t run_steps(uint16_t seq, const uint8_t *req, size_t req_len, uint16_t *detail)
{
    uint8_t flags;
    uint32_t n_steps;
    uint32_t per_step;
    uint32_t last_bytes;
    uint32_t room;
    uint8_t *p = tx + EDGERNN_LINK_HEADER;
    size_t at;

    if (req_len < 3u) {
        return EDGERNN_ERR_BAD_LENGTH;
    }
    flags = req[0];
    n_steps = edgernn_get_u16(req + 1);
    /* Divided, not multiplied: n_steps * IN_BYTES of a corrupt count can pass 32 bits with a camera frame. */
    if (n_steps == 0u || (req_len - 3u) % IN_BYTES != 0u || (req_len - 3u) / IN_BYTES != n_steps) {
        return EDGERNN_ERR_BAD_LENGTH;
    }
#if !EDGERNN_HAL_TEAM_CYCLES
    flags &= (uint8_t)~EDGERNN_STEP_TEAM_CYCLES; /* no such count here: the HELLO did not offer it */
#endif
    per_step = OUT_BYTES + 4u + ((flags & EDGERNN_STEP_TEAM_CYCLES) ? 4u : 0u) +
               ((flags & EDGERNN_STEP_STATE_EVERY) ? (uint32_t)EDGERNN_STATE_BYTES : 0u);
    last_bytes = (flags & EDGERNN_STEP_STATE_LAST) ? (uint32_t)EDGERNN_STATE_BYTES : 0u;
    room = EDGERNN_LINK_MAX_TX_PAYLOAD >= 7u + last_bytes ? (uint32_t)EDGERNN_LINK_MAX_TX_PAYLOAD - 7u - last_bytes : 0u;
    if (n_steps > room / per_step) {
        uint32_t fit = room / per_step;
        *detail = (uint16_t)(fit > EDGERNN_LINK_MAX_STEPS ? EDGERNN_LINK_MAX_STEPS : fit);
        return EDGERNN_ERR_TOO_LONG;
    }
    if (!session_ready) {
        return EDGERNN_ERR_NOT_RESET;
    }

    edgernn_put_u32(p, steps_done);
    edgernn_put_u16(p + 4, (uint16_t)n_steps);
    p[6] = flags;
    at = 7;
    for (uint32_t i = 0; i < n_steps; ++i) {
        uint64_t start;
        uint64_t stop;
        edgernn_status_t status;
#if EDGERNN_HAL_TEAM_CYCLES
        const uint64_t team_start = edgernn_hal_team_cycles();
#endif

        const uint8_t *x_bytes = req + 3u + (size_t)i * IN_BYTES;
        const edgernn_in_t *x = x_step;

        if (X_IN_PLACE) {
            x = (const edgernn_in_t *)(const void *)x_bytes;
        } else {
            memcpy(x_step, x_bytes, IN_BYTES);
        }
        start = edgernn_hal_cycles();
        status = edgernn_step(x, y_step);
        stop = edgernn_hal_cycles();
        if (status != EDGERNN_OK) {
            *detail = (uint16_t)i;
            /* The steps before this one did run: the counter says so, and the error is cached. */
            steps_done += i;
            return EDGERNN_ERR_MODEL;
        }
        memcpy(p + at, y_step, OUT_BYTES);
        at += OUT_BYTES;
        edgernn_put_u32(p + at, (uint32_t)(stop - start));
        at += 4;
#if EDGERNN_HAL_TEAM_CYCLES
        if (flags & EDGERNN_STEP_TEAM_CYCLES) {
            edgernn_put_u32(p + at, (uint32_t)(edgernn_hal_team_cycles() - team_start));
            at += 4;
        }
#endif
        if (flags & EDGERNN_STEP_STATE_EVERY) {
            edgernn_get_state(state_buf);
            memcpy(p + at, state_buf, EDGERNN_STATE_BYTES);
            at += EDGERNN_STATE_BYTES;
        }
    }
    if (flags & EDGERNN_STEP_STATE_LAST) {
        edgernn_get_state(state_buf);
        memcpy(p + at, state_buf, EDGERNN_STATE_BYTES);
        at += EDGERNN_STATE_BYTES;
    }
    steps_done += n_steps;
    tx_len = edgernn_frame_seal(tx, EDGERNN_MSG_STEP | EDGERNN_MSG_REPLY, seq, at);
    return 0;
}

/* Returns 1 when the host said BYE. */
static int handle_frame(const uint8_t *frame, size_t len)
{
    uint8_t type = frame[1];
    uint16_t seq = edgernn_get_u16(frame + 2);
    const uint8_t *payload = frame + EDGERNN_LINK_HEADER;
    size_t payload_len = len - EDGERNN_LINK_MIN_FRAME;
    uint16_t detail = 0;
    uint8_t code;

    if (frame[0] != (uint8_t)EDGERNN_LINK_VERSION) {
        send_error(seq, EDGERNN_ERR_BAD_VERSION, frame[0]);
        return 0;
    }
    if (have_cache && seq == cached_seq && type == cached_type) {
        send_frame(tx, tx_len);
        return type == EDGERNN_MSG_BYE;
    }
    switch (type) {
    case EDGERNN_MSG_HELLO:
        answer_hello(seq);
        return 0;
    case EDGERNN_MSG_RESET:
        edgernn_reset();
        steps_done = 0;
        session_ready = 1;
        tx_len = edgernn_frame_seal(tx, EDGERNN_MSG_RESET | EDGERNN_MSG_REPLY, seq, 0);
        break;
    case EDGERNN_MSG_STEP:
        code = run_steps(seq, payload, payload_len, &detail);
        if (code != 0 && code != EDGERNN_ERR_MODEL) {
            /* Nothing ran: not worth caching, a corrected request may follow. */
            send_error(seq, code, detail);
            return 0;
        }
        if (code == EDGERNN_ERR_MODEL) {
            uint8_t *p = tx + EDGERNN_LINK_HEADER;
            p[0] = code;
            p[1] = (uint8_t)EDGERNN_LINK_VERSION;
            edgernn_put_u16(p + 2, detail);
            tx_len = edgernn_frame_seal(tx, EDGERNN_MSG_ERROR, seq, 4);
        }
        break;
    case EDGERNN_MSG_BYE:
        tx_len = edgernn_frame_seal(tx, EDGERNN_MSG_BYE | EDGERNN_MSG_REPLY, seq, 0);
        break;
    default:
        send_error(seq, EDGERNN_ERR_BAD_TYPE, type);
        return 0;
    }
    cached_seq = seq;
    cached_type = type;
    have_cache = 1;
    send_frame(tx, tx_len);
    return type == EDGERNN_MSG_BYE;
}

int edgernn_serve(void)
{
    static uint8_t chunk[64];

    edgernn_parser_init(&rx);
    for (;;) {
        int n = edgernn_hal_uart_read(chunk, (int)sizeof(chunk));
        if (n < 0) {
            return 1;
        }
        for (int i = 0; i < n; ++i) {
            edgernn_parse_result_t result = edgernn_parser_feed(&rx, chunk[i]);
            if (result == EDGERNN_PARSE_FRAME) {
                if (handle_frame(rx.frame, rx.len)) {
                    return 0;
                }
            } else if (result == EDGERNN_PARSE_BAD) {
                /* The sequence number of a corrupt frame cannot be trusted: NAK without one, and the
                 * host resends its outstanding request. */
                send_error(EDGERNN_LINK_NO_SEQ, rx.error, 0);
            }
        }
    }
}
