"""A firmware whose edgernn_init() fails says so in a text line before it stops (protocol.INIT_FAILED); the
host reports that line, with its reason, as one DeviceInitError (exit code 3) instead of a lost link or a
silence. No firmware here: a port that plays back what such a device sends."""

from __future__ import annotations

import time

import pytest

from edgernn.errors import DeviceInitError, LinkError
from edgernn.link import LinkClient
from edgernn.link import protocol as P

STALE = b"~~~EDGERNN INIT FAILED: stale L3 weights: the flash's edgernn_l3.bin does not match~~~"
PLAIN = b"~~~EDGERNN INIT FAILED~~~"


@pytest.mark.parametrize("text, reason", [
    (b"", None),
    (b"\x00\n~~~EDGERNN SERVER DONE~~~\n", None),
    (b"\n" + PLAIN + b"\n", ""),                                              # the main task's line alone
    (b"\x00\n" + STALE + b"\n\n" + PLAIN + b"\n", "stale L3 weights: the flash's edgernn_l3.bin does not match"),
    (b"\n" + PLAIN + b"\n\n" + STALE + b"\n", "stale L3 weights: the flash's edgernn_l3.bin does not match"),
    (b"~~~EDGERNN INIT FAILED: ~~~\n" + PLAIN, ""),                           # an empty reason is none
    (b"~~~EDGERNN INIT FAILED: no room~~~\r\n", "no room"),
    (b"~~~EDGERNN INIT FAILED: cut off", None),                               # a line cut before its end
    # the line's first bytes damaged on the way (seen in GVSOC after a quiet spell): its reason is kept
    (b"\x00\x14\xfe\xfe\xfe\x85DGERNN INIT FAILED: no L3 weights~~~\n\n" + PLAIN + b"\n", "no L3 weights"),
])
def test_the_init_failure_line_and_its_reason(text, reason):
    assert P.init_failure(text) == reason


class PlaybackPort:
    """Gives ``chunks`` one read at a time; then nothing (``then="silent"``) or a lost connection
    (``then="disconnect"``, as a socket whose simulator exited)."""

    def __init__(self, chunks: list[bytes], then: str = "disconnect"):
        self.chunks = list(chunks)
        self.then = then
        self.written = b""

    def read(self, n: int) -> bytes:
        if self.chunks:
            chunk = self.chunks.pop(0)
            if len(chunk) > n:
                self.chunks.insert(0, chunk[n:])
                chunk = chunk[:n]
            return chunk
        if self.then == "disconnect":
            raise OSError("read failed: socket disconnected")
        time.sleep(0.01)       # a port's read timeout
        return b""

    @property
    def in_waiting(self) -> int:
        return len(self.chunks[0]) if self.chunks else 0

    def write(self, data: bytes) -> int:
        self.written += data
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def _gone_after(seconds: float):
    at = time.monotonic() + seconds

    def gone():
        return "its gvsoc_gap8 firmware process ended (exit status 2)" if time.monotonic() >= at else None

    return gone


@pytest.mark.parametrize("chunks, then, gone, error, match", [
    # the stale-blob case in GVSOC: ready byte, the loader's reason and the main task's line, then the socket closes
    ([b"\x00", b"\n" + STALE + b"\n", b"\n" + PLAIN + b"\n"], "disconnect", None, DeviceInitError,
     r"failed at init \(edgernn_init\(\)\): stale L3 weights: .*; reading from sim failed"),
    # the process is seen gone first: its status is said with the reason
    ([b"\x00", b"\n" + STALE + b"\n" + PLAIN + b"\n"], "silent", 0.2, DeviceInitError,
     r"stale L3 weights: .*; its gvsoc_gap8 firmware process ended \(exit status 2\)"),
    # a firmware that gives no reason (the main task's line only)
    ([b"\x00", b"\n" + PLAIN + b"\n"], "disconnect", None, DeviceInitError,
     r"failed at init \(edgernn_init\(\)\): it printed ~~~EDGERNN INIT FAILED~~~ and no reason"),
    # the line still on its way when the process is seen gone: read before the verdict
    ([b"\x00", b"", b"", b"\n" + STALE + b"\n"], "silent", 0.0, DeviceInitError, r"stale L3 weights"),
    # a link lost with no such line stays a plain link fault
    ([b"\x00", b"\n~~~EDGERNN LINK LOST~~~\n"], "disconnect", None, LinkError,
     r"^reading from sim failed: read failed: socket disconnected$"),
    ([b"\x00"], "silent", 0.2, LinkError, r"stopped while edgernn waited for its answer to HELLO"),
])
def test_a_device_that_stops_after_its_init_failed_is_reported_with_its_reason(chunks, then, gone, error, match):
    port = PlaybackPort(chunks, then)
    link = LinkClient(port, url="sim", timeout=0.5, retries=1,
                      device_gone=_gone_after(gone) if gone is not None else None)
    with pytest.raises(LinkError, match=match) as caught:
        link.wait_ready(5.0, probe_after=5.0)
        link.hello()
    assert type(caught.value) is error
    assert caught.value.exit_code == 3 and "\n" not in str(caught.value)


def test_a_device_that_stays_after_its_init_failed_is_reported_without_waiting_out_the_retries():
    """The AI-deck firmware stays after a failed init, repeating its lines to whatever the host sends
    (templates/targets/gap8/hal/init_failed.h): with the lines heard and no answer for INIT_FAILED_QUIET_S, the
    error is the device's reason, not the end of every retry's 60 s timeout (which would say 'no valid
    answer ... after 3 attempts')."""
    port = PlaybackPort([b"\x00", b"\n" + STALE + b"\n", b"\n" + PLAIN + b"\n"], then="silent")
    link = LinkClient(port, url="socket://127.0.0.1:5000", timeout=60.0, retries=2,
                      device_gone=lambda: None)
    link.wait_ready(5.0)
    with pytest.raises(DeviceInitError, match=r"failed at init \(edgernn_init\(\)\): stale L3 weights: .*; "
                                              r"it answered no HELLO \(handshake\) within 2 s$"):
        link.hello()
    assert link.retry_count == 0


def test_a_silent_device_whose_init_failure_was_heard_is_reported_so():
    """A real board opened before it boots: the line crosses the UART, then the firmware halts and answers
    nothing. The HELLO that gets no answer ends on the line it heard, not on a bare silence."""
    port = PlaybackPort([b"\x00", b"\n" + PLAIN + b"\n"], then="silent")
    link = LinkClient(port, url="/dev/ttyUSB0", timeout=0.1, retries=1)
    link.wait_ready(5.0)
    with pytest.raises(DeviceInitError, match=r"ttyUSB0 failed at init .*gave no valid answer to HELLO"):
        link.hello()


@pytest.mark.parametrize("status, says", [
    (None, None),
    (0, "its gvsoc_gap8 firmware process ended (exit status 0)"),
    (2, "its gvsoc_gap8 firmware process ended (exit status 2, the status of a firmware whose edgernn_init() failed)"),
    (-11, "its gvsoc_gap8 firmware process ended (killed by signal 11)"),
])
def test_a_started_board_that_ended_says_how(status, says):
    """What validate says of a board it started whose process ended: exit status 2 is a failed init's
    (the line itself may not have reached the host, when the firmware ended before the port opened)."""
    from types import SimpleNamespace

    from edgernn.validate.run import _gone_check

    device = SimpleNamespace(process=SimpleNamespace(poll=lambda: status), board=SimpleNamespace(name="gvsoc_gap8"))
    assert _gone_check(device)() == says


def test_an_init_failure_line_before_an_answer_is_not_the_reason_of_a_later_fault():
    """A board that printed the line, then was reset and answered: a later lost link is a plain one."""
    from edgernn.link.framing import encode_frame

    import numpy as np

    hello = P.build_hello(P.DeviceInfo(2, np.dtype("<i1"), np.dtype("<i1"), 3, 2, 8, 4096, "host", "a" * 64, 0, 0, 4096))
    link = LinkClient(PlaybackPort([]), url="sim", timeout=0.5, retries=1)   # the line reads as a corrupt frame
    seq = link._seq
    # the line, the reset board's ready byte, its answer
    link.port.chunks = [b"\n" + PLAIN + b"\n", b"\x00", encode_frame(P.HELLO | P.REPLY, seq, hello)]
    link.hello()
    with pytest.raises(LinkError, match="^reading from sim failed") as caught:
        link.reset()
    assert type(caught.value) is LinkError
