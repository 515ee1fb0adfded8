"""The blocked layout of int8 weight rows that the dot products of edgernn_dot.h walk.

Rows go in blocks of 8, then one block of 4 if 4 or more are left, then one by one (row-major). Inside a
block of R rows and n inputs, the inputs go by groups of 4 (the last holds n mod 4): group k holds
w[r][4k:4k+4] for r = 0..R-1, one row after the other. Each block keeps R * n bytes, so rows from a
multiple of 8 on start where they would in row-major order. The .tflite weights are not changed: this is
the order in weights.c only.
"""

from __future__ import annotations

import numpy as np

BLOCK_ROWS = (8, 4)   # the row blocks of edgernn_dot8_s8 and edgernn_dot4_s8, largest first
GROUP_BLOCK_ROWS = (4,)   # edgernn_fully_connected_group_s8's: a small cell's heads, split by the team in blocks of 4


def _block(rows: np.ndarray) -> np.ndarray:
    """One block of R rows (R x n), input groups of 4 interleaved."""
    n = rows.shape[1]
    parts = [rows[:, k:k + 4].reshape(-1) for k in range(0, n, 4)]
    return np.concatenate(parts) if parts else rows.reshape(-1)


def blocked_rows(w: np.ndarray, sizes: tuple[int, ...] = BLOCK_ROWS) -> np.ndarray:
    """The 2-D weights w (rows x inputs) flattened in the blocked layout (``sizes``: its blocks, largest first;
    the int8 FULLY_CONNECTED group's are ``GROUP_BLOCK_ROWS``)."""
    w = np.asarray(w)
    n_rows = w.shape[0]
    out, r = [], 0
    for size in sizes:
        while n_rows - r >= size:
            out.append(_block(w[r:r + size]))
            r += size
            if size != sizes[0]:
                break
    out.append(w[r:].reshape(-1))
    return np.concatenate(out)


def unit_major_rows(n_cell: int) -> np.ndarray:
    """Row order of the fused LSTM's gate weights: unit u's four gates (i, f, c, o) together, so that a
    block of 8 rows is two units' gates and a block of 4 one unit's (gate-major row g * n_cell + u in)."""
    return np.array([g * n_cell + u for u in range(n_cell) for g in range(4)], dtype=np.int64)
