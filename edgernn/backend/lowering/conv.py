"""CONV_2D, DEPTHWISE_CONV_2D, MAX_POOL_2D and AVERAGE_POOL_2D over one NHWC frame (batch 1).

The multipliers are TFLite's PopulateConvolutionQuantizationParams: per output channel, input scale
times filter scale over output scale in double, then QuantizeMultiplier. The int8 CONV_2D runs
FULLY_CONNECTED's blocked dot products over im2col patches (templates/kernels/edgernn_conv.c), so its
weights take the FC's blocked layout and its bias the input offset folded in; its rescale is the
convolutions' own (two roundings, not the reference FC's one). A float 1x1 stride-1 CONV_2D is a
FULLY_CONNECTED over the frame's pixels and is lowered to one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgernn.backend import quantparams as qp
from edgernn.backend.ir import Operator, Tensor

from edgernn.backend.lowering.base import Call, ConstArray, ConstStruct, LoweringBase, _refuse
from edgernn.backend.values import TensorArg, ConstArg, StructArg, Float, NULL
from edgernn.backend.lowering.blocking import blocked_rows


PADDING_SAME, PADDING_VALID = 0, 1


@dataclass(frozen=True)
class Geometry:
    """edgernn_conv_geom_t, in its field order."""

    in_h: int
    in_w: int
    in_c: int
    out_h: int
    out_w: int
    out_c: int
    k_h: int
    k_w: int
    stride_h: int
    stride_w: int
    dil_h: int
    dil_w: int
    pad_top: int
    pad_left: int
    depth_multiplier: int = 1

    def fields(self) -> list[int]:
        return [self.in_h, self.in_w, self.in_c, self.out_h, self.out_w, self.out_c, self.k_h, self.k_w,
                self.stride_h, self.stride_w, self.dil_h, self.dil_w, self.pad_top, self.pad_left,
                self.depth_multiplier]


def _out_size(padding: int, size: int, k: int, stride: int, dil: int) -> int:
    """ComputeOutSize of TFLite's padding.h."""
    eff = (k - 1) * dil + 1
    if padding == PADDING_SAME:
        return (size + stride - 1) // stride
    return (size - eff + stride) // stride


def _pad(size: int, k: int, stride: int, dil: int, out: int) -> int:
    """ComputePaddingWithOffset's leading padding (the odd one goes after)."""
    eff = (k - 1) * dil + 1
    return max(((out - 1) * stride + eff - size) // 2, 0)


def conv_multipliers(in_scale: float, w: Tensor, out_scale: float, n_out: int) -> tuple[list[int], list[int]]:
    """Per output channel (multiplier, shift): the scales as float32 values, their product in double."""
    scales = [float(s) for s in w.scale] if w.per_channel else [float(w.scale[0])] * n_out
    reals = [float(np.float32(in_scale)) * float(np.float32(s)) / float(np.float32(out_scale)) for s in scales]
    mult, shift = zip(*(qp.quantize_multiplier(r) for r in reals))
    return [int(m) for m in mult], [int(s) for s in shift]


class ConvOps(LoweringBase):
    # ---- geometry ----
    def _geometry(self, op: Operator, k_h: int, k_w: int, dm: int = 1) -> Geometry:
        opts = op.options
        x, out = self.t(op.inputs[0]), self.t(op.outputs[0])
        if len(x.shape) != 4 or x.shape[0] != 1 or len(out.shape) != 4:
            raise _refuse(op, f"input must be one NHWC frame (batch 1), not shape {x.shape}")
        _, in_h, in_w, in_c = x.shape
        _, out_h, out_w, out_c = out.shape
        sh, sw = int(opts.get("strideH", 1)), int(opts.get("strideW", 1))
        dh, dw = int(opts.get("dilationHFactor", 1)), int(opts.get("dilationWFactor", 1))
        padding = int(opts.get("padding", PADDING_SAME))
        if padding not in (PADDING_SAME, PADDING_VALID):
            raise _refuse(op, f"padding {padding}")
        if (_out_size(padding, in_h, k_h, sh, dh), _out_size(padding, in_w, k_w, sw, dw)) != (out_h, out_w):
            raise _refuse(op, f"output shape {out.shape} is not what the padding and strides give")
        pad_top = _pad(in_h, k_h, sh, dh, out_h) if padding == PADDING_SAME else 0
        pad_left = _pad(in_w, k_w, sw, dw, out_w) if padding == PADDING_SAME else 0
        return Geometry(in_h, in_w, in_c, out_h, out_w, out_c, k_h, k_w, sh, sw, dh, dw, pad_top, pad_left, dm)

    def _geom_struct(self, op: Operator, g: Geometry) -> ConstStruct:
        return ConstStruct(self.cname(op, "geom"), "edgernn_conv_geom_t", g.fields())

    def _quantized_conv(self, op: Operator, dtype: str, n_out: int):
        """(multipliers, shifts, input zp, output zp, act_min, act_max) of an int8 or int16x8 convolution."""
        x, w, out = self.t(op.inputs[0]), self.t(op.inputs[1]), self.t(op.outputs[0])
        if w.dtype != "int8" or np.any(w.zero_point != 0):
            raise _refuse(op, "weights must be symmetric int8")
        channel_dim = 3 if op.op == "DEPTHWISE_CONV_2D" else 0
        if w.per_channel and (w.quantized_dimension != channel_dim or len(w.scale) != n_out):
            raise _refuse(op, f"per-channel weights not quantized along the output channels (dimension {channel_dim})")
        if self.g.oracle == "builtin":
            # the builtin convolutions (not the reference ones) would be the oracle: not measured
            raise _refuse(op, f"{dtype} convolution in a graph validated on LiteRT's builtin kernels (a quantized SUM)")
        (in_s, in_zp), (out_s, out_zp) = x.qparams(), out.qparams()
        if dtype == "int16" and (in_zp != 0 or out_zp != 0):
            raise _refuse(op, "int16 activations with a nonzero zero point")
        mult, shift = conv_multipliers(in_s, w, out_s, n_out)
        lo, hi = qp.activation_range(op.options.get("fusedActivationFunction", 0), dtype, out_s, out_zp)
        return mult, shift, in_zp, out_zp, lo, hi

    def _bias(self, op: Operator, n_out: int) -> np.ndarray:
        bias_i = op.inputs[2] if len(op.inputs) > 2 else -1
        return np.zeros(n_out, dtype=np.int64) if bias_i < 0 else self.t(bias_i).data.astype(np.int64)

    def _float_bias(self, op: Operator):
        bias_i = op.inputs[2] if len(op.inputs) > 2 else -1
        if bias_i < 0:
            return NULL
        self.runtime_consts.add(bias_i)
        return TensorArg(bias_i)

    # ---- CONV_2D ----
    def op_conv_2d(self, op: Operator, dtype: str):
        if dtype not in ("float32", "int8", "int16"):
            return None
        w = self.t(op.inputs[1])
        if not w.is_const or len(w.shape) != 4:
            raise _refuse(op, "the filter must be a constant [out_c][k_h][k_w][in_c] tensor")
        n_out, k_h, k_w, w_in = w.shape
        g = self._geometry(op, k_h, k_w)
        if w_in != g.in_c or n_out != g.out_c:
            raise _refuse(op, f"grouped convolution (filter {w.shape}, {g.in_c} input channels)")
        n_in = k_h * k_w * g.in_c
        pointwise = (k_h, k_w, g.stride_h, g.stride_w) == (1, 1, 1, 1)
        if pointwise and dtype == "float32":
            # a float pointwise convolution is a FULLY_CONNECTED over the pixels (its rows)
            return self._pointwise_as_fc(op, w, n_out, n_in, g)
        geom = self._geom_struct(op, g)
        if dtype == "float32":
            if w.dtype != "float32":
                raise _refuse(op, "hybrid (quantized weights, float activations) models")
            self.runtime_consts.add(op.inputs[1])
            lo, hi = qp.activation_range_float(op.options.get("fusedActivationFunction", 0))
            return self.call(op, "edgernn_conv_f32",
                             {"g": StructArg(geom.name), "in": TensorArg(op.inputs[0]), "w": TensorArg(op.inputs[1]),
                              "bias": self._float_bias(op), "act_min": Float(lo), "act_max": Float(hi),
                              "out": TensorArg(op.outputs[0])},
                             structs=[geom])
        mult, shift, in_zp, out_zp, lo, hi = self._quantized_conv(op, dtype, n_out)
        w2 = w.data.reshape(n_out, n_in)
        bias = self._bias(op, n_out)
        common = {"g": StructArg(geom.name), "in": TensorArg(op.inputs[0]), "act_min": int(lo), "act_max": int(hi),
                  "out": TensorArg(op.outputs[0])}
        if dtype == "int8":
            bias_eff = bias - in_zp * w2.astype(np.int64).sum(axis=1)
            if bias_eff.min() < qp.INT32_MIN or bias_eff.max() > qp.INT32_MAX:
                raise _refuse(op, "folded bias exceeds int32")
            arrays = self._quant_arrays(op, "int32_t", bias_eff, mult, shift)
            arrays.append(ConstArray(self.cname(op, "w"), "int8_t", blocked_rows(w2).tolist()))
            return self.call(op, "edgernn_conv_s8",
                             {**common, "w": ConstArg(arrays[3].name), "bias": ConstArg(arrays[0].name),
                              "multiplier": ConstArg(arrays[1].name), "shift": ConstArg(arrays[2].name),
                              "input_zero_point": int(in_zp), "output_offset": int(out_zp)},
                             arrays=arrays, structs=[geom])
        arrays = self._quant_arrays(op, "int64_t", bias, mult, shift)
        self.runtime_consts.add(op.inputs[1])
        return self.call(op, "edgernn_conv_s16",
                         {**common, "w": TensorArg(op.inputs[1]), "bias": ConstArg(arrays[0].name),
                          "multiplier": ConstArg(arrays[1].name), "shift": ConstArg(arrays[2].name)},
                         arrays=arrays, structs=[geom])

    def _quant_arrays(self, op: Operator, bias_type: str, bias, mult, shift) -> list[ConstArray]:
        return [ConstArray(self.cname(op, "bias"), bias_type, [int(b) for b in bias]),
                ConstArray(self.cname(op, "mult"), "int32_t", [int(m) for m in mult]),
                ConstArray(self.cname(op, "shift"), "int32_t", [int(s) for s in shift])]

    def _pointwise_as_fc(self, op: Operator, w: Tensor, n_out: int, n_in: int, g: Geometry) -> Call:
        if w.dtype != "float32":
            raise _refuse(op, "hybrid (quantized weights, float activations) models")
        self.runtime_consts.add(op.inputs[1])
        lo, hi = qp.activation_range_float(op.options.get("fusedActivationFunction", 0))
        return self.call(op, "edgernn_fully_connected_f32",
                         {"in": TensorArg(op.inputs[0]), "w": TensorArg(op.inputs[1]), "bias": self._float_bias(op),
                          "act_min": Float(lo), "act_max": Float(hi), "rows": int(g.out_h * g.out_w),
                          "n_in": int(n_in), "n_out": int(n_out), "out": TensorArg(op.outputs[0])})

    # ---- DEPTHWISE_CONV_2D ----
    def op_depthwise_conv_2d(self, op: Operator, dtype: str):
        if dtype not in ("float32", "int8", "int16"):
            return None
        w = self.t(op.inputs[1])
        if not w.is_const or len(w.shape) != 4 or w.shape[0] != 1:
            raise _refuse(op, "the filter must be a constant [1][k_h][k_w][out_c] tensor")
        _, k_h, k_w, n_out = w.shape
        x = self.t(op.inputs[0])
        in_c = x.shape[-1]
        if n_out % in_c:
            raise _refuse(op, f"{n_out} output channels are not a multiple of {in_c} input channels")
        g = self._geometry(op, k_h, k_w, n_out // in_c)
        geom = self._geom_struct(op, g)
        self.runtime_consts.add(op.inputs[1])
        common = {"g": StructArg(geom.name), "in": TensorArg(op.inputs[0]), "out": TensorArg(op.outputs[0])}
        if dtype == "float32":
            if w.dtype != "float32":
                raise _refuse(op, "hybrid (quantized weights, float activations) models")
            lo, hi = qp.activation_range_float(op.options.get("fusedActivationFunction", 0))
            return self.call(op, "edgernn_depthwise_conv_f32",
                             {**common, "w_f": TensorArg(op.inputs[1]), "bias": self._float_bias(op),
                              "act_min": Float(lo), "act_max": Float(hi)},
                             structs=[geom])
        mult, shift, in_zp, out_zp, lo, hi = self._quantized_conv(op, dtype, n_out)
        # the integer kernels walk a padded copy of the frame (edgernn_conv.c), the input offset folded into
        # the bias over every tap (a padded tap holds the zero point, so it adds nothing)
        bias = self._bias(op, n_out) - in_zp * w.data.astype(np.int64).reshape(-1, n_out).sum(axis=0)
        common.update({"w": TensorArg(op.inputs[1]), "act_min": int(lo), "act_max": int(hi)})
        if dtype == "int8":
            if bias.min() < qp.INT32_MIN or bias.max() > qp.INT32_MAX:
                raise _refuse(op, "folded bias exceeds int32")
            arrays = self._quant_arrays(op, "int32_t", bias, mult, shift)
            return self.call(op, "edgernn_depthwise_conv_s8",
                             {**common, "bias": ConstArg(arrays[0].name), "multiplier": ConstArg(arrays[1].name),
                              "shift": ConstArg(arrays[2].name), "input_zero_point": int(in_zp),
                              "output_offset": int(out_zp)},
                             arrays=arrays, structs=[geom])
        if k_h * k_w > 256:
            raise _refuse(op, f"{k_h}x{k_w} taps: the 16x8 kernel sums at most 256 int16 x int8 products in int32")
        arrays = self._quant_arrays(op, "int64_t", bias, mult, shift)
        return self.call(op, "edgernn_depthwise_conv_s16",
                         {**common, "bias": ConstArg(arrays[0].name), "multiplier": ConstArg(arrays[1].name),
                          "shift": ConstArg(arrays[2].name)},
                         arrays=arrays, structs=[geom])

    # ---- pools ----
    def _pool(self, op: Operator, dtype: str, kind: str):
        if dtype not in ("float32", "int8", "int16"):
            return None
        opts = op.options
        g = self._geometry(op, int(opts["filterHeight"]), int(opts["filterWidth"]))
        if g.in_c != g.out_c:
            raise _refuse(op, "channels change")
        x, out = self.t(op.inputs[0]), self.t(op.outputs[0])
        act = opts.get("fusedActivationFunction", 0)
        if dtype == "float32":
            lo, hi = map(Float, qp.activation_range_float(act))
        else:
            if x.qparams() != out.qparams():
                raise _refuse(op, "input and output quantized differently (TFLite requires the same)")
            lo, hi = map(int, qp.activation_range(act, dtype, *out.qparams()))
        geom = self._geom_struct(op, g)
        suffix = {"float32": "f32", "int8": "s8", "int16": "s16"}[dtype]
        return self.call(op, f"edgernn_{kind}_pool_{suffix}",
                         {"g": StructArg(geom.name), "in": TensorArg(op.inputs[0]), "act_min": lo, "act_max": hi,
                          "out": TensorArg(op.outputs[0])}, structs=[geom])

    def op_max_pool_2d(self, op, dtype):
        return self._pool(op, dtype, "max")

    def op_average_pool_2d(self, op, dtype):
        return self._pool(op, dtype, "avg")
