"""The C written from the kernel table (edgernn/backend/kernels.py): the kernel prototypes
(edgernn_kernels.h), the team kernel prototypes (edgernn_team.h) and the team wrappers
(edgernn_team_kernels.c), through the Jinja templates in templates/kernels/.

The three C files exist only where they are used: ``copy_kernels`` renders them into each firmware
folder beside the kernels, and a test or C check that compiles the kernels on their own renders them
into its own folder (``write_sources(folder)``)."""

from __future__ import annotations

from pathlib import Path

from edgernn.backend.kernels import (KERNELS, OWN_HEADER_SOURCES, REQUANTIZE_ABS, REQUANTIZE_IDENTITY, REQUANTIZE_NEG,
                                     STRUCTS)
from edgernn.backend.kernel_types import Arg, Kernel, Split


def _c_comment(text: str, indent: str = "") -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return f"{indent}/* {lines[0]} */"
    return "\n".join([f"{indent}/* {lines[0]}"] + [f"{indent} * {line}" for line in lines[1:-1]]
                     + [f"{indent} * {lines[-1]} */"])


def _wrap_call(head: str, items: list[str], tail: str, width: int = 110) -> str:
    """head + items joined by ", " + tail, broken before an item that would pass width, continuation
    lines aligned after head."""
    lines, line = [], head
    indent = " " * len(head)
    for i, item in enumerate(items):
        piece = item + (", " if i < len(items) - 1 else tail)
        if line != head and line != indent and len(line) + len(piece.rstrip()) > width:
            lines.append(line.rstrip())
            line = indent
        line += piece
    lines.append(line)
    return "\n".join(lines)


def prototype(name: str, args: tuple[Arg, ...], indent: str = "") -> str:
    return _wrap_call(f"{indent}void {name}(", [a.decl for a in args], ");")


def _member(step) -> tuple[str, str]:
    """An advance step as (argument, field): an argument ("b", "") or a field of the struct an argument
    points to ("b", "stride1[3]")."""
    arg, _, member = step.partition(".")
    return arg, member


def _sub_args(k: Kernel, split: Split) -> list[dict]:
    """What each argument of the kernel's call on a sub-range is, for the template to print: the broadcast
    copy, the sub-range's length, a pointer moved by begin times its step, the split's fixed value, or the
    argument as packed."""
    advance = dict(split.advance)
    items = []
    for arg in k.args:
        n = arg.name
        if split.broadcast == n:
            items.append({"kind": "broadcast", "name": n})
        elif n == split.count:
            items.append({"kind": "count", "name": n})
        elif n in advance:
            step = advance[n]
            items.append({"kind": "advance", "name": n, "unit": step == 1,
                          "step": None if step == 1 else _member(step), "optional": n in k.optional})
        elif split.when is not None and n == split.when[0]:
            items.append({"kind": "fixed", "name": n, "value": split.when[1]})
        else:
            items.append({"kind": "packed", "name": n})
    return items


def _wrapper(k: Kernel) -> dict:
    return {
        "kernel": k,
        "broadcast": next((s.broadcast for s in k.splits if s.broadcast), None),
        "conditional": any(s.when is not None for s in k.splits),
        "branches": [{"split": s, "args": _sub_args(k, s)} for s in k.splits],
    }


def _environment():
    import jinja2

    from edgernn.resources import templates_dir

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir() / "kernels")),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters["comment"] = _c_comment
    env.filters["call"] = lambda items, head, tail=");": _wrap_call(head, list(items), tail)
    return env


GENERATED = {"edgernn_kernels.h": "edgernn_kernels.h.j2", "edgernn_team.h": "edgernn_team.h.j2",
             "edgernn_team_kernels.c": "edgernn_team_kernels.c.j2"}


def render_sources() -> dict[str, str]:
    """The C files generated from the table: file name -> text."""
    env = _environment()
    team = [k for k in KERNELS if k.splits]
    shared = [k for k in KERNELS if k.source not in OWN_HEADER_SOURCES]
    context = {
        "structs": STRUCTS,
        "kernels": [{"kernel": k, "prototype": prototype(k.name, k.args)} for k in shared],
        "team": [{"kernel": k, "prototype": prototype(k.team_name, k.args)} for k in team],
        "wrappers": [_wrapper(k) for k in team if k.wrapper],
        "prototype": prototype,
        "requantize": {"IDENTITY": REQUANTIZE_IDENTITY, "ABS": REQUANTIZE_ABS, "NEG": REQUANTIZE_NEG},
    }
    out = {name: env.get_template(template).render(**context) for name, template in GENERATED.items()}
    for source in OWN_HEADER_SOURCES:
        stem = source[:-len(".c")]
        out[header_of(source)] = env.get_template("edgernn_kernel_family.h.j2").render(
            source=source, guard=stem.upper() + "_H",
            kernels=[{"kernel": k, "prototype": prototype(k.name, k.args)} for k in KERNELS if k.source == source])
    return out


def header_of(source: str) -> str:
    """The header of a source in OWN_HEADER_SOURCES (its stem), rendered from the table."""
    return source[:-len(".c")] + ".h"


def write_sources(folder: Path) -> list[Path]:
    """Render the generated C files into folder (beside a copy of the kernels, or as an include path)."""
    folder = Path(folder)
    written = []
    for name, text in render_sources().items():
        (folder / name).write_text(text)
        written.append(folder / name)
    return written
