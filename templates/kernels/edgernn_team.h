/* The team: the cores a step may use, and the heavy kernels split across them by output range.
 *
 * A team kernel takes exactly the arguments of its kernel in edgernn_kernels.h. It cuts the output
 * range into one contiguous sub-range per worker and calls the unchanged kernel on each, with offset
 * pointers and a smaller count, so every output element is computed by the same code with the same
 * arithmetic as in a single-core build: the bytes do not depend on the number of workers. The fused
 * LSTM splits once per time step: its units, through the step of a range of units that the
 * single-core kernel also runs (over all units), then the caller alone publishes the new hidden state.
 *
 * Implementations (one is linked, chosen by the board file, [parallel] team):
 *   hal/posix/edgernn_team.c    serial; with -DEDGERNN_THREADS=N (N > 1) a POSIX thread team
 *   hal/ai_deck/edgernn_team.c  GAP8: the step runs on the cluster, pi_cl_team_fork over its cores
 *
 * The team kernel prototypes below are generated from edgernn/backend/kernels.py.
 */
#ifndef EDGERNN_TEAM_H
#define EDGERNN_TEAM_H

#include <stddef.h>
#include <stdint.h>

#include "edgernn_kernels.h"

/* The work of one worker: the elements [begin, end) of the output range. */
typedef void (*edgernn_range_fn)(const void *args, int begin, int end);

/* Set the team up (threads, cluster); 0 on success. Safe to call more than once. */
int edgernn_team_open(void);
/* nbytes of memory next to the team's cores (cluster L1 on GAP8), 8-byte aligned, or NULL where
 * there is none or not enough. Call after edgernn_team_open. */
void *edgernn_team_fast_alloc(size_t nbytes);
/* Run body(arg) where the team works (on GAP8: the cluster's master core) and return when it is done. */
void edgernn_team_enter(void (*body)(void *), void *arg);
/* Call fn on disjoint sub-ranges that cover [0, count), one per worker, all of them finished on return.
 * Sub-ranges begin at multiples of grain. Call only from inside edgernn_team_enter's body. */
void edgernn_team_split(edgernn_range_fn fn, const void *args, int count, int grain);
/* How many workers edgernn_team_split uses. */
int edgernn_team_workers(void);
/* 1 when edgernn_team_enter runs its body on other cores than the caller's (GAP8's cluster). */
int edgernn_team_offloaded(void);

/* Worker k of n: its sub-range of [0, count), in whole units of grain elements (the last may be shorter). */
static inline void edgernn_team_range(int k, int n, int count, int grain, int *begin, int *end)
{
    const int units = (count + grain - 1) / grain;
    const int first = (int)((int64_t)units * k / n);
    const int last = (int)((int64_t)units * (k + 1) / n);
    *begin = first * grain < count ? first * grain : count;
    *end = last * grain < count ? last * grain : count;
}

/* ---- team kernels: the arguments of the kernels of the same name in edgernn_kernels.h ---- */
/* FULLY_CONNECTED splits its output features when there is one row (the step models' case),
 * else its rows; feature sub-ranges start at multiples of 4, the row block of the int8 kernel. */
void edgernn_team_fully_connected_f32(const float *in, const float *w, const float *bias, float act_min,
                                      float act_max, int rows, int n_in, int n_out, float *out);
void edgernn_team_fully_connected_s8(const int8_t *in, const int8_t *w, const int32_t *bias,
                                     const int32_t *multiplier, const int32_t *shift, int rounding,
                                     int32_t output_offset, int32_t act_min, int32_t act_max, int rows,
                                     int n_in, int n_out, int8_t *out);
void edgernn_team_fully_connected_s16(const int16_t *in, const int8_t *w, const int64_t *bias,
                                      const int32_t *multiplier, const int32_t *shift, int32_t output_offset,
                                      int32_t act_min, int32_t act_max, int rows, int n_in, int n_out,
                                      int16_t *out);
/* Binary element-wise ops whose broadcast is one-dimensional (dims[0..2] == 1); the schedule only
 * uses them there. */
void edgernn_team_add_f32(const edgernn_bcast_t *b, const float *in1, const float *in2, float act_min,
                          float act_max, float *out);
void edgernn_team_sub_f32(const edgernn_bcast_t *b, const float *in1, const float *in2, float act_min,
                          float act_max, float *out);
void edgernn_team_mul_f32(const edgernn_bcast_t *b, const float *in1, const float *in2, float act_min,
                          float act_max, float *out);
void edgernn_team_addsub_s8(const edgernn_bcast_t *b, const edgernn_addsub_params_t *p, int subtract,
                            const int8_t *in1, const int8_t *in2, int8_t *out);
void edgernn_team_addsub_s16(const edgernn_bcast_t *b, const edgernn_addsub_params_t *p, int subtract,
                             const int16_t *in1, const int16_t *in2, int16_t *out);
void edgernn_team_mul_s8(const edgernn_bcast_t *b, const edgernn_mul_params_t *p, const int8_t *in1,
                         const int8_t *in2, int8_t *out);
void edgernn_team_mul_s16(const edgernn_bcast_t *b, const edgernn_mul_params_t *p, const int16_t *in1,
                          const int16_t *in2, int16_t *out);
/* The same without broadcasting, over n elements. */
void edgernn_team_addsub_n_s8(const edgernn_addsub_params_t *p, int subtract, const int8_t *in1,
                              const int8_t *in2, int n, int8_t *out);
void edgernn_team_addsub_n_s16(const edgernn_addsub_params_t *p, int subtract, const int16_t *in1,
                               const int16_t *in2, int n, int16_t *out);
void edgernn_team_addsub_const_s8(const edgernn_addsub_params_t *p, int negate, const int8_t *in,
                                  const int32_t *k, int n, int8_t *out);
void edgernn_team_addsub_const_s16(const edgernn_addsub_params_t *p, int negate, const int16_t *in,
                                   const int32_t *k, int n, int16_t *out);
void edgernn_team_mul_n_s8(const edgernn_mul_params_t *p, const int8_t *in1, const int8_t *in2, int n,
                           int8_t *out);
void edgernn_team_mul_n_s16(const edgernn_mul_params_t *p, const int16_t *in1, const int16_t *in2, int n,
                            int16_t *out);
/* Unary element-wise ops over n elements. */
void edgernn_team_unary_f32(edgernn_unary_t op, const float *in, int n, float *out);
void edgernn_team_lut_s8(const int8_t *table, const int8_t *in, int n, int8_t *out);
void edgernn_team_logistic_s16(int32_t input_multiplier, int32_t input_left_shift, const int16_t *in, int n,
                               int16_t *out);
void edgernn_team_tanh_s16(int32_t input_multiplier, int32_t input_left_shift, const int16_t *in, int n,
                           int16_t *out);
/* UNIDIRECTIONAL_SEQUENCE_LSTM: every time step splits its units. Defined in edgernn_lstm.c, which
 * firmware holds only when its schedule has an LSTM. */
void edgernn_team_lstm_s8(const edgernn_lstm_s8_params_t *p, const int8_t *w_in, const int8_t *w_rec,
                          const int32_t *bias_in, const int32_t *bias_rec, int steps, const int8_t *x,
                          int8_t *h, int16_t *c, int8_t *y, int16_t *scratch);
void edgernn_team_lstm_f32(const edgernn_lstm_f32_params_t *p, const float *w_in, const float *w_rec,
                           const float *bias, int steps, const float *x, float *h, float *c, float *y,
                           float *scratch);

#endif /* EDGERNN_TEAM_H */
