"""A step model's estimated cost from its lowered calls, without writing firmware: what ``--quant auto``
can set beside the error of each precision plan (issue 28).

The cycles are ``parallel.estimate_cycles``'s, one GAP8 cluster core's from the call's shape: constants
rounded from GVSOC's timing model of the int8 kernels (not measured on GAP8). They count every call once
on one core; a call with no estimate (a fused LSTM, a convolution) is named in ``unestimated`` rather
than guessed. The bytes are the backend's own: the constants as weights.c holds them and the arena's plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from edgernn.backend.fusion import FusedCall
from edgernn.backend.parallel import estimate_cycles


@dataclass
class StepCost:
    cycles_per_step: int                    # the estimated calls' sum, one core
    weight_bytes: int                       # constants: arrays and parameter structs
    arena_bytes: int                        # the planned arena
    state_bytes: int                        # the packed state, each state at its own width
    calls: int
    unestimated: list[str] = field(default_factory=list)   # kernels of the calls without an estimate

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _kernel_names(call) -> list[str]:
    if isinstance(call, FusedCall):
        return ["fused loop"]
    return [c.fn for c in [call, *call.more]]


def estimate_step_cost(step_file: str | Path, states: list | None = None) -> StepCost:
    """The cost of one step of ``step_file`` (a step.tflite). ``states``: the manifest's states entries
    (else the step model's inputs other than x, as ``generate_firmware`` reads a folder without one)."""
    from edgernn.backend.codegen import state_layout
    from edgernn.backend.firmware import _lower_named, _state_keys, _weight_bytes
    from edgernn.backend.reader import read_tflite

    step_file = Path(step_file)
    graph = read_tflite(step_file)
    slots = state_layout(graph, _state_keys(graph, states, "x"))
    step = _lower_named(step_file.name, graph, "edgernn_step", "x", "y", slots)
    cycles, missing = 0, []
    for call in step.calls:
        estimate = estimate_cycles(call)
        if estimate is None:
            missing += _kernel_names(call)
        else:
            cycles += estimate
    return StepCost(cycles_per_step=cycles, weight_bytes=_weight_bytes(step.arrays, step.structs),
                    arena_bytes=step.plan.arena_bytes, state_bytes=sum(s.nbytes for s in slots),
                    calls=len(step.calls), unestimated=sorted(set(missing)))
