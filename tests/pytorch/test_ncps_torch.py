"""ncps.torch's CfC and LTC mapped onto Keras layers: the same outputs in float, and refusals in one line."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import require_module

torch = require_module("torch")
require_module("ncps")

from ncps.torch import LTC, CfC, CfCCell  # noqa: E402
from ncps.wirings import NCP, AutoNCP, FullyConnected  # noqa: E402

from edgernn import tfenv  # noqa: E402
from edgernn.errors import EdgeRNNError  # noqa: E402
from edgernn.pytorch.ncps import is_ncps_module, ncps_layers  # noqa: E402

pytestmark = pytest.mark.slow

F = 3
STEPS = 12



def _ltc_with_loaded_masks():
    """An LTC whose masks no longer match its wiring object, as after loading another run's state_dict."""
    module = LTC(F, AutoNCP(10, 2, seed=9))
    with torch.no_grad():
        module.rnn_cell.sparsity_mask[0, :] = 0.0
        module.rnn_cell.sensory_sparsity_mask[:, 1] = 1.0
    return module


# name -> builder of the torch module (called under a fixed seed)
CASES = {
    "cfc_default": lambda: CfC(F, 8),
    "cfc_pure": lambda: CfC(F, 8, mode="pure"),
    "cfc_no_gate": lambda: CfC(F, 8, mode="no_gate"),
    "cfc_backbone_2x16_dropout_silu": lambda: CfC(F, 6, backbone_units=16, backbone_layers=2,
                                                  backbone_dropout=0.3, activation="silu"),
    "cfc_no_backbone_tanh": lambda: CfC(F, 6, backbone_layers=0, activation="tanh"),
    "cfc_gelu_last_step": lambda: CfC(F, 6, activation="gelu", return_sequences=False),
    "cfc_mixed": lambda: CfC(F, 8, mixed_memory=True),
    "cfc_pure_mixed_proj": lambda: CfC(F, 8, mode="pure", mixed_memory=True, proj_size=3),
    "cfc_proj_last_step": lambda: CfC(F, 8, proj_size=2, return_sequences=False),
    "cfc_time_major": lambda: CfC(F, 8, batch_first=False),
    "cfc_autoncp": lambda: CfC(F, AutoNCP(12, 2, seed=3)),
    "cfc_autoncp_pure_mixed": lambda: CfC(F, AutoNCP(10, 3, seed=4), mode="pure", mixed_memory=True),
    "cfc_ncp_no_gate_proj": lambda: CfC(F, NCP(4, 3, 2, 2, 2, 2, 2, seed=5), mode="no_gate", proj_size=1),
    "cfc_autoncp_default_mixed_time_major": lambda: CfC(F, AutoNCP(10, 2, seed=2), mixed_memory=True,
                                                        batch_first=False),
    "cfc_relu_proj": lambda: CfC(F, 5, activation="relu", backbone_units=12, proj_size=4),
    "cfc_fully_connected_wiring": lambda: CfC(F, FullyConnected(7, output_dim=2), return_sequences=False),
    "ltc_autoncp": lambda: LTC(F, AutoNCP(12, 2, seed=3)),
    "ltc_units": lambda: LTC(F, 6),
    "ltc_linear_none_unfolds_eps": lambda: LTC(F, 6, input_mapping="linear", output_mapping=None,
                                               ode_unfolds=3, epsilon=1e-3),
    "ltc_none_linear": lambda: LTC(F, AutoNCP(8, 2, seed=6), input_mapping=None, output_mapping="linear"),
    "ltc_mixed": lambda: LTC(F, AutoNCP(10, 2, seed=7), mixed_memory=True),
    "ltc_no_implicit_constraints": lambda: LTC(F, 6, implicit_param_constraints=False),
    "ltc_ncp_last_step": lambda: LTC(F, NCP(4, 3, 2, 2, 2, 2, 2, seed=8), return_sequences=False),
    "ltc_time_major": lambda: LTC(F, 5, batch_first=False),
    "ltc_masks_from_state_dict": _ltc_with_loaded_masks,
}


def _module(name: str):
    torch.manual_seed(0)
    module = CASES[name]()
    _perturb(module)
    return module.eval()


def _perturb(module) -> None:
    """Move every trained parameter away from its initial value (ones, zeros, the erev signs...), so a
    parameter copied to the wrong place, transposed or unconstrained shows; the masks stay as wired.
    A CfC's is smaller: with its 128-wide backbone's weights much larger than initialised its 12 steps turn
    chaotic, and float32 rounding alone (torch's own against float64) then grows to about 1e-5."""
    scale = 0.3 if type(module).__name__ == "LTC" else 0.1
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for param in module.parameters():
            if param.requires_grad:
                param.add_(scale * torch.randn(param.shape, generator=gen))


def _batch(features: int = F, sequences: int = 2, steps: int = STEPS) -> np.ndarray:
    return np.random.default_rng(2).standard_normal((sequences, steps, features)).astype(np.float32)


def _torch_out(module, x: np.ndarray) -> np.ndarray:
    """The module on batch-first ``x``; a time-major module gets it transposed, and its sequence back."""
    tensor = torch.from_numpy(x)
    with torch.no_grad():
        if module.batch_first:
            return module(tensor)[0].numpy()
        out = module(tensor.transpose(0, 1))[0]
    return (out.transpose(0, 1) if module.return_sequences else out).numpy()


def _keras_out(layers, x: np.ndarray) -> np.ndarray:
    y = x
    for layer in layers:
        y = layer(y)
    return np.asarray(y)


def relative_error(module) -> float:
    keras = tfenv.keras3()
    x = _batch()
    expected = _torch_out(module, x)
    got = _keras_out(ncps_layers(module, keras), x)
    assert got.shape == expected.shape
    return float(np.max(np.abs(got - expected)) / np.max(np.abs(expected)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_keras_layers_compute_what_the_torch_module_computes(name):
    module = _module(name)
    layers = ncps_layers(module, tfenv.keras3())
    assert layers[0].return_sequences == module.return_sequences  # a Dense after it keeps what it returns
    assert relative_error(module) <= 1e-5


def test_is_ncps_module_tells_ncps_torch_modules_from_others():
    assert is_ncps_module(CfC(F, 4)) and is_ncps_module(LTC(F, 4))
    assert not is_ncps_module(torch.nn.LSTM(F, 4))


def _softplus_backbone():
    module = CfC(F, 4)
    module.rnn_cell.backbone[1] = torch.nn.Softplus()
    return module


def _tanh_gelu_backbone():
    module = CfC(F, 4, activation="gelu")
    module.rnn_cell.backbone[1] = torch.nn.GELU(approximate="tanh")
    return module


def _unknown_mode():
    module = CfC(F, 4)
    module.rnn_cell.mode = "euler"
    return module


REFUSALS = {
    "not_ncps": (lambda: torch.nn.LSTM(F, 4, batch_first=True), ["LSTM", "CfC and LTC"]),
    "bare_cell": (lambda: CfCCell(F, 4), ["CfCCell", "CfC and LTC"]),
    "backbone_activation": (_softplus_backbone, ["CfC", "backbone activation Softplus"]),
    "mode": (_unknown_mode, ["CfC", "mode 'euler'"]),
    "gelu_tanh": (_tanh_gelu_backbone, ["CfC", "backbone activation GELU(approximate='tanh')"]),
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_what_cannot_be_mapped_is_refused_in_one_line(name):
    build, words = REFUSALS[name]
    with pytest.raises(EdgeRNNError) as err:
        ncps_layers(build(), tfenv.keras3())
    message = str(err.value)
    assert "\n" not in message
    for word in words:
        assert word in message


@pytest.mark.parametrize("name", ["cfc_autoncp", "ltc_autoncp"])
def test_mapped_layers_convert_end_to_end(name, tmp_path):
    import edgernn

    keras = tfenv.keras3()
    module = _module(name)
    model = keras.Sequential([keras.Input((None, F)), *ncps_layers(module, keras)])
    manifest = edgernn.convert(model, tmp_path / "out", quant="float32", calib=_batch(sequences=4, steps=16))
    assert manifest["float_self_check_rel"] <= 1e-5


@pytest.mark.parametrize("name", ["cfc_autoncp_pure_mixed", "cfc_backbone_2x16_dropout_silu", "ltc_mixed"])
def test_a_model_of_the_mapped_layers_saves_and_reloads(name, tmp_path):
    keras = tfenv.keras3()
    model = keras.Sequential([keras.Input((None, F)), *ncps_layers(_module(name), keras)])
    model.save(tmp_path / "model.keras")
    reloaded = keras.models.load_model(tmp_path / "model.keras")
    x = _batch()
    np.testing.assert_array_equal(np.asarray(reloaded(x)), np.asarray(model(x)))
