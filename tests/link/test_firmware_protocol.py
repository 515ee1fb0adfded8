"""The C frame codec (templates/firmware/protocol.c) against the Python one, byte for byte."""

from __future__ import annotations

import ctypes
import random
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

from edgernn.link import framing
from edgernn.resources import templates_dir

pytestmark = pytest.mark.toolchain

MAX_FRAME = 600  # small, so the tests reach the limit cheaply


def build_codec(directory: Path, max_frame: int):
    from conftest import require_tools

    require_tools("gcc")
    lib = directory / f"codec{max_frame}.so"
    fw = templates_dir() / "firmware"
    shim = Path(__file__).resolve().parents[1] / "fixtures" / "codec_shim.c"
    subprocess.run(["gcc", "-std=c99", "-O1", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                    f"-DEDGERNN_LINK_MAX_FRAME={max_frame}", f"-I{fw}", str(fw / "protocol.c"), str(shim),
                    "-o", str(lib)], check=True)
    c = ctypes.CDLL(str(lib))
    c.shim_feed.restype = ctypes.c_size_t
    c.shim_feed.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    c.shim_encode.restype = ctypes.c_size_t
    c.shim_encode.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p]
    c.shim_seal.restype = ctypes.c_size_t
    c.shim_seal.argtypes = [ctypes.c_char_p, ctypes.c_uint8, ctypes.c_uint16, ctypes.c_size_t]
    c.shim_crc32.restype = ctypes.c_uint32
    c.shim_crc32.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    return c


@pytest.fixture(scope="module")
def codec(tmp_path_factory):
    return build_codec(tmp_path_factory.mktemp("codec"), MAX_FRAME)


# A receive buffer for a full 324x244x1 int8 camera frame in one STEP request (8 + 3 + 79,056 bytes), and
# one byte more, so the frames on either side of 65,535 and 65,536 bytes and the camera frame all fit
CAMERA_FRAME = 324 * 244
BIG_FRAME = framing.MIN_FRAME + 3 + CAMERA_FRAME + 1


@pytest.fixture(scope="module")
def big_codec(tmp_path_factory):
    return build_codec(tmp_path_factory.mktemp("big_codec"), BIG_FRAME)


def c_feed(codec, data: bytes):
    """Events from the C parser: ("frame", bytes) or ("bad", error code)."""
    out = ctypes.create_string_buffer(len(data) * 4 + 64)
    n = codec.shim_feed(data, len(data), out, len(out))
    raw, events, at = out.raw[:n], [], 0
    while at < n:
        kind, err, length = raw[at], raw[at + 1], int.from_bytes(raw[at + 2 : at + 6], "little")
        events.append(("frame", raw[at + 6 : at + 6 + length]) if kind == 1 else ("bad", err))
        at += 6 + length
    return events


def payloads():
    rng = random.Random(7)
    yield b""
    yield b"\x00"
    yield b"\x00" * 300
    yield b"\xff" * 253
    yield b"\x01" * 254
    yield b"\x01" * 255
    yield bytes(range(256)) * 2
    for _ in range(200):
        n = rng.choice([rng.randrange(20), rng.randrange(MAX_FRAME - framing.MIN_FRAME + 1)])
        yield bytes(rng.choice([0, 1, 255, rng.randrange(256)]) for _ in range(n))


def test_crc32_is_zlib_crc32(codec):
    for data in (b"", b"123456789", bytes(range(256)) * 3):
        assert codec.shim_crc32(data, len(data)) == zlib.crc32(data)


def test_cobs_encoder_identical_in_c_and_python(codec):
    for raw in payloads():
        out = ctypes.create_string_buffer(len(raw) + len(raw) // 254 + 2)
        n = codec.shim_encode(raw, len(raw), out)
        assert out.raw[:n] == framing.cobs_encode(raw) + b"\x00"
        assert framing.cobs_decode(out.raw[: n - 1]) == raw


def test_c_seal_matches_python_seal(codec):
    payload = b"\x00\x01abc\x00"
    buf = ctypes.create_string_buffer(framing.HEADER.size + len(payload) + 4)
    ctypes.memmove(ctypes.addressof(buf) + framing.HEADER.size, payload, len(payload))
    n = codec.shim_seal(buf, 0x83, 0x1234, len(payload))
    assert buf.raw[:n] == framing.seal(0x83, 0x1234, payload)


def test_c_parser_reads_every_python_frame(codec):
    codec.shim_init()
    wire, expected = b"", []
    for i, payload in enumerate(payloads()):
        wire += framing.encode_frame(3, i, payload)
        expected.append(("frame", framing.seal(3, i, payload)))
    assert c_feed(codec, wire) == expected


def test_c_parser_resynchronises_after_garbage_and_reports_why(codec):
    codec.shim_init()
    good = framing.encode_frame(1, 5, b"hello")
    corrupt = bytearray(good)
    corrupt[3] ^= 0x10
    too_long = framing.encode_frame(1, 6, bytes(MAX_FRAME))
    events = c_feed(codec, b"\x00\x00boot banner\r\n\x00" + bytes(corrupt) + b"\x02a\x00" + too_long + good)
    assert events[-1] == ("frame", framing.seal(1, 5, b"hello"))
    assert ("bad", 1) in events      # CRC
    assert ("bad", 4) in events      # too short
    assert ("bad", 5) in events      # over the frame limit
    assert ("bad", 8) in events      # COBS block cut by a delimiter
    assert len([e for e in events if e[0] == "frame"]) == 1


def test_python_reader_resynchronises_after_garbage():
    frames = iter([b"junk\x00", framing.encode_frame(0x81, 9, b"\x00ok")[:-3], b"\x00",
                   framing.encode_frame(0x81, 10, b"\x00ok"), b""])
    reader = framing.FrameReader(lambda n: next(frames, b""))
    with pytest.raises(framing.FrameError):
        reader.read_frame()
    with pytest.raises(framing.FrameError):
        reader.read_frame()
    frame = reader.read_frame()
    assert (frame.type, frame.seq, frame.payload) == (0x81, 10, b"\x00ok")


def test_python_reader_rejects_over_long_frames():
    wire = framing.encode_frame(1, 1, bytes(5000))
    chunks = iter([wire, framing.encode_frame(1, 2, b"x")])
    reader = framing.FrameReader(lambda n: next(chunks, b""), max_frame=4096)
    with pytest.raises(framing.FrameError, match="exceeds"):
        reader.read_frame()
    assert reader.read_frame().seq == 2


@pytest.mark.parametrize("raw_bytes", [65_535, 65_536, 65_537, framing.MIN_FRAME + 3 + CAMERA_FRAME, BIG_FRAME],
                         ids=["65535", "65536", "65537", "camera-step", "limit"])
def test_frames_past_16_bits_pass_both_codecs_alike(big_codec, raw_bytes):
    """Protocol version 2: a frame's length is bounded by the buffers alone, never by a 16-bit field, so
    the C parser and the Python reader take frames on both sides of 65,535/65,536 bytes the same way."""
    rng = np.random.default_rng(raw_bytes)
    payload = rng.integers(0, 4, raw_bytes - framing.MIN_FRAME, dtype=np.uint8).tobytes()   # many zeros
    wire = framing.encode_frame(3, 0x1234, payload)
    big_codec.shim_init()
    assert c_feed(big_codec, wire) == [("frame", framing.seal(3, 0x1234, payload))]
    out = ctypes.create_string_buffer(len(wire))
    raw = framing.seal(3, 0x1234, payload)
    n = big_codec.shim_encode(raw, len(raw), out)
    assert out.raw[:n] == wire
    reader = framing.FrameReader(_chunks(wire), max_frame=BIG_FRAME)
    frame = reader.read_frame()
    assert (frame.type, frame.seq, frame.payload) == (3, 0x1234, payload)


def test_a_frame_one_byte_past_the_big_limit_is_dropped_by_both_codecs(big_codec):
    payload = bytes(BIG_FRAME - framing.MIN_FRAME + 1)
    wire = framing.encode_frame(3, 7, payload) + framing.encode_frame(1, 8, b"next")
    big_codec.shim_init()
    assert c_feed(big_codec, wire) == [("bad", 5), ("frame", framing.seal(1, 8, b"next"))]
    reader = framing.FrameReader(_chunks(wire), max_frame=BIG_FRAME)
    with pytest.raises(framing.FrameError, match="exceeds"):
        reader.read_frame()
    assert reader.read_frame().seq == 8


def _chunks(data: bytes, size: int = 4096):
    """A port's read: the bytes in chunks of ``size``, then nothing."""
    parts = iter([data[i : i + size] for i in range(0, len(data), size)])
    return lambda n: next(parts, b"")
