"""The Crazyflie's receiver of the camera application's outputs (edgernn.targets.stm32.receiver): write_receiver
writes a complete out-of-tree app for the model's output, and build_receiver links it into a cf2 image against
../shared/crazyflie-firmware with Debian's arm-none-eabi-gcc (one image, about a minute with a warm ccache),
its share of the flash and RAM from the linker map."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import require_module, require_tools, tool_unavailable
from edgernn.errors import EdgeRNNError
from edgernn.link import appmsg

ROOT = Path(__file__).resolve().parents[3]
SHA = "5e" * 32
APP_FILES = ["Kbuild", "Makefile", "app-config", "src/Kbuild", "src/edgernn_appmsg.c", "src/edgernn_appmsg.h",
             "src/edgernn_receiver.c", "src/edgernn_receiver.h"]


def spec(**changes) -> dict:
    return {**dict(n_outputs=150, dtype="int16", scale=0.0123, zero_point=-7, model_sha256=SHA,
                   model_name="cnn_gru"), **changes}


def firmware_checkout() -> Path:
    base = Path(os.environ.get("CRAZYFLIE_BASE") or ROOT.parent / "shared" / "crazyflie-firmware")
    if not (base / "tools" / "make" / "oot.mk").is_file():
        tool_unavailable(f"needs the Crazyflie firmware ($CRAZYFLIE_BASE, or {base})")
    return base.resolve()


@pytest.fixture(scope="module")
def receiver():
    require_module("jinja2")
    from edgernn.targets.stm32 import receiver

    return receiver


def test_the_app_folder_is_complete_and_says_what_it_was_generated_for(receiver, tmp_path):
    app = receiver.write_receiver(tmp_path / "app", spec())
    assert sorted(str(p.relative_to(app)) for p in app.rglob("*") if p.is_file()) == APP_FILES
    header = (app / "src" / "edgernn_receiver.h").read_text()
    assert "bool edgernnLatest(float *y, uint32_t *frame, uint32_t *ageMs);" in header
    assert "#define EDGERNN_RECEIVER_N_OUTPUTS 150u" in header and SHA in header
    assert "#define EDGERNN_RECEIVER_STALE_MS 500u" in header
    source = (app / "src" / "edgernn_receiver.c").read_text()
    assert f"#define MESSAGE_BYTES {appmsg.message_bytes(150, 'int16')}u" in source
    assert "#define OUTPUT_DTYPE EDGERNN_APPMSG_INT16" in source
    assert "#define OUTPUT_SCALE 0.0123f" in source and "#define OUTPUT_ZERO_POINT -7" in source
    # the first 64 outputs are log variables, the others reach a controller through edgernnLatest
    assert "LOG_ADD(LOG_FLOAT, y63, &latest[63])" in source and "y64" not in source
    assert "cpxRegisterAppMessageHandler(on_packet)" in source
    assert "CONFIG_APP_ENABLE=y" in (app / "app-config").read_text()


@pytest.mark.parametrize("value, literal", [(0.0123, "0.0123f"), (1.0, "1.0f"), (1 / 3, "0.33333334f"),
                                            (2.0 ** -20, "9.536743e-07f"), (1e10, "1e+10f")])
def test_the_scale_is_the_shortest_float_literal_of_its_float32(receiver, value, literal):
    assert receiver.float_literal(value) == literal
    assert np.float32(literal[:-1]) == np.float32(value)


@pytest.mark.parametrize("changes, match", [
    (dict(dtype="int32"), "int8, int16 or float32"),
    (dict(n_outputs=0), "takes 1 to"),
    (dict(n_outputs=appmsg.max_outputs("int16") + 1), "takes 1 to"),
    (dict(scale=None), "need their scale"),
    (dict(scale=-1.0), "need their scale"),
    (dict(model_sha256="abc"), "64 lowercase hex"),
    (dict(stale_ms=0), "stale_ms"),
])
def test_a_spec_that_cannot_be_received_is_refused(receiver, tmp_path, changes, match):
    with pytest.raises(EdgeRNNError, match=match):
        receiver.write_receiver(tmp_path / "app", spec(**changes))
    assert not (tmp_path / "app").exists()


def test_the_spec_comes_from_a_manifest(receiver):
    manifest = {"model_file": "/data/my model.keras", "model_sha256": SHA,
                "outputs": [{"name": "y", "dtype": "int8", "shape": [1, 2], "scale": 0.5, "zero_point": 3}]}
    got = receiver.ReceiverSpec.from_manifest(manifest)
    assert (got.n_outputs, got.dtype, got.scale, got.zero_point, got.model_name) == (2, "int8", 0.5, 3, "my model")
    assert receiver.c_name(got.model_name) == "my_model"
    float_out = {**manifest, "outputs": [{"name": "y", "dtype": "float32", "shape": [1, 3]}]}
    assert receiver.ReceiverSpec.from_manifest(float_out).scale is None


def test_building_needs_a_firmware_checkout(receiver, tmp_path, monkeypatch):
    app = receiver.write_receiver(tmp_path / "app", spec())
    monkeypatch.delenv("CRAZYFLIE_BASE", raising=False)
    with pytest.raises(EdgeRNNError, match=r"set \$CRAZYFLIE_BASE"):
        receiver.build_receiver(app)
    with pytest.raises(EdgeRNNError, match="is no crazyflie-firmware checkout"):
        receiver.build_receiver(app, base=tmp_path)


@pytest.mark.slow
@pytest.mark.toolchain
def test_the_app_links_into_a_cf2_image_and_its_share_comes_from_the_map(receiver, tmp_path):
    require_tools("arm-none-eabi-gcc", "arm-none-eabi-nm", "make", "gcc")
    base = firmware_checkout()
    app = receiver.write_receiver(tmp_path / "app", spec())
    sizes = receiver.build_receiver(app, base=base, scratch=tmp_path)
    image = app / "build"
    assert sorted(p.name for p in image.iterdir()) == ["cf2.bin", "cf2.elf", "cf2.map"]
    assert (image / "cf2.bin").stat().st_size > 100_000
    # the app's RAM holds its message buffer and two copies of the outputs as floats; its code is small
    assert sizes.app_ram >= appmsg.message_bytes(150, "int16") + 2 * 4 * 150
    assert 500 < sizes.app_flash < 16_384
    assert 0 < sizes.image_flash <= 1008 * 1024 and 0 < sizes.image_ram <= 128 * 1024
    assert sizes.lines()[0].startswith("app in the cf2 image (linker map): flash ")
    symbols = subprocess.run(["arm-none-eabi-nm", str(image / "cf2.elf")], capture_output=True, text=True,
                             check=True).stdout.split()
    assert {"appMain", "edgernnLatest", "edgernn_appmsg_rx_feed", "__logs_edgernn"} <= set(symbols)
    # the log group is in the image with its variables' names
    elf = (image / "cf2.elf").read_bytes()
    assert all(f"{name}\0".encode() in elf for name in ("y0", "y63", "frame", "ageMs", "rejected"))
    # the build happened in a copy: the app folder has no Kbuild objects, the firmware's tree no app
    assert not list(app.rglob("*.o"))
