"""PyTorch models end to end on qemu_riscv32 at int8: a torch module through the Python API and an ONNX file
through the command line, each built, validated over the serial link with every output and state byte equal
to the interpreter's, and its float error measured against the torch model it came from."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import require_tools, QEMU_TOOLS, require_module

torch = require_module("torch")
nn = torch.nn

pytestmark = [pytest.mark.slow, pytest.mark.toolchain, pytest.mark.qemu]

FEATURES = 3


class LstmHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(FEATURES, 8, num_layers=2, batch_first=True)
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.fc(y)


class LinearGru(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(FEATURES, 6)
        self.gru = nn.GRU(6, 8, batch_first=True)
        self.out = nn.Linear(8, 2)

    def forward(self, x):
        y, _ = self.gru(torch.tanh(self.inp(x)))
        return self.out(y[:, -1])


def _cfc():
    from ncps.torch import CfC
    from ncps.wirings import AutoNCP

    return CfC(FEATURES, AutoNCP(12, 2, seed=1), batch_first=True)


MODELS = {"lstm2_module": LstmHead, "cfc_autoncp_module": _cfc, "linear_gru_onnx": LinearGru,
          "cfc_autoncp_cell_onnx": _cfc}


def _data(n: int, steps: int, seed: int) -> np.ndarray:
    from edgernn.testing.zoo import trajectories

    return trajectories(n, steps, FEATURES, seed)


@pytest.mark.parametrize("name", list(MODELS))
def test_torch_model_validates_on_qemu(tmp_path, name):
    require_tools(*QEMU_TOOLS)
    import edgernn
    from edgernn.validate.run import validate

    torch.manual_seed(0)
    module = MODELS[name]().eval()
    calib = _data(8, 64, 1)
    out = tmp_path / "out"
    if name.endswith("_onnx"):
        require_module("onnx")
        path = tmp_path / "model.onnx"
        if "cell" in name:   # an ncps model is exported as its cell: one step, (x_t, h, time span)
            cell = module.rnn_cell
            torch.onnx.export(cell, (torch.zeros(1, FEATURES), torch.zeros(1, cell.state_size), 1.0), str(path),
                              dynamo=False)
        else:
            torch.onnx.export(module, (torch.from_numpy(calib[:1]),), str(path), dynamo=False,
                              input_names=["x"], dynamic_axes={"x": {0: "batch", 1: "time"}})
        np.save(tmp_path / "calib.npy", calib)
        run = subprocess.run([sys.executable, "-m", "edgernn", "build", str(path), "--board", "qemu_riscv32",
                              "--quant", "int8", "--calib", str(tmp_path / "calib.npy"), "-o", str(out)],
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr
    else:
        edgernn.build(module, out, board="qemu_riscv32", quant="int8", calib=calib)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["source"]["format"] == ("onnx" if name.endswith("_onnx") else "torch")
    assert manifest["float_self_check_rel"] <= 1e-5

    data = _data(1, 120, 7)
    report = validate(out, data=data)
    ref = report["reference"]
    assert ref["mismatches"] == 0 and ref["state_mismatches"] == 0, ref
    assert report["pass"]
    # the float error is measured against the torch model's own outputs (through its float twin)
    assert ("torch module" if not name.endswith("_onnx") else "ONNX model") in report["float"]["against"]
    with torch.no_grad():
        want = module(torch.from_numpy(data))
    want = (want[0] if isinstance(want, tuple) else want).numpy()
    assert report["float"]["max_abs"] < 0.2 * max(1.0, float(np.max(np.abs(want))))
