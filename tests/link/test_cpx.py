"""CPX over TCP (edgernn.link.cpx) held to the ecosystem's own framing, cflib's ``cflib.cpx`` (Bitcraze), and the
host port's behaviour at the edges: packets split at the MTU, other functions kept out of the stream, a connection
that closes (at once, or mid-frame), a URL that is not a CPX port.

The far end here is a socket pair driven by the test: the deck's ESP32 cannot exist on this machine. The ESP32 that
edgernn ships for GVSOC is proven against the real firmware in tests/targets/gap8/test_gvsoc_wifi.py."""

from __future__ import annotations

import socket
import struct
import threading

import cflib.cpx as cflib_cpx      # Bitcraze's framing (scripts/setup.sh installs cflib)
import pytest

from edgernn.errors import LinkError
from edgernn.link import cpx


class _Peer:
    """A socket pair: our CpxPort on one end, the test's raw bytes on the other (the deck's side)."""

    def __init__(self):
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(1)
        self.url = f"cpx://127.0.0.1:{self.server.getsockname()[1]}"
        self.conn = None
        accepted = threading.Thread(target=self._accept)
        accepted.start()
        self.port = cpx.CpxPort(self.url, timeout=0.5)
        accepted.join()

    def _accept(self):
        self.conn, _ = self.server.accept()

    def close(self):
        self.port.close()
        if self.conn is not None:
            self.conn.close()
        self.server.close()


@pytest.fixture
def peer():
    p = _Peer()
    yield p
    p.close()


# (function, destination, source, data, last): the functions and targets Bitcraze assigns, at the ends of the MTU
CFLIB_CASES = [
    ("CONSOLE", "HOST", "GAP8", b"hello\n", True),
    ("APP", "STM32", "GAP8", bytes(range(7)), False),
    ("WIFI_CTRL", "GAP8", "ESP32", b"\x32\x01", True),
    ("TEST", "GAP8", "HOST", bytes(1020), True),
    ("SYSTEM", "ESP32", "HOST", b"", False),
]


@pytest.mark.parametrize("function, destination, source, data, last", CFLIB_CASES)
def test_cpx_frames_are_cflibs_both_ways(function, destination, source, data, last):
    """A packet written here is the bytes cflib's SocketTransport writes for it, and cflib reads ours back as
    the same packet."""
    F, T = cflib_cpx.CPXFunction, cflib_cpx.CPXTarget
    theirs = cflib_cpx.CPXPacket(function=F[function], destination=T[destination], source=T[source],
                                 data=bytearray(data))
    theirs.lastPacket = last
    their_wire = struct.pack("H", theirs.length + 2) + bytes(theirs.wireData)   # as SocketTransport.writePacket
    ours = cpx.Packet(destination=T[destination].value, source=T[source].value, function=F[function].value,
                      data=data, last=last)
    assert ours.wire() == their_wire
    back = cflib_cpx.CPXPacket()
    back.wireData = bytearray(ours.wire()[2:])
    assert (back.function, back.destination, back.source, bytes(back.data), back.lastPacket) == \
        (F[function], T[destination], T[source], data, last)
    assert cpx.parse(their_wire[2:]) == ours


def test_edgernns_function_is_outside_bitcrazes():
    """0x20 passes beside every function Bitcraze assigns (which cflib enumerates)."""
    assigned = {f.value for f in cflib_cpx.CPXFunction}
    assert cpx.FUNCTION not in assigned and cpx.FUNCTION < 64
    assert {cpx.SYSTEM, cpx.CONSOLE, cpx.CRTP, cpx.WIFI_CTRL, cpx.APP, cpx.TEST, cpx.BOOTLOADER} == assigned
    assert {t.value for t in cflib_cpx.CPXTarget} == {cpx.STM32, cpx.ESP32, cpx.WIFI_HOST, cpx.GAP8}


@pytest.mark.parametrize("n, parts", [(0, 0), (1, 1), (1020, 1), (1021, 2), (2040, 2), (5000, 5)])
def test_a_write_is_split_at_the_mtu_with_the_last_flag_on_its_last_part(n, parts):
    data = bytes(i % 251 for i in range(n))
    packets = cpx.split(data)
    assert len(packets) == parts
    assert b"".join(p.data for p in packets) == data
    assert [p.last for p in packets] == [i == parts - 1 for i in range(parts)]
    assert all(len(p.wire()) - 2 <= cpx.MTU for p in packets)
    assert all((p.destination, p.source, p.function) == (cpx.GAP8, cpx.WIFI_HOST, cpx.FUNCTION) for p in packets)


def test_the_port_writes_edgernns_packets_and_reads_only_edgernns_stream(peer):
    peer.port.write(b"x" * 1500)
    got = b""
    while len(got) < 1500 + 8:
        got += peer.conn.recv(65536)
    first = cpx.parse(got[2:2 + struct.unpack_from("<H", got)[0]])
    assert (first.destination, first.source, first.function, first.last, len(first.data)) == \
        (cpx.GAP8, cpx.WIFI_HOST, cpx.FUNCTION, False, 1020)
    # the deck sends: the ESP32's WIFI_CTRL news, a CONSOLE line, then edgernn's bytes in two packets
    news = cpx.Packet(cpx.GAP8, cpx.ESP32, cpx.WIFI_CTRL, b"\x32\x01").wire()
    console = cpx.Packet(cpx.WIFI_HOST, cpx.GAP8, cpx.CONSOLE, b"boot\n").wire()
    ours = b"".join(p.wire() for p in cpx.split(bytes(range(256)) * 5, destination=cpx.WIFI_HOST, source=cpx.GAP8))
    wire = news + console + ours
    for at in range(0, len(wire), 7):           # in pieces that cut frames anywhere
        peer.conn.sendall(wire[at:at + 7])
    stream = b""
    while len(stream) < 1280:
        stream += peer.port.read(4096)
    assert stream == bytes(range(256)) * 5
    assert [(p.function, p.data) for p in peer.port.other] == [(cpx.WIFI_CTRL, b"\x32\x01"), (cpx.CONSOLE, b"boot\n")]


def test_a_connection_closed_mid_frame_is_one_clear_fault(peer):
    whole = cpx.Packet(cpx.WIFI_HOST, cpx.GAP8, cpx.FUNCTION, b"abcdef").wire()
    peer.conn.sendall(whole + whole[:5])
    peer.conn.close()
    assert peer.port.read(6) == b"abcdef"
    with pytest.raises(cpx.CpxClosed, match="closed the connection 5 of 10 bytes into a CPX frame"):
        peer.port.read(6)


def test_a_second_client_closed_at_once_is_told_so_even_as_a_reset(peer):
    """The deck's ESP32 serves one client and closes another at once. With the client's bytes unread the close
    comes as a reset, not an end of stream: reading and writing after it say the same one line."""
    peer.port.write(b"hello")
    peer.conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))   # close by a reset
    peer.conn.close()
    with pytest.raises(cpx.CpxClosed, match=r"closed the connection before it sent anything .*one client"):
        peer.port.read(1)
    with pytest.raises(cpx.CpxClosed, match=r"closed the connection before it sent anything .*one client"):
        for _ in range(100):        # the reset may take a write or two to be seen
            peer.port.write(bytes(1000))


def test_a_frame_outside_the_mtu_is_not_a_cpx_stream(peer):
    peer.conn.sendall(struct.pack("<H", 4000) + bytes(10))
    with pytest.raises(ConnectionError, match="CPX frame of 4000 bytes .* not a CPX stream"):
        peer.port.read(1)


@pytest.mark.parametrize("url", ["cpx://", "cpx://host:port", "cpx://192.168.4.1/x", "cpx://h?x=1"])
def test_a_url_that_is_not_a_cpx_port_is_one_line(url):
    with pytest.raises(LinkError, match="a CPX port is cpx://HOST"):
        cpx.parse_url(url)


def test_the_default_port_is_the_decks():
    assert cpx.parse_url("cpx://192.168.4.1") == ("192.168.4.1", 5000)
    assert cpx.parse_url("cpx://localhost:6000") == ("localhost", 6000)


def test_nothing_listening_is_one_line():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(LinkError, match=rf"cannot open port cpx://127.0.0.1:{port}: .*refused"):
        cpx.CpxPort(f"cpx://127.0.0.1:{port}")
