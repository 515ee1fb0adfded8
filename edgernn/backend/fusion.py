"""Fuse chains and trees of integer element-wise kernel calls over the same element count into one loop.

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

import functools
from dataclasses import dataclass, field

from edgernn.backend import quantparams as qp
from edgernn.backend.ir import Graph
from edgernn.backend.kernels import call_args
from edgernn.backend.lowering import Call, ConstArray
from edgernn.backend.values import TensorArg

# False: every call stays its own kernel (a build to hold the fused one against, tests/backend/test_fusion.py)
ENABLED = True

# the kernels a loop can take in: flat ones (n elements, every operand n elements long) and broadcasting
# ones (an edgernn_bcast_t: each operand walks the output's 4-D shape with its own strides). The 8-bit
# ones, the 16-bit ones of a 16x8 model and the QUANTIZE between the two (a mixed model's seam): a loop
# may mix them, each value held as an int32 and each load and store in its tensor's own type.
FLAT = {"edgernn_addsub_n_s8", "edgernn_addsub_const_s8", "edgernn_mul_n_s8", "edgernn_lut_s8",
        "edgernn_addsub_n_s16", "edgernn_addsub_const_s16", "edgernn_mul_n_s16", "edgernn_logistic_s16",
        "edgernn_tanh_s16", "edgernn_lut_s16", "edgernn_requantize_s8_s16", "edgernn_requantize_s16_s8",
        "edgernn_add_blocks_n_s16", "edgernn_add_blocks_const_s16", "edgernn_add_blocks_n_s8",
        "edgernn_add_blocks_const_s8", "edgernn_mul_blocks_n_s8"}
BROADCAST = {"edgernn_addsub_s8", "edgernn_mul_s8", "edgernn_div_s8", "edgernn_addsub_s16", "edgernn_mul_s16",
             "edgernn_add_blocks_s8", "edgernn_mul_blocks_s8"}


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
        return call_args(call)["out"].index
    return None


def tensor_inputs(call: Call) -> list[int]:
    """The tensors a call reads (its TensorArg arguments, its own output excluded), in order."""
    out = call_output(call)
    seen: list[int] = []
    for c in [call, *call.more]:
        for a in c.args:
            if isinstance(a, TensorArg) and a.index != out and a.index not in seen:
                seen.append(a.index)
    return seen


def reads(call: Call) -> set[int]:
    """The tensors a call (a fused loop: its members) reads."""
    if isinstance(call, FusedCall):
        return {t for m in call.members for t in tensor_inputs(m)}
    return {a.index for c in [call, *call.more] for a in c.args if isinstance(a, TensorArg)}


def _shape(call: Call) -> tuple[int, tuple[int, ...] | None] | None:
    """(element count, 4-D output shape of a broadcasting call or None), or None if not fusable."""
    a = call_args(call) if (call.fn in FLAT or call.fn in BROADCAST) else None
    if a is None:
        return None
    if call.fn in FLAT:
        return (a["n"], None) if isinstance(a["n"], int) else None
    dims = tuple(int(d) for d in _struct(call, a["b"].name).fields[0])
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
        read = reads(call)
        shape = _shape(call)
        target = None
        if shape is not None:
            n, dims = shape
            fits = [g for g in groups if g.takes(n, dims) and (g.open or _hoistable(read, g, placed, producer))]
            feeding = [g for g in fits if read & g.outputs()]
            target = (feeding or [g for g in fits if g.open] or [None])[-1]
        # a call reading a member's output before the group has run closes that group
        for g in groups:
            if g is not target and g.open and read & g.outputs():
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
        for t in (reads(item) if isinstance(item, Call) else {t for m in item.members for t in tensor_inputs(m)}):
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
        runs = next((arr.values for arr in call.arrays if arr.name == a["runs"].name), None)
        if runs is None or len(runs) != 1:
            continue
        dst_off, src_off, count = (int(v) for v in runs[0])
        dst, src = a["dst"].index, a["src"].index
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
        call = _without_copies(call, lambda a: a["dst"].index in slices)
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
        seen.append(call_args(sub)["src"].index)
    for sub in [call, *call.more]:
        a = call_args(sub)
        runs = next((arr.values for arr in call.arrays if arr.name == a["runs"].name), None)
        dst, src = a["dst"].index, a["src"].index
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
        call = _without_copies(call, lambda a: a["src"].index in moved)
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


# ---- the arithmetic a fused loop folds at generation (the loop's tree: fusion_loop.py) ----

def contiguous(dims) -> list[int]:
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


def narrow(bound: int, m: int, e: int) -> tuple[int, int, int] | None:
    """The arguments ``(m, up, e)`` of edgernn_rescale_narrow for values |x| <= bound, or None where its
    conditions (|x| * 2^up <= INT32_MAX, 2 <= up, up + e <= 31, 2^30 <= m) do not hold."""
    if bound <= 0 or m < (1 << 30) or e < 0:
        return None
    up = min(((1 << 31) - 1) // bound, 1 << 30).bit_length() - 1
    up = min(up, 31 - e)
    return (m, up, e) if up >= 2 else None


def requantize_narrow(m: int, shift: int, bound: int) -> bool:
    """Whether a QUANTIZE between the integer types of inputs |x + offset| <= bound may take the one
    high multiply of edgernn_requantize_narrow_elem (edgernn_elementwise.c, requantize_narrow_applies)."""
    left, e = max(shift, 0), max(-shift, 0)
    return m >= (1 << 30) and e <= 29 and left <= 28 and (bound << (left + 2)) <= (1 << 31) - 1


def mul_narrow(q) -> tuple[int, int, int] | None:
    o1, o2, _, m, sh = (int(f) for f in q[:5])
    left = max(sh, 0)
    return narrow(_offset_bound(o1) * _offset_bound(o2) << left, m, max(-sh, 0))


def addsub_narrow(q, bound1: int, bound2: int) -> tuple[int, int, int] | None:
    return narrow(bound1 + bound2, int(q[8]), -int(q[9]))


INT16_BOUND = 32768    # the largest |v| of an int16 v


def _words(bound: int, m: int, left: int, e: int) -> bool:
    """Whether edgernn_rescale_words takes values |x| <= bound with (m, left, e): |x| * 2^left <= 2^30,
    left <= 29, 0 <= e <= 30 (edgernn_fixedpoint.h)."""
    return 0 <= left <= 29 and 0 <= e <= 30 and abs(m) < (1 << 31) and (bound << left) <= (1 << 30)


def _words_scaled_bound(bound: int, m: int, left: int, e: int) -> int:
    """An upper bound of |edgernn_rescale(x)| for |x| <= bound: the product's magnitude, one for the rounding."""
    return -(-(bound << left) * abs(m) // (1 << (31 + e))) + 1


def mul_words(q) -> tuple[int, int] | None:
    """The literals ``(m, e)`` of edgernn_mul_words_elem for an int16 MUL's parameters, or None where the
    product of two int16 inputs (offsets included) may leave its bound, or the shift is a left one."""
    o1, o2, _, m, sh = (int(f) for f in q[:5])
    if sh > 0:
        return None
    bound = (INT16_BOUND + abs(o1)) * (INT16_BOUND + abs(o2))
    return (m, -sh) if _words(bound, m, 0, -sh) else None


INT8_BOUND = 128       # the largest |v| of an int8 v


def addsub_words(q, bound2: int | None = None, in_bound: int = INT16_BOUND,
                 blocks: bool = False) -> tuple[int, ...] | None:
    """The literals ``(left, m1, e1, m2, e2, mo, eo)`` of edgernn_addsub_words_elem for an ADD/SUB's
    parameters (int16 inputs, or int8 ones with ``in_bound=INT8_BOUND``), or None where an input's rescale or
    their sum may leave edgernn_rescale_words's bounds. ``bound2``: the largest |kc| of an operand rescaled at
    generation (edgernn_addsub_const_words_elem), whose (m2, e2) are then unused. ``blocks``: for the builtin
    int16 ADD's words forms too (edgernn_add_blocks_words_elem), whose blocks rescale an input as
    edgernn_rescale_words(x, m, left - e, 0), which needs left - e >= 0 and its bound; their sum may be a unit
    past the reference's, so the output's bound is checked with that slack."""
    off1, off2, _, left, m1, sh1, m2, sh2, mo, sho = (int(f) for f in q[:10])
    raw = 2 if blocks else 0
    for which, (off, m, e) in enumerate(((off1, m1, -sh1), (off2, m2, -sh2))):
        if which == 1 and bound2 is not None:
            raw += bound2
            continue
        bound = in_bound + abs(off)
        if _is_half(q, which):
            raw += bound << (left - 1)
        elif _words(bound, m, left, e) and not blocks:
            raw += _words_scaled_bound(bound, m, left, e)
        elif _words(bound, m, left, e) and left - e >= 0 and _words(bound, m, left - e, 0):
            raw += max(_words_scaled_bound(bound, m, left, e), _words_scaled_bound(bound, m, left - e, 0))
        else:
            return None
    if not _words(raw, mo, 0, -sho):
        return None
    return (left, m1, -sh1, m2, -sh2, mo, -sho)


# the int16 LOGISTIC and TANH kernels, which read edgernn_tables.c's sigmoid table
SIGMOID16 = ("edgernn_logistic_s16", "edgernn_tanh_s16")
SIGMOID16_TABLE = "edgernn_sigmoid_table_uint16"
SIGMOID16_COPY = "_sigmoid16"      # the suffix of a fused loop's copy of that table
# The copy costs 512 bytes of the team's fast memory and saves two slow loads an element looked up (about 19
# cycles on GAP8, from L2): it is kept where a step's loops look the table up at least this many times (an LTC's
# synapse loops, 16 x 16 elements each; a CfC's gates on 16 units are far below, and keep their bytes)
SIGMOID16_COPY_ELEMENTS = 256


def sigmoid16_elements(calls) -> int:
    """How many times a step's fused loops look the sigmoid table up (elements times LOGISTIC/TANH members)."""
    return sum(c.n for c in calls if isinstance(c, FusedCall) for m in c.members if m.fn in SIGMOID16)


@functools.cache
def sigmoid16_table() -> tuple[int, ...]:
    """edgernn_tables.c's sigmoid table, as the kernels hold it."""
    from edgernn.resources import templates_dir

    text = (templates_dir() / "kernels" / "edgernn_tables.c").read_text()
    body = text[text.index(f"{SIGMOID16_TABLE}[256] = {{"):]
    values = tuple(int(v) for v in body[body.index("{") + 1:body.index("}")].split(",") if v.strip())
    if len(values) != 256:
        raise ValueError(f"edgernn_tables.c: {SIGMOID16_TABLE} has {len(values)} values, not 256")
    return values


# An int8 ADD/SUB input's table (input_table) holds 256 int32s, 1 KiB of the team's fast memory, and saves
# about 8 cycles an element against the word-form rescale (edgernn_rescale_words: a mul, a mulh, adds): it is
# made for loops of at least this many elements. A cell of 16 or 32 units keeps its bytes (a trained CfC's
# int8 step held nine such tables, 9 KiB, for 16 elements each: more than its whole int16 step).
INPUT_TABLE_ELEMENTS = 128


def looks_inputs_up(call: FusedCall) -> bool:
    """Whether the loop's int8 ADD/SUB members read their inputs from tables (else in words)."""
    return call.n >= INPUT_TABLE_ELEMENTS


def tables(call: FusedCall, structs: dict) -> dict[int, list[ConstArray]]:
    """op index -> the tables its member reads in place of arithmetic (computed here, at generation): an
    int8 ADD/SUB's rescaled inputs (in loops of INPUT_TABLE_ELEMENTS or more), or a uniform constant's; an int16
    LOGISTIC or TANH's copy of the kernels' sigmoid table, a constant of the model so that it is copied into the
    team's fast memory with the weights (firmware.py reads the kernels' own where there is no such copy)."""
    out: dict[int, list[ConstArray]] = {}
    for m in call.members:
        a = call_args(m)
        if m.fn in SIGMOID16:
            out[m.op_index] = [ConstArray(f"{call.fn}_op{m.op_index}{SIGMOID16_COPY}", "uint16_t",
                                          list(sigmoid16_table()))]
        elif m.fn in ("edgernn_addsub_n_s8", "edgernn_addsub_s8") and looks_inputs_up(call):
            q = structs[a["p"].name].fields
            out[m.op_index] = [None if _is_half(q, w) else
                               ConstArray(f"{call.fn}_op{m.op_index}_in{w + 1}", "int32_t", input_table(q, w))
                               for w in (0, 1)]
        elif m.fn == "edgernn_addsub_const_s8":
            q = structs[a["p"].name].fields
            karr = next(arr for arr in m.arrays if arr.name == a["k"].name)
            if len(set(karr.values)) == 1:
                out[m.op_index] = [ConstArray(f"{call.fn}_op{m.op_index}_lut", "int8_t",
                                              const_table(q, a["negate"] == 1, int(karr.values[0])))]
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
            values = [int(v) for v in next(arr for arr in m.arrays if arr.name == a["table"].name).values]
        elif m.fn == "edgernn_addsub_const_s8" and m.op_index in own:
            values = [int(v) for v in own[m.op_index][0].values]
        else:
            continue
        src = a["in"].index
        if src in chains:
            src, first = chains[src]
            values = [values[first[u] & 0xFF] for u in range(256)]
            out[m.op_index] = (ConstArray(f"{call.fn}_op{m.op_index}_chain", "int8_t", values), src)
        chains[a["out"].index] = (src, values)
    return out
