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

from dataclasses import dataclass, field

from edgernn.backend.ir import Graph
from edgernn.backend.kernels import kernel
from edgernn.backend.lowering import Call, ConstArray

# the flat 8-bit kernels a loop can take in: their element-wise inputs and the argument holding n
FUSABLE = {
    "edgernn_addsub_n_s8": ("in1", "in2"),
    "edgernn_addsub_const_s8": ("in",),
    "edgernn_mul_n_s8": ("in1", "in2"),
    "edgernn_lut_s8": ("in",),
}


@dataclass
class FusedCall(Call):
    """One loop over [0, n) computing ``members`` (the original calls, in schedule order)."""

    members: list[Call] = field(default_factory=list)
    n: int = 0
    stored: set[int] = field(default_factory=set)     # member outputs written to memory
    team: bool = False                                 # split across the team by element range


def _args(call: Call) -> dict:
    return dict(zip(kernel(call.fn).arg_names, call.args))


def tensor_inputs(call: Call) -> list[int]:
    """The tensors a call reads (arguments ("tensor", i), its own output excluded)."""
    out = call_output(call)
    seen = []
    for c in [call, *call.more]:
        for a in c.args:
            if isinstance(a, tuple) and a[0] == "tensor" and a[1] != out and a[1] not in seen:
                seen.append(a[1])
    return seen


def call_output(call: Call) -> int | None:
    if call.fn in FUSABLE:
        return _args(call)["out"][1]
    return None


def _reads(call: Call) -> set[int]:
    if isinstance(call, FusedCall):
        return {t for m in call.members for t in tensor_inputs(m)}
    return {a[1] for c in [call, *call.more] for a in c.args if isinstance(a, tuple) and a[0] == "tensor"}


def _n(call: Call) -> int | None:
    try:
        return int(_args(call)["n"])
    except (TypeError, ValueError):
        return None


def fuse_calls(graph: Graph, calls: list[Call], prefix: str, keep: set[int]) -> list[Call]:
    """The schedule with each group of two or more fusable calls replaced by one FusedCall.

    ``keep``: tensors that must reach memory whoever reads them (the graph's outputs, new states)."""
    groups: list[list[Call]] = []
    open_by_n: dict[int, int] = {}          # n -> index in groups of the group still taking members
    placed: list[tuple[str, object]] = []   # the schedule: ("call", Call) or ("group", index)
    for call in calls:
        reads = _reads(call)
        n = _n(call) if call.fn in FUSABLE else None
        joining = open_by_n.get(n) if n is not None else None
        # a call reading a member's output before the group has run closes that group
        for gn, gi in list(open_by_n.items()):
            if gi != joining and reads & {call_output(m) for m in groups[gi]}:
                del open_by_n[gn]
        if n is None:
            placed.append(("call", call))
            continue
        if joining is None:
            groups.append([call])
            open_by_n[n] = len(groups) - 1
            placed.append(("group", len(groups) - 1))
        else:
            groups[joining].append(call)
            # the group moves to its newest member's place
            placed = [p for p in placed if p != ("group", joining)] + [("group", joining)]
    read_later: dict[int, set[int]] = {}     # tensor -> groups (or -1 for a plain call) that read it
    for kind, item in placed:
        if kind == "call":
            for t in _reads(item):
                read_later.setdefault(t, set()).add(-1)
        else:
            for m in groups[item]:
                for t in tensor_inputs(m):
                    read_later.setdefault(t, set()).add(item)
    out: list[Call] = []
    for kind, item in placed:
        if kind == "call":
            out.append(item)
            continue
        members = groups[item]
        if len(members) == 1:
            out.append(members[0])
            continue
        outputs = [call_output(m) for m in members]
        stored = {t for t in outputs if t in keep or read_later.get(t, set()) - {item}}
        last = members[-1]
        fused = FusedCall(last.op_index, "+".join(m.op for m in members), f"{prefix}_fused{last.op_index}", [],
                          arrays=[a for m in members for a in m.arrays], members=members, n=_n(last),
                          stored=stored)
        out.append(fused)
    return out


def positions(calls: list[Call]) -> dict[int, int]:
    """op index -> the op index of the call that computes it (a fused group's last member)."""
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


def render_fused(call: FusedCall, expr, structs: dict) -> str:
    """The definition of a fused loop as an edgernn_range_fn. ``expr(t)``: a tensor's C expression;
    ``structs``: name -> ConstStruct of the members' parameters."""
    consts, body = [], []
    value: dict[int, str] = {}
    loads: dict[int, str] = {}

    def operand(t: int) -> str:
        if t in value:
            return value[t]
        if t not in loads:
            loads[t] = f"in{len(loads)}"
        return f"{loads[t]}[i]"

    for m in call.members:
        a = _args(m)
        k = f"k{m.op_index}"
        v = f"v{m.op_index}"
        if m.fn == "edgernn_lut_s8":
            expr_v = f"edgernn_lut_elem({a['table'][1]}, {operand(a['in'][1])})"
        elif m.fn == "edgernn_mul_n_s8":
            q = structs[a["p"][1]]
            consts.append(f"    const edgernn_mul_k_t {k} = edgernn_mul_k(&(const edgernn_mul_params_t){_literal(q.fields)});")
            expr_v = f"edgernn_mul_elem(&{k}, {operand(a['in1'][1])}, {operand(a['in2'][1])})"
        elif m.fn == "edgernn_addsub_n_s8":
            q = structs[a["p"][1]]
            consts.append(f"    const edgernn_addsub_k_t {k} = "
                          f"edgernn_addsub_k(&(const edgernn_addsub_params_t){_literal(q.fields)}, {a['subtract']});")
            expr_v = f"edgernn_addsub_elem(&{k}, {operand(a['in1'][1])}, {operand(a['in2'][1])})"
        elif m.fn == "edgernn_addsub_const_s8":
            q = structs[a["p"][1]]
            consts.append(f"    const edgernn_addsub_k_t {k} = "
                          f"edgernn_addsub_k(&(const edgernn_addsub_params_t){_literal(q.fields)}, {a['negate']});")
            karr = next(arr for arr in m.arrays if arr.name == a["k"][1])
            kc = str(int(karr.values[0])) if len(set(karr.values)) == 1 else f"{karr.name}[i]"
            expr_v = f"edgernn_addsub_const_elem(&{k}, {operand(a['in'][1])}, {kc})"
        else:
            raise ValueError(f"{m.fn} is not fusable")
        out_t = a["out"][1]
        body.append(f"        const int32_t {v} = {expr_v};   /* op {m.op_index}: {m.op} */")
        if out_t in call.stored:
            body.append(f"        {expr(out_t)}[i] = (int8_t){v};")
        value[out_t] = v
    ptrs = [f"    const int8_t *const {name} = {expr(t)};" for t, name in loads.items()]
    ops = ", ".join(f"{m.op_index} ({m.op})" for m in call.members)
    return "\n".join([
        f"/* ops {ops}: one loop, intermediates in registers */",
        f"static void {call.fn}(const void *args, int begin, int end)",
        "{",
        *ptrs,
        *consts,
        "    int i;",
        "    (void)args;",
        "    for (i = begin; i < end; ++i) {",
        *body,
        "    }",
        "}",
    ])


def used_arrays(call: FusedCall) -> list[ConstArray]:
    """The members' constant arrays the loop still reads (a uniform constant operand is a literal)."""
    text = render_fused(call, lambda t: "", {s.name: s for m in call.members for s in m.structs})
    return [a for a in call.arrays if a.name in text]
