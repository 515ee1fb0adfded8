"""edgernn against TFLite Micro with CMSIS-NN, on the same step.tflite, in the same QEMU (qemu_stm32f405: the
STM32F405 of the Crazyflie on qemu-system-arm's netduinoplus2), counted by the same counter.

For each case the model is built with `edgernn build --board qemu_stm32f405` and validated over USART1 (its
instructions a step, its mismatching bytes against LiteRT). Then the same OUT/step.tflite runs through TFLite
Micro's MicroInterpreter, linked with its CMSIS-NN kernels (libtensorflow-microlite.a for cortex-m4+fp, built
once into edgernn's cache from ../shared/tflite-micro as its PROVENANCE.md says), in bench/tflm/runner.cc
on the same start-up, HAL and instruction counter (TIM2 under -icount shift=0: "instructions (QEMU)", not
cycles). TFLM's outputs (and step-mode states) are held against LiteRT's byte for byte over the same inputs.

Printed per case: instructions a step for both and their ratio (edgernn / TFLM), mismatching bytes for both,
code (the ELF's text less the model's constants: edgernn's weights, TFLM's flatbuffer) and RAM (edgernn: arena
+ state; TFLM: the arena it used) with each ELF's data+bss.

    PYTHONPATH=$PWD python bench/bench_tflm.py [--case lstm64_step ...] [--steps 100] [--tflm ../shared/tflite-micro]

TFLM's library is built with its own flags (its Makefile's for cortex_m_generic: -O2, KERNELS_OPTIMIZED_FOR_SPEED;
`make -n` prints them); edgernn's firmware with the board's (-O2). Building the library the first time takes about
40 minutes on 2 cores. The fused LSTM's cases link TFLM's cmsis_nn/fully_connected.cc compiled again with one
DCHECK corrected (FC_DCHECK below says why TFLM halts without it). Asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from edgernn.resources import cache_root

ROOT = Path(__file__).resolve().parent.parent
BOARD = "qemu_stm32f405"
LIB_DIR = "gen/cortex_m_generic_cortex-m4+fp_default_cmsis_nn_gcc/lib"
ABI = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]


def _lstm(units: int):
    def make(seed: int = 0):
        from edgernn.testing import zoo

        keras = zoo._keras(seed)
        return keras.Sequential([keras.Input((None, 2)), keras.layers.LSTM(units, return_sequences=True),
                                 keras.layers.Dense(1)], name=f"lstm{units}")
    return make


def _gru(units: int):
    def make(seed: int = 0):
        from edgernn.testing import zoo

        keras = zoo._keras(seed)
        return keras.Sequential([keras.Input((None, 2)), keras.layers.GRU(units, return_sequences=True),
                                 keras.layers.Dense(1)], name=f"gru{units}")
    return make


def _cfc_autoncp(seed: int = 0):
    from edgernn.testing import zoo

    keras = zoo._keras(seed)
    import ncps.keras
    from ncps.wirings import AutoNCP

    return keras.Sequential([keras.Input((None, 2)), ncps.keras.CfC(AutoNCP(16, 2, seed=seed), return_sequences=True)],
                            name="cfc_autoncp")


def _ltc(seed: int = 0):
    from edgernn.testing import zoo

    return zoo.ltc_dense(seed)


def _frame_cfc(seed: int = 0):
    """frames_zoo.frame_cfc: a per-frame CNN (Conv2D, DepthwiseConv2D, BatchNormalization, ReLU6, MaxPooling2D,
    Flatten, Dense) before a CfC(AutoNCP(12, 2)), on 12x12x1 frames: the zoo's "frame CNN + CfC"."""
    from edgernn.testing import frames_zoo

    return frames_zoo.frame_cfc(seed=seed)


def trajectories(model, n_seq: int, steps: int, seed: int):
    from edgernn.testing import zoo

    return zoo.trajectories(n_seq, steps, zoo.features_of(model), seed)


def frames(model, n_seq: int, steps: int, seed: int):
    from edgernn.testing import frames_zoo

    h, w, c = (int(d) for d in model.inputs[0].shape[2:])
    return frames_zoo.moving_blobs(n_seq, steps, h, w, c, seed)


@dataclass(frozen=True)
class Case:
    make: object                 # the Keras model's maker
    quant: str
    mode: str
    data: object = trajectories  # (model, sequences, steps, seed) -> the float inputs
    # TFLM's cmsis_nn/fully_connected.cc recompiled with its one wrong DCHECK corrected (fixed_fully_connected)
    fixed_fc: bool = False


CASES = {
    "lstm64_step": Case(_lstm(64), "int8", "step"),
    "lstm64_fused": Case(_lstm(64), "int8", "fused", fixed_fc=True),
    "gru64": Case(_gru(64), "int8", "step"),
    "cfc_autoncp": Case(_cfc_autoncp, "int8", "step"),
    "ltc": Case(_ltc, "int8", "step"),
    "frame_cfc": Case(_frame_cfc, "int8", "step", frames),
    "lstm64_step_int16": Case(_lstm(64), "int16", "step"),
    "gru64_int16": Case(_gru(64), "int16", "step"),
    "cfc_autoncp_int16": Case(_cfc_autoncp, "int16", "step"),
}

# TFLM's library flags for its kernels (make -n of its Makefile for TARGET=cortex_m_generic
# TARGET_ARCH=cortex-m4+fp OPTIMIZED_KERNEL_DIR=cmsis_nn: -O2, KERNELS_OPTIMIZED_FOR_SPEED), for the one kernel
# the bench compiles again (fixed_fully_connected)
TFLM_KERNEL_FLAGS = ["-fno-rtti", "-fno-exceptions", "-fno-threadsafe-statics", "-fno-unwind-tables",
                     "-fno-asynchronous-unwind-tables", "-ffunction-sections", "-fdata-sections",
                     "-DTF_LITE_STATIC_MEMORY", "-DTF_LITE_DISABLE_X86_NEON", "-DCMSIS_NN",
                     "-DKERNELS_OPTIMIZED_FOR_SPEED", "-std=c++17", "-mcpu=cortex-m4", "-mfpu=auto",
                     "-DTF_LITE_MCU_DEBUG_LOG", "-mthumb", "-mfloat-abi=hard", "-mlittle-endian",
                     "-fomit-frame-pointer", "-DCPU_M4=1", "-funsigned-char",
                     '-DCMSIS_DEVICE_ARM_CORTEX_M_XX_HEADER_FILE="ARMCM4.h"', "-DARMCM4", "-DARM_NN_ENABLE_F16=0",
                     "-DARM_NN_ENABLE_F32=0", "-O2"]
TFLM_KERNEL_INCLUDES = [".", "tensorflow/lite/micro/tools/make/downloads",
                        "tensorflow/lite/micro/tools/make/downloads/gemmlowp",
                        "tensorflow/lite/micro/tools/make/downloads/flatbuffers/include",
                        "tensorflow/lite/micro/tools/make/downloads/kissfft",
                        "tensorflow/lite/micro/tools/make/downloads/ruy",
                        "tensorflow/lite/micro/tools/make/downloads/cmsis/Cortex_DFP/Device/ARMCM4/Include",
                        "tensorflow/lite/micro/tools/make/downloads/cmsis/CMSIS/Core/Include",
                        "tensorflow/lite/micro/tools/make/downloads/cmsis",
                        "tensorflow/lite/micro/tools/make/downloads/cmsis_nn",
                        "tensorflow/lite/micro/tools/make/downloads/cmsis_nn/Include"]
FC_SOURCE = "tensorflow/lite/micro/kernels/cmsis_nn/fully_connected.cc"
# Why TFLM halts on the fused LSTM(64)'s Dense head: its output is [1, 1, 1] (batch, time, features), so CMSIS-NN's
# FULLY_CONNECTED takes the 1x1-convolution path (more than 2 output dimensions, a depth of 64, a multiple of 4),
# and for per-tensor weights Prepare asks the arena for a scratch buffer that fakes per-channel multipliers
# (RequestScratchBufferInArena gives the graph's next scratch index, counted from 0); Eval then checks that index
# with TFLITE_DCHECK_GE(data.buffer_conv_1x1_idx, 4), not 0: an index of 0 to 3, a valid buffer, fails it, and
# the DCHECK (on in this build: no NDEBUG) aborts ("HALTED"). The head's buffer is this graph's first scratch
# request below 4, so the check fails. Corrected to >= 0, the same code runs, with the buffer Prepare asked for.
FC_DCHECK = "TFLITE_DCHECK_GE(data.buffer_conv_1x1_idx, 4);"
FC_DCHECK_FIXED = "TFLITE_DCHECK_GE(data.buffer_conv_1x1_idx, 0);"




def tflm_library(source: Path) -> Path:
    """TFLM's source tree in edgernn's cache (a copy: its make writes gen/ into the tree) with
    libtensorflow-microlite.a built for cortex-m4+fp with CMSIS-NN, as PROVENANCE.md's command builds it."""
    from edgernn import procs

    tree = cache_root() / "tflm" / "src"
    lib = tree / LIB_DIR / "libtensorflow-microlite.a"
    if lib.is_file():
        return tree
    if not (source / "PROVENANCE.md").is_file():
        raise SystemExit(f"no TFLite Micro snapshot at {source} (pass --tflm)")
    if tree.exists():
        shutil.rmtree(tree)
    shutil.copytree(source, tree, symlinks=True)
    print(f"building TFLite Micro with CMSIS-NN in {tree} (about 40 minutes on 2 cores)")
    done = procs.run(["make", "-f", "tensorflow/lite/micro/tools/make/Makefile", "TARGET=cortex_m_generic",
                      "TARGET_ARCH=cortex-m4+fp", "OPTIMIZED_KERNEL_DIR=cmsis_nn", "TARGET_TOOLCHAIN_ROOT=/usr/bin/",
                      f"-j{min(os.cpu_count() or 1, 2)}", "microlite"], cwd=tree)
    if done.returncode != 0 or not lib.is_file():
        raise SystemExit(f"TFLite Micro does not build: {(done.stderr or done.stdout).strip()[-500:]}")
    return tree


def fixed_fully_connected(tree: Path, work: Path) -> Path:
    """TFLM's cmsis_nn/fully_connected.cc with FC_DCHECK corrected (the comment above FC_DCHECK says why),
    compiled with the library's own flags; linked before the library, it stands in for the library's copy."""
    from edgernn import procs

    source = (tree / FC_SOURCE).read_text()
    if source.count(FC_DCHECK) != 1:
        raise SystemExit(f"{FC_SOURCE} in {tree} does not hold {FC_DCHECK!r} once: another TFLM than the bench knows")
    work.mkdir(parents=True, exist_ok=True)
    fixed = work / "fully_connected_fixed.cc"
    fixed.write_text(source.replace(FC_DCHECK, FC_DCHECK_FIXED))
    obj = work / "fully_connected_fixed.o"
    command = ["arm-none-eabi-g++", *TFLM_KERNEL_FLAGS, *(f"-I{tree / d}" for d in TFLM_KERNEL_INCLUDES), "-c",
               str(fixed), "-o", str(obj)]
    done = procs.run(command)
    if done.returncode != 0:
        raise SystemExit(f"TFLM's fully_connected.cc does not compile again: {done.stderr.strip()[-500:]}")
    return obj


@dataclass
class Run:
    steps: list[int]
    records: list[bytes]
    arena_used: int
    elf: Path


def tensor_positions(step_tflite: Path, manifest) -> dict:
    """Where x, y and the states sit in the subgraph's input and output lists (MicroInterpreter's input(i),
    output(i)), from the signature's names."""
    from edgernn.tflite.interpreter import load_interpreter

    interp = load_interpreter(step_tflite)
    signature = interp.get_signature_runner("serving_default")
    ins = [d["index"] for d in interp.get_input_details()]
    outs = [d["index"] for d in interp.get_output_details()]
    sig_in, sig_out = signature.get_input_details(), signature.get_output_details()
    states = []
    for state in manifest.states:
        if state.get("variable"):
            continue
        width = {"int8": 1, "int16": 2, "float32": 4}[state["dtype"]]
        states.append({"input": ins.index(sig_in[state["name"]]["index"]),
                       "output": outs.index(sig_out[manifest.state_feedback.get(state["name"], state["name"])]["index"]),
                       "width": width, "zero_point": int(state.get("zero_point", 0))})
    return {"x_input": ins.index(sig_in["x"]["index"]), "y_output": outs.index(sig_out["y"]["index"]),
            "states": states}


# MicroMutableOpResolver's Add<Method> of a TFLite builtin operator, where the name's words do not say it
RESOLVER_NAMES = {"UNIDIRECTIONAL_SEQUENCE_LSTM": "UnidirectionalSequenceLSTM", "CONV_2D": "Conv2D",
                  "DEPTHWISE_CONV_2D": "DepthwiseConv2D", "MAX_POOL_2D": "MaxPool2D",
                  "AVERAGE_POOL_2D": "AveragePool2D"}


def resolver_method(op: str) -> str:
    return RESOLVER_NAMES.get(op) or "".join(word.capitalize() for word in op.split("_"))


def run_tflm(tree: Path, out: Path, xq, work: Path, name: str, timeout_s: float = 120.0,
             fixed_fc: bool = False) -> Run:
    import jinja2

    from edgernn import procs
    from edgernn.outdir import read_manifest
    from edgernn.targets.board import load_board

    manifest = read_manifest(out)
    model = (out / "step.tflite").read_bytes()
    positions = tensor_positions(out / "step.tflite", manifest)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROOT / "bench" / "tflm")), trim_blocks=True,
                             lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    work.mkdir(parents=True, exist_ok=True)
    xs = bytes(xq.tobytes())
    (work / "tflm_case.h").write_text(env.get_template("tflm_case.h.j2").render(
        name=name, sha256=hashlib.sha256(model).hexdigest(), arena_bytes=96 * 1024, steps=xq.shape[0],
        x_bytes=len(xs) // xq.shape[0], model=list(model), xs=list(xs),
        resolver_methods=sorted({resolver_method(op) for op in manifest.ops}), **positions))
    firmware = out / "firmware"
    includes = [f"-I{tree}", f"-I{tree}/tensorflow/lite/micro/tools/make/downloads/flatbuffers/include",
                f"-I{tree}/tensorflow/lite/micro/tools/make/downloads/gemmlowp",
                f"-I{tree}/tensorflow/lite/micro/tools/make/downloads/ruy", f"-I{work}", f"-I{firmware}"]
    objects = []
    for source, cc, flags in [(ROOT / "bench" / "tflm" / "runner.cc", "arm-none-eabi-g++",
                               ["-Os", "-std=c++17", "-fno-rtti", "-fno-exceptions", "-DTF_LITE_STATIC_MEMORY",
                                "-DCMSIS_NN", "-DARMCM4", "--specs=nano.specs"]),
                              (firmware / "startup.c", "arm-none-eabi-gcc", ["-O2", "--specs=nano.specs"]),
                              (firmware / "hal.c", "arm-none-eabi-gcc", ["-O2", "--specs=nano.specs"])]:
        obj = work / (source.stem + ".o")
        command = [cc, *ABI, *flags, "-ffunction-sections", "-fdata-sections", *includes, "-c", str(source),
                   "-o", str(obj)]
        done = procs.run(command)
        if done.returncode != 0:
            raise SystemExit(f"{source.name} does not compile: {done.stderr.strip()[-800:]}")
        objects.append(obj)
    if fixed_fc:
        objects.append(fixed_fully_connected(tree, work))
    elf = work / "tflm.elf"
    link = ["arm-none-eabi-g++", *ABI, "-nostartfiles", "--specs=nano.specs", "--specs=nosys.specs",
            f"-T{firmware / 'stm32f405.ld'}", "-Wl,--gc-sections", *map(str, objects),
            str(tree / LIB_DIR / "libtensorflow-microlite.a"), "-lm", "-o", str(elf)]
    done = procs.run(link)
    if done.returncode != 0:
        raise SystemExit(f"the TFLM runner does not link: {done.stderr.strip()[-800:]}")
    serial = work / "serial.txt"
    board = load_board(BOARD)
    command = [a.format(elf=elf) for a in board.emulator.command] + ["-serial", f"file:{serial}"]
    try:
        done = procs.run(command, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        # TFLM's TFLITE_ABORT prints "HALTED" and loops forever (cortex_m_generic's AbortImpl)
        said = re.findall(r"TFLM: ([^\n]*?)(?=TFLM: |\n|$)", serial.read_text() if serial.is_file() else "")
        done_steps = sum(line.startswith("S ") for line in serial.read_text().splitlines()) if serial.is_file() else 0
        raise RuntimeError(f"TFLM stopped in step {done_steps} ({' '.join(w for w in said if w) or 'no message'}; "
                           f"no step ended in {timeout_s:.0f} s)") from None
    text = serial.read_text() if serial.is_file() else ""
    if "~~~TFLM DONE~~~" not in text:
        raise RuntimeError(f"TFLM did not finish ({done.returncode}): {text[-300:] or done.stderr[-300:]}")
    steps, records = [], []
    for line in text.splitlines():
        if line.startswith("S "):
            words = line.split()
            steps.append(int(words[1]))
            records.append(bytes.fromhex("".join(words[2:])))
    arena = int(re.search(r"arena_used (\d+)", text).group(1))
    return Run(steps, records, arena, elf)


def sizes(elf: Path) -> tuple[int, int]:
    """(text, data + bss) of an ELF."""
    row = subprocess.run(["arm-none-eabi-size", str(elf)], capture_output=True, text=True, check=True).stdout
    text, data, bss = (int(v) for v in row.splitlines()[1].split()[:3])
    return text, data + bss


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", nargs="+", choices=sorted(CASES), default=list(CASES))
    parser.add_argument("--steps", type=int, default=100, help="steps of the test sequence (default 100)")
    parser.add_argument("--tflm", type=Path, default=ROOT.parent / "shared" / "tflite-micro",
                        help="the TFLite Micro snapshot (default ../shared/tflite-micro)")
    parser.add_argument("--keep", type=Path, help="keep the build folders here")
    args = parser.parse_args()

    import numpy as np

    from edgernn.outdir import read_manifest
    from edgernn.pipeline.build import build_model
    from edgernn.testing import backend_harness as H
    from edgernn.testing import zoo
    from edgernn.validate.run import validate

    tree = tflm_library(args.tflm)
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench_tflm."))
    rows = []
    for name in args.case:
        case = CASES[name]
        make, quant, mode = case.make, case.quant, case.mode
        folder = root / name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        model = make()
        path = folder / f"{model.name}.keras"
        model.save(path)
        data = case.data(model, 1, args.steps, 5)
        out = folder / "out"
        with contextlib.redirect_stdout(io.StringIO()):
            build_model(str(path), out, board=BOARD, quant=quant, mode=mode, calib=case.data(model, 8, 80, 1))
            report = validate(out, data=data)
        manifest = read_manifest(out)
        xq = H.quantize_x(out, data[0])
        reference, y_dtype = H.reference_bytes(out, xq)
        y_bytes = int(np.prod(manifest.outputs[0]["shape"])) * np.dtype(y_dtype).itemsize
        try:
            tflm = run_tflm(tree, out, xq, folder / "tflm", name, fixed_fc=case.fixed_fc)
            got = np.frombuffer(b"".join(tflm.records), dtype=np.uint8).reshape(len(tflm.records), -1)
            width = min(got.shape[1], reference.shape[1])
            # fused: the LSTM's states are TFLM's variable tensors, so only y is written; step mode: y, states
            tflm_mismatch = int((got[:, :width] != reference[:len(got), :width]).sum())
            tflm_y = got[:, :y_bytes].copy().view(y_dtype).astype(np.int64)
            ref_y = reference[:len(got), :y_bytes].copy().view(y_dtype).astype(np.int64)
            tflm_lsb = int(np.abs(tflm_y - ref_y).max(initial=0))
            tflm_steps = float(np.mean(tflm.steps))
            tflm_text, tflm_ram = sizes(tflm.elf)
            tflm_code = tflm_text - len((out / "step.tflite").read_bytes())
            tflm_note = f"{tflm_mismatch} ({tflm_lsb} LSB)" + (", its FC's DCHECK corrected" if case.fixed_fc else "")
        except (RuntimeError, SystemExit) as failed:
            tflm_steps, tflm_code, tflm_ram, tflm_note, tflm = None, None, None, str(failed)[:160], None
        elf = next((out / "firmware" / "build").glob(f"{BOARD}/firmware.elf"))
        e_text, e_ram = sizes(elf)
        e_code = e_text - manifest.weight_bytes
        e_steps = report["device"]["cycles_per_step"]
        rows.append((name, quant, mode, e_steps, tflm_steps, report["reference"]["mismatches"], tflm_note,
                     e_code, tflm_code, manifest.arena_bytes + manifest.build.state_bytes, e_ram,
                     tflm.arena_used if tflm else None, tflm_ram))
        print(f"{name}: edgernn {e_steps:.0f}, TFLM {tflm_steps if tflm_steps is None else round(tflm_steps)} "
              "instructions (QEMU) a step", flush=True)

    print()
    print("| case | quant | mode | edgernn instructions (QEMU) a step | TFLM+CMSIS-NN instructions (QEMU) a step | "
          "ratio | edgernn mismatches | TFLM mismatches (max LSB) | code edgernn / TFLM (B) | "
          "RAM edgernn arena+state / TFLM arena (B) | ELF data+bss edgernn / TFLM (B) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (name, quant, mode, e, t, em, tm, ec, tc, er, eram, ta, tram) in rows:
        ratio = f"{e / t:.2f}" if t else "-"
        t_text = f"{t:.0f}" if t else "-"
        print(f"| {name} | {quant} | {mode} | {e:.0f} | {t_text} | {ratio} | {em} | {tm} | {ec} / {tc} | {er} / {ta} "
              f"| {eram} / {tram} |")
    print(f"\nbuild folders: {root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
