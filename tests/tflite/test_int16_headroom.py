"""int16 headroom: the 16x8 quantizer gets every calibrated activation range 1.5 times as wide
(edgernn.tflite.quantize.INT16_HEADROOM), so values somewhat past what calibration saw do not saturate; the int8
quantizer keeps the calibrated ranges."""

from __future__ import annotations

import numpy as np
import pytest

from edgernn.tflite import model as tfl
from edgernn.tflite import quantize
from test_int16_sums import TERMS, calibrated_sum_model, run

pytestmark = pytest.mark.slow

W = np.linspace(0.5, 1.0, TERMS * 4, dtype=np.float32).reshape(1, 1, TERMS, 4)


@pytest.fixture(scope="module")
def calibrated():
    samples = np.random.default_rng(0).uniform(0.0, 1.0, (64, 1, TERMS, 4)).astype(np.float32)
    return calibrated_sum_model(samples), samples


def _input_scale(quantized: bytes) -> float:
    model = tfl.read(quantized)
    inputs, _ = tfl.signature(model)
    return float(tfl.tensor_quant(model, inputs["x"])["scale"])


@pytest.mark.parametrize("quant, levels, factor", [("int16", 32767, quantize.INT16_HEADROOM), ("int8", 255, 1.0)])
def test_the_input_scale_is_the_calibrated_range_widened_for_int16_only(calibrated, quant, levels, factor):
    data, samples = calibrated
    q, _ = quantize.quantize_with_tied_states(data, [], quant)
    lo, hi = float(samples.min()), float(samples.max())
    span = 2 * max(abs(lo), abs(hi)) * factor if quant == "int16" else (hi - min(lo, 0.0))
    assert _input_scale(q) == pytest.approx(span / (2 * levels if quant == "int16" else levels), rel=0.02)


@pytest.mark.parametrize("headroom, saturates", [(1.0, True), (1.5, False)])
def test_inputs_past_the_calibrated_range_saturate_only_without_headroom(calibrated, monkeypatch, headroom,
                                                                         saturates):
    data, samples = calibrated
    monkeypatch.setattr(quantize, "INT16_HEADROOM", headroom)
    q16, _ = quantize.quantize_with_tied_states(data, [], "int16")
    xs = samples[:16] * 1.3          # 30% past every calibrated input and sum
    want = np.sum(xs * W, axis=2)
    got = run(q16, xs)
    l2r = float(np.linalg.norm(got - want.reshape(got.shape)) / np.linalg.norm(want))
    assert (l2r > 0.05) == saturates, l2r
