"""The unary ops: LOGISTIC, TANH, EXP, ABS, NEG, RELU, RELU6, LEAKY_RELU, RSQRT, SQRT, SQUARE, QUANTIZE,
DEQUANTIZE and SOFTMAX (lookup tables for int8, the integer paths of int16)."""

from __future__ import annotations

import functools

import numpy as np

from edgernn.backend import quantparams as qp
from edgernn.backend.kernels import REQUANTIZE_ABS, REQUANTIZE_IDENTITY, REQUANTIZE_NEG
from edgernn.backend.ir import Operator, Tensor

from edgernn.backend.lowering.base import Call, ConstArray, ConstStruct, LoweringBase, _refuse
from edgernn.backend.values import TensorArg, ConstArg, StructArg, Float, Enum


@functools.lru_cache(maxsize=64)
def _rsqrt_table_s16(in_scale: float, out_scale: float) -> np.ndarray:
    """LiteRT's int16 RSQRT: the interpolating 513-entry table of 1.0f / sqrtf(x), whose inputs at or below 0 give
    32767 * s_out (elementwise.cc's Prepare); zero points 0. Kept by scales: --quant auto lowers one model for
    every plan it weighs, and the table takes 1,539 calls of the function."""
    top = np.float32(np.float32(32767) * np.float32(out_scale))

    def rsqrt(v):
        v = np.float32(v)
        return top if v <= 0 else np.float32(np.float32(1.0) / np.sqrt(v))
    table = qp.lookup_table_s16(rsqrt, in_scale, 0, out_scale, 0)
    table.flags.writeable = False
    return table


class ActivationsOps(LoweringBase):
    # ---- unary ----
    def _unary(self, op: Operator, dtype: str, name: str):
        x, out = self.t(op.inputs[0]), self.t(op.outputs[0])
        n = int(out.size)
        if dtype == "float32":
            return self.call(op, "edgernn_unary_f32", {"op": Enum(f"EDGERNN_UNARY_{name}"), "in": TensorArg(op.inputs[0]),
                                                       "n": n, "out": TensorArg(op.outputs[0])})
        if dtype == "int8":
            return self._lut(op, "edgernn_lut_s8", "int8_t", self.lut_s8(op, name, x, out))
        if dtype == "int16":
            (si, zi), (so, zo) = x.qparams(), out.qparams()
            if name in ("LOGISTIC", "TANH"):
                if zi != 0 or zo != 0 or so != 1.0 / 32768:
                    raise _refuse(op, "int16 needs zero points 0 and output scale 1/32768")
                m, s = qp.int16_activation_params(name, si)
                if m > qp.INT32_MAX:
                    # LiteRT's Prepare casts this multiplier to int32: undefined, so there is no result to match
                    raise _refuse(op, f"its int16 input scale {si:.3g} (values to {si * 32768:.3g}) is beyond "
                                      f"TFLite's int16 kernel, whose input multiplier ({m}) must fit int32: the model "
                                      "diverges on the calibration data")
                fn = "edgernn_logistic_s16" if name == "LOGISTIC" else "edgernn_tanh_s16"
                return self.call(op, fn, {"input_multiplier": int(m), "input_left_shift": int(s),
                                          "in": TensorArg(op.inputs[0]), "n": n, "out": TensorArg(op.outputs[0])})
            if name in ("ABS", "NEG"):
                needs = np.float32(si) != np.float32(so)
                m, s = qp.quantize_multiplier(qp.f32(np.float32(si) / np.float32(so))) if needs else (1 << 30, 1)
                params = ConstStruct(self.cname(op, "q"), "edgernn_mul_params_t", [-zi, 0, zo, m, s, -32768, 32767])
                return self._requantize_s16(op, params, REQUANTIZE_ABS if name == "ABS" else REQUANTIZE_NEG)
        return None

    def _lut(self, op: Operator, fn: str, ctype: str, table) -> Call:
        """A table lookup per element (edgernn_lut_s8, edgernn_lut_s16), the table a constant array."""
        arr = ConstArray(self.cname(op, "lut"), ctype, [int(v) for v in table])
        return self.call(op, fn, {"table": ConstArg(arr.name), "in": TensorArg(op.inputs[0]),
                                  "n": int(self.t(op.outputs[0]).size), "out": TensorArg(op.outputs[0])},
                         arrays=[arr])

    def _requantize_s16(self, op: Operator, params: ConstStruct, mode: int) -> Call:
        return self.call(op, "edgernn_requantize_s16",
                         {"p": StructArg(params.name), "mode": int(mode), "in": TensorArg(op.inputs[0]),
                          "n": int(self.t(op.outputs[0]).size), "out": TensorArg(op.outputs[0])}, structs=[params])

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

    def op_leaky_relu(self, op, dtype):
        x, out = self.t(op.inputs[0]), self.t(op.outputs[0])
        alpha = float(op.options.get("alpha", 0.2))
        n = int(out.size)
        if dtype == "float32":
            return self.call(op, "edgernn_leaky_relu_f32", {"in": TensorArg(op.inputs[0]), "alpha": Float(alpha),
                                                            "n": n, "out": TensorArg(op.outputs[0])})
        if dtype not in ("int8", "int16"):
            return None
        (si, zi), (so, zo) = x.qparams(), out.qparams()
        (mi, shi), (ma, sha) = qp.leaky_relu_params(si, so, alpha)
        if dtype == "int8":
            return self._lut(op, "edgernn_lut_s8", "int8_t", qp.leaky_relu_table_s8(zi, zo, mi, shi, ma, sha))
        return self.call(op, "edgernn_leaky_relu_s16",
                         {"in": TensorArg(op.inputs[0]), "input_zero_point": int(zi), "identity_multiplier": int(mi),
                          "identity_shift": int(shi), "alpha_multiplier": int(ma), "alpha_shift": int(sha),
                          "output_zero_point": int(zo), "n": n, "out": TensorArg(op.outputs[0])})

    def op_rsqrt(self, op, dtype):
        if dtype == "int16":
            # LiteRT's int16 RSQRT: the interpolating 513-entry table of 1.0f / sqrtf(x), whose inputs at or
            # below 0 give 32767 * s_out (elementwise.cc's Prepare)
            x, out = self.t(op.inputs[0]), self.t(op.outputs[0])
            (si, zi), (so, zo) = x.qparams(), out.qparams()
            if zi != 0 or zo != 0:
                raise _refuse(op, "int16 activations with a nonzero zero point")
            return self._lut(op, "edgernn_lut_s16", "int16_t", _rsqrt_table_s16(float(si), float(so)).copy())
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
        n = int(out.size)
        if x.dtype == "float32" and dtype == "int16" and self.g.oracle == "builtin":
            # an op left in float between int16 tensors (an LTC's DIV under --quant auto), in a graph LiteRT runs
            # on its builtin kernels: their QUANTIZE multiplies by the float32 inverse and rounds halves to even in
            # blocks of 8, and divides by the scale in double and rounds halves away in the n % 8 after them
            s, z = out.qparams()
            return self.call(op, "edgernn_quantize_f32_s16_even",
                             {"inverse_scale": Float(float(np.float32(1.0) / np.float32(s))),
                              "scale": Float(float(np.float32(s))), "zero_point": int(z),
                              "in": TensorArg(op.inputs[0]), "n": n, "out": TensorArg(op.outputs[0])})
        if x.dtype == "float32" and dtype in ("int8", "int16"):
            s, z = out.qparams()
            return self.call(op, f"edgernn_quantize_f32_s{8 if dtype == 'int8' else 16}",
                             {"scale": Float(s), "zero_point": int(z), "in": TensorArg(op.inputs[0]), "n": n,
                              "out": TensorArg(op.outputs[0])})
        if x.dtype == dtype == "int8":
            return self._lut(op, "edgernn_lut_s8", "int8_t", self.lut_s8(op, "REQUANTIZE", x, out))
        if x.dtype == dtype == "int16":
            (si, zi), (so, zo) = x.qparams(), out.qparams()
            m, s = qp.quantize_multiplier(float(np.float32(si)) / float(np.float32(so)))
            params = ConstStruct(self.cname(op, "q"), "edgernn_mul_params_t", [-zi, 0, zo, m, s, -32768, 32767])
            return self._requantize_s16(op, params, REQUANTIZE_IDENTITY)
        if {x.dtype, dtype} == {"int8", "int16"}:
            # a mixed model's seam: LiteRT's Prepare takes s_in / s_out in double, its Eval Requantize
            (si, zi), (so, zo) = x.qparams(), out.qparams()
            m, s = qp.quantize_multiplier(float(np.float32(si)) / float(np.float32(so)))
            lo, hi = (-128, 127) if dtype == "int8" else (-32768, 32767)
            params = ConstStruct(self.cname(op, "q"), "edgernn_mul_params_t", [-zi, 0, zo, m, s, lo, hi])
            fn = "edgernn_requantize_s8_s16" if dtype == "int16" else "edgernn_requantize_s16_s8"
            return self.call(op, fn, {"p": StructArg(params.name), "in": TensorArg(op.inputs[0]), "n": n,
                                      "out": TensorArg(op.outputs[0])}, structs=[params])
        return None

    def op_dequantize(self, op, dtype):
        x = self.t(op.inputs[0])
        if dtype != "float32" or x.dtype not in ("int8", "int16"):
            return None
        s, z = x.qparams()
        return self.call(op, f"edgernn_dequantize_s{8 if x.dtype == 'int8' else 16}_f32",
                         {"scale": Float(s), "zero_point": int(z), "in": TensorArg(op.inputs[0]),
                          "n": int(x.size), "out": TensorArg(op.outputs[0])})

    def op_softmax(self, op, dtype):
        x, out = self.t(op.inputs[0]), self.t(op.outputs[0])
        depth = x.shape[-1] if x.shape else 1
        rows = int(x.size // depth)
        beta = op.options.get("beta", 1.0)
        if dtype in ("int8", "int16") and x.dtype != dtype:
            raise _refuse(op, f"{x.dtype} input with {dtype} output")
        if dtype == "int8":
            if out.qparams()[1] != -128 or abs(out.qparams()[0] - 1.0 / 256) > 0.001 / 256:
                raise _refuse(op, "int8 output needs scale 1/256 and zero point -128")
            m, s, diff_min = qp.softmax_s8_params(beta, x.qparams()[0])
            return self.call(op, "edgernn_softmax_s8",
                             {"input_multiplier": int(m), "input_left_shift": int(s), "diff_min": int(diff_min),
                              "in": TensorArg(op.inputs[0]), "rows": rows, "depth": int(depth),
                              "out": TensorArg(op.outputs[0])})
        if dtype == "int16":
            if x.qparams()[1] != 0 or out.qparams()[1] != 0 or abs(out.qparams()[0] - 1.0 / 32768) > 0.001 / 32768:
                raise _refuse(op, "int16 needs zero points 0 and output scale 1/32768")
            m, s = qp.softmax_s16_params(beta, x.qparams()[0])
            exp_lut, recip_lut = qp.softmax_s16_tables()
            arrays = [ConstArray(self.cname(op, "exp_lut"), "int16_t", [int(v) for v in exp_lut]),
                      ConstArray(self.cname(op, "recip_lut"), "int16_t", [int(v) for v in recip_lut])]
            return self.call(op, "edgernn_softmax_s16",
                             {"exp_lut": ConstArg(arrays[0].name), "recip_lut": ConstArg(arrays[1].name),
                              "input_multiplier": int(m), "input_shift": int(s), "in": TensorArg(op.inputs[0]),
                              "rows": rows, "depth": int(depth), "out": TensorArg(op.outputs[0])}, arrays=arrays)
        if dtype != "float32":
            return None
        return self.call(op, "edgernn_softmax_f32",
                         {"in": TensorArg(op.inputs[0]), "rows": int(x.size // depth), "depth": int(depth),
                          "beta": Float(op.options.get("beta", 1.0)), "out": TensorArg(op.outputs[0])})
