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


def keras_name(text: str, fallback: str) -> str:
    """A name Keras takes for a model or layer, made from a file or class name."""
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in text).strip("_") or fallback
    return name if name[0].isalpha() else f"m_{name}"
