"""Error-compensated weight rounding (edgernn/tflite/rounding.py): the weights stay on each row's int8 grid at the
scale TF's quantizer gives the row, their output error on correlated inputs is below the nearest step's, and TF's
int8 and 16x8 quantizers take them as they are, the biases corrected by the weights' mean error."""

from __future__ import annotations

import numpy as np
import pytest

from edgernn.tflite import model as tfl
from edgernn.tflite.rounding import INT8_STEPS, compensate, nearest, round_compensated

from weight_kinds import KINDS, weights


def _correlated_inputs(seed: int, n: int = 10, count: int = 2000) -> np.ndarray:
    """Inputs whose features move together (a few factors and some noise), with a mean away from zero."""
    rng = np.random.default_rng(seed)
    factors = rng.normal(size=(count, 3)) @ rng.normal(size=(3, n))
    return (factors + 0.2 * rng.normal(size=(count, n)) + rng.normal(size=n)).astype(np.float32)


def _row_grid(w: np.ndarray) -> np.ndarray:
    peak = np.abs(w).max(axis=1, keepdims=True)
    return np.where(peak > 0, peak / INT8_STEPS, 1).astype(np.float32)


@pytest.mark.parametrize("kind", KINDS)
def test_compensated_weights_stay_on_each_rows_grid_at_its_scale(kind):
    w = weights(kind)
    x = _correlated_inputs(0)
    q = round_compensated(w, x.T.astype(np.float64) @ x)
    # each row's peak is where it was, so the quantizer's scale (peak / 127) is the same
    assert np.array_equal(np.abs(q).max(axis=1), np.abs(w).max(axis=1))
    steps = q / _row_grid(w)
    assert np.abs(steps).max() <= INT8_STEPS * (1 + 1e-6)
    assert np.abs(steps - np.round(steps)).max() < 1e-3
    assert np.all(q[np.abs(w).max(axis=1) == 0] == 0)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_compensated_rounding_lowers_the_output_error_on_correlated_inputs(seed):
    rng = np.random.default_rng(100 + seed)
    w = rng.normal(0, 0.3, size=(8, 10)).astype(np.float32)
    x = _correlated_inputs(seed)
    h = x.T.astype(np.float64) @ x

    def output_error(q):
        return float(np.linalg.norm(x.astype(np.float64) @ (w - q).T.astype(np.float64)))

    assert output_error(round_compensated(w, h)) < 0.8 * output_error(nearest(w))


def test_nearest_is_tfs_rounding():
    w = weights("random")
    steps = w / _row_grid(w)
    assert np.allclose(nearest(w) / _row_grid(w), np.round(steps), atol=1e-4)


@pytest.fixture(scope="module")
def calibrated():
    """A calibrated float model of two Dense layers, the second without a bias, and its calibration steps."""
    import keras

    from edgernn import tfenv
    from edgernn.tflite.quantize import calibrate

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dense(3, use_bias=False)])
    kernel, bias = model.layers[0].get_weights()
    model.layers[0].set_weights([kernel, np.random.default_rng(0).normal(0, 0.5, bias.shape).astype(np.float32)])
    tf = tfenv.tensorflow()
    float_model = tfl.read(bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert()))
    (key,) = tfl.signature(float_model)[0]
    samples = [{key: row[None]} for row in _correlated_inputs(5, count=300)]
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    return calibrate(converter, samples), samples


def _fc_constants(model) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """(weights, bias) of each FULLY_CONNECTED, as stored (float32, or the quantized integers)."""
    graph = model.subgraphs[0]
    found = []
    for op in graph.operators:
        if tfl.op_name(model, op.opcodeIndex) != "FULLY_CONNECTED":
            continue
        arrays = []
        for k in list(op.inputs[1:3]) + [-1] * (3 - len(op.inputs)):
            if k < 0:
                arrays.append(None)
                continue
            t = graph.tensors[int(k)]
            dtype = {0: np.float32, 9: np.int8, 2: np.int32, 4: np.int64}[t.type]
            arrays.append(np.frombuffer(bytes(np.asarray(model.buffers[t.buffer].data, np.uint8)), dtype)
                          .reshape([int(d) for d in t.shape]))
        found.append(tuple(arrays))
    return found


@pytest.mark.parametrize("quant", ["int8", "int16"])
def test_tfs_quantizers_keep_the_compensated_integers(calibrated, quant):
    from edgernn.tflite.quantize import quantize_calibrated

    data, samples = calibrated
    compensated, names = compensate(data, samples)
    assert len(names) == 2
    before = _fc_constants(tfl.read(data))
    after = _fc_constants(tfl.read(compensated))
    quantized = _fc_constants(tfl.read(quantize_calibrated(compensated, quant)))
    x = np.concatenate([next(iter(s.values())) for s in samples]).astype(np.float64)
    inputs = [x, np.maximum(x @ before[0][0].T.astype(np.float64) + before[0][1], 0)]
    assert before[0][1] is not None and before[1][1] is None  # a bias of its own, and none
    for (w, b), (q, c), (qi, _), x_in in zip(before, after, quantized, inputs):
        assert qi.dtype == np.int8
        # the quantizer's integers are the compensated weights' steps, exactly
        assert np.array_equal(qi.astype(np.float32), np.round(q / _row_grid(q)))
        assert not np.array_equal(q, nearest(w))
        # the bias (made where the op had none) moved by the rounding's mean error on the calibration inputs
        shift = (w.astype(np.float64) - q) @ x_in.mean(axis=0)
        assert c is not None
        assert np.allclose(c, (0 if b is None else b) + shift, rtol=1e-4, atol=1e-6)


def test_a_correction_without_a_bias_moves_the_bias_it_is_summed_with():
    """x W_x + b plus h W_h (an LSTM's gates): the correction of h W_h goes into b, no bias is made."""
    import keras

    from edgernn import tfenv
    from edgernn.tflite.quantize import calibrate

    keras.utils.set_random_seed(1)
    x, h = keras.Input((10,), name="x"), keras.Input((6,), name="h")
    total = keras.layers.Add()([keras.layers.Dense(4)(x), keras.layers.Dense(4, use_bias=False)(h)])
    model = keras.Model([x, h], keras.layers.Activation("tanh")(total))
    dense = [layer for layer in model.layers if isinstance(layer, keras.layers.Dense)]
    kernel, bias = dense[0].get_weights()
    dense[0].set_weights([kernel, np.full(bias.shape, 0.3, np.float32)])
    tf = tfenv.tensorflow()
    float_model = tfl.read(bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert()))
    assert set(tfl.signature(float_model)[0]) == {"x", "h"}
    rows = _correlated_inputs(7, n=16, count=300)
    samples = [{"x": r[None, :10], "h": r[None, 10:]} for r in rows]
    data = calibrate(tf.lite.TFLiteConverter.from_keras_model(model), samples)
    compensated, names = compensate(data, samples)
    assert len(names) == 2
    before, after = tfl.read(data), tfl.read(compensated)
    assert len(after.subgraphs[0].tensors) == len(before.subgraphs[0].tensors)
    (w1, b1), (w2, b2) = [(w, b) for w, b in _fc_constants(before)]
    (q1, c1), (q2, c2) = [(w, b) for w, b in _fc_constants(after)]
    assert [b is None for b in (b1, b2)] == [c is None for c in (c1, c2)] and (b1 is None) != (b2 is None)
    x_of = {0: rows[:, :10], 1: rows[:, 10:]}
    # which FC reads which input: by width
    inputs = [x_of[0] if w.shape[1] == 10 else x_of[1] for w in (w1, w2)]
    shift = sum((w.astype(np.float64) - q) @ xi.mean(axis=0) for w, q, xi in zip((w1, w2), (q1, q2), inputs))
    biased, corrected = (b1, c1) if b1 is not None else (b2, c2)
    assert np.allclose(corrected, biased + shift, rtol=1e-4, atol=1e-6)
