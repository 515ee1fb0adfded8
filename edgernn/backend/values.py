"""The values a kernel call is made of, and the memory a tensor lives in: typed, so that every pass
reads numbers as numbers and places as places. C text is made of them only when a template prints them
(``edgernn.backend.cprint``).

A call's argument is one of: an ``int`` (a count, a zero point, a flag), a :class:`Float` (a float32
literal), an :class:`Enum` (a C enumerator), a :class:`Function`, a :class:`SizeOf`, :data:`NULL`, or a reference to memory:
:class:`TensorArg` (a tensor of the graph, wherever the memory plan puts it), :class:`ConstArg` (a
constant array of weights.c), :class:`StructArg` (a constant parameter struct, passed by address) or
:class:`ScratchArg` (an operator's scratch buffer in the arena).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TensorArg:
    index: int


@dataclass(frozen=True)
class ConstArg:
    name: str


@dataclass(frozen=True)
class StructArg:
    name: str


@dataclass(frozen=True)
class ArgsBlock:
    """Element ``index`` of the graph's argument blocks ``name`` (a call's arguments filled once at init, in the
    team's fast memory where it has one), passed by address."""

    name: str
    index: int


@dataclass(frozen=True)
class ScratchArg:
    op_index: int


@dataclass(frozen=True)
class Float:
    value: float


@dataclass(frozen=True)
class Enum:
    name: str


@dataclass(frozen=True)
class SizeOf:
    ctype: str


@dataclass(frozen=True)
class Function:
    """A C function passed by name (a fused loop handed to edgernn_team_split)."""

    name: str


@dataclass(frozen=True)
class Null:
    pass


NULL = Null()

# the memories a tensor can live in
ARENA = "arena"      # the static arena, at a byte offset the memory plan chose
STATE = "state"      # the recurrent state, at its slot's byte offset
INPUT = "input"      # the step function's input parameter, by name
CONST = "const"      # a constant array of weights.c, by name
FAST = "fast"        # a constant's copy in the team's fast memory (model.c.j2's EDGERNN_FAST_WEIGHT)


@dataclass(frozen=True)
class Place:
    """Where a tensor (or a scratch buffer, or a constant) lives: its memory, its element type, its
    byte offset in that memory (arena, state) or its name (input, const, fast), and for a tensor that lies
    inside another (a slice, a CONCATENATION's input) the elements past that one's start."""

    memory: str
    ctype: str
    offset: int = 0
    name: str = ""
    elements: int = 0

    def within(self, elements: int) -> "Place":
        """The place ``elements`` further on: a tensor lying in this one."""
        return Place(self.memory, self.ctype, self.offset, self.name, self.elements + elements)

    @property
    def in_arena(self) -> bool:
        return self.memory == ARENA
