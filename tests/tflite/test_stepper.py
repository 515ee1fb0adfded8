"""Stepper (edgernn/tflite/oracle.py), the one stepping loop: held against the signature runner stepped by hand,
states fed back from their zero points, on an int8 step model with two states and a last-step head."""

from __future__ import annotations

import numpy as np
import pytest

from edgernn.testing import zoo
from edgernn.tflite.interpreter import load_interpreter
from edgernn.tflite.oracle import State, Stepper, dequantize, quantize


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    import keras

    from edgernn.pipeline.convert import convert

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((None, 3)), keras.layers.LSTM(6), keras.layers.Dense(2)])
    out = tmp_path_factory.mktemp("stepper") / "out"
    manifest = convert(model, out, quant="int8", mode="step", calib=zoo.trajectories(4, 30, 3, seed=1))
    return out, manifest


def by_hand(step_file, xq, names):
    """Each sequence from zero-point states, fed back through the signature runner: y and states per step."""
    runner = load_interpreter(step_file).get_signature_runner()
    details = runner.get_input_details()
    ys, states = [], {n: [] for n in names}
    for seq in xq:
        state = {n: np.full(details[n]["shape"], details[n]["quantization_parameters"]["zero_points"][0],
                            details[n]["dtype"]) for n in names}
        for x in seq:
            out = runner(x=x.reshape(details["x"]["shape"]), **state)
            state = {n: out[n] for n in names}
            ys.append(out["y"].reshape(-1))
            for n in names:
                states[n].append(out[n].reshape(-1))
    shape = xq.shape[:2]
    return np.reshape(ys, (*shape, -1)), {n: np.reshape(v, (*shape, -1)) for n, v in states.items()}


def test_run_gives_the_signature_runners_bytes_and_the_head(folder):
    out, manifest = folder
    names = [s["name"] for s in manifest.states]
    sequences = zoo.trajectories(3, 25, 3, seed=5)
    stepper = Stepper.of_folder(out, manifest)
    trace = stepper.run(sequences, quantize_input=True)
    xq = quantize(sequences, manifest.inputs[0])
    want_y, want_states = by_hand(out / "step.tflite", xq, names)
    np.testing.assert_array_equal(trace.x, xq)
    np.testing.assert_array_equal(trace.y, want_y)
    assert trace.y.dtype == want_y.dtype
    for n in names:
        np.testing.assert_array_equal(trace.states[n], want_states[n])
    np.testing.assert_array_equal(trace.y_float, dequantize(want_y, manifest.outputs[0]))
    head = load_interpreter(out / manifest.head["file"]).get_signature_runner()
    final = [dequantize(head(h=h.reshape(manifest.head["input"]["shape"]))["y"].reshape(-1), manifest.head["output"])
             for h in want_y[:, -1]]
    np.testing.assert_array_equal(trace.final, np.asarray(final))
    np.testing.assert_array_equal(stepper.model_output(trace), trace.final)


def test_advance_goes_on_from_the_state_and_records_are_its_bytes(folder):
    out, manifest = folder
    xq = quantize(zoo.trajectories(1, 20, 3, seed=6), manifest.inputs[0])[0]
    stepper = Stepper(out / "step.tflite", manifest.states)
    whole = stepper.run(xq[None])
    stepper.reset()
    first, _ = stepper.advance(xq[:7])
    rest, states = stepper.advance(xq[7:])
    np.testing.assert_array_equal(np.concatenate([first, rest]), whole.y[0])
    for s in manifest.states:
        np.testing.assert_array_equal(states[s["name"]], whole.states[s["name"]][0, 7:])
    records, y_dtype = stepper.records(xq)
    assert y_dtype == whole.y.dtype
    assert records.tobytes() == b"".join(
        whole.y[0, t].tobytes() + b"".join(whole.states[s["name"]][0, t].tobytes() for s in manifest.states)
        for t in range(len(xq)))


def test_a_state_fed_back_under_another_output_key_and_the_feeds(folder):
    out, manifest = folder
    names = [s["name"] for s in manifest.states]
    xq = quantize(zoo.trajectories(2, 5, 3, seed=7), manifest.inputs[0])
    trace = Stepper(out / "step.tflite", [State(n, n) for n in names]).run(xq, keep_feeds=True)
    assert len(trace.feeds) == 10 and list(trace.feeds[0]) == ["x", *names]
    for n in names:  # each sequence starts at the zero point; then the state the step before gave
        assert np.all(trace.feeds[5][n] == trace.feeds[0][n])
        np.testing.assert_array_equal(trace.feeds[6][n].reshape(-1), trace.states[n][1, 0])


def test_values_into_an_integer_model_are_refused(folder):
    out, manifest = folder
    with pytest.raises(TypeError, match="codes"):
        Stepper(out / "step.tflite", manifest.states).step(np.zeros(3, np.float32))
