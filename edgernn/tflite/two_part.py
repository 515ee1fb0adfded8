"""Two-part int8 weights: a FULLY_CONNECTED as the sum of two, for --quant auto where even int16 misses the budget.

TFLite's 16x8 mode keeps the weights in int8: each weight is rounded once, at its output channel's scale
``s = max|W[o]| / 127``. In a recurrent cell that rounding can set the error's floor whatever the activations'
width. A trained Dense(16) -> SimpleRNN(32, relu) -> Dense(2): its float model with only the weights rounded to
int8 is at l2r 0.0209 (the recurrent matrix alone 0.0185), and so is its int16 model.

Here such an op becomes two FULLY_CONNECTEDs of the same input and an ADD:

    y = act(x W^T + b)   ->   y = act((x W_hi^T + b) + x W_lo^T)

with ``W_hi = s * round(W / s)``, which int8 holds exactly at the very scale the quantizer gives it, and
``W_lo = W - W_hi`` (at most ``s / 2`` a weight), which the quantizer rounds at its own scale, at most
``s / 254``: the weights' rounding error is about 254 times smaller. These are ops TFLite's int8 and 16x8 modes
quantize and LiteRT runs like any others, so the oracle and the C backend stay as they are; the two new
activations are calibrated on the same steps as the rest. The cost is the op's MACs twice and an ADD.

The bias stays with the first part and the fused activation moves to the ADD; an op whose activation ADD
cannot fuse (only NONE, RELU, RELU_N1_TO_1 and RELU6 can) keeps its one part.
"""

from __future__ import annotations

import copy

import numpy as np

from edgernn.tflite import model as tfl
from edgernn.tflite.model import schema
from edgernn.tflite.rounding import fc_weights, nearest

# the fused activations an ADD takes as a FULLY_CONNECTED does
_ADD_ACTIVATIONS = {schema.ActivationFunctionType.NONE, schema.ActivationFunctionType.RELU,
                    schema.ActivationFunctionType.RELU_N1_TO_1, schema.ActivationFunctionType.RELU6}


def parts(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(W_hi, W_lo) of a float weight matrix (rows: output channels): W_hi on each row's int8 grid, W_lo the rest."""
    w = w.astype(np.float32)
    hi = nearest(w)
    return hi, (w - hi).astype(np.float32)


def _new_tensor(model, like: int, name: str, data: np.ndarray | None = None) -> int:
    graph = model.subgraphs[0]
    tensor = copy.deepcopy(graph.tensors[like])
    tensor.name = name.encode()
    buffer = schema.BufferT()
    if data is not None:
        buffer.data = np.frombuffer(data.astype(np.float32).tobytes(), np.uint8)
    model.buffers.append(buffer)
    tensor.buffer = len(model.buffers) - 1
    tensor.quantization = schema.QuantizationParametersT() if data is None else tensor.quantization
    graph.tensors.append(tensor)
    return len(graph.tensors) - 1


def _weights(model, op) -> np.ndarray | None:
    """The constant 2-D float weights of a FULLY_CONNECTED that can be split, or None."""
    w = fc_weights(model, op)
    options = op.builtinOptions
    if w is None or options is None or int(options.fusedActivationFunction) not in _ADD_ACTIVATIONS:
        return None
    return w


def _label(model, op) -> str:
    return tfl._text(model.subgraphs[0].tensors[int(op.outputs[0])].name)


def weight_errors(calibrated: bytes, run) -> dict[str, float]:
    """Per FULLY_CONNECTED that ``split`` can take (by its output's name): the error ``run(model)`` gives of the
    float model with that op's weights alone rounded to its int8 grid (the first part), the most first.
    ``run``: float model bytes -> its error against the float model's own outputs."""
    model = tfl.read(calibrated)
    errors = {}
    for op in model.subgraphs[0].operators:
        w = _weights(model, op)
        if w is None:
            continue
        buffer = model.buffers[model.subgraphs[0].tensors[int(op.inputs[1])].buffer]
        kept = buffer.data
        buffer.data = np.frombuffer(parts(w)[0].tobytes(), np.uint8)
        errors[_label(model, op)] = float(run(tfl.write(model)))
        buffer.data = kept
    return dict(sorted(errors.items(), key=lambda kv: -kv[1]))


def split(calibrated: bytes, samples: list[dict[str, np.ndarray]],
          only: set[str] | None = None) -> tuple[bytes, list[str]]:
    """``calibrated`` (a float step model with TF's calibration statistics) with each FULLY_CONNECTED of constant
    2-D float weights (of those named in ``only``, by output, if given) in two parts, the new activations' ranges
    recorded over ``samples`` (the calibration steps, by signature input); and the names of the ops split.
    Unchanged, with no names, where none can be."""
    model = tfl.read(calibrated)
    graph = model.subgraphs[0]
    add = tfl.opcode(model, schema.BuiltinOperator.ADD)
    ops, made, split_names = [], [], []
    for op in graph.operators:
        w = _weights(model, op)
        if w is None or (only is not None and _label(model, op) not in only):
            ops.append(op)
            continue
        options = op.builtinOptions
        hi, lo = parts(w)
        out = int(op.outputs[0])
        label = _label(model, op)
        w_hi = _new_tensor(model, int(op.inputs[1]), f"{label}/two_part_w_hi", hi)
        w_lo = _new_tensor(model, int(op.inputs[1]), f"{label}/two_part_w_lo", lo)
        y_hi = _new_tensor(model, out, f"{label}/two_part_hi")
        y_lo = _new_tensor(model, out, f"{label}/two_part_lo")
        first, second = copy.deepcopy(op), copy.deepcopy(op)
        first.inputs = [int(op.inputs[0]), w_hi] + [int(k) for k in op.inputs[2:]]
        second.inputs = [int(op.inputs[0]), w_lo, -1]
        first.outputs, second.outputs = [y_hi], [y_lo]
        first.builtinOptions.fusedActivationFunction = schema.ActivationFunctionType.NONE
        second.builtinOptions.fusedActivationFunction = schema.ActivationFunctionType.NONE
        total = schema.OperatorT()
        total.opcodeIndex = add
        total.inputs, total.outputs = [y_hi, y_lo], [out]
        total.builtinOptionsType = schema.BuiltinOptions.AddOptions
        total.builtinOptions = schema.AddOptionsT()
        total.builtinOptions.fusedActivationFunction = options.fusedActivationFunction
        total.builtinOptions.potScaleInt16 = False
        ops += [first, second, total]
        made += [y_hi, y_lo]
        split_names.append(label)
    if not made:
        return calibrated, []
    graph.operators = ops
    ranges = _ranges(tfl.write(model), made, samples)
    for index, (lo, hi) in zip(made, ranges):
        tfl.set_min_max(model, index, lo, hi)
    return tfl.write(model), split_names


def _ranges(data: bytes, tensors: list[int], samples: list[dict[str, np.ndarray]]) -> list[tuple[float, float]]:
    """Each tensor's (min, max) over the float model's runs on ``samples``."""
    from edgernn.tflite.interpreter import load_interpreter

    interpreter = load_interpreter(data, preserve_all_tensors=True)
    runner = interpreter.get_signature_runner()
    lo = [np.inf] * len(tensors)
    hi = [-np.inf] * len(tensors)
    for sample in samples:
        runner(**sample)
        for k, t in enumerate(tensors):
            v = interpreter.get_tensor(t)
            lo[k], hi[k] = min(lo[k], float(v.min())), max(hi[k], float(v.max()))
    # a range that holds 0, as the calibration's own do; an all-zero part keeps a small one
    return [(min(a, 0.0), max(b, 0.0)) if b > a else (-1e-6, 1e-6) for a, b in zip(lo, hi)]
