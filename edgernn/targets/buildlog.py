"""What went wrong in a failed build, in one line: the compiler's or linker's own words, not make's last.

A failed link ends with ``collect2: error: ld returned 1 exit status`` and make's ``*** [...] Error 1``;
neither says what a user needs (the undefined symbols, the first compile error). ``summarize`` picks, in
order: the undefined references (every symbol, where the first one is used), the first compiler error
with its file and line, another linker error (a missing library, a symbol defined twice, a section
that overflows), make's own error (a missing file or rule), and only then any line that says error.
"""

from __future__ import annotations

import re
from typing import Iterable

_UNDEFINED = re.compile(r"undefined reference to [`'\"‘](?P<sym>[^'’\"]+)['’\"]")
_SOURCE = re.compile(r"([\w.+\-/]+\.(?:c|S|s|cc|cpp|o|a))(?::(\d+))?")
_COMPILER = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:\d+:)?\s*(?:fatal )?error:\s*(?P<msg>.+)$")
_LINKER = re.compile(r"(cannot find -l\S+|multiple definition of [`'‘][^'’]+['’]|region [`'‘]?\S+?['’]? overflowed"
                     r"|will not fit in region \S+|relocation truncated to fit[^\n]*)")
_MAKE = re.compile(r"(No rule to make target [^,]+|No such file or directory|\*\*\* .+)")
_NOISE = ("collect2: error: ld returned", "make: ***", "make[", "Error 1", "Error 2")
MAX_CHARS = 400


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_CHARS else text[:MAX_CHARS - 3] + "..."


def undefined_symbols(lines: Iterable[str]) -> list[tuple[str, str]]:
    """(symbol, where it is first used) for each undefined reference, in order of first mention."""
    found: dict[str, str] = {}
    previous = ""
    for line in lines:
        for m in _UNDEFINED.finditer(line):
            # ld says where: "file.c:12: undefined ...", or "(.text+0x10): undefined ..." after "obj.o: in function"
            places = _SOURCE.findall(line[:m.start()]) or _SOURCE.findall(previous)
            where = ""
            if places:
                path, number = places[-1]
                where = path.rsplit("/", 1)[-1] + (f":{number}" if number else "")
            found.setdefault(m.group("sym"), where)
        previous = line
    return list(found.items())


def summarize(lines: Iterable[str]) -> str:
    """One line on what the build's output says went wrong; empty when it says nothing recognisable."""
    lines = [line.rstrip() for line in lines if line.strip()]
    undefined = undefined_symbols(lines)
    if undefined:
        symbol, where = undefined[0]
        more = [s for s, _ in undefined[1:]]
        text = f"undefined reference to `{symbol}'"
        if where:
            text += f" (in {where})"
        if more:
            text += f", and {len(more)} more: " + ", ".join(more[:8]) + (", ..." if len(more) > 8 else "")
        return _clip(text)
    for line in lines:
        m = _COMPILER.match(line.strip())
        if m:
            return _clip(f"{m.group('file').rsplit('/', 1)[-1]}:{m.group('line')}: error: {m.group('msg')}")
    for line in lines:
        if _LINKER.search(line):
            return _clip(line.strip())
    for line in lines:
        if _MAKE.search(line) and not _only_make_noise(line):
            return _clip(line.strip())
    for line in lines:
        if "error" in line.lower() and not any(n in line for n in _NOISE):
            return _clip(line.strip())
    for line in lines:
        if "error" in line.lower():
            return _clip(line.strip())
    return ""


def _only_make_noise(line: str) -> bool:
    """make's ``*** [target] Error N``: it says only that a command failed."""
    return bool(re.search(r"\*\*\* \[[^\]]*\] Error \d+", line))
