"""The error --quant auto's --max-error bounds: the l2r over the sequences together, and that which 3 in 4 of them
keep on their own."""

from __future__ import annotations

import numpy as np
import pytest

from edgernn.tflite import mixed

STEPS, OUTPUTS = 50, 2


def _outputs(amplitudes, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(STEPS)[None, :, None]
    phase = rng.uniform(0, 6, (len(amplitudes), 1, OUTPUTS))
    return (np.asarray(amplitudes, np.float64)[:, None, None] * np.sin(0.1 * t + phase)).astype(np.float32)


# (sequences' amplitudes, the error added to each: absolute noise, the same on every sequence, so the
# quiet sequences' own l2r is larger; which term decides; the expected error)
CASES = {
    # equal sequences, equal noise: the two terms agree
    "alike": ([1.0] * 8, 0.01, "either"),
    # one loud sequence among quiet ones: it carries the whole l2r, which then says little about the quiet ones
    "one loud": ([10.0] + [1.0] * 7, 0.01, "sequences"),
    # one quiet sequence of eight, far above the rest on its own: a quarter may miss, so it does not decide
    "one quiet": ([1.0] * 7 + [0.05], 0.001, "not the quiet one"),
    # a sequence whose float output is all zero has no l2r of its own: left out, not infinite
    "one silent": ([1.0] * 7 + [0.0], 0.01, "either"),
}


@pytest.mark.parametrize("name", CASES)
def test_budget_error_is_the_larger_of_the_whole_and_three_in_four_sequences(name):
    amplitudes, noise, decides = CASES[name]
    want = _outputs(amplitudes)
    got = want + np.random.default_rng(1).normal(0, noise, want.shape).astype(np.float32)
    whole = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    each = sorted(float(np.linalg.norm(g - w) / np.linalg.norm(w)) for g, w in zip(got, want) if np.any(w))
    assert mixed.l2r(got, want) == pytest.approx(whole, rel=1e-6)
    assert mixed.sequence_l2r(got, want) == pytest.approx(np.quantile(each, mixed.SEQUENCE_QUANTILE), rel=1e-6)
    error = mixed.budget_error(got, want)
    assert np.isfinite(error) and error == max(mixed.l2r(got, want), mixed.sequence_l2r(got, want))
    if decides == "sequences":
        assert mixed.sequence_l2r(got, want) > 2 * whole
    elif decides == "not the quiet one":
        assert error < each[-1] / 5 and error == pytest.approx(whole, rel=0.3)
    else:
        assert mixed.sequence_l2r(got, want) == pytest.approx(whole, rel=0.3)


def test_a_single_sequence_is_its_own_l2r():
    want = _outputs([1.0])
    got = want + 0.01
    assert mixed.sequence_l2r(got, want) == pytest.approx(mixed.l2r(got, want), rel=1e-6)
    assert mixed.budget_error(got, want) == pytest.approx(mixed.l2r(got, want), rel=1e-6)
