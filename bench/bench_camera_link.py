"""A full AI-deck camera frame (324x244x1 int8, 79,056 bytes a step) through the validation link: what the
device's HELLO announces (the largest frame it receives and the largest it sends), the link's bytes per
second of host time, the cycles per step on the board's counter, and parity. Prints figures; asserts nothing.

    python bench/bench_camera_link.py [--boards host,qemu_riscv32,gvsoc_gap8] [--steps 3] [--keep DIR]

The model is edgernn/testing/frames_zoo.camera_gru (a strided 3x3 convolution, a 4x4 pooling, Dense(8), GRU(6),
Dense(2)); frames are moving_blobs at the camera's size. Each board's figures are valid only beside its parity
PASS with 0 mismatching bytes. gvsoc_gap8 needs GAP_SDK_HOME; its cycles are GVSOC's timing model (the whole
step as the FC sees it, in cluster cycles), not a measurement of a GAP8 chip.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from edgernn.testing.frames_zoo import CAMERA, camera_gru, moving_blobs


def run_board(board: str, work: Path, steps: int, link_name: str | None = None) -> float:
    """Build and validate; returns the link's host seconds per step."""
    from edgernn.pipeline.build import build_model
    from edgernn.validate.run import validate

    name = f"{board}-{link_name}" if link_name else board
    out = work / name
    started = time.monotonic()
    build_model(camera_gru(), out, board=board, quant="int8", calib=moving_blobs(2, 4, *CAMERA, seed=1),
                link=link_name)
    built = time.monotonic() - started
    report = validate(out, data=moving_blobs(1, steps, *CAMERA, seed=3), json_path=work / f"{name}.json")
    link, device, ref = report["link"], report["device"], report["reference"]
    print(f"{name}: parity {'PASS' if report['pass'] else 'FAIL'}, {ref['mismatches']} mismatching output bytes, "
          f"{ref['state_mismatches']} state, over {report['steps']} steps; link: {link['transport']}")
    print(f"  protocol version {link['protocol_version']}; device frames (HELLO): receives {link['device_frames']['receives']} B, "
          f"sends {link['device_frames']['sends']} B")
    print(f"  link: {link['payload_bytes']} payload bytes in {link['seconds']:.1f} s of host time "
          f"({link['payload_bytes'] / link['seconds'] / 1000:.1f} KB/s), {link['seconds'] / report['steps']:.1f} s a step")
    print(f"  cycles per step {device['cycles_per_step']:.0f} ({device.get('cycle_counter')}); build {built:.0f} s")
    return link["seconds"] / report["steps"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", default="host,qemu_riscv32")
    parser.add_argument("--links", default="", help="comma-separated links to build each board with (where it has them)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="build folders here (kept) instead of a temporary folder")
    args = parser.parse_args(argv)
    work = args.keep or Path(tempfile.mkdtemp(prefix="edgernn-camera-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        from edgernn.targets.board import load_board

        for board in args.boards.split(","):
            links = [link for link in args.links.split(",") if link and link in load_board(board).serial.links]
            seconds = {link: run_board(board, work, args.steps, link) for link in links or [None]}
            if len(seconds) > 1 and "uart" in seconds:
                for link, s in seconds.items():
                    if link != "uart":
                        print(f"{board}: host seconds per camera frame over {link} {s:.2f}, over uart "
                              f"{seconds['uart']:.2f}: {s / seconds['uart']:.3f}x")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
