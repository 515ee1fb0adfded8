"""Static arena plan by liveness.

Every runtime tensor that is neither a constant nor a persistent state input gets an offset in one
arena. A tensor lives from the operator that writes it to the last operator that reads it (graph
outputs live to the end of the step); two tensors may share bytes when their lives do not overlap.
Placement is greedy by size, as in TFLite Micro's GreedyMemoryPlanner, and the plan reports the bound
it is measured against: the largest total of tensor bytes alive at any one operator.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edgernn.backend.layout import align as _align


@dataclass
class Buffer:
    """One arena allocation: the tensors that share it (aliases) and its life in operator steps."""

    tensors: list[int]
    nbytes: int
    first: int
    last: int
    offset: int = -1


@dataclass
class ArenaPlan:
    buffers: list[Buffer]
    offsets: dict[int, int] = field(default_factory=dict)  # tensor index -> arena offset
    arena_bytes: int = 0
    liveness_bound_bytes: int = 0


def plan_arena(lives: list[tuple[list[int], int, int, int]]) -> ArenaPlan:
    """Place buffers given as (tensor indices, bytes, first step, last step), inclusive steps."""
    buffers = [Buffer(list(t), n, f, l) for t, n, f, l in lives]
    steps = [b.first for b in buffers] + [b.last for b in buffers]
    bound = 0
    if steps:
        for s in range(min(steps), max(steps) + 1):
            bound = max(bound, sum(b.nbytes for b in buffers if b.first <= s <= b.last))

    placed: list[Buffer] = []
    order = sorted(buffers, key=lambda b: (-b.nbytes, b.first, b.tensors[0]))
    for buf in order:
        conflicts = sorted(
            (p for p in placed if p.first <= buf.last and buf.first <= p.last), key=lambda p: p.offset
        )
        offset = 0
        for p in conflicts:
            if offset + buf.nbytes <= p.offset:
                break
            offset = max(offset, _align(p.offset + p.nbytes))
        buf.offset = offset
        placed.append(buf)

    plan = ArenaPlan(buffers)
    for buf in buffers:
        for t in buf.tensors:
            plan.offsets[t] = buf.offset
    plan.arena_bytes = _align(max((b.offset + b.nbytes for b in buffers), default=0))
    plan.liveness_bound_bytes = bound
    return plan
