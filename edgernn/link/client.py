"""Host side of the validation link: requests with sequence numbers, retries, streaming of steps.

Every fault ends as :class:`edgernn.errors.LinkError` with a one-line message. A retry resends the
same sequence number, and the device answers a repeat from its cache without running anything again.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

import numpy as np

from edgernn.errors import DeviceInitError, LinkError, NoAnswerError
from edgernn.link import protocol as P
from edgernn.link.framing import (NO_SEQ, VERSION, FrameError, FrameReader, FrameTimeout,
                                  encode_frame, MIN_FRAME)

DEFAULT_TIMEOUT = 2.0
DEFAULT_RETRIES = 6
WRITE_PIECE = 4096   # bytes per port write


@dataclass
class RunResult:
    """A sequence run on the device: outputs, cycles and states per step."""

    outputs: np.ndarray                 # (steps, output_size), device dtype
    cycles: np.ndarray                  # (steps,) uint32
    states: np.ndarray | None           # (steps, state_bytes) uint8, when asked every step
    last_state: bytes | None
    frames: int
    retries: int
    team_cycles: np.ndarray | None = None  # (steps,) uint32: the team's own count, where the device has one


def open_port(url: str, baud: int = 115200, **kwargs):
    """A pyserial port by URL (or, for ``cpx://HOST[:PORT]``, edgernn.link.cpx's port of the same interface);
    a missing port becomes a LinkError.

    A ``socket://`` port (GVSOC's UART) keeps what arrived while it was opened: pyserial empties the
    input of every port it opens, and a simulator that has queued its ready byte sends it the moment
    the connection is accepted, before that emptying. A serial device's input is emptied as usual:
    what it holds was sent before this session."""
    if url.startswith("cpx://"):
        from edgernn.link.cpx import CpxPort

        return CpxPort(url)             # the AI-deck's WiFi: CPX over TCP through its ESP32
    import serial

    try:
        port = serial.serial_for_url(url, baudrate=baud, timeout=0.05, write_timeout=5, do_not_open=True, **kwargs)
        if url.startswith("socket://"):
            port.reset_input_buffer = lambda: None      # for the open only
            try:
                port.open()
            finally:
                del port.reset_input_buffer
        else:
            port.open()
        return port
    except (serial.SerialException, ValueError, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise LinkError(f"cannot open port {url}: {reason}") from None


# With no ready byte for this long, wait_ready asks the device with HELLO.
READY_PROBE_AFTER_S = 5.0
# The last bytes read are kept, so that a device that stops can be asked what it said last (its init-failure
# line, protocol.INIT_FAILED); and for how long the bytes still on their way are read once it has stopped.
HEARD_BYTES = 512
LAST_WORDS_S = 0.5
# A device that said its init failed and then answers no request for this long is reported with its reason
# at once, not after every retry has timed out: the AI-deck firmware stays after a failed init.
INIT_FAILED_QUIET_S = 2.0


class LinkClient:
    """One host session with a device over an open pyserial-like port."""

    def __init__(self, port, *, url: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 retries: int = DEFAULT_RETRIES, version: int = VERSION, baud: int | None = None,
                 device_gone: Callable[[], str | None] | None = None):
        self.port = port
        self.url = url or getattr(port, "port", None) or "the port"
        self.timeout = timeout
        self.retries = retries
        self.version = version
        self.baud = baud or getattr(port, "baudrate", None) or 0
        self.info: P.DeviceInfo | None = None
        # For a device edgernn started itself: says why it is gone (its process ended), else None,
        # so a dead firmware is reported at once instead of after every retry has timed out.
        self.device_gone = device_gone
        # A random first sequence number, so a device that still caches the previous session's last
        # answer cannot mistake this session's first request for a repeat.
        self._seq = int.from_bytes(os.urandom(2), "little") % NO_SEQ
        self.retry_count = 0
        self.frames_sent = 0
        self.payload_bytes = 0
        self._heard = bytearray()
        self._reader = FrameReader(self._read, in_waiting=self._in_waiting)
        # A write may stall as long as a request may wait for its answer through every retry: a device that
        # takes no byte for that long is gone. A busy host can stop an emulated board for seconds.
        self.write_stall_s = self.timeout * (self.retries + 1)
        if hasattr(port, "write_timeout"):
            try:
                port.write_timeout = self.write_stall_s
            except (ValueError, OSError):
                pass

    @classmethod
    def open(cls, url: str, baud: int = 115200, **kwargs) -> "LinkClient":
        return cls(open_port(url, baud), url=url, baud=baud, **kwargs)

    def close(self) -> None:
        try:
            self.port.close()
        except Exception:  # noqa: BLE001 - closing a port that has gone is not a new fault
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- transport -----------------------------------------------------------------------------

    def _read(self, n: int) -> bytes:
        try:
            data = self.port.read(n)
        except Exception as exc:  # noqa: BLE001 - pyserial raises several types for a lost port
            raise self._init_failed(f"reading from {self.url} failed: {exc}", listen=False) or \
                LinkError(f"reading from {self.url} failed: {exc}") from None
        self._hear(data)
        return data

    def _hear(self, data: bytes) -> None:
        if data:
            self._heard += data
            del self._heard[:-HEARD_BYTES]

    def _init_failed(self, stopped: str, listen: bool = True) -> DeviceInitError | None:
        """The device's own word that its edgernn_init() failed, when what it sent last says so (with
        ``listen``, what is still on its way is read first, for LAST_WORDS_S at most); ``stopped`` says how
        the session ended."""
        if listen:
            deadline = time.monotonic() + LAST_WORDS_S
            while time.monotonic() < deadline:
                try:
                    data = self.port.read(4096)
                except Exception:  # noqa: BLE001 - the port closed: everything it had has been read
                    break
                self._hear(data)
        reason = P.init_failure(bytes(self._heard))
        if reason is None:
            return None
        if self.device_gone is not None:
            # a closed socket is seen before the process behind it is reaped: say how it ended, if soon known
            deadline = time.monotonic() + LAST_WORDS_S
            while not (gone := self.device_gone()) and time.monotonic() < deadline:
                time.sleep(0.02)
            stopped = gone or stopped
        said = reason or f"it printed {P.INIT_FAILED}~~~ and no reason"
        return DeviceInitError(f"the firmware on {self.url} failed at init (edgernn_init()): {said}; {stopped}")

    def _in_waiting(self) -> int:
        try:
            return self.port.in_waiting
        except Exception:  # noqa: BLE001
            return 1

    def _write(self, data: bytes) -> None:
        # In pieces: the port's write timeout (write_stall_s) then bounds a stall, a piece the device does not
        # take for that long, not the time a whole frame takes, which a camera frame's 79 KB into an emulated
        # UART can exceed.
        import serial

        try:
            for at in range(0, len(data), WRITE_PIECE):
                self.port.write(data[at : at + WRITE_PIECE])
            self.port.flush()
        except serial.SerialTimeoutException:
            gone = self.device_gone() if self.device_gone is not None else None
            raise LinkError(f"writing to {self.url} failed: the device took no byte of a {WRITE_PIECE}-byte piece "
                            f"for {self.write_stall_s:.0f} s" + (f" ({gone})" if gone else "")) from None
        except Exception as exc:  # noqa: BLE001
            raise LinkError(f"writing to {self.url} failed: {exc}") from None

    def _line_seconds(self, n_bytes: int) -> float:
        # 10 bit times per byte on a real UART; a pty or socket has no line rate worth counting.
        return n_bytes * 10.0 / self.baud if self.baud else 0.0

    def request(self, msg_type: int, payload: bytes = b"", expect_bytes: int = 0,
                what: str | None = None, *, timeout: float | None = None, retries: int | None = None) -> bytes:
        """Send one request and return its answer's payload, retrying with the same sequence number
        (``timeout`` and ``retries``: this request's own, instead of the session's)."""
        what = what or P.MESSAGE_NAMES.get(msg_type, hex(msg_type))
        seq = self._seq
        self._seq = (self._seq + 1) % NO_SEQ
        wire = encode_frame(msg_type, seq, payload, self.version)
        timeout = self.timeout if timeout is None else timeout
        timeout += self._line_seconds(len(wire) + expect_bytes + MIN_FRAME)
        retries = self.retries if retries is None else retries
        last_fault = "no answer"
        for attempt in range(retries + 1):
            if attempt:
                self.retry_count += 1
            self._write(wire)
            self.frames_sent += 1
            deadline = time.monotonic() + timeout
            while True:
                try:
                    frame = self._read_frame_watching(deadline, what)
                except FrameTimeout:
                    last_fault = f"no answer within {timeout:.1f} s"
                    break
                except FrameError as exc:
                    last_fault = f"corrupt answer ({exc.reason})"
                    break
                if frame.type == P.ERROR:
                    err = self._device_error(frame)
                    if frame.seq == NO_SEQ or err.code in P.TRANSIENT_ERRORS:
                        if frame.seq in (NO_SEQ, seq):
                            last_fault = f"device reported {err.name}"
                            break  # the device could not read our frame: resend it
                        continue
                    if frame.seq != seq:
                        continue
                    self._raise_device_error(err, what)
                if frame.seq != seq:
                    continue  # a late answer to an earlier attempt, already handled
                if frame.version != self.version:
                    raise LinkError(f"protocol version mismatch: the device on {self.url} speaks "
                                    f"version {frame.version}, this host speaks version {self.version}")
                if frame.type != msg_type | P.REPLY:
                    raise LinkError(f"device on {self.url} answered {what} with message type "
                                    f"0x{frame.type:02x}")
                self._heard.clear()     # the device answers: what it printed before is not why it stops later
                return frame.payload
        silent = f"device on {self.url} gave no valid answer to {what} after {retries + 1} attempts (last: {last_fault})"
        raise self._init_failed(silent, listen=False) or NoAnswerError(silent)

    def _read_frame_watching(self, deadline: float, what: str):
        """The next frame before deadline. A device that is gone raises LinkError within 0.2 s; one that
        said its init failed and has sent no frame for INIT_FAILED_QUIET_S since this wait began,
        DeviceInitError (the AI-deck firmware stays after a failed init, repeating why:
        templates/targets/gap8/hal/init_failed.h)."""
        began = time.monotonic()
        while True:
            gone = self.device_gone() if self.device_gone is not None else None
            if gone:
                stopped = f"the device on {self.url} stopped while edgernn waited for its answer to {what}: {gone}"
                raise self._init_failed(gone) or LinkError(stopped)
            try:
                return self._reader.read_frame(min(deadline, time.monotonic() + 0.2))
            except FrameTimeout:
                now = time.monotonic()
                if now - began >= INIT_FAILED_QUIET_S and P.init_failure(bytes(self._heard)) is not None:
                    raise self._init_failed(f"it answered no {what} within {INIT_FAILED_QUIET_S:.0f} s", listen=False)
                if now >= deadline:
                    raise

    def _device_error(self, frame) -> P.DeviceError:
        try:
            return P.parse_error(frame.payload)
        except ValueError as exc:
            raise LinkError(f"device on {self.url} sent a malformed error frame: {exc}") from None

    def _raise_device_error(self, err: P.DeviceError, what: str):
        if err.code == P.ERR_BAD_VERSION:
            raise LinkError(f"protocol version mismatch: the device on {self.url} speaks version "
                            f"{err.device_version}, this host speaks version {self.version}")
        if err.code == P.ERR_NOT_RESET:
            raise LinkError(f"device on {self.url} restarted during the sequence (it answered {what} "
                            "with 'no RESET since the device started'); its state is lost")
        if err.code == P.ERR_MODEL:
            raise LinkError(f"device on {self.url}: edgernn_step() failed at step {err.detail} of the "
                            f"batch sent with {what}")
        raise LinkError(f"device on {self.url} rejected {what}: {err.name} (detail {err.detail})")

    # --- messages ------------------------------------------------------------------------------

    def hello(self) -> P.DeviceInfo:
        payload = self.request(P.HELLO, what="HELLO (handshake)")
        # Every version's HELLO answer starts with its version; the rest of the layout is the version's own.
        device_version = P.hello_version(payload)
        if device_version is not None and device_version != self.version:
            raise LinkError(f"protocol version mismatch: the device on {self.url} speaks version "
                            f"{device_version}, this host speaks version {self.version}")
        try:
            self.info = P.parse_hello(payload)
        except ValueError as exc:
            raise LinkError(f"device on {self.url} gave a malformed handshake: {exc}") from None
        self._reader.max_frame = self.info.answer_limit
        return self.info

    def wait_ready(self, timeout: float, probe_after: float = READY_PROBE_AFTER_S) -> None:
        """Wait for the first byte of a device that announces it listens (ai_deck's HAL sends one 0x00,
        an idle delimiter, once its receive transfers are queued): a request sent before that is lost.

        The byte can be missed: a real board's is gone when its port is opened after the boot (and a
        socket port that emptied its input on opening, as pyserial does, missed GVSOC's; open_port
        keeps it). So once nothing has come for ``probe_after``
        seconds, the device is asked with HELLO, again every ``probe_after`` seconds: its answer is as
        good as the byte. A HELLO sent too early is lost like any byte before the receive transfers, and
        its late answer, if any, is skipped by its sequence number."""
        deadline = time.monotonic() + timeout
        probe_at = time.monotonic() + probe_after
        while time.monotonic() < deadline:
            gone = self.device_gone() if self.device_gone else None
            if gone:
                raise self._init_failed(gone) or LinkError(f"the device on {self.url} stopped before it was ready: {gone}")
            if self._read(1):
                return
            if time.monotonic() >= probe_at:
                if self._probe(min(probe_after, max(deadline - time.monotonic(), 0.1))):
                    return
                probe_at = time.monotonic() + probe_after
        silent = (f"the device on {self.url} sent nothing and answered no HELLO within {timeout:.0f} s of "
                  "starting (it did not boot, or its firmware does not send the ready byte)")
        raise self._init_failed(silent, listen=False) or LinkError(silent)

    def _probe(self, timeout: float) -> bool:
        """One HELLO, one attempt: whether the device answered. Any answer counts (an error, another
        protocol version): the HELLO that follows reports it."""
        try:
            self.request(P.HELLO, what="HELLO (is the device there?)", timeout=timeout, retries=0)
            return True
        except NoAnswerError:
            return False
        except DeviceInitError:
            raise
        except LinkError:
            if self.device_gone and self.device_gone():
                raise
            return True

    def reset(self) -> None:
        self.request(P.RESET)

    def bye(self, done_line: str | None = None, timeout: float = 5.0) -> bool:
        """End the session; the firmware exits. With ``done_line``, wait for the firmware to print it
        and return whether it did."""
        self.request(P.BYE)
        if not done_line:
            return True
        want = done_line.encode()
        seen = self._reader.take_buffered()
        deadline = time.monotonic() + timeout
        while want not in seen and time.monotonic() < deadline:
            seen += self._read(64)
        return want in seen

    def max_steps_per_frame(self, flags: int) -> int:
        """Steps per STEP frame: as many as the device's frames hold, its requests' (max_frame) and its
        answers' (answer_limit), at most STEP's 16-bit count."""
        info = self._require_info()
        per_in = info.input_size * info.input_dtype.itemsize
        per_out = info.output_size * info.output_dtype.itemsize + 4 + (4 if flags & P.TEAM_CYCLES else 0) + (
            info.state_bytes if flags & P.STATE_EVERY else 0)
        request_room = info.max_frame - MIN_FRAME - P.step_request_size(0, info)
        answer_room = info.answer_limit - MIN_FRAME - P.step_reply_size(0, info, flags)
        n = min(request_room // max(per_in, 1), answer_room // per_out, P.MAX_STEPS_PER_FRAME)
        if n < 1:
            # a frame model's step input (H*W*C elements) can be the part that does not fit
            if request_room < per_in:
                raise LinkError(f"one step does not fit in the device's {info.max_frame}-byte frames "
                                f"({per_in} bytes of input per step); build it with a larger EDGERNN_LINK_MAX_FRAME")
            raise LinkError(f"one step does not fit in the device's {info.answer_limit}-byte frames "
                            f"({per_out} bytes of answer per step); build it with a larger "
                            "EDGERNN_LINK_MAX_FRAME or ask for fewer states")
        return n

    def step(self, inputs: np.ndarray, flags: int) -> P.StepBatch:
        info = self._require_info()
        inputs = np.asarray(inputs)
        n = inputs.shape[0]
        payload = P.build_step_request(inputs, flags, info.input_dtype)
        expect = P.step_reply_size(n, info, flags)
        answer = self.request(P.STEP, payload, expect_bytes=expect, what=f"STEP ({n} steps)")
        try:
            batch = P.parse_step_reply(answer, info, n, flags)
        except ValueError as exc:
            raise LinkError(f"device on {self.url} gave a malformed STEP answer: {exc}") from None
        self.payload_bytes += len(payload) + len(answer)
        return batch

    def run(self, inputs: np.ndarray, states: str = "every", steps_per_frame: int | None = None,
            progress: Callable[[int], None] | None = None) -> RunResult:
        """RESET, then stream ``inputs`` (steps, input_size) through the device, frame after frame.

        ``states``: "every" (state bytes after each step), "last" (after the last step) or "none".
        """
        inputs = np.asarray(inputs)
        total = inputs.shape[0] if inputs.ndim else 0
        retries_before = self.retry_count
        outputs, cycles, team, state_rows = [], [], [], []
        last_state = None
        frames = 0
        for part in self.stream([inputs], total, states, steps_per_frame, progress):
            outputs.append(part.outputs)
            cycles.append(part.cycles)
            if part.team_cycles is not None:
                team.append(part.team_cycles)
            if part.states is not None:
                state_rows.append(part.states)
            if part.last_state is not None:
                last_state = part.last_state
            frames += part.frames
        info = self._require_info()
        state_array = None
        if states == "every":
            state_array = (np.concatenate(state_rows) if state_rows
                           else np.zeros((0, info.state_bytes), np.uint8))
            last_state = bytes(state_array[-1]) if len(state_array) else last_state
        return RunResult(np.concatenate(outputs) if outputs else np.zeros((0, info.output_size)),
                         np.concatenate(cycles) if cycles else np.zeros(0, np.uint32),
                         state_array, last_state, frames, self.retry_count - retries_before,
                         np.concatenate(team) if team else None)

    def stream(self, chunks: Iterable[np.ndarray], total: int, states: str = "every",
               steps_per_frame: int | None = None,
               progress: Callable[[int], None] | None = None) -> Iterator[RunResult]:
        """RESET, then stream one sequence of ``total`` steps, given as chunks of (steps, input_size):
        yields one RunResult per chunk, so the host keeps no more than a chunk of answers."""
        info = self._require_info()
        flags = {"every": P.STATE_EVERY, "last": P.STATE_LAST, "none": 0}[states]
        # the team's own count beside the step's, from a device that has one
        team_flag = P.TEAM_CYCLES if info.target_flags & P.TARGET_TEAM_CYCLES else 0
        flags |= team_flag
        per_frame = self.max_steps_per_frame(flags)
        if steps_per_frame:
            per_frame = min(per_frame, steps_per_frame)
        self.reset()
        done = 0
        for inputs in chunks:
            inputs = np.asarray(inputs)
            if inputs.ndim != 2 or inputs.shape[1] != info.input_size:
                raise LinkError(f"inputs of shape {inputs.shape} do not match the device's "
                                f"{info.input_size} inputs per step")
            retries_before = self.retry_count
            outputs, cycles, team, state_rows = [], [], [], []
            last_state = None
            frames = 0
            at = 0
            while at < len(inputs):
                n = min(per_frame, len(inputs) - at)
                frame_flags = flags & (P.STATE_EVERY | P.TEAM_CYCLES)
                if flags & P.STATE_LAST and done + n == total:
                    frame_flags |= P.STATE_LAST
                batch = self.step(inputs[at : at + n], frame_flags)
                if batch.first_step != done:
                    raise LinkError(f"device on {self.url} counts {batch.first_step} steps done where the "
                                    f"host sent {done}: a step was run twice or skipped")
                outputs.append(batch.outputs)
                cycles.append(batch.cycles)
                if batch.team_cycles is not None:
                    team.append(batch.team_cycles)
                if batch.states is not None:
                    state_rows.extend(batch.states)
                if batch.last_state is not None:
                    last_state = batch.last_state
                done += n
                at += n
                frames += 1
                if progress:
                    progress(n)
            state_array = None
            if flags & P.STATE_EVERY:
                state_array = np.frombuffer(b"".join(state_rows), dtype=np.uint8).reshape(len(inputs), info.state_bytes)
            yield RunResult(np.concatenate(outputs) if outputs else np.zeros((0, info.output_size)),
                            np.concatenate(cycles) if cycles else np.zeros(0, np.uint32),
                            state_array, last_state, frames, self.retry_count - retries_before,
                            np.concatenate(team) if team else None)

    def _require_info(self) -> P.DeviceInfo:
        if self.info is None:
            raise LinkError("no handshake yet: call hello() first")
        return self.info
