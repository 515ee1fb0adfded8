"""Ops that only move bytes: RESHAPE, SPLIT, SPLIT_V, CONCATENATION, PACK, UNPACK, GATHER, SLICE,
STRIDED_SLICE, as precomputed copy runs."""

from __future__ import annotations

import numpy as np

from edgernn.backend.ir import Operator

from edgernn.backend.lowering.base import Call, ConstArray, LoweringBase, _refuse
from edgernn.backend.values import TensorArg, ConstArg, SizeOf


class ShapeOps(LoweringBase):
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
                             {"runs": ConstArg(name), "n_runs": int(n_runs),
                              "elem_size": SizeOf(self.t(dst_t).ctype), "src": TensorArg(src_t),
                              "dst": TensorArg(dst_t)})
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
