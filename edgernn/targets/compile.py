"""Compile a firmware folder with its board's toolchain, every command explicit and printable.

``compile_firmware`` is the one compile path: ``edgernn build`` and ``edgernn flash`` (through the board
adapter, edgernn.targets.device), the tests' drivers and the benches all go through it, so what the
tests prove is what users get. Every flag comes from the board file's ``[toolchain]``: ``cc``, ``cflags``,
``defines`` and ``ldflags``, ``also`` (more compilers that must accept the same C), ``check_cc`` and
``check_cflags`` (the portable-source check of a board its SDK builds). The folder holds every source
the firmware needs (edgernn.backend.codegen.write_project), so a compile reads only the folder.
"""

from __future__ import annotations

import enum
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from edgernn import procs
from edgernn.errors import EdgeRNNError
from edgernn.targets.board import Board, load_board


class Part(enum.Enum):
    """Which sources of a firmware folder a compile takes."""

    FIRMWARE = "firmware"   # all of them, linked: the firmware the board runs
    MODEL = "model"         # the model and its kernels, without the server and HAL: extra_sources bring main
    PORTABLE = "portable"   # all but the HAL's, compiled only, with the board's check_cc and check_cflags


@dataclass
class BuildResult:
    """A compiled firmware: the ELF (None for a compile-only check), the link command (or the last
    compile) and the sizes from the board's ``size`` tool; ``variants`` are the same build with each
    installed ``also`` compiler of the board, each in its own build folder."""

    elf: Path | None
    command: list[str]
    code_bytes: int | None = None           # text of the ELF
    data_bytes: int | None = None           # data + bss of the ELF
    compiler: str = ""
    commands: list[list[str]] = field(default_factory=list)
    objects: list[Path] = field(default_factory=list)
    model_code_bytes: int | None = None     # text of the model's and kernels' objects (not weights.c, libc)
    image: Path | None = None               # a GAP SDK build's flash image
    variants: list[BuildResult] = field(default_factory=list)
    hardware_loops: int | None = None       # a GAP8 ELF's Xpulp hardware loops, each checked (hwloop_check)

    @property
    def builds(self) -> list[BuildResult]:
        return [self, *self.variants]

    @property
    def command_lines(self) -> list[str]:
        return [shlex.join(c) for b in self.builds for c in b.commands]


def find_compiler(board: Board, *, check: bool = False, required: bool = True) -> str | None:
    """The board's compiler (``check``: its portable-source check compiler) when installed; else a
    one-line error with the board's install hint, or None when not ``required``."""
    cc = board.toolchain.check_cc if check else board.toolchain.cc
    if cc and shutil.which(cc) is not None:
        return cc
    if not required:
        return None
    if not cc:
        raise EdgeRNNError(f"board file {board.path} names no toolchain.{'check_cc' if check else 'cc'}")
    raise _not_installed(board, cc)


def _not_installed(board: Board, cc: str) -> EdgeRNNError:
    hint = board.toolchain.install_hint
    return EdgeRNNError(f"board {board.name} needs the compiler {cc}, which is not found on PATH: {hint}")


def board_defines(board: Board) -> list[str]:
    """The -D flags every build of the board's firmware takes: its toolchain defines and its name."""
    return [f"-D{d}" for d in board.toolchain.defines] + [f'-DEDGERNN_BOARD_NAME="{board.name}"']


def board_cflags(board: Board, part: Part = Part.FIRMWARE, cflags=()) -> list[str]:
    """The board's compiler flags, then ``cflags``; an -O in ``cflags`` replaces the board's."""
    tc = board.toolchain
    flags = list(tc.check_cflags if part is Part.PORTABLE else tc.cflags)
    if any(f.startswith("-O") for f in cflags):
        flags = [f for f in flags if not f.startswith("-O")]
    return flags + list(cflags)


def select_sources(firmware_dir: Path, board: Board, part: Part) -> list[Path]:
    """The C files of a firmware folder that ``part`` compiles, in link order: the model and kernels,
    then the server and protocol, then the HAL."""
    from edgernn.backend.codegen import hal_files, project_files

    firmware_dir = Path(firmware_dir)
    present = {p.name: p for p in firmware_dir.glob("*.c")}
    if part is Part.PORTABLE:
        provided = hal_files(board)
        return [present[n] for n in sorted(present) if n not in provided]
    project = [n for n in project_files(board) if n.endswith(".c")]
    model = [present[n] for n in sorted(present) if n not in project]
    if part is Part.MODEL:
        return model
    missing = [n for n in project_files(board) if not (firmware_dir / n).is_file()]
    if missing:
        raise EdgeRNNError(f"{firmware_dir} lacks {', '.join(missing)} of board {board.name}'s firmware: "
                           f"generate it again with `edgernn build MODEL --board {board.name} -o OUT`")
    return model + [firmware_dir / n for n in project]


def compiler_cache() -> list[str]:
    """``["ccache"]`` where ccache is installed, else ``[]``: the launcher of every compile of a source.

    Every firmware folder holds its own copy of the same kernel sources, compiled with the same flags, so
    their objects come from ccache after the first build. Each compile runs in the firmware folder, which
    is ccache's base directory (CCACHE_BASEDIR, CCACHE_NOHASHDIR), so the folder's path is not hashed: an
    object's debug information (-g) may then name the folder that first compiled the same source, as the
    GAP SDK builds' objects do (docs/boards/ai_deck.md). EDGERNN_CCACHE=0: none."""
    if os.environ.get("EDGERNN_CCACHE", "1") == "0" or shutil.which("ccache") is None:
        return []
    return ["ccache"]


def _run(cmd: list[str], board: Board, what: str, cwd: Path | None = None) -> None:
    env = None
    if cwd is not None and cmd[0] == "ccache":
        env = {**os.environ, "CCACHE_BASEDIR": str(cwd), "CCACHE_NOHASHDIR": "1"}
    proc = procs.run(cmd, cwd=cwd, env=env)
    if proc.returncode != 0:
        lines = ((proc.stderr or "") + "\n" + (proc.stdout or "")).strip().splitlines() or ["(no output)"]
        errors = [line for line in lines if "error" in line] or lines
        raise EdgeRNNError(f"{what} does not compile for {board.name}: {errors[0]} (command: {shlex.join(cmd)})")


def _size_columns(size_tool: str, files: list[Path]) -> list[tuple[int, int, int]]:
    if shutil.which(size_tool) is None or not files:
        return []
    out = subprocess.run([size_tool, *map(str, files)], capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 3 and all(p.isdigit() for p in parts[:3]):
            rows.append(tuple(int(p) for p in parts[:3]))
    return rows


def _size_tool(board: Board) -> str:
    return board.toolchain.size


def elf_sizes(elf: Path, board: Board) -> tuple[int, int] | None:
    """(code bytes, data bytes) of a built firmware, from the board's ``size`` tool (text, data+bss)."""
    rows = _size_columns(_size_tool(board), [elf])
    if not rows:
        return None
    text, data, bss = rows[0]
    return text, data + bss


def compile_firmware(firmware_dir: str | os.PathLike, board: str | Board, *, part: Part = Part.FIRMWARE,
                     extra_sources=(), build_dir: str | os.PathLike | None = None, output_name: str | None = None,
                     cflags=(), compilers=None) -> BuildResult:
    """Compile a firmware folder for a board, each source to an object in build_dir/obj, then link.

    ``cflags`` follow the board's (an -O among them replaces the board's); ``extra_sources`` (a test
    driver) are compiled and linked with the same flags. ``compilers`` defaults to the board's ``cc``
    and each installed ``also`` compiler; a build after the first goes to ``<build_dir>-<compiler>``.
    The default build_dir is firmware_dir/build/<board>; the ELF is ``output_name`` there (default
    ``firmware``, ``firmware.elf`` on a cross board). ``Part.PORTABLE`` compiles only, with the board's
    check compiler. A board its SDK builds (ai_deck) is built by edgernn.targets.device.build_elf.
    """
    board = load_board(board)
    firmware_dir = Path(firmware_dir)
    if board.toolchain.kind == "gap_sdk" and part is not Part.PORTABLE:
        raise EdgeRNNError(f"board {board.name} is built by the GAP SDK's make, not compiled here: "
                           "use edgernn.targets.device.build_elf")
    check = part is Part.PORTABLE
    if compilers is None:
        compilers = [find_compiler(board, check=check)]
        if not check:
            compilers += [cc for cc in board.toolchain.also
                          if shutil.which(cc) and cc not in compilers]
    else:
        compilers = list(compilers)
        missing = [cc for cc in compilers if shutil.which(cc) is None]
        if missing:
            raise _not_installed(board, missing[0])
    sources = select_sources(firmware_dir, board, part)
    if not sources:
        raise EdgeRNNError(f"no C sources in {firmware_dir}: generate the firmware first")
    build_dir = Path(build_dir) if build_dir else firmware_dir / "build" / board.name
    output_name = output_name or board.elf_name
    flags = board_cflags(board, part, cflags)
    defines = board_defines(board)
    launcher = compiler_cache()
    results = []
    for k, cc in enumerate(compilers):
        out_dir = build_dir if k == 0 else build_dir.with_name(f"{build_dir.name}-{Path(cc).name}")
        obj_dir = out_dir / "obj"
        obj_dir.mkdir(parents=True, exist_ok=True)
        commands, objects, extra_objects = [], [], []
        for src, suffix, into in [*((s, ".o", objects) for s in sources),
                                  *((Path(s), ".extra.o", extra_objects) for s in extra_sources)]:
            obj = obj_dir / (src.stem + suffix)
            cmd = [*launcher, cc, *flags, *defines, f"-I{firmware_dir.resolve()}", "-c", str(Path(src).resolve()),
                   "-o", str(obj.resolve())]
            _run(cmd, board, src.name, cwd=firmware_dir.resolve())
            commands.append(cmd)
            into.append(obj)
        if check:
            results.append(BuildResult(None, commands[-1], compiler=cc, commands=commands, objects=objects))
            continue
        elf = out_dir / output_name
        link = [cc, *flags, *map(str, objects + extra_objects), "-o", str(elf),
                *board.toolchain.ldflags]
        _run(link, board, f"the firmware ({elf.name})")
        commands.append(link)
        result = BuildResult(elf, link, compiler=cc, commands=commands, objects=objects + extra_objects)
        sizes = elf_sizes(elf, board)
        if sizes:
            result.code_bytes, result.data_bytes = sizes
        if k == 0:
            from edgernn.backend.codegen import project_files

            # weights.o holds only constants, which generate_firmware counts as weight bytes
            app = set(project_files(board))
            rows = _size_columns(_size_tool(board), [o for o in objects if o.stem != "weights"
                                                     and o.stem + ".c" not in app])
            result.model_code_bytes = sum(r[0] for r in rows)
        results.append(result)
    results[0].variants = results[1:]
    return results[0]
