"""Small Keras models of every kind edgernn converts, built from code with fixed seeds.

Each builder returns an untrained but initialised model; the conversion is what is under test, and
random weights exercise it as well as trained ones.
"""

from __future__ import annotations

import numpy as np


def trajectories(n_seq: int, steps: int, n_in: int, seed: int) -> np.ndarray:
    """Smooth, bounded input trajectories: sums of sines with random phases and a little noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(steps)[None, :, None]
    freq = rng.uniform(0.02, 0.3, size=(n_seq, 1, n_in))
    phase = rng.uniform(0, 2 * np.pi, size=(n_seq, 1, n_in))
    amp = rng.uniform(0.3, 1.5, size=(n_seq, 1, n_in))
    x = amp * np.sin(freq * t + phase) + 0.05 * rng.standard_normal((n_seq, steps, n_in))
    return x.astype(np.float32)


def _keras(seed: int):
    import keras

    keras.utils.set_random_seed(seed)
    return keras


def lstm_pre_head(seed: int = 0):
    """Dense + LayerNorm before an LSTM with dropout, a per-step head after it."""
    keras = _keras(seed)
    L = keras.layers
    return keras.Sequential([
        keras.Input((None, 3)), L.Dense(8, activation="relu"), L.LayerNormalization(),
        L.LSTM(16, return_sequences=True, dropout=0.1, recurrent_dropout=0.1), L.Dropout(0.2),
        L.TimeDistributed(L.Dense(2)),
    ], name="lstm_pre_head")


def gru_stack_final(seed: int = 0):
    """Two stacked GRUs (reset_after True, then False); the head runs once after the last step."""
    keras = _keras(seed)
    L = keras.layers
    return keras.Sequential([
        keras.Input((None, 3)), L.GRU(12, return_sequences=True), L.GRU(8, reset_after=False),
        L.Dense(4), L.Activation("softmax"),
    ], name="gru_stack_final")


def simplernn_relu(seed: int = 0):
    keras = _keras(seed)
    L = keras.layers
    return keras.Sequential([
        keras.Input((None, 3)), L.SimpleRNN(10, activation="relu", use_bias=False, return_sequences=True),
        L.Dense(1),
    ], name="simplernn_relu")


def rnn_lstmcell_bn(seed: int = 0):
    """keras.layers.RNN around an LSTMCell with a sigmoid cell activation, after BatchNormalization."""
    keras = _keras(seed)
    L = keras.layers
    return keras.Sequential([
        keras.Input((None, 3)), L.BatchNormalization(),
        L.RNN(L.LSTMCell(8, activation="sigmoid"), return_sequences=True), L.Dense(2),
    ], name="rnn_lstmcell_bn")


def functional_lstm(seed: int = 0):
    keras = _keras(seed)
    L = keras.layers
    x = keras.Input((None, 3), name="signal")
    z = L.Dense(6, activation="tanh")(x)
    z = L.LSTM(12, return_sequences=True)(z)
    y = L.Dense(3)(z)
    return keras.Model(x, y, name="functional_lstm")


def cfc_default(seed: int = 0):
    keras = _keras(seed)
    import ncps.keras

    return keras.Sequential([keras.Input((None, 2)), ncps.keras.CfC(16, return_sequences=True),
                             keras.layers.Dense(1)], name="cfc_default")


def cfc_nogate_mixed(seed: int = 0):
    keras = _keras(seed)
    import ncps.keras

    return keras.Sequential([keras.Input((None, 2)),
                             ncps.keras.CfC(12, mode="no_gate", mixed_memory=True, return_sequences=True)],
                            name="cfc_nogate_mixed")


def cfc_wired_pure(seed: int = 0):
    keras = _keras(seed)
    import ncps.keras
    from ncps.wirings import AutoNCP

    return keras.Sequential([keras.Input((None, 2)),
                             ncps.keras.CfC(AutoNCP(14, 2, seed=seed), mode="pure", return_sequences=True)],
                            name="cfc_wired_pure")


def ltc_wired(seed: int = 0):
    keras = _keras(seed)
    import ncps.keras
    from ncps.wirings import AutoNCP

    return keras.Sequential([keras.Input((None, 2)),
                             ncps.keras.LTC(AutoNCP(12, 2, seed=seed), return_sequences=True)], name="ltc_wired")


def tf_keras_lstm_final(seed: int = 0):
    """A legacy tf_keras (Keras 2) model: LSTM returning its last step, then a Dense head."""
    import tf_keras

    tf_keras.utils.set_random_seed(seed)
    L = tf_keras.layers
    return tf_keras.Sequential([L.InputLayer((None, 3)), L.LSTM(8), L.Dense(2)], name="tf_keras_lstm_final")


ZOO = {
    "lstm_pre_head": lstm_pre_head,
    "gru_stack_final": gru_stack_final,
    "simplernn_relu": simplernn_relu,
    "rnn_lstmcell_bn": rnn_lstmcell_bn,
    "functional_lstm": functional_lstm,
    "cfc_default": cfc_default,
    "cfc_nogate_mixed": cfc_nogate_mixed,
    "cfc_wired_pure": cfc_wired_pure,
    "ltc_wired": ltc_wired,
    "tf_keras_lstm_final": tf_keras_lstm_final,
}


def features_of(model) -> int:
    return int(model.inputs[0].shape[-1])


def save(model, folder) -> str:
    """Save in the model's native format: .keras for Keras 3, .h5 for tf_keras."""
    legacy = type(model).__module__.startswith("tf_keras")
    path = f"{folder}/{model.name}.{'h5' if legacy else 'keras'}"
    model.save(path)
    return path
