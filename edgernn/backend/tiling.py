"""Bands of output rows for the team's CONV_2D when the arena is in a slow memory (L2 on GAP8), fed by the
team's DMA into tiles in its fast memory (L1).

The board says it (``[placement]``): ``dma_tiles_memory`` (a team memory: where the tiles go) and
``dma_source`` (the C file, under templates/, holding ``edgernn_dma_conv_s8`` and ``_s16``; its header of
the same stem beside it). When the placement put the arena elsewhere than that memory, each team CONV_2D
whose input (the step's input or the arena) and output (the arena) can be reached by the DMA gets the
largest band of output rows whose tiles fit what the placement left of the memory, the op's filter and
per-channel constants copied in too when they fit with one band; an op of which not even one row fits
keeps reading the slow memory directly (a placement note says so). All ops share one tile area, the
largest op's need, taken at init as the arena is; the placement counts it as its item ``dma_tiles``.

The tiles' layout is computed here only (``tile_layout``): each banded call is handed a constant
``edgernn_dma_layout_t`` (templates/targets/gap8/hal/dma/edgernn_conv_dma.h) that model.c.j2 prints, the byte
offset of every part of the tiles; the C reads the offsets and computes none.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edgernn.backend import conv_pool, kernels
from edgernn.backend.layout import align, depthwise_s8_scratch, patch_slots_elems
from edgernn.backend.placement import Placement
from edgernn.backend.values import ConstArg, StructArg, TensorArg

TILES_VAR = "edgernn_dma_tiles"
GEOM_FIELDS = ("in_h", "in_w", "in_c", "out_h", "out_w", "out_c", "k_h", "k_w", "stride_h", "stride_w",
               "dil_h", "dil_w", "pad_top", "pad_left", "depth_multiplier")


def band_in_rows(g: dict, band_rows: int) -> int:
    return min(g["in_h"], (band_rows - 1) * g["stride_h"] + (g["k_h"] - 1) * g["dil_h"] + 1)


# edgernn_dma_layout_t's fields after band_rows, in its order: byte offsets into the tiles, -1 for a part
# the op has not (constants not copied; no patch slots for a 1x1 stride-1 filter)
LAYOUT_FIELDS = ("w", "bias", "multiplier", "shift", "scratch", "in0", "in1", "out0", "out1", "mid")
ABSENT = -1


# what an op of each banded kind keeps in the tiles besides its input and output bands
CONV, DEPTHWISE, POOL = "conv", "depthwise", "pool"
# a CONV_2D fused with the MAX_POOL_2D after it (edgernn/backend/conv_pool.py): its bands are the pool's output
# rows, and the convolution's rows each band reads are the tiles' part "mid", in L1 only
CONV_POOL = "conv_pool"


def _band_geometry(g: dict, band_rows: int) -> dict:
    """The geometry one band's kernel call sees (its output rows; the input rows it reads)."""
    return {**g, "out_h": band_rows, "in_h": band_in_rows(g, band_rows)}


def tile_layout(g: dict, band_rows: int, copy_weights: bool, elem: int, bias_elem: int,
                kind: str = CONV, pool: dict | None = None) -> tuple[dict, int]:
    """(offsets, bytes) of an op's tiles: its constants (when copied: a CONV_2D's or DEPTHWISE_CONV_2D's filter,
    bias, multipliers and shifts), its scratch in L1 (CONV_2D's patch slots, not for a 1x1 stride-1 filter;
    DEPTHWISE_CONV_2D's planes or padded band), two input and two output tiles, each part on ALIGN bytes after
    the one before. A pool has only its tiles. A CONV_2D fused with a MAX_POOL_2D (``pool``: the pool's geometry;
    band_rows its output rows) has the convolution's parts, its input tiles, the convolution's rows a band reads
    (part "mid") and the pool's output tiles."""
    n_in = g["k_h"] * g["k_w"] * g["in_c"]
    out_c = g["out_c"]
    parts: list[tuple[str, int]] = []
    if copy_weights and kind != POOL:
        w_bytes = out_c * n_in if kind in (CONV, CONV_POOL) else g["k_h"] * g["k_w"] * out_c
        parts += [("w", w_bytes), ("bias", out_c * bias_elem), ("multiplier", out_c * 4), ("shift", out_c * 4)]
    if kind == CONV_POOL:
        pointwise = (g["k_h"], g["k_w"], g["stride_h"], g["stride_w"]) == (1, 1, 1, 1)
        if not pointwise:
            parts.append(("scratch", patch_slots_elems(n_in) * elem))
        in_bytes = conv_pool.band_in_rows(g, pool, band_rows) * g["in_w"] * g["in_c"] * elem
        mid_bytes = conv_pool.band_conv_rows(pool, band_rows) * g["out_w"] * out_c * elem
        out_bytes = band_rows * pool["out_w"] * pool["out_c"] * elem
        parts += [("mid", mid_bytes), ("in0", in_bytes), ("in1", in_bytes), ("out0", out_bytes), ("out1", out_bytes)]
        return _offsets(parts)
    if kind == CONV:
        pointwise = (g["k_h"], g["k_w"], g["stride_h"], g["stride_w"]) == (1, 1, 1, 1)
        if not pointwise:
            parts.append(("scratch", patch_slots_elems(n_in) * elem))
    elif kind == DEPTHWISE:
        parts.append(("scratch", depthwise_s8_scratch(_band_geometry(g, band_rows)) * elem))
    in_bytes = band_in_rows(g, band_rows) * g["in_w"] * g["in_c"] * elem
    out_bytes = band_rows * g["out_w"] * g["out_c"] * elem
    parts += [("in0", in_bytes), ("in1", in_bytes), ("out0", out_bytes), ("out1", out_bytes)]
    return _offsets(parts)


def _offsets(parts: list[tuple[str, int]]) -> tuple[dict, int]:
    offsets = dict.fromkeys(LAYOUT_FIELDS, ABSENT)
    at = 0
    for name, nbytes in parts:
        offsets[name] = at
        at += align(nbytes)
    return offsets, at


def layout_initializer(band_rows: int, offsets: dict) -> list:
    """edgernn_dma_layout_t's fields, nested as its C: band_rows, the constants', the scratch's, then the two
    input and the two output tiles' offsets."""
    o = offsets
    return [band_rows, o["w"], o["bias"], o["multiplier"], o["shift"], o["scratch"], [o["in0"], o["in1"]],
            [o["out0"], o["out1"]], o["mid"]]


def tile_bytes(g: dict, band_rows: int, copy_weights: bool, elem: int, bias_elem: int, kind: str = CONV,
               pool: dict | None = None) -> int:
    """The bytes of an op's tiles (``tile_layout``'s end)."""
    return tile_layout(g, band_rows, copy_weights, elem, bias_elem, kind, pool)[1]


@dataclass
class BandPlan:
    graph: str
    op_index: int
    fn: str
    band_rows: int
    n_bands: int
    copy_weights: bool
    tile_bytes: int
    offsets: dict = field(default_factory=dict)   # tile_layout's: LAYOUT_FIELDS -> byte offset or ABSENT
    op: str = "CONV_2D"

    @property
    def layout_name(self) -> str:
        """The C name of the op's constant edgernn_dma_layout_t (model.c.j2 prints it)."""
        return f"{self.graph}_dma_layout_{self.op_index}"

    @property
    def layout_fields(self) -> list:
        """edgernn_dma_layout_t's initializer (``layout_initializer``)."""
        return layout_initializer(self.band_rows, self.offsets)

    def as_dict(self) -> dict:
        return {"graph": self.graph, "op": self.op_index, "kernel": self.fn, "band_rows": self.band_rows,
                "bands": self.n_bands, "weights_in_tiles": self.copy_weights, "tile_bytes": self.tile_bytes}


@dataclass
class DmaPlan:
    memory: str
    source: str
    ops: list[BandPlan] = field(default_factory=list)

    @property
    def tile_bytes(self) -> int:
        return max((p.tile_bytes for p in self.ops), default=0)


# an int8 ADD or SUB of two tensors of the same shape over an arena in the slow memory: in chunks of elements
# through the tiles (its operands' chunks in in0 and in1, its output's in out0 and out1), band_rows the chunk's
# elements (edgernn_conv_dma.c's edgernn_dma_addsub_n_s8)
ADDSUB = "edgernn_addsub_n_s8"
# fewer elements than this are added in L2 directly: the transfers' set-up would cost more than the loads they save
# (a recurrent cell's ADDs of tens of elements); a CNN's residual ADDs are thousands
ADDSUB_MIN_ELEMENTS = 2048


def addsub_layout(elems: int) -> tuple[dict, int]:
    """(offsets, bytes) of an element-wise op's tiles: two operand chunks and two output chunks of ``elems``."""
    return _offsets([("in0", elems), ("in1", elems), ("out0", elems), ("out1", elems)])


def _addsub_chunk(rg, k, call, room: int) -> tuple[int, int] | None:
    """(elements a chunk, the op's elements) of an ADD whose operands and output lie in the arena, or None."""
    args = dict(zip(k.arg_names, call.args))
    if not all(isinstance(args[a], TensorArg) and _in_arena(rg, args[a].index) for a in ("in1", "in2", "out")):
        return None
    n = args["n"]
    if not isinstance(n, int) or n < ADDSUB_MIN_ELEMENTS:
        return None
    elems = min(n, (room // 4) // 8 * 8)
    return (elems, n) if elems >= 64 else None


def dma_rules(board) -> tuple[str, str] | None:
    """(tiles memory, C source) of the board's banded convolutions, or None."""
    if board is None:
        return None
    memory, source = board.placement.dma_tiles_memory, board.placement.dma_source
    return (memory, source) if memory and source else None


def _banded(fn: str):
    """The kernel of a team call that has a banded form (the kernel table's ``banded``), else None. The
    team kernel has its kernel's arguments (edgernn_team_conv_s8: edgernn_conv_s8's)."""
    k = kernels.BY_NAME.get(fn.replace("edgernn_team_", "edgernn_", 1)) if fn.startswith("edgernn_team_") else None
    return k if k is not None and k.banded else None


def _elem_bytes(k, arg: str) -> int:
    return kernels.SIZES[k.arg(arg).element]


def _in_arena(rg, tensor: int) -> bool:
    """Whether the DMA can reach a tensor: it lies in the arena (a tensor placed in another one too)."""
    place = rg.places.get(tensor)
    return place is not None and place.in_arena


def _best_band(g: dict, room: int, copies: list[bool], elem: int, bias_elem: int,
               kind: str = CONV, pool: dict | None = None) -> tuple[int, bool] | None:
    for copy in copies:
        for rows in range((pool or g)["out_h"], 0, -1):
            if tile_bytes(g, rows, copy, elem, bias_elem, kind, pool) <= room:
                return rows, copy
    return None


def _kind(fn: str) -> str:
    if fn == conv_pool.FN:
        return CONV_POOL
    return DEPTHWISE if "depthwise" in fn else POOL if "pool" in fn else CONV


def plan_bands(board, placement: Placement | None, graphs) -> DmaPlan | None:
    """The band plan of the team convolutions of ``graphs`` (RenderedGraph, after the team's sharing), or
    None when the board has none or the arena is in the tiles' memory. Adds the tiles to ``placement``."""
    rules = dma_rules(board)
    if rules is None or placement is None:
        return None
    memory, source = rules
    if placement.items["arena"][0] == memory or placement.arena_in_team_memory:
        return None
    if not board.memory_typed(memory).team_memory:
        return None
    room = placement.budgets[memory] - placement.used(memory)
    plan = DmaPlan(memory, source)
    for rg in graphs:
        if rg is None:
            continue
        for call in rg.calls:
            k = _banded(call.fn)
            if k is None or not call.structs:
                continue
            if k.name == ADDSUB:
                chunk = _addsub_chunk(rg, k, call, room)
                if chunk is not None:
                    elems, n = chunk
                    offsets, nbytes = addsub_layout(elems)
                    plan.ops.append(BandPlan(rg.prefix, call.op_index, k.banded, elems, -(-n // elems), False, nbytes,
                                             offsets, call.op))
                continue
            kind = _kind(k.name)
            band_fn, elem = k.banded, _elem_bytes(k, "in")
            bias_elem = _elem_bytes(k, "bias") if kind != POOL else 0
            args = dict(zip(k.arg_names, call.args))
            src, dst, w = args["in"], args["out"], args.get("w")
            readable = isinstance(src, TensorArg) and (
                src.index == rg.input_tensor and rg.prefix == "edgernn_step" or _in_arena(rg, src.index))
            if not (readable and isinstance(dst, TensorArg) and _in_arena(rg, dst.index)):
                continue
            if w is None:
                copies = [False]
            else:
                w_name = rg.places[w.index].name if isinstance(w, TensorArg) else w.name
                copies = [False] if w_name in rg.fast else [True, False]
            if w is not None and not isinstance(w, TensorArg) and w.name in placement.streamed:
                continue     # its filter is read in chunks from the stream memory (streaming.py)
            g = dict(zip(GEOM_FIELDS, (int(v) for v in call.structs[0].fields)))
            pool = None
            if kind == CONV_POOL:
                g, pool = ({f: int(v) for f, v in geom.items()} for geom in conv_pool.geometries(call))
            best = _best_band(g, room, copies, elem, bias_elem, kind, pool)
            if best is None:
                placement.notes.append(f"op {call.op_index} ({call.op}): not one output row's tiles fit {memory} "
                                       f"({room} B left): reads {placement.items['arena'][0]} directly")
                continue
            rows, copy = best
            offsets, nbytes = tile_layout(g, rows, copy, elem, bias_elem, kind, pool)
            plan.ops.append(BandPlan(rg.prefix, call.op_index, band_fn, rows, -(-(pool or g)["out_h"] // rows), copy,
                                     nbytes, offsets, call.op))
    if not plan.ops:
        return None
    placement.items["dma_tiles"] = (memory, plan.tile_bytes)
    placement.dma = [p.as_dict() for p in plan.ops]
    for p in plan.ops:
        placement.notes.append(f"op {p.op_index} ({p.op}): {p.n_bands} band(s) of {p.band_rows} output rows by DMA "
                               f"through {memory} tiles" + (", its constants copied in" if p.copy_weights else ""))
    return plan


def filters_beyond_tiles(board, placement: Placement | None, graphs, streamable: dict[str, int]) -> dict[str, int]:
    """The int8 CONV_2D filters (of ``streamable``) that not one band of their op's rows can hold beside them in
    the tiles' memory, when the arena is elsewhere: such an op would read its filter from the slow memory for
    every pixel pair, where streamed it is read in chunks of channels through the same memory (edgernn_l3_conv.c:
    the input, a chunk and the patches in the tiles). name -> bytes."""
    rules = dma_rules(board)
    if rules is None or placement is None or placement.arena_in_team_memory or placement.items["arena"][0] == rules[0]:
        return {}
    memory = rules[0]
    room = placement.budgets[memory] - placement.used(memory)
    conv = kernels.kernel("edgernn_conv_s8")
    out = {}
    for rg in graphs:
        for call in (rg.calls if rg is not None else []):
            if call.fn not in ("edgernn_conv_s8", "edgernn_team_conv_s8") or not call.structs:
                continue
            w = dict(zip(conv.arg_names, call.args))["w"]
            if isinstance(w, TensorArg) or w.name not in streamable:
                continue
            g = dict(zip(GEOM_FIELDS, (int(v) for v in call.structs[0].fields)))
            if tile_bytes(g, 1, True, 1, 4) > room >= tile_bytes(g, 1, False, 1, 4):
                out[w.name] = streamable[w.name]
    return out


def band_args(plan: DmaPlan | None, prefix: str) -> dict[int, tuple[str, list]]:
    """op index -> (the banded kernel, the arguments before the team kernel's) for one graph."""
    if plan is None:
        return {}
    return {p.op_index: (p.fn, [ConstArg(TILES_VAR), StructArg(p.layout_name)])
            for p in plan.ops if p.graph == prefix}
