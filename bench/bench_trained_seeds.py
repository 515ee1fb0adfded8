"""--quant auto on other trainings of the trained models: the four models of edgernn/testing/trained.py trained again
with other seeds (their weights and NCP wirings drawn anew, the same task and data), each built at int8, int16 and
auto for one board and validated over the link on its 8 test trajectories.

The tests hold the seed-0 models to the budget; these are the models the tests have not seen, as a user's would be.
Per model and precision: the l2r against the float model over the 8 trajectories together, the worst trajectory's
own l2r and how many are above 0.03 (the issue's bound), the mismatching output and state bytes against LiteRT,
weight and arena bytes, cycles per step (on gvsoc_gap8 GVSOC's timing model of GAP8, not a measurement on a chip),
and auto's plan (int16/int8 ops, QUANTIZE seams, FULLY_CONNECTEDs in two parts, the error on calibration). A
training that diverges shows as the build's one-line refusal.

    GAP_SDK_HOME=/path/to/gap_sdk PYTHONPATH=$PWD python bench/bench_trained_seeds.py --board gvsoc_gap8 \\
        [--seeds 1 2] [--model cfc_ncp ...] [--quant int8 int16 auto] [--work DIR]

Training takes 10 to 30 s a model on two cores. Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
from pathlib import Path

import numpy as np

def main() -> int:
    from edgernn.errors import EdgeRNNError
    from edgernn.pipeline.build import build_model
    from edgernn.testing import trained
    from edgernn.testing.bench import plan_text, sequence_figures
    from edgernn.validate.run import validate

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--board", default="host")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--model", nargs="+", default=list(trained.TRAINED))
    ap.add_argument("--quant", nargs="+", default=["int8", "int16", "auto"])
    ap.add_argument("--work", help="keep the trained models and builds here (default: a temporary folder)")
    args = ap.parse_args()
    print(f"board {args.board}; 8 test trajectories of 200 steps; l2r against the float model; worst: the worst "
          "trajectory's own; plan: int16/int8 ops, seams, two-part FCs, error on calibration")
    print(f"{'model':22} {'seed':>4} {'quant':6} {'l2r':>7} {'worst':>7} {'>0.03':>5} {'mismatches':>10} "
          f"{'bytes':>7} {'cycles/step':>12}  plan")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.work or tmp)
        for seed in args.seeds:
            for name in args.model:
                folder = root / f"seed{seed}"
                if not (folder / f"{name}.keras").is_file():
                    trained.train(name, folder, seed)
                calib, test = (np.load(folder / f"{name}.{part}.npy") for part in ("calib", "test"))
                for quant in args.quant:
                    out = folder / f"{name}-{args.board}-{quant}"
                    try:
                        with contextlib.redirect_stdout(io.StringIO()):
                            build_model(str(folder / f"{name}.keras"), out, board=args.board, quant=quant,
                                        calib=calib)
                            report = validate(out, data=test)
                    except EdgeRNNError as err:
                        print(f"{name:22} {seed:>4} {quant:6} error: {err}")
                        continue
                    seq = sequence_figures(out, test, 0.03)
                    plan = plan_text(out, missing="")
                    ref, dev = report["reference"], report["device"]
                    print(f"{name:22} {seed:>4} {quant:6} {report['float']['l2r']:7.4f} {seq['worst']:7.4f} "
                          f"{seq['above']:>5} {ref['mismatches']:>5}/{ref['state_mismatches']:<4} "
                          f"{dev['weight_bytes'] + dev['arena_bytes']:>7} "
                          f"{np.round(dev['cycles_per_step'] or 0):>12,.0f}  {plan}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
