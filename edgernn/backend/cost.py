"""A step model's estimated cost from its lowered calls, without writing firmware: what ``--quant auto``
weighs each precision plan by (docs/quantization.md, "The plan").

The cycles are one GAP8 cluster core's per call, by kernel and by element type, with constants rounded
from GVSOC's timing model of the generated kernels (``bench/profile_gap8.py --cores 1``, and ``validate
--profile`` of int8, int16 and mixed steps; not measured on GAP8): a call's own overhead, a FULLY_CONNECTED's
rows and MACs (the int8 kernels' SIMD dot products over 8-row blocks, the 16x8 kernel's scalar MACs and its
requantization), a fused loop's own cost, its members' constants and their elements by the member's kernel, a
QUANTIZE between int8 and int16 (a seam), an element-wise kernel's elements. With a board whose team shares
calls, a call the team shares (``parallel.share_calls``, the very rule of the build) costs its busiest worker's
share of the elements, the part every worker pays whole (``fixed_cycles``), plus what a split costs in GVSOC
(``SPLIT``), which is more than the board's ``split_cycles`` assumes for small calls.

These constants are this module's own: ``parallel.estimate_cycles``, which decides which calls the team
shares, is not changed by them. The bytes are the backend's own: the constants as weights.c holds them and
the arena's plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from edgernn.backend.fusion import FusedCall, looks_inputs_up
from edgernn.backend.fusion_loop import DEAD_ELEMENT_CYCLES, build_loop
from edgernn.backend.kernels import BY_NAME, call_args
from edgernn.backend.splits import split_count

# ---- one cluster core's cycles (GVSOC's timing model, rounded) ----
CALL = 60                  # a call from the step's body: the arguments, the jump, the return
SPLIT = 150                # a call the team shares: publishing it, two barriers (the board's split_cycles)
COPY = 50                  # a data-movement call (a memcpy of a run)
# FULLY_CONNECTED: per call, per row (the int8 kernels' rows in blocks of 8), per MAC (int8: over inputs
# in groups of 4). The 16x8 kernels' (the compact row function, grouped or not): fitted to the three grouped
# calls of a trained CfC's int16 step (36, 20 and 8 rows of 12, 14 and 7 inputs, GVSOC profile), whose per-call
# part is mostly the team's range set-up and the row function's
FC = {
    "edgernn_fully_connected_s8": (100, 30, 0.5),
    "edgernn_fully_connected_group_s8": (100, 45, 0.5),
    "edgernn_fully_connected_s16": (600, 100, 5),
    "edgernn_fully_connected_group_s16": (600, 100, 5),
    # in 32-bit words: no 64-bit product or requantization. A first estimate, not a fit: the trained CfC's int16
    # step fell by 897 cycles when its three groups moved to it (GVSOC, 8 cores), over its busiest worker's 9
    # rows and 109 MACs, taken as 60 a row and 3 a MAC less (867 of the 897)
    "edgernn_fully_connected_group_s16_words": (600, 40, 2),
}
# the instruction cache: the cluster's holds one FULLY_CONNECTED kernel's code, not both the int8 one
# (unrolled, with the SIMD dot products) and the 16x8 one; each move from one to the other along the
# step's calls reloads it (GVSOC: a mixed step's int8 FULLY_CONNECTED ran at 2.5-2.7 cycles an instruction
# against 1.6 in an int8 step)
SWITCH = 500
ENTRY = 1000               # a step's entry into the team and back (the cluster's side of the dispatch)
LOOP = 220                 # a fused loop's own cost: its pointers and loop
# a member of a fused loop, once per call, by the member's kernel: its constants folded into registers (a table
# lookup has only its table's address)
MEMBER = {"edgernn_lut_s8": 5, "edgernn_lut_s16": 5, "edgernn_requantize_s8_s16": 20, "edgernn_requantize_s16_s8": 20}
MEMBER_OTHER = 60
# an element of a member of a fused loop, by the member's kernel: fitted (non-negative least squares) to the
# team-shared loops of 17 GVSOC profiles of int8, int16 and mixed CfC, LTC, LSTM and SimpleRNN steps
# (validate --profile); an int8 DIV is the dearest (its reciprocal's Newton steps), a seam a requantization
FUSED_ELEMENT = {
    "edgernn_lut_s8": 5, "edgernn_mul_n_s8": 27, "edgernn_mul_s8": 27, "edgernn_addsub_n_s8": 15,
    "edgernn_addsub_s8": 15, "edgernn_addsub_const_s8": 15, "edgernn_div_s8": 600,
    "edgernn_addsub_n_s16": 40, "edgernn_addsub_s16": 40, "edgernn_addsub_const_s16": 40,
    "edgernn_add_blocks_n_s16": 40, "edgernn_add_blocks_const_s16": 40,
    "edgernn_add_blocks_n_s8": 40, "edgernn_add_blocks_const_s8": 35, "edgernn_add_blocks_s8": 40,
    "edgernn_mul_blocks_n_s8": 35, "edgernn_mul_blocks_s8": 35,
    "edgernn_mul_n_s16": 37, "edgernn_mul_s16": 37, "edgernn_logistic_s16": 30, "edgernn_tanh_s16": 30,
    "edgernn_lut_s16": 8, "edgernn_requantize_s8_s16": 20, "edgernn_requantize_s16_s8": 20,
}
# an int8 ADD/SUB member of a loop too short for its input tables (fusion.looks_inputs_up): the inputs
# rescaled in words (GVSOC, a trained CfC's int8 step: 633 cycles more over its 9 ADD/SUBs of 16 elements)
FUSED_ELEMENT_WORDS = {"edgernn_addsub_n_s8": 20, "edgernn_addsub_s8": 20}
KERNEL = 300               # an element-wise or other kernel's own cost, called alone
# an element of an element-wise kernel called alone (its constants not folded, no tables)
ELEMENT = {"edgernn_addsub_n_s8": 67, "edgernn_addsub_s8": 67, "edgernn_addsub_const_s8": 50,
           "edgernn_addsub_n_s16": 67, "edgernn_addsub_s16": 67, "edgernn_addsub_const_s16": 50,
           "edgernn_add_blocks_n_s16": 67, "edgernn_add_blocks_const_s16": 50,
           "edgernn_add_blocks_n_s8": 75, "edgernn_add_blocks_const_s8": 60, "edgernn_add_blocks_s8": 80,
           "edgernn_mul_blocks_n_s8": 55, "edgernn_mul_blocks_s8": 60,
           "edgernn_mul_n_s8": 45, "edgernn_mul_s8": 45, "edgernn_mul_n_s16": 45, "edgernn_mul_s16": 45,
           "edgernn_lut_s8": 5, "edgernn_logistic_s16": 45, "edgernn_tanh_s16": 45, "edgernn_div_s8": 80,
           "edgernn_requantize_s8_s16": 25, "edgernn_requantize_s16_s8": 25, "edgernn_sum_s16": 7, "edgernn_lut_s16": 6,
           # float32 between int16 tensors (an LTC's DIV under --quant auto): soft-float calls on GAP8, which has
           # no FPU (libgcc's division, the double product of DEQUANTIZE, float-to-int conversions), by estimate
           "edgernn_div_f32": 200, "edgernn_dequantize_s16_f32": 120, "edgernn_quantize_f32_s16_even": 100}
OTHER_ELEMENT = 20         # an output element of any other kernel


@dataclass
class StepCost:
    cycles_per_step: int                    # the estimated calls' sum (GAP8 cluster, GVSOC's timing model)
    weight_bytes: int                       # constants: arrays and parameter structs
    arena_bytes: int                        # the planned arena
    state_bytes: int                        # the packed state, each state at its own width
    calls: int
    shared: int = 0                         # calls the board's team shares
    by_kernel: dict = field(default_factory=dict)   # kernel (or "fused loop") -> estimated cycles

    @property
    def bytes(self) -> int:
        """Weights and arena: what a plan is held to beside its cycles."""
        return self.weight_bytes + self.arena_bytes

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _padded(n: int, block: int) -> int:
    return -(-n // block) * block


def _fc_cycles(call) -> int | None:
    per_call, per_row, per_mac = FC[call.fn]
    a = call_args(call)
    rows, n_in, n_out = a.get("rows", 1), a.get("n_in"), a.get("n_out")
    if not all(isinstance(v, int) for v in (rows, n_in, n_out)):
        return None
    if call.fn.endswith("_s8"):
        n_out, n_in = _padded(n_out, 8), _padded(n_in, 4)
    return round(per_call + rows * n_out * (per_row + per_mac * n_in))


def _elements(call) -> int | None:
    n = split_count(call)
    if n is None:
        a = call_args(call) if call.fn in BY_NAME else {}
        n = a.get("n") if isinstance(a.get("n"), int) else None
    return n


def dead_elements(call, const_values) -> int:
    """How many elements of a fused loop skip their members' arithmetic (fusion_loop.Dead: an NCP wiring's
    masked synapses), 0 for another call. ``const_values(t)``: a constant tensor's values, else None."""
    if not isinstance(call, FusedCall):
        return 0
    structs = {s.name: s for m in call.members for s in m.structs}
    dead = build_loop(call, lambda t: None, structs, const_values=const_values).dead
    return 0 if dead is None else int(dead.skipped.sum())


def call_cycles(call, dead: int = 0) -> int:
    """One core's estimated cycles for ``call`` (a lowered call, a fused loop or a grouped call). ``dead``: a
    fused loop's elements that skip its members (dead_elements), which cost a test and their stores."""
    if isinstance(call, FusedCall):
        words = {} if looks_inputs_up(call) else FUSED_ELEMENT_WORDS
        live = call.n - dead
        return (fixed_cycles(call) + dead * DEAD_ELEMENT_CYCLES
                + live * sum(words.get(m.fn) or FUSED_ELEMENT.get(m.fn, OTHER_ELEMENT) for m in call.members))
    if call.fn in FC:
        fc = _fc_cycles(call)
        if fc is not None:
            return fc
    if all(c.fn == "edgernn_copy_runs" for c in [call, *call.more]):
        return COPY * (1 + len(call.more))
    if call.fn == "edgernn_sum_s16":
        a = call_args(call)
        return KERNEL + ELEMENT[call.fn] * a["outer"] * a["reduced"] * a["inner"]
    n = _elements(call)
    return KERNEL + (n or 1) * ELEMENT.get(call.fn, OTHER_ELEMENT)


def _share(call) -> tuple[int, int] | None:
    """(output range, grain) of a call as the team splits it, or None when it cannot."""
    from edgernn.backend.parallel import split_grain

    count = call.n if isinstance(call, FusedCall) else split_count(call)
    return (count, split_grain(call)) if count else None


def fixed_cycles(call) -> int:
    """The part of ``call_cycles`` that every worker of a shared call pays whole: a fused loop's own cost and
    its members' constants, a FULLY_CONNECTED's per-call cost."""
    if isinstance(call, FusedCall):
        return LOOP + sum(MEMBER.get(m.fn, MEMBER_OTHER) for m in call.members)
    if call.fn in FC:
        return FC[call.fn][0]
    return 0


def _team_cycles(one_core: int, share: tuple[int, int] | None, workers: int, fixed: int = 0) -> int:
    """A shared call: its busiest worker's share of ``one_core`` beyond ``fixed``, ``fixed`` itself, plus the
    split."""
    if share is None or not workers:
        return one_core + SPLIT
    count, grain = share
    busiest = min(math.ceil(math.ceil(count / grain) / workers) * grain, count)
    return fixed + round((one_core - fixed) * busiest / count) + SPLIT


def estimate_step_cost(step_file: str | Path | bytes, states: list | None = None, board=None) -> StepCost:
    """The cost of one step of ``step_file`` (a step.tflite, or its bytes). ``states``: the manifest's states entries
    (else the step model's inputs other than x, as ``generate_firmware`` reads a folder without one).
    ``board`` (a loaded board, edgernn.targets.board): the calls its team shares are counted as shared;
    without one, every call runs on one core. The step is lowered as the build's plan lowers it
    (firmware.lower_models) and shared by the build's rule; it is not placed in the board's memories."""
    from edgernn.backend.firmware import constant_bytes, lower_models
    from edgernn.backend.kernels import TEAM_KERNELS
    from edgernn.backend.parallel import share_calls, share_rule

    lowered = lower_models(step_file, states=states)
    step = lowered.step
    # before the team renames its kernels
    graph = lowered.graph
    consts = {t: graph.tensors[t].data for t in range(len(graph.tensors)) if graph.tensors[t].is_const}
    own = {id(call): (call_cycles(call, dead_elements(call, consts.get)), _share(call), fixed_cycles(call))
           for call in step.calls}
    names = {id(call): "fused loop" if isinstance(call, FusedCall) else call.fn for call in step.calls}
    rule = None
    if board is not None:
        rule = share_rule(board)
        share_calls(step.calls, rule)
    team = set(TEAM_KERNELS.values())
    cycles, shared, by_kernel, last_fc = 0, 0, {}, None
    for call in step.calls:
        c, share, fixed = own[id(call)]
        if rule is not None and (getattr(call, "team", False) or call.fn in team):
            c, shared = _team_cycles(c, share, rule.workers, fixed), shared + 1
        c += CALL
        fc = names[id(call)] in FC and names[id(call)].endswith("_s16")
        if names[id(call)] in FC:
            if last_fc is not None and fc != last_fc:
                c += SWITCH
            last_fc = fc
        cycles += c
        by_kernel[names[id(call)]] = by_kernel.get(names[id(call)], 0) + c
    if rule is not None and rule.workers > 1:
        cycles += ENTRY
    return StepCost(cycles_per_step=cycles, weight_bytes=constant_bytes(step.arrays, step.structs),
                    arena_bytes=step.plan.arena_bytes, state_bytes=sum(s.nbytes for s in lowered.states),
                    calls=len(step.calls), shared=shared, by_kernel=by_kernel)
