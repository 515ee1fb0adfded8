"""A build folder of the hand-written toy model (tests/fixtures/toy_model) and its Python twin as
validate's reference: validate and the link tested without TensorFlow."""

from __future__ import annotations

import functools
import importlib.util
import json
import shutil

import numpy as np

from edgernn.testing import TESTS
from edgernn.validate.run import ReferenceRun

TOY_MODEL = TESTS / "fixtures" / "toy_model"


@functools.cache
def _toy_twin():
    """The toy model's Python twin, toy.py beside its C (the link tests import it as ``toy``), loaded when first
    used: an installed edgernn without a checkout imports this module all the same."""
    spec = importlib.util.spec_from_file_location("edgernn_toy_twin", TOY_MODEL / "toy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class ToyReference:
    """The toy model's Python twin as validate's reference: one sequence, a chunk at a time."""

    def __init__(self, wrong_at: int | None = None):
        self.wrong_at = wrong_at  # make the reference disagree with the device at this step
        self.state = None
        self.done = 0

    def start(self):
        self.state, self.done = None, 0

    def advance(self, xq: np.ndarray) -> ReferenceRun:
        y, st = _toy_twin().run_toy(xq, self.state)
        if st:
            self.state = st[-1]
        if self.wrong_at is not None and self.done <= self.wrong_at < self.done + len(xq):
            y[self.wrong_at - self.done, 1] += 1
        self.done += len(xq)
        return ReferenceRun(y, np.frombuffer(b"".join(st), np.uint8).reshape(len(xq), -1))


toy_reference = ToyReference()


def make_toy_out(path, board="host", sha=None):
    """An OUT folder of the toy model for ``board``; its manifest names ``sha`` (default: the toy model's own)."""
    sha = _toy_twin().MODEL_SHA256 if sha is None else sha
    fw = path / "firmware"
    fw.mkdir(parents=True)
    for name in ("model.c", "model.h"):
        shutil.copy(TOY_MODEL / name, fw / name)
    q = lambda shape: {"shape": shape, "dtype": "int8", "scale": 1 / 64, "zero_point": 0}  # noqa: E731
    manifest = {"schema": "edgernn-build/1", "written": ["manifest.json", "firmware"], "board": board, "quant": "int8", "model_sha256": sha, "model_file": None,
                "inputs": [{"name": "x", **q([1, 3])}], "outputs": [{"name": "y", **q([1, 2])}],
                "states": [{"name": "toy.state", **q([1, 8])}], "sequence_output": "every_step",
                "macs_per_step": 12, "arena_bytes": 8, "weight_bytes": 0}
    (path / "manifest.json").write_text(json.dumps(manifest))
    return path
