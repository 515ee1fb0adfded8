"""The backend's entry points, from a converted folder to OUT/firmware/: plan, then write.

``plan_firmware`` decides everything and writes nothing: it reads the step model (and head) and lowers both
to kernel calls (``lower_models``, codegen.lower_graph), places the arena, state and weights in the board's
memories (placement), lets the team share the large calls (parallel), plans DMA bands (tiling) and the
weights read in chunks (streaming), and returns a :class:`FirmwarePlan`. ``write_firmware`` copies the
kernels and renders the templates from a plan (codegen) and returns the :class:`FirmwareFacts` of the
build. ``generate_firmware`` is the two in turn.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from importlib import metadata
from pathlib import Path
from typing import Any

from edgernn.backend.codegen import (
    KERNEL_HEADERS,
    RenderedGraph,
    StateSlot,
    copy_dma_source,
    copy_stream_sources,
    copy_kernels,
    kernel_headers,
    fast_weights,
    link_model_frames,
    write_project,
    lower_graph,
    render,
    state_layout,
)
from edgernn.backend.ir import Graph
from edgernn.backend.kernels import SIZES
from edgernn.backend.layout import align
from edgernn.backend.lowering import ConstArray, ConstStruct
from edgernn.backend.cells import plan_cells
from edgernn.backend.parallel import TEAM_KERNELS, share_calls, share_rule
from edgernn.backend.placement import MemoryBudgetError, Placement, place
from edgernn.backend.reader import read_tflite
from edgernn.backend.values import ARENA, Place, TensorArg
from edgernn.backend import fusion, streaming
from edgernn.backend.streaming import StreamPlan
from edgernn.backend.tiling import TILES_VAR, DmaPlan, band_args, filters_beyond_tiles, plan_bands
from edgernn.errors import EdgeRNNError
from edgernn.outdir import MANIFEST, read_manifest


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "absent"


def _tools() -> str:
    return f"TensorFlow {_version('tensorflow')}, LiteRT {_version('ai-edge-litert')}"


def state_keys(graph, states: list | dict | None, input_key: str) -> list:
    """The states in manifest order: a name (an input and output of the step model), or
    (name, tensor index) for a variable tensor that a fused op updates in place."""
    if states:
        if isinstance(states, list) and states:
            keys = []
            for s in states:
                if isinstance(s, dict) and s.get("variable"):
                    try:
                        keys.append((str(s["name"]), int(s["tensor"])))
                    except (KeyError, TypeError, ValueError):
                        raise EdgeRNNError(f"manifest.json: variable state {s.get('name')!r} needs a tensor index") from None
                else:
                    keys.append(s["name"] if isinstance(s, dict) else str(s))
            return keys
        if isinstance(states, dict) and states:
            return list(states)
    keys = sorted(k for k in graph.inputs if k != input_key)
    return keys + [(t.name, t.index) for t in graph.tensors if t.is_variable]


def link_buffer_growth(board, frames: tuple[int, int], input_bytes: int, input_itemsize: int) -> tuple[str, int] | None:
    """(memory, bytes) the server's link buffers take past the board's frames, which the board's link memory
    (``placement.link_memory``) keeps in its ``reserved``: where one step's frames (received, sent) are larger,
    the receive buffer, the kept answer and its COBS copy grow (templates/firmware/protocol.h), and a wider-than-
    byte input gets its aligned copy of one step. None when the board names no link memory, or keeps its
    frames (``board.link.fixed``: EDGERNN_LINK_FIXED_FRAME=1)."""
    home = board.placement.link_memory
    if home is None or board.link.fixed:
        return None
    board_frame = board.link.max_frame
    rx, tx = (max(board_frame, f) for f in frames)

    def encoded(n: int) -> int:
        return n + n // 254 + 2

    growth = (rx - board_frame) + (tx - board_frame) + (encoded(tx) - encoded(board_frame))
    if rx > board_frame and input_itemsize > 1:
        growth += input_bytes
    return home, growth


def constant_bytes(arrays, structs) -> int:
    """The bytes of constant arrays and parameter structs, as weights.c holds them."""
    total = 0
    for a in arrays:
        total += SIZES[a.ctype] * len(a.values)
    for s in structs:
        total += SIZES[s.ctype]
    return total


def _weight_copy_bytes(arrays, structs) -> int:
    """The weights' copy in the team's fast memory: each constant starts on ALIGN bytes, and a word follows the
    last (model.c.j2's EDGERNN_FAST_WEIGHTS_BYTES)."""
    sizes = [SIZES[a.ctype] * len(a.values) for a in arrays] + [SIZES[s.ctype] for s in structs]
    return sum(align(n) for n in sizes) + 4 if sizes else 0


def _drop_table_copies(graphs) -> bool:
    """The fused loops read the kernels' own sigmoid table (edgernn_tables.c) instead of their copy of it
    (fusion.tables), which is dropped; whether there was one."""
    dropped = False
    for g in graphs:
        if g is None:
            continue
        drop = {a.name for a in g.arrays if a.name.endswith(fusion.SIGMOID16_COPY)}
        if drop:
            g.arrays = [a for a in g.arrays if a.name not in drop]
            g.same = {**{k: fusion.SIGMOID16_TABLE if v in drop else v for k, v in g.same.items()},
                      **{n: fusion.SIGMOID16_TABLE for n in drop}}
            dropped = True
    return dropped


def _lower_named(file_name: str, graph, *args, fuse_pools: bool = True):
    """lower_graph, with a refusal naming the file the op is in (step or head)."""
    from edgernn.backend.lowering import Unsupported

    try:
        return lower_graph(graph, *args, fuse_pools=fuse_pools)
    except Unsupported as exc:
        raise Unsupported(f"{file_name}: {exc}") from None


@dataclass(frozen=True)
class LoweredModels:
    """The step model (and head) read and lowered to kernel calls, before a board decides anything."""

    graph: Graph                          # the step model as read
    step: RenderedGraph                   # its kernel calls, constants and arena plan
    states: list[StateSlot]               # its states, in the manifest's order
    head: RenderedGraph | None = None     # the head model's, when the folder has one


@dataclass(frozen=True)
class FirmwarePlan:
    """What ``plan_firmware`` decided, before any file is written: the lowered models with the board's
    decisions applied to their calls (the team's kernels, DMA bands, streamed chunks, copies in the team's
    fast memory), and the bytes and placement the firmware will have."""

    board: Any                        # the loaded board (edgernn.targets.board.Board); None: the model alone
    models: LoweredModels
    quant: str                        # the manifest's quantization, else the step input's type
    arrays: list[ConstArray]          # every constant array of the step and head (the streamed ones too)
    structs: list[ConstStruct]
    arena_bytes: int                  # the static arena: the larger of the step's and the head's plan
    input_stage_bytes: int            # the step's input copied into the team's fast memory first (0: read in place)
    liveness_bound_bytes: int         # the least any placement of the same lives could need
    weight_bytes: int                 # constant arrays and structs
    state_bytes: int                  # the packed state (the link's STATE layout)
    state_storage_bytes: int          # the states as stored, each on ALIGN bytes
    link_frames: tuple[int, int]      # the raw frames one step needs (received, sent)
    placement: Placement | None       # None without a board
    fast_weights: list[dict]          # the constants copied into the team's fast memory at init
    team_ops: list[int]               # operator indices the team shares
    dma: DmaPlan | None               # the banded convolutions
    streams: StreamPlan | None        # the weights read in chunks from the stream memory
    functions: frozenset[str]         # the kernels the calls name

    @property
    def on_chip_arrays(self) -> list[ConstArray]:
        """The constant arrays weights.c holds: all but the streamed ones."""
        streamed = self.placement.streamed if self.streams else {}
        return [a for a in self.arrays if a.name not in streamed]

    @property
    def ops(self) -> list[str]:
        """The builtin ops of the step (and head) model."""
        head = self.models.head
        return sorted(set(self.models.graph.op_names) | (set(head.graph.op_names) if head else set()))


def lower_models(step_model: str | Path | bytes, *, states: list | dict | None = None,
                 head_model: str | Path | None = None, fuse_pools: bool = True) -> LoweredModels:
    """The step model (a step.tflite, or its bytes) and the head model (head.tflite), read and lowered to
    kernel calls. ``states``: the manifest's states entries (else the step model's inputs other than x, and
    its variable tensors). ``fuse_pools``: fuse each large int8 CONV_2D with the MAX_POOL_2D after it
    (edgernn/backend/conv_pool.py)."""
    name = "step.tflite" if isinstance(step_model, bytes) else Path(step_model).name
    graph = read_tflite(step_model)
    slots = state_layout(graph, state_keys(graph, states, "x"))
    step = _lower_named(name, graph, "edgernn_step", "x", "y", slots, fuse_pools=fuse_pools)
    head = None
    if head_model is not None:
        head = _lower_named(Path(head_model).name, read_tflite(head_model), "edgernn_head", "h", "y", [],
                            fuse_pools=fuse_pools)
    return LoweredModels(graph=graph, step=step, states=slots, head=head)


def _team_reads(graph, tensor: int) -> bool:
    """Whether a call the team shares (a team kernel, or a fused loop split across the team) reads ``tensor``."""
    for call in graph.calls:
        if isinstance(call, fusion.FusedCall):
            if call.team and any(tensor in fusion.tensor_inputs(m) for m in call.members):
                return True
        elif call.fn in TEAM_KERNELS.values() and TensorArg(tensor) in [a for c in [call, *call.more] for a in c.args]:
            return True
    return False


# A step input up to this size is copied into the team's fast memory by the step's body before its first op
# (placement item "input"): the team's cores then read it at L1 speed, and aligned, instead of byte by byte
# from the caller's buffer (on GAP8 in L2, some 9 cycles a load and more when 8 cores ask at once). A larger
# input (a frame) has its own way in (DMA bands).
INPUT_STAGE_MAX_BYTES = 512


def plan_firmware(out_dir: Path, board) -> FirmwarePlan:
    """The plan of OUT/firmware/ for ``board`` (a loaded board, edgernn.targets.board; None: the model alone)
    from OUT/step.tflite (+ head.tflite, manifest.json). Reads the folder and writes nothing; raises
    MemoryBudgetError when the model does not fit the board.

    A large int8 CONV_2D followed by a MAX_POOL_2D is fused with it (its output never whole) as the board's
    ``placement.conv_pool`` says: "always", or "to_fit" (the default), only when the plan without it does not fit:
    the fused pair computes the rows two bands share twice, and on GAP8 runs slower than the pair apart (PULP-Dronet
    at a quarter of its widths: 4.25 M cycles a frame fused, 2.87 M apart)."""
    if board is not None and board.placement.conv_pool not in ("to_fit", "always"):
        raise EdgeRNNError(f"board file {board.path}: placement.conv_pool is \"to_fit\" or \"always\", not "
                           f"{board.placement.conv_pool!r}")
    if board is None or board.placement.conv_pool == "always":
        return _plan_firmware(out_dir, board, fuse_pools=True)
    try:
        return _plan_firmware(out_dir, board, fuse_pools=False)
    except MemoryBudgetError:
        return _plan_firmware(out_dir, board, fuse_pools=True)


def _plan_firmware(out_dir: Path, board, fuse_pools: bool) -> FirmwarePlan:
    out_dir = Path(out_dir)
    step_path = out_dir / "step.tflite"
    if not step_path.is_file():
        raise EdgeRNNError(f"{step_path} not found: convert the model first (edgernn convert)")
    manifest = read_manifest(out_dir) if (out_dir / MANIFEST).is_file() else None
    head_path = out_dir / "head.tflite"
    models = lower_models(step_path, states=manifest.states if manifest else None,
                          head_model=head_path if head_path.is_file() else None, fuse_pools=fuse_pools)
    graph, step, head, states = models.graph, models.step, models.head, models.states

    x_t, y_t = graph.tensors[step.input_tensor], graph.tensors[step.output_tensor]
    head_output_bytes = head.graph.tensors[head.output_tensor].nbytes if head else 0
    packed = sum(s.nbytes for s in states)
    structs = step.structs + (head.structs if head else [])
    arena_bytes = max(step.plan.arena_bytes, head.plan.arena_bytes if head else 0)
    bound = max(step.plan.liveness_bound_bytes, head.plan.liveness_bound_bytes if head else 0)
    state_storage = sum(align(s.nbytes) for s in states)
    link_frames = link_model_frames(x_t.nbytes, max(y_t.nbytes, head_output_bytes), packed)

    stage = x_t.nbytes if x_t.nbytes <= INPUT_STAGE_MAX_BYTES else 0

    def placed(arrays):
        if board is None:
            return None
        streamable = streaming.streamable(board, [step, head], arrays)

        def attempt(always):
            return place(board, weight_bytes=constant_bytes(arrays, structs), state_bytes=state_storage,
                         input_stage_bytes=stage,
                         arena_bytes=arena_bytes, weight_copy_bytes=_weight_copy_bytes(arrays, structs),
                         link=link_buffer_growth(board, link_frames, x_t.nbytes, x_t.nbytes // max(x_t.size, 1)),
                         streamable=streamable, stream_tile_bytes=streaming.slot_bound(board, [step, head]) * 2,
                         stream_always=always)

        first = attempt(None)
        # a filter too large for the DMA tiles beside a band of its rows streams, read through the tiles in chunks
        wide = filters_beyond_tiles(board, first, [step, head], streamable)
        return attempt(wide) if wide else first

    arrays = step.arrays + (head.arrays if head else [])
    placement = placed(arrays)
    # the copy of the sigmoid table is worth its bytes only in the team's fast memory, and for enough lookups
    lookups = sum(fusion.sigmoid16_elements(g.calls) for g in (step, head) if g is not None)
    keep = placement is not None and placement.weights_in_team_memory and lookups >= fusion.SIGMOID16_COPY_ELEMENTS
    if not keep and _drop_table_copies([step, head]):
        arrays = step.arrays + (head.arrays if head else [])
        placement = placed(arrays)
    fast = fast_weights(arrays, structs) if placement and placement.weights_in_team_memory else []
    for g in (step, head):
        if g is not None:
            g.fast = {w["name"]: w["place"] for w in fast}
    rule = share_rule(board)
    shared = share_calls(step.calls, rule) + (share_calls(head.calls, rule) if head else [])
    if placement is not None and "input" in placement.items and not _team_reads(step, step.input_tensor):
        del placement.items["input"]     # only the master reads the input: no copy is worth its cycles
    # runs of team ops joined into one split by units (a recurrent cell's gates and their finish), after the
    # input's copy was decided: the run's workers read the input as its ops' team kernels did
    step.cells = plan_cells(step, rule)
    # the team's CONV_2D over an arena in L2: bands through DMA tiles in L1, when the board has them
    dma = plan_bands(board, placement, [step, head])
    for g in (step, head):
        if g is not None:
            g.dma = band_args(dma, g.prefix)
    # the LSTMs whose gate matrices placement put in the stream memory: read in chunks, double-buffered
    streams = streaming.plan_streams(board, placement, [step, head], arrays)
    for g in (step, head):
        if g is not None:
            # a streamed CONV_2D works in the DMA tiles (L1), free between the banded ops
            work = (TILES_VAR, dma.tile_bytes) if dma is not None else None
            g.streams = streaming.stream_args(streams, g.prefix, work, {c.op_index: c.scratch[1]
                                                                       for c in g.calls if c.scratch})
    return FirmwarePlan(
        board=board,
        models=models,
        quant=manifest.quant if manifest and manifest.quant else x_t.dtype,
        arrays=arrays,
        structs=structs,
        arena_bytes=arena_bytes,
        input_stage_bytes=x_t.nbytes if placement is not None and "input" in placement.items else 0,
        liveness_bound_bytes=bound,
        weight_bytes=constant_bytes(arrays, structs),
        state_bytes=packed,
        state_storage_bytes=state_storage,
        link_frames=link_frames,
        placement=placement,
        fast_weights=fast,
        team_ops=sorted(shared),
        dma=dma,
        streams=streams,
        functions=frozenset(c.fn for g in (step, head) if g for call in g.calls for c in [call, *call.more]),
    )


# A state from this many bytes on is copied back by words (edgernn_move_words) where both places allow it: below
# it, the function's code costs a cell that is bound by its instruction cache (GAP8: a CfC of 16 bytes of state)
# more than the bytes' copy (GVSOC: LSTM(64)'s two 64-byte copies, about 170 cycles saved).
WORD_COPY_MIN_BYTES = 64


def _word_copy(slot, out: Place) -> bool:
    """Whether the new state ``out`` goes back to its slot by words: long enough, a multiple of 4, both ends on 4
    bytes (the state's slots start on 8; an arena tensor on its offset), different memories or disjoint."""
    if slot.nbytes < WORD_COPY_MIN_BYTES or slot.nbytes % 4 or out.memory != ARENA or slot.offset % 4:
        return False
    return (out.offset + out.elements * SIZES[out.ctype]) % 4 == 0


def _render_context(plan: FirmwarePlan, l3_checksum: int | None) -> dict:
    """What the model templates (templates/model/) and the HAL's render from."""
    from edgernn._version import __version__

    board, placement, dma, streams = plan.board, plan.placement, plan.dma, plan.streams
    graph, step, head = plan.models.graph, plan.models.step, plan.models.head
    x_t, y_t = graph.tensors[step.input_tensor], graph.tensors[step.output_tensor]
    head_ctx = None
    if head is not None:
        hx, hy = head.graph.tensors[head.input_tensor], head.graph.tensors[head.output_tensor]
        head_ctx = {"graph": head, "input_size": hx.size, "output_size": hy.size, "in_ctype": hx.ctype,
                    "out_ctype": hy.ctype, "output_bytes": hy.nbytes}
    state_ctx = []
    packed = 0
    for s in plan.models.states:
        out = step.places[s.out_tensor]
        state_ctx.append({**s.__dict__, "packed_offset": packed, "in_expr": step.places[s.in_tensor],
                          "out_expr": out, "words": _word_copy(s, out)})
        packed += s.nbytes
    (xs, xz), (ys, yz) = x_t.qparams(), y_t.qparams()
    return {
        "version": __version__,
        "sha256": graph.sha256,
        "tools": _tools(),
        "quant": plan.quant,
        "input_size": x_t.size,
        "output_size": y_t.size,
        "output_bytes": y_t.nbytes,
        "in_ctype": x_t.ctype,
        "out_ctype": y_t.ctype,
        "input_scale": repr(float(xs)),
        "input_zero_point": xz,
        "output_scale": repr(float(ys)),
        "output_zero_point": yz,
        "state_bytes": plan.state_bytes,
        "state_storage_bytes": plan.state_storage_bytes,
        "link_model_frames": plan.link_frames,
        "states": state_ctx,
        "arena_bytes": plan.arena_bytes,
        "input_stage_bytes": plan.input_stage_bytes,
        "liveness_bound_bytes": plan.liveness_bound_bytes,
        "weight_bytes": plan.weight_bytes,
        "weights_section": board.placement.weights_section if board is not None else "",
        "weights_attribute": board.placement.weights_attribute if board is not None else "",
        "weights_attribute_header": board.placement.weights_attribute_header if board is not None else "",
        "arena_in_team_memory": bool(placement and placement.arena_in_team_memory),
        "arena_memory": placement.items["arena"][0] if placement else "ram",
        "state_in_team_memory": bool(placement and placement.state_in_team_memory),
        "state_memory": placement.items["state"][0] if placement else "ram",
        "fast_weights": plan.fast_weights,
        "dma_tile_bytes": dma.tile_bytes if dma else 0,
        "dma_header": Path(dma.source).with_suffix(".h").name if dma else "",
        "dma_layouts": dma.ops if dma else [],
        "weights_memory": placement.items["weights"][0] if placement else "ram",
        "weights_home": placement.items.get("weights_src", placement.items["weights"])[0] if placement else "ram",
        "step": step,
        "head": head_ctx,
        "arrays": plan.on_chip_arrays,
        "structs": plan.structs,
        "l3": ({"header": streaming.KERNEL_HEADER,
                "calls": [c.fields for c in streams.calls], "tiles_var": streaming.TILES_VAR,
                "tile_bytes": streams.tile_bytes, "slot_bytes": streams.slot_bytes, "blob": streaming.BLOB,
                "blob_bytes": streams.blob_bytes, "memory": streams.memory, "step_bytes": streams.step_bytes,
                "checksum": l3_checksum}
               if streams else None),
        "kernel_headers": kernel_headers(plan.functions),
    }


def write_firmware(plan: FirmwarePlan, dest: Path, *, verbose: bool = False) -> "FirmwareFacts":
    """Write the firmware folder ``dest`` (OUT/firmware/) from ``plan``: the kernels, the model and weights
    rendered, the stream memory's blob, and with a board its server, protocol and HAL; return the facts."""
    board, streams, placement = plan.board, plan.streams, plan.placement
    fw = Path(dest)
    fw.mkdir(parents=True, exist_ok=True)
    sources = copy_kernels(fw, board, plan.functions)
    sources += copy_dma_source(board, fw, plan.dma is not None)
    sources = copy_stream_sources(board, fw, sources, streams)
    checksum = streaming.write_blob(streams, plan.arrays, fw)
    context = _render_context(plan, checksum)
    render(context, fw)
    project_files = []
    if board is not None:
        project_files = write_project(board, fw, {**context, "sources": sources + ["model.c", "weights.c"]})
    if verbose:
        print(f"edgernn: wrote {fw} ({len(plan.models.graph.operators)} ops, arena {plan.arena_bytes} B, "
              f"liveness bound {plan.liveness_bound_bytes} B, constants {plan.weight_bytes} B)")
    return FirmwareFacts(
        arena_bytes=plan.arena_bytes,
        liveness_bound_bytes=plan.liveness_bound_bytes,
        weight_bytes=plan.weight_bytes,
        state_bytes=plan.state_bytes,
        firmware_dir=str(fw),
        sources=sources + ["model.c", "weights.c"],
        headers=list(KERNEL_HEADERS) + kernel_headers(plan.functions) + ["model.h", "weights.h"],
        ops=plan.ops,
        placement=({**placement.as_dict(), **({"streaming": streams.as_dict()} if streams else {})}
                   if placement else None),
        placement_table=placement.table() if placement else [],
        placement_notes=placement.notes if placement else [],
        team_ops=list(plan.team_ops),
        project_files=project_files,
        streaming=streams.as_dict() if streams else None,
    )


def generate_firmware(out_dir: Path, board, *, verbose: bool = False) -> "FirmwareFacts":
    """Write OUT/firmware/ from OUT/step.tflite (+ head.tflite); return the facts of the build: the plan
    (``plan_firmware``), then the files (``write_firmware``)."""
    plan = plan_firmware(out_dir, board)
    return write_firmware(plan, Path(out_dir) / "firmware", verbose=verbose)


@dataclass
class FirmwareFacts:
    """What write_firmware wrote and measured, read by attribute (``as_dict()`` for a JSON record)."""

    arena_bytes: int                  # the static arena: the larger of the step's and the head's plan
    liveness_bound_bytes: int         # the least any placement of the same lives could need
    weight_bytes: int                 # constant arrays and structs
    state_bytes: int                  # the packed state (the link's STATE layout)
    firmware_dir: str
    sources: list[str]                # the .c files (relative to firmware_dir) a main program links with
    headers: list[str]
    ops: list[str]                    # the builtin ops of the step (and head) model
    placement: dict | None            # Placement.as_dict(), None without a board
    placement_table: list
    placement_notes: list[str]
    team_ops: list[int]               # operator indices the team shares
    project_files: list[str]          # the server, protocol and HAL files written beside the model
    streaming: dict | None = None     # the weights read from the stream memory (streaming.StreamPlan.as_dict)

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}
