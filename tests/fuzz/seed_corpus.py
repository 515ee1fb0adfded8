"""Seed corpus for the frame-parser fuzzer: real frames of each message type, whole and cut."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from edgernn.link import framing  # noqa: E402

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
seeds = [
    framing.encode_frame(0x01, 1),
    framing.encode_frame(0x02, 2),
    framing.encode_frame(0x03, 3, b"\x01\x02\x00" + bytes(range(6))),
    framing.encode_frame(0x81, 4, bytes(100)),
    framing.encode_frame(0xFF, 0xFFFF, b"\x01\x01\x00\x00"),
    framing.encode_frame(0x03, 5, b"\xff" * 260),
]
for i, seed in enumerate(seeds):
    (out / f"seed{i}").write_bytes(seed)
    (out / f"cut{i}").write_bytes(seed[: len(seed) // 2] + seeds[0])
