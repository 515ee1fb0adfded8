"""An int8 CONV_2D whose output only a MAX_POOL_2D reads, fused into one call (edgernn_conv_max_pool_s8), so that
the convolution's output never exists whole.

A camera CNN's stem makes the largest tensor of the frame: PULP-Dronet's 5x5 stride-2 convolution of 32 channels
over 200x200 pixels writes 320,000 bytes, four times what the max-pool after it keeps, and more than the AI-deck's
L2 has for the whole arena. Fused, the pool's output rows are made in bands: each band's convolution rows (the
pool's halo included; a row two bands share is computed twice) are computed into a small buffer, then pooled.
On a board whose arena is in a slow memory with DMA tiles (GAP8), the bands run through the tiles
(edgernn/backend/tiling.py: the convolution's rows in L1, never in L2); elsewhere through the call's arena scratch,
which holds the convolution's own scratch, then ``rows_at`` bytes in, the band's convolution rows.

Fused when the convolution's output is at least FUSE_MIN_BYTES: a small one costs the arena little, and the rows
computed twice would cost cycles for nothing. The bytes are the pair's: each band is the same kernels over the
band's geometry (its pad_top moved by the rows it skips, as the DMA's bands).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edgernn.backend.ir import Graph
from edgernn.backend.kernels import call_args, kernel, struct_fields
from edgernn.backend.layout import align
from edgernn.backend.lowering import Call
from edgernn.backend.values import ScratchArg, TensorArg

FN = "edgernn_conv_max_pool_s8"
FUSE_MIN_BYTES = 16384
# the band's convolution rows in the arena scratch (without DMA tiles) at most, unless one pooled row needs more
SCRATCH_ROWS_BYTES = 16384


@dataclass
class ConvPoolCall(Call):
    """The fused pair, at the pool's place in the schedule; ``members``: the convolution's call, the pool's."""

    members: list[Call] = field(default_factory=list)

    @property
    def hidden(self) -> int:
        """The convolution's output tensor, which never reaches memory."""
        return call_args(self.members[0])["out"].index


def rows_read(g: dict, out0: int, out1: int) -> tuple[int, int]:
    """The input rows [r0, r1) of the frame that output rows [out0, out1) of geometry g read (none past its edges):
    edgernn_conv.c's conv_rows_read."""
    first = out0 * g["stride_h"] - g["pad_top"]
    end = (out1 - 1) * g["stride_h"] - g["pad_top"] + (g["k_h"] - 1) * g["dil_h"] + 1
    r0, r1 = max(first, 0), min(end, g["in_h"])
    return r0, max(r0, r1)


def band_conv_rows(pool: dict, band_rows: int) -> int:
    """The most convolution rows a band of ``band_rows`` pooled rows reads."""
    return max(r1 - r0 for p0 in range(0, pool["out_h"], band_rows)
               for r0, r1 in [rows_read(pool, p0, min(p0 + band_rows, pool["out_h"]))])


def band_in_rows(conv: dict, pool: dict, band_rows: int) -> int:
    """The most input rows of the convolution a band of ``band_rows`` pooled rows reads."""
    most = 0
    for p0 in range(0, pool["out_h"], band_rows):
        c0, c1 = rows_read(pool, p0, min(p0 + band_rows, pool["out_h"]))
        i0, i1 = rows_read(conv, c0, c1)
        most = max(most, i1 - i0)
    return most


def geometries(call: Call) -> tuple[dict, dict]:
    """(the convolution's geometry, the pool's) of a fused call (its team kernel's too)."""
    a = dict(zip(kernel(FN).arg_names, call.args))
    by_name = {s.name: s for s in call.structs}
    return struct_fields(by_name[a["g"].name]), struct_fields(by_name[a["pool"].name])


def _scratch_band_rows(conv: dict, pool: dict) -> int:
    """Pooled rows a band of the arena's scratch holds: within SCRATCH_ROWS_BYTES and a quarter of the
    convolution's output, one at least."""
    row = conv["out_w"] * conv["out_c"]
    room = min(SCRATCH_ROWS_BYTES, conv["out_h"] * row // 4)
    best = 1
    for rows in range(1, pool["out_h"] + 1):
        if band_conv_rows(pool, rows) * row > room:
            break
        best = rows
    return best


def _readers(calls: list[Call]) -> dict[int, list[Call]]:
    """tensor -> the calls that name it (its writer too)."""
    out: dict[int, list[Call]] = {}
    for call in calls:
        for c in [call, *call.more]:
            for a in c.args:
                if isinstance(a, TensorArg):
                    out.setdefault(a.index, []).append(call)
    return out


def fuse_conv_pool(graph: Graph, calls: list[Call], keep: set[int]) -> list[Call]:
    """``calls`` with each int8 CONV_2D whose output (FUSE_MIN_BYTES or more, not in ``keep``) only a MAX_POOL_2D
    reads fused with that pool, at the pool's place."""
    readers = _readers(calls)
    fused: dict[int, ConvPoolCall] = {}      # the pool's call id -> the fused call
    dropped: set[int] = set()
    for call in calls:
        if call.fn != "edgernn_conv_s8" or call.more:
            continue
        out = call_args(call)["out"].index
        users = [u for u in readers.get(out, []) if u is not call]
        if out in keep or graph.tensors[out].nbytes < FUSE_MIN_BYTES or len(users) != 1:
            continue
        pool = users[0]
        if pool.fn != "edgernn_max_pool_s8" or pool.more or call_args(pool)["in"].index != out:
            continue
        fused[id(pool)] = _fuse(call, pool)
        dropped.add(id(call))
    return [fused.get(id(c), c) for c in calls if id(c) not in dropped]


def _fuse(conv: Call, pool: Call) -> ConvPoolCall:
    a, p = call_args(conv), call_args(pool)
    structs = [*conv.structs, *pool.structs]
    by_name = {s.name: s for s in structs}
    cg, pg = struct_fields(by_name[a["g"].name]), struct_fields(by_name[p["g"].name])
    band_rows = _scratch_band_rows(cg, pg)
    own = align(conv.scratch[1]) if conv.scratch else 0
    rows_bytes = band_conv_rows(pg, band_rows) * cg["out_w"] * cg["out_c"]
    args = {**a, "pool": p["g"], "pool_min": p["act_min"], "pool_max": p["act_max"], "band_rows": band_rows,
            "rows_at": own, "scratch": ScratchArg(pool.op_index), "out": p["out"]}
    return ConvPoolCall(pool.op_index, f"{conv.op}+{pool.op}", FN, kernel(FN).order(args), arrays=list(conv.arrays),
                        structs=structs, scratch=("int8_t", own + rows_bytes), members=[conv, pool])


def unstored(calls: list[Call]) -> set[int]:
    """The fused convolutions' outputs: they never reach memory."""
    return {c.hidden for c in calls if isinstance(c, ConvPoolCall)}
