"""Keras LSTM layers from LSTM weights trained elsewhere: PyTorch ``nn.LSTM`` and cuDNN-style two-bias LSTMs.

PyTorch, cuDNN and TF1's ``CuDNNLSTM`` keep two biases per gate (one added to the input product, one to
the recurrent product); Keras keeps one. Both biases are always added together before the gate
nonlinearity, so their sum is the Keras bias, exactly. The gate order differs too:

=============================== ========================= ===========================
source                          weight layout              gate order
=============================== ========================= ===========================
PyTorch ``nn.LSTM`` (layer k)   ``weight_ih_lk`` [4H, F],  i, f, g, o
                                ``weight_hh_lk`` [4H, H],
                                ``bias_ih_lk``, ``bias_hh_lk`` [4H]
cuDNN / TF1 ``CuDNNLSTM``       kernel [F, 4H],            i, f, c, o (as Keras)
                                recurrent_kernel [H, 4H],
                                bias [8H] (input, recurrent)
Keras ``LSTM``                  kernel [F, 4H],            i, f, c, o
                                recurrent_kernel [H, 4H],
                                bias [4H]
=============================== ========================= ===========================

PyTorch's ``g`` is Keras' ``c`` (the candidate cell input, through tanh), so PyTorch's order already
matches Keras'; only the matrices are transposed. ``gate_order`` names the source order when it is
another one (ONNX uses i, o, f, c).

GRU and simple RNN layers follow the same rules (:func:`keras_gru_weights`, :func:`keras_rnn_weights`):

=============================== ========================= ===========================
source                          weight layout              gate order
=============================== ========================= ===========================
PyTorch ``nn.GRU``              ``weight_ih`` [3H, F],     r, z, n
                                ``weight_hh`` [3H, H]
ONNX ``GRU``                    ``W`` [3H, F], ``R``       z, r, h
Keras ``GRU``                   kernel [F, 3H],            z, r, h
                                recurrent_kernel [H, 3H]
=============================== ========================= ===========================

PyTorch's GRU applies the reset gate after the recurrent product (``r * (W_hn h + b_hn)``): that is Keras'
``reset_after=True``, whose bias is (2, 3H), the input and the recurrent bias kept apart. ONNX says the
same with ``linear_before_reset=1``; with 0 the reset gate comes first, Keras' ``reset_after=False``,
whose single bias is the sum of the two.

No torch here: pass numpy arrays (``tensor.detach().cpu().numpy()``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from edgernn.errors import EdgeRNNError

KERAS_GATES = "ifco"
_ALIASES = {"g": "c"}


def _order(gate_order: str) -> list[int]:
    names = [_ALIASES.get(g, g) for g in gate_order.lower()]
    if sorted(names) != sorted(KERAS_GATES):
        raise EdgeRNNError(f"gate_order {gate_order!r} must name the gates i, f, c (or g) and o once each")
    return [names.index(g) for g in KERAS_GATES]


def _regate(matrix: np.ndarray, order: list[int], axis: int) -> np.ndarray:
    blocks = np.split(matrix, 4, axis=axis)
    return np.concatenate([blocks[i] for i in order], axis=axis)


def keras_lstm_weights(weight_ih: Any, weight_hh: Any, bias_ih: Any = None, bias_hh: Any = None,
                       gate_order: str = "ifgo") -> list[np.ndarray]:
    """[kernel (F, 4H), recurrent_kernel (H, 4H), bias (4H)] in Keras' layout from PyTorch-layout weights.

    ``weight_ih`` (4H, F), ``weight_hh`` (4H, H); ``bias_ih`` and ``bias_hh`` (4H) may be None (zero).
    """
    w_ih = np.asarray(weight_ih, np.float32)
    w_hh = np.asarray(weight_hh, np.float32)
    if w_ih.ndim != 2 or w_hh.ndim != 2 or w_ih.shape[0] % 4 or w_hh.shape != (w_ih.shape[0], w_ih.shape[0] // 4):
        raise EdgeRNNError(f"weight_ih {w_ih.shape} and weight_hh {w_hh.shape} are not (4H, F) and (4H, H)")
    gates = w_ih.shape[0]
    bias = np.zeros(gates, np.float32)
    for name, b in (("bias_ih", bias_ih), ("bias_hh", bias_hh)):
        if b is not None:
            b = np.asarray(b, np.float32)
            if b.shape != (gates,):
                raise EdgeRNNError(f"{name} has shape {b.shape}; expected ({gates},)")
            bias = bias + b
    order = _order(gate_order)
    return [_regate(w_ih.T, order, 1), _regate(w_hh.T, order, 1), _regate(bias, order, 0)]


KERAS_GRU_GATES = "zrh"
_GRU_ALIASES = {"n": "h", "c": "h"}


def _bias(b: Any, size: int, name: str) -> np.ndarray:
    if b is None:
        return np.zeros(size, np.float32)
    b = np.asarray(b, np.float32)
    if b.shape != (size,):
        raise EdgeRNNError(f"{name} has shape {b.shape}; expected ({size},)")
    return b


def _matrices(weight_ih: Any, weight_hh: Any, gates: int) -> tuple[np.ndarray, np.ndarray]:
    w_ih = np.asarray(weight_ih, np.float32)
    w_hh = np.asarray(weight_hh, np.float32)
    if (w_ih.ndim != 2 or w_hh.ndim != 2 or w_ih.shape[0] % gates
            or w_hh.shape != (w_ih.shape[0], w_ih.shape[0] // gates)):
        raise EdgeRNNError(f"weight_ih {w_ih.shape} and weight_hh {w_hh.shape} are not ({gates}H, F) and "
                           f"({gates}H, H)")
    return w_ih, w_hh


def keras_gru_weights(weight_ih: Any, weight_hh: Any, bias_ih: Any = None, bias_hh: Any = None, *,
                      gate_order: str = "rzn", reset_after: bool = True) -> list[np.ndarray]:
    """[kernel (F, 3H), recurrent_kernel (H, 3H), bias] of a Keras ``GRU`` from PyTorch-layout weights.

    ``gate_order`` is the source's (PyTorch ``rzn``, ONNX ``zrh``). ``reset_after=True`` (PyTorch, ONNX
    ``linear_before_reset=1``) keeps the two biases as Keras' (2, 3H) bias; False sums them into (3H,).
    """
    w_ih, w_hh = _matrices(weight_ih, weight_hh, 3)
    names = [_GRU_ALIASES.get(g, g) for g in gate_order.lower()]
    if sorted(names) != sorted(KERAS_GRU_GATES):
        raise EdgeRNNError(f"gate_order {gate_order!r} must name the gates z, r and h (or n) once each")
    order = [names.index(g) for g in KERAS_GRU_GATES]
    gates = w_ih.shape[0]
    b_ih = _regate3(_bias(bias_ih, gates, "bias_ih"), order, 0)
    b_hh = _regate3(_bias(bias_hh, gates, "bias_hh"), order, 0)
    bias = np.stack([b_ih, b_hh]) if reset_after else b_ih + b_hh
    return [_regate3(w_ih.T, order, 1), _regate3(w_hh.T, order, 1), bias]


def _regate3(matrix: np.ndarray, order: list[int], axis: int) -> np.ndarray:
    blocks = np.split(matrix, 3, axis=axis)
    return np.concatenate([blocks[i] for i in order], axis=axis)


def keras_rnn_weights(weight_ih: Any, weight_hh: Any, bias_ih: Any = None, bias_hh: Any = None) -> list[np.ndarray]:
    """[kernel (F, H), recurrent_kernel (H, H), bias (H)] of a Keras ``SimpleRNN`` from PyTorch ``nn.RNN``
    weights (``weight_ih`` (H, F), ``weight_hh`` (H, H)); the two biases are summed."""
    w_ih, w_hh = _matrices(weight_ih, weight_hh, 1)
    units = w_ih.shape[0]
    return [w_ih.T.copy(), w_hh.T.copy(), _bias(bias_ih, units, "bias_ih") + _bias(bias_hh, units, "bias_hh")]


def keras_lstm_weights_from_cudnn(kernel: Any, recurrent_kernel: Any, bias: Any,
                                  gate_order: str = "ifco") -> list[np.ndarray]:
    """Keras weights from cuDNN / TF1 ``CuDNNLSTM`` weights: kernel (F, 4H), recurrent (H, 4H), bias (8H).

    The first 4H of ``bias`` go with the input product, the last 4H with the recurrent one.
    """
    k = np.asarray(kernel, np.float32)
    r = np.asarray(recurrent_kernel, np.float32)
    b = np.asarray(bias, np.float32)
    if k.ndim != 2 or r.ndim != 2 or r.shape != (r.shape[1] // 4, r.shape[1]) or k.shape[1] != r.shape[1]:
        raise EdgeRNNError(f"kernel {k.shape} and recurrent_kernel {r.shape} are not (F, 4H) and (H, 4H)")
    if b.shape != (2 * k.shape[1],):
        raise EdgeRNNError(f"bias has shape {b.shape}; a two-bias LSTM has ({2 * k.shape[1]},)")
    return keras_lstm_weights(k.T, r.T, b[: k.shape[1]], b[k.shape[1]:], gate_order=gate_order)


def lstm_from_torch(weight_ih: Any, weight_hh: Any, bias_ih: Any = None, bias_hh: Any = None, *,
                    return_sequences: bool = False, name: str | None = None, keras_module: Any = None,
                    gate_order: str = "ifgo") -> Any:
    """A built Keras ``LSTM`` layer computing what a PyTorch ``nn.LSTM`` layer computes (batch_first).

    ``keras_module``: ``keras`` (Keras 3, the default) or ``tf_keras``. Its defaults (tanh, sigmoid
    gates) are PyTorch's. Use it in a model as any layer: ``keras.Sequential([keras.Input((None, F)),
    layer, ...])``.
    """
    weights = keras_lstm_weights(weight_ih, weight_hh, bias_ih, bias_hh, gate_order=gate_order)
    return _built_lstm(weights, return_sequences, name, keras_module)


def lstm_from_cudnn(kernel: Any, recurrent_kernel: Any, bias: Any, *, return_sequences: bool = False,
                    name: str | None = None, keras_module: Any = None, gate_order: str = "ifco") -> Any:
    """A built Keras ``LSTM`` layer from cuDNN / TF1 ``CuDNNLSTM`` two-bias weights."""
    weights = keras_lstm_weights_from_cudnn(kernel, recurrent_kernel, bias, gate_order=gate_order)
    return _built_lstm(weights, return_sequences, name, keras_module)


def _built_lstm(weights: list[np.ndarray], return_sequences: bool, name: str | None, keras_module: Any) -> Any:
    if keras_module is None:
        from edgernn import tfenv

        keras_module = tfenv.keras3()
    features, units = weights[0].shape[0], weights[1].shape[0]
    layer = keras_module.layers.LSTM(units, return_sequences=return_sequences, name=name)
    layer.build((None, None, features))
    layer.set_weights(weights)
    return layer
