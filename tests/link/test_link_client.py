"""The link against the toy-model firmware on the host board: handshake, streaming, states, errors."""

from __future__ import annotations

import os
import tty

import numpy as np
import pytest

from edgernn.targets import device as devices
from edgernn.errors import LinkError
from edgernn.link import LinkClient
from edgernn.link import protocol as P
from toy import MODEL_SHA256, STATE_BYTES, run_toy

pytestmark = pytest.mark.toolchain


def toy_inputs(steps: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(-127, 128, (steps, 3)).astype(np.int8)


def expected_states(states: list[bytes]) -> np.ndarray:
    return np.frombuffer(b"".join(states), dtype=np.uint8).reshape(-1, STATE_BYTES)


def test_handshake_reports_the_model_and_layout(host_device):
    with LinkClient.open(host_device.url) as link:
        info = link.hello()
    assert info.model_sha256 == MODEL_SHA256
    assert (info.input_size, info.output_size, info.state_bytes) == (3, 2, 8)
    assert info.board == "host" and info.protocol_version == 2
    assert info.input_dtype == np.int8 and (info.max_frame, info.answer_limit) == (4096, 4096)
    # The toy model has no edgernn_target(): its target block says "not reported".
    assert (info.workers, info.target_flags) == (0, 0)
    assert info.describe_target() == {"workers": None, "simd_dot": None, "offloaded": None}


@pytest.mark.parametrize("workers, flags, target", [
    (1, 0, {"workers": 1, "simd_dot": False, "offloaded": False}),
    (8, P.TARGET_SIMD_DOT | P.TARGET_OFFLOADED, {"workers": 8, "simd_dot": True, "offloaded": True}),
    (0, 0, {"workers": None, "simd_dot": None, "offloaded": None}),
])
def test_hello_target_block_round_trips(workers, flags, target):
    info = P.DeviceInfo(2, np.dtype("<i1"), np.dtype("<i1"), 3, 2, 8, 4096, "gvsoc_gap8", "a" * 64, workers, flags,
                        4096)
    payload = P.build_hello(info)
    assert P.parse_hello(payload) == info and P.parse_hello(payload).describe_target() == target
    # Version 2 always carries the target block: an answer cut before it, or a byte more or less, is refused.
    for bad in (payload[:-4], payload[:-1], payload + b"\0"):
        with pytest.raises(ValueError, match="wrong length"):
            P.parse_hello(bad)


CAMERA = 324 * 244   # a full AI-deck camera frame, 324x244x1


@pytest.mark.parametrize("in_dtype, n_in, n_out, state_bytes, max_frame, answer", [
    ("<i1", 3, 2, 8, 4096, 4096),                         # a small vector model: the board's frames
    ("<i1", 65_535, 2, 0, 65_546, 4096),                  # the most inputs version 1 could say
    ("<i1", 65_536, 2, 0, 65_547, 4096),                  # one more: past 16 bits
    ("<i1", CAMERA, 10, 64, 8 + 3 + CAMERA, 4096),        # a 324x244x1 int8 camera frame, 79,056 bytes
    ("<i2", CAMERA, 10, 64, 8 + 3 + 2 * CAMERA, 4096),    # the same frame in int16
    ("<f4", 4, 70_000, 1 << 20, 4096, 8 + 11 + 280_000 + (2 << 20)),  # a large answer: only the sent frame grows
    ("<i1", 0xFFFF_FFFF, 0xFFFF_FFFF, 0xFFFF_FFFF, 0xFFFF_FFFF, 0xFFFF_FFFF),  # every 32-bit field at its top
])
def test_hello_sizes_and_frame_limits_are_32_bit(in_dtype, n_in, n_out, state_bytes, max_frame, answer):
    """Protocol version 2: HELLO's input and output sizes and both frame limits are uint32 at fixed offsets."""
    import struct

    info = P.DeviceInfo(2, np.dtype(in_dtype), np.dtype("<i1"), n_in, n_out, state_bytes, max_frame, "host",
                        "b" * 64, 1, 0, answer)
    payload = P.build_hello(info)
    assert len(payload) == 4 + 5 * 4 + 1 + len("host") + 64 + 4
    assert struct.unpack_from("<BBBBIIIII", payload) == (2, np.dtype(in_dtype).itemsize, 1, 0, n_in, n_out,
                                                          state_bytes, max_frame, answer)
    assert P.parse_hello(payload) == info and P.hello_version(payload) == 2


@pytest.mark.parametrize("n_in, answer, flags, steps", [
    (CAMERA, 4096, 0, 1),                          # a camera frame: one step per frame, exactly
    (CAMERA, 4096, P.STATE_EVERY, 1),
    (3, 4096, P.STATE_EVERY, (4096 - 8 - 7) // (2 + 4 + 8)),
    (3, 1 << 24, 0, 0xFFFF),                       # frames that would hold more: STEP's 16-bit count
])
def test_steps_per_frame_fit_the_device_frames_both_ways(n_in, answer, flags, steps):
    info = P.DeviceInfo(2, np.dtype("<i1"), np.dtype("<i1"), n_in, 2, 8, max(4096, 8 + 3 + n_in) if n_in > 3
                        else 1 << 24, "host", "a" * 64, 1, 0, answer)
    client = LinkClient(None, url="test")
    client.info = info
    n = client.max_steps_per_frame(flags)
    assert n == steps
    assert P.step_request_size(n, info) <= info.max_frame - 8 and P.step_reply_size(n, info, flags) <= answer - 8


@pytest.mark.parametrize("max_frame, answer, flags, needle", [
    (4096, 4096, 0, r"device's 4096-byte frames \(79056 bytes of input per step\)"),
    (8 + 3 + CAMERA - 1, 4096, 0, r"device's 79066-byte frames \(79056 bytes of input per step\)"),
    (8 + 3 + CAMERA, 28, P.STATE_EVERY, r"device's 28-byte frames \(14 bytes of answer per step\)"),
])
def test_a_step_that_does_not_fit_the_device_frames_is_one_line(max_frame, answer, flags, needle):
    """A device built with frames smaller than one step (EDGERNN_LINK_FIXED_FRAME=1) is refused before any
    step is sent, in one line that says which direction does not fit."""
    client = LinkClient(None, url="test")
    client.info = P.DeviceInfo(2, np.dtype("<i1"), np.dtype("<i1"), CAMERA, 2, 8, max_frame, "ai_deck", "a" * 64,
                               8, 0, answer)
    with pytest.raises(LinkError, match=needle) as err:
        client.max_steps_per_frame(flags)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("flags", [P.TEAM_CYCLES, P.TEAM_CYCLES | P.STATE_EVERY, P.TEAM_CYCLES | P.STATE_LAST,
                                   P.STATE_EVERY])
def test_a_step_answer_carries_the_team_cycles_when_asked(flags):
    """STEP flag TEAM_CYCLES: each step's record holds the team's own count right after the step's count."""
    import struct

    info = P.DeviceInfo(2, np.dtype("<i1"), np.dtype("<i1"), 3, 2, 8, 4096, "gvsoc_gap8", "a" * 64, 8,
                        P.TARGET_TEAM_CYCLES)
    n, team = 3, bool(flags & P.TEAM_CYCLES)
    payload = struct.pack("<IHB", 10, n, flags)
    for i in range(n):
        payload += bytes([i, 100 + i]) + struct.pack("<I", 5000 + i)
        payload += struct.pack("<I", 4000 + i) if team else b""
        payload += bytes(range(8 * i, 8 * i + 8)) if flags & P.STATE_EVERY else b""
    payload += bytes(8) if flags & P.STATE_LAST else b""
    assert len(payload) == P.step_reply_size(n, info, flags)
    batch = P.parse_step_reply(payload, info, n, flags)
    assert batch.first_step == 10 and batch.outputs.tolist() == [[0, 100], [1, 101], [2, 102]]
    assert batch.cycles.tolist() == [5000, 5001, 5002]
    assert (batch.team_cycles.tolist() if team else batch.team_cycles) == ([4000, 4001, 4002] if team else None)
    if flags & P.STATE_EVERY:
        assert batch.states == [bytes(range(8 * i, 8 * i + 8)) for i in range(n)]
    with pytest.raises(ValueError, match="expected"):
        P.parse_step_reply(payload + b"\0", info, n, flags)


def test_the_host_asks_for_team_cycles_only_from_a_device_that_offers_them(host_device):
    """The host firmware's HAL has no team counter: its HELLO does not offer one, the host does not ask,
    and the run carries none."""
    with LinkClient.open(host_device.url) as link:
        info = link.hello()
        result = link.run(toy_inputs(20), states="every")
    assert not info.target_flags & P.TARGET_TEAM_CYCLES
    assert result.team_cycles is None and len(result.cycles) == 20


@pytest.mark.parametrize("states", ["every", "last", "none"])
def test_streamed_steps_match_the_model_step_by_step(host_device, states):
    xs = toy_inputs(1500)
    ys, st = run_toy(xs)
    with LinkClient.open(host_device.url) as link:
        link.hello()
        result = link.run(xs, states=states, steps_per_frame=97)
    assert np.array_equal(result.outputs, ys)
    assert result.frames == -(-1500 // 97)
    assert result.retries == 0
    if states == "every":
        assert np.array_equal(result.states, expected_states(st))
    if states != "none":
        assert result.last_state == st[-1]
    assert result.cycles.shape == (1500,)


def test_a_second_run_starts_from_reset_and_a_second_session_works(host_device):
    xs = toy_inputs(300, seed=3)
    ys, _ = run_toy(xs)
    for _ in range(2):
        with LinkClient.open(host_device.url) as link:
            link.hello()
            assert np.array_equal(link.run(xs).outputs, ys)
            assert np.array_equal(link.run(xs).outputs, ys)


def test_frames_fill_the_device_limit(host_device):
    with LinkClient.open(host_device.url) as link:
        link.hello()
        per_frame = link.max_steps_per_frame(P.STATE_EVERY)
        assert P.step_reply_size(per_frame, link.info, P.STATE_EVERY) <= 4096 - 8
        assert P.step_reply_size(per_frame + 1, link.info, P.STATE_EVERY) > 4096 - 8
        result = link.run(toy_inputs(2 * per_frame + 1))
    assert result.frames == 3


def test_bye_ends_the_firmware_on_its_fixed_line(toy_firmware):
    device = devices.start(toy_firmware("host"), "host")
    try:
        with LinkClient.open(device.url) as link:
            link.hello()
            assert link.bye(done_line="~~~EDGERNN SERVER DONE~~~")
        assert device.process.wait(10) == 0
    finally:
        device.stop()


def test_a_failing_step_is_reported_with_its_position(host_device):
    xs = toy_inputs(10)
    xs[6] = -128  # the toy model refuses this input
    with LinkClient.open(host_device.url) as link:
        link.hello()
        with pytest.raises(LinkError, match=r"edgernn_step\(\) failed at step 6"):
            link.run(xs)


def test_a_port_that_does_not_exist():
    with pytest.raises(LinkError, match="cannot open port /dev/ttyEDGERNN_NONE"):
        LinkClient.open("/dev/ttyEDGERNN_NONE")


def test_a_device_that_does_not_answer():
    master, slave = os.openpty()
    tty.setraw(slave)
    try:
        with LinkClient.open(os.ttyname(slave), timeout=0.2, retries=1) as link:
            with pytest.raises(LinkError, match=r"gave no valid answer to HELLO .* after 2 attempts"):
                link.hello()
    finally:
        os.close(master)
        os.close(slave)


def test_a_protocol_version_mismatch_host_side(host_device):
    with LinkClient.open(host_device.url, version=3) as link:
        with pytest.raises(LinkError, match="protocol version mismatch: .* speaks version 2, this host speaks version 3"):
            link.hello()


@pytest.mark.parametrize("device_version", [1, 7], ids=["version-1-firmware", "unknown"])
def test_a_protocol_version_mismatch_device_side(toy_firmware, device_version):
    """Firmware of version 1 (16-bit HELLO sizes) or of any other version is refused in one line."""
    elf = toy_firmware("host", extra_cflags=[f"-DEDGERNN_LINK_VERSION={device_version}"])
    with devices.start(elf, "host") as device, LinkClient.open(device.url) as link:
        with pytest.raises(LinkError, match=f"protocol version mismatch: .* speaks version {device_version}, "
                                            "this host speaks version 2$"):
            link.hello()


def test_inputs_of_the_wrong_width(host_device):
    with LinkClient.open(host_device.url) as link:
        link.hello()
        with pytest.raises(LinkError, match=r"inputs of shape \(4, 5\) do not match the device's 3 inputs"):
            link.run(np.zeros((4, 5), np.int8))


def test_a_step_count_whose_input_bytes_wrap_32_bits_is_a_bad_length(tmp_path):
    """With 131,072-byte inputs (a 512x256 int8 frame), a STEP request that says 32,769 steps but carries
    one input would pass a multiplied length check (32,769 x 131,072 = 2^32 + 131,072 wraps to one input),
    leaving only the answer's size to stop 32,769 steps read past the frame. The device divides instead: a bad
    length, nothing run; a good request then runs."""
    import shutil

    from conftest import TOY_MODEL
    from edgernn.targets.board import load_board

    model = tmp_path / "wide_toy"
    shutil.copytree(TOY_MODEL, model)
    header = model / "model.h"
    header.write_text(header.read_text().replace("#define EDGERNN_INPUT_SIZE 3\n", "#define EDGERNN_INPUT_SIZE 131072\n"))
    board = tmp_path / "host_wide_frames.toml"
    board.write_text('extends = "host"\nname = "host"\n\n[toolchain]\ndefines = ["EDGERNN_LINK_MAX_FRAME=131100"]\n')
    elf = devices.build_elf(model, load_board(board), tmp_path / "build").elf
    x = np.zeros((1, 131072), np.int8)
    x[0, :3] = (5, -7, 9)
    with devices.start(elf, "host") as device, LinkClient.open(device.url, retries=0) as link:
        info = link.hello()
        assert (info.input_size, info.max_frame) == (131072, 131100)
        link.reset()
        wrapped = bytes([0]) + (32769).to_bytes(2, "little") + x.tobytes()
        with pytest.raises(LinkError, match="bad payload length"):
            link.request(P.STEP, wrapped)
        result = link.run(x, states="every")
    ys, st = run_toy(x[:, :3])
    assert np.array_equal(result.outputs, ys) and result.states[0].tobytes() == st[0]


def _pty():
    master, slave = os.openpty()
    tty.setraw(slave)
    tty.setraw(master)
    return master, slave


def _written(fd: int) -> bytes:
    import select

    seen = b""
    while select.select([fd], [], [], 0.05)[0]:
        seen += os.read(fd, 4096)
    return seen


def test_the_ready_byte_ends_the_wait_and_nothing_is_sent():
    master, slave = _pty()
    try:
        with LinkClient.open(os.ttyname(slave), timeout=0.2, retries=0) as link:
            os.write(master, b"\x00")      # after the open: opening a port drops what it held
            link.wait_ready(5.0, probe_after=0.5)
        assert _written(master) == b""
    finally:
        os.close(master)
        os.close(slave)


def test_a_lost_ready_byte_is_made_up_for_by_a_hello_the_device_answers(host_device):
    """The toy firmware sends no ready byte, as a board whose byte was lost (GVSOC under load drops it
    at times) or a board opened after its boot: the HELLO probe's answer ends the wait."""
    with LinkClient.open(host_device.url) as link:
        link.wait_ready(20.0, probe_after=0.2)
        assert link.frames_sent >= 1
        assert link.hello().model_sha256 == MODEL_SHA256


def test_a_silent_device_is_probed_then_given_up():
    master, slave = _pty()
    try:
        with LinkClient.open(os.ttyname(slave), timeout=0.2, retries=0) as link:
            with pytest.raises(LinkError, match=r"sent nothing and answered no HELLO within 1 s of starting"):
                link.wait_ready(1.0, probe_after=0.3)
        # Probed with HELLO, more than once, each a whole frame ending in its delimiter.
        sent = _written(master)
        assert sent.count(b"\x00") >= 2
    finally:
        os.close(master)
        os.close(slave)


def test_a_socket_port_keeps_what_arrived_while_it_opened(monkeypatch):
    """GVSOC sends its queued ready byte the moment it accepts the connection. pyserial empties a port's
    input at the end of its open; the connection here waits until the byte is in, so that it arrives
    before that emptying, as it does now and then on a loaded machine: open_port keeps it."""
    import select
    import socket
    import threading

    import serial.urlhandler.protocol_socket as protocol_socket

    from edgernn.link import open_port

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def serve():
        conn, _ = server.accept()
        conn.sendall(b"\x00")
        conn.recv(1)           # until the client closes
        conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    connect = socket.create_connection

    def connect_then_wait(*args, **kwargs):
        sock = connect(*args, **kwargs)
        select.select([sock], [], [], 5.0)
        return sock

    monkeypatch.setattr(protocol_socket.socket, "create_connection", connect_then_wait)
    port = open_port(f"socket://127.0.0.1:{server.getsockname()[1]}")
    try:
        assert port.read(1) == b"\x00"
    finally:
        port.close()
        thread.join(5)
        server.close()
