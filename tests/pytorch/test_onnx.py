"""load_onnx: ONNX files written by torch.onnx.export (both exporters) onto Keras models, against torch itself.

Every file is exported here from a small torch module; none is kept in the repository.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from conftest import require_module

onnx = require_module("onnx")
torch = require_module("torch")

from edgernn.errors import EdgeRNNError  # noqa: E402
from edgernn.pytorch.onnx import load_onnx  # noqa: E402

pytestmark = pytest.mark.slow

F, H, T = 3, 6, 7
TOLERANCE = 1e-5


class Net(torch.nn.Module):
    """pre layers -> one recurrent module -> post layers, with the output taken as ``take`` says."""

    def __init__(self, rnn: Any, pre: list | None = None, post: list | None = None, take: str = "seq"):
        super().__init__()
        self.pre = torch.nn.Sequential(*(pre or []))
        self.rnn = rnn
        self.post = torch.nn.Sequential(*(post or []))
        self.take = take
        self.batch_first = rnn.batch_first

    def forward(self, x: Any) -> Any:
        out, state = self.rnn(self.pre(x.float()))  # a Cast to float the file keeps (torchscript) or not
        h_n = state[0] if isinstance(state, tuple) else state
        if self.take == "last":
            out = out[:, -1, :] if self.batch_first else out[-1]
        elif self.take == "slice":
            out = out[:, -1:, :] if self.batch_first else out[-1:]
        elif self.take == "h_n[-1]":
            out = h_n[-1]
        elif self.take == "h_n":
            out = h_n
        return self.post(out)


def lstm(**kw: Any) -> Any:
    return torch.nn.LSTM(kw.pop("features", H), H, batch_first=kw.pop("batch_first", True), **kw)


def gru(**kw: Any) -> Any:
    return torch.nn.GRU(kw.pop("features", H), H, batch_first=kw.pop("batch_first", True), **kw)


def rnn(**kw: Any) -> Any:
    return torch.nn.RNN(kw.pop("features", H), H, batch_first=kw.pop("batch_first", True), **kw)


def linear(activation: Any = None, into: int = H, features: int = F) -> list:
    return [torch.nn.Linear(features, into)] + ([activation] if activation is not None else [])


# name -> a module builder. The recurrent layer reads H features: a Linear(F, H) before it where it has no pre.
CASES: dict[str, Callable[[], Any]] = {
    "lstm": lambda: Net(lstm(features=F)),
    "gru": lambda: Net(gru(features=F)),
    "rnn_tanh": lambda: Net(rnn(features=F)),
    "rnn_relu": lambda: Net(rnn(features=F, nonlinearity="relu")),
    "lstm_time_major": lambda: Net(lstm(features=F, batch_first=False)),
    "gru_time_major_last": lambda: Net(gru(features=F, batch_first=False), take="last"),
    "lstm_2_layers_last": lambda: Net(lstm(features=F, num_layers=2), take="last"),
    "lstm_3_layers": lambda: Net(lstm(features=F, num_layers=3)),
    "gru_3_layers_h_n": lambda: Net(gru(features=F, num_layers=3), take="h_n[-1]"),
    "rnn_2_layers_last": lambda: Net(rnn(features=F, num_layers=2, nonlinearity="relu"), take="last"),
    "lstm_h_n": lambda: Net(lstm(features=F), take="h_n"),
    "gru_slice_last": lambda: Net(gru(features=F), take="slice"),
    "linear_relu_lstm_linear": lambda: Net(lstm(), pre=linear(torch.nn.ReLU()), post=linear(None, 2, H), take="last"),
    "tanh_sigmoid": lambda: Net(gru(), pre=linear(torch.nn.Tanh()), post=linear(torch.nn.Sigmoid(), 4, H)),
    "leaky_relu_elu": lambda: Net(lstm(), pre=linear(torch.nn.LeakyReLU(0.2)), post=[torch.nn.ELU(0.7)],
                                  take="last"),
    "gelu_silu": lambda: Net(gru(), pre=linear(torch.nn.GELU()), post=linear(torch.nn.SiLU(), 4, H)),
    "gelu_tanh": lambda: Net(lstm(), pre=linear(torch.nn.GELU("tanh")), take="last"),
    "no_biases": lambda: Net(lstm(bias=False), pre=[torch.nn.Linear(F, H, bias=False)],
                             post=[torch.nn.Linear(H, 2, bias=False)], take="last"),
    "identity_dropout": lambda: Net(lstm(), pre=linear(torch.nn.Dropout(0.5)), post=[torch.nn.Identity()]),
    "relu6_softmax": lambda: Net(gru(), pre=linear(torch.nn.ReLU6()), post=linear(torch.nn.Softmax(-1), 4, H),
                                 take="h_n[-1]"),
    "stacked_time_major": lambda: Net(gru(batch_first=False, num_layers=2), pre=linear(torch.nn.ReLU()),
                                      post=linear(torch.nn.Tanh(), 3, H), take="last"),
}
# The dynamo exporter writes no ONNX RNN node for nn.RNN: it unrolls it (refused, see below).
DYNAMO_UNROLLS = {"rnn_tanh", "rnn_relu", "rnn_2_layers_last"}
EXPORTERS = ["torchscript", "dynamo"]


def export(module: Any, path: Path, exporter: str, steps: int = T, dynamic: bool = False,
           opset: int | None = None) -> Path:
    """``module`` (eval) to ``path`` as torch.onnx.export writes it for a (1, steps, F) input."""
    module.eval()
    x = torch.randn(1, steps, F) if module.batch_first else torch.randn(steps, 1, F)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            if exporter == "dynamo":
                torch.onnx.export(module, (x,), str(path), dynamo=True, verbose=False)
            else:
                axes = {"x": {0: "batch", 1: "steps"} if module.batch_first else {0: "steps", 1: "batch"}}
                torch.onnx.export(module, (x,), str(path), dynamo=False, input_names=["x"],
                                  dynamic_axes=axes if dynamic else None, opset_version=opset)
        finally:
            logging.disable(logging.NOTSET)
    return path


def torch_output(module: Any, x: np.ndarray) -> np.ndarray:
    """The module on (sequences, steps, F), in Keras' layout: batch first, unit axes dropped."""
    with torch.no_grad():
        feed = torch.from_numpy(x if module.batch_first else x.transpose(1, 0, 2).copy())
        y = module(feed).numpy()
    if module.take == "h_n":
        return y[0]
    if module.take == "slice":
        y = y[:, 0] if module.batch_first else y[0]
        return y
    if not module.batch_first and module.take == "seq":
        return y.transpose(1, 0, 2)
    return y


def relative(a: np.ndarray, b: np.ndarray) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))


def sequences(count: int = 3, steps: int = T, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((count, steps, F)).astype(np.float32)


def keras_output(source: Any, x: np.ndarray) -> np.ndarray:
    return np.asarray(source.model(x))


# the dynamo exporter unrolls nn.RNN: those files are refused (test_an_unrolled_cell_is_refused)
MAPPED = [(case, exporter) for case in CASES for exporter in EXPORTERS
          if not (exporter == "dynamo" and case in DYNAMO_UNROLLS)]


@pytest.mark.parametrize("case,exporter", MAPPED, ids=[f"{c}-{e}" for c, e in MAPPED])
def test_the_keras_model_computes_what_torch_and_the_file_compute(case, exporter, tmp_path):
    torch.manual_seed(0)
    module = CASES[case]()
    source = load_onnx(export(module, tmp_path / f"{case}.onnx", exporter))
    assert source.kind == "onnx" and source.name == f"{case}.onnx"
    x = sequences()
    expected = torch_output(module, x)
    got = keras_output(source, x)
    reference = source.reference(x)
    assert relative(got, expected) <= TOLERANCE
    assert relative(reference, expected) <= TOLERANCE
    assert relative(got, reference) <= TOLERANCE


@pytest.mark.parametrize("opset", [9, 14])
@pytest.mark.parametrize("case", ["gelu_silu", "gelu_tanh", "relu6_softmax", "stacked_time_major", "gru_slice_last"])
def test_older_opsets_of_the_torchscript_exporter(case, opset, tmp_path):
    """Before opset 20 GELU is written out (Div, Erf, Add, Mul, Mul; the tanh form in 9 nodes), Unsqueeze, Squeeze
    and Clip (and Slice before 10) take attributes where later opsets take inputs."""
    torch.manual_seed(0)
    module = CASES[case]()
    source = load_onnx(export(module, tmp_path / f"{case}.onnx", "torchscript", opset=opset))
    x = sequences()
    expected = torch_output(module, x)
    assert relative(keras_output(source, x), expected) <= TOLERANCE
    assert relative(source.reference(x), expected) <= TOLERANCE


EXPORT_OPTIONS = {
    "no_constant_folding": dict(dynamo=False, do_constant_folding=False),  # W, R, B computed by Slice/Concat
    "initializers_as_inputs": dict(dynamo=False, keep_initializers_as_inputs=True),
    "dynamo_unoptimized": dict(dynamo=True, optimize=False),
    "dynamo_one_file": dict(dynamo=True, external_data=False),
}


@pytest.mark.parametrize("options", list(EXPORT_OPTIONS))
@pytest.mark.parametrize("case", ["gru_3_layers_h_n", "stacked_time_major"])
def test_export_options(case, options, tmp_path):
    torch.manual_seed(0)
    module = CASES[case]().eval()
    x = torch.randn(1, T, F) if module.batch_first else torch.randn(T, 1, F)
    path = tmp_path / "options.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            torch.onnx.export(module, (x,), str(path), **EXPORT_OPTIONS[options])
        finally:
            logging.disable(logging.NOTSET)
    source = load_onnx(path)
    x = sequences()
    expected = torch_output(module, x)
    assert relative(keras_output(source, x), expected) <= TOLERANCE
    assert relative(source.reference(x), expected) <= TOLERANCE


@pytest.mark.parametrize("case", ["lstm", "gru_3_layers_h_n", "stacked_time_major", "gru_slice_last",
                                  "lstm_2_layers_last"])
def test_a_file_with_free_batch_and_steps_runs_at_any_length(case, tmp_path):
    torch.manual_seed(0)
    module = CASES[case]()
    source = load_onnx(export(module, tmp_path / "free.onnx", "torchscript", dynamic=True))
    x = sequences(count=2, steps=11)
    expected = torch_output(module, x)
    assert relative(keras_output(source, x), expected) <= TOLERANCE
    assert relative(source.reference(x), expected) <= TOLERANCE


def test_a_file_with_a_fixed_batch_of_two_runs_two_sequences_at_a_time(tmp_path):
    torch.manual_seed(0)
    module = CASES["gru_time_major_last"]().eval()
    path = tmp_path / "batch2.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.randn(T, 2, F),), str(path), dynamo=False)
    source = load_onnx(path)
    x = sequences(count=4)
    assert relative(source.reference(x), torch_output(module, x)) <= TOLERANCE
    assert relative(keras_output(source, x), torch_output(module, x)) <= TOLERANCE
    assert "batches of 2" in refusal(lambda: source.reference(sequences(count=3)))


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_a_gru_with_the_reset_gate_before_the_product_maps_onto_reset_after_false(exporter, tmp_path):
    """torch writes linear_before_reset=1; the ONNX default 0 is Keras' reset_after=False (against the file)."""
    torch.manual_seed(0)
    path = edited(export(CASES["gelu_silu"](), tmp_path / "gru.onnx", exporter),
                  set_attr("linear_before_reset", 0))
    source = load_onnx(path)
    gru_layer = next(layer for layer in source.model.layers if type(layer).__name__ == "GRU")
    assert gru_layer.reset_after is False
    x = sequences()
    assert relative(keras_output(source, x), source.reference(x)) <= TOLERANCE


@pytest.mark.parametrize("op, take", [("LSTM", "Y"), ("GRU", "Y_h"), ("RNN", "Y")])
def test_a_batch_first_rnn_node_layout_1(op, take, tmp_path):
    """No exporter of torch writes layout=1; an ONNX file may (built here by hand)."""
    h = onnx.helper
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    rng = np.random.default_rng(3)
    weights = {"W": (1, gates * H, F), "R": (1, gates * H, H), "B": (1, 2 * gates * H)}
    inits = [onnx.numpy_helper.from_array(rng.normal(0, 0.5, shape).astype(np.float32), name)
             for name, shape in weights.items()]
    inits.append(onnx.numpy_helper.from_array(np.array([2 if take == "Y" else 1], np.int64), "axes"))
    outputs = ["Y", "Y_h"]
    rnn_node = h.make_node(op, ["x", "W", "R", "B"], outputs, name="rnn", hidden_size=H, layout=1)
    squeeze = h.make_node("Squeeze", [take, "axes"], ["out"], name="squeeze")
    shape = [1, T, H] if take == "Y" else [1, H]
    graph = h.make_graph([rnn_node, squeeze], "g", [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, T, F])],
                         [h.make_tensor_value_info("out", onnx.TensorProto.FLOAT, shape)], inits)
    path = tmp_path / "layout1.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), str(path))
    source = load_onnx(path)
    x = sequences()
    got = keras_output(source, x)
    assert got.shape == ((3, T, H) if take == "Y" else (3, H))
    assert relative(got, source.reference(x)) <= TOLERANCE


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_the_reference_of_a_file_with_fixed_steps_refuses_other_lengths(exporter, tmp_path):
    torch.manual_seed(0)
    module = CASES["lstm_2_layers_last"]()
    source = load_onnx(export(module, tmp_path / "fixed.onnx", exporter))
    with pytest.raises(EdgeRNNError) as err:
        source.reference(sequences(steps=T + 4))
    assert "\n" not in str(err.value) and f"exported for {T} steps" in str(err.value)
    # the Keras model itself runs any length
    x = sequences(steps=T + 4)
    assert relative(keras_output(source, x), torch_output(module, x)) <= TOLERANCE


@pytest.mark.parametrize("case", ["linear_relu_lstm_linear", "gru_time_major_last"])
def test_converted_end_to_end_in_float32(case, tmp_path):
    import edgernn

    torch.manual_seed(0)
    source = load_onnx(export(CASES[case](), tmp_path / f"{case}.onnx", "dynamo"))
    calib = np.random.default_rng(2).standard_normal((4, 16, F)).astype(np.float32)
    manifest = edgernn.convert(source.model, tmp_path / "out", quant="float32", calib=calib)
    assert manifest["float_self_check_rel"] <= TOLERANCE


# ------------------------------------------------------------------------------------------------------------
# Refusals: one line each, naming what is refused.

def edited(path: Path, edit: Callable[[Any], None]) -> Path:
    """The ONNX file at ``path`` after ``edit(model)``, saved as one file beside it."""
    model = onnx.load(str(path))
    edit(model)
    out = path.with_name("edited.onnx")
    onnx.save(model, str(out))
    return out


def rnn_node(model: Any) -> Any:
    return next(n for n in model.graph.node if n.op_type in ("LSTM", "GRU", "RNN"))


def set_attr(name: str, value: Any) -> Callable[[Any], None]:
    def edit(model: Any) -> None:
        node = rnn_node(model)
        kept = [a for a in node.attribute if a.name != name]
        del node.attribute[:]
        node.attribute.extend(kept + [onnx.helper.make_attribute(name, value)])
    return edit


def set_input(index: int, array: np.ndarray) -> Callable[[Any], None]:
    def edit(model: Any) -> None:
        node = rnn_node(model)
        name = f"edited_input_{index}"
        model.graph.initializer.append(onnx.numpy_helper.from_array(array, name))
        while len(node.input) <= index:
            node.input.append("")
        node.input[index] = name
    return edit


def state_from_outside(model: Any) -> None:
    node = rnn_node(model)
    model.graph.input.append(onnx.helper.make_tensor_value_info("h0", onnx.TensorProto.FLOAT, [1, 1, H]))
    node.input[5] = "h0"


class WithState(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = lstm(features=F)
        self.batch_first = True
        self.register_buffer("h0", torch.full((1, 1, H), 0.5))

    def forward(self, x):
        return self.rnn(x, (self.h0, torch.zeros_like(self.h0)))[0]


class CellState(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = lstm(features=F)
        self.batch_first = True

    def forward(self, x):
        return self.rnn(x)[1][1][-1]


class Unrolled(torch.nn.Module):
    """An LSTMCell stepped through the sequence by a Python loop: unrolled by both exporters."""

    def __init__(self):
        super().__init__()
        self.cell = torch.nn.LSTMCell(F, H)
        self.batch_first = True

    def forward(self, x):
        h = torch.zeros(x.shape[0], H)
        c = torch.zeros(x.shape[0], H)
        for t in range(x.shape[1]):
            h, c = self.cell(x[:, t], (h, c))
        return h


class Abs(torch.nn.Module):
    def forward(self, x):
        return torch.abs(x)


class Half(torch.nn.Module):
    def forward(self, x):
        return x.half().float()


class Squared(torch.nn.Module):
    def forward(self, x):
        return x * x


class Residual(Net):
    def forward(self, x):
        y = self.pre(x)
        return self.rnn(y)[0] + y


class FirstStep(Net):
    def forward(self, x):
        return self.rnn(x)[0][:, 0, :]


class TwoOutputs(Net):
    def forward(self, x):
        out, h = self.rnn(x)
        return out, h


# name -> (module builder, exporter, edit or None, [what the message must say])
REFUSALS: dict[str, tuple] = {
    "bidirectional": (lambda: Net(lstm(features=F, bidirectional=True)), "torchscript", None,
                      ["LSTM", "bidirectional"]),
    "reverse": (lambda: Net(gru(features=F)), "torchscript", set_attr("direction", "reverse"), ["GRU", "reverse"]),
    "non_zero_state": (WithState, "torchscript", None, ["LSTM", "non-zero initial state"]),
    "state_fed_from_outside": (lambda: Net(gru(features=F)), "torchscript", state_from_outside,
                               ["2 inputs", "h0", "zero"]),
    "sequence_lens": (lambda: Net(lstm(features=F)), "torchscript", set_input(4, np.full([1], T, np.int32)),
                      ["LSTM", "sequence_lens"]),
    "peepholes": (lambda: Net(lstm(features=F)), "dynamo", set_input(7, np.ones((1, 3 * H), np.float32)),
                  ["LSTM", "peephole"]),
    "clip": (lambda: Net(lstm(features=F)), "torchscript", set_attr("clip", 3.0), ["LSTM", "clips"]),
    "input_forget": (lambda: Net(lstm(features=F)), "dynamo", set_attr("input_forget", 1), ["LSTM", "input_forget"]),
    "lstm_activations": (lambda: Net(lstm(features=F)), "torchscript",
                         set_attr("activations", ["Sigmoid", "Tanh", "Relu"]), ["LSTM", "activations", "relu"]),
    "rnn_activation": (lambda: Net(rnn(features=F)), "torchscript", set_attr("activations", ["Sigmoid"]),
                       ["RNN", "sigmoid"]),
    "unrolled_cell_torchscript": (Unrolled, "torchscript", None, ["Gemm", "reuses the weight", "unrolled",
                                                                  "export the nn.LSTM/GRU/RNN module itself"]),
    "unrolled_cell_dynamo": (Unrolled, "dynamo", None, ["reuses the weight", "unrolled", "edgernn.from_torch"]),
    "rnn_unrolled_by_dynamo": (lambda: Net(rnn(features=F)), "dynamo", None, ["MatMul", "unrolled",
                                                                              "edgernn.from_torch"]),
    "unsupported_op": (lambda: Net(lstm(), pre=linear(Abs())), "torchscript", None, ["(Abs)", "not supported"]),
    "unsupported_op_after_a_time_major_rnn": (lambda: Net(gru(features=F, batch_first=False), post=[Abs()]),
                                              "dynamo", None, ["(Abs)", "not supported"]),
    "unknown_elementwise_function": (lambda: Net(lstm(), pre=linear(Squared())), "torchscript", None,
                                     ["(Mul)", "element-wise function", "not an activation"]),
    "cast_to_half": (lambda: Net(lstm(), pre=linear(Half())), "torchscript", None, ["(Cast)", "FLOAT16"]),
    "residual": (lambda: Residual(lstm(), pre=linear()), "dynamo", None, ["(Add)", "two different tensors"]),
    "cell_state_output": (CellState, "dynamo", None, ["LSTM", "cell state"]),
    "first_step": (lambda: FirstStep(lstm(features=F)), "torchscript", None, ["(Gather)", "step 0"]),
    "all_layers_states": (lambda: Net(gru(features=F, num_layers=2), take="h_n"), "torchscript", None,
                          ["2 layers", "h_n[-1]"]),
    "two_outputs": (lambda: TwoOutputs(gru(features=F)), "torchscript", None, ["2 outputs"]),
}

# The op type of the node each refusal names (the others are about the graph's inputs or outputs).
NAMED_NODE = {
    "bidirectional": "LSTM", "reverse": "GRU", "non_zero_state": "LSTM", "sequence_lens": "LSTM",
    "peepholes": "LSTM", "clip": "LSTM", "input_forget": "LSTM", "lstm_activations": "LSTM", "rnn_activation": "RNN",
    "unrolled_cell_torchscript": "Gemm", "unrolled_cell_dynamo": "Gemm", "rnn_unrolled_by_dynamo": "MatMul",
    "unsupported_op": "Abs", "unsupported_op_after_a_time_major_rnn": "Abs", "unknown_elementwise_function": "Mul",
    "cast_to_half": "Cast", "residual": "Add", "cell_state_output": "LSTM", "first_step": "Gather",
}


def refusal(call: Callable[[], Any]) -> str:
    with pytest.raises(EdgeRNNError) as err:
        call()
    message = str(err.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refusals_are_one_line_naming_the_node_and_the_reason(case, tmp_path):
    build, exporter, edit, says = REFUSALS[case]
    torch.manual_seed(0)
    path = export(build(), tmp_path / "model.onnx", exporter)
    if edit is not None:
        path = edited(path, edit)
    message = refusal(lambda: load_onnx(path))
    assert message.startswith(f"{path.name}: ")
    for words in says:
        assert words in message, (words, message)
    if case in NAMED_NODE:
        op = NAMED_NODE[case]
        labels = [f"node '{n.name}' ({op})" for n in onnx.load(str(path)).graph.node if n.op_type == op]
        assert any(label in message for label in labels), (labels, message)


class FifthStep(Net):
    def forward(self, x):
        return self.rnn(x)[0][:, 4, :]


def test_a_fixed_step_of_a_file_of_free_length_is_not_taken_for_the_last(tmp_path):
    """Step 4 is the last of the probe's 5 steps, but of no other length."""
    torch.manual_seed(0)
    path = export(FifthStep(lstm(features=F)), tmp_path / "fifth.onnx", "torchscript", steps=5, dynamic=True)
    message = refusal(lambda: load_onnx(path))
    assert "(Gather) takes step 4" in message


def test_a_loop_node_is_refused_as_unrolled(tmp_path):
    h = onnx.helper
    body = h.make_graph([h.make_node("Identity", ["cond_in"], ["cond_out"]), h.make_node("Identity", ["v_in"],
                                                                                          ["v_out"])],
                        "body", [h.make_tensor_value_info("i", onnx.TensorProto.INT64, []),
                                 h.make_tensor_value_info("cond_in", onnx.TensorProto.BOOL, []),
                                 h.make_tensor_value_info("v_in", onnx.TensorProto.FLOAT, None)],
                        [h.make_tensor_value_info("cond_out", onnx.TensorProto.BOOL, []),
                         h.make_tensor_value_info("v_out", onnx.TensorProto.FLOAT, None)])
    loop = h.make_node("Loop", ["n", "", "x"], ["y"], name="steps", body=body)
    graph = h.make_graph([loop], "g", [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, T, F])],
                         [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, T, F])],
                         [onnx.numpy_helper.from_array(np.array(T, np.int64), "n")])
    path = tmp_path / "loop.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), str(path))
    message = refusal(lambda: load_onnx(path))
    assert "'steps' (Loop)" in message and "export the nn.LSTM/GRU/RNN module itself" in message


def test_a_missing_file_a_non_onnx_file_and_missing_external_data_are_one_line(tmp_path):
    assert "no such file" in refusal(lambda: load_onnx(tmp_path / "nowhere.onnx"))
    junk = tmp_path / "junk.onnx"
    junk.write_text("this is not a model\n" * 20)
    assert "junk.onnx is not an ONNX model" in refusal(lambda: load_onnx(junk))
    torch.manual_seed(0)
    module = CASES["lstm"]()
    path = export(module, tmp_path / "split.onnx", "torchscript")
    onnx.save(onnx.load(str(path)), str(path), save_as_external_data=True, location="split.onnx.data",
              size_threshold=0)
    assert relative(keras_output(load_onnx(path), sequences()), torch_output(module, sequences())) <= TOLERANCE
    (tmp_path / "split.onnx.data").unlink()
    message = refusal(lambda: load_onnx(path))
    assert "split.onnx.data" in message and "external data" in message


def test_without_onnxruntime_the_reference_is_the_onnx_reference_evaluator(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    torch.manual_seed(0)
    module = CASES["stacked_time_major"]()
    source = load_onnx(export(module, tmp_path / "m.onnx", "torchscript"))
    x = sequences()
    assert relative(source.reference(x), torch_output(module, x)) <= TOLERANCE


def test_without_the_onnx_package_the_message_says_how_to_install_it(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "onnx", None)
    assert "pip install 'edgernn[onnx]'" in refusal(lambda: load_onnx(tmp_path / "any.onnx"))


def error_table() -> None:
    """The table the tests hold to TOLERANCE, with the measured errors: python tests/pytorch/test_onnx.py"""
    import tempfile

    print(f"{'case':26} {'exporter':12} {'keras/torch':>12} {'file/torch':>12} {'keras/file':>12}")
    for case in CASES:
        for exporter in EXPORTERS:
            if exporter == "dynamo" and case in DYNAMO_UNROLLS:
                print(f"{case:26} {exporter:12} {'refused: the exporter unrolls nn.RNN':>38}")
                continue
            torch.manual_seed(0)
            module = CASES[case]()
            with tempfile.TemporaryDirectory() as folder:
                source = load_onnx(export(module, Path(folder) / f"{case}.onnx", exporter))
            x = sequences()
            expected, got, reference = torch_output(module, x), keras_output(source, x), source.reference(x)
            print(f"{case:26} {exporter:12} {relative(got, expected):12.2e} {relative(reference, expected):12.2e} "
                  f"{relative(got, reference):12.2e}")


if __name__ == "__main__":
    error_table()
