"""GAP8 cycles per step in GVSOC (the gvsoc_gap8 board): int8 LSTM(64) (step and fused paths), CfC and LTC
with AutoNCP wirings, each on the fabric controller alone, on 1 cluster core and on 8 cluster cores, with
and without the Xpulp SIMD dot products, those in gcc's C (edgernn_dot.h) and in the hand-written
assembly (edgernn_dot_xpulp.S): the "C" rows are the figures before the assembly, the "asm" rows after.

Every variant is the same generated ai_deck project built with other make variables
(EDGERNN_CLUSTER_CORES=0|1|8, EDGERNN_XPULP=0|1, EDGERNN_DOT_ASM=0|1, EDGERNN_CYCLES_FC=0|1), run in GVSOC, fed the same inputs over the simulated
UART. The figures are GVSOC's timing model of GAP8, not measurements on a chip. Cycles are the step's:
on the cluster, the master core's PULP counter at the cluster clock, without the FC's dispatch; on the
FC alone, the FC core's PULP counter at the FC clock. Every variant's outputs and states are checked
equal to the first variant run's (bytes; the 8-core SIMD asm build), so a figure is never that of a wrong
answer.

    GAP_SDK_HOME=/path/to/gap_sdk python bench/bench_gap8.py [--steps 40] [--models lstm64,cfc,ltc] [--only 'SIMD (C|asm)$']
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

from edgernn.targets import device as devices
from edgernn.testing.bench import GAP8_BOARD as BOARD
from edgernn.testing.bench import GAP8_MODELS, build_gap8, run_variant
from edgernn.tflite.oracle import quantize

VARIANTS = [  # (label, EDGERNN_CLUSTER_CORES, EDGERNN_XPULP, EDGERNN_DOT_ASM, EDGERNN_CYCLES_FC)
    ("FC alone, scalar", 0, 0, 0, 0),
    ("FC alone, SIMD C", 0, 1, 0, 0),
    ("FC alone, SIMD asm", 0, 1, 1, 0),
    ("1 cluster core, scalar", 1, 0, 0, 0),
    ("1 cluster core, SIMD C", 1, 1, 0, 0),
    ("1 cluster core, SIMD asm", 1, 1, 1, 0),
    ("8 cluster cores, scalar", 8, 0, 0, 0),
    ("8 cluster cores, SIMD C", 8, 1, 0, 0),
    ("8 cluster cores, SIMD C, dispatch incl.", 8, 1, 0, 1),
    ("8 cluster cores, SIMD asm, dispatch incl.", 8, 1, 1, 1),
    ("8 cluster cores, SIMD asm", 8, 1, 1, 0),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--models", default=",".join(GAP8_MODELS))
    parser.add_argument("--only", default="", help="a regular expression the labels of the variants to run match "
                        "(e.g. 'SIMD asm$'); the first one run is the reference the others' bytes are held to")
    args = parser.parse_args()
    board = devices.load_board(BOARD)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_gap8_") as tmp:
        work = Path(tmp)
        for name in args.models.split(","):
            out = build_gap8(name, work)
            manifest = json.loads((out / "manifest.json").read_text())
            x_entry = manifest["inputs"][0]
            xs = quantize(np.random.default_rng(0).normal(0, 0.5, (args.steps, x_entry["shape"][-1])).astype(np.float32),
                          x_entry)
            base = None
            chosen = [v for v in VARIANTS if re.search(args.only, v[0])]
            for label, cores, simd, asm, fc_clock in reversed(chosen):
                result, info = run_variant(out, cores, simd, xs, work, fc_clock=bool(fc_clock), asm=asm)
                if base is None:
                    base = result
                same = np.array_equal(result.outputs, base.outputs) and np.array_equal(result.states, base.states)
                cycles = float(np.median(result.cycles[2:]))   # the first steps warm the caches
                clock = board["cpu"]["fc_hz"] if cores == 0 and not fc_clock else board["cpu"]["cluster_hz"]
                rows.append((name, manifest["macs_per_step"], label, cycles, manifest["macs_per_step"] / cycles,
                             cycles / clock * 1e6, info.workers, "yes" if same else "NO"))
                print(f"{name:13s} {label:24s} {cycles:10.0f} cycles/step", file=sys.stderr)
    print("| model | MACs/step | where | cycles/step | MACs/cycle | µs/step at its clock | workers | same bytes |")
    print("|---|---|---|---|---|---|---|---|")
    for name, macs, label, cycles, per_cycle, us, workers, same in rows:
        print(f"| {name} | {macs:,} | {label} | {cycles:,.0f} | {per_cycle:.3f} | {us:,.1f} | {workers} | {same} |")
    print(f"\nGVSOC's timing model of GAP8, not a chip: FC at {board['cpu']['fc_hz'] / 1e6:.0f} MHz, cluster at "
          f"{board['cpu']['cluster_hz'] / 1e6:.0f} MHz; weights, state and arena in cluster L1 where they fit (the placement "
          "table); cluster figures exclude the FC's dispatch except in the rows \"dispatch incl.\" (the FC's timer, "
          "EDGERNN_CYCLES_FC=1, in cluster cycles); \"SIMD C\" is gcc's code of edgernn_dot.h (EDGERNN_DOT_ASM=0), "
          "\"SIMD asm\" the hand-written kernels of edgernn_dot_xpulp.S.")


if __name__ == "__main__":
    main()
