"""edgernn/backend/requant_proof.py: the exact requantization reference (against TFLite's formulas written
out with exact fractions) and the build-time proof of the cheap `mul` + shift sequence (exhaustive over
small accumulator ranges)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from edgernn.backend import quantparams as qp
from edgernn.backend import requant_proof as rp

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def half_up(q: Fraction) -> int:
    return math.floor(q + Fraction(1, 2))


def half_away(q: Fraction) -> int:
    return int(math.copysign(math.floor(abs(q) + Fraction(1, 2)), q)) if q else 0


def by_fractions(acc: int, m: int, shift: int, rounding: str) -> int:
    """TFLite's three rescales from their definitions: one rounding half up of acc * m * 2^shift / 2^31; the
    doubling high multiply rounded half up, then a right shift rounded half up (ruy) or half away from zero
    (RoundingDivideByPOT)."""
    if rounding == rp.ROUND_ONCE:
        return half_up(Fraction(acc * m * 2 ** max(shift, 0), 2 ** (31 + max(-shift, 0))))
    a = acc * 2 ** max(shift, 0)
    a = (a + (1 << 31)) % (1 << 32) - (1 << 31)
    high = INT32_MAX if a == m == INT32_MIN else half_up(Fraction(a * m, 1 << 31))
    e = max(-shift, 0)
    if e == 0:
        return high
    return half_up(Fraction(high, 1 << e)) if rounding == rp.ROUND_TWICE_UP else half_away(Fraction(high, 1 << e))


CASES = [(m, s, a) for m in (1 << 30, 1518500250, INT32_MAX) for s in (-31, -10, -3, -2, -1, 0, 2)
         for a in (0, 1, -1, 2, -2, 3, -3, INT32_MIN, INT32_MAX, 1 << 10, -(1 << 10), 3 << 9, -(3 << 9), 12345)]


@pytest.mark.parametrize("rounding", [rp.ROUND_ONCE, rp.ROUND_TWICE_UP, rp.ROUND_MBQM])
def test_exact_rescale_is_tflites(rounding):
    bad = [(m, s, a) for (m, s, a) in CASES
           if (s <= 0 or abs(a) < 1 << 20) and rp.exact_rescale_int(a, m, s, rounding) != by_fractions(a, m, s, rounding)]
    assert not bad


def test_mbqm_is_quantparams():
    assert all(rp.exact_rescale_int(a, m, s, rp.ROUND_MBQM) == qp.mbqm(a, m, s)
               for (m, s, a) in CASES if s <= 0 or abs(a) < 1 << 20)


# (lo, hi, real scale, rounding, zero point, act_min, act_max): small ranges, checked exhaustively
RANGES = [
    (-300, 300, 0.37, rp.ROUND_ONCE, 0, -128, 127),
    (-5000, 4000, 0.021, rp.ROUND_ONCE, -7, -128, 127),
    (-5000, 4000, 0.021, rp.ROUND_TWICE_UP, 3, -128, 127),
    (0, 4000, 0.021, rp.ROUND_MBQM, 0, -128, 127),  # one sign: MBQM's ties go away from zero
    (-1000, 6000, 0.029, rp.ROUND_ONCE, 5, 5, 127),
    (-64, 64, 1.9, rp.ROUND_TWICE_UP, 0, -128, 127),
    (0, 0, 0.5, rp.ROUND_ONCE, 0, -128, 127),
]


@pytest.mark.parametrize("lo,hi,real,rounding,zp,amin,amax", RANGES)
def test_reduced_rescale_is_exact_over_the_range(lo, hi, real, rounding, zp, amin, amax):
    m, s = qp.quantize_multiplier(real)
    r = rp.reduced_rescale(lo, hi, m, s, rounding, zp, amin, amax)
    assert r is not None, "no reduced multiplier found for a small range"
    assert rp.check_reduced(lo, hi, r, m, s, rounding, zp, amin, amax)


def test_reduced_rescale_refuses_what_it_cannot_prove():
    """A wide range at a fine scale: no 32-bit product keeps enough bits, and none is claimed."""
    m, s = qp.quantize_multiplier(0.0021303)
    assert rp.reduced_rescale(-(1 << 21), 1 << 21, m, s, rp.ROUND_ONCE, -7, -128, 127) is None


def test_accumulator_range():
    w = np.array([[1, -2, 3], [0, 0, 0]], dtype=np.int8)
    lo, hi = rp.accumulator_range(w, np.array([10, -5]))
    assert lo.tolist() == [10 - 128 - 254 - 384, -5] and hi.tolist() == [10 + 127 + 256 + 381, -5]
