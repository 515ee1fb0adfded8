"""--quant auto against int8 and int16: l2r against the float model, weight bytes and an arena estimate.

Four models whose int8 error is high on trained weights: CfC and LTC on AutoNCP wirings, an LSTM with a
sigmoid activation, a ReLU SimpleRNN after a Dense. Each is converted (step mode) on 8 smooth 200-step
trajectories (zoo.trajectories) with --quant int8, int16 and auto at the default budget (0.02); l2r is
convert's own check (manifest quantization_error: the step model against the float step model over the
calibration sequences, states fed back). Weights: constant bytes of step.tflite. Arena: the liveness
peak of the step model's activations (mixed.arena_estimate), not the backend's placement.

    PYTHONPATH=$PWD python bench/bench_mixed.py [--max-error 0.02] [--board gvsoc_gap8] [--model CfC]
        [--quant auto] [--int8 REGEX]

With --board, each model is instead built for that board (edgernn build, so --quant auto weighs its plans
by that board's estimated cost) and validated there on 2 of its calibration sequences: the table gives the
plan's l2r on the 8 calibration sequences (the budget's measure), the device's l2r on its 2 and its
mismatching bytes against LiteRT, the build's own weight and arena bytes, the cycles per step (the report's
median; on gvsoc_gap8 GVSOC's timing model, not a chip) and, for auto, the plan's estimated cycles and bytes
of the int8, int16 and chosen plans.

--model and --quant keep the rows whose model label starts with, or quantization is, the one given. --int8 REGEX
is for measuring a plan of one's own: the auto plan, then every op whose output tensor's name matches REGEX
in int8 (as `plan_precision` would splice it; the row's l2r is that model's, and may miss the budget).

The weights are random (seeded), not trained: the errors are these models', not the issue's table's.
Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from edgernn.testing import zoo


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-error", type=float, default=0.02)
    parser.add_argument("--board", default=None)
    parser.add_argument("--model", default="", help="the rows of the models whose label starts with this")
    parser.add_argument("--quant", default=None, choices=("int8", "int16", "auto"))
    parser.add_argument("--int8", default=None, help="auto: also every op whose output name matches this in int8")
    args = parser.parse_args()
    if args.int8:
        _force_int8(args.int8)
    global QUANTS, MODELS
    QUANTS = (args.quant,) if args.quant else QUANTS
    MODELS = {k: v for k, v in MODELS.items() if k.startswith(args.model)}
    with tempfile.TemporaryDirectory() as tmp:
        if args.board:
            on_board(args, Path(tmp))
        else:
            converted(args, Path(tmp))


QUANTS = ("int8", "int16", "auto")


def _force_int8(pattern: str) -> None:
    """--int8: the auto plan with every op whose output name matches ``pattern`` taken into int8."""
    import dataclasses
    import re

    from edgernn.tflite import mixed

    real = mixed.plan_precision

    def forced(pair, sequences, want, max_error, log=lambda _: None, cost=None):
        plan, _ = real(pair, sequences, want, max_error, log, cost=cost)
        ops = [i for i in plan.int16_ops if not re.search(pattern, mixed.op_label(pair, i))]
        data = mixed.splice(pair, ops)
        error = mixed.l2r(mixed.run_quantized(data, sequences, pair.ties, pair.x_key, pair.y_key), want)
        estimates = dict(plan.estimates or {}, auto=cost(data) if cost else None)
        return dataclasses.replace(plan, int16_ops=ops, error=error, met=error <= max_error, estimates=estimates,
                                   chosen_by=f"--int8 {pattern}"), data
    mixed.plan_precision = forced


def _cases(tmp: Path, suffix: str = ""):
    """(label, model, calibration, quantization, output folder) of every row."""
    for label, build in MODELS.items():
        model = build()
        calib = zoo.trajectories(8, 200, zoo.features_of(model), 0)
        for quant in QUANTS:
            yield label, model, calib, quant, tmp / f"{model.name}_{quant}{suffix}"


def _plan_summary(p: dict) -> str:
    if not p:
        return ""
    text = (f"{p['int16_ops']}/{p['int16_ops'] + p['int8_ops']} ops int16, {p['quantize_ops']} QUANTIZE; "
            f"int16 plan l2r {p['int16_error']:.4f}")
    return text + (f"; {p['note']}" if p.get("note") else "")


def converted(args, tmp: Path) -> None:
    from edgernn.errors import EdgeRNNError
    from edgernn.pipeline.convert import convert
    from edgernn.tflite import mixed
    from edgernn.tflite import model as tfl

    rows = []
    for label, model, calib, quant, out in _cases(tmp):
        start = time.time()
        try:
            m = convert(model, out, quant=quant, calib=calib, mode="step", max_error=args.max_error)
        except EdgeRNNError as err:
            rows.append((label, quant, None, None, None, None, str(err)[:60]))
            continue
        step = tfl.read((out / "step.tflite").read_bytes())
        rows.append((label, quant, m.quantization_error["l2r"], m.weight_bytes,
                     mixed.arena_estimate(step), time.time() - start, _plan_summary(m.precision)))
    print(f"{'model':24} {'quant':6} {'l2r':>8} {'weights B':>10} {'arena est B':>12} {'convert s':>10}  plan")
    for label, quant, l2r, weights, arena, seconds, extra in rows:
        if l2r is None:
            print(f"{label:24} {quant:6} {'-':>8} {'-':>10} {'-':>12} {'-':>10}  refused: {extra}")
            continue
        print(f"{label:24} {quant:6} {l2r:8.4f} {weights:10d} {arena:12d} {seconds:10.1f}  {extra}")


def on_board(args, tmp: Path) -> None:
    """Each model built for the board with each quantization and validated there: one row each."""
    import contextlib
    import io
    import json

    from edgernn.errors import EdgeRNNError
    from edgernn.pipeline.build import build_model
    from edgernn.validate.run import validate

    print(f"on {args.board} (l2r: the plan's, on 8 calibration sequences; device: validated on 2 of them)")
    print("| model | quant | l2r | device l2r | mismatching bytes | weight B | arena B | cycles/step (median) | "
          "estimated cycles / bytes int8, int16, auto | plan | build s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for label, model, calib, quant, out in _cases(tmp, f"_{args.board}"):
        start = time.time()
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                build_model(model, out, board=args.board, quant=quant, mode="step", calib=calib,
                            max_error=args.max_error)
                report = validate(out, data=calib[:2])
        except EdgeRNNError as err:
            print(f"| {label} | {quant} | refused: {str(err)[:60]} | | | | | | | | |")
            continue
        manifest = json.loads((out / "manifest.json").read_text())
        ref, dev = report["reference"], report["device"]
        p = manifest.get("precision") or {}
        e = p.get("estimate") or {}
        estimate = ", ".join(f"{e[k]['cycles_per_step']:,} / {e[k]['bytes']:,}" if e.get(k) else "-"
                             for k in ("int8", "int16", "auto")) if e else ""
        print(f"| {label} | {quant} | {manifest['quantization_error']['l2r']:.4f} | {report['float']['l2r']:.4f} | "
              f"{ref['mismatches'] + ref.get('state_mismatches', 0)} | {manifest['weight_bytes']:,} | "
              f"{manifest['arena_bytes']:,} | {dev['cycles_per_step_median']:,.0f} | {estimate} | "
              f"{_plan_summary(p)}{' (' + e['chosen_by'] + ')' if e.get('chosen_by') else ''} | "
              f"{time.time() - start:.0f} |", flush=True)


if __name__ == "__main__":
    main()
