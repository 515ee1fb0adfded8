"""A mixed int8/int16 step model beside its int8 original, on one board: cycles per step, weight, arena
and state bytes, and parity with LiteRT (issue 28).

The model is an int8 SimpleRNN(9) over 3 inputs, built for the board; the mixed one is the same step
model with its state held in int16 (its int8 scale / 130) and the cell's TANH in int16 between two
QUANTIZE seams (edgernn/testing/mixed_models.py). Both are validated over the link on the same 200 steps
(every output and state byte equal to the interpreter's) before a figure is printed. On gvsoc_gap8 the
cycles are GVSOC's timing model of GAP8, not measurements on a chip.

    GAP_SDK_HOME=/path/to/gap_sdk python bench/bench_mixed_cycles.py --board gvsoc_gap8
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
from pathlib import Path


def main() -> int:
    from edgernn.outdir import read_manifest
    from edgernn.testing import mixed_models as MM
    from edgernn.testing import zoo

    from edgernn.backend.cost import estimate_step_cost
    from edgernn.pipeline.build import build_model
    from edgernn.targets.device import adapter_for
    from edgernn.validate.run import validate

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--board", default="host")
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        keras = zoo._keras(0)
        model = keras.Sequential([keras.Input((None, 3)), keras.layers.SimpleRNN(9, return_sequences=True)])
        model.save(root / "m.keras")
        out = root / "out"
        with contextlib.redirect_stdout(io.StringIO()):
            build_model(str(root / "m.keras"), out, board=args.board, quant="int8", mode="step",
                        calib=zoo.trajectories(4, 60, 3, 1))
        data = zoo.trajectories(1, args.steps, 3, 5)
        rows = []
        for label in ("int8", "mixed"):
            manifest = read_manifest(out)
            if label == "mixed":
                state = manifest.states[0]
                step = MM.tanh16(MM.state16((out / "step.tflite").read_bytes(), state["name"], state["scale"] / 130))
                MM.write_folder(out, step, manifest)
                adapter = adapter_for(args.board)
                adapter.generate(out)
                adapter.build(out, scratch=root / "scratch", final_out=out, log=lambda _: None, verbose=False)
                manifest = read_manifest(out)
            report = validate(out, data=data)
            ref, dev = report["reference"], report["device"]
            if not (report["pass"] and ref["mismatches"] == 0 and ref["state_mismatches"] == 0):
                print(f"{label}: parity FAILED: {ref}")
                return 1
            cost = estimate_step_cost(out / "step.tflite", manifest.states)
            rows.append((label, dev.get("cycles_per_step_median"), dev.get("cluster_cycles_per_step_median"),
                         cost.cycles_per_step, cost.weight_bytes, cost.arena_bytes, cost.state_bytes))
    print(f"board {args.board}, {args.steps} steps, 0 mismatching bytes of y and state in both")
    print(f"{'model':8} {'cycles/step (median)':>21} {'cluster':>8} {'estimate':>9} {'weights B':>10} "
          f"{'arena B':>8} {'state B':>8}")
    for r in rows:
        print(f"{r[0]:8} {r[1]!s:>21} {r[2]!s:>8} {r[3]:>9} {r[4]:>10} {r[5]:>8} {r[6]:>8}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
