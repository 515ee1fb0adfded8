"""Small, typed access to .tflite flatbuffers through the schema module that LiteRT ships.

No TensorFlow here: the validation host reads manifests and models with this module alone, and the
backend's reader (edgernn/backend/reader.py) decodes through it into its IR: the one flatbuffer reader.
"""

from __future__ import annotations

import hashlib
import pickle
from collections import OrderedDict

import flatbuffers
import numpy as np

from edgernn.errors import EdgeRNNError

try:
    from ai_edge_litert import schema_py_generated as schema
except ImportError:  # LiteRT's predecessor ships the same generated module
    from tflite_runtime import schema_py_generated as schema  # type: ignore[no-redef]

_BUILTIN_NAMES = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
_TYPE_NAMES = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}

CONTROL_FLOW_OPS = {"WHILE", "IF", "CALL_ONCE", "CALL", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE",
                    "CUSTOM", "DELEGATE", "STABLEHLO_WHILE", "STABLEHLO_CASE"}


# The models read lately, pickled: decoding a flatbuffer into the schema's objects runs in Python, field by field,
# where a pickle loads in C some five times faster. --quant auto reads the same int8 model for every plan it splices
# and each mixed model for its error and again for its cost. Each read still returns a model of its own.
_READ_CACHE: OrderedDict[bytes, bytes] = OrderedDict()
_READ_CACHE_BYTES = 64 << 20


def read(data: bytes) -> "schema.ModelT":
    key = hashlib.blake2b(data, digest_size=20).digest() + len(data).to_bytes(8, "little")
    kept = _READ_CACHE.get(key)
    if kept is not None:
        _READ_CACHE.move_to_end(key)
        return pickle.loads(kept)
    model = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
    if len(data) <= _READ_CACHE_BYTES // 8:
        _READ_CACHE[key] = pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL)
        while sum(len(v) for v in _READ_CACHE.values()) > _READ_CACHE_BYTES:
            _READ_CACHE.popitem(last=False)
    return model


def write(model: "schema.ModelT") -> bytes:
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _text(value) -> str:
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)


def op_name(model: "schema.ModelT", opcode_index: int) -> str:
    code = model.operatorCodes[opcode_index]
    builtin = max(int(code.builtinCode), int(code.deprecatedBuiltinCode))
    if builtin == schema.BuiltinOperator.CUSTOM:
        return f"CUSTOM:{_text(code.customCode)}"
    return _BUILTIN_NAMES.get(builtin, f"OP_{builtin}")


def opcode(model: "schema.ModelT", builtin: int, version: int = 1) -> int:
    """The index of the builtin op ``builtin``'s operator code, added if the model has none, its version raised
    to at least ``version``."""
    for k, code in enumerate(model.operatorCodes):
        if max(int(code.builtinCode), int(code.deprecatedBuiltinCode)) == builtin:
            code.version = max(int(code.version), version)
            return k
    code = schema.OperatorCodeT()
    code.builtinCode = builtin
    code.deprecatedBuiltinCode = min(builtin, 127)
    code.version = version
    model.operatorCodes.append(code)
    return len(model.operatorCodes) - 1


def op_names(model: "schema.ModelT") -> list[str]:
    """Names of the ops of every subgraph, in execution order."""
    return [op_name(model, op.opcodeIndex) for graph in model.subgraphs for op in (graph.operators or [])]


def type_name(tensor_type: int) -> str:
    return _TYPE_NAMES.get(tensor_type, str(tensor_type)).lower()


def signature(model: "schema.ModelT") -> tuple[dict[str, int], dict[str, int]]:
    """(inputs, outputs) of the only signature: name -> tensor index in subgraph 0."""
    if not model.signatureDefs:
        raise ValueError("model has no signature")
    sig = model.signatureDefs[0]
    return (
        {_text(t.name): int(t.tensorIndex) for t in sig.inputs},
        {_text(t.name): int(t.tensorIndex) for t in sig.outputs},
    )


def rename_signature(model: "schema.ModelT", inputs: dict[str, str], outputs: dict[str, str]) -> None:
    """Rename signature keys in place (old -> new); tensors keep their indices."""
    sig = model.signatureDefs[0]
    for tensor_map, names in ((sig.inputs, inputs), (sig.outputs, outputs)):
        for item in tensor_map:
            old = _text(item.name)
            if old in names:
                item.name = names[old]


def with_signature_keys(data: bytes, inputs: dict[str, str], outputs: list[tuple[str, str]]) -> bytes:
    """``data`` with its signature's inputs renamed (old key -> new key) and its outputs exactly ``outputs``, each
    (old key, new key), in that order; tensors keep their indices."""
    model = read(data)
    sig = model.signatureDefs[0]
    by_key = {_text(t.name): t for t in sig.outputs}
    new_outputs = []
    for key, public in outputs:
        entry = type(by_key[key])()
        entry.name = public
        entry.tensorIndex = by_key[key].tensorIndex
        new_outputs.append(entry)
    sig.outputs = new_outputs
    for entry in sig.inputs:
        entry.name = inputs.get(_text(entry.name), _text(entry.name))
    return write(model)


def tensor_quant(model: "schema.ModelT", index: int) -> dict:
    tensor = model.subgraphs[0].tensors[index]
    q = tensor.quantization
    scale = [float(v) for v in (q.scale if q is not None and q.scale is not None else [])]
    zero = [int(v) for v in (q.zeroPoint if q is not None and q.zeroPoint is not None else [])]
    return {
        "dtype": type_name(tensor.type),
        "shape": [int(v) for v in tensor.shape] if tensor.shape is not None else [],
        "scale": scale[0] if len(scale) == 1 else (scale or None),
        "zero_point": zero[0] if len(zero) == 1 else (zero or None),
    }


def io_entry(model: "schema.ModelT", name: str, index: int) -> dict:
    """A manifest tensor entry: the public ``name`` and the tensor's dtype, shape, scale and zero point."""
    return {"name": name, **tensor_quant(model, index)}


def head_entry(head: bytes, y_entry: dict, tied: bool) -> tuple[dict, int]:
    """manifest ``head`` for the head model ``head`` (head.tflite), and its MACs; ``tied``: its input must carry the
    step output's quantization (``y_entry``)."""
    hmodel = read(head)
    hin, hout = signature(hmodel)
    entry = {
        "file": "head.tflite",
        "input": io_entry(hmodel, "h", hin["h"]),
        "output": io_entry(hmodel, "y", next(iter(hout.values()))),
        "ops": sorted(set(op_names(hmodel))),
    }
    if tied and (entry["input"]["scale"], entry["input"]["zero_point"]) != (y_entry["scale"], y_entry["zero_point"]):
        raise EdgeRNNError("the head model's input did not get the step output's quantization")
    return entry, macs(hmodel)


def set_min_max(model: "schema.ModelT", index: int, lo: float, hi: float) -> None:
    q = model.subgraphs[0].tensors[index].quantization
    q.min = [float(lo)]
    q.max = [float(hi)]


def get_min_max(model: "schema.ModelT", index: int) -> tuple[float, float] | None:
    q = model.subgraphs[0].tensors[index].quantization
    if q is None or q.min is None or q.max is None or len(q.min) != 1:
        return None
    return float(q.min[0]), float(q.max[0])


def float_constant(model: "schema.ModelT", index: int) -> np.ndarray | None:
    """The float32 constant tensor ``index`` as an array of its shape, or None where it is not one."""
    if index < 0:
        return None
    tensor = model.subgraphs[0].tensors[index]
    data = model.buffers[tensor.buffer].data if tensor.buffer < len(model.buffers) else None
    if tensor.type != schema.TensorType.FLOAT32 or data is None or len(data) == 0:
        return None
    return np.frombuffer(bytes(np.asarray(data, np.uint8)), np.float32).reshape([int(d) for d in tensor.shape])


def constant_bytes(model: "schema.ModelT") -> int:
    """Bytes of constant data (weights, biases, tables) that the graph's tensors point at."""
    graph = model.subgraphs[0]
    seen, total = set(), 0
    for tensor in graph.tensors:
        buf = model.buffers[tensor.buffer] if tensor.buffer < len(model.buffers) else None
        if buf is not None and buf.data is not None and len(buf.data) and tensor.buffer not in seen:
            seen.add(tensor.buffer)
            total += len(buf.data)
    return total


def _elements(tensor) -> int:
    size = 1
    for dim in tensor.shape:
        size *= int(dim)
    return size


def macs(model: "schema.ModelT") -> int:
    """Multiply-accumulates of one invoke: matrix products and convolutions (every output element times its
    window), plus one per element of MUL."""
    return sum(op_macs(model))


def op_macs(model: "schema.ModelT") -> list[int]:
    """The multiply-accumulates of each operator of the graph, in its order (``macs`` is their sum)."""
    graph = model.subgraphs[0]
    found = []
    for op in graph.operators or []:
        name = op_name(model, op.opcodeIndex)
        total = 0
        if name in ("FULLY_CONNECTED", "BATCH_MATMUL"):
            weights = graph.tensors[op.inputs[1]].shape
            out = graph.tensors[op.outputs[0]].shape
            rows = 1
            for dim in out[:-1]:
                rows *= int(dim)
            inner = int(weights[-1]) if name == "FULLY_CONNECTED" else int(weights[-2])
            total = rows * int(out[-1]) * inner
        elif name == "UNIDIRECTIONAL_SEQUENCE_LSTM":
            w = graph.tensors[op.inputs[4]].shape  # input-to-cell weights: (units, features)
            units, features = int(w[0]), int(w[1])
            total = 4 * units * (features + units) + 3 * units
        elif name in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            # weights (out channels, kh, kw, in channels) and (1, kh, kw, channels): a window per output
            w = [int(d) for d in graph.tensors[op.inputs[1]].shape]
            window = w[1] * w[2] * (w[3] if name == "CONV_2D" else 1)
            total = _elements(graph.tensors[op.outputs[0]]) * window
        elif name == "MUL":
            total = _elements(graph.tensors[op.outputs[0]])
        found.append(total)
    return found
