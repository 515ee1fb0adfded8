/* The int8 matrix-vector kernel alone on GAP8 (bench/bench_matvec_gap8.py builds and runs it in GVSOC):
 * N_OUT x N_IN int8 weights in edgernn_dot.h's blocked layout, the input, the sums and the outputs in
 * cluster L1, split by rows over the cluster's cores (edgernn_team_split, grain 8), timed on the
 * cluster master's PULP counter (edgernn_team_cluster_cycles: the task, its forks included).
 *
 * L1 (64 KiB) cannot hold 256 x 256 bytes beside the cores' stacks, so HELD_ROWS rows are held and row r
 * reads the weights of row r mod HELD_ROWS: each load is an L1 load, as with the whole matrix there, and
 * the cycles are those of N_OUT x N_IN MACs. The weights and input come from one generator that the
 * bench repeats in Python, which checks every int32 sum (sum of the sums and of their squares).
 *
 * Two kernels are timed: "dot", the blocked dot products to int32 (edgernn_dot8_s8, no requantization),
 * and "fc", edgernn_fully_connected_s8 (the dot products and the exact mulh requantization to int8).
 * Each runs REPEATS times; the line printed is the last run's (the first fills the instruction cache). */
#include <stdint.h>
#include <string.h>

#include "pmsis.h"

#include "edgernn_dot.h"
#include "edgernn_kernels.h"
#include "edgernn_team.h"
#include "hal.h"

#define N_IN 256
#define N_OUT 256
#define HELD_ROWS 128
#define REPEATS 3

typedef struct {
    const int8_t *x;
    const int8_t *w;      /* HELD_ROWS blocked rows */
    const int32_t *bias;
    const int32_t *multiplier;
    const int32_t *shift;
    int32_t *sums;
    int8_t *y;
} bench_t;

static bench_t bench;
static uint32_t rng = 12345u;

/* The generator bench_matvec_gap8.py repeats: a 32-bit LCG, one byte per call from its top bits. */
static int8_t next_byte(void)
{
    rng = rng * 1664525u + 1013904223u;
    return (int8_t)(rng >> 24);
}

static void dot_rows(const void *p, int begin, int end)
{
    const bench_t *b = (const bench_t *)p;
    for (int r = begin; r < end; r += 8) {
        int32_t acc[8];
        for (int k = 0; k < 8; ++k) {
            acc[k] = b->bias[r + k];
        }
        edgernn_dot8_s8(b->x, b->w + (size_t)(r % HELD_ROWS) * N_IN, N_IN, acc);
        for (int k = 0; k < 8; ++k) {
            b->sums[r + k] = acc[k];
        }
    }
}

/* Rows [begin, end) by runs that stay inside one copy of the held rows. */
static void fc_rows(const void *p, int begin, int end)
{
    const bench_t *b = (const bench_t *)p;
    while (begin < end) {
        const int held = begin % HELD_ROWS;
        const int count = end - begin < HELD_ROWS - held ? end - begin : HELD_ROWS - held;
        edgernn_fully_connected_s8(b->x, b->w + (size_t)held * N_IN, b->bias + begin, b->multiplier + begin,
                                   b->shift + begin, EDGERNN_ROUND_ONCE, -3, -128, 127, 1, N_IN, count,
                                   b->y + begin);
        begin += count;
    }
}

static void run_dot(void *arg)
{
    edgernn_team_split(dot_rows, arg, N_OUT, 8);
}

static void run_fc(void *arg)
{
    edgernn_team_split(fc_rows, arg, N_OUT, 8);
}

static void write_text(const char *s)
{
    edgernn_hal_uart_write((const uint8_t *)s, (int)strlen(s));
}

static void write_number(const char *name, uint64_t v)
{
    char buf[32];
    int n = 0;
    char digits[24];
    int d = 0;
    do {
        digits[d++] = (char)('0' + (int)(v % 10u));
        v /= 10u;
    } while (v != 0 && d < (int)sizeof digits);
    write_text(name);
    while (d > 0) {
        buf[n++] = digits[--d];
    }
    buf[n++] = ' ';
    buf[n] = '\0';
    write_text(buf);
}

static uint64_t timed(void (*body)(void *))
{
    uint64_t before = 0, cycles = 0;
    for (int k = 0; k < REPEATS; ++k) {
        before = edgernn_team_cluster_cycles();
        edgernn_team_enter(body, &bench);
        cycles = edgernn_team_cluster_cycles() - before;
    }
    return cycles;
}

static void bench_main(void)
{
    int8_t *w, *x, *y;
    int32_t *bias, *multiplier, *shift, *sums;
    int64_t total = 0;
    uint64_t squares = 0, dot_cycles, fc_cycles, bytes = 0;

    edgernn_hal_init(0, (char **)0);
    if (edgernn_team_open() != 0) {
        write_text("\n~~~MATVEC FAILED: no cluster~~~\n");
        edgernn_hal_exit(2);
        return;
    }
    w = (int8_t *)edgernn_team_fast_alloc(HELD_ROWS * N_IN);
    x = (int8_t *)edgernn_team_fast_alloc(N_IN);
    y = (int8_t *)edgernn_team_fast_alloc(N_OUT);
    bias = (int32_t *)edgernn_team_fast_alloc(4 * N_OUT * sizeof(int32_t));
    if (w == NULL || x == NULL || y == NULL || bias == NULL) {
        write_text("\n~~~MATVEC FAILED: L1 too small~~~\n");
        edgernn_hal_exit(2);
        return;
    }
    multiplier = bias + N_OUT;
    shift = bias + 2 * N_OUT;
    sums = bias + 3 * N_OUT;
    /* the held rows in the blocked layout: generated row-major, each block of 8 rows interleaved by
     * groups of 4 inputs (edgernn/backend/lowering/blocking.py) */
    for (int blk = 0; blk < HELD_ROWS; blk += 8) {
        static int8_t rows[8][N_IN];
        for (int r = 0; r < 8; ++r) {
            for (int i = 0; i < N_IN; ++i) {
                rows[r][i] = next_byte();
            }
        }
        for (int g = 0; g < N_IN; g += 4) {
            for (int r = 0; r < 8; ++r) {
                memcpy(w + (size_t)blk * N_IN + (size_t)g * 8 + 4 * r, &rows[r][g], 4);
            }
        }
    }
    for (int i = 0; i < N_IN; ++i) {
        x[i] = next_byte();
    }
    for (int o = 0; o < N_OUT; ++o) {
        bias[o] = (int32_t)next_byte() * 64;
        multiplier[o] = 1518500250 + 4096 * o;     /* about 0.707 * 2^31 */
        shift[o] = -10;
    }
    bench.x = x;
    bench.w = w;
    bench.bias = bias;
    bench.multiplier = multiplier;
    bench.shift = shift;
    bench.sums = sums;
    bench.y = y;

    dot_cycles = timed(run_dot);
    fc_cycles = timed(run_fc);
    for (int o = 0; o < N_OUT; ++o) {
        total += sums[o];
        squares += (uint64_t)((int64_t)sums[o] * sums[o]);
        bytes = bytes * 31u + (uint8_t)y[o];
    }
    write_text("\nMATVEC ");
    write_number("workers=", (uint64_t)edgernn_team_workers());
    write_number("rows=", N_OUT);
    write_number("inputs=", N_IN);
    write_number("dot_cycles=", dot_cycles);
    write_number("fc_cycles=", fc_cycles);
    write_number("sum_offset=", (uint64_t)(total + ((int64_t)1 << 40)));
    write_number("squares=", squares);
    write_number("out_hash=", bytes & 0xFFFFFFFFu);
    write_text("\n~~~MATVEC DONE~~~\n");
    edgernn_hal_exit(0);
}

int main(void)
{
    return pmsis_kickoff((void *)bench_main);
}
