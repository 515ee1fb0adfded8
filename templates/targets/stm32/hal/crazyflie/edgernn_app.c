/* The Crazyflie app around the generated model (edgernn, board crazyflie).
 *
 * appMain runs in the firmware's app task (app-config: CONFIG_APP_ENABLE). Every 1/rateHz seconds it reads
 * the model's inputs through the input hook (edgernn_app_read_inputs: the log variables that
 * edgernn_app_config.h names, unless the user defines the hook), quantizes them, runs edgernn_step, and
 * publishes the outputs in the log group "edgernn": y0, y1, ... (float, in the model's output units), with
 * steps, stepUs (the step's time) and misses (periods the step ran late). The model's state carries over
 * from step to step; the parameter edgernn.reset starts it from zero again, edgernn.rateHz sets the rate.
 *
 * The model, its kernels and the validation server are compiled with qemu_stm32f405's flags (Kbuild), so
 * the step's code is the code that board validates; this file and hal.c take the firmware's own flags. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "FreeRTOS.h"
#include "app.h"
#include "log.h"
#include "param.h"
#include "task.h"
#include "usec_time.h"

#define DEBUG_MODULE "EDGERNN"
#include "debug.h"

#include "edgernn_app_config.h"
#include "model.h"
#include "hal.h"
#include "server.h"

void edgernn_app_read_inputs(float *x, int n);

static float x_in[EDGERNN_INPUT_SIZE];
static float y_out[EDGERNN_OUTPUT_SIZE];
static edgernn_in_t x_step[EDGERNN_INPUT_SIZE];
static edgernn_out_t y_step[EDGERNN_OUTPUT_SIZE];
static uint16_t rate_hz = EDGERNN_APP_RATE_HZ;
static uint8_t reset_request;
static uint32_t steps;
static uint32_t step_us;
static uint32_t misses;

static edgernn_in_t quantize_input(float v)
{
#ifdef EDGERNN_INPUT_SCALE
    float q = v / (float)EDGERNN_INPUT_SCALE + (float)EDGERNN_INPUT_ZERO_POINT;
    const float lo = sizeof(edgernn_in_t) == 1 ? -128.0f : -32768.0f;
    const float hi = sizeof(edgernn_in_t) == 1 ? 127.0f : 32767.0f;
    q = q < lo ? lo : (q > hi ? hi : q);
    /* round half away from zero, as TFLite's QUANTIZE */
    return (edgernn_in_t)(q >= 0.0f ? (int32_t)(q + 0.5f) : -(int32_t)(-q + 0.5f));
#else
    return (edgernn_in_t)v;
#endif
}

static float dequantize_output(edgernn_out_t v)
{
#ifdef EDGERNN_OUTPUT_SCALE
    return (float)EDGERNN_OUTPUT_SCALE * (float)((int32_t)v - EDGERNN_OUTPUT_ZERO_POINT);
#else
    return (float)v;
#endif
}

/* The default input hook: the log variables named in edgernn_app_config.h, resolved once. */
__attribute__((weak)) void edgernn_app_read_inputs(float *x, int n)
{
    static const char *const names[] = EDGERNN_APP_INPUT_LOGS;
    static logVarId_t ids[EDGERNN_INPUT_SIZE];
    static bool valid[EDGERNN_INPUT_SIZE];
    static bool resolved;
    const int named = (int)(sizeof(names) / sizeof(names[0]));

    if (!resolved) {
        for (int i = 0; i < n && i < named; ++i) {
            char group[32];
            const char *dot = strchr(names[i], '.');
            size_t len = dot != NULL ? (size_t)(dot - names[i]) : 0u;
            if (dot == NULL || len >= sizeof(group)) {
                DEBUG_PRINT("input %d: '%s' is not group.name\n", i, names[i]);
                continue;
            }
            memcpy(group, names[i], len);
            group[len] = '\0';
            ids[i] = logGetVarId(group, dot + 1);
            valid[i] = logVarIdIsValid(ids[i]);
            if (!valid[i]) {
                DEBUG_PRINT("input %d: no log variable %s\n", i, names[i]);
            }
        }
        resolved = true;
    }
    for (int i = 0; i < n; ++i) {
        x[i] = valid[i] ? logGetFloat(ids[i]) : 0.0f;
    }
}

static void step_once(void)
{
    if (reset_request) {
        edgernn_reset();
        reset_request = 0;
    }
    edgernn_app_read_inputs(x_in, EDGERNN_INPUT_SIZE);
    for (int i = 0; i < EDGERNN_INPUT_SIZE; ++i) {
        x_step[i] = quantize_input(x_in[i]);
    }
    const uint64_t start = usecTimestamp();
    if (edgernn_step(x_step, y_step) != EDGERNN_OK) {
        DEBUG_PRINT("step failed\n");
        return;
    }
    step_us = (uint32_t)(usecTimestamp() - start);
    for (int i = 0; i < EDGERNN_OUTPUT_SIZE; ++i) {
        y_out[i] = dequantize_output(y_step[i]);
    }
    ++steps;
}

void appMain(void)
{
    if (edgernn_init() != EDGERNN_OK) {
        DEBUG_PRINT("model init failed\n");
        for (;;) {
            vTaskDelay(M2T(1000));
        }
    }
#if EDGERNN_APP_SERVE
    DEBUG_PRINT("validation server on UART1\n");
    edgernn_hal_init(0, 0);
    for (;;) {
        edgernn_serve();
    }
#else
    DEBUG_PRINT("model " EDGERNN_MODEL_SHA256 " stepping\n");
    TickType_t last = xTaskGetTickCount();
    for (;;) {
        const uint16_t rate = rate_hz < 1u ? 1u : (rate_hz > 1000u ? 1000u : rate_hz);
        const TickType_t period = M2T(1000u / rate) > 0 ? M2T(1000u / rate) : 1;
        if (xTaskGetTickCount() - last > period) {
            ++misses;
            last = xTaskGetTickCount();
        }
        vTaskDelayUntil(&last, period);
        step_once();
    }
#endif
}

PARAM_GROUP_START(edgernn)
PARAM_ADD(PARAM_UINT16, rateHz, &rate_hz)
PARAM_ADD(PARAM_UINT8, reset, &reset_request)
PARAM_GROUP_STOP(edgernn)

/* One log variable an output, for the first 8 outputs (a log block carries 26 bytes: 6 floats). */
LOG_GROUP_START(edgernn)
LOG_ADD(LOG_UINT32, steps, &steps)
LOG_ADD(LOG_UINT32, stepUs, &step_us)
LOG_ADD(LOG_UINT32, misses, &misses)
#if EDGERNN_OUTPUT_SIZE > 0
LOG_ADD(LOG_FLOAT, y0, &y_out[0])
#endif
#if EDGERNN_OUTPUT_SIZE > 1
LOG_ADD(LOG_FLOAT, y1, &y_out[1])
#endif
#if EDGERNN_OUTPUT_SIZE > 2
LOG_ADD(LOG_FLOAT, y2, &y_out[2])
#endif
#if EDGERNN_OUTPUT_SIZE > 3
LOG_ADD(LOG_FLOAT, y3, &y_out[3])
#endif
#if EDGERNN_OUTPUT_SIZE > 4
LOG_ADD(LOG_FLOAT, y4, &y_out[4])
#endif
#if EDGERNN_OUTPUT_SIZE > 5
LOG_ADD(LOG_FLOAT, y5, &y_out[5])
#endif
#if EDGERNN_OUTPUT_SIZE > 6
LOG_ADD(LOG_FLOAT, y6, &y_out[6])
#endif
#if EDGERNN_OUTPUT_SIZE > 7
LOG_ADD(LOG_FLOAT, y7, &y_out[7])
#endif
LOG_GROUP_STOP(edgernn)
