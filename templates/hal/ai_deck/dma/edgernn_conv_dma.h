/* GAP8: CONV_2D over an arena in L2, fed to the cluster in bands by the cluster DMA (edgernn_conv_dma.c).
 * Copied into the firmware only when the build's placement put the arena in L2 and at least one team
 * convolution got a band plan (edgernn/backend/tiling.py). */
#ifndef EDGERNN_CONV_DMA_H
#define EDGERNN_CONV_DMA_H

#include <stdint.h>

#include "edgernn_kernels.h"

/* The L1 tiles of every banded convolution, taken once by edgernn_init (edgernn_team_fast_alloc):
 * EDGERNN_DMA_TILE_BYTES, the largest op's need, computed by codegen as edgernn_conv_dma.c lays it out. */
extern uint8_t *edgernn_dma_tiles;

/* edgernn_team_conv_s8's arguments after three of the plan: the L1 tiles, the output rows of one band,
 * and 1 when the filter and its per-channel constants are copied from L2 into the tiles for the op. */
void edgernn_dma_conv_s8(uint8_t *tiles, int band_rows, int copy_weights, const edgernn_conv_geom_t *g,
                         const int8_t *in, const int8_t *w, const int32_t *bias, const int32_t *multiplier,
                         const int32_t *shift, int32_t input_zero_point, int32_t output_offset, int32_t act_min,
                         int32_t act_max, int8_t *scratch, int8_t *out);
/* The same for edgernn_team_conv_s16. */
void edgernn_dma_conv_s16(uint8_t *tiles, int band_rows, int copy_weights, const edgernn_conv_geom_t *g,
                          const int16_t *in, const int8_t *w, const int64_t *bias, const int32_t *multiplier,
                          const int32_t *shift, int32_t act_min, int32_t act_max, int16_t *scratch, int16_t *out);

#endif /* EDGERNN_CONV_DMA_H */
