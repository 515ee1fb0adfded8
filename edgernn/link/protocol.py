"""Messages of the validation protocol (docs/protocol.md): types, error codes, payload layouts."""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

import numpy as np

from edgernn.link.framing import MIN_FRAME, VERSION

HELLO = 0x01
RESET = 0x02
STEP = 0x03
BYE = 0x04
REPLY = 0x80
ERROR = 0xFF

MESSAGE_NAMES = {HELLO: "HELLO", RESET: "RESET", STEP: "STEP", BYE: "BYE", ERROR: "ERROR"}

STATE_EVERY = 0x01
STATE_LAST = 0x02
TEAM_CYCLES = 0x04   # each step also carries the team's own count (a device whose HELLO has TARGET_TEAM_CYCLES)

ERR_BAD_CRC = 1
ERR_BAD_VERSION = 2
ERR_BAD_TYPE = 3
ERR_BAD_LENGTH = 4
ERR_TOO_LONG = 5
ERR_NOT_RESET = 6
ERR_MODEL = 7
ERR_BAD_COBS = 8

ERROR_NAMES = {
    ERR_BAD_CRC: "bad CRC",
    ERR_BAD_VERSION: "protocol version mismatch",
    ERR_BAD_TYPE: "unknown message type",
    ERR_BAD_LENGTH: "bad payload length",
    ERR_TOO_LONG: "frame too long",
    ERR_NOT_RESET: "no RESET since the device started",
    ERR_MODEL: "edgernn_step() failed",
    ERR_BAD_COBS: "bad COBS encoding",
}
# Errors the device sends for a frame it could not read: the host resends its outstanding request.
TRANSIENT_ERRORS = {ERR_BAD_CRC, ERR_BAD_COBS, ERR_BAD_LENGTH, ERR_TOO_LONG}

ELEMENT_DTYPES = {1: np.dtype("<i1"), 2: np.dtype("<i2"), 4: np.dtype("<f4")}

# version, element bytes in/out, reserved, input and output elements, state bytes, the largest raw frame the
# device receives and the largest it sends, board name length (version 1 had 16-bit sizes and one frame limit)
_HELLO_FIXED = struct.Struct("<BBBBIIIIIB")
_HELLO_TARGET = struct.Struct("<BBH")   # workers, flags, reserved
TARGET_SIMD_DOT = 0x01                  # the int8 dot products use SIMD instructions (GAP8 Xpulp)
TARGET_OFFLOADED = 0x02                 # the step runs on a cluster apart from the link's core
TARGET_TEAM_CYCLES = 0x04               # the device also counts the team's own cycles of a step (STEP flag TEAM_CYCLES)
_ERROR = struct.Struct("<BBH")
_STEP_REQUEST = struct.Struct("<BH")   # flags, steps in the frame
_STEP_REPLY = struct.Struct("<IHB")     # steps run before, steps in the frame, flags
_CYCLES = 4                             # the uint32 cycle count of each step
MAX_STEPS_PER_FRAME = 0xFFFF            # STEP's 16-bit count
HELLO_SIZE_LIMIT = 0xFFFFFFFF           # HELLO's 32-bit sizes and frame limits (version 1: 0xFFFF)

# The text line a firmware prints, outside any frame, when edgernn_init() fails, before it exits with status 2
# (templates/firmware/main.c; the AI-deck's does not exit but repeats its lines whenever the host sends
# something, templates/targets/gap8/hal/init_failed.h): ``~~~EDGERNN INIT FAILED~~~``. A part of
# the firmware that knows why prints it first with ``: <reason>`` (the AI-deck's L3 loader:
# ``~~~EDGERNN INIT FAILED: stale L3 weights: ...~~~``). docs/protocol.md, "When init fails".
INIT_FAILED = "~~~EDGERNN INIT FAILED"
INIT_FAILED_STATUS = 2
# Matched from "INIT FAILED" on: the line's first bytes, the first the UART sends after a quiet spell, can
# arrive damaged (in GVSOC, the missing-blob case's "\n~~~E" came shifted by a bit), and its reason is worth
# keeping then.
_INIT_FAILED_LINE = re.compile(rb"INIT FAILED(?:: ([^~\r\n]*))?~~~")


def init_failure(text: bytes) -> str | None:
    """Why the firmware's init failed, from bytes it sent: the first reason an init-failure line gives, ""
    when its lines give none, None when ``text`` has no such line."""
    reasons = [m.group(1) for m in _INIT_FAILED_LINE.finditer(bytes(text))]
    if not reasons:
        return None
    given = [r.decode("ascii", "replace").strip() for r in reasons if r and r.strip()]
    return given[0] if given else ""


def model_step_frames(input_bytes: int, output_bytes: int, state_bytes: int) -> tuple[int, int]:
    """The raw frames one step of a model needs, (received, sent): a STEP request with one input, and its
    answer with the output, the cycle count and the state bytes twice (after every step and after the last)."""
    request = MIN_FRAME + _STEP_REQUEST.size + input_bytes
    answer = MIN_FRAME + _STEP_REPLY.size + output_bytes + _CYCLES + 2 * state_bytes
    return request, answer


@dataclass(frozen=True)
class DeviceInfo:
    """What the device says about itself in its HELLO answer."""

    protocol_version: int
    input_dtype: np.dtype
    output_dtype: np.dtype
    input_size: int
    output_size: int
    state_bytes: int
    max_frame: int
    board: str
    model_sha256: str
    workers: int = 0          # the team's workers that run the step; 0 = not reported
    target_flags: int = 0     # TARGET_* bits
    max_answer_frame: int = 0  # the largest raw frame the device sends; 0: max_frame, as it receives

    @property
    def answer_limit(self) -> int:
        """The largest raw frame the device sends (its answers): what the host's reader accepts."""
        return self.max_answer_frame or self.max_frame

    def describe_target(self) -> dict:
        """What ran the step, as report.json says it."""
        return {"workers": self.workers or None,
                "simd_dot": bool(self.target_flags & TARGET_SIMD_DOT) if self.workers else None,
                "offloaded": bool(self.target_flags & TARGET_OFFLOADED) if self.workers else None}


@dataclass(frozen=True)
class DeviceError:
    code: int
    device_version: int
    detail: int

    @property
    def name(self) -> str:
        return ERROR_NAMES.get(self.code, f"error code {self.code}")


@dataclass
class StepBatch:
    """The answer to one STEP request."""

    first_step: int
    outputs: np.ndarray          # (n, output_size)
    cycles: np.ndarray           # (n,) uint32
    states: list[bytes] | None   # after every step, when asked
    last_state: bytes | None     # after the last step, when asked
    team_cycles: np.ndarray | None = None  # (n,) uint32: the team's own count of each step, when asked


def hello_version(payload: bytes) -> int | None:
    """The protocol version a HELLO answer states (its first byte, in every version), None when empty."""
    return payload[0] if payload else None


def parse_hello(payload: bytes) -> DeviceInfo:
    """A version-2 HELLO answer; check :func:`hello_version` first, the layout of another version differs."""
    if len(payload) < _HELLO_FIXED.size:
        raise ValueError(f"HELLO answer of {len(payload)} bytes is too short")
    (version, in_bytes, out_bytes, _reserved, n_in, n_out, n_state, max_frame, max_answer,
     board_len) = _HELLO_FIXED.unpack_from(payload)
    at = _HELLO_FIXED.size
    if len(payload) != at + board_len + 64 + _HELLO_TARGET.size:
        raise ValueError(f"HELLO answer of {len(payload)} bytes has the wrong length")
    if in_bytes not in ELEMENT_DTYPES or out_bytes not in ELEMENT_DTYPES:
        raise ValueError(f"HELLO answer gives element sizes {in_bytes}/{out_bytes} bytes")
    board = payload[at : at + board_len].decode("ascii", "replace")
    sha = payload[at + board_len : at + board_len + 64].decode("ascii", "replace")
    workers, flags, _reserved = _HELLO_TARGET.unpack_from(payload, at + board_len + 64)
    return DeviceInfo(version, ELEMENT_DTYPES[in_bytes], ELEMENT_DTYPES[out_bytes], n_in, n_out,
                      n_state, max_frame, board, sha, workers, flags, max_answer)


def build_hello(info: DeviceInfo) -> bytes:
    """The device's HELLO answer payload (for simulated devices and tests)."""
    board = info.board.encode("ascii")
    return (_HELLO_FIXED.pack(info.protocol_version, info.input_dtype.itemsize,
                              info.output_dtype.itemsize, 0, info.input_size, info.output_size,
                              info.state_bytes, info.max_frame, info.answer_limit, len(board))
            + board + info.model_sha256.encode("ascii")
            + _HELLO_TARGET.pack(info.workers, info.target_flags, 0))


def parse_error(payload: bytes) -> DeviceError:
    if len(payload) != _ERROR.size:
        raise ValueError(f"ERROR frame of {len(payload)} bytes")
    return DeviceError(*_ERROR.unpack(payload))


def build_step_request(inputs: np.ndarray, flags: int, dtype: np.dtype) -> bytes:
    inputs = np.ascontiguousarray(inputs, dtype=dtype)
    return _STEP_REQUEST.pack(flags, inputs.shape[0]) + inputs.tobytes()


def step_reply_size(n: int, info: DeviceInfo, flags: int) -> int:
    per_step = info.output_size * info.output_dtype.itemsize + 4 + (4 if flags & TEAM_CYCLES else 0)
    if flags & STATE_EVERY:
        per_step += info.state_bytes
    return _STEP_REPLY.size + n * per_step + (info.state_bytes if flags & STATE_LAST else 0)


def step_request_size(n: int, info: DeviceInfo) -> int:
    return _STEP_REQUEST.size + n * info.input_size * info.input_dtype.itemsize


def parse_step_reply(payload: bytes, info: DeviceInfo, n: int, flags: int) -> StepBatch:
    if len(payload) != step_reply_size(n, info, flags):
        raise ValueError(f"STEP answer of {len(payload)} bytes, expected {step_reply_size(n, info, flags)}")
    first, n_reply, flags_reply = _STEP_REPLY.unpack_from(payload)
    if n_reply != n or flags_reply != flags:
        raise ValueError(f"STEP answer for {n_reply} steps (flags {flags_reply}), asked {n} (flags {flags})")
    out_bytes = info.output_size * info.output_dtype.itemsize
    state_every = info.state_bytes if flags & STATE_EVERY else 0
    team = [("team_cycles", "<u4")] if flags & TEAM_CYCLES else []
    record = np.dtype([("y", info.output_dtype, (info.output_size,)), ("cycles", "<u4"), *team,
                       ("state", "u1", (state_every,))])
    assert record.itemsize == out_bytes + 4 + 4 * len(team) + state_every
    at = _STEP_REPLY.size
    rows = np.frombuffer(payload, dtype=record, count=n, offset=at)
    at += n * record.itemsize
    states = [bytes(row) for row in rows["state"]] if flags & STATE_EVERY else None
    last_state = bytes(payload[at : at + info.state_bytes]) if flags & STATE_LAST else None
    team_cycles = rows["team_cycles"].astype(np.uint32) if flags & TEAM_CYCLES else None
    return StepBatch(first, rows["y"].copy(), rows["cycles"].astype(np.uint32), states, last_state, team_cycles)


def host_version() -> int:
    return VERSION
