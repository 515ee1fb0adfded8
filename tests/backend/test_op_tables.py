"""Randomized tables of the 8- and 16-bit element-wise kernels and the int8/int16 seams against LiteRT, on both
of its kernel sets.

Trained models reach few of the scales and inputs a kernel can see: an int16 LTC whose weights one machine
trained left a state byte 1 LSB off at step 143 of a 200-step sequence, where other machines' weights never
did (LiteRT's builtin int16 ADD rescales its blocks of 16 elements its own way, docs/ops.md). So each table
here draws, with a fixed seed, many scales (random ones, and the edges that quantizers make: an output at an
input's scale, equal inputs, a ratio so small that the input's shift goes right, zero points at the ends) and
many inputs (uniform, the ends, and inputs whose sum or product lies on a rounding boundary of the output,
where two ways of rounding part), and holds the generated C to LiteRT byte for byte:

- on LiteRT's reference kernels and on its builtin ones (the oracle of a graph with a quantized SUM), the C
  generated for each;
- with the element-wise ops fused into loops and each op its own kernel, and the fused build split across a
  two-thread team (sub-ranges that start mid-op).

Every op is an independent op of one step model (tests/support/op_graphs.py), its operands state inputs that
tests/c/step_driver.c sets afresh at every step (--state-every-step): one model holds a table's draws, one run its
steps.
"""

from __future__ import annotations


import numpy as np
import pytest

import op_graphs as G
from edgernn.backend import fusion, grouping
from edgernn.testing import backend_harness as H

pytestmark = pytest.mark.toolchain

N = 40            # elements a row: two of LiteRT's blocks of 16, and a tail of 8
STEPS = 1500      # rows of draws per binary op


def _scales(rng, dtype: str) -> list[tuple[str, tuple[float, int], tuple[float, int], tuple[float, int]]]:
    """(label, q1, q2, qo) of a binary op: the structures quantizers make, each at a random magnitude."""
    s = float(np.exp(rng.uniform(np.log(1e-5), np.log(1e-2)))) * (1 if dtype == "int16" else 300)
    r = float(rng.uniform(0.05, 0.95))

    def zp():
        return int(rng.integers(-128, 128)) if dtype == "int8" else 0

    return [
        ("out_at_first", (s, zp()), (s * r, zp()), (s, zp())),          # an LTC's v + small term
        ("out_at_second", (s * r, zp()), (s, zp()), (s, zp())),
        ("random", (s, zp()), (s * r, zp()), (s * float(rng.uniform(0.3, 3.0)), zp())),
        ("equal_inputs", (s, zp()), (s, zp()), (s * float(rng.uniform(0.6, 3.0)), zp())),
        ("out_twice_max", (s, zp()), (s * r, zp()), (2 * s, zp())),
        ("tiny_ratio", (s, zp()), (s * 3e-6, zp()), (s * 1.3, zp())),   # input shift below -left_shift
        ("zero_points_at_ends", (s, -128 if dtype == "int8" else 0), (s * r, 127 if dtype == "int8" else 0),
         (s * 1.1, 127 if dtype == "int8" else 0)),
        # an output range far narrower than the inputs': sums that overflow int16 before they saturate
        ("overflowing", (s, zp()), (s * r, zp()), (s / 300, zp())),
    ]


def _binary_cases(op: str, dtype: str, seed: int) -> list[G.Binary]:
    rng = np.random.default_rng(seed)
    cases = []
    for label, q1, q2, qo in _scales(rng, dtype):
        if op == "MUL":      # a product's output scale: near the operands' product, or far below it
            qo = (q1[0] * q2[0] * float(np.exp(rng.uniform(np.log(0.2), np.log(40.0))))
                  / (1000 if label == "overflowing" else 1), qo[1])
        cases.append(G.Binary(op, dtype, q1, q2, qo, "same"))
    lo, hi = G._INFO[dtype]
    for shapes, pick in (("const", 0), ("const_rank1", 2), ("scalar", 2), ("const", -1), ("scalar", -1)):
        label, q1, q2, qo = _scales(rng, dtype)[pick]
        if op == "MUL":
            qo = (q1[0] * q2[0] * float(rng.uniform(0.5, 4.0)) / (1000 if label == "overflowing" else 1), qo[1])
        size = 1 if shapes == "scalar" else N
        cases.append(G.Binary(op, dtype, q1, q2, qo, shapes, const=rng.integers(lo, hi + 1, size)))
    for pick in (2, -1):
        label, q1, q2, qo = _scales(rng, dtype)[pick]
        if op == "MUL":
            qo = (q1[0] * q2[0] * 2.0 / (1000 if label == "overflowing" else 1), qo[1])
        cases.append(G.Binary(op, dtype, q1, q2, qo, "row"))
    return cases


def _unary_cases(seed: int) -> list[G.Unary]:
    rng = np.random.default_rng(seed)
    cases = []
    for op in ("LOGISTIC", "TANH"):
        for _ in range(2):
            cases.append(G.Unary(op, "int8", (float(rng.uniform(0.01, 0.2)), int(rng.integers(-128, 128))),
                                 (1 / 256, -128) if op == "LOGISTIC" else (1 / 128, 0)))
            cases.append(G.Unary(op, "int16", (float(np.exp(rng.uniform(np.log(2e-5), np.log(1e-3)))), 0),
                                 (1 / 32768, 0)))
    return cases


def _seam_cases(seed: int) -> list[G.Unary]:
    rng = np.random.default_rng(seed)
    cases = []
    for din, dout in (("int8", "int16"), ("int16", "int8"), ("int16", "int16"), ("int8", "int8")):
        for _ in range(3):
            s_in = float(np.exp(rng.uniform(np.log(1e-4), np.log(0.05))))
            ratio = float(np.exp(rng.uniform(np.log(1 / 400), np.log(4.0))))
            if din == "int16" and dout == "int8":
                ratio = float(np.exp(rng.uniform(np.log(1.0), np.log(600.0))))
            zin = int(rng.integers(-128, 128)) if din == "int8" else 0
            zout = int(rng.integers(-128, 128)) if dout == "int8" else 0
            cases.append(G.Unary("QUANTIZE", din, (s_in, zin), (s_in * ratio, zout), dout))
    return cases


TABLES = {
    "add_s16": lambda: _binary_cases("ADD", "int16", 1),
    "sub_s16": lambda: _binary_cases("SUB", "int16", 2),
    "mul_s16": lambda: _binary_cases("MUL", "int16", 3),
    "add_s8": lambda: _binary_cases("ADD", "int8", 4),
    "sub_s8": lambda: _binary_cases("SUB", "int8", 5),
    "mul_s8": lambda: _binary_cases("MUL", "int8", 6),
    "logistic_tanh": lambda: _unary_cases(7),
    "seams": lambda: _seam_cases(8),
}


def _inputs(cases: list, seed: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(x, {state name: values}) of every step: the draws of each case, the rows of shorter draws repeated."""
    rng = np.random.default_rng(seed)
    draws: dict[str, np.ndarray] = {}
    for k, case in enumerate(cases):
        if isinstance(case, G.Binary):
            a, b = G.draw_binary(rng, case, N, STEPS)
            draws[f"a{k:02d}"] = a.astype(case.dtype)
            if b is not None:
                draws[f"b{k:02d}"] = b.astype(case.dtype)
        else:
            draws[f"a{k:02d}"] = G.draw_unary(case, N).astype(case.dtype)
    steps = max(len(v) for v in draws.values())
    for name, v in draws.items():
        draws[name] = np.resize(v, (steps,) + v.shape[1:])
    return np.zeros((steps, 1, N), np.int8), draws


class Oracle:
    """The step model on one of LiteRT's kernel sets, each step from its own x and states."""

    def __init__(self, step: bytes, kernels: str):
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        kind = {"reference": OpResolverType.BUILTIN_REF,
                "builtin": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES}[kernels]
        interp = Interpreter(model_content=step, experimental_op_resolver_type=kind)
        interp.allocate_tensors()
        self.runner = interp.get_signature_runner("serving_default")

    def records(self, x: np.ndarray, states: dict[str, np.ndarray], names: list[str]) -> np.ndarray:
        rows = []
        for t in range(len(x)):
            out = self.runner(x=x[t], **{name: states[name][t] for name in names})
            rows.append(np.concatenate([out["y"].reshape(-1).view(np.uint8)] +
                                       [out[name].reshape(-1).view(np.uint8) for name in names]))
        return np.stack(rows)


def _state_input(x: np.ndarray, states: dict[str, np.ndarray], names: list[str]) -> np.ndarray:
    """The driver's input rows (--state-every-step): x then every state, in the firmware's state order."""
    return np.stack([np.concatenate([x[t].reshape(-1).view(np.uint8)] +
                                    [np.ascontiguousarray(states[n][t]).reshape(-1).view(np.uint8) for n in names])
                     for t in range(len(x))])


def _mismatches(got: np.ndarray, ref: np.ndarray, cases: list, names: list[str]) -> dict[str, int]:
    """Mismatching values of each case's output o<k>, by case label."""
    out, at = {}, N                     # y (int8, N bytes) first
    for name in names:
        k = int(name[1:])
        case = cases[k]
        dtype = np.dtype(case.odtype if name.startswith("o") else case.dtype)
        shape = G.operand_shapes(case, N)[2 if name.startswith("o") else (0 if name.startswith("a") else 1)] \
            if isinstance(case, G.Binary) else (1, N)
        size = int(np.prod(shape)) * dtype.itemsize
        if name.startswith("o"):
            a = got[:, at : at + size].copy().view(dtype)
            b = ref[:, at : at + size].copy().view(dtype)
            bad = int((a != b).sum())
            if bad:
                label = f"{k}:{case.op} {getattr(case, 'shapes', '')} {case.q1} {getattr(case, 'q2', '')} {case.qo}"
                out[label] = bad
        at += size
    assert at == got.shape[1]
    return out


@pytest.mark.parametrize("table", list(TABLES))
def test_kernels_match_both_kernel_sets_over_random_draws(tmp_path, monkeypatch, table):
    import edgernn.tflite.interpreter as interpreter

    cases = TABLES[table]()
    step = G.graph(cases, N)
    x, states = _inputs(cases, seed=100 + list(TABLES).index(table))
    names = sorted(states) + sorted(f"o{k:02d}" for k in range(len(cases)))
    names = sorted(names)
    for name in names:
        if name not in states:      # an output's own state input: never read, set to anything
            k = int(name[1:])
            case = cases[k]
            shape = G.operand_shapes(case, N)[2] if isinstance(case, G.Binary) else (1, N)
            states[name] = np.zeros((len(x),) + shape, case.odtype)
    rows = _state_input(x, states, names)
    for kernels in ("reference", "builtin"):
        monkeypatch.setattr(interpreter, "oracle_kernels", lambda ops, k=kernels: k)
        ref = Oracle(step, kernels).records(x, states, names)
        for label, fused, cflags in (("fused", True, None), ("apart", False, None),
                                     ("fused, two threads", True, ["-O2", "-DEDGERNN_THREADS=2", "-pthread"])):
            monkeypatch.setattr(fusion, "ENABLED", fused)
            monkeypatch.setattr(grouping, "ENABLED", fused)
            folder = tmp_path / f"{kernels}-{label.replace(', ', '-').replace(' ', '_')}"
            folder.mkdir()
            (folder / "step.tflite").write_bytes(step)
            b = H.build(folder, cflags=cflags)
            got, _ = H.run_driver(b.exe, rows, ref.shape[1], folder, args=("--state-every-step",))
            bad = _mismatches(got, ref, cases, names)
            assert not bad, f"{table} on LiteRT's {kernels} kernels ({label}): mismatching values {bad}"

