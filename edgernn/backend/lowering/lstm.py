"""UNIDIRECTIONAL_SEQUENCE_LSTM, the fused LSTM (float32, int8 with int16 gates)."""

from __future__ import annotations

import numpy as np

from edgernn.backend import quantparams as qp
from edgernn.backend.ir import Operator

from edgernn.backend.lowering.base import ConstArray, ConstStruct, LoweringBase, _refuse
from edgernn.backend.values import TensorArg, ConstArg, StructArg
from edgernn.backend.lowering.blocking import blocked_rows, unit_major_rows


class LstmOps(LoweringBase):
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
        args_state = {"steps": int(steps), "x": TensorArg(ins[0]), "h": TensorArg(ins[18]), "c": TensorArg(ins[19]),
                      "y": TensorArg(op.outputs[0])}
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
                             {"p": StructArg(params.name), "w_in": ConstArg(arrays[0].name),
                              "w_rec": ConstArg(arrays[1].name), "bias": ConstArg(arrays[2].name), **args_state},
                             arrays=arrays, structs=[params])
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
        # unit-major rows (a unit's four gates together) in edgernn_dot.h's blocked layout, so that one
        # block of weights gives two units' gates and their tails follow at once
        order = unit_major_rows(n_cell)
        w_in_all = np.concatenate([w.data for w in w_in])[order]
        w_rec_all = np.concatenate([w.data for w in w_rec])[order]
        arrays = [
            ConstArray(self.cname(op, "w_in"), "int8_t", blocked_rows(w_in_all).tolist()),
            ConstArray(self.cname(op, "w_rec"), "int8_t", blocked_rows(w_rec_all).tolist()),
            ConstArray(self.cname(op, "bias_in"), "int32_t", [int(b) for b in bias_in[order]]),
            ConstArray(self.cname(op, "bias_rec"), "int32_t", [int(b) for b in bias_rec[order]]),
        ]
        params = ConstStruct(self.cname(op, "p"), "edgernn_lstm_s8_params_t", [
            n_in, n_cell, [m for m, _ in in_q], [s for _, s in in_q], [m for m, _ in rec_q], [s for _, s in rec_q],
            hid_m, hid_sh, hidden_zp, 30 + cell_log2, 15 + cell_log2, qp.lstm_quantized_cell_clip(cell_clip, c_s),
        ])
        return self.call(op, "edgernn_lstm_s8",
                         {"p": StructArg(params.name), "w_in": ConstArg(arrays[0].name),
                          "w_rec": ConstArg(arrays[1].name), "bias_in": ConstArg(arrays[2].name),
                          "bias_rec": ConstArg(arrays[3].name), **args_state},
                         arrays=arrays, structs=[params])
