"""The AI-deck's WiFi link end to end in GVSOC: a `--link wifi` firmware (CPX over SPI to the deck's ESP32,
link_cpx.c) validated through edgernn's model of the ESP32 (a TCP server for the host, an SPI slave with its ready
line for the GAP8), every output and state byte equal to the interpreter; the CPX self-test that proves the model
at the first start, and rejects a broken one; and the link's faults, each one line with its exit code and no
process left behind."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import (gap_sdk_params, one_error_line, processes_mentioning, require_gap_sdk, require_gap_sdk_at,
                      require_tools, wait_until)
from edgernn.testing.zoo import gap8_model, trajectories

pytestmark = [pytest.mark.slow, pytest.mark.toolchain]

BOARD = "gvsoc_gap8"


@pytest.fixture(scope="module")
def gvsoc():
    require_gap_sdk()
    require_tools("make", "riscv64-unknown-elf-gcc", "g++")
    from edgernn.targets.gap8 import sdk as gap_sdk

    return gap_sdk.build_gvsoc()


@pytest.fixture(scope="module")
def wifi_build(gvsoc, tmp_path_factory):
    """(OUT, n_in): a GRU built for gvsoc_gap8 with --link wifi."""
    from edgernn.pipeline.build import build_model

    folder = tmp_path_factory.mktemp("wifi")
    model, n_in = gap8_model("gru")
    path = folder / "gru.keras"
    model.save(path)
    result = build_model(str(path), folder / "out", board=BOARD, quant="int8", calib=trajectories(8, 80, n_in, 1),
                         link="wifi")
    assert result["manifest"]["link"] == "wifi" and result["manifest"]["firmware"]["built"]
    assert "-DEDGERNN_LINK_WIFI=1" in (folder / "out" / "firmware" / "Makefile").read_text()
    return folder / "out", n_in


def _cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgernn", *args], capture_output=True, text=True, timeout=timeout)




def test_validates_over_wifi_through_the_simulated_esp32(wifi_build, tmp_path):
    from edgernn.validate.run import validate

    out, n_in = wifi_build
    report = validate(out, data=trajectories(2, 150, n_in, 9), json_path=tmp_path / "report.json")
    ref, link = report["reference"], report["link"]
    assert report["pass"] and ref["mismatches"] == 0 and ref["state_mismatches"] == 0, ref
    assert link["port"].startswith("cpx://127.0.0.1:") and link["firmware_link"] == "wifi"
    assert link["transport"].startswith("CPX over TCP through the simulated ESP32")
    assert processes_mentioning(str(out)) == []


def test_the_cpx_self_test_passed_and_a_broken_esp32_fails_it(gvsoc, tmp_path, monkeypatch):
    """The ESP32 that edgernn ships passed the self-test at the first start (bursts both ways, larger than the
    MTU); the same model built to lose the last byte of each packet it passes to the host fails it, and a build
    whose record says it failed is refused at once."""
    from edgernn.targets.gap8 import cpx_check
    from edgernn.targets.gap8.gvsoc_check import SelfTestFailed

    record = cpx_check.require_cpx_self_test(gvsoc)
    assert record["passed"] and record["bytes"] == sum(cpx_check.BURSTS)
    assert max(cpx_check.BURSTS) > 2 * 1020

    source = cpx_check._key_dir(gvsoc) / "sdk" / "gap8" / "gvsoc" / "dpi-models" / "models" / "wifi" / "nina_w10.cpp"
    assert "EDGERNN_ESP32_FAULT" in source.read_text()       # edgernn's model, not upstream's
    broken = tmp_path / "broken_esp32.so"
    subprocess.run(["g++", str(source), "-o", str(broken), "-O1", "-fpic", "-std=c++11", "-shared",
                    f"-I{gvsoc / 'include'}", "-DEDGERNN_ESP32_FAULT=1"], check=True, capture_output=True)
    with pytest.raises(SelfTestFailed, match="bytes echoed through it differ|did not bring"):
        cpx_check.cpx_self_test(gvsoc, tmp_path / "run", esp32_module=broken, timeout=30)

    monkeypatch.setattr(cpx_check, "_key_dir", lambda install: tmp_path)
    (tmp_path / cpx_check.RESULT).write_text('{"passed": false, "why": "GVSOC\'s ESP32 failed the CPX self-test: x"}')
    with pytest.raises(SelfTestFailed, match="failed the CPX self-test: x .*setup gvsoc --force"):
        cpx_check.require_cpx_self_test(gvsoc)


class _Relay:
    """A TCP relay between the host and the simulated ESP32 that cuts both sides once the host has sent
    ``cut_after`` bytes: a WiFi connection dropped in the middle of a frame."""

    def __init__(self, target: int, cut_after: int):
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(1)
        self.port = self.server.getsockname()[1]
        self.target, self.cut_after, self.sent = target, cut_after, 0
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        host, _ = self.server.accept()
        deck = socket.create_connection(("127.0.0.1", self.target))

        def back():
            try:
                while chunk := deck.recv(65536):
                    host.sendall(chunk)
            except OSError:
                pass

        threading.Thread(target=back, daemon=True).start()
        try:
            while chunk := host.recv(65536):
                room = self.cut_after - self.sent
                deck.sendall(chunk[:room])
                self.sent += min(len(chunk), room)
                if self.sent >= self.cut_after:
                    break
        except OSError:
            pass
        for s in (host, deck):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


def _started(out: Path):
    from edgernn.targets import device as devices

    board = devices.load_board(BOARD)
    return devices.start(devices.find_firmware(out, board), board)


def test_fault_a_connection_dropped_mid_frame(wifi_build):
    out, _ = wifi_build
    with _started(out) as device:
        relay = _Relay(int(device.url.rsplit(":", 1)[1]), cut_after=150)
        proc = _cli("validate", str(out), "--port", f"cpx://127.0.0.1:{relay.port}", "--steps", "300")
    assert proc.returncode == 3
    assert "closed the connection" in one_error_line(proc)


def test_fault_a_second_client_is_refused(wifi_build):
    from edgernn.link.cpx import CpxPort

    out, _ = wifi_build
    with _started(out) as device:
        first = CpxPort(device.url)
        try:
            proc = _cli("validate", str(out), "--port", device.url, "--steps", "20")
        finally:
            first.close()
    assert proc.returncode == 3
    line = one_error_line(proc)
    assert "closed the connection" in line and "one client" in line


def test_fault_gvsoc_killed_mid_validate(wifi_build, tmp_path):
    out, _ = wifi_build
    proc = subprocess.Popen([sys.executable, "-m", "edgernn", "validate", str(out), "--steps", "20000",
                             "--json", str(tmp_path / "r.json")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    work = str(out / "firmware")
    assert wait_until(lambda: any("gvsoc_launcher" in Path(f"/proc/{p}/cmdline").read_text(errors="replace")
                                  for p in processes_mentioning(work)), 120)
    time.sleep(4)       # well into the sequence
    for pid in processes_mentioning(work):
        if "gvsoc_launcher" in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
            os.kill(pid, signal.SIGKILL)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 3
    assert one_error_line(subprocess.CompletedProcess([], 3, "", stderr))
    assert wait_until(lambda: processes_mentioning(work) == [], 10), processes_mentioning(work)


def test_fault_the_esp32s_port_is_taken(gvsoc, wifi_build, tmp_path):
    from edgernn.errors import EdgeRNNError
    from edgernn.targets import device as devices
    from edgernn.targets.gap8.gvsoc import start_gvsoc

    out, _ = wifi_build
    elf = devices.find_firmware(out, devices.load_board(BOARD))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(EdgeRNNError, match=f"could not listen on 127.0.0.1:{port}"):
            start_gvsoc(elf, tmp_path / "run", uart_port=port, install=gvsoc, link="wifi")
    assert processes_mentioning(str(tmp_path)) == []


def test_fault_a_device_of_another_protocol_version(wifi_build, tmp_path):
    """The same firmware built to speak protocol version 7 over WiFi: refused at HELLO, in one line."""
    from edgernn.targets.board import load_board
    from edgernn.targets.gap8.adapter import build_gap_project

    out, _ = wifi_build
    other = tmp_path / "out"
    shutil.copytree(out, other, ignore=shutil.ignore_patterns("BUILD", "gvsoc", "build"))
    makefile = other / "firmware" / "Makefile"
    makefile.write_text(makefile.read_text().replace("APP_CFLAGS += -DEDGERNN_LINK_WIFI=1",
                                                     "APP_CFLAGS += -DEDGERNN_LINK_WIFI=1 -DEDGERNN_LINK_VERSION=7"))
    build_gap_project(other / "firmware", load_board(BOARD), make_vars=load_board(BOARD).gap_sdk.make_vars)
    proc = _cli("validate", str(other), "--steps", "5")
    assert proc.returncode == 3
    assert "protocol version mismatch" in one_error_line(proc) and "speaks version 7" in proc.stderr
    assert processes_mentioning(str(other)) == []


@pytest.mark.parametrize("sdk", gap_sdk_params())
def test_ai_deck_wifi_firmware_builds_against_each_sdk(sdk, tmp_path, monkeypatch):
    """`--board ai_deck --link wifi` compiles and links (no undefined symbol) against each SDK the tests have
    ($GAP_SDK_HOME; CI: ../shared/gap_sdk, and 4.8.0 through $EDGERNN_TEST_GAP_SDKS)."""
    from edgernn.pipeline.build import build_model

    monkeypatch.setenv("GAP_SDK_HOME", str(require_gap_sdk_at(sdk)))
    model, n_in = gap8_model("gru")
    path = tmp_path / "gru.keras"
    model.save(path)
    result = build_model(str(path), tmp_path / "out", board="ai_deck", quant="int8",
                         calib=trajectories(4, 40, n_in, 1), link="wifi")
    manifest = result["manifest"]
    assert manifest["link"] == "wifi" and manifest["firmware"]["built"]
    assert (tmp_path / "out" / "firmware" / "link_cpx.c").is_file()


def test_a_board_without_wifi_refuses_the_link(tmp_path):
    proc = _cli("build", "nonexistent.keras", "--board", "host", "--link", "wifi", "-o", str(tmp_path / "o"))
    assert proc.returncode == 2
    assert one_error_line(proc).endswith("board host has no 'wifi' link (its links: uart)")
