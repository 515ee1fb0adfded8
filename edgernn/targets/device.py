"""A board's family adapter, and its verbs by board name: build a firmware folder, start it, flash OUT.

Every fact about a board comes from its TOML file (``boards/*.toml``); how a family of boards builds,
runs and is reached is its adapter's (edgernn.targets.adapter). ``FAMILIES`` is the one table that
names them: a board file's ``family`` (or what its toolchain and emulator say) picks the adapter.
"""

from __future__ import annotations

import os
from pathlib import Path

from edgernn.errors import EdgeRNNError
from edgernn.outdir import read_manifest
from edgernn.targets import gap8, native, stm32
from edgernn.targets.adapter import Adapter, Device, LinkSettings, is_complete, stage_firmware  # noqa: F401
from edgernn.targets.board import Board, load_board
from edgernn.targets.compile import BuildResult

# The board families, one room each (edgernn/targets/<room>/, templates/targets/<room>/): a new family
# adds its room here.
ROOMS = (
    native,     # host, qemu_riscv32: edgernn compiles, a process or QEMU runs it
    stm32,      # qemu_stm32f405: the Crazyflie's Cortex-M4F, edgernn compiles, QEMU runs it
    gap8,       # ai_deck: a GAP SDK project, flashed over JTAG or the radio; gvsoc_gap8: the same in GVSOC
)
FAMILIES: dict[str, type[Adapter]] = {adapter.family: adapter for room in ROOMS for adapter in room.adapters()}


def adapter_for(board: str | Path | Board) -> Adapter:
    """The adapter of a board (a name, a board file, or a loaded Board)."""
    board = load_board(board)
    family = FAMILIES.get(board.family)
    if family is None:
        raise EdgeRNNError(f"board file {board.path}: unknown family {board.family!r} "
                           f"(known: {', '.join(FAMILIES)})")
    return family(board)


def out_board(out_dir: Path, board: str | Board | None = None) -> Board:
    """OUT's board: the one given, else the one its manifest names."""
    if board is None:
        try:
            board = read_manifest(out_dir).board
        except EdgeRNNError:
            board = None
        if not board:
            raise EdgeRNNError(f"{out_dir} names no board: build it with `edgernn build MODEL --board "
                               "BOARD -o OUT` or pass a board")
    return load_board(board)


def build_elf(firmware_dir: str | os.PathLike, board: str | Board, build_dir: str | os.PathLike | None = None,
              optimize: str | None = None, extra_cflags: list[str] | None = None,
              make_vars: dict[str, object] | None = None) -> BuildResult:
    """Build a firmware folder for a board into an ELF: compiled with the board's compiler, or for a GAP
    SDK board staged in build_dir and built by the SDK's make (with make_vars). A bare model (model.c and
    model.h: the test fixtures) is first staged with the kernels, server and HAL around it."""
    return adapter_for(board).build_elf(firmware_dir, build_dir, optimize, extra_cflags, make_vars)


def start(elf: str | os.PathLike, board: str | Board) -> Device:
    """Start firmware on an emulated board and return the device with its port URL."""
    return adapter_for(board).start(elf)


def find_firmware(out_dir: Path, board: str | Board) -> Path | None:
    """OUT's built firmware, or None when there is none newer than its sources."""
    return adapter_for(board).find_firmware(out_dir)


def flash(out_dir: str | os.PathLike, board: str | Board | None = None, rebuild: bool = False,
          radio: str | None = None) -> Device:
    """Put OUT's firmware on its board. For an emulated board: build it if needed, start it, and
    return the running device (``device.url`` is the port to use, ``device.stop()`` ends it). For a
    GAP SDK board (ai_deck): flash over JTAG (``make flash``) or, with ``radio``, with cfloader; the
    device returned has no port (the UART is the user's: pass it to validate)."""
    out_dir = Path(out_dir)
    if not (out_dir / "manifest.json").is_file():
        raise EdgeRNNError(f"{out_dir} is not an edgernn build folder (no manifest.json): create one with "
                           "`edgernn build MODEL --board BOARD -o OUT`")
    return adapter_for(out_board(out_dir, board)).flash(out_dir, rebuild=rebuild, radio=radio)
