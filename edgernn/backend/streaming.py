"""Weights read in chunks from the board's stream memory (the AI-deck's L3) while the team computes.

Placement (placement.py) decides which arrays go there, from the candidates this module names
(``streamable``: the weight matrices of the int8 fused LSTM, ``w_in`` and ``w_rec``, of the int8
FULLY_CONNECTED and its groups, ``w``, and the int8 CONV_2D's filter ``w``). This module then plans the rest, the one place it is computed:
the blob the firmware image carries (the streamed arrays, each on ``ALIGN`` bytes), each streamed call's
chunks (units per chunk, a multiple of the kernel's grain, the chunk's rows of its streamed matrices within
``CHUNK_BYTES`` unless one grain is more), the two slots of the double buffer in the tiles' memory, and the
bytes a step reads from the stream memory (the report's ``l3_bytes_per_step``). ``STREAMED`` is the table of
the kernels that stream. The C is templates/kernels/edgernn_l3_*.c (edgernn_l3_stream.h) and the board's
``stream_source`` (the transfers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from edgernn.backend import kernels
from edgernn.backend.values import NULL, ConstArg, StructArg
from edgernn.errors import EdgeRNNError

BLOB = "edgernn_l3.bin"              # the file of the flash image's readfs that holds the streamed arrays
KERNEL_HEADER = "edgernn_l3_stream.h"
KERNEL_SOURCE = "edgernn_l3_stream.c"  # the chunks' transfers, in every build that streams
TILES_VAR = "edgernn_l3_tiles"
ALIGN = 8
CHUNK_BYTES = 16384                  # a chunk's streamed rows at most (unless one grain is more)


@dataclass(frozen=True)
class Streamed:
    """A kernel whose weight matrices can be read in chunks of units (an LSTM's cells, a FULLY_CONNECTED's
    rows) by its streamed twin ``fn`` (templates/kernels/<source>), which takes the call's descriptor
    first, the call's own arguments (the streamed matrices NULL), and whether the team splits each chunk."""
    fn: str
    source: str
    matrices: tuple[str, ...]        # the arguments it can stream, matrix 0 then 1 of the descriptor
    grain: int                       # a chunk starts at a multiple of it (units)
    replaces: str = ""               # the source it includes and replaces in the build

    def dims(self, g, call) -> tuple[int, tuple[int, ...]]:
        """(units, the bytes of one unit in each matrix) of a call."""
        args = _args(call)
        if self.fn == "edgernn_l3_lstm_s8":
            params = args["p"]
            struct = next(s for s in [*g.structs, *call.structs] if s.name == params.name)
            n_in, n_cell = int(struct.fields[0]), int(struct.fields[1])
            return n_cell, (4 * n_in, 4 * n_cell)
        if self.fn == "edgernn_l3_conv_s8":
            geom = next(s for s in [*g.structs, *call.structs] if s.name == args["g"].name)
            f = kernels.struct_fields(geom)
            return int(f["out_c"]), (int(f["k_h"]) * int(f["k_w"]) * int(f["in_c"]),)
        return int(args["n_out"]), (int(args["n_in"]),)


_LSTM = Streamed("edgernn_l3_lstm_s8", "edgernn_l3_lstm.c", ("w_in", "w_rec"), 4, replaces="edgernn_lstm.c")
_FC = Streamed("edgernn_l3_fully_connected_s8", "edgernn_l3_fc.c", ("w",), 8, replaces="edgernn_fully_connected.c")
_GROUP = Streamed("edgernn_l3_fully_connected_group_s8", "edgernn_l3_fc.c", ("w",), 8,
                  replaces="edgernn_fully_connected.c")
_CONV = Streamed("edgernn_l3_conv_s8", "edgernn_l3_conv.c", ("w",), 8, replaces="edgernn_conv.c")
# kernel (and its team version) -> how it streams; the team version's arguments are its kernel's
STREAMED: dict[str, Streamed] = {
    "edgernn_lstm_s8": _LSTM, "edgernn_team_lstm_s8": _LSTM,
    "edgernn_fully_connected_s8": _FC, "edgernn_team_fully_connected_s8": _FC,
    "edgernn_fully_connected_group_s8": _GROUP, "edgernn_team_fully_connected_group_s8": _GROUP,
    "edgernn_conv_s8": _CONV, "edgernn_team_conv_s8": _CONV,
}
_TEAM_OF = {"edgernn_team_lstm_s8": "edgernn_lstm_s8",
            "edgernn_team_fully_connected_s8": "edgernn_fully_connected_s8",
            "edgernn_team_fully_connected_group_s8": "edgernn_fully_connected_group_s8",
            "edgernn_team_conv_s8": "edgernn_conv_s8"}


def stream_rules(board) -> tuple[str, str, str] | None:
    """(stream memory, tiles memory, C source) of a board that streams weights, or None."""
    if board is None:
        return None
    rules = board.placement
    memory, tiles, source = rules.weights_stream_memory, rules.stream_tiles_memory, rules.stream_source
    if not memory:
        return None
    if not (tiles and source):
        raise EdgeRNNError(f"board file {board.path}: placement.weights_stream_memory needs stream_tiles_memory "
                           "and stream_source")
    return str(memory), str(tiles), str(source)


def _streamed_calls(graphs):
    """(graph, call, how it streams) of each call of ``graphs`` whose kernel can stream, in schedule order."""
    for g in graphs:
        if g is None:
            continue
        for call in g.calls:
            how = STREAMED.get(getattr(call, "fn", None))
            if how is not None:
                yield g, call, how


def _args(call) -> dict:
    """A call's arguments by name (the team kernel has its kernel's)."""
    return dict(zip(kernels.kernel(_TEAM_OF.get(call.fn, call.fn)).arg_names, call.args))


def chunk_units(how: Streamed, units: int, unit_bytes: tuple[int, ...], streamed: tuple[bool, ...] | None = None) -> int:
    """Units per chunk: the most multiples of the grain whose streamed rows fit CHUNK_BYTES, one grain at
    least, and no more than the call's units (rounded up to the grain)."""
    streamed = streamed or (True,) * len(unit_bytes)
    per_unit = sum(b for b, on in zip(unit_bytes, streamed) if on)
    n = max(how.grain, CHUNK_BYTES // per_unit // how.grain * how.grain)
    return min(n, -(-units // how.grain) * how.grain)


def chunk_bytes(n: int, units: int, unit_bytes: tuple[int, ...], streamed: tuple[bool, ...]) -> int:
    """The bytes a slot needs for chunks of ``n`` units of a call of ``units``: each streamed matrix's rows of a
    chunk, at n units' bytes from the one before, the last one only as many units as a chunk can have (a Dense(2)
    over a CNN's 6,272 features needs 12,544 bytes, not the 50,176 of its grain of 8 rows)."""
    on = [b for b, o in zip(unit_bytes, streamed) if o]
    return sum(n * b for b in on[:-1]) + min(n, units) * on[-1] if on else 0


def streamable(board, graphs, arrays) -> dict[str, int]:
    """The arrays a kernel of ``graphs`` can read from the board's stream memory: name -> bytes."""
    if stream_rules(board) is None:
        return {}
    sizes = {a.name: kernels.SIZES[a.ctype] * len(a.values) for a in arrays}
    out = {}
    for _, call, how in _streamed_calls(graphs):
        args = _args(call)
        for name in how.matrices:
            if isinstance(args[name], ConstArg) and args[name].name in sizes:
                out[args[name].name] = sizes[args[name].name]
    return out


def slot_bytes(how: Streamed, units: int, unit_bytes: tuple[int, ...]) -> int:
    """The most bytes a chunk of a call can hold, whichever of its matrices stream: one matrix alone gets
    more units per chunk than both together, so its chunk may be the larger."""
    from itertools import product

    best = 0
    for on in product((False, True), repeat=len(unit_bytes)):
        if any(on):
            best = max(best, chunk_bytes(chunk_units(how, units, unit_bytes, on), units, unit_bytes, on))
    return best


def slot_bound(board, graphs) -> int:
    """The most bytes a slot can need, whichever arrays are streamed: the tiles placement keeps room for."""
    if stream_rules(board) is None:
        return 0
    best = 0
    for g, call, how in _streamed_calls(graphs):
        units, unit_bytes = how.dims(g, call)
        best = max(best, slot_bytes(how, units, unit_bytes))
    return best


@dataclass
class StreamedCall:
    graph: str                   # the RenderedGraph's prefix
    op_index: int
    name: str                    # its descriptor in model.c
    fn: str                      # its streamed kernel
    source: str                  # that kernel's C file
    units: int
    chunk_units: int
    l3: tuple[int, int]          # each matrix's byte offset in the blob, -1: on chip (or none)
    unit_bytes: tuple[int, int]
    streamed: list[str]          # the arrays it reads from the stream memory
    team: bool
    next: str = ""

    @property
    def fields(self) -> dict:
        return {"name": self.name, "units": self.units, "chunk_units": self.chunk_units, "l3": list(self.l3),
                "unit_bytes": list(self.unit_bytes), "next": self.next}


@dataclass
class StreamPlan:
    memory: str
    tiles_memory: str
    source: str
    blob: list[tuple[str, int, int]] = field(default_factory=list)   # (array, offset, bytes)
    calls: list[StreamedCall] = field(default_factory=list)
    slot_bytes: int = 0
    step_bytes: int = 0          # what one step reads from the stream memory

    @property
    def blob_bytes(self) -> int:
        return max((off + -(-n // ALIGN) * ALIGN for _, off, n in self.blob), default=0)

    @property
    def tile_bytes(self) -> int:
        return 2 * self.slot_bytes

    def as_dict(self) -> dict:
        return {"memory": self.memory, "blob": BLOB, "blob_bytes": self.blob_bytes, "tile_bytes": self.tile_bytes,
                "l3_bytes_per_step": self.step_bytes,
                "calls": [{"graph": c.graph, "op": c.op_index, "kernel": c.fn, "chunk_units": c.chunk_units,
                           "arrays": c.streamed}
                          for c in self.calls]}


def plan_streams(board, placement, graphs, arrays) -> StreamPlan | None:
    """The plan of the calls whose arrays placement put in the stream memory (after the team's sharing:
    the team's kernel splits each chunk), or None when none is."""
    if placement is None or not placement.streamed:
        return None
    memory, tiles, source = stream_rules(board)
    plan = StreamPlan(memory, tiles, source)
    sizes = {a.name: kernels.SIZES[a.ctype] * len(a.values) for a in arrays}
    offsets: dict[str, int] = {}
    at = 0
    for name in sorted(placement.streamed, key=lambda n: -placement.streamed[n]):
        offsets[name] = at
        plan.blob.append((name, at, sizes[name]))
        at += -(-sizes[name] // ALIGN) * ALIGN
    for g, call, how in _streamed_calls(graphs):
        args = _args(call)
        on = tuple(isinstance(args[k], ConstArg) and args[k].name in offsets for k in how.matrices)
        if not any(on):
            continue
        units, unit_bytes = how.dims(g, call)
        n = chunk_units(how, units, unit_bytes, on)
        plan.slot_bytes = max(plan.slot_bytes, chunk_bytes(n, units, unit_bytes, on))
        mine = [args[k].name for k, o in zip(how.matrices, on) if o]
        l3 = [offsets[args[k].name] if o else -1 for k, o in zip(how.matrices, on)]
        plan.calls.append(StreamedCall(g.prefix, call.op_index, f"{g.prefix}_op{call.op_index}_l3", how.fn,
                                       how.source, units, n, (*l3, -1)[:2], (*unit_bytes, 0)[:2], mine,
                                       call.fn.startswith("edgernn_team_")))
        if g.prefix == "edgernn_step":
            plan.step_bytes += sum(sizes[m] for m in mine)
    for k, c in enumerate(plan.calls):
        c.next = plan.calls[(k + 1) % len(plan.calls)].name
    missing = set(offsets) - {n for c in plan.calls for n in c.streamed}
    if missing:
        raise EdgeRNNError(f"internal: streamed arrays without a streamed call: {sorted(missing)}")
    placement.items["stream_tiles"] = (tiles, plan.tile_bytes)
    placement.notes.append(f"{len(plan.calls)} call(s) stream {plan.step_bytes} B a step from {memory} in chunks, "
                           f"double-buffered in {tiles} ({plan.tile_bytes} B)")
    return plan


def stream_args(plan: StreamPlan | None, prefix: str, fast: tuple[str, int] | None = None,
                scratch: dict[int, int] | None = None) -> dict[int, tuple[str, list, set, list]]:
    """op index -> (the streamed kernel, the arguments before the call's, the arrays passed as NULL, the
    arguments after it) for one graph. ``fast``: (the C name, bytes) of a work area in the team's fast memory
    that a streamed CONV_2D may use (GAP8: the DMA tiles), ``scratch``: each op's scratch bytes."""
    if plan is None:
        return {}
    out = {}
    for c in plan.calls:
        if c.graph != prefix:
            continue
        after = [1 if c.team else 0]
        if c.fn == _CONV.fn:
            after += ([ConstArg(fast[0]), fast[1]] if fast else [NULL, 0]) + [(scratch or {}).get(c.op_index, 0)]
        out[c.op_index] = (c.fn, [StructArg(c.name)], set(c.streamed), after)
    return out


def sources(plan: StreamPlan) -> list[str]:
    """The streamed kernels' C files a build with this plan compiles (edgernn_l3_stream.c first)."""
    return [KERNEL_SOURCE, *sorted({c.source for c in plan.calls})]


def replaced_sources() -> dict[str, str]:
    """Kernel source -> the streamed one that includes it and takes its place in a build that streams it."""
    return {how.replaces: how.source for how in STREAMED.values() if how.replaces}


def blob_bytes(plan: StreamPlan, arrays) -> bytes:
    """The stream memory's blob: the arrays' little-endian bytes at their offsets, zeros between."""
    import numpy as np

    by_name = {a.name: a for a in arrays}
    blob = bytearray(plan.blob_bytes)
    for name, offset, n in plan.blob:
        a = by_name[name]
        data = np.asarray(a.values, dtype={"int8_t": "<i1", "int16_t": "<i2", "int32_t": "<i4"}[a.ctype]).tobytes()
        assert len(data) == n
        blob[offset:offset + n] = data
    return bytes(blob)


def blob_checksum(blob: bytes) -> int:
    """FNV-1a over the blob's little-endian 32-bit words (its size is a multiple of ALIGN): what the
    firmware computes while it copies the blob at boot, so that it takes no other bytes for the weights
    (another image's file, a flash written by another tool)."""
    import numpy as np

    h = 0x811C9DC5
    for w in np.frombuffer(blob, dtype="<u4").tolist():
        h = ((h ^ w) * 0x01000193) & 0xFFFFFFFF
    return h


def write_blob(plan: StreamPlan | None, arrays, dest: Path) -> int | None:
    """The stream memory's blob, OUT/firmware/edgernn_l3.bin, or a stale one removed; returns the blob's
    checksum (blob_checksum), None without a blob."""
    path = Path(dest) / BLOB
    if plan is None:
        path.unlink(missing_ok=True)
        return None
    blob = blob_bytes(plan, arrays)
    path.write_bytes(blob)
    return blob_checksum(blob)
