"""Models beyond L2 on GAP8, each over the AI-deck's 320 KiB L2 budget, build for gvsoc_gap8 with their largest
weight matrices in L3, a readfs file of the flash image that the firmware copies into HyperRAM at init and
streams in chunks each step, and validate in GVSOC over 100 steps with every output and state byte equal to
the interpreter's:
- a two-layer LSTM(256)/LSTM(128) (~466k int8 weights), fused: the LSTM(256)'s recurrent matrix streams;
- a camera CNN + GRU (~690k, frames_zoo.camera_gru_l3), step: the Dense(128) behind the CNN's flatten and the
  GRU(256)'s recurrent FULLY_CONNECTED stream, the first in chunks split across the cluster by inputs."""

from __future__ import annotations

import json
import re
import struct
import subprocess
import time

import numpy as np
import pytest

from conftest import require_gap_sdk, require_tools

pytestmark = [pytest.mark.slow, pytest.mark.toolchain]

BOARD = "gvsoc_gap8"
STEPS = 100
N_IN = 8


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    require_gap_sdk()
    require_tools("make", "riscv64-unknown-elf-gcc")
    import keras

    from edgernn.pipeline.build import build_model as build_folder
    from edgernn.targets.gap8 import sdk as gap_sdk
    from edgernn.testing.zoo import trajectories

    gap_sdk.build_gvsoc()
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((None, N_IN)), keras.layers.LSTM(256, return_sequences=True),
                              keras.layers.LSTM(128, return_sequences=True), keras.layers.Dense(4)], name="l3lstm")
    folder = tmp_path_factory.mktemp("l3")
    path = folder / "l3lstm.keras"
    model.save(path)
    result = build_folder(str(path), folder / "out", board=BOARD, quant="int8", mode="fused",
                          calib=trajectories(4, 40, N_IN, 1))
    return folder / "out", result


@pytest.fixture(scope="module")
def camera_built(tmp_path_factory):
    require_gap_sdk()
    require_tools("make", "riscv64-unknown-elf-gcc")
    from edgernn.testing.frames_zoo import camera_gru_l3, moving_blobs

    from edgernn.pipeline.build import build_model as build_folder
    from edgernn.targets.gap8 import sdk as gap_sdk

    gap_sdk.build_gvsoc()
    folder = tmp_path_factory.mktemp("l3camera")
    path = folder / "camera_gru_l3.keras"
    camera_gru_l3().save(path)
    build_folder(str(path), folder / "out", board=BOARD, quant="int8", calib=moving_blobs(4, 20, 24, 32, seed=1))
    return folder / "out"


def _readfs_partition(image: bytes) -> int:
    """The offset of a flash image's readfs partition, from its partition table (as edgernn_l3.c finds it)."""
    table = struct.unpack_from("<I", image, 0)[0]
    magic, _, count = struct.unpack_from("<HBB", image, table)
    assert magic == 0x02BA
    for i in range(count):
        magic, kind, subtype, offset = struct.unpack_from("<HBBI", image, table + 32 * (i + 1))
        if magic == 0x01BA and (kind, subtype) == (0x01, 0x81):
            return offset
    raise AssertionError("no readfs partition in the image's partition table")


def _readfs_file(image: bytes, name: str) -> bytes:
    """A file of a flash image's readfs partition, read as the firmware reads it (edgernn_l3.c)."""
    offset = _readfs_partition(image)
    files = struct.unpack_from("<I", image, offset + 8)[0]
    at = offset + 12
    for _ in range(files):
        file_at, size, length = struct.unpack_from("<III", image, at)
        if image[at + 12:at + 12 + length].rstrip(b"\0").decode() == name:
            return image[offset + file_at:offset + file_at + size]
        at += 12 + length
    raise AssertionError(f"no {name} in the readfs partition")


def test_the_largest_gate_matrix_goes_to_l3_and_the_flash_image_holds_it(built):
    out, result = built
    manifest = json.loads((out / "manifest.json").read_text())
    placement = manifest["placement"]
    l3 = {k: v for k, v in placement["items"].items() if v["memory"] == "l3"}
    assert list(l3) == ["l3:edgernn_step_op1_w_rec"] and l3["l3:edgernn_step_op1_w_rec"]["bytes"] == 4 * 256 * 256
    assert placement["items"]["weights"]["memory"] == "l2"
    assert placement["items"]["state"]["memory"] == "l1" and placement["items"]["arena"]["memory"] == "l1"
    used_l2 = sum(v["bytes"] for v in placement["items"].values() if v["memory"] == "l2")
    assert used_l2 <= placement["budgets"]["l2"] < manifest["weight_bytes"]
    streaming = placement["streaming"]
    assert streaming["l3_bytes_per_step"] == 4 * 256 * 256 and streaming["blob_bytes"] == 4 * 256 * 256
    assert [c["arrays"] for c in streaming["calls"]] == [["edgernn_step_op1_w_rec"]]
    fw = out / "firmware"
    blob = (fw / "edgernn_l3.bin").read_bytes()
    assert len(blob) == 4 * 256 * 256
    # weights.c no longer holds the streamed matrix; the call streams it
    assert "edgernn_step_op1_w_rec[" not in (fw / "weights.c").read_text()
    model_c = (fw / "model.c").read_text()
    from edgernn.backend.streaming import blob_checksum

    assert "edgernn_l3_lstm_s8(&edgernn_step_op1_l3," in model_c
    # the firmware takes the file only with the blob's size and checksum
    assert f"edgernn_l3_open(262144u, 0x{blob_checksum(blob):08x}u)" in model_c
    assert "READFS_FILES += $(CURDIR)/edgernn_l3.bin" in (fw / "Makefile").read_text()
    # the flash image the SDK's gapy made holds the blob in its readfs partition (it survives a power cycle)
    image = (out / manifest["firmware"]["image"]).read_bytes()
    assert _readfs_file(image, "edgernn_l3.bin") == blob
    assert any("l3:edgernn_step_op1_w_rec 262144 B in l3" in m for m in result["messages"])
    # NNTool's script names one fused LSTM: for two, the build says so and writes no NNTool flow
    assert any(m.startswith("no NNTool flow: ") for m in result["messages"]) and not (out / "nntool").exists()


def test_validates_in_gvsoc_with_weights_streamed_from_l3(built):
    from edgernn.testing.zoo import trajectories

    from edgernn.validate.run import validate

    out, _ = built
    report = validate(out, data=trajectories(1, STEPS, N_IN, 5))
    assert report["pass"], report
    assert report["steps"] == STEPS and report["reference"]["mismatches"] == 0
    assert report["device"]["l3_bytes_per_step"] == 4 * 256 * 256
    assert report["device"]["cycles_per_step"] > 0


def _run(elf, board, xs):
    """One session with a firmware in GVSOC: its outputs and states, or the LinkError it ends with."""
    from edgernn.link import LinkClient
    from edgernn.targets import device as devices

    with devices.start(elf, board) as device:
        with LinkClient.open(device.url, baud=board["serial"]["baud"], timeout=board["serial"]["timeout_s"],
                             device_gone=lambda: None if device.running() else "it exited") as link:
            link.wait_ready(board["emulator"]["start_timeout_s"])
            link.hello()
            return link.run(xs, states="every")


def test_the_weights_are_found_where_a_radio_flash_puts_the_image_and_stale_ones_are_refused(built, tmp_path):
    """The AI-deck bootloader writes a radio-flashed image at 0x40000, behind its own image, whose partition
    table is at 0; JTAG writes it at 0. The firmware tries each base of EDGERNN_L3_IMAGE_BASES and takes the
    file only with the blob's size and checksum. This model's boot code ends past 0x40000, so the stand-in
    uses a build whose second base is 0x80000: a flash whose first 0x80000 bytes are the image's own start
    (it boots; its table at 0 points at a readfs that is not there, since the second copy's header lies
    there) and the whole image again at 0x80000. The run gives the same bytes as the plain image's. With one
    byte of that copy's blob changed, init fails and says so, rather than running on wrong weights."""
    from edgernn.testing.zoo import trajectories

    from edgernn.targets import device as devices
    from edgernn.tflite.oracle import quantize

    base = 0x80000
    out, _ = built
    board = devices.load_board(BOARD)
    manifest = json.loads((out / "manifest.json").read_text())
    xs = quantize(trajectories(1, 12, N_IN, 6)[0], manifest["inputs"][0])
    plain = _run(devices.find_firmware(out, board), board, xs)
    elf = devices.build_elf(out / "firmware", board, tmp_path / "radio",
                            make_vars={"EDGERNN_L3_IMAGE_BASES": f"0x0u,0x{base:x}u"}).elf
    with devices.start(elf, board):
        pass                                   # gapy prepares this build's flash image for GVSOC
    path = elf.parent / "gvsoc" / "target.board.devices.flash.img"
    image = path.read_bytes()
    table = struct.unpack_from("<I", image, 0)[0]
    at = image.index((out / "firmware" / "edgernn_l3.bin").read_bytes())
    assert table + 32 * 4 < base <= at          # boot code and table below the second copy, readfs above
    radio = image[:base] + image                # the image file is gapy's size; GVSOC's flash model pads it
    path.write_bytes(radio)
    moved = _run(elf, board, xs)
    assert np.array_equal(moved.outputs, plain.outputs) and np.array_equal(moved.states, plain.states)
    stale = bytearray(radio)
    stale[base + at + 7] ^= 0x01
    path.write_bytes(bytes(stale))
    # edgernn_init fails: the firmware says so, to a host that comes late too
    with devices.start(elf, board) as device:
        assert b"stale L3 weights" in _failed_init_lines(device, board)


@pytest.mark.parametrize("case", ["stale", "missing"])
def test_a_failed_init_reaches_the_host_as_its_reason(built, case):
    """The plain image, its blob changed (stale) or its readfs file renamed (missing): the loader says why
    in one line, repeated for a host that comes late, and validate raises a DeviceInitError (exit code 3) with that
    reason, not a lost link. At base 0x40000, where no image starts after this JTAG-like layout, the
    loader reads the image's own bytes as offsets: it must pass over them (GVSOC's flash model crashed
    the simulator with SIGSEGV on an address beyond the flash, and the line was never sent)."""
    from edgernn.testing.zoo import trajectories

    from edgernn.errors import DeviceInitError
    from edgernn.targets import device as devices
    from edgernn.validate.run import validate

    out, _ = built
    board = devices.load_board(BOARD)
    elf = devices.find_firmware(out, board)
    with devices.start(elf, board):
        pass                                   # gapy prepares the flash image beside the ELF
    path = elf.parent / "gvsoc" / "target.board.devices.flash.img"
    plain = path.read_bytes()
    image = bytearray(plain)
    if case == "stale":
        image[image.index((out / "firmware" / "edgernn_l3.bin").read_bytes()) + 7] ^= 0x01
        want = r"stale L3 weights: the flash's edgernn_l3\.bin does not match this firmware's checksum"
    else:
        at = image.index(b"edgernn_l3.bin", _readfs_partition(plain))       # its name in the readfs header
        image[at:at + 14] = b"edgernn_l4.bin"
        want = r"no L3 weights: no edgernn_l3\.bin of this firmware's size in the flash image's readfs"
    try:
        path.write_bytes(bytes(image))
        with devices.start(elf, board) as device:
            assert re.search(want.encode(), _failed_init_lines(device, board))
        with pytest.raises(DeviceInitError, match=r"failed at init \(edgernn_init\(\)\): " + want) as caught:
            validate(out, data=trajectories(1, 4, N_IN, 5))
        assert caught.value.exit_code == 3 and "\n" not in str(caught.value)
    finally:
        path.write_bytes(plain)


def _failed_init_lines(device, board) -> bytes:
    """What a firmware whose init failed sends to a host that connects late: it does not exit while no host
    is there (GVSOC's UART server would lose the lines with the simulation), it sends its lines once the
    host connects, and again whenever the host sends something, and it stays
    (templates/targets/gap8/hal/init_failed.h). Returns what it sent after the host's first byte."""
    from edgernn.link.client import open_port

    timeout = board["emulator"]["start_timeout_s"]
    with pytest.raises(subprocess.TimeoutExpired):
        device.process.wait(3)                  # a host that comes late: the firmware waits for it
    port = open_port(device.url, board["serial"]["baud"])
    try:
        heard, deadline = b"", time.monotonic() + timeout
        while b"INIT FAILED~~~" not in heard and time.monotonic() < deadline:
            heard += port.read(4096)
        assert b"INIT FAILED: " in heard and b"INIT FAILED~~~" in heard
        port.write(b"\x00")
        again = b""
        while b"INIT FAILED~~~" not in again and time.monotonic() < deadline:
            again += port.read(4096)
        assert device.process.poll() is None    # it stays, for the next host
    finally:
        port.close()
    assert b"INIT FAILED: " in again and b"INIT FAILED~~~" in again
    return again


def test_a_camera_cnn_and_gru_over_l2_streams_two_fully_connected_and_validates(camera_built):
    """The Dense behind the flatten (3,072 x 128) and the GRU's recurrent matrix (256 x 768) go to L3, the
    largest first, until L2 fits; both stream each step, one chunk of each in flight while the other's
    computes."""
    from edgernn.testing.frames_zoo import moving_blobs

    from edgernn.backend.streaming import blob_checksum
    from edgernn.validate.run import validate

    out = camera_built
    manifest = json.loads((out / "manifest.json").read_text())
    placement = manifest["placement"]
    l3 = {k: v["bytes"] for k, v in placement["items"].items() if v["memory"] == "l3"}
    assert sorted(l3.values()) == [256 * 768, 3072 * 128]
    used_l2 = sum(v["bytes"] for v in placement["items"].values() if v["memory"] == "l2")
    assert used_l2 <= placement["budgets"]["l2"] < manifest["weight_bytes"]
    streaming = placement["streaming"]
    assert streaming["l3_bytes_per_step"] == sum(l3.values())
    assert [c["kernel"] for c in streaming["calls"]] == ["edgernn_l3_fully_connected_s8"] * 2
    fw = out / "firmware"
    blob = (fw / "edgernn_l3.bin").read_bytes()
    model_c = (fw / "model.c").read_text()
    assert model_c.count("edgernn_l3_fully_connected_s8(&edgernn_step_op") == 2
    assert f"edgernn_l3_open({len(blob)}u, 0x{blob_checksum(blob):08x}u)" in model_c
    image = (out / manifest["firmware"]["image"]).read_bytes()
    assert _readfs_file(image, "edgernn_l3.bin") == blob
    report = validate(out, data=moving_blobs(1, STEPS, 24, 32, seed=5))
    assert report["pass"], report
    assert report["steps"] == STEPS and report["reference"]["mismatches"] == 0
    assert report["reference"]["state_mismatches"] == 0
    assert report["device"]["l3_bytes_per_step"] == sum(l3.values())
