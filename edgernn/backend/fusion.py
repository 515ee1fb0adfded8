"""Fuse chains and trees of 8-bit element-wise kernel calls over the same element count into one loop.

Each op's arithmetic stays exactly its kernel's: the loop calls the same per-element functions
(templates/kernels/edgernn_elementwise.h) with the op's constants written as literals, so the compiler
folds them. What changes is the traffic: every element is loaded once, an intermediate read only inside
the group stays in a register and is never stored, and a value read after the group (by another call, as
the step's output or as a new state) is stored once.

A group runs where its last member stood in the schedule. A call between its members may feed a later
member (it still runs first) but may not read a member's output: such a read closes the group. The memory
plan sees every member's reads and writes at the group's position (``positions``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from edgernn.backend import quantparams as qp
from edgernn.backend.ir import Graph
from edgernn.backend.kernels import call_args
from edgernn.backend.lowering import Call, ConstArray

# False: every call stays its own kernel (a build to hold the fused one against, tests/backend/test_fusion.py)
ENABLED = True

# the 8-bit kernels a loop can take in: flat ones (n elements, every operand n elements long) and
# broadcasting ones (an edgernn_bcast_t: each operand walks the output's 4-D shape with its own strides)
FLAT = {"edgernn_addsub_n_s8", "edgernn_addsub_const_s8", "edgernn_mul_n_s8", "edgernn_lut_s8"}
BROADCAST = {"edgernn_addsub_s8", "edgernn_mul_s8", "edgernn_div_s8"}


@dataclass
class FusedCall(Call):
    """One loop over [0, n) computing ``members`` (the original calls, in loop order)."""

    members: list[Call] = field(default_factory=list)
    n: int = 0
    dims: tuple[int, ...] | None = None                # the 4-D output shape a broadcasting member walks
    stored: set[int] = field(default_factory=set)     # member outputs written to memory
    team: bool = False                                 # split across the team by element range


def _struct(call: Call, name: str):
    return next(s for s in call.structs if s.name == name)


def call_output(call: Call) -> int | None:
    if call.fn in FLAT or call.fn in BROADCAST:
        return call_args(call)["out"][1]
    return None


def tensor_inputs(call: Call) -> list[int]:
    """The tensors a call reads (arguments ("tensor", i), its own output excluded), in order."""
    out = call_output(call)
    seen: list[int] = []
    for c in [call, *call.more]:
        for a in c.args:
            if isinstance(a, tuple) and a[0] == "tensor" and a[1] != out and a[1] not in seen:
                seen.append(a[1])
    return seen


def _reads(call: Call) -> set[int]:
    if isinstance(call, FusedCall):
        return {t for m in call.members for t in tensor_inputs(m)}
    return {a[1] for c in [call, *call.more] for a in c.args if isinstance(a, tuple) and a[0] == "tensor"}


def _shape(call: Call) -> tuple[int, tuple[int, ...] | None] | None:
    """(element count, 4-D output shape of a broadcasting call or None), or None if not fusable."""
    a = call_args(call) if (call.fn in FLAT or call.fn in BROADCAST) else None
    if a is None:
        return None
    if call.fn in FLAT:
        try:
            return int(a["n"]), None
        except (TypeError, ValueError):
            return None
    dims = tuple(int(d) for d in _struct(call, a["b"][1]).fields[0])
    n = 1
    for d in dims:
        n *= d
    return n, dims


@dataclass
class _Group:
    members: list[Call]
    n: int
    dims: tuple[int, ...] | None
    at: int                 # the op index of the call whose place the group runs at
    open: bool = True

    def outputs(self) -> set[int]:
        return {call_output(m) for m in self.members}

    def takes(self, n: int, dims) -> bool:
        return self.n == n and (dims is None or self.dims is None or self.dims == dims)


def fuse_calls(graph: Graph, calls: list[Call], prefix: str, keep: set[int]) -> list[Call]:
    """The schedule with each group of two or more fusable calls replaced by one FusedCall.

    A fusable call joins a group of its element count (and shape, if either broadcasts): an open group
    (which then moves to the call's place), or a closed one when everything the call reads is computed
    before that group runs (the call then moves up into it). ``keep``: tensors that must reach memory
    whoever reads them (the graph's outputs, new states)."""
    groups: list[_Group] = []
    placed: list = []                       # the schedule: Call or _Group
    producer: dict[int, object] = {}        # tensor -> the Call or _Group that computes it
    for call in calls:
        reads = _reads(call)
        shape = _shape(call)
        target = None
        if shape is not None:
            n, dims = shape
            fits = [g for g in groups if g.takes(n, dims) and (g.open or _hoistable(reads, g, placed, producer))]
            feeding = [g for g in fits if reads & g.outputs()]
            target = (feeding or [g for g in fits if g.open] or [None])[-1]
        # a call reading a member's output before the group has run closes that group
        for g in groups:
            if g is not target and g.open and reads & g.outputs():
                g.open = False
        if shape is None:
            placed.append(call)
            producer.update({t: call for t in graph.operators[call.op_index].outputs})
            continue
        if target is None:
            target = _Group([call], *shape, call.op_index)
            groups.append(target)
            placed.append(target)
        else:
            target.members.append(call)
            target.dims = target.dims or shape[1]
            if target.open:     # the group moves to its newest member's place
                placed.remove(target)
                placed.append(target)
                target.at = call.op_index
        producer[call_output(call)] = target
    read_by: dict[int, set[int]] = {}       # tensor -> id of each group or call that reads it
    for item in placed:
        for t in (_reads(item) if isinstance(item, Call) else {t for m in item.members for t in tensor_inputs(m)}):
            read_by.setdefault(t, set()).add(id(item))
    out: list[Call] = []
    for item in placed:
        if isinstance(item, Call):
            out.append(item)
        elif len(item.members) == 1:
            out.append(item.members[0])
        else:
            stored = {t for t in item.outputs() if t in keep or read_by.get(t, set()) - {id(item)}}
            at = item.at
            out.append(FusedCall(at, "+".join(m.op for m in item.members), f"{prefix}_fused{at}", [],
                                 arrays=[a for m in item.members for a in m.arrays], members=item.members,
                                 n=item.n, dims=item.dims, stored=stored))
    return out


def _slice_copies(graph: Graph, call: Call, keep: set[int]) -> dict[int, tuple[int, int]]:
    """The outputs of a data-movement call that are one contiguous run of a tensor no op writes in place
    (SPLIT, RESHAPE, a STRIDED_SLICE of one run): output -> (source tensor, offset in elements)."""
    out = {}
    for sub in [call, *call.more]:
        if sub.fn != "edgernn_copy_runs":
            return {}
        a = call_args(sub)
        runs = next((arr.values for arr in call.arrays if arr.name == a["runs"][1]), None)
        if runs is None or len(runs) != 1:
            continue
        dst_off, src_off, count = (int(v) for v in runs[0])
        dst, src = a["dst"][1], a["src"][1]
        t, s = graph.tensors[dst], graph.tensors[src]
        if dst_off == 0 and count == t.size and t.dtype == "int8" and dst not in keep and \
                not s.is_const and not s.is_variable:
            out[dst] = (src, src_off)
    return out


def slice_aliases(graph: Graph, calls: list[Call], keep: set[int]) -> tuple[list[Call], dict[int, tuple[int, int]]]:
    """The schedule without the copies of slices, and each slice as (source, offset in elements): its
    readers read it where it lies, in its source (a slice of a slice resolved to the first source), which
    the memory plan keeps alive as long as the slice is read."""
    aliases: dict[int, tuple[int, int]] = {}
    out = []
    for call in calls:
        slices = _slice_copies(graph, call, keep)
        for dst, (src, off) in slices.items():
            root, base = aliases.get(src, (src, 0))
            aliases[dst] = (root, base + off)
        call = _without_copies(call, lambda a: a["dst"][1] in slices)
        if call is not None:
            out.append(call)
    return out, aliases


def _without_copies(call: Call, dropped) -> Call | None:
    """The call without the copies (``edgernn_copy_runs`` in its chain) whose arguments ``dropped`` picks,
    or None when nothing is left."""
    chain = [c for c in [call, *call.more] if c.fn != "edgernn_copy_runs" or not dropped(call_args(c))]
    if not chain:
        return None
    if len(chain) == len(call.more) + 1:
        return call
    first = chain[0]
    return Call(first.op_index, first.op, first.fn, first.args, arrays=call.arrays, structs=call.structs,
                more=chain[1:], scratch=call.scratch)


def _placed_copies(graph: Graph, call: Call, avoid: set[int], taken: set[int]) -> dict[int, tuple[int, int]]:
    """The sources of a data-movement call (a CONCATENATION's inputs) that are each one whole contiguous
    run of its output and that their producer can write straight there: source -> (output, offset in
    elements). A source no op writes (constant, variable, the graph's input, a state), one that must keep
    its own place (in ``avoid``: a step output, a new state, a slice read in its source) or one already
    placed (``taken``) keeps its copy, and so does a source copied twice; an output in ``avoid`` (the
    graph's input, a state) takes nothing."""
    out: dict[int, tuple[int, int]] = {}
    seen: list[int] = []
    written = {t for op in graph.operators for t in op.outputs}
    for sub in [call, *call.more]:
        if sub.fn != "edgernn_copy_runs":
            return {}
        seen.append(call_args(sub)["src"][1])
    for sub in [call, *call.more]:
        a = call_args(sub)
        runs = next((arr.values for arr in call.arrays if arr.name == a["runs"][1]), None)
        dst, src = a["dst"][1], a["src"][1]
        if runs is None or len(runs) != 1 or seen.count(src) != 1:
            continue
        dst_off, src_off, count = (int(v) for v in runs[0])
        t, s = graph.tensors[dst], graph.tensors[src]
        if src_off == 0 and count == s.size and s.dtype == t.dtype and s.dtype in ("int8", "int16") and \
                src in written and src not in avoid and src not in taken and dst not in avoid and \
                not (s.is_const or s.is_variable or t.is_const or t.is_variable):
            out[src] = (dst, dst_off)
    return out


def concat_aliases(graph: Graph, calls: list[Call], keep: set[int], fixed: set[int],
                   aliases: dict[int, tuple[int, int]]) -> tuple[list[Call], dict[int, tuple[int, int]]]:
    """The inverse of ``slice_aliases``: the schedule without the copies that put a whole tensor into one
    run of another (a CONCATENATION's inputs), each such input placed in its output, so that its
    producer writes it there. The result holds every alias (slices too) resolved to the tensor that has
    the memory: tensor -> (root, offset in elements). The memory plan keeps the root alive from the first
    write of any tensor in it to the last read of any."""
    placed: dict[int, tuple[int, int]] = {}
    out = []
    for call in calls:
        # a source: not kept in its own place, not a slice (it lies in its source); an output: any
        # arena tensor (a step output or a new state too: they are copied out after the step)
        moved = {src: (dst, off) for src, (dst, off) in
                 _placed_copies(graph, call, set(fixed) | set(aliases), set(placed)).items()
                 if src not in keep}
        placed.update(moved)
        call = _without_copies(call, lambda a: a["src"][1] in moved)
        if call is not None:
            out.append(call)
    every = {**aliases, **placed}

    def root(t: int) -> tuple[int, int]:
        host, off = every[t]
        while host in every:
            host, more = every[host]
            off += more
        return host, off

    return out, {t: root(t) for t in every}


def _hoistable(reads: set[int], group: _Group, placed: list, producer: dict) -> bool:
    """Whether a call reading ``reads`` can run inside ``group``, where the group stands now."""
    at = placed.index(group)
    for t in reads:
        p = producer.get(t)
        if p is not None and p is not group and placed.index(p) > at:
            return False
    return True


def positions(calls: list[Call]) -> dict[int, int]:
    """op index -> the op index of the call that computes it (a fused group's place)."""
    pos = {}
    for call in calls:
        for m in getattr(call, "members", None) or [call]:
            pos[m.op_index] = call.op_index
    return pos


def unstored(calls: list[Call]) -> set[int]:
    """Member outputs that live only in registers."""
    return {call_output(m) for c in calls if isinstance(c, FusedCall) for m in c.members} - \
        {t for c in calls if isinstance(c, FusedCall) for t in c.stored}


# ---- the C of a fused loop ----

def _literal(values) -> str:
    return "{" + ", ".join(str(int(v)) for v in values) + "}"


def _advance(walked: list[int], dims, depth: int) -> list[str]:
    """Step the counters of the walked dimensions, the last fastest; the outermost never wraps."""
    pad = "    " * depth
    d = walked[-1]
    if len(walked) == 1:
        return [f"{pad}++d{d};"]
    return [f"{pad}if (++d{d} == {dims[d]}) {{", f"{pad}    d{d} = 0;", *_advance(walked[:-1], dims, depth + 1),
            f"{pad}}}"]


def _contiguous(dims) -> list[int]:
    strides, acc = [0] * 4, 1
    for d in range(3, -1, -1):
        strides[d] = acc
        acc *= dims[d]
    return strides


def _addsub_scaled(v: int, off: int, left: int, m: int, shift: int) -> int:
    """An ADD/SUB input rescaled to the common scale, as TFLite's reference kernel computes it."""
    return qp.rdbpot(qp.srdhm((v + off) * (1 << left), m), -shift)


def _addsub_out(raw: int, q) -> int:
    _, _, zo, _, _, _, _, _, mo, sho, lo, hi = (int(f) for f in q)
    return max(lo, min(hi, qp.rdbpot(qp.srdhm(raw, mo), -sho) + zo))


def _is_half(q, which: int) -> bool:
    """The input's real multiplier is 0.5 exactly: its rescale is a product (edgernn_addsub_k's half)."""
    left, m, sh = int(q[3]), int(q[4 + 2 * which]), int(q[5 + 2 * which])
    return m == (1 << 30) and sh == 0 and left >= 1


def input_table(q, which: int) -> list[int]:
    """The rescaled value of ADD/SUB input ``which`` (0 or 1) for each int8 value, by (uint8_t) index:
    it depends on the quantization only, so the loop looks it up instead of a 64-bit rescale."""
    off, left, m, sh = int(q[which]), int(q[3]), int(q[4 + 2 * which]), int(q[5 + 2 * which])
    return [_addsub_scaled(((u + 128) % 256) - 128, off, left, m, sh) for u in range(256)]


def const_table(q, negate: bool, kc: int) -> list[int]:
    """ADD/SUB of one constant the same for every element is a function of the int8 input alone."""
    off1, left, m1, sh1 = int(q[0]), int(q[3]), int(q[4]), int(q[5])
    sign = -1 if negate else 1
    return [_addsub_out(sign * _addsub_scaled(((u + 128) % 256) - 128, off1, left, m1, sh1) + kc, q)
            for u in range(256)]


def _offset_bound(off: int) -> int:
    """The largest |v + off| of an int8 v."""
    return max(abs(-128 + off), abs(127 + off))


def narrow(bound: int, m: int, e: int) -> str | None:
    """The arguments ``m, up, e`` of edgernn_rescale_narrow for values |x| <= bound, or None where its
    conditions (|x| * 2^up <= INT32_MAX, 2 <= up, up + e <= 31, 2^30 <= m) do not hold."""
    if bound <= 0 or m < (1 << 30) or e < 0:
        return None
    up = min(((1 << 31) - 1) // bound, 1 << 30).bit_length() - 1
    up = min(up, 31 - e)
    return f"{m}, {up}, {e}" if up >= 2 else None


def _mul_narrow(q) -> str | None:
    o1, o2, _, m, sh = (int(f) for f in q[:5])
    left = max(sh, 0)
    return narrow(_offset_bound(o1) * _offset_bound(o2) << left, m, max(-sh, 0))


def _addsub_narrow(q, bound1: int, bound2: int) -> str | None:
    return narrow(bound1 + bound2, int(q[8]), -int(q[9]))


def tables(call: FusedCall, structs: dict) -> dict[int, list[ConstArray]]:
    """op index -> the int8 tables its member reads in place of arithmetic (computed here, at generation)."""
    out: dict[int, list[ConstArray]] = {}
    for m in call.members:
        a = call_args(m)
        if m.fn in ("edgernn_addsub_n_s8", "edgernn_addsub_s8"):
            q = structs[a["p"][1]].fields
            out[m.op_index] = [None if _is_half(q, w) else
                               ConstArray(f"{call.fn}_op{m.op_index}_in{w + 1}", "int32_t", input_table(q, w))
                               for w in (0, 1)]
        elif m.fn == "edgernn_addsub_const_s8":
            q = structs[a["p"][1]].fields
            karr = next(arr for arr in m.arrays if arr.name == a["k"][1])
            if len(set(karr.values)) == 1:
                out[m.op_index] = [ConstArray(f"{call.fn}_op{m.op_index}_lut", "int8_t",
                                              const_table(q, a["negate"] == "1", int(karr.values[0])))]
    return out


def composed_tables(call: FusedCall, structs: dict) -> dict[int, tuple[ConstArray, int]]:
    """op index -> (one int8 table, the tensor it reads) for each table op of the loop (a table op, or an
    ADD/SUB of one constant for every element) whose input is another table op's output in the loop: the
    two tables composed at generation into one, read with the first one's input (a chain of any length)."""
    own = tables(call, structs)
    chains: dict[int, tuple[int, list[int]]] = {}    # output -> (source tensor, table over the source)
    out: dict[int, tuple[ConstArray, int]] = {}
    for m in call.members:
        a = call_args(m)
        if m.fn == "edgernn_lut_s8":
            values = [int(v) for v in next(arr for arr in m.arrays if arr.name == a["table"][1]).values]
        elif m.fn == "edgernn_addsub_const_s8" and m.op_index in own:
            values = [int(v) for v in own[m.op_index][0].values]
        else:
            continue
        src = a["in"][1]
        if src in chains:
            src, first = chains[src]
            values = [values[first[u] & 0xFF] for u in range(256)]
            out[m.op_index] = (ConstArray(f"{call.fn}_op{m.op_index}_chain", "int8_t", values), src)
        chains[a["out"][1]] = (src, values)
    return out


def _drop_unread(body: list[str]) -> list[str]:
    """The loop body without the values nothing reads or stores (a table op composed into the next)."""
    kept: list[str] = []
    for line in reversed(body):
        m = re.match(r"\s*const int32_t (v\d+) = ", line)
        if m and not any(re.search(rf"\b{m.group(1)}\b", later) for later in kept):
            continue
        kept.append(line)
    return kept[::-1]


def render_fused(call: FusedCall, expr, structs: dict, input_tensor: int = -1, root=lambda t: t,
                 fast: dict[str, str] | None = None) -> str:
    """The definition of a fused loop as an edgernn_range_fn over its output elements [begin, end).
    ``expr(t)``: a tensor's C expression; ``structs``: name -> ConstStruct of the members' parameters;
    the graph's input (``input_tensor``, int8; ``root(t)``: the tensor a slice t lies in) comes as the
    range function's args; ``fast``: constant name -> the expression of its copy in the team's fast
    memory, which the loop then reads instead of the constant itself.
    A broadcasting group walks its 4-D shape with one counter per dimension longer than 1."""
    consts, body, outs = [], [], []
    value: dict[int, str] = {}
    loads: dict[tuple, str] = {}
    dims = call.dims
    walked = [d for d in range(4) if dims is not None and dims[d] > 1]
    flat = tuple(_contiguous(dims)[d] for d in walked) if dims is not None else ()

    def operand(t: int, strides=None) -> str:
        if t in value:
            return value[t]

        key = tuple(strides[d] for d in walked) if strides is not None else flat
        if (t, key) not in loads:
            loads[(t, key)] = f"in{len(loads)}"
        name = loads[(t, key)]
        if key == flat:
            return f"{name}[i]"
        terms = [f"d{d} * {st}" if st != 1 else f"d{d}" for d, st in zip(walked, key) if st != 0]
        return f"{name}[{' + '.join(terms) if terms else '0'}]"

    tabs = tables(call, structs)
    composed = composed_tables(call, structs)
    for m in call.members:
        a = call_args(m)
        k = f"k{m.op_index}"
        bc = structs[a["b"][1]].fields if "b" in a else None
        s1, s2 = (bc[1], bc[2]) if bc is not None else (None, None)
        if m.op_index in composed:   # a table of a table: one lookup (composed_tables)
            arr, src = composed[m.op_index]
            expr_v = f"edgernn_lut_elem({arr.name}, {operand(src)})"
        elif m.fn == "edgernn_lut_s8":
            expr_v = f"edgernn_lut_elem({a['table'][1]}, {operand(a['in'][1])})"
        elif m.fn in ("edgernn_mul_n_s8", "edgernn_mul_s8"):
            q = structs[a["p"][1]]
            consts.append(f"    const edgernn_mul_k_t {k} = edgernn_mul_k(&(const edgernn_mul_params_t){_literal(q.fields)});")
            prod = f"edgernn_mul_prod(&{k}, {operand(a['in1'][1], s1)}, {operand(a['in2'][1], s2)})"
            nw = _mul_narrow(q.fields)
            expr_v = (f"edgernn_mul_out_narrow(&{k}, {prod}, {nw})" if nw else
                      f"edgernn_mul_elem(&{k}, {operand(a['in1'][1], s1)}, {operand(a['in2'][1], s2)})")
        elif m.fn == "edgernn_div_s8":
            q = structs[a["p"][1]]
            consts.append(f"    const edgernn_mul_params_t {k} = {_literal(q.fields)};")
            expr_v = f"edgernn_div_elem(&{k}, {operand(a['in1'][1], s1)}, {operand(a['in2'][1], s2)})"
        elif m.fn in ("edgernn_addsub_n_s8", "edgernn_addsub_s8"):
            q = structs[a["p"][1]]
            consts.append(f"    const edgernn_addsub_k_t {k} = "
                          f"edgernn_addsub_k(&(const edgernn_addsub_params_t){_literal(q.fields)}, {a['subtract']});")
            # the input that is not a product is looked up, already rescaled (input_table)
            sc = []
            for w, (name, st) in enumerate((("in1", s1), ("in2", s2))):
                x = operand(a[name][1], st)
                t = tabs[m.op_index][w]
                sc.append(f"edgernn_addsub_scaled(&{k}.r{w + 1}, {k}.half{w + 1}, {k}.half_mul, {x} + {k}.off{w + 1})"
                          if t is None else f"{t.name}[(uint8_t){x}]")
            bounds = [max(abs(v) for v in input_table(q.fields, w)) for w in (0, 1)]
            nw = _addsub_narrow(q.fields, *bounds)
            raw = f"{sc[0]} + {k}.sign2 * {sc[1]}"
            expr_v = f"edgernn_addsub_out_narrow(&{k}, {raw}, {nw})" if nw else f"edgernn_addsub_out(&{k}, {raw})"
        elif m.fn == "edgernn_addsub_const_s8":
            q = structs[a["p"][1]]
            karr = next(arr for arr in m.arrays if arr.name == a["k"][1])
            if m.op_index in tabs:      # one constant for all elements: a table (const_table)
                expr_v = f"edgernn_lut_elem({tabs[m.op_index][0].name}, {operand(a['in'][1])})"
            else:
                consts.append(f"    const edgernn_addsub_k_t {k} = "
                              f"edgernn_addsub_k(&(const edgernn_addsub_params_t){_literal(q.fields)}, {a['negate']});")
                x = operand(a["in"][1])
                nw = _addsub_narrow(q.fields, max(abs(v) for v in input_table(q.fields, 0)),
                                    max(abs(int(v)) for v in karr.values))
                scaled = f"edgernn_addsub_scaled(&{k}.r1, {k}.half1, {k}.half_mul, {x} + {k}.off1)"
                expr_v = (f"edgernn_addsub_out_narrow(&{k}, {k}.sign2 * {scaled} + {karr.name}[i], {nw})" if nw
                          else f"edgernn_addsub_const_elem(&{k}, {x}, {karr.name}[i])")
        else:
            raise ValueError(f"{m.fn} is not fusable")
        out_t = a["out"][1]
        v = f"v{m.op_index}"
        body.append(f"        const int32_t {v} = {expr_v};   /* op {m.op_index}: {m.op} */")
        if out_t in call.stored:
            # through a pointer taken before the loop: the int8 store could alias the arena's base pointer,
            # which the compiler would otherwise load again in every iteration
            outs.append(f"    int8_t *const out{len(outs)} = {expr(out_t)};")
            body.append(f"        out{len(outs) - 1}[i] = (int8_t){v};")
        value[out_t] = v
    body = _drop_unread(body)
    loads = {key: name for key, name in loads.items() if any(re.search(rf"\b{name}\[", line) for line in body)}
    ptrs = [f"    const int8_t *const {name} = {expr(t)};" for (t, _), name in loads.items()]
    if any(root(t) == input_tensor for t, _ in loads):
        ptrs.insert(0, f"    const int8_t *const {expr(input_tensor)} = (const int8_t *)args;")
    body, copies = _fast_tables(call, structs, body, fast or {})
    ptrs += outs + copies
    ops = ", ".join(f"{m.op_index} ({m.op})" for m in call.members)
    walk, step = [], []
    if walked:
        inner = 1
        for d in reversed(walked):
            walk.append(f"    int d{d} = (begin / {inner}) % {dims[d]};")
            inner *= dims[d]
        # the counters of the output's position, the last dimension fastest; the outermost never wraps
        step = _advance(walked, dims, 2)
        if len(walked) == 1:   # one dimension: its counter is i
            step, walk = [], []
            body = [re.sub(rf"\bd{walked[0]}\b", "i", line) for line in body]
    return "\n".join(line for line in [
        f"/* ops {ops}: one loop, intermediates in registers */",
        f"static void {call.fn}(const void *args, int begin, int end)",
        "{",
        *ptrs,
        *consts,
        *walk,
        "    int i;",
        "    (void)args;" if not ptrs or "args;" not in ptrs[0] else None,
        "    for (i = begin; i < end; ++i) {",
        *body,
        *step,
        "    }",
        "}",
    ] if line is not None)


def _fast_tables(call: FusedCall, structs: dict, body: list[str], fast: dict[str, str]
                 ) -> tuple[list[str], list[str]]:
    """The loop's constants that have a copy in the team's fast memory, read there through a local
    pointer taken once before the loop (on GAP8 the constants themselves stay in L2, several cycles a
    load away, and a pointer re-read from the copy's base in the loop could not stay in a register: the
    loop's int8 stores may alias it). Returns the body with the constants renamed and the pointers."""
    made = [t for ts in tables(call, structs).values() for t in ts if t is not None]
    made += [arr for arr, _ in composed_tables(call, structs).values()]
    copies = []
    for arr in call.arrays + made:
        if arr.name not in fast or not any(re.search(rf"\b{arr.name}\b", line) for line in body):
            continue
        local = f"c{len(copies)}"
        copies.append(f"    const {arr.ctype} *const {local} = {fast[arr.name]};")
        body = [re.sub(rf"\b{arr.name}\b", local, line) for line in body]
    return body, copies


def used_arrays(call: FusedCall) -> list[ConstArray]:
    """The members' constant arrays the loop still reads (a uniform constant operand is a literal)."""
    structs = {s.name: s for m in call.members for s in m.structs}
    text = render_fused(call, lambda t: "", structs)
    made = [t for ts in tables(call, structs).values() for t in ts if t is not None]
    made += [arr for arr, _ in composed_tables(call, structs).values()]
    return [a for a in call.arrays + made if re.search(rf"\b{a.name}\b", text)]
