"""The lowering's shared parts: what a call is, the refusal, and the base class every op family
extends (tensors, named kernel calls through the kernel table, constants, the walk over the graph)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edgernn.backend.kernels import SIZES, kernel, struct_fields
from edgernn.backend.ir import Graph, Operator, Tensor
from edgernn.backend.values import NULL, ScratchArg, TensorArg
from edgernn.errors import EdgeRNNError

@dataclass
class ConstArray:
    name: str
    ctype: str
    values: list
    weights: bool = True         # placed with the board's weights section attribute


@dataclass
class ConstStruct:
    name: str
    ctype: str
    fields: list                 # initializer values in field order; nested lists are braces


@dataclass
class Call:
    op_index: int
    op: str
    fn: str
    args: list                   # typed values (edgernn/backend/values.py), in the kernel's order
    arrays: list[ConstArray] = field(default_factory=list)
    structs: list[ConstStruct] = field(default_factory=list)
    more: list = field(default_factory=list)   # further calls of the same op (data movement)
    scratch: tuple[str, int] | None = None      # (ctype, bytes) of arena scratch, argument ScratchArg(op)


class Unsupported(EdgeRNNError):
    pass


def _refuse(op: Operator, why: str) -> Unsupported:
    return Unsupported(f"op {op.index} ({op.op}) is not supported by the C backend: {why}")


class LoweringBase:
    def __init__(self, graph: Graph, prefix: str):
        self.g = graph
        self.prefix = prefix
        self.calls: list[Call] = []
        self.runtime_consts: set[int] = set()

    # ---- helpers ----
    def t(self, i: int) -> Tensor:
        return self.g.tensors[i]

    def call(self, op: Operator, fn: str, args: dict, **extra) -> Call:
        """A call of kernel fn, its arguments given by name (edgernn/backend/kernels.py). A kernel with
        scratch gets its buffer in the arena, of the size its table entry computes (NULL for none)."""
        k = kernel(fn)
        if k.scratch is not None:
            struct = next(s for s in extra.get("structs", []) if s.name == args[k.scratch_from].name)
            elems = k.scratch(struct_fields(struct))
            args = {**args, "scratch": ScratchArg(op.index) if elems else NULL}
            extra["scratch"] = (k.scratch_ctype, elems * SIZES[k.scratch_ctype]) if elems else None
        return Call(op.index, op.op, fn, k.order(args), **extra)

    def cname(self, op: Operator, what: str) -> str:
        return f"{self.prefix}_op{op.index}_{what}"

    def const_input(self, op: Operator, pos: int) -> np.ndarray:
        idx = op.inputs[pos]
        if idx < 0 or not self.t(idx).is_const:
            raise _refuse(op, f"input {pos} must be a constant")
        return self.t(idx).data

    def operand(self, i: int):
        """A tensor as a kernel argument; constants become runtime arrays in weights.c."""
        if self.t(i).is_const:
            self.runtime_consts.add(i)
        return TensorArg(i)

    def lower(self) -> list[Call]:
        for op in self.g.operators:
            fn = getattr(self, f"op_{op.op.lower()}", None)
            if fn is None:
                raise _refuse(op, "no kernel for this op")
            out_dtype = self.t(op.outputs[0]).dtype if op.outputs else "float32"
            call = fn(op, out_dtype)
            if call is None:
                raise _refuse(op, f"no {out_dtype} kernel")
            self.calls.append(call)
        return self.calls
