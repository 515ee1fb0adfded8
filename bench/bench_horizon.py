"""Quantization judged over a horizon longer than the calibration windows: each model built at int8, int16 and
auto with a horizon of one window (what edgernn did before: ranges and the plan's error from the windows alone)
and with the default (five windows chained), then validated over sequences five times as long as its windows.

Models: the sigmoid LSTM with a last-step head (edgernn/testing/trained.py ``lstm_final_head``: calibrated on 64
windows of 40 steps, run on 8 sequences of 200), and the four trained models of edgernn/testing/trained.py
(calibrated on 32 of 200, run on 4 of 1,000). Per build: l2r against the float model over the long sequences, the
mismatching bytes against LiteRT, cycles per step (instructions on qemu_riscv32, GVSOC's timing model on
gvsoc_gap8, host time on host) and auto's plan.

    PYTHONPATH=$PWD python bench/bench_horizon.py [--board qemu_riscv32] [--model ...] [--quant int8 int16 auto]

Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
from pathlib import Path

def _data(name: str):
    """(model path, calibration windows, long test sequences)."""
    from edgernn.testing import trained

    if name == "lstm_final_head":
        return trained.lstm_final_head(), trained.leaky_integral(64, 40, 2)[0], trained.leaky_integral(8, 200, 3)[0]
    model = trained.trained(name)
    return model.path, model.calib, trained.oscillator(4, 1000, seed=3)[0]


def main() -> int:
    from edgernn.errors import EdgeRNNError
    from edgernn.pipeline.build import build_model
    from edgernn.testing import trained
    from edgernn.testing.bench import plan_text
    from edgernn.validate.run import validate

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--board", default="host")
    ap.add_argument("--model", nargs="+", default=["lstm_final_head", *trained.TRAINED])
    ap.add_argument("--quant", nargs="+", default=["int8", "int16", "auto"])
    args = ap.parse_args()
    print(f"board {args.board}; l2r against the float model over sequences 5x the calibration windows")
    print(f"{'model':22} {'quant':6} {'horizon':>8} {'l2r':>8} {'mismatches':>10} {'cycles/step':>12}  plan")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.model:
            path, calib, test = _data(name)
            for quant in args.quant:
                for horizon in (calib.shape[1], None):
                    out = Path(tmp) / f"{name}-{quant}-{horizon}"
                    label = f"{horizon or 5 * calib.shape[1]}" + (" (1 window)" if horizon else "")
                    try:
                        with contextlib.redirect_stdout(io.StringIO()):
                            result = build_model(str(path), out, board=args.board, quant=quant, calib=calib,
                                                 mode="step", horizon=horizon)
                            report = validate(out, data=test, json_path=out / "report.json")
                    except EdgeRNNError as exc:
                        print(f"{name:22} {quant:6} {label:>8} refused: {exc}")
                        continue
                    ref = report["reference"]
                    bad = ref["mismatches"] + ref.get("state_mismatches", 0)
                    plan = plan_text(out) if quant == "auto" else ""
                    print(f"{name:22} {quant:6} {label:>8} {report['float']['l2r']:8.4f} {bad:>10} "
                          f"{report['device']['cycles_per_step']:12,.0f}  {plan}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
