"""GAP8's banded CONV_2D over an arena in L2 (templates/targets/gap8/hal/dma/edgernn_conv_dma.c), on the host:
the source compiled against a stand-in for pmsis.h whose cluster DMA copies at the wait (the latest a
transfer may land) or at the command (the earliest), and held byte for byte against the whole-frame kernel
over geometries of every kind (stride, dilation, padding, a 1x1 filter, bands of every height, the
constants copied or not), int8 and 16x8, each case handed the layout tiling.tile_layout computes (the C
computes none). The tiles are exactly tiling.tile_bytes long (bytes past them are
checked untouched), each DMA chunk stays under 32 KiB and every command is waited once. The GVSOC run is
tests/e2e/test_conv_dma_e2e.py."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from edgernn.backend import tiling

pytestmark = pytest.mark.toolchain

PMSIS_STUB = r"""
#ifndef PMSIS_STUB_H
#define PMSIS_STUB_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
typedef enum { PI_CL_DMA_DIR_LOC2EXT = 0, PI_CL_DMA_DIR_EXT2LOC = 1 } pi_cl_dma_dir_e;
typedef struct { uint8_t *ext, *loc; uint32_t size; int dir, open; } pi_cl_dma_cmd_t;
#define EDGERNN_DMA_ADDR(p) ((uint8_t *)(p))
extern long stub_open, stub_errors;
extern uint8_t *stub_l1, *stub_l1_end;
static inline void stub_copy(pi_cl_dma_cmd_t *c)
{
    if (c->dir == PI_CL_DMA_DIR_EXT2LOC) memcpy(c->loc, c->ext, c->size);
    else memcpy(c->ext, c->loc, c->size);
}
static inline void pi_cl_dma_cmd(uint8_t *ext, uint8_t *loc, uint32_t size, pi_cl_dma_dir_e dir, pi_cl_dma_cmd_t *c)
{
    c->ext = ext; c->loc = loc; c->size = size; c->dir = (int)dir; c->open = 1;
    if (size == 0 || size >= 32768u || loc < stub_l1 || loc + size > stub_l1_end) ++stub_errors;
    ++stub_open;
#ifdef STUB_EARLY
    stub_copy(c);
#endif
}
static inline void pi_cl_dma_cmd_wait(pi_cl_dma_cmd_t *c)
{
    if (!c->open) ++stub_errors;
#ifndef STUB_EARLY
    stub_copy(c);
#endif
    c->open = 0;
    --stub_open;
}
#endif
"""

DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pmsis.h"
#include "edgernn_conv_dma.h"
#include "edgernn_kernels.h"
#include "cases.h"

long stub_open, stub_errors;
uint8_t *stub_l1, *stub_l1_end;
static uint32_t seed = 12345u;
static int32_t rnd(int32_t lo, int32_t hi) { seed = seed * 1103515245u + 12345u; return lo + (int32_t)((seed >> 8) % (uint32_t)(hi - lo + 1)); }

int main(void)
{
    long bad = 0;
    int k;
    for (k = 0; k < N_CASES; ++k) {
        const case_t *c = &cases[k];
        const edgernn_conv_geom_t *g = &c->g;
        const size_t n_in = (size_t)g->k_h * g->k_w * g->in_c, n_x = (size_t)g->in_h * g->in_w * g->in_c;
        const size_t n_y = (size_t)g->out_h * g->out_w * g->out_c, n_w = (size_t)g->out_c * n_in;
        const size_t es = c->s16 ? 2u : 1u;
        uint8_t *x = malloc(n_x * es), *w = malloc(n_w), *ref = malloc(n_y * es), *got = malloc(n_y * es);
        uint8_t *scratch = malloc(((size_t)g->out_w * n_in + 16u * (n_in + 4u)) * es + c->frame_scratch);
        uint8_t *tiles = malloc(c->tile_bytes + 64u);
        int64_t *bias64 = malloc(sizeof(int64_t) * (size_t)g->out_c);
        int32_t *bias = malloc(4u * (size_t)g->out_c), *mult = malloc(4u * (size_t)g->out_c), *shift = malloc(4u * (size_t)g->out_c);
        size_t i;
        for (i = 0; i < n_x; ++i) {
            if (c->s16) ((int16_t *)(void *)x)[i] = (int16_t)rnd(-32768, 32767);
            else ((int8_t *)x)[i] = (int8_t)rnd(-128, 127);
        }
        for (i = 0; i < n_w; ++i) ((int8_t *)w)[i] = (int8_t)rnd(-127, 127);
        for (i = 0; i < (size_t)g->out_c; ++i) {
            bias[i] = rnd(-20000, 20000);
            bias64[i] = (int64_t)rnd(-2000000, 2000000);
            mult[i] = rnd(1 << 30, 0x7FFFFFFF);
            shift[i] = rnd(c->s16 ? -14 : -9, c->s16 ? -4 : 0);
        }
        memset(tiles, 0xA5, c->tile_bytes + 64u);
        memset(got, 0x5A, n_y * es);
        stub_l1 = tiles;
        stub_l1_end = tiles + c->tile_bytes;
        stub_open = 0;
        if (c->kind == 1) {
            edgernn_depthwise_conv_s8(g, (const int8_t *)x, (const int8_t *)w, bias, mult, shift, -3, 5, -128, 127,
                                      (int8_t *)scratch, (int8_t *)ref);
            edgernn_dma_depthwise_conv_s8(tiles, &c->layout, g, (const int8_t *)x, (const int8_t *)w, bias, mult, shift,
                                          -3, 5, -128, 127, (int8_t *)scratch, (int8_t *)got);
        } else if (c->kind == 2) {
            edgernn_max_pool_s8(g, (const int8_t *)x, -100, 120, (int8_t *)ref);
            edgernn_dma_max_pool_s8(tiles, &c->layout, g, (const int8_t *)x, -100, 120, (int8_t *)got);
        } else if (c->kind == 3) {
            edgernn_avg_pool_s8(g, (const int8_t *)x, -100, 120, (int8_t *)ref);
            edgernn_dma_avg_pool_s8(tiles, &c->layout, g, (const int8_t *)x, -100, 120, (int8_t *)got);
        } else if (c->s16) {
            edgernn_conv_s16(g, (const int16_t *)(void *)x, (const int8_t *)w, bias64, mult, shift, -32768, 32767,
                             (int16_t *)(void *)scratch, (int16_t *)(void *)ref);
            edgernn_dma_conv_s16(tiles, &c->layout, g, (const int16_t *)(void *)x, (const int8_t *)w, bias64,
                                 mult, shift, -32768, 32767, (int16_t *)(void *)scratch, (int16_t *)(void *)got);
        } else {
            edgernn_conv_s8(g, (const int8_t *)x, (const int8_t *)w, bias, mult, shift, -3, 5, -128, 127,
                            (int8_t *)scratch, (int8_t *)ref);
            edgernn_dma_conv_s8(tiles, &c->layout, g, (const int8_t *)x, (const int8_t *)w, bias, mult, shift,
                                -3, 5, -128, 127, (int8_t *)scratch, (int8_t *)got);
        }
        for (i = 0; i < 64u; ++i) {
            if (tiles[c->tile_bytes + i] != 0xA5) { ++stub_errors; break; }
        }
        if (memcmp(ref, got, n_y * es) != 0 || stub_open != 0 || stub_errors != 0) {
            printf("case %d differs (open %ld, errors %ld)\n", k, stub_open, stub_errors);
            ++bad;
            stub_errors = 0;
        }
        free(x); free(w); free(ref); free(got); free(scratch); free(tiles); free(bias64); free(bias); free(mult); free(shift);
    }
    printf("%d cases, %ld bad\n", N_CASES, bad);
    return bad != 0;
}
"""


def _geometries() -> list[dict]:
    """(in_h, in_w, in_c, out_c, k_h, k_w, stride, dilation, padding): SAME and VALID as TFLite resolves them."""
    shapes = [
        (9, 7, 3, 5, 3, 3, 1, 1, "same"), (10, 6, 2, 8, 3, 3, 2, 1, "same"), (11, 5, 1, 4, 5, 3, 2, 1, "valid"),
        (12, 4, 2, 3, 3, 3, 1, 2, "same"), (13, 6, 4, 9, 1, 1, 1, 1, "valid"), (8, 8, 3, 6, 2, 2, 2, 1, "same"),
        (7, 9, 2, 12, 4, 2, 3, 1, "same"), (15, 3, 1, 2, 3, 1, 1, 3, "valid"), (6, 6, 5, 4, 1, 1, 2, 1, "valid"),
    ]
    out = []
    for in_h, in_w, in_c, out_c, k_h, k_w, s, d, pad in shapes:
        def axis(size, k):
            eff = (k - 1) * d + 1
            o = (size + s - 1) // s if pad == "same" else (size - eff + s) // s
            total = max(0, (o - 1) * s + eff - size)
            return o, total // 2
        out_h, pad_top = axis(in_h, k_h)
        out_w, pad_left = axis(in_w, k_w)
        out.append(dict(zip(tiling.GEOM_FIELDS, (in_h, in_w, in_c, out_h, out_w, out_c, k_h, k_w, s, s, d, d,
                                                 pad_top, pad_left, 1))))
    return out


def _cases() -> list[tuple[dict, int, bool, bool, str]]:
    return [(g, rows, copy, s16, tiling.CONV) for g in _geometries() for s16 in (False, True) for copy in (False, True)
            for rows in sorted({1, 2, 3, max(1, g["out_h"] // 2), g["out_h"]})]


def _other_cases() -> list[tuple[dict, int, bool, bool, str]]:
    """int8 DEPTHWISE_CONV_2D (depth multiplier 1: out_c = in_c; the planes' shapes and others) and the pools
    (no dilation), in bands of every height."""
    out = []
    for g in _geometries():
        dw = {**g, "out_c": g["in_c"]}
        pool = {**g, "out_c": g["in_c"], "dil_h": 1, "dil_w": 1}
        for rows in sorted({1, 2, max(1, g["out_h"] // 2), g["out_h"]}):
            out += [(dw, rows, copy, False, tiling.DEPTHWISE) for copy in (False, True)]
            if g["dil_h"] == 1 and g["dil_w"] == 1:
                out += [(pool, rows, False, False, k) for k in ("max_pool", "avg_pool")]
    return out


def _cases_header() -> str:
    from edgernn.backend.cprint import c_initializer

    from edgernn.backend.layout import depthwise_s8_scratch

    lines = ["typedef struct { edgernn_conv_geom_t g; edgernn_dma_layout_t layout; int s16, kind; size_t tile_bytes, "
             "frame_scratch; } case_t;", "static const case_t cases[] = {"]
    kinds = {tiling.CONV: 0, tiling.DEPTHWISE: 1, "max_pool": 2, "avg_pool": 3}
    for g, rows, copy, s16, kind in _cases() + _other_cases():
        tkind = tiling.POOL if kind.endswith("pool") else kind
        offsets, nbytes = tiling.tile_layout(g, rows, copy, 2 if s16 else 1, 8 if s16 else 4, tkind)
        fields = ", ".join(str(g[f]) for f in tiling.GEOM_FIELDS)
        layout = c_initializer(tiling.layout_initializer(rows, offsets))
        lines.append(f"    {{{{{fields}}}, {layout}, {int(s16)}, {kinds[kind]}, {nbytes}u, "
                     f"{depthwise_s8_scratch(g)}u}},")
    lines += ["};", "#define N_CASES ((int)(sizeof cases / sizeof cases[0]))"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("xpulp", [False, True], ids=["portable", "xpulp_emulated"])
@pytest.mark.parametrize("when", ["at_wait", "at_command"])
def test_banded_convolution_equals_the_whole_frame_kernel(tmp_path, when, xpulp):
    """Each banded op (CONV_2D int8 and 16x8; int8 DEPTHWISE_CONV_2D, MAX_POOL_2D, AVERAGE_POOL_2D) gives the
    whole-frame kernel's bytes; with Xpulp (emulated) the 4x2 blocking and the depthwise planes run in the
    bands, their scratch in the tiles."""
    from edgernn.backend.codegen import copy_kernels
    from edgernn.resources import templates_dir

    sources = copy_kernels(tmp_path, None, {"edgernn_conv_s8", "edgernn_conv_s16", "edgernn_depthwise_conv_s8",
                                            "edgernn_max_pool_s8", "edgernn_avg_pool_s8"},
                           kernel_set="gap8" if xpulp else None)
    dma = templates_dir() / "targets" / "gap8" / "hal" / "dma"
    for name in ("edgernn_conv_dma.c", "edgernn_conv_dma.h"):
        (tmp_path / name).write_text((dma / name).read_text())
    (tmp_path / "pmsis.h").write_text(PMSIS_STUB)
    (tmp_path / "cases.h").write_text('#include <stddef.h>\n#include "edgernn_conv_dma.h"\n' + _cases_header())
    (tmp_path / "driver.c").write_text(DRIVER)
    exe = tmp_path / "driver"
    flags = (["-DSTUB_EARLY"] if when == "at_command" else []) + (["-DEDGERNN_XPULP_EMULATE"] if xpulp else [])
    cmd = ["gcc", "-O1", "-std=c99", "-Wall", "-Wextra", "-Werror", "-Wno-unused-function", *flags, "-I", str(tmp_path),
           *[str(tmp_path / s) for s in sources if s.endswith(".c")], str(tmp_path / "edgernn_conv_dma.c"), str(tmp_path / "driver.c"),
           "-o", str(exe), "-lm"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-2000:]
    assert out.stdout.strip().endswith("0 bad")


def test_band_plan_fits_what_placement_left():
    """Tile bytes grow with the band; the plan's band is the largest that fits."""
    g = _geometries()[0]
    sizes = [tiling.tile_bytes(g, rows, True, 1, 4) for rows in range(1, g["out_h"] + 1)]
    assert sizes == sorted(sizes)
    room = sizes[3]
    assert tiling._best_band(g, room, [True, False], 1, 4) == (4, True)
    assert tiling._best_band(g, sizes[0] - 1, [True, False], 1, 4)[1] is False
    assert tiling._best_band(g, 8, [True, False], 1, 4) is None
    assert np.all(np.diff(sizes) > 0)


@pytest.mark.parametrize("s16", [False, True])
@pytest.mark.parametrize("copy", [False, True])
def test_tile_layout_parts_are_aligned_disjoint_and_in_order(copy, s16):
    """Every part the op has starts on ALIGN bytes, holds its bytes before the next part starts, and the
    last ends at tile_bytes; the constants are there exactly when copied, the patch slots exactly when the
    filter is not 1x1 stride 1."""
    from edgernn.backend.layout import ALIGN, patch_slots_elems

    elem, bias_elem = (2, 8) if s16 else (1, 4)
    for g in _geometries():
        for rows in sorted({1, 2, g["out_h"]}):
            offsets, nbytes = tiling.tile_layout(g, rows, copy, elem, bias_elem)
            n_in = g["k_h"] * g["k_w"] * g["in_c"]
            sizes = {"w": g["out_c"] * n_in, "bias": g["out_c"] * bias_elem, "multiplier": g["out_c"] * 4,
                     "shift": g["out_c"] * 4, "scratch": patch_slots_elems(n_in) * elem,
                     "in0": tiling.band_in_rows(g, rows) * g["in_w"] * g["in_c"] * elem,
                     "out0": rows * g["out_w"] * g["out_c"] * elem}
            sizes["in1"], sizes["out1"] = sizes["in0"], sizes["out0"]
            pointwise = (g["k_h"], g["k_w"], g["stride_h"], g["stride_w"]) == (1, 1, 1, 1)
            present = [f for f in tiling.LAYOUT_FIELDS if offsets[f] != tiling.ABSENT]
            want = ([] if not copy else ["w", "bias", "multiplier", "shift"]) + ([] if pointwise else ["scratch"])
            assert present == want + ["in0", "in1", "out0", "out1"]
            ends = [offsets[f] + sizes[f] for f in present]
            assert all(offsets[f] % ALIGN == 0 for f in present)
            assert all(ends[i] <= offsets[present[i + 1]] for i in range(len(present) - 1))
            assert ends[-1] <= nbytes < ends[-1] + ALIGN
