"""Build the single-step model ``(x_t, states...) -> (y_t, states'...)`` from a decomposed plan.

The step model reuses the trained layer objects themselves (so it shares their weights) and calls
each recurrent layer's cell once, with ``training=False``. It is built with the same Keras flavour
as the model it comes from.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from edgernn.keras.conv1d import CausalConv, conv_step
from edgernn.keras.decompose import Plan, layer_norm_without_neg


@dataclass
class StepModel:
    keras_model: Any
    # Keras-side input names (valid identifiers) -> public names, in Keras input order.
    input_names: list[tuple[str, str]]
    # Public output names, in Keras output order.
    output_names: list[str]
    state_names: list[str]


def _flatten(structure: Any) -> list[Any]:
    if isinstance(structure, (list, tuple)):
        out = []
        for item in structure:
            out.extend(_flatten(item))
        return out
    return [structure]


def _nest_like(cell: Any, flat: list[Any]) -> list[Any]:
    """States in the nesting the cell's state_size declares (MixedMemoryRNN nests its inner cell's)."""
    size = cell.state_size
    if isinstance(size, int):
        return [flat[0]]
    return list(flat)


def _name_cell(rnn) -> None:
    """Cells of stacked layers share default names (``gru_cell``); a functional model needs them unique."""
    wanted = f"{rnn.name}_cell"
    for attr in ("name", "_name"):
        try:
            setattr(rnn.cell, attr, wanted)
        except AttributeError:
            continue


def _call_cell(rnn, tensor: Any, states: list[Any]) -> tuple[Any, list[Any]]:
    _name_cell(rnn)
    out = rnn.cell(tensor, _nest_like(rnn.cell, states), training=False)
    if isinstance(out, (list, tuple)) and len(out) == 2:
        output, new_states = out
    else:  # pragma: no cover - every Keras cell returns (output, states)
        raise TypeError(f"cell of {rnn.name} returned {type(out).__name__}")
    new_flat = _flatten(new_states)
    if len(new_flat) != len(states):
        raise TypeError(f"cell of {rnn.name} returned {len(new_flat)} states for {len(states)}")
    return output, new_flat


def build_step_model(plan: Plan, keras_module: Any) -> StepModel:
    K = keras_module
    x_in = K.Input(shape=plan.input_shape, batch_size=1, name="x")  # one step: a vector or a frame
    inputs = [x_in]
    input_names = [("x", "x")]
    state_inputs = {}
    for index, (public, size, _rnn) in enumerate(plan.state_specs):
        key = f"state_{index}"
        tensor = K.Input(shape=(size,), batch_size=1, name=key)
        state_inputs[public] = tensor
        inputs.append(tensor)
        input_names.append((key, public))

    z = _through_graph(plan, K, x_in) if plan.branched else x_in
    for step in ([] if plan.branched else plan.pre):
        z = step.apply(K, z)
    new_states = []
    for rnn in plan.recurrent:
        states = [state_inputs[name] for name in rnn.public_state_names()]
        if isinstance(rnn, CausalConv):
            z, updated = conv_step(K, rnn, z, states)
        else:
            z, updated = _call_cell(rnn, z, states)
        for step in plan.between.get(rnn.name, ()):
            z = step.apply(K, z)
        new_states.extend(updated)
    if plan.head_per_step:
        for step in plan.head:
            z = step.apply(K, z)

    state_names = [public for public, _, _ in plan.state_specs]
    model = K.Model(inputs=inputs, outputs=[z, *new_states], name="edgernn_step")
    return StepModel(keras_model=model, input_names=input_names, output_names=["y", *state_names],
                     state_names=state_names)


def _through_graph(plan: Plan, K: Any, x: Any) -> Any:
    """One frame through a branching per-frame graph (a stateless model's, or a recurrent model's front end): each layer of the model's own graph applied as its step
    layer (a dropped one as the identity), so that the branches and their joins stay as the model has them."""
    steps = {id(step.layer): step for step in plan.pre}

    def operation_fn(layer: Any):
        step = steps.get(id(layer))

        def call(*args: Any, **kwargs: Any) -> Any:
            return args[0] if step is None else step.apply(K, args[0])
        return call

    graph = plan.model
    if plan.recurrent:   # a branching front end: the model's graph up to the first stateful layer
        graph = K.Model(plan.model.inputs, plan.recurrent[0].layer.input)
    return graph._run_through_graph(x, operation_fn=operation_fn)


def build_head_model(plan: Plan, keras_module: Any) -> Any | None:
    """The layers that run once after the last step, as a model ``h -> y``; None if they run per step, or if
    there are none (the last step's output is the model's: an identity head, which TF's 16x8 quantizer cannot
    quantize, would only copy it)."""
    if plan.head_per_step or not plan.head:
        return None
    K = keras_module
    h_in = K.Input(shape=(plan.recurrent[-1].units,), batch_size=1, name="h")
    z = h_in
    for step in plan.head:
        z = step.apply(K, z)
    return K.Model(inputs=[h_in], outputs=[z], name="edgernn_head")


def _ode_solver_without_division(self, inputs, state, elapsed_time):
    """ncps' LTCCell._ode_solver with its division numerator / (denominator + eps) written as
    numerator * r * r, r = rsqrt(denominator + eps): the same value (the denominator is positive: cm, gleak
    and the synapses' weighted sigmoids), in ops TF's 16x8 quantizer quantizes (RSQRT, MUL), where it has no
    DIV. The rest is ncps' own code, op for op."""
    import keras

    v_pre = state
    sensory_w_activation = self._params["sensory_w"] * self._sigmoid(
        inputs, self._params["sensory_mu"], self._params["sensory_sigma"])
    sensory_w_activation *= self._params["sensory_sparsity_mask"]
    sensory_rev_activation = sensory_w_activation * self._params["sensory_erev"]
    w_numerator_sensory = keras.ops.sum(sensory_rev_activation, axis=1)
    w_denominator_sensory = keras.ops.sum(sensory_w_activation, axis=1)
    cm_t = self._params["cm"] / keras.ops.cast(elapsed_time / self._ode_unfolds, dtype="float32")
    for _ in range(self._ode_unfolds):
        w_activation = self._params["w"] * self._sigmoid(v_pre, self._params["mu"], self._params["sigma"])
        w_activation *= self._params["sparsity_mask"]
        rev_activation = w_activation * self._params["erev"]
        w_numerator = keras.ops.sum(rev_activation, axis=1) + w_numerator_sensory
        w_denominator = keras.ops.sum(w_activation, axis=1) + w_denominator_sensory
        numerator = cm_t * v_pre + self._params["gleak"] * self._params["vleak"] + w_numerator
        denominator = cm_t + self._params["gleak"] + w_denominator
        r = keras.ops.rsqrt(denominator + self._epsilon)
        v_pre = numerator * (r * r)
    return v_pre


class ltc_without_division:
    """While active, every Keras 3 ncps LTC cell of ``plan`` solves its ODE without a division
    (``_ode_solver_without_division``), so a step model traced then holds RSQRT and MUL where the cell
    divides: what makes an LTC quantizable in 16x8. Outside it the cells are ncps' own (the float self-check
    compares the step model with them)."""

    def __init__(self, plan: Plan, active: bool = True):
        cells = [getattr(layer, "cell", None) for layer in plan.recurrent] if active else []  # a Conv1D has none
        # an LTC with mixed_memory=True: ncps' MixedMemoryRNN (an LSTM cell's memory) around the LTCCell
        cells = [getattr(cell, "rnn_cell", cell) if type(cell).__name__ == "MixedMemoryRNN" else cell for cell in cells]
        self.cells = [cell for cell in cells if type(cell).__name__ == "LTCCell"
                      and type(cell).__module__.startswith("ncps.keras") and hasattr(type(cell), "_ode_solver")]

    def __enter__(self):
        import types

        for cell in self.cells:
            cell._ode_solver = types.MethodType(_ode_solver_without_division, cell)
        return self

    def __exit__(self, *exc):
        for cell in self.cells:
            cell.__dict__.pop("_ode_solver", None)
        return False


@contextlib.contextmanager
def sixteen_bit_forms(plan: Plan, active: bool):
    """While ``active``, the step model's forms that TF's 16x8 quantizer can take: an LTC divides by multiplying with
    rsqrt(d)^2 (TF's 16x8 has no DIV), and a LayerNormalization has no NEG (TF's 16x8 has none;
    docs/quantization.md)."""
    with ltc_without_division(plan, active=active), layer_norm_without_neg(active=active):
        yield
