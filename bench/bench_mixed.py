"""--quant auto against int8 and int16: l2r against the float model, weight bytes and an arena estimate.

Four models whose int8 error is high on trained weights: CfC and LTC on AutoNCP wirings, an LSTM with a
sigmoid activation, a ReLU SimpleRNN after a Dense. Each is converted (step mode) on 8 smooth 200-step
trajectories (zoo.trajectories) with --quant int8, int16 and auto at the default budget (0.02); l2r is
convert's own check (manifest quantization_error: the step model against the float step model over the
calibration sequences, states fed back). Weights: constant bytes of step.tflite. Arena: the liveness
peak of the step model's activations (mixed.arena_estimate), not the backend's placement.

    PYTHONPATH=$PWD python bench/bench_mixed.py [--max-error 0.02] [--board gvsoc_gap8]

With --board, each model is also built for that board (edgernn build) and validated there on its
calibration sequences (2 of them): the table then adds the device's mismatching bytes, the l2r it
reached, the build's own weight and arena bytes and the cycles per step (the report's median; on
gvsoc_gap8 GVSOC's timing model, not a chip).

The weights are random (seeded), not trained: the errors are these models', not the issue's table's.
Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

import zoo  # noqa: E402


def cfc_ncp():
    keras = zoo._keras(0)
    import ncps.keras
    from ncps.wirings import AutoNCP

    return keras.Sequential([keras.Input((None, 4)), ncps.keras.CfC(AutoNCP(16, 2, seed=0), return_sequences=True)],
                            name="cfc_ncp")


def lstm_sigmoid():
    keras = zoo._keras(0)
    L = keras.layers
    return keras.Sequential([keras.Input((None, 3)), L.LSTM(16, activation="sigmoid", return_sequences=True),
                             L.Dense(2)], name="lstm_sigmoid")


def dense_simplernn_relu():
    keras = zoo._keras(0)
    L = keras.layers
    return keras.Sequential([keras.Input((None, 3)), L.Dense(8), L.SimpleRNN(12, activation="relu",
                                                                              return_sequences=True),
                             L.Dense(1)], name="dense_simplernn_relu")


MODELS = {"CfC AutoNCP(16,2)": cfc_ncp, "LTC AutoNCP(16,2)": zoo.ltc_dense, "LSTM(sigmoid)": lstm_sigmoid,
          "Dense+SimpleRNN(relu)": dense_simplernn_relu}


def main() -> None:
    from edgernn.errors import EdgeRNNError
    from edgernn.pipeline.convert import convert_model
    from edgernn.tflite import mixed
    from edgernn.tflite import model as tfl

    parser = argparse.ArgumentParser()
    parser.add_argument("--max-error", type=float, default=0.02)
    parser.add_argument("--board", default=None)
    args = parser.parse_args()
    rows, device = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for label, build in MODELS.items():
            model = build()
            calib = zoo.trajectories(8, 200, zoo.features_of(model), 0)
            for quant in ("int8", "int16", "auto"):
                out = Path(tmp) / f"{model.name}_{quant}"
                start = time.time()
                try:
                    m = convert_model(model, out, quant=quant, calib=calib, mode="step", max_error=args.max_error)
                except EdgeRNNError as err:
                    rows.append((label, quant, None, None, None, None, str(err)[:60]))
                    continue
                step = tfl.read((out / "step.tflite").read_bytes())
                p = m.get("precision") or {}
                extra = ""
                if p:
                    extra = (f"{p['int16_ops']}/{p['int16_ops'] + p['int8_ops']} ops int16, {p['quantize_ops']} "
                             f"QUANTIZE; int16 plan l2r {p['int16_error']:.4f}"
                             + (f"; {p['note']}" if p.get("note") else ""))
                rows.append((label, quant, m["quantization_error"]["l2r"], m["weight_bytes"],
                             mixed.arena_estimate(step), time.time() - start, extra))
                if args.board:
                    device.append((label, quant, *on_board(model, quant, calib, args, Path(tmp))))
    print(f"{'model':24} {'quant':6} {'l2r':>8} {'weights B':>10} {'arena est B':>12} {'convert s':>10}  plan")
    for label, quant, l2r, weights, arena, seconds, extra in rows:
        if l2r is None:
            print(f"{label:24} {quant:6} {'-':>8} {'-':>10} {'-':>12} {'-':>10}  refused: {extra}")
            continue
        print(f"{label:24} {quant:6} {l2r:8.4f} {weights:10d} {arena:12d} {seconds:10.1f}  {extra}")
    if device:
        print(f"\non {args.board} (validated on 2 calibration sequences):")
        print("| model | quant | mismatching bytes | l2r | weight B | arena B | cycles/step (median) |")
        print("|---|---|---|---|---|---|---|")
        for row in device:
            print("| " + " | ".join(str(v) for v in row) + " |")


def on_board(model, quant, calib, args, tmp: Path):
    """(mismatching bytes, l2r, weight bytes, arena bytes, cycles per step) of the model built for the board
    and validated there, or the refusal."""
    import contextlib
    import io
    import json

    from edgernn.errors import EdgeRNNError
    from edgernn.pipeline.build import build_model
    from edgernn.validate.run import validate

    out = tmp / f"{model.name}_{quant}_{args.board}"
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            build_model(model, out, board=args.board, quant=quant, mode="step", calib=calib,
                        max_error=args.max_error)
            report = validate(out, data=calib[:2])
    except EdgeRNNError as err:
        return ("refused: " + str(err)[:50], "-", "-", "-", "-")
    manifest = json.loads((out / "manifest.json").read_text())
    ref, dev = report["reference"], report["device"]
    return (ref["mismatches"] + ref.get("state_mismatches", 0), f"{report['float']['l2r']:.4f}",
            manifest["weight_bytes"], manifest["arena_bytes"], f"{dev['cycles_per_step_median']:,.0f}")


if __name__ == "__main__":
    main()
