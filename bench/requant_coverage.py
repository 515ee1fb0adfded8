"""How many int8 FULLY_CONNECTED output rows the cheap requantization covers (edgernn/backend/requant_proof.py).

For each int8 step model given (a step.tflite, or a folder holding one), every FULLY_CONNECTED row's
reachable accumulator range is computed from its weights, folded bias and the int8 input range, and the
proof searches for a reduced multiplier whose `mul` + rounding shift gives the exact requantization's byte
for every accumulator of that range. It prints, per model and in total, the rows covered, and asserts
nothing. With --zoo, the models of edgernn/testing/zoo.py are converted to int8 first (into --work); the
builds of bench/profile_gap8.py --work DIR (DIR/lstm64, DIR/cfc, ...) can be given as folders.

    python bench/requant_coverage.py [--zoo] [--work DIR] [STEP_TFLITE_OR_FOLDER ...]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from edgernn.backend import quantparams as qp
from edgernn.backend import requant_proof as rp
from edgernn.backend.reader import read_tflite


def fc_rows(path: Path):
    """(op index, n_in, lo, hi, multiplier, shift, rounding, zero point, act_min, act_max) per row."""
    g = read_tflite(path)
    rounding = rp.ROUND_TWICE_UP if g.oracle == "builtin" else rp.ROUND_ONCE
    for op in g.operators:
        if op.op != "FULLY_CONNECTED":
            continue
        x, w, out = g.tensor(op.inputs[0]), g.tensor(op.inputs[1]), g.tensor(op.outputs[0])
        if x.dtype != "int8" or w.data is None:
            continue
        n_out, n_in = w.data.shape
        in_s, in_zp = x.qparams()
        out_s, out_zp = out.qparams()
        if w.per_channel:
            reals = [float(np.float32(in_s)) * float(s) / float(np.float32(out_s)) for s in w.scale]
        else:
            reals = [qp.f32(np.float32(in_s) * np.float32(w.scale[0])) / float(np.float32(out_s))] * n_out
        mult, shift = zip(*(qp.quantize_multiplier(r) for r in reals))
        bias_i = op.inputs[2] if len(op.inputs) > 2 else -1
        bias = np.zeros(n_out, np.int64) if bias_i < 0 else g.tensor(bias_i).data.astype(np.int64)
        bias_eff = bias + (-in_zp) * w.data.astype(np.int64).sum(axis=1)
        lo, hi = rp.accumulator_range(w.data, bias_eff)
        amin, amax = qp.activation_range(op.options.get("fusedActivationFunction", 0), "int8", out_s, out_zp)
        for r in range(n_out):
            yield op.index, n_in, int(lo[r]), int(hi[r]), int(mult[r]), int(shift[r]), rounding, int(out_zp), \
                int(amin), int(amax)




def convert_zoo(work: Path) -> list[Path]:
    """int8 step models of the test zoo, converted by the edgernn command (one process per model)."""
    from edgernn.testing import zoo

    folders = []
    for name, build in zoo.ZOO.items():
        folder = work / name
        if not (folder / "step.tflite").exists():
            model = build()
            src = zoo.save(model, str(work))
            calib = work / f"{name}_calib.npy"
            np.save(calib, zoo.trajectories(8, 24, zoo.features_of(model), seed=1))
            subprocess.run([sys.executable, "-m", "edgernn", "convert", src, "-o", str(folder), "--quant", "int8",
                            "--calib", str(calib)], check=False, capture_output=True, cwd=ROOT)
        if (folder / "step.tflite").exists():
            folders.append(folder)
        else:
            print(f"{name}: not converted")
    return folders


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--zoo", action="store_true")
    ap.add_argument("--work")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="edgernn_requant_"))
    work.mkdir(parents=True, exist_ok=True)
    paths = [Path(p) for p in args.paths]
    if args.zoo:
        paths += convert_zoo(work)
    total = covered = 0
    print(f"{'model':40s} {'FC rows':>8s} {'covered':>8s} {'share':>6s}  reachable |acc| (median)")
    for p in paths:
        step = p / "step.tflite" if p.is_dir() else p
        rows = list(fc_rows(step))
        ok = 0
        spans = []
        for (_, _, lo, hi, m, s, rnd, zp, amin, amax) in rows:
            spans.append(max(abs(lo), abs(hi)))
            if rp.reduced_rescale(lo, hi, m, s, rnd, zp, amin, amax) is not None:
                ok += 1
        total += len(rows)
        covered += ok
        share = f"{100.0 * ok / len(rows):5.1f}%" if rows else "   -"
        med = int(np.median(spans)) if spans else 0
        print(f"{p.name if p.is_dir() else str(p):40s} {len(rows):8d} {ok:8d} {share:>6s}  {med:,}")
    if total:
        print(f"{'all':40s} {total:8d} {covered:8d} {100.0 * covered / total:5.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
