"""edgernn/tflite/model.py is the one flatbuffer reader: the backend's IR comes through it."""

from __future__ import annotations

import numpy as np
import pytest

from edgernn.backend.reader import read_tflite
from edgernn.errors import EdgeRNNError
from edgernn.tflite import model as tfl

schema = tfl.schema


def _tensor(name: str, ttype: int, shape, buffer: int = 0, scale=None, zero_point=None):
    t = schema.TensorT()
    t.name, t.type, t.shape, t.buffer = name.encode(), ttype, list(shape), buffer
    if scale is not None:
        q = schema.QuantizationParametersT()
        q.scale, q.zeroPoint = list(scale), list(zero_point)
        t.quantization = q
    return t


def _signature_item(name: str, index: int):
    item = schema.TensorMapT()
    item.name, item.tensorIndex = name.encode(), index
    return item


def _model(op: int = schema.BuiltinOperator.ADD, custom: bytes | None = None) -> bytes:
    """x + c -> y, int8, with a constant c: the smallest step-model-like graph."""
    m = schema.ModelT()
    m.version = 3
    empty, const = schema.BufferT(), schema.BufferT()
    const.data = list(np.array([1, -2, 3, -4], dtype=np.int8).view(np.uint8))
    m.buffers = [empty, const]
    code = schema.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = op
    code.customCode = custom
    code.version = 1
    m.operatorCodes = [code]
    g = schema.SubGraphT()
    g.tensors = [_tensor("x", schema.TensorType.INT8, [1, 4], scale=[0.5], zero_point=[-3]),
                 _tensor("c", schema.TensorType.INT8, [1, 4], buffer=1, scale=[0.5], zero_point=[-3]),
                 _tensor("y", schema.TensorType.INT8, [1, 4], scale=[0.25], zero_point=[1])]
    o = schema.OperatorT()
    o.opcodeIndex, o.inputs, o.outputs = 0, [0, 1], [2]
    g.operators, g.inputs, g.outputs = [o], [0], [2]
    m.subgraphs = [g]
    sig = schema.SignatureDefT()
    sig.signatureKey = b"serving_default"
    sig.inputs, sig.outputs, sig.subgraphIndex = [_signature_item("x", 0)], [_signature_item("y", 2)], 0
    m.signatureDefs = [sig]
    return tfl.write(m)


def test_write_then_read_keeps_the_model():
    model = tfl.read(_model())
    assert tfl.op_names(model) == ["ADD"]
    assert tfl.signature(model) == ({"x": 0}, {"y": 2})
    assert tfl.tensor_quant(model, 2) == {"dtype": "int8", "shape": [1, 4], "scale": 0.25, "zero_point": 1}
    assert tfl.constant_bytes(model) == 4


def test_each_read_is_a_model_of_its_own():
    """A read of bytes read before comes from the kept copy: the same model, never the object an earlier read
    returned, so a caller that edits its model (a splice) leaves the next read as the bytes say."""
    data = _model()
    first = tfl.read(data)
    first.subgraphs[0].tensors[0].name = b"edited"
    first.buffers[1].data[0] = 99
    again = tfl.read(data)
    assert again is not first and tfl.write(again) == tfl.write(tfl.read(bytes(data)))
    assert again.subgraphs[0].tensors[0].name == b"x" and again.buffers[1].data[0] == 1
    assert tfl.op_names(again) == ["ADD"]


def test_the_backend_ir_is_read_through_the_one_reader():
    g = read_tflite(_model())
    assert g.op_names == ["ADD"] and g.inputs == {"x": 0} and g.outputs == {"y": 2}
    assert [t.dtype for t in g.tensors] == ["int8"] * 3
    assert g.tensors[1].data.tolist() == [[1, -2, 3, -4]] and not g.tensors[0].is_const
    assert g.tensors[2].qparams() == (0.25, 1)


@pytest.mark.parametrize("op, custom, name", [
    (schema.BuiltinOperator.MAXIMUM, None, "MAXIMUM"),
    (schema.BuiltinOperator.CUSTOM, b"Mine", "CUSTOM:Mine"),
])
def test_op_names_are_the_readers(op, custom, name):
    assert read_tflite(_model(op, custom)).op_names == [name] == tfl.op_names(tfl.read(_model(op, custom)))


@pytest.mark.parametrize("blob, why", [
    (b"\x00" * 7, "has 0 subgraphs"),             # decodes to an empty model
    (b"\xff" * 64, "not a valid .tflite flatbuffer"),
])
def test_garbage_is_refused_with_a_reason(blob, why):
    with pytest.raises(EdgeRNNError, match=why):
        read_tflite(blob)
