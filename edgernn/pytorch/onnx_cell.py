"""ONNX graphs of one step of a recurrent cell as Keras RNN cells, and exports unrolled over time rolled back.

A cell that has no ONNX RNN op (an ``ncps.torch`` CfC or LTC cell, a custom cell) exports as the graph of one
step. Exported as the cell, ``torch.onnx.export(model.rnn_cell, (x_t, h, 1.0), ...)``, the graph's inputs are the
step's input ``x_t`` (batch, features), the states (batch, units) and optionally a scalar time span, and its
outputs the step's output and the new states, in the order of the state inputs. Exported as the whole
model, the same step is written once per time step ("unrolled"): :func:`roll` finds the first step's part of
the graph, checks that the second step repeats it node for node, and takes it as the cell.

:class:`OnnxCell` is the Keras cell that runs such a step: each ONNX node is evaluated with ``keras.ops``
(the float initializers are the layer's weights), so the step model edgernn converts computes exactly the
graph's arithmetic. The time span is 1, as edgernn streams one step at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from edgernn.errors import EdgeRNNError

# ops a cell's step may use (shape plumbing on constants is folded before)
CELL_OPS = {
    "Add", "Sub", "Mul", "Div", "Neg", "Abs", "Exp", "Log", "Sqrt", "Reciprocal", "Pow", "Tanh", "Sigmoid",
    "Relu", "LeakyRelu", "Softplus", "Softmax", "Erf", "Max", "Min", "Clip", "MatMul", "Gemm", "Concat", "Split",
    "Slice", "Gather", "Unsqueeze", "Squeeze", "Reshape", "Transpose", "Identity", "Cast", "ReduceSum",
    "ReduceMean", "Constant", "Dropout", "HardSigmoid",
}
TIME_SPAN = 1.0


@dataclass
class Step:
    """One step of a cell: ``nodes`` (ONNX NodeProtos in order) computing ``y`` and ``new_states`` from
    ``x``, ``states`` and the constants ``consts`` (name -> numpy array)."""

    nodes: list
    x: str
    states: list[str]
    y: str
    new_states: list[str]
    consts: dict[str, np.ndarray]
    state_sizes: list[int]
    features: int
    units: int
    where: str                    # what messages call it


def _attrs(node) -> dict:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


class _NumpyOps:
    """The few ``keras.ops`` names numpy lacks, so one evaluator folds constants and builds the cell."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def sigmoid(x):
        return 1.0 / (1.0 + np.exp(-x))

    @staticmethod
    def relu(x):
        return np.maximum(x, 0)

    @staticmethod
    def softplus(x):
        return np.logaddexp(0, x)

    @staticmethod
    def leaky_relu(x, negative_slope=0.2):
        return np.where(x >= 0, x, x * negative_slope)

    @staticmethod
    def softmax(x, axis=-1):
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return e / np.sum(e, axis=axis, keepdims=True)

    @staticmethod
    def erf(x):
        import math

        return np.vectorize(math.erf)(x).astype(np.asarray(x).dtype)

    @staticmethod
    def hard_sigmoid(x):
        return np.clip(x / 6 + 0.5, 0, 1)

    @staticmethod
    def take(x, indices, axis=None):
        return np.take(x, indices, axis=axis)


NUMPY_OPS = _NumpyOps()


def run_node(node, args: list, ops: Any) -> list:
    """The node's outputs from its inputs (numpy arrays, or Keras tensors with ``ops`` = keras.ops)."""
    a = _attrs(node)
    op = node.op_type
    x = args[0] if args else None
    if op in ("Identity", "Dropout"):
        return [x]
    if op == "Cast":
        return [x if not isinstance(x, np.ndarray) else x.astype(_numpy_type(a["to"]))]
    if op == "Constant":
        return [_constant(a)]
    binary = {"Add": ops.add, "Sub": ops.subtract, "Mul": ops.multiply, "Div": ops.divide, "Pow": ops.power,
              "Max": ops.maximum, "Min": ops.minimum}
    if op in binary:
        out = args[0]
        for other in args[1:]:
            out = binary[op](out, other)
        return [out]
    unary = {"Neg": ops.negative, "Abs": ops.abs, "Exp": ops.exp, "Log": ops.log, "Sqrt": ops.sqrt,
             "Tanh": ops.tanh, "Sigmoid": ops.sigmoid, "Relu": ops.relu, "Softplus": ops.softplus,
             "Erf": ops.erf}
    if op in unary:
        return [unary[op](x)]
    if op == "Reciprocal":
        return [ops.divide(np.float32(1.0), x)]
    if op == "LeakyRelu":
        return [ops.leaky_relu(x, negative_slope=float(a.get("alpha", 0.01)))]
    if op == "HardSigmoid":
        alpha, beta = float(a.get("alpha", 0.2)), float(a.get("beta", 0.5))
        return [ops.clip(ops.add(ops.multiply(x, np.float32(alpha)), np.float32(beta)), 0.0, 1.0)]
    if op == "Softmax":
        return [ops.softmax(x, axis=int(a.get("axis", -1)))]
    if op == "Clip":
        low = args[1] if len(args) > 1 and args[1] is not None else a.get("min", -np.inf)
        high = args[2] if len(args) > 2 and args[2] is not None else a.get("max", np.inf)
        return [ops.clip(x, float(np.asarray(low)), float(np.asarray(high)))]
    if op == "MatMul":
        return [ops.matmul(x, args[1])]
    if op == "Gemm":
        left = ops.transpose(x) if a.get("transA") else x
        right = ops.transpose(args[1]) if a.get("transB") else args[1]
        out = ops.matmul(left, right)
        if float(a.get("alpha", 1.0)) != 1.0:
            out = ops.multiply(out, np.float32(a["alpha"]))
        if len(args) > 2 and args[2] is not None:
            bias = args[2] if float(a.get("beta", 1.0)) == 1.0 else args[2] * np.float32(a["beta"])
            out = ops.add(out, bias)
        return [out]
    if op == "Concat":
        return [ops.concatenate(list(args), axis=int(a["axis"]))]
    if op == "Split":
        axis = int(a.get("axis", 0))
        sizes = args[1] if len(args) > 1 and args[1] is not None else a.get("split")
        if sizes is None:
            parts = int(a.get("num_outputs", len(node.output)))
            return list(ops.split(x, parts, axis=axis))
        bounds = np.cumsum(np.asarray(sizes, np.int64))[:-1].tolist()
        return list(ops.split(x, bounds, axis=axis))
    if op == "Slice":
        return [_slice(x, args, ops)]
    if op == "Gather":
        index = np.asarray(args[1])
        axis = int(a.get("axis", 0))
        if index.ndim == 0:
            key = [slice(None)] * axis + [int(index)]
            return [x[tuple(key)]]
        return [ops.take(x, index.astype(np.int64), axis=axis)]
    if op == "Unsqueeze":
        axes = args[1] if len(args) > 1 else a["axes"]
        out = x
        for axis in sorted(int(v) for v in np.asarray(axes).reshape(-1)):
            out = ops.expand_dims(out, axis)
        return [out]
    if op == "Squeeze":
        axes = args[1] if len(args) > 1 else a.get("axes")
        if axes is None:
            return [ops.squeeze(x)]
        out = x
        for axis in sorted((int(v) for v in np.asarray(axes).reshape(-1)), reverse=True):
            out = ops.squeeze(out, axis=axis)
        return [out]
    if op == "Reshape":
        shape = [int(v) for v in np.asarray(args[1]).reshape(-1)]
        if not isinstance(x, np.ndarray) and shape and -1 not in shape[1:]:
            shape[0] = -1   # the batch: one in the export, any in the Keras cell
        return [ops.reshape(x, shape)]
    if op == "Transpose":
        return [ops.transpose(x, a.get("perm"))]
    if op in ("ReduceSum", "ReduceMean"):
        axes = args[1] if len(args) > 1 and args[1] is not None else a.get("axes")
        keep = bool(a.get("keepdims", 1))
        if axes is None or np.asarray(axes).size == 0:
            if a.get("noop_with_empty_axes"):
                return [x]
            axis = None
        else:
            axis = tuple(int(v) for v in np.asarray(axes).reshape(-1))
        fn = ops.sum if op == "ReduceSum" else ops.mean
        return [fn(x, axis=axis, keepdims=keep)]
    raise EdgeRNNError(f"node '{node.name}' ({op}) has no Keras equivalent in edgernn")


def _slice(x, args: list, ops) -> Any:
    starts = np.asarray(args[1]).reshape(-1)
    ends = np.asarray(args[2]).reshape(-1)
    axes = np.asarray(args[3]).reshape(-1) if len(args) > 3 and args[3] is not None else np.arange(len(starts))
    steps = np.asarray(args[4]).reshape(-1) if len(args) > 4 and args[4] is not None else np.ones(len(starts), int)
    rank = len(x.shape)
    key = [slice(None)] * rank
    for start, end, axis, step in zip(starts, ends, axes, steps):
        big = np.iinfo(np.int64).max // 2
        end = None if abs(int(end)) >= big else int(end)
        start = None if abs(int(start)) >= big else int(start)
        key[int(axis) % rank] = slice(start, end, int(step))
    return x[tuple(key)]


def _constant(a: dict) -> np.ndarray:
    from onnx import numpy_helper

    if "value" in a:
        return numpy_helper.to_array(a["value"])
    for key in ("value_float", "value_int"):
        if key in a:
            return np.asarray(a[key])
    for key in ("value_floats", "value_ints"):
        if key in a:
            return np.asarray(list(a[key]))
    raise EdgeRNNError("a Constant node holds a kind of value edgernn does not read")


def _numpy_type(code: int):
    from onnx import helper

    return helper.tensor_dtype_to_np_dtype(code)


# ---------------------------------------------------------------- the Keras cell


def cell_class(keras):
    """OnnxCell, defined once Keras is imported."""
    if "OnnxCell" in _CLASSES:
        return _CLASSES["OnnxCell"]

    class OnnxCell(keras.layers.Layer):
        """A recurrent cell running one step of an ONNX graph with keras.ops; its weights are the graph's
        float initializers."""

        def __init__(self, step: Step | None = None, **kwargs):
            super().__init__(**kwargs)
            self.step = step
            self.state_size = list(step.state_sizes) if step else []
            self.output_size = step.units if step else 0
            self._const_names = sorted(n for n, v in (step.consts.items() if step else ())
                                       if v.dtype == np.float32 and v.size > 1)

        def build(self, input_shape):
            self._weights_by_name = {}
            for index, name in enumerate(self._const_names):
                value = self.step.consts[name]
                self._weights_by_name[name] = self.add_weight(
                    shape=value.shape, name=f"c{index}", trainable=False,
                    initializer=keras.initializers.Constant(value))
            self.built = True

        def call(self, inputs, states, training=None):
            ops = keras.ops
            env: dict[str, Any] = {}
            for name, value in self.step.consts.items():
                env[name] = self._weights_by_name.get(name, value)
            env[self.step.x] = inputs
            for name, state in zip(self.step.states, states):
                env[name] = state
            for node in self.step.nodes:
                outs = run_node(node, [env[n] if n else None for n in node.input], ops)
                for name, value in zip(node.output, outs):
                    env[name] = value
            new = [env[n] for n in self.step.new_states]
            return env[self.step.y], new

        def get_config(self):
            config = super().get_config()
            if self.step is not None:
                config.update({"onnx_nodes": [n.op_type for n in self.step.nodes], "where": self.step.where})
            return config

    _CLASSES["OnnxCell"] = OnnxCell
    return OnnxCell


_CLASSES: dict[str, Any] = {}


def keras_layer(step: Step, keras, *, return_sequences: bool = True, name: str = "onnx_cell"):
    cell = cell_class(keras)(step, name=f"{name}_cell")
    layer = keras.layers.RNN(cell, return_sequences=return_sequences, name=name)
    layer.build((None, None, step.features))
    return layer


# ---------------------------------------------------------------- the graph of one step


def fold(nodes: list, consts: dict[str, np.ndarray], data: set[str]) -> tuple[list, dict]:
    """Evaluate with numpy every node whose inputs are all constants; the rest, in order, and the constants.
    Every node left must be one a cell may use."""
    consts, rest = _fold_all(nodes, consts, data, {})
    for node in rest:
        if node.op_type not in CELL_OPS:
            raise EdgeRNNError(f"node '{node.name}' ({node.op_type}) is outside what edgernn maps in a cell; it maps "
                               f"{', '.join(sorted(CELL_OPS - {'Constant', 'Identity', 'Dropout'}))}")
    return rest, consts


def cell_step(model, where: str) -> Step | None:
    """The graph as one step of a cell, or None when its inputs and outputs are not a cell's."""
    from onnx import numpy_helper

    graph = model.graph
    inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    inputs = [i for i in graph.input if i.name not in inits]
    if len(inputs) < 2 or len(graph.output) < 2:
        return None
    shapes = {i.name: _dims(i) for i in inputs}
    x = inputs[0].name
    if len(shapes[x]) != 2:
        return None
    states, spans = [], []
    for i in inputs[1:]:
        dims = shapes[i.name]
        (states if len(dims) == 2 else spans).append(i.name)
        if len(dims) > 2 or (len(dims) < 2 and _size(dims) not in (1, None)):
            return None
    outputs = [o.name for o in graph.output]
    out_dims = {o.name: _dims(o) for o in graph.output}
    if len(outputs) - 1 != len(states):
        raise EdgeRNNError(f"{where}: a cell's graph gives its output and then one new state per state input; "
                           f"this one has {len(states)} state inputs and {len(outputs)} outputs")
    for state, new in zip(states, outputs[1:]):
        if out_dims[new] and shapes[state] and out_dims[new][1:] != shapes[state][1:]:
            raise EdgeRNNError(f"{where}: output '{new}' {out_dims[new]} does not match state input '{state}' "
                               f"{shapes[state]}")
    consts = {**inits, **{i.name: _span(i) for i in inputs if i.name in spans}}
    nodes, consts = fold(list(graph.node), consts, {x, *states})
    sizes = [int(shapes[s][1]) for s in states]
    y_dims = out_dims[outputs[0]]
    units = int(y_dims[-1]) if y_dims and y_dims[-1] else _probe_units(nodes, consts, x, states, sizes,
                                                                           int(shapes[x][1]), outputs[0])
    return Step(nodes=nodes, x=x, states=states, y=outputs[0], new_states=outputs[1:], consts=consts,
                state_sizes=sizes, features=int(shapes[x][1]), units=units, where=where)


def _probe_units(nodes, consts, x, states, sizes, features, y) -> int:
    env = dict(consts)
    env[x] = np.zeros((1, features), np.float32)
    for name, size in zip(states, sizes):
        env[name] = np.zeros((1, size), np.float32)
    for node in nodes:
        for name, value in zip(node.output, run_node(node, [env[n] if n else None for n in node.input], NUMPY_OPS)):
            env[name] = value
    return int(np.asarray(env[y]).shape[-1])


def _span(value_info) -> np.ndarray:
    """The time-span input's value: 1 in its own type and shape."""
    kind = _numpy_type(value_info.type.tensor_type.elem_type)
    return np.full([d or 1 for d in _dims(value_info)], TIME_SPAN, kind)


def _dims(value_info) -> list[int | None]:
    shape = value_info.type.tensor_type.shape
    return [d.dim_value if d.HasField("dim_value") else None for d in shape.dim]


def _size(dims: list) -> int | None:
    if any(d is None for d in dims):
        return None
    return int(np.prod(dims)) if dims else 1


def step_reference(model, step: Step) -> Callable[[np.ndarray], np.ndarray]:
    """The cell's ONNX graph itself (onnxruntime, or onnx.reference without it) run over (sequences, steps,
    features), its states fed back from zero and its time span 1."""
    feeds_fixed = {i.name: _span(i) for i in model.graph.input if i.name not in (step.x, *step.states)
                   and i.name not in {t.name for t in model.graph.initializer}}
    runner = session(model)
    outputs = [step.y, *step.new_states]

    def run(sequences: np.ndarray) -> np.ndarray:
        sequences = np.asarray(sequences, np.float32)
        out = np.zeros((*sequences.shape[:2], step.units), np.float32)
        for s, sequence in enumerate(sequences):
            states = [np.zeros((1, n), np.float32) for n in step.state_sizes]
            for t, xt in enumerate(sequence):
                got = runner(outputs, {step.x: xt.reshape(1, -1), **dict(zip(step.states, states)), **feeds_fixed})
                out[s, t] = np.asarray(got[0], np.float32).reshape(-1)
                states = [np.asarray(v, np.float32) for v in got[1:]]
        return out

    return run


def session(model) -> Callable[[list[str], dict], list]:
    """run(output names, feeds) on the ONNX model: onnxruntime when installed, else onnx.reference."""
    try:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.log_severity_level = 3
        sess = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        return lambda names, feeds: sess.run(names, feeds)
    except ImportError:
        from onnx.reference import ReferenceEvaluator

        evaluator = ReferenceEvaluator(model)
        return lambda names, feeds: evaluator.run(names, feeds)


# ---------------------------------------------------------------- exports unrolled over time, rolled back

PER_STEP_TAIL = {"MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Tanh", "Sigmoid", "Relu", "LeakyRelu", "Softplus", "Softmax",
                 "Identity", "Dropout", "Clip", "Neg", "Exp", "Erf", "HardSigmoid"}


@dataclass
class Rolled:
    """An unrolled export taken back to one cell: its step (with the per-step layers after it) and the step
    model as an ONNX model of its own, the time axis of the input, the export's steps, and whether the
    model's output is every step's or the last one's."""

    step: Step
    cell_model: Any
    time_axis: int
    steps: int
    return_sequences: bool


def unrolled_slices(graph, x: str, consts: dict) -> dict[int, tuple[str, list]] | None:
    """{t: (the step's input tensor, the nodes taking it out of x)} when x is cut into time steps."""
    found: dict[int, tuple[str, list]] = {}
    axis_seen = set()
    consumers = _consumers(graph.node)
    for node in consumers.get(x, []):
        a = _attrs(node)
        if node.op_type == "Gather" and node.input[1] in consts and np.asarray(consts[node.input[1]]).ndim == 0:
            axis_seen.add(int(a.get("axis", 0)))
            found[int(consts[node.input[1]])] = (node.output[0], [node])
        elif node.op_type == "Slice" and all(n in consts for n in node.input[1:] if n):
            starts = np.asarray(consts[node.input[1]]).reshape(-1)
            ends = np.asarray(consts[node.input[2]]).reshape(-1)
            axes = np.asarray(consts[node.input[3]]).reshape(-1) if len(node.input) > 3 and node.input[3] else [0]
            if len(starts) != 1 or int(ends[0]) != int(starts[0]) + 1:
                return None
            squeeze = [c for c in consumers.get(node.output[0], []) if c.op_type in ("Squeeze", "Reshape")]
            if len(squeeze) != 1:
                return None
            axis_seen.add(int(axes[0]))
            found[int(starts[0])] = (squeeze[0].output[0], [node, squeeze[0]])
        else:
            return None
    if len(axis_seen) != 1:
        return None
    return found


def _consumers(nodes) -> dict[str, list]:
    out: dict[str, list] = {}
    for node in nodes:
        for name in node.input:
            if name:
                out.setdefault(name, []).append(node)
    return out


def _reach(start: str, consumers: dict[str, list]) -> list:
    seen, order, todo = set(), [], [start]
    while todo:
        name = todo.pop()
        for node in consumers.get(name, []):
            if id(node) not in seen:
                seen.add(id(node))
                order.append(node)
                todo.extend(node.output)
    return order


def roll(model, where: str) -> Rolled | None:
    """The cell of an export unrolled over its time steps, or None when the graph is not cut into steps.

    Step t's part of the graph is what the step's input x_t reaches and x_{t+1} does not. Where a cell first
    works on its old state alone, that work lands in the step before: the states found are where the steps
    meet, which may be more tensors than the cell's own state. The first step reads their initial values as
    constants (the export folds its work on the zero state), so the cell keeps each state less its initial
    value and starts from zero as edgernn does.
    """
    from onnx import numpy_helper, shape_inference

    graph = model.graph
    inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    inputs = [i for i in graph.input if i.name not in inits]
    if len(inputs) != 1 or len(_dims(inputs[0])) != 3:
        return None
    x = inputs[0].name
    try:
        inferred = shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - shapes only help folding Shape nodes
        inferred = model
    known = {v.name: _dims(v) for v in [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]}
    consts, nodes = _fold_all(list(graph.node), inits, {x}, known)
    slices = unrolled_slices(_Graph(nodes), x, consts)
    if not slices:
        return None
    steps = len(slices)
    first_cut = slices[min(slices)][1][0]
    time_axis = int(_attrs(first_cut).get("axis", 1)) if first_cut.op_type == "Gather" else 1
    slices = {t % steps: v for t, v in slices.items()}
    if sorted(slices) != list(range(steps)):
        raise EdgeRNNError(f"{where}: the export takes some steps of its input more than once; edgernn rolls back "
                           "an export that takes every step in turn")
    if steps < 3:
        raise EdgeRNNError(f"{where} is unrolled over {steps} steps; export it over at least 3 steps (or export "
                           "its cell) so edgernn can tell the cell's states from its constants")
    consumers = _consumers(nodes)
    reach = [set(map(id, _reach(slices[t][0], consumers))) for t in range(3)]
    cut = {id(n) for t in range(3) for n in slices[t][1]}
    region = [[n for n in nodes if id(n) in reach[t] and id(n) not in reach[t + 1] and id(n) not in cut]
              for t in range(2)]
    rolled = _match_regions(model, where, consts, x, slices, region, time_axis, steps, consumers)
    _check_rolled(model, where, rolled)
    return rolled


def _check_rolled(model, where: str, rolled: "Rolled") -> None:
    """The rolled cell from zero state against the export itself over its own steps."""
    graph_input = [i for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}][0]
    shape = [d or 1 for d in _dims(graph_input)]
    x = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
    want = np.asarray(session(model)([model.graph.output[0].name], {graph_input.name: x})[0], np.float32)
    batch_first = x if rolled.time_axis == 1 else np.swapaxes(x, 0, 1)
    got = step_reference(rolled.cell_model, rolled.step)(batch_first[:1])
    got = got if rolled.return_sequences else got[:, -1]
    if rolled.time_axis == 0 and rolled.return_sequences:
        want = np.swapaxes(want, 0, 1)
    if want.size != got.size:
        raise EdgeRNNError(f"{where}: the rolled-back cell gives {got.shape}, the export {want.shape}; export the "
                           "cell itself (torch.onnx.export(model.rnn_cell, (x_t, h, 1.0), ...))")
    want = want.reshape(got.shape)
    rel = float(np.max(np.abs(got - want))) / max(float(np.max(np.abs(want))), 1e-6)
    if rel > 1e-5:
        raise EdgeRNNError(f"{where}: the rolled-back cell differs from the export by {rel:.1e} (relative), so its steps "
                           "are not one cell repeated; export the cell itself (torch.onnx.export(model.rnn_cell, "
                           "(x_t, h, 1.0), ...))")


class _Graph:
    def __init__(self, nodes):
        self.node = nodes


def _fold_all(nodes: list, consts: dict, data: set[str], known: dict) -> tuple[dict, list]:
    from onnx import numpy_helper

    consts = dict(consts)
    rest = []
    for node in nodes:
        if node.op_type == "Shape" and known.get(node.input[0]) and all(known[node.input[0]]):
            consts[node.output[0]] = np.asarray(known[node.input[0]], np.int64)
            continue
        if node.op_type == "ConstantOfShape" and node.input[0] in consts:
            value = _attrs(node).get("value")
            fill = numpy_helper.to_array(value).reshape(-1)[0] if value is not None else np.float32(0)
            consts[node.output[0]] = np.full(np.asarray(consts[node.input[0]]).astype(np.int64), fill)
            continue
        if node.op_type == "Expand" and all(n in consts for n in node.input):
            base = np.asarray(consts[node.input[0]])
            consts[node.output[0]] = base * np.ones(np.asarray(consts[node.input[1]]).astype(np.int64), base.dtype)
            continue
        if all((not n) or n in consts for n in node.input) and node.op_type in CELL_OPS:
            outs = run_node(node, [consts[n] if n else None for n in node.input], NUMPY_OPS)
            for name, value in zip(node.output, outs):
                consts[name] = np.asarray(value)
        else:
            rest.append(node)
            data.update(node.output)
    return consts, rest


def _value_hash(value) -> str:
    import hashlib

    value = np.asarray(value)
    return hashlib.sha1(value.tobytes() + str((value.shape, value.dtype)).encode()).hexdigest()


def _signatures(nodes: list, x: str, consts: dict, weights: set[str] | None) -> dict[int, str]:
    """A structural name for each node of one step: its op, attributes and what its inputs are (the step's
    input, a weight's value, a state from outside, or another node's signature and output). ``weights``: the
    value hashes of the constants that are weights; any other constant is taken for a state's initial value
    (None: every constant is a weight)."""
    import hashlib

    made = {o: (n, k) for n in nodes for k, o in enumerate(n.output)}
    sigs: dict[int, str] = {}

    def of(node) -> str:
        if id(node) in sigs:
            return sigs[id(node)]
        parts = [node.op_type, repr(sorted((a.name, str(a)) for a in node.attribute))]
        for name in node.input:
            if not name:
                parts.append("-")
            elif name == x:
                parts.append("X")
            elif name in made:
                producer, k = made[name]
                parts.append(f"{of(producer)}:{k}")
            elif name in consts and (weights is None or _value_hash(consts[name]) in weights):
                parts.append("C" + _value_hash(consts[name]))
            else:
                parts.append("S")
        sigs[id(node)] = hashlib.sha1("|".join(parts).encode()).hexdigest()
        return sigs[id(node)]

    for node in nodes:
        of(node)
    return sigs


def _pair(first: list, second: list, x0: str, x1: str, consts: dict) -> list | None:
    """The two steps' nodes paired by their signatures, in the second step's order; None when they differ."""
    if len(first) != len(second):
        return None
    weights = {_value_hash(consts[n]) for node in second for n in node.input if n in consts}
    sig0, sig1 = _signatures(first, x0, consts, weights), _signatures(second, x1, consts, None)
    groups: dict[str, list] = {}
    for node in first:
        groups.setdefault(sig0[id(node)], []).append(node)
    pairs = []
    for node in second:
        bucket = groups.get(sig1[id(node)])
        if not bucket:
            return None
        pairs.append((bucket.pop(0), node))
    return pairs


def _match_regions(model, where, consts, x, slices, region, time_axis, steps, consumers) -> Rolled:
    from onnx import helper, numpy_helper

    x0, x1 = slices[0][0], slices[1][0]
    pairs = _pair(region[0], region[1], x0, x1, consts)
    if pairs is None:
        raise EdgeRNNError(f"{where} is unrolled over time, but its second step does not repeat its first node for "
                           "node; export the cell itself (torch.onnx.export(model.rnn_cell, (x_t, h, 1.0), ...))")
    made0 = {o: (a, k) for a, _ in pairs for k, o in enumerate(a.output)}
    twin = {id(a): b for a, b in pairs}
    states: list[str] = []                # step 0's tensors that step 1 reads: the states (step 0's new values)
    initial: dict[str, np.ndarray] = {}   # ... and their values before step 0, which step 0 read as constants
    for a, b in pairs:
        for in0, in1 in zip(a.input, b.input):
            if (in0, in1) == (x0, x1) or (not in0 and not in1):
                continue
            if in1 in made0:
                if in0 not in consts or (in1 in initial and not np.array_equal(initial[in1], consts[in0])):
                    raise _unroll_error(where, b)
                if in1 not in initial:
                    states.append(in1)
                    initial[in1] = np.asarray(consts[in0], np.float32)
                continue
            second_made = {o for _, n in pairs for o in n.output}
            if in1 in second_made:
                producer, k = made0.get(in0, (None, None))
                if producer is None or twin[id(producer)].output[k] != in1:
                    raise _unroll_error(where, b)
                continue
            if in1 in consts and in0 in consts and _value_hash(consts[in0]) == _value_hash(consts[in1]):
                continue
            raise _unroll_error(where, b)
    step1 = [b for _, b in pairs]
    inside = {id(n) for a, b in pairs for n in (a, b)}
    # the step's output: what step 1 gives to the node stacking every step's output
    stack = None
    for node in step1:
        for o in node.output:
            for c in consumers.get(o, []):
                # every step's output side by side, step 1's second
                if (c.op_type == "Concat" and id(c) not in inside and len(c.input) == steps
                        and c.input[1] == o):
                    stack = (o, c, node)
    if stack is not None:
        y, concat, producer = stack
        keep = list(step1)
        if producer.op_type in ("Unsqueeze", "Reshape") and len(consumers[y]) == 1:
            y = producer.input[0]
            keep.remove(producer)
        tail, y, last = _tail(model, where, consumers, concat, consts, y, time_axis)
        keep += tail
    else:
        keep = list(step1)
        tail, y = _last_step_tail(model, where, consts, slices, step1, consumers)
        keep += tail
        last = True
    # new states: step 1's twins of the states step 1 read from step 0
    new_states = []
    for name in states:
        producer, k = made0[name]
        new_states.append(twin[id(producer)].output[k])
    features = int(_shape_of(consts, model, x)[2])
    sizes = [int(initial[s].reshape(initial[s].shape[0], -1).shape[-1]) for s in states]
    # the cell keeps each state less its initial value, so that it starts from zero
    state_names = [f"state_{i}" for i in range(len(states))]
    step_consts = {n: np.asarray(consts[n]) for node in keep for n in node.input if n in consts}
    shifted, head, outputs = [], [], []
    for i, (name, new) in enumerate(zip(states, new_states)):
        if np.any(initial[name] != 0):
            step_consts[f"initial_{i}"] = initial[name]
            head.append(helper.make_node("Add", [state_names[i], f"initial_{i}"], [name], name=f"edgernn_state_{i}"))
            shifted.append(helper.make_node("Sub", [new, f"initial_{i}"], [f"{new}_less_initial"],
                                            name=f"edgernn_new_state_{i}"))
            outputs.append(f"{new}_less_initial")
        else:
            head.append(helper.make_node("Identity", [state_names[i]], [name], name=f"edgernn_state_{i}"))
            outputs.append(new)
    cell_nodes = head + keep + shifted
    step = Step(nodes=cell_nodes, x=x1, states=state_names, y=y, new_states=outputs, consts=step_consts,
                state_sizes=sizes, features=features, units=0, where=where)
    step.units = _probe_units(step.nodes, step.consts, step.x, step.states, sizes, features, y)
    cell_model = helper.make_model(helper.make_graph(
        cell_nodes, "cell",
        [helper.make_tensor_value_info(x1, 1, [1, features]),
         *[helper.make_tensor_value_info(s, 1, [1, n]) for s, n in zip(state_names, sizes)]],
        [helper.make_tensor_value_info(y, 1, None), *[helper.make_tensor_value_info(s, 1, None) for s in outputs]],
        [numpy_helper.from_array(v, n) for n, v in step_consts.items()]), opset_imports=list(model.opset_import))
    cell_model.ir_version = model.ir_version
    return Rolled(step=step, cell_model=cell_model, time_axis=time_axis, steps=steps, return_sequences=not last)


def _last_step_tail(model, where: str, consts: dict, slices: dict, step1: list, consumers: dict) -> tuple[list, str]:
    """A model whose output comes from its last step alone (``fc(h)`` after the loop): the last step's part of
    the graph is step 1's again plus the per-step layers to the output. Returns those layers, reading step 1's
    tensors, and the step's output."""
    steps = len(slices)
    cut = {id(n) for t in range(steps) for n in slices[t][1]}
    final = [n for n in _reach(slices[steps - 1][0], consumers) if id(n) not in cut]
    made = {o for n in final for o in n.output}
    order = {id(n): i for i, n in enumerate(consumers_nodes(consumers))}
    final.sort(key=lambda n: order.get(id(n), 0))
    sig1 = _signatures(step1, slices[1][0], consts, None)
    sig_final = _signatures(final, slices[steps - 1][0], consts, None)
    groups: dict[str, list] = {}
    for node in final:
        groups.setdefault(sig_final[id(node)], []).append(node)
    twin_of_final: dict[str, str] = {}
    for node in step1:
        bucket = groups.get(sig1[id(node)])
        if not bucket:   # the next step's work on the state alone: the last step has no next step
            continue
        twin = bucket.pop(0)
        twin_of_final.update(zip(twin.output, node.output))
    output = model.graph.output[0].name
    if output in twin_of_final:   # the output is the cell's own (ncps with return_sequences=False)
        return [], twin_of_final[output]
    # the layers after the cell: the last step's nodes that step 1 has no twin of, on the way to the output
    left = {o: n for bucket in groups.values() for n in bucket for o in n.output}
    needed, todo = {}, [output]
    while todo:
        node = left.get(todo.pop())
        if node is not None and id(node) not in needed:
            needed[id(node)] = node
            todo.extend(node.input)
    tail_nodes = sorted(needed.values(), key=lambda n: order.get(id(n), 0))
    if not tail_nodes:
        raise _not_stacked(where)
    tail = []
    for node in tail_nodes:
        if node.op_type not in PER_STEP_TAIL:
            raise EdgeRNNError(f"{where}: node '{node.name}' ({node.op_type}) after the unrolled cell's last step is "
                               "not a per-step layer edgernn maps (MatMul, Gemm, Add, activations)")
        clone = type(node)()
        clone.CopyFrom(node)
        for k, name in enumerate(clone.input):
            if name in twin_of_final:
                clone.input[k] = twin_of_final[name]
            elif name in made and name not in {o for n in tail_nodes for o in n.output}:
                raise _not_stacked(where)
            elif name and name not in consts and name not in {o for n in tail_nodes for o in n.output}:
                raise _not_stacked(where)
        tail.append(clone)
    return tail, output


def _not_stacked(where: str) -> EdgeRNNError:
    return EdgeRNNError(f"{where} is unrolled over time and its output is neither every step's output stacked nor "
                        "made from its last step alone; export the cell itself (torch.onnx.export(model.rnn_cell, "
                        "(x_t, h, 1.0), ...)), or pass the module to edgernn.convert in Python")


def consumers_nodes(consumers: dict) -> list:
    seen, out = set(), []
    for nodes in consumers.values():
        for node in nodes:
            if id(node) not in seen:
                seen.add(id(node))
                out.append(node)
    return out
def _shape_of(consts, model, name) -> list[int]:
    for value in model.graph.input:
        if value.name == name:
            return [d or 1 for d in _dims(value)]
    return list(np.asarray(consts[name]).shape)


def _unroll_error(where: str, node) -> EdgeRNNError:
    return EdgeRNNError(f"{where} is unrolled over time and node '{node.name}' ({node.op_type}) of its second step "
                        "reads something its first step does not; export the cell itself "
                        "(torch.onnx.export(model.rnn_cell, (x_t, h, 1.0), ...)), or pass the module to edgernn.convert")


def _tail(model, where: str, consumers: dict, concat, consts: dict, y: str, time_axis: int):
    """The nodes from the stacked steps to the model's first output, moved into the step: they act on each step
    alone. Returns (nodes, the step's output, whether the output is the last step only)."""
    output = model.graph.output[0].name
    chain, tensor, last = [], concat.output[0], False
    while tensor != output:
        after = consumers.get(tensor, [])
        if len(after) != 1:
            raise EdgeRNNError(f"{where}: the stacked steps '{tensor}' feed {len(after)} nodes; edgernn maps a chain "
                               "of per-step layers after the cell")
        node = after[0]
        if node.op_type == "Gather" and node.input[1] in consts and int(np.asarray(consts[node.input[1]])) in (-1, int(
                np.asarray(_shape_of(consts, model, model.graph.input[0].name))[time_axis]) - 1) and not last:
            last = True
        elif node.op_type in PER_STEP_TAIL and all(n == tensor or n in consts for n in node.input):
            clone = type(node)()
            clone.CopyFrom(node)
            for k, name in enumerate(clone.input):
                if name == tensor:
                    clone.input[k] = y
            for name in node.input:
                if name in consts and np.asarray(consts[name]).ndim > 2:
                    raise EdgeRNNError(f"{where}: node '{node.name}' ({node.op_type}) after the cell does not act on each step alone")
            if node.op_type == "Softmax" and int(_attrs(node).get("axis", -1)) not in (-1, 2):
                raise EdgeRNNError(f"{where}: node '{node.name}' (Softmax) after the cell is not over the features")
            chain.append(clone)
            y = node.output[0]
        else:
            raise EdgeRNNError(f"{where}: node '{node.name}' ({node.op_type}) after the unrolled cell is not a "
                               "per-step layer edgernn maps (MatMul, Add, activations)")
        tensor = node.output[0]
    return chain, y, last


def unrolled_steps(model) -> int | None:
    """How many steps an export takes one by one out of its (batch, steps, features) input, when it does."""
    from onnx import numpy_helper

    graph = model.graph
    inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    inputs = [i for i in graph.input if i.name not in inits]
    if len(inputs) != 1 or len(_dims(inputs[0])) != 3:
        return None
    try:
        consts, nodes = _fold_all(list(graph.node), inits, {inputs[0].name}, {})
    except EdgeRNNError:
        return None
    slices = unrolled_slices(_Graph(nodes), inputs[0].name, consts)
    return len(slices) if slices and len(slices) > 1 else None
