"""The UART self-test of a GVSOC build: a bare-metal GAP8 echo (``templates/targets/gap8/sdk/selftest/``) that
returns bursts of bytes while it receives them, so that bytes cross the simulated UART both ways at once,
at the board's baud.

``gap_sdk.build_gvsoc`` runs it on every GVSOC it builds and marks the build done only when every byte
came back exact. Upstream GVSOC's UART testbench (4.8.0 to master) shifts the bytes of such a burst by
one bit; edgernn's corrections (``templates/targets/gap8/sdk/overrides/``) fix it, and a build without them fails
here, at setup, instead of later in ``edgernn validate``.

No TensorFlow here.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from edgernn import procs
from edgernn.errors import EdgeRNNError
from edgernn.resources import templates_dir

BURSTS = (257, 1025)                # bytes per burst: each sent whole, echoed as it arrives
BAUD = 115200                       # the ai_deck board's UART (boards/ai_deck.toml [serial] baud)
SOURCES = ("crt0.S", "uart_echo.c")
LINK_SCRIPT = "gap8_l2.ld"
READY = "GVSOC-ECHO READY"
DONE = "~~~GVSOC ECHO DONE~~~"

# (compiler, -march): Debian's bare-metal gcc, else GAP's own (gcc 7: no separate zicsr extension).
COMPILERS = (("riscv64-unknown-elf-gcc", "rv32imc_zicsr"), ("riscv32-unknown-elf-gcc", "rv32imc"))


class SelfTestFailed(EdgeRNNError):
    """GVSOC's UART did not carry a burst exactly (or the echo firmware did not run): a fault of the
    (simulated) device, exit code 3."""

    exit_code = 3


@dataclass
class SelfTestResult:
    bursts: list[int] = field(default_factory=list)
    bytes: int = 0
    mismatches: int = 0
    seconds: float = 0.0
    baud: int = BAUD

    def as_dict(self) -> dict:
        return {"bursts": self.bursts, "bytes": self.bytes, "mismatches": self.mismatches,
                "seconds": round(self.seconds, 2), "baud": self.baud}


def selftest_dir() -> Path:
    return templates_dir() / "targets" / "gap8" / "sdk" / "selftest"


def _compiler() -> tuple[str, str]:
    from edgernn.targets.gap8.toolchain import gap_compiler

    for cc, march in COMPILERS:
        if shutil.which(cc):
            return shutil.which(cc), march
    gap = gap_compiler()
    if gap is not None:
        return str(gap), "rv32imc"
    raise EdgeRNNError("GVSOC's UART self-test needs a RISC-V compiler: apt-get install --no-install-recommends "
                       "gcc-riscv64-unknown-elf (or GAP's own riscv32-unknown-elf-gcc)")


def echo_elf(cache: Path, baud: int = BAUD) -> Path:
    """The echo firmware, compiled once per source content, compiler and baud into ``cache``."""
    cc, march = _compiler()
    src = selftest_dir()
    digest = hashlib.sha256(f"{cc}\0{march}\0{baud}\0".encode())
    for name in (*SOURCES, LINK_SCRIPT):
        digest.update(name.encode() + b"\0" + (src / name).read_bytes())
    dest = Path(cache) / "gvsoc_selftest" / digest.hexdigest()[:16]
    elf = dest / "uart_echo.elf"
    if elf.is_file():
        return elf
    dest.mkdir(parents=True, exist_ok=True)
    staging = dest / f"uart_echo.elf.{os.getpid()}"
    command = [cc, f"-march={march}", "-mabi=ilp32", "-O2", "-Wall", "-Wextra", "-Werror", "-nostdlib",
               "-ffreestanding", f"-DBAUD={int(baud)}u", "-T", str(src / LINK_SCRIPT),
               *(str(src / s) for s in SOURCES), "-o", str(staging)]
    if "riscv64" in Path(cc).name:
        command.insert(-2, "-Wl,--no-warn-rwx-segments")
    proc = procs.run(command)
    if proc.returncode != 0:
        staging.unlink(missing_ok=True)
        lines = (proc.stderr or proc.stdout or "(no output)").strip().splitlines()
        raise EdgeRNNError(f"GVSOC's UART self-test firmware does not compile: {lines[0]}")
    os.replace(staging, elf)
    return elf


class _Uart:
    def __init__(self, port: int, timeout: float):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buffer = b""

    def _more(self, what: str) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise SelfTestFailed(f"GVSOC's UART closed while the self-test waited for {what}")
        self.buffer += chunk

    def read_exactly(self, n: int) -> bytes:
        while len(self.buffer) < n:
            self._more(f"{n} echoed bytes (got {len(self.buffer)})")
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def read_line(self) -> str:
        while b"\n" not in self.buffer:
            self._more("a line")
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode(errors="replace")

    def close(self) -> None:
        self.sock.close()


def uart_self_test(install: Path, work_dir: Path, *, cache: Path, bursts=BURSTS, baud: int = BAUD,
                   timeout: float = 60.0) -> SelfTestResult:
    """Run the echo in the GVSOC at ``install``: each burst is sent whole and must come back byte for byte
    while it is still arriving. Raises SelfTestFailed with one line saying what went wrong."""
    from edgernn.targets.gap8 import gvsoc

    elf = echo_elf(cache, baud)
    result = SelfTestResult(baud=baud)
    started = time.monotonic()
    try:
        sim = gvsoc.start_gvsoc(elf, work_dir, install=install, baud=baud)
    except EdgeRNNError as err:
        raise SelfTestFailed(f"GVSOC did not start the UART self-test: {err}") from None
    with sim:
        try:
            uart = _Uart(sim.port, timeout)
        except OSError as err:
            raise SelfTestFailed(f"GVSOC's UART took no connection for the self-test: {err}") from None
        try:
            ready = uart.read_line()
            if not ready.startswith(READY):
                raise SelfTestFailed(f"GVSOC's UART self-test firmware did not say it was ready: {ready[:60]!r}")
            rng = random.Random(len(bursts))
            for n in bursts:
                payload = bytes(rng.randrange(256) for _ in range(n))
                uart.sock.sendall(b"E" + n.to_bytes(2, "little") + payload)
                echoed = uart.read_exactly(n)
                bad = [i for i in range(n) if echoed[i] != payload[i]]
                report = uart.read_line()
                result.bursts.append(n)
                result.bytes += n
                result.mismatches += len(bad)
                if bad:
                    i = bad[0]
                    shifted = ((payload[i] << 1) & 0xFF) == echoed[i] or (payload[i] >> 1) == echoed[i]
                    raise SelfTestFailed(
                        f"GVSOC's UART self-test failed: {len(bad)} of {n} bytes echoed back at {baud} baud differ "
                        f"(first at byte {i}: sent 0x{payload[i]:02x}, got 0x{echoed[i]:02x}"
                        f"{', shifted by one bit' if shifted else ''}); this GVSOC's UART testbench garbles "
                        "bytes that cross both ways at once")
                fields = dict(item.split("=", 1) for item in report.split()[1:] if "=" in item)
                if int(fields.get("n", -1)) != n or int(fields.get("sum", "0"), 16) != sum(payload):
                    raise SelfTestFailed(f"GVSOC's UART self-test: the firmware received other bytes than were "
                                         f"sent ({report[:80]!r})")
            uart.sock.sendall(b"Q" + bytes([0]))
            if uart.read_line() != DONE:
                raise SelfTestFailed("GVSOC's UART self-test firmware did not finish")
        except (OSError, ValueError) as err:
            raise SelfTestFailed(f"GVSOC's UART self-test broke off: {err}") from None
        finally:
            uart.close()
        try:
            code = sim.wait(timeout)
        except Exception:
            code = None
        if code != 0:
            raise SelfTestFailed(f"GVSOC's UART self-test firmware ended with exit status {code}, not 0")
    result.seconds = time.monotonic() - started
    return result
