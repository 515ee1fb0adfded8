"""Keras LSTM layers from PyTorch and cuDNN two-bias weights, against the two-bias formula in numpy."""

from __future__ import annotations

import numpy as np
import pytest

from edgernn import keras_lstm_weights_from_cudnn, lstm_from_cudnn, lstm_from_torch
from edgernn.errors import EdgeRNNError

F, H, T = 3, 5, 25


def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def torch_lstm(x, w_ih, w_hh, b_ih, b_hh):
    """PyTorch's nn.LSTM equations (gate order i, f, g, o), batch_first, zero initial state."""
    h = np.zeros((x.shape[0], H))
    c = np.zeros((x.shape[0], H))
    out = []
    for t in range(x.shape[1]):
        z = x[:, t] @ w_ih.T + b_ih + h @ w_hh.T + b_hh
        i, f, g, o = np.split(z, 4, axis=1)
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        out.append(h)
    return np.stack(out, axis=1)


@pytest.fixture
def torch_weights():
    rng = np.random.default_rng(0)
    return [rng.normal(0, 0.5, shape).astype(np.float32) for shape in ((4 * H, F), (4 * H, H), (4 * H,), (4 * H,))]


@pytest.mark.parametrize("flavour", ["keras", "tf_keras"])
def test_lstm_from_torch_weights_matches_the_two_bias_formula(torch_weights, flavour):
    from edgernn import tfenv

    module = tfenv.keras3() if flavour == "keras" else tfenv.tf_keras()
    x = np.random.default_rng(1).normal(size=(2, T, F)).astype(np.float32)
    layer = lstm_from_torch(*torch_weights, return_sequences=True, keras_module=module)
    got = np.asarray(layer(x))
    want = torch_lstm(x.astype(np.float64), *[w.astype(np.float64) for w in torch_weights])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_lstm_from_cudnn_weights_matches_the_two_bias_formula(torch_weights):
    w_ih, w_hh, b_ih, b_hh = torch_weights
    # cuDNN / TF1 CuDNNLSTM layout: Keras-shaped kernels, gate order i, f, c, o, both biases in one vector.
    layer = lstm_from_cudnn(w_ih.T, w_hh.T, np.concatenate([b_ih, b_hh]), return_sequences=True)
    x = np.random.default_rng(2).normal(size=(1, T, F)).astype(np.float32)
    want = torch_lstm(x.astype(np.float64), *[w.astype(np.float64) for w in torch_weights])
    np.testing.assert_allclose(np.asarray(layer(x)), want, rtol=1e-5, atol=1e-6)


def test_another_gate_order_is_reordered(torch_weights):
    """ONNX orders the gates i, o, f, c: the same weights written in that order give the same layer."""
    w_ih, w_hh, b_ih, b_hh = torch_weights
    to_onnx = [0, 3, 1, 2]  # positions of i, o, f, c in PyTorch's i, f, g, o

    def reorder(m):
        blocks = np.split(m, 4, axis=0)
        return np.concatenate([blocks[k] for k in to_onnx], axis=0)

    layer = lstm_from_torch(reorder(w_ih), reorder(w_hh), reorder(b_ih), reorder(b_hh),
                            return_sequences=True, gate_order="iofc")
    x = np.random.default_rng(3).normal(size=(1, T, F)).astype(np.float32)
    want = torch_lstm(x.astype(np.float64), *[w.astype(np.float64) for w in torch_weights])
    np.testing.assert_allclose(np.asarray(layer(x)), want, rtol=1e-5, atol=1e-6)


def test_wrong_shapes_are_one_line_errors(torch_weights):
    w_ih, w_hh, b_ih, _ = torch_weights
    with pytest.raises(EdgeRNNError, match="not \\(4H, F\\) and \\(4H, H\\)"):
        lstm_from_torch(w_ih, w_hh[:, :3], b_ih)
    with pytest.raises(EdgeRNNError, match="two-bias LSTM"):
        keras_lstm_weights_from_cudnn(w_ih.T, w_hh.T, b_ih)
    with pytest.raises(EdgeRNNError, match="gate_order"):
        lstm_from_torch(w_ih, w_hh, gate_order="ifgx")
