"""The float reference: the original Keras model run on whole sequences, as its author runs it.

``convert`` holds the float step model against it, and ``validate`` the device when the build has no float twin.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from edgernn import tfenv


def keras_reference(model: Any, sequences: np.ndarray) -> np.ndarray | None:
    """The original model's own output on sequences, or None when its input length is fixed otherwise."""
    if len(model.inputs[0].shape) in (2, 4):   # a per-frame model with no time axis: each frame on its own
        frames = sequences.reshape(-1, *(int(d) for d in model.inputs[0].shape[1:]))
        with warnings.catch_warnings(), tfenv.native_stderr_captured():
            warnings.simplefilter("ignore")
            out = np.asarray(model(frames, training=False), np.float32)
        return out.reshape(*sequences.shape[:2], *out.shape[1:])
    batch, steps = model.inputs[0].shape[0], model.inputs[0].shape[1]
    if steps is not None and int(steps) != sequences.shape[1]:
        return None
    # a step may come flat (validate streams bytes): give it the model's own step shape, a frame's (H, W, C)
    sequences = sequences.reshape(*sequences.shape[:2], *(int(d) for d in model.inputs[0].shape[2:]))
    stateful = [layer for layer in model.layers if getattr(layer, "stateful", False)]
    if batch is not None and int(batch) != 1 and (stateful or int(batch) != len(sequences)):
        return None
    with warnings.catch_warnings(), tfenv.native_stderr_captured():
        warnings.simplefilter("ignore")
        if not stateful and (batch is None or int(batch) == len(sequences)):
            return np.asarray(model(sequences, training=False), np.float32)
        # a fixed batch of one (a stateful model): one sequence at a time, each from zero state
        outputs = []
        for sequence in sequences:
            for layer in stateful:
                layer.reset_states()
            outputs.append(np.asarray(model(sequence[None], training=False), np.float32))
        for layer in stateful:
            layer.reset_states()
        return np.concatenate(outputs)
