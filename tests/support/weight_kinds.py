"""Weight matrices of the shapes that rounding to int8 grids must handle, for the tests of two-part weights and of
error-compensated rounding."""

from __future__ import annotations

import numpy as np

KINDS = ["random", "a zero row", "one large weight a row", "tiny", "extremes of both signs"]


def weights(kind: str) -> np.ndarray:
    """A (6, 10) float32 matrix of ``kind``, seeded by its name."""
    rng = np.random.default_rng(len(kind))
    w = rng.normal(0, 0.3, size=(6, 10)).astype(np.float32)
    if kind == "a zero row":
        w[2] = 0
    elif kind == "one large weight a row":
        w[np.arange(6), rng.integers(0, 10, 6)] = 40.0
    elif kind == "tiny":
        w *= 1e-6
    elif kind == "extremes of both signs":
        w[:, 0], w[:, 1] = -w.max() * 3, w.max() * 3
    return w
