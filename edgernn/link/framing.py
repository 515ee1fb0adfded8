"""Frame codec of the serial link: COBS with a 0x00 delimiter around version, type, sequence number,
payload and CRC-32. The C twin is templates/firmware/protocol.c; the wire format is docs/protocol.md.

The encoder is pure. :class:`FrameReader` reads whole frames from a port, esptool ``slip_reader``
style: it yields good frames and raises :class:`FrameError` for a corrupt one, keeping what it has
buffered so that the next call carries on at the next delimiter.
"""

from __future__ import annotations

import struct
import time
import zlib
from dataclasses import dataclass
from typing import Callable, Iterator

VERSION = 2          # 2: HELLO's sizes and frame limits are 32-bit (docs/protocol.md, "Versions")
DELIMITER = b"\x00"
HEADER = struct.Struct("<BBH")  # version, type, seq
CRC = struct.Struct("<I")
MIN_FRAME = HEADER.size + CRC.size
DEFAULT_MAX_FRAME = 4096
NO_SEQ = 0xFFFF


class FrameError(Exception):
    """A delimited frame that is not a frame: bad COBS, bad CRC, too short or too long."""

    def __init__(self, reason: str, code: int):
        super().__init__(reason)
        self.reason = reason
        self.code = code


class FrameTimeout(Exception):
    """No whole frame arrived before the deadline."""


@dataclass(frozen=True)
class Frame:
    version: int
    type: int
    seq: int
    payload: bytes


def cobs_encode(raw: bytes) -> bytes:
    out = bytearray()
    block = bytearray()
    for byte in raw:
        if byte == 0:
            out.append(len(block) + 1)
            out += block
            block.clear()
        else:
            block.append(byte)
            if len(block) == 254:
                out.append(255)
                out += block
                block.clear()
    out.append(len(block) + 1)
    out += block
    return bytes(out)


def cobs_decode(encoded: bytes) -> bytes:
    """Inverse of :func:`cobs_encode` for one frame without its delimiter."""
    out = bytearray()
    i = 0
    n = len(encoded)
    while i < n:
        code = encoded[i]
        if code == 0:
            raise FrameError("zero byte inside a COBS frame", 8)
        end = i + code
        if end > n:
            raise FrameError("COBS block runs past the end of the frame", 8)
        out += encoded[i + 1 : end]
        i = end
        if code != 0xFF and i < n:
            out.append(0)
    return bytes(out)


def seal(frame_type: int, seq: int, payload: bytes = b"", version: int = VERSION) -> bytes:
    """The raw frame (header + payload + CRC), before COBS."""
    body = HEADER.pack(version, frame_type, seq) + bytes(payload)
    return body + CRC.pack(zlib.crc32(body))


def encode_frame(frame_type: int, seq: int, payload: bytes = b"", version: int = VERSION) -> bytes:
    """The bytes to put on the wire for one frame, delimiter included."""
    return cobs_encode(seal(frame_type, seq, payload, version)) + DELIMITER


def decode_frame(encoded: bytes, max_frame: int = DEFAULT_MAX_FRAME) -> Frame:
    """One frame from its COBS bytes (no delimiter); raises :class:`FrameError`."""
    raw = cobs_decode(encoded)
    if len(raw) > max_frame:
        raise FrameError(f"frame of {len(raw)} bytes exceeds the {max_frame}-byte limit", 5)
    if len(raw) < MIN_FRAME:
        raise FrameError(f"frame of {len(raw)} bytes is shorter than the {MIN_FRAME}-byte minimum", 4)
    (crc,) = CRC.unpack_from(raw, len(raw) - CRC.size)
    if zlib.crc32(raw[: -CRC.size]) != crc:
        raise FrameError("CRC-32 mismatch", 1)
    version, frame_type, seq = HEADER.unpack_from(raw)
    return Frame(version, frame_type, seq, raw[HEADER.size : -CRC.size])


class FrameReader:
    """Whole frames from ``read(n) -> bytes`` (a pyserial port's ``read``), garbage skipped."""

    def __init__(self, read: Callable[[int], bytes], max_frame: int = DEFAULT_MAX_FRAME,
                 in_waiting: Callable[[], int] | None = None):
        self._read = read
        self._in_waiting = in_waiting
        self.max_frame = max_frame
        self._buffer = bytearray()
        self._discarding = False  # inside an over-long frame: skip to the next delimiter

    def frames(self, deadline: float | None = None) -> Iterator[Frame]:
        """Yield frames until ``deadline`` (``time.monotonic()``) passes, then raise FrameTimeout.

        A corrupt frame raises :class:`FrameError`; the reader stays usable.
        """
        limit = self.max_frame + self.max_frame // 254 + 2
        while True:
            end = self._buffer.find(DELIMITER)
            if end < 0:
                if len(self._buffer) > limit:
                    self._buffer.clear()
                    self._discarding = True
                if deadline is not None and time.monotonic() >= deadline:
                    raise FrameTimeout()
                want = max(1, self._in_waiting() if self._in_waiting else 1)
                self._buffer += self._read(want)
                continue
            chunk = bytes(self._buffer[:end])
            del self._buffer[: end + 1]
            if self._discarding:
                self._discarding = False
                raise FrameError(f"frame exceeds the {self.max_frame}-byte limit", 5)
            if not chunk:
                continue  # idle delimiters
            yield decode_frame(chunk, self.max_frame)

    def read_frame(self, deadline: float | None = None) -> Frame:
        return next(self.frames(deadline))

    def take_buffered(self) -> bytes:
        """Bytes read past the last frame (text the device prints after its final frame)."""
        data = bytes(self._buffer)
        self._buffer.clear()
        return data

    def discard_buffered(self) -> None:
        self._buffer.clear()
        self._discarding = False
