"""Benchmark of the validation link.

1. Steps per second through validate() on each emulated board (host, qemu_riscv32), with the toy
   test-double model (link-bound) or with a real build folder given by --out BOARD=OUT.
2. Link efficiency at a simulated 115200 baud (8N1: 11520 bytes/s each way): the host-board device
   behind a port wrapper that paces bytes at the line rate; payload bytes per second (inputs sent,
   outputs + cycle counts + states received) against the line rate.

    python bench/bench_link.py [--steps 5000] [--out qemu_riscv32=/path/to/OUT ...]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from edgernn.link import LinkClient, open_port
from edgernn.targets import device as devices
from edgernn.validate.run import validate

ROOT = Path(__file__).resolve().parents[1]


class PacedPort:
    """A port that moves bytes no faster than a UART at ``baud`` (10 bit times per byte)."""

    def __init__(self, inner, baud: int):
        self.inner, self.baudrate, self.port = inner, baud, inner.port
        self._byte_s = 10.0 / baud
        self._rx_free_at = 0.0

    @property
    def in_waiting(self):
        return self.inner.in_waiting

    def write(self, data):
        n = self.inner.write(data)
        time.sleep(len(data) * self._byte_s)  # the line is busy while the bytes go out
        return n

    def read(self, n=1):
        data = self.inner.read(n)
        if data:
            now = time.monotonic()
            self._rx_free_at = max(self._rx_free_at, now) + len(data) * self._byte_s
            time.sleep(max(0.0, self._rx_free_at - now))
        return data

    def flush(self):
        self.inner.flush()

    def close(self):
        self.inner.close()


def toy_out(folder: Path, board: str) -> Path:
    from edgernn.testing.toy_build import make_toy_out

    return make_toy_out(folder / board, board=board)


def bench_validate(board: str, out: Path | None, steps: int, tmp: Path) -> dict:
    from edgernn.testing.toy_build import toy_reference

    ref = None if out else toy_reference
    out = out or toy_out(tmp, board)
    report = validate(out, steps=steps, reference=ref, json_path=tmp / f"{board}.json")
    return {"board": board, "model": "toy test double" if ref else str(out), "steps": steps,
            "steps_per_second": report["link"]["steps_per_second"], "pass": report["pass"],
            "cycles_per_step": report["device"]["cycles_per_step"],
            "macs_per_step": report["device"]["macs_per_step"]}


def bench_efficiency(steps: int, states: str, tmp: Path, baud: int = 115200) -> dict:
    elf = devices.build_elf(ROOT / "tests" / "fixtures" / "toy_model", "host", tmp / "eff").elf
    xs = np.random.default_rng(0).integers(-127, 128, (steps, 3)).astype(np.int8)
    with devices.start(elf, "host") as device:
        link = LinkClient(PacedPort(open_port(device.url, baud), baud), url=device.url, baud=baud)
        link.hello()
        start = time.monotonic()
        result = link.run(xs, states=states)
        seconds = time.monotonic() - start
        link.close()
    payload_per_s = link.payload_bytes / seconds
    line = baud / 10
    return {"baud": baud, "states": states, "steps": steps, "frames": result.frames,
            "payload_bytes_per_s": round(payload_per_s), "line_bytes_per_s": line,
            "efficiency": round(payload_per_s / line, 3), "steps_per_second": round(steps / seconds, 1)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--efficiency-steps", type=int, default=2000)
    parser.add_argument("--out", action="append", default=[], help="BOARD=OUT: a real build folder")
    args = parser.parse_args(argv)
    outs = dict(item.split("=", 1) for item in args.out)
    results = {"validate": [], "efficiency": []}
    tmp = Path(tempfile.mkdtemp(prefix="edgernn_bench_"))
    try:
        for board in ("host", "qemu_riscv32"):
            tools = {"host": ["gcc"], "qemu_riscv32": ["riscv64-unknown-elf-gcc", "qemu-system-riscv32"]}[board]
            if any(shutil.which(t) is None for t in tools):
                print(f"{board}: skipped, needs {', '.join(tools)}")
                continue
            row = bench_validate(board, Path(outs[board]) if board in outs else None, args.steps, tmp)
            results["validate"].append(row)
            print(f"{board:13s} {row['model']}: {row['steps_per_second']:>10} steps/s through validate, "
                  f"{row['cycles_per_step']:.0f} cycles/step, parity {'PASS' if row['pass'] else 'FAIL'}")
        for states in ("none", "last", "every"):
            row = bench_efficiency(args.efficiency_steps, states, tmp)
            results["efficiency"].append(row)
            print(f"115200 baud, states={states:5s}: {row['payload_bytes_per_s']} payload B/s of "
                  f"{row['line_bytes_per_s']:.0f} B/s line rate = {row['efficiency']:.1%} "
                  f"({row['steps_per_second']} steps/s, {row['frames']} frames)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
