"""int16 SUM: TF's 16x8 quantizer gives a SUM its input's quantization and LiteRT's int16 SUM adds the raw values,
saturating the total; so the input's range is widened to the sum's before 16x8 quantization
(edgernn.tflite.quantize.fit_int16_sums), and the sum of many terms (an LTC's synapses) fits."""

from __future__ import annotations

import contextlib
import io
import tempfile

import numpy as np
import pytest

from edgernn.tflite import model as tfl
from edgernn.tflite.interpreter import load_interpreter
from edgernn.tflite.quantize import calibrate, fit_int16_sums, quantize_with_tied_states

pytestmark = pytest.mark.slow

TERMS = 16


def calibrated_sum_model(samples: np.ndarray) -> bytes:
    """x (1, 16, 4) -> y = sum over axis 1 of x * w (16 same-signed terms of one scale: their total is up to
    16 times one term's range), calibrated on ``samples`` (n, 1, 16, 4)."""
    from edgernn import tfenv

    tf = tfenv.tensorflow()
    w = tf.constant(np.linspace(0.5, 1.0, TERMS * 4, dtype=np.float32).reshape(1, TERMS, 4))

    module = tf.Module()
    module.step = tf.function(lambda x: {"y": tf.reduce_sum(x * w, axis=1)},
                              input_signature=[tf.TensorSpec((1, TERMS, 4), tf.float32, name="x")])
    with tempfile.TemporaryDirectory() as folder, tfenv.native_stderr_captured(), \
            contextlib.redirect_stdout(io.StringIO()):
        tf.saved_model.save(module, folder, signatures={"serving_default": module.step})
        converter = tf.lite.TFLiteConverter.from_saved_model(folder)
        return calibrate(converter, [{"x": s} for s in samples])


def run(data: bytes, xs: np.ndarray) -> np.ndarray:
    runner = load_interpreter(data).get_signature_runner()
    inputs, outputs = tfl.signature(tfl.read(data))
    qin, qout = (tfl.tensor_quant(tfl.read(data), d[k]) for d, k in ((inputs, "x"), (outputs, "y")))
    ys = []
    for x in xs:
        xq = np.clip(np.round(x / qin["scale"]), -32768, 32767).astype(np.int16)
        ys.append(np.asarray(runner(x=xq)["y"], np.float64) * qout["scale"])
    return np.asarray(ys)


def test_int16_sum_of_sixteen_terms_does_not_saturate():
    rng = np.random.default_rng(0)
    samples = rng.uniform(0.0, 1.0, (64, 1, TERMS, 4)).astype(np.float32)
    calibrated = calibrated_sum_model(samples)
    model = tfl.read(calibrated)
    sum_op = next(op for op in model.subgraphs[0].operators if tfl.op_name(model, op.opcodeIndex) == "SUM")
    before = tfl.get_min_max(model, int(sum_op.inputs[0]))
    total = tfl.get_min_max(model, int(sum_op.outputs[0]))
    assert total[1] > 4 * before[1]       # the case: a total far past one term's range
    widened = tfl.read(fit_int16_sums(calibrated))
    assert tfl.get_min_max(widened, int(sum_op.inputs[0]))[1] == pytest.approx(total[1])
    q16, _ = quantize_with_tied_states(calibrated, [], "int16")
    xs = samples[:16]
    want = np.sum(xs * np.linspace(0.5, 1.0, TERMS * 4, dtype=np.float32).reshape(1, 1, TERMS, 4), axis=2)
    got = run(q16, xs)
    l2r = float(np.linalg.norm(got - want.reshape(got.shape)) / np.linalg.norm(want))
    assert l2r < 0.001, l2r          # saturated at one term's range it was above 0.5
