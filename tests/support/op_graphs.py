"""Step models of many independent single ops, for randomized tables of the kernels against LiteRT.

Each op of a table case reads state inputs (``a00``, ``b00``, ...) and writes its result to a state output
(``o00``, ...), so that tests/c/step_driver.c (--state-every-step) can hand the firmware a fresh draw of every
operand at every step and read every result back: both operands of a binary op have their own scale and zero point,
and one model holds many draws of scales at once. Every state input that an op reads is also a state output, through a
RESHAPE (the firmware's state layout wants each state in and out); x goes to y through a RESHAPE.

A ``Binary`` case is ADD, SUB or MUL with operand shapes of a kind:

- ``same``: both operands (1, n) state inputs;
- ``const``: the second operand a constant of shape (1, n) (or (n,): ``const_rank1``);
- ``row``: a (2, n) operand and a (1, n) one, broadcast;
- ``scalar``: the second operand a constant of one element.

A ``Unary`` case is LOGISTIC, TANH or QUANTIZE (a requantization or a seam between int8 and int16).

``draw_binary``/``draw_unary`` give the operands' values: uniform over the type, the ends and the zero point,
and values chosen so that the op's sum or product lands on a rounding boundary of its output rescale (where
two ways of rounding part; edgernn.backend.quantparams computes the reference kernel's intermediates).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from edgernn.backend import quantparams as qp
from edgernn.testing import mixed_models as MM
from edgernn.tflite import model as M

S = M.schema

_INFO = {"int8": (-128, 127), "int16": (-32768, 32767)}


@dataclass
class Binary:
    op: str                     # "ADD", "SUB", "MUL"
    dtype: str                  # "int8" or "int16"
    q1: tuple[float, int]       # (scale, zero point) of each operand and of the output
    q2: tuple[float, int]
    qo: tuple[float, int]
    shapes: str = "same"        # same, const, const_rank1, row, scalar
    const: np.ndarray | None = field(default=None, repr=False)   # the constant operand's values

    @property
    def odtype(self) -> str:
        return self.dtype


@dataclass
class Unary:
    op: str                     # "LOGISTIC", "TANH", "QUANTIZE"
    dtype: str                  # the input's
    q1: tuple[float, int]
    qo: tuple[float, int]
    out_dtype: str = ""         # QUANTIZE: the output's (else the input's)

    @property
    def odtype(self) -> str:
        return self.out_dtype or self.dtype


def _options(op: str):
    if op == "ADD":
        o = S.AddOptionsT()
        o.potScaleInt16 = False       # the general rescale, as TF's 16x8 quantizer writes it
        return S.BuiltinOptions.AddOptions, o
    if op == "SUB":
        o = S.SubOptionsT()
        o.potScaleInt16 = False
        return S.BuiltinOptions.SubOptions, o
    if op == "MUL":
        return S.BuiltinOptions.MulOptions, S.MulOptionsT()
    return 0, None


def _const(model, name: str, dtype: str, values: np.ndarray, q: tuple[float, int]) -> int:
    index = MM._tensor(model, name, dtype, values.shape, q[0], q[1])
    buf = S.BufferT()
    buf.data = np.frombuffer(values.astype(dtype).tobytes(), dtype=np.uint8)
    model.buffers.append(buf)
    model.subgraphs[0].tensors[index].buffer = len(model.buffers) - 1
    return index


def _reshape(model, src: int, dst: int):
    shape = S.ReshapeOptionsT()
    shape.newShape = np.array(list(model.subgraphs[0].tensors[dst].shape), dtype=np.int32)
    return MM._op(model, S.BuiltinOperator.RESHAPE, [src], [dst], options_type=S.BuiltinOptions.ReshapeOptions,
                  options=shape)


def operand_shapes(case: Binary, n: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(first operand, second operand, output) shapes of a binary case over n elements a row."""
    return {"same": ((1, n), (1, n), (1, n)), "const": ((1, n), (1, n), (1, n)),
            "const_rank1": ((1, n), (n,), (1, n)), "row": ((2, n), (1, n), (2, n)),
            "scalar": ((1, n), (1,), (1, n))}[case.shapes]


def graph(cases: list, n: int) -> bytes:
    """The step model of ``cases`` (Binary or Unary), each over n elements a row: x (1, n) int8 -> y by a
    RESHAPE; case k reads state a<k> (and b<k> where its second operand is not constant) and writes o<k>."""
    model, g = MM._new_model(b"edgernn test: op table")
    x = MM._tensor(model, "x", "int8", (1, n), 1.0, 0)
    y = MM._tensor(model, "y", "int8", (1, n), 1.0, 0)
    g.operators.append(_reshape(model, x, y))
    ins, outs = [("x", x)], [("y", y)]

    def state(name: str, dtype: str, shape, q) -> int:
        t_in = MM._tensor(model, name, dtype, shape, q[0], q[1])
        t_out = MM._tensor(model, f"{name}.out", dtype, shape, q[0], q[1])
        ins.append((name, t_in))
        outs.append((name, t_out))
        return t_in, t_out

    for k, case in enumerate(cases):
        if isinstance(case, Binary):
            sa, sb, so = operand_shapes(case, n)
            a, a_out = state(f"a{k:02d}", case.dtype, sa, case.q1)
            g.operators.append(_reshape(model, a, a_out))
            if case.shapes in ("const", "const_rank1", "scalar"):
                b = _const(model, f"c{k:02d}", case.dtype, case.const.reshape(sb), case.q2)
            else:
                b, b_out = state(f"b{k:02d}", case.dtype, sb, case.q2)
                g.operators.append(_reshape(model, b, b_out))
            _, o = state(f"o{k:02d}", case.dtype, so, case.qo)
            kind, options = _options(case.op)
            g.operators.append(MM._op(model, getattr(S.BuiltinOperator, case.op), [a, b], [o],
                                      version=2, options_type=kind, options=options))
        else:
            a, a_out = state(f"a{k:02d}", case.dtype, (1, n), case.q1)
            g.operators.append(_reshape(model, a, a_out))
            _, o = state(f"o{k:02d}", case.odtype, (1, n), case.qo)
            version = 3 if case.op == "QUANTIZE" else 2
            g.operators.append(MM._op(model, getattr(S.BuiltinOperator, case.op), [a], [o], version=version))
    g.inputs = np.array([t for _, t in ins], dtype=np.int32)
    g.outputs = np.array([t for _, t in outs], dtype=np.int32)
    sig = S.SignatureDefT()
    sig.signatureKey = b"serving_default"
    sig.subgraphIndex = 0
    for side, items in (("inputs", ins), ("outputs", outs)):
        maps = []
        for key, index in items:
            item = S.TensorMapT()
            item.name, item.tensorIndex = key.encode(), index
            maps.append(item)
        setattr(sig, side, maps)
    model.signatureDefs = [sig]
    return M.write(model)


# ---- draws ----

def _uniform(rng, dtype: str, shape) -> np.ndarray:
    lo, hi = _INFO[dtype]
    return rng.integers(lo, hi + 1, shape)


def _ends(rng, dtype: str, zp: int, shape) -> np.ndarray:
    lo, hi = _INFO[dtype]
    picks = np.array([lo, lo + 1, hi - 1, hi, zp, zp - 1, zp + 1, 0, -1, 1])
    return np.clip(rng.choice(picks, shape), lo, hi)


def _addsub_params(case: Binary) -> tuple[int, ...]:
    """(left, m1, sh1, m2, sh2, mo, sho) as the lowering computes them (TFLite's Prepare)."""
    (s1, _), (s2, _), (so, _) = case.q1, case.q2, case.qo
    left = 20 if case.dtype == "int8" else 15
    twice = float(2 * max(np.float32(s1), np.float32(s2)))
    m1, sh1 = qp.quantize_multiplier(float(np.float32(s1)) / twice)
    m2, sh2 = qp.quantize_multiplier(float(np.float32(s2)) / twice)
    mo, sho = qp.quantize_multiplier(twice / float(np.float32((1 << left) * np.float32(so))))
    return left, m1, sh1, m2, sh2, mo, sho


def _boundary_a(rng, case: Binary, b: np.ndarray) -> np.ndarray:
    """For each second operand in ``b``, a first operand whose rescaled sum (ADD/SUB) or product (MUL) with it
    lies at, or one step from, a half of the output's rescale: the inputs where one rounding and another part."""
    lo, hi = _INFO[case.dtype]
    z1, z2 = case.q1[1], case.q2[1]
    values = np.arange(lo, hi + 1)
    count = b.size
    j = rng.integers(-(hi + 1), hi + 1, count)
    if case.op in ("ADD", "SUB"):
        left, m1, sh1, m2, sh2, mo, sho = _addsub_params(case)
        sign = -1 if case.op == "SUB" else 1
        x1 = np.array([qp.mbqm((int(v) - z1) << left, m1, sh1) for v in values])
        x2 = np.array([qp.mbqm((int(v) - z2) << left, m2, sh2) for v in b])
        # a half of the output: s * mo / 2^(31 - sho) = j + 1/2
        target = (j + 0.5) * (2.0 ** (31 - sho) / mo) - sign * x2
        at = np.searchsorted(x1, target) + rng.integers(-1, 1, count)
        return values[np.clip(at, 0, len(values) - 1)]
    # MUL: (a - z1)(b - z2) * s1 * s2 / so at j + 1/2
    real = float(np.float32(case.q1[0]) * np.float32(case.q2[0]) / np.float32(case.qo[0]))
    nb = np.where(b - z2 == 0, 1, b - z2)
    a = np.rint((j + 0.5) / real / nb) + z1 + rng.integers(-1, 2, count)
    return np.clip(a, lo, hi).astype(np.int64)


def draw_binary(rng, case: Binary, n: int, steps: int) -> tuple[np.ndarray, np.ndarray | None]:
    """(a, b) of ``steps`` rows each, in the operands' shapes (b None for a constant second operand): about a
    third uniform, a tenth the ends and the zero points, the rest at rounding boundaries of the output."""
    sa, sb, _ = operand_shapes(case, n)
    a = _uniform(rng, case.dtype, (steps,) + sa).reshape(steps, -1, n)
    ends = rng.random(a.shape) < 0.1
    a[ends] = _ends(rng, case.dtype, case.q1[1], int(ends.sum()))
    if case.const is not None:
        b = None
        b_seen = np.broadcast_to(case.const.reshape(-1), (steps, a.shape[1], n))
    else:
        b = _uniform(rng, case.dtype, (steps,) + sb).reshape(steps, -1, n)
        b_seen = np.broadcast_to(b, a.shape)
    near = rng.random(a.shape) < 0.55
    a[near] = _boundary_a(rng, case, b_seen[near])
    return a.reshape((steps,) + sa), (None if b is None else b.reshape((steps,) + sb))


def draw_unary(case: Unary, n: int) -> np.ndarray:
    """Every value of the input type, once, in rows of n (the last row padded with the zero point)."""
    lo, hi = _INFO[case.dtype]
    values = np.arange(lo, hi + 1)
    rows = math.ceil(values.size / n)
    padded = np.full(rows * n, case.q1[1])
    padded[: values.size] = values
    return padded.reshape(rows, 1, n)
