"""The fused path: one UNIDIRECTIONAL_SEQUENCE_LSTM per LSTM, streamed one invoke per step, against Keras."""

from __future__ import annotations

import json

import numpy as np
import pytest

from edgernn.tflite import model as tfl
from edgernn.errors import EdgeRNNError
from edgernn.tflite.oracle import Stepper, dequantize, quantize

from edgernn.testing import zoo

pytestmark = pytest.mark.slow

FUSED_OP = "UNIDIRECTIONAL_SEQUENCE_LSTM"
CALIB_SEQ, CALIB_STEPS = 6, 40
TEST_SEQ, TEST_STEPS = 3, 120


def stack_final(seed: int = 0):
    """Two stacked LSTMs, the first without bias; the last returns its last step into a Dense head."""
    keras = zoo._keras(seed)
    L = keras.layers
    return keras.Sequential([keras.Input((None, 3)), L.LSTM(8, use_bias=False, return_sequences=True),
                             L.LSTM(6), L.Dense(2)], name="stack_final")


def relu_cell(seed: int = 0):
    """A relu cell after a LeakyReLU pre-layer (Keras 3 calls its slope negative_slope, tf_keras alpha)."""
    keras = zoo._keras(seed)
    L = keras.layers
    return keras.Sequential([keras.Input((None, 3)), L.Dense(4), L.LeakyReLU(0.1),
                             L.LSTM(6, activation="relu", return_sequences=True)], name="relu_cell")


def wide_cell(seed: int = 0):
    """An LSTM whose cell state grows far past 10 and back, and whose h stays mostly on one side of 0.

    TensorFlow's converter gives the fused op a cell clip of 10 that Keras does not have, and the integer
    kernel needs the hidden intermediate tied to the output; both are undone by edgernn, and this model
    shows it when they are not.
    """
    keras = zoo._keras(seed)
    model = keras.Sequential([keras.Input((None, 3)), keras.layers.LSTM(4, return_sequences=True)], name="wide_cell")
    kernel, recurrent, bias = model.layers[0].get_weights()
    kernel[:, 8:12] = 4.0  # the cell input follows the input's sign
    bias[0:4], bias[4:8], bias[8:12] = 3.0, 6.0, 0.0  # input gate open, forget gate nearly 1
    model.layers[0].set_weights([kernel, recurrent, bias])
    return model


MODELS = {"lstm_pre_head": zoo.lstm_pre_head, "stack_final": stack_final,
          "tf_keras_lstm_final": zoo.tf_keras_lstm_final, "relu_cell": relu_cell, "wide_cell": wide_cell}
FLOAT_CASES = list(MODELS)
INT8_CASES = ["lstm_pre_head", "stack_final", "wide_cell"]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    from edgernn.pipeline.convert import convert

    cache = {}

    def get(name, quant, mode="fused"):
        if (name, quant, mode) not in cache:
            model = cache.setdefault(name, MODELS[name]())
            out = tmp_path_factory.mktemp(f"{name}_{quant}_{mode}")
            calib = zoo.trajectories(CALIB_SEQ, CALIB_STEPS, zoo.features_of(model), seed=3)
            manifest = convert(model, out / "out", quant=quant, calib=calib, mode=mode)
            cache[(name, quant, mode)] = (model, out / "out", manifest)
        return cache[(name, quant, mode)]

    return get


def lstm_count(model) -> int:
    return sum(1 for layer in model.layers if type(layer).__name__ == "LSTM")


def keras_output(model, sequences):
    return np.asarray(model(sequences, training=False), np.float32)


@pytest.mark.parametrize("name", FLOAT_CASES)
def test_one_fused_op_per_lstm_and_no_loop(converted, name):
    model, out, manifest = converted(name, "float32")
    names = tfl.op_names(tfl.read((out / "step.tflite").read_bytes()))
    assert manifest.mode == "fused"
    assert names.count(FUSED_OP) == lstm_count(model)
    assert not set(names) & tfl.CONTROL_FLOW_OPS, names


@pytest.mark.parametrize("name", FLOAT_CASES)
def test_float32_streamed_step_by_step_reproduces_keras(converted, name):
    model, out, _ = converted(name, "float32")
    sequences = zoo.trajectories(TEST_SEQ, TEST_STEPS, zoo.features_of(model), seed=7)
    runner = Stepper.of_folder(out)
    got = runner.model_output(runner.run(sequences, quantize_input=True))
    want = keras_output(model, sequences)
    rel = float(np.max(np.abs(got.reshape(want.shape) - want)) / np.max(np.abs(want)))
    assert rel <= 1e-5, f"{name}: fused float32 differs from Keras by {rel:.2e} relative"


def test_manifest_states_are_the_ops_variable_tensors(converted):
    model, out, manifest = converted("stack_final", "float32")
    lstms = [layer.name for layer in model.layers if type(layer).__name__ == "LSTM"]
    assert [s["name"] for s in manifest.states] == [f"{n}.{s}" for n in lstms for s in ("h", "c")]
    assert manifest.state_feedback == {}
    graph = tfl.read((out / "step.tflite").read_bytes()).subgraphs[0]
    for state in manifest.states:
        assert state["variable"] is True and graph.tensors[state["tensor"]].isVariable
    # The last LSTM's h after each step is the step output y (the head runs once, after the last step).
    trace = Stepper.of_folder(out).run(zoo.trajectories(1, 30, 3, seed=2), quantize_input=True)
    np.testing.assert_array_equal(trace.states[f"{lstms[-1]}.h"], trace.y)
    assert np.any(trace.states[f"{lstms[0]}.c"] != 0)


@pytest.mark.parametrize("name", ["lstm_pre_head", "stack_final"])
def test_states_as_inputs_and_outputs_form_reproduces_keras(converted, name):
    from edgernn.tflite.interpreter import load_interpreter

    model, out, manifest = converted(name, "float32")
    assert manifest.files["fused_states_io"] == "fused_states_io.tflite"
    runner = load_interpreter(out / "fused_states_io.tflite").get_signature_runner()
    sequences = zoo.trajectories(2, 60, 3, seed=9)
    ys = []
    for seq in sequences:
        state = {s["name"]: np.zeros(s["shape"], np.float32) for s in manifest.states}
        for x in seq:
            result = runner(x=x.reshape(1, -1), **state)
            state = {k: np.array(result[k]) for k in state}
            ys.append(np.array(result["y"]).reshape(-1))
    ys = np.asarray(ys).reshape(len(sequences), 60, -1)
    want = keras_output(model, sequences)
    step = Stepper.of_folder(out)
    got = ys if manifest.sequence_output == "every_step" else step.run_head(ys[:, -1, :])
    rel = float(np.max(np.abs(got.reshape(want.shape) - want)) / np.max(np.abs(want)))
    assert rel <= 1e-5


@pytest.mark.parametrize("name", INT8_CASES)
def test_int8_fused_is_no_worse_than_int8_step(converted, name, record_property):
    model, out, manifest = converted(name, "int8")
    _, step_out, step_manifest = converted(name, "int8", "step")
    assert manifest.inputs[0]["dtype"] == "int8" and manifest.outputs[0]["dtype"] == "int8"
    names = tfl.op_names(tfl.read((out / "step.tflite").read_bytes()))
    assert names.count(FUSED_OP) == lstm_count(model) and not set(names) & tfl.CONTROL_FLOW_OPS
    assert manifest.files["fused_states_io"] == "fused_states_io.tflite"  # checked byte-exact when converted
    cells = [s for s in manifest.states if s["name"].endswith(".c")]
    assert all(s["dtype"] == "int16" for s in cells)  # the integer LSTM keeps its cell state in int16

    fused_cal = manifest.quantization_error
    step_cal = step_manifest.quantization_error
    sequences = zoo.trajectories(TEST_SEQ, TEST_STEPS, zoo.features_of(model), seed=11)
    want = keras_output(model, sequences)
    held_out = {}
    for label, folder in (("fused", out), ("step", step_out)):
        runner = Stepper.of_folder(folder)
        got = runner.model_output(runner.run(sequences, quantize_input=True)).reshape(want.shape)
        held_out[label] = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    figures = {"fused_calibration": fused_cal, "step_calibration": step_cal, "held_out_l2r_vs_keras": held_out}
    record_property("int8_figures", json.dumps(figures))
    print(name, json.dumps(figures))
    assert fused_cal["l2r"] <= step_cal["l2r"], figures
    assert held_out["fused"] <= held_out["step"], figures


def test_int8_reference_run_is_the_interpreters_bytes(converted):
    """The Stepper's fused trace: states read with get_tensor after each invoke, reset between sequences."""
    from edgernn.tflite.interpreter import load_interpreter

    _, out, manifest = converted("lstm_pre_head", "int8")
    sequences = zoo.trajectories(2, 20, 3, seed=4)
    trace = Stepper.of_folder(out).run(sequences, quantize_input=True)
    interp = load_interpreter(out / "step.tflite")
    inputs, outputs = tfl.signature(tfl.read((out / "step.tflite").read_bytes()))
    xq = quantize(sequences, manifest.inputs[0])
    for i, seq in enumerate(xq):
        interp.reset_all_variables()
        for state in manifest.states:  # reset puts each state at its zero point: the real value 0
            assert np.all(dequantize(interp.get_tensor(state["tensor"]), state) == 0)
        for t, x in enumerate(seq):
            interp.set_tensor(inputs["x"], x.reshape(manifest.inputs[0]["shape"]))
            interp.invoke()
            np.testing.assert_array_equal(interp.get_tensor(outputs["y"]).reshape(-1), trace.y[i, t])


# ---------------------------------------------------------------- eligibility, by name

def _paths(model, quant="int8", **kwargs):
    from edgernn.pipeline.inspection import inspect_model

    result = inspect_model(model, quant=quant, **kwargs)
    return {r["name"]: r for r in result.rows if r["role"] == "rnn"}, result


def test_dropout_does_not_block_fusion():
    keras = zoo._keras(0)
    model = keras.Sequential([keras.Input((None, 3)),
                              keras.layers.LSTM(4, dropout=0.3, recurrent_dropout=0.2, name="drop")])
    rows, result = _paths(model)
    assert rows["drop"]["path"] == "fused"
    assert result.plan_lines == ["drop (LSTM): fused"]


@pytest.mark.parametrize("kwargs, quant, needle", [
    ({"activation": "sigmoid"}, "float32", "activation=sigmoid"),
    ({"activation": "linear"}, "float32", "activation=linear"),
    ({"activation": "relu"}, "int8", "activation=relu: TFLite's int8 fused LSTM kernel applies tanh only"),
    ({"recurrent_activation": "hard_sigmoid"}, "int8", "recurrent_activation=hard_sigmoid: the fused op's gates are sigmoid"),
    ({}, "int16", "TFLite's fused LSTM has no 16x8 quantization"),
])
def test_ineligible_lstm_gets_its_named_reason(kwargs, quant, needle):
    keras = zoo._keras(0)
    model = keras.Sequential([keras.Input((None, 3)), keras.layers.LSTM(4, name="cell", **kwargs)])
    rows, result = _paths(model, quant)
    assert rows["cell"]["path"] == "step"
    assert needle in rows["cell"]["why"]
    assert result.plan_lines[0].startswith("cell (LSTM): step, because ") and needle in result.plan_lines[0]


def test_relu_cell_is_fused_in_float32():
    rows, _ = _paths(relu_cell(), "float32")
    assert next(iter(rows.values()))["path"] == "fused"


def test_a_per_step_layer_tf_keras_cannot_express_names_its_key():
    import warnings

    keras = zoo._keras(0)
    L = keras.layers
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        norm = L.LayerNormalization(rms_scaling=True, name="rms")
    model = keras.Sequential([keras.Input((None, 3)), norm, L.LSTM(4, name="l")])
    rows, _ = _paths(model)
    assert rows["l"]["path"] == "step" and "'rms' (LayerNormalization) has rms_scaling=True" in rows["l"]["why"]


def test_rnn_around_lstmcell_with_sigmoid_names_the_attribute():
    rows, _ = _paths(zoo.rnn_lstmcell_bn(), "float32")
    row = next(iter(rows.values()))
    assert row["path"] == "step" and "activation=sigmoid" in row["why"]


def test_a_gru_beside_an_lstm_keeps_the_whole_model_on_the_step_path():
    keras = zoo._keras(0)
    L = keras.layers
    model = keras.Sequential([keras.Input((None, 3)), L.LSTM(4, return_sequences=True, name="l"), L.GRU(3, name="g")])
    rows, result = _paths(model)
    assert rows["g"]["path"] == "step" and "GRU has no fused TFLite op" in rows["g"]["why"]
    assert rows["l"]["path"] == "step" and "'g' cannot be fused" in rows["l"]["why"]
    assert len(result.plan_lines) == 2


def test_the_backend_runs_the_fused_op_so_auto_fuses():
    import edgernn.backend
    from edgernn.keras.decompose import decompose
    from edgernn.keras.fused_rebuild import diagnose

    plan = decompose(zoo.functional_lstm(), "keras")
    assert FUSED_OP in edgernn.backend.supported_ops()
    assert diagnose(plan, "int8", "auto").fused


def test_mode_fused_on_an_ineligible_model_is_one_line_error(tmp_path):
    from edgernn.pipeline.convert import convert

    with pytest.raises(EdgeRNNError, match="--mode fused is not possible.*activation=sigmoid") as info:
        convert(zoo.rnn_lstmcell_bn(), tmp_path / "out", quant="float32", mode="fused")
    assert "\n" not in str(info.value)
    assert not (tmp_path / "out").exists()


def test_cli_inspect_json_shows_the_path_per_rnn_layer(tmp_path):
    from click.testing import CliRunner

    from edgernn.cli.main import cli

    path = zoo.save(zoo.rnn_lstmcell_bn(), tmp_path)
    result = CliRunner().invoke(cli, ["inspect", path, "--json", "--quant", "float32"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    rnn = [r for r in report["layers"] if r["role"] == "rnn"]
    assert rnn and rnn[0]["path"] == "step" and "activation=sigmoid" in rnn[0]["why"]
    assert "activation=sigmoid" in report["rnn_paths"][0]
