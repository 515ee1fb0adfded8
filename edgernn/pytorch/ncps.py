"""ncps.torch's CfC and LTC modules as Keras layers with the same weights.

ncps 1.0.1 ships each model twice, for torch and for Keras, and the two do not compute the same thing
everywhere (ncps/torch/*.py against ncps/keras/*.py):

- CfC, modes ``default`` and ``no_gate``: torch squashes ff1 and ff2 through tanh, Keras does not; torch's
  time gate is ``sigmoid(t_a * t + t_b)``, Keras's ``sigmoid(-t_a * t + t_b)``.
- wired CfC: torch masks ff1 and ff2 with the adjacency's magnitude, Keras with its sign as well; torch outputs
  the last layer's whole state, Keras only its first ``output_dim`` neurons.
- ``mixed_memory``: torch's LSTM reads (x, h) and its output becomes the CfC's or LTC's *state*, which still
  reads x; Keras's ``MixedMemoryRNN`` hands the LSTM's output to the inner cell as its *input*, beside the old
  state.
- LTC: with ``implicit_param_constraints`` (``ncps.torch.LTC``'s default) torch passes w, sensory_w, cm and
  gleak through softplus at every step; Keras uses them as stored.

So an LTC without mixed memory becomes ``ncps.keras.LTC`` (holding the values torch computes with), a pure CfC
cell ``ncps.keras``'s ``CfCCell``, and what Keras's ncps cannot express becomes the small cells below: they
keep ncps.keras's weights and compute torch's formulas. Every layer runs at timespan 1.0, as edgernn streams.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from edgernn.errors import EdgeRNNError

MAPPED = ("CfC", "LTC")
# Torch's backbone activation modules and the Keras activation computing the same function.
ACTIVATIONS = {"LeCun": "lecun_tanh", "SiLU": "silu", "ReLU": "relu", "Tanh": "tanh", "GELU": "gelu"}
# The LTC parameters torch passes through make_positive_fn (softplus or identity) before using them.
CONSTRAINED = ("w", "sensory_w", "cm", "gleak")


def is_ncps_module(module: Any) -> bool:
    """True for a module of ``ncps.torch`` (whether or not it can be mapped); torch is not imported."""
    return type(module).__module__.split(".")[:2] == ["ncps", "torch"]


def ncps_layers(module: Any, keras: Any) -> list:
    """Keras layers (built, weights set) computing what the ncps.torch CfC/LTC ``module`` computes on a
    batch_first (batch, time, features) input, from zero state.

    The list is applied in order: the recurrent layer, then a Dense for a CfC's ``proj_size``. The last layer
    returns sequences iff ``module.return_sequences``. The layers read batch-first input whatever the module's
    ``batch_first``: for a ``batch_first=False`` module the caller transposes its (time, batch, features) input.
    They compute the module's inference function: dropout is off, as after ``module.eval()``.
    """
    name = type(module).__name__
    if not is_ncps_module(module) or name not in MAPPED:
        raise EdgeRNNError(f"{name}: only ncps.torch's CfC and LTC sequence modules map onto Keras layers "
                           f"(this is {type(module).__module__}.{name})")
    rnn = _cfc(module, keras) if name == "CfC" else _ltc(module, keras)
    layers = [rnn]
    fc = getattr(module, "fc", None)
    if fc is not None and type(fc).__name__ == "Linear":
        dense = keras.layers.Dense(fc.out_features, name=f"{rnn.name}_proj")
        dense.build((None, None, fc.in_features))
        dense.kernel.assign(_np(fc.weight).T)
        dense.bias.assign(_np(fc.bias))
        layers.append(dense)
    return layers


def _np(tensor: Any) -> np.ndarray:
    return tensor.detach().cpu().numpy().astype(np.float32)


def _refuse(module: Any, option: str, reason: str) -> EdgeRNNError:
    return EdgeRNNError(f"{type(module).__name__}: {option}: {reason}")


def _wrap(module: Any, keras: Any, cell: Any, features: int) -> Any:
    rnn = keras.layers.RNN(cell, return_sequences=bool(module.return_sequences))
    rnn.build((None, None, features))
    return rnn


def _mixed(module: Any, keras: Any, inner: Any) -> Any:
    """The inner cell behind torch's memory LSTM if the module has one, its weights copied (torch's Linear
    stores (out, in), Keras's kernel (in, out))."""
    if not getattr(module, "use_mixed", False):
        return inner
    lstm = module.lstm
    cell = _keras_cells(keras)["TorchMixedMemory"](inner, lstm.hidden_size)
    cell.build((None, lstm.input_size))
    cell.input_kernel.assign(_np(lstm.input_map.weight).T)
    cell.bias.assign(_np(lstm.input_map.bias))
    cell.recurrent_kernel.assign(_np(lstm.recurrent_map.weight).T)
    return cell


# --- CfC ---------------------------------------------------------------------------------------------------


def _cfc(module: Any, keras: Any) -> Any:
    torch_cell = module.rnn_cell
    wired = type(torch_cell).__name__ == "WiredCfCCell"
    subs = list(torch_cell._layers) if wired else [torch_cell]
    cells = [_cfc_cell(module, keras, sub) for sub in subs]
    cell = _keras_cells(keras)["TorchWiredCfC"](cells) if wired else cells[0]
    rnn = _wrap(module, keras, _mixed(module, keras, cell), int(module.input_size))
    for keras_cell, torch_sub in zip(cells, subs, strict=True):
        _copy_cfc(keras_cell, torch_sub)
    return rnn


def _cfc_cell(module: Any, keras: Any, torch_cell: Any) -> Any:
    """An unbuilt Keras cell with the torch cell's shape: ncps.keras's CfCCell for ``pure`` (the two agree)."""
    mode = torch_cell.mode
    if mode not in ("default", "pure", "no_gate"):
        raise _refuse(module, f"mode {mode!r}", "ncps knows default, pure and no_gate only")
    linears = [m for m in (torch_cell.backbone or ()) if type(m).__name__ == "Linear"]
    dropout = [float(m.p) for m in (torch_cell.backbone or ()) if type(m).__name__ == "Dropout"]
    from ncps.keras import CfCCell

    kind = CfCCell if mode == "pure" else _keras_cells(keras)["TorchCfCCell"]
    # A wired layer has no backbone, and no mask at run time: _copy_cfc folds it into ff1 and ff2.
    return kind(
        torch_cell.hidden_size,
        mode=mode,
        activation=_backbone_activation(module, torch_cell),
        backbone_units=linears[0].out_features if linears else 0,
        backbone_layers=len(linears),
        backbone_dropout=dropout[0] if dropout else 0.0,
    )


def _backbone_activation(module: Any, torch_cell: Any) -> str:
    """The Keras name of the backbone's one activation (lecun_tanh, unused, when there is no backbone)."""
    acts = [m for m in (torch_cell.backbone or ()) if type(m).__name__ not in ("Linear", "Dropout")]
    kinds = sorted({type(m).__name__ for m in acts})
    if not kinds:
        return "lecun_tanh"
    if len(kinds) > 1:
        raise _refuse(module, f"backbone activations {' and '.join(kinds)}", "a Keras CfC backbone has one")
    if kinds[0] not in ACTIVATIONS:
        raise _refuse(module, f"backbone activation {kinds[0]}",
                      f"no Keras activation is known to compute it (known: {', '.join(ACTIVATIONS)})")
    approximate = {getattr(m, "approximate", "none") for m in acts}
    if approximate != {"none"}:
        raise _refuse(module, f"backbone activation GELU(approximate={approximate.pop()!r})",
                      "Keras's 'gelu' is the exact (erf) one, as torch's default")
    return ACTIVATIONS[kinds[0]]


def _copy_cfc(cell: Any, torch_cell: Any) -> None:
    linears = [m for m in (torch_cell.backbone or ()) if type(m).__name__ == "Linear"]
    if linears:
        dense = [layer for layer in cell.backbone_fn.layers if type(layer).__name__ == "Dense"]
        for keras_dense, linear in zip(dense, linears, strict=True):
            keras_dense.kernel.assign(_np(linear.weight).T)
            keras_dense.bias.assign(_np(linear.bias))
    # A wired layer's mask (|adjacency|, shaped like the weight) folded in: masked weights are exact zeros either way.
    mask = 1.0 if torch_cell.sparsity_mask is None else _np(torch_cell.sparsity_mask)
    cell.ff1_kernel.assign((_np(torch_cell.ff1.weight) * mask).T)
    cell.ff1_bias.assign(_np(torch_cell.ff1.bias))
    if torch_cell.mode == "pure":
        cell.w_tau.assign(_np(torch_cell.w_tau))
        cell.A.assign(_np(torch_cell.A))
        return
    cell.ff2_kernel.assign((_np(torch_cell.ff2.weight) * mask).T)
    cell.ff2_bias.assign(_np(torch_cell.ff2.bias))
    for keras_dense, linear in ((cell.time_a, torch_cell.time_a), (cell.time_b, torch_cell.time_b)):
        keras_dense.kernel.assign(_np(linear.weight).T)
        keras_dense.bias.assign(_np(linear.bias))


# --- LTC ---------------------------------------------------------------------------------------------------


def _ltc(module: Any, keras: Any) -> Any:
    import ncps.keras

    torch_cell = module.rnn_cell
    features = int(module.input_size)
    options = dict(input_mapping=torch_cell._input_mapping, output_mapping=torch_cell._output_mapping,
                   ode_unfolds=torch_cell._ode_unfolds, epsilon=torch_cell._epsilon)
    wiring = _plain_wiring(torch_cell)
    if getattr(module, "use_mixed", False):
        inner = ncps.keras.LTCCell(wiring, **options)
        rnn = _wrap(module, keras, _mixed(module, keras, inner), features)
        cell = inner
    else:
        rnn = ncps.keras.LTC(wiring, return_sequences=bool(module.return_sequences), **options)
        rnn.build((None, None, features))
        cell = rnn.cell
    _copy_ltc(cell, torch_cell)
    return rnn


def _plain_wiring(torch_cell: Any) -> Any:
    """A plain, built ``Wiring`` whose adjacency is the masks torch runs with. Not the module's own wiring:
    building the Keras cell builds its wiring again, and an NCP's build adds synapses each time; nor its
    class: a reloaded AutoNCP would draw its synapses again from its seed, not from the masks torch holds."""
    from ncps.wirings import Wiring

    wiring = Wiring(torch_cell.state_size)
    wiring.adjacency_matrix = _np(torch_cell.sparsity_mask)
    wiring.sensory_adjacency_matrix = _np(torch_cell.sensory_sparsity_mask)
    wiring.input_dim = int(torch_cell.sensory_size)
    wiring.output_dim = int(torch_cell.motor_size)
    return wiring


def _copy_ltc(cell: Any, torch_cell: Any) -> None:
    """Torch's parameters as the values its forward uses: the constrained ones through make_positive_fn."""
    import torch

    params = dict(torch_cell.named_parameters())
    with torch.no_grad():
        for name, variable in cell._params.items():
            if name in ("sparsity_mask", "sensory_sparsity_mask"):
                continue  # constants the Keras cell took from the wiring, torch's masks
            value = params[name]
            if name in CONSTRAINED:
                value = torch_cell.make_positive_fn(value)
            variable.assign(_np(value))


# --- Keras cells computing torch's formulas ----------------------------------------------------------------

_CELLS: dict[str, Any] = {}


def _keras_cells(keras: Any) -> dict[str, Any]:
    """The cell classes, defined once Keras is imported (this module must import without it)."""
    if not _CELLS:
        _CELLS.update(_define_cells(keras))
    return _CELLS


def _define_cells(keras: Any) -> dict[str, Any]:
    from ncps.keras import CfCCell

    ops = keras.ops
    # Registered so a model holding them has a config (edgernn fingerprints models by it) and reloads.
    serializable = keras.utils.register_keras_serializable(package="edgernn")

    @serializable
    class TorchCfCCell(CfCCell):
        """ncps.keras's CfCCell computing ncps.torch's default and no_gate modes (tanh on ff1 and ff2, the
        time gate's t_a added, not subtracted); timespan 1.0, so t_a * t is t_a."""

        def call(self, inputs, states, training=None, **kwargs):
            x = ops.concatenate([inputs, states[0]], axis=-1)
            if self._backbone_layers > 0:
                x = self.backbone_fn(x, training=training)
            ff1 = ops.tanh(ops.matmul(x, self.ff1_kernel) + self.ff1_bias)
            ff2 = ops.tanh(ops.matmul(x, self.ff2_kernel) + self.ff2_bias)
            t_interp = ops.sigmoid(self.time_a(x) + self.time_b(x))
            if self.mode == "no_gate":
                new_hidden = ff1 + t_interp * ff2
            else:
                new_hidden = ff1 * (1.0 - t_interp) + t_interp * ff2
            return new_hidden, [new_hidden]

    @serializable
    class TorchWiredCfC(keras.layers.Layer):
        """ncps.torch's WiredCfCCell: one CfC cell per wiring layer, each reading the previous one's new
        state; the state is the layers' states side by side and the output the last layer's whole state."""

        def __init__(self, cfc_cells, **kwargs):
            super().__init__(**kwargs)
            self.cfc_cells = list(cfc_cells)
            self.sizes = [int(c.units) for c in self.cfc_cells]

        @property
        def state_size(self):
            return sum(self.sizes)

        @property
        def output_size(self):
            return self.sizes[-1]

        def build(self, input_shape):
            width = input_shape[-1]
            for cell in self.cfc_cells:
                if not cell.built:  # a reloaded model's cells come built from their config
                    cell.build((None, width))
                width = cell.units
            self.built = True

        def call(self, inputs, states, training=None, **kwargs):
            state, start, new = states[0], 0, []
            for cell, size in zip(self.cfc_cells, self.sizes):
                inputs, _ = cell(inputs, [state[:, start:start + size]], training=training)
                new.append(inputs)
                start += size
            return inputs, [ops.concatenate(new, axis=-1)]

        def get_config(self):
            cells = [keras.layers.serialize(cell) for cell in self.cfc_cells]
            return {**super().get_config(), "cfc_cells": cells}

        @classmethod
        def from_config(cls, config):
            cells = [keras.layers.deserialize(cell) for cell in config.pop("cfc_cells")]
            return cls(cells, **config)

    @serializable
    class TorchMixedMemory(keras.layers.Layer):
        """ncps.torch's mixed memory: its LSTMCell (gates i, ig, fg, og; forget bias 1) reads (x, h) and its
        output is the state the inner cell then updates from x. States: (memory c, inner state h)."""

        def __init__(self, rnn_cell, units, **kwargs):
            super().__init__(**kwargs)
            self.rnn_cell = rnn_cell
            self.units = int(units)

        @property
        def state_size(self):
            return [self.units, self.units]

        @property
        def output_size(self):
            return getattr(self.rnn_cell, "output_size", self.units)

        def build(self, input_shape):
            features = input_shape[-1]
            if not self.rnn_cell.built:
                self.rnn_cell.build((None, features))
            self.input_kernel = self.add_weight(shape=(features, 4 * self.units), name="input_kernel")
            self.recurrent_kernel = self.add_weight(shape=(self.units, 4 * self.units), name="recurrent_kernel")
            self.bias = self.add_weight(shape=(4 * self.units,), initializer="zeros", name="bias")
            self.built = True

        def call(self, inputs, states, training=None, **kwargs):
            memory, hidden = states[0], states[1]
            z = ops.matmul(inputs, self.input_kernel) + self.bias + ops.matmul(hidden, self.recurrent_kernel)
            i, ig, fg, og = ops.split(z, 4, axis=-1)
            memory = memory * ops.sigmoid(fg + 1.0) + ops.tanh(i) * ops.sigmoid(ig)
            hidden = ops.tanh(memory) * ops.sigmoid(og)
            output, new_hidden = self.rnn_cell(inputs, [hidden], training=training)
            return output, [memory, new_hidden[0]]

        def get_config(self):
            return {**super().get_config(), "rnn_cell": keras.layers.serialize(self.rnn_cell), "units": self.units}

        @classmethod
        def from_config(cls, config):
            inner = config.pop("rnn_cell")
            if inner["class_name"] == "LTCCell":  # its config holds its wiring's, which LTCCell does not rebuild
                from ncps.wirings import Wiring

                inner["config"]["wiring"] = Wiring.from_config(inner["config"]["wiring"])
            return cls(keras.layers.deserialize(inner), **config)

    return {"TorchCfCCell": TorchCfCCell, "TorchWiredCfC": TorchWiredCfC, "TorchMixedMemory": TorchMixedMemory}
