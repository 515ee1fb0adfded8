"""Compile generated firmware for the host with explicit, printable compiler command lines."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

from edgernn import procs
from edgernn.errors import EdgeRNNError

STRICT_FLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]


def _toolchain(board) -> dict:
    data = board.get("toolchain", {}) if board is not None else {}
    return data or {}


def host_compilers(board) -> list[str]:
    """The board's compiler first, then the extra ones it names that are installed."""
    tc = _toolchain(board)
    cc = tc.get("cc", "gcc")
    if shutil.which(cc) is None:
        hint = tc.get("install_hint", "install a C compiler, e.g. apt-get install gcc")
        raise EdgeRNNError(f"compiler {cc!r} not found on PATH: {hint}")
    found = [cc]
    for other in tc.get("also", []):
        if shutil.which(other) and other not in found:
            found.append(other)
    return found


def _run(cmd: list[str], verbose: bool) -> None:
    if verbose:
        print(shlex.join(cmd))
    proc = procs.run(cmd)
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        first = detail[0] if detail else f"exit status {proc.returncode}"
        raise EdgeRNNError(f"compilation failed: {shlex.join(cmd)}: {first}")


def text_bytes(objects: list[Path]) -> int:
    """Code bytes (the text column of `size`, which counts read-only data with the code)."""
    size = shutil.which("size")
    if size is None or not objects:
        return 0
    out = subprocess.run([size, *map(str, objects)], capture_output=True, text=True, check=True).stdout
    total = 0
    for line in out.splitlines()[1:]:
        parts = line.split()
        if parts and parts[0].isdigit():
            total += int(parts[0])
    return total


def compile_host(firmware_dir, board, extra_sources=(), output=None, verbose=False, *,
                 cflags=None, compilers=None) -> dict:
    """Compile firmware_dir/*.c (+ extra_sources) with every host compiler of the board.

    The first compiler's executable is ``output`` (default firmware_dir/edgernn_host); others get a
    ``.<compiler>`` suffix. ``code_bytes`` is the `size` text of the kernels and model.c (not weights.c,
    extra_sources or libc).
    Returns ``{"code_bytes", "outputs", "commands"}``.
    """
    fw = Path(firmware_dir)
    sources = sorted(fw.glob("*.c"))
    if not sources:
        raise EdgeRNNError(f"no C sources in {fw}: generate the firmware first")
    tc = _toolchain(board)
    flags = list(cflags) if cflags is not None else list(tc.get("cflags", ["-O2"]))
    for f in STRICT_FLAGS:
        if f not in flags:
            flags.append(f)
    ldflags = list(tc.get("ldflags", ["-lm"]))
    output = Path(output) if output else fw / "edgernn_host"
    compilers = list(compilers) if compilers else host_compilers(board)
    outputs, commands, code_bytes = [], [], 0
    for k, cc in enumerate(compilers):
        objdir = fw / f"obj-{Path(cc).name}"
        objdir.mkdir(exist_ok=True)
        objects = []
        for src in sources:
            obj = objdir / (src.stem + ".o")
            cmd = [cc, *flags, "-I", str(fw), "-c", str(src), "-o", str(obj)]
            _run(cmd, verbose)
            commands.append(cmd)
            objects.append(obj)
        if k == 0:
            # weights.o holds only constants, which generate_firmware counts as weight bytes
            code_bytes = text_bytes([o for o in objects if o.stem != "weights"])
        extra_objs = []
        for src in extra_sources:
            obj = objdir / (Path(src).stem + ".extra.o")
            cmd = [cc, *flags, "-I", str(fw), "-c", str(src), "-o", str(obj)]
            _run(cmd, verbose)
            commands.append(cmd)
            extra_objs.append(obj)
        exe = output if k == 0 else output.with_name(output.name + f".{Path(cc).name}")
        cmd = [cc, *flags, *map(str, objects + extra_objs), "-o", str(exe), *ldflags]
        _run(cmd, verbose)
        commands.append(cmd)
        outputs.append(str(exe))
    return {"code_bytes": code_bytes, "outputs": outputs, "commands": [shlex.join(c) for c in commands]}
