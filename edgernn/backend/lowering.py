"""Lower IR operators to kernel calls with every constant computed.

Each supported (op, dtype) pair has one lowering function. It checks what the kernel assumes, computes
the multipliers, shifts, folded biases and lookup tables the way TFLite's Prepare does, and returns a
:class:`Call`: the kernel's name, its arguments and the constant data it needs. Anything else is refused
with the op's name and its index in the graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edgernn.backend import quantparams as qp
from edgernn.backend.kernels import REQUANTIZE_ABS, REQUANTIZE_IDENTITY, REQUANTIZE_NEG, kernel_args
from edgernn.backend.ir import Graph, Operator, Tensor
from edgernn.errors import EdgeRNNError

FLT_MAX = "3.402823466e+38f"


@dataclass
class ConstArray:
    name: str
    ctype: str
    values: list
    weights: bool = True         # placed with the board's weights section attribute


@dataclass
class ConstStruct:
    name: str
    ctype: str
    fields: list                 # initializer values in field order; nested lists are braces


@dataclass
class Call:
    op_index: int
    op: str
    fn: str
    args: list                   # items: ("tensor", index) | ("const", name) | ("ref", name) | literal str
    arrays: list[ConstArray] = field(default_factory=list)
    structs: list[ConstStruct] = field(default_factory=list)
    more: list = field(default_factory=list)   # further calls of the same op (data movement)
    scratch: tuple[str, int] | None = None      # (ctype, bytes) of arena scratch, argument ("scratch", op)


class Unsupported(EdgeRNNError):
    pass


def _refuse(op: Operator, why: str) -> Unsupported:
    return Unsupported(f"op {op.index} ({op.op}) is not supported by the C backend: {why}")


def _lit_float(x: float) -> str:
    if x == float("inf"):
        return FLT_MAX
    if x == float("-inf"):
        return "-" + FLT_MAX
    return repr(float(np.float32(x))) + "f" if "." in repr(float(np.float32(x))) or "e" in repr(float(np.float32(x))) else repr(float(np.float32(x))) + ".0f"


class Lowering:
    def __init__(self, graph: Graph, prefix: str):
        self.g = graph
        self.prefix = prefix
        self.calls: list[Call] = []
        self.runtime_consts: set[int] = set()

    # ---- helpers ----
    def t(self, i: int) -> Tensor:
        return self.g.tensors[i]

    def call(self, op: Operator, fn: str, args: dict, **extra) -> Call:
        """A call of kernel fn, its arguments given by name (edgernn/backend/kernels.py)."""
        return Call(op.index, op.op, fn, kernel_args(fn, args), **extra)

    def cname(self, op: Operator, what: str) -> str:
        return f"{self.prefix}_op{op.index}_{what}"

    def const_input(self, op: Operator, pos: int) -> np.ndarray:
        idx = op.inputs[pos]
        if idx < 0 or not self.t(idx).is_const:
            raise _refuse(op, f"input {pos} must be a constant")
        return self.t(idx).data

    def operand(self, i: int):
        """A tensor as a kernel argument; constants become runtime arrays in weights.c."""
        if self.t(i).is_const:
            self.runtime_consts.add(i)
        return ("tensor", i)

    def lower(self) -> list[Call]:
        for op in self.g.operators:
            fn = getattr(self, f"op_{op.op.lower()}", None)
            if fn is None:
                raise _refuse(op, "no kernel for this op")
            out_dtype = self.t(op.outputs[0]).dtype if op.outputs else "float32"
            call = fn(op, out_dtype)
            if call is None:
                raise _refuse(op, f"no {out_dtype} kernel")
            self.calls.append(call)
        return self.calls

    # ---- FULLY_CONNECTED ----
    def op_fully_connected(self, op: Operator, dtype: str):
        opts = op.options
        x, w = self.t(op.inputs[0]), self.t(op.inputs[1])
        bias_i = op.inputs[2] if len(op.inputs) > 2 else -1
        out = self.t(op.outputs[0])
        if not w.is_const or len(w.shape) != 2:
            raise _refuse(op, "weights must be a constant 2-D tensor")
        if opts.get("weightsFormat", 0) != 0:
            raise _refuse(op, "shuffled weights format")
        n_out, n_in = w.shape
        rows = x.size // n_in
        act = opts.get("fusedActivationFunction", 0)
        if dtype == "float32":
            lo, hi = qp.activation_range_float(act)
            if w.dtype != "float32":
                raise _refuse(op, "hybrid (quantized weights, float activations) models")
            self.runtime_consts.add(op.inputs[1])
            bias_arg = "NULL"
            if bias_i >= 0:
                self.runtime_consts.add(bias_i)
                bias_arg = ("tensor", bias_i)
            return self.call(op, "edgernn_fully_connected_f32",
                             {"in": ("tensor", op.inputs[0]), "w": ("tensor", op.inputs[1]), "bias": bias_arg,
                              "act_min": _lit_float(lo), "act_max": _lit_float(hi), "rows": str(rows),
                              "n_in": str(n_in), "n_out": str(n_out), "out": ("tensor", op.outputs[0])})
        if dtype not in ("int8", "int16") or w.dtype != "int8":
            return None
        in_s, in_zp = x.qparams()
        out_s, out_zp = out.qparams()
        if np.any(w.zero_point != 0):
            raise _refuse(op, "asymmetric weights")
        if dtype == "int16" and (in_zp != 0 or out_zp != 0):
            raise _refuse(op, "int16 activations with a nonzero zero point")
        if w.per_channel:
            reals = [float(np.float32(in_s)) * float(s) / float(np.float32(out_s)) for s in w.scale]
        else:
            prod = qp.f32(np.float32(in_s) * np.float32(w.scale[0]))
            reals = [prod / float(np.float32(out_s))] * n_out
        mult, shift = zip(*(qp.quantize_multiplier(r) for r in reals))
        wsum = w.data.astype(np.int64).sum(axis=1)
        bias = np.zeros(n_out, dtype=np.int64) if bias_i < 0 else self.t(bias_i).data.astype(np.int64)
        bias_eff = bias + (-in_zp) * wsum
        lo, hi = qp.activation_range(act, dtype, out_s, out_zp)
        self.runtime_consts.add(op.inputs[1])
        bias_type = "int32_t" if dtype == "int8" else "int64_t"
        if dtype == "int8" and (bias_eff.min() < qp.INT32_MIN or bias_eff.max() > qp.INT32_MAX):
            raise _refuse(op, "folded bias exceeds int32")
        arrays = [
            ConstArray(self.cname(op, "bias"), bias_type, [int(b) for b in bias_eff]),
            ConstArray(self.cname(op, "mult"), "int32_t", [int(m) for m in mult]),
            ConstArray(self.cname(op, "shift"), "int32_t", [int(s) for s in shift]),
        ]
        args = {"in": ("tensor", op.inputs[0]), "w": ("tensor", op.inputs[1]), "bias": ("const", arrays[0].name),
                "multiplier": ("const", arrays[1].name), "shift": ("const", arrays[2].name),
                "output_offset": str(out_zp), "act_min": str(lo), "act_max": str(hi), "rows": str(rows),
                "n_in": str(n_in), "n_out": str(n_out), "out": ("tensor", op.outputs[0])}
        if dtype == "int8":
            # The one op whose builtin kernel rounds differently from the reference one (docs/ops.md): the
            # rescale follows the kernel of the graph's oracle.
            args["rounding"] = "EDGERNN_ROUND_TWICE_UP" if self.g.oracle == "builtin" else "EDGERNN_ROUND_ONCE"
        fn = "edgernn_fully_connected_s8" if dtype == "int8" else "edgernn_fully_connected_s16"
        return self.call(op, fn, args, arrays=arrays)

    # ---- binary element-wise ----
    def bcast(self, op: Operator) -> ConstStruct:
        a, b, out = self.t(op.inputs[0]), self.t(op.inputs[1]), self.t(op.outputs[0])
        rank = max(len(a.shape), len(b.shape), len(out.shape), 1)
        if rank > 4:
            raise _refuse(op, f"broadcast over {rank} dimensions")
        def pad(shape):
            return (1,) * (4 - len(shape)) + tuple(shape)
        sa, sb, so = pad(a.shape), pad(b.shape), pad(out.shape)
        def strides(shape):
            st, acc = [0] * 4, 1
            for d in range(3, -1, -1):
                st[d] = 0 if (shape[d] == 1 and so[d] != 1) else acc
                acc *= shape[d]
            return st
        for s in (sa, sb):
            for d in range(4):
                if s[d] not in (1, so[d]):
                    raise _refuse(op, f"shapes {a.shape} and {b.shape} do not broadcast to {out.shape}")
        return ConstStruct(self.cname(op, "bcast"), "edgernn_bcast_t", [list(so), strides(sa), strides(sb)])

    def _binary_float(self, op: Operator, fn: str, with_act: bool = True):
        bc = self.bcast(op)
        args = {"b": ("ref", bc.name), "in1": self.operand(op.inputs[0]), "in2": self.operand(op.inputs[1]),
                "out": ("tensor", op.outputs[0])}
        if with_act:
            lo, hi = qp.activation_range_float(op.options.get("fusedActivationFunction", 0))
            args.update(act_min=_lit_float(lo), act_max=_lit_float(hi))
        return self.call(op, fn, args, structs=[bc])

    def _binary_params(self, op: Operator, fn: str, params: ConstStruct) -> Call:
        """A broadcasting integer kernel of a parameter struct (MUL, DIV, SQUARED_DIFFERENCE)."""
        bc = self.bcast(op)
        return self.call(op, fn, {"b": ("ref", bc.name), "p": ("ref", params.name), "in1": self.operand(op.inputs[0]),
                                  "in2": self.operand(op.inputs[1]), "out": ("tensor", op.outputs[0])},
                         structs=[bc, params])

    def _addsub(self, op: Operator, dtype: str, subtract: bool):
        if dtype == "float32":
            return self._binary_float(op, "edgernn_sub_f32" if subtract else "edgernn_add_f32")
        if dtype not in ("int8", "int16"):
            return None
        a, b, out = self.t(op.inputs[0]), self.t(op.inputs[1]), self.t(op.outputs[0])
        (s1, z1), (s2, z2), (so, zo) = a.qparams(), b.qparams(), out.qparams()
        if dtype == "int16" and op.options.get("potScaleInt16", True):
            pots = [qp.checked_log2(s)[0] for s in (s1, s2, so)]
            if all(pots) and z1 == z2 == zo == 0:
                raise _refuse(op, "the int16 power-of-two-scale path")
        left_shift = 20 if dtype == "int8" else 15
        twice_max = float(2 * max(np.float32(s1), np.float32(s2)))
        r1 = float(np.float32(s1)) / twice_max
        r2 = float(np.float32(s2)) / twice_max
        ro = twice_max / float(np.float32((1 << left_shift) * np.float32(so)))
        m1, sh1 = qp.quantize_multiplier(r1)
        m2, sh2 = qp.quantize_multiplier(r2)
        mo, sho = qp.quantize_multiplier(ro)
        kernel_subtract = subtract
        if subtract and dtype == "int16":
            m2, kernel_subtract = -m2, False   # TFLite runs int16 SUB as ADD with a negated multiplier
        lo, hi = qp.activation_range(op.options.get("fusedActivationFunction", 0), dtype, so, zo)
        if max(sh1, sh2, sho) > 0:
            raise _refuse(op, "a rescale multiplier above one")   # TFLite's Prepare refuses it too
        sfx = "s8" if dtype == "int8" else "s16"
        out_arg = ("tensor", op.outputs[0])
        flag = "1" if kernel_subtract else "0"
        const_pos = [k for k in (0, 1) if self.t(op.inputs[k]).is_const]
        if len(const_pos) == 1 and self.t(op.inputs[1 - const_pos[0]]).size == out.size:
            # one operand constant: its rescaled value (with the op's sign) is folded here, per element
            self.bcast(op)   # refuses shapes that do not broadcast
            c = const_pos[0]
            ct = self.t(op.inputs[c])
            (zc, mc, shc), (zr, mr, shr) = ((z1, m1, sh1), (z2, m2, sh2)) if c == 0 else ((z2, m2, sh2), (z1, m1, sh1))
            sign = -1 if (c == 1 and kernel_subtract) else 1
            vals = np.broadcast_to(ct.data.astype(np.int64), out.shape).reshape(-1)
            k = [sign * qp.rdbpot(qp.srdhm((int(v) - zc) * (1 << left_shift), mc), -shc) for v in vals]
            params = ConstStruct(self.cname(op, "q"), "edgernn_addsub_params_t",
                                 [-zr, 0, zo, left_shift, mr, shr, 0, 0, mo, sho, lo, hi])
            karr = ConstArray(self.cname(op, "k"), "int32_t", k)
            negate = "1" if (c == 0 and kernel_subtract) else "0"
            return self.call(op, f"edgernn_addsub_const_{sfx}",
                             {"p": ("ref", params.name), "negate": negate, "in": ("tensor", op.inputs[1 - c]),
                              "k": ("const", karr.name), "n": str(out.size), "out": out_arg},
                             arrays=[karr], structs=[params])
        params = ConstStruct(self.cname(op, "q"), "edgernn_addsub_params_t",
                             [-z1, -z2, zo, left_shift, m1, sh1, m2, sh2, mo, sho, lo, hi])
        if a.size == b.size == out.size:
            return self.call(op, f"edgernn_addsub_n_{sfx}",
                             {"p": ("ref", params.name), "subtract": flag, "in1": self.operand(op.inputs[0]),
                              "in2": self.operand(op.inputs[1]), "n": str(out.size), "out": out_arg},
                             structs=[params])
        bc = self.bcast(op)
        return self.call(op, f"edgernn_addsub_{sfx}",
                         {"b": ("ref", bc.name), "p": ("ref", params.name), "subtract": flag,
                          "in1": self.operand(op.inputs[0]), "in2": self.operand(op.inputs[1]), "out": out_arg},
                         structs=[bc, params])

    def op_add(self, op, dtype):
        return self._addsub(op, dtype, False)

    def op_sub(self, op, dtype):
        return self._addsub(op, dtype, True)

    def _mul_params(self, op: Operator, dtype: str, real: float) -> ConstStruct:
        a, b, out = self.t(op.inputs[0]), self.t(op.inputs[1]), self.t(op.outputs[0])
        m, s = qp.quantize_multiplier(real)
        lo, hi = qp.activation_range(op.options.get("fusedActivationFunction", 0), dtype, *out.qparams())
        return ConstStruct(self.cname(op, "q"), "edgernn_mul_params_t",
                           [-a.qparams()[1], -b.qparams()[1], out.qparams()[1], m, s, lo, hi])

    def op_mul(self, op, dtype):
        if dtype == "float32":
            return self._binary_float(op, "edgernn_mul_f32")
        if dtype not in ("int8", "int16"):
            return None
        a, b, out = self.t(op.inputs[0]), self.t(op.inputs[1]), self.t(op.outputs[0])
        # TFLite's Mul Prepare computes scale1 * scale2 / scale_out in float before widening to double
        real = qp.f32(np.float32(np.float32(a.qparams()[0]) * np.float32(b.qparams()[0])) / np.float32(out.qparams()[0]))
        params = self._mul_params(op, dtype, real)
        sfx = "s8" if dtype == "int8" else "s16"
        if a.size == b.size == out.size:
            return self.call(op, f"edgernn_mul_n_{sfx}",
                             {"p": ("ref", params.name), "in1": self.operand(op.inputs[0]),
                              "in2": self.operand(op.inputs[1]), "n": str(out.size), "out": ("tensor", op.outputs[0])},
                             structs=[params])
        return self._binary_params(op, f"edgernn_mul_{sfx}", params)

    def op_div(self, op, dtype):
        if dtype == "float32":
            return self._binary_float(op, "edgernn_div_f32")
        if dtype != "int8":
            return None
        a, b, out = self.t(op.inputs[0]), self.t(op.inputs[1]), self.t(op.outputs[0])
        real = float(np.float32(a.qparams()[0])) / (float(np.float32(b.qparams()[0])) * float(np.float32(out.qparams()[0])))
        params = self._mul_params(op, dtype, real)
        return self._binary_params(op, "edgernn_div_s8", params)

    def op_maximum(self, op, dtype):
        return self._binary_float(op, "edgernn_maximum_f32", False) if dtype == "float32" else None

    def op_minimum(self, op, dtype):
        return self._binary_float(op, "edgernn_minimum_f32", False) if dtype == "float32" else None

    def op_squared_difference(self, op, dtype):
        if dtype == "float32":
            return self._binary_float(op, "edgernn_squared_difference_f32", False)
        if dtype != "int8":
            return None
        a, b, out = self.t(op.inputs[0]), self.t(op.inputs[1]), self.t(op.outputs[0])
        (s1, z1), (s2, z2), (so, zo) = a.qparams(), b.qparams(), out.qparams()
        # squared_difference.cc Prepare: float max of the scales, then double arithmetic
        left_shift = 7
        twice_max = float(np.float32(2) * max(np.float32(s1), np.float32(s2)))
        r1 = float(np.float32(s1)) / twice_max
        r2 = float(np.float32(s2)) / twice_max
        ro = (twice_max * twice_max) / float(np.float32((1 << (2 * left_shift)) * np.float32(so)))
        m1, sh1 = qp.quantize_multiplier(r1)
        m2, sh2 = qp.quantize_multiplier(r2)
        mo, sho = qp.quantize_multiplier(ro)
        params = ConstStruct(self.cname(op, "q"), "edgernn_addsub_params_t",
                             [-z1, -z2, zo, left_shift, m1, sh1, m2, sh2, mo, sho, -128, 127])
        return self._binary_params(op, "edgernn_squared_difference_s8", params)

    # ---- unary ----
    def _unary(self, op: Operator, dtype: str, name: str):
        x, out = self.t(op.inputs[0]), self.t(op.outputs[0])
        n = str(out.size)
        if dtype == "float32":
            return self.call(op, "edgernn_unary_f32", {"op": f"EDGERNN_UNARY_{name}", "in": ("tensor", op.inputs[0]),
                                                       "n": n, "out": ("tensor", op.outputs[0])})
        if dtype == "int8":
            return self._lut(op, "edgernn_lut_s8", "int8_t", self.lut_s8(op, name, x, out))
        if dtype == "int16":
            (si, zi), (so, zo) = x.qparams(), out.qparams()
            if name in ("LOGISTIC", "TANH"):
                if zi != 0 or zo != 0 or so != 1.0 / 32768:
                    raise _refuse(op, "int16 needs zero points 0 and output scale 1/32768")
                m, s = qp.int16_activation_params(name, si)
                fn = "edgernn_logistic_s16" if name == "LOGISTIC" else "edgernn_tanh_s16"
                return self.call(op, fn, {"input_multiplier": str(m), "input_left_shift": str(s),
                                          "in": ("tensor", op.inputs[0]), "n": n, "out": ("tensor", op.outputs[0])})
            if name in ("ABS", "NEG"):
                needs = np.float32(si) != np.float32(so)
                m, s = qp.quantize_multiplier(qp.f32(np.float32(si) / np.float32(so))) if needs else (1 << 30, 1)
                params = ConstStruct(self.cname(op, "q"), "edgernn_mul_params_t", [-zi, 0, zo, m, s, -32768, 32767])
                return self._requantize_s16(op, params, REQUANTIZE_ABS if name == "ABS" else REQUANTIZE_NEG)
        return None

    def _lut(self, op: Operator, fn: str, ctype: str, table) -> Call:
        """A table lookup per element (edgernn_lut_s8, edgernn_lut_s16), the table a constant array."""
        arr = ConstArray(self.cname(op, "lut"), ctype, [int(v) for v in table])
        return self.call(op, fn, {"table": ("const", arr.name), "in": ("tensor", op.inputs[0]),
                                  "n": str(self.t(op.outputs[0]).size), "out": ("tensor", op.outputs[0])},
                         arrays=[arr])

    def _requantize_s16(self, op: Operator, params: ConstStruct, mode: int) -> Call:
        return self.call(op, "edgernn_requantize_s16",
                         {"p": ("ref", params.name), "mode": str(mode), "in": ("tensor", op.inputs[0]),
                          "n": str(self.t(op.outputs[0]).size), "out": ("tensor", op.outputs[0])}, structs=[params])

    def lut_s8(self, op: Operator, name: str, x: Tensor, out: Tensor) -> np.ndarray:
        (si, zi), (so, zo) = x.qparams(), out.qparams()
        if name in ("LOGISTIC", "TANH", "EXP"):
            if name == "LOGISTIC" and (so != 1.0 / 256 or zo != -128):
                raise _refuse(op, "int8 LOGISTIC needs output scale 1/256 and zero point -128")
            return qp.lookup_table_s8(qp.float_unary(name), si, zi, so, zo)
        vals = np.arange(-128, 128)
        if name in ("ABS", "NEG"):
            needs = np.float32(si) != np.float32(so)
            m, s = qp.quantize_multiplier(qp.f32(np.float32(si) / np.float32(so))) if needs else (0, 0)
            table = np.zeros(256, dtype=np.int8)
            for v in vals:
                value = abs(int(v) - zi) if name == "ABS" else -(int(v) - zi)
                r = (qp.mbqm(value, m, s) if needs else value) + zo
                table[v & 0xFF] = max(-128, min(127, r))
            return table
        if name in ("RELU", "RELU6"):
            m, s = qp.quantize_multiplier(float(np.float32(si)) / float(np.float32(so)))
            lo = max(-128, zo + int(qp.tflite_round(qp.f32(0.0 / np.float32(so)))))
            hi = 127 if name == "RELU" else min(127, zo + int(qp.tflite_round(qp.f32(6.0 / np.float32(so)))))
            table = np.zeros(256, dtype=np.int8)
            for v in vals:
                r = zo + qp.mbqm(int(v) - zi, m, s)
                table[v & 0xFF] = max(lo, min(hi, r))
            return table
        if name == "REQUANTIZE":
            m, s = qp.quantize_multiplier(float(np.float32(si)) / float(np.float32(so)))
            table = np.zeros(256, dtype=np.int8)
            for v in vals:
                table[v & 0xFF] = max(-128, min(127, qp.mbqm(int(v) - zi, m, s) + zo))
            return table
        raise _refuse(op, "no int8 table")

    def op_logistic(self, op, dtype):
        return self._unary(op, dtype, "LOGISTIC")

    def op_tanh(self, op, dtype):
        return self._unary(op, dtype, "TANH")

    def op_exp(self, op, dtype):
        if dtype == "int16":
            x, out = self.t(op.inputs[0]), self.t(op.outputs[0])
            return self._lut(op, "edgernn_lut_s16", "int16_t",
                             qp.lookup_table_s16(qp.float_unary("EXP"), *x.qparams(), *out.qparams()))
        return self._unary(op, dtype, "EXP")

    def op_abs(self, op, dtype):
        return self._unary(op, dtype, "ABS")

    def op_neg(self, op, dtype):
        return self._unary(op, dtype, "NEG")

    def op_relu(self, op, dtype):
        return self._unary(op, dtype, "RELU")

    def op_relu6(self, op, dtype):
        return self._unary(op, dtype, "RELU6")

    def op_rsqrt(self, op, dtype):
        if dtype == "int8":
            x, out = self.t(op.inputs[0]), self.t(op.outputs[0])
            return self._lut(op, "edgernn_lut_s8", "int8_t", qp.rsqrt_table_s8(*x.qparams(), *out.qparams()))
        return self._unary(op, dtype, "RSQRT") if dtype == "float32" else None

    def op_sqrt(self, op, dtype):
        return self._unary(op, dtype, "SQRT") if dtype == "float32" else None

    def op_square(self, op, dtype):
        return self._unary(op, dtype, "SQUARE") if dtype == "float32" else None

    def op_quantize(self, op, dtype):
        x, out = self.t(op.inputs[0]), self.t(op.outputs[0])
        n = str(out.size)
        if x.dtype == "float32" and dtype in ("int8", "int16"):
            s, z = out.qparams()
            return self.call(op, f"edgernn_quantize_f32_s{8 if dtype == 'int8' else 16}",
                             {"scale": _lit_float(s), "zero_point": str(z), "in": ("tensor", op.inputs[0]), "n": n,
                              "out": ("tensor", op.outputs[0])})
        if x.dtype == dtype == "int8":
            return self._lut(op, "edgernn_lut_s8", "int8_t", self.lut_s8(op, "REQUANTIZE", x, out))
        if x.dtype == dtype == "int16":
            (si, zi), (so, zo) = x.qparams(), out.qparams()
            m, s = qp.quantize_multiplier(float(np.float32(si)) / float(np.float32(so)))
            params = ConstStruct(self.cname(op, "q"), "edgernn_mul_params_t", [-zi, 0, zo, m, s, -32768, 32767])
            return self._requantize_s16(op, params, REQUANTIZE_IDENTITY)
        return None

    def op_dequantize(self, op, dtype):
        x = self.t(op.inputs[0])
        if dtype != "float32" or x.dtype not in ("int8", "int16"):
            return None
        s, z = x.qparams()
        return self.call(op, f"edgernn_dequantize_s{8 if x.dtype == 'int8' else 16}_f32",
                         {"scale": _lit_float(s), "zero_point": str(z), "in": ("tensor", op.inputs[0]),
                          "n": str(x.size), "out": ("tensor", op.outputs[0])})

    def op_softmax(self, op, dtype):
        x, out = self.t(op.inputs[0]), self.t(op.outputs[0])
        depth = x.shape[-1] if x.shape else 1
        rows = str(x.size // depth)
        beta = op.options.get("beta", 1.0)
        if dtype in ("int8", "int16") and x.dtype != dtype:
            raise _refuse(op, f"{x.dtype} input with {dtype} output")
        if dtype == "int8":
            if out.qparams()[1] != -128 or abs(out.qparams()[0] - 1.0 / 256) > 0.001 / 256:
                raise _refuse(op, "int8 output needs scale 1/256 and zero point -128")
            m, s, diff_min = qp.softmax_s8_params(beta, x.qparams()[0])
            return self.call(op, "edgernn_softmax_s8",
                             {"input_multiplier": str(m), "input_left_shift": str(s), "diff_min": str(diff_min),
                              "in": ("tensor", op.inputs[0]), "rows": rows, "depth": str(depth),
                              "out": ("tensor", op.outputs[0])})
        if dtype == "int16":
            if x.qparams()[1] != 0 or out.qparams()[1] != 0 or abs(out.qparams()[0] - 1.0 / 32768) > 0.001 / 32768:
                raise _refuse(op, "int16 needs zero points 0 and output scale 1/32768")
            m, s = qp.softmax_s16_params(beta, x.qparams()[0])
            exp_lut, recip_lut = qp.softmax_s16_tables()
            arrays = [ConstArray(self.cname(op, "exp_lut"), "int16_t", [int(v) for v in exp_lut]),
                      ConstArray(self.cname(op, "recip_lut"), "int16_t", [int(v) for v in recip_lut])]
            return self.call(op, "edgernn_softmax_s16",
                             {"exp_lut": ("const", arrays[0].name), "recip_lut": ("const", arrays[1].name),
                              "input_multiplier": str(m), "input_shift": str(s), "in": ("tensor", op.inputs[0]),
                              "rows": rows, "depth": str(depth), "out": ("tensor", op.outputs[0])}, arrays=arrays)
        if dtype != "float32":
            return None
        return self.call(op, "edgernn_softmax_f32",
                         {"in": ("tensor", op.inputs[0]), "rows": str(x.size // depth), "depth": str(depth),
                          "beta": _lit_float(op.options.get("beta", 1.0)), "out": ("tensor", op.outputs[0])})

    # ---- reductions ----
    def _reduce(self, op: Operator, dtype: str, fn: str):
        if dtype not in ("float32", "int8", "int16"):
            return None
        x, out = self.t(op.inputs[0]), self.t(op.outputs[0])
        axes = sorted({int(a) % max(len(x.shape), 1) for a in np.atleast_1d(self.const_input(op, 1))})
        if axes != list(range(axes[0], axes[-1] + 1)):
            raise _refuse(op, "reduction over non-adjacent axes")
        outer = int(np.prod(x.shape[: axes[0]], dtype=np.int64))
        reduced = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
        inner = int(np.prod(x.shape[axes[-1] + 1 :], dtype=np.int64))
        if dtype == "int16":
            raise _refuse(op, "no int16 kernel (no converted model uses one, so none is verified)")
        shape = {"in": ("tensor", op.inputs[0]), "outer": str(outer), "reduced": str(reduced), "inner": str(inner),
                 "out": ("tensor", op.outputs[0])}
        if dtype == "int8":
            (si, zi), (so, zo) = x.qparams(), out.qparams()
            if fn == "edgernn_sum_f32":
                # LiteRT's SUM kernel rescales the int32 sum in float (docs/ops.md says why not the
                # reference one); scale and bias are the float32 values its Eval computes
                scale, bias = qp.sum_float_params(si, so, zi, reduced)
                return self.call(op, "edgernn_sum_s8",
                                 {**shape, "scale": _lit_float(scale), "bias": _lit_float(bias),
                                  "output_zero_point": str(zo)})
            # reference_ops::QuantizedMeanOrSum: int32 sum, zero point removed, one requantization
            mult, shift = qp.reduce_params(si, so, reduced, mean=True)
            return self.call(op, "edgernn_mean_s8",
                             {**shape, "input_zero_point": str(zi), "multiplier": str(mult), "shift": str(shift),
                              "output_zero_point": str(zo)})
        return self.call(op, fn, shape)

    def op_sum(self, op, dtype):
        return self._reduce(op, dtype, "edgernn_sum_f32")

    def op_mean(self, op, dtype):
        return self._reduce(op, dtype, "edgernn_mean_f32")

    # ---- data movement: an index map from output elements to source elements ----
    def _same_quant(self, op: Operator, tensors: list[int]):
        ref = self.t(op.outputs[0]).qparams()
        for i in tensors:
            if self.t(i).qparams() != ref:
                raise _refuse(op, "inputs and outputs with different quantization")

    def _moves(self, op: Operator, data_inputs: list[int], maps: list[np.ndarray], dtype: str) -> Call:
        """maps[k]: for output k, the flat source code (input number << 32 | element) of each element."""
        self._same_quant(op, data_inputs + list(op.outputs))
        itemsize = self.t(op.outputs[0]).itemsize
        calls_args = []
        arrays = []
        for k, m in enumerate(maps):
            flat = np.asarray(m, dtype=np.int64).reshape(-1)
            src_ids = flat >> 32
            elems = flat & 0xFFFFFFFF
            for src in np.unique(src_ids):
                dst = np.nonzero(src_ids == src)[0]
                sel = elems[dst]
                runs = []
                start = 0
                for j in range(1, len(dst) + 1):
                    if j == len(dst) or dst[j] != dst[j - 1] + 1 or sel[j] != sel[j - 1] + 1:
                        runs.append([int(dst[start]), int(sel[start]), int(j - start)])
                        start = j
                name = self.cname(op, f"runs{k}_{int(src)}")
                arrays.append(ConstArray(name, "edgernn_run_t", runs))
                calls_args.append((name, len(runs), data_inputs[int(src)], op.outputs[k]))
        # One Call per (output, source) pair, chained through .extra
        first = None
        for name, n_runs, src_t, dst_t in calls_args:
            self.operand(src_t)
            call = self.call(op, "edgernn_copy_runs",
                             {"runs": ("const", name), "n_runs": str(n_runs),
                              "elem_size": f"sizeof({self.t(dst_t).ctype})", "src": ("tensor", src_t),
                              "dst": ("tensor", dst_t)})
            if first is None:
                first = call
                first.arrays = arrays
            else:
                first.more.append(call)
        return first

    def _idx(self, i: int, src: int = 0) -> np.ndarray:
        t = self.t(i)
        return (np.arange(t.size, dtype=np.int64) | (src << 32)).reshape(t.shape if t.shape else ())

    def op_reshape(self, op, dtype):
        return self._moves(op, [op.inputs[0]], [self._idx(op.inputs[0])], dtype)

    op_squeeze = op_reshape
    op_expand_dims = op_reshape

    def op_split(self, op, dtype):
        axis = int(np.asarray(self.const_input(op, 0)).reshape(-1)[0])
        idx = self._idx(op.inputs[1])
        parts = np.split(idx, len(op.outputs), axis=axis)
        return self._moves(op, [op.inputs[1]], parts, dtype)

    def op_split_v(self, op, dtype):
        sizes = [int(s) for s in np.asarray(self.const_input(op, 1)).reshape(-1)]
        axis = int(np.asarray(self.const_input(op, 2)).reshape(-1)[0])
        idx = self._idx(op.inputs[0])
        if -1 in sizes:
            sizes[sizes.index(-1)] = idx.shape[axis] - (sum(sizes) + 1)
        cuts = np.cumsum(sizes)[:-1]
        return self._moves(op, [op.inputs[0]], np.split(idx, cuts, axis=axis), dtype)

    def op_concatenation(self, op, dtype):
        axis = op.options.get("axis", 0)
        if op.options.get("fusedActivationFunction", 0):
            raise _refuse(op, "fused activation")
        parts = [self._idx(i, k) for k, i in enumerate(op.inputs)]
        return self._moves(op, list(op.inputs), [np.concatenate(parts, axis=axis)], dtype)

    def op_pack(self, op, dtype):
        axis = op.options.get("axis", 0)
        parts = [self._idx(i, k) for k, i in enumerate(op.inputs)]
        return self._moves(op, list(op.inputs), [np.stack(parts, axis=axis)], dtype)

    def op_unpack(self, op, dtype):
        axis = op.options.get("axis", 0)
        idx = self._idx(op.inputs[0])
        return self._moves(op, [op.inputs[0]], [np.take(idx, k, axis=axis) for k in range(len(op.outputs))], dtype)

    def op_gather(self, op, dtype):
        axis = op.options.get("axis", 0)
        if op.options.get("batchDims", 0):
            raise _refuse(op, "batch_dims")
        indices = np.asarray(self.const_input(op, 1))
        return self._moves(op, [op.inputs[0]], [np.take(self._idx(op.inputs[0]), indices, axis=axis)], dtype)

    def op_slice(self, op, dtype):
        begin = np.asarray(self.const_input(op, 1)).reshape(-1)
        size = np.asarray(self.const_input(op, 2)).reshape(-1)
        idx = self._idx(op.inputs[0])
        sl = tuple(slice(int(b), None if int(s) < 0 else int(b) + int(s)) for b, s in zip(begin, size))
        return self._moves(op, [op.inputs[0]], [idx[sl]], dtype)

    def op_strided_slice(self, op, dtype):
        o = op.options
        if o.get("ellipsisMask", 0) or o.get("newAxisMask", 0):
            raise _refuse(op, "ellipsis or new-axis masks")
        begin = np.asarray(self.const_input(op, 1)).reshape(-1)
        end = np.asarray(self.const_input(op, 2)).reshape(-1)
        strides = np.asarray(self.const_input(op, 3)).reshape(-1)
        idx = self._idx(op.inputs[0])
        sl = []
        for d in range(len(begin)):
            b = None if (o.get("beginMask", 0) >> d) & 1 else int(begin[d])
            e = None if (o.get("endMask", 0) >> d) & 1 else int(end[d])
            if (o.get("shrinkAxisMask", 0) >> d) & 1:
                sl.append(int(begin[d]))
            else:
                sl.append(slice(b, e, int(strides[d])))
        picked = idx[tuple(sl)]
        return self._moves(op, [op.inputs[0]], [picked.reshape(self.t(op.outputs[0]).shape)], dtype)

    # ---- fused recurrent ops ----
    def op_unidirectional_sequence_lstm(self, op: Operator, dtype: str):
        """TFLite's LSTM kernel over the op's time steps, state kept in its two variable tensors.

        Inputs (lstm_shared.h): 0 x, 1-4 input-to-gate weights (i, f, c, o), 5-8 recurrent weights,
        9-11 peephole, 12-15 gate biases, 16-17 projection, 18 h, 19 c, 20-23 layer norm.
        """
        ins = list(op.inputs) + [-1] * (24 - len(op.inputs))
        opts = op.options
        x = self.t(ins[0])
        if ins[1] < 0 or ins[5] < 0:
            raise _refuse(op, "no input gate (CIFG)")
        if any(i >= 0 for i in ins[9:12]):
            raise _refuse(op, "peephole connections")
        if ins[16] >= 0 or ins[17] >= 0:
            raise _refuse(op, "a projection")
        if any(i >= 0 for i in ins[20:24]):
            raise _refuse(op, "layer normalization")
        if opts.get("fusedActivationFunction", 0) != 4:
            raise _refuse(op, "a cell activation other than tanh")
        for k in (18, 19):
            if ins[k] < 0 or not self.t(ins[k]).is_variable:
                raise _refuse(op, f"input {k} (the {'hidden' if k == 18 else 'cell'} state) must be a variable tensor")
        w_in = [self.t(i) for i in ins[1:5]]
        w_rec = [self.t(i) for i in ins[5:9]]
        for w in w_in + w_rec:
            if not w.is_const or len(w.shape) != 2:
                raise _refuse(op, "weights must be constant 2-D tensors")
        n_cell, n_in = w_in[0].shape
        if any(w.shape != (n_cell, n_in) for w in w_in) or any(w.shape != (n_cell, n_cell) for w in w_rec):
            raise _refuse(op, "gate weights of unequal shapes")
        if x.shape[-1:] != (n_in,) or len(x.shape) not in (2, 3):
            raise _refuse(op, f"input shape {x.shape} for {n_in} features")
        steps = 1 if len(x.shape) == 2 else x.shape[0 if opts.get("timeMajor", False) else 1]
        if x.size != steps * n_in:
            raise _refuse(op, f"a batch of {x.size // (steps * n_in)} (only batch 1)")
        h, c, out = self.t(ins[18]), self.t(ins[19]), self.t(op.outputs[0])
        if h.size != n_cell or c.size != n_cell or out.size != steps * n_cell:
            raise _refuse(op, "state or output sizes that do not match the weights")
        biases = []
        for i in ins[12:16]:
            if i < 0 or not self.t(i).is_const or self.t(i).size != n_cell:
                raise _refuse(op, "every gate needs a constant bias")
            biases.append(self.t(i).data.reshape(-1))
        cell_clip = float(np.float32(opts.get("cellClip", 0.0)))
        args_state = {"steps": str(steps), "x": ("tensor", ins[0]), "h": ("tensor", ins[18]), "c": ("tensor", ins[19]),
                      "y": ("tensor", op.outputs[0]), "scratch": ("scratch", op.index)}
        if dtype == "float32":
            if x.dtype != "float32" or any(w.dtype != "float32" for w in w_in + w_rec):
                raise _refuse(op, "hybrid (quantized weights, float activations) models")
            arrays = [
                ConstArray(self.cname(op, "w_in"), "float", np.concatenate([w.data.reshape(-1) for w in w_in]).tolist()),
                ConstArray(self.cname(op, "w_rec"), "float", np.concatenate([w.data.reshape(-1) for w in w_rec]).tolist()),
                ConstArray(self.cname(op, "bias"), "float", np.concatenate(biases).astype(np.float32).tolist()),
            ]
            params = ConstStruct(self.cname(op, "p"), "edgernn_lstm_f32_params_t",
                                 [n_in, n_cell, cell_clip if cell_clip > 0 else 0.0])
            return self.call(op, "edgernn_lstm_f32",
                             {"p": ("ref", params.name), "w_in": ("const", arrays[0].name),
                              "w_rec": ("const", arrays[1].name), "bias": ("const", arrays[2].name), **args_state},
                             arrays=arrays, structs=[params], scratch=("float", 4 * 4 * n_cell))
        if dtype != "int8":
            return None
        if x.dtype != "int8" or h.dtype != "int8" or c.dtype != "int16" or any(w.dtype != "int8" for w in w_in + w_rec):
            raise _refuse(op, "int8 needs int8 input, weights and hidden state and an int16 cell state")
        if any(w.per_channel or np.any(w.zero_point != 0) for w in w_in + w_rec):
            raise _refuse(op, "per-channel or asymmetric weights")
        if len(op.intermediates) != 5 or not self.t(op.intermediates[4]).quantized:
            raise _refuse(op, "the five quantization intermediates of TFLite's integer LSTM are missing")
        (x_s, x_zp), (h_s, h_zp) = x.qparams(), h.qparams()
        hidden_s, hidden_zp = self.t(op.intermediates[4]).qparams()
        c_s, c_zp = c.qparams()
        exact, cell_log2 = qp.checked_log2(c_s)
        if not exact or c_zp != 0:
            raise _refuse(op, f"cell state scale {c_s} is not a power of two with zero point 0")
        if not -29 <= cell_log2 <= 1:
            raise _refuse(op, f"cell state scale 2^{cell_log2}")
        gate_s = 2.0 ** -12          # Q3.12 gate inputs when there is no layer norm
        in_q = [qp.quantize_multiplier(qp.lstm_effective_scale(w.scale[0], x_s, gate_s)) for w in w_in]
        rec_q = [qp.quantize_multiplier(qp.lstm_effective_scale(w.scale[0], h_s, gate_s)) for w in w_rec]
        hid_m, hid_sh = qp.quantize_multiplier(qp.f32((2.0 ** -15 / float(np.float32(hidden_s))) * 2.0 ** -15))
        bias_in = np.concatenate([b.astype(np.int64) - x_zp * w.data.astype(np.int64).sum(axis=1)
                                  for b, w in zip(biases, w_in)])
        bias_rec = np.concatenate([-h_zp * w.data.astype(np.int64).sum(axis=1) for w in w_rec])
        if max(abs(int(bias_in.min())), abs(int(bias_in.max()))) > qp.INT32_MAX:
            raise _refuse(op, "folded bias exceeds int32")
        arrays = [
            ConstArray(self.cname(op, "w_in"), "int8_t", np.concatenate([w.data.reshape(-1) for w in w_in]).tolist()),
            ConstArray(self.cname(op, "w_rec"), "int8_t", np.concatenate([w.data.reshape(-1) for w in w_rec]).tolist()),
            ConstArray(self.cname(op, "bias_in"), "int32_t", [int(b) for b in bias_in]),
            ConstArray(self.cname(op, "bias_rec"), "int32_t", [int(b) for b in bias_rec]),
        ]
        params = ConstStruct(self.cname(op, "p"), "edgernn_lstm_s8_params_t", [
            n_in, n_cell, [m for m, _ in in_q], [s for _, s in in_q], [m for m, _ in rec_q], [s for _, s in rec_q],
            hid_m, hid_sh, hidden_zp, 30 + cell_log2, 15 + cell_log2, qp.lstm_quantized_cell_clip(cell_clip, c_s),
        ])
        return self.call(op, "edgernn_lstm_s8",
                         {"p": ("ref", params.name), "w_in": ("const", arrays[0].name),
                          "w_rec": ("const", arrays[1].name), "bias_in": ("const", arrays[2].name),
                          "bias_rec": ("const", arrays[3].name), **args_state},
                         arrays=arrays, structs=[params], scratch=("int16_t", 2 * 4 * n_cell))


SUPPORTED = sorted(n[3:].upper() for n in dir(Lowering) if n.startswith("op_"))
