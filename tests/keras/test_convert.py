"""The step conversion core against the Keras models themselves, run by the LiteRT interpreter."""

from __future__ import annotations

import json

import numpy as np
import pytest

from edgernn.tflite import model as tfl
from edgernn.tflite.oracle import Stepper

from edgernn.testing import zoo

pytestmark = pytest.mark.slow

CALIB_SEQ, CALIB_STEPS = 8, 40
TEST_SEQ, TEST_STEPS = 4, 5 * CALIB_STEPS  # five times longer than calibration

# Quantization error bounds (l2r = |err| / |ref| over all test steps). Calibrated on 40 steps, tested on 200.
# 16x8 keeps int8 weights, so int16 activations lower the error only down to the weights' own error.
L2R_BOUND = {"int8": 0.12, "int16": 0.05}
# At int16 an LTC's DIV is traced as numerator * rsqrt(d)^2 (edgernn.keras.stepmodel.ltc_without_division), and a
# LayerNormalization without its NEG (edgernn.keras.decompose.layer_norm_without_neg): TF's 16x8 has neither.
# The LTC's ODE solver (6 unfolds of a division per step) loses the signal in int8. That is measured, flagged
# by the converter and documented in docs/quantization.md; the test holds the converter to flagging it.
KNOWN_POOR = {("ltc_wired", "int8")}


@pytest.fixture(scope="session")
def zoo_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("zoo")
    cache = {}

    def get(name):
        if name not in cache:
            model = zoo.ZOO[name]()
            cache[name] = (model, zoo.save(model, folder))
        return cache[name]

    return get


@pytest.fixture(scope="session")
def converted(zoo_files, tmp_path_factory):
    from edgernn.pipeline.convert import convert

    cache = {}

    def get(name, quant):
        if (name, quant) not in cache:
            model, path = zoo_files(name)
            features = zoo.features_of(model)
            calib = zoo.trajectories(CALIB_SEQ, CALIB_STEPS, features, seed=1)
            out = tmp_path_factory.mktemp(f"{name}_{quant}") / "out"
            manifest = convert(path, out, quant=quant, calib=calib, mode="step")
            cache[(name, quant)] = (model, out, manifest)
        return cache[(name, quant)]

    return get


def keras_output(model, sequences):
    return np.asarray(model(sequences, training=False), np.float32)


@pytest.mark.parametrize("name", sorted(zoo.ZOO))
def test_float32_step_model_reproduces_keras(converted, name):
    model, out, manifest = converted(name, "float32")
    sequences = zoo.trajectories(3, 120, zoo.features_of(model), seed=7)
    runner = Stepper.of_folder(out)
    got = runner.model_output(runner.run(sequences, quantize_input=True))
    want = keras_output(model, sequences)
    rel = float(np.max(np.abs(got.reshape(want.shape) - want)) / np.max(np.abs(want)))
    assert rel <= 1e-5, f"{name}: float32 step model differs from Keras by {rel:.2e} relative"


def _error_profile(name, quant, converted):
    model, out, manifest = converted(name, quant)
    sequences = zoo.trajectories(TEST_SEQ, TEST_STEPS, zoo.features_of(model), seed=11)
    runner = Stepper.of_folder(out)
    trace = runner.run(sequences, quantize_input=True)
    want = keras_output(model, sequences)
    got = runner.model_output(trace).reshape(want.shape)
    l2r = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    per_step = None
    if manifest.sequence_output == "every_step":
        per_step = np.sqrt(np.mean((got - want) ** 2, axis=(0, 2)))
    return l2r, per_step, want


@pytest.mark.parametrize("quant", ["int8", "int16"])
@pytest.mark.parametrize("name", sorted(zoo.ZOO))
def test_quantized_error_is_bounded_and_does_not_grow(converted, name, quant, record_property):
    l2r, per_step, want = _error_profile(name, quant, converted)
    record_property(f"{name}_{quant}_l2r", l2r)
    print(f"{name} {quant}: l2r {l2r:.4f} over {TEST_STEPS} steps (calibrated on {CALIB_STEPS})")
    if (name, quant) in KNOWN_POOR:
        from edgernn.pipeline.convert import QUANT_WARN_L2R

        reported = converted(name, quant)[2].quantization_error["l2r"]
        assert reported > QUANT_WARN_L2R, f"{name} {quant}: l2r {l2r:.3f} but the converter reported {reported:.3f}"
        return
    assert l2r < L2R_BOUND[quant], f"{name} {quant}: l2r {l2r:.4f}"
    if per_step is not None:
        # No drift: the error over the last calibration-length window stays at the level of the first.
        window = CALIB_STEPS
        early, late = per_step[:window].mean(), per_step[-window:].mean()
        rms = float(np.sqrt(np.mean(want ** 2)))
        assert late <= 2.0 * early + 0.02 * rms, f"{name} {quant}: error grows from {early:.4g} to {late:.4g}"


@pytest.mark.parametrize("quant", ["float32", "int8", "int16"])
def test_step_model_has_no_loop_no_variables_and_named_io(converted, quant):
    model, out, manifest = converted("functional_lstm", quant)
    graph = tfl.read((out / "step.tflite").read_bytes())
    ops = set(tfl.op_names(graph))
    assert not ops & tfl.CONTROL_FLOW_OPS, ops
    inputs, outputs = tfl.signature(graph)
    lstm = next(layer.name for layer in model.layers if type(layer).__name__ == "LSTM")
    assert set(inputs) == {"x", f"{lstm}.h", f"{lstm}.c"}
    assert set(outputs) == {"y", f"{lstm}.h", f"{lstm}.c"}
    for name, index in {**inputs, **outputs}.items():
        assert graph.subgraphs[0].tensors[index].shape[0] == 1, f"{name} is not batch 1"
    expected = {"float32": "float32", "int8": "int8", "int16": "int16"}[quant]
    assert [e["dtype"] for e in manifest.inputs + manifest.outputs + manifest.states] == [expected] * 4


@pytest.mark.parametrize("name", ["functional_lstm", "cfc_default", "cfc_nogate_mixed", "gru_stack_final"])
@pytest.mark.parametrize("quant", ["int8", "int16"])
def test_state_outputs_have_their_inputs_quantization(converted, name, quant):
    _, out, manifest = converted(name, quant)
    graph = tfl.read((out / "step.tflite").read_bytes())
    inputs, outputs = tfl.signature(graph)
    assert manifest.states, "a recurrent model has states"
    for state in manifest.states:
        a = tfl.tensor_quant(graph, inputs[state["name"]])
        b = tfl.tensor_quant(graph, outputs[state["name"]])
        assert (a["scale"], a["zero_point"]) == (b["scale"], b["zero_point"]), state["name"]
        if quant == "int16":
            assert a["zero_point"] == 0
    assert manifest.state_feedback == {s["name"]: s["name"] for s in manifest.states}


def test_head_that_runs_once_is_a_separate_model_tied_to_the_step_output(converted):
    model, out, manifest = converted("gru_stack_final", "int8")
    assert manifest.sequence_output == "last_step"
    assert (out / "head.tflite").is_file()
    head, y = manifest.head["input"], manifest.outputs[0]
    assert (head["scale"], head["zero_point"]) == (y["scale"], y["zero_point"])
    grus = [layer.name for layer in model.layers if type(layer).__name__ == "GRU"]
    assert [s["name"] for s in manifest.states] == [f"{g}.h" for g in grus]


def test_manifest_carries_the_contract_fields(converted):
    _, out, manifest = converted("cfc_default", "int8")
    on_disk = json.loads((out / "manifest.json").read_text())
    assert on_disk == manifest.as_dict()
    for key in ("edgernn_version", "model_sha256", "board", "quant", "mode", "inputs", "outputs", "states",
                "state_feedback", "macs_per_step", "arena_bytes", "weight_bytes"):
        assert key in on_disk, key
    assert manifest.quant == "int8" and manifest.mode == "step"
    assert len(manifest.model_sha256) == 64
    assert manifest.macs_per_step > 0 and manifest.weight_bytes > 0
    calibration = dict(manifest.calibration)
    assert calibration.pop("x_min") < calibration.pop("x_max")
    # the horizon (five windows) chains the windows into streams, whose steps are calibration samples too
    streams = CALIB_SEQ // 5
    assert calibration.pop("horizon_widened") is not None
    assert calibration == {"source": "array", "sequences": CALIB_SEQ, "steps": CALIB_STEPS,
                           "samples": CALIB_SEQ * CALIB_STEPS + streams * 5 * CALIB_STEPS,
                           "horizon": 5 * CALIB_STEPS, "horizon_streams": streams}
    assert manifest.schema == "edgernn-build/1" and "step.tflite" in manifest.written
    assert manifest.files["float_step"] == "float_step.tflite" and (out / "float_step.tflite").is_file()


def test_keras3_int8_conversion_of_a_plain_lstm_does_not_crash(tmp_path):
    """TensorFlow's own full-int8 conversion of a Keras 3 LSTM dies in the converter; the step path works."""
    from edgernn.pipeline.convert import convert

    import keras

    keras.utils.set_random_seed(3)
    model = keras.Sequential([keras.Input((None, 4)), keras.layers.LSTM(16)])
    manifest = convert(model, tmp_path / "out", quant="int8", calib=zoo.trajectories(4, 30, 4, 0),
                             mode="step")
    assert manifest.sequence_output == "last_step"
    assert {"FULLY_CONNECTED", "LOGISTIC", "TANH"} <= set(manifest.ops)


def _last_step_cfc():
    keras = zoo._keras(0)
    import ncps.keras
    from ncps.wirings import AutoNCP

    return keras.Sequential([keras.Input((None, 3)), ncps.keras.CfC(AutoNCP(10, 2, seed=0))])


def _last_step_lstm():
    keras = zoo._keras(0)
    return keras.Sequential([keras.Input((None, 3)), keras.layers.LSTM(8)])


@pytest.mark.parametrize("make", [_last_step_cfc, _last_step_lstm], ids=["cfc", "lstm"])
@pytest.mark.parametrize("quant", ["int8", "int16", "auto"])
def test_last_step_with_nothing_after_it_has_no_head(tmp_path, make, quant):
    """return_sequences=False and no layer after: the last step's y is the model's output, no head model (an
    identity head, which TF's 16x8 quantizer cannot quantize, failed int16 and auto)."""
    from edgernn.pipeline.convert import convert

    manifest = convert(make(), tmp_path / "out", quant=quant, calib=zoo.trajectories(4, 40, 3, 0), mode="step")
    assert manifest.sequence_output == "last_step"
    assert manifest.head is None and not (tmp_path / "out" / "head.tflite").exists()


@pytest.mark.parametrize("quant", ["int8", "int16"])
def test_state_from_tanh_takes_the_fixed_tanh_quantization(tmp_path, quant):
    """TFLite fixes TANH's output quantization; a SimpleRNN's state input must take it, whatever calibration says."""
    from edgernn.pipeline.convert import convert

    keras = zoo._keras(0)
    model = keras.Sequential([keras.Input((None, 3)), keras.layers.SimpleRNN(9, return_sequences=True)])
    manifest = convert(model, tmp_path / "out", quant=quant)  # synthetic calibration reaches tanh's ±1
    (state,) = manifest.states
    expected = {"int8": (1 / 128, 0), "int16": (1 / 32768, 0)}[quant]
    assert (state["scale"], state["zero_point"]) == pytest.approx(expected)


def test_tf_keras_savedmodel_folder_converts_like_its_model(tmp_path):
    """A tf_keras SavedModel folder loads, hashes its files, and its step model reproduces the model."""
    from edgernn.pipeline.convert import convert

    model = zoo.tf_keras_lstm_final()
    folder = tmp_path / "saved"
    model.save(str(folder), save_format="tf")
    assert (folder / "saved_model.pb").is_file()
    manifest = convert(str(folder), tmp_path / "out", quant="float32", mode="step")
    assert manifest.keras == "tf_keras" and len(manifest.model_sha256) == 64
    xs = zoo.trajectories(2, 30, 3, seed=4)
    got = Stepper.of_folder(tmp_path / "out").run(xs, quantize_input=True)
    ref = keras_output(model, xs)
    np.testing.assert_allclose(Stepper.of_folder(tmp_path / "out").model_output(got), ref, rtol=1e-5, atol=1e-6)


def test_stateful_lstm_converts_with_the_state_starting_at_zero(tmp_path):
    """stateful=True keeps the state across calls in Keras; on the device it lives across edgernn_step()
    calls the same way, and a sequence starts from zero state, as a freshly reset Keras layer does."""
    import keras

    from edgernn.pipeline.convert import convert

    keras.utils.set_random_seed(3)
    model = keras.Sequential([keras.Input((None, 3), batch_size=1),
                              keras.layers.LSTM(6, return_sequences=True, stateful=True, name="lstm"),
                              keras.layers.Dense(2)])
    xs = zoo.trajectories(1, 40, 3, seed=6)
    path = zoo.save(model, tmp_path)
    manifest = convert(path, tmp_path / "out", quant="float32", mode="step")
    assert [s["name"] for s in manifest.states] == ["lstm.h", "lstm.c"]
    got = Stepper.of_folder(tmp_path / "out").run(xs, quantize_input=True).y_float
    model.layers[0].reset_states()
    first = keras_output(model, xs[:, :20])
    second = keras_output(model, xs[:, 20:])   # carries on from the first half's state
    np.testing.assert_allclose(got, np.concatenate([first, second], axis=1), rtol=1e-5, atol=1e-6)


def test_tf_keras_layer_norm_before_the_rnn_converts(tmp_path):
    """tf_keras keeps a LayerNormalization's axis as [2] (of batch, time, features), not -1: the step model applies it
    through a time axis of one, where on one step's vector it failed with an IndexError."""
    import tf_keras

    from edgernn.pipeline.convert import convert

    tf_keras.utils.set_random_seed(0)
    L = tf_keras.layers
    model = tf_keras.Sequential([L.InputLayer((None, 3)), L.Dense(6), L.LayerNormalization(),
                                 L.GRU(4, return_sequences=True)])
    assert model.layers[1].axis == [2]
    manifest = convert(model, tmp_path / "out", quant="int8", calib=zoo.trajectories(4, 40, 3, 0), mode="step")
    assert manifest.float_self_check_rel <= 1e-5
    assert {"MEAN", "RSQRT"} <= set(manifest.ops)


def test_ltc_with_mixed_memory_has_int16(tmp_path):
    """ncps' LTC with mixed_memory=True wraps its LTCCell in a MixedMemoryRNN: the cell inside it divides as
    numerator * rsqrt(d)^2 at int16 too (TF's 16x8 has no DIV, which refused it)."""
    from edgernn.pipeline.convert import convert

    keras = zoo._keras(0)
    import ncps.keras
    from ncps.wirings import AutoNCP

    model = keras.Sequential([keras.Input((None, 3)),
                              ncps.keras.LTC(AutoNCP(10, 2, seed=0), mixed_memory=True, return_sequences=True)])
    manifest = convert(model, tmp_path / "out", quant="int16", calib=zoo.trajectories(4, 40, 3, 0), mode="step")
    assert "RSQRT" in manifest.ops and "DIV" not in manifest.ops
    assert manifest.float_self_check_rel <= 1e-4
    assert {s["dtype"] for s in manifest.states} == {"int16"}
