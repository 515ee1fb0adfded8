"""The fused path: each LSTM becomes one TFLite ``UNIDIRECTIONAL_SEQUENCE_LSTM`` op.

TensorFlow 2.21 turns every Keras 3 LSTM into a ``WHILE`` loop, but still fuses a tf_keras LSTM whose
cell activation is tanh and whose gates are sigmoid. So the model is rebuilt in tf_keras with the same
weights (dropout dropped: it is the identity at inference), for a batch of one and one time step, and
converted with TensorFlow's own converter. The LSTM state lives in the op's two variable tensors
(input activation state and cell state), which TFLite keeps from one invoke to the next: one invoke is
one time step, the way TFLite Micro streams, and ``reset_all_variables()`` starts a new sequence.

``diagnose`` is the one eligibility check that ``inspect``, ``convert`` and ``build`` share.
"""

from __future__ import annotations

import inspect as pyinspect
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgernn.tflite import model as tfl
from edgernn.keras.decompose import Plan, RecurrentLayer
from edgernn.errors import EdgeRNNError

FUSED_OP = "UNIDIRECTIONAL_SEQUENCE_LSTM"
# UNIDIRECTIONAL_SEQUENCE_LSTM inputs 18 and 19: the variable tensors holding h and c between invokes.
ACTIVATION_STATE_INPUT, CELL_STATE_INPUT = 18, 19
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
# Steps the int8 calibration runs at most; whole sequences are always kept.
MAX_CALIBRATION_STEPS = 20000


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
    own = {rnn.name: lstm_obstacle(rnn, quant) for rnn in plan.recurrent}
    if any(why is None for why in own.values()):
        from edgernn import tfenv

        if tfenv.tf_keras() is None:
            own = {name: why or "tf_keras is not installed (the fused model is rebuilt in it)" for name, why in own.items()}
    around = [why for step in [*plan.pre, *(plan.head if plan.head_per_step else [])]
              for why in [_layer_obstacle(step.layer, plan.flavour)] if why]
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


# ---------------------------------------------------------------- flatbuffer facts and edits

def lstm_ops(model) -> list:
    graph = model.subgraphs[0]
    return [op for op in graph.operators or [] if tfl.op_name(model, op.opcodeIndex) == FUSED_OP]


def check_fused_ops(data: bytes, plan: Plan) -> None:
    model = tfl.read(data)
    names = tfl.op_names(model)
    loops = sorted({n for n in names if n in tfl.CONTROL_FLOW_OPS or n.startswith("CUSTOM")})
    count = names.count(FUSED_OP)
    if loops or count != len(plan.recurrent):
        raise EdgeRNNError(
            f"TensorFlow did not fuse the LSTMs: {count} {FUSED_OP} op(s) for {len(plan.recurrent)} LSTM layer(s)"
            + (f", and {', '.join(loops)}" if loops else "") + "; use --mode step"
        )


def keras_lstm_options(data: bytes, plan: Plan) -> bytes:
    """Each LSTM op's LSTMOptions as Keras computes: its cell activation, and no cell clip.

    tf_keras fused every cell as tanh. TensorFlow's converter also sets ``cell_clip`` 10, which Keras
    does not have: a cell state that grows past 10 and comes back then follows another path (measured:
    1.86 relative error in y over 300 steps; 4e-6 without the clip).
    """
    from ai_edge_litert import schema_py_generated as schema

    model = tfl.read(data)
    for op, rnn in zip(lstm_ops(model), plan.recurrent):
        wanted = FLOAT_ACTIVATIONS[activation_name(_cell_attr(rnn, "activation"))]
        op.builtinOptions.fusedActivationFunction = getattr(schema.ActivationFunctionType, wanted)
        op.builtinOptions.cellClip = 0.0
    return tfl.write(model)


def _without_cell_clip(model) -> None:
    for op in lstm_ops(model):
        op.builtinOptions.cellClip = 0.0


def state_tensors(data: bytes, plan: Plan) -> list[tuple[str, int, RecurrentLayer]]:
    """(public state name, tensor index, layer) of every LSTM's h and c variable tensors, in layer order."""
    model = tfl.read(data)
    graph = model.subgraphs[0]
    found = []
    for op, rnn in zip(lstm_ops(model), plan.recurrent):
        for name, slot in (("h", ACTIVATION_STATE_INPUT), ("c", CELL_STATE_INPUT)):
            index = int(op.inputs[slot])
            if index < 0 or not graph.tensors[index].isVariable:
                raise EdgeRNNError(f"the fused op of '{rnn.name}' keeps its {name} state in no variable tensor")
            found.append((f"{rnn.name}.{name}", index, rnn))
    return found


def states_as_io(data: bytes, states: list[tuple[str, int, Any]]) -> bytes:
    """The same model with each variable state tensor also a graph input and output, named in the signature.

    The op still updates the tensor in place; setting it before an invoke and reading it after makes the
    state explicit, which is what tools that want the states as inputs and outputs need.
    """
    model = tfl.read(data)
    graph = model.subgraphs[0]
    sig = model.signatureDefs[0]
    entry_type = type(sig.inputs[0])
    for name, index, _ in states:
        graph.inputs = [*graph.inputs, index]
        graph.outputs = [*graph.outputs, index]
        for side in ("inputs", "outputs"):
            entry = entry_type()
            entry.name = name
            entry.tensorIndex = index
            setattr(sig, side, [*getattr(sig, side), entry])
    return tfl.write(model)


# ---------------------------------------------------------------- int8 calibration on whole sequences

def calibration_sequences(sequences: np.ndarray, limit: int = MAX_CALIBRATION_STEPS) -> np.ndarray:
    """Whole sequences, evenly spaced, at most ``limit`` steps in all (always at least one)."""
    keep = max(1, min(len(sequences), limit // max(1, sequences.shape[1])))
    picks = np.linspace(0, len(sequences) - 1, keep).astype(int)
    return sequences[np.unique(picks)]


def calibrate_on_trajectories(converter: Any, sequences: np.ndarray) -> bytes:
    """Min/max of every tensor over whole sequences, each started from a zero state.

    TFLite's calibrator keeps variable tensors from one invoke to the next and never resets them, so
    feeding the steps of one sequence in order lets the state visit what it visits on the device. A fresh
    calibrator per sequence starts each from zero; the ranges are the union over all sequences. Then the
    cell and hidden ranges are fixed up for the integer kernel (``widen_cell_states``, ``tie_hidden_ranges``).
    """
    from tensorflow.lite.python.optimize import calibrator

    from edgernn import tfenv
    from edgernn.tflite.quantize import calibrate

    def steps(sequence):
        return [{"x": x.reshape(1, -1).astype(np.float32)} for x in sequence]

    with warnings.catch_warnings(), tfenv.native_stderr_captured():
        warnings.simplefilter("ignore")
        # The converter's own pass only yields the model with the LSTM's intermediate tensors; its cell
        # clip (10) goes before the ranges are recorded, so every sequence is calibrated again without it.
        model = tfl.read(calibrate(converter, steps(sequences[0][:1])))
        _without_cell_clip(model)
        first = tfl.write(model)
        ranges = {i: None for i in range(len(model.subgraphs[0].tensors))}
        for sequence in sequences:
            wrapper = calibrator.Calibrator(first)
            data = wrapper.calibrate(lambda s=sequence: iter([[x.reshape(1, -1).astype(np.float32)] for x in s]))
            other = tfl.read(bytes(data))
            for i in ranges:
                r = tfl.get_min_max(other, i)
                if r is not None:
                    old = ranges[i]
                    ranges[i] = r if old is None else (min(old[0], r[0]), max(old[1], r[1]))
    for i, r in ranges.items():
        if r is not None:
            tfl.set_min_max(model, i, *r)
    widen_cell_states(model)
    tie_hidden_ranges(model)
    return tfl.write(model)


# The op's fifth intermediate tensor: the hidden state o * tanh(c) before it is written to the output.
HIDDEN_INTERMEDIATE = 4


def tie_hidden_ranges(model) -> None:
    """Give each LSTM's h state, output and hidden intermediate one range that includes 0.

    The quantizer nudges the output's range to include 0 but not the hidden intermediate's, and the
    integer kernel computes h at the intermediate's scale and writes it at the output's. When h stays
    on one side of 0 the two differ and every output is off (measured: l2r 0.38 on an LSTM whose h stays
    within [0.25, 0.8]; 0.002 once tied).
    """
    for op in lstm_ops(model):
        members = [int(op.inputs[ACTIVATION_STATE_INPUT]), int(op.outputs[0])]
        if op.intermediates is not None and len(op.intermediates) > HIDDEN_INTERMEDIATE:
            members.append(int(op.intermediates[HIDDEN_INTERMEDIATE]))
        ranges = [r for r in (tfl.get_min_max(model, i) for i in members) if r is not None]
        if not ranges:
            continue
        lo = min(0.0, *(r[0] for r in ranges))
        hi = max(0.0, *(r[1] for r in ranges))
        for index in members:
            if tfl.get_min_max(model, index) is not None:
                tfl.set_min_max(model, index, lo, hi)


# The widest cell state range the integer kernel's tanh handles: 6 integer bits.
MAX_CELL_RANGE = 64.0


def widen_cell_states(model) -> None:
    """Give every LSTM cell state a range of at least [-1, 1] and at most [-64, 64].

    The quantizer gives the int16 cell state a power-of-two scale from its range, and the integer kernel
    takes tanh of it with a fixed-point routine that handles 0 to 6 integer bits only. A cell state that
    stays within ±0.5 gets scale 2^-16 (-1 integer bits), and the kernel's output is then garbage
    (saturated from the first step; TensorFlow's own converter makes the same model). Measured on a
    stacked LSTM whose second cell state stays within ±0.3: l2r 3.0, and 0.015 once widened. A cell state
    beyond ±64 would need 7 integer bits: the int8 model then clips it at 64 (cell_clip), where tanh is 1.
    """
    for op in lstm_ops(model):
        index = int(op.inputs[CELL_STATE_INPUT])
        found = tfl.get_min_max(model, index)
        if found is None:
            continue
        lo, hi = min(found[0], -1.0), max(found[1], 1.0)
        if max(-lo, hi) > MAX_CELL_RANGE:
            lo, hi = max(lo, -MAX_CELL_RANGE), min(hi, MAX_CELL_RANGE)
            op.builtinOptions.cellClip = MAX_CELL_RANGE
        tfl.set_min_max(model, index, lo, hi)
