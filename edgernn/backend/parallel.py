"""Which kernel calls of a schedule the team shares, and the team kernel each one becomes.

A call is shared when the team gains by it. Two rules, chosen by the board file's ``[parallel]``:

- ``split_cycles`` (GAP8's cluster): by cost. Each call's cycles on one core are estimated at build time
  from its shape (``estimate_cycles``: per MAC and per output of a FULLY_CONNECTED, per element and per
  fused op of an element-wise loop); split over the team, the call takes the share of its largest
  sub-range (the range is cut in whole grains, so 20 rows in grains of 8 leave 8 to the busiest core)
  plus ``split_cycles``, what one split costs beyond the work (the master publishing the op, two barriers,
  each core's range). The call is shared when that is less than its one-core estimate: one core where
  eight lose.
- otherwise ``min_count``: a call is shared when its output range (features of a one-row FULLY_CONNECTED,
  else its rows; the elements of an element-wise op; the units of a fused LSTM, split anew at every time
  step) holds at least that many elements.

Each kernel's splits in the kernel table (edgernn/backend/kernels.py) say which argument the range is. The
team kernel (edgernn_team.h, generated from the kernel table) has the kernel's own arguments, so only the
name changes. Binary element-wise ops are shared only when their broadcast is one-dimensional, where a
sub-range is a shorter walk with offset pointers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from edgernn.backend.fusion import FusedCall
from edgernn.backend.kernels import BY_NAME, TEAM_KERNELS
from edgernn.backend.splits import split_count
from edgernn.backend.lowering import Call

DEFAULT_MIN_COUNT = 16
NOT_SHARED = 2**62      # a threshold no op reaches

# One GAP8 cluster core's cycles (int8, SIMD dot products, operands in L1), rounded from GVSOC profiles of
# the generated kernels (bench/profile_gap8.py): what a row of a FULLY_CONNECTED costs beyond its MACs (the
# requantization's mulh, the clamp, the store, the loop), a MAC of it, an element of a fused element-wise
# loop per op fused into it (most ops requantize), an element of another element-wise kernel, and below
# an output of a SUM.
CYCLES_PER_ROW = 50
CYCLES_PER_MAC = 1
CYCLES_PER_FUSED_OP = 25
CYCLES_PER_ELEMENT = 20
# The 16x8 FULLY_CONNECTED: a row's 64-bit requantization (about 150 cycles) and its scalar MACs (GVSOC
# profile of a trained CfC's int16 step, edgernn validate --profile: a call of 9 rows of 12 inputs, 2,075 cycles
# with the call's own; of 2 rows of 7, about 650)
CYCLES_PER_ROW_S16 = 150
CYCLES_PER_MAC_S16 = 4
# an output of a SUM by steps: per reduced element (a strided load and an add), and its binary search
CYCLES_PER_REDUCED = 4
CYCLES_PER_SEARCH = 100
_FC = ("edgernn_fully_connected_s8", "edgernn_fully_connected_group_s8", "edgernn_fully_connected_s16",
       "edgernn_fully_connected_group_s16", "edgernn_fully_connected_group_s16_words")


@dataclass(frozen=True)
class ShareRule:
    """The board's rule: ``split_cycles`` set, by cost over ``workers``; else by ``min_count``."""

    min_count: int = DEFAULT_MIN_COUNT
    workers: int = 0
    split_cycles: int | None = None


def share_rule(board) -> ShareRule:
    """The board's sharing rule. A board of one worker (``[parallel] workers = 1``) shares nothing: its
    team would run every split serially, so a team kernel would only add a call to each op."""
    if board is None:
        return ShareRule()
    parallel = board.parallel
    workers = parallel.workers or 0
    if workers == 1:
        return ShareRule(min_count=NOT_SHARED, workers=1)
    split = parallel.split_cycles
    return ShareRule(min_count=parallel.min_count, workers=workers,
                     split_cycles=split if split is not None and workers > 1 else None)


def min_count(board) -> int:
    """The board's count threshold (the rule of boards without ``split_cycles``)."""
    return share_rule(board).min_count


def _args(call) -> dict:
    k = BY_NAME[call.fn]
    return dict(zip(k.arg_names, call.args))


def split_grain(call) -> int:
    """The grain a team's split of ``call`` keeps: each worker's range starts on a multiple of it."""
    k = BY_NAME.get(call.fn)
    if k is None or not k.splits:
        return 1
    args = _args(call)
    for split in k.splits:
        if split.when is None or args.get(split.when[0]) == split.when[1]:
            return split.grain
    return 1


def estimate_cycles(call) -> int | None:
    """One core's cycles for ``call``, estimated from its shape; None where there is no estimate (the
    count rule then decides)."""
    if isinstance(call, FusedCall):
        return call.n * CYCLES_PER_FUSED_OP * max(len(call.members), 1)
    if call.fn in _FC:
        args = _args(call)
        rows = args.get("rows", 1)
        n_in, n_out = args.get("n_in"), args.get("n_out")
        if not all(isinstance(v, int) for v in (rows, n_in, n_out)):
            return None
        if call.fn.endswith("_s16"):
            return rows * n_out * (CYCLES_PER_ROW_S16 + CYCLES_PER_MAC_S16 * n_in)
        return rows * n_out * (CYCLES_PER_ROW + CYCLES_PER_MAC * n_in)
    if call.fn in ("edgernn_sum_thresholds_s8", "edgernn_sum_s16"):
        args = _args(call)
        reduced, inner = args.get("reduced"), args.get("inner")
        if not all(isinstance(v, int) for v in (reduced, inner)):
            return None
        search = CYCLES_PER_SEARCH if call.fn == "edgernn_sum_thresholds_s8" else 0
        return inner * (CYCLES_PER_REDUCED * reduced + search)
    k = BY_NAME.get(call.fn)
    if k is not None and k.source in ("edgernn_elementwise.c", "edgernn_lut16.c"):
        n = split_count(call)
        return None if n is None else n * CYCLES_PER_ELEMENT
    return None


def _shared_cycles(estimate: int, count: int, grain: int, workers: int, split_cycles: int) -> float:
    """The call's cycles split over the team: its busiest worker's share, plus the split's own cost."""
    units = math.ceil(count / grain)
    busiest = min(math.ceil(units / workers) * grain, count)
    return estimate * busiest / count + split_cycles


def worth_sharing(call, count: int, rule: ShareRule) -> bool:
    """Whether the team gains by splitting ``call`` (output range ``count``) under ``rule``."""
    if rule.split_cycles is not None:
        estimate = estimate_cycles(call)
        if estimate is not None and count > 0:
            return _shared_cycles(estimate, count, split_grain(call), rule.workers, rule.split_cycles) < estimate
    return count >= rule.min_count


def share_calls(calls: list[Call], rule: ShareRule | int) -> list[int]:
    """Rename the calls worth sharing to their team kernels; returns the operator indices shared.
    ``rule``: the board's (share_rule), or a bare count threshold."""
    if isinstance(rule, int):
        rule = ShareRule(min_count=rule)
    shared = []
    for call in calls:
        if isinstance(call, FusedCall):
            # a fused loop is an edgernn_range_fn over its elements: each worker runs its sub-range
            call.team = worth_sharing(call, call.n, rule)
            if call.team:
                shared.append(call.op_index)
            continue
        n = split_count(call)
        if n is not None and worth_sharing(call, n, rule):
            call.fn = TEAM_KERNELS[call.fn]
            shared.append(call.op_index)
    return shared
