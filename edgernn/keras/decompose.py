"""Split a Keras model into what runs at every step and what runs once.

A streamable model is a single chain: per-step pre-layers, a stack of one or more recurrent layers,
and a head. The head runs at every step when the last recurrent layer returns sequences, otherwise
once after the last step. Every layer that cannot run one step at a time is refused by name, with
the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from edgernn.errors import UnsupportedLayerError
from edgernn.keras.conv1d import CONV_KINDS, CausalConv, causal_conv

# Layers that are the identity at inference.
INFERENCE_NO_OPS = {
    "Dropout", "SpatialDropout1D", "GaussianNoise", "GaussianDropout", "AlphaDropout",
    "ActivityRegularization", "InputLayer",
}
# Layers that act on the last axis only, so one step sees exactly what it saw in the sequence.
LAST_AXIS_LAYERS = {
    "Dense", "Activation", "ReLU", "LeakyReLU", "ELU", "Softmax", "Rescaling", "BatchNormalization",
    "LayerNormalization", "Normalization", "UnitNormalization",
}
RECURRENT_LAYERS = {"LSTM", "GRU", "SimpleRNN", "RNN", "CfC", "LTC"}
KNOWN_CELLS = {
    "LSTMCell": ("h", "c"),
    "GRUCell": ("h",),
    "SimpleRNNCell": ("h",),
    "CfCCell": ("h",),
    "WiredCfCCell": ("h",),
    "LTCCell": ("v",),
    "MixedMemoryRNN": ("mem", "h"),
}
WHY_NOT = {
    "Bidirectional": "it runs a second RNN backwards from the end, so it needs the future of the sequence",
    "Masking": "it skips time steps by value, while the device runs every step it is given",
    "SeparableConv1D": "it convolves along time, mixing neighbouring steps",
    "DepthwiseConv1D": "it convolves along time, mixing neighbouring steps",
    "Conv1DTranspose": "it convolves along time, mixing neighbouring steps",
    "ConvLSTM1D": "its recurrence convolves over a spatial axis edgernn does not stream",
    "MaxPooling1D": "it pools along time, mixing neighbouring steps",
    "AveragePooling1D": "it pools along time, mixing neighbouring steps",
    "GlobalAveragePooling1D": "it reduces over the whole sequence",
    "GlobalMaxPooling1D": "it reduces over the whole sequence",
    "Attention": "it attends over the whole sequence",
    "AdditiveAttention": "it attends over the whole sequence",
    "MultiHeadAttention": "it attends over the whole sequence",
    "GroupedQueryAttention": "it attends over the whole sequence",
    "Lambda": "it runs arbitrary Python that edgernn cannot split into steps",
    "Flatten": "it merges the time axis into the features",
    "RepeatVector": "it creates time steps from one vector",
    "Permute": "it moves the time axis",
    "Cropping1D": "it drops time steps",
    "ZeroPadding1D": "it adds time steps",
    "UpSampling1D": "it adds time steps",
    "Embedding": "its integer inputs are not the float features edgernn streams",
}


@dataclass
class StepLayer:
    """A layer applied to one step's vector."""

    layer: Any
    role: str  # "pre", "mid" (between two stateful layers), "head-step" or "head-final"
    apply: Callable[[Any, Any], Any]  # (keras_module, tensor) -> tensor
    note: str = ""


@dataclass
class RecurrentLayer:
    layer: Any
    cell: Any
    kind: str
    state_names: list[str]
    state_sizes: list[int]
    return_sequences: bool
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.layer.name

    @property
    def units(self) -> int:
        size = getattr(self.cell, "output_size", None)
        if isinstance(size, int):
            return size
        return int(self.layer.output.shape[-1])

    def public_state_names(self) -> list[str]:
        return [f"{self.name}.{n}" for n in self.state_names]


@dataclass
class Plan:
    model: Any
    flavour: str
    features: int
    steps: int | None
    pre: list[StepLayer]
    recurrent: list[RecurrentLayer | CausalConv]  # the stateful layers, in model order
    head: list[StepLayer]
    head_per_step: bool
    dropped: list[tuple[Any, str]]
    order: list[tuple[str, Any]]  # (role, layer) in model order, dropped layers included
    # Per-step layers between two stateful layers, by the name of the one they follow (Conv1D -> ReLU -> GRU).
    between: dict[str, list[StepLayer]] = field(default_factory=dict)

    @property
    def state_specs(self) -> list[tuple[str, int, RecurrentLayer]]:
        return [
            (name, size, rnn)
            for rnn in self.recurrent
            for name, size in zip(rnn.public_state_names(), rnn.state_sizes)
        ]

    @property
    def output_units(self) -> int:
        return int(self.model.outputs[0].shape[-1])


def _refuse(layer: Any, why: str) -> UnsupportedLayerError:
    return UnsupportedLayerError(f"layer '{layer.name}' ({type(layer).__name__}) cannot stream: {why}")


def _flat_layers(model: Any) -> list[Any]:
    """Layers in order, nested Sequential/functional models opened up."""
    out = []
    for layer in model.layers:
        if hasattr(layer, "layers") and type(layer).__name__ in ("Sequential", "Functional", "Model"):
            out.extend(_flat_layers(layer))
        else:
            out.append(layer)
    return out


def _check_chain(model: Any, layers: list[Any]) -> None:
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        raise UnsupportedLayerError(
            f"model '{model.name}' has {len(model.inputs)} inputs and {len(model.outputs)} outputs; "
            "edgernn streams models with one input sequence and one output"
        )
    if type(model).__name__ == "Sequential":
        return
    previous = None
    for layer in layers:
        if type(layer).__name__ == "InputLayer":
            previous = layer
            continue
        try:
            inbound = layer.input
        except (AttributeError, ValueError):
            raise UnsupportedLayerError(
                f"layer '{layer.name}' is called more than once or on several inputs; "
                "edgernn streams models that are a single chain of layers"
            ) from None
        if isinstance(inbound, (list, tuple)) or previous is None or inbound is not previous.output:
            raise UnsupportedLayerError(
                f"the graph branches at layer '{layer.name}'; edgernn streams models that are a single chain of layers"
            )
        previous = layer


def _cell_of(layer: Any) -> Any:
    return getattr(layer, "cell", None)


def _state_sizes(cell: Any) -> list[int]:
    size = cell.state_size
    if isinstance(size, int):
        return [size]
    flat = []
    for item in size:
        if isinstance(item, int):
            flat.append(item)
        elif hasattr(item, "__iter__"):
            flat.extend(int(v) for v in item)
        else:
            flat.append(int(item))
    return flat


def _recurrent(layer: Any) -> RecurrentLayer:
    kind = type(layer).__name__
    cell = _cell_of(layer)
    if cell is None:
        raise _refuse(layer, "it has no cell edgernn can call one step at a time")
    if getattr(layer, "go_backwards", False):
        raise _refuse(layer, "go_backwards=True reads the sequence from its last step; a stream has only the steps so far")
    if getattr(layer, "time_major", False):
        raise _refuse(layer, "time_major=True is not supported; save the model batch-major")
    if getattr(layer, "return_state", False):
        raise _refuse(layer, "return_state=True returns the states as extra outputs; edgernn keeps them on the device")
    cell_kind = type(cell).__name__
    if cell_kind == "StackedRNNCells":
        names = [f"{i}.{n}" for i, c in enumerate(cell.cells) for n in KNOWN_CELLS.get(type(c).__name__, ("s",) * len(_state_sizes(c)))]
    else:
        names = list(KNOWN_CELLS.get(cell_kind, ()))
    sizes = _state_sizes(cell)
    if len(names) != len(sizes):
        names = ["h"] if len(sizes) == 1 else [f"s{i}" for i in range(len(sizes))]
    notes = []
    if kind in ("RNN",) and cell_kind not in KNOWN_CELLS and cell_kind != "StackedRNNCells":
        notes.append(f"custom cell {cell_kind}: called one step at a time as written")
    for attr in ("dropout", "recurrent_dropout"):
        if float(getattr(cell, attr, 0.0) or 0.0) > 0 or float(getattr(layer, attr, 0.0) or 0.0) > 0:
            notes.append(f"{attr} ignored at inference")
    if getattr(layer, "stateful", False):
        notes.append("stateful: the device keeps the state between calls; edgernn_reset() zeroes it")
    return RecurrentLayer(
        layer=layer,
        cell=cell,
        kind=kind,
        state_names=names,
        state_sizes=sizes,
        return_sequences=bool(getattr(layer, "return_sequences", False)),
        notes=notes,
    )


def _needs_time_axis(layer: Any) -> bool:
    """True when the layer was built to check for a rank-3 (batch, time, features) input."""
    specs = getattr(layer, "input_spec", None)
    specs = specs if isinstance(specs, (list, tuple)) else [specs]
    return any(getattr(spec, "ndim", None) == 3 or getattr(spec, "min_ndim", None) == 3 for spec in specs if spec)


def _call(layer: Any, tensor: Any) -> Any:
    if type(layer).__name__ in ("BatchNormalization", "LayerNormalization", "Normalization"):
        return layer(tensor, training=False)
    return layer(tensor)


def _apply_direct(layer: Any) -> Callable[[Any, Any], Any]:
    if _needs_time_axis(layer):
        return _apply_through_time_axis(layer)

    def apply(module: Any, tensor: Any) -> Any:
        return _call(layer, tensor)

    return apply


def _apply_through_time_axis(layer: Any) -> Callable[[Any, Any], Any]:
    """Apply a layer whose weights were built for (batch, time, features) on a (1, features) step."""

    def apply(module: Any, tensor: Any) -> Any:
        width = int(tensor.shape[-1])
        seq = module.layers.Reshape((1, width))(tensor)
        out = _call(layer, seq)
        return module.layers.Reshape((int(out.shape[-1]),))(out)

    return apply


def _last_axis_ok(layer: Any, rank: int) -> str | None:
    """None when the layer acts on the last axis only, else the reason it does not."""
    kind = type(layer).__name__
    if kind in ("BatchNormalization",):
        axis = layer.axis if isinstance(layer.axis, int) else (layer.axis[0] if len(layer.axis) == 1 else None)
        if axis not in (-1, rank - 1):
            return f"it normalises over axis {layer.axis}, not the features"
    if kind in ("LayerNormalization", "Normalization", "UnitNormalization"):
        axis = getattr(layer, "axis", -1)
        axes = [axis] if isinstance(axis, int) else list(axis or [])
        if any(a not in (-1, rank - 1) for a in axes):
            return f"it normalises over axes {axis}, which include the time axis"
    if kind == "Softmax":
        axis = getattr(layer, "axis", -1)
        if axis not in (-1, rank - 1, [-1]):
            return "it normalises over the time axis"
    return None


def _step_layer(layer: Any, role: str, rank: int, steps: int | None) -> StepLayer | str:
    """A StepLayer, or the reason the layer cannot run per step."""
    kind = type(layer).__name__
    if kind == "TimeDistributed":
        inner = layer.layer
        if type(inner).__name__ not in LAST_AXIS_LAYERS:
            return f"it wraps {type(inner).__name__}, which edgernn does not apply per step"
        return StepLayer(layer=layer, role=role, apply=_apply_direct(inner), note=f"per step: {type(inner).__name__}")
    if kind in LAST_AXIS_LAYERS:
        why = _last_axis_ok(layer, rank)
        if why:
            return why
        apply = _apply_through_time_axis(layer) if kind == "Normalization" and rank == 3 else _apply_direct(layer)
        return StepLayer(layer=layer, role=role, apply=apply)
    if kind == "Reshape":
        target = tuple(layer.target_shape)
        if rank == 2:
            if len(target) == 1:
                return StepLayer(layer=layer, role=role, apply=_apply_direct(layer))
            return "it reshapes the output into more than one axis"
        if len(target) == 2 and target[0] in (-1, steps) and target[0] is not None:
            width = target[1]
            return StepLayer(layer=layer, role=role, apply=lambda module, t, w=width: module.layers.Reshape((w,))(t),
                             note="keeps the time axis")
        return "it changes the time axis or leaves more than one feature axis"
    if kind == "Flatten" and rank == 2:
        return StepLayer(layer=layer, role=role, apply=lambda module, t: t, note="identity on one vector")
    return WHY_NOT.get(kind, "edgernn does not know how to run it one step at a time")


def _as_between(steps: list[StepLayer], order: list[tuple[str, Any]]) -> list[StepLayer]:
    """Per-step layers taken for the head, given role "mid" (in ``order`` too): a stateful layer follows them."""
    moved = {id(step.layer) for step in steps}
    order[:] = [("mid", layer) if id(layer) in moved else (role, layer) for role, layer in order]
    for step in steps:
        step.role = "mid"
    return steps


def decompose(model: Any, flavour: str) -> Plan:
    layers = _flat_layers(model)
    _check_chain(model, layers)
    shape = tuple(model.inputs[0].shape)
    if len(shape) != 3:
        raise UnsupportedLayerError(
            f"model '{model.name}' takes input of shape {shape}; edgernn streams (batch, time, features) sequences"
        )
    steps = shape[1] if shape[1] is None else int(shape[1])
    features = int(shape[2])

    pre, recurrent, head, dropped, order = [], [], [], [], []
    between: dict[str, list[StepLayer]] = {}
    head_per_step = True
    for layer in layers:
        kind = type(layer).__name__
        if kind in INFERENCE_NO_OPS:
            if kind != "InputLayer":
                dropped.append((layer, "identity at inference"))
                order.append(("dropped", layer))
            continue
        if kind == "Bidirectional":
            raise _refuse(layer, WHY_NOT["Bidirectional"])
        if kind in RECURRENT_LAYERS or kind in CONV_KINDS:
            if recurrent and not recurrent[-1].return_sequences:
                raise _refuse(layer, f"it follows '{recurrent[-1].name}', which returns only its last step")
            if head:  # what looked like a per-step head runs between the last stateful layer and this one
                between[recurrent[-1].name] = _as_between(head, order)
                head = []
            rnn = _recurrent(layer) if kind in RECURRENT_LAYERS else causal_conv(layer)
            if isinstance(rnn, str):
                raise _refuse(layer, rnn)
            recurrent.append(rnn)
            order.append(("rnn", layer))
            continue
        if not recurrent:
            role, rank = "pre", 3
        else:
            head_per_step = recurrent[-1].return_sequences
            role, rank = ("head-step", 3) if head_per_step else ("head-final", 2)
        step = _step_layer(layer, role, rank, steps)
        if isinstance(step, str):
            raise _refuse(layer, step)
        (pre if role == "pre" else head).append(step)
        order.append((role, layer))
    if not recurrent:
        raise UnsupportedLayerError(
            f"model '{model.name}' has no recurrent layer (LSTM, GRU, SimpleRNN, RNN, CfC, LTC) "
            "and no causal Conv1D; nothing to stream"
        )
    head_per_step = recurrent[-1].return_sequences
    return Plan(
        model=model, flavour=flavour, features=features, steps=steps, pre=pre, recurrent=recurrent,
        head=head, head_per_step=head_per_step, dropped=dropped, order=order, between=between,
    )
