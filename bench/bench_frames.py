"""The frame example (examples/frame_ncp: a per-frame CNN and a CfC(AutoNCP(16, 2)) over 32x32x1 frames), int8:
cycles per frame on GAP8 in GVSOC, instructions per frame on rv32imc, and instructions per frame on x86-64 of
edgernn's C and of TFLite Micro on the same step.tflite. Prints figures; asserts nothing.

    GAP_SDK_HOME=/path/to/gap_sdk python bench/bench_frames.py [--only model,rv32,gap8,x86] [--steps 24]
        [--example DIR] [--keep DIR] [--json F]

The model is the example's: examples/frame_ncp/train.py is run into the work folder (under a minute), unless
--example names a folder that already holds its frame_ncp.keras and calib.npy. Frames are the example's own
(`sequences(1, 2 * steps, seed=1)`, the held-out seed), the same for every section.

model The layers of the step model (edgernn's step.tflite, else the fallback below): per op, MACs per frame
      (CONV_2D and DEPTHWISE_CONV_2D: output elements x kernel elements x input channels per group;
      FULLY_CONNECTED: rows x outputs x inputs; MUL: one per element), its output's bytes, and the parameter
      count (the Keras model's) and constant bytes (the .tflite's). "Largest op" is the largest input + output
      bytes of one op, a lower bound of the arena; the real arena is the build's (manifest `arena_bytes`).
rv32  Board qemu_riscv32: built as `edgernn build --board qemu_riscv32 --quant int8 --calib calib.npy` and
      validated (`edgernn.validate.run.validate`) on the frames: instructions per frame are the report's
      cycles_per_step, minstret under QEMU's -icount shift=0 (retired instructions, exact), the mean over the
      frames, valid only beside parity PASS with 0 mismatching bytes.
gap8  Board gvsoc_gap8: built as `edgernn build --board gvsoc_gap8`, then each variant of bench/bench_gap8.py
      (make variables EDGERNN_CLUSTER_CORES=0|1|8, EDGERNN_XPULP=1, EDGERNN_CYCLES_FC) run in GVSOC on the
      frames over the simulated UART. Cycles per frame are the median over frames 3 on, as the firmware
      reports them: on the FC alone, the FC's PULP counter at the FC clock; on the cluster, the master core's
      counter around the step's cluster task at the cluster clock (FC dispatch excluded), and in the
      "dispatch included" row the FC's timer from edgernn_step's start to its end, in cluster cycles.
      Every variant's outputs are held against LiteRT's (the oracle) and the 8-core build's states.
      Memory: the build's manifest (arena, weights, code bytes, and where the placement put them).
x86   The build's step.tflite on x86-64 (bench/bench_speed.py's method). edgernn: the host C (kernels,
      model.c, tests/c/step_driver.c) gcc -O2 under valgrind --tool=callgrind, per frame = (run of 2N
      frames - run of N) / N. TFLite Micro: the pip package tflite-micro runs the same step.tflite on the same
      quantized frames, states fed back, under callgrind with --toggle-collect on MicroInterpreter::Invoke,
      again (2N - N) / N; its outputs are compared with LiteRT's.

Until edgernn converts 5-D (batch, time, H, W, C) models, the rv32 and gap8 sections and edgernn's x86 figure
print "not measured" with edgernn's refusal. The model and TFLM figures still run: they need only a
step.tflite, which the bench then makes itself (`own_step_tflite`: the same per-step Keras model, calibration on
the float step model's trajectories and tied state quantization as edgernn's step path, with edgernn's
functions), and marks each such figure "fallback step.tflite".
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

from edgernn.testing.bench import Figure, edgernn_instructions, log, run_variant, tflm_instructions

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "frame_ncp"
os.environ.setdefault("GAP_SDK_HOME", str(ROOT.parent / "shared" / "gap_sdk"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

SECTIONS = ("model", "rv32", "gap8", "x86")
QUANT = "int8"
FALLBACK = "fallback step.tflite (edgernn refused the model)"
GAP8 = [  # (label, EDGERNN_CLUSTER_CORES, EDGERNN_CYCLES_FC); the 8-core build runs first: the others are held to it
    ("8 cluster cores, SIMD", 8, False),
    ("8 cluster cores, SIMD, dispatch included", 8, True),
    ("1 cluster core, SIMD", 1, False),
    ("FC alone, SIMD", 0, False),
]


def print_table(title: str, rows: list[Figure]) -> None:
    """Figures without goals: this bench reports, it sets no targets."""
    print(f"\n## {title}\n")
    print("| figure | measured | |")
    print("|---|---|---|")
    for r in rows:
        value = "n/a" if r.measured is None else (f"{r.measured:,.0f}" if abs(r.measured) >= 100 or
                                                  float(r.measured).is_integer() else f"{r.measured:.3f}")
        print(f"| {r.figure} | {value}{(' ' + r.unit) if r.unit and r.measured is not None else ''} | {r.note} |")
    sys.stdout.flush()


# ---------------------------------------------------------------- the example, its frames and its step model


def _train_module():
    spec = importlib.util.spec_from_file_location("frame_ncp_train", EXAMPLE / "train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def example_files(work: Path, given: str | None) -> Path:
    """A folder with frame_ncp.keras and calib.npy: --example's, else the example trained into work."""
    if given:
        folder = Path(given)
        if not (folder / "frame_ncp.keras").exists() or not (folder / "calib.npy").exists():
            sys.exit(f"bench_frames: {folder} holds no frame_ncp.keras and calib.npy; run {EXAMPLE / 'train.py'}")
        return folder
    folder = work / "example"
    log("training examples/frame_ncp")
    subprocess.run([sys.executable, str(EXAMPLE / "train.py"), "--out", str(folder)], check=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    return folder


class Steps:
    """The example's step.tflite, made once: by edgernn (`convert`, then `build` per board) or the fallback."""

    def __init__(self, example: Path, work: Path):
        self.keras_path, self.work = example / "frame_ncp.keras", work
        self.calib = np.load(example / "calib.npy")
        self.builds: dict[str, Path | str] = {}
        self._step: tuple[Path, str] | None = None

    def build(self, board: str) -> Path | str:
        """The build folder for a board, or edgernn's refusal (one line)."""
        if board not in self.builds:
            from edgernn.errors import EdgeRNNError
            from edgernn.pipeline.build import build_model

            out = self.work / f"build_{board}"
            shutil.rmtree(out, ignore_errors=True)      # never an older run's build
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    build_model(str(self.keras_path), out, board=board, quant=QUANT, calib=self.calib)
                self.builds[board] = out
            except EdgeRNNError as exc:
                self.builds[board] = f"edgernn build --board {board}: {exc}"
        return self.builds[board]

    def step(self) -> tuple[Path, str]:
        """(folder holding step.tflite, note): edgernn's conversion, else the bench's own."""
        if self._step is None:
            from edgernn import tfenv
            from edgernn.errors import EdgeRNNError
            from edgernn.pipeline.convert import convert

            out = self.work / "convert"
            shutil.rmtree(out, ignore_errors=True)
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    convert(str(self.keras_path), out, quant=QUANT, calib=self.calib)
                self._step = (out, "edgernn's step.tflite")
            except EdgeRNNError as exc:
                log(f"edgernn refused the model ({exc}); making the step model here")
                own = self.work / "own_step"
                with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings(), \
                        tfenv.native_stderr_captured():
                    warnings.simplefilter("ignore")
                    rel = own_step_tflite(self.keras_path, self.calib, own)
                self._step = (own, f"{FALLBACK}, its float twin within {rel:.1e} of Keras")
        return self._step


def _step_keras_model(model: Any):
    """(x frame, CfC state) -> (y, state'): the trained layers themselves, TimeDistributed ones unwrapped."""
    import keras

    rnn = next(layer for layer in model.layers if hasattr(layer, "cell"))
    frame = tuple(int(d) for d in model.inputs[0].shape[2:])
    x = keras.Input(frame, batch_size=1, name="x")
    state = keras.Input((int(rnn.cell.state_size),), batch_size=1, name="state_0")
    z = x
    for layer in model.layers[: model.layers.index(rnn)]:
        z = (layer.layer if type(layer).__name__ == "TimeDistributed" else layer)(z)
    y, new_state = rnn.cell(z, [state], training=False)
    new_state = new_state[0] if isinstance(new_state, (list, tuple)) else new_state
    return keras.Model([x, state], [y, new_state], name="frame_ncp_step"), f"{rnn.name}.h"


def own_step_tflite(keras_path: Path, calib: np.ndarray, out: Path) -> float:
    """step.tflite as edgernn's step path makes it (edgernn/pipeline/convert.py StepStrategy), for a model
    edgernn does not convert yet: float conversion, the float step model's trajectories over the calibration
    frames, calibration and quantization with the state's input and output tied. Returns the float step
    model's largest error against the Keras model over the calibration frames, relative to the largest output."""
    import keras

    from edgernn.keras.stepmodel import StepModel
    from edgernn.tflite import model as tfl
    from edgernn.tflite.keras_converter import convert_float, converter, match_outputs
    from edgernn.tflite.quantize import (calibrate, calibration_subset, quantize_with_tied_states,
                                         run_step_sequences)

    import ncps.keras  # noqa: F401  (registers CfC for loading)

    model = keras.saving.load_model(keras_path, compile=False)
    step_model, state_name = _step_keras_model(model)
    step = StepModel(keras_model=step_model, input_names=[("x", "x"), ("state_0", state_name)],
                     output_names=["y", state_name], state_names=[state_name])
    keys = match_outputs(convert_float(step_model), step_model, ["x", "state_0"])

    def public(data: bytes) -> bytes:
        return tfl.with_signature_keys(data, dict(step.input_names), list(zip(keys, step.output_names)))

    step_float = public(convert_float(step_model))
    samples, ys = run_step_sequences(step_float, calib, [state_name])
    want = np.asarray(model(calib, training=False))
    by_keras = [{"x": s["x"], "state_0": s[state_name]} for s in calibration_subset(samples)]
    calibrated = calibrate(converter(step_model), by_keras)
    quantized, _ = quantize_with_tied_states(calibrated, [("state_0", keys[1])], QUANT)
    out.mkdir(parents=True, exist_ok=True)
    (out / "step.tflite").write_bytes(public(quantized))
    return float(np.max(np.abs(ys.reshape(want.shape) - want)) / np.max(np.abs(want)))


def frames_for(steps: int) -> np.ndarray:
    """(2 * steps, 32, 32, 1) float frames of one held-out sequence."""
    return _train_module().sequences(1, 2 * steps, seed=1)[0][0]


def quantize_frames(step_tflite: Path, frames: np.ndarray) -> np.ndarray:
    from edgernn.testing import backend_harness as H

    return H.quantize_x(step_tflite.parent, frames)


def litert_run(step_tflite: Path, xq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """LiteRT's (edgernn's oracle's) y and state per frame, states fed back: (frames, y), (frames, state)."""
    from edgernn.tflite.interpreter import load_interpreter

    runner = load_interpreter(step_tflite).get_signature_runner("serving_default")
    details = runner.get_input_details()
    names = [n for n in details if n != "x"]
    states = {n: np.full(details[n]["shape"], details[n]["quantization_parameters"]["zero_points"][0],
                         details[n]["dtype"]) for n in names}
    ys, hs = [], []
    for x in xq:
        result = runner(x=x.reshape(details["x"]["shape"]), **states)
        states = {n: np.asarray(result[n]) for n in names}
        ys.append(np.asarray(result["y"]).reshape(-1))
        hs.append(np.concatenate([states[n].reshape(-1) for n in names]))
    return np.stack(ys), np.stack(hs)


# ---------------------------------------------------------------- model: layers, MACs, memory


def op_rows(step_tflite: Path) -> list[tuple[str, int, int, int]]:
    """(op, MACs, input bytes, output bytes) of each op of the step model, in graph order."""
    from edgernn.tflite import model as tfl

    model = tfl.read(step_tflite.read_bytes())
    graph = model.subgraphs[0]
    consts = {i for i, t in enumerate(graph.tensors) if model.buffers[t.buffer].data is not None}

    def nbytes(i: int) -> int:
        t = graph.tensors[i]
        width = {"int8": 1, "uint8": 1, "int16": 2, "int32": 4, "float32": 4, "int64": 8}[tfl.type_name(t.type)]
        return int(np.prod(t.shape)) * width if t.shape is not None else 0

    rows = []
    for op in graph.operators:
        name = tfl.op_name(model, op.opcodeIndex)
        out = graph.tensors[op.outputs[0]]
        elems = int(np.prod(out.shape))
        macs = 0
        if name == "CONV_2D":
            macs = elems * int(np.prod(graph.tensors[op.inputs[1]].shape[1:]))       # (O, kh, kw, I)
        elif name == "DEPTHWISE_CONV_2D":
            macs = elems * int(np.prod(graph.tensors[op.inputs[1]].shape[1:3]))      # (1, kh, kw, O)
        elif name == "FULLY_CONNECTED":
            macs = elems * int(graph.tensors[op.inputs[1]].shape[-1])
        elif name == "MUL":
            macs = elems
        activations_in = sum(nbytes(i) for i in op.inputs if i >= 0 and i not in consts)
        rows.append((name, macs, activations_in, sum(nbytes(i) for i in op.outputs)))
    return rows


def model_section(steps: Steps) -> list[Figure]:
    import keras

    import ncps.keras  # noqa: F401

    from edgernn.tflite import model as tfl

    folder, origin = steps.step()
    step_tflite = folder / "step.tflite"
    rows = op_rows(step_tflite)
    macs: dict[str, int] = {}
    for name, m, _, _ in rows:
        macs[name] = macs.get(name, 0) + m
    total = sum(macs.values())
    params = keras.saving.load_model(steps.keras_path, compile=False).count_params()
    consts = tfl.constant_bytes(tfl.read(step_tflite.read_bytes()))
    widest = max(rows, key=lambda r: r[2] + r[3])
    split = ", ".join(f"{k} {v:,}" for k, v in sorted(macs.items(), key=lambda kv: -kv[1]) if v)
    kinds = " ".join(sorted({r[0] for r in rows}))
    return [
        Figure("model", "MACs per frame", total, note=f"{split}; {len(rows)} ops: {kinds}; {origin}",
               extra={"by_op": macs, "ops": len(rows)}),
        Figure("model", "parameters (Keras)", params),
        Figure("model", "constant bytes of step.tflite (weights, biases, quantization)", consts, unit="B"),
        Figure("model", "largest op: input + output activations", widest[2] + widest[3], unit="B",
               note=f"{widest[0]}, a lower bound of the arena"),
    ]


# ---------------------------------------------------------------- rv32: instructions per frame on qemu_riscv32


def rv32_section(steps: Steps, frames: np.ndarray) -> list[Figure]:
    from edgernn.validate.run import validate

    out = steps.build("qemu_riscv32")
    label = "instructions per frame (minstret)"
    if isinstance(out, str):
        return [Figure("rv32", label, None, note=f"not measured: {out}")]
    log("rv32: validating on qemu_riscv32")
    report = validate(out, data=frames[None], seed=0, json_path=out / "bench_report.json")
    dev, ref = report["device"], report["reference"]
    mismatches = int(ref["mismatches"]) + int(ref.get("state_mismatches", 0))
    per_frame = float(dev["cycles_per_step"])
    macs = sum(m for _, m, _, _ in op_rows(out / "step.tflite"))      # convolutions counted too
    verdict = "PASS" if report["pass"] else "FAIL"
    note = (f"{macs:,} MACs/frame, {per_frame / macs:.2f} instr/MAC; parity {verdict}, {mismatches} mismatching "
            f"bytes over {len(frames)} frames")
    if not report["pass"]:
        note += " (figure invalid)"
    return [Figure("rv32", label, per_frame, note=note,
                   extra={"macs_per_frame": macs, "parity": verdict, "mismatching_bytes": mismatches})]


# ---------------------------------------------------------------- gap8: cycles per frame in GVSOC


def memory_rows(section: str, out: Path) -> list[Figure]:
    manifest = json.loads((out / "manifest.json").read_text())
    placed = (manifest.get("placement") or {}).get("items") or {}
    rows = []
    for key, item in (("arena_bytes", "arena"), ("weight_bytes", "weights"), ("code_bytes", None)):
        where = placed.get(item, {}).get("memory", "") if item else ""
        rows.append(Figure(section, f"memory: {key}", manifest.get(key), unit="B",
                           note=f"placed in {where}" if where else ""))
    return rows


def gap8_section(steps: Steps, frames: np.ndarray, work: Path) -> list[Figure]:
    from edgernn.targets import device as devices
    from edgernn.targets.gap8 import sdk as gap_sdk

    labels = [label for label, _, _ in GAP8]
    try:
        gap_sdk.sdk_home()
        with contextlib.redirect_stdout(io.StringIO()):
            gap_sdk.build_gvsoc()
    except Exception as exc:  # noqa: BLE001 - any missing piece of the SDK: the section is not measured
        return [Figure("gap8", f"{label}: cycles per frame", None, note=f"not measured: {exc}") for label in labels]
    out = steps.build("gvsoc_gap8")
    if isinstance(out, str):
        return [Figure("gap8", f"{label}: cycles per frame", None, note=f"not measured: {out}") for label in labels]
    board = devices.load_board("gvsoc_gap8")
    xq = quantize_frames(out / "step.tflite", frames)
    want_y, _ = litert_run(out / "step.tflite", xq)
    rows, base = [], None
    for label, cores, fc_clock in GAP8:
        log(f"gap8: {label}")
        result, info = run_variant(out, cores, 1, xq.reshape(len(xq), -1), work, fc_clock=fc_clock)
        base = base or result
        exact = np.array_equal(np.asarray(result.outputs).reshape(want_y.shape), want_y)
        same = np.array_equal(result.states, base.states)
        cycles = float(np.median(result.cycles[2:]))       # the first frames warm the caches
        clock = board["cpu"]["fc_hz"] if cores == 0 else board["cpu"]["cluster_hz"]
        note = (f"{cycles / clock * 1e6:,.1f} µs at {clock / 1e6:.0f} MHz, {info.workers} workers; y "
                f"{'equal to LiteRT' if exact else 'DIFFERS from LiteRT (figure invalid)'}, states "
                f"{'same as 8 cores' if same else 'DIFFER from 8 cores (figure invalid)'}")
        rows.append(Figure("gap8", f"{label}: cycles per frame", cycles, note=note,
                           extra={"cluster_cores": cores, "dispatch_included": fc_clock, "us": cycles / clock * 1e6,
                                  "y_equal_litert": bool(exact), "states_same": bool(same)}))
    return rows + memory_rows("gap8", out)


# ---------------------------------------------------------------- x86: edgernn's C and TFLite Micro


def x86_section(steps: Steps, frames: np.ndarray, n: int, work: Path) -> list[Figure]:
    if shutil.which("valgrind") is None:
        return [Figure("x86", "instructions per frame", None, note="not measured: valgrind missing")]
    rows = []
    host = steps.build("host")
    if isinstance(host, str):
        rows.append(Figure("x86", "edgernn C, gcc -O2: instructions per frame", None, note=f"not measured: {host}"))
        folder, origin = steps.step()
    else:
        log("x86: edgernn")
        folder, origin = host, "edgernn's step.tflite"     # TFLM runs the very file the C was generated from
        xq = quantize_frames(folder / "step.tflite", frames)
        rows.append(Figure("x86", "edgernn C, gcc -O2: instructions per frame",
                           edgernn_instructions(host, xq, n), note=origin))
    if importlib.util.find_spec("tflite_micro") is None:
        rows.append(Figure("x86", "TFLite Micro: instructions per frame", None,
                           note="not measured: pip install tflite-micro"))
        return rows
    log(f"x86: TFLite Micro, {origin}")
    xq = quantize_frames(folder / "step.tflite", frames)
    tflm_work = work / "tflm"
    tflm_work.mkdir(parents=True, exist_ok=True)
    theirs, tflm_y = tflm_instructions(folder, xq, n, tflm_work)
    want_y, _ = litert_run(folder / "step.tflite", xq)
    gap = np.abs(tflm_y.reshape(want_y.shape).astype(np.int32) - want_y.astype(np.int32))
    diff = int((gap != 0).sum())
    worst = int(gap.max())
    rows.append(Figure("x86", "TFLite Micro: instructions per frame (Invoke)", theirs,
                       note=f"{origin}; y against LiteRT: {diff} of {want_y.size} values differ, by at most {worst} LSB",
                       extra={"tflm_y_mismatches": diff, "tflm_y_max_lsb": worst}))
    if rows[0].measured:
        rows.append(Figure("x86", "edgernn / TFLite Micro instructions", rows[0].measured / theirs))
    return rows


# ---------------------------------------------------------------- main

TITLES = {
    "model": "The step model of examples/frame_ncp (int8, one 32x32x1 frame per step)",
    "rv32": "rv32imc (qemu_riscv32, minstret = retired instructions, exact)",
    "gap8": "GAP8 in GVSOC (gvsoc_gap8), cycles per frame, Xpulp SIMD",
    "x86": "x86-64, edgernn's C against TFLite Micro on the same step.tflite (valgrind --tool=callgrind)",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"comma list of {','.join(SECTIONS)}")
    ap.add_argument("--steps", type=int, default=24,
                    help="frames per device run; x86 counts runs of N and 2N frames")
    ap.add_argument("--example", help="a folder with frame_ncp.keras and calib.npy (else the example is trained)")
    ap.add_argument("--keep", help="folder to keep the builds in")
    ap.add_argument("--json", help="write every figure to this JSON file")
    args = ap.parse_args()
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(only) - set(SECTIONS))
    if unknown:
        sys.exit(f"bench_frames: unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="edgernn-frames-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.time()
    figures: list[Figure] = []
    try:
        steps = Steps(example_files(work, args.example), work)
        frames = frames_for(args.steps)
        runs: dict[str, Callable[[], list[Figure]]] = {
            "model": lambda: model_section(steps),
            "rv32": lambda: rv32_section(steps, frames[: args.steps]),
            "gap8": lambda: gap8_section(steps, frames[: args.steps], work),
            "x86": lambda: x86_section(steps, frames, args.steps, work),
        }
        for section in SECTIONS:
            if section in only:
                rows = runs[section]()
                print_table(TITLES[section], rows)
                figures += rows
    finally:
        if args.json:
            Path(args.json).write_text(json.dumps(
                {"steps": args.steps, "seconds": round(time.time() - started, 1),
                 "figures": [{**f.__dict__} for f in figures]}, indent=1, default=str) + "\n")
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\n{args.steps} frames per run; {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
