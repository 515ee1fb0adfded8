"""The whole GAP8 step in GVSOC as the application sees it, FC's dispatch and wake-up included: one cluster
task for the whole run (EDGERNN_CLUSTER_PERSISTENT=1, the default) against one task per step (=0), on 8
cluster cores and on 1, for CfC and LTC with AutoNCP(16,2) wirings (random weights, or trained: cfc_trained,
ltc_trained) and the LSTM(64), at int8 or int16 (--quant).

Every variant is the same generated ai_deck project built with other make variables, run in GVSOC (the
gvsoc_gap8 board) on the same inputs. Each step is counted twice by the firmware, in one run: the FC's tick
timer around edgernn_step (the default EDGERNN_CYCLES_FC=1: dispatch and wake-up included, in cluster
cycles; report.json's cycles_per_step) and the cluster master's pi_perf counter around the step's body
(the cluster's work alone; cluster_cycles_per_step). The figure is the median over the steps from the
third on. Every variant's outputs and states are checked equal to the
first variant's, so a figure is never that of a wrong answer. GVSOC's timing model, not a chip.

    GAP_SDK_HOME=/path/to/gap_sdk python bench/bench_cluster_task.py [--steps 40] [--models cfc,ltc,lstm64]
        [--quant int8|int16] [--variants 0,1]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from edgernn.link import LinkClient
from edgernn.targets import device as devices
from edgernn.testing.bench import GAP8_BOARD, GAP8_MODELS, build_gap8, gap8_inputs

VARIANTS = [  # (label, EDGERNN_CLUSTER_PERSISTENT, EDGERNN_CLUSTER_CORES)
    ("one task for the run, 8 cores", 1, 8),
    ("one task for the run, 1 core", 1, 1),
    ("one task per step, 8 cores", 0, 8),
    ("one task per step, 1 core", 0, 1),
]
# issue 50: cycles per step, dispatch included, by (model's kind, quant)
GOALS = {("cfc", "int8"): 3000, ("ltc", "int8"): 30000, ("cfc", "int16"): 8000, ("ltc", "int16"): 45000}


def run(out: Path, make_vars: dict, xs: np.ndarray, work: Path):
    board = devices.load_board(GAP8_BOARD)
    tag = "_".join(f"{k.split('_')[-1].lower()}{v}" for k, v in sorted(make_vars.items()))
    elf = devices.build_elf(out / "firmware", board, work / f"{out.name}_{tag}", make_vars=make_vars).elf
    with devices.start(elf, board) as device:
        with LinkClient.open(device.url, baud=board["serial"]["baud"], timeout=board["serial"]["timeout_s"]) as link:
            link.wait_ready(board["emulator"]["start_timeout_s"])
            link.hello()
            return link.run(xs, states="every")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--models", default="cfc,ltc,lstm64",
                        help="of " + ", ".join(GAP8_MODELS) + " (the _trained ones: edgernn.testing.trained's NCPs, "
                             "on their test trajectory)")
    parser.add_argument("--quant", default="int8", choices=["int8", "int16"])
    parser.add_argument("--variants", default="", help="comma-separated indices into the variant list (default: all)")
    args = parser.parse_args()
    chosen = [VARIANTS[int(i)] for i in args.variants.split(",")] if args.variants else VARIANTS
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_cluster_task_") as tmp:
        work = Path(tmp)
        for name in args.models.split(","):
            out = build_gap8(name, work, args.quant)
            manifest = json.loads((out / "manifest.json").read_text())
            xs = gap8_inputs(name, args.steps, manifest["inputs"][0])
            base = None
            for label, persistent, cores in chosen:
                result = run(out, {"EDGERNN_CLUSTER_PERSISTENT": persistent, "EDGERNN_CLUSTER_CORES": cores,
                                   "EDGERNN_XPULP": 1}, xs, work)
                if base is None:
                    base = result
                same = np.array_equal(result.outputs, base.outputs) and np.array_equal(result.states, base.states)
                w, c = float(np.median(result.cycles[2:])), float(np.median(result.team_cycles[2:]))
                rows.append((f"{name} {args.quant}", manifest["macs_per_step"], label, w, c, GOALS.get((name.split("_")[0], args.quant)), same))
                print(f"{name:8s} {label:32s} {w:10.0f} whole {c:10.0f} cluster", file=sys.stderr)
    print("| model | MACs/step | variant | cycles/step, dispatch included | cluster's alone | dispatch | goal | same bytes |")
    print("|---|---|---|---|---|---|---|---|")
    for name, macs, label, w, c, goal, same in rows:
        print(f"| {name} | {macs:,} | {label} | {w:,.0f} | {c:,.0f} | {w - c:,.0f} | "
              f"{'<= %s' % format(goal, ',') if goal else ''} | {'yes' if same else 'NO'} |")
    print("\nGVSOC's timing model of GAP8 (cluster at the board's cluster_hz), not a chip; median cycles per step, "
          "steps 3 on; whole step = FC tick timer around edgernn_step, in cluster cycles.")


if __name__ == "__main__":
    main()
