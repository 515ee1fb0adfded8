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


def lstm_dense(units: int, features: int, outputs: int, name: str, seed: int = 0):
    """An LSTM over every step, then a per-step Dense head."""
    keras = _keras(seed)
    L = keras.layers
    return keras.Sequential([keras.Input((None, features)), L.LSTM(units, return_sequences=True),
                             L.Dense(outputs)], name=name)


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


def tanh_cfc(seed: int = 0):
    """Dense(6, tanh) before a CfC on an AutoNCP wiring: the TANH's fixed output scale meets the CONCATENATION of
    x and the state, so both quantizers put a requantizing QUANTIZE between them."""
    keras = _keras(seed)
    import ncps.keras
    from ncps.wirings import AutoNCP

    return keras.Sequential([keras.Input((None, 3)), keras.layers.Dense(6, activation="tanh"),
                             ncps.keras.CfC(AutoNCP(10, 2, seed=seed), return_sequences=True)], name="tanh_cfc")


def ltc_wired(seed: int = 0):
    keras = _keras(seed)
    import ncps.keras
    from ncps.wirings import AutoNCP

    return keras.Sequential([keras.Input((None, 2)),
                             ncps.keras.LTC(AutoNCP(12, 2, seed=seed), return_sequences=True)], name="ltc_wired")


def ltc_dense(seed: int = 0):
    """LTC on an AutoNCP(16, 2) wiring over 6 inputs, then Dense(1): the board tests' LTC. Its step model
    has a quantized SUM (so LiteRT's builtin kernels are its oracle) and ends in an int8 FULLY_CONNECTED."""
    keras = _keras(seed)
    import ncps.keras
    from ncps.wirings import AutoNCP

    return keras.Sequential([keras.Input((None, 6)),
                             ncps.keras.LTC(AutoNCP(16, 2, seed=seed), return_sequences=True),
                             keras.layers.Dense(1)], name="ltc_dense")


def tf_keras_lstm_final(seed: int = 0):
    """A legacy tf_keras (Keras 2) model: LSTM returning its last step, then a Dense head."""
    import tf_keras

    tf_keras.utils.set_random_seed(seed)
    L = tf_keras.layers
    return tf_keras.Sequential([L.InputLayer((None, 3)), L.LSTM(8), L.Dense(2)], name="tf_keras_lstm_final")


def gap8_model(kind: str):
    """The GAP8 tests' and benches' models, an RNN over 6 inputs then Dense(1), keras seed 0, and their input count:
    LSTM(64) (kinds "lstm64..."), GRU(16) ("gru..."), or a CfC ("cfc...") or LTC (else) on AutoNCP(16, 2)."""
    import keras

    keras.utils.set_random_seed(0)
    n_in = 6
    if kind.startswith("lstm64"):
        rnn = keras.layers.LSTM(64, return_sequences=True)
    elif kind.startswith("gru"):
        rnn = keras.layers.GRU(16, return_sequences=True)
    else:
        import ncps.keras
        from ncps.wirings import AutoNCP

        cell = ncps.keras.CfC if kind.startswith("cfc") else ncps.keras.LTC
        rnn = cell(AutoNCP(16, 2, seed=0), return_sequences=True)
    return keras.Sequential([keras.Input((None, n_in)), rnn, keras.layers.Dense(1)], name=kind.split("_")[0]), n_in


# ---- fused UNIDIRECTIONAL_SEQUENCE_LSTM step models, as the converter's fused mode lays them out ----

FUSED_FEATURES = 3


def fused_lstm(time: int, units: int, sequences: bool, dense_before: bool, dense_after: bool,
               use_bias: bool = True, kernel_std: float | None = None, seed: int = 0):
    """Input "x" of batch 1, an LSTM, Dense layers around it; the last layer is named "y"."""
    from edgernn.tfenv import tf_keras

    K = tf_keras()
    K.utils.set_random_seed(seed)
    x = K.layers.Input(batch_shape=(1, time, FUSED_FEATURES), name="x")
    h = K.layers.Dense(5, name="pre")(x) if dense_before else x
    init = K.initializers.RandomNormal(stddev=kernel_std) if kernel_std else "glorot_uniform"
    h = K.layers.LSTM(units, return_sequences=sequences, use_bias=use_bias, kernel_initializer=init,
                      name="lstm" if dense_after else "y")(h)
    if dense_after:
        h = K.layers.Dense(4, name="y")(h)
    return K.Model(x, h)


def write_fused_lstm(folder, model, quant: str, time: int, calib_offset: float = 0.0, seed: int = 0):
    """step.tflite + a manifest whose states are the LSTM's variable tensors, as the converter's
    fused mode writes them ("<layer>.h", "<layer>.c", variable, tensor index)."""
    import contextlib
    import io
    import json

    from edgernn.backend.reader import read_tflite
    from edgernn.errors import EdgeRNNError
    from edgernn.tfenv import native_stderr_captured, tensorflow

    tf = tensorflow()
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if quant == "int8":
        rng = np.random.default_rng(seed)
        # an offset of constant sign per sequence lets the cell integrate to larger values
        shape = (1, time, FUSED_FEATURES)
        calib = [(rng.normal(0.0, 1.0, shape) + rng.choice([-calib_offset, calib_offset], (1, 1, FUSED_FEATURES)))
                 .astype(np.float32) for _ in range(32)]
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: ([c] for c in calib)
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
    with native_stderr_captured(), contextlib.redirect_stdout(io.StringIO()):
        blob = converter.convert()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "step.tflite").write_bytes(blob)
    try:
        graph = read_tflite(blob)
    except EdgeRNNError:      # no single subgraph (a WHILE loop): the backend's own refusal is then under test
        graph = None
    states = []
    for op in graph.operators if graph else []:
        if op.op == "UNIDIRECTIONAL_SEQUENCE_LSTM":
            for suffix, index in (("h", op.inputs[18]), ("c", op.inputs[19])):
                t = graph.tensors[index]
                scale, zp = t.qparams()
                states.append({"name": f"lstm.{suffix}", "layer": "lstm", "variable": True, "tensor": index,
                               "shape": list(t.shape), "dtype": t.dtype, "size": t.size,
                               "scale": scale, "zero_point": zp})
    (folder / "manifest.json").write_text(json.dumps({"quant": quant, "mode": "fused", "states": states,
                                                      "state_feedback": {}}))
    return folder


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
