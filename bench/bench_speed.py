"""Every speed figure of the int8 backend next to its goal, in one run: rv32imc instructions, x86-64 against
TFLite Micro, GAP8 MACs per cycle in GVSOC, and rv32imc code size. Prints figures; asserts nothing.

    GAP_SDK_HOME=/path/to/gap_sdk python bench/bench_speed.py [--only rv32,x86,gap8,size] [--steps 40] [--json F] [--models lstm64,cfc]

All models are int8, have 6 inputs, are built with keras seed 0 and calibrated on the same trajectories
(edgernn/testing/zoo.py, seed 1); the LSTM(64), CfC and LTC models are bench/bench_gap8.py's.

rv32  Board qemu_riscv32: each model is built (`edgernn.pipeline.build.build_model`, as `edgernn build
      --board qemu_riscv32`) and validated (`edgernn.validate.run.validate`) over --steps synthetic steps.
      Instructions per step are the report's cycles_per_step: minstret under QEMU's -icount shift=0, i.e.
      retired instructions, exact, the mean over the steps. MACs per step are the manifest's
      (edgernn/tflite/model.py `macs`). Each figure stands beside the parity verdict and the mismatching
      bytes (outputs and states) against the LiteRT interpreter: a figure is valid only at PASS, 0 bytes.
x86   The LSTM(64) step.tflite of the step path and of the fused path, on x86-64. edgernn: the generated C
      (kernels + model.c + tests/c/step_driver.c) compiled gcc -O2 and run under valgrind --tool=callgrind;
      instructions per step are (run of 2N steps - run of N steps) / N, as bench/bench_backend.py counts
      them, so start-up cancels out (the driver's own per-step read and write stay in: about 450 of the
      LSTM's 84,800, by --toggle-collect=edgernn_step). TFLite Micro: the pip package tflite-micro (its Python
      interpreter, reference kernels as the wheel was built) runs the same step.tflite on the same quantized
      inputs under valgrind --tool=callgrind --toggle-collect on MicroInterpreter::Invoke, so only the
      invokes count (not Python, set_input or get_output); per invoke is again the 2N - N difference over N,
      which takes out one-off work of the first invoke. Streaming as on the device: on the step path the
      output states are fed back as the next invoke's input states; the fused file (time 1) keeps the LSTM
      state in its variable tensors, which TFLM keeps across invokes (it is never reset between them). The
      TFLM outputs are compared with LiteRT's (the edgernn oracle) and the mismatches printed. Goal: edgernn
      / TFLM <= 0.15.
gap8  Board gvsoc_gap8: bench/bench_gap8.py's builds and runs (same make variables EDGERNN_CLUSTER_CORES,
      EDGERNN_XPULP=1), MACs per cycle = MACs per step / the median cycles per step (steps 3 on). The
      cycles are those the firmware reports, the build's one cluster task for the whole run: in the rows
      without "dispatch included" a build made with EDGERNN_CYCLES_FC=0, the cluster master core's pi_perf
      counter around the step's body, at the cluster clock, which excludes the FC's dispatch and wake-up.
      The rows "dispatch included" are the default build (EDGERNN_CYCLES_FC=1): the firmware then counts
      the whole step as the FC sees it, from edgernn_step's start to its end, on the FC's FreeRTOS tick timer,
      converted to cluster cycles (report.json's cycles_per_step); the issue's 8-core goal and its CfC/LTC
      goals are those rows' (docs/boards/ai_deck.md, "Cycle counts"; bench/bench_cluster_task.py sets them
      beside a task per step). Every variant's outputs and states are checked equal to the 8-core build's.
size  The qemu_riscv32 firmware folder's model and kernel sources and weights.c (not the server or HAL) are
      compiled riscv64-unknown-elf-gcc -march=rv32imc -mabi=ilp32 -Os -ffunction-sections -fdata-sections
      with a tiny main that calls edgernn_init and edgernn_step, and linked -Wl,--gc-sections with a map
      file. The code size is the sum of the .text input sections the link kept from model.c and the kernel
      objects (weights.c's are counted apart and left out), i.e. only the functions reachable from edgernn_init/edgernn_step; their kept read-only data
      (tables, quantization constants, but not weights.c) is printed apart, as is what the link pulled in
      from libc/libgcc beyond an empty main's.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

import numpy as np

from edgernn.testing.bench import Figure, build_gap8, edgernn_instructions, log, run_variant, tflm_instructions

ROOT = Path(__file__).resolve().parents[1]
# the GAP SDK that CI uses (.ci/run), unless the caller names one
os.environ.setdefault("GAP_SDK_HOME", str(ROOT.parent / "shared" / "gap_sdk"))

N_IN = 6
SECTIONS = ("rv32", "x86", "gap8", "size")
MODELS = ("lstm64", "lstm16", "gru16", "cfc", "ltc")
TFLM_HINT = "not measured: pip install tflite-micro"


# ---------------------------------------------------------------- models


def model_of(kind: str):
    """The bench's Keras models: an RNN over 6 inputs, then Dense(1); seed 0."""
    import keras

    keras.utils.set_random_seed(0)
    L = keras.layers
    if kind == "lstm64":
        rnn = L.LSTM(64, return_sequences=True)
    elif kind == "lstm16":
        rnn = L.LSTM(16, return_sequences=True)
    elif kind == "gru16":
        rnn = L.GRU(16, reset_after=False, return_sequences=True)
    else:
        import ncps.keras
        from ncps.wirings import AutoNCP

        cell = {"cfc": ncps.keras.CfC, "ltc": ncps.keras.LTC}[kind]
        rnn = cell(AutoNCP(16, 2, seed=0), return_sequences=True)
    return keras.Sequential([keras.Input((None, N_IN)), rnn, L.Dense(1)], name=kind)


class Builds:
    """qemu_riscv32 builds, once per (model, mode): rv32, x86 and size all start from them."""

    def __init__(self, work: Path):
        self.work = work
        self.done: dict[tuple[str, str], Path] = {}

    def get(self, kind: str, mode: str) -> Path:
        if (kind, mode) not in self.done:
            from edgernn.testing.zoo import trajectories

            from edgernn.pipeline.build import build_model

            path = self.work / f"{kind}.keras"
            model_of(kind).save(path)
            out = self.work / f"rv32_{kind}_{mode}"
            # never an earlier run's build (a --keep folder's): its figures would be those of older code
            shutil.rmtree(out, ignore_errors=True)
            with contextlib.redirect_stdout(io.StringIO()):
                build_model(str(path), out, board="qemu_riscv32", quant="int8", mode=mode,
                               calib=trajectories(8, 80, N_IN, 1))
            self.done[(kind, mode)] = out
        return self.done[(kind, mode)]


# ---------------------------------------------------------------- figures


def fmt(value: float | None) -> str:
    if value is None:
        return "n/a"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3f}" if abs(value) < 10 else f"{value:.2f}"


def print_table(title: str, rows: list[Figure]) -> None:
    print(f"\n## {title}\n")
    print("| figure | measured | goal | met | |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.figure} | {fmt(r.measured)}{(' ' + r.unit) if r.unit else ''} | {r.goal or '-'} | {r.met} "
              f"| {r.note} |")
    sys.stdout.flush()


# ---------------------------------------------------------------- rv32: instructions on qemu_riscv32

RV32 = [  # (label, kind, mode, figure's key, goal)
    ("LSTM(64)+Dense(1) fused", "lstm64", "fused", "instr/MAC", "<= 4.0"),
    ("LSTM(64)+Dense(1) auto", "lstm64", "auto", "instr/MAC", "<= 4.0"),
    ("LSTM(64)+Dense(1) step", "lstm64", "step", "instr/MAC", "<= 4.0"),
    ("LSTM(16)+Dense(1) auto", "lstm16", "auto", "instr/MAC", "<= 8"),
    ("GRU(16, reset_after=False)+Dense(1)", "gru16", "auto", "instr/MAC", "<= 8"),
    ("CfC(AutoNCP(16,2))+Dense(1)", "cfc", "auto", "instr/MAC", "<= 8"),
    ("LTC(AutoNCP(16,2))+Dense(1)", "ltc", "auto", "instr/step", "<= 200,000"),
]


def rv32_section(builds: Builds, steps: int, models: set[str]) -> list[Figure]:
    from edgernn.validate.run import validate

    rows = []
    for label, kind, mode, key, goal in RV32:
        if kind not in models:
            continue
        log(f"rv32: {label}")
        out = builds.get(kind, mode)
        report = validate(out, steps=steps, seed=0, json_path=out / "bench_report.json")
        dev, ref = report["device"], report["reference"]
        mismatches = int(ref["mismatches"]) + int(ref.get("state_mismatches", 0))
        per_step = float(dev["cycles_per_step"])
        macs = int(dev["macs_per_step"])
        manifest = json.loads((out / "manifest.json").read_text())
        verdict = "PASS" if report["pass"] else "FAIL"
        note = (f"{per_step:,.0f} instr/step, {macs:,} MACs/step, path {manifest.get('mode')}; parity {verdict}, "
                f"{mismatches} mismatching bytes")
        measured = per_step if key == "instr/step" else per_step / macs
        if not report["pass"]:
            note += " (figure invalid)"
        rows.append(Figure("rv32", f"{label}: {key}", measured, goal, note=note,
                           extra={"instructions_per_step": per_step, "macs_per_step": macs, "path": manifest.get("mode"),
                                  "parity": verdict, "mismatching_bytes": mismatches, "steps": steps,
                                  "instructions_per_mac": per_step / macs}))
    return rows


# ---------------------------------------------------------------- x86: edgernn against TFLite Micro

def _host_copy(src: Path, dst: Path) -> Path:
    """The step model and manifest of a build, alone: the host firmware is generated beside them."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in ("step.tflite", "manifest.json"):
        shutil.copy(src / name, dst / name)
    return dst


def x86_section(builds: Builds, steps: int, work: Path) -> list[Figure]:
    from edgernn.testing import backend_harness as H
    from edgernn.testing.zoo import trajectories

    if shutil.which("valgrind") is None:
        return [Figure("x86", "edgernn / TFLM instructions", None, "<= 0.15", note="not measured: valgrind missing")]
    have_tflm = importlib.util.find_spec("tflite_micro") is not None
    rows = []
    for mode in ("step", "fused"):
        log(f"x86: LSTM(64) {mode}")
        folder = _host_copy(builds.get("lstm64", mode), work / f"x86_lstm64_{mode}")
        xq = H.quantize_x(folder, trajectories(1, 2 * steps, N_IN, seed=1)[0])
        ours = edgernn_instructions(folder, xq, steps)
        label = f"LSTM(64)+Dense(1) {mode} path: edgernn / TFLM instructions per step"
        if not have_tflm:
            rows.append(Figure("x86", label, None, "<= 0.15", note=f"edgernn {ours:,.0f} instr/step; {TFLM_HINT}",
                               extra={"edgernn_instructions_per_step": ours}))
            continue
        theirs, tflm_y = tflm_instructions(folder, xq, steps, folder)
        ref, _ = H.reference_bytes(folder, xq)
        y_bytes = tflm_y.view(np.uint8).reshape(tflm_y.shape[0], -1)
        tflm_mismatch = int((ref[:, :y_bytes.shape[1]] != y_bytes).sum())
        rows.append(Figure(
            "x86", label, ours / theirs, "<= 0.15",
            note=f"edgernn {ours:,.0f}, TFLM {theirs:,.0f} instr/step; TFLM y vs LiteRT: {tflm_mismatch} "
                 f"mismatching bytes of {y_bytes.size}",
            extra={"edgernn_instructions_per_step": ours, "tflm_instructions_per_invoke": theirs,
                   "tflm_y_mismatching_bytes": tflm_mismatch, "steps": steps}))
    return rows


# ---------------------------------------------------------------- gap8: MACs per cycle in GVSOC

GAP8 = [  # (model, label, cluster cores, FC clock (EDGERNN_CYCLES_FC=1: dispatch included), goal)
    ("lstm64", "LSTM(64)+Dense(1) step, 1 cluster core, SIMD", 1, False, ">= 1.2"),
    ("lstm64", "LSTM(64)+Dense(1) step, 8 cluster cores, SIMD", 8, False, ""),
    ("lstm64", "LSTM(64)+Dense(1) step, 8 cluster cores, SIMD, dispatch included", 8, True, ">= 6"),
    ("cfc", "CfC(AutoNCP(16,2))+Dense(1), 8 cluster cores, SIMD", 8, False, ""),
    ("ltc", "LTC(AutoNCP(16,2))+Dense(1), 8 cluster cores, SIMD", 8, False, ""),
    # issue 25, goal 4, in cycles per step (the figure is MAC/cycle: CfC 910 MACs, LTC 6,626)
    ("cfc", "CfC(AutoNCP(16,2))+Dense(1), 8 cluster cores, SIMD, dispatch included", 8, True, "<= 2,500 cycles"),
    ("ltc", "LTC(AutoNCP(16,2))+Dense(1), 8 cluster cores, SIMD, dispatch included", 8, True, "<= 40,000 cycles"),
]
DISPATCH_NOTE = "cluster master's cycles of the step's body (EDGERNN_CYCLES_FC=0), FC dispatch NOT included"
FC_CLOCK_NOTE = "FC timer from edgernn_step's start to its end (EDGERNN_CYCLES_FC=1), dispatch included, in cluster cycles"


def gap8_section(steps: int, work: Path, models: set[str]) -> list[Figure]:
    from edgernn.targets.gap8 import sdk as gap_sdk
    from edgernn.tflite.oracle import quantize

    try:
        gap_sdk.sdk_home()
        with contextlib.redirect_stdout(io.StringIO()):
            gap_sdk.build_gvsoc()
    except Exception as exc:  # noqa: BLE001 - any missing piece of the SDK: the section is not measured
        return [Figure("gap8", label, None, goal, note=f"not measured: {exc}") for _, label, _, _, goal in GAP8]
    rows, built, base = [], {}, {}
    # the 8-core build first: the other variants of a model are checked against its bytes
    for name, label, cores, fc_clock, goal in sorted(GAP8, key=lambda g: (-g[2], g[3])):
        if name not in models:
            continue
        log(f"gap8: {label}")
        if name not in built:
            with contextlib.redirect_stdout(io.StringIO()):
                built[name] = build_gap8(name, work)
        out = built[name]
        manifest = json.loads((out / "manifest.json").read_text())
        x_entry = manifest["inputs"][0]
        xs = quantize(np.random.default_rng(0).normal(0, 0.5, (steps, x_entry["shape"][-1])).astype(np.float32),
                      x_entry)
        result, info = run_variant(out, cores, 1, xs, work, fc_clock=fc_clock)
        base.setdefault(name, result)
        same = (np.array_equal(result.outputs, base[name].outputs)
                and np.array_equal(result.states, base[name].states))
        cycles = float(np.median(result.cycles[2:]))       # the first steps warm the caches
        macs = int(manifest["macs_per_step"])
        note = f"{cycles:,.0f} cycles/step, {macs:,} MACs/step, {info.workers} workers; "
        if fc_clock:
            note += FC_CLOCK_NOTE + "; " + ("same bytes" if same else "BYTES DIFFER (figure invalid)")
        elif cores == 8:
            note += DISPATCH_NOTE
        else:
            note += "same bytes as 8 cores" if same else "BYTES DIFFER from 8 cores (figure invalid)"
        rows.append(Figure("gap8", f"{label}: MAC/cycle", macs / cycles, goal, note=note,
                           extra={"cycles_per_step": cycles, "macs_per_step": macs, "cluster_cores": cores,
                                  "xpulp": 1, "same_bytes": bool(same), "dispatch_included": fc_clock,
                                  "steps": steps}))
    order = {label: i for i, (_, label, _, _, _) in enumerate(GAP8)}
    return sorted(rows, key=lambda r: order[r.figure.rsplit(":", 1)[0]])


# ---------------------------------------------------------------- size: -Os code on rv32imc

SIZE_CFLAGS = ["-march=rv32imc", "-mabi=ilp32", "-Os", "-std=c99", "-ffunction-sections", "-fdata-sections",
               "--specs=picolibc.specs"]
SIZE_LDFLAGS = ["-Wl,--gc-sections", "-Wl,--defsym=__flash=0x80000000", "-Wl,--defsym=__flash_size=0x04000000",
                "-Wl,--defsym=__ram=0x84000000", "-Wl,--defsym=__ram_size=0x04000000", "-lm"]
MAIN_STEP = """#include "model.h"
int main(void)
{
    static edgernn_in_t x[EDGERNN_INPUT_SIZE];
    static edgernn_out_t y[EDGERNN_OUTPUT_SIZE];
    if (edgernn_init() != EDGERNN_OK) {
        return 1;
    }
    return (int)edgernn_step(x, y);
}
"""
MAIN_EMPTY = "int main(void)\n{\n    return 0;\n}\n"
# an input section line of a GNU ld map: " .text.name  0xADDR  0xSIZE  path/obj.o" (name may wrap a line)
MAP_SECTION = re.compile(r"^ (\.[\w.$]+)\s*\n?\s+0x[0-9a-f]+\s+0x([0-9a-f]+)\s+(\S+\.o)\s*$", re.M)


def _link(sources: list[Path], main: str, firmware: Path, work: Path, name: str) -> tuple[Path, Path]:
    from edgernn.targets.board import load_board
    from edgernn.targets.compile import board_defines

    work.mkdir(parents=True, exist_ok=True)
    main_c = work / f"{name}_main.c"
    main_c.write_text(main)
    objects = []
    for src in [*sources, main_c]:
        obj = work / f"{name}_{src.stem}.o"
        subprocess.run(["riscv64-unknown-elf-gcc", *SIZE_CFLAGS, *board_defines(load_board("qemu_riscv32")),
                        f"-I{firmware}", "-c", str(src), "-o", str(obj)], check=True, capture_output=True)
        objects.append(obj)
    elf, map_file = work / f"{name}.elf", work / f"{name}.map"
    subprocess.run(["riscv64-unknown-elf-gcc", *SIZE_CFLAGS, *map(str, objects), "-o", str(elf),
                    f"-Wl,-Map={map_file}", *SIZE_LDFLAGS], check=True, capture_output=True)
    return elf, map_file


def _kept(map_file: Path, objects: set[str]) -> tuple[int, int]:
    """(text, read-only data) bytes of the input sections the link kept from the named objects."""
    text = map_file.read_text()
    start = text.find("Linker script and memory map")     # kept sections are listed after this line
    code = rodata = 0
    for section, size, obj in MAP_SECTION.findall(text[start:]):
        if Path(obj).name not in objects:
            continue
        if section.startswith(".text"):
            code += int(size, 16)
        elif section.startswith((".rodata", ".srodata")):
            rodata += int(size, 16)
    return code, rodata


def _text_bytes(elf: Path) -> int:
    out = subprocess.run(["riscv64-unknown-elf-size", str(elf)], capture_output=True, text=True, check=True).stdout
    return int(out.splitlines()[1].split()[0])


def size_section(builds: Builds, work: Path) -> list[Figure]:
    from edgernn.targets.board import load_board
    from edgernn.targets.compile import Part, select_sources

    if shutil.which("riscv64-unknown-elf-gcc") is None:
        return [Figure("size", "LSTM(64) code", None, "<= 8192", note="not measured: riscv64-unknown-elf-gcc missing")]
    rows = []
    board = load_board("qemu_riscv32")
    for mode in ("step", "fused"):
        log(f"size: LSTM(64) {mode}")
        firmware = builds.get("lstm64", mode) / "firmware"
        sources = [s for s in select_sources(firmware, board, Part.MODEL) if s.name != "weights.c"]
        sources_all = select_sources(firmware, board, Part.MODEL)
        folder = work / f"size_lstm64_{mode}"
        elf, map_file = _link(sources_all, MAIN_STEP, firmware, folder, "step")
        empty, _ = _link([], MAIN_EMPTY, firmware, folder, "empty")
        code, rodata = _kept(map_file, {f"step_{s.stem}.o" for s in sources})
        weights = sum(_kept(map_file, {"step_weights.o"}))
        main_bytes = sum(_kept(map_file, {"step_step_main.o"}))
        libc = _text_bytes(elf) - _text_bytes(empty) - code - rodata - weights - main_bytes
        rows.append(Figure(
            "size", f"LSTM(64)+Dense(1) {mode} path: kernels + model.c .text, -Os rv32imc", code, "<= 8192", "B",
            note=f"{code / 1024:.2f} KiB; + {rodata} B of their read-only data (tables, constants); weights "
                 f"{weights} B (weights.c: weights, LUTs, quantization constants) excluded; libc/libgcc pulled in beyond an empty main ≈ {libc} B",
            extra={"text_bytes": code, "rodata_bytes": rodata, "weights_c_bytes": weights, "libc_extra_bytes": libc,
                   "objects": sorted(s.name for s in sources)}))
    return rows


# ---------------------------------------------------------------- main

TITLES = {
    "rv32": "rv32imc (qemu_riscv32, minstret = retired instructions, exact)",
    "x86": "x86-64 gcc -O2, edgernn against TFLite Micro (valgrind --tool=callgrind)",
    "gap8": "GAP8 in GVSOC (gvsoc_gap8), MACs per cycle at the cluster clock",
    "size": "Code size, -Os rv32imc, functions reachable from edgernn_init/edgernn_step",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"comma list of {','.join(SECTIONS)}")
    ap.add_argument("--steps", type=int, default=40, help="steps per run (x86: N of the N/2N difference)")
    ap.add_argument("--json", help="write every figure to this JSON file")
    ap.add_argument("--keep", help="folder to keep the builds in")
    ap.add_argument("--models", default=",".join(MODELS),
                    help=f"comma list of {','.join(MODELS)} (rv32 and gap8; x86 and size measure lstm64)")
    args = ap.parse_args()
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(only) - set(SECTIONS))
    if unknown:
        sys.exit(f"bench_speed: unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    models = {m.strip() for m in args.models.split(",") if m.strip()}
    if models - set(MODELS):
        sys.exit(f"bench_speed: unknown model(s) {', '.join(sorted(models - set(MODELS)))}; "
                 f"choose from {', '.join(MODELS)}")
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="edgernn-speed-"))
    work.mkdir(parents=True, exist_ok=True)
    builds = Builds(work)
    runs: dict[str, Callable[[], list[Figure]]] = {
        "rv32": lambda: rv32_section(builds, args.steps, models),
        "x86": lambda: x86_section(builds, args.steps, work),
        "gap8": lambda: gap8_section(args.steps, work, models),
        "size": lambda: size_section(builds, work),
    }
    figures: list[Figure] = []
    started = time.time()
    try:
        for section in SECTIONS:
            if section in only:
                rows = runs[section]()
                print_table(TITLES[section], rows)
                figures += rows
    finally:
        if args.json:
            Path(args.json).write_text(json.dumps(
                {"steps": args.steps, "seconds": round(time.time() - started, 1),
                 "figures": [{**asdict(f), "met": f.met} for f in figures]}, indent=1) + "\n")
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\n{args.steps} steps per run; {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
