"""Small mixed int8/int16 step models, spliced with the flatbuffer object API.

They stand in for the converter's mixed precision (``--quant auto``) in the backend's tests: each is a
valid TFLite model that LiteRT runs, with int8 and int16 ops and QUANTIZE ops where the types meet.

- ``requantize_chain``: x -> QUANTIZE -> ... -> y, one QUANTIZE per (dtype, scale, zero point) hop,
  and no state; the table of edge cases for the int8 <-> int16 requantize kernels.
- ``state16``: an int8 step model whose recurrent state is held in int16: the state input goes
  int16 -> int8 before the cell, the cell's output int8 -> int16 back into the state output.
- ``fc16``: a FULLY_CONNECTED in 16x8 (int16 activations, the same int8 weights, an int64 bias).
- ``io16``: an int16 x and y around the int8 model.
- ``tanh16``: the cell's int8 TANH replaced by QUANTIZE int8 -> int16, an int16 TANH and QUANTIZE
  int16 -> int8, so one op of the graph runs in 16x8.
"""

from __future__ import annotations

import numpy as np

from edgernn.outdir import Manifest
from edgernn.tflite import model as M

S = M.schema
_TYPES = {"int8": S.TensorType.INT8, "int16": S.TensorType.INT16, "int32": S.TensorType.INT32,
          "int64": S.TensorType.INT64,
          "float32": S.TensorType.FLOAT32}


_opcode = M.opcode


def _tensor(model, name: str, dtype: str, shape, scale: float | None, zero_point: int | None) -> int:
    graph = model.subgraphs[0]
    buf = S.BufferT()
    model.buffers.append(buf)
    t = S.TensorT()
    t.name = name.encode()
    t.type = _TYPES[dtype]
    t.shape = np.array(list(shape), dtype=np.int32)
    t.buffer = len(model.buffers) - 1
    if scale is not None:
        q = S.QuantizationParametersT()
        q.scale = np.array([scale], dtype=np.float32)
        q.zeroPoint = np.array([zero_point], dtype=np.int64)
        t.quantization = q
    graph.tensors.append(t)
    return len(graph.tensors) - 1


def _op(model, builtin: int, inputs, outputs, version: int = 1, options_type=0, options=None):
    op = S.OperatorT()
    op.opcodeIndex = _opcode(model, builtin, version)
    op.inputs = np.array(inputs, dtype=np.int32)
    op.outputs = np.array(outputs, dtype=np.int32)
    op.builtinOptionsType = options_type
    op.builtinOptions = options
    return op


def _quantize(model, src: int, dst: int):
    # QUANTIZE version 3 is LiteRT's int16 requantize (tflite's op_version.cc: int16 in or out)
    return _op(model, S.BuiltinOperator.QUANTIZE, [src], [dst], version=3)


def _qparams(model, index: int) -> tuple[float, int]:
    q = model.subgraphs[0].tensors[index].quantization
    return float(q.scale[0]), int(q.zeroPoint[0])


def _signature_index(model, outputs: bool, name: str):
    sig = model.signatureDefs[0]
    for item in (sig.outputs if outputs else sig.inputs):
        if M._text(item.name) == name:
            return item
    raise KeyError(name)


def _new_model(description: bytes):
    """An empty one-subgraph model: (model, its graph)."""
    model = S.ModelT()
    model.version = 3
    model.description = description
    model.buffers = [S.BufferT()]
    model.operatorCodes = []
    graph = S.SubGraphT()
    graph.tensors, graph.operators = [], []
    model.subgraphs = [graph]
    return model, graph


def _finish(model, graph, x: int, y: int) -> bytes:
    """The model's bytes, with tensor x its input and y its output, under the signature edgernn reads."""
    graph.inputs = np.array([x], dtype=np.int32)
    graph.outputs = np.array([y], dtype=np.int32)
    sig = S.SignatureDefT()
    sig.signatureKey = b"serving_default"
    sig.subgraphIndex = 0
    for key, index, side in (("x", x, "inputs"), ("y", y, "outputs")):
        item = S.TensorMapT()
        item.name, item.tensorIndex = key.encode(), index
        setattr(sig, side, [item])
    model.signatureDefs = [sig]
    return M.write(model)


def requantize_chain(hops: list[tuple[str, float, int]], size: int = 16) -> bytes:
    """A step model of QUANTIZE ops only: x is hops[0] (dtype, scale, zero point), y the last.

    No state; every hop is one QUANTIZE op, so a chain visits int8 -> int16 -> int8 ... at the
    scales given."""
    model, graph = _new_model(b"edgernn test: requantize chain")
    tensors = [_tensor(model, "x" if i == 0 else f"q{i}", d, (1, size), s, z) for i, (d, s, z) in enumerate(hops)]
    for a, b in zip(tensors, tensors[1:]):
        graph.operators.append(_quantize(model, a, b))
    return _finish(model, graph, tensors[0], tensors[-1])


def sum16(reduced: int, inner: int, scale: float) -> bytes:
    """A step model of one int16 SUM over axis 1 of x (1, reduced, inner) into y (1, inner), both at
    ``scale``, zero points 0: what TF's 16x8 quantizer makes of an LTC's synapse sums."""
    model, graph = _new_model(b"edgernn test: int16 sum")
    x = _tensor(model, "x", "int16", (1, reduced, inner), scale, 0)
    y = _tensor(model, "y", "int16", (1, inner), scale, 0)
    axis = S.TensorT()
    axis.name, axis.type, axis.shape = b"axis", S.TensorType.INT32, np.array([1], dtype=np.int32)
    buf = S.BufferT()
    buf.data = np.frombuffer(np.array([1], dtype="<i4").tobytes(), dtype=np.uint8)
    model.buffers.append(buf)
    axis.buffer = len(model.buffers) - 1
    graph.tensors.append(axis)
    options = S.ReducerOptionsT()
    options.keepDims = False
    graph.operators.append(_op(model, S.BuiltinOperator.SUM, [x, len(graph.tensors) - 1], [y], version=1,
                               options_type=S.BuiltinOptions.ReducerOptions, options=options))
    return _finish(model, graph, x, y)


def state16(step_int8: bytes, state: str, scale: float) -> bytes:
    """The int8 step model with its state ``state`` kept in int16 at ``scale`` (zero point 0).

    The state input becomes an int16 tensor, requantized to the int8 tensor the cell read before;
    the cell's new state (int8) is requantized to a new int16 tensor, the state output. Input and
    output share their quantization, so the state feeds back byte for byte."""
    model = M.read(step_int8)
    graph = model.subgraphs[0]
    sin = _signature_index(model, False, state)
    sout = _signature_index(model, True, state)
    old_in, old_out = int(sin.tensorIndex), int(sout.tensorIndex)
    shape = list(graph.tensors[old_in].shape)
    new_in = _tensor(model, f"{state}.in16", "int16", shape, scale, 0)
    new_out = _tensor(model, f"{state}.out16", "int16", shape, scale, 0)
    graph.operators.insert(0, _quantize(model, new_in, old_in))
    graph.operators.append(_quantize(model, old_out, new_out))
    graph.inputs = np.array([new_in if int(i) == old_in else int(i) for i in graph.inputs], dtype=np.int32)
    # a state output may be y's tensor too (the cell's h): y keeps the int8 tensor, the state gets its own
    y_too = any(M._text(o.name) != state and int(o.tensorIndex) == old_out for o in model.signatureDefs[0].outputs)
    outs = []
    for i in [int(i) for i in graph.outputs] + [new_out]:
        if (i != old_out or y_too) and i not in outs:
            outs.append(i)
    graph.outputs = np.array(outs, dtype=np.int32)
    sin.tensorIndex, sout.tensorIndex = new_in, new_out
    return M.write(model)


def tanh16(step_int8: bytes) -> bytes:
    """The int8 step model with every int8 TANH run in int16: QUANTIZE int8 -> int16 (the input's
    scale over 256, zero point 0), TANH int16 (output 1/32768, zero point 0), QUANTIZE int16 -> int8
    into the original output tensor."""
    model = M.read(step_int8)
    graph = model.subgraphs[0]
    ops = []
    for op in graph.operators:
        if M.op_name(model, op.opcodeIndex) != "TANH":
            ops.append(op)
            continue
        src, dst = int(op.inputs[0]), int(op.outputs[0])
        shape = list(graph.tensors[src].shape)
        s_in, _ = _qparams(model, src)
        a = _tensor(model, f"tanh{len(ops)}.in16", "int16", shape, s_in / 256.0, 0)
        b = _tensor(model, f"tanh{len(ops)}.out16", "int16", shape, 1.0 / 32768, 0)
        ops.append(_quantize(model, src, a))
        ops.append(_op(model, S.BuiltinOperator.TANH, [a], [b], version=3))
        ops.append(_quantize(model, b, dst))
    graph.operators = ops
    return M.write(model)


def io16(step_int8: bytes, x_scale: float, y_scale: float) -> bytes:
    """The int8 step model behind an int16 input and output (zero points 0): x int16 -> int8 before the
    first op, y int8 -> int16 after the last; the states stay int8."""
    model = M.read(step_int8)
    graph = model.subgraphs[0]
    sx, sy = _signature_index(model, False, "x"), _signature_index(model, True, "y")
    old_x, old_y = int(sx.tensorIndex), int(sy.tensorIndex)
    new_x = _tensor(model, "x.in16", "int16", list(graph.tensors[old_x].shape), x_scale, 0)
    new_y = _tensor(model, "y.out16", "int16", list(graph.tensors[old_y].shape), y_scale, 0)
    graph.operators.insert(0, _quantize(model, new_x, old_x))
    graph.operators.append(_quantize(model, old_y, new_y))
    graph.inputs = np.array([new_x if int(i) == old_x else int(i) for i in graph.inputs], dtype=np.int32)
    y_is_state = any(M._text(o.name) != "y" and int(o.tensorIndex) == old_y for o in model.signatureDefs[0].outputs)
    outs = [int(i) for i in graph.outputs if int(i) != old_y or y_is_state]
    graph.outputs = np.array(list(dict.fromkeys(outs + [new_y])), dtype=np.int32)
    sx.tensorIndex, sy.tensorIndex = new_x, new_y
    return M.write(model)


def write_folder(folder, step: bytes, manifest: Manifest | None = None):
    """A build folder holding ``step`` as step.tflite and, from ``manifest`` (the int8 model's), a
    manifest.json whose inputs, outputs and states carry the mixed model's own dtypes and quantization."""
    import copy
    from pathlib import Path

    from edgernn.tflite.interpreter import load_interpreter

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "step.tflite").write_bytes(step)
    if manifest is None:
        return folder
    runner = load_interpreter(step).get_signature_runner("serving_default")
    details = {**runner.get_input_details(), **{("out", k): v for k, v in runner.get_output_details().items()}}
    manifest = copy.deepcopy(manifest)
    for key, entries in (("x", manifest.inputs), (("out", "y"), manifest.outputs), (None, manifest.states)):
        for e in entries:
            d = details[key if key is not None else e["name"]]
            q = d["quantization_parameters"]
            e.update(dtype=np.dtype(d["dtype"]).name, scale=float(q["scales"][0]), zero_point=int(q["zero_points"][0]))
    manifest.quant = "mixed"
    (folder / "manifest.json").write_text(manifest.to_json())
    return folder


def fc16(step_int8: bytes, count: int = 1) -> bytes:
    """The int8 step model with its first ``count`` FULLY_CONNECTEDs in 16x8: QUANTIZE int8 -> int16 of
    the input (its scale over 256, zero point 0), the same int8 weights, the int32 bias as int64 at the
    int16 input's scale (times 256, exactly), an int16 output (its scale over 256) and QUANTIZE
    int16 -> int8 into the original output tensor."""
    model = M.read(step_int8)
    graph = model.subgraphs[0]
    ops, done = [], 0
    for op in graph.operators:
        if done >= count or M.op_name(model, op.opcodeIndex) != "FULLY_CONNECTED":
            ops.append(op)
            continue
        src, w, bias, dst = int(op.inputs[0]), int(op.inputs[1]), int(op.inputs[2]), int(op.outputs[0])
        s_in, _ = _qparams(model, src)
        s_out, _ = _qparams(model, dst)
        a = _tensor(model, f"fc{done}.in16", "int16", list(graph.tensors[src].shape), s_in / 256.0, 0)
        b = _tensor(model, f"fc{done}.out16", "int16", list(graph.tensors[dst].shape), s_out / 256.0, 0)
        inputs = [a, w, -1]
        if bias >= 0:
            old = graph.tensors[bias]
            values = np.frombuffer(bytes(bytearray(model.buffers[old.buffer].data)), dtype=np.int32).astype(np.int64)
            q = old.quantization
            scale = [float(v) / 256.0 for v in q.scale]
            t = _tensor(model, f"fc{done}.bias64", "int64", list(old.shape), None, None)
            nb = graph.tensors[t]
            model.buffers[nb.buffer].data = np.frombuffer((values * 256).astype("<i8").tobytes(), dtype=np.uint8)
            bq = S.QuantizationParametersT()
            bq.scale = np.array(scale, dtype=np.float32)
            bq.zeroPoint = np.zeros(len(scale), dtype=np.int64)
            bq.quantizedDimension = int(q.quantizedDimension)
            nb.quantization = bq
            inputs[2] = t
        fc = _op(model, S.BuiltinOperator.FULLY_CONNECTED, inputs, [b], version=7,  # 16x8 FULLY_CONNECTED
                
                 options_type=op.builtinOptionsType, options=op.builtinOptions)
        ops += [_quantize(model, src, a), fc, _quantize(model, b, dst)]
        done += 1
    graph.operators = ops
    return M.write(model)


def fc16_alone(weights: np.ndarray, w_scales, bias: np.ndarray | None, s_in: float, s_out: float,
               sum_first: bool = False, bias_type: int = 0) -> bytes:
    """A step model of one 16x8 FULLY_CONNECTED: x int16 (1, n_in) at ``s_in`` -> y int16 (1, n_out) at
    ``s_out``, zero points 0, int8 ``weights`` (n_out, n_in) at ``w_scales`` (one per output channel, or one),
    an int64 ``bias`` or none, as TF's 16x8 quantizer writes it.

    ``sum_first``: x is (1, 1, n_in) and an int16 SUM over its axis 1 (of size 1: the values pass unchanged)
    feeds the FULLY_CONNECTED, so LiteRT runs the graph on its builtin kernels (the oracle of a graph with a
    quantized SUM, edgernn.tflite.interpreter.oracle_kernels). ``bias_type``: the options' quantized_bias_type
    (a schema.TensorType; TF's 16x8 quantizer writes INT64 there, also for a layer without a bias)."""
    model, graph = _new_model(b"edgernn test: 16x8 fully connected")
    n_out, n_in = weights.shape
    scales = np.atleast_1d(np.asarray(w_scales, np.float32))

    def constant(name, dtype, values, scale=None):
        t = _tensor(model, name, dtype, values.shape, None, None)
        tensor = graph.tensors[t]
        model.buffers[tensor.buffer].data = np.frombuffer(np.ascontiguousarray(values).tobytes(), dtype=np.uint8)
        if scale is not None:
            q = S.QuantizationParametersT()
            q.scale = np.asarray(scale, np.float32)
            q.zeroPoint = np.zeros(len(q.scale), dtype=np.int64)
            q.quantizedDimension = 0
            tensor.quantization = q
        return t

    x = _tensor(model, "x", "int16", (1, 1, n_in) if sum_first else (1, n_in), s_in, 0)
    fc_in = x
    if sum_first:
        fc_in = _tensor(model, "summed", "int16", (1, n_in), s_in, 0)
        axis = constant("axis", "int32", np.array([1], "<i4"))
        options = S.ReducerOptionsT()
        options.keepDims = False
        graph.operators.append(_op(model, S.BuiltinOperator.SUM, [x, axis], [fc_in],
                                   options_type=S.BuiltinOptions.ReducerOptions, options=options))
    w = constant("w", "int8", weights.astype(np.int8), scales)
    inputs = [fc_in, w, -1]
    if bias is not None:
        inputs[2] = constant("bias", "int64", bias.astype("<i8"), (scales.astype(np.float64) * s_in).astype(np.float32))
    y = _tensor(model, "y", "int16", (1, n_out), s_out, 0)
    options = S.FullyConnectedOptionsT()
    options.quantizedBiasType = bias_type
    graph.operators.append(_op(model, S.BuiltinOperator.FULLY_CONNECTED, inputs, [y], version=7,
                               options_type=S.BuiltinOptions.FullyConnectedOptions, options=options))
    return _finish(model, graph, x, y)


def unary16(builtin: int, size: int, s_in: float, s_out: float, version: int = 1) -> bytes:
    """A step model of one int16 unary op (``builtin``, a schema.BuiltinOperator): x (1, size) at ``s_in`` ->
    y (1, size) at ``s_out``, zero points 0."""
    model, graph = _new_model(b"edgernn test: int16 unary op")
    x = _tensor(model, "x", "int16", (1, size), s_in, 0)
    y = _tensor(model, "y", "int16", (1, size), s_out, 0)
    graph.operators.append(_op(model, builtin, [x], [y], version=version))
    return _finish(model, graph, x, y)
