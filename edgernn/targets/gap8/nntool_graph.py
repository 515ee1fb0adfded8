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

Two rewrites change the float arithmetic by an ulp (LiteRT's answers then agree within SAME_ANSWER_REL, not
bit for bit), to step around NNTool 4.1's SQ8 where it is wrong (an LTC's SUM and DIV; without them its
quantized LTC step is 0 everywhere, l2r 1.0):

- a SUM of n values becomes MEAN then MUL by n (``_sums_as_means``);
- a DIV a / b becomes a * (1 / b) (``_divisions_as_reciprocals``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgernn.errors import EdgeRNNError
from edgernn.tflite import model as tfl

_ELEMENTWISE = {"ADD", "SUB", "MUL"}
SAME_ANSWER_REL = 1e-5


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


def _opcode(model, name: str) -> int:
    """The index of builtin ``name`` in the model's operator codes, added if the model has none."""
    code = getattr(tfl.schema.BuiltinOperator, name)
    for index, entry in enumerate(model.operatorCodes):
        if max(int(entry.builtinCode), int(entry.deprecatedBuiltinCode)) == code:
            return index
    entry = tfl.schema.OperatorCodeT()
    entry.builtinCode, entry.deprecatedBuiltinCode, entry.version = code, min(code, 127), 1
    model.operatorCodes.append(entry)
    return len(model.operatorCodes) - 1


def _new_tensor(model, like: int, name: str, data: np.ndarray | None = None) -> int:
    """A float32 tensor shaped like tensor ``like`` (activation), or holding ``data`` (constant)."""
    graph = model.subgraphs[0]
    tensor = tfl.schema.TensorT()
    tensor.name, tensor.type = name.encode(), tfl.schema.TensorType.FLOAT32
    if data is None:
        tensor.shape, tensor.buffer = np.array(_shape(graph, like), np.int32), 0
    else:
        tensor.shape = np.array(data.shape, np.int32)
        tensor.type = tfl.schema.TensorType.INT32 if data.dtype == np.int32 else tfl.schema.TensorType.FLOAT32
        buffer = tfl.schema.BufferT()
        buffer.data = np.frombuffer(data.tobytes(), np.uint8)
        model.buffers.append(buffer)
        tensor.buffer = len(model.buffers) - 1
    graph.tensors.append(tensor)
    return len(graph.tensors) - 1


def _sums_as_means(model) -> int:
    """SUM over one axis of n values -> MEAN, then MUL by n. NNTool 4.1's SQ8 gives a SUM (GlobalSumPoolNode)
    the output scale of an average pool, in / (out * 2**7), but its sum kernel does not shift the sum left by
    7 as the average's does: every SUM comes out 128 times too small. Its MEAN is the average pool, right."""
    graph = model.subgraphs[0]
    rewritten = 0
    for op in list(graph.operators):
        if tfl.op_name(model, op.opcodeIndex) != "SUM":
            continue
        src, axis, out = int(op.inputs[0]), int(op.inputs[1]), int(op.outputs[0])
        axes = np.frombuffer(bytes(model.buffers[graph.tensors[axis].buffer].data), np.int32)
        shape = _shape(graph, src)
        count = int(np.prod([shape[a] for a in axes]))
        mean = _new_tensor(model, out, f"mean{out}")
        count_k = _new_tensor(model, out, f"count{out}", np.array([count], np.float32))
        op.opcodeIndex = _opcode(model, "MEAN")
        op.outputs = [mean]
        mul = tfl.schema.OperatorT()
        mul.opcodeIndex, mul.inputs, mul.outputs = _opcode(model, "MUL"), [mean, count_k], [out]
        mul.builtinOptionsType = tfl.schema.BuiltinOptions.MulOptions
        mul.builtinOptions = tfl.schema.MulOptionsT()
        graph.operators.insert(graph.operators.index(op) + 1, mul)
        rewritten += 1
    return rewritten


def _divisions_as_reciprocals(model) -> int:
    """a / b -> a * (1 / b), the reciprocal a DIV of a constant 1. Fused into one expression, NNTool 4.1's
    Q15 quantizer folds the numerator's right shift and the DIV's left shift into one Norm by a negative
    amount, which its numpy kernel (``>>`` by a negative count) and its C (gap_roundnorm) both turn into
    garbage (0 for the LTC's v). A constant numerator is a plain left shift: nothing to fold."""
    graph = model.subgraphs[0]
    rewritten = 0
    for op in list(graph.operators):
        if tfl.op_name(model, op.opcodeIndex) != "DIV":
            continue
        num, den, out = int(op.inputs[0]), int(op.inputs[1]), int(op.outputs[0])
        if graph.tensors[num].buffer and model.buffers[graph.tensors[num].buffer].data is not None:
            continue
        one = _new_tensor(model, out, f"one{out}", np.ones(_shape(graph, den) or [1], np.float32))
        recip = _new_tensor(model, out, f"recip{out}")
        graph.tensors[recip].shape = np.array(_shape(graph, den), np.int32)
        op.inputs, op.outputs = [one, den], [recip]
        mul = tfl.schema.OperatorT()
        mul.opcodeIndex, mul.inputs, mul.outputs = _opcode(model, "MUL"), [num, recip], [out]
        mul.builtinOptionsType = tfl.schema.BuiltinOptions.MulOptions
        mul.builtinOptions = tfl.schema.MulOptionsT()
        mul.builtinOptions.fusedActivationFunction = op.builtinOptions.fusedActivationFunction
        op.builtinOptions.fusedActivationFunction = 0
        graph.operators.insert(graph.operators.index(op) + 1, mul)
        rewritten += 1
    return rewritten

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
    _sums_as_means(model)
    _divisions_as_reciprocals(model)
    _drop_unused_tensors(model)
    _name_constants(model)
    return NNToolGraph(tfl.write(model), ["x", *state_names], outputs, y_is)


def check_same_answers(step: bytes, nntool: bytes, steps: list[dict[str, np.ndarray]], fresh_each: bool = False) -> None:
    """LiteRT's answers of both graphs for each step of ``steps`` (signature name -> array) agree within
    SAME_ANSWER_REL of each output's largest magnitude over all the steps; otherwise the rewrite is a bug. They
    are equal bit for bit but where a SUM became MEAN * n or a DIV a * (1 / b): each rounds once more than the op
    it replaces, an ulp or two of float32 (measured on the LTC: 4e-7), which an LTC's ODE unfolds can carry into
    an output that is small at that step (a trained LTC: 1.5e-5 of its y at a step where y was 0.03, 5e-7 of
    its largest y). ``fresh_each``: every step from fresh interpreters (a fused model's states live in variable
    tensors, which the steps' feeds do not set)."""
    from edgernn.tflite.interpreter import load_interpreter

    runners = [load_interpreter(blob).get_signature_runner() for blob in (step, nntool)]
    answers = []
    for feed in steps:
        if fresh_each:      # a fused model keeps its states in variable tensors: both start each step from zero
            runners = [load_interpreter(blob).get_signature_runner() for blob in (step, nntool)]
        answers.append(tuple(runner(**feed) for runner in runners))
    if not answers:
        return
    scale = {name: max(max(float(np.abs(a[name]).max()) for a, _ in answers), 1e-30) for name in answers[0][0]}
    for index, (a, b) in enumerate(answers):
        for name in a:
            if float(np.abs(a[name] - b[name]).max()) > SAME_ANSWER_REL * scale[name]:
                raise EdgeRNNError(f"internal error: step_nntool.tflite's {name} differs from step.tflite's at "
                                   f"calibration step {index}; please report")
