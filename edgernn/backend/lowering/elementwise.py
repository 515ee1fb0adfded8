"""ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM, SQUARED_DIFFERENCE: broadcasts and rescales."""

from __future__ import annotations

import numpy as np

from edgernn.backend import quantparams as qp
from edgernn.backend.ir import Operator

from edgernn.backend.lowering.base import Call, ConstArray, ConstStruct, LoweringBase, _refuse
from edgernn.backend.values import TensorArg, ConstArg, StructArg, Float


class ElementwiseOps(LoweringBase):
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
        args = {"b": StructArg(bc.name), "in1": self.operand(op.inputs[0]), "in2": self.operand(op.inputs[1]),
                "out": TensorArg(op.outputs[0])}
        if with_act:
            lo, hi = qp.activation_range_float(op.options.get("fusedActivationFunction", 0))
            args.update(act_min=Float(lo), act_max=Float(hi))
        return self.call(op, fn, args, structs=[bc])

    def _binary_params(self, op: Operator, fn: str, params: ConstStruct) -> Call:
        """A broadcasting integer kernel of a parameter struct (MUL, DIV, SQUARED_DIFFERENCE)."""
        bc = self.bcast(op)
        return self.call(op, fn, {"b": StructArg(bc.name), "p": StructArg(params.name), "in1": self.operand(op.inputs[0]),
                                  "in2": self.operand(op.inputs[1]), "out": TensorArg(op.outputs[0])},
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
        out_arg = TensorArg(op.outputs[0])
        flag = 1 if kernel_subtract else 0
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
            negate = 1 if (c == 0 and kernel_subtract) else 0
            return self.call(op, f"edgernn_addsub_const_{sfx}",
                             {"p": StructArg(params.name), "negate": negate, "in": TensorArg(op.inputs[1 - c]),
                              "k": ConstArg(karr.name), "n": int(out.size), "out": out_arg},
                             arrays=[karr], structs=[params])
        params = ConstStruct(self.cname(op, "q"), "edgernn_addsub_params_t",
                             [-z1, -z2, zo, left_shift, m1, sh1, m2, sh2, mo, sho, lo, hi])
        if a.size == b.size == out.size:
            return self.call(op, f"edgernn_addsub_n_{sfx}",
                             {"p": StructArg(params.name), "subtract": flag, "in1": self.operand(op.inputs[0]),
                              "in2": self.operand(op.inputs[1]), "n": int(out.size), "out": out_arg},
                             structs=[params])
        bc = self.bcast(op)
        return self.call(op, f"edgernn_addsub_{sfx}",
                         {"b": StructArg(bc.name), "p": StructArg(params.name), "subtract": flag,
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
                             {"p": StructArg(params.name), "in1": self.operand(op.inputs[0]),
                              "in2": self.operand(op.inputs[1]), "n": int(out.size), "out": TensorArg(op.outputs[0])},
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

    def _maximum_minimum(self, op: Operator, dtype: str, minimum: bool):
        if dtype == "float32":
            return self._binary_float(op, "edgernn_minimum_f32" if minimum else "edgernn_maximum_f32", False)
        if dtype not in ("int8", "int16"):
            return None
        # maximum_minimum.cc compares the raw integers whatever the quantizations (the converter makes them
        # the output's), so the kernel does too
        bc = self.bcast(op)
        return self.call(op, f"edgernn_maximum_minimum_s{8 if dtype == 'int8' else 16}",
                         {"b": StructArg(bc.name), "minimum": int(minimum), "in1": self.operand(op.inputs[0]),
                          "in2": self.operand(op.inputs[1]), "out": TensorArg(op.outputs[0])}, structs=[bc])

    def op_maximum(self, op, dtype):
        return self._maximum_minimum(op, dtype, False)

    def op_minimum(self, op, dtype):
        return self._maximum_minimum(op, dtype, True)

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
