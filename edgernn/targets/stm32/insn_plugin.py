"""The family's TCG plugin, which counts the instructions qemu-system-arm executes: the second witness of
"instructions (QEMU)", beside the firmware's own TIM2 count under -icount shift=0 (they agree exactly:
tests/targets/stm32/test_insn_count.py).

Its source is templates/targets/stm32/qemu_plugin/insn_count.c; edgernn builds it once with the host's gcc
into its cache (Debian's QEMU loads plugins but ships no qemu-plugin.h, so the source declares the few API
functions it calls). ``qemu_args`` adds it to a QEMU command line, ``read_log`` reads what it logged.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from edgernn import procs
from edgernn.errors import EdgeRNNError
from edgernn.resources import cache_root, templates_dir

SOURCE = Path("targets") / "stm32" / "qemu_plugin" / "insn_count.c"
FLAGS = ["-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror"]




def build_plugin(cc: str = "gcc") -> Path:
    """The plugin's shared object, built with the host's ``cc`` unless its cache entry (keyed by the source and
    the flags) already holds it."""
    source = templates_dir() / SOURCE
    key = hashlib.sha256(source.read_bytes() + " ".join(FLAGS).encode()).hexdigest()[:16]
    plugin = cache_root() / "qemu_plugin" / key / "libinsn_count.so"
    if plugin.is_file():
        return plugin
    if shutil.which(cc) is None:
        raise EdgeRNNError(f"the instruction-counting QEMU plugin needs the host compiler {cc}: apt-get install gcc")
    plugin.parent.mkdir(parents=True, exist_ok=True)
    partial = plugin.with_name(f".{plugin.name}.{os.getpid()}")
    command = [cc, *FLAGS, str(source), "-o", str(partial)]
    built = procs.run(command)
    if built.returncode != 0:
        partial.unlink(missing_ok=True)
        first = (built.stderr or built.stdout or "no output").strip().splitlines()[0]
        raise EdgeRNNError(f"the QEMU plugin {SOURCE.name} does not build: {first} (command: {' '.join(command)})")
    partial.replace(plugin)
    return plugin


def qemu_args(plugin: Path, log: Path, marks: list[int] = ()) -> list[str]:
    """QEMU's arguments that load the plugin, log each executed instruction at one of ``marks`` with the count
    so far, and the total at exit, into ``log``."""
    options = "".join(f",mark={address:#x}" for address in marks)
    return ["-plugin", f"{plugin}{options}", "-d", "plugin", "-D", str(log)]


@dataclass
class Counts:
    """What the plugin logged: the count at each executed mark, in order, as (address, count), and the total."""

    marks: list[tuple[int, int]]
    total: int | None


def read_log(log: Path) -> Counts:
    marks, total = [], None
    for line in Path(log).read_text().splitlines():
        words = line.split()
        if words[:2] == ["insn", "mark"] and len(words) == 4:
            marks.append((int(words[2], 16), int(words[3])))
        elif words[:2] == ["insn", "total"] and len(words) == 3:
            total = int(words[2])
    return Counts(marks, total)
