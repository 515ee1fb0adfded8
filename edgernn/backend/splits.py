"""The team's reading of a kernel call: the size of its output range, from the kernel's splits in the
table (edgernn/backend/kernels.py) and the call's typed arguments."""

from __future__ import annotations

import re

import numpy as np

from edgernn.backend.kernels import BY_NAME, STRUCT_BY_NAME
from edgernn.backend.values import StructArg


def _known(value) -> int | None:
    """A count known at generation (an int argument or struct field), else None."""
    return int(value) if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else None


def _struct_of(call, arg_value):
    """The ConstStruct a StructArg argument points to, or None."""
    if isinstance(arg_value, StructArg):
        for struct in call.structs:
            if struct.name == arg_value.name:
                return struct
    return None


def _field(call, args: dict, path: str):
    """An argument's value, or a field of the struct an argument points to ("p.n_cell", "b.dims[3]")."""
    m = re.fullmatch(r"(\w+)(?:\.(\w+)(?:\[(\d+)\])?)?", path)
    name, member, item = m.group(1), m.group(2), m.group(3)
    if member is None:
        return args[name]
    struct = _struct_of(call, args[name])
    if struct is None:
        return None
    value = struct.fields[STRUCT_BY_NAME[struct.ctype].index(member)]
    return value[int(item)] if item is not None else value


def split_count(call) -> int | None:
    """The size of a call's output range as its split measures it (``Split.weight`` per element), or
    None when the team cannot split it (not a team kernel, a size not known at generation time, a
    broadcast over more than one dimension)."""
    k = BY_NAME.get(call.fn)
    if k is None or not k.splits:
        return None
    args = dict(zip(k.arg_names, call.args))
    for split in k.splits:
        if split.when is not None:
            value = _known(args[split.when[0]])
            if value is None:
                return None
            if value != split.when[1]:
                continue
        if split.broadcast is not None:
            dims = _field(call, args, f"{split.broadcast}.dims")
            if dims is None or any(int(d) != 1 for d in dims[:3]):
                return None
        n = _known(_field(call, args, split.count))
        return None if n is None else n * split.weight
    return None


# ---- the C generated from the table ----
