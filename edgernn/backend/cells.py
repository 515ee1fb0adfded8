"""One split by units for a run of the team's ops: a recurrent cell's gate rows, their element-wise
finish and its state update in one edgernn_team_split, with no barrier between the ops.

A decomposed LSTM step is two FULLY_CONNECTEDs of 4U rows (the state's, the input's), element-wise loops
over the 4U gate pre-activations, then a loop over the U units. Split op by op, each op is a split of its
own: a publication and two barriers each, and a worker's share of one op is not the share it reads in the
next. GreenWaves' RNN_SQ8 splits the cell by output units instead: each core computes its units' rows of
every gate and finishes them. Here the same holds for any run of consecutive team ops whose output ranges
are G x U elements laid out gate by gate (element i belongs to unit i % U): a worker owns units
[begin, end) and runs each op on the sub-ranges g * U + [begin, end), g < G, with the op's unchanged kernel
(the bytes do not depend on the split), then the next op.

That is only right when no worker reads or writes a byte another worker's units write: ``unit_conflict``
checks it byte by byte on the memory plan (arena, state), whatever the number of workers. A FULLY_CONNECTED
reads its whole input, so a run that writes what a later FULLY_CONNECTED of the run reads is cut there.
A kernel that splits in grains (the int8 FULLY_CONNECTED's blocks of 8 rows) needs U a multiple of its grain
when G > 1, so that every worker's sub-range starts on a block; the workers then own units in that grain.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from edgernn.backend import fusion
from edgernn.backend.kernels import BY_NAME, SIZES, TEAM_KERNELS
from edgernn.backend.parallel import ShareRule, _shared_cycles, estimate_cycles, split_grain
from edgernn.backend.splits import split_count
from edgernn.backend.values import ARENA, STATE, ConstArg, TensorArg

PLAIN = {team: plain for plain, team in TEAM_KERNELS.items()}
# What a worker pays, beyond the work, for each extra call of a kernel's sub-range (G calls instead of one):
# the call, its arguments, a block's set-up (GVSOC's profile of the int8 FULLY_CONNECTED: some 40 cycles)
CYCLES_PER_SUBCALL = 40
# the kernels whose sub-range writes exactly its elements' outputs, one after the other (the split's `out`
# advanced by a whole step per element): an int8 FULLY_CONNECTED of one row, the SUMs by steps of an outer 1
KNOWN = ("edgernn_fully_connected_s8", "edgernn_sum_thresholds_s8", "edgernn_sum_s16")
# kernels with an entry that walks the gates itself (one call's set-up a worker), and fused loops do too
GATED = ("edgernn_fully_connected_s8",)
SUMS = ("edgernn_sum_thresholds_s8", "edgernn_sum_s16")
# the memories a worker writes; every other (the input stage, constants) is only read
_WRITABLE = (ARENA, STATE)


@dataclass
class CellSplit:
    """The run ``members`` (calls of the schedule, in order) as one split over ``units`` in ``grain``."""
    fn: str
    units: int
    grain: int
    members: list = field(default_factory=list)
    counts: list[int] = field(default_factory=list)     # each member's output range

    def gates(self, call) -> int:
        return next(n for c, n in zip(self.members, self.counts) if c is call) // self.units


def member_count(call) -> int | None:
    """A call's output range as the team splits it (a fused loop's elements), None when it cannot join a run."""
    if isinstance(call, fusion.FusedCall):
        if not call.team or (call.dims is not None and sum(d > 1 for d in call.dims) > 1):
            return None
        return call.n
    if call.fn not in PLAIN or PLAIN[call.fn] not in KNOWN or call.more:
        return None
    plain = _as_plain(call)
    k = BY_NAME[plain.fn]
    split = applied_split(plain)
    if split is None or split.broadcast is not None or split.weight != 1:
        return None
    if any(not (isinstance(step, int) or step in k.arg_names) for _, step in split.advance):
        return None
    args = dict(zip(k.arg_names, plain.args))
    if any(not isinstance(args.get(name), (TensorArg, ConstArg)) for name, _ in split.advance):
        return None                       # a pointer that may be NULL (an optional bias) does not advance here
    return split_count(plain)


def _as_plain(call):
    from copy import copy

    c = copy(call)
    c.fn = PLAIN.get(call.fn, call.fn)
    return c


def applied_split(call):
    """The kernel's split that applies to ``call`` (its ``when``), or None."""
    k = BY_NAME.get(call.fn)
    if k is None:
        return None
    args = dict(zip(k.arg_names, call.args))
    for split in k.splits:
        if split.when is None or args.get(split.when[0]) == split.when[1]:
            return split
    return None


def _accesses(graph, call, count: int):
    """Per output element i of ``call``: the elements it reads and writes, as (writes, reads, whole). writes and
    reads list (tensor place, step, reps, stride): element i touches i * step + r * stride + k for r < reps and
    k < step; ``whole`` lists (place, size) read whole by every element."""
    op_outputs = set(graph.graph.operators[call.op_index].outputs) if not isinstance(call, fusion.FusedCall) else set()
    writes, reads, whole = [], [], []
    if isinstance(call, fusion.FusedCall):
        produced = {fusion.call_output(m) for m in call.members}
        for m in call.members:
            for t in fusion.tensor_inputs(m):
                if t in produced:
                    continue
                if graph.graph.tensors[t].size != count:
                    return None
                reads.append((graph.places[t], 1, 1, 0))
            out = fusion.call_output(m)
            if out in call.stored:
                writes.append((graph.places[out], 1, 1, 0))
        return writes, reads, whole
    plain = _as_plain(call)
    k = BY_NAME[plain.fn]
    args = dict(zip(k.arg_names, plain.args))
    advance = dict(plain_split_advance(plain))
    for name, value in args.items():
        if not isinstance(value, TensorArg):
            continue
        place = graph.places[value.index]
        if value.index in op_outputs:
            if name not in advance:
                return None               # an output that does not move with the range
            step = advance[name] if isinstance(advance[name], int) else int(args[advance[name]])
            writes.append((place, step, 1, 0))
        elif name == "in" and plain.fn in SUMS and isinstance(args.get("stride"), int):
            # a SUM by steps of an outer 1: output i is the sum of in[r * stride + i] over r < reduced, so a
            # unit reads exactly the elements of its own synapses where they lie gate by gate (an LTC's)
            reads.append((place, 1, int(args["reduced"]), int(args["stride"])))
        else:
            # read whole by every unit: a FULLY_CONNECTED's input is; a SUM's strided sub-range is taken as if
            # it were, which can only refuse a run, never allow a wrong one
            whole.append((place, graph.graph.tensors[value.index].size))
    return writes, reads, whole


def plain_split_advance(plain):
    return applied_split(plain).advance


def unit_conflict(graph, members: list, units: int) -> bool:
    """Whether two units of the run touch a byte one of them writes (the check in this module's doc)."""
    writer: dict[tuple, int] = {}
    readers: dict[tuple, int] = {}        # byte -> the one unit that read it, or -1 for several
    for call in members:
        count = member_count(call)
        acc = _accesses(graph, call, count)
        if acc is None:
            return True
        writes, reads, whole = acc
        for place, size in whole:
            if place.memory not in _WRITABLE:
                continue
            item = SIZES[place.ctype]
            for b in range((place.offset + place.elements * item), place.offset + (place.elements + size) * item):
                key = (place.memory, b)
                if key in writer:
                    return True
                readers[key] = -1
        for kind, lst in (("r", reads), ("w", writes)):
            for place, step, reps, stride in lst:
                if place.memory not in _WRITABLE:
                    continue
                item = SIZES[place.ctype]
                start = place.offset + place.elements * item
                for i in range(count):
                    u = i % units
                    touched = (b for r in range(reps)
                               for b in range(start + (i * step + r * stride) * item,
                                              start + ((i + 1) * step + r * stride) * item))
                    for b in touched:
                        key = (place.memory, b)
                        w = writer.get(key)
                        if w is not None and w != u:
                            return True
                        if kind == "w":
                            r = readers.get(key)
                            if r is not None and r != u:
                                return True
                            writer[key] = u
                        else:
                            r = readers.get(key)
                            readers[key] = u if r is None or r == u else -1
    return False


def _grain(call) -> int:
    return 1 if isinstance(call, fusion.FusedCall) else split_grain(_as_plain(call))


def valid(graph, members: list) -> tuple[int, int] | None:
    """(units, grain) of the run, or None when it cannot be one split."""
    counts = [member_count(c) for c in members]
    if any(n is None or n == 0 for n in counts):
        return None
    units = math.gcd(*counts)
    grain = 1
    for c, n in zip(members, counts):
        g = _grain(c)
        if n != units and units % g:
            return None
        grain = grain * g // math.gcd(grain, g)
    if grain > units or unit_conflict(graph, members, units):
        return None
    return units, grain


def _busiest(count: int, grain: int, workers: int) -> int:
    return min(math.ceil(math.ceil(count / grain) / workers) * grain, count)


def worth_it(members: list, units: int, grain: int, rule: ShareRule) -> bool:
    """Whether the run as one split costs less than its ops split one by one (parallel.py's estimates)."""
    apart, together = 0.0, float(rule.split_cycles)
    for c in members:
        est, n = estimate_cycles(c if isinstance(c, fusion.FusedCall) else _as_plain(c)), member_count(c)
        if est is None:
            return False
        apart += _shared_cycles(est, n, _grain(c), rule.workers, rule.split_cycles)
        gates = n // units
        together += est * _busiest(units, grain, rule.workers) / units
        if not isinstance(c, fusion.FusedCall) and _as_plain(c).fn not in GATED:
            together += CYCLES_PER_SUBCALL * (gates - 1)
    return together < apart


def plan_cells(graph, rule: ShareRule) -> list[CellSplit]:
    """Join runs of the schedule's team ops into splits by units where the board's cost rule says they gain
    (only boards that split by cost); each member's kernel goes back to its one-core name (the cell's range
    function calls it on sub-ranges) and fused loops stop being team splits of their own."""
    if rule.split_cycles is None or rule.workers < 2:
        return []
    cells: list[CellSplit] = []
    run: list = []

    def close():
        # the longest run from its first op that gains, then the same from the op after it
        while len(run) >= 2:
            for k in range(len(run), 1, -1):
                shape = valid(graph, run[:k])
                if shape is not None and worth_it(run[:k], *shape, rule):
                    cells.append(CellSplit(f"{graph.prefix}_cell{run[k - 1].op_index}", shape[0], shape[1],
                                           list(run[:k]), [member_count(c) for c in run[:k]]))
                    del run[:k]
                    break
            else:
                del run[0]
        run.clear()

    for call in graph.calls:
        if member_count(call) is None:
            close()
            continue
        if run and valid(graph, run + [call]) is None:
            close()
        run.append(call)
    close()
    for cell in cells:
        for c in cell.members:
            if isinstance(c, fusion.FusedCall):
                c.team = False
            else:
                c.fn = PLAIN[c.fn]
            c.cell = cell
    return cells
