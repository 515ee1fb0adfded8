"""Step int8 against fused int8 on a trained 64-unit LSTM: error against the float model, and cost in C.

The LSTM(64) + Dense(1) predicts the next sample of noisy sines (examples/sine_lstm's data). It is
calibrated on 40-step sequences and tested on held-out sequences 5x longer (200 steps). For each path
(`--mode step`, `--mode fused`) the benchmark prints the int8 model's error against the float Keras
model over the test sequences (rmse, max_abs, l2r, and the l2r of the last 40 steps, to show drift),
and the instructions per step of the generated C (gcc -O2, x86-64, valgrind --tool=callgrind, the
difference of an N-step and a 2N-step run divided by N). Prints figures; asserts nothing.

    python bench/bench_fused.py [--epochs 6] [--steps 200]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from edgernn.testing.bench import instructions

ROOT = Path(__file__).resolve().parent.parent


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def train(epochs: int):
    import keras

    sines = _module(ROOT / "examples" / "sine_lstm" / "train.py", "sine_train").sines
    keras.utils.set_random_seed(0)
    data = sines(512, 40, seed=0)
    x, y = data[:, :-1], data[:, 1:]
    model = keras.Sequential([keras.Input((None, 1)), keras.layers.LSTM(64, return_sequences=True),
                              keras.layers.Dense(1)], name="sine_lstm64")
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    model.fit(x, y, epochs=epochs, batch_size=32, verbose=0)
    return model, x[:32], sines(8, 200, seed=1)[:, :-1]


def errors(got: np.ndarray, ref: np.ndarray) -> dict:
    err = got - ref
    tail = slice(-40, None)
    return {
        "rmse": float(np.sqrt(np.mean(err ** 2))),
        "max_abs": float(np.max(np.abs(err))),
        "l2r": float(np.linalg.norm(err) / np.linalg.norm(ref)),
        "l2r_last40": float(np.linalg.norm(err[:, tail]) / np.linalg.norm(ref[:, tail])),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--steps", type=int, default=200, help="steps of the callgrind runs")
    ap.add_argument("--keep", help="keep the work folder here")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("bench_fused: valgrind is not installed (apt-get install valgrind)")

    from edgernn.testing import backend_harness as H

    from edgernn.pipeline.convert import convert
    from edgernn.tflite.oracle import Stepper

    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="edgernn-bench-fused-"))
    work.mkdir(parents=True, exist_ok=True)
    model, calib, test = train(args.epochs)
    reference = np.asarray(model(test), np.float32)
    rows = []
    for mode in ("step", "fused"):
        folder = work / mode
        with contextlib.redirect_stdout(io.StringIO()):
            manifest = convert(model, folder, quant="int8", calib=calib, mode=mode)
        got = Stepper.of_folder(folder).run(test, quantize_input=True)
        row = {"mode": mode, **errors(got.y_float, reference), "ops": manifest.ops}
        b = H.build(folder, cflags=["-O2"], name="driver_bench")
        xs = np.concatenate([test[0], test[1]])[: 2 * args.steps]
        xq = H.quantize_x(folder, xs)
        n1 = instructions(b.exe, xq[: args.steps], folder)
        n2 = instructions(b.exe, xq, folder)
        row.update(instr=(n2 - n1) / args.steps, arena=b.facts.arena_bytes, weights=b.facts.weight_bytes,
                   state=b.facts.state_bytes)
        rows.append(row)
    print(f"LSTM(64) + Dense(1), trained {args.epochs} epochs; calibration {calib.shape[0]} x {calib.shape[1]} "
          f"steps, test {test.shape[0]} x {test.shape[1]} steps (5x longer); errors against the float Keras model")
    print(f"{'mode':<7}{'rmse':>10}{'max_abs':>10}{'l2r':>9}{'l2r last40':>12}{'instr/step':>12}{'arena B':>9}"
          f"{'weights B':>11}{'state B':>9}")
    for r in rows:
        print(f"{r['mode']:<7}{r['rmse']:>10.5f}{r['max_abs']:>10.4f}{r['l2r']:>9.4f}{r['l2r_last40']:>12.4f}"
              f"{r['instr']:>12.0f}{r['arena']:>9}{r['weights']:>11}{r['state']:>9}")
    for r in rows:
        print(f"{r['mode']}: ops {', '.join(r['ops'])}")
    print("instructions: x86-64, gcc -O2, valgrind --tool=callgrind")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
