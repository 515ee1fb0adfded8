/* GAP8: CONV_2D over an arena in L2, fed to the cluster in bands by the cluster DMA (edgernn_conv_dma.c).
 * Copied into the firmware only when the build's placement put the arena in L2 and at least one team
 * convolution got a band plan (edgernn/backend/tiling.py). */
#ifndef EDGERNN_CONV_DMA_H
#define EDGERNN_CONV_DMA_H

#include <stdint.h>

#include "edgernn_kernels.h"

/* The L1 tiles of every banded convolution, taken once by edgernn_init (edgernn_team_fast_alloc):
 * EDGERNN_DMA_TILE_BYTES, the largest op's need. */
extern uint8_t *edgernn_dma_tiles;

/* One op's use of the tiles, computed by codegen (edgernn/backend/tiling.py, tile_layout) and printed in
 * model.c as a constant: the output rows of one band, then the byte offset in the tiles of each part, -1
 * for a part the op has not. The constants (w, bias, multiplier, shift) are present together, when the
 * plan copies them from L2 into the tiles for the op; the patch slots (scratch) are absent for a 1x1
 * stride-1 filter. Every part starts on 8 bytes. */
typedef struct {
    int32_t band_rows;
    int32_t w, bias, multiplier, shift;
    int32_t scratch;
    int32_t in[2], out[2];
    int32_t mid;   /* a CONV_2D fused with its MAX_POOL_2D: the convolution's rows of a band; -1 elsewhere */
} edgernn_dma_layout_t;

/* edgernn_team_conv_s8's arguments after two of the plan: the L1 tiles and the op's layout in them. */
void edgernn_dma_conv_s8(uint8_t *tiles, const edgernn_dma_layout_t *layout, const edgernn_conv_geom_t *g,
                         const int8_t *in, const int8_t *w, const int32_t *bias, const int32_t *multiplier,
                         const int32_t *shift, int32_t input_zero_point, int32_t output_offset, int32_t act_min,
                         int32_t act_max, int8_t *scratch, int8_t *out);
/* The same for edgernn_team_conv_s16. */
void edgernn_dma_conv_s16(uint8_t *tiles, const edgernn_dma_layout_t *layout, const edgernn_conv_geom_t *g,
                          const int16_t *in, const int8_t *w, const int64_t *bias, const int32_t *multiplier,
                          const int32_t *shift, int32_t act_min, int32_t act_max, int16_t *scratch, int16_t *out);
/* The same for edgernn_team_depthwise_conv_s8, edgernn_team_max_pool_s8 and edgernn_team_avg_pool_s8. */
void edgernn_dma_depthwise_conv_s8(uint8_t *tiles, const edgernn_dma_layout_t *layout, const edgernn_conv_geom_t *g,
                                   const int8_t *in, const int8_t *w, const int32_t *bias, const int32_t *multiplier,
                                   const int32_t *shift, int32_t input_zero_point, int32_t output_offset,
                                   int32_t act_min, int32_t act_max, int8_t *scratch, int8_t *out);
void edgernn_dma_max_pool_s8(uint8_t *tiles, const edgernn_dma_layout_t *layout, const edgernn_conv_geom_t *g,
                             const int8_t *in, int32_t act_min, int32_t act_max, int8_t *out);
/* The same for edgernn_team_conv_max_pool_s8: bands of the pool's output rows, the convolution's rows each band
 * reads computed into the tiles' part mid and pooled from there (band_rows, rows_at and scratch, the arena's
 * band, are for the call without tiles). */
void edgernn_dma_conv_max_pool_s8(uint8_t *tiles, const edgernn_dma_layout_t *layout, const edgernn_conv_geom_t *g,
                                  const int8_t *in, const int8_t *w, const int32_t *bias, const int32_t *multiplier,
                                  const int32_t *shift, int32_t input_zero_point, int32_t output_offset, int32_t act_min,
                                  int32_t act_max, const edgernn_conv_geom_t *pool, int32_t pool_min, int32_t pool_max,
                                  int32_t band_rows, int32_t rows_at, int8_t *scratch, int8_t *out);
/* edgernn_conv.c's MAX_POOL_2D of a fused pair's band on the team (four channels a word where it can). */
void edgernn_team_conv_pool_band_s8(const edgernn_conv_geom_t *g, const int8_t *in, int32_t act_min, int32_t act_max,
                                    int8_t *out);
/* edgernn_team_addsub_n_s8 over an arena in L2: chunks of layout->band_rows elements of both operands copied into
 * the tiles (in[0], in[1]), added there by the team into an output tile (out[0] or out[1]) that goes back to L2. */
void edgernn_dma_addsub_n_s8(uint8_t *tiles, const edgernn_dma_layout_t *layout, const edgernn_addsub_params_t *p,
                             int subtract, const int8_t *in1, const int8_t *in2, int n, int8_t *out);
void edgernn_dma_avg_pool_s8(uint8_t *tiles, const edgernn_dma_layout_t *layout, const edgernn_conv_geom_t *g,
                             const int8_t *in, int32_t act_min, int32_t act_max, int8_t *out);

#endif /* EDGERNN_CONV_DMA_H */
