"""The model builders, data and harnesses that edgernn's tests and benchmarks share, as numpy.testing is numpy's.

Nothing else in edgernn imports this package, and importing it imports no TensorFlow: the model builders import
Keras inside their functions. A few helpers read files of a source checkout (the C step driver in tests/c, the toy
model and the trained models in tests/fixtures), so they work where edgernn is installed from a checkout
(``pip install -e .``).
"""

from __future__ import annotations

from pathlib import Path

# the checkout's tests folder: the C drivers and the fixtures some helpers read
TESTS = Path(__file__).resolve().parents[2] / "tests"
