"""Data-movement copies of one run are written as memcpy of a constant size in model.c
(edgernn/backend/codegen.py, one_run_copy); copies of several runs keep edgernn_copy_runs. Their bytes are
held against the interpreter by test_backend_c.py's table (CONCATENATION, SPLIT, SLICE in every cell)."""

from __future__ import annotations

from edgernn.backend.codegen import one_run_copy
from edgernn.backend.kernels import kernel
from edgernn.backend.lowering import Call, ConstArray
from edgernn.backend.values import ConstArg, SizeOf, StructArg, TensorArg


def _copy(runs: list[list[int]], name: str = "r0") -> Call:
    arr = ConstArray(name, "edgernn_run_t", runs)
    return Call(0, "CONCATENATION", "edgernn_copy_runs", kernel("edgernn_copy_runs").order(
        {"runs": ConstArg(name), "n_runs": int(len(runs)), "elem_size": SizeOf("int8_t"), "src": TensorArg(1),
         "dst": TensorArg(2)}), arrays=[arr])


def test_one_run_is_inlined_and_several_are_not():
    assert one_run_copy(_copy([[6, 0, 9]]), _copy([[6, 0, 9]])) == (6, 0, 9)
    two = _copy([[0, 0, 3], [5, 3, 2]])
    assert one_run_copy(two, two) is None


def test_a_chained_copy_finds_its_run_on_the_chain_head():
    head = _copy([[0, 0, 4]], "a")
    tail = _copy([[4, 0, 2]], "b")
    head.arrays, tail.arrays = head.arrays + tail.arrays, []
    head.more = [tail]
    assert one_run_copy(head, tail) == (4, 0, 2)
    other = Call(1, "TANH", "edgernn_lut_s8", kernel("edgernn_lut_s8").order(
        {"table": ConstArg("t"), "in": TensorArg(1), "n": 8, "out": TensorArg(2)}))
    assert one_run_copy(other, other) is None
