"""The fused LSTM (UNIDIRECTIONAL_SEQUENCE_LSTM) in generated C against the LiteRT interpreter.

The models are tf_keras LSTMs converted by TFLiteConverter.from_keras_model, the path on which TF emits
the fused op. The state lives in the op's two variable tensors: the interpreter keeps them between
invokes and the firmware keeps them in its state buffer; both are compared after every invoke, with y,
byte for byte (int8) or within 1e-5 relative (float32). Whole-sequence models (time > 1) run the
kernel's own time loop; time = 1 models are streamed one step per invoke.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess

import numpy as np
import pytest

import backend_harness as H
import zoo
from edgernn.errors import EdgeRNNError

pytestmark = [pytest.mark.slow, pytest.mark.toolchain]

FEATURES = 3


def lstm_model(time: int, units: int, sequences: bool, dense_before: bool, dense_after: bool,
               use_bias: bool = True, kernel_std: float | None = None, seed: int = 0):
    """Input "x" of batch 1, an LSTM, Dense layers around it; the last layer is named "y"."""
    from edgernn.tfenv import tf_keras

    K = tf_keras()
    K.utils.set_random_seed(seed)
    x = K.layers.Input(batch_shape=(1, time, FEATURES), name="x")
    h = K.layers.Dense(5, name="pre")(x) if dense_before else x
    init = K.initializers.RandomNormal(stddev=kernel_std) if kernel_std else "glorot_uniform"
    h = K.layers.LSTM(units, return_sequences=sequences, use_bias=use_bias, kernel_initializer=init,
                      name="lstm" if dense_after else "y")(h)
    if dense_after:
        h = K.layers.Dense(4, name="y")(h)
    return K.Model(x, h)


def write_fused(folder, model, quant: str, time: int, calib_offset: float = 0.0, seed: int = 0):
    """step.tflite + a manifest whose states are the LSTM's variable tensors, as the converter's
    fused mode writes them ("<layer>.h", "<layer>.c", variable, tensor index)."""
    from edgernn.backend.reader import read_tflite
    from edgernn.tfenv import native_stderr_captured, tensorflow

    tf = tensorflow()
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if quant == "int8":
        rng = np.random.default_rng(seed)
        # an offset of constant sign per sequence lets the cell integrate to larger values
        calib = [(rng.normal(0.0, 1.0, (1, time, FEATURES)) + rng.choice([-calib_offset, calib_offset], (1, 1, FEATURES)))
                 .astype(np.float32) for _ in range(32)]
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: ([c] for c in calib)
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
    with native_stderr_captured(), contextlib.redirect_stdout(io.StringIO()):
        blob = converter.convert()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "step.tflite").write_bytes(blob)
    states = []
    try:
        operators = read_tflite(blob).operators
    except EdgeRNNError:      # not a single-subgraph model: the backend's own refusal is under test
        operators = []
    graph = read_tflite(blob) if operators else None
    for op in operators:
        if op.op == "UNIDIRECTIONAL_SEQUENCE_LSTM":
            layer = "lstm"
            for suffix, index in (("h", op.inputs[18]), ("c", op.inputs[19])):
                t = graph.tensors[index]
                scale, zp = t.qparams()
                states.append({"name": f"{layer}.{suffix}", "layer": layer, "variable": True, "tensor": index,
                               "shape": list(t.shape), "dtype": t.dtype, "size": t.size,
                               "scale": scale, "zero_point": zp})
    (folder / "manifest.json").write_text(json.dumps({"quant": quant, "mode": "fused", "states": states,
                                                      "state_feedback": {}}))
    return folder


# name: (time, units, return_sequences, dense before, dense after), then lstm_model / write_fused options.
# Cell state scales the int8 conversions get (the integer tanh of c has 15 + log2(scale) integer bits):
# seq8_* and stream_u16 2^-15; stream_u64 2^-16, where TFLite skips tanh(c) (docs/ops.md);
# seq16_bigcell 2^-11.
MODELS = {
    "seq8_u16_all": ((8, 16, True, True, True), {}, {}),
    "seq8_u64_last": ((8, 64, False, False, True), {}, {}),
    "stream_u16": ((1, 16, True, True, True), {}, {}),
    "stream_u64": ((1, 64, True, False, False), {}, {}),
    "seq16_bigcell": ((16, 16, True, False, True), {"kernel_std": 2.0}, {"calib_offset": 2.0}),
}
CASES = [(name, quant) for name in MODELS for quant in ("int8", "float32") if (name, quant) != ("seq16_bigcell", "float32")]


@pytest.fixture(scope="module")
def fused(tmp_path_factory):
    cache = {}

    def get(name: str, quant: str):
        if (name, quant) not in cache:
            (time, units, seqs, before, after), model_opts, calib_opts = MODELS[name]
            folder = tmp_path_factory.mktemp(f"fused_{name}_{quant}") / "out"
            write_fused(folder, lstm_model(time, units, seqs, before, after, **model_opts), quant, time, **calib_opts)
            cache[(name, quant)] = H.build(folder)
        return cache[(name, quant)]

    return get


def _inputs(time: int, invokes: int, seed: int) -> dict[str, np.ndarray]:
    """A smooth trajectory, and wide noise that drives the gates and the cell into saturation."""
    steps = time * invokes
    trajectory = zoo.trajectories(1, steps, FEATURES, seed=seed)[0] * 2.0
    noise = np.random.default_rng(seed).normal(0.0, 2.5, (steps, FEATURES)).astype(np.float32)
    return {name: xs.reshape(invokes, time * FEATURES) for name, xs in
            (("trajectory", trajectory), ("noise", noise))}


def _tensor_sizes(folder, record_values: int) -> list[int]:
    states = [s["size"] for s in json.loads((folder / "manifest.json").read_text())["states"]]
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


@pytest.mark.parametrize("name,quant", CASES)
def test_fused_lstm_matches_interpreter(fused, name, quant, record_property):
    b = fused(name, quant)
    time = MODELS[name][0][0]
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in b.facts["ops"]
    for label, xs in _inputs(time, 160 // time, seed=7).items():
        xq = H.quantize_x(b.folder, xs)
        ref, _ = H.reference_bytes(b.folder, xq)
        got, _ = H.run_driver(b.exe, xq, ref.shape[1], b.folder)
        if quant == "float32":
            stats = compare_float_per_tensor(got, ref, _tensor_sizes(b.folder, ref.shape[1] // 4))
            record_property(f"{label}", stats)
            assert stats["not_close"] == 0, f"{name} {label}: {stats}"
        else:
            stats = H.compare(got, ref, quant)
            record_property(f"{label}", stats)
            assert stats["mismatches"] == 0, f"{name} {label}: {stats}"
        # the state carries over between invokes and really moves
        assert len({bytes(r) for r in ref}) > xs.shape[0] // 2


def test_int8_cases_cover_three_cell_scales(fused):
    """The exactness cases above reach tanh(c) with 0 and 4 integer bits, and the cell scale
    (2^-16) where TFLite's ApplyTanh writes nothing and h becomes o * i."""
    from edgernn.backend.reader import read_tflite

    found = {}
    for name in ("stream_u16", "stream_u64", "seq16_bigcell"):
        graph = read_tflite(fused(name, "int8").folder / "step.tflite")
        lstm = next(op for op in graph.operators if op.op == "UNIDIRECTIONAL_SEQUENCE_LSTM")
        found[name] = int(np.log2(graph.tensors[lstm.inputs[19]].scale[0]))
    assert found == {"stream_u16": -15, "stream_u64": -16, "seq16_bigcell": -11}


def test_state_is_the_variable_tensors_in_manifest_order(fused):
    b = fused("stream_u16", "int8")
    header = (b.folder / "firmware" / "model.h").read_text()
    assert '#define EDGERNN_STATE0_NAME "lstm.h"' in header and '#define EDGERNN_STATE1_NAME "lstm.c"' in header
    # int8 h (16 bytes) then int16 c (32 bytes)
    assert "#define EDGERNN_STATE0_BYTES 16" in header and "#define EDGERNN_STATE1_BYTES 32" in header
    assert "#define EDGERNN_STATE_BYTES 48 " in header


def test_reset_and_set_state_of_a_streamed_lstm(fused):
    """edgernn_reset() restarts like reset_all_variables(); a run resumed from a saved state
    continues exactly like the unbroken run."""
    b = fused("stream_u16", "int8")
    xq = H.quantize_x(b.folder, _inputs(1, 60, seed=3)["trajectory"])
    ref, _ = H.reference_bytes(b.folder, xq)

    from edgernn.interpreter import load_interpreter

    interp = load_interpreter(b.folder / "step.tflite")
    runner = interp.get_signature_runner("serving_default")
    for t in range(10):
        runner(x=xq[t].reshape(1, 1, FEATURES))
    interp.reset_all_variables()
    again = runner(x=xq[0].reshape(1, 1, FEATURES))["y"].reshape(-1).view(np.uint8)
    assert np.array_equal(again, ref[0, : again.size])

    first, _ = H.run_driver(b.exe, xq[:1], ref.shape[1], b.folder)
    assert np.array_equal(first[0], ref[0])
    k = 23
    y_bytes = ref.shape[1] - 48
    saved = ref[k - 1, y_bytes:]
    inp, out = b.folder / "resume.in.bin", b.folder / "resume.out.bin"
    tail = xq[k:]
    inp.write_bytes(np.int32(len(tail)).tobytes() + tail.tobytes() + saved.tobytes())
    subprocess.run([str(b.exe), str(inp), str(out)], check=True, capture_output=True)
    got = np.frombuffer(out.read_bytes(), np.uint8).reshape(len(tail), -1)
    assert np.array_equal(got, ref[k:])


def test_sanitizers_report_nothing_on_the_fused_lstm(fused, tmp_path):
    folder = fused("seq8_u16_all", "int8").folder
    b = H.build(folder, cflags=["-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                                "-fno-omit-frame-pointer"], name="driver_asan")
    xq = H.quantize_x(folder, _inputs(8, 12, seed=5)["noise"])
    ref, _ = H.reference_bytes(folder, xq)
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0", UBSAN_OPTIONS="print_stacktrace=1")
    got, stderr = H.run_driver(b.exe, xq, ref.shape[1], tmp_path, env=env)
    assert "runtime error" not in stderr and "AddressSanitizer" not in stderr, stderr
    assert H.compare(got, ref, "int8")["mismatches"] == 0


def test_a_state_missing_from_the_manifest_is_refused(fused, tmp_path):
    from edgernn.backend import generate_firmware
    from edgernn.boards import load_board

    src = fused("stream_u16", "float32").folder
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "step.tflite").write_bytes((src / "step.tflite").read_bytes())
    manifest = json.loads((src / "manifest.json").read_text())
    manifest["states"] = manifest["states"][:1]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(EdgeRNNError, match=r"variable tensor \d+ .*does not list it among the states"):
        generate_firmware(folder, load_board("host"))
    assert not (folder / "firmware" / "model.c").exists()


def test_lstm_without_bias_is_not_fused_by_tf(tmp_path):
    """use_bias=False: TF's converter emits a WHILE loop in float (and crashes in int8), so the
    backend gets no fused op and says why in one line."""
    from edgernn.backend import generate_firmware
    from edgernn.boards import load_board

    folder = write_fused(tmp_path / "out", lstm_model(4, 8, True, False, True, use_bias=False), "float32", 4)
    with pytest.raises(EdgeRNNError, match="subgraphs"):
        generate_firmware(folder, load_board("host"))
