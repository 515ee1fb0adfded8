"""The CPX self-test of a GVSOC build: the GAP8's WiFi link (templates/targets/gap8/hal/link_cpx.c) through
edgernn's model of the deck's ESP32 (templates/targets/gap8/sdk/overrides/.../wifi/nina_w10.cpp), both ways at
once, in bursts that span many packets.

It runs at the first start of a ``--link wifi`` firmware on a GVSOC build (``require_cpx_self_test``), and its
result is kept beside the build: a GVSOC whose ESP32 fails it is not used for WiFi firmware, and says why at once
each time after. The echo firmware is a GAP SDK project (``templates/targets/gap8/sdk/cpx_selftest/``) built
with the SDK's own rules, with the link's sources as the firmware has them.

No TensorFlow here.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from pathlib import Path

from edgernn.errors import EdgeRNNError
from edgernn.resources import templates_dir
from edgernn.targets.gap8.gvsoc_check import SelfTestFailed

BURSTS = (1, 1020, 1021, 2500, 6000)        # bytes: one packet, exactly one's data, one more, several packets
READY = "CPX-ECHO READY"
DONE = "~~~CPX ECHO DONE~~~"
RESULT = "cpx-selftest.json"                # beside the build's marker


def _key_dir(install: Path) -> Path:
    return Path(install).resolve().parent.parent.parent


def echo_project(dest: Path) -> Path:
    """The echo's GAP SDK project in ``dest``: its main.c and Makefile, and the link's sources."""
    dest.mkdir(parents=True, exist_ok=True)
    for src in (templates_dir() / "targets" / "gap8" / "sdk" / "cpx_selftest").iterdir():
        shutil.copyfile(src, dest / src.name)
    hal = templates_dir() / "targets" / "gap8" / "hal"
    for name in ("link_cpx.c", "link_cpx.h"):
        shutil.copyfile(hal / name, dest / name)
    shutil.copyfile(templates_dir() / "firmware" / "hal.h", dest / "hal.h")
    return dest


def echo_elf(work: Path) -> Path:
    """The echo, built with the gvsoc_gap8 board's GAP SDK settings."""
    from edgernn.targets.board import load_board
    from edgernn.targets.gap8.adapter import build_gap_project

    project = echo_project(work / "cpx_echo")
    return build_gap_project(project, load_board("gvsoc_gap8"), image=False).elf


class _Echo:
    def __init__(self, url: str, timeout: float):
        from edgernn.link.cpx import CpxPort

        self.port = CpxPort(url, timeout=0.1, write_timeout=timeout)
        self.timeout = timeout
        self.buffer = bytearray()

    def _more(self, what: str, deadline: float) -> None:
        if time.monotonic() > deadline:
            raise SelfTestFailed(f"GVSOC's ESP32 did not bring {what} within {self.timeout:.0f} s")
        self.buffer += self.port.read(65536)

    def read_exactly(self, n: int, deadline: float) -> bytes:
        while len(self.buffer) < n + (len(READY) + 1 if self.buffer.startswith(READY.encode()) else 0):
            self._more(f"{n} echoed bytes (got {len(self.buffer)})", deadline)
        # the READY line, one packet, came first if the client was there when it was sent (the ESP32 drops
        # what has no client, as on the deck): it is not part of the echo
        if self.buffer.startswith(READY.encode() + b"\n"):
            del self.buffer[:len(READY) + 1]
        data, self.buffer = bytes(self.buffer[:n]), self.buffer[n:]
        return data

    def read_line(self, deadline: float) -> str:
        while b"\n" not in self.buffer:
            self._more("a line", deadline)
        at = self.buffer.index(b"\n")
        line, self.buffer = bytes(self.buffer[:at]), self.buffer[at + 1:]
        return line.decode(errors="replace").strip("\x00")


def cpx_self_test(install: Path, work: Path, *, bursts=BURSTS, timeout: float = 120.0,
                  esp32_module: Path | None = None) -> dict:
    """Run the echo in the GVSOC at ``install`` over its ESP32 (or the model ``esp32_module``): every burst must
    come back byte for byte. Returns what was carried; raises SelfTestFailed with one line."""
    from edgernn.link.cpx import CpxClosed
    from edgernn.targets.gap8 import gvsoc

    elf = echo_elf(work)
    started = time.monotonic()
    try:
        sim = gvsoc.start_gvsoc(elf, work / "gvsoc", install=install, link="wifi", timeout=60,
                                esp32_module=esp32_module)
    except EdgeRNNError as err:
        raise SelfTestFailed(f"GVSOC did not start the CPX self-test: {err}") from None
    carried = 0
    with sim:
        echo = None
        try:
            echo = _Echo(sim.url, timeout)
            deadline = time.monotonic() + timeout
            rng = random.Random(len(bursts))
            for n in bursts:
                payload = bytes(rng.randrange(256) for _ in range(n))
                echo.port.write(b"E" + n.to_bytes(4, "little") + payload)
                got = echo.read_exactly(n, time.monotonic() + timeout)
                bad = [i for i in range(n) if got[i] != payload[i]]
                if bad:
                    raise SelfTestFailed(f"GVSOC's ESP32 failed the CPX self-test: {len(bad)} of {n} bytes echoed "
                                         f"through it differ (first at byte {bad[0]}): its model garbles packets")
                carried += n
            echo.port.write(b"Q")
            line = echo.read_line(time.monotonic() + timeout)
            if line != DONE:
                raise SelfTestFailed(f"the CPX self-test firmware did not finish (it said {line[:60]!r})")
        except CpxClosed as err:
            raise SelfTestFailed(f"GVSOC's ESP32 failed the CPX self-test: {err}") from None
        except OSError as err:
            raise SelfTestFailed(f"GVSOC's ESP32 failed the CPX self-test: {err}") from None
        finally:
            if echo is not None:
                echo.port.close()
        try:
            code = sim.wait(30)
        except Exception:  # noqa: BLE001 - a simulator that does not end is reported by its status below
            code = None
        if code != 0:
            raise SelfTestFailed(f"the CPX self-test firmware ended with exit status {code}, not 0")
    return {"bursts": list(bursts), "bytes": carried, "seconds": round(time.monotonic() - started, 2)}


def require_cpx_self_test(install: Path) -> dict:
    """The CPX self-test's result for the GVSOC at ``install``: run now when this build has none, else the
    record. A build whose ESP32 failed it is refused (SelfTestFailed, exit code 3), now and every time after."""
    key_dir = _key_dir(install)
    record_path = key_dir / RESULT
    try:
        record = json.loads(record_path.read_text())
    except (OSError, ValueError):
        record = None
    if record is None:
        work = key_dir / "cpx_selftest"
        shutil.rmtree(work, ignore_errors=True)
        try:
            result = cpx_self_test(install, work)
            record = {"passed": True, **result}
        except SelfTestFailed as err:
            record = {"passed": False, "why": str(err)}
        tmp = record_path.with_name(f".{RESULT}.{os.getpid()}")
        tmp.write_text(json.dumps(record, indent=1) + "\n")
        os.replace(tmp, record_path)
    if not record.get("passed"):
        raise SelfTestFailed(f"{record.get('why', 'the CPX self-test failed')} (GVSOC {install}; "
                             f"`edgernn setup gvsoc --force` rebuilds it)")
    return record
