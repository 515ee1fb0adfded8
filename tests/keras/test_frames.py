"""Per-frame front ends: (batch, time, H, W, C) inputs whose frame layers run once per step inside the step model."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from edgernn.cli.main import cli
from edgernn.errors import EdgeRNNError
from edgernn.tflite.oracle import Stepper

pytestmark = pytest.mark.slow

FRAME = (8, 8, 2)
STEPS = 6
FLOAT_REL = 1e-5
# int8 and int16 against the float step model on the calibration sequences (l2r = |err| / |ref|): loose, the
# point is that the frame layers quantize, not how well random weights do.
L2R_BOUND = {"int8": 0.15, "int16": 0.05}


def frames(n_seq: int, steps: int, frame=FRAME, seed: int = 0) -> np.ndarray:
    """Smooth moving patterns with a little noise: neighbouring pixels and steps are related, as in video."""
    rng = np.random.default_rng(seed)
    h, w, c = frame
    t = np.arange(steps)[None, :, None, None, None]
    y = np.arange(h)[None, None, :, None, None]
    x = np.arange(w)[None, None, None, :, None]
    k = rng.uniform(0.2, 0.9, (n_seq, 1, 1, 1, c))
    phase = rng.uniform(0, 2 * np.pi, (n_seq, 1, 1, 1, c))
    wave = np.sin(k * (x + 0.7 * y) + 0.3 * t + phase)
    return (wave + 0.05 * rng.standard_normal((n_seq, steps, h, w, c))).astype(np.float32)


def _keras3():
    import keras

    keras.utils.set_random_seed(0)
    return keras


def _tf_keras():
    from edgernn import tfenv

    tk = tfenv.tf_keras()
    if tk is None:
        from conftest import tool_unavailable

        tool_unavailable("needs the Python package tf_keras (pip install -e '.[dev]')")
    tk.utils.set_random_seed(0)
    return tk


def _rnn(keras, kind: str):
    if kind == "CfC":
        import ncps.keras

        return ncps.keras.CfC(6, return_sequences=True)
    return getattr(keras.layers, kind)(6, return_sequences=kind != "GRU")


def _batchnorm(keras):
    """A batch norm with trained-looking statistics (the defaults make it nearly the identity)."""
    init = keras.initializers
    return keras.layers.BatchNormalization(beta_initializer=init.RandomNormal(0.0, 0.3),
                                gamma_initializer=init.RandomUniform(0.5, 1.5),
                                moving_mean_initializer=init.RandomNormal(0.0, 0.3),
                                moving_variance_initializer=init.RandomUniform(0.5, 2.0))


# (id, layer factory on a Keras module, the flavours whose plain layer accepts (batch, time, H, W, C), the recurrent
#  layer after it)
LAYERS = [
    ("conv2d_same", lambda k: k.layers.Conv2D(3, 3, padding="same"), ("tf_keras",), "LSTM"),
    ("conv2d_valid_stride2", lambda k: k.layers.Conv2D(3, 3, strides=2, padding="valid"), ("tf_keras",), "GRU"),
    ("conv2d_dilated", lambda k: k.layers.Conv2D(3, 3, dilation_rate=2, padding="same"), ("tf_keras",), "LSTM"),
    ("depthwise_stride2", lambda k: k.layers.DepthwiseConv2D(3, strides=2, depth_multiplier=2, padding="same"), (),
     "LSTM"),
    ("depthwise_dilated", lambda k: k.layers.DepthwiseConv2D(3, dilation_rate=2, padding="valid"), (), "GRU"),
    ("separable", lambda k: k.layers.SeparableConv2D(4, 3, strides=2, padding="same"), (), "LSTM"),
    ("separable_dilated", lambda k: k.layers.SeparableConv2D(4, 3, dilation_rate=2, padding="valid"), (), "CfC"),
    ("maxpool", lambda k: k.layers.MaxPooling2D(2), (), "LSTM"),
    ("maxpool_same", lambda k: k.layers.MaxPooling2D(3, strides=2, padding="same"), (), "GRU"),
    ("avgpool", lambda k: k.layers.AveragePooling2D(2), (), "LSTM"),
    ("avgpool_same", lambda k: k.layers.AveragePooling2D(3, strides=2, padding="same"), (), "CfC"),
    ("global_avg", lambda k: k.layers.GlobalAveragePooling2D(), (), "LSTM"),
    ("global_max", lambda k: k.layers.GlobalMaxPooling2D(), (), "GRU"),
    ("batchnorm", _batchnorm, ("keras", "tf_keras"), "LSTM"),
    ("relu", lambda k: k.layers.ReLU(), ("keras",), "GRU"),
    ("relu6", lambda k: k.layers.ReLU(max_value=6.0), ("keras",), "LSTM"),
    ("leaky_relu", lambda k: k.layers.LeakyReLU(0.2), ("keras",), "CfC"),
    ("dense", lambda k: k.layers.Dense(3), ("keras",), "LSTM"),
    ("dropout", lambda k: k.layers.Dropout(0.3), ("keras",), "GRU"),
]
CASES = [pytest.param(factory, "keras", False, rnn, id=f"{name}-td") for name, factory, _, rnn in LAYERS] + [
    pytest.param(factory, flavour, True, rnn, id=f"{name}-plain-{flavour}") for name, factory, plain, rnn in LAYERS
    for flavour in plain
] + [pytest.param(LAYERS[0][1], "tf_keras", False, "GRU", id="conv2d_same-td-tf_keras")]


def frame_model(factory, flavour: str, plain: bool, rnn: str):
    """Input((T, H, W, C)) -> the layer (plain or in TimeDistributed) -> Flatten per frame -> RNN -> Dense."""
    keras = _tf_keras() if flavour == "tf_keras" else _keras3()
    L = keras.layers
    layer = factory(keras)
    return keras.Sequential([
        keras.Input((None, *FRAME)),
        layer if plain else L.TimeDistributed(layer),
        L.TimeDistributed(L.Flatten()),
        _rnn(keras, rnn),
        L.Dense(2),
    ])


def convert(model, tmp_path, quant: str, calib: np.ndarray | None = None) -> tuple[str, dict]:
    from edgernn.pipeline.convert import convert as convert_folder

    out = tmp_path / f"out_{quant}"
    calib = frames(4, 12, seed=1) if calib is None else calib
    return str(out), convert_folder(model, out, quant=quant, calib=calib, mode="step")


def step_model_output(out: str, sequences: np.ndarray) -> np.ndarray:
    runner = Stepper.of_folder(out)
    return runner.model_output(runner.run(sequences, quantize_input=True))


@pytest.mark.parametrize("factory, flavour, plain, rnn", CASES)
def test_float32_frame_layer_matches_keras(tmp_path, factory, flavour, plain, rnn):
    model = frame_model(factory, flavour, plain, rnn)
    out, manifest = convert(model, tmp_path, "float32")
    assert manifest.inputs[0]["shape"] == [1, *FRAME]
    sequences = frames(3, 15, seed=7)
    want = np.asarray(model(sequences, training=False), np.float32)
    got = step_model_output(out, sequences).reshape(want.shape)
    rel = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    assert rel <= FLOAT_REL, f"float32 step model differs from Keras by {rel:.2e} relative"


def front_end(keras, rnn: str = "LSTM"):
    """A small camera front end: conv, folded batch norm, ReLU6, depthwise-separable, pooling, flatten."""
    L = keras.layers
    return keras.Sequential([
        keras.Input((None, *FRAME)),
        L.TimeDistributed(L.Conv2D(4, 3, strides=2, padding="same")),
        _batchnorm(keras),
        L.ReLU(max_value=6.0),
        L.TimeDistributed(L.SeparableConv2D(6, 3, padding="same")),
        L.TimeDistributed(L.AveragePooling2D(2)),
        L.TimeDistributed(L.Flatten()),
        L.Dense(8, activation="relu"),
        _rnn(keras, rnn),
        L.Dense(2),
    ])


@pytest.mark.parametrize("depthwise", [False, True], ids=["conv", "depthwise"])
def test_the_manifest_counts_each_convolution_output_times_its_window(tmp_path, depthwise):
    keras = _keras3()
    L = keras.layers
    conv = L.DepthwiseConv2D(3, strides=2, padding="same", depth_multiplier=2) if depthwise else \
        L.Conv2D(4, 3, strides=2, padding="same")
    model = keras.Sequential([keras.Input((None, *FRAME)), L.TimeDistributed(conv), L.TimeDistributed(L.Flatten()),
                              L.Dense(3), L.SimpleRNN(2, return_sequences=True)])
    _, manifest = convert(model, tmp_path, "float32")
    window = 3 * 3 * (1 if depthwise else FRAME[2])       # 4x4x4 outputs either way (8x8 at stride 2)
    assert manifest.macs_per_step == 4 * 4 * 4 * window + 64 * 3 + 3 * 2 + 2 * 2


@pytest.mark.parametrize("quant", ["int8", "int16"])
@pytest.mark.parametrize("rnn", ["LSTM", "GRU"])
def test_quantized_frame_model_is_near_the_float_one(tmp_path, quant, rnn):
    model = front_end(_keras3(), rnn)
    calib = frames(8, 16, seed=1)
    out, manifest = convert(model, tmp_path, quant, calib)
    assert manifest.inputs[0]["dtype"] == quant and manifest.inputs[0]["shape"] == [1, *FRAME]
    assert {"CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D"} <= set(manifest.ops)
    assert manifest.quantization_error["l2r"] < L2R_BOUND[quant], manifest.quantization_error
    sequences = frames(2, 20, seed=5)
    want = np.asarray(model(sequences, training=False), np.float32)
    got = step_model_output(out, sequences).reshape(want.shape)
    l2r = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    assert l2r < L2R_BOUND[quant], f"{quant} frame model is {l2r:.3f} (l2r) from Keras"


@pytest.mark.parametrize("flavour", ["keras", "tf_keras"])
@pytest.mark.parametrize("plain", [True, False], ids=["plain", "td"])
def test_batch_norm_after_a_convolution_is_folded_into_it(tmp_path, flavour, plain):
    keras = _tf_keras() if flavour == "tf_keras" else _keras3()
    L = keras.layers
    norm = _batchnorm(keras)
    model = keras.Sequential([keras.Input((None, *FRAME)), L.TimeDistributed(L.Conv2D(4, 3)),
                              norm if plain else L.TimeDistributed(norm), L.TimeDistributed(L.Flatten()),
                              L.SimpleRNN(4)])
    out, manifest = convert(model, tmp_path, "int8")
    assert "MUL" not in manifest.ops, manifest.ops  # the only ADD left is the RNN's own
    assert manifest.float_self_check_rel <= FLOAT_REL


def test_synthetic_calibration_takes_the_frame_shape(tmp_path):
    from edgernn.pipeline.convert import convert as convert_folder

    model = front_end(_keras3())
    manifest = convert_folder(model, tmp_path / "o", quant="int8", mode="step")
    assert manifest.calibration["source"] == "synthetic"
    assert manifest.inputs[0]["shape"] == [1, *FRAME]


# ---------------------------------------------------------------- refusals: one line naming the layer


def run(*args):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.output


def _conv3d(keras):
    L = keras.layers
    return keras.Sequential([keras.Input((None, *FRAME)), L.Conv3D(2, 3, padding="same", name="c3"),
                             L.TimeDistributed(L.Flatten()), L.LSTM(4)])


def _convlstm(keras):
    L = keras.layers
    return keras.Sequential([keras.Input((None, *FRAME)), L.ConvLSTM2D(2, 3, name="cl"), L.Flatten(), L.Dense(2)])


def _flatten_time(keras):
    L = keras.layers
    return keras.Sequential([keras.Input((STEPS, *FRAME)), L.Flatten(name="flat"), L.Dense(4), L.Reshape((1, 4)),
                             L.LSTM(4)])


def _grouped(keras):
    L = keras.layers
    return keras.Sequential([keras.Input((None, *FRAME)), L.TimeDistributed(L.Conv2D(4, 3, groups=2), name="grp"),
                             L.TimeDistributed(L.Flatten()), L.GRU(4)])


def _regroup_time(keras):
    L = keras.layers
    return keras.Sequential([keras.Input((STEPS, *FRAME)), L.Reshape((STEPS // 2, 2 * 128), name="pairs"),
                             L.LSTM(4)])


def _conv_after_rnn(keras):
    L = keras.layers
    return keras.Sequential([keras.Input((None, *FRAME)), L.TimeDistributed(L.Flatten()), L.LSTM(16),
                             L.Reshape((4, 4, 1), name="to_frame"), L.Conv2D(2, 3, name="late_conv")])


def _pool_after_rnn(keras):
    L = keras.layers
    return keras.Sequential([keras.Input((None, *FRAME)), L.TimeDistributed(L.GlobalAveragePooling2D()),
                             L.LSTM(4, return_sequences=True), L.GlobalAveragePooling1D(name="gap1")])


# (id, builder, every needle the single line holds)
REFUSALS = [
    ("conv3d mixes frames", _conv3d, ("'c3'", "Conv3D", "along time")),
    ("convlstm2d", _convlstm, ("'cl'", "ConvLSTM2D", "state")),
    ("flatten merges time", _flatten_time, ("'flat'", "Flatten", "time axis")),
    ("grouped conv", _grouped, ("'grp'", "groups=2")),
    ("reshape regroups steps", _regroup_time, ("'pairs'", "Reshape", "time axis")),
    ("frame after a last-step rnn", _conv_after_rnn, ("'to_frame'", "Reshape", "more than one axis")),
    ("pooling over the sequence after the rnn", _pool_after_rnn, ("'gap1'", "whole sequence")),
]


@pytest.mark.parametrize("builder, needles", [pytest.param(b, n, id=i) for i, b, n in REFUSALS])
def test_unstreamable_frame_model_is_refused_in_one_line(tmp_path, builder, needles):
    path = tmp_path / "m.keras"
    builder(_keras3()).save(path)
    code, text = run("convert", path, "-o", tmp_path / "out", "--quant", "float32")
    assert code == 2, text
    lines = text.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), text
    for needle in needles:
        assert needle in text, text
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def frame_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("frames") / "front.keras"
    model = front_end(_keras3())
    model.save(path)
    return model, path


@pytest.mark.parametrize("shape, needles", [
    ((2, 10, 8, 8, 3), ("frames of shape (8, 8, 3)", "the model takes frames of shape (8, 8, 2)")),
    ((2, 10, 16, 8, 2), ("frames of shape (16, 8, 2)", "(8, 8, 2)")),
    ((2, 10, 128), ("(2, 10, 128)", "expected (sequences, steps, 8, 8, 2)")),
])
def test_calibration_frames_of_another_shape_name_both(tmp_path, frame_file, shape, needles):
    calib = tmp_path / "calib.npy"
    np.save(calib, np.zeros(shape, np.float32))
    code, text = run("convert", frame_file[1], "-o", tmp_path / "out", "--calib", calib)
    assert code == 2, text
    assert len(text.strip().splitlines()) == 1, text
    for needle in needles:
        assert needle in text, text


def test_test_data_frames_of_another_shape_name_both():
    from edgernn.outdir import Manifest
    from edgernn.validate.run import TestSequences

    manifest = Manifest(inputs=[{"name": "x", "shape": [1, *FRAME], "dtype": "int8", "scale": 0.1, "zero_point": 0}])
    flat = TestSequences(frames(2, 5), manifest, None)
    assert flat.sequences == 2 and flat.chunk(0, 0, 5).shape == (5, int(np.prod(FRAME)))
    np.testing.assert_array_equal(flat.chunk(1, 0, 5), frames(2, 5)[1].reshape(5, -1))
    with pytest.raises(EdgeRNNError, match=r"test data has frames of shape \(8, 8, 3\); the model takes frames "
                                           r"of shape \(8, 8, 2\)"):
        TestSequences(np.zeros((1, 5, 8, 8, 3), np.float32), manifest, None)


# ---------------------------------------------------------------- inspect


def test_inspect_shows_per_frame_macs_and_activation_bytes(frame_file):
    model, path = frame_file
    result = CliRunner().invoke(cli, ["inspect", str(path), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["input_shape"] == list(FRAME) and report["features"] == int(np.prod(FRAME))
    rows = report["layers"]
    conv, bn, relu, sep, pool, flat, dense = rows[:7]
    assert conv["output_shape"] == [4, 4, 4] and conv["activation_elements"] == 64
    assert conv["macs_per_step"] == 4 * 4 * 4 * 3 * 3 * 2          # each output: a 3x3 window of 2 channels
    assert sep["macs_per_step"] == 4 * 4 * 4 * 3 * 3 + 4 * 4 * 6 * 4  # depthwise 3x3, then pointwise 4 -> 6
    assert pool["output_shape"] == [2, 2, 6] and pool["macs_per_step"] == 0
    assert flat["output_shape"] == [24] and dense["macs_per_step"] == 24 * 8
    assert report["activation_peak_elements"] == int(np.prod(FRAME)) + 64
    lstm = next(r for r in rows if r["class"] == "LSTM")
    assert lstm["path"] == "step" and "is not one edgernn rebuilds in tf_keras" in lstm["why"]  # never fused
    table = CliRunner().invoke(cli, ["inspect", str(path)], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    assert "input (batch, any, 8, 8, 2)" in table.output and "act bytes" in table.output
    assert "4x4x4" in table.output and "per frame: Conv2D" in table.output


def test_a_frame_too_big_for_the_link_names_its_input_bytes():
    from edgernn.errors import LinkError
    from edgernn.link import LinkClient
    from edgernn.link import protocol as P

    client = LinkClient(None, url="test")
    client.info = P.DeviceInfo(2, np.dtype("<f4"), np.dtype("<f4"), 32 * 32 * 3, 2, 8, 4096, "host", "a" * 64)
    with pytest.raises(LinkError, match=r"4096-byte frames \(12288 bytes of input per step\)"):
        client.max_steps_per_frame(0)
    client.info = P.DeviceInfo(2, np.dtype("<i1"), np.dtype("<i1"), 32 * 32 * 3, 2, 8, 4096, "host", "a" * 64)
    assert client.max_steps_per_frame(0) == 1


# ---------------------------------------------------------------- the device reads x as the frame's bytes


@pytest.mark.toolchain
@pytest.mark.parametrize("frame,quant", [((4, 4, 2), "int8"), ((48, 64, 2), "float32")], ids=["small", "24KiB"])
def test_a_frame_model_built_for_host_validates_byte_exact(tmp_path, frame, quant):
    """A front end that only flattens each frame needs no convolution kernel: the C side takes x as the
    frame's H*W*C elements, flat, and validate sends them per step. A frame of 24 KiB (48x64x2 float32), more
    than the board's 4,096-byte link frames, gets frames sized to one step of the model (HELLO says so)."""
    from conftest import require_tools
    from edgernn.pipeline.build import build_model
    from edgernn.validate.run import validate

    require_tools("gcc")
    keras = _keras3()
    L = keras.layers
    model = keras.Sequential([keras.Input((None, *frame)), L.TimeDistributed(L.AveragePooling2D(4)) if frame[0] > 8
                              else L.TimeDistributed(L.Flatten()), L.TimeDistributed(L.Flatten()),
                              L.Dense(8, activation="relu"), L.GRU(6, return_sequences=True), L.Dense(2)])
    out = tmp_path / "out"
    build_model(model, out, board="host", quant=quant, calib=frames(4, 16, frame, seed=1))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["inputs"][0]["shape"] == [1, *frame]
    protocol_h = (out / "firmware" / "protocol.h").read_text()
    rx, tx = (int(protocol_h.split(f"#define EDGERNN_LINK_MODEL_{d}_FRAME ")[1].split()[0]) for d in ("RX", "TX"))
    x_bytes = int(np.prod(frame)) * (4 if quant == "float32" else 1)
    assert (rx, tx) == (8 + 3 + x_bytes, 8 + 7 + 2 * (4 if quant == "float32" else 1) + 4 + 2 * manifest_state_bytes(manifest))
    report = validate(out, data=frames(2, 30, frame, seed=3), json_path=tmp_path / "r.json")
    assert report["pass"] and (report["steps"], report["sequences"]) == (30, 2)
    wrong = (frame[0], frame[1], 3)
    with pytest.raises(EdgeRNNError, match=rf"frames of shape \({wrong[0]}, {wrong[1]}, 3\); the model takes frames of "
                                           rf"shape \({frame[0]}, {frame[1]}, 2\)"):
        validate(out, data=frames(1, 5, wrong), json_path=tmp_path / "r2.json")


def manifest_state_bytes(manifest: dict) -> int:
    return sum(int(np.prod(s["shape"])) * np.dtype(s["dtype"]).itemsize for s in manifest["states"])


def test_a_frame_model_whose_activations_exceed_the_board_gets_the_budget_table(tmp_path):
    """A 120x160x3 frame convolved into 20 channels gives 375 KiB of int8 activations, more than the
    AI-deck's L2 budget: build stops before any C is compiled, with the table of what goes where (exit 2)."""
    keras = _keras3()
    L = keras.layers
    model = keras.Sequential([keras.Input((None, 120, 160, 3)),
                              L.TimeDistributed(L.Conv2D(20, 3, padding="same", activation="relu")),
                              L.TimeDistributed(L.GlobalAveragePooling2D()), L.GRU(4, return_sequences=True)])
    path = tmp_path / "big.keras"
    model.save(path)
    calib = tmp_path / "calib.npy"
    np.save(calib, np.random.default_rng(0).uniform(0, 1, (2, 3, 120, 160, 3)).astype(np.float32))
    result = CliRunner().invoke(cli, ["build", str(path), "--board", "ai_deck", "--quant", "int8", "--calib",
                                      str(calib), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert "does not fit board ai_deck: over budget in l2" in result.output
    assert "arena" in result.output and "overflow" in result.output
    assert not (tmp_path / "out").exists()
