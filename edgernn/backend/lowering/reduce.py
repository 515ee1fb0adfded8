"""SUM, MEAN and REDUCE_MAX over axes."""

from __future__ import annotations

import numpy as np

from edgernn.backend import quantparams as qp
from edgernn.backend.ir import Operator

from edgernn.backend.lowering.base import ConstArray, LoweringBase, _refuse
from edgernn.backend.values import TensorArg, ConstArg, Float


class ReduceOps(LoweringBase):
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
        if fn == "edgernn_reduce_max_f32":
            if dtype != "float32" and x.qparams() != out.qparams():
                raise _refuse(op, "input and output quantized differently")
            return self.call(op, fn.replace("f32", {"float32": "f32", "int8": "s8", "int16": "s16"}[dtype]),
                             {"in": TensorArg(op.inputs[0]), "outer": int(outer), "reduced": int(reduced),
                              "inner": int(inner), "out": TensorArg(op.outputs[0])})
        if dtype == "int16":
            (si, zi), (so, zo) = x.qparams(), out.qparams()
            if fn == "edgernn_sum_f32":
                # TF's 16x8 quantizer gives SUM its input's quantization (an LTC's synapse sums): LiteRT then
                # sums the raw values, the total saturated to int16 (no rescale)
                if (si, zi) != (so, zo) or zi != 0:
                    raise _refuse(op, "int16 SUM whose output is quantized unlike its input (no converted model "
                                      "makes one, so no kernel is verified)")
                if reduced > 1 << 16:
                    raise _refuse(op, f"the int32 sum of {reduced} int16 values may overflow")
                return self.call(op, "edgernn_sum_s16",
                                 {"in": TensorArg(op.inputs[0]), "outer": int(outer), "reduced": int(reduced),
                                  "inner": int(inner), "stride": int(inner), "out": TensorArg(op.outputs[0])})
            if fn != "edgernn_mean_f32":
                raise _refuse(op, "no int16 kernel (no converted model uses one, so none is verified)")
            if zi != 0 or zo != 0:
                raise _refuse(op, "int16 activations with a nonzero zero point")
            if reduced > 1 << 16:
                raise _refuse(op, f"the int32 sum of {reduced} int16 values may overflow")
            # GlobalAveragePooling2D at 16x8: QuantizedMeanOrSum as at int8 (measured, tests/backend/test_conv.py)
            mult, shift = qp.reduce_params(si, so, reduced, mean=True)
            return self.call(op, "edgernn_mean_s16",
                             {"in": TensorArg(op.inputs[0]), "outer": int(outer), "reduced": int(reduced),
                              "inner": int(inner), "multiplier": int(mult), "shift": int(shift),
                              "out": TensorArg(op.outputs[0])})
        shape = {"in": TensorArg(op.inputs[0]), "outer": int(outer), "reduced": int(reduced), "inner": int(inner),
                 "out": TensorArg(op.outputs[0])}
        if dtype == "int8":
            (si, zi), (so, zo) = x.qparams(), out.qparams()
            if fn == "edgernn_sum_f32":
                # LiteRT's SUM kernel rescales the int32 sum in float (docs/ops.md says why not the
                # reference one); scale and bias are the float32 values its Eval computes
                scale, bias = qp.sum_float_params(si, so, zi, reduced)
                thresholds = qp.sum_thresholds(scale, bias, zo, reduced)
                if thresholds is not None:
                    # the same function of the sum, by thresholds listed here: no float at run time
                    first, at = thresholds
                    arr = ConstArray(self.cname(op, "thresholds"), "int32_t", [*at, qp.thresholds_slope(at)])
                    return self.call(op, "edgernn_sum_thresholds_s8",
                                     {"in": shape["in"], "outer": shape["outer"], "reduced": shape["reduced"],
                                      "inner": shape["inner"], "stride": shape["inner"],
                                      "thresholds": ConstArg(arr.name), "n_thresholds": int(len(at)),
                                      "first": int(first), "out": shape["out"]},
                                     arrays=[arr])
                return self.call(op, "edgernn_sum_s8",
                                 {**shape, "scale": Float(scale), "bias": Float(bias),
                                  "output_zero_point": int(zo)})
            # reference_ops::QuantizedMeanOrSum: int32 sum, zero point removed, one requantization
            mult, shift = qp.reduce_params(si, so, reduced, mean=True)
            return self.call(op, "edgernn_mean_s8",
                             {**shape, "input_zero_point": int(zi), "multiplier": int(mult), "shift": int(shift),
                              "output_zero_point": int(zo)})
        return self.call(op, fn, shape)

    def op_sum(self, op, dtype):
        return self._reduce(op, dtype, "edgernn_sum_f32")

    def op_mean(self, op, dtype):
        return self._reduce(op, dtype, "edgernn_mean_f32")

    def op_reduce_max(self, op, dtype):
        return self._reduce(op, dtype, "edgernn_reduce_max_f32")
