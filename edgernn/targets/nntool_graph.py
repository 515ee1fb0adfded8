"""``OUT/nntool/step_nntool.tflite``: step.tflite laid out the way GreenWaves' NNTool imports it.

The arithmetic is step.tflite's, op for op and tensor for tensor (LiteRT gives the same bytes for both,
which ``check_same_answers`` holds on the calibration steps); only the layout changes, where NNTool 4.1
stops on step.tflite's:

- every constant gets a name of its own, ``k<tensor index>``: NNTool names the copies of a constant
  that feeds several ops ``<name>_1``, ``<name>_2``, ..., which collides with TensorFlow's own names
  (``Const``, ``Const_1``) and then joins the wrong tensors ("arguments cannot be broadcasted");
- the graph's inputs are ``x`` then the states, its outputs ``y`` then the new states, in the manifest's
  order, and no tensor is listed twice (a GRU's last ``h'`` is also ``y``: NNTool's import fails with an
  IndexError on a repeated output);
- a FULLY_CONNECTED that keeps the fused LSTM's 3-D shape (``keep_num_dims``), followed by the RESHAPE to
  ``[1, n]``, becomes one 2-D FULLY_CONNECTED (NNTool's quantized import raises a KeyError on the pair);
- a RESHAPE of ``[1, n]`` to ``[n]`` whose consumers are elementwise ops against ``[1, n]`` tensors is
  dropped (the recurrent product of a Keras LSTM cell: NNTool's ``adjust`` then fails on the SPLIT after it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgernn.errors import EdgeRNNError
from edgernn.tflite import model as tfl

_ELEMENTWISE = {"ADD", "SUB", "MUL"}


@dataclass
class NNToolGraph:
    data: bytes
    inputs: list[str]    # graph inputs in order: "x", then the state names
    outputs: list[str]   # graph outputs in order: "y" (unless it is a state's output), then the state names
    y_is: str | None     # the state whose new value y is (a GRU's last h'), else None


def _shape(graph, index: int) -> list[int]:
    shape = graph.tensors[index].shape
    return [int(d) for d in shape] if shape is not None else []


def _same_quant(model, a: int, b: int) -> bool:
    qa, qb = tfl.tensor_quant(model, a), tfl.tensor_quant(model, b)
    return qa["scale"] == qb["scale"] and qa["zero_point"] == qb["zero_point"] and qa["dtype"] == qb["dtype"]


def _consumers(graph, index: int) -> list:
    return [op for op in graph.operators if index in [int(i) for i in op.inputs]]


def _replace_input(graph, old: int, new: int) -> None:
    for op in graph.operators:
        op.inputs = [new if int(i) == old else int(i) for i in op.inputs]


def _drop_rank1_reshapes(model) -> int:
    """RESHAPE [1, n] -> [n] feeding only ADD/SUB/MUL whose other operand is [1, n]: the op reads [1, n]."""
    graph = model.subgraphs[0]
    dropped = 0
    for op in list(graph.operators):
        if tfl.op_name(model, op.opcodeIndex) != "RESHAPE":
            continue
        src, dst = int(op.inputs[0]), int(op.outputs[0])
        n = _shape(graph, dst)
        if _shape(graph, src) != [1, *n] or len(n) != 1 or dst in graph.outputs or not _same_quant(model, src, dst):
            continue
        users = _consumers(graph, dst)
        if not users or any(tfl.op_name(model, u.opcodeIndex) not in _ELEMENTWISE
                            or _shape(graph, int(u.outputs[0])) != [1, *n] for u in users):
            continue
        _replace_input(graph, dst, src)
        graph.operators.remove(op)
        dropped += 1
    return dropped


def _flatten_fc_reshape(model) -> int:
    """FULLY_CONNECTED (keep_num_dims, [1, 1, n]) then RESHAPE to [1, n]: one FULLY_CONNECTED writing [1, n]."""
    graph = model.subgraphs[0]
    merged = 0
    for op in list(graph.operators):
        if tfl.op_name(model, op.opcodeIndex) != "FULLY_CONNECTED" or not getattr(op.builtinOptions, "keepNumDims", False):
            continue
        out = int(op.outputs[0])
        users = _consumers(graph, out)
        if len(users) != 1 or tfl.op_name(model, users[0].opcodeIndex) != "RESHAPE" or out in graph.outputs:
            continue
        reshape = users[0]
        final = int(reshape.outputs[0])
        shape = _shape(graph, out)
        if _shape(graph, final) != [1, shape[-1]] or any(d != 1 for d in shape[:-1]) or not _same_quant(model, out, final):
            continue
        op.builtinOptions.keepNumDims = False
        op.outputs = [final]
        graph.operators.remove(reshape)
        merged += 1
    return merged


def _name_constants(model) -> None:
    graph = model.subgraphs[0]
    for index, tensor in enumerate(graph.tensors):
        buf = model.buffers[tensor.buffer] if tensor.buffer < len(model.buffers) else None
        if buf is not None and buf.data is not None and len(buf.data):
            tensor.name = f"k{index}".encode()


def _drop_unused_tensors(model) -> None:
    """Tensors no op and no graph end refers to any more (what a dropped RESHAPE wrote) are removed."""
    graph = model.subgraphs[0]
    used = {int(i) for i in [*graph.inputs, *graph.outputs] if int(i) >= 0}
    for op in graph.operators:
        used |= {int(i) for i in [*op.inputs, *op.outputs, *(op.intermediates if op.intermediates is not None else [])]
                 if int(i) >= 0}
    keep = sorted(used)
    new_index = {old: new for new, old in enumerate(keep)}

    def remap(values):
        return [new_index[int(i)] if int(i) >= 0 else -1 for i in values]

    graph.tensors = [graph.tensors[i] for i in keep]
    graph.inputs, graph.outputs = remap(graph.inputs), remap(graph.outputs)
    for op in graph.operators:
        op.inputs, op.outputs = remap(op.inputs), remap(op.outputs)
        if op.intermediates is not None:
            op.intermediates = remap(op.intermediates)
    for sig in model.signatureDefs or []:
        for item in [*sig.inputs, *sig.outputs]:
            item.tensorIndex = new_index[int(item.tensorIndex)]


def nntool_step_graph(step: bytes, manifest) -> NNToolGraph:
    """step.tflite's bytes -> the same step laid out for NNTool (see the module's docstring)."""
    model = tfl.read(step)
    graph = model.subgraphs[0]
    sig_in, sig_out = tfl.signature(model)
    fused = manifest.mode == "fused"
    state_names = [] if fused else [s["name"] for s in manifest.states]
    try:
        in_order = [sig_in["x"], *(sig_in[name] for name in state_names)]
        y = sig_out["y"]
        state_out = [sig_out[name] for name in state_names]
    except KeyError as missing:
        raise EdgeRNNError(f"step.tflite has no input or output {missing} that the manifest names") from None
    y_is = next((name for name, index in zip(state_names, state_out) if index == y), None)
    out_order = ([] if y_is else [y]) + state_out
    outputs = ([] if y_is else ["y"]) + state_names
    if len(set(out_order)) != len(out_order):
        raise EdgeRNNError("step.tflite writes two of its outputs to one tensor; NNTool cannot import it")
    graph.inputs, graph.outputs = in_order, out_order
    _drop_rank1_reshapes(model)
    _flatten_fc_reshape(model)
    _drop_unused_tensors(model)
    _name_constants(model)
    return NNToolGraph(tfl.write(model), ["x", *state_names], outputs, y_is)


def check_same_answers(step: bytes, nntool: bytes, steps: list[dict[str, np.ndarray]], fresh_each: bool = False) -> None:
    """LiteRT's answers of both graphs for each step of ``steps`` (signature name -> array) are equal, bit for
    bit; otherwise the rewrite is a bug. ``fresh_each``: every step from fresh interpreters (a fused model's
    states live in variable tensors, which the steps' feeds do not set)."""
    from edgernn.tflite.interpreter import load_interpreter

    runners = [load_interpreter(blob).get_signature_runner() for blob in (step, nntool)]
    for index, feed in enumerate(steps):
        if fresh_each:      # a fused model keeps its states in variable tensors: both start each step from zero
            runners = [load_interpreter(blob).get_signature_runner() for blob in (step, nntool)]
        a, b = (runner(**feed) for runner in runners)
        for name in a:
            if not np.array_equal(a[name], b[name]):
                raise EdgeRNNError(f"internal error: step_nntool.tflite's {name} differs from step.tflite's at "
                                   f"calibration step {index}; please report")
