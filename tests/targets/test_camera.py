"""The camera application's preprocessing, planned at build time and twinned on the host (edgernn.targets.camera):
the defaults, the options and their refusals, the exact reciprocal the device divides by, and the twin's bytes
against a plain per-pixel computation."""

from __future__ import annotations

import numpy as np
import pytest

from edgernn.errors import EdgeRNNError
from edgernn.targets import camera


@pytest.mark.parametrize("shape, factor, crop", [
    ((30, 40, 1), 8, (0, 0)),          # the largest factor: 244 // 30 = 8, 324 // 40 = 8; the window fills it
    ((200, 200, 1), 1, (62, 22)),      # no reduction, centred in 324 x 244
    ((64, 64, 1), 3, (22, 8)),         # reduced to 108 x 81, centred
    ((244, 324), 1, (0, 0)),           # the whole frame, (H, W) without a channel
    ((10, 100, 1), 3, (4, 35)),        # the width limits the factor: 324 // 100 = 3; 108 x 81 reduced
])
def test_default_plan_is_the_largest_factor_and_a_centred_window(shape, factor, crop):
    pre = camera.plan_preprocess(shape)
    assert (pre.factor, (pre.crop_x, pre.crop_y)) == (factor, crop)
    assert (pre.scale, pre.offset) == (1 / 255, 0.0)
    x0, y0 = pre.origin
    assert y0 + pre.height * pre.factor <= camera.SENSOR_HEIGHT and x0 + pre.width * pre.factor <= camera.SENSOR_WIDTH


@pytest.mark.parametrize("shape, options, message", [
    ((30, 40, 3), {}, "gray image"),
    ((8,), {}, "gray image"),
    ((300, 10, 1), {}, "larger than the camera's frame"),
    ((30, 40, 1), {"factor": 9}, "factors that fit: 1 to 8"),
    ((30, 40, 1), {"factor": 0}, "factors that fit"),
    ((64, 64, 1), {"factor": 3, "crop": (45, 0)}, "x goes 0..44"),
    ((64, 64, 1), {"factor": 3, "crop": (0, -1)}, "leaves the reduced frame"),
    ((64, 64, 1), {"scale": 0.0}, "nonzero"),
    ((64, 64, 1), {"offset": float("nan")}, "finite"),
])
def test_options_that_do_not_fit_are_refused_in_one_line(shape, options, message):
    with pytest.raises(EdgeRNNError, match=message) as caught:
        camera.plan_preprocess(shape, **options)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("factor", [1, 2, 3, 5, 7, 8, 12, 16])
def test_the_reciprocal_equals_the_division_for_every_block_sum(factor):
    mul, shift = camera.mean_reciprocal(factor)
    area = factor * factor
    sums = np.arange(255 * area + area // 2 + 1, dtype=np.uint64)
    assert np.array_equal((sums * np.uint64(mul)) >> np.uint64(shift), sums // np.uint64(area))
    assert int(sums[-1]) * mul < 1 << 32         # the device's product is 32-bit


def _plain_means(frame: np.ndarray, pre: camera.Preprocess) -> np.ndarray:
    f = pre.factor
    x0, y0 = pre.origin
    out = np.zeros((pre.height, pre.width), np.uint8)
    for oy in range(pre.height):
        for ox in range(pre.width):
            block = frame[y0 + oy * f:y0 + (oy + 1) * f, x0 + ox * f:x0 + (ox + 1) * f]
            out[oy, ox] = (int(block.sum()) + f * f // 2) // (f * f)
    return out


@pytest.mark.parametrize("shape, options", [
    ((16, 20, 1), {}),
    ((16, 20, 1), {"factor": 3, "crop": (5, 2)}),
    ((24, 24, 1), {"factor": 1, "crop": (0, 219)}),
])
def test_the_twin_is_the_block_mean_of_the_window(shape, options):
    rng = np.random.default_rng(4)
    frames = rng.integers(0, 256, size=(2, 3, *camera.SENSOR), dtype=np.uint8)
    pre = camera.plan_preprocess(shape, **options)
    means = camera.block_means(frames, pre)
    assert means.shape == (2, 3, pre.height, pre.width)
    assert np.array_equal(means[1, 2], _plain_means(frames[1, 2], pre))


@pytest.mark.parametrize("entry", [
    {"dtype": "int8", "scale": 0.0392, "zero_point": -1},
    {"dtype": "int8", "scale": 0.001, "zero_point": 5},        # saturates: most pixels clip at 127
    {"dtype": "int16", "scale": 3.1e-5, "zero_point": 0},
    {"dtype": "float32"},
])
def test_the_table_is_the_model_input_of_pixel_times_scale_plus_offset(entry):
    from edgernn.tflite.oracle import quantize

    pre = camera.plan_preprocess((16, 20, 1), scale=2 / 255, offset=-1.0)
    table = camera.input_table(pre, entry)
    assert table.shape == (256,) and table.dtype == camera.TABLE_DTYPES[entry["dtype"]]
    want = quantize(np.arange(256) * (2 / 255) - 1.0, entry)
    assert np.array_equal(table, want)
    frames = np.random.default_rng(1).integers(0, 256, size=(1, 2, *camera.SENSOR), dtype=np.uint8)
    assert np.array_equal(camera.model_inputs(frames, pre, entry)[..., 0], table[camera.block_means(frames, pre)])


@pytest.mark.parametrize("frames, message", [
    (np.zeros((2, 244, 324), np.uint8), "sequences, frames, 244, 324"),
    (np.zeros((1, 2, 244, 324), np.float32), "uint8"),
    (np.zeros((1, 2, 240, 320), np.uint8), "244, 324"),
    (np.zeros((1, 0, 244, 324), np.uint8), "holds no frame"),
])
def test_frames_of_another_shape_or_type_are_refused(frames, message):
    with pytest.raises(EdgeRNNError, match=message):
        camera.check_frames(frames)


def test_frames_with_a_channel_of_one_are_the_same_frames():
    frames = np.random.default_rng(2).integers(0, 256, size=(1, 2, 244, 324), dtype=np.uint8)
    assert np.array_equal(camera.check_frames(frames[..., None]), frames)


def test_a_manifest_record_that_leaves_the_frame_is_refused():
    pre = camera.plan_preprocess((30, 40, 1))
    assert camera.Preprocess.from_dict(pre.as_dict()) == pre
    with pytest.raises(EdgeRNNError, match="leaves the camera's frame"):
        camera.Preprocess.from_dict({**pre.as_dict(), "crop_x": 1})
    with pytest.raises(EdgeRNNError, match="incomplete"):
        camera.Preprocess.from_dict({"height": 3})
