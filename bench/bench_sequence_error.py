"""The error of built step models sequence by sequence: how the l2r over a data file's sequences together compares with
each sequence's own, which is what a controller validated on a single trajectory sees.

For each OUT folder (step mode, any --quant but float32), its step.tflite (LiteRT, states fed back, from zero states)
against its float_step.tflite over the sequences of --data: the l2r over them together, the l2r that 3 in 4 keep on
their own (quantization_error.sequence_l2r, the second term of --quant auto's budget), the median, 90th percentile
and worst of the per-sequence l2r, and how many sequences are above --above. The C is byte-exact with LiteRT
(validate checks it), so these are the device's figures too.

    PYTHONPATH=$PWD python bench/bench_sequence_error.py OUT [OUT ...] --data test.npy [--above 0.03]

Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from edgernn.testing.bench import sequence_figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outs", nargs="+", help="OUT folders of edgernn build or convert")
    parser.add_argument("--data", required=True, help=".npy of sequences (sequences, steps, features...)")
    parser.add_argument("--above", type=float, default=0.03, help="count the sequences whose own l2r is above this")
    args = parser.parse_args()
    data = np.load(args.data).astype(np.float32)
    print(f"{len(data)} sequences of {data.shape[1]} steps from {args.data}; per-sequence l2r of step.tflite against "
          "float_step.tflite (LiteRT)")
    print(f"{'OUT':40s} {'quant':>6s} {'l2r':>8s} {'3 in 4':>8s} {'median':>8s} {'p90':>8s} {'worst':>8s}  above")
    for out in args.outs:
        f = sequence_figures(Path(out), data, args.above)
        if "skipped" in f:
            print(f"{out:40s} {f['skipped']}")
            continue
        print(f"{out:40s} {f['quant']:>6s} {f['l2r']:8.4f} {f['sequence_l2r']:8.4f} {f['median']:8.4f} "
              f"{f['p90']:8.4f} {f['worst']:8.4f}  {f['above']} of {f['sequences']} above {args.above:g}")


if __name__ == "__main__":
    main()
