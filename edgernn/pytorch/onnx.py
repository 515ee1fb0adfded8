"""ONNX files of recurrent models (as ``torch.onnx.export`` writes them) mapped onto Keras 3 models.

Both of PyTorch's exporters write an ONNX ``LSTM``/``GRU``/``RNN`` node per layer, with plumbing around it
that differs: the TorchScript one builds the zero initial states from the input's shape (Shape, Gather,
Concat, Expand) and squeezes the num_directions axis; the dynamo one transposes and reshapes it away. So
the file is read in two kinds of tensors:

- constants: initializers, and everything computed from them and from the *shapes* of data tensors. They
  are folded with numpy (the ONNX reference ops) at a probe shape: batch 1, the file's steps or
  ``PROBE_STEPS``;
- data: what depends on the graph input. Each data tensor knows the role of each of its axes (``B`` batch,
  ``T`` time, ``F`` features, ``D`` the RNN nodes' num_directions, ``L`` a time axis cut down to its last
  step) and the chain of Keras layers that computes it from the input.

Walking the data path in graph order turns Transposes and Reshapes into role changes, MatMul(+Add) and
Gemm into Dense, element-wise nodes into Keras activations (a chain of activation nodes as it is; a function
written out, such as GELU before opset 20, recognised by its values), the RNN nodes into Keras
LSTM/GRU/SimpleRNN with their exact weights (:mod:`edgernn.keras.interop`), and taking the last step (a
Gather or Slice on time, or the RNN's Y_h output) into ``return_sequences=False`` on the last recurrent
layer: the per-step layers between them act on each step alone, so they commute with it.

Whatever cannot be mapped exactly is refused in one line naming the node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from edgernn.errors import EdgeRNNError
from edgernn.pytorch.source import Source, keras_name

RNN_OPS = {"LSTM": 4, "GRU": 3, "RNN": 1}  # op type -> gates
DEFAULT_ACTIVATIONS = {"LSTM": ["sigmoid", "tanh", "tanh"], "GRU": ["sigmoid", "tanh"]}
PROBE_STEPS = 5  # steps of the probe input when the file leaves the time axis free
UNROLLED_HINT = ("export the nn.LSTM/GRU/RNN module itself, or pass the module to edgernn.from_torch / "
                 "edgernn.convert in Python")
INT64_MAX = np.iinfo(np.int64).max
PASS_THROUGH = {"Identity", "Dropout"}
SIMPLE_ACTIVATIONS = {"Relu": "relu", "Tanh": "tanh", "Sigmoid": "sigmoid"}
ELEMENTWISE_OPS = {*SIMPLE_ACTIVATIONS, "LeakyRelu", "Elu", "Gelu", "Clip", "Erf", "Add", "Sub", "Mul", "Div", "Pow"}
SUPPORTED_OPS = sorted({*RNN_OPS, *PASS_THROUGH, *ELEMENTWISE_OPS, "Shape", "Cast", "Softmax", "MatMul", "Gemm", "Transpose",
                        "Squeeze", "Reshape", "Gather", "Slice", "Concat"})


# ----------------------------------------------------------------------------------------------------------
# What the data path computes: a chain of layer specs.

@dataclass(frozen=True)
class Dense:
    kernel: np.ndarray  # (F, units)
    bias: np.ndarray | None
    node: str


@dataclass(frozen=True)
class Act:
    kind: str  # relu, tanh, sigmoid, silu, gelu, gelu_tanh, leaky_relu, elu, softmax, relu_max
    value: float = 0.0  # alpha of leaky_relu and elu, the ceiling of relu_max
    node: str = ""


@dataclass(frozen=True)
class Recurrent:
    kind: str  # LSTM, GRU, SimpleRNN
    units: int
    weights: tuple
    activation: str = "tanh"  # SimpleRNN's
    reset_after: bool = True  # GRU's
    node: str = ""


@dataclass(frozen=True)
class Last:
    """The last step of the sequence is taken here."""

    node: str


@dataclass(frozen=True)
class Data:
    roles: tuple[str, ...]
    features: int
    plan: tuple = ()


@dataclass(frozen=True)
class Stack:
    """Y_h outputs of several RNN nodes concatenated along their num_directions axis (PyTorch's h_n)."""

    items: tuple[Data, ...]
    axis: int


@dataclass(frozen=True)
class Expr:
    """An element-wise function of one data tensor, built node by node: GELU as older opsets write it (Div, Erf,
    Add, Mul, Mul), SiLU as x * Sigmoid(x). Whatever reads it next sees it as Keras activations
    (:func:`_materialized`).

    ``tree``: ``("x",)`` the base, ``("c", value)`` a scalar, ``("act", Act, child)``, ``("Erf", child)`` or
    ``(op, left, right)`` for Add, Sub, Mul, Div and Pow.
    """

    base: Data
    tree: tuple
    node: Any  # its first node, for messages


@dataclass(frozen=True)
class Refused:
    """A tensor the model may compute but the Keras twin cannot: refused only if the output needs it."""

    reason: str


class LayoutError(EdgeRNNError):
    """The data reached a node with axes in an order it cannot take: the input's layout guess was wrong."""


@dataclass
class Walk:
    """The state of one walk over the graph, for one guess of the input's layout."""

    file: str
    opset: int
    steps: int  # the probe's
    steps_fixed: bool  # by the file: then step steps - 1 is the last one too, else only step -1 is
    consts: dict[str, np.ndarray]
    data: dict[str, Any] = field(default_factory=dict)
    has_rnn: bool = False

    def shape(self, value: Data) -> list[int]:
        sizes = {"B": 1, "T": self.steps, "D": 1, "L": 1}
        return [sizes.get(r, value.features) for r in value.roles]


def _node_label(node: Any) -> str:
    return f"node {node.name or '(unnamed)'!r} ({node.op_type})"


def _refuse(walk: Walk, node: Any, reason: str, error: type = EdgeRNNError) -> EdgeRNNError:
    return error(f"{walk.file}: {_node_label(node)} {reason}")


# ----------------------------------------------------------------------------------------------------------
# Loading.

def load_onnx(path: Any, model: Any = None) -> Source:
    """Read an ONNX file of a recurrent model and build the Keras model computing the same thing.

    ``reference`` runs the file itself (onnxruntime, else ``onnx.reference``) on (sequences, steps, F)
    float32 inputs and returns what the Keras model returns. A file exported with a fixed number of steps
    computes only that many: its reference raises EdgeRNNError for any other (the Keras model runs any).
    A file with a fixed batch is run that many sequences at a time (one at a time for torch's default).
    """
    path = Path(path)
    if model is None:   # else the file as read_onnx read it
        model = read_onnx(path)
    graph = model.graph
    file = path.name
    consts = _initializers(graph)
    x_info = _single_input(graph, consts, file)
    dims = _dims(x_info)
    if len(dims) != 3:
        raise EdgeRNNError(f"{file}: input {x_info.name!r} has {len(dims)} dimensions; edgernn reads "
                           "(batch, steps, features) or (steps, batch, features) sequences")
    if len(graph.output) != 1:
        raise EdgeRNNError(f"{file}: the model has {len(graph.output)} outputs; edgernn converts models with one")
    _refuse_unrolled(graph, file)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    in_roles, walk, out = _walk_either_layout(graph, consts, x_info.name, dims, file, opset)
    plan = _checked_plan(out, walk)
    features = dims[2]
    keras_model = _build_keras(plan, features, path.stem)
    reference = _reference(model, x_info.name, in_roles, dims, out.roles, file)
    return Source(model=keras_model, kind="onnx", name=file, reference=reference)


def _walk_either_layout(graph: Any, consts: dict[str, np.ndarray], x_name: str, dims: list[int], file: str,
                        opset: int) -> tuple[tuple[str, ...], Walk, Data]:
    """The walk for a batch-first input, else for a time-major one: the file does not say which it is, but
    only one of them reaches the RNN nodes with the axes they read. When both fail, the refusal of the walk
    that went further is the one that names what is wrong."""
    try:
        walk, out = _walk(graph, consts, x_name, ("B", "T", "F"), dims, file, opset)
        return ("B", "T", "F"), walk, out
    except LayoutError as err:
        batch_first = err
    try:
        walk, out = _walk(graph, consts, x_name, ("T", "B", "F"), dims, file, opset)
        return ("T", "B", "F"), walk, out
    except EdgeRNNError as err:
        further = err if getattr(err, "progress", 0) > getattr(batch_first, "progress", 0) else batch_first
        raise EdgeRNNError(str(further)) from None


def _onnx() -> Any:
    try:
        import onnx
    except ImportError:
        raise EdgeRNNError("reading .onnx models needs the onnx package: pip install 'edgernn[onnx]'") from None
    return onnx


def read_onnx(path: Any) -> Any:
    """The ModelProto of an .onnx file, its external data read from beside it; one line for a file that is not
    one, and for a missing onnx package."""
    return _read(_onnx(), Path(path))


def _read(onnx: Any, path: Path) -> Any:
    if not path.is_file():
        raise EdgeRNNError(f"{path}: no such file")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as err:  # protobuf's DecodeError and friends: the file is not an ONNX model
        raise EdgeRNNError(f"{path.name} is not an ONNX model ({type(err).__name__})") from None
    if not model.graph.node or not model.opset_import:
        raise EdgeRNNError(f"{path.name} is not an ONNX model (no graph in it)")
    # The dynamo exporter keeps weights in a .data file beside the model, even tiny ones: read them from there.
    external = [t for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    if external:
        from onnx.external_data_helper import load_external_data_for_model

        files = sorted({e.value for t in external for e in t.external_data if e.key == "location"})
        try:
            load_external_data_for_model(model, str(path.parent))
        except Exception as err:
            raise EdgeRNNError(f"{path.name} keeps weights in the external data file(s) {', '.join(files)}, which "
                               f"could not be read beside it ({type(err).__name__}); keep them next to the .onnx "
                               "file, or save it as one: onnx.save(model, path, save_as_external_data=False)") from None
    return model


def _initializers(graph: Any) -> dict[str, np.ndarray]:
    from onnx import numpy_helper

    return {t.name: numpy_helper.to_array(t) for t in graph.initializer}


def _single_input(graph: Any, consts: dict[str, np.ndarray], file: str) -> Any:
    inputs = [i for i in graph.input if i.name not in consts]
    if len(inputs) != 1:
        names = ", ".join(i.name for i in inputs)
        raise EdgeRNNError(f"{file}: the model takes {len(inputs)} inputs ({names}); edgernn feeds one input, "
                           "the sequence, and starts every state at zero")
    return inputs[0]


def _dims(info: Any) -> list[int]:
    """The input's dimensions, 0 where the file leaves one free."""
    return [d.dim_value if d.HasField("dim_value") else 0 for d in info.type.tensor_type.shape.dim]


def _refuse_unrolled(graph: Any, file: str) -> None:
    for node in graph.node:
        if node.op_type in ("Loop", "Scan"):
            raise EdgeRNNError(f"{file}: {_node_label(node)} loops over the steps inside the graph; {UNROLLED_HINT}")
    if any(n.op_type in RNN_OPS for n in graph.node):
        return
    initializers = {t.name for t in graph.initializer}
    users: dict[str, list[Any]] = {}
    for node in graph.node:
        if node.op_type in ("MatMul", "Gemm"):
            for name in node.input:
                if name in initializers:
                    users.setdefault(name, []).append(node)
    for name, nodes in users.items():
        if len(nodes) > 1:
            raise EdgeRNNError(f"{file}: {_node_label(nodes[1])} reuses the weight {name!r} of "
                               f"{_node_label(nodes[0])}: a recurrent cell unrolled over a fixed number of steps, "
                               f"with no LSTM/GRU/RNN node; {UNROLLED_HINT}")


# ----------------------------------------------------------------------------------------------------------
# The walk.

def _live_nodes(graph: Any) -> list[Any]:
    """The nodes the graph's output depends on, in graph order."""
    producer = {out: node for node in graph.node for out in node.output if out}
    needed = {o.name for o in graph.output}
    live: set[int] = set()
    stack = list(needed)
    while stack:
        node = producer.get(stack.pop())
        if node is None or id(node) in live:
            continue
        live.add(id(node))
        stack.extend(i for i in node.input if i)
    return [n for n in graph.node if id(n) in live]


def _walk(graph: Any, consts: dict[str, np.ndarray], x_name: str, in_roles: tuple[str, ...], dims: list[int],
          file: str, opset: int) -> tuple[Walk, Data]:
    steps = dims[in_roles.index("T")] or PROBE_STEPS
    walk = Walk(file=file, opset=opset, steps=steps, steps_fixed=bool(dims[in_roles.index("T")]),
                consts=dict(consts))
    walk.has_rnn = any(n.op_type in RNN_OPS for n in graph.node)
    if not dims[2]:
        raise EdgeRNNError(f"{file}: the input's feature dimension is not fixed")
    walk.data[x_name] = Data(roles=in_roles, features=dims[2])
    for progress, node in enumerate(_live_nodes(graph), 1):
        try:
            _visit(walk, node)
        except EdgeRNNError as err:
            err.progress = progress  # how far this layout got: see _walk_either_layout
            raise
    out_name = graph.output[0].name
    if out_name in walk.consts:
        raise EdgeRNNError(f"{file}: the output {out_name!r} does not depend on the input")
    out = walk.data[out_name]
    if isinstance(out, Stack):
        if len(out.items) > 1:
            raise EdgeRNNError(f"{file}: the output {out_name!r} holds the last states of {len(out.items)} "
                               "layers; return the last layer's (h_n[-1]) or its output sequence")
        out = out.items[0]
    if isinstance(out, Refused):
        raise EdgeRNNError(out.reason)
    if isinstance(out, Expr):
        out = _materialized(walk, out)
    return walk, out


def _visit(walk: Walk, node: Any) -> None:
    inputs = [i for i in node.input]
    data_in = [i for i in inputs if i and i in walk.data]
    if node.op_type in ("Loop", "Scan", "If"):
        raise _refuse(walk, node, f"is not supported; {UNROLLED_HINT}")
    if not data_in:
        _fold(walk, node)
        return
    for name in data_in:
        if isinstance(walk.data[name], Refused):
            raise EdgeRNNError(walk.data[name].reason)
    handler = HANDLERS.get(node.op_type)
    if handler is None:
        hint = "" if walk.has_rnn else f"; with no LSTM/GRU/RNN node, is the cell unrolled? {UNROLLED_HINT}"
        raise _refuse(walk, node, f"is not supported on the data path (edgernn maps {', '.join(SUPPORTED_OPS)}){hint}")
    if node.op_type not in ELEMENTWISE_OPS:
        for name in data_in:
            if isinstance(walk.data[name], Expr):
                walk.data[name] = _materialized(walk, walk.data[name])
    handler(walk, node)


def _fold(walk: Walk, node: Any) -> None:
    """Compute a node all of whose inputs are constants, with the ONNX reference ops of the file's opset."""
    feeds = {name: walk.consts[name] for name in node.input if name}
    try:
        results = _evaluate(node, feeds, walk.opset)
    except Exception as err:
        raise _refuse(walk, node, f"could not be computed from the constants ({type(err).__name__}: {err})") from None
    for name, value in zip(node.output, results):
        if name:
            walk.consts[name] = np.asarray(value)


def _evaluate(node: Any, feeds: dict[str, np.ndarray], opset: int) -> list[Any]:
    """One node run alone. It goes into a one-node model: the evaluator takes the opset from a model's
    imports (a bare node would run as the newest version, and Unsqueeze's axes moved from an attribute
    to an input at 13)."""
    from onnx import ValueInfoProto, helper
    from onnx.reference import ReferenceEvaluator

    graph = helper.make_graph([node], "fold", [ValueInfoProto(name=name) for name in feeds],
                              [ValueInfoProto(name=name) for name in node.output if name])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return ReferenceEvaluator(model).run(None, feeds)


def _shape_of_data(walk: Walk, node: Any) -> None:
    """The shape of a data tensor at the probe's: a constant, as the exporters' plumbing expects."""
    value = _vector(walk, node, _data(walk, node, 0))
    shape = np.array(walk.shape(value), np.int64)
    attrs = _attrs(node)
    start, end = attrs.get("start", 0), attrs.get("end", len(shape))
    walk.consts[node.output[0]] = shape[start:end]


def _attrs(node: Any) -> dict[str, Any]:
    from onnx import helper

    values = {}
    for a in node.attribute:
        value = helper.get_attribute_value(a)
        if isinstance(value, bytes):
            value = value.decode()
        elif isinstance(value, list):
            value = [v.decode() if isinstance(v, bytes) else v for v in value]
        values[a.name] = value
    return values


def _data(walk: Walk, node: Any, index: int) -> Any:
    name = node.input[index]
    if name not in walk.data:
        raise _refuse(walk, node, f"takes a constant as input {index}, where edgernn expects the data")
    return walk.data[name]


def _vector(walk: Walk, node: Any, value: Any) -> Data:
    if isinstance(value, Stack):
        raise _refuse(walk, node, "takes the concatenated last states of several layers; take the last layer's "
                                  "(h_n[-1]) first")
    return value


def _const(walk: Walk, node: Any, index: int, what: str) -> np.ndarray | None:
    if index >= len(node.input) or not node.input[index]:
        return None
    name = node.input[index]
    if name in walk.data:
        raise _refuse(walk, node, f"computes its {what} from the input; edgernn needs it constant")
    return walk.consts[name]


def _set(walk: Walk, node: Any, value: Any, index: int = 0) -> None:
    if index < len(node.output) and node.output[index]:
        walk.data[node.output[index]] = value


def _features_last(walk: Walk, node: Any, value: Data) -> None:
    if value.roles[-1] != "F":
        raise _refuse(walk, node, f"acts on an axis other than the features (axes {''.join(value.roles)})",
                      LayoutError)


# Per-step layers.

def _pass(walk: Walk, node: Any) -> None:
    if node.op_type == "Dropout":
        training = _const(walk, node, 2, "training_mode")
        if training is not None and bool(np.ravel(training)[0]):
            raise _refuse(walk, node, "drops at random (training_mode is true); export the module in eval mode")
    _set(walk, node, _data(walk, node, 0))


def _cast(walk: Walk, node: Any) -> None:
    """A cast of float data to float (``x.float()``) changes nothing; any other changes the values."""
    from onnx import TensorProto

    to = int(_attrs(node)["to"])
    if to != TensorProto.FLOAT:
        raise _refuse(walk, node, f"casts the data to {TensorProto.DataType.Name(to)}; edgernn streams float32 data")
    _pass(walk, node)


def _softmax(walk: Walk, node: Any) -> None:
    value = _vector(walk, node, _data(walk, node, 0))
    _features_last(walk, node, value)
    axis = _attrs(node).get("axis", -1 if walk.opset >= 13 else 1)
    if axis not in (-1, len(value.roles) - 1):
        raise _refuse(walk, node, f"normalizes along axis {axis}, not the features")
    _set(walk, node, Data(value.roles, value.features, value.plan + (Act("softmax", node=node.name),)))


def _unary_act(walk: Walk, node: Any) -> Act:
    attrs = _attrs(node)
    if node.op_type in SIMPLE_ACTIVATIONS:
        return Act(SIMPLE_ACTIVATIONS[node.op_type], node=node.name)
    if node.op_type == "LeakyRelu":
        return Act("leaky_relu", float(attrs.get("alpha", 0.01)), node.name)
    if node.op_type == "Elu":
        return Act("elu", float(attrs.get("alpha", 1.0)), node.name)
    if node.op_type == "Gelu":
        return Act("gelu_tanh" if attrs.get("approximate", "none") == "tanh" else "gelu", node=node.name)
    return _clip(walk, node, attrs)


def _clip(walk: Walk, node: Any, attrs: dict[str, Any]) -> Act:
    low = _const(walk, node, 1, "minimum")
    high = _const(walk, node, 2, "maximum")
    low = float(low) if low is not None else attrs.get("min")
    high = float(high) if high is not None else attrs.get("max")
    if low != 0.0 or high is None:
        raise _refuse(walk, node, f"clips to [{low}, {high}]; edgernn maps only [0, max] (ReLU6 and the like)")
    return Act("relu_max", float(high), node.name)


def _elementwise(walk: Walk, node: Any) -> None:
    """An element-wise node on the data: one more step of an :class:`Expr`, or a Linear layer's bias."""
    if node.op_type == "Add" and _fused_bias(walk, node):
        return
    arity = 2 if node.op_type in BINARY_OPS else 1
    names = list(node.input[:arity])
    bases = []
    for name in names:
        value = walk.data.get(name)
        if isinstance(value, (Stack, Refused)):
            _vector(walk, node, value)
        if value is not None:
            bases.append(value.base if isinstance(value, Expr) else value)
    if not bases:
        raise _refuse(walk, node, "takes the data as a bound, not as its operand")
    base = bases[0]
    if any(b is not base for b in bases):
        raise _refuse(walk, node, "combines two different tensors of the data; edgernn maps element-wise "
                                  "functions of one tensor (activations) only")
    _features_last(walk, node, base)
    trees = [_operand(walk, node, name) for name in names]
    if node.op_type in BINARY_OPS:
        tree = (node.op_type, *trees)
    elif node.op_type == "Erf":
        tree = ("Erf", trees[0])
    else:
        tree = ("act", _unary_act(walk, node), trees[0])
    first = next((walk.data[n].node for n in names if isinstance(walk.data.get(n), Expr)), node)
    _set(walk, node, Expr(base, tree, first))


def _operand(walk: Walk, node: Any, name: str) -> tuple:
    value = walk.data.get(name)
    if isinstance(value, Expr):
        return value.tree
    if value is not None:
        return ("x",)
    const = walk.consts[name]
    if const.size != 1:
        raise _refuse(walk, node, f"applies a constant of shape {list(const.shape)} element-wise; edgernn maps "
                                  "scalars there (and a MatMul's bias)")
    return ("c", float(const.reshape(-1)[0]))


def _fused_bias(walk: Walk, node: Any) -> bool:
    """MatMul + Add: the bias of the Dense layer the MatMul began."""
    index = 0 if node.input[0] in walk.data else 1
    value = walk.data[node.input[index]]
    other = node.input[1 - index]
    if not isinstance(value, Data) or other in walk.data:
        return False
    last = value.plan[-1] if value.plan else None
    bias = walk.consts[other]
    if not isinstance(last, Dense) or last.bias is not None or value.roles[-1] != "F":
        return False
    if bias.ndim and (bias.shape[-1] not in (1, value.features) or bias.size != bias.shape[-1]):
        return False
    dense = Dense(last.kernel, np.broadcast_to(bias.reshape(-1), (value.features,)).astype(np.float32), last.node)
    _set(walk, node, Data(value.roles, value.features, value.plan[:-1] + (dense,)))
    return True


def _materialized(walk: Walk, expr: Expr) -> Data:
    """The Keras activations computing ``expr``: its chain of activation nodes, each part that is not one
    recognised by its values (GELU, tanh-GELU, SiLU written out)."""
    acts = _acts(expr.tree)
    if acts is None:
        raise _refuse(walk, expr.node, "begins an element-wise function of the data that is not an activation "
                                       f"edgernn maps (it recognises {', '.join(WRITTEN_OUT)} written out)")
    base = expr.base
    return Data(base.roles, base.features, base.plan + tuple(acts))


def _acts(tree: tuple) -> list[Act] | None:
    if tree == ("x",):
        return []
    if tree[0] == "act":
        inner = _acts(tree[2])
        return None if inner is None else inner + [tree[1]]
    grid = np.linspace(-10.0, 10.0, 4001)
    with np.errstate(all="ignore"):
        values = _evaluate_tree(tree, grid)
    for kind, function in WRITTEN_OUT.items():
        if np.allclose(values, function(grid), rtol=1e-5, atol=1e-6):
            return [Act(kind)]
    return None


def _erf(x: np.ndarray) -> np.ndarray:
    import math

    return np.vectorize(math.erf)(x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _gelu_tanh_values(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


WRITTEN_OUT: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "gelu": lambda x: 0.5 * x * (1.0 + _erf(x / np.sqrt(2.0))),
    "gelu_tanh": _gelu_tanh_values,
    "silu": lambda x: x * _sigmoid(x),
}
ACT_VALUES: dict[str, Callable[[np.ndarray, float], np.ndarray]] = {
    "relu": lambda x, v: np.maximum(x, 0.0),
    "tanh": lambda x, v: np.tanh(x),
    "sigmoid": lambda x, v: _sigmoid(x),
    "leaky_relu": lambda x, v: np.where(x >= 0, x, v * x),
    "elu": lambda x, v: np.where(x >= 0, x, v * (np.exp(x) - 1.0)),
    "relu_max": lambda x, v: np.clip(x, 0.0, v),
    **{kind: (lambda f: lambda x, v: f(x))(f) for kind, f in WRITTEN_OUT.items()},
}
BINARY_VALUES: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide, "Pow": np.power,
}
BINARY_OPS = set(BINARY_VALUES)


def _evaluate_tree(tree: tuple, x: np.ndarray) -> np.ndarray:
    if tree[0] == "x":
        return x
    if tree[0] == "c":
        return np.full_like(x, tree[1])
    if tree[0] == "act":
        return ACT_VALUES[tree[1].kind](_evaluate_tree(tree[2], x), tree[1].value)
    if tree[0] == "Erf":
        return _erf(_evaluate_tree(tree[1], x))
    return BINARY_VALUES[tree[0]](_evaluate_tree(tree[1], x), _evaluate_tree(tree[2], x))


def _matmul(walk: Walk, node: Any) -> None:
    value = _vector(walk, node, _data(walk, node, 0))
    kernel = _const(walk, node, 1, "weight")
    if kernel is None or kernel.ndim != 2 or kernel.shape[0] != value.features:
        raise _refuse(walk, node, "is not a product with a (features, units) weight matrix")
    _features_last(walk, node, value)
    dense = Dense(kernel.astype(np.float32), None, node.name)
    _set(walk, node, Data(value.roles, kernel.shape[1], value.plan + (dense,)))


def _gemm(walk: Walk, node: Any) -> None:
    value = _vector(walk, node, _data(walk, node, 0))
    attrs = _attrs(node)
    if attrs.get("transA", 0) or len(value.roles) != 2:
        raise _refuse(walk, node, "does not multiply a (batch, features) input from the left")
    _features_last(walk, node, value)
    weight = _const(walk, node, 1, "weight")
    kernel = weight.T if attrs.get("transB", 0) else weight
    if kernel.shape[0] != value.features:
        raise _refuse(walk, node, f"has a weight of shape {list(weight.shape)} for {value.features} features")
    kernel = (np.float32(attrs.get("alpha", 1.0)) * kernel).astype(np.float32)
    bias = _const(walk, node, 2, "bias")
    if bias is not None:
        bias = np.broadcast_to(np.float32(attrs.get("beta", 1.0)) * bias, (kernel.shape[1],)).astype(np.float32)
    _set(walk, node, Data(value.roles, kernel.shape[1], value.plan + (Dense(kernel, bias, node.name),)))


# Layout.

def _transpose(walk: Walk, node: Any) -> None:
    value = _vector(walk, node, _data(walk, node, 0))
    perm = _attrs(node).get("perm", list(reversed(range(len(value.roles)))))
    _set(walk, node, Data(tuple(value.roles[p] for p in perm), value.features, value.plan))


def _axes(walk: Walk, node: Any, rank: int) -> list[int] | None:
    axes = _const(walk, node, 1, "axes") if len(node.input) > 1 else None
    if axes is None:
        axes = _attrs(node).get("axes")
    return None if axes is None else sorted(int(a) % rank for a in np.ravel(axes))


def _squeeze(walk: Walk, node: Any) -> None:
    value = _vector(walk, node, _data(walk, node, 0))
    axes = _axes(walk, node, len(value.roles))
    if axes is None:
        axes = [i for i, r in enumerate(value.roles) if r in "DL"]
    if any(value.roles[a] not in "DL" for a in axes):
        raise _refuse(walk, node, f"squeezes the axes {''.join(value.roles[a] for a in axes)} of "
                                  f"{''.join(value.roles)}; edgernn follows only the RNN's num_directions axis and "
                                  "a last step's time axis there", LayoutError)
    roles = tuple(r for i, r in enumerate(value.roles) if i not in axes)
    _set(walk, node, Data(roles, value.features, value.plan))


def _reshape(walk: Walk, node: Any) -> None:
    """A Reshape that drops unit axes (num_directions, a last step's time axis) and nothing else."""
    value = _vector(walk, node, _data(walk, node, 0))
    target = [int(d) for d in _const(walk, node, 1, "shape")]
    shape = walk.shape(value)
    allowzero = _attrs(node).get("allowzero", 0)
    resolved = [shape[i] if d == 0 and not allowzero and i < len(shape) else d for i, d in enumerate(target)]
    if -1 in resolved:
        known = int(np.prod([d for d in resolved if d != -1]))
        resolved[resolved.index(-1)] = int(np.prod(shape)) // max(known, 1)
    kept = tuple(r for r in value.roles if r not in "DL")
    if resolved == walk.shape(Data(kept, value.features)):
        _set(walk, node, Data(kept, value.features, value.plan))
        return
    if resolved == shape:
        _pass(walk, node)
        return
    raise _refuse(walk, node, f"reshapes {shape} (axes {''.join(value.roles)}) into {resolved}; edgernn follows "
                              "only reshapes that drop the RNN's num_directions axis", LayoutError)


def _pick(walk: Walk, node: Any, value: Any, axis: int, index: int, keep: bool) -> Any:
    """Take one entry along ``axis``: the last step of time, or the one num_directions or layer."""
    if isinstance(value, Stack):
        if axis != value.axis:
            raise _refuse(walk, node, "indexes the layers' last states along another axis than the layers")
        if index not in (-1, len(value.items) - 1):
            raise _refuse(walk, node, f"takes the last state of layer {index} of {len(value.items)}; edgernn "
                                      "streams the output of the last layer only")
        item = value.items[-1]
        roles = item.roles if keep else item.roles[:axis] + item.roles[axis + 1:]
        return Data(roles, item.features, item.plan)
    role = value.roles[axis]
    if role == "T":
        if index != -1 and not (walk.steps_fixed and index == walk.steps - 1):
            hint = "" if walk.has_rnn else f" (an unrolled cell? {UNROLLED_HINT})"
            raise _refuse(walk, node, f"takes step {index} of {walk.steps}; edgernn streams models that take the "
                                      f"last step only{hint}")
        plan = value.plan + (Last(node.name),)
        roles = value.roles[:axis] + ("L",) + value.roles[axis + 1:] if keep else (
            value.roles[:axis] + value.roles[axis + 1:])
        return Data(roles, value.features, plan)
    if role in "DL":
        roles = value.roles if keep else value.roles[:axis] + value.roles[axis + 1:]
        return Data(roles, value.features, value.plan)
    raise _refuse(walk, node, f"indexes the {'batch' if role == 'B' else 'feature'} axis of "
                              f"{''.join(value.roles)}", LayoutError)


def _gather(walk: Walk, node: Any) -> None:
    value = _data(walk, node, 0)
    indices = _const(walk, node, 1, "indices")
    rank = len(value.items[0].roles) if isinstance(value, Stack) else len(value.roles)
    axis = int(_attrs(node).get("axis", 0)) % rank
    if indices.size != 1:
        raise _refuse(walk, node, f"gathers {indices.size} entries; edgernn follows taking one (the last step)")
    _set(walk, node, _pick(walk, node, value, axis, int(indices.reshape(-1)[0]), keep=indices.ndim > 0))


def _slice(walk: Walk, node: Any) -> None:
    value = _data(walk, node, 0)
    if isinstance(value, Stack):
        shape = walk.shape(value.items[0])
        shape[value.axis] = len(value.items)
    else:
        shape = walk.shape(value)
    if len(node.input) == 1:  # Slice before opset 10: its bounds are attributes
        attrs = _attrs(node)
        starts, ends, axes, steps = attrs["starts"], attrs["ends"], attrs.get("axes"), None
    else:
        starts, ends = _const(walk, node, 1, "starts"), _const(walk, node, 2, "ends")
        axes = _const(walk, node, 3, "axes")
        steps = _const(walk, node, 4, "steps")
    axes = list(range(len(starts))) if axes is None else [int(a) % len(shape) for a in axes]
    steps = [1] * len(starts) if steps is None else [int(s) for s in steps]
    result = value
    for axis, start, end, step in zip(axes, starts, ends, steps):
        size = shape[axis]
        first, stop, _ = slice(int(start), int(min(end, INT64_MAX)), step).indices(size)
        if step == 1 and first == 0 and stop >= size:
            continue  # the whole axis
        if step != 1 or stop - first != 1 or first != size - 1:
            raise _refuse(walk, node, f"slices [{start}:{end}:{step}] of an axis of {size}; edgernn follows "
                                      "slices that take the last entry only")
        result = _pick(walk, node, result, axis, int(start) if start < 0 else first, keep=True)
    _set(walk, node, result)


def _concat(walk: Walk, node: Any) -> None:
    parts = [walk.data.get(name) for name in node.input]
    if any(not isinstance(p, Data) for p in parts):
        raise _refuse(walk, node, "concatenates the data with constants or with stacked states")
    axis = int(_attrs(node)["axis"]) % len(parts[0].roles)
    if any(p.roles != parts[0].roles or p.roles[axis] != "D" for p in parts):
        raise _refuse(walk, node, "concatenates data along another axis than the RNN layers' last states")
    _set(walk, node, Stack(tuple(parts), axis))


# Recurrent nodes.

def _recurrent(walk: Walk, node: Any) -> None:
    walk.has_rnn = True
    value = _vector(walk, node, _data(walk, node, 0))
    attrs = _attrs(node)
    _check_rnn_attrs(walk, node, attrs)
    layout = int(attrs.get("layout", 0))
    expected = ("B", "T", "F") if layout else ("T", "B", "F")
    if value.roles != expected:
        raise _refuse(walk, node, f"reads axes {''.join(value.roles)} where its layout={layout} wants "
                                  f"{''.join(expected)}", LayoutError)
    _check_rnn_inputs(walk, node)
    recurrent = _recurrent_spec(walk, node, attrs, value.features)
    plan = value.plan + (recurrent,)
    units = recurrent.units
    y_roles = ("B", "T", "D", "F") if layout else ("T", "D", "B", "F")
    h_roles = ("B", "D", "F") if layout else ("D", "B", "F")
    _set(walk, node, Data(y_roles, units, plan), 0)
    _set(walk, node, Data(h_roles, units, plan + (Last(node.name),)), 1)
    _set(walk, node, Refused(f"{walk.file}: {_node_label(node)}: the model uses its cell state output Y_c; "
                             "edgernn streams models whose output is made from the hidden state"), 2)


def _check_rnn_attrs(walk: Walk, node: Any, attrs: dict[str, Any]) -> None:
    direction = attrs.get("direction", "forward")
    if direction != "forward":
        raise _refuse(walk, node, f"runs {direction}; edgernn streams forward RNNs only (the device cannot see "
                                  "the future of the sequence)")
    if "clip" in attrs:
        raise _refuse(walk, node, f"clips its cell input at {attrs['clip']}; Keras has no such clip")
    if attrs.get("input_forget", 0):
        raise _refuse(walk, node, "couples the input and forget gates (input_forget=1); Keras has no such LSTM")
    activations = [a.lower() for a in attrs.get("activations", [])]
    if node.op_type == "RNN":
        if activations and activations[0] not in ("tanh", "relu"):
            raise _refuse(walk, node, f"uses the activation {activations[0]}; edgernn maps Tanh and Relu")
    elif activations and activations != DEFAULT_ACTIVATIONS[node.op_type]:
        raise _refuse(walk, node, f"uses the activations {activations}; edgernn maps the default "
                                  f"{DEFAULT_ACTIVATIONS[node.op_type]} only")
    if "activation_alpha" in attrs or "activation_beta" in attrs:
        raise _refuse(walk, node, "sets activation_alpha/activation_beta; edgernn maps plain Tanh and Relu")


def _check_rnn_inputs(walk: Walk, node: Any) -> None:
    names = list(node.input) + [""] * 8
    if names[4]:
        raise _refuse(walk, node, "takes sequence_lens; edgernn runs every step it is given")
    states = (5, 6) if node.op_type == "LSTM" else (5,)
    for index in states:
        name = names[index]
        if not name:
            continue
        if name in walk.data:
            raise _refuse(walk, node, "takes a non-zero initial state fed from outside; edgernn starts every state "
                                      "at zero")
        if np.any(walk.consts[name] != 0):
            raise _refuse(walk, node, "starts from a non-zero initial state fed from outside (a constant); edgernn "
                                      "starts every state at zero")
    if node.op_type == "LSTM" and names[7]:
        raise _refuse(walk, node, "has peephole weights P; Keras' LSTM has none")


def _recurrent_spec(walk: Walk, node: Any, attrs: dict[str, Any], features: int) -> Recurrent:
    from edgernn.keras.interop import keras_gru_weights, keras_lstm_weights, keras_rnn_weights

    gates = RNN_OPS[node.op_type]
    w = _const(walk, node, 1, "W")
    r = _const(walk, node, 2, "R")
    b = _const(walk, node, 3, "B")
    units = int(attrs.get("hidden_size", r.shape[-1]))
    if w.shape != (1, gates * units, features) or r.shape != (1, gates * units, units):
        raise _refuse(walk, node, f"has W {list(w.shape)} and R {list(r.shape)} for {features} features and "
                                  f"{units} units")
    b = np.zeros(2 * gates * units, np.float32) if b is None else b.reshape(-1).astype(np.float32)
    wb, rb = b[: gates * units], b[gates * units:]
    if node.op_type == "LSTM":
        weights = keras_lstm_weights(w[0], r[0], wb, rb, gate_order="iofc")
        return Recurrent("LSTM", units, tuple(weights), node=node.name)
    if node.op_type == "GRU":
        reset_after = bool(attrs.get("linear_before_reset", 0))
        weights = keras_gru_weights(w[0], r[0], wb, rb, gate_order="zrh", reset_after=reset_after)
        return Recurrent("GRU", units, tuple(weights), reset_after=reset_after, node=node.name)
    activation = ([a.lower() for a in attrs.get("activations", [])] or ["tanh"])[0]
    weights = keras_rnn_weights(w[0], r[0], wb, rb)
    return Recurrent("SimpleRNN", units, tuple(weights), activation=activation, node=node.name)


HANDLERS: dict[str, Callable[[Walk, Any], None]] = {
    **{op: _pass for op in PASS_THROUGH},
    **{op: _elementwise for op in ELEMENTWISE_OPS},
    "Shape": _shape_of_data, "Cast": _cast, "Softmax": _softmax, "MatMul": _matmul, "Gemm": _gemm, "Transpose": _transpose, "Squeeze": _squeeze,
    "Reshape": _reshape, "Gather": _gather, "Slice": _slice, "Concat": _concat,
    **{op: _recurrent for op in RNN_OPS},
}


# ----------------------------------------------------------------------------------------------------------
# The Keras model.

def _checked_plan(out: Data, walk: Walk) -> tuple:
    plan = out.plan
    rnns = [i for i, op in enumerate(plan) if isinstance(op, Recurrent)]
    if not rnns:
        raise EdgeRNNError(f"{walk.file}: the output does not go through an LSTM, GRU or RNN node; edgernn "
                           f"converts recurrent models ({UNROLLED_HINT} if the cell was unrolled)")
    lasts = [i for i, op in enumerate(plan) if isinstance(op, Last)]
    if lasts and lasts[0] < rnns[-1]:
        node = plan[lasts[0]].node
        raise EdgeRNNError(f"{walk.file}: node {node!r} takes the last step before the RNN node "
                           f"{plan[rnns[-1]].node!r}; edgernn streams RNN layers that see every step")
    if "B" not in out.roles or out.roles[-1] != "F":
        raise EdgeRNNError(f"{walk.file}: the output's axes {''.join(out.roles)} are not (batch, [steps,] features)")
    return plan


def _build_keras(plan: tuple, features: int, stem: str) -> Any:
    from edgernn import tfenv

    keras = tfenv.keras3()
    last_rnn = max(i for i, op in enumerate(plan) if isinstance(op, Recurrent))
    sequences = not any(isinstance(op, Last) for op in plan)
    inp = keras.Input((None, features), name="x")
    tensor = inp
    for i, op in enumerate(plan):
        if isinstance(op, Last):
            continue
        layer = _keras_layer(keras, op, return_sequences=sequences or i != last_rnn)
        tensor = layer(tensor)
        if isinstance(op, (Dense, Recurrent)):
            weights = [op.kernel] + ([op.bias] if op.bias is not None else []) if isinstance(op, Dense) else op.weights
            layer.set_weights(list(weights))
    return keras.Model(inp, tensor, name=keras_name(stem, "onnx_model"))


def _keras_layer(keras: Any, op: Any, return_sequences: bool) -> Any:
    layers = keras.layers
    if isinstance(op, Dense):
        return layers.Dense(op.kernel.shape[1], use_bias=op.bias is not None)
    if isinstance(op, Recurrent):
        if op.kind == "LSTM":
            return layers.LSTM(op.units, return_sequences=return_sequences)
        if op.kind == "GRU":
            return layers.GRU(op.units, return_sequences=return_sequences, reset_after=op.reset_after)
        return layers.SimpleRNN(op.units, activation=op.activation, return_sequences=return_sequences)
    if op.kind == "leaky_relu":
        return layers.LeakyReLU(negative_slope=op.value)
    if op.kind == "elu":
        return layers.ELU(alpha=op.value)
    if op.kind == "relu_max":
        return layers.ReLU(max_value=op.value)
    if op.kind == "softmax":
        return layers.Softmax()
    if op.kind == "gelu_tanh":
        return layers.Activation(_gelu_tanh)
    return layers.Activation(op.kind)


def _gelu_tanh(x: Any) -> Any:
    from edgernn import tfenv

    return tfenv.keras3().activations.gelu(x, approximate=True)


# ----------------------------------------------------------------------------------------------------------
# The file itself as the reference.

def _reference(model: Any, input_name: str, in_roles: tuple[str, ...], dims: list[int],
               out_roles: tuple[str, ...], file: str) -> Callable[[np.ndarray], np.ndarray]:
    batch = dims[in_roles.index("B")]
    steps = dims[in_roles.index("T")]
    data = model.SerializeToString()
    runner: list[Callable[[np.ndarray], np.ndarray]] = []

    def reference(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, np.float32)
        if x.ndim != 3:
            raise EdgeRNNError(f"{file}: the reference takes (sequences, steps, features); got shape {list(x.shape)}")
        if steps and x.shape[1] != steps:
            raise EdgeRNNError(f"{file} was exported for {steps} steps; it computes only {steps}-step sequences, "
                               f"not {x.shape[1]}")
        if batch and len(x) % batch:
            raise EdgeRNNError(f"{file} was exported for batches of {batch}; it computes only a multiple of {batch} "
                               f"sequences, not {len(x)}")
        if not runner:
            runner.append(_runner(data, input_name))
        # A fixed batch (1 unless the export was given more): the sequences go through that many at a time.
        size = batch or max(len(x), 1)
        try:
            parts = [runner[0](_onnx_layout(x[i:i + size], in_roles)) for i in range(0, len(x), size)]
        except Exception as err:  # onnxruntime's or the evaluator's own, often pages long
            first = str(err).strip().splitlines()[0] if str(err).strip() else ""
            raise EdgeRNNError(f"{file}: running the file on {list(x.shape)} failed ({type(err).__name__}: "
                               f"{first[:300]})") from None
        return np.concatenate([_keras_layout(p, out_roles) for p in parts], axis=0)

    return reference


def _onnx_layout(x: np.ndarray, roles: tuple[str, ...]) -> np.ndarray:
    """(sequences, steps, F) in the order of the file's input axes."""
    return np.ascontiguousarray(x.transpose([("B", "T", "F").index(r) for r in roles]))


def _keras_layout(y: np.ndarray, roles: tuple[str, ...]) -> np.ndarray:
    """The ONNX output in Keras' (batch, [steps,] features) order, unit axes squeezed."""
    keep = [i for i, r in enumerate(roles) if r not in "DL"]
    y = y.reshape([y.shape[i] for i in keep])
    kept = [roles[i] for i in keep]
    order = [kept.index(r) for r in ("B", "T", "F") if r in kept]
    return np.ascontiguousarray(y.transpose(order))


def _runner(data: bytes, input_name: str) -> Callable[[np.ndarray], np.ndarray]:
    """onnxruntime's session of the file, else (not installed, or refusing the file: it runs no RNN node of
    layout=1) the ONNX reference evaluator."""
    try:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 4
        session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        return lambda x: np.asarray(session.run(None, {input_name: x})[0])
    except Exception:  # ImportError, or onnxruntime's own Fail on a node it does not implement
        from onnx.reference import ReferenceEvaluator

        evaluator = ReferenceEvaluator(data)
        return lambda x: np.asarray(evaluator.run(None, {input_name: x})[0])
