"""A torch module onto a Keras model: ``nn.Sequential`` and simple ``forward``s of Linear, activations,
``nn.LSTM``/``nn.GRU``/``nn.RNN`` and ``ncps.torch`` CfC/LTC.

The module is traced with ``torch.fx``, its torch.nn and ncps submodules kept whole. The traced graph must be
a chain: one input, each value used by the next operation. Each operation maps onto Keras layers with the
module's own weights.

Taking the last step of a sequence (``y[:, -1]``, ``h_n[-1]``, ``h_n.squeeze(0)``, or an ncps module built with
``return_sequences=False``) makes the RNN before it return its last step only. What lies between them acts
on one step at a time (Linear, activations), so it commutes with taking the last step.

edgernn streams batch-first ``(batch, time, features)``. A chain whose first RNN is time-major
(``batch_first=False``, with no transpose before it) takes time-major input. The Keras model is batch-first
either way, and the reference run (:attr:`Source.reference`) feeds the module its own layout.
"""

from __future__ import annotations

import operator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from edgernn.errors import EdgeRNNError
from edgernn.pytorch.source import Source, keras_name

TORCH_EXTRA = "pip install 'edgernn[torch]'"

_ACTIVATION_MODULES = {"ReLU", "ReLU6", "LeakyReLU", "Tanh", "Sigmoid", "ELU", "SiLU", "GELU", "Softmax"}
_IDENTITY_MODULES = {"Identity", "Dropout", "AlphaDropout", "FeatureAlphaDropout"}
_RNN_MODULES = {"LSTM", "GRU", "RNN"}
# torch functions and tensor methods that are activations (F.relu, torch.tanh, x.sigmoid(), ...)
_FUNCTIONS = {"relu": "relu", "tanh": "tanh", "sigmoid": "sigmoid", "silu": "silu", "elu": "elu",
              "gelu": "gelu", "relu6": "relu6", "leaky_relu": "leaky_relu", "softmax": "softmax",
              "dropout": "identity"}
_NO_OPS = {"contiguous", "float", "detach", "clone", "to", "cpu", "requires_grad_", "type_as"}
# functions making a zero tensor: the initial state people write out (h0 = torch.zeros(layers, x.size(0), H))
_ZEROS = {"zeros", "zeros_like", "new_zeros"}
# what reads only the input's shape, type or device, to size such a zero state
_META = {"size", "dim", "getattr"}
_TRANSPOSES = {"transpose", "permute", "swapaxes", "swapdims"}


def torch_module():
    try:
        import torch  # noqa: PLC0415 - torch is an optional extra, imported only for torch models
    except ImportError:
        raise EdgeRNNError(f"mapping torch modules needs torch: {TORCH_EXTRA}") from None
    return torch


def is_torch_module(obj: Any) -> bool:
    """True for a ``torch.nn.Module`` instance, without importing torch."""
    return any(c.__name__ == "Module" and c.__module__.startswith("torch.nn") for c in type(obj).__mro__)


@dataclass
class _Op:
    """One Keras-side operation of the chain: ``layers`` applied in order, or a last-step marker."""

    what: str                     # "rnn", "step" (layers acting on one step) or "last"
    layers: list = field(default_factory=list)
    name: str = ""


@dataclass
class _Val:
    """What a traced value is.

    ``kind``: ``seq``, ``last`` (one step), ``rnn`` (an RNN module's output tuple), ``final`` (its h_n, or an
    LSTM's (h_n, c_n)), ``final_h``, ``final_c`` or ``none``. ``time_major``: the value's own layout.
    """

    kind: str                     # (also "zeros": a zero tensor; "meta": a size, device or dtype)
    time_major: bool = False      # relative to the chain's input: True once batch and time were swapped
    rnn: _Op | None = None
    layers: int = 1               # an RNN's number of stacked layers (to read h_n[k])
    lstm: bool = False
    ends: bool = False            # an RNN module whose output is its last step (ncps return_sequences=False)
    squeezed: bool = False        # after squeeze(-1): the model's output, nothing may follow


@dataclass
class _Chain:
    kind: str
    ops: list[_Op] = field(default_factory=list)
    features: int | None = None
    input_time_major: bool | None = None   # None until a layout-bound op (an RNN) fixes it


def from_torch(module: Any) -> Source:
    """The Keras twin of a torch module, and the module itself as the float reference."""
    torch = torch_module()
    from edgernn import tfenv

    if not isinstance(module, torch.nn.Module):
        raise EdgeRNNError(f"expected a torch.nn.Module, got {type(module).__name__}")
    kinds = {type(sub).__name__ for sub in module.modules()}
    if not kinds & (_RNN_MODULES | {"CfC", "LTC"}) and any(k.startswith(("Conv", "MaxPool", "AvgPool")) for k in kinds):
        raise EdgeRNNError(f"{type(module).__name__} is a per-frame CNN (no recurrent submodule), whose frame size the "
                           "module does not say: export it, torch.onnx.export(module, torch.zeros(1, C, H, W), "
                           "'model.onnx'), and convert the .onnx file (docs/layers.md, models with no recurrent layer)")
    keras = tfenv.keras3()
    with _inference(module):
        chain, out = _trace(module, torch, keras)
    model = _keras_model(keras, chain, out)
    output_time_major = out.kind == "seq" and out.time_major != bool(chain.input_time_major)
    return Source(model=model, kind="torch", name=type(module).__name__,
                  reference=_reference(module, torch, bool(chain.input_time_major), output_time_major))


# ---------------------------------------------------------------- tracing


def _trace(module: Any, torch, keras) -> tuple[_Chain, _Val]:
    from edgernn.pytorch.ncps import is_ncps_module

    kind = type(module).__name__
    chain = _Chain(kind)
    if is_ncps_module(module) or kind in _RNN_MODULES or kind in _ACTIVATION_MODULES or kind == "Linear":
        out = _apply_module(chain, module, kind, _Val("seq"), keras)    # a leaf given alone
        return chain, _result(chain, out)

    class Tracer(torch.fx.Tracer):
        def is_leaf_module(self, m, qualname):  # fx's hook: keep ncps modules whole, as torch.nn ones are
            return is_ncps_module(m) or super().is_leaf_module(m, qualname)

    try:
        graph = Tracer().trace(module)
    except Exception as exc:  # noqa: BLE001 - fx raises anything for Python it cannot trace
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EdgeRNNError(f"{kind}.forward cannot be traced by torch.fx ({first[:160]}); write it as a chain of "
                           "submodules (nn.Sequential)") from None
    submodules = dict(module.named_modules())
    values: dict[str, _Val] = {}
    out = None
    for node in graph.nodes:
        if node.op == "placeholder":
            values[node.name] = _placeholder(node, values, kind)
        elif node.op == "get_attr":
            raise EdgeRNNError(f"{kind}.forward uses the tensor '{node.target}' directly; edgernn maps "
                               "submodules (nn.Linear, nn.LSTM, ...) and activations")
        elif node.op == "call_module":
            sub = submodules[node.target]
            _only_input(node, values, kind)
            values[node.name] = _apply_module(chain, sub, node.target, _input(node, values, kind), keras)
        elif node.op == "call_function" and node.target is operator.getitem and not node.users:
            continue   # a value taken apart and not used: `out, _ = cfc(x)` leaves the state unread
        elif node.op in ("call_function", "call_method"):
            values[node.name] = _apply_function(chain, node, values, keras)
        elif node.op == "output":
            result = node.args[0]
            if isinstance(result, (tuple, list)):
                if len(result) != 1:
                    raise EdgeRNNError(f"{kind}.forward returns {len(result)} values; edgernn streams one output")
                result = result[0]
            if not hasattr(result, "name"):
                raise EdgeRNNError(f"{kind}.forward returns {result!r}, not a tensor")
            out = values[result.name]
    return chain, _result(chain, out)


def _placeholder(node, values: dict[str, _Val], kind: str) -> _Val:
    if not values:
        return _Val("seq")
    if node.args and node.args[0] is None:
        return _Val("none")
    raise EdgeRNNError(f"{kind}.forward takes a second input '{node.target}'; edgernn streams one input and "
                       "starts every sequence from zero state")


def _input(node, values: dict[str, _Val], kind: str) -> _Val:
    if not node.args or not hasattr(node.args[0], "name"):
        raise EdgeRNNError(f"{kind}: submodule '{node.target}' is called without a tensor input")
    return values[node.args[0].name]


def _only_input(node, values: dict[str, _Val], kind: str) -> None:
    extras = list(node.args[1:]) + list(node.kwargs.values())
    while any(isinstance(e, (tuple, list)) for e in extras):   # an LSTM's (h0, c0)
        extras = [i for e in extras for i in (e if isinstance(e, (tuple, list)) else (e,))]
    for extra in extras:
        if extra is None:
            continue
        if hasattr(extra, "name") and values[extra.name].kind in ("none", "zeros"):
            continue   # no initial state, or a zero one: what edgernn starts every sequence from
        raise EdgeRNNError(f"{kind}: submodule '{node.target}' is given a second argument (an initial state or "
                           "time spans); edgernn starts every sequence from zero state with steps of 1")


def _result(chain: _Chain, out: _Val | None) -> _Val:
    if out is not None and out.kind == "rnn":
        out = _getitem(chain, out, 0)
    if out is None or out.kind not in ("seq", "last"):
        what = _describe(out) if out is not None else "nothing"
        raise EdgeRNNError(f"{chain.kind} returns {what}; edgernn streams a sequence or its last step")
    if not any(op.what == "rnn" for op in chain.ops):
        raise EdgeRNNError(f"{chain.kind} has no recurrent submodule (nn.LSTM, nn.GRU, nn.RNN, ncps CfC/LTC)")
    if chain.features is None:
        raise EdgeRNNError(f"{chain.kind}: edgernn cannot tell its input features")
    return out


def _describe(val: _Val) -> str:
    return {"rnn": "an RNN's output tuple", "final": "an RNN's final states", "final_h": "an RNN's h_n",
            "final_c": "an LSTM's c_n (its cell state)", "none": "None", "seq": "a sequence",
            "last": "one step"}[val.kind]


# ---------------------------------------------------------------- submodules


def _apply_module(chain: _Chain, sub: Any, where: str, arg: _Val, keras) -> _Val:
    from edgernn.pytorch.ncps import is_ncps_module, ncps_layers

    name = type(sub).__name__
    label = f"submodule '{where}' ({name})" if where != name else name
    if arg.squeezed:
        raise EdgeRNNError(f"{label} comes after squeeze(-1); edgernn maps squeeze(-1) only as the last operation")
    if arg.kind not in ("seq", "last"):
        raise EdgeRNNError(f"{label} is applied to {_describe(arg)}; take its output first (out, _ = rnn(x))")
    if is_ncps_module(sub) or name in _RNN_MODULES:
        if arg.kind != "seq":
            raise EdgeRNNError(f"{label} is applied to one step; a recurrent layer needs the sequence")
        return _apply_rnn(chain, sub, label, arg, keras, ncps_layers if is_ncps_module(sub) else None)
    if name == "Linear":
        dense = keras.layers.Dense(sub.out_features, use_bias=sub.bias is not None)
        dense.build((None, sub.in_features))
        weights = [_numpy(sub.weight).T.copy()]
        if sub.bias is not None:
            weights.append(_numpy(sub.bias))
        dense.set_weights(weights)
        _first_features(chain, sub.in_features)
        chain.ops.append(_Op("step", [dense], where))
        return arg
    if name in _IDENTITY_MODULES:
        return arg
    if name in _ACTIVATION_MODULES:
        chain.ops.append(_Op("step", [_activation_module(sub, label, keras)], where))
        return arg
    if name == "LayerNorm":
        layer = _layer_norm(sub, label, keras)
        _first_features(chain, sub.normalized_shape[-1])
        chain.ops.append(_Op("step", [layer], where))
        return arg
    if name == "Flatten" and arg.kind == "last" and (sub.start_dim, sub.end_dim) == (1, -1):
        return arg
    raise EdgeRNNError(f"{label} has no Keras mapping in edgernn; it maps nn.Linear, nn.LSTM, nn.GRU, nn.RNN, "
                       "ncps CfC and LTC, activations, Dropout and Identity")


def _apply_rnn(chain: _Chain, sub: Any, label: str, arg: _Val, keras, ncps_layers: Callable | None) -> _Val:
    time_major = not getattr(sub, "batch_first", True)
    if chain.input_time_major is None:
        # the first RNN fixes the input's layout: its own, or the other one when a transpose came before it
        # (what came before, Linear and activations, does not depend on it)
        chain.input_time_major = time_major != arg.time_major
    elif arg.time_major != (time_major != chain.input_time_major):
        raise EdgeRNNError(f"{label} is batch_first={not time_major} but is given a "
                           f"{'batch-first' if time_major else 'time-major'} sequence")
    relative = time_major != chain.input_time_major
    if ncps_layers is not None:
        if time_major:
            raise EdgeRNNError(f"{label} has batch_first=False; edgernn maps batch-first ncps modules")
        layers = ncps_layers(sub, keras)
        _first_features(chain, getattr(sub, "input_size", None))
        op = _Op("rnn", layers, label)
        chain.ops.append(op)
        return _Val("rnn", relative, op, ends=not getattr(sub, "return_sequences", True))
    op = _Op("rnn", _torch_rnn_layers(sub, label, keras), label)
    _first_features(chain, sub.input_size)
    chain.ops.append(op)
    return _Val("rnn", relative, op, layers=sub.num_layers, lstm=type(sub).__name__ == "LSTM")


def _first_features(chain: _Chain, features: int | None) -> None:
    """The input's features: the input size of the first op that has one (what comes before it, activations,
    keeps the size)."""
    if chain.features is None and features:
        chain.features = int(features)


def _numpy(tensor) -> np.ndarray:
    return tensor.detach().cpu().numpy().astype(np.float32)


def _layer_norm(sub: Any, label: str, keras):
    """nn.LayerNorm over the features: Keras' LayerNormalization with torch's epsilon, weight and bias."""
    shape = tuple(sub.normalized_shape)
    if len(shape) != 1:
        raise EdgeRNNError(f"{label} normalizes over {len(shape)} axes; edgernn maps a LayerNorm over the features")
    affine = sub.weight is not None
    layer = keras.layers.LayerNormalization(epsilon=float(sub.eps), center=sub.bias is not None, scale=affine)
    layer.build((None, shape[0]))
    weights = ([_numpy(sub.weight)] if affine else []) + ([_numpy(sub.bias)] if sub.bias is not None else [])
    layer.set_weights(weights)
    return layer


def _activation_module(sub: Any, label: str, keras):
    name = type(sub).__name__
    if name == "ReLU":
        return keras.layers.ReLU()
    if name == "ReLU6":
        return keras.layers.ReLU(max_value=6.0)
    if name == "LeakyReLU":
        return keras.layers.LeakyReLU(negative_slope=float(sub.negative_slope))
    if name in ("Tanh", "Sigmoid", "SiLU"):
        return keras.layers.Activation(name.lower())
    if name == "ELU" and float(sub.alpha) == 1.0:
        return keras.layers.Activation("elu")
    if name == "GELU" and sub.approximate == "none":
        return keras.layers.Activation("gelu")
    if name == "Softmax" and sub.dim in (-1, 2, None):
        return keras.layers.Softmax()
    raise EdgeRNNError(f"{label} has no Keras mapping in edgernn with these options "
                       f"({', '.join(f'{k}={v}' for k, v in vars(sub).items() if not k.startswith('_'))})")


def _torch_rnn_layers(sub: Any, label: str, keras) -> list:
    from edgernn.keras.interop import keras_gru_weights, keras_lstm_weights, keras_rnn_weights

    name = type(sub).__name__
    if sub.bidirectional:
        raise EdgeRNNError(f"{label} is bidirectional: its backward half needs the future of the sequence")
    if name == "LSTM" and getattr(sub, "proj_size", 0):
        raise EdgeRNNError(f"{label} has proj_size={sub.proj_size}; Keras' LSTM has no projection")
    layers = []
    features = sub.input_size
    for k in range(sub.num_layers):
        w_ih, w_hh = _numpy(getattr(sub, f"weight_ih_l{k}")), _numpy(getattr(sub, f"weight_hh_l{k}"))
        b_ih = _numpy(getattr(sub, f"bias_ih_l{k}")) if sub.bias else None
        b_hh = _numpy(getattr(sub, f"bias_hh_l{k}")) if sub.bias else None
        if name == "LSTM":
            layer = keras.layers.LSTM(sub.hidden_size, return_sequences=True)
            weights = keras_lstm_weights(w_ih, w_hh, b_ih, b_hh)
        elif name == "GRU":
            layer = keras.layers.GRU(sub.hidden_size, return_sequences=True, reset_after=True)
            weights = keras_gru_weights(w_ih, w_hh, b_ih, b_hh)
        else:
            layer = keras.layers.SimpleRNN(sub.hidden_size, return_sequences=True, activation=sub.nonlinearity)
            weights = keras_rnn_weights(w_ih, w_hh, b_ih, b_hh)
        layer.build((None, None, features))
        layer.set_weights(weights)
        layers.append(layer)
        features = sub.hidden_size
    return layers


# ---------------------------------------------------------------- functions, methods and indexing


def _apply_function(chain: _Chain, node, values: dict[str, _Val], keras) -> _Val:
    target = node.target
    fname = target if isinstance(target, str) else getattr(target, "__name__", str(target))
    args = node.args
    src = values.get(args[0].name) if args and hasattr(args[0], "name") else None
    if fname in _ZEROS or (fname == "full" and len(args) > 1 and args[1] == 0):
        return _Val("zeros")
    if src is not None and src.kind in ("meta", "zeros") and (fname in _NO_OPS or target is operator.getitem
                                                             or fname in _META):
        return src
    if src is not None and fname in _META:
        return _Val("meta")
    if fname in ("ones", "ones_like", "full", "full_like", "rand", "randn", "rand_like", "randn_like", "empty",
                 "new_ones", "new_full", "new_empty"):
        raise EdgeRNNError(f"{chain.kind}.forward makes a tensor with torch.{fname}, an initial state that is not "
                           "zero; edgernn starts every sequence from zero state")
    if src is None:
        raise EdgeRNNError(f"{chain.kind}.forward calls {fname}, which edgernn does not map; it maps a chain of "
                           "submodules, activations and taking the last step")
    if src.squeezed:
        raise EdgeRNNError(f"{chain.kind}.forward calls {fname} after squeeze(-1); edgernn maps squeeze(-1) only as "
                           "the last operation")
    if target is operator.getitem:
        return _getitem(chain, src, args[1])
    if fname in _NO_OPS:
        return src
    if fname in _FUNCTIONS and src.kind in ("seq", "last"):
        if _FUNCTIONS[fname] != "identity":
            chain.ops.append(_Op("step", [_activation_layer(_FUNCTIONS[fname], node, keras)], node.name))
        return src
    if fname in _TRANSPOSES and src.kind == "seq" and _swaps_batch_and_time(args[1:], node.kwargs):
        return _Val("seq", not src.time_major, src.rnn)
    if src.kind == "final" and not src.lstm:
        src = _Val("final_h", False, src.rnn, src.layers)
    if fname == "squeeze" and src.kind in ("seq", "last") and _squeezes_features(args[1:], node.kwargs, src.kind):
        # a single output feature dropped (torch's squeeze keeps any other size): the Keras model keeps the
        # axis of one; only the output may be squeezed
        return _Val(src.kind, src.time_major, src.rnn, src.layers, src.lstm, src.ends, squeezed=True)
    if fname == "squeeze" and src.kind == "final_h" and src.layers == 1:
        _mark_last(chain, src)
        return _Val("last", False, src.rnn)
    raise EdgeRNNError(f"{chain.kind}.forward calls {fname} on {_describe(src)}, which edgernn does not map; "
                       "between submodules it maps activations, taking the last step and swapping batch and time")


def _squeezes_features(args: tuple, kwargs: dict, kind: str) -> bool:
    dims = list(args) + ([kwargs["dim"]] if "dim" in kwargs else [])
    if len(dims) != 1 or not isinstance(dims[0], int):
        return False
    return dims[0] == -1 or dims[0] == (2 if kind == "seq" else 1)


def _swaps_batch_and_time(args: tuple, kwargs: dict) -> bool:
    dims = list(args) + [kwargs[k] for k in ("dim0", "dim1", "dims") if k in kwargs]
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = list(dims[0])
    try:
        dims = [int(d) % 3 for d in dims]
    except (TypeError, ValueError):
        return False
    return dims in ([0, 1], [1, 0], [1, 0, 2])


def _activation_layer(act: str, node, keras):
    if act == "relu":
        return keras.layers.ReLU()
    if act == "relu6":
        return keras.layers.ReLU(max_value=6.0)
    if act == "leaky_relu":
        slope = node.args[1] if len(node.args) > 1 else node.kwargs.get("negative_slope", 0.01)
        return keras.layers.LeakyReLU(negative_slope=float(slope))
    if act == "softmax":
        return keras.layers.Softmax()
    return keras.layers.Activation(act)


def _getitem(chain: _Chain, src: _Val, index: Any) -> _Val:
    if src.kind == "rnn" and index in (0, 1):
        if index == 1:
            if src.rnn.layers and type(src.rnn.layers[0]).__name__ not in ("LSTM", "GRU", "SimpleRNN"):
                raise EdgeRNNError(f"{chain.kind}.forward uses {src.rnn.name}'s state; edgernn maps its "
                                   "output (index 0)")
            return _Val("final", src.time_major, src.rnn, src.layers, src.lstm)
        if src.ends:   # an ncps module with return_sequences=False: its output is the last step
            _mark_last(chain, src)
            return _Val("last", False, src.rnn)
        return _Val("seq", src.time_major, src.rnn)
    if src.kind == "final" and src.lstm and index in (0, 1):
        return _Val("final_h" if index == 0 else "final_c", False, src.rnn, src.layers, True)
    if src.kind == "final" and not src.lstm:
        src = _Val("final_h", False, src.rnn, src.layers)
    if src.kind == "final_h" and isinstance(index, tuple) and index and all(
            i == slice(None) or i is Ellipsis for i in index[1:]):
        index = index[0]   # h_n[-1, :, :]
    if src.kind == "final_h" and isinstance(index, int) and index in (-1, src.layers - 1):
        _mark_last(chain, src)
        return _Val("last", False, src.rnn)
    if src.kind == "seq" and _is_last_step(index, src.time_major != bool(chain.input_time_major)):
        _mark_last(chain, src)
        return _Val("last", False, src.rnn)
    raise EdgeRNNError(f"{chain.kind}.forward indexes {_describe(src)} with [{_show(index)}]; edgernn maps taking "
                       "the last step (y[:, -1] of a batch-first output, h_n[-1]) and an RNN's output (out, _ = rnn(x))")


def _mark_last(chain: _Chain, src: _Val) -> None:
    if src.rnn is None or not any(op.what == "rnn" for op in chain.ops):
        raise EdgeRNNError(f"{chain.kind}.forward takes the last step before any recurrent layer")
    if chain.ops and chain.ops[-1].what == "last":
        return
    chain.ops.append(_Op("last"))


def _show(index: Any) -> str:
    if isinstance(index, tuple):
        return ", ".join(_show(i) for i in index)
    if isinstance(index, slice):
        return ":" if index == slice(None) else f"{index.start}:{index.stop}:{index.step}"
    return "..." if index is Ellipsis else repr(index)


def _is_last_step(index: Any, time_major: bool) -> bool:
    full = slice(None)
    if not isinstance(index, tuple):
        return time_major and index == -1
    rest = lambda items: all(i == full or i is Ellipsis for i in items)  # noqa: E731
    if time_major:
        return len(index) >= 1 and index[0] == -1 and rest(index[1:])
    return len(index) >= 2 and index[0] == full and index[1] == -1 and rest(index[2:])


# ---------------------------------------------------------------- the Keras model


def _keras_model(keras, chain: _Chain, out: _Val):
    """The chain as a Keras functional model; a last-step marker makes the RNN before it return its last
    step (the step layers between them commute with taking it)."""
    last_rnn = {}
    current = None
    for i, op in enumerate(chain.ops):
        if op.what == "rnn":
            current = i
        elif op.what == "last":
            if current is None:
                raise EdgeRNNError(f"{chain.kind} takes the last step before any recurrent layer")
            last_rnn[current] = True
    for i, op in enumerate(chain.ops):
        if op.what == "rnn":
            recurrent = [layer for layer in op.layers if hasattr(layer, "return_sequences")]
            for layer in recurrent:
                layer.return_sequences = True
            recurrent[-1].return_sequences = not last_rnn.get(i, False)
    inputs = keras.Input((None, chain.features), name="x")
    tensor = inputs
    for op in chain.ops:
        for layer in op.layers:
            tensor = layer(tensor)
    return keras.Model(inputs, tensor, name=keras_name(chain.kind, "torch_model"))


@contextmanager
def _inference(module: Any):
    """The module in eval mode (dropout off), put back in the mode it was in after."""
    was_training = module.training
    module.eval()
    try:
        yield
    finally:
        module.train(was_training)


def _reference(module: Any, torch, input_time_major: bool, output_time_major: bool) -> Callable:
    """The module run on (sequences, steps, features) float32, batch-first in and out."""

    def run(sequences: np.ndarray) -> np.ndarray:
        x = torch.from_numpy(np.ascontiguousarray(sequences, np.float32))
        if input_time_major:
            x = x.transpose(0, 1)
        with _inference(module), torch.no_grad():
            y = module(x)
        while isinstance(y, (tuple, list)):
            y = y[0]
        if output_time_major:
            y = y.transpose(0, 1)
        return y.detach().cpu().numpy().astype(np.float32)

    return run
