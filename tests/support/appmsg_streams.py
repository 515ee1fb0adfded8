"""Streams of the camera application's messages in CPX packets, good and bad, as cases that the Python reassembler
(tests/link/test_appmsg.py) and the Crazyflie receiver's C (tests/targets/stm32/test_receiver_parser.py) must
both decide the same way."""

from __future__ import annotations

import numpy as np

from edgernn.link import appmsg
from edgernn.link.appmsg import AppMessage, Reject


def message(n: int, dtype: str, frame: int = 7, seed: int = 0) -> AppMessage:
    """A message of ``n`` random outputs, every header field set (the cycle counts up to the u32's edges)."""
    rng = np.random.default_rng(seed)
    if dtype == "float32":
        outputs = rng.standard_normal(n).astype(np.float32)
    else:
        info = np.iinfo(dtype)
        outputs = rng.integers(info.min, info.max + 1, n).astype(dtype)
    return AppMessage(frame=frame, outputs=outputs, capture_cycles=0xFFFFFFFF, preprocess_cycles=12345,
                      model_cycles=1 << 31, overlapped=frame % 2 == 1)


def parts(data: bytes) -> list[tuple[bool, bytes]]:
    """``data``'s packets as (lastPacket, data) pairs."""
    split = appmsg.split(data)
    return [(i == len(split) - 1, p) for i, p in enumerate(split)]


def corrupt(data: bytes, offset: int, value: int) -> bytes:
    data = bytearray(data)
    data[offset] = value
    return bytes(data)


# The streams' model: 150 int16 outputs, 324 bytes, 4 parts
N_OUTPUTS, DTYPE = 150, "int16"
GOOD = appmsg.pack(message(N_OUTPUTS, DTYPE))
_GOOD = parts(GOOD)

# (name, a stream of one bad message, the code of its one rejection)
REJECTIONS = [
    ("magic", parts(corrupt(GOOD, 0, 0xEE)), Reject.MAGIC),
    ("version", parts(corrupt(GOOD, 1, 2)), Reject.VERSION),
    ("unknown dtype", parts(corrupt(GOOD, 2, 3)), Reject.DTYPE),
    ("another dtype", parts(appmsg.pack(message(N_OUTPUTS, "int8"))), Reject.DTYPE),
    ("another n_outputs", parts(appmsg.pack(message(N_OUTPUTS - 1, DTYPE))), Reject.COUNT),
    ("ends short", _GOOD[:-2] + [(True, _GOOD[-2][1])], Reject.LENGTH),
    ("runs long", parts(GOOD + b"\x00"), Reject.LENGTH),
    ("shorter than a header", [(True, b"\x00" + GOOD[:23])], Reject.LENGTH),
    ("a part lost", [p for i, p in enumerate(_GOOD) if i != 1], Reject.ORDER),
    ("parts swapped", [_GOOD[0], _GOOD[2], _GOOD[1], _GOOD[3]], Reject.ORDER),
    ("starts mid-message", _GOOD[1:], Reject.ORDER),
    ("no part byte", [_GOOD[0], (False, b""), *_GOOD[1:]], Reject.EMPTY),
    ("tail lost, next message whole", _GOOD[:2], Reject.ORDER),
]
