"""Causal Conv1D as a stateful step: its last (k-1)·d inputs are the state ``<layer>.buf``.

The float step model run from a zero state equals the Keras model on whole sequences (a zero buffer is
Keras' zero left padding); the forms that cannot stream are refused with the reason; the generated C
matches the interpreter byte for byte, on the host and on qemu_riscv32.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

from edgernn.errors import EdgeRNNError, UnsupportedLayerError
from edgernn.keras.decompose import decompose
from edgernn.keras.fused_rebuild import diagnose
from edgernn.keras.stepmodel import build_step_model
from edgernn.testing import backend_harness as H
from edgernn.testing import zoo


def _keras(seed: int = 0):
    return zoo._keras(seed)


def conv_gru(k: int, d: int, c_in: int = 3, c_out: int = 4, **conv):
    """One causal Conv1D before a GRU, every step out."""
    keras = _keras()
    L = keras.layers
    return keras.Sequential([keras.Input((None, c_in)),
                             L.Conv1D(c_out, k, padding="causal", dilation_rate=d, name="conv", **conv),
                             L.GRU(5, return_sequences=True, name="gru")], name=f"conv_k{k}_d{d}")


def tcn_gru(seed: int = 0):
    """A small causal TCN (dilations 1, 2, 4; BatchNormalization and ReLU between two of the convs) before a
    GRU, and a per-step Dense head."""
    keras = _keras(seed)
    L = keras.layers
    return keras.Sequential([
        keras.Input((None, 2)),
        L.Conv1D(8, 3, padding="causal", dilation_rate=1, activation="relu"),
        L.Conv1D(8, 3, padding="causal", dilation_rate=2), L.BatchNormalization(), L.ReLU(), L.Dropout(0.1),
        L.Conv1D(6, 2, padding="causal", dilation_rate=4),
        L.GRU(12, return_sequences=True), L.Dense(1),
    ], name="tcn_gru")


def gru_dense_gru(seed: int = 0):
    """Per-step layers between two RNNs (no conv): they run between the two cells."""
    keras = _keras(seed)
    L = keras.layers
    return keras.Sequential([keras.Input((None, 3)), L.GRU(6, return_sequences=True),
                             L.Dense(5, activation="tanh"), L.GRU(4, return_sequences=True)], name="gru_dense_gru")


def conv_between(seed: int = 0):
    """Conv1D between two RNNs, the second returning its last step only (a head after the last step)."""
    keras = _keras(seed)
    L = keras.layers
    return keras.Sequential([
        keras.Input((None, 3)), L.LSTM(6, return_sequences=True),
        L.Conv1D(5, 3, padding="causal", dilation_rate=2, activation="tanh"),
        L.GRU(4), L.Dense(2),
    ], name="conv_between")


def conv_head(seed: int = 0):
    """Conv1D after the last RNN, a Dense before the first conv, a 1-wide kernel (no state) on top."""
    keras = _keras(seed)
    L = keras.layers
    return keras.Sequential([
        keras.Input((None, 3)), L.Dense(4, activation="relu"), L.Conv1D(4, 2, padding="causal", use_bias=False),
        L.SimpleRNN(6, return_sequences=True), L.Conv1D(3, 5, padding="causal"),
        L.Conv1D(2, 1, padding="causal"),
    ], name="conv_head")


def _run_step_model(plan, step, sequences: np.ndarray) -> np.ndarray:
    """The Keras step model over sequences, each from zero states: (batch, steps, out) or (batch, out)."""
    outs = []
    for sequence in sequences:
        states = [np.zeros((1, size), np.float32) for _, size, _ in plan.state_specs]
        ys = []
        for x in sequence:
            result = step.keras_model([x[None], *states], training=False)
            ys.append(np.asarray(result[0])[0])
            states = [np.asarray(s) for s in result[1:]]
        outs.append(ys)
    return np.asarray(outs, np.float32)


def assert_step_model_matches(model, steps: int = 24) -> None:
    import keras

    plan = decompose(model, "keras3")
    step = build_step_model(plan, keras)
    xs = zoo.trajectories(2, steps, int(model.inputs[0].shape[-1]), seed=3)
    want = np.asarray(model(xs, training=False), np.float32)
    got = _run_step_model(plan, step, xs)
    if not plan.head_per_step:
        from edgernn.keras.stepmodel import build_head_model

        head = build_head_model(plan, keras)
        got = np.asarray(head(got[:, -1]), np.float32)
    scale = max(float(np.abs(want).max()), 1e-6)
    assert np.abs(got - want).max() <= 1e-5 * scale, (np.abs(got - want).max(), scale)


# ---------------------------------------------------------------- float parity, step model vs Keras

@pytest.mark.parametrize("k", [2, 3, 5])
@pytest.mark.parametrize("d", [1, 2, 4])
def test_causal_conv_step_equals_the_sequence_conv(k, d):
    assert_step_model_matches(conv_gru(k, d, activation="relu"))


@pytest.mark.parametrize("builder", [tcn_gru, conv_between, conv_head, gru_dense_gru], ids=lambda b: b.__name__)
def test_stacked_before_between_and_after_rnns(builder):
    assert_step_model_matches(builder())


def test_causal_convs_alone_stream_a_fixed_length_functional_model():
    keras = _keras()
    L = keras.layers
    x = keras.Input((40, 3))
    z = L.Conv1D(4, 3, padding="causal", dilation_rate=2, activation="relu")(x)
    model = keras.Model(x, L.Conv1D(2, 2, padding="causal")(z), name="tcn_only")
    assert_step_model_matches(model, steps=40)


def test_a_tf_keras_model_streams_the_same_way():
    from edgernn import tfenv

    tk = tfenv.tf_keras()
    if tk is None:
        from conftest import tool_unavailable

        tool_unavailable("needs the Python package tf_keras (pip install -e '.[dev]')")
    tk.utils.set_random_seed(0)
    L = tk.layers
    model = tk.Sequential([tk.Input((None, 3)), L.Conv1D(5, 3, padding="causal", dilation_rate=2, activation="relu"),
                           L.ReLU(), L.Conv1D(4, 2, padding="causal"), L.GRU(6, return_sequences=True)])
    plan = decompose(model, "tf_keras")
    step = build_step_model(plan, tk)
    xs = zoo.trajectories(1, 20, 3, seed=4)
    want = np.asarray(model(xs), np.float32)
    got = _run_step_model(plan, step, xs)
    assert np.abs(got - want).max() <= 1e-5 * float(np.abs(want).max())


def test_the_state_is_the_last_inputs_oldest_first():
    model = conv_gru(3, 2, c_in=2)
    plan = decompose(model, "keras3")
    (name, size, conv), _ = plan.state_specs
    assert (name, size) == ("conv.buf", (3 - 1) * 2 * 2)
    assert [row["states"] for row in _rows(plan)][0] == [{"name": "conv.buf", "size": 8}]
    import keras

    step = build_step_model(plan, keras)
    buf, h = np.zeros((1, 8), np.float32), np.zeros((1, 5), np.float32)
    xs = np.arange(12, dtype=np.float32).reshape(6, 2)
    for x in xs:
        _, buf, h = [np.asarray(t) for t in step.keras_model([x[None], buf, h])]
    np.testing.assert_array_equal(buf[0], xs[-4:].reshape(-1))


def test_per_step_layers_between_stateful_layers_are_mid():
    plan = decompose(tcn_gru(), "keras3")
    roles = [(role, type(layer).__name__) for role, layer in plan.order]
    assert roles[1:5] == [("rnn", "Conv1D"), ("mid", "BatchNormalization"), ("mid", "ReLU"), ("dropped", "Dropout")]
    assert [step.role for steps in plan.between.values() for step in steps] == ["mid", "mid"]
    assert [type(step.layer).__name__ for step in plan.head] == ["Dense"]
    assert [row["path"] for row in _rows(plan)][2:4] == ["per step", "per step"]


def test_a_one_wide_kernel_has_no_state():
    plan = decompose(conv_gru(1, 1), "keras3")
    assert [name for name, _, _ in plan.state_specs] == ["gru.h"]


def _rows(plan):
    from edgernn.keras.describe import layer_rows

    return layer_rows(plan)


# ---------------------------------------------------------------- refusals, one line each

def _refused_conv(**conv):
    keras = _keras()
    return keras.Sequential([keras.Input((None, 3)), keras.layers.Conv1D(4, 3, name="conv", **conv),
                             keras.layers.GRU(4)])


def _pooled(kind):
    def build():
        keras = _keras()
        return keras.Sequential([keras.Input((None, 3)), getattr(keras.layers, kind)(2, name="pool"),
                                 keras.layers.GRU(4)])
    return build


REFUSED = [
    ("strided", lambda: _refused_conv(padding="causal", strides=2), "'conv'", "strides=2"),
    ("same", lambda: _refused_conv(padding="same"), "'conv'", "padding='same'"),
    ("valid", lambda: _refused_conv(padding="valid", dilation_rate=2), "'conv'", "starts 4 steps after the input"),
    ("max pooling", _pooled("MaxPooling1D"), "'pool'", "pools along time"),
    ("average pooling", _pooled("AveragePooling1D"), "'pool'", "pools along time"),
]


@pytest.mark.parametrize("builder, layer, why", [pytest.param(*c[1:], id=c[0]) for c in REFUSED])
def test_refused_with_the_reason(builder, layer, why):
    with pytest.raises(UnsupportedLayerError) as caught:
        decompose(builder(), "keras3")
    line = str(caught.value)
    assert "\n" not in line and layer in line and why in line, line


# ---------------------------------------------------------------- the fused path

def test_a_conv_before_an_lstm_takes_the_step_path_with_the_reason():
    keras = _keras()
    L = keras.layers
    model = keras.Sequential([keras.Input((None, 3)), L.Conv1D(4, 3, padding="causal", name="conv"),
                              L.LSTM(6, return_sequences=True, name="lstm")])
    plan = decompose(model, "keras3")
    diagnosis = diagnose(plan, "int8", "auto")
    assert not diagnosis.fused
    why = {p.layer: p.why for p in diagnosis.paths}
    assert "state" in why["conv"] and "step path" in why["conv"]
    assert "'conv' cannot be fused" in why["lstm"]
    with pytest.raises(EdgeRNNError, match="--mode fused is not possible"):
        diagnose(plan, "int8", "fused")


def test_a_layer_between_two_lstms_takes_the_step_path_with_the_reason():
    keras = _keras()
    L = keras.layers
    model = keras.Sequential([keras.Input((None, 3)), L.LSTM(6, return_sequences=True, name="first"),
                              L.Dense(4, name="mix"), L.LSTM(5, name="second")])
    diagnosis = diagnose(decompose(model, "keras3"), "int8", "auto")
    assert not diagnosis.fused
    assert all("'mix'" in p.why and "between two RNN layers" in p.why for p in diagnosis.paths)


# ---------------------------------------------------------------- the generated C against the interpreter

C_MODELS = {"tcn_gru": tcn_gru, "conv_between": conv_between, "conv_head": conv_head, "gru_dense_gru": gru_dense_gru}
C_CASES = [("tcn_gru", q) for q in ("float32", "int8", "int16")] + [
    ("conv_between", "int8"), ("conv_between", "int16"), ("conv_head", "int8"), ("gru_dense_gru", "int8")]


@pytest.mark.slow
@pytest.mark.toolchain
@pytest.mark.parametrize("name, quant", C_CASES)
def test_generated_c_matches_the_interpreter(tmp_path, name, quant):
    from edgernn.pipeline.convert import convert

    out = tmp_path / "out"
    model = C_MODELS[name]()
    features = int(model.inputs[0].shape[-1])
    with contextlib.redirect_stdout(io.StringIO()):
        manifest = convert(model, out, quant=quant, calib=zoo.trajectories(8, 60, features, 1), mode="step")
    assert any(s["name"].endswith(".buf") for s in manifest.states) == name.startswith(("tcn", "conv"))
    built = H.build(out)
    sequences = {"trajectory": zoo.trajectories(1, 120, features, seed=11)[0],
                 "random": np.random.default_rng(3).normal(0.0, 1.5, size=(60, features)).astype(np.float32)}
    for label, xs in sequences.items():
        xq = H.quantize_x(out, xs)
        ref, _ = H.reference_bytes(out, xq)
        got, _ = H.run_driver(built.exe, xq, ref.shape[1], out)
        stats = H.compare(got, ref, quant)
        assert stats.get("mismatches", stats.get("not_close")) == 0, f"{name} {quant} {label}: {stats}"
        assert len({bytes(r) for r in ref}) > xs.shape[0] // 4


# ---------------------------------------------------------------- validated over the link

def _validated(tmp_path, board: str) -> dict:
    from edgernn.backend import generate_firmware
    from edgernn.pipeline.convert import convert
    from edgernn.targets.board import load_board
    from edgernn.validate.run import validate

    path = tmp_path / "tcn_gru.keras"
    tcn_gru().save(path)
    out = tmp_path / "out"
    with contextlib.redirect_stdout(io.StringIO()):
        convert(str(path), out, quant="int8", calib=zoo.trajectories(8, 80, 2, 1), board=board, mode="step")
    generate_firmware(out, load_board(board))
    report = validate(out, data=zoo.trajectories(1, 400, 2, 5))
    ref = report["reference"]
    assert report["steps"] >= 400
    assert ref["mismatches"] == 0 and ref["state_mismatches"] == 0, ref
    assert report["pass"] and report["float"]["cos"] > 0.9
    return report


@pytest.mark.slow
@pytest.mark.toolchain
def test_tcn_gru_validated_on_the_host_board(tmp_path):
    _validated(tmp_path, "host")


@pytest.mark.slow
@pytest.mark.toolchain
@pytest.mark.qemu
def test_tcn_gru_validated_on_qemu_riscv32(tmp_path):
    _validated(tmp_path, "qemu_riscv32")
