"""What every board family does, as a few verbs: the base of the family adapters.

A family adapter (edgernn.targets.native, edgernn.targets.gap8) knows how its boards' firmware is built,
put on the board, started and reached. ``edgernn build`` and ``edgernn validate`` call only these verbs
(through edgernn.targets.device.adapter_for), so nothing else asks which family a board is:

    check_toolchain()        before converting: refuse early what could not be built
    generate(out_dir)        OUT/firmware/ for the board (and what the family writes beside it)
    build(...)               OUT/firmware/ to what the board runs, as the manifest records it
    build_elf(firmware_dir)  a firmware folder to an ELF (the tests' and the benches' builds)
    find_firmware(out_dir)   the built firmware of OUT, unless older than its sources
    flash(out_dir)           put OUT's firmware on the board (an emulated board: start it)
    start(elf)               run a firmware on an emulated board
    link_settings()          how validate opens and waits on the board's serial link
    code_bytes(elf)          the firmware's code size
    setup(...)               build once what the family needs on this machine (``edgernn setup``)
    start_profiled(out, k)   run OUT's firmware with its instructions traced: where step k's cycles go
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from edgernn import procs
from edgernn.errors import EdgeRNNError
from edgernn.targets.board import Board, Emulator
from edgernn.targets.compile import BuildResult, elf_sizes

if TYPE_CHECKING:
    from edgernn.backend.firmware import FirmwareFacts

Log = Callable[[str], None]


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
    simulator: object | None = None     # edgernn.targets.gap8.gvsoc.GvsocProcess on gvsoc_gap8
    restarter: Callable[[Device], None] | None = field(default=None, repr=False)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the board's process group (if any) and release the pty."""
        procs.stop(self.process, timeout)
        for fd in self._fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds.clear()

    def restart(self) -> None:
        """Power-cycle the device: the port stays, the firmware starts from scratch (the family says how)."""
        if self.restarter is None:
            raise EdgeRNNError(f"board {self.board.name} cannot be restarted in place")
        self.restarter(self)

    def wait(self) -> int | None:
        return self.process.wait() if self.process is not None else None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


@dataclass(frozen=True)
class LinkSettings:
    """How the host talks to a board over its serial link: the baud rate, how long an answer may take
    beyond its line time, and (for a board the host started whose HAL announces itself) how long to wait
    for its ready byte before the first request."""

    baud: int
    timeout_s: float
    ready_timeout_s: float | None = None


@dataclass
class FirmwareBuild:
    """What ``build`` made of OUT/firmware/: the manifest's ``build.firmware`` record, the sizes, and the
    lines it has to say."""

    firmware: dict
    code_bytes: int | None = None
    data_bytes: int | None = None
    messages: list[str] = field(default_factory=list)
    built: BuildResult | None = None
    by_hand: str | None = None      # not built here: how to build and flash it by hand


class Adapter:
    """The verbs of one board family; a family overrides what differs."""

    family = ""

    def __init__(self, board: Board):
        self.board = board

    # ---- set-up ----

    def setup(self, *, force: bool = False, fetch: bool = False, source_url: str | None = None,
              source_commit: str | None = None, log: Log = print) -> list[str]:
        """Build, once, into edgernn's cache what the family's boards need on this machine (``edgernn setup``);
        returns the lines that say what is ready. ``fetch``: get the sources from upstream (at
        ``source_url``/``source_commit``) when the user has none."""
        raise EdgeRNNError(f"board {self.board.name} needs no set-up")

    # ---- build ----

    def check_toolchain(self) -> None:
        """Refuse, before any work, a build whose toolchain is missing (where the family needs it)."""

    def generate(self, out_dir: Path, *, verbose: bool = False) -> FirmwareFacts:
        """Write OUT/firmware/ for the board; returns the code generator's facts."""
        from edgernn.backend import generate_firmware

        return generate_firmware(out_dir, self.board, verbose=verbose)

    app_kinds: tuple[str, ...] = ()     # the applications ``edgernn build --app`` writes for this family's boards

    def write_app(self, out_dir: Path, manifest, options, facts: FirmwareFacts) -> dict:
        """Turn OUT/firmware/ (the model and the validation server, just generated) into the application that
        ``options`` asks for; returns the manifest's ``app`` record."""
        raise EdgeRNNError(f"board {self.board.name} has no {options.kind!r} application")

    def write_extras(self, out_dir: Path, manifest, calibration=None) -> None:
        """Write what the family adds beside the firmware, once the manifest records the build;
        ``calibration()`` gives the build's calibration sequences, for a family that needs them."""

    def build(self, out_dir: Path, *, scratch: Path, final_out: Path, log: Log, verbose: bool) -> FirmwareBuild:
        raise NotImplementedError

    def summary(self, out: Path, manifest, facts: FirmwareFacts, build: FirmwareBuild) -> list[str]:
        """The lines ``edgernn build`` ends with."""
        return []

    def build_elf(self, firmware_dir: str | os.PathLike, build_dir: str | os.PathLike | None = None,
                  optimize: str | None = None, extra_cflags: list[str] | None = None,
                  make_vars: dict[str, object] | None = None) -> BuildResult:
        raise NotImplementedError

    def find_firmware(self, out_dir: Path) -> Path | None:
        fw = Path(out_dir) / "firmware"
        return _newest(fw, self.firmware_candidates(out_dir))

    def firmware_candidates(self, out_dir: Path) -> list[Path]:
        fw = Path(out_dir) / "firmware"
        name = self.board.elf_name
        return [fw / "build" / self.board.name / name, fw / name, Path(out_dir) / name]

    # ---- run ----

    def flash(self, out_dir: Path, *, rebuild: bool = False, radio: str | None = None) -> Device:
        """Put OUT's firmware on the board. For an emulated board: build it if needed and start it."""
        board = self.board
        if radio:
            raise EdgeRNNError(f"board {board.name} is not flashed over the radio; --radio is for ai_deck")
        if not board.emulated or board.emulator is None:
            raise EdgeRNNError(f"board {board.name} is flashed with its own tools "
                               f"({board.flash.command}); then pass --port")
        elf = None if rebuild else self.find_firmware(out_dir)
        if elf is None:
            if not (out_dir / "firmware" / "model.h").is_file():
                raise EdgeRNNError(f"{out_dir} has no firmware/ folder: build it with `edgernn build MODEL "
                                   f"--board {board.name} -o {out_dir}`")
            elf = self.build_elf(out_dir / "firmware").elf
        return self.start(elf)

    def start(self, elf: str | os.PathLike) -> Device:
        raise EdgeRNNError(f"board {self.board.name} is not emulated: flash it with its own tools and pass --port")

    def start_app(self, out_dir: Path, camera_stream: str) -> Device:
        """Run OUT's application on an emulated board, its camera playing ``camera_stream`` (image files, a path
        with %d for the frame index)."""
        raise EdgeRNNError(f"board {self.board.name} cannot run an application here: validate an app build on "
                           "gvsoc_gap8")

    def link_settings(self, *, started: bool, baud: int | None = None, timeout: float | None = None) -> LinkSettings:
        """The link's settings: the board file's, with the caller's baud and timeout first. ``started``:
        the host started the board itself (then it waits for a ready byte where the HAL sends one)."""
        board = self.board
        ready = None
        if started and board.hal.ready_byte:
            ready = (board.emulator or Emulator()).start_timeout_s
        return LinkSettings(baud or board.serial.baud, timeout or board.serial.timeout_s, ready)

    def code_bytes(self, elf: Path | None) -> int | None:
        if elf is None:
            return None
        sizes = elf_sizes(elf, self.board)
        return sizes[0] if sizes else None

    # ---- profile ----

    profiler = ""       # what profiles a step on this family's boards, for people; "" when nothing can

    def start_profiled(self, out_dir: Path, step: int):
        """Start OUT's firmware with its instructions traced, to profile step ``step`` (0-based). The run
        has ``url`` (its link: drive it, then BYE), ``result()`` (edgernn.targets.profile.StepProfiler's
        result, with ``source``) and ``stop()``."""
        raise EdgeRNNError(f"board {self.board.name} cannot profile a step: --profile needs a board whose "
                           "instructions edgernn can trace (gvsoc_gap8, qemu_riscv32)")


def _newest(fw: Path, candidates: list[Path]) -> Path | None:
    newest_source = max((p.stat().st_mtime for p in fw.glob("*.[ch]")), default=0.0)
    for candidate in candidates:
        # A firmware older than the generated sources is stale: it would carry the previous model.
        if candidate.is_file() and candidate.stat().st_mtime >= newest_source:
            return candidate
    return None


def require_firmware_folder(firmware_dir: Path) -> None:
    if not (Path(firmware_dir) / "model.h").is_file():
        raise EdgeRNNError(f"{firmware_dir} holds no generated model (model.h): not a firmware folder")


def is_complete(firmware_dir: Path, board: Board) -> bool:
    """Whether a firmware folder holds the server, protocol and HAL of the board beside its model."""
    from edgernn.backend.codegen import project_files

    return all((Path(firmware_dir) / name).is_file() for name in project_files(board))


def stage_firmware(firmware_dir: Path, board: Board, dest: Path) -> Path:
    """A complete firmware folder in dest from a firmware folder: a generated one is copied as it is
    (without its build output); a bare model (model.c, model.h: the test fixtures) gets the kernels,
    the server and the HAL around it, as ``edgernn build`` would write them."""
    from edgernn._version import __version__
    from edgernn.backend.codegen import copy_kernels, write_project

    firmware_dir = Path(firmware_dir)
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(firmware_dir, dest, ignore=shutil.ignore_patterns("BUILD", "build"))
    if is_complete(dest, board):
        return dest
    sha = re.search(r'EDGERNN_MODEL_SHA256 "([0-9a-f]+)"', (dest / "model.h").read_text())
    model_sources = sorted(p.name for p in dest.glob("*.c"))
    kernels = copy_kernels(dest, board, ())
    write_project(board, dest, {"version": __version__, "sha256": sha.group(1) if sha else "unknown",
                                "sources": model_sources + kernels})
    return dest
