"""Board adapters: build the firmware, start (flash) it, open its link, stop it.

Every fact about a board comes from its TOML file (``boards/*.toml``): the compiler and flags, the
emulator command (with ``{elf}``), how the UART is exposed. Nothing else in edgernn needs to know
which board is in use.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import threading
import tty
from dataclasses import dataclass, field
from pathlib import Path

from edgernn import procs
from edgernn.targets.gap_toolchain import gap_compiler
from edgernn.targets.board import Board, load_board
from edgernn.targets.compile import BuildResult, compile_firmware, find_compiler
from edgernn.errors import EdgeRNNError
from edgernn.outdir import read_manifest
from edgernn.resources import templates_dir


def _out_board(out_dir: Path, board: str | Board | None) -> Board:
    if isinstance(board, Board):
        return board
    if board is None:
        try:
            board = read_manifest(out_dir).board
        except EdgeRNNError:
            board = None
        if not board:
            raise EdgeRNNError(f"{out_dir} names no board: build it with `edgernn build MODEL --board "
                               "BOARD -o OUT` or pass a board")
    return load_board(board)


def build_firmware(firmware_dir: str | os.PathLike, board: str | Board, build_dir: str | os.PathLike | None = None,
                   optimize: str | None = None, extra_cflags: list[str] | None = None,
                   make_vars: dict[str, object] | None = None) -> BuildResult:
    """Build a firmware folder for a board: compiled with the board's compiler (compile_firmware), or
    for a GAP SDK board staged in build_dir and built by the SDK's make (with make_vars). A bare model
    (model.c and model.h: the test fixtures) is first staged with the kernels, server and HAL around it."""
    board = board if isinstance(board, Board) else load_board(board)
    firmware_dir = Path(firmware_dir)
    if not (firmware_dir / "model.h").is_file():
        raise EdgeRNNError(f"{firmware_dir} holds no generated model (model.h): not a firmware folder")
    build_dir = Path(build_dir) if build_dir else firmware_dir / "build" / board.name
    if is_gap_sdk(board):
        if optimize or extra_cflags:
            raise EdgeRNNError(f"board {board.name} is built by the GAP SDK's make: pass make_vars, not compiler flags")
        project = stage_firmware(firmware_dir, board, build_dir / "project")
        return build_gap_project(project, board, make_vars=make_vars, image=False)
    if not is_complete(firmware_dir, board):
        firmware_dir = stage_firmware(firmware_dir, board, build_dir / "project")
    cflags = [*(extra_cflags or []), *([optimize] if optimize else [])]
    return compile_firmware(firmware_dir, board, build_dir=build_dir, cflags=cflags,
                            compilers=[find_compiler(board)])


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
    simulator: object | None = None     # edgernn.targets.gvsoc.GvsocProcess on gvsoc_gap8

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
        """Power-cycle the device: the port stays, the firmware starts from scratch. On the host board
        the pty stays open; in GVSOC a new simulator listens on the same TCP port (the host reconnects,
        as a USB-UART adapter stays while the board behind it resets)."""
        if self.simulator is not None:
            port = self.simulator.port
            self.simulator.stop()
            restarted = _start_gvsoc(self.elf, self.board, port)
            self.simulator, self.process, self.url = restarted.simulator, restarted.process, restarted.url
            return
        if self._master is None:
            raise EdgeRNNError(f"board {self.board.name} cannot be restarted in place")
        procs.stop(self.process, timeout=0.0)
        self.process = procs.spawn(self._command, pass_fds=[self._master], stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL)

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
    if emulator.get("kind") == "gvsoc":
        return _start_gvsoc(elf, board)
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
    process = procs.spawn(command, pass_fds=[master], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    # The slave stays open here too, so the firmware never reads EIO between host sessions.
    return Device(board, os.ttyname(slave), elf, process, [master, slave], command, master)


def _start_emulator(elf: Path, board: Board) -> Device:
    emulator = board["emulator"]
    command = _format(emulator["command"], elf=elf) + list(emulator.get("serial_args", []))
    process = procs.spawn(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
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


def _start_gvsoc(elf: Path, board: Board, port: int | None = None) -> Device:
    """GAP8 firmware in GVSOC (edgernn.targets.gvsoc), its UART on 127.0.0.1. The flash image and the
    simulator's configuration go beside the ELF, in gvsoc/."""
    from edgernn.targets import gvsoc
    from edgernn.targets.gap_sdk import build_gvsoc

    sim = gvsoc.start_gvsoc(elf, elf.parent / "gvsoc", uart_port=port, install=build_gvsoc(),
                            timeout=float(board["emulator"].get("start_timeout_s", 60)),
                            baud=int(board["serial"]["baud"]))
    device = Device(board, sim.url, elf, sim.process, [], sim.command)
    device.simulator = sim
    return device


def find_firmware(out_dir: Path, board: Board) -> Path | None:
    fw = Path(out_dir) / "firmware"
    name = "firmware.elf" if board["cpu"]["arch"] != "native" else "firmware"
    newest_source = max((p.stat().st_mtime for p in fw.glob("*.[ch]")), default=0.0)
    candidates = [fw / "build" / board.name / name, fw / name, Path(out_dir) / name]
    if is_gap_sdk(board):
        candidates = [fw / board["gap_sdk"]["elf"], fw / "build" / board.name / "project" / board["gap_sdk"]["elf"]]
    for candidate in candidates:
        # A firmware older than the generated sources is stale: it would carry the previous model.
        if candidate.is_file() and candidate.stat().st_mtime >= newest_source:
            return candidate
    return None


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
    board = _out_board(out_dir, board)
    if radio and (not is_gap_sdk(board) or board.emulated):
        raise EdgeRNNError(f"board {board.name} is not flashed over the radio; --radio is for ai_deck")
    if is_gap_sdk(board):
        if not (out_dir / "firmware" / "Makefile").is_file():
            raise EdgeRNNError(f"{out_dir}/firmware has no GAP SDK project: build it with `edgernn build MODEL "
                               f"--board {board.name} -o {out_dir}`")
    if is_gap_sdk(board) and not board.emulated:
        command = flash_hardware(out_dir, board, radio)
        return Device(board, "", None, None, [], command)
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



# ---- boards built by the GAP SDK (ai_deck): edgernn generates the project, the SDK's make builds it ----

def is_gap_sdk(board: Board) -> bool:
    return (board.get("toolchain", {}) or {}).get("kind") == "gap_sdk"


def gap_sdk_config(board: Board) -> Path:
    """The SDK's board configuration script, from $GAP_SDK_HOME (else the SDK `edgernn setup gvsoc --fetch`
    fetched), checked to be a supported release; a one-line error saying how to get one."""
    from edgernn.targets.gap_sdk import check_sdk, fetched_sdk

    sdk = board["gap_sdk"]
    home = os.environ.get(sdk["home_env"])
    hint = board["toolchain"].get("install_hint", "install the GAP SDK")
    if not home:
        fetched = fetched_sdk()
        if fetched is None:
            raise EdgeRNNError(f"the GAP SDK is not set up (${sdk['home_env']} is unset): {hint}, "
                               "or run `edgernn setup gvsoc --fetch`")
        home = str(fetched)
    config = Path(home).resolve() / sdk["config"]  # CI passes it relative to the working folder
    if not config.is_file():
        raise EdgeRNNError(f"${sdk['home_env']}={home} has no {sdk['config']}: {hint}")
    check_sdk(config.parent.parent)
    if shutil.which("make") is None:
        raise EdgeRNNError("the GAP SDK builds with make, which is not installed: apt-get install make")
    return config


@dataclass
class GapSdkSetup:
    """How this machine builds a GAP SDK project: which SDK tree's configuration is sourced, and which
    compiler answers to the SDK's ``riscv32-unknown-elf-gcc``."""

    board: Board
    home: Path                      # $GAP_SDK_HOME, never written
    sdk: Path                       # home itself (GAP's compiler) or edgernn's copy with overrides (Debian's)
    compiler: str                   # "gap" or "debian"
    path_prefix: list[Path] = field(default_factory=list)

    def script(self, cwd: Path, *commands: list[str]) -> list[str]:
        """``bash -c`` running the commands in cwd with the SDK's configuration sourced."""
        config = self.sdk / self.board["gap_sdk"]["config"]
        lines = [f"cd {shlex.quote(str(self.sdk))}", f"source {shlex.quote(str(config))} >/dev/null"]
        if self.path_prefix:
            lines.append("export PATH=" + ":".join(shlex.quote(str(p)) for p in self.path_prefix) + ':"$PATH"')
        lines.append(f"cd {shlex.quote(str(Path(cwd).resolve()))}")
        lines += [shlex.join(c) for c in commands]
        return ["bash", "-c", " && ".join(lines)]


def gap_sdk_setup(board: Board) -> GapSdkSetup:
    """GAP's compiler when it is installed (or EDGERNN_GAP_COMPILER=gap), else Debian's riscv64-unknown-elf-gcc
    through edgernn's wrapper against a copy of the SDK with edgernn's overrides (EDGERNN_GAP_COMPILER=debian
    forces it)."""
    config = gap_sdk_config(board)
    home = config.parent.parent
    sdk = board["gap_sdk"]
    choice = os.environ.get("EDGERNN_GAP_COMPILER", "auto")
    if choice not in ("auto", "gap", "debian"):
        raise EdgeRNNError(f"EDGERNN_GAP_COMPILER={choice}: use gap, debian or auto")
    if choice == "gap" or (choice == "auto" and gap_compiler() is not None):
        return GapSdkSetup(board, home, home, "gap")
    if shutil.which(sdk["debian_cc"]) is None:
        raise EdgeRNNError(f"neither GAP's compiler ({sdk['gap_cc']}) nor {sdk['debian_cc']} is installed: "
                           f"{sdk['debian_hint']}, or install GAP's toolchain")
    from edgernn.targets.gap_sdk import debian_toolchain, prepare_sdk

    return GapSdkSetup(board, home, prepare_sdk(home), "debian", [debian_toolchain()])


def gap_sdk_command(board: Board, firmware_dir: Path, make_args: list[str]) -> list[str]:
    """``make ...`` in firmware_dir after sourcing the SDK's board configuration, as one bash command."""
    return gap_sdk_setup(board).script(firmware_dir, make_args)


def manual_commands(board: Board, out_dir: Path) -> str:
    """The commands that build and flash a generated GAP SDK project by hand."""
    sdk, fl = board["gap_sdk"], board["flash"]
    fw = Path(out_dir) / "firmware"
    return (f"build: source ${sdk['home_env']}/{sdk['config']} && make -C {fw} {' '.join(sdk['build'][1:])}; "
            f"flash: edgernn flash {out_dir} (JTAG, {shlex.join(fl['jtag'])}) or "
            f"edgernn flash {out_dir} --radio {fl['radio_example']} (cfloader)")


def _first_error(proc: subprocess.CompletedProcess) -> str:
    """What the compiler or linker said (edgernn.targets.buildlog), else the output's last line."""
    from edgernn.targets.buildlog import summarize

    lines = ((proc.stderr or "") + "\n" + (proc.stdout or "")).strip().splitlines() or ["(no output)"]
    return summarize(lines) or lines[-1].strip()


def build_gap_project(firmware_dir: Path, board: Board, make_vars: dict[str, object] | None = None,
                      image: bool = True) -> BuildResult:
    """Build the GAP SDK project in firmware_dir with the SDK's own rules (its FreeRTOS, its GAP8.ld) to a
    linked ELF, and with ``image`` the flash image; fails unless the ELF has no undefined symbol.
    make_vars (``EDGERNN_CLUSTER_CORES=1``, ...) go on make's command line."""
    firmware_dir = Path(firmware_dir).resolve()
    setup = gap_sdk_setup(board)
    sdk = board["gap_sdk"]
    targets = [a for a in sdk["build"][1:] if image or a != "image"]
    jobs = f"-j{max(1, min(os.cpu_count() or 1, 8))}"
    variables = [f"{k}={v}" for k, v in {**sdk.get("make_vars", {}), **(make_vars or {})}.items()]
    if "clean" in targets:
        # clean first, alone: make runs its goals in parallel with -j
        targets.remove("clean")
        make = [["make", "clean"], ["make", jobs, *variables, *targets]]
    else:
        make = [["make", jobs, *variables, *targets]]
    command = setup.script(firmware_dir, *make)
    proc = procs.run(command)
    if proc.returncode != 0:
        raise EdgeRNNError(f"the GAP SDK build failed: {_first_error(proc)} (command: {shlex.join(command)})")
    elf = firmware_dir / sdk["elf"]
    if not elf.is_file():
        raise EdgeRNNError(f"the GAP SDK build left no ELF at {elf} (command: {shlex.join(command)})")
    tools = setup.script(firmware_dir, ["riscv32-unknown-elf-nm", "-u", str(elf)],
                         ["riscv32-unknown-elf-size", str(elf)])
    proc = procs.run(tools)
    if proc.returncode != 0:
        raise EdgeRNNError(f"reading {elf} failed: {_first_error(proc)}")
    lines = proc.stdout.splitlines()
    size_at = next((i for i, line in enumerate(lines) if line.split()[:2] == ["text", "data"]), len(lines))
    undefined = [line.split()[-1] for line in lines[:size_at] if line.strip()]
    if undefined:
        raise EdgeRNNError(f"{elf.name} links with {len(undefined)} undefined symbols ({', '.join(undefined[:8])}): "
                           "they would fault on the device")
    result = BuildResult(elf, command, compiler=setup.compiler, commands=[command],
                         image=firmware_dir / sdk["image"] if image else None)
    if size_at + 1 < len(lines):
        text, data, bss = (int(v) for v in lines[size_at + 1].split()[:3])
        result.code_bytes, result.data_bytes = text, data + bss
    return result


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


def image_path(out_dir: Path, board: Board) -> Path:
    return Path(out_dir) / "firmware" / board["gap_sdk"]["image"]


def flash_command(out_dir: Path, board: Board, radio: str | None = None) -> list[str]:
    """The command that puts OUT's firmware on a GAP SDK board: make flash (JTAG) or cfloader (radio)."""
    fl = board["flash"]
    if radio:
        tool = fl["radio"][0]
        if shutil.which(tool) is None:
            raise EdgeRNNError(f"{tool} is not installed: {fl.get('radio_hint', 'install it')}")
        image = image_path(out_dir, board)
        if not image.is_file():
            raise EdgeRNNError(f"no GAP8 image at {image}: build it first ({manual_commands(board, out_dir)})")
        return [a.format(image=image, uri=radio) for a in fl["radio"]]
    return gap_sdk_command(board, Path(out_dir) / "firmware", list(fl["jtag"]))


def flash_hardware(out_dir: Path, board: Board, radio: str | None = None) -> list[str]:
    command = flash_command(out_dir, board, radio)
    env = dict(os.environ)
    if not radio and board["flash"].get("jtag_cable"):
        env.setdefault("GAPY_OPENOCD_CABLE", board["flash"]["jtag_cable"])
    proc = procs.run(command, env=env, stdout=None, stderr=None)
    if proc.returncode != 0:
        raise EdgeRNNError(f"flashing {board.name} failed (exit status {proc.returncode}; command: {shlex.join(command)})")
    return command
