/* GAP8: the team's CONV_2D (and int8 DEPTHWISE_CONV_2D, MAX_POOL_2D, AVERAGE_POOL_2D) when the arena is in
 * L2, fed by the cluster DMA.
 *
 * A cluster core loads from L2 in many cycles, from its L1 in one. So instead of the workers reading the
 * frame and writing the output in L2, the op runs in bands of output rows: the cluster's master core
 * copies the input rows a band needs (its halo included: k_h, stride, dilation and padding) from L2 into
 * an L1 tile, the team computes the band's output rows into an L1 output tile with the unchanged team
 * kernel (edgernn_team_conv_s8 / _s16 over the band's own geometry), and the master copies that tile back
 * to L2. Two input and two output tiles: the copy in of band b+1 and the copy out of band b-1 run while
 * band b computes. The filter and its per-channel constants, when the plan says so, are copied into L1
 * once per op; the patch slots of the team kernel live in L1 too.
 *
 * The band's geometry is the frame's with in_h the rows in the tile, out_h the band's rows and pad_top
 * moved by the rows the tile skips: every tap then reads the same input byte as over the whole frame, a
 * tap outside the frame still pads, and each output pixel is computed by the same code with the same
 * arithmetic. The bytes do not depend on the band size.
 *
 * The layout of the tiles is codegen's (edgernn/backend/tiling.py): each op gets its edgernn_dma_layout_t,
 * the byte offsets of its parts, and this file only turns them into pointers. */
#include <stddef.h>
#include <stdint.h>

#include "pmsis.h"

#include "edgernn_conv_dma.h"
#include "edgernn_team.h"

uint8_t *edgernn_dma_tiles;

/* The Makefile's cluster cores (edgernn_team.c's default). `make EDGERNN_CLUSTER_CORES=0` runs the step on
 * the fabric controller, which has no cluster DMA: the ops then read L2 directly. */
#ifndef EDGERNN_CLUSTER_CORES
#define EDGERNN_CLUSTER_CORES 8
#endif

/* edgernn_conv.c's EDGERNN_CONV_TEAM_SLOTS: a team larger than its patch slots takes the single-core
 * kernel, which needs a whole row of patches: that op keeps its L2 scratch and reads L2 directly. */
#define DMA_TEAM_SLOTS 8
/* A 1-D transfer of 32 KiB or more goes through PMSIS's software queue, served by the DMA's interrupt
 * handler; one below that is pushed to the DMA as it is. Larger copies are cut into such chunks (an L1
 * tile, at most 64 KiB, takes at most 3). */
#define DMA_CHUNK 32760u
#define DMA_CHUNKS 3
/* The DMA's addresses: 32-bit on GAP8. A host test's stand-in for pmsis.h (tests/backend/test_conv_dma.py)
 * defines it to pass the pointers as they are. */
#ifndef EDGERNN_DMA_ADDR
#define EDGERNN_DMA_ADDR(p) ((uint32_t)(uintptr_t)(p))
#endif

typedef struct {
    pi_cl_dma_cmd_t cmd[DMA_CHUNKS];
    int n;
} dma_job_t;

static void dma_start(dma_job_t *job, const uint8_t *ext, uint8_t *loc, size_t nbytes, pi_cl_dma_dir_e dir)
{
    job->n = 0;
    while (nbytes > 0 && job->n < DMA_CHUNKS) {
        const uint32_t len = nbytes < DMA_CHUNK ? (uint32_t)nbytes : DMA_CHUNK;
        pi_cl_dma_cmd(EDGERNN_DMA_ADDR(ext), EDGERNN_DMA_ADDR(loc), len, dir, &job->cmd[job->n++]);
        ext += len;
        loc += len;
        nbytes -= len;
    }
}

/* Each command waited once: the wait frees its transfer id. */
static void dma_wait(dma_job_t *job)
{
    int k;
    for (k = 0; k < job->n; ++k) {
        pi_cl_dma_cmd_wait(&job->cmd[k]);
    }
    job->n = 0;
}

typedef struct {
    uint8_t *w, *bias, *multiplier, *shift;   /* the op's constants in L1, when copied */
    uint8_t *scratch;                         /* the team kernel's patch slots; NULL for a 1x1 stride-1 filter */
    uint8_t *in[2], *out[2];
    uint8_t *mid;                             /* a fused CONV_2D + MAX_POOL_2D's convolution rows */
} tiles_t;

/* A part of the tiles at its offset, or NULL when the op has not that part. */
static uint8_t *tile_part(uint8_t *tiles, int32_t offset)
{
    return offset < 0 ? NULL : tiles + offset;
}

static void lay_tiles(uint8_t *p, const edgernn_dma_layout_t *layout, tiles_t *t)
{
    t->w = tile_part(p, layout->w);
    t->bias = tile_part(p, layout->bias);
    t->multiplier = tile_part(p, layout->multiplier);
    t->shift = tile_part(p, layout->shift);
    t->scratch = tile_part(p, layout->scratch);
    t->in[0] = tile_part(p, layout->in[0]);
    t->in[1] = tile_part(p, layout->in[1]);
    t->out[0] = tile_part(p, layout->out[0]);
    t->out[1] = tile_part(p, layout->out[1]);
    t->mid = tile_part(p, layout->mid);
}

/* One band's output rows computed from its input tile by the team kernel. */
typedef void (*band_fn)(const void *ctx, const edgernn_conv_geom_t *band, const uint8_t *in, uint8_t *scratch,
                        uint8_t *out);

/* The input rows [r0, r1) of the frame that output rows [oy0, oy1) read (none past its edges). */
static void band_rows_read(const edgernn_conv_geom_t *g, int32_t oy0, int32_t oy1, int32_t *r0, int32_t *r1)
{
    const int32_t first = oy0 * g->stride_h - g->pad_top;
    const int32_t end = (oy1 - 1) * g->stride_h - g->pad_top + (g->k_h - 1) * g->dil_h + 1;
    *r0 = first < 0 ? 0 : first;
    *r1 = end > g->in_h ? g->in_h : end;
    if (*r1 < *r0) {
        *r1 = *r0;
    }
}

/* The bands of the op, in order, double-buffered; on the cluster's master core. On return every output
 * row is in L2. */
static void run_bands(const edgernn_conv_geom_t *g, int32_t band_rows, size_t elem, const uint8_t *in, uint8_t *out,
                      const tiles_t *t, band_fn compute, const void *ctx)
{
    const size_t in_row = (size_t)g->in_w * g->in_c * elem, out_row = (size_t)g->out_w * g->out_c * elem;
    const int32_t n_bands = (g->out_h + band_rows - 1) / band_rows;
    dma_job_t in_job, out_job[2];
    int32_t b, r0, r1;
    out_job[0].n = out_job[1].n = 0;
    band_rows_read(g, 0, band_rows < g->out_h ? band_rows : g->out_h, &r0, &r1);
    dma_start(&in_job, in + (size_t)r0 * in_row, t->in[0],
              (size_t)(r1 - r0) * in_row, PI_CL_DMA_DIR_EXT2LOC);
    for (b = 0; b < n_bands; ++b) {
        const int32_t oy0 = b * band_rows, oy1 = oy0 + band_rows < g->out_h ? oy0 + band_rows : g->out_h;
        edgernn_conv_geom_t band = *g;
        band_rows_read(g, oy0, oy1, &r0, &r1);
        dma_wait(&in_job);
        if (b + 1 < n_bands) {
            const int32_t ny0 = oy1, ny1 = ny0 + band_rows < g->out_h ? ny0 + band_rows : g->out_h;
            int32_t n0, n1;
            band_rows_read(g, ny0, ny1, &n0, &n1);
            /* into the other tile: the band that read it (b - 1) has finished */
            dma_start(&in_job, in + (size_t)n0 * in_row, t->in[(b + 1) & 1],
                      (size_t)(n1 - n0) * in_row, PI_CL_DMA_DIR_EXT2LOC);
        }
        dma_wait(&out_job[b & 1]);   /* band b - 2's copy out of the tile band b now writes */
        band.in_h = r1 - r0;
        band.out_h = oy1 - oy0;
        band.pad_top = g->pad_top + r0 - oy0 * g->stride_h;
        compute(ctx, &band, t->in[b & 1], t->scratch, t->out[b & 1]);
        dma_start(&out_job[b & 1], out + (size_t)oy0 * out_row, t->out[b & 1],
                  (size_t)(oy1 - oy0) * out_row, PI_CL_DMA_DIR_LOC2EXT);
    }
    dma_wait(&out_job[0]);
    dma_wait(&out_job[1]);
}

/* One of the op's constants: its copy into L1 started (waited before the bands), or its L2 pointer kept. */
static const void *copy_const(dma_job_t *job, uint8_t *dst, const void *src, size_t nbytes)
{
    if (dst == NULL) {
        job->n = 0;
        return src;
    }
    dma_start(job, (const uint8_t *)src, dst, nbytes, PI_CL_DMA_DIR_EXT2LOC);
    return dst;
}

/* The copies of the filter, bias, multipliers and shifts. */
typedef struct {
    dma_job_t job[4];
} const_jobs_t;

static void wait_consts(const_jobs_t *c)
{
    int k;
    for (k = 0; k < 4; ++k) {
        dma_wait(&c->job[k]);
    }
}

typedef struct {
    const int8_t *w;
    const int32_t *bias, *multiplier, *shift;
    int32_t input_zero_point, output_offset, act_min, act_max;
} conv_s8_ctx_t;

/* An int8 convolution (or depthwise convolution) in bands: the filter (w_bytes), bias, multipliers and shifts
 * copied into L1 where the layout gives them a place, then the bands, each computed by compute. */
static void dma_conv_s8_bands(band_fn compute, uint8_t *tiles, const edgernn_dma_layout_t *layout,
                              const edgernn_conv_geom_t *g, size_t w_bytes, const int8_t *in, const int8_t *w,
                              const int32_t *bias, const int32_t *multiplier, const int32_t *shift,
                              int32_t input_zero_point, int32_t output_offset, int32_t act_min, int32_t act_max,
                              int8_t *out)
{
    const edgernn_conv_geom_t geom = *g;
    const size_t out_c = (size_t)geom.out_c;
    conv_s8_ctx_t c;
    const_jobs_t consts;
    tiles_t t;
    lay_tiles(tiles, layout, &t);
    c.w = (const int8_t *)copy_const(&consts.job[0], t.w, w, w_bytes);
    c.bias = (const int32_t *)copy_const(&consts.job[1], t.bias, bias, out_c * 4u);
    c.multiplier = (const int32_t *)copy_const(&consts.job[2], t.multiplier, multiplier, out_c * 4u);
    c.shift = (const int32_t *)copy_const(&consts.job[3], t.shift, shift, out_c * 4u);
    c.input_zero_point = input_zero_point;
    c.output_offset = output_offset;
    c.act_min = act_min;
    c.act_max = act_max;
    wait_consts(&consts);
    run_bands(&geom, layout->band_rows, 1u, (const uint8_t *)in, (uint8_t *)out, &t, compute, &c);
}

static void conv_s8_band(const void *ctx, const edgernn_conv_geom_t *band, const uint8_t *in, uint8_t *scratch,
                         uint8_t *out)
{
    const conv_s8_ctx_t *c = (const conv_s8_ctx_t *)ctx;
    edgernn_team_conv_s8(band, (const int8_t *)in, c->w, c->bias, c->multiplier, c->shift, c->input_zero_point,
                         c->output_offset, c->act_min, c->act_max, (int8_t *)scratch, (int8_t *)out);
}

void edgernn_dma_conv_s8(uint8_t *tiles, const edgernn_dma_layout_t *layout, const edgernn_conv_geom_t *g,
                         const int8_t *in, const int8_t *w, const int32_t *bias, const int32_t *multiplier,
                         const int32_t *shift, int32_t input_zero_point, int32_t output_offset, int32_t act_min,
                         int32_t act_max, int8_t *scratch, int8_t *out)
{
    if (EDGERNN_CLUSTER_CORES == 0 || tiles == NULL || layout->band_rows <= 0 || edgernn_team_workers() > DMA_TEAM_SLOTS) {
        edgernn_team_conv_s8(g, in, w, bias, multiplier, shift, input_zero_point, output_offset, act_min, act_max,
                             scratch, out);
        return;
    }
    dma_conv_s8_bands(conv_s8_band, tiles, layout, g, (size_t)g->out_c * g->k_h * g->k_w * g->in_c, in, w, bias,
                      multiplier, shift, input_zero_point, output_offset, act_min, act_max, out);
}

/* The int8 depthwise convolution and pools in bands, as CONV_2D: the band's geometry over its input tile,
 * the scratch (the depthwise planes or padded band) in the tiles. */
static void depthwise_s8_band(const void *ctx, const edgernn_conv_geom_t *band, const uint8_t *in, uint8_t *scratch,
                              uint8_t *out)
{
    const conv_s8_ctx_t *c = (const conv_s8_ctx_t *)ctx;
    edgernn_team_depthwise_conv_s8(band, (const int8_t *)in, c->w, c->bias, c->multiplier, c->shift,
                                   c->input_zero_point, c->output_offset, c->act_min, c->act_max, (int8_t *)scratch,
                                   (int8_t *)out);
}

void edgernn_dma_depthwise_conv_s8(uint8_t *tiles, const edgernn_dma_layout_t *layout, const edgernn_conv_geom_t *g,
                                   const int8_t *in, const int8_t *w, const int32_t *bias, const int32_t *multiplier,
                                   const int32_t *shift, int32_t input_zero_point, int32_t output_offset,
                                   int32_t act_min, int32_t act_max, int8_t *scratch, int8_t *out)
{
    if (EDGERNN_CLUSTER_CORES == 0 || tiles == NULL || layout->band_rows <= 0) {
        edgernn_team_depthwise_conv_s8(g, in, w, bias, multiplier, shift, input_zero_point, output_offset, act_min,
                                       act_max, scratch, out);
        return;
    }
    dma_conv_s8_bands(depthwise_s8_band, tiles, layout, g, (size_t)g->k_h * g->k_w * g->out_c, in, w, bias,
                      multiplier, shift, input_zero_point, output_offset, act_min, act_max, out);
}

typedef struct {
    void (*pool)(const edgernn_conv_geom_t *, const int8_t *, int32_t, int32_t, int8_t *);
    int32_t act_min, act_max;
} pool_s8_ctx_t;

static void pool_s8_band(const void *ctx, const edgernn_conv_geom_t *band, const uint8_t *in, uint8_t *scratch,
                         uint8_t *out)
{
    const pool_s8_ctx_t *c = (const pool_s8_ctx_t *)ctx;
    (void)scratch;
    c->pool(band, (const int8_t *)in, c->act_min, c->act_max, (int8_t *)out);
}

static void dma_pool_s8(void (*pool)(const edgernn_conv_geom_t *, const int8_t *, int32_t, int32_t, int8_t *),
                        uint8_t *tiles, const edgernn_dma_layout_t *layout, const edgernn_conv_geom_t *g,
                        const int8_t *in, int32_t act_min, int32_t act_max, int8_t *out)
{
    const edgernn_conv_geom_t geom = *g;
    pool_s8_ctx_t c;
    tiles_t t;
    if (EDGERNN_CLUSTER_CORES == 0 || tiles == NULL || layout->band_rows <= 0) {
        pool(g, in, act_min, act_max, out);
        return;
    }
    lay_tiles(tiles, layout, &t);
    c.pool = pool;
    c.act_min = act_min;
    c.act_max = act_max;
    run_bands(&geom, layout->band_rows, 1u, (const uint8_t *)in, (uint8_t *)out, &t, pool_s8_band, &c);
}

void edgernn_dma_max_pool_s8(uint8_t *tiles, const edgernn_dma_layout_t *layout, const edgernn_conv_geom_t *g,
                             const int8_t *in, int32_t act_min, int32_t act_max, int8_t *out)
{
    dma_pool_s8(edgernn_team_max_pool_s8, tiles, layout, g, in, act_min, act_max, out);
}

void edgernn_dma_avg_pool_s8(uint8_t *tiles, const edgernn_dma_layout_t *layout, const edgernn_conv_geom_t *g,
                             const int8_t *in, int32_t act_min, int32_t act_max, int8_t *out)
{
    dma_pool_s8(edgernn_team_avg_pool_s8, tiles, layout, g, in, act_min, act_max, out);
}

typedef struct {
    const int8_t *w;
    const int64_t *bias;
    const int32_t *multiplier, *shift;
    int32_t act_min, act_max;
} conv_s16_ctx_t;

static void conv_s16_band(const void *ctx, const edgernn_conv_geom_t *band, const uint8_t *in, uint8_t *scratch,
                          uint8_t *out)
{
    const conv_s16_ctx_t *c = (const conv_s16_ctx_t *)ctx;
    edgernn_team_conv_s16(band, (const int16_t *)(const void *)in, c->w, c->bias, c->multiplier, c->shift, c->act_min,
                          c->act_max, (int16_t *)(void *)scratch, (int16_t *)(void *)out);
}

void edgernn_dma_conv_s16(uint8_t *tiles, const edgernn_dma_layout_t *layout, const edgernn_conv_geom_t *g,
                          const int16_t *in, const int8_t *w, const int64_t *bias, const int32_t *multiplier,
                          const int32_t *shift, int32_t act_min, int32_t act_max, int16_t *scratch, int16_t *out)
{
    const edgernn_conv_geom_t geom = *g;
    const size_t out_c = (size_t)geom.out_c, n_in = (size_t)geom.k_h * geom.k_w * geom.in_c;
    conv_s16_ctx_t c;
    const_jobs_t consts;
    tiles_t t;
    if (EDGERNN_CLUSTER_CORES == 0 || tiles == NULL || layout->band_rows <= 0 || edgernn_team_workers() > DMA_TEAM_SLOTS) {
        edgernn_team_conv_s16(g, in, w, bias, multiplier, shift, act_min, act_max, scratch, out);
        return;
    }
    lay_tiles(tiles, layout, &t);
    c.w = (const int8_t *)copy_const(&consts.job[0], t.w, w, out_c * n_in);
    c.bias = (const int64_t *)copy_const(&consts.job[1], t.bias, bias, out_c * 8u);
    c.multiplier = (const int32_t *)copy_const(&consts.job[2], t.multiplier, multiplier, out_c * 4u);
    c.shift = (const int32_t *)copy_const(&consts.job[3], t.shift, shift, out_c * 4u);
    c.act_min = act_min;
    c.act_max = act_max;
    wait_consts(&consts);
    run_bands(&geom, layout->band_rows, 2u, (const uint8_t *)(const void *)in, (uint8_t *)(void *)out, &t,
              conv_s16_band, &c);
}

/* The fused CONV_2D + MAX_POOL_2D (edgernn_conv.c's edgernn_team_conv_max_pool_s8) in bands of the pool's output
 * rows: the input rows a band's convolution rows read come into an input tile, the team computes those rows
 * into mid and pools them into an output tile, which goes back to L2. The convolution's output is never in L2.
 * The rows two bands share stay in mid for the next band, not computed twice. Double-buffered as run_bands. The band geometries are the pair's own over the frame with pad_top moved, as
 * edgernn_conv.c's conv_pool_band, so the bytes are the unfused pair's. */
static void conv_pool_band(const edgernn_conv_geom_t *conv, const edgernn_conv_geom_t *pool, int32_t p0, int32_t p1,
                           edgernn_conv_geom_t *conv_band, edgernn_conv_geom_t *pool_band, int32_t *i0, int32_t *i1)
{
    int32_t c0, c1;
    band_rows_read(pool, p0, p1, &c0, &c1);
    band_rows_read(conv, c0, c1, i0, i1);
    *conv_band = *conv;
    conv_band->in_h = *i1 - *i0;
    conv_band->out_h = c1 - c0;
    conv_band->pad_top = conv->pad_top + *i0 - c0 * conv->stride_h;
    *pool_band = *pool;
    pool_band->in_h = c1 - c0;
    pool_band->out_h = p1 - p0;
    pool_band->pad_top = pool->pad_top + c0 - p0 * pool->stride_h;
}

/* n bytes from src down to dst < src (the ranges may overlap), forward: words where both ends and n allow (the SDK
 * has no memmove). */
static void shift_down(uint8_t *dst, const uint8_t *src, size_t n)
{
    size_t k;
    if ((((uintptr_t)dst | (uintptr_t)src | n) & 3u) == 0) {
        uint32_t *d = (uint32_t *)(void *)dst;
        const uint32_t *s_ = (const uint32_t *)(const void *)src;
        for (k = 0; k < n / 4u; ++k) {
            d[k] = s_[k];
        }
        return;
    }
    for (k = 0; k < n; ++k) {
        dst[k] = src[k];
    }
}

void edgernn_dma_conv_max_pool_s8(uint8_t *tiles, const edgernn_dma_layout_t *layout, const edgernn_conv_geom_t *g,
                                  const int8_t *in, const int8_t *w, const int32_t *bias, const int32_t *multiplier,
                                  const int32_t *shift, int32_t input_zero_point, int32_t output_offset, int32_t act_min,
                                  int32_t act_max, const edgernn_conv_geom_t *pool, int32_t pool_min, int32_t pool_max,
                                  int32_t band_rows, int32_t rows_at, int8_t *scratch, int8_t *out)
{
    const edgernn_conv_geom_t conv = *g, pg = *pool;
    const size_t in_row = (size_t)conv.in_w * conv.in_c, out_row = (size_t)pg.out_w * pg.out_c;
    const size_t out_c = (size_t)conv.out_c, mid_row = (size_t)conv.out_w * conv.out_c;
    int32_t rows, n_bands, b, i0, i1, prev_c0 = 0, prev_c1 = 0;
    dma_job_t in_job, out_job[2];
    conv_s8_ctx_t c;
    const_jobs_t consts;
    tiles_t t;
    if (EDGERNN_CLUSTER_CORES == 0 || tiles == NULL || layout->band_rows <= 0 || layout->mid < 0
        || edgernn_team_workers() > DMA_TEAM_SLOTS) {
        edgernn_team_conv_max_pool_s8(g, in, w, bias, multiplier, shift, input_zero_point, output_offset, act_min,
                                      act_max, pool, pool_min, pool_max, band_rows, rows_at, scratch, out);
        return;
    }
    lay_tiles(tiles, layout, &t);
    c.w = (const int8_t *)copy_const(&consts.job[0], t.w, w, out_c * conv.k_h * conv.k_w * conv.in_c);
    c.bias = (const int32_t *)copy_const(&consts.job[1], t.bias, bias, out_c * 4u);
    c.multiplier = (const int32_t *)copy_const(&consts.job[2], t.multiplier, multiplier, out_c * 4u);
    c.shift = (const int32_t *)copy_const(&consts.job[3], t.shift, shift, out_c * 4u);
    rows = layout->band_rows;
    n_bands = (pg.out_h + rows - 1) / rows;
    out_job[0].n = out_job[1].n = 0;
    {
        edgernn_conv_geom_t cb, pb;
        conv_pool_band(&conv, &pg, 0, rows < pg.out_h ? rows : pg.out_h, &cb, &pb, &i0, &i1);
        dma_start(&in_job, (const uint8_t *)in + (size_t)i0 * in_row, t.in[0], (size_t)(i1 - i0) * in_row,
                  PI_CL_DMA_DIR_EXT2LOC);
    }
    wait_consts(&consts);
    for (b = 0; b < n_bands; ++b) {
        const int32_t p0 = b * rows, p1 = p0 + rows < pg.out_h ? p0 + rows : pg.out_h;
        edgernn_conv_geom_t cb, pb;
        conv_pool_band(&conv, &pg, p0, p1, &cb, &pb, &i0, &i1);
        dma_wait(&in_job);
        if (b + 1 < n_bands) {
            const int32_t q1 = p1 + rows < pg.out_h ? p1 + rows : pg.out_h;
            edgernn_conv_geom_t nc, np;
            int32_t n0, n1;
            conv_pool_band(&conv, &pg, p1, q1, &nc, &np, &n0, &n1);
            dma_start(&in_job, (const uint8_t *)in + (size_t)n0 * in_row, t.in[(b + 1) & 1],
                      (size_t)(n1 - n0) * in_row, PI_CL_DMA_DIR_EXT2LOC);
        }
        dma_wait(&out_job[b & 1]);
        {
            /* the convolution rows this band shares with the one before (the pool's halo) are in mid already:
             * moved to its start, and only the rows after them computed, from their own input rows of the tile */
            int32_t c0, c1, keep = 0;
            band_rows_read(&pg, p0, p1, &c0, &c1);
            if (b > 0 && prev_c1 > c0) {
                keep = prev_c1 - c0;
                shift_down(t.mid, t.mid + (size_t)(c0 - prev_c0) * mid_row, (size_t)keep * mid_row);
            }
            if (keep > 0) {
                int32_t j0, j1;
                band_rows_read(&conv, c0 + keep, c1, &j0, &j1);
                cb.in_h = j1 - j0;
                cb.out_h = c1 - c0 - keep;
                cb.pad_top = conv.pad_top + j0 - (c0 + keep) * conv.stride_h;
                edgernn_team_conv_s8(&cb, (const int8_t *)t.in[b & 1] + (size_t)(j0 - i0) * in_row, c.w, c.bias,
                                     c.multiplier, c.shift, input_zero_point, output_offset, act_min, act_max,
                                     (int8_t *)t.scratch, (int8_t *)t.mid + (size_t)keep * mid_row);
            } else {
                edgernn_team_conv_s8(&cb, (const int8_t *)t.in[b & 1], c.w, c.bias, c.multiplier, c.shift,
                                     input_zero_point, output_offset, act_min, act_max, (int8_t *)t.scratch,
                                     (int8_t *)t.mid);
            }
            prev_c0 = c0;
            prev_c1 = c1;
        }
        edgernn_team_conv_pool_band_s8(&pb, (const int8_t *)t.mid, pool_min, pool_max, (int8_t *)t.out[b & 1]);
        dma_start(&out_job[b & 1], (uint8_t *)out + (size_t)p0 * out_row, t.out[b & 1], (size_t)(p1 - p0) * out_row,
                  PI_CL_DMA_DIR_LOC2EXT);
    }
    dma_wait(&out_job[0]);
    dma_wait(&out_job[1]);
}

/* The int8 ADD (SUB) in chunks through the tiles: both operands' chunk copied in, the team's kernel over it in L1
 * (each element the same arithmetic as over L2), the output's chunk copied back while the next one is added.
 * The arena plan gives the output bytes of its own, apart from both operands (their lives meet at this op). */
void edgernn_dma_addsub_n_s8(uint8_t *tiles, const edgernn_dma_layout_t *layout, const edgernn_addsub_params_t *p,
                             int subtract, const int8_t *in1, const int8_t *in2, int n, int8_t *out)
{
    const int32_t chunk = layout->band_rows;
    dma_job_t a_job, b_job, out_job[2];
    tiles_t t;
    int32_t i0, k;
    if (EDGERNN_CLUSTER_CORES == 0 || tiles == NULL || chunk <= 0) {
        edgernn_team_addsub_n_s8(p, subtract, in1, in2, n, out);
        return;
    }
    lay_tiles(tiles, layout, &t);
    out_job[0].n = out_job[1].n = 0;
    for (i0 = 0, k = 0; i0 < n; i0 += chunk, ++k) {
        const int32_t len = n - i0 < chunk ? n - i0 : chunk;
        dma_start(&a_job, (const uint8_t *)in1 + i0, t.in[0], (size_t)len, PI_CL_DMA_DIR_EXT2LOC);
        dma_start(&b_job, (const uint8_t *)in2 + i0, t.in[1], (size_t)len, PI_CL_DMA_DIR_EXT2LOC);
        dma_wait(&a_job);
        dma_wait(&b_job);
        dma_wait(&out_job[k & 1]);
        edgernn_team_addsub_n_s8(p, subtract, (const int8_t *)t.in[0], (const int8_t *)t.in[1], len,
                                 (int8_t *)t.out[k & 1]);
        dma_start(&out_job[k & 1], (uint8_t *)out + i0, t.out[k & 1], (size_t)len, PI_CL_DMA_DIR_LOC2EXT);
    }
    dma_wait(&out_job[0]);
    dma_wait(&out_job[1]);
}
