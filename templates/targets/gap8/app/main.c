/* The deck application (`edgernn build MODEL --board ai_deck --app camera`): the AI-deck's camera feeds the
 * model, frame after frame, and each frame's outputs go to the Crazyflie's STM32 as CPX APP packets (and, built
 * with EDGERNN_APP_WIFI=1, the same packets to the WiFi host). docs/app.md says what it does and how to fly it;
 * docs/protocol.md, "The camera application's outputs", gives the message.
 *
 * Capture. The Himax HM01B0 (324 x 244, 8-bit gray) on the CPI, through PMSIS's Himax driver, the CPI's slicer keeping
 * the rows the model's window covers (EDGERNN_APP_ROWS x 324 bytes a frame buffer). The sensor is
 * triggered one frame at a time: PMU_AUTOSLEEP_FRAMECNT = 1 once, then MODE_SELECT = 3 ("stream N frames")
 * for each frame, after which the sensor returns to standby by itself. So every frame the sensor sends is one
 * this application captures, in order, however long the model takes. The very first frame comes from the
 * driver's START (CPI on, continuous streaming) followed at once by standby: the frame under way is sent whole.
 *
 * Overlap. With two frame buffers (EDGERNN_APP_FRAME_BUFFERS 2: when L2 has room), the capture of frame n+1 is
 * queued on the uDMA and triggered before frame n is preprocessed, so it overlaps the preprocessing, the model
 * and the sending. With one buffer, frame n is preprocessed first, then the next capture is queued, so it
 * overlaps the model and the sending only.
 *
 * Preprocessing (on the cluster, the window's rows split across its cores; its host twin is
 * edgernn.targets.camera, which gives the same bytes): the frame is reduced by an integer factor (each pixel the rounded mean of its factor x factor block),
 * a window of the model's input size is cut from it, and each mean goes through a table of 256 entries that
 * holds the model's quantized input for pixel * scale + offset (app_config.h, generated).
 *
 * Cycles (edgernn_hal_cycles: the FC's timer, in cluster cycles at the cluster's clock), for each frame, sent in
 * its message: "capture", the rest of the frame period (since the previous frame's step ended: sending its
 * outputs, then waiting for this frame's capture); the preprocessing; the model's step (the head with it).
 * The three add up to the period from frame to frame. */
#include "pmsis.h"
#include "bsp/camera/himax.h"

#include "hal.h"
#include "link_cpx.h"
#include "model.h"
#include "edgernn_team.h"
#include "app_config.h"

#define SENSOR_W 324
#define SENSOR_H 244
/* the rows of the frame the CPI keeps (its slicer, whole rows): the window's, EDGERNN_APP_ROWS from EDGERNN_APP_ORIGIN_Y */
#define FRAME_BYTES (SENSOR_W * EDGERNN_APP_ROWS)

/* the sensor's registers (Himax HM01B0 datasheet; gap_sdk rtos/pmsis/bsp/camera/himax/himax.h) */
#define HIMAX_MODE_SELECT 0x0100u
#define HIMAX_PMU_AUTOSLEEP_FRAMECNT 0x3020u
#define HIMAX_MODE_STANDBY 0x00u
#define HIMAX_MODE_STREAMING 0x01u
#define HIMAX_MODE_N_FRAMES 0x03u
#define HIMAX_I2C_ADDRESS 0x48u        /* 0x24, shifted: PMSIS takes the address with its R/W bit */

/* the message (docs/protocol.md): header, then the outputs; its constants (EDGERNN_APP_MSG_*) are app_config.h's,
 * rendered from edgernn/link/appmsg.py, the format's one definition. A packet to the STM32 carries at most 100 bytes
 * (Bitcraze's CPX_MAX_PAYLOAD_SIZE): 2 of header, 1 part index, EDGERNN_APP_MSG_PART_BYTES of message; the WiFi
 * host gets the very same packets */
#define MESSAGE_HEADER EDGERNN_APP_MSG_HEADER_BYTES
#define PART_DATA EDGERNN_APP_MSG_PART_BYTES

#if EDGERNN_HAS_HEAD
typedef edgernn_head_out_t app_out_t;
#define APP_OUTPUTS EDGERNN_HEAD_OUTPUT_SIZE
#else
typedef edgernn_out_t app_out_t;
#define APP_OUTPUTS EDGERNN_OUTPUT_SIZE
#endif

static struct pi_device camera;
static uint32_t frame_words[EDGERNN_APP_FRAME_BUFFERS][(FRAME_BYTES + 3) / 4];   /* the uDMA's, word-aligned */
static pi_task_t captured[EDGERNN_APP_FRAME_BUFFERS];
static edgernn_in_t x[EDGERNN_INPUT_SIZE];
static edgernn_out_t y[EDGERNN_OUTPUT_SIZE];
#if EDGERNN_HAS_HEAD
static edgernn_head_out_t y_head[EDGERNN_HEAD_OUTPUT_SIZE];
#endif
static uint8_t message[MESSAGE_HEADER + APP_OUTPUTS * sizeof(app_out_t)];
static uint8_t part[1 + PART_DATA];

static void put_u16(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put_u32(uint8_t *p, uint32_t v)
{
    put_u16(p, v);
    put_u16(p + 2, v >> 16);
}

/* The sensor's registers are written through a device of the application's own on the sensor's I2C bus: PMSIS's
 * Himax driver skips its I2C transfers when built for GVSOC (is_i2c_active), and the frame trigger must reach
 * the sensor on both. */
static struct pi_device sensor_i2c;
static uint8_t sensor_request[4];      /* register address (big-endian), value: the uDMA reads it from L2 */

static void sensor_write(uint32_t reg, uint8_t value)
{
    sensor_request[0] = (uint8_t)(reg >> 8);
    sensor_request[1] = (uint8_t)reg;
    sensor_request[2] = value;
    pi_i2c_write(&sensor_i2c, sensor_request, 3, PI_I2C_XFER_STOP);
}

static int open_camera(void)
{
    struct pi_himax_conf conf;
    struct pi_i2c_conf i2c_conf;

    pi_himax_conf_init(&conf);
    conf.format = PI_CAMERA_QVGA;
    /* the CPI's slicer keeps the window's rows only (whole rows: the slicer's columns count pairs of bytes) */
    conf.roi.slice_en = 1;
    conf.roi.x = 0;
    conf.roi.y = EDGERNN_APP_ORIGIN_Y;
    conf.roi.w = SENSOR_W;
    conf.roi.h = EDGERNN_APP_ROWS;
    pi_open_from_conf(&camera, &conf);
    if (pi_camera_open(&camera) != 0) {
        return -1;
    }
    pi_i2c_conf_init(&i2c_conf);
    i2c_conf.cs = HIMAX_I2C_ADDRESS;
    i2c_conf.itf = conf.i2c_itf;
    pi_open_from_conf(&sensor_i2c, &i2c_conf);
    if (pi_i2c_open(&sensor_i2c) != 0) {
        return -1;
    }
    sensor_write(HIMAX_PMU_AUTOSLEEP_FRAMECNT, 1);
    return 0;
}

static void capture(int buffer)
{
    pi_camera_capture_async(&camera, frame_words[buffer], FRAME_BYTES, pi_task_block(&captured[buffer]));
}

static void trigger_frame(void)
{
    sensor_write(HIMAX_MODE_SELECT, HIMAX_MODE_N_FRAMES);
}

/* The frame to the model's input, rows [begin, end) of it: the rounded mean of each factor x factor block, through
 * the table. The mean is (sum + area/2) * MEAN_MUL >> MEAN_SHIFT, which the generator proved equal to
 * (sum + area/2) / area for every sum a block can have. */
static void preprocess_rows(const void *args, int begin, int end)
{
    const uint8_t *frame = (const uint8_t *)args;
    const uint8_t *row = frame + (begin * EDGERNN_APP_FACTOR * SENSOR_W) + EDGERNN_APP_ORIGIN_X;
    edgernn_in_t *out = x + begin * EDGERNN_APP_IN_W;

    for (int oy = begin; oy < end; ++oy) {
        const uint8_t *p = row;
        for (int ox = 0; ox < EDGERNN_APP_IN_W; ++ox) {
#if EDGERNN_APP_FACTOR == 1
            *out++ = edgernn_app_table[*p++];
#else
            uint32_t sum = EDGERNN_APP_FACTOR * EDGERNN_APP_FACTOR / 2u;
            for (int i = 0; i < EDGERNN_APP_FACTOR; ++i) {
                const uint8_t *q = p + i * SENSOR_W;
                for (int j = 0; j < EDGERNN_APP_FACTOR; ++j) {
                    sum += q[j];
                }
            }
            *out++ = edgernn_app_table[(sum * EDGERNN_APP_MEAN_MUL) >> EDGERNN_APP_MEAN_SHIFT];
            p += EDGERNN_APP_FACTOR;
#endif
        }
        row += EDGERNN_APP_FACTOR * SENSOR_W;
    }
}

static void preprocess_body(void *frame)
{
    edgernn_team_split(preprocess_rows, frame, EDGERNN_APP_IN_H, 1);
}

/* On the team (GAP8's cluster), the window's rows split across its cores */
static void preprocess(const uint8_t *frame)
{
    edgernn_team_enter(preprocess_body, (void *)frame);
}

/* One frame's message, in parts, to each destination */
static void send_outputs(uint32_t frame, uint32_t wait, uint32_t pre, uint32_t model, int overlapped)
{
    static const unsigned destinations[] = {EDGERNN_CPX_STM32,
#if EDGERNN_APP_WIFI
                                            EDGERNN_CPX_WIFI_HOST,
#endif
    };
#if EDGERNN_HAS_HEAD
    const uint8_t *outputs = (const uint8_t *)y_head;
#else
    const uint8_t *outputs = (const uint8_t *)y;
#endif
    const int total = (int)sizeof message;

    message[EDGERNN_APP_MSG_AT_MAGIC] = EDGERNN_APP_MSG_MAGIC;
    message[EDGERNN_APP_MSG_AT_VERSION] = EDGERNN_APP_MSG_VERSION;
    message[EDGERNN_APP_MSG_AT_DTYPE] = EDGERNN_APP_OUT_DTYPE;
    message[EDGERNN_APP_MSG_AT_FLAGS] = overlapped ? EDGERNN_APP_MSG_FLAG_OVERLAP : 0u;
    put_u16(message + EDGERNN_APP_MSG_AT_N_OUTPUTS, APP_OUTPUTS);
    put_u16(message + EDGERNN_APP_MSG_AT_RESERVED, 0);
    put_u32(message + EDGERNN_APP_MSG_AT_FRAME, frame);
    put_u32(message + EDGERNN_APP_MSG_AT_CAPTURE_CYCLES, wait);
    put_u32(message + EDGERNN_APP_MSG_AT_PREPROCESS_CYCLES, pre);
    put_u32(message + EDGERNN_APP_MSG_AT_MODEL_CYCLES, model);
    for (int i = 0; i < (int)(APP_OUTPUTS * sizeof(app_out_t)); ++i) {
        message[MESSAGE_HEADER + i] = outputs[i];
    }
    for (unsigned d = 0; d < sizeof destinations / sizeof destinations[0]; ++d) {
        int at = 0;
        for (int index = 0; at < total; ++index) {
            const int n = total - at < PART_DATA ? total - at : PART_DATA;
            part[0] = (uint8_t)index;
            for (int i = 0; i < n; ++i) {
                part[1 + i] = message[at + i];
            }
            at += n;
            edgernn_cpx_send(destinations[d], EDGERNN_CPX_F_APP, at == total, part, 1 + n);
        }
    }
}

static void app_main(void)
{
    uint32_t frame = 0;
    int current = 0;
    uint64_t mark;

    edgernn_hal_init(0, (char **)0);
    if (edgernn_init() != EDGERNN_OK || open_camera() != 0) {
        edgernn_hal_exit(2);
        return;
    }
#if EDGERNN_APP_WAIT_HOST
    /* the emulated board waits for its host (edgernn validate) before the first frame, so that no output is
     * sent before anyone listens; the deck does not wait */
    while (!edgernn_cpx_host_connected()) {
        edgernn_cpx_poll();
    }
#endif
    /* the first frame: CPI on and streaming (the driver's START), then standby at once: the frame under way
     * is sent whole, into the capture queued before it */
    capture(0);
    pi_camera_control(&camera, PI_CAMERA_CMD_START, 0);
    sensor_write(HIMAX_MODE_SELECT, HIMAX_MODE_STREAMING);
    sensor_write(HIMAX_MODE_SELECT, HIMAX_MODE_STANDBY);
    mark = edgernn_hal_cycles();
    for (;;) {
        const int next = (current + 1) % EDGERNN_APP_FRAME_BUFFERS;
        uint64_t t1, t2, t3;

        pi_task_wait_on(&captured[current]);
        t1 = edgernn_hal_cycles();
#if EDGERNN_APP_FRAME_BUFFERS > 1
        capture(next);
        trigger_frame();
        preprocess((const uint8_t *)frame_words[current]);
        t2 = edgernn_hal_cycles();
#else
        preprocess((const uint8_t *)frame_words[current]);
        t2 = edgernn_hal_cycles();
        capture(next);
        trigger_frame();
#endif
        if (edgernn_step(x, y) != EDGERNN_OK) {
            edgernn_hal_exit(3);
            return;
        }
#if EDGERNN_HAS_HEAD
        if (edgernn_head((const edgernn_head_in_t *)y, y_head) != EDGERNN_OK) {
            edgernn_hal_exit(3);
            return;
        }
#endif
        t3 = edgernn_hal_cycles();
        /* capture: the rest of the frame period, since the previous frame's model ended (its outputs sent, then
         * the wait for this frame); so the three counts add up to the period from frame to frame */
        send_outputs(frame, (uint32_t)(t1 - mark), (uint32_t)(t2 - t1), (uint32_t)(t3 - t2), 1);
        mark = t3;
        ++frame;
        current = next;
    }
}

int main(void)
{
    return pmsis_kickoff((void *)app_main);
}
