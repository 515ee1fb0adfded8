"""Models with no recurrent layer: how a per-frame CNN is planned as a stateless step model (its frame layers,
its branches), the float step model against Keras, and the refusals of what cannot be one, each in one line."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import require_module

from edgernn.errors import EdgeRNNError
from edgernn.keras.decompose import decompose
from edgernn.testing.frames_zoo import frame_cnn, moving_blobs

pytestmark = pytest.mark.slow

FRAME = (12, 12, 1)


# form: (timed, branched)
PLANS = {"sequential": (False, False), "functional": (False, False), "timedistributed": (True, False),
         "add": (False, True), "concatenate": (False, True)}


@pytest.mark.parametrize("form", PLANS)
def test_a_frame_cnn_is_a_stateless_plan(form):
    plan = decompose(frame_cnn(*FRAME, form=form), "keras")
    assert plan.stateless and plan.state_specs == [] and plan.head == []
    assert (plan.timed, plan.branched) == PLANS[form]
    assert plan.input_shape == FRAME and plan.head_per_step
    assert plan.pre[-1].shape_out == (3,)


@pytest.mark.parametrize("form", PLANS)
def test_the_float_step_model_is_the_keras_model_frame_by_frame(form):
    from edgernn.keras.reference import keras_reference
    from edgernn.keras.stepmodel import build_step_model
    from edgernn import tfenv

    model = frame_cnn(*FRAME, form=form)
    plan = decompose(model, "keras")
    step = build_step_model(plan, tfenv.keras3())
    assert step.state_names == [] and step.output_names == ["y"] and len(step.keras_model.inputs) == 1
    data = moving_blobs(2, 3, *FRAME, seed=2)
    want = keras_reference(model, data)
    got = np.stack([np.concatenate([np.asarray(step.keras_model(frame[None])) for frame in seq]) for seq in data])
    assert want.shape == got.shape == (2, 3, 3)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _concatenate_over_time(keras):
    L = keras.layers
    x = keras.Input((4, *FRAME))
    z = L.TimeDistributed(L.Conv2D(2, 3))(x)
    return keras.Model(x, L.Concatenate(axis=1, name="cat_time")([z, z]))


def _channels_first(keras):
    return keras.Sequential([keras.Input((1, 12, 12)), keras.layers.Conv2D(2, 3, data_format="channels_first",
                                                                           name="conv_cf")])


def _grouped(keras):
    return keras.Sequential([keras.Input((12, 12, 4)), keras.layers.Conv2D(4, 3, groups=2, name="conv_g")])


def _shared_layer(keras):
    L = keras.layers
    x = keras.Input(FRAME)
    conv = L.Conv2D(1, 3, padding="same", name="shared")
    return keras.Model(x, L.Add()([conv(x), conv(conv(x))]))


REFUSALS = [
    ("concatenate over time", _concatenate_over_time, ("'cat_time'", "concatenates along the time axis")),
    ("channels first", _channels_first, ("'conv_cf'", "channels_last")),
    ("grouped", _grouped, ("'conv_g'", "groups=2")),
]


@pytest.mark.parametrize("builder, needles", [pytest.param(*case[1:], id=case[0]) for case in REFUSALS])
def test_what_a_stateless_plan_cannot_hold_is_refused_in_one_line(builder, needles):
    import keras

    with pytest.raises(EdgeRNNError) as err:
        decompose(builder(keras), "keras")
    text = str(err.value)
    assert "\n" not in text
    for needle in needles:
        assert needle in text, text


def test_a_layer_called_twice_in_a_branching_graph_runs_twice_with_its_weights():
    """A shared convolution (called on the frame, then on its own output) is traced at each of its calls."""
    import keras

    from edgernn import tfenv
    from edgernn.keras.reference import keras_reference
    from edgernn.keras.stepmodel import build_step_model

    model = _shared_layer(keras)
    plan = decompose(model, "keras")
    assert plan.branched and plan.stateless
    step = build_step_model(plan, tfenv.keras3())
    data = moving_blobs(1, 2, *FRAME, seed=4)
    got = np.concatenate([np.asarray(step.keras_model(frame[None])) for frame in data[0]])
    np.testing.assert_allclose(got, keras_reference(model, data)[0], rtol=1e-5, atol=1e-6)


def test_fused_mode_is_refused_for_a_stateless_model():
    from edgernn.keras.fused_rebuild import diagnose

    plan = decompose(frame_cnn(*FRAME), "keras")
    assert diagnose(plan, "int8", "auto").fused is False
    with pytest.raises(EdgeRNNError, match="no LSTM; it is a stateless per-frame model") as err:
        diagnose(plan, "int8", "fused")
    assert "\n" not in str(err.value)


# torch's explicit padding as "same" with a kernel grown with zeros: (size, kernel, stride, pads) -> grown
SAME_KERNELS = [
    ((12, 12), (3, 3), (2, 2), ((1, 1), (1, 1)), ((4, 4), (0, 0))),   # torch's stride-2 padding 1 on even sizes
    ((13, 13), (3, 3), (2, 2), ((1, 1), (1, 1)), ((3, 3), (0, 0))),   # on odd sizes it is "same" itself
    ((12, 12), (5, 5), (2, 2), ((2, 2), (2, 2)), ((6, 6), (0, 0))),
    ((12, 12), (3, 3), (1, 1), ((2, 2), (2, 2)), None),              # a larger output than "same" gives
]


@pytest.mark.parametrize("size, kernel, strides, pads, grown", SAME_KERNELS)
def test_an_explicit_padding_becomes_same_with_a_grown_kernel(size, kernel, strides, pads, grown):
    from edgernn.pytorch.onnx_frames import _same_kernel

    assert _same_kernel(size, kernel, strides, pads) == grown


def test_an_onnx_node_edgernn_does_not_map_is_refused_in_one_line(tmp_path):
    require_module("torch")
    import torch

    from edgernn.pytorch.load import load_any

    class Dilated(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(1, 2, 3, dilation=2)
            self.fc = torch.nn.Linear(2 * 8 * 8, 2)

        def forward(self, x):
            return self.fc(torch.flatten(self.conv(x), 1))

    path = tmp_path / "dilated.onnx"
    torch.onnx.export(Dilated().eval(), torch.zeros(1, 1, 12, 12), str(path), dynamo=False)
    with pytest.raises(EdgeRNNError, match=r"dilated.onnx: node .*\(Conv\) dilates \[2, 2\]") as err:
        load_any(path)
    assert "\n" not in str(err.value)


def test_a_torch_cnn_module_is_refused_with_the_way_to_its_onnx_export():
    """A module does not say its frame size; its ONNX export does."""
    torch = require_module("torch")

    from edgernn.pytorch.module import from_torch

    module = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.Flatten(), torch.nn.Linear(200, 2))
    with pytest.raises(EdgeRNNError, match=r"Sequential is a per-frame CNN .*torch.onnx.export") as err:
        from_torch(module)
    assert "\n" not in str(err.value)


def test_a_recurrent_model_whose_front_end_branches_keeps_its_branches():
    """The front end up to the first recurrent layer is traced through the model's graph; the rest is a chain. Its
    LSTM is not fused: the fused model is rebuilt in tf_keras as a chain."""
    from edgernn.keras.fused_rebuild import diagnose
    from edgernn.testing.frames_zoo import frame_res_gru

    plan = decompose(frame_res_gru(*FRAME), "keras")
    assert plan.branched and not plan.stateless and [r.kind for r in plan.recurrent] == ["GRU"]
    assert plan.state_specs[0][1] == 6
    lstm = decompose(frame_res_gru(*FRAME, rnn="LSTM"), "keras")
    paths = diagnose(lstm, "int8", "auto").paths
    assert [p.path for p in paths] == ["step"] and "front end branches" in paths[0].why


def test_a_branch_after_the_first_recurrent_layer_is_refused_in_one_line():
    import keras

    L = keras.layers
    x = keras.Input((None, 3))
    z = L.GRU(4, return_sequences=True)(x)
    y = L.Add(name="skip")([z, L.Dense(4)(z)])
    with pytest.raises(EdgeRNNError, match="the graph branches at layer .*after the first recurrent layer") as err:
        decompose(keras.Model(x, y), "keras")
    assert "\n" not in str(err.value)
