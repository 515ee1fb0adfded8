"""rv32imc instructions of the per-frame CNN front-end kernels, and their MACs per cycle on GAP8 in GVSOC.
Prints figures; asserts nothing.

    python bench/bench_conv.py [--quant int8,int16] [--only conv3x3,...]
    GAP_SDK_HOME=/path/to/gap_sdk python bench/bench_conv.py --board gvsoc_gap8 [--only conv,depthwise] [--steps 6]
    GAP_SDK_HOME=/path/to/gap_sdk python bench/bench_conv.py --board gvsoc_gap8 --only l2 [--steps 6]

Each model is a step model of edgernn/testing/conv_steps.py (one frame in, a tanh state and a Dense(3) out;
keras seed 0, calibrated on 48 random frames), generated for qemu_riscv32 and run by its bare-metal
driver over 6 frames: instructions per step are minstret around edgernn_step under QEMU's -icount shift=0
(retired instructions, exact; the same on every step, the median printed). MACs per step: the convolutions'
(out_h * out_w * out_c * k_h * k_w * in_c, depthwise without in_c) and the FULLY_CONNECTEDs'. The rows "no
front end" are the step without a convolution (the frame flattened into the same state and Dense): what a
row's front end costs is its figure less that of the step of its output's size (16x16x16: all but the
conv3x3 of 16x16x8 -> 16, whose output is 16x16x16 too). Each row's
bytes are checked against the LiteRT interpreter: a figure counts only at 0 mismatching bytes.

--board gvsoc_gap8: GAP8's kernels in GVSOC's timing model (not a chip), int8, the ai_deck firmware built
as bench/bench_gap8.py builds it (EDGERNN_CLUSTER_CORES=1|8, EDGERNN_XPULP=1), fed over the simulated
UART. A kernel's cycles are a difference of two steps: the step with the op less the same step without it
(16x16x4 frames, a CONV_2D to 32 channels, then the op, then a global average pool into the state and
the Dense(3) head), each the cluster master's count of the step's task (dispatch excluded), the median
over the frames from the third on. The placement puts the arena, the weights and so the op's input, output
and filter in cluster L1 (the table prints where). Every step's output and state bytes are held against
LiteRT's. `--only l2`: the 60x60x1 frame model of tests/e2e/test_conv_dma_e2e.py (arena in L2, its
ops in DMA bands), cycles per frame on 8 cores (the cluster's count, median from the third frame; that
test holds its bytes). The ceiling is GVSOC's model of the kernel's inner loop: 1 cycle an instruction, a hardware loop's
back edge free, so the 4x2 CONV_2D's 6 post-increment loads and 8 pv.sdotsp.b make 32 MACs in 14 cycles
(2.29 a core); the depthwise kernel's channel planes, a pixel pair's 3 filter rows as 3 word loads and 6
pv.sdotsp.b, make 18 MACs in 9 cycles (2.0 a core). Neither ceiling counts the requantization of each
output (edgernn_mbqm_hi, ~25 cycles with its mulh) nor the patch or plane copies.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from pathlib import Path

import numpy as np

from edgernn.testing.bench import run_variant
from edgernn.testing.conv_steps import STATES, convert_case, frames, layers, run_qemu, step_model
from edgernn.testing.frames_zoo import L2_FRAME as FRAME
from edgernn.testing.frames_zoo import frame_cfc_l2, moving_blobs


def bench_cases():
    L = layers()
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


# name: (the op's Keras layer, ceiling MAC/cycle per core in GVSOC's model of its inner loop)
GAP8_FRAME = (16, 16, 4)


def gap8_cases():
    L = layers()

    def first(x):
        return L.Conv2D(32, 3, padding="same", activation="relu")(x)

    def rest(x):
        return L.GlobalAveragePooling2D()(x)

    def odd(x):
        return L.Conv2D(30, 2, padding="valid", activation="relu")(x)

    # the depthwise rows after the first: the planes' other paths, held to LiteRT's bytes (a ReLU's clamp,
    # whose requantization needs no sign; stride 2's single pixels; a ReLU6's clamp by p.max and p.min, a row at
    # a time; an odd width, whose last pixel of a row is the C's; 30 channels, a partial quad)
    return {
        "conv3x3 16x16x32->32 same": (lambda x: rest(L.Conv2D(32, 3, padding="same")(first(x))), 32 / 14),
        "depthwise3x3 16x16x32 same": (lambda x: rest(L.DepthwiseConv2D(3, padding="same")(first(x))), 2.0),
        "depthwise3x3 16x16x32 same relu": (lambda x: rest(L.DepthwiseConv2D(3, padding="same", activation="relu")(
            first(x))), 2.0),
        "depthwise3x3 16x16x32 stride 2 relu": (lambda x: rest(L.DepthwiseConv2D(3, strides=2, padding="same",
                                                                                activation="relu")(first(x))), 1.2),
        "depthwise3x3 15x15x30 relu6 (odd width, 30 channels)": (
            lambda x: rest(L.DepthwiseConv2D(3, padding="same", activation="relu6")(odd(x))), 2.0),
        "without the op (the rest of the step)": (lambda x: rest(first(x)), None),
        "without the op, 15x15x30": (lambda x: rest(odd(x)), None),
    }


def base_of(name: str) -> str:
    """The case whose step is name's less its op. A stride-2 row's rest is a smaller step than any base's
    (its pool averages a quarter of the pixels): the table gives its bytes, not its cycles."""
    return "without the op, 15x15x30" if "15x15x30" in name else "without the op (the rest of the step)"


def op_macs(folder: Path) -> dict[str, int]:
    """MACs of each CONV_2D and DEPTHWISE_CONV_2D of a step, by op index."""
    from edgernn.backend.reader import read_tflite

    g = read_tflite(folder / "step.tflite")
    out = {}
    for i, op in enumerate(g.operators):
        shape = g.tensors[op.outputs[0]].shape
        w = g.tensors[op.inputs[1]].shape if len(op.inputs) > 1 else ()
        if op.op == "CONV_2D":
            out[i] = int(np.prod(shape[1:])) * w[1] * w[2] * w[3]
        elif op.op == "DEPTHWISE_CONV_2D":
            out[i] = int(np.prod(shape[1:])) * w[1] * w[2]
    return out


def main_gap8(args) -> None:
    from edgernn.backend import generate_firmware
    from edgernn.targets import device as devices
    from edgernn.targets.gap8 import sdk as gap_sdk
    from edgernn.tflite.oracle import Stepper

    gap_sdk.build_gvsoc()
    board = devices.load_board("gvsoc_gap8")
    cases = gap8_cases()
    names = [n for n in cases if not args.only or any(o in n for o in args.only.split(","))]
    names += [n for n in cases if n.startswith("without") and n not in names and any(base_of(m) == n for m in names)]
    cycles, places, bad, macs_of = {}, {}, {}, {}
    with contextlib.ExitStack() as stack:
        work = Path(args.keep) if args.keep else Path(stack.enter_context(
            tempfile.TemporaryDirectory(prefix="bench_conv_gap8_")))
        for i, name in enumerate(names):
            body, _ = cases[name]
            folder = work / f"m{i}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "step.tflite").write_bytes(convert_case(step_model(GAP8_FRAME, body), GAP8_FRAME, "int8"))
            facts = generate_firmware(folder, board)
            xq = frames(folder, GAP8_FRAME, steps=args.steps)
            ref, _ = Stepper(folder / "step.tflite", STATES).records(xq)
            macs_of[name] = op_macs(folder)
            for cores in (1, 8):
                result, _ = run_variant(folder, cores, 1, xq.reshape(len(xq), -1), work)
                got = np.concatenate([result.outputs.reshape(len(xq), -1).view(np.uint8),
                                      result.states.reshape(len(xq), -1).view(np.uint8)], axis=1)
                bad[name, cores] = int(np.count_nonzero(got != ref))
                cycles[name, cores] = float(np.median(result.cycles[2:]))
                print(f"{name:40s} {cores} core(s) {cycles[name, cores]:12,.0f} cycles/step, "
                      f"{bad[name, cores]} bad bytes", file=sys.stderr, flush=True)
            items = facts.placement["items"] if facts.placement else {}
            places[name] = ", ".join(f"{k} {v['memory']}" for k, v in items.items() if k in ("arena", "weights"))
    print("| kernel (int8, GVSOC) | cores | MACs | cycles | MAC/cycle | GVSOC ceiling | placed | mismatching bytes |")
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        if name.startswith("without"):
            continue
        base = base_of(name)
        ceiling = cases[name][1]
        m = max(macs_of[name].values()) if name.startswith("conv") else min(macs_of[name].values())
        for cores in (1, 8):
            c = cycles[name, cores] - cycles[base, cores]
            figures = "– | –" if "stride 2" in name else f"{c:,.0f} | {m / c:.2f}"
            print(f"| {name} | {cores} | {m:,} | {figures} | {ceiling * cores:.2f} | {places[name]} | "
                  f"{bad[name, cores] + bad[base, cores]} |")
    print(f"\nGVSOC's timing model of GAP8, not a chip; cluster at {board['cpu']['cluster_hz'] / 1e6:.0f} MHz; a "
          "kernel's cycles are the step's with it less the step's without it (dispatch excluded).")


def main_gap8_l2(args) -> None:
    """The 60x60x1 frame model of tests/e2e/test_conv_dma_e2e.py (arena in L2, every convolution, the
    depthwise one and the pool in DMA bands): cycles per frame on 8 cores, dispatch excluded."""
    from edgernn.pipeline.build import build_model
    from edgernn.targets.gap8 import sdk as gap_sdk
    from edgernn.tflite.oracle import quantize

    gap_sdk.build_gvsoc()
    with tempfile.TemporaryDirectory(prefix="bench_conv_l2_") as tmp:
        work = Path(tmp)
        for dense in (40, 8):
            path = work / f"l2_{dense}.keras"
            frame_cfc_l2(dense).save(path)
            out = work / f"out_{dense}"
            result = build_model(str(path), out, board="gvsoc_gap8", quant="int8",
                                 calib=moving_blobs(4, 12, *FRAME, seed=1))
            manifest = result["manifest"]
            xs = quantize(moving_blobs(1, args.steps, *FRAME, seed=5)[0].reshape(args.steps, -1),
                          manifest["inputs"][0])
            run, _ = run_variant(out, 8, 1, xs, work)
            kernels = ", ".join(p["kernel"].replace("edgernn_dma_", "") for p in manifest["placement"]["dma"])
            print(f"| 60x60x1 frame model, Dense({dense}) | {float(np.median(run.cycles[2:])):,.0f} | {kernels} |")


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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quant", default="int8")
    ap.add_argument("--only", default="")
    ap.add_argument("--board", default="qemu_riscv32", choices=["qemu_riscv32", "gvsoc_gap8"])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--keep", help="gvsoc_gap8: build the models in this folder and keep them (m0, m1, ...: "
                                   "bench/profile_gap8.py --out traces one)")
    args = ap.parse_args()
    if args.board == "gvsoc_gap8" and args.only == "l2":
        main_gap8_l2(args)
        return
    if args.board == "gvsoc_gap8":
        main_gap8(args)
        return
    from edgernn.testing.backend_harness import compare
    from edgernn.tflite.oracle import Stepper

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
                (folder / "step.tflite").write_bytes(convert_case(step_model(shape, body), shape, quant))
                xq = frames(folder, shape, steps=6)
                ref, _ = Stepper(folder / "step.tflite", STATES).records(xq)
                got, instr = run_qemu(folder, xq, ref.shape[1])
                bad = compare(got, ref, quant)["mismatches"]
                per_step = int(np.median(instr))
                m = macs(folder)
                print(f"| {name} | {quant} | {per_step:,} | {m:,} | {per_step / m:.2f} | {bad} |", flush=True)


if __name__ == "__main__":
    main()
