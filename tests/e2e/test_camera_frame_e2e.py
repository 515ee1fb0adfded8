"""End to end: a model whose single input is a full AI-deck camera frame, 324x244x1 int8 (79,056 bytes,
past the 65,535 bytes that protocol version 1's HELLO could announce), built, run behind a real serial
link (a pty through pyserial) and validated byte-exact against the interpreter. A board that keeps its
small frames (EDGERNN_LINK_FIXED_FRAME=1) is refused by the host in one line."""

from __future__ import annotations

import json

import pytest

from edgernn.testing.frames_zoo import CAMERA, camera_gru, moving_blobs

pytestmark = [pytest.mark.slow, pytest.mark.toolchain]

FRAME_BYTES = 244 * 324
# sequences x steps per board: QEMU's UART takes a frame at 8-12 KB/s, 6-10 s a step; GVSOC's UART at 115200
# baud some 35 s of host time a step, after a GAP SDK build of about 80 s (bench/bench_camera_link.py)
RUNS = {"host": (2, 6), "qemu_riscv32": (1, 3), "gvsoc_gap8": (1, 1)}


def camera_frames(n_seq: int, steps: int, seed: int):
    return moving_blobs(n_seq, steps, *CAMERA, seed=seed)


@pytest.fixture(scope="module")
def camera_build(tmp_path_factory):
    """The model converted once (int8); firmware generated per board."""
    from edgernn.pipeline.convert import convert

    folder = tmp_path_factory.mktemp("camera")
    path = folder / "camera_gru.keras"
    camera_gru().save(path)
    made, placements = {}, {}

    def get(board: str):
        if board not in made:
            from edgernn.backend import generate_firmware
            from edgernn.targets.board import load_board

            out = tmp_path_factory.mktemp(f"camera_{board}".replace("/", "_")) / "out"
            convert(str(path), out, quant="int8", calib=camera_frames(2, 4, seed=1), board=board)
            facts = generate_firmware(out, load_board(board))
            made[board] = out
            placements[board] = facts.placement
        return made[board]

    get.placements = placements
    return get


def frames_in(out) -> tuple[int, int]:
    text = (out / "firmware" / "protocol.h").read_text()
    return tuple(int(text.split(f"#define EDGERNN_LINK_MODEL_{d}_FRAME ")[1].split()[0]) for d in ("RX", "TX"))


@pytest.mark.parametrize("board", ["host", pytest.param("qemu_riscv32", marks=pytest.mark.qemu), "gvsoc_gap8"])
def test_a_full_camera_frame_validates_byte_exact(camera_build, board, tmp_path):
    """On GAP8 (GVSOC) the frame must fit L2 with its receive buffer: the int8 input is read in place, so
    the firmware holds the frame once (79 KB), not in a second buffer."""
    from edgernn.validate.run import validate

    if board == "gvsoc_gap8":
        from conftest import require_gap_sdk
        from edgernn.targets.gap8 import sdk as gap_sdk

        require_gap_sdk()
        gap_sdk.build_gvsoc()
    out = camera_build(board)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["inputs"][0]["shape"] == [1, *CAMERA] and manifest["inputs"][0]["dtype"] == "int8"
    # the receive buffer grows to one STEP request with one frame; the send buffer stays the board's
    rx, tx = frames_in(out)
    assert rx == 8 + 3 + FRAME_BYTES and rx > 0xFFFF and tx < 4096
    if board == "gvsoc_gap8":   # the receive buffer past the board's 4 KiB frames is charged to L2's budget
        assert camera_build.placements[board]["items"]["link"] == {"memory": "l2", "bytes": rx - 4096}
    sequences, steps = RUNS[board]
    report = validate(out, data=camera_frames(sequences, steps, seed=3), json_path=tmp_path / "report.json")
    ref = report["reference"]
    assert (report["steps"], report["sequences"]) == (steps, sequences)
    assert ref["mismatches"] == 0 and ref["state_mismatches"] == 0, ref
    assert report["pass"] and report["link"]["protocol_version"] == 2
    assert report["link"]["device_frames"] == {"receives": rx, "sends": 4096}


def test_a_device_that_keeps_small_frames_is_refused_in_one_line(camera_build, tmp_path):
    """A board file (here one that extends host) whose defines keep the frames at 4 KiB builds the same
    firmware folder, and the host says in one line that one step's 79,056 bytes of input do not fit, before
    any step is sent."""
    from edgernn.errors import LinkError
    from edgernn.targets import device as devices
    from edgernn.targets.board import load_board
    from edgernn.validate.run import validate

    board_file = tmp_path / "host_small_frames.toml"
    board_file.write_text('extends = "host"\nname = "host_small_frames"\n\n[toolchain]\n'
                          'defines = ["EDGERNN_LINK_MAX_FRAME=4096", "EDGERNN_LINK_FIXED_FRAME=1"]\n')
    out = camera_build("host")
    elf = devices.build_elf(out / "firmware", load_board(board_file), tmp_path / "build").elf
    with devices.start(elf, "host") as device:
        with pytest.raises(LinkError, match=r"one step does not fit in the device's 4096-byte frames "
                                            rf"\({FRAME_BYTES} bytes of input per step\)") as err:
            validate(out, port=device.url, data=camera_frames(1, 2, seed=3), json_path=tmp_path / "report.json")
    assert "\n" not in str(err.value)


@pytest.mark.qemu
def test_a_board_stopped_mid_frame_for_longer_than_a_write_may_have_taken_still_validates(camera_build, tmp_path,
                                                                                          monkeypatch):
    """A busy host can stop an emulated board for seconds: QEMU is stopped (SIGSTOP) as the first camera frame
    starts on its way and continued (SIGCONT) 8 s later, so the link's writes stall until then. Writes wait as
    long as a request may (the board's timeout through every retry, LinkClient.write_stall_s), not a fixed 5 s,
    and the run still validates byte-exact."""
    import os
    import signal
    import threading

    from edgernn import procs
    from edgernn.link.client import LinkClient
    from edgernn.validate.run import validate

    out = camera_build("qemu_riscv32")
    stopped: list[float] = []
    write = LinkClient._write

    def stalling_write(self, data: bytes) -> None:
        if not stopped and len(data) > FRAME_BYTES:
            with procs._lock:
                qemu = next(p for p in procs._live.values() if "qemu-system" in " ".join(map(str, p.args)))
            os.kill(qemu.pid, signal.SIGSTOP)
            stopped.append(8.0)
            threading.Timer(8.0, os.kill, (qemu.pid, signal.SIGCONT)).start()
        write(self, data)

    monkeypatch.setattr(LinkClient, "_write", stalling_write)
    report = validate(out, data=camera_frames(1, 2, seed=4), json_path=tmp_path / "report.json")
    assert stopped, "no camera frame was sent"
    assert report["pass"] and report["reference"]["mismatches"] == 0, report["reference"]
