"""GVSOC, the GAP8 simulator that ``gap_sdk.build_gvsoc`` built, running a firmware ELF with the
simulated UART on a loopback TCP port.

Running an ELF takes two steps. ``prepare_gvsoc_run`` runs gapy once per ELF (``--image --flash
--exec-prepare``: the flash image the GAP8 ROM boots from, and the simulator's configuration), then
writes a copy of that configuration with the UART on 127.0.0.1:port. ``gvsoc_run_command`` is the
launcher command for it (0.1 s to start, against 0.5 s more through gapy); ``start_gvsoc`` starts it
and waits until the port listens. The launcher's exit status is the firmware's exit code (the low 8
bits of what it writes, with bit 31 set, to CORESTATUS, 0x1A1040A0).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from edgernn import procs
from edgernn.errors import EdgeRNNError
from edgernn.targets.gap8.gvsoc_install import GVSOC_TARGET, Log, environment, read_marker, say


def gvsoc_marker(install: str | os.PathLike) -> dict:
    """The record of a built GVSOC, from its install folder: the marker of a finished build, or, while
    build_gvsoc runs its UART self-test, the record of the build it is testing."""
    key_dir = Path(install).resolve().parent.parent.parent
    marker = read_marker(key_dir) or read_marker(key_dir, built=True)
    if marker is None:
        raise EdgeRNNError(f"{install} is not a finished GVSOC build: run `edgernn setup gvsoc`")
    return marker


def gvsoc_env(install: str | os.PathLike) -> dict[str, str]:
    """The environment gapy and gvsoc_launcher need: the caller's, with what ``configs/ai_deck.sh``
    sets for the private copy (GAP_SDK_HOME, GVSOC_PATH (the launcher reads its models from there),
    PYTHONPATH for gapy, LD_LIBRARY_PATH for libpulpvp.so, PATH, PULP_CONFIGS_PATH, ...)."""
    return environment(gvsoc_marker(install)["environment"])


# ---- running an ELF ----

@dataclass(frozen=True)
class Trace:
    """GVSOC's traces of the components whose path matches ``components`` (a regular expression, such as
    ``.*/cluster/pe[0-9]+/insn``: the instructions of the cluster's cores), written to ``path`` (a file or
    a named pipe) in the order the simulation runs them."""

    components: str
    path: Path


RUN_STATE = "edgernn_gvsoc.json"       # in the work folder: which ELF gapy prepared it for


def _sdk_of(install: Path) -> Path:
    return Path(install).resolve().parent.parent


def gapy_prepare_command(elf: str | os.PathLike, work_dir: str | os.PathLike,
                         install: str | os.PathLike, readfs_files: list | tuple = ()) -> list[str]:
    """gapy, run by this Python (it needs pyelftools, argcomplete and six), making the flash image and
    the simulator configuration for an ELF in work_dir without running it; ``readfs_files`` go into the
    image's readfs partition, as the SDK's rules put a Makefile's READFS_FILES (pmsis_rules.mk)."""
    gapy = _sdk_of(Path(install)) / "utils" / "gapy" / "gapy"
    return [sys.executable, str(gapy), f"--target={GVSOC_TARGET}", "--platform=gvsoc",
            f"--work-dir={Path(work_dir).resolve()}",
            *[f"--config-opt=**/flash/content/partitions/readfs/files={Path(f).resolve()}" for f in readfs_files],
            # the partition table lists the readfs partition only when it is enabled (gapy's
            # gen_flash_image.py), which the SDK's rules leave to the flash's JSON (false)
            *(["--config-opt=**/flash/content/partitions/readfs/enabled=true"] if readfs_files else []),
            "run", "--image", "--flash", "--exec-prepare", f"--binary={Path(elf).resolve()}"]


def _file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


LINKS = ("uart", "wifi")


def run_config_path(work_dir: str | os.PathLike, uart_port: int, link: str = "uart") -> Path:
    return Path(work_dir).resolve() / f"gvsoc_{link}{uart_port}.json"


def _wire_esp32(board: dict, port: int) -> None:
    """The deck's ESP32 (edgernn's model, nina_w10.so: templates/targets/gap8/sdk/overrides/) as the board's
    WiFi device, its TCP server on 127.0.0.1:port, and the GAP8's GPIO3 (its request-to-send line) wired to
    it beside the ready line the SDK's configuration already wires (GPIO18)."""
    wifi = board.get("wifi")
    if wifi is None:
        raise EdgeRNNError("this GVSOC's ai_deck configuration has no WiFi device (board.wifi): the --link wifi "
                           "firmware needs the deck's ESP32")
    wifi["port"] = str(int(port))
    if "gpio_gap_rtt" not in wifi.setdefault("vp_ports", []):
        wifi["vp_ports"].append("gpio_gap_rtt")
    dpi_ports = board["dpi"].setdefault("vp_ports", [])
    if "gpio3" not in dpi_ports:
        dpi_ports.append("gpio3")
    if ["chip->gpio3", "dpi->gpio3"] not in board["vp_bindings"]:
        board["vp_bindings"].append(["chip->gpio3", "dpi->gpio3"])
    if ["chip->gpio3", "wifi->gpio_gap_rtt"] not in board["tb_bindings"]:
        board["tb_bindings"].append(["chip->gpio3", "wifi->gpio_gap_rtt"])


def prepare_gvsoc_run(elf: str | os.PathLike, work_dir: str | os.PathLike, uart_port: int,
                      install: str | os.PathLike, log: Log = None, baud: int | None = None,
                      readfs_files: list | tuple = (), trace: Trace | None = None, link: str = "uart",
                      esp32_module: str | os.PathLike | None = None, camera_stream: str | None = None) -> Path:
    """Make work_dir ready to run elf with the UART on 127.0.0.1:uart_port (its testbench at ``baud``,
    when given), ``readfs_files`` in the flash image and, with ``trace``, GVSOC's traces of the components
    it names written to its file; returns the launcher's configuration. gapy runs only when work_dir was
    prepared for other bytes (or never).

    With ``link="wifi"`` the port is the deck's ESP32's instead (CPX over TCP, edgernn.link.cpx), and the UART's
    bytes go to GVSOC's output (gvsoc.log); ``esp32_module`` replaces the ESP32's model (a test's broken one).
    ``camera_stream``: the camera's image files, a path with %d for the frame index (``.raw``: 324 x 244 bytes of
    gray each, read by edgernn's camera model, templates/targets/gap8/sdk/overrides/.../camera/camera.cpp)."""
    if link not in LINKS:
        raise EdgeRNNError(f"GVSOC has no link {link!r} (links: {', '.join(LINKS)})")
    install = Path(install)
    elf, work_dir = Path(elf).resolve(), Path(work_dir).resolve()
    if not elf.is_file():
        raise EdgeRNNError(f"no firmware at {elf}: build it first")
    work_dir.mkdir(parents=True, exist_ok=True)
    state_path, config_path = work_dir / RUN_STATE, work_dir / "gvsoc_config.json"
    elf_sha = _file_sha256(elf)
    files = {str(Path(f).resolve()): _file_sha256(Path(f)) for f in readfs_files}
    try:
        state = json.loads(state_path.read_text())
    except (OSError, ValueError):
        state = {}
    if (state.get("elf_sha256") != elf_sha or state.get("install") != str(install) or not config_path.is_file()
            or state.get("readfs", {}) != files):
        state_path.unlink(missing_ok=True)
        command = gapy_prepare_command(elf, work_dir, install, list(files))
        say(log, f"gapy: {shlex.join(command)}")
        proc = procs.run(command, cwd=work_dir, env=gvsoc_env(install))
        if proc.returncode != 0 or not config_path.is_file():
            lines = (proc.stderr or proc.stdout).strip().splitlines() or ["(no output)"]
            raise EdgeRNNError(f"gapy could not prepare {elf.name} for GVSOC: {lines[-1]} "
                               f"(command: {shlex.join(command)})")
        state = {"elf": str(elf), "elf_sha256": elf_sha, "install": str(install), **({"readfs": files} if files else {})}
        state_path.write_text(json.dumps(state) + "\n")
    config = json.loads(config_path.read_text())
    board = config["target"]["system_tree"]["board"]
    uart = board["uart"]
    if link == "uart":
        # TX goes to the TCP client only (not to stdout, not to tx_uart.log); RX comes from it.
        uart.update({"telnet": True, "telnet_port": int(uart_port), "stdout": False, "stdin": False,
                     "tx_file": "", "loopback": False})
        if "wifi" in board:
            # the ESP32's model serves no one over the UART, but it listens all the same, on the SDK's fixed
            # port (3333) unless told otherwise: two runs at once would both want it. Port 0 is any free one
            board["wifi"]["port"] = "0"
    else:
        uart.update({"telnet": False, "stdout": True, "stdin": False, "tx_file": "", "loopback": False})
        _wire_esp32(board, uart_port)
        if esp32_module is not None:
            board["wifi"]["module"] = str(Path(esp32_module).resolve())
    if baud is not None:
        uart["baudrate"] = int(baud)
    if camera_stream is not None:
        if "camera" not in board:
            raise EdgeRNNError("this GVSOC's ai_deck configuration has no camera (board.camera): the camera "
                               "application needs the deck's Himax")
        board["camera"]["image-stream"] = str(camera_stream)
    if trace is not None:
        # traces are compiled into GVSOC's debug models only (gvsoc_launcher_debug)
        config["gvsoc"]["traces"].update({"enabled": True, "level": "debug",
                                          "include_regex": [f"{trace.components}:{trace.path}"]})
        config["gvsoc"]["debug-mode"] = True
    run_config = run_config_path(work_dir, uart_port, link)
    run_config.write_text(json.dumps(config))
    return run_config


def gvsoc_run_command(elf: str | os.PathLike, work_dir: str | os.PathLike, uart_port: int,
                      install: str | os.PathLike, log: Log = None,
                      baud: int | None = None, readfs_files: list | tuple = (),
                      trace: Trace | None = None, link: str = "uart",
                      esp32_module: str | os.PathLike | None = None, camera_stream: str | None = None) -> list[str]:
    """The command that runs elf in GVSOC with the UART (or, ``link="wifi"``, the ESP32) on 127.0.0.1:uart_port
    (prepared first). Run it with ``cwd=work_dir`` and ``env=gvsoc_env(install)``."""
    install = Path(install)
    config = prepare_gvsoc_run(elf, work_dir, uart_port, install, log, baud, readfs_files, trace, link,
                               esp32_module, camera_stream)
    launcher = "gvsoc_launcher_debug" if trace is not None else "gvsoc_launcher"
    return [str(Path(install) / "bin" / launcher), f"--config={config}"]


def free_port() -> int:
    """A TCP port free on the loopback interface now (another process could take it before GVSOC)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
    return inodes


def _listens(pid: int, port: int) -> bool:
    """Whether process pid has a socket listening on port. Checked in /proc rather than by connecting:
    GVSOC's UART serves one client, and a probe connection would take (and drop) the first bytes."""
    wanted = _listening_inodes(port)
    return bool(wanted) and bool(wanted & _socket_inodes(pid))


@dataclass
class GvsocProcess:
    """A GAP8 ELF running in GVSOC; its link is ``url``: the UART (``socket://127.0.0.1:port``), or the deck's
    ESP32 (``cpx://127.0.0.1:port``)."""

    process: subprocess.Popen
    port: int
    work_dir: Path
    log_path: Path
    command: list[str] = field(default_factory=list)
    link: str = "uart"

    @property
    def url(self) -> str:
        return f"cpx://127.0.0.1:{self.port}" if self.link == "wifi" else f"socket://127.0.0.1:{self.port}"

    def running(self) -> bool:
        return self.process.poll() is None

    def wait(self, timeout: float | None = None) -> int:
        """The firmware's exit code (the launcher's exit status)."""
        return self.process.wait(timeout)

    def stop(self) -> None:
        procs.stop(self.process, timeout=2.0)

    def output(self) -> str:
        """The simulator's stdout and stderr so far (see start_gvsoc)."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class PortTaken(EdgeRNNError):
    """GVSOC could not listen on the port it was given: another process has it."""


# a port edgernn chose itself (free_port) can be taken by another process before GVSOC listens on it (parallel
# runs); then a new one is chosen, this many times in all
PORT_ATTEMPTS = 3


def start_gvsoc(elf: str | os.PathLike, work_dir: str | os.PathLike, uart_port: int | None = None, *,
                install: str | os.PathLike, log: Log = None,
                timeout: float = 20.0, baud: int | None = None, readfs_files: list | tuple = (),
                trace: Trace | None = None, link: str = "uart",
                esp32_module: str | os.PathLike | None = None, camera_stream: str | None = None) -> GvsocProcess:
    """Run elf in GVSOC in the background and return once the link's TCP port (the UART's, or with
    ``link="wifi"`` the ESP32's) listens. The simulator runs in its own process group (``stop()`` ends it);
    its stdout and stderr go to ``work_dir/gvsoc.log``. With ``trace``, GVSOC's debug build runs, writing
    that trace. Without ``uart_port``, a free port is chosen, and chosen again when another process takes it
    first (PORT_ATTEMPTS in all)."""
    attempts = 1 if uart_port is not None else PORT_ATTEMPTS
    for attempt in range(attempts):
        port = uart_port if uart_port is not None else free_port()
        try:
            return _start_on(port, elf, work_dir, install, log, timeout, baud, readfs_files, trace, link,
                             esp32_module, camera_stream)
        except PortTaken:
            if attempt + 1 == attempts:
                raise
    raise AssertionError("unreachable")


def _start_on(port: int, elf, work_dir, install, log, timeout, baud, readfs_files, trace, link, esp32_module,
              camera_stream) -> GvsocProcess:
    install = Path(install)
    work_dir = Path(work_dir).resolve()
    command = gvsoc_run_command(elf, work_dir, port, install, log, baud, readfs_files, trace, link, esp32_module,
                                camera_stream)
    log_path = work_dir / "gvsoc.log"
    with open(log_path, "wb") as out:
        proc = procs.spawn(command, cwd=work_dir, env=gvsoc_env(install), stdin=subprocess.DEVNULL,
                           stdout=out, stderr=subprocess.STDOUT)
    sim = GvsocProcess(proc, port, work_dir, log_path, command, link)
    what = "the ESP32's TCP server" if link == "wifi" else "its UART"
    try:
        deadline = time.monotonic() + timeout
        while not _listens(proc.pid, port):
            if proc.poll() is not None:
                tail = sim.output().strip().splitlines()[-1:] or ["(no output)"]
                raise EdgeRNNError(f"GVSOC ended (exit status {proc.returncode}) before {what} listened on "
                                   f"port {port}: {tail[0]} (log: {log_path})")
            output = sim.output()
            # GVSOC goes on without a UART (or an ESP32's server) then
            if "open telnet port failed" in output or (link == "wifi" and "edgernn-esp32: cannot listen" in output):
                raise PortTaken(f"GVSOC could not listen on 127.0.0.1:{port} (taken?); log: {log_path}")
            if time.monotonic() > deadline:
                raise EdgeRNNError(f"GVSOC: {what} did not listen on 127.0.0.1:{port} within {timeout:.0f} s "
                                   f"(port taken? log: {log_path})")
            time.sleep(0.01)
    except BaseException:
        sim.stop()
        raise
    return sim
