"""The native family: firmware that edgernn compiles itself with the board's compiler (``host``,
``qemu_riscv32``), run as a process on a pty (``emulator.kind = "fd"``) or in an emulator that announces
its UART (``"announce"``: QEMU, on a pty or, with ``serial_url = "socket://{announced}"``, a loopback TCP
port that QEMU picks and prints)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import threading
import tty
from pathlib import Path
from typing import TYPE_CHECKING

from edgernn import procs
from edgernn.errors import EdgeRNNError
from edgernn.targets.adapter import (Adapter, Device, FirmwareBuild, Log, is_complete, require_firmware_folder,
                                     stage_firmware)
from edgernn.targets.board import Board
from edgernn.targets.compile import BuildResult, compile_firmware, find_compiler
from edgernn.targets.profile import StepMap, StepProfiler, TracedRun, binutil, call_returns

if TYPE_CHECKING:
    from edgernn.backend.firmware import FirmwareFacts


def _format(args: list[str], **values) -> list[str]:
    return [a.format(**values) for a in args]


class NativeAdapter(Adapter):
    family = "native"

    def check_toolchain(self) -> None:
        find_compiler(self.board)

    def compiled_board(self, firmware_dir: Path) -> Board:
        """The board as it compiles the firmware folder ``firmware_dir``: the board itself here; a family whose
        flags name the folder (stm32's rendered linker script) fills them in."""
        return self.board

    def build(self, out_dir: Path, *, scratch: Path, final_out: Path, log: Log, verbose: bool) -> FirmwareBuild:
        log("compiling")
        firmware = Path(out_dir) / "firmware"
        # the board's compiler, then each installed `also` compiler into its own build folder
        built = compile_firmware(firmware, self.compiled_board(firmware))
        messages = [f"compiled: {line}" for line in built.command_lines] if verbose else []
        return FirmwareBuild(firmware={"elf": str(built.elf.relative_to(out_dir)),
                                       "compilers": [b.compiler for b in built.builds]},
                             code_bytes=built.code_bytes, data_bytes=built.data_bytes, messages=messages, built=built)

    def summary(self, out: Path, manifest, facts: FirmwareFacts, build: FirmwareBuild) -> list[str]:
        lines = [
            f"firmware for {self.board.name}: arena {manifest.arena_bytes} B (liveness bound "
            f"{manifest.build.liveness_bound_bytes} B), weights {manifest.weight_bytes} B, code {manifest.code_bytes} B; "
            f"built with {', '.join(manifest.build.firmware['compilers'])} -> {out / manifest.build.firmware['elf']}"
        ]
        if self.board.emulated:
            lines.append(f"next: edgernn validate {out}")
        return lines

    def build_elf(self, firmware_dir, build_dir=None, optimize=None, extra_cflags=None, make_vars=None) -> BuildResult:
        """Compile a firmware folder with the board's compiler (compile_firmware); a bare model (model.c
        and model.h: the test fixtures) is first staged with the kernels, server and HAL around it."""
        board = self.board
        firmware_dir = Path(firmware_dir)
        require_firmware_folder(firmware_dir)
        if make_vars:
            raise EdgeRNNError(f"board {board.name} is compiled by edgernn: pass compiler flags, not make_vars")
        build_dir = Path(build_dir) if build_dir else firmware_dir / "build" / board.name
        if not is_complete(firmware_dir, board):
            firmware_dir = stage_firmware(firmware_dir, board, build_dir / "project")
        cflags = [*(extra_cflags or []), *([optimize] if optimize else [])]
        return compile_firmware(firmware_dir, self.compiled_board(firmware_dir), build_dir=build_dir, cflags=cflags,
                                compilers=[find_compiler(board)])

    def start(self, elf) -> Device:
        board, emulator = self.board, self.board.emulator
        if emulator is None:
            return super().start(elf)
        elf = Path(elf)
        if not elf.is_file():
            raise EdgeRNNError(f"no firmware at {elf}: build it first")
        program = emulator.command[0]
        if program != "{elf}" and shutil.which(program) is None:
            raise EdgeRNNError(f"board {board.name} needs {program}, which is not installed: {emulator.install_hint}")
        if emulator.kind == "fd":
            return self._start_on_pty(elf)
        return self._start_announced(elf)

    def _start_on_pty(self, elf: Path) -> Device:
        master, slave = os.openpty()
        # Raw mode before anyone writes: the pty's line discipline would otherwise echo and translate.
        tty.setraw(slave)
        tty.setraw(master)
        command = _format(self.board.emulator.command, elf=elf, fd=master)
        process = procs.spawn(command, pass_fds=[master], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        # The slave stays open here too, so the firmware never reads EIO between host sessions.
        return Device(self.board, os.ttyname(slave), elf, process, [master, slave], command, master,
                      restarter=_respawn_on_pty)

    def _start_announced(self, elf: Path, extra_args: list[str] = ()) -> Device:
        emulator = self.board.emulator
        command = _format(emulator.command, elf=elf) + list(emulator.serial_args) + list(extra_args)
        process = procs.spawn(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, bufsize=1)
        device = Device(self.board, "", elf, process, [], command)
        pattern = re.compile(emulator.serial_announce)
        found = threading.Event()

        def pump():
            # Keep draining the emulator's output so it never blocks on a full pipe.
            for line in process.stdout:
                device.output.append(line.rstrip())
                match = pattern.search(line)
                if match and not found.is_set():
                    device.url = emulator.serial_url.format(announced=match.group(1))
                    found.set()
            found.set()

        threading.Thread(target=pump, daemon=True).start()
        if not found.wait(emulator.start_timeout_s) or not device.url:
            device.stop()
            tail = " / ".join(device.output[-3:]) or "no output"
            raise EdgeRNNError(f"{command[0]} did not expose the board's UART ({tail}); command: {shlex.join(command)}")
        return device


    @property
    def profiler(self) -> str:
        """QEMU logs the instructions it runs; a native process on the host has no such log."""
        emulator = self.board.emulator
        qemu = emulator is not None and emulator.kind == "announce" and Path(emulator.command[0]).name.startswith("qemu")
        return QEMU_SOURCE if qemu else ""

    def start_profiled(self, out_dir: Path, step: int):
        """OUT's firmware compiled again with -g (the same code, with its line table) and run in QEMU logging
        every instruction it runs, one instruction a block (QemuTracedRun)."""
        if not self.profiler:
            return super().start_profiled(out_dir, step)
        firmware = Path(out_dir) / "firmware"
        built = self.build_elf(firmware, firmware / "build" / f"{self.board.name}-profile", extra_cflags=["-g"])
        return QemuTracedRun(self, built.elf, firmware / "model.c", step)


QEMU_SOURCE = "QEMU's log of every instruction it runs (instructions, as minstret counts them)"
_QEMU_LINE = re.compile(r"^Trace \d+: 0x[0-9a-f]+ \[[0-9a-f]+/([0-9a-f]+)/")


def read_qemu_log(lines, profiler, returns: dict[int, int]) -> None:
    """QEMU's ``-d exec`` lines, one instruction each (``-singlestep``), handed to ``profiler``: one core, each
    instruction one count, as minstret counts them."""
    n = 0
    for line in lines:
        if profiler.done:
            continue
        m = _QEMU_LINE.match(line)
        if m is None:
            continue
        pc = int(m.group(1), 16)
        profiler.instruction(0, n, pc, False, returns.get(pc))
        n += 1
    if profiler.end is not None:
        profiler.finish()


class QemuTracedRun(TracedRun):
    """A firmware in QEMU with every instruction it runs logged into a named pipe (edgernn.targets.profile.
    TracedRun: ``url``, ``result()``, ``stop()``), but for the HAL's UART loops, which poll while the firmware
    waits for the host (-dfilter)."""

    source = QEMU_SOURCE

    def __init__(self, adapter: NativeAdapter, elf: Path, model_c: Path, step: int):
        step_map = StepMap.read(elf, model_c, adapter.board)
        profiler = StepProfiler(step_map, step)
        returns = call_returns(elf, binutil(adapter.board, "objdump"))
        super().__init__(adapter.board, profiler, lambda lines: read_qemu_log(lines, profiler, returns))
        logged = []
        start = step_map.addrs[0]
        for address, following, name in zip(step_map.addrs, step_map.addrs[1:] + [None], step_map.names):
            if name.startswith("edgernn_hal_uart_"):
                if address > start:
                    logged.append(f"{start:#x}..{address - 1:#x}")
                start = following if following is not None else address
        logged.append(f"{start:#x}..{step_map.addrs[-1] + 0xFFFF:#x}")
        self._launch(lambda: adapter._start_announced(elf, ["-singlestep", "-d", "exec,nochain", "-dfilter",
                                                            ",".join(logged), "-D", str(self.pipe.path)]))

    def _wait(self, timeout: float) -> None:
        self.emulator.process.wait(timeout)


def _respawn_on_pty(device: Device) -> None:
    """The host board's reset: the pty stays open, a new firmware process takes its master side."""
    procs.stop(device.process, timeout=0.0)
    device.process = procs.spawn(device._command, pass_fds=[device._master], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL)
