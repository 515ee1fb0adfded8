"""A PULP-Dronet-class CNN (edgernn.testing.frames_zoo.dronet_class: 200x200x1, 5x5 stem and max-pool, three
ResNet-8 residual blocks joined by Add, Dense(2)), int8, a stateless per-frame model: built for gvsoc_gap8 and
validated frame by frame; prints MACs per frame, cycles per frame, MAC/cycle and frames per second at 175 MHz in
GVSOC's timing model of GAP8 (a simulator's count, not a measurement on a chip), beside the parity. Asserts nothing.

    GAP_SDK_HOME=/path/to/gap_sdk python bench/bench_dronet.py [--widths 32,32,64,128] [--frames 3] [--keep DIR]

--widths: the stem's and the three blocks' channels; the default is PULP-Dronet's own (0.32 M parameters, 41 M
MACs), which fit the AI-deck with the stem's convolution fused with its max-pool (its 100x100x32 output never
exists: edgernn/backend/conv_pool.py) and the last block's filters (221 KB) streamed from L3 (the placement's table
and notes are printed). 8,16,32,64 is the quarter widths that fit L2 without either.
Cycles per frame are the device's own counts, medians over the frames, in cluster cycles: the cluster's work alone
(report device.cluster_cycles_per_step_median: the master core's counter around the step's body), and the whole step
as the application sees it, the FC's dispatch and the cluster's wake-up included (device.cycles_per_step_median).
MACs per frame are the manifest's; MAC/cycle is taken on the cluster's count. Frames per second: 175 MHz (the
cluster's clock on the AI-deck) over the whole step's cycles.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", default="32,32,64,128",
                    help="stem and block channels (PULP-Dronet's; a quarter: 8,16,32,64)")
    ap.add_argument("--frames", type=int, default=3, help="frames validated (each some 20 s over GVSOC's UART)")
    ap.add_argument("--quant", default="int8", choices=["int8", "int16", "float32"])
    ap.add_argument("--keep", help="build in this folder and keep it")
    args = ap.parse_args()

    from edgernn.pipeline.build import build_model
    from edgernn.targets.gap8 import sdk as gap_sdk
    from edgernn.testing.frames_zoo import DRONET_FRAME, dronet_class, moving_blobs
    from edgernn.validate.run import validate

    widths = tuple(int(w) for w in args.widths.split(","))
    gap_sdk.build_gvsoc()
    with contextlib.ExitStack() as stack:
        work = Path(args.keep) if args.keep else Path(stack.enter_context(tempfile.TemporaryDirectory(
            prefix="bench_dronet_")))
        work.mkdir(parents=True, exist_ok=True)
        model = dronet_class(widths)
        path = work / "dronet_class.keras"
        model.save(path)
        build_model(str(path), work / "out", board="gvsoc_gap8", quant=args.quant,
                    calib=moving_blobs(2, 4, *DRONET_FRAME, seed=1))
        report = validate(work / "out", data=moving_blobs(1, args.frames, *DRONET_FRAME, seed=3),
                          json_path=work / "report.json")
        manifest = json.loads((work / "out" / "manifest.json").read_text())
    device = report["device"]
    cycles, whole = device["cluster_cycles_per_step_median"], device["cycles_per_step_median"]
    macs = manifest["macs_per_step"]
    print("| model | params | quant | MACs/frame | cluster cycles/frame | MAC/cycle | whole step, cycles | cores | "
          "mismatching bytes |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(f"| dronet_class{widths} | {model.count_params():,} | {args.quant} | {macs:,} | {cycles:,.0f} | "
          f"{macs / cycles:.2f} | {whole:,.0f} | {device['workers']} | {report['reference']['mismatches']} |")
    hz = 175e6
    print(f"\nGVSOC's timing model of GAP8, not a chip; {report['steps']} frames, parity "
          f"{'PASS' if report['pass'] else 'FAIL'}; at 175 MHz a whole step takes {whole / hz * 1e3:.1f} ms "
          f"({hz / whole:.2f} frames/s; the cluster's work alone {hz / cycles:.2f} frames/s); "
          f"{device.get('l3_bytes_per_step', 0):,} bytes a frame from L3.")
    placement = manifest.get("placement", {})
    for row in placement.get("dma", []):
        print(f"  op {row['op']}: {row['kernel']}, {row['bands']} band(s) of {row['band_rows']} rows")
    for name, n in placement.get("streamed", {}).get("arrays", {}).items():
        print(f"  {name}: {n:,} B streamed from L3")


if __name__ == "__main__":
    main()
