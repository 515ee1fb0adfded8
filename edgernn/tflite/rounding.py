"""Error-compensated rounding of FULLY_CONNECTED weights, for --quant auto.

TF's quantizer rounds each int8 weight to the nearest step of its output channel's grid,
``s = max|W[o]| / 127``, each weight on its own. The rounding errors of one output channel then add up in
its output, ``x . (W[o] - Q[o])``, however the inputs are correlated. Rounding the weights one input column
after the other and moving each one's error onto the columns not yet rounded, weighted by the inputs'
second moments ``H = X^T X`` measured on the calibration steps, lowers that output error for the same grid
(the optimal brain surgeon's update, as GPTQ applies it to a layer's weights): the weight values are other
steps of the same int8 grid, and the model costs what it did.

The weights are written back in float on the grid, ``q * s``, with each output channel's largest weight
kept where it is (at +-127 steps), so TF's quantizer finds the same scale and the same integers: the
int8 and the 16x8 model hold these weights exactly, and LiteRT and the C backend run them like any others.

A recurrent model's error is not one layer's output error (its state carries the errors on), so the
caller measures the model both ways and keeps the one of less error (edgernn/pipeline/convert.py).
"""

from __future__ import annotations

import numpy as np

from edgernn.tflite import model as tfl
from edgernn.tflite.model import schema

INT8_STEPS = 127
DAMPING = 0.01  # of the mean of H's diagonal, added to it: the inverse stays well conditioned
MAX_SAMPLES = 4096  # calibration steps H is measured on at most (evenly spaced)


def fc_weights(model, op) -> np.ndarray | None:
    """The constant 2-D float32 weights (out, in) of a FULLY_CONNECTED, or None."""
    if tfl.op_name(model, op.opcodeIndex) != "FULLY_CONNECTED" or len(op.inputs) < 2:
        return None
    w = tfl.float_constant(model, int(op.inputs[1]))
    return w if w is not None and w.ndim == 2 else None


def nearest(w: np.ndarray) -> np.ndarray:
    """``w`` (out, in) rounded to the nearest step of each row's int8 grid, as TF's quantizer rounds it. float32."""
    w = w.astype(np.float32)
    scale = _row_scale(w)[:, None]
    return (np.round(w / scale) * scale).astype(np.float32)


def _row_scale(w: np.ndarray) -> np.ndarray:
    """Each row's int8 step as TF's quantizer sets it, its largest magnitude over 127 (1 for a row of zeros)."""
    peak = np.abs(w).max(axis=1)
    return np.where(peak > 0, peak / np.float32(INT8_STEPS), np.float32(1)).astype(np.float32)


def round_compensated(w: np.ndarray, h: np.ndarray, damping: float = DAMPING) -> np.ndarray:
    """``w`` (out, in) rounded to each row's int8 grid, column by column, each column's rounding error moved
    onto the columns after it through the inverse of ``h`` (in, in). Each row's largest weight is kept
    exactly (it sets the row's scale); a row of zeros stays zero. float32, on the grid."""
    w = w.astype(np.float32)
    peak, scale = np.abs(w).max(axis=1), _row_scale(w)
    pinned = np.abs(w).argmax(axis=1)
    h = h.astype(np.float64).copy()
    dead = np.diag(h) <= 0
    h[dead, dead] = 1.0
    h += damping * float(np.mean(np.diag(h))) * np.eye(h.shape[0])
    try:
        upper = np.linalg.cholesky(np.linalg.inv(h)).T
    except np.linalg.LinAlgError:
        upper = None
    work = w.astype(np.float64)
    steps = np.zeros(w.shape, np.float64)
    rows = np.arange(w.shape[0])
    for j in range(w.shape[1]):
        q = np.clip(np.round(work[:, j] / scale), -INT8_STEPS, INT8_STEPS)
        at_peak = pinned == j
        q[at_peak] = np.round(w[at_peak, j] / scale[at_peak])
        steps[:, j] = q
        if upper is None or j + 1 == w.shape[1]:
            continue
        error = (work[:, j] - q * scale) / upper[j, j]
        work[:, j + 1:] -= np.outer(error, upper[j, j + 1:])
        work[rows, pinned] = np.where(pinned > j, w[rows, pinned], work[rows, pinned])
    out = (steps.astype(np.float32) * scale[:, None]).astype(np.float32)
    out[rows, pinned] = w[rows, pinned]
    out[peak == 0] = 0
    return out


def _bias(model, op) -> np.ndarray | None:
    """The constant float32 bias of a FULLY_CONNECTED, or None where it has none."""
    if len(op.inputs) < 3:
        return None
    bias = tfl.float_constant(model, int(op.inputs[2]))
    return None if bias is None else bias.reshape(-1)


def _new_bias(model, op, values: np.ndarray) -> None:
    """Give ``op`` (a FULLY_CONNECTED without a bias) the float32 bias ``values``."""
    graph = model.subgraphs[0]
    buffer = schema.BufferT()
    buffer.data = np.frombuffer(values.astype(np.float32).tobytes(), np.uint8)
    model.buffers.append(buffer)
    tensor = schema.TensorT()
    tensor.shape = [int(values.size)]
    tensor.type = schema.TensorType.FLOAT32
    tensor.buffer = len(model.buffers) - 1
    tensor.name = (tfl._text(graph.tensors[int(op.outputs[0])].name) + "/corrected_bias").encode()
    graph.tensors.append(tensor)
    inputs = [int(k) for k in op.inputs]
    op.inputs = inputs[:2] + [len(graph.tensors) - 1] + inputs[3:]


def compensate(calibrated: bytes, samples: list[dict[str, np.ndarray]],
               damping: float = DAMPING) -> tuple[bytes, list[str]]:
    """``calibrated`` (a float step model with TF's calibration statistics) with the weights of each
    FULLY_CONNECTED of constant 2-D float weights on their int8 grid, rounded by ``round_compensated``, ``H``
    measured on the op's input over ``samples`` (the calibration steps, by signature input); and each op's
    bias corrected by the mean error of its rounded weights on those inputs, ``(W - Q) . mean(x)`` (a bias is
    held at the scale of input times weight: to far finer steps than a weight). An op without a bias has its
    correction added to a constant its output is summed with (``_bias_owner``), else is given a bias. A bias
    other ops read too is not moved. The names (outputs) of the ops. Weights read by several ops take the
    inputs of all of them."""
    from edgernn.tflite.interpreter import load_interpreter

    model = tfl.read(calibrated)
    graph = model.subgraphs[0]
    readers: dict[int, list] = {}
    width: dict[int, int] = {}
    for op in graph.operators:
        w = fc_weights(model, op)
        if w is not None and (len(op.inputs) < 3 or op.inputs[2] < 0 or _bias(model, op) is not None):
            readers.setdefault(graph.tensors[int(op.inputs[1])].buffer, []).append(op)
            width[graph.tensors[int(op.inputs[1])].buffer] = w.shape[1]
    if not readers:
        return calibrated, []
    if len(samples) > MAX_SAMPLES:
        samples = [samples[i] for i in np.linspace(0, len(samples) - 1, MAX_SAMPLES).astype(int)]
    interpreter = load_interpreter(calibrated, preserve_all_tensors=True)
    runner = interpreter.get_signature_runner()
    second = {buffer: np.zeros((width[buffer], width[buffer])) for buffer in readers}
    first = {buffer: np.zeros(width[buffer]) for buffer in readers}
    count = {buffer: 0 for buffer in readers}
    for sample in samples:
        runner(**sample)
        for buffer, ops in readers.items():
            for op in ops:
                x = interpreter.get_tensor(int(op.inputs[0])).astype(np.float64).reshape(-1, width[buffer])
                second[buffer] += x.T @ x
                first[buffer] += x.sum(axis=0)
                count[buffer] += x.shape[0]
    names, shifts = [], {}
    for buffer, ops in readers.items():
        w = fc_weights(model, ops[0])
        q = round_compensated(w, second[buffer], damping)
        model.buffers[buffer].data = np.frombuffer(q.tobytes(), np.uint8)
        shift = (w.astype(np.float64) - q) @ (first[buffer] / max(count[buffer], 1))
        for op in ops:
            names.append(tfl._text(graph.tensors[int(op.outputs[0])].name))
            found = _bias_owner(model, op)
            if found is None:
                _new_bias(model, op, np.zeros(shift.shape, np.float32))
                found = op, int(op.inputs[2])
            owner, target = found[0], graph.tensors[found[1]].buffer
            mine = {id(o) for o in ops} | {id(owner)}
            if any(id(o) not in mine for o in graph.operators
                   if any(k >= 0 and graph.tensors[int(k)].buffer == target for k in o.inputs)):
                continue  # a constant other ops read too stays as it is (the weights are still rounded)
            # the bias of weights read by several ops, where they share it too, moves once
            shifts.setdefault(target, {})[buffer] = shift
    for target, by_weights in shifts.items():
        bias = np.frombuffer(bytes(np.asarray(model.buffers[target].data, np.uint8)), np.float32)  # by buffer
        total = bias.astype(np.float64) + sum(by_weights.values())
        model.buffers[target].data = np.frombuffer(total.astype(np.float32).tobytes(), np.uint8)
    return tfl.write(model), names


# ops whose output holds their first input's values in another shape
_SAME_VALUES = {"RESHAPE", "SQUEEZE", "EXPAND_DIMS"}


def _bias_owner(model, op):
    """(the op, the input) whose float constant a correction of ``op``'s output moves: ``op`` and its bias where
    it has one. For an op without a bias and without a fused activation, its output is followed through the
    ADDs (and reshapes) that alone read it (without fused activations, but for the last) to the first term that
    can take the correction: a constant vector of its size added there (an LSTM's gate bias, after x W_x +
    h W_h), or a FULLY_CONNECTED with a bias, no fused activation and no other reader that writes the ADD's other
    input. None where there is no such term (the op is then given a bias)."""
    graph = model.subgraphs[0]
    if _bias(model, op) is not None:
        return op, int(op.inputs[2])
    if _activation(op) != schema.ActivationFunctionType.NONE:
        return None
    size = fc_weights(model, op).shape[0]
    out = int(op.outputs[0])
    for _ in range(len(graph.operators)):
        readers = [o for o in graph.operators if out in [int(k) for k in o.inputs]]
        if len(readers) != 1 or out in graph.outputs:
            return None
        if tfl.op_name(model, readers[0].opcodeIndex) in _SAME_VALUES and int(readers[0].inputs[0]) == out:
            out = int(readers[0].outputs[0])  # the same values in another shape
            continue
        if tfl.op_name(model, readers[0].opcodeIndex) != "ADD":
            return None
        add = readers[0]
        other = [int(k) for k in add.inputs if int(k) != out]
        if len(other) != 1:
            return None
        constant = tfl.float_constant(model, other[0])
        if constant is not None:
            return (add, other[0]) if constant.size == size else None
        writer = next((o for o in graph.operators if other[0] in [int(k) for k in o.outputs]), None)
        if (writer is not None and tfl.op_name(model, writer.opcodeIndex) == "FULLY_CONNECTED"
                and _bias(model, writer) is not None and _bias(model, writer).size == size
                and _activation(writer) == schema.ActivationFunctionType.NONE and other[0] not in graph.outputs
                and sum(other[0] in [int(k) for k in o.inputs] for o in graph.operators) == 1):
            return writer, int(writer.inputs[2])
        if _activation(add) != schema.ActivationFunctionType.NONE:
            return None
        out = int(add.outputs[0])
    return None


def _activation(op) -> int:
    options = op.builtinOptions
    return int(options.fusedActivationFunction) if options is not None else schema.ActivationFunctionType.NONE

