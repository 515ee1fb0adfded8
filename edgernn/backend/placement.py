"""Where the weights, the state and the arena go on a board, checked against its memory budget.

The board file says it (``[placement]``): ``weights_memory``, ``state_memory`` and ``arena_memory`` (a
memory name, or a list tried in order: the first with room left wins). A memory's budget is its
``size`` less its ``reserved`` bytes (runtime, code, stacks, link buffers). A memory marked
``team_memory = true`` is allocated at init through the team (cluster L1 on GAP8) rather than
statically. A model that does not fit is refused with a table of what goes where.

The arena is placed first, then the state, then the weights. State in a team memory is taken at init as
the arena is; the board must let every core that calls edgernn_get_state/set_state/reset reach it (GAP8's
fabric controller reaches the cluster's L1 through its global address). The weights' last choice is their home: the memory the
firmware image puts the const arrays of weights.c in. An earlier choice must be a team memory: when the
weights fit there, with the arena, the firmware copies them once at init from their home into it and the
kernels read the copy (item ``weights``), while the home keeps the source (item ``weights_src``).

When the weights do not fit their home and the board names a memory for streamed weights
(``weights_stream_memory``, the AI-deck's HyperRAM, L3), the constant arrays that a kernel can read in
chunks from there (``streamable``: name -> bytes, the largest first) move to it one by one until the
home fits; each is an item of its own (``<memory>:<array>``, ``l3:...`` on the AI-deck), so the table shows each one's home. The arena
and the state never go there. Only a model that fits neither is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edgernn.errors import EdgeRNNError


class MemoryBudgetError(EdgeRNNError):
    """The model does not fit the board's memories; ``details`` holds the placement table."""

    def __init__(self, message: str, details: list[str]):
        super().__init__(message)
        self.details = details


@dataclass
class Placement:
    board: str
    items: dict[str, tuple[str, int]]                 # item -> (memory, bytes)
    budgets: dict[str, int]                           # memory -> usable bytes
    arena_in_team_memory: bool = False
    weights_in_team_memory: bool = False
    state_in_team_memory: bool = False
    notes: list[str] = field(default_factory=list)
    dma: list[dict] = field(default_factory=list)     # the banded convolutions' plans (edgernn/backend/tiling.py)
    streamed: dict[str, int] = field(default_factory=dict)   # weight arrays read in chunks from the stream memory
    stream_memory: str = ""                           # where they are (the board's weights_stream_memory)

    @property
    def streamed_bytes(self) -> int:
        return sum(self.streamed.values())

    def used(self, memory: str) -> int:
        return sum(n for mem, n in self.items.values() if mem == memory)

    def table(self) -> list[str]:
        width = max([11] + [len(item) for item in self.items])
        rows = [f"{'item':<{width}} {'memory':<8} {'bytes':>10}"]
        for item, (mem, n) in self.items.items():
            rows.append(f"{item:<{width}} {mem:<8} {n:>10}")
        rows.append(f"{'memory':<8} {'used':>10} {'budget':>10} {'overflow':>10}")
        for mem, budget in self.budgets.items():
            used = self.used(mem)
            if used == 0:
                continue
            over = max(0, used - budget)
            rows.append(f"{mem:<8} {used:>10} {budget:>10} {over if over else '-':>10}")
        return rows

    def as_dict(self) -> dict:
        return {"items": {k: {"memory": m, "bytes": n} for k, (m, n) in self.items.items()},
                "budgets": dict(self.budgets), "arena_in_team_memory": self.arena_in_team_memory,
                "weights_in_team_memory": self.weights_in_team_memory,
                "state_in_team_memory": self.state_in_team_memory, **({"dma": list(self.dma)} if self.dma else {}),
                **({"streamed": {"memory": self.stream_memory, "arrays": dict(self.streamed),
                                 "bytes": self.streamed_bytes}} if self.streamed else {})}


def _budgets(board) -> dict[str, int]:
    return {m.name: m.budget for m in board.memories_typed}


def _choices(value, default: str) -> list[str]:
    if value is None:
        return [default]
    return [value] if isinstance(value, str) else list(value)


def _checked_choices(board, budgets: dict[str, int], key: str, first: str) -> list[str]:
    choices = _choices(getattr(board.placement, key), first)
    for name in choices:
        if name not in budgets:
            raise EdgeRNNError(f"board file {board.path}: placement.{key} names no memory {name!r}")
    return choices


def _is_team_memory(board, name: str) -> bool:
    return board.memory_typed(name).team_memory


def _place_weights_copy(board, placement: Placement, choices: list[str], weight_bytes: int, copy_bytes: int) -> None:
    """Move the weights to the first earlier choice (a team memory) with room left for their copy
    (``copy_bytes``: the constants with their alignment); their home keeps the source."""
    home = choices[-1]
    for name in choices[:-1]:
        if not _is_team_memory(board, name):
            raise EdgeRNNError(f"board file {board.path}: placement.weights_memory: {name!r} comes before the "
                               f"weights' home {home!r} but is not a team memory (copied into at init)")
        if placement.used(name) + copy_bytes <= placement.budgets[name]:
            placement.items = {**placement.items, "weights": (name, copy_bytes), "weights_src": (home, weight_bytes)}
            placement.weights_in_team_memory = True
            return
    if choices[:-1] and weight_bytes:
        placement.notes.append(f"weights ({weight_bytes} B) do not fit {choices[0]}: read from {home}")


def _stream_weights(board, placement: Placement, streamable: dict[str, int], tile_bytes: int,
                    always: dict[str, int] | None = None) -> None:
    """Move streamable arrays, the largest first, from the weights' home to the stream memory until the
    home fits its budget (nothing moves when it fits already), with room kept for the double buffer
    (``tile_bytes``, item ``stream_tiles`` in the board's stream_tiles_memory). ``always``: arrays that move
    first, whether the home fits or not (a filter that its op reads faster in chunks: plan_firmware)."""
    memory = board.placement.weights_stream_memory
    always = {n: b for n, b in (always or {}).items() if n in streamable}
    if not memory or not streamable:
        return
    tiles = board.placement.stream_tiles_memory or memory
    for name in (memory, tiles):
        if name not in placement.budgets:
            raise EdgeRNNError(f"board file {board.path}: placement names no memory {name!r} to stream weights")
    home, weight_bytes = placement.items["weights"]
    if placement.used(home) <= placement.budgets[home] and not always:
        return
    placement.items["stream_tiles"] = (tiles, int(tile_bytes))
    over = placement.used(home) - placement.budgets[home] - sum(always.values())
    moved: dict[str, int] = dict(always)
    for name, n in sorted(streamable.items(), key=lambda kv: (-kv[1], kv[0])):
        if name in moved:
            continue
        if over <= 0:
            break
        moved[name] = int(n)
        over -= int(n)
    placement.items["weights"] = (home, weight_bytes - sum(moved.values()))
    for name, n in moved.items():
        placement.items[f"{memory}:{name}"] = (memory, n)
    placement.streamed, placement.stream_memory = moved, str(memory)
    placement.notes.append(f"weights ({weight_bytes} B) do not fit {home}: {len(moved)} array(s), "
                           f"{sum(moved.values())} B, read in chunks from {memory}")


def place(board, *, weight_bytes: int, state_bytes: int, arena_bytes: int,
          weight_copy_bytes: int | None = None, link: tuple[str, int] | None = None,
          streamable: dict[str, int] | None = None, stream_tile_bytes: int = 0,
          input_stage_bytes: int = 0, stream_always: dict[str, int] | None = None) -> Placement:
    """Put weights, state and arena in the board's memories; raise MemoryBudgetError when over budget.
    ``input_stage_bytes``: a copy of the step's input beside the arena when the arena is in a team memory
    (item ``input``: the step's body copies its input there first, so that the team's cores read it from
    their fast memory rather than from where the caller left it, GAP8's L2); none elsewhere.
    ``weight_copy_bytes``: the size of the weights' copy in a team memory (default: ``weight_bytes``).
    ``link``: (memory, bytes) of the link's buffers beyond what the memory's ``reserved`` keeps for them
    (a frame model's receive buffer, edgernn.backend.firmware.link_buffer_growth), charged as item ``link``.
    ``streamable``: the weight arrays a kernel can read in chunks from the board's stream memory, through
    double buffers of ``stream_tile_bytes`` (edgernn/backend/streaming.py); ``stream_always``: those of them
    that go there even when the weights' home has room."""
    budgets = _budgets(board)
    first = board.memories_typed[0].name
    weights_choices = _checked_choices(board, budgets, "weights_memory", first)
    state_choices = _checked_choices(board, budgets, "state_memory", first)
    arena_choices = _checked_choices(board, budgets, "arena_memory", first)
    items = {"weights": (weights_choices[-1], int(weight_bytes)), "state": (state_choices[-1], int(state_bytes))}
    if link and link[1] > 0:
        items["link"] = (link[0], int(link[1]))
    fixed = Placement(board.name, dict(items), budgets)

    arena_mem = arena_choices[-1]
    for name in arena_choices:
        if fixed.used(name) + arena_bytes <= budgets[name]:
            arena_mem = name
            break
    items["arena"] = (arena_mem, int(arena_bytes))
    placement = Placement(board.name, items, budgets, arena_in_team_memory=_is_team_memory(board, arena_mem))
    if input_stage_bytes and placement.arena_in_team_memory:
        placement.items["input"] = (arena_mem, -(-int(input_stage_bytes) // 8) * 8)
    if arena_mem != arena_choices[0]:
        placement.notes.append(f"arena ({arena_bytes} B) does not fit {arena_choices[0]}: placed in {arena_mem}")
    for name in state_choices[:-1]:
        if placement.used(name) + state_bytes <= budgets[name]:
            placement.items["state"] = (name, int(state_bytes))
            placement.state_in_team_memory = _is_team_memory(board, name)
            break
    copy_bytes = int(weight_bytes if weight_copy_bytes is None else weight_copy_bytes)
    _place_weights_copy(board, placement, weights_choices, int(weight_bytes), copy_bytes)
    if not placement.weights_in_team_memory:
        _stream_weights(board, placement, dict(streamable or {}), stream_tile_bytes, stream_always)
    over = [(mem, placement.used(mem) - budget) for mem, budget in budgets.items()
            if placement.used(mem) > budget]
    if over:
        what = ", ".join(f"{mem} by {n} B" for mem, n in over)
        raise MemoryBudgetError(
            f"the model does not fit board {board.name}: over budget in {what} "
            f"(budget = size less reserved, from {board.path.name}; the table shows what goes where)",
            placement.table())
    return placement
