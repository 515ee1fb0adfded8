"""Benchmark of the thread team on the host: wall time per step of an int8 LSTM with 1, 2 and 4 threads.

The generated firmware of a wide int8 LSTM is compiled -O2 with -DEDGERNN_THREADS=N and run over a long
sequence; a time per step is the best of a few runs of 2N steps less a run of N steps, so start-up
cancels out. This measures the POSIX thread team of templates/firmware/edgernn_team.c, not GAP8's
cluster; on a loaded or 2-core machine the figures mostly show the cost of a split. Prints figures;
asserts nothing.

    python bench/bench_team.py [--units 256] [--steps 2000]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np


def wide_lstm(units: int, seed: int = 0):
    import keras

    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((None, 8)), keras.layers.LSTM(units, return_sequences=True)],
                            name=f"lstm{units}")


def seconds(exe: Path, xq: np.ndarray, work: Path, repeats: int = 3) -> float:
    inp, out = work / f"{exe.name}.in", work / f"{exe.name}.out"
    inp.write_bytes(np.int32(xq.shape[0]).tobytes() + np.ascontiguousarray(xq).tobytes())
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([str(exe), str(inp), str(out)], check=True, capture_output=True)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=256)
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()

    from edgernn.pipeline.convert import convert
    from edgernn.testing import backend_harness as H
    from edgernn.testing import zoo

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        folder = work / "out"
        with contextlib.redirect_stdout(io.StringIO()):
            convert(wide_lstm(args.units), folder, quant="int8")
        xs = zoo.trajectories(1, 2 * args.steps, 8, seed=1)[0]
        xq = H.quantize_x(folder, xs)
        print(f"int8 LSTM({args.units}), 8 inputs; host wall time per step (best of 3, 2N - N steps, N = {args.steps})")
        print(f"{'threads':>8} {'us/step':>10} {'vs 1':>8}")
        base = None
        for n in (1, 2, 4):
            b = H.build(folder, cflags=["-O2", f"-DEDGERNN_THREADS={n}", "-pthread"], name=f"bench_t{n}")
            per_step = (seconds(b.exe, xq, work) - seconds(b.exe, xq[: args.steps], work)) / args.steps
            base = base or per_step
            print(f"{n:>8} {per_step * 1e6:>10.2f} {base / per_step:>7.2f}x")


if __name__ == "__main__":
    main()
