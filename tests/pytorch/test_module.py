"""torch modules onto Keras models (edgernn/pytorch/module.py): each mapped chain computes what the module
computes, within 1e-5 relative, and what cannot be mapped is refused in one line naming it."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import require_module

from edgernn.errors import EdgeRNNError

torch = require_module("torch")
nn = torch.nn
F = torch.nn.functional

pytestmark = pytest.mark.slow


class Head(nn.Module):
    """An RNN, then a Linear on each step or on the last one (y[:, -1], h_n[-1], h_n.squeeze(0))."""

    def __init__(self, rnn: nn.Module, take: str = "seq", out: int = 2):
        super().__init__()
        self.rnn = rnn
        self.fc = nn.Linear(rnn.hidden_size, out)
        self.take = take

    def forward(self, x):
        y, h = self.rnn(x)
        if self.take == "last":
            return self.fc(y[:, -1])
        if self.take == "last_tm":
            return self.fc(y[-1])
        if self.take == "h_n":
            return self.fc(h[-1])
        if self.take == "lstm h_n":
            (h_n, _) = h
            return self.fc(h_n[-1])
        if self.take == "h_n[-1, :, :]":
            return self.fc(h[-1, :, :])
        if self.take == "squeeze":
            return self.fc(h.squeeze(0))
        return self.fc(y)


class PreGru(nn.Module):
    """Linear and functional activations before and after a GRU."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(3, 6)
        self.gru = nn.GRU(6, 5, batch_first=True)
        self.out = nn.Linear(5, 2)

    def forward(self, x):
        y, _ = self.gru(F.relu(self.inp(x)))
        return torch.tanh(self.out(y))


class Swapped(nn.Module):
    """A time-major RNN inside a batch-first module: transposes on the way in and out."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(3, 4, num_layers=2)
        self.fc = nn.Linear(4, 1)

    def forward(self, x):
        y, _ = self.rnn(x.transpose(0, 1))
        return self.fc(y.permute(1, 0, 2))


class Stacked(nn.Module):
    """Two RNN modules of different kinds, with a Sequential of per-step layers between and after."""

    def __init__(self):
        super().__init__()
        self.pre = nn.Sequential(nn.Linear(3, 8), nn.LeakyReLU(0.2), nn.Dropout(0.3))
        self.lstm = nn.LSTM(8, 6, batch_first=True)
        self.mid = nn.Sequential(nn.Linear(6, 6), nn.ReLU6())
        self.rnn = nn.RNN(6, 5, nonlinearity="relu", batch_first=True)
        self.post = nn.Sequential(nn.Linear(5, 3), nn.Softmax(dim=-1))

    def forward(self, x):
        y, _ = self.lstm(self.pre(x))
        y, _ = self.rnn(self.mid(y))
        return self.post(y[:, -1, :])


class ZeroState(nn.Module):
    """The tutorials' way: the zero initial state written out, sized from the input."""

    def __init__(self, kind: str, fill: str = "zeros"):
        super().__init__()
        self.kind, self.fill, self.layers, self.hidden = kind, fill, 2, 6
        self.rnn = getattr(nn, kind)(3, self.hidden, self.layers, batch_first=True)
        self.fc = nn.Linear(self.hidden, 2)

    def forward(self, x):
        make = torch.zeros if self.fill == "zeros" else torch.ones
        h0 = make(self.layers, x.size(0), self.hidden).to(x.device)
        if self.kind == "LSTM":
            c0 = torch.zeros(self.layers, x.shape[0], self.hidden, device=x.device)
            out, _ = self.rnn(x, (h0, c0))
        else:
            out, _ = self.rnn(x, h0)
        return self.fc(out[:, -1, :])


class Regressor(nn.Module):
    """LayerNorm on the features, an LSTM, one output feature squeezed away (a regression's usual end)."""

    def __init__(self, last: bool = False, after: bool = False):
        super().__init__()
        self.norm = nn.LayerNorm(3)
        self.lstm = nn.LSTM(3, 6, batch_first=True)
        self.fc = nn.Linear(6, 1)
        self.last, self.after = last, after

    def forward(self, x):
        y, _ = self.lstm(self.norm(x))
        y = self.fc(y[:, -1] if self.last else y).squeeze(-1)
        return torch.tanh(y) if self.after else y


class TakesOutput(nn.Module):
    """``y, _ = rnn(x)``: the state is taken apart and left unread (fx still makes a node for it)."""

    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        y, _ = self.rnn(x)
        return y


def _cases():
    from ncps.torch import LTC, CfC
    from ncps.wirings import AutoNCP

    torch.manual_seed(0)
    return {
        "ncps cfc, y, _ = cfc(x)": TakesOutput(CfC(3, AutoNCP(8, 2, seed=0), batch_first=True)),
        "ncps ltc, y, _ = ltc(x)": TakesOutput(LTC(3, AutoNCP(8, 2, seed=0), batch_first=True)),
        "gru, y, _ = gru(x)": TakesOutput(nn.GRU(3, 5, batch_first=True)),
        "lstm alone": nn.LSTM(3, 6, batch_first=True),
        "lstm 2 layers time-major alone": nn.LSTM(3, 6, num_layers=2),
        "gru alone": nn.GRU(3, 5, batch_first=True),
        "gru without bias": nn.GRU(3, 5, bias=False, batch_first=True),
        "rnn relu alone": nn.RNN(3, 4, nonlinearity="relu", batch_first=True),
        "rnn tanh": Head(nn.RNN(3, 4, batch_first=True)),
        "lstm 2 layers, y[:, -1]": Head(nn.LSTM(3, 8, num_layers=2, batch_first=True), "last"),
        "lstm, h_n[-1]": Head(nn.LSTM(3, 8, batch_first=True), "lstm h_n"),
        "lstm 3 layers, h_n[-1]": Head(nn.LSTM(3, 4, num_layers=3, batch_first=True), "lstm h_n"),
        "gru 2 layers, h_n[-1]": Head(nn.GRU(3, 4, num_layers=2, batch_first=True), "h_n"),
        "rnn 2 layers, h_n[-1, :, :]": Head(nn.RNN(3, 4, num_layers=2, batch_first=True), "h_n[-1, :, :]"),
        "gru, h_n.squeeze(0)": Head(nn.GRU(3, 4, batch_first=True), "squeeze"),
        "time-major gru, y[-1]": Head(nn.GRU(3, 4), "last_tm"),
        "linear, gru, linear": PreGru(),
        "transposed time-major lstm": Swapped(),
        "sequential pre, lstm, mid, rnn, softmax": Stacked(),
        "sequential of an lstm": nn.Sequential(nn.LSTM(3, 5, batch_first=True)),
        "lstm from (h0, c0) = zeros": ZeroState("LSTM"),
        "gru from h0 = zeros": ZeroState("GRU"),
        "layernorm, lstm, squeeze(-1)": Regressor(),
        "layernorm, lstm, last step, squeeze(-1)": Regressor(last=True),
    }


CASES = _cases()


@pytest.mark.parametrize("name", list(CASES))
def test_module_matches_torch(name):
    from edgernn.pytorch.module import from_torch

    module = CASES[name]
    source = from_torch(module)
    x = np.random.default_rng(1).standard_normal((2, 11, 3)).astype(np.float32)
    want = source.reference(x)
    got = np.asarray(source.model(x, training=False))
    if "squeeze" in name and "h_n" not in name:   # the Keras model keeps the output axis of one
        got = got.reshape(want.shape)
    assert got.shape == want.shape
    assert np.max(np.abs(got - want)) <= 1e-5 * np.max(np.abs(want))
    # the reference is the module itself, fed in its own layout (time-major for a time-major first RNN)
    time_major = name in TIME_MAJOR
    module.eval()
    with torch.no_grad():
        own = module(torch.from_numpy(x).transpose(0, 1) if time_major else torch.from_numpy(x))
    own = own[0] if isinstance(own, tuple) else own
    own = own.transpose(0, 1) if time_major and own.dim() == 3 else own
    np.testing.assert_array_equal(want, own.numpy())


TIME_MAJOR = {"lstm 2 layers time-major alone", "time-major gru, y[-1]"}


class TwoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(3, 4, batch_first=True)

    def forward(self, x, h0):
        return self.rnn(x, h0)[0]


class GivenState(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(3, 4, batch_first=True)
        self.h0 = nn.Parameter(torch.ones(1, 1, 4))

    def forward(self, x):
        return self.rnn(x, self.h0)[0]


class Concat(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(3, 4, batch_first=True)

    def forward(self, x):
        return torch.cat([self.rnn(x)[0], x], dim=-1)


class CellState(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(3, 4, batch_first=True)

    def forward(self, x):
        _, (_, c) = self.rnn(x)
        return c[-1]


class NcpsState(nn.Module):
    def __init__(self):
        from ncps.torch import CfC

        super().__init__()
        self.rnn = CfC(3, 4, batch_first=True)

    def forward(self, x):
        _, h = self.rnn(x)
        return h


class FirstStep(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(3, 4, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0][:, 0]


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(3, 4, batch_first=True)

    def forward(self, x):
        y, _ = self.rnn(x)
        if y.sum() > 0:
            return y
        return -y


REFUSALS = [
    ("bidirectional", lambda: nn.LSTM(3, 4, bidirectional=True, batch_first=True), "bidirectional"),
    ("proj_size", lambda: nn.LSTM(3, 4, proj_size=2, batch_first=True), "proj_size=2"),
    ("a second input", TwoInputs, "second input 'h0'"),
    ("an initial state", GivenState, "uses the tensor 'h0'"),
    ("an op after squeeze(-1)", lambda: Regressor(after=True), "calls tanh after squeeze(-1)"),
    ("layernorm over two axes", lambda: nn.Sequential(nn.LayerNorm((4, 3)), nn.LSTM(3, 4)),
     "submodule '0' (LayerNorm) normalizes over 2 axes"),
    ("a state of ones", lambda: ZeroState("GRU", "ones"), "torch.ones, an initial state that is not zero"),
    ("cat", Concat, "calls cat"),
    ("c_n", CellState, "c_n"),
    ("an ncps module's state", NcpsState, "uses submodule 'rnn' (CfC)'s state"),
    ("the first step", FirstStep, "indexes a sequence with [:, 0]"),
    ("data-dependent control flow", Branchy, "cannot be traced by torch.fx"),
    ("no rnn", lambda: nn.Sequential(nn.Linear(3, 4), nn.ReLU()), "has no recurrent submodule"),
    ("a conv", lambda: nn.Sequential(nn.Conv1d(3, 4, 3), nn.LSTM(4, 4)), "submodule '0' (Conv1d) has no Keras mapping"),
    ("elu alpha", lambda: nn.Sequential(nn.ELU(alpha=0.5), nn.LSTM(3, 4)), "submodule '0' (ELU) has no Keras mapping"),
]


@pytest.mark.parametrize("name,make,says", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_module_refusals(name, make, says):
    from edgernn.pytorch.module import from_torch

    with pytest.raises(EdgeRNNError) as info:
        from_torch(make())
    message = str(info.value)
    assert "\n" not in message
    assert says in message


def test_the_module_is_left_in_training_mode_when_it_was():
    from edgernn.pytorch.module import from_torch

    module = Head(nn.LSTM(3, 4, batch_first=True, num_layers=2, dropout=0.5), "last").train()
    source = from_torch(module)
    assert module.training
    x = np.random.default_rng(4).standard_normal((2, 6, 3)).astype(np.float32)
    first, again = source.reference(x), source.reference(x)   # dropout off while the reference runs
    np.testing.assert_array_equal(first, again)
    assert module.training
    assert np.max(np.abs(np.asarray(source.model(x)) - first)) <= 1e-5 * np.max(np.abs(first))


def test_not_a_module():
    from edgernn.pytorch.module import from_torch

    with pytest.raises(EdgeRNNError, match="expected a torch.nn.Module, got int"):
        from_torch(5)


def test_api_from_torch_gives_a_keras_model():
    import edgernn
    from edgernn import tfenv

    model = edgernn.from_torch(CASES["linear, gru, linear"])
    assert isinstance(model, tfenv.keras3().Model)
    assert [type(layer).__name__ for layer in model.layers[1:]] == ["Dense", "ReLU", "GRU", "Dense", "Activation"]
