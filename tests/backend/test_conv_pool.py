"""The planning of a CONV_2D fused with the MAX_POOL_2D after it (edgernn/backend/conv_pool.py) and of a CONV_2D whose
filter streams from L3 (edgernn/backend/streaming.py), without a compiler: the bands' geometry gives the unfused
pair's values along the rows (a 1-D model of the kernels: taps outside the frame are the pad value for the
convolution and skipped by the pool, as edgernn_conv.c does), the fused op's DMA tiles are disjoint and hold a band,
and a conv filter streams in chunks of whole 8-channel blocks. The C's bytes are held in
tests/e2e/test_conv_pool_e2e.py (host) and tests/targets/gap8/test_gvsoc_dronet.py (GVSOC, L3)."""

from __future__ import annotations

import numpy as np
import pytest

from edgernn.backend import conv_pool, streaming, tiling
from edgernn.backend.lowering.base import Call, ConstStruct
from edgernn.backend.values import ConstArg, StructArg, TensorArg


def _rows(in_h: int, k: int, stride: int, padding: str) -> dict:
    """A geometry along the rows, TFLite's way: SAME pads (total - total // 2 at the bottom), VALID none."""
    if padding == "same":
        out_h = -(-in_h // stride)
        pad_top = max((out_h - 1) * stride + k - in_h, 0) // 2
    else:
        out_h, pad_top = (in_h - k) // stride + 1, 0
    return {"in_h": in_h, "out_h": out_h, "k_h": k, "stride_h": stride, "dil_h": 1, "pad_top": pad_top}


def _conv(x: np.ndarray, g: dict, w: np.ndarray, pad: int) -> np.ndarray:
    out = np.zeros(g["out_h"], dtype=np.int64)
    for o in range(g["out_h"]):
        for k in range(g["k_h"]):
            r = o * g["stride_h"] - g["pad_top"] + k
            out[o] += w[k] * (x[r] if 0 <= r < g["in_h"] else pad)
    return out


def _max_pool(x: np.ndarray, g: dict) -> np.ndarray:
    out = []
    for o in range(g["out_h"]):
        rows = [o * g["stride_h"] - g["pad_top"] + k for k in range(g["k_h"])]
        out.append(max(x[r] for r in rows if 0 <= r < g["in_h"]))
    return np.array(out)


# (conv: frame rows, kernel, stride, padding; pool: kernel, stride, padding): PULP-Dronet's stem (200 rows, 5x5
# stride 2 SAME, then a 3x3 stride-2 SAME pool), a pool of 2 VALID, a pool whose SAME pads at the top, odd frames
GEOMETRIES = [
    ((200, 5, 2, "same"), (3, 2, "same")),
    ((64, 3, 1, "same"), (2, 2, "valid")),
    ((61, 3, 2, "valid"), (3, 2, "same")),
    ((33, 5, 1, "same"), (4, 3, "same")),
    ((15, 1, 1, "valid"), (3, 1, "same")),
]


@pytest.mark.parametrize("conv_rows,pool_rows", GEOMETRIES)
def test_bands_of_pooled_rows_give_the_unfused_pair(conv_rows, pool_rows):
    rng = np.random.default_rng(0)
    conv = _rows(*conv_rows)
    pool = _rows(conv["out_h"], *pool_rows)
    x = rng.integers(-128, 128, conv["in_h"])
    w = rng.integers(-128, 128, conv["k_h"])
    whole = _max_pool(_conv(x, conv, w, pad=-7), pool)
    for band in range(1, pool["out_h"] + 1):
        parts = []
        for p0 in range(0, pool["out_h"], band):
            p1 = min(p0 + band, pool["out_h"])
            c0, c1 = conv_pool.rows_read(pool, p0, p1)
            i0, i1 = conv_pool.rows_read(conv, c0, c1)
            assert c1 - c0 <= conv_pool.band_conv_rows(pool, band) and i1 - i0 <= conv_pool.band_in_rows(conv, pool, band)
            # edgernn_conv.c's conv_pool_band: the frame's geometry over the band's rows, pad_top moved
            cb = {**conv, "in_h": i1 - i0, "out_h": c1 - c0, "pad_top": conv["pad_top"] + i0 - c0 * conv["stride_h"]}
            pb = {**pool, "in_h": c1 - c0, "out_h": p1 - p0, "pad_top": pool["pad_top"] + c0 - p0 * pool["stride_h"]}
            parts.append(_max_pool(_conv(x[i0:i1], cb, w, pad=-7), pb))
        assert np.array_equal(np.concatenate(parts), whole), band


def _geom(in_h, in_w, in_c, out_h, out_w, out_c, k, stride, pad_top=0, pad_left=0) -> dict:
    return {"in_h": in_h, "in_w": in_w, "in_c": in_c, "out_h": out_h, "out_w": out_w, "out_c": out_c, "k_h": k,
            "k_w": k, "stride_h": stride, "stride_w": stride, "dil_h": 1, "dil_w": 1, "pad_top": pad_top,
            "pad_left": pad_left, "depth_multiplier": 1}


STEM = _geom(200, 200, 1, 100, 100, 32, 5, 2, 1, 1)
STEM_POOL = _geom(100, 100, 32, 50, 50, 32, 3, 2)


@pytest.mark.parametrize("copy", [True, False])
def test_fused_tiles_are_aligned_disjoint_and_hold_a_band(copy):
    for band in (1, 4, 50):
        offsets, total = tiling.tile_layout(STEM, band, copy, 1, 4, tiling.CONV_POOL, STEM_POOL)
        sizes = {"mid": conv_pool.band_conv_rows(STEM_POOL, band) * 100 * 32,
                 "in0": conv_pool.band_in_rows(STEM, STEM_POOL, band) * 200,
                 "out0": band * 50 * 32}
        placed = sorted((at, name) for name, at in offsets.items() if at != tiling.ABSENT)
        assert all(at % 8 == 0 for at, _ in placed)
        assert (offsets["w"] != tiling.ABSENT) == copy and offsets["scratch"] != tiling.ABSENT
        for name, n in sizes.items():
            following = [at for at, _ in placed if at > offsets[name]] + [total]
            assert min(following) - offsets[name] >= n, name


def test_the_stem_of_pulp_dronet_fits_the_l1_tiles_in_bands():
    """53,248 B of L1 (the AI-deck's budget): bands of a few pooled rows, the 320 KB stem output never whole."""
    room = 53248
    best = tiling._best_band(STEM, room, [True, False], 1, 4, tiling.CONV_POOL, STEM_POOL)
    assert best is not None
    rows, copy = best
    assert 2 <= rows < 50 and copy
    assert tiling.tile_bytes(STEM, rows, copy, 1, 4, tiling.CONV_POOL, STEM_POOL) <= room


# (in_c, k, out_c, chunk channels, slot bytes): 16 KiB of a filter's rows a chunk, whole 8-channel blocks, one block
# at least; a slot holds a chunk
CONV_CHUNKS = [
    (128, 3, 128, 8, 8 * 1152),       # PULP-Dronet's last block: 1,152 B a channel
    (64, 3, 128, 24, 24 * 576),
    (1024, 3, 16, 8, 8 * 9216),       # one block is more than 16 KiB: a block anyway
    (8, 1, 20, 24, 20 * 8),           # a filter of fewer channels than a chunk: one chunk of them
]


@pytest.mark.parametrize("in_c,k,out_c,chunk,slot", CONV_CHUNKS)
def test_a_conv_filter_streams_in_chunks_of_whole_channel_blocks(in_c, k, out_c, chunk, slot):
    geom = ConstStruct("g0", "edgernn_conv_geom_t", list(_geom(9, 9, in_c, 9, 9, out_c, k, 1).values()))
    args = {"g": StructArg("g0"), "in": TensorArg(0), "w": None, "bias": None, "multiplier": None, "shift": None,
            "input_zero_point": 0, "output_offset": 0, "act_min": -128, "act_max": 127, "scratch": None,
            "out": TensorArg(1)}
    call = Call(0, "CONV_2D", "edgernn_team_conv_s8", list(args.values()), structs=[geom])
    graph = type("G", (), {"calls": [call], "structs": [], "prefix": "edgernn_step"})()
    how = streaming.STREAMED["edgernn_team_conv_s8"]
    units, unit_bytes = how.dims(graph, call)
    assert (units, unit_bytes) == (out_c, (k * k * in_c,))
    n = streaming.chunk_units(how, units, unit_bytes)
    assert n == chunk and n % how.grain == 0
    assert streaming.slot_bytes(how, units, unit_bytes) == slot


# (in_c, out_c, flagged): block 2's second convolution of PULP-Dronet (13x13x64 -> 64, 36,864 B of filter) does
# not fit the AI-deck's L1 tiles beside one band of its rows; block 1's (32 channels, 9,216 B) does
@pytest.mark.parametrize("in_c,out_c,flagged", [(64, 64, True), (32, 32, False)])
def test_a_filter_beyond_the_tiles_streams_when_the_arena_is_in_l2(in_c, out_c, flagged):
    from edgernn.backend.placement import place
    from edgernn.targets.board import load_board

    geom = ConstStruct("g0", "edgernn_conv_geom_t", list(_geom(13, 13, in_c, 13, 13, out_c, 3, 1, 1, 1).values()))
    w = f"w{in_c}"
    args = [StructArg("g0"), TensorArg(0), ConstArg(w), None, None, None, 0, 0, -128, 127, None, TensorArg(1)]
    graph = type("G", (), {"calls": [Call(0, "CONV_2D", "edgernn_conv_s8", args, structs=[geom])]})()
    deck = load_board("ai_deck")
    streamable = {w: 9 * in_c * out_c}
    placement = place(deck, weight_bytes=100_000, state_bytes=0, arena_bytes=200_000, streamable=streamable)
    assert placement.items["arena"][0] == "l2"
    assert tiling.filters_beyond_tiles(deck, placement, [graph], streamable) == (streamable if flagged else {})
    on_l1 = place(deck, weight_bytes=100_000, state_bytes=0, arena_bytes=2_000, streamable=streamable)
    assert tiling.filters_beyond_tiles(deck, on_l1, [graph], streamable) == {}
