"""Split a Keras model into what runs at every step and what runs once.

A streamable model is a single chain: per-step pre-layers, a stack of one or more recurrent layers,
and a head. The head runs at every step when the last recurrent layer returns sequences, otherwise
once after the last step. Every layer that cannot run one step at a time is refused by name, with
the reason.

A step is a vector of features, or a frame (H, W, C) when the input is (batch, time, H, W, C): then
per-frame layers (convolutions, pooling, flatten) before the first recurrent layer turn each frame into
the vector the recurrent layer reads, inside the step model.

A model with no recurrent layer at all (a CNN of per-frame layers, on (batch, H, W, C) or under TimeDistributed on
(batch, time, H, W, C)) is a stateless per-frame model: its step model is its own graph on one frame, branches
(Add, Concatenate) included, with no state inputs or outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from edgernn.errors import UnsupportedLayerError
from edgernn.keras.conv1d import CONV_KINDS, CausalConv, causal_conv

# Layers that are the identity at inference.
INFERENCE_NO_OPS = {
    "Dropout", "SpatialDropout1D", "GaussianNoise", "GaussianDropout", "AlphaDropout",
    "ActivityRegularization", "InputLayer", "SpatialDropout2D",
}
# Layers that act on the last axis only, so one step sees exactly what it saw in the sequence.
LAST_AXIS_LAYERS = {
    "Dense", "Activation", "ReLU", "LeakyReLU", "ELU", "Softmax", "Rescaling", "BatchNormalization",
    "LayerNormalization", "Normalization", "UnitNormalization",
}
# Layers that act on one frame (H, W, C), so one step sees exactly what it saw in the sequence when they keep
# the time axis (wrapped in TimeDistributed, or plain where Keras applies them over the leading axes).
FRAME_LAYERS = {
    "Conv2D", "DepthwiseConv2D", "SeparableConv2D", "MaxPooling2D", "AveragePooling2D", "GlobalAveragePooling2D",
    "GlobalMaxPooling2D", "Flatten", "Reshape",
}
CONV_LAYERS = {"Conv2D", "DepthwiseConv2D", "SeparableConv2D"}
# Layers that join the branches of a per-frame graph, element by element or along the channels.
MERGE_LAYERS = {"Add", "Concatenate"}
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
    "Conv3D": "it convolves along time, mixing neighbouring frames",
    "Conv3DTranspose": "it convolves along time, mixing neighbouring frames",
    "MaxPooling3D": "it pools along time, mixing neighbouring frames",
    "AveragePooling3D": "it pools along time, mixing neighbouring frames",
    "GlobalAveragePooling3D": "it reduces over the whole sequence",
    "GlobalMaxPooling3D": "it reduces over the whole sequence",
    "ConvLSTM2D": "its state is a convolved frame; edgernn streams recurrent layers whose state is a vector",
    "ConvLSTM3D": "its state is a convolved volume; edgernn streams recurrent layers whose state is a vector",
}


@dataclass
class StepLayer:
    """A layer applied to one step's vector."""

    layer: Any
    role: str  # "pre", "mid" (between two stateful layers), "head-step" or "head-final"
    apply: Callable[[Any, Any], Any]  # (keras_module, tensor) -> tensor
    note: str = ""
    shape_in: tuple[int, ...] = ()  # one step's shape (no batch, no time axis) before and after the layer
    shape_out: tuple[int, ...] = ()


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
    input_shape: tuple[int, ...]  # one step: (features,) or a frame (H, W, C)
    steps: int | None
    pre: list[StepLayer]
    recurrent: list[RecurrentLayer | CausalConv]  # the stateful layers, in model order
    head: list[StepLayer]
    head_per_step: bool
    dropped: list[tuple[Any, str]]
    order: list[tuple[str, Any]]  # (role, layer) in model order, dropped layers included
    # Per-step layers between two stateful layers, by the name of the one they follow (Conv1D -> ReLU -> GRU).
    between: dict[str, list[StepLayer]] = field(default_factory=dict)
    # A stateless per-frame model: False when its input has no time axis ((batch, H, W, C) or (batch, features)),
    # so that each frame of a sequence is one call of the model.
    timed: bool = True
    # The per-frame graph branches (Add, Concatenate): the step model is traced through the model's own graph.
    branched: bool = False

    @property
    def stateless(self) -> bool:
        return not self.recurrent

    @property
    def state_specs(self) -> list[tuple[str, int, RecurrentLayer]]:
        return [
            (name, size, rnn)
            for rnn in self.recurrent
            for name, size in zip(rnn.public_state_names(), rnn.state_sizes)
        ]

    @property
    def features(self) -> int:
        """The element count of one step's input."""
        return int(np.prod(self.input_shape))

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


def _axes(layer: Any, default: Any = -1) -> list:
    """A normalization layer's ``axis`` as a list (Keras 3 keeps an int, tf_keras a list)."""
    axis = getattr(layer, "axis", default)
    return [axis] if isinstance(axis, int) else list(axis or [])


def _needs_time_axis(layer: Any, rank: int = 3) -> bool:
    """True when the layer was built to check for the sequence's rank (batch and time axes included), or holds its
    axes counted from the front of it (tf_keras' LayerNormalization keeps ``axis=[2]``, not -1)."""
    axes = _axes(layer, None) if type(layer).__name__ == "LayerNormalization" else []
    if any(isinstance(a, int) and a > 0 for a in axes):
        return True
    specs = getattr(layer, "input_spec", None)
    specs = specs if isinstance(specs, (list, tuple)) else [specs]
    return any(getattr(spec, "ndim", None) == rank or getattr(spec, "min_ndim", None) == rank
               for spec in specs if spec)


class layer_norm_without_neg:
    """While active, a step model traced computes each plain LayerNormalization as ``_layer_norm_without_neg``:
    what makes it quantizable in 16x8 (--quant int16 and auto, as ``ltc_without_division`` for an LTC). Outside
    it, Keras' own layer (an int8 step model keeps its NEG in float and its SQUARED_DIFFERENCE)."""

    active = False

    def __init__(self, active: bool = True):
        self.on, self.before = active, False

    def __enter__(self):
        self.before = layer_norm_without_neg.active
        layer_norm_without_neg.active = self.before or self.on
        return self

    def __exit__(self, *exc):
        layer_norm_without_neg.active = self.before
        return False


def _call(layer: Any, tensor: Any) -> Any:
    if (type(layer).__name__ == "LayerNormalization" and layer_norm_without_neg.active
            and _plain_layer_norm(layer)):
        return _layer_norm_without_neg(layer, tensor)
    if type(layer).__name__ in ("BatchNormalization", "LayerNormalization", "Normalization"):
        return layer(tensor, training=False)
    return layer(tensor)


def _plain_layer_norm(layer: Any) -> bool:
    """A Keras 3 LayerNormalization over one axis, the last (``_last_axis_ok``), without RMS scaling: what
    ``_layer_norm_without_neg`` computes."""
    return (type(layer).__module__.startswith("keras.") and not getattr(layer, "rms_scaling", False)
            and len(_axes(layer)) == 1)


def _layer_norm_without_neg(layer: Any, x: Any) -> Any:
    """Keras' LayerNormalization, ``x * inv + (beta - mean * inv)`` with ``inv = gamma * rsqrt(var + eps)``,
    written ``d * inv + beta`` with ``d = x - mean`` and the variance ``mean(d * d)``: the same value, within float32
    rounding, in ops that TF quantizes to int8 and to 16x8 alike and LiteRT runs in both (MEAN, SUB, MUL, RSQRT,
    ADD). Keras' own form has a NEG, which TF's 16x8 quantizer has no form of (and its int8 one leaves in float),
    and a SQUARED_DIFFERENCE, which LiteRT has no int16 kernel of; so int16 and --quant auto could not have it."""
    import keras

    ops = keras.ops
    mean = ops.mean(x, axis=-1, keepdims=True)
    d = x - mean
    inv = ops.rsqrt(ops.mean(d * d, axis=-1, keepdims=True) + layer.epsilon)
    if layer.scale:
        inv = inv * layer.gamma
    y = d * inv
    if layer.center:
        y = y + layer.beta
    return y


def _apply_direct(layer: Any, rank: int = 3) -> Callable[[Any, Any], Any]:
    if rank > 2 and _needs_time_axis(layer, rank):
        return _apply_through_time_axis(layer)

    def apply(module: Any, tensor: Any) -> Any:
        return _call(layer, tensor)

    return apply


def _apply_through_time_axis(layer: Any) -> Callable[[Any, Any], Any]:
    """Apply a layer whose weights were built for (batch, time, ...) on one (1, ...) step."""

    def apply(module: Any, tensor: Any) -> Any:
        step = tuple(int(d) for d in tensor.shape[1:])
        seq = module.layers.Reshape((1, *step))(tensor)
        out = _call(layer, seq)
        return module.layers.Reshape(tuple(int(d) for d in out.shape[2:]))(out)

    return apply


def _apply_frame_twin(layer: Any) -> Callable[[Any, Any], Any]:
    """A plain BatchNormalization built on (batch, time, H, W, C) insists on rank 5, and one step is a rank-4
    frame. Through a reshape to (1, 1, H, W, C) it would compute the same, but the reshape stands between it and the
    convolution before it, and TFLite's converter folds a batch norm into a convolution only when nothing does.
    So the step model holds its twin built for one frame, with the trained layer's weights."""

    def apply(module: Any, tensor: Any) -> Any:
        config = {**layer.get_config(), "axis": -1, "name": f"{layer.name}_frame"}
        twin = type(layer).from_config(config)
        twin.build(tuple(tensor.shape))
        twin.set_weights(layer.get_weights())
        return twin(tensor, training=False)

    return apply


def _last_axis_ok(layer: Any, rank: int) -> str | None:
    """None when the layer acts on the last axis only, else the reason it does not."""
    kind = type(layer).__name__
    if kind in ("BatchNormalization",):
        axis = layer.axis if isinstance(layer.axis, int) else (layer.axis[0] if len(layer.axis) == 1 else None)
        if axis not in (-1, rank - 1):
            return f"it normalises over axis {layer.axis}, not the features"
    if kind in ("LayerNormalization", "Normalization", "UnitNormalization"):
        axes = _axes(layer)
        if any(a not in (-1, rank - 1) for a in axes):
            return f"it normalises over axes {getattr(layer, 'axis', -1)}, which include the time axis"
    if kind == "Softmax":
        axis = getattr(layer, "axis", -1)
        if axis not in (-1, rank - 1, [-1]):
            return "it normalises over the time axis"
    return None


def _frame_obstacle(layer: Any) -> str | None:
    """None when a per-frame layer computes what TFLite's NHWC kernels compute, else why not."""
    fmt = getattr(layer, "data_format", None) or "channels_last"
    if fmt != "channels_last":
        return f"data_format={fmt}: edgernn streams channels_last frames (TFLite's layout)"
    groups = int(getattr(layer, "groups", 1) or 1)
    if type(layer).__name__ in CONV_LAYERS and groups != 1:
        return f"groups={groups}: grouped convolutions are not supported"
    return None


def _keeps_time(layer: Any, steps: int | None) -> bool:
    """True when the layer's output still has the input's time axis (so it acted on each step alone)."""
    try:
        out = tuple(layer.output.shape)
    except (AttributeError, ValueError):
        return True  # no symbolic output to check; the float self-check in convert still holds the result
    return len(out) >= 3 and out[1] == steps


def _reshape_step(layer: Any, role: str, rank: int, steps: int | None, shape: tuple[int, ...]) -> StepLayer | str:
    target = tuple(layer.target_shape)
    if rank == 2:
        if len(target) == 1:
            return StepLayer(layer=layer, role=role, apply=_apply_direct(layer))
        return "it reshapes the output into more than one axis"
    if len(target) < 2 or target[0] not in (-1, steps) or target[0] is None:
        return "it changes the time axis"
    per_step = target[1:]
    if -1 not in per_step and int(np.prod(per_step)) != int(np.prod(shape)):
        return f"it regroups the time axis (each step has {int(np.prod(shape))} values, the target step {per_step})"
    if len(per_step) > 1 and role != "pre":
        return "it leaves more than one feature axis after the recurrent layers"
    return StepLayer(layer=layer, role=role, apply=lambda module, t, p=per_step: module.layers.Reshape(p)(t),
                     note="keeps the time axis")


def _step_layer(layer: Any, role: str, rank: int, steps: int | None,
                shape: tuple[int, ...] = ()) -> StepLayer | str:
    """A StepLayer, or the reason the layer cannot run per step. ``rank`` is the whole tensor's (batch and
    time axes included, 2 after a last-step-only RNN), ``shape`` one step's."""
    kind = type(layer).__name__
    if kind == "TimeDistributed":
        inner = layer.layer
        inner_kind = type(inner).__name__
        if inner_kind in FRAME_LAYERS and role == "pre":
            why = _frame_obstacle(inner)
            if why:
                return f"it wraps {inner_kind} with {why}"
            # the inner layer was built for one frame (batch, H, W, C): the step's own tensor
            return StepLayer(layer=layer, role=role, apply=_apply_direct(inner, 0), note=f"per frame: {inner_kind}")
        if inner_kind not in LAST_AXIS_LAYERS:
            return f"it wraps {inner_kind}, which edgernn does not apply per step"
        return StepLayer(layer=layer, role=role, apply=_apply_direct(inner), note=f"per step: {inner_kind}")
    if kind in LAST_AXIS_LAYERS:
        why = _last_axis_ok(layer, rank)
        if why:
            return why
        if kind == "BatchNormalization" and rank > 3 and _needs_time_axis(layer, rank):
            return StepLayer(layer=layer, role=role, apply=_apply_frame_twin(layer), note="per frame (folded where it "
                             "follows a convolution)")
        apply = _apply_through_time_axis(layer) if kind == "Normalization" and rank == 3 else _apply_direct(layer, rank)
        return StepLayer(layer=layer, role=role, apply=apply)
    if kind == "Reshape":
        return _reshape_step(layer, role, rank, steps, shape)
    if kind == "Flatten" and rank == 2:
        return StepLayer(layer=layer, role=role, apply=lambda module, t: t, note="identity on one vector")
    if kind in FRAME_LAYERS and kind != "Flatten" and rank > 3:
        # a plain per-frame layer on (batch, time, H, W, C), as tf_keras' Conv2D accepts (only before the RNN:
        # after it a step is a vector, and the Reshape that would make it a frame again is refused)
        why = _frame_obstacle(layer) or (None if _keeps_time(layer, steps) else "it changes the time axis")
        if why:
            return why
        return StepLayer(layer=layer, role=role, apply=_apply_direct(layer, rank), note="per frame")
    return WHY_NOT.get(kind, "edgernn does not know how to run it one step at a time")


def _step_shape(layer: Any, shape: tuple[int, ...], timed: bool) -> tuple[int, ...]:
    """One step's shape after the layer (no batch axis, no time axis when ``timed``)."""
    lead = 2 if timed else 1
    try:
        out = tuple(layer.output.shape)
    except (AttributeError, ValueError):
        out = tuple(layer.compute_output_shape((1, 1, *shape) if timed else (1, *shape)))
    return tuple(int(d) if d is not None else 0 for d in out[lead:])  # 0: unknown (a dynamic axis)


def _input_shape(model: Any) -> tuple[int | None, tuple[int, ...]]:
    """(steps, one step's shape) of a (batch, time, features) or (batch, time, H, W, C) input."""
    shape = tuple(model.inputs[0].shape)
    if len(shape) not in (3, 5) or any(d is None for d in shape[2:]):
        raise UnsupportedLayerError(
            f"model '{model.name}' takes input of shape {shape}; edgernn streams (batch, time, features) "
            "sequences or (batch, time, H, W, C) frames of a fixed size"
        )
    steps = shape[1] if shape[1] is None else int(shape[1])
    return steps, tuple(int(d) for d in shape[2:])


def _as_between(steps: list[StepLayer], order: list[tuple[str, Any]]) -> list[StepLayer]:
    """Per-step layers taken for the head, given role "mid" (in ``order`` too): a stateful layer follows them."""
    moved = {id(step.layer) for step in steps}
    order[:] = [("mid", layer) if id(layer) in moved else (role, layer) for role, layer in order]
    for step in steps:
        step.role = "mid"
    return steps


def _dropped_at_inference(layer: Any, dropped: list, order: list) -> bool:
    """Whether a layer is an identity at inference (an InputLayer, Dropout, ..., or one under TimeDistributed);
    each but the InputLayer is recorded in ``dropped`` and ``order``."""
    kind = type(layer).__name__
    inner_kind = type(layer.layer).__name__ if kind == "TimeDistributed" else None
    if kind not in INFERENCE_NO_OPS and inner_kind not in INFERENCE_NO_OPS:
        return False
    if kind != "InputLayer":
        dropped.append((layer, "identity at inference"))
        order.append(("dropped", layer))
    return True


def decompose(model: Any, flavour: str) -> Plan:
    layers = _flat_layers(model)
    if not any(_stateful_kind(layer) for layer in layers):
        return _decompose_per_frame(model, flavour, layers)
    branched = _branching_front(model, layers)
    steps, input_shape = _input_shape(model)
    shape = input_shape

    pre, recurrent, head, dropped, order = [], [], [], [], []
    between: dict[str, list[StepLayer]] = {}
    head_per_step = True
    for layer in layers:
        kind = type(layer).__name__
        if _dropped_at_inference(layer, dropped, order):
            continue
        if kind == "Bidirectional":
            raise _refuse(layer, WHY_NOT["Bidirectional"])
        if kind in RECURRENT_LAYERS or kind in CONV_KINDS:
            if recurrent and not recurrent[-1].return_sequences:
                raise _refuse(layer, f"it follows '{recurrent[-1].name}', which returns only its last step")
            if head:  # what looked like a per-step head runs between the last stateful layer and this one
                between[recurrent[-1].name] = _as_between(head, order)
                head = []
            if branched and not recurrent:   # the front end's join, not the last of its layers in model order
                shape = tuple(int(d or 0) for d in _one_input_shape(layer)[2:])
            if len(shape) > 1:
                raise _refuse(layer, f"it receives frames of shape {shape}; flatten or pool each frame before it")
            rnn = _recurrent(layer) if kind in RECURRENT_LAYERS else causal_conv(layer)
            if isinstance(rnn, str):
                raise _refuse(layer, rnn)
            recurrent.append(rnn)
            order.append(("rnn", layer))
            shape = (rnn.units,)
            continue
        if not recurrent and branched:   # one step's shape from the layer's own input: its branch's
            full_in = _one_input_shape(layer)
            shape, rank = tuple(int(d or 0) for d in full_in[2:]), len(full_in)
            step = _merge_step(layer, rank, True) if kind in MERGE_LAYERS else _step_layer(layer, "pre", rank, steps,
                                                                                            shape)
            if isinstance(step, str):
                raise _refuse(layer, step)
            step.shape_in, step.shape_out = shape, _step_shape(layer, shape, True)
            shape = step.shape_out
            pre.append(step)
            order.append(("pre", layer))
            continue
        if not recurrent:
            role, rank = "pre", 2 + len(shape)
        else:
            head_per_step = recurrent[-1].return_sequences
            role, rank = ("head-step", 3) if head_per_step else ("head-final", 2)
        step = _step_layer(layer, role, rank, steps, shape)
        if isinstance(step, str):
            raise _refuse(layer, step)
        step.shape_in, step.shape_out = shape, _step_shape(layer, shape, rank > 2)
        shape = step.shape_out
        (pre if role == "pre" else head).append(step)
        order.append((role, layer))
    if not recurrent:
        raise UnsupportedLayerError(
            f"model '{model.name}' has no recurrent layer (LSTM, GRU, SimpleRNN, RNN, CfC, LTC) "
            "and no causal Conv1D; nothing to stream"
        )
    head_per_step = recurrent[-1].return_sequences
    return Plan(
        model=model, flavour=flavour, input_shape=input_shape, steps=steps, pre=pre, recurrent=recurrent,
        head=head, head_per_step=head_per_step, dropped=dropped, order=order, between=between, branched=branched,
    )


def _branching_front(model: Any, layers: list[Any]) -> bool:
    """False for a chain; True for a recurrent model whose per-frame front end (the layers before the first stateful
    one) branches and joins, and which is a chain from the first stateful layer on; else refused as a chain is."""
    if _is_chain(model, layers) or type(model).__name__ == "Sequential" or not hasattr(model, "_run_through_graph"):
        _check_chain(model, layers)
        return False
    if any(hasattr(layer, "layers") for layer in model.layers):
        _check_chain(model, layers)
    first = next(i for i, layer in enumerate(layers) if _stateful_kind(layer))
    if first == 0:
        _check_chain(model, layers)
    previous = None
    for layer in layers[first:]:
        try:
            inbound = layer.input
        except (AttributeError, ValueError):
            inbound = None
        if isinstance(inbound, (list, tuple)) or inbound is None or (
                previous is not None and inbound is not previous.output):
            raise UnsupportedLayerError(
                f"the graph branches at layer '{layer.name}', after the first recurrent layer; edgernn streams "
                "models that are a single chain of layers from the first recurrent layer on")
        previous = layer
    return True


# ---------------------------------------------------------------- models with no recurrent layer

def _stateful_kind(layer: Any) -> bool:
    """A layer that carries something from step to step, or is refused as one: what the streaming plan is for."""
    kind = type(layer).__name__
    return kind in RECURRENT_LAYERS or kind in CONV_KINDS or kind in ("Bidirectional",) or kind.startswith("ConvLSTM")


def _is_chain(model: Any, layers: list[Any]) -> bool:
    try:
        _check_chain(model, layers)
    except UnsupportedLayerError:
        return False
    return True


def _one_input_shape(layer: Any) -> tuple:
    inbound = layer.input
    if isinstance(inbound, (list, tuple)):
        inbound = inbound[0]
    return tuple(inbound.shape)


def _merge_step(layer: Any, rank: int, timed: bool) -> StepLayer | str:
    """Add, or Concatenate along an axis that is not the time axis (counted without it in one step)."""
    if type(layer).__name__ == "Concatenate":
        axis = int(layer.axis)
        if timed and axis in (1, 1 - rank):
            return "it concatenates along the time axis"
        if timed and axis > 1:
            def apply(module: Any, tensors: Any, layer=layer, axis=axis) -> Any:
                return module.layers.Concatenate(axis=axis - 1, name=f"{layer.name}_frame")(list(tensors))
            return StepLayer(layer=layer, role="pre", apply=apply, note="per frame: joins the branches")
    return StepLayer(layer=layer, role="pre", apply=lambda module, tensors, layer=layer: layer(list(tensors)),
                     note="per frame: joins the branches")


def _decompose_per_frame(model: Any, flavour: str, layers: list[Any]) -> Plan:
    """A model with no recurrent layer: each frame (or vector) through the model's own per-frame layers."""
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        _check_chain(model, layers)  # refuses, in the words of a chain
    shape = tuple(model.inputs[0].shape)
    timed = len(shape) in (3, 5)
    if len(shape) not in (2, 3, 4, 5) or any(d is None for d in shape[1 + timed:]):
        raise UnsupportedLayerError(
            f"model '{model.name}' takes input of shape {shape}; edgernn runs (batch, H, W, C) frames, "
            "(batch, features) vectors, or sequences of them, of a fixed size"
        )
    steps = (None if shape[1] is None else int(shape[1])) if timed else None
    input_shape = tuple(int(d) for d in shape[1 + timed:])
    branched = type(model).__name__ != "Sequential" and not _is_chain(model, layers)
    if branched:
        if not hasattr(model, "_run_through_graph"):
            raise UnsupportedLayerError(
                f"model '{model.name}' branches; edgernn follows the branches of a Keras 3 functional model, "
                f"and this one is {flavour}'s")
        nested = [layer.name for layer in model.layers if hasattr(layer, "layers")]
        if nested:
            raise UnsupportedLayerError(
                f"model '{model.name}' branches and nests the model '{nested[0]}'; edgernn follows the branches "
                "of one functional model (build it flat)")
    lead = 1 + timed
    pre, dropped, order = [], [], []
    for layer in layers:
        kind = type(layer).__name__
        if _dropped_at_inference(layer, dropped, order):
            continue
        try:
            full_in, full_out = _one_input_shape(layer), tuple(layer.output.shape)
        except (AttributeError, ValueError):
            raise UnsupportedLayerError(
                f"layer '{layer.name}' is called more than once; edgernn runs each layer of a per-frame graph once"
            ) from None
        step_in = tuple(int(d or 0) for d in full_in[lead:])
        if kind in MERGE_LAYERS:
            step = _merge_step(layer, len(full_in), timed)
        elif timed:
            step = _step_layer(layer, "pre", len(full_in), steps, step_in)
        elif kind in ("TimeDistributed", *RECURRENT_LAYERS):
            step = f"it needs a time axis, and the model's input {shape} has none"
        else:
            why = _frame_obstacle(layer) if kind in FRAME_LAYERS else None
            step = why or StepLayer(layer=layer, role="pre", apply=_apply_direct(layer, 0), note="per frame")
        if isinstance(step, str):
            raise _refuse(layer, step)
        step.shape_in, step.shape_out = step_in, tuple(int(d or 0) for d in full_out[lead:])
        pre.append(step)
        order.append(("pre", layer))
    return Plan(
        model=model, flavour=flavour, input_shape=input_shape, steps=steps, pre=pre, recurrent=[], head=[],
        head_per_step=True, dropped=dropped, order=order, timed=timed, branched=branched,
    )
