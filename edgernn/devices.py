"""Board adapters: build the firmware, start (flash) it, open its link, stop it.

Every fact about a board comes from its TOML file (``boards/*.toml``): the compiler and flags, the
emulator command (with ``{elf}``), how the UART is exposed. Nothing else in edgernn needs to know
which board is in use.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import threading
import time
import tty
from dataclasses import dataclass, field
from pathlib import Path

from edgernn.boards import Board, load_board
from edgernn.errors import EdgeRNNError
from edgernn.resources import templates_dir

FIRMWARE_TEMPLATE_FILES = ("protocol.c", "protocol.h", "server.c", "server.h", "main.c", "hal.h")


@dataclass
class BuildResult:
    elf: Path
    command: list[str]
    code_bytes: int | None = None
    data_bytes: int | None = None


def _out_board(out_dir: Path, board: str | Board | None) -> Board:
    if isinstance(board, Board):
        return board
    if board is None:
        manifest = out_dir / "manifest.json"
        try:
            board = json.loads(manifest.read_text()).get("board")
        except (OSError, ValueError):
            board = None
        if not board:
            raise EdgeRNNError(f"{out_dir} names no board: build it with `edgernn build MODEL --board "
                               "BOARD -o OUT` or pass a board")
    return load_board(board)


def firmware_sources(firmware_dir: Path, board: Board) -> tuple[list[Path], list[Path]]:
    """The C files and include folders of a firmware: the generated model in ``firmware_dir``, then
    the server, protocol and HAL templates unless the firmware folder carries its own copies."""
    firmware_dir = Path(firmware_dir)
    hal_dir = templates_dir() / board["hal"]["template"]
    fw_template = templates_dir() / "firmware"
    sources = sorted(firmware_dir.glob("*.c"))
    present = {p.name for p in sources} | {p.name for p in firmware_dir.glob("*.h")}
    for template in (fw_template, hal_dir):
        for path in sorted(template.glob("*.c")):
            if path.name not in present:
                sources.append(path)
    includes = [firmware_dir, fw_template, hal_dir]
    return sources, includes


def build_command(firmware_dir: Path, board: Board, elf: Path, optimize: str | None = None) -> list[str]:
    tc = board["toolchain"]
    sources, includes = firmware_sources(firmware_dir, board)
    cflags = list(tc.get("cflags", []))
    if optimize:
        cflags = [f for f in cflags if not f.startswith("-O")] + [optimize]
    defines = [f"-D{d}" for d in tc.get("defines", [])] + [f'-DEDGERNN_BOARD_NAME="{board.name}"']
    return ([tc["cc"], *cflags, *defines, *[f"-I{i}" for i in includes], *map(str, sources),
             "-o", str(elf), *tc.get("ldflags", [])])


def build_firmware(firmware_dir: str | os.PathLike, board: str | Board, build_dir: str | os.PathLike | None = None,
                   optimize: str | None = None, extra_cflags: list[str] | None = None) -> BuildResult:
    """Compile a firmware folder for a board with the board's toolchain; the command is printable."""
    board = board if isinstance(board, Board) else load_board(board)
    firmware_dir = Path(firmware_dir)
    if not (firmware_dir / "model.h").is_file():
        raise EdgeRNNError(f"{firmware_dir} holds no generated model (model.h): not a firmware folder")
    tc = board["toolchain"]
    if shutil.which(tc["cc"]) is None:
        raise EdgeRNNError(f"board {board.name} needs the compiler {tc['cc']}, which is not installed: "
                           f"{tc.get('install_hint', '')}")
    build_dir = Path(build_dir) if build_dir else firmware_dir / "build" / board.name
    build_dir.mkdir(parents=True, exist_ok=True)
    elf = build_dir / ("firmware.elf" if board["cpu"]["arch"] != "native" else "firmware")
    command = build_command(firmware_dir, board, elf, optimize)
    if extra_cflags:
        command[1:1] = extra_cflags
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        first = (proc.stderr.strip().splitlines() or ["(no output)"])
        errors = [line for line in first if "error" in line] or first
        raise EdgeRNNError(f"building the firmware for {board.name} failed: {errors[0]} "
                           f"(command: {shlex.join(command)})")
    result = BuildResult(elf, command)
    sizes = elf_sizes(elf, board)
    if sizes:
        result.code_bytes, result.data_bytes = sizes
    return result


def elf_sizes(elf: Path, board: Board) -> tuple[int, int] | None:
    """(code bytes, data bytes) of a built firmware, from the board's ``size`` tool (text, data+bss)."""
    size_tool = board["toolchain"].get("size") or "size"
    if shutil.which(size_tool) is None:
        return None
    lines = subprocess.run([size_tool, str(elf)], capture_output=True, text=True).stdout.splitlines()
    if len(lines) < 2 or len(lines[1].split()) < 3:
        return None
    text, data, bss = (int(v) for v in lines[1].split()[:3])
    return text, data + bss


@dataclass
class Device:
    """A started board: its port URL and, for an emulated board, the process behind it."""

    board: Board
    url: str
    elf: Path | None = None
    process: subprocess.Popen | None = None
    _fds: list[int] = field(default_factory=list)
    _command: list[str] = field(default_factory=list)
    _master: int | None = None
    output: list[str] = field(default_factory=list)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the board's process (if any) and release the pty."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        for fd in self._fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds.clear()

    def restart(self) -> None:
        """Power-cycle the device: the port stays, the firmware starts from scratch (host board)."""
        if self._master is None:
            raise EdgeRNNError(f"board {self.board.name} cannot be restarted in place")
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)
        self.process = subprocess.Popen(self._command, pass_fds=[self._master],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)

    def wait(self) -> int | None:
        return self.process.wait() if self.process is not None else None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def _format(args: list[str], **values) -> list[str]:
    return [a.format(**values) for a in args]


def start(elf: str | os.PathLike, board: str | Board) -> Device:
    """Start firmware on an emulated board and return the device with its port URL."""
    board = board if isinstance(board, Board) else load_board(board)
    emulator = board.get("emulator")
    if not emulator:
        raise EdgeRNNError(f"board {board.name} is not emulated: flash it with its own tools and pass --port")
    elf = Path(elf)
    if not elf.is_file():
        raise EdgeRNNError(f"no firmware at {elf}: build it first")
    program = emulator["command"][0]
    if program != "{elf}" and shutil.which(program) is None:
        raise EdgeRNNError(f"board {board.name} needs {emulator['command'][0]}, which is not installed: "
                           f"{emulator.get('install_hint', '')}")
    if "{fd}" in " ".join(emulator["command"]):
        return _start_on_pty(elf, board)
    return _start_emulator(elf, board)


def _start_on_pty(elf: Path, board: Board) -> Device:
    master, slave = os.openpty()
    # Raw mode before anyone writes: the pty's line discipline would otherwise echo and translate.
    tty.setraw(slave)
    tty.setraw(master)
    command = _format(board["emulator"]["command"], elf=elf, fd=master)
    process = subprocess.Popen(command, pass_fds=[master], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL)
    # The slave stays open here too, so the firmware never reads EIO between host sessions.
    return Device(board, os.ttyname(slave), elf, process, [master, slave], command, master)


def _start_emulator(elf: Path, board: Board) -> Device:
    emulator = board["emulator"]
    command = _format(emulator["command"], elf=elf) + list(emulator.get("serial_args", []))
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, bufsize=1)
    device = Device(board, "", elf, process, [], command)
    pattern = re.compile(emulator["serial_announce"])
    found = threading.Event()

    def pump():
        # Keep draining the emulator's output so it never blocks on a full pipe.
        for line in process.stdout:
            device.output.append(line.rstrip())
            match = pattern.search(line)
            if match and not found.is_set():
                device.url = match.group(1)
                found.set()
        found.set()

    threading.Thread(target=pump, daemon=True).start()
    if not found.wait(float(emulator.get("start_timeout_s", 20))) or not device.url:
        device.stop()
        tail = " / ".join(device.output[-3:]) or "no output"
        raise EdgeRNNError(f"{command[0]} did not expose the board's UART ({tail}); command: {shlex.join(command)}")
    return device


def find_firmware(out_dir: Path, board: Board) -> Path | None:
    fw = Path(out_dir) / "firmware"
    name = "firmware.elf" if board["cpu"]["arch"] != "native" else "firmware"
    newest_source = max((p.stat().st_mtime for p in fw.glob("*.[ch]")), default=0.0)
    for candidate in (fw / "build" / board.name / name, fw / name, Path(out_dir) / name):
        # A firmware older than the generated sources is stale: it would carry the previous model.
        if candidate.is_file() and candidate.stat().st_mtime >= newest_source:
            return candidate
    return None


def flash(out_dir: str | os.PathLike, board: str | Board | None = None, rebuild: bool = False) -> Device:
    """Put OUT's firmware on its board. For an emulated board: build it if needed, start it, and
    return the running device (``device.url`` is the port to use, ``device.stop()`` ends it)."""
    out_dir = Path(out_dir)
    if not (out_dir / "manifest.json").is_file():
        raise EdgeRNNError(f"{out_dir} is not an edgernn build folder (no manifest.json): create one with "
                           "`edgernn build MODEL --board BOARD -o OUT`")
    board = _out_board(out_dir, board)
    if not board.emulated or not board.get("emulator"):
        raise EdgeRNNError(f"board {board.name} is flashed with its own tools "
                           f"({board.get('flash', {}).get('command', 'see the board file')}); then pass --port")
    elf = None if rebuild else find_firmware(out_dir, board)
    if elf is None:
        if not (out_dir / "firmware" / "model.h").is_file():
            raise EdgeRNNError(f"{out_dir} has no firmware/ folder: build it with `edgernn build MODEL "
                               f"--board {board.name} -o {out_dir}`")
        elf = build_firmware(out_dir / "firmware", board).elf
    return start(elf, board)

