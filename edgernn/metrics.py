"""The error of values against the float model's: rmse, mae, max_abs, l2r (relative L2) and cos, from running
sums. One definition for every place that measures it: ``edgernn validate`` (device against the float model),
and ``--quant auto``'s plan (a quantized step model against the float one)."""

from __future__ import annotations

import math

import numpy as np


class ErrorSums:
    """Running sums for rmse, mae, max_abs, l2r and cos of device values against float values."""

    def __init__(self):
        self.n = 0
        self.sq = self.abs = self.kk = self.dd = self.dk = 0.0
        self.max = 0.0

    def update(self, device: np.ndarray, want: np.ndarray) -> None:
        d = np.asarray(device, np.float64).ravel()
        k = np.asarray(want, np.float64).ravel()
        if not d.size:
            return
        err = d - k
        self.n += d.size
        self.sq += float(np.dot(err, err))
        self.abs += float(np.abs(err).sum())
        self.max = max(self.max, float(np.abs(err).max()))
        self.kk += float(np.dot(k, k))
        self.dd += float(np.dot(d, d))
        self.dk += float(np.dot(d, k))

    def result(self) -> dict:
        if not self.n:
            return {"rmse": None, "mae": None, "max_abs": None, "l2r": None, "cos": None}
        norm_k, norm_d = math.sqrt(self.kk), math.sqrt(self.dd)
        return {"rmse": math.sqrt(self.sq / self.n), "mae": self.abs / self.n, "max_abs": self.max,
                "l2r": math.sqrt(self.sq) / norm_k if norm_k else math.inf,
                "cos": self.dk / (norm_d * norm_k) if norm_d and norm_k else 0.0}
