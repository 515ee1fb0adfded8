"""Drive generated firmware over whole sequences and hold it against the LiteRT interpreter.

The driver (tests/c/step_driver.c) reads a binary file of quantized inputs and writes, for every
step, the output bytes followed by all state bytes; the interpreter runs the same step.tflite with its
output states fed back as its next input states. The comparison covers every byte.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edgernn.backend import FirmwareFacts, generate_firmware
from edgernn.outdir import read_manifest
from edgernn.targets.board import load_board
from edgernn.targets.compile import Part, compile_firmware
from edgernn.testing import TESTS
from edgernn.tflite.interpreter import load_interpreter
from edgernn.tflite.oracle import Stepper, quantize

DRIVER = TESTS / "c" / "step_driver.c"

# GAP8's SIMD dot product, written with the GCC vector subscripts of the GAP SDK's own emulation
# (gap_sdk tools/autotiler_v3/Emulation/GapBuiltins.h): it stands in for the real builtin so the
# device-side types and loads of the GAP8 set's Xpulp path (templates/targets/gap8/kernels/edgernn_arch.h) compile and run on
# the host too.
VECTOR_SDOTSP4 = ("-D__builtin_pulp_sdotsp4(a,b,c)="
                  "((c)+(a)[0]*(b)[0]+(a)[1]*(b)[1]+(a)[2]*(b)[2]+(a)[3]*(b)[3])")


def state_keys(folder: Path) -> list[str]:
    return [s["name"] for s in read_manifest(folder).states]


def quantize_x(folder: Path, xs: np.ndarray) -> np.ndarray:
    """xs in the step model's input quantization, as the interpreter's input details give it."""
    runner = load_interpreter(folder / "step.tflite").get_signature_runner("serving_default")
    d = runner.get_input_details()["x"]
    q = d["quantization_parameters"]
    entry = {"dtype": np.dtype(d["dtype"]).name}
    if entry["dtype"] != "float32":
        entry.update(scale=q["scales"][0], zero_point=q["zero_points"][0])
    return quantize(xs, entry)


def reference_bytes(folder: Path, xq: np.ndarray) -> tuple[np.ndarray, np.dtype]:
    """(steps, bytes) records of y then every state, from the interpreter (edgernn's oracle), and y's dtype."""
    return Stepper(folder / "step.tflite", read_manifest(folder).states).records(xq)


@dataclass
class Build:
    folder: Path
    facts: FirmwareFacts
    exe: Path
    code_bytes: int
    commands: list[str]
    objects: list[Path] = field(default_factory=list)

    def object_of(self, source: str) -> Path:
        """The object this build compiled from firmware/<source>."""
        return next(o for o in self.objects if o.name == Path(source).with_suffix(".o").name)


def kernel_set_of(flags) -> str | None:
    """The kernel set a build's flags are for: the GAP8 set's own switches (-DEDGERNN_XPULP...) build the GAP8
    set (None: the board's)."""
    return "gap8" if any(f.startswith("-DEDGERNN_XPULP") for f in flags) else None


def with_kernel_set(board, kernels: str):
    """The board with another kernel set (toolchain.kernels): the host's build of the GAP8 set's C, on the C
    emulation of its instructions (-DEDGERNN_XPULP_EMULATE) or on GCC vectors (VECTOR_SDOTSP4)."""
    from edgernn.targets.board import board_from_data

    data = {**board.data, "toolchain": {**board.data.get("toolchain", {}), "kernels": kernels}}
    return board_from_data(board.path, data)


def build(folder: Path, board: str = "host", cflags=None, compilers=("gcc",), name: str = "driver",
          kernels: str | None = None) -> Build:
    """folder's firmware generated for ``board`` (with kernel set ``kernels``, else the board's) and compiled
    with the test driver."""
    b = load_board(board)
    if kernels is not None:
        b = with_kernel_set(b, kernels)
    facts = generate_firmware(folder, b)
    res = compile_firmware(folder / "firmware", b, part=Part.MODEL, extra_sources=[DRIVER],
                           build_dir=folder / "build" / name, output_name=name, cflags=cflags or (),
                           compilers=list(compilers))
    return Build(folder, facts, res.elf, res.model_code_bytes, res.command_lines, res.objects)


def run_driver(exe: Path, xq: np.ndarray, record_bytes: int, workdir: Path, env=None,
               args: tuple[str, ...] = ()) -> tuple[np.ndarray, str]:
    """The driver over ``xq`` (its rows: each step's input; with ``args`` ("--state-every-step",), each step's
    input and state bytes): its records, (steps, record_bytes), and what it wrote to stderr."""
    inp = workdir / f"{exe.name}.in.bin"
    out = workdir / f"{exe.name}.out.bin"
    inp.write_bytes(np.int32(xq.shape[0]).tobytes() + np.ascontiguousarray(xq).tobytes())
    proc = subprocess.run([str(exe), str(inp), str(out), *args], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, f"driver failed ({proc.returncode}): {proc.stderr}"
    assert "~~~EDGERNN STEPS DONE~~~" in proc.stdout
    raw = np.frombuffer(out.read_bytes(), dtype=np.uint8)
    assert raw.size == xq.shape[0] * record_bytes, "driver wrote a record of the wrong size"
    return raw.reshape(xq.shape[0], record_bytes), proc.stderr


def compare(got: np.ndarray, ref: np.ndarray, quant: str) -> dict:
    """Mismatch statistics of two record arrays; float32 records compare as float32 values."""
    if quant == "float32":
        a = got.copy().view(np.float32)
        b = ref.copy().view(np.float32)
        rel = np.abs(a - b) / np.maximum(np.abs(b), 1e-30)
        close = np.abs(a - b) <= 1e-5 * np.maximum(np.abs(b), 1e-3)
        return {"values": int(a.size), "not_close": int((~close).sum()), "max_rel": float(rel.max(initial=0.0))}
    dt = np.int8 if quant == "int8" else np.int16
    a = got.copy().view(dt).astype(np.int64)
    b = ref.copy().view(dt).astype(np.int64)
    diff = np.abs(a - b)
    return {"values": int(a.size), "mismatches": int((diff != 0).sum()), "max_lsb": int(diff.max(initial=0))}


def tensor_sizes(folder: Path, record_values: int) -> list[int]:
    """The values of a record per tensor: y, then each state of the manifest."""
    states = [s["size"] for s in read_manifest(folder).states]
    return [record_values - sum(states)] + states


def compare_float_per_tensor(got: np.ndarray, ref: np.ndarray, sizes: list[int]) -> dict:
    """Float records, y then each state: every element within 1e-5 of the larger of its own
    magnitude and its tensor's largest magnitude at that step.

    TFLite's float LSTM takes tanh and the logistic from Eigen's approximations and its matrix
    products from Eigen's blocked GEMV; the C kernel uses tanhf/expf and plain dot products. The two
    differ by a few float32 ulps of the state (about 1e-7 of its magnitude), which an element close
    to zero cannot absorb relative to itself (docs/ops.md).
    """
    a = got.copy().view(np.float32)
    b = ref.copy().view(np.float32)
    not_close, worst, start = 0, 0.0, 0
    for n in sizes:
        ta, tb = a[:, start : start + n], b[:, start : start + n]
        scale = np.maximum(np.abs(tb), np.abs(tb).max(axis=1, keepdims=True))
        rel = np.abs(ta - tb) / np.maximum(scale, 1e-30)
        not_close += int((rel > 1e-5).sum())
        worst = max(worst, float(rel.max(initial=0.0)))
        start += n
    return {"values": int(a.size), "not_close": not_close, "max_rel": worst}


def compare_tensors(got: np.ndarray, ref: np.ndarray, folder: Path) -> dict:
    """Mismatches of two integer record arrays whose tensors (y, then each state of the manifest) may
    each have their own dtype, as a mixed int8/int16 model's do: {tensor: (mismatching values, max LSB)}."""
    manifest = read_manifest(folder)
    entries = [("y", manifest.outputs[0])] + [(s["name"], s) for s in manifest.states]
    stats, start = {}, 0
    for name, e in entries:
        dt = np.dtype(e["dtype"])
        n = int(np.prod(e["shape"])) * dt.itemsize
        a = got[:, start:start + n].copy().view(dt).astype(np.int64)
        b = ref[:, start:start + n].copy().view(dt).astype(np.int64)
        diff = np.abs(a - b)
        stats[name] = (int((diff != 0).sum()), int(diff.max(initial=0)))
        start += n
    assert start == ref.shape[1], "the manifest's tensors do not cover the record"
    return stats
