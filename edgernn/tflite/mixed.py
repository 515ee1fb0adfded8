"""Mixed int8/int16 step models: some ops in 16x8, the rest in int8, QUANTIZE ops where the types meet.

One calibrated float step model is quantized twice, to int8 (TF's MLIR quantizer, as ``--quant int8``)
and to 16x8 (TF's calibrator quantizer, as ``--quant int16``), each with its states tied. Both quantizers
keep the float model's ops in its order (the 16x8 one adds QUANTIZE and DEQUANTIZE around an op it leaves
in float); tensor names can differ (the MLIR quantizer renames a SPLIT's outputs), so the two graphs are
aligned by position, op for op, and each int8 activation is paired with its int16 form by the ops that
write and read it (checked: the same op names in the same order, inputs that correspond). A mixed
model takes each op, with its constants and its output tensors, from the model of the op's chosen
precision; where a tensor is needed in the other type, a QUANTIZE op (int8 to
int16 or int16 to int8, a requantization LiteRT runs) gives it that model's quantization of the tensor.

States: each state keeps one dtype, at input and output. It is int16 when the op that produces it is
int16 (or when that op has no 16x8 form and an op that reads the state is int16), else int8; its input
and output then carry the tied quantization of that dtype's model, so the device copies state bytes
back unchanged. The x input is int16 when an op that reads it is int16, else int8; the y output keeps
the dtype of the op that produces it. A plan of all int8 is therefore the int8 model, and a plan of all
int16 the int16 model.

Ops with no 16x8 kernel in TF (DIV, for LTC) stay int8: the 16x8 model is then made with float
fallback, and the op is taken from the int8 model, between QUANTIZE ops from and to its int16
neighbours.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edgernn.errors import EdgeRNNError
from edgernn.outdir import Manifest
from edgernn.metrics import ErrorSums
from edgernn.tflite import model as tfl
from edgernn.tflite.quantize import quantize_calibrated, quantize_with_tied_states

schema = tfl.schema
INT8, INT16, FLOAT32 = schema.TensorType.INT8, schema.TensorType.INT16, schema.TensorType.FLOAT32
DTYPES = {INT8: "int8", INT16: "int16"}
DEFAULT_MAX_ERROR = 0.02  # --max-error: l2r against the float model on the calibration sequences (budget_error)
# budget_error: the share of the sequences that must each keep the budget on their own
SEQUENCE_QUANTILE = 0.75


class MixedUnavailable(EdgeRNNError):
    """The int8 and 16x8 models of one step model cannot be paired op for op, so no mixed model can be made.
    ``models`` (set by ``quantize_pair``): dtype -> (the quantized model, its calibrated model with the tied
    ranges), the uniform models --quant auto can still choose from."""

    models: dict[str, tuple[bytes, bytes]] = {}


def _converts(model, op) -> bool:
    """Whether ``op`` takes a tensor between float and an integer type (a DEQUANTIZE, or a QUANTIZE of a float
    tensor): what TF's 16x8 quantizer puts around an op it leaves in float. A QUANTIZE from an integer type to
    the same type is a requantization, an op like any other: both quantizers put one where an op needs its
    inputs at its output's scale and an input's scale is fixed (a TANH's output before a CONCATENATION)."""
    name = tfl.op_name(model, op.opcodeIndex)
    if name == "DEQUANTIZE":
        return True
    return name == "QUANTIZE" and model.subgraphs[0].tensors[op.inputs[0]].type == FLOAT32


def _seams(model) -> int:
    """QUANTIZE ops between int8 and int16 (where a mixed model's types meet): not the requantizations."""
    graph = model.subgraphs[0]
    return sum(1 for op in graph.operators if tfl.op_name(model, op.opcodeIndex) == "QUANTIZE"
               and graph.tensors[op.inputs[0]].type != graph.tensors[op.outputs[0]].type)


def check_max_error(value) -> float:
    """--max-error as a float in (0, 1], or a one-line error."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise EdgeRNNError(f"--max-error must be a number (an l2r such as 0.02), not {value!r}") from None
    if not np.isfinite(number) or number <= 0 or number > 1:
        raise EdgeRNNError(f"--max-error {value} is out of range: give an l2r above 0 and at most 1 (such as 0.02)")
    return number


def quantize_16x8(tied: bytes, allow_float: bool) -> bytes:
    """16x8 as ``quantize_calibrated(tied, "int16")``; with ``allow_float``, ops TF cannot quantize in
    16x8 stay float between DEQUANTIZE and QUANTIZE, and the model's inputs and outputs stay float."""
    if not allow_float:
        return quantize_calibrated(tied, "int16")
    from edgernn import tfenv

    tfenv.tensorflow()
    from tensorflow.lite.python.optimize import calibrator

    with warnings.catch_warnings(), tfenv.native_stderr_captured():
        warnings.simplefilter("ignore")
        wrapper = calibrator.Calibrator(tied)
        wrapper._calibrator.Prepare()
        f32, i16 = np.dtype(np.float32).num, np.dtype(np.int16).num
        return bytes(wrapper._calibrator.QuantizeModel(f32, f32, True, i16, np.dtype(np.int64).num, False, False))


def _is_constant(model, index: int) -> bool:
    tensor = model.subgraphs[0].tensors[index]
    buf = model.buffers[tensor.buffer]
    return buf.data is not None and len(buf.data) > 0


@dataclass
class Pair:
    """The int8 and the 16x8 model of one calibrated float step model, aligned op for op."""

    int8: bytes
    int16: bytes
    float_fallback: bool  # the 16x8 model keeps some ops in float
    ties: list[tuple[str, str]]
    x_key: str
    y_key: str
    tied: dict[str, bytes] = field(default_factory=dict)  # dtype -> the calibrated model with its tied ranges
    int16_op: list[int | None] = field(default_factory=list)  # per int8 op: its 16x8 twin's index, or None
    # per int8 op: its float twin in the 16x8 model (between int16 tensors), or None
    float_op: list[int | None] = field(default_factory=list)

    def __post_init__(self):
        self.m8, self.m16 = tfl.read(self.int8), tfl.read(self.int16)
        self.int16_op, self.float_op, self.map16 = _align(self.m8, self.m16)
        self.rev16 = {k16: k8 for k8, k16 in self.map16.items() if k16 is not None}
        self.canon16 = _Canon(self.m16)

    @property
    def ops(self) -> list[str]:
        return [tfl.op_name(self.m8, op.opcodeIndex) for op in self.m8.subgraphs[0].operators]

    def can_int16(self) -> list[int]:
        """The ops the plan may take from the 16x8 model: those with a 16x8 twin, and those TF left in float
        there (in a mixed model: float32 between int16 tensors, DEQUANTIZE before, QUANTIZE after)."""
        return [i for i, (j, f) in enumerate(zip(self.int16_op, self.float_op)) if j is not None or f is not None]

    def in_float(self, i: int) -> bool:
        """Whether op ``i``, when the plan takes it from the 16x8 model, runs in float32 there."""
        return self.int16_op[i] is None and self.float_op[i] is not None

    def q8_tensor(self, k16: int) -> int:
        """The int8 model's tensor that the 16x8 model's activation ``k16`` is the int16 form of."""
        return self.rev16[self.canon16(k16)]


class _Canon:
    """The int16 form of a 16x8 model's activation: itself when int16; for a float tensor (around an op
    left in float), the output of the first QUANTIZE that reads it, or the input of the DEQUANTIZE that
    wrote it; a QUANTIZE's int16 output, the first QUANTIZE's of the same float tensor."""

    def __init__(self, model):
        self.model = model
        graph = model.subgraphs[0]
        self.first_quantize: dict[int, int] = {}
        self.dequantized_from: dict[int, int] = {}
        self.quantize_input: dict[int, int] = {}
        for op in graph.operators:
            name = tfl.op_name(model, op.opcodeIndex)
            if name == "QUANTIZE" and graph.tensors[op.inputs[0]].type == FLOAT32:
                self.first_quantize.setdefault(int(op.inputs[0]), int(op.outputs[0]))
                self.quantize_input[int(op.outputs[0])] = int(op.inputs[0])
            elif name == "DEQUANTIZE":
                self.dequantized_from[int(op.outputs[0])] = int(op.inputs[0])

    def __call__(self, k: int) -> int | None:
        tensor = self.model.subgraphs[0].tensors[k]
        if tensor.type == FLOAT32:
            if k in self.dequantized_from:
                return self(self.dequantized_from[k])
            return self.first_quantize.get(k)
        if k in self.quantize_input:
            return self.first_quantize[self.quantize_input[k]]
        return k


def _align(m8, m16) -> tuple[list[int | None], dict[int, int | None]]:
    """Pair the two models op for op, by position: the 16x8 model without its QUANTIZE and DEQUANTIZE ops
    between float and int16 (which TF adds around ops it leaves in float) must hold the int8 model's ops in the
    same order, its requantizations (``_converts``) included.

    Returns, per int8 op, the index of its 16x8 twin or None (the 16x8 model left it in float, or its
    inputs do not correspond); per int8 op, the index of its float twin between int16 tensors (an op TF
    has no 16x8 form of, left in float between DEQUANTIZE and QUANTIZE) or None; and the map from the int8
    model's activations to their int16 form."""
    g8, g16 = m8.subgraphs[0], m16.subgraphs[0]
    canon = _Canon(m16)
    ops16 = [(j, op) for j, op in enumerate(g16.operators) if not _converts(m16, op)]
    names8 = [tfl.op_name(m8, op.opcodeIndex) for op in g8.operators]
    names16 = [tfl.op_name(m16, op.opcodeIndex) for _, op in ops16]
    if any(_converts(m8, op) for op in g8.operators):
        raise MixedUnavailable("the int8 step model holds a QUANTIZE from or a DEQUANTIZE to float; a mixed model "
                               "cannot be made")
    if names8 != names16:
        differ = next(i for i, (a, b) in enumerate(zip([*names8, None], [*names16, None])) if a != b)
        raise MixedUnavailable(f"the int8 and 16x8 step models do not align: op {differ} is "
                           f"{(names8 + ['nothing'])[differ]} in int8 and {(names16 + ['nothing'])[differ]} in 16x8")
    in8, out8 = tfl.signature(m8)
    in16, out16 = tfl.signature(m16)
    map16: dict[int, int | None] = {int(in8[k]): canon(int(in16[k])) for k in in8}
    twins: list[int | None] = []
    floats: list[int | None] = []
    for op8, (j, op16) in zip(g8.operators, ops16):
        ok = len(op8.inputs) == len(op16.inputs) and len(op8.outputs) == len(op16.outputs)
        same_shape = ok
        left_float = ok and all(g16.tensors[b].type == FLOAT32 for b in op16.outputs)
        for a, b in zip(op8.outputs, op16.outputs):
            map16[int(a)] = canon(int(b))
            ok = ok and g16.tensors[b].type in DTYPES
        if same_shape:
            for a, b in zip(op8.inputs, op16.inputs):
                if a < 0 or _is_constant(m8, int(a)):
                    ok = ok and (b < 0) == (a < 0)
                    left_float = left_float and (b < 0) == (a < 0)
                    continue
                ok = ok and g16.tensors[b].type in DTYPES and map16.get(int(a)) == canon(int(b))
                # an op TF left in float reads DEQUANTIZEd int16 tensors and writes one a QUANTIZE takes to int16
                left_float = left_float and g16.tensors[b].type == FLOAT32 and \
                    int(b) in canon.dequantized_from and map16.get(int(a)) == canon(int(b))
            left_float = left_float and all(canon(int(b)) is not None for b in op16.outputs)
        twins.append(j if ok else None)
        floats.append(j if not ok and left_float else None)
    return twins, floats, map16


def quantize_pair(calibrated: bytes, ties: list[tuple[str, str]], x_key: str, y_key: str, rename=None,
                  public: tuple[list[tuple[str, str]], str, str] | None = None) -> Pair:
    """The int8 model and the 16x8 model of ``calibrated``, each with its states tied.

    ``rename`` (bytes -> bytes) renames both models' signature keys; ``public`` is then (ties, x key, y key)
    by the new names."""
    q8, tied8 = quantize_with_tied_states(calibrated, ties, "int8")
    try:
        q16, tied16 = quantize_with_tied_states(calibrated, ties, "int16")
        fallback = False
    except EdgeRNNError:
        raise
    except Exception:  # an op TF has no 16x8 form of (DIV): quantize with float fallback
        (q16, tied16), fallback = quantize_with_tied_states(
            calibrated, ties, "int16", quantize=lambda tied: quantize_16x8(tied, allow_float=True), form=_Canon), True
    for data in (q8, q16):
        inputs, outputs = tfl.signature(tfl.read(data))
        if x_key not in inputs or y_key not in outputs:
            raise EdgeRNNError(f"the quantized step model has no input {x_key} or output {y_key}")
    if rename is not None:
        q8, q16 = rename(q8), rename(q16)
        ties, x_key, y_key = public
    try:
        pair = Pair(q8, q16, fallback, ties, x_key, y_key, {"int8": tied8, "int16": tied16})
        if not fallback and any(j is None for j in pair.int16_op):
            missing = sorted({pair.ops[i] for i, j in enumerate(pair.int16_op) if j is None})
            raise MixedUnavailable(f"the int8 and 16x8 step models do not align (ops {', '.join(missing)} read other "
                                   "tensors); a mixed model cannot be made")
    except MixedUnavailable as why:
        why.models = {"int8": (q8, tied8), "int16": (q16, tied16)}
        raise
    return pair


# ---------------------------------------------------------------- the splice

class _Splice:
    """One mixed model. Activations are keyed by their index in the int8 model; ``version`` holds, per key and
    dtype, the index in the mixed model of that form of the tensor."""

    def __init__(self, pair: Pair, int16_ops: set[int]):
        self.pair = pair
        self.model = tfl.read(pair.int8)
        self.graph = self.model.subgraphs[0]
        self.m8, self.m16 = pair.m8, pair.m16
        self.g8, self.g16 = pair.m8.subgraphs[0], pair.m16.subgraphs[0]
        self.version: dict[tuple[int, int], int] = {}
        self.constants16: dict[int, int] = {}
        self.ops: list = []
        self.int16_ops = {i for i in int16_ops if pair.int16_op[i] is not None or pair.float_op[i] is not None}

    def opcode(self, code) -> int:
        key = (int(code.builtinCode), int(code.deprecatedBuiltinCode), code.customCode, int(code.version))
        for k, have in enumerate(self.model.operatorCodes):
            if (int(have.builtinCode), int(have.deprecatedBuiltinCode), have.customCode, int(have.version)) == key:
                return k
        self.model.operatorCodes.append(copy.deepcopy(code))
        return len(self.model.operatorCodes) - 1

    def quantize_opcode(self) -> int:
        code = schema.OperatorCodeT()
        code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.QUANTIZE
        code.version = 2
        return self.opcode(code)

    def empty_buffer(self) -> int:
        self.model.buffers.append(schema.BufferT())
        return len(self.model.buffers) - 1

    def template(self, t: int, dtype: int):
        if dtype == INT8:
            return copy.deepcopy(self.g8.tensors[t])
        k16 = self.pair.map16.get(t)
        if k16 is None:
            raise EdgeRNNError(f"mixed model: tensor {tfl._text(self.g8.tensors[t].name)} has no int16 form")
        return copy.deepcopy(self.g16.tensors[k16])

    def place(self, t: int, dtype: int) -> int:
        """Make the int8 model's tensor ``t`` its ``dtype`` form, in place (same index, same name)."""
        if dtype == INT16:
            tensor = self.template(t, INT16)
            tensor.name = self.g8.tensors[t].name
            tensor.buffer = self.g8.tensors[t].buffer
            self.graph.tensors[t] = tensor
        self.version[(t, dtype)] = t
        return t

    def get(self, t: int, dtype: int) -> int:
        """The ``dtype`` form of activation ``t``, made by a QUANTIZE op from the other form when needed."""
        if (t, dtype) in self.version:
            return self.version[(t, dtype)]
        other = INT16 if dtype == INT8 else INT8
        if (t, other) not in self.version:
            raise EdgeRNNError(f"mixed model: tensor {tfl._text(self.g8.tensors[t].name)} is read before it is written")
        tensor = self.template(t, dtype)
        tensor.name = f"{tfl._text(self.g8.tensors[t].name)}_{DTYPES[dtype]}".encode()
        tensor.buffer = self.empty_buffer()
        self.graph.tensors.append(tensor)
        new = len(self.graph.tensors) - 1
        op = schema.OperatorT()
        op.opcodeIndex = self.quantize_opcode()
        op.inputs, op.outputs = [self.version[(t, other)]], [new]
        self.ops.append(op)
        self.version[(t, dtype)] = new
        return new

    def same_constant(self, k8: int, k16: int) -> bool:
        """True for a constant both models hold alike (a shape, an axis): the int8 model's is used."""
        if k8 < 0 or not _is_constant(self.m8, k8):
            return False
        t8, t16 = self.g8.tensors[k8], self.g16.tensors[k16]
        return (t8.type == t16.type and tfl.tensor_quant(self.m8, k8) == tfl.tensor_quant(self.m16, k16)
                and bytes(self.m8.buffers[t8.buffer].data) == bytes(self.m16.buffers[t16.buffer].data))

    def constant16(self, index: int) -> int:
        if index not in self.constants16:
            tensor = copy.deepcopy(self.g16.tensors[index])
            buffer = copy.deepcopy(self.m16.buffers[tensor.buffer])
            self.model.buffers.append(buffer)
            tensor.buffer = len(self.model.buffers) - 1
            self.graph.tensors.append(tensor)
            self.constants16[index] = len(self.graph.tensors) - 1
        return self.constants16[index]

    def add_float_op(self, i: int) -> None:
        """Op ``i`` as the 16x8 model left it, in float32: each int16 input DEQUANTIZEd, the float op, its
        output QUANTIZEd to the 16x8 model's int16 form of the tensor (the ops and tensors TF's quantizer
        made, taken over)."""
        op8 = self.g8.operators[i]
        source = self.g16.operators[self.pair.float_op[i]]
        by_output = {int(k): op for op in self.g16.operators for k in op.outputs}
        readers = {}
        for op in self.g16.operators:
            for k in op.inputs:
                readers.setdefault(int(k), []).append(op)
        inputs = []
        for a, k in zip(op8.inputs, source.inputs):
            if k < 0:
                inputs.append(int(k))
            elif _is_constant(self.m16, int(k)):
                inputs.append(self.constant16(int(k)))
            else:
                dequantize = by_output[int(k)]
                inputs.append(self.float_tensor(int(k)))
                op = schema.OperatorT()
                op.opcodeIndex = self.opcode(self.m16.operatorCodes[dequantize.opcodeIndex])
                op.inputs, op.outputs = [self.get(int(a), INT16)], [inputs[-1]]
                self.ops.append(op)
        op = copy.deepcopy(source)
        op.opcodeIndex = self.opcode(self.m16.operatorCodes[source.opcodeIndex])
        op.inputs = inputs
        op.outputs = [self.float_tensor(int(k)) for k in source.outputs]
        self.ops.append(op)
        for a, k, f in zip(op8.outputs, source.outputs, op.outputs):
            quantize = next(r for r in readers[int(k)] if tfl.op_name(self.m16, r.opcodeIndex) == "QUANTIZE")
            q = schema.OperatorT()
            q.opcodeIndex = self.opcode(self.m16.operatorCodes[quantize.opcodeIndex])
            q.inputs, q.outputs = [f], [self.place(int(a), INT16)]
            self.ops.append(q)

    def float_tensor(self, k16: int) -> int:
        """A new activation tensor like the 16x8 model's float tensor ``k16``."""
        tensor = copy.deepcopy(self.g16.tensors[k16])
        tensor.buffer = self.empty_buffer()
        self.graph.tensors.append(tensor)
        return len(self.graph.tensors) - 1

    def add_op(self, i: int) -> None:
        op8 = self.g8.operators[i]
        if i in self.int16_ops and self.pair.in_float(i):
            self.add_float_op(i)
            return
        if i in self.int16_ops:
            source = self.g16.operators[self.pair.int16_op[i]]
            op = copy.deepcopy(source)
            op.opcodeIndex = self.opcode(self.m16.operatorCodes[source.opcodeIndex])
            inputs = []
            for a, k in zip(op8.inputs, source.inputs):
                if k < 0:
                    inputs.append(int(k))
                elif _is_constant(self.m16, int(k)):
                    inputs.append(int(a) if self.same_constant(int(a), int(k)) else self.constant16(int(k)))
                else:
                    inputs.append(self.get(int(a), INT16))
            op.inputs = inputs
            op.outputs = [self.place(int(a), INT16) for a in op8.outputs]
        else:
            op = copy.deepcopy(op8)
            op.inputs = [int(k) if k < 0 or _is_constant(self.m8, int(k)) else self.get(int(k), INT8)
                         for k in op8.inputs]
            op.outputs = [self.place(int(k), INT8) for k in op8.outputs]
        self.ops.append(op)

    def readers(self, t: int) -> list[int]:
        return [i for i, op in enumerate(self.g8.operators) if t in [int(k) for k in op.inputs]]

    def producer(self, t: int) -> int | None:
        return next((i for i, op in enumerate(self.g8.operators) if t in [int(k) for k in op.outputs]), None)

    def build(self) -> tuple[bytes, dict[str, str]]:
        inputs, outputs = tfl.signature(self.m8)
        dtypes: dict[str, int] = {}
        dtypes[self.pair.x_key] = INT16 if any(r in self.int16_ops for r in self.readers(inputs[self.pair.x_key])) else INT8
        for in_key, out_key in self.pair.ties:
            made_by = self.producer(outputs[out_key])
            if made_by is not None and (self.pair.int16_op[made_by] is not None or self.pair.float_op[made_by] is not None):
                wide = made_by in self.int16_ops
            else:
                wide = any(r in self.int16_ops for r in self.readers(inputs[in_key]))
            dtypes[in_key] = INT16 if wide else INT8
        new_in = {key: self.place(t, dtypes[key]) for key, t in inputs.items()}
        for i in range(len(self.g8.operators)):
            self.add_op(i)
        new_out = {}
        state_of = {out_key: in_key for in_key, out_key in self.pair.ties}
        for key, t in outputs.items():
            if key in state_of:
                new_out[key] = self.get(t, dtypes[state_of[key]])
            else:
                new_out[key] = self.get(t, INT16 if self.producer(t) in self.int16_ops else INT8)
        self.graph.operators = self.ops
        self.graph.inputs = [new_in[k] for k in inputs]
        self.graph.outputs = [new_out[k] for k in outputs]
        sig = self.model.signatureDefs[0]
        for item in sig.inputs:
            item.tensorIndex = new_in[tfl._text(item.name)]
        for item in sig.outputs:
            item.tensorIndex = new_out[tfl._text(item.name)]
        _compact(self.model)
        return tfl.write(self.model), {k: DTYPES[v] for k, v in dtypes.items()}


def _compact(model) -> None:
    """Drop the tensors no op, input or output uses, and the data of buffers no tensor uses."""
    graph = model.subgraphs[0]
    used = sorted({int(k) for op in graph.operators for k in [*op.inputs, *op.outputs] if k >= 0}
                  | {int(k) for k in graph.inputs} | {int(k) for k in graph.outputs})
    remap = {old: new for new, old in enumerate(used)}
    graph.tensors = [graph.tensors[i] for i in used]
    for op in graph.operators:
        op.inputs = [remap[int(k)] if k >= 0 else int(k) for k in op.inputs]
        op.outputs = [remap[int(k)] for k in op.outputs]
        if op.intermediates is not None and len(op.intermediates):
            op.intermediates = [remap[int(k)] for k in op.intermediates if int(k) in remap]
    graph.inputs = [remap[int(k)] for k in graph.inputs]
    graph.outputs = [remap[int(k)] for k in graph.outputs]
    for sig in model.signatureDefs or []:
        for item in [*sig.inputs, *sig.outputs]:
            item.tensorIndex = remap[int(item.tensorIndex)]
    kept = {t.buffer for t in graph.tensors} | {m.buffer for m in (model.metadata or [])} | {0}
    for index, buffer in enumerate(model.buffers):
        if index not in kept:
            buffer.data = None


def splice(pair: Pair, int16_ops: set[int] | list[int]) -> bytes:
    """The mixed model with the int8 model's ops ``int16_ops`` (indices) in 16x8, the rest in int8.

    Ops with no 16x8 form stay int8 whatever the set says."""
    return _Splice(pair, set(int16_ops)).build()[0]


def splice_with_dtypes(pair: Pair, int16_ops: set[int] | list[int]) -> tuple[bytes, dict[str, str]]:
    """``splice`` and the dtype of x and of each state (by signature input key)."""
    return _Splice(pair, set(int16_ops)).build()


# ---------------------------------------------------------------- error against the float model

def run_quantized(data: bytes, sequences: np.ndarray, ties: list[tuple[str, str]], x_key: str = "x",
                  y_key: str = "y") -> np.ndarray:
    """Run a quantized step model over float sequences, states fed back, from zero states: the
    dequantized outputs (sequences, steps, outputs). ``ties``: (input key, output key) of each state."""
    from edgernn.tflite.oracle import Stepper, quantize

    model = tfl.read(data)
    inputs, outputs = tfl.signature(model)
    stepper = Stepper(data, ties, x_key=x_key, y_key=y_key, y_entry=tfl.tensor_quant(model, outputs[y_key]))
    return np.asarray(stepper.run(quantize(np.asarray(sequences), tfl.tensor_quant(model, inputs[x_key]))).y_float,
                      np.float32)


def l2r(got: np.ndarray, want: np.ndarray) -> float:
    """||got - want|| / ||want||, by validate's running sums (edgernn.metrics)."""
    sums = ErrorSums()
    sums.update(got, want)
    return float(sums.result()["l2r"])


def sequence_l2r(got: np.ndarray, want: np.ndarray) -> float:
    """The l2r that SEQUENCE_QUANTILE of the sequences (the first axis) keep each on their own: its quantile over
    the sequences whose float output is not all zero (0.0 where none is)."""
    each = [l2r(g, w) for g, w in zip(got, want) if np.any(w)]
    return float(np.quantile(each, SEQUENCE_QUANTILE)) if each else 0.0


def budget_error(got: np.ndarray, want: np.ndarray) -> float:
    """The error --max-error bounds, of outputs (sequences, steps, outputs): the larger of the l2r over the
    sequences together and ``sequence_l2r``. An l2r over many sequences is weighted by the largest: a plan at
    the budget there can be far above it on a single trajectory (docs/quantization.md)."""
    return max(l2r(got, want), sequence_l2r(got, want))


def quantization_error(folder: str | Path, manifest: Manifest, float_step: str, sequences: np.ndarray,
                       what: str = "calibration sequences") -> dict:
    """The folder's quantized step model against its float one (``float_step``), over (up to 8 of) ``sequences``: the
    calibration windows, or the streams of the horizon (``what``)."""
    from edgernn.tflite.oracle import Stepper
    from edgernn.tflite.quantize import run_step_sequences

    probe = sequences[:8]
    got = Stepper.of_folder(folder, manifest).run(probe, quantize_input=True).y_float
    data = (Path(folder) / float_step).read_bytes()
    if manifest.mode == "fused":
        want = Stepper(data).run(probe).y.astype(np.float32)
    else:
        want = run_step_sequences(data, probe, [s["name"] for s in manifest.states], what="sequence")[1]
    err = got - want
    norm = float(np.linalg.norm(want))
    shape = (len(probe), probe.shape[1], -1)
    return {
        "on": f"{len(probe)} {what} of {probe.shape[1]} steps, per-step output y",
        "l2r": float(np.linalg.norm(err) / norm) if norm > 0 else 0.0,
        "sequence_l2r": sequence_l2r(np.reshape(got, shape), np.reshape(want, shape)),
        "rmse": float(np.sqrt(np.mean(err ** 2))),
        "max_abs": float(np.max(np.abs(err))),
    }


def budget_error_of(error: dict) -> float:
    """The error --max-error bounds (``budget_error``) from a manifest's ``quantization_error``: on
    the calibration windows and on the streams of the horizon."""
    return max(error["l2r"], error.get("sequence_l2r", 0.0),
               *(error["horizon"][k] for k in ("l2r", "sequence_l2r") if "horizon" in error))



# ---------------------------------------------------------------- the plan

@dataclass
class Plan:
    int16_ops: list[int]
    error: float
    int8_error: float
    int16_error: float
    sensitivity: dict[int, float]  # per op: its group's
    met: bool
    note: str | None = None
    groups: list[list[int]] | None = None
    # estimated (cycles per step, bytes of weights and arena) of the int8, int16 and chosen plans, when a
    # cost was given; "chosen_by": which search gave the chosen plan
    estimates: dict[str, tuple[int, int] | None] | None = None
    chosen_by: str | None = None


PRUNE_TRIES = 16  # after the bisection, how many of the least sensitive chosen ops are tried back in int8
DESCENT_PASSES = 2  # the cost descent's passes over its moves


def op_groups(pair: Pair) -> list[list[int]]:
    """The ops that can be int16, in groups that share a quantized constant: ops reading one weight or
    constant (an LTC's parameters, read by each of its ODE unfolds) take one precision together, so no
    constant is held twice, once per dtype. (Shapes and axes, not quantized, are the same in both models
    and group nothing.) Groups in the order of their first op."""
    candidates = pair.can_int16()
    graph = pair.m8.subgraphs[0]
    parent = {i: i for i in candidates}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    reader: dict[int, int] = {}
    for i in candidates:
        for k in graph.operators[i].inputs:
            if k >= 0 and _is_constant(pair.m8, int(k)) and tfl.tensor_quant(pair.m8, int(k))["scale"] is not None:
                buffer = graph.tensors[k].buffer
                if buffer in reader:
                    parent[find(i)] = find(reader[buffer])
                else:
                    reader[buffer] = i
    groups: dict[int, list[int]] = {}
    for i in candidates:
        groups.setdefault(find(i), []).append(i)
    return sorted(groups.values(), key=lambda g: g[0])


def sibling_moves(pair: Pair, groups: list[list[int]]) -> list[frozenset[int]]:
    """Sets of groups to move to int8 together: the groups of the ops of one kind that read one activation
    (a cell's gate FULLY_CONNECTEDs): in int8 they share one QUANTIZE of that input, and the backend can
    compute them in one call."""
    graph = pair.m8.subgraphs[0]
    group_of = {i: g for g, members in enumerate(groups) for i in members}
    by_input: dict[tuple[str, int], set[int]] = {}
    for i, g in group_of.items():
        op = graph.operators[i]
        first = next((int(k) for k in op.inputs if k >= 0 and not _is_constant(pair.m8, int(k))), None)
        if first is not None:
            by_input.setdefault((pair.ops[i], first), set()).add(g)
    return [frozenset(gs) for gs in by_input.values() if len(gs) > 1]


class _Search:
    """The plans tried, by the groups in int16: the error of each (LiteRT on the calibration data) and its
    estimated cost, each measured once."""

    def __init__(self, pair: Pair, groups: list[list[int]], sequences, want, cost):
        self.pair, self.groups, self.sequences, self.want, self.cost = pair, groups, sequences, want, cost
        self.errors: dict[frozenset, tuple[float, bytes]] = {}
        self.costs: dict[frozenset, tuple[int, int] | None] = {}

    def model(self, chosen) -> bytes:
        key = frozenset(chosen)
        if key in self.errors:
            return self.errors[key][1]
        return splice(self.pair, [i for g in key for i in self.groups[g]])

    def error(self, chosen) -> float:
        key = frozenset(chosen)
        if key not in self.errors:
            data = self.model(key)
            got = run_quantized(data, self.sequences, self.pair.ties, self.pair.x_key, self.pair.y_key)
            self.errors[key] = (budget_error(got, self.want), data)
        return self.errors[key][0]

    def estimate(self, chosen) -> tuple[int, int] | None:
        key = frozenset(chosen)
        if self.cost is None:
            return None
        if key not in self.costs:
            self.costs[key] = self.cost(self.model(key))
        return self.costs[key]


def _fewest_int16(search: _Search, every: list[int], by_group: dict[int, float], max_error: float,
                  e16: float) -> list[int]:
    """The fewest groups in int16, greedy by sensitivity: the shortest prefix of the groups from the most
    sensitive down that meets the budget (bisection, checked), then groups whose return to int8 keeps the
    budget dropped again, least sensitive first (at most PRUNE_TRIES tried)."""
    order = sorted(every, key=lambda g: -by_group[g])
    lo, hi = 0, len(order)  # order[:hi] meets the budget
    while lo < hi:
        mid = (lo + hi) // 2
        if search.error(order[:mid]) <= max_error:
            hi = mid
        else:
            lo = mid + 1
    chosen = list(order[:hi])
    if search.error(chosen) > max_error:  # not monotone: take the whole order, which is all-int16
        chosen = list(order)
    for g in sorted(chosen, key=lambda g: by_group[g])[:PRUNE_TRIES]:
        trial = [h for h in chosen if h != g]
        if search.error(trial) <= max_error:
            chosen = trial
    return chosen


def _cost_search(search: _Search, start: list[int], every: list[int], by_group: dict[int, float],
                 moves: list[frozenset[int]], max_error: float, limit_bytes: int, both_ways: bool) -> list[int]:
    """A local search on the estimated cost from ``start``: moves (one group, or groups that go together) are
    tried from the least sensitive, each taking its groups into int8 where they are all int16 or, ``both_ways``,
    into int16 where they are all int8 (which can remove a seam); a move is kept when it lowers the estimated
    cycles, keeps the bytes (weights and arena) within ``limit_bytes`` or what they were, and the plan still
    meets the budget. A move that only pays once a neighbour has moved is tried again in the next pass."""
    chosen = set(start)
    current = search.estimate(chosen)
    if current is None:
        return sorted(chosen)
    ordered = sorted([frozenset([g]) for g in every] + moves, key=lambda m: sum(by_group[g] for g in m))
    for _ in range(DESCENT_PASSES):
        moved = False
        for move in ordered:
            if move <= chosen:
                trial = chosen - move
            elif both_ways and not move & chosen:
                trial = chosen | move
            else:
                continue
            estimate = search.estimate(trial)
            if estimate is None or estimate[0] >= current[0] or estimate[1] > max(current[1], limit_bytes):
                continue
            if search.error(trial) <= max_error:
                chosen, current, moved = trial, estimate, True
        if not moved:
            break
    return sorted(chosen)


def plan_precision(pair: Pair, sequences: np.ndarray, want: np.ndarray, max_error: float,
                   log=lambda _: None, cost=None) -> tuple[Plan, bytes]:
    """The plan of op groups (``op_groups``) in int16 whose mixed model meets ``max_error`` at the least
    estimated cost.

    ``cost`` (mixed model bytes -> (cycles per step, weight and arena bytes), or None where the model
    cannot be estimated) weighs the plans; without it, the plan is the fewest groups in int16. The
    sensitivity of a group is the error of the model with that group alone in int8 and every other op in
    int16, less the all-int16 error. Four plans meet the budget: all-int16, the fewest groups in int16
    (``_fewest_int16``), a descent on the estimated cost from all-int16 and a local search on it both ways from
    the fewest groups (``_cost_search``); the chosen one is
    the cheapest in estimated cycles of those whose bytes are within all-int16's (then fewer bytes, then
    fewer int16 ops)."""
    candidates = pair.can_int16()
    groups = op_groups(pair)
    search = _Search(pair, groups, sequences, want, cost)
    every = list(range(len(groups)))
    e8, e16 = search.error([]), search.error(every)

    def estimates(chosen) -> dict | None:
        if cost is None:
            return None
        return {"int8": search.estimate([]), "int16": search.estimate(every), "auto": search.estimate(chosen)}

    if e8 <= max_error:
        return Plan([], e8, e8, e16, {}, True, "int8 meets the budget", estimates=estimates([]),
                    chosen_by="int8"), search.model([])
    if e16 > max_error:
        return Plan(list(candidates), e16, e8, e16, {}, False,
                    f"even int16 ({e16:.4f}) misses the budget {max_error:g}", estimates=estimates(every),
                    chosen_by="int16"), search.model(every)
    log(f"measuring the sensitivity of {len(groups)} groups of {len(candidates)} ops")
    by_group = {g: search.error([h for h in every if h != g]) - e16 for g in every}
    found = {"fewest int16 ops": _fewest_int16(search, every, by_group, max_error, e16)}
    chosen, chosen_by = found["fewest int16 ops"], "fewest int16 ops"
    if cost is not None and search.estimate(every) is not None:
        limit = search.estimate(every)[1]
        log("weighing the plans by their estimated cost")
        moves = sibling_moves(pair, groups)
        # a descent from all-int16, and a search both ways from the fewest groups: the descent stops where every
        # single move into int8 costs more in seams than it saves
        found["least estimated cost"] = _cost_search(search, every, every, by_group, moves, max_error, limit, False)
        found["fewest int16 ops, refined"] = _cost_search(search, found["fewest int16 ops"], every, by_group, moves,
                                                           max_error, limit, True)
        found["all int16"] = every
        ranked = []
        for how, plan in found.items():
            estimate = search.estimate(plan)
            if estimate is not None and estimate[1] <= limit:
                ranked.append(((estimate[0], estimate[1], len(plan)), how))
        if ranked:
            chosen_by = min(ranked)[1]
            chosen = found[chosen_by]
    sensitivity = {i: by_group[g] for g in every for i in groups[g]}
    ops = sorted(i for g in chosen for i in groups[g])
    return Plan(ops, search.error(chosen), e8, e16, sensitivity, True, groups=groups,
                estimates=estimates(chosen), chosen_by=chosen_by), search.model(chosen)


def op_label(pair: Pair, i: int) -> str:
    """An op of the int8 model by its name and its first output's name."""
    graph = pair.m8.subgraphs[0]
    op = graph.operators[i]
    return f"{pair.ops[i]} {tfl._text(graph.tensors[op.outputs[0]].name)}"


def _layer_of(tensor_name: str) -> str:
    """The Keras layer (name scope) a tensor name comes from, or "" when TF left none."""
    parts = tensor_name.split(";")[0].split("/")
    return "/".join(parts[1:-1]) if len(parts) > 2 else ""


def arena_estimate(model) -> int:
    """Bytes of activations live at once, at the worst op: each tensor lives from the op that writes it
    (the graph's inputs from the start) to the last op that reads it (the outputs to the end). The
    backend's placement gives the real arena; this compares plans before any C is made."""
    graph = model.subgraphs[0]
    ops = graph.operators or []
    size = {}
    for index, tensor in enumerate(graph.tensors):
        if not _is_constant(model, index):
            width = {INT8: 1, INT16: 2}.get(tensor.type, 4)
            size[index] = width * int(np.prod([int(d) for d in tensor.shape])) if tensor.shape is not None else 0
    first = {int(k): -1 for k in graph.inputs}
    last = {int(k): len(ops) for k in graph.outputs}
    for t, op in enumerate(ops):
        for k in op.outputs:
            first.setdefault(int(k), t)
        for k in op.inputs:
            if int(k) in size:
                last[int(k)] = max(last.get(int(k), t), t)
    peak = 0
    for t in range(len(ops)):
        live = sum(size[k] for k in size if first.get(k, t) <= t <= last.get(k, first.get(k, t)))
        peak = max(peak, live)
    return peak


def precision_entry(pair: Pair, plan: Plan, mixed_model: bytes, max_error: float, probe: np.ndarray) -> dict:
    """manifest ``precision``: the budget, the errors, the cost and the dtype of every op."""
    model = tfl.read(mixed_model)
    graph = pair.m8.subgraphs[0]
    chosen = set(plan.int16_ops)
    rows = []
    for i, name in enumerate(pair.ops):
        output = tfl._text(graph.tensors[graph.operators[i].outputs[0]].name)
        row = {"op": i, "name": name, "output": output, "layer": _layer_of(output),
               "dtype": "int16" if i in chosen else "int8"}
        if pair.in_float(i):
            row["why"] = "TFLite has no 16x8 form of this op: in its 16x8 precision it runs in float32 between int16 tensors"
            if i in chosen:
                row["float32"] = True
        elif pair.int16_op[i] is None:
            row["why"] = "TFLite has no 16x8 form of this op"
        if i in plan.sensitivity:
            row["sensitivity"] = plan.sensitivity[i]
        if plan.groups:
            row["group"] = next((g for g, members in enumerate(plan.groups) if i in members), None)
        rows.append(row)
    names = tfl.op_names(model)
    return {
        "max_error": max_error,
        "error": plan.error,
        "int8_error": plan.int8_error,
        "int16_error": plan.int16_error,
        "met": plan.met,
        "note": plan.note,
        "on": _on(probe),
        "int16_ops": len(chosen),
        "groups": len(plan.groups) if plan.groups else None,
        "int8_ops": len(pair.ops) - len(chosen),
        "quantize_ops": _seams(model),
        **_io_dtypes(model, pair.ties),
        "weight_bytes": {"int8": tfl.constant_bytes(pair.m8), "int16": tfl.constant_bytes(pair.m16),
                         "auto": tfl.constant_bytes(model)},
        "arena_estimate_bytes": {"int8": arena_estimate(pair.m8), "int16": arena_estimate(pair.m16),
                                 "auto": arena_estimate(model)},
        "float_fallback_ops": sorted({pair.ops[i] for i, j in enumerate(pair.int16_op) if j is None}),
        "float32_ops": sorted(i for i in chosen if pair.in_float(i)),
        "estimate": _estimate_entry(plan),
        "plan": rows,
    }


def _on(probe: np.ndarray) -> str:
    """precision ``on``: what the plan's errors were measured on."""
    return f"{len(probe)} calibration sequences of {probe.shape[1]} steps, per-step output y, states fed back"


def _io_dtypes(model, ties: list[tuple[str, str]]) -> dict:
    """precision ``x``, ``y`` and ``states``: the dtype of the model's input, output and each state."""
    inputs, outputs = tfl.signature(model)
    return {"x": tfl.tensor_quant(model, inputs["x"])["dtype"] if "x" in inputs else None,
            "y": tfl.tensor_quant(model, outputs["y"])["dtype"] if "y" in outputs else None,
            "states": {key: tfl.tensor_quant(model, inputs[key])["dtype"] for key, _ in ties}}


def uniform_entry(models: dict[str, bytes], chosen: str, errors: dict[str, float], max_error: float, met: bool,
                  probe: np.ndarray, ties: list[tuple[str, str]], note: str) -> dict:
    """manifest ``precision`` where no mixed model can be made and --quant auto chose one of the uniform models
    ``models`` (dtype -> quantized model): ``chosen``, with ``errors`` (dtype -> its l2r) and the same fields as
    ``precision_entry``, every op of the chosen dtype."""
    model = tfl.read(models[chosen])
    graph = model.subgraphs[0]
    rows = []
    for op in graph.operators:
        if _converts(model, op):
            continue
        output = tfl._text(graph.tensors[op.outputs[0]].name)
        rows.append({"op": len(rows), "name": tfl.op_name(model, op.opcodeIndex), "output": output,
                     "layer": _layer_of(output), "dtype": chosen})
    read = {dtype: tfl.read(data) for dtype, data in models.items()}
    return {
        "max_error": max_error, "error": errors[chosen], "int8_error": errors.get("int8"),
        "int16_error": errors.get("int16"), "met": met, "note": note,
        "on": _on(probe),
        "int16_ops": len(rows) if chosen == "int16" else 0, "groups": None,
        "int8_ops": len(rows) if chosen == "int8" else 0, "quantize_ops": 0,
        **_io_dtypes(model, ties),
        "weight_bytes": {**{d: tfl.constant_bytes(m) for d, m in read.items()}, "auto": tfl.constant_bytes(model)},
        "arena_estimate_bytes": {**{d: arena_estimate(m) for d, m in read.items()}, "auto": arena_estimate(model)},
        "float_fallback_ops": [], "float32_ops": [], "estimate": None, "plan": rows,
    }


def _estimate_entry(plan: Plan) -> dict | None:
    """precision ``estimate``: the estimated cost of the int8, int16 and chosen plans, and which search
    chose it."""
    if plan.estimates is None:
        return None
    out = {"chosen_by": plan.chosen_by}
    for key, value in plan.estimates.items():
        out[key] = None if value is None else {"cycles_per_step": value[0], "bytes": value[1]}
    return out


def plan_lines(pair: Pair, plan: Plan) -> list[str]:
    """The plan in a few lines: errors, then the int16 ops by layer."""
    lines = [f"error {plan.error:.4f} (int8 {plan.int8_error:.4f}, int16 {plan.int16_error:.4f}); "
             f"{len(plan.int16_ops)} of {len(pair.ops)} ops in int16" + (f"; {plan.note}" if plan.note else "")]
    e = plan.estimates or {}
    if all(e.get(k) for k in ("int8", "int16", "auto")):
        lines.append("estimated cycles per step / weight and arena bytes: " + ", ".join(
            f"{k} {e[k][0]:,} / {e[k][1]:,}" for k in ("int8", "int16", "auto")) + f" (chosen: {plan.chosen_by})")
    graph = pair.m8.subgraphs[0]
    by_layer: dict[str, list[str]] = {}
    for i in plan.int16_ops:
        layer = _layer_of(tfl._text(graph.tensors[graph.operators[i].outputs[0]].name)) or "(graph)"
        by_layer.setdefault(layer, []).append(pair.ops[i])
    for layer, ops in by_layer.items():
        lines.append(f"int16 in {layer}: {len(ops)} ops ({', '.join(sorted(set(ops)))})")
    return lines
