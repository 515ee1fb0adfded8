"""Mixed int8/int16 models through the C backend, byte for byte against the LiteRT interpreter.

A mixed model (issue 28) is a valid TFLite model whose ops are int8 or 16x8, with QUANTIZE ops
int8 -> int16 and int16 -> int8 where the types meet. The models here are spliced with the flatbuffer
object API (edgernn/testing/mixed_models.py), so the backend is held to LiteRT without the converter's
mixed precision:

- the QUANTIZE seams alone, over every int8 value and every int16 value, at scales up and down, zero
  points at both ends and both saturations (``SEAMS``);
- int8 step models with their states in int16, an int16 TANH in the cell, FULLY_CONNECTEDs in 16x8, an
  int16 input and output around int8 states, and the lot together (``MIXED``).
"""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

from edgernn.outdir import Manifest, read_manifest
from edgernn.testing import backend_harness as H
from edgernn.testing import mixed_models as MM
from edgernn.testing import zoo
from edgernn.tflite.oracle import Stepper

# (name, hops): x's (dtype, scale, zero point), then each QUANTIZE's output. Every int8 input value
# is fed once; every int16 input value once (256 steps of 256).
SEAMS = [
    ("up_256_pow2", [("int8", 0.05, 3), ("int16", 0.05 / 256, 0)]),
    ("up_odd", [("int8", 0.0123, -128), ("int16", 0.0123 / 300.7, 0)]),
    ("up_saturates_both_ways", [("int8", 0.1, 0), ("int16", 0.1 / 400, 0)]),
    ("up_ratio_below_one", [("int8", 0.02, 127), ("int16", 0.5, 0)]),
    ("up_halves", [("int8", 1.0, 0), ("int16", 2.0, 0)]),          # (x - zp) / 2: ties round away from 0
    ("up_int16_zero_point", [("int8", 0.05, 5), ("int16", 0.05 / 100, 1000)]),
    ("down_256_pow2", [("int16", 1 / 32768, 0), ("int8", 1 / 128, 0)]),
    ("down_zero_point_low", [("int16", 1 / 32768, 0), ("int8", 1 / 256, -128)]),
    ("down_odd_saturates", [("int16", 0.001, 0), ("int8", 0.0077, 17)]),
    ("down_ratio_above_one", [("int16", 1e-4, 0), ("int8", 0.9e-4, 0)]),
    ("down_same_scale", [("int16", 0.003, 0), ("int8", 0.003, -3)]),
    ("down_halves", [("int16", 0.5, 0), ("int8", 1.0, 0)]),
    ("down_int16_zero_point", [("int16", 0.002, -700), ("int8", 0.1, 0)]),
    # scales so far up that the kernels' one-multiply path cannot hold every input: edgernn_mbqm's path
    ("wide_up_mbqm_path", [("int8", 1.0, 0), ("int16", 1.0 / 3000000, 0)]),
    ("wide_down_mbqm_path", [("int16", 1.0, 0), ("int8", 1.0 / 12288, 0)]),
    ("round_trip", [("int8", 0.031, -7), ("int16", 0.031 / 211, 0), ("int8", 0.029, 4)]),
    ("down_and_up", [("int16", 3e-4, 0), ("int8", 0.04, 0), ("int16", 1e-3, 0)]),
]


def _all_values(dtype: str) -> np.ndarray:
    if dtype == "int8":
        return np.arange(-128, 128, dtype=np.int8).reshape(1, 256)
    return np.arange(-32768, 32768, dtype=np.int32).astype(np.int16).reshape(256, 256)


@pytest.mark.toolchain
@pytest.mark.parametrize("name,hops", SEAMS, ids=[s[0] for s in SEAMS])
def test_quantize_seams_match_interpreter(tmp_path, name, hops):
    folder = MM.write_folder(tmp_path / name, MM.requantize_chain(hops, size=256))
    b = H.build(folder)
    model_c = (folder / "firmware" / "model.c").read_text()
    if len(hops) == 2:      # one seam: its kernel (edgernn_ or edgernn_team_)
        assert f"requantize_s{hops[0][0][3:]}_s{hops[1][0][3:]}(" in model_c
    else:                   # a chain of seams: one fused loop, an element function a seam
        assert "_fused" in model_c and model_c.count("= edgernn_requantize_") == len(hops) - 1
    xq = _all_values(hops[0][0])
    ref, _ = Stepper(folder / "step.tflite", []).records(xq)
    got, _ = H.run_driver(b.exe, xq, ref.shape[1], tmp_path)
    assert np.array_equal(got, ref), f"{name}: {int((got != ref).sum())} bytes differ"
    # the case reaches what it is named for: both ends of the output type when it saturates
    y = ref.copy().view(np.dtype(hops[-1][0])).reshape(-1)
    info = np.iinfo(y.dtype)
    if "saturates" in name:
        assert y.min() == info.min and y.max() == info.max
    assert len(np.unique(y)) > (2 if name.startswith("wide") else 8)


@pytest.mark.toolchain
def test_int16_sum_saturates_as_the_interpreter_does(tmp_path):
    """SUM at 16 bits, its input's quantization kept (an LTC's synapse sums under --quant auto): LiteRT
    sums the raw values and saturates the total. Every int16 value once, runs of +-32767 that saturate
    both ways, and sums that cross int16 only part way along the run."""
    folder = MM.write_folder(tmp_path / "sum16", MM.sum16(16, 16, 2.9e-5))
    b = H.build(folder)
    assert "sum_s16(" in (folder / "firmware" / "model.c").read_text()
    every = np.arange(-32768, 32768, dtype=np.int32).astype(np.int16).reshape(256, 256)
    rng = np.random.default_rng(1)
    runs = np.stack([np.full(256, 32767, np.int16), np.full(256, -32768, np.int16),
                     np.tile(np.array([32767, 32767, -32768, -32768], np.int16), 64),
                     rng.integers(-4000, 4000, 256).astype(np.int16)])
    xq = np.concatenate([every, runs])
    ref, _ = Stepper(folder / "step.tflite", []).records(xq)
    got, _ = H.run_driver(b.exe, xq, ref.shape[1], tmp_path)
    assert np.array_equal(got, ref), f"{int((got != ref).sum())} bytes differ"
    y = ref.copy().view(np.int16).reshape(-1)
    assert y.min() == -32768 and y.max() == 32767      # the case saturates both ways


@pytest.mark.toolchain
@pytest.mark.parametrize("s_in, s_out, distinct", [(4e-4, 3.0 / 32767, 200), (3e-3, 0.5 / 32767, 200),
                                                   (1e-5, 1.0 / 32767, 1)],
                         ids=["wide", "large_inputs", "saturating"])
def test_int16_rsqrt_matches_the_interpreter(tmp_path, s_in, s_out, distinct):
    """RSQRT at 16 bits (a division's denominator d as rsqrt(d)^2, the route to an LTC all in 16x8): LiteRT's
    interpolating table of 1 / sqrt(x). Every int16 input value from 0 up once (LiteRT refuses a negative one)."""
    from edgernn.tflite import model as M

    folder = MM.write_folder(tmp_path / "rsqrt16", MM.unary16(M.schema.BuiltinOperator.RSQRT, 256, s_in, s_out, 3))
    b = H.build(folder)
    assert "lut_s16(" in (folder / "firmware" / "model.c").read_text()
    xq = np.arange(0, 32768, dtype=np.int16).reshape(128, 256)
    ref, _ = Stepper(folder / "step.tflite", []).records(xq)
    got, _ = H.run_driver(b.exe, xq, ref.shape[1], tmp_path)
    assert np.array_equal(got, ref), f"{int((got != ref).sum())} bytes differ"
    y = ref.copy().view(np.int16).reshape(-1)
    assert len(np.unique(y)) >= distinct and y.max() == 32767      # the saturating case: every output at the top


@pytest.mark.toolchain
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "kernels"])
def test_quantize_seams_split_across_the_team(tmp_path, monkeypatch, fused):
    """1 and 8 workers give the interpreter's bytes for both seams: the two in one fused loop the team splits
    by element range, and as the two team kernels."""
    from edgernn.backend import fusion

    monkeypatch.setattr(fusion, "ENABLED", fused)
    hops = [("int16", 1e-3, 0), ("int8", 0.011, 3), ("int16", 2e-4, 0)]
    folder = MM.write_folder(tmp_path / "team", MM.requantize_chain(hops, size=4096))
    xq = np.random.default_rng(7).integers(-32768, 32768, (4, 4096)).astype(np.int16)
    ref, _ = Stepper(folder / "step.tflite", []).records(xq)
    for n in (1, 8):
        b = H.build(folder, cflags=["-O2", f"-DEDGERNN_THREADS={n}", "-pthread"], name=f"driver_t{n}")
        model_c = (folder / "firmware" / "model.c").read_text()
        if fused:
            assert "edgernn_team_split(edgernn_step_fused" in model_c
        else:
            assert "edgernn_team_requantize_s16_s8(" in model_c and "edgernn_team_requantize_s8_s16(" in model_c
        got, _ = H.run_driver(b.exe, xq, ref.shape[1], tmp_path)
        assert np.array_equal(got, ref), f"{n} workers: {int((got != ref).sum())} bytes differ"


def simplernn_tanh(seed: int = 0):
    keras = zoo._keras(seed)
    return keras.Sequential([keras.Input((None, 3)), keras.layers.SimpleRNN(9, return_sequences=True)],
                            name="mixed_simplernn")


BASES = {"simplernn": simplernn_tanh, "lstm": zoo.functional_lstm}


@pytest.fixture(scope="module")
def int8_base(tmp_path_factory):
    from edgernn.pipeline.convert import convert

    cache = {}

    def get(name: str):
        if name not in cache:
            out = tmp_path_factory.mktemp(f"mixed_{name}") / "out"
            with contextlib.redirect_stdout(io.StringIO()):
                convert(BASES[name](), out, quant="int8", mode="step")
            cache[name] = ((out / "step.tflite").read_bytes(), read_manifest(out))
        return cache[name]

    return get


def _states16(step: bytes, manifest: Manifest, divisor: float) -> bytes:
    """Every state in int16, at its int8 scale over ``divisor``."""
    for s in manifest.states:
        step = MM.state16(step, s["name"], s["scale"] / divisor)
    return step


# (name, base, splice): splice(step bytes, int8 manifest) -> the mixed step model
MIXED = [
    ("states16_pow2", "simplernn", lambda m, man: _states16(m, man, 256.0)),
    ("states16_odd", "lstm", lambda m, man: _states16(m, man, 97.3)),
    ("tanh16", "simplernn", lambda m, man: MM.tanh16(m)),
    ("tanh16_lstm", "lstm", lambda m, man: MM.tanh16(m)),
    ("fc16", "simplernn", lambda m, man: MM.fc16(m, count=2)),     # both gate FULLY_CONNECTEDs in 16x8
    ("fc16_lstm", "lstm", lambda m, man: MM.fc16(m, count=3)),      # the Dense's and the LSTM's first two
    ("io16", "lstm", lambda m, man: MM.io16(m, man.inputs[0]["scale"] / 200, man.outputs[0]["scale"] / 150)),
    ("all", "lstm", lambda m, man: MM.io16(MM.fc16(MM.tanh16(_states16(m, man, 130.0)), count=2),
                                            man.inputs[0]["scale"] / 64, man.outputs[0]["scale"] / 64)),
]


@pytest.mark.toolchain
@pytest.mark.parametrize("name,base,splice", MIXED, ids=[c[0] for c in MIXED])
def test_mixed_step_models_match_interpreter(int8_base, tmp_path, name, base, splice):
    step, manifest = int8_base(base)
    folder = MM.write_folder(tmp_path / name, splice(step, manifest), manifest)
    mixed = json.loads((folder / "manifest.json").read_text())
    assert {"int8", "int16"} <= _activation_types(folder), "the model is not mixed"
    b = H.build(folder)
    model_h = (folder / "firmware" / "model.h").read_text()
    model_c = (folder / "firmware" / "model.c").read_text()
    # the int16 ops the splice made are generated as int16 kernels (the TANH, between its seams, in one fused
    # loop: its element function), beside the int8 ones
    # (16x8 FULLY_CONNECTEDs of one input may be one grouped call)
    for part, kernels in (("fc16", ("fully_connected_s16(", "fully_connected_group_s16(")),
                          ("tanh16", ("tanh_s16_elem(",)),
                          ("all", ("fully_connected_s16(", "fully_connected_group_s16(")), ("all", ("tanh_s16_elem(",))):
        if part in name:
            assert any(k in model_c for k in kernels), f"{name}: none of {kernels}"
    assert "fully_connected_s8(" in model_c or "fully_connected_group_s8(" in model_c or name.startswith("fc16")
    # each state keeps its own dtype in the packed state: the sum of its own bytes
    packed = sum(int(np.prod(s["shape"])) * np.dtype(s["dtype"]).itemsize for s in mixed["states"])
    assert b.facts.state_bytes == packed
    assert f"#define EDGERNN_STATE_BYTES {packed}" in model_h
    n = int(mixed["inputs"][0]["shape"][-1])
    sequences = {"trajectory": zoo.trajectories(1, 100, n, seed=11)[0],
                 "random": np.random.default_rng(3).normal(0.0, 1.5, size=(60, n)).astype(np.float32)}
    for label, xs in sequences.items():
        xq = H.quantize_x(folder, xs)
        ref, _ = H.reference_bytes(folder, xq)
        got, _ = H.run_driver(b.exe, xq, ref.shape[1], tmp_path)
        stats = H.compare_tensors(got, ref, folder)
        assert all(v[0] == 0 for v in stats.values()), f"{name} {label}: {stats}"
        assert len({bytes(r) for r in ref}) > xs.shape[0] // 4


def _activation_types(folder) -> set[str]:
    """The dtypes of the step model's runtime tensors (not its constants)."""
    from edgernn.backend.reader import read_tflite

    return {t.dtype for t in read_tflite(folder / "step.tflite").tensors if t.data is None}


def test_step_cost_counts_the_seams_and_each_states_width(int8_base, tmp_path):
    """estimate_step_cost: the bytes generate_firmware reports, the int16 state at 2 bytes an element, the
    seams in the cycles, and with a board the very calls its team shares."""
    from edgernn.backend import generate_firmware
    from edgernn.backend.cost import CALL, estimate_step_cost
    from edgernn.targets.board import load_board

    step, manifest = int8_base("simplernn")
    plain = MM.write_folder(tmp_path / "int8", step, manifest)
    mixed = MM.write_folder(tmp_path / "mixed", _states16(step, manifest, 256.0), manifest)
    gap8 = load_board("gvsoc_gap8")
    costs = {}
    for label, folder in (("int8", plain), ("mixed", mixed)):
        states = read_manifest(folder).states
        cost = estimate_step_cost(folder / "step.tflite", states)
        facts = generate_firmware(folder, None)
        assert (cost.weight_bytes, cost.arena_bytes, cost.state_bytes) == \
            (facts.weight_bytes, facts.arena_bytes, facts.state_bytes)
        assert cost.cycles_per_step == sum(cost.by_kernel.values()) > cost.calls * CALL
        on_board = estimate_step_cost(folder / "step.tflite", states, board=gap8)
        assert on_board.shared == len(generate_firmware(folder, gap8).team_ops)
        costs[label] = cost
    size = sum(int(np.prod(s["shape"])) for s in manifest.states)
    assert costs["mixed"].state_bytes == 2 * costs["int8"].state_bytes == 2 * size
    # the seams: the state's QUANTIZE into int8 before its FULLY_CONNECTED is a call of its own; the one
    # back to int16 after the cell's TANH joins the TANH's loop
    assert costs["mixed"].by_kernel.get("edgernn_requantize_s16_s8", 0) > 0
    assert costs["mixed"].cycles_per_step > costs["int8"].cycles_per_step


@pytest.mark.toolchain
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "kernels"])
def test_sanitizers_report_nothing_on_the_seams(tmp_path, monkeypatch, fused):
    """ASan and UBSan over both seams on both paths (the one-multiply one and edgernn_mbqm's), every int16
    input value, in one fused loop and as the kernels: no shift or overflow out of range, and still the
    interpreter's bytes."""
    from edgernn.backend import fusion

    monkeypatch.setattr(fusion, "ENABLED", fused)
    hops = [("int16", 0.002, -700), ("int8", 0.1, 0), ("int16", 0.1 / 3000000, 0), ("int8", 0.02, 9),
            ("int16", 1.0, 0), ("int8", 1.0 / 12288, 0)]
    folder = MM.write_folder(tmp_path / "asan", MM.requantize_chain(hops, size=256))
    b = H.build(folder, cflags=["-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"],
                name="driver_asan")
    model_c = (folder / "firmware" / "model.c").read_text()
    if fused:       # both paths in the one loop
        assert "edgernn_requantize_narrow_elem(" in model_c and "edgernn_requantize_elem(" in model_c
    else:
        assert "_fused" not in model_c
    xq = _all_values("int16")
    ref, _ = Stepper(folder / "step.tflite", []).records(xq)
    got, stderr = H.run_driver(b.exe, xq, ref.shape[1], tmp_path)
    assert "runtime error" not in stderr and "AddressSanitizer" not in stderr, stderr
    assert np.array_equal(got, ref)


_QUANTIZE_EVEN_DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include "edgernn_kernels.h"
int main(int argc, char **argv)
{
    int n = atoi(argv[1]);
    float inverse_scale = strtof(argv[2], NULL), scale = strtof(argv[3], NULL);
    float *in = malloc(sizeof(float) * (size_t)n);
    int16_t *out = malloc(sizeof(int16_t) * (size_t)n);
    if (fread(in, sizeof(float), (size_t)n, stdin) != (size_t)n) return 2;
    edgernn_quantize_f32_s16_even(inverse_scale, scale, 0, in, n, out);
    fwrite(out, sizeof(int16_t), (size_t)n, stdout);
    return 0;
}
"""


@pytest.mark.toolchain
@pytest.mark.parametrize("n", [7, 13, 14, 16, 33])
def test_builtin_float_to_int16_quantize_rounds_as_litert_in_blocks_and_tail(tmp_path, n):
    """LiteRT's builtin QUANTIZE float32 -> int16 (an LTC's DIV in float under --quant auto, in a graph on the
    builtin kernels) rounds its blocks of 8 and its n % 8 tail differently: x times the float32 inverse, halves to
    even, then x / (double)scale, halves away. edgernn_quantize_f32_s16_even against it, on inputs whose float32
    product lands on a half (where the two differ: an LTC with 14 neurons missed 3 state bytes in 200 steps)."""
    import subprocess

    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    from edgernn.backend import kernel_sources

    scale = np.float32(3.6854286e-05)
    data = MM.requantize_chain([("float32", None, None), ("int16", float(scale), 0)], size=n)
    interp = Interpreter(model_content=data,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    interp.allocate_tensors()
    run = interp.get_signature_runner()
    folder = MM.write_folder(tmp_path / "chain", MM.requantize_chain([("int8", 0.05, 0), ("int16", 0.05 / 256, 0)]))
    H.build(folder)
    firmware = folder / "firmware"
    (tmp_path / "driver.c").write_text(_QUANTIZE_EVEN_DRIVER)
    exe = tmp_path / "driver"
    sources = [str(firmware / name) for name in ("edgernn_elementwise.c", "edgernn_tables.c", "edgernn_libm.c")
               if (firmware / name).exists()]
    subprocess.run(["gcc", "-O2", "-I", str(firmware), str(tmp_path / "driver.c"), *sources, "-lm", "-o", str(exe)],
                   check=True)
    inverse = np.float32(1) / scale
    rng = np.random.default_rng(n)
    halves = 0
    for _ in range(50):
        x = np.float32((rng.integers(-30000, 30000, n) + 0.5) * np.float64(scale))
        halves += int(np.sum(np.float32(x * inverse) % 1 == 0.5))
        want = np.asarray(run(x=x.reshape(1, n))["y"]).reshape(-1)
        got = np.frombuffer(subprocess.run([str(exe), str(n), repr(float(inverse)), repr(float(scale))],
                                           input=x.tobytes(), capture_output=True, check=True).stdout, np.int16)
        assert np.array_equal(got, want), np.argwhere(got != want).reshape(-1)
    assert halves > 0
