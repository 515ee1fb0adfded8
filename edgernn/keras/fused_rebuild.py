"""The fused path: each LSTM becomes one TFLite ``UNIDIRECTIONAL_SEQUENCE_LSTM`` op.

TensorFlow 2.21 turns every Keras 3 LSTM into a ``WHILE`` loop, but still fuses a tf_keras LSTM whose
cell activation is tanh and whose gates are sigmoid. So the model is rebuilt in tf_keras with the same
weights (dropout dropped: it is the identity at inference), for a batch of one and one time step, and
converted with TensorFlow's own converter. The LSTM state lives in the op's two variable tensors
(input activation state and cell state), which TFLite keeps from one invoke to the next: one invoke is
one time step, the way TFLite Micro streams, and ``reset_all_variables()`` starts a new sequence.

``diagnose`` is the one eligibility check that ``inspect``, ``convert`` and ``build`` share. What TensorFlow
makes of the rebuilt model (the fused ops, their state tensors, their calibration) is ``edgernn.tflite.sequence_lstm``.
"""

from __future__ import annotations

import inspect as pyinspect
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgernn.keras.decompose import Plan, RecurrentLayer
from edgernn.errors import EdgeRNNError

# Keras cell activation -> LSTMOptions.fused_activation_function that computes the same function.
# TFLite's float kernel applies it to the cell input and to c before the output gate, as Keras does.
# SIGN_BIT has no Keras counterpart. NONE would be Keras' "linear", but TFLite's float kernel does not
# compute the identity with it (measured: 0.78 relative error), so linear stays on the step path.
# The integer kernel applies tanh whatever the option says.
FLOAT_ACTIVATIONS = {"tanh": "TANH", "relu": "RELU", "relu6": "RELU6", "hard_tanh": "RELU_N1_TO_1"}
INT8_ACTIVATIONS = {"tanh": "TANH"}
# Per-step layers the fused model rebuilds in tf_keras (class name, or TimeDistributed around one).
REBUILT_LAYERS = {"Dense", "Activation", "ReLU", "LeakyReLU", "ELU", "Softmax", "Rescaling",
                  "BatchNormalization", "LayerNormalization"}


@dataclass
class RNNPath:
    """The path one recurrent layer takes, and why."""

    layer: str
    kind: str
    path: str  # "fused" or "step"
    why: str

    def line(self) -> str:
        return f"{self.layer} ({self.kind}): {self.path}" + (f", because {self.why}" if self.path == "step" else "")

    def as_dict(self) -> dict:
        return {"layer": self.layer, "class": self.kind, "path": self.path, "why": self.why}


@dataclass
class Diagnosis:
    mode: str  # what was asked: auto, step or fused
    fused: bool  # what the model gets
    paths: list[RNNPath]

    def lines(self) -> list[str]:
        return [p.line() for p in self.paths]


def activation_name(value: Any) -> str:
    if isinstance(value, str):
        return value
    name = getattr(value, "__name__", None) or type(value).__name__
    return str(name)


def _cell_attr(rnn: RecurrentLayer, name: str, default: Any = None) -> Any:
    return getattr(rnn.cell, name, getattr(rnn.layer, name, default))


def lstm_obstacle(rnn: RecurrentLayer, quant: str) -> str | None:
    """None when this recurrent layer can be one fused op, else the exact attribute that stops it."""
    if not hasattr(rnn, "cell"):  # a causal Conv1D (edgernn/keras/conv1d.py)
        return (f"{rnn.kind} keeps its last inputs as a state, which only the step path keeps "
                "(the fused model holds LSTM ops only)")
    cell_kind = type(rnn.cell).__name__
    if cell_kind != "LSTMCell" or rnn.kind not in ("LSTM", "RNN"):
        what = rnn.kind if rnn.kind != "RNN" else f"RNN({cell_kind})"
        return f"{what} has no fused TFLite op; only LSTM has one (UNIDIRECTIONAL_SEQUENCE_LSTM)"
    dtype = str(getattr(rnn.cell, "dtype", "float32") or "float32")
    if dtype != "float32":
        return f"dtype={dtype}: the fused op is converted from float32 weights"
    recurrent = activation_name(_cell_attr(rnn, "recurrent_activation"))
    if recurrent != "sigmoid":
        return f"recurrent_activation={recurrent}: the fused op's gates are sigmoid"
    activation = activation_name(_cell_attr(rnn, "activation"))
    if activation == "linear":
        return ("activation=linear: the fused op's NONE activation does not compute the identity in "
                "TFLite's kernel")
    if activation not in FLOAT_ACTIVATIONS:
        return (f"activation={activation}: the fused op's cell activation (LSTMOptions.fused_activation_function) "
                f"can only be {', '.join(FLOAT_ACTIVATIONS)}")
    if quant == "int16":
        return "TFLite's fused LSTM has no 16x8 quantization"
    if quant == "int8" and activation not in INT8_ACTIVATIONS:
        return f"activation={activation}: TFLite's int8 fused LSTM kernel applies tanh only"
    return None


def _layer_obstacle(layer: Any, flavour: str) -> str | None:
    kind = type(layer).__name__
    inner = type(layer.layer).__name__ if kind == "TimeDistributed" else kind
    if inner not in REBUILT_LAYERS:
        return f"layer '{layer.name}' ({kind}) is not one edgernn rebuilds in tf_keras for the fused model"
    if flavour != "tf_keras":
        from edgernn import tfenv

        if tfenv.tf_keras() is None:
            return "tf_keras is not installed (the fused model is rebuilt in it)"
        _, problem = tf_keras_config(layer.layer if kind == "TimeDistributed" else layer)
        if problem:
            return f"layer '{layer.name}' ({kind}) {problem}"
    return None


# Keras 3 config keys tf_keras lacks: dropped when they hold these (the behaviour tf_keras has), else refused.
KERAS3_ONLY_DEFAULTS = {"quantization_config": None, "renorm": False, "renorm_clipping": None,
                        "renorm_momentum": 0.99, "rms_scaling": False, "synchronized": False}
KERAS3_RENAMED = {"negative_slope": "alpha"}  # LeakyReLU
_WEIGHT_SETTINGS = ("_initializer", "_regularizer", "_constraint")


def tf_keras_config(layer: Any) -> tuple[dict, str | None]:
    """A Keras 3 layer's config for the tf_keras class of the same name, or the key that has no counterpart."""
    from edgernn import tfenv

    cls = getattr(tfenv.tf_keras().layers, type(layer).__name__)
    accepted = set(pyinspect.signature(cls.__init__).parameters)
    config = {}
    for key, value in layer.get_config().items():
        if key in ("dtype", "trainable", "name") or key.endswith(_WEIGHT_SETTINGS):
            continue
        if key not in accepted and key in KERAS3_RENAMED and KERAS3_RENAMED[key] in accepted:
            config[KERAS3_RENAMED[key]] = value
        elif key not in accepted:
            if key in KERAS3_ONLY_DEFAULTS and value == KERAS3_ONLY_DEFAULTS[key]:
                continue
            return config, f"has {key}={value!r}, which tf_keras' {type(layer).__name__} cannot express"
        elif isinstance(value, dict):
            return config, f"has a custom {key} tf_keras cannot rebuild"
        else:
            config[key] = value
    return config, None


def diagnose(plan: Plan, quant: str, mode: str = "auto") -> Diagnosis:
    """The path of every recurrent layer: all fused, or all step with each layer's reason.

    A model is fused only when every recurrent layer can be, and every per-step layer around them can be
    rebuilt in tf_keras: one step model holds either fused ops or step cells, never both.
    """
    if not plan.recurrent:   # a stateless per-frame model: one step model of its own layers, nothing to fuse
        if mode == "fused":
            raise EdgeRNNError("--mode fused is not possible for this model (it has no LSTM; it is a stateless "
                               "per-frame model); use --mode auto or step")
        return Diagnosis(mode=mode, fused=False, paths=[])
    own = {rnn.name: lstm_obstacle(rnn, quant) for rnn in plan.recurrent}
    if any(why is None for why in own.values()):
        from edgernn import tfenv

        if tfenv.tf_keras() is None:
            own = {name: why or "tf_keras is not installed (the fused model is rebuilt in it)" for name, why in own.items()}
    around = [why for step in [*plan.pre, *(plan.head if plan.head_per_step else [])]
              for why in [_layer_obstacle(step.layer, plan.flavour)] if why]
    if plan.branched:
        around.insert(0, "the per-frame front end branches, and the fused model is rebuilt in tf_keras as a chain")
    around += [f"layer '{step.layer.name}' ({type(step.layer).__name__}) sits between two RNN layers, "
               "where only the step path runs per-step layers" for steps in plan.between.values() for step in steps]
    blocked = [name for name, why in own.items() if why]
    fused = mode != "step" and not blocked and not around
    paths = []
    for rnn in plan.recurrent:
        kind = rnn.kind if rnn.kind != "RNN" else f"RNN({type(rnn.cell).__name__})"
        if fused:
            paths.append(RNNPath(rnn.name, kind, "fused", "one UNIDIRECTIONAL_SEQUENCE_LSTM op; state in its variable tensors"))
        elif mode == "step":
            paths.append(RNNPath(rnn.name, kind, "step", "--mode step"))
        elif own[rnn.name]:
            paths.append(RNNPath(rnn.name, kind, "step", own[rnn.name]))
        elif around:
            paths.append(RNNPath(rnn.name, kind, "step", around[0]))
        else:
            others = ", ".join(f"'{n}'" for n in blocked)
            paths.append(RNNPath(rnn.name, kind, "step",
                                 f"{others} cannot be fused, and a model is fused only when every RNN layer can"))
    diagnosis = Diagnosis(mode=mode, fused=fused, paths=paths)
    if mode == "fused" and not fused:
        reasons = "; ".join(f"{p.layer}: {p.why}" for p in paths)
        raise EdgeRNNError(f"--mode fused is not possible for this model ({reasons}); use --mode auto or step")
    return diagnosis


# ---------------------------------------------------------------- the tf_keras twin

def _twin_of(layer: Any, tk: Any, source_flavour: str) -> Any:
    """A tf_keras layer computing what ``layer`` computes on the last axis, weights not yet set."""
    if type(layer).__name__ == "TimeDistributed":
        layer = layer.layer
    kind = type(layer).__name__
    cls = getattr(tk.layers, kind)
    if source_flavour == "tf_keras":
        config = layer.get_config()
    else:
        config, problem = tf_keras_config(layer)
        if problem:
            raise EdgeRNNError(f"layer '{layer.name}' ({kind}) {problem}; use --mode step")
    config["name"] = f"{layer.name}_twin"
    return cls.from_config(config), layer


def _lstm_twin(rnn: RecurrentLayer, tk: Any) -> tuple[Any, list[np.ndarray]]:
    cell = rnn.cell
    weights = [np.asarray(w) for w in cell.get_weights()]
    units = int(cell.units)
    if not getattr(cell, "use_bias", True):
        weights = weights[:2] + [np.zeros(4 * units, np.float32)]
    # tf_keras fuses only tanh; another cell activation is written into the op's options afterwards.
    layer = tk.layers.LSTM(units, activation="tanh", recurrent_activation="sigmoid", use_bias=True,
                           return_sequences=True, unroll=False, name=f"{rnn.name}_fused")
    return layer, weights[:3]


def build_fused_keras(plan: Plan, features: int) -> Any:
    """The tf_keras model x[1, F] -> y[1, units]: pre-layers, one LSTM per layer, per-step head."""
    from edgernn import tfenv

    tk = tfenv.tf_keras()
    if tk is None:
        raise EdgeRNNError("the fused path rebuilds the model in tf_keras: install it (pip install tf-keras)")
    x = tk.Input(batch_shape=(1, features), name="x")
    z = tk.layers.Reshape((1, features), name="x_sequence")(x)
    pending = []
    steps_around = [*plan.pre]
    for step in steps_around:
        twin, source = _twin_of(step.layer, tk, plan.flavour)
        z = twin(z)
        pending.append((twin, source.get_weights()))
    for rnn in plan.recurrent:
        twin, weights = _lstm_twin(rnn, tk)
        z = twin(z)
        pending.append((twin, weights))
    if plan.head_per_step:
        for step in plan.head:
            twin, source = _twin_of(step.layer, tk, plan.flavour)
            z = twin(z)
            pending.append((twin, source.get_weights()))
    y = tk.layers.Reshape((int(z.shape[-1]),), name="y")(z)
    model = tk.Model(x, y, name="edgernn_fused")
    for twin, weights in pending:
        try:
            twin.set_weights(weights)
        except ValueError as exc:
            raise EdgeRNNError(f"cannot give the tf_keras twin of '{twin.name[:-5]}' its weights ({exc})") from None
    return model


def lstm_activations(plan: Plan) -> list[str]:
    """The LSTMOptions activation (a TFLite ActivationFunctionType name) of each LSTM, in layer order."""
    return [FLOAT_ACTIVATIONS[activation_name(_cell_attr(rnn, "activation"))] for rnn in plan.recurrent]
