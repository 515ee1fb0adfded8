"""The camera application's outputs: one message a camera frame, from the AI-deck's GAP8 to the Crazyflie's STM32
(and, optionally, the same packets to a WiFi host), in CPX APP packets. docs/protocol.md, "The camera
application's outputs (CPX APP)", is the reference; this module is the one definition of the format, which the
GAP8's sender and the Crazyflie's receiver (templates/targets/stm32/receiver/, its constants rendered from here)
speak.

A message, little-endian:

    0  u8  magic 0xED           1  u8  version 1        2  u8  dtype (0 int8, 1 int16, 2 float32)
    3  u8  flags (bit 0: the capture of the next frame overlapped this frame's compute)
    4  u16 n_outputs            6  u16 reserved (0; a receiver ignores it)
    8  u32 frame counter (0 for the first frame)
    12 u32 capture-wait cycles  16 u32 preprocessing cycles  20 u32 model cycles (the GAP8's FC cycles)
    24 n_outputs elements of dtype: the model's output as the firmware computes it

It travels in CPX packets of at most ``CPX_MAX_PAYLOAD_SIZE`` (100) bytes, the STM32 link's MTU: a 2-byte CPX
header and up to 98 bytes of data, which are one part-index byte (0, 1, ...) and up to 97 bytes of the message.
The last part has the CPX lastPacket flag, the others not. A message is at most 256 parts.

The encoder is pure (:func:`pack`, :func:`split`, :func:`packets`); :class:`Reassembler` takes the packets as they
arrive and gives whole, checked messages, with the rules the C receiver follows (``Reject``):

- a part whose index is not the next one rejects the message in progress (ORDER). A part 0 always starts a new
  message: one in progress is rejected first. After a rejection, the parts of the rejected message that follow
  are dropped without another rejection, up to its last part or the next part 0;
- a packet without its part byte rejects the message in progress (EMPTY);
- once the first 24 bytes are in: a wrong magic (MAGIC) or version (VERSION), an unknown dtype or not the
  expected one (DTYPE), not the expected n_outputs (COUNT), a message longer than 256 parts (LENGTH);
- more bytes than the header declares, or fewer at the last part (LENGTH).
A receiver that starts in the middle of a message rejects that one (ORDER) and takes the next.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Iterable, Iterator

import numpy as np

from edgernn.errors import LinkError
from edgernn.link import cpx

MAGIC = 0xED
VERSION = 1
FIELDS = (("magic", "B"), ("version", "B"), ("dtype", "B"), ("flags", "B"), ("n_outputs", "H"), ("reserved", "H"),
          ("frame", "I"), ("capture_cycles", "I"), ("preprocess_cycles", "I"), ("model_cycles", "I"))
HEADER = struct.Struct("<" + "".join(code for _, code in FIELDS))
HEADER_BYTES = HEADER.size                       # 24
OFFSETS = {name: struct.calcsize("<" + "".join(code for _, code in FIELDS[:i])) for i, (name, _) in enumerate(FIELDS)}
STM32_MTU = 100                                  # CPX_MAX_PAYLOAD_SIZE (crazyflie-firmware cpx.h): header + data
PART_DATA = STM32_MTU - cpx.HEADER               # 98 bytes of CPX data a packet
PART_BYTES = PART_DATA - 1                       # 97 bytes of the message a packet, after the part index
MAX_PARTS = 256                                  # the part index is a u8
MAX_MESSAGE_BYTES = MAX_PARTS * PART_BYTES       # 24,832
FLAG_OVERLAP = 0x01
KEPT_ERRORS = 64                                 # a Reassembler's errors: the last ones (rejected counts them all)


class Dtype(IntEnum):
    """The element type of the outputs, as the message's byte 2 says it."""

    INT8 = 0
    INT16 = 1
    FLOAT32 = 2

    @property
    def numpy(self) -> np.dtype:
        return np.dtype(("<i1", "<i2", "<f4")[self])

    @property
    def size(self) -> int:
        return self.numpy.itemsize

    @classmethod
    def named(cls, name: str | int | np.dtype) -> "Dtype":
        """'int8', 'int16' or 'float32' (or a numpy dtype of those, or the code)."""
        if isinstance(name, (int, np.integer)):
            return cls(int(name))
        try:
            return {"int8": cls.INT8, "int16": cls.INT16, "float32": cls.FLOAT32}[np.dtype(name).name]
        except (KeyError, TypeError):
            raise ValueError(f"an output dtype is int8, int16 or float32, not {name!r}") from None


class Reject(IntEnum):
    """Why a message was rejected. The C receiver returns the same codes, negated
    (``EDGERNN_APPMSG_E_*`` in edgernn_appmsg.h)."""

    EMPTY = 1       # a packet without its part byte
    ORDER = 2       # a part out of order: its index is not the next one
    LENGTH = 3      # fewer or more bytes than its header declares, or more than 256 parts
    MAGIC = 4
    VERSION = 5
    DTYPE = 6       # an unknown dtype, or not the expected one
    COUNT = 7       # not the expected n_outputs


class AppMessageError(LinkError):
    """A message the receiver rejects; ``code`` says why (a :class:`Reject`)."""

    def __init__(self, code: Reject, message: str):
        super().__init__(message)
        self.code = Reject(code)


def max_outputs(dtype: str | Dtype) -> int:
    """The most outputs of ``dtype`` one message carries (256 parts of 97 bytes)."""
    return (MAX_MESSAGE_BYTES - HEADER_BYTES) // Dtype.named(dtype).size


def message_bytes(n_outputs: int, dtype: str | Dtype) -> int:
    """The length of a message of ``n_outputs`` elements of ``dtype``."""
    return HEADER_BYTES + n_outputs * Dtype.named(dtype).size


def part_count(n_bytes: int) -> int:
    """The CPX packets a message of ``n_bytes`` takes (an empty message still takes one)."""
    return max(1, -(-n_bytes // PART_BYTES))


@dataclass(frozen=True, eq=False)
class AppMessage:
    """One frame's outputs. ``outputs`` is a 1-D array of int8, int16 or float32 (its dtype is the message's)."""

    frame: int
    outputs: np.ndarray
    capture_cycles: int = 0
    preprocess_cycles: int = 0
    model_cycles: int = 0
    overlapped: bool = False

    @property
    def dtype(self) -> Dtype:
        return Dtype.named(self.outputs.dtype)

    def __eq__(self, other) -> bool:
        if not isinstance(other, AppMessage):
            return NotImplemented
        return (self.frame, self.capture_cycles, self.preprocess_cycles, self.model_cycles, self.overlapped,
                self.outputs.dtype, self.outputs.tobytes()) == (
                other.frame, other.capture_cycles, other.preprocess_cycles, other.model_cycles, other.overlapped,
                other.outputs.dtype, other.outputs.tobytes())

    def dequantized(self, scale: float | None = None, zero_point: int = 0) -> np.ndarray:
        """The outputs in the model's units, as the receiver computes them: float32 ``scale * (q - zero_point)``
        (both in float32), or the float32 outputs as they are."""
        if self.dtype == Dtype.FLOAT32 or scale is None:
            return self.outputs.astype(np.float32)
        q = self.outputs.astype(np.int32) - np.int32(zero_point)
        return np.float32(scale) * q.astype(np.float32)


def pack(message: AppMessage) -> bytes:
    """The message's bytes (header and outputs)."""
    outputs = np.asarray(message.outputs)
    if outputs.ndim != 1:
        raise ValueError(f"a message's outputs are 1-D; got shape {outputs.shape}")
    dtype = Dtype.named(outputs.dtype)
    if len(outputs) > max_outputs(dtype):
        raise ValueError(f"{len(outputs)} {dtype.name.lower()} outputs do not fit one message "
                         f"(at most {max_outputs(dtype)}: {MAX_PARTS} parts of {PART_BYTES} bytes)")
    for name in ("frame", "capture_cycles", "preprocess_cycles", "model_cycles"):
        value = getattr(message, name)
        if not 0 <= value <= 0xFFFFFFFF:
            raise ValueError(f"{name} is a u32; {value} is out of range")
    flags = FLAG_OVERLAP if message.overlapped else 0
    head = HEADER.pack(MAGIC, VERSION, dtype, flags, len(outputs), 0, message.frame, message.capture_cycles,
                       message.preprocess_cycles, message.model_cycles)
    return head + outputs.astype(dtype.numpy, copy=False).tobytes()


def unpack(data: bytes, *, n_outputs: int | None = None, dtype: str | Dtype | None = None) -> AppMessage:
    """A whole message from its bytes, checked (and against the expected ``n_outputs`` and ``dtype`` where
    given); AppMessageError says what is wrong."""
    data = bytes(data)
    problem = check_header(data, n_outputs=n_outputs, dtype=dtype)
    if problem is not None:
        raise AppMessageError(*problem)
    _, _, code, flags, n, _, frame, capture, pre, model = HEADER.unpack_from(data)
    if len(data) != message_bytes(n, code):
        raise AppMessageError(Reject.LENGTH, f"a message of {n} {Dtype(code).name.lower()} outputs is "
                                             f"{message_bytes(n, code)} bytes; got {len(data)}")
    outputs = np.frombuffer(data, dtype=Dtype(code).numpy, count=n, offset=HEADER_BYTES).copy()
    return AppMessage(frame=frame, outputs=outputs, capture_cycles=capture, preprocess_cycles=pre,
                      model_cycles=model, overlapped=bool(flags & FLAG_OVERLAP))


def check_header(data: bytes, *, n_outputs: int | None = None,
                 dtype: str | Dtype | None = None) -> tuple[Reject, str] | None:
    """What is wrong with a message's first 24 bytes, as (code, text), or None. The header's checks, in the
    order the C receiver makes them."""
    if len(data) < HEADER_BYTES:
        return Reject.LENGTH, f"a message has a {HEADER_BYTES}-byte header; got {len(data)} bytes"
    magic, version, code, _, n, _, *_ = HEADER.unpack_from(data)
    if magic != MAGIC:
        return Reject.MAGIC, f"not a camera application message: magic 0x{magic:02X}, not 0x{MAGIC:02X}"
    if version != VERSION:
        return Reject.VERSION, f"message version {version}; this receiver reads version {VERSION}"
    if code not in set(Dtype):
        return Reject.DTYPE, f"unknown output dtype {code} (0 int8, 1 int16, 2 float32)"
    if dtype is not None and code != Dtype.named(dtype):
        return Reject.DTYPE, (f"the outputs are {Dtype(code).name.lower()}; the receiver was generated for "
                              f"{Dtype.named(dtype).name.lower()}")
    if n_outputs is not None and n != n_outputs:
        return Reject.COUNT, f"{n} outputs; the receiver was generated for {n_outputs}"
    if message_bytes(n, code) > MAX_MESSAGE_BYTES:
        return Reject.LENGTH, (f"{n} {Dtype(code).name.lower()} outputs take {message_bytes(n, code)} bytes, "
                               f"more than {MAX_PARTS} parts of {PART_BYTES}")
    return None


def split(message: bytes) -> list[bytes]:
    """The CPX data of each packet that carries ``message``: its part index, then up to 97 bytes of the message.
    The last item is the packet to send with the CPX lastPacket flag, the others without it."""
    message = bytes(message)
    n = part_count(len(message))
    if n > MAX_PARTS:
        raise ValueError(f"a message of {len(message)} bytes takes {n} parts; at most {MAX_PARTS}")
    return [bytes([i]) + message[i * PART_BYTES:(i + 1) * PART_BYTES] for i in range(n)]


def packets(message: bytes, *, destination: int = cpx.STM32) -> list[cpx.Packet]:
    """``message`` as the GAP8 sends it: CPX APP packets from the GAP8 to ``destination`` (the STM32, or
    ``cpx.WIFI_HOST`` for the WiFi copy), the lastPacket flag on the last."""
    parts = split(message)
    return [cpx.Packet(destination, cpx.GAP8, cpx.APP, part, last=i == len(parts) - 1)
            for i, part in enumerate(parts)]


class Reassembler:
    """Whole messages from the packets that carry them, checked as the C receiver checks them (see the module's
    docstring for the rules). ``n_outputs`` and ``dtype``, where given, are what every message must carry, as
    the C receiver is generated for one model.

    ``feed`` takes one packet's lastPacket flag and data and returns the message it completes, or None. Each
    rejection is counted in ``rejected`` and kept in ``errors`` (the last 64); ``strict`` (the default) also
    raises it as an AppMessageError, after which the reassembler is still usable. A packet that both rejects the
    message in progress (a part 0 in the middle of one) and completes a one-part message raises in strict mode,
    and that message is lost; a tolerant reassembler returns it."""

    def __init__(self, *, n_outputs: int | None = None, dtype: str | Dtype | None = None, strict: bool = True):
        self.n_outputs = n_outputs
        self.dtype = None if dtype is None else Dtype.named(dtype)
        self.strict = strict
        self.rejected = 0
        self.received = 0
        self.errors: list[AppMessageError] = []
        self._buffer = bytearray()
        self._next = 0              # the part index expected (0: no message in progress)
        self._declared: int | None = None
        self._skipping = False      # dropping the rest of a rejected message

    def _reject(self, code: Reject, text: str, raised: list) -> None:
        error = AppMessageError(code, text)
        self.rejected += 1
        self.errors.append(error)
        del self.errors[:-KEPT_ERRORS]
        raised.append(error)
        self._buffer.clear()
        self._next = 0
        self._declared = None

    def feed(self, last: bool, data: bytes) -> AppMessage | None:
        raised: list[AppMessageError] = []
        message = self._take(bool(last), bytes(data), raised)
        if raised and self.strict:
            raise raised[0]
        return message

    def _take(self, last: bool, data: bytes, raised: list) -> AppMessage | None:
        if not data:
            self._skipping = not last
            self._reject(Reject.EMPTY, "a CPX packet without its part byte", raised)
            return None
        index = data[0]
        if self._skipping:
            if index != 0:
                self._skipping = not last
                return None
            self._skipping = False
        if index != self._next:
            if index == 0:
                self._reject(Reject.ORDER, f"part 0 of a new message arrived after part {self._next - 1}: the "
                                           "message in progress is incomplete", raised)
            else:
                self._skipping = not last
                self._reject(Reject.ORDER, f"part {index} arrived where part {self._next} was due", raised)
                return None
        self._buffer += data[1:]
        self._next = index + 1
        if self._declared is None and len(self._buffer) >= HEADER_BYTES:
            problem = check_header(self._buffer, n_outputs=self.n_outputs, dtype=self.dtype)
            if problem is not None:
                self._skipping = not last
                self._reject(*problem, raised)
                return None
            _, _, code, _, n, *_ = HEADER.unpack_from(self._buffer)
            self._declared = message_bytes(n, code)
        if self._declared is not None and len(self._buffer) > self._declared:
            self._skipping = not last
            self._reject(Reject.LENGTH, f"the message is longer than the {self._declared} bytes its header "
                                        "declares", raised)
            return None
        if not last:
            if self._next >= MAX_PARTS:
                self._skipping = True
                self._reject(Reject.LENGTH, f"part {index} is not the last: a message is at most {MAX_PARTS} parts",
                             raised)
            return None
        if self._declared is None or len(self._buffer) != self._declared:
            wanted = HEADER_BYTES if self._declared is None else self._declared
            got = len(self._buffer)
            self._reject(Reject.LENGTH, f"the message ended after {got} bytes; it needs {wanted}", raised)
            return None
        message = unpack(self._buffer)
        self._buffer.clear()
        self._next = 0
        self._declared = None
        self.received += 1
        return message

    def messages(self, stream: Iterable[cpx.Packet | tuple[bool, bytes]]) -> Iterator[AppMessage]:
        """The whole messages of a stream of packets: ``cpx.Packet`` (packets of functions other than APP are
        passed over) or ``(last, data)`` pairs. Strict: the first rejection raises."""
        for item in stream:
            if isinstance(item, cpx.Packet):
                if item.function != cpx.APP or item.version != cpx.VERSION:
                    continue
                last, data = item.last, item.data
            else:
                last, data = item
            message = self.feed(last, data)
            if message is not None:
                yield message
