"""A cheaper int8 requantization, proved at build time for one output row.

The exact int8 requantization of an int32 accumulator needs the high word of a 32 x 32-bit product
(`mulh`, which GVSOC's model of GAP8 charges 5 cycles as a stall of the pipeline). A reduced multiplier
m' small enough that acc * m' fits in 32 bits gives a 1-cycle `mul`, then one rounding shift:
g(acc) = clamp((acc * m' + c) >> s, act_min, act_max), c holding the rounding and the output zero point.
That is not the exact function by construction, so it is used only for a row where it is proved equal
to the exact one for every accumulator the row can reach.

The proof: a row's accumulator is bias + sum_i w[i] * x[i] with every x[i] an int8 (the input's zero
point folded into the bias), so it lies in [lo, hi] = bias + sum_i min/max(-128 w[i], 127 w[i]). Both the
exact requantization and g are nondecreasing in acc, so they agree on [lo, hi] exactly when, for each
output value v in (act_min, act_max], they cross v at the same accumulator: the exact function's
threshold t_v (the least acc reaching v) is found by bisection, and g reaches v at t_v but not at t_v - 1
(a threshold outside [lo, hi] bounds g at the end of the range instead). The thresholds are at most 255
linear constraints on c for a given (m', s); `reduced_rescale` looks for a solution among the m' next to
the exact scale and the largest s that keeps acc * m' + c in int32 over the range.

Nothing here is used by the generated code yet: `bench/requant_coverage.py` measures how many rows of
the test models the proof covers (docs/ops.md, "GAP8: the requantization").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1

# how the exact function rounds (the FULLY_CONNECTED kernel's `rounding`, and TFLite's
# MultiplyByQuantizedMultiplier for the other ops)
ROUND_ONCE = "once"          # LiteRT's reference FULLY_CONNECTED: (acc*m + 2^(30+e)) >> (31+e)
ROUND_TWICE_UP = "twice_up"  # its builtin one (ruy): high multiply rounded, then a right shift, halves up
ROUND_MBQM = "mbqm"          # MultiplyByQuantizedMultiplier: two roundings, the second half away from zero


def _wrap32(v: int) -> int:
    return (v + (1 << 31)) % (1 << 32) - (1 << 31)


def exact_rescale_int(acc: int, multiplier: int, shift: int, rounding: str) -> int:
    """The exact rescale of one int32 accumulator (before the zero point and the clamp), value for value the
    C of templates/kernels/edgernn_fixedpoint.h: edgernn_mbqm_single (ROUND_ONCE), edgernn_mbqm_double_up
    (ROUND_TWICE_UP), edgernn_mbqm (ROUND_MBQM)."""
    m = int(multiplier)
    if rounding == ROUND_ONCE:
        return (acc * m + (1 << (30 - shift))) >> (31 - shift)
    a, e = (_wrap32(acc << shift), 0) if shift > 0 else (acc, -shift)
    high = INT32_MAX if (a == INT32_MIN and m == INT32_MIN) else (a * m + (1 << 30)) >> 31
    if e == 0:
        return high
    if rounding == ROUND_TWICE_UP:
        return (high + (1 << (e - 1))) >> e
    if rounding == ROUND_MBQM:
        return (high + (1 << (e - 1)) - (1 if high < 0 else 0)) >> e
    raise ValueError(f"unknown rounding {rounding!r}")


def exact_requantize_int(acc: int, multiplier: int, shift: int, rounding: str, zero_point: int, act_min: int,
                         act_max: int) -> int:
    """The int8 output: the rescale, the zero point, the clamp."""
    y = exact_rescale_int(int(acc), multiplier, shift, rounding) + zero_point
    return min(max(y, act_min), act_max)


def exact_requantize(acc, multiplier: int, shift: int, rounding: str, zero_point: int, act_min: int,
                     act_max: int) -> np.ndarray:
    return np.array([exact_requantize_int(int(a), multiplier, shift, rounding, zero_point, act_min, act_max)
                     for a in np.asarray(acc).ravel()], dtype=np.int64)


def reduced_requantize(acc, m: int, c: int, s: int, act_min: int, act_max: int) -> np.ndarray:
    """The cheap sequence: clamp((acc * m + c) >> s) in 64-bit arithmetic (the proof keeps it in int32)."""
    a = np.asarray(acc, dtype=np.int64)
    return np.clip(np.right_shift(a * m + c, s), act_min, act_max)


def accumulator_range(w: np.ndarray, bias: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi] of each row's accumulator over every int8 input: w is (rows, n_in) int8, bias the folded
    int32 bias (bias + input_offset * sum w)."""
    w = w.astype(np.int64)
    lo = bias.astype(np.int64) + np.minimum(-128 * w, 127 * w).sum(axis=1)
    hi = bias.astype(np.int64) + np.maximum(-128 * w, 127 * w).sum(axis=1)
    return lo, hi


def _thresholds(lo: int, hi: int, exact) -> dict[int, int]:
    """For each output value v that the exact function reaches strictly after lo on [lo, hi], the least
    acc in [lo, hi] giving at least v (bisection: the function is nondecreasing)."""
    y_lo, y_hi = exact(lo), exact(hi)
    out = {}
    for v in range(y_lo + 1, y_hi + 1):
        a, b = lo, hi  # exact(a) < v <= exact(b)
        while b - a > 1:
            mid = (a + b) // 2
            if exact(mid) >= v:
                b = mid
            else:
                a = mid
        out[v] = b
    return out


@dataclass(frozen=True)
class Reduced:
    m: int  # the reduced multiplier, acc * m in int32 over the row's range
    c: int  # added before the shift: the rounding and the output zero point
    s: int  # the arithmetic right shift


def reduced_rescale(lo: int, hi: int, multiplier: int, shift: int, rounding: str, zero_point: int,
                    act_min: int, act_max: int, window: int = 4) -> Reduced | None:
    """A (m, c, s) with clamp((acc * m + c) >> s) equal to the exact requantization for every acc in
    [lo, hi] and acc * m + c in int32 there, or None (the row keeps the exact sequence)."""
    if multiplier <= 0:
        return None

    def exact(a: int) -> int:
        return exact_requantize_int(a, multiplier, shift, rounding, zero_point, act_min, act_max)

    lo, hi = int(lo), int(hi)
    y_lo, y_hi = exact(lo), exact(hi)
    if y_lo == y_hi:  # a constant output: m = 0 and c gives it
        return Reduced(0, y_lo, 0)
    th = _thresholds(lo, hi, exact)
    vs = np.array(sorted(th), dtype=object)
    ts = np.array([th[v] for v in sorted(th)], dtype=object)
    scale = multiplier / 2.0 ** (31 - shift)  # the real factor the exact function applies
    amax = max(abs(lo), abs(hi), 1)
    s_max = int(np.floor(np.log2((1 << 30) / (amax * scale))))
    for s in range(min(s_max, 31), max(s_max - 3, 0) - 1, -1):
        ideal = scale * (1 << s)
        for m in sorted({int(np.floor(ideal)) + d for d in range(-window, window + 1)}, key=lambda k: abs(k - ideal)):
            if m <= 0:
                continue
            # exact(acc) >= v  <=>  acc >= t_v, inside the range
            lower = max(int(x) for x in vs * (1 << s) - ts * m)               # t_v*m + c >= v*2^s
            upper = min(int(x) for x in vs * (1 << s) - (ts - 1) * m) - 1     # (t_v-1)*m + c < v*2^s
            # the ends of the range: g(lo) no higher than y_lo, g(hi) no lower than y_hi (clamp aside)
            if y_lo > act_min:
                lower = max(lower, y_lo * (1 << s) - lo * m)
            upper = min(upper, (y_lo + 1) * (1 << s) - lo * m - 1)
            lower = max(lower, y_hi * (1 << s) - hi * m)
            if y_hi < act_max:
                upper = min(upper, (y_hi + 1) * (1 << s) - hi * m - 1)
            # int32 over the range
            lower = max(lower, INT32_MIN - min(lo * m, hi * m))
            upper = min(upper, INT32_MAX - max(lo * m, hi * m))
            if lower <= upper:
                c = (lower + upper) // 2
                return Reduced(m, c, s)
    return None


def check_reduced(lo: int, hi: int, r: Reduced, multiplier: int, shift: int, rounding: str, zero_point: int,
                  act_min: int, act_max: int) -> bool:
    """Exhaustive over [lo, hi]: the cheap sequence's every output is the exact one (tests, small ranges)."""
    acc = np.arange(lo, hi + 1, dtype=np.int64)
    t = acc * r.m + r.c
    if t.min() < INT32_MIN or t.max() > INT32_MAX:
        return False
    got = reduced_requantize(acc, r.m, r.c, r.s, act_min, act_max)
    want = exact_requantize(acc, multiplier, shift, rounding, zero_point, act_min, act_max)
    return bool(np.array_equal(got, want))
