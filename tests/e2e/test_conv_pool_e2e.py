"""A CONV_2D whose output only a MAX_POOL_2D reads, of 16 KiB or more, runs fused (edgernn_conv_max_pool_s8,
edgernn/backend/conv_pool.py): built for host at int8 and validated frame by frame, every output byte equal to the
interpreter's, with an arena smaller than the convolution's output (which never exists whole). The stems differ in
kernel, stride, padding and activation, the pools in window, stride and padding, so that the bands' halos, a row two
bands share and the frame's last rows are all met."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.toolchain]

# (frame, conv: filters, kernel, stride, padding, activation; pool: window, stride, padding)
CASES = [
    ((64, 64, 1), (16, 5, 2, "same", None), (3, 2, "same")),        # PULP-Dronet's stem, smaller
    ((48, 40, 2), (12, 3, 1, "same", "relu"), (2, 2, "valid")),
    ((45, 45, 1), (16, 3, 1, "valid", "relu"), (3, 3, "same")),     # 43 rows: the last band short
]


def _model(frame, conv, pool):
    import keras

    keras.utils.set_random_seed(0)
    L = keras.layers
    filters, kernel, stride, padding, activation = conv
    window, pool_stride, pool_padding = pool
    return keras.Sequential([keras.Input(frame),
                             L.Conv2D(filters, kernel, strides=stride, padding=padding, activation=activation),
                             L.MaxPooling2D(window, strides=pool_stride, padding=pool_padding),
                             L.Conv2D(8, 3, strides=2, padding="same", activation="relu"),
                             L.Flatten(), L.Dense(3)])


@pytest.mark.parametrize("frame,conv,pool", CASES, ids=["dronet_stem", "relu_valid_pool", "short_last_band"])
def test_a_convolution_fused_with_its_max_pool_gives_the_interpreters_bytes(tmp_path, frame, conv, pool):
    from conftest import require_tools
    from edgernn.pipeline.build import build_model
    from edgernn.testing.frames_zoo import moving_blobs
    from edgernn.validate.run import validate

    require_tools("gcc")
    model = _model(frame, conv, pool)
    path = tmp_path / "stem.keras"
    model.save(path)
    out = tmp_path / "out"
    result = build_model(str(path), out, board="host", quant="int8", calib=moving_blobs(2, 3, *frame, seed=1))
    assert "conv_max_pool_s8(" in (out / "firmware" / "model.c").read_text()
    conv_output = int(model.layers[0].output.shape[1] * model.layers[0].output.shape[2] * conv[0])
    assert result["manifest"]["arena_bytes"] < conv_output
    report = validate(out, data=moving_blobs(1, 2, *frame, seed=3), json_path=tmp_path / "report.json")
    ref = report["reference"]
    assert ref["mismatches"] == 0, ref
    assert report["pass"] and report["steps"] == 2
