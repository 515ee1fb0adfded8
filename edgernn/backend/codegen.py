"""Render the generated C (model.h, model.c, weights.c) from Jinja templates.

Python decides every value (offsets, constants, the schedule); the templates under
``templates/model/`` hold the C structure, and the kernels under ``templates/kernels/`` are copied as
they are.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from edgernn.backend import cells as cells_mod
from edgernn.backend import conv_pool, fusion, fusion_loop, grouping, kernel_sources, kernels
from edgernn.backend.cprint import c_expr, c_initializer
from edgernn.backend.ir import Graph
from edgernn.backend.lowering import Call, ConstArray, ConstStruct, Lowering
from edgernn.backend.layout import ALIGN, align
from edgernn.backend.memplan import ArenaPlan, plan_arena
from edgernn.backend.values import (ARENA, CONST, FAST, INPUT, STATE, NULL, ArgsBlock, ConstArg, Function, Place,
                                    ScratchArg, StructArg, TensorArg)
from edgernn.errors import EdgeRNNError

TEAM_PREFIX = "edgernn_team_"
KERNEL_HEADERS = [
    "edgernn_kernels.h", "edgernn_fixedpoint.h", "edgernn_elementwise.h", "edgernn_dot.h", "edgernn_team.h", "edgernn_arch.h",
]
# The team implementation, copied as edgernn_team.c: the board file's [parallel] team (a path under
# templates/), else the portable one (serial, or POSIX threads with -DEDGERNN_THREADS=N).
DEFAULT_TEAM = "firmware/edgernn_team.c"
TEAM_SOURCE = "edgernn_team.c"


@dataclass
class StateSlot:
    key: str
    in_tensor: int
    out_tensor: int
    ctype: str
    offset: int
    nbytes: int
    count: int
    zero_point: int


@dataclass
class RenderedGraph:
    """One graph (the step or the head) as the template sees it."""

    prefix: str
    graph: Graph
    calls: list[Call]
    plan: ArenaPlan
    places: dict[int, Place]        # tensor (or scratch key) -> where it lives
    arrays: list[ConstArray] = field(default_factory=list)
    structs: list[ConstStruct] = field(default_factory=list)
    input_tensor: int = -1
    output_tensor: int = -1
    aliases: dict = field(default_factory=dict)    # slice -> (tensor it lies in, offset): no copy
    # constant name -> its copy in the team's fast memory (set when the weights go there)
    fast: dict[str, Place] = field(default_factory=dict)
    # op index -> (its banded kernel, the arguments before the team kernel's): CONV_2D through DMA tiles
    dma: dict[int, tuple[str, list]] = field(default_factory=dict)
    # op index -> (its streamed kernel, arguments before, constants passed as NULL, arguments after): an LSTM
    # whose gate matrices are read in chunks from the stream memory (edgernn/backend/streaming.py)
    streams: dict[int, tuple[str, list, set, list]] = field(default_factory=dict)
    # a table held once: the name of each table identical to an earlier one -> that one's (held_once)
    same: dict[str, str] = field(default_factory=dict)
    # runs of team ops split once by units (edgernn/backend/cells.py), in schedule order
    cells: list = field(default_factory=list)

    @property
    def cell_fns(self) -> list[dict]:
        """Each cell split's range function as the template prints it: per member, a fused loop's function
        called on each gate's sub-range, or a kernel called there with its pointers advanced."""
        out = []
        for n, cell in enumerate(self.cells):
            parts = []
            for j, c in enumerate(cell.members):
                gates = cell.gates(c)
                if isinstance(c, fusion.FusedCall):
                    # the loop walks the gates itself (fusion_loop.Loop.gates): one call, its constants set up once
                    parts.append({"kind": "loop", "fn": c.fn, "gates": 1})
                    continue
                k = kernels.BY_NAME[c.fn]
                if c.fn == "edgernn_fully_connected_s8":
                    # every gate's rows in one call (edgernn_fully_connected_gates_s8): one call's set-up, not G
                    values = dict(zip(k.arg_names, c.args))
                    g = kernels.BY_NAME["edgernn_fully_connected_gates_s8"]
                    given = {"stride": cell.units, "gates": gates}
                    args = []
                    for a in g.args:
                        if a.name in ("begin", "end"):
                            args.append({"kind": a.name, "pointer": False})
                        elif a.name in given:
                            args.append({"kind": "plain", "value": given[a.name], "pointer": False})
                        else:
                            v = values[a.name]
                            args.append({"kind": "plain", "name": f"p{j}_{a.name}", "ctype": a.ctype,
                                         "value": self.arg(v), "pointer": a.ctype.endswith("*") and v is not NULL})
                    parts.append({"kind": "kernel", "fn": g.name, "gates": 1, "args": args})
                    continue
                split = cells_mod.applied_split(c)
                advance = dict(split.advance)
                values = dict(zip(k.arg_names, c.args))
                args = []
                for a, v in zip(k.args, c.args):
                    item = {"name": f"p{j}_{a.name}", "ctype": a.ctype, "value": self.arg(v),
                            "pointer": a.ctype.endswith("*") and v is not NULL}
                    if a.name == split.count:
                        item["kind"] = "count"
                    elif a.name in advance:
                        step = advance[a.name]
                        item["kind"] = "advance"
                        item["step"] = step if isinstance(step, int) else int(values[step])
                    else:
                        item["kind"] = "plain"
                    args.append(item)
                parts.append({"kind": "kernel", "fn": c.fn, "gates": gates, "args": args})
            out.append({"fn": cell.fn, "units": cell.units, "parts": parts,
                        "ops": ", ".join(f"{m.op_index} ({m.op})" for c in cell.members
                                         for m in (c.members if isinstance(c, fusion.FusedCall) else [c]))})
        return out

    @property
    def fused(self) -> list[fusion_loop.Loop]:
        """The fused element-wise loops the schedule calls, as trees (edgernn/backend/fusion_loop.py)."""
        # a loop's tensor operands are read where they live, a constant one from its copy in the team's fast
        # memory where it has one (self.place): on GAP8 the constant itself is in L2, about 10 cycles a load
        # in GVSOC (LTC's six 256-element loops read five such operands an element)
        loops = []
        for c in self.calls:
            if not isinstance(c, fusion.FusedCall):
                continue
            loop = self._loop(c)
            cell = getattr(c, "cell", None)
            if cell is not None:
                # a member of a split by units: the range [begin, end) is units, and the loop walks each gate's
                loop.gates, loop.units, loop.bounds = cell.gates(c), cell.units, None
            else:
                loop.direct = not c.team
            loops.append(loop)
        return loops

    def _loop(self, c: fusion.FusedCall) -> fusion_loop.Loop:
        return fusion_loop.build_loop(c, self.place, {s.name: s for m in c.members for s in m.structs},
                                      self.input_tensor, lambda t: self.aliases.get(t, (t, 0))[0], self.fast,
                                      self.same, self.const_values)

    def const_values(self, tensor: int):
        """A constant tensor's values (the loops' dead elements, fusion_loop.Dead), None for the others."""
        return self.graph.tensors[tensor].data if self.places[tensor].memory == CONST else None

    def place(self, tensor: int) -> Place:
        """Where a tensor is read: its place, or the copy in fast memory of a constant that has one."""
        p = self.places[tensor]
        return self.fast.get(p.name, p) if p.memory == CONST else p

    @property
    def group_args_name(self) -> str:
        return f"{self.prefix}_group_args"

    def _group_block(self, call) -> bool:
        """Whether an int8 FC group's call goes through an argument block filled at init: every pointer it takes
        is known there (not the step's input parameter)."""
        if call.fn not in (grouping.GROUP, kernels.TEAM_KERNELS[grouping.GROUP]):
            return False
        return not any(isinstance(v, Place) and v.memory == INPUT for v in map(self.arg, call.args))

    @property
    def group_args(self) -> list[dict]:
        """The int8 FC groups' argument blocks (edgernn_fc_group_s8_args_t), in schedule order: each field's value
        as the template prints it, the outputs as out[k]."""
        blocks = []
        for call in self.calls:
            if not self._group_block(call):
                continue
            a = dict(zip(kernels.BY_NAME[grouping.GROUP].arg_names, map(self.arg, call.args)))
            fields = [(f, a[f]) for f in ("in", "w", "bias", "multiplier", "rnd", "shift", "ends", "rounding",
                                          "act_min", "act_max", "n_in", "row0")]
            fields += [(f"out[{k}]", a[f"out{k}"]) for k in range(grouping.MAX_MEMBERS)]
            blocks.append({"op": call.op_index, "fields": fields})
        return blocks

    @property
    def statements(self) -> list[dict]:
        out = []
        n_blocks = 0
        for call in self.calls:
            cell = getattr(call, "cell", None)
            if cell is not None:
                if call is cell.members[0]:
                    traced = [{"expr": self.places[t], "nbytes": self.graph.tensors[t].nbytes, "index": m.op_index}
                              for c in cell.members
                              for m in (c.members if isinstance(c, fusion.FusedCall) else [c])
                              for t in ([fusion.call_output(m)] if isinstance(c, fusion.FusedCall)
                                        else self.graph.operators[m.op_index].outputs)
                              if t in self.places and (not isinstance(c, fusion.FusedCall) or t in c.stored)]
                    # a member's output that a later member overwrote in the arena is gone by the trace
                    traced = [t for k, t in enumerate(traced) if not any(
                        _overlap(t["expr"], t["nbytes"], later["expr"], later["nbytes"]) for later in traced[k + 1:])]
                    x = self.places[self.input_tensor]
                    out.append({"op": f"{cell.members[0].op_index}: " + "+".join(c.op for c in cell.members)
                                + " (one split by units)", "index": cell.members[0].op_index,
                                "fn": "edgernn_team_split", "args": [Function(cell.fn), x, cell.units, cell.grain],
                                "traced": traced})
                continue
            if isinstance(call, fusion.FusedCall):
                traced = [{"expr": self.places[t], "nbytes": self.graph.tensors[t].nbytes}
                          for m in call.members for t in [fusion.call_output(m)] if t in call.stored]
                # the range function's args: the graph's input, which it may read
                x = self.places[self.input_tensor]
                # a loop with dead elements is called with parts of equal work, not its elements
                count = self._loop(call).parts or call.n
                args = ([Function(call.fn), x, count, 1] if call.team else [x, 0, count])
                out.append({"op": f"{call.op_index}: {call.op}", "index": call.op_index,
                            "fn": "edgernn_team_split" if call.team else call.fn, "args": args, "traced": traced})
                continue
            if self._group_block(call):
                # its arguments read from the block filled at init: the team's workers call the range function
                traced = [{"expr": self.places[t], "nbytes": self.graph.tensors[t].nbytes, "index": m.op_index}
                          for m in call.members for t in self.graph.operators[m.op_index].outputs
                          if t in self.places]
                block = ArgsBlock(self.group_args_name, n_blocks)
                n_blocks += 1
                n_out = dict(zip(kernels.BY_NAME[grouping.GROUP].arg_names, call.args))["n_out"]
                fn = "edgernn_fully_connected_group_s8_range"
                team = call.fn != grouping.GROUP
                out.append({"op": f"{call.op_index}: {call.op}", "index": call.op_index,
                            "fn": "edgernn_team_split" if team else fn,
                            "args": [Function(fn), block, n_out, kernels.BY_NAME[grouping.GROUP].splits[0].grain]
                            if team else [block, 0, n_out],
                            "traced": traced})
                continue
            chain = [call, *call.more]
            for k, c in enumerate(chain):
                traced = []
                if k == len(chain) - 1:
                    members = call.members if isinstance(call, grouping.GroupedCall) else [c]
                    traced = [{"expr": self.places[t], "nbytes": self.graph.tensors[t].nbytes, "index": m.op_index}
                              for m in members for t in self.graph.operators[m.op_index].outputs if t in self.places]
                run = one_run_copy(call, c)
                if run is not None:
                    # one run of known length: memcpy of a constant size, which the compiler writes out inline
                    # (a call of edgernn_copy_runs costs more than copying a few bytes); source and destination
                    # are different tensors alive at the same op, so they never overlap
                    a = kernels.call_args(c)
                    d, s, n = run
                    out.append({"op": f"{c.op_index}: {c.op}", "index": c.op_index, "fn": "memcpy", "traced": traced,
                                "run": {"dst": self.arg(a["dst"]), "src": self.arg(a["src"]), "dst_at": d,
                                         "src_at": s, "count": n, "elem_size": a["elem_size"]}})
                    continue
                fn, args = c.fn, [self.arg(a) for a in c.args]
                if c is call and c.op_index in self.dma:
                    fn, before = self.dma[c.op_index]
                    args = before + args
                if c is call and c.op_index in self.streams:
                    fn, before, streamed, after = self.streams[c.op_index]
                    args = before + [NULL if isinstance(a, ConstArg) and a.name in streamed else r
                                     for a, r in zip(c.args, args)] + after
                out.append({"op": f"{c.op_index}: {c.op}", "index": c.op_index, "fn": fn, "args": args,
                            "traced": traced})
        return out

    def arg(self, a):
        """A call's argument resolved to what the template prints: memory references become places."""
        if isinstance(a, TensorArg):
            return self.place(a.index)
        if isinstance(a, ConstArg) and a.name in self.same:
            a = ConstArg(self.same[a.name])
        if isinstance(a, (ConstArg, StructArg)):
            return self.fast.get(a.name, a)
        if isinstance(a, ScratchArg):
            return self.places[_scratch_key(a.op_index)]
        return a


def _overlap(a: Place, a_bytes: int, b: Place, b_bytes: int) -> bool:
    if a.memory != b.memory or a.name != b.name:
        return False
    a0 = a.offset + a.elements * kernels.SIZES[a.ctype]
    b0 = b.offset + b.elements * kernels.SIZES[b.ctype]
    return a0 < b0 + b_bytes and b0 < a0 + a_bytes


def one_run_copy(call: Call, c: Call) -> tuple[int, int, int] | None:
    """(dst, src, count) in elements when ``c`` (``call`` or one of its ``more``) copies one run, else None."""
    if c.fn != "edgernn_copy_runs":
        return None
    a = kernels.call_args(c)
    if a["n_runs"] != 1:
        return None
    runs = next((arr.values for arr in [*call.arrays, *c.arrays] if arr.name == a["runs"].name), None)
    return None if runs is None or len(runs) != 1 else tuple(int(v) for v in runs[0])


def fast_weights(arrays: list[ConstArray], structs: list[ConstStruct]) -> list[dict]:
    """The constants copied into the team's fast memory, in the order of the copy, with the place the
    kernels' arguments take for each (a pointer into the copy: model.c.j2's EDGERNN_FAST_WEIGHT)."""
    out = [{"name": a.name, "ctype": a.ctype} for a in arrays] + [{"name": s.name, "ctype": s.ctype} for s in structs]
    for k, w in enumerate(out):
        w["prev"] = out[k - 1]["name"] if k else None
        w["place"] = Place(FAST, w["ctype"], name=w["name"])
    return out


def _scratch_key(op_index: int) -> int:
    """The arena plan's key for an operator's scratch buffer (tensor keys are >= 0)."""
    return -1 - op_index


def _liveness(graph: Graph, fixed: set[int], position: dict[int, int] | None = None,
              unstored: set[int] = frozenset(), aliases: dict[int, int] | None = None
              ) -> list[tuple[list[int], int, int, int]]:
    """Each arena tensor's life in operator steps; ``position`` moves an op to where it runs (a fused
    group's members to the group's call), ``unstored`` tensors never reach memory, an alias (slice ->
    the tensor it lies in) takes no memory of its own and keeps its source alive while it is read."""
    n_ops = len(graph.operators)
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    position = position or {}
    for op in graph.operators:
        at = position.get(op.index, op.index)
        for t in op.outputs:
            first[t] = min(first.get(t, at), at)
            last[t] = max(last.get(t, at), at)
        for t in op.inputs:
            if t >= 0:
                last[t] = max(last.get(t, at), at)
    for t in graph.outputs.values():
        last[t] = n_ops
    for dst, src in (aliases or {}).items():
        if dst in last:
            last[src] = max(last.get(src, last[dst]), last[dst])
        if dst in first:    # a tensor placed in another (a CONCATENATION's input): its writer starts it
            first[src] = min(first.get(src, first[dst]), first[dst])
    lives = []
    for t, f in first.items():
        tensor = graph.tensors[t]
        if tensor.is_const or t in fixed or t in unstored or t in (aliases or {}):
            continue
        lives.append(([t], tensor.nbytes, f, last[t]))
    return lives


def state_in_place(slot: StateSlot, calls: list, aliases: dict, output: int) -> bool:
    """Whether the new state ``slot.out_tensor`` may be written into the state's slot by the op computing it, with
    no copy at the step's end: it is stored by a fused element-wise loop over the state's elements, and the old
    state (``slot.in_tensor``) is read by that loop alone, element by element (element i, by members up to the one
    that stores element i of the new state, so before the store). Each element is then read before it is
    overwritten, by the one worker that overwrites it, whatever the team's split. An LSTM's cell state is (the
    gates' loop reads c and writes the new c); its output h is not, the FULLY_CONNECTED reads all of the old h.
    (Reads by earlier ops would be right too, but in a split by units (cells.py) they would share no barrier with
    the loop: the split would be cut there, which costs the LSTM(64) step more than the copy.)"""
    old, new = slot.in_tensor, slot.out_tensor
    if old == new or new == output or any(t in (old, new) for dst, (src, _) in aliases.items() for t in (dst, src)):
        return False
    # a tensor has one producer: the fused loop whose member computes it, if one does
    at = next((j for j, c in enumerate(calls) if isinstance(c, fusion.FusedCall)
               and any(fusion.call_output(m) == new for m in c.members)), None)
    if at is None:
        return False
    loop = calls[at]
    if loop.dims is not None or loop.n != slot.count or new not in loop.stored:
        return False
    if any(old in fusion.reads(c) for j, c in enumerate(calls) if j != at):
        return False
    stored = False
    for m in loop.members:
        if old in fusion.tensor_inputs(m) and (stored or m.fn not in fusion.FLAT or "blocks" in m.fn):
            return False
        stored = stored or fusion.call_output(m) == new
    return True


def _written(call) -> set[int] | None:
    """The tensors a call writes (a fused loop: each member's value, stored or not), or None where the kernel table
    does not say (its non-const pointer arguments are its outputs)."""
    if isinstance(call, fusion.FusedCall):
        return {fusion.call_output(m) for m in call.members}
    if isinstance(call, grouping.GroupedCall):
        return set(grouping.outputs(call))
    out = set()
    for c in [call, *call.more]:
        k = kernels.BY_NAME.get(c.fn)
        if k is None:
            return None
        out |= {v.index for a, v in zip(k.args, c.args) if isinstance(v, TensorArg) and not a.ctype.startswith("const")}
    return out


def state_after_reads(slot: StateSlot, calls: list, aliases: dict, output: int) -> bool:
    """Whether the new state ``slot.out_tensor``, a CONCATENATION's output (an NCP cell's layers' states, copied or
    computed where they lie in it), may be assembled in the state's slot, with no copy at the step's end: every op
    that reads the old state (``slot.in_tensor``) or a slice that lies in it comes in the schedule before the first
    op that writes the new one or a part that lies in it. No byte of the old state is then overwritten before its
    last read, whichever worker runs what: the ops between are apart by the team's barriers. (Not a fused loop's new
    state, state_in_place's case: in a split by units the reads would share no barrier with the loop.)"""
    old, new = slot.in_tensor, slot.out_tensor
    if old == new or new == output or new in aliases or old in aliases:
        return False

    def root(t: int) -> int:
        while t in aliases:
            t = aliases[t][0]
        return t

    writes = [_written(c) for c in calls]
    if any(w is None for w in writes):
        return False
    makers = [j for j, w in enumerate(writes) if new in w]
    if len(makers) != 1 or calls[makers[0]].op != "CONCATENATION" or isinstance(calls[makers[0]], fusion.FusedCall):
        return False
    first_write = min(j for j, w in enumerate(writes) if any(root(t) == new for t in w))
    last_read = max((j for j, c in enumerate(calls) if any(root(t) == old for t in fusion.reads(c))), default=-1)
    return last_read < first_write


def lower_graph(graph: Graph, prefix: str, input_key: str, output_key: str,
                state_slots: list[StateSlot], fuse_pools: bool = True) -> RenderedGraph:
    lowering = Lowering(graph, prefix)
    calls = lowering.lower()
    keep = set(graph.outputs.values()) | {s.out_tensor for s in state_slots}
    aliases: dict[int, tuple[int, int]] = {}
    if fuse_pools:
        calls = conv_pool.fuse_conv_pool(graph, calls, keep)
    if fusion.ENABLED:
        calls = fusion.fuse_calls(graph, calls, prefix, keep)
        calls, aliases = fusion.slice_aliases(graph, calls, keep)
    if input_key not in graph.inputs:
        raise EdgeRNNError(f"the {prefix} model has no input {input_key!r} (it has {', '.join(graph.inputs)})")
    if output_key not in graph.outputs:
        raise EdgeRNNError(f"the {prefix} model has no output {output_key!r} (it has {', '.join(graph.outputs)})")
    x_t = graph.inputs[input_key]
    fixed = {x_t} | {s.in_tensor for s in state_slots}
    if fusion.ENABLED:
        calls, aliases = fusion.concat_aliases(graph, calls, keep, fixed, aliases)
    consts = set(lowering.runtime_consts)
    if grouping.ENABLED:
        calls = grouping.group_calls(graph, calls, prefix)
        consts -= grouping.dropped_consts(calls, consts)
    in_place = {s.out_tensor: s for s in state_slots if state_in_place(s, calls, aliases, graph.outputs[output_key])
                or state_after_reads(s, calls, aliases, graph.outputs[output_key])}
    lives = _liveness(graph, fixed | set(in_place), fusion.positions(calls),
                      fusion.unstored(calls) | conv_pool.unstored(calls), {dst: src for dst, (src, _) in aliases.items()})
    scratch = {_scratch_key(c.op_index): c.scratch for c in calls if c.scratch}
    lives += [([key], nbytes, -1 - key, -1 - key) for key, (_, nbytes) in scratch.items()]
    plan = plan_arena(lives)
    places: dict[int, Place] = {x_t: Place(INPUT, graph.tensors[x_t].ctype, name=input_key)}
    for s in state_slots:
        places[s.in_tensor] = Place(STATE, s.ctype, s.offset)
    for t, s in in_place.items():
        places[t] = Place(STATE, s.ctype, s.offset)
    arrays: list[ConstArray] = []
    for t in sorted(consts):
        tensor = graph.tensors[t]
        name = f"{prefix}_c{t}"
        places[t] = Place(CONST, tensor.ctype, name=name)
        arrays.append(ConstArray(name, tensor.ctype, tensor.data.reshape(-1).tolist()))
    for t, off in plan.offsets.items():
        ctype = scratch[t][0] if t in scratch else graph.tensors[t].ctype
        places[t] = Place(ARENA, ctype, off)
    for dst, (src, off) in aliases.items():
        places[dst] = places[src].within(off)
    structs: list[ConstStruct] = []
    # the run of a copy written as memcpy (RenderedGraph.statements) is not needed in weights.c
    inlined = {kernels.call_args(c)["runs"].name
               for call in calls for c in [call, *call.more] if one_run_copy(call, c) is not None}
    for c in calls:
        arrays.extend(fusion_loop.used_arrays(c) if isinstance(c, fusion.FusedCall) else
                      [a for a in c.arrays if a.name not in inlined])
        structs.extend(c.structs)
    arrays, same = held_once(arrays, calls)
    for call in calls:
        for c in [call, *call.more]:
            for a in c.args:
                if isinstance(a, TensorArg) and a.index not in places:
                    raise EdgeRNNError(f"op {c.op_index} ({c.op}) reads tensor {a.index} that nothing provides")
    return RenderedGraph(prefix, graph, calls, plan, places, arrays, structs, x_t, graph.outputs[output_key], aliases,
                         same=same)


# the kernels whose constant arrays are tables of the quantization alone: two ops of the same quantization (an
# LSTM's gates' LOGISTIC, an LTC's unfolds) make the same table
TABLE_KERNELS = frozenset({"edgernn_lut_s8", "edgernn_lut_s16", "edgernn_addsub_const_s8", "edgernn_addsub_const_s16",
                           "edgernn_add_blocks_const_s16",
                           "edgernn_sum_thresholds_s8"})


def _frozen(values):
    return tuple(_frozen(v) if isinstance(v, (list, tuple)) else v for v in values)


def held_once(arrays: list[ConstArray], calls: list[Call]) -> tuple[list[ConstArray], dict[str, str]]:
    """The constant arrays with each table identical to an earlier one (same type, values and section) left
    out, and the name of each left out -> the one kept. Only tables: a fused loop's, and those of the
    kernels of ``TABLE_KERNELS``; a weight matrix, a bias or an array a kernel streams keeps its own."""
    tables = set()
    for call in calls:
        if isinstance(call, fusion.FusedCall):
            tables |= {a.name for a in fusion_loop.used_arrays(call)}
        for c in [call, *getattr(call, "members", []), *call.more]:
            if c.fn in TABLE_KERNELS:
                tables |= {a.name for a in c.arrays}
    first: dict[tuple, str] = {}
    same: dict[str, str] = {}
    kept = []
    for a in arrays:
        key = (a.ctype, a.weights, _frozen(a.values))
        if a.name in tables and key in first and first[key] != a.name:
            same[a.name] = first[key]
            continue
        if a.name in tables:
            first.setdefault(key, a.name)
        kept.append(a)
    return kept, same


def state_layout(graph: Graph, state_keys: list) -> list[StateSlot]:
    """Slots in the given order. A key is a state name that is both an input and an output of the
    step model, or a (name, tensor index) pair for a variable tensor that an op updates in place."""
    slots, offset = [], 0
    for spec in state_keys:
        key, variable = (spec, None) if isinstance(spec, str) else spec
        if variable is not None:
            if not (isinstance(variable, int) and 0 <= variable < len(graph.tensors)) or \
                    not graph.tensors[variable].is_variable:
                raise EdgeRNNError(f"state {key!r}: tensor {variable} of the step model is not a variable tensor")
            t = graph.tensors[variable]
            # TFLite's ResetVariableTensor: int8 starts at its zero point, every other type at 0
            zero = t.qparams()[1] if t.dtype == "int8" else 0
            slots.append(StateSlot(key, t.index, t.index, t.ctype, offset, t.nbytes, t.size, zero))
            offset += align(t.nbytes)
            continue
        if key not in graph.inputs or key not in graph.outputs:
            raise EdgeRNNError(f"state {key!r} must be both an input and an output of the step model")
        ti, to = graph.tensors[graph.inputs[key]], graph.tensors[graph.outputs[key]]
        if ti.dtype != to.dtype or ti.shape != to.shape:
            raise EdgeRNNError(f"state {key!r}: input {ti.dtype}{list(ti.shape)} and output {to.dtype}{list(to.shape)} differ")
        if ti.qparams() != to.qparams():
            raise EdgeRNNError(
                f"state {key!r}: the output's quantization {to.qparams()} differs from the input's {ti.qparams()}; "
                "the step model must tie them so the state can be fed back byte for byte"
            )
        slots.append(StateSlot(key, ti.index, to.index, ti.ctype, offset, ti.nbytes, ti.size, ti.qparams()[1]))
        offset += align(ti.nbytes)
    listed = {s.in_tensor for s in slots}
    for t in graph.tensors:
        if t.is_variable and t.index not in listed:
            raise EdgeRNNError(f"variable tensor {t.index} ({t.name}) keeps state between steps, "
                               "but the manifest does not list it among the states")
    return slots


def _environment():
    try:
        import jinja2
    except ImportError:
        raise EdgeRNNError("generating C needs jinja2: pip install jinja2") from None
    from edgernn.resources import templates_dir

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir() / "model")),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["c_init"] = c_initializer
    env.filters["c"] = c_expr
    env.globals["align"] = ALIGN
    return env


def team_template(board) -> Path:
    from edgernn.resources import templates_dir

    rel = (board.parallel.team if board is not None else None) or DEFAULT_TEAM
    path = templates_dir() / rel
    if not path.is_file():
        where = f"board file {board.path}" if board is not None else "the default"
        raise EdgeRNNError(f"{where}: parallel.team names {rel!r}, which is not a template file")
    return path


def kernel_headers(functions) -> list[str]:
    """The headers of their own (kernels.OWN_HEADER_SOURCES) that the schedule's kernels need."""
    names = {"edgernn_" + fn[len(TEAM_PREFIX):] if fn.startswith(TEAM_PREFIX) else fn for fn in functions}
    used = {kernels.BY_NAME[fn].source for fn in names if fn in kernels.BY_NAME}
    return [kernel_sources.header_of(s) for s in kernels.OWN_HEADER_SOURCES if s in used]


def copy_kernels(dest: Path, board=None, functions=(), kernel_set: str | None = None) -> list[str]:
    """Copy the kernels and the board's team implementation into dest, and render those the kernel
    table generates (edgernn/backend/kernels.py); an optional kernel source only
    when one of ``functions`` (the kernel calls of the schedule) is in it, and a stale copy of it is
    removed otherwise. The kernels are the board's set (toolchain.kernels), or ``kernel_set``."""
    from edgernn.resources import templates_dir

    src = templates_dir() / "kernels"
    sources = list(kernels.SOURCES)
    # a team kernel lives beside its kernel: edgernn_team_conv_s8 is in edgernn_conv_s8's source
    kernel_names = {"edgernn_" + fn[len(TEAM_PREFIX):] if fn.startswith(TEAM_PREFIX) else fn for fn in functions}
    used = {kernels.BY_NAME[fn].source for fn in kernel_names if fn in kernels.BY_NAME}
    headers = []
    for name in kernels.OPTIONAL_SOURCES:
        own = [kernel_sources.header_of(name)] if name in kernels.OWN_HEADER_SOURCES else []
        if name in used:
            sources.append(name)
            headers += own
        else:
            for stale in [name, *own]:
                (dest / stale).unlink(missing_ok=True)
    rendered = kernel_sources.render_sources()     # the prototypes and team wrappers, from the kernel table
    for name in sources + KERNEL_HEADERS + headers:
        if name in rendered:
            (dest / name).write_text(rendered[name])
        else:
            shutil.copyfile(src / name, dest / name)
    shutil.copyfile(team_template(board), dest / TEAM_SOURCE)
    chosen = kernel_set_dir(kernel_set or (board.toolchain.kernels if board is not None else REFERENCE_KERNELS),
                            board)
    return sources + [TEAM_SOURCE] + _copy_kernel_set(dest, chosen, set(sources + KERNEL_HEADERS + headers))


REFERENCE_KERNELS = "reference"


def kernel_sets() -> list[str]:
    """The kernel sets there are: the reference (templates/kernels/) and each family's optimized set
    (templates/targets/<set>/kernels/)."""
    from edgernn.resources import templates_dir

    return [REFERENCE_KERNELS] + sorted(p.parent.name for p in (templates_dir() / "targets").glob("*/kernels")
                                        if p.is_dir())


def kernel_set_dir(name: str, board=None) -> Path | None:
    """The folder of kernel set ``name`` (a board's toolchain.kernels), None for the reference set; a set
    that does not exist is refused, never replaced by the reference."""
    from edgernn.resources import templates_dir

    if name == REFERENCE_KERNELS:
        return None
    path = templates_dir() / "targets" / name / "kernels"
    if not path.is_dir():
        where = f"board file {board.path}: toolchain.kernels" if board is not None else "kernel set"
        raise EdgeRNNError(f"{where} {name!r} is not a kernel set (known: {', '.join(kernel_sets())})")
    return path


def _copy_kernel_set(dest: Path, chosen: Path | None, copied: set[str]) -> list[str]:
    """Copy an optimized kernel set (its folder, ``chosen``) over the reference files just copied: a file of
    the set replaces the reference file of its name, and its other files are added (its assembly is returned,
    to be assembled). The files of other sets are removed from dest, where an earlier build left them."""
    from edgernn.resources import templates_dir

    mine = sorted(chosen.iterdir()) if chosen is not None else []
    for other in sorted((templates_dir() / "targets").glob("*/kernels/*")):
        if other.parent != chosen and other.name not in copied:
            (dest / other.name).unlink(missing_ok=True)
    added = []
    for path in mine:
        shutil.copyfile(path, dest / path.name)
        if path.suffix in (".c", ".S") and path.name not in copied:
            added.append(path.name)
    return added


def render(context: dict, dest: Path) -> list[str]:
    env = _environment()
    written = []
    for name in ("model.h", "weights.h", "model.c", "weights.c"):
        text = env.get_template(f"{name}.j2").render(**context)
        (dest / name).write_text(text)
        written.append(name)
    return written


# The server, protocol and HAL interface beside the model in every firmware folder (templates/firmware/)
FIRMWARE_TEMPLATE_FILES = ("protocol.c", "protocol.h", "server.c", "server.h", "main.c", "hal.h")


def _hal_dir(board) -> Path:
    from edgernn.resources import templates_dir

    hal_dir = templates_dir() / board.hal.template
    if not hal_dir.is_dir():
        raise EdgeRNNError(f"board file {board.path}: hal.template {board.hal.template!r} is not a folder")
    return hal_dir


def hal_files(board) -> set[str]:
    """Names of the C files a board's HAL folder provides (PMSIS-facing on ai_deck), with its banded
    convolutions' source and header (copied only into a build that uses them: copy_dma_source)."""
    names = {p.name for p in _hal_dir(board).iterdir() if p.suffix in (".c", ".h")}
    source = _dma_source(board)
    if source is not None:
        names |= {source.name, source.with_suffix(".h").name}
    from edgernn.backend.streaming import stream_rules

    rules = stream_rules(board)
    if rules is not None:
        names.add(Path(rules[2]).name)
    return names


def _dma_source(board) -> Path | None:
    from edgernn.backend.tiling import dma_rules
    from edgernn.resources import templates_dir

    rules = dma_rules(board)
    if rules is None:
        return None
    path = templates_dir() / rules[1]
    if not path.is_file() or not path.with_suffix(".h").is_file():
        raise EdgeRNNError(f"board file {board.path}: placement.dma_source {rules[1]!r} is not a template file "
                           "with its header beside it")
    return path


def copy_dma_source(board, dest: Path, used: bool) -> list[str]:
    """Copy the board's banded convolutions (source and header) into dest when the build uses them, else
    remove a stale copy; returns the sources copied."""
    source = _dma_source(board) if board is not None else None
    if source is None:
        return []
    header = source.with_suffix(".h")
    if not used:
        (dest / source.name).unlink(missing_ok=True)
        (dest / header.name).unlink(missing_ok=True)
        return []
    shutil.copyfile(source, dest / source.name)
    shutil.copyfile(header, dest / header.name)
    return [source.name]


def copy_stream_sources(board, dest: Path, sources: list[str], plan) -> list[str]:
    """For a build that streams weights (``plan``, edgernn/backend/streaming.py): copy the streamed kernels
    (a streamed LSTM includes edgernn_lstm.c and takes its place among the sources) and the board's
    stream_source; else (plan None) remove stale copies. Returns the sources."""
    from edgernn.backend import streaming
    from edgernn.resources import templates_dir

    rules = streaming.stream_rules(board) if board is not None else None
    board_source = templates_dir() / rules[2] if rules else None
    if board_source is not None and not board_source.is_file():
        raise EdgeRNNError(f"board file {board.path}: placement.stream_source {rules[2]!r} is not a template file")
    kernel_dir = templates_dir() / "kernels"
    every = {streaming.KERNEL_HEADER, streaming.KERNEL_SOURCE, *(how.source for how in streaming.STREAMED.values())}
    used = set() if plan is None else {streaming.KERNEL_HEADER, *streaming.sources(plan)}
    for name in sorted(every - used):
        (dest / name).unlink(missing_ok=True)
    if plan is None:
        if board_source is not None:
            (dest / board_source.name).unlink(missing_ok=True)
        return sources
    for name in sorted(used):
        shutil.copyfile(kernel_dir / name, dest / name)
    shutil.copyfile(board_source, dest / board_source.name)
    replaced = {old: new for old, new in streaming.replaced_sources().items() if new in used}
    out = [replaced.get(name, name) for name in sources]
    return out + [name for name in streaming.sources(plan) if name not in out] + [board_source.name]


def project_files(board) -> list[str]:
    """The files write_project puts beside the model and kernels, in link order: the server and
    protocol, the HAL's sources (which replace generic ones of the same name), its rendered templates."""
    hal_dir = _hal_dir(board)
    team = team_template(board)
    names = sorted(FIRMWARE_TEMPLATE_FILES)
    names += sorted(p.name for p in hal_dir.iterdir() if p.suffix in (".c", ".h") and p != team
                    and p.name not in names)
    return names + sorted(p.stem for p in hal_dir.glob("*.j2"))


def link_model_frames(input_bytes: int, output_bytes: int, state_bytes: int) -> tuple[int, int]:
    """The raw frames one step needs, (received, sent): a STEP request with one input, and its answer with
    the output, the cycle count and the state after the step and after the last; refused past what HELLO's
    32-bit fields can announce (docs/protocol.md)."""
    from edgernn.link.protocol import HELLO_SIZE_LIMIT, model_step_frames

    frames = model_step_frames(input_bytes, output_bytes, state_bytes)
    if max(frames) > HELLO_SIZE_LIMIT:
        raise EdgeRNNError(f"one step needs link frames of {max(frames)} bytes ({input_bytes} bytes of input, "
                           f"{output_bytes} of output, {state_bytes} of state), more than the serial protocol's "
                           f"{HELLO_SIZE_LIMIT}; use a smaller frame or fewer state bytes")
    return frames


def write_project(board, dest: Path, context: dict) -> list[str]:
    """Make a firmware folder stand alone: copy the server, protocol and HAL next to the model, the
    HAL's files replacing the generic ones of the same name, and render the HAL folder's ``*.j2``
    templates (a Makefile) with the board's facts. A compile then needs only the folder."""
    from edgernn.resources import templates_dir

    hal_dir = _hal_dir(board)
    written = []
    for name in FIRMWARE_TEMPLATE_FILES:
        shutil.copyfile(templates_dir() / "firmware" / name, dest / name)
        written.append(name)
    if context.get("link_model_frames"):   # absent for a bare model.c (test fixtures): the board's limit
        from edgernn.link.header import render_protocol_h

        (dest / "protocol.h").write_text(render_protocol_h(tuple(context["link_model_frames"])))
    team = team_template(board)
    for path in sorted(hal_dir.iterdir()):
        if path.suffix in (".c", ".h") and path != team:
            shutil.copyfile(path, dest / path.name)
            if path.name not in written:
                written.append(path.name)
    sources = set(context["sources"]) | {n for n in written if n.endswith(".c")}
    return written + render_hal_templates(board, dest, context, sources)


def render_hal_templates(board, dest: Path, context: dict, sources) -> list[str]:
    """Render the board's HAL folder's ``*.j2`` templates (a Makefile) into dest with the board's facts and
    the project's sources, the C apart from the assembly; returns the files written. write_project's last
    step, and the whole project of a kernel alone (bench/, tests/ with a main.c of their own)."""
    import jinja2

    hal_dir = _hal_dir(board)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(hal_dir)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)
    sources = sorted(set(sources))
    asm_sources = [n for n in sources if n.endswith(".S")]
    c_sources = [n for n in sources if not n.endswith(".S")]
    written = []
    for path in sorted(hal_dir.glob("*.j2")):
        text = env.get_template(path.name).render(**context, board=board, all_sources=c_sources,
                                                  asm_sources=asm_sources)
        (dest / path.stem).write_text(text)
        written.append(path.stem)
    return written
