"""ONNX files of per-frame CNNs (``torch.onnx.export`` of a module on (N, C, H, W) images, or (N, F) vectors)
mapped onto a Keras 3 functional model in TFLite's NHWC layout: a stateless per-frame model, branches (Add,
Concat along the channels) kept as the file has them.

Each node becomes one Keras layer: Conv (plain or depthwise), MaxPool/AveragePool/GlobalAveragePool,
BatchNormalization, Relu/Clip(0, max)/Sigmoid/Tanh, Add of two data tensors, Concat on the channels, Flatten (or a
Reshape to (N, -1)) and Gemm/MatMul(+Add). An explicit padding that no Keras "same" reproduces becomes
ZeroPadding2D (for a convolution; a pool's is refused, its padding is not zeros). A flatten of a (C, H, W) frame
follows torch's order: the Gemm after it takes its weight rows in NHWC order, so no transpose runs on the device.
Anything else is refused in one line, naming the node.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from edgernn.errors import EdgeRNNError
from edgernn.pytorch.source import Source, keras_name

RECURRENT_OPS = {"LSTM", "GRU", "RNN", "Loop", "Scan"}
IDENTITY_OPS = {"Identity", "Dropout"}


@dataclass
class Value:
    tensor: Any                  # the Keras tensor
    chw: tuple[int, int, int] | None = None   # flattened from a (C, H, W) frame in NHWC order (H * W > 1)


def is_frame_model(model: Any) -> bool:
    """True for a graph with no recurrent node whose one input is (N, C, H, W) or (N, F)."""
    graph = model.graph
    consts = {t.name for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in consts]
    if len(inputs) != 1 or any(node.op_type in RECURRENT_OPS for node in graph.node):
        return False
    return len(inputs[0].type.tensor_type.shape.dim) in (2, 4)


def load_frame_onnx(path: Path, model: Any) -> Source:
    from onnx import numpy_helper

    from edgernn import tfenv

    keras = tfenv.keras3()
    L = keras.layers
    graph, file = model.graph, path.name
    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            consts[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    x_info = next(i for i in graph.input if i.name not in consts)
    dims = [d.dim_value or None for d in x_info.type.tensor_type.shape.dim]
    if any(d is None for d in dims[1:]):
        raise EdgeRNNError(f"{file}: input {x_info.name!r} has dimensions {dims}; edgernn needs a fixed frame size")
    if len(graph.output) != 1:
        raise EdgeRNNError(f"{file}: the model has {len(graph.output)} outputs; edgernn converts models with one")
    shape = (dims[2], dims[3], dims[1]) if len(dims) == 4 else (dims[1],)
    x = keras.Input(shape, name="x")
    values: dict[str, Value] = {x_info.name: Value(x)}

    def refuse(node: Any, why: str) -> EdgeRNNError:
        return EdgeRNNError(f"{file}: node {node.name or '(unnamed)'!r} ({node.op_type}) {why}")

    for node in graph.node:
        if node.op_type == "Constant":
            continue
        if not any(name in values for name in node.input):
            # constants only (shape arithmetic): fold it where a later node needs it
            consts.update(_fold(node, consts, refuse))
            continue
        attrs = _attributes(node)
        handler = _HANDLERS.get(node.op_type)
        if handler is None:
            raise refuse(node, f"is not supported in a per-frame model (edgernn maps {', '.join(sorted(_HANDLERS))})")
        out = handler(L, node, attrs, values, consts, refuse)
        values[node.output[0]] = out
    y = values.get(graph.output[0].name)
    if y is None:
        raise EdgeRNNError(f"{file}: the output does not depend on the input")
    if y.chw is not None or len(y.tensor.shape) != 2:
        raise EdgeRNNError(f"{file}: the output has shape {list(y.tensor.shape)}; edgernn converts per-frame models "
                           "whose output is a vector")
    keras_model = keras.Model(x, y.tensor, name=keras_name(path.stem, "onnx"))
    return Source(model=keras_model, kind="onnx", name=file, reference=_reference(model, x_info.name, file))


def _attributes(node: Any) -> dict[str, Any]:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _fold(node: Any, consts: dict[str, np.ndarray], refuse: Callable) -> dict[str, np.ndarray]:
    from onnx.reference import ReferenceEvaluator
    from onnx import helper

    try:
        graph = helper.make_graph([node], "fold", [], [helper.make_tensor_value_info(o, 0, None) for o in node.output],
                                  [helper.make_tensor(n, helper.np_dtype_to_tensor_dtype(consts[n].dtype),
                                                      consts[n].shape, consts[n].flatten().tolist())
                                   for n in node.input if n])
        outs = ReferenceEvaluator(helper.make_model(graph)).run(None, {})
    except Exception as err:
        raise refuse(node, f"could not be computed from the constants ({type(err).__name__})") from None
    return dict(zip(node.output, outs))


def _data(values: dict[str, Value], node: Any, index: int, refuse: Callable) -> Value:
    value = values.get(node.input[index])
    if value is None:
        raise refuse(node, f"takes a constant as input {index}, where edgernn expects the data")
    return value


def _plain(value: Value, node: Any, refuse: Callable) -> Any:
    if value.chw is not None:
        raise refuse(node, "acts on a frame flattened in torch's (C, H, W) order; edgernn follows such a flatten "
                           "only into Gemm/MatMul or element-wise activations")
    return value.tensor


def _padding(node: Any, attrs: dict, size: tuple[int, int], kernel: tuple[int, int], strides: tuple[int, int],
             refuse: Callable, pool: bool) -> tuple[str, tuple | None]:
    """("same" | "valid", the explicit padding a ZeroPadding2D must add or None)."""
    auto = attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("SAME_UPPER",):
        return "same", None
    if auto == "VALID":
        return "valid", None
    if auto not in ("NOTSET", ""):
        raise refuse(node, f"pads {auto}; edgernn maps SAME_UPPER, VALID and explicit pads")
    pads = list(attrs.get("pads", [0, 0, 0, 0]))
    top, left, bottom, right = pads
    if not any(pads):
        return "valid", None
    same = []
    for n, k, s in zip(size, kernel, strides):
        total = max((-(-n // s) - 1) * s + k - n, 0)
        same.append((total // 2, total - total // 2))
    if [(top, bottom), (left, right)] == same:
        return "same", None
    if pool:
        raise refuse(node, f"pads {pads}, which TFLite's pools do not (their padding is not zeros)")
    return "valid", ((top, bottom), (left, right))


def _same_kernel(size: tuple[int, int], kernel: tuple[int, int], strides: tuple[int, int],
                 pads: tuple) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """A kernel grown with zeros (its size, where the original sits in it) whose "same" padding reads exactly the
    windows torch's explicit padding reads: torch's common stride-2 convolution of padding 1 on an even size pads
    (1, 1), where "same" pads (0, 1); a 4x4 kernel with the 3x3 at its top left, "same"-padded (1, 1), computes it
    without the PAD op the C backend has no kernel for. None when no size up to kernel + 2 * stride does."""
    grown, offsets = [], []
    for n, k, s, (before, after) in zip(size, kernel, strides, pads):
        want = (n + before + after - k) // s + 1
        for k2 in range(k, k + 2 * s + 1):
            total = max((-(-n // s) - 1) * s + k2 - n, 0)
            d = total // 2 - before
            if -(-n // s) == want and 0 <= d and d + k <= k2:
                grown.append(k2)
                offsets.append(d)
                break
        else:
            return None
    return tuple(grown), tuple(offsets)


def _conv(L: Any, node: Any, attrs: dict, values: dict, consts: dict, refuse: Callable) -> Value:
    x = _plain(_data(values, node, 0, refuse), node, refuse)
    w = consts.get(node.input[1])
    if w is None or w.ndim != 4:
        raise refuse(node, "has no constant 2-D kernel")
    b = consts.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    if any(d != 1 for d in attrs.get("dilations", [1, 1])):
        raise refuse(node, f"dilates {attrs['dilations']}; edgernn maps dilation 1")
    group, c_in = int(attrs.get("group", 1)), int(x.shape[-1])
    kernel, strides = tuple(w.shape[2:]), tuple(attrs.get("strides", [1, 1]))
    padding, explicit = _padding(node, attrs, tuple(x.shape[1:3]), kernel, strides, refuse, pool=False)
    if explicit:
        grown = _same_kernel(tuple(x.shape[1:3]), kernel, strides, explicit)
        if grown is None:
            x = L.ZeroPadding2D(explicit)(x)
        else:
            padding, (kh, kw), (dh, dw) = "same", *grown
            wide = np.zeros((*w.shape[:2], kh, kw), w.dtype)
            wide[:, :, dh:dh + kernel[0], dw:dw + kernel[1]] = w
            w, kernel = wide, (kh, kw)
    out = int(w.shape[0])
    if group == 1:
        layer = L.Conv2D(out, kernel, strides=strides, padding=padding, use_bias=b is not None)
        weights = [w.transpose(2, 3, 1, 0)]
    elif group == c_in and w.shape[1] == 1:
        multiplier = out // c_in
        layer = L.DepthwiseConv2D(kernel, strides=strides, padding=padding, depth_multiplier=multiplier,
                                  use_bias=b is not None)
        weights = [w.reshape(c_in, multiplier, *kernel).transpose(2, 3, 0, 1)]
    else:
        raise refuse(node, f"is grouped ({group} groups of {c_in} channels); edgernn maps plain and depthwise")
    y = layer(x)
    layer.set_weights([*weights, *([b] if b is not None else [])])
    return Value(y)


def _pool(L: Any, node: Any, attrs: dict, values: dict, consts: dict, refuse: Callable) -> Value:
    x = _plain(_data(values, node, 0, refuse), node, refuse)
    if node.op_type == "GlobalAveragePool":
        return Value(L.Reshape((1, 1, int(x.shape[-1])))(L.GlobalAveragePooling2D()(x)))
    if node.op_type == "GlobalMaxPool":
        return Value(L.Reshape((1, 1, int(x.shape[-1])))(L.GlobalMaxPooling2D()(x)))
    if attrs.get("ceil_mode", 0):
        raise refuse(node, "rounds its output size up (ceil_mode=1); edgernn maps ceil_mode=0")
    if any(d != 1 for d in attrs.get("dilations", [1, 1])):
        raise refuse(node, "dilates its window; edgernn maps dilation 1")
    kernel = tuple(attrs["kernel_shape"])
    strides = tuple(attrs.get("strides", [1, 1]))
    padding, _ = _padding(node, attrs, tuple(x.shape[1:3]), kernel, strides, refuse, pool=True)
    if node.op_type == "AveragePool" and padding == "same" and attrs.get("count_include_pad", 0):
        raise refuse(node, "counts the padding in its averages (count_include_pad=1); TFLite's does not")
    kind = L.MaxPooling2D if node.op_type == "MaxPool" else L.AveragePooling2D
    return Value(kind(kernel, strides=strides, padding=padding)(x))


def _batch_norm(L: Any, node: Any, attrs: dict, values: dict, consts: dict, refuse: Callable) -> Value:
    x = _plain(_data(values, node, 0, refuse), node, refuse)
    scale, bias, mean, var = (consts.get(name) for name in node.input[1:5])
    if any(v is None for v in (scale, bias, mean, var)):
        raise refuse(node, "has statistics that are not constants (export in eval mode)")
    layer = L.BatchNormalization(epsilon=float(attrs.get("epsilon", 1e-5)))
    y = layer(x)
    layer.set_weights([scale, bias, mean, var])
    return Value(y)


def _activation(L: Any, node: Any, attrs: dict, values: dict, consts: dict, refuse: Callable) -> Value:
    value = _data(values, node, 0, refuse)
    if node.op_type in IDENTITY_OPS:
        return value
    if node.op_type == "Clip":
        low = consts.get(node.input[1]) if len(node.input) > 1 and node.input[1] else attrs.get("min")
        high = consts.get(node.input[2]) if len(node.input) > 2 and node.input[2] else attrs.get("max")
        if low is None or float(low) != 0.0 or high is None:
            raise refuse(node, f"clips to [{low}, {high}]; edgernn maps only [0, max] (ReLU6 and the like)")
        layer = L.ReLU(max_value=float(high))
    elif node.op_type == "Relu":
        layer = L.ReLU()
    else:
        layer = L.Activation(node.op_type.lower())
    return Value(layer(value.tensor), value.chw)


def _add(L: Any, node: Any, attrs: dict, values: dict, consts: dict, refuse: Callable) -> Value:
    if node.input[0] in values and node.input[1] in values:
        a, b = (_plain(values[name], node, refuse) for name in node.input[:2])
        if tuple(a.shape) != tuple(b.shape):
            raise refuse(node, f"adds shapes {list(a.shape)} and {list(b.shape)}; edgernn maps equal shapes")
        return Value(L.Add()([a, b]))
    raise refuse(node, "adds a constant to the data; edgernn maps a bias only as part of Gemm/MatMul")


def _concat(L: Any, node: Any, attrs: dict, values: dict, consts: dict, refuse: Callable) -> Value:
    parts = [_plain(_data(values, node, i, refuse), node, refuse) for i in range(len(node.input))]
    rank = len(parts[0].shape)
    axis = int(attrs.get("axis", 1))
    if axis not in (1, 1 - rank):
        raise refuse(node, f"concatenates along axis {axis}; edgernn maps the channels (axis 1)")
    return Value(L.Concatenate(axis=-1)(parts))


def _flatten(L: Any, node: Any, attrs: dict, values: dict, consts: dict, refuse: Callable) -> Value:
    x = _plain(_data(values, node, 0, refuse), node, refuse)
    if node.op_type == "Flatten" and int(attrs.get("axis", 1)) != 1:
        raise refuse(node, f"flattens from axis {attrs['axis']}; edgernn maps axis 1")
    if node.op_type == "Reshape":
        target = consts.get(node.input[1])
        if target is None or len(target) != 2 or int(target[1]) not in (-1, int(np.prod(x.shape[1:]))):
            raise refuse(node, f"reshapes to {None if target is None else list(target)}; edgernn maps (N, -1)")
    if len(x.shape) == 2:
        return Value(x)
    h, w, c = (int(d) for d in x.shape[1:])
    return Value(L.Flatten()(x), (c, h, w) if h * w > 1 else None)


def _dense(L: Any, node: Any, attrs: dict, values: dict, consts: dict, refuse: Callable) -> Value:
    value = _data(values, node, 0, refuse)
    w = consts.get(node.input[1])
    if w is None or w.ndim != 2 or len(value.tensor.shape) != 2:
        raise refuse(node, "is not a product of (batch, features) data with a constant weight matrix")
    if node.op_type == "Gemm":
        if float(attrs.get("alpha", 1.0)) != 1.0 or float(attrs.get("beta", 1.0)) != 1.0 or attrs.get("transA", 0):
            raise refuse(node, "scales or transposes its operands other than torch's Linear does")
        if attrs.get("transB", 0):
            w = w.T
    b = consts.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    if value.chw is not None:   # the rows in torch's (c, h, w) order, taken in NHWC's (h, w, c)
        c, h, width = value.chw
        w = w.reshape(c, h, width, -1).transpose(1, 2, 0, 3).reshape(c * h * width, -1)
    layer = L.Dense(int(w.shape[1]), use_bias=b is not None)
    y = layer(value.tensor)
    layer.set_weights([w, *([np.broadcast_to(b, (w.shape[1],)).astype(np.float32)] if b is not None else [])])
    return Value(y)


_HANDLERS = {
    "Conv": _conv, "MaxPool": _pool, "AveragePool": _pool, "GlobalAveragePool": _pool, "GlobalMaxPool": _pool,
    "BatchNormalization": _batch_norm, "Relu": _activation, "Clip": _activation, "Sigmoid": _activation,
    "Tanh": _activation, "Identity": _activation, "Dropout": _activation, "Add": _add, "Concat": _concat,
    "Flatten": _flatten, "Reshape": _flatten, "Gemm": _dense, "MatMul": _dense,
}


def _reference(model: Any, input_name: str, file: str) -> Callable[[np.ndarray], np.ndarray]:
    """The file run on (sequences, steps, H, W, C) frames (each frame alone), in Keras' layout."""
    from edgernn.pytorch.onnx import _runner

    data = model.SerializeToString()
    runner: list[Callable[[np.ndarray], np.ndarray]] = []

    def reference(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, np.float32)
        lead = x.shape[:2]
        frames = x.reshape(-1, *x.shape[2:])
        if frames.ndim == 4:
            frames = frames.transpose(0, 3, 1, 2)
        if not runner:
            runner.append(_runner(data, input_name))
        try:
            ys = [np.asarray(runner[0](np.ascontiguousarray(frames[i:i + 1])), np.float32) for i in range(len(frames))]
        except Exception as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else ""
            raise EdgeRNNError(f"{file}: running the file on {list(x.shape)} failed ({type(err).__name__}: "
                               f"{first[:300]})") from None
        y = np.concatenate(ys)
        return y.reshape(*lead, *y.shape[1:])

    return reference
