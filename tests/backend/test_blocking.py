"""The blocked int8 weights layout (edgernn/backend/lowering/blocking.py) that edgernn_dot.h walks."""

from __future__ import annotations

import numpy as np
import pytest

from edgernn.backend.lowering.blocking import blocked_rows, unit_major_rows


def _walk(flat: np.ndarray, n_rows: int, n: int, x: np.ndarray) -> np.ndarray:
    """The dot products as edgernn_fully_connected_s8 walks the layout: blocks of 8, one of 4, single rows;
    inside a block, groups of 4 inputs (the last of n mod 4), one row's group after the other."""
    out, pos, r = [], 0, 0
    sizes = [8] * (n_rows // 8) + ([4] if n_rows % 8 >= 4 else [])
    for size in sizes:
        acc = np.zeros(size, dtype=np.int64)
        for k in range(0, n, 4):
            g = min(4, n - k)
            for row in range(size):
                acc[row] += int(np.dot(flat[pos + row * g:pos + row * g + g].astype(np.int64), x[k:k + g]))
            pos += size * g
        out.extend(acc.tolist())
        r += size
    for _ in range(r, n_rows):
        out.append(int(np.dot(flat[pos:pos + n].astype(np.int64), x)))
        pos += n
    assert pos == flat.size
    return np.array(out)


@pytest.mark.parametrize("n_rows,n", [(1, 1), (3, 5), (4, 4), (8, 6), (13, 7), (16, 64), (21, 70), (256, 6)])
def test_the_walk_over_the_blocked_layout_gives_every_dot_product(n_rows, n):
    rng = np.random.default_rng(n_rows * 100 + n)
    w = rng.integers(-127, 128, (n_rows, n)).astype(np.int8)
    x = rng.integers(-128, 128, n).astype(np.int64)
    flat = blocked_rows(w)
    assert flat.size == w.size and flat.dtype == np.int8
    assert np.array_equal(_walk(flat, n_rows, n, x), w.astype(np.int64) @ x)


def test_rows_from_a_multiple_of_8_start_where_row_major_ones_do():
    """A team's sub-range [r0, r1) advances w by r0 * n, as in row-major order."""
    w = np.arange(24 * 5).reshape(24, 5).astype(np.int8)
    assert np.array_equal(blocked_rows(w)[8 * 5:], blocked_rows(w[8:]))


def test_unit_major_rows_put_a_units_four_gates_together():
    order = unit_major_rows(3)
    assert order.tolist() == [0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11]
