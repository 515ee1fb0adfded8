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


def _step_c(step) -> str:
    """The C of an advance step, read from the packed struct ``a``: an argument, or a field of the struct
    an argument points to ("b.stride1[3]")."""
    arg, _, member = step.partition(".")
    return f"a->{arg}->{member}" if member else f"a->{arg}"


def _sub_call(k: Kernel, split: Split, indent: str) -> str:
    advance = dict(split.advance)
    items = []
    for arg in k.args:
        n = arg.name
        if split.broadcast == n:
            items.append("&sub")
        elif n == split.count:
            items.append("end - begin")
        elif n in advance:
            step = advance[n]
            moved = f"a->{n} + begin" if step == 1 else f"a->{n} + (size_t)begin * {_step_c(step)}"
            items.append(f"a->{n} ? {moved} : NULL" if n in k.optional else moved)
        elif split.when is not None and n == split.when[0]:
            items.append(str(split.when[1]))
        else:
            items.append(f"a->{n}")
    return _wrap_call(f"{indent}{k.name}(", items, ");")


def _range_body(k: Kernel) -> str:
    lines = [f"    const {k.short}_args_t *a = (const {k.short}_args_t *)args;"]
    b = next((s.broadcast for s in k.splits if s.broadcast), None)
    if b is not None:
        lines += [f"    edgernn_bcast_t sub = *a->{b};", "    sub.dims[3] = end - begin;"]
    conditional = [s for s in k.splits if s.when is not None]
    if not conditional:
        lines.append(_sub_call(k, k.splits[0], "    "))
        return "\n".join(lines)
    for i, split in enumerate(k.splits):
        if split.when is not None:
            keyword = "if" if i == 0 else "} else if"
            lines.append(f"    {keyword} (a->{split.when[0]} == {split.when[1]}) {{")
        else:
            lines.append("    } else {")
        lines.append(_sub_call(k, split, "        "))
    lines.append("    }")
    return "\n".join(lines)


def _split_expr(k: Kernel, attr: str) -> str:
    """The count (or grain) the team kernel passes edgernn_team_split, chosen by the splits' conditions."""
    def one(split: Split) -> str:
        if attr == "grain":
            return str(split.grain)
        return f"{split.broadcast}->dims[3]" if split.broadcast else split.count
    expr = one(k.splits[-1])
    for split in reversed(k.splits[:-1]):
        expr = f"{split.when[0]} == {split.when[1]} ? {one(split)} : {expr}"
    return expr


def _wrapper(k: Kernel) -> dict:
    return {
        "kernel": k,
        "fields": [f"    {a.decl};" for a in k.args],
        "range_body": _range_body(k),
        "definition": prototype(k.team_name, k.args)[:-1],
        "count": _split_expr(k, "count"),
        "grain": _split_expr(k, "grain"),
    }


def _environment():
    import jinja2

    from edgernn.resources import templates_dir

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir() / "kernels")),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters["comment"] = _c_comment
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
