"""Peak memory of `edgernn validate` against the number of steps, on the host board.

    python bench/bench_validate_memory.py                  # toy firmware: 10^4, 10^5, 10^6 steps
    python bench/bench_validate_memory.py --model gru      # a real int8 GRU build (interpreter + float twin)
    python bench/bench_validate_memory.py --steps 1000000  # one size

Each run is a fresh Python process; its peak resident set size (ru_maxrss) is printed with the
steps per second. Validation streams, so the peak should not grow with the steps.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(kind: str, out: Path, steps: int) -> None:
    from edgernn.validate.run import validate

    reference = None
    if kind == "toy":
        from edgernn.testing.toy_build import ToyReference, make_toy_out

        out = make_toy_out(out / "toy")
        reference = ToyReference()
    started = time.monotonic()
    report = validate(out, steps=steps, reference=reference, save=out.parent / f"{kind}.npz")
    seconds = time.monotonic() - started
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"model": kind, "steps": steps, "pass": report["pass"], "peak_rss_mib": round(peak_kib / 1024, 1),
                      "seconds": round(seconds, 1), "steps_per_second": round(steps / seconds)}))


def build_gru(folder: Path) -> Path:
    code = ("import keras; keras.utils.set_random_seed(0); "
            "keras.Sequential([keras.Input((None, 3)), keras.layers.GRU(16, return_sequences=True), "
            f"keras.layers.Dense(2)]).save({str(folder / 'gru.keras')!r})")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    out = folder / "gru_build"
    subprocess.run([sys.executable, "-m", "edgernn", "build", str(folder / "gru.keras"), "--board", "host",
                    "-o", str(out), "--quant", "int8"], check=True, capture_output=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("toy", "gru"), default="toy")
    parser.add_argument("--steps", type=int, action="append")
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.child:
        child(args.model, Path(args.out), args.steps[0])
        return
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        out = build_gru(tmp) if args.model == "gru" else tmp
        print(f"{'model':6} {'steps':>9} {'peak RSS MiB':>13} {'seconds':>8} {'steps/s':>8}  pass")
        for steps in args.steps or [10_000, 100_000, 1_000_000]:
            done = subprocess.run([sys.executable, __file__, "--child", "--model", args.model, "--out", str(out),
                                   "--steps", str(steps)], capture_output=True, text=True, env=env)
            if done.returncode != 0:
                print(f"{args.model:6} {steps:>9} failed: {done.stderr.strip().splitlines()[-1:]}")
                continue
            row = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{row['model']:6} {steps:>9} {row['peak_rss_mib']:>13} {row['seconds']:>8} "
                  f"{row['steps_per_second']:>8}  {row['pass']}")
            if args.model == "toy":
                import shutil

                shutil.rmtree(tmp / "toy", ignore_errors=True)


if __name__ == "__main__":
    main()
