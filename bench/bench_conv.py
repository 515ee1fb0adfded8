"""rv32imc instructions of the per-frame CNN front-end kernels. Prints figures; asserts nothing.

    python bench/bench_conv.py [--quant int8,int16] [--only conv3x3,...]

Each model is a step model of tests/backend/test_conv.py (one frame in, a tanh state and a Dense(3) out;
keras seed 0, calibrated on 48 random frames), generated for qemu_riscv32 and run by that test's bare-metal
driver over 6 frames: instructions per step are minstret around edgernn_step under QEMU's -icount shift=0
(retired instructions, exact; the same on every step, the median printed). MACs per step: the convolutions'
(out_h * out_w * out_c * k_h * k_w * in_c, depthwise without in_c) and the FULLY_CONNECTEDs'. The rows "no
front end" are the step without a convolution (the frame flattened into the same state and Dense): what a
row's front end costs is its figure less that of the step of its output's size (16x16x16: all but the
conv3x3 of 16x16x8 -> 16, whose output is 16x16x16 too). Each row's
bytes are checked against the LiteRT interpreter: a figure counts only at 0 mismatching bytes.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def bench_cases():
    from tests.backend.test_conv import _layers

    L = _layers()
    return {
        "no front end 16x16x16 (the rest of the step)": ((16, 16, 16), lambda x: x),
        "no front end 16x16x8": ((16, 16, 8), lambda x: x),
        "no front end 8x8x16 (the rest of the pools' steps)": ((8, 8, 16), lambda x: x),
        "conv3x3 16x16x8->16 same relu": ((16, 16, 8), lambda x: L.Conv2D(16, 3, padding="same", activation="relu")(x)),
        "conv1x1 16x16x16->16": ((16, 16, 16), lambda x: L.Conv2D(16, 1)(x)),
        "depthwise3x3 16x16x16": ((16, 16, 16), lambda x: L.DepthwiseConv2D(3, padding="same")(x)),
        "maxpool2 16x16x16": ((16, 16, 16), lambda x: L.MaxPooling2D(2)(x)),
        "avgpool2 16x16x16": ((16, 16, 16), lambda x: L.AveragePooling2D(2)(x)),
        "stack 16x16x1 (test_conv's)": ((16, 16, 1), lambda x: L.GlobalAveragePooling2D()(
            L.SeparableConv2D(8, 3, padding="same", activation="relu")(
                L.MaxPooling2D(2)(L.Conv2D(8, 3, padding="same", activation="relu6")(x))))),
    }


def macs(folder: Path) -> int:
    from edgernn.backend.reader import read_tflite

    g = read_tflite(folder / "step.tflite")
    total = 0
    for op in g.operators:
        out = g.tensors[op.outputs[0]].shape
        w = g.tensors[op.inputs[1]].shape if len(op.inputs) > 1 and op.inputs[1] >= 0 else ()
        if op.op == "CONV_2D":
            total += int(np.prod(out[1:])) * w[1] * w[2] * w[3]
        elif op.op == "DEPTHWISE_CONV_2D":
            total += int(np.prod(out[1:])) * w[1] * w[2]
        elif op.op == "FULLY_CONNECTED":
            total += int(np.prod(out)) * w[-1]
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quant", default="int8")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    from tests.backend.test_conv import STATES, _model, convert_case, frames, run_qemu
    from tests.support.backend_harness import compare
    from edgernn.tflite.oracle import step_records

    cases = bench_cases()
    names = [n for n in cases if not args.only or any(o in n for o in args.only.split(","))]
    print("| model | quant | instructions/step | MACs/step | instr/MAC | mismatching bytes |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for quant in args.quant.split(","):
            for i, name in enumerate(names):
                shape, body = cases[name]
                folder = Path(tmp) / f"m{i}_{quant}"
                folder.mkdir()
                (folder / "step.tflite").write_bytes(convert_case(_model(shape, body), shape, quant))
                xq = frames(folder, shape, steps=6)
                ref, _ = step_records(folder / "step.tflite", xq, STATES)
                got, instr = run_qemu(folder, xq, ref.shape[1])
                bad = compare(got, ref, quant)["mismatches"]
                per_step = int(np.median(instr))
                m = macs(folder)
                print(f"| {name} | {quant} | {per_step:,} | {m:,} | {per_step / m:.2f} | {bad} |", flush=True)


if __name__ == "__main__":
    main()
