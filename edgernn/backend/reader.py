"""Read a .tflite flatbuffer into the backend IR.

The flatbuffer is decoded by edgernn/tflite/model.py (the schema module that LiteRT ships); this module
only maps the decoded model onto the IR. Nothing here parses bytes by hand, and TensorFlow is not
imported.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from edgernn.backend.ir import Graph, Operator, Tensor
from edgernn.errors import EdgeRNNError

# the tensor types the IR holds (edgernn/backend/ir.py's DTYPES), by the flatbuffer reader's names
_DTYPES = {"float32", "int8", "int16", "int32", "int64", "uint8", "bool"}


def _flatbuffer():
    try:
        from edgernn.tflite import model as tfl
    except ImportError:
        raise EdgeRNNError("reading .tflite files needs the LiteRT schema module: pip install ai-edge-litert") from None
    return tfl


def _decode(value):
    if isinstance(value, bytes):
        return value.decode()
    return value


def _options(op) -> dict:
    opts = op.builtinOptions
    if opts is None:
        return {}
    out = {}
    for key, value in vars(opts).items():
        if isinstance(value, np.ndarray):
            value = value.tolist()
        out[key] = value
    return out


def read_tflite(source: bytes | str | Path, signature: str = "serving_default") -> Graph:
    """Decode a .tflite model (bytes or path) into a :class:`Graph` of its signature's subgraph."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        try:
            blob = path.read_bytes()
        except OSError as exc:
            raise EdgeRNNError(f"cannot read {path}: {exc.strerror}") from None
    else:
        blob = bytes(source)
    tfl = _flatbuffer()
    try:
        model = tfl.read(blob)
    except Exception as exc:  # the generated decoder raises assorted errors on garbage
        raise EdgeRNNError(f"not a valid .tflite flatbuffer ({type(exc).__name__})") from None

    sig = None
    for candidate in model.signatureDefs or []:
        if _decode(candidate.signatureKey) == signature:
            sig = candidate
    if sig is None and model.signatureDefs:
        keys = [_decode(s.signatureKey) for s in model.signatureDefs]
        raise EdgeRNNError(f"the model has no signature {signature!r} (it has {', '.join(keys)})")
    sub_index = sig.subgraphIndex if sig is not None else 0
    if len(model.subgraphs or []) != 1:
        raise EdgeRNNError(
            f"the model has {len(model.subgraphs or [])} subgraphs; a step model has exactly one (no WHILE or IF)"
        )
    sub = model.subgraphs[sub_index]

    tensors: list[Tensor] = []
    for i, t in enumerate(sub.tensors):
        dtype = tfl.type_name(t.type)
        if dtype not in _DTYPES:
            raise EdgeRNNError(f"tensor {i} ({_decode(t.name)}) has unsupported type {dtype.upper()}")
        shape = tuple(int(d) for d in (t.shape if t.shape is not None else []))
        if any(d < 0 for d in shape):
            raise EdgeRNNError(f"tensor {i} ({_decode(t.name)}) has a dynamic shape {shape}")
        scale = zp = None
        qdim = 0
        q = t.quantization
        if q is not None and q.scale is not None and len(q.scale) > 0:
            scale = np.asarray(q.scale, dtype=np.float32)
            zp = np.asarray(q.zeroPoint if q.zeroPoint is not None else np.zeros(len(scale)), dtype=np.int64)
            qdim = int(q.quantizedDimension)
        data = None
        is_variable = bool(t.isVariable)
        # a variable tensor starts from its zero point whatever its buffer holds (TFLite's ResetVariableTensor)
        buf = model.buffers[t.buffer] if t.buffer < len(model.buffers) and not is_variable else None
        if buf is not None and buf.data is not None and len(buf.data) > 0:
            raw = np.asarray(buf.data, dtype=np.uint8).tobytes()
            values = np.frombuffer(raw, dtype=np.dtype(_np_dtype(dtype)).newbyteorder("<"))
            # TF's converter can give equal constants one buffer though their lengths differ (a [2] STRIDED_SLICE
            # begin of zeros in a buffer of four): LiteRT reads a tensor's own elements from the buffer's start
            data = values[: int(np.prod(shape))].reshape(shape).copy()
        elif buf is not None and getattr(buf, "offset", 0):
            start, size = int(buf.offset), int(buf.size)
            data = np.frombuffer(blob[start : start + size], dtype=_np_dtype(dtype)).reshape(shape).copy()
        tensors.append(Tensor(i, _decode(t.name) or f"t{i}", dtype, shape, scale, zp, qdim, data, is_variable))

    operators: list[Operator] = []
    for i, op in enumerate(sub.operators or []):
        name = tfl.op_name(model, op.opcodeIndex)
        operators.append(
            Operator(
                i,
                name,
                [int(x) for x in (op.inputs if op.inputs is not None else [])],
                [int(x) for x in (op.outputs if op.outputs is not None else [])],
                _options(op),
                [int(x) for x in (op.intermediates if op.intermediates is not None else [])],
            )
        )

    if sig is not None:
        inputs = {_decode(m.name): int(m.tensorIndex) for m in sig.inputs}
        outputs = {_decode(m.name): int(m.tensorIndex) for m in sig.outputs}
    else:
        inputs = {tensors[i].name: int(i) for i in sub.inputs}
        outputs = {tensors[i].name: int(i) for i in sub.outputs}
    return Graph(tensors, operators, inputs, outputs, hashlib.sha256(blob).hexdigest(), signature)


def _np_dtype(dtype: str):
    from edgernn.backend.ir import DTYPES

    return DTYPES[dtype][0]
