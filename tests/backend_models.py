"""Small step models for the backend tests, built the way the converter builds them.

A step model maps (x_t, states_{t-1}) to (y_t, states_t). Until the conversion core is the only source,
these builders wrap a Keras cell in a one-step functional model and convert it with TensorFlow's converter,
calibrated on states visited by running the float cell over real trajectories.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

STATE_PREFIX = "s"


def make_cell(kind: str, units: int, n_in: int, seed: int = 0):
    import keras

    keras.utils.set_random_seed(seed)
    if kind == "lstm":
        layer = keras.layers.LSTM(units, return_sequences=True)
    elif kind == "gru":
        layer = keras.layers.GRU(units, return_sequences=True, reset_after=True)
    elif kind == "gru_v1":
        layer = keras.layers.GRU(units, return_sequences=True, reset_after=False)
    elif kind == "simplernn":
        layer = keras.layers.SimpleRNN(units, return_sequences=True)
    elif kind == "relu_rnn":
        layer = keras.layers.SimpleRNN(units, activation="relu", return_sequences=True)
    elif kind.startswith("cfc") or kind == "ltc":
        import ncps.keras
        from ncps.wirings import AutoNCP

        if kind == "cfc":
            layer = ncps.keras.CfC(units, return_sequences=True)
        elif kind == "cfc_nogate":
            layer = ncps.keras.CfC(units, mode="no_gate", return_sequences=True)
        elif kind == "cfc_pure":
            layer = ncps.keras.CfC(units, mode="pure", return_sequences=True)
        elif kind == "cfc_mixed":
            layer = ncps.keras.CfC(units, mixed_memory=True, return_sequences=True)
        else:
            layer = ncps.keras.LTC(AutoNCP(units, max(1, units // 3), seed=seed), return_sequences=True)
    else:
        raise ValueError(kind)
    model = keras.Sequential([keras.Input((None, n_in)), layer])
    return model, layer


def state_sizes(layer) -> list[int]:
    size = layer.cell.state_size
    if isinstance(size, (list, tuple)):
        return [int(s) for s in size]
    return [int(size)]


def flatten(value) -> list:
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in flatten(item)]
    return [value]


def trajectories(n_seq: int, steps: int, n_in: int, seed: int) -> np.ndarray:
    """Smooth, bounded trajectories: sums of sines with random phases plus a little noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(steps)[None, :, None]
    freq = rng.uniform(0.02, 0.3, size=(n_seq, 1, n_in))
    phase = rng.uniform(0, 2 * np.pi, size=(n_seq, 1, n_in))
    amp = rng.uniform(0.3, 1.5, size=(n_seq, 1, n_in))
    x = amp * np.sin(freq * t + phase) + 0.05 * rng.standard_normal((n_seq, steps, n_in))
    return x.astype(np.float32)


def build_step_model(kind: str, units: int, n_in: int, quant: str, out_dir: Path, seed: int = 0) -> Path:
    """Write out_dir/step.tflite and a minimal manifest.json; return out_dir."""
    import keras
    import tensorflow as tf

    model, layer = make_cell(kind, units, n_in, seed)
    cell = layer.cell
    sizes = state_sizes(layer)
    x = keras.Input(batch_shape=(1, n_in), name="x")
    states = [keras.Input(batch_shape=(1, s), name=f"{STATE_PREFIX}{i}") for i, s in enumerate(sizes)]
    single = len(states) == 1 and not kind.startswith("cfc") and kind != "ltc"
    out, new_states = cell(x, states[0] if single else states, training=False)
    new_states = flatten(new_states)
    step = keras.Model(inputs=[x, *states], outputs=[out, *new_states])

    conv = tf.lite.TFLiteConverter.from_keras_model(step)
    if quant != "float32":
        calib = trajectories(4, 40, n_in, seed + 100)
        samples = []
        for seq in calib:
            st = [np.zeros((1, s), np.float32) for s in sizes]
            for t in range(seq.shape[0]):
                xt = seq[t : t + 1]
                samples.append({"x": xt, **{f"{STATE_PREFIX}{i}": s for i, s in enumerate(st)}})
                res = step([xt, *st], training=False)
                st = [np.asarray(r).reshape(1, -1) for r in res[1:]]
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = lambda: iter(samples)
        if quant == "int8":
            conv.inference_input_type = tf.int8
            conv.inference_output_type = tf.int8
            conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        else:
            conv.inference_input_type = tf.int16
            conv.inference_output_type = tf.int16
            conv.target_spec.supported_ops = [
                tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8
            ]
    blob = rename_signature(conv.convert(), len(sizes))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "step.tflite").write_bytes(blob)
    return out_dir


def rename_signature(blob: bytes, n_states: int, prefix: str = "cell") -> bytes:
    """Give a hand-built step model the converter's signature keys: x, y and one key per state.

    TensorFlow names the outputs output_0.. in Keras order (y first, then the states) and the state
    inputs by their Keras input names s0, s1, ...
    """
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    model = schema.ModelT.InitFromPackedBuf(bytearray(blob), 0)
    sig = model.signatureDefs[0]
    for m in sig.inputs:
        name = m.name.decode() if isinstance(m.name, bytes) else m.name
        if name.startswith(STATE_PREFIX):
            m.name = f"{prefix}.s{name[len(STATE_PREFIX):]}"
    for m in sig.outputs:
        name = m.name.decode() if isinstance(m.name, bytes) else m.name
        k = int(name.split("_")[-1])
        m.name = "y" if k == 0 else f"{prefix}.s{k - 1}"
    # Tie each state input's quantization to its output's, as the converter does, so that the state
    # can be fed back byte for byte.
    sub = model.subgraphs[sig.subgraphIndex]
    ins = {(m.name.decode() if isinstance(m.name, bytes) else m.name): m.tensorIndex for m in sig.inputs}
    for m in sig.outputs:
        name = m.name.decode() if isinstance(m.name, bytes) else m.name
        if name in ins and sub.tensors[ins[name]].quantization is not None:
            # the output keeps its own (an activation such as TANH fixes its output scale); the
            # input state takes it
            dst = sub.tensors[ins[name]].quantization
            src = sub.tensors[m.tensorIndex].quantization
            if dst is not None and src.scale is not None and dst.scale is not None:
                dst.scale = np.array(src.scale, dtype=np.float32).copy()
                dst.zeroPoint = np.array(src.zeroPoint, dtype=np.int64).copy()
    builder = flatbuffers.Builder(len(blob) + 1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def run_reference(tflite: bytes | Path, xs: np.ndarray, state_keys: list[str], init_state: dict | None = None):
    """Run the step model in the LiteRT interpreter over xs (steps, features), feeding states back.

    Returns (ys, states) with ys of shape (steps, out) and states a dict key -> (steps, size).
    """
    from edgernn.interpreter import load_interpreter

    interp = load_interpreter(tflite if isinstance(tflite, bytes) else str(tflite))
    runner = interp.get_signature_runner("serving_default")
    details = runner.get_input_details()
    state = {}
    for k in state_keys:
        d = details[k]
        zp = d["quantization_parameters"]["zero_points"]
        fill = int(zp[0]) if len(zp) else 0
        state[k] = np.full(d["shape"], fill, dtype=d["dtype"])
        if init_state is not None:
            state[k] = init_state[k].reshape(d["shape"]).astype(d["dtype"])
    ys, hist = [], {k: [] for k in state_keys}
    for t in range(xs.shape[0]):
        out = runner(x=xs[t].reshape(details["x"]["shape"]).astype(details["x"]["dtype"]), **state)
        ys.append(out["y"].reshape(-1).copy())
        for k in state_keys:
            state[k] = out[k].copy()
            hist[k].append(out[k].reshape(-1).copy())
    return np.stack(ys), {k: np.stack(v) for k, v in hist.items()}


def quantize_inputs(tflite: bytes | Path, xs: np.ndarray) -> np.ndarray:
    from edgernn.interpreter import load_interpreter

    interp = load_interpreter(tflite if isinstance(tflite, bytes) else str(tflite))
    d = interp.get_signature_runner("serving_default").get_input_details()["x"]
    if d["dtype"] == np.float32:
        return xs.astype(np.float32)
    scale = d["quantization_parameters"]["scales"][0]
    zp = d["quantization_parameters"]["zero_points"][0]
    info = np.iinfo(d["dtype"])
    return np.clip(np.round(xs / scale) + zp, info.min, info.max).astype(d["dtype"])
