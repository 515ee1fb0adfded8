"""Weights read in chunks from the board's stream memory (the AI-deck's L3) while the team computes.

Placement (placement.py) decides which arrays go there, from the candidates this module names
(``streamable``: the int8 fused LSTM's gate matrices ``w_in`` and ``w_rec``). This module then plans the
rest, the one place it is computed: the blob the firmware image carries (the streamed arrays, each on
``ALIGN`` bytes), each streamed call's chunks (units per chunk, a multiple of the LSTM's grain of 4 units,
the chunk's rows of both matrices within ``CHUNK_BYTES``), the two slots of the double buffer in the
tiles' memory, and the bytes a step reads from the stream memory (the report's ``l3_bytes_per_step``).
The C is templates/kernels/edgernn_l3_lstm.c (the chunk loop over edgernn_lstm.c's own unit code) and the
board's ``stream_source`` (the transfers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from edgernn.backend import kernels
from edgernn.backend.values import ConstArg, StructArg
from edgernn.errors import EdgeRNNError

BLOB = "edgernn_l3.bin"              # the file of the flash image's readfs that holds the streamed arrays
KERNEL_SOURCE = "edgernn_l3_lstm.c"  # templates/kernels/: includes edgernn_lstm.c and replaces it in the build
KERNEL_HEADER = "edgernn_l3_lstm.h"
STREAMED_FN = "edgernn_l3_lstm_s8"
TILES_VAR = "edgernn_l3_tiles"
ALIGN = 8
GRAIN = 4                            # edgernn_lstm.c's LSTM_GRAIN: a chunk starts at a multiple of 4 units
CHUNK_BYTES = 16384                  # a chunk's streamed rows at most (unless one grain is more)
_LSTM_S8 = ("edgernn_lstm_s8", "edgernn_team_lstm_s8")
_STREAMED_ARGS = ("w_in", "w_rec")


def stream_rules(board) -> tuple[str, str, str] | None:
    """(stream memory, tiles memory, C source) of a board that streams weights, or None."""
    rules = (board.get("placement", {}) or {}) if board is not None else {}
    memory, tiles, source = (rules.get(k) for k in ("weights_stream_memory", "stream_tiles_memory", "stream_source"))
    if not memory:
        return None
    if not (tiles and source):
        raise EdgeRNNError(f"board file {board.path}: placement.weights_stream_memory needs stream_tiles_memory "
                           "and stream_source")
    return str(memory), str(tiles), str(source)


def _lstm_calls(graphs):
    for g in graphs:
        if g is None:
            continue
        for call in g.calls:
            if getattr(call, "fn", None) in _LSTM_S8:
                yield g, call


def _args(call) -> dict:
    """An LSTM call's arguments by name (the team kernel has its kernel's)."""
    return dict(zip(kernels.kernel(_LSTM_S8[0]).arg_names, call.args))


def _lstm_dims(g, call) -> tuple[int, int]:
    """(n_input, n_cell) of an int8 fused LSTM call, from its parameter struct's first two fields."""
    params = _args(call)["p"]
    struct = next(s for s in [*g.structs, *call.structs] if s.name == params.name)
    return int(struct.fields[0]), int(struct.fields[1])


def chunk_units(n_in: int, n_cell: int, in_streamed: bool = True, rec_streamed: bool = True) -> int:
    """Units per chunk: the most multiples of GRAIN whose streamed rows fit CHUNK_BYTES, GRAIN at least,
    and no more than the layer's units (rounded up to GRAIN)."""
    per_unit = 4 * ((n_in if in_streamed else 0) + (n_cell if rec_streamed else 0))
    units = max(GRAIN, CHUNK_BYTES // per_unit // GRAIN * GRAIN)
    return min(units, -(-n_cell // GRAIN) * GRAIN)


def streamable(board, graphs, arrays) -> dict[str, int]:
    """The arrays a kernel of ``graphs`` can read from the board's stream memory: name -> bytes."""
    if stream_rules(board) is None:
        return {}
    sizes = {a.name: kernels.SIZES[a.ctype] * len(a.values) for a in arrays}
    out = {}
    for _, call in _lstm_calls(graphs):
        args = _args(call)
        for name in _STREAMED_ARGS:
            if isinstance(args[name], ConstArg) and args[name].name in sizes:
                out[args[name].name] = sizes[args[name].name]
    return out


def slot_bound(board, graphs) -> int:
    """The most bytes a slot can need, whichever arrays are streamed: the tiles placement keeps room for."""
    if stream_rules(board) is None:
        return 0
    best = 0
    for g, call in _lstm_calls(graphs):
        n_in, n_cell = _lstm_dims(g, call)
        best = max(best, chunk_units(n_in, n_cell) * 4 * (n_in + n_cell))
    return best


@dataclass
class StreamedCall:
    graph: str                   # the RenderedGraph's prefix
    op_index: int
    name: str                    # its descriptor in model.c
    params: str                  # its parameter struct
    w_in_l3: int                 # byte offset in the blob, -1: on chip
    w_rec_l3: int
    chunk_units: int
    streamed: list[str]          # the arrays it reads from the stream memory
    team: bool
    next: str = ""

    @property
    def fields(self) -> dict:
        return {"name": self.name, "params": self.params, "w_in_l3": self.w_in_l3, "w_rec_l3": self.w_rec_l3,
                "chunk_units": self.chunk_units, "next": self.next}


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
                "calls": [{"graph": c.graph, "op": c.op_index, "chunk_units": c.chunk_units, "arrays": c.streamed}
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
    for g, call in _lstm_calls(graphs):
        args = _args(call)
        mine = {k: args[k].name for k in _STREAMED_ARGS if isinstance(args[k], ConstArg) and args[k].name in offsets}
        if not mine:
            continue
        n_in, n_cell = _lstm_dims(g, call)
        units = chunk_units(n_in, n_cell, "w_in" in mine, "w_rec" in mine)
        plan.slot_bytes = max(plan.slot_bytes, units * 4 * ((n_in if "w_in" in mine else 0) +
                                                            (n_cell if "w_rec" in mine else 0)))
        plan.calls.append(StreamedCall(g.prefix, call.op_index, f"{g.prefix}_op{call.op_index}_l3", args["p"].name,
                                       offsets.get(mine.get("w_in"), -1), offsets.get(mine.get("w_rec"), -1), units,
                                       list(mine.values()), call.fn.startswith("edgernn_team_")))
        if g.prefix == "edgernn_step":
            plan.step_bytes += sum(sizes[n] for n in mine.values())
    for k, c in enumerate(plan.calls):
        c.next = plan.calls[(k + 1) % len(plan.calls)].name
    missing = set(offsets) - {n for c in plan.calls for n in c.streamed}
    if missing:
        raise EdgeRNNError(f"internal: streamed arrays without a streamed call: {sorted(missing)}")
    placement.items["stream_tiles"] = (tiles, plan.tile_bytes)
    placement.notes.append(f"{len(plan.calls)} LSTM call(s) stream {plan.step_bytes} B a step from {memory} in chunks, "
                           f"double-buffered in {tiles} ({plan.tile_bytes} B)")
    return plan


def stream_args(plan: StreamPlan | None, prefix: str) -> dict[int, tuple[str, list, set, list]]:
    """op index -> (the streamed kernel, the arguments before the call's, the arrays passed as NULL, the
    arguments after it) for one graph."""
    if plan is None:
        return {}
    return {c.op_index: (STREAMED_FN, [StructArg(c.name)], set(c.streamed), [1 if c.team else 0])
            for c in plan.calls if c.graph == prefix}


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
