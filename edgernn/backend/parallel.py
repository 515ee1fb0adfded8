"""Which kernel calls of a schedule the team shares, and the team kernel each one becomes.

A call is shared when its output range (features of a one-row FULLY_CONNECTED, else its rows; the
elements of an element-wise op; the units of a fused LSTM, split anew at every time step) holds at least the board's ``[parallel] min_count`` elements. The team
kernel (templates/kernels/edgernn_team.h) has the kernel's own arguments, so only the name changes.
Binary element-wise ops are shared only when their broadcast is one-dimensional, where a sub-range is a
shorter walk with offset pointers.
"""

from __future__ import annotations

from typing import Callable

from edgernn.backend.lowering import Call

DEFAULT_MIN_COUNT = 16


def _int(arg) -> int | None:
    try:
        return int(arg)
    except (TypeError, ValueError):
        return None


def _fc(rows_at: int, n_out_at: int) -> Callable[[Call], int | None]:
    def count(call: Call) -> int | None:
        rows, n_out = _int(call.args[rows_at]), _int(call.args[n_out_at])
        if rows is None or n_out is None:
            return None
        return n_out if rows == 1 else rows

    return count


def _binary(call: Call) -> int | None:
    for struct in call.structs:
        if struct.ctype == "edgernn_bcast_t":
            dims = struct.fields[0]
            return int(dims[3]) if all(int(d) == 1 for d in dims[:3]) else None
    return None


def _n_at(index: int) -> Callable[[Call], int | None]:
    return lambda call: _int(call.args[index])


def _lstm(call: Call) -> int | None:
    """The fused LSTM splits its units (n_cell, the second field of its parameter struct); its size is
    counted as its gate rows, four per unit, the measure of a FULLY_CONNECTED's outputs."""
    for struct in call.structs:
        if struct.ctype.startswith("edgernn_lstm_"):
            return 4 * int(struct.fields[1])
    return None


# kernel -> (team kernel, the size of its output range or None when it cannot be split)
TEAM_KERNELS: dict[str, tuple[str, Callable[[Call], int | None]]] = {
    "edgernn_fully_connected_f32": ("edgernn_team_fully_connected_f32", _fc(5, 7)),
    "edgernn_fully_connected_s8": ("edgernn_team_fully_connected_s8", _fc(9, 11)),
    "edgernn_fully_connected_s16": ("edgernn_team_fully_connected_s16", _fc(8, 10)),
    "edgernn_add_f32": ("edgernn_team_add_f32", _binary),
    "edgernn_sub_f32": ("edgernn_team_sub_f32", _binary),
    "edgernn_mul_f32": ("edgernn_team_mul_f32", _binary),
    "edgernn_addsub_s8": ("edgernn_team_addsub_s8", _binary),
    "edgernn_addsub_s16": ("edgernn_team_addsub_s16", _binary),
    "edgernn_mul_s8": ("edgernn_team_mul_s8", _binary),
    "edgernn_mul_s16": ("edgernn_team_mul_s16", _binary),
    "edgernn_addsub_n_s8": ("edgernn_team_addsub_n_s8", _n_at(4)),
    "edgernn_addsub_n_s16": ("edgernn_team_addsub_n_s16", _n_at(4)),
    "edgernn_addsub_const_s8": ("edgernn_team_addsub_const_s8", _n_at(4)),
    "edgernn_addsub_const_s16": ("edgernn_team_addsub_const_s16", _n_at(4)),
    "edgernn_mul_n_s8": ("edgernn_team_mul_n_s8", _n_at(3)),
    "edgernn_mul_n_s16": ("edgernn_team_mul_n_s16", _n_at(3)),
    "edgernn_unary_f32": ("edgernn_team_unary_f32", _n_at(2)),
    "edgernn_lut_s8": ("edgernn_team_lut_s8", _n_at(2)),
    "edgernn_logistic_s16": ("edgernn_team_logistic_s16", _n_at(3)),
    "edgernn_tanh_s16": ("edgernn_team_tanh_s16", _n_at(3)),
    "edgernn_lstm_s8": ("edgernn_team_lstm_s8", _lstm),
    "edgernn_lstm_f32": ("edgernn_team_lstm_f32", _lstm),
}


def min_count(board) -> int:
    parallel = (board.get("parallel", {}) or {}) if board is not None else {}
    return int(parallel.get("min_count", DEFAULT_MIN_COUNT))


def share_calls(calls: list[Call], threshold: int) -> list[int]:
    """Rename the calls worth sharing to their team kernels; returns the operator indices shared."""
    shared = []
    for call in calls:
        entry = TEAM_KERNELS.get(call.fn)
        if entry is None:
            continue
        team_fn, count = entry
        n = count(call)
        if n is not None and n >= threshold:
            call.fn = team_fn
            shared.append(call.op_index)
    return shared
