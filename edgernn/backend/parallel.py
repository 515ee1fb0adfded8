"""Which kernel calls of a schedule the team shares, and the team kernel each one becomes.

A call is shared when its output range (features of a one-row FULLY_CONNECTED, else its rows; the
elements of an element-wise op; the units of a fused LSTM, split anew at every time step) holds at
least the board's ``[parallel] min_count`` elements; each kernel's splits in the kernel table
(edgernn/backend/kernels.py) say which argument that is. The team kernel (edgernn_team.h, generated from the kernel table)
has the kernel's own arguments, so only the name changes.
Binary element-wise ops are shared only when their broadcast is one-dimensional, where a sub-range is a
shorter walk with offset pointers.
"""

from __future__ import annotations

from edgernn.backend.fusion import FusedCall
from edgernn.backend.kernels import TEAM_KERNELS
from edgernn.backend.splits import split_count
from edgernn.backend.lowering import Call

DEFAULT_MIN_COUNT = 16
NOT_SHARED = 2**62      # a threshold no op reaches


def min_count(board) -> int:
    """The board's sharing threshold. A board of one worker (``[parallel] workers = 1``) shares nothing: its
    team would run every split serially, so a team kernel would only add a call to each op."""
    parallel = (board.get("parallel", {}) or {}) if board is not None else {}
    if int(parallel.get("workers", 0)) == 1:
        return NOT_SHARED
    return int(parallel.get("min_count", DEFAULT_MIN_COUNT))


def share_calls(calls: list[Call], threshold: int) -> list[int]:
    """Rename the calls worth sharing to their team kernels; returns the operator indices shared."""
    shared = []
    for call in calls:
        if isinstance(call, FusedCall):
            # a fused loop is an edgernn_range_fn over its elements: each worker runs its sub-range
            call.team = call.n >= threshold
            if call.team:
                shared.append(call.op_index)
            continue
        n = split_count(call)
        if n is not None and n >= threshold:
            call.fn = TEAM_KERNELS[call.fn]
            shared.append(call.op_index)
    return shared
