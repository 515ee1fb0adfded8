"""The camera application's output messages (edgernn/link/appmsg.py, docs/protocol.md "The camera application's
outputs (CPX APP)"): pack, split into CPX APP packets at the STM32's MTU, and reassemble, with every rejection
the C receiver makes too (tests/targets/stm32/test_receiver_parser.py holds the C to these)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from appmsg_streams import GOOD, REJECTIONS, message, parts
from edgernn.link import appmsg, cpx
from edgernn.link.appmsg import AppMessage, AppMessageError, Reassembler, Reject


def feed_all(reassembler: Reassembler, parts: list[bytes]) -> list[AppMessage]:
    out = [reassembler.feed(i == len(parts) - 1, part) for i, part in enumerate(parts)]
    return [m for m in out if m is not None]


def test_the_header_is_laid_out_as_documented():
    data = appmsg.pack(AppMessage(frame=0x01020304, outputs=np.array([-1, 2], np.int16), capture_cycles=5,
                                  preprocess_cycles=6, model_cycles=7, overlapped=True))
    assert appmsg.HEADER_BYTES == 24
    assert data[:4] == bytes([0xED, 1, 1, 1])
    assert struct.unpack_from("<HHIIII", data, 4) == (2, 0, 0x01020304, 5, 6, 7)
    assert data[24:] == bytes([0xFF, 0xFF, 2, 0])


@pytest.mark.parametrize("dtype", ["int8", "int16", "float32"])
@pytest.mark.parametrize("n", [0, 1, 2, 37, 300])
def test_each_dtype_round_trips_through_packets(dtype, n):
    sent = message(n, dtype, frame=n)
    data = appmsg.pack(sent)
    assert len(data) == appmsg.message_bytes(n, dtype)
    parts = appmsg.split(data)
    assert [p[0] for p in parts] == list(range(len(parts)))
    assert all(len(p) <= appmsg.PART_DATA for p in parts)
    assert b"".join(p[1:] for p in parts) == data
    assert appmsg.unpack(data) == sent
    got = feed_all(Reassembler(n_outputs=n, dtype=dtype), parts)
    assert got == [sent] and got[0].outputs.dtype == np.dtype(dtype)


@pytest.mark.parametrize("n_bytes, parts", [
    (appmsg.PART_BYTES - 1, 1),
    (appmsg.PART_BYTES, 1),            # ends exactly at a part's end
    (appmsg.PART_BYTES + 1, 2),        # one byte over: a second part of one byte
    (2 * appmsg.PART_BYTES, 2),
    (2 * appmsg.PART_BYTES + 1, 3),
    (appmsg.MAX_MESSAGE_BYTES, 256),   # the largest message: part 255 is the last
])
def test_the_mtu_edges(n_bytes, parts):
    # int8 outputs so that any length from the header up is a message
    n = n_bytes - appmsg.HEADER_BYTES
    sent = message(n, "int8")
    split = appmsg.split(appmsg.pack(sent))
    assert len(split) == parts
    assert [len(p) for p in split[:-1]] == [appmsg.PART_DATA] * (parts - 1)
    assert len(split[-1]) == 1 + n_bytes - (parts - 1) * appmsg.PART_BYTES
    assert feed_all(Reassembler(n_outputs=n, dtype="int8"), split) == [sent]
    # a CPX packet of the STM32 link: header + data within CPX_MAX_PAYLOAD_SIZE, lastPacket on the last only
    packets = appmsg.packets(appmsg.pack(sent))
    assert [len(p.wire()) - 2 for p in packets] == [cpx.HEADER + len(p) for p in split]
    assert max(len(p.wire()) - 2 for p in packets) <= appmsg.STM32_MTU
    assert [p.last for p in packets] == [False] * (parts - 1) + [True]


def test_the_cpx_route_is_gap8_to_stm32_app():
    (packet,) = appmsg.packets(appmsg.pack(message(2, "float32")))
    wire = packet.wire()
    assert wire[2] == 1 | 4 << 3 | 1 << 6     # destination STM32, source GAP8, lastPacket
    assert wire[3] == 5                       # function APP, version 0
    (to_host,) = appmsg.packets(appmsg.pack(message(2, "float32")), destination=cpx.WIFI_HOST)
    assert to_host.wire()[2] & 7 == 3


def test_what_does_not_fit_one_message_is_refused():
    too_many = appmsg.max_outputs("float32") + 1
    with pytest.raises(ValueError, match="do not fit one message"):
        appmsg.pack(AppMessage(frame=0, outputs=np.zeros(too_many, np.float32)))
    with pytest.raises(ValueError, match="at most 256"):
        appmsg.split(bytes(appmsg.MAX_MESSAGE_BYTES + 1))
    with pytest.raises(ValueError, match="int8, int16 or float32"):
        appmsg.pack(AppMessage(frame=0, outputs=np.zeros(2, np.int32)))
    with pytest.raises(ValueError, match="u32"):
        appmsg.pack(AppMessage(frame=-1, outputs=np.zeros(2, np.int8)))


@pytest.mark.parametrize("name, stream, code", REJECTIONS, ids=[r[0] for r in REJECTIONS])
def test_a_bad_stream_is_rejected_once_and_the_next_message_is_taken(name, stream, code):
    after = message(150, "int16", frame=8)
    stream = stream + parts(appmsg.pack(after))
    strict = Reassembler(n_outputs=150, dtype="int16")
    with pytest.raises(AppMessageError) as caught:
        list(strict.messages(stream))
    assert caught.value.code == code and str(caught.value)
    # tolerant: one rejection for the bad message, the rest of it dropped, then the good message whole
    tolerant = Reassembler(n_outputs=150, dtype="int16", strict=False)
    got = list(tolerant.messages(stream))
    assert (tolerant.rejected, [e.code for e in tolerant.errors]) == (1, [code])
    assert got == [after] and tolerant.received == 1


def test_a_part_0_mid_message_starts_the_next_message():
    # the tail of a message is lost: that message is rejected, the one whose part 0 came is kept
    nxt = message(150, "int16", frame=9)
    stream = parts(GOOD)[:2] + parts(appmsg.pack(nxt))
    tolerant = Reassembler(n_outputs=150, dtype="int16", strict=False)
    assert list(tolerant.messages(stream)) == [nxt]
    assert [e.code for e in tolerant.errors] == [Reject.ORDER]
    strict = Reassembler(n_outputs=150, dtype="int16")
    with pytest.raises(AppMessageError, match="part 0 of a new message"):
        list(strict.messages(stream))
    assert feed_all(strict, [p for _, p in parts(appmsg.pack(nxt))[1:]]) == [nxt]


def test_without_expectations_any_message_is_taken_and_other_functions_pass_by():
    first, second = message(3, "float32", frame=0), message(500, "int8", frame=1)
    stream = [*appmsg.packets(appmsg.pack(first)), cpx.Packet(cpx.STM32, cpx.GAP8, cpx.CONSOLE, b"hello"),
              *appmsg.packets(appmsg.pack(second))]
    reassembler = Reassembler()
    assert list(reassembler.messages(stream)) == [first, second]
    assert (reassembler.received, reassembler.rejected) == (2, 0)


def test_a_message_over_256_parts_is_rejected_where_its_header_says_so():
    big = bytearray(appmsg.pack(message(10, "int8")))
    big[4:6] = struct.pack("<H", appmsg.max_outputs("int8") + 1)
    with pytest.raises(AppMessageError, match="more than 256 parts") as caught:
        Reassembler().feed(False, b"\x00" + bytes(big))
    assert caught.value.code == Reject.LENGTH


@pytest.mark.parametrize("dtype, scale, zero_point, q, y", [
    ("int8", 0.5, -3, [-128, -3, 127], [-62.5, 0.0, 65.0]),
    ("int16", 2.0 ** -12, 0, [-32768, 1, 32767], [-8.0, 2.0 ** -12, 32767 / 4096]),
    ("float32", None, 0, [1.5, -0.25], [1.5, -0.25]),
])
def test_dequantization_is_scale_times_q_minus_zero_point_in_float32(dtype, scale, zero_point, q, y):
    got = AppMessage(frame=0, outputs=np.array(q, dtype)).dequantized(scale, zero_point)
    assert got.dtype == np.float32 and got.tolist() == np.array(y, np.float32).tolist()
