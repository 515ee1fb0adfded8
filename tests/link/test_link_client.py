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
    assert info.board == "host" and info.protocol_version == 1
    assert info.input_dtype == np.int8 and info.max_frame == 4096
    # The toy model has no edgernn_target(): its target block says "not reported".
    assert (info.workers, info.target_flags) == (0, 0)
    assert info.describe_target() == {"workers": None, "simd_dot": None, "offloaded": None}


@pytest.mark.parametrize("workers, flags, target", [
    (1, 0, {"workers": 1, "simd_dot": False, "offloaded": False}),
    (8, P.TARGET_SIMD_DOT | P.TARGET_OFFLOADED, {"workers": 8, "simd_dot": True, "offloaded": True}),
    (0, 0, {"workers": None, "simd_dot": None, "offloaded": None}),
])
def test_hello_target_block_round_trips(workers, flags, target):
    info = P.DeviceInfo(1, np.dtype("<i1"), np.dtype("<i1"), 3, 2, 8, 4096, "gvsoc_gap8", "a" * 64, workers, flags)
    payload = P.build_hello(info)
    assert P.parse_hello(payload) == info and P.parse_hello(payload).describe_target() == target
    # Firmware older than the target block ends after the SHA-256; one byte more or less is refused.
    assert P.parse_hello(payload[:-4]).describe_target()["workers"] is None
    for bad in (payload[:-1], payload + b"\0"):
        with pytest.raises(ValueError, match="wrong length"):
            P.parse_hello(bad)


@pytest.mark.parametrize("flags", [P.TEAM_CYCLES, P.TEAM_CYCLES | P.STATE_EVERY, P.TEAM_CYCLES | P.STATE_LAST,
                                   P.STATE_EVERY])
def test_a_step_answer_carries_the_team_cycles_when_asked(flags):
    """STEP flag TEAM_CYCLES: each step's record holds the team's own count right after the step's count."""
    import struct

    info = P.DeviceInfo(1, np.dtype("<i1"), np.dtype("<i1"), 3, 2, 8, 4096, "gvsoc_gap8", "a" * 64, 8,
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
    with LinkClient.open(host_device.url, version=2) as link:
        with pytest.raises(LinkError, match="protocol version mismatch: .* speaks version 1, this host speaks version 2"):
            link.hello()


def test_a_protocol_version_mismatch_device_side(toy_firmware):
    elf = toy_firmware("host", extra_cflags=["-DEDGERNN_LINK_VERSION=7"])
    with devices.start(elf, "host") as device, LinkClient.open(device.url) as link:
        with pytest.raises(LinkError, match="protocol version mismatch: .* speaks version 7, this host speaks version 1"):
            link.hello()


def test_inputs_of_the_wrong_width(host_device):
    with LinkClient.open(host_device.url) as link:
        link.hello()
        with pytest.raises(LinkError, match=r"inputs of shape \(4, 5\) do not match the device's 3 inputs"):
            link.run(np.zeros((4, 5), np.int8))


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
