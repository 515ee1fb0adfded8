"""FULLY_CONNECTED (float32, int8 per-tensor or per-channel, int16x8)."""

from __future__ import annotations

import numpy as np

from edgernn.backend import quantparams as qp
from edgernn.backend.ir import Operator

from edgernn.backend.lowering.base import ConstArray, LoweringBase, _refuse
from edgernn.backend.values import TensorArg, ConstArg, Float, Enum, NULL
from edgernn.backend.lowering.blocking import blocked_rows

TENSOR_TYPE_INT64 = 4      # schema.TensorType: a FULLY_CONNECTED option's quantized_bias_type


class FullyConnectedOps(LoweringBase):
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
            bias_arg = NULL
            if bias_i >= 0:
                self.runtime_consts.add(bias_i)
                bias_arg = TensorArg(bias_i)
            return self.call(op, "edgernn_fully_connected_f32",
                             {"in": TensorArg(op.inputs[0]), "w": TensorArg(op.inputs[1]), "bias": bias_arg,
                              "act_min": Float(lo), "act_max": Float(hi), "rows": int(rows),
                              "n_in": int(n_in), "n_out": int(n_out), "out": TensorArg(op.outputs[0])})
        if dtype not in ("int8", "int16") or w.dtype != "int8":
            return None
        in_s, in_zp = x.qparams()
        out_s, out_zp = out.qparams()
        if np.any(w.zero_point != 0):
            raise _refuse(op, "asymmetric weights")
        if dtype == "int16" and (in_zp != 0 or out_zp != 0):
            raise _refuse(op, "int16 activations with a nonzero zero point")
        if w.per_channel or dtype == "int16":
            # 16x8 takes LiteRT's per-channel Prepare (double products) even for one output channel, whose
            # one scale reads as per-tensor: the float32 product can differ in the multiplier's last bits
            reals = [float(np.float32(in_s)) * float(np.float32(s)) / float(np.float32(out_s)) for s in w.scale] * \
                (1 if w.per_channel else n_out)
        else:
            prod = qp.f32(np.float32(in_s) * np.float32(w.scale[0]))
            reals = [prod / float(np.float32(out_s))] * n_out
        mult, shift = zip(*(qp.quantize_multiplier(r) for r in reals))
        wsum = w.data.astype(np.int64).sum(axis=1)
        bias = np.zeros(n_out, dtype=np.int64) if bias_i < 0 else self.t(bias_i).data.astype(np.int64)
        bias_eff = bias + (-in_zp) * wsum
        lo, hi = qp.activation_range(act, dtype, out_s, out_zp)
        bias_type = "int32_t" if dtype == "int8" else "int64_t"
        if dtype == "int8" and (bias_eff.min() < qp.INT32_MIN or bias_eff.max() > qp.INT32_MAX):
            raise _refuse(op, "folded bias exceeds int32")
        arrays = [
            ConstArray(self.cname(op, "bias"), bias_type, [int(b) for b in bias_eff]),
            ConstArray(self.cname(op, "mult"), "int32_t", [int(m) for m in mult]),
            ConstArray(self.cname(op, "shift"), "int32_t", [int(s) for s in shift]),
        ]
        if dtype == "int8":
            # the int8 kernel walks its weights in edgernn_dot.h's blocked layout (lowering/blocking.py)
            arrays.append(ConstArray(self.cname(op, "w"), "int8_t", blocked_rows(w.data).tolist()))
            w_arg = ConstArg(arrays[-1].name)
        else:
            self.runtime_consts.add(op.inputs[1])
            w_arg = TensorArg(op.inputs[1])
        args = {"in": TensorArg(op.inputs[0]), "w": w_arg, "bias": ConstArg(arrays[0].name),
                "multiplier": ConstArg(arrays[1].name), "shift": ConstArg(arrays[2].name),
                "output_offset": int(out_zp), "act_min": int(lo), "act_max": int(hi), "rows": int(rows),
                "n_in": int(n_in), "n_out": int(n_out), "out": TensorArg(op.outputs[0])}
        if dtype == "int8":
            # The one op whose builtin kernel rounds differently from the reference one (docs/ops.md): the
            # rescale follows the kernel of the graph's oracle.
            args["rounding"] = Enum("EDGERNN_ROUND_TWICE_UP" if self.g.oracle == "builtin" else "EDGERNN_ROUND_ONCE")
        else:
            # LiteRT's 16x8 kernel rounds acc * (s_in * s_w / s_out) in double, halves away from zero; its
            # builtin one without a bias goes through ruy instead: the int32 sum, two roundings halves up
            # (docs/ops.md), unless the options say the (absent) bias is int64, as TF's 16x8 quantizer writes
            # them: then it sums in int64 and rescales as with a bias. The kernel computes the double rounding
            # from the Q31 multiplier and, near a half, from the double scale's bits.
            ruy = (self.g.oracle == "builtin" and bias_i < 0
                   and op.options.get("quantizedBiasType", 0) != TENSOR_TYPE_INT64)
            bound = int(np.abs(bias_eff).max()) + (1 << 15) * int(np.abs(w.data.astype(np.int64)).sum(axis=1).max())
            if bound >= (1 << 31 if ruy else 1 << 32):
                raise _refuse(op, f"its sums may reach {bound}, past the {'2^31' if ruy else '2^32'} the 16x8 "
                                  "kernel rescales exactly")
            arrays.append(ConstArray(self.cname(op, "scale"), "int64_t",
                                     [int(np.float64(r).view(np.int64)) for r in reals]))
            args["scale"] = ConstArg(arrays[-1].name)
            args["rounding"] = Enum("EDGERNN_ROUND_TWICE_UP" if ruy else "EDGERNN_ROUND_DOUBLE")
        fn = "edgernn_fully_connected_s8" if dtype == "int8" else "edgernn_fully_connected_s16"
        return self.call(op, fn, args, arrays=arrays)
