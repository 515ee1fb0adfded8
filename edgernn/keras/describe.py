"""The rows of ``edgernn inspect`` (and of the manifest's ``layers``): how each layer of a plan streams, and what it costs."""

from __future__ import annotations

from typing import Any

import numpy as np

from edgernn.keras.conv1d import CausalConv
from edgernn.keras.decompose import Plan, StepLayer
from edgernn.keras.fused_rebuild import Diagnosis


def _params(layer: Any) -> int:
    try:
        return int(layer.count_params())
    except Exception:  # an unbuilt layer
        return 0


def _matrix_macs(layer: Any) -> int:
    """MACs per step of a layer: every 2-D weight is one multiply-accumulate per element per step."""
    total = 0
    for weight in layer.weights:
        shape = tuple(int(d) for d in weight.shape)
        if len(shape) == 2:
            total += shape[0] * shape[1]
    return total


def _window(layer: Any) -> int:
    return int(np.prod(layer.kernel_size))


def _frame_macs(layer: Any, step: StepLayer) -> int | None:
    """MACs of one frame through a per-frame layer (plain or in TimeDistributed), or None when the layer is
    not one: a convolution's outputs each take a window of inputs; a Dense on a frame runs at every pixel."""
    inner = layer.layer if type(layer).__name__ == "TimeDistributed" else layer
    kind = type(inner).__name__
    if len(step.shape_in) < 2 or not step.shape_out:
        return None
    c_in, out = step.shape_in[-1], int(np.prod(step.shape_out))
    pixels = int(np.prod(step.shape_out[:-1]))
    if kind == "Conv2D":
        return out * _window(inner) * c_in // int(getattr(inner, "groups", 1) or 1)
    if kind == "DepthwiseConv2D":
        return out * _window(inner)
    if kind == "SeparableConv2D":
        depth = pixels * c_in * int(inner.depth_multiplier) * _window(inner)
        return depth + pixels * step.shape_out[-1] * c_in * int(inner.depth_multiplier)
    if kind == "Dense":
        return pixels * _matrix_macs(inner)
    return 0 if kind in ("MaxPooling2D", "AveragePooling2D", "GlobalAveragePooling2D", "GlobalMaxPooling2D") else None


def _ltc_unfolds(rnn) -> int:
    return int(getattr(rnn.cell, "_ode_unfolds", 1) or 1)


def layer_rows(plan: Plan, diagnosis: Diagnosis | None = None) -> list[dict]:
    """One row per layer; an RNN layer's path is "fused" or "step" as ``diagnosis`` decided. ``output_shape``
    is one step's output (a frame's before the first RNN), ``activation_elements`` its element count."""
    paths = {p.layer: p for p in diagnosis.paths} if diagnosis else {}
    rows = []
    recurrent = {id(r.layer): r for r in plan.recurrent}
    steps = {id(s.layer): s for s in [*plan.pre, *plan.head, *(s for b in plan.between.values() for s in b)]}
    for role, layer in plan.order:
        row = {"name": layer.name, "class": type(layer).__name__, "role": role, "params": _params(layer),
               "macs_per_step": _matrix_macs(layer), "states": [], "path": "", "why": "",
               "output_shape": [], "activation_elements": 0}
        if role == "rnn":
            rnn = recurrent[id(layer)]
            choice = paths.get(rnn.name)
            row["path"] = choice.path if choice else "step"
            if isinstance(rnn, CausalConv):
                first = "one step of the convolution, its past inputs as state (input and output)"
                row["macs_per_step"] = rnn.kernel_size * rnn.channels_in * rnn.channels_out
            elif row["path"] == "fused":
                first = "one UNIDIRECTIONAL_SEQUENCE_LSTM op per step, state in its variable tensors"
            else:
                first = "cell called once per step, state as input and output"
                if choice:
                    first = f"{first} (step, because {choice.why})"
            row["why"] = "; ".join([first, *rnn.notes])
            row["states"] = [{"name": n, "size": s} for n, s in zip(rnn.public_state_names(), rnn.state_sizes)]
            row["output_shape"], row["activation_elements"] = [rnn.units], rnn.units
            if rnn.kind == "LTC":
                row["macs_per_step"] *= _ltc_unfolds(rnn)
        elif role == "dropped":
            row["path"] = "dropped"
            row["why"] = "identity at inference"
        else:
            step = steps[id(layer)]
            row["path"] = {"pre": "per step", "mid": "per step", "head-step": "per step", "head-final": "once, after the last step"}[role]
            row["why"] = step.note or ("acts on the features of one step" if role != "head-final" else "runs on the last output")
            row["output_shape"], row["activation_elements"] = list(step.shape_out), int(np.prod(step.shape_out))
            macs = _frame_macs(layer, step)
            if macs is not None:
                row["macs_per_step"] = macs
        rows.append(row)
    return rows
