"""Two-part int8 weights (edgernn/tflite/two_part.py): the split of a weight matrix, and --quant auto on a model
whose int16 error is its int8 weights' (a linear SimpleRNN whose recurrent matrix is 0.995 times an orthogonal
one: each step's weight rounding carries on for about 200 steps), built for host: the weights go in two parts,
the plan meets the default budget, and the device gives LiteRT's bytes."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

from edgernn.tflite import model as tfl
from edgernn.tflite.rounding import INT8_STEPS
from edgernn.tflite.two_part import parts

from weight_kinds import KINDS, weights


@pytest.mark.parametrize("kind", KINDS)
def test_the_first_part_is_on_each_rows_int8_grid_and_the_second_is_the_rest(kind):
    w = weights(kind)
    hi, lo = parts(w)
    peak = np.abs(w).max(axis=1, keepdims=True)
    s = np.where(peak > 0, peak / INT8_STEPS, 1).astype(np.float32)
    # int8 holds the first part exactly at the scale the quantizer gives the row (its peak over 127): only the
    # float32 products' own rounding is left
    hi_peak = np.abs(hi).max(axis=1, keepdims=True)
    assert np.allclose(hi_peak, peak, rtol=1e-6, atol=0)
    scale = np.where(hi_peak > 0, hi_peak / INT8_STEPS, 1)
    q = np.round(hi / scale)
    assert np.abs(q).max() <= INT8_STEPS and np.abs(hi / scale - q).max() < 1e-4
    assert np.allclose(q * scale, hi, rtol=1e-6, atol=0)
    assert np.all(np.abs(lo) <= s / 2 * (1 + 1e-6))
    assert np.allclose(hi + lo, w, rtol=0, atol=float(np.abs(w).max()) * 1e-7)


def _weight_bound_rnn(path):
    import keras

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    n = 24
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    model = keras.Sequential([keras.Input((None, 3)), keras.layers.SimpleRNN(n, activation="linear",
                                                                             return_sequences=True),
                              keras.layers.Dense(2)])
    kernel, _, bias = model.layers[0].get_weights()
    model.layers[0].set_weights([rng.normal(0, 0.5, size=kernel.shape).astype(np.float32),
                                 (0.995 * q).astype(np.float32), bias])
    model.save(path)


def _sequences(count: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 20, 200)
    return np.stack([np.stack([np.sin(t * f + p), np.cos(t * f * 0.7), np.full_like(t, f)], -1)
                     for f, p in rng.uniform(0.2, 2, (count, 2))]).astype(np.float32)


@pytest.mark.slow
@pytest.mark.toolchain
def test_auto_puts_the_weights_in_two_parts_where_even_int16_misses(tmp_path):
    from edgernn.pipeline.build import build_model
    from edgernn.validate.run import validate

    _weight_bound_rnn(tmp_path / "rnn.keras")
    calib = _sequences(16, seed=0)
    out = tmp_path / "out"
    with contextlib.redirect_stdout(io.StringIO()):
        build_model(str(tmp_path / "rnn.keras"), out, board="host", quant="auto", mode="step", calib=calib)
    plan = json.loads((out / "manifest.json").read_text())["precision"]
    # of the cell's two FULLY_CONNECTEDs and the Dense's, the recurrent matrix's alone costs a share of the budget
    # (its rounding carries on for ~200 steps): it alone is now two and an ADD, which brings int16 from about 0.08
    # to below 0.005, and the plan within the budget with int8 ops. The error-compensated rounding is not tried
    # where int16 misses with TF's rounding (it would plan at 0.017 and reach 0.03 on the first two sequences).
    assert len(plan["two_part_weights"]) == 1, plan["note"]
    assert plan["weight_rounding"] == {"rounding": "nearest", "ops": []}
    assert plan["note"].startswith("even int16 missed the budget"), plan["note"]
    assert plan["int16_error"] < 0.005 and plan["met"] and plan["error"] <= 0.02, plan
    assert plan["int8_ops"] > 0
    names = tfl.op_names(tfl.read((out / "step.tflite").read_bytes()))
    assert names.count("ADD") == 1 + 1 and names.count("FULLY_CONNECTED") == 3 + 1, names
    for data in (calib[:2], _sequences(4, seed=1)):
        report = validate(out, data=data, steps=200, json_path=tmp_path / "report.json")
        ref = report["reference"]
        assert report["pass"] and ref["mismatches"] == 0 and ref["state_mismatches"] == 0, ref
        assert report["float"]["l2r"] <= 0.03, report["float"]
