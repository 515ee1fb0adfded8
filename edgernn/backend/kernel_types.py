"""The types of the kernel table (edgernn/backend/kernels.py): a kernel's C signature read into named
arguments, a parameter struct's C members read into fields with their C layout (``Struct.size``), and
the ways the team splits a kernel's output range."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field

SCALAR_SIZES = {"int8_t": 1, "uint8_t": 1, "int16_t": 2, "uint16_t": 2, "int32_t": 4, "int64_t": 8, "float": 4}

# edgernn_requantize_s16's mode (edgernn_requantize_t in edgernn_kernels.h)
_DTYPES = {"f32": "float32", "s8": "int8", "s16": "int16"}


@dataclass(frozen=True)
class Arg:
    ctype: str        # as declared, without the name: "const int8_t *", "int"
    name: str

    @property
    def element(self) -> str:
        """The element type a pointer argument points to ("int8_t" of "const int8_t *")."""
        return self.ctype.removeprefix("const ").rstrip("* ").strip()

    @property
    def decl(self) -> str:
        return f"{self.ctype}{self.name}" if self.ctype.endswith("*") else f"{self.ctype} {self.name}"


@functools.lru_cache(maxsize=None)
def _params(signature: str) -> tuple[Arg, ...]:
    args = []
    for part in signature.split(","):
        m = re.fullmatch(r"\s*(.*?[\s*])(\w+)\s*", part)
        if m is None:
            raise ValueError(f"cannot read C parameter {part!r}")
        args.append(Arg(m.group(1).strip(), m.group(2)))
    return tuple(args)


@dataclass(frozen=True)
class Field:
    ctype: str
    name: str
    count: int        # 1 for a scalar, N for an array [N]


@dataclass(frozen=True)
class Struct:
    """A parameter struct, declared as C member lines ("int32_t a, b[4];  /* why */")."""

    name: str
    members: tuple[str, ...]
    doc: str = ""

    @property
    def fields(self) -> list[Field]:
        out = []
        for line in self.members:
            decl = line.split("/*")[0].strip().rstrip(";")
            ctype, names = decl.split(" ", 1)
            for name in names.split(","):
                m = re.fullmatch(r"\s*(\w+)(?:\[(\d+)\])?\s*", name)
                out.append(Field(ctype, m.group(1), int(m.group(2) or 1)))
        return out

    @property
    def size(self) -> int:
        """sizeof in C: each field at its natural alignment, the whole rounded to the largest."""
        offset, align = 0, 1
        for f in self.fields:
            s = SCALAR_SIZES[f.ctype]
            offset = (offset + s - 1) // s * s + s * f.count
            align = max(align, s)
        return (offset + align - 1) // align * align

    def index(self, name: str) -> int:
        """The position of a field in the struct's initializer (one item per field, arrays included)."""
        return [f.name for f in self.fields].index(name)


@dataclass(frozen=True)
class Split:
    """One way the team cuts a kernel's output range [0, count) into sub-ranges, one per worker.

    ``count`` is an argument (the range's length; a sub-range passes ``end - begin``) or ``arg.field``
    of a struct argument. ``advance`` names the pointer arguments that move with the range, each with
    the elements it moves per element of the range (1, an argument, or "arg.field[i]" of a struct
    argument). ``when`` is (argument, value): this split applies only then, else the next one. ``broadcast``: the count is
    the last dimension of that edgernn_bcast_t argument, shared only when the broadcast is one-dimensional,
    and a sub-range gets a copy of it of that length. ``weight`` scales the count into the measure the
    board's ``[parallel] min_count`` is in (a FULLY_CONNECTED's outputs).
    """

    count: str
    advance: tuple[tuple[str, str], ...] = ()
    when: tuple[str, int] | None = None
    grain: int = 1
    broadcast: str | None = None
    weight: int = 1


@dataclass(frozen=True)
class Kernel:
    name: str
    signature: str
    doc: str = ""
    section: str = ""                 # a heading printed before the kernel in edgernn_kernels.h
    splits: tuple[Split, ...] = ()    # empty: the team does not share it
    team_doc: str = ""                # a comment before the team kernel in edgernn_team.h
    wrapper: bool = True              # False: the team kernel is written by hand (edgernn_lstm.c)
    optional: tuple[str, ...] = ()    # pointer arguments that may be NULL
    source: str = ""                  # the C file under templates/kernels/ that defines it
    # the elements of its arena scratch (argument ``scratch``), from the fields of its struct argument
    # ``scratch_from`` (by name); 0: none (the argument is NULL)
    scratch: Callable[[dict], int] | None = field(default=None, compare=False)
    scratch_from: str = ""
    banded: str = ""                  # its team kernel through DMA tiles (edgernn/backend/tiling.py)

    @property
    def args(self) -> tuple[Arg, ...]:
        return _params(self.signature)

    @property
    def arg_names(self) -> list[str]:
        return [a.name for a in self.args]

    @property
    def dtypes(self) -> tuple[str, ...]:
        """The element types of the kernel, from its name's suffix (quantize_f32_s8: float32, int8)."""
        return tuple(_DTYPES[p] for p in self.name.split("_")[-2:] if p in _DTYPES)

    @property
    def team_name(self) -> str | None:
        return "edgernn_team_" + self.name[len("edgernn_"):] if self.splits else None

    @property
    def short(self) -> str:
        return self.name[len("edgernn_"):]

    def arg(self, name: str) -> Arg:
        return next(a for a in self.args if a.name == name)

    @property
    def scratch_ctype(self) -> str:
        """The element type of the scratch argument ("int8_t" of "int8_t *scratch")."""
        return self.arg("scratch").element

    def order(self, args: dict) -> list:
        """The call's arguments in the kernel's order, from a dict by argument name."""
        names = self.arg_names
        if set(args) != set(names):
            missing, extra = set(names) - set(args), set(args) - set(names)
            raise TypeError(f"{self.name}: missing arguments {sorted(missing)}, unknown {sorted(extra)}")
        return [args[n] for n in names]
