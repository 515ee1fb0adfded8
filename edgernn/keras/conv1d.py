"""A causal Conv1D as a stateful step: its past inputs are a state, like an RNN's.

At step t a causal convolution of kernel size k and dilation d reads x[t-(k-1)d .. t]. The state
``<layer>.buf`` holds the last (k-1)·d inputs, oldest first, flattened to ((k-1)·d·C_in,). One step:

    window = concat(buf, x_t)                  ((k-1)·d + 1 rows of C_in)
    taps   = every d-th row of window          (k rows, the same rows the sequence conv reads)
    y_t    = act(taps_flat @ W.reshape(k·C_in, C_out) + b)
    buf'   = window without its first row      (a shift)

The zero initial state is the zero padding Keras puts on the left of a causal conv, so the step model
equals the sequence model from t = 0. In TFLite this is CONCATENATION, RESHAPE, STRIDED_SLICE and
FULLY_CONNECTED. The quantizer gives a concatenation's operands one scale and ties each state's input
to its output, so buf, the window and buf' share one quantization: the shift moves bytes and stays exact
in int8 and int16.

The shift costs copies of the whole buffer every step (into the window, out of it, back into the state);
a ring buffer would avoid them but needs an integer write index as a state, which does not quantize.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

CONV_KINDS = {"Conv1D"}


@dataclass
class CausalConv:
    """A Conv1D(padding="causal", strides=1) run one step at a time; it sits in Plan.recurrent with the RNNs."""

    layer: Any
    kernel_size: int
    dilation: int
    channels_in: int
    channels_out: int
    kind: str = "Conv1D"
    return_sequences: bool = True
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.layer.name

    @property
    def units(self) -> int:
        return self.channels_out

    @property
    def history(self) -> int:
        """How many past inputs a step reads: (k-1)·d."""
        return (self.kernel_size - 1) * self.dilation

    @property
    def state_names(self) -> list[str]:
        return ["buf"] if self.history else []

    @property
    def state_sizes(self) -> list[int]:
        return [self.history * self.channels_in] if self.history else []

    def public_state_names(self) -> list[str]:
        return [f"{self.name}.{n}" for n in self.state_names]


def _int(value: Any) -> int:
    return int(value[0]) if isinstance(value, (list, tuple)) else int(value)


def causal_conv(layer: Any) -> CausalConv | str:
    """The step form of a Conv1D, or the reason it has none."""
    padding = str(getattr(layer, "padding", "valid")).lower()
    strides, dilation, kernel = _int(layer.strides), _int(layer.dilation_rate), _int(layer.kernel_size)
    if strides != 1:
        return (f"strides={strides} keeps one output step in {strides}, while the device gives one output "
                "for every input step")
    if padding == "same":
        return "padding='same' centres its kernel, so each output needs future steps; use padding='causal'"
    if padding == "valid":
        late = (kernel - 1) * dilation
        return (f"padding='valid' drops the first {late} steps, so its output starts {late} steps after the "
                "input; rebuild it with padding='causal' (same weights) to stream it")
    if padding != "causal":
        return f"padding={padding!r} is not one edgernn streams; use padding='causal'"
    if str(getattr(layer, "data_format", "channels_last")) != "channels_last":
        return "data_format='channels_first' puts the time axis last; save it channels_last"
    if int(getattr(layer, "groups", 1) or 1) != 1:
        return f"groups={layer.groups} is not supported; edgernn streams groups=1"
    kernel_weights = np.asarray(layer.kernel)
    notes = [f"causal, k={kernel}, dilation={dilation}: the last {(kernel - 1) * dilation} inputs are its state"]
    return CausalConv(layer=layer, kernel_size=kernel, dilation=dilation,
                      channels_in=int(kernel_weights.shape[1]), channels_out=int(kernel_weights.shape[2]),
                      notes=notes if kernel > 1 else ["k=1: a per-step matrix product, no state"])


def _weights(conv: CausalConv) -> tuple[np.ndarray, np.ndarray | None]:
    kernel = np.asarray(conv.layer.kernel, np.float32)  # (k, C_in, C_out)
    matrix = kernel.reshape(conv.kernel_size * conv.channels_in, conv.channels_out)
    bias = np.asarray(conv.layer.bias, np.float32) if getattr(conv.layer, "use_bias", True) else None
    return matrix, bias


def _step_layer_class(K: Any) -> type:
    """A Keras layer (of the model's own flavour) computing one step; made once per flavour."""
    cached = _STEP_CLASSES.get(id(K))
    if cached is not None:
        return cached
    import tensorflow as tf

    class CausalConvStep(K.layers.Layer):
        def __init__(self, conv: CausalConv, **kwargs):
            super().__init__(name=f"{conv.name}_step", **kwargs)
            self.conv = conv
            self.matrix, self.bias_values = _weights(conv)
            self.act = conv.layer.activation

        def call(self, x, buf=None):
            conv = self.conv
            c_in = conv.channels_in
            window = x if buf is None else tf.concat([buf, x], axis=-1)
            if conv.dilation > 1:
                rows = tf.reshape(window, (-1, conv.history + 1, c_in))
                taps = tf.reshape(rows[:, ::conv.dilation, :], (-1, conv.kernel_size * c_in))
            else:
                taps = window
            y = tf.matmul(taps, tf.constant(self.matrix))
            if self.bias_values is not None:
                y = y + tf.constant(self.bias_values)
            y = self.act(y)
            if buf is None:
                return y
            return y, window[:, c_in:]

    _STEP_CLASSES[id(K)] = CausalConvStep
    return CausalConvStep


_STEP_CLASSES: dict[int, type] = {}


def conv_step(K: Any, conv: CausalConv, tensor: Any, states: list[Any]) -> tuple[Any, list[Any]]:
    """One step of the conv in the step model: (y_t, [buf']) from (x_t, [buf])."""
    step = _step_layer_class(K)(conv)
    if not states:
        return step(tensor), []
    y, new_buf = step(tensor, states[0])
    return y, [new_buf]
