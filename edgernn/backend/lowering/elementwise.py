"""ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM, SQUARED_DIFFERENCE: broadcasts and rescales."""

from __future__ import annotations

import numpy as np

from edgernn.backend import quantparams as qp
from edgernn.backend.ir import Operator

from edgernn.backend.lowering.base import Call, ConstArray, ConstStruct, LoweringBase, _refuse
from edgernn.backend.values import TensorArg, ConstArg, StructArg, Float


def _mul_reaches_past_int16(op: Operator, a, b, params: ConstStruct) -> bool:
    """Whether some inputs of this int8 MUL give a rescaled product that, with the output's zero point, leaves int16
    (edgernn_vector_out_s8); the product is bilinear, so the corners of the inputs' ranges bound it."""
    off1, off2, zo, m, shift = (int(v) for v in params.fields[:5])

    def values(t) -> list[int]:
        return [int(t.data.min()), int(t.data.max())] if t.is_const else [-128, 127]

    reach = max(abs(qp.mbqm((va + off1) * (vb + off2), m, shift)) for va in values(a) for vb in values(b))
    return reach + abs(zo) > 32767


def builtin_vector_blocks(shape1, shape2, scalar_block: int) -> tuple[int, int] | None:
    """Where LiteRT's builtin int8 ADD or MUL computes in its vector blocks: (run, blocked), output element o lying
    in a block when o % run < blocked; None when it computes no element there (docs/ops.md).

    Operands of one shape (after padding with leading ones) run as one flat loop: blocks of 16 from the first
    element. A broadcast goes through TFLite's ProcessBroadcastShapes: one it can fold into five dimensions
    y0..y4 runs y4 elements at a time (an element-wise loop, blocks of 16) or, with y4 = 1, y3 elements against one
    value (blocks of ``scalar_block``: ADD's 8, MUL's 16); any other broadcast runs on the reference loop."""
    rank = max(len(shape1), len(shape2), 1)
    a = (1,) * (rank - len(shape1)) + tuple(int(d) for d in shape1)
    b = (1,) * (rank - len(shape2)) + tuple(int(d) for d in shape2)
    if a == b:
        n = int(np.prod(a, dtype=np.int64))
        return (n, n - n % 16) if n >= 16 else None
    fast = None
    for i in range(rank - 1, -1, -1):
        if a[i] == b[i]:
            continue
        fast = "first" if a[i] == 1 else ("second" if b[i] == 1 else None)
        break
    if fast is None:
        return None
    if fast == "second":
        a, b = b, a
    y = [1] * 5
    i = rank - 1
    for slot, test in ((4, lambda i: a[i] == b[i]), (3, lambda i: a[i] == 1), (2, lambda i: a[i] == b[i]),
                       (1, lambda i: b[i] == 1), (0, lambda i: a[i] == b[i])):
        while i >= 0 and test(i):
            y[slot] *= b[i] if slot in (4, 3, 0) else a[i]
            i -= 1
    if i >= 0:
        return None
    run, block = (y[4], 16) if y[4] > 1 else (y[3], scalar_block)
    blocked = run - run % block
    return (run, blocked) if blocked > 0 else None


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

    def _binary_params(self, op: Operator, fn: str, params: ConstStruct, more: dict | None = None) -> Call:
        """A broadcasting integer kernel of a parameter struct (MUL, DIV, SQUARED_DIFFERENCE); ``more``: the
        kernel's other arguments, by name."""
        bc = self.bcast(op)
        return self.call(op, fn, {"b": StructArg(bc.name), "p": StructArg(params.name), **(more or {}),
                                  "in1": self.operand(op.inputs[0]), "in2": self.operand(op.inputs[1]),
                                  "out": TensorArg(op.outputs[0])}, structs=[bc, params])

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
        # LiteRT's builtin kernels compute some ADDs their own way (docs/ops.md): the variant's extra arguments, or None
        blocks = self._builtin_add_blocks(op, dtype, subtract, (z1, m1, sh1), (z2, m2, sh2), (mo, sho), zo, left_shift)
        if len(const_pos) == 1 and self.t(op.inputs[1 - const_pos[0]]).size == out.size:
            # one operand constant: its rescaled value (with the op's sign) is folded here, per element
            self.bcast(op)   # refuses shapes that do not broadcast
            c = const_pos[0]
            ct = self.t(op.inputs[c])
            (zc, mc, shc), (zr, mr, shr) = ((z1, m1, sh1), (z2, m2, sh2)) if c == 0 else ((z2, m2, sh2), (z1, m1, sh1))
            sign = -1 if (c == 1 and kernel_subtract) else 1
            vals = np.broadcast_to(ct.data.astype(np.int64), out.shape).reshape(-1)
            # the builtin int16 ADD's blocks rescale the constant with one rounding too (edgernn_add_blocks_scaled)
            in_blocks = blocks["blocked"] if blocks is not None and dtype == "int16" else 0
            k = [sign * (qp.srdhm(qp.shift_left_or_floor(int(v) - zc, left_shift + shc), mc) if i < in_blocks else
                         qp.rdbpot(qp.srdhm((int(v) - zc) * (1 << left_shift), mc), -shc)) for i, v in enumerate(vals)]
            params = ConstStruct(self.cname(op, "q"), "edgernn_addsub_params_t",
                                 [-zr, 0, zo, left_shift, mr, shr, 0, 0, mo, sho, lo, hi])
            karr = ConstArray(self.cname(op, "k"), "int32_t", k)
            negate = 1 if (c == 0 and kernel_subtract) else 0
            fn, how = ((f"edgernn_add_blocks_const_{sfx}", blocks) if blocks is not None else
                       (f"edgernn_addsub_const_{sfx}", {"negate": negate}))
            return self.call(op, fn, {"p": StructArg(params.name), **how, "in": TensorArg(op.inputs[1 - c]),
                                      "k": ConstArg(karr.name), "n": int(out.size), "out": out_arg},
                             arrays=[karr], structs=[params])
        params = ConstStruct(self.cname(op, "q"), "edgernn_addsub_params_t",
                             [-z1, -z2, zo, left_shift, m1, sh1, m2, sh2, mo, sho, lo, hi])
        if a.size == b.size == out.size:
            fn, how = ((f"edgernn_add_blocks_n_{sfx}", blocks) if blocks is not None else
                       (f"edgernn_addsub_n_{sfx}", {"subtract": flag}))
            return self.call(op, fn, {"p": StructArg(params.name), **how, "in1": self.operand(op.inputs[0]),
                                      "in2": self.operand(op.inputs[1]), "n": int(out.size), "out": out_arg},
                             structs=[params])
        bc = self.bcast(op)
        # a broadcast is int8's alone among the variants, and its kernel walks the whole output (no "first")
        fn, how = (("edgernn_add_blocks_s8", {"run": blocks["run"], "blocked": blocks["blocked"]}) if blocks is not None
                   else (f"edgernn_addsub_{sfx}", {"subtract": flag}))
        return self.call(op, fn, {"b": StructArg(bc.name), "p": StructArg(params.name), **how,
                                  "in1": self.operand(op.inputs[0]), "in2": self.operand(op.inputs[1]), "out": out_arg},
                         structs=[bc, params])

    def _builtin_add_blocks(self, op: Operator, dtype: str, subtract: bool, in1, in2, out_rescale, zo: int,
                            left_shift: int) -> dict | None:
        """For a graph validated on LiteRT's builtin kernels, the extra arguments of the ADD's variant that computes
        as they do (docs/ops.md), or None where the reference kernel's bytes are theirs: an int16 ADD of operands of
        one shape rescales its blocks of 16 with one rounding ({first, blocked}: edgernn_add_blocks_*_s16); an int8
        ADD narrows to int16 in its vector blocks, which matters only where some input carries the result past
        int16 ({first, run, blocked}: edgernn_add_blocks_*_s8). SUB is the reference's."""
        if self.g.oracle != "builtin" or subtract:
            return None
        a, b, out = self.t(op.inputs[0]), self.t(op.inputs[1]), self.t(op.outputs[0])
        if dtype == "int16":
            blocked = out.size - out.size % 16
            return {"first": 0, "blocked": blocked} if blocked and a.size == b.size == out.size else None
        if dtype != "int8" or not self._add_reaches_past_int16(op, in1, in2, out_rescale, zo, left_shift):
            return None
        vector = builtin_vector_blocks(a.shape, b.shape, 8)
        return None if vector is None else {"first": 0, "run": vector[0], "blocked": vector[1]}

    def _add_reaches_past_int16(self, op: Operator, in1, in2, out_rescale, zo: int, left_shift: int) -> bool:
        """Whether some inputs of this int8 ADD give a rescaled sum that, with the output's zero point, leaves int16:
        only there does LiteRT's builtin kernel part from the reference (edgernn_vector_out_s8). The sum is monotone
        in each input, so the corners of the inputs' ranges (a constant operand: its own values) bound it."""
        (z1, m1, sh1), (z2, m2, sh2), (mo, sho) = in1, in2, out_rescale

        def values(k: int) -> list[int]:
            t = self.t(op.inputs[k])
            return [int(t.data.min()), int(t.data.max())] if t.is_const else [-128, 127]

        reach = 0
        for va in values(0):
            for vb in values(1):
                x1 = qp.mbqm((va - z1) * (1 << left_shift), m1, sh1)
                x2 = qp.mbqm((vb - z2) * (1 << left_shift), m2, sh2)
                reach = max(reach, abs(qp.mbqm(x1 + x2, mo, sho)))
        return reach + abs(zo) > 32767

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
        # LiteRT's builtin int8 MUL narrows to int16 in its vector blocks: its variant where that can matter
        vector = (builtin_vector_blocks(a.shape, b.shape, 16) if self.g.oracle == "builtin" and dtype == "int8"
                  and _mul_reaches_past_int16(op, a, b, params) else None)
        blocks = {} if vector is None else {"run": vector[0], "blocked": vector[1]}
        if a.size == b.size == out.size:
            fn = "edgernn_mul_blocks_n_s8" if blocks else f"edgernn_mul_n_{sfx}"
            return self.call(op, fn, {"p": StructArg(params.name), **({"first": 0, **blocks} if blocks else {}),
                                      "in1": self.operand(op.inputs[0]), "in2": self.operand(op.inputs[1]),
                                      "n": int(out.size), "out": TensorArg(op.outputs[0])}, structs=[params])
        return self._binary_params(op, "edgernn_mul_blocks_s8" if blocks else f"edgernn_mul_{sfx}", params, blocks)

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
