"""Grouped FULLY_CONNECTED: int8 FULLY_CONNECTED calls that follow each other in the schedule and read the
same input become one call of ``edgernn_fully_connected_group_s8`` over all their rows; 16x8 ones, one call of
``edgernn_fully_connected_group_s16`` (``_s16_words`` where every row's sum is bounded to int32).

A small recurrent cell (an NCP wiring's CfC) computes several tiny FULLY_CONNECTED ops of the same input
(four 15 -> 9, four 14 -> 5, four 7 -> 2): each call pays its own set-up and, its rows not being a multiple
of 8, a tail of single rows, each row one dot product and one requantization with its own loop. Their rows
together (36, 20, 8) fall into the 4-row blocks of the blocked layout, where each input byte is loaded
once for 4 rows, and the team splits them by blocks (20 rows reach 5 workers). Every row keeps its own bias
and multiplier; its right shift and its op's output zero point become two per-row constants of a high-word
rescale (``high_word_rescale``), so that a row needs no per-op parameter but its output pointer (``ends`` says
where each op's rows end). The clamp must be the same for the whole group; an op whose rows cannot take that
rescale is not grouped.

The 16x8 group is simpler: each row is computed as its own call computes it (the same row function), so the
ops' arrays are only laid one after the other, and the members share the input, its length, the rounding, the
output zero point and the clamp. What it saves is the calls: on GAP8's cluster a 16x8 call the team shares costs
some hundreds of cycles beyond its rows, and a CfC cell's four heads are four calls.

The calls grouped are adjacent in the schedule, so nothing moves but the later members' outputs, which
are written at the group's place (the memory plan sees that through ``members``, as for a fused loop).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edgernn.backend import fusion
from edgernn.backend.ir import Graph
from edgernn.backend.kernels import call_args, kernel_args
from edgernn.backend.lowering import Call, ConstArray
from edgernn.backend.lowering.blocking import GROUP_BLOCK_ROWS, blocked_rows
from edgernn.backend.values import NULL, ConstArg

ENABLED = True
FC = "edgernn_fully_connected_s8"
GROUP = "edgernn_fully_connected_group_s8"
FC_S16 = "edgernn_fully_connected_s16"
GROUP_S16 = "edgernn_fully_connected_group_s16"
GROUP_S16_WORDS = "edgernn_fully_connected_group_s16_words"
MAX_MEMBERS = 4     # the kernel's out0..out3


@dataclass
class GroupedCall(Call):
    """One call computing the rows of ``members`` (the original calls, in schedule order)."""

    members: list[Call] = field(default_factory=list)


def _key(call: Call) -> tuple | None:
    """What the members of a group must share: the kernel, the input, its length, the rounding and the clamp (and
    for the 16x8 kernel, whose rows keep their own requantization, the output zero point)."""
    if call.fn not in (FC, FC_S16) or call.more or call.scratch:
        return None
    a = call_args(call)
    if a["rows"] != 1:
        return None
    zp = a["output_offset"] if call.fn == FC_S16 else None
    return call.fn, a["in"], a["n_in"], a["rounding"], a["act_min"], a["act_max"], zp


INT32_MAX = 2**31 - 1


def high_word_rescale(graph: Graph, call: Call) -> tuple[list[int], list[int]] | None:
    """Each row's (rnd, shift) of the grouped kernel's rescale, ``(hi' + rnd) >> shift`` with the output zero
    point folded in (edgernn_fully_connected.c, fc_s8_group), or None when a row cannot take it: a right
    shift below 2, or a sum hi' + rnd that some input could take out of int32. The bound: an int8 input is
    at most 128 in magnitude, so |acc| <= |bias| + 128 * sum |w|, and |hi'| <= |acc| * |m| / 2^32 + 1."""
    a = call_args(call)
    zp = a["output_offset"]
    w = graph.tensors[graph.operators[call.op_index].inputs[1]].data.astype(np.int64)
    rnds, shifts = [], []
    for bias, m, sh, row in zip(_array(call, "bias"), _array(call, "multiplier"), _array(call, "shift"), w):
        e = -int(sh)
        if e < 2:
            return None
        rnd = (1 << (e - 2)) + zp * (1 << (e - 1))
        acc = abs(int(bias)) + 128 * int(np.abs(row).sum())
        if acc * abs(int(m)) // 2**32 + 1 + abs(rnd) > INT32_MAX:
            return None
        rnds.append(rnd)
        shifts.append(e - 1)
    return rnds, shifts


def _array(call: Call, arg: str) -> list:
    name = call_args(call)[arg].name
    return next(arr.values for arr in call.arrays if arr.name == name)


def _group(graph: Graph, members: list[Call], prefix: str) -> GroupedCall:
    if members[0].fn == FC_S16:
        return _group_s16(graph, members, prefix)
    first = members[0]
    a = call_args(first)
    weights = np.concatenate([graph.tensors[graph.operators[m.op_index].inputs[1]].data for m in members])
    ends, row = [], 0
    for m in members:
        row += int(call_args(m)["n_out"])
        ends.append(row)
    rescales = [high_word_rescale(graph, m) for m in members]
    base = f"{prefix}_op{first.op_index}_group"
    arrays = [
        ConstArray(f"{base}_w", "int8_t", blocked_rows(weights, GROUP_BLOCK_ROWS).tolist()),
        ConstArray(f"{base}_bias", "int32_t", [v for m in members for v in _array(m, "bias")]),
        ConstArray(f"{base}_mult", "int32_t", [v for m in members for v in _array(m, "multiplier")]),
        ConstArray(f"{base}_rnd", "int32_t", [v for r in rescales for v in r[0]]),
        ConstArray(f"{base}_shift", "int32_t", [v for r in rescales for v in r[1]]),
        ConstArray(f"{base}_ends", "int32_t", ends),
    ]
    outs = [call_args(m)["out"] for m in members] + [NULL] * (MAX_MEMBERS - len(members))
    args = {"in": a["in"], "w": ConstArg(arrays[0].name), "bias": ConstArg(arrays[1].name),
            "multiplier": ConstArg(arrays[2].name), "rnd": ConstArg(arrays[3].name),
            "shift": ConstArg(arrays[4].name), "rounding": a["rounding"], "ends": ConstArg(arrays[5].name),
            "row0": 0, "act_min": a["act_min"], "act_max": a["act_max"], "n_in": a["n_in"], "n_out": int(row),
            **{f"out{k}": o for k, o in enumerate(outs)}}
    return GroupedCall(first.op_index, first.op, GROUP, kernel_args(GROUP, args), arrays=arrays, members=members)


def _ends(members: list[Call]) -> list[int]:
    ends, row = [], 0
    for m in members:
        row += int(call_args(m)["n_out"])
        ends.append(row)
    return ends


INT16_REACH = 1 << 15     # the largest |x| of an int16 input


def words_s16(weights: np.ndarray, bias: list[int], shift: list[int], rounding: str) -> bool:
    """Whether 16x8 rows (``weights`` one row each) take edgernn_fully_connected_group_s16_words: every row's sum
    within int32 for any int16 input, |bias| + 2^15 * sum |w| <= INT32_MAX, and with LiteRT's double rounding a
    right shift of 3 to 31 (its 32-bit requantization's range; ruy's rounding takes any)."""
    reach = np.abs(weights.astype(np.int64)).sum(axis=1) * INT16_REACH
    if any(abs(int(b)) + int(r) > INT32_MAX for b, r in zip(bias, reach)):
        return False
    return rounding == "EDGERNN_ROUND_TWICE_UP" or all(-31 <= int(sh) <= -3 for sh in shift)


def _group_s16(graph: Graph, members: list[Call], prefix: str) -> GroupedCall:
    """The 16x8 group: the members' arrays one after the other, each row's requantization its own; in 32-bit
    words (an int32 bias) where every row's sum is bounded to int32 (``words_s16``). The 16x8 kernel reads its
    weights as a constant tensor (row-major); the group holds its own copy of the members' (``dropped_consts``
    says which tensors no call reads any more)."""
    first = members[0]
    a = call_args(first)
    ends = _ends(members)
    base = f"{prefix}_op{first.op_index}_group"
    weights = np.concatenate([graph.tensors[call_args(m)["w"].index].data.reshape(int(call_args(m)["n_out"]), -1)
                              for m in members])
    bias = [v for m in members for v in _array(m, "bias")]
    shift = [v for m in members for v in _array(m, "shift")]
    words = words_s16(weights, bias, shift, a["rounding"].name)
    fn = GROUP_S16_WORDS if words else GROUP_S16
    arrays = [ConstArray(f"{base}_w", "int8_t", weights.reshape(-1).tolist())]
    arrays += [ConstArray(f"{base}_{arg}", ctype, [v for m in members for v in _array(m, arg)])
               for arg, ctype in (("bias", "int32_t" if words else "int64_t"), ("multiplier", "int32_t"),
                                  ("shift", "int32_t"), ("scale", "int64_t"))]
    arrays.append(ConstArray(f"{base}_ends", "int32_t", ends))
    outs = [call_args(m)["out"] for m in members] + [NULL] * (MAX_MEMBERS - len(members))
    args = {"in": a["in"], **{arg: ConstArg(arr.name) for arg, arr in zip(("w", "bias", "multiplier", "shift",
                                                                           "scale", "ends"), arrays)},
            "rounding": a["rounding"], "output_offset": a["output_offset"], "act_min": a["act_min"],
            "act_max": a["act_max"], "row0": 0, "n_in": a["n_in"], "n_out": ends[-1],
            **{f"out{k}": o for k, o in enumerate(outs)}}
    return GroupedCall(first.op_index, first.op, fn, kernel_args(fn, args), arrays=arrays, members=members)


def group_calls(graph: Graph, calls: list[Call], prefix: str) -> list[Call]:
    """The schedule with each run of 2 to 4 adjacent groupable FULLY_CONNECTED calls of the same key as
    one grouped call (a longer run: groups of 4, then the rest)."""
    out: list[Call] = []
    run: list[Call] = []

    def flush():
        for k in range(0, len(run), MAX_MEMBERS):
            part = run[k:k + MAX_MEMBERS]
            out.append(_group(graph, part, prefix) if len(part) > 1 else part[0])
        run.clear()

    for call in calls:
        key = _key(call)
        if key is not None and call.fn == FC and high_word_rescale(graph, call) is None:
            key = None
        if run and key != _key(run[0]):
            flush()
        if key is None:
            out.append(call)
        else:
            run.append(call)
    flush()
    return out


def dropped_consts(calls: list[Call], consts: set[int]) -> set[int]:
    """Of the constant tensors ``consts``, those that only grouped 16x8 members read: their group holds
    them, so the step needs them no more."""
    taken = {call_args(m)["w"].index for c in calls
             if isinstance(c, GroupedCall) and c.fn in (GROUP_S16, GROUP_S16_WORDS) for m in c.members}
    read = set().union(*(fusion.reads(c) for c in calls)) if calls else set()
    return (taken & consts) - read


def outputs(call: Call) -> list[int]:
    """The tensors a grouped call writes, one per member."""
    return [call_args(m)["out"].index for m in call.members]
