"""CPX, the Crazyflie Packet eXchange, over TCP: the host's end of the AI-deck's WiFi link (``cpx://HOST[:PORT]``).

The deck's ESP32 serves one TCP client (port 5000; 192.168.4.1 in its own access point). A frame on that socket is
a u16 little-endian length, then a CPX packet of that many bytes: a 2-byte header and its data, at most 1022 bytes
in all (the MTU). Header byte 0: destination in bits 0-2, source in bits 3-5, last-packet flag in bit 6; byte 1:
function in bits 0-5, version (0) in bits 6-7. The numbers are Bitcraze's (aideck-esp-firmware ``main/cpx.h``,
cflib ``cflib/cpx``): tests/link/test_cpx.py holds this codec to cflib's own.

edgernn's validation protocol travels as the data of CPX packets between WIFI_HOST (3) and GAP8 (4) with function
``FUNCTION`` (0x20, outside the functions Bitcraze assigns, 0x01-0x0F), so it passes beside CONSOLE and APP
traffic. Its bytes are a stream (COBS frames, docs/protocol.md): a write is cut into packets at the MTU, the
last-packet flag on its last part, and the data of the packets that arrive are joined in order; packets of other
functions or versions are set aside (``other``) and never reach the stream.

``CpxPort`` offers the part of pyserial's interface that ``edgernn.link.client.LinkClient`` uses (``read`` with
a timeout, ``write``, ``flush``, ``in_waiting``, ``close``), so the protocol runs over it unchanged. cflib's own
client (``cflib.cpx.CPX`` with ``SocketTransport``) is not used for the session: it prints to stdout, sends with
``send`` (a partial send loses the rest), loops forever on a closed socket, and refuses every function outside its
enumeration, edgernn's among them.
"""

from __future__ import annotations

import select
import socket
import struct
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from edgernn.errors import LinkError

DEFAULT_PORT = 5000
MTU = 1022                      # header + data, on the ESP32's WiFi and SPI alike
HEADER = 2
FUNCTION = 0x20                 # edgernn's validation protocol (templates/targets/gap8/hal/link_cpx.h)
VERSION = 0

# Bitcraze's targets and functions (aideck-esp-firmware main/cpx.h)
STM32, ESP32, WIFI_HOST, GAP8 = 1, 2, 3, 4
SYSTEM, CONSOLE, CRTP, WIFI_CTRL, APP, TEST, BOOTLOADER = 1, 2, 3, 4, 5, 0x0E, 0x0F
LAST_PACKET = 0x40


@dataclass(frozen=True)
class Packet:
    destination: int
    source: int
    function: int
    data: bytes
    last: bool = True
    version: int = VERSION

    def wire(self) -> bytes:
        """The packet with its u16 length in front: one frame of the TCP stream."""
        if len(self.data) > MTU - HEADER:
            raise ValueError(f"a CPX packet carries at most {MTU - HEADER} bytes of data, not {len(self.data)}")
        route = (self.destination & 0x7) | ((self.source & 0x7) << 3) | (LAST_PACKET if self.last else 0)
        function = (self.function & 0x3F) | ((self.version & 0x3) << 6)
        return struct.pack("<HBB", HEADER + len(self.data), route, function) + bytes(self.data)


def parse(packet: bytes) -> Packet:
    """A CPX packet (header and data, without the length in front)."""
    if len(packet) < HEADER:
        raise ValueError(f"a CPX packet has a {HEADER}-byte header; got {len(packet)} bytes")
    route, function = packet[0], packet[1]
    return Packet(destination=route & 0x7, source=(route >> 3) & 0x7, function=function & 0x3F,
                  data=bytes(packet[HEADER:]), last=bool(route & LAST_PACKET), version=function >> 6)


def split(data: bytes, *, destination: int = GAP8, source: int = WIFI_HOST, function: int = FUNCTION) -> list[Packet]:
    """``data`` in packets that fit the MTU, the last-packet flag on the last one only (an empty write: none)."""
    room = MTU - HEADER
    parts = [bytes(data[at:at + room]) for at in range(0, len(data), room)]
    return [Packet(destination, source, function, part, last=i == len(parts) - 1) for i, part in enumerate(parts)]


def parse_url(url: str) -> tuple[str, int]:
    """(host, port) of ``cpx://HOST[:PORT]``; a one-line LinkError for anything else."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme != "cpx" or not parts.hostname or port == -1 or parts.path not in ("", "/") or parts.query:
        raise LinkError(f"cannot open port {url}: a CPX port is cpx://HOST[:PORT] (port {DEFAULT_PORT} by default), "
                        "e.g. cpx://192.168.4.1")
    return parts.hostname, port if port is not None else DEFAULT_PORT


class CpxClosed(ConnectionError):
    """The deck's end of the TCP connection closed (the ESP32 serves one client: another may hold it)."""


class CpxPort:
    """A pyserial-like byte port over CPX/TCP (see the module's docstring)."""

    def __init__(self, url: str, *, timeout: float = 0.05, write_timeout: float | None = 5.0,
                 connect_timeout: float = 10.0):
        self.port = url
        self.baudrate = 0                   # no line rate: LinkClient counts no wire time
        self.timeout = timeout
        self.write_timeout = write_timeout
        self.other: list[Packet] = []       # packets of other functions, kept for whoever wants them
        self.keep_other = 64                # ... the last this many (``packets`` takes them out)
        self.packets_in = 0
        self.packets_out = 0
        self._stream = bytearray()          # edgernn's bytes, joined from its packets
        self._raw = bytearray()             # TCP bytes not yet a whole frame
        self._closed_by_peer = False
        self._closed_how = ""
        host, port = parse_url(url)
        try:
            self._sock = socket.create_connection((host, port), timeout=connect_timeout)
        except OSError as exc:
            reason = exc.strerror or str(exc) or type(exc).__name__
            raise LinkError(f"cannot open port {url}: {reason}") from None
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    # ---- reading ----

    def _take_frames(self) -> None:
        while len(self._raw) >= 2:
            (length,) = struct.unpack_from("<H", self._raw)
            if length < HEADER or length > MTU:
                raise ConnectionError(f"the deck sent a CPX frame of {length} bytes (a frame is {HEADER} to {MTU}): "
                                      "not a CPX stream")
            if len(self._raw) < 2 + length:
                return
            packet = parse(bytes(self._raw[2:2 + length]))
            del self._raw[:2 + length]
            self.packets_in += 1
            if packet.function == FUNCTION and packet.version == VERSION and packet.destination == WIFI_HOST:
                self._stream += packet.data
            else:
                self.other.append(packet)
                del self.other[:-self.keep_other]

    def _receive(self, wait: float | None) -> None:
        """Take what the socket holds, waiting up to ``wait`` seconds for the first byte. Once the deck has closed
        the connection, what it sent before is still read; then CpxClosed says how it ended."""
        if self._closed_by_peer:
            if not self._stream:
                raise CpxClosed(self._closed_how)
            return
        ready, _, _ = select.select([self._sock], [], [], wait)
        while ready:
            try:
                chunk = self._sock.recv(65536)
            except ConnectionResetError:
                # a close with our bytes unread comes as a reset (the ESP32 closing a second client at once)
                chunk = b""
            if not chunk:
                self._closed_by_peer = True
                self._take_frames()
                self._closed_how = "the deck closed the connection"
                if not self.packets_in and not self._raw:
                    self._closed_how += " before it sent anything (its ESP32 serves one client: is another connected?)"
                elif self._raw:
                    whole = 2 + struct.unpack_from("<H", self._raw)[0] if len(self._raw) >= 2 else "?"
                    self._closed_how += f" {len(self._raw)} of {whole} bytes into a CPX frame"
                if not self._stream:
                    raise CpxClosed(self._closed_how)
                return
            self._raw += chunk
            ready, _, _ = select.select([self._sock], [], [], 0)
        self._take_frames()

    def packets(self, wait: float | None = 0.0) -> list[Packet]:
        """The packets of other functions than edgernn's protocol (APP, ...) that have arrived, taken out; waits up
        to ``wait`` seconds for the first byte."""
        self._receive(wait)
        out, self.other = self.other, []
        return out

    def read(self, size: int = 1) -> bytes:
        """Up to ``size`` bytes of edgernn's stream: what is there, else what arrives within the timeout."""
        if not self._stream:
            deadline = None if self.timeout is None else time.monotonic() + self.timeout
            while not self._stream:
                wait = None if deadline is None else max(0.0, deadline - time.monotonic())
                self._receive(wait)
                if deadline is not None and time.monotonic() >= deadline:
                    break
        else:
            self._receive(0)
        data = bytes(self._stream[:size])
        del self._stream[:size]
        return data

    @property
    def in_waiting(self) -> int:
        if not self._stream and not self._closed_by_peer:
            self._receive(0)
        return len(self._stream)

    def reset_input_buffer(self) -> None:
        self._stream.clear()

    # ---- writing ----

    def write(self, data: bytes) -> int:
        """Send ``data`` as edgernn's packets to the GAP8; raises serial's write timeout when the deck takes no
        byte for ``write_timeout`` seconds."""
        wire = b"".join(p.wire() for p in split(bytes(data)))
        self._sock.settimeout(self.write_timeout)
        try:
            self._sock.sendall(wire)
        except socket.timeout:
            import serial

            raise serial.SerialTimeoutException("write timeout") from None
        except OSError as exc:
            if not self.packets_in and not self._raw:
                raise CpxClosed("the deck closed the connection before it sent anything (its ESP32 serves one "
                                "client: is another connected?)") from None
            raise CpxClosed(f"the deck's connection broke ({exc.strerror or exc})") from None
        self.packets_out += (len(data) + MTU - HEADER - 1) // (MTU - HEADER)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass

    @property
    def is_open(self) -> bool:
        return self._sock.fileno() >= 0
