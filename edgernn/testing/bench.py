"""What the benchmarks in bench/ share: a figure and its goal, the x86-64 instruction counts of the generated C
and of TFLite Micro under valgrind, the GAP8 models and variants run in GVSOC, the --quant auto plan in a table
cell, and a build's error sequence by sequence. Imports of TensorFlow, the GAP SDK's tools and the link stay inside
the functions.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass
class Figure:
    """One row of a bench's table: the figure measured (None: not measured, ``note`` says why) beside its goal."""

    section: str
    figure: str
    measured: float | None
    goal: str = ""                      # "<= 4.0", ">= 6", "" (reported only)
    unit: str = ""
    note: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def met(self) -> str:
        if not self.goal:
            return "-"
        if self.measured is None:
            return "n/a"
        op, value = self.goal.split()
        limit = float(value.replace(",", ""))
        return "yes" if (self.measured <= limit if op == "<=" else self.measured >= limit) else "no"


def log(message: str) -> None:
    """A progress line on stderr, with the time."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---- x86-64: instructions under valgrind --tool=callgrind


def instructions(exe: Path, xq: np.ndarray, work: Path) -> int:
    """The instructions valgrind --tool=callgrind counts in a whole run of the step driver ``exe`` over ``xq``."""
    inp, out, cg = work / "in.bin", work / "out.bin", work / "callgrind.out"
    inp.write_bytes(np.int32(xq.shape[0]).tobytes() + xq.tobytes())
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={cg}", str(exe), str(inp), str(out)],
                   check=True, capture_output=True)
    text = cg.read_text()
    m = re.search(r"^summary:\s+(\d+)", text, re.M) or re.search(r"^totals:\s+(\d+)", text, re.M)
    return int(m.group(1))


TFLM_DRIVER = r'''
import json, sys
import numpy as np
from tflite_micro.python.tflite_micro import runtime

spec = json.load(open(sys.argv[1]))
xq = np.load(sys.argv[2])
n = int(sys.argv[3])
interp = runtime.Interpreter.from_file(spec["model"], arena_size=spec["arena_size"])
states = {int(i): np.full(s, zp, dtype=np.dtype(dt)) for i, s, zp, dt in spec["state_inputs"]}
ys = []
for t in range(n):
    interp.set_input(xq[t].reshape(spec["x_shape"]), spec["x_input"])
    for i, value in states.items():
        interp.set_input(value, i)
    interp.invoke()
    ys.append(np.array(interp.get_output(spec["y_output"])).reshape(-1))
    for i, o in spec["feedback"]:          # output o is next step's input i
        states[int(i)] = np.array(interp.get_output(int(o))).reshape(states[int(i)].shape)
np.save(sys.argv[4], np.stack(ys))
'''


def _io_spec(folder: Path) -> dict:
    """Input and output positions of step.tflite (TFLM addresses them by position), from LiteRT's details."""
    from edgernn.tflite.interpreter import load_interpreter

    interp = load_interpreter(folder / "step.tflite")
    runner = interp.get_signature_runner("serving_default")
    sig_in, sig_out = runner.get_input_details(), runner.get_output_details()
    pos_in = {d["index"]: i for i, d in enumerate(interp.get_input_details())}
    pos_out = {d["index"]: i for i, d in enumerate(interp.get_output_details())}
    states = [name for name in sig_in if name != "x"]
    state_inputs = []
    for name in states:
        d = sig_in[name]
        zp = d["quantization_parameters"]["zero_points"]
        state_inputs.append([pos_in[d["index"]], [int(v) for v in d["shape"]], int(zp[0]) if len(zp) else 0,
                             np.dtype(d["dtype"]).name])
    return {"model": str(folder / "step.tflite"), "arena_size": 1 << 20,
            "x_input": pos_in[sig_in["x"]["index"]], "x_shape": [int(v) for v in sig_in["x"]["shape"]],
            "y_output": pos_out[sig_out["y"]["index"]], "state_inputs": state_inputs,
            "feedback": [[pos_in[sig_in[n]["index"]], pos_out[sig_out[n]["index"]]] for n in states]}


def _callgrind_total(text: str) -> int:
    m = re.search(r"^summary:\s+(\d+)", text, re.M) or re.search(r"^totals:\s+(\d+)", text, re.M)
    return int(m.group(1)) if m else 0


def tflm_instructions(folder: Path, xq: np.ndarray, steps: int, work: Path) -> tuple[float, np.ndarray]:
    """TFLM instructions per invoke (Invoke only, 2N - N over N) and its y over 2N steps."""
    driver, spec_file, x_file = work / "tflm_driver.py", work / "tflm_spec.json", work / "tflm_x.npy"
    driver.write_text(TFLM_DRIVER)
    spec_file.write_text(json.dumps(_io_spec(folder)))
    np.save(x_file, xq)
    counts, ys = [], None
    for n in (steps, 2 * steps):
        cg, y_file = work / f"tflm_{n}.callgrind", work / f"tflm_y_{n}.npy"
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={cg}",
                        "--toggle-collect=*MicroInterpreter::Invoke*", sys.executable, str(driver), str(spec_file),
                        str(x_file), str(n), str(y_file)], check=True, capture_output=True)
        counts.append(_callgrind_total(cg.read_text()))
        ys = np.load(y_file)
    return (counts[1] - counts[0]) / steps, ys


def edgernn_instructions(folder: Path, xq: np.ndarray, steps: int) -> float:
    """The generated C's instructions per step on x86-64 (gcc -O2, 2N - N over N, as ``instructions`` counts them)."""
    from edgernn.testing import backend_harness as H

    b = H.build(folder, cflags=["-O2"], name="driver_bench")
    n1 = instructions(b.exe, xq[:steps], folder)
    n2 = instructions(b.exe, xq, folder)
    return (n2 - n1) / steps


# ---- GAP8 in GVSOC: bench/bench_gap8.py's models and variants

GAP8_BOARD = "gvsoc_gap8"
GAP8_MODELS = {  # name: (zoo.gap8_model's kind, or "trained:" and edgernn.testing.trained's name; mode)
    "lstm64": ("lstm64", "step"),
    "lstm64_fused": ("lstm64_fused", "fused"),
    "gru16": ("gru", "step"),
    "cfc": ("cfc", "step"),
    "ltc": ("ltc", "step"),
    "cfc_trained": ("trained:cfc_ncp", "step"),
    "ltc_trained": ("trained:ltc_ncp", "step"),
}


def build_gap8(name: str, work: Path, quant: str = "int8") -> Path:
    """Build GAP8_MODELS' ``name`` for gvsoc_gap8 at ``quant`` into ``work / name`` (``name_int16`` at int16): a zoo
    model calibrated on zoo.trajectories, a trained one on its own calibration trajectories."""
    from edgernn.pipeline.build import build_model as build_folder
    from edgernn.testing.zoo import gap8_model, trajectories

    kind, mode = GAP8_MODELS[name]
    out = work / (name if quant == "int8" else f"{name}_{quant}")
    if kind.startswith("trained:"):
        from edgernn.testing.trained import trained

        t = trained(kind.split(":", 1)[1])
        build_folder(str(t.path), out, board=GAP8_BOARD, quant=quant, mode=mode, calib=t.calib)
        return out
    model, n_in = gap8_model(kind)
    path = work / f"{name}.keras"
    model.save(path)
    build_folder(str(path), out, board=GAP8_BOARD, quant=quant, mode=mode, calib=trajectories(8, 80, n_in, 1))
    return out


def gap8_inputs(name: str, steps: int, x_entry: dict) -> np.ndarray:
    """``steps`` quantized inputs for GAP8_MODELS' ``name`` (``x_entry``: its manifest's input): a trained model's
    first test trajectory (200 steps), else seeded normal noise of deviation 0.5."""
    from edgernn.tflite.oracle import quantize

    kind, _ = GAP8_MODELS[name]
    if kind.startswith("trained:"):
        from edgernn.testing.trained import trained

        xs = trained(kind.split(":", 1)[1]).test[0][:steps]
    else:
        xs = np.random.default_rng(0).normal(0, 0.5, (steps, x_entry["shape"][-1])).astype(np.float32)
    return quantize(xs, x_entry)


def run_variant(out: Path, cores: int, simd: int, xs: np.ndarray, work: Path, fc_clock: bool = False, asm: int = 1):
    """Build and run one variant. fc_clock: the cycles are the FC's (EDGERNN_CYCLES_FC=1), the cluster
    dispatch included, still in cluster cycles; else the cluster master's count of the step's task.
    asm: the int8 dot products' hand-written Xpulp kernels (EDGERNN_DOT_ASM=1) or gcc's C (0)."""
    from edgernn.link import LinkClient
    from edgernn.targets import device as devices

    board = devices.load_board(GAP8_BOARD)
    make_vars = {"EDGERNN_CLUSTER_CORES": cores, "EDGERNN_XPULP": simd, "EDGERNN_CYCLES_FC": int(fc_clock),
                 "EDGERNN_DOT_ASM": asm}
    elf = devices.build_elf(out / "firmware", board,
                            work / f"{out.name}_c{cores}_s{simd}_a{asm}_f{int(fc_clock)}", make_vars=make_vars).elf
    with devices.start(elf, board) as device:
        with LinkClient.open(device.url, baud=board["serial"]["baud"], timeout=board["serial"]["timeout_s"]) as link:
            link.wait_ready(board["emulator"]["start_timeout_s"])
            info = link.hello()
            return link.run(xs, states="every"), info


# ---- --quant auto and the error of a build


def plan_text(out: Path, missing: str = "-") -> str:
    """OUT's --quant auto plan in a table cell: int16/int8 ops, QUANTIZE seams, FULLY_CONNECTEDs in two parts, the
    error on calibration; ``missing`` for a build without a plan."""
    from edgernn.outdir import read_manifest

    p = read_manifest(out).precision or {}
    if "int16_ops" not in p:
        return missing
    return (f"{p['int16_ops']}/{p['int8_ops']}, {p['quantize_ops']}, {len(p.get('two_part_weights') or [])}, "
            f"{p['error']:.4f}")


def sequence_figures(out: Path, data: np.ndarray, above: float) -> dict:
    """OUT's step.tflite against its float_step.tflite over the sequences of ``data`` (LiteRT, states fed back): the
    l2r over them together, the sequence l2r, the median, 90th percentile and worst of each sequence's own l2r, and
    how many are above ``above``."""
    from edgernn.tflite import mixed
    from edgernn.tflite.quantize import run_step_sequences

    from edgernn.outdir import read_manifest

    manifest = read_manifest(out)
    if manifest.mode != "step" or not (out / "float_step.tflite").is_file():
        return {"skipped": f"{manifest.mode} mode, quant {manifest.quant}: step models with a float twin only"}
    states = [s["name"] for s in manifest.states]
    _, want = run_step_sequences((out / "float_step.tflite").read_bytes(), data, states)
    got = mixed.run_quantized((out / "step.tflite").read_bytes(), data, [(s, s) for s in states])
    want = np.reshape(want, got.shape)
    each = np.array([mixed.l2r(g, w) for g, w in zip(got, want) if np.any(w)])
    return {"quant": manifest.quant, "l2r": mixed.l2r(got, want), "sequence_l2r": mixed.sequence_l2r(got, want),
            "median": float(np.median(each)), "p90": float(np.quantile(each, 0.9)), "worst": float(each.max()),
            "above": int((each > above).sum()), "sequences": len(each)}
