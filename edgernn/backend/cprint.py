"""The C text of typed values (edgernn/backend/values.py), for the templates: registered as their
filters (``c``, ``c_init``), and nowhere else turned into text."""

from __future__ import annotations

import numpy as np

from edgernn.backend.values import (ARENA, CONST, FAST, INPUT, STATE, ArgsBlock, ConstArg, Enum, Float, Function, Null, Place, SizeOf,
                                    StructArg)

FLT_MAX = "3.402823466e+38f"


def c_float(x: float) -> str:
    """A float32 literal: the shortest repr of the float32 value, with an 'f'; FLT_MAX for infinities."""
    if x == float("inf"):
        return FLT_MAX
    if x == float("-inf"):
        return "-" + FLT_MAX
    text = repr(float(np.float32(x)))
    return text + "f" if "." in text or "e" in text else text + ".0f"


def _place(p: Place) -> str:
    if p.memory == ARENA:
        base = f"EDGERNN_ARENA({p.ctype}, {p.offset})"
    elif p.memory == STATE:
        base = f"EDGERNN_STATE({p.ctype}, {p.offset})"
    elif p.memory == FAST:
        base = f"EDGERNN_FAST_WEIGHT({p.ctype}, {p.name})"
    elif p.memory in (INPUT, CONST):
        base = p.name
    else:
        raise ValueError(f"no C for memory {p.memory!r}")
    return f"({base} + {p.elements})" if p.elements else base


def c_expr(value) -> str:
    """The C expression of a call's resolved argument or a place."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, Place):
        return _place(value)
    if isinstance(value, Float):
        return c_float(value.value)
    if isinstance(value, (Enum, Function)):
        return value.name
    if isinstance(value, SizeOf):
        return f"sizeof({value.ctype})"
    if isinstance(value, Null):
        return "NULL"
    if isinstance(value, StructArg):
        return f"&{value.name}"
    if isinstance(value, ArgsBlock):
        return f"&{value.name}[{value.index}]"
    if isinstance(value, ConstArg):
        return value.name
    raise TypeError(f"no C for {value!r}")


def c_initializer(values) -> str:
    """A C initializer list for numbers or nested lists (struct fields, run triples)."""
    if isinstance(values, (list, tuple, np.ndarray)):
        return "{" + ", ".join(c_initializer(v) for v in values) + "}"
    if isinstance(values, (float, np.floating)):
        return repr(float(values)) + "f"
    return str(int(values))
