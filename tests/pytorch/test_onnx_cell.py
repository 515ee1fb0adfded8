"""ONNX graphs of one step of a cell (edgernn/pytorch/onnx_cell.py): an exported ncps CfC/LTC cell or a
torch RNN cell runs as a Keras cell, computing what the file computes within 1e-5 relative; an export
unrolled over time is recognised, rolled back only when asked, and refused otherwise."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import require_module

from edgernn.errors import EdgeRNNError

torch = require_module("torch")
onnx = require_module("onnx")
nn = torch.nn

pytestmark = pytest.mark.slow

FEATURES = 3


class TorchCell(nn.Module):
    """A torch RNN cell as ncps' cells are called: (x_t, h) -> (y, h')."""

    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind
        self.cell = nn.LSTMCell(FEATURES, 6) if kind == "lstm" else nn.GRUCell(FEATURES, 6)
        self.fc = nn.Linear(6, 2)

    def forward(self, x, h, c=None):
        if self.kind == "lstm":
            h, c = self.cell(x, (h, c))
            return self.fc(h), h, c
        h = self.cell(x, h)
        return torch.tanh(self.fc(h)), h


class Loop(nn.Module):
    """A cell looped over the steps in Python: torch.onnx.export unrolls it."""

    def __init__(self, kind: str, last: bool = False, mean: bool = False):
        super().__init__()
        self.kind, self.last, self.mean = kind, last, mean
        self.cell = nn.LSTMCell(FEATURES, 6) if kind == "lstm" else nn.GRUCell(FEATURES, 6)
        self.fc = nn.Linear(6, 2)

    def forward(self, x):
        h = torch.zeros(x.shape[0], 6)
        c = torch.zeros(x.shape[0], 6)
        outs = []
        for t in range(x.shape[1]):
            if self.kind == "lstm":
                h, c = self.cell(x[:, t], (h, c))
            else:
                h = self.cell(x[:, t], h)
            outs.append(h)
        if self.mean:
            return self.fc(torch.stack(outs, 1).mean(1))
        return self.fc(h) if self.last else self.fc(torch.stack(outs, 1))


def _ncps(kind: str, **options):
    from ncps.torch import CfC, LTC
    from ncps.wirings import AutoNCP

    torch.manual_seed(0)
    make = CfC if kind == "cfc" else LTC
    return make(FEATURES, AutoNCP(10, 2, seed=3), batch_first=True, **options).eval()


def _export(module, args, path, dynamo: bool, names=None) -> None:
    torch.onnx.export(module.eval(), args, str(path), dynamo=dynamo, input_names=names)


def _cell_file(tmp_path, name: str, dynamo: bool):
    torch.manual_seed(0)
    x = torch.randn(1, FEATURES)
    if name.startswith(("cfc", "ltc")):
        model = _ncps(name.split("_")[0], **({"mode": "no_gate"} if "no_gate" in name else {}))
        units = model.rnn_cell.state_size
        args = (x, torch.zeros(1, units), 1.0)
        module = model.rnn_cell
    else:
        module = TorchCell(name)
        args = (x, torch.zeros(1, 6), torch.zeros(1, 6)) if name == "lstm" else (x, torch.zeros(1, 6))
    path = tmp_path / f"{name}.onnx"
    _export(module, args, path, dynamo)
    return path


CELLS = [(name, dynamo) for name in ("cfc", "cfc_no_gate", "ltc", "lstm", "gru") for dynamo in (False, True)
         if not (name == "ltc" and dynamo)]


@pytest.mark.parametrize("name,dynamo", CELLS, ids=[f"{n}-{'dynamo' if d else 'torchscript'}" for n, d in CELLS])
def test_cell_export_runs_as_a_keras_cell(tmp_path, name, dynamo):
    from edgernn.pytorch.onnx_cell import cell_step, keras_layer, step_reference
    from edgernn import tfenv

    keras = tfenv.keras3()
    path = _cell_file(tmp_path, name, dynamo)
    model = onnx.load(str(path))
    step = cell_step(model, path.name)
    assert step is not None and step.features == FEATURES
    layer = keras_layer(step, keras)
    x = np.random.default_rng(2).standard_normal((2, 14, FEATURES)).astype(np.float32)
    want = step_reference(model, step)(x)
    got = np.asarray(keras.Sequential([keras.Input((None, FEATURES)), layer])(x))
    assert np.max(np.abs(got - want)) <= 1e-5 * np.max(np.abs(want))


def _unrolled(tmp_path, name: str, dynamo: bool, steps: int = 8):
    torch.manual_seed(0)
    module = {"cfc": lambda: _ncps("cfc"), "ltc": lambda: _ncps("ltc"), "lstm loop": lambda: Loop("lstm"),
              "gru loop": lambda: Loop("gru"), "gru loop, last step": lambda: Loop("gru", last=True),
              "cfc, last step": lambda: _ncps("cfc", return_sequences=False),
              "gru loop, mean of the steps": lambda: Loop("gru", mean=True)}[name]()
    path = tmp_path / "unrolled.onnx"
    _export(module, (torch.randn(1, steps, FEATURES),), path, dynamo)
    return module, path


ROLLED = [("cfc", False), ("cfc", True), ("ltc", False), ("lstm loop", False), ("gru loop", True),
          ("gru loop, last step", False), ("cfc, last step", True)]


@pytest.mark.parametrize("name,dynamo", ROLLED, ids=[f"{n}-{'dynamo' if d else 'torchscript'}" for n, d in ROLLED])
def test_unrolled_export_rolls_back_to_its_cell(tmp_path, name, dynamo):
    from edgernn.pytorch.onnx_cell import keras_layer, roll
    from edgernn import tfenv

    keras = tfenv.keras3()
    module, path = _unrolled(tmp_path, name, dynamo)
    rolled = roll(onnx.load(str(path)), path.name)
    assert rolled.steps == 8 and rolled.return_sequences == ("last step" not in name)
    layer = keras_layer(rolled.step, keras, return_sequences=rolled.return_sequences)
    # the cell runs any number of steps: held against the torch module itself over 30
    x = np.random.default_rng(3).standard_normal((2, 30, FEATURES)).astype(np.float32)
    got = np.asarray(keras.Sequential([keras.Input((None, FEATURES)), layer])(x))
    with torch.no_grad():
        want = module(torch.from_numpy(x))
    want = (want[0] if isinstance(want, tuple) else want).numpy()
    assert np.max(np.abs(got - want)) <= 1e-5 * np.max(np.abs(want))


def test_unrolled_export_whose_output_mixes_the_steps_is_refused(tmp_path):
    from edgernn.pytorch.onnx_cell import roll

    _, path = _unrolled(tmp_path, "gru loop, mean of the steps", False)
    with pytest.raises(EdgeRNNError, match="'/ReduceMean' .ReduceMean. after the unrolled cell is not a per-step") as info:
        roll(onnx.load(str(path)), path.name)
    assert "\n" not in str(info.value)


def test_unrolled_export_over_two_steps_is_refused(tmp_path):
    from edgernn.pytorch.onnx_cell import roll

    _, path = _unrolled(tmp_path, "gru loop", False, steps=2)
    with pytest.raises(EdgeRNNError, match="unrolled over 2 steps; export it over at least 3 steps"):
        roll(onnx.load(str(path)), path.name)


def _edgernn(*args: str, prelude: str = "") -> "subprocess.CompletedProcess":
    import subprocess
    import sys

    code = f"{prelude}import sys; from edgernn.cli.main import main; sys.argv = ['edgernn', *sys.argv[1:]]; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300)


def test_command_line_reads_a_cell_export_and_refuses_an_unrolled_one_unless_rolled(tmp_path):
    cell = _cell_file(tmp_path, "cfc", False)
    _, unrolled = _unrolled(tmp_path, "cfc", False)
    assert _edgernn("inspect", "--json", str(cell)).returncode == 0
    refused = _edgernn("inspect", str(unrolled))
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "unrolled over 8 fixed steps" in lines[0] and "--roll" in lines[0]
    assert "export the cell instead" in lines[0] and "edgernn.convert" in lines[0]
    rolled = _edgernn("inspect", "--json", "--roll", str(unrolled))
    assert rolled.returncode == 0, rolled.stderr


def test_onnx_file_without_the_onnx_package_gets_one_line(tmp_path):
    cell = _cell_file(tmp_path, "gru", False)
    run = _edgernn("inspect", str(cell), prelude="import sys; sys.modules['onnx'] = None; ")
    assert run.returncode == 2
    assert run.stderr.strip() == "error: reading .onnx models needs the onnx package: pip install 'edgernn[onnx]'"
