"""A fused element-wise loop (edgernn/backend/fusion.py's FusedCall) as a small tree that
templates/model/fused_loop.c.j2 prints: the pointers it loads from and stores to, the constants it
folds, and per member one element value (an expression tree of the per-element functions of
templates/kernels/edgernn_elementwise.h) and its store, if it is stored.

Dead values (a table op composed into the next one) are dropped on the tree, with the loads and
constants only they read; a constant with a copy in the team's fast memory is read through a local
pointer, a node of its own. Nothing here is C text: the template writes every character.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edgernn.backend import fusion
from edgernn.backend.kernels import call_args
from edgernn.backend.lowering import ConstArray
from edgernn.backend.values import Place


# ---- expression nodes (the template's ``expr`` macro prints each kind) ----

@dataclass(frozen=True)
class Name:
    """A C identifier of the loop: a folded constant (k5), a table, a local pointer."""
    kind = "name"
    name: str


@dataclass(frozen=True)
class Int:
    kind = "int"
    value: int


@dataclass(frozen=True)
class Value:
    """The element value of member ``op``, held in a register."""
    kind = "value"
    op: int


@dataclass(frozen=True)
class Load:
    """Element of pointer ``name``: at the loop's index, or at a sum of counter x stride terms."""
    kind = "load"
    name: str
    terms: tuple[tuple[str, int], ...] | None = None    # None: [i]


@dataclass(frozen=True)
class Call:
    kind = "call"
    fn: str
    args: tuple


@dataclass(frozen=True)
class AddressOf:
    kind = "address"
    of: object


@dataclass(frozen=True)
class Member:
    kind = "member"
    of: object
    field: str


@dataclass(frozen=True)
class Element:
    """array[index] (``cast``: the index cast to that type first)."""
    kind = "element"
    array: object
    index: object
    cast: str = ""


@dataclass(frozen=True)
class Binary:
    kind = "binary"
    op: str
    left: object
    right: object


@dataclass(frozen=True)
class Index:
    """The loop's index, i."""
    kind = "index"


INDEX = Index()


@dataclass(frozen=True)
class Braces:
    """An initializer list of numbers."""
    kind = "braces"
    fields: tuple[int, ...]


@dataclass(frozen=True)
class Params:
    """The address of a parameter struct written as a compound literal of its fields."""
    kind = "params"
    ctype: str
    fields: tuple[int, ...]


# ---- the loop ----

@dataclass
class Pointer:
    """A pointer taken once before the loop: ``const int8_t *const in0 = <place>;`` and the like."""
    name: str
    ctype: str
    place: Place
    writes: bool = False


@dataclass
class Constant:
    """A folded per-member constant: ``const <ctype> <name> = <value>;``."""
    ctype: str
    name: str
    value: object
    op: int


@dataclass
class Step:
    """One member's element: its value, and the pointer it is stored through (None: registers only) as
    that pointer's type."""
    op: int
    op_name: str
    value: object
    store: str | None = None
    ctype: str = "int8_t"


@dataclass
class Counter:
    """A counter of a broadcasting walk over dimension ``dim``: starts at (begin / inner) % size."""
    dim: int
    inner: int
    size: int

    @property
    def name(self) -> str:
        return f"d{self.dim}"


@dataclass
class Dead:
    """The elements whose stored values do not depend on the loop's inputs: those where a constant operand of a
    MUL is zero (its offset included), so that the product is 0 and the output its zero point, and each MUL
    fed such an output, if that is zero for it, too (an NCP wiring's synapse mask). ``test`` (one constant
    operand's zeros) is true on all or most of them; there the loop stores ``stores`` (pointer, element type,
    value) and computes nothing, and the elements it leaves are computed, to the same values."""
    test: object
    stores: list[tuple[str, str, int]]
    skipped: np.ndarray | None = None       # per element, whether the test holds there


# A loop branches to its dead elements' stores when they are at least this share of its elements: elsewhere the
# test would cost the live elements a load and a branch for little
DEAD_SHARE = 0.25
# What an element costs a core in a loop with dead elements, the team splitting such a loop in parts of equal cost,
# not of equal element counts (Loop.bounds): a dead one is a load, a branch and the stores (some 13 cycles in
# GVSOC's profile of an LTC AutoNCP(16,2)'s synapse loops); a live one computes each member. A core's first live
# element also fetches the live path's code (some 860 instructions) into the instruction cache, which the next
# ones find there, so the constants are the better of two tried in GVSOC (12 and 24 a step beat 8 and 40 on the
# LTC's int8 step), not the profile's cycles over the live elements (some 300 each)
DEAD_ELEMENT_CYCLES = 12
LIVE_STEP_CYCLES = 24
# The parts of such a loop: the team's workers (8 on GAP8's cluster, or any divisor of 48) each take the same
# number of parts
BALANCED_PARTS = 48


@dataclass
class Loop:
    fn: str
    ops: str                                  # "3 (ADD), 4 (MUL)"
    input: Place | None                       # the graph's input, read from the range function's args
    loads: list[Pointer] = field(default_factory=list)
    stores: list[Pointer] = field(default_factory=list)
    fast: list[Pointer] = field(default_factory=list)
    constants: list[Constant] = field(default_factory=list)
    # innermost first, the order they step in (the outermost never wraps); empty: the index is enough
    counters: list[Counter] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    # a member of a split by units (edgernn/backend/cells.py): [begin, end) are units, and the loop runs over
    # g * units + [begin, end) for each g < gates
    gates: int = 1
    units: int = 0
    dead: Dead | None = None
    # a loop with dead elements: its range [begin, end) is parts, part p its elements [bounds[p], bounds[p + 1])
    bounds: list[int] | None = None
    # called by the body itself (not through the team, nor from a split by units): kept out of line
    direct: bool = False

    @property
    def parts(self) -> int | None:
        """The size of the range the loop is called with, when it is not its elements."""
        return None if self.bounds is None else len(self.bounds) - 1

    @property
    def pointers(self) -> list[Pointer]:
        return self.loads + self.stores + self.fast

    def arrays_read(self) -> set[str]:
        return {n.name for s in self.steps for n in _walk(s.value) if isinstance(n, Name)}


def _walk(node):
    yield node
    for child in _children(node):
        yield from _walk(child)


def _children(node) -> tuple:
    if isinstance(node, Call):
        return node.args
    if isinstance(node, (AddressOf,)):
        return (node.of,)
    if isinstance(node, Member):
        return (node.of,)
    if isinstance(node, Element):
        return (node.array, node.index)
    if isinstance(node, Binary):
        return (node.left, node.right)
    return ()


def _replace(node, swap):
    """The tree with each node for which ``swap`` gives another replaced by it."""
    new = swap(node)
    if new is not None:
        return new
    if isinstance(node, Call):
        return Call(node.fn, tuple(_replace(a, swap) for a in node.args))
    if isinstance(node, AddressOf):
        return AddressOf(_replace(node.of, swap))
    if isinstance(node, Member):
        return Member(_replace(node.of, swap), node.field)
    if isinstance(node, Element):
        return Element(_replace(node.array, swap), _replace(node.index, swap), node.cast)
    if isinstance(node, Binary):
        return Binary(node.op, _replace(node.left, swap), _replace(node.right, swap))
    return node


def _ints(values) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


def build_loop(call: fusion.FusedCall, place, structs: dict, input_tensor: int = -1, root=lambda t: t,
               fast: dict[str, Place] | None = None, same: dict[str, str] | None = None,
               const_values=lambda t: None) -> Loop:
    """The loop of a fused call as an edgernn_range_fn over its output elements [begin, end).
    ``place(t)``: where tensor t lives; ``structs``: name -> ConstStruct of the members' parameters; the
    graph's input (``input_tensor``, int8; ``root(t)``: the tensor a slice t lies in) comes as the range
    function's args; ``fast``: constant name -> its copy in the team's fast memory, which the loop then
    reads instead of the constant itself. A broadcasting group walks its 4-D shape with one counter per
    dimension longer than 1 (the loop's index itself when there is one such dimension). ``same``: a table held
    once (codegen.held_once) -> the one the loop reads instead. ``const_values(t)``: a constant tensor's values
    (None for the others), which find the loop's dead elements (Dead)."""
    fast = fast or {}
    dims = call.dims
    walked = [d for d in range(4) if dims is not None and dims[d] > 1]
    flat = tuple(fusion.contiguous(dims)[d] for d in walked) if dims is not None else ()
    counter = {d: ("i" if len(walked) == 1 else f"d{d}") for d in walked}
    loads: dict[tuple, str] = {}      # (tensor, strides) -> pointer name, in order of first use
    value: dict[int, Value] = {}      # tensor -> the member value computing it
    steps: list[Step] = []
    constants: list[Constant] = []
    stores: list[Pointer] = []

    def operand(t: int, strides=None):
        if t in value:
            return value[t]
        key = tuple(strides[d] for d in walked) if strides is not None else flat
        if (t, key) not in loads:
            loads[(t, key)] = f"in{len(loads)}"
        name = loads[(t, key)]
        if key == flat:
            return Load(name)
        return Load(name, tuple((counter[d], st) for d, st in zip(walked, key) if st != 0))

    tabs = fusion.tables(call, structs)
    composed = fusion.composed_tables(call, structs)
    zero = _Zeros(call.n, const_values)
    for m in call.members:
        a = call_args(m)
        k = Name(f"k{m.op_index}")
        bc = structs[a["b"].name].fields if "b" in a else None
        s1, s2 = (bc[1], bc[2]) if bc is not None else (None, None)
        if m.op_index in composed:   # a table of a table: one lookup (composed_tables)
            arr, src = composed[m.op_index]
            v = Call("edgernn_lut_elem", (Name(arr.name), operand(src)))
        elif m.fn == "edgernn_lut_s8":
            v = Call("edgernn_lut_elem", (Name(a["table"].name), operand(a["in"].index)))
        elif m.fn == "edgernn_lut_s16":     # an int16 table op (RSQRT, EXP, ...): its 513-entry table
            v = Call("edgernn_lut_lookup_s16", (Name(a["table"].name), operand(a["in"].index)))
        elif m.fn in ("edgernn_mul_n_s8", "edgernn_mul_s8"):
            q = structs[a["p"].name]
            constants.append(_mul_k(k, q, m.op_index))
            x1, x2 = operand(a["in1"].index, s1), operand(a["in2"].index, s2)
            nw = fusion.mul_narrow(q.fields)
            v = (Call("edgernn_mul_out_narrow", (AddressOf(k), Call("edgernn_mul_prod", (AddressOf(k), x1, x2)),
                                                 *map(Int, nw))) if nw else
                 Call("edgernn_mul_elem", (AddressOf(k), x1, x2)))
            zero.mul(m.op_index, q.fields, (a["in1"].index, x1), (a["in2"].index, x2))
        elif m.fn in ("edgernn_mul_n_s16", "edgernn_mul_s16"):
            q = structs[a["p"].name]
            constants.append(_mul_k(k, q, m.op_index))
            x1, x2 = operand(a["in1"].index, s1), operand(a["in2"].index, s2)
            w = fusion.mul_words(q.fields)
            v = (Call("edgernn_mul_words_elem", (AddressOf(k), x1, x2, *map(Int, w))) if w else
                 Call("edgernn_mul_elem", (AddressOf(k), x1, x2)))
            zero.mul(m.op_index, q.fields, (a["in1"].index, x1), (a["in2"].index, x2))
        elif m.fn in ("edgernn_addsub_n_s16", "edgernn_addsub_s16"):
            q = structs[a["p"].name]
            constants.append(_addsub_k(k, q, a["subtract"], m.op_index))
            x1, x2 = operand(a["in1"].index, s1), operand(a["in2"].index, s2)
            w = fusion.addsub_words(q.fields)
            v = (Call("edgernn_addsub_words_elem", (AddressOf(k), x1, x2, *map(Int, w))) if w else
                 Call("edgernn_addsub_elem", (AddressOf(k), x1, x2)))
        elif m.fn == "edgernn_addsub_const_s16":
            q = structs[a["p"].name]
            karr = next(arr for arr in m.arrays if arr.name == a["k"].name)
            constants.append(_addsub_k(k, q, a["negate"], m.op_index))
            x, kc = operand(a["in"].index), Element(Name(karr.name), INDEX)
            w = fusion.addsub_words(q.fields, max((abs(int(v)) for v in karr.values), default=0))
            # (left, m1, e1, mo, eo): the constant operand has no rescale of its own, (m2, e2) go unused
            v = (Call("edgernn_addsub_const_words_elem", (AddressOf(k), x, kc, *map(Int, w[:3] + w[5:]))) if w else
                 Call("edgernn_addsub_const_elem", (AddressOf(k), x, kc)))
        elif m.fn == "edgernn_add_blocks_n_s16":
            q = structs[a["p"].name]
            constants.append(_addsub_k(k, q, 0, m.op_index))
            x1, x2 = operand(a["in1"].index), operand(a["in2"].index)
            w, in_block = fusion.addsub_words(q.fields, blocks=True), _in_block(a, call.n)
            v = (Call("edgernn_add_blocks_words_elem", (AddressOf(k), x1, x2, in_block, *map(Int, w))) if w else
                 Call("edgernn_add_blocks_elem", (AddressOf(k), x1, x2, in_block)))
        elif m.fn == "edgernn_add_blocks_const_s16":
            q = structs[a["p"].name]
            karr = next(arr for arr in m.arrays if arr.name == a["k"].name)
            constants.append(_addsub_k(k, q, 0, m.op_index))
            x, kc = operand(a["in"].index), Element(Name(karr.name), INDEX)
            w = fusion.addsub_words(q.fields, max((abs(int(v)) for v in karr.values), default=0), blocks=True)
            in_block = _in_block(a, call.n)
            v = (Call("edgernn_add_blocks_const_words_elem", (AddressOf(k), x, kc, in_block, *map(Int, w[:3] + w[5:])))
                 if w else Call("edgernn_add_blocks_const_elem", (AddressOf(k), x, kc, in_block)))
        elif m.fn in ("edgernn_add_blocks_n_s8", "edgernn_add_blocks_s8"):
            q = structs[a["p"].name]
            constants.append(_addsub_k(k, q, 0, m.op_index))
            v = Call("edgernn_add_vector_elem_s8", (AddressOf(k), operand(a["in1"].index, s1),
                                                    operand(a["in2"].index, s2), _in_block(a, call.n)))
        elif m.fn == "edgernn_add_blocks_const_s8":
            q = structs[a["p"].name]
            karr = next(arr for arr in m.arrays if arr.name == a["k"].name)
            constants.append(_addsub_k(k, q, 0, m.op_index))
            v = Call("edgernn_add_vector_const_elem_s8", (AddressOf(k), operand(a["in"].index),
                                                          Element(Name(karr.name), INDEX), _in_block(a, call.n)))
        elif m.fn in ("edgernn_mul_blocks_n_s8", "edgernn_mul_blocks_s8"):
            q = structs[a["p"].name]
            constants.append(_mul_k(k, q, m.op_index))
            v = Call("edgernn_mul_vector_elem_s8", (AddressOf(k), operand(a["in1"].index, s1),
                                                    operand(a["in2"].index, s2), _in_block(a, call.n)))
        elif m.fn in fusion.SIGMOID16:
            mult, left = a["input_multiplier"], a["input_left_shift"]
            if mult == 0:       # the kernel's own substitution (edgernn_elementwise.c)
                mult, left = 3 << left, 0
            v = Call(f"{m.fn}_elem", (Name(tabs[m.op_index][0].name), operand(a["in"].index), Int(mult), Int(left),
                                      Int(1 << (left - 1) if left > 0 else 0)))
        elif m.fn in ("edgernn_requantize_s8_s16", "edgernn_requantize_s16_s8"):
            off, _, zo, mult, shift, lo, hi = _ints(structs[a["p"].name].fields)
            x = operand(a["in"].index)
            bound = (128 if m.fn.endswith("s8_s16") else 32768) + abs(off)
            left, e = max(shift, 0), max(-shift, 0)
            v = (Call("edgernn_requantize_narrow_elem", (x, Int(off), Int(left), Int(mult), Int(e), Int(zo), Int(lo),
                                                         Int(hi)))
                 if fusion.requantize_narrow(mult, shift, bound) else
                 Call("edgernn_requantize_elem", (x, Int(off), Int(mult), Int(shift), Int(zo), Int(lo), Int(hi))))
        elif m.fn == "edgernn_div_s8":
            q = structs[a["p"].name]
            constants.append(Constant("edgernn_mul_params_t", k.name, Braces(_ints(q.fields)), m.op_index))
            v = Call("edgernn_div_elem", (AddressOf(k), operand(a["in1"].index, s1), operand(a["in2"].index, s2)))
        elif m.fn in ("edgernn_addsub_n_s8", "edgernn_addsub_s8"):
            q = structs[a["p"].name]
            constants.append(_addsub_k(k, q, a["subtract"], m.op_index))
            x1, x2 = operand(a["in1"].index, s1), operand(a["in2"].index, s2)
            looked_up = tabs.get(m.op_index, [None, None])
            w = None if any(looked_up) else fusion.addsub_words(q.fields, in_bound=fusion.INT8_BOUND)
            if w:       # a short loop: no tables, each rescale in 32-bit words
                v = Call("edgernn_addsub_words_elem", (AddressOf(k), x1, x2, *map(Int, w)))
            else:
                # the input that is not a product is looked up, already rescaled (fusion.input_table)
                scaled = [_addsub_scaled(k, i + 1, x) if t is None else Element(Name(t.name), x, "uint8_t")
                          for i, (x, t) in enumerate(zip((x1, x2), looked_up))]
                bounds = [max(abs(v) for v in fusion.input_table(q.fields, i)) for i in (0, 1)]
                nw = fusion.addsub_narrow(q.fields, *bounds)
                raw = Binary("+", scaled[0], Binary("*", Member(k, "sign2"), scaled[1]))
                v = (Call("edgernn_addsub_out_narrow", (AddressOf(k), raw, *map(Int, nw))) if nw else
                     Call("edgernn_addsub_out", (AddressOf(k), raw)))
        elif m.fn == "edgernn_addsub_const_s8":
            q = structs[a["p"].name]
            karr = next(arr for arr in m.arrays if arr.name == a["k"].name)
            if m.op_index in tabs:      # one constant for all elements: a table (fusion.const_table)
                v = Call("edgernn_lut_elem", (Name(tabs[m.op_index][0].name), operand(a["in"].index)))
            else:
                constants.append(_addsub_k(k, q, a["negate"], m.op_index))
                x = operand(a["in"].index)
                nw = fusion.addsub_narrow(q.fields, max(abs(v) for v in fusion.input_table(q.fields, 0)),
                                          max(abs(int(v)) for v in karr.values))
                kc = Element(Name(karr.name), INDEX)
                v = (Call("edgernn_addsub_out_narrow", (
                    AddressOf(k), Binary("+", Binary("*", Member(k, "sign2"), _addsub_scaled(k, 1, x)), kc),
                    *map(Int, nw))) if nw else
                     Call("edgernn_addsub_const_elem", (AddressOf(k), x, kc)))
        else:
            raise ValueError(f"{m.fn} is not fusable")
        out_t = a["out"].index
        store, ctype = None, "int8_t"
        if out_t in call.stored:
            # through a pointer taken before the loop: the int8 store could alias the arena's base pointer,
            # which the compiler would otherwise load again in every iteration
            store, ctype = f"out{len(stores)}", _ctype(place(out_t))
            stores.append(Pointer(store, ctype, place(out_t), writes=True))
        steps.append(Step(m.op_index, m.op, v, store, ctype))
        value[out_t] = Value(m.op_index)
    steps = _drop_unread(steps)
    dead = zero.dead(steps)
    for s in steps if same else []:
        s.value = _replace(s.value, lambda n: Name(same[n.name]) if isinstance(n, Name) and n.name in same else None)
    constants = [c for c in constants if any(s.op == c.op for s in steps)]
    read = {n.name for s in steps for n in _walk(s.value) if isinstance(n, Load)}
    pointers = [Pointer(name, _ctype(place(t)), place(t)) for (t, _), name in loads.items() if name in read]
    reads_input = any(root(t) == input_tensor for (t, _), name in loads.items() if name in read)
    loop = Loop(call.fn, ", ".join(f"{m.op_index} ({m.op})" for m in call.members),
                place(input_tensor) if reads_input else None, pointers, stores, [], constants, [], steps, dead=dead)
    if dead is not None:
        loop.bounds = balanced_bounds(dead.skipped, len(steps))
    _read_fast_copies(loop, call, structs, fast, same or {})
    if len(walked) > 1:
        inner = 1
        for d in reversed(walked):
            loop.counters.append(Counter(d, inner, dims[d]))
            inner *= dims[d]
    return loop


class _Zeros:
    """Where the loop's MUL members are zero products (Dead): per member, the elements where its value is known
    without its inputs, and that value. A MUL's product is 0 where an operand plus its offset is 0, whatever the
    other, and every rescale of MUL maps 0 to 0, so its value there is its output zero point, clamped."""

    def __init__(self, n: int, const_values):
        self.n, self.const_values = n, const_values
        self.known: dict[int, tuple[np.ndarray, int]] = {}      # op -> (elements, value there)
        self.witnesses: list[tuple[np.ndarray, Load, int]] = []  # a flat constant operand's zeros, its load, -offset

    def _zeros(self, tensor: int, x, off: int) -> np.ndarray | None:
        if isinstance(x, Value):
            if x.op not in self.known:
                return None
            at, v = self.known[x.op]
            return at if v + off == 0 else None
        data = self.const_values(tensor)
        if not isinstance(x, Load) or x.terms is not None or data is None or data.size != self.n:
            return None
        at = data.reshape(-1).astype(np.int64) + off == 0
        self.witnesses.append((at, x, -off))
        return at

    def mul(self, op: int, fields, *operands) -> None:
        o1, o2, zo, _, _, lo, hi = (int(f) for f in fields[:7])
        ats = [self._zeros(t, x, off) for (t, x), off in zip(operands, (o1, o2))]
        ats = [at for at in ats if at is not None]
        if ats:
            self.known[op] = (np.logical_or.reduce(ats), max(lo, min(hi, zo)))

    def dead(self, steps: list[Step]) -> Dead | None:
        stored = [s for s in steps if s.store is not None]
        if not stored or any(s.op not in self.known for s in stored):
            return None
        at = np.logical_and.reduce([self.known[s.op][0] for s in stored])
        # the test may leave some dead elements to the live path, which computes the same values: the constant
        # operand whose zeros are most of them
        loaded = {n for s in steps for n in _walk(s.value) if isinstance(n, Load)}
        fits = [(int(w.sum()), x, v, w) for w, x, v in self.witnesses if x in loaded and not (w & ~at).any()]
        count, x, v, skipped = max(fits, key=lambda f: f[0], default=(0, None, 0, None))
        if count < DEAD_SHARE * self.n:
            return None
        return Dead(Binary("==", x, Int(v)), [(s.store, s.ctype, self.known[s.op][1]) for s in stored], skipped)


def balanced_bounds(skipped: np.ndarray, steps: int, parts: int = BALANCED_PARTS) -> list[int]:
    """The element bounds of ``parts`` parts of about equal cost (DEAD_ELEMENT_CYCLES an element the dead test
    skips, LIVE_STEP_CYCLES a step on the others): part p is [bounds[p], bounds[p + 1]), the least element
    where the cost before it reaches p / parts of the whole (a part may be empty). The bytes do not depend
    on it: every element is computed or stored once, by whichever worker owns it."""
    n = skipped.size
    parts = min(parts, n)
    cost = np.where(skipped, DEAD_ELEMENT_CYCLES, DEAD_ELEMENT_CYCLES + LIVE_STEP_CYCLES * steps).astype(np.int64)
    before = np.concatenate([[0], np.cumsum(cost)])
    total = int(before[-1])
    bounds = np.searchsorted(before * parts, np.arange(parts + 1, dtype=np.int64) * total, side="left")
    bounds[0], bounds[-1] = 0, n
    return [int(b) for b in bounds]


def _addsub_k(k: Name, q, flag, op_index: int) -> Constant:
    """``const edgernn_addsub_k_t k = edgernn_addsub_k(&params, flag);`` (flag: subtract, or negate)."""
    return Constant("edgernn_addsub_k_t", k.name, Call("edgernn_addsub_k", (
        Params("edgernn_addsub_params_t", _ints(q.fields)), Int(flag))), op_index)


def _mul_k(k: Name, q, op_index: int) -> Constant:
    """``const edgernn_mul_k_t k = edgernn_mul_k(&params);``."""
    return Constant("edgernn_mul_k_t", k.name,
                    Call("edgernn_mul_k", (Params("edgernn_mul_params_t", _ints(q.fields)),)), op_index)


def _in_block(a: dict, n: int):
    """Whether the loop's element i lies in one of the blocks of a builtin kernel's variant (edgernn_add_blocks_*,
    edgernn_mul_blocks_*): element first + i of the op, in a block when (first + i) % run < blocked (an int16 ADD's
    run is the whole op). 1 when all n elements do (a comparison the compiler could not drop would make it version
    the loop, and warn of a constant operand's bounds in a version it never runs); i < blocked - first within one run;
    else i % run < blocked, for a fused member, which is the whole op (first 0)."""
    first, blocked = a["first"] if "first" in a else 0, a["blocked"]
    run = a.get("run", first + n)
    if first + n <= run:
        return Int(1) if first + n <= blocked else Binary("<", INDEX, Int(blocked - first))
    assert first == 0, a
    return Binary("<", Binary("%", INDEX, Int(run)), Int(blocked))   # printed i % run < blocked: % binds first


def _ctype(place) -> str:
    """The element type a tensor is loaded and stored as (int8_t for a loop built without places)."""
    return place.ctype if place is not None else "int8_t"


def _addsub_scaled(k: Name, w: int, x):
    """edgernn_addsub_scaled(&k.r<w>, k.half<w>, k.half_mul, x + k.off<w>)."""
    return Call("edgernn_addsub_scaled", (AddressOf(Member(k, f"r{w}")), Member(k, f"half{w}"),
                                          Member(k, "half_mul"), Binary("+", x, Member(k, f"off{w}"))))


def _drop_unread(steps: list[Step]) -> list[Step]:
    """The steps without the values nothing reads or stores (a table op composed into the next)."""
    kept: list[Step] = []
    read: set[Value] = set()       # the values the kept steps read
    for s in reversed(steps):
        if s.store is None and Value(s.op) not in read:
            continue
        kept.append(s)
        read.update(n for n in _walk(s.value) if isinstance(n, Value))
    return kept[::-1]


def _read_fast_copies(loop: Loop, call: fusion.FusedCall, structs: dict, fast: dict[str, Place],
                      same: dict[str, str]) -> None:
    """The loop's constants that have a copy in the team's fast memory, read there through a local
    pointer taken once before the loop (on GAP8 the constants themselves stay in L2, several cycles a
    load away, and a pointer re-read from the copy's base in the loop could not stay in a register: the
    loop's int8 stores may alias it)."""
    for arr in call.arrays + made_arrays(call, structs):
        name = same.get(arr.name, arr.name)      # a table held once is read where it is held
        if name not in fast or name not in loop.arrays_read():
            continue
        local = Name(f"c{len(loop.fast)}")
        loop.fast.append(Pointer(local.name, arr.ctype, fast[name]))
        for s in loop.steps:
            s.value = _replace(s.value, lambda n, name=name: local if n == Name(name) else None)


def made_arrays(call: fusion.FusedCall, structs: dict) -> list[ConstArray]:
    """The tables computed at generation for the loop (fusion.tables, fusion.composed_tables)."""
    made = [t for ts in fusion.tables(call, structs).values() for t in ts if t is not None]
    return made + [arr for arr, _ in fusion.composed_tables(call, structs).values()]


def used_arrays(call: fusion.FusedCall) -> list[ConstArray]:
    """The members' constant arrays the loop still reads (a uniform constant operand is a table)."""
    structs = {s.name: s for m in call.members for s in m.structs}
    loop = build_loop(call, lambda t: None, structs)
    read = loop.arrays_read()
    return [a for a in call.arrays + made_arrays(call, structs) if a.name in read]
