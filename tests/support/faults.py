"""A fault-injecting wrapper around a pyserial port, for proving the link's recovery.

It corrupts the byte stream in either direction: flips bits, drops, duplicates and truncates
bytes, repeats whole writes, stalls answers past the host's timeout, and resets the device at a
chosen request. Deterministic for a given seed; every injected fault is counted in ``injected``.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable


@dataclass
class FaultPlan:
    flip: float = 0.0          # per byte: flip one random bit
    drop: float = 0.0          # per byte: lose it
    duplicate: float = 0.0     # per byte: send it twice
    truncate: float = 0.0      # per chunk: lose the tail of the chunk, delimiter included
    repeat: float = 0.0        # per host write: the whole frame arrives twice
    stall: float = 0.0         # per host write: its answer is held back until the host writes again
    reset_at_write: int | None = None   # reset the device just before this host write (1-based)
    to_device: bool = True     # apply byte faults to host -> device bytes
    from_device: bool = True   # apply byte faults to device -> host bytes
    seed: int = 0


@dataclass
class FaultyPort:
    """Looks like a pyserial port (read, write, in_waiting, flush, close) around a real one."""

    inner: object
    plan: FaultPlan
    reset_device: Callable[[], None] | None = None
    injected: Counter = field(default_factory=Counter)

    def __post_init__(self):
        self._rng = random.Random(self.plan.seed)
        self._writes = 0
        self._stalling = False
        self._held = bytearray()

    # pyserial attributes the client reads
    @property
    def port(self):
        return getattr(self.inner, "port", "faulty port")

    @property
    def baudrate(self):
        return getattr(self.inner, "baudrate", 0)

    @property
    def in_waiting(self) -> int:
        return 0 if self._stalling else self.inner.in_waiting

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        self.inner.close()

    def _mangle(self, data: bytes) -> bytes:
        plan, rng = self.plan, self._rng
        out = bytearray()
        for byte in data:
            if plan.drop and rng.random() < plan.drop:
                self.injected["drop"] += 1
                continue
            if plan.flip and rng.random() < plan.flip:
                byte ^= 1 << rng.randrange(8)
                self.injected["flip"] += 1
            out.append(byte)
            if plan.duplicate and rng.random() < plan.duplicate:
                out.append(byte)
                self.injected["duplicate"] += 1
        if plan.truncate and out and rng.random() < plan.truncate:
            cut = rng.randrange(len(out))
            del out[cut:]
            self.injected["truncate"] += 1
        return bytes(out)

    def write(self, data: bytes) -> int:
        self._writes += 1
        if self.plan.reset_at_write == self._writes and self.reset_device is not None:
            self.reset_device()
            self.injected["reset"] += 1
        if self._stalling:
            # The host gave up waiting and wrote again: release what was held back.
            self._stalling = False
        elif self.plan.stall and self._rng.random() < self.plan.stall:
            self._stalling = True
            self.injected["stall"] += 1
        wire = self._mangle(data) if self.plan.to_device else bytes(data)
        if self.plan.repeat and self._rng.random() < self.plan.repeat:
            wire += wire
            self.injected["repeat"] += 1
        self.inner.write(wire)
        return len(data)

    def read(self, n: int = 1) -> bytes:
        data = self.inner.read(n)
        if self._stalling:
            self._held += data
            return b""
        if self._held:
            data = bytes(self._held) + data
            self._held.clear()
        return self._mangle(data) if (self.plan.from_device and data) else data
