"""Benchmark of the generated C: instructions per step, arena against its liveness bound, code bytes.

For the int8 (or, with --quant int16, 16x8) step models of a 64-unit LSTM and of a CfC, and, in int8,
for the same LSTM converted with --mode fused to TFLite's UNIDIRECTIONAL_SEQUENCE_LSTM (time 1, streamed: the state
stays in the op's variable tensors), the firmware is compiled -O2 for x86-64 and run under
`valgrind --tool=callgrind`; instructions per step are the difference between a run of N and a run of 2N
steps, divided by N, so start-up and file I/O cancel out. Prints figures; asserts nothing.

    python bench/bench_backend.py [--steps 200] [--quant int16] [--cflags "-O2 -fno-tree-vectorize -DEDGERNN_FC_SCALAR"]

The int8 dot products take SSE2 (pmaddwd) on x86-64; --cflags "-O2 -fno-tree-vectorize -DEDGERNN_FC_SCALAR"
gives the count of a scalar build, closer to what a scalar MCU runs.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import sys
import tempfile
from pathlib import Path

from edgernn.testing.bench import instructions


def lstm64(seed: int = 0):
    import keras

    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((None, 3)), keras.layers.LSTM(64, return_sequences=True)], name="lstm64")


def cfc64(seed: int = 0):
    import keras
    import ncps.keras

    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((None, 3)), ncps.keras.CfC(64, return_sequences=True)], name="cfc64")


def bench(name: str, builder, steps: int, work: Path, cflags: list[str], quant: str = "int8",
          mode: str = "step") -> dict:
    from edgernn.pipeline.convert import convert
    from edgernn.testing import backend_harness as H
    from edgernn.testing import zoo

    folder = work / name
    with contextlib.redirect_stdout(io.StringIO()):
        convert(builder(), folder, quant=quant, mode=mode)
    b = H.build(folder, cflags=cflags, name="driver_bench")
    xs = zoo.trajectories(1, 2 * steps, 3, seed=1)[0]
    xq = H.quantize_x(folder, xs)
    n1 = instructions(b.exe, xq[:steps], folder)
    n2 = instructions(b.exe, xq, folder)
    return {
        "model": name,
        "instructions_per_step": (n2 - n1) / steps,
        "arena_bytes": b.facts.arena_bytes,
        "liveness_bound_bytes": b.facts.liveness_bound_bytes,
        "weight_bytes": b.facts.weight_bytes,
        "state_bytes": b.facts.state_bytes,
        "code_bytes": b.code_bytes,
        "ops": ",".join(b.facts.ops),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--keep", help="folder to keep the builds in")
    ap.add_argument("--cflags", default="-O2", help="compiler flags of the firmware (default -O2)")
    ap.add_argument("--quant", default="int8", choices=["int8", "int16"], help="quantization of the models")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("bench_backend: valgrind is not installed (apt-get install valgrind)")
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="edgernn-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    cflags = args.cflags.split()
    q = args.quant
    rows = [bench(f"lstm64_{q}", lstm64, args.steps, work, cflags, q), bench(f"cfc64_{q}", cfc64, args.steps, work, cflags, q)]
    if q == "int8":
        rows.append(bench("lstm64_fused_int8", lstm64, args.steps, work, cflags, q, mode="fused"))
    print(f"{'model':<18}{'instr/step':>12}{'arena B':>9}{'bound B':>9}{'weights B':>11}{'state B':>9}{'code B':>8}")
    for r in rows:
        print(f"{r['model']:<18}{r['instructions_per_step']:>12.0f}{r['arena_bytes']:>9}{r['liveness_bound_bytes']:>9}"
              f"{r['weight_bytes']:>11}{r['state_bytes']:>9}{r['code_bytes']:>8}")
    print(f"x86-64, gcc {args.cflags}, valgrind --tool=callgrind; code bytes: `size` text of kernels + model.c + weights.c "
          "objects minus the weights (they are counted in weights B)")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
