"""16x8 FULLY_CONNECTED through the C backend, byte for byte against LiteRT, on weights like trained ones.

LiteRT 2.3 rescales a 16x8 FULLY_CONNECTED's int64 sum as round((double)acc * s_in * s_w / s_out), halves away
from zero, on its reference kernels, and on its builtin ones when the layer has a bias; its builtin kernel
without a bias goes through ruy: the int32 sum, two roundings, halves up (measured here: a SUM first makes the
graph's oracle the builtin kernels), unless the op's quantized_bias_type is INT64 (TF's 16x8 quantizer writes it
so): then it sums in int64 and rescales as with a bias. The Q31 multiplier of the scale with one rounding (TFLite's
MultiplyByQuantizedMultiplier) is within 2^-31 of the double one, so the two part only where acc * scale lies
within about |acc * scale| / 2^31 of a half: once in some 10^5 outputs of a trained layer, which a few hundred
random steps rarely meet, and which a trained model's 200-step validation meets now and then. Each case
therefore also feeds inputs picked (from up to a million random ones) where those two roundings give different
bytes, so a kernel of the other rounding fails every case; ruy's rounding parts from both at every half.
"""

from __future__ import annotations

import numpy as np
import pytest

from edgernn.backend import quantparams as qp
from edgernn.testing import backend_harness as H
from edgernn.testing import mixed_models as MM
from edgernn.tflite.oracle import Stepper

pytestmark = pytest.mark.toolchain

INT64 = 4   # schema.TensorType

# (name, inputs, outputs, bias, a SUM first: the graph runs on LiteRT's builtin kernels, the options'
# quantized_bias_type)
CASES = [
    ("reference_bias", 16, 16, True, False, 0),
    ("reference_no_bias", 20, 12, False, False, 0),
    ("reference_one_output", 32, 1, True, False, 0),
    ("builtin_bias", 16, 16, True, True, 0),
    ("builtin_no_bias", 16, 16, False, True, 0),
    # no bias, but an int64 bias type (as TF's 16x8 quantizer writes it: an LTC's Dense head without a bias):
    # LiteRT's builtin kernel then sums in int64 and rescales as with a bias, not through ruy
    ("builtin_no_bias_int64_type", 16, 16, False, True, INT64),
    ("builtin_no_bias_int64_type_one_output", 24, 1, False, True, INT64),
]


def trained_like(n_in: int, n_out: int, bias: bool, seed: int):
    """Weights as training leaves them, quantized as TF's 16x8 quantizer does: rows of different magnitude
    (per-channel scales spread over 10x), heavy-tailed values that fill the int8 range; an int64 bias of a few
    times the row's reach; input and output scales of a layer whose outputs use most of int16."""
    rng = np.random.default_rng(seed)
    real = rng.standard_t(4, (n_out, n_in)) * rng.uniform(0.1, 1.0, (n_out, 1))
    w_scale = (np.abs(real).max(axis=1) / 127).astype(np.float32)
    w = np.clip(np.round(real / w_scale[:, None]), -127, 127).astype(np.int8)
    s_in = np.float32(3.0 / 32767)
    reach = np.abs(real).sum(axis=1) * 3.0 * 0.4
    s_out = np.float32(reach.max() / 32767)
    b = None
    if bias:
        b = np.round(rng.normal(0, 1, n_out) * reach / (float(s_in) * w_scale.astype(np.float64)) * 0.2).astype(np.int64)
    return w, w_scale, b, float(s_in), float(s_out)


def roundings(w, w_scale, b, s_in, s_out, xq):
    """(the double rounding, the Q31 one) of each row of xq, as int16 after the clamp."""
    acc = xq.astype(np.int64) @ w.T.astype(np.int64) + (0 if b is None else b)
    assert np.abs(acc).max() < 1 << 32
    eff = np.array([float(np.float32(s_in)) * float(s) / float(np.float32(s_out)) for s in w_scale])
    y = acc * eff
    by_double = np.sign(y) * np.floor(np.abs(y) + 0.5)
    m, shift = (np.array(v, np.int64) for v in zip(*(qp.quantize_multiplier(float(e)) for e in eff)))
    by_q31 = (acc * m + (np.int64(1) << (30 - shift))) >> (31 - shift)
    return np.clip(by_double, -32768, 32767).astype(np.int64), np.clip(by_q31, -32768, 32767)


def where_roundings_part(w, w_scale, b, s_in, s_out, seed: int, want: int = 32) -> np.ndarray:
    """Up to ``want`` inputs whose bytes differ between the two roundings, from up to 10^6 random ones."""
    rng = np.random.default_rng(seed)
    found = []
    for _ in range(50):
        xq = rng.integers(-32767, 32768, (20_000, w.shape[1])).astype(np.int16)
        by_double, by_q31 = roundings(w, w_scale, b, s_in, s_out, xq)
        found.append(xq[(by_double != by_q31).any(axis=1)])
        if sum(len(f) for f in found) >= want:
            break
    return np.concatenate(found)[:want]


# a 32-bit core's defaults (the requantization in 32-bit words, the compact row function) and a 64-bit host's
# (64-bit words, the large row function: four rows written out, their tails apart)
WORDS = [("32-bit words", ["-DEDGERNN_S16_WORDS=1", "-DEDGERNN_S16_COMPACT=1"]),
         ("64-bit words", ["-DEDGERNN_S16_WORDS=0", "-DEDGERNN_S16_COMPACT=0"])]


@pytest.mark.parametrize("words, flag", WORDS, ids=[w[0] for w in WORDS])
@pytest.mark.parametrize("name, n_in, n_out, bias, sum_first, bias_type", CASES, ids=[c[0] for c in CASES])
def test_fully_connected_s16_is_byte_exact(tmp_path, name, n_in, n_out, bias, sum_first, bias_type, words, flag):
    seed = CASES.index(next(c for c in CASES if c[0] == name))
    w, w_scale, b, s_in, s_out = trained_like(n_in, n_out, bias, seed)
    scales = w_scale if n_out > 1 else w_scale[:1]
    folder = MM.write_folder(tmp_path / name, MM.fc16_alone(w, scales, b, s_in, s_out, sum_first=sum_first,
                                                                      bias_type=bias_type))
    build = H.build(folder, cflags=flag)
    model_c = (folder / "firmware" / "model.c").read_text()
    assert "fully_connected_s16(" in model_c
    parting = where_roundings_part(w, w_scale, b, s_in, s_out, seed)
    assert len(parting) >= 2     # the case holds inputs where the two roundings give different bytes
    rng = np.random.default_rng(100 + seed)
    xq = np.concatenate([rng.integers(-32767, 32768, (256, n_in)).astype(np.int16), parting])
    if sum_first:
        xq = xq.reshape(len(xq), 1, n_in)
    ref, _ = Stepper(folder / "step.tflite", []).records(xq.reshape(len(xq), -1))
    got, _ = H.run_driver(build.exe, xq.reshape(len(xq), -1), ref.shape[1], tmp_path)
    bad = (got.view(np.int16) != ref.view(np.int16)).any(axis=1)
    assert not bad.any(), f"{name}: {int(bad.sum())} of {len(xq)} steps differ (first at step {int(np.argmax(bad))})"
