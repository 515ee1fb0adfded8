"""The crazyflie board: `edgernn build --board crazyflie` writes an out-of-tree app of the Crazyflie firmware
and, with $CRAZYFLIE_BASE, links it into a complete cf2 image against that firmware (../shared/crazyflie-
firmware beside the checkout, as in CI) with Debian's arm-none-eabi-gcc; the app's flash and RAM come from
the image's linker map. Its model is compiled with exactly the flags of qemu_stm32f405, the board that
validates that code in QEMU."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from conftest import require_tools, tool_unavailable
from edgernn.errors import EdgeRNNError
from edgernn.testing import zoo

pytestmark = [pytest.mark.slow, pytest.mark.toolchain]

ROOT = Path(__file__).resolve().parents[3]


def firmware_checkout() -> Path:
    base = Path(os.environ.get("CRAZYFLIE_BASE") or ROOT.parent / "shared" / "crazyflie-firmware")
    if not (base / "tools" / "make" / "oot.mk").is_file():
        tool_unavailable(f"needs the Crazyflie firmware ($CRAZYFLIE_BASE, or {base})")
    return base.resolve()


def gru_model(tmp_path: Path) -> Path:
    keras = zoo._keras(0)
    model = keras.Sequential([keras.Input((None, 3)), keras.layers.GRU(16, return_sequences=True),
                              keras.layers.Dense(2)], name="gru16")
    model.save(tmp_path / "gru16.keras")
    return tmp_path / "gru16.keras"


@pytest.fixture(scope="module")
def app_build(tmp_path_factory):
    require_tools("arm-none-eabi-gcc", "make", "gcc")
    base = firmware_checkout()
    from edgernn.pipeline.build import build_model

    tmp = tmp_path_factory.mktemp("crazyflie")
    out = tmp / "out"
    saved = os.environ.get("CRAZYFLIE_BASE")
    os.environ["CRAZYFLIE_BASE"] = str(base)
    try:
        result = build_model(str(gru_model(tmp)), out, board="crazyflie", quant="int8",
                             calib=zoo.trajectories(4, 40, 3, 1))
    finally:
        if saved is None:
            os.environ.pop("CRAZYFLIE_BASE")
        else:
            os.environ["CRAZYFLIE_BASE"] = saved
    return out, result


def test_the_app_links_into_a_cf2_image_and_its_share_comes_from_the_map(app_build):
    out, result = app_build
    firmware = result["manifest"]["firmware"]
    assert firmware["built"] and (out / firmware["image"]).stat().st_size > 100_000
    # the app holds the model's constants in flash and its arena in RAM, and the image fits the chip
    assert firmware["app_flash_bytes"] > result["manifest"]["weight_bytes"]
    assert firmware["app_ram_bytes"] >= result["manifest"]["arena_bytes"]
    assert 0 < firmware["image_flash_bytes"] <= 1008 * 1024 and 0 < firmware["image_ram_bytes"] <= 128 * 1024
    assert any(m.startswith("app in the cf2 image (linker map): flash ") for m in result["messages"])
    symbols = subprocess.run(["arm-none-eabi-nm", str(out / firmware["elf"])], capture_output=True, text=True,
                             check=True).stdout.split()
    assert {"appMain", "edgernn_step", "edgernn_app_read_inputs"} <= set(symbols)
    # the app folder is as generated: its own make starts clean, with the settings and the hook documented
    app = out / "firmware"
    assert not (app / "build").exists()
    assert "EDGERNN_APP_INPUT_LOGS" in (app / "edgernn_app_config.h").read_text()


def test_the_model_has_the_flags_qemu_stm32f405_validates(app_build):
    from edgernn.targets.board import load_board
    from edgernn.targets.compile import board_cflags, board_defines

    out, _ = app_build
    kbuild = (out / "firmware" / "Kbuild").read_text()
    app_flags = shlex.split(re.search(r"^EDGERNN_CFLAGS := (.*)$", kbuild, re.M).group(1))
    qemu = load_board("qemu_stm32f405")
    # the flags every qemu_stm32f405 compile takes (edgernn.targets.compile.compile_firmware), its name apart
    qemu_flags = board_cflags(qemu) + board_defines(qemu)
    assert [f for f in app_flags if not f.startswith("-DEDGERNN_BOARD_NAME=")] == \
        [f for f in qemu_flags if not f.startswith("-DEDGERNN_BOARD_NAME=")]
    assert "-O2" in app_flags and "-mfpu=fpv4-sp-d16" in app_flags


def test_without_a_firmware_checkout_the_app_is_written_and_the_way_to_build_it_said(tmp_path, monkeypatch):
    require_tools("arm-none-eabi-gcc")
    from edgernn.pipeline.build import build_model

    monkeypatch.delenv("CRAZYFLIE_BASE", raising=False)
    result = build_model(str(gru_model(tmp_path)), tmp_path / "out", board="crazyflie", quant="int8",
                         calib=zoo.trajectories(4, 40, 3, 1))
    assert not result["manifest"]["firmware"]["built"]
    assert any("make CRAZYFLIE_BASE=/path/to/crazyflie-firmware" in m for m in result["messages"])
    assert (tmp_path / "out" / "firmware" / "Makefile").is_file()
    monkeypatch.setenv("CRAZYFLIE_BASE", str(tmp_path))
    with pytest.raises(EdgeRNNError, match="is no crazyflie-firmware checkout"):
        build_model(str(tmp_path / "gru16.keras"), tmp_path / "out2", board="crazyflie", quant="int8",
                    calib=zoo.trajectories(4, 40, 3, 1))
