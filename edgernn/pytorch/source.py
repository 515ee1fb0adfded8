"""What a PyTorch front door hands to the pipeline: the Keras twin and the source's own float outputs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np


@dataclass
class Source:
    """A model that was not Keras, mapped onto Keras.

    ``model``: the Keras 3 model computing what the source computes, with its weights.
    ``kind``: ``onnx`` or ``torch``; ``name``: what a message calls it (file name or module class).
    ``reference``: the source model run on (sequences, steps, *step shape) float32 inputs, giving what
    the Keras model gives on them (the same shape), from zero state.
    """

    model: Any
    kind: str
    name: str
    reference: Callable[[np.ndarray], np.ndarray]
